//! Deferred frees that run on the thread that retired the object, after a grace period
//! (Linux: `call_rcu` callbacks are queued per CPU and invoked on the CPU that queued them).
//!
//! A thin layer over [`scalevfs_primitives::epoch`], which does exactly that: each
//! thread's deferred functions go into a thread-local bag; a full bag ([`BATCH`]
//! functions) is sealed with the global epoch and run by the same thread once the epoch
//! has advanced twice. This module names the VFS's retire operations and gives them
//! typed wrappers.
//!
//! ## Why frees run on the retiring thread
//! A collector that runs whichever thread's bags it finds (crossbeam-epoch's global queue)
//! frees, with several threads creating and deleting files, about half of all dentries,
//! inodes and hash nodes on a thread other than the one that allocated (and last touched)
//! them: the allocator sends the block back to its owner's page (a cache-line transfer and
//! an atomic push), and the owner reuses memory the other CPU touched last. Profiles of
//! inode-churn at 2 threads showed those remote frees and misses as the main cost that one
//! thread does not pay.
//!
//! The retiring thread need not be pinned: the grace period starts when the bag is
//! sealed, after every object in it was unlinked. So a last `put` that retires an object
//! costs a push onto a thread-local vector, not a pin.
//!
//! * [`reclaim_local`] seals the partial bag and frees every bag whose grace period has
//!   passed (`drop_caches` and teardown call it through `core::reclaim`).
//! * A thread that exits leaves its bags to the next thread that collects (the epoch's
//!   orphan list), so nothing leaks.
//!
//! ## What may be retired
//! Only memory whose destructor takes no lock and cannot block: the free may run inside any
//! later `retire` call of the same thread, under whatever locks that caller holds.

use std::sync::Arc;

use scalevfs_primitives::epoch::{self, Pointable, Pointer, Shared};

/// Objects per bag: a thread seals its bag (and may advance the epoch) once per this many
/// retirements.
pub const BATCH: usize = epoch::BAG_SIZE;

unsafe fn drop_box<T>(p: *mut ()) {
    // SAFETY: `p` came from `Box::into_raw` of a `Box<T>` (see `retire_box`).
    drop(unsafe { Box::from_raw(p.cast::<T>()) });
}

/// Frees `p` (a `Box::into_raw`) on this thread once every thread pinned now has unpinned.
///
/// # Safety
/// `p` is unreachable for new readers (unlinked from every shared structure), nobody else
/// frees it, and dropping `T` takes no lock.
pub unsafe fn retire_box<T: Send + 'static>(p: *mut T) {
    // SAFETY: per our contract; `T: Send`, so the free may run on the thread that adopts
    // this thread's bags if it exits first.
    unsafe { epoch::defer_free(p.cast(), drop_box::<T>) };
}

/// [`retire_box`] for an object allocated as an epoch `Owned`: what
/// `Guard::defer_destroy` does, without a pin.
///
/// # Safety
/// As for [`retire_box`]; and `T` may be dropped on another thread (if this thread exits
/// first), which the caller vouches for since `T` need not be `Send` here (as for
/// `defer_destroy`).
pub unsafe fn retire_owned<T: ?Sized + Pointable>(p: Shared<'_, T>) {
    // SAFETY: per our contract; `T::drop` frees what `T::init` allocated.
    unsafe { epoch::defer_free(p.into_ptr(), T::drop) };
}

unsafe fn drop_arc<T>(p: *mut ()) {
    // SAFETY: `p` came from `Arc::into_raw` (see `retire_arc`), whose reference is
    // dropped once.
    drop(unsafe { Arc::from_raw(p.cast_const().cast::<T>()) });
}

/// Drops one strong reference of an `Arc` (an `Arc::into_raw` pointer) on this thread once
/// every thread pinned now has unpinned: `kfree_rcu` of a refcounted object.
///
/// # Safety
/// As for [`retire_box`]: the reference is unreachable for new readers, nobody else drops
/// it, and dropping `T` takes no lock.
pub unsafe fn retire_arc<T: Send + Sync + 'static>(p: *const T) {
    // SAFETY: per our contract; `T: Send + Sync`, so the last drop may run anywhere.
    unsafe { epoch::defer_free(p.cast_mut().cast(), drop_arc::<T>) };
}

