//! The mutexes and thread parking the lock manager, epoll and [`crate::cancel`] use.
//!
//! Normal builds use `parking_lot` and `std::thread` directly (re-exports: zero cost).
//! [`ClassedMutex`] is the lock-statistics mutex
//! ([`scalevfs_primitives::lockstat::Mutex`], over `parking_lot`), for the locks that
//! threads meet on (`crate::lockclass`): made with `with_class`, it is counted in its class
//! while `scalevfs bench --lockstat` (or [`scalevfs_primitives::lockstat::enable`])
//! records. It is 16 bytes larger than `parking_lot`'s (its class and its hold stamp), so
//! objects made by the million (pipes, eventfds, epoll items) keep the plain [`Mutex`].
//! Test builds wrap them in enums that pick [`shuttle`]'s versions when the object is made
//! (or the thread parks) inside a shuttle model, so the `shuttle_*` models explore the real
//! code's interleavings while the ordinary tests keep running on real threads. A model
//! calls [`enter_shuttle`] at the start of every shuttle thread it spawns.

pub(crate) use imp::*;

#[cfg(not(test))]
mod imp {
    pub(crate) use parking_lot::{Mutex, MutexGuard};
    pub(crate) use scalevfs_primitives::lockstat::{
        Mutex as ClassedMutex, MutexGuard as ClassedGuard,
    };
    pub(crate) use std::thread::{current, park, park_timeout, Thread};

    /// The model thread's stand-in for a CPU number: none outside shuttle models.
    #[inline]
    pub(crate) fn model_cpu() -> Option<usize> {
        None
    }
}

#[cfg(test)]
mod imp {
    use scalevfs_primitives::lockstat::{self, LockClass};
    use std::cell::Cell;
    use std::ops::{Deref, DerefMut};
    use std::time::Duration;

    thread_local! {
        // Shuttle runs all of a model's threads as continuations on one OS thread, so one
        // thread-local flag covers the whole model.
        static IN_SHUTTLE: Cell<bool> = const { Cell::new(false) };
    }

    /// Marks the calling (shuttle) thread as running inside a shuttle model.
    pub(crate) fn enter_shuttle() {
        IN_SHUTTLE.with(|f| f.set(true));
    }

    fn in_shuttle() -> bool {
        IN_SHUTTLE.with(|f| f.get())
    }

    /// Inside a shuttle model, the model thread's id as a stand-in for its CPU number
    /// (all model threads run on one OS thread, so the real CPU would be the same for
    /// all of them); `None` outside.
    pub(crate) fn model_cpu() -> Option<usize> {
        in_shuttle().then(|| usize::from(shuttle::thread::current().id()))
    }

    /// In tests, one mutex type serves both (the size does not matter there).
    pub(crate) type ClassedMutex<T> = Mutex<T>;
    pub(crate) type ClassedGuard<'a, T> = MutexGuard<'a, T>;

    pub(crate) enum Mutex<T> {
        Std(lockstat::Mutex<T>),
        Shuttle(shuttle::sync::Mutex<T>),
    }

    pub(crate) enum MutexGuard<'a, T> {
        Std(lockstat::MutexGuard<'a, T>),
        Shuttle(shuttle::sync::MutexGuard<'a, T>),
    }

    impl<T> Mutex<T> {
        pub(crate) fn new(v: T) -> Self {
            if in_shuttle() {
                Mutex::Shuttle(shuttle::sync::Mutex::new(v))
            } else {
                Mutex::Std(lockstat::Mutex::new(v))
            }
        }
        pub(crate) fn with_class(v: T, class: &'static LockClass) -> Self {
            if in_shuttle() {
                Mutex::Shuttle(shuttle::sync::Mutex::new(v))
            } else {
                Mutex::Std(lockstat::Mutex::with_class(v, class))
            }
        }
        pub(crate) fn try_lock(&self) -> Option<MutexGuard<'_, T>> {
            match self {
                Mutex::Std(m) => m.try_lock().map(MutexGuard::Std),
                Mutex::Shuttle(m) => m.try_lock().ok().map(MutexGuard::Shuttle),
            }
        }
        pub(crate) fn lock(&self) -> MutexGuard<'_, T> {
            match self {
                Mutex::Std(m) => MutexGuard::Std(m.lock()),
                Mutex::Shuttle(m) => MutexGuard::Shuttle(m.lock().unwrap()),
            }
        }
    }

    impl<T> Deref for MutexGuard<'_, T> {
        type Target = T;
        fn deref(&self) -> &T {
            match self {
                MutexGuard::Std(g) => g,
                MutexGuard::Shuttle(g) => g,
            }
        }
    }

    impl<T> DerefMut for MutexGuard<'_, T> {
        fn deref_mut(&mut self) -> &mut T {
            match self {
                MutexGuard::Std(g) => &mut *g,
                MutexGuard::Shuttle(g) => &mut *g,
            }
        }
    }

    #[derive(Clone, Debug)]
    pub(crate) enum Thread {
        Std(std::thread::Thread),
        Shuttle(shuttle::thread::Thread),
    }

    impl Thread {
        pub(crate) fn unpark(&self) {
            match self {
                Thread::Std(t) => t.unpark(),
                Thread::Shuttle(t) => t.unpark(),
            }
        }
    }

    pub(crate) fn current() -> Thread {
        if in_shuttle() {
            Thread::Shuttle(shuttle::thread::current())
        } else {
            Thread::Std(std::thread::current())
        }
    }

    pub(crate) fn park() {
        if in_shuttle() {
            shuttle::thread::park()
        } else {
            std::thread::park()
        }
    }

    /// Inside a model, a timed park returns at once: shuttle's own `park_timeout` never
    /// times out (it parks until unparked), which would turn a wait that relies on its
    /// timer (a request backing off, `handoff.rs`) into a reported deadlock. Returning
    /// at once is one behaviour a timer allows (it fired); the caller's loop re-checks
    /// and parks again, so the model still explores the wake-ups racing the deadline.
    pub(crate) fn park_timeout(d: Duration) {
        if in_shuttle() {
            shuttle::thread::yield_now()
        } else {
            std::thread::park_timeout(d)
        }
    }
}
