//! Every system call and errno path, compared call by call with the host kernel on tmpfs
//! (/dev/shm). Permission cases run with the host thread's fsuid switched to 1000.

mod common;
use common::Both;
use libc::*;
use scalevfs::Timespec;

const RW: i32 = O_RDWR;

#[test]
fn open_flags_and_errors() {
    let mut b = Both::new();
    b.open("f", O_CREAT | RW, 0o644).unwrap();
    b.open("f", O_CREAT | O_EXCL | RW, 0o644).unwrap_err();
    b.open("missing", RW, 0).unwrap_err();
    b.open("", RW, 0).unwrap_err();
    b.open("f/", RW, 0).unwrap_err();
    b.open("f/x", RW, 0).unwrap_err();
    b.open("new/", O_CREAT | RW, 0o644).unwrap_err();
    b.mkdir("d", 0o755).unwrap();
    b.open("d", RW, 0).unwrap_err();
    b.open("d", O_WRONLY, 0).unwrap_err();
    b.open("d", O_RDONLY | O_TRUNC, 0).unwrap_err();
    b.open("d", O_CREAT | RW, 0o644).unwrap_err();
    b.open("d", O_CREAT | O_EXCL | RW, 0o644).unwrap_err();
    b.open("d", O_RDONLY, 0).unwrap();
    b.open("d/", O_RDONLY, 0).unwrap();
    b.open("d/.", O_RDONLY, 0).unwrap();
    b.open("d/..", O_RDONLY, 0).unwrap();
    b.open(".", O_CREAT | RW, 0o644).unwrap_err();
    b.open("f", O_RDONLY | O_DIRECTORY, 0).unwrap_err();
    b.open("d", O_RDONLY | O_DIRECTORY, 0).unwrap();
    b.open("x", O_CREAT | O_DIRECTORY | RW, 0o644).unwrap_err();
    b.symlink("f", "lf").unwrap();
    b.symlink("d", "ld").unwrap();
    b.open("lf", O_RDONLY | O_NOFOLLOW, 0).unwrap_err();
    b.open("lf", O_RDONLY, 0).unwrap();
    b.open("lf", O_PATH | O_NOFOLLOW, 0).unwrap();
    b.open("ld/", O_RDONLY, 0).unwrap();
    b.open("lf", O_CREAT | O_EXCL | RW, 0o644).unwrap_err();
    b.symlink("dangling-target", "dang").unwrap();
    b.open("dang", RW, 0).unwrap_err();
    b.open("dang", O_CREAT | RW, 0o600).unwrap();
    b.stat("dangling-target", 0).unwrap();
    b.open("d/sub/x", O_CREAT | RW, 0o644).unwrap_err();
    let long = "x".repeat(256);
    b.open(&long, O_CREAT | RW, 0o644).unwrap_err();
    b.open(&long, RW, 0).unwrap_err();
    b.open(&format!("{long}/a"), RW, 0).unwrap_err();
    b.open(&format!("missing/{long}"), RW, 0).unwrap_err();
    let ok = "y".repeat(255);
    b.open(&ok, O_CREAT | RW, 0o644).unwrap();
    let deep = "a/".repeat(2100);
    b.open(&deep, RW, 0).unwrap_err();
    b.open("f", O_RDONLY | O_NOATIME, 0).unwrap();
    b.open("f", O_ACCMODE, 0).unwrap();
}

#[test]
fn create_mode_umask_and_trunc() {
    let mut b = Both::new();
    b.open("a", O_CREAT | O_WRONLY, 0o777).unwrap();
    b.stat("a", 0).unwrap();
    b.open("s", O_CREAT | O_WRONLY, 0o7777).unwrap();
    b.stat("s", 0).unwrap();
    let fd = b.open("t", O_CREAT | RW, 0o644).unwrap();
    let Ok(common::Out::Int(i)) = Ok::<_, i32>(fd) else {
        unreachable!()
    };
    let i = i as usize;
    b.write(i, b"hello world").unwrap();
    b.fstat(i).unwrap();
    b.open("t", O_RDONLY | O_TRUNC, 0).unwrap();
    b.fstat(i).unwrap();
    b.write(i, b"x").unwrap();
    b.fstat(i).unwrap();
    b.open("t", O_WRONLY | O_TRUNC, 0).unwrap();
    b.fstat(i).unwrap();
    b.open("t", O_CREAT | O_TRUNC | O_WRONLY, 0o600).unwrap();
    b.stat("t", 0).unwrap();
}

fn idx(r: common::R) -> usize {
    match r.unwrap() {
        common::Out::Int(i) => i as usize,
        o => panic!("not an index: {o:?}"),
    }
}

