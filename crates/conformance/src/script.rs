//! Scripts and the builder DSL that writes them.
//!
//! ```
//! use scalevfs_conformance::Script;
//! let mut s = Script::new("io/append-after-seek");
//! let f = s.open("f", libc::O_CREAT | libc::O_WRONLY | libc::O_APPEND, 0o644);
//! s.write(f, "hello").lseek(f, 0, libc::SEEK_SET).write(f, "!").close(f);
//! s.contents("f");
//! assert_eq!(s.steps.len(), 6);
//! ```
//!
//! Every builder method appends one [`Op`]. Methods that create an fd return the [`Slot`]
//! later steps use to name it. A script starts as root in an empty root directory (mode
//! 0755, owner 0:0) with cwd `/` and umask 022; [`Script::become_user`] drops to another
//! identity for the rest of the script (fds opened before are closed).

use std::fmt;

use scalevfs::Timespec;

use crate::op::{Fd, Op, Slot, XattrOn};

/// A named sequence of steps. Names are `category/what` and unique across the suite.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Script {
    pub name: String,
    pub steps: Vec<Op>,
    next_slot: u16,
}

/// An unprivileged user the permission cases run as.
pub const U1: u32 = 1000;
/// A second unprivileged user.
pub const U2: u32 = 1001;
/// The primary group of [`U1`].
pub const G1: u32 = 1000;
/// The primary group of [`U2`].
pub const G2: u32 = 1001;
/// A group only granted as a supplementary group.
pub const G3: u32 = 1002;
/// "Leave unchanged" for chown.
pub const KEEP: u32 = u32::MAX;

fn b(p: impl AsRef<[u8]>) -> Vec<u8> {
    p.as_ref().to_vec()
}

impl Script {
    pub fn new(name: impl Into<String>) -> Script {
        Script {
            name: name.into(),
            steps: Vec::new(),
            next_slot: 0,
        }
    }

    /// The part of the name before the first `/`.
    pub fn category(&self) -> &str {
        self.name.split('/').next().unwrap_or("")
    }

    /// Append a raw step (used by generators).
    pub fn push(&mut self, op: Op) -> &mut Self {
        if let Some(s) = op_slot(&op) {
            self.next_slot = self.next_slot.max(s.0.saturating_add(1));
        }
        self.steps.push(op);
        self
    }

    fn slot(&mut self) -> Slot {
        let s = Slot(self.next_slot);
        self.next_slot = self.next_slot.checked_add(1).expect("at most 65535 slots");
        s
    }

    // --- open, close, read, write ---

