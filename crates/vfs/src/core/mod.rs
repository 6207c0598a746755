//! [`VfsCore`]: the mount table, the dentry cache, and every path- and file-level operation
//! with Linux's semantics and errno values. The system-call API (`scalevfs::Process`) maps
//! descriptors to [`FileRef`](crate::FileRef)s and `dirfd`s to [`Path`]s and calls in here.
//!
//! Locking per operation (see the module docs of `dentry`, `inode`, `file`):
//! A directory is held for a namespace change either *exclusively* (its `rwsem`, then its
//! namespace lock, both for writing) or, in the scalable design where the file system
//! allows it, *shared* (its namespace lock, a per-CPU reader/writer lock, shared, plus a
//! lock per name changed): see `dirlock`'s module docs.
//! * create (open O_CREAT, mkdir, mknod, symlink, link): the parent shared with the name,
//!   else exclusively; the negative dentry is instantiated under it.
//! * unlink: the parent shared with the name, else exclusively; rmdir: the parent and the
//!   victim exclusively. The victim is dropped from the dcache.
//! * rename: same directory, of non-directories: shared with both names, else
//!   exclusively; across directories, of non-directories (scalable): both shared with
//!   both names, the second namespace lock only tried; if that fails, both exclusively,
//!   by address, the second `rwsem` only tried; otherwise (a directory on either side,
//!   both tries failed, or legacy) the superblock's rename mutex, then both exclusively,
//!   an ancestor before its descendant, else by address. A directory being replaced is
//!   held exclusively after both parents. The dcache update runs under the rename lock
//!   (write) when a directory moves or is replaced (legacy: always); see the `dentry`
//!   module docs for why path walks need no more.
//! * write/truncate/fallocate: the file's `rwsem` exclusively; read takes no inode lock
//!   (tmpfs pages have their own lock).
//! * chmod/chown/utimes: the inode's `rwsem` exclusively (attribute + ctime together).
//!
//! Teardown: dropping the `VfsCore` drops the mounts, shrinks the dcache, asks each file
//! system to drop its tree, and then checks each superblock's inode list. If anything is
//! still referenced from outside (a leaked `FileRef`), the superblocks and the dcache are
//! leaked rather than freed under it.
//!
//! The operations are grouped by family, each in its own `impl VfsCore`:
//!
//! | module      | what                                                                   |
//! |-------------|------------------------------------------------------------------------|
//! | `mount`     | mount, umount (lazy and expiring), shutting down an unmounted tree     |
//! | `open`      | open (`O_CREAT`, `O_TRUNC`, ...) and opening a resolved path           |
//! | `namespace` | mkdir, mknod, symlink, link, unlink/rmdir, rename, readlink            |
//! | `attr`      | stat, statx, statfs, chmod, chown, utimes, access, truncate            |
//! | `io`        | read, write, positioned I/O, copy_file_range, lseek, ftruncate, fallocate, fsync |
//! | `dir`       | getdents64, readdir, and decoding a `getdents64` buffer                |
//!
//! This module holds [`VfsCore`] itself: creation, the root, d_path, the caches, teardown.

mod attr;
mod dir;
mod dirlock;
mod fileattr;
mod io;
mod mount;
#[cfg(test)]
mod mount_tests;
mod namespace;
mod open;
#[cfg(test)]
mod rename_tests;

pub use dir::{d_type_of_mode, decode_dirents};
pub use fileattr::SetAttr;
pub use namespace::check_rename_flags;

use crate::dentry::{DPathError, Dcache, Dentry, DentryRef};
use crate::fs::FileSystem;
use crate::inode::SuperBlock;
use crate::mount::{MntRef, Mount, MountOptions, MountTable, Path};
use crate::SysResult;
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
    /// The design of every lock-protected structure (`Scalable` or the `Legacy` ablation).
    pub locking: Locking,
    /// log2 of the dcache hash buckets.
    pub dcache_hash_bits: u32,
    /// Unused dentries kept before the LRU shrinks itself.
    pub max_unused_dentries: usize,
    /// Scalable design: a dentry counted by several threads switches to per-CPU counts
    /// (`dentry` module docs). `false`: every count is the atomic `LockRef` (seed 004).
    pub percpu_dentry_counts: bool,
}

