//! Unit tests of the file system below the VFS.

use super::*;
use scalevfs_primitives::Locking;
use std::sync::Arc;

fn setup(opts: TmpfsOptions) -> (Arc<Tmpfs>, Arc<SuperBlock>, InodeRef) {
    setup_with(opts, Locking::Scalable)
}

pub(crate) fn setup_with(
    opts: TmpfsOptions,
    locking: Locking,
) -> (Arc<Tmpfs>, Arc<SuperBlock>, InodeRef) {
    let fs = Arc::new(Tmpfs::new(opts));
    let sb = Arc::new(SuperBlock::new(1, fs.clone(), locking));
    let root = fs.fill_super(&sb).unwrap();
    (fs, sb, root)
}

pub(crate) fn names(fs: &Tmpfs, dir: &Inode, from: i64) -> Vec<(Vec<u8>, i64)> {
    let mut v = Vec::new();
    fs.readdir(dir, 1, from, &mut |e| {
        v.push((e.name.to_vec(), e.next_pos));
        true
    })
    .unwrap();
    v
}

#[test]
fn names_are_stored_once_in_thin_buffers() {
    // Regression guard for memory per file: an 8-byte hash key, a 16-byte cookie value.
    assert_eq!(std::mem::size_of::<ThinName>(), 8);
    assert_eq!(std::mem::size_of::<(NameRef, InodeRef)>(), 16);
    let (fs, _sb, root) = setup(TmpfsOptions::default());
    let long = [b'x'; NAME_MAX];
    for n in [&b"a"[..], &long[..], "é".as_bytes()] {
        fs.create(&root, n, libc::S_IFREG | 0o644, 0, 0).unwrap();
        assert!(fs.lookup(&root, n).unwrap().is_some());
    }
    let mut got: Vec<_> = names(&fs, &root, 0).into_iter().map(|e| e.0).collect();
    got.sort();
    let mut want = vec![
        b".".to_vec(),
        b"..".to_vec(),
        b"a".to_vec(),
        long.to_vec(),
        "é".as_bytes().to_vec(),
    ];
    want.sort();
    assert_eq!(got, want);
    let too_long = [b'x'; NAME_MAX + 1];
    let r = fs.create(&root, &too_long, libc::S_IFREG | 0o644, 0, 0);
    assert_eq!(r.err(), Some(Errno::ENAMETOOLONG));
    assert!(fs.lookup(&root, &too_long).unwrap().is_none());
    let li = fs.lookup(&root, &long).unwrap().unwrap();
    fs.unlink(&root, &long, &li).unwrap();
    assert!(fs.lookup(&root, &long).unwrap().is_none());
    assert!(fs.lookup(&root, b"a").unwrap().is_some());
}

#[test]
fn sparse_files_read_holes_as_zeros() {
    let (fs, _sb, root) = setup(TmpfsOptions::default());
    let f = fs.create(&root, b"f", libc::S_IFREG | 0o644, 0, 0).unwrap();
    assert_eq!(fs.write(&f, 1 << 30, b"end").unwrap(), 3);
    assert_eq!(f.size(), (1 << 30) + 3);
    assert_eq!(fs.blocks(&f), 8, "one page allocated");
    let mut buf = [1u8; 10];
    assert_eq!(fs.read(&f, 4096 * 7, &mut buf).unwrap(), 10);
    assert_eq!(buf, [0; 10]);
    assert_eq!(fs.read(&f, (1 << 30) + 1, &mut buf).unwrap(), 2);
    assert_eq!(&buf[..2], b"nd");
    assert_eq!(fs.seek_data(&f, 0, true).unwrap(), 1 << 30);
    assert_eq!(fs.seek_data(&f, 0, false).unwrap(), 0);
    assert_eq!(fs.seek_data(&f, 1 << 30, false).unwrap(), (1 << 30) + 3);
    // Write across a page boundary, then truncate into the middle of it.
    fs.write(&f, 4090, &[9u8; 20]).unwrap();
    fs.setsize(&f, 4095).unwrap();
    assert_eq!(fs.blocks(&f), 8);
    fs.setsize(&f, 8192).unwrap();
    let mut b2 = [7u8; 8];
    fs.read(&f, 4090, &mut b2).unwrap();
    assert_eq!(
        b2,
        [9, 9, 9, 9, 9, 0, 0, 0],
        "truncated bytes read back as zeros"
    );
}

