//! One inode's lock lists and the range algebra on them (Linux's `posix_lock_inode` and
//! `flock_lock_inode`), with no locking of their own: the caller holds the context lock.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use scalevfs_primitives::selfwake::SelfWaking;

use super::sync::Thread;
use super::{LockClass, LockInfo, LockOwner, LockRequest, LockType};

/// A lock held on an inode, and the requests waiting for it to go away.
pub(crate) struct Held {
    pub(crate) info: LockInfo,
    /// Requests that conflicted with this lock when last examined, oldest first
    /// (Linux's `flc_blocked_requests`). Re-examined whenever this lock shrinks, changes type
    /// or goes away; a pending waiter sits on exactly one lock's list, or among the
    /// followers of one request woken to retry (`handoff.rs`).
    pub(crate) waiters: Vec<Arc<Waiter>>,
}

impl Held {
    pub(crate) fn new(info: LockInfo) -> Self {
        Held {
            info,
            waiters: Vec::new(),
        }
    }
}

pub(crate) const PENDING: u8 = 0;
pub(crate) const GRANTED: u8 = 1;
pub(crate) const DEADLOCK: u8 = 2;
/// Woken to ask again (`handoff::HandOff::Retry`).
pub(crate) const RETRY: u8 = 3;

/// A blocked request.
pub(crate) struct Waiter {
    pub(crate) req: LockRequest,
    pub(crate) class: LockClass,
    /// `PENDING`, then `GRANTED`, `RETRY` or `DEADLOCK`, set once by whoever completes the request
    /// (under the context lock) before it unparks `thread`.
    pub(crate) state: AtomicU8,
    pub(crate) thread: Thread,
    /// The POSIX owner whose lock this request is registered as waiting on in the deadlock
    /// graph, plus one; 0 when it has no edge. Only read and written under the context lock.
    pub(crate) edge: AtomicU64,
    /// The waiting thread is polling `state` (running, not parked): a grant reaches it
    /// without a wake-up. A hint, written by the waiter, read by granters.
    pub(crate) polling: AtomicBool,
    /// When the request first queued (kept across its retries): a sleeping waiter is
    /// passed over for polling ones (`prefer_polling`) only until it has waited
    /// [`PASS_OVER_FOR`].
    pub(crate) queued_at: Instant,
    /// When the waiting thread wakes on its own: set for a request that lost a retry to a
    /// thread that asked meanwhile and now backs off (`handoff.rs`, "Backing off").
    pub(crate) wake_at: Option<Instant>,
    /// Set while the thread sleeps until `wake_at`: a `RETRY` completion then needs no
    /// unpark, since the thread wakes at `wake_at` anyway and sees it. The waiter clears
    /// it ([`SelfWaking::expire`]) before it sleeps without a deadline.
    pub(crate) timed: SelfWaking,
}

/// When a new waiter's request first queued and when its thread wakes on its own
/// ([`Waiter::queued_at`], [`Waiter::wake_at`]); the default for a first wait.
#[derive(Clone, Copy, Default)]
pub(crate) struct Pace {
    pub(crate) since: Option<Instant>,
    pub(crate) wake_at: Option<Instant>,
}

impl Waiter {
    pub(crate) fn id(self: &Arc<Self>) -> u64 {
        Arc::as_ptr(self) as usize as u64
    }
    pub(crate) fn state(&self) -> u8 {
        // Acquire: pairs with the Release in `complete`, so a granted waiter sees the lock
        // lists as the granter left them.
        self.state.load(Ordering::Acquire)
    }
    /// Completes the request. Called under the context lock, after the deadlock-graph
    /// edge (if any) was removed; the caller wakes the thread ([`Wakeups`]) once the
    /// context lock is released, so that the wake-up's system call is not made while
    /// others wait for the lock.
    ///
    /// A `RETRY` for a thread sleeping until its own `wake_at` is not woken: it finds the
    /// state when it wakes, and the completer (a running thread that has just released
    /// the lock and will likely take it again) pays no futex wake-up.
    pub(crate) fn complete(self: &Arc<Self>, state: u8, wake: &mut Wakeups) {
        // Release: pairs with the Acquire in `state`.
        self.state.store(state, Ordering::Release);
        // A self-waking waiter's `timed` is checked after the store (the Dekker handshake
        // in `scalevfs_primitives::selfwake`): a thread that has stopped relying on its
        // timer is always woken.
        if state == RETRY && self.wake_at.is_some() && !self.timed.must_wake() {
            crate::lockclass::FLC_WAKE_SKIPPED.count();
            return;
        }
        wake.push(self.clone());
    }
    pub(crate) fn edge(&self) -> Option<u64> {
        // Relaxed: only accessed under the context lock.
        self.edge.load(Ordering::Relaxed).checked_sub(1)
    }
    pub(crate) fn set_edge(&self, e: Option<u64>) {
        self.edge.store(e.map_or(0, |p| p + 1), Ordering::Relaxed);
    }
}

