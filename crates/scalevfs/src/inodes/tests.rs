//! The inode-handle API driven directly (no FUSE), with Linux's errno values.

use super::*;
use crate::{Credentials, Process, VfsOptions};
use scalevfs_vfs::{Errno, Timespec};
use std::sync::Arc;

const ME: Owner = Owner {
    uid: 1000,
    gid: 1000,
};

fn vfs() -> Arc<Vfs> {
    Vfs::new(VfsOptions::default())
}

fn names(vfs: &Vfs, dir: &Node) -> Vec<(Vec<u8>, i64)> {
    let f = vfs.core().node_open(dir, libc::O_RDONLY).unwrap();
    let mut v = Vec::new();
    vfs.core()
        .readdir_from(&f, 0, &mut |e| {
            v.push((e.name.to_vec(), e.next_pos));
            true
        })
        .unwrap();
    v
}

#[test]
fn new_files_belong_to_the_creator_and_setgid_dirs_pass_their_group_on() {
    let vfs = vfs();
    let c = vfs.core();
    let root = c.root_node();
    let (f, _) = c.node_create(&root, b"f", 0o644, libc::O_RDWR, ME).unwrap();
    let st = f.stat();
    assert_eq!(
        (st.uid, st.gid, st.mode),
        (1000, 1000, libc::S_IFREG | 0o644)
    );
    let d = c
        .node_mkdir(&root, b"sg", 0o2775, Owner { uid: 0, gid: 50 })
        .unwrap();
    assert_eq!(
        d.stat().mode,
        libc::S_IFDIR | 0o775,
        "mkdir ignores S_ISGID"
    );
    let sgid = SetAttr {
        mode: Some(0o2775),
        ..SetAttr::default()
    };
    c.node_setattr(&d, &sgid).unwrap();
    let inner = c.node_mkdir(&d, b"sub", 0o755, ME).unwrap();
    let st = inner.stat();
    assert_eq!(
        (st.uid, st.gid),
        (1000, 50),
        "group from the setgid directory"
    );
    assert_eq!(
        st.mode & libc::S_ISGID,
        libc::S_ISGID,
        "subdirectory inherits setgid"
    );
    let file = c
        .node_mknod(&d, b"file", libc::S_IFREG | 0o640, 0, ME)
        .unwrap();
    let st = file.stat();
    assert_eq!(
        (st.gid, st.mode & libc::S_ISGID),
        (50, 0),
        "files get the group only"
    );
    let l = c.node_symlink(&d, b"l", b"target", ME).unwrap();
    assert_eq!(l.stat().gid, 50);
    assert_eq!(c.node_readlink(&l).unwrap(), b"target");
    // A process sees the same tree.
    let p = Process::new(&vfs, Credentials::root());
    assert_eq!(p.stat("/sg/sub").unwrap().uid, 1000);
}

