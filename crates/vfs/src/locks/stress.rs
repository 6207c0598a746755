//! Many-thread stress test: no two conflicting locks are ever held at once (checked
//! against an independent shadow table), and no waiter sleeps forever (every wait has a
//! 60 s deadline, room for a loaded machine, and hitting it fails the test). Some POSIX
//! waits are instead given a deadline of under 300 µs, so interruption races grants;
//! only those may see `EINTR`, and at the end no lock, waiter or wait-for edge may be
//! left behind.
//!
//! POSIX threads hold-and-wait (so cycles form and must be refused with `EDEADLK`); OFD
//! and flock threads hold at most one lock while they do not wait, so they can never be
//! part of a deadlock the detector is not required to see.

use super::*;
use rand::{Rng, SeedableRng};
use std::sync::Mutex as StdMutex;
use std::time::{Duration, Instant};

const BYTES: usize = 8;
const CTXS: usize = 2;

#[derive(Default)]
struct Shadow {
    /// [ctx][byte] -> holders
    bytes: Vec<Vec<Vec<(LockOwner, LockType)>>>,
    /// [ctx] -> flock holders
    flock: Vec<Vec<(LockOwner, LockType)>>,
}

fn conflicts(a: LockType, b: LockType) -> bool {
    a == LockType::Write || b == LockType::Write
}

fn rank(t: Option<LockType>) -> u8 {
    match t {
        None | Some(LockType::Unlock) => 0,
        Some(LockType::Read) => 1,
        Some(LockType::Write) => 2,
    }
}

impl Shadow {
    /// Sets `owner`'s entry on bytes `a..=b` to `t`: `weaken_only` applies only the
    /// entries that get weaker (done before the real call), otherwise all of them, after
    /// checking that no other owner holds a conflicting lock.
    fn set(
        &mut self,
        c: usize,
        owner: LockOwner,
        a: usize,
        b: usize,
        t: LockType,
        weaken_only: bool,
    ) {
        for byte in &mut self.bytes[c][a..=b] {
            let cur = byte.iter().position(|e| e.0 == owner);
            let cur_t = cur.map(|i| byte[i].1);
            if weaken_only && rank(Some(t)) >= rank(cur_t) {
                continue;
            }
            if !weaken_only && t != LockType::Unlock {
                for e in byte.iter() {
                    assert!(
                        e.0 == owner || !conflicts(e.1, t),
                        "{owner:?} granted {t:?} while {e:?} is held"
                    );
                }
            }
            if let Some(i) = cur {
                byte.remove(i);
            }
            if t != LockType::Unlock {
                byte.push((owner, t));
            }
        }
    }
    fn set_flock(&mut self, c: usize, owner: LockOwner, t: Option<LockType>) {
        let l = &mut self.flock[c];
        l.retain(|e| e.0 != owner);
        if let Some(t) = t {
            for e in l.iter() {
                assert!(
                    !conflicts(e.1, t),
                    "flock {owner:?} {t:?} granted while {e:?} held"
                );
            }
            l.push((owner, t));
        }
    }
}

