//! The C calls for extended attributes, each in its path, link and descriptor form.

use super::*;

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