#[test]
fn namespace_errnos_match_linux() {
    let vfs = vfs();
    let c = vfs.core();
    let root = c.root_node();
    let d = c.node_mkdir(&root, b"d", 0o755, ME).unwrap();
    let (f, _) = c
        .node_create(&root, b"f", 0o644, libc::O_RDONLY, ME)
        .unwrap();
    assert_eq!(c.node_lookup(&root, b"nope").err(), Some(Errno::ENOENT));
    assert_eq!(c.node_lookup(&f, b"x").err(), Some(Errno::ENOTDIR));
    assert_eq!(
        c.node_mkdir(&root, b"d", 0o755, ME).err(),
        Some(Errno::EEXIST)
    );
    assert_eq!(
        c.node_mkdir(&root, b"..", 0o755, ME).err(),
        Some(Errno::EEXIST)
    );
    assert_eq!(
        c.node_mkdir(&f, b"x", 0o755, ME).err(),
        Some(Errno::ENOTDIR)
    );
    assert_eq!(
        c.node_lookup(&root, &[b'a'; 256]).err(),
        Some(Errno::ENAMETOOLONG)
    );
    assert_eq!(c.node_unlink(&root, b"d").err(), Some(Errno::EISDIR));
    assert_eq!(c.node_rmdir(&root, b"f").err(), Some(Errno::ENOTDIR));
    assert_eq!(c.node_rmdir(&d, b".").err(), Some(Errno::EINVAL));
    c.node_mknod(&d, b"fifo", libc::S_IFIFO | 0o600, 0, ME)
        .unwrap();
    assert_eq!(
        c.node_lookup(&d, b"fifo").unwrap().stat().mode & libc::S_IFMT,
        libc::S_IFIFO
    );
    assert_eq!(c.node_rmdir(&root, b"d").err(), Some(Errno::ENOTEMPTY));
    let dev = libc::makedev(250, 3);
    let chr = c
        .node_mknod(&d, b"chr", libc::S_IFCHR | 0o600, dev, ME)
        .unwrap();
    assert_eq!(
        (chr.stat().mode & libc::S_IFMT, chr.stat().rdev),
        (libc::S_IFCHR, dev)
    );
    assert_eq!(
        c.node_mknod(&d, b"bad", 0o170000 | 0o600, 0, ME).err(),
        Some(Errno::EINVAL)
    );
    assert_eq!(c.node_link(&d, &root, b"dl").err(), Some(Errno::EPERM));
    let l = c.node_link(&f, &d, b"hard").unwrap();
    assert_eq!(l.ino(), f.ino());
    assert_eq!(f.stat().nlink, 2);
    assert_eq!(c.node_link(&f, &d, b"hard").err(), Some(Errno::EEXIST));
    assert_eq!(c.node_readlink(&f).err(), Some(Errno::EINVAL));
    assert_eq!(c.node_open(&d, libc::O_WRONLY).err(), Some(Errno::EISDIR));
    assert_eq!(
        c.node_open(&f, libc::O_RDONLY | libc::O_DIRECTORY).err(),
        Some(Errno::ENOTDIR)
    );
    let s = c.node_symlink(&root, b"s", b"f", ME).unwrap();
    assert_eq!(c.node_open(&s, libc::O_RDONLY).err(), Some(Errno::ELOOP));
    // Unlinked with the last link gone: no new links, no new entries in a removed dir.
    c.node_unlink(&root, b"f").unwrap();
    c.node_unlink(&d, b"hard").unwrap();
    assert_eq!(f.stat().nlink, 0);
    assert_eq!(c.node_link(&f, &root, b"again").err(), Some(Errno::ENOENT));
    c.node_unlink(&d, b"fifo").unwrap();
    c.node_unlink(&d, b"chr").unwrap();
    c.node_rmdir(&root, b"d").unwrap();
    assert_eq!(c.node_mkdir(&d, b"x", 0o755, ME).err(), Some(Errno::ENOENT));
}

#[test]
fn rename_flags_follow_linux() {
    let vfs = vfs();
    let c = vfs.core();
    let root = c.root_node();
    let a = c.node_mknod(&root, b"a", 0o644, 0, ME).unwrap();
    let b = c.node_mkdir(&root, b"b", 0o755, ME).unwrap();
    let sub = c.node_mkdir(&b, b"sub", 0o755, ME).unwrap();
    assert_eq!(
        c.node_rename(&root, b"a", &root, b"b", libc::RENAME_NOREPLACE, ME)
            .err(),
        Some(Errno::EEXIST)
    );
    assert_eq!(
        c.node_rename(&root, b"a", &root, b"zz", libc::RENAME_EXCHANGE, ME)
            .err(),
        Some(Errno::ENOENT)
    );
    assert_eq!(
        c.node_rename(&root, b"a", &root, b"b", 1 << 7, ME).err(),
        Some(Errno::EINVAL)
    );
    assert_eq!(
        c.node_rename(&root, b"a", &root, b"b", 0, ME).err(),
        Some(Errno::EISDIR)
    );
    assert_eq!(
        c.node_rename(&root, b"b", &sub, b"x", 0, ME).err(),
        Some(Errno::EINVAL),
        "a directory into itself"
    );
    c.node_rename(&root, b"a", &root, b"b", libc::RENAME_EXCHANGE, ME)
        .unwrap();
    assert_eq!(c.node_lookup(&root, b"b").unwrap().ino(), a.ino());
    assert_eq!(c.node_lookup(&root, b"a").unwrap().ino(), b.ino());
    // The node follows its inode across the rename.
    assert_eq!(
        c.node_rename(&root, b"a", &sub, b"moved", 0, ME).err(),
        Some(Errno::EINVAL),
        "\"a\" is now the directory holding sub"
    );
    c.node_rename(&root, b"b", &sub, b"moved", 0, ME).unwrap();
    assert_eq!(a.stat().nlink, 1);
    assert_eq!(c.node_lookup(&sub, b"moved").unwrap().ino(), a.ino());
}

