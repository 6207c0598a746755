//! Blocking, waking and handing a lock on: what happens to the waiters of a lock that
//! goes away (re-examination), how a blocked request waits (poll, then sleep), and the
//! deadlock-graph edges of waiters. All of it runs under the context lock except the
//! waiting itself and the wake-ups (`list::Wakeups`, issued after the lock is released).
//!
//! ## Two hand-off policies ([`HandOff`])
//!
//! When a lock goes away (or shrinks, or changes type) its waiters are re-examined oldest
//! first (a polling waiter may go ahead, `list::prefer_polling`); a waiter that still
//! conflicts with a held lock is moved onto that lock without being woken. A waiter that
//! no longer conflicts is then handled by the manager's policy:
//!
//! - [`HandOff::Retry`] (the default; Linux's wake-and-retry): the waiter is woken to
//!   *retry* its request from the start; it may lose the lock to a thread that asks for
//!   it meanwhile (barging) and then blocks again. Waiters behind it that conflict with
//!   its request are not woken: they become its *followers* (Linux nests them under the
//!   woken request, `fl_blocked_requests` of a request) and are re-examined when its
//!   retry ends, whatever the outcome (Linux's `locks_delete_block`). The woken request
//!   and its followers are in `Lists::retrying`, the followers on no held lock's list
//!   and with no deadlock-graph edge: they wait on a running thread, not on an owner.
//!   With more threads than CPUs this is what keeps the lock busy: a released lock goes
//!   to whoever runs and asks, instead of being held on behalf of a sleeper until the
//!   scheduler runs it (a convoy in which every hand-off costs a wake-up).
//! - [`HandOff::Grant`] (the legacy design's): the waiter is granted on the spot (its
//!   lock inserted on its behalf, with the same split/merge logic) and only then woken,
//!   so a woken request never retries and the lock order is arrival order.
//!
//! ## Waiting
//!
//! The waiter's thread first polls its own `state` for a few microseconds
//! ([`WAITER_POLL`], by at most half the CPUs at once): a completion that comes that soon
//! costs the completer one atomic swap in `unpark` and the waiter no sleep. Only a
//! request's first wait polls (see "Backing off"). Then it sleeps in
//! [`CancelToken::wait_until`] on its `state`; the completer stores `state` with Release
//! and then unparks it (the sleeper's Acquire load pairs with it). A cancelled sleeper
//! takes the context lock and, if its request is still pending, unqueues it (from a held
//! lock's list or a retrying request's followers) and returns `EINTR`; if it was
//! completed meanwhile the outcome stands (a retry is still made: a cancelled retry that
//! conflicts returns `EINTR` then).
//!
//! ## Backing off
//!
//! A request that blocks again after a retry has lost the lock to a thread that asked
//! meanwhile. That thread is running, and in a tight loop it re-takes the lock within
//! nanoseconds of each release, so waking the waiter at every release costs the running
//! thread a futex wake-up (several times its own lock and unlock) for a retry that
//! mostly loses again, and a waiter that polls and retries at once pulls the context's
//! lines away from it on every release. So after its `n`th lost retry a request sleeps
//! until a deadline of its own ([`back_off`]: 8 µs doubling to 128 µs, plus the timer's
//! slack), and a release that frees it completes it with `RETRY` *without* waking it
//! (`Waiter::complete`, the handshake of [`scalevfs_primitives::selfwake`]): it retries
//! when its timer fires. A release still wakes it if its deadline has already passed.
//! A lock released for good is thus picked up at most one back-off late, and only by a
//! request that has already lost to a barger; a first wait is woken at once. On the
//! 2-vCPU VM, `locks-blocking` at 2 threads went from 0.25-0.32x of one thread to
//! 0.83-0.91x with this (polling or sleeping until woken instead: 0.25-0.32x); per-thread
//! counts and the longest waits stayed as they were (the stress test
//! `stress_tight_loop_starves_no_thread` prints both, and checks that every thread of a
//! tight loop keeps getting the lock).
//!
//! ## Letting the releaser go first
//!
//! The back-off covers a request that *lost* its retry. A polling waiter completed with
//! `RETRY` sees it within a few hundred nanoseconds, about as soon as the releaser, back
//! from its unlock, asks for the lock again; when the poller wins that race the two
//! threads of a tight loop pass the lock back and forth on nearly every operation, each
//! hand-off a first wait that polls and wins, and every operation pays for moving the
//! context's lines between CPUs. So a poller woken to retry first waits
//! [`POLLED_RETRY_DELAY`] (1 µs, spinning): a releaser in a tight loop has taken the lock
//! again by then, the retry loses and backs off, and the running thread keeps the lock;
//! a releaser that does not ask again costs the poller 1 µs, a fraction of a futex
//! wake-up (what Linux's sleeping waiters pay on every hand-off). On the 2-vCPU VM
//! (`locks-blocking` at 1 and 2 threads, and 4 and 64 in three of the runs, 5-7 repeats,
//! one binary switched by an environment variable, nine runs of each alternated) 2
//! threads went from 0.52-0.79x of one thread (2.3-3.9M ops/s) to 0.91-0.98x (3.8-4.4M),
//! but for one run at 0.66x whose 1-thread median was an outlier (5.9M against 4.1-4.6M).
//! A 2 µs wait gave 0.85-0.93x, 0.3 µs 0.84-0.93x. 4 and 64 threads were unchanged.
//!
//! Granting the lock in place to a waiter that is still polling (`Grant` for pollers,
//! `Retry` for sleepers) was measured and not kept: it saves the poller's retry section
//! but makes the two threads of a tight loop alternate strictly, every operation a
//! hand-off, where `Retry` lets the running thread keep the lock while the other backs
//! off. On the 2-vCPU VM (three runs of each, alternated, one binary) `locks-blocking` at
//! 2 threads fell from 0.72-0.93x of one thread to 0.25-0.43x; `locks-same` was unchanged.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::list::{
    self, conflicts, find_conflict, flock_apply, posix_apply, Lists, Pace, Waiter, Wakeups,
};
use super::{sync, FileLockContext, Guard, LockClass, LockManager, LockOwner, LockRequest, Queued};
use crate::cancel::CancelToken;
use crate::{lockclass, Errno};