    pub fn open(&mut self, path: impl AsRef<[u8]>, flags: i32, mode: u32) -> Slot {
        self.open_at(Fd::Cwd, path, flags, mode)
    }
    pub fn open_at(
        &mut self,
        dir: impl Into<Fd>,
        path: impl AsRef<[u8]>,
        flags: i32,
        mode: u32,
    ) -> Slot {
        let to = self.slot();
        self.steps.push(Op::Open {
            dir: dir.into(),
            path: b(path),
            flags,
            mode,
            to,
        });
        to
    }
    pub fn close(&mut self, fd: impl Into<Fd>) -> &mut Self {
        self.push(Op::Close(fd.into()))
    }
    pub fn read(&mut self, fd: impl Into<Fd>, len: usize) -> &mut Self {
        self.push(Op::Read { fd: fd.into(), len })
    }
    pub fn write(&mut self, fd: impl Into<Fd>, data: impl AsRef<[u8]>) -> &mut Self {
        self.push(Op::Write {
            fd: fd.into(),
            data: b(data),
        })
    }
    pub fn pread(&mut self, fd: impl Into<Fd>, len: usize, off: i64) -> &mut Self {
        self.push(Op::Pread {
            fd: fd.into(),
            len,
            off,
        })
    }
    pub fn pwrite(&mut self, fd: impl Into<Fd>, data: impl AsRef<[u8]>, off: i64) -> &mut Self {
        self.push(Op::Pwrite {
            fd: fd.into(),
            data: b(data),
            off,
        })
    }
    pub fn readv(&mut self, fd: impl Into<Fd>, lens: &[usize]) -> &mut Self {
        self.push(Op::Readv {
            fd: fd.into(),
            lens: lens.to_vec(),
        })
    }
    pub fn writev(&mut self, fd: impl Into<Fd>, bufs: &[&str]) -> &mut Self {
        self.push(Op::Writev {
            fd: fd.into(),
            bufs: bufs.iter().map(|s| s.as_bytes().to_vec()).collect(),
        })
    }
    pub fn preadv(&mut self, fd: impl Into<Fd>, lens: &[usize], off: i64) -> &mut Self {
        self.push(Op::Preadv {
            fd: fd.into(),
            lens: lens.to_vec(),
            off,
        })
    }
    pub fn pwritev(&mut self, fd: impl Into<Fd>, bufs: &[&str], off: i64) -> &mut Self {
        self.push(Op::Pwritev {
            fd: fd.into(),
            bufs: bufs.iter().map(|s| s.as_bytes().to_vec()).collect(),
            off,
        })
    }
    pub fn copy_file_range(
        &mut self,
        fd_in: impl Into<Fd>,
        off_in: Option<i64>,
        fd_out: impl Into<Fd>,
        off_out: Option<i64>,
        len: usize,
        flags: u32,
    ) -> &mut Self {
        self.push(Op::CopyFileRange {
            fd_in: fd_in.into(),
            off_in,
            fd_out: fd_out.into(),
            off_out,
            len,
            flags,
        })
    }
    pub fn lseek(&mut self, fd: impl Into<Fd>, off: i64, whence: i32) -> &mut Self {
        self.push(Op::Lseek {
            fd: fd.into(),
            off,
            whence,
        })
    }

    // --- metadata ---

