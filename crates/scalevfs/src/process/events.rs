//! Pipes, eventfds, epoll and poll (the work is done in [`crate::pollfiles`]).

use super::Process;
use crate::pollfiles;
use scalevfs_vfs::cancel::CancelToken;
use scalevfs_vfs::epoll::EpollEvent;
use scalevfs_vfs::SysResult;

impl Process {
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
        pollfiles::epoll_ctl(&self.vfs.poll, &self.fds, epfd, op, fd, event)
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
    #[deprecated(note = "use `Process::with_cancel(&token).epoll_wait(..)`")]
    pub fn epoll_wait_interruptible(
        &self,
        epfd: i32,
        events: &mut [EpollEvent],
        timeout_ms: i32,
        cancel: &CancelToken,
    ) -> SysResult<usize> {
        self.with_cancel(cancel)
            .epoll_wait(epfd, events, timeout_ms)
    }
    /// `epoll_pwait`: signals are not modelled, so the mask is ignored and this is
    /// `epoll_wait` (use [`with_cancel`](Self::with_cancel) for `EINTR`).
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
    ///
    /// Errors: `EINVAL` (no room for events, or not an epoll descriptor), `EBADF`, `EINTR`
    /// (cancelled).
    #[deprecated(note = "use `Process::with_cancel(&token).epoll_pwait(..)`")]
    pub fn epoll_pwait_interruptible(
        &self,
        epfd: i32,
        events: &mut [EpollEvent],
        timeout_ms: i32,
        sigmask: Option<&libc::sigset_t>,
        cancel: &CancelToken,
    ) -> SysResult<usize> {
        self.with_cancel(cancel)
            .epoll_pwait(epfd, events, timeout_ms, sigmask)
    }
    /// `poll(fds, nfds, timeout_ms)`: fills `revents`, returns how many are non-zero.
    ///
    /// Errors: `EINVAL` (more descriptors than the limit). A descriptor that is not open is
    /// reported as `POLLNVAL`, not an error. Differences: no signals interrupt the wait (see
    /// [`ppoll_interruptible`](Self::ppoll_interruptible)).
    pub fn poll(&self, fds: &mut [libc::pollfd], timeout_ms: i32) -> SysResult<usize> {
        pollfiles::poll(&self.fds, fds, timeout_ms, None)
    }
    /// `poll` that a cancel interrupts with `EINTR`.
    #[deprecated(note = "use `Process::with_cancel(&token).poll(..)`")]
    pub fn poll_interruptible(
        &self,
        fds: &mut [libc::pollfd],
        timeout_ms: i32,
        cancel: &CancelToken,
    ) -> SysResult<usize> {
        self.with_cancel(cancel).poll(fds, timeout_ms)
    }
    /// `ppoll(fds, nfds, timeout, sigmask)`: `None` waits forever; the timeout is rounded
    /// up to milliseconds; the mask is ignored (signals are not modelled).
    ///
    /// Errors: `EINVAL` (more descriptors than the limit, or an invalid timeout).
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
    #[deprecated(note = "use `Process::with_cancel(&token).ppoll(..)`")]
    pub fn ppoll_interruptible(
        &self,
        fds: &mut [libc::pollfd],
        timeout: Option<&libc::timespec>,
        sigmask: Option<&libc::sigset_t>,
        cancel: &CancelToken,
    ) -> SysResult<usize> {
        self.with_cancel(cancel).ppoll(fds, timeout, sigmask)
    }
}
