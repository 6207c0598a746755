//! The system calls: one `svfs_*` function per [`Process`] method, each returning the
//! result or `-errno`.
//!
//! Every function here is `unsafe` only because it takes C pointers: each one's
//! `# Safety` is the same contract as the system call's (the pointer, unless `NULL`, is
//! valid for the reads or writes the call makes, for the sizes it is given). Handles
//! and descriptors need no care: bad ones are errors.

use std::ffi::{c_char, c_int, c_uint, c_ulong, c_void, CStr};
use std::io::{IoSlice, IoSliceMut};
use std::sync::Arc;

use libc::{mode_t, off_t, size_t, ssize_t};
use scalevfs_rs::{
    EpollEvent, Errno, FcntlArg, Flock, OpenHow, Process, Stat, SysResult, Timespec,
};

use crate::{guard, process, svfs_process};

/// Linux's `MAX_RW_COUNT`: one read or write moves at most this much (a page short of
/// 2 GiB); longer counts are clamped, as the kernel clamps them.
const MAX_RW_COUNT: usize = i32::MAX as usize & !4095;
/// `UIO_MAXIOV`.
const IOV_MAX: c_int = 1024;
/// `EP_MAX_EVENTS`.
const EP_MAX_EVENTS: c_int = i32::MAX / std::mem::size_of::<libc::epoll_event>() as c_int;

/// What a call returns, as the kernel's `long`.
trait Ret {
    fn ret(self) -> i64;
}
impl Ret for () {
    fn ret(self) -> i64 {
        0
    }
}
impl Ret for i32 {
    fn ret(self) -> i64 {
        self.into()
    }
}
impl Ret for u32 {
    fn ret(self) -> i64 {
        self.into()
    }
}
impl Ret for i64 {
    fn ret(self) -> i64 {
        self
    }
}
impl Ret for usize {
    fn ret(self) -> i64 {
        self as i64
    }
}

/// Runs `f` on the process `p` names: its result, or `-errno` (`-EBADF` for a bad
/// handle, `-EIO` for a panic).
fn call<T: Ret>(name: &str, p: *mut svfs_process, f: impl FnOnce(&Process) -> SysResult<T>) -> i64 {
    guard(name, -i64::from(libc::EIO), || {
        match process(name, p).and_then(|p| f(&p)) {
            Ok(v) => v.ret(),
            Err(e) => -i64::from(e.0),
        }
    })
}

/// [`call`] for a function returning `int`.
fn int_call<T: Ret>(
    name: &str,
    p: *mut svfs_process,
    f: impl FnOnce(&Process) -> SysResult<T>,
) -> c_int {
    call(name, p, f) as c_int
}

/// A NUL-terminated path as bytes: `EFAULT` for `NULL`.
///
/// # Safety
/// `path` is `NULL` or a NUL-terminated string that outlives `'a`.
unsafe fn cpath<'a>(path: *const c_char) -> SysResult<&'a [u8]> {
    if path.is_null() {
        return Err(Errno::EFAULT);
    }
    // SAFETY: the caller's contract: a NUL-terminated string that lives for 'a.
    Ok(unsafe { CStr::from_ptr(path) }.to_bytes())
}

/// `len` bytes at `ptr` for reading (an empty slice for `len == 0`, whatever `ptr`):
/// `EFAULT` for `NULL`.
///
/// # Safety
/// `ptr` is `NULL` or valid for reads of `len` bytes during `'a`.
unsafe fn in_buf<'a>(ptr: *const c_void, len: usize) -> SysResult<&'a [u8]> {
    if len == 0 {
        return Ok(&[]);
    }
    if ptr.is_null() {
        return Err(Errno::EFAULT);
    }
    // SAFETY: the caller's contract; non-NULL, `len` readable bytes.
    Ok(unsafe { std::slice::from_raw_parts(ptr.cast(), len) })
}

/// `len` bytes at `ptr` for writing (empty for `len == 0`): `EFAULT` for `NULL`.
///
/// # Safety
/// `ptr` is `NULL` or valid for writes of `len` bytes during `'a`, and nothing else
/// accesses them meanwhile.
unsafe fn out_buf<'a>(ptr: *mut c_void, len: usize) -> SysResult<&'a mut [u8]> {
    if len == 0 {
        return Ok(&mut []);
    }
    if ptr.is_null() {
        return Err(Errno::EFAULT);
    }
    // SAFETY: the caller's contract; non-NULL, `len` writable bytes, not aliased.
    Ok(unsafe { std::slice::from_raw_parts_mut(ptr.cast(), len) })
}

/// The `EFAULT` of a read or write with a `NULL` buffer comes after the descriptor's
/// `EBADF`, as in Linux (`fdget` first).
fn fault_after_fd<T>(p: &Process, fd: c_int) -> SysResult<T> {
    p.file(fd)?;
    Err(Errno::EFAULT)
}