#[test]
fn read_write_seek_and_holes() {
    let mut b = Both::new();
    let i = idx(b.open("f", O_CREAT | RW, 0o644));
    b.write(i, b"abcdef").unwrap();
    b.read(i, 10).unwrap();
    b.lseek(i, 0, SEEK_SET).unwrap();
    b.read(i, 3).unwrap();
    b.lseek(i, 2, SEEK_CUR).unwrap();
    b.read(i, 10).unwrap();
    b.lseek(i, -1, SEEK_END).unwrap();
    b.read(i, 10).unwrap();
    b.lseek(i, -100, SEEK_SET).unwrap_err();
    b.lseek(i, -100, SEEK_CUR).unwrap_err();
    b.lseek(i, 0, 99).unwrap_err();
    b.lseek(i, 100_000, SEEK_SET).unwrap();
    b.write(i, b"z").unwrap();
    b.fstat(i).unwrap();
    b.pread(i, 10, 99_995).unwrap();
    b.pread(i, 10, 50_000).unwrap();
    b.pread(i, 10, -1).unwrap_err();
    b.pread(i, 10, i64::MAX - 5).unwrap_err();
    b.pread(i, 5, i64::MAX - 5).unwrap();
    b.pwrite(i, b"q", -1).unwrap_err();
    b.pwrite(i, b"qq", 8192).unwrap();
    b.lseek(i, 0, SEEK_DATA).unwrap();
    b.lseek(i, 0, SEEK_HOLE).unwrap();
    b.lseek(i, 5000, SEEK_DATA).unwrap();
    b.lseek(i, 9000, SEEK_HOLE).unwrap();
    b.lseek(i, 13000, SEEK_DATA).unwrap();
    b.lseek(i, 100_000, SEEK_DATA).unwrap();
    b.lseek(i, 100_001, SEEK_DATA).unwrap_err();
    b.lseek(i, 200_000, SEEK_HOLE).unwrap_err();
    b.lseek(i, -1, SEEK_DATA).unwrap_err();
    b.read(i, 0).unwrap();
    b.write(i, b"").unwrap();
    let r = idx(b.open("f", O_RDONLY, 0));
    b.write(r, b"no").unwrap_err();
    let w = idx(b.open("f", O_WRONLY, 0));
    b.read(w, 1).unwrap_err();
    b.close(w).unwrap();
    b.close(w).unwrap_err();
    b.read(w, 1).unwrap_err();
    let p = idx(b.open("f", O_PATH, 0));
    b.read(p, 1).unwrap_err();
    b.write(p, b"x").unwrap_err();
    b.lseek(p, 0, SEEK_SET).unwrap_err();
    b.fstat(p).unwrap();
    b.mkdir("d", 0o755).unwrap();
    let d = idx(b.open("d", O_RDONLY, 0));
    b.read(d, 1).unwrap_err();
    b.lseek(d, 0, SEEK_END).unwrap_err();
    b.lseek(d, 0, SEEK_SET).unwrap();
    b.fsync(i).unwrap();
    b.fsync(p).unwrap_err();
}

#[test]
fn append_mode() {
    let mut b = Both::new();
    let i = idx(b.open("f", O_CREAT | RW | O_APPEND, 0o644));
    b.write(i, b"one").unwrap();
    b.lseek(i, 0, SEEK_SET).unwrap();
    b.write(i, b"two").unwrap();
    b.pwrite(i, b"3", 0).unwrap();
    b.lseek(i, 0, SEEK_CUR).unwrap();
    b.pread(i, 20, 0).unwrap();
    b.getfl(i).unwrap();
    b.setfl(i, O_RDONLY).unwrap();
    b.getfl(i).unwrap();
    b.lseek(i, 0, SEEK_SET).unwrap();
    b.write(i, b"X").unwrap();
    b.pread(i, 20, 0).unwrap();
    b.setfl(i, O_APPEND | O_NONBLOCK).unwrap();
    b.getfl(i).unwrap();
    let p = idx(b.open("f", O_PATH, 0));
    b.getfl(p).unwrap();
}

#[test]
fn truncate_fallocate() {
    let mut b = Both::new();
    let i = idx(b.open("f", O_CREAT | RW, 0o644));
    b.write(i, &[7u8; 10000]).unwrap();
    b.ftruncate(i, 5000).unwrap();
    b.fstat(i).unwrap();
    b.pread(i, 100, 4990).unwrap();
    b.ftruncate(i, 20000).unwrap();
    b.pread(i, 100, 4990).unwrap();
    b.ftruncate(i, -1).unwrap_err();
    b.truncate("f", 3).unwrap();
    b.fstat(i).unwrap();
    b.truncate("f", -3).unwrap_err();
    b.truncate("missing", 3).unwrap_err();
    b.mkdir("d", 0o755).unwrap();
    b.truncate("d", 0).unwrap_err();
    let r = idx(b.open("f", O_RDONLY, 0));
    b.ftruncate(r, 0).unwrap_err();
    let d = idx(b.open("d", O_RDONLY, 0));
    b.ftruncate(d, 0).unwrap_err();
    b.fallocate(i, 0, 0, 8192).unwrap();
    b.fstat(i).unwrap();
    b.fallocate(i, FALLOC_FL_KEEP_SIZE, 0, 100_000).unwrap();
    b.fstat(i).unwrap();
    b.fallocate(i, 0, -1, 10).unwrap_err();
    b.fallocate(i, 0, 0, 0).unwrap_err();
    b.fallocate(r, 0, 0, 10).unwrap_err();
    b.fallocate(i, 0, i64::MAX - 10, 100).unwrap_err();
    b.pwrite(i, b"x", i64::MAX - 1).unwrap();
    b.pwrite(i, b"x", i64::MAX).unwrap_err();
    b.pwrite(i, b"xyz", i64::MAX - 2).unwrap_err();
    b.pwrite(i, b"xy", i64::MAX - 2).unwrap();
    b.fstat(i).unwrap();
}