/// What a waiter whose conflicting lock went away gets. See the module docs.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum HandOff {
    /// Wake it to retry its request; threads asking meanwhile may take the lock first.
    Retry,
    /// Grant it the lock before waking it (arrival order; every hand-off waits for the
    /// woken thread to run).
    Grant,
}

/// A request woken to retry (`HandOff::Retry`) and the waiters queued behind it because
/// they conflict with it. Under the context lock.
pub(crate) struct Retrying {
    leader: Arc<Waiter>,
    followers: Vec<Arc<Waiter>>,
}

/// How a blocked request's wait ended without an error.
enum Woken {
    /// The lock is held.
    Granted,
    /// Ask again (`HandOff::Retry`); the request is one of `Lists::retrying` until then.
    Retry,
}

impl LockManager {
    /// Runs a lock request to its end: `attempt` tries it once under the context lock
    /// (applying it and collecting the waiters to re-examine in its second argument, or
    /// queueing it, or failing), then the re-examination runs in the same section, the
    /// completed waiters are woken after it, and a queued request sleeps. A request woken
    /// to retry attempts again; each attempt first ends the previous one's retry.
    pub(super) fn request<'t>(
        &self,
        ctx: &FileLockContext,
        mut attempt: impl FnMut(
            &mut Guard<'_>,
            &mut Vec<Arc<Waiter>>,
            &Pace,
        ) -> Result<Option<Queued<'t>>, Errno>,
    ) -> Result<(), Errno> {
        let mut retrying = None;
        let mut retries = 0u32;
        let mut pace = Pace::default();
        loop {
            let (queued, woken) = {
                let mut g = self.lock(ctx);
                let mut reeval = Vec::new();
                Self::finish_retry(&mut g.lists, retrying.take(), &mut reeval);
                let queued = attempt(&mut g, &mut reeval, &pace);
                (queued, self.reeval(&mut g.lists, reeval))
            };
            woken.wake();
            let Some((w, token)) = queued? else {
                return Ok(());
            };
            match retries {
                0 => lockclass::FLC_BLOCKED.count(),
                _ => lockclass::FLC_RETRY_BLOCKED.count(),
            }
            // Only a first wait polls; a request that lost a retry backs off (module docs).
            match self.sleep(ctx, &w, token, retries == 0)? {
                Woken::Granted => return Ok(()),
                Woken::Retry => {
                    lockclass::FLC_RETRIED.count();
                    retries += 1;
                    // Used only if the retry blocks, i.e. lost the lock to a barger.
                    pace = Pace {
                        since: Some(w.queued_at),
                        wake_at: Some(Instant::now() + back_off(retries)),
                    };
                    retrying = Some(w);
                }
            }
        }
    }

    /// Ends `leader`'s retry (if this is one): its followers join `reeval`, to be
    /// re-examined in the caller's section. Called under the context lock by every
    /// section a retried request runs, whatever its outcome.
    #[inline(always)]
    pub(super) fn finish_retry(
        lists: &mut Lists,
        leader: Option<Arc<Waiter>>,
        reeval: &mut Vec<Arc<Waiter>>,
    ) {
        if let Some(leader) = leader {
            Self::finish_retry_of(lists, leader, reeval);
        }
    }

    #[cold]
    fn finish_retry_of(lists: &mut Lists, leader: Arc<Waiter>, reeval: &mut Vec<Arc<Waiter>>) {
        let i = lists
            .retrying
            .iter()
            .position(|r| Arc::ptr_eq(&r.leader, &leader))
            .expect("a retrying request is listed until its retry ends");
        reeval.append(&mut lists.retrying.remove(i).followers);
    }

    /// Records (or moves) `w`'s wait-for edge onto `blocker`'s owner. False, with no edge
    /// left, if `w` is a POSIX request and the wait would close a cycle. Waits on POSIX
    /// locks get edges (POSIX and OFD waiters alike, as Linux's `blocked_hash`); a POSIX
    /// request blocked by an OFD lock is checked but adds no edge (see `deadlock.rs`).
    /// Called under the context lock.
    pub(super) fn wait_edge(&self, w: &Arc<Waiter>, blocker: LockOwner) -> bool {
        let me = w.req.owner;
        let check = matches!(me, LockOwner::Process(_));
        match blocker {
            LockOwner::Process(b) => {
                if w.edge() == Some(b) {
                    return true;
                }
                let ok = self.shared.graph.wait_for(me, w.id(), blocker, check, true);
                w.set_edge(ok.then_some(b));
                ok
            }
            LockOwner::File(_) => {
                if !check {
                    self.drop_edge(w);
                    return true;
                }
                w.set_edge(None);
                self.shared.graph.wait_for(me, w.id(), blocker, true, false)
            }
        }
    }

    fn drop_edge(&self, w: &Arc<Waiter>) {
        if w.edge().is_some() {
            self.shared.graph.remove(w.req.owner, w.id());
            w.set_edge(None);
        }
    }

    /// Re-examines waiters whose blocker changed, oldest first: re-queue on the new
    /// conflicting lock, fail with `EDEADLK`, or hand the lock on by the manager's
    /// [`HandOff`] policy. Grants can change more locks, whose waiters join the queue.
    /// Called under the context lock.
    /// Only a queue with waiters costs a call: nearly every lock operation has none.
    #[inline(always)]
    pub(super) fn reeval(&self, lists: &mut Lists, queue: Vec<Arc<Waiter>>) -> Wakeups {
        if queue.is_empty() {
            if queue.capacity() == 0 {
                // Owns nothing: skip the out-of-line `drop_in_place` (a tenth of an
                // uncontended lock operation's instructions).
                std::mem::forget(queue);
            }
            return Wakeups::default();
        }
        self.reeval_waiters(lists, queue)
    }

    #[inline(never)]
    fn reeval_waiters(&self, lists: &mut Lists, mut queue: Vec<Arc<Waiter>>) -> Wakeups {
        let mut wake = Wakeups::default();
        list::prefer_polling(&mut queue);
        let grant = self.shared.hand_off == HandOff::Grant;
        let mut k = 0;
        while k < queue.len() {
            let w = queue[k].clone();
            k += 1;
            let flock = w.class == LockClass::Flock;
            let blocked = match (flock, grant) {
                (true, true) => flock_apply(&mut lists.flock, &w.req, &mut queue).err(),
                (true, false) => find_conflict(&lists.flock, &w.req),
                (false, _) => {
                    let c = find_conflict(&lists.posix, &w.req);
                    if c.is_none() && grant {
                        posix_apply(&mut lists.posix, &w.req, &mut queue);
                    }
                    c
                }
            };
            match blocked {
                None if grant => {
                    self.drop_edge(&w);
                    w.complete(list::GRANTED, &mut wake);
                }
                None => {
                    self.drop_edge(&w);
                    let leader = lists.retrying.iter_mut().find(|r| {
                        (r.leader.class == LockClass::Flock) == flock
                            && conflicts(&r.leader.req.info(r.leader.class), &w.req)
                    });
                    match leader {
                        Some(r) => r.followers.push(w),
                        None => {
                            lists.retrying.push(Retrying {
                                leader: w.clone(),
                                followers: Vec::new(),
                            });
                            w.complete(list::RETRY, &mut wake);
                        }
                    }
                }
                Some(i) if flock => lists.flock[i].waiters.push(w),
                Some(i) => {
                    if self.wait_edge(&w, lists.posix[i].info.owner) {
                        lists.posix[i].waiters.push(w);
                    } else {
                        w.complete(list::DEADLOCK, &mut wake);
                    }
                }
            }
        }
        wake
    }

    /// Sleeps until `w` is completed or `token` (if any) fires.
    fn sleep(
        &self,
        ctx: &FileLockContext,
        w: &Arc<Waiter>,
        token: Option<&CancelToken>,
        poll: bool,
    ) -> Result<Woken, Errno> {
        // Poll a while first. A lock held for a short critical section is often handed
        // on within microseconds; a waiter that is still polling when completed costs the
        // completer no futex wake-up (its unpark finds the thread running) and itself no
        // sleep, no token allocation and no waker registration. Each poll is a plain load
        // of our own waiter's line, so pollers do not bounce the context's lines. At most
        // half the CPUs poll on one context at a time, so that with more threads than CPUs
        // the pollers leave the holders (and the completer) CPUs to run on.
        if poll && ctx.inner.spinners.fetch_add(1, Ordering::Relaxed) < max_spinners() {
            // Relaxed: a hint for completers (`list::prefer_polling`), ordering nothing.
            w.polling.store(true, Ordering::Relaxed);
            let end = Instant::now() + WAITER_POLL;
            'poll: loop {
                for _ in 0..32 {
                    if w.state() != list::PENDING {
                        break 'poll;
                    }
                    std::hint::spin_loop();
                }
                if Instant::now() >= end {
                    break;
                }
            }
        }
        if poll {
            w.polling.store(false, Ordering::Relaxed);
            // Relaxed: the count only bounds how many poll; it orders nothing.
            ctx.inner.spinners.fetch_sub(1, Ordering::Relaxed);
        }
        if w.state() != list::PENDING {
            if poll {
                lockclass::FLC_POLL_HIT.count();
                if w.state() == list::RETRY {
                    // Let a releaser in a tight loop take the lock again first (module
                    // docs, "Letting the releaser go first").
                    let end = Instant::now() + POLLED_RETRY_DELAY;
                    while Instant::now() < end {
                        std::hint::spin_loop();
                    }
                }
            }
            return outcome(w.state());
        }
        lockclass::FLC_SLEPT.count();
        let own;
        let token = match token {
            Some(t) => t,
            None => {
                // Only blocking calls get here, so the allocation is off the fast path.
                own = CancelToken::new();
                &own
            }
        };
        let done = || w.state() != list::PENDING;
        let r = match w.wake_at {
            Some(at) => token.wait_until_or(done, at).and_then(|finished| {
                if !finished {
                    lockclass::FLC_BACKOFF_EXPIRED.count();
                    w.timed.expire();
                }
                token.wait_until(done)
            }),
            None => token.wait_until(done),
        };
        let state = match r {
            Ok(()) => w.state(),
            Err(e) => {
                let mut g = self.lock(ctx);
                let s = w.state();
                if s != list::PENDING {
                    s // completed before we got the lock: the outcome stands
                } else {
                    let lists = &mut *g.lists;
                    for h in lists.posix.iter_mut().chain(lists.flock.iter_mut()) {
                        h.waiters.retain(|x| !Arc::ptr_eq(x, w));
                    }
                    for r in &mut lists.retrying {
                        r.followers.retain(|x| !Arc::ptr_eq(x, w));
                    }
                    self.drop_edge(w);
                    return Err(e);
                }
            }
        };
        outcome(state)
    }
}

