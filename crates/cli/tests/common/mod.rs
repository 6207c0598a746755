//! Helpers for the tests that run the `scalevfs` binary's `mount` and `umount`.
//!
//! Each test binary that uses them takes the [`serial`] guard around a mount: fewer
//! processes at once on 2 cores, and no child of one test alive while another test has a
//! file open on its mount. Not every binary uses every helper.
#![allow(dead_code)]
use std::ffi::CString;
use std::fs::File;
use std::io::{Read, Seek};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Mutex, MutexGuard, Once};
use std::time::{Duration, Instant};

pub const BIN: &str = env!("CARGO_BIN_EXE_scalevfs");
/// How long the bounded waits wait for the binary to do what needs only the scheduler to
/// run it (print a line, mount, exit): only a failing run waits this long.
pub const WAIT: Duration = Duration::from_secs(60);

static MOUNTS: Mutex<()> = Mutex::new(());

pub fn serial() -> MutexGuard<'static, ()> {
    MOUNTS.lock().unwrap_or_else(|e| e.into_inner())
}

/// What a finished command printed.
pub struct Out {
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
}

/// A running command whose stdout and stderr go to files.
pub struct Running {
    child: Child,
    out: File,
    err: File,
}

pub fn spawn(
    args: &[&str],
    setup: Option<fn() -> std::io::Result<()>>,
) -> std::io::Result<Running> {
    let out = tempfile::tempfile()?;
    let err = tempfile::tempfile()?;
    let mut cmd = Command::new(BIN);
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(out.try_clone()?)
        .stderr(err.try_clone()?);
    if let Some(f) = setup {
        // Only /usr/bin and /bin may hold fusermount3 (see hide_bin).
        cmd.env("PATH", "/nonexistent");
        // SAFETY: the closures passed here make only raw system calls (unshare, mount,
        // setresuid), which are async-signal-safe.
        unsafe { cmd.pre_exec(f) };
    }
    Ok(Running {
        child: cmd.spawn()?,
        out,
        err,
    })
}

pub fn contents(mut f: &File) -> String {
    let mut s = String::new();
    f.rewind().unwrap();
    f.read_to_string(&mut s).unwrap();
    s
}

