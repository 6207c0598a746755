//! Descriptor system calls: `close`, `close_range`, `dup`/`dup2`/`dup3`, `fcntl`, and the
//! file locks (`fcntl` record and OFD locks, `flock`; see [`crate::locking`]).

use super::Process;
use crate::locking;
use crate::pollfiles::{self, special};
use scalevfs_vfs::cancel::CancelToken;
use scalevfs_vfs::{Errno, FcntlArg, SysResult};

impl Process {
    /// The record-lock context of a call on `fd` (see [`crate::locking`]).
    pub(super) fn lock_caller(&self, fd: i32) -> locking::Caller<'_> {
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
    #[deprecated(note = "use `Process::with_cancel(&token).fcntl(..)`")]
    pub fn fcntl_interruptible(
        &self,
        fd: i32,
        cmd: i32,
        arg: FcntlArg<'_>,
        cancel: &CancelToken,
    ) -> SysResult<i32> {
        self.with_cancel(cancel).fcntl(fd, cmd, arg)
    }
    /// `flock(fd, op)`: `LOCK_SH`, `LOCK_EX` or `LOCK_UN`, optionally `| LOCK_NB`. The lock
    /// belongs to the open file description.
    pub fn flock(&self, fd: i32, op: i32) -> SysResult<()> {
        self.lock_caller(fd).flock(op, None)
    }
    /// [`flock`](Self::flock) whose wait gives up with `EINTR` when `cancel` fires.
    #[deprecated(note = "use `Process::with_cancel(&token).flock(..)`")]
    pub fn flock_interruptible(&self, fd: i32, op: i32, cancel: &CancelToken) -> SysResult<()> {
        self.with_cancel(cancel).flock(fd, op)
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
    /// `close(2)`: frees descriptor `fd`. Drops the process's POSIX record locks on the file
    /// (whichever descriptor took them); the last close of the open file description drops its
    /// OFD and `flock` locks and releases the file.
    ///
    /// Errors: `EBADF` (`fd` not open).
    pub fn close(&self, fd: i32) -> SysResult<()> {
        let f = self.fds.close(fd)?;
        locking::on_close(&f, self.pid);
        drop(f);
        Ok(())
    }
    /// `dup(2)`: a new descriptor, the lowest free one, for the open file description of `fd`,
    /// without `FD_CLOEXEC`.
    ///
    /// Errors: `EBADF`; `EMFILE` (no descriptor below the limit).
    pub fn dup(&self, fd: i32) -> SysResult<i32> {
        let f = self.fds.get(fd)?;
        self.fds.alloc(0, f, false)
    }
    /// `dup2(2)`: makes `newfd` refer to the open file description of `oldfd`, closing what
    /// `newfd` named (its POSIX locks on that file are dropped, as by `close`). `oldfd ==
    /// newfd` returns `newfd` if it is open.
    ///
    /// Errors: `EBADF` (`oldfd` not open, or `newfd` out of range).
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
    /// `dup3(2)`: `dup2` with `O_CLOEXEC` as the only flag.
    ///
    /// Errors: `EINVAL` (`oldfd == newfd` or another flag); as `dup2` otherwise.
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
    /// `fcntl(2)`: descriptor flags (`F_GETFD`/`F_SETFD`), status flags (`F_GETFL`/`F_SETFL`:
    /// `O_APPEND`, `O_NONBLOCK`, `O_NOATIME`, `O_DIRECT`, `O_ASYNC`), `F_DUPFD[_CLOEXEC]`, record
    /// locks (`F_GETLK`/`F_SETLK`/`F_SETLKW` and the `F_OFD_*` ones, with deadlock detection),
    /// and pipe sizes (`F_GETPIPE_SZ`/`F_SETPIPE_SZ`).
    ///
    /// Errors: Linux's: `EBADF`, `EINVAL` (unknown command, bad range), `EAGAIN`/`EACCES`
    /// (conflicting lock), `EDEADLK`, `EMFILE`, `EPERM` (clearing `O_APPEND` on an append-only
    /// file). Differences: `F_SETLKW` blocks until granted (use [`fcntl_interruptible`](Self::fcntl_interruptible) for
    /// a cancellable wait); no leases, notifications, seals or owner/signal commands (`EINVAL`).
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
                // setfl: an append-only file's descriptors keep O_APPEND.
                if (v ^ f.flags()) & libc::O_APPEND != 0 && f.inode().is_append() {
                    return Err(Errno::EPERM);
                }
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
}
