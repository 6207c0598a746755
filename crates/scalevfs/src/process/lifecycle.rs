//! A process's life: creation ([`ProcessBuilder`]), `fork` and `exec`.
//!
//! * **Creation** takes a pid from the [`Vfs`]'s pid space (see [`crate::pids`]), then
//!   resolves the root and the cwd with the new process's own credentials, as `chroot`
//!   and `chdir` would.
//! * **The root** is where absolute paths, absolute symlink targets and `..` stop: every
//!   path walk of the process stays under it, as `RESOLVE_IN_ROOT` confines one
//!   `openat2` walk (the process root is the `Ctx` root of every walk). `getcwd` reports
//!   paths relative to it.
//! * **`fork`** copies the descriptor table (the child's descriptors share the parent's
//!   open file descriptions, so file offsets, OFD locks and `flock` locks are shared),
//!   the cwd, root, umask, credentials and descriptor limit; the child has a new pid, so
//!   it holds none of the parent's POSIX record locks.
//! * **`exec`** closes the close-on-exec descriptors (releasing the POSIX locks they
//!   carry, as any close does) and applies Linux's credential rules for a new program.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::{Credentials, Process};
use crate::typed::PathArg;
use crate::vfs::Vfs;
use scalevfs_vfs::perm::{permission, MAY_EXEC};
use scalevfs_vfs::{Errno, SysResult};

/// How to build a [`Process`]: pid, credentials, umask, root and cwd.
///
/// ```
/// use scalevfs::{Credentials, ProcessBuilder, Vfs, VfsOptions};
/// let vfs = Vfs::new(VfsOptions::default());
/// let admin = ProcessBuilder::new(&vfs).build()?;
/// admin.mkdir("/jail", 0o755)?;
/// let guest = ProcessBuilder::new(&vfs)
///     .credentials(Credentials::user(1000, 1000))
///     .pid(4242)
///     .umask(0o077)
///     .root("/jail")
///     .build()?;
/// assert_eq!(guest.pid(), 4242);
/// assert_eq!(guest.cwd()?, b"/");
/// # Ok::<(), scalevfs::Errno>(())
/// ```
#[derive(Clone)]
pub struct ProcessBuilder {
    vfs: Arc<Vfs>,
    creds: Credentials,
    pid: Option<i32>,
    umask: u32,
    root: Option<Vec<u8>>,
    cwd: Option<Vec<u8>>,
    fd_limit: Option<u32>,
}

impl ProcessBuilder {
    /// Root credentials, the next free pid, umask 022, root and cwd at the tree's root.
    pub fn new(vfs: &Arc<Vfs>) -> ProcessBuilder {
        ProcessBuilder {
            vfs: vfs.clone(),
            creds: Credentials::root(),
            pid: None,
            umask: 0o022,
            root: None,
            cwd: None,
            fd_limit: None,
        }
    }
    /// Who the process is.
    pub fn credentials(mut self, creds: Credentials) -> ProcessBuilder {
        self.creds = creds;
        self
    }
    /// This pid rather than the next free one: [`build`](Self::build) fails with `EEXIST`
    /// while a process of the same [`Vfs`] has it, and with `EINVAL` outside
    /// 1..=[`PID_MAX`](crate::pids::PID_MAX) (as `clone3`'s `set_tid`).
    pub fn pid(mut self, pid: i32) -> ProcessBuilder {
        self.pid = Some(pid);
        self
    }
    /// The file-mode creation mask (only its permission bits count).
    pub fn umask(mut self, umask: u32) -> ProcessBuilder {
        self.umask = umask & 0o777;
        self
    }
    /// The process root: a directory named from the tree's root, under which every path
    /// walk of the process stays (`chroot`). The cwd starts there.
    pub fn root(mut self, path: impl PathArg) -> ProcessBuilder {
        self.root = Some(path.path_bytes().to_vec());
        self
    }
    /// The cwd, resolved as `chdir` would from the process root.
    pub fn cwd(mut self, path: impl PathArg) -> ProcessBuilder {
        self.cwd = Some(path.path_bytes().to_vec());
        self
    }
    /// The descriptor limit (`RLIMIT_NOFILE`); default 1024.
    pub fn fd_limit(mut self, limit: u32) -> ProcessBuilder {
        self.fd_limit = Some(limit);
        self
    }
    /// The process. Errors: the pid's (`EEXIST`, `EINVAL`; `EAGAIN` when every pid is
    /// taken), then the root's and the cwd's walks (`ENOENT`, `ENOTDIR`, `EACCES` without
    /// search permission, ...), then the limit's (`EPERM` above the maximum).
    pub fn build(self) -> SysResult<Process> {
        let pid = self.vfs.pids.alloc(self.pid)?;
        // From here on the process owns the pid: dropping it on an error frees the pid.
        let mut p = Process::with_pid(&self.vfs, self.creds, pid);
        p.umask.store(self.umask, Ordering::Relaxed);
        if let Some(root) = &self.root {
            p.chdir(root)?;
            p.root = p.cwd.get();
        }
        if let Some(cwd) = &self.cwd {
            p.chdir(cwd)?;
        }
        if let Some(limit) = self.fd_limit {
            p.set_fd_limit(limit)?;
        }
        Ok(p)
    }
}

