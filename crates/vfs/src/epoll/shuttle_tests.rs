//! Shuttle models (randomized schedules over the real code: `locks::sync` hands out
//! shuttle's mutexes and parking inside a model). A schedule in which a waiter sleeps
//! forever is reported by shuttle as a deadlock, so the wait models also check "no lost
//! wakeup"; the teardown models count frees.

use super::*;
use crate::eventfd::EventFd;
use crate::locks::sync;
use crate::pipe::pipe2;
use shuttle::thread;

const ITERS: usize = 2000;

fn key(fd: i32) -> FdKey {
    FdKey { file: 0, fd }
}

fn add(c: &EpollContext, ep: &Epoll, fd: i32, t: &Arc<dyn Pollable>, events: u32) {
    ep.ctl(
        c,
        EPOLL_CTL_ADD,
        key(fd),
        t,
        EpollEvent::new(events, fd as u64),
    )
    .unwrap();
}

fn assert_all_freed(c: &EpollContext, instances: usize, items: usize) {
    let a = c.accounting().unwrap();
    assert_eq!(a.live(), (0, 0), "leak");
    assert_eq!(a.instances_freed.load(Ordering::Relaxed), instances);
    assert_eq!(a.items_freed.load(Ordering::Relaxed), items);
}

/// Two `EPOLL_CTL_ADD`s of an epoll into an epoll race, each allowed alone, not both:
/// `cross` adds B into A and A into B (a cycle), otherwise the chain A → M0 → M1 → B
/// (three edges, "A → M0": A watches M0) gains T → A and B → Z (five edges, one too
/// many). The instances hold no counted reference to their context
/// (`EpollContext::new`): the nesting lock comes from the context the callers pass, and
/// it serializes the two loop checks, so exactly one insertion fails with `ELOOP`.
#[test]
fn shuttle_racing_nested_adds_meet_on_the_callers_context() {
    for (locking, cross) in [
        (Locking::Scalable, true),
        (Locking::Scalable, false),
        (Locking::Legacy, true),
    ] {
        shuttle::check_random(
            move || {
                sync::enter_shuttle();
                let c = EpollContext::new(locking);
                let eps: Vec<Arc<Epoll>> = (0..6).map(|_| Arc::new(Epoll::new(&c))).collect();
                let (a, m0, m1, b, t, z) = (0, 1, 2, 3, 4, 5);
                if !cross {
                    for (fd, (w, t)) in [(a, m0), (m0, m1), (m1, b)].into_iter().enumerate() {
                        add(&c, &eps[w], fd as i32, &eps[t].pollable(), EPOLLIN);
                    }
                }
                // (watcher, watched) of each racing insertion.
                let (first, second) = if cross {
                    ((a, b), (b, a))
                } else {
                    ((t, a), (b, z))
                };
                let spawn = |(w, t): (usize, usize)| {
                    let (c, w, t) = (c.clone(), eps[w].clone(), eps[t].clone());
                    thread::spawn(move || {
                        sync::enter_shuttle();
                        let ev = EpollEvent::new(EPOLLIN, 0);
                        w.ctl(&c, EPOLL_CTL_ADD, key(9), &t.pollable(), ev)
                    })
                };
                let (t1, t2) = (spawn(first), spawn(second));
                let mut results = [t1.join().unwrap(), t2.join().unwrap()];
                results.sort();
                assert_eq!(
                    results,
                    [Ok(()), Err(Errno::ELOOP)],
                    "{locking:?} cross={cross}"
                );
            },
            ITERS,
        );
    }
}