/// How long a blocked request polls its own state before it sleeps: long enough for a
/// queue of a few short holds to hand the lock on, short against a scheduler time slice.
const WAITER_POLL: Duration = Duration::from_micros(30);

/// How long a polling waiter woken to retry waits before it does: about the time a
/// running releaser takes to return and ask for the lock again (module docs, "Letting the
/// releaser go first").
const POLLED_RETRY_DELAY: Duration = Duration::from_micros(1);

/// How long a request that has lost `retries` retries sleeps before it retries on its own
/// (module docs, "Backing off"): doubling from 8 µs to at most 128 µs. Linux's default
/// timer slack (50 µs) lengthens each sleep.
fn back_off(retries: u32) -> Duration {
    const FIRST: Duration = Duration::from_micros(8);
    const MOST: Duration = Duration::from_micros(128);
    FIRST
        .saturating_mul(1 << retries.saturating_sub(1).min(16))
        .min(MOST)
}

/// Blocked requests that may poll one context at once: half the CPUs (none on one CPU,
/// where polling only delays the holder).
fn max_spinners() -> u32 {
    (scalevfs_primitives::cpu::num_cpus() / 2) as u32
}

/// A completed waiter's result.
fn outcome(state: u8) -> Result<Woken, Errno> {
    match state {
        list::GRANTED => Ok(Woken::Granted),
        list::RETRY => Ok(Woken::Retry),
        _ => Err(Errno::EDEADLK),
    }
}

