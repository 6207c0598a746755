//! `mount`/`umount2`: busy detection without a mount count, lazy detach, stacking, and the
//! superblock shutdown that walks the inode list (see `scalevfs_vfs::mount`). The same
//! calls are compared with the host kernel in the conformance suite (`mount/*` cases).

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use common::StopOnDrop;
use libc::{MNT_DETACH, MNT_EXPIRE, MNT_FORCE, O_CREAT, O_RDONLY, O_RDWR, UMOUNT_NOFOLLOW};
use scalevfs::{Credentials, Errno, Locking, Process, Tmpfs, TmpfsOptions, Vfs, VfsOptions};
use scalevfs_vfs::core::leaked_superblocks;

fn tmpfs() -> Arc<Tmpfs> {
    Arc::new(Tmpfs::new(TmpfsOptions::default()))
}

fn setup(locking: Locking) -> (Arc<Vfs>, Process) {
    let vfs = Vfs::new(VfsOptions {
        locking,
        ..VfsOptions::default()
    });
    let p = Process::new(&vfs, Credentials::root());
    p.mkdir("/m", 0o755).unwrap();
    p.write_file("/m/under", b"u").unwrap();
    (vfs, p)
}

fn both(f: impl Fn(Locking)) {
    f(Locking::Scalable);
    f(Locking::Legacy);
}

#[test]
fn unused_mount_unmounts_and_frees_every_inode() {
    both(|locking| {
        let (vfs, p) = setup(locking);
        let base = vfs.inode_count();
        p.mount("/m", tmpfs()).unwrap();
        assert_eq!(p.stat("/m/under"), Err(Errno::ENOENT));
        p.mkdir("/m/d", 0o755).unwrap();
        p.mkdir("/m/d/e", 0o755).unwrap();
        for i in 0..50 {
            p.write_file(format!("/m/d/e/f{i}"), b"data").unwrap();
        }
        p.symlinkat("d/e", libc::AT_FDCWD, "/m/lnk").unwrap();
        p.linkat(libc::AT_FDCWD, "/m/d/e/f0", libc::AT_FDCWD, "/m/hard", 0)
            .unwrap();
        // Cached dentries everywhere below (stat each): they pin nothing.
        for i in 0..50 {
            p.stat(format!("/m/lnk/f{i}")).unwrap();
        }
        assert!(vfs.inode_count() > base + 50);
        let leaked = leaked_superblocks();
        p.umount2("/m", 0).unwrap();
        assert_eq!(
            p.read_file("/m/under").unwrap(),
            b"u",
            "the directory is uncovered"
        );
        assert_eq!(
            vfs.inode_count(),
            base,
            "the tmpfs and all its inodes are gone"
        );
        assert_eq!(leaked_superblocks(), leaked);
        // Mounting again works, on a fresh file system.
        p.mount("/m", tmpfs()).unwrap();
        assert_eq!(p.readdir("/m").unwrap().len(), 2, ". and .. only");
        vfs.umount("/m").unwrap();
        assert_eq!(vfs.inode_count(), base);
    });
}

/// Mounting and unmounting again and again keeps nothing: every unmounted mount and its
/// superblock are freed (after a grace period), lazily detached ones once idle.
#[test]
fn mount_cycles_keep_nothing() {
    both(|locking| {
        let (vfs, p) = setup(locking);
        let mounts = vfs.core().mounts.count();
        let base = vfs.inode_count();
        for i in 0..200 {
            p.mount("/m", tmpfs()).unwrap();
            p.write_file("/m/f", b"x").unwrap();
            let flags = if i % 2 == 0 { 0 } else { MNT_DETACH };
            p.umount2("/m", flags).unwrap();
        }
        assert_eq!(vfs.core().mounts.count(), mounts);
        assert_eq!(vfs.inode_count(), base);
    });
}

