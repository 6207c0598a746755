//! Per-thread caches of type-stable [`Erc`](super::Erc) blocks: Linux's
//! `SLAB_TYPESAFE_BY_RCU`, the way `struct file` has used it since 6.7.
//!
//! ## Why
//! A block freed through the epoch waits for every thread pinned when its bag was sealed
//! to unpin. With many more runnable threads than CPUs, some thread is nearly always
//! preempted inside a pinned section (a path walk), so grace periods stretch to a
//! scheduler round and a workload that opens and closes files piles up the blocks of
//! hundreds of thousands of closed files (measured: 240 MB at 64 threads on 2 CPUs,
//! against 24 MB at 2 threads), and pays the allocator's slow path for them. A cached
//! block is reused by the next `Erc::new` on the same thread, at once and while still
//! hot in this CPU's cache; memory stays bounded by the live objects plus
//! [`CAPACITY`] blocks per thread.
//!
//! ## Safety argument
//! * A block's memory is returned to the allocator only through the epoch
//!   ([`retire_block`]): when the cache is full, and when its thread exits. So a reader
//!   that found the pointer under a pin can always read the count.
//! * A cached block has count zero, which `try_get_raw` never raises, and its value has
//!   been dropped; `Erc::new` writes the new value and only then stores the count 1
//!   (Release), so a reader whose Acquire CAS counts the new object sees its value.
//! * The reader's only new duty: after counting, check that its source still holds the
//!   pointer (see the parent module's docs). The close that emptied the source happens
//!   before the new object's count store (the close's count drop, the last drop's
//!   Acquire, the release and reuse, all on the path to `Erc::new`), so a reader that
//!   counted the new object and then reads the pointer again in the source reads the
//!   close's write or a later one: it cannot mistake the old installation for the new.
//!
//! The cache is a plain thread-local stack: only its thread touches it, so taking and
//! keeping a block write no shared line.
//!
//! ## Which types may opt in
//! Only those whose lock-free readers count an object before they read it. Open files
//! qualify (descriptor lookup counts, then checks its slot). Inodes do not: rcu-walk
//! reads a dentry's inode under a pin without counting it (`Erc::raw_deref`), so an
//! inode's value must outlive every pinned reader, which only the epoch's free gives.

use super::{ErcInner, Release};
use std::alloc::Layout;
use std::cell::RefCell;
use std::ptr::NonNull;
use std::thread::LocalKey;

/// Blocks a thread keeps per type; more are retired through the epoch.
pub const CAPACITY: usize = 64;

/// One thread's cache of free blocks of one [`Release`] type (declare it with
/// `thread_local!` and return it from [`Release::type_stable_cache`]).
pub struct TypeStableCache<T: Release> {
    blocks: RefCell<Vec<NonNull<ErcInner<T>>>>,
}

impl<T: Release> TypeStableCache<T> {
    /// An empty cache.
    pub const fn new() -> Self {
        TypeStableCache {
            blocks: RefCell::new(Vec::new()),
        }
    }

    /// Blocks held now (tests and diagnostics).
    pub fn len(&self) -> usize {
        self.blocks.borrow().len()
    }

    /// Whether the cache holds no block.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl<T: Release> Default for TypeStableCache<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T: Release> Drop for TypeStableCache<T> {
    fn drop(&mut self) {
        // The thread is exiting: readers on other threads may still hold pointers to these
        // blocks, so they go through the epoch (which works during thread-local teardown).
        for block in self.blocks.get_mut().drain(..) {
            // SAFETY: a cached block: allocated, value dropped, reachable by no new reader.
            unsafe { retire_block(block) };
        }
    }
}

/// A free block from this thread's cache, if any (`None` also while the thread exits).
pub(super) fn take<T: Release>(
    cache: &'static LocalKey<TypeStableCache<T>>,
) -> Option<NonNull<ErcInner<T>>> {
    cache
        .try_with(|c| c.blocks.borrow_mut().pop())
        .ok()
        .flatten()
}

/// Keeps `block` (value dropped, count zero) for reuse on this thread, or retires it.
///
/// # Safety
/// The block came from [`Erc::new`] of `T`, its count is zero and its value was dropped;
/// the caller gives it up.
pub(super) unsafe fn keep<T: Release>(
    cache: &'static LocalKey<TypeStableCache<T>>,
    block: NonNull<ErcInner<T>>,
) {
    let kept = cache
        .try_with(|c| {
            let mut blocks = c.blocks.borrow_mut();
            (blocks.len() < CAPACITY)
                .then(|| blocks.push(block))
                .is_some()
        })
        .unwrap_or(false);
    if !kept {
        // SAFETY: per our contract.
        unsafe { retire_block(block) };
    }
}

unsafe fn dealloc_block<T: Release>(p: *mut ()) {
    // SAFETY: `p` was allocated by `Erc::new`'s `Box<ErcInner<T>>`, with this layout; its
    // value was dropped in place, so only the memory is left to free.
    unsafe { std::alloc::dealloc(p.cast(), Layout::new::<ErcInner<T>>()) };
}

/// Frees `block`'s memory (its value already dropped) after a grace period.
///
/// # Safety
/// As for [`keep`].
unsafe fn retire_block<T: Release>(block: NonNull<ErcInner<T>>) {
    // SAFETY: unreachable for new readers (count zero forever); freeing memory takes no
    // lock.
    unsafe { scalevfs_primitives::epoch::defer_free(block.as_ptr().cast(), dealloc_block::<T>) };
}
