//! Path resolution (Linux's `fs/namei.c`).
//!
//! ## rcu-walk
//! [`VfsCore::lookup`] first tries a walk that takes no lock and writes no shared memory
//! until it has found the final dentry: it pins the epoch, samples the rename sequence,
//! follows `(parent id, name)` hash lookups from dentry to dentry, checks search permission
//! from the inodes' atomic mode bits, crosses mounts through the lock-free mount table, and
//! only then takes a reference on the final dentry (`get_not_dead`), and re-checks the
//! rename sequence. It is correct because, besides renames that move or replace a directory
//! (which bump the sequence) and renames of non-directories (which only the final component
//! can see, through immutable hash nodes: `dentry`'s module docs), the dcache only changes
//! monotonically: a negative dentry becomes positive once, and an
//! unhashed dentry is never rehashed except by rename. A dentry found in the hash while
//! pinned stays allocated until the walk unpins; the final `get_not_dead` fails on a dentry
//! killed meanwhile. Anything unusual (a cache miss, `..`, a symlink to follow, a
//! permission failure, a race) falls back to the ref-walk, which computes the answer and
//! the errno the slow, exact way.
//!
//! ## ref-walk
//! Component by component with counted references, looking misses up in the file system
//! under the directory's `rwsem` (shared) and caching the result, positive or negative.
//! Symlinks are followed up to 40 times in total (`ELOOP`), `..` stops at the process root
//! and climbs out of mounts, trailing slashes require a directory.

use crate::core::VfsCore;
use crate::dentry::{Dentry, DentryRef};
use crate::mount::{MntRef, Path};
use crate::perm::{permission, Cred, MAY_EXEC};
use crate::{Errno, SysResult};
use scalevfs_primitives::seqlock::SeqCount;
use std::cell::Cell;

/// `PATH_MAX`: a path of this many bytes or more is `ENAMETOOLONG`.
pub const PATH_MAX: usize = 4096;
/// `NAME_MAX`.
pub const NAME_MAX: usize = 255;
/// `MAXSYMLINKS`.
pub const MAX_LINKS: u32 = 40;

/// Who resolves, and from which root.
pub struct Ctx<'a> {
    /// Whose permissions the walk checks.
    pub cred: &'a Cred,
    /// The process root, or (`RESOLVE_BENEATH`/`RESOLVE_IN_ROOT`) the directory the walk
    /// is confined to.
    pub root: &'a Path,
    /// `openat2`'s `RESOLVE_*` bits (0 for every other call). See [`Resolve`].
    pub resolve: u64,
    /// A scoped walk's sample of the rename sequence, taken by [`VfsCore::scoped`] when
    /// the walk began and checked by `follow_dotdot` after every `..`.
    scope_seq: Cell<Option<SeqCount>>,
    /// Whether this walk has "set its root", as Linux's `nd->root` is set: by an absolute
    /// path, a `..` or a scoped start. Under `RESOLVE_NO_XDEV` a symlink's jump to the root
    /// before that is `EXDEV`, even to the same mount (see [`VfsCore::jump_root`]). Cleared
    /// where each walk begins (`lookup`, `lookup_parent_counting`).
    root_set: Cell<bool>,
}

impl<'a> Ctx<'a> {
    /// An ordinary walk (no `RESOLVE_*` restriction).
    pub fn new(cred: &'a Cred, root: &'a Path) -> Ctx<'a> {
        Ctx {
            cred,
            root,
            resolve: 0,
            scope_seq: Cell::new(None),
            root_set: Cell::new(false),
        }
    }
    fn has(&self, bit: u64) -> bool {
        self.resolve & bit != 0
    }
}

/// A resolved path without a count on its dentry ([`VfsCore::lookup_with`]).
#[derive(Clone, Copy)]
pub struct PathRef<'a> {
    /// The mount the path is in.
    pub mnt: MntRef,
    /// The final dentry, uncounted: valid while the walk that found it is pinned.
    pub dentry: &'a Dentry,
}

impl<'a> From<&'a Path> for PathRef<'a> {
    fn from(p: &'a Path) -> PathRef<'a> {
        PathRef {
            mnt: p.mnt,
            dentry: &p.dentry,
        }
    }
}