#[test]
fn readdir_cookies_resume_after_changes() {
    let (fs, _sb, root) = setup_with(TmpfsOptions::default(), Locking::Legacy);
    for n in [b"a", b"b", b"c"] {
        fs.create(&root, n, libc::S_IFREG | 0o644, 0, 0).unwrap();
    }
    let all = names(&fs, &root, 0);
    let got: Vec<_> = all.iter().map(|(n, _)| n.clone()).collect();
    assert_eq!(
        got,
        vec![
            b".".to_vec(),
            b"..".to_vec(),
            b"c".to_vec(),
            b"b".to_vec(),
            b"a".to_vec()
        ],
        "newest first, as Linux lists tmpfs directories"
    );
    // Resume after "c"; remove "b" and add "d" meanwhile: only "a" follows. "d" is newer
    // than the resume point, and "b" is gone: nothing is returned twice.
    let after_c = all[2].1;
    let b = fs.lookup(&root, b"b").unwrap().unwrap();
    fs.unlink(&root, b"b", &b).unwrap();
    fs.create(&root, b"d", libc::S_IFREG | 0o644, 0, 0).unwrap();
    let rest: Vec<_> = names(&fs, &root, after_c)
        .into_iter()
        .map(|(n, _)| n)
        .collect();
    assert_eq!(rest, vec![b"a".to_vec()]);
    // Positions: 2 is "the newest entry", a cookie resumes at that entry, the end is EOD.
    let from =
        |pos| -> Vec<Vec<u8>> { names(&fs, &root, pos).into_iter().map(|(n, _)| n).collect() };
    assert_eq!(from(2), vec![b"d".to_vec(), b"c".to_vec(), b"a".to_vec()]);
    assert_eq!(from(DIR_OFFSET_MIN as i64), vec![b"a".to_vec()]);
    assert!(from(DIR_OFFSET_EOD as i64).is_empty());
    assert_eq!(root.stat().size, 40 + 3 * 20);
}

#[test]
fn link_counts_and_rename() {
    for locking in [Locking::Scalable, Locking::Legacy] {
        link_counts_and_rename_with(locking);
    }
}

fn link_counts_and_rename_with(locking: Locking) {
    let (fs, _sb, root) = setup_with(TmpfsOptions::default(), locking);
    let nlink = |i: &Inode| i.stat().nlink;
    let d1 = fs
        .create(&root, b"d1", libc::S_IFDIR | 0o755, 0, 0)
        .unwrap();
    let d2 = fs
        .create(&root, b"d2", libc::S_IFDIR | 0o755, 0, 0)
        .unwrap();
    assert_eq!(nlink(&root), 4);
    let sub = fs.create(&d1, b"sub", libc::S_IFDIR | 0o755, 0, 0).unwrap();
    let f = fs.create(&d2, b"f", libc::S_IFREG | 0o644, 0, 0).unwrap();
    fs.link(&d2, b"g", &f).unwrap();
    assert_eq!(f.nlink(), 2);
    assert_eq!(fs.link(&d2, b"g", &f), Err(Errno::EEXIST));
    fs.rename(&d1, b"sub", &d2, b"sub", 0).unwrap();
    assert_eq!((nlink(&d1), nlink(&d2)), (2, 3));
    // Exchange a directory and a file across directories: parents' counts follow.
    let x = fs.create(&d1, b"x", libc::S_IFREG | 0o644, 0, 0).unwrap();
    fs.rename(&d1, b"x", &d2, b"sub", libc::RENAME_EXCHANGE)
        .unwrap();
    assert_eq!((nlink(&d1), nlink(&d2)), (3, 2));
    assert!(Erc::ptr_eq(&fs.lookup(&d1, b"x").unwrap().unwrap(), &sub));
    assert!(Erc::ptr_eq(&fs.lookup(&d2, b"sub").unwrap().unwrap(), &x));
    assert_eq!(fs.rmdir(&root, b"d1", &d1), Err(Errno::ENOTEMPTY));
    fs.rmdir(&d1, b"x", &sub).unwrap();
    assert_eq!((nlink(&sub), nlink(&d1)), (0, 2));
}

#[test]
fn limits_give_enospc_and_eviction_returns_space() {
    let (fs, sb, root) = setup(TmpfsOptions {
        size_limit: Some(3 * PAGE as u64),
        inode_limit: Some(3),
    });
    let f = fs.create(&root, b"f", libc::S_IFREG | 0o644, 0, 0).unwrap();
    assert_eq!(fs.write(&f, 0, &[1u8; 5 * PAGE]).unwrap(), 3 * PAGE);
    assert_eq!(fs.write(&f, 4 * PAGE as u64, b"x"), Err(Errno::ENOSPC));
    assert_eq!(fs.fallocate(&f, 0, 0, 4 * PAGE as u64), Err(Errno::ENOSPC));
    fs.create(&root, b"g", libc::S_IFREG | 0o644, 0, 0).unwrap();
    assert_eq!(
        fs.create(&root, b"h", libc::S_IFREG | 0o644, 0, 0).err(),
        Some(Errno::ENOSPC)
    );
    assert_eq!(fs.used_pages(), 3);
    // Punching a hole gives its whole pages back; a cut page stays.
    let punch = libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE;
    fs.fallocate(&f, punch, 100, 2 * PAGE as u64).unwrap();
    assert_eq!(
        (fs.used_pages(), fs.blocks(&f), f.size()),
        (2, 16, 3 * PAGE as u64)
    );
    assert_eq!(fs.write(&f, PAGE as u64, b"x").unwrap(), 1);
    assert_eq!(fs.used_pages(), 3);
    fs.unlink(&root, b"f", &f).unwrap();
    assert_eq!(fs.used_pages(), 3, "still open");
    drop(f);
    assert_eq!(fs.used_pages(), 0, "evicted at the last reference");
    fs.create(&root, b"h", libc::S_IFREG | 0o644, 0, 0).unwrap();
    assert_eq!(sb.inode_count(), 3);
    fs.kill_sb(&root);
    drop(root);
    assert_eq!(sb.inode_count(), 0, "kill_sb drops the whole tree");
}

