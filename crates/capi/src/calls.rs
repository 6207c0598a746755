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

// --- open, close, read, write ---

/// `openat(2)`: a new descriptor, or `-errno`.
///
/// # Safety
/// `path` is `NULL` (`-EFAULT`) or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn svfs_openat(
    p: *mut svfs_process,
    dirfd: c_int,
    path: *const c_char,
    flags: c_int,
    mode: mode_t,
) -> c_int {
    int_call("svfs_openat", p, |p| {
        // SAFETY: the caller's contract for `path`.
        p.openat(dirfd, unsafe { cpath(path) }?, flags, mode)
    })
}

/// `open(2)`: [`svfs_openat`] relative to the cwd.
///
/// # Safety
/// `path` is `NULL` (`-EFAULT`) or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn svfs_open(
    p: *mut svfs_process,
    path: *const c_char,
    flags: c_int,
    mode: mode_t,
) -> c_int {
    // SAFETY: the same contract.
    unsafe { svfs_openat(p, libc::AT_FDCWD, path, flags, mode) }
}

/// `openat2(2)` with a `struct open_how` of `size` bytes (at least 24; bytes past the
/// known fields must be zero: `-E2BIG`).
///
/// # Safety
/// `path` is `NULL` or a NUL-terminated string; `how` is `NULL` or valid for reads of
/// `size` bytes.
#[no_mangle]
pub unsafe extern "C" fn svfs_openat2(
    p: *mut svfs_process,
    dirfd: c_int,
    path: *const c_char,
    how: *const libc::open_how,
    size: size_t,
) -> c_int {
    int_call("svfs_openat2", p, |p| {
        const VER0: usize = std::mem::size_of::<libc::open_how>();
        if size < VER0 {
            return Err(Errno::EINVAL);
        }
        if size > 4096 {
            return Err(Errno::E2BIG);
        }
        // SAFETY: the caller's contract: `size` readable bytes at `how`.
        let bytes = unsafe { in_buf(how.cast(), size) }?;
        if bytes[VER0..].iter().any(|&b| b != 0) {
            return Err(Errno::E2BIG);
        }
        // SAFETY: non-NULL (in_buf checked) and at least VER0 readable bytes.
        let h = unsafe { get(how) }?;
        let how = OpenHow {
            flags: h.flags,
            mode: h.mode,
            resolve: h.resolve,
        };
        // SAFETY: the caller's contract for `path`.
        p.openat2(dirfd, unsafe { cpath(path) }?, &how)
    })
}

/// `close(2)`.
#[no_mangle]
pub extern "C" fn svfs_close(p: *mut svfs_process, fd: c_int) -> c_int {
    int_call("svfs_close", p, |p| p.close(fd))
}

/// `close_range(2)`.
#[no_mangle]
pub extern "C" fn svfs_close_range(
    p: *mut svfs_process,
    first: c_uint,
    last: c_uint,
    flags: c_uint,
) -> c_int {
    int_call("svfs_close_range", p, |p| p.close_range(first, last, flags))
}

/// `read(2)`: bytes read (0 at end of file), or `-errno`.
///
/// # Safety
/// `buf` is `NULL` or valid for writes of `count` bytes.
#[no_mangle]
pub unsafe extern "C" fn svfs_read(
    p: *mut svfs_process,
    fd: c_int,
    buf: *mut c_void,
    count: size_t,
) -> ssize_t {
    call("svfs_read", p, |p| {
        if buf.is_null() && count != 0 {
            return fault_after_fd(p, fd);
        }
        // SAFETY: the caller's contract for `buf`.
        p.read(fd, unsafe { out_buf(buf, count.min(MAX_RW_COUNT)) }?)
    }) as ssize_t
}

/// `write(2)`: bytes written, or `-errno`.
///
/// # Safety
/// `buf` is `NULL` or valid for reads of `count` bytes.
#[no_mangle]
pub unsafe extern "C" fn svfs_write(
    p: *mut svfs_process,
    fd: c_int,
    buf: *const c_void,
    count: size_t,
) -> ssize_t {
    call("svfs_write", p, |p| {
        if buf.is_null() && count != 0 {
            return fault_after_fd(p, fd);
        }
        // SAFETY: the caller's contract for `buf`.
        p.write(fd, unsafe { in_buf(buf, count.min(MAX_RW_COUNT)) }?)
    }) as ssize_t
}

/// `pread64(2)`.
///
/// # Safety
/// `buf` is `NULL` or valid for writes of `count` bytes.
#[no_mangle]
pub unsafe extern "C" fn svfs_pread64(
    p: *mut svfs_process,
    fd: c_int,
    buf: *mut c_void,
    count: size_t,
    offset: off_t,
) -> ssize_t {
    call("svfs_pread64", p, |p| {
        if buf.is_null() && count != 0 {
            return fault_after_fd(p, fd);
        }
        // SAFETY: the caller's contract for `buf`.
        p.pread64(
            fd,
            unsafe { out_buf(buf, count.min(MAX_RW_COUNT)) }?,
            offset,
        )
    }) as ssize_t
}

/// `pwrite64(2)`.
///
/// # Safety
/// `buf` is `NULL` or valid for reads of `count` bytes.
#[no_mangle]
pub unsafe extern "C" fn svfs_pwrite64(
    p: *mut svfs_process,
    fd: c_int,
    buf: *const c_void,
    count: size_t,
    offset: off_t,
) -> ssize_t {
    call("svfs_pwrite64", p, |p| {
        if buf.is_null() && count != 0 {
            return fault_after_fd(p, fd);
        }
        // SAFETY: the caller's contract for `buf`.
        p.pwrite64(fd, unsafe { in_buf(buf, count.min(MAX_RW_COUNT)) }?, offset)
    }) as ssize_t
}

