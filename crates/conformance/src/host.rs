//! The host kernel as a [`Target`], and the [`HostBackend`] that runs scripts on it.
//!
//! Each script runs in a forked child process so that it can change cwd, umask and
//! credentials without touching the test process:
//!
//! 1. The parent makes a fresh, empty case directory under the backend's base directory
//!    (a tmpfs under `/dev/shm` by default, or any directory, e.g. a FUSE mount).
//! 2. The child moves its result pipe to the highest fd the rlimit allows and closes every
//!    other fd (0, 1 and 2 included), so fds are allocated from 0 exactly as in a fresh
//!    `scalevfs::Process` and fd numbers are comparable.
//! 3. It `chroot`s into the case directory, so absolute paths, `..` at the root and
//!    `getcwd` behave as they do in a `Vfs` whose root is that directory.
//! 4. It runs the steps with raw system calls (not libc wrappers that emulate flags, e.g.
//!    `fchmodat` or `faccessat`), dropping privileges with setgroups/setresgid/setresuid
//!    when a script asks, and streams one JSON outcome per line back through the pipe.
//!
//! This needs root (CAP_SYS_CHROOT, CAP_SETUID, CAP_CHOWN), as in CI. [`HostBackend::new`]
//! reports clearly when it is not available.

use std::ffi::CString;
use std::io::{IoSlice, IoSliceMut};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use scalevfs::{Credentials, Errno, Stat, SysResult, Timespec};

use crate::op::{CompareOptions, Outcome};
use crate::runner::{run_script, Backend};
use crate::script::Script;
use crate::target::Target;

/// `statfs.f_type` of tmpfs.
const TMPFS_MAGIC: i64 = 0x0102_1994;

fn ok(r: libc::c_long) -> SysResult<libc::c_long> {
    if r < 0 {
        Err(Errno::last_os_error())
    } else {
        Ok(r)
    }
}

fn unit(r: libc::c_long) -> SysResult<()> {
    ok(r).map(|_| ())
}

/// A NUL-terminated copy of a path. Linux cannot receive an embedded NUL; scripts never
/// contain one, but a generator might, so it is `EINVAL` rather than a panic.
fn cpath(p: &[u8]) -> SysResult<CString> {
    CString::new(p).map_err(|_| Errno::EINVAL)
}

fn ts(sec: i64, nsec: i64) -> Timespec {
    Timespec { sec, nsec }
}

// The casts are no-ops on x86_64 but not on every architecture (aarch64 has a u32 nlink).
#[allow(clippy::unnecessary_cast)]
fn from_stat(st: &libc::stat) -> Stat {
    Stat {
        dev: st.st_dev,
        ino: st.st_ino,
        mode: st.st_mode,
        nlink: st.st_nlink as u64,
        uid: st.st_uid,
        gid: st.st_gid,
        rdev: st.st_rdev,
        size: st.st_size,
        blksize: st.st_blksize as i64,
        blocks: st.st_blocks,
        atime: ts(st.st_atime, st.st_atime_nsec),
        mtime: ts(st.st_mtime, st.st_mtime_nsec),
        ctime: ts(st.st_ctime, st.st_ctime_nsec),
    }
}

/// The buffer argument of `getxattr`/`listxattr`: NULL for a size query, as callers pass.
fn out_ptr(buf: &mut [u8]) -> *mut u8 {
    if buf.is_empty() {
        std::ptr::null_mut()
    } else {
        buf.as_mut_ptr()
    }
}

/// `setxattr` or `lsetxattr` (`nr`).
fn path_setxattr(
    nr: libc::c_long,
    path: &[u8],
    name: &[u8],
    value: &[u8],
    flags: i32,
) -> SysResult<()> {
    let (p, n) = (cpath(path)?, cpath(name)?);
    // SAFETY: both strings are NUL-terminated; `value` is readable for its length.
    unit(unsafe {
        libc::syscall(
            nr,
            p.as_ptr(),
            n.as_ptr(),
            value.as_ptr(),
            value.len(),
            flags,
        )
    })
}

/// `getxattr` or `lgetxattr` (`nr`).
fn path_getxattr(nr: libc::c_long, path: &[u8], name: &[u8], buf: &mut [u8]) -> SysResult<usize> {
    let (p, n) = (cpath(path)?, cpath(name)?);
    // SAFETY: both strings are NUL-terminated; `out_ptr(buf)` is NULL (size 0) or
    // writable for `buf.len()` bytes.
    ok(unsafe { libc::syscall(nr, p.as_ptr(), n.as_ptr(), out_ptr(buf), buf.len()) })
        .map(|v| v as usize)
}

