//! fallocate's modes beyond plain allocation: `FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE`
//! (pages freed, partial pages zeroed, the size kept, `SEEK_DATA`/`SEEK_HOLE` and
//! `st_blocks` following) and the modes tmpfs refuses, with `vfs_fallocate`'s error order.

use crate::script::Script;
use libc::*;

const PUNCH: i32 = FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE;

pub(super) fn cases(v: &mut Vec<Script>) {
    // Five pages of data; punch a range that cuts into pages 0 and 1, then a whole page.
    let mut s = Script::new("io/fallocate-punch-hole/frees-and-zeroes");
    let f = s.open("f", O_CREAT | O_RDWR, 0o644);
    s.write(f, vec![b'a'; 20000])
        .blocks(f)
        .fallocate(f, PUNCH, 100, 5000)
        .blocks(f)
        .pread(f, 8, 96)
        .pread(f, 8, 5096)
        .fallocate(f, PUNCH, 4096, 4096)
        .blocks(f)
        .fstat(f)
        .pread(f, 8, 8188);
    v.push(s);

    // SEEK_DATA/SEEK_HOLE see the holes (their own case: through FUSE, polyfuse has no
    // FUSE_LSEEK, so only these steps differ there).
    let mut s = Script::new("io/seek-data-hole/after-punch");
    let f = s.open("f", O_CREAT | O_RDWR, 0o644);
    s.write(f, vec![b'a'; 20000])
        .fallocate(f, PUNCH, 100, 5000)
        .lseek(f, 0, SEEK_DATA)
        .lseek(f, 0, SEEK_HOLE)
        .fallocate(f, PUNCH, 4096, 4096)
        .lseek(f, 0, SEEK_HOLE)
        .lseek(f, 4096, SEEK_DATA)
        .lseek(f, 8192, SEEK_HOLE)
        .fallocate(f, PUNCH, 16384, 4096)
        .lseek(f, 9000, SEEK_HOLE)
        .lseek(f, 16384, SEEK_DATA)
        .lseek(f, 19999, SEEK_DATA)
        .fallocate(f, PUNCH, 0, 100000)
        .lseek(f, 0, SEEK_DATA)
        .lseek(f, 0, SEEK_HOLE)
        .lseek(f, 19999, SEEK_HOLE);
    v.push(s);

    // Punching everything leaves no data; past the end it does nothing; the size stays.
    let mut s = Script::new("io/fallocate-punch-hole/whole-file-and-past-eof");
    let f = s.open("f", O_CREAT | O_RDWR, 0o644);
    s.write(f, vec![b'b'; 10000])
        .fallocate(f, PUNCH, 1 << 30, 4096)
        .blocks(f)
        .fstat(f)
        .fallocate(f, PUNCH, 0, 100000)
        .blocks(f)
        .fstat(f)
        .pread(f, 4, 9000)
        .fallocate(f, PUNCH, 0, i64::MAX)
        .fstat(f);
    v.push(s);

    // Within one page, up to a page's end, from a page's start: only bytes are zeroed.
    let mut s = Script::new("io/fallocate-punch-hole/partial-pages");
    let f = s.open("f", O_CREAT | O_RDWR, 0o644);
    s.write(f, vec![b'c'; 3 * 4096])
        .fallocate(f, PUNCH, 10, 10)
        .fallocate(f, PUNCH, 4000, 96)
        .fallocate(f, PUNCH, 8192, 100)
        .blocks(f)
        .pread(f, 16, 8)
        .pread(f, 8, 3996)
        .pread(f, 8, 8188)
        .pread(f, 8, 8290)
        .lseek(f, 0, SEEK_HOLE);
    v.push(s);

    // Writing into a punched hole allocates again; pages allocated but never written
    // (fallocate past the end with KEEP_SIZE) are freed too.
    let mut s = Script::new("io/fallocate-punch-hole/write-again-and-unwritten");
    let f = s.open("f", O_CREAT | O_RDWR, 0o644);
    s.write(f, vec![b'd'; 8192])
        .fallocate(f, FALLOC_FL_KEEP_SIZE, 8192, 8192)
        .blocks(f)
        .fallocate(f, PUNCH, 4096, 8192)
        .blocks(f)
        .pwrite(f, "new", 5000)
        .blocks(f)
        .lseek(f, 4096, SEEK_DATA)
        .pread(f, 8, 4998)
        .fstat(f);
    v.push(s);

    // A punch changes mtime and ctime, even where there was nothing to free.
    let mut s = Script::new("io/fallocate-punch-hole/times");
    s.file("f", 0o644, "abc");
    let f = s.open("f", O_RDWR, 0);
    s.snap("f")
        .fallocate(f, PUNCH, 1 << 20, 10)
        .times_since("f")
        .snap("f")
        .fallocate(f, PUNCH, 0, 1)
        .times_since("f")
        .contents("f");
    v.push(s);

    // Through an O_APPEND descriptor a punch is allowed (only the append-only inode flag
    // forbids it); as an unprivileged owner too.
    let mut s = Script::new("io/fallocate-punch-hole/append-fd-and-user");
    s.file("f", 0o666, "0123456789");
    let a = s.open("f", O_WRONLY | O_APPEND, 0);
    s.fallocate(a, PUNCH, 2, 3)
        .contents("f")
        .become_user(1000, 1000);
    let w = s.open("f", O_WRONLY, 0);
    let r = s.open("f", O_RDONLY, 0);
    s.fallocate(w, PUNCH, 0, 1)
        .fallocate(r, PUNCH, 0, 1)
        .contents("f");
    v.push(s);

    // Every mode word: tmpfs takes 0, KEEP_SIZE and PUNCH_HOLE|KEEP_SIZE; other valid
    // modes are EOPNOTSUPP from shmem, invalid ones EOPNOTSUPP from vfs_fallocate before
    // the descriptor is looked at; the range checks come first of all.
    let mut s = Script::new("io/fallocate-punch-hole/modes-and-errors");
    s.file("f", 0o644, "abc").mkdir("d", 0o755);
    let w = s.open("f", O_RDWR, 0);
    let r = s.open("f", O_RDONLY, 0);
    let d = s.open("d", O_RDONLY | O_DIRECTORY, 0);
    for mode in [
        FALLOC_FL_PUNCH_HOLE,
        FALLOC_FL_ZERO_RANGE,
        FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE,
        FALLOC_FL_COLLAPSE_RANGE,
        FALLOC_FL_INSERT_RANGE,
        FALLOC_FL_UNSHARE_RANGE,
        FALLOC_FL_UNSHARE_RANGE | FALLOC_FL_KEEP_SIZE,
        0x80,
        0x100,
        PUNCH | FALLOC_FL_ZERO_RANGE,
    ] {
        s.fallocate(w, mode, 0, 10).fallocate(r, mode, 0, 10);
    }
    s.fallocate(w, PUNCH, 0, 0)
        .fallocate(w, PUNCH, -1, 10)
        .fallocate(w, PUNCH, i64::MAX, 10)
        .fallocate(w, PUNCH, i64::MAX - 4095, 4096)
        .fallocate(r, PUNCH, 0, 10)
        .fallocate(d, PUNCH, 0, 10)
        .fallocate(crate::Fd::Raw(-1), PUNCH, 0, 1)
        .fallocate(w, FALLOC_FL_ZERO_RANGE, i64::MAX, 10)
        .stat("f")
        .contents("f");
    v.push(s);
}
