//! [`HostBackend`]: runs each script in a forked, chrooted child on the host kernel (see
//! the parent module).

use std::ffi::CString;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use scalevfs::Errno;

use super::{HostTarget, TMPFS_MAGIC};
use crate::op::{CompareOptions, Outcome};
use crate::runner::{run_script, Backend};
use crate::script::Script;

/// Runs scripts on the host kernel, each in a fresh directory under `base`.
pub struct HostBackend {
    /// Created by us, removed on drop.
    base: PathBuf,
    tmpfs: bool,
    /// A tmpfs we mounted (and unmount on drop) when /dev/shm was not one.
    mount: Option<PathBuf>,
    next_case: AtomicU64,
}

static UNIQUE: AtomicU64 = AtomicU64::new(0);

fn unique_name() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    format!(
        "scalevfs-conformance-{}-{}-{}",
        std::process::id(),
        nanos,
        UNIQUE.fetch_add(1, Ordering::Relaxed)
    )
}

/// Whether `path` is on tmpfs.
pub fn is_tmpfs(path: &Path) -> Result<bool, String> {
    let p = CString::new(path.as_os_str().as_encoded_bytes())
        .map_err(|_| format!("{}: path contains NUL", path.display()))?;
    // SAFETY: all-zero bytes are a valid `struct statfs`.
    let mut sf: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: `p` is NUL-terminated and `sf` is writable.
    if unsafe { libc::statfs(p.as_ptr(), &mut sf) } != 0 {
        return Err(format!(
            "statfs({}): {}",
            path.display(),
            Errno::last_os_error()
        ));
    }
    Ok(sf.f_type as i64 == TMPFS_MAGIC)
}

fn require_root() -> Result<(), String> {
    // SAFETY: no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Err(
            "the host side of the conformance harness must run as root: it chroots \
                    into each case directory and drops to unprivileged uids for permission \
                    cases (CI runs as root)"
                .into(),
        );
    }
    Ok(())
}

impl HostBackend {
    /// A fresh directory on the tmpfs at `/dev/shm`, or, if that is not a tmpfs, on a
    /// private tmpfs mounted for this backend under the temp directory. Fails clearly if
    /// neither works or the process is not root.
    pub fn new() -> Result<HostBackend, String> {
        Self::new_tmpfs_under(Path::new("/dev/shm")).or_else(|e| {
            Self::private_tmpfs().map_err(|e2| format!("{e}; mounting a tmpfs failed too: {e2}"))
        })
    }

    /// Mount a tmpfs of our own (needs CAP_SYS_ADMIN) and use a directory on it.
    pub fn private_tmpfs() -> Result<HostBackend, String> {
        require_root()?;
        let mnt = std::env::temp_dir().join(unique_name());
        std::fs::create_dir(&mnt).map_err(|e| format!("mkdir {}: {e}", mnt.display()))?;
        let target = CString::new(mnt.as_os_str().as_encoded_bytes())
            .map_err(|_| "temp dir contains NUL".to_string())?;
        // SAFETY: all strings are NUL-terminated; data is NULL.
        let r = unsafe {
            libc::mount(
                c"tmpfs".as_ptr(),
                target.as_ptr(),
                c"tmpfs".as_ptr(),
                0,
                std::ptr::null(),
            )
        };
        if r != 0 {
            let e = Errno::last_os_error();
            let _ = std::fs::remove_dir(&mnt);
            return Err(format!("mount tmpfs on {}: {e}", mnt.display()));
        }
        let mut b = Self::in_dir(&mnt)?;
        b.tmpfs = true;
        b.mount = Some(mnt);
        Ok(b)
    }

    /// A fresh directory under `parent`, which must be on tmpfs.
    pub fn new_tmpfs_under(parent: &Path) -> Result<HostBackend, String> {
        if !is_tmpfs(parent)? {
            return Err(format!(
                "{} is not a tmpfs: the host reference must be Linux tmpfs (mount one, or \
                 use HostBackend::in_dir for other file systems)",
                parent.display()
            ));
        }
        let mut b = Self::in_dir(parent)?;
        b.tmpfs = true;
        Ok(b)
    }

