//! # scalevfs-kernfs: an attribute-tree file system (Linux's kernfs, with its hashed locks)
//!
//! kernfs is how a program exposes live state and knobs as files, the way Linux exposes
//! devices in `/sys`: an embedder builds a tree of directories, attribute files (with
//! `show`/`store` callbacks, [`AttributeOps`]) and symlinks; readers and writers open,
//! read, write, seek and poll them with sysfs's semantics. This crate is self-contained:
//! the VFS glue (mounting, the `FileSystem` trait) sits on top of the API below.
//!
//! ## Objects
//!
//! ```text
//!   Kernfs ── Inner: root, Core{open-file mutex table, drain queue}, rename mutex/seqcount,
//!   │                legacy locks (tree rwsem, open-node spinlock) if Locking::Legacy
//!   └ KernfsNode (Arc) ── Dir: mutex{readdir order}, lockless child table (table.rs)
//!                      ├─ File: ops, open ──► OpenNode{event, open-file list, poll waitq}
//!                      └─ Link: target node                       ▲
//!     KernfsOpenFile ── mutex{seq_file state, f_pos}, event ──────┘ (Arc)
//! ```
//!
//! ## Locks, what they protect, and their order
//!
//! | lock (lockstat class)                          | protects                                  |
//! |------------------------------------------------|-------------------------------------------|
//! | `kernfs_rwsem` (legacy only)                   | the whole tree, as Linux's `kernfs_rwsem` |
//! | `kernfs_rename_mutex`                          | serializes cross-directory renames        |
//! | `kernfs_dir_mutex` (one per directory)         | its children (table writers, order, count)|
//! | `kernfs_node_linkage` (spinlock, one per node) | name, parent, position; setattr check+write|
//! | `kernfs_of_mutex` (one per open file)          | seq_file state and position               |
//! | `kernfs_open_file_mutex` (hashed table)        | a node's open-file list, `node.open` writes|
//! | `kernfs_open_node_lock` (legacy only)          | `node.open` (reads too)                   |
//! | `kernfs_poll_waitq` (one per open node)        | its waiters                               |
//!
//! Order: of mutex (callbacks run under it and may call anything) → tree rwsem → rename
//! mutex → directory mutexes (two at once only in rename, by address) → linkage spinlock;
//! and open-file mutex → open-node spinlock. Poll wait queues are leaves. No lock is held
//! while an active reference drains. See each module for the details: [`table`] (lockless
//! lookup), [`dir`] (namespace changes and the removal protocol), [`file`](mod@file) (open files,
//! read/write/poll), `active.rs` (the drain argument), [`perm`].
//!
//! ## Scalability (kernfs's hashed locks, and past them)
//!
//! Open and close of a file take the node's open-file mutex from a hashed table sized from
//! the CPU count (kernfs's `NR_KERNFS_LOCKS`), never a global one; the node's open-node
//! pointer is published for lockless readers (RCU in merged Linux), and the open node is
//! kept for the node's lifetime once created, so opening a file that was opened before
//! allocates nothing and writes no pointer (Linux frees it with the last close; see
//! [`file`](mod@file)). The hashed-lock patches
//! proposed hashed rwsems for the tree and Linux kept one rwsem; here lookups take no lock
//! at all (epoch-protected hash lists per directory) and namespace changes take only the
//! directories they change, so lookups and opens of different nodes share no lock and
//! write no shared cache line (a path walk takes a reference only on its result).
//!
//! ## Legacy ablation
//!
//! [`Locking::Legacy`] builds kernfs's design before the hashed locks behind the same API: one global
//! open-file mutex (a table of one), one global open-node spinlock taken for every read and
//! write of `node.open`, and one tree rwsem taken for reading by every lookup step and
//! permission check and for writing by every namespace change. The scalable design pays
//! one predictable branch on an `Option` for each.
//!
//! ## Mounting it under the VFS (for the `FileSystem` implementation)
//!
//! * Inodes are nodes: `ino()`, [`KernfsNode::getattr`] / [`Kernfs::getattr`] for `stat`,
//!   [`Kernfs::lookup`] per component (`ENOENT` → negative dentry), [`Kernfs::readdir_from`]
//!   with its cookies as `d_off` (`.`/`..` are the VFS's), [`Kernfs::readlink`],
//!   [`Kernfs::permission`] (or [`perm::check_mode`] on the VFS's own attribute cache),
//!   [`Kernfs::setattr_checked`] for chmod/chown.
//! * Names are not created by users: sysfs answers `mkdir`/`symlink`/`unlink`/`rmdir`/
//!   `rename` with `EPERM` and `O_CREAT` of a new name with `EACCES` (checked on this host).
//! * Open files need a per-open hook: [`Kernfs::open`] gives a [`KernfsOpenFile`] to keep in
//!   the VFS file; its `read`/`write`/`llseek` keep their own position (or use
//!   `read_at`/`write_at`); dropping it is `release`.
//! * Poll/epoll: [`KernfsOpenFile::poll`] is the `->poll` mask; register the epoll entry's
//!   wake callback with [`KernfsOpenFile::add_waiter`] (a [`Waker`] gets the event mask) and
//!   drop it with `remove_waiter`. [`Kernfs::notify`] is `sysfs_notify`.
//! * Removal: nodes can disappear under the VFS; a dentry's node is stale once
//!   `!is_active()` (kernfs's `d_revalidate`).
//!
//! [`KernfsFs`] (module [`vfs`]) is that mapping: `Vfs::mount("/sys", KernfsFs::new(tree))`.
//!
//! ## Differences from Linux
//!
//! * Removal wakes the removed files' pollers (Linux leaves them asleep).
//! * A callback may remove its own node or an ancestor with plain [`Kernfs::remove`]: its
//!   active reference is broken implicitly (Linux needs `kernfs_remove_self` or
//!   `kernfs_break_active_protection`), and [`Kernfs::remove_self`]'s losers return once
//!   the node is removed, without also waiting for the winner's callback to return.
//! * `open` of a removed directory is `ENOENT` (Linux's stale dentry opens, then lists
//!   nothing); of a removed file `ENODEV` as in Linux.
//! * No namespaces (`KERNFS_NS`), no `mmap`, no bin attributes, no `atomic_write_len`,
//!   no fsnotify (inotify) on notify.
//! * readdir lists in creation order with stable cookies (kernfs: name-hash order).
//! * `lseek` is kernfs's (generic, relative to the 4096-byte size for `SEEK_END`), not
//!   `seq_lseek`: that is what a 6.x host does (tests/read_semantics.rs compares).
//! * Under the VFS ([`vfs`]): writes of one attribute through different open files are
//!   serialized by the VFS inode's rwsem (Linux's kernfs takes only `of->mutex`), and a
//!   write's mtime update of the VFS inode lasts until the next refresh from the node;
//!   the scalable design revalidates in rcu-walk (Linux's kernfs refuses it).

