//! Namespace system calls: making, removing, renaming and linking names (`mkdirat`,
//! `mknodat`, `unlinkat`, `renameat2`, `linkat`, `symlinkat`), `readlinkat`, `getdents64`,
//! `mount`/`umount2`, the cwd (`chdir`, `fchdir`, `getcwd`) and the root (`chroot`).

use crate::typed::PathArg;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::Process;
use scalevfs_vfs::dentry::DPathError;
use scalevfs_vfs::namei::{Resolve, PATH_MAX};
use scalevfs_vfs::{Errno, FileSystem, MountOptions, Path, SysResult};

impl Process {
    /// `mkdirat(2)`: makes directory `path` with `mode & !umask` (plus the parent's
    /// set-group-ID bit).
    ///
    /// Errors: `EEXIST`, `ENOENT`, `ENOTDIR`, `EACCES`, `EPERM` (immutable parent), `EMLINK`,
    /// `ENOSPC`, `ENAMETOOLONG`, `ELOOP`.
    pub fn mkdirat(&self, dirfd: i32, path: impl PathArg, mode: u32) -> SysResult<()> {
        let path = path.path_bytes();
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
    pub fn mknodat(&self, dirfd: i32, path: impl PathArg, mode: u32, dev: u64) -> SysResult<()> {
        match mode & libc::S_IFMT {
            0 | libc::S_IFREG | libc::S_IFCHR | libc::S_IFBLK | libc::S_IFIFO | libc::S_IFSOCK => {}
            libc::S_IFDIR => return Err(Errno::EPERM),
            _ => return Err(Errno::EINVAL),
        }
        let path = path.path_bytes();
        let start = self.start_named(dirfd, path)?;
        let umask = self.umask.load(Ordering::Relaxed);
        self.core()
            .mknod(&self.ctx(), start.path(), path, mode, dev, umask)
    }
    /// `unlinkat(2)`: removes the name `path` (with `AT_REMOVEDIR`, an empty directory).
    /// The file lives on while open.
    ///
    /// Errors: `ENOENT`, `EISDIR` (a directory without `AT_REMOVEDIR`), `ENOTDIR`,
    /// `ENOTEMPTY`, `EBUSY` (a mount point), `EACCES`/`EPERM` (permissions, sticky
    /// directory, immutable or append-only), `EINVAL` (other flags; `.` with
    /// `AT_REMOVEDIR`).
    pub fn unlinkat(&self, dirfd: i32, path: impl PathArg, flags: i32) -> SysResult<()> {
        if flags & !libc::AT_REMOVEDIR != 0 {
            return Err(Errno::EINVAL);
        }
        let path = path.path_bytes();
        let start = self.start_named(dirfd, path)?;
        self.core().unlink(
            &self.ctx(),
            start.path(),
            path,
            flags & libc::AT_REMOVEDIR != 0,
        )
    }
    /// `renameat2(2)`: renames `oldpath` to `newpath`, replacing it atomically; takes
    /// `RENAME_NOREPLACE`, `RENAME_EXCHANGE` and `RENAME_WHITEOUT`.
    ///
    /// Errors: `ENOENT`, `EEXIST` (`RENAME_NOREPLACE`), `EISDIR`, `ENOTDIR`, `ENOTEMPTY`,
    /// `EINVAL` (a directory into its own subtree, bad flags), `EBUSY` (a mount point), `EXDEV`
    /// (across mounts), `EACCES`/`EPERM` (permissions, sticky, immutable, append-only),
    /// `EMLINK`.
    pub fn renameat2(
        &self,
        olddirfd: i32,
        oldpath: impl PathArg,
        newdirfd: i32,
        newpath: impl PathArg,
        flags: u32,
    ) -> SysResult<()> {
        let (op, np) = (oldpath.path_bytes(), newpath.path_bytes());
        // do_renameat2: flags, then the names, then the walks.
        scalevfs_vfs::core::check_rename_flags(flags)?;
        if op.is_empty() || np.is_empty() {
            return Err(Errno::ENOENT);
        }
        let os = self.start(olddirfd, op)?;
        let ns = match self.start(newdirfd, np) {
            Ok(ns) => ns,
            // Linux walks to the old name's parent (`filename_parentat`) before it looks
            // at `newdirfd`: that walk's error (ENOTDIR for a file `olddirfd`) comes first.
            Err(e) => {
                let old_parent = self.core().lookup_parent(&self.ctx(), os.path(), op);
                return Err(old_parent.err().unwrap_or(e));
            }
        };
        self.core()
            .rename(&self.ctx(), os.path(), op, ns.path(), np, flags)
    }
    /// `linkat`. With `AT_EMPTY_PATH` and an empty `oldpath` it links the file `olddirfd`
    /// refers to (an `O_TMPFILE` file opened without `O_EXCL` included). Linux 6.10+ lets
    /// a caller without `CAP_DAC_READ_SEARCH` do so only for a file opened with its own
    /// credentials; here every caller may (an open file does not record the credentials
    /// it was opened with, so a file opened before a `setuid` counts as the caller's).
    pub fn linkat(
        &self,
        olddirfd: i32,
        oldpath: impl PathArg,
        newdirfd: i32,
        newpath: impl PathArg,
        flags: i32,
    ) -> SysResult<()> {
        if flags & !(libc::AT_SYMLINK_FOLLOW | libc::AT_EMPTY_PATH) != 0 {
            return Err(Errno::EINVAL);
        }
        let (op, np) = (oldpath.path_bytes(), newpath.path_bytes());
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
    /// `symlinkat(2)`: makes `linkpath` a symbolic link whose target is `target` (not
    /// resolved).
    ///
    /// Errors: `EEXIST`, `ENOENT` (empty target or missing parent), `ENAMETOOLONG` (target
    /// over 4095 bytes), `EACCES`, `ENOSPC`, `ENOTDIR`.
    pub fn symlinkat(
        &self,
        target: impl PathArg,
        newdirfd: i32,
        linkpath: impl PathArg,
    ) -> SysResult<()> {
        let (target, lp) = (target.path_bytes(), linkpath.path_bytes());
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
    ///
    /// Errors: `EINVAL` (not a symlink, or an empty `buf`), and the path-walk errors.
    pub fn readlinkat(&self, dirfd: i32, path: impl PathArg, buf: &mut [u8]) -> SysResult<usize> {
        if buf.is_empty() {
            return Err(Errno::EINVAL);
        }
        let path = path.path_bytes();
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
    /// The position is a cookie of Linux 6.14+ tmpfs's directory order (newest entry first).
    ///
    /// Errors: `EBADF` (also `O_PATH`), `ENOTDIR`, `EINVAL` (`buf` too small for the next
    /// entry), `ENOENT` (the directory was removed).
    pub fn getdents64(&self, fd: i32, buf: &mut [u8]) -> SysResult<usize> {
        let f = self.fds.get(fd)?;
        self.core().getdents64(&f, buf)
    }
    /// `mount(2)` of a new file system `fs` on the directory `path` (resolved as this
    /// process resolves paths: relative to its cwd, following symlinks). The path's errors
    /// come first, then `EPERM` unless root (Linux's order), then `ENOTDIR`, and `ENOENT`
    /// for a directory in a lazily unmounted tree. Mounting on a mount root stacks the new
    /// mount on top, as Linux does; `umount2` uncovers the one below.
    pub fn mount(&self, path: impl PathArg, fs: Arc<dyn FileSystem>) -> SysResult<()> {
        self.mount_with(path, fs, MountOptions::new())
    }
    /// [`mount`](Self::mount) with `opts` (`MS_RDONLY`: [`MountOptions::read_only`]).
    pub fn mount_with(
        &self,
        path: impl PathArg,
        fs: Arc<dyn FileSystem>,
        opts: MountOptions,
    ) -> SysResult<()> {
        let at = self.resolve_at(libc::AT_FDCWD, path.path_bytes(), 0, true)?;
        if !self.creds.is_privileged() {
            return Err(Errno::EPERM);
        }
        self.core().mount_with(&at, fs, &opts).map(|_| ())
    }
    /// `mount(NULL, path, NULL, MS_REMOUNT | flags, NULL)`: makes the file system mounted
    /// at `path` read-only or read-write as `opts` says ([`MountOptions::read_only`]);
    /// other options stay. Root only.
    ///
    /// Errors: the path walk's, then `EPERM` (not root), `EINVAL` (`path` is not the root
    /// of a mount), and to read-only `EBUSY` while a file on it is open for writing, a
    /// file unlinked from it is still open, or a change is in flight.
    pub fn remount(&self, path: impl PathArg, opts: MountOptions) -> SysResult<()> {
        let path = path.path_bytes();
        if path.is_empty() {
            return Err(Errno::ENOENT);
        }
        let target = self.resolve_at(libc::AT_FDCWD, path, 0, true)?;
        if !self.creds.is_privileged() {
            return Err(Errno::EPERM);
        }
        self.core().remount(&target, &opts)
    }
    /// `umount2(2)`: unmounts the file system mounted at `path` (the checks, `EBUSY` and
    /// the lazy `MNT_DETACH` are `VfsCore::umount`'s). `EINVAL` for an unknown flag, then
    /// the path's own errors, then `EPERM` unless root, as Linux checks them;
    /// `UMOUNT_NOFOLLOW` does not follow a trailing symlink.
    pub fn umount2(&self, path: impl PathArg, flags: i32) -> SysResult<()> {
        const KNOWN: i32 =
            libc::MNT_FORCE | libc::MNT_DETACH | libc::MNT_EXPIRE | libc::UMOUNT_NOFOLLOW;
        if flags & !KNOWN != 0 {
            return Err(Errno::EINVAL);
        }
        let follow = flags & libc::UMOUNT_NOFOLLOW == 0;
        let path = path.path_bytes();
        if path.is_empty() {
            return Err(Errno::ENOENT);
        }
        let start = self.start(libc::AT_FDCWD, path)?;
        let mut ctx = self.ctx();
        ctx.resolve |= Resolve::KEEP_EXPIRY_MARK;
        let target = self
            .core()
            .lookup(&ctx, start.path(), path, follow, false)?;
        if !self.creds.is_privileged() {
            return Err(Errno::EPERM);
        }
        self.core().umount(target, flags)
    }
    /// `chdir(2)`: makes `path` (a searchable directory) the working directory.
    ///
    /// Errors: `ENOTDIR`, `EACCES` (no search permission), and the path-walk errors.
    pub fn chdir(&self, path: impl PathArg) -> SysResult<()> {
        let path = path.path_bytes();
        let p = self.resolve_at(libc::AT_FDCWD, path, 0, true)?;
        self.set_cwd(p)
    }
    /// `fchdir(2)`: makes the directory open on `fd` the working directory.
    ///
    /// Errors: `EBADF`, `ENOTDIR`, `EACCES`.
    pub fn fchdir(&self, fd: i32) -> SysResult<()> {
        let f = self.fds.get(fd)?;
        self.set_cwd(f.path().clone())
    }
    /// `chroot(2)`: makes the directory at `path` (resolved as `chdir` resolves it, from
    /// the current root) the process root, which every later path walk stays under; the
    /// cwd is left where it is, as Linux leaves it. The walk's errors, `ENOTDIR`,
    /// `EACCES` without search permission, then `EPERM` without privilege
    /// (`CAP_SYS_CHROOT`: effective uid 0). Takes `&mut self`: the root is read without
    /// synchronization by every call.
    pub fn chroot(&mut self, path: impl PathArg) -> SysResult<()> {
        let p = self.resolve_at(libc::AT_FDCWD, path.path_bytes(), 0, true)?;
        let inode = p.dentry.inode().ok_or(Errno::ENOENT)?;
        if !inode.is_dir() {
            return Err(Errno::ENOTDIR);
        }
        scalevfs_vfs::perm::permission(inode, &self.cred, scalevfs_vfs::perm::MAY_EXEC)?;
        if !self.creds.is_privileged() {
            return Err(Errno::EPERM);
        }
        self.root = p;
        Ok(())
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
    fn set_cwd(&self, p: Path) -> SysResult<()> {
        let inode = p.dentry.inode().ok_or(Errno::ENOENT)?;
        if !inode.is_dir() {
            return Err(Errno::ENOTDIR);
        }
        scalevfs_vfs::perm::permission(inode, &self.cred, scalevfs_vfs::perm::MAY_EXEC)?;
        self.cwd.set(p);
        Ok(())
    }
}
