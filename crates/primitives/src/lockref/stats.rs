//! Per-thread statistics: what [`LockRef`](super::LockRef) operations did off the pure fast
//! path (observability of the fallback behaviour; only slow paths are counted).

/// What the calling thread's [`LockRef`](super::LockRef) operations did off the pure fast path, cumulative
/// since the thread started. Only slow events are counted, so the fast path pays nothing.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct LockRefStats {
    /// Fast-path operations that found the lock held and waited for it to clear (instead
    /// of queueing on it, as Linux does).
    pub waits: u64,
    /// Operations that exhausted their [`RETRIES`](super::RETRIES) budget and took the lock.
    pub fallbacks: u64,
    /// Lock acquisitions by [`LockRef`](super::LockRef) operations (fallbacks plus transitions that need
    /// the lock); explicit [`LockRef::lock`](super::LockRef::lock)/[`LockRef::try_lock`](super::LockRef::try_lock) calls are not counted.
    pub locked: u64,
}

impl LockRefStats {
    /// The counts accumulated since `earlier`, a previous snapshot of the same thread
    /// (saturating, so a snapshot of another thread gives zeros rather than a panic).
    pub fn since(self, earlier: LockRefStats) -> LockRefStats {
        LockRefStats {
            waits: self.waits.saturating_sub(earlier.waits),
            fallbacks: self.fallbacks.saturating_sub(earlier.fallbacks),
            locked: self.locked.saturating_sub(earlier.locked),
        }
    }
}

#[cfg(not(loom))]
thread_local! {
    static STATS: std::cell::Cell<LockRefStats> = const {
        std::cell::Cell::new(LockRefStats { waits: 0, fallbacks: 0, locked: 0 })
    };
}

/// The calling thread's [`LockRefStats`] (all zero under loom).
pub fn thread_stats() -> LockRefStats {
    #[cfg(not(loom))]
    {
        STATS.with(|s| s.get())
    }
    #[cfg(loom)]
    {
        LockRefStats::default()
    }
}

#[inline]
pub(super) fn note(f: impl FnOnce(&mut LockRefStats)) {
    #[cfg(not(loom))]
    STATS.with(|s| {
        let mut v = s.get();
        f(&mut v);
        s.set(v);
    });
    #[cfg(loom)]
    let _ = f;
}
