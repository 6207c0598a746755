//! # scalevfs
//!
//! A Linux-compatible VFS in user space. An embedder (a sandbox, an emulator, a WASI
//! runtime, a user-space file server) creates a [`Vfs`], one [`Process`] per guest process,
//! and forwards guest system calls to the `Process` methods, which have Linux's names,
//! arguments, semantics and errno values.
//!
//! ```
//! use scalevfs::{Process, Vfs, VfsOptions};
//! let vfs = Vfs::new(VfsOptions::default());
//! let p = Process::new(&vfs, scalevfs::Credentials::root());
//! let fd = p.openat(libc::AT_FDCWD, "/hello", libc::O_CREAT | libc::O_RDWR, 0o644).unwrap();
//! assert_eq!(p.write(fd, b"hi").unwrap(), 2);
//! p.close(fd).unwrap();
//! assert_eq!(p.stat("/hello").unwrap().size, 2);
//! ```
//!
//! ## What this crate offers
//! * At the root: [`Vfs`] (the tree and its caches) and [`Process`] (fd table, cwd, umask,
//!   credentials, lock-owner identity), one method per system call, and the types their
//!   signatures use ([`Stat`], [`Statx`], [`Statfs`], [`OpenHow`], [`Flock`], [`FcntlArg`],
//!   [`EpollEvent`], [`CancelToken`], [`Errno`], ...). [`libc`] is re-exported for the
//!   `O_*`, `AT_*` and `S_IF*` constants and the `pollfd`/`sigset_t`/`timespec` types.
//! * [`fs`]: the [`FileSystem`](fs::FileSystem) trait and what implementing one takes, to
//!   mount an embedder's own file system next to the root [`Tmpfs`].
//! * [`locks`]: the file-lock manager of a [`Vfs`] and its request and listing types.
//! * [`dirent`]: decoding what [`Process::getdents64`] wrote.
//! * [`fileattr`]: the inode flags of `FS_IOC_GETFLAGS`/`FS_IOC_SETFLAGS` ([`Process::ioctl`]).
//! * [`ProcessBuilder`] (pid, credentials, umask, root, cwd), [`Process::fork`], `execve`,
//!   the `set*id` calls ([`Credentials`]), and [`Process::with_cancel`] for blocking calls
//!   a [`CancelToken`] interrupts.
//! * The typed layer, on top of the system calls: [`Dir`] and [`File`] (cap-std's shape,
//!   `std::path::Path` or byte-string paths, `std::io` traits, confinement with
//!   `RESOLVE_BENEATH`/`RESOLVE_IN_ROOT`), [`OpenOptions`], bit-flag types ([`OFlags`],
//!   [`Mode`], [`AtFlags`], ...), typed lock kinds, [`Metadata`], [`Epoll`]. The crate's
//!   `examples/` show an embedder, a sandbox and a custom file system.
//!
//! An embedder needs no other scalevfs crate. Underneath, `scalevfs-vfs` is the VFS core
//! (dentry and inode caches, superblocks, mounts, path walk, open file descriptions,
//! permission checks) and `scalevfs-tmpfs` the in-memory file system every [`Vfs`] mounts
//! at `/`.
//!
//! ## Where we differ from Linux (deliberately, or not yet)
//! * Credentials are per process, not per thread (see [`Credentials`]: real, effective,
//!   saved and fs ids, changed by `setresuid` and friends with Linux's rules);
//!   capabilities follow the ids as for root without file capabilities (effective uid 0:
//!   `CAP_SETUID`, `CAP_SYS_ADMIN`, ...; fs uid 0: the file-system capabilities). No
//!   ACLs, no LSMs. The process root ([`ProcessBuilder::root`], [`Process::chroot`])
//!   confines every walk of the process; `openat2` with `RESOLVE_IN_ROOT` confines one
//!   walk.
//! * `fs.protected_hardlinks = 1` is assumed (the default on distributions);
//!   `protected_symlinks`/`protected_regular` are not implemented.
//! * Extended attributes: `user.`, `trusted.` and `security.` as Linux's tmpfs has them
//!   ; no POSIX ACLs, so `system.posix_acl_*` is `EOPNOTSUPP` where
//!   Linux's tmpfs takes ACLs; no `*xattrat` calls (Linux 6.13); `user.` attributes are
//!   not charged against `nr_inodes=`; kernfs has none (sysfs has `security.` ones).
//! * Mounts: [`Process::mount`] mounts a file system object (no `mount(2)` sources or
//!   types, no bind mounts, no propagation); [`Process::mount_with`] takes
//!   [`MountOptions`], whose one flag is `MS_RDONLY` ([`MountOptions::read_only`]: `EROFS`
//!   in Linux's order, compared with the host in the conformance suite's `read-only/*`
//!   cases and random scripts), and [`Process::remount`] changes it (`MS_REMOUNT`:
//!   `EBUSY` while a file is open for writing or an unlinked file is still open, as
//!   Linux's; the `remount/*` cases). `umount2`
//!   follows Linux (see the conformance suite's `mount/*` cases) except that the root
//!   mount is `EBUSY` (Linux's `umount` would remount it read-only). An `MNT_EXPIRE` mark is cleared
//!   when a path walk ends in the mount or the last close of a file opened in it (Linux
//!   clears it in every `mntput`, which also covers a ref-walk passing through it).
//! * `mknodat` makes regular files, FIFOs (named pipes, opened as Linux's `fifo_open`
//!   does), sockets and (root only) device nodes, but no driver stands behind any device
//!   number: opening a device node (a whiteout included) is `ENXIO`, as for a major
//!   number with no driver on Linux;
//! * `openat2` takes every `RESOLVE_*` flag; a scoped (`BENEATH`/`IN_ROOT`) walk that
//!   takes `..` (also one in a symlink's target) after a rename or a mount change answers
//!   `EAGAIN`, as Linux's does. `RESOLVE_CACHED` answers what the rcu-walk can, which takes
//!   no `..` and follows no symlink (Linux's does both): those are `EAGAIN`.
//! * [`Process::ioctl`] answers the requests Linux's tmpfs answers itself (the inode
//!   flags: `FS_IOC_GETFLAGS`, `FS_IOC_SETFLAGS`, `FS_IOC_FSGETXATTR`,
//!   `FS_IOC_FSSETXATTR`); the generic ones Linux's `do_vfs_ioctl` answers for any file
//!   (`FIOCLEX`, `FIONCLEX`, `FIONBIO`, `FIOASYNC`, `FIONREAD`, `FIOQSIZE`, `FIGETBSZ`,
//!   `FIFREEZE`, `FS_IOC_FIEMAP`, `FICLONE`, `FS_IOC_GETFSUUID`, ...) are `ENOTTY` here.
//! * `close_range` with `CLOSE_RANGE_UNSHARE` closes in the table the process's threads
//!   share (Linux would unshare it for the calling thread first);
//! * `statx` reports what Linux's tmpfs does (creation time included), but no
//!   `STATX_MNT_ID_UNIQUE`, `STATX_DIOALIGN` or change cookie;
//!   `fallocate` takes what Linux's tmpfs takes: mode 0, `FALLOC_FL_KEEP_SIZE` and
//!   `FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE` (others: `EOPNOTSUPP`).
//! * File locks (`fcntl` record locks, OFD locks, `flock`; see [`locks`]) follow Linux,
//!   except that deadlock detection follows wait chains of any length (Linux stops after
//!   10 steps) and blocking waits are interrupted by a `CancelToken`, not a signal.
//! * Timestamps use `CLOCK_REALTIME` at nanosecond resolution (Linux uses the coarse clock);
//!   reads update atime with `relatime` rules; `stat` may see seconds and nanoseconds of a
//!   concurrently changing time torn, as Linux may.
//! * Inode numbers, `st_dev` and `st_blocks` (4 KiB pages, no huge pages) are our own; a
//!   `SEEK_HOLE` after truncating and re-allocating a file can differ from a host tmpfs that
//!   uses large folios.
//! * No `RLIMIT_FSIZE`, and reads/writes are not clamped to `MAX_RW_COUNT`.
//! * Directory order is Linux 6.14+ tmpfs's: newest entry first, cookies from 3, position 2
//!   for "the newest entry"; a name removed and created again during a `getdents64` scan is
//!   a new entry (newer than the scan's position), so it is not reported twice.
//! * Pipes, eventfds and epoll: no signals, so `EPIPE` comes without
//!   `SIGPIPE` and the masks of `epoll_pwait`/`ppoll` are ignored; blocking calls made
//!   through [`Process::with_cancel`] give up when a [`CancelToken`] fires (a pending
//!   signal: `EINTR`). Each
//!   eventfd and epoll has its own anonymous inode (Linux shares one), whose mode, owner
//!   and times may be changed (Linux 6.15+ refuses: `EOPNOTSUPP`). `pipe2` has no packet
//!   mode (`O_DIRECT`: `EINVAL`) and no notification pipes (`ENOPKG`, as a kernel
//!   without `CONFIG_WATCH_QUEUE`); `F_SETPIPE_SZ` above 1 GiB is `ENOMEM` (Linux makes
//!   a 2 GiB pipe, whose size `fcntl`'s `i32` cannot return).
//! * The cwd is read as Linux reads `fs->pwd` (a sequence counter, no lock): `getcwd`
//!   writes nothing shared. A relative path walk takes a count on the cwd dentry (one
//!   RMW on its line, shared by the process's threads) where Linux's rcu-walk takes none;
//!   absolute paths and `*at` calls with a directory descriptor do not touch the cwd.

