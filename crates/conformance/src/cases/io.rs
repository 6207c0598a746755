//! read, write, pread64, pwrite64, readv, writev, preadv, pwritev, copy_file_range, lseek
//! (incl. SEEK_DATA/SEEK_HOLE),
//! truncate, ftruncate, fallocate, fsync, fdatasync.

use crate::op::Fd;
use crate::script::Script;
use libc::*;

fn rw(name: &str) -> (Script, crate::Slot) {
    let mut s = Script::new(format!("io/{name}"));
    let f = s.open("f", O_CREAT | O_RDWR, 0o644);
    (s, f)
}

pub(super) fn cases(v: &mut Vec<Script>) {
    copy_file_range(v);
    let (mut s, f) = rw("write-then-read");
    s.write(f, "hello")
        .lseek(f, 0, SEEK_SET)
        .read(f, 100)
        .read(f, 100)
        .fstat(f);
    v.push(s);
    let (mut s, f) = rw("zero-length");
    s.write(f, "").read(f, 0).pwrite(f, "", 10).fstat(f);
    v.push(s);
    let (mut s, f) = rw("overwrite-middle");
    s.write(f, "abcdefgh")
        .pwrite(f, "XY", 3)
        .pread(f, 20, 0)
        .fstat(f);
    v.push(s);
    let (mut s, f) = rw("pread-pwrite-keep-offset");
    s.write(f, "abc")
        .pwrite(f, "Z", 0)
        .pread(f, 2, 1)
        .lseek(f, 0, SEEK_CUR);
    v.push(s);
    let (mut s, f) = rw("pread-past-eof");
    s.write(f, "abc").pread(f, 10, 3).pread(f, 10, 100);
    v.push(s);
    let (mut s, f) = rw("pread-pwrite-negative-offset");
    s.pread(f, 1, -1).pwrite(f, "x", -1);
    v.push(s);
    let (mut s, f) = rw("write-past-eof-makes-hole");
    s.lseek(f, 10, SEEK_SET)
        .write(f, "end")
        .pread(f, 20, 0)
        .fstat(f);
    v.push(s);
    let (mut s, f) = rw("pwrite-far-hole");
    s.pwrite(f, "far", 1 << 20)
        .fstat(f)
        .pread(f, 8, (1 << 20) - 5)
        .pread(f, 4, 4096);
    v.push(s);
    let (mut s, f) = rw("preadv-pwritev-keep-offset");
    s.write(f, "abc")
        .pwritev(f, &["XY", "", "Z"], 5)
        .preadv(f, &[2, 0, 3, 10], 0)
        .preadv(f, &[4, 4], 6)
        .preadv(f, &[1], 100)
        .preadv(f, &[], 0)
        .pwritev(f, &[], 0)
        .pwritev(f, &["", ""], 1 << 20)
        .lseek(f, 0, SEEK_CUR)
        .fstat(f);
    v.push(s);
    let (mut s, f) = rw("preadv-pwritev-negative-offset");
    s.preadv(f, &[1], -1).pwritev(f, &["x"], -1).fstat(f);
    v.push(s);
    // An empty write moves no position, not even on an O_APPEND file; the range is
    // checked at the position before O_APPEND moves it (so a write at a position near the
    // largest offset fails, however small the file), and so is pwrite's.
    let mut s = Script::new("io/append-empty-and-overflowing-writes");
    let f = s.open("f", O_CREAT | O_RDWR | O_APPEND, 0o644);
    s.pwrite(f, "xx", 0)
        .write(f, "")
        .lseek(f, 0, SEEK_CUR)
        .writev(f, &["", ""])
        .lseek(f, 0, SEEK_CUR)
        .lseek(f, i64::MAX - 1, SEEK_SET)
        .write(f, "abcd")
        .write(f, "")
        .lseek(f, 0, SEEK_CUR)
        .pwrite(f, "abcd", i64::MAX - 1)
        .lseek(f, 5, SEEK_SET)
        .write(f, "q")
        .lseek(f, 0, SEEK_CUR)
        .pread(f, 10, 0);
    v.push(s);
    // Linux's pwritev on an O_APPEND file appends, whatever the offset.
    let mut s = Script::new("io/pwritev-append");
    let f = s.open("f", O_CREAT | O_RDWR | O_APPEND, 0o644);
    s.write(f, "abc")
        .pwritev(f, &["d", "e"], 0)
        .pwrite(f, "f", 1)
        .pread(f, 10, 0)
        .lseek(f, 0, SEEK_CUR);
    v.push(s);
    let mut s = Script::new("io/preadv-pwritev-wrong-mode-and-dir");
    s.file("f", 0o644, "abc").mkdir("d", 0o755);
    let r = s.open("f", O_RDONLY, 0);
    let w = s.open("f", O_WRONLY, 0);
    let d = s.open("d", O_RDONLY | O_DIRECTORY, 0);
    s.pwritev(r, &["x"], 0)
        .preadv(w, &[1], 0)
        .preadv(d, &[1], 0)
        .preadv(d, &[1], -1)
        .pread(d, 1, 0)
        .pread(d, 1, -1)
        .pwritev(d, &["x"], 0)
        .preadv(w, &[], 0)
        .pwritev(r, &[], 0);
    v.push(s);
    let (mut s, f) = rw("readv-writev");
    s.writev(f, &["ab", "", "cde", "f"])
        .lseek(f, 0, SEEK_SET)
        .readv(f, &[2, 0, 3, 10])
        .readv(f, &[4])
        .writev(f, &[])
        .fstat(f);
    v.push(s);
    let (mut s, f) = rw("readv-short-file");
    s.write(f, "xyz")
        .lseek(f, 1, SEEK_SET)
        .readv(f, &[1, 1, 1, 1]);
    v.push(s);

    let mut s = Script::new("io/read-on-wronly");
    s.file("f", 0o644, "data");
    let f = s.open("f", O_WRONLY, 0);
    s.read(f, 4).pread(f, 4, 0).readv(f, &[4]);
    v.push(s);
    let mut s = Script::new("io/write-on-rdonly");
    s.file("f", 0o644, "data");
    let f = s.open("f", O_RDONLY, 0);
    s.write(f, "x")
        .pwrite(f, "x", 0)
        .writev(f, &["x"])
        .contents("f");
    v.push(s);
    let mut s = Script::new("io/read-dir-fd");
    s.mkdir("d", 0o755);
    let d = s.open("d", O_RDONLY | O_DIRECTORY, 0);
    s.read(d, 10).pread(d, 10, 0).write(d, "x");
    v.push(s);
    let mut s = Script::new("io/bad-fds");
    s.read(crate::Fd::Raw(-1), 1)
        .write(crate::Fd::Raw(57), "x")
        .pread(crate::Fd::Raw(3), 1, 0)
        .lseek(crate::Fd::Raw(9), 0, SEEK_SET)
        .fstat(crate::Fd::Raw(-1))
        .close(crate::Fd::Raw(12))
        .fsync(crate::Fd::Raw(-5));
    v.push(s);

    // lseek.
    let (mut s, f) = rw("lseek-whences");
    s.write(f, "0123456789")
        .lseek(f, 3, SEEK_SET)
        .lseek(f, 2, SEEK_CUR)
        .lseek(f, -1, SEEK_CUR)
        .lseek(f, -3, SEEK_END)
        .lseek(f, 5, SEEK_END)
        .read(f, 1)
        .lseek(f, 0, SEEK_CUR);
    v.push(s);
    let (mut s, f) = rw("lseek-errors");
    s.write(f, "abc")
        .lseek(f, -1, SEEK_SET)
        .lseek(f, -10, SEEK_END)
        .lseek(f, 0, 7)
        .lseek(f, -4, SEEK_CUR)
        .lseek(f, 0, SEEK_CUR);
    v.push(s);
    let (mut s, f) = rw("lseek-huge-offset");
    s.lseek(f, i64::MAX, SEEK_SET)
        .lseek(f, 1, SEEK_CUR)
        .lseek(f, 0, SEEK_CUR);
    v.push(s);
    let mut s = Script::new("io/lseek-dir");
    s.mkdir("d", 0o755).file("d/a", 0o644, "");
    let d = s.open("d", O_RDONLY | O_DIRECTORY, 0);
    s.getdents(d)
        .getdents(d)
        .lseek(d, 0, SEEK_SET)
        .getdents(d)
        .lseek(d, -1, SEEK_SET);
    v.push(s);
    // SEEK_DATA / SEEK_HOLE on sparse files (tmpfs tracks data per page).
    for (name, writes, size, probes) in sparse_layouts() {
        let mut s = Script::new(format!("io/seek-data-hole/{name}"));
        let f = s.open("f", O_CREAT | O_RDWR, 0o644);
        for &(off, len) in writes {
            s.pwrite(f, vec![b'd'; len], off);
        }
        if let Some(size) = size {
            s.ftruncate(f, size);
        }
        s.fstat(f);
        for &p in probes {
            s.lseek(f, p, SEEK_DATA).lseek(f, p, SEEK_HOLE);
        }
        v.push(s);
    }

    // truncate / ftruncate / fallocate.
    let mut s = Script::new("io/truncate-grow-shrink");
    s.file("f", 0o644, "0123456789");
    s.truncate("f", 4)
        .contents("f")
        .truncate("f", 8)
        .contents("f")
        .stat("f");
    v.push(s);
    let mut s = Script::new("io/truncate-errors");
    s.mkdir("d", 0o755).file("f", 0o644, "");
    s.truncate("d", 0)
        .truncate("missing", 0)
        .truncate("f", -1)
        .truncate("", 0)
        .truncate("f/x", 0)
        // A negative length before the walk.
        .truncate("missing", -1)
        .truncate("d", -1)
        .truncate("", -1);
    v.push(s);
    let mut s = Script::new("io/truncate-follows-symlink");
    s.file("f", 0o644, "abcdef")
        .symlink("f", "l")
        .truncate("l", 2)
        .stat("f")
        .lstat("l");
    v.push(s);
    let (mut s, f) = rw("ftruncate-then-read");
    s.write(f, "abcdef")
        .ftruncate(f, 2)
        .lseek(f, 0, SEEK_CUR)
        .pread(f, 10, 0)
        .ftruncate(f, 5)
        .pread(f, 10, 0)
        .write(f, "Z")
        .pread(f, 10, 0);
    v.push(s);
    let mut s = Script::new("io/ftruncate-errors");
    s.file("f", 0o644, "abc").mkdir("d", 0o755);
    let r = s.open("f", O_RDONLY, 0);
    let w = s.open("f", O_WRONLY, 0);
    let d = s.open("d", O_RDONLY, 0);
    let p = s.open("f", O_PATH, 0);
    s.ftruncate(r, 0)
        .ftruncate(w, -1)
        .ftruncate(d, 0)
        .ftruncate(p, 0)
        .ftruncate(crate::Fd::Raw(-1), 0)
        .stat("f");
    v.push(s);
    let mut s = Script::new("io/ftruncate-append-fd");
    s.file("f", 0o644, "abcdef");
    let f = s.open("f", O_WRONLY | O_APPEND, 0);
    s.ftruncate(f, 1).write(f, "Z").contents("f");
    v.push(s);
    let (mut s, f) = rw("fallocate-extends");
    s.write(f, "ab")
        .fallocate(f, 0, 0, 100)
        .fstat(f)
        .fallocate(f, 0, 10, 5)
        .fstat(f)
        .pread(f, 4, 0)
        .fallocate(f, 0, 4096, 8192)
        .fstat(f);
    v.push(s);
    let mut s = Script::new("io/fallocate-errors");
    s.file("f", 0o644, "abc").mkdir("d", 0o755);
    let r = s.open("f", O_RDONLY, 0);
    let w = s.open("f", O_WRONLY, 0);
    let d = s.open("d", O_RDONLY, 0);
    s.fallocate(r, 0, 0, 10)
        .fallocate(w, 0, 0, 0)
        .fallocate(w, 0, -1, 10)
        .fallocate(w, 0, 0, -1)
        .fallocate(d, 0, 0, 10)
        .fallocate(crate::Fd::Raw(-1), 0, 0, 1)
        .stat("f");
    v.push(s);
    let (mut s, f) = rw("fallocate-then-seek-data");
    s.fallocate(f, 0, 0, 8192)
        .lseek(f, 0, SEEK_DATA)
        .lseek(f, 0, SEEK_HOLE)
        .pread(f, 4, 100);
    v.push(s);

    // fsync / fdatasync.
    let mut s = Script::new("io/fsync-kinds");
    s.file("f", 0o644, "x").mkdir("d", 0o755);
    let f = s.open("f", O_RDONLY, 0);
    let d = s.open("d", O_RDONLY | O_DIRECTORY, 0);
    let p = s.open("f", O_PATH, 0);
    s.fsync(f)
        .fdatasync(f)
        .fsync(d)
        .fdatasync(d)
        .fsync(p)
        .fdatasync(p)
        .fdatasync(crate::Fd::Raw(-1));
    v.push(s);

    // Offsets and data shared through dup, not through separate opens.
    let (mut s, f) = rw("dup-shares-offset");
    let g = s.dup(f);
    s.write(f, "abc")
        .lseek(g, 0, SEEK_CUR)
        .write(g, "de")
        .pread(f, 10, 0);
    v.push(s);
    let (mut s, f) = rw("unlinked-file-still-readable");
    s.write(f, "ghost")
        .unlink("f")
        .fstat(f)
        .pread(f, 10, 0)
        .write(f, "!")
        .fstat(f)
        .stat("f");
    v.push(s);
    let (mut s, f) = rw("large-write-spanning-pages");
    s.pwrite(f, vec![b'q'; 10000], 4000)
        .fstat(f)
        .pread(f, 8, 3996)
        .pread(f, 8, 13996)
        .ftruncate(f, 4100)
        .pread(f, 200, 3990);
    v.push(s);
    let (mut s, f) = rw("pwrite-at-max-offset");
    s.pwrite(f, "x", i64::MAX)
        .pwrite(f, "xy", i64::MAX - 1)
        .fstat(f);
    v.push(s);
}

