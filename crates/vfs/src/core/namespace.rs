//! Namespace operations: creating names (`mkdir`, `mknod`, `symlink`, `link`), removing
//! them (`unlink`/`rmdir`), `rename` (with `RENAME_EXCHANGE`/`RENAME_NOREPLACE`), and
//! `readlink`.

use super::dirlock::DirLock;
use super::VfsCore;
use crate::dentry::DentryRef;
use crate::inode::{Inode, I_LINKABLE};
use crate::mount::Path;
use crate::namei::{Ctx, LastKind};
use crate::perm::{self, permission, Cred, MAY_WRITE};
use crate::{Errno, SysResult};
use scalevfs_primitives::Locking;

impl VfsCore {
    /// Resolves the parent of a name to create and runs `f` with the parent's `rwsem` held
    /// and the (negative) dentry (`filename_create`). `is_dir`: a trailing slash is allowed.
    fn with_create<R>(
        &self,
        ctx: &Ctx<'_>,
        start: &Path,
        path: &[u8],
        is_dir: bool,
        check_create: bool,
        f: impl FnOnce(&Path, &Inode, &DentryRef, &[u8]) -> SysResult<R>,
    ) -> SysResult<R> {
        let (dirp, last) = self.lookup_parent(ctx, start, path)?;
        if last.kind != LastKind::Norm {
            return Err(Errno::EEXIST);
        }
        self.create_locked(&dirp, &last.name, |dirp, dir, d, name| {
            if last.slash && !is_dir {
                return Err(Errno::ENOENT);
            }
            // filename_create: EEXIST and the trailing slash's ENOENT come first.
            let _write = dir.sb().want_write()?;
            if check_create {
                perm::may_create(dir, ctx.cred)?;
            }
            f(dirp, dir, d, name)
        })
    }

    /// The part of `filename_create` after the walk: locks the parent for a change of
    /// `name` (`dirlock`), looks `name` up (`EEXIST` if it exists) and runs `f` on the
    /// negative dentry, locks held.
    pub(crate) fn create_locked<R>(
        &self,
        dirp: &Path,
        name: &[u8],
        f: impl FnOnce(&Path, &Inode, &DentryRef, &[u8]) -> SysResult<R>,
    ) -> SysResult<R> {
        let dir = dirp.dentry.inode().ok_or(Errno::ENOENT)?;
        let _w = self.lock_names(&dirp.dentry, dir, (name, None));
        let d = self.lookup_one(dirp, name, true)?;
        if !d.is_negative() {
            return Err(Errno::EEXIST);
        }
        f(dirp, dir, &d, name)
    }

    /// `mkdir`: makes directory `path` (relative to `start`) with `mode & !umask`.
    pub fn mkdir(
        &self,
        ctx: &Ctx<'_>,
        start: &Path,
        path: &[u8],
        mode: u32,
        umask: u32,
    ) -> SysResult<()> {
        self.with_create(ctx, start, path, true, true, |dirp, dir, d, name| {
            self.make_node(
                ctx.cred,
                dirp,
                dir,
                d,
                name,
                libc::S_IFDIR | (mode & 0o1777 & !umask),
            )
            .map(|_| ())
        })
    }

    /// `mknodat` (the caller checked the type: regular, FIFO, socket, character or block
    /// device): as `vfs_mknod`, `may_create` first, then CAP_MKNOD (root) for devices;
    /// `umask` applies. `dev` is recorded only for devices.
    pub fn mknod(
        &self,
        ctx: &Ctx<'_>,
        start: &Path,
        path: &[u8],
        mode: u32,
        dev: u64,
        umask: u32,
    ) -> SysResult<()> {
        let ty = match mode & libc::S_IFMT {
            0 => libc::S_IFREG,
            t => t,
        };
        self.with_create(ctx, start, path, false, true, |dirp, dir, d, name| {
            let perm = mode & 0o7777 & !umask;
            if ty != libc::S_IFCHR && ty != libc::S_IFBLK {
                return self
                    .make_node(ctx.cred, dirp, dir, d, name, ty | perm)
                    .map(|_| ());
            }
            if !ctx.cred.is_root() {
                return Err(Errno::EPERM);
            }
            self.make_device(ctx.cred, dirp, dir, d, name, (ty | perm, dev))
                .map(|_| ())
        })
    }

