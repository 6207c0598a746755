//! The system-call API: [`Vfs`] (mounts and caches) and [`Process`] (fd table, cwd,
//! umask, credentials, POSIX lock owner).
//!
//! SKELETON: the signatures below are the contract other crates code against (the
//! conformance harness, the benchmarks, the FUSE server). The VFS-core work replaces the
//! bodies; it may add methods but must not change these signatures without updating callers.

use std::io::{IoSlice, IoSliceMut};
use std::sync::Arc;

use scalevfs_vfs::{Errno, FcntlArg, Stat, SysResult, Timespec};

pub use scalevfs_primitives::Locking;

/// How to build a [`Vfs`].
#[derive(Clone, Debug, Default)]
pub struct VfsOptions {
    pub locking: Locking,
    /// tmpfs `size=` in bytes for the root file system (`None`: unlimited).
    pub size_limit: Option<u64>,
    /// tmpfs `nr_inodes=` for the root file system (`None`: unlimited).
    pub inode_limit: Option<u64>,
}

/// A mounted tree: the mount table and the dentry and inode caches.
pub struct Vfs {
    _options: VfsOptions,
}

impl Vfs {
    pub fn new(options: VfsOptions) -> Arc<Vfs> {
        Arc::new(Vfs { _options: options })
    }
}

/// Who a process is, for permission checks and new files' ownership.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Credentials {
    pub uid: u32,
    pub gid: u32,
    /// Supplementary groups.
    pub groups: Vec<u32>,
}

impl Credentials {
    pub fn root() -> Credentials {
        Credentials {
            uid: 0,
            gid: 0,
            groups: Vec::new(),
        }
    }
    pub fn user(uid: u32, gid: u32) -> Credentials {
        Credentials {
            uid,
            gid,
            groups: Vec::new(),
        }
    }
}

/// A process: threads share one (`&Process` is `Send + Sync`). It is also the POSIX
/// record-lock owner; dropping it releases its locks, like process exit.
pub struct Process {
    _vfs: Arc<Vfs>,
    _creds: Credentials,
}

macro_rules! enosys {
    () => {
        Err(Errno::ENOSYS)
    };
}

#[allow(unused_variables)]
impl Process {
    pub fn new(vfs: &Arc<Vfs>, creds: Credentials) -> Process {
        Process {
            _vfs: vfs.clone(),
            _creds: creds,
        }
    }
    /// A child sharing the open file descriptions, cwd, umask and credentials, with a new
    /// pid (so a new POSIX lock owner), as `fork` does.
    pub fn fork(&self) -> Process {
        Process {
            _vfs: self._vfs.clone(),
            _creds: self._creds.clone(),
        }
    }
    /// The pid reported in `F_GETLK`'s `l_pid` and `/proc/locks`.
    pub fn pid(&self) -> i32 {
        0
    }

