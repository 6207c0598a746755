//! Attributes: `stat`, `statx`, `statfs`, `chmod`, `chown`, `utimes`, `access`, and
//! truncating a file by path.

use super::VfsCore;
use crate::abi::{Stat, Statx, Timespec};
use crate::inode::{now, Inode};
use crate::mount::Path;
use crate::namei::{Ctx, PathRef};
use crate::perm::{self, permission, MAY_EXEC, MAY_READ, MAY_WRITE};
use crate::{Errno, SysResult};

impl VfsCore {
    /// `stat`: the attributes of the inode at `p`, a counted ([`Path`]) or uncounted
    /// ([`PathRef`], `lookup_with`) path (no permission needed beyond the walk).
    pub fn stat<'a>(&self, p: impl Into<PathRef<'a>>) -> Stat {
        p.into()
            .dentry
            .inode()
            .map(|i| {
                i.fs().getattr(i);
                i.stat()
            })
            .unwrap_or_default()
    }

    /// `statx(2)` of `p` for the `STATX_*` fields in `want`, as Linux's tmpfs answers:
    /// the basic fields always (but mtime and ctime only if one of them is asked for: a
    /// file system with fine-grained timestamps, `fill_mg_cmtime`), the creation time if
    /// asked for, the mount id always, `STATX_ATTR_MOUNT_ROOT` on a mount's root.
    pub fn statx<'a>(&self, p: impl Into<PathRef<'a>>, want: u32) -> Statx {
        let p = p.into();
        let Some(i) = p.dentry.inode() else {
            return Statx::default();
        };
        i.fs().getattr(i);
        let st = i.stat();
        let mut mask = libc::STATX_BASIC_STATS | libc::STATX_MNT_ID;
        if want & (libc::STATX_MTIME | libc::STATX_CTIME) == 0 {
            mask &= !(libc::STATX_MTIME | libc::STATX_CTIME);
        }
        if want & libc::STATX_BTIME != 0 {
            mask |= libc::STATX_BTIME;
        }
        let mount_root = p.mnt.is_root(p.dentry);
        let major = |d: u64| libc::major(d);
        let minor = |d: u64| libc::minor(d);
        Statx {
            mask,
            blksize: st.blksize as u32,
            attributes: if mount_root {
                libc::STATX_ATTR_MOUNT_ROOT as u64
            } else {
                0
            },
            nlink: st.nlink as u32,
            uid: st.uid,
            gid: st.gid,
            mode: st.mode,
            ino: st.ino,
            size: st.size as u64,
            blocks: st.blocks as u64,
            // What Linux's tmpfs reports knowing: append, immutable, nodump (chattr),
            // automount, mount root, DAX.
            attributes_mask: (libc::STATX_ATTR_APPEND
                | libc::STATX_ATTR_IMMUTABLE
                | libc::STATX_ATTR_NODUMP
                | libc::STATX_ATTR_AUTOMOUNT
                | libc::STATX_ATTR_MOUNT_ROOT
                | libc::STATX_ATTR_DAX) as u64,
            atime: st.atime,
            btime: if mask & libc::STATX_BTIME != 0 {
                i.btime()
            } else {
                Timespec::default()
            },
            ctime: st.ctime,
            mtime: st.mtime,
            rdev_major: major(st.rdev),
            rdev_minor: minor(st.rdev),
            dev_major: major(st.dev),
            dev_minor: minor(st.dev),
            mnt_id: p.mnt.id,
        }
    }

    /// `statfs(2)` of the file system `p` is on.
    pub fn statfs(&self, p: &Path) -> crate::abi::Statfs {
        match p.dentry.inode() {
            Some(i) => {
                let mut s = i.fs().statfs(i.sb());
                if i.sb().is_read_only() {
                    s.flags |= libc::ST_RDONLY as i64;
                }
                s
            }
            None => crate::abi::Statfs::default(),
        }
    }

    /// `chmod`: sets the permission bits (owner or root; `EPERM` otherwise or if immutable
    /// or append-only). In `chmod_common`'s order: `EROFS`, the immutable and append-only
    /// `EPERM`, a symlink's `EOPNOTSUPP` (its mode never changes), then the owner's `EPERM`.
    pub fn chmod(&self, ctx: &Ctx<'_>, p: &Path, mode: u32) -> SysResult<()> {
        let inode = p.dentry.inode().ok_or(Errno::ENOENT)?;
        let _write = inode.sb().want_write()?;
        perm::may_setattr(inode)?;
        if inode.is_symlink() {
            return Err(Errno::EOPNOTSUPP);
        }
        if !ctx.cred.owns(inode) {
            return Err(Errno::EPERM);
        }
        let _w = inode.rwsem.write();
        let mut m = mode & 0o7777;
        if !ctx.cred.is_root() && !ctx.cred.in_group(inode.gid()) {
            m &= !libc::S_ISGID;
        }
        inode
            .fs()
            .setattr(inode, inode.file_type() | m, inode.uid(), inode.gid())?;
        inode.set_perm(m);
        inode.touch_c();
        Ok(())
    }

    /// `chown`: changes owner and group (`u32::MAX` keeps one), clearing set-id bits as Linux does.
    pub fn chown(&self, ctx: &Ctx<'_>, p: &Path, uid: u32, gid: u32) -> SysResult<()> {
        let inode = p.dentry.inode().ok_or(Errno::ENOENT)?;
        let _write = inode.sb().want_write()?;
        let cred = ctx.cred;
        perm::may_setattr(inode)?;
        let _w = inode.rwsem.write();
        if !cred.is_root() {
            // chown_ok / chgrp_ok: only the owner may change the group, to one of its groups;
            // the owner may "change" the uid only to itself.
            if uid != u32::MAX && !(cred.uid == inode.uid() && uid == inode.uid()) {
                return Err(Errno::EPERM);
            }
            if gid != u32::MAX
                && !(cred.uid == inode.uid() && (gid == inode.gid() || cred.in_group(gid)))
            {
                return Err(Errno::EPERM);
            }
        }
        let mode = inode.mode();
        let mut m = mode & 0o7777;
        if !inode.is_dir() {
            m &= !libc::S_ISUID;
            if mode & libc::S_ISGID != 0 && mode & libc::S_IXGRP != 0 {
                m &= !libc::S_ISGID;
            }
        }
        let new_uid = if uid != u32::MAX { uid } else { inode.uid() };
        let new_gid = if gid != u32::MAX { gid } else { inode.gid() };
        inode
            .fs()
            .setattr(inode, inode.file_type() | m, new_uid, new_gid)?;
        inode.set_uid(new_uid);
        inode.set_gid(new_gid);
        inode.set_perm(m);
        inode.touch_c();
        Ok(())
    }

    /// `utimensat` on a resolved path; `times == None` means both now.
    pub fn utimes(&self, ctx: &Ctx<'_>, p: &Path, times: Option<[Timespec; 2]>) -> SysResult<()> {
        let inode = p.dentry.inode().ok_or(Errno::ENOENT)?;
        let _write = inode.sb().want_write()?;
        // Only "set both to now" (NULL, or both UTIME_NOW) is allowed to a writer who is not
        // the owner; anything else (explicit times, or UTIME_OMIT for one) needs ownership.
        let explicit = times.is_some_and(|t| t.iter().any(|x| x.nsec != libc::UTIME_NOW));
        // notify_change: explicit times like a chmod; "now" like a write.
        if explicit {
            perm::may_setattr(inode)?;
        } else if inode.is_immutable() {
            return Err(Errno::EPERM);
        }
        if !ctx.cred.owns(inode) {
            if explicit {
                return Err(Errno::EPERM);
            }
            permission(inode, ctx.cred, MAY_WRITE)?;
        }
        let _w = inode.rwsem.write();
        let n = now();
        let t = times.unwrap_or([
            Timespec {
                sec: 0,
                nsec: libc::UTIME_NOW,
            },
            Timespec {
                sec: 0,
                nsec: libc::UTIME_NOW,
            },
        ]);
        for (i, ts) in t.iter().enumerate() {
            let v = match ts.nsec {
                libc::UTIME_OMIT => continue,
                libc::UTIME_NOW => n,
                // timestamp_truncate: a time at the file system's limit (tmpfs: the ends
                // of time64_t) loses its nanoseconds.
                _ if ts.sec == i64::MAX || ts.sec == i64::MIN => Timespec {
                    sec: ts.sec,
                    nsec: 0,
                },
                _ => *ts,
            };
            if i == 0 {
                inode.atime.set(v);
            } else {
                inode.set_mtime(v);
            }
        }
        inode.ctime.set(n);
        Ok(())
    }

    /// `access`: whether `ctx`'s credentials may access `p` with `mode` (`R_OK`/`W_OK`/`X_OK`).
    pub fn access<'a>(&self, ctx: &Ctx<'_>, p: impl Into<PathRef<'a>>, mode: i32) -> SysResult<()> {
        let inode = p.into().dentry.inode().ok_or(Errno::ENOENT)?;
        let mut mask = 0;
        if mode & libc::R_OK != 0 {
            mask |= MAY_READ;
        }
        if mode & libc::W_OK != 0 {
            mask |= MAY_WRITE;
        }
        if mode & libc::X_OK != 0 {
            mask |= MAY_EXEC;
        }
        if mask == 0 {
            return Ok(());
        }
        permission(inode, ctx.cred, mask)
    }

    /// `truncate(2)` on a resolved path.
    pub fn truncate_path(&self, ctx: &Ctx<'_>, p: &Path, len: i64) -> SysResult<()> {
        let inode = p.dentry.inode().ok_or(Errno::ENOENT)?;
        if inode.is_dir() {
            return Err(Errno::EISDIR);
        }
        if !inode.is_reg() {
            return Err(Errno::EINVAL);
        }
        let _write = inode.sb().want_write()?;
        permission(inode, ctx.cred, MAY_WRITE)?;
        perm::may_truncate(inode)?;
        self.do_truncate(ctx, inode, len, true)
    }

    pub(crate) fn do_truncate(
        &self,
        ctx: &Ctx<'_>,
        inode: &Inode,
        len: i64,
        always_touch: bool,
    ) -> SysResult<()> {
        if len < 0 {
            return Err(Errno::EINVAL);
        }
        if len as u64 > inode.fs().max_file_size() {
            return Err(Errno::EFBIG);
        }
        let _w = inode.rwsem.write();
        let old = inode.size();
        perm::kill_suid_on_write(inode, ctx.cred);
        inode.fs().setsize(inode, len as u64)?;
        if always_touch || old != len as u64 {
            inode.touch_mc();
        }
        Ok(())
    }
}
