//! File I/O system calls: open (`openat`, `openat2`), read and write (plain, vectored,
//! positioned), `copy_file_range`, `lseek`, the truncates, `fallocate` and the syncs.

use crate::typed::PathArg;
use std::io::{IoSlice, IoSliceMut};
use std::sync::atomic::Ordering;

use super::Process;
use crate::pollfiles::{self, special, Special};
use scalevfs_vfs::cancel::CancelToken;
use scalevfs_vfs::namei::{Ctx, Resolve};
use scalevfs_vfs::{Errno, FileRef, OpenHow, SysResult};

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

impl Process {
    /// `openat(2)`: opens (with `O_CREAT`, creates) `path` relative to `dirfd` and returns the
    /// lowest free descriptor. Takes Linux's `O_*` flags, `O_TMPFILE` and `O_PATH` included.
    ///
    /// Errors: Linux's (`ENOENT`, `EEXIST`, `EACCES`, `EISDIR`, `ENOTDIR`, `ELOOP`,
    /// `ENAMETOOLONG`, `EMFILE`, `ENOSPC`, `EINVAL`, `ETXTBSY`...). Differences: opening a
    /// device node is `ENXIO` (no drivers); a FIFO's blocking open waits without a signal to
    /// interrupt it (see [`openat_interruptible`](Self::openat_interruptible)).
    pub fn openat(&self, dirfd: i32, path: impl PathArg, flags: i32, mode: u32) -> SysResult<i32> {
        let path = path.path_bytes();
        if path.is_empty() {
            return Err(Errno::ENOENT);
        }
        self.openat_cancellable(dirfd, path, flags, mode, None)
    }
    /// [`openat`](Self::openat) whose wait for a named pipe's partner (a FIFO opened for
    /// reading waits for a writer and the other way round, unless `O_NONBLOCK`) ends with
    /// `EINTR` when `cancel` fires (a signal).
    #[deprecated(note = "use `Process::with_cancel(&token).openat(..)`")]
    pub fn openat_interruptible(
        &self,
        dirfd: i32,
        path: impl PathArg,
        flags: i32,
        mode: u32,
        cancel: &CancelToken,
    ) -> SysResult<i32> {
        self.with_cancel(cancel).openat(dirfd, path, flags, mode)
    }
    pub(super) fn openat_cancellable(
        &self,
        dirfd: i32,
        path: &[u8],
        flags: i32,
        mode: u32,
        cancel: Option<&CancelToken>,
    ) -> SysResult<i32> {
        let start = self.start(dirfd, path)?;
        let umask = self.umask.load(Ordering::Relaxed);
        let open_flags = flags & !crate::fdtable::O_ANYFD;
        let f = self
            .core()
            .open(&self.ctx(), start.path(), path, open_flags, mode, umask)?;
        let f = pollfiles::open_fifo(f, cancel)?;
        crate::fdtable::install_opened(&self.fds, f, flags)
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
    pub fn openat2(&self, dirfd: i32, path: impl PathArg, how: &OpenHow) -> SysResult<i32> {
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
        let path = path.path_bytes();
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
    pub fn open(&self, path: impl PathArg, flags: i32, mode: u32) -> SysResult<i32> {
        self.openat(libc::AT_FDCWD, path, flags, mode)
    }
    /// `sync(2)`: nothing to write back (everything is in memory).
    pub fn sync(&self) {}
    /// `syncfs(2)`: `EBADF` for a bad descriptor; nothing to write back.
    pub fn syncfs(&self, fd: i32) -> SysResult<()> {
        self.fds.get(fd).map(|_| ())
    }
    /// `read(2)`: reads up to `buf.len()` bytes at the file position and advances it.
    ///
    /// Errors: `EBADF` (not open for reading), `EISDIR`, `EINVAL` (an eventfd buffer under 8
    /// bytes), `EAGAIN` (empty non-blocking pipe or eventfd). A blocking read of a pipe or
    /// eventfd waits with no signal to interrupt it (see [`read_interruptible`](Self::read_interruptible)).
    pub fn read(&self, fd: i32, buf: &mut [u8]) -> SysResult<usize> {
        let f = self.fds.get(fd)?;
        if let Some(s) = special(&f) {
            return pollfiles::read(s, &f, buf, None);
        }
        self.core().read(&f, buf)
    }
    /// `write(2)`: writes `buf` at the file position (at the end with `O_APPEND`) and advances
    /// it; clears set-user-ID bits as Linux does.
    ///
    /// Errors: `EBADF`, `EFBIG`, `ENOSPC` (tmpfs `size=`), `EPERM` (immutable or non-append
    /// write to an append-only file), `EPIPE` (no reader; no `SIGPIPE`), `EAGAIN` (full
    /// non-blocking pipe).
    pub fn write(&self, fd: i32, buf: &[u8]) -> SysResult<usize> {
        let f = self.fds.get(fd)?;
        if let Some(s) = special(&f) {
            return pollfiles::write(s, &f, buf, None);
        }
        self.core().write(&self.ctx(), &f, buf)
    }
    /// `read` that a cancel (a signal) interrupts with `EINTR` while it blocks (pipes,
    /// eventfds; regular files never block).
    #[deprecated(note = "use `Process::with_cancel(&token).read(..)`")]
    pub fn read_interruptible(
        &self,
        fd: i32,
        buf: &mut [u8],
        cancel: &CancelToken,
    ) -> SysResult<usize> {
        self.with_cancel(cancel).read(fd, buf)
    }
    /// `write` that a cancel interrupts while it blocks (partial count or `EINTR`).
    #[deprecated(note = "use `Process::with_cancel(&token).write(..)`")]
    pub fn write_interruptible(
        &self,
        fd: i32,
        buf: &[u8],
        cancel: &CancelToken,
    ) -> SysResult<usize> {
        self.with_cancel(cancel).write(fd, buf)
    }
    /// `pread64(2)`: reads at `offset` without moving the file position.
    ///
    /// Errors: as [`read`](Self::read), plus `EINVAL` (negative offset) and `ESPIPE` (pipes).
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
    /// `pwrite64(2)`: writes at `offset` without moving the file position (at the end under
    /// `O_APPEND`, as Linux does).
    ///
    /// Errors: as [`write`](Self::write), plus `EINVAL` (negative offset) and `ESPIPE` (pipes).
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
    /// `readv(2)`: [`read`](Self::read) into several buffers in turn, as one call.
    ///
    /// Errors: as `read`; a transfer of 0 bytes succeeds without looking at the file type.
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
    /// `writev(2)`: [`write`](Self::write) from several buffers in turn, as one call.
    ///
    /// Errors: as `write`.
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
    ///
    /// Errors: as [`readv`](Self::readv), plus `EINVAL` (negative offset) and `ESPIPE` (pipes).
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
    /// `lseek(2)`: moves the file position (`SEEK_SET`, `SEEK_CUR`, `SEEK_END`, `SEEK_DATA`,
    /// `SEEK_HOLE`); a directory's position is a `getdents64` cookie.
    ///
    /// Errors: `EBADF` (also `O_PATH`), `EINVAL` (bad `whence`, negative result), `ENXIO`
    /// (`SEEK_DATA`/`SEEK_HOLE` at or past the end), `ESPIPE` (pipes), `EOVERFLOW`.
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
    /// `truncate(2)`: sets the size of the file at `path` (following symlinks).
    ///
    /// Errors: `EINVAL` (negative length), `EISDIR`, `EACCES`, `EPERM` (immutable or
    /// append-only), `EFBIG`, `ETXTBSY`, and the path-walk errors.
    pub fn truncate(&self, path: impl PathArg, length: i64) -> SysResult<()> {
        // do_sys_truncate: before the walk.
        if length < 0 {
            return Err(Errno::EINVAL);
        }
        let path = path.path_bytes();
        let p = self.resolve_at(libc::AT_FDCWD, path, 0, true)?;
        self.core().truncate_path(&self.ctx(), &p, length)
    }
    /// `ftruncate(2)`: sets the size of the file open on `fd`.
    ///
    /// Errors: `EBADF` or `EINVAL` (not open for writing, not a regular file), `EINVAL`
    /// (negative length), `EPERM` (append-only or immutable), `EFBIG`.
    pub fn ftruncate(&self, fd: i32, length: i64) -> SysResult<()> {
        let f = self.fds.get(fd)?;
        self.core().ftruncate(&self.ctx(), &f, length)
    }
    /// `fallocate(2)`: what Linux's tmpfs takes: mode 0 (allocate, extending the size),
    /// `FALLOC_FL_KEEP_SIZE`, and `FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE`.
    ///
    /// Errors: `EOPNOTSUPP` (other modes), `EBADF`, `EINVAL`, `ENODEV` (not a regular file),
    /// `ESPIPE` (pipes), `ENOSPC`, `EFBIG`, `EPERM`.
    ///
    /// A call that succeeds clears the set-id bits as a write does (Linux's tmpfs ends
    /// with `file_modified`), whatever the mode; one that fails leaves them.
    pub fn fallocate(&self, fd: i32, mode: i32, offset: i64, len: i64) -> SysResult<()> {
        let f = self.fds.get(fd)?;
        if f.is_path() {
            return Err(Errno::EBADF);
        }
        self.core().fallocate(&f, mode, offset, len)?;
        scalevfs_vfs::perm::kill_suid_on_write(f.inode(), &self.cred);
        Ok(())
    }
    /// `fsync(2)`: nothing to write back in memory; checks the descriptor.
    ///
    /// Errors: `EBADF`, `EINVAL` (pipes, eventfds, epolls).
    pub fn fsync(&self, fd: i32) -> SysResult<()> {
        let f = self.fds.get(fd)?;
        self.core().fsync(&f)
    }
    /// `fdatasync(2)`: as [`fsync`](Self::fsync).
    pub fn fdatasync(&self, fd: i32) -> SysResult<()> {
        let f = self.fds.get(fd)?;
        self.core().fsync(&f)
    }
}