#[test]
fn setattr_changes_size_owner_mode_and_times() {
    let vfs = vfs();
    let c = vfs.core();
    let root = c.root_node();
    let (f, file) = c.node_create(&root, b"f", 0o644, libc::O_RDWR, ME).unwrap();
    assert_eq!(c.file_write_at(&file, b"hello", 0).unwrap(), 5);
    c.node_setattr(
        &f,
        &SetAttr {
            size: Some(2),
            ..SetAttr::default()
        },
    )
    .unwrap();
    let mut buf = [0u8; 8];
    assert_eq!(c.file_read_at(&file, &mut buf, 0).unwrap(), 2);
    assert_eq!(&buf[..2], b"he");
    c.node_setattr(
        &f,
        &SetAttr {
            mode: Some(0o4755),
            uid: Some(7),
            gid: Some(8),
            atime: Some(SetTime::At(Timespec { sec: 10, nsec: 5 })),
            mtime: Some(SetTime::At(Timespec { sec: 20, nsec: 0 })),
            ..SetAttr::default()
        },
    )
    .unwrap();
    let st = f.stat();
    assert_eq!((st.uid, st.gid, st.mode), (7, 8, libc::S_IFREG | 0o4755));
    assert_eq!((st.atime.sec, st.atime.nsec, st.mtime.sec), (10, 5, 20));
    c.node_setattr(
        &f,
        &SetAttr {
            mtime: Some(SetTime::Now),
            ..SetAttr::default()
        },
    )
    .unwrap();
    assert!(f.stat().mtime.sec > 20);
    assert_eq!(f.stat().atime.sec, 10, "atime omitted");
    // chown clears S_ISUID on a regular file, as Linux's notify_change.
    c.node_setattr(
        &f,
        &SetAttr {
            uid: Some(9),
            ..SetAttr::default()
        },
    )
    .unwrap();
    assert_eq!(f.stat().mode & 0o7777, 0o755);
    let d = c.node_mkdir(&root, b"d", 0o755, ME).unwrap();
    let trunc_dir = SetAttr {
        size: Some(0),
        ..SetAttr::default()
    };
    assert_eq!(c.node_setattr(&d, &trunc_dir).err(), Some(Errno::EISDIR));
    let bad = SetAttr {
        atime: Some(SetTime::At(Timespec {
            sec: 0,
            nsec: 2_000_000_000,
        })),
        ..SetAttr::default()
    };
    assert_eq!(c.node_setattr(&f, &bad).err(), Some(Errno::EINVAL));
    // fallocate and fsync on an open file description.
    c.fallocate(&file, 0, 0, 8192).unwrap();
    assert_eq!(f.stat().size, 8192);
    c.fsync(&file).unwrap();
}

