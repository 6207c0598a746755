//! Deferred frees that run on the thread that retired the object, after a grace period
//! (Linux: `call_rcu` callbacks are queued per CPU and invoked on the CPU that queued them).
//!
//! ## Why not `Guard::defer` directly
//! crossbeam-epoch seals each thread's deferred functions into bags on a *global* queue,
//! and whichever thread collects next runs them. With several threads creating and
//! deleting files, about half of all dentries, inodes and hash nodes are then freed by a
//! thread other than the one that allocated (and last touched) them: the allocator sends
//! the block back to its owner's page (a cache-line transfer and an atomic push), and the
//! owner reuses memory the other CPU touched last. Profiles of inode-churn at 2 threads
//! showed those remote frees and misses as the main cost that one thread does not pay.
//!
//! ## Algorithm
//! Each thread keeps its retired objects in a local batch. When the batch holds [`BATCH`]
//! objects it is *sealed*: a flag is created and crossbeam is asked to set it
//! (`Guard::defer`, then `flush` so the request is not itself held in a local bag). The
//! closure runs only after every thread pinned at that moment has unpinned, i.e. after a
//! grace period for every object in the batch (each was unlinked before it was retired,
//! so only readers pinned before the flag was deferred can hold it). Each time it seals a
//! batch, the owning thread frees its older batches whose flags are set. So frees run on
//! the retiring thread, and crossbeam carries one tiny closure per batch instead of one
//! per object.
//!
//! The retiring thread need not be pinned: the grace period starts when the batch is
//! sealed, which is after every object in it was unlinked, and `seal` pins for its own
//! call. So a last `put` that retires an object costs a push onto a thread-local vector,
//! not an epoch pin (whose `SeqCst` fence was 2% of open+read+close).
//!
//! * [`reclaim_local`] seals the partial batch and frees every batch whose grace period has
//!   passed (`drop_caches` and teardown call it through `core::reclaim`).
//! * A thread that exits hands its batches to crossbeam (`Guard::defer`), so nothing
//!   leaks; they are then freed by whichever thread collects, as before.
//!
//! ## Memory ordering
//! The flag's `Release` store (in the crossbeam closure) pairs with the owner's `Acquire`
//! load: the grace period the closure observed happens-before the owner's frees.
//!
//! ## What may be retired
//! Only memory whose destructor takes no lock and cannot block: the free may run inside any
//! later `retire` call of the same thread, under whatever locks that caller holds (as
//! crossbeam's own collection runs deferred functions inside `pin`).

use std::cell::RefCell;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crossbeam_epoch::{Owned, Pointable, Pointer, Shared};

/// Objects per batch (crossbeam's own bag size).
pub const BATCH: usize = 64;

/// One retired object: its address and the function that frees it.
struct Item {
    ptr: *mut (),
    free: unsafe fn(*mut ()),
}

impl Item {
    /// # Safety
    /// Called once, after the object's grace period.
    unsafe fn run(self) {
        // SAFETY: per the contract of `retire_box`/`retire_fn`, which built the pair.
        unsafe { (self.free)(self.ptr) }
    }
}

struct Sealed {
    ready: Arc<AtomicBool>,
    items: Vec<Item>,
}

/// Items moved to another thread (exit hand-over).
struct SendItems(Vec<Item>);
// SAFETY: every retired object is Send (the `retire_*` bounds), and its free function may
// run on any thread.
unsafe impl Send for SendItems {}

impl SendItems {
    /// # Safety
    /// After the items' grace period.
    unsafe fn run(self) {
        for item in self.0 {
            // SAFETY: per the contract.
            unsafe { item.run() };
        }
    }
}

#[derive(Default)]
struct Local {
    current: Vec<Item>,
    sealed: VecDeque<Sealed>,
}

impl Local {
    /// Removes the batches whose grace period has passed (oldest first; sealed in order).
    fn take_ready(&mut self) -> Vec<Vec<Item>> {
        let mut out = Vec::new();
        // Acquire: pairs with the Release store of the crossbeam closure in `seal`.
        while self
            .sealed
            .front()
            .is_some_and(|s| s.ready.load(Ordering::Acquire))
        {
            if let Some(s) = self.sealed.pop_front() {
                out.push(s.items);
            }
        }
        out
    }
}

/// Asks crossbeam to mark `items` ready after a grace period and queues them on this
/// thread. Runs outside any borrow of `LOCAL`: `flush` may run other deferred functions,
/// whose frees may retire more (nested `push`).
fn seal(items: Vec<Item>) {
    let guard = &crossbeam_epoch::pin();
    let ready = Arc::new(AtomicBool::new(false));
    let flag = ready.clone();
    // Release: pairs with the Acquire load in `take_ready`.
    guard.defer(move || flag.store(true, Ordering::Release));
    // Push the request to the global queue now; in the local bag it would wait for 63
    // more.
    guard.flush();
    let mut sealed = Some(Sealed { ready, items });
    let _ = LOCAL.try_with(|l| l.borrow_mut().sealed.extend(sealed.take()));
    if let Some(s) = sealed {
        // Thread teardown began meanwhile: let crossbeam free them.
        let items = SendItems(s.items);
        // SAFETY: as in `Local::drop`.
        unsafe { guard.defer_unchecked(move || items.run()) };
    }
}

