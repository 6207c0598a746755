//! [`SeqLock`]: a sequence counter plus an exclusive writer lock (Linux's `seqlock_t`).

use super::{Backoff, ReadMode, SeqCount, SeqCounter};
use crate::sync::{AtomicBool, Ordering};

/// Sequence lock: optimistic readers plus writers serialized by a spin-then-yield lock.
///
/// The lock also serves the *exclusive locking reader* ([`SeqLock::read_excl`]), which
/// excludes writers without bumping the counter. This is the rename lock before the `seqrwlock_t` patches:
/// every `d_path()` that fell back to locking serialized on it.
///
/// The writer lock is test-and-test-and-set, not a ticket lock: under oversubscription a
/// ticket lock hands the lock to a waiter that may be preempted, stalling everyone; TTAS
/// lets whoever is running take it. Writers are not FIFO; this type is for rare writers.
pub struct SeqLock {
    seq: SeqCounter,
    /// The writer lock: `true` while a writer or an exclusive locking reader holds it.
    locked: AtomicBool,
}

impl std::fmt::Debug for SeqLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Relaxed: a diagnostic snapshot.
        f.debug_struct("SeqLock")
            .field("seq", &self.sequence())
            .field("locked", &self.locked.load(Ordering::Relaxed))
            .finish()
    }
}

impl Default for SeqLock {
    fn default() -> Self {
        Self::new()
    }
}

impl SeqLock {
    /// An unlocked sequence lock, count 0.
    pub fn new() -> Self {
        SeqLock {
            seq: SeqCounter::new(),
            locked: AtomicBool::new(false),
        }
    }

    /// Starts an optimistic read (`read_seqbegin`): waits while a writer is in progress.
    #[inline]
    pub fn read_begin(&self) -> SeqCount {
        self.seq.read_begin()
    }

    /// `true` if the optimistic read started at `start` must be retried (`read_seqretry`).
    #[inline]
    pub fn read_retry(&self, start: SeqCount) -> bool {
        self.seq.read_retry(start)
    }

    fn lock(&self) {
        let mut backoff = Backoff::new();
        loop {
            // Acquire pairs with the Release store in `unlock`: the previous holder's
            // stores (data and counter) happen-before our section.
            if self
                .locked
                .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
            {
                return;
            }
            // Test before test-and-set: wait with plain loads, so waiters share the line
            // instead of bouncing it. Relaxed: the CAS above provides the ordering.
            while self.locked.load(Ordering::Relaxed) {
                backoff.snooze();
            }
        }
    }

    fn try_lock(&self) -> bool {
        // Acquire: as in `lock`.
        self.locked
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
    }

    fn unlock(&self) {
        // Release pairs with the Acquire CAS in `lock`/`try_lock`.
        self.locked.store(false, Ordering::Release);
    }

    /// Takes the writer lock and makes the counter odd (`write_seqlock`). Optimistic
    /// readers wait or retry until the guard drops.
    pub fn write(&self) -> SeqLockWriteGuard<'_> {
        self.lock();
        self.seq.write_begin();
        SeqLockWriteGuard { lock: self }
    }

    /// `write` if the lock is free right now (`write_tryseqlock`).
    pub fn try_write(&self) -> Option<SeqLockWriteGuard<'_>> {
        if !self.try_lock() {
            return None;
        }
        self.seq.write_begin();
        Some(SeqLockWriteGuard { lock: self })
    }

    /// Takes the writer lock *without* bumping the counter (`read_seqlock_excl`): excludes
    /// writers and other locking readers, leaves optimistic readers alone.
    pub fn read_excl(&self) -> SeqLockExclGuard<'_> {
        self.lock();
        SeqLockExclGuard { lock: self }
    }

    /// The locking reader (`read_seqbegin_or_lock` ... `need_seqretry` ... `done_seqretry`):
    /// runs `f(ReadMode::Optimistic)` once locklessly; if a writer interfered, discards the
    /// result and runs `f(ReadMode::Locked)` under [`read_excl`](Self::read_excl), which
    /// cannot be interfered with. So `f` runs at most twice and never starves.
    ///
    /// `f` must tolerate torn values in the optimistic pass (see the module docs).
    pub fn read_or_lock<T>(&self, mut f: impl FnMut(ReadMode) -> T) -> T {
        let start = self.read_begin();
        let v = f(ReadMode::Optimistic);
        if !self.read_retry(start) {
            return v;
        }
        let _excl = self.read_excl();
        f(ReadMode::Locked)
    }

    /// The current raw counter (diagnostics, tests).
    pub fn sequence(&self) -> u32 {
        self.seq.raw()
    }
}

/// A write section of a [`SeqLock`]; dropping it makes the counter even and unlocks.
#[must_use = "the write section ends when the guard is dropped"]
pub struct SeqLockWriteGuard<'a> {
    lock: &'a SeqLock,
}

impl Drop for SeqLockWriteGuard<'_> {
    fn drop(&mut self) {
        self.lock.seq.write_end();
        self.lock.unlock();
    }
}

/// An exclusive locking-reader section of a [`SeqLock`] (`read_sequnlock_excl` on drop).
#[must_use = "the read section ends when the guard is dropped"]
pub struct SeqLockExclGuard<'a> {
    lock: &'a SeqLock,
}

impl Drop for SeqLockExclGuard<'_> {
    fn drop(&mut self) {
        self.lock.unlock();
    }
}
