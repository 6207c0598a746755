//! The C calls for the namespace: mkdir, mknod, unlink, rmdir, rename, link, symlink, readlink, getdents64.

use super::*;

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
