//! `FS_IOC_GETFLAGS`/`FS_IOC_SETFLAGS`/`FS_IOC_FSGETXATTR`/`FS_IOC_FSSETXATTR` on an
//! open file: `vfs_fileattr_get`, `vfs_fileattr_set` and `fileattr_set_prepare`.

use super::VfsCore;
use crate::file::OpenFile;
use crate::fileattr::*;
use crate::inode::Inode;
use crate::namei::Ctx;
use crate::{Errno, SysResult};

/// What `FS_IOC_SETFLAGS` or `FS_IOC_FSSETXATTR` asks for.
pub enum SetAttr {
    /// `FS_IOC_SETFLAGS`: the new `FS_*_FL` flags.
    Flags(u32),
    /// `FS_IOC_FSSETXATTR`: the new `struct fsxattr`.
    Fsx(FsxAttr),
}

impl VfsCore {
    /// The inode's flags; `ENOTTY` for a file whose file system has none (a FIFO, a pipe).
    pub fn get_fsflags(&self, f: &OpenFile) -> SysResult<u32> {
        let inode = f.inode();
        inode.fs().fileattr_flags(inode).ok_or(Errno::ENOTTY)?;
        Ok(inode.fs_flags())
    }

    /// `FS_IOC_SETFLAGS`/`FS_IOC_FSSETXATTR`: the owner (or root) may change the flags;
    /// append-only and immutable need `CAP_LINUX_IMMUTABLE` (root) to change either way;
    /// flags or fields the file system does not keep are `EOPNOTSUPP`.
    pub fn set_fileattr(&self, ctx: &Ctx<'_>, f: &OpenFile, set: SetAttr) -> SysResult<()> {
        let inode = f.inode();
        // ioctl_setflags: the mount first.
        let _write = inode.sb().want_write()?;
        let supported = inode.fs().fileattr_flags(inode).ok_or(Errno::ENOTTY)?;
        if !ctx.cred.owns(inode) {
            return Err(Errno::EPERM);
        }
        let _w = inode.rwsem.write();
        let old = inode.fs_flags();
        let new = match &set {
            SetAttr::Flags(fl) => *fl,
            // The bits the xflags do not carry stay as they were.
            SetAttr::Fsx(x) => x.flags() | (old & !FsxAttr::from_flags(!0).flags()),
        };
        if (new ^ old) & (FS_APPEND_FL | FS_IMMUTABLE_FL) != 0 && !ctx.cred.is_root() {
            return Err(Errno::EPERM);
        }
        if let SetAttr::Fsx(x) = &set {
            check_fsx(inode, x)?;
        }
        if new & !supported != 0 {
            return Err(Errno::EOPNOTSUPP);
        }
        inode.set_fs_flags(new);
        inode.touch_c();
        Ok(())
    }
}

/// `fileattr_set_prepare`'s checks of the extended fields, then shmem's refusal of any
/// field or xflag beyond the common ones (`fileattr_has_fsx`).
fn check_fsx(inode: &Inode, x: &FsxAttr) -> SysResult<()> {
    let (reg, dir) = (inode.is_reg(), inode.is_dir());
    // copy_fsxattr_from_user drops the read-only xflags (FS_XFLAG_HASATTR).
    let mut xflags = x.xflags & !FS_XFLAG_HASATTR;
    if xflags & FS_XFLAG_EXTSIZE != 0 && !reg
        || xflags & FS_XFLAG_EXTSZINHERIT != 0 && !dir
        || xflags & FS_XFLAG_COWEXTSIZE != 0 && !reg && !dir
        || xflags & FS_XFLAG_DAX != 0 && !reg && !dir
    {
        return Err(Errno::EINVAL);
    }
    if x.extsize == 0 {
        xflags &= !(FS_XFLAG_EXTSIZE | FS_XFLAG_EXTSZINHERIT);
    }
    if x.cowextsize == 0 {
        xflags &= !FS_XFLAG_COWEXTSIZE;
    }
    if xflags & !XFLAG_COMMON != 0 || x.extsize != 0 || x.projid != 0 || x.cowextsize != 0 {
        return Err(Errno::EOPNOTSUPP);
    }
    Ok(())
}
