//! Unit tests of mounting and unmounting on the core (small enough for Miri, which runs
//! them: the mount table's pointers, the mountpoint counts a detach gives back, and the
//! claimed shutdown that frees a mount after a grace period).

use crate::dentry::tests::{core, look};
use crate::mount::Path;
use crate::namei::Ctx;
use crate::perm::Cred;
use crate::testfs::TestFs;
use crate::Errno;
use scalevfs_primitives::Locking;
use std::sync::Arc;

fn mkdir(c: &super::VfsCore, path: &str) {
    let (root, cred) = (c.root(), Cred::root());
    let ctx = Ctx::new(&cred, &root);
    c.mkdir(&ctx, &root, path.as_bytes(), 0o755, 0).unwrap();
}

fn mount(c: &super::VfsCore, path: &str) {
    c.mount(&look(c, path).unwrap(), Arc::new(TestFs::default()))
        .unwrap();
}

fn umount(c: &super::VfsCore, path: &str, flags: i32) -> Result<(), Errno> {
    c.umount(look(c, path)?, flags)
}

/// `..` from `p`, as a walk does.
fn dotdot(c: &super::VfsCore, p: &Path) -> Path {
    let (root, cred) = (c.root(), Cred::root());
    let ctx = Ctx::new(&cred, &root);
    c.lookup(&ctx, p, b"..", true, false).unwrap()
}

#[test]
fn a_plain_umount_waits_for_the_last_user() {
    for locking in [Locking::Scalable, Locking::Legacy] {
        let c = core(locking);
        mkdir(&c, "/mnt");
        let covered = look(&c, "/mnt").unwrap();
        mount(&c, "/mnt");
        assert_eq!(c.superblocks().len(), 2);
        mkdir(&c, "/mnt/d");
        let inside = look(&c, "/mnt/d").unwrap();
        assert_ne!(inside.mnt, covered.mnt, "the walk crossed into the mount");
        assert_eq!(umount(&c, "/mnt", 0), Err(Errno::EBUSY));
        // A walk still enters it: the failed umount changed nothing.
        assert!(look(&c, "/mnt/d").unwrap() == inside);
        drop(inside);
        assert_eq!(umount(&c, "/mnt", 0), Ok(()));
        assert_eq!(c.superblocks().len(), 1, "the file system was shut down");
        assert!(look(&c, "/mnt").unwrap() == covered);
        assert_eq!(look(&c, "/mnt/d").err(), Some(Errno::ENOENT));
        assert_eq!(
            umount(&c, "/mnt", 0),
            Err(Errno::EINVAL),
            "not a mount's root"
        );
        assert_eq!(umount(&c, "/", 0), Err(Errno::EBUSY), "the root mount");
    }
}

#[test]
fn a_lazy_umount_shuts_down_after_the_last_user() {
    for locking in [Locking::Scalable, Locking::Legacy] {
        let c = core(locking);
        mkdir(&c, "/mnt");
        mount(&c, "/mnt");
        mkdir(&c, "/mnt/d");
        let inside = look(&c, "/mnt/d").unwrap();
        let top = look(&c, "/mnt").unwrap();
        assert_eq!(umount(&c, "/mnt", libc::MNT_DETACH), Ok(()));
        assert!(inside.mnt.is_detached());
        // Out of the tree at once; `..` from the detached root stays there.
        assert_eq!(look(&c, "/mnt/d").err(), Some(Errno::ENOENT));
        assert!(dotdot(&c, &top) == top);
        assert!(dotdot(&c, &inside) == top);
        assert_eq!(c.superblocks().len(), 2, "still in use");
        // The detached mount gave its mountpoint back: the directory can go.
        let (root, cred) = (c.root(), Cred::root());
        let ctx = Ctx::new(&cred, &root);
        c.unlink(&ctx, &root, b"/mnt", true).unwrap();
        drop((inside, top));
        c.drop_caches();
        assert_eq!(c.superblocks().len(), 1, "shut down once unused");
        assert_eq!(c.mounts.count(), 1);
    }
}

