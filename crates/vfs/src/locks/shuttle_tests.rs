//! Shuttle models (randomized schedules over the real code; see `sync.rs` for how the
//! code picks shuttle's mutexes and parking inside a model). A schedule in which some
//! thread sleeps forever makes shuttle report a deadlock, so every model also checks
//! "no lost wakeup".

use super::*;
use shuttle::thread;
use std::sync::atomic::{AtomicUsize, Ordering};

const ITERS: usize = 2000;

fn p(n: u64) -> LockOwner {
    LockOwner::Process(n)
}

fn rq(owner: LockOwner, ty: LockType, byte: i64) -> LockRequest {
    LockRequest {
        owner,
        pid: 1,
        ty,
        start: byte,
        end: byte,
    }
}

fn setup() -> (Arc<LockManager>, Arc<FileLockContext>) {
    sync::enter_shuttle();
    let m = LockManager::new(Locking::Scalable);
    let c = m.new_context(1, 1);
    (Arc::new(m), Arc::new(c))
}

/// A waiter races an unlock and a cancel: it ends up either holding the lock or
/// interrupted and unqueued; never asleep, never both.
#[test]
fn shuttle_block_wake_cancel() {
    shuttle::check_random(
        || {
            let (m, c) = setup();
            m.setlk(&c, &rq(p(1), LockType::Write, 0), None).unwrap();
            let tok = CancelToken::new();
            let waiter = {
                let (m, c, tok) = (m.clone(), c.clone(), tok.clone());
                thread::spawn(move || {
                    sync::enter_shuttle();
                    m.setlk(&c, &rq(p(2), LockType::Write, 0), Some(&tok))
                })
            };
            let canceller = thread::spawn(move || {
                sync::enter_shuttle();
                tok.cancel();
            });
            m.setlk(&c, &rq(p(1), LockType::Unlock, 0), None).unwrap();
            let r = waiter.join().unwrap();
            canceller.join().unwrap();
            let held: Vec<_> = m
                .list()
                .into_iter()
                .map(|l| (l.waiting, l.info.owner))
                .collect();
            match r {
                Ok(()) => assert_eq!(held, vec![(false, p(2))]),
                Err(e) => {
                    assert_eq!(e, Errno::EINTR);
                    assert!(held.is_empty());
                }
            }
            assert_eq!(m.shared.graph.len(), 0);
        },
        ITERS,
    );
}

/// Two owners each hold one byte and request the other's concurrently: exactly one gets
/// EDEADLK (and gives up its lock), the other is granted; neither sleeps forever.
#[test]
fn shuttle_deadlock_pair() {
    shuttle::check_random(
        || {
            let (m, c) = setup();
            m.setlk(&c, &rq(p(1), LockType::Write, 0), None).unwrap();
            m.setlk(&c, &rq(p(2), LockType::Write, 1), None).unwrap();
            let hs: Vec<_> = [(1u64, 1i64), (2, 0)]
                .into_iter()
                .map(|(o, byte)| {
                    let (m, c) = (m.clone(), c.clone());
                    thread::spawn(move || {
                        sync::enter_shuttle();
                        let r = m.setlk(
                            &c,
                            &rq(p(o), LockType::Write, byte),
                            Some(&CancelToken::new()),
                        );
                        if r.is_err() {
                            m.release_posix(&c, o);
                        }
                        r
                    })
                })
                .collect();
            let rs: Vec<_> = hs.into_iter().map(|h| h.join().unwrap()).collect();
            let dead = rs.iter().filter(|r| **r == Err(Errno::EDEADLK)).count();
            let ok = rs.iter().filter(|r| r.is_ok()).count();
            assert_eq!((dead, ok), (1, 1), "{rs:?}");
            assert_eq!(m.shared.graph.len(), 0);
        },
        ITERS,
    );
}

/// Three owners take and release one byte (POSIX, OFD, flock-free mix): mutual exclusion
/// and everybody finishes.
#[test]
fn shuttle_mutual_exclusion_handoff() {
    shuttle::check_random(
        || {
            let (m, c) = setup();
            let inside = Arc::new(AtomicUsize::new(0));
            let owners = [p(1), p(2), LockOwner::File(3)];
            let hs: Vec<_> = owners
                .into_iter()
                .map(|o| {
                    let (m, c, inside) = (m.clone(), c.clone(), inside.clone());
                    thread::spawn(move || {
                        sync::enter_shuttle();
                        for _ in 0..2 {
                            m.setlk(&c, &rq(o, LockType::Write, 0), Some(&CancelToken::new()))
                                .unwrap();
                            assert_eq!(inside.fetch_add(1, Ordering::SeqCst), 0);
                            thread::yield_now();
                            inside.fetch_sub(1, Ordering::SeqCst);
                            m.setlk(&c, &rq(o, LockType::Unlock, 0), None).unwrap();
                        }
                    })
                })
                .collect();
            for h in hs {
                h.join().unwrap();
            }
            assert!(m.list().is_empty());
        },
        ITERS,
    );
}

