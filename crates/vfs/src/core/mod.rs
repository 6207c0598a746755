//! [`VfsCore`]: the mount table, the dentry cache, and every path- and file-level operation
//! with Linux's semantics and errno values. The system-call API (`scalevfs::Process`) maps
//! descriptors to [`FileRef`]s and `dirfd`s to [`Path`]s and calls in here.
//!
//! Locking per operation (see the module docs of `dentry`, `inode`, `file`):
//! * create (open O_CREAT, mkdir, symlink, link): the parent's `rwsem` exclusively; the
//!   negative dentry is instantiated under it.
//! * unlink/rmdir: the parent's `rwsem` exclusively; the victim is dropped from the dcache.
//! * rename: same directory: its `rwsem`; across directories: the superblock's rename mutex,
//!   then both `rwsem`s by address; then the dcache update under the rename lock (write).
//! * write/truncate/fallocate: the file's `rwsem` exclusively; read takes no inode lock
//!   (tmpfs pages have their own lock).
//! * chmod/chown/utimes: the inode's `rwsem` exclusively (attribute + ctime together).
//!
//! Teardown: dropping the `VfsCore` drops the mounts, shrinks the dcache, asks each file
//! system to drop its tree, and then checks each superblock's inode list. If anything is
//! still referenced from outside (a leaked `FileRef`), the superblocks and the dcache are
//! leaked rather than freed under it.

use crate::abi::{DirEntry, Stat, Statx, Timespec};
use crate::dentry::{DPathError, Dcache, Dentry, DentryRef};
use crate::file::{FileRef, OpenFile};
use crate::fs::FileSystem;
use crate::inode::{now, Inode, SuperBlock};
use crate::mount::{MntRef, Mount, MountTable, Path};
use crate::namei::{check_path, Ctx, LastKind};
use crate::perm::{self, permission, Cred, MAY_EXEC, MAY_READ, MAY_WRITE};
use crate::{Errno, SysResult};
use scalevfs_primitives::Locking;
use std::mem::ManuallyDrop;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

/// Where a directory's position goes at its end (Linux's `DIR_OFFSET_EOD`).
pub const DIR_OFFSET_EOD: i64 = i32::MAX as i64;

/// `O_LARGEFILE` as the x86-64 kernel reports it in `F_GETFL`.
pub const O_LARGEFILE_KERNEL: i32 = 0o100000;

/// Tuning of a [`VfsCore`].
#[derive(Clone, Debug)]
pub struct CoreOptions {
    pub locking: Locking,
    /// log2 of the dcache hash buckets.
    pub dcache_hash_bits: u32,
    /// Unused dentries kept before the LRU shrinks itself.
    pub max_unused_dentries: usize,
}

impl Default for CoreOptions {
    fn default() -> Self {
        CoreOptions {
            locking: Locking::Scalable,
            dcache_hash_bits: 16,
            max_unused_dentries: 1 << 18,
        }
    }
}

/// See the module docs.
pub struct VfsCore {
    pub dcache: ManuallyDrop<Dcache>,
    pub mounts: MountTable,
    root: OnceLock<Path>,
    locking: Locking,
    next_dev: AtomicU64,
    /// Every superblock with a reference to its root inode (dropped at teardown).
    sbs: parking_lot::Mutex<Vec<(Arc<SuperBlock>, crate::inode::InodeRef)>>,
}

fn dt_of(mode: u32) -> u8 {
    ((mode & libc::S_IFMT) >> 12) as u8
}

impl VfsCore {
    /// A VFS with `root_fs` mounted at `/`.
    pub fn new(opts: CoreOptions, root_fs: Arc<dyn FileSystem>) -> SysResult<Arc<VfsCore>> {
        let core = Arc::new(VfsCore {
            dcache: ManuallyDrop::new(Dcache::new(
                opts.locking,
                opts.dcache_hash_bits,
                opts.max_unused_dentries,
            )),
            mounts: MountTable::default(),
            root: OnceLock::new(),
            locking: opts.locking,
            next_dev: AtomicU64::new(0x20),
            sbs: parking_lot::Mutex::new(Vec::new()),
        });
        let (sb, root) = core.new_sb(root_fs)?;
        let m = core.mounts.add(Mount::new(1, sb, root.clone(), None));
        let _ = core.root.set(Path {
            mnt: m,
            dentry: root,
        });
        Ok(core)
    }

    fn new_sb(&self, fs: Arc<dyn FileSystem>) -> SysResult<(Arc<SuperBlock>, DentryRef)> {
        let dev = self.next_dev.fetch_add(1, Ordering::Relaxed);
        let sb = Arc::new(SuperBlock::new(dev, fs, self.locking));
        let root_inode = sb.fs.fill_super(&sb)?;
        self.sbs.lock().push((sb.clone(), root_inode.clone()));
        let root = self.dcache.alloc_root(root_inode);
        Ok((sb, root))
    }

