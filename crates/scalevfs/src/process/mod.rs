//! The system-call API: [`Process`] (fd table, cwd, umask, credentials, POSIX lock owner)
//! over a [`Vfs`] (mounts and caches, in `crate::vfs`).
//!
//! The signatures are the contract other crates code against (the conformance harness,
//! the benchmarks, the FUSE server).
//!
//! Each method resolves its descriptors and `dirfd` (the fd table is lock-free, see
//! [`crate::fdtable`]) and calls the matching [`VfsCore`] operation, which has Linux's
//! semantics and errno values. Absolute paths never touch the process's cwd; relative ones
//! read it under the process's sequence counter, without a lock, and take a count on it
//! (see `crate::cwd`).
//!
//! This module holds the process itself (exit, path-walk starts) and the convenience
//! wrappers; the system calls are grouped by family:
//!
//! | module        | system calls                                                         |
//! |---------------|----------------------------------------------------------------------|
//! | `io`          | open, read, write, vectored and positioned I/O, lseek, truncate, sync |
//! | `meta`        | stat, statx, statfs, chmod, chown, utimensat, faccessat, umask        |
//! | `xattr`       | the `*xattr` calls                                                    |
//! | `namespace`   | mkdir, mknod, unlink, rename, link, symlink, readlink, getdents, mount, chdir, getcwd |
//! | `fcntl`       | descriptors (close, dup, close_range), fcntl, file locks              |
//! | `events`      | pipes, eventfds, epoll, poll                                          |
//! | `ioctl`       | ioctl: the inode flags (`FS_IOC_GETFLAGS`, ...)                        |
//! | `cancel`      | [`Cancellable`]: the blocking calls, interrupted by a `CancelToken`     |
//! | `credentials` | the ids ([`Credentials`]): setresuid, setresgid, setfsuid, setgroups, ... |
//! | `lifecycle`   | creation ([`ProcessBuilder`]: pid, credentials, umask, root, cwd), fork, exec |

mod cancel;
mod credentials;
mod events;
mod fcntl;
mod io;
mod ioctl;
mod lifecycle;
mod meta;
mod namespace;
mod xattr;

use crate::typed::PathArg;
use std::sync::atomic::AtomicU32;
use std::sync::Arc;

use crate::cwd::{Cwd, PinnedCwd};
use crate::fdtable::FdTable;
use scalevfs_vfs::namei::Ctx;
use scalevfs_vfs::{Cred, DirEntry, Errno, FileRef, Path, Stat, SysResult, VfsCore};

use crate::vfs::Vfs;
pub use cancel::Cancellable;
pub use credentials::{Credentials, NGROUPS_MAX, UNCHANGED};
pub use ioctl::{ioctl_arg, IoctlArg};
pub use lifecycle::ProcessBuilder;

/// A process: threads share one (`&Process` is `Send + Sync`). It is also the POSIX
/// record-lock owner; dropping it releases its locks, like process exit.
pub struct Process {
    // Field order is drop order: descriptors and cwd go before the VFS they point into.
    fds: FdTable,
    cwd: Cwd,
    root: Path,
    umask: AtomicU32,
    /// What permission checks use: `creds`' fs ids and groups (kept apart so that the hot
    /// path reads it without deriving it).
    cred: Cred,
    creds: Credentials,
    pid: i32,
    vfs: Arc<Vfs>,
}

/// Where a path resolution starts (see `Process::start`).
enum Start<'a> {
    Borrowed(&'a Path),
    /// The cwd, pinned (counted once per process, not per call: `cwd` module docs).
    Cwd(PinnedCwd),
    File(FileRef),
}

impl Start<'_> {
    fn path(&self) -> &Path {
        match self {
            Start::Borrowed(p) => p,
            Start::Cwd(p) => p,
            Start::File(f) => f.path(),
        }
    }
}