#[test]
fn stat_flags_and_symlinks() {
    let mut b = Both::new();
    b.open("f", O_CREAT | RW, 0o640).unwrap();
    b.symlink("f", "l").unwrap();
    b.symlink("l", "l2").unwrap();
    b.symlink("nowhere", "dl").unwrap();
    b.symlink("/base-does-not-exist/x", "abs").unwrap();
    b.stat("l", 0).unwrap();
    b.stat("l", AT_SYMLINK_NOFOLLOW).unwrap();
    b.stat("l2", 0).unwrap();
    b.stat("dl", 0).unwrap_err();
    b.stat("dl", AT_SYMLINK_NOFOLLOW).unwrap();
    b.stat("abs", 0).unwrap_err();
    b.stat("l/", 0).unwrap_err();
    b.stat("f/", 0).unwrap_err();
    b.stat("", 0).unwrap_err();
    b.stat("", AT_EMPTY_PATH).unwrap();
    b.stat("f", 0x4000_0000).unwrap_err();
    b.readlink("l", 100).unwrap();
    b.readlink("l", 1).unwrap();
    b.readlink("f", 100).unwrap_err();
    b.readlink("missing", 100).unwrap_err();
    b.readlink("l2", 0).unwrap_err();
    b.symlink("", "empty").unwrap_err();
    b.symlink("f", "f").unwrap_err();
    b.symlink("f", "l").unwrap_err();
    b.symlink("f", "nd/x").unwrap_err();
    b.symlink("f", "newl/").unwrap_err();
    // A loop and a long chain.
    b.symlink("loop1", "loop2").unwrap();
    b.symlink("loop2", "loop1").unwrap();
    b.stat("loop1", 0).unwrap_err();
    b.open("loop1", O_RDONLY, 0).unwrap_err();
    b.open("loop1", O_CREAT | RW, 0o644).unwrap_err();
    b.mkdir("c", 0o755).unwrap();
    b.open("c/t", O_CREAT | RW, 0o644).unwrap();
    b.symlink("t", "c/s0").unwrap();
    for k in 1..45 {
        b.symlink(&format!("s{}", k - 1), &format!("c/s{k}"))
            .unwrap();
    }
    b.stat("c/s39", 0).unwrap();
    b.stat("c/s40", 0).unwrap_err();
    b.stat("c/s44", 0).unwrap_err();
    // Symlinks to directories in the middle of a path, and "..".
    b.symlink("c", "lc").unwrap();
    b.stat("lc/t", 0).unwrap();
    b.stat("lc/../f", 0).unwrap();
    b.stat("c/../c/./t", 0).unwrap();
    b.stat("lc/s0/x", 0).unwrap_err();
    b.stat("f/..", 0).unwrap_err();
    b.stat("c//t", 0).unwrap();
    b.stat("c/t//", 0).unwrap_err();
}

#[test]
fn mkdir_unlink_rmdir() {
    let mut b = Both::new();
    b.mkdir("d", 0o755).unwrap();
    b.mkdir("d", 0o755).unwrap_err();
    b.mkdir("d/", 0o755).unwrap_err();
    b.mkdir("e/", 0o700).unwrap();
    b.stat("e", 0).unwrap();
    b.mkdir(".", 0o755).unwrap_err();
    b.mkdir("..", 0o755).unwrap_err();
    b.mkdir("nope/x", 0o755).unwrap_err();
    b.mkdir("d/s", 0o1777).unwrap();
    b.stat("d/s", 0).unwrap();
    b.stat("d", 0).unwrap();
    b.open("d/f", O_CREAT | RW, 0o644).unwrap();
    b.mkdir("d/f/x", 0o755).unwrap_err();
    b.unlink("d", AT_REMOVEDIR).unwrap_err();
    b.unlink("d", 0).unwrap_err();
    b.unlink("d/f", AT_REMOVEDIR).unwrap_err();
    b.unlink("d/f/", 0).unwrap_err();
    b.unlink("d/s/", 0).unwrap_err();
    b.unlink("d/missing/", 0).unwrap_err();
    b.unlink("d/missing", 0).unwrap_err();
    b.unlink("d/.", AT_REMOVEDIR).unwrap_err();
    b.unlink("d/..", AT_REMOVEDIR).unwrap_err();
    b.unlink(".", 0).unwrap_err();
    b.unlink("d/f", 0x1).unwrap_err();
    b.unlink("d/f", 0).unwrap();
    b.stat("d/f", 0).unwrap_err();
    b.unlink("d/s/", AT_REMOVEDIR).unwrap();
    b.stat("d", 0).unwrap();
    b.unlink("d", AT_REMOVEDIR).unwrap();
    b.stat("d", 0).unwrap_err();
    b.symlink("e", "le").unwrap();
    b.unlink("le/", AT_REMOVEDIR).unwrap_err();
    b.unlink("le", AT_REMOVEDIR).unwrap_err();
    b.unlink("le", 0).unwrap();
    b.stat(".", 0).unwrap();
}

#[test]
fn deleted_directory_behaviour() {
    let mut b = Both::new();
    b.mkdir("d", 0o755).unwrap();
    let d = idx(b.open("d", O_RDONLY | O_DIRECTORY, 0));
    b.unlink("d", AT_REMOVEDIR).unwrap();
    b.getdents(d).unwrap_err();
    b.fstat(d).unwrap();
}

#[test]
fn rename_cases() {
    let mut b = Both::new();
    b.open("a", O_CREAT | RW, 0o644).unwrap();
    b.open("b", O_CREAT | RW, 0o600).unwrap();
    b.mkdir("d", 0o755).unwrap();
    b.mkdir("e", 0o755).unwrap();
    b.open("e/x", O_CREAT | RW, 0o644).unwrap();
    b.rename("a", "a2", 0).unwrap();
    b.stat("a", 0).unwrap_err();
    b.stat("a2", 0).unwrap();
    b.rename("a2", "b", 0).unwrap();
    b.stat("b", 0).unwrap();
    b.rename("missing", "z", 0).unwrap_err();
    b.rename("b", "d", 0).unwrap_err();
    b.rename("d", "b", 0).unwrap_err();
    b.rename("d", "e", 0).unwrap_err();
    b.rename("d", "d/sub", 0).unwrap_err();
    b.rename("d", "d", 0).unwrap();
    b.rename("b", "b", 0).unwrap();
    b.rename(".", "x", 0).unwrap_err();
    b.rename("b", ".", 0).unwrap_err();
    b.rename("b", "..", RENAME_NOREPLACE).unwrap_err();
    b.rename("b", "b/", 0).unwrap_err();
    b.rename("b/", "c", 0).unwrap_err();
    b.rename("d/", "d2/", 0).unwrap();
    b.rename("b", "d2/b", 0).unwrap();
    b.stat("d2", 0).unwrap();
    b.mkdir("d2/sub", 0o755).unwrap();
    b.rename("d2/sub", "top", 0).unwrap();
    b.stat("d2", 0).unwrap();
    b.stat("top", 0).unwrap();
    b.stat(".", 0).unwrap();
    b.open("n1", O_CREAT | RW, 0o644).unwrap();
    b.open("n2", O_CREAT | RW, 0o644).unwrap();
    b.rename("n1", "n2", RENAME_NOREPLACE).unwrap_err();
    b.rename("n1", "n3", RENAME_NOREPLACE).unwrap();
    b.rename("n3", "n2", RENAME_EXCHANGE).unwrap();
    b.rename("n3", "nx", RENAME_EXCHANGE).unwrap_err();
    b.rename("n2", "top", RENAME_EXCHANGE).unwrap();
    b.stat("n2", 0).unwrap();
    b.stat("top", 0).unwrap();
    b.rename("n2", "d2/b", RENAME_EXCHANGE).unwrap();
    b.stat("d2", 0).unwrap();
    b.rename("n2", "x", RENAME_EXCHANGE | RENAME_NOREPLACE)
        .unwrap_err();
    b.rename("n2", "x", 64).unwrap_err();
    b.mkdir("p", 0o755).unwrap();
    b.mkdir("p/q", 0o755).unwrap();
    b.rename("p", "p/q/r", 0).unwrap_err();
    b.rename("p/q", "p", 0).unwrap_err();
    b.rename("p/q", "p", RENAME_EXCHANGE).unwrap_err();
    b.mkdir("empty", 0o755).unwrap();
    b.rename("p/q", "empty", 0).unwrap();
    b.stat("p", 0).unwrap();
    b.stat("empty", 0).unwrap();
    b.open("a", O_CREAT | RW, 0o644).unwrap();
    b.link("a", "hard", 0).unwrap();
    b.rename("a", "hard", 0).unwrap();
    b.stat("a", 0).unwrap();
    b.stat("hard", 0).unwrap();
}

