//! `ioctl`: the requests Linux's tmpfs answers itself, the inode flags of `chattr`/`lsattr`
//! (`FS_IOC_GETFLAGS`, `FS_IOC_SETFLAGS`) and their `struct fsxattr` form
//! (`FS_IOC_FSGETXATTR`, `FS_IOC_FSSETXATTR`).
//!
//! An embedder forwarding a guest's `ioctl(fd, request, argp)` does not need to know the
//! requests: [`ioctl_arg`] says how many bytes at `argp` the request uses and in which
//! direction, so the embedder copies them in, calls [`Process::ioctl`] with them, and
//! copies them back out. A request [`ioctl_arg`] does not know is `ENOTTY` (`EBADF` for a
//! bad descriptor first).

use super::Process;
use scalevfs_vfs::core::SetAttr;
use scalevfs_vfs::fileattr::{
    FsxAttr, FS_IOC_FSGETXATTR, FS_IOC_FSSETXATTR, FS_IOC_GETFLAGS, FS_IOC_SETFLAGS, FS_XFLAGS_MASK,
};
use scalevfs_vfs::{Errno, SysResult};

/// How a request uses the memory its argument points to (see [`ioctl_arg`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IoctlArg {
    /// The bytes at the argument pointer the request reads or writes. (For
    /// `FS_IOC_GETFLAGS`/`FS_IOC_SETFLAGS` this is 4, an `int`, although their request
    /// numbers encode the size of a `long`: Linux reads and writes an `int`.)
    pub len: usize,
    /// The request reads them: copy them in before the call.
    pub read: bool,
    /// The request writes them (on success): copy them out after the call.
    pub write: bool,
}

/// The argument memory of `request`, for the requests [`Process::ioctl`] knows.
pub fn ioctl_arg(request: u32) -> Option<IoctlArg> {
    let (len, read, write) = match request {
        FS_IOC_GETFLAGS => (4, false, true),
        FS_IOC_SETFLAGS => (4, true, false),
        FS_IOC_FSGETXATTR => (FsxAttr::SIZE, false, true),
        FS_IOC_FSSETXATTR => (FsxAttr::SIZE, true, false),
        _ => return None,
    };
    Some(IoctlArg { len, read, write })
}

impl Process {
    /// `ioctl(fd, request, arg)`: `arg` is the memory the argument points to (see
    /// [`ioctl_arg`]); shorter than the request needs is `EFAULT`, as a bad pointer is.
    /// Returns 0 on success, as these requests do.
    ///
    /// * `FS_IOC_GETFLAGS` writes the inode's flags (an `int`); `FS_IOC_SETFLAGS` sets
    ///   them: tmpfs keeps `FS_APPEND_FL`, `FS_IMMUTABLE_FL`, `FS_NODUMP_FL` and
    ///   `FS_NOATIME_FL` (others: `EOPNOTSUPP`); only the owner or root may set them
    ///   (`EPERM`), and only root may change append-only or immutable.
    /// * `FS_IOC_FSGETXATTR`/`FS_IOC_FSSETXATTR`: the same flags as `struct fsxattr`
    ///   xflags; tmpfs keeps no extent sizes or project ids (`EOPNOTSUPP` if set).
    /// * A file without flags (a FIFO, a pipe, an eventfd) and any other request:
    ///   `ENOTTY`; an `O_PATH` descriptor: `EBADF`.
    ///
    /// The flags are enforced as Linux does: an immutable file cannot be opened for
    /// writing, truncated, removed, renamed, linked, nor have its mode, owner, times or
    /// extended attributes changed (`EPERM`); an append-only file only accepts `O_APPEND`
    /// writers and keeps its names and attributes likewise; a no-atime file keeps its atime.
    pub fn ioctl(&self, fd: i32, request: u32, arg: &mut [u8]) -> SysResult<i32> {
        let f = self.fds.get(fd)?;
        if f.is_path() {
            return Err(Errno::EBADF);
        }
        let Some(spec) = ioctl_arg(request) else {
            return Err(Errno::ENOTTY);
        };
        let arg = arg.get_mut(..spec.len);
        let core = self.core();
        match request {
            FS_IOC_GETFLAGS | FS_IOC_FSGETXATTR => {
                // vfs_fileattr_get, then copy_to_user.
                let flags = core.get_fsflags(&f)?;
                let arg = arg.ok_or(Errno::EFAULT)?;
                if request == FS_IOC_GETFLAGS {
                    arg.copy_from_slice(&(flags as i32).to_ne_bytes());
                } else {
                    FsxAttr::from_flags(flags).write_to(arg);
                }
            }
            _ => {
                // copy_from_user, then vfs_fileattr_set.
                let arg = arg.ok_or(Errno::EFAULT)?;
                let set = if request == FS_IOC_SETFLAGS {
                    let v = i32::from_ne_bytes(arg[..4].try_into().expect("4 bytes"));
                    SetAttr::Flags(v as u32)
                } else {
                    let x = FsxAttr::from_bytes(arg).ok_or(Errno::EFAULT)?;
                    // copy_fsxattr_from_user (Linux 6.17+): unknown xflags before anything
                    // else looks at the file.
                    if x.xflags & !FS_XFLAGS_MASK != 0 {
                        return Err(Errno::EOPNOTSUPP);
                    }
                    SetAttr::Fsx(x)
                };
                core.set_fileattr(&self.ctx(), &f, set)?;
            }
        }
        Ok(0)
    }
}
