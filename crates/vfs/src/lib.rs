//! # scalevfs-vfs: the VFS core
//!
//! Object lifetimes, caches, and the generic semantics Linux keeps in its VFS: path
//! resolution, permission checks, open-file flags, file-lock semantics. File systems
//! (tmpfs, kernfs) implement the [`FileSystem`] trait defined here; the system-call API in
//! the `scalevfs` crate drives [`VfsCore`]. Embedders use the `scalevfs` crate, which
//! re-exports what they need from here.
//!
//! | module      | what                                                                  |
//! |-------------|-----------------------------------------------------------------------|
//! | [`inode`]   | inodes, superblocks (per-CPU inode list, Linux's dlock-list), the inode cache |
//! | [`dentry`]  | the dentry cache: lockref counts, per-CPU lazy LRU, d_move             |
//! | [`namei`]   | path resolution: lock-free rcu-walk, ref-walk fallback                 |
//! | [`mount`]   | mounts and the lock-free mount table                                   |
//! | [`file`](mod@file) | open file descriptions                                                 |
//! | [`fileattr`] | inode flags (`chattr`): append-only, immutable, no-dump, no-atime      |
//! | [`handle`]  | inode handles: operations by inode for a FUSE server                   |
//! | [`core`]    | `VfsCore`: every operation with Linux semantics and errno              |
//! | [`perm`]    | credentials and permission checks                                      |
//! | [`rcuhash`] | the lock-free-lookup hash table under both caches                      |
//! | [`retire`]  | epoch-deferred frees run on the retiring thread (per-thread call_rcu)  |
//! | [`erc`]     | counted pointers: synchronous release, epoch-deferred or type-stable free |
//! | [`prims`]   | adapters selecting the scalable or legacy primitive                    |
//! | [`locks`]   | POSIX, OFD and flock locks: per-inode state, hashed wait-for graph     |
//! | [`lockclass`] | the lock classes `--lockstat` reports (file locks, epoll, caches)    |
//! | [`epoll`]   | refcounted epoll instances, no global lock on release                 |
//! | [`poll`]    | wait queues, the `Pollable` trait, poll/ppoll                          |
//! | [`pipe`], [`eventfd`] | pollable pipes and eventfds                                  |
//! | [`cancel`]  | cancel tokens: EINTR for blocking calls                                |
//!
//! ## Lock order
//!
//! Every lock class of the VFS and of the `scalevfs` crate above it, what it protects, and
//! what may be taken while it is held. A lock may be taken while holding only the locks on
//! its path from a root of this tree; a class not listed under a lock is never taken
//! while it is held. Two locks of one class are never held together unless the line says
//! in which order. Each module's docs give the details.
//!
//! Lock-free paths take none of these: path walks (rcu-walk: dentry and inode hash
//! lookups under an epoch pin, validated by the rename sequence and per-dentry sequence
//! counts), descriptor lookups (`scalevfs`'s fd table), reads of the cwd (a sequence
//! counter), and dentry reference counts while their lockref is free.
//!
//! ```text
//! legacy file-lock lock (ablation only; everything in locks/)          [locks]
//! └─ file-lock context lock (one per inode, `flc_lock`: lock lists, queued waiters)
//!    └─ wait-for graph lock (POSIX edges, hashed by owner; `blocked_lock_lock`)
//! file-lock registry shard (one per CPU: the contexts; the listing only,  [locks]
//!    released before any context lock is taken)
//!
//! OpenFile::pos (the file position; a read, write, lseek or getdents64)  [file]
//! └─ Inode::rwsem ...
//! SuperBlock::rename_mutex (`s_vfs_rename_mutex`: cross-directory        [inode]
//!    renames, the ancestry check)
//! └─ Inode::rwsem ... (both directories, by address)
//! Inode::rwsem (directory contents; a file's size and data for writes;   [inode]
//!    attributes; xattr changes. Two at once: parent before child, else
//!    by address; a directory a rename replaces after both parents)
//! ├─ Inode::ns_lock, written (a directory held exclusively: after its    [core dirlock]
//! │  own rwsem; the locks below as under the rwsem)
//! ├─ name lock (a lookup that misses the dcache, under the directory's   [core dirlock]
//! │  rwsem shared; a leaf but for the file system locks)
//! ├─ file system locks (tmpfs: directory lock or bucket locks, xattr    [tmpfs, kernfs]
//! │  map lock, page locks; kernfs: see its crate docs)
//! │  └─ inode list shard, inode-cache bucket (leaves)                   [inode, rcuhash]
//! ├─ inode list shard, inode-cache bucket (leaves)
//! ├─ mount mutex ... (`mount`, holding the mountpoint exclusively)
//! └─ rename lock, written (`rename_lock`: d_move, mount changes)        [prims, dentry]
//!    └─ d_lock (the dentry's lockref lock: flags, LRU state; moved      [dentry]
//!       │  dentry, then target, by address; never a parent under its
//!       │  child)
//!       └─ dentry hash bucket, LRU shard (leaves)                       [dentry, rcuhash]
//! Inode::ns_lock, shared (a directory held shared for adding or         [core dirlock]
//!    removing one name, or renaming non-directories within it or across
//!    directories; the only directory locks taken under it are tried:
//!    the rmdir victim's, a child, and the other directory's ns_lock,
//!    shared, of a rename across directories)
//! └─ name lock(s) (`VfsCore::name_locks`, hashed by (parent, name); two:
//!    │  lowest index first)
//!    ├─ Inode::rwsem of the non-directory unlinked or linked
//!    │  └─ file system locks ...
//!    ├─ Inode::rwsem, then Inode::ns_lock written, of the directory that
//!    │  rmdir removes (the locks below as under an rwsem)
//!    ├─ file system locks ...
//!    └─ d_lock ... (instantiate, d_move of a non-directory, d_drop)
//! mount mutex (VfsCore::mounts: mount, umount)                          [core, mount]
//! └─ rename lock, written
//!    └─ d_lock ...
//! superblock list (VfsCore::sbs; leaf)                                   [core]
//!
//! epoll nesting lock (EpollContext::nested: epoll-in-epoll insertions)   [epoll]
//! └─ legacy epoll release lock (ablation only)
//!    └─ EventPoll::mtx (items; outer instance before inner)
//!       └─ target EpLinks lock (the target's items, their `dying` flags)
//!          └─ target WaitQueue lock (hooked entries; callbacks run under it)  [poll]
//!             └─ EventPoll::ready (ready and overflow lists)
//!                └─ EventPoll::wq lock (sleeping epoll_wait callers)
//!                   └─ an outer instance's WaitQueue lock (its poll_wait), and so on,
//!                      at most EP_MAX_NESTS deep (the loop check keeps it acyclic)
//! pipe state (`pipe->mutex`: ring, reader/writer counts; never held      [pipe]
//!    while taking a wait-queue lock or another pipe's or epoll's lock)
//! eventfd counter = its WaitQueue lock (as Linux's `ctx->wqh.lock`)      [eventfd]
//! cancel-token mutex (its wakers; never taken with a file-lock context   [cancel]
//!    lock held; a leaf)
//!
//! scalevfs crate:
//! fd table `grow` mutex (only to grow the table; leaf)                   [scalevfs fdtable]
//! cwd writer mutex (`held`: chdir/fchdir; only the cwd's sequence        [scalevfs cwd]
//!    counter's write section under it)
//! ```
//!
//! The primitives under these classes (`scalevfs-primitives`: lockref, sequence locks,
//! hashed tables, dlist shards, lockstat's registry) are leaves in their own crate: none
//! takes another lock while holding its own, except that a dlist shard lock may be held
//! while its caller's closure takes an item's lock.

#![warn(missing_docs)]

pub mod abi;
pub mod cancel;
pub mod core;
pub mod dentry;
pub mod epoll;
pub mod erc;
pub mod errno;
pub mod eventfd;
pub mod file;
pub mod fileattr;
pub mod fs;
pub mod handle;
pub mod inode;
pub mod lockclass;
pub mod locks;
pub mod mount;
pub mod namei;
pub mod perm;
pub mod pipe;
pub mod poll;
pub mod prims;
pub mod rcuhash;
pub mod retire;
#[cfg(test)]
mod testfs;
pub mod xattr;

pub use abi::{DirEntry, FcntlArg, Flock, OpenHow, Stat, Statfs, Statx, Timespec};
pub use core::{CoreOptions, VfsCore};
pub use errno::{Errno, SysResult};
pub use file::{FileRef, OpenFile};
pub use fs::{DirAttrs, DirEmit, FileSystem};
pub use inode::{Inode, InodeRef, NewInode, SuperBlock};
pub use mount::{MntRef, MountOptions, Path};
pub use perm::Cred;
