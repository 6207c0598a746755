//! The C calls for descriptors: dup, fcntl (record locks included), flock, chdir, getcwd, syncs, the descriptor limit.

use super::*;

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
    if scalevfs_rs::locks::is_lock_cmd(cmd) {
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
        if !scalevfs_rs::locks::is_lock_cmd(cmd) {
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
