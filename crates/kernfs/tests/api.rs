//! Every API path of the tree, with its errors, under both locking designs.

use std::sync::atomic::{
    AtomicUsize,
    Ordering::{Acquire, Relaxed, Release},
};
use std::sync::Arc;

use scalevfs_kernfs::demo::{demo_tree, gid_path, gid_string, DEMO_GIDS};
use scalevfs_kernfs::*;
use scalevfs_vfs::Errno;

fn designs() -> [Kernfs; 2] {
    [Kernfs::new(Locking::Scalable), Kernfs::new(Locking::Legacy)]
}

const USER: Creds<'static> = Creds {
    uid: 1000,
    gid: 1000,
    groups: &[10],
};

#[test]
fn create_lookup_and_name_errors() {
    for fs in designs() {
        let root = fs.root().clone();
        let d = fs.create_dir(&root, "d", 0o755, 0, 0).unwrap();
        let f = fs
            .create_file(&d, "f", 0o644, 0, 0, FnAttr::constant("x"))
            .unwrap();
        assert!(Arc::ptr_eq(&fs.lookup(&d, "f").unwrap(), &f));
        assert!(Arc::ptr_eq(&fs.lookup(&root, b"d").unwrap(), &d));
        assert_eq!(
            fs.create_dir(&root, "d", 0o755, 0, 0).unwrap_err(),
            Errno::EEXIST
        );
        assert_eq!(
            fs.create_file(&d, "f", 0o644, 0, 0, FnAttr::constant("y"))
                .unwrap_err(),
            Errno::EEXIST
        );
        assert_eq!(
            fs.create_link(&d, "f", &root.clone()).unwrap_err(),
            Errno::EINVAL
        ); // root target
        assert_eq!(fs.create_link(&d, "f", &d).unwrap_err(), Errno::EEXIST);
        for bad in ["", ".", "..", "a/b", "nul\0"] {
            assert_eq!(
                fs.create_dir(&root, bad, 0o755, 0, 0).unwrap_err(),
                Errno::EINVAL,
                "{bad:?}"
            );
        }
        let long = "n".repeat(NAME_MAX + 1);
        assert_eq!(
            fs.create_dir(&root, &long, 0o755, 0, 0).unwrap_err(),
            Errno::ENAMETOOLONG
        );
        assert_eq!(fs.lookup(&root, &long).unwrap_err(), Errno::ENAMETOOLONG);
        let max = "m".repeat(NAME_MAX);
        fs.create_dir(&root, &max, 0o755, 0, 0).unwrap();
        assert!(fs.lookup(&root, &max).is_ok());
        assert_eq!(
            fs.create_dir(&f, "x", 0o755, 0, 0).unwrap_err(),
            Errno::ENOTDIR
        );
        assert_eq!(fs.lookup(&f, "x").unwrap_err(), Errno::ENOTDIR);
        assert_eq!(fs.lookup(&d, "missing").unwrap_err(), Errno::ENOENT);
        // Another tree's nodes.
        let other = Kernfs::new(Locking::Scalable);
        assert_eq!(
            other.create_dir(&d, "x", 0o755, 0, 0).unwrap_err(),
            Errno::EXDEV
        );
        assert_eq!(other.remove(&f).unwrap_err(), Errno::EXDEV);
        // Many children force the child table to grow; all stay reachable.
        for i in 0..500 {
            fs.create_file(&d, format!("c{i}"), 0o444, 0, 0, FnAttr::constant("c"))
                .unwrap();
        }
        for i in 0..500 {
            assert_eq!(
                fs.lookup(&d, format!("c{i}")).unwrap().name_lossy(),
                format!("c{i}")
            );
        }
        assert_eq!(fs.readdir(&d).unwrap().len(), 501);
    }
}

