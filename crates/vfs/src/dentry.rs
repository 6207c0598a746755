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
//! `count` is a [`DRef`]: a `LockRef` (scalable: get/put by cmpxchg while the count is above
//! one) or a `LegacyRef` (every change under the lock). Its lock is the dentry's `d_lock`; it
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
//! `d_move` runs under the rename lock (a sequence read/write lock) held for writing, with the
//! moved dentry's `d_lock`: it unhashes the old key, changes `parent`, `parent_id`, `name`,
//! and hashes the new key. rcu-walk samples the rename sequence before it starts and
//! re-checks it after taking its reference on the final dentry; d_path runs as a reader
//! (optimistic, then the shared lock; legacy: the exclusive lock).
//!
//! ## Lock order
//! rename lock (write) -> `d_lock` (moved dentry, then target: by address) -> hash bucket /
//! LRU shard (leaves). A parent's `d_lock` is never taken while a child's is held: killing a
//! child drops its lock before putting the parent.
//!
//! ## Orderings
//! `inode` is published once (negative -> positive) with a Release store after `parent`, and
//! read with Acquire (pairs). `name` is an epoch pointer replaced with Release and loaded with
//! Acquire. `flags` and `lru` are changed under `d_lock`; lock-free readers read `flags` as a
//! hint (Relaxed) only where the result is re-validated (rcu-walk's final get + sequence).

use crate::erc::{Erc, ErcInner};
use crate::inode::{Inode, InodeRef, SuperBlock};
use crate::prims::{DRef, DRefGuard, RenameLock};
use crate::rcuhash::{hash_name, RcuHash};
use crossbeam_epoch::{Atomic, Guard, Owned, Pointer, Shared};
use crossbeam_utils::CachePadded;
use parking_lot::Mutex;
use scalevfs_primitives::percpu::PerCpuCounter;
use scalevfs_primitives::Locking;
use std::cell::Cell;
use std::mem::MaybeUninit;
use std::ptr;
use std::sync::atomic::{AtomicPtr, AtomicU32, AtomicU64, AtomicU8, Ordering};

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
    /// One allocation: crossbeam's length-prefixed array, so a name costs its length plus a
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
                .load(Ordering::Relaxed, crossbeam_epoch::unprotected());
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
        let _g = crossbeam_epoch::pin();
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
        let g = crossbeam_epoch::pin();
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
        let _g = crossbeam_epoch::pin();
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
    /// The reference count (racy snapshot).
    pub fn count(&self) -> u32 {
        self.count.count()
    }
}

/// A counted dentry reference (`dget` on clone, `dput` on drop).
pub struct DentryRef {
    ptr: ptr::NonNull<Dentry>,
}

// SAFETY: a counted reference to a Sync object.
unsafe impl Send for DentryRef {}
// SAFETY: as above.
unsafe impl Sync for DentryRef {}

impl std::ops::Deref for DentryRef {
    type Target = Dentry;
    fn deref(&self) -> &Dentry {
        // SAFETY: we hold a count, so the dentry is not freed.
        unsafe { self.ptr.as_ref() }
    }
}

impl Clone for DentryRef {
    fn clone(&self) -> Self {
        self.count.get();
        DentryRef { ptr: self.ptr }
    }
}

impl Drop for DentryRef {
    fn drop(&mut self) {
        dput(self.ptr.as_ptr());
    }
}

impl PartialEq for DentryRef {
    fn eq(&self, o: &Self) -> bool {
        self.ptr == o.ptr
    }
}
impl Eq for DentryRef {}

impl DentryRef {
    /// The dentry's address (identity only).
    pub fn as_ptr(&self) -> *const Dentry {
        self.ptr.as_ptr()
    }
    /// Gives up the reference as a raw pointer that carries its count.
    pub(crate) fn into_raw(d: DentryRef) -> *const Dentry {
        let p = d.as_ptr();
        std::mem::forget(d);
        p
    }
    /// Takes back a count given away by [`into_raw`](Self::into_raw).
    ///
    /// # Safety
    /// `p` must come from `into_raw`, and its count must be taken back once.
    pub(crate) unsafe fn from_raw(p: *const Dentry) -> DentryRef {
        DentryRef {
            // SAFETY: from `into_raw`, so non-null.
            ptr: unsafe { ptr::NonNull::new_unchecked(p as *mut Dentry) },
        }
    }
    /// A new counted reference to a dentry someone else holds a count of.
    ///
    /// # Safety
    /// A count of `p` must be held for the duration of the call.
    pub(crate) unsafe fn from_borrowed(p: *const Dentry) -> DentryRef {
        // SAFETY: a held count keeps it allocated and alive (not dead).
        unsafe { (*p).count.get() };
        // SAFETY: the count we just took.
        unsafe { DentryRef::from_raw(p) }
    }
    /// Takes a reference to `d` unless it is dead.
    ///
    /// # Safety
    /// `d` must be allocated: referenced by the caller, or found in the cache by a caller
    /// that is still pinned.
    pub unsafe fn try_get(d: *const Dentry) -> Option<DentryRef> {
        // SAFETY: allocated per the contract.
        if unsafe { (*d).count.get_not_dead() } {
            Some(DentryRef {
                // SAFETY: non-null (it was dereferenced).
                ptr: unsafe { ptr::NonNull::new_unchecked(d as *mut Dentry) },
            })
        } else {
            None
        }
    }
    /// A counted reference to the parent (`dget_parent`); `None` for a root or negative.
    pub fn parent(&self) -> Option<DentryRef> {
        loop {
            let _g = crossbeam_epoch::pin();
            // Acquire: pairs with the Release stores in `instantiate` and `set_location`.
            let p = self.parent.load(Ordering::Acquire);
            if p.is_null() {
                return None;
            }
            // SAFETY: pinned; `p` was our parent, which our reference kept alive until a
            // concurrent rename dropped it, and then the epoch keeps its memory.
            if let Some(r) = unsafe { DentryRef::try_get(p) } {
                if self.parent.load(Ordering::Acquire) == p {
                    return Some(r);
                }
            }
        }
    }
}

