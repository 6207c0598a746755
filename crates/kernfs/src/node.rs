//! Nodes: directories, attribute files and symlinks.
//!
//! A node is shared as `Arc<KernfsNode>`. What never changes after creation (inode
//! number, kind, ops, symlink target) is plain data; what changes is atomic (mode, uid,
//! gid, times, the active count, the open-node pointer) or under the node's `linkage`
//! spinlock (name, parent, position in the parent). A child holds a reference on its
//! parent (as kernfs's `kernfs_get(parent)`), a directory holds references on its children
//! through its child table; `remove` and the file system's drop break those cycles.

use std::cell::RefCell;
use std::sync::atomic::{AtomicI64, AtomicPtr, AtomicU32, Ordering::Relaxed};
use std::sync::Arc;

use scalevfs_primitives::lockstat::LockClass;
use scalevfs_primitives::spinlock::SpinLock;
use scalevfs_vfs::{Errno, SysResult};

use crate::active::{percpu_counters, ActiveCount, DrainQueue};
use crate::dir::DirData;
use crate::file::OpenNode;

/// Lock class of every node's `linkage` spinlock (name, parent, position).
pub static NODE_LINKAGE_CLASS: LockClass = LockClass::new("kernfs_node_linkage");

/// What a node is.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum NodeKind {
    /// A directory.
    Dir,
    /// An attribute file (show/store callbacks).
    File,
    /// A symbolic link to another node.
    Link,
}

impl NodeKind {
    /// The `S_IFMT` bits of this kind.
    pub fn ifmt(self) -> u32 {
        match self {
            NodeKind::Dir => libc::S_IFDIR,
            NodeKind::File => libc::S_IFREG,
            NodeKind::Link => libc::S_IFLNK,
        }
    }

    /// The `d_type` of this kind (`DT_DIR`, `DT_REG`, `DT_LNK`).
    pub fn d_type(self) -> u8 {
        match self {
            NodeKind::Dir => libc::DT_DIR,
            NodeKind::File => libc::DT_REG,
            NodeKind::Link => libc::DT_LNK,
        }
    }
}

/// The callbacks of an attribute file (sysfs's `show`/`store`).
///
/// Both run under an active reference on the node (so `remove` waits for them) and under
/// the open file's mutex (so one open file never runs two at once); different open files
/// may run them concurrently. A callback may call any `Kernfs` method, including removing
/// its own node (see `active.rs`).
///
/// An attribute without a method says so with [`has_show`](Self::has_show) /
/// [`has_store`](Self::has_store) returning `false`: opening it for reading / writing then
/// fails with `EACCES` whatever the mode, as `kernfs_fop_open` does for `kernfs_ops`
/// without `seq_show` / `write` ([`FnAttr`] does this for a missing closure). An
/// implementation that leaves them `true` but does not override the method gets `EIO`
/// from the read or write, as sysfs's `kobj_attr_show`/`kobj_attr_store` give for a
/// `kobj_attribute` without it.
pub trait AttributeOps: Send + Sync {
    /// Appends the attribute's content to `buf` (empty). Content past
    /// 4095 bytes is cut, as sysfs does. An error is returned by the `read`.
    fn show(&self, node: &KernfsNode, buf: &mut Vec<u8>) -> SysResult<()> {
        let _ = (node, buf);
        Err(Errno::EIO)
    }

    /// Consumes a write of `data` (1 to 4096 bytes, one piece), returning how many bytes
    /// it took. An error is returned by the `write`.
    fn store(&self, node: &KernfsNode, data: &[u8]) -> SysResult<usize> {
        let _ = (node, data);
        Err(Errno::EIO)
    }

    /// Whether the attribute can be read (`kernfs_fop_open`'s `has_read`).
    fn has_show(&self) -> bool {
        true
    }

    /// Whether the attribute can be written (`kernfs_fop_open`'s `has_write`).
    fn has_store(&self) -> bool {
        true
    }
}