/// An epoll file and two watched files (an eventfd and a pipe's read end) close at the
/// same time, without DEL: every item is removed by exactly one path, the instance is
/// freed exactly once, by whoever drops the last reference (the file, or the last item
/// after it: `item_refs`, counted in one word or, sharded, per CPU).
#[test]
fn shuttle_epoll_close_races_file_close() {
    let designs = [
        (Locking::Scalable, false),
        (Locking::Scalable, true),
        (Locking::Legacy, false),
    ];
    for (locking, sharded) in designs {
        shuttle::check_random(
            move || {
                sync::enter_shuttle();
                let c = EpollContext::with_accounting(locking);
                let ep = Epoll::new(&c);
                if sharded {
                    ep.ep.ready.met();
                }
                let e = EventFd::new(1, 0).unwrap();
                let (r, w) = pipe2(0).unwrap();
                add(&c, &ep, 1, &e.pollable(), EPOLLIN);
                add(&c, &ep, 2, &r.pollable(), EPOLLIN | EPOLLET);
                assert_eq!(ep.ep.item_refs.is_spread(), ep.ep.ready.live() > 1);
                let t1 = thread::spawn(move || {
                    sync::enter_shuttle();
                    drop(ep);
                });
                let t2 = thread::spawn(move || {
                    sync::enter_shuttle();
                    drop(e);
                });
                let t3 = thread::spawn(move || {
                    sync::enter_shuttle();
                    w.write(b"x", None).unwrap();
                    drop(r);
                });
                t1.join().unwrap();
                t2.join().unwrap();
                t3.join().unwrap();
                assert_all_freed(&c, 1, 2);
            },
            ITERS,
        );
    }
}

/// Nested: outer watches inner watches an eventfd; all three close concurrently while
/// the eventfd is signalled (a callback chain through both instances).
#[test]
fn shuttle_nested_teardown() {
    shuttle::check_random(
        || {
            sync::enter_shuttle();
            let c = EpollContext::with_accounting(Locking::Scalable);
            let outer = Epoll::new(&c);
            let inner = Epoll::new(&c);
            let e = Arc::new(EventFd::new(0, 0).unwrap());
            add(&c, &inner, 1, &e.pollable(), EPOLLIN);
            add(&c, &outer, 2, &inner.pollable(), EPOLLIN);
            let e2 = e.clone();
            let sig = thread::spawn(move || {
                sync::enter_shuttle();
                e2.write(&1u64.to_ne_bytes(), None).unwrap();
            });
            let t1 = thread::spawn(move || {
                sync::enter_shuttle();
                drop(outer);
            });
            let t2 = thread::spawn(move || {
                sync::enter_shuttle();
                drop(inner);
            });
            sig.join().unwrap();
            drop(e);
            t1.join().unwrap();
            t2.join().unwrap();
            assert_all_freed(&c, 2, 2);
        },
        ITERS,
    );
}

/// `epoll_wait(-1)` races an ADD of an already-ready file, a MOD re-arming a fired
/// oneshot item, and a signal: the waiter must not sleep forever.
#[test]
fn shuttle_ctl_against_wait() {
    shuttle::check_random(
        || {
            sync::enter_shuttle();
            let c = EpollContext::with_accounting(Locking::Scalable);
            let ep = Arc::new(Epoll::new(&c));
            let ready = Arc::new(EventFd::new(1, 0).unwrap());
            let ep2 = ep.clone();
            let waiter = thread::spawn(move || {
                sync::enter_shuttle();
                let mut ev = [EpollEvent::default(); 2];
                ep2.wait(&mut ev, -1, None).unwrap()
            });
            let (ep3, r2, c3) = (ep.clone(), ready.clone(), c.clone());
            let adder = thread::spawn(move || {
                sync::enter_shuttle();
                add(&c3, &ep3, 1, &r2.pollable(), EPOLLIN | EPOLLET);
            });
            assert!(waiter.join().unwrap() >= 1);
            adder.join().unwrap();

            // Oneshot: fire, then wait while another thread re-arms with MOD.
            let e = Arc::new(EventFd::new(0, 0).unwrap());
            add(&c, &ep, 2, &e.pollable(), EPOLLIN | EPOLLONESHOT);
            let mut ev = [EpollEvent::default(); 4];
            e.write(&1u64.to_ne_bytes(), None).unwrap();
            let n = ep.wait(&mut ev, -1, None).unwrap();
            assert!(ev[..n].iter().any(|x| x.data == 2));
            let ep4 = ep.clone();
            let waiter = thread::spawn(move || {
                sync::enter_shuttle();
                let mut ev = [EpollEvent::default(); 4];
                let n = ep4.wait(&mut ev, -1, None).unwrap();
                ev[..n].iter().any(|x| x.data == 2)
            });
            let (ep5, e5, c5) = (ep.clone(), e.clone(), c.clone());
            let modder = thread::spawn(move || {
                sync::enter_shuttle();
                ep5.ctl(
                    &c5,
                    EPOLL_CTL_MOD,
                    key(2),
                    &e5.pollable(),
                    EpollEvent::new(EPOLLIN | EPOLLONESHOT, 2),
                )
                .unwrap();
            });
            modder.join().unwrap();
            assert!(waiter.join().unwrap(), "re-armed event delivered");
            drop((ep, ready, e));
            assert_all_freed(&c, 1, 2);
        },
        ITERS,
    );
}