    /// Creates a device node (`mode` includes the type) for device `rdev`, owned by
    /// `cred`, on the negative dentry `d` (the caller checked the privilege).
    pub(crate) fn make_device(
        &self,
        cred: &Cred,
        dirp: &Path,
        dir: &Inode,
        d: &DentryRef,
        name: &[u8],
        (mode, rdev): (u32, u64),
    ) -> SysResult<crate::inode::InodeRef> {
        let (gid, extra) = self.new_owner(dir, cred, false);
        let inode = dir
            .fs()
            .mknod_device(dir, name, mode | extra, rdev, cred.uid, gid)?;
        self.dcache.instantiate(d, &dirp.dentry, inode.clone());
        Ok(inode)
    }

    /// Creates the inode of a new file, directory or special file (`mode` includes the
    /// type) owned by `cred` (or the setgid directory's group) on the negative dentry `d`.
    pub(crate) fn make_node(
        &self,
        cred: &Cred,
        dirp: &Path,
        dir: &Inode,
        d: &DentryRef,
        name: &[u8],
        mode: u32,
    ) -> SysResult<crate::inode::InodeRef> {
        let (gid, extra) = self.new_owner(dir, cred, mode & libc::S_IFMT == libc::S_IFDIR);
        let inode = dir.fs().create(dir, name, mode | extra, cred.uid, gid)?;
        self.dcache.instantiate(d, &dirp.dentry, inode.clone());
        Ok(inode)
    }

    /// Creates a symlink owned by `cred` on the negative dentry `d`.
    pub(crate) fn make_symlink(
        &self,
        cred: &Cred,
        target: &[u8],
        dirp: &Path,
        dir: &Inode,
        d: &DentryRef,
        name: &[u8],
    ) -> SysResult<crate::inode::InodeRef> {
        if target.len() >= crate::namei::PATH_MAX {
            return Err(Errno::ENAMETOOLONG);
        }
        if target.is_empty() {
            return Err(Errno::ENOENT);
        }
        let (gid, _) = self.new_owner(dir, cred, false);
        let inode = dir.fs().symlink(dir, name, target, cred.uid, gid)?;
        self.dcache.instantiate(d, &dirp.dentry, inode.clone());
        Ok(inode)
    }

    /// `symlink`: makes `path` a symbolic link to `target`.
    pub fn symlink(
        &self,
        ctx: &Ctx<'_>,
        target: &[u8],
        start: &Path,
        path: &[u8],
    ) -> SysResult<()> {
        if target.len() >= crate::namei::PATH_MAX {
            return Err(Errno::ENAMETOOLONG);
        }
        if target.is_empty() {
            return Err(Errno::ENOENT);
        }
        self.with_create(ctx, start, path, false, true, |dirp, dir, d, name| {
            self.make_symlink(ctx.cred, target, dirp, dir, d, name)
                .map(|_| ())
        })
    }

    /// `linkat` after resolving the old path to `old`.
    pub fn link(&self, ctx: &Ctx<'_>, old: &Path, start: &Path, path: &[u8]) -> SysResult<()> {
        let inode_ref = old.dentry.inode_ref().ok_or(Errno::ENOENT)?;
        self.with_create(ctx, start, path, false, false, |dirp, dir, d, name| {
            // do_linkat's order: EXDEV, may_linkat, then vfs_link's may_create and EPERM.
            if dirp.mnt != old.mnt {
                return Err(Errno::EXDEV);
            }
            perm::may_link(&inode_ref, ctx.cred)?;
            perm::may_create(dir, ctx.cred)?;
            self.link_locked(&inode_ref, dirp, dir, d, name)
        })
    }

