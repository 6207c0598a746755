//! A test-and-test-and-set spinlock with an RAII guard, recording into a lockstat class.
//!
//! [`RawSpinLock`] is one `AtomicBool`: `true` while held. [`SpinLock<T>`] adds the data it
//! protects and an optional [`LockClass`]; it is the lock the kernel would use for short
//! critical sections that never sleep (kernfs's `kernfs_open_node_lock`).
//!
//! ## Algorithm
//!
//! `lock` first tries one `compare_exchange(false, true)`: the uncontended case costs one
//! atomic RMW. If that fails it spins on plain loads (the "test" of test-and-test-and-set:
//! waiters share the line read-only instead of bouncing it with RMWs) and retries the CAS
//! only when it sees the lock free. After [`SPIN_LIMIT`] polls it yields the CPU on each
//! further poll: the benchmarks run 64 threads on 2 cores, where the holder is often
//! preempted and spinning would burn the waiter's whole time slice for nothing.
//!
//! Not fair: a releasing thread may re-acquire before a waiter notices. Not recursive.
//!
//! ## Memory ordering
//!
//! The successful CAS is `Acquire`; it pairs with the `Release` store of `false` in
//! [`RawSpinLock::unlock`], so everything the previous holder wrote to the protected data
//! happens-before everything the next holder reads. Failed CASes and the polling loads are
//! `Relaxed`: they only decide when to retry, and the retry's `Acquire` CAS synchronizes.
//!
//! ## Lockstat
//!
//! With a class and lockstat on, an acquisition whose first CAS fails counts as contended,
//! and the guard stamps the hold start; the hold time is recorded before the unlock store.
//! Off, `lock` is the raw lock plus a test of the class pointer and of the global flag.

use std::cell::UnsafeCell;
use std::marker::PhantomData;
use std::ops::{Deref, DerefMut};

use crate::lockstat::{self, HoldStamp, Kind, LockClass};
use crate::sync::{spin_loop, yield_now, AtomicBool, Ordering};

/// Polls with a CPU spin hint before the waiter starts yielding on every poll.
pub const SPIN_LIMIT: u32 = 64;

/// The bare lock word: no data, no statistics.
#[derive(Debug, Default)]
pub struct RawSpinLock {
    locked: AtomicBool,
}

impl RawSpinLock {
    /// An unlocked lock.
    pub fn new() -> Self {
        RawSpinLock {
            locked: AtomicBool::new(false),
        }
    }

    /// Takes the lock if it is free; `true` on success.
    #[inline]
    pub fn try_lock(&self) -> bool {
        // Acquire pairs with the Release store in `unlock`.
        self.locked
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
    }

    /// Spins (then yields) until the lock is taken.
    #[inline]
    pub fn lock(&self) {
        if !self.try_lock() {
            self.lock_contended();
        }
    }

    #[cold]
    fn lock_contended(&self) {
        let mut polls = 0u32;
        loop {
            // Relaxed: only decides when to retry; the CAS below acquires.
            while self.locked.load(Ordering::Relaxed) {
                if polls < SPIN_LIMIT {
                    polls += 1;
                    spin_loop();
                } else {
                    yield_now();
                }
            }
            if self.try_lock() {
                return;
            }
        }
    }

    /// Releases the lock.
    ///
    /// # Safety
    ///
    /// The caller must hold the lock (taken by `lock` or a successful `try_lock`) and give
    /// up any access to the data it protects.
    #[inline]
    pub unsafe fn unlock(&self) {
        // Release pairs with the Acquire CAS in `try_lock` of the next holder.
        self.locked.store(false, Ordering::Release);
    }

    /// Whether some thread holds the lock (a racy snapshot).
    #[inline]
    pub fn is_locked(&self) -> bool {
        self.locked.load(Ordering::Relaxed)
    }
}

/// A spinlock protecting a `T`, optionally of a lockstat class.
pub struct SpinLock<T> {
    raw: RawSpinLock,
    class: Option<&'static LockClass>,
    data: UnsafeCell<T>,
}

// SAFETY: the lock hands out access to `T` to one thread at a time, so `T: Send` suffices
// for sharing the lock (like `std::sync::Mutex`).
unsafe impl<T: Send> Sync for SpinLock<T> {}
// SAFETY: moving the lock moves the `T`.
unsafe impl<T: Send> Send for SpinLock<T> {}

impl<T: Default> Default for SpinLock<T> {
    fn default() -> Self {
        SpinLock::new(T::default())
    }
}

impl<T> SpinLock<T> {
    /// An unlocked, unclassed spinlock (never recorded by lockstat).
    pub fn new(v: T) -> Self {
        SpinLock {
            raw: RawSpinLock::new(),
            class: None,
            data: UnsafeCell::new(v),
        }
    }

    /// An unlocked spinlock of lock class `class`.
    pub fn with_class(v: T, class: &'static LockClass) -> Self {
        SpinLock {
            class: Some(class),
            ..SpinLock::new(v)
        }
    }

    /// The lock's class, if any.
    pub fn class(&self) -> Option<&'static LockClass> {
        self.class
    }

    /// Spins (then yields) until the lock is held.
    #[inline]
    pub fn lock(&self) -> SpinLockGuard<'_, T> {
        let ((), stamp) = lockstat::acquire(
            self.class,
            Kind::Write,
            || self.raw.try_lock().then_some(()),
            || self.raw.lock(),
        );
        SpinLockGuard::new(self, stamp)
    }

    /// The lock if it is free.
    #[inline]
    pub fn try_lock(&self) -> Option<SpinLockGuard<'_, T>> {
        let ((), stamp) = lockstat::try_acquire(self.class, Kind::Write, || {
            self.raw.try_lock().then_some(())
        })?;
        Some(SpinLockGuard::new(self, stamp))
    }

    /// Whether some thread holds the lock (a racy snapshot).
    #[inline]
    pub fn is_locked(&self) -> bool {
        self.raw.is_locked()
    }

    /// The data, through exclusive access to the lock (no locking needed).
    pub fn get_mut(&mut self) -> &mut T {
        self.data.get_mut()
    }

    /// Consumes the lock, returning the data.
    pub fn into_inner(self) -> T {
        self.data.into_inner()
    }
}

