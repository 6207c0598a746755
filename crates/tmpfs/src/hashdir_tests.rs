//! Tests of the directory designs: `stat`'s folded size, link count and times, stable
//! `getdents64` positions under concurrent changes (many threads, and a shuttle model
//! that interleaves changes between the steps of a scan), both designs alike.

use super::tests::{names, setup_with};
use super::*;
use scalevfs_primitives::Locking;
use scalevfs_vfs::Timespec;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicUsize, Ordering};

const DESIGNS: [Locking; 2] = [Locking::Scalable, Locking::Legacy];
const REG: u32 = libc::S_IFREG | 0o644;
const DIR: u32 = libc::S_IFDIR | 0o755;

/// One `readdir` call of at most one entry from `pos`: the entry and its `d_off`, or
/// `None` at the end.
fn step(fs: &Tmpfs, dir: &Inode, pos: i64) -> Option<(Vec<u8>, i64)> {
    let mut got = None;
    let end = fs
        .readdir(dir, 1, pos, &mut |e| {
            if got.is_some() {
                return false;
            }
            got = Some((e.name.to_vec(), e.next_pos));
            true
        })
        .unwrap();
    assert!(got.is_some() || end, "no entry and not at the end");
    got
}

/// A whole scan, one entry per call, running `between` after each step.
fn scan_in_steps(fs: &Tmpfs, dir: &Inode, mut between: impl FnMut()) -> Vec<Vec<u8>> {
    let (mut pos, mut seen) = (0, Vec::new());
    while let Some((name, next)) = step(fs, dir, pos) {
        seen.push(name);
        pos = next;
        between();
    }
    seen
}

/// Every name in `stable` (present throughout the scan) was seen exactly once, and no
/// name was seen twice.
fn check_scan(seen: &[Vec<u8>], stable: &HashSet<Vec<u8>>) {
    let mut counts: HashMap<&[u8], usize> = HashMap::new();
    for n in seen {
        *counts.entry(n).or_default() += 1;
    }
    for (n, c) in &counts {
        assert_eq!(*c, 1, "{:?} returned {c} times", String::from_utf8_lossy(n));
    }
    for n in stable {
        assert!(
            counts.contains_key(&n[..]),
            "{:?} skipped",
            String::from_utf8_lossy(n)
        );
    }
}

#[test]
fn stat_folds_size_link_count_and_times() {
    for locking in DESIGNS {
        let (fs, _sb, root) = setup_with(TmpfsOptions::default(), locking);
        let before = root.stat();
        assert_eq!((before.size, before.nlink), (40, 2));
        for i in 0..40u32 {
            let name = format!("f{i}");
            fs.create(
                &root,
                name.as_bytes(),
                if i % 4 == 0 { DIR } else { REG },
                0,
                0,
            )
            .unwrap();
        }
        let st = root.stat();
        assert_eq!((st.size, st.nlink), (40 + 40 * 20, 2 + 10), "{locking:?}");
        assert!(
            st.mtime >= before.mtime && st.ctime >= st.mtime,
            "{locking:?}"
        );
        let f1 = fs.lookup(&root, b"f1").unwrap().unwrap();
        fs.unlink(&root, b"f1", &f1).unwrap();
        let f0 = fs.lookup(&root, b"f0").unwrap().unwrap();
        fs.rmdir(&root, b"f0", &f0).unwrap();
        fs.rename(&root, b"f2", &root, b"f3", 0).unwrap();
        let st = root.stat();
        assert_eq!((st.size, st.nlink), (40 + 37 * 20, 2 + 9), "{locking:?}");
        // An explicit mtime (utimensat) wins, even in the past, until the next change.
        let past = Timespec { sec: 1000, nsec: 5 };
        root.set_mtime(past);
        assert_eq!(root.stat().mtime, past, "{locking:?}");
        fs.create(&root, b"new", REG, 0, 0).unwrap();
        let st = root.stat();
        assert!(st.mtime > past && st.ctime >= st.mtime, "{locking:?}");
        // A removed directory reports no links whatever its buckets held.
        let d = fs.create(&root, b"gone", DIR, 0, 0).unwrap();
        fs.rmdir(&root, b"gone", &d).unwrap();
        assert_eq!(d.stat().nlink, 0);
    }
}

