//! The C calls for sizes: truncate, ftruncate, fallocate.

use super::*;

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
