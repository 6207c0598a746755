//! Remove-while-reading, self-removal, rename and open/close stress, and notify/poll.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::*};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use scalevfs_kernfs::demo::demo_tree;
use scalevfs_kernfs::*;
use scalevfs_vfs::Errno;

const USER: Creds<'static> = Creds {
    uid: 1000,
    gid: 1000,
    groups: &[],
};

type Registry = Mutex<Vec<(Arc<KernfsNode>, Arc<AtomicBool>)>>;

/// Sets the flag when dropped, also while a panic unwinds: a thread waiting for it (a helper
/// looping until `stop`, or the test waiting for a helper to be ready) goes on when the
/// thread that should have set it failed a check first, so the scope can join everyone and
/// the failure is reported instead of the test hanging.
struct SetOnDrop<'a>(&'a AtomicBool);

impl Drop for SetOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, SeqCst);
    }
}

/// Creates `dir/a{i}` whose `show` asserts it never runs after its removal returned.
fn create_guarded(fs: &Kernfs, reg: &Registry, dir: &Arc<KernfsNode>, i: usize) {
    let retired = Arc::new(AtomicBool::new(false));
    let r = retired.clone();
    let content = format!("value {i}\n");
    let ops = FnAttr::ro(move |_, buf| {
        // Acquire pairs with the Release store in `retire`.
        assert!(!r.load(Acquire), "show ran after remove returned");
        std::thread::yield_now();
        assert!(!r.load(Acquire), "show ran after remove returned");
        buf.extend_from_slice(content.as_bytes());
        Ok(())
    });
    if let Ok(n) = fs.create_file(dir, format!("a{i}"), 0o444, 0, 0, ops) {
        reg.lock().unwrap().push((n, retired));
    }
}

/// After `remove(x)` returned: `x` and its children are drained for good.
fn retire(reg: &Registry, x: &Arc<KernfsNode>) {
    reg.lock().unwrap().retain(|(n, f)| {
        let hit = Arc::ptr_eq(n, x) || n.parent().is_some_and(|p| Arc::ptr_eq(&p, x));
        if hit {
            f.store(true, Release);
        }
        !hit
    });
}