#[test]
fn link_cases() {
    let mut b = Both::new();
    b.open("f", O_CREAT | RW, 0o644).unwrap();
    b.link("f", "g", 0).unwrap();
    b.stat("f", 0).unwrap();
    b.link("f", "g", 0).unwrap_err();
    b.link("missing", "h", 0).unwrap_err();
    b.mkdir("d", 0o755).unwrap();
    b.link("d", "d2", 0).unwrap_err();
    b.link("f", "d/", 0).unwrap_err();
    b.link("f", "new/", 0).unwrap_err();
    b.link("f/", "x", 0).unwrap_err();
    b.link("f", ".", 0).unwrap_err();
    b.link("f", "nodir/x", 0).unwrap_err();
    b.symlink("f", "l").unwrap();
    b.link("l", "hl", 0).unwrap();
    b.stat("hl", AT_SYMLINK_NOFOLLOW).unwrap();
    b.link("l", "hf", AT_SYMLINK_FOLLOW).unwrap();
    b.stat("hf", AT_SYMLINK_NOFOLLOW).unwrap();
    b.stat("f", 0).unwrap();
    b.link("f", "x", 0x1).unwrap_err();
    b.unlink("f", 0).unwrap();
    b.stat("g", 0).unwrap();
    b.unlink("g", 0).unwrap();
    b.stat("hf", 0).unwrap();
}

#[test]
fn getdents_lists_entries() {
    let mut b = Both::new();
    b.mkdir("d", 0o755).unwrap();
    for k in 0..150 {
        b.open(
            &format!("d/file-with-a-longish-name-{k}"),
            O_CREAT | RW,
            0o644,
        )
        .unwrap();
    }
    b.mkdir("d/sub", 0o755).unwrap();
    b.symlink("x", "d/sym").unwrap();
    let d = idx(b.open("d", O_RDONLY | O_DIRECTORY, 0));
    b.getdents(d).unwrap();
    b.lseek(d, 0, SEEK_CUR).unwrap();
    b.getdents(d).unwrap();
    b.lseek(d, 0, SEEK_SET).unwrap();
    b.getdents(d).unwrap();
    let f = idx(b.open("d/sym", O_PATH | O_NOFOLLOW, 0));
    b.getdents(f).unwrap_err();
    let g = idx(b.open("d/sub/../file-with-a-longish-name-3", O_RDONLY, 0));
    b.getdents(g).unwrap_err();
}

#[test]
fn chmod_chown_utimens_access_as_root() {
    let mut b = Both::new();
    b.open("f", O_CREAT | RW, 0o644).unwrap();
    b.chmod("f", 0o7777).unwrap();
    b.stat("f", 0).unwrap();
    b.chmod("missing", 0o644).unwrap_err();
    b.chown("f", 1000, 1000, 0).unwrap();
    b.stat("f", 0).unwrap();
    b.chmod("f", 0o6755).unwrap();
    b.chown("f", u32::MAX, u32::MAX, 0).unwrap();
    b.stat("f", 0).unwrap();
    b.chmod("f", 0o6745).unwrap();
    b.chown("f", 0, u32::MAX, 0).unwrap();
    b.stat("f", 0).unwrap();
    b.symlink("f", "l").unwrap();
    b.chown("l", 5, 5, AT_SYMLINK_NOFOLLOW).unwrap();
    b.stat("l", AT_SYMLINK_NOFOLLOW).unwrap();
    b.stat("f", 0).unwrap();
    b.chown("f", 1, 1, 0x1).unwrap_err();
    b.mkdir("d", 0o755).unwrap();
    b.chmod("d", 0o2755).unwrap();
    b.chown("d", 7, 7, 0).unwrap();
    b.stat("d", 0).unwrap();
    let t = |s, n| Timespec { sec: s, nsec: n };
    b.utimens("f", None, 0).unwrap();
    b.utimens("f", Some([t(1, 2), t(3, 4)]), 0).unwrap();
    b.utimens("f", Some([t(0, UTIME_OMIT), t(0, UTIME_NOW)]), 0)
        .unwrap();
    b.utimens("missing", Some([t(0, UTIME_OMIT), t(0, UTIME_OMIT)]), 0)
        .unwrap();
    b.utimens("f", Some([t(0, 1_000_000_000), t(0, 0)]), 0)
        .unwrap_err();
    b.utimens("missing", None, 0).unwrap_err();
    b.utimens("f", None, 0x1).unwrap_err();
    b.utimens("l", None, AT_SYMLINK_NOFOLLOW).unwrap();
    b.access("f", F_OK, 0).unwrap();
    b.access("f", R_OK | W_OK, 0).unwrap();
    b.chmod("f", 0o644).unwrap();
    b.access("f", X_OK, 0).unwrap_err();
    b.access("d", X_OK, 0).unwrap();
    b.access("f", 8, 0).unwrap_err();
    b.access("f", F_OK, 0x1).unwrap_err();
    b.access("missing", F_OK, 0).unwrap_err();
    b.access("l", F_OK, AT_SYMLINK_NOFOLLOW).unwrap();
    let i = idx(b.open("f", O_RDONLY, 0));
    b.fchmod(i, 0o600).unwrap();
    b.fstat(i).unwrap();
    let p = idx(b.open("f", O_PATH, 0));
    b.fchmod(p, 0o600).unwrap_err();
}

