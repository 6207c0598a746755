//! # scalevfs-tmpfs: an in-memory file system
//!
//! * **Regular files** are sparse maps of page-sized chunks (`BTreeMap<page index, page>`)
//!   behind a per-file `RwLock`: holes cost nothing and read as zeros, `SEEK_DATA`/`SEEK_HOLE`
//!   walk the map. Reads take the lock shared, writes exclusively (the VFS already serializes
//!   writers with the inode's `rwsem`; the page lock orders them against readers).
//! * **Directories** have their own `RwLock` over two maps: name -> cookie and cookie ->
//!   entry. Cookies grow monotonically per directory, so `getdents64` resumes after the last
//!   cookie it returned: an entry that exists throughout a scan is returned exactly once, and
//!   one created during the scan appears at most once. Creating files in different
//!   directories takes different locks.
//! * **Symlinks** keep their target in the inode; **hard links** are more entries holding a
//!   reference to the same inode (an entry holds one `InodeRef`; the inode is evicted when
//!   the last link and the last open reference are gone).
//! * **Limits**: `size=` (bytes, counted in pages) and `nr_inodes=` give `ENOSPC`; writes past
//!   the maximum file size give `EFBIG`. Without limits no shared counter is touched.
//! * Sizes follow Linux's tmpfs, including the directory size of 20 bytes per entry
//!   (`BOGO_DIRENT_SIZE`) plus 40.
//!
//! Lock order: VFS inode `rwsem` -> directory lock -> (nothing). Cross-directory renames are
//! serialized by the VFS (superblock rename mutex + both directories' `rwsem`), so tmpfs takes
//! the two directory locks one after the other, never nested.

use parking_lot::RwLock;
use scalevfs_vfs::fs::DirEmit;
use scalevfs_vfs::{Errno, FileSystem, Inode, InodeRef, NewInode, SuperBlock, SysResult};
use std::cell::Cell;
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};

/// Page size of file data chunks.
pub const PAGE: usize = 4096;
/// Linux's tmpfs directory entry size unit.
const BOGO_DIRENT_SIZE: u64 = 20;
/// The position a directory reaches at its end (Linux's `DIR_OFFSET_EOD`).
pub const DIR_OFFSET_EOD: u64 = i32::MAX as u64;
/// Largest file size (`MAX_LFS_FILESIZE`).
pub const MAX_FILE_SIZE: u64 = i64::MAX as u64;

/// Mount options.
#[derive(Clone, Debug, Default)]
pub struct TmpfsOptions {
    /// `size=`: bytes of file data.
    pub size_limit: Option<u64>,
    /// `nr_inodes=`.
    pub inode_limit: Option<u64>,
}

/// See the crate docs.
pub struct Tmpfs {
    opts: TmpfsOptions,
    max_pages: Option<u64>,
    used_pages: AtomicU64,
    used_inodes: AtomicU64,
}

/// A page of a file: `None` is allocated by `fallocate` but never written; it reads as
/// zeros and counts as a hole for `SEEK_DATA`/`SEEK_HOLE`, as shmem's unwritten pages do.
type Page = Option<Box<[u8; PAGE]>>;

enum Node {
    File(RwLock<BTreeMap<u64, Page>>),
    /// Boxed: a directory's maps are large, and every regular file pays for the largest
    /// variant.
    Dir(Box<RwLock<DirMap>>),
    Symlink(Box<[u8]>),
    Special,
}

#[derive(Default)]
struct DirMap {
    by_name: HashMap<Box<[u8]>, u64>,
    by_cookie: BTreeMap<u64, (Box<[u8]>, InodeRef)>,
    next_cookie: u64,
}