/// Two waiters (exclusive, as all `epoll_wait` callers) on one level-triggered item and
/// two signals: each consumes one unit and none sleeps forever (a wakeup wakes one
/// waiter; a scan that leaves the ready list non-empty wakes the next).
#[test]
fn shuttle_two_waiters_two_events() {
    shuttle::check_random(
        || {
            sync::enter_shuttle();
            let c = EpollContext::new(Locking::Scalable);
            let ep = Arc::new(Epoll::new(&c));
            let e = Arc::new(EventFd::new(0, EFD_SEMAPHORE_FLAG).unwrap());
            add(&c, &ep, 1, &e.pollable(), EPOLLIN);
            let waiters: Vec<_> = (0..2)
                .map(|_| {
                    let (ep, e) = (ep.clone(), e.clone());
                    thread::spawn(move || {
                        sync::enter_shuttle();
                        let mut ev = [EpollEvent::default(); 1];
                        loop {
                            ep.wait(&mut ev, -1, None).unwrap();
                            let mut b = [0u8; 8];
                            // Semaphore read: one unit per wakeup; retry if the other
                            // waiter took it.
                            if e.read(&mut b, None).is_ok() {
                                break;
                            }
                        }
                    })
                })
                .collect();
            for _ in 0..2 {
                e.write(&1u64.to_ne_bytes(), None).unwrap();
            }
            for w in waiters {
                w.join().unwrap();
            }
        },
        ITERS,
    );
}

/// In a model: a scalable instance whose ready lists are sharded (as when two threads
/// met on them), and its context.
fn sharded_instance() -> (Arc<EpollContext>, Arc<Epoll>) {
    sync::enter_shuttle();
    let c = EpollContext::new(Locking::Scalable);
    let ep = Arc::new(Epoll::new(&c));
    ep.ep.ready.met();
    (c, ep)
}

/// A sharded instance (ready lists per CPU; a model thread stands for a CPU): two
/// threads register eventfds of their own (so each item lands on its thread's shard) and
/// signal them, while a third waits with no timeout until it has both events. No wakeup
/// is lost between a callback on one shard and a sleeper checking them all, and a wait
/// collects events from shards other than its own.
#[test]
fn shuttle_sharded_ready_lists_lose_no_wakeup() {
    shuttle::check_random(
        || {
            let (c, ep) = sharded_instance();
            let waiter = {
                let ep = ep.clone();
                thread::spawn(move || {
                    sync::enter_shuttle();
                    let mut seen = Vec::new();
                    while seen.len() < 2 {
                        let mut ev = [EpollEvent::default(); 4];
                        let n = ep.wait(&mut ev, -1, None).unwrap();
                        seen.extend(ev[..n].iter().map(|e| e.data));
                    }
                    seen.sort();
                    assert_eq!(seen, [1, 2]);
                })
            };
            let producers: Vec<_> = (1..=2)
                .map(|fd| {
                    let (ep, c) = (ep.clone(), c.clone());
                    thread::spawn(move || {
                        sync::enter_shuttle();
                        let e = EventFd::new(0, 0).unwrap();
                        add(&c, &ep, fd, &e.pollable(), EPOLLIN | EPOLLET);
                        e.write(&1u64.to_ne_bytes(), None).unwrap();
                        e
                    })
                })
                .collect();
            waiter.join().unwrap();
            for p in producers {
                drop(p.join().unwrap());
            }
        },
        ITERS,
    );
}