#[test]
fn permissions_as_user() {
    let mut b = Both::new();
    b.mkdir("ro", 0o755).unwrap();
    b.open("ro/f", O_CREAT | RW, 0o644).unwrap();
    b.mkdir("nox", 0o766).unwrap();
    b.open("nox/f", O_CREAT | RW, 0o666).unwrap();
    b.mkdir("mine", 0o755).unwrap();
    b.chown("mine", 1000, 1000, 0).unwrap();
    b.open("mine/own", O_CREAT | RW, 0o644).unwrap();
    b.chown("mine/own", 1000, 1000, 0).unwrap();
    b.open("grp", O_CREAT | RW, 0o640).unwrap();
    b.chown("grp", 0, 2000, 0).unwrap();
    b.open("other", O_CREAT | RW, 0o604).unwrap();
    b.open("exe", O_CREAT | RW, 0o4755).unwrap();
    b.chown("exe", 1000, 1000, 0).unwrap();
    b.chmod("exe", 0o6775).unwrap();
    b.mkdir("sticky", 0o1777).unwrap();
    b.chmod("sticky", 0o1777).unwrap();
    b.open("sticky/rootfile", O_CREAT | RW, 0o666).unwrap();
    b.mkdir("sgid", 0o2777).unwrap();
    b.chmod("sgid", 0o2777).unwrap();
    b.chown("sgid", 0, 3000, 0).unwrap();
    b.user(true);
    b.open("ro/f", O_RDONLY, 0).unwrap();
    b.open("ro/f", O_WRONLY, 0).unwrap_err();
    b.open("ro/new", O_CREAT | RW, 0o644).unwrap_err();
    b.mkdir("ro/new", 0o755).unwrap_err();
    b.unlink("ro/f", 0).unwrap_err();
    b.rename("ro/f", "ro/g", 0).unwrap_err();
    b.open("nox/f", O_RDONLY, 0).unwrap_err();
    b.stat("nox/f", 0).unwrap_err();
    b.stat("nox", 0).unwrap();
    // The host's faccessat checks the real uid unless AT_EACCESS: use the fsuid.
    b.access("nox/f", F_OK, AT_EACCESS).unwrap_err();
    b.open("grp", O_RDONLY, 0).unwrap();
    b.open("grp", O_WRONLY, 0).unwrap_err();
    b.open("other", O_RDONLY, 0).unwrap();
    b.access("other", R_OK, AT_EACCESS).unwrap();
    b.access("other", W_OK, AT_EACCESS).unwrap_err();
    b.access("exe", X_OK, AT_EACCESS).unwrap();
    b.chmod("ro/f", 0o777).unwrap_err();
    b.chown("ro/f", 1000, 1000, 0).unwrap_err();
    b.chown("mine/own", 0, u32::MAX, 0).unwrap_err();
    b.chown("mine/own", 1000, u32::MAX, 0).unwrap();
    b.chown("mine/own", u32::MAX, 2000, 0).unwrap();
    b.stat("mine/own", 0).unwrap();
    b.chown("mine/own", u32::MAX, 3000, 0).unwrap_err();
    b.chmod("mine/own", 0o2755).unwrap();
    b.stat("mine/own", 0).unwrap();
    b.chown("mine/own", u32::MAX, 1000, 0).unwrap();
    b.chmod("mine/own", 0o2755).unwrap();
    b.stat("mine/own", 0).unwrap();
    b.open("mine/own", O_RDONLY | O_NOATIME, 0).unwrap();
    b.open("ro/f", O_RDONLY | O_NOATIME, 0).unwrap_err();
    let t = |s, n| Timespec { sec: s, nsec: n };
    b.utimens("ro/f", None, 0).unwrap_err();
    b.utimens("ro/f", Some([t(1, 1), t(1, 1)]), 0).unwrap_err();
    b.utimens("mine/own", Some([t(1, 1), t(1, 1)]), 0).unwrap();
    b.utimens("nox/f", None, 0).unwrap_err();
    // Writing clears set-id bits of a non-root writer.
    let e = idx(b.open("exe", RW, 0));
    b.write(e, b"x").unwrap();
    b.stat("exe", 0).unwrap();
    b.close(e).unwrap();
    // Sticky directory: cannot remove another user's file.
    b.unlink("sticky/rootfile", 0).unwrap_err();
    b.rename("sticky/rootfile", "sticky/x", 0).unwrap_err();
    b.open("sticky/mine", O_CREAT | RW, 0o644).unwrap();
    b.rename("sticky/mine", "sticky/mine2", 0).unwrap();
    b.unlink("sticky/mine2", 0).unwrap();
    // Setgid directory passes its group (and setgid on subdirectories).
    b.open("sgid/f", O_CREAT | RW, 0o644).unwrap();
    b.stat("sgid/f", 0).unwrap();
    b.mkdir("sgid/sub", 0o755).unwrap();
    b.stat("sgid/sub", 0).unwrap();
    // Hard links to files one cannot write (protected_hardlinks).
    b.link("ro/f", "mine/link", 0).unwrap_err();
    b.link("mine/own", "mine/link", 0).unwrap();
    b.open("mine/f2", O_CREAT | RW, 0o600).unwrap();
    b.mkdir("mine/sub", 0o755).unwrap();
    b.rename("mine/sub", "sticky/sub", 0).unwrap();
    b.truncate("ro/f", 0).unwrap_err();
    b.user(false);
    b.chmod("mine", 0o555).unwrap();
    b.user(true);
    b.open("mine/f3", O_CREAT | RW, 0o600).unwrap_err();
    b.unlink("mine/f2", 0).unwrap_err();
    b.user(false);
}

