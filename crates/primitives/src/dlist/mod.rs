//! Distributed lock list (dlock-list): one list and one lock per CPU (Linux's dlock-list patches).
//!
//! A superblock keeps every inode it owns on one list (`sb->s_inodes`) so that unmount,
//! drop_caches, quota and fsnotify can walk them. Before those patches, that list had one
//! spinlock (`s_inode_list_lock`), and every inode creation and eviction took it: at 32
//! threads creating inodes, 71% of the time was spent waiting for it. The patches replace it
//! with a *dlock list*: one `{lock, list}` head per CPU, cache-line padded.
//!
//! * [`DList::add`] puts the item on the list of the CPU the caller runs on
//!   ([`crate::cpu::current_shard`]; see `cpu.rs` for why the CPU and not a thread-local id)
//!   and returns a [`DListNode`] that remembers the shard and the slot: O(1).
//! * [`DList::remove`] locks the node's shard, the one it was added to, which need not be the
//!   caller's CPU any more, and re-checks that the node is still there (an iterator may have
//!   evicted it): O(1). Removing twice returns `None`.
//! * A [`Cursor`] walks shard by shard holding one shard lock at a time, and can drop and
//!   retake it mid-walk ([`Cursor::unlock`]/[`Cursor::relock`], [`Cursor::unlocked`]), as
//!   `dlock_list_unlock()`/`dlock_list_relock()` do in `evict_inodes()` and friends.
//!
//! The legacy design (one list, one lock) is the same code with one shard: [`LockedList`],
//! or [`DList::with_locking`]`(Locking::Legacy)`, which is how the VFS chooses at construction
//! at no cost to the scalable path (both designs are the one type `DList<T>`).
//!
//! ## Representation: a slab per shard, linked through indices
//!
//! Each shard is a slab (`Vec` of slots, a free list) whose live slots are also on a doubly
//! linked list threaded through slot indices, newest first. We chose this over an intrusive
//! list of nodes embedded in the items because it is safe Rust (no `unsafe`, no pinning of
//! the owner's struct) and still O(1) for add and remove; each slot carries a generation
//! bumped on removal, so the re-check in `remove` is a compare, and a stale [`DListNode`]
//! (removed twice, or already evicted) can never remove the slot's next tenant. The links
//! (rather than scanning the slab by index) keep iteration O(len), not O(peak len), and keep
//! the order of surviving nodes stable, which is what the cursor's guarantee rests on.
//! Memory: a slab does not shrink; a shard costs one slot (24 bytes + `Option<T>`, rounded to 8) per item at
//! its peak.
//!
//! ## Cursor and concurrent removal: pins
//!
//! While the cursor holds the shard lock nothing else can change the shard. Before it drops
//! the lock it *pins* the slot it will visit next (a per-slot count, so several cursors may
//! pin one slot). Removing a pinned slot takes its item out (the remover gets it, `len`
//! drops) but leaves the empty slot linked as a *zombie*, so its `next` link stays valid;
//! the last cursor to unpin it unlinks and frees it. On relock the cursor resumes at the
//! pinned slot (skipping it if it is a zombie). New items are added at the head of a shard,
//! never behind the cursor's position within it. Hence, for a walk:
//!
//! * every node that is on the list for the whole walk is yielded exactly once;
//! * a node added during the walk is yielded at most once (if it went to a shard not yet
//!   reached); a node removed during the walk is yielded at most once (not after the walk
//!   has seen its removal);
//! * no node is yielded twice. (A value removed and re-added is a new node, and may be.)
//!
//! ## Locking
//!
//! * `DList::shards[i]` (a `CachePadded` lock around the shard's slab) protects all of that
//!   shard: slots, links, generations, pins, the free list and its `len`.
//! * Lock order: a shard lock is never taken while holding another shard lock: the cursor,
//!   `for_each`, `retain`, `drain`, `len` each hold at most one. A shard lock nests outside
//!   the items' own locks (as `s_inode_list_lock` nests outside `i_lock`): the closures of
//!   [`DList::for_each`] and [`DList::retain`] run under it and may take an item's lock, but
//!   must not call back into the same list. Items removed by `retain`/`drain` are dropped
//!   after the shard lock is released, so an item whose `Drop` removes something from the
//!   list cannot deadlock. Items taken out by [`Cursor::remove_current`] are the caller's.
//! * No atomics: all state is under the shard locks, whose acquire/release orders it.
//!
//! ## Why it scales
//!
//! `add` touches only the current CPU's shard: its lock and slab header (one padded cache
//! line) and its own slot array, which no other CPU writes unless a task migrated between
//! add and remove, or an iterator is walking that shard. With N CPUs, N adders proceed in parallel where the legacy
//! list serialises them; when threads outnumber CPUs, only the running ones can contend.
//! Walks cost O(shards + len) and never block more than one shard.