impl<T> std::fmt::Debug for SpinLock<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SpinLock")
            .field("locked", &self.is_locked())
            .field("class", &self.class)
            .finish()
    }
}

/// Holds a [`SpinLock`]; dropping it records the hold time (if stamped) and unlocks.
#[must_use = "dropping the guard unlocks at once"]
pub struct SpinLockGuard<'a, T> {
    lock: &'a SpinLock<T>,
    stamp: Option<HoldStamp>,
    /// Makes the guard `Sync` only for `T: Sync`, since it hands out `&T`.
    _marker: PhantomData<&'a mut T>,
}

impl<'a, T> SpinLockGuard<'a, T> {
    fn new(lock: &'a SpinLock<T>, stamp: Option<HoldStamp>) -> Self {
        SpinLockGuard {
            lock,
            stamp,
            _marker: PhantomData,
        }
    }
}

impl<T> Deref for SpinLockGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: the guard holds the lock, so no other thread accesses the data.
        unsafe { &*self.lock.data.get() }
    }
}

impl<T> DerefMut for SpinLockGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: the guard holds the lock, and `&mut self` excludes other borrows through it.
        unsafe { &mut *self.lock.data.get() }
    }
}

impl<T> Drop for SpinLockGuard<'_, T> {
    fn drop(&mut self) {
        // Record the hold time while still holding the lock.
        if let Some(stamp) = &self.stamp {
            stamp.record_release();
        }
        // SAFETY: this guard holds the lock and its borrows of the data end here.
        unsafe { self.lock.raw.unlock() };
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
    use std::sync::Arc;

    #[test]
    fn lock_try_lock_is_locked() {
        let l = SpinLock::new(5);
        assert!(!l.is_locked());
        {
            let mut g = l.lock();
            *g += 1;
            assert!(l.is_locked());
            assert!(l.try_lock().is_none());
        }
        assert!(!l.is_locked());
        assert_eq!(*l.try_lock().expect("free"), 6);
        assert_eq!(l.into_inner(), 6);
    }

    /// 32 threads on 2 cores: the increments are a load and a store, so a lost update means
    /// two holders at once; `inside` catches overlapping critical sections directly.
    #[test]
    fn stress_mutual_exclusion() {
        const THREADS: usize = 32;
        const ITERS: usize = 20_000;
        let l = Arc::new(SpinLock::new(0usize));
        let inside = Arc::new(AtomicUsize::new(0));
        let ts: Vec<_> = (0..THREADS)
            .map(|_| {
                let (l, inside) = (Arc::clone(&l), Arc::clone(&inside));
                std::thread::spawn(move || {
                    for _ in 0..ITERS {
                        let mut g = l.lock();
                        assert_eq!(inside.fetch_add(1, Relaxed), 0);
                        let v = *g;
                        std::hint::black_box(&v);
                        *g = v + 1;
                        inside.fetch_sub(1, Relaxed);
                    }
                })
            })
            .collect();
        ts.into_iter().for_each(|t| t.join().unwrap());
        assert_eq!(*l.lock(), THREADS * ITERS);
    }

    #[test]
    #[cfg(feature = "lockstat")]
    fn classed_spinlock_counts_when_enabled() {
        static C: LockClass = LockClass::new("test_spin_class");
        let _s = lockstat::test_serial();
        let l = Arc::new(SpinLock::with_class(0u64, &C));
        lockstat::disable();
        for _ in 0..10 {
            *l.lock() += 1;
        }
        assert_eq!(C.stats().write.acquisitions, 0);
        lockstat::enable();
        let ts: Vec<_> = (0..8)
            .map(|_| {
                let l = Arc::clone(&l);
                std::thread::spawn(move || {
                    for _ in 0..500 {
                        *l.lock() += 1;
                    }
                })
            })
            .collect();
        ts.into_iter().for_each(|t| t.join().unwrap());
        drop(l.try_lock());
        lockstat::disable();
        let s = C.stats().write;
        assert_eq!(s.acquisitions, 8 * 500 + 1);
        assert!(s.contentions <= s.acquisitions);
        assert_eq!(*l.lock(), 10 + 8 * 500);
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;
    use loom::cell::UnsafeCell as LoomUnsafeCell;
    use loom::sync::Arc;

    /// Two threads increment a loom-tracked cell under the lock: loom reports a data race
    /// (a causality violation) if the Acquire/Release pairing failed to order the holders,
    /// and the final count catches a lost update.
    #[test]
    fn loom_spinlock_mutual_exclusion() {
        loom::model(|| {
            let l = Arc::new(SpinLock::new(LoomUnsafeCell::new(0usize)));
            let l2 = Arc::clone(&l);
            let t = loom::thread::spawn(move || {
                let g = l2.lock();
                // SAFETY: the guard gives exclusive access to the cell.
                g.with_mut(|p| unsafe { *p += 1 });
            });
            if let Some(g) = l.try_lock() {
                // SAFETY: as above.
                g.with_mut(|p| unsafe { *p += 1 });
            } else {
                let g = l.lock();
                // SAFETY: as above.
                g.with_mut(|p| unsafe { *p += 1 });
            }
            t.join().unwrap();
            let g = l.lock();
            // SAFETY: both threads are done; we hold the lock.
            assert_eq!(g.with(|p| unsafe { *p }), 2);
        });
    }
}