#[test]
fn rename_dir_needs_write_on_itself_across_parents() {
    let mut b = Both::new();
    b.mkdir("a", 0o777).unwrap();
    b.mkdir("b", 0o777).unwrap();
    b.chmod("a", 0o777).unwrap();
    b.chmod("b", 0o777).unwrap();
    b.mkdir("a/d", 0o555).unwrap();
    b.chown("a/d", 1000, 1000, 0).unwrap();
    b.mkdir("a/e", 0o555).unwrap();
    b.user(true);
    b.rename("a/d", "b/d", 0).unwrap_err();
    b.rename("a/d", "a/d2", 0).unwrap();
    b.rename("a/e", "b/e", 0).unwrap_err();
    b.user(false);
}

#[test]
fn fd_numbers_dup_and_fcntl() {
    use scalevfs::{Credentials, Errno, FcntlArg, Process, Vfs, VfsOptions};
    let vfs = Vfs::new(VfsOptions::default());
    let p = Process::new(&vfs, Credentials::root());
    let a = p.open("/f", O_CREAT | RW, 0o644).unwrap();
    let b = p.open("/f", O_RDONLY | O_CLOEXEC, 0).unwrap();
    assert_eq!((a, b), (0, 1));
    assert_eq!(p.fcntl(b, F_GETFD, FcntlArg::None), Ok(FD_CLOEXEC));
    assert_eq!(p.fcntl(a, F_GETFD, FcntlArg::None), Ok(0));
    p.fcntl(a, F_SETFD, FcntlArg::Int(FD_CLOEXEC as i64))
        .unwrap();
    assert_eq!(p.fcntl(a, F_GETFD, FcntlArg::None), Ok(FD_CLOEXEC));
    p.close(a).unwrap();
    assert_eq!(p.dup(b), Ok(0));
    assert_eq!(p.fcntl(0, F_GETFD, FcntlArg::None), Ok(0));
    assert_eq!(p.dup2(0, 10), Ok(10));
    assert_eq!(p.dup2(10, 10), Ok(10));
    assert_eq!(p.dup2(99, 10), Err(Errno::EBADF));
    assert_eq!(p.dup2(0, -1), Err(Errno::EBADF));
    assert_eq!(p.dup2(0, 1 << 20), Err(Errno::EBADF));
    assert_eq!(p.dup3(0, 0, 0), Err(Errno::EINVAL));
    assert_eq!(p.dup3(0, 11, O_RDONLY | 0x4), Err(Errno::EINVAL));
    assert_eq!(p.dup3(0, 11, O_CLOEXEC), Ok(11));
    assert_eq!(p.fcntl(11, F_GETFD, FcntlArg::None), Ok(FD_CLOEXEC));
    assert_eq!(p.fcntl(0, F_DUPFD, FcntlArg::Int(5)), Ok(5));
    assert_eq!(p.fcntl(0, F_DUPFD, FcntlArg::Int(5)), Ok(6));
    assert_eq!(p.fcntl(0, F_DUPFD_CLOEXEC, FcntlArg::Int(0)), Ok(2));
    assert_eq!(p.fcntl(2, F_GETFD, FcntlArg::None), Ok(FD_CLOEXEC));
    assert_eq!(p.fcntl(0, F_DUPFD, FcntlArg::Int(-1)), Err(Errno::EINVAL));
    assert_eq!(p.fcntl(0, F_DUPFD, FcntlArg::Int(5000)), Err(Errno::EINVAL));
    assert_eq!(p.fcntl(77, F_GETFD, FcntlArg::None), Err(Errno::EBADF));
    // A lock command without a `struct flock` is a bad pointer, as fcntl(fd, F_SETLK, NULL).
    assert_eq!(p.fcntl(0, F_SETLK, FcntlArg::None), Err(Errno::EFAULT));
    assert_eq!(p.fcntl(0, 9999, FcntlArg::None), Err(Errno::EINVAL));
    // Shared offsets between duplicates.
    p.write(11, b"").unwrap_err();
    let w = p.open("/g", O_CREAT | RW, 0o644).unwrap();
    let w2 = p.dup(w).unwrap();
    p.write(w, b"abc").unwrap();
    assert_eq!(p.lseek(w2, 0, SEEK_CUR), Ok(3));
    // dup2 over an open descriptor closes it.
    p.dup2(w, 0).unwrap();
    assert_eq!(p.lseek(0, 0, SEEK_CUR), Ok(3));
    assert_eq!(p.close(-1), Err(Errno::EBADF));
    assert_eq!(p.close(100_000_000), Err(Errno::EBADF));
}

#[test]
fn emfile_and_limit() {
    use scalevfs::{Credentials, Errno, Process, Vfs, VfsOptions};
    let vfs = Vfs::new(VfsOptions::default());
    let p = Process::new(&vfs, Credentials::root());
    p.set_fd_limit(100).unwrap();
    for k in 0..100 {
        assert_eq!(p.open("/", O_RDONLY, 0), Ok(k));
    }
    assert_eq!(p.open("/", O_RDONLY, 0), Err(Errno::EMFILE));
    assert_eq!(p.dup(0), Err(Errno::EMFILE));
    p.close(37).unwrap();
    assert_eq!(p.dup(0), Ok(37));
    p.set_fd_limit(5000).unwrap();
    for k in 100..3000 {
        assert_eq!(p.dup(0), Ok(k));
    }
    assert_eq!(p.set_fd_limit(1 << 21), Err(Errno::EPERM));
}