mod cursor;
mod slab;

#[cfg(all(test, loom))]
mod loom_tests;
#[cfg(all(test, not(loom)))]
mod tests;

pub use cursor::Cursor;
use slab::Slab;
#[cfg(all(test, not(loom)))]
use slab::Slot;

use std::fmt;
use std::ops::Deref;

use crossbeam_utils::CachePadded;

use crate::cpu;
use crate::Locking;

/// The shard lock: our spin lock, counted by lockstat under the class of the design
/// (`dlist.shard` per-CPU, `dlist.global` for the legacy single list), so a benchmark's
/// lockstat table shows the contention each design has. Hold times are a few list-pointer
/// updates, which is what a spin lock is for (the kernel's dlock-list uses spinlocks too).
type Lock<T> = crate::spinlock::SpinLock<T>;
type Guard<'a, T> = crate::spinlock::SpinLockGuard<'a, T>;

static SHARD_CLASS: crate::lockstat::LockClass = crate::lockstat::LockClass::new("dlist.shard");
static GLOBAL_CLASS: crate::lockstat::LockClass = crate::lockstat::LockClass::new("dlist.global");

#[inline]
fn lock<T>(l: &Lock<T>) -> Guard<'_, T> {
    l.lock()
}

/// "No slot": the end of a list or of the free list.
const NIL: u32 = u32::MAX;

/// The handle [`DList::add`] returns: which shard and slot the item went to, and the
/// slot's generation then. The owner stores it (e.g. in its inode) to remove the item.
///
/// Copying it is harmless: only the first `remove` with it succeeds. It must be passed to
/// the list that returned it; a node of another list is a logic error (it removes nothing
/// or some other item, never undefined behaviour).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct DListNode {
    shard: u32,
    slot: u32,
    gen: u64,
}

impl DListNode {
    /// The shard (CPU list) the item was added to.
    pub fn shard(&self) -> usize {
        self.shard as usize
    }
    /// The node as two words, for an owner that keeps it in atomics instead of a
    /// `OnceLock<DListNode>` (8 bytes smaller). The first word is never `u64::MAX` (no slot
    /// is numbered `u32::MAX`), so an owner may use that value for "no node".
    pub fn to_bits(self) -> [u64; 2] {
        [((self.shard as u64) << 32) | self.slot as u64, self.gen]
    }
    /// The node [`DListNode::to_bits`] gave. A forged node is harmless: `remove` with it
    /// removes nothing, or the item that slot currently holds in that generation.
    pub fn from_bits(bits: [u64; 2]) -> DListNode {
        DListNode {
            shard: (bits[0] >> 32) as u32,
            slot: bits[0] as u32,
            gen: bits[1],
        }
    }
}

/// One CPU's list and its lock.
struct Shard<T> {
    list: Lock<Slab<T>>,
}

/// A distributed lock list: one list + lock per CPU. See the module docs.
pub struct DList<T> {
    shards: Box<[CachePadded<Shard<T>>]>,
}

impl<T> DList<T> {
    /// One shard per CPU ([`cpu::num_cpus`]).
    pub fn new() -> Self {
        Self::with_shards(cpu::num_cpus())
    }

    /// `n` shards (at least 1: `0` is taken as 1). With 1 it is the legacy single list.
    pub fn with_shards(n: usize) -> Self {
        let n = n.clamp(1, u32::MAX as usize);
        let class = if n == 1 { &GLOBAL_CLASS } else { &SHARD_CLASS };
        let shards = (0..n)
            .map(|_| {
                CachePadded::new(Shard {
                    list: Lock::with_class(Slab::new(), class),
                })
            })
            .collect();
        DList { shards }
    }

    /// The design `locking` names: one shard per CPU (`Scalable`) or a single list and lock
    /// (`Legacy`, `sb->s_inode_list_lock`). Both are this type, so callers pay nothing for
    /// the choice.
    pub fn with_locking(locking: Locking) -> Self {
        match locking {
            Locking::Scalable => Self::new(),
            Locking::Legacy => Self::with_shards(1),
        }
    }

    /// The number of shards.
    pub fn shards(&self) -> usize {
        self.shards.len()
    }