#![warn(missing_docs)]

mod cwd;
mod fdtable;
mod inodes;
mod locking;
mod pids;
mod pollfiles;
mod process;
mod typed;
mod vfs;

#[cfg(doctest)]
#[doc = include_str!("readme_example.md")]
pub struct ReadmeExample;

pub use fdtable::O_ANYFD;
pub use pids::PID_MAX;
pub use process::{ioctl_arg, Cancellable, Credentials, IoctlArg, Process, ProcessBuilder};
pub use process::{NGROUPS_MAX, UNCHANGED};
pub use vfs::{Vfs, VfsOptions};

pub use scalevfs_primitives::Locking;
pub use scalevfs_tmpfs::{Tmpfs, TmpfsOptions};
pub use scalevfs_vfs::cancel::{CancelToken, Registration};
pub use scalevfs_vfs::epoll::EpollEvent;
pub use scalevfs_vfs::fileattr;
pub use scalevfs_vfs::{
    CoreOptions, DirEntry, Errno, FcntlArg, FileRef, Flock, MountOptions, OpenHow, Stat, Statfs,
    Statx, SysResult, Timespec,
};
pub use typed::{
    AtFlags, Descriptor, Dir, Entry, Epoll, EpollFlags, Event, File, FileType, FlockOp, LockHolder,
    LockKind, LockOwner, Metadata, Mode, OFlags, OpenOptions, PathArg, ReadDir, RecordLock,
    RenameFlags, ResolveFlags, XattrFlags, XattrNames,
};