/// The iovecs of a vectored call: `EINVAL` for a count outside `0..=IOV_MAX`, `EFAULT`
/// for a `NULL` array or a `NULL` base with a length.
///
/// # Safety
/// `iov` is `NULL` or valid for reads of `iovcnt` iovecs, each of whose bases is `NULL`
/// or valid for reads (`write`) or writes (`read`) of its length, not aliased.
unsafe fn iovecs<'a>(iov: *const libc::iovec, iovcnt: c_int) -> SysResult<&'a [libc::iovec]> {
    if !(0..=IOV_MAX).contains(&iovcnt) {
        return Err(Errno::EINVAL);
    }
    if iovcnt == 0 {
        return Ok(&[]);
    }
    if iov.is_null() {
        return Err(Errno::EFAULT);
    }
    // SAFETY: the caller's contract: `iovcnt` readable iovecs.
    let v = unsafe { std::slice::from_raw_parts(iov, iovcnt as usize) };
    if v.iter().any(|i| i.iov_base.is_null() && i.iov_len != 0) {
        return Err(Errno::EFAULT);
    }
    Ok(v)
}

/// # Safety
/// As [`iovecs`], for writes.
unsafe fn read_slices<'a>(v: &[libc::iovec]) -> Vec<IoSliceMut<'a>> {
    v.iter()
        // SAFETY: the caller's contract: each base is writable for its length.
        .map(|i| IoSliceMut::new(unsafe { out_buf(i.iov_base, i.iov_len) }.unwrap_or(&mut [])))
        .collect()
}

/// # Safety
/// As [`iovecs`], for reads.
unsafe fn write_slices<'a>(v: &[libc::iovec]) -> Vec<IoSlice<'a>> {
    v.iter()
        // SAFETY: the caller's contract: each base is readable for its length.
        .map(|i| IoSlice::new(unsafe { in_buf(i.iov_base, i.iov_len) }.unwrap_or(&[])))
        .collect()
}

/// `readv(2)`.
///
/// # Safety
/// `iov` points to `iovcnt` iovecs whose buffers are writable (or `NULL`: `-EFAULT`).
#[no_mangle]
pub unsafe extern "C" fn svfs_readv(
    p: *mut svfs_process,
    fd: c_int,
    iov: *const libc::iovec,
    iovcnt: c_int,
) -> ssize_t {
    call("svfs_readv", p, |p| {
        p.file(fd)?;
        // SAFETY: the caller's contract for `iov`.
        let mut bufs = unsafe { read_slices(iovecs(iov, iovcnt)?) };
        p.readv(fd, &mut bufs)
    }) as ssize_t
}

/// `writev(2)`.
///
/// # Safety
/// `iov` points to `iovcnt` iovecs whose buffers are readable (or `NULL`: `-EFAULT`).
#[no_mangle]
pub unsafe extern "C" fn svfs_writev(
    p: *mut svfs_process,
    fd: c_int,
    iov: *const libc::iovec,
    iovcnt: c_int,
) -> ssize_t {
    call("svfs_writev", p, |p| {
        p.file(fd)?;
        // SAFETY: the caller's contract for `iov`.
        let bufs = unsafe { write_slices(iovecs(iov, iovcnt)?) };
        p.writev(fd, &bufs)
    }) as ssize_t
}

/// `preadv(2)`.
///
/// # Safety
/// As [`svfs_readv`].
#[no_mangle]
pub unsafe extern "C" fn svfs_preadv(
    p: *mut svfs_process,
    fd: c_int,
    iov: *const libc::iovec,
    iovcnt: c_int,
    offset: off_t,
) -> ssize_t {
    call("svfs_preadv", p, |p| {
        p.file(fd)?;
        // SAFETY: the caller's contract for `iov`.
        let mut bufs = unsafe { read_slices(iovecs(iov, iovcnt)?) };
        p.preadv(fd, &mut bufs, offset)
    }) as ssize_t
}

/// `pwritev(2)`.
///
/// # Safety
/// As [`svfs_writev`].
#[no_mangle]
pub unsafe extern "C" fn svfs_pwritev(
    p: *mut svfs_process,
    fd: c_int,
    iov: *const libc::iovec,
    iovcnt: c_int,
    offset: off_t,
) -> ssize_t {
    call("svfs_pwritev", p, |p| {
        p.file(fd)?;
        // SAFETY: the caller's contract for `iov`.
        let bufs = unsafe { write_slices(iovecs(iov, iovcnt)?) };
        p.pwritev(fd, &bufs, offset)
    }) as ssize_t
}

/// `copy_file_range(2)`: `off_in`/`off_out` `NULL` use and advance the file positions.
///
/// # Safety
/// `off_in` and `off_out` are `NULL` or valid for reads and writes of an `off_t`.
#[no_mangle]
pub unsafe extern "C" fn svfs_copy_file_range(
    p: *mut svfs_process,
    fd_in: c_int,
    off_in: *mut off_t,
    fd_out: c_int,
    off_out: *mut off_t,
    len: size_t,
    flags: c_uint,
) -> ssize_t {
    call("svfs_copy_file_range", p, |p| {
        // SAFETY: the caller's contract: NULL or a valid, unaliased off_t.
        let (oi, oo) = unsafe { (off_in.as_mut(), off_out.as_mut()) };
        p.copy_file_range(fd_in, oi, fd_out, oo, len.min(MAX_RW_COUNT), flags)
    }) as ssize_t
}

/// `lseek(2)`: the new offset, or `-errno`.
#[no_mangle]
pub extern "C" fn svfs_lseek(
    p: *mut svfs_process,
    fd: c_int,
    offset: off_t,
    whence: c_int,
) -> off_t {
    call("svfs_lseek", p, |p| p.lseek(fd, offset, whence))
}

// --- metadata ---

/// `newfstatat(2)` (glibc's `fstatat`).
///
/// # Safety
/// `path` is `NULL` or a NUL-terminated string; `statbuf` is `NULL` or writable.
#[no_mangle]
pub unsafe extern "C" fn svfs_newfstatat(
    p: *mut svfs_process,
    dirfd: c_int,
    path: *const c_char,
    statbuf: *mut libc::stat,
    flags: c_int,
) -> c_int {
    int_call("svfs_newfstatat", p, |p| {
        // SAFETY: the caller's contract for `path`.
        let s = p.newfstatat(dirfd, unsafe { cpath(path) }?, flags)?;
        // SAFETY: the caller's contract for `statbuf`.
        unsafe { put(statbuf, c_stat(&s)) }
    })
}