    pub fn locking(&self) -> Locking {
        self.locking
    }

    /// The root of the tree.
    pub fn root(&self) -> Path {
        self.root.get().expect("root mounted").clone()
    }

    /// Mounts `fs` on the directory `at`.
    pub fn mount(&self, at: &Path, fs: Arc<dyn FileSystem>) -> SysResult<MntRef> {
        if !at.dentry.inode().is_some_and(|i| i.is_dir()) {
            return Err(Errno::ENOTDIR);
        }
        if at.dentry.is_unlinked() {
            return Err(Errno::ENOENT);
        }
        if at.mnt.is_detached() {
            // In a lazily unmounted tree (Linux 6.18's answer, found by the conformance
            // suite: not the EINVAL of check_mnt).
            return Err(Errno::ENOENT);
        }
        let (sb, root) = self.new_sb(fs)?;
        static NEXT_ID: AtomicU64 = AtomicU64::new(2);
        let mut all = self.mounts.lock();
        // Writers of the rename sequence: concurrent rcu-walks re-validate.
        let _w = self.dcache.rename_lock.write();
        Ok(self.mounts.add_locked(
            &mut all,
            Mount::new(
                NEXT_ID.fetch_add(1, Ordering::Relaxed),
                sb,
                root,
                Some((at.mnt, at.dentry.clone())),
            ),
        ))
    }

    /// `umount2(2)` of the mount whose root is `target` (the caller resolved the path and
    /// checked the flags and privilege). See `mount.rs` for how "busy" is decided without a
    /// mount count.
    ///
    /// * `EINVAL`: `target` is not the root of a mount, or of one still attached;
    ///   `MNT_EXPIRE` with `MNT_FORCE`/`MNT_DETACH`.
    /// * `EBUSY`: the root mount; without `MNT_DETACH`, a mount with mounts below it or
    ///   that somebody uses (an open file, a cwd, a walk in progress).
    /// * `EAGAIN`: the first `MNT_EXPIRE` of an unused mount marks it.
    ///
    /// `MNT_DETACH` takes the mount and every mount below it out of the tree at once; each
    /// file system is shut down as soon as nobody uses it (checked here and by later
    /// `umount`/`drop_caches` calls). `MNT_FORCE` changes nothing for our file systems
    /// (tmpfs has no `umount_begin` either).
    pub fn umount(&self, target: Path, flags: i32) -> SysResult<()> {
        let m = target.mnt;
        if !m.is_root(&target.dentry) || m.is_detached() {
            return Err(Errno::EINVAL);
        }
        let lazy = flags & libc::MNT_DETACH != 0;
        let expire = flags & libc::MNT_EXPIRE != 0;
        if m.parent().is_none() {
            // The root mount (Linux remounts it read-only; we have no read-only mounts).
            return Err(if expire { Errno::EINVAL } else { Errno::EBUSY });
        }
        if expire && flags & (libc::MNT_FORCE | libc::MNT_DETACH) != 0 {
            return Err(Errno::EINVAL);
        }
        let all = self.mounts.lock();
        if !lazy {
            if !MountTable::children(&all, m).is_empty() {
                return Err(Errno::EBUSY);
            }
            m.begin_umount();
            // rcu-walks that started before must re-validate, and new ones wait for the
            // decision (see `mount.rs`).
            let w = self.dcache.rename_lock.write();
            let verdict = if self.mount_busy(m, 1) {
                Err(Errno::EBUSY)
            } else if expire && !m.expiry_mark.swap(true, Ordering::Relaxed) {
                Err(Errno::EAGAIN)
            } else {
                self.mounts.detach(&[m]);
                Ok(())
            };
            drop(w);
            if verdict.is_err() {
                m.cancel_umount();
                return verdict;
            }
            drop(all);
            drop(target);
            self.shut_down(m);
            self.reap_detached();
            return Ok(());
        }
        let mut tree = vec![m];
        let mut i = 0;
        while i < tree.len() {
            tree.extend(MountTable::children(&all, tree[i]));
            i += 1;
        }
        {
            let _w = self.dcache.rename_lock.write();
            self.mounts.detach(&tree);
        }
        drop(all);
        drop(target);
        // Children first: a child holds a count on its mountpoint in its parent.
        for d in tree.iter().rev() {
            if !self.mount_busy(*d, 0) {
                self.shut_down(*d);
            }
        }
        self.reap_detached();
        Ok(())
    }