impl DirMap {
    fn get(&self, name: &[u8]) -> Option<&InodeRef> {
        self.by_name
            .get(name)
            .and_then(|c| self.by_cookie.get(c))
            .map(|e| &e.1)
    }
    fn insert(&mut self, name: &[u8], inode: InodeRef) {
        // Cookies 0 and 1 are "." and ".."; the end of the directory is DIR_OFFSET_EOD.
        let c = self.next_cookie.clamp(2, DIR_OFFSET_EOD - 1);
        self.next_cookie = c + 1;
        self.by_name.insert(name.into(), c);
        self.by_cookie.insert(c, (name.into(), inode));
    }
    fn remove(&mut self, name: &[u8]) -> Option<InodeRef> {
        let c = self.by_name.remove(name)?;
        self.by_cookie.remove(&c).map(|e| e.1)
    }
    fn is_empty(&self) -> bool {
        self.by_name.is_empty()
    }
}

fn node(inode: &Inode) -> &Node {
    inode.private::<Node>().expect("a tmpfs inode")
}

fn dir_map(inode: &Inode) -> SysResult<&RwLock<DirMap>> {
    match node(inode) {
        Node::Dir(d) => Ok(d),
        _ => Err(Errno::ENOTDIR),
    }
}

fn pages(inode: &Inode) -> SysResult<&RwLock<BTreeMap<u64, Page>>> {
    match node(inode) {
        Node::File(p) => Ok(p),
        Node::Dir(_) => Err(Errno::EISDIR),
        _ => Err(Errno::EINVAL),
    }
}

/// Inode numbers in per-thread blocks (Linux's `get_next_ino` batches), so creating files
/// does not bounce one counter between CPUs.
fn next_ino() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(2);
    thread_local! {
        static BLOCK: Cell<(u64, u64)> = const { Cell::new((0, 0)) };
    }
    BLOCK.with(|b| {
        let (mut next, mut end) = b.get();
        if next == end {
            // Relaxed: numbers only need to be unique.
            next = NEXT.fetch_add(1024, Ordering::Relaxed);
            end = next + 1024;
        }
        b.set((next + 1, end));
        next
    })
}

impl Tmpfs {
    pub fn new(opts: TmpfsOptions) -> Tmpfs {
        Tmpfs {
            max_pages: opts.size_limit.map(|s| s.div_ceil(PAGE as u64)),
            opts,
            used_pages: AtomicU64::new(0),
            used_inodes: AtomicU64::new(0),
        }
    }

    /// Pages of file data in use (0 when no `size=` limit is set: nothing is counted).
    pub fn used_pages(&self) -> u64 {
        self.used_pages.load(Ordering::Relaxed)
    }