/// `stat(2)`.
///
/// # Safety
/// As [`svfs_newfstatat`].
#[no_mangle]
pub unsafe extern "C" fn svfs_stat(
    p: *mut svfs_process,
    path: *const c_char,
    statbuf: *mut libc::stat,
) -> c_int {
    // SAFETY: the same contract.
    unsafe { svfs_newfstatat(p, libc::AT_FDCWD, path, statbuf, 0) }
}

/// `lstat(2)`.
///
/// # Safety
/// As [`svfs_newfstatat`].
#[no_mangle]
pub unsafe extern "C" fn svfs_lstat(
    p: *mut svfs_process,
    path: *const c_char,
    statbuf: *mut libc::stat,
) -> c_int {
    // SAFETY: the same contract.
    unsafe { svfs_newfstatat(p, libc::AT_FDCWD, path, statbuf, libc::AT_SYMLINK_NOFOLLOW) }
}

/// `fstat(2)`.
///
/// # Safety
/// `statbuf` is `NULL` or writable.
#[no_mangle]
pub unsafe extern "C" fn svfs_fstat(
    p: *mut svfs_process,
    fd: c_int,
    statbuf: *mut libc::stat,
) -> c_int {
    int_call("svfs_fstat", p, |p| {
        let s = p.fstat(fd)?;
        // SAFETY: the caller's contract for `statbuf`.
        unsafe { put(statbuf, c_stat(&s)) }
    })
}

/// `statx(2)` (`struct statx` as in `<sys/stat.h>` with `_GNU_SOURCE`, or
/// `<linux/stat.h>`).
///
/// # Safety
/// `path` is `NULL` or a NUL-terminated string; `statxbuf` is `NULL` or writable.
#[no_mangle]
pub unsafe extern "C" fn svfs_statx(
    p: *mut svfs_process,
    dirfd: c_int,
    path: *const c_char,
    flags: c_int,
    mask: c_uint,
    statxbuf: *mut libc::statx,
) -> c_int {
    int_call("svfs_statx", p, |p| {
        // SAFETY: the caller's contract for `path`.
        let s = p.statx(dirfd, unsafe { cpath(path) }?, flags, mask)?;
        // SAFETY: the caller's contract for `statxbuf`.
        unsafe { put(statxbuf, c_statx(&s)) }
    })
}

/// `statfs(2)`.
///
/// # Safety
/// `path` is `NULL` or a NUL-terminated string; `buf` is `NULL` or writable.
#[no_mangle]
pub unsafe extern "C" fn svfs_statfs(
    p: *mut svfs_process,
    path: *const c_char,
    buf: *mut libc::statfs,
) -> c_int {
    int_call("svfs_statfs", p, |p| {
        // SAFETY: the caller's contract for `path`.
        let s = p.statfs(unsafe { cpath(path) }?)?;
        // SAFETY: the caller's contract for `buf`.
        unsafe { put_statfs(buf, &s) }
    })
}

/// `fstatfs(2)`.
///
/// # Safety
/// `buf` is `NULL` or writable.
#[no_mangle]
pub unsafe extern "C" fn svfs_fstatfs(
    p: *mut svfs_process,
    fd: c_int,
    buf: *mut libc::statfs,
) -> c_int {
    int_call("svfs_fstatfs", p, |p| {
        let s = p.fstatfs(fd)?;
        // SAFETY: the caller's contract for `buf`.
        unsafe { put_statfs(buf, &s) }
    })
}

/// `fchmodat2(2)` (`fchmodat` with flags).
///
/// # Safety
/// `path` is `NULL` or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn svfs_fchmodat(
    p: *mut svfs_process,
    dirfd: c_int,
    path: *const c_char,
    mode: mode_t,
    flags: c_int,
) -> c_int {
    int_call("svfs_fchmodat", p, |p| {
        // SAFETY: the caller's contract for `path`.
        p.fchmodat(dirfd, unsafe { cpath(path) }?, mode, flags)
    })
}

/// `chmod(2)`.
///
/// # Safety
/// `path` is `NULL` or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn svfs_chmod(
    p: *mut svfs_process,
    path: *const c_char,
    mode: mode_t,
) -> c_int {
    // SAFETY: the same contract.
    unsafe { svfs_fchmodat(p, libc::AT_FDCWD, path, mode, 0) }
}

/// `fchmod(2)`.
#[no_mangle]
pub extern "C" fn svfs_fchmod(p: *mut svfs_process, fd: c_int, mode: mode_t) -> c_int {
    int_call("svfs_fchmod", p, |p| p.fchmod(fd, mode))
}

/// `fchownat(2)`: a `uid` or `gid` of `(uid_t)-1` leaves it.
///
/// # Safety
/// `path` is `NULL` or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn svfs_fchownat(
    p: *mut svfs_process,
    dirfd: c_int,
    path: *const c_char,
    owner: libc::uid_t,
    group: libc::gid_t,
    flags: c_int,
) -> c_int {
    int_call("svfs_fchownat", p, |p| {
        // SAFETY: the caller's contract for `path`.
        p.fchownat(dirfd, unsafe { cpath(path) }?, owner, group, flags)
    })
}

/// `fchown(2)`.
#[no_mangle]
pub extern "C" fn svfs_fchown(
    p: *mut svfs_process,
    fd: c_int,
    owner: libc::uid_t,
    group: libc::gid_t,
) -> c_int {
    int_call("svfs_fchown", p, |p| p.fchown(fd, owner, group))
}

/// `utimensat(2)`: `times` `NULL` sets both to now; `path` `NULL` is `futimens(dirfd)`.
///
/// # Safety
/// `path` is `NULL` or a NUL-terminated string; `times` is `NULL` or two readable
/// `struct timespec`s.
#[no_mangle]
pub unsafe extern "C" fn svfs_utimensat(
    p: *mut svfs_process,
    dirfd: c_int,
    path: *const c_char,
    times: *const libc::timespec,
    flags: c_int,
) -> c_int {
    int_call("svfs_utimensat", p, |p| {
        let times = if times.is_null() {
            None
        } else {
            // SAFETY: the caller's contract: two readable timespecs.
            let t = unsafe { [times.read(), times.add(1).read()] };
            Some(t.map(|t| Timespec {
                sec: t.tv_sec,
                nsec: t.tv_nsec,
            }))
        };
        let path: &[u8] = if path.is_null() {
            b""
        } else {
            // SAFETY: the caller's contract for `path` (non-NULL).
            unsafe { cpath(path) }?
        };
        p.utimensat(dirfd, path, times, flags)
    })
}

