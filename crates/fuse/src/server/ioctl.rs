//! IOCTL: the inode-flag requests (`chattr`/`lsattr`). The kernel serves
//! `FS_IOC_GETFLAGS`/`SETFLAGS`/`FSGETXATTR`/`FSSETXATTR` through its `fileattr`
//! operations, which for FUSE open the file, send these four as restricted
//! `FUSE_IOCTL`s (fixed-size argument in the request, result in the reply) and release
//! it. The kernel checked ownership and `CAP_LINUX_IMMUTABLE` (`vfs_fileattr_set`)
//! before asking, so the VFS runs the change with credentials that pass every check.
//! Any other request is `ENOTTY`, as on tmpfs.

use std::io;

use scalevfs_vfs::core::SetAttr;
use scalevfs_vfs::fileattr::{
    FsxAttr, FS_IOC_FSGETXATTR, FS_IOC_FSSETXATTR, FS_IOC_GETFLAGS, FS_IOC_SETFLAGS,
};
use scalevfs_vfs::namei::Ctx;
use scalevfs_vfs::Cred;
use zerocopy::IntoBytes;

use super::{e, Dispatcher, Res};
use crate::proto::{abi, Request};

/// Root: the kernel made the checks (see the module docs).
fn checked_cred() -> Cred {
    Cred {
        uid: 0,
        gid: 0,
        groups: Vec::new(),
    }
}

impl Dispatcher {
    pub(super) fn ioctl(
        &self,
        req: &Request<'_>,
        op: &abi::IoctlIn,
        data: &[u8],
    ) -> io::Result<()> {
        // Unrestricted ioctls come from CUSE only; 32-bit callers' layouts are not ours.
        if op.flags & (abi::FUSE_IOCTL_UNRESTRICTED | abi::FUSE_IOCTL_32BIT) != 0 {
            return req.reply_error(libc::ENOTTY);
        }
        match self.fileattr(op, data) {
            Ok(out) => {
                let head = abi::IoctlOut::default();
                let len = out.len().min(op.out_size as usize);
                req.reply_parts(&[head.as_bytes(), &out[..len]])
            }
            Err(err) => req.reply_error(err),
        }
    }

    /// The four inode-flag requests on the handle's file; the reply's data.
    fn fileattr(&self, op: &abi::IoctlIn, data: &[u8]) -> Res<Vec<u8>> {
        let core = self.fs.vfs.core();
        let h = self.fs.handle(op.fh)?;
        match op.cmd {
            FS_IOC_GETFLAGS => Ok(core.get_fsflags(&h.file).map_err(e)?.to_ne_bytes().to_vec()),
            FS_IOC_FSGETXATTR => {
                let flags = core.get_fsflags(&h.file).map_err(e)?;
                let mut out = vec![0; FsxAttr::SIZE];
                FsxAttr::from_flags(flags).write_to(&mut out);
                Ok(out)
            }
            FS_IOC_SETFLAGS | FS_IOC_FSSETXATTR => {
                let set = if op.cmd == FS_IOC_SETFLAGS {
                    let bytes = data.get(..4).ok_or(libc::EFAULT)?;
                    SetAttr::Flags(u32::from_ne_bytes(bytes.try_into().expect("4 bytes")))
                } else {
                    SetAttr::Fsx(FsxAttr::from_bytes(data).ok_or(libc::EFAULT)?)
                };
                let cred = checked_cred();
                let ctx = Ctx::new(&cred, h.file.path());
                core.set_fileattr(&ctx, &h.file, set).map_err(e)?;
                Ok(Vec::new())
            }
            _ => Err(libc::ENOTTY),
        }
    }
}
