//! Per-process state: descriptors, their limit, the cwd.

use super::*;

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
