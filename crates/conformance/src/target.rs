//! The [`Target`] trait (one method per system call of the contract in
//! `scalevfs::Process`) and the [`Executor`] that runs a script's steps on one target.
//!
//! Paths are byte strings interpreted by the target the way Linux interprets them for the
//! calling process: relative to its cwd (or `dirfd`), absolute from its root. Both targets
//! start a script at an empty root directory with cwd `/` and umask 022.

use std::io::{IoSlice, IoSliceMut};
use std::time::Duration;

use scalevfs::{Credentials, Stat, SysResult, Timespec};

use crate::op::{Fd, Moved, Op, Outcome, Slot, StatView, XattrOn};

/// A system under test. Methods mirror `scalevfs::Process`; `fcntl` takes only integer
/// arguments (the record-lock commands are out of scope here).
pub trait Target {
    fn openat(&mut self, dirfd: i32, path: &[u8], flags: i32, mode: u32) -> SysResult<i32>;
    fn close(&mut self, fd: i32) -> SysResult<()>;
    fn read(&mut self, fd: i32, buf: &mut [u8]) -> SysResult<usize>;
    fn write(&mut self, fd: i32, buf: &[u8]) -> SysResult<usize>;
    fn pread64(&mut self, fd: i32, buf: &mut [u8], off: i64) -> SysResult<usize>;
    fn pwrite64(&mut self, fd: i32, buf: &[u8], off: i64) -> SysResult<usize>;
    fn readv(&mut self, fd: i32, bufs: &mut [IoSliceMut<'_>]) -> SysResult<usize>;
    fn writev(&mut self, fd: i32, bufs: &[IoSlice<'_>]) -> SysResult<usize>;
    fn preadv(&mut self, fd: i32, bufs: &mut [IoSliceMut<'_>], off: i64) -> SysResult<usize>;
    fn pwritev(&mut self, fd: i32, bufs: &[IoSlice<'_>], off: i64) -> SysResult<usize>;
    fn copy_file_range(
        &mut self,
        fd_in: i32,
        off_in: Option<&mut i64>,
        fd_out: i32,
        off_out: Option<&mut i64>,
        len: usize,
        flags: u32,
    ) -> SysResult<usize>;
    fn lseek(&mut self, fd: i32, off: i64, whence: i32) -> SysResult<i64>;
    fn newfstatat(&mut self, dirfd: i32, path: &[u8], flags: i32) -> SysResult<Stat>;
    fn fstat(&mut self, fd: i32) -> SysResult<Stat>;
    fn fchmodat(&mut self, dirfd: i32, path: &[u8], mode: u32, flags: i32) -> SysResult<()>;
    fn fchmod(&mut self, fd: i32, mode: u32) -> SysResult<()>;
    fn fchownat(
        &mut self,
        dirfd: i32,
        path: &[u8],
        uid: u32,
        gid: u32,
        flags: i32,
    ) -> SysResult<()>;
    fn fchown(&mut self, fd: i32, uid: u32, gid: u32) -> SysResult<()>;
    /// `path == None` is `futimens(dirfd, times)`.
    fn utimensat(
        &mut self,
        dirfd: i32,
        path: Option<&[u8]>,
        times: Option<[Timespec; 2]>,
        flags: i32,
    ) -> SysResult<()>;
    /// Kernel `faccessat2` semantics (flags honoured).
    fn faccessat(&mut self, dirfd: i32, path: &[u8], mode: i32, flags: i32) -> SysResult<()>;
    fn umask(&mut self, mask: u32) -> u32;
    fn mkdirat(&mut self, dirfd: i32, path: &[u8], mode: u32) -> SysResult<()>;
    fn unlinkat(&mut self, dirfd: i32, path: &[u8], flags: i32) -> SysResult<()>;
    fn renameat2(&mut self, od: i32, old: &[u8], nd: i32, new: &[u8], flags: u32) -> SysResult<()>;
    fn linkat(&mut self, od: i32, old: &[u8], nd: i32, new: &[u8], flags: i32) -> SysResult<()>;
    fn symlinkat(&mut self, target: &[u8], dirfd: i32, path: &[u8]) -> SysResult<()>;
    fn readlinkat(&mut self, dirfd: i32, path: &[u8], buf: &mut [u8]) -> SysResult<usize>;
    fn getdents64(&mut self, fd: i32, buf: &mut [u8]) -> SysResult<usize>;
    fn truncate(&mut self, path: &[u8], len: i64) -> SysResult<()>;
    fn ftruncate(&mut self, fd: i32, len: i64) -> SysResult<()>;
    fn fallocate(&mut self, fd: i32, mode: i32, off: i64, len: i64) -> SysResult<()>;
    /// `ioctl(fd, request, arg)` with `arg` the memory the argument points to (an empty
    /// `arg` passes a null pointer).
    fn ioctl(&mut self, fd: i32, request: u32, arg: &mut [u8]) -> SysResult<i32>;
    fn dup(&mut self, fd: i32) -> SysResult<i32>;
    fn dup2(&mut self, old: i32, new: i32) -> SysResult<i32>;
    fn dup3(&mut self, old: i32, new: i32, flags: i32) -> SysResult<i32>;
    fn fcntl(&mut self, fd: i32, cmd: i32, arg: i64) -> SysResult<i32>;
    fn chdir(&mut self, path: &[u8]) -> SysResult<()>;
    fn fchdir(&mut self, fd: i32) -> SysResult<()>;
    /// Fills `buf` with the NUL-terminated cwd; returns the length including the NUL.
    fn getcwd(&mut self, buf: &mut [u8]) -> SysResult<usize>;
    fn fsync(&mut self, fd: i32) -> SysResult<()>;
    fn fdatasync(&mut self, fd: i32) -> SysResult<()>;
    /// Mounts a fresh, empty tmpfs on `path`.
    /// A new tmpfs on `path`, read-only (`MS_RDONLY`) if `read_only`.
    fn mount_tmpfs(&mut self, path: &[u8], read_only: bool) -> SysResult<()>;
    /// `MS_REMOUNT` of the mount at `path`, read-only if `read_only`.
    fn remount(&mut self, path: &[u8], read_only: bool) -> SysResult<()>;
    fn umount2(&mut self, path: &[u8], flags: i32) -> SysResult<()>;
    fn setxattr(&mut self, path: &[u8], name: &[u8], value: &[u8], flags: i32) -> SysResult<()>;
    fn lsetxattr(&mut self, path: &[u8], name: &[u8], value: &[u8], flags: i32) -> SysResult<()>;
    fn fsetxattr(&mut self, fd: i32, name: &[u8], value: &[u8], flags: i32) -> SysResult<()>;
    /// An empty `buf` asks for the value's length.
    fn getxattr(&mut self, path: &[u8], name: &[u8], buf: &mut [u8]) -> SysResult<usize>;
    fn lgetxattr(&mut self, path: &[u8], name: &[u8], buf: &mut [u8]) -> SysResult<usize>;
    fn fgetxattr(&mut self, fd: i32, name: &[u8], buf: &mut [u8]) -> SysResult<usize>;
    /// An empty `buf` asks for the list's length.
    fn listxattr(&mut self, path: &[u8], buf: &mut [u8]) -> SysResult<usize>;
    fn llistxattr(&mut self, path: &[u8], buf: &mut [u8]) -> SysResult<usize>;
    fn flistxattr(&mut self, fd: i32, buf: &mut [u8]) -> SysResult<usize>;
    fn removexattr(&mut self, path: &[u8], name: &[u8]) -> SysResult<()>;
    fn lremovexattr(&mut self, path: &[u8], name: &[u8]) -> SysResult<()>;
    fn fremovexattr(&mut self, fd: i32, name: &[u8]) -> SysResult<()>;
    /// A harness helper, not a call of the contract: a FIFO at `path` (the umask applies).
    fn mkfifo(&mut self, path: &[u8], mode: u32) -> SysResult<()>;
    /// Switch to other credentials (the harness closes all slots and resets cwd and umask
    /// around this). A failure is a harness failure, not an outcome.
    fn set_credentials(&mut self, creds: &Credentials) -> Result<(), String>;
}

/// Decode `struct linux_dirent64` records: `(d_ino u64, d_off i64, d_reclen u16, d_type u8,
/// d_name NUL-terminated)`. Malformed records (a target bug) end the decode with an error.
pub fn decode_dirents(buf: &[u8]) -> Result<Vec<(Vec<u8>, u8)>, String> {
    let mut out = Vec::new();
    let mut pos = 0;
    while pos < buf.len() {
        if pos + 19 > buf.len() {
            return Err(format!("truncated dirent header at {pos}"));
        }
        let reclen = u16::from_ne_bytes([buf[pos + 16], buf[pos + 17]]) as usize;
        if reclen < 20 || pos + reclen > buf.len() {
            return Err(format!("bad d_reclen {reclen} at {pos}"));
        }
        let d_type = buf[pos + 18];
        let name_area = &buf[pos + 19..pos + reclen];
        let len = name_area
            .iter()
            .position(|&c| c == 0)
            .ok_or_else(|| format!("unterminated d_name at {pos}"))?;
        out.push((name_area[..len].to_vec(), d_type));
        pos += reclen;
    }
    Ok(out)
}

/// Runs steps on one target, keeping the slot table and the time snapshot.
pub struct Executor<'t> {
    target: &'t mut dyn Target,
    slots: Vec<Option<i32>>,
    snapshot: Option<[Timespec; 3]>,
    /// The identity the target runs as (scripts start as root).
    creds: Credentials,
    /// The highest fd any step produced. `close_all` closes every fd up to it, not just the
    /// slots: a slot overwritten by a later open, or a `dup2` onto an fd no slot names, must
    /// not stay open on one target and be reused differently by the next step. (The host's
    /// result pipe sits at the rlimit, far above.)
    max_fd: i32,
}

/// How long `SnapTimes` waits so that a later update gets a different timestamp even with
/// the kernel's coarse (jiffy) clock.
const CLOCK_TICK: Duration = Duration::from_millis(25);

impl<'t> Executor<'t> {
    pub fn new(target: &'t mut dyn Target) -> Executor<'t> {
        Executor {
            target,
            slots: Vec::new(),
            snapshot: None,
            creds: Credentials::root(),
            max_fd: -1,
        }
    }

    fn fd(&self, fd: Fd) -> i32 {
        match fd {
            Fd::Cwd => libc::AT_FDCWD,
            Fd::Raw(n) => n,
            Fd::Slot(Slot(s)) => self.slots.get(s as usize).copied().flatten().unwrap_or(-1),
        }
    }

    fn store(&mut self, slot: Slot, r: SysResult<i32>) -> Outcome {
        let i = slot.0 as usize;
        if self.slots.len() <= i {
            self.slots.resize(i + 1, None);
        }
        match r {
            Ok(fd) => {
                self.slots[i] = Some(fd);
                self.max_fd = self.max_fd.max(fd);
                Outcome::Fd(fd)
            }
            Err(e) => {
                self.slots[i] = None;
                Outcome::from_errno(e)
            }
        }
    }

    /// Close every fd a step may have produced (see `max_fd`), and forget the slots.
    pub fn close_all(&mut self) {
        self.slots.clear();
        for fd in 0..=self.max_fd {
            let _ = self.target.close(fd);
        }
        self.max_fd = -1;
    }

    /// The start-of-script state both targets must be in: root directory 0755 root:root,
    /// cwd `/`, umask 022. Returns a harness error if the target refuses.
    pub fn prelude(&mut self) -> Result<(), String> {
        self.target.umask(0o022);
        self.target
            .chdir(b"/")
            .map_err(|e| format!("chdir(\"/\") failed: {e:?}"))?;
        self.target
            .fchownat(libc::AT_FDCWD, b"/", 0, 0, 0)
            .map_err(|e| format!("chown(\"/\", 0, 0) failed: {e:?}"))?;
        self.target
            .fchmodat(libc::AT_FDCWD, b"/", 0o755, 0)
            .map_err(|e| format!("chmod(\"/\", 0755) failed: {e:?}"))?;
        Ok(())
    }

    fn stat_of(&mut self, path: &[u8]) -> SysResult<Stat> {
        self.target
            .newfstatat(libc::AT_FDCWD, path, libc::AT_SYMLINK_NOFOLLOW)
    }

    /// Execute one step and return its outcome.
    pub fn step(&mut self, op: &Op) -> Outcome {
        use Outcome as O;
        let unit = |r: SysResult<()>| match r {
            Ok(()) => O::Ok,
            Err(e) => O::from_errno(e),
        };
        let val = |r: SysResult<usize>| match r {
            Ok(n) => O::Val(n as i64),
            Err(e) => O::from_errno(e),
        };
        // getxattr/listxattr: a size query (empty buffer) returns the length, a read the
        // bytes (their exact contents, order included, are compared).
        let sized = |r: SysResult<usize>, buf: Vec<u8>| match r {
            Ok(n) if buf.is_empty() => O::Val(n as i64),
            Ok(n) => O::Bytes(buf[..n.min(buf.len())].to_vec()),
            Err(e) => O::from_errno(e),
        };
        let stat = |r: SysResult<Stat>| match r {
            Ok(s) => O::Stat(StatView::of(&s)),
            Err(e) => O::from_errno(e),
        };
        match op {
            Op::Open {
                dir,
                path,
                flags,
                mode,
                to,
            } => {
                let r = self.target.openat(self.fd(*dir), path, *flags, *mode);
                self.store(*to, r)
            }
            Op::Close(fd) => {
                let raw = self.fd(*fd);
                let r = self.target.close(raw);
                if r.is_ok() {
                    for s in self.slots.iter_mut() {
                        if *s == Some(raw) {
                            *s = None;
                        }
                    }
                }
                unit(r)
            }
            Op::Read { fd, len } => {
                let mut buf = vec![0u8; *len];
                match self.target.read(self.fd(*fd), &mut buf) {
                    Ok(n) => O::Bytes(buf[..n.min(*len)].to_vec()),
                    Err(e) => O::from_errno(e),
                }
            }
            Op::Write { fd, data } => val(self.target.write(self.fd(*fd), data)),
            Op::Pread { fd, len, off } => {
                let mut buf = vec![0u8; *len];
                match self.target.pread64(self.fd(*fd), &mut buf, *off) {
                    Ok(n) => O::Bytes(buf[..n.min(*len)].to_vec()),
                    Err(e) => O::from_errno(e),
                }
            }
            Op::Pwrite { fd, data, off } => val(self.target.pwrite64(self.fd(*fd), data, *off)),
            Op::Readv { fd, lens } => {
                let mut bufs: Vec<Vec<u8>> = lens.iter().map(|&l| vec![0u8; l]).collect();
                let mut slices: Vec<IoSliceMut<'_>> =
                    bufs.iter_mut().map(|b| IoSliceMut::new(b)).collect();
                let fd = self.fd(*fd);
                match self.target.readv(fd, &mut slices) {
                    Ok(n) => {
                        let all: Vec<u8> = bufs.concat();
                        O::Bytes(all[..n.min(all.len())].to_vec())
                    }
                    Err(e) => O::from_errno(e),
                }
            }
            Op::Writev { fd, bufs } => {
                let slices: Vec<IoSlice<'_>> = bufs.iter().map(|b| IoSlice::new(b)).collect();
                val(self.target.writev(self.fd(*fd), &slices))
            }
            Op::Preadv { fd, lens, off } => {
                let mut bufs: Vec<Vec<u8>> = lens.iter().map(|&l| vec![0u8; l]).collect();
                let mut slices: Vec<IoSliceMut<'_>> =
                    bufs.iter_mut().map(|b| IoSliceMut::new(b)).collect();
                let fd = self.fd(*fd);
                match self.target.preadv(fd, &mut slices, *off) {
                    Ok(n) => {
                        let all: Vec<u8> = bufs.concat();
                        O::Bytes(all[..n.min(all.len())].to_vec())
                    }
                    Err(e) => O::from_errno(e),
                }
            }
            Op::CopyFileRange {
                fd_in,
                off_in,
                fd_out,
                off_out,
                len,
                flags,
            } => {
                let (mut oi, mut oo) = (*off_in, *off_out);
                let (fi, fo) = (self.fd(*fd_in), self.fd(*fd_out));
                match self
                    .target
                    .copy_file_range(fi, oi.as_mut(), fo, oo.as_mut(), *len, *flags)
                {
                    Ok(n) => O::Copied {
                        n: n as i64,
                        off_in: oi,
                        off_out: oo,
                    },
                    Err(e) => O::from_errno(e),
                }
            }
            Op::Pwritev { fd, bufs, off } => {
                let slices: Vec<IoSlice<'_>> = bufs.iter().map(|b| IoSlice::new(b)).collect();
                val(self.target.pwritev(self.fd(*fd), &slices, *off))
            }
            Op::Lseek { fd, off, whence } => match self.target.lseek(self.fd(*fd), *off, *whence) {
                Ok(v) => O::Val(v),
                Err(e) => O::from_errno(e),
            },
            Op::Stat { dir, path, flags } => {
                stat(self.target.newfstatat(self.fd(*dir), path, *flags))
            }
            Op::Fstat(fd) => stat(self.target.fstat(self.fd(*fd))),
            Op::Blocks(fd) => match self.target.fstat(self.fd(*fd)) {
                Ok(s) => O::Val(s.blocks),
                Err(e) => O::from_errno(e),
            },
            Op::Rdev(path) => match self.stat_of(path) {
                Ok(s) => O::Val(s.rdev as i64),
                Err(e) => O::from_errno(e),
            },
            Op::Chmod {
                dir,
                path,
                mode,
                flags,
            } => unit(self.target.fchmodat(self.fd(*dir), path, *mode, *flags)),
            Op::Fchmod { fd, mode } => unit(self.target.fchmod(self.fd(*fd), *mode)),
            Op::Chown {
                dir,
                path,
                uid,
                gid,
                flags,
            } => unit(
                self.target
                    .fchownat(self.fd(*dir), path, *uid, *gid, *flags),
            ),
            Op::Fchown { fd, uid, gid } => unit(self.target.fchown(self.fd(*fd), *uid, *gid)),
            Op::Utimens {
                dir,
                path,
                times,
                flags,
            } => unit(
                self.target
                    .utimensat(self.fd(*dir), path.as_deref(), *times, *flags),
            ),
            Op::Access {
                dir,
                path,
                mode,
                flags,
            } => unit(self.target.faccessat(self.fd(*dir), path, *mode, *flags)),
            Op::Umask(m) => O::Val(self.target.umask(*m) as i64),
            Op::Mkdir { dir, path, mode } => unit(self.target.mkdirat(self.fd(*dir), path, *mode)),
            Op::Unlink { dir, path, flags } => {
                unit(self.target.unlinkat(self.fd(*dir), path, *flags))
            }
            Op::Rename {
                olddir,
                old,
                newdir,
                new,
                flags,
            } => unit(
                self.target
                    .renameat2(self.fd(*olddir), old, self.fd(*newdir), new, *flags),
            ),
            Op::Link {
                olddir,
                old,
                newdir,
                new,
                flags,
            } => unit(
                self.target
                    .linkat(self.fd(*olddir), old, self.fd(*newdir), new, *flags),
            ),
            Op::Symlink { target, dir, path } => {
                unit(self.target.symlinkat(target, self.fd(*dir), path))
            }
            Op::Readlink { dir, path, size } => {
                let mut buf = vec![0u8; *size];
                match self.target.readlinkat(self.fd(*dir), path, &mut buf) {
                    Ok(n) => O::Bytes(buf[..n.min(*size)].to_vec()),
                    Err(e) => O::from_errno(e),
                }
            }
            Op::Getdents(fd) => {
                let fd = self.fd(*fd);
                let mut all = Vec::new();
                let mut buf = vec![0u8; 4096];
                // Bounded so a target that never returns 0 cannot hang the harness.
                for _ in 0..10_000 {
                    match self.target.getdents64(fd, &mut buf) {
                        Ok(0) => {
                            all.sort();
                            return O::Dents(all);
                        }
                        Ok(n) => match decode_dirents(&buf[..n.min(buf.len())]) {
                            Ok(mut d) => all.append(&mut d),
                            Err(m) => return O::Harness(format!("bad getdents64 output: {m}")),
                        },
                        Err(e) => return O::from_errno(e),
                    }
                }
                O::Harness("getdents64 never reached the end".into())
            }
            Op::GetdentsOnce { fd, size } => {
                let mut buf = vec![0u8; *size];
                match self.target.getdents64(self.fd(*fd), &mut buf) {
                    Ok(n) => match decode_dirents(&buf[..n.min(*size)]) {
                        Ok(d) => O::Val(d.len() as i64),
                        Err(m) => O::Harness(format!("bad getdents64 output: {m}")),
                    },
                    Err(e) => O::from_errno(e),
                }
            }
            Op::Truncate { path, len } => unit(self.target.truncate(path, *len)),
            Op::Ftruncate { fd, len } => unit(self.target.ftruncate(self.fd(*fd), *len)),
            Op::Fallocate { fd, mode, off, len } => {
                unit(self.target.fallocate(self.fd(*fd), *mode, *off, *len))
            }
            Op::Ioctl { fd, request, arg } => {
                let mut buf = arg.clone();
                match self.target.ioctl(self.fd(*fd), *request, &mut buf) {
                    Ok(_) => O::Bytes(buf),
                    Err(e) => O::from_errno(e),
                }
            }
            Op::Dup { fd, to } => {
                let r = self.target.dup(self.fd(*fd));
                self.store(*to, r)
            }
            Op::Dup2 { old, new, to } => {
                let r = self.target.dup2(self.fd(*old), self.fd(*new));
                self.store(*to, r)
            }
            Op::Dup3 {
                old,
                new,
                flags,
                to,
            } => {
                let r = self.target.dup3(self.fd(*old), self.fd(*new), *flags);
                self.store(*to, r)
            }
            Op::Fcntl { fd, cmd, arg, to } => {
                let r = self.target.fcntl(self.fd(*fd), *cmd, *arg);
                match to {
                    Some(to) => self.store(*to, r),
                    None => match r {
                        Ok(v) => O::Val(v as i64),
                        Err(e) => O::from_errno(e),
                    },
                }
            }
            Op::Chdir(path) => unit(self.target.chdir(path)),
            Op::Fchdir(fd) => unit(self.target.fchdir(self.fd(*fd))),
            Op::Getcwd { size } => {
                let mut buf = vec![0u8; *size];
                match self.target.getcwd(&mut buf) {
                    Ok(n) => {
                        let n = n.min(*size);
                        let s = &buf[..n];
                        O::Bytes(s.strip_suffix(b"\0").unwrap_or(s).to_vec())
                    }
                    Err(e) => O::from_errno(e),
                }
            }
            Op::Fsync(fd) => unit(self.target.fsync(self.fd(*fd))),
            Op::Fdatasync(fd) => unit(self.target.fdatasync(self.fd(*fd))),
            Op::MountTmpfs(path) => unit(self.target.mount_tmpfs(path, false)),
            Op::MountTmpfsRo(path) => unit(self.target.mount_tmpfs(path, true)),
            Op::Remount { path, read_only } => unit(self.target.remount(path, *read_only)),
            Op::Umount2 { path, flags } => unit(self.target.umount2(path, *flags)),
            Op::SetXattr {
                on,
                name,
                value,
                flags,
            } => unit(match on {
                XattrOn::Path(p) => self.target.setxattr(p, name, value, *flags),
                XattrOn::Link(p) => self.target.lsetxattr(p, name, value, *flags),
                XattrOn::Fd(fd) => self.target.fsetxattr(self.fd(*fd), name, value, *flags),
            }),
            Op::GetXattr { on, name, size } => {
                let mut buf = vec![0u8; *size];
                let r = match on {
                    XattrOn::Path(p) => self.target.getxattr(p, name, &mut buf),
                    XattrOn::Link(p) => self.target.lgetxattr(p, name, &mut buf),
                    XattrOn::Fd(fd) => self.target.fgetxattr(self.fd(*fd), name, &mut buf),
                };
                sized(r, buf)
            }
            Op::ListXattr { on, size } => {
                let mut buf = vec![0u8; *size];
                let r = match on {
                    XattrOn::Path(p) => self.target.listxattr(p, &mut buf),
                    XattrOn::Link(p) => self.target.llistxattr(p, &mut buf),
                    XattrOn::Fd(fd) => self.target.flistxattr(self.fd(*fd), &mut buf),
                };
                sized(r, buf)
            }
            Op::RemoveXattr { on, name } => unit(match on {
                XattrOn::Path(p) => self.target.removexattr(p, name),
                XattrOn::Link(p) => self.target.lremovexattr(p, name),
                XattrOn::Fd(fd) => self.target.fremovexattr(self.fd(*fd), name),
            }),
            Op::Mkfifo { path, mode } => unit(self.target.mkfifo(path, *mode)),
            Op::SetCreds { uid, gid, groups } => {
                self.close_all();
                let _ = self.target.chdir(b"/");
                let creds = Credentials::user(*uid, *gid).with_groups(groups.clone());
                // Switching to the identity we already have is a no-op (an unprivileged
                // host process could not call setgroups again).
                let switched = if creds == self.creds {
                    Ok(())
                } else {
                    self.target.set_credentials(&creds)
                };
                match switched {
                    Ok(()) => {
                        self.creds = creds;
                        self.target.umask(0o022);
                        match self.target.chdir(b"/") {
                            Ok(()) => O::Ok,
                            Err(e) => O::from_errno(e),
                        }
                    }
                    Err(m) => O::Harness(m),
                }
            }
            Op::SnapTimes(path) => match self.stat_of(path) {
                Ok(s) => {
                    self.snapshot = Some([s.atime, s.mtime, s.ctime]);
                    std::thread::sleep(CLOCK_TICK);
                    O::Ok
                }
                Err(e) => O::from_errno(e),
            },
            Op::TimesSince(path) => match (self.stat_of(path), self.snapshot) {
                (Ok(s), Some([a, m, c])) => O::Times {
                    atime: Moved::of(a, s.atime),
                    mtime: Moved::of(m, s.mtime),
                    ctime: Moved::of(c, s.ctime),
                },
                (Err(e), _) => O::from_errno(e),
                (Ok(_), None) => O::Harness("TimesSince without SnapTimes".into()),
            },
            Op::ExactTimes(path) => match self.stat_of(path) {
                Ok(s) => O::Exact([(s.atime.sec, s.atime.nsec), (s.mtime.sec, s.mtime.nsec)]),
                Err(e) => O::from_errno(e),
            },
            Op::Contents(path) => self.contents(path),
        }
    }

    fn contents(&mut self, path: &[u8]) -> Outcome {
        let fd = match self
            .target
            .openat(libc::AT_FDCWD, path, libc::O_RDONLY | libc::O_CLOEXEC, 0)
        {
            Ok(fd) => fd,
            Err(e) => return Outcome::from_errno(e),
        };
        let mut all = Vec::new();
        let mut buf = vec![0u8; 65536];
        let r = loop {
            match self.target.read(fd, &mut buf) {
                Ok(0) => break Outcome::Bytes(std::mem::take(&mut all)),
                Ok(n) => all.extend_from_slice(&buf[..n.min(buf.len())]),
                Err(e) => break Outcome::from_errno(e),
            }
            if all.len() > 64 << 20 {
                break Outcome::Harness("file larger than 64 MiB".into());
            }
        };
        let _ = self.target.close(fd);
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(name: &[u8], d_type: u8) -> Vec<u8> {
        let reclen = (19 + name.len() + 1).next_multiple_of(8);
        let mut r = vec![0u8; reclen];
        r[..8].copy_from_slice(&7u64.to_ne_bytes());
        r[8..16].copy_from_slice(&1i64.to_ne_bytes());
        r[16..18].copy_from_slice(&(reclen as u16).to_ne_bytes());
        r[18] = d_type;
        r[19..19 + name.len()].copy_from_slice(name);
        r
    }

    #[test]
    fn decodes_linux_dirent64_records() {
        let mut buf = record(b".", libc::DT_DIR);
        buf.extend(record(b"a-longer-name", libc::DT_REG));
        buf.extend(record(b"l", libc::DT_LNK));
        let d = decode_dirents(&buf).unwrap();
        assert_eq!(
            d,
            vec![
                (b".".to_vec(), libc::DT_DIR),
                (b"a-longer-name".to_vec(), libc::DT_REG),
                (b"l".to_vec(), libc::DT_LNK)
            ]
        );
    }

    #[test]
    fn rejects_malformed_records() {
        let mut bad = record(b"x", libc::DT_REG);
        bad[16] = 200; // reclen beyond the buffer
        assert!(decode_dirents(&bad).is_err());
        let mut bad = record(b"x", libc::DT_REG);
        bad[16] = 3; // reclen smaller than the header
        assert!(decode_dirents(&bad).is_err());
        let mut unterminated = record(b"abcd", libc::DT_REG);
        let n = unterminated.len();
        for b in &mut unterminated[19..n] {
            *b = b'z';
        }
        assert!(decode_dirents(&unterminated).is_err());
        assert!(decode_dirents(&[0u8; 5]).is_err());
    }
}
