//! `open`: the walk to the last component, `O_CREAT` (with `O_EXCL`), `O_TRUNC` and the
//! other flags, and opening a resolved path (`open_existing`).

use super::VfsCore;
use crate::file::{FileRef, OpenFile};
use crate::inode::{Inode, I_LINKABLE};
use crate::mount::Path;
use crate::namei::{check_path, Ctx, LastKind};
use crate::perm::{self, permission, Cred, MAY_EXEC, MAY_READ, MAY_WRITE};
use crate::{Errno, SysResult};

impl VfsCore {
    /// `openat` after the caller resolved `dirfd` to `start`.
    pub fn open(
        &self,
        ctx: &Ctx<'_>,
        start: &Path,
        path: &[u8],
        mut flags: i32,
        mode: u32,
        umask: u32,
    ) -> SysResult<FileRef> {
        // build_open_how: O_PATH drops every other flag first; then build_open_flags
        // validates __O_TMPFILE (with O_DIRECTORY, without O_CREAT, writable).
        if flags & libc::O_PATH != 0 {
            flags &= libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC;
        }
        if flags & O_TMPFILE_ONLY != 0 {
            let tmpfile_mask = libc::O_TMPFILE | libc::O_CREAT;
            if flags & tmpfile_mask != libc::O_TMPFILE || flags & libc::O_ACCMODE == 0 {
                return Err(Errno::EINVAL);
            }
            return self.open_tmpfile(ctx, start, path, flags, mode & 0o7777 & !umask);
        }
        if flags & libc::O_CREAT != 0 && flags & libc::O_DIRECTORY != 0 {
            return Err(Errno::EINVAL);
        }
        let follow = flags & libc::O_NOFOLLOW == 0;
        if flags & libc::O_CREAT == 0 {
            let p = self.lookup(ctx, start, path, follow, flags & libc::O_DIRECTORY != 0)?;
            return self.open_existing(ctx, p, flags);
        }
        check_path(path)?;
        let mut links = 0;
        let (mut dirp, mut last) = self.lookup_parent_counting(ctx, start, path, &mut links)?;
        loop {
            if last.kind != LastKind::Norm {
                // ".", ".." or "/": resolved, then do_open's checks: EEXIST, else EISDIR.
                let _ = self.lookup_last(ctx, dirp, &last, true, false, &mut links)?;
                return Err(if flags & libc::O_EXCL != 0 {
                    Errno::EEXIST
                } else {
                    Errno::EISDIR
                });
            }
            if last.slash {
                return Err(Errno::EISDIR);
            }
            let dir = dirp.dentry.inode().ok_or(Errno::ENOENT)?;
            // A cached positive answer is taken without the directory lock, unless the file
            // system no longer stands by it (d_revalidate; `lookup_one` below drops it).
            let cached = self.dcache.lookup(&dirp.dentry, &last.name).filter(|d| {
                !d.is_negative()
                    && flags & libc::O_EXCL == 0
                    && Self::still_valid(dir, &last.name, d)
            });
            let d = match cached {
                Some(d) => d,
                None => {
                    let _w = self.lock_names(&dirp.dentry, dir, (&last.name, None));
                    let d = self.lookup_one(&dirp, &last.name, true)?;
                    if d.is_negative() {
                        // lookup_open: only a name that does not exist gives EROFS.
                        let _write = dir.sb().want_write()?;
                        perm::may_create(dir, ctx.cred)?;
                        let (gid, _) = self.new_owner(dir, ctx.cred, false);
                        let m = self.strip_sgid(
                            dir,
                            ctx.cred,
                            libc::S_IFREG | (mode & 0o7777 & !umask),
                        );
                        let inode = dir.fs().create(dir, &last.name, m, ctx.cred.uid, gid)?;
                        let private = inode.fs().open(&inode, flags)?;
                        self.dcache.instantiate(&d, &dirp.dentry, inode);
                        drop(_w);
                        let path = Path {
                            mnt: dirp.mnt,
                            dentry: d,
                        };
                        let flags = flags & !libc::O_TRUNC;
                        // Opened for writing: the file keeps the create's write access.
                        return Ok(if open_for_write(flags) {
                            OpenFile::writer(path, flags, private, _write.keep())
                        } else {
                            OpenFile::with_private(path, flags, private)
                        });
                    }
                    d
                }
            };
            if flags & libc::O_EXCL != 0 {
                return Err(Errno::EEXIST);
            }
            let p = self.cross_mounts_checked(
                ctx,
                Path {
                    mnt: dirp.mnt,
                    dentry: d,
                },
            )?;
            if p.dentry.inode().is_some_and(|i| i.is_symlink()) {
                if !follow {
                    return Err(Errno::ELOOP);
                }
                let target = self.link_target(ctx, &p, &mut links)?;
                let (np, nl) = self.link_path_walk(ctx, dirp, &target, &mut links)?;
                dirp = np;
                last = nl;
                continue;
            }
            if p.dentry.inode().is_some_and(|i| i.is_dir()) {
                return Err(Errno::EISDIR);
            }
            return self.open_existing(ctx, p, flags);
        }
    }