fn run(m: LockManager, threads: usize, iters: usize) {
    let ctxs: Vec<FileLockContext> = (0..CTXS).map(|i| m.new_context(7, i as u64)).collect();
    let shadow = StdMutex::new(Shadow {
        bytes: vec![vec![Vec::new(); BYTES]; CTXS],
        flock: vec![Vec::new(); CTXS],
    });
    let deadlocks = std::sync::atomic::AtomicUsize::new(0);
    let interrupted = std::sync::atomic::AtomicUsize::new(0);
    let deadline = || CancelToken::with_deadline(Instant::now() + Duration::from_secs(60));
    std::thread::scope(|s| {
        for t in 0..threads {
            let (m, ctxs, shadow, deadlocks, interrupted) =
                (&m, &ctxs, &shadow, &deadlocks, &interrupted);
            s.spawn(move || {
                let mut rng = rand::rngs::StdRng::seed_from_u64(t as u64);
                let role = t % 3;
                for _ in 0..iters {
                    let c = rng.gen_range(0..CTXS);
                    let x = rng.gen_range(0..BYTES);
                    let y = rng.gen_range(0..BYTES);
                    let (a, b) = (x.min(y), x.max(y));
                    let ty = if rng.gen_bool(0.5) {
                        LockType::Read
                    } else {
                        LockType::Write
                    };
                    match role {
                        // POSIX owner: a few locks held and waited on, then released.
                        0 => {
                            let owner = LockOwner::Process(t as u64);
                            for _ in 0..rng.gen_range(1..3) {
                                let c = rng.gen_range(0..CTXS);
                                let req = LockRequest {
                                    owner,
                                    pid: t as i32,
                                    ty,
                                    start: a as i64,
                                    end: b as i64,
                                };
                                shadow.lock().unwrap().set(c, owner, a, b, ty, true);
                                // Some waits are interrupted after a moment, racing
                                // their grant: EINTR is allowed only for those.
                                let short = rng.gen_bool(0.2);
                                let tok = if short {
                                    CancelToken::with_deadline(
                                        Instant::now()
                                            + Duration::from_micros(rng.gen_range(0..300)),
                                    )
                                } else {
                                    deadline()
                                };
                                let wait = rng.gen_bool(0.8).then_some(&tok);
                                match m.setlk(&ctxs[c], &req, wait) {
                                    Err(Errno::EINTR) if short => {
                                        interrupted
                                            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                                    }
                                    Ok(()) => {
                                        shadow.lock().unwrap().set(c, owner, a, b, ty, false);
                                        std::thread::yield_now();
                                    }
                                    Err(Errno::EDEADLK) => {
                                        deadlocks
                                            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                                    }
                                    Err(Errno::EAGAIN) => assert!(wait.is_none()),
                                    Err(e) => panic!("POSIX waiter failed: {e:?}"),
                                }
                            }
                            for (c, ctx) in ctxs.iter().enumerate() {
                                shadow.lock().unwrap().set(
                                    c,
                                    owner,
                                    0,
                                    BYTES - 1,
                                    LockType::Unlock,
                                    true,
                                );
                                m.release_posix(ctx, t as u64);
                            }
                        }
                        // OFD owner: one lock at a time.
                        1 => {
                            let owner = LockOwner::File(t as u64);
                            let req = LockRequest {
                                owner,
                                pid: 0,
                                ty,
                                start: a as i64,
                                end: b as i64,
                            };
                            let tok = deadline();
                            assert_eq!(m.setlk(&ctxs[c], &req, Some(&tok)), Ok(()), "OFD waiter");
                            shadow.lock().unwrap().set(c, owner, a, b, ty, false);
                            std::thread::yield_now();
                            shadow
                                .lock()
                                .unwrap()
                                .set(c, owner, a, b, LockType::Unlock, true);
                            let un = LockRequest {
                                ty: LockType::Unlock,
                                ..req
                            };
                            m.setlk(&ctxs[c], &un, None).unwrap();
                        }
                        // flock owner: lock, maybe convert, unlock.
                        _ => {
                            let owner = LockOwner::File(1000 + t as u64);
                            let fid = 1000 + t as u64;
                            for op in [libc::LOCK_SH, libc::LOCK_EX] {
                                if rng.gen_bool(0.5) {
                                    continue;
                                }
                                shadow.lock().unwrap().set_flock(c, owner, None);
                                let tok = deadline();
                                assert_eq!(
                                    m.flock(&ctxs[c], fid, 1, op, Some(&tok)),
                                    Ok(()),
                                    "flock waiter"
                                );
                                let t = if op == libc::LOCK_SH {
                                    LockType::Read
                                } else {
                                    LockType::Write
                                };
                                shadow.lock().unwrap().set_flock(c, owner, Some(t));
                                std::thread::yield_now();
                            }
                            shadow.lock().unwrap().set_flock(c, owner, None);
                            m.flock(&ctxs[c], fid, 1, libc::LOCK_UN, None).unwrap();
                            m.release_file(&ctxs[c], fid);
                        }
                    }
                }
            });
        }
    });
    eprintln!(
        "{:?}/{:?}: {} EDEADLK, {} EINTR",
        m.locking(),
        m.hand_off(),
        deadlocks.into_inner(),
        interrupted.into_inner()
    );
    assert!(m.list().is_empty(), "{}", m.proc_locks());
    assert_eq!(m.shared.graph.len(), 0);
}

#[test]
fn stress_no_conflicting_holders_no_lost_waiters() {
    run(LockManager::new(Locking::Scalable), 24, 2000);
}

/// The scalable design with the grant-on-unlock hand-off (the ablation).
#[test]
fn stress_grant_hand_off() {
    run(
        LockManager::with_hand_off(Locking::Scalable, HandOff::Grant),
        16,
        1000,
    );
}

