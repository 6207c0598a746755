//! `scalevfs mount` / `scalevfs umount`, run as the built binary.
//!
//! The error lines need nothing; the missing-/dev/fuse, missing-fusermount3 and
//! mount-failure lines need root (a private mount namespace hides or replaces the files);
//! the mount tests need root, /dev/fuse and fusermount3. A test that cannot run prints a
//! `SKIPPED:` line and passes. Every wait is bounded, and output goes to files (a daemon
//! holding a pipe could never make a read of it end).
//!
//! The tests that mount take one mutex: fewer processes at once on 2 cores, and no child
//! of one test is alive while another test has a file open on its mount.

mod common;
use common::*;
#[path = "../../fuse/tests/common/uring_guard.rs"]
mod uring_guard;

use std::ffi::CString;
use std::fs::File;
use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::{Duration, Instant};
// ------------------------------------------------------------------- error lines

#[test]
fn preflight_errors_are_one_line_and_exit_1() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing");
    let file = dir.path().join("file");
    std::fs::write(&file, b"").unwrap();
    let (missing, file) = (missing.to_str().unwrap(), file.to_str().unwrap());
    for fg in [&["--foreground"][..], &[]] {
        let out = run(&[&["mount", missing][..], fg].concat());
        assert_error(
            &out,
            &format!("scalevfs mount: mount point {missing} does not exist"),
            true,
        );
        let out = run(&[&["mount", file][..], fg].concat());
        assert_error(
            &out,
            &format!("scalevfs mount: mount point {file} is not a directory"),
            true,
        );
    }
}

#[test]
fn bad_option_values_are_usage_errors() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    for bad in [
        &["--size", "12X"][..],
        &["--size=-1"],
        &["--size", "99999999999999999999G"],
        &["--inodes", "many"],
        &["--threads", "0"],
        &["--threads", "100000"],
    ] {
        let out = run(&[&["mount", d][..], bad].concat());
        assert_eq!(out.status.code(), Some(2), "{bad:?}: {}", out.stderr);
        assert!(
            out.stderr.starts_with("error: invalid value"),
            "{bad:?}: {}",
            out.stderr
        );
        assert!(!is_mounted(&dir.path().canonicalize().unwrap()));
    }
    let out = run(&["mount"]);
    assert_eq!(out.status.code(), Some(2), "{}", out.stderr);
}

/// A private mount namespace in which `/dev` is an empty tmpfs.
fn hide_dev() -> std::io::Result<()> {
    private_ns()?;
    mount_c(c"none", c"/dev", c"tmpfs", 0)
}

/// A private mount namespace without fusermount3 (PATH is set to nothing useful too).
fn hide_bin() -> std::io::Result<()> {
    private_ns()?;
    mount_c(c"none", c"/usr/bin", c"tmpfs", 0)?;
    // /bin is /usr/bin on merged-/usr systems; otherwise hide it as well.
    let _ = mount_c(c"none", c"/bin", c"tmpfs", 0);
    Ok(())
}

/// A private mount namespace in which /dev/fuse is /dev/null: preflight can open it,
/// the kernel's mount(2) refuses it.
fn fake_dev_fuse() -> std::io::Result<()> {
    private_ns()?;
    mount_c(c"/dev/null", c"/dev/fuse", c"", libc::MS_BIND)
}

