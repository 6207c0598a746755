//! Directory operations: names in, out and across directories, and `readdir`.
//!
//! A directory's entries live in a [`DirMap`] behind the directory's own `RwLock`
//! (`Node::Dir`). The VFS calls in with the directory's `rwsem` held (exclusively for
//! name changes), so the map lock only orders these changes against lookups and readdir
//! that run under the `rwsem` shared. Lock order: VFS inode `rwsem` -> directory lock
//! (a leaf); a rename takes the two directories' locks one after the other, never nested.

use crate::dirmap::DirMap;
use crate::pages::FilePages;
use crate::{check_name, dir_map, Node, Tmpfs, BOGO_DIRENT_SIZE};
use crate::{DIR_OFFSET_EOD, DIR_OFFSET_FIRST};
use parking_lot::RwLock;
use scalevfs_vfs::fs::DirEmit;
use scalevfs_vfs::pipe::FifoSlot;
use scalevfs_vfs::{Errno, Inode, InodeRef, SysResult};

impl Tmpfs {
    pub(crate) fn dir_kill_sb(&self, root: &Inode) {
        // Iterative, so a deep tree cannot overflow the stack: drain a directory before
        // dropping the last reference to it.
        let mut stack: Vec<InodeRef> = Vec::new();
        let drain = |d: &Inode, stack: &mut Vec<InodeRef>| {
            if let Ok(m) = dir_map(d) {
                let entries = std::mem::take(&mut *m.write());
                for (_, (_, i)) in entries.by_cookie {
                    if i.is_dir() {
                        stack.push(i);
                    }
                }
            }
        };
        drain(root, &mut stack);
        while let Some(d) = stack.pop() {
            drain(&d, &mut stack);
        }
    }

    pub(crate) fn dir_lookup(&self, dir: &Inode, name: &[u8]) -> SysResult<Option<InodeRef>> {
        Ok(dir_map(dir)?.read().get(name).cloned())
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
            libc::S_IFDIR => Node::Dir(Box::new(RwLock::new(DirMap::default()))),
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
        let removed = dir_map(dir)?.write().remove(name).ok_or(Errno::ENOENT)?;
        dir.set_size(dir.size().saturating_sub(BOGO_DIRENT_SIZE));
        dir.touch_mc();
        inode.dec_nlink();
        inode.touch_c();
        // The entry's reference goes last: the inode may be evicted here.
        drop(removed);
        Ok(())
    }

    pub(crate) fn dir_rmdir(&self, dir: &Inode, name: &[u8], inode: &Inode) -> SysResult<()> {
        if !dir_map(inode)?.read().is_empty() {
            return Err(Errno::ENOTEMPTY);
        }
        let removed = dir_map(dir)?.write().remove(name).ok_or(Errno::ENOENT)?;
        dir.set_size(dir.size().saturating_sub(BOGO_DIRENT_SIZE));
        dir.dec_nlink();
        dir.touch_mc();
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
        if let Some(t) = dir_map(new_dir)?.read().get(new_name) {
            if t.is_dir() && !dir_map(t)?.read().is_empty() {
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
        let src = dir_map(old_dir)?
            .read()
            .get(old_name)
            .cloned()
            .ok_or(Errno::ENOENT)?;
        let tgt = dir_map(new_dir)?.read().get(new_name).cloned();
        if flags & libc::RENAME_EXCHANGE != 0 {
            let tgt = tgt.ok_or(Errno::ENOENT)?;
            {
                let mut om = dir_map(old_dir)?.write();
                om.remove(old_name);
                om.insert(old_name, tgt.clone());
            }
            {
                let mut nm = dir_map(new_dir)?.write();
                nm.remove(new_name);
                nm.insert(new_name, src.clone());
            }
            if !same && src.is_dir() != tgt.is_dir() {
                if src.is_dir() {
                    new_dir.inc_nlink();
                    old_dir.dec_nlink();
                } else {
                    old_dir.inc_nlink();
                    new_dir.dec_nlink();
                }
            }
            old_dir.touch_mc();
            new_dir.touch_mc();
            src.touch_c();
            tgt.touch_c();
            return Ok(());
        }
        if let Some(t) = &tgt {
            if t.is_dir() {
                if !dir_map(t)?.read().is_empty() {
                    return Err(Errno::ENOTEMPTY);
                }
                t.set_nlink(0);
                new_dir.dec_nlink();
            } else {
                t.dec_nlink();
            }
            t.touch_c();
        }
        let removed_target = {
            let mut nm = dir_map(new_dir)?.write();
            let r = nm.remove(new_name);
            if same {
                nm.remove(old_name);
            }
            nm.insert(new_name, src.clone());
            r
        };
        if !same {
            dir_map(old_dir)?.write().remove(old_name);
            if src.is_dir() {
                old_dir.dec_nlink();
                new_dir.inc_nlink();
            }
        }
        old_dir.set_size(old_dir.size().saturating_sub(BOGO_DIRENT_SIZE));
        if removed_target.is_none() {
            new_dir.set_size(new_dir.size() + BOGO_DIRENT_SIZE);
        }
        old_dir.touch_mc();
        new_dir.touch_mc();
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
        let m = dir_map(dir)?.read();
        // Entries are listed newest first, in falling cookie order, as Linux 6.14+ lists
        // tmpfs directories; each entry's `d_off` is the next (older) entry's cookie, so a
        // scan that resumes from it never returns an entry twice nor skips one that stayed.
        let newest = || {
            m.by_cookie
                .keys()
                .next_back()
                .map_or(DIR_OFFSET_EOD, |&c| c.into())
        };
        if pos == 1 {
            if !emit(DirEmit {
                ino: parent_ino,
                next_pos: newest() as i64,
                d_type: libc::DT_DIR,
                name: b"..",
            }) {
                return Ok(false);
            }
            pos = DIR_OFFSET_FIRST;
        }
        if pos >= DIR_OFFSET_EOD {
            return Ok(true);
        }
        let from = if pos <= DIR_OFFSET_FIRST {
            u64::MAX
        } else {
            pos
        };
        // `from` is below DIR_OFFSET_EOD, or u64::MAX for "from the newest".
        let from = u32::try_from(from).unwrap_or(u32::MAX);
        let mut entries = m.by_cookie.range(..=from).rev().peekable();
        while let Some((_, (name, inode))) = entries.next() {
            let next_pos = entries.peek().map_or(DIR_OFFSET_EOD, |(&c, _)| c.into());
            if !emit(DirEmit {
                ino: inode.ino,
                next_pos: next_pos as i64,
                d_type: scalevfs_vfs::core::d_type_of_mode(inode.mode()),
                // SAFETY: `m` (the directory lock) keeps the entry, and so its name.
                name: unsafe { name.bytes() },
            }) {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Adds `inode` to `dir` under `name` (caller holds the VFS dir rwsem).
    pub(crate) fn add_entry(&self, dir: &Inode, name: &[u8], inode: InodeRef) -> SysResult<()> {
        check_name(name)?;
        let mut m = dir_map(dir)?.write();
        if m.get(name).is_some() {
            return Err(Errno::EEXIST);
        }
        if inode.is_dir() {
            dir.inc_nlink();
        }
        m.insert(name, inode);
        dir.set_size(dir.size() + BOGO_DIRENT_SIZE);
        dir.touch_mc();
        Ok(())
    }
}
