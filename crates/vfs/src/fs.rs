//! The [`FileSystem`] trait: what differs between file systems.
//!
//! The VFS does everything generic before calling in: path resolution, permission checks,
//! existence checks (`EEXIST`, `ENOENT`, `ENOTEMPTY` is the file system's), flag semantics,
//! and it holds the directory's `rwsem` exclusively for namespace changes (both directories
//! for a rename, plus the superblock's rename mutex across directories) and the file's
//! `rwsem` exclusively for writes and size changes. File systems keep their own timestamps,
//! link counts and sizes up to date the way Linux's do (`mtime`/`ctime` of a directory when
//! an entry changes, of a file when it is written). A file system may instead keep a
//! directory's size, link count and times spread out, so that name changes on different
//! CPUs write no common line, and report them folded through [`FileSystem::dir_attrs`].

use crate::file::OpenFile;
use crate::inode::{Inode, InodeRef, SuperBlock};
use crate::poll::Pollable;
use crate::{Errno, SysResult};
use std::any::Any;
use std::sync::Arc;

/// One entry reported by [`FileSystem::readdir`].
pub struct DirEmit<'a> {
    /// The entry's inode number.
    pub ino: u64,
    /// The position after this entry (the `d_off` cookie).
    pub next_pos: i64,
    /// `DT_*` file type.
    pub d_type: u8,
    /// The entry's name.
    pub name: &'a [u8],
}

/// A directory's size, link count and times as a file system that keeps them spread out
/// folds them ([`FileSystem::dir_attrs`]).
#[derive(Clone, Copy, Debug)]
pub struct DirAttrs {
    /// `st_size`.
    pub size: u64,
    /// `st_nlink`.
    pub nlink: u32,
    /// `st_mtime`.
    pub mtime: crate::abi::Timespec,
    /// `st_ctime`.
    pub ctime: crate::abi::Timespec,
}