type ShowFn = dyn Fn(&KernfsNode, &mut Vec<u8>) -> SysResult<()> + Send + Sync;
type StoreFn = dyn Fn(&KernfsNode, &[u8]) -> SysResult<usize> + Send + Sync;

/// [`AttributeOps`] from closures. A missing closure makes the attribute unreadable or
/// unwritable: opening it that way is `EACCES` (a mode with `w` bits does not make a
/// `ro` attribute writable, as in Linux).
#[derive(Default)]
pub struct FnAttr {
    show: Option<Box<ShowFn>>,
    store: Option<Box<StoreFn>>,
}

impl FnAttr {
    /// A read-only attribute.
    pub fn ro(
        show: impl Fn(&KernfsNode, &mut Vec<u8>) -> SysResult<()> + Send + Sync + 'static,
    ) -> Arc<Self> {
        Arc::new(FnAttr {
            show: Some(Box::new(show)),
            store: None,
        })
    }

    /// A read-write attribute.
    pub fn rw(
        show: impl Fn(&KernfsNode, &mut Vec<u8>) -> SysResult<()> + Send + Sync + 'static,
        store: impl Fn(&KernfsNode, &[u8]) -> SysResult<usize> + Send + Sync + 'static,
    ) -> Arc<Self> {
        Arc::new(FnAttr {
            show: Some(Box::new(show)),
            store: Some(Box::new(store)),
        })
    }

    /// A write-only attribute.
    pub fn wo(
        store: impl Fn(&KernfsNode, &[u8]) -> SysResult<usize> + Send + Sync + 'static,
    ) -> Arc<Self> {
        Arc::new(FnAttr {
            show: None,
            store: Some(Box::new(store)),
        })
    }

    /// An attribute whose content is always `bytes`.
    pub fn constant(bytes: impl Into<Vec<u8>>) -> Arc<Self> {
        let bytes = bytes.into();
        Self::ro(move |_, buf| {
            buf.extend_from_slice(&bytes);
            Ok(())
        })
    }
}

impl AttributeOps for FnAttr {
    fn show(&self, node: &KernfsNode, buf: &mut Vec<u8>) -> SysResult<()> {
        self.show.as_ref().map_or(Err(Errno::EIO), |f| f(node, buf))
    }

    fn store(&self, node: &KernfsNode, data: &[u8]) -> SysResult<usize> {
        self.store
            .as_ref()
            .map_or(Err(Errno::EIO), |f| f(node, data))
    }

    fn has_show(&self) -> bool {
        self.show.is_some()
    }

    fn has_store(&self) -> bool {
        self.store.is_some()
    }
}

/// Name, parent and position in the parent's directory order; changed only by rename
/// (under both directories' locks) and remove (under the parent's lock).
pub(crate) struct Linkage {
    pub(crate) name: Arc<[u8]>,
    pub(crate) parent: Option<Arc<KernfsNode>>,
    /// The key in the parent's readdir order; `None` once unlinked (and for the root).
    pub(crate) seq: Option<u64>,
}

pub(crate) struct FileData {
    pub(crate) ops: Arc<dyn AttributeOps>,
    /// Linux's `kn->attr.open`: null, or an `Arc::into_raw` strong reference owned by the
    /// node. Written under the node's open-file mutex (see `file.rs`): set by the first
    /// open, cleared again only by the legacy design's last close; read locklessly by
    /// `notify` (legacy: under the open-node spinlock).
    pub(crate) open: AtomicPtr<OpenNode>,
}

impl Drop for FileData {
    /// Frees the open node the scalable design keeps for the node's lifetime.
    fn drop(&mut self) {
        let p = *self.open.get_mut();
        if !p.is_null() {
            // SAFETY: `p` is the node's own strong reference (`Arc::into_raw` in
            // `get_open_node`); `&mut self` means no open file (each holds the node) and
            // no reader (each borrows the node) is left.
            drop(unsafe { Arc::from_raw(p.cast_const()) });
        }
    }
}