    pub fn stat(&mut self, path: impl AsRef<[u8]>) -> &mut Self {
        self.stat_at(Fd::Cwd, path, 0)
    }
    pub fn lstat(&mut self, path: impl AsRef<[u8]>) -> &mut Self {
        self.stat_at(Fd::Cwd, path, libc::AT_SYMLINK_NOFOLLOW)
    }
    pub fn stat_at(&mut self, dir: impl Into<Fd>, path: impl AsRef<[u8]>, flags: i32) -> &mut Self {
        self.push(Op::Stat {
            dir: dir.into(),
            path: b(path),
            flags,
        })
    }
    pub fn fstat(&mut self, fd: impl Into<Fd>) -> &mut Self {
        self.push(Op::Fstat(fd.into()))
    }
    /// `st_blocks` of an open file.
    pub fn blocks(&mut self, fd: impl Into<Fd>) -> &mut Self {
        self.push(Op::Blocks(fd.into()))
    }
    /// `st_rdev` of `path` (not following a trailing symlink).
    pub fn rdev(&mut self, path: impl AsRef<[u8]>) -> &mut Self {
        self.push(Op::Rdev(b(path)))
    }
    pub fn chmod(&mut self, path: impl AsRef<[u8]>, mode: u32) -> &mut Self {
        self.chmod_at(Fd::Cwd, path, mode, 0)
    }
    pub fn chmod_at(
        &mut self,
        dir: impl Into<Fd>,
        path: impl AsRef<[u8]>,
        mode: u32,
        flags: i32,
    ) -> &mut Self {
        self.push(Op::Chmod {
            dir: dir.into(),
            path: b(path),
            mode,
            flags,
        })
    }
    pub fn fchmod(&mut self, fd: impl Into<Fd>, mode: u32) -> &mut Self {
        self.push(Op::Fchmod {
            fd: fd.into(),
            mode,
        })
    }
    pub fn chown(&mut self, path: impl AsRef<[u8]>, uid: u32, gid: u32) -> &mut Self {
        self.chown_at(Fd::Cwd, path, uid, gid, 0)
    }
    pub fn lchown(&mut self, path: impl AsRef<[u8]>, uid: u32, gid: u32) -> &mut Self {
        self.chown_at(Fd::Cwd, path, uid, gid, libc::AT_SYMLINK_NOFOLLOW)
    }
    pub fn chown_at(
        &mut self,
        dir: impl Into<Fd>,
        path: impl AsRef<[u8]>,
        uid: u32,
        gid: u32,
        flags: i32,
    ) -> &mut Self {
        self.push(Op::Chown {
            dir: dir.into(),
            path: b(path),
            uid,
            gid,
            flags,
        })
    }
    pub fn fchown(&mut self, fd: impl Into<Fd>, uid: u32, gid: u32) -> &mut Self {
        self.push(Op::Fchown {
            fd: fd.into(),
            uid,
            gid,
        })
    }
    pub fn utimens(
        &mut self,
        path: impl AsRef<[u8]>,
        times: Option<[Timespec; 2]>,
        flags: i32,
    ) -> &mut Self {
        self.utimens_at(Fd::Cwd, path, times, flags)
    }
    pub fn utimens_at(
        &mut self,
        dir: impl Into<Fd>,
        path: impl AsRef<[u8]>,
        times: Option<[Timespec; 2]>,
        flags: i32,
    ) -> &mut Self {
        self.push(Op::Utimens {
            dir: dir.into(),
            path: Some(b(path)),
            times,
            flags,
        })
    }
    pub fn futimens(&mut self, fd: impl Into<Fd>, times: Option<[Timespec; 2]>) -> &mut Self {
        self.push(Op::Utimens {
            dir: fd.into(),
            path: None,
            times,
            flags: 0,
        })
    }
    pub fn access(&mut self, path: impl AsRef<[u8]>, mode: i32) -> &mut Self {
        self.access_at(Fd::Cwd, path, mode, 0)
    }
    pub fn access_at(
        &mut self,
        dir: impl Into<Fd>,
        path: impl AsRef<[u8]>,
        mode: i32,
        flags: i32,
    ) -> &mut Self {
        self.push(Op::Access {
            dir: dir.into(),
            path: b(path),
            mode,
            flags,
        })
    }
    pub fn umask(&mut self, mask: u32) -> &mut Self {
        self.push(Op::Umask(mask))
    }

    // --- namespace ---