    fn reserve_inode(&self) -> SysResult<()> {
        if let Some(max) = self.opts.inode_limit {
            self.used_inodes
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |u| {
                    (u < max).then_some(u + 1)
                })
                .map_err(|_| Errno::ENOSPC)?;
        }
        Ok(())
    }
    fn unreserve_inode(&self) {
        if self.opts.inode_limit.is_some() {
            self.used_inodes.fetch_sub(1, Ordering::Relaxed);
        }
    }
    fn reserve_pages(&self, n: u64) -> SysResult<()> {
        if let Some(max) = self.max_pages {
            self.used_pages
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |u| {
                    (u + n <= max).then_some(u + n)
                })
                .map_err(|_| Errno::ENOSPC)?;
        }
        Ok(())
    }
    fn unreserve_pages(&self, n: u64) {
        if self.max_pages.is_some() && n > 0 {
            self.used_pages.fetch_sub(n, Ordering::Relaxed);
        }
    }

    fn new_inode(
        &self,
        sb: &SuperBlock,
        mode: u32,
        uid: u32,
        gid: u32,
        node: Node,
    ) -> SysResult<InodeRef> {
        self.reserve_inode()?;
        let is_dir = matches!(node, Node::Dir(_));
        let i = sb.new_inode(NewInode {
            ino: next_ino(),
            mode,
            uid,
            gid,
            nlink: if is_dir { 2 } else { 1 },
            rdev: 0,
            private: Box::new(node),
        });
        if is_dir {
            i.set_size(2 * BOGO_DIRENT_SIZE);
        }
        Ok(i)
    }

    /// Adds `inode` to `dir` under `name` (caller holds the VFS dir rwsem).
    fn add_entry(&self, dir: &Inode, name: &[u8], inode: InodeRef) -> SysResult<()> {
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

impl FileSystem for Tmpfs {
    fn fs_type(&self) -> &'static str {
        "tmpfs"
    }

    fn fill_super(&self, sb: &SuperBlock) -> SysResult<InodeRef> {
        self.new_inode(
            sb,
            libc::S_IFDIR | 0o1777,
            0,
            0,
            Node::Dir(Box::new(RwLock::new(DirMap::default()))),
        )
    }

    fn kill_sb(&self, root: &Inode) {
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

    fn evict_inode(&self, inode: &Inode) {
        match node(inode) {
            Node::File(p) => {
                let n = std::mem::take(&mut *p.write()).len() as u64;
                self.unreserve_pages(n);
            }
            Node::Dir(m) => {
                drop(std::mem::take(&mut *m.write()));
            }
            _ => {}
        }
        self.unreserve_inode();
    }

    fn lookup(&self, dir: &Inode, name: &[u8]) -> SysResult<Option<InodeRef>> {
        Ok(dir_map(dir)?.read().get(name).cloned())
    }

    fn create(
        &self,
        dir: &Inode,
        name: &[u8],
        mode: u32,
        uid: u32,
        gid: u32,
    ) -> SysResult<InodeRef> {
        let node = match mode & libc::S_IFMT {
            libc::S_IFREG => Node::File(RwLock::new(BTreeMap::new())),
            libc::S_IFDIR => Node::Dir(Box::new(RwLock::new(DirMap::default()))),
            _ => Node::Special,
        };
        let i = self.new_inode(dir.sb(), mode, uid, gid, node)?;
        self.add_entry(dir, name, i.clone())?;
        Ok(i)
    }

    fn symlink(
        &self,
        dir: &Inode,
        name: &[u8],
        target: &[u8],
        uid: u32,
        gid: u32,
    ) -> SysResult<InodeRef> {
        let i = self.new_inode(
            dir.sb(),
            libc::S_IFLNK | 0o777,
            uid,
            gid,
            Node::Symlink(target.into()),
        )?;
        i.set_size(target.len() as u64);
        self.add_entry(dir, name, i.clone())?;
        Ok(i)
    }

    fn link(&self, dir: &Inode, name: &[u8], inode: &InodeRef) -> SysResult<()> {
        self.add_entry(dir, name, inode.clone())?;
        inode.inc_nlink();
        inode.touch_c();
        Ok(())
    }

    fn unlink(&self, dir: &Inode, name: &[u8], inode: &Inode) -> SysResult<()> {
        let removed = dir_map(dir)?.write().remove(name).ok_or(Errno::ENOENT)?;
        dir.set_size(dir.size().saturating_sub(BOGO_DIRENT_SIZE));
        dir.touch_mc();
        inode.dec_nlink();
        inode.touch_c();
        // The entry's reference goes last: the inode may be evicted here.
        drop(removed);
        Ok(())
    }

    fn rmdir(&self, dir: &Inode, name: &[u8], inode: &Inode) -> SysResult<()> {
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

    fn rename(
        &self,
        old_dir: &Inode,
        old_name: &[u8],
        new_dir: &Inode,
        new_name: &[u8],
        flags: u32,
    ) -> SysResult<()> {
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

    fn readdir(
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
        if pos == 1 {
            if !emit(DirEmit {
                ino: parent_ino,
                next_pos: 2,
                d_type: libc::DT_DIR,
                name: b"..",
            }) {
                return Ok(false);
            }
            pos = 2;
        }
        let m = dir_map(dir)?.read();
        for (&c, (name, inode)) in m.by_cookie.range(pos..) {
            if !emit(DirEmit {
                ino: inode.ino,
                next_pos: (c + 1) as i64,
                d_type: scalevfs_vfs::core::d_type_of_mode(inode.mode()),
                name,
            }) {
                return Ok(false);
            }
        }
        Ok(true)
    }

    fn read(&self, inode: &Inode, off: u64, buf: &mut [u8]) -> SysResult<usize> {
        let p = pages(inode)?.read();
        let size = inode.size();
        if off >= size || buf.is_empty() {
            return Ok(0);
        }
        let n = buf.len().min((size - off) as usize);
        let mut done = 0;
        while done < n {
            let at = off + done as u64;
            let (idx, in_page) = (at / PAGE as u64, (at % PAGE as u64) as usize);
            let chunk = (PAGE - in_page).min(n - done);
            match p.get(&idx) {
                Some(Some(pg)) => {
                    buf[done..done + chunk].copy_from_slice(&pg[in_page..in_page + chunk])
                }
                _ => buf[done..done + chunk].fill(0),
            }
            done += chunk;
        }
        Ok(n)
    }

    fn write(&self, inode: &Inode, off: u64, buf: &[u8]) -> SysResult<usize> {
        let mut p = pages(inode)?.write();
        let mut done = 0;
        while done < buf.len() {
            let at = off + done as u64;
            let (idx, in_page) = (at / PAGE as u64, (at % PAGE as u64) as usize);
            let chunk = (PAGE - in_page).min(buf.len() - done);
            let slot = match p.entry(idx) {
                std::collections::btree_map::Entry::Occupied(e) => e.into_mut(),
                std::collections::btree_map::Entry::Vacant(e) => {
                    if let Err(err) = self.reserve_pages(1) {
                        if done == 0 {
                            return Err(err);
                        }
                        break;
                    }
                    e.insert(None)
                }
            };
            let pg = slot.get_or_insert_with(|| Box::new([0u8; PAGE]));
            pg[in_page..in_page + chunk].copy_from_slice(&buf[done..done + chunk]);
            done += chunk;
        }
        let end = off + done as u64;
        if end > inode.size() {
            inode.set_size(end);
        }
        Ok(done)
    }

    fn setsize(&self, inode: &Inode, size: u64) -> SysResult<()> {
        let mut p = pages(inode)?.write();
        let old = inode.size();
        if size < old {
            let first_gone = size.div_ceil(PAGE as u64);
            let gone = p.split_off(&first_gone);
            self.unreserve_pages(gone.len() as u64);
            if !size.is_multiple_of(PAGE as u64) {
                if let Some(Some(pg)) = p.get_mut(&(size / PAGE as u64)) {
                    pg[(size % PAGE as u64) as usize..].fill(0);
                }
            }
        }
        inode.set_size(size);
        Ok(())
    }

    fn fallocate(&self, inode: &Inode, mode: i32, off: u64, len: u64) -> SysResult<()> {
        let mut p = pages(inode)?.write();
        let end = off + len;
        let (first, last) = (off / PAGE as u64, (end - 1) / PAGE as u64);
        let missing = (first..=last).filter(|i| !p.contains_key(i)).count() as u64;
        self.reserve_pages(missing)?;
        for i in first..=last {
            p.entry(i).or_insert(None);
        }
        if mode & libc::FALLOC_FL_KEEP_SIZE == 0 && end > inode.size() {
            inode.set_size(end);
        }
        Ok(())
    }

    fn seek_data(&self, inode: &Inode, off: u64, data: bool) -> SysResult<u64> {
        let p = pages(inode)?.read();
        let idx = off / PAGE as u64;
        let size = inode.size();
        if data {
            match p.range(idx..).find(|(_, pg)| pg.is_some()) {
                Some((&i, _)) if i * (PAGE as u64) < size => Ok(off.max(i * PAGE as u64)),
                _ => Err(Errno::ENXIO),
            }
        } else {
            let mut i = idx;
            while matches!(p.get(&i), Some(Some(_))) {
                i += 1;
            }
            Ok(off.max(i * PAGE as u64).min(size))
        }
    }

    fn readlink(&self, inode: &Inode) -> SysResult<Vec<u8>> {
        match node(inode) {
            Node::Symlink(t) => Ok(t.to_vec()),
            _ => Err(Errno::EINVAL),
        }
    }

    fn blocks(&self, inode: &Inode) -> u64 {
        match node(inode) {
            Node::File(p) => p.read().len() as u64 * (PAGE as u64 / 512),
            _ => 0,
        }
    }

    fn max_file_size(&self) -> u64 {
        MAX_FILE_SIZE
    }
}
