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
//!
//! This file is the target (one raw system call per method); `backend` forks and
//! sandboxes the child that drives it.

mod backend;

use std::ffi::CString;
use std::io::{IoSlice, IoSliceMut};

use scalevfs::{Credentials, Errno, Stat, SysResult, Timespec};

use crate::target::Target;

pub use backend::{is_tmpfs, HostBackend};

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
    fn mount_tmpfs(&mut self, path: &[u8], read_only: bool) -> SysResult<()> {
        let p = cpath(path)?;
        let flags = if read_only { libc::MS_RDONLY } else { 0 };
        // SAFETY: NUL-terminated strings; no data argument.
        unit(unsafe {
            libc::syscall(
                libc::SYS_mount,
                c"tmpfs".as_ptr(),
                p.as_ptr(),
                c"tmpfs".as_ptr(),
                flags,
                std::ptr::null::<u8>(),
            )
        })
    }
    fn remount(&mut self, path: &[u8], read_only: bool) -> SysResult<()> {
        let p = cpath(path)?;
        // A remount changes the superblock for every mount of it, in any namespace. So
        // only what the script mounted is ever remounted: a path on the case root's file
        // system is no mount root (the case directory is a plain directory), and the
        // kernel would refuse it, with EPERM without CAP_SYS_ADMIN (`may_mount`, dropped
        // with root) and EINVAL with it; say so without asking it.
        let dev = |p: &std::ffi::CStr| {
            let mut st = std::mem::MaybeUninit::<libc::stat>::zeroed();
            // SAFETY: `p` is NUL-terminated; `st` is writable for a `struct stat`.
            unit(unsafe {
                libc::syscall(
                    libc::SYS_newfstatat,
                    libc::AT_FDCWD,
                    p.as_ptr(),
                    st.as_mut_ptr(),
                    0,
                )
            })
            // SAFETY: zeroed, then filled by the kernel.
            .map(|()| unsafe { st.assume_init() }.st_dev)
        };
        if dev(&p)? == dev(c"/")? {
            // SAFETY: no arguments.
            let root = unsafe { libc::geteuid() } == 0;
            return Err(if root { Errno::EINVAL } else { Errno::EPERM });
        }
        let flags = libc::MS_REMOUNT | if read_only { libc::MS_RDONLY } else { 0 };
        // SAFETY: `p` is NUL-terminated; the other pointers are NULL, as remount allows.
        unit(unsafe {
            libc::syscall(
                libc::SYS_mount,
                std::ptr::null::<u8>(),
                p.as_ptr(),
                std::ptr::null::<u8>(),
                flags,
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