#![warn(missing_docs)]

pub mod active;
pub mod demo;
pub mod dir;
pub mod file;
pub mod node;
pub mod perm;
pub mod table;
pub mod vfs;

use std::sync::atomic::{fence, AtomicU64, Ordering};
use std::sync::{Arc, Weak};

use scalevfs_primitives::hashed::HashedMutexes;
use scalevfs_primitives::lockstat::{LockClass, Mutex, RwLock, RwLockReadGuard, RwLockWriteGuard};
use scalevfs_primitives::spinlock::SpinLock;
pub use scalevfs_primitives::Locking;
use scalevfs_vfs::{Errno, SysResult};

use crate::active::DrainQueue;
pub use crate::dir::{check_name, DirEntry, MAX_SYMLINKS, NAME_MAX};
pub use crate::file::{
    KernfsOpenFile, WaiterKey, Waker, DEFAULT_POLLMASK, MAX_POS, PAGE_SIZE, POLL_CHANGED,
};
pub use crate::node::{AttributeOps, FnAttr, KernfsAttr, KernfsNode, NodeKind, SetAttr, ATTR_SIZE};
pub use crate::perm::{Creds, MAY_EXEC, MAY_READ, MAY_WRITE};
pub use crate::vfs::KernfsFs;

/// Lock class of the legacy tree rwsem.
pub static TREE_RWSEM_CLASS: LockClass = LockClass::new("kernfs_rwsem");
/// Lock class of the cross-directory rename mutex.
pub static RENAME_MUTEX_CLASS: LockClass = LockClass::new("kernfs_rename_mutex");

