//! kernfs under the VFS: [`KernfsFs`] implements [`FileSystem`] for a [`Kernfs`] tree, so
//! that the system-call API (`scalevfs::Vfs::mount("/sys", KernfsFs::new(tree))`) works on
//! it unchanged, with sysfs's answers.
//!
//! ## Inodes
//!
//! One VFS inode per node, numbered by the node's inode number, its private data the
//! node (`Arc<KernfsNode>`). The inodes are kept in a map `ino → InodeRef`, split over a
//! table of hashed mutexes sized from the CPU count (legacy: one), so that two concurrent
//! lookups of one name get one inode (the inode cache refuses duplicate numbers) while
//! lookups of different nodes mostly take different mutexes. The map holds a reference
//! only for live nodes: [`Kernfs::remove`] tells every mount of the tree (a weak
//! observer registered by [`KernfsFs::new`]) and each forgets the removed nodes' inodes;
//! a lookup racing with the removal maps nothing for a deactivated node (checked under
//! the map mutex). So an embedder that creates and removes nodes does not grow the map;
//! the inodes themselves go with the last dentry (a walk finds them stale) or with the
//! superblock (`kill_sb`). The map is only touched on a dcache miss: hot path walks are
//! served by the dcache.
//!
//! ## Revalidation (kernfs's `d_revalidate` and `kernfs_refresh_inode`)
//!
//! The embedder changes the tree behind the VFS, so the superblock `revalidates()`: every
//! cached answer in a kernfs directory is checked on each walk. A positive entry stands
//! while its node is active and still is the directory's child of that name
//! ([`Kernfs::is_child`]: a lock-free search that takes no reference, so walks through
//! shared directories write no shared cache line); a negative entry is
//! never trusted (the lockless lookup that replaces it is as cheap as a check). Attributes
//! the embedder changed (mode, owner, link count) are copied into the inode there, and by
//! `getattr` before `stat`, but only when they differ, so walks write no shared inode.
//! The legacy design takes the tree rwsem for reading there, as Linux's
//! `kernfs_dop_revalidate` does, and refuses rcu-walk (`-ECHILD`) as Linux does; the
//! scalable design revalidates in rcu-walk too (`revalidate_rcu`), so a walk through
//! `/sys/class/...` takes no reference on the shared directories' dentries.
//!
//! ## Open files
//!
//! `open` creates a [`KernfsOpenFile`] kept in the VFS open file; reads and writes go to
//! its `read_at`/`write_at` at the VFS position (seq_file semantics: `show` on the first
//! read, partial reads from the buffer, `ENODEV` after removal), `lseek` to its `llseek`
//! (the 2^31-1 limit, `SEEK_END` relative to 4096, `ENODEV` after removal). The VFS
//! checked permission with the caller's credentials; kernfs's own open checks (no `w`
//! bit: `EACCES` even for root) run as root. Dropping the open file is `release`. Reads
//! leave the file's atime alone, as on sysfs (its inode carries `FS_NOATIME_FL`, which
//! users cannot see: no `FS_IOC_GETFLAGS` here); listing a directory updates its atime.
//!
//! ## Poll and epoll
//!
//! [`FileSystem::pollable`] gives the open file's [`KernfsFile`], a VFS [`Pollable`]: its
//! mask is [`KernfsOpenFile::poll`]; its VFS wait queue is woken, with the event mask, by a
//! kernfs waiter registered on first use (so `Kernfs::notify` reaches `poll(2)` sleepers
//! and epoll items). The waiter holds only the wait queue (an `Arc`), never the file, so
//! the file is freed with its last reference; `release` unhooks epoll items and the
//! waiter first. Lock order: kernfs poll wait queue → VFS wait queue → epoll locks (the
//! waker runs under the first; nothing takes them the other way round).
//!
//! ## Namespace changes from users
//!
//! As sysfs: `mkdir`, `mknod`, `symlink`, `link`, `unlink`, `rmdir`, `rename` are `EPERM`;
//! `O_CREAT` of a new name is `EACCES`. The VFS checks permission on the directory first,
//! so a non-root caller sees `EACCES` for all of them, as on Linux.
//!
//! Lock order: VFS locks (inode rwsem) → kernfs locks (see the crate docs; a removal
//! from a callback forgets inodes under the open file's mutex) → inode-map mutex (a leaf:
//! nothing else is taken under it but the inode cache's bucket locks).

use std::any::Any;
use std::collections::HashMap;
use std::sync::{Arc, OnceLock, Weak};