/// Runs as user nobody (65534), without supplementary groups.
fn as_nobody() -> std::io::Result<()> {
    // SAFETY: raw syscalls with integer arguments.
    let ok = unsafe {
        libc::setgroups(0, std::ptr::null()) == 0
            && libc::setresgid(65534, 65534, 65534) == 0
            && libc::setresuid(65534, 65534, 65534) == 0
    };
    if ok {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// A non-root mounter (user 1000, no supplementary groups) on a system where fusectl is
/// not mounted: a private mount namespace without it, whose `/dev` holds a `/dev/fuse`
/// (and `/dev/null`) that everyone may open.
fn nonroot_without_fusectl() -> std::io::Result<()> {
    private_ns()?;
    // SAFETY: a NUL-terminated constant path; EINVAL (not mounted) is fine.
    unsafe { libc::umount2(c"/sys/fs/fuse/connections".as_ptr(), libc::MNT_DETACH) };
    open_dev_fuse()?;
    // SAFETY: raw syscalls with integer arguments.
    let ok = unsafe {
        libc::setgroups(0, std::ptr::null()) == 0
            && libc::setresgid(1000, 1000, 1000) == 0
            && libc::setresuid(1000, 1000, 1000) == 0
    };
    if ok {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

fn private_ns() -> std::io::Result<()> {
    // SAFETY: unshare with a constant flag.
    if unsafe { libc::unshare(libc::CLONE_NEWNS) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    mount_c(c"none", c"/", c"", libc::MS_REC | libc::MS_PRIVATE)
}

fn mount_c(
    src: &std::ffi::CStr,
    target: &std::ffi::CStr,
    fstype: &std::ffi::CStr,
    flags: libc::c_ulong,
) -> std::io::Result<()> {
    // SAFETY: NUL-terminated strings that outlive the call; no data argument.
    let r = unsafe {
        libc::mount(
            src.as_ptr(),
            target.as_ptr(),
            fstype.as_ptr(),
            flags,
            std::ptr::null(),
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// [`hide_bin`], with a `/dev/fuse` everyone may open, as user nobody: root would mount
/// with mount(2) itself, a non-root user needs fusermount3.
fn hide_bin_as_nobody() -> std::io::Result<()> {
    hide_bin()?;
    open_dev_fuse()?;
    as_nobody()
}

/// Mounts a tmpfs on `/dev` holding a `/dev/fuse` (and `/dev/null`) that everyone may
/// open (in a private mount namespace).
fn open_dev_fuse() -> std::io::Result<()> {
    mount_c(c"none", c"/dev", c"tmpfs", 0)?;
    for (path, major, minor) in [(c"/dev/fuse", 10, 229), (c"/dev/null", 1, 3)] {
        // SAFETY: NUL-terminated constant paths, integer arguments.
        let ok = unsafe {
            libc::mknod(
                path.as_ptr(),
                libc::S_IFCHR | 0o666,
                libc::makedev(major, minor),
            ) == 0
                && libc::chmod(path.as_ptr(), 0o666) == 0
        };
        if !ok {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// A pre-exec setup, the last stderr line (or its start), whether it is the only line.
type Case = (fn() -> std::io::Result<()>, &'static str, bool);

#[test]
fn missing_device_privilege_fusermount3_and_mount_failure() {
    const TEST: &str = "missing_device_privilege_fusermount3_and_mount_failure";
    if !is_root() {
        return skip(TEST, "not root");
    }
    let _g = serial();
    let mp = MountPoint::new();
    let d = mp.arg();
    let mut cases: Vec<Case> = vec![(
        hide_dev,
        "scalevfs mount: /dev/fuse is missing: load the fuse module (modprobe fuse) or run \
             the container with --device /dev/fuse",
        true,
    )];
    let dev_mode = std::fs::metadata("/dev/fuse").map(|m| m.permissions().mode());
    // Root without fusermount3 mounts with mount(2) (the foreground tests mount that
    // way); a non-root user who may open /dev/fuse needs it.
    cases.push((
        hide_bin_as_nobody,
        "scalevfs mount: fusermount3 not found: install the fuse3 package (apt-get install \
         fuse3)",
        true,
    ));
    // User nobody cannot open /dev/fuse unless it is open to everyone.
    if dev_mode.is_ok_and(|m| m & 0o006 != 0o006) {
        cases.push((
            as_nobody,
            "scalevfs mount: no permission to open /dev/fuse: run as root or add yourself to \
             the group that owns it",
            true,
        ));
    }
    if cannot_mount().is_none() {
        // fusermount3 explains the failure on a line of its own, before ours.
        cases.push((fake_dev_fuse, "scalevfs mount: mount failed:", false));
    }
    for (setup, want, only) in cases {
        for fg in [true, false] {
            let mut args = vec!["mount", d.as_str()];
            if fg {
                args.push("--foreground");
            }
            let out = match spawn(&args, Some(setup)) {
                Ok(r) => r.finish(),
                Err(e) => return skip(TEST, &format!("no private mount namespace: {e}")),
            };
            if only {
                assert_error(&out, want, true);
            } else {
                assert_eq!(out.status.code(), Some(1), "{}", out.stderr);
                let last = out.stderr.lines().last().unwrap_or("");
                assert!(last.starts_with(want), "fg {fg}: {:?}", out.stderr);
                assert!(out.stdout.is_empty(), "{:?}", out.stdout);
            }
            assert!(!is_mounted(&mp.path()));
        }
    }
}

#[test]
fn umount_refuses_what_is_not_a_scalevfs_mount() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap().to_string();
    let missing = format!("{d}/missing");
    for p in [d.as_str(), &missing, "/", "/proc", "relative/missing"] {
        let out = run(&["umount", p]);
        assert_error(
            &out,
            &format!("scalevfs umount: {p} is not a scalevfs mount"),
            true,
        );
    }
}

// ------------------------------------------------------------------- mounting

/// The super options of the FUSE mount on `dir` (the last field of its mountinfo line).
fn super_options(dir: &Path) -> String {
    let info = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    let line = info
        .lines()
        .rfind(|l| l.split(' ').nth(4) == dir.to_str())
        .unwrap_or_else(|| panic!("{} not in mountinfo", dir.display()));
    line.rsplit(' ').next().unwrap().to_string()
}

fn foreground_ends_on(sig: i32, test: &str, allow_other: bool) {
    let Some((_g, mp)) = mount_test(test) else {
        return;
    };
    let arg = mp.arg();
    let mut args = vec!["mount", "--foreground", "--threads", "2", &arg];
    if allow_other {
        args.push("--allow-other");
    }
    let mut r = spawn(&args, None).unwrap();
    let line = r.wait_for_line("mounted ");
    assert!(
        line.starts_with(&format!("mounted {} (transport ", mp.arg())),
        "{line}"
    );
    assert!(is_mounted(&mp.path()));
    let opts = super_options(&mp.path());
    assert_eq!(
        opts.split(',').any(|o| o == "allow_other"),
        allow_other,
        "{opts}"
    );
    // The mount answers: the root is a directory.
    assert!(std::fs::metadata(mp.path()).unwrap().is_dir());
    r.signal(sig);
    let out = r.finish();
    assert_eq!(out.status.code(), Some(0), "stderr: {}", out.stderr);
    assert!(
        out.stdout
            .contains(&format!("unmounted {} (signal {sig})", mp.arg())),
        "{}",
        out.stdout
    );
    assert!(!is_mounted(&mp.path()), "unmounted once the process exited");
}

/// `--transport uring` serves through io_uring (the fuse module's `enable_uring` held on
/// meanwhile) and says so; `--transport dev` says it reads /dev/fuse, with no reason.
#[test]
fn transport_option_picks_and_reports_the_transport() {
    let Some((_g, mp)) = mount_test("transport_option_picks_and_reports_the_transport") else {
        return;
    };
    let arg = mp.arg();
    let f = mp.path().join("f");
    for (transport, expect) in [
        ("dev", "(transport /dev/fuse)".to_string()),
        ("uring", "(transport io_uring, ".to_string()),
    ] {
        let _uring = match transport {
            "uring" => match uring_guard::EnableUring::acquire() {
                Ok(g) => Some(g),
                Err(why) => return skip("transport_option_picks_and_reports_the_transport", &why),
            },
            _ => None,
        };
        let args = ["mount", "--foreground", "--transport", transport, &arg];
        let mut r = spawn(&args, None).unwrap();
        let line = r.wait_for_line("mounted ");
        assert!(
            line.starts_with(&format!("mounted {arg} {expect}")),
            "{line}"
        );
        std::fs::write(&f, b"through the mount").unwrap();
        assert_eq!(std::fs::read(&f).unwrap(), b"through the mount");
        r.signal(libc::SIGTERM);
        let out = r.finish();
        assert_eq!(out.status.code(), Some(0), "stderr: {}", out.stderr);
        assert!(!is_mounted(&mp.path()));
    }
}

#[test]
fn foreground_mount_ends_on_sigterm() {
    foreground_ends_on(libc::SIGTERM, "foreground_mount_ends_on_sigterm", false);
}

#[test]
fn foreground_mount_with_allow_other_ends_on_sigint() {
    foreground_ends_on(
        libc::SIGINT,
        "foreground_mount_with_allow_other_ends_on_sigint",
        true,
    );
}

#[test]
fn daemon_mount_then_scalevfs_umount() {
    let Some((_g, mp)) = mount_test("daemon_mount_then_scalevfs_umount") else {
        return;
    };
    let pid = mount_daemon(&mp);
    assert!(std::fs::metadata(mp.path()).unwrap().is_dir());
    // Another user may not unmount it (fusermount3 says why, on the same line).
    let out = spawn(&["umount", &mp.arg()], Some(as_nobody))
        .unwrap()
        .finish();
    assert_eq!(out.status.code(), Some(1), "{}", out.stderr);
    let want = format!("scalevfs umount: no permission to unmount {} (", mp.arg());
    assert!(out.stderr.starts_with(&want), "{:?}", out.stderr);
    assert_eq!(out.stderr.lines().count(), 1, "{:?}", out.stderr);
    assert!(is_mounted(&mp.path()));
    let out = run(&["umount", &mp.arg()]);
    assert_eq!(out.status.code(), Some(0), "stderr: {}", out.stderr);
    assert!(out.stderr.is_empty() && out.stdout.is_empty());
    assert!(!is_mounted(&mp.path()), "umount returns after the detach");
    assert_eq!(wait_daemon(pid), 0, "the daemon exits by itself, status 0");
    let out = run(&["umount", &mp.arg()]);
    assert_error(
        &out,
        &format!("scalevfs umount: {} is not a scalevfs mount", mp.arg()),
        true,
    );
}

/// `scalevfs umount` while a descriptor is still open on the mount: the lazy detach
/// succeeds, the daemon aborts the connection and exits, the descriptor then fails.
#[test]
fn umount_with_a_directory_open_on_the_mount() {
    let Some((_g, mp)) = mount_test("umount_with_a_directory_open_on_the_mount") else {
        return;
    };
    let pid = mount_daemon(&mp);
    let dir = File::open(mp.path()).unwrap();
    let out = run(&["umount", &mp.arg()]);
    assert_eq!(out.status.code(), Some(0), "stderr: {}", out.stderr);
    assert!(!is_mounted(&mp.path()));
    assert_eq!(wait_daemon(pid), 0);
    let e = dir.metadata().unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::ENOTCONN), "{e}");
    drop(dir);
}

/// SIGINT or SIGTERM to the daemon while this process holds a file and a directory open
/// on the mount: the daemon unmounts and exits 0, and the descriptors then fail with
/// `ENOTCONN` (the connection was aborted, nothing waits for the daemon).
fn daemon_ends_on(sig: i32, test: &str) {
    let Some((_g, mp)) = mount_test(test) else {
        return;
    };
    let pid = mount_daemon(&mp);
    std::fs::write(mp.path().join("held"), b"data").unwrap();
    let mut held = File::open(mp.path().join("held")).unwrap();
    let dir = File::open(mp.path()).unwrap();
    // SAFETY: signalling the daemon we started.
    assert_eq!(unsafe { libc::kill(pid, sig) }, 0);
    assert_eq!(wait_daemon(pid), 0);
    wait_mounted(&mp.path(), false);
    let e = held.read(&mut [0u8; 4]).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::ENOTCONN), "{e}");
    let e = dir.metadata().unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::ENOTCONN), "{e}");
    drop((held, dir));
}

#[test]
fn daemon_ends_on_sigint_with_a_file_open() {
    daemon_ends_on(libc::SIGINT, "daemon_ends_on_sigint_with_a_file_open");
}

#[test]
fn daemon_ends_on_sigterm_with_a_file_open() {
    daemon_ends_on(libc::SIGTERM, "daemon_ends_on_sigterm_with_a_file_open");
}

/// `statfs(2)` of `p`.
fn statfs_of(p: &Path) -> libc::statfs {
    let c = CString::new(p.as_os_str().as_bytes()).unwrap();
    // SAFETY: zeroed statfs is valid; the path is NUL-terminated.
    let mut s: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    assert_eq!(unsafe { libc::statfs(c.as_ptr(), &mut s) }, 0);
    s
}

/// `--size`, `--inodes` and `--sys` reach the server: `statfs` on the mount reports the
/// limits, data and inodes beyond them fail with `ENOSPC`, and the kernfs demo tree is
/// at `/sys` (whose directory is one of the inodes).
#[test]
fn size_inodes_and_sys_options_reach_the_mount() {
    let Some((_g, mp)) = mount_test("size_inodes_and_sys_options_reach_the_mount") else {
        return;
    };
    let arg = mp.arg();
    let args = [
        "mount",
        "--foreground",
        "--threads",
        "2",
        "--size",
        "1M",
        "--inodes",
        "16",
        "--sys",
        &arg,
    ];
    let mut r = spawn(&args, None).unwrap();
    r.wait_for_line("mounted ");
    let root = mp.path();
    let s = statfs_of(&root);
    assert_eq!((s.f_bsize, s.f_blocks, s.f_bfree), (4096, 256, 256));
    assert_eq!(
        (s.f_files, s.f_ffree),
        (16, 14),
        "the root and /sys are inodes"
    );
    assert_eq!(
        std::fs::read_to_string(root.join("sys/kernel/scalevfs/knob")).unwrap(),
        "0\n"
    );
    let e = std::fs::write(root.join("big"), vec![1u8; 2 << 20]).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::ENOSPC), "{e}");
    std::fs::remove_file(root.join("big")).unwrap();
    // The kernel sends FUSE_RELEASE of the last close in the background, and the unlinked
    // file's inode is freed only then: on a loaded machine the writes below could come
    // first. Wait until it is back (at most 10 s).
    let t0 = std::time::Instant::now();
    while statfs_of(&root).f_ffree != 14 && t0.elapsed() < std::time::Duration::from_secs(10) {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    for i in 0..14 {
        std::fs::write(root.join(format!("f{i}")), b"x").unwrap();
    }
    let e = std::fs::write(root.join("f14"), b"x").unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::ENOSPC), "{e}");
    r.signal(libc::SIGTERM);
    let out = r.finish();
    assert_eq!(out.status.code(), Some(0), "stderr: {}", out.stderr);
    assert!(!is_mounted(&root));
}

/// A mount whose server was killed (`ENOTCONN` on every access, even `stat` of the mount
/// point) can still be unmounted by `scalevfs umount`.
#[test]
fn umount_after_the_server_was_killed() {
    let Some((_g, mp)) = mount_test("umount_after_the_server_was_killed") else {
        return;
    };
    let mut r = spawn(&["mount", "--foreground", &mp.arg()], None).unwrap();
    r.wait_for_line("mounted ");
    // The server has no file open on its own mount, so SIGKILL cannot wedge it.
    r.signal(libc::SIGKILL);
    let out = r.finish();
    assert_eq!(out.status.code(), None, "killed");
    let e = std::fs::metadata(mp.path()).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::ENOTCONN), "{e}");
    let out = run(&["umount", &mp.arg()]);
    assert_eq!(out.status.code(), Some(0), "stderr: {}", out.stderr);
    assert!(!is_mounted(&mp.path()));
}