/// Every lock class of this crate, for `lockstat::report_for`.
pub fn lock_classes() -> [&'static LockClass; 8] {
    [
        &TREE_RWSEM_CLASS,
        &RENAME_MUTEX_CLASS,
        &dir::DIR_MUTEX_CLASS,
        &node::NODE_LINKAGE_CLASS,
        &file::OF_MUTEX_CLASS,
        &file::OPEN_FILE_MUTEX_CLASS,
        &file::OPEN_NODE_LOCK_CLASS,
        &file::POLL_WAITQ_CLASS,
    ]
}

/// A sequence count for readers of multi-node state (paths) against cross-directory
/// renames. Writers are serialized by the rename mutex.
pub(crate) struct SeqCount {
    seq: AtomicU64,
}

pub(crate) struct SeqWrite<'a>(&'a SeqCount);

impl SeqCount {
    fn new() -> Self {
        SeqCount {
            seq: AtomicU64::new(0),
        }
    }

    /// Starts a write section (odd count) until the guard drops.
    pub(crate) fn write_begin(&self) -> SeqWrite<'_> {
        self.seq.fetch_add(1, Ordering::Relaxed);
        // Release fence: the odd count is ordered before the section's writes, for
        // readers whose Acquire fence (in `read`) observed one of those writes.
        fence(Ordering::Release);
        SeqWrite(self)
    }

    /// Runs `f` until no write section overlapped it.
    pub(crate) fn read<R>(&self, f: impl Fn() -> R) -> R {
        loop {
            // Acquire pairs with the Release increment ending a write section.
            let s = self.seq.load(Ordering::Acquire);
            if s & 1 == 1 {
                std::thread::yield_now();
                continue;
            }
            let r = f();
            // Acquire fence pairs with the writer's Release fence (see `write_begin`).
            fence(Ordering::Acquire);
            if self.seq.load(Ordering::Relaxed) == s {
                return r;
            }
        }
    }
}

impl Drop for SeqWrite<'_> {
    fn drop(&mut self) {
        // Release pairs with the Acquire load in `read`: the section's writes are visible
        // to a reader that sees the even count.
        self.0.seq.fetch_add(1, Ordering::Release);
    }
}

/// What nodes and open files of one instance share: the open-file side and the drain
/// queue. Every node holds an `Arc` of it (taken once, at creation), so an open file
/// reaches it through its node and opening or closing a file writes no per-instance
/// reference count (an `Arc<Inner>` per open file would be one cache line written by
/// every open and close of every thread). It holds no nodes, so no reference cycle.
pub(crate) struct Core {
    pub(crate) open_file_locks: HashedMutexes<()>,
    pub(crate) open_node_lock: Option<SpinLock<()>>,
    pub(crate) drain: DrainQueue,
    /// Whether attribute files count active references per CPU (the scalable design;
    /// legacy keeps Linux's single `kn->active`). See `active.rs`.
    pub(crate) percpu_active: bool,
}

/// Told about every removal (a mount's inode map forgets the removed nodes' inodes).
pub(crate) trait RemovalObserver: Send + Sync {
    /// `nodes` were removed (deactivated, drained and unlinked). Called with no kernfs
    /// lock held; may be called more than once for a node (concurrent removals).
    fn removed(&self, nodes: &[Arc<KernfsNode>]);
}

/// The shared state of one kernfs instance.
pub(crate) struct Inner {
    pub(crate) core: Arc<Core>,
    pub(crate) root: Arc<KernfsNode>,
    pub(crate) next_ino: AtomicU64,
    pub(crate) tree_lock: Option<RwLock<()>>,
    pub(crate) rename_lock: Mutex<()>,
    pub(crate) rename_seq: SeqCount,
    /// Mounts to tell about removals (weak: a mount owns its tree, not the reverse). A
    /// plain `std` mutex without a lockstat class: taken only by removals and mounts, as
    /// a leaf (observers are called after it is released).
    observers: std::sync::Mutex<Vec<Weak<dyn RemovalObserver>>>,
    locking: Locking,
}