pub(crate) enum NodeData {
    Dir(DirData),
    File(FileData),
    Link(Arc<KernfsNode>),
}

/// A kernfs node. See the module docs.
///
/// `repr(C)` to fix the layout: every open, read and close of an attribute writes the
/// `Arc` count (in the allocation's header, just before the node) and, in the legacy
/// design, `active` (the scalable design writes the CPU's counter in the arena), and reads
/// the mode, the owner and the open-node pointer (in `data`). They come first, so they
/// share one or two cache lines: when the node was used last on another CPU (all readers of
/// a sysfs file use the same node), an open moves those lines, not the more that the
/// compiler's field order spread them over.
///
/// `align(64)`: the node (and, through `ArcInner`'s layout, its `Arc` counts) owns whole
/// cache lines. Unaligned, the nodes, names and table entries a tree's builder allocates
/// one after another shared lines, and one CPU's open of a GID file (writing that node's
/// counts) made the other CPU's path walk miss on a neighbour's name or table entry: at 2
/// threads every function of the walk ran 1.3-2x slower. kernfs-showgids scaled 1.35x from
/// 1 to 2 threads before and 1.63x after (`scripts/scaling.sh --rounds 3`, medians). The
/// price is memory: 256 bytes a node plus the 64-byte `Arc` header.
#[repr(C, align(64))]
pub struct KernfsNode {
    pub(crate) active: ActiveCount,
    mode: AtomicU32,
    uid: AtomicU32,
    gid: AtomicU32,
    pub(crate) data: NodeData,
    /// The instance's shared open-file state (see `Core` in lib.rs).
    pub(crate) core: Arc<crate::Core>,
    ino: u64,
    mtime_ns: AtomicI64,
    ctime_ns: AtomicI64,
    pub(crate) linkage: SpinLock<Linkage>,
}

/// What `getattr` reports, as `stat` on sysfs does.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernfsAttr {
    /// The inode number.
    pub ino: u64,
    /// Directory, attribute file or symlink.
    pub kind: NodeKind,
    /// Type and permission bits (`S_IFREG | 0o644`).
    pub mode: u32,
    /// Owner.
    pub uid: u32,
    /// Group.
    pub gid: u32,
    /// 4096 for attribute files (sysfs's `PAGE_SIZE`), 0 for directories and symlinks.
    pub size: u64,
    /// 1, or for a directory 2 + its subdirectories.
    pub nlink: u32,
    /// Last access, in nanoseconds since the epoch.
    pub atime_ns: i64,
    /// Last modification, in nanoseconds since the epoch.
    pub mtime_ns: i64,
    /// Last status change, in nanoseconds since the epoch.
    pub ctime_ns: i64,
}

/// Attribute changes for `setattr`; `None` leaves a field as it is.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct SetAttr {
    /// Permission bits (`& 0o7777`; the type cannot change).
    pub mode: Option<u32>,
    /// New owner.
    pub uid: Option<u32>,
    /// New group.
    pub gid: Option<u32>,
}

/// Size of an attribute file as `stat` reports it.
pub const ATTR_SIZE: u64 = 4096;

pub(crate) fn now_ns() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i64)
}

impl KernfsNode {
    pub(crate) fn new(
        core: Arc<crate::Core>,
        ino: u64,
        name: Arc<[u8]>,
        parent: Option<Arc<KernfsNode>>,
        (mode, uid, gid): (u32, u32, u32),
        data: NodeData,
    ) -> Self {
        let now = now_ns();
        // Attribute files of the scalable design count their callers per CPU (active.rs).
        let active = match data {
            NodeData::File(_) if core.percpu_active => ActiveCount::with_percpu(percpu_counters()),
            _ => ActiveCount::new(),
        };
        KernfsNode {
            core,
            ino,
            active,
            mode: AtomicU32::new(mode & 0o7777),
            uid: AtomicU32::new(uid),
            gid: AtomicU32::new(gid),
            mtime_ns: AtomicI64::new(now),
            ctime_ns: AtomicI64::new(now),
            linkage: SpinLock::with_class(
                Linkage {
                    name,
                    parent,
                    seq: None,
                },
                &NODE_LINKAGE_CLASS,
            ),
            data,
        }
    }

