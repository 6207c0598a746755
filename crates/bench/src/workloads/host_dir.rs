//! Real system calls in a real directory: what every design that runs on the host kernel
//! shares (the `host` design of the VFS and lock workloads on /dev/shm, and both sides of
//! the `fuse-*` workloads: host tmpfs and the FUSE mount).
//!
//! [`HostDir`] is a fresh, empty directory per workload instance, removed with everything
//! in it when the instance is dropped; [`sys`] holds the thin libc wrappers the workers
//! call in their loops (no allocation, errors as `-1`/`false` like the syscalls).

use std::ffi::{CStr, CString};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// A fresh directory that is removed (recursively) on drop.
#[derive(Debug)]
pub struct HostDir {
    path: PathBuf,
}

impl HostDir {
    /// A fresh `/dev/shm/scalevfs-bench-TAG-PID-N`: a directory on the host's tmpfs.
    pub fn shm(tag: &str) -> Result<HostDir, String> {
        HostDir::fresh_in(Path::new("/dev/shm"), tag)
    }

    /// A fresh, empty `BASE/scalevfs-bench-TAG-PID-N` (a stale one left by a crashed run
    /// of the same pid is removed first).
    pub fn fresh_in(base: &Path, tag: &str) -> Result<HostDir, String> {
        // Unique within the process; the pid makes it unique between processes.
        static N: AtomicU64 = AtomicU64::new(0);
        let path = base.join(format!(
            "scalevfs-bench-{tag}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        Ok(HostDir { path })
    }

    /// The directory's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// `rel` below this directory, NUL-terminated for libc.
    pub fn cpath(&self, rel: &str) -> CString {
        CString::new(format!("{}/{rel}", self.path.display())).expect("no NUL in bench paths")
    }
}

impl Drop for HostDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// The system calls, as the workloads' loops make them.
pub mod sys {
    use super::*;

    /// `open(path, flags | O_CLOEXEC, 0644)`: the descriptor, or -1.
    #[inline]
    pub fn open(path: &CStr, flags: i32) -> i32 {
        // SAFETY: a valid NUL-terminated path.
        unsafe { libc::open(path.as_ptr(), flags | libc::O_CLOEXEC, 0o644) }
    }

    /// Creates `path` (or opens it if it exists) read-write; the descriptor or an error
    /// naming the path.
    pub fn create(path: &CStr) -> Result<i32, String> {
        let fd = open(path, libc::O_CREAT | libc::O_RDWR);
        if fd < 0 {
            return Err(format!(
                "create {}: {}",
                path.to_string_lossy(),
                std::io::Error::last_os_error()
            ));
        }
        Ok(fd)
    }

    /// `close(fd)`, errors ignored.
    #[inline]
    pub fn close(fd: i32) {
        // SAFETY: closing a descriptor the caller owns.
        unsafe { libc::close(fd) };
    }

    /// `stat(path)`: the size, or -1.
    #[inline]
    pub fn stat_size(path: &CStr) -> i64 {
        // SAFETY: zeroed stat is a valid out-buffer.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: valid path and out-buffer.
        if unsafe { libc::stat(path.as_ptr(), &mut st) } == 0 {
            st.st_size
        } else {
            -1
        }
    }

    /// `fcntl(fd, cmd, {ty, SEEK_SET, 0, len})` for a lock command; true on success.
    #[inline]
    pub fn lock(fd: i32, cmd: i32, ty: i32, len: i64) -> bool {
        let mut fl = flock(ty, len);
        // SAFETY: a descriptor of the caller's and a valid `struct flock`.
        unsafe { libc::fcntl(fd, cmd, &mut fl as *mut libc::flock) == 0 }
    }

    /// `F_GETLK`-style query (`cmd` is `F_GETLK` or `F_OFD_GETLK`) for a write lock on
    /// `0..len`: the conflicting lock's type, `F_UNLCK` if none, or -1 on error.
    pub fn getlk(fd: i32, cmd: i32, len: i64) -> i32 {
        let mut fl = flock(libc::F_WRLCK, len);
        // SAFETY: as in `lock`.
        if unsafe { libc::fcntl(fd, cmd, &mut fl as *mut libc::flock) } == 0 {
            i32::from(fl.l_type)
        } else {
            -1
        }
    }

    fn flock(ty: i32, len: i64) -> libc::flock {
        libc::flock {
            l_type: ty as i16,
            l_whence: libc::SEEK_SET as i16,
            l_start: 0,
            l_len: len,
            l_pid: 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fresh_dirs_are_distinct_and_removed_on_drop() {
        let a = HostDir::fresh_in(&std::env::temp_dir(), "t").unwrap();
        let b = HostDir::fresh_in(&std::env::temp_dir(), "t").unwrap();
        assert_ne!(a.path(), b.path());
        let fd = sys::create(&a.cpath("f")).unwrap();
        sys::close(fd);
        assert_eq!(sys::stat_size(&a.cpath("f")), 0);
        assert_eq!(sys::stat_size(&a.cpath("missing")), -1);
        let p = a.path().to_owned();
        drop(a);
        assert!(!p.exists(), "removed with its contents");
        assert!(sys::create(&b.cpath("no/such/dir"))
            .unwrap_err()
            .contains("No such file"));
    }

    /// `lock` really locks: another open file description sees the write lock through
    /// `F_OFD_GETLK` until it is unlocked.
    #[test]
    fn lock_and_getlk() {
        let d = HostDir::fresh_in(&std::env::temp_dir(), "t").unwrap();
        let a = sys::create(&d.cpath("f")).unwrap();
        let b = sys::create(&d.cpath("f")).unwrap();
        assert!(sys::lock(a, libc::F_SETLK, libc::F_WRLCK, 1));
        assert_eq!(sys::getlk(b, libc::F_OFD_GETLK, 1), libc::F_WRLCK);
        assert!(sys::lock(a, libc::F_SETLK, libc::F_UNLCK, 1));
        assert_eq!(sys::getlk(b, libc::F_OFD_GETLK, 1), libc::F_UNLCK);
        assert!(!sys::lock(-1, libc::F_SETLK, libc::F_WRLCK, 1));
        sys::close(a);
        sys::close(b);
    }
}
