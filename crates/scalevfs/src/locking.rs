//! File locks wired into the system-call API: `fcntl` record locks (POSIX and OFD) and
//! `flock`, on top of [`scalevfs_vfs::locks`] (per-inode lock state, blocked waiters in a hashed table).
//!
//! ## Who owns what
//! - The [`Vfs`](crate::Vfs) owns one [`LockManager`] (`VfsOptions::locking` picks the
//!   scalable design or the legacy ablation).
//! - Each inode gets its [`FileLockContext`] on its first lock request
//!   ([`context`]: `OnceLock::get_or_init`, so concurrent first users agree on one); inodes
//!   never locked pay only the empty `OnceLock` in the inode. A query (`F_GETLK`) or an
//!   unlock of such an inode creates none (as Linux's `posix_test_lock`), so it writes
//!   nothing. There is no global list on
//!   the lock and unlock paths; only the `/proc/locks` listing walks the manager's per-CPU
//!   registry.
//! - POSIX owner: the [`Process`](crate::Process), identified by its pid (unique per
//!   `Vfs` process, and `fork` gives a new one, so a child owns none of its parent's
//!   POSIX locks). OFD and flock owner: the open file description
//!   ([`OpenFile::lock_id`]).
//!
//! ## Release rules (Linux's `locks_remove_posix` / `locks_remove_file`)
//! - Closing any fd ([`on_close`]: `close`, `dup2`/`dup3` over an open fd, exit) drops the
//!   process's POSIX locks on that inode, whichever fd took them.
//! - The last close of an open file description drops its OFD and flock locks; that is
//!   done in `OpenFile::release` (crates/vfs/src/file.rs), wherever the last reference
//!   goes.
//!
//! ## The close/fcntl race
//! A POSIX lock granted while another thread closes the fd would outlive the close. As
//! Linux does, after a granted POSIX lock we look the fd up again and, if it no longer
//! names the same open file, drop the process's POSIX locks on the inode and return
//! `EBADF`. Correct through the context lock: `close` removes the fd and then takes the
//! context lock (in `release_posix`); `fcntl` grants under the context lock and then reads
//! the fd slot. Either close's critical section comes after the grant's (and removes the
//! lock) or before it, and then the fd removal happens-before our re-read.

use scalevfs_vfs::abi::Flock;
use scalevfs_vfs::cancel::CancelToken;
use scalevfs_vfs::locks::{flock_op_type, FcntlFile, FileLockContext, LockManager, LockType};
use scalevfs_vfs::{Errno, FcntlArg, Inode, OpenFile, SysResult};

use crate::fdtable::FdTable;

/// Whether `cmd` is one of the record-lock commands.
pub fn is_lock_cmd(cmd: i32) -> bool {
    matches!(
        cmd,
        libc::F_GETLK
            | libc::F_SETLK
            | libc::F_SETLKW
            | libc::F_OFD_GETLK
            | libc::F_OFD_SETLK
            | libc::F_OFD_SETLKW
    )
}

/// The inode's lock context, created on first use.
pub fn context<'a>(mgr: &LockManager, inode: &'a Inode) -> &'a FileLockContext {
    inode
        .lock_ctx
        .get_or_init(|| Box::new(mgr.new_context(inode.sb().dev, inode.ino)))
}

/// What a lock command runs as: the caller's fd table, fd and identity.
pub(crate) struct Caller<'a> {
    pub mgr: &'a LockManager,
    pub fds: &'a FdTable,
    pub fd: i32,
    pub pid: i32,
}

impl Caller<'_> {
    fn process_id(&self) -> u64 {
        self.pid as u64
    }

    /// `fcntl(fd, cmd, arg)` for a record-lock command on the open file `f` (the fd's).
    pub(crate) fn fcntl(
        &self,
        f: &OpenFile,
        cmd: i32,
        arg: FcntlArg<'_>,
        cancel: Option<&CancelToken>,
    ) -> SysResult<i32> {
        // Linux's `check_fcntl_cmd`: an O_PATH descriptor allows no lock command.
        if f.is_path() {
            return Err(Errno::EBADF);
        }
        let FcntlArg::Flock(fl) = arg else {
            // The argument must point to a `struct flock`.
            return Err(Errno::EFAULT);
        };
        let inode = f.inode();
        let file = FcntlFile {
            // The position lock is the description's: take it only when the range needs it.
            pos: if fl.l_whence as i32 == libc::SEEK_CUR {
                *f.pos.lock()
            } else {
                0
            },
            size: inode.size() as i64,
            readable: f.readable(),
            writable: f.writable(),
            file_id: f.lock_id(),
            process_id: self.process_id(),
            pid: self.pid,
        };
        let before: Flock = *fl;
        let ctx = match inode.lock_ctx.get() {
            Some(ctx) => ctx,
            None => match self.mgr.fcntl_without_context(cmd, fl, &file) {
                // A query, or an unlock, of a file that never held a lock: answered
                // without creating its context.
                Some(answer) => return answer.map(|()| 0),
                None => context(self.mgr, inode),
            },
        };
        self.mgr.fcntl(ctx, cmd, fl, &file, cancel)?;
        if matches!(cmd, libc::F_SETLK | libc::F_SETLKW)
            && before.l_type != libc::F_UNLCK as i16
            && !self.still_open(f)
        {
            self.mgr.release_posix(ctx, self.process_id());
            return Err(Errno::EBADF);
        }
        Ok(0)
    }

    /// `flock(fd, op)`. Linux's order: `LOCK_MAND` succeeds and a bad operation is
    /// `EINVAL` before the descriptor is looked at; then a bad or `O_PATH` descriptor is
    /// `EBADF`.
    pub(crate) fn flock(&self, op: i32, cancel: Option<&CancelToken>) -> SysResult<()> {
        let Some(ty) = flock_op_type(op)? else {
            return Ok(());
        };
        let f = self.fds.get(self.fd)?;
        if f.is_path() {
            return Err(Errno::EBADF);
        }
        if ty == LockType::Unlock && f.inode().lock_ctx.get().is_none() {
            // Nothing to release on a file that never held a lock.
            return Ok(());
        }
        let ctx = context(self.mgr, f.inode());
        self.mgr.flock(ctx, f.lock_id(), self.pid, op, cancel)
    }

    /// Whether `fd` still names `f` (the close/fcntl race check, see the module docs).
    fn still_open(&self, f: &OpenFile) -> bool {
        self.fds
            .with(self.fd, |g| std::ptr::eq(g, f))
            .unwrap_or(false)
    }
}

/// The POSIX close rule: process `pid` closed an fd of `f`'s inode.
pub fn on_close(f: &OpenFile, pid: i32) {
    if let Some(ctx) = f.inode().lock_ctx.get() {
        ctx.manager().release_posix(ctx, pid as u64);
    }
}