/// The `libc` crate whose types appear in signatures (`pollfd`, `sigset_t`, `timespec`)
/// and whose constants (`O_*`, `AT_*`, `S_IF*`, errno numbers) the calls take.
pub use libc;

/// Reading a `getdents64` buffer.
pub mod dirent {
    /// The `DT_*` type of a file mode (`S_IFDIR` gives `DT_DIR`, ...).
    pub use scalevfs_vfs::core::d_type_of_mode;
    /// Decodes the `struct linux_dirent64` records [`Process::getdents64`](crate::Process::getdents64)
    /// wrote into a buffer: the inverse of the kernel ABI, for callers that do not want to
    /// walk the records themselves.
    pub use scalevfs_vfs::core::decode_dirents;
    pub use scalevfs_vfs::DirEntry;
}

/// What an embedder needs to write its own file system and mount it with
/// [`Process::mount`] or [`Vfs::mount`]: the [`FileSystem`](fs::FileSystem) trait and the
/// types its methods take and return.
pub mod fs {
    pub use scalevfs_vfs::abi::Statfs;
    pub use scalevfs_vfs::dentry::{Dentry, DentryRef};
    pub use scalevfs_vfs::epoll::{EpItem, EpLinks, EventPoll};
    pub use scalevfs_vfs::erc::{Erc, Release};
    pub use scalevfs_vfs::file::{FileRef, OpenFile};
    pub use scalevfs_vfs::fs::{DirEmit, FileSystem};
    pub use scalevfs_vfs::inode::{AtomicTime, Inode, InodeRef, NewInode, SuperBlock, I_LINKABLE};
    pub use scalevfs_vfs::mount::{MntRef, Mount, Path};
    pub use scalevfs_vfs::pipe::FifoSlot;
    pub use scalevfs_vfs::poll::{
        events, Pollable, RegularFile, WaitEntry, WaitError, WaitQueue, WaitQueueGuard,
    };
    pub use scalevfs_vfs::Cred;
}

/// File locks: the [`LockManager`](locks::LockManager) of a [`Vfs`] ([`Vfs::locks`]) and
/// the types of its requests and listings.
pub mod locks {
    pub use crate::locking::is_lock_cmd;
    pub use scalevfs_vfs::locks::*;
}

/// For the in-tree front ends (the FUSE server, the benchmarks, the scalability checker,
/// the C and Python bindings, the conformance harness): the inode-handle API a FUSE server
/// uses ([`Vfs::core`](crate::Vfs) and these types) and the VFS core itself. No stability
/// promise; an embedder needs none of it.
#[doc(hidden)]
pub mod frontend {
    pub use crate::inodes::{Node, Owner, SetAttr, SetTime};
    pub use scalevfs_vfs::VfsCore;
}