impl Default for CoreOptions {
    fn default() -> Self {
        CoreOptions {
            locking: Locking::Scalable,
            // Miri (Tree Borrows) takes minutes over 65536 buckets, and the bucket count
            // changes no code path: 16 there.
            dcache_hash_bits: if cfg!(miri) { 4 } else { 16 },
            max_unused_dentries: 1 << 18,
            percpu_dentry_counts: true,
        }
    }
}

/// See the module docs.
pub struct VfsCore {
    /// The dentry cache (dropped by hand in `Drop`, after the mounts).
    pub dcache: ManuallyDrop<Dcache>,
    /// The mount table.
    pub mounts: MountTable,
    root: OnceLock<Path>,
    locking: Locking,
    next_dev: AtomicU64,
    /// Locks on (directory, name) for namespace changes that hold their directory shared
    /// (`dirlock`).
    name_locks: dirlock::NameLocks,
    /// Every superblock with a reference to its root inode (dropped at teardown).
    sbs: parking_lot::Mutex<Vec<(Arc<SuperBlock>, crate::inode::InodeRef)>>,
}

impl VfsCore {
    /// A VFS with `root_fs` mounted at `/`.
    pub fn new(opts: CoreOptions, root_fs: Arc<dyn FileSystem>) -> SysResult<Arc<VfsCore>> {
        let core = Arc::new(VfsCore {
            dcache: ManuallyDrop::new(Dcache::new(
                opts.locking,
                opts.dcache_hash_bits,
                opts.max_unused_dentries,
                opts.percpu_dentry_counts,
            )),
            mounts: MountTable::default(),
            root: OnceLock::new(),
            locking: opts.locking,
            next_dev: AtomicU64::new(0x20),
            // Legacy: one lock (0 bits) for every name.
            name_locks: dirlock::NameLocks::with_bits_and_class(
                match opts.locking {
                    Locking::Scalable => dirlock::NAME_LOCK_BITS,
                    Locking::Legacy => 0,
                },
                &crate::lockclass::NAME_LOCK,
            ),
            sbs: parking_lot::Mutex::new(Vec::new()),
        });
        let (sb, root) = core.new_sb(root_fs, &MountOptions::default())?;
        let m = core.mounts.add(Mount::new(1, sb, root.clone(), None));
        let _ = core.root.set(Path {
            mnt: m,
            dentry: root,
        });
        Ok(core)
    }

    fn new_sb(
        &self,
        fs: Arc<dyn FileSystem>,
        opts: &MountOptions,
    ) -> SysResult<(Arc<SuperBlock>, DentryRef)> {
        let dev = self.next_dev.fetch_add(1, Ordering::Relaxed);
        let sb = Arc::new(SuperBlock::new(dev, fs, self.locking).with_read_only(opts.read_only));
        let root_inode = sb.fs.fill_super(&sb)?;
        self.sbs.lock().push((sb.clone(), root_inode.clone()));
        let root = self.dcache.alloc_root(root_inode);
        Ok((sb, root))
    }

    /// The design it was built with.
    pub fn locking(&self) -> Locking {
        self.locking
    }

    /// The root of the tree.
    pub fn root(&self) -> Path {
        self.root.get().expect("root mounted").clone()
    }

    /// Every mounted superblock (a snapshot).
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
        let mut buf = vec![0u8; crate::dentry::PATH_MAX];
        loop {
            match self.d_path_prepend(root, p.mnt, &p.dentry, &mut buf) {
                Ok(start) => return Some(buf.split_off(start)),
                Err(DPathError::Unreachable { .. }) => return None,
                // Deeper than PATH_MAX (getcwd says ENAMETOOLONG/ERANGE; here: grow).
                Err(DPathError::TooLong) => buf = vec![0u8; buf.len() * 4],
            }
        }
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
        scalevfs_primitives::epoch::flush();
        crate::retire::reclaim_local();
    }
}

/// For d_path: a mount root's mountpoint and the parent mount (`None` at the top).
fn mount_parent(m: usize, _root: *const Dentry) -> Option<(usize, *const Dentry)> {
    // SAFETY: `m` is the address of a mount that the d_path caller's path names (held,
    // or read while pinned), so it is allocated (see `mount/mod.rs`).
    let m = unsafe { &*(m as *const Mount) };
    m.parent().map(|(pm, mp)| (pm.addr(), mp.as_ptr()))
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