/// `faccessat2(2)` (`faccessat` with flags).
///
/// # Safety
/// `path` is `NULL` or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn svfs_faccessat(
    p: *mut svfs_process,
    dirfd: c_int,
    path: *const c_char,
    mode: c_int,
    flags: c_int,
) -> c_int {
    int_call("svfs_faccessat", p, |p| {
        // SAFETY: the caller's contract for `path`.
        p.faccessat(dirfd, unsafe { cpath(path) }?, mode, flags)
    })
}

/// `umask(2)`: the previous mask (or `-EBADF` for a bad handle).
#[no_mangle]
pub extern "C" fn svfs_umask(p: *mut svfs_process, mask: mode_t) -> c_int {
    int_call("svfs_umask", p, |p| Ok(p.umask(mask)))
}

// --- namespace ---

/// `mkdirat(2)`.
///
/// # Safety
/// `path` is `NULL` or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn svfs_mkdirat(
    p: *mut svfs_process,
    dirfd: c_int,
    path: *const c_char,
    mode: mode_t,
) -> c_int {
    int_call("svfs_mkdirat", p, |p| {
        // SAFETY: the caller's contract for `path`.
        p.mkdirat(dirfd, unsafe { cpath(path) }?, mode)
    })
}

/// `mkdir(2)`.
///
/// # Safety
/// `path` is `NULL` or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn svfs_mkdir(
    p: *mut svfs_process,
    path: *const c_char,
    mode: mode_t,
) -> c_int {
    // SAFETY: the same contract.
    unsafe { svfs_mkdirat(p, libc::AT_FDCWD, path, mode) }
}

/// `mknodat(2)`.
///
/// # Safety
/// `path` is `NULL` or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn svfs_mknodat(
    p: *mut svfs_process,
    dirfd: c_int,
    path: *const c_char,
    mode: mode_t,
    dev: libc::dev_t,
) -> c_int {
    int_call("svfs_mknodat", p, |p| {
        // SAFETY: the caller's contract for `path`.
        p.mknodat(dirfd, unsafe { cpath(path) }?, mode, dev)
    })
}

/// `unlinkat(2)` (`AT_REMOVEDIR` for `rmdir`).
///
/// # Safety
/// `path` is `NULL` or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn svfs_unlinkat(
    p: *mut svfs_process,
    dirfd: c_int,
    path: *const c_char,
    flags: c_int,
) -> c_int {
    int_call("svfs_unlinkat", p, |p| {
        // SAFETY: the caller's contract for `path`.
        p.unlinkat(dirfd, unsafe { cpath(path) }?, flags)
    })
}

/// `unlink(2)`.
///
/// # Safety
/// `path` is `NULL` or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn svfs_unlink(p: *mut svfs_process, path: *const c_char) -> c_int {
    // SAFETY: the same contract.
    unsafe { svfs_unlinkat(p, libc::AT_FDCWD, path, 0) }
}

/// `rmdir(2)`.
///
/// # Safety
/// `path` is `NULL` or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn svfs_rmdir(p: *mut svfs_process, path: *const c_char) -> c_int {
    // SAFETY: the same contract.
    unsafe { svfs_unlinkat(p, libc::AT_FDCWD, path, libc::AT_REMOVEDIR) }
}

/// `renameat2(2)` (`RENAME_NOREPLACE`, `RENAME_EXCHANGE`).
///
/// # Safety
/// `oldpath` and `newpath` are `NULL` or NUL-terminated strings.
#[no_mangle]
pub unsafe extern "C" fn svfs_renameat2(
    p: *mut svfs_process,
    olddirfd: c_int,
    oldpath: *const c_char,
    newdirfd: c_int,
    newpath: *const c_char,
    flags: c_uint,
) -> c_int {
    int_call("svfs_renameat2", p, |p| {
        // SAFETY: the caller's contract for both paths.
        let (o, n) = unsafe { (cpath(oldpath)?, cpath(newpath)?) };
        p.renameat2(olddirfd, o, newdirfd, n, flags)
    })
}

/// `rename(2)`.
///
/// # Safety
/// `oldpath` and `newpath` are `NULL` or NUL-terminated strings.
#[no_mangle]
pub unsafe extern "C" fn svfs_rename(
    p: *mut svfs_process,
    oldpath: *const c_char,
    newpath: *const c_char,
) -> c_int {
    // SAFETY: the same contract.
    unsafe { svfs_renameat2(p, libc::AT_FDCWD, oldpath, libc::AT_FDCWD, newpath, 0) }
}

/// `linkat(2)`.
///
/// # Safety
/// `oldpath` and `newpath` are `NULL` or NUL-terminated strings.
#[no_mangle]
pub unsafe extern "C" fn svfs_linkat(
    p: *mut svfs_process,
    olddirfd: c_int,
    oldpath: *const c_char,
    newdirfd: c_int,
    newpath: *const c_char,
    flags: c_int,
) -> c_int {
    int_call("svfs_linkat", p, |p| {
        // SAFETY: the caller's contract for both paths.
        let (o, n) = unsafe { (cpath(oldpath)?, cpath(newpath)?) };
        p.linkat(olddirfd, o, newdirfd, n, flags)
    })
}

/// `symlinkat(2)`.
///
/// # Safety
/// `target` and `linkpath` are `NULL` or NUL-terminated strings.
#[no_mangle]
pub unsafe extern "C" fn svfs_symlinkat(
    p: *mut svfs_process,
    target: *const c_char,
    newdirfd: c_int,
    linkpath: *const c_char,
) -> c_int {
    int_call("svfs_symlinkat", p, |p| {
        // SAFETY: the caller's contract for both strings.
        let (t, l) = unsafe { (cpath(target)?, cpath(linkpath)?) };
        p.symlinkat(t, newdirfd, l)
    })
}