    /// A fresh directory under any directory (e.g. a FUSE mount of scalevfs). Directory
    /// sizes are compared only if it is tmpfs.
    pub fn in_dir(parent: &Path) -> Result<HostBackend, String> {
        require_root()?;
        let base = parent.join(unique_name());
        std::fs::create_dir(&base).map_err(|e| format!("mkdir {}: {e}", base.display()))?;
        let tmpfs = is_tmpfs(&base)?;
        Ok(HostBackend {
            base,
            tmpfs,
            mount: None,
            next_case: AtomicU64::new(0),
        })
    }

    pub fn base(&self) -> &Path {
        &self.base
    }

    fn run_in(&self, dir: &Path, script: &Script) -> Vec<Outcome> {
        let croot = match CString::new(dir.as_os_str().as_encoded_bytes()) {
            Ok(c) => c,
            Err(_) => return vec![Outcome::Harness("case dir contains NUL".into())],
        };
        let mut fds = [0i32; 2];
        // SAFETY: `fds` is a writable array of two ints.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            return vec![Outcome::Harness(format!(
                "pipe2: {:?}",
                Errno::last_os_error()
            ))];
        }
        let (rfd, wfd) = (fds[0], fds[1]);
        // SAFETY: the child only runs the script with system calls and allocation (glibc
        // keeps malloc usable in a fork child), writes to its pipe and `_exit`s; it never
        // returns into the caller or touches locks other threads may hold (no stdio).
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            let e = Errno::last_os_error();
            // SAFETY: closing our own pipe fds.
            unsafe {
                libc::close(rfd);
                libc::close(wfd);
            }
            return vec![Outcome::Harness(format!("fork: {e:?}"))];
        }
        if pid == 0 {
            child_main(wfd, &croot, script);
        }
        // SAFETY: the parent's copy of the write end is ours to close.
        unsafe { libc::close(wfd) };
        let mut out = Vec::new();
        let mut buf = [0u8; 8192];
        loop {
            // SAFETY: `buf` is writable for its length.
            let n = unsafe { libc::read(rfd, buf.as_mut_ptr().cast(), buf.len()) };
            if n > 0 {
                out.extend_from_slice(&buf[..n as usize]);
            } else if n == 0 || Errno::last_os_error() != Errno::EINTR {
                break;
            }
        }
        // SAFETY: closing our own read end.
        unsafe { libc::close(rfd) };
        let mut status = 0;
        // SAFETY: `pid` is our child; `status` is writable.
        while unsafe { libc::waitpid(pid, &mut status, 0) } < 0 {
            if Errno::last_os_error() != Errno::EINTR {
                break;
            }
        }
        let mut outcomes: Vec<Outcome> = Vec::new();
        for line in out.split(|&c| c == b'\n').filter(|l| !l.is_empty()) {
            match serde_json::from_slice(line) {
                Ok(o) => outcomes.push(o),
                Err(e) => {
                    outcomes.push(Outcome::Harness(format!("undecodable child output: {e}")));
                    break;
                }
            }
        }
        let clean = libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0;
        if !clean && !matches!(outcomes.last(), Some(Outcome::Harness(_))) {
            outcomes.push(Outcome::Harness(format!(
                "host child died (wait status {status:#x})"
            )));
        }
        outcomes
    }
}