    pub fn mkdir(&mut self, path: impl AsRef<[u8]>, mode: u32) -> &mut Self {
        self.mkdir_at(Fd::Cwd, path, mode)
    }
    pub fn mkdir_at(&mut self, dir: impl Into<Fd>, path: impl AsRef<[u8]>, mode: u32) -> &mut Self {
        self.push(Op::Mkdir {
            dir: dir.into(),
            path: b(path),
            mode,
        })
    }
    pub fn unlink(&mut self, path: impl AsRef<[u8]>) -> &mut Self {
        self.unlink_at(Fd::Cwd, path, 0)
    }
    pub fn rmdir(&mut self, path: impl AsRef<[u8]>) -> &mut Self {
        self.unlink_at(Fd::Cwd, path, libc::AT_REMOVEDIR)
    }
    pub fn unlink_at(
        &mut self,
        dir: impl Into<Fd>,
        path: impl AsRef<[u8]>,
        flags: i32,
    ) -> &mut Self {
        self.push(Op::Unlink {
            dir: dir.into(),
            path: b(path),
            flags,
        })
    }
    pub fn rename(&mut self, old: impl AsRef<[u8]>, new: impl AsRef<[u8]>) -> &mut Self {
        self.rename2(old, new, 0)
    }
    pub fn rename2(
        &mut self,
        old: impl AsRef<[u8]>,
        new: impl AsRef<[u8]>,
        flags: u32,
    ) -> &mut Self {
        self.rename_at(Fd::Cwd, old, Fd::Cwd, new, flags)
    }
    pub fn rename_at(
        &mut self,
        olddir: impl Into<Fd>,
        old: impl AsRef<[u8]>,
        newdir: impl Into<Fd>,
        new: impl AsRef<[u8]>,
        flags: u32,
    ) -> &mut Self {
        self.push(Op::Rename {
            olddir: olddir.into(),
            old: b(old),
            newdir: newdir.into(),
            new: b(new),
            flags,
        })
    }
    pub fn link(&mut self, old: impl AsRef<[u8]>, new: impl AsRef<[u8]>) -> &mut Self {
        self.link_at(Fd::Cwd, old, Fd::Cwd, new, 0)
    }
    pub fn link_at(
        &mut self,
        olddir: impl Into<Fd>,
        old: impl AsRef<[u8]>,
        newdir: impl Into<Fd>,
        new: impl AsRef<[u8]>,
        flags: i32,
    ) -> &mut Self {
        self.push(Op::Link {
            olddir: olddir.into(),
            old: b(old),
            newdir: newdir.into(),
            new: b(new),
            flags,
        })
    }
    pub fn symlink(&mut self, target: impl AsRef<[u8]>, path: impl AsRef<[u8]>) -> &mut Self {
        self.symlink_at(target, Fd::Cwd, path)
    }
    pub fn symlink_at(
        &mut self,
        target: impl AsRef<[u8]>,
        dir: impl Into<Fd>,
        path: impl AsRef<[u8]>,
    ) -> &mut Self {
        self.push(Op::Symlink {
            target: b(target),
            dir: dir.into(),
            path: b(path),
        })
    }
    pub fn readlink(&mut self, path: impl AsRef<[u8]>) -> &mut Self {
        self.readlink_at(Fd::Cwd, path, 4096)
    }
    pub fn readlink_at(
        &mut self,
        dir: impl Into<Fd>,
        path: impl AsRef<[u8]>,
        size: usize,
    ) -> &mut Self {
        self.push(Op::Readlink {
            dir: dir.into(),
            path: b(path),
            size,
        })
    }
    pub fn getdents(&mut self, fd: impl Into<Fd>) -> &mut Self {
        self.push(Op::Getdents(fd.into()))
    }
    pub fn getdents_once(&mut self, fd: impl Into<Fd>, size: usize) -> &mut Self {
        self.push(Op::GetdentsOnce {
            fd: fd.into(),
            size,
        })
    }
    /// Open `path` as a directory, list it, close it (3 steps).
    pub fn ls(&mut self, path: impl AsRef<[u8]>) -> &mut Self {
        let d = self.open(path, libc::O_RDONLY | libc::O_DIRECTORY, 0);
        self.getdents(d).close(d)
    }

    // --- sizes ---

    pub fn truncate(&mut self, path: impl AsRef<[u8]>, len: i64) -> &mut Self {
        self.push(Op::Truncate { path: b(path), len })
    }
    pub fn ftruncate(&mut self, fd: impl Into<Fd>, len: i64) -> &mut Self {
        self.push(Op::Ftruncate { fd: fd.into(), len })
    }
    pub fn fallocate(&mut self, fd: impl Into<Fd>, mode: i32, off: i64, len: i64) -> &mut Self {
        self.push(Op::Fallocate {
            fd: fd.into(),
            mode,
            off,
            len,
        })
    }

    // --- ioctl: inode flags ---