#[test]
fn scans_resumed_one_entry_at_a_time_survive_changes() {
    for locking in DESIGNS {
        let (fs, _sb, root) = setup_with(TmpfsOptions::default(), locking);
        let stable: HashSet<Vec<u8>> = (0..50).map(|i| format!("s{i}").into_bytes()).collect();
        for n in &stable {
            fs.create(&root, n, REG, 0, 0).unwrap();
        }
        for i in 0..20 {
            fs.create(&root, format!("t{i}").as_bytes(), REG, 0, 0)
                .unwrap();
        }
        let mut k = 0;
        let seen = scan_in_steps(&fs, &root, || {
            // Churn around the scan: remove a transient name, create and rename others.
            let t = format!("t{k}");
            if let Some(i) = fs.lookup(&root, t.as_bytes()).unwrap() {
                fs.unlink(&root, t.as_bytes(), &i).unwrap();
            }
            fs.create(&root, format!("n{k}").as_bytes(), REG, 0, 0)
                .unwrap();
            if k > 0 {
                let (from, to) = (format!("n{}", k - 1), format!("r{k}"));
                fs.rename(&root, from.as_bytes(), &root, to.as_bytes(), 0)
                    .unwrap();
            }
            k += 1;
        });
        check_scan(&seen, &stable);
        assert_eq!(&seen[..2], &[b".".to_vec(), b"..".to_vec()]);
    }
}

#[test]
fn many_threads_change_one_directory_while_others_scan_it() {
    const WRITERS: usize = 6;
    const ROUNDS: usize = 300;
    for locking in DESIGNS {
        let (fs, _sb, root) = setup_with(TmpfsOptions::default(), locking);
        let stable: HashSet<Vec<u8>> = (0..64).map(|i| format!("s{i}").into_bytes()).collect();
        for n in &stable {
            fs.create(&root, n, REG, 0, 0).unwrap();
        }
        // The VFS's side of the contract: a directory whose names cannot change shared
        // (the legacy design's) is held exclusively by every change (its `rwsem`, as the
        // VFS takes it); the legacy directory counts its size and link count relying on
        // that.
        let exclusive = !fs.shared_name_changes(&root);
        let change = || exclusive.then(|| root.rwsem.write());
        // Writers that have finished; the scanners stop once all have (and after 3 scans).
        let finished = AtomicUsize::new(0);
        std::thread::scope(|s| {
            for w in 0..WRITERS {
                let (fs, root, finished, change) = (&fs, &root, &finished, &change);
                s.spawn(move || {
                    for r in 0..ROUNDS {
                        let (a, b) = (format!("w{w}a{r}"), format!("w{w}b{r}"));
                        let ty = if r % 5 == 0 { DIR } else { REG };
                        let held = change();
                        fs.create(root, a.as_bytes(), ty, 0, 0).unwrap();
                        drop(held);
                        let held = change();
                        assert_eq!(
                            fs.create(root, a.as_bytes(), REG, 0, 0).err(),
                            Some(Errno::EEXIST)
                        );
                        drop(held);
                        let held = change();
                        fs.rename(root, a.as_bytes(), root, b.as_bytes(), 0)
                            .unwrap();
                        drop(held);
                        let i = fs.lookup(root, b.as_bytes()).unwrap().unwrap();
                        if r % 3 != 0 {
                            let _held = change();
                            if i.is_dir() {
                                fs.rmdir(root, b.as_bytes(), &i).unwrap();
                            } else {
                                fs.unlink(root, b.as_bytes(), &i).unwrap();
                            }
                        }
                    }
                    finished.fetch_add(1, Ordering::Relaxed);
                });
            }
            for _ in 0..2 {
                let (fs, root, stable, finished) = (&fs, &root, &stable, &finished);
                s.spawn(move || {
                    let mut scans = 0;
                    while finished.load(Ordering::Relaxed) < WRITERS || scans < 3 {
                        check_scan(&scan_in_steps(fs, root, || {}), stable);
                        scans += 1;
                    }
                });
            }
        });
        // Kept: every third name of each writer, plus the stable ones.
        let kept = WRITERS * ROUNDS.div_ceil(3);
        let subdirs = (0..ROUNDS).filter(|r| r % 3 == 0 && r % 5 == 0).count() * WRITERS;
        let st = root.stat();
        assert_eq!(st.size as usize, 40 + 20 * (64 + kept), "{locking:?}");
        assert_eq!(st.nlink as usize, 2 + subdirs, "{locking:?}");
        assert_eq!(names(&fs, &root, 0).len(), 2 + 64 + kept, "{locking:?}");
    }
}

