//! Counted references ([`DentryRef`]) and what the last put does: keep the dentry
//! cached on the LRU, or kill it (see the module docs of `dentry`).

use super::*;

/// A counted dentry reference (`dget` on clone, `dput` on drop).
pub struct DentryRef {
    pub(super) ptr: ptr::NonNull<Dentry>,
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
        self.dget();
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
        unsafe { (*p).dget() };
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
        if unsafe { (*d).dget_not_dead() } {
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
            let _g = scalevfs_primitives::epoch::pin();
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

impl Dentry {
    /// `dget`: takes a reference (the caller holds one); promotes a dentry counted by
    /// another thread than last time to per-CPU counts.
    #[inline]
    pub(super) fn dget(&self) {
        if self.count.get(self.arena()) {
            self.promote();
        }
    }

    /// Takes a reference unless the dentry is dead (and promotes as [`dget`](Self::dget)).
    #[inline]
    pub(super) fn dget_not_dead(&self) -> bool {
        match self.count.get_not_dead(self.arena()) {
            None => false,
            Some(promote) => {
                if promote {
                    self.promote();
                }
                true
            }
        }
    }

    /// Switches a hashed dentry the caller holds a count of to per-CPU counts (module docs,
    /// "Per-CPU counts"), and puts it on the LRU so that the shrinker, which switches it
    /// back, visits it. An unhashed dentry stays atomic: its last put must kill it.
    #[cold]
    #[inline(never)]
    fn promote(&self) {
        let (Some(pc), Some(arena)) = (self.count.percpu(), self.arena()) else {
            return;
        };
        let dc = self.dcache();
        let g = &mut self.count.lock();
        let flags = self.flags.load(Ordering::Relaxed);
        if flags & HASHED == 0 || !pc.promote(g, arena) {
            return;
        }
        if flags & ON_LRU == 0 {
            // A shard over its limit is shrunk by the next `put_last` that adds to it: not
            // here, where the caller of `dget` may hold locks the shrinker's kills take.
            let (node, _over) = dc.lru.add(self as *const _ as usize);
            self.lru.store(node, Ordering::Relaxed);
            self.flags.fetch_or(ON_LRU, Ordering::Relaxed);
        }
    }
}

/// Switches `d` back to atomic counts if it is in per-CPU mode (`g`: its `d_lock`), so
/// that `g.count()` is exact and the last put takes `d_lock` again. Returns whether it
/// was in per-CPU mode.
pub(super) fn demote_locked(d: &Dentry, g: &mut DRefGuard<'_>) -> bool {
    match (d.count.percpu(), d.arena()) {
        (Some(pc), Some(arena)) => pc.demote(g, arena),
        _ => false,
    }
}

/// Gives a dead dentry's per-CPU slot back to the arena once a grace period has passed:
/// a thread that read the slot number before the dentry was switched back to atomic mode
/// may still be about to add to it, and must not add to the next owner's counts.
fn release_slot(d: &Dentry) {
    // The slot first: cloning the arena's `Arc` writes a line every CPU shares.
    let Some(id) = d.count.percpu().and_then(|p| p.slot()) else {
        return;
    };
    let Some(arena) = d.dcache().pcpu.clone() else {
        return;
    };
    let give_back = move || {
        // SAFETY: the dentry was demoted (every counter closed) and is dead; the readers
        // that saw its slot were pinned (try_get) or held a count (gone: it is dead), and
        // the grace period this runs after waits for the pinned ones.
        unsafe { arena.free(id) }
    };
    // SAFETY: the closure frees nothing a reader can reach; it takes the arena's
    // allocation mutex, a leaf that no thread holds while retiring.
    unsafe { crate::retire::retire_fn(give_back) };
}

/// dput: drops one reference; caches the dentry (LRU) or kills it at zero.
pub(super) fn dput(mut d: *mut Dentry) {
    loop {
        // SAFETY: the caller owns a reference to `d`, so it is allocated.
        let dd = unsafe { &*d };
        let Some(g) = dd.count.put_or_lock(dd.arena()) else {
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
/// a walker may still be counting it on its way out (see `mount/mod.rs`).
///
/// # Safety
/// The caller owns a count of `d`.
pub(crate) unsafe fn put_if_last(d: *const Dentry) -> bool {
    // SAFETY: the caller's count keeps it allocated.
    let dd = unsafe { &*d };
    let mut g = dd.count.lock();
    // The exact count: per-CPU counts are folded in (and stay in the lockref after).
    demote_locked(dd, &mut g);
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
pub(super) fn put_last(d: *mut Dentry, mut g: DRefGuard<'_>) -> Option<*mut Dentry> {
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
pub(super) fn kill(dp: *mut Dentry, mut g: DRefGuard<'_>) -> Option<*mut Dentry> {
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
    debug_assert!(!d.count.percpu().is_some_and(|p| p.is_percpu()));
    g.mark_dead();
    drop(g);
    dc.count_dentry(-1);
    release_slot(d);
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
pub(super) unsafe fn erc_from_owned(p: *mut ErcInner<Inode>) -> InodeRef {
    // SAFETY: per the contract, we adopt the count.
    unsafe { Erc::from_raw(p) }
}
