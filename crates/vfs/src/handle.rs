//! Inode handles: the VFS driven by inode instead of by path, for a server (FUSE) whose
//! client names files by node id and whose kernel has already resolved paths and checked
//! permissions.
//!
//! A [`Node`] is a counted reference to a dentry, and through it to its inode (Linux's
//! `struct path` held by a NFS export handle): it keeps the inode alive without any path
//! lookup, across renames (the dentry moves with `d_move`) and after unlink (the dentry
//! is unhashed but still holds the inode, like an open file). Dropping the last `Node`
//! and the last open file of an unlinked inode frees it.
//!
//! Every operation here reuses the path-based operation's second half in [`VfsCore`]
//! (`create_locked`, `make_node`, `unlink_locked`, `rename_parents`, `open_existing`,
//! ...): the same locks (parent `rwsem` exclusively for namespace changes; the rename
//! mutex and both parents across directories; the inode `rwsem` for attributes) and the
//! same errno values, minus what the caller's kernel already did:
//! * **No permission checks** (`Cred::root()` for the checks), except in `node_open_as`
//!   (an open the kernel did not see) and the extended attribute operations (below): the
//!   FUSE kernel mounted with `default_permissions` checked with the caller's fsuid,
//!   fsgid, supplementary groups and capabilities, which a FUSE request does not carry
//!   (it has the fsuid, fsgid and pid only). It also computed the set-id
//!   bit changes of `chmod`/`chown`/`write`/`truncate` (the server does not set
//!   `FUSE_HANDLE_KILLPRIV`, so the kernel sends them as explicit mode changes) and applied
//!   the umask and `mode_strip_sgid` to new files' modes.
//! * **The inode flags are checked** all the same, by the path-based calls' own checks
//!   (`perm::permission`, `may_create`, `may_delete`, `may_setattr`, `may_truncate`, run
//!   with root's credentials, which pass everything else): the FUSE kernel does not know
//!   an inode is immutable or append-only, so it cannot have checked them. An immutable
//!   inode is not opened for writing, truncated, linked, removed or renamed, nor its
//!   mode, owner or times changed; an immutable directory gets no new names and loses
//!   none; an append-only file is opened for writing only with `O_APPEND` and is never
//!   truncated, removed or renamed (`EPERM` for all).
//! * **Ownership of new files** is the creator's ([`Owner`]: the request's uid/gid), and a
//!   setgid directory passes its group on (and its setgid bit to subdirectories), as
//!   `inode_init_owner` does.
//! * **Extended attributes** (`node_setxattr` and friends) run [`crate::xattr`]'s checks
//!   with the caller's credentials. The kernel made them already (`xattr_permission` and
//!   the capability checks run before a FUSE file system is asked), so they normally
//!   pass; but the kernel passes a FUSE `listxattr` answer through as is, so hiding
//!   `trusted.*` from a caller who is not root is ours to do, and running every check with
//!   the same credentials keeps the four operations consistent.

use crate::abi::{Stat, Timespec};
use crate::file::{FileRef, OpenFile};
use crate::inode::Inode;
use crate::mount::Path;
use crate::namei::{Ctx, Last, LastKind, NAME_MAX};
use crate::perm::{self, Cred};
use crate::xattr;
use crate::{Errno, SysResult, VfsCore};

/// The credentials the kernel-checked operations run with: every check passes.
static CHECKED: Cred = Cred {
    uid: 0,
    gid: 0,
    groups: Vec::new(),
};

/// A counted reference that keeps an inode alive without a path (see the module docs).
#[derive(Clone)]
pub struct Node {
    path: Path,
}

impl Node {
    /// The inode (a node always has one: only positive dentries become nodes).
    pub fn inode(&self) -> &Inode {
        self.path
            .dentry
            .inode()
            .expect("a node's dentry is positive for its whole life")
    }
    /// The inode number (`st_ino`).
    pub fn ino(&self) -> u64 {
        self.inode().ino
    }
    /// Inode numbers are never reused by our file systems while an inode lives (tmpfs
    /// numbers come from a 64-bit counter), so one generation suffices.
    pub fn generation(&self) -> u64 {
        0
    }
    /// Whether this is the root of its file system.
    pub fn is_root(&self) -> bool {
        self.path.dentry.is_root()
    }
    /// Whether the node is a directory.
    pub fn is_dir(&self) -> bool {
        self.inode().is_dir()
    }
    /// `stat` (after the file system refreshed the inode, as `getattr` does).
    pub fn stat(&self) -> Stat {
        let i = self.inode();
        i.fs().getattr(i);
        i.stat()
    }
    /// The location this node was reached by (its dentry may be unlinked since).
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// The creator of a new file: the FUSE request's uid and gid.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Owner {
    /// Owner of the new inode.
    pub uid: u32,
    /// Group of the new inode (unless the directory is set-group-ID).
    pub gid: u32,
}

