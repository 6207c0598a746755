//! The system-call API: [`Vfs`] (mounts and caches) and [`Process`] (fd table, cwd,
//! umask, credentials, POSIX lock owner).
//!
//! The signatures below are the contract other crates code against (the conformance
//! harness, the benchmarks, the FUSE server).
//!
//! Each method resolves its descriptors and `dirfd` (the fd table is lock-free, see
//! [`crate::fdtable`]) and calls the matching [`VfsCore`] operation, which has Linux's
//! semantics and errno values. Absolute paths never touch the process's cwd; relative ones
//! read it under a per-process `RwLock` (shared).

use std::io::{IoSlice, IoSliceMut};
use std::sync::atomic::{AtomicI32, AtomicU32, Ordering};
use std::sync::Arc;

use crate::cwd::Cwd;
use scalevfs_tmpfs::{Tmpfs, TmpfsOptions};
use scalevfs_vfs::cancel::CancelToken;
use scalevfs_vfs::core::CoreOptions;
use scalevfs_vfs::dentry::DPathError;
use scalevfs_vfs::locks::LockManager;
use scalevfs_vfs::namei::{Ctx, Resolve, PATH_MAX};
use scalevfs_vfs::{
    Cred, DirEntry, Errno, FcntlArg, FileRef, FileSystem, OpenHow, Path, Stat, Statfs, Statx,
    SysResult, Timespec, VfsCore,
};

use crate::fdtable::FdTable;
use crate::locking;
use crate::pollfiles::{self, special, PollFiles, Special};
use scalevfs_vfs::epoll::EpollEvent;
use scalevfs_vfs::xattr;

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
    /// Pipes, eventfds and epolls (the epoll context and their internal mount); dropped
    /// before `core`, whose mount table frees that mount.
    poll: PollFiles,
    core: Arc<VfsCore>,
    options: VfsOptions,
    /// File locks (`fcntl` record locks, OFD locks, `flock`); see [`crate::locking`].
    locks: LockManager,
}

impl Vfs {
    pub fn new(options: VfsOptions) -> Arc<Vfs> {
        Vfs::with_core_options(options, CoreOptions::default())
    }

    /// Like [`Vfs::new`] with dcache tuning (`core.locking` is taken from `options`).
    pub fn with_core_options(options: VfsOptions, core: CoreOptions) -> Arc<Vfs> {
        let fs = Arc::new(Tmpfs::new(TmpfsOptions {
            size_limit: options.size_limit,
            inode_limit: options.inode_limit,
        }));
        let core = VfsCore::new(
            CoreOptions {
                locking: options.locking,
                ..core
            },
            fs,
        )
        .expect("mounting the root tmpfs cannot fail");
        let locks = LockManager::new(options.locking);
        let poll = PollFiles::new(options.locking);
        Arc::new(Vfs {
            poll,
            core,
            options,
            locks,
        })
    }

    pub fn options(&self) -> &VfsOptions {
        &self.options
    }

    /// The VFS core (dcache, mounts, operations).
    pub fn core(&self) -> &Arc<VfsCore> {
        &self.core
    }

    /// The epoll context (the nesting lock; the legacy ablation's global release lock).
    pub fn epoll_context(&self) -> &Arc<scalevfs_vfs::epoll::EpollContext> {
        self.poll.epoll_context()
    }

    /// Mounts `fs` on the directory at absolute `path` (resolved as root).
    pub fn mount(&self, path: impl AsRef<[u8]>, fs: Arc<dyn FileSystem>) -> SysResult<()> {
        let root = self.core.root();
        let cred = Cred::root();
        let ctx = Ctx::new(&cred, &root);
        let at = self.core.lookup(&ctx, &root, path.as_ref(), true, true)?;
        self.core.mount(&at, fs).map(|_| ())
    }

    /// Unmounts the file system mounted at absolute `path` (resolved as root; `umount2`
    /// with no flags: `EBUSY` while anything in it is in use). See [`Process::umount2`].
    pub fn umount(&self, path: impl AsRef<[u8]>) -> SysResult<()> {
        let root = self.core.root();
        let cred = Cred::root();
        let ctx = Ctx::new(&cred, &root);
        let target = self.core.lookup(&ctx, &root, path.as_ref(), true, false)?;
        self.core.umount(target, 0)
    }

    /// The file-lock manager.
    pub fn locks(&self) -> &LockManager {
        &self.locks
    }

    /// Every held and waiting file lock, in `/proc/locks` format.
    pub fn proc_locks(&self) -> String {
        self.locks.proc_locks()
    }

    /// Live inodes over every mounted file system.
    pub fn inode_count(&self) -> usize {
        self.core
            .superblocks()
            .iter()
            .map(|s| s.inode_count())
            .sum()
    }

    /// Frees unused cached dentries and lets deferred frees run (`drop_caches`).
    pub fn drop_caches(&self) {
        self.core.drop_caches();
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
    // Field order is drop order: descriptors and cwd go before the VFS they point into.
    fds: FdTable,
    cwd: Cwd,
    root: Path,
    umask: AtomicU32,
    cred: Cred,
    creds: Credentials,
    pid: i32,
    vfs: Arc<Vfs>,
}

/// Where a path resolution starts (see `Process::start`).
enum Start<'a> {
    Borrowed(&'a Path),
    Owned(Path),
    File(FileRef),
}

impl Start<'_> {
    fn path(&self) -> &Path {
        match self {
            Start::Borrowed(p) => p,
            Start::Owned(p) => p,
            Start::File(f) => f.path(),
        }
    }
}

/// `UIO_MAXIOV`: the most iovecs one `readv`/`writev` takes (more: `EINVAL`).
const IOV_MAX: usize = 1024;

/// Moves data segment by segment, in order (`do_loop_readv_writev`): `io(segment, bytes
/// so far)`; a short transfer ends it, and an error is returned only if nothing moved.
fn each_segment<S: AsRef<[u8]>>(
    segs: impl IntoIterator<Item = S>,
    mut io: impl FnMut(S, usize) -> SysResult<usize>,
) -> SysResult<usize> {
    let mut total = 0;
    for seg in segs {
        let len = seg.as_ref().len();
        match io(seg, total) {
            Ok(n) => {
                total += n;
                if n < len {
                    break;
                }
            }
            Err(e) if total == 0 => return Err(e),
            Err(_) => break,
        }
    }
    Ok(total)
}

/// The non-empty segments of a read (empty ones take no part in it).
fn read_segments<'a, 'b>(
    bufs: &'a mut [IoSliceMut<'b>],
) -> impl Iterator<Item = &'a mut [u8]> + use<'a, 'b> {
    bufs.iter_mut().map(|b| &mut **b).filter(|b| !b.is_empty())
}