/// Shuttle: two threads change names in one directory while a third scans it one entry
/// per call; every interleaving of the bucket critical sections (each an atomic step
/// here: the buckets' locks are the only synchronization, and shuttle switches threads
/// only between operations) keeps the scan's promise.
#[test]
fn shuttle_scan_against_creates_unlinks_and_renames() {
    for locking in DESIGNS {
        shuttle::check_random(
            move || {
                let (fs, _sb, root) = setup_with(TmpfsOptions::default(), locking);
                let stable: HashSet<Vec<u8>> =
                    (0..24).map(|i| format!("s{i}").into_bytes()).collect();
                for n in &stable {
                    fs.create(&root, n, REG, 0, 0).unwrap();
                }
                let fs2 = fs.clone();
                let root2 = root.clone();
                // As in the threaded test: a directory whose names cannot change shared
                // is held exclusively by every change, as the VFS holds it. Taken by
                // `try_write` and a yield, since `rwsem` is not one of shuttle's locks.
                let exclusive = !fs.shared_name_changes(&root);
                let changer = move |t: usize| {
                    let change = || {
                        exclusive.then(|| loop {
                            if let Some(held) = root2.rwsem.try_write() {
                                break held;
                            }
                            shuttle::thread::yield_now();
                        })
                    };
                    for r in 0..3 {
                        let (a, b) = (format!("c{t}{r}"), format!("d{t}{r}"));
                        let held = change();
                        fs2.create(&root2, a.as_bytes(), REG, 0, 0).unwrap();
                        drop(held);
                        shuttle::thread::yield_now();
                        let held = change();
                        fs2.rename(&root2, a.as_bytes(), &root2, b.as_bytes(), 0)
                            .unwrap();
                        drop(held);
                        shuttle::thread::yield_now();
                        let i = fs2.lookup(&root2, b.as_bytes()).unwrap().unwrap();
                        let held = change();
                        fs2.unlink(&root2, b.as_bytes(), &i).unwrap();
                        drop(held);
                        shuttle::thread::yield_now();
                    }
                };
                let c1 = changer.clone();
                let h1 = shuttle::thread::spawn(move || c1(1));
                let h2 = shuttle::thread::spawn(move || changer(2));
                let seen = scan_in_steps(&fs, &root, shuttle::thread::yield_now);
                check_scan(&seen, &stable);
                h1.join().unwrap();
                h2.join().unwrap();
                assert_eq!(root.stat().size, 40 + 24 * 20);
            },
            300,
        );
    }
}

/// A full listing from position 0 as (name, d_off) pairs.
fn listing(fs: &Tmpfs, dir: &Inode) -> Vec<(Vec<u8>, i64)> {
    names(fs, dir, 0)
}

#[test]
fn each_d_off_resumes_at_the_next_entry_and_the_last_is_the_end() {
    for locking in DESIGNS {
        let (fs, _sb, root) = setup_with(TmpfsOptions::default(), locking);
        // Empty: `.` then `..`, whose d_off is already the end (Linux's tmpfs).
        let empty = listing(&fs, &root);
        assert_eq!(
            empty,
            [(b".".to_vec(), 1), (b"..".to_vec(), DIR_OFFSET_EOD as i64)],
            "{locking:?}"
        );
        for i in 0..100 {
            fs.create(&root, format!("f{i}").as_bytes(), REG, 0, 0)
                .unwrap();
        }
        let all = listing(&fs, &root);
        assert_eq!(all.len(), 102, "{locking:?}");
        assert_eq!(all.last().unwrap().1, DIR_OFFSET_EOD as i64, "{locking:?}");
        // Seeking to an entry's d_off (telldir, then seekdir) lists exactly the entries
        // after it; position 2 (Linux's first entry) lists all of them.
        for (i, (_, off)) in all.iter().enumerate() {
            let rest: Vec<Vec<u8>> = names(&fs, &root, *off).into_iter().map(|e| e.0).collect();
            let want: Vec<Vec<u8>> = all[i + 1..].iter().map(|e| e.0.clone()).collect();
            assert_eq!(rest, want, "{locking:?}, after {i}");
        }
        let from_first: Vec<_> = names(&fs, &root, 2).into_iter().map(|e| e.0).collect();
        let want: Vec<_> = all[2..].iter().map(|e| e.0.clone()).collect();
        assert_eq!(from_first, want, "{locking:?}");
    }
}

