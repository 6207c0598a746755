//! Thin adapters over the primitives crate, so that the VFS names one type per role and the
//! legacy/scalable switch lives in one place.
//!
//! * [`DRef`]: a dentry's reference count and its `d_lock`. Scalable: `PcpuRef` (a `LockRef`,
//!   cmpxchg while the count is above 1, Linux's lockref, which a dentry counted by several
//!   threads can switch to per-CPU counters in the dcache's `SlotArena`; without an arena it is
//!   the plain `LockRef`); legacy: `LegacyRef` (every change under the lock).
//!   It is an enum and not a type parameter: the variant is fixed at construction, so the
//!   branch is perfectly predicted, and a type parameter would have to infect `Dentry`,
//!   `Dcache`, `Path`, `OpenFile` and the whole system-call API. The cost on the scalable
//!   path is one well-predicted compare per refcount operation.
//! * [`RenameLock`]: the rename sequence read/write lock (the `seqrwlock_t` patches): `SeqRwLock`; legacy
//!   d_path takes it for writing, as before those patches.
//! * [`InodeList`]: a superblock's inode list (Linux's dlock-list): `DList` with one shard per CPU,
//!   or one shard (the legacy single locked list).

use scalevfs_primitives::dlist::DList;
use scalevfs_primitives::lockref::LegacyRef;
use scalevfs_primitives::percpu_ref::{PcpuRef, SlotArena};
use scalevfs_primitives::seqlock::{ReadMode, SeqCount, SeqRwLock, SeqWriteGuard};
use scalevfs_primitives::Locking;

/// The lock of a [`DRef`], held: the count may be read and changed, and the fields the owner
/// documents as "under d_lock" may be changed. Both designs share it.
pub use scalevfs_primitives::lockref::LockRefGuard as DRefGuard;

/// A dentry reference count with its lock (see the module docs). The `arena` arguments
/// are the dcache's per-CPU counters (`None`: the scalable design with `LockRef` alone);
/// the legacy design ignores them.
pub enum DRef {
    /// Linux's lockref, with the per-CPU mode of `percpu_ref`.
    Scalable(PcpuRef),
    /// Every change under the lock.
    Legacy(LegacyRef),
}

impl DRef {
    /// A count of `count` of design `locking`.
    pub fn new(locking: Locking, count: u32) -> DRef {
        match locking {
            Locking::Scalable => DRef::Scalable(PcpuRef::new(count)),
            Locking::Legacy => DRef::Legacy(LegacyRef::new(count)),
        }
    }
    /// Current count (racy snapshot, per-CPU part included; a dead count reports 0).
    #[inline]
    pub fn count(&self, arena: Option<&SlotArena>) -> u32 {
        match self {
            DRef::Scalable(r) => r.count(arena),
            DRef::Legacy(r) => r.count(),
        }
        .max(0) as u32
    }
    /// Takes a reference unless the object is dead: `None` if dead, else whether the
    /// owner should promote it (counted by another thread than last time).
    #[inline]
    pub fn get_not_dead(&self, arena: Option<&SlotArena>) -> Option<bool> {
        match self {
            DRef::Scalable(r) => r.get_not_dead(arena),
            DRef::Legacy(r) => r.get_not_dead().then_some(false),
        }
    }
    /// Takes a reference (the caller already holds one); true if the owner should promote.
    #[inline]
    pub fn get(&self, arena: Option<&SlotArena>) -> bool {
        match self {
            DRef::Scalable(r) => r.get(arena),
            DRef::Legacy(r) => {
                r.get();
                false
            }
        }
    }
    /// Drops a reference without the lock if the count stays above zero (`None`); otherwise
    /// returns the lock held and the count not yet decremented (`Some`).
    #[inline]
    pub fn put_or_lock(&self, arena: Option<&SlotArena>) -> Option<DRefGuard<'_>> {
        match self {
            DRef::Scalable(r) => r.put_or_lock(arena),
            DRef::Legacy(r) => r.put_or_lock(),
        }
    }
    /// Takes the lock (`d_lock`).
    #[inline]
    pub fn lock(&self) -> DRefGuard<'_> {
        match self {
            DRef::Scalable(r) => r.lock(),
            DRef::Legacy(r) => r.lock(),
        }
    }
    /// Takes the lock if it is free.
    #[inline]
    pub fn try_lock(&self) -> Option<DRefGuard<'_>> {
        match self {
            DRef::Scalable(r) => r.try_lock(),
            DRef::Legacy(r) => r.try_lock(),
        }
    }
    /// The per-CPU count, if this is one (the scalable design).
    #[inline]
    pub fn percpu(&self) -> Option<&PcpuRef> {
        match self {
            DRef::Scalable(r) => Some(r),
            DRef::Legacy(_) => None,
        }
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
