//! Extended-attribute system calls: `setxattr`, `getxattr`, `listxattr` and
//! `removexattr`, each by path (following a trailing symlink), by path on the link
//! itself (`l*`) and by descriptor (`f*`). The twelve calls share one resolver
//! ([`XattrTarget`]); see `scalevfs_vfs::xattr` for the rules.

use super::Process;
use crate::typed::PathArg;
use scalevfs_vfs::{xattr, Errno, Inode, SysResult};

/// What an xattr call names.
enum XattrTarget<'a> {
    /// A path from the cwd; `follow`: a trailing symlink is followed (not for the `l*`
    /// calls).
    Path { path: &'a [u8], follow: bool },
    /// The file open on a descriptor (`flistxattr`, `fremovexattr`): `EBADF` for a bad
    /// or `O_PATH` descriptor, `AT_FDCWD` included.
    Fd(i32),
    /// As `Fd`, but `AT_FDCWD` names the cwd (`fsetxattr`, `fgetxattr`): since Linux
    /// 6.15 they are `setxattrat`/`getxattrat` with an empty path and `AT_EMPTY_PATH`,
    /// which walk the empty path from a negative `dfd` instead of looking a descriptor up.
    FdOrCwd(i32),
}

impl XattrTarget<'_> {
    fn path(path: &[u8], follow: bool) -> XattrTarget<'_> {
        XattrTarget::Path { path, follow }
    }
}

impl Process {
    /// Runs `op` on the inode `target` names: the walk's (or the descriptor's) errors
    /// first, then `ENOENT` for a path that names no inode.
    fn on_xattr_target<T>(
        &self,
        target: XattrTarget<'_>,
        op: impl FnOnce(&Inode) -> SysResult<T>,
    ) -> SysResult<T> {
        let fd = match target {
            XattrTarget::Path { path, follow } => {
                let p = self.resolve_at(libc::AT_FDCWD, path, 0, follow)?;
                return op(p.dentry.inode().ok_or(Errno::ENOENT)?);
            }
            XattrTarget::FdOrCwd(fd) if fd == libc::AT_FDCWD => {
                let p = self.resolve_at(fd, b"", libc::AT_EMPTY_PATH, true)?;
                return op(p.dentry.inode().ok_or(Errno::ENOENT)?);
            }
            XattrTarget::Fd(fd) | XattrTarget::FdOrCwd(fd) => fd,
        };
        let f = self.fds.get(fd)?;
        if f.is_path() {
            return Err(Errno::EBADF);
        }
        op(f.inode())
    }
    /// The `*setxattr` calls: the arguments are checked before the target is looked up.
    fn setxattr_on(
        &self,
        target: XattrTarget<'_>,
        name: &[u8],
        value: &[u8],
        flags: i32,
    ) -> SysResult<()> {
        xattr::check_set_args(name, value.len(), flags)?;
        self.on_xattr_target(target, |inode| {
            xattr::set(inode, &self.cred, name, value, flags)
        })
    }
    /// The `*getxattr` calls: the name is checked before the target is looked up.
    fn getxattr_on(
        &self,
        target: XattrTarget<'_>,
        name: &[u8],
        buf: &mut [u8],
    ) -> SysResult<usize> {
        xattr::check_name(name)?;
        self.on_xattr_target(target, |inode| xattr::get(inode, &self.cred, name, buf))
    }
    /// The `*listxattr` calls.
    fn listxattr_on(&self, target: XattrTarget<'_>, buf: &mut [u8]) -> SysResult<usize> {
        self.on_xattr_target(target, |inode| xattr::list(inode, &self.cred, buf))
    }
    /// The `*removexattr` calls: the name is checked before the target is looked up.
    fn removexattr_on(&self, target: XattrTarget<'_>, name: &[u8]) -> SysResult<()> {
        xattr::check_name(name)?;
        self.on_xattr_target(target, |inode| xattr::remove(inode, &self.cred, name))
    }

