//! Directories and the namespace operations: create, lookup, remove, rename, readdir.
//!
//! ## Locks (scalable design)
//!
//! * Each directory has a mutex ([`DIR_MUTEX_CLASS`]) that serializes changes to *its*
//!   children: the child table, the readdir order, the subdirectory count, and its own
//!   deactivation test (a create checks the parent is active under this mutex).
//! * Lookups take no lock at all (see `table.rs`); they check the found node is active.
//! * A rename across directories takes the per-file-system rename mutex first (as Linux's
//!   `s_vfs_rename_mutex`: it keeps two renames from moving directories into each other),
//!   then both directory mutexes in address order (`HashedLocks::lock_two`'s rule), then
//!   bumps the rename sequence count that `path`/`readlink` readers retry on.
//!
//! Lock order: tree rwsem (legacy only) → rename mutex → directory mutexes (by address)
//! → node linkage spinlocks. Nothing here is held while a callback runs or while a
//! removal drains.
//!
//! ## Remove
//!
//! 1. Deactivate the node under its parent's mutex, then walk the subtree: under each
//!    directory's mutex deactivate every child and collect it. A create or rename into a
//!    directory checks that directory is active under its mutex, so after the walk no node
//!    can join the subtree; a rename out of it checks the moving node is active under the
//!    source directory's mutex, so it either happened before (the node is not collected)
//!    or fails.
//! 2. Drain every collected node (wait for in-flight callbacks), with no lock held. If the
//!    removing thread is inside callbacks of collected nodes (a "remove" attribute), it
//!    first breaks those references (`active.rs`) and then waits only for unbroken ones
//!    on every collected node, so concurrent self-removals do not wait for each other.
//! 3. Unlink children before parents, each under its parent's mutex. Unlinking is
//!    idempotent (the node's `seq` says whether it is still linked), so overlapping
//!    concurrent removals are harmless; each of them drains the whole subtree before it
//!    returns, whoever deactivated it. Only the one whose deactivation of the top node
//!    succeeded reports success (`remove_self`'s winner).
//! 4. Wake pollers of removed files (beyond Linux, so a blocked poller re-polls and sees
//!    `POLLERR|POLLPRI`), and tell the mounts ([`KernfsFs`](crate::KernfsFs)) so their
//!    inode maps forget the removed nodes.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use scalevfs_primitives::epoch;
use scalevfs_primitives::lockstat::{LockClass, Mutex};
use scalevfs_vfs::{Errno, SysResult};

use crate::node::{KernfsNode, NodeData, NodeKind};
use crate::perm::{node_permission, Creds, MAY_EXEC};
use crate::table::{name_hash, ChildTable};
use crate::Kernfs;

/// Lock class of every directory's mutex.
pub static DIR_MUTEX_CLASS: LockClass = LockClass::new("kernfs_dir_mutex");

/// Longest name component (`NAME_MAX`).
pub const NAME_MAX: usize = 255;

/// Symlinks followed by one [`Kernfs::lookup_path`] before `ELOOP` (Linux's `MAXSYMLINKS`).
pub const MAX_SYMLINKS: usize = 40;

/// What the directory mutex protects (besides the child table's writer side).
pub(crate) struct DirState {
    /// Children by readdir position: creation (or rename-in) order, stable under changes.
    order: BTreeMap<u64, Arc<KernfsNode>>,
    next_seq: u64,
}

pub(crate) struct DirData {
    pub(crate) lock: Mutex<DirState>,
    pub(crate) table: ChildTable,
    /// Subdirectories (for `nlink`); written under `lock`, read locklessly by `getattr`.
    subdirs: AtomicU32,
}

impl DirState {
    /// Forgets every child (file system teardown).
    pub(crate) fn clear(&mut self) {
        self.order.clear();
    }
}