/// `listxattr` or `llistxattr` (`nr`).
fn path_listxattr(nr: libc::c_long, path: &[u8], buf: &mut [u8]) -> SysResult<usize> {
    let p = cpath(path)?;
    // SAFETY: `p` is NUL-terminated; `out_ptr(buf)` is NULL (size 0) or writable for
    // `buf.len()` bytes.
    ok(unsafe { libc::syscall(nr, p.as_ptr(), out_ptr(buf), buf.len()) }).map(|v| v as usize)
}

/// `removexattr` or `lremovexattr` (`nr`).
fn path_removexattr(nr: libc::c_long, path: &[u8], name: &[u8]) -> SysResult<()> {
    let (p, n) = (cpath(path)?, cpath(name)?);
    // SAFETY: both strings are NUL-terminated.
    unit(unsafe { libc::syscall(nr, p.as_ptr(), n.as_ptr()) })
}

/// The calling process's view of the host kernel. Only meaningful inside the child that
/// [`HostBackend`] forks (after `chroot`), but usable anywhere.
#[derive(Default)]
pub struct HostTarget;

impl Target for HostTarget {
    fn openat(&mut self, dirfd: i32, path: &[u8], flags: i32, mode: u32) -> SysResult<i32> {
        let p = cpath(path)?;
        // SAFETY: `p` is a valid NUL-terminated string for the duration of the call.
        ok(unsafe { libc::syscall(libc::SYS_openat, dirfd, p.as_ptr(), flags, mode) })
            .map(|v| v as i32)
    }
    fn close(&mut self, fd: i32) -> SysResult<()> {
        // SAFETY: closing an fd number has no memory-safety preconditions.
        unit(unsafe { libc::close(fd) } as libc::c_long)
    }
    fn read(&mut self, fd: i32, buf: &mut [u8]) -> SysResult<usize> {
        // SAFETY: `buf` is valid for `buf.len()` writable bytes.
        ok(unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) } as libc::c_long)
            .map(|v| v as usize)
    }
    fn write(&mut self, fd: i32, buf: &[u8]) -> SysResult<usize> {
        // SAFETY: `buf` is valid for `buf.len()` readable bytes.
        ok(unsafe { libc::write(fd, buf.as_ptr().cast(), buf.len()) } as libc::c_long)
            .map(|v| v as usize)
    }
    fn pread64(&mut self, fd: i32, buf: &mut [u8], off: i64) -> SysResult<usize> {
        // SAFETY: `buf` is valid for `buf.len()` writable bytes.
        ok(unsafe { libc::pread64(fd, buf.as_mut_ptr().cast(), buf.len(), off) } as libc::c_long)
            .map(|v| v as usize)
    }
    fn pwrite64(&mut self, fd: i32, buf: &[u8], off: i64) -> SysResult<usize> {
        // SAFETY: `buf` is valid for `buf.len()` readable bytes.
        ok(unsafe { libc::pwrite64(fd, buf.as_ptr().cast(), buf.len(), off) } as libc::c_long)
            .map(|v| v as usize)
    }
    fn readv(&mut self, fd: i32, bufs: &mut [IoSliceMut<'_>]) -> SysResult<usize> {
        // SAFETY: IoSliceMut is ABI-compatible with `struct iovec`; each points to valid
        // writable memory for the duration of the call.
        ok(unsafe { libc::readv(fd, bufs.as_mut_ptr().cast(), bufs.len() as i32) } as libc::c_long)
            .map(|v| v as usize)
    }
    fn writev(&mut self, fd: i32, bufs: &[IoSlice<'_>]) -> SysResult<usize> {
        // SAFETY: IoSlice is ABI-compatible with `struct iovec`; each points to valid memory.
        ok(unsafe { libc::writev(fd, bufs.as_ptr().cast(), bufs.len() as i32) } as libc::c_long)
            .map(|v| v as usize)
    }
    fn preadv(&mut self, fd: i32, bufs: &mut [IoSliceMut<'_>], off: i64) -> SysResult<usize> {
        // SAFETY: as in `readv`.
        ok(
            unsafe { libc::preadv64(fd, bufs.as_mut_ptr().cast(), bufs.len() as i32, off) }
                as libc::c_long,
        )
        .map(|v| v as usize)
    }
    fn pwritev(&mut self, fd: i32, bufs: &[IoSlice<'_>], off: i64) -> SysResult<usize> {
        // SAFETY: as in `writev`.
        ok(
            unsafe { libc::pwritev64(fd, bufs.as_ptr().cast(), bufs.len() as i32, off) }
                as libc::c_long,
        )
        .map(|v| v as usize)
    }
    fn copy_file_range(
        &mut self,
        fd_in: i32,
        off_in: Option<&mut i64>,
        fd_out: i32,
        off_out: Option<&mut i64>,
        len: usize,
        flags: u32,
    ) -> SysResult<usize> {
        let p = |o: Option<&mut i64>| o.map_or(std::ptr::null_mut(), |v| v as *mut i64);
        // SAFETY: the offsets are null or point to live i64s for the call.
        ok(unsafe {
            libc::syscall(
                libc::SYS_copy_file_range,
                fd_in,
                p(off_in),
                fd_out,
                p(off_out),
                len,
                flags,
            )
        })
        .map(|v| v as usize)
    }
    fn lseek(&mut self, fd: i32, off: i64, whence: i32) -> SysResult<i64> {
        // SAFETY: no pointers involved.
        ok(unsafe { libc::syscall(libc::SYS_lseek, fd, off, whence) })
    }
    fn newfstatat(&mut self, dirfd: i32, path: &[u8], flags: i32) -> SysResult<Stat> {
        let p = cpath(path)?;
        // SAFETY: all-zero bytes are a valid `struct stat`.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: `p` is NUL-terminated and `st` is a writable `struct stat`.
        unit(unsafe {
            libc::syscall(
                libc::SYS_newfstatat,
                dirfd,
                p.as_ptr(),
                &mut st as *mut libc::stat,
                flags,
            )
        })?;
        Ok(from_stat(&st))
    }
    fn fstat(&mut self, fd: i32) -> SysResult<Stat> {
        // SAFETY: all-zero bytes are a valid `struct stat`.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: `st` is a writable `struct stat`.
        unit(unsafe { libc::syscall(libc::SYS_fstat, fd, &mut st as *mut libc::stat) })?;
        Ok(from_stat(&st))
    }
    fn fchmodat(&mut self, dirfd: i32, path: &[u8], mode: u32, flags: i32) -> SysResult<()> {
        let p = cpath(path)?;
        // fchmodat2 (Linux 6.6) is the system call that honours flags; older kernels get
        // fchmodat for the flag-less calls (the prelude and most cases).
        // SAFETY: `p` is NUL-terminated.
        let r = unit(unsafe { libc::syscall(libc::SYS_fchmodat2, dirfd, p.as_ptr(), mode, flags) });
        if r == Err(Errno::ENOSYS) && flags == 0 {
            // SAFETY: `p` is NUL-terminated.
            return unit(unsafe { libc::syscall(libc::SYS_fchmodat, dirfd, p.as_ptr(), mode) });
        }
        r
    }
    fn fchmod(&mut self, fd: i32, mode: u32) -> SysResult<()> {
        // SAFETY: no pointers involved.
        unit(unsafe { libc::syscall(libc::SYS_fchmod, fd, mode) })
    }
    fn fchownat(
        &mut self,
        dirfd: i32,
        path: &[u8],
        uid: u32,
        gid: u32,
        flags: i32,
    ) -> SysResult<()> {
        let p = cpath(path)?;
        // SAFETY: `p` is NUL-terminated.
        unit(unsafe { libc::syscall(libc::SYS_fchownat, dirfd, p.as_ptr(), uid, gid, flags) })
    }
    fn fchown(&mut self, fd: i32, uid: u32, gid: u32) -> SysResult<()> {
        // SAFETY: no pointers involved.
        unit(unsafe { libc::syscall(libc::SYS_fchown, fd, uid, gid) })
    }
    fn utimensat(
        &mut self,
        dirfd: i32,
        path: Option<&[u8]>,
        times: Option<[Timespec; 2]>,
        flags: i32,
    ) -> SysResult<()> {
        let p = path.map(cpath).transpose()?;
        let pp = p.as_ref().map_or(std::ptr::null(), |p| p.as_ptr());
        let t = times.map(|t| {
            [
                libc::timespec {
                    tv_sec: t[0].sec,
                    tv_nsec: t[0].nsec,
                },
                libc::timespec {
                    tv_sec: t[1].sec,
                    tv_nsec: t[1].nsec,
                },
            ]
        });
        let tp = t.as_ref().map_or(std::ptr::null(), |t| t.as_ptr());
        // SAFETY: `pp` is NULL or NUL-terminated; `tp` is NULL or two timespecs.
        unit(unsafe { libc::syscall(libc::SYS_utimensat, dirfd, pp, tp, flags) })
    }
    fn faccessat(&mut self, dirfd: i32, path: &[u8], mode: i32, flags: i32) -> SysResult<()> {
        let p = cpath(path)?;
        // SAFETY: `p` is NUL-terminated.
        unit(unsafe { libc::syscall(libc::SYS_faccessat2, dirfd, p.as_ptr(), mode, flags) })
    }
    fn umask(&mut self, mask: u32) -> u32 {
        // SAFETY: no pointers involved.
        unsafe { libc::umask(mask) }
    }
    fn mkdirat(&mut self, dirfd: i32, path: &[u8], mode: u32) -> SysResult<()> {
        let p = cpath(path)?;
        // SAFETY: `p` is NUL-terminated.
        unit(unsafe { libc::syscall(libc::SYS_mkdirat, dirfd, p.as_ptr(), mode) })
    }
    fn unlinkat(&mut self, dirfd: i32, path: &[u8], flags: i32) -> SysResult<()> {
        let p = cpath(path)?;
        // SAFETY: `p` is NUL-terminated.
        unit(unsafe { libc::syscall(libc::SYS_unlinkat, dirfd, p.as_ptr(), flags) })
    }
    fn renameat2(&mut self, od: i32, old: &[u8], nd: i32, new: &[u8], flags: u32) -> SysResult<()> {
        let (o, n) = (cpath(old)?, cpath(new)?);
        // SAFETY: both paths are NUL-terminated.
        unit(unsafe { libc::syscall(libc::SYS_renameat2, od, o.as_ptr(), nd, n.as_ptr(), flags) })
    }
    fn linkat(&mut self, od: i32, old: &[u8], nd: i32, new: &[u8], flags: i32) -> SysResult<()> {
        let (o, n) = (cpath(old)?, cpath(new)?);
        // SAFETY: both paths are NUL-terminated.
        unit(unsafe { libc::syscall(libc::SYS_linkat, od, o.as_ptr(), nd, n.as_ptr(), flags) })
    }
    fn symlinkat(&mut self, target: &[u8], dirfd: i32, path: &[u8]) -> SysResult<()> {
        let (t, p) = (cpath(target)?, cpath(path)?);
        // SAFETY: both strings are NUL-terminated.
        unit(unsafe { libc::syscall(libc::SYS_symlinkat, t.as_ptr(), dirfd, p.as_ptr()) })
    }
    fn readlinkat(&mut self, dirfd: i32, path: &[u8], buf: &mut [u8]) -> SysResult<usize> {
        let p = cpath(path)?;
        // SAFETY: `p` is NUL-terminated; `buf` is writable for its length.
        ok(unsafe {
            libc::syscall(
                libc::SYS_readlinkat,
                dirfd,
                p.as_ptr(),
                buf.as_mut_ptr(),
                buf.len(),
            )
        })
        .map(|v| v as usize)
    }
    fn getdents64(&mut self, fd: i32, buf: &mut [u8]) -> SysResult<usize> {
        // SAFETY: `buf` is writable for its length.
        ok(unsafe { libc::syscall(libc::SYS_getdents64, fd, buf.as_mut_ptr(), buf.len()) })
            .map(|v| v as usize)
    }
    fn truncate(&mut self, path: &[u8], len: i64) -> SysResult<()> {
        let p = cpath(path)?;
        // SAFETY: `p` is NUL-terminated.
        unit(unsafe { libc::syscall(libc::SYS_truncate, p.as_ptr(), len) })
    }
    fn ftruncate(&mut self, fd: i32, len: i64) -> SysResult<()> {
        // SAFETY: no pointers involved.
        unit(unsafe { libc::syscall(libc::SYS_ftruncate, fd, len) })
    }
    fn fallocate(&mut self, fd: i32, mode: i32, off: i64, len: i64) -> SysResult<()> {
        // SAFETY: no pointers involved.
        unit(unsafe { libc::syscall(libc::SYS_fallocate, fd, mode, off, len) })
    }
    fn ioctl(&mut self, fd: i32, request: u32, arg: &mut [u8]) -> SysResult<i32> {
        // SAFETY: the kernel reads or writes at most what the request uses; the harness
        // passes as many bytes as `scalevfs::ioctl_arg` says it does (or a null pointer).
        ok(unsafe { libc::syscall(libc::SYS_ioctl, fd, request, out_ptr(arg)) }).map(|v| v as i32)
    }
    fn dup(&mut self, fd: i32) -> SysResult<i32> {
        // SAFETY: no pointers involved.
        ok(unsafe { libc::syscall(libc::SYS_dup, fd) }).map(|v| v as i32)
    }
    fn dup2(&mut self, old: i32, new: i32) -> SysResult<i32> {
        // SAFETY: no pointers involved.
        ok(unsafe { libc::syscall(libc::SYS_dup2, old, new) }).map(|v| v as i32)
    }
    fn dup3(&mut self, old: i32, new: i32, flags: i32) -> SysResult<i32> {
        // SAFETY: no pointers involved.
        ok(unsafe { libc::syscall(libc::SYS_dup3, old, new, flags) }).map(|v| v as i32)
    }
    fn fcntl(&mut self, fd: i32, cmd: i32, arg: i64) -> SysResult<i32> {
        // SAFETY: only integer-argument commands reach here (the Op type has no pointer).
        ok(unsafe { libc::syscall(libc::SYS_fcntl, fd, cmd, arg) }).map(|v| v as i32)
    }
    fn chdir(&mut self, path: &[u8]) -> SysResult<()> {
        let p = cpath(path)?;
        // SAFETY: `p` is NUL-terminated.
        unit(unsafe { libc::syscall(libc::SYS_chdir, p.as_ptr()) })
    }
    fn fchdir(&mut self, fd: i32) -> SysResult<()> {
        // SAFETY: no pointers involved.
        unit(unsafe { libc::syscall(libc::SYS_fchdir, fd) })
    }
    fn getcwd(&mut self, buf: &mut [u8]) -> SysResult<usize> {
        // SAFETY: `buf` is writable for its length.
        ok(unsafe { libc::syscall(libc::SYS_getcwd, buf.as_mut_ptr(), buf.len()) })
            .map(|v| v as usize)
    }
    fn mount_tmpfs(&mut self, path: &[u8]) -> SysResult<()> {
        let p = cpath(path)?;
        // SAFETY: NUL-terminated strings; no data argument.
        unit(unsafe {
            libc::syscall(
                libc::SYS_mount,
                c"tmpfs".as_ptr(),
                p.as_ptr(),
                c"tmpfs".as_ptr(),
                0u64,
                std::ptr::null::<u8>(),
            )
        })
    }
    fn umount2(&mut self, path: &[u8], flags: i32) -> SysResult<()> {
        let p = cpath(path)?;
        // SAFETY: `p` is NUL-terminated.
        unit(unsafe { libc::syscall(libc::SYS_umount2, p.as_ptr(), flags) })
    }
    fn fsync(&mut self, fd: i32) -> SysResult<()> {
        // SAFETY: no pointers involved.
        unit(unsafe { libc::syscall(libc::SYS_fsync, fd) })
    }
    fn setxattr(&mut self, path: &[u8], name: &[u8], value: &[u8], flags: i32) -> SysResult<()> {
        path_setxattr(libc::SYS_setxattr, path, name, value, flags)
    }
    fn lsetxattr(&mut self, path: &[u8], name: &[u8], value: &[u8], flags: i32) -> SysResult<()> {
        path_setxattr(libc::SYS_lsetxattr, path, name, value, flags)
    }
    fn fsetxattr(&mut self, fd: i32, name: &[u8], value: &[u8], flags: i32) -> SysResult<()> {
        let n = cpath(name)?;
        // SAFETY: `n` is NUL-terminated; `value` is readable for its length.
        unit(unsafe {
            libc::syscall(
                libc::SYS_fsetxattr,
                fd,
                n.as_ptr(),
                value.as_ptr(),
                value.len(),
                flags,
            )
        })
    }
    fn getxattr(&mut self, path: &[u8], name: &[u8], buf: &mut [u8]) -> SysResult<usize> {
        path_getxattr(libc::SYS_getxattr, path, name, buf)
    }
    fn lgetxattr(&mut self, path: &[u8], name: &[u8], buf: &mut [u8]) -> SysResult<usize> {
        path_getxattr(libc::SYS_lgetxattr, path, name, buf)
    }
    fn fgetxattr(&mut self, fd: i32, name: &[u8], buf: &mut [u8]) -> SysResult<usize> {
        let n = cpath(name)?;
        // SAFETY: `n` is NUL-terminated; `out_ptr(buf)` is NULL (size 0) or writable for
        // `buf.len()` bytes.
        ok(unsafe { libc::syscall(libc::SYS_fgetxattr, fd, n.as_ptr(), out_ptr(buf), buf.len()) })
            .map(|v| v as usize)
    }
    fn listxattr(&mut self, path: &[u8], buf: &mut [u8]) -> SysResult<usize> {
        path_listxattr(libc::SYS_listxattr, path, buf)
    }
    fn llistxattr(&mut self, path: &[u8], buf: &mut [u8]) -> SysResult<usize> {
        path_listxattr(libc::SYS_llistxattr, path, buf)
    }
    fn flistxattr(&mut self, fd: i32, buf: &mut [u8]) -> SysResult<usize> {
        // SAFETY: `out_ptr(buf)` is NULL (size 0) or writable for `buf.len()` bytes.
        ok(unsafe { libc::syscall(libc::SYS_flistxattr, fd, out_ptr(buf), buf.len()) })
            .map(|v| v as usize)
    }
    fn removexattr(&mut self, path: &[u8], name: &[u8]) -> SysResult<()> {
        path_removexattr(libc::SYS_removexattr, path, name)
    }
    fn lremovexattr(&mut self, path: &[u8], name: &[u8]) -> SysResult<()> {
        path_removexattr(libc::SYS_lremovexattr, path, name)
    }
    fn fremovexattr(&mut self, fd: i32, name: &[u8]) -> SysResult<()> {
        let n = cpath(name)?;
        // SAFETY: `n` is NUL-terminated.
        unit(unsafe { libc::syscall(libc::SYS_fremovexattr, fd, n.as_ptr()) })
    }
    fn mkfifo(&mut self, path: &[u8], mode: u32) -> SysResult<()> {
        let p = cpath(path)?;
        // SAFETY: `p` is NUL-terminated.
        unit(unsafe {
            libc::syscall(
                libc::SYS_mknodat,
                libc::AT_FDCWD,
                p.as_ptr(),
                libc::S_IFIFO | (mode & 0o7777),
                0u64,
            )
        })
    }
    fn fdatasync(&mut self, fd: i32) -> SysResult<()> {
        // SAFETY: no pointers involved.
        unit(unsafe { libc::syscall(libc::SYS_fdatasync, fd) })
    }
    fn set_credentials(&mut self, c: &Credentials) -> Result<(), String> {
        // Order matters: groups and gid while still privileged, uid last.
        // SAFETY: `c.groups` is a valid array of `len` gids.
        let r = unsafe { libc::setgroups(c.groups.len(), c.groups.as_ptr()) };
        if r != 0 {
            return Err(format!("setgroups: {:?}", Errno::last_os_error()));
        }
        // SAFETY: no pointers involved.
        if unsafe { libc::setresgid(c.gid, c.gid, c.gid) } != 0 {
            return Err(format!("setresgid: {:?}", Errno::last_os_error()));
        }
        // SAFETY: no pointers involved.
        if unsafe { libc::setresuid(c.uid, c.uid, c.uid) } != 0 {
            return Err(format!("setresuid: {:?}", Errno::last_os_error()));
        }
        Ok(())
    }
}

/// Runs scripts on the host kernel, each in a fresh directory under `base`.
pub struct HostBackend {
    /// Created by us, removed on drop.
    base: PathBuf,
    tmpfs: bool,
    /// A tmpfs we mounted (and unmount on drop) when /dev/shm was not one.
    mount: Option<PathBuf>,
    next_case: AtomicU64,
}

static UNIQUE: AtomicU64 = AtomicU64::new(0);

fn unique_name() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    format!(
        "scalevfs-conformance-{}-{}-{}",
        std::process::id(),
        nanos,
        UNIQUE.fetch_add(1, Ordering::Relaxed)
    )
}

/// Whether `path` is on tmpfs.
pub fn is_tmpfs(path: &Path) -> Result<bool, String> {
    let p = CString::new(path.as_os_str().as_encoded_bytes())
        .map_err(|_| format!("{}: path contains NUL", path.display()))?;
    // SAFETY: all-zero bytes are a valid `struct statfs`.
    let mut sf: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: `p` is NUL-terminated and `sf` is writable.
    if unsafe { libc::statfs(p.as_ptr(), &mut sf) } != 0 {
        return Err(format!(
            "statfs({}): {}",
            path.display(),
            Errno::last_os_error()
        ));
    }
    Ok(sf.f_type as i64 == TMPFS_MAGIC)
}

fn require_root() -> Result<(), String> {
    // SAFETY: no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Err(
            "the host side of the conformance harness must run as root: it chroots \
                    into each case directory and drops to unprivileged uids for permission \
                    cases (CI runs as root)"
                .into(),
        );
    }
    Ok(())
}

