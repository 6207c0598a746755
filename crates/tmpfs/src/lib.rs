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
//! * **Extended attributes** (`user.`, `trusted.`, `security.`) live beside the inodes, in
//!   a map from inode number to the inode's attributes under a table of hashed mutexes, so
//!   a file without any costs nothing; they are listed in descending name order, as
//!   Linux's tmpfs lists them. (Linux also charges `user.` attributes to the `nr_inodes=`
//!   space; we do not limit them.)
//! * **Limits**: `size=` (bytes, counted in pages) and `nr_inodes=` give `ENOSPC`; writes past
//!   the maximum file size give `EFBIG`. Without limits no shared counter is touched.
//! * Sizes follow Linux's tmpfs, including the directory size of 20 bytes per entry
//!   (`BOGO_DIRENT_SIZE`) plus 40.
//!
//! Lock order: VFS inode `rwsem` -> directory lock -> (nothing); VFS inode `rwsem` ->
//! extended-attribute map lock (a leaf). Cross-directory renames are
//! serialized by the VFS (superblock rename mutex + both directories' `rwsem`), so tmpfs takes
//! the two directory locks one after the other, never nested.

#![warn(missing_docs)]

mod dirmap;
mod pages;

use crossbeam_utils::CachePadded;
use dirmap::DirMap;
#[cfg(test)]
use dirmap::{NameRef, ThinName};
use pages::FilePages;
use parking_lot::RwLock;
use scalevfs_primitives::hashed::HashedMutexes;
#[cfg(test)]
use scalevfs_vfs::erc::Erc;
use scalevfs_vfs::fs::DirEmit;
use scalevfs_vfs::namei::NAME_MAX;
use scalevfs_vfs::pipe::FifoSlot;
use scalevfs_vfs::{Errno, FileSystem, Inode, InodeRef, NewInode, Statfs, SuperBlock, SysResult};
use std::cell::Cell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};

/// Page size of file data chunks.
pub const PAGE: usize = 4096;
/// Linux's tmpfs directory entry size unit.
const BOGO_DIRENT_SIZE: u64 = 20;
/// The position a directory reaches at its end (Linux's `DIR_OFFSET_EOD`).
pub const DIR_OFFSET_EOD: u64 = i32::MAX as u64;
/// The position that stands for "the newest entry" (Linux's `DIR_OFFSET_FIRST`).
const DIR_OFFSET_FIRST: u64 = 2;
/// The first cookie an entry gets (Linux's `DIR_OFFSET_MIN`).
const DIR_OFFSET_MIN: u64 = 3;
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
    /// The counters below are written by creates, writes and evictions of any file; each
    /// has a cache line of its own, so that those writes do not move the line holding
    /// what every operation reads (`opts`, `max_pages`, the `xattrs` table), nor a
    /// neighbouring allocation's line, between CPUs.
    used_pages: CachePadded<AtomicU64>,
    used_inodes: CachePadded<AtomicU64>,
    /// Extended attributes, kept beside the inodes rather than in them, so that a file
    /// without any pays nothing: inode number -> its attributes, under a table of hashed
    /// mutexes (attributes of different files rarely share a lock).
    /// An inode with attributes has [`HAS_XATTRS`] set (under its `xattrs` lock), so that
    /// evicting one without looks at no lock and no shared counter.
    xattrs: HashedMutexes<HashMap<u64, Xattrs>>,
}

/// The inode has an entry in `Tmpfs::xattrs`. Set and cleared under the inode's `xattrs`
/// lock; read Relaxed at eviction, which the last reference's Release/Acquire orders after
/// every change that inode saw.
const HAS_XATTRS: u16 = scalevfs_vfs::inode::I_FS_PRIVATE;

/// One inode's extended attributes, kept sorted by name in *descending* byte order:
/// `listxattr` on Linux's tmpfs reports them so (its `simple_xattrs` red-black tree).
type Xattrs = Vec<(Box<[u8]>, Box<[u8]>)>;

enum Node {
    /// A regular file's pages (`pages` module docs; a page that `fallocate` made but no
    /// write filled reads as zeros and counts as a hole for `SEEK_DATA`/`SEEK_HOLE`, as
    /// shmem's unwritten pages do).
    File(FilePages),
    /// Boxed: a directory's maps are large, and every regular file pays for the largest
    /// variant.
    Dir(Box<RwLock<DirMap>>),
    Symlink(Box<[u8]>),
    /// A FIFO: its pipe while open (no bigger than the `File` variant).
    Fifo(FifoSlot),
    Special,
}