use scalevfs_primitives::hashed::HashedMutexes;
use scalevfs_primitives::lockstat::LockClass;
use scalevfs_vfs::epoll::{release_file_from_epoll, EpLinks};
use scalevfs_vfs::fileattr::FS_NOATIME_FL;
use scalevfs_vfs::poll::{Pollable, WaitQueue};
use scalevfs_vfs::{
    DirEmit, Errno, FileSystem, Inode, InodeRef, NewInode, OpenFile, SuperBlock, SysResult,
    Timespec,
};

use crate::node::{KernfsAttr, NodeKind, SetAttr};
use crate::perm::Creds;
use crate::{Kernfs, KernfsNode, KernfsOpenFile, Locking, RemovalObserver, WaiterKey};

/// Lock class of the hashed inode-map mutexes.
pub static INODE_MAP_CLASS: LockClass = LockClass::new("kernfs_vfs_inode_map");

/// A [`Kernfs`] tree as a VFS file system. See the module docs.
pub struct KernfsFs {
    fs: Kernfs,
    inodes: HashedMutexes<HashMap<u64, InodeRef>>,
}

/// The node behind a kernfs inode.
fn node_of(inode: &Inode) -> SysResult<&Arc<KernfsNode>> {
    inode.private::<Arc<KernfsNode>>().ok_or(Errno::EINVAL)
}

/// An open attribute file as the VFS keeps it (the open file's private data, shared
/// with epoll items through the `Arc`). See the module docs.
pub struct KernfsFile {
    of: KernfsOpenFile,
    wq: Arc<WaitQueue>,
    links: EpLinks,
    /// The kernfs waiter waking `wq`, registered by the first `pollable`.
    waiter: OnceLock<Option<WaiterKey>>,
}

impl KernfsFile {
    /// The kernfs open file.
    pub fn open_file(&self) -> &KernfsOpenFile {
        &self.of
    }
}

impl Pollable for KernfsFile {
    fn poll(&self) -> u32 {
        self.of.poll()
    }
    fn wait_queue(&self) -> Option<&WaitQueue> {
        Some(&self.wq)
    }
    fn ep_links(&self) -> Option<&EpLinks> {
        Some(&self.links)
    }
}

/// The kernfs file behind a VFS open file (none for directories and `O_PATH`).
fn file_of(f: &OpenFile) -> Option<&Arc<KernfsFile>> {
    f.private::<Arc<KernfsFile>>()
}

fn open_of(f: &OpenFile) -> SysResult<&KernfsOpenFile> {
    file_of(f).map(|k| &k.of).ok_or(Errno::EBADF)
}

fn ts(ns: i64) -> Timespec {
    Timespec {
        sec: ns.div_euclid(1_000_000_000),
        nsec: ns.rem_euclid(1_000_000_000),
    }
}

/// Copies what differs of `a` into `inode` (`kernfs_refresh_inode`). Reads first, so an
/// unchanged inode (the common case) is not written.
fn refresh(inode: &Inode, a: &KernfsAttr) {
    if inode.mode() != a.mode {
        inode.set_perm(a.mode);
    }
    if inode.uid() != a.uid {
        inode.set_uid(a.uid);
    }
    if inode.gid() != a.gid {
        inode.set_gid(a.gid);
    }
    if inode.nlink() != a.nlink {
        inode.set_nlink(a.nlink);
    }
    if inode.size() != a.size {
        inode.set_size(a.size);
    }
    for (t, ns) in [(&inode.mtime, a.mtime_ns), (&inode.ctime, a.ctime_ns)] {
        let v = ts(ns);
        if t.get() != v {
            t.set(v);
        }
    }
}

impl KernfsFs {
    /// The file system of `fs`'s tree, to mount (several mounts share the tree).
    pub fn new(fs: Kernfs) -> Arc<KernfsFs> {
        let inodes = HashedMutexes::new_for_class(fs.locking(), &INODE_MAP_CLASS);
        Arc::new_cyclic(|me: &Weak<KernfsFs>| {
            fs.add_removal_observer(me.clone());
            KernfsFs { fs, inodes }
        })
    }

    /// The tree.
    pub fn kernfs(&self) -> &Kernfs {
        &self.fs
    }

    /// How many inodes the inode map holds (one per node reached through the VFS and not
    /// removed since).
    pub fn cached_inodes(&self) -> usize {
        (0..self.inodes.len())
            .map(|i| self.inodes.get(i).lock().len())
            .sum()
    }

