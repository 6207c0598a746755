//! Thin adapters over the primitives crate, so that the VFS names one type per role and the
//! legacy/scalable switch lives in one place.
//!
//! * [`DRef`]: a dentry's reference count and its `d_lock`. Scalable: `LockRef` (cmpxchg while
//!   the count is above 1, seed 004); legacy: `LegacyRef` (every change under the lock).
//!   It is an enum and not a type parameter: the variant is fixed at construction, so the
//!   branch is perfectly predicted, and a type parameter would have to infect `Dentry`,
//!   `Dcache`, `Path`, `OpenFile` and the whole system-call API. The cost on the scalable
//!   path is one well-predicted compare per refcount operation.
//! * [`RenameLock`]: the rename sequence read/write lock (seed 004).
//! * [`InodeList`]: a superblock's inode list (seed 001): `DList` or the legacy `LockedList`.

use parking_lot::Mutex;
use scalevfs_primitives::lockref::{LegacyRef, LockRef};
use scalevfs_primitives::Locking;
use std::sync::atomic::{AtomicU64, Ordering};

/// The lock of a [`DRef`], held: the count may be read and changed, and the fields the owner
/// documents as "under d_lock" may be changed. Both designs share it.
pub use scalevfs_primitives::lockref::LockRefGuard as DRefGuard;

/// A dentry reference count with its lock (see the module docs).
pub enum DRef {
    Scalable(LockRef),
    Legacy(LegacyRef),
}

macro_rules! dispatch {
    ($self:ident, $r:ident => $e:expr) => {
        match $self {
            DRef::Scalable($r) => $e,
            DRef::Legacy($r) => $e,
        }
    };
}

impl DRef {
    pub fn new(locking: Locking, count: u32) -> DRef {
        match locking {
            Locking::Scalable => DRef::Scalable(LockRef::new(count)),
            Locking::Legacy => DRef::Legacy(LegacyRef::new(count)),
        }
    }
    /// Current count (racy snapshot; a dead count reports 0).
    #[inline]
    pub fn count(&self) -> u32 {
        dispatch!(self, r => r.count()).max(0) as u32
    }
    #[inline]
    pub fn is_dead(&self) -> bool {
        dispatch!(self, r => r.is_dead())
    }
    /// Takes a reference unless the object is dead.
    #[inline]
    pub fn get_not_dead(&self) -> bool {
        dispatch!(self, r => r.get_not_dead())
    }
    /// Takes a reference; the caller already holds one.
    #[inline]
    pub fn get(&self) {
        dispatch!(self, r => r.get())
    }
    /// Drops a reference without the lock if the count stays above zero (`None`); otherwise
    /// returns the lock held and the count not yet decremented (`Some`).
    #[inline]
    pub fn put_or_lock(&self) -> Option<DRefGuard<'_>> {
        dispatch!(self, r => r.put_or_lock())
    }
    #[inline]
    pub fn lock(&self) -> DRefGuard<'_> {
        dispatch!(self, r => r.lock())
    }
    #[inline]
    pub fn try_lock(&self) -> Option<DRefGuard<'_>> {
        dispatch!(self, r => r.try_lock())
    }
}

/// The rename lock: a sequence read/write lock. Renames and mount changes are writers;
/// rcu-walk validates with `read_begin`/`read_retry`; d_path runs as a reader.
pub struct RenameLock {
    seq: AtomicU64,
    lock: parking_lot::RwLock<()>,
    locking: Locking,
}

/// A held rename write lock: the sequence is odd until it drops.
pub struct RenameWriteGuard<'a> {
    l: &'a RenameLock,
    _g: parking_lot::RwLockWriteGuard<'a, ()>,
}

impl Drop for RenameWriteGuard<'_> {
    fn drop(&mut self) {
        // Release: pairs with the Acquire fence in `read_retry`; everything the writer changed
        // is visible to a reader that sees the even sequence.
        self.l.seq.fetch_add(1, Ordering::Release);
    }
}

impl RenameLock {
    pub fn new(locking: Locking) -> RenameLock {
        RenameLock {
            seq: AtomicU64::new(0),
            lock: parking_lot::RwLock::new(()),
            locking,
        }
    }
    /// Starts an optimistic read: waits out a writer in progress and returns the sequence.
    pub fn read_begin(&self) -> u64 {
        loop {
            // Acquire: pairs with the Release increment that ends a write section.
            let s = self.seq.load(Ordering::Acquire);
            if s & 1 == 0 {
                return s;
            }
            std::hint::spin_loop();
            std::thread::yield_now();
        }
    }
    /// True if a writer ran since `start`: the optimistic reader must retry.
    pub fn read_retry(&self, start: u64) -> bool {
        // Acquire fence: orders the reader's data loads before the sequence re-check (pairs with
        // the Release fence after the writer's odd increment).
        std::sync::atomic::fence(Ordering::Acquire);
        self.seq.load(Ordering::Relaxed) != start
    }
    pub fn write(&self) -> RenameWriteGuard<'_> {
        let g = self.lock.write();
        self.seq.fetch_add(1, Ordering::Relaxed);
        // Release fence: the odd sequence is visible before any of the writer's stores (pairs
        // with the Acquire fence in `read_retry`).
        std::sync::atomic::fence(Ordering::Release);
        RenameWriteGuard { l: self, _g: g }
    }
    /// Runs `f` as a reader that must see a consistent tree (d_path). Scalable: optimistic
    /// first, then under the shared lock, so readers proceed together. Legacy: under the
    /// exclusive lock, as d_path did before seed 004.
    pub fn read_consistent<R>(&self, mut f: impl FnMut() -> R) -> R {
        match self.locking {
            Locking::Legacy => {
                let _g = self.write();
                f()
            }
            Locking::Scalable => {
                let s = self.read_begin();
                let r = f();
                if !self.read_retry(s) {
                    return r;
                }
                let _g = self.lock.read();
                f()
            }
        }
    }
}

/// A superblock's list of inodes (placeholder: one locked slab).
pub struct InodeList {
    m: Mutex<(Vec<usize>, Vec<u32>, usize)>,
}

/// Where an item sits in an [`InodeList`].
pub struct InodeListNode(u32);

impl InodeList {
    pub fn new(_locking: Locking) -> InodeList {
        InodeList {
            m: Mutex::new((Vec::new(), Vec::new(), 0)),
        }
    }
    pub fn add(&self, item: usize) -> InodeListNode {
        let mut g = self.m.lock();
        g.2 += 1;
        if let Some(i) = g.1.pop() {
            g.0[i as usize] = item;
            InodeListNode(i)
        } else {
            g.0.push(item);
            InodeListNode(g.0.len() as u32 - 1)
        }
    }
    pub fn remove(&self, node: &InodeListNode) {
        let mut g = self.m.lock();
        g.0[node.0 as usize] = 0;
        g.1.push(node.0);
        g.2 -= 1;
    }
    pub fn len(&self) -> usize {
        self.m.lock().2
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Calls `f` on every item, with the list locked.
    pub fn for_each(&self, mut f: impl FnMut(usize)) {
        let g = self.m.lock();
        for &i in g.0.iter().filter(|&&i| i != 0) {
            f(i);
        }
    }
}
