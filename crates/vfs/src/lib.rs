//! # scalevfs-vfs: the VFS core
//!
//! Object lifetimes, caches, and the generic semantics Linux keeps in its VFS: path
//! resolution, permission checks, open-file flags, file-lock semantics. File systems
//! (tmpfs, kernfs) implement the [`FileSystem`] trait defined here; the system-call API in
//! the `scalevfs` crate drives [`VfsCore`].
//!
//! | module      | what                                                                  |
//! |-------------|-----------------------------------------------------------------------|
//! | [`inode`]   | inodes, superblocks (inode list: seed 001), the inode cache            |
//! | [`dentry`]  | the dentry cache: LockRef counts (seed 004), per-CPU lazy LRU, d_move  |
//! | [`namei`]   | path resolution: lock-free rcu-walk, ref-walk fallback                 |
//! | [`mount`]   | mounts and the lock-free mount table                                   |
//! | [`file`](mod@file) | open file descriptions                                                 |
//! | [`fileattr`] | inode flags (`chattr`): append-only, immutable, no-dump, no-atime      |
//! | [`handle`]  | inode handles: operations by inode for a FUSE server                   |
//! | [`core`]    | `VfsCore`: every operation with Linux semantics and errno              |
//! | [`perm`]    | credentials and permission checks                                      |
//! | [`rcuhash`] | the lock-free-lookup hash table under both caches                      |
//! | [`retire`]  | epoch-deferred frees run on the retiring thread (per-thread call_rcu)  |
//! | [`erc`]     | counted pointers with synchronous release and epoch-deferred free      |
//! | [`prims`]   | adapters selecting the scalable or legacy primitive                    |
//! | [`locks`]   | POSIX, OFD and flock locks with deadlock detection (seed 002)          |
//! | [`epoll`]   | refcounted epoll instances, no global lock on release (seed 003)      |
//! | [`poll`]    | wait queues, the `Pollable` trait, poll/ppoll                          |
//! | [`pipe`], [`eventfd`] | pollable pipes and eventfds                                  |
//! | [`cancel`]  | cancel tokens: EINTR for blocking calls                                |

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
pub use fs::{DirEmit, FileSystem};
pub use inode::{Inode, InodeRef, NewInode, SuperBlock};
pub use mount::{MntRef, Path};
pub use perm::Credentials;
