//! `RESOLVE_NO_XDEV` and resolution across mounts, compared with the host.

use super::*;

/// `RESOLVE_NO_XDEV`: stepping into a mount, out of one with `..`, or through an absolute
/// symlink to a root on another mount is EXDEV; an absolute path argument is allowed (as
/// `nd_jump_root` allows it at `path_init`); within one file system nothing changes.
#[test]
fn no_xdev_stops_at_mounts() {
    let vfs = Vfs::new(VfsOptions::default());
    let p = Process::new(&vfs, Credentials::root());
    p.mkdir("/m", 0o755).unwrap();
    p.mount(
        "/m",
        std::sync::Arc::new(scalevfs::Tmpfs::new(Default::default())),
    )
    .unwrap();
    p.write_file("/m/f", b"").unwrap();
    p.write_file("/g", b"").unwrap();
    p.symlinkat("/g", libc::AT_FDCWD, "/m/abs").unwrap();
    let how = |flags: i32| OpenHow {
        flags: flags as u64,
        mode: 0,
        resolve: NO_XDEV,
    };
    let root = p.open("/", O_RDONLY | O_DIRECTORY, 0).unwrap();
    let m = p.open("/m", O_RDONLY | O_DIRECTORY, 0).unwrap();
    assert_eq!(
        p.openat2(root, "m/f", &how(O_RDONLY)),
        Err(scalevfs::Errno::EXDEV)
    );
    assert_eq!(
        p.openat2(root, "m", &how(O_PATH)),
        Err(scalevfs::Errno::EXDEV)
    );
    assert_eq!(
        p.openat2(m, "../g", &how(O_RDONLY)),
        Err(scalevfs::Errno::EXDEV)
    );
    assert_eq!(
        p.openat2(m, "abs", &how(O_RDONLY)),
        Err(scalevfs::Errno::EXDEV)
    );
    assert!(p.openat2(m, "/g", &how(O_RDONLY)).is_ok());
    assert!(p.openat2(m, "f", &how(O_RDONLY)).is_ok());
    assert!(p.openat2(root, "g", &how(O_RDONLY)).is_ok());
}

/// (dirfd, path, flags, mode, resolve), run in order.
pub(super) fn mount_cases() -> Vec<(MDir, &'static str, i32, u64, u64)> {
    use MDir::*;
    let o = O_RDONLY;
    let c = O_CREAT | O_WRONLY;
    let d = O_DIRECTORY;
    vec![
        (S, "m/f", o, 0, BENEATH),
        (S, "m/f", o, 0, NO_XDEV),
        (S, "m", O_PATH | O_NOFOLLOW, 0, NO_XDEV | BENEATH),
        (S, "m/..", d, 0, BENEATH),
        (S, "m/../both", o, 0, BENEATH),
        (S, "m/../../both", o, 0, BENEATH),
        (S, "m/../../both", o, 0, IN_ROOT),
        (S, "m/sub/../../both", o, 0, BENEATH),
        (S, "m/lnk_up", o, 0, BENEATH),
        (S, "m/lnk_up", o, 0, IN_ROOT),
        (S, "m/lnk_up1", o, 0, BENEATH),
        (S, "m/lnk_abs", o, 0, IN_ROOT),
        (S, "m/lnk_abs", o, 0, IN_ROOT | NO_XDEV),
        (M, "..", d, 0, BENEATH),
        (M, "..", d, 0, IN_ROOT),
        (M, "../both", o, 0, IN_ROOT),
        (M, "lnk_up1", o, 0, IN_ROOT),
        (M, "lnk_abs", o, 0, IN_ROOT),
        (M, "/f", o, 0, IN_ROOT),
        (M, "/f", o, 0, IN_ROOT | NO_XDEV),
        (M, "..", d, 0, NO_XDEV),
        (M, "../both", o, 0, 0),
        (M, "lnk_up1", o, 0, NO_XDEV),
        (M, "lnk_up1", o, 0, 0),
        (M, "..", d, 0, IN_ROOT | NO_XDEV),
        (M, "../f", o, 0, IN_ROOT | NO_XDEV),
        (M, "..", d, 0, BENEATH | NO_XDEV),
        (M, "lnk_abs", o, 0, IN_ROOT | NO_XDEV),
        (S, "/m/f", o, 0, IN_ROOT | NO_XDEV),
        (S, "/m/../both", o, 0, IN_ROOT),
        (Sub, "/", d, 0, IN_ROOT | NO_XDEV),
        (Sub, "../lnk_abs", o, 0, IN_ROOT),
        (M, "sub/../..", d, 0, BENEATH),
        (M, "sub/../..", d, 0, IN_ROOT),
        (Sub, "..", d, 0, BENEATH),
        (Sub, "../..", d, 0, BENEATH),
        (Sub, "/f", o, 0, IN_ROOT),
        (Sub, "../f", o, 0, IN_ROOT),
        (Sub, "../f", o, 0, NO_XDEV),
        (S, "m/new", c, 0o600, BENEATH),
        (S, "m/new2", c, 0o600, NO_XDEV),
        (M, "../x", c, 0o600, BENEATH),
        (M, "/x", c, 0o600, IN_ROOT),
        (M, "../x2", c, 0o600, IN_ROOT),
        (S, "m/x2", o, 0, BENEATH),
        (S, "x2", o, 0, BENEATH),
        (S, "m/lnk_dangle", c, 0o600, BENEATH),
        (S, "m/lnk_dangle", c, 0o600, IN_ROOT),
        (S, "newout", o, 0, BENEATH),
        (M, "lnk_dangle", c, 0o600, NO_XDEV),
        (Cov, "under", o, 0, BENEATH),
        (Cov, "over", o, 0, BENEATH),
        (Cov, ".", d, 0, NO_XDEV),
        (Cov, "/", d, 0, IN_ROOT),
        (Cov, "/under", o, 0, IN_ROOT),
        (Cov, "..", d, 0, IN_ROOT),
        (Cov, "../cov/over", o, 0, 0),
        (Cov, "../cov/over", o, 0, BENEATH),
        (Cov, "../cov/over", o, 0, IN_ROOT),
        (Cov, "new", c, 0o600, BENEATH),
        (S, "cov/new", o, 0, BENEATH),
        (S, "cov/over", o, 0, BENEATH),
        (S, "st/top", o, 0, BENEATH),
        (S, "st/..", d, 0, BENEATH),
        (S, "st/../both", o, 0, BENEATH),
        (S, "st/../both", o, 0, NO_XDEV),
        (St, "..", d, 0, BENEATH),
        (St, "../both", o, 0, 0),
        (St, "../both", o, 0, IN_ROOT),
        (St, "../both", o, 0, NO_XDEV),
    ]
}