/// dput: drops one reference; caches the dentry (LRU) or kills it at zero.
fn dput(mut d: *mut Dentry) {
    loop {
        // SAFETY: the caller owns a reference to `d`, so it is allocated.
        let dd = unsafe { &*d };
        let Some(g) = dd.count.put_or_lock() else {
            return;
        };
        match put_last(d, g) {
            Some(p) => d = p,
            None => return,
        }
    }
}

/// Drops the caller's count of `d` only if it is the last one, and then at once (under
/// `d_lock`), so that no `try_get` can take a count in between; `false`, with nothing
/// done, while someone else holds one. For a mount giving back its root at unmount while
/// a walker may still be counting it on its way out (see `mount.rs`).
///
/// # Safety
/// The caller owns a count of `d`.
pub(crate) unsafe fn put_if_last(d: *const Dentry) -> bool {
    // SAFETY: the caller's count keeps it allocated.
    let g = unsafe { &*d }.count.lock();
    if g.count() != 1 {
        return false;
    }
    if let Some(p) = put_last(d as *mut Dentry, g) {
        dput(p);
    }
    true
}

/// The last count of `d` goes (its `d_lock` held, count 1): caches it on the LRU if hashed,
/// else kills it. Returns the parent whose count the caller must now drop.
fn put_last(d: *mut Dentry, mut g: DRefGuard<'_>) -> Option<*mut Dentry> {
    // SAFETY: we hold its lock, so it is allocated.
    let dd = unsafe { &*d };
    {
        debug_assert!(!g.is_dead() && g.count() == 1);
        g.set_count(0);
        let flags = dd.flags.load(Ordering::Relaxed);
        if flags & HASHED != 0 {
            let dc = dd.dcache();
            let mut over = None;
            if flags & ON_LRU == 0 {
                let (node, shard_over) = dc.lru.add(d as usize);
                dd.lru.store(node, Ordering::Relaxed);
                dd.flags.fetch_or(ON_LRU, Ordering::Relaxed);
                over = shard_over;
            } else if flags & REFERENCED == 0 {
                dd.flags.fetch_or(REFERENCED, Ordering::Relaxed);
            }
            drop(g);
            if let Some(shard) = over {
                dc.shrink_shard(shard, 64);
            }
            return None;
        }
        kill(d, g)
    }
}

/// Kills `d` (count 0, `d_lock` held): unhash, off the LRU, dead; drops its inode; retires its
/// memory; returns the parent whose reference the caller must now drop.
///
/// `dp` is a raw pointer, not a `&Dentry`: the memory is retired (and may be freed) through
/// it, and a pointer derived from a shared reference may not free its allocation (Miri, Tree
/// Borrows: "deallocation through a Frozen tag"); it must keep the `Box`'s provenance.
fn kill(dp: *mut Dentry, mut g: DRefGuard<'_>) -> Option<*mut Dentry> {
    // SAFETY: the caller holds its `d_lock` (`g`), so it is allocated; `d` is used only
    // before the memory is retired below.
    let d = unsafe { &*dp };
    let dc = d.dcache();
    let flags = d.flags.load(Ordering::Relaxed);
    if flags & HASHED != 0 {
        dc.unhash_locked(d);
    }
    if flags & ON_LRU != 0 {
        dc.lru
            .remove(d.lru.load(Ordering::Relaxed), d as *const _ as usize);
    }
    d.flags
        .fetch_and(!(HASHED | ON_LRU | REFERENCED), Ordering::Relaxed);
    g.mark_dead();
    drop(g);
    dc.count_dentry(-1);
    // The dentry is dead: nobody else can reach its inode count or parent count now.
    // Acquire: pair with the Release stores in `instantiate`/`set_location` (the killer may
    // not be the thread that published them).
    let ip = d.inode.load(Ordering::Acquire);
    let parent = d.parent.load(Ordering::Acquire);
    // SAFETY: the dentry is unhashed, off the LRU and dead: no new reader can find it, and the
    // pinned ones unpin before it is freed (its drop frees memory only).
    unsafe { crate::retire::retire_box(dp) };
    if !ip.is_null() {
        // SAFETY: the dentry owned one count of its inode (published by `instantiate` or at
        // allocation); we give it back. The pointer stays in `inode` for pinned readers.
        let i = unsafe { erc_from_owned(ip) };
        i.sb().dentries.add(-1);
        drop(i);
    }
    if parent.is_null() {
        None
    } else {
        Some(parent)
    }
}

