//! The C calls for pipes, eventfd, epoll and poll.

use super::*;

// --- pipes, eventfd, epoll, poll ---

/// `pipe2(2)`: `pipefd[0]` the read end, `pipefd[1]` the write end.
///
/// # Safety
/// `pipefd` is `NULL` (`-EFAULT`) or writable for two `int`s.
#[no_mangle]
pub unsafe extern "C" fn svfs_pipe2(
    p: *mut svfs_process,
    pipefd: *mut c_int,
    flags: c_int,
) -> c_int {
    int_call("svfs_pipe2", p, |p| {
        if pipefd.is_null() {
            return Err(Errno::EFAULT);
        }
        let mut fds = [0; 2];
        p.pipe2(&mut fds, flags)?;
        // SAFETY: the caller's contract: two writable ints at `pipefd` (non-NULL).
        unsafe { pipefd.cast::<[c_int; 2]>().write_unaligned(fds) };
        Ok(())
    })
}

/// `eventfd2(2)` (`EFD_SEMAPHORE`, `EFD_NONBLOCK`, `EFD_CLOEXEC`).
#[no_mangle]
pub extern "C" fn svfs_eventfd(p: *mut svfs_process, initval: c_uint, flags: c_int) -> c_int {
    int_call("svfs_eventfd", p, |p| p.eventfd(initval, flags))
}

/// `epoll_create1(2)`.
#[no_mangle]
pub extern "C" fn svfs_epoll_create1(p: *mut svfs_process, flags: c_int) -> c_int {
    int_call("svfs_epoll_create1", p, |p| p.epoll_create1(flags))
}

/// `epoll_ctl(2)`: `event` may be `NULL` for `EPOLL_CTL_DEL` (otherwise `-EFAULT`).
///
/// # Safety
/// `event` is `NULL` or readable.
#[no_mangle]
pub unsafe extern "C" fn svfs_epoll_ctl(
    p: *mut svfs_process,
    epfd: c_int,
    op: c_int,
    fd: c_int,
    event: *mut libc::epoll_event,
) -> c_int {
    int_call("svfs_epoll_ctl", p, |p| {
        let ev = if event.is_null() {
            None
        } else {
            // SAFETY: the caller's contract: a readable epoll_event (non-NULL).
            let e = unsafe { event.read_unaligned() };
            Some(EpollEvent::new(e.events, e.u64))
        };
        p.epoll_ctl(epfd, op, fd, ev.as_ref())
    })
}

/// `epoll_wait(2)`: the number of events written to `events`, or `-errno`. Blocks the
/// calling thread for up to `timeout` ms (-1: until an event).
///
/// # Safety
/// `events` is `NULL` (`-EFAULT`) or writable for `maxevents` events.
#[no_mangle]
pub unsafe extern "C" fn svfs_epoll_wait(
    p: *mut svfs_process,
    epfd: c_int,
    events: *mut libc::epoll_event,
    maxevents: c_int,
    timeout: c_int,
) -> c_int {
    int_call("svfs_epoll_wait", p, |p| {
        if maxevents <= 0 || maxevents > EP_MAX_EVENTS {
            // No room: `EBADF` for a bad descriptor (Linux checks it first), else
            // `EINVAL`, which is what an empty buffer gets.
            return p.epoll_wait(epfd, &mut [], timeout);
        }
        if events.is_null() {
            // After the descriptor check, as in Linux.
            p.fcntl(epfd, libc::F_GETFD, FcntlArg::None)?;
            return Err(Errno::EFAULT);
        }
        // Up to 64 events on the stack; more on the heap.
        let mut small = [EpollEvent::default(); 64];
        let mut big = Vec::new();
        let buf: &mut [EpollEvent] = if maxevents as usize <= small.len() {
            &mut small[..maxevents as usize]
        } else {
            big.resize(maxevents as usize, EpollEvent::default());
            &mut big
        };
        let n = p.epoll_wait(epfd, buf, timeout)?;
        for (i, e) in buf[..n].iter().enumerate() {
            let c = libc::epoll_event {
                events: e.events,
                u64: e.data,
            };
            // SAFETY: the caller's contract: `maxevents` (>= n) writable events.
            unsafe { events.add(i).write_unaligned(c) };
        }
        Ok(n)
    })
}

/// `epoll_pwait` with glibc's arguments; the mask is ignored (no signals are modelled).
///
/// # Safety
/// As [`svfs_epoll_wait`].
#[no_mangle]
pub unsafe extern "C" fn svfs_epoll_pwait(
    p: *mut svfs_process,
    epfd: c_int,
    events: *mut libc::epoll_event,
    maxevents: c_int,
    timeout: c_int,
    _sigmask: *const libc::sigset_t,
) -> c_int {
    // SAFETY: the same contract.
    unsafe { svfs_epoll_wait(p, epfd, events, maxevents, timeout) }
}

/// `poll(2)`: fills each `revents`; the number of descriptors with events.
///
/// # Safety
/// `fds` is `NULL` (`-EFAULT` unless `nfds` is 0) or valid for reads and writes of
/// `nfds` `struct pollfd`s.
#[no_mangle]
pub unsafe extern "C" fn svfs_poll(
    p: *mut svfs_process,
    fds: *mut libc::pollfd,
    nfds: libc::nfds_t,
    timeout: c_int,
) -> c_int {
    int_call("svfs_poll", p, |p| {
        // SAFETY: the caller's contract for `fds`.
        let fds = unsafe { pollfds(fds, nfds) }?;
        p.poll(fds, timeout)
    })
}

/// # Safety
/// As [`svfs_poll`].
unsafe fn pollfds<'a>(
    fds: *mut libc::pollfd,
    nfds: libc::nfds_t,
) -> SysResult<&'a mut [libc::pollfd]> {
    // do_sys_poll: more than RLIMIT_NOFILE allows is EINVAL (the limit is at most
    // 1 Mi here); the Process checks its own limit.
    if nfds > 1 << 20 {
        return Err(Errno::EINVAL);
    }
    if nfds == 0 {
        return Ok(&mut []);
    }
    if fds.is_null() {
        return Err(Errno::EFAULT);
    }
    // SAFETY: the caller's contract: `nfds` readable and writable pollfds, unaliased.
    Ok(unsafe { std::slice::from_raw_parts_mut(fds, nfds as usize) })
}

/// `ppoll` with glibc's arguments: `timeout` `NULL` waits forever; the mask is ignored.
///
/// # Safety
/// As [`svfs_poll`]; `timeout` is `NULL` or readable.
#[no_mangle]
pub unsafe extern "C" fn svfs_ppoll(
    p: *mut svfs_process,
    fds: *mut libc::pollfd,
    nfds: libc::nfds_t,
    timeout: *const libc::timespec,
    _sigmask: *const libc::sigset_t,
) -> c_int {
    int_call("svfs_ppoll", p, |p| {
        // SAFETY: the caller's contract for `timeout` (NULL or readable).
        let t = unsafe { timeout.as_ref() };
        // SAFETY: the caller's contract for `fds`.
        let fds = unsafe { pollfds(fds, nfds) }?;
        p.ppoll(fds, t, None)
    })
}
