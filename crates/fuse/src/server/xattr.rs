//! Extended-attribute requests: SETXATTR, GETXATTR, LISTXATTR and REMOVEXATTR, checked
//! again with the caller's credentials ([`xattr_cred`]).

use std::io;

use polyfuse::op;
use polyfuse::reply::XattrOut;
use polyfuse::Request;
use scalevfs_vfs::{xattr, Credentials as Cred};

use super::{caller_cred, e, name_bytes, Dispatcher, Res};

/// The credentials an xattr request on `name` (`None`: a listing) is checked with. The
/// kernel made the same checks before sending it (see `scalevfs_vfs::handle`); ours
/// matter where it did not (it passes a listing through as is, so `trusted.*` must be
/// hidden here from callers who are not root). Only `user.*` names are checked against
/// the file's permission bits and so need the supplementary groups ([`caller_cred`], a
/// read of `/proc`); every other rule depends on the uid alone. This keeps cheap the
/// kernel's `getxattr("security.capability")`, which `file_remove_privs` sends before
/// every write(2): FUSE inodes get `S_NOSEC` only with `FUSE_HANDLE_KILLPRIV_V2`
/// (protocol 7.33), which polyfuse 0.5.1 (7.31) cannot negotiate.
fn xattr_cred(req: &Request, name: Option<&[u8]>) -> Cred {
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
fn reply_xattr(req: &Request, r: Res<usize>, mut buf: Vec<u8>) -> io::Result<()> {
    match r {
        Ok(len) if buf.is_empty() => {
            let mut out = XattrOut::default();
            out.size(u32::try_from(len).unwrap_or(u32::MAX));
            req.reply(out)
        }
        Ok(len) => {
            buf.truncate(len);
            req.reply(buf)
        }
        Err(err) => req.reply_error(err),
    }
}

impl Dispatcher {
    pub(super) fn setxattr(&self, req: &Request, op: op::Setxattr<'_>) -> io::Result<()> {
        let core = self.fs.vfs.core();
        let name = name_bytes(op.name());
        self.unit(req, op.ino(), |n| {
            let cred = xattr_cred(req, Some(name));
            core.node_setxattr(n, &cred, name, op.value(), op.flags() as i32)
        })
    }

    pub(super) fn getxattr(&self, req: &Request, op: op::Getxattr<'_>) -> io::Result<()> {
        let core = self.fs.vfs.core();
        let name = name_bytes(op.name());
        let mut buf = xattr_buf(op.size());
        let r = self.fs.node(op.ino()).and_then(|n| {
            let cred = xattr_cred(req, Some(name));
            core.node_getxattr(&n, &cred, name, &mut buf).map_err(e)
        });
        reply_xattr(req, r, buf)
    }

    pub(super) fn listxattr(&self, req: &Request, op: op::Listxattr<'_>) -> io::Result<()> {
        let core = self.fs.vfs.core();
        let mut buf = xattr_buf(op.size());
        let r = self.fs.node(op.ino()).and_then(|n| {
            core.node_listxattr(&n, &xattr_cred(req, None), &mut buf)
                .map_err(e)
        });
        reply_xattr(req, r, buf)
    }

    pub(super) fn removexattr(&self, req: &Request, op: op::Removexattr<'_>) -> io::Result<()> {
        let core = self.fs.vfs.core();
        let name = name_bytes(op.name());
        self.unit(req, op.ino(), |n| {
            core.node_removexattr(n, &xattr_cred(req, Some(name)), name)
        })
    }
}