    /// `ioctl(fd, request, arg)`; the outcome is `arg` afterwards.
    pub fn ioctl(&mut self, fd: impl Into<Fd>, request: u32, arg: impl AsRef<[u8]>) -> &mut Self {
        self.push(Op::Ioctl {
            fd: fd.into(),
            request,
            arg: b(arg),
        })
    }
    /// `FS_IOC_GETFLAGS` into an `int`.
    pub fn getflags(&mut self, fd: impl Into<Fd>) -> &mut Self {
        self.ioctl(fd, scalevfs::fileattr::FS_IOC_GETFLAGS, [0xff; 4])
    }
    /// `FS_IOC_SETFLAGS` from an `int`.
    pub fn setflags(&mut self, fd: impl Into<Fd>, flags: u32) -> &mut Self {
        self.ioctl(fd, scalevfs::fileattr::FS_IOC_SETFLAGS, flags.to_ne_bytes())
    }
    /// `FS_IOC_FSGETXATTR` into a `struct fsxattr`.
    pub fn fsgetxattr(&mut self, fd: impl Into<Fd>) -> &mut Self {
        let arg = [0xffu8; scalevfs::fileattr::FsxAttr::SIZE];
        self.ioctl(fd, scalevfs::fileattr::FS_IOC_FSGETXATTR, arg)
    }
    /// `FS_IOC_FSSETXATTR` from a `struct fsxattr`.
    pub fn fssetxattr(&mut self, fd: impl Into<Fd>, x: scalevfs::fileattr::FsxAttr) -> &mut Self {
        let mut arg = [0u8; scalevfs::fileattr::FsxAttr::SIZE];
        x.write_to(&mut arg);
        self.ioctl(fd, scalevfs::fileattr::FS_IOC_FSSETXATTR, arg)
    }

    // --- descriptors and directories ---

    pub fn dup(&mut self, fd: impl Into<Fd>) -> Slot {
        let to = self.slot();
        self.steps.push(Op::Dup { fd: fd.into(), to });
        to
    }
    pub fn dup2(&mut self, old: impl Into<Fd>, new: impl Into<Fd>) -> Slot {
        let to = self.slot();
        self.steps.push(Op::Dup2 {
            old: old.into(),
            new: new.into(),
            to,
        });
        to
    }
    pub fn dup3(&mut self, old: impl Into<Fd>, new: impl Into<Fd>, flags: i32) -> Slot {
        let to = self.slot();
        self.steps.push(Op::Dup3 {
            old: old.into(),
            new: new.into(),
            flags,
            to,
        });
        to
    }
    pub fn fcntl(&mut self, fd: impl Into<Fd>, cmd: i32, arg: i64) -> &mut Self {
        self.push(Op::Fcntl {
            fd: fd.into(),
            cmd,
            arg,
            to: None,
        })
    }
    /// `F_DUPFD` / `F_DUPFD_CLOEXEC`.
    pub fn fcntl_dup(&mut self, fd: impl Into<Fd>, cmd: i32, arg: i64) -> Slot {
        let to = self.slot();
        self.steps.push(Op::Fcntl {
            fd: fd.into(),
            cmd,
            arg,
            to: Some(to),
        });
        to
    }
    pub fn chdir(&mut self, path: impl AsRef<[u8]>) -> &mut Self {
        self.push(Op::Chdir(b(path)))
    }
    pub fn fchdir(&mut self, fd: impl Into<Fd>) -> &mut Self {
        self.push(Op::Fchdir(fd.into()))
    }
    pub fn getcwd(&mut self) -> &mut Self {
        self.getcwd_sz(4096)
    }
    pub fn getcwd_sz(&mut self, size: usize) -> &mut Self {
        self.push(Op::Getcwd { size })
    }
    pub fn fsync(&mut self, fd: impl Into<Fd>) -> &mut Self {
        self.push(Op::Fsync(fd.into()))
    }
    pub fn fdatasync(&mut self, fd: impl Into<Fd>) -> &mut Self {
        self.push(Op::Fdatasync(fd.into()))
    }
    pub fn mount_tmpfs(&mut self, path: impl AsRef<[u8]>) -> &mut Self {
        self.push(Op::MountTmpfs(b(path)))
    }
    /// A new tmpfs mounted read-only (`MS_RDONLY`).
    pub fn mount_tmpfs_ro(&mut self, path: impl AsRef<[u8]>) -> &mut Self {
        self.push(Op::MountTmpfsRo(b(path)))
    }
    /// `MS_REMOUNT`, read-only or read-write.
    pub fn remount(&mut self, path: impl AsRef<[u8]>, read_only: bool) -> &mut Self {
        self.push(Op::Remount {
            path: b(path),
            read_only,
        })
    }
    pub fn umount2(&mut self, path: impl AsRef<[u8]>, flags: i32) -> &mut Self {
        self.push(Op::Umount2 {
            path: b(path),
            flags,
        })
    }