/// `openat2`'s resolution flags, as `Ctx::resolve` carries them (Linux's values):
///
/// * `NO_XDEV`: crossing a mount, either way, or a symlink's jump to a root on another
///   mount, is `EXDEV`; so is such a jump before the walk set its root (an absolute path,
///   a `..`), as on Linux;
/// * `NO_MAGICLINKS`: no effect (there are no `/proc` magic links);
/// * `NO_SYMLINKS`: following any symlink is `ELOOP`;
/// * `BENEATH`: `root` is the starting directory; an absolute path or symlink, or `..`
///   out of it, is `EXDEV`;
/// * `IN_ROOT`: `root` is the starting directory, as if the process had `chroot`ed there
///   (absolute paths and symlinks start at it, `..` stays in it);
/// * `CACHED`: only what rcu-walk can answer from the caches; anything else is `EAGAIN`.
///
/// A scoped walk (`BENEATH`, `IN_ROOT`) that takes `..` (in the path or in a symlink's
/// target) after a rename ran is `EAGAIN` at that `..`, as on Linux: the rename may have
/// moved the walk out of its root.
pub struct Resolve;

impl Resolve {
    /// `RESOLVE_NO_XDEV`: no mount crossing.
    pub const NO_XDEV: u64 = 0x01;
    /// `RESOLVE_NO_MAGICLINKS`: no `/proc`-style magic links.
    pub const NO_MAGICLINKS: u64 = 0x02;
    /// `RESOLVE_NO_SYMLINKS`: no symlinks at all.
    pub const NO_SYMLINKS: u64 = 0x04;
    /// `RESOLVE_BENEATH`: stay below the starting directory.
    pub const BENEATH: u64 = 0x08;
    /// `RESOLVE_IN_ROOT`: the starting directory is the root.
    pub const IN_ROOT: u64 = 0x10;
    /// `RESOLVE_CACHED`: only what the lock-free walk can answer (`EAGAIN` otherwise).
    pub const CACHED: u64 = 0x20;
    /// Every known bit.
    pub const ALL: u64 = 0x3f;
    /// The scoped walks.
    pub const SCOPED: u64 = Self::BENEATH | Self::IN_ROOT;
    /// Internal, not a `RESOLVE_*` flag (`openat2` rejects it): the walk does not count as
    /// a use of the mount it ends in (umount's own lookup of its target: Linux puts that
    /// path with `mntput_no_expire`, which keeps an `MNT_EXPIRE` mark).
    pub const KEEP_EXPIRY_MARK: u64 = 1 << 32;
}

/// What the last component of a path is.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum LastKind {
    /// A name.
    Norm,
    /// `.`
    Dot,
    /// `..`
    DotDot,
    /// The path is `/`.
    Root,
}

/// The final component of a path (`nd->last`).
#[derive(Clone, Debug)]
pub struct Last {
    /// The last component's name.
    pub name: Vec<u8>,
    /// What kind of component it is.
    pub kind: LastKind,
    /// The path ended with `/`.
    pub slash: bool,
}

/// Rejects over-long paths (`getname`); an empty path is the caller's business.
pub fn check_path(path: &[u8]) -> SysResult<()> {
    if path.len() >= PATH_MAX {
        return Err(Errno::ENAMETOOLONG);
    }
    if path.is_empty() {
        return Err(Errno::ENOENT);
    }
    Ok(())
}

fn comps(path: &[u8]) -> impl Iterator<Item = &[u8]> {
    path.split(|&b| b == b'/').filter(|c| !c.is_empty())
}

fn kind_of(c: &[u8]) -> LastKind {
    match c {
        b"." => LastKind::Dot,
        b".." => LastKind::DotDot,
        _ => LastKind::Norm,
    }
}