    /// Does anyone use `m`? Drops the unused cached dentries of its file system first
    /// (`shrink_dcache_for_umount`); then any positive dentry left but the root, or a
    /// count on the root beyond the mount's own and the `held` ones of our caller, is a
    /// user (see `mount.rs`; Linux's umount likewise discounts the caller's `mnt_count`).
    fn mount_busy(&self, m: MntRef, held: u32) -> bool {
        self.dcache.shrink_sb(&m.sb);
        m.sb.dentries.sum() > 1 || m.root().dentry().count() > 1 + held
    }

    /// Shuts down the file system of the unused, detached mount `m`
    /// (`generic_shutdown_super`): gives back the mount's root and mountpoint, lets the
    /// file system drop its links (`kill_sb`), and walks the superblock's inode list the
    /// way `evict_inodes` does: an inode still on it is still referenced ("busy inodes
    /// after unmount"), and then the superblock is left allocated rather than freed.
    fn shut_down(&self, m: MntRef) {
        let entry = {
            let mut sbs = self.sbs.lock();
            let Some(i) = sbs.iter().position(|(sb, _)| Arc::ptr_eq(sb, &m.sb)) else {
                return; // shut down already
            };
            sbs.swap_remove(i)
        };
        m.release();
        let (sb, root_inode) = entry;
        sb.fs.kill_sb(&root_inode);
        drop(root_inode);
        let mut busy = 0usize;
        sb.for_each_inode(|_| busy += 1);
        if busy != 0 {
            LEAKED_SUPERBLOCKS.fetch_add(1, Ordering::Relaxed);
            std::mem::forget(sb);
        }
        self.mounts.free(m);
    }

    /// Shuts down lazily detached file systems that nobody uses any more.
    fn reap_detached(&self) {
        let detached: Vec<MntRef> = {
            let all = self.mounts.lock();
            all.iter()
                .filter(|m| m.is_detached())
                .map(|m| MntRef(&**m))
                .collect()
        };
        for m in detached.into_iter().rev() {
            let pending = self.sbs.lock().iter().any(|(sb, _)| Arc::ptr_eq(sb, &m.sb));
            if pending && !self.mount_busy(m, 0) {
                self.shut_down(m);
            }
        }
    }

    /// Every superblock (mounted file system).
    pub fn superblocks(&self) -> Vec<Arc<SuperBlock>> {
        self.sbs.lock().iter().map(|(s, _)| s.clone()).collect()
    }

    /// Frees unused dentries (`echo 2 > drop_caches`) and lets the epoch collector run.
    pub fn drop_caches(&self) {
        self.dcache.shrink_all();
        self.reap_detached();
        reclaim();
    }

    /// The path of `p` as seen from `root` (d_path). `None`: not reachable from `root`.
    pub fn d_path(&self, root: &Path, p: &Path) -> Option<Vec<u8>> {
        self.dcache.d_path(
            p.mnt.addr(),
            &p.dentry,
            root.mnt.addr(),
            &root.dentry,
            &mount_parent,
        )
    }

    /// [`d_path`](Self::d_path) of a dentry the caller may hold without a count (it must
    /// keep it allocated, e.g. by being pinned; see `scalevfs::cwd`), written at the end
    /// of `buf` (see [`Dcache::d_path_prepend`]): returns where it starts.
    pub fn d_path_prepend(
        &self,
        root: &Path,
        mnt: MntRef,
        dentry: &Dentry,
        buf: &mut [u8],
    ) -> Result<usize, DPathError> {
        self.dcache.d_path_prepend(
            mnt.addr(),
            dentry,
            root.mnt.addr(),
            &root.dentry,
            &mount_parent,
            buf,
        )
    }

    // ---------------------------------------------------------------- open

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
            // Valid, but not provided (README).
            return Err(Errno::EOPNOTSUPP);
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
                    let _w = dir.rwsem.write();
                    let d = self.lookup_one(&dirp, &last.name, true)?;
                    if d.is_negative() {
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
                        return Ok(OpenFile::with_private(
                            Path {
                                mnt: dirp.mnt,
                                dentry: d,
                            },
                            flags & !libc::O_TRUNC,
                            private,
                        ));
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
        if inode.is_dir() && mask & MAY_WRITE != 0 {
            return Err(Errno::EISDIR);
        }
        permission(inode, ctx.cred, mask)?;
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
        Ok(OpenFile::with_private(p, flags, private))
    }

