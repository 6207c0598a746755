//! Bounded busy-waiting: look for work for a short while before paying for a sleep.
//!
//! A thread that sleeps in the kernel until its next request pays for the sleep and for
//! the wake-up (the waker's `try_to_wake_up`, the scheduler switching the sleeper back
//! in, and on a virtual machine the exit from an idle CPU's halt). When the next request
//! comes within a few microseconds of the last answer and nothing else needs the CPU,
//! watching shared memory for it can cost less (for the io_uring workers, which share
//! their CPU with their callers, it measured slower: `proto::uring`, "Waiting").
//! [`spin_until`] watches for at most a given time and then gives up, so a
//! thread that calls it only after it has just answered a request spins at most that
//! long per request, and an idle thread, which answered nothing since its last sleep,
//! never spins: it costs no CPU.
//!
//! The price is CPU time: up to the bound after every answer that is not followed by a
//! request in time, taken from whatever else could run on that CPU.

use std::time::{Duration, Instant};

/// How many times the condition is checked between two readings of the clock (a
/// `clock_gettime` through the vDSO costs tens of nanoseconds, a check a few).
const CHECKS_PER_CLOCK_READ: u32 = 32;

/// Calls `ready` until it returns true or `bound` has passed; returns its last answer.
/// `ready` is called at least once, even with a zero bound.
pub fn spin_until(bound: Duration, mut ready: impl FnMut() -> bool) -> bool {
    if ready() {
        return true;
    }
    if bound.is_zero() {
        return false;
    }
    let start = Instant::now();
    loop {
        for _ in 0..CHECKS_PER_CLOCK_READ {
            std::hint::spin_loop();
            if ready() {
                return true;
            }
        }
        if start.elapsed() >= bound {
            return ready();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    #[test]
    fn a_ready_condition_ends_the_spin_at_once() {
        let mut calls = 0;
        assert!(spin_until(Duration::from_secs(10), || {
            calls += 1;
            true
        }));
        assert_eq!(calls, 1);
    }

    #[test]
    fn a_zero_bound_checks_once() {
        let mut calls = 0;
        assert!(!spin_until(Duration::ZERO, || {
            calls += 1;
            false
        }));
        assert_eq!(calls, 1);
    }

    /// A condition that never holds ends the spin after the bound, not much later.
    #[test]
    fn the_spin_gives_up_after_its_bound() {
        let bound = Duration::from_millis(20);
        let start = Instant::now();
        assert!(!spin_until(bound, || false));
        let took = start.elapsed();
        assert!(took >= bound, "gave up after {took:?}");
        assert!(took < bound + Duration::from_secs(2), "spun {took:?}");
    }

    /// A flag set by another thread during the spin is seen.
    #[test]
    fn a_condition_set_by_another_thread_is_seen() {
        let flag = Arc::new(AtomicBool::new(false));
        let setter = {
            let flag = flag.clone();
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(5));
                // Release: pairs with the Acquire load in the spin below.
                flag.store(true, Ordering::Release);
            })
        };
        assert!(spin_until(Duration::from_secs(30), || flag.load(Ordering::Acquire)));
        setter.join().unwrap();
    }
}