/// A sharded instance whose one waiter always finds events on its own shard still
/// drains the other shards: an item readied on a shard no thread waits on (registered by
/// a thread that then exits) is returned within [`ready::EXTRA_SCAN_EVERY`] waits per
/// shard (`ready.rs`, "What a wait collects").
#[test]
fn shuttle_a_shard_without_a_waiter_is_drained() {
    shuttle::check_random(
        || {
            let (c, ep) = sharded_instance();
            let shards = ep.ep.ready.live();
            let registrar = {
                let (ep, c) = (ep.clone(), c.clone());
                thread::spawn(move || {
                    sync::enter_shuttle();
                    // Level-triggered and always readable: on its shard's list for good.
                    let e = EventFd::new(1, 0).unwrap();
                    add(&c, &ep, 1, &e.pollable(), EPOLLIN);
                    e
                })
            };
            let other = registrar.join().unwrap();
            let waiter = thread::spawn(move || {
                sync::enter_shuttle();
                let own = EventFd::new(1, 0).unwrap();
                add(&c, &ep, 2, &own.pollable(), EPOLLIN);
                let mut waits = 0;
                loop {
                    let mut ev = [EpollEvent::default(); 4];
                    let n = ep.wait(&mut ev, 0, None).unwrap();
                    waits += 1;
                    if ev[..n].iter().any(|e| e.data == 1) {
                        break;
                    }
                    assert!(
                        waits <= ready::EXTRA_SCAN_EVERY * shards,
                        "{waits} waits, never the other shard's event"
                    );
                }
                drop(own);
            });
            waiter.join().unwrap();
            drop(other);
        },
        50,
    );
}

const EFD_SEMAPHORE_FLAG: i32 = crate::eventfd::EFD_SEMAPHORE | crate::eventfd::EFD_NONBLOCK;

/// The 2026 use-after-free shape: an insertion's loop/depth walk (down through the
/// target's items, up through the instance's watchers) races the release of instances
/// and files on both sides of it. Every hop of the walk holds an `Arc`, so the walk only
/// ever sees live (possibly stale) instances; everything is freed exactly once.
#[test]
fn shuttle_nested_walk_races_release() {
    shuttle::check_random(
        || {
            sync::enter_shuttle();
            let c = EpollContext::with_accounting(Locking::Scalable);
            let (a, b, cc, d) = (
                Epoll::new(&c),
                Epoll::new(&c),
                Epoll::new(&c),
                Epoll::new(&c),
            );
            let e = EventFd::new(1, 0).unwrap();
            add(&c, &cc, 1, &e.pollable(), EPOLLIN);
            add(&c, &b, 2, &cc.pollable(), EPOLLIN);
            add(&c, &d, 3, &a.pollable(), EPOLLIN);
            let bp = b.pollable();
            let (a, c2) = (Arc::new(a), c.clone());
            let a2 = a.clone();
            let inserter = thread::spawn(move || {
                sync::enter_shuttle();
                // Walks down B -> C and up A -> D while they are being released.
                let r = a2.ctl(&c2, EPOLL_CTL_ADD, key(4), &bp, EpollEvent::new(EPOLLIN, 4));
                assert_eq!(r, Ok(()));
                let mut ev = [EpollEvent::default(); 4];
                a2.wait(&mut ev, 0, None).unwrap();
                drop(c2);
            });
            let t1 = thread::spawn(move || {
                sync::enter_shuttle();
                drop(cc);
            });
            let t2 = thread::spawn(move || {
                sync::enter_shuttle();
                drop(d);
                drop(e);
            });
            inserter.join().unwrap();
            t1.join().unwrap();
            t2.join().unwrap();
            drop((a, b));
            assert_all_freed(&c, 4, 4);
        },
        ITERS,
    );
}

