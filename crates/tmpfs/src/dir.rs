//! Directory operations: names in, out and across directories, and `readdir`, over a
//! [`Directory`] of one of two designs, chosen by the superblock's `Locking`:
//!
//! * **Scalable** ([`HashedDir`], `hashdir`): entries in hashed buckets, each with its own
//!   lock and cache line; the directory's size, link count and times are counted per
//!   bucket and folded when `stat` asks ([`FileSystem::dir_attrs`]), so that changes of
//!   names in different buckets write no common line.
//! * **Legacy** (the ablation): one [`DirMap`] behind one `RwLock`, and the directory
//!   inode's size, link count and times updated on every change.
//!
//! The VFS calls in with the directory held for the change: exclusively (its `rwsem`),
//! or, for a hashed directory ([`FileSystem::shared_name_changes`]), shared with a lock
//! on each name changed (`scalevfs_vfs::core::dirlock`), so that two changes of one name
//! never meet here but changes of different names may; the bucket locks keep each
//! bucket consistent and order changes against lookups and readdir. Lock order: the
//! VFS's directory locks -> directory lock or bucket lock (leaves; a rename within a
//! hashed directory takes two buckets in index order, a rename across directories one
//! directory at a time, a scan one bucket at a time).
//!
//! [`FileSystem::dir_attrs`]: scalevfs_vfs::FileSystem::dir_attrs
//! [`FileSystem::shared_name_changes`]: scalevfs_vfs::FileSystem::shared_name_changes

use crate::dirmap::DirMap;
use crate::hashdir::{HashedDir, Pending};
use crate::pages::FilePages;
use crate::DIR_OFFSET_EOD;
use crate::{check_name, Node, Tmpfs, BOGO_DIRENT_SIZE};
use parking_lot::RwLock;
use scalevfs_primitives::Locking;
use scalevfs_vfs::fs::{DirAttrs, DirEmit};
use scalevfs_vfs::pipe::FifoSlot;
use scalevfs_vfs::{Errno, Inode, InodeRef, SysResult};

/// A directory's entries, in one of two designs (module docs).
pub(crate) enum Directory {
    /// The legacy design: one map, one lock; the inode's fields are kept current.
    Locked(RwLock<DirMap>),
    /// The scalable design: hashed buckets; size, link count and times folded on read.
    Hashed(HashedDir),
}

impl Directory {
    pub(crate) fn new(locking: Locking) -> Directory {
        match locking {
            Locking::Legacy => Directory::Locked(RwLock::new(DirMap::default())),
            Locking::Scalable => Directory::Hashed(HashedDir::default()),
        }
    }