/// `symlink(2)`.
///
/// # Safety
/// `target` and `linkpath` are `NULL` or NUL-terminated strings.
#[no_mangle]
pub unsafe extern "C" fn svfs_symlink(
    p: *mut svfs_process,
    target: *const c_char,
    linkpath: *const c_char,
) -> c_int {
    // SAFETY: the same contract.
    unsafe { svfs_symlinkat(p, target, libc::AT_FDCWD, linkpath) }
}

/// `readlinkat(2)`: the target's length (no NUL is written), or `-errno`.
///
/// # Safety
/// `path` is `NULL` or a NUL-terminated string; `buf` is `NULL` or writable for
/// `bufsiz` bytes.
#[no_mangle]
pub unsafe extern "C" fn svfs_readlinkat(
    p: *mut svfs_process,
    dirfd: c_int,
    path: *const c_char,
    buf: *mut c_char,
    bufsiz: size_t,
) -> ssize_t {
    call("svfs_readlinkat", p, |p| {
        // do_readlinkat: bufsiz <= 0 (as an int) is EINVAL before anything else.
        let bufsiz = bufsiz.min(i32::MAX as usize);
        if bufsiz == 0 {
            return Err(Errno::EINVAL);
        }
        // SAFETY: the caller's contract for `path`.
        let path = unsafe { cpath(path) }?;
        // SAFETY: the caller's contract for `buf`.
        p.readlinkat(dirfd, path, unsafe { out_buf(buf.cast(), bufsiz) }?)
    }) as ssize_t
}

/// `getdents64(2)`: bytes of `struct linux_dirent64` records written (0 at the end).
///
/// # Safety
/// `dirp` is `NULL` or writable for `count` bytes.
#[no_mangle]
pub unsafe extern "C" fn svfs_getdents64(
    p: *mut svfs_process,
    fd: c_int,
    dirp: *mut c_void,
    count: size_t,
) -> ssize_t {
    call("svfs_getdents64", p, |p| {
        if dirp.is_null() && count != 0 {
            return fault_after_fd(p, fd);
        }
        // The kernel's count is an unsigned int.
        let count = count.min(c_uint::MAX as usize);
        // SAFETY: the caller's contract for `dirp`.
        p.getdents64(fd, unsafe { out_buf(dirp, count) }?)
    }) as ssize_t
}

// --- sizes ---

/// `truncate(2)`.
///
/// # Safety
/// `path` is `NULL` or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn svfs_truncate(
    p: *mut svfs_process,
    path: *const c_char,
    length: off_t,
) -> c_int {
    int_call("svfs_truncate", p, |p| {
        // SAFETY: the caller's contract for `path`.
        p.truncate(unsafe { cpath(path) }?, length)
    })
}

/// `ftruncate(2)`.
#[no_mangle]
pub extern "C" fn svfs_ftruncate(p: *mut svfs_process, fd: c_int, length: off_t) -> c_int {
    int_call("svfs_ftruncate", p, |p| p.ftruncate(fd, length))
}

/// `fallocate(2)` (mode 0 and `FALLOC_FL_KEEP_SIZE`).
#[no_mangle]
pub extern "C" fn svfs_fallocate(
    p: *mut svfs_process,
    fd: c_int,
    mode: c_int,
    offset: off_t,
    len: off_t,
) -> c_int {
    int_call("svfs_fallocate", p, |p| p.fallocate(fd, mode, offset, len))
}

// --- descriptors ---

/// `dup(2)`.
#[no_mangle]
pub extern "C" fn svfs_dup(p: *mut svfs_process, oldfd: c_int) -> c_int {
    int_call("svfs_dup", p, |p| p.dup(oldfd))
}

/// `dup2(2)`.
#[no_mangle]
pub extern "C" fn svfs_dup2(p: *mut svfs_process, oldfd: c_int, newfd: c_int) -> c_int {
    int_call("svfs_dup2", p, |p| p.dup2(oldfd, newfd))
}

/// `dup3(2)`.
#[no_mangle]
pub extern "C" fn svfs_dup3(
    p: *mut svfs_process,
    oldfd: c_int,
    newfd: c_int,
    flags: c_int,
) -> c_int {
    int_call("svfs_dup3", p, |p| p.dup3(oldfd, newfd, flags))
}

/// `fcntl(2)` with the kernel's `unsigned long` argument: an integer, or for the lock
/// commands (`F_GETLK`, `F_SETLK`, `F_SETLKW`, `F_OFD_*`) a `struct flock *` cast to it
/// (see [`svfs_fcntl_lock`]).
///
/// # Safety
/// For the lock commands, `arg` is 0 (`-EFAULT`) or the address of a readable and
/// writable `struct flock`.
#[no_mangle]
pub unsafe extern "C" fn svfs_fcntl(
    p: *mut svfs_process,
    fd: c_int,
    cmd: c_int,
    arg: c_ulong,
) -> c_int {
    if scalevfs_rs::locking::is_lock_cmd(cmd) {
        // SAFETY: the caller's contract: `arg` is a struct flock's address (or 0).
        return unsafe { svfs_fcntl_lock(p, fd, cmd, arg as usize as *mut libc::flock) };
    }
    int_call("svfs_fcntl", p, |p| {
        // Linux reads F_SETPIPE_SZ's argument as unsigned int, the others as int.
        let v = if cmd == libc::F_SETPIPE_SZ {
            i64::from(arg as c_uint)
        } else {
            i64::from(arg as c_int)
        };
        p.fcntl(fd, cmd, FcntlArg::Int(v))
    })
}