/// The scalable directory of `dir`.
fn hashed(dir: &Inode) -> &crate::hashdir::HashedDir {
    match crate::dir::directory(dir).unwrap() {
        crate::dir::Directory::Hashed(h) => h,
        crate::dir::Directory::Locked(_) => panic!("a legacy directory"),
    }
}

#[test]
fn lookups_in_a_directory_of_100k_names_visit_about_one_entry() {
    use crate::hashdir::VISITS;
    let (fs, _sb, root) = setup_with(TmpfsOptions::default(), Locking::Scalable);
    const N: usize = 100_000;
    for i in 0..N {
        fs.create(&root, format!("file-{i}").as_bytes(), REG, 0, 0)
            .unwrap();
    }
    let visits = |f: &mut dyn FnMut()| {
        VISITS.with(|v| v.set(0));
        f();
        VISITS.with(|v| v.get())
    };
    // 1000 hits and 1000 misses: the index compares the names of the entries whose 7-bit
    // tag matches (the one sought, and about one other in eight lookups), where a scan of
    // the bucket would compare ~N/32 on a hit and ~N/16 on a miss.
    let hits = visits(&mut || {
        for i in (0..N).step_by(N / 1000) {
            assert!(fs
                .lookup(&root, format!("file-{i}").as_bytes())
                .unwrap()
                .is_some());
        }
    });
    let misses = visits(&mut || {
        for i in 0..1000 {
            assert!(fs
                .lookup(&root, format!("absent-{i}").as_bytes())
                .unwrap()
                .is_none());
        }
    });
    assert!(
        hits <= 1250,
        "{hits} entries visited by 1000 lookups that hit"
    );
    assert!(
        misses <= 250,
        "{misses} entries visited by 1000 lookups that miss"
    );
    // Unlink and create cost the same.
    let churn = visits(&mut || {
        for i in 0..1000 {
            let name = format!("file-{i}");
            let inode = fs.lookup(&root, name.as_bytes()).unwrap().unwrap();
            fs.unlink(&root, name.as_bytes(), &inode).unwrap();
            fs.create(&root, name.as_bytes(), REG, 0, 0).unwrap();
        }
    });
    assert!(
        churn <= 3 * 1250,
        "{churn} entries visited by 1000 lookup+unlink+create"
    );
    assert_eq!(root.stat().size as usize, 40 + 20 * N);
}

#[test]
fn freed_slots_are_reused_and_emptied_buckets_give_their_arrays_back() {
    use crate::hashdir::BUCKETS;
    // About 62 names a bucket at the peak.
    const N: usize = BUCKETS * 62;
    let (fs, _sb, root) = setup_with(TmpfsOptions::default(), Locking::Scalable);
    let sizes = || -> Vec<(usize, usize)> {
        (0..BUCKETS)
            .map(|b| hashed(&root).bucket_sizes(b))
            .collect()
    };
    let unlink = |n: &str| {
        let inode = fs.lookup(&root, n.as_bytes()).unwrap().unwrap();
        fs.unlink(&root, n.as_bytes(), &inode).unwrap();
    };
    for i in 0..N {
        fs.create(&root, format!("a{i}").as_bytes(), REG, 0, 0)
            .unwrap();
    }
    for i in (0..N).step_by(2) {
        unlink(&format!("a{i}"));
    }
    let before = sizes();
    for i in 0..N / 2 {
        fs.create(&root, format!("b{i}").as_bytes(), REG, 0, 0)
            .unwrap();
    }
    // A bucket grows only by the new names its freed slots could not hold.
    for (b, ((_, slots_before), (entries, slots))) in before.iter().zip(sizes()).enumerate() {
        assert_eq!(slots, entries.max(*slots_before), "bucket {b}");
    }
    for i in 0..N {
        if i % 2 == 1 {
            unlink(&format!("a{i}"));
        }
        if i < N / 2 {
            unlink(&format!("b{i}"));
        }
    }
    // About 62 names a bucket: past KEEP_WHEN_EMPTY, so emptied buckets freed theirs.
    assert!(sizes().iter().all(|&s| s == (0, 0)), "{:?}", sizes());
}
