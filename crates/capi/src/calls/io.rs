//! The C calls for open, close, read, write, the vectored and positioned forms, copy_file_range, lseek.

use super::*;

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