/// 16 readers loop lookup/open/read/close (and keep some files open across removals)
/// while 4 threads remove and recreate files and their directory. Reads return the file's
/// content or ENODEV, opens fail only with ENODEV, lookups only with ENOENT; nothing
/// panics or hangs, and no `show` runs after its node's removal returned.
#[test]
fn stress_remove_while_reading() {
    for locking in [Locking::Scalable, Locking::Legacy] {
        const FILES: usize = 16;
        let fs = Kernfs::new(locking);
        let reg = Registry::default();
        let top = fs.create_dir(fs.root(), "dev", 0o755, 0, 0).unwrap();
        let d = fs.create_dir(&top, "d", 0o755, 0, 0).unwrap();
        (0..FILES).for_each(|i| create_guarded(&fs, &reg, &d, i));
        let stop = AtomicBool::new(false);
        let (reads, enodev) = (AtomicU64::new(0), AtomicU64::new(0));
        std::thread::scope(|s| {
            let _stop = SetOnDrop(&stop);
            for t in 0..16 {
                let (fs, stop, reads, enodev) = (&fs, &stop, &reads, &enodev);
                s.spawn(move || {
                    let mut kept: Option<KernfsOpenFile> = None;
                    let mut i = t;
                    while !stop.load(Relaxed) {
                        i = (i + 7) % FILES;
                        let n = match fs.lookup_path(format!("dev/d/a{i}"), &USER, true) {
                            Ok(n) => n,
                            Err(e) => {
                                assert_eq!(e, Errno::ENOENT);
                                continue;
                            }
                        };
                        let of = match fs.open(&n, libc::O_RDONLY, &USER) {
                            Ok(of) => of,
                            Err(e) => {
                                assert_eq!(e, Errno::ENODEV);
                                continue;
                            }
                        };
                        let mut buf = [0u8; 40];
                        match of.read(&mut buf) {
                            Ok(k) => {
                                assert_eq!(&buf[..k], format!("value {i}\n").as_bytes());
                                reads.fetch_add(1, Relaxed);
                            }
                            Err(e) => {
                                assert_eq!(e, Errno::ENODEV);
                                enodev.fetch_add(1, Relaxed);
                            }
                        }
                        if let Some(k) = &kept {
                            match k.read_at(&mut buf, 0) {
                                Ok(n) => assert!(buf[..n].starts_with(b"value ")),
                                Err(e) => assert_eq!(e, Errno::ENODEV),
                            }
                            let _ = k.poll();
                        }
                        if i % 5 == 0 {
                            kept = Some(of);
                        }
                    }
                });
            }
            // The removers go on past their 2000 rounds until some read has succeeded
            // (60 s at most): on a loaded machine the readers may start late.
            let deadline = Instant::now() + Duration::from_secs(60);
            let removers: Vec<_> = (0..4)
                .map(|r| {
                    let (fs, top, reg, reads) = (&fs, &top, &reg, &reads);
                    s.spawn(move || {
                        let mut round = 0usize;
                        while round < 2000 || reads.load(Relaxed) == 0 && Instant::now() < deadline
                        {
                            round += 1;
                            let Ok(d) = fs.lookup(top, "d") else {
                                if let Ok(d) = fs.create_dir(top, "d", 0o755, 0, 0) {
                                    (0..FILES).for_each(|i| create_guarded(fs, reg, &d, i));
                                }
                                continue;
                            };
                            if (round + r * 25).is_multiple_of(100) {
                                let res = fs.remove(&d);
                                assert!(matches!(res, Ok(()) | Err(Errno::ENOENT)), "{res:?}");
                                retire(reg, &d);
                            } else {
                                let i = (round * 3 + r) % FILES;
                                if let Ok(n) = fs.lookup(&d, format!("a{i}")) {
                                    let res = fs.remove(&n);
                                    assert!(matches!(res, Ok(()) | Err(Errno::ENOENT)), "{res:?}");
                                    retire(reg, &n);
                                }
                                create_guarded(fs, reg, &d, i);
                            }
                            // Let the readers in between namespace changes.
                            std::thread::sleep(Duration::from_micros(20));
                        }
                    })
                })
                .collect();
            for h in removers {
                h.join().unwrap();
            }
            stop.store(true, Relaxed);
        });
        eprintln!(
            "{locking:?}: {} reads, {} ENODEV",
            reads.load(Relaxed),
            enodev.load(Relaxed)
        );
        assert!(reads.load(Relaxed) > 0, "{locking:?}: some reads succeed");
    }
}