impl Drop for Local {
    fn drop(&mut self) {
        // Thread exit: let crossbeam free what is left, after the usual grace period.
        let mut items = std::mem::take(&mut self.current);
        for s in self.sealed.drain(..) {
            items.extend(s.items);
        }
        if items.is_empty() {
            return;
        }
        let items = SendItems(items);
        let guard = crossbeam_epoch::pin();
        // SAFETY: each item was unlinked before it was retired; the closure runs after
        // every thread pinned now (so every reader that can reach an item) has unpinned.
        unsafe { guard.defer_unchecked(move || items.run()) };
        guard.flush();
    }
}

thread_local! {
    static LOCAL: RefCell<Local> = RefCell::new(Local::default());
}

fn run_all(batches: Vec<Vec<Item>>) {
    for batch in batches {
        for item in batch {
            // SAFETY: the batch's grace period has passed (its flag was set).
            unsafe { item.run() };
        }
    }
}

fn push(item: Item) {
    let mut slot = Some(item);
    let taken = LOCAL.try_with(|l| {
        let mut l = l.borrow_mut();
        l.current.extend(slot.take());
        if l.current.len() < BATCH {
            return (None, Vec::new());
        }
        // Once per batch: seal it, and free the batches whose grace period has passed.
        let full = std::mem::replace(&mut l.current, Vec::with_capacity(BATCH));
        (Some(full), l.take_ready())
    });
    if let Ok((full, ready)) = taken {
        if let Some(items) = full {
            seal(items);
        }
        // Outside the borrow: a free may retire more (nested `push`).
        run_all(ready);
    }
    if let Some(item) = slot {
        // Thread teardown: this thread's list is gone; let crossbeam free it.
        let item = SendItems(vec![item]);
        let guard = crossbeam_epoch::pin();
        // SAFETY: as in `Local::drop`.
        unsafe { guard.defer_unchecked(move || item.run()) };
    }
}

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
    push(Item {
        ptr: p.cast(),
        free: drop_box::<T>,
    });
}

unsafe fn drop_owned<T: ?Sized + Pointable>(p: *mut ()) {
    // SAFETY: `p` came from `Shared::into_usize` of an `Owned<T>`'s allocation (see
    // `retire_owned`), and is freed once.
    drop(unsafe { Owned::<T>::from_usize(p as usize) });
}

/// [`retire_box`] for an object that crossbeam allocated (`Owned::new`): what
/// `Guard::defer_destroy` does, freed on this thread.
///
/// # Safety
/// As for [`retire_box`]; and `T` may be dropped on another thread (it is handed to
/// crossbeam if this thread exits first), which the caller vouches for since `T` need not
/// be `Send` here (crossbeam's `defer_destroy` asks the same of its callers).
pub unsafe fn retire_owned<T: ?Sized + Pointable>(p: Shared<'_, T>) {
    push(Item {
        ptr: p.into_usize() as *mut (),
        free: drop_owned::<T>,
    });
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
    push(Item {
        ptr: p.cast_mut().cast(),
        free: drop_arc::<T>,
    });
}

/// Runs `f` on this thread once every thread pinned now has unpinned.
///
/// # Safety
/// As for [`retire_box`], for everything `f` frees.
pub unsafe fn retire_fn<F: FnOnce() + Send + 'static>(f: F) {
    unsafe fn call<F: FnOnce()>(p: *mut ()) {
        // SAFETY: `p` came from `Box::into_raw` of a `Box<F>` below.
        let f = unsafe { Box::from_raw(p.cast::<F>()) };
        f();
    }
    push(Item {
        ptr: Box::into_raw(Box::new(f)).cast(),
        free: call::<F>,
    });
}

/// Seals this thread's partial batch and frees every batch of this thread whose grace
/// period has passed. Other threads' batches are freed by their owners (or, after they
/// exit, by crossbeam).
pub fn reclaim_local() {
    let partial = LOCAL
        .try_with(|l| std::mem::take(&mut l.borrow_mut().current))
        .unwrap_or_default();
    if !partial.is_empty() {
        seal(partial);
    }
    let ready = LOCAL
        .try_with(|l| l.borrow_mut().take_ready())
        .unwrap_or_default();
    run_all(ready);
}

/// Objects this thread has retired and not yet freed (tests).
pub fn pending_local() -> usize {
    LOCAL
        .try_with(|l| {
            let l = l.borrow();
            l.current.len() + l.sealed.iter().map(|s| s.items.len()).sum::<usize>()
        })
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    struct Counted(Arc<AtomicUsize>);
    impl Drop for Counted {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Reclaims until `done()`, for up to 10 s: a grace period also waits for threads of
    /// *other* tests that happen to be pinned (they share crossbeam's global epoch).
    fn reclaim_until(done: impl Fn() -> bool) {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
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
            let _g = crossbeam_epoch::pin();
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
