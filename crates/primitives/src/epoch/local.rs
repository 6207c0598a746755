//! The per-thread half of the collector: the thread's participant record, its pin nesting
//! count and its bags; [`Guard`], what a pin hands out. See the [module docs](super); the
//! step labels `(P1)`.. refer to them.

use std::cell::{Cell, RefCell};
use std::ptr;

use super::atomic::{Pointable, Pointer, Shared};
use super::deferred::{Deferred, SealedBag};
use super::global::{Global, Record, PINNED};
use crate::sync::{Arc, Ordering};

/// Deferred functions per bag: a thread seals its open bag, and tries to advance the
/// global epoch, once per this many deferrals (crossbeam-epoch's bag size).
pub const BAG_SIZE: usize = 64;

/// One thread's state. Owned by its [`LocalHandle`], and kept alive past the handle by
/// guards still pinned (see [`LocalHandle`]'s drop).
struct Local {
    global: Arc<Global>,
    record: Record,
    /// Pins held (guards alive); the record says pinned while it is non-zero.
    nesting: Cell<usize>,
    /// Deferred functions not yet sealed.
    open: RefCell<Vec<Deferred>>,
    /// Sealed bags, oldest first (adopted orphans may be older still).
    sealed: RefCell<Vec<SealedBag>>,
    /// Deferrals that fill the open bag: [`BAG_SIZE`], except that the first bag of the
    /// n-th registered thread is smaller by `n * 23 % (BAG_SIZE / 2)`, so that threads
    /// doing the same work in step do not fill their bags in the same call (both would
    /// then scan and advance, or write a grace-period thread's request flag).
    bag_limit: Cell<usize>,
    /// Whether the handle still exists; the last guard frees the state otherwise.
    handle_alive: Cell<bool>,
}

impl Local {
    #[inline]
    fn pin(&self) {
        let n = self.nesting.get();
        self.nesting.set(n + 1);
        if n != 0 {
            return;
        }
        // (P1) Relaxed: see "Why a freed object is unreachable" in the module docs.
        let state = (self.global.epoch_relaxed() << 1) | PINNED;
        // (P2, P3): publish the state, then a full fence before any load of a protected
        // pointer. On x86 a locked RMW is a full barrier, as `mfence` is, and cheaper
        // (crossbeam-epoch does the same); the compiler fence keeps the compiler from
        // moving the protected loads above it. Elsewhere (and under loom and Miri, which
        // check the C11 model, not x86's) the portable pair.
        #[cfg(all(any(target_arch = "x86", target_arch = "x86_64"), not(loom), not(miri)))]
        {
            // SeqCst RMW: also a release (A3 acquires it).
            self.record.state.swap(state, Ordering::SeqCst);
            std::sync::atomic::compiler_fence(Ordering::SeqCst);
        }
        #[cfg(not(all(any(target_arch = "x86", target_arch = "x86_64"), not(loom), not(miri))))]
        {
            // Release: pairs with the Acquire scan (A3) of an advancing thread, which may
            // read this store instead of the unpin before it.
            self.record.state.store(state, Ordering::Release);
            crate::sync::fence(Ordering::SeqCst);
        }
    }

    #[inline]
    fn unpin(&self) {
        let n = self.nesting.get() - 1;
        self.nesting.set(n);
        if n == 0 {
            // (U1) Release: pairs with the Acquire scan (A3): every access made while
            // pinned happens-before the frees of the advance that reads this.
            self.record.state.store(0, Ordering::Release);
        }
    }

    fn defer(&self, item: Deferred) {
        let full = {
            let mut open = self.open.borrow_mut();
            open.push(item);
            open.len() >= self.bag_limit.get()
        };
        if full {
            self.seal();
            // With a grace-period thread: ask it to advance, and only run what has
            // expired; without one: one attempt here.
            let advances = if self.request_advance() { 0 } else { 1 };
            self.collect(advances, false);
        }
    }

    /// Asks the collector's grace-period thread to advance; `false` if it has none.
    fn request_advance(&self) -> bool {
        #[cfg(not(any(loom, miri)))]
        return super::advancer::request(&self.global);
        #[cfg(any(loom, miri))]
        return false;
    }

    /// Stamps the open bag and moves it to the sealed ones.
    fn seal(&self) {
        let items = std::mem::replace(&mut *self.open.borrow_mut(), Vec::with_capacity(BAG_SIZE));
        if items.is_empty() {
            return;
        }
        self.bag_limit.set(BAG_SIZE);
        let epoch = self.global.seal_epoch();
        self.sealed.borrow_mut().push(SealedBag { epoch, items });
    }