impl VfsCore {
    /// Resolves `path` relative to `start` (`path_lookupat`). `follow`: follow a final
    /// symlink; `must_dir`: the result must be a directory (`O_DIRECTORY`).
    pub fn lookup(
        &self,
        ctx: &Ctx<'_>,
        start: &Path,
        path: &[u8],
        follow: bool,
        must_dir: bool,
    ) -> SysResult<Path> {
        check_path(path)?;
        ctx.root_set.set(false);
        // The lock-free walk (module docs), counting the final dentry.
        let rcu = self.rcu_walk(ctx, start, path, follow, must_dir, |mnt, d| {
            // SAFETY: found while pinned; `try_get` refuses a dead dentry.
            let r = unsafe { DentryRef::try_get(d) }?;
            Some(Path { mnt, dentry: r })
        });
        let r = match rcu {
            Some(r) => r,
            None if ctx.has(Resolve::CACHED) => Err(Errno::EAGAIN),
            None => self.scoped(ctx, || {
                let mut links = 0;
                let (p, last) = self.link_path_walk(ctx, start.clone(), path, &mut links)?;
                self.lookup_last(ctx, p, &last, follow, must_dir, &mut links)
            }),
        };
        if let Ok(p) = &r {
            if !ctx.has(Resolve::KEEP_EXPIRY_MARK) {
                p.mnt.note_use();
            }
        }
        r
    }