#[test]
fn cwd_chdir_getcwd() {
    use scalevfs::{Credentials, Errno, Process, Vfs, VfsOptions};
    let vfs = Vfs::new(VfsOptions::default());
    let p = Process::new(&vfs, Credentials::root());
    assert_eq!(p.cwd().unwrap(), b"/");
    p.mkdir("/a", 0o755).unwrap();
    p.mkdir("/a/b", 0o755).unwrap();
    p.chdir("/a/b").unwrap();
    assert_eq!(p.cwd().unwrap(), b"/a/b");
    p.mkdir("c", 0o755).unwrap();
    p.chdir("c").unwrap();
    assert_eq!(p.cwd().unwrap(), b"/a/b/c");
    p.chdir("../..").unwrap();
    assert_eq!(p.cwd().unwrap(), b"/a");
    p.rename("/a", "/z").unwrap();
    assert_eq!(p.cwd().unwrap(), b"/z");
    let mut small = [0u8; 2];
    assert_eq!(p.getcwd(&mut small), Err(Errno::ERANGE));
    let mut exact = [0u8; 3];
    assert_eq!(p.getcwd(&mut exact), Ok(3));
    assert_eq!(&exact, b"/z\0");
    assert_eq!(p.chdir("/nope"), Err(Errno::ENOENT));
    p.write_file("/file", b"x").unwrap();
    assert_eq!(p.chdir("/file"), Err(Errno::ENOTDIR));
    let fd = p.open("/z/b", O_RDONLY, 0).unwrap();
    p.fchdir(fd).unwrap();
    assert_eq!(p.cwd().unwrap(), b"/z/b");
    let ffd = p.open("/file", O_RDONLY, 0).unwrap();
    assert_eq!(p.fchdir(ffd), Err(Errno::ENOTDIR));
    p.chdir("/z/b/c").unwrap();
    p.rmdir("/z/b/c").unwrap();
    assert_eq!(p.cwd(), Err(Errno::ENOENT));
    assert_eq!(p.open("x", O_CREAT | RW, 0o644), Err(Errno::ENOENT));
    assert_eq!(p.mkdir("x", 0o755), Err(Errno::ENOENT));
    assert_eq!(p.stat(".").unwrap().nlink, 0);
    p.chdir("..").unwrap();
    assert_eq!(p.cwd().unwrap(), b"/z/b");
    // Permission: chdir needs search permission.
    p.mkdir("/locked", 0o700).unwrap();
    let u = Process::new(&vfs, Credentials::user(1000, 1000));
    assert_eq!(u.chdir("/locked"), Err(Errno::EACCES));
    assert_eq!(u.stat("/locked/x"), Err(Errno::EACCES));
    // A child shares descriptors and cwd but is a new lock owner.
    let c = p.fork();
    assert_ne!(c.pid(), p.pid());
    assert_eq!(c.cwd().unwrap(), b"/z/b");
    assert_eq!(c.lseek(fd, 0, SEEK_CUR), Ok(0));
    assert_eq!(p.umask(0o077), 0o022);
    assert_eq!(p.umask(0o022), 0o077);
}

#[test]
fn umask_applies() {
    use scalevfs::{Credentials, Process, Vfs, VfsOptions};
    let vfs = Vfs::new(VfsOptions::default());
    let p = Process::new(&vfs, Credentials::root());
    p.umask(0o027);
    p.open("/f", O_CREAT | RW, 0o777).unwrap();
    p.mkdir("/d", 0o777).unwrap();
    assert_eq!(p.stat("/f").unwrap().mode, S_IFREG | 0o750);
    assert_eq!(p.stat("/d").unwrap().mode, S_IFDIR | 0o750);
}

#[test]
fn readv_writev() {
    use scalevfs::{Credentials, Process, Vfs, VfsOptions};
    use std::io::{IoSlice, IoSliceMut};
    let vfs = Vfs::new(VfsOptions::default());
    let p = Process::new(&vfs, Credentials::root());
    let fd = p.open("/f", O_CREAT | RW, 0o644).unwrap();
    assert_eq!(
        p.writev(
            fd,
            &[IoSlice::new(b"ab"), IoSlice::new(b""), IoSlice::new(b"cde")]
        ),
        Ok(5)
    );
    p.lseek(fd, 0, SEEK_SET).unwrap();
    let (mut x, mut y) = ([0u8; 3], [0u8; 10]);
    assert_eq!(
        p.readv(fd, &mut [IoSliceMut::new(&mut x), IoSliceMut::new(&mut y)]),
        Ok(5)
    );
    assert_eq!(&x, b"abc");
    assert_eq!(&y[..2], b"de");
    assert_eq!(p.readv(99, &mut []), Err(scalevfs::Errno::EBADF));
}

#[test]
fn limits_enospc_and_space_returns() {
    use scalevfs::{Credentials, Errno, Process, Vfs, VfsOptions};
    let vfs = Vfs::new(VfsOptions {
        size_limit: Some(64 * 1024),
        inode_limit: Some(10),
        ..VfsOptions::default()
    });
    let p = Process::new(&vfs, Credentials::root());
    let fd = p.open("/big", O_CREAT | RW, 0o644).unwrap();
    let data = vec![1u8; 100 * 1024];
    assert_eq!(p.write(fd, &data), Ok(64 * 1024));
    assert_eq!(p.write(fd, b"x"), Err(Errno::ENOSPC));
    // Holes cost nothing.
    assert_eq!(p.ftruncate(fd, 1 << 40), Ok(()));
    assert_eq!(p.fstat(fd).unwrap().blocks, 128);
    p.close(fd).unwrap();
    p.unlink("/big").unwrap();
    let fd = p.open("/again", O_CREAT | RW, 0o644).unwrap();
    assert_eq!(p.write(fd, &data[..8192]), Ok(8192));
    assert_eq!(p.fallocate(fd, 0, 0, 1 << 20), Err(Errno::ENOSPC));
    // Inode limit: root + /again + 8 more.
    for k in 0..8 {
        p.mkdir(format!("/d{k}"), 0o755).unwrap();
    }
    assert_eq!(p.mkdir("/one-too-many", 0o755), Err(Errno::ENOSPC));
    assert_eq!(p.symlink_probe(), Err(Errno::ENOSPC));
    p.rmdir("/d0").unwrap();
    p.mkdir("/fits", 0o755).unwrap();
}