    /// The inode number (the root is 1).
    pub fn ino(&self) -> u64 {
        self.ino
    }

    /// Directory, file or symlink.
    pub fn kind(&self) -> NodeKind {
        match self.data {
            NodeData::Dir(_) => NodeKind::Dir,
            NodeData::File(_) => NodeKind::File,
            NodeData::Link(_) => NodeKind::Link,
        }
    }

    /// The current name (the root's is empty).
    pub fn name(&self) -> Arc<[u8]> {
        self.linkage.lock().name.clone()
    }

    /// The current name, lossily as a string.
    pub fn name_lossy(&self) -> String {
        String::from_utf8_lossy(&self.name()).into_owned()
    }

    /// The current parent (`None` for the root).
    pub fn parent(&self) -> Option<Arc<KernfsNode>> {
        self.linkage.lock().parent.clone()
    }

    /// Whether the node is live: not removed nor being removed.
    pub fn is_active(&self) -> bool {
        self.active.is_active()
    }

    /// A symlink's target node.
    pub fn link_target(&self) -> Option<&Arc<KernfsNode>> {
        match &self.data {
            NodeData::Link(t) => Some(t),
            _ => None,
        }
    }

    /// Permission bits (without the type).
    pub fn mode(&self) -> u32 {
        self.mode.load(Relaxed)
    }

    pub(crate) fn mode_uid_gid(&self) -> (u32, u32, u32) {
        // Relaxed: see perm.rs; these order nothing else.
        (
            self.mode.load(Relaxed),
            self.uid.load(Relaxed),
            self.gid.load(Relaxed),
        )
    }

    pub(crate) fn dir(&self) -> Option<&DirData> {
        match &self.data {
            NodeData::Dir(d) => Some(d),
            _ => None,
        }
    }

    pub(crate) fn file(&self) -> Option<&FileData> {
        match &self.data {
            NodeData::File(f) => Some(f),
            _ => None,
        }
    }

    pub(crate) fn touch_dir(&self) {
        let now = now_ns();
        self.mtime_ns.store(now, Relaxed);
        self.ctime_ns.store(now, Relaxed);
    }

    /// The attributes `stat` reports.
    pub fn getattr(&self) -> KernfsAttr {
        let (mode, uid, gid) = self.mode_uid_gid();
        let kind = self.kind();
        let (size, nlink) = match &self.data {
            NodeData::Dir(d) => (0, 2 + d.subdirs()),
            NodeData::File(_) => (ATTR_SIZE, 1),
            NodeData::Link(_) => (0, 1),
        };
        let mtime = self.mtime_ns.load(Relaxed);
        KernfsAttr {
            ino: self.ino,
            kind,
            mode: kind.ifmt() | mode,
            uid,
            gid,
            size,
            nlink,
            atime_ns: mtime,
            mtime_ns: mtime,
            ctime_ns: self.ctime_ns.load(Relaxed),
        }
    }

    /// Applies the change `f` computes from the current `(mode, uid, gid)` (`f` may refuse
    /// it), under the linkage lock: writers serialize there, so a check in `f` still holds
    /// when its change lands. Readers see each field atomically (see perm.rs). `f` runs
    /// under a spinlock: it must be short and take no lock.
    pub(crate) fn update_attr(
        &self,
        f: impl FnOnce((u32, u32, u32)) -> SysResult<SetAttr>,
    ) -> SysResult<()> {
        let _g = self.linkage.lock();
        let attr = f(self.mode_uid_gid())?;
        if let Some(m) = attr.mode {
            self.mode.store(m & 0o7777, Relaxed);
        }
        if let Some(u) = attr.uid {
            self.uid.store(u, Relaxed);
        }
        if let Some(g) = attr.gid {
            self.gid.store(g, Relaxed);
        }
        self.ctime_ns.store(now_ns(), Relaxed);
        Ok(())
    }