/// A store that removes its own node, a show that removes its parent directory, and a
/// show that removes a *different* node whose show is in flight elsewhere: no hang, and
/// the other node's show has finished when `remove` returns.
#[test]
fn removal_from_inside_callbacks() {
    for locking in [Locking::Scalable, Locking::Legacy] {
        let fs = Kernfs::new(locking);
        let root = fs.root().clone();
        // Self-removal from store (sysfs's "delete" attributes, kernfs_remove_self).
        let fs2 = fs.clone();
        let del = fs
            .create_file(
                &root,
                "delete",
                0o200,
                0,
                0,
                FnAttr::wo(move |node, d| {
                    let me = fs2.lookup(&node.parent().unwrap(), node.name()).unwrap();
                    fs2.remove(&me)?;
                    assert!(!node.is_active());
                    Ok(d.len())
                }),
            )
            .unwrap();
        let of = fs.open(&del, libc::O_WRONLY, &Creds::ROOT).unwrap();
        assert_eq!(of.write(b"1\n").unwrap(), 2);
        assert_eq!(fs.lookup(&root, "delete").unwrap_err(), Errno::ENOENT);
        assert_eq!(of.write(b"1").unwrap_err(), Errno::ENODEV);
        // A show removing its own parent directory.
        let dir = fs.create_dir(&root, "dir", 0o755, 0, 0).unwrap();
        let fs3 = fs.clone();
        let d2 = dir.clone();
        let f = fs
            .create_file(
                &dir,
                "f",
                0o444,
                0,
                0,
                FnAttr::ro(move |_, buf| {
                    fs3.remove(&d2)?;
                    buf.extend_from_slice(b"bye\n");
                    Ok(())
                }),
            )
            .unwrap();
        let of = fs.open(&f, libc::O_RDONLY, &USER).unwrap();
        let mut b = [0u8; 8];
        assert_eq!(of.read(&mut b).unwrap(), 4);
        assert_eq!(fs.lookup(&root, "dir").unwrap_err(), Errno::ENOENT);
        // A show removing another node while that node's show runs on another thread.
        let (entered, finished) = (
            Arc::new(AtomicBool::new(false)),
            Arc::new(AtomicBool::new(false)),
        );
        let (e2, f2) = (entered.clone(), finished.clone());
        let slow = fs
            .create_file(
                &root,
                "slow",
                0o444,
                0,
                0,
                FnAttr::ro(move |_, buf| {
                    e2.store(true, SeqCst);
                    std::thread::sleep(Duration::from_millis(100));
                    f2.store(true, SeqCst);
                    buf.push(b's');
                    Ok(())
                }),
            )
            .unwrap();
        let (fs4, slow2, fin) = (fs.clone(), slow.clone(), finished.clone());
        let remover = fs
            .create_file(
                &root,
                "remover",
                0o444,
                0,
                0,
                FnAttr::ro(move |_, buf| {
                    fs4.remove(&slow2)?;
                    // The drain waited for the other thread's show.
                    assert!(fin.load(SeqCst));
                    buf.push(b'r');
                    Ok(())
                }),
            )
            .unwrap();
        std::thread::scope(|s| {
            let h = s.spawn(|| {
                // Set by the show; also if this thread fails before it gets there.
                let _entered = SetOnDrop(&entered);
                let of = fs.open(&slow, libc::O_RDONLY, &USER).unwrap();
                of.read(&mut [0u8; 4]).unwrap()
            });
            while !entered.load(SeqCst) {
                std::thread::yield_now();
            }
            let of = fs.open(&remover, libc::O_RDONLY, &USER).unwrap();
            assert_eq!(of.read(&mut [0u8; 4]).unwrap(), 1);
            assert_eq!(h.join().unwrap(), 1);
        });
        assert!(!slow.is_active());
    }
}

