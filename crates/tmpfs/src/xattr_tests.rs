//! Extended attributes: Linux's semantics, the table's memory (what it frees and when),
//! and readers racing writers and evictions on inodes that share a bucket.

use super::tests::setup_with;
use super::*;
use crate::xattr_table::XattrTable;
use scalevfs_primitives::{epoch, Locking};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// A tmpfs whose attribute table has `2^bits` buckets.
fn setup_bits(bits: u32) -> (Arc<Tmpfs>, Arc<SuperBlock>, InodeRef) {
    let mut fs = Tmpfs::new(TmpfsOptions::default());
    fs.xattrs = XattrTable::with_bits(bits);
    let fs = Arc::new(fs);
    let sb = Arc::new(SuperBlock::new(1, fs.clone(), Locking::Scalable));
    let root = fs.fill_super(&sb).unwrap();
    (fs, sb, root)
}

fn file(fs: &Tmpfs, root: &Inode, name: &str) -> InodeRef {
    fs.create(root, name.as_bytes(), libc::S_IFREG | 0o644, 0, 0)
        .unwrap()
}

/// Flushes this thread's retired objects until `done`, for at most a minute (other
/// tests' threads may be pinned and hold a grace period back: a shuttle test's tasks
/// share one thread, which stays pinned while they interleave).
fn flush_until(done: impl Fn() -> bool) -> bool {
    let start = std::time::Instant::now();
    while start.elapsed() < std::time::Duration::from_secs(60) {
        epoch::flush();
        if done() {
            return true;
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    false
}

#[test]
fn create_replace_and_missing_names_give_linux_errors() {
    let (fs, _sb, root) = setup_with(TmpfsOptions::default(), Locking::Scalable);
    let f = file(&fs, &root, "f");
    assert_eq!(fs.getxattr(&f, b"user.a"), Err(Errno::ENODATA));
    assert_eq!(fs.listxattr(&f), Ok(vec![]));
    assert_eq!(fs.removexattr(&f, b"user.a"), Err(Errno::ENODATA));
    assert_eq!(
        fs.setxattr(&f, b"user.a", b"1", libc::XATTR_REPLACE),
        Err(Errno::ENODATA)
    );
    fs.setxattr(&f, b"user.a", b"1", libc::XATTR_CREATE)
        .unwrap();
    assert_eq!(
        fs.setxattr(&f, b"user.a", b"2", libc::XATTR_CREATE),
        Err(Errno::EEXIST)
    );
    assert_eq!(fs.getxattr(&f, b"user.a"), Ok(b"1".to_vec()));
    fs.setxattr(&f, b"user.a", b"22", libc::XATTR_REPLACE)
        .unwrap();
    assert_eq!(fs.getxattr(&f, b"user.a"), Ok(b"22".to_vec()));
    fs.setxattr(&f, b"user.b", b"", 0).unwrap();
    assert_eq!(
        fs.getxattr(&f, b"user.b"),
        Ok(vec![]),
        "an empty value exists"
    );
    assert_eq!(fs.getxattr(&f, b"user.c"), Err(Errno::ENODATA));
}

#[test]
fn attributes_list_in_descending_name_order_per_inode() {
    let (fs, _sb, root) = setup_with(TmpfsOptions::default(), Locking::Scalable);
    let (f, g) = (file(&fs, &root, "f"), file(&fs, &root, "g"));
    for n in ["user.m", "user.a", "user.z", "trusted.q", "user.mm"] {
        fs.setxattr(&f, n.as_bytes(), n.as_bytes(), 0).unwrap();
    }
    fs.setxattr(&g, b"user.g", b"g", 0).unwrap();
    let names = |i: &Inode| -> Vec<String> {
        let l = fs.listxattr(i).unwrap();
        l.into_iter()
            .map(|n| String::from_utf8(n).unwrap())
            .collect()
    };
    assert_eq!(
        names(&f),
        ["user.z", "user.mm", "user.m", "user.a", "trusted.q"]
    );
    assert_eq!(names(&g), ["user.g"]);
    fs.removexattr(&f, b"user.mm").unwrap();
    assert_eq!(names(&f), ["user.z", "user.m", "user.a", "trusted.q"]);
    for n in names(&f) {
        assert_eq!(fs.getxattr(&f, n.as_bytes()), Ok(n.into_bytes()));
    }
    assert_eq!(fs.getxattr(&g, b"user.g"), Ok(b"g".to_vec()));
}

/// A replaced value, a removed attribute and an evicted inode's attributes are freed
/// after a grace period; the unchanged attributes of a changed list are shared, not
/// copied; dropping the file system frees what is still published.
#[test]
fn replaced_removed_and_evicted_attributes_are_freed() {
    let (fs, _sb, root) = setup_bits(1);
    let (f, g) = (file(&fs, &root, "f"), file(&fs, &root, "g"));
    fs.setxattr(&f, b"user.a", b"1", 0).unwrap();
    fs.setxattr(&f, b"user.b", b"1", 0).unwrap();
    let a = Arc::downgrade(&fs.xattrs.attribute(&f, b"user.a").unwrap());
    let b = Arc::downgrade(&fs.xattrs.attribute(&f, b"user.b").unwrap());
    fs.setxattr(&f, b"user.a", b"2", 0).unwrap();
    assert!(flush_until(|| a.strong_count() == 0), "the old value");
    let b_now = fs.xattrs.attribute(&f, b"user.b").unwrap();
    assert!(
        Arc::ptr_eq(&b.upgrade().unwrap(), &b_now),
        "the new list shares user.b"
    );
    drop(b_now);
    fs.removexattr(&f, b"user.b").unwrap();
    assert!(flush_until(|| b.strong_count() == 0), "the removed one");

    fs.setxattr(&g, b"user.g", b"1", 0).unwrap();
    let a2 = Arc::downgrade(&fs.xattrs.attribute(&f, b"user.a").unwrap());
    let g1 = Arc::downgrade(&fs.xattrs.attribute(&g, b"user.g").unwrap());
    fs.evict_inode(&f);
    assert!(!f.has_flag(HAS_XATTRS) && !fs.xattrs.contains(f.ino));
    assert!(
        flush_until(|| a2.strong_count() == 0),
        "the evicted inode's"
    );
    assert_eq!(
        fs.getxattr(&g, b"user.g"),
        Ok(b"1".to_vec()),
        "g kept its own"
    );
    drop(g);
    assert_eq!(g1.strong_count(), 1, "g is still linked");

    // A table dropped with attributes still published frees them itself.
    let table = XattrTable::with_bits(1);
    let kept = Arc::new(crate::xattr_table::Xattr {
        name: b"user.t".as_slice().into(),
        value: b"t".as_slice().into(),
    });
    let h = file(&fs, &root, "h");
    table.update(&h, |_| Ok(vec![kept.clone()])).unwrap();
    let weak = Arc::downgrade(&kept);
    drop(kept);
    assert_eq!(weak.strong_count(), 1, "only the table holds it");
    drop(table);
    assert_eq!(weak.strong_count(), 0);
}

/// Readers (`getxattr`, `listxattr`) against `setxattr`, `removexattr` and evictions of
/// inodes that share the table's two buckets: every list a reader sees is one a writer
/// published whole (sorted, values never torn), the attributes nobody changes are always
/// there, and afterwards each inode holds what its writer left.
#[test]
fn readers_race_set_remove_and_evict_stress() {
    let (rounds, readers, writers) = if cfg!(miri) { (30, 2, 2) } else { (3000, 4, 3) };
    const STABLE: usize = 4;
    let (fs, _sb, root) = setup_bits(1);
    let stable: Vec<InodeRef> = (0..STABLE)
        .map(|i| {
            let f = file(&fs, &root, &format!("s{i}"));
            fs.setxattr(&f, b"user.keep", format!("keep{i}").as_bytes(), 0)
                .unwrap();
            f
        })
        .collect();
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        for r in 0..readers {
            let (fs, stable, stop) = (&fs, &stable, &stop);
            s.spawn(move || {
                let mut seen = 0u64;
                let mut i = r;
                while !stop.load(Ordering::Relaxed) || seen < 10 {
                    i = (i + 1) % STABLE;
                    let f = &stable[i];
                    let names = fs.listxattr(f).unwrap();
                    assert!(names.windows(2).all(|w| w[0] > w[1]), "{names:?}");
                    assert!(names.iter().any(|n| n == b"user.keep"));
                    let keep = fs.getxattr(f, b"user.keep").unwrap();
                    assert_eq!(keep, format!("keep{i}").into_bytes());
                    for name in [&b"user.v"[..], b"user.w"] {
                        if let Ok(v) = fs.getxattr(f, name) {
                            assert!(!v.is_empty() && v.iter().all(|&b| b == v[0]), "torn");
                            assert_eq!(v.len(), usize::from(v[0]));
                        }
                    }
                    seen += 1;
                }
            });
        }
        let done: Vec<_> = (0..writers)
            .map(|w| {
                let (fs, stable, root) = (&fs, &stable, &root);
                s.spawn(move || {
                    for k in 0..rounds {
                        // A stable inode's values change in place (a list swap)...
                        let f = &stable[(w + k) % STABLE];
                        let len = 1 + (k % 200) as u8;
                        let name: &[u8] = if w % 2 == 0 { b"user.v" } else { b"user.w" };
                        fs.setxattr(f, name, &vec![len; len.into()], 0).unwrap();
                        if k % 3 == 0 {
                            let _ = fs.removexattr(f, name);
                        }
                        // ...while fresh inodes of the same buckets gain their first
                        // attribute and lose their last one, or are evicted (map copies).
                        let e = {
                            let _l = root.rwsem.write();
                            file(fs, root, &format!("e{w}-{k}"))
                        };
                        fs.setxattr(&e, b"user.e", &[7; 7], 0).unwrap();
                        assert_eq!(fs.getxattr(&e, b"user.e"), Ok(vec![7; 7]));
                        if k % 2 == 0 {
                            fs.removexattr(&e, b"user.e").unwrap();
                            assert!(!e.has_flag(HAS_XATTRS));
                        } else {
                            fs.evict_inode(&e);
                        }
                        assert!(!fs.xattrs.contains(e.ino));
                    }
                })
            })
            .collect();
        for h in done {
            h.join().unwrap();
        }
        stop.store(true, Ordering::Relaxed);
    });
    for (i, f) in stable.iter().enumerate() {
        let names = fs.listxattr(f).unwrap();
        assert!(names.iter().any(|n| n == b"user.keep"), "inode {i}");
        for n in names.iter().filter(|n| *n != b"user.keep") {
            let v = fs.getxattr(f, n).unwrap();
            assert_eq!(v.len(), usize::from(v[0]));
        }
    }
}