/// The mount tree's contents: (path, contents) of regular files, created after the mounts.
const MFILES: &[(&str, &[u8])] = &[
    ("both", b"OUTSIDE!"),
    ("sandbox/both", b"in"),
    ("sandbox/m/f", b"mfile"),
    ("sandbox/cov/over", b"over"),
    ("sandbox/st/top", b"top"),
];
/// Symlinks in the mounted `sandbox/m`: (target, name).
const MLINKS: &[(&str, &str)] = &[
    ("../../both", "lnk_up"),
    ("../both", "lnk_up1"),
    ("/both", "lnk_abs"),
    ("../../newout", "lnk_dangle"),
];

pub(super) fn host_mount_run(dir: &str) -> Option<Vec<Outcome>> {
    let dir = dir.to_owned();
    std::thread::spawn(move || {
        // SAFETY: gives this thread its own mount namespace (and cwd), with no propagation
        // back to the host's: the mounts below vanish with the thread.
        unsafe {
            if libc::unshare(libc::CLONE_NEWNS | libc::CLONE_FS) != 0 {
                return None;
            }
            let root = CString::new("/").unwrap();
            let r = libc::mount(
                std::ptr::null(),
                root.as_ptr(),
                std::ptr::null(),
                libc::MS_REC | libc::MS_PRIVATE,
                std::ptr::null(),
            );
            assert_eq!(r, 0);
        }
        let c = |p: &str| CString::new(format!("{dir}/{p}")).unwrap();
        let mount = |p: &str| {
            let (none, tmpfs) = (
                CString::new("none").unwrap(),
                CString::new("tmpfs").unwrap(),
            );
            // SAFETY: NUL-terminated strings.
            let r = unsafe {
                libc::mount(
                    none.as_ptr(),
                    c(p).as_ptr(),
                    tmpfs.as_ptr(),
                    0,
                    std::ptr::null(),
                )
            };
            assert_eq!(r, 0, "mount {p}");
        };
        let open = |p: &str| {
            // SAFETY: a NUL-terminated path.
            let fd = unsafe { libc::open(c(p).as_ptr(), O_RDONLY | O_DIRECTORY) };
            assert!(fd >= 0, "{p}");
            fd
        };
        for d in ["sandbox", "sandbox/m", "sandbox/cov", "sandbox/st"] {
            std::fs::create_dir(format!("{dir}/{d}")).unwrap();
        }
        std::fs::write(format!("{dir}/sandbox/cov/under"), b"under").unwrap();
        let cov = open("sandbox/cov");
        for m in ["sandbox/m", "sandbox/cov", "sandbox/st", "sandbox/st"] {
            mount(m);
        }
        std::fs::create_dir(format!("{dir}/sandbox/m/sub")).unwrap();
        for (path, data) in MFILES {
            std::fs::write(format!("{dir}/{path}"), data).unwrap();
        }
        for (target, name) in MLINKS {
            std::os::unix::fs::symlink(target, format!("{dir}/sandbox/m/{name}")).unwrap();
        }
        let fds = [
            open("sandbox"),
            open("sandbox/m"),
            open("sandbox/m/sub"),
            cov,
            open("sandbox/st"),
        ];
        let out = mount_cases()
            .into_iter()
            .map(|(at, path, flags, mode, resolve)| {
                host_openat2(fds[at as usize], path, flags, mode, resolve)
            })
            .collect();
        for fd in fds {
            // SAFETY: our descriptor.
            unsafe { libc::close(fd) };
        }
        Some(out)
    })
    .join()
    .unwrap()
}

