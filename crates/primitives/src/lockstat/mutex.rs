//! [`Mutex`]: a sleeping mutex that records into its lock class.

use std::cell::UnsafeCell;
use std::ops::{Deref, DerefMut};

use super::raw::imp;
use super::record::{acquire_exclusive_recorded, try_exclusive_recorded, HoldStart};
use super::{is_enabled, LockClass};

/// A sleeping mutex (parking_lot's raw mutex and an `UnsafeCell`) that records into its
/// class.
pub struct Mutex<T> {
    raw: imp::RawMutex,
    hold: HoldStart,
    class: Option<&'static LockClass>,
    data: UnsafeCell<T>,
}

// SAFETY: the mutex hands out access to `T` to one thread at a time, so `T: Send` suffices
// for sharing it (like `std::sync::Mutex`); moving the mutex moves the `T`.
unsafe impl<T: Send> Sync for Mutex<T> {}
// SAFETY: as above.
unsafe impl<T: Send> Send for Mutex<T> {}

impl<T: Default> Default for Mutex<T> {
    fn default() -> Self {
        Mutex::new(T::default())
    }
}

impl<T> Mutex<T> {
    /// An unclassed mutex: never recorded.
    pub fn new(v: T) -> Self {
        Mutex {
            raw: imp::RawMutex::new(),
            hold: HoldStart::new(),
            class: None,
            data: UnsafeCell::new(v),
        }
    }

    /// A mutex of lock class `class`.
    pub fn with_class(v: T, class: &'static LockClass) -> Self {
        Mutex {
            class: Some(class),
            ..Mutex::new(v)
        }
    }

    /// The lock's class, if any.
    pub fn class(&self) -> Option<&'static LockClass> {
        self.class
    }

    /// The data, through exclusive access to the mutex (no locking needed).
    pub fn get_mut(&mut self) -> &mut T {
        self.data.get_mut()
    }

    /// Consumes the mutex, returning the data.
    pub fn into_inner(self) -> T {
        self.data.into_inner()
    }

    /// Blocks until the mutex is acquired.
    #[inline]
    pub fn lock(&self) -> MutexGuard<'_, T> {
        let _held = if is_enabled() {
            self.lock_recorded()
        } else {
            self.raw.lock()
        };
        MutexGuard { lock: self, _held }
    }

    /// Acquires the mutex if it is free.
    #[inline]
    pub fn try_lock(&self) -> Option<MutexGuard<'_, T>> {
        let _held = self.raw.try_lock()?;
        if is_enabled() {
            // SAFETY: we have just acquired the mutex.
            unsafe { self.try_recorded() };
        }
        Some(MutexGuard { lock: self, _held })
    }

    #[cold]
    #[inline(never)]
    fn lock_recorded(&self) -> imp::MutexHeld<'_> {
        // SAFETY: `hold` is this mutex's, which the closures acquire.
        unsafe {
            acquire_exclusive_recorded(
                &self.class,
                &self.hold,
                || self.raw.try_lock(),
                || self.raw.lock(),
            )
        }
    }

    /// # Safety
    ///
    /// The caller has just acquired the mutex.
    #[cold]
    #[inline(never)]
    unsafe fn try_recorded(&self) {
        // SAFETY: the caller holds the mutex (our contract).
        unsafe { try_exclusive_recorded(&self.class, &self.hold) }
    }

    /// # Safety
    ///
    /// The caller holds the mutex.
    #[cold]
    #[inline(never)]
    unsafe fn release_recorded(&self) {
        // SAFETY: the caller holds the mutex (our contract).
        unsafe { self.hold.record_release(&self.class) }
    }
}

impl<T> std::fmt::Debug for Mutex<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mutex").field("class", &self.class).finish()
    }
}

/// Holds a [`Mutex`]; dropping it records the hold time (if stamped) and unlocks.
#[must_use = "dropping the guard unlocks at once"]
pub struct MutexGuard<'a, T> {
    lock: &'a Mutex<T>,
    /// Dropped after `drop` has recorded the hold (under loom, this unlocks).
    _held: imp::MutexHeld<'a>,
}

// SAFETY: sharing a guard across threads shares only `&T` (through `Deref`), so `T: Sync`
// suffices, as for parking_lot's guards (the `Held` marker makes them `!Send` and `!Sync`).
unsafe impl<T: Sync> Sync for MutexGuard<'_, T> {}

impl<T> Deref for MutexGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: the guard holds the mutex, so no other thread accesses the data.
        unsafe { &*self.lock.data.get() }
    }
}

impl<T> DerefMut for MutexGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: the guard holds the mutex, and `&mut self` excludes other borrows through it.
        unsafe { &mut *self.lock.data.get() }
    }
}

impl<T> Drop for MutexGuard<'_, T> {
    #[inline]
    fn drop(&mut self) {
        // The hold ends here, before the unlock.
        // SAFETY: this guard holds the mutex; its borrows of the data end here.
        unsafe {
            if self.lock.hold.is_stamped() {
                self.lock.release_recorded();
            }
            self.lock.raw.unlock();
        }
    }
}