impl Process {
    /// A process of `vfs` with `creds`, umask 022, root and cwd at the tree's root, and
    /// the next free pid of `vfs` (see [`ProcessBuilder`] for the other choices).
    ///
    /// # Panics
    /// If all of `vfs`'s pids ([`PID_MAX`](crate::pids::PID_MAX)) are in use; use
    /// [`ProcessBuilder::build`] to get `EAGAIN` instead.
    pub fn new(vfs: &Arc<Vfs>, creds: Credentials) -> Process {
        ProcessBuilder::new(vfs)
            .credentials(creds)
            .build()
            .expect("every pid of this Vfs is in use")
    }
    /// A process with pid `pid` (already taken from `vfs.pids`), root and cwd at the
    /// tree's root.
    fn with_pid(vfs: &Arc<Vfs>, creds: Credentials, pid: i32) -> Process {
        let root = vfs.core.root();
        Process {
            fds: FdTable::default(),
            cwd: Cwd::new(root.clone()),
            root,
            umask: AtomicU32::new(0o022),
            cred: creds.fs_cred(),
            creds,
            pid,
            vfs: vfs.clone(),
        }
    }
    /// The pid reported in `F_GETLK`'s `l_pid` and `/proc/locks`.
    pub fn pid(&self) -> i32 {
        self.pid
    }
    /// The tree the process lives in.
    pub fn vfs(&self) -> &Arc<Vfs> {
        &self.vfs
    }
    /// Sets the descriptor limit (`setrlimit(RLIMIT_NOFILE)`); default 1024.
    pub fn set_fd_limit(&self, n: u32) -> SysResult<()> {
        self.fds.set_limit(n)
    }
    /// The open file description behind `fd` (for the file-locks and epoll code).
    pub fn file(&self, fd: i32) -> SysResult<FileRef> {
        self.fds.get(fd)
    }
    /// Process exit: closes every descriptor, which releases the process's POSIX locks
    /// and, with each last close, the OFD and flock locks of the open file descriptions.
    pub fn exit(&self) {
        for (fd, _, _) in self.fds.snapshot() {
            let _ = self.close(fd);
        }
        self.fds.close_all();
    }
    fn core(&self) -> &VfsCore {
        &self.vfs.core
    }
    fn ctx(&self) -> Ctx<'_> {
        Ctx::new(&self.cred, &self.root)
    }
    /// The starting point for `path` relative to `dirfd` (absolute paths ignore `dirfd`).
    ///
    /// Borrowed where possible: an absolute path starts at the process root without taking a
    /// reference (a `dget` of `/` on every call would make the root dentry's count the
    /// hottest cache line of the system), and a `dirfd` start borrows the file's path.
    fn start(&self, dirfd: i32, path: &[u8]) -> SysResult<Start<'_>> {
        if path.first() == Some(&b'/') {
            return Ok(Start::Borrowed(&self.root));
        }
        if dirfd == libc::AT_FDCWD {
            return Ok(Start::Cwd(self.cwd.pin()));
        }
        Ok(Start::File(self.fds.get(dirfd)?))
    }
    /// [`start`](Self::start) for a path that must name something: an empty path is
    /// `ENOENT` before `dirfd` is looked at (`getname` fails before the walk starts).
    fn start_named(&self, dirfd: i32, path: &[u8]) -> SysResult<Start<'_>> {
        if path.is_empty() {
            return Err(Errno::ENOENT);
        }
        self.start(dirfd, path)
    }
    /// Resolves `(dirfd, path)` with `AT_SYMLINK_NOFOLLOW` / `AT_EMPTY_PATH` semantics.
    fn resolve_at(
        &self,
        dirfd: i32,
        path: &[u8],
        flags: i32,
        follow_default: bool,
    ) -> SysResult<Path> {
        self.resolve_at_with(&self.ctx(), dirfd, path, flags, follow_default)
    }
    /// [`resolve_at`](Self::resolve_at) with `ctx`'s credentials.
    fn resolve_at_with(
        &self,
        ctx: &Ctx<'_>,
        dirfd: i32,
        path: &[u8],
        flags: i32,
        follow_default: bool,
    ) -> SysResult<Path> {
        if path.is_empty() {
            if flags & libc::AT_EMPTY_PATH != 0 {
                return Ok(self.start(dirfd, path)?.path().clone());
            }
            return Err(Errno::ENOENT);
        }
        let follow = follow_default && flags & libc::AT_SYMLINK_NOFOLLOW == 0;
        let start = self.start(dirfd, path)?;
        self.core().lookup(ctx, start.path(), path, follow, false)
    }

    /// [`resolve_at_with`](Self::resolve_at_with) answering `f` of the result, which
    /// rcu-walk gives without counting the file's dentry (`VfsCore::lookup_with`): for
    /// calls that only read (stat, access). `f` may run twice.
    fn inspect_at<R>(
        &self,
        ctx: &Ctx<'_>,
        dirfd: i32,
        path: &[u8],
        flags: i32,
        f: impl Fn(scalevfs_vfs::namei::PathRef<'_>) -> R,
    ) -> SysResult<R> {
        if path.is_empty() {
            return self
                .resolve_at_with(ctx, dirfd, path, flags, true)
                .map(|p| f((&p).into()));
        }
        let follow = flags & libc::AT_SYMLINK_NOFOLLOW == 0;
        let start = self.start(dirfd, path)?;
        self.core().lookup_with(ctx, start.path(), path, follow, f)
    }
}