    /// Adopts orphans, makes up to `advances` attempts to advance the global epoch while
    /// a sealed bag is waiting for it, and runs the expired bags (outside every borrow: a
    /// deferred function may pin and defer again).
    fn collect(&self, advances: usize, wait: bool) {
        let orphans = self.global.take_orphans();
        let ready = {
            let mut sealed = self.sealed.borrow_mut();
            sealed.extend(orphans);
            let Some(newest) = sealed.iter().map(|b| b.epoch).max() else {
                return;
            };
            let mut now = self.global.epoch_acquire();
            for _ in 0..advances {
                if now >= newest + 2 {
                    break;
                }
                let next = self.global.try_advance(wait);
                if next == now {
                    break;
                }
                now = next;
            }
            sealed
                .extract_if(.., |b| b.expired(now))
                .collect::<Vec<_>>()
        };
        for bag in ready {
            // SAFETY: expired at `now`, which is an acquire read of the epoch or an
            // advance made by this thread (`try_advance`'s contract).
            unsafe { bag.run() };
        }
    }

    fn flush(&self) {
        self.seal();
        self.collect(2, true);
    }

    fn pending(&self) -> usize {
        self.open.borrow().len()
            + self
                .sealed
                .borrow()
                .iter()
                .map(|b| b.items.len())
                .sum::<usize>()
    }

    /// The thread is gone (handle dropped, no guard left): its bags become orphans.
    ///
    /// # Safety
    /// `local` came from `Box::into_raw` in [`LocalHandle::register`] and is not used
    /// again.
    unsafe fn finalize(local: *mut Local) {
        // SAFETY: per the contract.
        let local = unsafe { Box::from_raw(local) };
        local.seal();
        let bags = std::mem::take(&mut *local.sealed.borrow_mut());
        local.global.push_orphans(bags);
        local.global.unregister(&local.record);
    }
}

/// A thread's registration with a collector. The default collector keeps one per thread
/// in a thread-local ([`super::pin`]); tests and loom models make their own.
///
/// Not `Send`: its state is the thread's own.
pub struct LocalHandle {
    local: *mut Local,
}

impl LocalHandle {
    /// Registers the calling thread with `global` (writes the registry once).
    pub fn register(global: &Arc<Global>) -> LocalHandle {
        let (record, ordinal) = global.register();
        let local = Box::new(Local {
            global: global.clone(),
            record,
            bag_limit: Cell::new(BAG_SIZE - ordinal * 23 % (BAG_SIZE / 2)),
            nesting: Cell::new(0),
            open: RefCell::new(Vec::with_capacity(BAG_SIZE)),
            sealed: RefCell::new(Vec::new()),
            handle_alive: Cell::new(true),
        });
        LocalHandle {
            local: Box::into_raw(local),
        }
    }

    fn local(&self) -> &Local {
        // SAFETY: the state lives at least as long as its handle (freed by the handle's
        // drop, or later by the last guard).
        unsafe { &*self.local }
    }

    /// Pins the thread: until the guard (and every other guard of this thread) is dropped,
    /// nothing reachable now is freed. Writes only this thread's record (and nothing when
    /// already pinned).
    #[inline]
    pub fn pin(&self) -> Guard {
        self.local().pin();
        Guard { local: self.local }
    }

    /// Whether the thread holds a guard.
    pub fn is_pinned(&self) -> bool {
        self.local().nesting.get() != 0
    }

    /// Seals the open bag, tries (twice) to advance the epoch, and runs every bag whose
    /// grace period has passed, adopted orphans included.
    pub fn flush(&self) {
        self.local().flush();
    }

    /// Waits for a full grace period: returns once every thread pinned before the call
    /// has unpinned (or re-pinned at a later epoch).
    ///
    /// # Panics
    /// If the thread is pinned: its own pin would hold the epoch back forever.
    pub fn synchronize(&self) {
        assert!(
            !self.is_pinned(),
            "epoch::synchronize called while pinned (it would wait for itself)"
        );
        let target = self.local().global.seal_epoch() + 2;
        self.local().global.advance_to(target);
    }