impl HostBackend {
    /// A fresh directory on the tmpfs at `/dev/shm`, or, if that is not a tmpfs, on a
    /// private tmpfs mounted for this backend under the temp directory. Fails clearly if
    /// neither works or the process is not root.
    pub fn new() -> Result<HostBackend, String> {
        Self::new_tmpfs_under(Path::new("/dev/shm")).or_else(|e| {
            Self::private_tmpfs().map_err(|e2| format!("{e}; mounting a tmpfs failed too: {e2}"))
        })
    }

    /// Mount a tmpfs of our own (needs CAP_SYS_ADMIN) and use a directory on it.
    pub fn private_tmpfs() -> Result<HostBackend, String> {
        require_root()?;
        let mnt = std::env::temp_dir().join(unique_name());
        std::fs::create_dir(&mnt).map_err(|e| format!("mkdir {}: {e}", mnt.display()))?;
        let target = CString::new(mnt.as_os_str().as_encoded_bytes())
            .map_err(|_| "temp dir contains NUL".to_string())?;
        // SAFETY: all strings are NUL-terminated; data is NULL.
        let r = unsafe {
            libc::mount(
                c"tmpfs".as_ptr(),
                target.as_ptr(),
                c"tmpfs".as_ptr(),
                0,
                std::ptr::null(),
            )
        };
        if r != 0 {
            let e = Errno::last_os_error();
            let _ = std::fs::remove_dir(&mnt);
            return Err(format!("mount tmpfs on {}: {e}", mnt.display()));
        }
        let mut b = Self::in_dir(&mnt)?;
        b.tmpfs = true;
        b.mount = Some(mnt);
        Ok(b)
    }

