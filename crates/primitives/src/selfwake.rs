//! A waiter that wakes on its own: a thread sleeping until a deadline of its own may be
//! completed without a wake-up, since it will find the completion when its timer fires.
//!
//! ## Why
//! Waking a sleeping thread is a system call (a futex wake, often an inter-processor
//! interrupt) made by the completer. Where the completer is a running thread that will
//! likely need the resource again at once (a lock released in a tight loop), that call
//! costs it more than its own work, and the woken thread usually loses the race anyway.
//! A waiter that backs off instead sleeps with a timeout; completing it then costs a
//! store and a fence, and the waiter looks when its timer fires.
//!
//! ## Protocol (a Dekker handshake)
//! The waiting thread's completion is some other atomic (`state`), stored by the
//! completer with Release and loaded by the waiter with Acquire. [`SelfWaking`] is one
//! flag, `timed`, true while the waiter is in its timed sleep.
//!
//! - Completer: (C1) store `state`, (C2) a `SeqCst` fence, (C3) load `timed`; unpark the
//!   waiter only if it is false ([`SelfWaking::must_wake`]).
//! - Waiter, when its deadline passes with `state` still pending: (W1) store `timed =
//!   false`, (W2) a `SeqCst` fence ([`SelfWaking::expire`]), (W3) load `state`, and sleep
//!   without a deadline only if it is still pending.
//!
//! The two fences are totally ordered. If C2 comes first, W3 (after W2) sees C1's store
//! and the waiter does not sleep. If W2 comes first, C3 sees W1's store and the completer
//! unparks the waiter (an unpark before the park leaves a token, so the park returns).
//! Either way no completion is left unseen by a thread asleep without a deadline. The
//! loom model below checks every interleaving and weak-memory outcome of the two sides.
//!
//! Before its deadline, a waiter woken for another reason (a spurious wake-up, a signal)
//! re-checks `state` itself; it calls [`SelfWaking::expire`] only once it stops relying
//! on its timer.

use crate::sync::{fence, AtomicBool, Ordering};

/// The `timed` flag of a waiter that may wake on its own. See the module docs.
#[derive(Debug)]
pub struct SelfWaking {
    timed: AtomicBool,
}

impl SelfWaking {
    /// A waiter that sleeps until a deadline of its own (`timed`), or one that sleeps
    /// until woken (every completion then wakes it).
    pub fn new(timed: bool) -> Self {
        SelfWaking {
            timed: AtomicBool::new(timed),
        }
    }

    /// Called by the completer after its Release store of the completion: whether it
    /// must unpark the waiter (false while the waiter relies on its own timer).
    #[inline]
    pub fn must_wake(&self) -> bool {
        // C2: pairs with W2 in `expire` (see the module docs).
        fence(Ordering::SeqCst);
        // C3. Relaxed: ordered by the fences.
        !self.timed.load(Ordering::Relaxed)
    }

    /// Called by the waiter when its deadline passed and it will sleep until woken:
    /// afterwards it must re-check its completion before it parks.
    #[inline]
    pub fn expire(&self) {
        // W1. Relaxed: ordered by the fences.
        self.timed.store(false, Ordering::Relaxed);
        // W2: pairs with C2 in `must_wake`.
        fence(Ordering::SeqCst);
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;
    use crate::sync::{Arc, AtomicBool as Flag};
    use loom::thread;

    /// The completer completes a timed waiter whose deadline passes at the same time:
    /// either the completer wakes it or the waiter sees the completion before sleeping.
    #[test]
    fn loom_a_completion_is_never_lost_at_the_deadline() {
        loom::model(|| {
            let state = Arc::new(Flag::new(false));
            let w = Arc::new(SelfWaking::new(true));
            let completer = {
                let (state, w) = (state.clone(), w.clone());
                thread::spawn(move || {
                    state.store(true, Ordering::Release);
                    w.must_wake()
                })
            };
            w.expire();
            let seen = state.load(Ordering::Acquire);
            let woken = completer.join().unwrap();
            assert!(woken || seen, "the waiter would sleep forever");
        });
    }

    /// Without the waiter's fence the handshake fails: the model finds the outcome in
    /// which both loads miss the other side's store (so the fences are what it rests on).
    #[test]
    fn loom_without_the_fences_a_completion_can_be_lost() {
        let lost = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let seen_lost = lost.clone();
        loom::model(move || {
            let state = Arc::new(Flag::new(false));
            let timed = Arc::new(Flag::new(true));
            let completer = {
                let (state, timed) = (state.clone(), timed.clone());
                thread::spawn(move || {
                    state.store(true, Ordering::Release);
                    !timed.load(Ordering::Acquire)
                })
            };
            timed.store(false, Ordering::Release);
            let seen = state.load(Ordering::Acquire);
            if !(completer.join().unwrap() || seen) {
                seen_lost.store(true, std::sync::atomic::Ordering::Relaxed);
            }
        });
        assert!(lost.load(std::sync::atomic::Ordering::Relaxed));
    }
}