#[test]
fn readdir_cookies_are_stable() {
    let vfs = vfs();
    let c = vfs.core();
    let root = c.root_node();
    let d = c.node_mkdir(&root, b"d", 0o755, ME).unwrap();
    for i in 0..20 {
        c.node_mknod(&d, format!("f{i}").as_bytes(), 0o644, 0, ME)
            .unwrap();
    }
    let all = names(&vfs, &d);
    assert_eq!(all.len(), 22, ". and .. and 20 files");
    // Resume from every cookie: the rest of the listing, in order.
    let f = c.node_open(&d, libc::O_RDONLY).unwrap();
    for (k, (_, cookie)) in all.iter().enumerate() {
        let mut rest = Vec::new();
        c.readdir_from(&f, *cookie, &mut |e| {
            rest.push(e.name.to_vec());
            true
        })
        .unwrap();
        let want: Vec<Vec<u8>> = all[k + 1..].iter().map(|(n, _)| n.clone()).collect();
        assert_eq!(rest, want);
    }
    // Removing entries does not disturb the cookies of the others.
    c.node_unlink(&d, &all[5].0).unwrap();
    let mut rest = Vec::new();
    c.readdir_from(&f, all[3].1, &mut |e| {
        rest.push(e.name.to_vec());
        true
    })
    .unwrap();
    assert_eq!(rest[0], all[4].0);
    assert_eq!(rest[1], all[6].0);
}

#[test]
fn nodes_keep_unlinked_inodes_alive_and_free_them_last() {
    let vfs = vfs();
    let c = vfs.core();
    let root = c.root_node();
    let base = vfs.inode_count();
    let (f, file) = c.node_create(&root, b"f", 0o644, libc::O_RDWR, ME).unwrap();
    let d = c.node_mkdir(&root, b"d", 0o755, ME).unwrap();
    c.file_write_at(&file, b"data", 0).unwrap();
    assert_eq!(vfs.inode_count(), base + 2);
    c.node_unlink(&root, b"f").unwrap();
    c.node_rmdir(&root, b"d").unwrap();
    assert_eq!(vfs.inode_count(), base + 2, "still referenced");
    let mut buf = [0u8; 4];
    assert_eq!(c.file_read_at(&file, &mut buf, 0).unwrap(), 4);
    drop(d);
    drop(file);
    vfs.drop_caches();
    assert_eq!(vfs.inode_count(), base + 1, "the node still holds the file");
    drop(f);
    vfs.drop_caches();
    assert_eq!(vfs.inode_count(), base);
}

#[test]
fn locks_through_node_contexts_use_any_owner() {
    use scalevfs_vfs::locks::{LockOwner, LockRequest, LockType, OFFSET_MAX};
    let vfs = vfs();
    let c = vfs.core();
    let root = c.root_node();
    let f = c.node_mknod(&root, b"f", 0o644, 0, ME).unwrap();
    let again = c.node_lookup(&root, b"f").unwrap();
    let req = |owner, ty| LockRequest {
        owner: LockOwner::Process(owner),
        pid: owner as i32,
        ty,
        start: 0,
        end: OFFSET_MAX,
    };
    let ctx = vfs.lock_context(&f);
    assert!(std::ptr::eq(ctx, vfs.lock_context(&again)), "one per inode");
    vfs.locks()
        .setlk(ctx, &req(1, LockType::Write), None)
        .unwrap();
    assert_eq!(
        vfs.locks().setlk(ctx, &req(2, LockType::Read), None).err(),
        Some(Errno::EAGAIN)
    );
    assert_eq!(
        vfs.locks()
            .getlk(ctx, &req(2, LockType::Read))
            .map(|i| i.pid),
        Some(1)
    );
    vfs.locks().release_posix(ctx, 1);
    vfs.locks()
        .setlk(ctx, &req(2, LockType::Read), None)
        .unwrap();
}

#[test]
fn statfs_reports_limits_and_use() {
    let vfs = Vfs::new(VfsOptions {
        size_limit: Some(1 << 20),
        inode_limit: Some(100),
        ..VfsOptions::default()
    });
    let c = vfs.core();
    let root = c.root_node();
    let before = vfs.statfs();
    assert_eq!(
        (before.blocks, before.files, before.bsize),
        (256, 100, 4096)
    );
    let (_, file) = c.node_create(&root, b"f", 0o644, libc::O_RDWR, ME).unwrap();
    c.file_write_at(&file, &[1u8; 8192], 0).unwrap();
    let after = vfs.statfs();
    assert_eq!(after.bfree, before.bfree - 2);
    assert_eq!(after.ffree, before.ffree - 1);
}