/// Cross- and same-directory renames race with path walks and with each other; two
/// directories renamed into each other never form a loop.
#[test]
fn stress_rename() {
    for locking in [Locking::Scalable, Locking::Legacy] {
        let fs = Kernfs::new(locking);
        let root = fs.root().clone();
        let x = fs.create_dir(&root, "x", 0o755, 0, 0).unwrap();
        let y = fs.create_dir(&root, "y", 0o755, 0, 0).unwrap();
        let files: Vec<_> = (0..16)
            .map(|i| {
                fs.create_file(
                    &x,
                    format!("f{i}"),
                    0o444,
                    0,
                    0,
                    FnAttr::constant(format!("{i}")),
                )
                .unwrap()
            })
            .collect();
        let loops = AtomicUsize::new(0);
        std::thread::scope(|s| {
            for t in 0..8usize {
                let (fs, x, y, files) = (&fs, &x, &y, &files);
                s.spawn(move || {
                    for k in 0..1000usize {
                        let f = &files[(t * 5 + k) % files.len()];
                        let dst = if k % 2 == 0 { x } else { y };
                        let name = format!("f{}_{}", (t * 5 + k) % files.len(), k % 3);
                        match fs.rename(f, dst, &name) {
                            Ok(()) | Err(Errno::EEXIST) => {}
                            Err(e) => panic!("{e:?}"),
                        }
                    }
                });
            }
            for t in 0..4usize {
                let fs = &fs;
                s.spawn(move || {
                    for k in 0..500usize {
                        let dir = if (t + k) % 2 == 0 { "x" } else { "y" };
                        match fs.lookup_path(format!("{dir}/f{}_{}", k % 16, k % 3), &USER, true) {
                            Ok(n) => assert_eq!(n.kind(), NodeKind::File),
                            Err(e) => assert_eq!(e, Errno::ENOENT),
                        }
                    }
                });
            }
            // Two directories moved into each other, over and over.
            let p = fs.create_dir(&root, "p", 0o755, 0, 0).unwrap();
            let q = fs.create_dir(&root, "q", 0o755, 0, 0).unwrap();
            for (a, b) in [(p.clone(), q.clone()), (q, p)] {
                let (fs, root, loops) = (&fs, &root, &loops);
                s.spawn(move || {
                    for _ in 0..300 {
                        match fs.rename(&a, &b, "in") {
                            Ok(()) => {
                                let _ = fs.rename(&a, root, a.ino().to_string());
                            }
                            Err(Errno::EINVAL) => {
                                loops.fetch_add(1, Relaxed);
                            }
                            Err(e) => assert!(matches!(e, Errno::EEXIST | Errno::ENOENT), "{e:?}"),
                        }
                        // path() terminates (no cycle) and starts at the root.
                        assert!(fs.path(&a).starts_with('/'));
                    }
                });
            }
        });
        // Every file is in exactly one place, reachable by its path.
        let mut seen = 0;
        for d in [&x, &y] {
            for e in fs.readdir(d).unwrap() {
                let n = fs.lookup(d, &e.name).unwrap();
                assert!(files.iter().any(|f| Arc::ptr_eq(f, &n)));
                assert_eq!(
                    fs.path(&n),
                    format!("/{}/{}", d.name_lossy(), n.name_lossy())
                );
                seen += 1;
            }
        }
        assert_eq!(seen, files.len());
    }
}

/// Many threads open and close the same and different files while others notify them;
/// afterwards no open file is left and the open nodes are gone.
#[test]
fn stress_open_close_notify() {
    for locking in [Locking::Scalable, Locking::Legacy] {
        let fs = Kernfs::new(locking);
        let t = demo_tree(&fs).unwrap();
        let stop = AtomicBool::new(false);
        std::thread::scope(|s| {
            let _stop = SetOnDrop(&stop);
            let workers: Vec<_> = (0..16usize)
                .map(|th| {
                    let (fs, t) = (&fs, &t);
                    s.spawn(move || {
                        let mut buf = [0u8; 40];
                        for k in 0..400 {
                            let g = &t.gids[if th % 2 == 0 {
                                k % 8
                            } else {
                                (th * 31 + k) % t.gids.len()
                            }];
                            let of = fs.open(g, libc::O_RDONLY | libc::O_CLOEXEC, &USER).unwrap();
                            assert_eq!(of.read(&mut buf).unwrap(), 40);
                            let _ = of.poll();
                        }
                    })
                })
                .collect();
            s.spawn(|| {
                while !stop.load(Relaxed) {
                    for g in &t.gids[..16] {
                        fs.notify(g);
                    }
                }
            });
            for w in workers {
                w.join().unwrap();
            }
            stop.store(true, Relaxed);
        });
        assert!(t.gids.iter().all(|g| fs.open_count(g) == 0));
    }
}