#[test]
fn stress_legacy() {
    run(LockManager::new(Locking::Legacy), 16, 1000);
}

/// Many owners hammer one byte with non-blocking write locks (most answered `EAGAIN`
/// from the list's summary, without the context lock) while others read `F_GETLK`: a
/// granted lock is always exclusive, and `F_GETLK` never reports a conflict-free range
/// as locked by the asker itself nor a lock that does not conflict.
#[test]
fn stress_nonblocking_contention_stays_exclusive() {
    use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
    let m = LockManager::new(Locking::Scalable);
    let ctx = m.new_context(7, 1);
    let holders = AtomicUsize::new(0);
    let (granted, refused) = (AtomicUsize::new(0), AtomicUsize::new(0));
    let req = |owner, ty| LockRequest {
        owner: LockOwner::File(owner),
        pid: -1,
        ty,
        start: 0,
        end: 0,
    };
    std::thread::scope(|s| {
        for t in 0..8u64 {
            let (m, ctx, holders, granted, refused) = (&m, &ctx, &holders, &granted, &refused);
            s.spawn(move || {
                // Until the contention is real (EAGAINs seen) and every thread has done its
                // share, or 20 s pass: on 2 busy cores the threads may otherwise run one
                // after the other.
                let deadline = Instant::now() + Duration::from_secs(20);
                let mut k = 0u32;
                while (k < 20_000 || refused.load(SeqCst) < 1000) && Instant::now() < deadline {
                    k += 1;
                    if t % 4 == 3 {
                        if let Some(h) = m.getlk(ctx, &req(t, LockType::Write)) {
                            assert_ne!(h.owner, LockOwner::File(t), "own lock reported");
                            assert_eq!(h.ty, LockType::Write);
                        }
                        continue;
                    }
                    match m.setlk(ctx, &req(t, LockType::Write), None) {
                        Ok(()) => {
                            assert_eq!(holders.fetch_add(1, SeqCst), 0, "two holders");
                            granted.fetch_add(1, SeqCst);
                            if k.is_multiple_of(64) {
                                // Hold it across a reschedule now and then.
                                std::thread::yield_now();
                            }
                            holders.fetch_sub(1, SeqCst);
                            m.setlk(ctx, &req(t, LockType::Unlock), None).unwrap();
                        }
                        Err(e) => {
                            assert_eq!(e, Errno::EAGAIN);
                            refused.fetch_add(1, SeqCst);
                        }
                    }
                }
            });
        }
    });
    assert!(granted.into_inner() > 0);
    assert!(refused.into_inner() > 0, "the contention was real");
    assert!(m.list().is_empty(), "{}", m.proc_locks());
}

/// The convoy shape: many more threads than CPUs on one byte, blocking (POSIX and OFD),
/// barging with `F_SETLK`, and waiting with deadlines short enough that cancellation
/// races every hand-off (of waiters queued on a lock and of those held back behind a
/// request woken to retry). Exclusion holds; every patient waiter gets the lock; nothing
/// is left queued, retrying or in the graph.
#[test]
fn stress_one_byte_convoy() {
    use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
    for m in [
        LockManager::new(Locking::Scalable),
        LockManager::with_hand_off(Locking::Scalable, HandOff::Grant),
    ] {
        let ctx = m.new_context(7, 2);
        let holders = AtomicUsize::new(0);
        let (granted, interrupted) = (AtomicUsize::new(0), AtomicUsize::new(0));
        std::thread::scope(|s| {
            for t in 0..32u64 {
                let (m, ctx, holders, granted, interrupted) =
                    (&m, &ctx, &holders, &granted, &interrupted);
                s.spawn(move || {
                    let owner = if t % 2 == 0 {
                        LockOwner::Process(t)
                    } else {
                        LockOwner::File(t)
                    };
                    let req = |ty| LockRequest {
                        owner,
                        pid: t as i32,
                        ty,
                        start: 0,
                        end: 0,
                    };
                    for i in 0..300 {
                        let r = match t % 4 {
                            0 => m.setlk(ctx, &req(LockType::Write), None),
                            3 if i % 2 == 0 => {
                                let tok = CancelToken::with_deadline(
                                    Instant::now() + Duration::from_micros(50),
                                );
                                m.setlk(ctx, &req(LockType::Write), Some(&tok))
                            }
                            _ => {
                                let tok = CancelToken::with_deadline(
                                    Instant::now() + Duration::from_secs(60),
                                );
                                let r = m.setlk(ctx, &req(LockType::Write), Some(&tok));
                                assert_eq!(r, Ok(()), "a patient waiter waited 60 s");
                                r
                            }
                        };
                        match r {
                            Ok(()) => {
                                assert_eq!(holders.fetch_add(1, SeqCst), 0, "two holders");
                                granted.fetch_add(1, SeqCst);
                                // Hold it across a reschedule now and then, so that
                                // waiters pile up even on two CPUs.
                                if i % 4 == 0 {
                                    std::thread::yield_now();
                                }
                                holders.fetch_sub(1, SeqCst);
                                m.setlk(ctx, &req(LockType::Unlock), None).unwrap();
                            }
                            Err(Errno::EAGAIN) if t % 4 == 0 => {}
                            Err(Errno::EINTR) if t % 4 == 3 => {
                                interrupted.fetch_add(1, SeqCst);
                            }
                            Err(e) => panic!("thread {t}: {e:?}"),
                        }
                    }
                });
            }
        });
        eprintln!(
            "{:?}: {} granted, {} EINTR",
            m.hand_off(),
            granted.into_inner(),
            interrupted.into_inner()
        );
        assert!(m.list().is_empty(), "{}", m.proc_locks());
        assert!(ctx.inner.lists.lock().retrying.is_empty());
        assert_eq!(m.shared.graph.len(), 0);
    }
}