#[test]
fn getattr_like_sysfs() {
    for fs in designs() {
        let t = demo_tree(&fs).unwrap();
        let a = fs.getattr(&t.gids[3]).unwrap();
        assert_eq!(
            (a.kind, a.mode, a.size, a.nlink, a.uid, a.gid),
            (NodeKind::File, libc::S_IFREG | 0o444, 4096, 1, 0, 0)
        );
        let a = fs.getattr(&t.gids_dir).unwrap();
        assert_eq!((a.mode, a.size, a.nlink), (libc::S_IFDIR | 0o755, 0, 2));
        let port = t.gids_dir.parent().unwrap();
        assert_eq!(fs.getattr(&port).unwrap().nlink, 3); // one subdirectory: gids
        let a = fs.getattr(&t.device_link).unwrap();
        assert_eq!(
            (a.kind, a.mode, a.size, a.nlink),
            (NodeKind::Link, libc::S_IFLNK | 0o777, 0, 1)
        );
        assert_eq!(fs.getattr(fs.root()).unwrap().ino, 1);
        let mut inos: Vec<u64> = t.gids.iter().map(|n| n.ino()).collect();
        inos.sort_unstable();
        inos.dedup();
        assert_eq!(inos.len(), DEMO_GIDS);
        assert!(a.ctime_ns > 0 && a.mtime_ns == a.atime_ns);
    }
}

#[test]
fn readdir_order_cookies_and_removed_entries() {
    for fs in designs() {
        let d = fs.create_dir(fs.root(), "d", 0o755, 0, 0).unwrap();
        let names: Vec<String> = (0..150).map(|i| format!("e{i}")).collect();
        for n in &names {
            fs.create_file(&d, n, 0o444, 0, 0, FnAttr::constant(""))
                .unwrap();
        }
        let all = fs.readdir(&d).unwrap();
        let got: Vec<String> = all
            .iter()
            .map(|e| String::from_utf8(e.name.to_vec()).unwrap())
            .collect();
        assert_eq!(got, names, "creation order");
        assert!(all.windows(2).all(|w| w[0].cookie < w[1].cookie));
        assert!(all.iter().all(|e| e.kind == NodeKind::File));
        // Resume after entry 99, stop after 10.
        let mut part = Vec::new();
        let end = fs
            .readdir_from(&d, all[99].cookie, |e| {
                part.push(e);
                part.len() < 10
            })
            .unwrap();
        assert!(!end);
        assert_eq!(part[0].name.as_ref(), b"e100");
        assert_eq!(part.len(), 10);
        // Removed entries disappear; cookies of the others do not change.
        fs.remove(&fs.lookup(&d, "e5").unwrap()).unwrap();
        let after = fs.readdir(&d).unwrap();
        assert_eq!(after.len(), 149);
        assert!(after.iter().all(|e| e.name.as_ref() != b"e5"));
        assert_eq!(after[5].cookie, all[6].cookie);
        let f = fs.lookup(&d, "e1").unwrap();
        assert_eq!(fs.readdir(&f).unwrap_err(), Errno::ENOTDIR);
        fs.remove(&d).unwrap();
        assert_eq!(fs.readdir(&d).unwrap_err(), Errno::ENOENT);
    }
}