    /// Resolves `path` as [`lookup`](Self::lookup) does and answers `f` of the result
    /// without counting the final dentry when rcu-walk resolves it: `f` runs pinned, on
    /// the uncounted dentry, so two callers asking about one file write none of its lines
    /// (`stat`, `access`). Otherwise `f` runs on ref-walk's counted result. The answer of an
    /// rcu attempt that a directory rename invalidates is dropped and `f` runs again, so
    /// `f` must only read. A dentry found in the hash was the name's binding at an instant
    /// of the walk (`dentry`'s module docs); its inode stays allocated while pinned even if
    /// an unlink kills it meanwhile, and the answer is then the one from before the unlink.
    pub fn lookup_with<R>(
        &self,
        ctx: &Ctx<'_>,
        start: &Path,
        path: &[u8],
        follow: bool,
        f: impl Fn(PathRef<'_>) -> R,
    ) -> SysResult<R> {
        check_path(path)?;
        let rcu = self.rcu_walk(ctx, start, path, follow, false, |mnt, d| {
            // SAFETY: found in the dcache (or the start, referenced by the caller) while
            // pinned; `rcu_walk` is still pinned while `finish` runs.
            let dentry = unsafe { &*d };
            // A negative final dentry answered ENOENT before `finish`; a dead one is fine
            // (see above), but its inode must still be there to be read.
            dentry.inode()?;
            Some((mnt, f(PathRef { mnt, dentry })))
        });
        match rcu {
            Some(r) => {
                let (mnt, out) = r?;
                if !ctx.has(Resolve::KEEP_EXPIRY_MARK) {
                    mnt.note_use();
                }
                Ok(out)
            }
            None => {
                let p = self.lookup(ctx, start, path, follow, false)?;
                Ok(f(PathRef {
                    mnt: p.mnt,
                    dentry: &p.dentry,
                }))
            }
        }
    }

    /// Runs a ref-walk; a scoped walk (`RESOLVE_BENEATH`/`IN_ROOT`) samples the rename
    /// sequence as it begins (once: an outer call's sample stands), and each `..` it takes
    /// is `EAGAIN` if a rename (or mount change) ran since, as Linux's `handle_dots` checks
    /// `rename_lock` and `mount_lock`: it could have moved a directory of the walk out
    /// from under its root, and the `..` above it. Checked at the `..` itself, not after
    /// the walk: the `..` may be in a symlink's target, and an `O_CREAT` walk creates
    /// where it ends.
    pub fn scoped<R>(&self, ctx: &Ctx<'_>, walk: impl FnOnce() -> SysResult<R>) -> SysResult<R> {
        if ctx.resolve & Resolve::SCOPED != 0 && ctx.scope_seq.get().is_none() {
            ctx.scope_seq
                .set(Some(self.dcache.rename_lock.read_begin()));
        }
        walk()
    }

    /// Resolves all but the last component (`filename_parentat`).
    pub fn lookup_parent(
        &self,
        ctx: &Ctx<'_>,
        start: &Path,
        path: &[u8],
    ) -> SysResult<(Path, Last)> {
        let mut links = 0;
        self.lookup_parent_counting(ctx, start, path, &mut links)
    }

    /// [`lookup_parent`](Self::lookup_parent) that adds the symlinks it followed to
    /// `links`, for a caller that goes on resolving (open with `O_CREAT`: the 40-link limit
    /// is per resolution). rcu-walk first: it follows no symlink and takes a count only on
    /// the parent, so creates in different directories share no dentry count (ref-walk
    /// from `/` would count every ancestor, `/` included).
    pub fn lookup_parent_counting(
        &self,
        ctx: &Ctx<'_>,
        start: &Path,
        path: &[u8],
        links: &mut u32,
    ) -> SysResult<(Path, Last)> {
        check_path(path)?;
        if *links == 0 {
            // A new walk (not a symlink's target): it has set no root yet.
            ctx.root_set.set(false);
        }
        let r = match self.rcu_lookup_parent(ctx, start, path) {
            Some(r) => r,
            None => self.link_path_walk(ctx, start.clone(), path, links),
        };
        if let Ok((p, _)) = &r {
            p.mnt.note_use();
        }
        r
    }

    /// rcu-walk for `lookup_parent`: the same walk stopping at the directory that holds the
    /// last component, which gets the only reference. `None`: fall back.
    fn rcu_lookup_parent(
        &self,
        ctx: &Ctx<'_>,
        start: &Path,
        path: &[u8],
    ) -> Option<SysResult<(Path, Last)>> {
        let n = comps(path).count();
        let last = comps(path).last()?;
        if kind_of(last) != LastKind::Norm {
            return None;
        }
        let g = scalevfs_primitives::epoch::pin();
        let seq = self.dcache.rename_lock.read_begin();
        if path[0] == b'/' {
            if let Err(e) = self.jump_root(ctx, start.mnt, true) {
                return Some(Err(e));
            }
        }
        let (mut mnt, mut d) = if path[0] == b'/' {
            (ctx.root.mnt, ctx.root.dentry.as_ptr())
        } else {
            (start.mnt, start.dentry.as_ptr())
        };
        for c in comps(path).take(n - 1) {
            (mnt, d) = self.rcu_step(ctx, mnt, d, c, &g)?;
        }
        // SAFETY: as in `rcu_step`.
        let dd = unsafe { &*d };
        let inode = dd.inode()?;
        if !inode.is_dir() || permission(inode, ctx.cred, MAY_EXEC).is_err() {
            return None;
        }
        // SAFETY: found while pinned; `try_get` refuses a dead dentry.
        let r = unsafe { DentryRef::try_get(d) }?;
        if self.dcache.rename_lock.read_retry(seq) {
            return None;
        }
        Some(Ok((
            Path { mnt, dentry: r },
            Last {
                name: last.to_vec(),
                kind: LastKind::Norm,
                slash: path.ends_with(b"/"),
            },
        )))
    }

    /// `d_revalidate` in rcu-walk (`LOOKUP_RCU`) for a file system whose names change
    /// behind the VFS: only a positive entry the file system vouches for without
    /// blocking ([`FileSystem::revalidate_rcu`](crate::fs::FileSystem::revalidate_rcu))
    /// stays on the fast path; anything else falls back to ref-walk, which asks again.
    fn revalidate_rcu(dir: &crate::inode::Inode, name: &[u8], child: &Dentry) -> bool {
        child
            .inode()
            .is_some_and(|ci| dir.fs().revalidate_rcu(dir, name, ci))
    }

    /// One intermediate component of an rcu-walk: `d` must be a searchable directory, the
    /// child must be cached, positive, not a symlink; mounts are crossed.
    fn rcu_step(
        &self,
        ctx: &Ctx<'_>,
        mnt: MntRef,
        d: *const Dentry,
        c: &[u8],
        g: &scalevfs_primitives::epoch::Guard,
    ) -> Option<(MntRef, *const Dentry)> {
        // SAFETY: `d` is the start (referenced by the caller) or was found in the dcache or
        // mount table while pinned: it stays allocated until the walk unpins.
        let dd = unsafe { &*d };
        let inode = dd.inode()?;
        if !inode.is_dir() || permission(inode, ctx.cred, MAY_EXEC).is_err() {
            return None;
        }
        if c == b"." {
            return Some((mnt, d));
        }
        if c == b".." || c.len() > NAME_MAX {
            return None;
        }
        let (mut mnt, mut child) = (mnt, self.dcache.lookup_rcu(dd, c, g)?);
        // SAFETY: found in the dcache while pinned.
        if inode.sb().revalidates && !Self::revalidate_rcu(inode, c, unsafe { &*child }) {
            return None;
        }
        // SAFETY: found in the dcache while pinned.
        while unsafe { (*child).is_mounted() } {
            if ctx.has(Resolve::NO_XDEV) {
                return None; // ref-walk says EXDEV
            }
            let m = self.mounts.lookup(mnt, child, g)?;
            mnt = m;
            child = m.root().as_ptr();
        }
        // SAFETY: as above.
        let ci = unsafe { (*child).inode() }?;
        if ci.is_symlink() {
            return None;
        }
        Some((mnt, child))
    }

    /// The lock-free walk; `finish` makes the answer from the final dentry (found while
    /// pinned, the walk still pinned) and is kept only if no directory moved meanwhile.
    fn rcu_walk<R>(
        &self,
        ctx: &Ctx<'_>,
        start: &Path,
        path: &[u8],
        follow: bool,
        must_dir: bool,
        finish: impl FnOnce(MntRef, *const Dentry) -> Option<R>,
    ) -> Option<SysResult<R>> {
        let g = scalevfs_primitives::epoch::pin();
        let seq = self.dcache.rename_lock.read_begin();
        if path[0] == b'/' {
            if let Err(e) = self.jump_root(ctx, start.mnt, true) {
                return Some(Err(e));
            }
        }
        let (mut mnt, mut d) = if path[0] == b'/' {
            (ctx.root.mnt, ctx.root.dentry.as_ptr())
        } else {
            (start.mnt, start.dentry.as_ptr())
        };
        let slash = path.ends_with(b"/");
        let must_dir = must_dir || slash;
        let follow = follow || slash;
        let n = comps(path).count();
        let last = comps(path).last()?;
        for c in comps(path).take(n - 1) {
            (mnt, d) = self.rcu_step(ctx, mnt, d, c, &g)?;
        }
        // The final component: as `rcu_step`, but a negative dentry is an answer (ENOENT,
        // valid if no rename ran: see the module docs) and a symlink is fine unfollowed.
        // SAFETY: as in `rcu_step`.
        let dd = unsafe { &*d };
        let inode = dd.inode()?;
        if !inode.is_dir() || permission(inode, ctx.cred, MAY_EXEC).is_err() {
            return None;
        }
        if last != b"." {
            if last == b".." || last.len() > NAME_MAX {
                return None;
            }
            let mut child = self.dcache.lookup_rcu(dd, last, &g)?;
            // SAFETY: found in the dcache while pinned.
            if inode.sb().revalidates && !Self::revalidate_rcu(inode, last, unsafe { &*child }) {
                return None;
            }
            // SAFETY: found in the dcache while pinned.
            while unsafe { (*child).is_mounted() } {
                if ctx.has(Resolve::NO_XDEV) {
                    return None; // ref-walk says EXDEV
                }
                let m = self.mounts.lookup(mnt, child, &g)?;
                mnt = m;
                child = m.root().as_ptr();
            }
            // SAFETY: as above.
            match unsafe { (*child).inode() } {
                None => {
                    if self.dcache.rename_lock.read_retry(seq) {
                        return None;
                    }
                    return Some(Err(Errno::ENOENT));
                }
                Some(ci) if ci.is_symlink() && follow => return None,
                Some(_) => {}
            }
            d = child;
        }
        // SAFETY: as above.
        if must_dir && !unsafe { &*d }.inode()?.is_dir() {
            return None;
        }
        let r = finish(mnt, d)?;
        if self.dcache.rename_lock.read_retry(seq) {
            return None;
        }
        Some(Ok(r))
    }

    /// The checks of `nd_jump_root` before a walk starts over at `ctx.root`, from a place
    /// on mount `from`: for the path itself (`initial`, Linux's `path_init`) or for an
    /// absolute symlink. `EXDEV` under `RESOLVE_BENEATH`. Under `RESOLVE_NO_XDEV` an
    /// absolute path always passes, and a symlink's jump is `EXDEV` if the root is on
    /// another mount, or if the walk has not set its root yet: Linux compares the mount
    /// with `nd->root`, still empty then (see [`Ctx::root_set`]).
    fn jump_root(&self, ctx: &Ctx<'_>, from: MntRef, initial: bool) -> SysResult<()> {
        if ctx.has(Resolve::BENEATH) {
            return Err(Errno::EXDEV);
        }
        let root_set = ctx.has(Resolve::SCOPED) || ctx.root_set.get();
        if ctx.has(Resolve::NO_XDEV) && !initial && (!root_set || ctx.root.mnt != from) {
            return Err(Errno::EXDEV);
        }
        ctx.root_set.set(true);
        Ok(())
    }

    /// Walks every component but the last (`link_path_walk`): checks search permission on
    /// each directory, including the one holding the last component.
    pub(crate) fn link_path_walk(
        &self,
        ctx: &Ctx<'_>,
        start: Path,
        path: &[u8],
        links: &mut u32,
    ) -> SysResult<(Path, Last)> {
        let abs = path.first() == Some(&b'/');
        // The path itself, not a symlink's target (each of those counted one link first).
        let initial = *links == 0;
        if abs {
            self.jump_root(ctx, start.mnt, initial)?;
        }
        let mut cur = if abs { ctx.root.clone() } else { start };
        let slash = path.ends_with(b"/");
        let parts: Vec<&[u8]> = comps(path).collect();
        if parts.is_empty() {
            return Ok((
                cur,
                Last {
                    name: Vec::new(),
                    kind: if abs { LastKind::Root } else { LastKind::Dot },
                    slash,
                },
            ));
        }
        for (i, c) in parts.iter().enumerate() {
            let inode = cur.dentry.inode().ok_or(Errno::ENOENT)?;
            if !inode.is_dir() {
                return Err(Errno::ENOTDIR);
            }
            permission(inode, ctx.cred, MAY_EXEC)?;
            if i + 1 == parts.len() {
                return Ok((
                    cur,
                    Last {
                        name: c.to_vec(),
                        kind: kind_of(c),
                        slash,
                    },
                ));
            }
            cur = self.step(ctx, cur, c, links)?;
        }
        unreachable!("loop returns at the last component")
    }

    /// One non-final component: `.`, `..`, or a name (following a symlink fully).
    fn step(&self, ctx: &Ctx<'_>, cur: Path, c: &[u8], links: &mut u32) -> SysResult<Path> {
        match kind_of(c) {
            LastKind::Dot | LastKind::Root => Ok(cur),
            LastKind::DotDot => self.follow_dotdot(ctx, cur),
            LastKind::Norm => {
                let d = self.lookup_one(&cur, c, false)?;
                if d.is_negative() {
                    return Err(Errno::ENOENT);
                }
                let p = self.cross_mounts_checked(
                    ctx,
                    Path {
                        mnt: cur.mnt,
                        dentry: d,
                    },
                )?;
                if p.dentry.inode().is_some_and(|i| i.is_symlink()) {
                    self.follow_link(ctx, cur, &p, links)
                } else {
                    Ok(p)
                }
            }
        }
    }

    /// Resolves the final component (`lookup_last` + `step_into`).
    pub(crate) fn lookup_last(
        &self,
        ctx: &Ctx<'_>,
        parent: Path,
        last: &Last,
        follow: bool,
        must_dir: bool,
        links: &mut u32,
    ) -> SysResult<Path> {
        // A trailing slash means "follow, and it must be a directory" (link_path_walk sets
        // LOOKUP_FOLLOW | LOOKUP_DIRECTORY); O_DIRECTORY alone does not follow.
        let follow = follow || last.slash;
        let must_dir = must_dir || last.slash;
        let p = match last.kind {
            LastKind::Root | LastKind::Dot => parent,
            LastKind::DotDot => self.follow_dotdot(ctx, parent)?,
            LastKind::Norm => {
                let d = self.lookup_one(&parent, &last.name, false)?;
                if d.is_negative() {
                    return Err(Errno::ENOENT);
                }
                let p = self.cross_mounts_checked(
                    ctx,
                    Path {
                        mnt: parent.mnt,
                        dentry: d,
                    },
                )?;
                if p.dentry.inode().is_some_and(|i| i.is_symlink()) && follow {
                    self.follow_link(ctx, parent, &p, links)?
                } else {
                    p
                }
            }
        };
        if must_dir && !p.dentry.inode().is_some_and(|i| i.is_dir()) {
            return Err(Errno::ENOTDIR);
        }
        Ok(p)
    }

    /// Follows the symlink `link` found in `dir` to its final target.
    pub(crate) fn follow_link(
        &self,
        ctx: &Ctx<'_>,
        dir: Path,
        link: &Path,
        links: &mut u32,
    ) -> SysResult<Path> {
        let target = self.link_target(ctx, link, links)?;
        let (p, last) = self.link_path_walk(ctx, dir, &target, links)?;
        self.lookup_last(ctx, p, &last, true, false, links)
    }

    /// Counts one link followed and reads its target (`ELOOP` past 40, `ENOENT` if empty;
    /// `ELOOP` at once under `RESOLVE_NO_SYMLINKS`).
    pub(crate) fn link_target(
        &self,
        ctx: &Ctx<'_>,
        link: &Path,
        links: &mut u32,
    ) -> SysResult<Vec<u8>> {
        if ctx.has(Resolve::NO_SYMLINKS) {
            return Err(Errno::ELOOP);
        }
        *links += 1;
        if *links > MAX_LINKS {
            return Err(Errno::ELOOP);
        }
        let inode = link.dentry.inode().ok_or(Errno::ENOENT)?;
        let t = inode.fs().readlink(inode)?;
        if t.is_empty() {
            return Err(Errno::ENOENT);
        }
        Ok(t)
    }

    /// `..` (`follow_dotdot`): stays at the process root (under `RESOLVE_BENEATH`, leaving
    /// the starting directory is `EXDEV`), climbs out of mounts (`EXDEV` under
    /// `RESOLVE_NO_XDEV`); in a scoped walk, `EAGAIN` if a rename ran since it began (see
    /// [`scoped`](Self::scoped)).
    pub(crate) fn follow_dotdot(&self, ctx: &Ctx<'_>, cur: Path) -> SysResult<Path> {
        let p = self.dotdot(ctx, cur)?;
        if ctx.has(Resolve::SCOPED) {
            // A scoped walk outside `scoped` has no sample: nothing proves it stayed inside.
            let seq = ctx.scope_seq.get().ok_or(Errno::EAGAIN)?;
            if self.dcache.rename_lock.read_retry(seq) {
                return Err(Errno::EAGAIN);
            }
        }
        Ok(p)
    }

    /// [`follow_dotdot`](Self::follow_dotdot) without the rename check.
    fn dotdot(&self, ctx: &Ctx<'_>, mut cur: Path) -> SysResult<Path> {
        // Linux's `handle_dots` sets the walk's root first.
        ctx.root_set.set(true);
        loop {
            if cur == *ctx.root {
                if ctx.has(Resolve::BENEATH) {
                    return Err(Errno::EXDEV);
                }
                return Ok(cur);
            }
            if cur.mnt.is_root(&cur.dentry) {
                // Pinned from before `parent()` read the mount attached: a lazy umount may
                // detach it and give its mountpoint's count back at any moment (`mount/mod.rs`),
                // and the dentry's memory outlives the grace period after it dies.
                let _g = scalevfs_primitives::epoch::pin();
                match cur.mnt.parent() {
                    Some((pm, mp)) => {
                        if ctx.has(Resolve::NO_XDEV) {
                            return Err(Errno::EXDEV);
                        }
                        // SAFETY: pinned, as above. A dead mountpoint means the mount was
                        // detached meanwhile: `..` then stays at its root, as for any
                        // detached mount; so does a detach seen after the count (the
                        // mountpoint may be the root of a mount that a lazy umount is
                        // shutting down, which must not wait for us: `MountState`).
                        let counted = cur
                            .mnt
                            .state
                            .count_if_attached(|| unsafe { DentryRef::try_get(mp.as_ptr()) });
                        let Some(dentry) = counted else {
                            return Ok(cur);
                        };
                        cur = Path { mnt: pm, dentry };
                        continue;
                    }
                    None => return Ok(cur),
                }
            }
            let parent = cur.dentry.parent().unwrap_or_else(|| cur.dentry.clone());
            return self.cross_mounts_checked(
                ctx,
                Path {
                    mnt: cur.mnt,
                    dentry: parent,
                },
            );
        }
    }

    /// [`cross_mounts`](Self::cross_mounts), or `EXDEV` under `RESOLVE_NO_XDEV` if
    /// something is mounted on `p`.
    pub(crate) fn cross_mounts_checked(&self, ctx: &Ctx<'_>, p: Path) -> SysResult<Path> {
        if ctx.has(Resolve::NO_XDEV) && p.dentry.is_mounted() {
            let g = scalevfs_primitives::epoch::pin();
            if self.mounts.lookup(p.mnt, p.dentry.as_ptr(), &g).is_some() {
                return Err(Errno::EXDEV);
            }
        }
        Ok(self.cross_mounts(p))
    }

    /// Steps onto whatever is mounted on `p` (repeatedly).
    pub(crate) fn cross_mounts(&self, mut p: Path) -> Path {
        while p.dentry.is_mounted() {
            let g = scalevfs_primitives::epoch::pin();
            match self
                .mounts
                .lookup(p.mnt, p.dentry.as_ptr(), &g)
                .and_then(|m| Some((m, m.enter()?)))
            {
                Some((m, root)) => {
                    p = Path {
                        mnt: m,
                        dentry: root,
                    }
                }
                None => break,
            }
        }
        p
    }

    /// `d_revalidate` in ref-walk: does `dir`'s file system still stand by the cached
    /// dentry `d` for `name`? Always, for file systems whose names only change through
    /// the VFS.
    pub(crate) fn still_valid(dir: &crate::inode::Inode, name: &[u8], d: &Dentry) -> bool {
        !dir.sb().revalidates || dir.fs().revalidate(dir, name, d.inode())
    }

    /// Looks `name` up in the directory `parent`: the dcache, else the file system (caching
    /// the answer, negative or positive). `locked`: the caller holds the directory's `rwsem`.
    pub(crate) fn lookup_one(
        &self,
        parent: &Path,
        name: &[u8],
        locked: bool,
    ) -> SysResult<DentryRef> {
        let dir = parent.dentry.inode().ok_or(Errno::ENOENT)?;
        // d_revalidate: a cached answer the file system no longer stands by is dropped.
        let valid = |d: &DentryRef| {
            if !Self::still_valid(dir, name, d) {
                self.dcache.drop_dentry(d);
                false
            } else {
                true
            }
        };
        if name.len() <= NAME_MAX {
            if let Some(d) = self.dcache.lookup(&parent.dentry, name).filter(valid) {
                return Ok(d);
            }
        }
        // Unless the caller holds the directory: its `rwsem` shared, and the name's lock
        // where name changes run shared (`core::dirlock`), so that no change of this name
        // runs between the file system's answer and caching it.
        let _g = (!locked).then(|| dir.rwsem.read());
        let _n = (!locked)
            .then(|| self.lookup_name_lock(&parent.dentry, dir, name))
            .flatten();
        if let Some(d) = self.dcache.lookup(&parent.dentry, name).filter(valid) {
            return Ok(d);
        }
        if dir.nlink() == 0 {
            return Err(Errno::ENOENT);
        }
        if name.len() > NAME_MAX {
            return Err(Errno::ENAMETOOLONG);
        }
        let r = dir.fs().lookup(dir, name)?;
        Ok(self.dcache.add(&parent.dentry, name, r))
    }
}
