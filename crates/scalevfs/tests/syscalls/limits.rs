//! File system limits (ENOSPC and space coming back) and mounts (EXDEV).

use super::*;

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

pub(super) trait Probe {
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