    fn new_inode(sb: &SuperBlock, node: &Arc<KernfsNode>) -> InodeRef {
        let a = node.getattr();
        let i = sb.new_inode(NewInode {
            ino: a.ino,
            mode: a.mode,
            uid: a.uid,
            gid: a.gid,
            nlink: a.nlink,
            rdev: 0,
            private: Box::new(node.clone()),
        });
        i.atime.set(ts(a.atime_ns));
        // Reading a sysfs file does not update its atime (`seq_read_iter` never calls
        // `file_accessed`; directories' `iterate_dir` does), so attribute files carry the
        // no-atime flag that the VFS's relatime update checks: two readers of one file
        // then write nothing of its inode. Users cannot see the flag: kernfs has no
        // `fileattr_flags`, so `FS_IOC_GETFLAGS` is `ENOTTY`.
        if a.kind == NodeKind::File {
            i.set_fs_flags(FS_NOATIME_FL);
        }
        refresh(&i, &a);
        i
    }

    /// The inode of `node` (`kernfs_get_inode`): the mapped one, or a new one; `None` if
    /// the node is being removed.
    fn iget(&self, sb: &SuperBlock, node: &Arc<KernfsNode>) -> Option<InodeRef> {
        let ino = node.ino();
        let mut map = self.inodes.lock_key(ino);
        if let Some(i) = map.get(&ino) {
            return Some(i.clone());
        }
        // Under the map mutex: a removal deactivates the node before it forgets it under
        // this mutex, so either that forget comes later and drops what is inserted here,
        // or this sees the node inactive (the mutex orders the deactivation before).
        if !node.is_active() {
            return None;
        }
        let i = Self::new_inode(sb, node);
        map.insert(ino, i.clone());
        Some(i)
    }

    /// Forgets the inode of a removed node (the VFS frees it with its last user).
    fn forget(&self, node: &KernfsNode) {
        let ino = node.ino();
        let old = self.inodes.lock_key(ino).remove(&ino);
        drop(old); // outside the map mutex: the last reference evicts
    }
}

impl RemovalObserver for KernfsFs {
    fn removed(&self, nodes: &[Arc<KernfsNode>]) {
        for n in nodes {
            self.forget(n);
        }
    }
}

