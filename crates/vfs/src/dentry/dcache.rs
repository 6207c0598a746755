//! The dentry cache itself: allocation, hash lookups, adding, dropping and moving
//! dentries, the shrinker, and d_path.

use super::*;

thread_local! {
    static IN_SHRINK: Cell<bool> = const { Cell::new(false) };
}

/// The dentry cache: hash, LRU, rename lock.
pub struct Dcache {
    /// Keyed by (parent id, the dentry's own name buffer): the node shares the name rather
    /// than copying it (see [`NameRef`]).
    /// Line-aligned nodes: a rename or unlink in one directory reads and writes no line
    /// another thread allocates on (`rcuhash` module docs).
    pub(super) hash: RcuHash<(u64, NameRef), usize, LineAligned>,
    pub(super) lru: Lru,
    /// The rename lock: written by d_move and mount changes, read by path walks and `d_path`.
    pub rename_lock: RenameLock,
    pub(super) locking: Locking,
    /// Live dentries (diagnostics), one counter per CPU so that allocation and kill do not
    /// share a cache line (Linux's per-cpu `nr_dentry`).
    pub(super) nr_dentry: PerCpuCounter,
    /// The per-CPU counters of dentries in per-CPU count mode (`None`: the scalable design
    /// with atomic `LockRef` counts only, and the legacy design). An `Arc`: a dead dentry's
    /// slot is given back after a grace period, which may end after the dcache is gone.
    pub(super) pcpu: Option<Arc<SlotArena>>,
}

// SAFETY: the hash and LRU hold dentry addresses as integers; access follows the module rules.
unsafe impl Send for Dcache {}
// SAFETY: as above.
unsafe impl Sync for Dcache {}

/// Per-thread id blocks, so dentry allocation does not share one counter cache line.
pub(super) fn next_dentry_id() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    thread_local! {
        static BLOCK: Cell<(u64, u64)> = const { Cell::new((0, 0)) };
    }
    crate::prims::next_batched_id(&NEXT, &BLOCK)
}

