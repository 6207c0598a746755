//! Requests on names and inodes: LOOKUP and FORGET, GETATTR and SETATTR, READLINK, the
//! requests that make and remove names (SYMLINK, MKNOD, MKDIR, UNLINK, RMDIR, RENAME,
//! LINK, CREATE), STATFS and ACCESS.

use std::io;

use polyfuse::op::{self, SetAttrTime};
use polyfuse::reply::{OpenOut, StatfsOut};
use polyfuse::Request;
use scalevfs::frontend::{Node, Owner, SetAttr, SetTime};
use scalevfs_vfs::{Credentials as Cred, Errno, FileRef, Timespec};

use super::{caller_cred, e, name_bytes, owner_of, Dispatcher, Fs, Res};
use crate::tables::Handle;

impl Fs {
    /// CREATE: `open(dir/name, O_CREAT | flags, mode)`. The kernel sends it after its
    /// LOOKUP found no entry, and takes the reply as a file it created: it checks
    /// nothing on the file and does not truncate it. So if the name appeared meanwhile
    /// (behind the kernel's back) and `O_EXCL` is not set, this is an open of an existing
    /// file that only we can check, as `open(2)` would: the file's permissions for the
    /// caller and `O_TRUNC` ([`caller_cred`]). A CREATE reply must be a regular file (the
    /// kernel answers `EIO` otherwise), so anything else gets `ESTALE`: the kernel then
    /// walks the path again with `LOOKUP_REVAL`, finds the name and opens it itself, as
    /// Linux does (a directory's `EISDIR`, a symlink followed, a FIFO's open sleeping in
    /// the caller rather than on a worker).
    fn create(
        &self,
        dir: &Node,
        name: &[u8],
        mode: u32,
        flags: i32,
        req: &Request,
    ) -> Res<(Node, FileRef)> {
        self.create_as(dir, name, mode, flags, owner_of(req), || caller_cred(req))
    }

    /// [`Fs::create`] with the owner of a new file and the caller's credentials (asked
    /// for only if the name exists).
    pub(super) fn create_as(
        &self,
        dir: &Node,
        name: &[u8],
        mode: u32,
        flags: i32,
        owner: Owner,
        cred: impl Fn() -> Cred,
    ) -> Res<(Node, FileRef)> {
        let core = self.vfs.core();
        // The name may come and go behind our back as well: a few rounds, then let the
        // kernel walk again.
        for _ in 0..3 {
            match core.node_create(dir, name, mode, flags, owner) {
                Err(Errno::EEXIST) if flags & libc::O_EXCL == 0 => {}
                r => return r.map_err(e),
            }
            self.create_races.add(1);
            let node = match core.node_lookup(dir, name) {
                Err(Errno::ENOENT) => continue,
                r => r.map_err(e)?,
            };
            if !node.inode().is_reg() {
                return Err(libc::ESTALE);
            }
            let file = core.node_open_as(&node, flags, &cred()).map_err(e)?;
            return Ok((node, file));
        }
        Err(libc::ESTALE)
    }
}

impl Dispatcher {
    pub(super) fn lookup(&self, req: &Request, op: op::Lookup<'_>) -> io::Result<()> {
        let fs = &self.fs;
        let core = fs.vfs.core();
        match fs
            .node(op.parent())
            .and_then(|d| core.node_lookup(&d, name_bytes(op.name())).map_err(e))
        {
            Ok(n) => fs.reply_entry(req, n, None),
            Err(err) => req.reply_error(err),
        }
    }

    pub(super) fn forget(&self, forgets: op::Forgets<'_>) -> io::Result<()> {
        for f in forgets.as_ref() {
            self.fs.nodes.forget(f.ino(), f.nlookup());
        }
        Ok(()) // forget has no reply
    }

    pub(super) fn getattr(&self, req: &Request, op: op::Getattr<'_>) -> io::Result<()> {
        match self.fs.node(op.ino()) {
            Ok(n) => self.fs.reply_attr(req, &n),
            Err(err) => req.reply_error(err),
        }
    }

    pub(super) fn setattr(&self, req: &Request, op: op::Setattr<'_>) -> io::Result<()> {
        let fs = &self.fs;
        let core = fs.vfs.core();
        let t = |x: Option<SetAttrTime>| {
            x.map(|x| match x {
                SetAttrTime::Timespec(d) => SetTime::At(Timespec {
                    // The kernel's u64 is a signed time64 (see `fuse_time`).
                    sec: d.as_secs() as i64,
                    nsec: d.subsec_nanos() as i64,
                }),
                _ => SetTime::Now, // SetAttrTime::Now (the enum is non_exhaustive)
            })
        };
        let a = SetAttr {
            mode: op.mode().map(|m| m & 0o7777),
            uid: op.uid(),
            gid: op.gid(),
            size: op.size(),
            atime: t(op.atime()),
            mtime: t(op.mtime()),
        };
        match fs
            .node(op.ino())
            .and_then(|n| core.node_setattr(&n, &a).map_err(e).map(|_| n))
        {
            Ok(n) => fs.reply_attr(req, &n),
            Err(err) => req.reply_error(err),
        }
    }