/// See the module docs. Names passed in are single components (no `/`, not `.`/`..`,
/// at most 255 bytes).
pub trait FileSystem: Send + Sync + 'static {
    /// The type name (`"tmpfs"`).
    fn fs_type(&self) -> &'static str;
    /// Creates the root inode of a new superblock.
    fn fill_super(&self, sb: &SuperBlock) -> SysResult<InodeRef>;
    /// Unmount: drop every link the file system holds (the tree below `root`).
    fn kill_sb(&self, root: &Inode);
    /// The inode's last reference went: free its data and give back its space. It must not
    /// change the file system through the VFS (it may run under a remount read-only's
    /// hold, which such a change would wait for).
    fn evict_inode(&self, inode: &Inode);
    /// Looks `name` up in `dir`.
    fn lookup(&self, dir: &Inode, name: &[u8]) -> SysResult<Option<InodeRef>>;
    // Namespace changes. The defaults are Linux's answers for an inode without the
    // operation (a file system that does not change its namespace through the VFS, such as
    // kernfs or the anonymous-inode mount): `lookup_open` without `->create` gives
    // `EACCES`, `vfs_mkdir`, `vfs_mknod`, `vfs_symlink`, `vfs_link`, `vfs_unlink`,
    // `vfs_rmdir` and `vfs_rename` without theirs `EPERM`.

    /// Creates a regular file, directory or special file (`mode` includes the type).
    fn create(
        &self,
        _dir: &Inode,
        _name: &[u8],
        mode: u32,
        _uid: u32,
        _gid: u32,
    ) -> SysResult<InodeRef> {
        Err(if mode & libc::S_IFMT == libc::S_IFREG {
            Errno::EACCES
        } else {
            Errno::EPERM
        })
    }
    /// Creates a character or block device node (`mode` includes the type) for device
    /// `rdev`. The default is Linux's answer for a file system without `->mknod`.
    fn mknod_device(
        &self,
        _dir: &Inode,
        _name: &[u8],
        _mode: u32,
        _rdev: u64,
        _uid: u32,
        _gid: u32,
    ) -> SysResult<InodeRef> {
        Err(Errno::EPERM)
    }
    /// Makes a symbolic link `name` in `dir` pointing to `target`, owned by `uid`/`gid` (default: `EPERM`).
    fn symlink(
        &self,
        _dir: &Inode,
        _name: &[u8],
        _target: &[u8],
        _uid: u32,
        _gid: u32,
    ) -> SysResult<InodeRef> {
        Err(Errno::EPERM)
    }
    /// `->tmpfile` (`O_TMPFILE`): a new regular file (`mode` includes the type) with no
    /// name in `dir`, link count 0. The default: a file system without it (`EOPNOTSUPP`).
    fn tmpfile(&self, _dir: &Inode, _mode: u32, _uid: u32, _gid: u32) -> SysResult<InodeRef> {
        Err(Errno::EOPNOTSUPP)
    }
    /// Adds a hard link `name` in `dir` to `inode` (the VFS has checked it may; default: `EPERM`).
    fn link(&self, _dir: &Inode, _name: &[u8], _inode: &InodeRef) -> SysResult<()> {
        Err(Errno::EPERM)
    }
    /// Removes the entry `name` (of `inode`) from `dir` (default: `EPERM`).
    fn unlink(&self, _dir: &Inode, _name: &[u8], _inode: &Inode) -> SysResult<()> {
        Err(Errno::EPERM)
    }
    /// Removes an empty directory (`ENOTEMPTY` otherwise).
    fn rmdir(&self, _dir: &Inode, _name: &[u8], _inode: &Inode) -> SysResult<()> {
        Err(Errno::EPERM)
    }
    /// Renames; the VFS has checked types, emptiness of a replaced directory, loops and
    /// permissions. `flags` may hold `RENAME_EXCHANGE` (both exist).
    fn rename(
        &self,
        _old_dir: &Inode,
        _old_name: &[u8],
        _new_dir: &Inode,
        _new_name: &[u8],
        _flags: u32,
    ) -> SysResult<()> {
        Err(Errno::EPERM)
    }
    /// `rename` with `RENAME_WHITEOUT` (a plain rename otherwise, `RENAME_NOREPLACE`
    /// already checked): leaves a whiteout, a character device 0/0 with mode 0 owned by
    /// `owner` (uid, gid), at the old name. The default: a file system without whiteouts
    /// (`simple_rename`'s `EINVAL`).
    fn rename_whiteout(
        &self,
        _old_dir: &Inode,
        _old_name: &[u8],
        _new_dir: &Inode,
        _new_name: &[u8],
        _owner: (u32, u32),
    ) -> SysResult<()> {
        Err(Errno::EINVAL)
    }
    /// Emits entries from position `pos` (0 = start, including `.` and `..`) until `emit`
    /// returns false; returns true if it reached the end of the directory. Entries that
    /// exist throughout a directory scan are emitted exactly once.
    fn readdir(
        &self,
        dir: &Inode,
        parent_ino: u64,
        pos: i64,
        emit: &mut dyn FnMut(DirEmit<'_>) -> bool,
    ) -> SysResult<bool>;
    /// Reads file data at `off` into `buf`; returns the bytes read (0 at or past the end).
    fn read(&self, inode: &Inode, off: u64, buf: &mut [u8]) -> SysResult<usize>;
    /// Writes `buf` at `off`; returns the bytes written (a short write only on `ENOSPC`/`EFBIG` part way).
    fn write(&self, inode: &Inode, off: u64, buf: &[u8]) -> SysResult<usize>;
    /// Truncates or extends (with a hole) to `size`.
    fn setsize(&self, inode: &Inode, size: u64) -> SysResult<()>;
    /// Allocates `[off, off+len)` (mode 0: extends the size; `FALLOC_FL_KEEP_SIZE`: does
    /// not), or with `FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE` frees it. The VFS checked
    /// that the mode is a valid combination; one the file system does not provide is
    /// `EOPNOTSUPP`.
    fn fallocate(&self, inode: &Inode, mode: i32, off: u64, len: u64) -> SysResult<()>;
    /// `SEEK_DATA` (`data == true`) or `SEEK_HOLE` from `off` (`off < size`).
    fn seek_data(&self, inode: &Inode, off: u64, data: bool) -> SysResult<u64>;
    /// The target of the symbolic link `inode`.
    fn readlink(&self, inode: &Inode) -> SysResult<Vec<u8>>;
    /// Writes the file's data to stable storage (default: nothing to do, as tmpfs).
    fn fsync(&self, _inode: &Inode) -> SysResult<()> {
        Ok(())
    }
    /// 512-byte blocks allocated to the inode.
    fn blocks(&self, inode: &Inode) -> u64;
    /// Largest file size.
    fn max_file_size(&self) -> u64 {
        i64::MAX as u64
    }
    /// Per-open hook (`->open`; not called for `O_PATH`): state kept in the open file
    /// ([`OpenFile::private`]) and handed back to [`FileSystem::release`] after the last
    /// close.
    fn open(&self, _inode: &Inode, _flags: i32) -> SysResult<Option<Box<dyn Any + Send + Sync>>> {
        Ok(None)
    }
    /// `->release`: the open file's last reference went.
    fn release(&self, _inode: &Inode, _private: Box<dyn Any + Send + Sync>) {}
    /// `read` through an open file (file systems with per-open state override this).
    fn read_file(&self, f: &OpenFile, off: u64, buf: &mut [u8]) -> SysResult<usize> {
        self.read(f.inode(), off, buf)
    }
    /// `write` through an open file.
    fn write_file(&self, f: &OpenFile, off: u64, buf: &[u8]) -> SysResult<usize> {
        self.write(f.inode(), off, buf)
    }
    /// `lseek` through an open file at position `pos`, for file systems whose seek rules
    /// differ from the generic ones (kernfs: a 2^31-1 limit, `ENODEV` once removed):
    /// `Some(new position)` or `Some(errno)`; `None` (the default) is the generic seek.
    fn llseek(&self, _f: &OpenFile, _pos: i64, _off: i64, _whence: i32) -> Option<SysResult<i64>> {
        None
    }
    /// The `chattr` flags (`FS_*_FL`, see [`crate::fileattr`]) the inode may carry, or
    /// `None` for an inode without `->fileattr_get`/`->fileattr_set` (its
    /// `FS_IOC_GETFLAGS` is `ENOTTY`). The VFS keeps and enforces them. Default: `None`.
    fn fileattr_flags(&self, _inode: &Inode) -> Option<u32> {
        None
    }
    /// `->setattr` of `chmod`/`chown` (the VFS checked permission and computed the new
    /// values, type bits included): the file system may refuse (`ENOENT` for a node
    /// removed behind the VFS) or record them in its own objects, before the VFS updates
    /// the inode.
    fn setattr(&self, _inode: &Inode, _mode: u32, _uid: u32, _gid: u32) -> SysResult<()> {
        Ok(())
    }
    /// The value of extended attribute `name` (`ENODATA` if it has none). The VFS checked
    /// the name, its namespace and the caller's permission (`crate::xattr`). The default:
    /// a file system without extended attributes.
    fn getxattr(&self, _inode: &Inode, _name: &[u8]) -> SysResult<Vec<u8>> {
        Err(Errno::EOPNOTSUPP)
    }
    /// Sets `name` to `value`: `XATTR_CREATE` fails with `EEXIST` on an existing name,
    /// `XATTR_REPLACE` with `ENODATA` on a missing one. Called with the inode's `rwsem`
    /// held exclusively; the VFS updates ctime.
    fn setxattr(&self, _inode: &Inode, _name: &[u8], _value: &[u8], _flags: i32) -> SysResult<()> {
        Err(Errno::EOPNOTSUPP)
    }
    /// Every extended attribute name, in the order `listxattr` reports them (the VFS hides
    /// `trusted.*` from non-root callers).
    fn listxattr(&self, _inode: &Inode) -> SysResult<Vec<Vec<u8>>> {
        Ok(Vec::new())
    }
    /// Removes `name` (`ENODATA` if missing). Called like [`FileSystem::setxattr`].
    fn removexattr(&self, _inode: &Inode, _name: &[u8]) -> SysResult<()> {
        Err(Errno::EOPNOTSUPP)
    }
    /// `->statfs` of the superblock `sb`. The default: a file system without blocks or
    /// inode counts (type 0).
    fn statfs(&self, _sb: &SuperBlock) -> crate::abi::Statfs {
        crate::abi::Statfs::empty(0)
    }
    /// Where a FIFO inode keeps its pipe (`inode->i_pipe`), for named pipes: `None` (the
    /// default) for a file system whose FIFOs cannot be opened (`ENXIO`).
    fn fifo<'a>(&self, _inode: &'a Inode) -> Option<&'a crate::pipe::FifoSlot> {
        None
    }
    /// `->getattr`: refresh the inode's cached attributes before `stat` reports them, for
    /// file systems whose objects change behind the VFS (kernfs's `kernfs_refresh_inode`).
    fn getattr(&self, _inode: &Inode) {}
    /// A directory's size, link count and times, for a file system that does not keep
    /// them in the inode's own fields (module docs): `stat` reports these instead. `None`
    /// (the default): the inode's fields are current.
    fn dir_attrs(&self, _dir: &Inode) -> Option<DirAttrs> {
        None
    }
    /// Whether the directory `dir` takes concurrent changes of *different* names (create,
    /// `mkdir`, link, unlink, `rmdir`, rename of non-directories within it; the VFS holds
    /// a directory being removed exclusively itself): its own locks keep its
    /// entries consistent, and it keeps the directory's size, link count and times itself
    /// without a lost update ([`FileSystem::dir_attrs`]). The VFS then runs such changes
    /// under the directory's namespace lock shared and a lock per name, instead of the
    /// directory's `rwsem` (`core::dirlock`); lookups that miss the dcache still hold the
    /// `rwsem` shared. Default: `false` (every change holds the directory exclusively).
    fn shared_name_changes(&self, _dir: &Inode) -> bool {
        false
    }
    /// The VFS set the inode's mtime explicitly (`utimensat`), holding its `rwsem`
    /// exclusively: a file system that folds a directory's times from elsewhere
    /// ([`FileSystem::dir_attrs`]) forgets the changes before this one. Default: nothing.
    fn mtime_set(&self, _inode: &Inode) {}
    /// `->poll`: the open file's readiness source, for files that wake pollers (kernfs
    /// attributes: `POLLPRI|POLLERR` on `sysfs_notify`). `None` (the default): always
    /// ready and not watchable by epoll, as a regular file ([`crate::poll::RegularFile`]).
    /// The same open file gives the same object every time (epoll items hook onto it).
    fn pollable(&self, _f: &OpenFile) -> Option<Arc<dyn Pollable>> {
        None
    }
    /// Whether names can change behind the VFS's back (kernfs), so cached dentries must be
    /// revalidated: path walk then leaves rcu-walk for this file system's directories and
    /// asks [`FileSystem::revalidate`] about every cached answer.
    fn revalidates(&self) -> bool {
        false
    }
    /// `d_revalidate`: is the cached answer for `name` in `dir` (`inode`, or `None` for a
    /// negative entry) still right? `false` drops it and looks the name up again.
    fn revalidate(&self, _dir: &Inode, _name: &[u8], _inode: Option<&Inode>) -> bool {
        true
    }
    /// [`FileSystem::revalidate`] of a positive entry during rcu-walk: called under an
    /// epoch guard without references, it must not block nor free anything. `true` keeps
    /// the walk lock-free; `false` (the default, Linux's `-ECHILD`) falls back to
    /// ref-walk, which calls `revalidate`.
    fn revalidate_rcu(&self, _dir: &Inode, _name: &[u8], _inode: &Inode) -> bool {
        false
    }
}