/// Sets `node`'s `chattr` flags (as `FS_IOC_SETFLAGS` by root would).
fn chattr(node: &Node, flags: u32) {
    node.inode().set_fs_flags(flags);
}

fn size(n: u64) -> SetAttr {
    SetAttr {
        size: Some(n),
        ..SetAttr::default()
    }
}

#[test]
fn an_immutable_file_refuses_every_change_through_the_handle_api() {
    use scalevfs_vfs::fileattr::FS_IMMUTABLE_FL;
    let vfs = vfs();
    let c = vfs.core();
    let root = c.root_node();
    let (f, _) = c.node_create(&root, b"f", 0o644, libc::O_RDWR, ME).unwrap();
    let d = c.node_mkdir(&root, b"d", 0o755, ME).unwrap();
    chattr(&f, FS_IMMUTABLE_FL);
    let eperm = Err(Errno::EPERM);
    // Truncation by name (truncate, O_TRUNC) is refused; through a file opened before
    // the flag was set (ftruncate, FUSE's FATTR_FH) it is not, as on Linux.
    assert_eq!(c.node_setattr(&f, &size(0)), eperm);
    let by_file = SetAttr {
        by_file: true,
        ..size(0)
    };
    assert_eq!(c.node_setattr(&f, &by_file), Ok(()), "ftruncate's rule");
    chattr(&f, 0);
    c.file_write_at(&c.node_open(&f, libc::O_RDWR).unwrap(), b"abc", 0)
        .unwrap();
    chattr(&f, FS_IMMUTABLE_FL);
    for a in [
        SetAttr {
            mode: Some(0o600),
            ..SetAttr::default()
        },
        SetAttr {
            uid: Some(0),
            ..SetAttr::default()
        },
        SetAttr {
            mtime: Some(SetTime::Now),
            atime: Some(SetTime::Now),
            ..SetAttr::default()
        },
        SetAttr {
            mtime: Some(SetTime::At(Timespec { sec: 1, nsec: 0 })),
            ..SetAttr::default()
        },
        SetAttr::default(), // chown(f, -1, -1)
    ] {
        assert_eq!(c.node_setattr(&f, &a), eperm, "{a:?}");
    }
    assert_eq!(c.node_open(&f, libc::O_WRONLY).map(|_| ()), eperm);
    assert_eq!(
        c.node_open(&f, libc::O_RDWR | libc::O_APPEND).map(|_| ()),
        eperm
    );
    assert!(c.node_open(&f, libc::O_RDONLY).is_ok());
    assert_eq!(c.node_link(&f, &root, b"h").map(|_| ()), eperm);
    assert_eq!(c.node_unlink(&root, b"f"), eperm);
    assert_eq!(c.node_rename(&root, b"f", &root, b"g", 0, ME), eperm);
    assert_eq!(c.node_rename(&root, b"f", &d, b"f", 0, ME), eperm);
    let st = f.stat();
    assert_eq!((st.size, st.mode & 0o7777, st.nlink), (3, 0o644, 1));
    chattr(&f, 0);
    c.node_setattr(&f, &size(0)).unwrap();
    c.node_unlink(&root, b"f").unwrap();
}