/// Rebuilds the owned `InodeRef` a dentry stored as a raw pointer.
///
/// # Safety
/// `p` must carry a count owned by the caller (from `Erc::into_raw`).
unsafe fn erc_from_owned(p: *mut ErcInner<Inode>) -> InodeRef {
    // SAFETY: per the contract, we adopt the count.
    unsafe { Erc::from_raw(p) }
}

/// A byte of a name buffer. An `AtomicU8` (same layout as `u8`) and not a `u8` because
/// crossbeam-epoch can hand out the fresh buffer only through a shared reference: its
/// `DerefMut` for `[MaybeUninit<T>]` derives the `&mut` slice from a `&` to the array
/// header, and writing through that is undefined behaviour (Miri, Tree Borrows: "write
/// access through a Frozen tag"). The interior mutability of `AtomicU8` makes the bytes
/// writable through the shared reference; once filled they are never written again.
type NameByte = MaybeUninit<AtomicU8>;

/// A name buffer: one epoch-managed allocation holding the length and the bytes.
fn new_name(name: &[u8]) -> Owned<[NameByte]> {
    let o = Owned::<[NameByte]>::init(name.len());
    for (d, s) in o.iter().zip(name) {
        // SAFETY: `o` is ours alone (not yet published), so nothing reads the byte while it
        // is written; `AtomicU8` is an `UnsafeCell`, so writing through a pointer derived
        // from the shared reference is allowed; the pointer is valid and aligned (`u8`).
        unsafe { d.as_ptr().cast_mut().write(AtomicU8::new(*s)) };
    }
    o
}

/// The bytes of a name buffer made by [`new_name`].
fn name_bytes(n: &[NameByte]) -> &[u8] {
    // SAFETY: `new_name` initialized every byte, `MaybeUninit<AtomicU8>` has `u8`'s layout,
    // and a published buffer is never written again, so viewing it as plain bytes for the
    // lifetime of `n` races with nothing.
    unsafe { &*(n as *const [NameByte] as *const [u8]) }
}

/// A dentry's name buffer, referenced by its hash node instead of copied.
///
/// Valid for as long as the node is reachable: the name is retired (through the epoch) only
/// after the node has been unlinked: `d_move` unhashes before it replaces the name, `kill`
/// unhashes before it retires the dentry (which owns the name). A lookup that still walks
/// an unlinked node is pinned, so the retired name outlives it too.
#[derive(Copy, Clone)]
/// A thin pointer (the buffer holds its length), so a hash node stays 40 bytes.
struct NameRef(usize);

// SAFETY: a read-only view of an epoch-managed buffer (see the type docs).
unsafe impl Send for NameRef {}

impl NameRef {
    /// # Safety
    /// The node holding this name must be reachable, or the caller pinned while it was.
    unsafe fn get<'a>(self) -> &'a [u8] {
        // SAFETY: per the contract; `self.0` came from `Shared::into_usize` of a name buffer.
        name_bytes(unsafe { Shared::<[NameByte]>::from_usize(self.0).deref() })
    }
}

/// Per-CPU LRU lists of unused dentries (see the module docs).
pub struct Lru {
    shards: Box<[CachePadded<Mutex<LruShard>>]>,
    limit_per_shard: usize,
}

#[derive(Default)]
struct LruShard {
    slots: Vec<usize>,
    free: Vec<u32>,
    len: usize,
    /// Round-robin scan position of the shrinker.
    hand: usize,
}

impl Lru {
    fn new(nshards: usize, max_unused: usize) -> Lru {
        Lru {
            shards: (0..nshards)
                .map(|_| CachePadded::new(Mutex::new(LruShard::default())))
                .collect(),
            limit_per_shard: (max_unused / nshards).max(16),
        }
    }
    /// Adds `d` to the current CPU's shard; returns its node and the shard if it is over its
    /// limit (the caller shrinks it after dropping `d_lock`).
    fn add(&self, d: usize) -> (u64, Option<usize>) {
        let s = scalevfs_primitives::cpu::current_shard(self.shards.len());
        let mut sh = self.shards[s].lock();
        let idx = match sh.free.pop() {
            Some(i) => {
                sh.slots[i as usize] = d;
                i
            }
            None => {
                sh.slots.push(d);
                sh.slots.len() as u32 - 1
            }
        };
        sh.len += 1;
        let over = (sh.len > self.limit_per_shard).then_some(s);
        (((s as u64) << 32) | idx as u64, over)
    }
    fn remove(&self, node: u64, d: usize) {
        let (s, idx) = ((node >> 32) as usize, (node & 0xffff_ffff) as usize);
        let mut sh = self.shards[s].lock();
        if sh.slots.get(idx) == Some(&d) {
            sh.slots[idx] = 0;
            sh.free.push(idx as u32);
            sh.len -= 1;
        }
    }
    /// Number of dentries on the LRU.
    pub fn len(&self) -> usize {
        self.shards.iter().map(|s| s.lock().len).sum()
    }
    /// Whether the LRU is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

thread_local! {
    static IN_SHRINK: Cell<bool> = const { Cell::new(false) };
}

/// The dentry cache: hash, LRU, rename lock.
pub struct Dcache {
    /// Keyed by (parent id, the dentry's own name buffer): the node shares the name rather
    /// than copying it (see [`NameRef`]).
    hash: RcuHash<(u64, NameRef), usize>,
    lru: Lru,
    /// The rename lock: written by d_move and mount changes, read by path walks and `d_path`.
    pub rename_lock: RenameLock,
    locking: Locking,
    /// Live dentries (diagnostics), one counter per CPU so that allocation and kill do not
    /// share a cache line (Linux's per-cpu `nr_dentry`).
    nr_dentry: PerCpuCounter,
}

// SAFETY: the hash and LRU hold dentry addresses as integers; access follows the module rules.
unsafe impl Send for Dcache {}
// SAFETY: as above.
unsafe impl Sync for Dcache {}

/// Per-thread id blocks, so dentry allocation does not share one counter cache line.
fn next_dentry_id() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    thread_local! {
        static BLOCK: Cell<(u64, u64)> = const { Cell::new((0, 0)) };
    }
    crate::prims::next_batched_id(&NEXT, &BLOCK)
}

