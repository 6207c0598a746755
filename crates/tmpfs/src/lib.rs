//! # scalevfs-tmpfs: an in-memory file system
//!
//! * **Regular files** are sparse maps of page-sized chunks (`BTreeMap<page index, page>`)
//!   behind a per-file `RwLock`: holes cost nothing and read as zeros, `SEEK_DATA`/`SEEK_HOLE`
//!   walk the map. Reads take the lock shared, writes exclusively (the VFS already serializes
//!   writers with the inode's `rwsem`; the page lock orders them against readers).
//! * **Directories** (`dir`): by default hashed buckets, each with its own lock and cache
//!   line, and the directory's size, link count and times counted per bucket and folded
//!   when `stat` asks, so that changing different names in one directory writes no common
//!   line (`hashdir`); the legacy design keeps one `RwLock` over two maps, name -> cookie
//!   and cookie -> entry (`dirmap`). Either way `getdents64` positions are stable: an entry
//!   that exists throughout a scan is returned exactly once, and one created during the
//!   scan appears at most once.
//! * **Symlinks** keep their target in the inode; **hard links** are more entries holding a
//!   reference to the same inode (an entry holds one `InodeRef`; the inode is evicted when
//!   the last link and the last open reference are gone).
//! * **Extended attributes** (`user.`, `trusted.`, `security.`) live beside the inodes, in
//!   a table from inode number to the inode's attribute list, so a file without any costs
//!   nothing. Lists are immutable and published through the epoch: `getxattr` and
//!   `listxattr` take no lock and write no shared line; writers swap pointers under a
//!   hashed writer lock (`xattr_table`). They are listed in descending name order, as
//!   Linux's tmpfs lists them. (Linux also charges `user.` attributes to the `nr_inodes=`
//!   space; we do not limit them.)
//! * **Limits**: `size=` (bytes, counted in pages) and `nr_inodes=` give `ENOSPC`; writes past
//!   the maximum file size give `EFBIG`. Without limits no shared counter is touched.
//! * Sizes follow Linux's tmpfs, including the directory size of 20 bytes per entry
//!   (`BOGO_DIRENT_SIZE`) plus 40.
//!
//! | module   | what                                                                      |
//! |----------|---------------------------------------------------------------------------|
//! | `dir`    | directory operations: create, link, unlink, rmdir, rename, readdir        |
//! | `hashdir`| a directory's entries in hashed buckets; size, nlink, times folded on read |
//! | `dirmap` | the legacy directory: one map, names stored once, readdir cookies         |
//! | `file`   | regular files' data: read, write, truncate, fallocate, hole punching, seek |
//! | `pages`  | the per-file page map and its lock                                        |
//! | `xattr`  | extended attributes: Linux's semantics                                    |
//! | `xattr_table` | the attribute table: lock-free readers, epoch-published lists        |
//! | this     | the superblock, inodes, limits, statfs, eviction                          |
//!
//! Lock order: VFS directory lock (the inode's `rwsem`, or for a hashed directory's name
//! changes its namespace lock shared plus the names' locks: see the VFS's `core::dirlock`)
//! -> directory lock or bucket lock -> (nothing; a rename within a hashed directory holds
//! two buckets, lower index first); VFS inode `rwsem` -> extended-attribute writer lock
//! (a leaf; readers take none). Cross-directory renames are serialized by the VFS (both directories held
//! exclusively), so tmpfs takes the two directories' locks one after the other, never
//! nested.

#![warn(missing_docs)]

mod dir;
mod dirmap;
mod file;
mod hashdir;
mod pages;
mod xattr;
mod xattr_table;

use crossbeam_utils::CachePadded;
use dir::{directory, Directory};
#[cfg(test)]
use dirmap::{NameRef, ThinName};
use pages::FilePages;
#[cfg(test)]
use scalevfs_vfs::erc::Erc;
use scalevfs_vfs::fs::DirEmit;
use scalevfs_vfs::namei::NAME_MAX;
use scalevfs_vfs::pipe::FifoSlot;
use scalevfs_vfs::{Errno, FileSystem, Inode, InodeRef, NewInode, Statfs, SuperBlock, SysResult};
use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};
#[cfg(test)]
use xattr::HAS_XATTRS;
use xattr_table::XattrTable;

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
    /// without any pays nothing: inode number -> its attribute list, read without a lock
    /// (`xattr_table`). An inode with attributes has `xattr::HAS_XATTRS` set, so that reading
    /// or evicting one without looks at no table line.
    xattrs: XattrTable,
}