#[test]
fn every_user_makes_it_busy() {
    both(|locking| {
        let (vfs, p) = setup(locking);
        p.mount("/m", tmpfs()).unwrap();
        p.mkdir("/m/d", 0o755).unwrap();
        p.write_file("/m/d/f", b"x").unwrap();
        // An open file deep inside.
        let fd = p.open("/m/d/f", O_RDONLY, 0).unwrap();
        assert_eq!(p.umount2("/m", 0), Err(Errno::EBUSY));
        assert_eq!(p.read_file("/m/d/f").unwrap(), b"x", "still mounted");
        p.close(fd).unwrap();
        // An open directory, the mount root itself.
        let fd = p.open("/m", O_RDONLY, 0).unwrap();
        assert_eq!(p.umount2("/m", 0), Err(Errno::EBUSY));
        p.close(fd).unwrap();
        // Another process's cwd inside, and at the root.
        let q = Process::new(&vfs, Credentials::root());
        q.chdir("/m/d").unwrap();
        assert_eq!(p.umount2("/m", 0), Err(Errno::EBUSY));
        q.chdir("/m").unwrap();
        assert_eq!(p.umount2("/m", 0), Err(Errno::EBUSY));
        q.chdir("/").unwrap();
        // An unlinked file still open.
        let fd = p.open("/m/gone", O_CREAT | O_RDWR, 0o644).unwrap();
        p.unlink("/m/gone").unwrap();
        assert_eq!(p.umount2("/m", 0), Err(Errno::EBUSY));
        p.close(fd).unwrap();
        // A mount below it.
        vfs.mount("/m/d", tmpfs()).unwrap();
        assert_eq!(p.umount2("/m", 0), Err(Errno::EBUSY));
        p.umount2("/m/d", 0).unwrap();
        assert_eq!(p.read_file("/m/d/f").unwrap(), b"x");
        p.umount2("/m", 0).unwrap();
        assert_eq!(p.read_file("/m/under").unwrap(), b"u");
    });
}

#[test]
fn errors_in_linux_order() {
    both(|locking| {
        let (vfs, p) = setup(locking);
        p.write_file("/file", b"").unwrap();
        assert_eq!(
            p.umount2("/m", 0x100),
            Err(Errno::EINVAL),
            "unknown flag first"
        );
        assert_eq!(p.umount2("/nope", 0), Err(Errno::ENOENT));
        assert_eq!(p.umount2("/m", 0), Err(Errno::EINVAL), "not a mount point");
        assert_eq!(p.umount2("/file", 0), Err(Errno::EINVAL));
        assert_eq!(p.umount2("/", 0), Err(Errno::EBUSY), "the root mount");
        assert_eq!(p.umount2("/", MNT_DETACH), Err(Errno::EBUSY));
        assert_eq!(p.umount2("/", MNT_EXPIRE), Err(Errno::EINVAL));
        p.mount("/m", tmpfs()).unwrap();
        p.write_file("/m/inside", b"").unwrap();
        assert_eq!(
            p.umount2("/m/inside", 0),
            Err(Errno::EINVAL),
            "not the mount's root"
        );
        assert_eq!(p.umount2("/m/.", 0), Ok(()), "the root by another name");
        p.mount("/m", tmpfs()).unwrap();
        assert_eq!(p.umount2("/m", MNT_EXPIRE | MNT_DETACH), Err(Errno::EINVAL));
        assert_eq!(p.umount2("/m", MNT_EXPIRE | MNT_FORCE), Err(Errno::EINVAL));
        // A symlink to the mount point: followed unless UMOUNT_NOFOLLOW.
        p.symlinkat("/m", libc::AT_FDCWD, "/lnk").unwrap();
        assert_eq!(p.umount2("/lnk", UMOUNT_NOFOLLOW), Err(Errno::EINVAL));
        // Not root: EPERM, after the path's own errors.
        let user = Process::new(&vfs, Credentials::user(1000, 1000));
        assert_eq!(user.umount2("/nope", 0), Err(Errno::ENOENT));
        assert_eq!(user.umount2("/m", 0), Err(Errno::EPERM));
        assert_eq!(user.umount2("/m", 0x100), Err(Errno::EINVAL));
        assert_eq!(user.mount("/m", tmpfs()), Err(Errno::EPERM));
        assert_eq!(p.umount2("/lnk", MNT_FORCE), Ok(()));
        assert_eq!(p.mount("/file", tmpfs()), Err(Errno::ENOTDIR));
    });
}