/// An inode's locks (Linux's `flc_posix` and `flc_flock`).
///
/// `posix` holds POSIX and OFD locks. Each owner's locks are contiguous, sorted by start,
/// never overlapping, and never adjacent with the same type (they merge); owners appear in
/// the order they first took a lock, as in Linux's list (so `F_GETLK` reports the same
/// conflicting lock Linux would).
///
/// `retrying` holds the requests woken to retry and the waiters queued behind them
/// (`handoff.rs`); it is empty under `HandOff::Grant`.
#[derive(Default)]
pub(crate) struct Lists {
    pub(crate) posix: Vec<Held>,
    pub(crate) flock: Vec<Held>,
    pub(crate) retrying: Vec<super::handoff::Retrying>,
}

fn overlaps(a: &LockInfo, start: i64, end: i64) -> bool {
    a.start <= end && start <= a.end
}

/// The first lock in `list` that conflicts with `req` (Linux's `posix_locks_conflict` /
/// `flock_locks_conflict`: another owner, overlapping, at least one writer).
pub(crate) fn find_conflict(list: &[Held], req: &LockRequest) -> Option<usize> {
    list.iter().position(|h| conflicts(&h.info, req))
}

/// Whether held lock `h` conflicts with `req` (an unlock conflicts with nothing).
pub(crate) fn conflicts(h: &LockInfo, req: &LockRequest) -> bool {
    req.ty != LockType::Unlock
        && h.owner != req.owner
        && overlaps(h, req.start, req.end)
        && (h.ty == LockType::Write || req.ty == LockType::Write)
}

/// Applies a POSIX/OFD request that has no conflict (or an unlock) to the owner's locks:
/// split, trim, merge, upgrade and downgrade as `posix_lock_inode` does. The waiters of
/// every lock it changes or removes are appended to `reeval`. Allocation-free unless the
/// list grows past its capacity.
pub(crate) fn posix_apply(list: &mut Vec<Held>, req: &LockRequest, reeval: &mut Vec<Arc<Waiter>>) {
    let Some(first) = list.iter().position(|h| h.info.owner == req.owner) else {
        if req.ty != LockType::Unlock {
            list.push(Held::new(req.info(LockClass::of_posix(req.owner))));
        }
        return;
    };
    let (mut start, mut end) = (req.start, req.end);
    let mut i = first;
    while i < list.len() && list[i].info.owner == req.owner {
        let h = &mut list[i];
        if req.ty == h.info.ty {
            // Same type: merge if overlapping or adjacent. start - 1 and h.start - 1 cannot
            // overflow: both are >= 0.
            if h.info.end < start - 1 {
                i += 1;
                continue;
            }
            if h.info.start - 1 > end {
                break;
            }
            start = start.min(h.info.start);
            end = end.max(h.info.end);
            reeval.append(&mut h.waiters);
            list.remove(i);
            continue;
        }
        // Different type (or unlock): only overlapping locks are affected.
        if h.info.end < start {
            i += 1;
            continue;
        }
        if h.info.start > end {
            break;
        }
        reeval.append(&mut h.waiters);
        if h.info.start < start && h.info.end > end {
            // Split: the old lock keeps the left part, a copy takes the right part.
            let mut right = h.info;
            right.start = end + 1;
            h.info.end = start - 1;
            list.insert(i + 1, Held::new(right));
            i += 1;
            break;
        } else if h.info.start < start {
            h.info.end = start - 1;
            i += 1;
        } else if h.info.end > end {
            h.info.start = end + 1;
            break;
        } else {
            list.remove(i);
        }
    }
    if req.ty != LockType::Unlock {
        let mut info = req.info(LockClass::of_posix(req.owner));
        info.start = start;
        info.end = end;
        list.insert(i, Held::new(info));
    }
}

/// `flock_lock_inode`: a conversion first drops the owner's old lock (so a failed
/// conversion loses it, as on Linux), then the request is granted unless another file
/// holds a conflicting lock, whose index is returned.
pub(crate) fn flock_apply(
    list: &mut Vec<Held>,
    req: &LockRequest,
    reeval: &mut Vec<Arc<Waiter>>,
) -> Result<(), usize> {
    if let Some(i) = list.iter().position(|h| h.info.owner == req.owner) {
        if list[i].info.ty == req.ty {
            return Ok(());
        }
        let mut old = list.remove(i);
        reeval.append(&mut old.waiters);
    }
    if req.ty == LockType::Unlock {
        return Ok(());
    }
    if let Some(j) = find_conflict(list, req) {
        return Err(j);
    }
    list.push(Held::new(req.info(LockClass::Flock)));
    Ok(())
}

/// Removes every lock `owner` holds in `list`, collecting their waiters.
pub(crate) fn remove_owner(list: &mut Vec<Held>, owner: LockOwner, reeval: &mut Vec<Arc<Waiter>>) {
    list.retain_mut(|h| {
        if h.info.owner == owner {
            reeval.append(&mut h.waiters);
            false
        } else {
            true
        }
    });
}