#[test]
fn poll_reports_changes_like_kernfs() {
    for locking in [Locking::Scalable, Locking::Legacy] {
        let fs = Kernfs::new(locking);
        let t = demo_tree(&fs).unwrap();
        fs.notify(&t.knob); // nobody has it open: no effect, no error
        fs.notify(&t.gids_dir); // not a file: ignored
        let of = fs.open(&t.knob, libc::O_RDWR, &Creds::ROOT).unwrap();
        assert_eq!(fs.open_count(&t.knob), 1);
        // Never read: reported changed, as kernfs (event starts at 1, the file's at 0).
        assert_eq!(of.poll(), DEFAULT_POLLMASK | POLL_CHANGED);
        let mut b = [0u8; 16];
        of.read(&mut b).unwrap();
        assert_eq!(of.poll(), DEFAULT_POLLMASK);
        fs.notify(&t.knob);
        assert_eq!(of.poll(), DEFAULT_POLLMASK | POLL_CHANGED);
        // Reading on (EOF, no show) does not clear it; a read from 0 does.
        of.read(&mut b).unwrap();
        assert_eq!(of.poll(), DEFAULT_POLLMASK | POLL_CHANGED);
        of.read_at(&mut b, 0).unwrap();
        assert_eq!(of.poll(), DEFAULT_POLLMASK);
        // Waiter callbacks: called with the mask, removable.
        let hits = Arc::new(AtomicU64::new(0));
        let h = hits.clone();
        let key = of
            .add_waiter(Arc::new(move |m| {
                assert_eq!(m, POLL_CHANGED);
                h.fetch_add(1, SeqCst);
            }))
            .unwrap();
        fs.notify(&t.knob);
        assert_eq!(hits.load(SeqCst), 1);
        assert!(of.remove_waiter(key));
        assert!(!of.remove_waiter(key));
        fs.notify(&t.knob);
        assert_eq!(hits.load(SeqCst), 1);
        // A file that closes without removing its waiters loses them: a kept open node
        // (scalable design) must not call, or keep, the callbacks of closed files.
        let other = fs.open(&t.knob, libc::O_RDONLY, &USER).unwrap();
        let h = hits.clone();
        other.add_waiter(Arc::new(move |_| {
            h.fetch_add(1, SeqCst);
        }));
        drop(other);
        assert_eq!(
            Arc::strong_count(&hits),
            1,
            "the closed file's waker is kept"
        );
        fs.notify(&t.knob);
        assert_eq!(hits.load(SeqCst), 1);
        // A second open file sees the same events independently.
        let of2 = fs.open(&t.knob, libc::O_RDONLY, &USER).unwrap();
        of2.read(&mut b).unwrap();
        assert_eq!(of2.poll(), DEFAULT_POLLMASK);
        assert_eq!(of.poll(), DEFAULT_POLLMASK | POLL_CHANGED);
        // Timed wait without an event returns the unchanged mask.
        let t0 = Instant::now();
        assert_eq!(
            of2.wait_event(Some(Duration::from_millis(30))),
            DEFAULT_POLLMASK
        );
        assert!(t0.elapsed() >= Duration::from_millis(30));
    }
}

/// A poller blocked in `wait_event` wakes when the knob's store notifies, and another when
/// the file is removed.
#[test]
fn notify_wakes_blocked_poller() {
    for locking in [Locking::Scalable, Locking::Legacy] {
        let fs = Kernfs::new(locking);
        let t = demo_tree(&fs).unwrap();
        let (ready, ready2) = (AtomicBool::new(false), AtomicBool::new(false));
        std::thread::scope(|s| {
            // The poller waits without a timeout (the other for 120 s): if a check below
            // fails before the store and the removal that wake them, notify both on the way
            // out, or the scope would wait for them.
            struct NotifyOnPanic<'a>(&'a Kernfs, [&'a Arc<KernfsNode>; 2]);
            impl Drop for NotifyOnPanic<'_> {
                fn drop(&mut self) {
                    if std::thread::panicking() {
                        self.1.iter().for_each(|n| self.0.notify(n));
                    }
                }
            }
            let _notify = NotifyOnPanic(&fs, [&t.knob, &t.gid_reads]);
            let poller = s.spawn(|| {
                // Also ready if it fails before, so that the test does not wait for it.
                let _ready = SetOnDrop(&ready);
                let of = fs.open(&t.knob, libc::O_RDONLY, &USER).unwrap();
                let mut b = [0u8; 16];
                of.read(&mut b).unwrap();
                assert_eq!(of.poll(), DEFAULT_POLLMASK);
                ready.store(true, SeqCst);
                let m = of.wait_event(None);
                let n = of.read_at(&mut b, 0).unwrap();
                (m, b[..n].to_vec())
            });
            let remove_waiter = s.spawn(|| {
                let _ready = SetOnDrop(&ready2);
                let of = fs.open(&t.gid_reads, libc::O_RDONLY, &USER).unwrap();
                of.read(&mut [0u8; 8]).unwrap();
                ready2.store(true, SeqCst);
                of.wait_event(Some(Duration::from_secs(120)))
            });
            while !ready.load(SeqCst) || !ready2.load(SeqCst) {
                std::thread::yield_now();
            }
            std::thread::sleep(Duration::from_millis(20));
            let w = fs.open(&t.knob, libc::O_WRONLY, &Creds::ROOT).unwrap();
            assert_eq!(w.write(b"5\n").unwrap(), 2);
            let (m, content) = poller.join().unwrap();
            assert_eq!(m, DEFAULT_POLLMASK | POLL_CHANGED);
            assert_eq!(content, b"5\n");
            let t0 = Instant::now();
            fs.remove(&t.gid_reads).unwrap();
            assert_eq!(
                remove_waiter.join().unwrap(),
                DEFAULT_POLLMASK | POLL_CHANGED
            );
            // Woken by the removal, not by its timeout (two minutes after it started).
            assert!(t0.elapsed() < Duration::from_secs(60));
        });
    }
}