#[test]
fn symlinks_readlink_and_lookup_path() {
    for fs in designs() {
        let t = demo_tree(&fs).unwrap();
        assert_eq!(
            fs.readlink(&t.device_link).unwrap(),
            b"../../../devices/pci0000:00/0000:00:03.0"
        );
        assert_eq!(fs.readlink(&t.knob).unwrap_err(), Errno::EINVAL);
        // Same directory, parent, sibling subtree.
        let k = t.knob.parent().unwrap();
        let l1 = fs.create_link(&k, "same", &t.knob).unwrap();
        assert_eq!(fs.readlink(&l1).unwrap(), b"knob");
        let l2 = fs.create_link(&k, "up", &k.parent().unwrap()).unwrap();
        assert_eq!(fs.readlink(&l2).unwrap(), b"../../kernel");
        let l3 = fs.create_link(fs.root(), "top", &t.gids[7]).unwrap();
        assert_eq!(
            fs.readlink(&l3).unwrap(),
            b"class/infiniband/mlx5_0/ports/1/gids/7"
        );
        // Path walks follow links (also in the middle), check search permission.
        let v = fs
            .lookup_path("class/infiniband/mlx5_0/device/vendor", &USER, true)
            .unwrap();
        assert_eq!(fs.path(&v), "/devices/pci0000:00/0000:00:03.0/vendor");
        let n = fs.lookup_path("/top", &USER, true).unwrap();
        assert!(Arc::ptr_eq(&n, &t.gids[7]));
        let n = fs.lookup_path("top", &USER, false).unwrap();
        assert!(Arc::ptr_eq(&n, &l3));
        assert!(Arc::ptr_eq(
            &fs.lookup_path("//./", &USER, true).unwrap(),
            fs.root()
        ));
        assert_eq!(
            fs.lookup_path("top/x", &USER, true).unwrap_err(),
            Errno::ENOTDIR
        );
        assert_eq!(
            fs.lookup_path("kernel/../class", &USER, true).unwrap_err(),
            Errno::EINVAL
        );
        assert_eq!(
            fs.lookup_path("nope", &USER, true).unwrap_err(),
            Errno::ENOENT
        );
        // A chain of links longer than MAX_SYMLINKS.
        let mut prev = t.knob.clone();
        for i in 0..=MAX_SYMLINKS {
            prev = fs.create_link(&k, format!("chain{i}"), &prev).unwrap();
        }
        assert_eq!(
            fs.lookup_path(format!("kernel/scalevfs/chain{MAX_SYMLINKS}"), &USER, true)
                .unwrap_err(),
            Errno::ELOOP
        );
        assert!(fs
            .lookup_path(
                format!("kernel/scalevfs/chain{}", MAX_SYMLINKS - 1),
                &USER,
                true
            )
            .is_ok());
        // A dangling link: the target was removed.
        fs.remove(&t.knob).unwrap();
        assert_eq!(
            fs.lookup_path("kernel/scalevfs/same", &USER, true)
                .unwrap_err(),
            Errno::ENOENT
        );
        assert_eq!(
            fs.create_link(&k, "dangling", &t.knob).unwrap_err(),
            Errno::ENOENT
        );
        // Search permission.
        let secret = fs.create_dir(fs.root(), "secret", 0o700, 0, 0).unwrap();
        fs.create_file(&secret, "f", 0o444, 0, 0, FnAttr::constant("s"))
            .unwrap();
        assert_eq!(
            fs.lookup_path("secret/f", &USER, true).unwrap_err(),
            Errno::EACCES
        );
        assert!(fs.lookup_path("secret/f", &Creds::ROOT, true).is_ok());
    }
}

#[test]
fn rename_paths_and_errors() {
    for fs in designs() {
        let root = fs.root().clone();
        let a = fs.create_dir(&root, "a", 0o755, 0, 0).unwrap();
        let b = fs.create_dir(&root, "b", 0o755, 0, 0).unwrap();
        let sub = fs.create_dir(&a, "sub", 0o755, 0, 0).unwrap();
        let f = fs
            .create_file(&sub, "f", 0o444, 0, 0, FnAttr::constant("f"))
            .unwrap();
        let link = fs.create_link(&b, "l", &f).unwrap();
        assert_eq!(fs.readlink(&link).unwrap(), b"../a/sub/f");
        // Same directory.
        fs.rename(&f, &sub, "g").unwrap();
        assert_eq!(fs.lookup(&sub, "f").unwrap_err(), Errno::ENOENT);
        assert!(Arc::ptr_eq(&fs.lookup(&sub, "g").unwrap(), &f));
        assert_eq!(fs.path(&f), "/a/sub/g");
        // Across directories: nlink of both parents follows.
        assert_eq!(
            (fs.getattr(&a).unwrap().nlink, fs.getattr(&b).unwrap().nlink),
            (3, 2)
        );
        fs.rename(&sub, &b, "moved").unwrap();
        assert_eq!(
            (fs.getattr(&a).unwrap().nlink, fs.getattr(&b).unwrap().nlink),
            (2, 3)
        );
        assert_eq!(fs.path(&f), "/b/moved/g");
        assert_eq!(fs.readlink(&link).unwrap(), b"moved/g");
        assert!(Arc::ptr_eq(
            &fs.lookup_path("b/moved/g", &USER, true).unwrap(),
            &f
        ));
        // No-op, EEXIST, loops, root, bad names, removed nodes.
        fs.rename(&sub, &b, "moved").unwrap();
        assert_eq!(fs.rename(&sub, &b, "l").unwrap_err(), Errno::EEXIST);
        assert_eq!(fs.rename(&b, &sub, "x").unwrap_err(), Errno::EINVAL);
        assert_eq!(fs.rename(&b, &b, "x").unwrap_err(), Errno::EINVAL);
        assert_eq!(fs.rename(&root, &a, "x").unwrap_err(), Errno::EINVAL);
        assert_eq!(fs.rename(&f, &sub, "a/b").unwrap_err(), Errno::EINVAL);
        assert_eq!(fs.rename(&f, &f, "x").unwrap_err(), Errno::ENOTDIR);
        fs.remove(&a).unwrap();
        assert_eq!(fs.rename(&f, &a, "x").unwrap_err(), Errno::ENOENT);
        fs.remove(&f).unwrap();
        assert_eq!(fs.rename(&f, &b, "x").unwrap_err(), Errno::ENOENT);
        // Names are free again after a rename.
        fs.create_dir(&b, "sub2", 0o755, 0, 0).unwrap();
        let sub2 = fs.lookup(&b, "sub2").unwrap();
        fs.rename(&sub2, &root, "a").unwrap();
        assert!(fs.lookup(&b, "sub2").is_err());
    }
}