#[test]
fn stacked_mounts_come_off_top_first() {
    for locking in [Locking::Scalable, Locking::Legacy] {
        let c = core(locking);
        mkdir(&c, "/mnt");
        mount(&c, "/mnt");
        mount(&c, "/mnt");
        mkdir(&c, "/mnt/top");
        let top = look(&c, "/mnt").unwrap();
        assert_eq!(c.mounts.count(), 3);
        assert_eq!(umount(&c, "/mnt", 0), Err(Errno::EBUSY), "we hold its root");
        drop(top);
        assert_eq!(umount(&c, "/mnt", 0), Ok(()));
        assert_eq!(
            look(&c, "/mnt/top").err(),
            Some(Errno::ENOENT),
            "the lower one"
        );
        assert_eq!(umount(&c, "/mnt", 0), Ok(()));
        assert_eq!(c.mounts.count(), 1);
        assert_eq!(c.superblocks().len(), 1);
    }
}

#[test]
fn a_lazy_umount_takes_the_mounts_below_along() {
    let c = core(Locking::Scalable);
    mkdir(&c, "/mnt");
    mount(&c, "/mnt");
    mkdir(&c, "/mnt/sub");
    mount(&c, "/mnt/sub");
    let deep = look(&c, "/mnt/sub").unwrap();
    assert_eq!(umount(&c, "/mnt", 0), Err(Errno::EBUSY), "a mount below");
    assert_eq!(umount(&c, "/mnt", libc::MNT_DETACH), Ok(()));
    assert!(deep.mnt.is_detached());
    // `..` from the lower mount's root stays: its parent mount was detached with it.
    assert!(dotdot(&c, &deep) == deep);
    // The upper file system had no user: shut down already; the lower one waits for us.
    assert_eq!(c.superblocks().len(), 2);
    drop(deep);
    c.drop_caches();
    assert_eq!(c.superblocks().len(), 1);
    assert_eq!(c.mounts.count(), 1);
}

/// Two threads: one walks into the mount and back out, the other unmounts it plainly
/// until it succeeds. Small, so that Miri explores a few interleavings of the handshake.
#[test]
fn walks_race_an_umount() {
    let c = core(Locking::Scalable);
    mkdir(&c, "/mnt");
    mount(&c, "/mnt");
    mkdir(&c, "/mnt/d");
    let walker = {
        let c = c.clone();
        std::thread::spawn(move || {
            for _ in 0..4 {
                if let Ok(p) = look(&c, "/mnt/d") {
                    assert!(p.mnt != c.root().mnt, "/mnt/d exists only in the mount");
                    drop(dotdot(&c, &p));
                }
            }
        })
    };
    while umount(&c, "/mnt", 0) == Err(Errno::EBUSY) {
        std::thread::yield_now();
    }
    walker.join().unwrap();
    c.drop_caches();
    assert_eq!(c.superblocks().len(), 1);
    assert_eq!(look(&c, "/mnt/d").err(), Some(Errno::ENOENT));
}

#[test]
fn a_remount_read_only_waits_for_files_open_for_writing() {
    use crate::mount::MountOptions;
    for locking in [Locking::Scalable, Locking::Legacy] {
        let c = core(locking);
        mkdir(&c, "/mnt");
        mount(&c, "/mnt");
        let (root, cred) = (c.root(), Cred::root());
        let ctx = Ctx::new(&cred, &root);
        let open = |path: &str, flags: i32| c.open(&ctx, &root, path.as_bytes(), flags, 0o644, 0);
        let (ro, rw) = (MountOptions::new().read_only(true), MountOptions::new());
        let target = look(&c, "/mnt").unwrap();
        let w = open("/mnt/f", libc::O_CREAT | libc::O_WRONLY).unwrap();
        let r = open("/mnt/f", libc::O_RDONLY).unwrap();
        assert_eq!(c.remount(&target, &ro), Err(Errno::EBUSY));
        assert_eq!(
            c.remount(&look(&c, "/mnt/f").unwrap(), &ro),
            Err(Errno::EINVAL),
            "not a mount's root"
        );
        drop(w);
        c.remount(&target, &ro).unwrap();
        assert!(c.superblocks()[1].is_read_only() || c.superblocks()[0].is_read_only());
        assert_eq!(open("/mnt/f", libc::O_WRONLY).err(), Some(Errno::EROFS));
        assert_eq!(c.mkdir(&ctx, &root, b"/mnt/d", 0o755, 0), Err(Errno::EROFS));
        drop(r);
        c.remount(&target, &rw).unwrap();
        mkdir(&c, "/mnt/d");
        drop((target, root));
        assert_eq!(umount(&c, "/mnt", 0), Ok(()));
    }
}