impl Waiter {
    pub(super) fn new(req: LockRequest, class: LockClass, pace: Pace) -> Self {
        Waiter {
            req,
            class,
            state: std::sync::atomic::AtomicU8::new(list::PENDING),
            thread: sync::current(),
            edge: std::sync::atomic::AtomicU64::new(0),
            polling: std::sync::atomic::AtomicBool::new(false),
            queued_at: pace.since.unwrap_or_else(Instant::now),
            wake_at: pace.wake_at,
            timed: scalevfs_primitives::selfwake::SelfWaking::new(pace.wake_at.is_some()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::locks::list::{Held, GRANTED, PENDING, RETRY};
    use crate::locks::LockType;
    use scalevfs_primitives::Locking;

    fn waiter(file: u64, ty: LockType, byte: i64) -> Arc<Waiter> {
        let req = LockRequest {
            owner: LockOwner::File(file),
            pid: 0,
            ty,
            start: byte,
            end: byte,
        };
        Arc::new(Waiter::new(req, LockClass::Ofd, Pace::default()))
    }

    fn followers_of(lists: &Lists, leader: &Arc<Waiter>) -> Vec<*const Waiter> {
        let r = lists
            .retrying
            .iter()
            .find(|r| Arc::ptr_eq(&r.leader, leader));
        r.expect("listed as retrying")
            .followers
            .iter()
            .map(Arc::as_ptr)
            .collect()
    }

    /// Under `Retry`, of the waiters a released lock frees, the first is woken to retry
    /// and those conflicting with it wait behind it unwoken; a non-conflicting one is
    /// woken too. When the retry ends its followers are re-examined: one that now
    /// conflicts with a held lock is queued there, still unwoken.
    #[test]
    fn a_woken_request_holds_back_the_waiters_it_conflicts_with() {
        let m = LockManager::new(Locking::Scalable);
        assert_eq!(m.hand_off(), HandOff::Retry);
        let mut lists = Lists::default();
        let (w1, w2, w3) = (
            waiter(1, LockType::Write, 0),
            waiter(2, LockType::Write, 0),
            waiter(3, LockType::Read, 5),
        );
        m.reeval(&mut lists, vec![w1.clone(), w2.clone(), w3.clone()])
            .wake();
        assert_eq!(
            [w1.state(), w2.state(), w3.state()],
            [RETRY, PENDING, RETRY]
        );
        assert_eq!(followers_of(&lists, &w1), [Arc::as_ptr(&w2)]);
        assert!(followers_of(&lists, &w3).is_empty());
        assert!(lists.posix.is_empty(), "nothing granted on anyone's behalf");

        // w1's retry won the lock: w2 is re-examined and queued on it.
        lists.posix.push(Held::new(w1.req.info(LockClass::Ofd)));
        let mut reeval = Vec::new();
        LockManager::finish_retry(&mut lists, Some(w1.clone()), &mut reeval);
        assert_eq!(reeval.len(), 1);
        m.reeval(&mut lists, reeval).wake();
        assert_eq!(w2.state(), PENDING);
        assert_eq!(lists.posix[0].waiters.len(), 1);
        assert_eq!(lists.retrying.len(), 1, "w3 is still retrying");
    }

    /// Under `Grant` the first freed waiter is granted in place and the one conflicting
    /// with it is queued on its new lock; nothing is left retrying.
    #[test]
    fn grant_hands_the_lock_over_in_place() {
        let m = LockManager::with_hand_off(Locking::Scalable, HandOff::Grant);
        let mut lists = Lists::default();
        let (w1, w2) = (waiter(1, LockType::Write, 0), waiter(2, LockType::Write, 0));
        m.reeval(&mut lists, vec![w1.clone(), w2.clone()]).wake();
        assert_eq!([w1.state(), w2.state()], [GRANTED, PENDING]);
        assert_eq!(lists.posix.len(), 1);
        assert_eq!(lists.posix[0].info.owner, LockOwner::File(1));
        assert_eq!(lists.posix[0].waiters.len(), 1);
        assert!(lists.retrying.is_empty());
    }

    /// With lockstat on, a request that blocks counts its steps (`lockclass::FLC_*`):
    /// blocked, then polled to completion or slept, then retried (the default hand-off).
    /// Other tests may count too while it is on, so the counts are lower bounds.
    #[test]
    fn a_blocked_request_counts_its_wait_steps_while_lockstat_is_on() {
        use crate::cancel::CancelToken;
        use scalevfs_primitives::lockstat;
        let m = LockManager::new(Locking::Scalable);
        let ctx = m.new_context(9, 2);
        let req = |file, ty| LockRequest {
            owner: LockOwner::File(file),
            pid: 0,
            ty,
            start: 0,
            end: 9,
        };
        let counts = || {
            [
                &lockclass::FLC_BLOCKED,
                &lockclass::FLC_RETRIED,
                &lockclass::FLC_POLL_HIT,
                &lockclass::FLC_SLEPT,
            ]
            .map(|e| e.total())
        };
        let before = counts();
        lockstat::enable();
        m.setlk(&ctx, &req(1, LockType::Write), None).unwrap();
        std::thread::scope(|s| {
            let waiter = s.spawn(|| {
                let tok = CancelToken::with_deadline(Instant::now() + Duration::from_secs(30));
                m.setlk(&ctx, &req(2, LockType::Write), Some(&tok))
            });
            // The request blocks (it is listed as a waiter) before the holder lets go.
            while ctx.inner.lists.lock().posix[0].waiters.is_empty() {
                std::thread::yield_now();
            }
            m.setlk(&ctx, &req(1, LockType::Unlock), None).unwrap();
            assert_eq!(waiter.join().unwrap(), Ok(()));
        });
        lockstat::disable();
        let after = counts();
        if !lockstat::COMPILED_IN {
            assert_eq!(
                after, before,
                "nothing is counted where lockstat is compiled out"
            );
            return;
        }
        assert!(after[0] > before[0], "blocked: {before:?} -> {after:?}");
        assert!(after[1] > before[1], "retried: {before:?} -> {after:?}");
        assert!(
            after[2] + after[3] > before[2] + before[3],
            "polled to completion or slept: {before:?} -> {after:?}"
        );
    }
}