#[test]
fn remove_is_recursive_and_final() {
    for fs in designs() {
        let t = demo_tree(&fs).unwrap();
        let class = fs.lookup(fs.root(), "class").unwrap();
        let root_nlink = fs.getattr(fs.root()).unwrap().nlink;
        let of = fs.open(&t.gids[0], libc::O_RDONLY, &USER).unwrap();
        fs.remove(&class).unwrap();
        assert_eq!(fs.getattr(fs.root()).unwrap().nlink, root_nlink - 1);
        assert_eq!(fs.lookup(fs.root(), "class").unwrap_err(), Errno::ENOENT);
        assert_eq!(
            fs.lookup_path(gid_path(0), &USER, true).unwrap_err(),
            Errno::ENOENT
        );
        assert!(t.gids.iter().all(|g| !g.is_active()));
        assert_eq!(fs.getattr(&t.gids[1]).unwrap_err(), Errno::ENOENT);
        assert_eq!(fs.remove(&class).unwrap_err(), Errno::ENOENT);
        assert_eq!(fs.remove(&t.gids[2]).unwrap_err(), Errno::ENOENT);
        assert_eq!(fs.remove(fs.root()).unwrap_err(), Errno::EINVAL);
        assert_eq!(
            fs.create_file(&t.gids_dir, "new", 0o444, 0, 0, FnAttr::constant(""))
                .unwrap_err(),
            Errno::ENOENT
        );
        assert_eq!(
            fs.open(&t.gids[3], libc::O_RDONLY, &USER).unwrap_err(),
            Errno::ENODEV
        );
        assert_eq!(
            fs.open(&t.gids_dir, libc::O_RDONLY, &USER).unwrap_err(),
            Errno::ENOENT
        );
        let mut buf = [0u8; 64];
        assert_eq!(of.read(&mut buf).unwrap_err(), Errno::ENODEV);
        assert_eq!(of.llseek(0, libc::SEEK_SET).unwrap_err(), Errno::ENODEV);
        assert_eq!(of.poll(), DEFAULT_POLLMASK | POLL_CHANGED);
        assert_eq!(
            fs.setattr(&t.gids[0], &SetAttr::default()).unwrap_err(),
            Errno::ENOENT
        );
        // The rest of the tree is intact and the name is free again.
        assert!(fs.lookup_path("kernel/scalevfs/knob", &USER, true).is_ok());
        fs.create_dir(fs.root(), "class", 0o755, 0, 0).unwrap();
        drop(of);
        assert_eq!(fs.open_count(&t.gids[0]), 0);
    }
}