    /// A fresh directory under `parent`, which must be on tmpfs.
    pub fn new_tmpfs_under(parent: &Path) -> Result<HostBackend, String> {
        if !is_tmpfs(parent)? {
            return Err(format!(
                "{} is not a tmpfs: the host reference must be Linux tmpfs (mount one, or \
                 use HostBackend::in_dir for other file systems)",
                parent.display()
            ));
        }
        let mut b = Self::in_dir(parent)?;
        b.tmpfs = true;
        Ok(b)
    }

    /// A fresh directory under any directory (e.g. a FUSE mount of scalevfs). Directory
    /// sizes are compared only if it is tmpfs.
    pub fn in_dir(parent: &Path) -> Result<HostBackend, String> {
        require_root()?;
        let base = parent.join(unique_name());
        std::fs::create_dir(&base).map_err(|e| format!("mkdir {}: {e}", base.display()))?;
        let tmpfs = is_tmpfs(&base)?;
        Ok(HostBackend {
            base,
            tmpfs,
            mount: None,
            next_case: AtomicU64::new(0),
        })
    }

    pub fn base(&self) -> &Path {
        &self.base
    }

    fn run_in(&self, dir: &Path, script: &Script) -> Vec<Outcome> {
        let croot = match CString::new(dir.as_os_str().as_encoded_bytes()) {
            Ok(c) => c,
            Err(_) => return vec![Outcome::Harness("case dir contains NUL".into())],
        };
        let mut fds = [0i32; 2];
        // SAFETY: `fds` is a writable array of two ints.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            return vec![Outcome::Harness(format!(
                "pipe2: {:?}",
                Errno::last_os_error()
            ))];
        }
        let (rfd, wfd) = (fds[0], fds[1]);
        // SAFETY: the child only runs the script with system calls and allocation (glibc
        // keeps malloc usable in a fork child), writes to its pipe and `_exit`s; it never
        // returns into the caller or touches locks other threads may hold (no stdio).
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            let e = Errno::last_os_error();
            // SAFETY: closing our own pipe fds.
            unsafe {
                libc::close(rfd);
                libc::close(wfd);
            }
            return vec![Outcome::Harness(format!("fork: {e:?}"))];
        }
        if pid == 0 {
            child_main(wfd, &croot, script);
        }
        // SAFETY: the parent's copy of the write end is ours to close.
        unsafe { libc::close(wfd) };
        let mut out = Vec::new();
        let mut buf = [0u8; 8192];
        loop {
            // SAFETY: `buf` is writable for its length.
            let n = unsafe { libc::read(rfd, buf.as_mut_ptr().cast(), buf.len()) };
            if n > 0 {
                out.extend_from_slice(&buf[..n as usize]);
            } else if n == 0 || Errno::last_os_error() != Errno::EINTR {
                break;
            }
        }
        // SAFETY: closing our own read end.
        unsafe { libc::close(rfd) };
        let mut status = 0;
        // SAFETY: `pid` is our child; `status` is writable.
        while unsafe { libc::waitpid(pid, &mut status, 0) } < 0 {
            if Errno::last_os_error() != Errno::EINTR {
                break;
            }
        }
        let mut outcomes: Vec<Outcome> = Vec::new();
        for line in out.split(|&c| c == b'\n').filter(|l| !l.is_empty()) {
            match serde_json::from_slice(line) {
                Ok(o) => outcomes.push(o),
                Err(e) => {
                    outcomes.push(Outcome::Harness(format!("undecodable child output: {e}")));
                    break;
                }
            }
        }
        let clean = libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0;
        if !clean && !matches!(outcomes.last(), Some(Outcome::Harness(_))) {
            outcomes.push(Outcome::Harness(format!(
                "host child died (wait status {status:#x})"
            )));
        }
        outcomes
    }
}