/// Writes `v` to `out`: `EFAULT` for `NULL`.
///
/// # Safety
/// `out` is `NULL` or valid for a write of a `T`.
unsafe fn put<T>(out: *mut T, v: T) -> SysResult<()> {
    if out.is_null() {
        return Err(Errno::EFAULT);
    }
    // SAFETY: the caller's contract; non-NULL and writable. `write_unaligned` also
    // serves packed structs (`struct epoll_event` on x86-64).
    unsafe { out.write_unaligned(v) };
    Ok(())
}

/// Reads a `T` from `src`: `EFAULT` for `NULL`.
///
/// # Safety
/// `src` is `NULL` or valid for a read of a `T`.
unsafe fn get<T>(src: *const T) -> SysResult<T> {
    if src.is_null() {
        return Err(Errno::EFAULT);
    }
    // SAFETY: the caller's contract; non-NULL and readable.
    Ok(unsafe { src.read_unaligned() })
}

fn c_stat(s: &Stat) -> libc::stat {
    // SAFETY: `struct stat` is plain integers: all-zero is a valid value.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    st.st_dev = s.dev as _;
    st.st_ino = s.ino as _;
    st.st_mode = s.mode as _;
    st.st_nlink = s.nlink as _;
    st.st_uid = s.uid;
    st.st_gid = s.gid;
    st.st_rdev = s.rdev as _;
    st.st_size = s.size as _;
    st.st_blksize = s.blksize as _;
    st.st_blocks = s.blocks as _;
    st.st_atime = s.atime.sec as _;
    st.st_atime_nsec = s.atime.nsec as _;
    st.st_mtime = s.mtime.sec as _;
    st.st_mtime_nsec = s.mtime.nsec as _;
    st.st_ctime = s.ctime.sec as _;
    st.st_ctime_nsec = s.ctime.nsec as _;
    st
}

fn c_statx_time(t: Timespec) -> libc::statx_timestamp {
    // SAFETY: plain integers: all-zero is valid.
    let mut ts: libc::statx_timestamp = unsafe { std::mem::zeroed() };
    ts.tv_sec = t.sec;
    ts.tv_nsec = t.nsec as u32;
    ts
}

fn c_statx(s: &scalevfs_rs::Statx) -> libc::statx {
    // SAFETY: `struct statx` is plain integers: all-zero is a valid value.
    let mut x: libc::statx = unsafe { std::mem::zeroed() };
    x.stx_mask = s.mask;
    x.stx_blksize = s.blksize;
    x.stx_attributes = s.attributes;
    x.stx_nlink = s.nlink;
    x.stx_uid = s.uid;
    x.stx_gid = s.gid;
    x.stx_mode = s.mode as u16;
    x.stx_ino = s.ino;
    x.stx_size = s.size;
    x.stx_blocks = s.blocks;
    x.stx_attributes_mask = s.attributes_mask;
    x.stx_atime = c_statx_time(s.atime);
    x.stx_btime = c_statx_time(s.btime);
    x.stx_ctime = c_statx_time(s.ctime);
    x.stx_mtime = c_statx_time(s.mtime);
    x.stx_rdev_major = s.rdev_major;
    x.stx_rdev_minor = s.rdev_minor;
    x.stx_dev_major = s.dev_major;
    x.stx_dev_minor = s.dev_minor;
    x.stx_mnt_id = s.mnt_id;
    x
}

/// Fills a C `struct statfs`.
///
/// # Safety
/// `out` is `NULL` or valid for a write of a `struct statfs`.
unsafe fn put_statfs(out: *mut libc::statfs, s: &scalevfs_rs::Statfs) -> SysResult<()> {
    // SAFETY: `struct statfs` is plain integers: all-zero is a valid value.
    let mut f: libc::statfs = unsafe { std::mem::zeroed() };
    f.f_type = s.f_type as _;
    f.f_bsize = s.bsize as _;
    f.f_blocks = s.blocks as _;
    f.f_bfree = s.bfree as _;
    f.f_bavail = s.bavail as _;
    f.f_files = s.files as _;
    f.f_ffree = s.ffree as _;
    f.f_namelen = s.namelen as _;
    f.f_frsize = s.frsize as _;
    // SAFETY: the caller's contract for `out`.
    unsafe { put(out, f) }?;
    // glibc's `struct statfs` has `f_flags` right after `f_frsize` (the first word of
    // what the libc crate calls `f_spare`), of the same type.
    // SAFETY: `out` is non-NULL (put succeeded) and points to a whole `struct statfs`,
    // which has room for `f_flags` after `f_frsize`.
    unsafe {
        let frsize = std::ptr::addr_of_mut!((*out).f_frsize);
        frsize.add(1).write_unaligned(s.flags as _);
    }
    Ok(())
}