impl Dcache {
    /// A dcache of `2^hash_bits` buckets that keeps at most `max_unused` unused dentries.
    pub fn new(locking: Locking, hash_bits: u32, max_unused: usize) -> Dcache {
        let shards = match locking {
            Locking::Legacy => 1,
            Locking::Scalable => scalevfs_primitives::cpu::num_cpus().max(1),
        };
        Dcache {
            hash: RcuHash::new(hash_bits),
            lru: Lru::new(shards, max_unused),
            rename_lock: RenameLock::new(locking),
            locking,
            nr_dentry: PerCpuCounter::new(locking == Locking::Scalable),
        }
    }

    /// The design it was built with.
    pub fn locking(&self) -> Locking {
        self.locking
    }

    /// Live dentries (including unused cached ones).
    pub fn nr_dentry(&self) -> usize {
        self.nr_dentry.sum().max(0) as usize
    }

    fn count_dentry(&self, delta: isize) {
        self.nr_dentry.add(delta);
    }
    /// Unused dentries on the LRU.
    pub fn nr_unused(&self) -> usize {
        self.lru.len()
    }

    fn alloc(&self, parent_id: u64, name: &[u8], inode: Option<InodeRef>) -> Box<Dentry> {
        self.count_dentry(1);
        if let Some(i) = &inode {
            i.sb().dentries.add(1);
        }
        Box::new(Dentry {
            count: DRef::new(self.locking, 1),
            id: next_dentry_id(),
            flags: AtomicU32::new(0),
            parent_id: AtomicU64::new(parent_id),
            parent: AtomicPtr::new(ptr::null_mut()),
            name: Atomic::from(new_name(name)),
            inode: AtomicPtr::new(match inode {
                Some(i) => Erc::into_raw(i) as *mut _,
                None => ptr::null_mut(),
            }),
            lru: AtomicU64::new(0),
            dcache: self,
        })
    }

    /// A root dentry (not hashed) for a new mount.
    pub fn alloc_root(&self, inode: InodeRef) -> DentryRef {
        let b = self.alloc(0, b"/", Some(inode));
        DentryRef {
            ptr: ptr::NonNull::from(Box::leak(b)),
        }
    }

    /// rcu-walk lookup: no lock, no shared write. The result is valid while `g` is pinned.
    pub fn lookup_rcu(&self, parent: &Dentry, name: &[u8], g: &Guard) -> Option<*const Dentry> {
        let pid = parent.id;
        self.hash
            .lookup(hash_name(pid, name), g, |k| {
                // SAFETY: see `NameRef`: a node's name outlives the node for pinned readers.
                k.0 == pid && unsafe { k.1.get() } == name
            })
            .map(|p| p as *const Dentry)
    }

    /// Looks up a cached child and takes a reference (`d_lookup`).
    pub fn lookup(&self, parent: &Dentry, name: &[u8]) -> Option<DentryRef> {
        let g = crossbeam_epoch::pin();
        let p = self.lookup_rcu(parent, name, &g)?;
        // SAFETY: found in the cache while pinned.
        unsafe { DentryRef::try_get(p) }
    }