    // --- extended attributes: `x` (path, followed), `lx` (path, not followed), `fx` (fd) ---

    pub fn setxattr(
        &mut self,
        path: impl AsRef<[u8]>,
        name: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
        flags: i32,
    ) -> &mut Self {
        self.setxattr_on(XattrOn::Path(b(path)), name, value, flags)
    }
    pub fn lsetxattr(
        &mut self,
        path: impl AsRef<[u8]>,
        name: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
        flags: i32,
    ) -> &mut Self {
        self.setxattr_on(XattrOn::Link(b(path)), name, value, flags)
    }
    pub fn fsetxattr(
        &mut self,
        fd: impl Into<Fd>,
        name: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
        flags: i32,
    ) -> &mut Self {
        self.setxattr_on(XattrOn::Fd(fd.into()), name, value, flags)
    }
    pub fn setxattr_on(
        &mut self,
        on: XattrOn,
        name: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
        flags: i32,
    ) -> &mut Self {
        self.push(Op::SetXattr {
            on,
            name: b(name),
            value: b(value),
            flags,
        })
    }
    /// With `size` 0 the outcome is the value's length, otherwise the bytes returned.
    pub fn getxattr(
        &mut self,
        path: impl AsRef<[u8]>,
        name: impl AsRef<[u8]>,
        size: usize,
    ) -> &mut Self {
        self.getxattr_on(XattrOn::Path(b(path)), name, size)
    }
    pub fn lgetxattr(
        &mut self,
        path: impl AsRef<[u8]>,
        name: impl AsRef<[u8]>,
        size: usize,
    ) -> &mut Self {
        self.getxattr_on(XattrOn::Link(b(path)), name, size)
    }
    pub fn fgetxattr(
        &mut self,
        fd: impl Into<Fd>,
        name: impl AsRef<[u8]>,
        size: usize,
    ) -> &mut Self {
        self.getxattr_on(XattrOn::Fd(fd.into()), name, size)
    }
    pub fn getxattr_on(&mut self, on: XattrOn, name: impl AsRef<[u8]>, size: usize) -> &mut Self {
        self.push(Op::GetXattr {
            on,
            name: b(name),
            size,
        })
    }
    /// With `size` 0 the outcome is the list's length, otherwise its bytes.
    pub fn listxattr(&mut self, path: impl AsRef<[u8]>, size: usize) -> &mut Self {
        self.listxattr_on(XattrOn::Path(b(path)), size)
    }
    pub fn llistxattr(&mut self, path: impl AsRef<[u8]>, size: usize) -> &mut Self {
        self.listxattr_on(XattrOn::Link(b(path)), size)
    }
    pub fn flistxattr(&mut self, fd: impl Into<Fd>, size: usize) -> &mut Self {
        self.listxattr_on(XattrOn::Fd(fd.into()), size)
    }
    pub fn listxattr_on(&mut self, on: XattrOn, size: usize) -> &mut Self {
        self.push(Op::ListXattr { on, size })
    }
    pub fn removexattr(&mut self, path: impl AsRef<[u8]>, name: impl AsRef<[u8]>) -> &mut Self {
        self.removexattr_on(XattrOn::Path(b(path)), name)
    }
    pub fn lremovexattr(&mut self, path: impl AsRef<[u8]>, name: impl AsRef<[u8]>) -> &mut Self {
        self.removexattr_on(XattrOn::Link(b(path)), name)
    }
    pub fn fremovexattr(&mut self, fd: impl Into<Fd>, name: impl AsRef<[u8]>) -> &mut Self {
        self.removexattr_on(XattrOn::Fd(fd.into()), name)
    }
    pub fn removexattr_on(&mut self, on: XattrOn, name: impl AsRef<[u8]>) -> &mut Self {
        self.push(Op::RemoveXattr { on, name: b(name) })
    }