impl DirData {
    pub(crate) fn new() -> Self {
        DirData {
            lock: Mutex::with_class(
                DirState {
                    order: BTreeMap::new(),
                    next_seq: 1,
                },
                &DIR_MUTEX_CLASS,
            ),
            table: ChildTable::new(),
            subdirs: AtomicU32::new(0),
        }
    }

    pub(crate) fn subdirs(&self) -> u32 {
        self.subdirs.load(Ordering::Relaxed)
    }

    /// Links `node` as `name` (caller: directory mutex held, name free).
    fn link(
        &self,
        st: &mut DirState,
        name: Arc<[u8]>,
        node: &Arc<KernfsNode>,
        guard: &epoch::Guard,
    ) {
        let seq = st.next_seq;
        st.next_seq += 1;
        st.order.insert(seq, node.clone());
        node.linkage.lock().seq = Some(seq);
        if node.kind() == NodeKind::Dir {
            self.subdirs.fetch_add(1, Ordering::Relaxed);
        }
        let hash = name_hash(&name);
        self.table
            .insert(name, hash, node.clone(), st.order.len(), guard);
    }

    /// Unlinks `node` if still linked (caller: directory mutex held).
    fn unlink(&self, st: &mut DirState, node: &KernfsNode, guard: &epoch::Guard) -> bool {
        let (seq, name) = {
            let mut l = node.linkage.lock();
            match l.seq.take() {
                Some(s) => (s, l.name.clone()),
                None => return false,
            }
        };
        st.order.remove(&seq);
        if node.kind() == NodeKind::Dir {
            self.subdirs.fetch_sub(1, Ordering::Relaxed);
        }
        let found = self.table.unlink(node, name_hash(&name), guard);
        debug_assert!(found, "linked node missing from its table");
        true
    }
}

/// One entry of [`Kernfs::readdir`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DirEntry {
    /// The entry's name.
    pub name: Arc<[u8]>,
    /// The node's inode number.
    pub ino: u64,
    /// Directory, attribute file or symlink.
    pub kind: NodeKind,
    /// Position cookie: pass it to [`Kernfs::readdir_from`] to continue after this entry.
    /// Cookies grow with creation order and are never reused within a directory.
    pub cookie: u64,
}

/// Checks a new name: not empty, `.` or `..`, no `/` or NUL (`EINVAL`), at most
/// [`NAME_MAX`] bytes (`ENAMETOOLONG`).
pub fn check_name(name: &[u8]) -> SysResult<()> {
    if name.len() > NAME_MAX {
        return Err(Errno::ENAMETOOLONG);
    }
    if name.is_empty() || name == b"." || name == b".." || name.iter().any(|&b| b == b'/' || b == 0)
    {
        return Err(Errno::EINVAL);
    }
    Ok(())
}

