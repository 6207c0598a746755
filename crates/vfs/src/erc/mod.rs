//! `Erc<T>`: a reference-counted pointer whose last `drop` *releases* the object at once
//! (synchronously, in the dropping thread) but *frees its memory* only after an epoch grace
//! period (a type-stable type instead reuses it at once: see below).
//!
//! This is the kernel's `iput`/`fput` + RCU-freed slab object pattern. Lock-free readers
//! (rcu-walk reading a dentry's inode, fd lookup reading a file slot) hold only an epoch
//! guard, so memory must outlive them; but eviction (removing an inode from its superblock's
//! list, giving tmpfs space back) must happen when the last reference goes, so that
//! `unlink` + `close` frees space immediately, as on Linux.
//!
//! Orderings: increments are Relaxed (a new reference is made from an existing one, as in
//! `Arc`); the decrement is Release and the last one is followed by an Acquire load, so every
//! use of the object by other holders happens before `release`. [`Erc::try_get_raw`] is a
//! CAS loop that never resurrects a zero count.
//!
//! ## Type-stable blocks (opt-in, Linux's `SLAB_TYPESAFE_BY_RCU`)
//! A type whose [`Release::type_stable_cache`] names a thread-local [`TypeStableCache`]
//! does not wait a grace period to reuse its memory: the last `drop` releases the object,
//! drops its value in place, and keeps the block (count zero) in this thread's cache,
//! from which the next [`Erc::new`] of the type on this thread takes it. Only blocks the
//! cache has no room for (and a dying thread's cache) go to the epoch and are freed after
//! a grace period. `erc/type_stable.rs` says what this buys and argues its safety.
//!
//! What stays true: a block's memory is freed only through the epoch, so a pinned reader
//! may always read its count; and a zero count is never raised. What changes: a pointer
//! read under a pin may, by the time its count is taken, be *another object of the same
//! type*. A lock-free reader of such a type must therefore check, after
//! [`Erc::try_get_raw`] succeeds, that the place it read the pointer from still holds it
//! (Linux's `get_file_rcu`), and must never read the value before that. Reuse installs
//! the new value before a Release store of the count 1 (paired with the Acquire of
//! `try_get_raw`'s CAS), so a reader that counted the new object sees its value.

#[cfg(all(test, not(miri)))]
mod shuttle_tests;
mod type_stable;

pub use type_stable::TypeStableCache;

use std::ops::Deref;
use std::ptr::{self, NonNull};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread::LocalKey;

/// What happens when the last reference goes (called once, before the memory is retired).
pub trait Release: Send + Sync + 'static {
    /// Runs when the last reference is dropped.
    fn release(&self);

    /// This thread's cache of type-stable blocks for the type, if it reuses its memory
    /// without a grace period (see the module docs). `None` (the default): every block
    /// is freed through the epoch.
    fn type_stable_cache() -> Option<&'static LocalKey<TypeStableCache<Self>>>
    where
        Self: Sized,
    {
        None
    }
}

/// The heap block: count and value.
pub struct ErcInner<T> {
    count: AtomicUsize,
    val: T,
}

/// See the module docs.
pub struct Erc<T: Release> {
    ptr: NonNull<ErcInner<T>>,
}

// SAFETY: like Arc<T>: the value is shared between threads, so T must be Send + Sync
// (guaranteed by the `Release` bound).
unsafe impl<T: Release> Send for Erc<T> {}
// SAFETY: as above.
unsafe impl<T: Release> Sync for Erc<T> {}

impl<T: Release> Erc<T> {
    /// A count of one on `val`.
    pub fn new(val: T) -> Erc<T> {
        if let Some(block) = T::type_stable_cache().and_then(type_stable::take) {
            // SAFETY: a cached block is allocated, its value dropped and its count zero;
            // nothing else writes the value (readers only try the count, which refuses
            // zero), so we may write a new one in place.
            unsafe { ptr::addr_of_mut!((*block.as_ptr()).val).write(val) };
            // Release: the value above is visible to whoever counts this incarnation
            // (pairs with the Acquire CAS in `try_get_raw`).
            // SAFETY: as above.
            unsafe { block.as_ref() }.count.store(1, Ordering::Release);
            return Erc { ptr: block };
        }
        let b = Box::new(ErcInner {
            count: AtomicUsize::new(1),
            val,
        });
        Erc {
            ptr: NonNull::from(Box::leak(b)),
        }
    }

    fn inner(&self) -> &ErcInner<T> {
        // SAFETY: we own a count, so the block is live (not even released).
        unsafe { self.ptr.as_ref() }
    }

