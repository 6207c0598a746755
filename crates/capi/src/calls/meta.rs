//! The C calls for metadata: stat and friends, chmod, chown, utimensat, access, umask.

use super::*;

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
