//! Requests on names and inodes: LOOKUP and FORGET, GETATTR and SETATTR, READLINK, the
//! requests that make and remove names (SYMLINK, MKNOD, MKDIR, UNLINK, RMDIR, RENAME,
//! LINK, CREATE, TMPFILE), STATFS and ACCESS.

use std::io;

use scalevfs::frontend::{Node, Owner, SetAttr, SetTime};
use scalevfs_vfs::{Cred, Errno, FileRef, Timespec};

use super::{caller_cred, e, owner_of, Dispatcher, Fs, Res};
use crate::proto::abi::{self, fattr};
use crate::proto::{Forgets, Request};
use crate::tables::Handle;

impl Fs {
    /// `FUSE_HANDLE_KILLPRIV_V2`: the kernel asks us to clear the set-id bits after a
    /// write or truncate by a caller without `CAP_FSETID`, and after a chown: setuid, and
    /// setgid if the file is group-executable (`should_remove_suid`).
    pub(super) fn kill_suidgid(&self, node: &Node) {
        let inode = node.inode();
        let mode = inode.mode();
        if !inode.is_reg() {
            return;
        }
        let mut kill = mode & libc::S_ISUID;
        if mode & libc::S_IXGRP != 0 {
            kill |= mode & libc::S_ISGID;
        }
        if kill != 0 {
            let a = SetAttr {
                mode: Some(mode & 0o7777 & !kill),
                ..SetAttr::default()
            };
            // Fails only for what no regular file is (a symlink's mode).
            let _ = self.vfs.core().node_setattr(node, &a);
        }
    }

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
        req: &Request<'_>,
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

/// A SETATTR time: `None` if not set, `Now` with `FATTR_*_NOW`.
fn set_time(valid: u32, set: u32, now: u32, sec: u64, nsec: u32) -> Option<SetTime> {
    if valid & set == 0 {
        None
    } else if valid & now != 0 {
        Some(SetTime::Now)
    } else {
        Some(SetTime::At(Timespec {
            // The kernel's u64 is a signed time64 (see `fuse_time`).
            sec: sec as i64,
            nsec: nsec as i64,
        }))
    }
}

impl Dispatcher {
    pub(super) fn lookup(&self, req: &Request<'_>, name: &[u8]) -> io::Result<()> {
        let fs = &self.fs;
        let core = fs.vfs.core();
        match fs
            .node(req.nodeid())
            .and_then(|d| core.node_lookup(&d, name).map_err(e))
        {
            Ok(n) => fs.reply_entry(req, n, None),
            Err(err) => req.reply_error(err),
        }
    }

    pub(super) fn forget(&self, forgets: Forgets<'_>) -> io::Result<()> {
        for f in forgets.iter() {
            self.fs.nodes.forget(f.nodeid, f.nlookup);
        }
        Ok(()) // forget has no reply
    }

    pub(super) fn getattr(&self, req: &Request<'_>) -> io::Result<()> {
        match self.fs.node(req.nodeid()) {
            Ok(n) => self.fs.reply_attr(req, &n),
            Err(err) => req.reply_error(err),
        }
    }

    pub(super) fn setattr(&self, req: &Request<'_>, op: &abi::SetattrIn) -> io::Result<()> {
        let fs = &self.fs;
        let core = fs.vfs.core();
        let v = op.valid;
        let a = SetAttr {
            mode: (v & fattr::MODE != 0).then_some(op.mode & 0o7777),
            uid: (v & fattr::UID != 0).then_some(op.uid),
            gid: (v & fattr::GID != 0).then_some(op.gid),
            size: (v & fattr::SIZE != 0).then_some(op.size),
            atime: set_time(v, fattr::ATIME, fattr::ATIME_NOW, op.atime, op.atimensec),
            mtime: set_time(v, fattr::MTIME, fattr::MTIME_NOW, op.mtime, op.mtimensec),
            // ftruncate sends its file; truncate(2) and open(O_TRUNC) do not.
            by_file: v & fattr::FH != 0,
        };
        let kill = v & fattr::KILL_SUIDGID != 0 && a.mode.is_none();
        match fs
            .node(req.nodeid())
            .and_then(|n| core.node_setattr(&n, &a).map_err(e).map(|_| n))
        {
            Ok(n) => {
                if kill {
                    fs.kill_suidgid(&n);
                }
                fs.reply_attr(req, &n)
            }
            Err(err) => req.reply_error(err),
        }
    }

    pub(super) fn readlink(&self, req: &Request<'_>) -> io::Result<()> {
        let core = self.fs.vfs.core();
        match self
            .fs
            .node(req.nodeid())
            .and_then(|n| core.node_readlink(&n).map_err(e))
        {
            Ok(t) => req.reply(&t[..]),
            Err(err) => req.reply_error(err),
        }
    }

    pub(super) fn symlink(&self, req: &Request<'_>, name: &[u8], target: &[u8]) -> io::Result<()> {
        let core = self.fs.vfs.core();
        self.entry(req, req.nodeid(), |d| {
            core.node_symlink(d, name, target, owner_of(req))
        })
    }