    /// `vfs_link` after the permission checks: links `inode` as the negative dentry `d`.
    pub(crate) fn link_locked(
        &self,
        inode: &crate::inode::InodeRef,
        dirp: &Path,
        dir: &Inode,
        d: &DentryRef,
        name: &[u8],
    ) -> SysResult<()> {
        if inode.is_append() || inode.is_immutable() || inode.is_dir() {
            return Err(Errno::EPERM);
        }
        let _i = inode.rwsem.write();
        // An unlinked file cannot be linked again, except an O_TMPFILE one (I_LINKABLE,
        // which the first link clears).
        if inode.nlink() == 0 && !inode.has_flag(I_LINKABLE) {
            return Err(Errno::ENOENT);
        }
        dir.fs().link(dir, name, inode)?;
        inode.set_flag(I_LINKABLE, false);
        self.dcache.instantiate(d, &dirp.dentry, inode.clone());
        Ok(())
    }

    /// `unlinkat` (`rmdir` with `AT_REMOVEDIR`).
    pub fn unlink(&self, ctx: &Ctx<'_>, start: &Path, path: &[u8], rmdir: bool) -> SysResult<()> {
        let (dirp, last) = self.lookup_parent(ctx, start, path)?;
        match (last.kind, rmdir) {
            (LastKind::Norm, _) => {}
            (_, false) => return Err(Errno::EISDIR),
            (LastKind::DotDot, true) => return Err(Errno::ENOTEMPTY),
            (LastKind::Dot, true) => return Err(Errno::EINVAL),
            (LastKind::Root, true) => return Err(Errno::EBUSY),
        }
        // Before the name is looked up: EROFS comes before ENOENT.
        let _write = dirp
            .dentry
            .inode()
            .ok_or(Errno::ENOENT)?
            .sb()
            .want_write()?;
        self.unlink_locked(ctx, &dirp, &last.name, rmdir, last.slash)
    }

    /// `do_unlinkat`/`do_rmdir` after the walk: `name` in the directory `dirp`; `slash`:
    /// the path had a trailing slash.
    pub(crate) fn unlink_locked(
        &self,
        ctx: &Ctx<'_>,
        dirp: &Path,
        name: &[u8],
        rmdir: bool,
        slash: bool,
    ) -> SysResult<()> {
        let dir = dirp.dentry.inode().ok_or(Errno::ENOENT)?;
        let mut exclusive = false;
        loop {
            // The parent shared with the name's lock where the file system allows it,
            // rmdir included (the victim directory's own state is guarded by holding the
            // victim exclusively); on a retry, exclusively.
            let parent = if exclusive {
                DirLock::Exclusive(self.lock_dir(dir))
            } else {
                self.lock_names(&dirp.dentry, dir, (name, None))
            };
            let d = self.lookup_one(dirp, name, true)?;
            let Some(victim) = d.inode() else {
                return Err(Errno::ENOENT);
            };
            if !rmdir && slash {
                return Err(if victim.is_dir() {
                    Errno::EISDIR
                } else {
                    Errno::ENOTDIR
                });
            }
            perm::may_delete(dir, victim, rmdir, ctx.cred)?;
            {
                // A directory victim is held exclusively, so no shared change runs in
                // it, and no mount is made on it meanwhile (`mount` holds the mountpoint
                // so too). Under the parent's shared side only *tried*: a rename holding
                // both directories' `rwsem`s waits for the parent's shared holders to
                // drain (`dirlock` module docs), so waiting for the victim here could
                // close a cycle; on failure, everything is let go and taken again with
                // the parent exclusive, parent before child as Linux locks.
                let _v = match (&parent, victim.is_dir()) {
                    (_, false) => DirLock::Plain(victim.rwsem.write()),
                    (DirLock::Shared(_), true) => match self.try_lock_dir(victim) {
                        Some(v) => DirLock::Exclusive(v),
                        None => {
                            exclusive = true;
                            continue;
                        }
                    },
                    (_, true) => DirLock::Exclusive(self.lock_dir(victim)),
                };
                if d.is_mounted() {
                    return Err(Errno::EBUSY);
                }
                if rmdir {
                    dir.fs().rmdir(dir, name, victim)?;
                } else {
                    dir.fs().unlink(dir, name, victim)?;
                }
            }
            self.dcache.drop_dentry(&d);
            return Ok(());
        }
    }

