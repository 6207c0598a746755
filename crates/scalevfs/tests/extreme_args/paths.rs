//! Odd paths, deep trees and link chains.

use super::*;

// ------------------------------------------------------------------ paths

pub(super) fn path_cases() -> Vec<Vec<u8>> {
    let mut v: Vec<Vec<u8>> = [
        "",
        "/",
        "/../..",
        "/..//../.",
        "f/",
        "f/.",
        "f//",
        "f/..",
        "l/",
        "ld/",
        "d/",
        "d//x/",
        "dang/",
        "loop1",
        "loop1/",
        "loop1/x",
        ".",
        "..",
        "./",
        "d/../f",
        "nothing/..",
    ]
    .iter()
    .map(|s| s.as_bytes().to_vec())
    .collect();
    // Whole-path lengths around PATH_MAX (4096 with the NUL): "././.../f".
    for len in [4094usize, 4095, 4096, 4097, 8192] {
        let mut p = b"./".repeat((len - 1) / 2);
        if p.len() + 1 < len {
            p.push(b'/');
        }
        p.push(b'f');
        assert_eq!(p.len(), len);
        v.push(p);
    }
    // Component lengths around NAME_MAX (255).
    for len in [255usize, 256, 4095] {
        v.push(vec![b'n'; len]);
        let mut p = b"d/".to_vec();
        p.extend(vec![b'n'; len]);
        v.push(p);
    }
    v
}