/// As [`ours_run`].
pub(super) fn ours_mount_run(locking: Locking, cold: bool) -> Vec<Outcome> {
    let vfs = Vfs::new(VfsOptions {
        locking,
        ..VfsOptions::default()
    });
    let p = Process::new(&vfs, Credentials::root());
    let tmpfs = || std::sync::Arc::new(scalevfs::Tmpfs::new(Default::default()));
    for d in ["/sandbox", "/sandbox/m", "/sandbox/cov", "/sandbox/st"] {
        p.mkdir(d, 0o755).unwrap();
    }
    p.write_file("/sandbox/cov/under", b"under").unwrap();
    let cov = p.open("/sandbox/cov", O_RDONLY | O_DIRECTORY, 0).unwrap();
    for m in ["/sandbox/m", "/sandbox/cov", "/sandbox/st", "/sandbox/st"] {
        p.mount(m, tmpfs()).unwrap();
    }
    p.mkdir("/sandbox/m/sub", 0o755).unwrap();
    for (path, data) in MFILES {
        p.write_file(format!("/{path}"), data).unwrap();
    }
    for (target, name) in MLINKS {
        p.symlinkat(target, libc::AT_FDCWD, format!("/sandbox/m/{name}"))
            .unwrap();
    }
    let open = |d: &str| p.open(d, O_RDONLY | O_DIRECTORY, 0).unwrap();
    let fds = [
        open("/sandbox"),
        open("/sandbox/m"),
        open("/sandbox/m/sub"),
        cov,
        open("/sandbox/st"),
    ];
    mount_cases()
        .into_iter()
        .map(|(at, path, flags, mode, resolve)| {
            if cold {
                vfs.drop_caches();
            }
            ours_openat2(&p, fds[at as usize], path, flags, mode, resolve)
        })
        .collect()
}

/// Scoped and `NO_XDEV` walks across mounts, compared with the host (in a private mount
/// namespace): `..` out of a mount's root back into its parent (allowed under
/// `RESOLVE_BENEATH` while it stays below the root), a descriptor on a mount's root (its
/// `..` is the root itself), one on a covered directory (the walk stays on the file system
/// below), stacked mounts, creating through symlinks in a mounted file system.
#[test]
fn openat2_across_mounts_matches_the_host() {
    let base = format!("/dev/shm/scalevfs-openat2-mnt-{}", std::process::id());
    if std::fs::create_dir(&base).is_err() {
        eprintln!("no /dev/shm: skipping");
        return;
    }
    let host = host_mount_run(&base);
    std::fs::remove_dir_all(&base).unwrap();
    let Some(host) = host else {
        eprintln!("no mount namespace: skipping");
        return;
    };
    if host.first() == Some(&Err(libc::ENOSYS)) {
        eprintln!("the host has no openat2: skipping");
        return;
    }
    let mut diffs = Vec::new();
    for (locking, cold) in [
        (Locking::Scalable, false),
        (Locking::Legacy, false),
        (Locking::Scalable, true),
    ] {
        let ours = ours_mount_run(locking, cold);
        for ((case, h), o) in mount_cases().iter().zip(&host).zip(&ours) {
            if h != o {
                diffs.push(format!(
                    "{case:?} ({locking:?}, cold {cold}): host {h:?}, ours {o:?}"
                ));
            }
        }
    }
    if std::env::var_os("OPENAT2_DUMP").is_some() {
        for (case, h) in mount_cases().iter().zip(&host) {
            eprintln!("{case:?} => {h:?}");
        }
    }
    assert!(diffs.is_empty(), "{}", diffs.join("\n"));
}