    /// The raw block pointer, for lock-free tables that hold uncounted pointers.
    pub fn as_raw(this: &Erc<T>) -> *const ErcInner<T> {
        this.ptr.as_ptr()
    }

    /// Gives up the handle without dropping its count (see [`Erc::from_raw`]).
    pub fn into_raw(this: Erc<T>) -> *const ErcInner<T> {
        let p = this.ptr.as_ptr();
        std::mem::forget(this);
        p
    }

    /// Adopts a count given up by [`Erc::into_raw`].
    ///
    /// # Safety
    /// `p` must come from `into_raw`, and each such count may be adopted once.
    pub unsafe fn from_raw(p: *const ErcInner<T>) -> Erc<T> {
        Erc {
            // SAFETY: non-null: it came from into_raw.
            ptr: unsafe { NonNull::new_unchecked(p as *mut _) },
        }
    }

    /// Takes a new reference from a raw pointer unless the count already reached zero.
    ///
    /// For a type-stable `T` (see the module docs) the reference may be to an object that
    /// reused the block since `p` was read: the caller must check that its source still
    /// holds `p` before it uses the value.
    ///
    /// # Safety
    /// `p` must come from [`Erc::as_raw`] and the block must not have been freed: the caller is
    /// pinned in the epoch and found `p` in a structure the object is removed from before its
    /// memory is retired.
    pub unsafe fn try_get_raw(p: *const ErcInner<T>) -> Option<Erc<T>> {
        // SAFETY: the caller guarantees the block is still allocated.
        let c = unsafe { &(*p).count };
        let mut n = c.load(Ordering::Relaxed);
        loop {
            if n == 0 {
                return None;
            }
            // Acquire on success: pairs with the Release store of the count 1 in `new` when
            // a type-stable block was reused (its value is written before that store; the
            // Relaxed increments since continue its release sequence), and orders our later
            // reads of the value after the count check.
            match c.compare_exchange_weak(n, n + 1, Ordering::Acquire, Ordering::Relaxed) {
                Ok(_) => {
                    return Some(Erc {
                        // SAFETY: non-null, it came from `as_raw`.
                        ptr: unsafe { NonNull::new_unchecked(p as *mut _) },
                    });
                }
                Err(v) => n = v,
            }
        }
    }

    /// Borrow the value behind a raw pointer without taking a reference.
    ///
    /// # Safety
    /// As for [`Erc::try_get_raw`]; the borrow must not outlive the caller's epoch guard;
    /// and `T` is not type-stable (its value may be dropped in place at any time).
    pub unsafe fn raw_deref<'a>(p: *const ErcInner<T>) -> &'a T {
        // SAFETY: the caller guarantees the block is allocated for 'a.
        unsafe { &(*p).val }
    }

    /// The current count (a racy snapshot, for diagnostics and tests).
    pub fn count(this: &Erc<T>) -> usize {
        this.inner().count.load(Ordering::Relaxed)
    }

    /// Whether `a` and `b` point to the same object.
    pub fn ptr_eq(a: &Erc<T>, b: &Erc<T>) -> bool {
        a.ptr == b.ptr
    }
}

impl<T: Release> Deref for Erc<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.inner().val
    }
}

impl<T: Release> Clone for Erc<T> {
    fn clone(&self) -> Self {
        // Relaxed: a new reference is made from one we hold, as in Arc::clone.
        let old = self.inner().count.fetch_add(1, Ordering::Relaxed);
        if old > usize::MAX / 2 {
            std::process::abort();
        }
        Erc { ptr: self.ptr }
    }
}