enum Node {
    /// A regular file's pages (`pages` module docs; a page that `fallocate` made but no
    /// write filled reads as zeros and counts as a hole for `SEEK_DATA`/`SEEK_HOLE`, as
    /// shmem's unwritten pages do).
    File(FilePages),
    /// Boxed: a directory is large, and every regular file pays for the largest variant.
    Dir(Box<Directory>),
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

fn node(inode: &Inode) -> &Node {
    inode.private::<Node>().expect("a tmpfs inode")
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
            xattrs: XattrTable::new(),
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
            Node::Dir(Box::new(Directory::new(sb.locking))),
        )
    }

    fn dir_attrs(&self, dir: &Inode) -> Option<scalevfs_vfs::DirAttrs> {
        directory(dir).ok()?.attrs(dir)
    }

    fn shared_name_changes(&self, dir: &Inode) -> bool {
        matches!(directory(dir), Ok(Directory::Hashed(_)))
    }

    fn mtime_set(&self, inode: &Inode) {
        if let Ok(d) = directory(inode) {
            d.mtime_set();
        }
    }

    fn kill_sb(&self, root: &Inode) {
        self.dir_kill_sb(root)
    }

    fn evict_inode(&self, inode: &Inode) {
        match node(inode) {
            Node::File(p) => {
                // SAFETY: an inode being evicted has no reader (each holds a reference).
                let n = unsafe { p.free_all() };
                self.unreserve_pages(n);
            }
            Node::Dir(d) => drop(d.drain()),
            _ => {}
        }
        self.xattrs.remove_inode(inode);
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
        self.xattr_getxattr(inode, name)
    }

    fn setxattr(&self, inode: &Inode, name: &[u8], value: &[u8], flags: i32) -> SysResult<()> {
        self.xattr_setxattr(inode, name, value, flags)
    }

    fn listxattr(&self, inode: &Inode) -> SysResult<Vec<Vec<u8>>> {
        self.xattr_listxattr(inode)
    }

    fn removexattr(&self, inode: &Inode, name: &[u8]) -> SysResult<()> {
        self.xattr_removexattr(inode, name)
    }

    fn lookup(&self, dir: &Inode, name: &[u8]) -> SysResult<Option<InodeRef>> {
        self.dir_lookup(dir, name)
    }

    fn create(
        &self,
        dir: &Inode,
        name: &[u8],
        mode: u32,
        uid: u32,
        gid: u32,
    ) -> SysResult<InodeRef> {
        self.dir_create(dir, name, mode, uid, gid)
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
        self.dir_mknod_device(dir, name, mode, rdev, uid, gid)
    }

    fn symlink(
        &self,
        dir: &Inode,
        name: &[u8],
        target: &[u8],
        uid: u32,
        gid: u32,
    ) -> SysResult<InodeRef> {
        self.dir_symlink(dir, name, target, uid, gid)
    }

    fn tmpfile(&self, dir: &Inode, mode: u32, uid: u32, gid: u32) -> SysResult<InodeRef> {
        // shmem_tmpfile: a new file, then d_tmpfile drops its link count to 0.
        let node = Node::File(FilePages::default());
        let i = self.new_inode(dir.sb(), (mode, 0), uid, gid, node)?;
        i.set_nlink(0);
        Ok(i)
    }

    fn link(&self, dir: &Inode, name: &[u8], inode: &InodeRef) -> SysResult<()> {
        self.dir_link(dir, name, inode)
    }

    fn unlink(&self, dir: &Inode, name: &[u8], inode: &Inode) -> SysResult<()> {
        self.dir_unlink(dir, name, inode)
    }

    fn rmdir(&self, dir: &Inode, name: &[u8], inode: &Inode) -> SysResult<()> {
        self.dir_rmdir(dir, name, inode)
    }

    fn rename_whiteout(
        &self,
        old_dir: &Inode,
        old_name: &[u8],
        new_dir: &Inode,
        new_name: &[u8],
        (uid, gid): (u32, u32),
    ) -> SysResult<()> {
        self.dir_rename_whiteout(old_dir, old_name, new_dir, new_name, (uid, gid))
    }

    fn rename(
        &self,
        old_dir: &Inode,
        old_name: &[u8],
        new_dir: &Inode,
        new_name: &[u8],
        flags: u32,
    ) -> SysResult<()> {
        self.dir_rename(old_dir, old_name, new_dir, new_name, flags)
    }

    fn readdir(
        &self,
        dir: &Inode,
        parent_ino: u64,
        pos: i64,
        emit: &mut dyn FnMut(DirEmit<'_>) -> bool,
    ) -> SysResult<bool> {
        self.dir_readdir(dir, parent_ino, pos, emit)
    }

    fn read(&self, inode: &Inode, off: u64, buf: &mut [u8]) -> SysResult<usize> {
        self.file_read(inode, off, buf)
    }

    fn write(&self, inode: &Inode, off: u64, buf: &[u8]) -> SysResult<usize> {
        self.file_write(inode, off, buf)
    }

    fn setsize(&self, inode: &Inode, size: u64) -> SysResult<()> {
        self.file_setsize(inode, size)
    }

    fn fallocate(&self, inode: &Inode, mode: i32, off: u64, len: u64) -> SysResult<()> {
        self.file_fallocate(inode, mode, off, len)
    }

    fn seek_data(&self, inode: &Inode, off: u64, data: bool) -> SysResult<u64> {
        self.file_seek_data(inode, off, data)
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
mod hashdir_tests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod xattr_shuttle_tests;
#[cfg(test)]
mod xattr_tests;
