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
//! ```

pub mod fdtable;
pub mod process;

pub use process::{Credentials, Locking, Process, Vfs, VfsOptions};
pub use scalevfs_tmpfs::{Tmpfs, TmpfsOptions};
pub use scalevfs_vfs::{DirEntry, Errno, FcntlArg, Flock, Stat, SysResult, Timespec};