    // ---------------------------------------------------------------- namespace

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
            if check_create {
                perm::may_create(dir, ctx.cred)?;
            }
            f(dirp, dir, d, name)
        })
    }

    /// The part of `filename_create` after the walk: takes the parent's `rwsem`, looks
    /// `name` up (`EEXIST` if it exists) and runs `f` on the negative dentry, lock held.
    pub(crate) fn create_locked<R>(
        &self,
        dirp: &Path,
        name: &[u8],
        f: impl FnOnce(&Path, &Inode, &DentryRef, &[u8]) -> SysResult<R>,
    ) -> SysResult<R> {
        let dir = dirp.dentry.inode().ok_or(Errno::ENOENT)?;
        let _w = dir.rwsem.write();
        let d = self.lookup_one(dirp, name, true)?;
        if !d.is_negative() {
            return Err(Errno::EEXIST);
        }
        f(dirp, dir, &d, name)
    }

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
        if inode.is_dir() {
            return Err(Errno::EPERM);
        }
        let _i = inode.rwsem.write();
        if inode.nlink() == 0 {
            return Err(Errno::ENOENT);
        }
        dir.fs().link(dir, name, inode)?;
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
        let _w = dir.rwsem.write();
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
        if d.is_mounted() {
            return Err(Errno::EBUSY);
        }
        {
            let _v = victim.rwsem.write();
            if rmdir {
                dir.fs().rmdir(dir, name, victim)?;
            } else {
                dir.fs().unlink(dir, name, victim)?;
            }
        }
        self.dcache.drop_dentry(&d);
        Ok(())
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
        self.rename_parents(ctx, &odp, &olast, &ndp, &nlast, flags)
    }

    /// `renameat2` after both walks: `olast` in `odp` to `nlast` in `ndp`.
    pub(crate) fn rename_parents(
        &self,
        ctx: &Ctx<'_>,
        odp: &Path,
        olast: &crate::namei::Last,
        ndp: &Path,
        nlast: &crate::namei::Last,
        flags: u32,
    ) -> SysResult<()> {
        let exchange = flags & libc::RENAME_EXCHANGE != 0;
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
        let ndir = ndp.dentry.inode().ok_or(Errno::ENOENT)?;
        let same = odp.dentry == ndp.dentry;
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
            (Some(odir.rwsem.write()), None)
        } else if old_first {
            let a = odir.rwsem.write();
            (Some(a), Some(ndir.rwsem.write()))
        } else {
            let b = ndir.rwsem.write();
            (Some(b), Some(odir.rwsem.write()))
        };
        let od = self.lookup_one(odp, &olast.name, true)?;
        let Some(src) = od.inode() else {
            return Err(Errno::ENOENT);
        };
        let nd = self.lookup_one(ndp, &nlast.name, true)?;
        let tgt = nd.inode();
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
        // the old parent (the rename mutex keeps ancestry stable while we check).
        if !same {
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
                return Ok(());
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
        if od.is_mounted() || nd.is_mounted() {
            return Err(Errno::EBUSY);
        }
        odir.fs()
            .rename(odir, &olast.name, ndir, &nlast.name, flags)?;
        let _w = self.dcache.rename_lock.write();
        if exchange {
            self.dcache
                .d_move(&od, &ndp.dentry, &nlast.name, Some(&nd), true);
        } else {
            self.dcache
                .d_move(&od, &ndp.dentry, &nlast.name, Some(&nd), false);
        }
        Ok(())
    }

    // ---------------------------------------------------------------- attributes

    pub fn stat(&self, p: &Path) -> Stat {
        p.dentry
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
    pub fn statx(&self, p: &Path, want: u32) -> Statx {
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
        let mount_root = p.mnt.is_root(&p.dentry);
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
            Some(i) => i.fs().statfs(i.sb()),
            None => crate::abi::Statfs::default(),
        }
    }

    pub fn chmod(&self, ctx: &Ctx<'_>, p: &Path, mode: u32) -> SysResult<()> {
        let inode = p.dentry.inode().ok_or(Errno::ENOENT)?;
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

    pub fn chown(&self, ctx: &Ctx<'_>, p: &Path, uid: u32, gid: u32) -> SysResult<()> {
        let inode = p.dentry.inode().ok_or(Errno::ENOENT)?;
        let cred = ctx.cred;
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
        // Only "set both to now" (NULL, or both UTIME_NOW) is allowed to a writer who is not
        // the owner; anything else (explicit times, or UTIME_OMIT for one) needs ownership.
        let explicit = times.is_some_and(|t| t.iter().any(|x| x.nsec != libc::UTIME_NOW));
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
                inode.mtime.set(v);
            }
        }
        inode.ctime.set(n);
        Ok(())
    }

    pub fn access(&self, ctx: &Ctx<'_>, p: &Path, mode: i32) -> SysResult<()> {
        let inode = p.dentry.inode().ok_or(Errno::ENOENT)?;
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

    /// `truncate(2)` on a resolved path.
    pub fn truncate_path(&self, ctx: &Ctx<'_>, p: &Path, len: i64) -> SysResult<()> {
        let inode = p.dentry.inode().ok_or(Errno::ENOENT)?;
        if inode.is_dir() {
            return Err(Errno::EISDIR);
        }
        if !inode.is_reg() {
            return Err(Errno::EINVAL);
        }
        permission(inode, ctx.cred, MAY_WRITE)?;
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

    // ---------------------------------------------------------------- file I/O

    pub fn read(&self, f: &OpenFile, buf: &mut [u8]) -> SysResult<usize> {
        if !f.readable() {
            return Err(Errno::EBADF);
        }
        let inode = f.inode();
        if inode.is_dir() {
            return Err(Errno::EISDIR);
        }
        let mut pos = f.pos.lock();
        let n = self.read_at(f, inode, buf, *pos)?;
        *pos += n as i64;
        Ok(n)
    }

    fn read_at(&self, f: &OpenFile, inode: &Inode, buf: &mut [u8], off: i64) -> SysResult<usize> {
        check_rw_area(off, buf.len())?;
        let n = inode.fs().read_file(f, off as u64, buf)?;
        if f.flags() & libc::O_NOATIME == 0 {
            inode.touch_atime();
        }
        Ok(n)
    }

    pub fn pread(&self, f: &OpenFile, buf: &mut [u8], off: i64) -> SysResult<usize> {
        if !f.readable() {
            return Err(Errno::EBADF);
        }
        let inode = f.inode();
        if inode.is_dir() {
            return Err(Errno::EISDIR);
        }
        if off < 0 {
            return Err(Errno::EINVAL);
        }
        self.read_at(f, inode, buf, off)
    }

    /// `vfs_copy_file_range` for files without a `copy_file_range`/clone method (tmpfs):
    /// the checks of `generic_copy_file_checks` in Linux's order, then a copy in chunks
    /// (Linux's `do_splice_direct` fallback). `pos_in`/`pos_out` are where to read and
    /// write; the caller updates offsets or file positions by the returned count.
    ///
    /// `EISDIR` if either is a directory, `EINVAL` if either is not a regular file, `EBADF`
    /// if `fin` is not readable or `fout` not writable or is `O_APPEND`, `EXDEV` across
    /// superblocks, `EOVERFLOW` if an end wraps around, then the copy is cut at `fin`'s
    /// end (`EFBIG` at the maximum file size), `EINVAL` for overlapping ranges of one file
    /// or a negative or overflowing position. Nothing to copy returns 0.
    pub fn copy_file_range(
        &self,
        ctx: &Ctx<'_>,
        fin: &OpenFile,
        pos_in: i64,
        fout: &OpenFile,
        pos_out: i64,
        len: usize,
    ) -> SysResult<usize> {
        let (iin, iout) = (fin.inode(), fout.inode());
        // generic_file_rw_checks
        if iin.is_dir() || iout.is_dir() {
            return Err(Errno::EISDIR);
        }
        if !iin.is_reg() || !iout.is_reg() {
            return Err(Errno::EINVAL);
        }
        if !fin.readable() || !fout.writable() || fout.flags() & libc::O_APPEND != 0 {
            return Err(Errno::EBADF);
        }
        if !std::ptr::eq(iin.sb(), iout.sb()) {
            return Err(Errno::EXDEV);
        }
        // The ends may not wrap (compared as unsigned 64-bit values, as the C does).
        let len64 = len as u64;
        if (pos_in as u64).checked_add(len64).is_none()
            || (pos_out as u64).checked_add(len64).is_none()
        {
            return Err(Errno::EOVERFLOW);
        }
        // Shorten to the end of the source.
        let size_in = iin.size() as i64;
        let mut count = if pos_in >= size_in {
            0
        } else {
            len64.min((size_in - pos_in) as u64)
        };
        // generic_write_check_limits (signed: a negative position is left to the checks
        // below).
        let max = iout.fs().max_file_size().min(i64::MAX as u64) as i64;
        if pos_out >= max {
            return Err(Errno::EFBIG);
        }
        count = count.min(max.wrapping_sub(pos_out) as u64);
        // Overlapping ranges of one file (unsigned, as the C compares them).
        let (pin, pout) = (pos_in as u64, pos_out as u64);
        if std::ptr::eq(iin, iout)
            && pout.wrapping_add(count) > pin
            && pout < pin.wrapping_add(count)
        {
            return Err(Errno::EINVAL);
        }
        let count = count as usize;
        check_rw_area(pos_in, count)?;
        check_rw_area(pos_out, count)?;
        if count == 0 {
            return Ok(0);
        }
        let mut buf = vec![0u8; count.min(64 << 10)];
        let mut done = 0;
        while done < count {
            let want = (count - done).min(buf.len());
            let off = done as i64;
            let n = match self.read_at(fin, iin, &mut buf[..want], pos_in + off) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if done == 0 => return Err(e),
                Err(_) => break,
            };
            match self.write_at(ctx, fout, &buf[..n], pos_out + off, false) {
                Ok((w, _)) => {
                    done += w;
                    if w < n {
                        break;
                    }
                }
                Err(e) if done == 0 => return Err(e),
                Err(_) => break,
            }
        }
        Ok(done)
    }

    pub fn write(&self, ctx: &Ctx<'_>, f: &OpenFile, buf: &[u8]) -> SysResult<usize> {
        if !f.writable() {
            return Err(Errno::EBADF);
        }
        let mut pos = f.pos.lock();
        let (n, end) = self.write_at(ctx, f, buf, *pos, f.flags() & libc::O_APPEND != 0)?;
        *pos = end;
        Ok(n)
    }

    pub fn pwrite(&self, ctx: &Ctx<'_>, f: &OpenFile, buf: &[u8], off: i64) -> SysResult<usize> {
        if !f.writable() {
            return Err(Errno::EBADF);
        }
        if off < 0 {
            return Err(Errno::EINVAL);
        }
        // Linux: pwrite on an O_APPEND description appends (a documented bug we keep).
        self.write_at(ctx, f, buf, off, f.flags() & libc::O_APPEND != 0)
            .map(|(n, _)| n)
    }

    /// Writes at `off` (or at the end); returns bytes written and the new position.
    fn write_at(
        &self,
        ctx: &Ctx<'_>,
        f: &OpenFile,
        buf: &[u8],
        off: i64,
        append: bool,
    ) -> SysResult<(usize, i64)> {
        let inode = f.inode();
        if inode.is_dir() {
            return Err(Errno::EISDIR);
        }
        let _w = inode.rwsem.write();
        let off = if append { inode.size() as i64 } else { off };
        check_rw_area(off, buf.len())?;
        if buf.is_empty() {
            return Ok((0, off));
        }
        let max = inode.fs().max_file_size();
        if off as u64 >= max {
            return Err(Errno::EFBIG);
        }
        let len = buf.len().min((max - off as u64) as usize);
        perm::kill_suid_on_write(inode, ctx.cred);
        let n = inode.fs().write_file(f, off as u64, &buf[..len])?;
        inode.touch_mc();
        Ok((n, off + n as i64))
    }

    pub fn lseek(&self, f: &OpenFile, off: i64, whence: i32) -> SysResult<i64> {
        if f.is_path() {
            return Err(Errno::EBADF);
        }
        let inode = f.inode();
        let mut pos = f.pos.lock();
        if let Some(r) = inode.fs().llseek(f, *pos, off, whence) {
            *pos = r?;
            return Ok(*pos);
        }
        let size = inode.size() as i64;
        let new = match whence {
            libc::SEEK_SET => off,
            libc::SEEK_CUR => pos.checked_add(off).ok_or(Errno::EINVAL)?,
            libc::SEEK_END if !inode.is_dir() => size.checked_add(off).ok_or(Errno::EINVAL)?,
            libc::SEEK_DATA | libc::SEEK_HOLE if inode.is_reg() => {
                if off < 0 || off >= size {
                    return Err(Errno::ENXIO);
                }
                let r = inode
                    .fs()
                    .seek_data(inode, off as u64, whence == libc::SEEK_DATA)?;
                (r as i64).min(size)
            }
            _ => return Err(Errno::EINVAL),
        };
        if new < 0 {
            return Err(Errno::EINVAL);
        }
        *pos = new;
        Ok(new)
    }

    pub fn getdents64(&self, f: &OpenFile, buf: &mut [u8]) -> SysResult<usize> {
        if f.is_path() {
            return Err(Errno::EBADF);
        }
        let inode = f.inode();
        if !inode.is_dir() {
            return Err(Errno::ENOTDIR);
        }
        let mut pos = f.pos.lock();
        let mut used = 0usize;
        let mut too_small = false;
        let start = *pos;
        let at_end = self.readdir_from(f, start, &mut |e| {
            let reclen = (19 + e.name.len() + 1 + 7) & !7;
            if used + reclen > buf.len() {
                too_small = used == 0;
                return false;
            }
            let r = &mut buf[used..used + reclen];
            r[0..8].copy_from_slice(&e.ino.to_ne_bytes());
            r[8..16].copy_from_slice(&e.next_pos.to_ne_bytes());
            r[16..18].copy_from_slice(&(reclen as u16).to_ne_bytes());
            r[18] = e.d_type;
            r[19..19 + e.name.len()].copy_from_slice(e.name);
            for b in &mut r[19 + e.name.len()..] {
                *b = 0;
            }
            used += reclen;
            *pos = e.next_pos;
            true
        })?;
        if too_small {
            return Err(Errno::EINVAL);
        }
        if at_end {
            // Linux's tmpfs (simple_offset) parks the position at DIR_OFFSET_EOD.
            *pos = DIR_OFFSET_EOD;
        }
        Ok(used)
    }

    /// Emits the entries of the directory open as `f` from cookie `pos` (0: the start,
    /// with `.` and `..`) until `emit` returns false; true if the end was reached. The
    /// cookies (`next_pos`) are stable: a later call from any of them continues there.
    pub fn readdir_from(
        &self,
        f: &OpenFile,
        pos: i64,
        emit: &mut dyn FnMut(crate::fs::DirEmit<'_>) -> bool,
    ) -> SysResult<bool> {
        let inode = f.inode();
        if !inode.is_dir() {
            return Err(Errno::ENOTDIR);
        }
        let _r = inode.rwsem.read();
        if inode.nlink() == 0 {
            return Err(Errno::ENOENT);
        }
        let parent_ino = f
            .path()
            .dentry
            .parent()
            .and_then(|p| p.inode().map(|i| i.ino))
            .unwrap_or(inode.ino);
        let at_end = inode.fs().readdir(inode, parent_ino, pos, emit)?;
        inode.touch_atime();
        Ok(at_end)
    }

    pub fn ftruncate(&self, ctx: &Ctx<'_>, f: &OpenFile, len: i64) -> SysResult<()> {
        if f.is_path() {
            return Err(Errno::EBADF);
        }
        let inode = f.inode();
        if !inode.is_reg() || !f.writable() {
            return Err(Errno::EINVAL);
        }
        self.do_truncate(ctx, inode, len, true)
    }

    pub fn fallocate(&self, f: &OpenFile, mode: i32, off: i64, len: i64) -> SysResult<()> {
        if off < 0 || len <= 0 {
            return Err(Errno::EINVAL);
        }
        // vfs_fallocate: the mode must be a valid combination before anything else is
        // looked at; whether this file system supports it comes last, after the EFBIG
        // check (so an unsupported but valid mode over a too-large range is EFBIG).
        const MODE_MASK: i32 = libc::FALLOC_FL_PUNCH_HOLE
            | libc::FALLOC_FL_COLLAPSE_RANGE
            | libc::FALLOC_FL_ZERO_RANGE
            | libc::FALLOC_FL_INSERT_RANGE
            | libc::FALLOC_FL_UNSHARE_RANGE
            | FALLOC_FL_WRITE_ZEROES;
        let keep = mode & libc::FALLOC_FL_KEEP_SIZE != 0;
        let valid = mode & !(MODE_MASK | libc::FALLOC_FL_KEEP_SIZE) == 0
            && match mode & MODE_MASK {
                0 | libc::FALLOC_FL_UNSHARE_RANGE | libc::FALLOC_FL_ZERO_RANGE => true,
                libc::FALLOC_FL_PUNCH_HOLE => keep,
                libc::FALLOC_FL_COLLAPSE_RANGE | libc::FALLOC_FL_INSERT_RANGE => !keep,
                FALLOC_FL_WRITE_ZEROES => !keep,
                _ => false,
            };
        if !valid {
            return Err(Errno::EOPNOTSUPP);
        }
        if !f.writable() {
            return Err(Errno::EBADF);
        }
        let inode = f.inode();
        if inode.file_type() == libc::S_IFIFO {
            return Err(Errno::ESPIPE);
        }
        if inode.is_dir() {
            return Err(Errno::EISDIR);
        }
        if !inode.is_reg() {
            return Err(Errno::ENODEV);
        }
        let end = off.checked_add(len).ok_or(Errno::EFBIG)?;
        if end as u64 > inode.fs().max_file_size() {
            return Err(Errno::EFBIG);
        }
        if mode & !libc::FALLOC_FL_KEEP_SIZE != 0 {
            // Valid, but not provided (README: fallocate supports 0 and KEEP_SIZE).
            return Err(Errno::EOPNOTSUPP);
        }
        let _w = inode.rwsem.write();
        inode.fs().fallocate(inode, mode, off as u64, len as u64)?;
        inode.touch_mc();
        Ok(())
    }

    pub fn fsync(&self, f: &OpenFile) -> SysResult<()> {
        if f.is_path() {
            return Err(Errno::EBADF);
        }
        let inode = f.inode();
        inode.fs().fsync(inode)
    }
}

/// `__O_TMPFILE` alone (`O_TMPFILE` includes `O_DIRECTORY`).
const O_TMPFILE_ONLY: i32 = libc::O_TMPFILE & !libc::O_DIRECTORY;

/// `renameat2`'s flags: `EINVAL` for unknown bits and for `RENAME_EXCHANGE` with
/// `RENAME_NOREPLACE` (`RENAME_WHITEOUT` is not provided: unknown here).
pub fn check_rename_flags(flags: u32) -> SysResult<()> {
    let exchange = flags & libc::RENAME_EXCHANGE != 0;
    let noreplace = flags & libc::RENAME_NOREPLACE != 0;
    if flags & !(libc::RENAME_EXCHANGE | libc::RENAME_NOREPLACE) != 0 || (exchange && noreplace) {
        return Err(Errno::EINVAL);
    }
    Ok(())
}

/// `FALLOC_FL_WRITE_ZEROES` (Linux 6.17; not in the libc crate yet).
const FALLOC_FL_WRITE_ZEROES: i32 = 0x80;

/// `rw_verify_area`: a position plus count past `i64::MAX` is `EINVAL`.
fn check_rw_area(off: i64, len: usize) -> SysResult<()> {
    if off < 0 || (off as i128 + len as i128) > i64::MAX as i128 {
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

static LEAKED_CORES: AtomicU64 = AtomicU64::new(0);
static LEAKED_SUPERBLOCKS: AtomicU64 = AtomicU64::new(0);

/// How many unmounted file systems still had referenced inodes ("busy inodes after
/// unmount") and were left allocated; 0 unless an inode reference outlived its mount.
pub fn leaked_superblocks() -> u64 {
    LEAKED_SUPERBLOCKS.load(Ordering::Relaxed)
}

/// How many `VfsCore`s were torn down with busy inodes or dentries (and so leaked rather
/// than freed); 0 unless an object outlived its VFS.
pub fn leaked_cores() -> u64 {
    LEAKED_CORES.load(Ordering::Relaxed)
}

/// Lets the epoch collector free retired objects (tests and teardown).
pub fn reclaim() {
    crate::retire::reclaim_local();
    for _ in 0..4 {
        crossbeam_epoch::pin().flush();
        crate::retire::reclaim_local();
    }
}

/// For d_path: a mount root's mountpoint and the parent mount (`None` at the top).
fn mount_parent(m: usize, _root: *const Dentry) -> Option<(usize, *const Dentry)> {
    // SAFETY: `m` is the address of a mount that the d_path caller's path names (held,
    // or read while pinned), so it is allocated (see `mount.rs`).
    let m = unsafe { &*(m as *const Mount) };
    m.parent().map(|(pm, mp)| (pm.addr(), mp.as_ptr()))
}

/// Decodes a `getdents64` buffer into entries.
pub fn decode_dirents(buf: &[u8]) -> Vec<DirEntry> {
    let mut v = Vec::new();
    let mut i = 0;
    while i + 19 <= buf.len() {
        let ino = u64::from_ne_bytes(buf[i..i + 8].try_into().unwrap_or([0; 8]));
        let off = i64::from_ne_bytes(buf[i + 8..i + 16].try_into().unwrap_or([0; 8]));
        let reclen = u16::from_ne_bytes([buf[i + 16], buf[i + 17]]) as usize;
        if reclen < 20 || i + reclen > buf.len() {
            break;
        }
        let d_type = buf[i + 18];
        let name_area = &buf[i + 19..i + reclen];
        let len = name_area
            .iter()
            .position(|&b| b == 0)
            .unwrap_or(name_area.len());
        v.push(DirEntry {
            ino,
            off,
            d_type,
            name: name_area[..len].to_vec(),
        });
        i += reclen;
    }
    v
}

impl Drop for VfsCore {
    fn drop(&mut self) {
        drop(self.root.take());
        drop(self.mounts.clear());
        self.dcache.shrink_all();
        let mut busy = false;
        let all = std::mem::take(&mut *self.sbs.lock());
        let mut sbs = Vec::new();
        for (sb, root) in all {
            // Drop the file system's tree, then the root itself.
            sb.fs.kill_sb(&root);
            drop(root);
            if sb.inode_count() != 0 {
                busy = true;
            }
            sbs.push(sb);
        }
        let all = sbs;
        if busy || self.dcache.nr_dentry() != 0 {
            // Busy inodes after unmount: something outside still references them. Leak the
            // superblocks and the dcache rather than free memory they point into.
            LEAKED_CORES.fetch_add(1, Ordering::Relaxed);
            std::mem::forget(all);
            return;
        }
        reclaim();
        // SAFETY: no dentry is left (nr_dentry == 0) and this is the last use.
        unsafe { ManuallyDrop::drop(&mut self.dcache) };
        drop(all);
    }
}

/// The `d_type` of a file mode (`DT_REG`, `DT_DIR`, ...).
pub fn d_type_of_mode(mode: u32) -> u8 {
    dt_of(mode)
}