fn next_pid() -> i32 {
    static NEXT: AtomicI32 = AtomicI32::new(100);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

impl Process {
    pub fn new(vfs: &Arc<Vfs>, creds: Credentials) -> Process {
        let root = vfs.core.root();
        Process {
            fds: FdTable::default(),
            cwd: Cwd::new(root.clone()),
            root,
            umask: AtomicU32::new(0o022),
            cred: Cred {
                uid: creds.uid,
                gid: creds.gid,
                groups: creds.groups.clone(),
            },
            creds,
            pid: next_pid(),
            vfs: vfs.clone(),
        }
    }
    /// A child sharing the open file descriptions, cwd, umask and credentials, with a new
    /// pid (so a new POSIX lock owner), as `fork` does.
    pub fn fork(&self) -> Process {
        let child = Process::new(&self.vfs, self.creds.clone());
        child.cwd.set(self.cwd.get());
        child
            .umask
            .store(self.umask.load(Ordering::Relaxed), Ordering::Relaxed);
        let _ = child.fds.set_limit(self.fds.limit());
        for (fd, f, ce) in self.fds.snapshot() {
            let _ = child.fds.replace(fd, f, ce);
        }
        child
    }
    /// The pid reported in `F_GETLK`'s `l_pid` and `/proc/locks`.
    pub fn pid(&self) -> i32 {
        self.pid
    }
    pub fn credentials(&self) -> &Credentials {
        &self.creds
    }
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
    /// The record-lock context of a call on `fd` (see [`crate::locking`]).
    fn lock_caller(&self, fd: i32) -> locking::Caller<'_> {
        locking::Caller {
            mgr: &self.vfs.locks,
            fds: &self.fds,
            fd,
            pid: self.pid,
        }
    }
    /// `fcntl` whose blocking lock commands (`F_SETLKW`, `F_OFD_SETLKW`) give up with
    /// `EINTR` when `cancel` fires (a signal; FUSE_INTERRUPT). Other commands behave as
    /// [`fcntl`](Self::fcntl).
    pub fn fcntl_interruptible(
        &self,
        fd: i32,
        cmd: i32,
        arg: FcntlArg<'_>,
        cancel: &CancelToken,
    ) -> SysResult<i32> {
        if !locking::is_lock_cmd(cmd) {
            return self.fcntl(fd, cmd, arg);
        }
        let f = self.fds.get(fd)?;
        self.lock_caller(fd).fcntl(&f, cmd, arg, Some(cancel))
    }
    /// `flock(fd, op)`: `LOCK_SH`, `LOCK_EX` or `LOCK_UN`, optionally `| LOCK_NB`. The lock
    /// belongs to the open file description.
    pub fn flock(&self, fd: i32, op: i32) -> SysResult<()> {
        self.lock_caller(fd).flock(op, None)
    }
    /// [`flock`](Self::flock) whose wait gives up with `EINTR` when `cancel` fires.
    pub fn flock_interruptible(&self, fd: i32, op: i32, cancel: &CancelToken) -> SysResult<()> {
        self.lock_caller(fd).flock(op, Some(cancel))
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
            return Ok(Start::Owned(self.cwd.get()));
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
        if path.is_empty() {
            if flags & libc::AT_EMPTY_PATH != 0 {
                return Ok(self.start(dirfd, path)?.path().clone());
            }
            return Err(Errno::ENOENT);
        }
        let follow = follow_default && flags & libc::AT_SYMLINK_NOFOLLOW == 0;
        let start = self.start(dirfd, path)?;
        self.core()
            .lookup(&self.ctx(), start.path(), path, follow, false)
    }

    // --- open, close, read, write ---
    pub fn openat(
        &self,
        dirfd: i32,
        path: impl AsRef<[u8]>,
        flags: i32,
        mode: u32,
    ) -> SysResult<i32> {
        let path = path.as_ref();
        if path.is_empty() {
            return Err(Errno::ENOENT);
        }
        self.openat_cancellable(dirfd, path, flags, mode, None)
    }
    /// [`openat`](Self::openat) whose wait for a named pipe's partner (a FIFO opened for
    /// reading waits for a writer and the other way round, unless `O_NONBLOCK`) ends with
    /// `EINTR` when `cancel` fires (a signal).
    pub fn openat_interruptible(
        &self,
        dirfd: i32,
        path: impl AsRef<[u8]>,
        flags: i32,
        mode: u32,
        cancel: &CancelToken,
    ) -> SysResult<i32> {
        let path = path.as_ref();
        if path.is_empty() {
            return Err(Errno::ENOENT);
        }
        self.openat_cancellable(dirfd, path, flags, mode, Some(cancel))
    }
    fn openat_cancellable(
        &self,
        dirfd: i32,
        path: &[u8],
        flags: i32,
        mode: u32,
        cancel: Option<&CancelToken>,
    ) -> SysResult<i32> {
        let start = self.start(dirfd, path)?;
        let umask = self.umask.load(Ordering::Relaxed);
        let f = self
            .core()
            .open(&self.ctx(), start.path(), path, flags, mode, umask)?;
        let f = pollfiles::open_fifo(f, cancel)?;
        self.fds.alloc(0, f, flags & libc::O_CLOEXEC != 0)
    }
    /// `openat2(2)`: `openat` with strict flag checking and the `RESOLVE_*` restrictions
    /// on the walk (see `scalevfs_vfs::namei::Resolve`): `RESOLVE_BENEATH` and
    /// `RESOLVE_IN_ROOT` confine it to `dirfd` (the cwd for `AT_FDCWD`), which is what a
    /// sandbox or a WASI runtime needs to keep a guest's paths inside its directory.
    ///
    /// `EINVAL` for unknown flag, mode or resolve bits, a mode without `O_CREAT` or
    /// `O_TMPFILE`, `O_PATH` with flags it does not take, or both `RESOLVE_BENEATH` and
    /// `RESOLVE_IN_ROOT`; `EAGAIN` for `RESOLVE_CACHED` with `O_CREAT`, `O_TRUNC` or
    /// `O_TMPFILE`, or when the answer is not in the caches.
    pub fn openat2(&self, dirfd: i32, path: impl AsRef<[u8]>, how: &OpenHow) -> SysResult<i32> {
        const VALID_FLAGS: u64 = (libc::O_ACCMODE
            | libc::O_CREAT
            | libc::O_EXCL
            | libc::O_NOCTTY
            | libc::O_TRUNC
            | libc::O_APPEND
            | libc::O_NONBLOCK
            | libc::O_DSYNC
            | libc::O_SYNC
            | libc::O_ASYNC
            | libc::O_DIRECT
            | libc::O_LARGEFILE
            | libc::O_DIRECTORY
            | libc::O_NOFOLLOW
            | libc::O_NOATIME
            | libc::O_CLOEXEC
            | libc::O_PATH
            | libc::O_TMPFILE) as u64;
        const O_PATH_FLAGS: u64 =
            (libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_PATH | libc::O_CLOEXEC) as u64;
        // build_open_how / build_open_flags, in their order.
        if how.flags & !VALID_FLAGS != 0 {
            return Err(Errno::EINVAL);
        }
        let creates = how.flags & (libc::O_CREAT | libc::O_TMPFILE) as u64 != 0;
        if creates && how.mode & !0o7777 != 0 || !creates && how.mode != 0 {
            return Err(Errno::EINVAL);
        }
        if how.resolve & !Resolve::ALL != 0 || how.resolve & Resolve::SCOPED == Resolve::SCOPED {
            return Err(Errno::EINVAL);
        }
        if how.flags & libc::O_PATH as u64 != 0 && how.flags & !O_PATH_FLAGS != 0 {
            return Err(Errno::EINVAL);
        }
        // What build_open_flags checks before RESOLVE_CACHED's EAGAIN (`VfsCore::open`
        // checks it again, for openat): O_CREAT with O_DIRECTORY, and an O_TMPFILE without
        // O_DIRECTORY or write access, are EINVAL even under RESOLVE_CACHED.
        let tmpfile = (libc::O_TMPFILE & !libc::O_DIRECTORY) as u64;
        let (o_creat, o_dir) = (libc::O_CREAT as u64, libc::O_DIRECTORY as u64);
        if how.flags & (o_creat | o_dir) == o_creat | o_dir
            || how.flags & tmpfile != 0
                && (how.flags & o_dir == 0 || how.flags & libc::O_ACCMODE as u64 == 0)
        {
            return Err(Errno::EINVAL);
        }
        if how.resolve & Resolve::CACHED != 0
            && how.flags & (libc::O_TRUNC | libc::O_CREAT | libc::O_TMPFILE) as u64 != 0
        {
            return Err(Errno::EAGAIN);
        }
        let path = path.as_ref();
        if path.is_empty() {
            return Err(Errno::ENOENT);
        }
        let flags = how.flags as i32;
        // path_init refuses an absolute path under RESOLVE_BENEATH (nd_jump_root) before it
        // looks at dirfd: EXDEV even for a descriptor that is not open.
        if how.resolve & Resolve::BENEATH != 0 && path.first() == Some(&b'/') {
            return Err(Errno::EXDEV);
        }
        let scoped = how.resolve & Resolve::SCOPED != 0;
        // A scoped walk starts at dirfd even for an absolute path, and dirfd is its root.
        let start = if scoped && path.first() == Some(&b'/') {
            self.start(dirfd, b".")?
        } else {
            self.start(dirfd, path)?
        };
        let root = if scoped {
            start.path().clone()
        } else {
            self.root.clone()
        };
        let mut ctx = Ctx::new(&self.cred, &root);
        ctx.resolve = how.resolve;
        let umask = self.umask.load(Ordering::Relaxed);
        let f = self.core().scoped(&ctx, || {
            self.core()
                .open(&ctx, start.path(), path, flags, how.mode as u32, umask)
        })?;
        let f = pollfiles::open_fifo(f, None)?;
        self.fds.alloc(0, f, flags & libc::O_CLOEXEC != 0)
    }
    /// `open(path, flags, mode)` relative to the cwd.
    pub fn open(&self, path: impl AsRef<[u8]>, flags: i32, mode: u32) -> SysResult<i32> {
        self.openat(libc::AT_FDCWD, path, flags, mode)
    }
    /// `close_range(2)`: closes (with `CLOSE_RANGE_CLOEXEC`: marks close-on-exec) every
    /// open descriptor from `first` to `last`. `first > last` or an unknown flag is
    /// `EINVAL`. `CLOSE_RANGE_UNSHARE` is accepted, but the range is closed in the table
    /// the process's threads share (Linux would give the calling thread a copy first):
    /// the same when, as usual, the caller is a single-threaded child after `fork`.
    pub fn close_range(&self, first: u32, last: u32, flags: u32) -> SysResult<()> {
        if flags & !(libc::CLOSE_RANGE_UNSHARE | libc::CLOSE_RANGE_CLOEXEC) != 0 || first > last {
            return Err(Errno::EINVAL);
        }
        for fd in self.fds.open_in(first, last) {
            // A descriptor another thread closed meanwhile is simply gone (EBADF).
            if flags & libc::CLOSE_RANGE_CLOEXEC != 0 {
                let _ = self.fds.set_cloexec(fd, true);
            } else {
                let _ = self.close(fd);
            }
        }
        Ok(())
    }
    /// `sync(2)`: nothing to write back (everything is in memory).
    pub fn sync(&self) {}
    /// `syncfs(2)`: `EBADF` for a bad descriptor; nothing to write back.
    pub fn syncfs(&self, fd: i32) -> SysResult<()> {
        self.fds.get(fd).map(|_| ())
    }
    pub fn close(&self, fd: i32) -> SysResult<()> {
        let f = self.fds.close(fd)?;
        locking::on_close(&f, self.pid);
        drop(f);
        Ok(())
    }
    pub fn read(&self, fd: i32, buf: &mut [u8]) -> SysResult<usize> {
        let f = self.fds.get(fd)?;
        if let Some(s) = special(&f) {
            return pollfiles::read(s, &f, buf, None);
        }
        self.core().read(&f, buf)
    }
    pub fn write(&self, fd: i32, buf: &[u8]) -> SysResult<usize> {
        let f = self.fds.get(fd)?;
        if let Some(s) = special(&f) {
            return pollfiles::write(s, &f, buf, None);
        }
        self.core().write(&self.ctx(), &f, buf)
    }
    /// `read` that a cancel (a signal) interrupts with `EINTR` while it blocks (pipes,
    /// eventfds; regular files never block).
    pub fn read_interruptible(
        &self,
        fd: i32,
        buf: &mut [u8],
        cancel: &CancelToken,
    ) -> SysResult<usize> {
        let f = self.fds.get(fd)?;
        if let Some(s) = special(&f) {
            return pollfiles::read(s, &f, buf, Some(cancel));
        }
        self.core().read(&f, buf)
    }
    /// `write` that a cancel interrupts while it blocks (partial count or `EINTR`).
    pub fn write_interruptible(
        &self,
        fd: i32,
        buf: &[u8],
        cancel: &CancelToken,
    ) -> SysResult<usize> {
        let f = self.fds.get(fd)?;
        if let Some(s) = special(&f) {
            return pollfiles::write(s, &f, buf, Some(cancel));
        }
        self.core().write(&self.ctx(), &f, buf)
    }
    pub fn pread64(&self, fd: i32, buf: &mut [u8], offset: i64) -> SysResult<usize> {
        // ksys_pread64: a negative offset is EINVAL before the descriptor is looked at.
        if offset < 0 {
            return Err(Errno::EINVAL);
        }
        let f = self.fds.get(fd)?;
        if special(&f).is_some() {
            // No FMODE_PREAD: ESPIPE whatever the access mode (ksys_pread64).
            return Err(Errno::ESPIPE);
        }
        self.core().pread(&f, buf, offset)
    }
    pub fn pwrite64(&self, fd: i32, buf: &[u8], offset: i64) -> SysResult<usize> {
        // ksys_pwrite64: as pread64.
        if offset < 0 {
            return Err(Errno::EINVAL);
        }
        let f = self.fds.get(fd)?;
        if special(&f).is_some() {
            // No FMODE_PWRITE: ESPIPE whatever the access mode (ksys_pwrite64).
            return Err(Errno::ESPIPE);
        }
        self.core().pwrite(&self.ctx(), &f, buf, offset)
    }
    pub fn readv(&self, fd: i32, bufs: &mut [IoSliceMut<'_>]) -> SysResult<usize> {
        let f = self.fds.get(fd)?;
        // vfs_readv: access mode, then the iovec count, then nothing to do for 0 bytes
        // (no EISDIR or eventfd EINVAL for an empty transfer).
        if !f.readable() {
            return Err(Errno::EBADF);
        }
        if bufs.len() > IOV_MAX || matches!(special(&f), Some(Special::Epoll(_))) {
            // (An epoll has no read: FMODE_CAN_READ is clear.)
            return Err(Errno::EINVAL);
        }
        if bufs.iter().all(|b| b.is_empty()) {
            return Ok(0);
        }
        if let Some(s) = special(&f) {
            return pollfiles::readv(s, &f, bufs, None);
        }
        each_segment(read_segments(bufs), |b, _| self.core().read(&f, b))
    }
    pub fn writev(&self, fd: i32, bufs: &[IoSlice<'_>]) -> SysResult<usize> {
        let f = self.fds.get(fd)?;
        // vfs_writev: as readv.
        if !f.writable() {
            return Err(Errno::EBADF);
        }
        if bufs.len() > IOV_MAX || matches!(special(&f), Some(Special::Epoll(_))) {
            return Err(Errno::EINVAL);
        }
        if bufs.iter().all(|b| b.is_empty()) {
            return Ok(0);
        }
        if let Some(Special::EventFd(_)) = special(&f) {
            // No write_iter: segment by segment.
            return each_segment(bufs.iter().map(|b| &**b), |b, _| self.write(fd, b));
        }
        // One write of the gathered bytes keeps O_APPEND writes atomic, as on Linux.
        let all: Vec<u8> = bufs.iter().flat_map(|b| b.iter().copied()).collect();
        if let Some(s) = special(&f) {
            // One write: a pipe write of up to PIPE_BUF bytes stays atomic.
            return pollfiles::write(s, &f, &all, None);
        }
        self.core().write(&self.ctx(), &f, &all)
    }
    /// `preadv(2)`: `readv` at `offset`, leaving the file position alone. The segments
    /// are filled in order; a short read stops the transfer.
    pub fn preadv(&self, fd: i32, bufs: &mut [IoSliceMut<'_>], offset: i64) -> SysResult<usize> {
        let empty = bufs.iter().all(|b| b.is_empty());
        let Some(f) = self.positioned_vectored(fd, offset, bufs.len(), empty, |f| f.readable())?
        else {
            return Ok(0);
        };
        each_segment(read_segments(bufs), |b, done| {
            self.core().pread(&f, b, offset.saturating_add(done as i64))
        })
    }
    /// `pwritev(2)`: `writev` at `offset`, leaving the file position alone (with
    /// `O_APPEND` the data goes to the end, as Linux's `pwritev` does). One write of the
    /// gathered bytes, so readers see all or nothing of it.
    pub fn pwritev(&self, fd: i32, bufs: &[IoSlice<'_>], offset: i64) -> SysResult<usize> {
        let empty = bufs.iter().all(|b| b.is_empty());
        let Some(f) = self.positioned_vectored(fd, offset, bufs.len(), empty, |f| f.writable())?
        else {
            return Ok(0);
        };
        let all: Vec<u8> = bufs.iter().flat_map(|b| b.iter().copied()).collect();
        self.core().pwrite(&self.ctx(), &f, &all, offset)
    }
    /// The checks of `do_preadv`/`do_pwritev` before a transfer, in Linux's order: the
    /// offset, the descriptor, `FMODE_PREAD`/`PWRITE` (`ESPIPE`), the access mode
    /// (`allowed`, else `EBADF`), the iovec count; `None` when there is nothing to move.
    fn positioned_vectored(
        &self,
        fd: i32,
        offset: i64,
        nbufs: usize,
        empty: bool,
        allowed: impl FnOnce(&FileRef) -> bool,
    ) -> SysResult<Option<FileRef>> {
        if offset < 0 {
            return Err(Errno::EINVAL);
        }
        let f = self.fds.get(fd)?;
        if special(&f).is_some() {
            return Err(Errno::ESPIPE);
        }
        if !allowed(&f) {
            return Err(Errno::EBADF);
        }
        if nbufs > IOV_MAX {
            return Err(Errno::EINVAL);
        }
        Ok((!empty).then_some(f))
    }
    /// `copy_file_range(2)`: copies up to `len` bytes from `fd_in` to `fd_out` inside the
    /// file system, from and to `off_in`/`off_out` (updated by the count) or, for `None`,
    /// the files' positions (advanced). Same superblock only (`EXDEV`, as tmpfs has no
    /// cross-file-system copy); see `VfsCore::copy_file_range` for the checks.
    pub fn copy_file_range(
        &self,
        fd_in: i32,
        off_in: Option<&mut i64>,
        fd_out: i32,
        off_out: Option<&mut i64>,
        len: usize,
        flags: u32,
    ) -> SysResult<usize> {
        // The syscall: both descriptors (O_PATH ones are not files here: fdget), the
        // flags, then vfs_copy_file_range.
        let fin = self.fds.get(fd_in)?;
        if fin.is_path() {
            return Err(Errno::EBADF);
        }
        let fout = self.fds.get(fd_out)?;
        if fout.is_path() {
            return Err(Errno::EBADF);
        }
        if flags != 0 {
            return Err(Errno::EINVAL);
        }
        if special(&fin).is_some() || special(&fout).is_some() {
            // Pipes, eventfds and epolls are neither directories nor regular files.
            let dir = |f: &FileRef| special(f).is_none() && f.inode().is_dir();
            return Err(if dir(&fin) || dir(&fout) {
                Errno::EISDIR
            } else {
                Errno::EINVAL
            });
        }
        // Without an offset the file position is used, read and written back as Linux
        // does (no position lock: concurrent copies on one description may overlap).
        let pos_in = off_in
            .as_deref()
            .copied()
            .unwrap_or_else(|| *fin.pos.lock());
        let pos_out = off_out
            .as_deref()
            .copied()
            .unwrap_or_else(|| *fout.pos.lock());
        let n = self
            .core()
            .copy_file_range(&self.ctx(), &fin, pos_in, &fout, pos_out, len)?;
        if n > 0 {
            match off_in {
                Some(o) => *o = pos_in + n as i64,
                None => *fin.pos.lock() = pos_in + n as i64,
            }
            match off_out {
                Some(o) => *o = pos_out + n as i64,
                None => *fout.pos.lock() = pos_out + n as i64,
            }
        }
        Ok(n)
    }
    pub fn lseek(&self, fd: i32, offset: i64, whence: i32) -> SysResult<i64> {
        let f = self.fds.get(fd)?;
        if f.is_path() {
            return Err(Errno::EBADF);
        }
        // ksys_lseek checks whence (unsigned, at most SEEK_MAX) before the file's llseek.
        if !(libc::SEEK_SET..=libc::SEEK_HOLE).contains(&whence) {
            return Err(Errno::EINVAL);
        }
        if let Some(s) = special(&f) {
            return pollfiles::seek(s);
        }
        self.core().lseek(&f, offset, whence)
    }

    // --- metadata ---
    pub fn newfstatat(&self, dirfd: i32, path: impl AsRef<[u8]>, flags: i32) -> SysResult<Stat> {
        // vfs_statx: the AT_STATX_SYNC_TYPE bits are accepted (and mean nothing here).
        let valid = libc::AT_SYMLINK_NOFOLLOW
            | libc::AT_EMPTY_PATH
            | libc::AT_NO_AUTOMOUNT
            | libc::AT_STATX_SYNC_TYPE;
        if flags & !valid != 0 {
            return Err(Errno::EINVAL);
        }
        let p = self.resolve_at(dirfd, path.as_ref(), flags, true)?;
        Ok(self.core().stat(&p))
    }
    /// `statx(2)`: the fields in `mask` (`STATX_*`) that tmpfs provides, creation time
    /// included; see `VfsCore::statx` for which ones come back.
    pub fn statx(
        &self,
        dirfd: i32,
        path: impl AsRef<[u8]>,
        flags: i32,
        mask: u32,
    ) -> SysResult<Statx> {
        // do_statx's order: the reserved mask bit, both sync types, then unknown flags.
        if mask & libc::STATX__RESERVED as u32 != 0
            || flags & libc::AT_STATX_SYNC_TYPE == libc::AT_STATX_SYNC_TYPE
        {
            return Err(Errno::EINVAL);
        }
        let valid = libc::AT_SYMLINK_NOFOLLOW
            | libc::AT_EMPTY_PATH
            | libc::AT_NO_AUTOMOUNT
            | libc::AT_STATX_SYNC_TYPE;
        if flags & !valid != 0 {
            return Err(Errno::EINVAL);
        }
        let p = self.resolve_at(dirfd, path.as_ref(), flags, true)?;
        Ok(self.core().statx(&p, mask))
    }
    /// `statfs(2)` of the file system `path` is on.
    pub fn statfs(&self, path: impl AsRef<[u8]>) -> SysResult<Statfs> {
        let p = self.resolve_at(libc::AT_FDCWD, path.as_ref(), 0, true)?;
        Ok(self.core().statfs(&p))
    }
    /// `fstatfs(2)` (an `O_PATH` descriptor will do, as on Linux).
    pub fn fstatfs(&self, fd: i32) -> SysResult<Statfs> {
        let f = self.fds.get(fd)?;
        Ok(self.core().statfs(f.path()))
    }
    pub fn fstat(&self, fd: i32) -> SysResult<Stat> {
        let f = self.fds.get(fd)?;
        Ok(self.core().stat(f.path()))
    }
    pub fn fchmodat(
        &self,
        dirfd: i32,
        path: impl AsRef<[u8]>,
        mode: u32,
        flags: i32,
    ) -> SysResult<()> {
        // fchmodat2's flags (Linux 6.6).
        if flags & !(libc::AT_SYMLINK_NOFOLLOW | libc::AT_EMPTY_PATH) != 0 {
            return Err(Errno::EINVAL);
        }
        let p = self.resolve_at(dirfd, path.as_ref(), flags, true)?;
        if p.dentry.inode().is_some_and(|i| i.is_symlink()) {
            // Symlink modes cannot be changed.
            return Err(Errno::EOPNOTSUPP);
        }
        self.core().chmod(&self.ctx(), &p, mode)
    }
    pub fn fchmod(&self, fd: i32, mode: u32) -> SysResult<()> {
        let f = self.fds.get(fd)?;
        if f.is_path() {
            return Err(Errno::EBADF);
        }
        self.core().chmod(&self.ctx(), f.path(), mode)
    }
    // --- extended attributes (see `scalevfs_vfs::xattr` for the rules) ---

    /// The inode of `path` (following a trailing symlink if `follow`), for the xattr calls.
    fn xattr_target(&self, path: &[u8], follow: bool) -> SysResult<Path> {
        self.resolve_at(libc::AT_FDCWD, path, 0, follow)
    }
    /// The inode of `fd` for the `f*xattr` calls (`EBADF` for an `O_PATH` descriptor).
    fn xattr_fd(&self, fd: i32) -> SysResult<FileRef> {
        let f = self.fds.get(fd)?;
        if f.is_path() {
            return Err(Errno::EBADF);
        }
        Ok(f)
    }
    /// Runs `op` on the inode of `fd` for `fsetxattr`/`fgetxattr`, whose `AT_FDCWD` is the
    /// cwd: since Linux 6.15 they are `setxattrat`/`getxattrat` with an empty path and
    /// `AT_EMPTY_PATH`, which walk the empty path from a negative `dfd` instead of
    /// looking a descriptor up (`flistxattr` and `fremovexattr` do not: `EBADF`).
    fn with_xattr_fd<T>(
        &self,
        fd: i32,
        op: impl FnOnce(&scalevfs_vfs::Inode) -> SysResult<T>,
    ) -> SysResult<T> {
        if fd == libc::AT_FDCWD {
            let p = self.resolve_at(fd, b"", libc::AT_EMPTY_PATH, true)?;
            return op(p.dentry.inode().ok_or(Errno::ENOENT)?);
        }
        op(self.xattr_fd(fd)?.inode())
    }
    /// `setxattr(2)`: `flags` 0, `XATTR_CREATE` or `XATTR_REPLACE`.
    pub fn setxattr(
        &self,
        path: impl AsRef<[u8]>,
        name: &[u8],
        value: &[u8],
        flags: i32,
    ) -> SysResult<()> {
        xattr::check_set_args(name, value.len(), flags)?;
        let p = self.xattr_target(path.as_ref(), true)?;
        xattr::set(
            p.dentry.inode().ok_or(Errno::ENOENT)?,
            &self.cred,
            name,
            value,
            flags,
        )
    }
    /// `lsetxattr(2)`: a symlink itself.
    pub fn lsetxattr(
        &self,
        path: impl AsRef<[u8]>,
        name: &[u8],
        value: &[u8],
        flags: i32,
    ) -> SysResult<()> {
        xattr::check_set_args(name, value.len(), flags)?;
        let p = self.xattr_target(path.as_ref(), false)?;
        xattr::set(
            p.dentry.inode().ok_or(Errno::ENOENT)?,
            &self.cred,
            name,
            value,
            flags,
        )
    }
    /// `fsetxattr(2)`. The arguments are checked before the descriptor, as Linux (6.13+)
    /// copies them in before it looks `fd` up.
    pub fn fsetxattr(&self, fd: i32, name: &[u8], value: &[u8], flags: i32) -> SysResult<()> {
        xattr::check_set_args(name, value.len(), flags)?;
        self.with_xattr_fd(fd, |inode| {
            xattr::set(inode, &self.cred, name, value, flags)
        })
    }
    /// `getxattr(2)` into `buf` (an empty `buf` asks for the value's size).
    pub fn getxattr(
        &self,
        path: impl AsRef<[u8]>,
        name: &[u8],
        buf: &mut [u8],
    ) -> SysResult<usize> {
        xattr::check_name(name)?;
        let p = self.xattr_target(path.as_ref(), true)?;
        xattr::get(
            p.dentry.inode().ok_or(Errno::ENOENT)?,
            &self.cred,
            name,
            buf,
        )
    }
    pub fn lgetxattr(
        &self,
        path: impl AsRef<[u8]>,
        name: &[u8],
        buf: &mut [u8],
    ) -> SysResult<usize> {
        xattr::check_name(name)?;
        let p = self.xattr_target(path.as_ref(), false)?;
        xattr::get(
            p.dentry.inode().ok_or(Errno::ENOENT)?,
            &self.cred,
            name,
            buf,
        )
    }
    /// `fgetxattr(2)`: the name is checked before the descriptor (see `fsetxattr`).
    pub fn fgetxattr(&self, fd: i32, name: &[u8], buf: &mut [u8]) -> SysResult<usize> {
        xattr::check_name(name)?;
        self.with_xattr_fd(fd, |inode| xattr::get(inode, &self.cred, name, buf))
    }
    /// `listxattr(2)`: the names, each NUL-terminated, into `buf` (an empty `buf` asks for
    /// the size).
    pub fn listxattr(&self, path: impl AsRef<[u8]>, buf: &mut [u8]) -> SysResult<usize> {
        let p = self.xattr_target(path.as_ref(), true)?;
        xattr::list(p.dentry.inode().ok_or(Errno::ENOENT)?, &self.cred, buf)
    }
    pub fn llistxattr(&self, path: impl AsRef<[u8]>, buf: &mut [u8]) -> SysResult<usize> {
        let p = self.xattr_target(path.as_ref(), false)?;
        xattr::list(p.dentry.inode().ok_or(Errno::ENOENT)?, &self.cred, buf)
    }
    pub fn flistxattr(&self, fd: i32, buf: &mut [u8]) -> SysResult<usize> {
        let f = self.xattr_fd(fd)?;
        xattr::list(f.inode(), &self.cred, buf)
    }
    pub fn removexattr(&self, path: impl AsRef<[u8]>, name: &[u8]) -> SysResult<()> {
        xattr::check_name(name)?;
        let p = self.xattr_target(path.as_ref(), true)?;
        xattr::remove(p.dentry.inode().ok_or(Errno::ENOENT)?, &self.cred, name)
    }
    pub fn lremovexattr(&self, path: impl AsRef<[u8]>, name: &[u8]) -> SysResult<()> {
        xattr::check_name(name)?;
        let p = self.xattr_target(path.as_ref(), false)?;
        xattr::remove(p.dentry.inode().ok_or(Errno::ENOENT)?, &self.cred, name)
    }
    /// `fremovexattr(2)`: the name is checked before the descriptor (see `fsetxattr`), but
    /// `AT_FDCWD` is `EBADF`.
    pub fn fremovexattr(&self, fd: i32, name: &[u8]) -> SysResult<()> {
        xattr::check_name(name)?;
        let f = self.xattr_fd(fd)?;
        xattr::remove(f.inode(), &self.cred, name)
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
        if flags & !(libc::AT_SYMLINK_NOFOLLOW | libc::AT_EMPTY_PATH) != 0 {
            return Err(Errno::EINVAL);
        }
        let p = self.resolve_at(dirfd, path.as_ref(), flags, true)?;
        self.core().chown(&self.ctx(), &p, uid, gid)
    }
    pub fn fchown(&self, fd: i32, uid: u32, gid: u32) -> SysResult<()> {
        let f = self.fds.get(fd)?;
        if f.is_path() {
            return Err(Errno::EBADF);
        }
        self.core().chown(&self.ctx(), f.path(), uid, gid)
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
        if flags & !(libc::AT_SYMLINK_NOFOLLOW | libc::AT_EMPTY_PATH) != 0 {
            return Err(Errno::EINVAL);
        }
        if let Some(t) = &times {
            for ts in t {
                let special = ts.nsec == libc::UTIME_NOW || ts.nsec == libc::UTIME_OMIT;
                if !special && !(0..1_000_000_000).contains(&ts.nsec) {
                    return Err(Errno::EINVAL);
                }
            }
            if t[0].nsec == libc::UTIME_OMIT && t[1].nsec == libc::UTIME_OMIT {
                return Ok(());
            }
        }
        let path = path.as_ref();
        let p = if path.is_empty() && flags & libc::AT_EMPTY_PATH == 0 {
            // futimens: utimensat(fd, NULL, ...): the descriptor itself, not an O_PATH one.
            if dirfd == libc::AT_FDCWD {
                return Err(Errno::ENOENT);
            }
            // do_utimes_fd: no flags at all (checked before the descriptor).
            if flags != 0 {
                return Err(Errno::EINVAL);
            }
            let f = self.fds.get(dirfd)?;
            if f.is_path() {
                return Err(Errno::EBADF);
            }
            f.path().clone()
        } else {
            self.resolve_at(dirfd, path, flags, true)?
        };
        self.core().utimes(&self.ctx(), &p, times)
    }
    pub fn faccessat(
        &self,
        dirfd: i32,
        path: impl AsRef<[u8]>,
        mode: i32,
        flags: i32,
    ) -> SysResult<()> {
        if mode & !(libc::R_OK | libc::W_OK | libc::X_OK) != 0 {
            return Err(Errno::EINVAL);
        }
        if flags & !(libc::AT_EACCESS | libc::AT_SYMLINK_NOFOLLOW | libc::AT_EMPTY_PATH) != 0 {
            return Err(Errno::EINVAL);
        }
        let p = self.resolve_at(dirfd, path.as_ref(), flags, true)?;
        self.core().access(&self.ctx(), &p, mode)
    }
    /// Sets the umask and returns the previous one.
    pub fn umask(&self, mask: u32) -> u32 {
        self.umask.swap(mask & 0o777, Ordering::Relaxed)
    }

    // --- namespace ---
    pub fn mkdirat(&self, dirfd: i32, path: impl AsRef<[u8]>, mode: u32) -> SysResult<()> {
        let path = path.as_ref();
        let start = self.start_named(dirfd, path)?;
        let umask = self.umask.load(Ordering::Relaxed);
        self.core()
            .mkdir(&self.ctx(), start.path(), path, mode, umask)
    }
    /// `mknodat(2)`: a regular file (type 0 or `S_IFREG`), FIFO, socket, or (root only)
    /// character or block device `dev` (`makedev(major, minor)`). A directory is `EPERM`
    /// and any other type `EINVAL`, before the path is looked at, as Linux checks them.
    /// Opening a socket or device node is `ENXIO` (no driver stands behind any device
    /// number here); a FIFO opens as a named pipe.
    pub fn mknodat(
        &self,
        dirfd: i32,
        path: impl AsRef<[u8]>,
        mode: u32,
        dev: u64,
    ) -> SysResult<()> {
        match mode & libc::S_IFMT {
            0 | libc::S_IFREG | libc::S_IFCHR | libc::S_IFBLK | libc::S_IFIFO | libc::S_IFSOCK => {}
            libc::S_IFDIR => return Err(Errno::EPERM),
            _ => return Err(Errno::EINVAL),
        }
        let path = path.as_ref();
        let start = self.start_named(dirfd, path)?;
        let umask = self.umask.load(Ordering::Relaxed);
        self.core()
            .mknod(&self.ctx(), start.path(), path, mode, dev, umask)
    }
    pub fn unlinkat(&self, dirfd: i32, path: impl AsRef<[u8]>, flags: i32) -> SysResult<()> {
        if flags & !libc::AT_REMOVEDIR != 0 {
            return Err(Errno::EINVAL);
        }
        let path = path.as_ref();
        let start = self.start_named(dirfd, path)?;
        self.core().unlink(
            &self.ctx(),
            start.path(),
            path,
            flags & libc::AT_REMOVEDIR != 0,
        )
    }
    pub fn renameat2(
        &self,
        olddirfd: i32,
        oldpath: impl AsRef<[u8]>,
        newdirfd: i32,
        newpath: impl AsRef<[u8]>,
        flags: u32,
    ) -> SysResult<()> {
        let (op, np) = (oldpath.as_ref(), newpath.as_ref());
        // do_renameat2: flags, then the names, then the walks.
        scalevfs_vfs::core::check_rename_flags(flags)?;
        if op.is_empty() || np.is_empty() {
            return Err(Errno::ENOENT);
        }
        let os = self.start(olddirfd, op)?;
        let ns = self.start(newdirfd, np)?;
        self.core()
            .rename(&self.ctx(), os.path(), op, ns.path(), np, flags)
    }
    pub fn linkat(
        &self,
        olddirfd: i32,
        oldpath: impl AsRef<[u8]>,
        newdirfd: i32,
        newpath: impl AsRef<[u8]>,
        flags: i32,
    ) -> SysResult<()> {
        if flags & !(libc::AT_SYMLINK_FOLLOW | libc::AT_EMPTY_PATH) != 0 {
            return Err(Errno::EINVAL);
        }
        let (op, np) = (oldpath.as_ref(), newpath.as_ref());
        let old = if op.is_empty() && flags & libc::AT_EMPTY_PATH != 0 {
            self.start(olddirfd, op)?.path().clone()
        } else {
            if op.is_empty() {
                return Err(Errno::ENOENT);
            }
            let os = self.start(olddirfd, op)?;
            self.core().lookup(
                &self.ctx(),
                os.path(),
                op,
                flags & libc::AT_SYMLINK_FOLLOW != 0,
                false,
            )?
        };
        let ns = self.start_named(newdirfd, np)?;
        self.core().link(&self.ctx(), &old, ns.path(), np)
    }
    pub fn symlinkat(
        &self,
        target: impl AsRef<[u8]>,
        newdirfd: i32,
        linkpath: impl AsRef<[u8]>,
    ) -> SysResult<()> {
        let (target, lp) = (target.as_ref(), linkpath.as_ref());
        // do_symlinkat: getname(target) fails first (empty, or PATH_MAX with its NUL).
        if target.is_empty() {
            return Err(Errno::ENOENT);
        }
        if target.len() >= scalevfs_vfs::namei::PATH_MAX {
            return Err(Errno::ENAMETOOLONG);
        }
        let start = self.start_named(newdirfd, lp)?;
        self.core().symlink(&self.ctx(), target, start.path(), lp)
    }
    /// Fills `buf` with the link target (no NUL, truncated to `buf.len()`), as Linux does.
    pub fn readlinkat(
        &self,
        dirfd: i32,
        path: impl AsRef<[u8]>,
        buf: &mut [u8],
    ) -> SysResult<usize> {
        if buf.is_empty() {
            return Err(Errno::EINVAL);
        }
        let path = path.as_ref();
        let p = if path.is_empty() {
            // Linux: an empty path names dirfd itself (an O_PATH|O_NOFOLLOW symlink).
            let p = self.start(dirfd, path)?.path().clone();
            if !p.dentry.inode().is_some_and(|i| i.is_symlink()) {
                return Err(Errno::ENOENT);
            }
            p
        } else {
            self.resolve_at(dirfd, path, libc::AT_SYMLINK_NOFOLLOW, false)?
        };
        self.core().readlink(&p, buf)
    }
    /// Fills `buf` with `struct linux_dirent64` records; returns bytes used (0 at the end).
    pub fn getdents64(&self, fd: i32, buf: &mut [u8]) -> SysResult<usize> {
        let f = self.fds.get(fd)?;
        self.core().getdents64(&f, buf)
    }

    // --- sizes ---
    pub fn truncate(&self, path: impl AsRef<[u8]>, length: i64) -> SysResult<()> {
        let path = path.as_ref();
        let p = self.resolve_at(libc::AT_FDCWD, path, 0, true)?;
        self.core().truncate_path(&self.ctx(), &p, length)
    }
    pub fn ftruncate(&self, fd: i32, length: i64) -> SysResult<()> {
        let f = self.fds.get(fd)?;
        self.core().ftruncate(&self.ctx(), &f, length)
    }
    pub fn fallocate(&self, fd: i32, mode: i32, offset: i64, len: i64) -> SysResult<()> {
        let f = self.fds.get(fd)?;
        if f.is_path() {
            return Err(Errno::EBADF);
        }
        self.core().fallocate(&f, mode, offset, len)
    }

    // --- descriptors and directories ---
    pub fn dup(&self, fd: i32) -> SysResult<i32> {
        let f = self.fds.get(fd)?;
        self.fds.alloc(0, f, false)
    }
    pub fn dup2(&self, oldfd: i32, newfd: i32) -> SysResult<i32> {
        let f = self.fds.get(oldfd)?;
        if oldfd == newfd {
            return Ok(newfd);
        }
        let old = self.fds.replace(newfd, f, false)?;
        if let Some(old) = old {
            locking::on_close(&old, self.pid);
        }
        Ok(newfd)
    }
    pub fn dup3(&self, oldfd: i32, newfd: i32, flags: i32) -> SysResult<i32> {
        if flags & !libc::O_CLOEXEC != 0 || oldfd == newfd {
            return Err(Errno::EINVAL);
        }
        let f = self.fds.get(oldfd)?;
        let old = self.fds.replace(newfd, f, flags & libc::O_CLOEXEC != 0)?;
        if let Some(old) = old {
            locking::on_close(&old, self.pid);
        }
        Ok(newfd)
    }
    pub fn fcntl(&self, fd: i32, cmd: i32, arg: FcntlArg<'_>) -> SysResult<i32> {
        let f = self.fds.get(fd)?;
        // check_fcntl_cmd: an O_PATH descriptor allows only these (others: EBADF).
        if f.is_path()
            && !matches!(
                cmd,
                libc::F_DUPFD
                    | libc::F_DUPFD_CLOEXEC
                    | libc::F_GETFD
                    | libc::F_SETFD
                    | libc::F_GETFL
            )
        {
            return Err(Errno::EBADF);
        }
        let int = |a: &FcntlArg<'_>| match a {
            FcntlArg::Int(v) => Ok(*v),
            FcntlArg::None => Ok(0),
            FcntlArg::Flock(_) => Err(Errno::EINVAL),
        };
        match cmd {
            libc::F_DUPFD | libc::F_DUPFD_CLOEXEC => {
                let min = int(&arg)?;
                if min < 0 || min >= self.fds.limit() as i64 {
                    return Err(Errno::EINVAL);
                }
                self.fds.alloc(min as u32, f, cmd == libc::F_DUPFD_CLOEXEC)
            }
            libc::F_GETFD => Ok(if self.fds.cloexec(fd)? {
                libc::FD_CLOEXEC
            } else {
                0
            }),
            libc::F_SETFD => {
                self.fds
                    .set_cloexec(fd, int(&arg)? as i32 & libc::FD_CLOEXEC != 0)?;
                Ok(0)
            }
            libc::F_GETFL => Ok(if f.is_path() || special(&f).is_some() {
                // Pipes and anonymous files are made without O_LARGEFILE, as on Linux.
                f.flags()
            } else {
                f.flags() | scalevfs_vfs::core::O_LARGEFILE_KERNEL
            }),
            libc::F_SETFL => {
                if f.is_path() {
                    return Err(Errno::EBADF);
                }
                let v = int(&arg)? as i32;
                if v & libc::O_NOATIME != 0
                    && f.flags() & libc::O_NOATIME == 0
                    && !self.cred.owns(f.inode())
                {
                    return Err(Errno::EPERM);
                }
                f.set_status_flags(v);
                if let Some(s) = special(&f) {
                    pollfiles::setfl(s, v);
                }
                Ok(0)
            }
            libc::F_GETPIPE_SZ => pollfiles::pipe_size(&f, None, false),
            libc::F_SETPIPE_SZ => pollfiles::pipe_size(&f, Some(int(&arg)?), self.cred.uid == 0),
            // Record locks: POSIX (owner: this process) and OFD (owner: the open file).
            libc::F_GETLK
            | libc::F_SETLK
            | libc::F_SETLKW
            | libc::F_OFD_GETLK
            | libc::F_OFD_SETLK
            | libc::F_OFD_SETLKW => self.lock_caller(fd).fcntl(&f, cmd, arg, None),
            _ => Err(Errno::EINVAL),
        }
    }
    /// `mount(2)` of a new file system `fs` on the directory `path` (resolved as this
    /// process resolves paths: relative to its cwd, following symlinks). The path's errors
    /// come first, then `EPERM` unless root (Linux's order), then `ENOTDIR`, and `ENOENT`
    /// for a directory in a lazily unmounted tree. Mounting on a mount root stacks the new
    /// mount on top, as Linux does; `umount2` uncovers the one below.
    pub fn mount(&self, path: impl AsRef<[u8]>, fs: Arc<dyn FileSystem>) -> SysResult<()> {
        let at = self.resolve_at(libc::AT_FDCWD, path.as_ref(), 0, true)?;
        if self.cred.uid != 0 {
            return Err(Errno::EPERM);
        }
        self.core().mount(&at, fs).map(|_| ())
    }
    /// `umount2(2)`: unmounts the file system mounted at `path` (the checks, `EBUSY` and
    /// the lazy `MNT_DETACH` are `VfsCore::umount`'s). `EINVAL` for an unknown flag, then
    /// the path's own errors, then `EPERM` unless root, as Linux checks them;
    /// `UMOUNT_NOFOLLOW` does not follow a trailing symlink.
    pub fn umount2(&self, path: impl AsRef<[u8]>, flags: i32) -> SysResult<()> {
        const KNOWN: i32 =
            libc::MNT_FORCE | libc::MNT_DETACH | libc::MNT_EXPIRE | libc::UMOUNT_NOFOLLOW;
        if flags & !KNOWN != 0 {
            return Err(Errno::EINVAL);
        }
        let follow = flags & libc::UMOUNT_NOFOLLOW == 0;
        let path = path.as_ref();
        if path.is_empty() {
            return Err(Errno::ENOENT);
        }
        let start = self.start(libc::AT_FDCWD, path)?;
        let mut ctx = self.ctx();
        ctx.resolve |= Resolve::KEEP_EXPIRY_MARK;
        let target = self
            .core()
            .lookup(&ctx, start.path(), path, follow, false)?;
        if self.cred.uid != 0 {
            return Err(Errno::EPERM);
        }
        self.core().umount(target, flags)
    }
    pub fn chdir(&self, path: impl AsRef<[u8]>) -> SysResult<()> {
        let path = path.as_ref();
        let p = self.resolve_at(libc::AT_FDCWD, path, 0, true)?;
        self.set_cwd(p)
    }
    pub fn fchdir(&self, fd: i32) -> SysResult<()> {
        let f = self.fds.get(fd)?;
        self.set_cwd(f.path().clone())
    }
    /// Fills `buf` with the NUL-terminated cwd and returns its length including the NUL;
    /// `ERANGE` if it does not fit.
    pub fn getcwd(&self, buf: &mut [u8]) -> SysResult<usize> {
        // The path is prepended into `buf` short of the NUL, then moved to the front: no
        // allocation and no count on the cwd (borrowed), so threads calling getcwd
        // together write nothing shared (Linux: `prepend_path` into a page, under RCU).
        //
        // Linux builds the path in a PATH_MAX page: longer is ENAMETOOLONG whatever the
        // buffer's size; a path that fits the page but not the buffer is ERANGE.
        let room = buf.len().min(PATH_MAX).saturating_sub(1);
        let prepend = |buf: &mut [u8]| {
            self.cwd.with_borrowed(|mnt, cwd| {
                if cwd.is_unlinked() {
                    return Err(Errno::ENOENT);
                }
                const UNREACHABLE: &[u8] = b"(unreachable)";
                match self.core().d_path_prepend(&self.root, mnt, cwd, buf) {
                    Ok(start) => Ok(start),
                    Err(DPathError::TooLong) => Err(Errno::ERANGE),
                    // Outside the process root (a lazily unmounted tree): Linux prefixes
                    // the path from the top it reached with "(unreachable)".
                    Err(DPathError::Unreachable { start }) => {
                        let at = start.checked_sub(UNREACHABLE.len()).ok_or(Errno::ERANGE)?;
                        buf[at..start].copy_from_slice(UNREACHABLE);
                        Ok(at)
                    }
                }
            })
        };
        let start = match prepend(&mut buf[..room]) {
            Err(Errno::ERANGE) if buf.len() < PATH_MAX => {
                // Too long for the buffer: for the page too? (A rare error path: the
                // page is on the stack, nothing is allocated.)
                match prepend(&mut [0u8; PATH_MAX - 1]) {
                    Err(Errno::ERANGE) => Err(Errno::ENAMETOOLONG),
                    Err(e) => Err(e),
                    Ok(_) => Err(Errno::ERANGE),
                }
            }
            Err(Errno::ERANGE) => Err(Errno::ENAMETOOLONG),
            r => r,
        }?;
        buf.copy_within(start..room, 0);
        let len = room - start;
        buf[len] = 0;
        Ok(len + 1)
    }
    pub fn fsync(&self, fd: i32) -> SysResult<()> {
        let f = self.fds.get(fd)?;
        self.core().fsync(&f)
    }
    pub fn fdatasync(&self, fd: i32) -> SysResult<()> {
        let f = self.fds.get(fd)?;
        self.core().fsync(&f)
    }

    // --- pipes, eventfd, epoll, poll (see `crate::pollfiles`) ---
    /// `pipe2(fds, flags)`: `fds[0]` the read end, `fds[1]` the write end. Flags
    /// `O_NONBLOCK` and `O_CLOEXEC` (others: `EINVAL`).
    pub fn pipe2(&self, fds: &mut [i32; 2], flags: i32) -> SysResult<()> {
        pollfiles::pipe2(
            &self.vfs.poll,
            self.core(),
            &self.fds,
            self.cred.uid,
            self.cred.gid,
            fds,
            flags,
        )
    }
    /// `eventfd2(initval, flags)`: `EFD_SEMAPHORE`, `EFD_NONBLOCK`, `EFD_CLOEXEC`.
    pub fn eventfd(&self, initval: u32, flags: i32) -> SysResult<i32> {
        pollfiles::eventfd(&self.vfs.poll, self.core(), &self.fds, initval, flags)
    }
    /// `epoll_create1(flags)`: 0 or `EPOLL_CLOEXEC`.
    pub fn epoll_create1(&self, flags: i32) -> SysResult<i32> {
        pollfiles::epoll_create1(&self.vfs.poll, self.core(), &self.fds, flags)
    }
    /// `epoll_ctl(epfd, op, fd, event)`; `event == None` is a NULL pointer (`EFAULT`
    /// unless `op` is `EPOLL_CTL_DEL`).
    pub fn epoll_ctl(
        &self,
        epfd: i32,
        op: i32,
        fd: i32,
        event: Option<&EpollEvent>,
    ) -> SysResult<()> {
        pollfiles::epoll_ctl(&self.fds, epfd, op, fd, event)
    }
    /// `epoll_wait(epfd, events, events.len(), timeout_ms)`: an empty slice is
    /// `maxevents == 0` (`EINVAL`).
    pub fn epoll_wait(
        &self,
        epfd: i32,
        events: &mut [EpollEvent],
        timeout_ms: i32,
    ) -> SysResult<usize> {
        pollfiles::epoll_wait(&self.fds, epfd, events, timeout_ms, None)
    }
    /// `epoll_wait` that a cancel (a signal) interrupts with `EINTR`.
    pub fn epoll_wait_interruptible(
        &self,
        epfd: i32,
        events: &mut [EpollEvent],
        timeout_ms: i32,
        cancel: &CancelToken,
    ) -> SysResult<usize> {
        pollfiles::epoll_wait(&self.fds, epfd, events, timeout_ms, Some(cancel))
    }
    /// `epoll_pwait`: signals are not modelled, so the mask is ignored and this is
    /// `epoll_wait` (use the `_interruptible` variant for `EINTR`).
    pub fn epoll_pwait(
        &self,
        epfd: i32,
        events: &mut [EpollEvent],
        timeout_ms: i32,
        _sigmask: Option<&libc::sigset_t>,
    ) -> SysResult<usize> {
        self.epoll_wait(epfd, events, timeout_ms)
    }
    /// `epoll_pwait` that a cancel interrupts (the mask is ignored).
    pub fn epoll_pwait_interruptible(
        &self,
        epfd: i32,
        events: &mut [EpollEvent],
        timeout_ms: i32,
        _sigmask: Option<&libc::sigset_t>,
        cancel: &CancelToken,
    ) -> SysResult<usize> {
        self.epoll_wait_interruptible(epfd, events, timeout_ms, cancel)
    }
    /// `poll(fds, nfds, timeout_ms)`: fills `revents`, returns how many are non-zero.
    pub fn poll(&self, fds: &mut [libc::pollfd], timeout_ms: i32) -> SysResult<usize> {
        pollfiles::poll(&self.fds, fds, timeout_ms, None)
    }
    /// `poll` that a cancel interrupts with `EINTR`.
    pub fn poll_interruptible(
        &self,
        fds: &mut [libc::pollfd],
        timeout_ms: i32,
        cancel: &CancelToken,
    ) -> SysResult<usize> {
        pollfiles::poll(&self.fds, fds, timeout_ms, Some(cancel))
    }
    /// `ppoll(fds, nfds, timeout, sigmask)`: `None` waits forever; the timeout is rounded
    /// up to milliseconds; the mask is ignored (signals are not modelled).
    pub fn ppoll(
        &self,
        fds: &mut [libc::pollfd],
        timeout: Option<&libc::timespec>,
        _sigmask: Option<&libc::sigset_t>,
    ) -> SysResult<usize> {
        let ms = pollfiles::ppoll_timeout(timeout)?;
        pollfiles::poll(&self.fds, fds, ms, None)
    }
    /// `ppoll` that a cancel interrupts with `EINTR`.
    pub fn ppoll_interruptible(
        &self,
        fds: &mut [libc::pollfd],
        timeout: Option<&libc::timespec>,
        _sigmask: Option<&libc::sigset_t>,
        cancel: &CancelToken,
    ) -> SysResult<usize> {
        let ms = pollfiles::ppoll_timeout(timeout)?;
        pollfiles::poll(&self.fds, fds, ms, Some(cancel))
    }
}

impl Drop for Process {
    /// Dropping a process is its exit: its locks go with its descriptors.
    fn drop(&mut self) {
        self.exit();
    }
}

/// Convenience wrappers (not system calls).
impl Process {
    fn set_cwd(&self, p: Path) -> SysResult<()> {
        let inode = p.dentry.inode().ok_or(Errno::ENOENT)?;
        if !inode.is_dir() {
            return Err(Errno::ENOTDIR);
        }
        scalevfs_vfs::perm::permission(inode, &self.cred, scalevfs_vfs::perm::MAY_EXEC)?;
        self.cwd.set(p);
        Ok(())
    }
    /// `stat(path)`.
    pub fn stat(&self, path: impl AsRef<[u8]>) -> SysResult<Stat> {
        self.newfstatat(libc::AT_FDCWD, path, 0)
    }
    /// `lstat(path)`.
    pub fn lstat(&self, path: impl AsRef<[u8]>) -> SysResult<Stat> {
        self.newfstatat(libc::AT_FDCWD, path, libc::AT_SYMLINK_NOFOLLOW)
    }
    /// `mkdir(path, mode)`.
    pub fn mkdir(&self, path: impl AsRef<[u8]>, mode: u32) -> SysResult<()> {
        self.mkdirat(libc::AT_FDCWD, path, mode)
    }
    /// `unlink(path)`.
    pub fn unlink(&self, path: impl AsRef<[u8]>) -> SysResult<()> {
        self.unlinkat(libc::AT_FDCWD, path, 0)
    }
    /// `rmdir(path)`.
    pub fn rmdir(&self, path: impl AsRef<[u8]>) -> SysResult<()> {
        self.unlinkat(libc::AT_FDCWD, path, libc::AT_REMOVEDIR)
    }
    /// `rename(old, new)`.
    pub fn rename(&self, old: impl AsRef<[u8]>, new: impl AsRef<[u8]>) -> SysResult<()> {
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
    pub fn readdir(&self, path: impl AsRef<[u8]>) -> SysResult<Vec<DirEntry>> {
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
    pub fn read_file(&self, path: impl AsRef<[u8]>) -> SysResult<Vec<u8>> {
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
    /// Creates (or truncates) a file with `data`.
    pub fn write_file(&self, path: impl AsRef<[u8]>, data: &[u8]) -> SysResult<()> {
        let fd = self.open(path, libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC, 0o644)?;
        let r = self.write(fd, data).map(|_| ());
        let _ = self.close(fd);
        r
    }
}