/// One kernfs instance (a tree). Cheap to clone (shared).
#[derive(Clone)]
pub struct Kernfs {
    pub(crate) inner: Arc<Inner>,
}

impl Kernfs {
    /// An empty tree: a root directory (inode 1, mode 0755, owned by root), with the
    /// scalable or the legacy locking design.
    pub fn new(locking: Locking) -> Self {
        let legacy = locking == Locking::Legacy;
        let core = Arc::new(Core {
            open_file_locks: HashedMutexes::new_for_class(locking, &file::OPEN_FILE_MUTEX_CLASS),
            open_node_lock: legacy.then(|| SpinLock::with_class((), &file::OPEN_NODE_LOCK_CLASS)),
            drain: DrainQueue::new(),
            percpu_active: !legacy,
        });
        let root = Arc::new(KernfsNode::new(
            core.clone(),
            1,
            Arc::from(&b""[..]),
            None,
            (0o755, 0, 0),
            node::NodeData::Dir(dir::DirData::new()),
        ));
        Kernfs {
            inner: Arc::new(Inner {
                core,
                root,
                next_ino: AtomicU64::new(2),
                tree_lock: legacy.then(|| RwLock::with_class((), &TREE_RWSEM_CLASS)),
                rename_lock: Mutex::with_class((), &RENAME_MUTEX_CLASS),
                rename_seq: SeqCount::new(),
                observers: std::sync::Mutex::new(Vec::new()),
                locking,
            }),
        }
    }

    /// The design this instance was built with.
    pub fn locking(&self) -> Locking {
        self.inner.locking
    }

    /// The root directory.
    pub fn root(&self) -> &Arc<KernfsNode> {
        &self.inner.root
    }

    /// How many open-file mutexes the hashed table has (1 for legacy).
    pub fn open_file_locks(&self) -> usize {
        self.inner.core.open_file_locks.len()
    }