#[test]
fn open_checks_in_linux_order() {
    for fs in designs() {
        let t = demo_tree(&fs).unwrap();
        let gid = &t.gids[0];
        let (rd, wr, rw) = (libc::O_RDONLY, libc::O_WRONLY, libc::O_RDWR);
        assert_eq!(
            fs.open(&t.device_link, rd, &USER).unwrap_err(),
            Errno::ELOOP
        );
        assert_eq!(
            fs.open(&t.gids_dir, wr, &Creds::ROOT).unwrap_err(),
            Errno::EISDIR
        );
        assert_eq!(
            fs.open(&t.gids_dir, rd | libc::O_TRUNC, &Creds::ROOT)
                .unwrap_err(),
            Errno::EISDIR
        );
        assert_eq!(
            fs.open(&t.gids_dir, rd | libc::O_CREAT, &Creds::ROOT)
                .unwrap_err(),
            Errno::EISDIR
        );
        assert_eq!(
            fs.open(gid, rd | libc::O_DIRECTORY, &USER).unwrap_err(),
            Errno::ENOTDIR
        );
        assert_eq!(
            fs.open(gid, rd | libc::O_CREAT | libc::O_EXCL, &USER)
                .unwrap_err(),
            Errno::EEXIST
        );
        assert_eq!(fs.open(gid, wr, &USER).unwrap_err(), Errno::EACCES);
        assert_eq!(
            fs.open(gid, rd | libc::O_TRUNC, &USER).unwrap_err(),
            Errno::EACCES
        );
        // Root passes the permission check but kernfs refuses writing a file without w.
        assert_eq!(fs.open(gid, rw, &Creds::ROOT).unwrap_err(), Errno::EACCES);
        let knob = &t.knob;
        assert_eq!(fs.open(knob, wr, &USER).unwrap_err(), Errno::EACCES);
        assert!(fs.open(knob, rw, &Creds::ROOT).is_ok());
        assert!(fs
            .open(knob, rd | libc::O_CLOEXEC | libc::O_NONBLOCK, &USER)
            .is_ok());
        // Group and other classes.
        let f = fs
            .create_file(fs.root(), "g", 0o040, 1, 10, FnAttr::constant("g"))
            .unwrap();
        assert!(fs.open(&f, rd, &USER).is_ok());
        assert_eq!(
            fs.open(&f, rd, &Creds::new(2000, 2000, &[])).unwrap_err(),
            Errno::EACCES
        );
        // A mode without any r bit: root too is refused.
        let w = fs
            .create_file(
                fs.root(),
                "wonly",
                0o200,
                0,
                0,
                FnAttr::wo(|_, d| Ok(d.len())),
            )
            .unwrap();
        assert_eq!(fs.open(&w, rd, &Creds::ROOT).unwrap_err(), Errno::EACCES);
        // O_ACCMODE 3 needs both permissions and gives neither.
        let of = fs.open(knob, 3, &Creds::ROOT).unwrap();
        assert_eq!(of.access(), (false, false));
        assert_eq!(of.read(&mut [0; 4]).unwrap_err(), Errno::EBADF);
        assert_eq!(of.write(b"1").unwrap_err(), Errno::EBADF);
        // Directories open read-only; reading them is EISDIR.
        let d = fs.open(&t.gids_dir, rd | libc::O_DIRECTORY, &USER).unwrap();
        assert_eq!(d.read(&mut [0; 4]).unwrap_err(), Errno::EISDIR);
        assert_eq!(d.poll(), DEFAULT_POLLMASK);
        assert!(d.add_waiter(Arc::new(|_| {})).is_none());
        assert_eq!(
            fs.open(&t.gids_dir, rd, &Creds::new(5, 5, &[])).map(|_| ()),
            Ok(())
        );
        let other = Kernfs::new(Locking::Scalable);
        assert_eq!(other.open(gid, rd, &USER).unwrap_err(), Errno::EXDEV);
    }
}