/// The forked child: never returns.
fn child_main(wfd: i32, root: &CString, script: &Script) -> ! {
    // SAFETY: plain system calls on fds and NUL-terminated strings we own, and a zeroed
    // `struct rlimit` (valid for all-zero bytes); the closure writes from a live buffer.
    unsafe {
        let mut rl: libc::rlimit = std::mem::zeroed();
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut rl);
        let hi = (rl.rlim_cur.min(1 << 20) as i32 - 1).max(64);
        let out = if libc::dup3(wfd, hi, libc::O_CLOEXEC) == hi {
            hi
        } else {
            libc::_exit(3)
        };
        if libc::syscall(libc::SYS_close_range, 0u32, (hi - 1) as u32, 0u32) != 0 {
            // Before Linux 5.9: close what a test process plausibly has open.
            for fd in 0..hi.min(65536) {
                libc::close(fd);
            }
        }
        libc::syscall(libc::SYS_close_range, (hi + 1) as u32, u32::MAX, 0u32);
        let send = |o: &Outcome| {
            let mut line = serde_json::to_vec(o).unwrap_or_else(|_| b"\"Ok\"".to_vec());
            line.push(b'\n');
            let mut rest = &line[..];
            while !rest.is_empty() {
                let n = libc::write(out, rest.as_ptr().cast(), rest.len());
                if n <= 0 {
                    if n < 0 && Errno::last_os_error() == Errno::EINTR {
                        continue;
                    }
                    libc::_exit(4);
                }
                rest = &rest[n as usize..];
            }
        };
        // A script that hangs the host (it should not) is killed and reported as a dead child.
        libc::alarm(60);
        // A script that mounts gets a mount namespace of its own, with nothing propagated
        // back out: its mounts die with this child, and the case directory can be removed.
        if script.mounts()
            && (libc::unshare(libc::CLONE_NEWNS) != 0
                || libc::mount(
                    std::ptr::null(),
                    c"/".as_ptr(),
                    std::ptr::null(),
                    libc::MS_REC | libc::MS_PRIVATE,
                    std::ptr::null(),
                ) != 0)
        {
            send(&Outcome::Harness(format!(
                "private mount namespace: {:?}",
                Errno::last_os_error()
            )));
            libc::_exit(0);
        }
        if libc::chroot(root.as_ptr()) != 0 || libc::chdir(c"/".as_ptr()) != 0 {
            send(&Outcome::Harness(format!(
                "chroot: {:?}",
                Errno::last_os_error()
            )));
            libc::_exit(0);
        }
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let mut t = HostTarget;
            run_script(&mut t, script, &mut |o| send(&o));
        }));
        if r.is_err() {
            send(&Outcome::Harness("panic in host child".into()));
        }
        libc::_exit(0)
    }
}

/// Clears the inode flags (`FS_IOC_SETFLAGS` 0) of every file and directory below `dir`,
/// so that it can be removed. Errors are ignored: what cannot be cleared stays.
fn clear_inode_flags(dir: &std::path::Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let clear = |p: &std::path::Path| {
        let Ok(c) = CString::new(p.as_os_str().as_encoded_bytes()) else {
            return;
        };
        let flags = libc::O_RDONLY | libc::O_NONBLOCK | libc::O_NOFOLLOW | libc::O_CLOEXEC;
        // SAFETY: `c` is NUL-terminated.
        let fd = unsafe { libc::open(c.as_ptr(), flags) };
        if fd >= 0 {
            let zero: libc::c_int = 0;
            // SAFETY: FS_IOC_SETFLAGS reads an int from the pointer; `fd` is ours.
            unsafe {
                libc::ioctl(fd, scalevfs::fileattr::FS_IOC_SETFLAGS as _, &zero);
                libc::close(fd);
            }
        }
    };
    clear(dir);
    for e in entries.flatten() {
        match e.file_type() {
            Ok(t) if t.is_dir() => clear_inode_flags(&e.path()),
            Ok(t) if t.is_file() => clear(&e.path()),
            _ => {}
        }
    }
}

impl Backend for HostBackend {
    fn describe(&self) -> String {
        format!(
            "host kernel in {}{}",
            self.base.display(),
            if self.tmpfs { " (tmpfs)" } else { "" }
        )
    }
    fn run(&self, script: &Script) -> Vec<Outcome> {
        let n = self.next_case.fetch_add(1, Ordering::Relaxed);
        let dir = self.base.join(format!("case-{n}"));
        if let Err(e) = std::fs::create_dir(&dir) {
            return vec![Outcome::Harness(format!("mkdir {}: {e}", dir.display()))];
        }
        let out = self.run_in(&dir, script);
        if std::fs::remove_dir_all(&dir).is_err() {
            // A case may leave an immutable or append-only file (chattr) behind.
            clear_inode_flags(&dir);
            let _ = std::fs::remove_dir_all(&dir);
        }
        out
    }
    fn compare_options(&self) -> CompareOptions {
        CompareOptions {
            ignore_dir_size: !self.tmpfs,
        }
    }
}

impl Drop for HostBackend {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.base);
        if let Some(mnt) = &self.mount {
            if let Ok(c) = CString::new(mnt.as_os_str().as_encoded_bytes()) {
                // SAFETY: `c` is NUL-terminated.
                unsafe { libc::umount2(c.as_ptr(), libc::MNT_DETACH) };
            }
            let _ = std::fs::remove_dir(mnt);
        }
    }
}