    pub(super) fn readlink(&self, req: &Request, op: op::Readlink<'_>) -> io::Result<()> {
        let core = self.fs.vfs.core();
        match self
            .fs
            .node(op.ino())
            .and_then(|n| core.node_readlink(&n).map_err(e))
        {
            Ok(t) => req.reply(t),
            Err(err) => req.reply_error(err),
        }
    }

    pub(super) fn symlink(&self, req: &Request, op: op::Symlink<'_>) -> io::Result<()> {
        let core = self.fs.vfs.core();
        self.entry(req, op.parent(), |d| {
            core.node_symlink(
                d,
                name_bytes(op.name()),
                name_bytes(op.link()),
                owner_of(req),
            )
        })
    }

    pub(super) fn mknod(&self, req: &Request, op: op::Mknod<'_>) -> io::Result<()> {
        let core = self.fs.vfs.core();
        self.entry(req, op.parent(), |d| {
            core.node_mknod(
                d,
                name_bytes(op.name()),
                op.mode(),
                op.rdev() as u64,
                owner_of(req),
            )
        })
    }

    pub(super) fn mkdir(&self, req: &Request, op: op::Mkdir<'_>) -> io::Result<()> {
        let core = self.fs.vfs.core();
        self.entry(req, op.parent(), |d| {
            core.node_mkdir(d, name_bytes(op.name()), op.mode(), owner_of(req))
        })
    }

    pub(super) fn unlink(&self, req: &Request, op: op::Unlink<'_>) -> io::Result<()> {
        let core = self.fs.vfs.core();
        self.unit(req, op.parent(), |d| {
            core.node_unlink(d, name_bytes(op.name()))
        })
    }

    pub(super) fn rmdir(&self, req: &Request, op: op::Rmdir<'_>) -> io::Result<()> {
        let core = self.fs.vfs.core();
        self.unit(req, op.parent(), |d| {
            core.node_rmdir(d, name_bytes(op.name()))
        })
    }

    pub(super) fn rename(&self, req: &Request, op: op::Rename<'_>) -> io::Result<()> {
        let fs = &self.fs;
        let core = fs.vfs.core();
        let r = fs.node(op.parent()).and_then(|d| {
            let nd = fs.node(op.newparent())?;
            core.node_rename(
                &d,
                name_bytes(op.name()),
                &nd,
                name_bytes(op.newname()),
                op.flags(),
                owner_of(req),
            )
            .map_err(e)
        });
        match r {
            Ok(()) => req.reply(()),
            Err(err) => req.reply_error(err),
        }
    }

    pub(super) fn link(&self, req: &Request, op: op::Link<'_>) -> io::Result<()> {
        let core = self.fs.vfs.core();
        match self.fs.node(op.ino()) {
            Ok(n) => self.entry(req, op.newparent(), |d| {
                core.node_link(&n, d, name_bytes(op.newname()))
            }),
            Err(err) => req.reply_error(err),
        }
    }

    pub(super) fn create(&self, req: &Request, op: op::Create<'_>) -> io::Result<()> {
        let fs = &self.fs;
        let flags = op.open_flags() as i32;
        let r = fs
            .node(op.parent())
            .and_then(|d| fs.create(&d, name_bytes(op.name()), op.mode(), flags, req));
        match r {
            Ok((node, file)) => {
                let fh = fs.files.insert(Handle::new(node.clone(), file));
                let mut o = OpenOut::default();
                o.fh(fh);
                let r = fs.reply_entry(req, node, Some(o));
                if r.is_err() {
                    fs.files.remove(fh); // no RELEASE will come
                }
                r
            }
            Err(err) => req.reply_error(err),
        }
    }

    pub(super) fn statfs(&self, req: &Request) -> io::Result<()> {
        let s = self.fs.vfs.statfs();
        let mut out = StatfsOut::default();
        let st = out.statfs();
        st.bsize(s.bsize as u32);
        st.frsize(s.frsize as u32);
        st.blocks(s.blocks);
        st.bfree(s.bfree);
        st.bavail(s.bavail);
        st.files(s.files);
        st.ffree(s.ffree);
        st.namelen(s.namelen as u32);
        req.reply(out)
    }

    pub(super) fn access(&self, req: &Request, op: op::Access<'_>) -> io::Result<()> {
        // Only sent without default_permissions (we always mount with it): check
        // with the caller's credentials for completeness.
        match self.fs.node(op.ino()) {
            Ok(n) => {
                let cred = caller_cred(req);
                let m = op.mask() as i32;
                let mut mask = 0;
                if m & libc::R_OK != 0 {
                    mask |= scalevfs_vfs::perm::MAY_READ;
                }
                if m & libc::W_OK != 0 {
                    mask |= scalevfs_vfs::perm::MAY_WRITE;
                }
                if m & libc::X_OK != 0 {
                    mask |= scalevfs_vfs::perm::MAY_EXEC;
                }
                match scalevfs_vfs::perm::permission(n.inode(), &cred, mask) {
                    Ok(()) => req.reply(()),
                    Err(err) => req.reply_error(e(err)),
                }
            }
            Err(err) => req.reply_error(err),
        }
    }
}
