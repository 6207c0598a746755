//! Thin adapters over the primitives crate, so that the VFS names one type per role and the
//! legacy/scalable switch lives in one place.
//!
//! * [`DRef`]: a dentry's reference count and its `d_lock`. Scalable: `LockRef` (cmpxchg while
//!   the count is above 1, Linux's lockref); legacy: `LegacyRef` (every change under the lock).
//!   It is an enum and not a type parameter: the variant is fixed at construction, so the
//!   branch is perfectly predicted, and a type parameter would have to infect `Dentry`,
//!   `Dcache`, `Path`, `OpenFile` and the whole system-call API. The cost on the scalable
//!   path is one well-predicted compare per refcount operation.
//! * [`RenameLock`]: the rename sequence read/write lock (the `seqrwlock_t` patches): `SeqRwLock`; legacy
//!   d_path takes it for writing, as before those patches.
//! * [`InodeList`]: a superblock's inode list (Linux's dlock-list): `DList` with one shard per CPU,
//!   or one shard (the legacy single locked list).

use scalevfs_primitives::dlist::DList;
use scalevfs_primitives::lockref::{LegacyRef, LockRef};
use scalevfs_primitives::seqlock::{ReadMode, SeqCount, SeqRwLock, SeqWriteGuard};
use scalevfs_primitives::Locking;

/// The lock of a [`DRef`], held: the count may be read and changed, and the fields the owner
/// documents as "under d_lock" may be changed. Both designs share it.
pub use scalevfs_primitives::lockref::LockRefGuard as DRefGuard;

/// A dentry reference count with its lock (see the module docs).
pub enum DRef {
    /// Linux's lockref: lock-free count changes while the lock is free.
    Scalable(LockRef),
    /// Every change under the lock.
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
    /// A count of `count` of design `locking`.
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
    /// Whether the count is dead (the dentry is being killed).
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
    /// Takes the lock (`d_lock`).
    #[inline]
    pub fn lock(&self) -> DRefGuard<'_> {
        dispatch!(self, r => r.lock())
    }
    /// Takes the lock if it is free.
    #[inline]
    pub fn try_lock(&self) -> Option<DRefGuard<'_>> {
        dispatch!(self, r => r.try_lock())
    }
}

/// The rename lock: a sequence read/write lock (the `seqrwlock_t` patches). Renames and mount changes are
/// writers; rcu-walk validates with `read_begin`/`read_retry`; d_path runs as a reader.
pub struct RenameLock {
    lock: SeqRwLock,
    locking: Locking,
}

/// A rename (write) section; the sequence is odd until it drops.
pub type RenameWriteGuard<'a> = SeqWriteGuard<'a>;

impl RenameLock {
    /// A rename lock of design `locking`.
    pub fn new(locking: Locking) -> RenameLock {
        RenameLock {
            lock: SeqRwLock::new(),
            locking,
        }
    }
    /// Starts an optimistic read: waits out a writer in progress and returns the sequence.
    #[inline]
    pub fn read_begin(&self) -> SeqCount {
        self.lock.read_begin()
    }
    /// True if a writer ran since `start`: the optimistic reader must retry.
    #[inline]
    pub fn read_retry(&self, start: SeqCount) -> bool {
        self.lock.read_retry(start)
    }
    /// Takes the lock for writing: excludes other writers and makes readers retry.
    pub fn write(&self) -> RenameWriteGuard<'_> {
        self.lock.write_lock()
    }
    /// Runs `f` as a reader that must see a consistent tree (d_path). Scalable: optimistic
    /// first, then as a shared reader, so readers proceed together (the patches' "after").
    /// Legacy: under the write lock, as d_path took `write_seqlock(&rename_lock)` before.
    pub fn read_consistent<R>(&self, mut f: impl FnMut() -> R) -> R {
        match self.locking {
            Locking::Legacy => {
                let _g = self.lock.write_lock();
                f()
            }
            Locking::Scalable => self.lock.read_or_lock(|_mode: ReadMode| f()),
        }
    }
}

/// A superblock's list of inodes (Linux's dlock-list): a per-CPU `DList`, or the single locked list
/// (legacy), chosen at construction; both are the one type.
/// Items are inode addresses, non-zero so that a list slot needs no tag (32 bytes, not 40).
pub type InodeList = DList<std::num::NonZeroUsize>;
/// Where an inode sits on its superblock's list.
pub use scalevfs_primitives::dlist::DListNode as InodeListNode;

/// A number from a per-thread block of `BATCH` taken from `counter` (Linux's
/// `get_next_ino` batching): numbers are unique, and threads take a shared counter's line
/// once per block instead of once per number. Each user keeps its own counter and block.
pub fn next_batched_id(
    counter: &std::sync::atomic::AtomicU64,
    block: &'static std::thread::LocalKey<std::cell::Cell<(u64, u64)>>,
) -> u64 {
    const BATCH: u64 = 1024;
    block.with(|b| {
        let (mut next, mut end) = b.get();
        if next == end {
            // Relaxed: numbers only need to be unique.
            next = counter.fetch_add(BATCH, std::sync::atomic::Ordering::Relaxed);
            end = next + BATCH;
        }
        b.set((next + 1, end));
        next
    })
}