impl Drop for Process {
    /// Dropping a process is its exit: its locks go with its descriptors.
    fn drop(&mut self) {
        self.exit();
        self.vfs.pids.free(self.pid);
    }
}

/// Convenience wrappers (not system calls).
impl Process {
    /// `stat(path)`.
    pub fn stat(&self, path: impl PathArg) -> SysResult<Stat> {
        self.newfstatat(libc::AT_FDCWD, path, 0)
    }
    /// `lstat(path)`.
    pub fn lstat(&self, path: impl PathArg) -> SysResult<Stat> {
        self.newfstatat(libc::AT_FDCWD, path, libc::AT_SYMLINK_NOFOLLOW)
    }
    /// `mkdir(path, mode)`.
    pub fn mkdir(&self, path: impl PathArg, mode: u32) -> SysResult<()> {
        self.mkdirat(libc::AT_FDCWD, path, mode)
    }
    /// `unlink(path)`.
    pub fn unlink(&self, path: impl PathArg) -> SysResult<()> {
        self.unlinkat(libc::AT_FDCWD, path, 0)
    }
    /// `rmdir(path)`.
    pub fn rmdir(&self, path: impl PathArg) -> SysResult<()> {
        self.unlinkat(libc::AT_FDCWD, path, libc::AT_REMOVEDIR)
    }
    /// `rename(old, new)`.
    pub fn rename(&self, old: impl PathArg, new: impl PathArg) -> SysResult<()> {
        self.renameat2(libc::AT_FDCWD, old, libc::AT_FDCWD, new, 0)
    }
    /// `getcwd` as bytes (without the NUL).
    pub fn cwd(&self) -> SysResult<Vec<u8>> {
        let mut buf = vec![0u8; 4096];
        let n = self.getcwd(&mut buf)?;
        buf.truncate(n - 1);
        Ok(buf)
    }
    /// Reads a whole directory through `getdents64` (opens and closes it).
    pub fn readdir(&self, path: impl PathArg) -> SysResult<Vec<DirEntry>> {
        let fd = self.openat(libc::AT_FDCWD, path, libc::O_RDONLY | libc::O_DIRECTORY, 0)?;
        let mut out = Vec::new();
        let mut buf = vec![0u8; 8192];
        let r = loop {
            match self.getdents64(fd, &mut buf) {
                Ok(0) => break Ok(out),
                Ok(n) => out.extend(scalevfs_vfs::core::decode_dirents(&buf[..n])),
                Err(e) => break Err(e),
            }
        };
        let _ = self.close(fd);
        r
    }
    /// Reads a whole file.
    pub fn read_file(&self, path: impl PathArg) -> SysResult<Vec<u8>> {
        let fd = self.open(path, libc::O_RDONLY, 0)?;
        let mut out = Vec::new();
        let mut buf = vec![0u8; 65536];
        let r = loop {
            match self.read(fd, &mut buf) {
                Ok(0) => break Ok(out),
                Ok(n) => out.extend_from_slice(&buf[..n]),
                Err(e) => break Err(e),
            }
        };
        let _ = self.close(fd);
        r
    }
    /// Creates (or truncates) a file with `data`, writing until all of it is written: a
    /// short write is continued, and the error that stops it (`ENOSPC` when the file
    /// system fills, say) is returned, with the part written so far left in the file, as
    /// a `write` loop in C would leave it. A write that makes no progress is `EIO`.
    pub fn write_file(&self, path: impl PathArg, data: &[u8]) -> SysResult<()> {
        let fd = self.open(path, libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC, 0o644)?;
        let mut rest = data;
        let r = loop {
            if rest.is_empty() {
                break Ok(());
            }
            match self.write(fd, rest) {
                Ok(0) => break Err(Errno::EIO),
                Ok(n) => rest = &rest[n.min(rest.len())..],
                Err(e) => break Err(e),
            }
        };
        let closed = self.close(fd);
        r.and(closed)
    }
}
