//! Stopping a scalevfs mount removes that mount and nothing else: not the user's file
//! system beneath the mount point, not another scalevfs mount stacked with it. Every way
//! of stopping is tried with a tmpfs (holding a file) under the mount point.
//!
//! These need root (to mount the tmpfs), /dev/fuse and fusermount3; without them each test
//! prints a `SKIPPED:` line and passes.

mod common;
use common::*;

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// A tmpfs mounted on the mount point, holding `file`; detached when dropped (by path,
/// which in this test is known to be the tmpfs then: nothing else is left on it).
struct TmpfsUnder {
    dir: std::path::PathBuf,
}

impl TmpfsUnder {
    fn new(mp: &MountPoint) -> TmpfsUnder {
        let dir = mp.path();
        let c = CString::new(dir.as_os_str().as_bytes()).unwrap();
        // SAFETY: NUL-terminated strings that live across the call; no data argument.
        let r = unsafe {
            libc::mount(
                c"none".as_ptr(),
                c.as_ptr(),
                c"tmpfs".as_ptr(),
                0,
                std::ptr::null(),
            )
        };
        assert_eq!(r, 0, "mount tmpfs: {}", std::io::Error::last_os_error());
        std::fs::write(dir.join("file"), b"the user's data").unwrap();
        TmpfsUnder { dir }
    }

    /// The tmpfs is still the mount on top, with its file.
    fn assert_intact(&self, after: &str) {
        let top = top_fstype(&self.dir);
        assert_eq!(
            top.as_deref(),
            Some("tmpfs"),
            "after {after}: the top mount"
        );
        let data = std::fs::read(self.dir.join("file"));
        assert_eq!(
            data.ok().as_deref(),
            Some(&b"the user's data"[..]),
            "after {after}: the file on the tmpfs beneath"
        );
    }
}

impl Drop for TmpfsUnder {
    fn drop(&mut self) {
        if top_fstype(&self.dir).as_deref() == Some("tmpfs") {
            let c = CString::new(self.dir.as_os_str().as_bytes()).unwrap();
            // SAFETY: `c` is a valid NUL-terminated path.
            unsafe { libc::umount2(c.as_ptr(), libc::MNT_DETACH) };
        }
    }
}

/// The file system type of the mount on top at `dir` (the last mountinfo line for it).
fn top_fstype(dir: &Path) -> Option<String> {
    std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap()
        .lines()
        .rfind(|l| l.split(' ').nth(4) == dir.to_str())
        .and_then(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            let sep = f.iter().position(|x| *x == "-")?;
            f.get(sep + 1).map(|s| s.to_string())
        })
}

/// How the daemon is stopped.
#[derive(Clone, Copy, Debug)]
enum Stop {
    ScalevfsUmount,
    Signal(i32),
    FusermountU,
    UmountLazy,
    Umount,
}

fn run_tool(prog: &str, args: &[&str]) {
    let st = std::process::Command::new(prog)
        .args(args)
        .stdin(std::process::Stdio::null())
        .status()
        .unwrap_or_else(|e| panic!("{prog}: {e}"));
    assert!(st.success(), "{prog} {args:?}: {st}");
}

fn stop(how: Stop, mp: &MountPoint, pid: i32) {
    match how {
        Stop::ScalevfsUmount => {
            let out = run(&["umount", &mp.arg()]);
            assert_eq!(out.status.code(), Some(0), "stderr: {}", out.stderr);
        }
        // SAFETY: signalling the daemon we started.
        Stop::Signal(sig) => assert_eq!(unsafe { libc::kill(pid, sig) }, 0),
        Stop::FusermountU => run_tool("fusermount3", &["-u", &mp.arg()]),
        Stop::UmountLazy => run_tool("umount", &["-l", &mp.arg()]),
        Stop::Umount => run_tool("umount", &[&mp.arg()]),
    }
}

/// Every way of stopping a daemon leaves the tmpfs beneath the mount point, and its file.
#[test]
fn stopping_a_daemon_keeps_the_file_system_beneath() {
    let Some((_g, mp)) = mount_test("stopping_a_daemon_keeps_the_file_system_beneath") else {
        return;
    };
    let under = TmpfsUnder::new(&mp);
    for how in [
        Stop::ScalevfsUmount,
        Stop::Signal(libc::SIGTERM),
        Stop::Signal(libc::SIGINT),
        Stop::FusermountU,
        Stop::UmountLazy,
        Stop::Umount,
    ] {
        let pid = mount_daemon(&mp);
        assert_eq!(top_fstype(&mp.path()).as_deref(), Some("fuse.scalevfs"));
        stop(how, &mp, pid);
        assert_eq!(wait_daemon(pid), 0, "{how:?}: the daemon exits 0");
        under.assert_intact(&format!("{how:?}"));
    }
}

/// The same in the foreground: SIGTERM and SIGINT unmount ours and only ours.
#[test]
fn stopping_a_foreground_mount_keeps_the_file_system_beneath() {
    let Some((_g, mp)) = mount_test("stopping_a_foreground_mount_keeps_the_file_system_beneath")
    else {
        return;
    };
    let under = TmpfsUnder::new(&mp);
    for sig in [libc::SIGTERM, libc::SIGINT] {
        let arg = mp.arg();
        let mut r = spawn(&["mount", "--foreground", "--threads", "2", &arg], None).unwrap();
        r.wait_for_line("mounted ");
        r.signal(sig);
        let out = r.finish();
        assert_eq!(out.status.code(), Some(0), "stderr: {}", out.stderr);
        assert!(out.stderr.is_empty(), "nothing on stderr: {:?}", out.stderr);
        under.assert_intact(&format!("foreground, signal {sig}"));
    }
}

/// Two scalevfs mounts stacked on one directory end one at a time, top first, whichever
/// way each is stopped; the lower one keeps serving meanwhile.
#[test]
fn stacked_mounts_end_one_at_a_time() {
    let Some((_g, mp)) = mount_test("stacked_mounts_end_one_at_a_time") else {
        return;
    };
    let under = TmpfsUnder::new(&mp);
    for how in [
        Stop::ScalevfsUmount,
        Stop::Signal(libc::SIGTERM),
        Stop::FusermountU,
    ] {
        let lower = mount_daemon(&mp);
        std::fs::write(mp.path().join("lower"), b"in the lower mount").unwrap();
        let upper = mount_daemon(&mp);
        assert!(
            !mp.path().join("lower").exists(),
            "the upper mount is on top"
        );
        stop(how, &mp, upper);
        assert_eq!(wait_daemon(upper), 0, "{how:?}: the upper daemon exits");
        assert_eq!(
            std::fs::read(mp.path().join("lower")).unwrap(),
            b"in the lower mount",
            "{how:?}: the lower mount is still there, served"
        );
        // SAFETY: `lower` is our daemon's pid; waitpid with WNOHANG never blocks.
        let alive = unsafe { libc::waitpid(lower, &mut 0, libc::WNOHANG) } == 0;
        assert!(alive, "{how:?}: the lower daemon still runs");
        stop(how, &mp, lower);
        assert_eq!(wait_daemon(lower), 0, "{how:?}: the lower daemon exits");
        under.assert_intact(&format!("stacked, {how:?}"));
    }
}