    /// `O_TMPFILE` (`do_tmpfile`, `vfs_tmpfile`): an unnamed regular file in the directory
    /// `path` names, which must be writable and searchable. Without `O_EXCL` `linkat`
    /// may name it later ([`I_LINKABLE`]). `mode` has the umask applied.
    fn open_tmpfile(
        &self,
        ctx: &Ctx<'_>,
        start: &Path,
        path: &[u8],
        flags: i32,
        mode: u32,
    ) -> SysResult<FileRef> {
        let dirp = self.lookup(ctx, start, path, flags & libc::O_NOFOLLOW == 0, true)?;
        let dir = dirp.dentry.inode().ok_or(Errno::ENOENT)?;
        let write = dir.sb().want_write()?;
        permission(dir, ctx.cred, MAY_WRITE | MAY_EXEC)?;
        let (gid, _) = self.new_owner(dir, ctx.cred, false);
        let m = self.strip_sgid(dir, ctx.cred, libc::S_IFREG | mode);
        let inode = dir.fs().tmpfile(dir, m, ctx.cred.uid, gid)?;
        if flags & libc::O_EXCL == 0 {
            inode.set_flag(I_LINKABLE, true);
        }
        let private = inode.fs().open(&inode, flags)?;
        // Linux's file has an unhashed dentry below the directory; no walk can reach it,
        // so an unhashed dentry of its own serves.
        let dentry = self.dcache.alloc_root(inode);
        // Always open for writing (`O_TMPFILE` needs it): the file keeps the write access.
        Ok(OpenFile::writer(
            Path {
                mnt: dirp.mnt,
                dentry,
            },
            flags,
            private,
            write.keep(),
        ))
    }

    /// The group and mode adjustment of a new inode in `dir` (setgid directories pass their
    /// group on, and their setgid bit to subdirectories).
    /// `mode_strip_sgid`: a new group-executable setgid file in a setgid directory whose
    /// group the creator is not in loses its setgid bit (unless root).
    fn strip_sgid(&self, dir: &Inode, cred: &Cred, mode: u32) -> u32 {
        let sg = libc::S_ISGID | libc::S_IXGRP;
        if mode & sg == sg
            && dir.mode() & libc::S_ISGID != 0
            && !cred.in_group(dir.gid())
            && !cred.is_root()
        {
            mode & !libc::S_ISGID
        } else {
            mode
        }
    }

    pub(crate) fn new_owner(&self, dir: &Inode, cred: &Cred, is_dir: bool) -> (u32, u32) {
        if dir.mode() & libc::S_ISGID != 0 {
            (dir.gid(), if is_dir { libc::S_ISGID } else { 0 })
        } else {
            (cred.gid, 0)
        }
    }