/// Runs `f` on its own thread and fails (instead of hanging the test run) if it does not
/// finish within `secs`: a deadlock.
fn within<T: Send + 'static>(secs: u64, what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    match rx.recv_timeout(Duration::from_secs(secs)) {
        Ok(v) => v,
        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
            panic!("{what}: no progress in {secs} s (deadlock)")
        }
        Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => panic!("{what}: panicked"),
    }
}

/// How the store of a sysfs-style "remove" attribute removes.
#[derive(Copy, Clone, Debug)]
enum SelfRemoval {
    /// `remove_self` on its own node (`device_remove_file_self`).
    RemoveSelf,
    /// Plain `remove` of its own node.
    Remove,
    /// Plain `remove` of its parent directory (the device); the two writers write two
    /// different attributes of it.
    Parent,
}

/// Two writers of one "remove" attribute are both inside `store` (a barrier makes sure)
/// when each removes the attribute or its directory, while a third thread removes it from
/// outside: nobody deadlocks (each writer's drain does not wait for the other's reference,
/// kernfs_break_active_protection), exactly one removal wins, every removal is complete
/// when it returns, and an outside removal of the attribute returns only after both stores
/// returned.
#[test]
fn concurrent_self_removals() {
    for locking in [Locking::Scalable, Locking::Legacy] {
        for how in [
            SelfRemoval::RemoveSelf,
            SelfRemoval::Remove,
            SelfRemoval::Parent,
        ] {
            within(60, &format!("{locking:?} {how:?}"), move || {
                concurrent_self_removal_rounds(locking, how, 300)
            });
        }
    }
}