#[test]
fn expire_marks_then_unmounts() {
    both(|locking| {
        let (_vfs, p) = setup(locking);
        p.mount("/m", tmpfs()).unwrap();
        assert_eq!(p.umount2("/m", MNT_EXPIRE), Err(Errno::EAGAIN));
        assert_eq!(p.umount2("/m", MNT_EXPIRE), Ok(()));
        p.mount("/m", tmpfs()).unwrap();
        let fd = p.open("/m", O_RDONLY, 0).unwrap();
        assert_eq!(p.umount2("/m", MNT_EXPIRE), Err(Errno::EBUSY));
        p.close(fd).unwrap();
        assert_eq!(p.umount2("/m", MNT_EXPIRE), Err(Errno::EAGAIN));
        assert_eq!(p.umount2("/m", 0), Ok(()));
    });
}

#[test]
fn stacked_mounts_uncover_one_by_one() {
    both(|locking| {
        let (vfs, p) = setup(locking);
        let base = vfs.inode_count();
        p.mount("/m", tmpfs()).unwrap();
        p.write_file("/m/first", b"1").unwrap();
        p.mount("/m", tmpfs()).unwrap();
        p.write_file("/m/second", b"2").unwrap();
        assert_eq!(p.stat("/m/first"), Err(Errno::ENOENT));
        // The lower mount has a mount on its root: busy until the upper one goes.
        p.umount2("/m", 0).unwrap();
        assert_eq!(p.read_file("/m/first").unwrap(), b"1");
        p.umount2("/m", 0).unwrap();
        assert_eq!(p.read_file("/m/under").unwrap(), b"u");
        assert_eq!(vfs.inode_count(), base);
    });
}

#[test]
fn lazy_detach_keeps_users_working_and_frees_when_they_leave() {
    both(|locking| {
        let (vfs, p) = setup(locking);
        let base = vfs.inode_count();
        p.mount("/m", tmpfs()).unwrap();
        p.mkdir("/m/d", 0o755).unwrap();
        p.write_file("/m/d/f", b"still here").unwrap();
        vfs.mount("/m/d", tmpfs()).unwrap();
        p.write_file("/m/d/g", b"child").unwrap();
        let fd = p.open("/m/d/g", O_RDONLY, 0).unwrap();
        let q = Process::new(&vfs, Credentials::root());
        q.chdir("/m").unwrap();
        // Detaches both mounts at once, although both are in use.
        p.umount2("/m", MNT_DETACH).unwrap();
        assert_eq!(p.read_file("/m/under").unwrap(), b"u", "uncovered at once");
        let mut buf = [0u8; 5];
        assert_eq!(
            p.pread64(fd, &mut buf, 0),
            Ok(5),
            "an open file keeps working"
        );
        assert_eq!(&buf, b"child");
        // The cwd in the detached tree: relative paths work, `..` stays at its root,
        // getcwd says it is unreachable, and nothing can be mounted there.
        assert_eq!(q.read_file("d/f").unwrap(), b"still here");
        q.chdir("..").unwrap();
        assert_eq!(q.read_file("d/f").unwrap(), b"still here");
        assert!(q.cwd().unwrap().starts_with(b"(unreachable)"));
        assert_eq!(q.mount("d", tmpfs()), Err(Errno::ENOENT));
        assert_eq!(
            q.umount2(".", 0),
            Err(Errno::EINVAL),
            "not in the tree any more"
        );
        assert!(vfs.inode_count() > base);
        // The users leave: a later umount or drop_caches shuts the file systems down.
        p.close(fd).unwrap();
        q.chdir("/").unwrap();
        vfs.drop_caches();
        assert_eq!(vfs.inode_count(), base);
    });
}

