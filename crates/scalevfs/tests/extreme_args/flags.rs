//! Unknown flag bits and modes.

use super::*;

// ------------------------------------------------------------------ flags and modes

/// Unknown flag bits and invalid combinations for every call that takes flags or a mode.
#[test]
fn unknown_flags_and_modes() {
    let mut x = X::new();
    let c = |s: &str| cs(s.as_bytes());
    let mut open_flags = vec![
        0x7fff_ffff,
        -1,
        i32::MIN,
        libc::O_TMPFILE | libc::O_RDONLY,
        libc::O_TMPFILE & !libc::O_DIRECTORY | libc::O_RDWR,
        libc::O_CREAT | libc::O_DIRECTORY | libc::O_RDWR,
        libc::O_PATH | -1,
        libc::O_ACCMODE,
        libc::O_ACCMODE | libc::O_CREAT,
        libc::O_RDONLY | libc::O_TRUNC,
        0x4000_0000,
        0o10 | libc::O_RDONLY,
    ];
    // Each single bit.
    open_flags.extend((0..31).map(|b| 1 << b));
    for path in ["f", "d", "l", "newfile", "dang", "loop1"] {
        for &flags in &open_flags {
            for mode in [0o644u32, 0xffff_ffff] {
                // SAFETY: valid C string.
                let h = unsafe {
                    libc::syscall(
                        libc::SYS_openat,
                        libc::AT_FDCWD,
                        c(path).as_ptr(),
                        flags,
                        mode,
                    )
                };
                let hs = h_open(h);
                let o = ours(
                    || x.o().openat(libc::AT_FDCWD, path, flags, mode),
                    |fd| {
                        let _ = x.o().close(fd);
                        "fd".into()
                    },
                );
                x.check(|| format!("openat({path}, {flags:#x}, {mode:#o})"), hs, o);
                // Whatever was created must look the same (then goes, on both).
                stat_both(&mut x, "newfile", &format!("after open flags {flags:#x}"));
                unlink_both(&mut x, "newfile");
            }
        }
    }
    for mode in [0xffff_ffffu32, 0o7777, 0o170_777, 0o1_000_000] {
        // SAFETY: valid C string.
        let h = unsafe { libc::syscall(libc::SYS_mkdirat, libc::AT_FDCWD, c("md").as_ptr(), mode) };
        let o = ours(
            || x.o().mkdirat(libc::AT_FDCWD, "md", mode),
            |_| "ok".into(),
        );
        x.check(|| format!("mkdirat(md, {mode:#o})"), host(h, unit), o);
        stat_both(&mut x, "md", &format!("after mkdir mode {mode:#o}"));
        // SAFETY: valid C string.
        let h = unsafe { libc::syscall(libc::SYS_fchmodat, libc::AT_FDCWD, c("f").as_ptr(), mode) };
        let o = ours(
            || x.o().fchmodat(libc::AT_FDCWD, "f", mode, 0),
            |_| "ok".into(),
        );
        x.check(|| format!("fchmodat(f, {mode:#o})"), host(h, unit), o);
        stat_both(&mut x, "f", &format!("after chmod {mode:#o}"));
        // SAFETY: valid C string.
        let h = unsafe {
            libc::syscall(
                libc::SYS_unlinkat,
                libc::AT_FDCWD,
                c("md").as_ptr(),
                libc::AT_REMOVEDIR,
            )
        };
        let o = ours(
            || x.o().unlinkat(libc::AT_FDCWD, "md", libc::AT_REMOVEDIR),
            |_| "ok".into(),
        );
        x.check(
            || format!("rmdir(md) after mode {mode:#o}"),
            host(h, unit),
            o,
        );
    }
    x.o().fchmodat(libc::AT_FDCWD, "f", 0o644, 0).unwrap();
    // SAFETY: valid C string.
    unsafe { libc::chmod(c("f").as_ptr(), 0o644) };
    let bits = |v: &mut Vec<i32>| v.extend((0..32).map(|b| (1u32 << b) as i32));
    let mut at_flags = vec![-1, 0x7fff_ffff];
    bits(&mut at_flags);
    for &flags in &at_flags {
        for path in ["f", "d", "l", "nothing"] {
            let h = host_fstatat(libc::AT_FDCWD, path.as_bytes(), flags);
            let o = ours(
                || x.o().newfstatat(libc::AT_FDCWD, path, flags),
                |s| our_stat(&s),
            );
            x.check(|| format!("newfstatat({path}, {flags:#x})"), h, o);
            // SAFETY: valid C string.
            let h = unsafe {
                libc::syscall(
                    libc::SYS_faccessat2,
                    libc::AT_FDCWD,
                    c(path).as_ptr(),
                    0,
                    flags,
                )
            };
            let o = ours(
                || x.o().faccessat(libc::AT_FDCWD, path, 0, flags),
                |_| "ok".into(),
            );
            x.check(
                || format!("faccessat({path}, {flags:#x})"),
                host(h, unit),
                o,
            );
            // SAFETY: valid C string.
            let h = unsafe {
                libc::syscall(
                    libc::SYS_fchownat,
                    libc::AT_FDCWD,
                    c(path).as_ptr(),
                    -1,
                    -1,
                    flags,
                )
            };
            let o = ours(
                || {
                    x.o()
                        .fchownat(libc::AT_FDCWD, path, u32::MAX, u32::MAX, flags)
                },
                |_| "ok".into(),
            );
            x.check(|| format!("fchownat({path}, {flags:#x})"), host(h, unit), o);
            // fchmodat2 on a symlink with AT_SYMLINK_NOFOLLOW: EOPNOTSUPP on both.
            // SAFETY: valid C string.
            let h = unsafe {
                libc::syscall(
                    libc::SYS_fchmodat2,
                    libc::AT_FDCWD,
                    c(path).as_ptr(),
                    0o644,
                    flags,
                )
            };
            let o = ours(
                || x.o().fchmodat(libc::AT_FDCWD, path, 0o644, flags),
                |_| "ok".into(),
            );
            x.check(
                || format!("fchmodat2({path}, {flags:#x})"),
                host(h, unit),
                o,
            );
            let ts = Some([Timespec { sec: 1, nsec: 2 }; 2]);
            let h = host_utimensat(libc::AT_FDCWD, path.as_bytes(), ts, flags);
            let o = ours(
                || x.o().utimensat(libc::AT_FDCWD, path, ts, flags),
                |_| "ok".into(),
            );
            x.check(|| format!("utimensat({path}, {flags:#x})"), h, o);
            // SAFETY: valid C strings.
            let h = unsafe {
                libc::syscall(
                    libc::SYS_linkat,
                    libc::AT_FDCWD,
                    c(path).as_ptr(),
                    libc::AT_FDCWD,
                    c("lk").as_ptr(),
                    flags,
                )
            };
            let o = ours(
                || {
                    x.o()
                        .linkat(libc::AT_FDCWD, path, libc::AT_FDCWD, "lk", flags)
                },
                |_| "ok".into(),
            );
            x.check(
                || format!("linkat({path}, lk, {flags:#x})"),
                host(h, unit),
                o,
            );
            unlink_both(&mut x, "lk");
            // unlinkat on a name that would otherwise go: "uf" / "ud".
            for (name, dir) in [("uf", false), ("ud", true)] {
                make_both(&mut x, name, dir);
                // SAFETY: valid C string.
                let h = unsafe {
                    libc::syscall(libc::SYS_unlinkat, libc::AT_FDCWD, c(name).as_ptr(), flags)
                };
                let o = ours(
                    || x.o().unlinkat(libc::AT_FDCWD, name, flags),
                    |_| "ok".into(),
                );
                x.check(|| format!("unlinkat({name}, {flags:#x})"), host(h, unit), o);
                unlink_both(&mut x, name);
            }
        }
    }
    // renameat2 flags: every bit, the invalid pairs, and RENAME_WHITEOUT.
    let mut rflags: Vec<u32> = (0..32).map(|b| 1u32 << b).collect();
    rflags.extend([
        u32::MAX,
        libc::RENAME_EXCHANGE | libc::RENAME_NOREPLACE,
        libc::RENAME_EXCHANGE | libc::RENAME_WHITEOUT,
        libc::RENAME_NOREPLACE | libc::RENAME_WHITEOUT,
    ]);
    for &flags in &rflags {
        make_both(&mut x, "ra", false);
        make_both(&mut x, "rb", false);
        // SAFETY: valid C strings.
        let h = unsafe {
            libc::syscall(
                libc::SYS_renameat2,
                libc::AT_FDCWD,
                c("ra").as_ptr(),
                libc::AT_FDCWD,
                c("rb").as_ptr(),
                flags,
            )
        };
        let o = ours(
            || {
                x.o()
                    .renameat2(libc::AT_FDCWD, "ra", libc::AT_FDCWD, "rb", flags)
            },
            |_| "ok".into(),
        );
        x.check(
            || format!("renameat2(ra, rb, {flags:#x})"),
            host(h, unit),
            o,
        );
        unlink_both(&mut x, "ra");
        unlink_both(&mut x, "rb");
    }
    // pipe2, eventfd, epoll_create1 with every flag bit.
    let mut flags = vec![-1, 0x7fff_ffff];
    bits(&mut flags);
    for &fl in &flags {
        let mut hp = [0i32; 2];
        // SAFETY: valid array.
        let h = unsafe { libc::syscall(libc::SYS_pipe2, hp.as_mut_ptr(), fl) };
        if h >= 0 {
            // SAFETY: our own descriptors.
            unsafe { libc::close(hp[0]) };
            // SAFETY: as above.
            unsafe { libc::close(hp[1]) };
        }
        let mut op = [0i32; 2];
        let o = ours(|| x.o().pipe2(&mut op, fl), |_| "ok".to_string());
        if o.is_ok() {
            let _ = x.o().close(op[0]);
            let _ = x.o().close(op[1]);
        }
        // Packet-mode pipes (O_DIRECT) are not provided (README): EINVAL, as before
        // Linux 3.4.
        if fl != libc::O_DIRECT {
            x.check(|| format!("pipe2({fl:#x})"), host(h, unit), o);
        }
        for init in [0u32, u32::MAX] {
            // SAFETY: plain syscall.
            let h = unsafe { libc::syscall(libc::SYS_eventfd2, init, fl) };
            if h >= 0 {
                // SAFETY: our own descriptor.
                unsafe { libc::close(h as i32) };
            }
            let o = ours(
                || x.o().eventfd(init, fl),
                |fd| {
                    let _ = x.o().close(fd);
                    "fd".into()
                },
            );
            x.check(
                || format!("eventfd({init}, {fl:#x})"),
                host(h, |_| "fd".into()),
                o,
            );
        }
        // SAFETY: plain syscall.
        let h = unsafe { libc::syscall(libc::SYS_epoll_create1, fl) };
        if h >= 0 {
            // SAFETY: our own descriptor.
            unsafe { libc::close(h as i32) };
        }
        let o = ours(
            || x.o().epoll_create1(fl),
            |fd| {
                let _ = x.o().close(fd);
                "fd".into()
            },
        );
        x.check(
            || format!("epoll_create1({fl:#x})"),
            host(h, |_| "fd".into()),
            o,
        );
    }
    x.finish("unknown_flags_and_modes");
}

