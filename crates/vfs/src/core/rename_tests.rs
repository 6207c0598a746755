//! Tests of rename's two locking paths: a rename of non-directories takes neither the
//! rename mutex nor the rename sequence (scalable design), one that involves a directory
//! takes both, and the two run together without deadlock while path walks stay exact;
//! and `lookup_with`, which answers from an uncounted dentry, under the same races.

use super::VfsCore;
use crate::dentry::tests::{core, look};
use crate::mount::Path;
use crate::namei::Ctx;
use crate::perm::Cred;
use crate::Errno;
use scalevfs_primitives::Locking;
use shuttle::sync::atomic::Ordering as SeqOrd;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

fn with_ctx<R>(c: &VfsCore, f: impl FnOnce(&Ctx<'_>, &Path) -> R) -> R {
    let (root, cred) = (c.root(), Cred::root());
    let ctx = Ctx::new(&cred, &root);
    f(&ctx, &root)
}

fn mkdir(c: &VfsCore, path: &str) {
    with_ctx(c, |ctx, root| {
        c.mkdir(ctx, root, path.as_bytes(), 0o755, 0).unwrap()
    })
}

fn creat(c: &VfsCore, path: &str) {
    with_ctx(c, |ctx, root| {
        c.open(
            ctx,
            root,
            path.as_bytes(),
            libc::O_CREAT | libc::O_EXCL,
            0o644,
            0,
        )
        .unwrap();
    })
}

fn rename(c: &VfsCore, from: &str, to: &str, flags: u32) -> Result<(), Errno> {
    with_ctx(c, |ctx, root| {
        c.rename(ctx, root, from.as_bytes(), root, to.as_bytes(), flags)
    })
}

/// True if a rename (or mount change) wrote the sequence while `f` ran.
fn writes_sequence(c: &VfsCore, f: impl FnOnce()) -> bool {
    let seq = c.dcache.rename_lock.read_begin();
    f();
    c.dcache.rename_lock.read_retry(seq)
}

#[test]
fn only_renames_that_involve_a_directory_write_the_sequence() {
    for locking in [Locking::Scalable, Locking::Legacy] {
        let c = core(locking);
        for d in ["/a", "/b", "/a/sub"] {
            mkdir(&c, d);
        }
        creat(&c, "/a/f");
        creat(&c, "/a/g");
        let legacy = locking == Locking::Legacy;
        // Same directory, across directories, over a file, exchanged: files only.
        assert_eq!(
            writes_sequence(&c, || rename(&c, "/a/f", "/a/f2", 0).unwrap()),
            legacy
        );
        assert_eq!(
            writes_sequence(&c, || rename(&c, "/a/f2", "/b/f", 0).unwrap()),
            legacy
        );
        assert_eq!(
            writes_sequence(&c, || rename(&c, "/a/g", "/b/f", 0).unwrap()),
            legacy
        );
        creat(&c, "/a/h");
        assert_eq!(
            writes_sequence(&c, || {
                rename(&c, "/a/h", "/b/f", libc::RENAME_EXCHANGE).unwrap()
            }),
            legacy
        );
        // A directory, in one directory or across: always.
        assert!(writes_sequence(&c, || rename(&c, "/a/sub", "/a/s2", 0).unwrap()));
        assert!(writes_sequence(&c, || rename(&c, "/a/s2", "/b/s", 0).unwrap()));
        // A file over a directory fails as Linux says (checked on the locked path).
        assert_eq!(rename(&c, "/b/f", "/b/s", 0), Err(Errno::EISDIR));
        // A file over an ancestor of its directory: the loop check's ENOTEMPTY.
        mkdir(&c, "/b/s/t");
        creat(&c, "/b/s/t/x");
        assert_eq!(rename(&c, "/b/s/t/x", "/b/s", 0), Err(Errno::ENOTEMPTY));
        // Where everything ended up.
        assert!(look(&c, "/b/f").is_ok() && look(&c, "/a/h").is_ok());
        assert_eq!(look(&c, "/a/f").err(), Some(Errno::ENOENT));
        assert_eq!(look(&c, "/a/g").err(), Some(Errno::ENOENT));
        let f = look(&c, "/b/s/t/x").unwrap();
        assert_eq!(c.d_path(&c.root(), &f).unwrap(), b"/b/s/t/x");
    }
}

/// Files renamed back and forth between a directory and its subdirectory (the unlocked
/// path, parents locked by address) while directories move between the same two
/// (the locked path, ancestor first) and walkers resolve and d_path the files: no
/// deadlock, every file ends at exactly one of its two names, and d_path agrees.
#[test]
fn file_and_directory_renames_together_stress() {
    const FILES: usize = 4;
    const ROUNDS: usize = 300;
    for locking in [Locking::Scalable, Locking::Legacy] {
        let c = core(locking);
        mkdir(&c, "/p");
        mkdir(&c, "/p/q");
        mkdir(&c, "/p/d");
        for i in 0..FILES {
            creat(&c, &format!("/p/f{i}"));
        }
        let stop = Arc::new(AtomicBool::new(false));
        let renaming = Arc::new(AtomicUsize::new(FILES));
        std::thread::scope(|s| {
            for i in 0..FILES {
                let (c, renaming) = (&c, renaming.clone());
                s.spawn(move || {
                    for _ in 0..ROUNDS {
                        rename(c, &format!("/p/f{i}"), &format!("/p/q/f{i}"), 0).unwrap();
                        rename(c, &format!("/p/q/f{i}"), &format!("/p/f{i}"), 0).unwrap();
                    }
                    renaming.fetch_sub(1, Ordering::Relaxed);
                });
            }
            {
                let (c, stop) = (&c, stop.clone());
                s.spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        rename(c, "/p/d", "/p/q/d", 0).unwrap();
                        rename(c, "/p/q/d", "/p/d", 0).unwrap();
                    }
                });
            }
            {
                let (c, stop) = (&c, stop.clone());
                s.spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        for i in 0..FILES {
                            for dir in ["/p", "/p/q"] {
                                let name = format!("{dir}/f{i}");
                                if let Ok(p) = look(c, &name) {
                                    let path = c.d_path(&c.root(), &p).unwrap();
                                    let path = String::from_utf8(path).unwrap();
                                    assert!(
                                        path == format!("/p/f{i}") || path == format!("/p/q/f{i}"),
                                        "{path}"
                                    );
                                }
                            }
                        }
                    }
                });
            }
            // The file renamers finish; then the others stop.
            while renaming.load(Ordering::Relaxed) != 0 {
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            stop.store(true, Ordering::Relaxed);
        });
        for i in 0..FILES {
            assert!(look(&c, &format!("/p/f{i}")).is_ok());
            assert_eq!(look(&c, &format!("/p/q/f{i}")).err(), Some(Errno::ENOENT));
        }
        assert!(look(&c, "/p/d").is_ok());
    }
}