/// Runs `f` on this thread once every thread pinned now has unpinned.
///
/// # Safety
/// As for [`retire_box`], for everything `f` frees.
pub unsafe fn retire_fn<F: FnOnce() + Send + 'static>(f: F) {
    // SAFETY: per our contract; `Send + 'static`, so it may run anywhere, any time later.
    unsafe { epoch::defer_fn(f) };
}

/// Seals this thread's partial bag and frees every bag of this thread whose grace period
/// has passed (and those exited threads left). Other threads' bags are freed by their
/// owners.
pub fn reclaim_local() {
    epoch::flush();
}

/// Objects this thread has retired and not yet freed (tests).
pub fn pending_local() -> usize {
    epoch::pending_local()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    struct Counted(Arc<AtomicUsize>);
    impl Drop for Counted {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Reclaims until `done()`, for up to 60 s: a grace period also waits for threads of
    /// *other* tests that happen to be pinned (they share the process's global epoch).
    fn reclaim_until(done: impl Fn() -> bool) {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while !done() && std::time::Instant::now() < deadline {
            crate::core::reclaim();
            std::thread::yield_now();
        }
    }

    fn drain() {
        reclaim_until(|| pending_local() == 0);
    }

    #[test]
    fn everything_retired_is_freed_once_on_the_retiring_thread() {
        let freed = Arc::new(AtomicUsize::new(0));
        let n = 3 * BATCH + 5;
        for _ in 0..n {
            let p = Box::into_raw(Box::new(Counted(freed.clone())));
            // SAFETY: never shared.
            unsafe { retire_box(p) };
        }
        drain();
        assert_eq!(pending_local(), 0);
        assert_eq!(freed.load(Ordering::Relaxed), n);
        // Exactly once: the Arc has no other holders left.
        assert_eq!(Arc::strong_count(&freed), 1);
    }

    #[test]
    fn a_retired_arc_reference_is_dropped_once_and_only_that_one() {
        let freed = Arc::new(AtomicUsize::new(0));
        let shared = Arc::new(Counted(freed.clone()));
        let kept = shared.clone();
        // SAFETY: never shared; the strong reference `into_raw` yields is retired once.
        unsafe { retire_arc(Arc::into_raw(shared)) };
        drain();
        assert_eq!(
            Arc::strong_count(&kept),
            1,
            "the retired reference was dropped"
        );
        assert_eq!(freed.load(Ordering::Relaxed), 0, "the object outlives it");
        drop(kept);
        assert_eq!(freed.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn a_pinned_reader_delays_the_free() {
        let freed = Arc::new(AtomicUsize::new(0));
        let (pinned_tx, pinned_rx) = std::sync::mpsc::channel();
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        let reader = std::thread::spawn(move || {
            let _g = epoch::pin();
            pinned_tx.send(()).unwrap();
            done_rx.recv().unwrap();
        });
        pinned_rx.recv().unwrap();
        // Retired while the reader is pinned (and this thread is not): the grace period
        // starts when the batch is sealed, and still waits for that reader.
        for _ in 0..BATCH {
            let f = freed.clone();
            // SAFETY: nothing to unlink; the closure only counts.
            unsafe { retire_fn(move || drop(Counted(f))) };
        }
        for _ in 0..8 {
            crate::core::reclaim();
        }
        assert_eq!(
            freed.load(Ordering::Relaxed),
            0,
            "freed under a pinned reader"
        );
        done_tx.send(()).unwrap();
        reader.join().unwrap();
        drain();
        assert_eq!(freed.load(Ordering::Relaxed), BATCH);
    }

    #[test]
    fn an_exiting_thread_hands_its_batches_over() {
        let freed = Arc::new(AtomicUsize::new(0));
        let f = freed.clone();
        std::thread::spawn(move || {
            for _ in 0..BATCH + 3 {
                let p = Box::into_raw(Box::new(Counted(f.clone())));
                // SAFETY: never shared.
                unsafe { retire_box(p) };
            }
        })
        .join()
        .unwrap();
        reclaim_until(|| freed.load(Ordering::Relaxed) == BATCH + 3);
        assert_eq!(freed.load(Ordering::Relaxed), BATCH + 3);
    }
}
