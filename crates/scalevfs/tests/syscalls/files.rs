//! Opening, reading and writing, truncation and stat.

use super::*;

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