/// Every path-taking call with odd paths: empty, absolute climbs, trailing slashes on
/// non-directories, PATH_MAX and NAME_MAX boundaries, symlink loops.
#[test]
fn odd_paths() {
    let mut x = X::new();
    let paths = path_cases();
    let c = |p: &[u8]| cs(p);
    // Absolute paths resolve outside the base on the host: compare the file type only.
    let strip = |p: &[u8], r: Res| {
        if p.first() == Some(&b'/') || p == b".." {
            r.map(|s| file_type(&s))
        } else {
            r
        }
    };
    for p in &paths {
        let show = || {
            String::from_utf8_lossy(&p[..p.len().min(40)]).into_owned()
                + &format!("..({})", p.len())
        };
        for flags in [0, libc::AT_SYMLINK_NOFOLLOW] {
            let h = strip(p, host_fstatat(libc::AT_FDCWD, p, flags));
            let o = strip(
                p,
                ours(
                    || x.o().newfstatat(libc::AT_FDCWD, p, flags),
                    |s| our_stat(&s),
                ),
            );
            x.check(|| format!("newfstatat({}, {flags:#x})", show()), h, o);
        }
        // Read-only calls first.
        // SAFETY: valid C strings and buffers.
        let h = unsafe {
            libc::syscall(
                libc::SYS_faccessat2,
                libc::AT_FDCWD,
                c(p).as_ptr(),
                libc::R_OK,
                0,
            )
        };
        let o = ours(
            || x.o().faccessat(libc::AT_FDCWD, p, libc::R_OK, 0),
            |_| "ok".into(),
        );
        x.check(|| format!("faccessat({})", show()), host(h, unit), o);
        let mut hb = [0u8; 64];
        let mut ob = [0u8; 64];
        // SAFETY: valid C strings and buffers, plain integer arguments.
        let h = unsafe {
            libc::syscall(
                libc::SYS_readlinkat,
                libc::AT_FDCWD,
                c(p).as_ptr(),
                hb.as_mut_ptr(),
                64,
            )
        };
        let h = host(h, |k| format!("{:?}", &hb[..k as usize]));
        let o = ours_read(&mut ob, |b| x.o().readlinkat(libc::AT_FDCWD, p, b));
        x.check(|| format!("readlinkat({})", show()), h, o);
        for flags in [
            libc::O_RDONLY,
            libc::O_PATH,
            libc::O_RDONLY | libc::O_DIRECTORY,
            libc::O_WRONLY | libc::O_CREAT,
            libc::O_RDONLY | libc::O_NOFOLLOW,
        ] {
            // SAFETY: valid C strings and buffers, plain integer arguments.
            let h = unsafe {
                libc::syscall(
                    libc::SYS_openat,
                    libc::AT_FDCWD,
                    c(p).as_ptr(),
                    flags,
                    0o644,
                )
            };
            let h = h_open(h);
            let o = ours(
                || x.o().openat(libc::AT_FDCWD, p, flags, 0o644),
                |fd| {
                    let _ = x.o().close(fd);
                    "fd".into()
                },
            );
            x.check(|| format!("openat({}, {flags:#x})", show()), h, o);
        }
        // SAFETY: valid C strings and buffers, plain integer arguments.
        let h = unsafe { libc::syscall(libc::SYS_chdir, c(p).as_ptr()) };
        let o = ours(|| x.o().chdir(p), |_| "ok".into());
        x.check(|| format!("chdir({})", show()), host(h, unit), o);
        // SAFETY: valid C strings and buffers, plain integer arguments.
        assert_eq!(unsafe { libc::fchdir(x.b.host_base().0) }, 0);
        x.o().chdir("/base").unwrap();
        // SAFETY: valid C strings and buffers, plain integer arguments.
        let h = unsafe { libc::syscall(libc::SYS_truncate, c(p).as_ptr(), 11i64) };
        let o = ours(|| x.o().truncate(p, 11), |_| "ok".into());
        x.check(|| format!("truncate({})", show()), host(h, unit), o);
        // SAFETY: valid C strings and buffers, plain integer arguments.
        let h = unsafe { libc::syscall(libc::SYS_fchmodat, libc::AT_FDCWD, c(p).as_ptr(), 0o755) };
        let o = ours(
            || x.o().fchmodat(libc::AT_FDCWD, p, 0o755, 0),
            |_| "ok".into(),
        );
        let (h, o) = if p.first() == Some(&b'/') {
            (Ok(String::new()), Ok(String::new()))
        } else {
            (host(h, unit), o)
        };
        x.check(|| format!("fchmodat({})", show()), h, o);
        let ts = Some([Timespec { sec: 9, nsec: 9 }; 2]);
        let h = host_utimensat(libc::AT_FDCWD, p, ts, 0);
        let o = ours(
            || x.o().utimensat(libc::AT_FDCWD, p, ts, 0),
            |_| "ok".into(),
        );
        let (h, o) = if p.first() == Some(&b'/') {
            (Ok(String::new()), Ok(String::new()))
        } else {
            (h, o)
        };
        x.check(|| format!("utimensat({})", show()), h, o);
        // Namespace changes: as the new name (then undone), and as the old name of a
        // rename (renaming back) and a link.
        // SAFETY: valid C strings and buffers, plain integer arguments.
        let h = unsafe { libc::syscall(libc::SYS_mkdirat, libc::AT_FDCWD, c(p).as_ptr(), 0o755) };
        let o = ours(|| x.o().mkdirat(libc::AT_FDCWD, p, 0o755), |_| "ok".into());
        x.check(|| format!("mkdirat({})", show()), host(h, unit), o);
        if h >= 0 {
            // SAFETY: valid C strings and buffers, plain integer arguments.
            let h = unsafe {
                libc::syscall(
                    libc::SYS_unlinkat,
                    libc::AT_FDCWD,
                    c(p).as_ptr(),
                    libc::AT_REMOVEDIR,
                )
            };
            let o = ours(
                || x.o().unlinkat(libc::AT_FDCWD, p, libc::AT_REMOVEDIR),
                |_| "ok".into(),
            );
            x.check(|| format!("rmdir({})", show()), host(h, unit), o);
        }
        // SAFETY: valid C strings and buffers, plain integer arguments.
        let h = unsafe {
            libc::syscall(
                libc::SYS_symlinkat,
                c(b"t").as_ptr(),
                libc::AT_FDCWD,
                c(p).as_ptr(),
            )
        };
        let o = ours(|| x.o().symlinkat("t", libc::AT_FDCWD, p), |_| "ok".into());
        x.check(|| format!("symlinkat(t, {})", show()), host(h, unit), o);
        if h >= 0 {
            // SAFETY: valid C strings and buffers, plain integer arguments.
            let h = unsafe { libc::syscall(libc::SYS_unlinkat, libc::AT_FDCWD, c(p).as_ptr(), 0) };
            let o = ours(|| x.o().unlinkat(libc::AT_FDCWD, p, 0), |_| "ok".into());
            x.check(|| format!("unlink({})", show()), host(h, unit), o);
        }
        // As a symlink target (any bytes but too long ones are fine).
        // SAFETY: valid C strings and buffers, plain integer arguments.
        let h = unsafe {
            libc::syscall(
                libc::SYS_symlinkat,
                c(p).as_ptr(),
                libc::AT_FDCWD,
                c(b"st").as_ptr(),
            )
        };
        let o = ours(|| x.o().symlinkat(p, libc::AT_FDCWD, "st"), |_| "ok".into());
        x.check(|| format!("symlinkat({}, st)", show()), host(h, unit), o);
        unlink_both(&mut x, "st");
        if p.first() == Some(&b'/') {
            // The host's "/" is another file system (EXDEV); ours is this one.
            continue;
        }
        // SAFETY: valid C strings and buffers, plain integer arguments.
        let h = unsafe {
            libc::syscall(
                libc::SYS_linkat,
                libc::AT_FDCWD,
                c(p).as_ptr(),
                libc::AT_FDCWD,
                c(b"lk").as_ptr(),
                0,
            )
        };
        let o = ours(
            || x.o().linkat(libc::AT_FDCWD, p, libc::AT_FDCWD, "lk", 0),
            |_| "ok".into(),
        );
        x.check(|| format!("linkat({}, lk)", show()), host(h, unit), o);
        unlink_both(&mut x, "lk");
        // SAFETY: valid C strings and buffers, plain integer arguments.
        let h = unsafe {
            libc::syscall(
                libc::SYS_linkat,
                libc::AT_FDCWD,
                c(b"f").as_ptr(),
                libc::AT_FDCWD,
                c(p).as_ptr(),
                0,
            )
        };
        let o = ours(
            || x.o().linkat(libc::AT_FDCWD, "f", libc::AT_FDCWD, p, 0),
            |_| "ok".into(),
        );
        x.check(|| format!("linkat(f, {})", show()), host(h, unit), o);
        if h >= 0 {
            // SAFETY: valid C strings and buffers, plain integer arguments.
            let h = unsafe { libc::syscall(libc::SYS_unlinkat, libc::AT_FDCWD, c(p).as_ptr(), 0) };
            let o = ours(|| x.o().unlinkat(libc::AT_FDCWD, p, 0), |_| "ok".into());
            x.check(|| format!("unlink({})", show()), host(h, unit), o);
        }
        for flags in [0u32, libc::RENAME_NOREPLACE, libc::RENAME_EXCHANGE] {
            make_both(&mut x, "rn", false);
            // SAFETY: valid C strings and buffers, plain integer arguments.
            let h = unsafe {
                libc::syscall(
                    libc::SYS_renameat2,
                    libc::AT_FDCWD,
                    c(b"rn").as_ptr(),
                    libc::AT_FDCWD,
                    c(p).as_ptr(),
                    flags,
                )
            };
            let o = ours(
                || {
                    x.o()
                        .renameat2(libc::AT_FDCWD, "rn", libc::AT_FDCWD, p, flags)
                },
                |_| "ok".into(),
            );
            x.check(
                || format!("renameat2(rn, {}, {flags})", show()),
                host(h, unit),
                o,
            );
            if h >= 0 {
                // SAFETY: valid C strings and buffers, plain integer arguments.
                let h = unsafe {
                    libc::syscall(
                        libc::SYS_renameat2,
                        libc::AT_FDCWD,
                        c(p).as_ptr(),
                        libc::AT_FDCWD,
                        c(b"rn").as_ptr(),
                        flags,
                    )
                };
                let o = ours(
                    || {
                        x.o()
                            .renameat2(libc::AT_FDCWD, p, libc::AT_FDCWD, "rn", flags)
                    },
                    |_| "ok".into(),
                );
                x.check(
                    || format!("renameat2({}, rn, {flags})", show()),
                    host(h, unit),
                    o,
                );
            }
            unlink_both(&mut x, "rn");
        }
        for flags in [0, libc::AT_REMOVEDIR] {
            // Only on names that do not exist or cannot be removed (the tree stays).
            if matches!(
                &p[..],
                b"f/"
                    | b"f/."
                    | b"f//"
                    | b"l/"
                    | b"ld/"
                    | b"d/"
                    | b"d//x/"
                    | b"dang/"
                    | b"loop1/"
                    | b"loop1/x"
                    | b""
                    | b"/"
                    | b"/../.."
                    | b"/..//../."
                    | b"."
                    | b".."
                    | b"./"
                    | b"f/.."
                    | b"nothing/.."
            ) || p.len() > 200
            {
                // SAFETY: valid C strings and buffers, plain integer arguments.
                let h = unsafe {
                    libc::syscall(libc::SYS_unlinkat, libc::AT_FDCWD, c(p).as_ptr(), flags)
                };
                let o = ours(|| x.o().unlinkat(libc::AT_FDCWD, p, flags), |_| "ok".into());
                x.check(
                    || format!("unlinkat({}, {flags:#x})", show()),
                    host(h, unit),
                    o,
                );
            }
        }
        stat_both(&mut x, "f", &format!("after {}", show()));
        stat_both(&mut x, "d", &format!("after {}", show()));
    }
    x.finish("odd_paths");
}