impl<T: Release> Drop for Erc<T> {
    fn drop(&mut self) {
        // Release: our uses of the value happen before the release (pairs with the Acquire
        // load below).
        if self.inner().count.fetch_sub(1, Ordering::Release) != 1 {
            return;
        }
        // Acquire: pairs with every other holder's Release decrement (they are all in the
        // count's release sequence). A load rather than `fence(Acquire)`, as std's `Arc`
        // does under ThreadSanitizer: TSan does not model standalone fences and would
        // report the holders' last uses against `release` as races; the load costs the
        // same (the line is ours after the fetch_sub).
        self.inner().count.load(Ordering::Acquire);
        self.inner().val.release();
        if let Some(cache) = T::type_stable_cache() {
            // SAFETY: the count is zero and `release` ran: nobody holds a reference, and
            // lock-free readers only try the count (type-stable readers never read the value
            // before counting it), so the value may be dropped in place; the block stays
            // allocated until `keep` retires it through the epoch.
            unsafe {
                ptr::drop_in_place(ptr::addr_of_mut!((*self.ptr.as_ptr()).val));
                type_stable::keep(cache, self.ptr);
            }
            return;
        }
        // SAFETY: the count is zero, so no new reference can be made (try_get_raw refuses
        // zero); lock-free readers that still see the pointer are pinned, and the object is
        // freed only after they unpin. `release` removed it from every lookup structure, and
        // dropping the box only frees memory.
        unsafe { crate::retire::retire_box(self.ptr.as_ptr()) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;
    use std::sync::Arc;
    use std::thread::LocalKey;

    struct Obj(Arc<AtomicBool>);
    impl Release for Obj {
        fn release(&self) {
            assert!(!self.0.swap(true, Ordering::SeqCst), "released twice");
        }
    }

    #[test]
    fn release_runs_once_at_last_drop() {
        let flag = Arc::new(AtomicBool::new(false));
        let a = Erc::new(Obj(flag.clone()));
        let b = a.clone();
        let raw = Erc::as_raw(&a);
        drop(a);
        assert!(!flag.load(Ordering::SeqCst));
        let g = scalevfs_primitives::epoch::pin();
        // SAFETY: pinned, and b keeps the object alive.
        let c = unsafe { Erc::try_get_raw(raw) }.unwrap();
        assert_eq!(Erc::count(&c), 2);
        drop(b);
        drop(c);
        assert!(flag.load(Ordering::SeqCst));
        // SAFETY: still pinned: the block is retired but not freed.
        assert!(unsafe { Erc::try_get_raw(raw) }.is_none());
        drop(g);
    }

    /// A type-stable test type: its value counts its drops.
    struct Stable {
        id: usize,
        drops: Arc<AtomicUsize>,
    }
    impl Drop for Stable {
        fn drop(&mut self) {
            self.drops.fetch_add(1, Ordering::SeqCst);
        }
    }
    thread_local! {
        static STABLE_BLOCKS: TypeStableCache<Stable> = const { TypeStableCache::new() };
    }
    impl Release for Stable {
        fn release(&self) {}
        fn type_stable_cache() -> Option<&'static LocalKey<TypeStableCache<Self>>> {
            Some(&STABLE_BLOCKS)
        }
    }
    fn cached() -> usize {
        STABLE_BLOCKS.with(TypeStableCache::len)
    }
    fn stable(id: usize, drops: &Arc<AtomicUsize>) -> Erc<Stable> {
        Erc::new(Stable {
            id,
            drops: drops.clone(),
        })
    }

    /// The last drop drops the value at once and keeps the block; the next `new` on the
    /// thread reuses it, and a reader holding the old pointer counts the *new* object
    /// (which is why type-stable readers check their source again).
    #[test]
    fn a_type_stable_block_is_reused_at_once() {
        let drops = Arc::new(AtomicUsize::new(0));
        let before = cached();
        let a = stable(1, &drops);
        let raw = Erc::as_raw(&a);
        drop(a);
        assert_eq!(
            drops.load(Ordering::SeqCst),
            1,
            "value dropped at the last put"
        );
        assert_eq!(cached(), before + 1);
        let g = scalevfs_primitives::epoch::pin();
        // SAFETY: pinned, and the block is cached, not freed.
        let none = unsafe { Erc::try_get_raw(raw) };
        assert!(none.is_none(), "a zero count stays zero");
        let b = stable(2, &drops);
        assert_eq!(Erc::as_raw(&b), raw, "the block is reused");
        assert_eq!(cached(), before);
        // SAFETY: pinned; the block is live (b holds it).
        let c = unsafe { Erc::try_get_raw(raw) }.expect("the new object is counted");
        assert_eq!(c.id, 2);
        assert_eq!(Erc::count(&b), 2);
        drop((b, c, g));
        assert_eq!(drops.load(Ordering::SeqCst), 2);
    }

    /// The cache is bounded: blocks beyond it go to the epoch, and a dying thread's cache
    /// too; every value is dropped exactly once, when its last reference goes.
    #[test]
    fn blocks_beyond_the_cache_and_of_an_exiting_thread_are_retired() {
        let drops = Arc::new(AtomicUsize::new(0));
        let n = type_stable::CAPACITY + 5;
        let d = drops.clone();
        let pending = std::thread::spawn(move || {
            let all: Vec<_> = (0..n).map(|i| stable(i, &d)).collect();
            drop(all);
            assert_eq!(d.load(Ordering::SeqCst), n);
            assert_eq!(cached(), type_stable::CAPACITY);
            crate::retire::pending_local()
        })
        .join()
        .unwrap();
        assert!(pending >= 5, "the overflow was retired, not freed at once");
        assert_eq!(drops.load(Ordering::SeqCst), n, "no value dropped twice");
        assert_eq!(Arc::strong_count(&drops), 1, "every value is gone");
    }
}