/// `fcntl(fd, cmd, lock)` for the record-lock commands: `F_GETLK`, `F_SETLK`,
/// `F_SETLKW` (POSIX locks, owned by the process) and `F_OFD_GETLK`, `F_OFD_SETLK`,
/// `F_OFD_SETLKW` (owned by the open file description). `F_SETLKW` blocks the calling
/// thread; a deadlock between processes is `-EDEADLK`. Other commands: `-EINVAL`.
///
/// # Safety
/// `lock` is `NULL` (`-EFAULT`) or valid for reads and writes of a `struct flock`.
#[no_mangle]
pub unsafe extern "C" fn svfs_fcntl_lock(
    p: *mut svfs_process,
    fd: c_int,
    cmd: c_int,
    lock: *mut libc::flock,
) -> c_int {
    int_call("svfs_fcntl_lock", p, |p| {
        if !scalevfs_rs::locking::is_lock_cmd(cmd) {
            return Err(Errno::EINVAL);
        }
        // SAFETY: the caller's contract for `lock`.
        unsafe { lock_cmd(p, fd, cmd, lock) }
    })
}

/// `flock(2)`: `LOCK_SH`, `LOCK_EX` or `LOCK_UN`, optionally `| LOCK_NB`.
#[no_mangle]
pub extern "C" fn svfs_flock(p: *mut svfs_process, fd: c_int, operation: c_int) -> c_int {
    int_call("svfs_flock", p, |p| p.flock(fd, operation))
}

/// `chdir(2)`.
///
/// # Safety
/// `path` is `NULL` or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn svfs_chdir(p: *mut svfs_process, path: *const c_char) -> c_int {
    int_call("svfs_chdir", p, |p| {
        // SAFETY: the caller's contract for `path`.
        p.chdir(unsafe { cpath(path) }?)
    })
}

/// `fchdir(2)`.
#[no_mangle]
pub extern "C" fn svfs_fchdir(p: *mut svfs_process, fd: c_int) -> c_int {
    int_call("svfs_fchdir", p, |p| p.fchdir(fd))
}

/// The `getcwd` system call: the cwd, NUL-terminated, in `buf`; returns its length
/// *including* the NUL (the kernel's answer; glibc's wrapper returns `buf`), `-ERANGE`
/// if it does not fit.
///
/// # Safety
/// `buf` is `NULL` or writable for `size` bytes.
#[no_mangle]
pub unsafe extern "C" fn svfs_getcwd(
    p: *mut svfs_process,
    buf: *mut c_char,
    size: size_t,
) -> c_int {
    int_call("svfs_getcwd", p, |p| {
        if size == 0 {
            return Err(Errno::ERANGE);
        }
        // SAFETY: the caller's contract for `buf`.
        p.getcwd(unsafe { out_buf(buf.cast(), size) }?)
    })
}

/// `fsync(2)`.
#[no_mangle]
pub extern "C" fn svfs_fsync(p: *mut svfs_process, fd: c_int) -> c_int {
    int_call("svfs_fsync", p, |p| p.fsync(fd))
}

/// `fdatasync(2)`.
#[no_mangle]
pub extern "C" fn svfs_fdatasync(p: *mut svfs_process, fd: c_int) -> c_int {
    int_call("svfs_fdatasync", p, |p| p.fdatasync(fd))
}

/// `syncfs(2)`.
#[no_mangle]
pub extern "C" fn svfs_syncfs(p: *mut svfs_process, fd: c_int) -> c_int {
    int_call("svfs_syncfs", p, |p| p.syncfs(fd))
}

/// Sets the descriptor limit (`setrlimit(RLIMIT_NOFILE)`, default 1024).
#[no_mangle]
pub extern "C" fn svfs_set_fd_limit(p: *mut svfs_process, limit: c_uint) -> c_int {
    int_call("svfs_set_fd_limit", p, |p| p.set_fd_limit(limit))
}

// --- pipes, eventfd, epoll, poll ---

/// `pipe2(2)`: `pipefd[0]` the read end, `pipefd[1]` the write end.
///
/// # Safety
/// `pipefd` is `NULL` (`-EFAULT`) or writable for two `int`s.
#[no_mangle]
pub unsafe extern "C" fn svfs_pipe2(
    p: *mut svfs_process,
    pipefd: *mut c_int,
    flags: c_int,
) -> c_int {
    int_call("svfs_pipe2", p, |p| {
        if pipefd.is_null() {
            return Err(Errno::EFAULT);
        }
        let mut fds = [0; 2];
        p.pipe2(&mut fds, flags)?;
        // SAFETY: the caller's contract: two writable ints at `pipefd` (non-NULL).
        unsafe { pipefd.cast::<[c_int; 2]>().write_unaligned(fds) };
        Ok(())
    })
}

/// `eventfd2(2)` (`EFD_SEMAPHORE`, `EFD_NONBLOCK`, `EFD_CLOEXEC`).
#[no_mangle]
pub extern "C" fn svfs_eventfd(p: *mut svfs_process, initval: c_uint, flags: c_int) -> c_int {
    int_call("svfs_eventfd", p, |p| p.eventfd(initval, flags))
}

/// `epoll_create1(2)`.
#[no_mangle]
pub extern "C" fn svfs_epoll_create1(p: *mut svfs_process, flags: c_int) -> c_int {
    int_call("svfs_epoll_create1", p, |p| p.epoll_create1(flags))
}

/// `epoll_ctl(2)`: `event` may be `NULL` for `EPOLL_CTL_DEL` (otherwise `-EFAULT`).
///
/// # Safety
/// `event` is `NULL` or readable.
#[no_mangle]
pub unsafe extern "C" fn svfs_epoll_ctl(
    p: *mut svfs_process,
    epfd: c_int,
    op: c_int,
    fd: c_int,
    event: *mut libc::epoll_event,
) -> c_int {
    int_call("svfs_epoll_ctl", p, |p| {
        let ev = if event.is_null() {
            None
        } else {
            // SAFETY: the caller's contract: a readable epoll_event (non-NULL).
            let e = unsafe { event.read_unaligned() };
            Some(EpollEvent::new(e.events, e.u64))
        };
        p.epoll_ctl(epfd, op, fd, ev.as_ref())
    })
}