/// The forked child: never returns.
fn child_main(wfd: i32, root: &CString, script: &Script) -> ! {
    // SAFETY: plain system calls on fds and NUL-terminated strings we own, and a zeroed
    // `struct rlimit` (valid for all-zero bytes); the closure writes from a live buffer.
    unsafe {
        let mut rl: libc::rlimit = std::mem::zeroed();
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut rl);
        let hi = (rl.rlim_cur.min(1 << 20) as i32 - 1).max(64);
        let out = if libc::dup3(wfd, hi, libc::O_CLOEXEC) == hi {
            hi
        } else {
            libc::_exit(3)
        };
        if libc::syscall(libc::SYS_close_range, 0u32, (hi - 1) as u32, 0u32) != 0 {
            // Before Linux 5.9: close what a test process plausibly has open.
            for fd in 0..hi.min(65536) {
                libc::close(fd);
            }
        }
        libc::syscall(libc::SYS_close_range, (hi + 1) as u32, u32::MAX, 0u32);
        let send = |o: &Outcome| {
            let mut line = serde_json::to_vec(o).unwrap_or_else(|_| b"\"Ok\"".to_vec());
            line.push(b'\n');
            let mut rest = &line[..];
            while !rest.is_empty() {
                let n = libc::write(out, rest.as_ptr().cast(), rest.len());
                if n <= 0 {
                    if n < 0 && Errno::last_os_error() == Errno::EINTR {
                        continue;
                    }
                    libc::_exit(4);
                }
                rest = &rest[n as usize..];
            }
        };
        // A script that hangs the host (it should not) is killed and reported as a dead child.
        libc::alarm(60);
        // A script that mounts gets a mount namespace of its own, with nothing propagated
        // back out: its mounts die with this child, and the case directory can be removed.
        if script.mounts()
            && (libc::unshare(libc::CLONE_NEWNS) != 0
                || libc::mount(
                    std::ptr::null(),
                    c"/".as_ptr(),
                    std::ptr::null(),
                    libc::MS_REC | libc::MS_PRIVATE,
                    std::ptr::null(),
                ) != 0)
        {
            send(&Outcome::Harness(format!(
                "private mount namespace: {:?}",
                Errno::last_os_error()
            )));
            libc::_exit(0);
        }
        if libc::chroot(root.as_ptr()) != 0 || libc::chdir(c"/".as_ptr()) != 0 {
            send(&Outcome::Harness(format!(
                "chroot: {:?}",
                Errno::last_os_error()
            )));
            libc::_exit(0);
        }
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let mut t = HostTarget;
            run_script(&mut t, script, &mut |o| send(&o));
        }));
        if r.is_err() {
            send(&Outcome::Harness("panic in host child".into()));
        }
        libc::_exit(0)
    }
}

