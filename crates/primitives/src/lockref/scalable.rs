//! [`LockRef`]: the scalable design, a count changed by compare-exchange while the lock is
//! free (see the parent module's "Algorithm").

use super::stats::note;
use super::word::{LockRefGuard, Word};
use super::{count_of, dec, inc, with_count, LOCKED, RETRIES};
use crate::sync::Ordering;

/// What a fast-path step wants to do with the count it read.
pub(super) enum Step<R> {
    /// Compare-exchange the count to this value, then return `R`.
    Set(i32, R),
    /// Return `R` without writing.
    Done(R),
    /// This transition needs the lock.
    NeedLock,
}

/// A spinlock and a 32-bit reference count in one 64-bit word, changed by compare-exchange
/// while the lock is free (Linux's lockref), returning to the lockless path after
/// contention. See the module docs.
pub struct LockRef {
    pub(super) word: Word,
    /// Test only: fall back to the lock as soon as it is seen held, as Linux's
    /// `CMPXCHG_LOOP` does, so a test can measure what waiting instead buys.
    #[cfg(test)]
    pub(super) linux_fallback: bool,
}

impl LockRef {
    /// A count of `count` (clamped to `i32::MAX`), unlocked.
    pub fn new(count: u32) -> LockRef {
        LockRef {
            word: Word::new(count),
            #[cfg(test)]
            linux_fallback: false,
        }
    }

    /// The fast path: applies `step` to the count by compare-exchange while the lock is
    /// free. `None` means: take the lock (the step asked for it, or the budget ran out).
    #[inline]
    fn fast<R>(&self, mut step: impl FnMut(i32) -> Step<R>) -> Option<R> {
        // Relaxed: the compare-exchange below is the Acquire.
        let mut old = self.word.0.load(Ordering::Relaxed);
        let mut budget = RETRIES;
        loop {
            if old & LOCKED != 0 {
                #[cfg(test)]
                if self.linux_fallback {
                    note(|s| s.fallbacks += 1);
                    return None;
                }
                // Wait for the holder instead of queueing behind it (module docs).
                note(|s| s.waits += 1);
                old = self.word.wait_unlocked();
            } else {
                match step(count_of(old)) {
                    Step::Done(r) => return Some(r),
                    Step::NeedLock => return None,
                    Step::Set(count, r) => {
                        // AcqRel on success: see "Memory ordering" in the module docs.
                        match self.word.0.compare_exchange_weak(
                            old,
                            with_count(old, count),
                            Ordering::AcqRel,
                            Ordering::Relaxed,
                        ) {
                            Ok(_) => return Some(r),
                            Err(cur) => old = cur,
                        }
                    }
                }
            }
            budget -= 1;
            if budget == 0 {
                note(|s| s.fallbacks += 1);
                return None;
            }
        }
    }

    /// The slow path: the lock, counted in [`thread_stats`](super::thread_stats).
    #[inline(never)]
    fn slow_lock(&self) -> LockRefGuard<'_> {
        note(|s| s.locked += 1);
        self.word.lock()
    }

    /// Takes a reference unconditionally (the caller already holds one).
    #[inline]
    pub fn get(&self) {
        let done = self.fast(|c| {
            let n = inc(c);
            if n == c {
                Step::Done(())
            } else {
                Step::Set(n, ())
            }
        });
        if done.is_none() {
            self.slow_lock().inc();
        }
    }

    /// Takes a reference if the count is positive.
    #[inline]
    pub fn get_not_zero(&self) -> bool {
        let fast = self.fast(|c| {
            if c <= 0 {
                Step::Done(false)
            } else if c == i32::MAX {
                Step::Done(true)
            } else {
                Step::Set(c + 1, true)
            }
        });
        fast.unwrap_or_else(|| self.slow_lock().inc_if(|c| c > 0))
    }

    /// Takes a reference if the count is not dead (a zero count is revived to 1).
    #[inline]
    pub fn get_not_dead(&self) -> bool {
        let fast = self.fast(|c| {
            if c < 0 {
                Step::Done(false)
            } else if c == i32::MAX {
                Step::Done(true)
            } else {
                Step::Set(c + 1, true)
            }
        });
        fast.unwrap_or_else(|| self.slow_lock().inc_if(|c| c >= 0))
    }

    /// Drops a reference locklessly if the count is `> 1`; see [`RefCount::put_return`](super::RefCount::put_return).
    #[inline]
    pub fn put_return(&self) -> Option<u32> {
        self.fast(|c| {
            if c <= 1 {
                Step::NeedLock
            } else if c == i32::MAX {
                Step::Done(c as u32)
            } else {
                Step::Set(c - 1, (c - 1) as u32)
            }
        })
    }

    /// Drops a reference if the count is `> 1`, else returns the lock with the count
    /// unchanged; see [`RefCount::put_or_lock`](super::RefCount::put_or_lock).
    #[inline]
    pub fn put_or_lock(&self) -> Option<LockRefGuard<'_>> {
        let fast = self.fast(|c| {
            if c <= 1 {
                Step::NeedLock
            } else {
                Step::Set(dec(c), ())
            }
        });
        if fast.is_some() {
            return None;
        }
        // The count is <= 1, or the budget ran out and the count may still be > 1.
        self.slow_lock().put_or_keep()
    }
}
