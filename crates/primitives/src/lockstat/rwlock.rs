//! [`RwLock`]: a reader-writer lock that records reads and writes into its lock class.

use std::cell::UnsafeCell;
use std::ops::{Deref, DerefMut};

use super::raw::imp;
use super::record::{
    acquire_exclusive_recorded, acquire_recorded, record_shared_release, try_exclusive_recorded,
    try_recorded, HoldStart,
};
use super::{is_enabled, Kind, LockClass, COMPILED_IN};

/// A reader-writer lock (parking_lot's raw rwlock and an `UnsafeCell`) that records reads
/// and writes into its class.
pub struct RwLock<T> {
    raw: imp::RawRwLock,
    /// The writer's hold start; readers keep theirs in their guards.
    hold: HoldStart,
    class: Option<&'static LockClass>,
    data: UnsafeCell<T>,
}

// SAFETY: readers on several threads share `&T` (so `T: Sync`), a writer gets `&mut T` (so
// `T: Send`), like `std::sync::RwLock`; moving the lock moves the `T`.
unsafe impl<T: Send + Sync> Sync for RwLock<T> {}
// SAFETY: moving the lock moves the `T`.
unsafe impl<T: Send> Send for RwLock<T> {}

impl<T: Default> Default for RwLock<T> {
    fn default() -> Self {
        RwLock::new(T::default())
    }
}

impl<T> RwLock<T> {
    /// An unclassed rwlock: never recorded.
    pub fn new(v: T) -> Self {
        RwLock {
            raw: imp::RawRwLock::new(),
            hold: HoldStart::new(),
            class: None,
            data: UnsafeCell::new(v),
        }
    }

    /// An rwlock of lock class `class`.
    pub fn with_class(v: T, class: &'static LockClass) -> Self {
        RwLock {
            class: Some(class),
            ..RwLock::new(v)
        }
    }

    /// The lock's class, if any.
    pub fn class(&self) -> Option<&'static LockClass> {
        self.class
    }

    /// The data, through exclusive access to the lock (no locking needed).
    pub fn get_mut(&mut self) -> &mut T {
        self.data.get_mut()
    }

    /// Consumes the lock, returning the data.
    pub fn into_inner(self) -> T {
        self.data.into_inner()
    }

    /// Blocks until a shared hold is acquired.
    #[inline]
    pub fn read(&self) -> RwLockReadGuard<'_, T> {
        let (_held, since) = if is_enabled() {
            self.read_recorded()
        } else {
            (self.raw.read(), 0)
        };
        RwLockReadGuard {
            lock: self,
            since,
            _held,
        }
    }

    /// Blocks until an exclusive hold is acquired.
    #[inline]
    pub fn write(&self) -> RwLockWriteGuard<'_, T> {
        let _held = if is_enabled() {
            self.write_recorded()
        } else {
            self.raw.write()
        };
        RwLockWriteGuard { lock: self, _held }
    }

    /// A shared hold if no writer holds the lock.
    #[inline]
    pub fn try_read(&self) -> Option<RwLockReadGuard<'_, T>> {
        let _held = self.raw.try_read()?;
        let since = if is_enabled() {
            self.try_read_recorded()
        } else {
            0
        };
        Some(RwLockReadGuard {
            lock: self,
            since,
            _held,
        })
    }

    /// An exclusive hold if the lock is free.
    #[inline]
    pub fn try_write(&self) -> Option<RwLockWriteGuard<'_, T>> {
        let _held = self.raw.try_write()?;
        if is_enabled() {
            // SAFETY: we have just acquired the lock exclusively.
            unsafe { self.try_write_recorded() };
        }
        Some(RwLockWriteGuard { lock: self, _held })
    }

    #[cold]
    #[inline(never)]
    fn read_recorded(&self) -> (imp::ReadHeld<'_>, u64) {
        acquire_recorded(
            &self.class,
            Kind::Read,
            || self.raw.try_read(),
            || self.raw.read(),
        )
    }

    #[cold]
    #[inline(never)]
    fn try_read_recorded(&self) -> u64 {
        try_recorded(&self.class, Kind::Read)
    }

    #[cold]
    #[inline(never)]
    fn read_release_recorded(&self, since: u64) {
        record_shared_release(&self.class, since);
    }

    #[cold]
    #[inline(never)]
    fn write_recorded(&self) -> imp::WriteHeld<'_> {
        // SAFETY: `hold` is this lock's writer stamp; the closures acquire it exclusively.
        unsafe {
            acquire_exclusive_recorded(
                &self.class,
                &self.hold,
                || self.raw.try_write(),
                || self.raw.write(),
            )
        }
    }

    /// # Safety
    ///
    /// The caller has just acquired the lock exclusively.
    #[cold]
    #[inline(never)]
    unsafe fn try_write_recorded(&self) {
        // SAFETY: the caller holds the lock exclusively (our contract).
        unsafe { try_exclusive_recorded(&self.class, &self.hold) }
    }

    /// # Safety
    ///
    /// The caller holds the lock exclusively.
    #[cold]
    #[inline(never)]
    unsafe fn write_release_recorded(&self) {
        // SAFETY: the caller holds the lock exclusively (our contract).
        unsafe { self.hold.record_release(&self.class) }
    }
}

impl<T> std::fmt::Debug for RwLock<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RwLock")
            .field("class", &self.class)
            .finish()
    }
}

/// Holds an [`RwLock`] shared; dropping it records the hold time (if stamped) and unlocks.
#[must_use = "dropping the guard unlocks at once"]
pub struct RwLockReadGuard<'a, T> {
    lock: &'a RwLock<T>,
    /// The hold start, 0 if not recorded.
    since: u64,
    _held: imp::ReadHeld<'a>,
}

/// Holds an [`RwLock`] exclusively; dropping it records the hold time (if stamped) and
/// unlocks.
#[must_use = "dropping the guard unlocks at once"]
pub struct RwLockWriteGuard<'a, T> {
    lock: &'a RwLock<T>,
    _held: imp::WriteHeld<'a>,
}

// SAFETY: sharing a guard across threads shares only `&T` (through `Deref`), so `T: Sync`
// suffices, as for parking_lot's guards (the `Held` marker makes them `!Send` and `!Sync`).
unsafe impl<T: Sync> Sync for RwLockReadGuard<'_, T> {}
// SAFETY: as above.
unsafe impl<T: Sync> Sync for RwLockWriteGuard<'_, T> {}

impl<T> Deref for RwLockReadGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: the guard holds the lock shared, so no thread writes the data.
        unsafe { &*self.lock.data.get() }
    }
}

impl<T> Drop for RwLockReadGuard<'_, T> {
    #[inline]
    fn drop(&mut self) {
        if COMPILED_IN && self.since != 0 {
            self.lock.read_release_recorded(self.since);
        }
        // SAFETY: this guard holds a shared hold and its borrows of the data end here.
        unsafe { self.lock.raw.unlock_shared() };
    }
}

impl<T> Deref for RwLockWriteGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: the guard holds the lock exclusively.
        unsafe { &*self.lock.data.get() }
    }
}

impl<T> DerefMut for RwLockWriteGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: the guard holds the lock exclusively, and `&mut self` excludes other
        // borrows through it.
        unsafe { &mut *self.lock.data.get() }
    }
}

impl<T> Drop for RwLockWriteGuard<'_, T> {
    #[inline]
    fn drop(&mut self) {
        // SAFETY: this guard holds the lock exclusively; its borrows of the data end here.
        unsafe {
            if self.lock.hold.is_stamped() {
                self.lock.write_release_recorded();
            }
            self.lock.raw.unlock_exclusive();
        }
    }
}