impl Dcache {
    /// A dcache of `2^hash_bits` buckets that keeps at most `max_unused` unused dentries;
    /// with `percpu_counts` (scalable design only), dentries counted by several threads
    /// switch to per-CPU counts.
    pub fn new(locking: Locking, hash_bits: u32, max_unused: usize, percpu_counts: bool) -> Dcache {
        let shards = match locking {
            Locking::Legacy => 1,
            Locking::Scalable => scalevfs_primitives::cpu::num_cpus().max(1),
        };
        Dcache {
            hash: RcuHash::with_class(hash_bits, &crate::lockclass::DENTRY_HASH_BUCKET),
            lru: Lru::new(shards, max_unused),
            rename_lock: RenameLock::new(locking),
            locking,
            nr_dentry: PerCpuCounter::new(locking == Locking::Scalable),
            pcpu: (percpu_counts && locking == Locking::Scalable)
                .then(|| Arc::new(SlotArena::new())),
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

    pub(super) fn count_dentry(&self, delta: isize) {
        self.nr_dentry.add(delta);
    }
    /// Unused dentries on the LRU.
    pub fn nr_unused(&self) -> usize {
        self.lru.len()
    }

    pub(super) fn alloc(
        &self,
        parent_id: u64,
        name: &[u8],
        inode: Option<InodeRef>,
    ) -> Box<Dentry> {
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
        let g = scalevfs_primitives::epoch::pin();
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
            parent.dget();
            b.parent.store(parent.as_ptr() as *mut _, Ordering::Relaxed);
        }
        b.flags.store(HASHED, Ordering::Relaxed);
        let name_ref = NameRef(
            // SAFETY: only the pointer is read; the name is not shared yet.
            unsafe {
                b.name
                    .load(Ordering::Relaxed, scalevfs_primitives::epoch::unprotected())
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
                    let _g = scalevfs_primitives::epoch::pin();
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
        parent.dget();
        // Release: pairs with the Acquire loads of `parent` (d_path, dget_parent, kill).
        d.parent.store(parent.as_ptr() as *mut _, Ordering::Release);
        let p = Erc::into_raw(inode) as *mut _;
        // Release: pairs with the Acquire in `Dentry::inode`; parent is visible first.
        d.inode.store(p, Ordering::Release);
    }

    pub(super) fn unhash_locked(&self, d: &Dentry) {
        self.remove_from_hash_locked(d);
        d.flags.fetch_and(!HASHED, Ordering::Relaxed);
    }

    /// Takes `d` out of the hash table but leaves its `HASHED` flag: a dentry being moved
    /// (Linux's `___d_drop` in `__d_move`) must never look unlinked to `getcwd` or `fstat`
    /// in the middle of a rename. Call with `d`'s lock held.
    pub(super) fn remove_from_hash_locked(&self, d: &Dentry) {
        let pid = d.parent_id.load(Ordering::Relaxed);
        let g = scalevfs_primitives::epoch::pin();
        let me = d as *const Dentry as usize;
        d.with_name(&g, |name| {
            self.hash
                .remove(hash_name(pid, name), |k, v| *v == me && k.0 == pid);
        });
    }

    /// Removes `d` from the cache (`d_drop`): lookups no longer find it; it is killed when
    /// its last reference goes.
    pub fn drop_dentry(&self, d: &Dentry) {
        let mut g = d.count.lock();
        // Unhashed, its last put must kill it: puts must reach `d_lock` again.
        demote_locked(d, &mut g);
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
    pub(super) fn set_location(&self, d: &DentryRef, parent: &DentryRef, name: &[u8]) {
        let old_parent;
        // Counted before `d`'s lock: counting may promote `parent`, which takes its
        // `d_lock`, and a parent's is never taken under a child's.
        parent.dget();
        {
            let _l = d.count.lock();
            if d.flags.load(Ordering::Relaxed) & HASHED != 0 {
                self.remove_from_hash_locked(d);
            }
            // Release: pairs with the Acquire loads of `parent` (d_path, dget_parent);
            // Acquire: we take over the old parent's count, published with its store.
            old_parent = d.parent.swap(parent.as_ptr() as *mut _, Ordering::AcqRel);
            d.parent_id.store(parent.id, Ordering::Relaxed);
            let g = scalevfs_primitives::epoch::pin();
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
                        let mut ol = o.count.lock();
                        demote_locked(o, &mut ol);
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
    pub(super) fn shrink_shard(&self, s: usize, n: usize) -> usize {
        self.shrink_shard_of(s, n, None)
    }

    /// `shrink_shard`, or with `only`: just the positive dentries of that superblock, with
    /// no second chance (unmount: `shrink_dcache_for_umount`).
    pub(super) fn shrink_shard_of(&self, s: usize, n: usize, only: Option<&SuperBlock>) -> usize {
        if IN_SHRINK.with(|f| f.replace(true)) {
            return 0;
        }
        let g = scalevfs_primitives::epoch::pin();
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
            let mut g2 = d.count.lock();
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
            // The exact count; a dentry in use goes back to per-CPU counts when it is next
            // counted by two threads.
            demote_locked(d, &mut g2);
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
    /// Linux's `prepend_path`, at the *end* of `buf` (a page filled from the end): returns
    /// where the path starts. Reads the tree as a rename-lock reader. `up` maps a mount
    /// root to its mountpoint and parent mount (`None` at the top). `Unreachable` if `d`
    /// is not below `root` (the caller reports "unreachable"); `TooLong` if it does not
    /// fit. Allocates nothing, so readers on different CPUs (getcwd) share no allocator
    /// state either.
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
            let g = scalevfs_primitives::epoch::pin();
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
                // A rename of a non-directory moves it without the rename sequence (module
                // docs), under its `d_lock`: the leaf's parent and name are read under it.
                let leaf_lock = (std::ptr::eq(cur, d) && !c.inode().is_some_and(|i| i.is_dir()))
                    .then(|| c.count.lock());
                let parent = c.parent_ptr();
                if parent.is_null() {
                    // A file system's root, which no rename moves: the lock is not needed,
                    // and `up` (the mount table) is not taken under a `d_lock`.
                    drop(leaf_lock);
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
                drop(leaf_lock);
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

/// Linux's `PATH_MAX`, the buffer [`VfsCore::d_path`](crate::core::VfsCore::d_path) starts with.
pub const PATH_MAX: usize = 4096;