fn concurrent_self_removal_rounds(locking: Locking, how: SelfRemoval, rounds: usize) {
    let fs = Kernfs::new(locking);
    for round in 0..rounds {
        let dir = fs
            .create_dir(fs.root(), format!("dev{round}"), 0o755, 0, 0)
            .unwrap();
        let inside = Arc::new(std::sync::Barrier::new(3));
        let finished = Arc::new(AtomicUsize::new(0));
        let wins = Arc::new(AtomicUsize::new(0));
        let me: Arc<std::sync::OnceLock<std::sync::Weak<KernfsNode>>> = Arc::default();
        let ops = {
            let (fs, dir, inside, finished, wins, me) = (
                fs.clone(),
                dir.clone(),
                inside.clone(),
                finished.clone(),
                wins.clone(),
                me.clone(),
            );
            FnAttr::wo(move |this, d| {
                inside.wait();
                let node = me.get().unwrap().upgrade().unwrap();
                let won = match how {
                    SelfRemoval::RemoveSelf => fs.remove_self(&node),
                    SelfRemoval::Remove => fs.remove(&node).is_ok(),
                    SelfRemoval::Parent => fs.remove(&dir).is_ok(),
                };
                // Winner or not, the removal is complete when the call returns.
                assert!(!this.is_active());
                assert_eq!(fs.lookup(&dir, this.name()).unwrap_err(), Errno::ENOENT);
                wins.fetch_add(usize::from(won), SeqCst);
                finished.fetch_add(1, SeqCst);
                if won {
                    Ok(d.len())
                } else {
                    Err(Errno::ENODEV)
                }
            })
        };
        let file = fs
            .create_file(&dir, "remove", 0o200, 0, 0, ops.clone())
            .unwrap();
        me.set(Arc::downgrade(&file)).unwrap();
        let file2 = match how {
            SelfRemoval::Parent => fs.create_file(&dir, "unbind", 0o200, 0, 0, ops).unwrap(),
            _ => file.clone(),
        };
        let (of1, of2) = (
            fs.open(&file, libc::O_WRONLY, &Creds::ROOT).unwrap(),
            fs.open(&file2, libc::O_WRONLY, &Creds::ROOT).unwrap(),
        );
        let outside_won = std::thread::scope(|s| {
            let w1 = s.spawn(|| of1.write(b"1"));
            let w2 = s.spawn(|| of2.write(b"1"));
            inside.wait();
            // Even rounds: the node the stores remove; odd rounds: always the directory.
            let same = round % 2 == 0;
            let target = match how {
                SelfRemoval::Parent => &dir,
                _ if same => &file,
                _ => &dir,
            };
            let r = fs.remove(target);
            if Arc::ptr_eq(target, &file) {
                // The outside removal of the node waited for both stores (their references
                // are broken only for removals from inside callbacks). A removal of the
                // directory need not: a store may have unlinked its node already.
                assert_eq!(finished.load(SeqCst), 2, "{how:?}: remove returned early");
            }
            let (r1, r2) = (w1.join().unwrap(), w2.join().unwrap());
            for r in [r1, r2] {
                assert!(matches!(r, Ok(1) | Err(Errno::ENODEV)), "{r:?}");
            }
            r.is_ok() && (same || matches!(how, SelfRemoval::Parent))
        });
        // Of the removals of one node, exactly one wins.
        let winners = wins.load(SeqCst) + usize::from(outside_won);
        if round % 2 == 0 || matches!(how, SelfRemoval::Parent) {
            assert_eq!(winners, 1, "{how:?}: {winners} removals won");
        } else {
            assert!(winners <= 1, "{how:?}: {winners} removals won");
        }
        assert!(!file.is_active() && !file2.is_active());
        assert_eq!(of1.write(b"1").unwrap_err(), Errno::ENODEV);
        let _ = fs.remove(&dir);
    }
}

/// A poller registers and re-checks while a notifier increments and checks for waiters
/// without the queue's mutex: over many rounds, every notify issued after the poller
/// cleared its event is seen (no lost wakeup; a lost one hangs and trips the watchdog).
#[test]
fn notify_never_loses_a_wakeup() {
    for locking in [Locking::Scalable, Locking::Legacy] {
        within(120, &format!("{locking:?}"), move || {
            let fs = Kernfs::new(locking);
            let t = demo_tree(&fs).unwrap();
            let round = Arc::new(AtomicU64::new(0));
            let poller = {
                let (fs, knob, round) = (fs.clone(), t.knob.clone(), round.clone());
                std::thread::spawn(move || {
                    let of = fs.open(&knob, libc::O_RDONLY, &USER).unwrap();
                    let mut b = [0u8; 16];
                    for r in 1..=3000 {
                        of.read_at(&mut b, 0).unwrap(); // clears the change
                        round.store(r, SeqCst);
                        let m = of.wait_event(None);
                        assert_eq!(m & POLL_CHANGED, POLL_CHANGED);
                    }
                })
            };
            let mut last = 0;
            while last < 3000 {
                let r = round.load(SeqCst);
                if r == last {
                    std::hint::spin_loop();
                    continue;
                }
                last = r;
                fs.notify(&t.knob);
            }
            poller.join().unwrap();
        });
    }
}