    fn shard(&self, i: usize) -> Guard<'_, Slab<T>> {
        lock(&self.shards[i].list)
    }

    /// Adds `item` to the current CPU's list. O(1). Keep the node to remove it.
    pub fn add(&self, item: T) -> DListNode {
        let n = self.shards.len();
        // One shard: the legacy list; skip the CPU lookup.
        let shard = if n == 1 { 0 } else { cpu::current_shard(n) };
        self.add_to(shard, item)
    }

    fn add_to(&self, shard: usize, item: T) -> DListNode {
        let (slot, gen) = self.shard(shard).insert(item);
        DListNode {
            shard: shard as u32,
            slot,
            gen,
        }
    }

    /// Removes the item `node` refers to, if it is still on the list (it may have been
    /// removed already, e.g. by an evicting cursor). O(1).
    pub fn remove(&self, node: &DListNode) -> Option<T> {
        let shard = self.shards.get(node.shard as usize)?;
        // The guard is dropped here, before the caller can drop the item.
        let item = lock(&shard.list).remove(node.slot, node.gen);
        item
    }

    /// The number of items: a sum over the shards locked one at a time, so a racy snapshot
    /// unless the list is quiescent.
    pub fn len(&self) -> usize {
        (0..self.shards.len()).map(|i| self.shard(i).len).sum()
    }

    /// Whether the list is empty; like [`len`](Self::len), exact only when quiescent.
    pub fn is_empty(&self) -> bool {
        (0..self.shards.len()).all(|i| self.shard(i).len == 0)
    }

    /// A cursor at the start of the first shard. It takes no lock until first advanced.
    pub fn cursor(&self) -> Cursor<'_, T> {
        Cursor {
            list: self,
            shard: 0,
            guard: None,
            started: false,
            next: NIL,
            pinned: false,
            current: None,
        }
    }

    /// Calls `f` on every item, shard by shard, under each shard's lock. `f` must not call
    /// into this list (see the module docs on lock order).
    pub fn for_each(&self, mut f: impl FnMut(&T)) {
        for i in 0..self.shards.len() {
            let mut slab = self.shard(i);
            let mut s = slab.head;
            while s != NIL {
                let slot = slab.slot(s);
                if let Some(item) = &slot.item {
                    f(item);
                }
                s = slot.next;
            }
        }
    }

    /// Removes every item for which `f` returns false. Runs `f` under each shard's lock in
    /// turn (so `f` must not call into this list); removed items are dropped after the lock
    /// is released.
    pub fn retain(&self, mut f: impl FnMut(&T) -> bool) {
        for i in 0..self.shards.len() {
            let mut removed = Vec::new();
            self.shard(i).retain_into(&mut removed, &mut f);
            drop(removed);
        }
    }

    /// Removes and returns every item (newest first within each shard).
    pub fn drain(&self) -> Vec<T> {
        let mut out = Vec::new();
        for i in 0..self.shards.len() {
            self.shard(i).retain_into(&mut out, |_| false);
        }
        out
    }
}

impl<T> Default for DList<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> fmt::Debug for DList<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // No len: Debug must not take the locks (it may be printed under one).
        f.debug_struct("DList")
            .field("shards", &self.shards.len())
            .finish_non_exhaustive()
    }
}

/// The legacy design: one list, one lock (`sb->s_inode_list_lock` + `sb->s_inodes`).
///
/// A [`DList`] with a single shard, so both designs run the same code and differ only in
/// the number of lists; it has the whole `DList` API through `Deref`.
#[derive(Debug)]
pub struct LockedList<T>(DList<T>);

impl<T> LockedList<T> {
    /// An empty list (the legacy design: one shard).
    pub fn new() -> Self {
        LockedList(DList::with_shards(1))
    }
}

impl<T> Default for LockedList<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> Deref for LockedList<T> {
    type Target = DList<T>;
    fn deref(&self) -> &DList<T> {
        &self.0
    }
}

impl<T> From<LockedList<T>> for DList<T> {
    fn from(l: LockedList<T>) -> DList<T> {
        l.0
    }
}

#[cfg(test)]
impl<T> DList<T> {
    /// Checks each shard's structure when no cursor is pinned anywhere: links consistent,
    /// no zombies, `len` = linked live slots, every slot linked or free exactly once.
    fn check_quiescent(&self) {
        for i in 0..self.shards.len() {
            let mut slab = self.shard(i);
            let mut linked = 0;
            let (mut prev, mut s) = (NIL, slab.head);
            while s != NIL {
                let slot = slab.slot(s);
                assert_eq!(slot.prev, prev, "broken back link");
                assert_eq!(slot.pins, 0, "pin left behind");
                assert!(slot.item.is_some(), "zombie or free slot linked");
                linked += 1;
                (prev, s) = (s, slot.next);
            }
            assert_eq!(linked, slab.len);
            let mut free = 0;
            let mut s = slab.free;
            while s != NIL {
                assert!(slab.slot(s).item.is_none() && !slab.slot(s).zombie);
                free += 1;
                s = slab.slot(s).next;
            }
            assert_eq!(linked + free, slab.slots.len());
        }
    }
}
