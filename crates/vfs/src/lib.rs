//! # scalevfs-vfs: the VFS core
//!
//! Object lifetimes, caches, and the generic semantics Linux keeps in its VFS: path
//! resolution, permission checks, open-file flags, file-lock semantics. File systems
//! (tmpfs, kernfs) implement the traits defined here; the system-call API in the
//! `scalevfs` crate drives it.

pub mod abi;
pub mod cancel;
pub mod epoll;
pub mod errno;
pub mod eventfd;
pub mod locks;
pub mod pipe;
pub mod poll;

pub use abi::{DirEntry, FcntlArg, Flock, Stat, Timespec};
pub use errno::{Errno, SysResult};