    /// Does the script mount or unmount? (The host runs it in a mount namespace of its
    /// own then, so that nothing leaks out of the case.)
    pub fn mounts(&self) -> bool {
        self.steps.iter().any(|s| {
            matches!(
                s,
                Op::MountTmpfs(_) | Op::MountTmpfsRo(_) | Op::Remount { .. } | Op::Umount2 { .. }
            )
        })
    }

    // --- harness helpers ---

    /// Drop to `uid:gid` (no supplementary groups) for the rest of the script.
    pub fn become_user(&mut self, uid: u32, gid: u32) -> &mut Self {
        self.become_with_groups(uid, gid, &[])
    }
    pub fn become_with_groups(&mut self, uid: u32, gid: u32, groups: &[u32]) -> &mut Self {
        self.push(Op::SetCreds {
            uid,
            gid,
            groups: groups.to_vec(),
        })
    }
    pub fn snap(&mut self, path: impl AsRef<[u8]>) -> &mut Self {
        self.push(Op::SnapTimes(b(path)))
    }
    pub fn times_since(&mut self, path: impl AsRef<[u8]>) -> &mut Self {
        self.push(Op::TimesSince(b(path)))
    }
    pub fn exact_times(&mut self, path: impl AsRef<[u8]>) -> &mut Self {
        self.push(Op::ExactTimes(b(path)))
    }
    /// A FIFO at `path` (from the root, no symlinks; the umask applies). A setup helper:
    /// the contract has no `mknod` (see [`Op::Mkfifo`]).
    pub fn mkfifo(&mut self, path: impl AsRef<[u8]>, mode: u32) -> &mut Self {
        self.push(Op::Mkfifo {
            path: b(path),
            mode,
        })
    }
    pub fn contents(&mut self, path: impl AsRef<[u8]>) -> &mut Self {
        self.push(Op::Contents(b(path)))
    }
    /// Create a regular file with `data` (open O_CREAT|O_EXCL|O_WRONLY, write, close).
    pub fn file(&mut self, path: impl AsRef<[u8]>, mode: u32, data: impl AsRef<[u8]>) -> &mut Self {
        let f = self.open(
            path,
            libc::O_CREAT | libc::O_EXCL | libc::O_WRONLY | libc::O_CLOEXEC,
            mode,
        );
        if !data.as_ref().is_empty() {
            self.write(f, data);
        }
        self.close(f)
    }
}

impl Script {
    /// [`Script::file`] then `chmod` to exactly `mode` (not filtered by the umask).
    pub fn file_mode(
        &mut self,
        path: impl AsRef<[u8]>,
        mode: u32,
        data: impl AsRef<[u8]>,
    ) -> &mut Self {
        let p = b(path);
        self.file(&p, mode, data).chmod(&p, mode)
    }
    /// `mkdir` then `chmod` to exactly `mode`.
    pub fn mkdir_mode(&mut self, path: impl AsRef<[u8]>, mode: u32) -> &mut Self {
        let p = b(path);
        self.mkdir(&p, mode).chmod(&p, mode)
    }
}

/// The slot an op writes, if any.
fn op_slot(op: &Op) -> Option<Slot> {
    match op {
        Op::Open { to, .. } | Op::Dup { to, .. } | Op::Dup2 { to, .. } | Op::Dup3 { to, .. } => {
            Some(*to)
        }
        Op::Fcntl { to, .. } => *to,
        _ => None,
    }
}

impl fmt::Display for Script {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "script {}:", self.name)?;
        for (i, op) in self.steps.iter().enumerate() {
            writeln!(f, "  {i:3}: {op}")?;
        }
        Ok(())
    }
}

/// `Timespec` shorthands for `utimensat` cases.
pub fn ts(sec: i64, nsec: i64) -> Timespec {
    Timespec { sec, nsec }
}
pub const NOW: Timespec = Timespec {
    sec: 0,
    nsec: libc::UTIME_NOW,
};
pub const OMIT: Timespec = Timespec {
    sec: 0,
    nsec: libc::UTIME_OMIT,
};
