//! [`Vfs`]: one mounted tree (the mount table, the dentry and inode caches), its file
//! locks and its pipes, eventfds and epolls, shared by the [`Process`](crate::Process)es
//! that use it.

use crate::typed::PathArg;
use std::sync::Arc;

use crate::pids::Pids;
use crate::pollfiles::PollFiles;
use scalevfs_primitives::Locking;
use scalevfs_tmpfs::{Tmpfs, TmpfsOptions};
use scalevfs_vfs::core::CoreOptions;
use scalevfs_vfs::locks::LockManager;
use scalevfs_vfs::namei::Ctx;
use scalevfs_vfs::{Cred, FileSystem, MountOptions, SysResult, VfsCore};

/// How to build a [`Vfs`].
#[derive(Clone, Debug, Default)]
pub struct VfsOptions {
    /// The design of every lock-protected structure: `Scalable` (default) or the `Legacy` ablation.
    pub locking: Locking,
    /// tmpfs `size=` in bytes for the root file system (`None`: unlimited).
    pub size_limit: Option<u64>,
    /// tmpfs `nr_inodes=` for the root file system (`None`: unlimited).
    pub inode_limit: Option<u64>,
}

/// A mounted tree: the mount table and the dentry and inode caches.
pub struct Vfs {
    /// Pipes, eventfds and epolls (the epoll context and their internal mount); dropped
    /// before `core`, whose mount table frees that mount.
    pub(crate) poll: PollFiles,
    pub(crate) core: Arc<VfsCore>,
    options: VfsOptions,
    /// File locks (`fcntl` record locks, OFD locks, `flock`); see [`crate::locking`].
    pub(crate) locks: LockManager,
    /// The pids of this tree's processes; see [`crate::pids`].
    pub(crate) pids: Pids,
}

impl Vfs {
    /// A tree with an empty tmpfs at `/`, sized by `options`.
    pub fn new(options: VfsOptions) -> Arc<Vfs> {
        Vfs::with_core_options(options, CoreOptions::default())
    }

    /// Like [`Vfs::new`] with dcache tuning (`core.locking` is taken from `options`).
    pub fn with_core_options(options: VfsOptions, core: CoreOptions) -> Arc<Vfs> {
        let fs = Arc::new(Tmpfs::new(TmpfsOptions {
            size_limit: options.size_limit,
            inode_limit: options.inode_limit,
        }));
        let core = VfsCore::new(
            CoreOptions {
                locking: options.locking,
                ..core
            },
            fs,
        )
        .expect("mounting the root tmpfs cannot fail");
        let locks = LockManager::new(options.locking);
        let poll = PollFiles::new(options.locking);
        Arc::new(Vfs {
            poll,
            core,
            options,
            locks,
            pids: Pids::new(crate::pids::FIRST_PID),
        })
    }

    /// The options it was built with.
    pub fn options(&self) -> &VfsOptions {
        &self.options
    }

    /// The VFS core (dcache, mounts, operations), for the in-tree front ends.
    #[doc(hidden)]
    pub fn core(&self) -> &Arc<VfsCore> {
        &self.core
    }

    #[doc(hidden)]
    /// The epoll context (the nesting lock; the legacy ablation's global release lock).
    pub fn epoll_context(&self) -> &Arc<scalevfs_vfs::epoll::EpollContext> {
        self.poll.epoll_context()
    }

    /// Mounts `fs` on the directory at absolute `path` (resolved as root).
    pub fn mount(&self, path: impl PathArg, fs: Arc<dyn FileSystem>) -> SysResult<()> {
        self.mount_with(path, fs, MountOptions::new())
    }

    /// [`mount`](Self::mount) with `opts`, such as read-only:
    /// `MountOptions::new().read_only(true)` (see [`MountOptions::read_only`]).
    pub fn mount_with(
        &self,
        path: impl PathArg,
        fs: Arc<dyn FileSystem>,
        opts: MountOptions,
    ) -> SysResult<()> {
        let root = self.core.root();
        let cred = Cred::root();
        let ctx = Ctx::new(&cred, &root);
        let at = self
            .core
            .lookup(&ctx, &root, path.path_bytes(), true, true)?;
        self.core.mount_with(&at, fs, &opts).map(|_| ())
    }

    /// Unmounts the file system mounted at absolute `path` (resolved as root; `umount2`
    /// with no flags: `EBUSY` while anything in it is in use). See [`Process::umount2`](crate::Process::umount2).
    pub fn umount(&self, path: impl PathArg) -> SysResult<()> {
        let root = self.core.root();
        let cred = Cred::root();
        let ctx = Ctx::new(&cred, &root);
        let target = self
            .core
            .lookup(&ctx, &root, path.path_bytes(), true, false)?;
        self.core.umount(target, 0)
    }

    /// The file-lock manager.
    pub fn locks(&self) -> &LockManager {
        &self.locks
    }

    /// Every held and waiting file lock, in `/proc/locks` format.
    pub fn proc_locks(&self) -> String {
        self.locks.proc_locks()
    }

    /// Live inodes over every mounted file system.
    pub fn inode_count(&self) -> usize {
        self.core
            .superblocks()
            .iter()
            .map(|s| s.inode_count())
            .sum()
    }

    /// Frees unused cached dentries and lets deferred frees run (`drop_caches`).
    pub fn drop_caches(&self) {
        self.core.drop_caches();
    }
}