/// A non-root user's mount where fusectl is not mounted (so the connection cannot be
/// aborted: a user may not mount fusectl) still unmounts cleanly on SIGTERM, exit 0: the
/// detach through fusermount3 is what ends the mount, the abort is best-effort.
#[test]
fn nonroot_mount_without_fusectl_ends_cleanly_on_sigterm() {
    const TEST: &str = "nonroot_mount_without_fusectl_ends_cleanly_on_sigterm";
    let Some((_g, mp)) = mount_test(TEST) else {
        return;
    };
    std::os::unix::fs::chown(mp.path(), Some(1000), Some(1000)).unwrap();
    let arg = mp.arg();
    let args = ["mount", "--foreground", "--threads", "2", &arg];
    let mut r = match spawn(&args, Some(nonroot_without_fusectl)) {
        Ok(r) => r,
        Err(e) => return skip(TEST, &format!("no private mount namespace: {e}")),
    };
    // The mount lives in the daemon's own mount namespace: we only see what it says.
    let line = r.wait_for_line("mounted ");
    assert!(
        line.starts_with(&format!("mounted {arg} (transport ")),
        "{line}"
    );
    r.signal(libc::SIGTERM);
    let out = r.finish();
    assert_eq!(out.status.code(), Some(0), "stderr: {}", out.stderr);
    assert!(
        out.stdout
            .contains(&format!("unmounted {arg} (signal {})", libc::SIGTERM)),
        "{}",
        out.stdout
    );
}

