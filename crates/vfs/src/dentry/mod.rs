//! The dentry cache.
//!
//! ## Objects
//! A [`Dentry`] names an inode (positive) or records that a name does not exist (negative) in
//! a parent directory. Dentries live in one [`RcuHash`] keyed by `(parent id, name)`: the key
//! uses the parent's unique `id` rather than its address, so a negative dentry does not have
//! to pin its parent (rmdir frees a directory even if negative children are cached; their
//! keys name an id that is never reused, so they are just garbage for the LRU).
//!
//! ## Reference count and `d_lock` (seed 004)
//! `count` is a [`DRef`]: a `PcpuRef` (scalable: a `LockRef`, get/put by cmpxchg while the
//! count is above one, with the per-CPU mode below) or a `LegacyRef` (every change under
//! the lock). Its lock is the dentry's `d_lock`; it
//! protects the transitions of `flags` (HASHED, ON_LRU, REFERENCED), `lru`, and the
//! `parent`/`name` of a dentry being moved. A dentry is *dead* once its count is marked dead
//! under `d_lock`; `get_not_dead` never revives it.
//!
//! A positive non-root dentry holds a reference to its parent; a hashed dentry with count 0
//! stays cached ("unused") and sits on the LRU. A dentry is killed (unhashed, removed from the
//! LRU, marked dead, its inode reference and parent reference dropped) when its count reaches
//! zero while it is unhashed (unlinked, renamed over), or when the shrinker picks it.
//! Its memory is freed after an epoch grace period, because rcu-walk reads dentries without a
//! reference.
//!
//! ## Per-CPU counts (`percpu_ref`, sv6's Refcache)
//! A `LockRef` word is written by every CPU that counts the dentry, so two processes that
//! open one file, or chdir into one directory, or create in one directory (the parent's
//! count), write one line. In the scalable design (unless
//! `CoreOptions::percpu_dentry_counts` is off: the plain `LockRef`, kept to compare) a
//! dentry has two count modes (`scalevfs_primitives::percpu_ref` has the protocol):
//!
//! * **Atomic**: the `LockRef` holds the exact count, as before. Each get notes its
//!   thread in the count's `last_thread` (written only when it changes).
//! * **Per-CPU**: the `LockRef` count holds a bias of 2^30 on top of its own part; gets
//!   and puts add ±1 to the calling CPU's counter of the dentry's slot in the dcache's
//!   `SlotArena` (CPU `c`'s counters of many dentries packed in CPU `c`'s blocks; 8 bytes
//!   per CPU per slot). A get or put then writes only its CPU's line and takes no lock.
//!
//! Transitions, both under `d_lock`:
//! * **Promote** (`Dentry::promote`, from `dget`/`try_get`) when a get in atomic mode comes
//!   from another thread than the previous one: the dentry is shared (`percpu_ref` says
//!   why the thread and not the CPU). Only a hashed dentry is
//!   promoted, and it is put on the LRU (if it is not there), because no put ever reaches
//!   zero in per-CPU mode, so no `put_last` would put it there; the shrinker, which
//!   demotes, must be able to find it.
//! * **Demote** (`demote_locked`: close every CPU's counter, fold them into the `LockRef`,
//!   remove the bias) wherever the exact count or the last put matters: the shrinker
//!   (before judging a dentry: a promoted one in use is then dropped from the LRU and
//!   cached again at its last put), every unhash (`drop_dentry`: unlink, rmdir, rename
//!   over it, invalidation; and a sibling unhashed by `set_location`), `put_if_last`
//!   (unmount). An unhashed dentry is never promoted, so an unlinked file's last put takes
//!   `d_lock` and kills it at once: the inode is freed when the last reference goes, as
//!   before (statfs and the tests that count inodes see no delay).
//!
//! The switch needs no grace period: a per-CPU change is a compare-exchange that refuses a
//! closed counter, so each get or put either lands before its counter closes (and is in
//! the fold) or retries on the `LockRef`, which waits for the `d_lock` the demoter holds.
//! No count is lost, and the folded count is exact.
//!
//! What `d_lock` protects in each mode: in atomic mode, the count (as before); in per-CPU
//! mode, the mode and the `LockRef` part of the count (the bias), not the per-CPU
//! counters, which change without it. In both, the flags, the LRU node and a move.
//!
//! Why a counted dentry is never killed: killing needs the count at zero under `d_lock`,
//! and in per-CPU mode the bias keeps the `LockRef` count above zero; a dentry is killed
//! only in atomic mode, after a demote whose fold saw every per-CPU count. Why no
//! use-after-free: a per-CPU get is made by a holder of a count or by a reader pinned in
//! the epoch that found the dentry in the hash, exactly as before; memory is freed after
//! the epoch grace period that follows the kill. A dead dentry's slot goes back to the
//! arena after a grace period too (`release_slot`, through `retire`), because a pinned
//! reader may have read the slot number before the demote and not yet added: its add
//! then meets the closed counter, not the next owner's.
//!
//! Costs. A promoted dentry costs a slot (8 bytes per CPU); a get in atomic mode costs a
//! thread-local load and a compare of `last_thread`; a per-CPU get or put a
//! `sched_getcpu`, a few dependent loads (the arena, the slot word, the chunk) and a
//! compare-exchange of a line of the calling CPU. A dentry is promoted at its first count
//! by a second thread and stays so until one of the events above.
//!
//! In the scalability checker the measured objects of a case are not its warm-up objects,
//! so nothing there promotes them; a one-file case counts the file and the link from both
//! threads in its setup (an `O_PATH` open and close on each thread: `commute` crate,
//! `world.rs`). That is the model of a file many threads use, which is what per-CPU counts
//! are for (AIM7's and the `dcache` workload's shared files). A file that only one thread
//! has counted stays in atomic mode, and the first count from a second thread writes the
//! count word and promotes: a pair of first counts still conflicts, once.
//!
//! ## LRU (seed 001's remaining bottleneck)
//! Unused dentries go on per-CPU LRU shards ([`Lru`]). `dput` adds a dentry to the LRU only
//! if it is not already on it; otherwise it just sets REFERENCED (if not set). A dentry that
//! is taken again is *not* removed from the LRU (lazy LRU, as Linux). So `dput` of a hot
//! dentry, which is on the LRU already, touches no shared lock: only its own `d_lock`. The
//! shrinker gives REFERENCED dentries a second chance and drops in-use ones from the list.
//! Legacy ablation: one shard.
//!
//! The shards are small slabs of their own rather than a `DList`: `dput` nests the shard
//! lock inside `d_lock`, so the shrinker must not take a `d_lock` while it holds a shard
//! lock. It copies a batch of pointers under the shard lock (pinned in the epoch, so they
//! stay allocated), drops the lock, and then judges each dentry under its own `d_lock`; a
//! slot is removed only if it still holds that dentry, so a stale batch entry is harmless.
//!
//! ## Rename (seed 004)
//! `d_move` runs with the moved dentry's `d_lock`: it unhashes the old key, changes
//! `parent`, `parent_id`, `name`, and hashes the new key. A rename that moves or replaces a
//! directory does it under the rename lock (a sequence read/write lock) held for writing:
//! rcu-walk samples the rename sequence before it starts and re-checks it after taking its
//! reference on the final dentry; d_path runs as a reader (optimistic, then the shared lock;
//! legacy: the exclusive lock).
//!
//! A rename of one non-directory to another place (scalable design; legacy: every rename
//! writes the sequence, as Linux's `d_move`) writes no global line: no sequence, no rename
//! mutex. Readers stay correct without it:
//! * rcu-walk meets a non-directory only as its final component (an intermediate one makes
//!   the walk fall back), reached through a hash node. Nodes are immutable and a rename
//!   inserts a new node, so a node found with key `(parent, name)` *was* in the cache under
//!   that key at some instant of the walk (insert at the head, unlink leaves the node's
//!   `next` intact): the answer, positive or negative (`ENOENT`), is the name's binding at
//!   that instant. A miss falls back to ref-walk, which waits for the parent's `rwsem`.
//! * The directories the walk crossed did not move: moving one writes the sequence.
//! * d_path reads a non-directory leaf's `parent` and `name` under its `d_lock` (the
//!   lock `d_move` changes them under), and the ancestors, directories, under the sequence.
//! * `parent()` (dget_parent) re-checks the parent pointer after counting it.
//!
//! ## Lock order
//! rename lock (write) -> `d_lock` (moved dentry, then target: by address) -> hash bucket /
//! LRU shard / the `SlotArena`'s allocation mutex (leaves). A parent's `d_lock` is never
//! taken while a child's is held: killing a child drops its lock before putting the
//! parent, and `set_location` counts the new parent (a get may promote it, which takes
//! its `d_lock`) before it takes the moved dentry's lock. A get that promotes takes the
//! dentry's own `d_lock` and an LRU shard; it never shrinks (a shard over its limit is
//! shrunk by the next `put_last`), so it takes no lock of another dentry or inode.
//!
//! ## Orderings
//! `inode` is published once (negative -> positive) with a Release store after `parent`, and
//! read with Acquire (pairs). `name` is an epoch pointer replaced with Release and loaded with
//! Acquire. `flags` and `lru` are changed under `d_lock`; lock-free readers read `flags` as a
//! hint (Relaxed) only where the result is re-validated (rcu-walk's final get + sequence).