    /// Adds a child of `parent` to the cache (positive if `inode` is given) and returns it;
    /// if another thread cached the name first, returns that dentry instead. Call with the
    /// parent directory's `rwsem` held (shared or exclusive).
    pub fn add(&self, parent: &DentryRef, name: &[u8], inode: Option<InodeRef>) -> DentryRef {
        let pid = parent.id;
        let h = hash_name(pid, name);
        let positive = inode.is_some();
        let b = self.alloc(pid, name, inode);
        if positive {
            parent.count.get();
            b.parent.store(parent.as_ptr() as *mut _, Ordering::Relaxed);
        }
        b.flags.store(HASHED, Ordering::Relaxed);
        let name_ref = NameRef(
            // SAFETY: only the pointer is read; the name is not shared yet.
            unsafe {
                b.name
                    .load(Ordering::Relaxed, crossbeam_epoch::unprotected())
            }
            .into_usize(),
        );
        let raw = Box::into_raw(b);
        loop {
            match self
                .hash
                .insert_unique(h, (pid, name_ref), raw as usize, |k| {
                    // SAFETY: nodes in the chain (bucket locked) have live names.
                    k.0 == pid && unsafe { k.1.get() } == name
                }) {
                Ok(()) => {
                    return DentryRef {
                        // SAFETY: from Box::into_raw.
                        ptr: unsafe { ptr::NonNull::new_unchecked(raw) },
                    };
                }
                Err(existing) => {
                    let _g = crossbeam_epoch::pin();
                    // SAFETY: found in the cache under the bucket lock just now, and pinned.
                    if let Some(r) = unsafe { DentryRef::try_get(existing as *const Dentry) } {
                        // SAFETY: never published; we own it.
                        let mut mine = unsafe { Box::from_raw(raw) };
                        mine.flags.store(0, Ordering::Relaxed);
                        let ip = *mine.inode.get_mut();
                        let pp = *mine.parent.get_mut();
                        *mine.inode.get_mut() = ptr::null_mut();
                        drop(mine);
                        self.count_dentry(-1);
                        if !ip.is_null() {
                            // SAFETY: the count given to the unpublished dentry comes back.
                            let i = unsafe { erc_from_owned(ip) };
                            i.sb().dentries.add(-1);
                            drop(i);
                        }
                        if !pp.is_null() {
                            dput(pp);
                        }
                        return r;
                    }
                    // A dying dentry is being unhashed: retry once it is gone.
                    std::thread::yield_now();
                }
            }
        }
    }

    /// Makes a negative dentry positive (`d_instantiate`). Call with the parent's `rwsem`
    /// held exclusively; `parent` must be the dentry's parent.
    pub fn instantiate(&self, d: &DentryRef, parent: &DentryRef, inode: InodeRef) {
        debug_assert!(d.is_negative());
        inode.sb().dentries.add(1);
        parent.count.get();
        // Release: pairs with the Acquire loads of `parent` (d_path, dget_parent, kill).
        d.parent.store(parent.as_ptr() as *mut _, Ordering::Release);
        let p = Erc::into_raw(inode) as *mut _;
        // Release: pairs with the Acquire in `Dentry::inode`; parent is visible first.
        d.inode.store(p, Ordering::Release);
    }

    fn unhash_locked(&self, d: &Dentry) {
        self.remove_from_hash_locked(d);
        d.flags.fetch_and(!HASHED, Ordering::Relaxed);
    }

    /// Takes `d` out of the hash table but leaves its `HASHED` flag: a dentry being moved
    /// (Linux's `___d_drop` in `__d_move`) must never look unlinked to `getcwd` or `fstat`
    /// in the middle of a rename. Call with `d`'s lock held.
    fn remove_from_hash_locked(&self, d: &Dentry) {
        let pid = d.parent_id.load(Ordering::Relaxed);
        let g = crossbeam_epoch::pin();
        let me = d as *const Dentry as usize;
        d.with_name(&g, |name| {
            self.hash
                .remove(hash_name(pid, name), |k, v| *v == me && k.0 == pid);
        });
    }

    /// Removes `d` from the cache (`d_drop`): lookups no longer find it; it is killed when
    /// its last reference goes.
    pub fn drop_dentry(&self, d: &Dentry) {
        let _g = d.count.lock();
        if d.flags.load(Ordering::Relaxed) & HASHED != 0 {
            self.unhash_locked(d);
        }
    }

    /// Moves `d` to `(new_parent, new_name)` (`d_move`); `target` (the dentry at the new
    /// name, if cached) is dropped from the cache. With `exchange`, `target` (positive) takes
    /// `d`'s old place instead. Call with the rename lock held for writing and both parent
    /// directories' `rwsem` held.
    pub fn d_move(
        &self,
        d: &DentryRef,
        new_parent: &DentryRef,
        new_name: &[u8],
        target: Option<&DentryRef>,
        exchange: bool,
    ) {
        let old_parent = d.parent(); // counted
        let old_name = d.name();
        if let Some(t) = target {
            self.drop_dentry(t);
        }
        self.set_location(d, new_parent, new_name);
        if exchange {
            let t = target.expect("exchange needs a target");
            if let Some(op) = &old_parent {
                self.set_location(t, op, &old_name);
            }
        }
    }