/// Walkers enter and leave the mount while it is unmounted again and again: every
/// umount either fails with EBUSY or succeeds with no user left inside; a walk sees the
/// mounted tree or the directory below it, whole; nothing leaks.
#[test]
fn umount_races_with_walkers() {
    both(|locking| {
        let (vfs, p) = setup(locking);
        let base = vfs.inode_count();
        let leaked = leaked_superblocks();
        let stop = AtomicBool::new(false);
        std::thread::scope(|s| {
            let _stop = StopOnDrop(&stop);
            for t in 0..3 {
                let (vfs, stop) = (&vfs, &stop);
                s.spawn(move || {
                    let q = Process::new(vfs, Credentials::root());
                    while !stop.load(Ordering::Relaxed) {
                        match q.read_file("/m/under") {
                            Ok(d) => assert_eq!(d, b"u"),
                            Err(e) => assert_eq!(e, Errno::ENOENT),
                        }
                        match q.read_file("/m/top") {
                            Ok(d) => assert_eq!(d, b"t"),
                            Err(e) => assert_eq!(e, Errno::ENOENT),
                        }
                        if t == 0 {
                            if let Ok(fd) = q.open("/m/top", O_RDONLY, 0) {
                                let mut b = [0u8; 1];
                                assert_eq!(q.read(fd, &mut b), Ok(1));
                                q.close(fd).unwrap();
                            }
                        }
                        if t == 1 && q.chdir("/m").is_ok() {
                            let _ = q.stat("top");
                            q.chdir("/").unwrap();
                        }
                    }
                });
            }
            let mut unmounted = 0;
            for _ in 0..300 {
                p.mount("/m", tmpfs()).unwrap();
                // Whole or not at all for the readers: written aside, renamed in.
                p.write_file("/m/.top", b"t").unwrap();
                p.rename("/m/.top", "/m/top").unwrap();
                loop {
                    match p.umount2("/m", 0) {
                        Ok(()) => break,
                        Err(e) => assert_eq!(e, Errno::EBUSY),
                    }
                }
                unmounted += 1;
            }
            stop.store(true, Ordering::Relaxed);
            assert_eq!(unmounted, 300);
        });
        vfs.drop_caches();
        assert_eq!(vfs.inode_count(), base, "every unmounted tmpfs was freed");
        assert_eq!(leaked_superblocks(), leaked, "no busy inodes after unmount");
    });
}

/// A lazily detached mount gives its mountpoint back at once, while walkers inside it
/// still take `..` out of its root: each walker sits in the mount (its cwd) and asks for
/// `..` while the mount is detached and its mountpoint removed, again and again. A `..`
/// either reaches the parent (the walk came first) or stays at the detached root; no
/// count is taken on a dead mountpoint; every detached mount is freed once its walker
/// leaves, and the file system it was mounted on can be unmounted meanwhile.
#[test]
fn dotdot_races_with_lazy_detach() {
    both(|locking| {
        let (vfs, p) = setup(locking);
        let base = vfs.inode_count();
        let leaked = leaked_superblocks();
        // The mounts come and go on `/m/d` in a file system of its own on `/m`.
        p.mount("/m", tmpfs()).unwrap();
        p.write_file("/m/under", b"U").unwrap();
        let stop = AtomicBool::new(false);
        std::thread::scope(|s| {
            let _stop = StopOnDrop(&stop);
            for _ in 0..3 {
                let (vfs, stop) = (&vfs, &stop);
                s.spawn(move || {
                    let q = Process::new(vfs, Credentials::root());
                    while !stop.load(Ordering::Relaxed) {
                        if q.chdir("/m/d").is_err() {
                            continue;
                        }
                        for _ in 0..8 {
                            // The parent `/m` (its `under`), or the detached root again.
                            match q.stat("../under") {
                                Ok(st) => assert_eq!(st.size, 1),
                                Err(e) => assert_eq!(e, Errno::ENOENT),
                            }
                            q.stat("..").unwrap();
                        }
                        q.chdir("/").unwrap();
                    }
                });
            }
            for _ in 0..300 {
                p.mkdir("/m/d", 0o755).unwrap();
                p.mount("/m/d", tmpfs()).unwrap();
                std::thread::yield_now();
                p.umount2("/m/d", MNT_DETACH).unwrap();
                p.rmdir("/m/d").unwrap();
            }
            stop.store(true, Ordering::Relaxed);
        });
        // The walkers left every detached mount, and none kept a dentry of `/m`'s file
        // system: it unmounts.
        p.umount2("/m", 0).unwrap();
        vfs.drop_caches();
        assert_eq!(vfs.inode_count(), base, "every detached tmpfs was freed");
        assert_eq!(leaked_superblocks(), leaked, "no busy inodes after unmount");
    });
}