/// Waiters completed under a context lock, to be woken with [`Wakeups::wake`] once the
/// caller has released that lock: the waiter sees its new `state` at once if it is still
/// polling, and a sleeping one is woken without the lock held. A completed waiter that
/// returns before its unpark only gets a spurious unpark, which every park loop
/// tolerates.
///
/// No `Vec` until there is something to wake, and no `Drop`: an uncontended lock
/// operation pays one `None` test for all this.
#[derive(Default)]
#[must_use = "completed waiters must be woken once the context lock is released"]
pub(crate) struct Wakeups(Option<Vec<Arc<Waiter>>>);

impl Wakeups {
    fn push(&mut self, w: Arc<Waiter>) {
        self.0.get_or_insert_with(Vec::new).push(w);
    }

    /// Unparks every completed waiter. Call after releasing the context lock.
    #[inline(always)]
    pub(crate) fn wake(self) {
        if let Some(all) = self.0 {
            wake_all(all);
        }
    }
}

#[cold]
fn wake_all(all: Vec<Arc<Waiter>>) {
    for w in all {
        crate::lockclass::FLC_UNPARKED.count();
        w.thread.unpark();
    }
}

/// How long a sleeping waiter may be passed over for polling ones queued behind it
/// (parking_lot's mutexes bound unfairness the same way, at 0.5 ms).
pub(crate) const PASS_OVER_FOR: Duration = Duration::from_millis(1);

/// Reorders a re-examination queue so that the first waiter still polling its state is
/// examined first, unless a sleeping waiter ahead of it has waited [`PASS_OVER_FOR`].
///
/// Why: granting in strict arrival order hands the lock to the waiter that has waited
/// longest, which has usually gone to sleep, so every hand-off pays a wake-up (tens of
/// microseconds, more with more threads than CPUs) while the lock sits granted but
/// unused. A polling waiter takes the lock within nanoseconds. Linux lets whoever runs
/// first take a released lock and bounds nothing; we keep arrival order within a bound:
/// after `PASS_OVER_FOR` a sleeper is granted in its turn.
pub(crate) fn prefer_polling(queue: &mut [Arc<Waiter>]) {
    // Relaxed: `polling` is a hint that orders nothing.
    let Some(p) = queue.iter().position(|w| w.polling.load(Ordering::Relaxed)) else {
        return;
    };
    if p == 0
        || queue[..p]
            .iter()
            .any(|w| w.queued_at.elapsed() >= PASS_OVER_FOR)
    {
        return;
    }
    queue[..=p].rotate_right(1);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn waiter(polling: bool, waited: Duration) -> Arc<Waiter> {
        let req = LockRequest {
            owner: LockOwner::File(1),
            pid: 0,
            ty: LockType::Write,
            start: 0,
            end: 0,
        };
        let pace = Pace {
            since: Some(Instant::now() - waited),
            wake_at: None,
        };
        let w = Waiter::new(req, LockClass::Ofd, pace);
        w.polling.store(polling, Ordering::Relaxed);
        Arc::new(w)
    }

    fn order(q: &[Arc<Waiter>], all: &[Arc<Waiter>]) -> Vec<usize> {
        q.iter()
            .map(|w| all.iter().position(|x| Arc::ptr_eq(x, w)).unwrap())
            .collect()
    }

    /// The first polling waiter goes first; the sleepers keep their order behind it,
    /// and the rest of the queue is untouched.
    #[test]
    fn a_polling_waiter_is_examined_first() {
        let all: Vec<_> = [false, false, true, false, true]
            .iter()
            .map(|&p| waiter(p, Duration::ZERO))
            .collect();
        let mut q = all.clone();
        prefer_polling(&mut q);
        assert_eq!(order(&q, &all), [2, 0, 1, 3, 4]);
    }

    /// A sleeper that has waited `PASS_OVER_FOR` is not passed over any more.
    #[test]
    fn a_long_sleeper_keeps_its_turn() {
        let all = vec![
            waiter(false, PASS_OVER_FOR * 2),
            waiter(false, Duration::ZERO),
            waiter(true, Duration::ZERO),
        ];
        let mut q = all.clone();
        prefer_polling(&mut q);
        assert_eq!(order(&q, &all), [0, 1, 2]);
        let none: Vec<_> = (0..3).map(|_| waiter(false, Duration::ZERO)).collect();
        let mut q = none.clone();
        prefer_polling(&mut q);
        assert_eq!(order(&q, &none), [0, 1, 2], "nobody polls: arrival order");
    }

    /// Completing a waiter publishes its state at once but unparks its thread only when
    /// the caller wakes the `Wakeups` (after releasing the context lock).
    #[test]
    fn wakeups_unpark_when_dropped() {
        let w = waiter(false, Duration::ZERO);
        let mut wake = Wakeups::default();
        w.complete(GRANTED, &mut wake);
        assert_eq!(w.state(), GRANTED);
        assert_eq!(wake.0.as_ref().map(Vec::len), Some(1));
        wake.wake();
        // The waiter's thread is this one: the unpark left a token, so park returns.
        std::thread::park();
    }
}