    /// Rehashes `d` at `(parent, name)`, moving its parent reference.
    fn set_location(&self, d: &DentryRef, parent: &DentryRef, name: &[u8]) {
        let old_parent;
        {
            let _l = d.count.lock();
            if d.flags.load(Ordering::Relaxed) & HASHED != 0 {
                self.remove_from_hash_locked(d);
            }
            parent.count.get();
            // Release: pairs with the Acquire loads of `parent` (d_path, dget_parent);
            // Acquire: we take over the old parent's count, published with its store.
            old_parent = d.parent.swap(parent.as_ptr() as *mut _, Ordering::AcqRel);
            d.parent_id.store(parent.id, Ordering::Relaxed);
            let g = crossbeam_epoch::pin();
            let new = new_name(name).into_shared(&g);
            let name_ref = NameRef(new.into_usize());
            // Release: pairs with the Acquire in `with_name`.
            let old = d.name.swap(new, Ordering::AcqRel, &g);
            // SAFETY: the old name is unreachable now; pinned readers keep it until they unpin.
            unsafe { crate::retire::retire_owned(old) };
            let pid = parent.id;
            let me = d.as_ptr() as usize;
            // Drop whatever negative dentry still sits at the new name (the caller dropped a
            // cached target; a racing lookup cannot add one: it needs the parent's rwsem).
            loop {
                match self
                    .hash
                    .insert_unique(hash_name(pid, name), (pid, name_ref), me, |k| {
                        // SAFETY: nodes in the chain (bucket locked) have live names.
                        k.0 == pid && unsafe { k.1.get() } == name
                    }) {
                    Ok(()) => break,
                    Err(other) => {
                        // SAFETY: found under the bucket lock while pinned; its d_lock is
                        // taken after ours, by address order it cannot be our parent's
                        // (ancestor) lock: it is a sibling at the target name.
                        let o = unsafe { &*(other as *const Dentry) };
                        let _ol = o.count.lock();
                        if o.flags.load(Ordering::Relaxed) & HASHED != 0 {
                            self.unhash_locked(o);
                        }
                    }
                }
            }
            d.flags.fetch_or(HASHED, Ordering::Relaxed);
        }
        if !old_parent.is_null() {
            dput(old_parent);
        }
    }

    /// Shrinks up to `n` entries from LRU shard `s`.
    fn shrink_shard(&self, s: usize, n: usize) -> usize {
        self.shrink_shard_of(s, n, None)
    }

    /// `shrink_shard`, or with `only`: just the positive dentries of that superblock, with
    /// no second chance (unmount: `shrink_dcache_for_umount`).
    fn shrink_shard_of(&self, s: usize, n: usize, only: Option<&SuperBlock>) -> usize {
        if IN_SHRINK.with(|f| f.replace(true)) {
            return 0;
        }
        let g = crossbeam_epoch::pin();
        let batch: Vec<usize> = {
            let mut sh = self.lru.shards[s].lock();
            let len = sh.slots.len();
            let mut v = Vec::with_capacity(n.min(len));
            let mut scanned = 0;
            while v.len() < n && scanned < len {
                let i = sh.hand % len;
                sh.hand = sh.hand.wrapping_add(1);
                scanned += 1;
                if sh.slots[i] != 0 {
                    v.push(sh.slots[i]);
                }
            }
            v
        };
        let mut freed = 0;
        for p in batch {
            // SAFETY: we saw `p` on the LRU while pinned; a dentry leaves the LRU before its
            // memory is retired, so it is still allocated.
            let d = unsafe { &*(p as *const Dentry) };
            let g2 = d.count.lock();
            if g2.is_dead() {
                continue;
            }
            if only.is_some_and(|sb| !d.inode().is_some_and(|i| std::ptr::eq(i.sb(), sb))) {
                continue;
            }
            let flags = d.flags.load(Ordering::Relaxed);
            if flags & ON_LRU == 0 {
                continue;
            }
            if g2.count() > 0 {
                self.lru.remove(d.lru.load(Ordering::Relaxed), p);
                d.flags.fetch_and(!(ON_LRU | REFERENCED), Ordering::Relaxed);
                continue;
            }
            if flags & REFERENCED != 0 && only.is_none() {
                d.flags.fetch_and(!REFERENCED, Ordering::Relaxed);
                continue;
            }
            freed += 1;
            if let Some(parent) = kill(p as *mut Dentry, g2) {
                dput(parent);
            }
        }
        drop(g);
        IN_SHRINK.with(|f| f.set(false));
        freed
    }

    /// Frees up to `n` unused dentries (memory pressure / `drop_caches`); returns how many.
    pub fn shrink(&self, n: usize) -> usize {
        let mut freed = 0;
        for s in 0..self.lru.shards.len() {
            if freed >= n {
                break;
            }
            freed += self.shrink_shard(s, n - freed);
        }
        freed
    }

    /// Frees every unused positive dentry of `sb` (repeats, since freeing a child may make
    /// its parent unused). Other superblocks' dentries keep their places.
    pub fn shrink_sb(&self, sb: &SuperBlock) {
        loop {
            let any: usize = (0..self.lru.shards.len())
                .map(|s| self.shrink_shard_of(s, usize::MAX / 4, Some(sb)))
                .sum();
            if any == 0 {
                return;
            }
        }
    }

    /// Frees every unused dentry (repeats, since freeing a child may make its parent unused).
    pub fn shrink_all(&self) {
        loop {
            let mut any = 0;
            for s in 0..self.lru.shards.len() {
                // Two passes per shard: the first may only clear REFERENCED.
                any += self.shrink_shard(s, usize::MAX / 4);
                any += self.shrink_shard(s, usize::MAX / 4);
            }
            if any == 0 {
                return;
            }
        }
    }

