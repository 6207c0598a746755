//! [`LegacyRef`]: the "before" design, a count changed only under the lock.

use super::word::{LockRefGuard, Word};

/// The "before" design of Linux's lockref: a spinlock-protected count. Every change takes the lock, like
/// `d_lock` around `d_count` before lockref. Same word layout and guard as [`LockRef`](super::LockRef).
pub struct LegacyRef {
    pub(super) word: Word,
}

impl LegacyRef {
    /// A count of `count` (clamped to `i32::MAX`), unlocked.
    pub fn new(count: u32) -> LegacyRef {
        LegacyRef {
            word: Word::new(count),
        }
    }

    /// Takes a reference unconditionally.
    #[inline]
    pub fn get(&self) {
        self.word.lock().inc();
    }

    /// Takes a reference if the count is positive.
    #[inline]
    pub fn get_not_zero(&self) -> bool {
        self.word.lock().inc_if(|c| c > 0)
    }

    /// Takes a reference if the count is not dead.
    #[inline]
    pub fn get_not_dead(&self) -> bool {
        self.word.lock().inc_if(|c| c >= 0)
    }

    /// Drops a reference if the count is `> 1` (under the lock); `None` otherwise.
    #[inline]
    pub fn put_return(&self) -> Option<u32> {
        let mut g = self.word.lock();
        let c = g.count();
        if c <= 1 {
            return None;
        }
        g.dec();
        Some(g.count() as u32)
    }

    /// Drops a reference if the count is `> 1`, else returns the lock, count unchanged.
    #[inline]
    pub fn put_or_lock(&self) -> Option<LockRefGuard<'_>> {
        self.word.lock().put_or_keep()
    }
}