    pub(super) fn mknod(
        &self,
        req: &Request<'_>,
        op: &abi::MknodIn,
        name: &[u8],
    ) -> io::Result<()> {
        let core = self.fs.vfs.core();
        self.entry(req, req.nodeid(), |d| {
            core.node_mknod(d, name, op.mode, op.rdev as u64, owner_of(req))
        })
    }

    pub(super) fn mkdir(
        &self,
        req: &Request<'_>,
        op: &abi::MkdirIn,
        name: &[u8],
    ) -> io::Result<()> {
        let core = self.fs.vfs.core();
        self.entry(req, req.nodeid(), |d| {
            core.node_mkdir(d, name, op.mode, owner_of(req))
        })
    }

    pub(super) fn unlink(&self, req: &Request<'_>, name: &[u8]) -> io::Result<()> {
        let core = self.fs.vfs.core();
        self.unit(req, req.nodeid(), |d| core.node_unlink(d, name))
    }

    pub(super) fn rmdir(&self, req: &Request<'_>, name: &[u8]) -> io::Result<()> {
        let core = self.fs.vfs.core();
        self.unit(req, req.nodeid(), |d| core.node_rmdir(d, name))
    }

    pub(super) fn rename(
        &self,
        req: &Request<'_>,
        name: &[u8],
        newdir: u64,
        newname: &[u8],
        flags: u32,
    ) -> io::Result<()> {
        let fs = &self.fs;
        let core = fs.vfs.core();
        let r = fs.node(req.nodeid()).and_then(|d| {
            let nd = fs.node(newdir)?;
            core.node_rename(&d, name, &nd, newname, flags, owner_of(req))
                .map_err(e)
        });
        match r {
            Ok(()) => req.reply_empty(),
            Err(err) => req.reply_error(err),
        }
    }

    pub(super) fn link(&self, req: &Request<'_>, oldnodeid: u64, newname: &[u8]) -> io::Result<()> {
        let core = self.fs.vfs.core();
        match self.fs.node(oldnodeid) {
            Ok(n) => self.entry(req, req.nodeid(), |d| core.node_link(&n, d, newname)),
            Err(err) => req.reply_error(err),
        }
    }

    pub(super) fn create(
        &self,
        req: &Request<'_>,
        op: &abi::CreateIn,
        name: &[u8],
    ) -> io::Result<()> {
        let fs = &self.fs;
        let flags = op.flags as i32;
        let r = fs
            .node(req.nodeid())
            .and_then(|d| fs.create(&d, name, op.mode, flags, req));
        self.reply_created(req, r)
    }

    /// TMPFILE (`open(dir, O_TMPFILE)`): an unnamed file, answered as CREATE is. The
    /// kernel checked the directory and applied the umask and setgid rules.
    pub(super) fn tmpfile(&self, req: &Request<'_>, op: &abi::CreateIn) -> io::Result<()> {
        let fs = &self.fs;
        let core = fs.vfs.core();
        let r = fs.node(req.nodeid()).and_then(|d| {
            core.node_tmpfile(&d, op.mode, op.flags as i32, owner_of(req))
                .map_err(e)
        });
        self.reply_created(req, r)
    }

    /// Answers a CREATE or TMPFILE: the entry and a new handle on the open file.
    fn reply_created(&self, req: &Request<'_>, r: Res<(Node, FileRef)>) -> io::Result<()> {
        let fs = &self.fs;
        match r {
            Ok((node, file)) => {
                let fh = fs.files.insert(Handle::new(node.clone(), file));
                let o = abi::OpenOut {
                    fh,
                    ..Default::default()
                };
                let r = fs.reply_entry(req, node, Some(o));
                if r.is_err() {
                    fs.files.remove(fh); // no RELEASE will come
                }
                r
            }
            Err(err) => req.reply_error(err),
        }
    }

    pub(super) fn statfs(&self, req: &Request<'_>) -> io::Result<()> {
        let s = self.fs.vfs.statfs();
        let out = abi::Kstatfs {
            // statfs(2)'s fields are i64; the FUSE ABI's are u32 (tmpfs: 4096 and 255).
            bsize: s.bsize as u32,
            frsize: s.frsize as u32,
            blocks: s.blocks,
            bfree: s.bfree,
            bavail: s.bavail,
            files: s.files,
            ffree: s.ffree,
            namelen: s.namelen as u32,
            ..Default::default()
        };
        req.reply(&out)
    }

    pub(super) fn access(&self, req: &Request<'_>, op: &abi::AccessIn) -> io::Result<()> {
        // Only sent without default_permissions (we always mount with it): check
        // with the caller's credentials for completeness.
        match self.fs.node(req.nodeid()) {
            Ok(n) => {
                let cred = caller_cred(req);
                let m = op.mask as i32;
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
                    Ok(()) => req.reply_empty(),
                    Err(err) => req.reply_error(e(err)),
                }
            }
            Err(err) => req.reply_error(err),
        }
    }
}