    /// Builds the path of `d` (in mount `mnt`) relative to `root` (in `root_mnt`), like
    /// d_path: reads the tree as a rename-lock reader. `up` maps a mount root to its
    /// mountpoint and parent mount (`None` at the top). Returns `None` if `d` is not below
    /// `root` (the caller reports "unreachable").
    pub fn d_path(
        &self,
        mnt: usize,
        d: &Dentry,
        root_mnt: usize,
        root: &Dentry,
        up: &dyn Fn(usize, *const Dentry) -> Option<(usize, *const Dentry)>,
    ) -> Option<Vec<u8>> {
        let mut buf = vec![0u8; PATH_MAX];
        loop {
            match self.d_path_prepend(mnt, d, root_mnt, root, up, &mut buf) {
                Ok(start) => return Some(buf.split_off(start)),
                Err(DPathError::Unreachable { .. }) => return None,
                // Deeper than PATH_MAX (getcwd says ENAMETOOLONG/ERANGE; here: grow).
                Err(DPathError::TooLong) => buf = vec![0u8; buf.len() * 4],
            }
        }
    }

    /// [`d_path`](Self::d_path) written at the *end* of `buf`, as Linux's `prepend_path`
    /// fills a page from the end: returns where the path starts. Allocates nothing, so
    /// readers on different CPUs (getcwd) share no allocator state either.
    /// `TooLong` if it does not fit.
    pub fn d_path_prepend(
        &self,
        mnt: usize,
        d: &Dentry,
        root_mnt: usize,
        root: &Dentry,
        up: &dyn Fn(usize, *const Dentry) -> Option<(usize, *const Dentry)>,
        buf: &mut [u8],
    ) -> Result<usize, DPathError> {
        // Every pass starts over, so a torn optimistic pass that the rename lock rejects
        // leaves nothing behind; `f` never panics on torn data (bounded, checked slices).
        self.rename_lock.read_consistent(|| {
            let g = crossbeam_epoch::pin();
            let mut pos = buf.len();
            let (mut m, mut cur) = (mnt, d as *const Dentry);
            let root_p = root as *const Dentry;
            let mut steps = 0;
            loop {
                steps += 1;
                if steps > 8192 {
                    // Torn read during a rename (a cycle): the lock makes the reader retry.
                    return Err(DPathError::Unreachable { start: buf.len() });
                }
                if cur == root_p && m == root_mnt {
                    break;
                }
                // SAFETY: `cur` is `d` (kept allocated by the caller) or an ancestor
                // reached through parent pointers while pinned; ancestors are retired
                // only through the epoch.
                let c = unsafe { &*cur };
                let parent = c.parent_ptr();
                if parent.is_null() {
                    // A mount root: continue at the mountpoint.
                    match up(m, cur) {
                        Some((pm, mp)) => {
                            m = pm;
                            cur = mp;
                            continue;
                        }
                        None => {
                            if pos == buf.len() {
                                pos = pos.checked_sub(1).ok_or(DPathError::TooLong)?;
                                buf[pos] = b'/';
                            }
                            return Err(DPathError::Unreachable { start: pos });
                        }
                    }
                }
                let fits = c.with_name(&g, |n| {
                    let Some(at) = pos.checked_sub(n.len() + 1) else {
                        return false;
                    };
                    buf[at] = b'/';
                    buf[at + 1..pos].copy_from_slice(n);
                    pos = at;
                    true
                });
                if !fits {
                    return Err(DPathError::TooLong);
                }
                cur = parent;
            }
            if pos == buf.len() {
                pos = pos.checked_sub(1).ok_or(DPathError::TooLong)?;
                buf[pos] = b'/';
            }
            Ok(pos)
        })
    }
}

/// Why [`Dcache::d_path_prepend`] gave no path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DPathError {
    /// Not below the root: the path from the top that was reached (a detached mount's
    /// root, or the global root when the caller's root is elsewhere) starts at `start`
    /// of the buffer, as Linux's `prepend_path` leaves it for getcwd's "(unreachable)".
    Unreachable {
        /// Where the reached path starts in the buffer.
        start: usize,
    },
    /// Longer than the buffer.
    TooLong,
}

/// Linux's `PATH_MAX`, the buffer [`Dcache::d_path`] starts with.
pub const PATH_MAX: usize = 4096;

#[cfg(test)]
mod tests {
    use crate::core::{CoreOptions, VfsCore};
    use crate::namei::Ctx;
    use crate::perm::Cred;
    use crate::testfs::TestFs;
    use crate::{Errno, Path};
    use scalevfs_primitives::Locking;
    use std::sync::Arc;

    /// Regression guard for memory per file (bench `memory_per_file`): the per-file objects
    /// stay at the sizes measured when they were shrunk. Growing one is a deliberate choice:
    /// raise the bound here and say what it buys.
    #[test]
    fn per_file_objects_stay_small() {
        use std::mem::size_of;
        assert!(
            size_of::<super::Dentry>() <= 80,
            "{}",
            size_of::<super::Dentry>()
        );
        // 168: the creation time (statx's btime, 8 bytes) made it grow from 160.
        let inode = size_of::<crate::erc::ErcInner<crate::Inode>>();
        assert!(inode <= 168, "inode block: {inode}");
        // A name buffer is its length word plus the bytes: one allocation.
        let n = super::new_name(b"f0000000");
        assert_eq!(super::name_bytes(&n), b"f0000000");
    }