/// Clears the inode flags (`FS_IOC_SETFLAGS` 0) of every file and directory below `dir`,
/// so that it can be removed. Errors are ignored: what cannot be cleared stays.
fn clear_inode_flags(dir: &std::path::Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let clear = |p: &std::path::Path| {
        let Ok(c) = CString::new(p.as_os_str().as_encoded_bytes()) else {
            return;
        };
        let flags = libc::O_RDONLY | libc::O_NONBLOCK | libc::O_NOFOLLOW | libc::O_CLOEXEC;
        // SAFETY: `c` is NUL-terminated.
        let fd = unsafe { libc::open(c.as_ptr(), flags) };
        if fd >= 0 {
            let zero: libc::c_int = 0;
            // SAFETY: FS_IOC_SETFLAGS reads an int from the pointer; `fd` is ours.
            unsafe {
                libc::ioctl(fd, scalevfs::fileattr::FS_IOC_SETFLAGS as _, &zero);
                libc::close(fd);
            }
        }
    };
    clear(dir);
    for e in entries.flatten() {
        match e.file_type() {
            Ok(t) if t.is_dir() => clear_inode_flags(&e.path()),
            Ok(t) if t.is_file() => clear(&e.path()),
            _ => {}
        }
    }
}

impl Backend for HostBackend {
    fn describe(&self) -> String {
        format!(
            "host kernel in {}{}",
            self.base.display(),
            if self.tmpfs { " (tmpfs)" } else { "" }
        )
    }
    fn run(&self, script: &Script) -> Vec<Outcome> {
        let n = self.next_case.fetch_add(1, Ordering::Relaxed);
        let dir = self.base.join(format!("case-{n}"));
        if let Err(e) = std::fs::create_dir(&dir) {
            return vec![Outcome::Harness(format!("mkdir {}: {e}", dir.display()))];
        }
        let out = self.run_in(&dir, script);
        if std::fs::remove_dir_all(&dir).is_err() {
            // A case may leave an immutable or append-only file (chattr) behind.
            clear_inode_flags(&dir);
            let _ = std::fs::remove_dir_all(&dir);
        }
        out
    }
    fn compare_options(&self) -> CompareOptions {
        CompareOptions {
            ignore_dir_size: !self.tmpfs,
        }
    }
}

impl Drop for HostBackend {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.base);
        if let Some(mnt) = &self.mount {
            if let Ok(c) = CString::new(mnt.as_os_str().as_encoded_bytes()) {
                // SAFETY: `c` is NUL-terminated.
                unsafe { libc::umount2(c.as_ptr(), libc::MNT_DETACH) };
            }
            let _ = std::fs::remove_dir(mnt);
        }
    }
}