/// A shared instance: one thread scans (level-triggered items stay ready, so every scan
/// re-queues them) while another deletes one item with `EPOLL_CTL_DEL` and a third closes
/// the other watched file, neither waiting for the scan. A wait that begins after the
/// deletion never reports the deleted item, nothing removed is left on the ready list,
/// and every item is freed.
#[test]
fn shuttle_remove_races_scan() {
    shuttle::check_random(
        || {
            sync::enter_shuttle();
            let c = EpollContext::with_accounting(Locking::Scalable);
            let ep = Arc::new(Epoll::new(&c));
            let e1 = EventFd::new(1, 0).unwrap();
            let e2 = EventFd::new(1, 0).unwrap();
            let t1: Arc<dyn Pollable> = e1.pollable();
            add(&c, &ep, 1, &t1, EPOLLIN);
            add(&c, &ep, 2, &e2.pollable(), EPOLLIN);
            let deleted = Arc::new(std::sync::atomic::AtomicBool::new(false));
            let scanner = {
                let (ep, deleted) = (ep.clone(), deleted.clone());
                thread::spawn(move || {
                    sync::enter_shuttle();
                    for _ in 0..2 {
                        let was_deleted = deleted.load(Ordering::SeqCst);
                        // One event per wait: the other item stays on the scan's
                        // private list and is put back at its end.
                        let mut evs = [EpollEvent::default(); 1];
                        let n = ep.wait(&mut evs, 0, None).unwrap();
                        if was_deleted {
                            assert!(evs[..n].iter().all(|e| e.data != 1), "{:?}", &evs[..n]);
                        }
                    }
                })
            };
            let deleter = {
                let (ep, c) = (ep.clone(), c.clone());
                thread::spawn(move || {
                    sync::enter_shuttle();
                    ep.ctl(&c, EPOLL_CTL_DEL, key(1), &t1, EpollEvent::default())
                        .unwrap();
                    deleted.store(true, Ordering::SeqCst);
                })
            };
            let closer = thread::spawn(move || {
                sync::enter_shuttle();
                drop(e2);
            });
            scanner.join().unwrap();
            deleter.join().unwrap();
            closer.join().unwrap();
            // Nothing removed is left on a list (which would keep it, and through it the
            // instance, alive).
            assert_eq!(c.accounting().unwrap().live(), (1, 0));
            let mut evs = [EpollEvent::default(); 4];
            assert_eq!(ep.wait(&mut evs, 0, None), Ok(0), "{evs:?}");
            drop(e1);
            drop(ep);
            assert_all_freed(&c, 1, 2);
        },
        ITERS,
    );
}

/// `EPOLL_CTL_MOD` re-arming an `EPOLLONESHOT` item races a scan that delivers (and so
/// disarms) it: the re-arm is never lost. Unless the scan delivered the re-armed
/// registration (its new data), a wait after both reports it.
#[test]
fn shuttle_oneshot_rearm_races_scan() {
    shuttle::check_random(
        || {
            sync::enter_shuttle();
            let c = EpollContext::with_accounting(Locking::Scalable);
            let ep = Arc::new(Epoll::new(&c));
            // A pipe: its poll takes a lock, where the schedule may switch threads
            // mid-scan.
            let (r, w) = pipe2(0).unwrap();
            w.write(b"x", None).unwrap();
            let t: Arc<dyn Pollable> = r.pollable();
            add(&c, &ep, 1, &t, EPOLLIN | EPOLLONESHOT);
            let scanner = {
                let ep = ep.clone();
                thread::spawn(move || {
                    sync::enter_shuttle();
                    let mut evs = [EpollEvent::default(); 4];
                    let n = ep.wait(&mut evs, 0, None).unwrap();
                    evs[..n].to_vec()
                })
            };
            let rearm = EpollEvent::new(EPOLLIN | EPOLLONESHOT, 7);
            ep.ctl(&c, EPOLL_CTL_MOD, key(1), &t, rearm).unwrap();
            let scanned = scanner.join().unwrap();
            let mut evs = [EpollEvent::default(); 4];
            let after = ep.wait(&mut evs, 0, None).unwrap();
            if scanned.iter().any(|e| e.data == 7) {
                assert_eq!(after, 0, "delivered twice: {scanned:?} {evs:?}");
            } else {
                assert_eq!(after, 1, "re-arm lost: scan saw {scanned:?}");
                assert_eq!(evs[0].data, 7);
            }
        },
        ITERS,
    );
}