#[test]
fn an_immutable_directory_gets_no_new_names_and_loses_none() {
    use scalevfs_vfs::fileattr::FS_IMMUTABLE_FL;
    let vfs = vfs();
    let c = vfs.core();
    let root = c.root_node();
    let d = c.node_mkdir(&root, b"d", 0o755, ME).unwrap();
    let (x, _) = c.node_create(&d, b"x", 0o644, libc::O_RDWR, ME).unwrap();
    c.node_mkdir(&d, b"sub", 0o755, ME).unwrap();
    let e = c.node_mkdir(&root, b"e", 0o755, ME).unwrap();
    chattr(&d, FS_IMMUTABLE_FL);
    let eperm = Err(Errno::EPERM);
    let new = |r: scalevfs_vfs::SysResult<Node>| r.map(|_| ());
    assert_eq!(
        c.node_create(&d, b"new", 0o644, libc::O_RDWR, ME)
            .map(|_| ()),
        eperm
    );
    assert_eq!(
        new(c.node_mknod(&d, b"n", libc::S_IFIFO | 0o644, 0, ME)),
        eperm
    );
    assert_eq!(new(c.node_mkdir(&d, b"sub2", 0o755, ME)), eperm);
    assert_eq!(new(c.node_symlink(&d, b"l", b"x", ME)), eperm);
    assert_eq!(new(c.node_link(&x, &d, b"x2")), eperm);
    assert_eq!(
        c.node_tmpfile(&d, 0o644, libc::O_RDWR, ME).map(|_| ()),
        eperm
    );
    assert_eq!(c.node_rename(&root, b"e", &d, b"e", 0, ME), eperm);
    assert_eq!(c.node_unlink(&d, b"x"), eperm);
    assert_eq!(c.node_rmdir(&d, b"sub"), eperm);
    assert_eq!(c.node_rename(&d, b"x", &d, b"y", 0, ME), eperm);
    assert_eq!(c.node_rename(&d, b"x", &e, b"x", 0, ME), eperm);
    assert_eq!(c.node_rmdir(&root, b"d"), eperm);
    // Its entries themselves are not immutable: a link elsewhere is fine.
    c.node_link(&x, &e, b"x2").unwrap();
    let mut n: Vec<_> = names(&vfs, &d).into_iter().map(|(n, _)| n).collect();
    n.sort();
    assert_eq!(n, [&b"."[..], b"..", b"sub", b"x"]);
    chattr(&d, 0);
    c.node_mkdir(&d, b"sub2", 0o755, ME).unwrap();
}

#[test]
fn an_append_only_file_is_only_appended_to_through_the_handle_api() {
    use scalevfs_vfs::fileattr::FS_APPEND_FL;
    let vfs = vfs();
    let c = vfs.core();
    let root = c.root_node();
    let (f, w) = c.node_create(&root, b"f", 0o644, libc::O_RDWR, ME).unwrap();
    c.file_write_at(&w, b"abc", 0).unwrap();
    chattr(&f, FS_APPEND_FL);
    let eperm = Err(Errno::EPERM);
    assert_eq!(c.node_open(&f, libc::O_WRONLY).map(|_| ()), eperm);
    assert_eq!(c.node_open(&f, libc::O_RDWR).map(|_| ()), eperm);
    assert!(c.node_open(&f, libc::O_RDONLY).is_ok());
    let a = c.node_open(&f, libc::O_WRONLY | libc::O_APPEND).unwrap();
    assert_eq!(c.file_write_at(&a, b"Z", 0), Ok(1));
    // Truncation: by name (truncate, O_TRUNC) or through a file (ftruncate).
    assert_eq!(c.node_setattr(&f, &size(0)), eperm);
    let by_file = SetAttr {
        by_file: true,
        ..size(1)
    };
    assert_eq!(c.node_setattr(&f, &by_file), eperm);
    assert_eq!(
        c.node_setattr(
            &f,
            &SetAttr {
                mode: Some(0o600),
                ..SetAttr::default()
            }
        ),
        eperm
    );
    // "Now" for both times is a write, which an append-only file allows.
    let now = SetAttr {
        atime: Some(SetTime::Now),
        mtime: Some(SetTime::Now),
        ..SetAttr::default()
    };
    assert_eq!(c.node_setattr(&f, &now), Ok(()));
    assert_eq!(c.node_link(&f, &root, b"h").map(|_| ()), eperm);
    assert_eq!(c.node_unlink(&root, b"f"), eperm);
    assert_eq!(c.node_rename(&root, b"f", &root, b"g", 0, ME), eperm);
    assert_eq!(f.stat().size, 4);
    chattr(&f, 0);
    c.node_setattr(&f, &size(0)).unwrap();
}
