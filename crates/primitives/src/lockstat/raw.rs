//! The raw locks under [`Mutex`](super::Mutex) and [`RwLock`](super::RwLock).

/// The raw locks: parking_lot's, and loom's under
/// `--cfg loom`. Acquiring returns a "held" token that the guard keeps: parking_lot's is
/// zero-sized (the guard unlocks explicitly); loom's is loom's own guard, which unlocks when
/// it drops, right after the wrapper guard's `drop` has recorded the hold.
#[cfg(not(loom))]
pub(super) mod imp {
    use parking_lot::lock_api::{RawMutex as _, RawRwLock as _};
    use std::marker::PhantomData;

    /// Proof of a hold. `!Send`, like parking_lot's own guards: its raw locks are to be
    /// unlocked in the context that locked them.
    pub struct Held<'a>(PhantomData<(&'a (), *const ())>);
    pub type MutexHeld<'a> = Held<'a>;
    pub type ReadHeld<'a> = Held<'a>;
    pub type WriteHeld<'a> = Held<'a>;

    fn held<'a>() -> Held<'a> {
        Held(PhantomData)
    }

    pub struct RawMutex(parking_lot::RawMutex);

    impl RawMutex {
        pub fn new() -> Self {
            RawMutex(parking_lot::RawMutex::INIT)
        }
        #[inline]
        pub fn lock(&self) -> Held<'_> {
            self.0.lock();
            held()
        }
        #[inline]
        pub fn try_lock(&self) -> Option<Held<'_>> {
            self.0.try_lock().then(held)
        }
        /// # Safety
        /// The caller holds the mutex, through a `Held` of this lock it is dropping.
        #[inline]
        pub unsafe fn unlock(&self) {
            // SAFETY: the caller holds the mutex (our contract).
            unsafe { self.0.unlock() }
        }
    }

    pub struct RawRwLock(parking_lot::RawRwLock);

    impl RawRwLock {
        pub fn new() -> Self {
            RawRwLock(parking_lot::RawRwLock::INIT)
        }
        #[inline]
        pub fn read(&self) -> Held<'_> {
            self.0.lock_shared();
            held()
        }
        #[inline]
        pub fn try_read(&self) -> Option<Held<'_>> {
            self.0.try_lock_shared().then(held)
        }
        #[inline]
        pub fn write(&self) -> Held<'_> {
            self.0.lock_exclusive();
            held()
        }
        #[inline]
        pub fn try_write(&self) -> Option<Held<'_>> {
            self.0.try_lock_exclusive().then(held)
        }
        /// # Safety
        /// The caller holds a shared hold it gives up.
        #[inline]
        pub unsafe fn unlock_shared(&self) {
            // SAFETY: the caller holds a shared hold (our contract).
            unsafe { self.0.unlock_shared() }
        }
        /// # Safety
        /// The caller holds the exclusive hold and gives it up.
        #[inline]
        pub unsafe fn unlock_exclusive(&self) {
            // SAFETY: the caller holds the lock exclusively (our contract).
            unsafe { self.0.unlock_exclusive() }
        }
    }
}

/// Under loom, poisoning cannot happen without a panic, which fails the model anyway.
#[cfg(loom)]
pub(super) mod imp {
    pub type MutexHeld<'a> = loom::sync::MutexGuard<'a, ()>;
    pub type ReadHeld<'a> = loom::sync::RwLockReadGuard<'a, ()>;
    pub type WriteHeld<'a> = loom::sync::RwLockWriteGuard<'a, ()>;

    pub struct RawMutex(loom::sync::Mutex<()>);

    impl RawMutex {
        pub fn new() -> Self {
            RawMutex(loom::sync::Mutex::new(()))
        }
        pub fn lock(&self) -> MutexHeld<'_> {
            self.0.lock().unwrap()
        }
        pub fn try_lock(&self) -> Option<MutexHeld<'_>> {
            self.0.try_lock().ok()
        }
        /// # Safety
        /// None needed: the `MutexHeld` the caller drops next unlocks.
        pub unsafe fn unlock(&self) {}
    }

    pub struct RawRwLock(loom::sync::RwLock<()>);

    impl RawRwLock {
        pub fn new() -> Self {
            RawRwLock(loom::sync::RwLock::new(()))
        }
        pub fn read(&self) -> ReadHeld<'_> {
            self.0.read().unwrap()
        }
        pub fn try_read(&self) -> Option<ReadHeld<'_>> {
            self.0.try_read().ok()
        }
        pub fn write(&self) -> WriteHeld<'_> {
            self.0.write().unwrap()
        }
        pub fn try_write(&self) -> Option<WriteHeld<'_>> {
            self.0.try_write().ok()
        }
        /// # Safety
        /// None needed: the `ReadHeld` the caller drops next unlocks.
        pub unsafe fn unlock_shared(&self) {}
        /// # Safety
        /// None needed: the `WriteHeld` the caller drops next unlocks.
        pub unsafe fn unlock_exclusive(&self) {}
    }
}