    /// `renameat2`.
    pub fn rename(
        &self,
        ctx: &Ctx<'_>,
        ostart: &Path,
        opath: &[u8],
        nstart: &Path,
        npath: &[u8],
        flags: u32,
    ) -> SysResult<()> {
        check_rename_flags(flags)?;
        let (odp, olast) = self.lookup_parent(ctx, ostart, opath)?;
        let (ndp, nlast) = self.lookup_parent(ctx, nstart, npath)?;
        self.rename_parents(ctx, &odp, &olast, &ndp, &nlast, flags, ctx.cred)
    }

    /// `renameat2` after both walks: `olast` in `odp` to `nlast` in `ndp`; `creator` owns
    /// a `RENAME_WHITEOUT`'s whiteout.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn rename_parents(
        &self,
        ctx: &Ctx<'_>,
        odp: &Path,
        olast: &crate::namei::Last,
        ndp: &Path,
        nlast: &crate::namei::Last,
        flags: u32,
        creator: &Cred,
    ) -> SysResult<()> {
        let noreplace = flags & libc::RENAME_NOREPLACE != 0;
        if odp.mnt != ndp.mnt {
            return Err(Errno::EXDEV);
        }
        if olast.kind != LastKind::Norm {
            return Err(Errno::EBUSY);
        }
        if nlast.kind != LastKind::Norm {
            return Err(if noreplace {
                Errno::EEXIST
            } else {
                Errno::EBUSY
            });
        }
        let odir = odp.dentry.inode().ok_or(Errno::ENOENT)?;
        // One mount (checked above), before either name is looked up.
        let _write = odir.sb().want_write()?;
        let ndir = ndp.dentry.inode().ok_or(Errno::ENOENT)?;
        let same = odp.dentry == ndp.dentry;
        let rename = RenameArgs {
            ctx,
            odp,
            olast,
            ndp,
            nlast,
            flags,
            creator,
        };
        if same && self.shares_names(odir) && !self.cached_dir(odp, &[&olast.name, &nlast.name]) {
            // Non-directories within one directory: shared, with both names locked
            // (`dirlock`); a directory found after all goes to the exclusive path below.
            let _l = self.lock_names(&odp.dentry, odir, (&olast.name, Some(&nlast.name)));
            if let Renamed::Done = self.rename_locked(&rename, false)? {
                return Ok(());
            }
        }
        let exchange = flags & libc::RENAME_EXCHANGE != 0;
        let mut exclusive_only = same
            || self.locking != Locking::Scalable
            || self.cached_dir(odp, &[&olast.name])
            || exchange && self.cached_dir(ndp, &[&nlast.name]);
        if !exclusive_only {
            // Non-directories across directories, first with both parents shared and
            // both names locked (`dirlock`, "Renames across directories"); a directory
            // found on either side goes to the locked path below.
            let old = (&*odp.dentry, odir, &olast.name[..]);
            if let Some(_l) = self.lock_names_across(old, (&ndp.dentry, ndir, &nlast.name)) {
                match self.rename_locked(&rename, false)? {
                    Renamed::Done => return Ok(()),
                    Renamed::MovesDir => exclusive_only = true,
                }
            }
        }
        if !exclusive_only {
            // Then exclusively but still without the rename mutex, which only a rename
            // that moves a directory needs (it keeps the ancestry stable): both parents
            // by address, the second only tried, so this cannot deadlock with a rename
            // that holds the mutex and locks an ancestor before its descendant.
            let (a, b) = if (odir as *const Inode) < (ndir as *const Inode) {
                (odir, ndir)
            } else {
                (ndir, odir)
            };
            let _la = a.rwsem.write();
            if let Some(_lb) = b.rwsem.try_write() {
                // The namespace locks after both `rwsem`s: a shared change waits for no
                // directory lock while it holds one (a rename across directories only
                // tries its second), so waiting for them to drain cannot deadlock
                // (`dirlock`).
                let _na = a.ns_lock().map(|l| l.write_lock());
                let _nb = b.ns_lock().map(|l| l.write_lock());
                if let Renamed::Done = self.rename_locked(&rename, false)? {
                    return Ok(());
                }
            }
        }
        let sb = odir.sb();
        let _rm = (!same).then(|| sb.rename_mutex.lock());
        // lock_rename: an ancestor before its descendant (unlink and rmdir lock parent before
        // child, so the other order could deadlock with them), unrelated directories by
        // address; the rename mutex keeps the ancestry stable while we decide.
        let old_first = if same || is_ancestor(&odp.dentry, &ndp.dentry) {
            true
        } else if is_ancestor(&ndp.dentry, &odp.dentry) {
            false
        } else {
            (odir as *const Inode) < (ndir as *const Inode)
        };
        let (_l1, _l2) = if same {
            (self.lock_dir(odir), None)
        } else if old_first {
            let a = self.lock_dir(odir);
            (a, Some(self.lock_dir(ndir)))
        } else {
            let b = self.lock_dir(ndir);
            (b, Some(self.lock_dir(odir)))
        };
        self.rename_locked(&rename, true).map(|_| ())
    }

    /// Is one of `names` in `dir` cached as a directory? A hint (no lock, no count) that
    /// sends a directory rename straight to the locked path. One pin for all the names.
    fn cached_dir(&self, dir: &Path, names: &[&[u8]]) -> bool {
        let g = scalevfs_primitives::epoch::pin();
        names.iter().any(|name| {
            self.dcache
                .lookup_rcu(&dir.dentry, name, &g)
                // SAFETY: found in the dcache while pinned.
                .is_some_and(|d| unsafe { &*d }.inode().is_some_and(|i| i.is_dir()))
        })
    }

    /// The rename with both parents held (exclusively, and across directories with the
    /// rename mutex, if `may_move_dir`; else across directories both exclusively without
    /// the mutex, or within one directory shared with both names). `MovesDir` (nothing
    /// done): a directory is on one side and the caller's locks do not cover that.
    fn rename_locked(&self, r: &RenameArgs<'_>, may_move_dir: bool) -> SysResult<Renamed> {
        let (ctx, odp, olast, ndp, nlast) = (r.ctx, r.odp, r.olast, r.ndp, r.nlast);
        let (flags, creator) = (r.flags, r.creator);
        let exchange = flags & libc::RENAME_EXCHANGE != 0;
        let noreplace = flags & libc::RENAME_NOREPLACE != 0;
        let odir = odp.dentry.inode().ok_or(Errno::ENOENT)?;
        let ndir = ndp.dentry.inode().ok_or(Errno::ENOENT)?;
        let same = odp.dentry == ndp.dentry;
        let od = self.lookup_one(odp, &olast.name, true)?;
        let Some(src) = od.inode() else {
            return Err(Errno::ENOENT);
        };
        let nd = self.lookup_one(ndp, &nlast.name, true)?;
        let tgt = nd.inode();
        // A rename that moves or replaces a directory changes the ancestry that path
        // walks and d_path read: it needs the rename mutex (across directories) and writes
        // the rename sequence. One of two non-directories touches neither (module docs).
        let moves_dir = src.is_dir() || tgt.is_some_and(|t| t.is_dir());
        if moves_dir && !may_move_dir {
            return Ok(Renamed::MovesDir);
        }
        if noreplace && tgt.is_some() {
            return Err(Errno::EEXIST);
        }
        if exchange && tgt.is_none() {
            return Err(Errno::ENOENT);
        }
        if !src.is_dir() && (olast.slash || nlast.slash) && !exchange {
            return Err(Errno::ENOTDIR);
        }
        if exchange
            && (olast.slash && !src.is_dir() || nlast.slash && !tgt.is_some_and(|t| t.is_dir()))
        {
            return Err(Errno::ENOTDIR);
        }
        // Loops: the source may not be an ancestor of the new parent, nor the target one of
        // the old parent (the rename mutex keeps ancestry stable while we check). Only a
        // directory is anyone's ancestor: without one there is nothing to walk (the walk
        // would count every ancestor's dentry, `/` included).
        if !same && moves_dir {
            if is_ancestor(&od, &ndp.dentry) {
                return Err(Errno::EINVAL);
            }
            if tgt.is_some() && is_ancestor(&nd, &odp.dentry) {
                return Err(if exchange {
                    Errno::EINVAL
                } else {
                    Errno::ENOTEMPTY
                });
            }
        }
        if let Some(t) = tgt {
            if std::ptr::eq(t, src) {
                return Ok(Renamed::Done);
            }
        }
        perm::may_delete(odir, src, src.is_dir(), ctx.cred)?;
        match tgt {
            None => perm::may_create(ndir, ctx.cred)?,
            Some(t) => {
                let isdir = if exchange { t.is_dir() } else { src.is_dir() };
                perm::may_delete(ndir, t, isdir, ctx.cred)?;
            }
        }
        if !same {
            if src.is_dir() {
                permission(src, ctx.cred, MAY_WRITE)?;
            }
            if let Some(t) = tgt {
                if exchange && t.is_dir() {
                    permission(t, ctx.cred, MAY_WRITE)?;
                }
            }
        }
        // A directory about to be replaced is held exclusively, as `rmdir` holds its
        // victim: no shared change (a create, a rename of a file into it) runs in it
        // between the file system's emptiness check and its death, and no mount is made
        // on it. After both parents, child after parent (Linux's `vfs_rename` locks it
        // too). Only reachable with `may_move_dir`.
        let _victim = tgt
            .filter(|t| t.is_dir() && !exchange)
            .map(|t| self.lock_dir(t));
        if od.is_mounted() || nd.is_mounted() {
            return Err(Errno::EBUSY);
        }
        if flags & libc::RENAME_WHITEOUT != 0 {
            // The whiteout is a new inode in the old directory: its owner is the caller,
            // its group the directory's if that is setgid (inode_init_owner).
            let (gid, _) = self.new_owner(odir, creator, false);
            let owner = (creator.uid, gid);
            odir.fs()
                .rename_whiteout(odir, &olast.name, ndir, &nlast.name, owner)?;
        } else {
            odir.fs()
                .rename(odir, &olast.name, ndir, &nlast.name, flags)?;
        }
        let _w =
            (moves_dir || self.locking == Locking::Legacy).then(|| self.dcache.rename_lock.write());
        self.dcache
            .d_move(&od, &ndp.dentry, &nlast.name, Some(&nd), exchange);
        Ok(Renamed::Done)
    }

    /// `readlink`: copies the target of the symlink at `p` into `buf` (truncated, no NUL).
    pub fn readlink(&self, p: &Path, buf: &mut [u8]) -> SysResult<usize> {
        let inode = p.dentry.inode().ok_or(Errno::ENOENT)?;
        if !inode.is_symlink() {
            return Err(Errno::EINVAL);
        }
        let t = inode.fs().readlink(inode)?;
        inode.touch_atime();
        let n = t.len().min(buf.len());
        buf[..n].copy_from_slice(&t[..n]);
        Ok(n)
    }
}