pub(super) fn h_open(h: c_long) -> Res {
    if h >= 0 {
        // SAFETY: our own descriptor.
        unsafe { libc::close(h as i32) };
    }
    host(h, |_| "fd".into())
}

/// Removes `name` (file or directory) on both sides if it exists.
pub(super) fn unlink_both(x: &mut X, name: &str) {
    let c = cs(name.as_bytes());
    for flags in [0, libc::AT_REMOVEDIR] {
        // SAFETY: valid C string.
        unsafe { libc::unlinkat(libc::AT_FDCWD, c.as_ptr(), flags) };
        let _ = x.o().unlinkat(libc::AT_FDCWD, name, flags);
    }
}

/// Creates a file or directory `name` on both sides.
pub(super) fn make_both(x: &mut X, name: &str, dir: bool) {
    let c = cs(name.as_bytes());
    if dir {
        // SAFETY: valid C string.
        unsafe { libc::mkdirat(libc::AT_FDCWD, c.as_ptr(), 0o755) };
        let _ = x.o().mkdirat(libc::AT_FDCWD, name, 0o755);
    } else {
        // SAFETY: valid C string.
        let fd = unsafe {
            libc::openat(
                libc::AT_FDCWD,
                c.as_ptr(),
                libc::O_CREAT | libc::O_WRONLY,
                0o644,
            )
        };
        if fd >= 0 {
            // SAFETY: our own descriptor.
            unsafe { libc::close(fd) };
        }
        if let Ok(fd) = x
            .o()
            .openat(libc::AT_FDCWD, name, libc::O_CREAT | libc::O_WRONLY, 0o644)
        {
            let _ = x.o().close(fd);
        }
    }
}