use crate::erc::{Erc, ErcInner};
use crate::inode::{Inode, InodeRef, SuperBlock};
use crate::prims::{DRef, DRefGuard, RenameLock};
use crate::rcuhash::{hash_name, LineAligned, RcuHash};
use crossbeam_utils::CachePadded;
use scalevfs_primitives::epoch::{Atomic, Guard, Owned, Pointer, Shared};
use scalevfs_primitives::percpu::PerCpuCounter;
use scalevfs_primitives::percpu_ref::SlotArena;
use scalevfs_primitives::Locking;
use std::cell::Cell;
use std::mem::MaybeUninit;
use std::ptr;
use std::sync::atomic::{AtomicPtr, AtomicU32, AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;

const HASHED: u32 = 1;
const ON_LRU: u32 = 2;
const REFERENCED: u32 = 4;
/// Something is mounted on this dentry (changed under the mount table lock).
const MOUNTED: u32 = 8;

/// See the module docs.
pub struct Dentry {
    count: DRef,
    id: u64,
    flags: AtomicU32,
    parent_id: AtomicU64,
    parent: AtomicPtr<Dentry>,
    /// One allocation: the epoch module's length-prefixed array, so a name costs its length plus a
    /// word (a `Vec` would add a 24-byte header allocation).
    name: Atomic<[NameByte]>,
    inode: AtomicPtr<ErcInner<Inode>>,
    lru: AtomicU64,
    dcache: *const Dcache,
}

// SAFETY: the raw pointers are to the dcache (outlives its dentries) and to dentries and
// inodes kept alive by the counting and epoch rules in the module docs.
unsafe impl Send for Dentry {}
// SAFETY: as above; all mutable state is atomic or under `d_lock`.
unsafe impl Sync for Dentry {}

impl Drop for Dentry {
    fn drop(&mut self) {
        // SAFETY: `&mut self`: the dentry is retired and no reader can see it any more.
        unsafe {
            let n = self
                .name
                .load(Ordering::Relaxed, scalevfs_primitives::epoch::unprotected());
            if !n.is_null() {
                drop(n.into_owned());
            }
        }
    }
}

impl Dentry {
    /// A number unique to this dentry for the VFS's lifetime (the dcache hash key of its children).
    pub fn id(&self) -> u64 {
        self.id
    }
    fn dcache(&self) -> &Dcache {
        // SAFETY: the dcache outlives every dentry (the VFS tears it down last, or leaks it).
        unsafe { &*self.dcache }
    }
    /// The inode, or `None` for a negative dentry. Valid while the caller holds a reference
    /// to this dentry or is pinned in the epoch having found it in the cache.
    pub fn inode(&self) -> Option<&Inode> {
        // Acquire: pairs with the Release store in `instantiate`.
        let p = self.inode.load(Ordering::Acquire);
        if p.is_null() {
            None
        } else {
            // SAFETY: a published inode pointer carries a count the dentry holds until it is
            // killed; after that the memory survives the grace period of any pinned reader.
            Some(unsafe { Erc::raw_deref(p) })
        }
    }
    /// A counted reference to the inode.
    pub fn inode_ref(&self) -> Option<InodeRef> {
        // Pinned before the load: a dentry being killed concurrently drops its inode count,
        // and only a pin taken before the load keeps the inode's memory for `try_get`.
        let _g = scalevfs_primitives::epoch::pin();
        // Acquire: pairs with the Release store in `instantiate`.
        let p = self.inode.load(Ordering::Acquire);
        if p.is_null() {
            return None;
        }
        // SAFETY: as in `inode`; try_get refuses an evicted inode.
        unsafe { Erc::try_get_raw(p) }
    }
    /// Whether the dentry has no inode (a cached "does not exist").
    pub fn is_negative(&self) -> bool {
        // Acquire: pairs with the Release store in `instantiate`.
        self.inode.load(Ordering::Acquire).is_null()
    }
    /// Whether the dentry is in the hash (reachable by lookup).
    pub fn is_hashed(&self) -> bool {
        self.flags.load(Ordering::Relaxed) & HASHED != 0
    }
    /// Whether the dentry is its own parent (a file system's root).
    pub fn is_root(&self) -> bool {
        // Acquire: pairs with the Release stores of `parent` in `instantiate`/`set_location`.
        !self.is_negative() && self.parent.load(Ordering::Acquire).is_null()
    }
    /// Unlinked: neither in the cache nor a root (getcwd reports ENOENT).
    pub fn is_unlinked(&self) -> bool {
        !self.is_hashed() && !self.is_root()
    }
    /// Whether something is mounted on the dentry.
    pub fn is_mounted(&self) -> bool {
        self.flags.load(Ordering::Acquire) & MOUNTED != 0
    }
    pub(crate) fn set_mounted(&self, on: bool) {
        if on {
            // Release: pairs with the Acquire in `is_mounted`; the mount table is published first.
            self.flags.fetch_or(MOUNTED, Ordering::Release);
        } else {
            self.flags.fetch_and(!MOUNTED, Ordering::Release);
        }
    }
    /// The current name (a copy).
    pub fn name(&self) -> Vec<u8> {
        let g = scalevfs_primitives::epoch::pin();
        self.with_name(&g, |n| n.to_vec())
    }
    fn with_name<R>(&self, g: &Guard, f: impl FnOnce(&[u8]) -> R) -> R {
        // Acquire: pairs with the Release store in d_move.
        let n = self.name.load(Ordering::Acquire, g);
        // SAFETY: names are retired through the epoch after being replaced; `g` is pinned.
        f(name_bytes(unsafe { n.deref() }))
    }
    /// The parent (uncounted; valid under the epoch or while this dentry is referenced).
    /// The parent directory's inode number, read as Linux's `parent_ino` reads it: under
    /// the epoch, without taking a count (which would write the parent's line, shared by
    /// every directory in it). A concurrent rename may give the old parent's number, as on
    /// Linux. `None` for a root.
    pub fn parent_ino(&self) -> Option<u64> {
        let _g = scalevfs_primitives::epoch::pin();
        let p = self.parent_ptr();
        if p.is_null() {
            return None;
        }
        // SAFETY: pinned: `p` was our parent, which our own reference kept alive until a
        // concurrent rename dropped it, and dentries are freed through the epoch, so its
        // memory (and its inode's, see `inode`) outlives the pin.
        unsafe { &*p }.inode().map(|i| i.ino)
    }
    /// The parent, as a raw pointer (for identity comparisons; not a reference).
    pub fn parent_ptr(&self) -> *const Dentry {
        // Acquire: pairs with the Release stores in `instantiate` and `set_location`.
        self.parent.load(Ordering::Acquire)
    }
    /// The reference count (racy snapshot; per-CPU counts included).
    pub fn count(&self) -> u32 {
        self.count.count(self.arena())
    }
    /// The dcache's per-CPU counters (`None`: atomic counts only).
    #[inline]
    fn arena(&self) -> Option<&SlotArena> {
        self.dcache().pcpu.as_deref()
    }
}

mod count;
mod dcache;
mod lru;
mod name;
#[cfg(test)]
mod percpu_tests;
#[cfg(test)]
pub(crate) mod tests;

pub(crate) use count::put_if_last;
pub use count::DentryRef;
use count::*;
pub use dcache::{DPathError, Dcache, PATH_MAX};
pub use lru::Lru;
use name::*;