    // --- open, close, read, write ---
    pub fn openat(
        &self,
        dirfd: i32,
        path: impl AsRef<[u8]>,
        flags: i32,
        mode: u32,
    ) -> SysResult<i32> {
        enosys!()
    }
    pub fn close(&self, fd: i32) -> SysResult<()> {
        enosys!()
    }
    pub fn read(&self, fd: i32, buf: &mut [u8]) -> SysResult<usize> {
        enosys!()
    }
    pub fn write(&self, fd: i32, buf: &[u8]) -> SysResult<usize> {
        enosys!()
    }
    pub fn pread64(&self, fd: i32, buf: &mut [u8], offset: i64) -> SysResult<usize> {
        enosys!()
    }
    pub fn pwrite64(&self, fd: i32, buf: &[u8], offset: i64) -> SysResult<usize> {
        enosys!()
    }
    pub fn readv(&self, fd: i32, bufs: &mut [IoSliceMut<'_>]) -> SysResult<usize> {
        enosys!()
    }
    pub fn writev(&self, fd: i32, bufs: &[IoSlice<'_>]) -> SysResult<usize> {
        enosys!()
    }
    pub fn lseek(&self, fd: i32, offset: i64, whence: i32) -> SysResult<i64> {
        enosys!()
    }

    // --- metadata ---
    pub fn newfstatat(&self, dirfd: i32, path: impl AsRef<[u8]>, flags: i32) -> SysResult<Stat> {
        enosys!()
    }
    pub fn fstat(&self, fd: i32) -> SysResult<Stat> {
        enosys!()
    }
    pub fn fchmodat(
        &self,
        dirfd: i32,
        path: impl AsRef<[u8]>,
        mode: u32,
        flags: i32,
    ) -> SysResult<()> {
        enosys!()
    }
    pub fn fchmod(&self, fd: i32, mode: u32) -> SysResult<()> {
        enosys!()
    }
    /// `uid`/`gid` of `u32::MAX` (-1) leave that id unchanged.
    pub fn fchownat(
        &self,
        dirfd: i32,
        path: impl AsRef<[u8]>,
        uid: u32,
        gid: u32,
        flags: i32,
    ) -> SysResult<()> {
        enosys!()
    }
    pub fn fchown(&self, fd: i32, uid: u32, gid: u32) -> SysResult<()> {
        enosys!()
    }
    /// `times == None` sets both to now; `nsec` may be `UTIME_NOW` or `UTIME_OMIT`.
    /// An empty `path` with `AT_EMPTY_PATH`... follows Linux (`futimens` is `path == ""`).
    pub fn utimensat(
        &self,
        dirfd: i32,
        path: impl AsRef<[u8]>,
        times: Option<[Timespec; 2]>,
        flags: i32,
    ) -> SysResult<()> {
        enosys!()
    }
    pub fn faccessat(
        &self,
        dirfd: i32,
        path: impl AsRef<[u8]>,
        mode: i32,
        flags: i32,
    ) -> SysResult<()> {
        enosys!()
    }
    /// Sets the umask and returns the previous one.
    pub fn umask(&self, mask: u32) -> u32 {
        0o022
    }

    // --- namespace ---
    pub fn mkdirat(&self, dirfd: i32, path: impl AsRef<[u8]>, mode: u32) -> SysResult<()> {
        enosys!()
    }
    pub fn unlinkat(&self, dirfd: i32, path: impl AsRef<[u8]>, flags: i32) -> SysResult<()> {
        enosys!()
    }
    pub fn renameat2(
        &self,
        olddirfd: i32,
        oldpath: impl AsRef<[u8]>,
        newdirfd: i32,
        newpath: impl AsRef<[u8]>,
        flags: u32,
    ) -> SysResult<()> {
        enosys!()
    }
    pub fn linkat(
        &self,
        olddirfd: i32,
        oldpath: impl AsRef<[u8]>,
        newdirfd: i32,
        newpath: impl AsRef<[u8]>,
        flags: i32,
    ) -> SysResult<()> {
        enosys!()
    }
    pub fn symlinkat(
        &self,
        target: impl AsRef<[u8]>,
        newdirfd: i32,
        linkpath: impl AsRef<[u8]>,
    ) -> SysResult<()> {
        enosys!()
    }
    /// Fills `buf` with the link target (no NUL, truncated to `buf.len()`), as Linux does.
    pub fn readlinkat(
        &self,
        dirfd: i32,
        path: impl AsRef<[u8]>,
        buf: &mut [u8],
    ) -> SysResult<usize> {
        enosys!()
    }
    /// Fills `buf` with `struct linux_dirent64` records; returns bytes used (0 at the end).
    pub fn getdents64(&self, fd: i32, buf: &mut [u8]) -> SysResult<usize> {
        enosys!()
    }

    // --- sizes ---
    pub fn truncate(&self, path: impl AsRef<[u8]>, length: i64) -> SysResult<()> {
        enosys!()
    }
    pub fn ftruncate(&self, fd: i32, length: i64) -> SysResult<()> {
        enosys!()
    }
    pub fn fallocate(&self, fd: i32, mode: i32, offset: i64, len: i64) -> SysResult<()> {
        enosys!()
    }

    // --- descriptors and directories ---
    pub fn dup(&self, fd: i32) -> SysResult<i32> {
        enosys!()
    }
    pub fn dup2(&self, oldfd: i32, newfd: i32) -> SysResult<i32> {
        enosys!()
    }
    pub fn dup3(&self, oldfd: i32, newfd: i32, flags: i32) -> SysResult<i32> {
        enosys!()
    }
    pub fn fcntl(&self, fd: i32, cmd: i32, arg: FcntlArg<'_>) -> SysResult<i32> {
        enosys!()
    }
    pub fn chdir(&self, path: impl AsRef<[u8]>) -> SysResult<()> {
        enosys!()
    }
    pub fn fchdir(&self, fd: i32) -> SysResult<()> {
        enosys!()
    }
    /// Fills `buf` with the NUL-terminated cwd and returns its length including the NUL;
    /// `ERANGE` if it does not fit.
    pub fn getcwd(&self, buf: &mut [u8]) -> SysResult<usize> {
        enosys!()
    }
    pub fn fsync(&self, fd: i32) -> SysResult<()> {
        enosys!()
    }
    pub fn fdatasync(&self, fd: i32) -> SysResult<()> {
        enosys!()
    }
}