#[test]
fn symlinks_keep_their_target() {
    let (fs, _sb, root) = setup(TmpfsOptions::default());
    let l = fs.symlink(&root, b"l", b"../target", 5, 6).unwrap();
    assert_eq!(fs.readlink(&l).unwrap(), b"../target");
    assert_eq!((l.size(), l.uid(), l.gid()), (9, 5, 6));
    assert_eq!(fs.readlink(&root), Err(Errno::EINVAL));
    let mut b = [0u8; 1];
    assert_eq!(fs.read(&root, 0, &mut b), Err(Errno::EISDIR));
}

#[test]
fn the_xattr_flag_follows_the_attributes_and_eviction_drops_them() {
    let (fs, _sb, root) = setup(TmpfsOptions::default());
    let f = fs.create(&root, b"f", libc::S_IFREG | 0o644, 0, 0).unwrap();
    let has = |i: &Inode| fs.xattrs.contains(i.ino);
    assert!(!f.has_flag(HAS_XATTRS) && !has(&f));
    fs.setxattr(&f, b"user.a", b"1", 0).unwrap();
    fs.setxattr(&f, b"user.b", b"2", 0).unwrap();
    assert!(f.has_flag(HAS_XATTRS) && has(&f));
    fs.removexattr(&f, b"user.a").unwrap();
    assert!(f.has_flag(HAS_XATTRS), "one attribute left");
    fs.removexattr(&f, b"user.b").unwrap();
    assert!(!f.has_flag(HAS_XATTRS) && !has(&f));
    // A failed replace leaves no entry and no flag.
    assert_eq!(
        fs.setxattr(&f, b"user.c", b"3", libc::XATTR_REPLACE),
        Err(Errno::ENODATA)
    );
    assert!(!f.has_flag(HAS_XATTRS) && !has(&f));
    fs.setxattr(&f, b"user.c", b"3", 0).unwrap();
    fs.evict_inode(&f);
    assert!(!has(&f), "eviction dropped the attributes");
}

/// Creates, mkdirs, unlinks and rmdirs of distinct names in one directory from several
/// threads (each under the directory's `rwsem`, as the VFS calls them): afterwards the
/// directory's size, link count and times are what the surviving entries say, as Linux's
/// tmpfs would report them.
#[test]
fn directory_stat_after_concurrent_creates_and_unlinks_stress() {
    const THREADS: usize = 4;
    const FILES: usize = 60;
    const DIRS: usize = 10;
    let (fs, _sb, root) = setup(TmpfsOptions::default());
    let start = root.stat().mtime;
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let (fs, root) = (&fs, &root);
            s.spawn(move || {
                let name = |k: &str, i: usize| format!("{k}{t}-{i}").into_bytes();
                for i in 0..FILES {
                    let _l = root.rwsem.write();
                    fs.create(root, &name("f", i), libc::S_IFREG | 0o644, 0, 0)
                        .unwrap();
                }
                for i in 0..DIRS {
                    let _l = root.rwsem.write();
                    fs.create(root, &name("d", i), libc::S_IFDIR | 0o755, 0, 0)
                        .unwrap();
                }
                // Remove every other file and the first half of the directories.
                for i in (0..FILES).step_by(2) {
                    let _l = root.rwsem.write();
                    let f = fs.lookup(root, &name("f", i)).unwrap().unwrap();
                    fs.unlink(root, &name("f", i), &f).unwrap();
                    assert_eq!(f.nlink(), 0);
                }
                for i in 0..DIRS / 2 {
                    let _l = root.rwsem.write();
                    let d = fs.lookup(root, &name("d", i)).unwrap().unwrap();
                    fs.rmdir(root, &name("d", i), &d).unwrap();
                }
            });
        }
    });
    let live_files = THREADS * FILES / 2;
    let live_dirs = THREADS * (DIRS - DIRS / 2);
    let st = root.stat();
    assert_eq!(
        st.size as u64,
        (2 + live_files + live_dirs) as u64 * BOGO_DIRENT_SIZE
    );
    assert_eq!(st.nlink as usize, 2 + live_dirs);
    assert!(st.mtime >= start && st.ctime == st.mtime);
    assert_eq!(names(&fs, &root, 0).len(), 2 + live_files + live_dirs);
}