/// A lazy and a plain umount of one mount at once: whichever wins, the mount is detached
/// for good (a detached mount never comes back), so `..` from its root, where a process
/// stands, never leads out to the file system below.
#[test]
fn lazy_and_plain_umount_of_one_mount() {
    both(|locking| {
        let (vfs, p) = setup(locking);
        for _ in 0..300 {
            p.mount("/m", tmpfs()).unwrap();
            let inside = Process::new(&vfs, Credentials::root());
            inside.chdir("/m").unwrap();
            let start = std::sync::Barrier::new(2);
            std::thread::scope(|s| {
                for flags in [MNT_DETACH, 0] {
                    let (vfs, start) = (&vfs, &start);
                    s.spawn(move || {
                        let q = Process::new(vfs, Credentials::root());
                        start.wait();
                        match q.umount2("/m", flags) {
                            Ok(()) => {}
                            Err(e) => assert!([Errno::EBUSY, Errno::EINVAL].contains(&e), "{e:?}"),
                        }
                    });
                }
            });
            // The lazy one always detaches (the plain one finds it busy or detached).
            assert_eq!(inside.stat("../m/under").err(), Some(Errno::ENOENT));
            inside.chdir("/").unwrap();
            assert_eq!(p.read_file("/m/under").unwrap(), b"u");
        }
    });
}

/// Two mounts on one directory at once: the second goes on top of the first (Linux's
/// `lock_mount`), and two umounts take both off.
#[test]
fn concurrent_mounts_stack() {
    both(|locking| {
        let (vfs, p) = setup(locking);
        for _ in 0..300 {
            let start = std::sync::Barrier::new(2);
            std::thread::scope(|s| {
                for _ in 0..2 {
                    let (vfs, start) = (&vfs, &start);
                    s.spawn(move || {
                        let q = Process::new(vfs, Credentials::root());
                        start.wait();
                        q.mount("/m", tmpfs()).unwrap();
                    });
                }
            });
            p.umount2("/m", 0).unwrap();
            p.umount2("/m", 0).unwrap();
            assert_eq!(p.read_file("/m/under").unwrap(), b"u");
        }
    });
}

/// A walker takes `..` from the root of a mount stacked on another mount's root (so its
/// mountpoint is that mount's root) while the whole tree is lazily detached: the detach
/// never waits for the walker (it either sees the walker's count and leaves the mount for
/// later, or the walker sees its mount detached and stays), and a mount racing the same
/// detach leaves no superblock behind. Then nothing is left.
#[test]
fn dotdot_and_mount_race_a_lazy_detach_of_the_tree() {
    both(|locking| {
        let (vfs, p) = setup(locking);
        let base = vfs.inode_count();
        let sbs = vfs.core().superblocks().len();
        for _ in 0..200 {
            p.mount("/m", tmpfs()).unwrap();
            p.mkdir("/m/d", 0o755).unwrap();
            p.mount("/m/d", tmpfs()).unwrap();
            p.mount("/m/d", tmpfs()).unwrap();
            let walker = Process::new(&vfs, Credentials::root());
            walker.chdir("/m/d").unwrap();
            let start = std::sync::Barrier::new(3);
            std::thread::scope(|s| {
                let (vfs, start, walker) = (&vfs, &start, &walker);
                s.spawn(move || {
                    start.wait();
                    walker.chdir("..").unwrap();
                    walker.chdir("/").unwrap();
                });
                s.spawn(move || {
                    let q = Process::new(vfs, Credentials::root());
                    start.wait();
                    match q.mount("/m/d", tmpfs()) {
                        Ok(_) | Err(Errno::ENOENT) => {}
                        Err(e) => panic!("mount: {e:?}"),
                    }
                });
                start.wait();
                p.umount2("/m", MNT_DETACH).unwrap();
            });
        }
        vfs.drop_caches();
        assert_eq!(vfs.inode_count(), base, "every detached tmpfs was freed");
        assert_eq!(
            vfs.core().superblocks().len(),
            sbs,
            "no superblock left behind"
        );
    });
}