    pub(crate) fn get(&self, name: &[u8]) -> Option<InodeRef> {
        match self {
            Directory::Locked(m) => m.read().get(name).cloned(),
            Directory::Hashed(h) => h.get(name),
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        match self {
            Directory::Locked(m) => m.read().is_empty(),
            Directory::Hashed(h) => h.is_empty(),
        }
    }

    /// Every entry's inode, taken out (unmount, eviction).
    pub(crate) fn drain(&self) -> Vec<InodeRef> {
        match self {
            Directory::Locked(m) => std::mem::take(&mut *m.write())
                .by_cookie
                .into_values()
                .map(|(_, i)| i)
                .collect(),
            Directory::Hashed(h) => h.drain(),
        }
    }

    /// Adds `name` -> `inode` (`EEXIST` if the name is taken).
    fn insert(&self, name: &[u8], inode: InodeRef) -> SysResult<()> {
        match self {
            Directory::Locked(m) => {
                let mut m = m.write();
                if m.get(name).is_some() {
                    return Err(Errno::EEXIST);
                }
                m.insert(name, inode);
                Ok(())
            }
            Directory::Hashed(h) => h.insert(name, inode),
        }
    }

    fn remove(&self, name: &[u8]) -> Option<InodeRef> {
        match self {
            Directory::Locked(m) => m.write().remove(name),
            Directory::Hashed(h) => h.remove(name),
        }
    }

    /// Within this directory: `from` takes the name `to`; returns what `to` named.
    fn rename_within(&self, from: &[u8], to: &[u8]) -> SysResult<Option<InodeRef>> {
        match self {
            Directory::Locked(m) => {
                let mut m = m.write();
                let r = m.remove(to);
                let src = m.remove(from).ok_or(Errno::ENOENT)?;
                m.insert(to, src);
                Ok(r)
            }
            Directory::Hashed(h) => h.rename_within(from, to),
        }
    }

    /// `name` now names `inode`; returns what it named.
    fn replace(&self, name: &[u8], inode: InodeRef) -> SysResult<Option<InodeRef>> {
        match self {
            Directory::Locked(m) => {
                let mut m = m.write();
                let r = m.remove(name);
                m.insert(name, inode);
                Ok(r)
            }
            Directory::Hashed(h) => h.replace(name, inode),
        }
    }

    /// The existing entry `name` now names `inode` (`RENAME_EXCHANGE`).
    fn swap_inode(&self, name: &[u8], inode: InodeRef) -> Option<InodeRef> {
        match self {
            Directory::Locked(m) => {
                let mut m = m.write();
                let r = m.remove(name);
                m.insert(name, inode);
                r
            }
            Directory::Hashed(h) => h.swap_inode(name, inode),
        }
    }

    /// Legacy only: the directory inode's size, link count and times after a change of
    /// `entries` names and `subdirs` subdirectories (the hashed design counts per bucket).
    fn account(&self, dir: &Inode, entries: i64, subdirs: i32) {
        if let Directory::Locked(_) = self {
            let size = dir
                .size()
                .saturating_add_signed(entries * BOGO_DIRENT_SIZE as i64);
            dir.set_size(size);
            for _ in 0..subdirs.max(0) {
                dir.inc_nlink();
            }
            for _ in subdirs.min(0)..0 {
                dir.dec_nlink();
            }
            dir.touch_mc();
        }
    }

    /// See [`FileSystem::dir_attrs`](scalevfs_vfs::FileSystem::dir_attrs).
    pub(crate) fn attrs(&self, dir: &Inode) -> Option<DirAttrs> {
        match self {
            Directory::Locked(_) => None,
            Directory::Hashed(h) => Some(h.attrs(dir)),
        }
    }

    /// See [`FileSystem::mtime_set`](scalevfs_vfs::FileSystem::mtime_set).
    pub(crate) fn mtime_set(&self) {
        if let Directory::Hashed(h) = self {
            h.clear_times();
        }
    }
}

/// The directory an inode is (`ENOTDIR` otherwise).
pub(crate) fn directory(inode: &Inode) -> SysResult<&Directory> {
    match crate::node(inode) {
        Node::Dir(d) => Ok(d),
        _ => Err(Errno::ENOTDIR),
    }
}

impl Tmpfs {
    pub(crate) fn dir_kill_sb(&self, root: &Inode) {
        // Iterative, so a deep tree cannot overflow the stack: drain a directory before
        // dropping the last reference to it.
        let mut stack: Vec<InodeRef> = Vec::new();
        let drain = |d: &Inode, stack: &mut Vec<InodeRef>| {
            if let Ok(d) = directory(d) {
                stack.extend(d.drain().into_iter().filter(|i| i.is_dir()));
            }
        };
        drain(root, &mut stack);
        while let Some(d) = stack.pop() {
            drain(&d, &mut stack);
        }
    }

    pub(crate) fn dir_lookup(&self, dir: &Inode, name: &[u8]) -> SysResult<Option<InodeRef>> {
        Ok(directory(dir)?.get(name))
    }

    pub(crate) fn dir_create(
        &self,
        dir: &Inode,
        name: &[u8],
        mode: u32,
        uid: u32,
        gid: u32,
    ) -> SysResult<InodeRef> {
        let node = match mode & libc::S_IFMT {
            libc::S_IFREG => Node::File(FilePages::default()),
            libc::S_IFDIR => Node::Dir(Box::new(Directory::new(dir.sb().locking))),
            libc::S_IFIFO => Node::Fifo(FifoSlot::default()),
            _ => Node::Special,
        };
        let i = self.new_inode(dir.sb(), (mode, 0), uid, gid, node)?;
        self.add_entry(dir, name, i.clone())?;
        Ok(i)
    }

    pub(crate) fn dir_mknod_device(
        &self,
        dir: &Inode,
        name: &[u8],
        mode: u32,
        rdev: u64,
        uid: u32,
        gid: u32,
    ) -> SysResult<InodeRef> {
        let i = self.new_inode(dir.sb(), (mode, rdev), uid, gid, Node::Special)?;
        self.add_entry(dir, name, i.clone())?;
        Ok(i)
    }

    pub(crate) fn dir_symlink(
        &self,
        dir: &Inode,
        name: &[u8],
        target: &[u8],
        uid: u32,
        gid: u32,
    ) -> SysResult<InodeRef> {
        let i = self.new_inode(
            dir.sb(),
            (libc::S_IFLNK | 0o777, 0),
            uid,
            gid,
            Node::Symlink(target.into()),
        )?;
        i.set_size(target.len() as u64);
        self.add_entry(dir, name, i.clone())?;
        Ok(i)
    }

    pub(crate) fn dir_link(&self, dir: &Inode, name: &[u8], inode: &InodeRef) -> SysResult<()> {
        self.add_entry(dir, name, inode.clone())?;
        inode.inc_nlink();
        inode.touch_c();
        Ok(())
    }

    pub(crate) fn dir_unlink(&self, dir: &Inode, name: &[u8], inode: &Inode) -> SysResult<()> {
        let d = directory(dir)?;
        let removed = d.remove(name).ok_or(Errno::ENOENT)?;
        d.account(dir, -1, 0);
        inode.dec_nlink();
        inode.touch_c();
        // The entry's reference goes last: the inode may be evicted here.
        drop(removed);
        Ok(())
    }