/// Voluntary and involuntary context switches of every thread of `pid`, added up.
fn context_switches(pid: i32) -> u64 {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .map(|t| {
            let status = std::fs::read_to_string(t.unwrap().path().join("status")).unwrap();
            status
                .lines()
                .filter(|l| l.contains("ctxt_switches:"))
                .map(|l| {
                    l.rsplit('\t')
                        .next()
                        .unwrap()
                        .trim()
                        .parse::<u64>()
                        .unwrap()
                })
                .sum::<u64>()
        })
        .sum()
}

fn rss_kib(pid: i32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// An idle daemon neither polls (no thread of it runs while nothing happens) nor keeps
/// the memory of a deleted file: once idle (about a second after the last request, on an
/// unloaded machine) it gives it back.
#[test]
fn idle_daemon_sleeps_and_returns_freed_memory() {
    let Some((_g, mp)) = mount_test("idle_daemon_sleeps_and_returns_freed_memory") else {
        return;
    };
    let pid = mount_daemon(&mp);
    // Past the mount's own requests and the idle hook they trigger: the daemon goes idle
    // once no thread of it has run for 1.5 s (three of the idle watcher's intervals: it
    // wakes once an interval while it watches), however long a loaded machine takes to
    // run the hook. Then nothing may run for 2.5 s more.
    let deadline = Instant::now() + WAIT;
    let mut before = context_switches(pid);
    loop {
        std::thread::sleep(Duration::from_millis(1500));
        let now = context_switches(pid);
        if now == before {
            break;
        }
        before = now;
        assert!(Instant::now() < deadline, "the daemon never went idle");
    }
    std::thread::sleep(Duration::from_millis(2500));
    assert_eq!(context_switches(pid), before, "no thread woke while idle");

    let base = rss_kib(pid);
    let chunk = vec![7u8; 1 << 20];
    {
        let mut f = File::create(mp.path().join("big")).unwrap();
        for _ in 0..256 {
            std::io::Write::write_all(&mut f, &chunk).unwrap();
        }
    }
    let full = rss_kib(pid);
    assert!(
        full > base + 200 * 1024,
        "256 MiB resident: {base} -> {full} KiB"
    );
    std::fs::remove_file(mp.path().join("big")).unwrap();
    let deadline = Instant::now() + WAIT;
    while rss_kib(pid) > base + 32 * 1024 {
        assert!(
            Instant::now() < deadline,
            "still {} KiB resident {WAIT:?} after the delete (base {base} KiB)",
            rss_kib(pid)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = run(&["umount", &mp.arg()]);
    assert_eq!(out.status.code(), Some(0), "stderr: {}", out.stderr);
    assert_eq!(wait_daemon(pid), 0);
}