impl Owner {
    fn cred(self) -> Cred {
        Cred {
            uid: self.uid,
            gid: self.gid,
            groups: Vec::new(),
        }
    }
}

/// A time to set: now, or a given time.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum SetTime {
    /// The current time (`UTIME_NOW`).
    Now,
    /// This time.
    At(Timespec),
}

/// The attributes a `setattr` changes (`None`: unchanged).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct SetAttr {
    /// Permission bits and set-id bits (`07777`); the type bits are ignored.
    pub mode: Option<u32>,
    /// New owner.
    pub uid: Option<u32>,
    /// New group.
    pub gid: Option<u32>,
    /// New size (truncate or extend).
    pub size: Option<u64>,
    /// New access time.
    pub atime: Option<SetTime>,
    /// New modification time.
    pub mtime: Option<SetTime>,
    /// The size change comes through an open file (`ftruncate`; FUSE's `FATTR_FH`): an
    /// append-only file refuses it, as `ftruncate` does. Otherwise it is `truncate(2)`'s
    /// (or `open(O_TRUNC)`'s, which FUSE sends without a file): immutable files refuse it
    /// too.
    pub by_file: bool,
}

/// Rejects names the kernel never sends as a single component.
fn check_name(name: &[u8]) -> SysResult<()> {
    if name.is_empty() || name.contains(&b'/') {
        return Err(Errno::EINVAL);
    }
    if name.len() > NAME_MAX {
        return Err(Errno::ENAMETOOLONG);
    }
    Ok(())
}

fn last(name: &[u8]) -> SysResult<Last> {
    check_name(name)?;
    Ok(Last {
        name: name.to_vec(),
        kind: match name {
            b"." => LastKind::Dot,
            b".." => LastKind::DotDot,
            _ => LastKind::Norm,
        },
        slash: false,
    })
}

/// A name to create or remove: `.` and `..` exist (`EEXIST` to create them).
fn entry_name(name: &[u8], dot: Errno) -> SysResult<()> {
    check_name(name)?;
    if name == b"." || name == b".." {
        return Err(dot);
    }
    Ok(())
}

