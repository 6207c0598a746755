//! Metadata system calls: `newfstatat`/`fstat`, `statx`, `statfs`/`fstatfs`, the chmods
//! and chowns, `utimensat`, `faccessat` and `umask`.

use crate::typed::PathArg;
use std::sync::atomic::Ordering;

use super::Process;
use scalevfs_vfs::namei::PathRef;
use scalevfs_vfs::{Errno, Stat, Statfs, Statx, SysResult, Timespec};

impl Process {
    /// What `newfstatat` and `statx` describe: `EINVAL` for an unknown flag, then the
    /// walk. vfs_statx: the `AT_STATX_SYNC_TYPE` bits are accepted (and mean nothing here).
    fn stat_target<R>(
        &self,
        dirfd: i32,
        path: &[u8],
        flags: i32,
        f: impl Fn(PathRef<'_>) -> R,
    ) -> SysResult<R> {
        let valid = libc::AT_SYMLINK_NOFOLLOW
            | libc::AT_EMPTY_PATH
            | libc::AT_NO_AUTOMOUNT
            | libc::AT_STATX_SYNC_TYPE;
        if flags & !valid != 0 {
            return Err(Errno::EINVAL);
        }
        self.inspect_at(&self.ctx(), dirfd, path, flags, f)
    }
    /// `newfstatat(2)` (`fstatat`): the attributes of `path` relative to `dirfd`; takes
    /// `AT_SYMLINK_NOFOLLOW`, `AT_EMPTY_PATH` and `AT_NO_AUTOMOUNT`.
    ///
    /// Errors: `EINVAL` (other flags) and the path-walk errors (`ENOENT`, `ENOTDIR`,
    /// `EACCES`, `ELOOP`, `ENAMETOOLONG`). Inode numbers and `st_dev` are scalevfs's own.
    pub fn newfstatat(&self, dirfd: i32, path: impl PathArg, flags: i32) -> SysResult<Stat> {
        self.stat_target(dirfd, path.path_bytes(), flags, |p| self.core().stat(p))
    }
    /// `statx(2)`: the fields in `mask` (`STATX_*`) that tmpfs provides, creation time
    /// included; see `VfsCore::statx` for which ones come back.
    ///
    /// Errors: `EINVAL` (unknown flags, `STATX__RESERVED` in `mask`) and the path-walk errors.
    /// Differences: no `STATX_MNT_ID_UNIQUE`, `STATX_DIOALIGN` or change cookie.
    pub fn statx(&self, dirfd: i32, path: impl PathArg, flags: i32, mask: u32) -> SysResult<Statx> {
        // do_statx's order: the reserved mask bit, both sync types, then unknown flags.
        if mask & libc::STATX__RESERVED as u32 != 0
            || flags & libc::AT_STATX_SYNC_TYPE == libc::AT_STATX_SYNC_TYPE
        {
            return Err(Errno::EINVAL);
        }
        self.stat_target(dirfd, path.path_bytes(), flags, |p| {
            self.core().statx(p, mask)
        })
    }
    /// `statfs(2)` of the file system `path` is on.
    ///
    /// Errors: the path-walk errors (`ENOENT`, `ENOTDIR`, `EACCES`, `ELOOP`, `ENAMETOOLONG`).
    pub fn statfs(&self, path: impl PathArg) -> SysResult<Statfs> {
        let p = self.resolve_at(libc::AT_FDCWD, path.path_bytes(), 0, true)?;
        Ok(self.core().statfs(&p))
    }
    /// `fstatfs(2)` (an `O_PATH` descriptor will do, as on Linux).
    ///
    /// Errors: `EBADF`.
    pub fn fstatfs(&self, fd: i32) -> SysResult<Statfs> {
        let f = self.fds.get(fd)?;
        Ok(self.core().statfs(f.path()))
    }
    /// `fstat(2)`: the attributes of the file open on `fd` (also an `O_PATH` descriptor).
    ///
    /// Errors: `EBADF`.
    pub fn fstat(&self, fd: i32) -> SysResult<Stat> {
        let f = self.fds.get(fd)?;
        Ok(self.core().stat(f.path()))
    }
    /// `fchmodat(2)`: sets the permission bits of `path` (the owner or root only; a
    /// non-member's set-group-ID bit is cleared). `AT_SYMLINK_NOFOLLOW` on a symlink is
    /// `EOPNOTSUPP`, as on Linux.
    ///
    /// Errors: `EPERM` (not the owner, immutable, append-only), `EINVAL` (flags), and the
    /// path-walk errors.
    pub fn fchmodat(&self, dirfd: i32, path: impl PathArg, mode: u32, flags: i32) -> SysResult<()> {
        // fchmodat2's flags (Linux 6.6).
        if flags & !(libc::AT_SYMLINK_NOFOLLOW | libc::AT_EMPTY_PATH) != 0 {
            return Err(Errno::EINVAL);
        }
        let p = self.resolve_at(dirfd, path.path_bytes(), flags, true)?;
        self.core().chmod(&self.ctx(), &p, mode)
    }
    /// `fchmod(2)`: [`fchmodat`](Self::fchmodat) on the file open on `fd`.
    ///
    /// Errors: `EBADF` (also `O_PATH`), `EPERM`.
    pub fn fchmod(&self, fd: i32, mode: u32) -> SysResult<()> {
        let f = self.fds.get(fd)?;
        if f.is_path() {
            return Err(Errno::EBADF);
        }
        self.core().chmod(&self.ctx(), f.path(), mode)
    }
    /// `fchownat(2)`: changes the owner and group of `path` (root only, except that the owner
    /// may set the group to one of its groups); clears set-user-ID and set-group-ID bits of a
    /// non-directory as Linux does. Takes `AT_SYMLINK_NOFOLLOW` and `AT_EMPTY_PATH`.
    ///
    /// Errors: `EPERM` (not allowed, immutable, append-only), `EINVAL` (flags), and the
    /// path-walk errors.
    ///
    /// `uid`/`gid` of `u32::MAX` (-1) leave that id unchanged.
    pub fn fchownat(
        &self,
        dirfd: i32,
        path: impl PathArg,
        uid: u32,
        gid: u32,
        flags: i32,
    ) -> SysResult<()> {
        if flags & !(libc::AT_SYMLINK_NOFOLLOW | libc::AT_EMPTY_PATH) != 0 {
            return Err(Errno::EINVAL);
        }
        let p = self.resolve_at(dirfd, path.path_bytes(), flags, true)?;
        self.core().chown(&self.ctx(), &p, uid, gid)
    }
    /// `fchown(2)`: [`fchownat`](Self::fchownat) on the file open on `fd`.
    ///
    /// Errors: `EBADF` (also `O_PATH`), `EPERM`.
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
        path: impl PathArg,
        times: Option<[Timespec; 2]>,
        flags: i32,
    ) -> SysResult<()> {
        // sys_utimensat: nothing to do, not even the flags or the path are checked.
        if times.is_some_and(|t| t.iter().all(|ts| ts.nsec == libc::UTIME_OMIT)) {
            return Ok(());
        }
        if flags & !(libc::AT_SYMLINK_NOFOLLOW | libc::AT_EMPTY_PATH) != 0 {
            return Err(Errno::EINVAL);
        }
        let path = path.path_bytes();
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
        // vfs_utimes: the times after the walk, before anything else.
        if let Some(t) = &times {
            for ts in t {
                let special = ts.nsec == libc::UTIME_NOW || ts.nsec == libc::UTIME_OMIT;
                if !special && !(0..1_000_000_000).contains(&ts.nsec) {
                    return Err(Errno::EINVAL);
                }
            }
        }
        self.core().utimes(&self.ctx(), &p, times)
    }
    /// `faccessat2(2)`: whether the caller may access `path` with `mode` (`F_OK` or a
    /// combination of `R_OK`, `W_OK`, `X_OK`); takes `AT_EACCESS`, `AT_SYMLINK_NOFOLLOW` and
    /// `AT_EMPTY_PATH`.
    ///
    /// Errors: `EACCES`, `EINVAL` (bad mode or flags), and the path-walk errors. With one identity per process, `AT_EACCESS`
    /// changes nothing.
    pub fn faccessat(
        &self,
        dirfd: i32,
        path: impl PathArg,
        mode: i32,
        flags: i32,
    ) -> SysResult<()> {
        if mode & !(libc::R_OK | libc::W_OK | libc::X_OK) != 0 {
            return Err(Errno::EINVAL);
        }
        if flags & !(libc::AT_EACCESS | libc::AT_SYMLINK_NOFOLLOW | libc::AT_EMPTY_PATH) != 0 {
            return Err(Errno::EINVAL);
        }
        // Without AT_EACCESS Linux checks, the walk included, with the real ids
        // (`access_override_creds`).
        let real;
        let cred = if flags & libc::AT_EACCESS == 0 {
            real = self.creds.access_cred();
            &real
        } else {
            &self.cred
        };
        let ctx = scalevfs_vfs::namei::Ctx::new(cred, &self.root);
        self.inspect_at(&ctx, dirfd, path.path_bytes(), flags, |p| {
            self.core().access(&ctx, p, mode)
        })?
    }
    /// Sets the umask and returns the previous one.
    ///
    /// `umask(2)`: only the permission bits (`& 0o777`) are kept; it cannot fail.
    pub fn umask(&self, mask: u32) -> u32 {
        self.umask.swap(mask & 0o777, Ordering::Relaxed)
    }
}