/// `epoll_wait(2)`: the number of events written to `events`, or `-errno`. Blocks the
/// calling thread for up to `timeout` ms (-1: until an event).
///
/// # Safety
/// `events` is `NULL` (`-EFAULT`) or writable for `maxevents` events.
#[no_mangle]
pub unsafe extern "C" fn svfs_epoll_wait(
    p: *mut svfs_process,
    epfd: c_int,
    events: *mut libc::epoll_event,
    maxevents: c_int,
    timeout: c_int,
) -> c_int {
    int_call("svfs_epoll_wait", p, |p| {
        if maxevents <= 0 || maxevents > EP_MAX_EVENTS {
            return Err(Errno::EINVAL);
        }
        if events.is_null() {
            return Err(Errno::EFAULT);
        }
        // Up to 64 events on the stack; more on the heap.
        let mut small = [EpollEvent::default(); 64];
        let mut big = Vec::new();
        let buf: &mut [EpollEvent] = if maxevents as usize <= small.len() {
            &mut small[..maxevents as usize]
        } else {
            big.resize(maxevents as usize, EpollEvent::default());
            &mut big
        };
        let n = p.epoll_wait(epfd, buf, timeout)?;
        for (i, e) in buf[..n].iter().enumerate() {
            let c = libc::epoll_event {
                events: e.events,
                u64: e.data,
            };
            // SAFETY: the caller's contract: `maxevents` (>= n) writable events.
            unsafe { events.add(i).write_unaligned(c) };
        }
        Ok(n)
    })
}

/// `epoll_pwait` with glibc's arguments; the mask is ignored (no signals are modelled).
///
/// # Safety
/// As [`svfs_epoll_wait`].
#[no_mangle]
pub unsafe extern "C" fn svfs_epoll_pwait(
    p: *mut svfs_process,
    epfd: c_int,
    events: *mut libc::epoll_event,
    maxevents: c_int,
    timeout: c_int,
    _sigmask: *const libc::sigset_t,
) -> c_int {
    // SAFETY: the same contract.
    unsafe { svfs_epoll_wait(p, epfd, events, maxevents, timeout) }
}

/// `poll(2)`: fills each `revents`; the number of descriptors with events.
///
/// # Safety
/// `fds` is `NULL` (`-EFAULT` unless `nfds` is 0) or valid for reads and writes of
/// `nfds` `struct pollfd`s.
#[no_mangle]
pub unsafe extern "C" fn svfs_poll(
    p: *mut svfs_process,
    fds: *mut libc::pollfd,
    nfds: libc::nfds_t,
    timeout: c_int,
) -> c_int {
    int_call("svfs_poll", p, |p| {
        // SAFETY: the caller's contract for `fds`.
        let fds = unsafe { pollfds(fds, nfds) }?;
        p.poll(fds, timeout)
    })
}

/// # Safety
/// As [`svfs_poll`].
unsafe fn pollfds<'a>(
    fds: *mut libc::pollfd,
    nfds: libc::nfds_t,
) -> SysResult<&'a mut [libc::pollfd]> {
    // do_sys_poll: more than RLIMIT_NOFILE allows is EINVAL (the limit is at most
    // 1 Mi here); the Process checks its own limit.
    if nfds > 1 << 20 {
        return Err(Errno::EINVAL);
    }
    if nfds == 0 {
        return Ok(&mut []);
    }
    if fds.is_null() {
        return Err(Errno::EFAULT);
    }
    // SAFETY: the caller's contract: `nfds` readable and writable pollfds, unaliased.
    Ok(unsafe { std::slice::from_raw_parts_mut(fds, nfds as usize) })
}

/// `ppoll` with glibc's arguments: `timeout` `NULL` waits forever; the mask is ignored.
///
/// # Safety
/// As [`svfs_poll`]; `timeout` is `NULL` or readable.
#[no_mangle]
pub unsafe extern "C" fn svfs_ppoll(
    p: *mut svfs_process,
    fds: *mut libc::pollfd,
    nfds: libc::nfds_t,
    timeout: *const libc::timespec,
    _sigmask: *const libc::sigset_t,
) -> c_int {
    int_call("svfs_ppoll", p, |p| {
        // SAFETY: the caller's contract for `timeout` (NULL or readable).
        let t = unsafe { timeout.as_ref() };
        // SAFETY: the caller's contract for `fds`.
        let fds = unsafe { pollfds(fds, nfds) }?;
        p.ppoll(fds, t, None)
    })
}

// --- extended attributes ---

/// `setxattr(2)`.
///
/// # Safety
/// `path` and `name` are `NULL` or NUL-terminated; `value` is `NULL` or readable for
/// `size` bytes.
#[no_mangle]
pub unsafe extern "C" fn svfs_setxattr(
    p: *mut svfs_process,
    path: *const c_char,
    name: *const c_char,
    value: *const c_void,
    size: size_t,
    flags: c_int,
) -> c_int {
    int_call("svfs_setxattr", p, |p| {
        // SAFETY: the caller's contract for the strings and `value`.
        let (path, name, value) = unsafe { (cpath(path)?, cpath(name)?, in_buf(value, size)?) };
        p.setxattr(path, name, value, flags)
    })
}

/// `lsetxattr(2)`.
///
/// # Safety
/// As [`svfs_setxattr`].
#[no_mangle]
pub unsafe extern "C" fn svfs_lsetxattr(
    p: *mut svfs_process,
    path: *const c_char,
    name: *const c_char,
    value: *const c_void,
    size: size_t,
    flags: c_int,
) -> c_int {
    int_call("svfs_lsetxattr", p, |p| {
        // SAFETY: the caller's contract for the strings and `value`.
        let (path, name, value) = unsafe { (cpath(path)?, cpath(name)?, in_buf(value, size)?) };
        p.lsetxattr(path, name, value, flags)
    })
}

/// `fsetxattr(2)`.
///
/// # Safety
/// `name` is `NULL` or NUL-terminated; `value` is `NULL` or readable for `size` bytes.
#[no_mangle]
pub unsafe extern "C" fn svfs_fsetxattr(
    p: *mut svfs_process,
    fd: c_int,
    name: *const c_char,
    value: *const c_void,
    size: size_t,
    flags: c_int,
) -> c_int {
    int_call("svfs_fsetxattr", p, |p| {
        // SAFETY: the caller's contract for `name` and `value`.
        let (name, value) = unsafe { (cpath(name)?, in_buf(value, size)?) };
        p.fsetxattr(fd, name, value, flags)
    })
}