/// The file type of a normalized stat ("mode 40755 ...").
pub(super) fn file_type(s: &str) -> String {
    let mode = s
        .split(' ')
        .nth(1)
        .and_then(|m| u32::from_str_radix(m, 8).ok());
    format!("{:o}", mode.unwrap_or(0) & libc::S_IFMT)
}

/// Symlink chains of 40 and 41 links (MAXSYMLINKS), deep directories, a cwd of 4096+
/// bytes (getcwd's ERANGE and ENAMETOOLONG), and getcwd with small buffers.
#[test]
fn deep_trees_and_link_chains() {
    let mut x = X::new();
    let c = |p: &str| cs(p.as_bytes());
    // s0 -> s1 -> ... -> s41 -> f.
    for i in (0..42).rev() {
        let target = if i == 41 {
            "f".to_string()
        } else {
            format!("s{}", i + 1)
        };
        let name = format!("s{i}");
        // SAFETY: valid C strings.
        let h = unsafe { libc::symlinkat(c(&target).as_ptr(), libc::AT_FDCWD, c(&name).as_ptr()) };
        let o = x.o().symlinkat(&target, libc::AT_FDCWD, &name);
        x.both_ok(&name, h as c_long, o);
    }
    for start in [0, 1, 2] {
        let p = format!("s{start}");
        stat_both(&mut x, &p, "(link chain)");
        // SAFETY: valid C string.
        let h = unsafe {
            libc::syscall(
                libc::SYS_openat,
                libc::AT_FDCWD,
                c(&p).as_ptr(),
                libc::O_RDONLY,
            )
        };
        let h = h_open(h);
        let o = ours(
            || x.o().openat(libc::AT_FDCWD, &p, libc::O_RDONLY, 0),
            |fd| {
                let _ = x.o().close(fd);
                "fd".into()
            },
        );
        x.check(|| format!("open({p})"), h, o);
        let h = host_fstatat(libc::AT_FDCWD, format!("{p}/").as_bytes(), 0);
        let o = ours(|| x.o().stat(format!("{p}/")), |s| our_stat(&s));
        x.check(|| format!("stat({p}/)"), h, o);
    }
    // A deep tree: 300 levels of 20-byte names (6300 bytes), entered step by step.
    let comp = "abcdefghijklmnopqrs";
    for i in 0..300 {
        // SAFETY: valid C string.
        let h =
            // SAFETY: valid C strings and buffers, plain integer arguments.
            unsafe { libc::syscall(libc::SYS_mkdirat, libc::AT_FDCWD, c(comp).as_ptr(), 0o755) };
        let o = ours(
            || x.o().mkdirat(libc::AT_FDCWD, comp, 0o755),
            |_| "ok".into(),
        );
        x.check(|| format!("mkdir level {i}"), host(h, unit), o);
        // SAFETY: valid C string.
        let h = unsafe { libc::syscall(libc::SYS_chdir, c(comp).as_ptr()) };
        let o = ours(|| x.o().chdir(comp), |_| "ok".into());
        x.check(|| format!("chdir level {i}"), host(h, unit), o);
    }
    // getcwd: the path is longer than a page on both sides (the host's base prefix is
    // longer than ours, so only the errno is compared).
    for len in [0usize, 1, 2, 4096, 8192] {
        let mut hb = vec![0u8; len];
        let mut ob = vec![0u8; len];
        // SAFETY: valid buffer.
        let h = unsafe { libc::syscall(libc::SYS_getcwd, hb.as_mut_ptr(), len) };
        let o = ours(|| x.o().getcwd(&mut ob), |_| "ok".into());
        x.check(|| format!("deep getcwd({len})"), host(h, unit), o);
    }
    // Climb back with one long relative path of "..": 300 * 3 = 900 bytes.
    let up = "../".repeat(300) + "f";
    let h = host_fstatat(libc::AT_FDCWD, up.as_bytes(), 0);
    let o = ours(|| x.o().stat(&up), |s| our_stat(&s));
    x.check(|| "stat(../ x300 f)".into(), h, o);
    let deeper = format!("{}/f", [comp; 250].join("/"));
    // SAFETY: valid C strings and buffers, plain integer arguments.
    assert_eq!(unsafe { libc::fchdir(x.b.host_base().0) }, 0);
    x.o().chdir("/base").unwrap();
    let h = host_fstatat(libc::AT_FDCWD, deeper.as_bytes(), 0);
    let o = ours(|| x.o().stat(&deeper), |s| our_stat(&s));
    x.check(|| "stat(5000-byte path)".into(), h, o);
    for len in [0usize, 1, 2, 3] {
        let mut hb = vec![0u8; len];
        let mut ob = vec![0u8; len];
        // SAFETY: valid buffer.
        let h = unsafe { libc::syscall(libc::SYS_getcwd, hb.as_mut_ptr(), len) };
        let o = ours(|| x.o().getcwd(&mut ob), |_| "ok".into());
        x.check(|| format!("getcwd({len})"), host(h, unit), o);
    }
    x.finish("deep_trees_and_link_chains");
}