/// `ENAMETOOLONG` for a name longer than `NAME_MAX`, as shmem's `simple_lookup` gives
/// (the VFS path walk already rejects such names; this guards direct callers).
fn check_name(name: &[u8]) -> SysResult<()> {
    if name.len() > NAME_MAX {
        Err(Errno::ENAMETOOLONG)
    } else {
        Ok(())
    }
}

/// Pages of physical memory (the bound of an unlimited tmpfs).
fn phys_pages() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_PHYS_PAGES) };
    if n > 0 {
        n as u64
    } else {
        u64::MAX
    }
}

/// `statfs.f_type` of tmpfs.
pub const TMPFS_MAGIC: i64 = 0x0102_1994;

/// Half of the RAM: tmpfs's default size (Linux's `shmem_default_max_blocks`).
fn half_of_ram() -> u64 {
    // SAFETY: `sysinfo` fills the zeroed struct we pass.
    let mut si: libc::sysinfo = unsafe { std::mem::zeroed() };
    // SAFETY: as above; a live, writable struct.
    if unsafe { libc::sysinfo(&mut si) } != 0 {
        return 1 << 30;
    }
    (si.totalram as u64).saturating_mul(si.mem_unit as u64) / 2
}

/// Where `name` is in `list` (sorted descending), or where it would go.
fn find_xattr(list: &Xattrs, name: &[u8]) -> Result<usize, usize> {
    list.binary_search_by(|(n, _)| name.cmp(n))
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

fn pages(inode: &Inode) -> SysResult<&FilePages> {
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
    scalevfs_vfs::prims::next_batched_id(&NEXT, &BLOCK)
}

impl Tmpfs {
    /// An empty tmpfs with the limits of `opts` (its root directory is made by `fill_super`).
    pub fn new(opts: TmpfsOptions) -> Tmpfs {
        Tmpfs {
            max_pages: opts.size_limit.map(|s| s.div_ceil(PAGE as u64)),
            opts,
            used_pages: CachePadded::new(AtomicU64::new(0)),
            used_inodes: CachePadded::new(AtomicU64::new(0)),
            xattrs: HashedMutexes::new(),
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
        (mode, rdev): (u32, u64),
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
            rdev,
            private: Box::new(node),
        });
        if is_dir {
            i.set_size(2 * BOGO_DIRENT_SIZE);
        }
        Ok(i)
    }

    /// `FALLOC_FL_PUNCH_HOLE`: frees the pages wholly inside `[off, off+len)` and zeroes
    /// the covered part of a page it cuts into, as `shmem_truncate_range` does; the size
    /// does not change. Walks only the pages that exist, so a huge range costs nothing.
    fn punch_hole(&self, inode: &Inode, off: u64, len: u64) -> SysResult<()> {
        let mut p = pages(inode)?.write();
        let pg = PAGE as u64;
        let end = off.saturating_add(len);
        // Pages [first, last) are covered whole.
        let (first, last) = (off.div_ceil(pg), end / pg);
        if first > last {
            // Within one page.
            p.zero(off, end);
        } else {
            if !off.is_multiple_of(pg) {
                p.zero(off, first * pg);
            }
            if !end.is_multiple_of(pg) {
                p.zero(last * pg, end);
            }
        }
        if first < last {
            self.unreserve_pages(p.remove_range(first, last));
        }
        Ok(())
    }

    /// Adds `inode` to `dir` under `name` (caller holds the VFS dir rwsem).
    fn add_entry(&self, dir: &Inode, name: &[u8], inode: InodeRef) -> SysResult<()> {
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

impl FileSystem for Tmpfs {
    fn fs_type(&self) -> &'static str {
        "tmpfs"
    }

    fn fill_super(&self, sb: &SuperBlock) -> SysResult<InodeRef> {
        self.new_inode(
            sb,
            (libc::S_IFDIR | 0o1777, 0),
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
                // SAFETY: an inode being evicted has no reader (each holds a reference).
                let n = unsafe { p.free_all() };
                self.unreserve_pages(n);
            }
            Node::Dir(m) => {
                drop(std::mem::take(&mut *m.write()));
            }
            _ => {}
        }
        if inode.has_flag(HAS_XATTRS) {
            self.xattrs.lock_key(inode.ino).remove(&inode.ino);
        }
        self.unreserve_inode();
    }

    /// `shmem_statfs`, with this tmpfs's limits; without `size=` or `nr_inodes=` it
    /// reports what Linux's default mount has: half the RAM, and as many inodes as blocks.
    /// Blocks in use come from the page count kept under a size limit, or else from a
    /// walk of the inode list (statfs is rare; no shared counter is kept on the write
    /// path without a limit).
    fn statfs(&self, sb: &SuperBlock) -> Statfs {
        let blocks = self
            .max_pages
            .unwrap_or_else(|| half_of_ram() / PAGE as u64);
        let used = if self.max_pages.is_some() {
            self.used_pages()
        } else {
            let mut sectors = 0u64;
            sb.for_each_inode(|i| sectors += self.blocks(i));
            sectors.div_ceil(PAGE as u64 / 512)
        };
        let files = self.opts.inode_limit.unwrap_or(blocks);
        let free = blocks.saturating_sub(used);
        Statfs {
            blocks,
            bfree: free,
            bavail: free,
            files,
            ffree: files.saturating_sub(sb.inode_count() as u64),
            ..Statfs::empty(TMPFS_MAGIC)
        }
    }

    fn fifo<'a>(&self, inode: &'a Inode) -> Option<&'a FifoSlot> {
        match node(inode) {
            Node::Fifo(slot) => Some(slot),
            _ => None,
        }
    }

    fn getxattr(&self, inode: &Inode, name: &[u8]) -> SysResult<Vec<u8>> {
        let m = self.xattrs.lock_key(inode.ino);
        let list = m.get(&inode.ino).ok_or(Errno::ENODATA)?;
        let i = find_xattr(list, name).map_err(|_| Errno::ENODATA)?;
        Ok(list[i].1.to_vec())
    }

    fn setxattr(&self, inode: &Inode, name: &[u8], value: &[u8], flags: i32) -> SysResult<()> {
        let mut m = self.xattrs.lock_key(inode.ino);
        let list = m.entry(inode.ino).or_default();
        let fresh = list.is_empty();
        let r = match find_xattr(list, name) {
            Ok(_) if flags & libc::XATTR_CREATE != 0 => Err(Errno::EEXIST),
            Ok(i) => {
                list[i].1 = value.into();
                Ok(())
            }
            Err(_) if flags & libc::XATTR_REPLACE != 0 => Err(Errno::ENODATA),
            Err(i) => {
                list.insert(i, (name.into(), value.into()));
                Ok(())
            }
        };
        if list.is_empty() {
            m.remove(&inode.ino);
        } else if fresh {
            inode.set_flag(HAS_XATTRS, true);
        }
        r
    }

    fn listxattr(&self, inode: &Inode) -> SysResult<Vec<Vec<u8>>> {
        let m = self.xattrs.lock_key(inode.ino);
        Ok(m.get(&inode.ino)
            .map(|l| l.iter().map(|(n, _)| n.to_vec()).collect())
            .unwrap_or_default())
    }

    fn removexattr(&self, inode: &Inode, name: &[u8]) -> SysResult<()> {
        let mut m = self.xattrs.lock_key(inode.ino);
        let list = m.get_mut(&inode.ino).ok_or(Errno::ENODATA)?;
        let i = find_xattr(list, name).map_err(|_| Errno::ENODATA)?;
        list.remove(i);
        if list.is_empty() {
            m.remove(&inode.ino);
            inode.set_flag(HAS_XATTRS, false);
        }
        Ok(())
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
            libc::S_IFREG => Node::File(FilePages::default()),
            libc::S_IFDIR => Node::Dir(Box::new(RwLock::new(DirMap::default()))),
            libc::S_IFIFO => Node::Fifo(FifoSlot::default()),
            _ => Node::Special,
        };
        let i = self.new_inode(dir.sb(), (mode, 0), uid, gid, node)?;
        self.add_entry(dir, name, i.clone())?;
        Ok(i)
    }

    fn mknod_device(
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
            (libc::S_IFLNK | 0o777, 0),
            uid,
            gid,
            Node::Symlink(target.into()),
        )?;
        i.set_size(target.len() as u64);
        self.add_entry(dir, name, i.clone())?;
        Ok(i)
    }

    fn tmpfile(&self, dir: &Inode, mode: u32, uid: u32, gid: u32) -> SysResult<InodeRef> {
        // shmem_tmpfile: a new file, then d_tmpfile drops its link count to 0.
        let node = Node::File(FilePages::default());
        let i = self.new_inode(dir.sb(), (mode, 0), uid, gid, node)?;
        i.set_nlink(0);
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

    fn rename_whiteout(
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
        self.rename(old_dir, old_name, new_dir, new_name, 0)?;
        self.add_entry(old_dir, old_name, w)
    }

    fn rename(
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

    fn read(&self, inode: &Inode, off: u64, buf: &mut [u8]) -> SysResult<usize> {
        let p = pages(inode)?;
        let size = inode.size();
        if off >= size || buf.is_empty() {
            return Ok(0);
        }
        let n = buf.len().min((size - off) as usize);
        p.read_at(off, &mut buf[..n]);
        Ok(n)
    }

    fn write(&self, inode: &Inode, off: u64, buf: &[u8]) -> SysResult<usize> {
        let mut p = pages(inode)?.write();
        let done = p.write_at(off, buf, || self.reserve_pages(1))?;
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
            self.unreserve_pages(p.remove_range(first_gone, u64::MAX));
            if !size.is_multiple_of(PAGE as u64) {
                p.zero(size, first_gone * PAGE as u64);
            }
        }
        inode.set_size(size);
        Ok(())
    }

    fn fallocate(&self, inode: &Inode, mode: i32, off: u64, len: u64) -> SysResult<()> {
        // shmem_fallocate: allocation (with or without KEEP_SIZE) and hole punching; the
        // VFS already refused PUNCH_HOLE without KEEP_SIZE.
        if mode & !(libc::FALLOC_FL_KEEP_SIZE | libc::FALLOC_FL_PUNCH_HOLE) != 0 {
            return Err(Errno::EOPNOTSUPP);
        }
        if mode & libc::FALLOC_FL_PUNCH_HOLE != 0 {
            return self.punch_hole(inode, off, len);
        }
        let mut p = pages(inode)?.write();
        let end = off + len;
        let (first, last) = (off / PAGE as u64, (end - 1) / PAGE as u64);
        // Refuse a range that cannot fit before walking it page by page (a range of 2^50
        // pages would take forever and exhaust memory): shmem_fallocate's `end - start >
        // max_blocks` check is ENOSPC; without a size limit Linux allocates until memory
        // runs out (ENOMEM), so a range larger than physical memory is ENOMEM here.
        let span = last - first + 1;
        match self.max_pages {
            Some(max) if span > max => return Err(Errno::ENOSPC),
            None if span > phys_pages() => return Err(Errno::ENOMEM),
            _ => {}
        }
        let missing = (first..=last).filter(|&i| !p.contains(i)).count() as u64;
        self.reserve_pages(missing)?;
        for i in first..=last {
            p.insert_hole(i);
        }
        if mode & libc::FALLOC_FL_KEEP_SIZE == 0 && end > inode.size() {
            inode.set_size(end);
        }
        Ok(())
    }

    fn seek_data(&self, inode: &Inode, off: u64, data: bool) -> SysResult<u64> {
        let p = pages(inode)?;
        let idx = off / PAGE as u64;
        let size = inode.size();
        if data {
            match p.next_data(idx) {
                Some(i) if i * (PAGE as u64) < size => Ok(off.max(i * PAGE as u64)),
                _ => Err(Errno::ENXIO),
            }
        } else {
            Ok(off.max(p.next_hole(idx) * PAGE as u64).min(size))
        }
    }

    fn fileattr_flags(&self, inode: &Inode) -> Option<u32> {
        use scalevfs_vfs::fileattr::*;
        // shmem: regular files and directories (special files and symlinks have no
        // fileattr operations); SHMEM_FL_USER_MODIFIABLE without casefolding.
        matches!(node(inode), Node::File(_) | Node::Dir(_))
            .then_some(FS_IMMUTABLE_FL | FS_APPEND_FL | FS_NODUMP_FL | FS_NOATIME_FL)
    }

    fn readlink(&self, inode: &Inode) -> SysResult<Vec<u8>> {
        match node(inode) {
            Node::Symlink(t) => Ok(t.to_vec()),
            _ => Err(Errno::EINVAL),
        }
    }

    fn blocks(&self, inode: &Inode) -> u64 {
        match node(inode) {
            Node::File(p) => p.count() * (PAGE as u64 / 512),
            _ => 0,
        }
    }

    fn max_file_size(&self) -> u64 {
        MAX_FILE_SIZE
    }
}

#[cfg(test)]
mod tests;