/// `getxattr(2)`: the value's size (with `size` 0: the size it needs), or `-errno`.
///
/// # Safety
/// `path` and `name` are `NULL` or NUL-terminated; `value` is `NULL` or writable for
/// `size` bytes.
#[no_mangle]
pub unsafe extern "C" fn svfs_getxattr(
    p: *mut svfs_process,
    path: *const c_char,
    name: *const c_char,
    value: *mut c_void,
    size: size_t,
) -> ssize_t {
    call("svfs_getxattr", p, |p| {
        // SAFETY: the caller's contract for the strings and `value`.
        let (path, name, value) = unsafe { (cpath(path)?, cpath(name)?, out_buf(value, size)?) };
        p.getxattr(path, name, value)
    }) as ssize_t
}

/// `lgetxattr(2)`.
///
/// # Safety
/// As [`svfs_getxattr`].
#[no_mangle]
pub unsafe extern "C" fn svfs_lgetxattr(
    p: *mut svfs_process,
    path: *const c_char,
    name: *const c_char,
    value: *mut c_void,
    size: size_t,
) -> ssize_t {
    call("svfs_lgetxattr", p, |p| {
        // SAFETY: the caller's contract for the strings and `value`.
        let (path, name, value) = unsafe { (cpath(path)?, cpath(name)?, out_buf(value, size)?) };
        p.lgetxattr(path, name, value)
    }) as ssize_t
}

/// `fgetxattr(2)`.
///
/// # Safety
/// `name` is `NULL` or NUL-terminated; `value` is `NULL` or writable for `size` bytes.
#[no_mangle]
pub unsafe extern "C" fn svfs_fgetxattr(
    p: *mut svfs_process,
    fd: c_int,
    name: *const c_char,
    value: *mut c_void,
    size: size_t,
) -> ssize_t {
    call("svfs_fgetxattr", p, |p| {
        // SAFETY: the caller's contract for `name` and `value`.
        let (name, value) = unsafe { (cpath(name)?, out_buf(value, size)?) };
        p.fgetxattr(fd, name, value)
    }) as ssize_t
}

/// `listxattr(2)`: the NUL-separated names' size, or `-errno`.
///
/// # Safety
/// `path` is `NULL` or NUL-terminated; `list` is `NULL` or writable for `size` bytes.
#[no_mangle]
pub unsafe extern "C" fn svfs_listxattr(
    p: *mut svfs_process,
    path: *const c_char,
    list: *mut c_char,
    size: size_t,
) -> ssize_t {
    call("svfs_listxattr", p, |p| {
        // SAFETY: the caller's contract for `path` and `list`.
        let (path, list) = unsafe { (cpath(path)?, out_buf(list.cast(), size)?) };
        p.listxattr(path, list)
    }) as ssize_t
}

/// `llistxattr(2)`.
///
/// # Safety
/// As [`svfs_listxattr`].
#[no_mangle]
pub unsafe extern "C" fn svfs_llistxattr(
    p: *mut svfs_process,
    path: *const c_char,
    list: *mut c_char,
    size: size_t,
) -> ssize_t {
    call("svfs_llistxattr", p, |p| {
        // SAFETY: the caller's contract for `path` and `list`.
        let (path, list) = unsafe { (cpath(path)?, out_buf(list.cast(), size)?) };
        p.llistxattr(path, list)
    }) as ssize_t
}

/// `flistxattr(2)`.
///
/// # Safety
/// `list` is `NULL` or writable for `size` bytes.
#[no_mangle]
pub unsafe extern "C" fn svfs_flistxattr(
    p: *mut svfs_process,
    fd: c_int,
    list: *mut c_char,
    size: size_t,
) -> ssize_t {
    call("svfs_flistxattr", p, |p| {
        // SAFETY: the caller's contract for `list`.
        p.flistxattr(fd, unsafe { out_buf(list.cast(), size) }?)
    }) as ssize_t
}

/// `removexattr(2)`.
///
/// # Safety
/// `path` and `name` are `NULL` or NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn svfs_removexattr(
    p: *mut svfs_process,
    path: *const c_char,
    name: *const c_char,
) -> c_int {
    int_call("svfs_removexattr", p, |p| {
        // SAFETY: the caller's contract for the strings.
        let (path, name) = unsafe { (cpath(path)?, cpath(name)?) };
        p.removexattr(path, name)
    })
}

/// `lremovexattr(2)`.
///
/// # Safety
/// `path` and `name` are `NULL` or NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn svfs_lremovexattr(
    p: *mut svfs_process,
    path: *const c_char,
    name: *const c_char,
) -> c_int {
    int_call("svfs_lremovexattr", p, |p| {
        // SAFETY: the caller's contract for the strings.
        let (path, name) = unsafe { (cpath(path)?, cpath(name)?) };
        p.lremovexattr(path, name)
    })
}

/// `fremovexattr(2)`.
///
/// # Safety
/// `name` is `NULL` or NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn svfs_fremovexattr(
    p: *mut svfs_process,
    fd: c_int,
    name: *const c_char,
) -> c_int {
    int_call("svfs_fremovexattr", p, |p| {
        // SAFETY: the caller's contract for `name`.
        p.fremovexattr(fd, unsafe { cpath(name) }?)
    })
}

// --- mounts ---

/// Mounts a new tmpfs (`size=size_limit`, `nr_inodes=inode_limit`, 0: unlimited) on the
/// directory `path` (root only: `-EPERM`), as `mount("tmpfs", path, "tmpfs", 0, ...)`.
///
/// # Safety
/// `path` is `NULL` or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn svfs_mount_tmpfs(
    p: *mut svfs_process,
    path: *const c_char,
    size_limit: u64,
    inode_limit: u64,
) -> c_int {
    int_call("svfs_mount_tmpfs", p, |p| {
        let fs = scalevfs_rs::Tmpfs::new(scalevfs_rs::TmpfsOptions {
            size_limit: (size_limit != 0).then_some(size_limit),
            inode_limit: (inode_limit != 0).then_some(inode_limit),
        });
        // SAFETY: the caller's contract for `path`.
        p.mount(unsafe { cpath(path) }?, Arc::new(fs))
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