    pub(crate) fn dir_rmdir(&self, dir: &Inode, name: &[u8], inode: &Inode) -> SysResult<()> {
        if !directory(inode)?.is_empty() {
            return Err(Errno::ENOTEMPTY);
        }
        let d = directory(dir)?;
        let removed = d.remove(name).ok_or(Errno::ENOENT)?;
        d.account(dir, -1, -1);
        inode.set_nlink(0);
        inode.touch_c();
        drop(removed);
        Ok(())
    }

    pub(crate) fn dir_rename_whiteout(
        &self,
        old_dir: &Inode,
        old_name: &[u8],
        new_dir: &Inode,
        new_name: &[u8],
        (uid, gid): (u32, u32),
    ) -> SysResult<()> {
        // shmem_rename2: a non-empty target directory first, then the whiteout (it may
        // fail: ENOSPC), then the rename; the whiteout takes the old name.
        check_name(new_name)?;
        if let Some(t) = directory(new_dir)?.get(new_name) {
            if t.is_dir() && !directory(&t)?.is_empty() {
                return Err(Errno::ENOTEMPTY);
            }
        }
        let w = self.new_inode(old_dir.sb(), (libc::S_IFCHR, 0), uid, gid, Node::Special)?;
        self.dir_rename(old_dir, old_name, new_dir, new_name, 0)?;
        self.add_entry(old_dir, old_name, w)
    }

    pub(crate) fn dir_rename(
        &self,
        old_dir: &Inode,
        old_name: &[u8],
        new_dir: &Inode,
        new_name: &[u8],
        flags: u32,
    ) -> SysResult<()> {
        check_name(new_name)?;
        let same = std::ptr::eq(old_dir, new_dir);
        let (od, nd) = (directory(old_dir)?, directory(new_dir)?);
        let src = od.get(old_name).ok_or(Errno::ENOENT)?;
        let tgt = nd.get(new_name);
        let moved_dirs = |d: &InodeRef| i32::from(d.is_dir());
        if flags & libc::RENAME_EXCHANGE != 0 {
            let tgt = tgt.ok_or(Errno::ENOENT)?;
            match od {
                Directory::Hashed(h) if same => h.exchange_within(old_name, new_name)?,
                _ => {
                    od.swap_inode(old_name, tgt.clone());
                    nd.swap_inode(new_name, src.clone());
                }
            }
            let (into_new, into_old) = if same {
                (0, 0)
            } else {
                let d = moved_dirs(&src) - moved_dirs(&tgt);
                (d, -d)
            };
            od.account(old_dir, 0, into_old);
            nd.account(new_dir, 0, into_new);
            src.touch_c();
            tgt.touch_c();
            return Ok(());
        }
        if let Some(t) = &tgt {
            if t.is_dir() && !directory(t)?.is_empty() {
                return Err(Errno::ENOTEMPTY);
            }
        }
        let removed_target = if same {
            od.rename_within(old_name, new_name)?
        } else {
            let r = nd.replace(new_name, src.clone())?;
            od.remove(old_name);
            r
        };
        let gone_dirs = removed_target.as_ref().map_or(0, moved_dirs);
        let gone = i64::from(removed_target.is_some());
        if same {
            od.account(old_dir, -gone, -gone_dirs);
        } else {
            od.account(old_dir, -1, -moved_dirs(&src));
            nd.account(new_dir, 1 - gone, moved_dirs(&src) - gone_dirs);
        }
        if let Some(t) = &removed_target {
            if t.is_dir() {
                t.set_nlink(0);
            } else {
                t.dec_nlink();
            }
            t.touch_c();
        }
        src.touch_c();
        drop(removed_target);
        Ok(())
    }

    pub(crate) fn dir_readdir(
        &self,
        dir: &Inode,
        parent_ino: u64,
        pos: i64,
        emit: &mut dyn FnMut(DirEmit<'_>) -> bool,
    ) -> SysResult<bool> {
        let d = directory(dir)?;
        let mut pos = pos.max(0) as u64;
        if pos == 0 {
            if !emit(DirEmit {
                ino: dir.ino,
                next_pos: 1,
                d_type: libc::DT_DIR,
                name: b".",
            }) {
                return Ok(false);
            }
            pos = 1;
        }
        match d {
            Directory::Locked(m) => Ok(m.read().readdir(parent_ino, pos, emit)),
            Directory::Hashed(h) => {
                // `..` reports the first entry's position: it goes out with the entries.
                let dotdot = (pos == 1).then(|| Pending::dotdot(parent_ino));
                Ok(pos >= DIR_OFFSET_EOD || h.readdir(pos, dotdot, emit))
            }
        }
    }

    /// Adds `inode` to `dir` under `name` (caller holds the VFS dir rwsem).
    pub(crate) fn add_entry(&self, dir: &Inode, name: &[u8], inode: InodeRef) -> SysResult<()> {
        check_name(name)?;
        let d = directory(dir)?;
        let subdir = i32::from(inode.is_dir());
        d.insert(name, inode)?;
        d.account(dir, 1, subdir);
        Ok(())
    }
}
