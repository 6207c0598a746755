//! Extended-attribute requests: SETXATTR, GETXATTR, LISTXATTR and REMOVEXATTR, checked
//! again with the caller's credentials ([`xattr_cred`]).

use std::io;

use scalevfs_vfs::{xattr, Cred};

use super::{caller_cred, e, Dispatcher, Res};
use crate::proto::{abi, Request};

/// The credentials an xattr request on `name` (`None`: a listing) is checked with. The
/// kernel made the same checks before sending it (see `scalevfs_vfs::handle`); ours
/// matter where it did not (it passes a listing through as is, so `trusted.*` must be
/// hidden here from callers who are not root). Only `user.*` names are checked against
/// the file's permission bits and so need the supplementary groups ([`caller_cred`], a
/// read of `/proc`); every other rule depends on the uid alone. This keeps cheap the
/// kernel's `getxattr("security.capability")`, which `file_remove_privs` sends before
/// every write(2): FUSE inodes get `S_NOSEC` only with `FUSE_HANDLE_KILLPRIV_V2`
/// (protocol 7.33).
fn xattr_cred(req: &Request<'_>, name: Option<&[u8]>) -> Cred {
    match name {
        Some(n) if n.starts_with(b"user.") => caller_cred(req),
        _ => Cred {
            uid: req.uid(),
            gid: req.gid(),
            groups: Vec::new(),
        },
    }
}

/// The buffer for a GETXATTR or LISTXATTR of `size` bytes (0: a size query). The kernel
/// never asks for more than `XATTR_SIZE_MAX` (= `XATTR_LIST_MAX`), and no more is
/// allocated here whatever a request says.
pub(super) fn xattr_buf(size: u32) -> Vec<u8> {
    vec![0; (size as usize).min(xattr::XATTR_SIZE_MAX.max(xattr::XATTR_LIST_MAX))]
}

/// Answers a GETXATTR or LISTXATTR: for a size query (an empty `buf`) the length in a
/// `fuse_getxattr_out`, otherwise the first `len` bytes of `buf` (the VFS answered
/// `ERANGE` if they did not fit).
fn reply_xattr(req: &Request<'_>, r: Res<usize>, mut buf: Vec<u8>) -> io::Result<()> {
    match r {
        Ok(len) if buf.is_empty() => req.reply(&abi::GetxattrOut {
            size: u32::try_from(len).unwrap_or(u32::MAX),
            padding: 0,
        }),
        Ok(len) => {
            buf.truncate(len);
            req.reply(&buf[..])
        }
        Err(err) => req.reply_error(err),
    }
}

impl Dispatcher {
    pub(super) fn setxattr(
        &self,
        req: &Request<'_>,
        op: &abi::SetxattrIn,
        name: &[u8],
        value: &[u8],
    ) -> io::Result<()> {
        let core = self.fs.vfs.core();
        self.unit(req, req.nodeid(), |n| {
            let cred = xattr_cred(req, Some(name));
            core.node_setxattr(n, &cred, name, value, op.flags as i32)
        })
    }

    pub(super) fn getxattr(
        &self,
        req: &Request<'_>,
        op: &abi::GetxattrIn,
        name: &[u8],
    ) -> io::Result<()> {
        self.fs.getxattr_requests.add(1);
        let core = self.fs.vfs.core();
        let mut buf = xattr_buf(op.size);
        let r = self.fs.node(req.nodeid()).and_then(|n| {
            let cred = xattr_cred(req, Some(name));
            core.node_getxattr(&n, &cred, name, &mut buf).map_err(e)
        });
        reply_xattr(req, r, buf)
    }

    pub(super) fn listxattr(&self, req: &Request<'_>, op: &abi::GetxattrIn) -> io::Result<()> {
        let core = self.fs.vfs.core();
        let mut buf = xattr_buf(op.size);
        let r = self.fs.node(req.nodeid()).and_then(|n| {
            core.node_listxattr(&n, &xattr_cred(req, None), &mut buf)
                .map_err(e)
        });
        reply_xattr(req, r, buf)
    }

    pub(super) fn removexattr(&self, req: &Request<'_>, name: &[u8]) -> io::Result<()> {
        let core = self.fs.vfs.core();
        self.unit(req, req.nodeid(), |n| {
            core.node_removexattr(n, &xattr_cred(req, Some(name)), name)
        })
    }
}
