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

/// A core whose file system takes changes of different names concurrently, so that
/// renames of files run on `dirlock`'s shared paths.
fn sharing_core() -> Arc<VfsCore> {
    let fs = crate::testfs::TestFs {
        shared_names: true,
        ..Default::default()
    };
    let opts = super::CoreOptions {
        locking: Locking::Scalable,
        ..Default::default()
    };
    VfsCore::new(opts, Arc::new(fs)).unwrap()
}

/// A rename of a file across directories holds neither parent's `rwsem`: it completes
/// while lookups hold both shared, where taking either exclusively would wait for them.
/// A directory rename between the same two waits for them, as it must; so does a file
/// rename while a writer holds the target's namespace lock (its try fails, and it takes
/// the directories exclusively instead).
#[test]
fn file_rename_across_directories_holds_both_parents_shared() {
    let c = sharing_core();
    for d in ["/a", "/b", "/a/sub"] {
        mkdir(&c, d);
    }
    creat(&c, "/a/f");
    let (a, b) = (look(&c, "/a").unwrap(), look(&c, "/b").unwrap());
    let (a, b) = (a.dentry.inode_ref().unwrap(), b.dentry.inode_ref().unwrap());
    let finished = |done: &AtomicBool| {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while !done.load(Ordering::Acquire) && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        done.load(Ordering::Acquire)
    };
    let (file_done, dir_done) = (AtomicBool::new(false), AtomicBool::new(false));
    std::thread::scope(|s| {
        {
            // Held in the scope's closure: a failed assertion drops them before the
            // scope joins the renamers, which then finish.
            let _lookups = (a.rwsem.read(), b.rwsem.read());
            let (c, file_done, dir_done) = (&c, &file_done, &dir_done);
            s.spawn(move || {
                rename(c, "/a/f", "/b/g", 0).unwrap();
                file_done.store(true, Ordering::Release);
                rename(c, "/a/sub", "/b/sub", 0).unwrap();
                dir_done.store(true, Ordering::Release);
            });
            assert!(finished(file_done), "the file rename waited for a lookup");
            std::thread::sleep(std::time::Duration::from_millis(20));
            assert!(!dir_done.load(Ordering::Acquire));
        }
        assert!(finished(&dir_done));
    });
    assert!(look(&c, "/b/g").is_ok() && look(&c, "/b/sub").is_ok());
    let done = AtomicBool::new(false);
    std::thread::scope(|s| {
        {
            let _writer = a.ns_lock().unwrap().write_lock();
            let (c, done) = (&c, &done);
            s.spawn(move || {
                rename(c, "/b/g", "/a/f", 0).unwrap();
                done.store(true, Ordering::Release);
            });
            std::thread::sleep(std::time::Duration::from_millis(20));
            assert!(!done.load(Ordering::Acquire));
        }
        assert!(finished(&done));
    });
    assert!(look(&c, "/a/f").is_ok());
    assert_eq!(look(&c, "/b/g").err(), Some(Errno::ENOENT));
}

/// Renames of files across directories on the shared path fail as Linux's do, in both
/// address orders of the two parents: a directory on the target side (`EISDIR`, found
/// under the shared locks and answered on the exclusive path), a trailing slash on a file
/// (`ENOTDIR`), `RENAME_NOREPLACE` over a file (`EEXIST`), `RENAME_EXCHANGE` with nothing
/// to exchange and a missing source (`ENOENT`), a removed target directory (`ENOENT`),
/// and a sticky source directory (`EPERM`).
#[test]
fn file_renames_across_directories_fail_as_linux_does() {
    let c = sharing_core();
    mkdir(&c, "/a");
    mkdir(&c, "/b");
    for (from, to) in [("/a", "/b"), ("/b", "/a")] {
        let p = |dir: &str, name: &str| format!("{dir}/{name}");
        creat(&c, &p(from, "f"));
        mkdir(&c, &p(to, "d"));
        creat(&c, &p(to, "e"));
        assert_eq!(
            rename(&c, &p(from, "f"), &p(to, "d"), 0),
            Err(Errno::EISDIR)
        );
        assert_eq!(
            rename(&c, &p(from, "f/"), &p(to, "x"), 0),
            Err(Errno::ENOTDIR)
        );
        let noreplace = libc::RENAME_NOREPLACE;
        assert_eq!(
            rename(&c, &p(from, "f"), &p(to, "e"), noreplace),
            Err(Errno::EEXIST)
        );
        let exchange = libc::RENAME_EXCHANGE;
        assert_eq!(
            rename(&c, &p(from, "f"), &p(to, "x"), exchange),
            Err(Errno::ENOENT)
        );
        assert_eq!(
            rename(&c, &p(from, "nothing"), &p(to, "x"), 0),
            Err(Errno::ENOENT)
        );
        // Into a directory removed after the walk found it (as through a descriptor).
        let dead = look(&c, &p(to, "d")).unwrap();
        with_ctx(&c, |ctx, root| {
            c.unlink(ctx, root, p(to, "d").as_bytes(), true)
        })
        .unwrap();
        let into_dead = with_ctx(&c, |ctx, root| {
            c.rename(ctx, root, p(from, "f").as_bytes(), &dead, b"x", 0)
        });
        assert_eq!(into_dead, Err(Errno::ENOENT));
        // Then the rename that works, and the names it leaves.
        rename(&c, &p(from, "f"), &p(to, "f"), 0).unwrap();
        assert!(look(&c, &p(to, "f")).is_ok());
        assert_eq!(look(&c, &p(from, "f")).err(), Some(Errno::ENOENT));
        with_ctx(&c, |ctx, root| {
            c.unlink(ctx, root, p(to, "f").as_bytes(), false)
        })
        .unwrap();
    }
    // Sticky: a user may not move another user's file out of a sticky directory.
    mkdir(&c, "/s");
    creat(&c, "/s/root-owned");
    for (dir, mode) in [("/s", 0o1777), ("/b", 0o777)] {
        with_ctx(&c, |ctx, root| {
            let d = c.lookup(ctx, root, dir.as_bytes(), true, false).unwrap();
            c.chmod(ctx, &d, mode)
        })
        .unwrap();
    }
    let (root, user) = (c.root(), Cred::user(1000, 1000));
    let ctx = Ctx::new(&user, &root);
    let moved = c.rename(&ctx, &root, b"/s/root-owned", &root, b"/b/mine", 0);
    assert_eq!(moved, Err(Errno::EPERM));
}