impl VfsCore {
    fn checked_ctx<'a>(&self, at: &'a Node) -> Ctx<'a> {
        Ctx::new(&CHECKED, &at.path)
    }

    /// The root directory's node.
    pub fn root_node(&self) -> Node {
        Node { path: self.root() }
    }

    /// `name` in the directory `dir` (no permission check), crossing mount points.
    /// `ENOENT` if it does not exist, `ENOTDIR` if `dir` is not a directory.
    pub fn node_lookup(&self, dir: &Node, name: &[u8]) -> SysResult<Node> {
        check_name(name)?;
        if !dir.is_dir() {
            return Err(Errno::ENOTDIR);
        }
        let path = match name {
            b"." => dir.path.clone(),
            b".." => {
                let parent = dir.path.dentry.parent().unwrap_or(dir.path.dentry.clone());
                Path {
                    mnt: dir.path.mnt,
                    dentry: parent,
                }
            }
            _ => {
                let d = self.lookup_one(&dir.path, name, false)?;
                if d.is_negative() {
                    return Err(Errno::ENOENT);
                }
                self.cross_mounts(Path {
                    mnt: dir.path.mnt,
                    dentry: d,
                })
            }
        };
        Ok(Node { path })
    }

    fn make(
        &self,
        dir: &Node,
        name: &[u8],
        f: impl FnOnce(&Path, &Inode, &crate::dentry::DentryRef, &[u8]) -> SysResult<()>,
    ) -> SysResult<Node> {
        entry_name(name, Errno::EEXIST)?;
        if !dir.is_dir() {
            return Err(Errno::ENOTDIR);
        }
        self.create_locked(&dir.path, name, |dirp, inode, d, name| {
            let _write = inode.sb().want_write()?;
            // may_create without the permission check: no new entries in a removed
            // (ENOENT) or an immutable (EPERM) directory.
            perm::may_create(inode, &CHECKED)?;
            f(dirp, inode, d, name)?;
            Ok(Node {
                path: Path {
                    mnt: dirp.mnt,
                    dentry: d.clone(),
                },
            })
        })
    }

    /// `mknod`: a regular file, FIFO, socket, or device node for `rdev` (`mode` includes
    /// the type; the kernel applied the umask and checked `CAP_MKNOD` for devices).
    pub fn node_mknod(
        &self,
        dir: &Node,
        name: &[u8],
        mode: u32,
        rdev: u64,
        owner: Owner,
    ) -> SysResult<Node> {
        let ty = match mode & libc::S_IFMT {
            0 => libc::S_IFREG,
            t
            @ (libc::S_IFREG | libc::S_IFIFO | libc::S_IFSOCK | libc::S_IFCHR | libc::S_IFBLK) => t,
            _ => return Err(Errno::EINVAL),
        };
        let cred = owner.cred();
        self.make(dir, name, |dirp, inode, d, name| {
            let mode = ty | (mode & 0o7777);
            if ty == libc::S_IFCHR || ty == libc::S_IFBLK {
                self.make_device(&cred, dirp, inode, d, name, (mode, rdev))
            } else {
                self.make_node(&cred, dirp, inode, d, name, mode)
            }
            .map(|_| ())
        })
    }

    /// `mkdir` (the kernel applied the umask).
    pub fn node_mkdir(&self, dir: &Node, name: &[u8], mode: u32, owner: Owner) -> SysResult<Node> {
        let cred = owner.cred();
        self.make(dir, name, |dirp, inode, d, name| {
            self.make_node(&cred, dirp, inode, d, name, libc::S_IFDIR | (mode & 0o1777))
                .map(|_| ())
        })
    }

    /// `symlink(target, dir/name)`.
    pub fn node_symlink(
        &self,
        dir: &Node,
        name: &[u8],
        target: &[u8],
        owner: Owner,
    ) -> SysResult<Node> {
        let cred = owner.cred();
        self.make(dir, name, |dirp, inode, d, name| {
            self.make_symlink(&cred, target, dirp, inode, d, name)
                .map(|_| ())
        })
    }

    /// `link(node, dir/name)`: `EXDEV` across mounts, `EPERM` for a directory, `ENOENT`
    /// for an inode with no links left.
    pub fn node_link(&self, node: &Node, dir: &Node, name: &[u8]) -> SysResult<Node> {
        if node.path.mnt != dir.path.mnt {
            return Err(Errno::EXDEV);
        }
        let inode = node.path.dentry.inode_ref().ok_or(Errno::ENOENT)?;
        self.make(dir, name, |dirp, di, d, name| {
            self.link_locked(&inode, dirp, di, d, name)
        })
    }

    /// `open(O_CREAT | O_EXCL)` of a new regular file: the node and its open file
    /// description (`flags` without the creation flags).
    pub fn node_create(
        &self,
        dir: &Node,
        name: &[u8],
        mode: u32,
        flags: i32,
        owner: Owner,
    ) -> SysResult<(Node, FileRef)> {
        let node = self.node_mknod(dir, name, libc::S_IFREG | (mode & 0o7777), 0, owner)?;
        let f = self.node_open(&node, flags)?;
        Ok((node, f))
    }

    /// `open(dir, O_TMPFILE | flags, mode)` for a server whose kernel checked the
    /// directory (`vfs_tmpfile`: write and search permission, umask, setgid stripping):
    /// an unnamed regular file owned by `owner` (or a setgid directory's group), its
    /// node (an unhashed dentry of its own, as Linux's) and an open file description.
    /// Without `O_EXCL` a later `node_link` may name it.
    pub fn node_tmpfile(
        &self,
        dir: &Node,
        mode: u32,
        flags: i32,
        owner: Owner,
    ) -> SysResult<(Node, FileRef)> {
        let dinode = dir.inode();
        if !dinode.is_dir() {
            return Err(Errno::ENOTDIR);
        }
        let write = dinode.sb().want_write()?;
        perm::may_create(dinode, &CHECKED)?;
        let cred = owner.cred();
        let (gid, _) = self.new_owner(dinode, &cred, false);
        let inode = dinode
            .fs()
            .tmpfile(dinode, libc::S_IFREG | (mode & 0o7777), cred.uid, gid)?;
        if flags & libc::O_EXCL == 0 {
            inode.set_flag(crate::inode::I_LINKABLE, true);
        }
        let private = inode.fs().open(&inode, flags)?;
        let path = Path {
            mnt: dir.path.mnt,
            dentry: self.dcache.alloc_root(inode),
        };
        // The file's own write access (it is open for writing) takes over the call's.
        let file = OpenFile::writer(path.clone(), flags, private, write.keep());
        Ok((Node { path }, file))
    }

    /// `unlink(dir/name)`: `EISDIR` for a directory.
    pub fn node_unlink(&self, dir: &Node, name: &[u8]) -> SysResult<()> {
        entry_name(name, Errno::EISDIR)?;
        let _write = dir.inode().sb().want_write()?;
        self.unlink_locked(&self.checked_ctx(dir), &dir.path, name, false, false)
    }

    /// `rmdir(dir/name)`: `ENOTDIR`, `ENOTEMPTY`, `EBUSY` for a mount point; `.` is
    /// `EINVAL` and `..` `ENOTEMPTY`, as Linux.
    pub fn node_rmdir(&self, dir: &Node, name: &[u8]) -> SysResult<()> {
        match name {
            b"." => return Err(Errno::EINVAL),
            b".." => return Err(Errno::ENOTEMPTY),
            _ => check_name(name)?,
        }
        let _write = dir.inode().sb().want_write()?;
        self.unlink_locked(&self.checked_ctx(dir), &dir.path, name, true, false)
    }

    /// `renameat2(dir/name, newdir/newname, flags)` with `RENAME_NOREPLACE`,
    /// `RENAME_EXCHANGE` or `RENAME_WHITEOUT` (whose whiteout `owner` creates; invalid
    /// combinations: `EINVAL`).
    pub fn node_rename(
        &self,
        dir: &Node,
        name: &[u8],
        newdir: &Node,
        newname: &[u8],
        flags: u32,
        owner: Owner,
    ) -> SysResult<()> {
        crate::core::check_rename_flags(flags)?;
        let (o, n) = (last(name)?, last(newname)?);
        self.rename_parents(
            &self.checked_ctx(dir),
            &dir.path,
            &o,
            &newdir.path,
            &n,
            flags,
            &owner.cred(),
        )
    }

    /// The target of a symlink (`EINVAL` for anything else).
    pub fn node_readlink(&self, node: &Node) -> SysResult<Vec<u8>> {
        let inode = node.inode();
        if !inode.is_symlink() {
            return Err(Errno::EINVAL);
        }
        let t = inode.fs().readlink(inode)?;
        inode.touch_atime();
        Ok(t)
    }

    /// `setattr`: size (`truncate`, or `ftruncate` with [`SetAttr::by_file`]), owner,
    /// mode, times, in that order, each as the matching system call does it, inode flag
    /// checks included (ctime updated; `SetTime::Now` is `UTIME_NOW`).
    pub fn node_setattr(&self, node: &Node, a: &SetAttr) -> SysResult<()> {
        let ctx = self.checked_ctx(node);
        if (SetAttr {
            by_file: false,
            ..*a
        }) == SetAttr::default()
        {
            // The kernel sends `chown(f, -1, -1)` as a setattr with nothing to set (it
            // sends FUSE no ctime without the writeback cache); Linux's chown still
            // changes ctime (`notify_change` with `ATTR_CTIME`), and so does ours.
            return self.chown(&ctx, &node.path, u32::MAX, u32::MAX);
        }
        let inode = node.inode();
        if let Some(size) = a.size {
            if inode.is_dir() {
                return Err(Errno::EISDIR);
            }
            if !inode.is_reg() {
                return Err(Errno::EINVAL);
            }
            let len = i64::try_from(size).map_err(|_| Errno::EFBIG)?;
            // vfs_truncate: the mount after EISDIR/EINVAL (a descriptor open for
            // writing cannot exist on a read-only mount).
            let _write = inode.sb().want_write()?;
            if a.by_file {
                perm::may_ftruncate(inode)?;
            } else {
                perm::may_truncate(inode)?;
            }
            self.do_truncate(&ctx, inode, len, true)?;
        }
        if a.uid.is_some() || a.gid.is_some() {
            self.chown(
                &ctx,
                &node.path,
                a.uid.unwrap_or(u32::MAX),
                a.gid.unwrap_or(u32::MAX),
            )?;
        }
        if let Some(mode) = a.mode {
            self.chmod(&ctx, &node.path, mode)?;
        }
        if a.atime.is_some() || a.mtime.is_some() {
            let t = |s: Option<SetTime>| match s {
                None => Timespec {
                    sec: 0,
                    nsec: libc::UTIME_OMIT,
                },
                Some(SetTime::Now) => Timespec {
                    sec: 0,
                    nsec: libc::UTIME_NOW,
                },
                Some(SetTime::At(t)) => t,
            };
            let times = [t(a.atime), t(a.mtime)];
            for ts in &times {
                let special = ts.nsec == libc::UTIME_NOW || ts.nsec == libc::UTIME_OMIT;
                if !special && !(0..1_000_000_000).contains(&ts.nsec) {
                    return Err(Errno::EINVAL);
                }
            }
            self.utimes(&ctx, &node.path, Some(times))?;
        }
        Ok(())
    }

    /// An open file description of `node` without a descriptor (`open(2)`'s checks on
    /// flags and type, no permission check). `O_CREAT`, `O_EXCL`, `O_NOCTTY` and
    /// `O_TRUNC` are ignored (the kernel sends truncation as a `setattr`).
    pub fn node_open(&self, node: &Node, flags: i32) -> SysResult<FileRef> {
        let flags = flags & !(libc::O_CREAT | libc::O_EXCL | libc::O_NOCTTY | libc::O_TRUNC);
        self.open_existing(&self.checked_ctx(node), node.path.clone(), flags)
    }

    /// `open(2)` of an existing `node` as `cred`, for a server whose kernel did *not*
    /// check this open: `may_open`'s type and permission checks with `cred`, `O_NOATIME`
    /// for the owner only, and `O_TRUNC` honoured (write permission, set-id bits killed).
    /// `O_CREAT`, `O_EXCL` and `O_NOCTTY` are ignored. The caller must not pass a FIFO
    /// unless it may block in its open.
    pub fn node_open_as(&self, node: &Node, flags: i32, cred: &Cred) -> SysResult<FileRef> {
        let flags = flags & !(libc::O_CREAT | libc::O_EXCL | libc::O_NOCTTY);
        let ctx = Ctx::new(cred, &node.path);
        self.open_existing(&ctx, node.path.clone(), flags)
    }

    /// `setxattr(node, name, value, flags)` as `cred`: the system call's argument checks
    /// (flags `EINVAL`, name `ERANGE`, value `E2BIG`), then [`xattr::set`]
    /// (`XATTR_CREATE`: `EEXIST`; `XATTR_REPLACE`: `ENODATA`).
    pub fn node_setxattr(
        &self,
        node: &Node,
        cred: &Cred,
        name: &[u8],
        value: &[u8],
        flags: i32,
    ) -> SysResult<()> {
        xattr::check_set_args(name, value.len(), flags)?;
        xattr::set(node.inode(), cred, name, value, flags)
    }

    /// `getxattr(node, name)` as `cred` into `buf`: the value's length; an empty `buf` asks
    /// for the length only, a `buf` too small is `ERANGE` ([`xattr::get`]).
    pub fn node_getxattr(
        &self,
        node: &Node,
        cred: &Cred,
        name: &[u8],
        buf: &mut [u8],
    ) -> SysResult<usize> {
        xattr::check_name(name)?;
        xattr::get(node.inode(), cred, name, buf)
    }

    /// `listxattr(node)` as `cred` into `buf`: the names, each NUL-terminated, `trusted.*`
    /// only if `cred` is root; an empty `buf` asks for the length ([`xattr::list`]).
    pub fn node_listxattr(&self, node: &Node, cred: &Cred, buf: &mut [u8]) -> SysResult<usize> {
        xattr::list(node.inode(), cred, buf)
    }

    /// `removexattr(node, name)` as `cred` (`ENODATA` if it has no such attribute).
    pub fn node_removexattr(&self, node: &Node, cred: &Cred, name: &[u8]) -> SysResult<()> {
        xattr::check_name(name)?;
        xattr::remove(node.inode(), cred, name)
    }

    /// `pread` on an open file description.
    pub fn file_read_at(&self, f: &OpenFile, buf: &mut [u8], off: i64) -> SysResult<usize> {
        self.pread(f, buf, off)
    }

    /// `pwrite` on an open file description (appends if it was opened `O_APPEND`, as
    /// Linux's `pwrite`).
    pub fn file_write_at(&self, f: &OpenFile, buf: &[u8], off: i64) -> SysResult<usize> {
        let ctx = Ctx::new(&CHECKED, f.path());
        self.pwrite(&ctx, f, buf, off)
    }

    /// `copy_file_range` between two open file descriptions at explicit offsets (the
    /// caller updates its offsets by the count); see [`VfsCore::copy_file_range`].
    pub fn file_copy_range(
        &self,
        fin: &OpenFile,
        off_in: i64,
        fout: &OpenFile,
        off_out: i64,
        len: usize,
    ) -> SysResult<usize> {
        let ctx = Ctx::new(&CHECKED, fout.path());
        self.copy_file_range(&ctx, fin, off_in, fout, off_out, len)
    }
}