    /// `kernfs_get_active`: takes an active reference unless the node was deactivated.
    #[inline]
    pub(crate) fn try_get_active(&self) -> bool {
        self.active.try_get()
    }

    /// `kernfs_put_active`: drops a reference taken by [`try_get_active`](Self::try_get_active).
    #[inline]
    pub(crate) fn put_active(&self) {
        self.active.put(&self.core.drain)
    }

    /// Stops new active references (see `active.rs`); `false` if it was already done.
    pub(crate) fn deactivate(&self) -> bool {
        self.active.deactivate(&self.core.drain)
    }

    /// Runs `f` under an active reference recorded as held by this thread (so that `f`
    /// may remove this node without draining itself), or fails with `ENODEV`.
    pub(crate) fn with_active<R>(&self, f: impl FnOnce() -> SysResult<R>) -> SysResult<R> {
        if !self.try_get_active() {
            return Err(Errno::ENODEV);
        }
        struct Put<'a>(&'a KernfsNode);
        impl Drop for Put<'_> {
            fn drop(&mut self) {
                let addr = self.0 as *const KernfsNode as usize;
                let broken = HELD.with(|h| {
                    let mut h = h.borrow_mut();
                    h.iter()
                        .rposition(|&(a, _)| a == addr)
                        .is_some_and(|i| h.swap_remove(i).1)
                });
                if broken {
                    self.0.active.put_broken(&self.0.core.drain);
                } else {
                    self.0.put_active();
                }
            }
        }
        HELD.with(|h| {
            h.borrow_mut()
                .push((self as *const KernfsNode as usize, false))
        });
        let _put = Put(self);
        f()
    }

    /// Breaks the calling thread's callback references on this (deactivated) node, if it
    /// holds any (see `active.rs`), and tells whether it does: a removal that drains this
    /// node must then wait only for unbroken references.
    pub(crate) fn break_my_refs(&self, q: &DrainQueue) -> bool {
        let addr = self as *const KernfsNode as usize;
        let (held, newly) = HELD.with(|h| {
            let mut h = h.borrow_mut();
            let (mut held, mut newly) = (false, 0);
            for (_, broken) in h.iter_mut().filter(|(a, _)| *a == addr) {
                held = true;
                if !*broken {
                    *broken = true;
                    newly += 1;
                }
            }
            (held, newly)
        });
        if newly > 0 {
            self.active.break_refs(q, newly);
        }
        held
    }
}

thread_local! {
    /// The nodes this thread runs a callback of (under an active reference), innermost
    /// last, each with whether that reference is broken (the callback removed the node or
    /// an ancestor): a removal from a callback must not wait for itself, nor for another
    /// callback doing the same.
    static HELD: RefCell<Vec<(usize, bool)>> = const { RefCell::new(Vec::new()) };
}

impl Drop for KernfsNode {
    fn drop(&mut self) {
        let left = self.active.release_slot(percpu_counters());
        debug_assert_eq!(left, 0, "an active reference outlived its node");
    }
}

impl std::fmt::Debug for KernfsNode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KernfsNode")
            .field("ino", &self.ino)
            .field("kind", &self.kind())
            .field("name", &self.name_lossy())
            .field("active", &self.is_active())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    /// The node owns whole cache lines (see `KernfsNode`'s docs): nothing else can share
    /// the line its opens write. Growing it past four lines is a choice: change this.
    #[test]
    fn a_node_owns_whole_cache_lines() {
        use std::mem::{align_of, size_of};
        assert_eq!(align_of::<super::KernfsNode>(), 64);
        assert_eq!(size_of::<super::KernfsNode>() % 64, 0);
        assert!(
            size_of::<super::KernfsNode>() <= 256,
            "{}",
            size_of::<super::KernfsNode>()
        );
    }
}