impl FileSystem for KernfsFs {
    fn fs_type(&self) -> &'static str {
        "sysfs"
    }

    /// sysfs's: `SYSFS_MAGIC`, no blocks and no inode counts.
    fn statfs(&self, _sb: &SuperBlock) -> scalevfs_vfs::Statfs {
        scalevfs_vfs::Statfs::empty(0x6265_6572)
    }

    fn fill_super(&self, sb: &SuperBlock) -> SysResult<InodeRef> {
        Ok(Self::new_inode(sb, self.fs.root()))
    }

    fn kill_sb(&self, _root: &Inode) {
        for i in 0..self.inodes.len() {
            let m = std::mem::take(&mut *self.inodes.get(i).lock());
            drop(m);
        }
    }

    /// Nothing to do: a live node's inode is held by the map until the node is removed
    /// (or the superblock dies), so an inode is evicted only after it left the map.
    fn evict_inode(&self, _inode: &Inode) {}

    fn lookup(&self, dir: &Inode, name: &[u8]) -> SysResult<Option<InodeRef>> {
        match self.fs.lookup(node_of(dir)?, name) {
            Ok(n) => Ok(self.iget(dir.sb(), &n)),
            Err(Errno::ENOENT) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Positions: 0 is `.`, 1 is `..`, then `2 + cookie` after the entry with that kernfs
    /// cookie (cookies start at 1 and are never reused, so positions stay valid).
    fn readdir(
        &self,
        dir: &Inode,
        parent_ino: u64,
        pos: i64,
        emit: &mut dyn FnMut(DirEmit<'_>) -> bool,
    ) -> SysResult<bool> {
        let node = node_of(dir)?;
        let mut pos = pos.max(0);
        for (p, name, ino) in [(0, &b"."[..], dir.ino), (1, &b".."[..], parent_ino)] {
            if pos == p {
                let e = DirEmit {
                    ino,
                    next_pos: p + 1,
                    d_type: libc::DT_DIR,
                    name,
                };
                if !emit(e) {
                    return Ok(false);
                }
                pos = p + 1;
            }
        }
        self.fs.readdir_from(node, (pos - 2) as u64, |e| {
            emit(DirEmit {
                ino: e.ino,
                next_pos: (e.cookie as i64).saturating_add(2),
                d_type: e.kind.d_type(),
                name: &e.name,
            })
        })
    }

    fn read(&self, _: &Inode, _: u64, _: &mut [u8]) -> SysResult<usize> {
        // Reads come through `read_file` with the open file's seq_file state.
        Err(Errno::EINVAL)
    }

    fn write(&self, _: &Inode, _: u64, _: &[u8]) -> SysResult<usize> {
        Err(Errno::EINVAL)
    }

    fn read_file(&self, f: &OpenFile, off: u64, buf: &mut [u8]) -> SysResult<usize> {
        open_of(f)?.read_at(buf, off as i64)
    }

    fn write_file(&self, f: &OpenFile, off: u64, buf: &[u8]) -> SysResult<usize> {
        open_of(f)?.write_at(buf, off as i64)
    }

    /// `O_TRUNC` and `truncate` succeed without effect (`kernfs_iop_setattr` ignores the
    /// size).
    fn setsize(&self, _: &Inode, _: u64) -> SysResult<()> {
        Ok(())
    }

    fn fallocate(&self, _: &Inode, _: i32, _: u64, _: u64) -> SysResult<()> {
        Err(Errno::EOPNOTSUPP)
    }

    fn seek_data(&self, _: &Inode, off: u64, _: bool) -> SysResult<u64> {
        // Not reached: `llseek` handles every seek of an attribute file.
        Ok(off)
    }

    fn readlink(&self, inode: &Inode) -> SysResult<Vec<u8>> {
        let node = node_of(inode)?;
        if !node.is_active() {
            return Err(Errno::ENOENT);
        }
        self.fs.readlink(node)
    }

    fn blocks(&self, _: &Inode) -> u64 {
        0
    }

    fn open(&self, inode: &Inode, flags: i32) -> SysResult<Option<Box<dyn Any + Send + Sync>>> {
        let node = node_of(inode)?;
        if node.kind() == NodeKind::Dir {
            return if node.is_active() {
                Ok(None)
            } else {
                Err(Errno::ENOENT)
            };
        }
        // The VFS checked the caller's permission and the creation flags.
        let of = self.fs.open(
            node,
            flags & !(libc::O_CREAT | libc::O_EXCL | libc::O_TRUNC),
            &Creds::ROOT,
        )?;
        Ok(Some(Box::new(Arc::new(KernfsFile {
            of,
            wq: Arc::new(WaitQueue::new()),
            links: EpLinks::new(),
            waiter: OnceLock::new(),
        }))))
    }

    fn release(&self, _: &Inode, private: Box<dyn Any + Send + Sync>) {
        if let Ok(k) = private.downcast::<Arc<KernfsFile>>() {
            // eventpoll_release, then the kernfs waiter (so nothing wakes a dead queue).
            release_file_from_epoll(&**k);
            if let Some(Some(key)) = k.waiter.get() {
                k.of.remove_waiter(*key);
            }
        }
    }

    fn pollable(&self, f: &OpenFile) -> Option<Arc<dyn Pollable>> {
        let k = file_of(f)?;
        k.waiter.get_or_init(|| {
            let wq = k.wq.clone();
            k.of.add_waiter(Arc::new(move |mask| wq.wake(mask)))
        });
        Some(k.clone())
    }

    fn llseek(&self, f: &OpenFile, pos: i64, off: i64, whence: i32) -> Option<SysResult<i64>> {
        // The VFS keeps the position.
        Some(file_of(f)?.of.llseek_from(pos, off, whence))
    }

    fn setattr(&self, inode: &Inode, mode: u32, uid: u32, gid: u32) -> SysResult<()> {
        let attr = SetAttr {
            mode: Some(mode & 0o7777),
            uid: Some(uid),
            gid: Some(gid),
        };
        self.fs.setattr(node_of(inode)?, &attr)
    }

    fn getattr(&self, inode: &Inode) {
        if let Ok(node) = node_of(inode) {
            if let Ok(a) = self.fs.getattr(node) {
                refresh(inode, &a);
            }
        }
    }

    fn revalidates(&self) -> bool {
        true
    }

    /// Lock-free in the scalable design ([`Kernfs::is_child`] takes no reference and
    /// blocks on nothing), so path walks through kernfs stay in rcu-walk and take no
    /// reference on the shared directories' dentries (Linux's kernfs answers `-ECHILD`
    /// and walks them with references). The legacy design falls back to ref-walk, as
    /// Linux does. A stale entry falls back too (ref-walk then forgets its inode).
    fn revalidate_rcu(&self, dir: &Inode, name: &[u8], inode: &Inode) -> bool {
        if self.fs.locking() == Locking::Legacy {
            return false;
        }
        match (node_of(dir), node_of(inode)) {
            (Ok(d), Ok(n)) if self.fs.is_child(d, name, n) => {
                refresh(inode, &n.getattr());
                true
            }
            _ => false,
        }
    }

    fn revalidate(&self, dir: &Inode, name: &[u8], inode: Option<&Inode>) -> bool {
        let (Some(inode), Ok(dnode)) = (inode, node_of(dir)) else {
            return false;
        };
        let Ok(node) = node_of(inode) else {
            return false;
        };
        if !self.fs.is_child(dnode, name, node) {
            if !node.is_active() {
                self.forget(node);
            }
            return false;
        }
        refresh(inode, &node.getattr());
        true
    }
}