type Layout = (
    &'static str,
    &'static [(i64, usize)],
    Option<i64>,
    &'static [i64],
);

fn sparse_layouts() -> Vec<Layout> {
    vec![
        ("empty", &[], None, &[0, 1]),
        ("dense", &[(0, 100)], None, &[0, 50, 99, 100, 200]),
        (
            "hole-then-data",
            &[(3 * 4096, 10)],
            None,
            &[0, 4096, 3 * 4096, 3 * 4096 + 5, 3 * 4096 + 10],
        ),
        (
            "data-hole-data",
            &[(0, 10), (5 * 4096, 10)],
            None,
            &[0, 5, 4096, 2 * 4096, 5 * 4096, 5 * 4096 + 9],
        ),
        (
            "trailing-hole-from-truncate",
            &[(0, 10)],
            Some(10 * 4096),
            &[0, 10, 4096, 9 * 4096, 10 * 4096, 10 * 4096 + 1],
        ),
        ("all-hole", &[], Some(20000), &[0, 19999, 20000, -1]),
    ]
}

/// copy_file_range: positions or offsets, shortening at the source's end, and the checks of
/// `generic_copy_file_checks` in their order.
fn copy_file_range(v: &mut Vec<Script>) {
    let src_dst = |name: &str| {
        let mut s = Script::new(format!("io/copy_file_range/{name}"));
        s.file("src", 0o644, "hello world");
        let src = s.open("src", O_RDWR, 0);
        let dst = s.open("dst", O_CREAT | O_RDWR, 0o644);
        (s, src, dst)
    };
    let (mut s, src, dst) = src_dst("positions");
    s.copy_file_range(src, None, dst, None, 5, 0)
        .copy_file_range(src, None, dst, None, 100, 0)
        .copy_file_range(src, None, dst, None, 100, 0)
        .lseek(src, 0, SEEK_CUR)
        .lseek(dst, 0, SEEK_CUR)
        .pread(dst, 100, 0)
        .fstat(dst);
    v.push(s);

    let (mut s, src, dst) = src_dst("offsets");
    s.lseek(src, 3, SEEK_SET)
        .copy_file_range(src, Some(6), dst, Some(2), 100, 0)
        .copy_file_range(src, Some(0), dst, None, 2, 0)
        .copy_file_range(src, None, dst, Some(20), 1, 0)
        .lseek(src, 0, SEEK_CUR)
        .lseek(dst, 0, SEEK_CUR)
        .pread(dst, 100, 0)
        .fstat(dst);
    v.push(s);

    let (mut s, src, dst) = src_dst("nothing-to-copy");
    s.copy_file_range(src, Some(11), dst, Some(0), 5, 0)
        .copy_file_range(src, Some(100), dst, Some(0), 5, 0)
        .copy_file_range(src, Some(0), dst, Some(0), 0, 0)
        .fstat(dst);
    v.push(s);

    let (mut s, src, dst) = src_dst("bad-offsets-and-lengths");
    s.copy_file_range(src, Some(-1), dst, Some(0), 5, 0)
        .copy_file_range(src, Some(0), dst, Some(-1), 5, 0)
        .copy_file_range(src, Some(-1), dst, Some(0), 0, 0)
        .copy_file_range(src, Some(1), dst, Some(0), usize::MAX, 0)
        .copy_file_range(src, Some(0), dst, Some(1), usize::MAX, 0)
        .copy_file_range(src, Some(0), dst, Some(0), isize::MAX as usize, 0)
        .copy_file_range(src, Some(0), dst, Some(i64::MAX), 1, 0)
        .copy_file_range(src, Some(0), dst, Some(i64::MAX - 4), 100, 0)
        .copy_file_range(src, Some(0), dst, Some(0), 5, 1)
        .fstat(dst);
    v.push(s);

    let (mut s, src, _) = src_dst("within-one-file");
    s.copy_file_range(src, Some(0), src, Some(20), 5, 0)
        .copy_file_range(src, Some(0), src, Some(3), 5, 0)
        .copy_file_range(src, Some(3), src, Some(0), 5, 0)
        .copy_file_range(src, Some(0), src, Some(0), 5, 0)
        .copy_file_range(src, Some(0), src, Some(5), 5, 0)
        .copy_file_range(src, Some(100), src, Some(0), 5, 0)
        .pread(src, 100, 0)
        .fstat(src);
    v.push(s);

    let mut s = Script::new("io/copy_file_range/wrong-kinds-and-modes");
    s.file("f", 0o644, "data").mkdir("d", 0o755);
    let rd = s.open("f", O_RDONLY, 0);
    let wr = s.open("f2", O_CREAT | O_WRONLY, 0o644);
    let ap = s.open("f3", O_CREAT | O_WRONLY | O_APPEND, 0o644);
    let dir = s.open("d", O_RDONLY | O_DIRECTORY, 0);
    let path = s.open("f", O_PATH, 0);
    let closed = s.open("f", O_RDONLY, 0);
    s.close(closed);
    s.copy_file_range(wr, None, rd, None, 1, 0)
        .copy_file_range(rd, None, rd, Some(10), 1, 0)
        .copy_file_range(rd, None, ap, None, 1, 0)
        .copy_file_range(dir, None, wr, None, 1, 0)
        .copy_file_range(rd, None, dir, None, 1, 0)
        .copy_file_range(dir, None, rd, None, 1, 0)
        .copy_file_range(path, None, wr, None, 1, 0)
        .copy_file_range(rd, None, path, None, 1, 0)
        .copy_file_range(closed, None, wr, None, 1, 0)
        .copy_file_range(rd, None, closed, None, 1, 0)
        .copy_file_range(Fd::Raw(-1), None, wr, None, 1, 0)
        .copy_file_range(dir, None, closed, None, 1, 2)
        .copy_file_range(rd, None, wr, None, 1, 2)
        .copy_file_range(rd, None, wr, None, 2, 0)
        .stat("f2");
    v.push(s);
}