impl Process {
    /// A [`ProcessBuilder`] for a process of `vfs`.
    pub fn builder(vfs: &Arc<Vfs>) -> ProcessBuilder {
        ProcessBuilder::new(vfs)
    }
    /// `fork(2)`: a child with a copy of the descriptor table (sharing the open file
    /// descriptions, their offsets and their OFD and `flock` locks), the cwd, root, umask,
    /// credentials and descriptor limit, and a new pid, so none of the parent's POSIX
    /// record locks.
    ///
    /// # Panics
    /// If every pid of the [`Vfs`] is in use; [`try_fork`](Self::try_fork) answers
    /// `EAGAIN` instead.
    pub fn fork(&self) -> Process {
        self.try_fork().expect("every pid of this Vfs is in use")
    }
    /// [`fork`](Self::fork), with `EAGAIN` when every pid of the [`Vfs`] is in use.
    pub fn try_fork(&self) -> SysResult<Process> {
        let pid = self.vfs.pids.alloc(None)?;
        let mut child = Process::with_pid(&self.vfs, self.creds.clone(), pid);
        child.root = self.root.clone();
        child.cwd.set(self.cwd.get());
        child
            .umask
            .store(self.umask.load(Ordering::Relaxed), Ordering::Relaxed);
        child.fds.set_limit(self.fds.limit())?;
        for (fd, f, cloexec) in self.fds.snapshot() {
            child.fds.replace(fd, f, cloexec)?;
        }
        Ok(child)
    }
    /// `execve(2)` of the program at `path`, as far as the file system sees it: the file
    /// must be a regular file the process may execute (`EACCES` otherwise, a directory
    /// included; the walk's own errors first). Then, as Linux's `begin_new_exec`:
    /// a set-user-ID file makes its owner the effective uid, a set-group-ID file (with
    /// group execute) its group the effective gid; the saved and fs ids become the
    /// effective ones; the close-on-exec descriptors are closed. The pid, the other
    /// descriptors, their locks, the cwd, root and umask stay.
    ///
    /// Not modelled: `ETXTBSY` for a file open for writing, and `nosuid` mounts.
    pub fn execve(&mut self, path: impl PathArg) -> SysResult<()> {
        let p = self.resolve_at(libc::AT_FDCWD, path.path_bytes(), 0, true)?;
        let inode = p.dentry.inode().ok_or(Errno::ENOENT)?;
        if !inode.is_reg() {
            return Err(Errno::EACCES);
        }
        permission(inode, &self.cred, MAY_EXEC)?;
        let mode = inode.mode();
        let mut creds = self.creds.clone();
        if mode & libc::S_ISUID != 0 {
            creds.euid = inode.uid();
        }
        if mode & (libc::S_ISGID | libc::S_IXGRP) == libc::S_ISGID | libc::S_IXGRP {
            creds.egid = inode.gid();
        }
        self.finish_exec(creds);
        Ok(())
    }
    /// `exec` of a program that does not live in this file system (the embedder runs it
    /// from elsewhere): no permission check and no set-id bits; the saved and fs ids
    /// become the effective ones and the close-on-exec descriptors are closed, as
    /// [`execve`](Self::execve) does.
    pub fn exec_foreign_image(&mut self) {
        let creds = self.creds.clone();
        self.finish_exec(creds);
    }
    fn finish_exec(&mut self, mut creds: Credentials) {
        creds.suid = creds.euid;
        creds.fsuid = creds.euid;
        creds.sgid = creds.egid;
        creds.fsgid = creds.egid;
        self.set_credentials(creds);
        for (fd, _, cloexec) in self.fds.snapshot() {
            if cloexec {
                // The descriptor is in the snapshot of a table only this call uses.
                let _ = self.close(fd);
            }
        }
    }
}