    fn core(locking: Locking) -> Arc<VfsCore> {
        VfsCore::new(
            CoreOptions {
                locking,
                ..CoreOptions::default()
            },
            Arc::new(TestFs::default()),
        )
        .unwrap()
    }

    fn look(c: &VfsCore, path: &str) -> Result<Path, Errno> {
        let (root, cred) = (c.root(), Cred::root());
        let ctx = Ctx::new(&cred, &root);
        c.lookup(&ctx, &root, path.as_bytes(), true, false)
    }

    #[test]
    fn negative_dentries_are_cached_and_instantiated_in_place() {
        for locking in [Locking::Scalable, Locking::Legacy] {
            let c = core(locking);
            let root = c.root();
            assert_eq!(look(&c, "/x").err(), Some(Errno::ENOENT));
            let neg = c
                .dcache
                .lookup(&root.dentry, b"x")
                .expect("negative cached");
            assert!(neg.is_negative());
            let (cred, r2) = (Cred::root(), c.root());
            let ctx = Ctx::new(&cred, &r2);
            c.mkdir(&ctx, &root, b"/x", 0o755, 0).unwrap();
            assert!(!neg.is_negative(), "the same dentry became positive");
            assert!(look(&c, "/x").unwrap().dentry == neg);
            drop(neg);
            c.unlink(&ctx, &root, b"/x", true).unwrap();
            assert!(c
                .dcache
                .lookup(&root.dentry, b"x")
                .is_none_or(|d| d.is_negative()));
        }
    }

    #[test]
    fn hot_dput_keeps_one_lru_entry_and_shrink_gives_a_second_chance() {
        for locking in [Locking::Scalable, Locking::Legacy] {
            let c = core(locking);
            let root = c.root();
            let (cred, r2) = (Cred::root(), c.root());
            let ctx = Ctx::new(&cred, &r2);
            c.mkdir(&ctx, &root, b"/d", 0o755, 0).unwrap();
            let base = c.dcache.nr_unused();
            for _ in 0..100 {
                drop(look(&c, "/d").unwrap());
            }
            assert_eq!(
                c.dcache.nr_unused(),
                base,
                "re-putting a dentry on the LRU is free"
            );
            // First pass clears REFERENCED, the second frees it.
            assert_eq!(c.dcache.shrink(usize::MAX), 0);
            assert!(c.dcache.shrink(usize::MAX) >= 1);
            assert!(c.dcache.lookup(&root.dentry, b"d").is_none());
            assert!(
                look(&c, "/d").is_ok(),
                "looked up again from the file system"
            );
        }
    }

    #[test]
    fn revalidating_file_systems_see_changes_behind_the_cache() {
        let fs = Arc::new(TestFs {
            changes_behind: true,
            ..TestFs::default()
        });
        let c = VfsCore::new(CoreOptions::default(), fs.clone()).unwrap();
        let root = c.root();
        let (cred, r2) = (Cred::root(), c.root());
        let ctx = Ctx::new(&cred, &r2);
        c.mkdir(&ctx, &root, b"/n", 0o755, 0).unwrap();
        assert!(look(&c, "/n").is_ok());
        fs.remove_behind(root.dentry.inode().unwrap(), b"n");
        assert_eq!(look(&c, "/n").err(), Some(Errno::ENOENT));
        // Per-open hooks: state kept in the file, released after the last close.
        let f = c
            .open(&ctx, &root, b"/f", libc::O_CREAT | libc::O_RDWR, 0o644, 0)
            .unwrap();
        assert_eq!(f.private::<u32>(), Some(&42));
        let p = c.open(&ctx, &root, b"/f", libc::O_PATH, 0, 0).unwrap();
        assert_eq!(p.private::<u32>(), None, "O_PATH does not open");
        let g = f.clone();
        drop(f);
        assert_eq!(fs.releases.load(std::sync::atomic::Ordering::Relaxed), 0);
        drop(g);
        assert_eq!(fs.opens.load(std::sync::atomic::Ordering::Relaxed), 1);
        assert_eq!(fs.releases.load(std::sync::atomic::Ordering::Relaxed), 1);
    }

    #[test]
    fn d_path_follows_renames() {
        for locking in [Locking::Scalable, Locking::Legacy] {
            let c = core(locking);
            let root = c.root();
            let (cred, r2) = (Cred::root(), c.root());
            let ctx = Ctx::new(&cred, &r2);
            for p in ["/a", "/a/b", "/c"] {
                c.mkdir(&ctx, &root, p.as_bytes(), 0o755, 0).unwrap();
            }
            let b = look(&c, "/a/b").unwrap();
            assert_eq!(c.d_path(&root, &b).unwrap(), b"/a/b");
            c.rename(&ctx, &root, b"/a", &root, b"/c/z", 0).unwrap();
            assert_eq!(c.d_path(&root, &b).unwrap(), b"/c/z/b");
            assert_eq!(c.d_path(&root, &root).unwrap(), b"/");
            assert_eq!(look(&c, "/a/b").err(), Some(Errno::ENOENT));
        }
    }
}