/// flock conversions racing an unlock: a converting waiter loses its old lock first, so
/// two SH holders both upgrading cannot deadlock; both finish holding EX in turn.
#[test]
fn shuttle_flock_conversions() {
    shuttle::check_random(
        || {
            let (m, c) = setup();
            m.flock(&c, 1, 1, libc::LOCK_SH, None).unwrap();
            m.flock(&c, 2, 2, libc::LOCK_SH, None).unwrap();
            let hs: Vec<_> = [1u64, 2]
                .into_iter()
                .map(|f| {
                    let (m, c) = (m.clone(), c.clone());
                    thread::spawn(move || {
                        sync::enter_shuttle();
                        m.flock(&c, f, f as i32, libc::LOCK_EX, None).unwrap();
                        m.flock(&c, f, f as i32, libc::LOCK_UN, None).unwrap();
                    })
                })
                .collect();
            for h in hs {
                h.join().unwrap();
            }
            assert!(m.list().is_empty());
        },
        ITERS,
    );
}

/// p1 waits on p2's read lock while p3 (also reading) asks for p1's lock and p2 unlocks,
/// concurrently. Whichever order, exactly one of p1 and p3 gets EDEADLK (p1 when it is
/// moved onto p3's lock, p3 when its own check sees p1 -> p3), and the other is granted.
#[test]
fn shuttle_retarget_deadlock() {
    shuttle::check_random(
        || {
            let (m, c) = setup();
            m.setlk(&c, &rq(p(2), LockType::Read, 0), None).unwrap();
            m.setlk(&c, &rq(p(3), LockType::Read, 0), None).unwrap();
            m.setlk(&c, &rq(p(1), LockType::Write, 5), None).unwrap();
            let spawn = |o: u64, byte: i64| {
                let (m, c) = (m.clone(), c.clone());
                thread::spawn(move || {
                    sync::enter_shuttle();
                    let r = m.setlk(
                        &c,
                        &rq(p(o), LockType::Write, byte),
                        Some(&CancelToken::new()),
                    );
                    if r.is_err() {
                        m.release_posix(&c, o);
                    }
                    r
                })
            };
            let a = spawn(1, 0);
            let c3 = spawn(3, 5);
            m.setlk(&c, &rq(p(2), LockType::Unlock, 0), None).unwrap();
            let rs = [a.join().unwrap(), c3.join().unwrap()];
            let dead = rs.iter().filter(|r| **r == Err(Errno::EDEADLK)).count();
            assert_eq!(dead, 1, "{rs:?}");
            assert!(rs.iter().any(Result::is_ok));
            assert_eq!(m.shared.graph.len(), 0);
        },
        ITERS,
    );
}

/// Wake-and-retry: two blocking owners (one of them cancelled at some point), a barging
/// non-blocking owner and the first holder's unlock, all racing. Mutual exclusion holds,
/// nobody sleeps forever (a woken request's followers are always re-examined when its
/// retry ends), the cancelled one is granted or `EINTR`, and nothing is left queued,
/// retrying or in the graph.
#[test]
fn shuttle_retry_barging_and_cancel() {
    shuttle::check_random(
        || {
            let (m, c) = setup();
            let inside = Arc::new(AtomicUsize::new(0));
            m.setlk(&c, &rq(p(1), LockType::Write, 0), None).unwrap();
            inside.fetch_add(1, Ordering::SeqCst);
            let tok = CancelToken::new();
            let spawn = |o: LockOwner, tok: Option<CancelToken>| {
                let (m, c, inside) = (m.clone(), c.clone(), inside.clone());
                thread::spawn(move || {
                    sync::enter_shuttle();
                    let own = CancelToken::new();
                    let r = m.setlk(
                        &c,
                        &rq(o, LockType::Write, 0),
                        Some(tok.as_ref().unwrap_or(&own)),
                    );
                    if r.is_ok() {
                        assert_eq!(inside.fetch_add(1, Ordering::SeqCst), 0);
                        thread::yield_now();
                        inside.fetch_sub(1, Ordering::SeqCst);
                        m.setlk(&c, &rq(o, LockType::Unlock, 0), None).unwrap();
                    }
                    r
                })
            };
            let a = spawn(p(2), None);
            let b = spawn(LockOwner::File(3), Some(tok.clone()));
            let barger = {
                let (m, c, inside) = (m.clone(), c.clone(), inside.clone());
                thread::spawn(move || {
                    sync::enter_shuttle();
                    for _ in 0..2 {
                        if m.setlk(&c, &rq(p(4), LockType::Write, 0), None).is_ok() {
                            assert_eq!(inside.fetch_add(1, Ordering::SeqCst), 0);
                            inside.fetch_sub(1, Ordering::SeqCst);
                            m.setlk(&c, &rq(p(4), LockType::Unlock, 0), None).unwrap();
                        }
                        thread::yield_now();
                    }
                })
            };
            let canceller = thread::spawn(move || {
                sync::enter_shuttle();
                tok.cancel();
            });
            inside.fetch_sub(1, Ordering::SeqCst);
            m.setlk(&c, &rq(p(1), LockType::Unlock, 0), None).unwrap();
            assert_eq!(a.join().unwrap(), Ok(()));
            let rb = b.join().unwrap();
            assert!(matches!(rb, Ok(()) | Err(Errno::EINTR)), "{rb:?}");
            barger.join().unwrap();
            canceller.join().unwrap();
            assert!(m.list().is_empty(), "{}", m.proc_locks());
            assert!(c.inner.lists.lock().retrying.is_empty());
            assert_eq!(m.shared.graph.len(), 0);
        },
        ITERS,
    );
}