    pub(crate) fn tree_read(&self) -> Option<RwLockReadGuard<'_, ()>> {
        self.inner.tree_lock.as_ref().map(|l| l.read())
    }

    pub(crate) fn tree_write(&self) -> Option<RwLockWriteGuard<'_, ()>> {
        self.inner.tree_lock.as_ref().map(|l| l.write())
    }

    /// Registers `o` to be told about removals (dropped observers are forgotten).
    pub(crate) fn add_removal_observer(&self, o: Weak<dyn RemovalObserver>) {
        let mut v = self
            .inner
            .observers
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        v.retain(|w| w.strong_count() > 0);
        v.push(o);
    }

    /// Tells the observers that `nodes` were removed.
    pub(crate) fn notify_removed(&self, nodes: &[Arc<KernfsNode>]) {
        let live: Vec<Arc<dyn RemovalObserver>> = {
            let v = self
                .inner
                .observers
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            v.iter().filter_map(Weak::upgrade).collect()
        };
        for o in live {
            o.removed(nodes);
        }
    }

    pub(crate) fn check_same_fs(&self, node: &KernfsNode) -> SysResult<()> {
        if Arc::ptr_eq(&node.core, &self.inner.core) {
            Ok(())
        } else {
            Err(Errno::EXDEV)
        }
    }

    /// Creates an attribute file `name` in `parent` with permission bits `mode`, owner
    /// `uid`/`gid`, and callbacks `ops`.
    ///
    /// Errors: `EINVAL`/`ENAMETOOLONG` (bad name), `ENOTDIR`, `ENOENT` (parent removed),
    /// `EEXIST`, `EXDEV`.
    pub fn create_file(
        &self,
        parent: &Arc<KernfsNode>,
        name: impl AsRef<[u8]>,
        mode: u32,
        uid: u32,
        gid: u32,
        ops: Arc<dyn AttributeOps>,
    ) -> SysResult<Arc<KernfsNode>> {
        self.add_node(
            parent,
            name.as_ref(),
            mode,
            uid,
            gid,
            node::NodeData::File(node::FileData {
                ops,
                open: std::sync::atomic::AtomicPtr::new(std::ptr::null_mut()),
            }),
        )
    }

    /// `stat` of a node (`ENOENT` once removed, as a stale lookup would).
    pub fn getattr(&self, node: &KernfsNode) -> SysResult<KernfsAttr> {
        self.check_same_fs(node)?;
        if !node.is_active() {
            return Err(Errno::ENOENT);
        }
        let _tree = self.tree_read();
        Ok(node.getattr())
    }

    /// Changes mode/owner without permission checks (kernfs's `kernfs_setattr`, for the
    /// embedder). Errors: `ENOENT` (removed), `EXDEV`.
    pub fn setattr(&self, node: &KernfsNode, attr: &SetAttr) -> SysResult<()> {
        self.update_attr(node, |_| Ok(*attr))
    }

    /// Applies the change `f` computes from the node's current `(mode, uid, gid)`, with no
    /// other attribute change between the read and the write (under the node's linkage
    /// lock, a per-node spinlock; legacy: under the tree rwsem too, taken first).
    fn update_attr(
        &self,
        node: &KernfsNode,
        f: impl FnOnce((u32, u32, u32)) -> SysResult<SetAttr>,
    ) -> SysResult<()> {
        self.check_same_fs(node)?;
        if !node.is_active() {
            return Err(Errno::ENOENT);
        }
        let _tree = self.tree_write();
        node.update_attr(f)
    }

    /// `chmod`/`chown` by `creds`, checked as Linux's `setattr_prepare`: changing the owner
    /// needs root (or an unchanged owner); changing the group needs root, or being the
    /// owner and a member of the new group; changing the mode needs root or the owner
    /// (`EPERM` otherwise). A non-root chmod clears `S_ISGID` unless the caller is in the
    /// file's group; a chown of a non-directory clears `S_ISUID`, and `S_ISGID` if group
    /// execute is set (as `chown_common` asks for). The check and the change are one step
    /// with respect to other `setattr`s of the node (Linux holds `i_rwsem` across both).
    /// Errors: `EPERM`, `ENOENT` (removed), `EXDEV`.
    pub fn setattr_checked(
        &self,
        node: &KernfsNode,
        attr: &SetAttr,
        creds: &Creds<'_>,
    ) -> SysResult<()> {
        let is_dir = node.kind() == NodeKind::Dir;
        self.update_attr(node, |(mode, uid, gid)| {
            let root = creds.is_root();
            let owner = root || creds.uid == uid;
            if attr.uid.is_some_and(|u| u != uid) && !root {
                return Err(Errno::EPERM);
            }
            if attr.gid.is_some_and(|g| g != gid)
                && !(root || (creds.uid == uid && creds.in_group(attr.gid.unwrap_or(gid))))
            {
                return Err(Errno::EPERM);
            }
            let mut a = *attr;
            if let Some(m) = a.mode.as_mut() {
                if !owner {
                    return Err(Errno::EPERM);
                }
                if !root && !creds.in_group(attr.gid.unwrap_or(gid)) {
                    *m &= !libc::S_ISGID;
                }
            } else if (attr.uid.is_some() || attr.gid.is_some()) && !is_dir {
                let mut m = mode & !libc::S_ISUID;
                if m & libc::S_IXGRP != 0 {
                    m &= !libc::S_ISGID;
                }
                if m != mode {
                    a.mode = Some(m);
                }
            }
            Ok(a)
        })
    }
}

impl Drop for Inner {
    /// Breaks the parent ↔ child reference cycles of the remaining tree. No tree walk can
    /// run concurrently: lookups and namespace changes go through a `Kernfs`, which keeps
    /// `Inner` alive. Open files keep only their nodes and the `Core`, and never walk the
    /// tree, so they keep working on their (now detached) nodes.
    fn drop(&mut self) {
        let guard = scalevfs_primitives::epoch::pin();
        let mut stack = vec![self.root.clone()];
        while let Some(n) = stack.pop() {
            if let Some(d) = n.dir() {
                let mut st = d.lock.lock();
                stack.extend(d.table.drain_all(&guard));
                st.clear();
            }
        }
    }
}