trait Probe {
    fn symlink_probe(&self) -> scalevfs::SysResult<()>;
}
impl Probe for scalevfs::Process {
    fn symlink_probe(&self) -> scalevfs::SysResult<()> {
        self.symlinkat("t", AT_FDCWD, "/sym")
    }
}

#[test]
fn mounts_cross_and_exdev() {
    use scalevfs::{Credentials, Errno, Process, Tmpfs, TmpfsOptions, Vfs, VfsOptions};
    use std::sync::Arc;
    let vfs = Vfs::new(VfsOptions::default());
    let p = Process::new(&vfs, Credentials::root());
    p.mkdir("/mnt", 0o755).unwrap();
    p.write_file("/mnt/hidden", b"under").unwrap();
    p.write_file("/outside", b"o").unwrap();
    vfs.mount("/mnt", Arc::new(Tmpfs::new(TmpfsOptions::default())))
        .unwrap();
    assert_eq!(p.stat("/mnt/hidden"), Err(Errno::ENOENT));
    p.write_file("/mnt/inside", b"i").unwrap();
    assert_eq!(p.read_file("/mnt/../outside").unwrap(), b"o");
    assert_eq!(p.read_file("/mnt/inside").unwrap(), b"i");
    assert_ne!(p.stat("/mnt").unwrap().dev, p.stat("/").unwrap().dev);
    assert_eq!(p.rename("/outside", "/mnt/x"), Err(Errno::EXDEV));
    assert_eq!(
        p.linkat(AT_FDCWD, "/mnt/inside", AT_FDCWD, "/l", 0),
        Err(Errno::EXDEV)
    );
    assert_eq!(p.rmdir("/mnt"), Err(Errno::EBUSY));
    assert_eq!(p.rename("/mnt", "/mnt2"), Err(Errno::EBUSY));
    p.chdir("/mnt").unwrap();
    assert_eq!(p.cwd().unwrap(), b"/mnt");
    p.mkdir("sub", 0o755).unwrap();
    p.chdir("sub").unwrap();
    assert_eq!(p.cwd().unwrap(), b"/mnt/sub");
    p.chdir("../..").unwrap();
    assert_eq!(p.cwd().unwrap(), b"/");
    assert_eq!(p.readdir("/mnt").unwrap().len(), 4);
    assert_eq!(
        vfs.mount("/outside", Arc::new(Tmpfs::new(TmpfsOptions::default()))),
        Err(Errno::ENOTDIR)
    );
}

#[test]
fn times_change_like_linux() {
    use scalevfs::{Credentials, Process, Vfs, VfsOptions};
    let vfs = Vfs::new(VfsOptions::default());
    let p = Process::new(&vfs, Credentials::root());
    p.mkdir("/d", 0o755).unwrap();
    let old = Timespec { sec: 1000, nsec: 0 };
    let reset = |path: &str| p.utimensat(AT_FDCWD, path, Some([old, old]), 0).unwrap();
    reset("/d");
    p.write_file("/d/f", b"x").unwrap();
    let d = p.stat("/d").unwrap();
    assert!(d.mtime > old && d.ctime > d.mtime || d.ctime >= d.mtime);
    assert!(d.mtime > old);
    reset("/d/f");
    let fd = p.open("/d/f", RW, 0).unwrap();
    let mut b = [0u8; 1];
    p.read(fd, &mut b).unwrap();
    let s = p.fstat(fd).unwrap();
    assert!(
        s.atime > old,
        "read updates atime (relatime: atime <= mtime)"
    );
    assert_eq!(s.mtime, old);
    // relatime: an atime newer than mtime and ctime, and less than a day old, stays.
    let later = Timespec {
        sec: s.ctime.sec + 3600,
        nsec: 0,
    };
    p.utimensat(AT_FDCWD, "/d/f", Some([later, old]), 0)
        .unwrap();
    p.pread64(fd, &mut b, 0).unwrap();
    assert_eq!(
        p.fstat(fd).unwrap().atime,
        later,
        "relatime keeps a recent atime"
    );
    p.write(fd, b"y").unwrap();
    let s2 = p.fstat(fd).unwrap();
    assert!(s2.mtime > old && s2.ctime >= s2.mtime);
    reset("/d/f");
    p.fchmod(fd, 0o600).unwrap();
    let s3 = p.fstat(fd).unwrap();
    assert_eq!(s3.mtime, old);
    assert!(s3.ctime > old);
    reset("/d");
    p.unlink("/d/f").unwrap();
    assert!(p.stat("/d").unwrap().mtime > old);
    let ino_ctime = p.fstat(fd).unwrap().ctime;
    assert!(ino_ctime > old);
    // O_NOATIME reads leave atime alone.
    p.write_file("/n", b"abc").unwrap();
    reset("/n");
    let n = p.open("/n", O_RDONLY | O_NOATIME, 0).unwrap();
    p.read(n, &mut b).unwrap();
    assert_eq!(p.fstat(n).unwrap().atime, old);
    // UTIME_OMIT keeps one of the two.
    p.utimensat(
        AT_FDCWD,
        "/n",
        Some([
            Timespec {
                sec: 5,
                nsec: UTIME_OMIT,
            },
            Timespec { sec: 7, nsec: 8 },
        ]),
        0,
    )
    .unwrap();
    let s = p.stat("/n").unwrap();
    assert_eq!((s.atime, s.mtime), (old, Timespec { sec: 7, nsec: 8 }));
    // futimens: empty path on a descriptor.
    p.utimensat(n, "", None, 0).unwrap();
    assert!(p.stat("/n").unwrap().mtime.sec > 7);
}
