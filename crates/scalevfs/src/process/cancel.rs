//! Cancellation: [`Process::with_cancel`] gives a [`Cancellable`], the process's calls
//! that can block, each of which gives up with `EINTR` once the [`CancelToken`] fires (a
//! signal in Linux's terms; `FUSE_INTERRUPT` in the FUSE server).
//!
//! The calls that can block are those on pipes, FIFOs and eventfds (`read`, `write`, a
//! FIFO's `openat`), waits for file locks (`fcntl` `F_SETLKW`/`F_OFD_SETLKW`, `flock`
//! without `LOCK_NB`) and the readiness waits (`epoll_wait`, `epoll_pwait`, `poll`,
//! `ppoll`). A `Cancellable` has each with the raw call's arguments and results, so an
//! embedder forwarding a guest's call picks `p.read(..)` or `p.with_cancel(&t).read(..)`
//! and nothing else changes. What a cancel leaves done (a partial write's count, a lock
//! not taken) is Linux's answer to a signal at the same point.

use super::Process;
use crate::pollfiles::{self, special};
use crate::typed::PathArg;
use crate::EpollEvent;
use scalevfs_vfs::cancel::CancelToken;
use scalevfs_vfs::{Errno, FcntlArg, SysResult};

/// The blocking calls of a [`Process`], interrupted by a [`CancelToken`] (see the module
/// docs). Cheap to make: two references.
#[derive(Clone, Copy)]
pub struct Cancellable<'a> {
    proc: &'a Process,
    token: &'a CancelToken,
}

impl Process {
    /// The calls of this process that can block, each giving up with `EINTR` once `token`
    /// fires.
    pub fn with_cancel<'a>(&'a self, token: &'a CancelToken) -> Cancellable<'a> {
        Cancellable { proc: self, token }
    }
}

impl Cancellable<'_> {
    /// The process the calls are made by.
    pub fn process(&self) -> &Process {
        self.proc
    }
    /// The token that interrupts them.
    pub fn token(&self) -> &CancelToken {
        self.token
    }
    /// [`Process::openat`]; the wait for a named pipe's partner (a FIFO opened for reading
    /// waits for a writer and the other way round, unless `O_NONBLOCK`) is cancelled.
    pub fn openat(&self, dirfd: i32, path: impl PathArg, flags: i32, mode: u32) -> SysResult<i32> {
        let path = path.path_bytes();
        if path.is_empty() {
            return Err(Errno::ENOENT);
        }
        self.proc
            .openat_cancellable(dirfd, path, flags, mode, Some(self.token))
    }
    /// [`Process::read`]; a wait on a pipe or eventfd is cancelled (regular files never
    /// block).
    pub fn read(&self, fd: i32, buf: &mut [u8]) -> SysResult<usize> {
        let f = self.proc.fds.get(fd)?;
        if let Some(s) = special(&f) {
            return pollfiles::read(s, &f, buf, Some(self.token));
        }
        self.proc.core().read(&f, buf)
    }
    /// [`Process::write`]; a wait on a pipe or eventfd is cancelled (partial count, or
    /// `EINTR` if nothing was written).
    pub fn write(&self, fd: i32, buf: &[u8]) -> SysResult<usize> {
        let f = self.proc.fds.get(fd)?;
        if let Some(s) = special(&f) {
            return pollfiles::write(s, &f, buf, Some(self.token));
        }
        self.proc.core().write(&self.proc.ctx(), &f, buf)
    }
    /// [`Process::fcntl`]; the blocking lock commands (`F_SETLKW`, `F_OFD_SETLKW`) are
    /// cancelled, the others behave as there.
    pub fn fcntl(&self, fd: i32, cmd: i32, arg: FcntlArg<'_>) -> SysResult<i32> {
        if !crate::locking::is_lock_cmd(cmd) {
            return self.proc.fcntl(fd, cmd, arg);
        }
        let f = self.proc.fds.get(fd)?;
        self.proc
            .lock_caller(fd)
            .fcntl(&f, cmd, arg, Some(self.token))
    }
    /// [`Process::flock`]; the wait for a conflicting lock is cancelled.
    pub fn flock(&self, fd: i32, op: i32) -> SysResult<()> {
        self.proc.lock_caller(fd).flock(op, Some(self.token))
    }
    /// [`Process::epoll_wait`], cancelled.
    pub fn epoll_wait(
        &self,
        epfd: i32,
        events: &mut [EpollEvent],
        timeout_ms: i32,
    ) -> SysResult<usize> {
        pollfiles::epoll_wait(&self.proc.fds, epfd, events, timeout_ms, Some(self.token))
    }
    /// [`Process::epoll_pwait`], cancelled (the mask is ignored: signals are not
    /// modelled).
    pub fn epoll_pwait(
        &self,
        epfd: i32,
        events: &mut [EpollEvent],
        timeout_ms: i32,
        _sigmask: Option<&libc::sigset_t>,
    ) -> SysResult<usize> {
        self.epoll_wait(epfd, events, timeout_ms)
    }
    /// [`Process::poll`], cancelled.
    pub fn poll(&self, fds: &mut [libc::pollfd], timeout_ms: i32) -> SysResult<usize> {
        pollfiles::poll(&self.proc.fds, fds, timeout_ms, Some(self.token))
    }
    /// [`Process::ppoll`], cancelled (the mask is ignored).
    pub fn ppoll(
        &self,
        fds: &mut [libc::pollfd],
        timeout: Option<&libc::timespec>,
        _sigmask: Option<&libc::sigset_t>,
    ) -> SysResult<usize> {
        let ms = pollfiles::ppoll_timeout(timeout)?;
        self.poll(fds, ms)
    }
}
