//! Dropping a `Vfs` after heavy use frees everything: no superblock or dcache is leaked
//! (which happens only when an object outlives its VFS). Its own test binary, so that no
//! other test's VFS is counted.

use scalevfs::{Credentials, Locking, Process, Tmpfs, TmpfsOptions, Vfs, VfsOptions};
use std::sync::Arc;

#[test]
fn dropping_a_used_vfs_frees_everything() {
    for locking in [Locking::Scalable, Locking::Legacy] {
        let vfs = Vfs::new(VfsOptions {
            locking,
            ..VfsOptions::default()
        });
        let p = Process::new(&vfs, Credentials::root());
        p.mkdir("/m", 0o755).unwrap();
        vfs.mount("/m", Arc::new(Tmpfs::new(TmpfsOptions::default())))
            .unwrap();
        for d in ["/a", "/a/b", "/m/x"] {
            p.mkdir(d, 0o755).unwrap();
        }
        for i in 0..100 {
            p.write_file(format!("/a/b/f{i}"), b"data").unwrap();
            p.write_file(format!("/m/x/f{i}"), b"data").unwrap();
        }
        let _ = p.stat("/a/missing");
        p.symlinkat("b", libc::AT_FDCWD, "/a/l").unwrap();
        let fd = p.open("/a/b/f1", libc::O_RDONLY, 0).unwrap();
        p.chdir("/m/x").unwrap();
        let child = p.fork();
        drop(child);
        let _ = fd;
        drop(p);
        drop(vfs);
    }
    scalevfs_vfs::core::reclaim();
    assert_eq!(scalevfs_vfs::core::leaked_cores(), 0);

    // An open file description kept past its VFS makes the teardown leak (safely) instead.
    let vfs = Vfs::new(VfsOptions::default());
    let p = Process::new(&vfs, Credentials::root());
    let fd = p.open("/f", libc::O_CREAT | libc::O_RDWR, 0o644).unwrap();
    let kept = p.file(fd).unwrap();
    drop(p);
    drop(vfs);
    assert_eq!(scalevfs_vfs::core::leaked_cores(), 1);
    assert_eq!(kept.inode().size(), 0, "the leaked objects are still valid");
    drop(kept);
}
