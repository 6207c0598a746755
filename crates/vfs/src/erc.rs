//! `Erc<T>`: a reference-counted pointer whose last `drop` *releases* the object at once
//! (synchronously, in the dropping thread) but *frees its memory* only after an epoch grace
//! period.
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

use std::ops::Deref;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicUsize, Ordering};

/// What happens when the last reference goes (called once, before the memory is retired).
pub trait Release: Send + Sync + 'static {
    /// Runs when the last reference is dropped.
    fn release(&self);
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
            // Acquire on success: pairs with nothing stronger than the Relaxed increments
            // elsewhere, but orders our later reads of the value after the count check.
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
    /// As for [`Erc::try_get_raw`]; the borrow must not outlive the caller's epoch guard.
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
}