/// Shuttle model of the two rename paths' locking: a file renamer locks the two parents
/// by address, the second only tried, and falls back to the rename mutex and
/// ancestor-first order; a directory renamer holds the mutex and locks the ancestor `p`
/// first, though `q` (its descendant) has the lower address; an unlink locks the parent
/// and then the victim. Shuttle reports a deadlock if any schedule has one.
#[test]
fn shuttle_rename_paths_do_not_deadlock() {
    use shuttle::sync::Mutex;
    fn model() {
        // Index order is address order: q < p, but p is q's ancestor.
        let locks = Arc::new([Mutex::new(()), Mutex::new(()), Mutex::new(())]);
        let (q, p, victim) = (0, 1, 2);
        let rename_mutex = Arc::new(Mutex::new(()));
        let file = {
            let (locks, rename_mutex) = (locks.clone(), rename_mutex.clone());
            shuttle::thread::spawn(move || {
                for _ in 0..2 {
                    let fast = {
                        let _a = locks[q].lock().unwrap();
                        locks[p].try_lock().is_ok()
                    };
                    if !fast {
                        let _m = rename_mutex.lock().unwrap();
                        let _a = locks[p].lock().unwrap();
                        let _b = locks[q].lock().unwrap();
                    }
                }
            })
        };
        let dir = {
            let (locks, rename_mutex) = (locks.clone(), rename_mutex.clone());
            shuttle::thread::spawn(move || {
                let _m = rename_mutex.lock().unwrap();
                let _a = locks[p].lock().unwrap();
                let _b = locks[q].lock().unwrap();
            })
        };
        let unlink = shuttle::thread::spawn(move || {
            let _a = locks[q].lock().unwrap();
            let _b = locks[victim].lock().unwrap();
        });
        for h in [file, dir, unlink] {
            h.join().unwrap();
        }
    }
    shuttle::check_random(model, 2000);
    shuttle::check_pct(model, 2000, 3);
}