/// Threads that take and release one range in a tight loop, the case in which a waiter
/// that lost a retry backs off and is completed without a wake-up (`handoff.rs`,
/// "Backing off"): mutual exclusion holds, and every thread keeps getting the lock: each
/// must reach 200 acquisitions (the run stops when all have, and fails after 60 s). Also
/// the same with work inside and outside the lock. Prints per-thread counts and the
/// longest single wait, which is how the back-off's fairness was compared with sleeping
/// until woken.
#[test]
fn stress_tight_loop_starves_no_thread() {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed, Ordering::SeqCst};
    const EACH: u64 = 200;
    let spin = |d: Duration| {
        let t = Instant::now();
        while t.elapsed() < d {
            std::hint::spin_loop();
        }
    };
    let us = Duration::from_micros;
    for (threads, inside, outside) in [(2, us(0), us(0)), (16, us(0), us(0)), (4, us(1), us(5))] {
        let m = LockManager::new(Locking::Scalable);
        let ctx = m.new_context(7, 2);
        let (stop, holders, behind) = (
            AtomicBool::new(false),
            AtomicUsize::new(0),
            AtomicUsize::new(threads),
        );
        let res: Vec<(u64, Duration)> = std::thread::scope(|s| {
            let hs: Vec<_> = (0..threads as u64)
                .map(|t| {
                    let (m, ctx, stop, holders, behind) = (&m, &ctx, &stop, &holders, &behind);
                    s.spawn(move || {
                        let req = |ty| LockRequest {
                            owner: LockOwner::File(t + 1),
                            pid: t as i32,
                            ty,
                            start: 0,
                            end: 99,
                        };
                        let tok =
                            CancelToken::with_deadline(Instant::now() + Duration::from_secs(60));
                        let (mut n, mut worst) = (0u64, Duration::ZERO);
                        while !stop.load(Relaxed) {
                            let t0 = Instant::now();
                            let r = m.setlk(ctx, &req(LockType::Write), Some(&tok));
                            assert_eq!(r, Ok(()), "thread {t} after {n} acquisitions");
                            worst = worst.max(t0.elapsed());
                            assert_eq!(holders.fetch_add(1, SeqCst), 0, "two holders");
                            spin(inside);
                            holders.fetch_sub(1, SeqCst);
                            m.setlk(ctx, &req(LockType::Unlock), None).unwrap();
                            n += 1;
                            if n == EACH && behind.fetch_sub(1, SeqCst) == 1 {
                                stop.store(true, Relaxed);
                            }
                            spin(outside);
                        }
                        (n, worst)
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        eprintln!("{threads} threads, {inside:?} inside, {outside:?} outside: (acquisitions, longest wait) {res:?}");
        assert!(res.iter().all(|&(n, _)| n >= EACH));
        assert!(m.list().is_empty(), "{}", m.proc_locks());
        assert!(ctx.inner.lists.lock().retrying.is_empty());
    }
}
