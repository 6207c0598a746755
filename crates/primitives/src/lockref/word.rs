//! The lock + count word both designs share, and the guard of its lock.

use super::{clamp, count_of, dec, inc, with_count, DEAD, LOCKED, SPINS_BEFORE_YIELD};
use crate::sync::{spin_loop, yield_now, AtomicU64, Ordering};
use std::fmt;

/// The lock + count word. Both designs use it: `LockRef` adds the fast path, `LegacyRef`
/// only ever changes the count under the lock.
pub(super) struct Word(
    pub(super) AtomicU64,
    /// Test only: threads inside `wait_unlocked`, so a test can release the lock once its
    /// threads are known to be waiting.
    #[cfg(all(test, not(loom)))]
    pub(super) std::sync::atomic::AtomicUsize,
);

impl Word {
    pub(super) fn new(count: u32) -> Word {
        Word(
            AtomicU64::new(with_count(0, clamp(count))),
            #[cfg(all(test, not(loom)))]
            Default::default(),
        )
    }

    #[inline]
    pub(super) fn count(&self) -> i32 {
        // Relaxed: a racy snapshot (see the module docs).
        count_of(self.0.load(Ordering::Relaxed))
    }

    /// Spins, then yields, until the lock bit is clear; returns the unlocked word seen.
    #[inline(never)]
    pub(super) fn wait_unlocked(&self) -> u64 {
        let mut spins = 0;
        #[cfg(all(test, not(loom)))]
        self.1.fetch_add(1, Ordering::SeqCst);
        loop {
            // Relaxed: the caller's following fetch_or / compare-exchange is the Acquire.
            let w = self.0.load(Ordering::Relaxed);
            if w & LOCKED == 0 {
                #[cfg(all(test, not(loom)))]
                self.1.fetch_sub(1, Ordering::SeqCst);
                return w;
            }
            if spins < SPINS_BEFORE_YIELD {
                spins += 1;
                spin_loop();
            } else {
                yield_now();
            }
        }
    }

    #[inline]
    pub(super) fn try_lock(&self) -> Option<LockRefGuard<'_>> {
        // Acquire: pairs with the Release of the previous unlock and of fast-path changes.
        // fetch_or keeps the count bits intact, so it cannot lose a concurrent count change.
        if self.0.fetch_or(LOCKED, Ordering::Acquire) & LOCKED == 0 {
            Some(LockRefGuard { word: &self.0 })
        } else {
            None
        }
    }

    #[inline]
    pub(super) fn lock(&self) -> LockRefGuard<'_> {
        loop {
            if let Some(g) = self.try_lock() {
                return g;
            }
            // Test-and-test-and-set: wait read-only, then try again.
            self.wait_unlocked();
        }
    }
}

/// Holds the lock of a [`LockRef`](super::LockRef) or [`LegacyRef`](super::LegacyRef); the count may be changed through it.
/// Dropping it unlocks.
#[must_use = "dropping the guard unlocks at once"]
pub struct LockRefGuard<'a> {
    word: &'a AtomicU64,
}

impl LockRefGuard<'_> {
    #[inline]
    pub(super) fn load(&self) -> u64 {
        // Relaxed: we hold the lock, so no one else changes the word (a waiter's fetch_or
        // rewrites the same value).
        self.word.load(Ordering::Relaxed)
    }

    #[inline]
    pub(super) fn store_count(&mut self, count: i32) {
        // Relaxed: published by the unlock's Release store.
        self.word
            .store(with_count(LOCKED, count), Ordering::Relaxed);
    }

    /// The count (negative if dead).
    #[inline]
    pub fn count(&self) -> i32 {
        count_of(self.load())
    }

    /// Sets the count (values above `i32::MAX` saturate). Revives a dead count.
    #[inline]
    pub fn set_count(&mut self, count: u32) {
        self.store_count(clamp(count));
    }

    /// Increments the count (a dead or saturated count is left unchanged).
    #[inline]
    pub fn inc(&mut self) {
        let c = self.count();
        self.store_count(inc(c));
    }

    /// Decrements the count (a zero, dead or saturated count is left unchanged).
    #[inline]
    pub fn dec(&mut self) {
        let c = self.count();
        self.store_count(dec(c));
    }

    /// Marks the object dead: count = [`DEAD`] (Linux's `lockref_mark_dead`). Later
    /// `get_not_dead` calls fail until the count is set again.
    #[inline]
    pub fn mark_dead(&mut self) {
        self.store_count(DEAD);
    }

    /// Whether the count is dead (negative).
    #[inline]
    pub fn is_dead(&self) -> bool {
        self.count() < 0
    }

    /// Increments if `ok(count)`, then unlocks: the locked half of the conditional gets.
    #[inline]
    pub(super) fn inc_if(mut self, ok: impl FnOnce(i32) -> bool) -> bool {
        let ok = ok(self.count());
        if ok {
            self.inc();
        }
        ok
    }

    /// The locked half of `put_or_lock`: keeps the lock for the last reference (count
    /// `<= 1`, unchanged), else drops one reference and unlocks.
    #[inline]
    pub(super) fn put_or_keep(mut self) -> Option<Self> {
        if self.count() <= 1 {
            return Some(self);
        }
        self.dec();
        None
    }
}

impl Drop for LockRefGuard<'_> {
    #[inline]
    fn drop(&mut self) {
        let w = self.load();
        // Release: pairs with the Acquire of the next locker's fetch_or and of the next
        // fast-path compare-exchange that reads this unlocked word.
        self.word.store(w & !LOCKED, Ordering::Release);
    }
}

impl fmt::Debug for LockRefGuard<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LockRefGuard")
            .field("count", &self.count())
            .finish()
    }
}