    pub(crate) fn open_existing(&self, ctx: &Ctx<'_>, p: Path, flags: i32) -> SysResult<FileRef> {
        let inode = p.dentry.inode().ok_or(Errno::ENOENT)?;
        if flags & libc::O_PATH != 0 {
            return Ok(OpenFile::new(p, flags));
        }
        if inode.is_symlink() {
            return Err(Errno::ELOOP);
        }
        if flags & libc::O_DIRECTORY != 0 && !inode.is_dir() {
            return Err(Errno::ENOTDIR);
        }
        let acc = flags & libc::O_ACCMODE;
        let mut mask = 0;
        if acc != libc::O_WRONLY {
            mask |= MAY_READ;
        }
        if acc != libc::O_RDONLY || flags & libc::O_TRUNC != 0 {
            mask |= MAY_WRITE;
        }
        // do_open: a regular file to truncate wants a writable mount before `may_open`
        // (whose permission check gives EROFS for any other write).
        let mut truncate_access = if flags & libc::O_TRUNC != 0 && inode.is_reg() {
            Some(inode.sb().want_write()?)
        } else {
            None
        };
        if inode.is_dir() && mask & MAY_WRITE != 0 {
            return Err(Errno::EISDIR);
        }
        permission(inode, ctx.cred, mask)?;
        // may_open: an append-only file is written only by appending, never truncated.
        if inode.is_append()
            && (acc != libc::O_RDONLY && flags & libc::O_APPEND == 0 || flags & libc::O_TRUNC != 0)
        {
            return Err(Errno::EPERM);
        }
        if flags & libc::O_NOATIME != 0 && !ctx.cred.owns(inode) {
            return Err(Errno::EPERM);
        }
        // A device node: no driver stands behind any device number here, so its open is
        // that of a device whose driver is missing (`chrdev_open`/`blkdev_open`: ENXIO).
        // A socket's inode cannot be opened either (`no_open`).
        let ty = inode.file_type();
        if ty == libc::S_IFCHR || ty == libc::S_IFBLK || ty == libc::S_IFSOCK {
            return Err(Errno::ENXIO);
        }
        // do_dentry_open: only tmpfs regular files have FMODE_CAN_ODIRECT.
        if flags & libc::O_DIRECT != 0 && !inode.is_reg() {
            return Err(Errno::EINVAL);
        }
        // do_dentry_open: a regular file opened for writing holds a write access for its
        // life (`file_get_write_access`; special files do not). The permission check gave
        // EROFS already, unless a remount read-only came in between.
        let file_access = if open_for_write(flags) && inode.is_reg() {
            Some(
                match truncate_access.take() {
                    Some(w) => w,
                    None => inode.sb().want_write()?,
                }
                .keep(),
            )
        } else {
            None
        };
        let private = inode.fs().open(inode, flags)?;
        let release = |private: Option<Box<dyn std::any::Any + Send + Sync>>| {
            if let Some(pv) = private {
                inode.fs().release(inode, pv);
            }
        };
        if flags & libc::O_TRUNC != 0 && inode.is_reg() {
            let _w = inode.rwsem.write();
            perm::kill_suid_on_write(inode, ctx.cred);
            if let Err(e) = inode.fs().setsize(inode, 0) {
                release(private);
                return Err(e);
            }
            inode.touch_mc();
        }
        // An `O_RDONLY | O_TRUNC` open held the access for the truncation only.
        drop(truncate_access);
        Ok(match file_access {
            Some(w) => OpenFile::writer(p, flags, private, w),
            None => OpenFile::with_private(p, flags, private),
        })
    }
}

/// Whether an open with `flags` is for writing (`FMODE_WRITE`; `O_ACCMODE` 3 is neither).
fn open_for_write(flags: i32) -> bool {
    matches!(flags & libc::O_ACCMODE, libc::O_WRONLY | libc::O_RDWR)
}

/// `__O_TMPFILE` alone (`O_TMPFILE` includes `O_DIRECTORY`).
const O_TMPFILE_ONLY: i32 = libc::O_TMPFILE & !libc::O_DIRECTORY;