    /// `setxattr(2)`: `flags` 0, `XATTR_CREATE` or `XATTR_REPLACE`.
    pub fn setxattr(
        &self,
        path: impl PathArg,
        name: &[u8],
        value: &[u8],
        flags: i32,
    ) -> SysResult<()> {
        self.setxattr_on(
            XattrTarget::path(path.path_bytes(), true),
            name,
            value,
            flags,
        )
    }
    /// `lsetxattr(2)`: a symlink itself.
    ///
    /// Errors: as [`setxattr`](Self::setxattr).
    pub fn lsetxattr(
        &self,
        path: impl PathArg,
        name: &[u8],
        value: &[u8],
        flags: i32,
    ) -> SysResult<()> {
        self.setxattr_on(
            XattrTarget::path(path.path_bytes(), false),
            name,
            value,
            flags,
        )
    }
    /// `fsetxattr(2)`. The arguments are checked before the descriptor, as Linux (6.13+)
    /// copies them in before it looks `fd` up; `AT_FDCWD` is the cwd (Linux 6.15+).
    ///
    /// Errors: as [`setxattr`](Self::setxattr), plus `EBADF`.
    pub fn fsetxattr(&self, fd: i32, name: &[u8], value: &[u8], flags: i32) -> SysResult<()> {
        self.setxattr_on(XattrTarget::FdOrCwd(fd), name, value, flags)
    }
    /// `getxattr(2)` into `buf` (an empty `buf` asks for the value's size).
    ///
    /// Errors: `ENODATA` (no such attribute), `ERANGE` (`buf` too small, empty or over-long
    /// name), `EOPNOTSUPP` (unknown namespace; `system.posix_acl_*`: no ACLs), `EACCES`/`EPERM`
    /// (namespace rules), and the path-walk errors.
    pub fn getxattr(&self, path: impl PathArg, name: &[u8], buf: &mut [u8]) -> SysResult<usize> {
        self.getxattr_on(XattrTarget::path(path.path_bytes(), true), name, buf)
    }
    /// `lgetxattr(2)`: [`getxattr`](Self::getxattr) of a symlink itself.
    pub fn lgetxattr(&self, path: impl PathArg, name: &[u8], buf: &mut [u8]) -> SysResult<usize> {
        self.getxattr_on(XattrTarget::path(path.path_bytes(), false), name, buf)
    }
    /// `fgetxattr(2)`: the name is checked before the descriptor (see `fsetxattr`).
    ///
    /// Errors: as [`getxattr`](Self::getxattr), plus `EBADF`.
    pub fn fgetxattr(&self, fd: i32, name: &[u8], buf: &mut [u8]) -> SysResult<usize> {
        self.getxattr_on(XattrTarget::FdOrCwd(fd), name, buf)
    }
    /// `listxattr(2)`: the names, each NUL-terminated, into `buf` (an empty `buf` asks for
    /// the size).
    ///
    /// Errors: `ERANGE` (`buf` too small), `E2BIG` (the list exceeds 64 KiB), and the path-walk
    /// errors.
    pub fn listxattr(&self, path: impl PathArg, buf: &mut [u8]) -> SysResult<usize> {
        self.listxattr_on(XattrTarget::path(path.path_bytes(), true), buf)
    }
    /// `llistxattr(2)`: [`listxattr`](Self::listxattr) of a symlink itself.
    pub fn llistxattr(&self, path: impl PathArg, buf: &mut [u8]) -> SysResult<usize> {
        self.listxattr_on(XattrTarget::path(path.path_bytes(), false), buf)
    }
    /// `flistxattr(2)`: `AT_FDCWD` is `EBADF`.
    pub fn flistxattr(&self, fd: i32, buf: &mut [u8]) -> SysResult<usize> {
        self.listxattr_on(XattrTarget::Fd(fd), buf)
    }
    /// `removexattr(2)`: removes attribute `name` of `path` (following symlinks).
    ///
    /// Errors: `ENODATA` (no such attribute), `EOPNOTSUPP` (unknown namespace, or
    /// `system.posix_acl_*`: no ACLs), `EPERM`/`EACCES` (namespace rules, immutable,
    /// append-only), `ERANGE` (empty or over-long name).
    pub fn removexattr(&self, path: impl PathArg, name: &[u8]) -> SysResult<()> {
        self.removexattr_on(XattrTarget::path(path.path_bytes(), true), name)
    }
    /// `lremovexattr(2)`: [`removexattr`](Self::removexattr) of a symlink itself.
    pub fn lremovexattr(&self, path: impl PathArg, name: &[u8]) -> SysResult<()> {
        self.removexattr_on(XattrTarget::path(path.path_bytes(), false), name)
    }
    /// `fremovexattr(2)`: the name is checked before the descriptor (see `fsetxattr`), but
    /// `AT_FDCWD` is `EBADF`.
    pub fn fremovexattr(&self, fd: i32, name: &[u8]) -> SysResult<()> {
        self.removexattr_on(XattrTarget::Fd(fd), name)
    }
}