/// Shuttle model of a hash chain under a rename that takes no sequence (`rcuhash`): nodes
/// are immutable, a rename unlinks the old node and pushes a new one at the head. A reader
/// walking the chain meanwhile always finds a name bound throughout (`g`), and finds the
/// renamed file under one of its names or not at all (then ref-walk would answer), never
/// a key that was not bound while it walked.
#[test]
fn shuttle_chain_lookup_during_file_rename() {
    use shuttle::sync::atomic::AtomicUsize as SAtomic;
    use shuttle::sync::Mutex;
    const NONE: usize = usize::MAX;
    fn model() {
        // Arena of immutable (key, next) nodes: 0 = f at "x", 1 = g, 2/3 = f renamed.
        let keys = ["x", "g", "y", "x"];
        let next: Arc<Vec<SAtomic>> = Arc::new((0..4).map(|_| SAtomic::new(NONE)).collect());
        let head = Arc::new(SAtomic::new(0));
        next[0].store(1, SeqOrd::SeqCst);
        let bucket = Arc::new(Mutex::new(()));
        let renamer = {
            let (next, head, bucket) = (next.clone(), head.clone(), bucket.clone());
            shuttle::thread::spawn(move || {
                // x -> y (node 2), then y -> x (node 3): unlink the old, push the new.
                for (old, new) in [(0usize, 2usize), (2, 3)] {
                    let _b = bucket.lock().unwrap();
                    let mut pred: Option<usize> = None;
                    let mut cur = head.load(SeqOrd::SeqCst);
                    while cur != old {
                        pred = Some(cur);
                        cur = next[cur].load(SeqOrd::SeqCst);
                    }
                    let after = next[old].load(SeqOrd::SeqCst);
                    match pred {
                        None => head.store(after, SeqOrd::SeqCst),
                        Some(pr) => next[pr].store(after, SeqOrd::SeqCst),
                    }
                    next[new].store(head.load(SeqOrd::SeqCst), SeqOrd::SeqCst);
                    head.store(new, SeqOrd::SeqCst);
                }
            })
        };
        let reader = shuttle::thread::spawn(move || {
            for want in ["g", "x", "y"] {
                let mut cur = head.load(SeqOrd::SeqCst);
                let mut found = None;
                while cur != NONE {
                    if keys[cur] == want {
                        found = Some(cur);
                        break;
                    }
                    cur = next[cur].load(SeqOrd::SeqCst);
                }
                if want == "g" {
                    assert_eq!(found, Some(1), "a name bound throughout was missed");
                }
                if let Some(n) = found {
                    assert_eq!(keys[n], want);
                }
            }
        });
        renamer.join().unwrap();
        reader.join().unwrap();
    }
    shuttle::check_random(model, 3000);
    shuttle::check_pct(model, 3000, 3);
}

/// `lookup_with` answers from the uncounted dentry while other threads unlink, recreate
/// and rename the file: each answer is ENOENT or the stat of one of the file's
/// incarnations (a regular file with the mode it was made with), never a torn one, and the
/// dentry it read is not counted (its count is unchanged after many reads).
#[test]
fn lookup_with_stats_uncounted_during_unlink_and_rename_stress() {
    for locking in [Locking::Scalable, Locking::Legacy] {
        let c = core(locking);
        mkdir(&c, "/d");
        creat(&c, "/d/f");
        let before = look(&c, "/d/f").unwrap().dentry.count();
        let stat_once = || {
            with_ctx(&c, |ctx, root| {
                c.lookup_with(ctx, root, b"/d/f", true, |p| c.stat(p))
            })
        };
        for _ in 0..100 {
            assert_eq!(stat_once().unwrap().mode & libc::S_IFMT, libc::S_IFREG);
        }
        assert_eq!(look(&c, "/d/f").unwrap().dentry.count(), before);
        let stop = AtomicBool::new(false);
        std::thread::scope(|s| {
            s.spawn(|| {
                for _ in 0..500 {
                    with_ctx(&c, |ctx, root| c.unlink(ctx, root, b"/d/f", false)).unwrap();
                    creat(&c, "/d/g");
                    rename(&c, "/d/g", "/d/f", 0).unwrap();
                }
                stop.store(true, Ordering::Relaxed);
            });
            for _ in 0..2 {
                s.spawn(|| {
                    while !stop.load(Ordering::Relaxed) {
                        match stat_once() {
                            Ok(st) => {
                                assert_eq!(st.mode, libc::S_IFREG | 0o644);
                                // 0: unlinked after the walk found it, as on Linux.
                                assert!(st.nlink <= 1, "{}", st.nlink);
                            }
                            Err(e) => assert_eq!(e, Errno::ENOENT),
                        }
                    }
                });
            }
        });
        assert!(stat_once().is_ok());
    }
}