    /// Runs `free(data)` on this thread once every thread pinned now has unpinned. The
    /// caller need not be pinned.
    ///
    /// # Safety
    /// `data` is unreachable for new readers (unlinked before this call), and calling
    /// `free(data)` once, on any thread (an exiting thread's bags are orphaned), is sound.
    pub unsafe fn defer_free(&self, data: *mut (), free: unsafe fn(*mut ())) {
        // SAFETY: per our contract.
        self.local()
            .defer(unsafe { Deferred::from_raw(data, free) });
    }

    /// Runs `f` on this thread once every thread pinned now has unpinned. The caller need
    /// not be pinned.
    ///
    /// # Safety
    /// As for [`Guard::defer_unchecked`].
    pub unsafe fn defer_fn<F: FnOnce()>(&self, f: F) {
        // SAFETY: per our contract.
        self.local().defer(unsafe { Deferred::from_fn(f) });
    }

    /// Deferred functions of this thread not yet run.
    pub fn pending(&self) -> usize {
        self.local().pending()
    }
}

impl Drop for LocalHandle {
    fn drop(&mut self) {
        let local = self.local();
        local.handle_alive.set(false);
        if local.nesting.get() == 0 {
            // SAFETY: no guard is left and the handle is going: nobody uses it again.
            unsafe { Local::finalize(self.local) };
        }
    }
}

/// A pin of the current thread (see [`LocalHandle::pin`]); unpins when dropped.
/// [`Shared`] pointers loaded through it live no longer than it.
///
/// Not `Send` or `Sync`: a pin is the pinning thread's.
pub struct Guard {
    /// Null for [`super::unprotected`].
    local: *const Local,
}

impl Guard {
    fn local(&self) -> Option<&Local> {
        // SAFETY: a non-null `local` is alive while a guard of it exists (its handle's
        // drop leaves it to the last guard).
        unsafe { self.local.as_ref() }
    }

    /// Runs `f` once every thread pinned now has unpinned (at once on an unprotected
    /// guard).
    pub fn defer<F, R>(&self, f: F)
    where
        F: FnOnce() -> R + Send + 'static,
    {
        // SAFETY: `Send + 'static`: runnable anywhere, any time.
        unsafe { self.defer_unchecked(f) }
    }

    /// [`Guard::defer`] without the bounds.
    ///
    /// # Safety
    /// Running `f` on any thread after the grace period is sound: what it captures is
    /// still valid then (it need not be `'static`) and may move to another thread (an
    /// exiting thread's bags are orphaned; it need not be `Send`).
    pub unsafe fn defer_unchecked<F, R>(&self, f: F)
    where
        F: FnOnce() -> R,
    {
        match self.local() {
            // SAFETY: per our contract.
            Some(local) => local.defer(unsafe {
                Deferred::from_fn(move || {
                    f();
                })
            }),
            None => drop(f()),
        }
    }

    /// Drops the object `ptr` points to once every thread pinned now has unpinned.
    ///
    /// # Safety
    /// `ptr` is unreachable for new readers, nobody else destroys it, and dropping `T` on
    /// any thread is sound.
    pub unsafe fn defer_destroy<T: ?Sized + Pointable>(&self, ptr: Shared<'_, T>) {
        // SAFETY: per our contract; `T::drop` takes an allocation made by `T::init`.
        let item = unsafe { Deferred::from_raw(ptr.into_ptr(), T::drop) };
        match self.local() {
            Some(local) => local.defer(item),
            // SAFETY: unprotected: the caller promises no other thread uses the object.
            None => unsafe { item.run() },
        }
    }

    /// As [`LocalHandle::flush`] (nothing on an unprotected guard). Pinned, the thread
    /// advances the epoch only if it pinned at the current one.
    pub fn flush(&self) {
        if let Some(local) = self.local() {
            local.flush();
        }
    }
}

impl Drop for Guard {
    #[inline]
    fn drop(&mut self) {
        if let Some(local) = self.local() {
            local.unpin();
            if local.nesting.get() == 0 && !local.handle_alive.get() {
                // SAFETY: the handle is gone and this was the last guard.
                unsafe { Local::finalize(self.local.cast_mut()) };
            }
        }
    }
}

/// The guard [`super::unprotected`] returns: never pinned, so it may be shared.
pub(super) struct Unprotected(Guard);

// SAFETY: its pointer is null, so no method touches any thread's state through it.
unsafe impl Sync for Unprotected {}

/// The one unprotected guard.
pub(super) static UNPROTECTED: Unprotected = Unprotected(Guard { local: ptr::null() });

impl Unprotected {
    pub(super) fn guard(&'static self) -> &'static Guard {
        &self.0
    }
}