impl Kernfs {
    /// Locks `dir`'s mutex and fails with `ENOENT` if it was deactivated.
    fn lock_live_dir<'a>(
        &self,
        dir: &'a KernfsNode,
    ) -> SysResult<scalevfs_primitives::lockstat::MutexGuard<'a, DirState>> {
        let d = dir.dir().ok_or(Errno::ENOTDIR)?;
        let g = d.lock.lock();
        if !dir.active.is_active() {
            return Err(Errno::ENOENT);
        }
        Ok(g)
    }

    pub(crate) fn add_node(
        &self,
        parent: &Arc<KernfsNode>,
        name: &[u8],
        mode: u32,
        uid: u32,
        gid: u32,
        data: NodeData,
    ) -> SysResult<Arc<KernfsNode>> {
        check_name(name)?;
        self.check_same_fs(parent)?;
        let pd = parent.dir().ok_or(Errno::ENOTDIR)?;
        let _tree = self.tree_write();
        let mut st = self.lock_live_dir(parent)?;
        let guard = epoch::pin();
        if pd.table.find(name, name_hash(name), &guard).is_some() {
            return Err(Errno::EEXIST);
        }
        let name: Arc<[u8]> = name.into();
        let ino = self.inner.next_ino.fetch_add(1, Ordering::Relaxed);
        let node = Arc::new(KernfsNode::new(
            self.inner.core.clone(),
            ino,
            name.clone(),
            Some(parent.clone()),
            (mode, uid, gid),
            data,
        ));
        pd.link(&mut st, name, &node, &guard);
        parent.touch_dir();
        Ok(node)
    }

    /// Creates a directory `name` in `parent` with permission bits `mode`.
    ///
    /// Errors: `EINVAL`/`ENAMETOOLONG` (bad name), `ENOTDIR` (parent not a directory),
    /// `ENOENT` (parent removed), `EEXIST`, `EXDEV` (parent of another file system).
    pub fn create_dir(
        &self,
        parent: &Arc<KernfsNode>,
        name: impl AsRef<[u8]>,
        mode: u32,
        uid: u32,
        gid: u32,
    ) -> SysResult<Arc<KernfsNode>> {
        self.add_node(
            parent,
            name.as_ref(),
            mode,
            uid,
            gid,
            NodeData::Dir(DirData::new()),
        )
    }

    /// Creates a symlink `name` in `parent` to `target` (root-owned, mode 0777, as sysfs's).
    /// `readlink` gives the relative path from `parent` to `target`.
    ///
    /// Errors: those of [`create_dir`](Self::create_dir), and `ENOENT` if `target` was
    /// removed, `EINVAL` if it is the root (no relative path names it).
    pub fn create_link(
        &self,
        parent: &Arc<KernfsNode>,
        name: impl AsRef<[u8]>,
        target: &Arc<KernfsNode>,
    ) -> SysResult<Arc<KernfsNode>> {
        self.check_same_fs(target)?;
        if !target.is_active() {
            return Err(Errno::ENOENT);
        }
        if target.parent().is_none() {
            return Err(Errno::EINVAL);
        }
        self.add_node(
            parent,
            name.as_ref(),
            0o777,
            0,
            0,
            NodeData::Link(target.clone()),
        )
    }

    /// Looks `name` up in `dir`: lock-free in the scalable design.
    ///
    /// Errors: `ENOTDIR`, `ENOENT` (absent, removed, or `dir` removed), `ENAMETOOLONG`.
    pub fn lookup(&self, dir: &KernfsNode, name: impl AsRef<[u8]>) -> SysResult<Arc<KernfsNode>> {
        let name = name.as_ref();
        let d = dir.dir().ok_or(Errno::ENOTDIR)?;
        if name.len() > NAME_MAX {
            return Err(Errno::ENAMETOOLONG);
        }
        let _tree = self.tree_read();
        if !dir.is_active() {
            return Err(Errno::ENOENT);
        }
        let guard = epoch::pin();
        match d.table.find(name, name_hash(name), &guard) {
            Some(n) if n.is_active() => Ok(n.clone()),
            _ => Err(Errno::ENOENT),
        }
    }

    /// Whether `node` is live and is `dir`'s child `name` (the VFS's `d_revalidate`):
    /// one lock-free table search under an epoch guard, writing no shared cache line (no
    /// reference is taken), so path walks through shared directories do not contend.
    /// The legacy design takes the tree rwsem for reading, as Linux's revalidate does.
    pub fn is_child(&self, dir: &KernfsNode, name: &[u8], node: &KernfsNode) -> bool {
        let Some(d) = dir.dir() else {
            return false;
        };
        let _tree = self.tree_read();
        if !dir.is_active() || name.len() > NAME_MAX {
            return false;
        }
        let guard = epoch::pin();
        d.table
            .find(name, name_hash(name), &guard)
            .is_some_and(|n| std::ptr::eq(&**n, node) && n.is_active())
    }

    /// Resolves a `/`-separated path from the root, as a path walk would: search
    /// permission (`MAY_EXEC`) on every directory passed, symlinks followed (at most
    /// [`MAX_SYMLINKS`], then `ELOOP`), the final symlink too if `follow`. Empty and `.`
    /// components (so trailing slashes) are skipped; `..` is the VFS's business (`EINVAL` here).
    ///
    /// The whole walk runs under one epoch guard and takes a reference only on the result,
    /// so walks through shared directories write no shared cache line.
    pub fn lookup_path(
        &self,
        path: impl AsRef<[u8]>,
        creds: &Creds<'_>,
        follow: bool,
    ) -> SysResult<Arc<KernfsNode>> {
        let guard = epoch::pin();
        let mut cur: &KernfsNode = &self.inner.root;
        let mut links = 0;
        let mut comps = path
            .as_ref()
            .split(|&b| b == b'/')
            .filter(|c| !c.is_empty() && *c != b".")
            .peekable();
        while let Some(comp) = comps.next() {
            if comp == b".." {
                return Err(Errno::EINVAL);
            }
            let d = cur.dir().ok_or(Errno::ENOTDIR)?;
            // Legacy: the tree rwsem is taken per step, once for the permission check and
            // once for the lookup, as `kernfs_iop_permission` and `kernfs_iop_lookup` /
            // `kernfs_dop_revalidate` did before the hashed-lock patches (never nested: a read lock taken
            // twice deadlocks behind a queued writer).
            self.permission(cur, creds, MAY_EXEC)?;
            if comp.len() > NAME_MAX {
                return Err(Errno::ENAMETOOLONG);
            }
            let found = {
                let _tree = self.tree_read();
                d.table.find(comp, name_hash(comp), &guard)
            };
            let mut next: &KernfsNode = found.ok_or(Errno::ENOENT)?;
            if !next.is_active() {
                return Err(Errno::ENOENT);
            }
            // A symlink's target is a node reference the link holds, and the link lives as
            // long as the guard (it is reachable from a table entry), so no text to parse.
            while let Some(t) = next.link_target() {
                if comps.peek().is_none() && !follow {
                    break;
                }
                links += 1;
                if links > MAX_SYMLINKS {
                    return Err(Errno::ELOOP);
                }
                if !t.is_active() {
                    return Err(Errno::ENOENT);
                }
                next = t;
            }
            cur = next;
        }
        if !cur.is_active() {
            return Err(Errno::ENOENT);
        }
        // The root lives in `inner`; every other node here is borrowed from an entry.
        Ok(if std::ptr::eq(cur, &*self.inner.root) {
            self.inner.root.clone()
        } else {
            self.arc_of(cur, &guard)
        })
    }

    /// A new reference to a node borrowed under `guard` from a table entry or the root.
    fn arc_of(&self, node: &KernfsNode, _guard: &epoch::Guard) -> Arc<KernfsNode> {
        let p: *const KernfsNode = node;
        // SAFETY: `node` is the payload of a live `Arc<KernfsNode>` (held by a table entry
        // or a symlink that the guard keeps alive), so its strong count is at least 1 for
        // the duration of this call; incrementing it and adopting the new count is what
        // `Arc::clone` would do.
        unsafe {
            Arc::increment_strong_count(p);
            Arc::from_raw(p)
        }
    }

    /// Removes `node` and everything below it. Waits for in-flight `show`/`store` calls on
    /// those nodes to finish. Afterwards lookups fail with `ENOENT` and open files of the
    /// removed nodes fail with `ENODEV`.
    ///
    /// A callback may remove its own node or an ancestor (see also
    /// [`remove_self`](Self::remove_self)): its reference is then *broken* until it
    /// returns, as `kernfs_break_active_protection` does. Such a removal waits for the
    /// other callbacks of the subtree except those that are themselves removing it, so
    /// two writers of one "remove" attribute do not deadlock; a removal from outside any
    /// of the subtree's callbacks waits for all of them, broken or not (for the nodes it
    /// finds in the subtree: one a concurrent removal already unlinked is not waited for).
    ///
    /// Errors: `EINVAL` for the root, `ENOENT` if the node was already removed (or is being
    /// removed by another thread; this call still drains and unlinks the subtree, so it is
    /// gone when this returns), `EXDEV`.
    pub fn remove(&self, node: &Arc<KernfsNode>) -> SysResult<()> {
        self.check_same_fs(node)?;
        if node.parent().is_none() {
            return Err(Errno::EINVAL);
        }
        let guard = epoch::pin();
        // Phase 1: deactivate and collect.
        let (first, all) = {
            let _tree = self.tree_write();
            let first = self
                .with_parent_locked(node, |_, _| node.deactivate())
                .unwrap_or(false);
            let mut all = vec![node.clone()];
            let mut i = 0;
            while i < all.len() {
                let n = all[i].clone();
                if let Some(d) = n.dir() {
                    let st = d.lock.lock();
                    for c in st.order.values() {
                        c.deactivate();
                        all.push(c.clone());
                    }
                }
                i += 1;
            }
            (first, all)
        };
        // Phase 2: drain, no lock held (callbacks may take any). This thread's own
        // callback references in the subtree are broken first, all of them before any
        // drain; if it has any, it is a callback removing its own subtree and waits only
        // for unbroken references, so such callbacks never wait for each other.
        let q = &self.inner.core.drain;
        // Not `any`: every node's references must be broken, not just the first's.
        let mut breaker = false;
        for n in &all {
            breaker |= n.break_my_refs(q);
        }
        for n in &all {
            n.active.drain(q, breaker);
        }
        // Phase 3: unlink, children first.
        {
            let _tree = self.tree_write();
            for n in all.iter().rev() {
                self.with_parent_locked(n, |p, st| {
                    if p.dir()
                        .expect("parent is a directory")
                        .unlink(st, n, &guard)
                    {
                        p.touch_dir();
                    }
                });
            }
        }
        // Phase 4: wake pollers so they see the removal; mounts forget the inodes.
        for n in &all {
            self.wake_pollers(n);
        }
        self.notify_removed(&all);
        if first {
            Ok(())
        } else {
            Err(Errno::ENOENT)
        }
    }

    /// `kernfs_remove_self`, for a `show`/`store` callback removing its own node (a
    /// sysfs "remove" or "delete" attribute): removes `node` and its subtree, returning
    /// `true` if this call removed it and `false` if another removal did (a concurrent
    /// `remove_self` by another writer of the same attribute, or any other removal). Only
    /// one caller wins; the others wait until the removal is complete and the callback
    /// should then fail (Linux's stores return `-ENODEV`-like errors). In both cases the
    /// node is gone when this returns, and the callback's own reference no longer holds
    /// up other callbacks' removals (see [`remove`](Self::remove)); the callback must not
    /// rely on anything the removal lets the embedder free.
    ///
    /// Unlike Linux, the losers do not also wait for the winner's callback to return, and
    /// calling it outside a callback of `node` is allowed (it is then `remove`).
    pub fn remove_self(&self, node: &Arc<KernfsNode>) -> bool {
        self.remove(node).is_ok()
    }

    /// Runs `f` on `node`'s current parent and its locked directory state (retrying if a
    /// rename moves the node meanwhile); `None` for the root.
    fn with_parent_locked<R>(
        &self,
        node: &KernfsNode,
        f: impl FnOnce(&Arc<KernfsNode>, &mut DirState) -> R,
    ) -> Option<R> {
        loop {
            let p = node.parent()?;
            let d = p.dir().expect("parent is a directory");
            let mut st = d.lock.lock();
            // The parent changes only under its directory mutex (rename, remove), which we
            // hold: if it is still `p`, it stays `p` until we unlock.
            if node
                .linkage
                .lock()
                .parent
                .as_ref()
                .is_some_and(|q| Arc::ptr_eq(q, &p))
            {
                return Some(f(&p, &mut st));
            }
        }
    }

    /// Moves `node` to `new_parent` under `new_name` (kernfs's `kernfs_rename`; the name
    /// must be free, nothing is replaced). Renaming a node to its current place is a no-op.
    ///
    /// Errors: `EINVAL` (root, bad name, or a directory into its own subtree), `ENOTDIR`,
    /// `ENOENT` (node or new parent removed), `EEXIST`, `ENAMETOOLONG`, `EXDEV`.
    pub fn rename(
        &self,
        node: &Arc<KernfsNode>,
        new_parent: &Arc<KernfsNode>,
        new_name: impl AsRef<[u8]>,
    ) -> SysResult<()> {
        let new_name = new_name.as_ref();
        check_name(new_name)?;
        self.check_same_fs(node)?;
        self.check_same_fs(new_parent)?;
        let nd = new_parent.dir().ok_or(Errno::ENOTDIR)?;
        let _tree = self.tree_write();
        loop {
            let old_parent = node.parent().ok_or(Errno::EINVAL)?;
            let cross = !Arc::ptr_eq(&old_parent, new_parent);
            // Cross-directory renames serialize here (see the module docs).
            let _rename = cross.then(|| self.inner.rename_lock.lock());
            let od = old_parent.dir().expect("parent is a directory");
            let (mut og, mut ng) = if cross {
                // Address order, as `HashedLocks::lock_two`.
                if (od as *const DirData) < (nd as *const DirData) {
                    let a = od.lock.lock();
                    (a, Some(nd.lock.lock()))
                } else {
                    let b = nd.lock.lock();
                    (od.lock.lock(), Some(b))
                }
            } else {
                (od.lock.lock(), None)
            };
            if !node
                .linkage
                .lock()
                .parent
                .as_ref()
                .is_some_and(|q| Arc::ptr_eq(q, &old_parent))
            {
                continue; // moved meanwhile: retry with the new parent
            }
            if !node.is_active() || !new_parent.is_active() {
                return Err(Errno::ENOENT);
            }
            if !cross && *node.linkage.lock().name == *new_name {
                return Ok(());
            }
            let guard = epoch::pin();
            if nd
                .table
                .find(new_name, name_hash(new_name), &guard)
                .is_some()
            {
                return Err(Errno::EEXIST);
            }
            if cross && node.kind() == NodeKind::Dir {
                // No other cross-directory rename runs (rename mutex), so ancestors are stable.
                let mut a = Some(new_parent.clone());
                while let Some(x) = a {
                    if Arc::ptr_eq(&x, node) {
                        return Err(Errno::EINVAL);
                    }
                    a = x.parent();
                }
            }
            let seq_write = cross.then(|| self.inner.rename_seq.write_begin());
            od.unlink(&mut og, node, &guard);
            {
                let mut l = node.linkage.lock();
                l.name = new_name.into();
                if cross {
                    l.parent = Some(new_parent.clone());
                }
            }
            let name = node.linkage.lock().name.clone();
            match ng.as_mut() {
                Some(ng) => nd.link(ng, name, node, &guard),
                None => od.link(&mut og, name, node, &guard),
            }
            drop(seq_write);
            old_parent.touch_dir();
            new_parent.touch_dir();
            return Ok(());
        }
    }

    /// Entries of `dir` with a cookie greater than `after` (0: from the start), in
    /// creation order, passed to `emit` until it returns `false`. Returns `true` if the end
    /// was reached. Removed nodes are skipped; an entry present during the whole scan is
    /// emitted exactly once (a renamed one may be emitted again under its new name, as in
    /// Linux). `emit` runs without any lock held.
    ///
    /// Errors: `ENOTDIR`, `ENOENT` (directory removed).
    pub fn readdir_from(
        &self,
        dir: &KernfsNode,
        after: u64,
        mut emit: impl FnMut(DirEntry) -> bool,
    ) -> SysResult<bool> {
        const BATCH: usize = 64;
        let d = dir.dir().ok_or(Errno::ENOTDIR)?;
        let mut cursor = after;
        loop {
            let batch: Vec<DirEntry> = {
                let _tree = self.tree_read();
                let st = d.lock.lock();
                if !dir.is_active() {
                    return Err(Errno::ENOENT);
                }
                st.order
                    .range(cursor.saturating_add(1)..)
                    .filter(|(_, n)| n.is_active())
                    .take(BATCH)
                    .map(|(&cookie, n)| DirEntry {
                        name: n.linkage.lock().name.clone(),
                        ino: n.ino(),
                        kind: n.kind(),
                        cookie,
                    })
                    .collect()
            };
            let done = batch.len() < BATCH;
            for e in batch {
                cursor = e.cookie;
                if !emit(e) {
                    return Ok(false);
                }
            }
            if done {
                return Ok(true);
            }
        }
    }

    /// All entries of `dir` (see [`readdir_from`](Self::readdir_from)).
    pub fn readdir(&self, dir: &KernfsNode) -> SysResult<Vec<DirEntry>> {
        let mut v = Vec::new();
        self.readdir_from(dir, 0, |e| {
            v.push(e);
            true
        })?;
        Ok(v)
    }

    /// The names from the root down to `node` (empty for the root), consistent with
    /// respect to concurrent renames (retried on the rename sequence count).
    fn ancestry(&self, node: &Arc<KernfsNode>) -> Vec<Arc<KernfsNode>> {
        self.inner.rename_seq.read(|| {
            let mut chain = Vec::new();
            let mut cur = node.clone();
            while let Some(p) = cur.parent() {
                chain.push(cur);
                cur = p;
            }
            chain.reverse();
            chain
        })
    }

    /// The absolute path of `node` (`"/class/infiniband/mlx5_0"`; `"/"` for the root).
    pub fn path(&self, node: &Arc<KernfsNode>) -> String {
        let chain = self.ancestry(node);
        if chain.is_empty() {
            return "/".into();
        }
        chain
            .iter()
            .map(|n| format!("/{}", n.name_lossy()))
            .collect()
    }

    /// A symlink's text: the path from the link's directory to the target, relative
    /// (`"../../devices/pci0000:00"`), as sysfs's `kernfs_get_target_path` builds it.
    ///
    /// Errors: `EINVAL` if `link` is not a symlink.
    pub fn readlink(&self, link: &Arc<KernfsNode>) -> SysResult<Vec<u8>> {
        let target = link.link_target().ok_or(Errno::EINVAL)?;
        let parent = link.parent().ok_or(Errno::EINVAL)?;
        // Legacy: `kernfs_getlink` held the tree rwsem for reading.
        let _tree = self.tree_read();
        let from = self.ancestry(&parent);
        let to = self.ancestry(target);
        // Longest common prefix of the two directory chains (the target's own name is not
        // part of its directory chain).
        let to_dir = &to[..to.len().saturating_sub(1)];
        let common = from
            .iter()
            .zip(to_dir)
            .take_while(|(a, b)| Arc::ptr_eq(a, b))
            .count();
        let mut out = Vec::new();
        for _ in common..from.len() {
            out.extend_from_slice(b"../");
        }
        for (i, n) in to[common..].iter().enumerate() {
            if i > 0 {
                out.push(b'/');
            }
            out.extend_from_slice(&n.name());
        }
        if out.is_empty() {
            return Err(Errno::EINVAL);
        }
        Ok(out)
    }

    /// `generic_permission` on `node` for `creds` and `mask` (`MAY_*`): `EACCES` if denied.
    pub fn permission(&self, node: &KernfsNode, creds: &Creds<'_>, mask: u32) -> SysResult<()> {
        let _tree = self.tree_read();
        node_permission(node, creds, mask)
    }
}