#[test]
fn setattr_and_permissions() {
    for fs in designs() {
        let f = fs
            .create_file(fs.root(), "f", 0o600, 1000, 1000, FnAttr::constant("f"))
            .unwrap();
        let other = Creds::new(2000, 2000, &[]);
        assert_eq!(fs.permission(&f, &USER, MAY_READ | MAY_WRITE), Ok(()));
        assert_eq!(fs.permission(&f, &other, MAY_READ), Err(Errno::EACCES));
        let chmod = |m| SetAttr {
            mode: Some(m),
            ..Default::default()
        };
        assert_eq!(
            fs.setattr_checked(&f, &chmod(0o644), &other),
            Err(Errno::EPERM)
        );
        fs.setattr_checked(&f, &chmod(0o644), &USER).unwrap();
        assert_eq!(fs.permission(&f, &other, MAY_READ), Ok(()));
        assert_eq!(fs.getattr(&f).unwrap().mode, libc::S_IFREG | 0o644);
        // chown: root only; chgrp: owner to one of its groups.
        let chown = SetAttr {
            uid: Some(2000),
            ..Default::default()
        };
        assert_eq!(fs.setattr_checked(&f, &chown, &USER), Err(Errno::EPERM));
        let chgrp = |g| SetAttr {
            gid: Some(g),
            ..Default::default()
        };
        assert_eq!(fs.setattr_checked(&f, &chgrp(99), &USER), Err(Errno::EPERM));
        fs.setattr_checked(&f, &chgrp(10), &USER).unwrap();
        assert_eq!(fs.getattr(&f).unwrap().gid, 10);
        // Non-root chmod +s without the group: setgid dropped.
        fs.setattr(&f, &chgrp(77)).unwrap();
        fs.setattr_checked(&f, &chmod(0o2755), &USER).unwrap();
        assert_eq!(fs.getattr(&f).unwrap().mode & 0o7777, 0o755);
        // chown by root of a setuid file clears setuid.
        fs.setattr(&f, &chmod(0o4755)).unwrap();
        fs.setattr_checked(&f, &chown, &Creds::ROOT).unwrap();
        let a = fs.getattr(&f).unwrap();
        assert_eq!((a.uid, a.mode & 0o7777), (2000, 0o755));
    }
}