fn to_flock(c: &libc::flock) -> Flock {
    Flock {
        l_type: c.l_type,
        l_whence: c.l_whence,
        l_start: c.l_start,
        l_len: c.l_len,
        l_pid: c.l_pid,
    }
}

fn from_flock(f: &Flock, c: &mut libc::flock) {
    c.l_type = f.l_type;
    c.l_whence = f.l_whence;
    c.l_start = f.l_start;
    c.l_len = f.l_len;
    c.l_pid = f.l_pid;
}

/// A lock command with its `struct flock`, copied in and (for the `GETLK`s) out.
///
/// # Safety
/// `lock` is `NULL` or valid for reads and writes of a `struct flock`.
unsafe fn lock_cmd(p: &Process, fd: c_int, cmd: c_int, lock: *mut libc::flock) -> SysResult<i32> {
    // fcntl's fdget comes before the copy from user memory.
    p.file(fd)?;
    // SAFETY: the caller's contract for `lock`.
    let mut c = unsafe { get(lock) }?;
    let mut fl = to_flock(&c);
    let r = p.fcntl(fd, cmd, FcntlArg::Flock(&mut fl))?;
    if matches!(cmd, libc::F_GETLK | libc::F_OFD_GETLK) {
        from_flock(&fl, &mut c);
        // SAFETY: the caller's contract for `lock` (non-NULL: get succeeded).
        unsafe { put(lock, c) }?;
    }
    Ok(r)
}

mod events;
mod fds;
mod io;
mod meta;
mod namespace;
mod sizes;
mod xattr;

pub use events::*;
pub use fds::*;
pub use io::*;
pub use meta::*;
pub use namespace::*;
pub use sizes::*;
pub use xattr::*;

// --- mounts ---

/// Mounts a new tmpfs (`size=size_limit`, `nr_inodes=inode_limit`, 0: unlimited) on the
/// directory `path` (root only: `-EPERM`), as `mount("tmpfs", path, "tmpfs", mountflags,
/// ...)`. `mountflags` is 0 or `MS_RDONLY` (every call that would change the mount then
/// fails with `-EROFS`); any other bit is `-EINVAL`.
///
/// # Safety
/// `path` is `NULL` or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn svfs_mount_tmpfs(
    p: *mut svfs_process,
    path: *const c_char,
    size_limit: u64,
    inode_limit: u64,
    mountflags: c_ulong,
) -> c_int {
    int_call("svfs_mount_tmpfs", p, |p| {
        if mountflags & !libc::MS_RDONLY != 0 {
            return Err(Errno::EINVAL);
        }
        let fs = scalevfs_rs::Tmpfs::new(scalevfs_rs::TmpfsOptions {
            size_limit: (size_limit != 0).then_some(size_limit),
            inode_limit: (inode_limit != 0).then_some(inode_limit),
        });
        let opts = scalevfs_rs::MountOptions::new().read_only(mountflags & libc::MS_RDONLY != 0);
        // SAFETY: the caller's contract for `path`.
        p.mount_with(unsafe { cpath(path) }?, Arc::new(fs), opts)
    })
}

/// `mount(NULL, path, NULL, MS_REMOUNT | mountflags, NULL)`: the file system mounted at
/// `path` becomes read-only (`mountflags` `MS_RDONLY`; `-EBUSY` while a file on it is open
/// for writing or an unlinked file is still open) or read-write (0). Any other bit is
/// `-EINVAL`; `path` not the root of a mount is `-EINVAL`; root only (`-EPERM`).
///
/// # Safety
/// `path` is `NULL` or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn svfs_remount(
    p: *mut svfs_process,
    path: *const c_char,
    mountflags: c_ulong,
) -> c_int {
    int_call("svfs_remount", p, |p| {
        if mountflags & !libc::MS_RDONLY != 0 {
            return Err(Errno::EINVAL);
        }
        let opts = scalevfs_rs::MountOptions::new().read_only(mountflags & libc::MS_RDONLY != 0);
        // SAFETY: the caller's contract for `path`.
        p.remount(unsafe { cpath(path) }?, opts)
    })
}

/// `umount2(2)` (`MNT_DETACH`, `MNT_EXPIRE`, `UMOUNT_NOFOLLOW`).
///
/// # Safety
/// `path` is `NULL` or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn svfs_umount2(
    p: *mut svfs_process,
    path: *const c_char,
    flags: c_int,
) -> c_int {
    int_call("svfs_umount2", p, |p| {
        // SAFETY: the caller's contract for `path`.
        p.umount2(unsafe { cpath(path) }?, flags)
    })
}