impl Running {
    /// Waits at most [`WAIT`]; a command still running then is stopped and fails the test.
    pub fn finish(mut self) -> Out {
        let deadline = Instant::now() + WAIT;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return Out {
                    status,
                    stdout: contents(&self.out),
                    stderr: contents(&self.err),
                };
            }
            if Instant::now() > deadline {
                // Our scalevfs processes never have files open on their own mount, so
                // SIGKILL cannot leave one in D state.
                let _ = self.child.kill();
                let _ = self.child.wait();
                panic!(
                    "scalevfs did not exit within {WAIT:?}; stdout {:?}, stderr {:?}",
                    contents(&self.out),
                    contents(&self.err)
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Waits until stdout has a line starting with `prefix`.
    pub fn wait_for_line(&mut self, prefix: &str) -> String {
        let deadline = Instant::now() + WAIT;
        loop {
            if let Some(l) = contents(&self.out).lines().find(|l| l.starts_with(prefix)) {
                return l.to_string();
            }
            if let Some(st) = self.child.try_wait().unwrap() {
                panic!("exited ({st}) before {prefix:?}: {}", contents(&self.err));
            }
            assert!(Instant::now() < deadline, "no {prefix:?} line in time");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn signal(&self, sig: i32) {
        // SAFETY: signalling our own child, which has not been reaped yet.
        assert_eq!(unsafe { libc::kill(self.child.id() as i32, sig) }, 0);
    }
}

pub fn run(args: &[&str]) -> Out {
    spawn(args, None).unwrap().finish()
}

/// Asserts exit status 1 and that the last stderr line is `want` (the only line unless
/// `only` is false: fusermount3 may add its own line first).
pub fn assert_error(out: &Out, want: &str, only: bool) {
    assert_eq!(out.status.code(), Some(1), "stderr: {}", out.stderr);
    let lines: Vec<&str> = out.stderr.lines().collect();
    assert_eq!(
        lines.last().copied(),
        Some(want),
        "stderr: {:?}",
        out.stderr
    );
    if only {
        assert_eq!(lines.len(), 1, "one line: {:?}", out.stderr);
    }
    assert!(out.stdout.is_empty(), "stdout: {:?}", out.stdout);
}

pub fn is_root() -> bool {
    // SAFETY: geteuid cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// Why the mount tests cannot run here, if they cannot.
pub fn cannot_mount() -> Option<&'static str> {
    if !is_root() {
        Some("not root")
    } else if !Path::new("/dev/fuse").exists() {
        Some("/dev/fuse is missing")
    } else if scalevfs_fuse::fusermount_path().is_none() {
        Some("fusermount3 is missing")
    } else {
        None
    }
}

pub fn skip(test: &str, why: &str) {
    println!("SKIPPED: {test}: {why}");
}

/// For a test that mounts: the serializing guard and a mount point, or `None` (after a
/// `SKIPPED:` line) when this machine cannot mount.
pub fn mount_test(test: &str) -> Option<(MutexGuard<'static, ()>, MountPoint)> {
    if let Some(why) = cannot_mount() {
        skip(test, why);
        return None;
    }
    Some((serial(), MountPoint::new()))
}

/// The mount points of the FUSE mounts in this namespace.
pub fn fuse_mounts() -> Vec<PathBuf> {
    std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap()
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            let sep = f.iter().position(|x| *x == "-")?;
            f.get(sep + 1)?
                .starts_with("fuse")
                .then(|| PathBuf::from(f[4]))
        })
        .collect()
}

pub fn is_mounted(dir: &Path) -> bool {
    fuse_mounts().iter().any(|m| m == dir)
}

/// Waits until `dir` is (or is not) a FUSE mount point.
pub fn wait_mounted(dir: &Path, want: bool) {
    let deadline = Instant::now() + WAIT;
    while is_mounted(dir) != want {
        assert!(
            Instant::now() < deadline,
            "{} still {}mounted",
            dir.display(),
            if want { "not " } else { "" }
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A temporary mount point that is detached if a test fails with it mounted.
pub struct MountPoint(pub tempfile::TempDir);

impl MountPoint {
    pub fn new() -> MountPoint {
        MountPoint(tempfile::tempdir().unwrap())
    }
    pub fn path(&self) -> PathBuf {
        std::fs::canonicalize(self.0.path()).unwrap()
    }
    pub fn arg(&self) -> String {
        self.path().to_str().unwrap().to_string()
    }
}

impl Drop for MountPoint {
    fn drop(&mut self) {
        let p = self.0.path().to_owned();
        if is_mounted(&p) {
            let c = CString::new(p.as_os_str().as_bytes()).unwrap();
            // SAFETY: `c` is a valid NUL-terminated path.
            unsafe { libc::umount2(c.as_ptr(), libc::MNT_DETACH) };
        }
    }
}

/// Makes this test process the reaper of orphans below it, so that a daemon whose parent
/// exited is reparented to us and we can read its exit status.
pub fn become_subreaper() {
    static ONCE: Once = Once::new();
    // SAFETY: prctl with integer arguments.
    ONCE.call_once(|| assert_eq!(unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1) }, 0));
}

/// Waits for the daemon `pid` (reparented to us) to exit; returns its exit code.
pub fn wait_daemon(pid: i32) -> i32 {
    let deadline = Instant::now() + WAIT;
    loop {
        let mut status = 0;
        // SAFETY: `status` is a live c_int; WNOHANG never blocks.
        let r = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
        if r == pid {
            assert!(libc::WIFEXITED(status), "daemon died: status {status:#x}");
            return libc::WEXITSTATUS(status);
        }
        assert!(
            r == 0,
            "waitpid({pid}): {}",
            std::io::Error::last_os_error()
        );
        if Instant::now() > deadline {
            // SAFETY: plain kill of the daemon, which has no file open on its mount.
            unsafe { libc::kill(pid, libc::SIGTERM) };
            panic!("daemon {pid} did not exit within {WAIT:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `scalevfs mount DIR` as a daemon: checks the parent's exit and output, returns the
/// daemon's pid.
pub fn mount_daemon(mp: &MountPoint) -> i32 {
    become_subreaper();
    let out = run(&["mount", "--threads", "2", &mp.arg()]);
    assert_eq!(out.status.code(), Some(0), "stderr: {}", out.stderr);
    assert!(out.stderr.is_empty(), "stderr: {:?}", out.stderr);
    let want = format!("mounted {} (daemon pid ", mp.arg());
    let pid = out
        .stdout
        .trim_end()
        .strip_prefix(&want)
        .and_then(|s| s.split(", transport ").next())
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("stdout: {:?}", out.stdout));
    // The parent exits only once the daemon has mounted.
    assert!(is_mounted(&mp.path()), "mounted when the parent exits");
    pid
}