#[test]
fn writes_go_to_store_in_one_piece() {
    for fs in designs() {
        let t = demo_tree(&fs).unwrap();
        let seen = Arc::new(std::sync::Mutex::new(Vec::<usize>::new()));
        let s2 = seen.clone();
        let sink = fs
            .create_file(
                fs.root(),
                "sink",
                0o644,
                0,
                0,
                FnAttr::rw(
                    |_, b| {
                        b.extend_from_slice(b"s\n");
                        Ok(())
                    },
                    move |_, d| {
                        s2.lock().unwrap().push(d.len());
                        Ok(d.len())
                    },
                ),
            )
            .unwrap();
        let of = fs.open(&sink, libc::O_WRONLY, &Creds::ROOT).unwrap();
        assert_eq!(of.write(&vec![b'x'; 5000]).unwrap(), 4096);
        assert_eq!(of.write(b"").unwrap(), 0);
        assert_eq!(of.write_at(b"abc", 12345).unwrap(), 3);
        assert_eq!(of.write_at(b"abc", -1).unwrap_err(), Errno::EINVAL);
        assert_eq!(*seen.lock().unwrap(), vec![4096, 3]);
        assert_eq!(of.position(), 4096);
        assert_eq!(of.read(&mut [0; 8]).unwrap_err(), Errno::EBADF);
        // The knob: errno from store reaches the writer; good values stick.
        let k = fs.open(&t.knob, libc::O_RDWR, &Creds::ROOT).unwrap();
        assert_eq!(k.write(b"abc").unwrap_err(), Errno::EINVAL);
        assert_eq!(k.write(b"12x\n").unwrap_err(), Errno::EINVAL);
        assert_eq!(k.write(b"-17\n").unwrap(), 4);
        let mut buf = [0u8; 16];
        assert_eq!(k.read_at(&mut buf, 0).unwrap(), 4);
        assert_eq!(&buf[..4], b"-17\n");
        assert_eq!(t.knob_value.load(Relaxed), -17);
        let w = fs.open_count(&t.writes);
        assert_eq!(w, 0);
        let wr = fs.open(&t.writes, libc::O_RDONLY, &USER).unwrap();
        assert_eq!(wr.read(&mut buf).unwrap(), 2);
        assert_eq!(&buf[..2], b"1\n");
        // Missing callbacks: opening that way is EACCES whatever the mode (even for root),
        // as kernfs_fop_open without ->write / ->seq_show.
        let ro = fs
            .create_file(fs.root(), "ro_rw_mode", 0o666, 0, 0, FnAttr::constant("c"))
            .unwrap();
        for flags in [libc::O_RDWR, libc::O_WRONLY] {
            assert_eq!(
                fs.open(&ro, flags, &Creds::ROOT).unwrap_err(),
                Errno::EACCES,
                "{flags:#o}"
            );
        }
        let of = fs.open(&ro, libc::O_RDONLY | libc::O_TRUNC, &USER).unwrap();
        assert_eq!(of.read(&mut buf).unwrap(), 1);
        let wo = fs
            .create_file(
                fs.root(),
                "wo_rw_mode",
                0o666,
                0,
                0,
                FnAttr::wo(|_, d| Ok(d.len())),
            )
            .unwrap();
        for flags in [libc::O_RDWR, libc::O_RDONLY] {
            assert_eq!(
                fs.open(&wo, flags, &Creds::ROOT).unwrap_err(),
                Errno::EACCES,
                "{flags:#o}"
            );
        }
        let of = fs.open(&wo, libc::O_WRONLY, &USER).unwrap();
        assert_eq!(of.write(b"1").unwrap(), 1);
        // O_ACCMODE 3 opens neither way, so it is not refused.
        assert!(fs.open(&wo, 3, &Creds::ROOT).is_ok());
        // An AttributeOps that claims both methods but implements neither: EIO from the
        // read and the write, as sysfs's kobj_attr_show/kobj_attr_store.
        struct Bare;
        impl AttributeOps for Bare {}
        let bare = fs
            .create_file(fs.root(), "bare", 0o644, 0, 0, Arc::new(Bare))
            .unwrap();
        let of = fs.open(&bare, libc::O_RDWR, &Creds::ROOT).unwrap();
        assert_eq!(of.read(&mut buf).unwrap_err(), Errno::EIO);
        assert_eq!(of.write(b"1").unwrap_err(), Errno::EIO);
        // A store that claims more than it got is capped.
        let liar = fs
            .create_file(
                fs.root(),
                "liar",
                0o200,
                0,
                0,
                FnAttr::wo(|_, _| Ok(1 << 20)),
            )
            .unwrap();
        assert_eq!(
            fs.open(&liar, libc::O_WRONLY, &Creds::ROOT)
                .unwrap()
                .write(b"ab")
                .unwrap(),
            2
        );
    }
}

#[test]
fn show_output_is_capped_and_errors_propagate() {
    for fs in designs() {
        let big = fs
            .create_file(
                fs.root(),
                "big",
                0o444,
                0,
                0,
                FnAttr::constant(vec![b'b'; 10_000]),
            )
            .unwrap();
        let of = fs.open(&big, libc::O_RDONLY, &USER).unwrap();
        let mut buf = vec![0u8; 8192];
        assert_eq!(of.read(&mut buf).unwrap(), PAGE_SIZE - 1);
        assert_eq!(of.read(&mut buf).unwrap(), 0);
        let calls = Arc::new(AtomicUsize::new(0));
        let c = calls.clone();
        let bad = fs
            .create_file(
                fs.root(),
                "bad",
                0o444,
                0,
                0,
                FnAttr::ro(move |_, _| {
                    c.fetch_add(1, Relaxed);
                    Err(Errno::EAGAIN)
                }),
            )
            .unwrap();
        let of = fs.open(&bad, libc::O_RDONLY, &USER).unwrap();
        assert_eq!(of.read(&mut buf).unwrap_err(), Errno::EAGAIN);
        assert_eq!(of.read(&mut buf).unwrap_err(), Errno::EAGAIN);
        assert_eq!(of.read_at(&mut buf, 7).unwrap_err(), Errno::EAGAIN);
        assert_eq!(calls.load(Relaxed), 3);
        assert_eq!(of.read(&mut []).unwrap(), 0);
        assert_eq!(calls.load(Relaxed), 3, "an empty read does not show");
        assert_eq!(of.read_at(&mut buf, -1).unwrap_err(), Errno::EINVAL);
    }
}