/// A rename's arguments after both walks (see [`VfsCore::rename_parents`]).
#[derive(Clone, Copy)]
struct RenameArgs<'a> {
    ctx: &'a Ctx<'a>,
    odp: &'a Path,
    olast: &'a crate::namei::Last,
    ndp: &'a Path,
    nlast: &'a crate::namei::Last,
    flags: u32,
    creator: &'a Cred,
}

/// What [`VfsCore::rename_locked`] did.
enum Renamed {
    Done,
    /// Nothing: a directory is involved, retry holding the rename mutex.
    MovesDir,
}

/// `renameat2`'s flags: `EINVAL` for unknown bits and for `RENAME_EXCHANGE` with
/// `RENAME_NOREPLACE` (`RENAME_WHITEOUT` is not provided: unknown here).
pub fn check_rename_flags(flags: u32) -> SysResult<()> {
    let all = libc::RENAME_EXCHANGE | libc::RENAME_NOREPLACE | libc::RENAME_WHITEOUT;
    let exchange = flags & libc::RENAME_EXCHANGE != 0;
    let other = flags & (libc::RENAME_NOREPLACE | libc::RENAME_WHITEOUT) != 0;
    if flags & !all != 0 || (exchange && other) {
        return Err(Errno::EINVAL);
    }
    Ok(())
}

/// Is `a` an ancestor of (or equal to) `d`? Call with the rename mutex held.
fn is_ancestor(a: &DentryRef, d: &DentryRef) -> bool {
    let mut cur = Some(d.clone());
    let mut n = 0;
    while let Some(c) = cur {
        if c == *a {
            return true;
        }
        n += 1;
        if n > 1 << 16 {
            return false;
        }
        cur = c.parent();
    }
    false
}