#[test]
fn demo_tree_contents() {
    let fs = Kernfs::new(Locking::Scalable);
    let t = demo_tree(&fs).unwrap();
    assert_eq!(t.gids.len(), DEMO_GIDS);
    for i in [0, 1, 17, 253] {
        let n = fs.lookup_path(gid_path(i), &USER, true).unwrap();
        let of = fs
            .open(&n, libc::O_RDONLY | libc::O_CLOEXEC, &USER)
            .unwrap();
        let mut buf = [0u8; 40];
        let got = of.read(&mut buf).unwrap();
        assert_eq!(&buf[..got], gid_string(i).as_bytes());
        assert_eq!(got, 40);
    }
    let r = fs.open(&t.gid_reads, libc::O_RDONLY, &USER).unwrap();
    let mut buf = [0u8; 16];
    let n = r.read(&mut buf).unwrap();
    assert_eq!(&buf[..n], b"4\n");
    assert!(
        demo_tree(&fs).is_err(),
        "a second demo tree collides (EEXIST)"
    );
    assert!(fs.open_file_locks() >= 2);
    assert_eq!(Kernfs::new(Locking::Legacy).open_file_locks(), 1);
}

/// The owner's chmod (`setattr_checked`) races with root giving the file away (chown to
/// another user that also resets the mode). The owner's check and change must be one
/// atomic step: its mode may land before the chown (then overwritten) or be refused
/// after it, but never be checked before and applied after it, which would leave the new
/// owner's file with a mode the old owner chose.
#[test]
fn setattr_checked_is_atomic_with_concurrent_setattr() {
    use std::sync::atomic::AtomicU64;
    const ROUNDS: u64 = 100_000;
    // Each side waits for the other's rounds: the side that fails a check (or panics) lets
    // the other go for good on its way out, so the scope can join it and the failure is
    // reported instead of the test waiting forever.
    struct ReleaseOnDrop<'a>(&'a AtomicU64);
    impl Drop for ReleaseOnDrop<'_> {
        fn drop(&mut self) {
            self.0.store(u64::MAX, Release);
        }
    }
    for fs in designs() {
        let f = fs
            .create_file(fs.root(), "f", 0o600, 1000, 1000, FnAttr::constant("f"))
            .unwrap();
        let (start, done) = (AtomicU64::new(0), AtomicU64::new(0));
        let wait = |a: &AtomicU64, r: u64| {
            let mut spins = 0u32;
            // Acquire pairs with the Release stores below.
            while a.load(Acquire) < r {
                spins += 1;
                if spins.is_multiple_of(64) {
                    std::thread::yield_now();
                } else {
                    std::hint::spin_loop();
                }
            }
        };
        let set = |mode, uid| SetAttr {
            mode: Some(mode),
            uid: Some(uid),
            gid: None,
        };
        let chmod = SetAttr {
            mode: Some(0o644),
            ..Default::default()
        };
        let mut bad = 0;
        std::thread::scope(|s| {
            let _release = ReleaseOnDrop(&start);
            s.spawn(|| {
                let _release = ReleaseOnDrop(&done);
                for r in 1..=ROUNDS {
                    wait(&start, r);
                    let _ = fs.setattr_checked(&f, &chmod, &USER);
                    done.store(r, Release);
                }
            });
            for r in 1..=ROUNDS {
                fs.setattr(&f, &set(0o600, 1000)).unwrap();
                start.store(r, Release);
                fs.setattr(&f, &set(0o600, 2000)).unwrap();
                wait(&done, r);
                let a = fs.getattr(&f).unwrap();
                assert_eq!(a.uid, 2000);
                if a.mode & 0o7777 != 0o600 {
                    bad += 1;
                }
            }
        });
        assert_eq!(
            bad,
            0,
            "{:?}: chmod applied after the chown {bad} times",
            fs.locking()
        );
    }
}
