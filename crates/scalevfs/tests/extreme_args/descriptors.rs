//! Every descriptor-taking call on every kind of descriptor.

use super::*;

// ------------------------------------------------------------------ descriptors

/// Every descriptor-taking call on every kind of descriptor.
#[test]
fn every_call_on_every_descriptor() {
    let mut x = X::new();
    // The closed descriptor: opened on both sides, then closed.
    let f = x.open_both("tmp", "f", libc::O_RDONLY, 0);
    // SAFETY: our own descriptors.
    unsafe {
        assert_eq!(libc::dup2(f.h, CLOSED_FD), CLOSED_FD);
        libc::close(CLOSED_FD);
    }
    x.o().dup2(f.o, CLOSED_FD).unwrap();
    x.o().close(CLOSED_FD).unwrap();
    let fds = x.fds();
    let pipe_r = fds
        .iter()
        .find(|f| f.name == "pipe read end")
        .copied()
        .unwrap();
    let epfd = fds.iter().find(|f| f.name == "epoll").copied().unwrap();
    for fd in &fds {
        io_calls(&mut x, *fd);
        meta_calls(&mut x, *fd);
        at_calls(&mut x, *fd);
        fd_calls(&mut x, *fd, pipe_r, epfd);
    }
    for fd in &fds {
        x.check(
            || format!("close({})", fd.name),
            // SAFETY: plain syscall (bad numbers are not open; ours are closed here).
            host(unsafe { libc::syscall(libc::SYS_close, fd.h) }, unit),
            ours(|| x.o().close(fd.o), |_| "ok".into()),
        );
    }
    x.host_fds.clear();
    x.finish("every_call_on_every_descriptor");
}

pub(super) fn io_calls(x: &mut X, fd: Fd) {
    let n = fd.name;
    for len in [0usize, 4] {
        let mut hb = vec![0u8; len];
        let mut ob = vec![0u8; len];
        // SAFETY: valid buffer.
        let h = unsafe { libc::syscall(libc::SYS_read, fd.h, hb.as_mut_ptr(), len) };
        let h = host(h, |k| format!("{:?}", &hb[..k as usize]));
        let o = ours_read(&mut ob, |b| x.o().read(fd.o, b));
        x.check(|| format!("read({n}, {len})"), h, o);
        let mut hb = vec![0u8; len];
        let mut ob = vec![0u8; len];
        // SAFETY: valid buffer.
        let h = unsafe { libc::syscall(libc::SYS_pread64, fd.h, hb.as_mut_ptr(), len, 0) };
        let h = host(h, |k| format!("{:?}", &hb[..k as usize]));
        let o = ours_read(&mut ob, |b| x.o().pread64(fd.o, b, 0));
        x.check(|| format!("pread64({n}, {len}, 0)"), h, o);
    }
    // Eight bytes: a valid eventfd write too.
    let data = 1u64.to_ne_bytes();
    for d in [&data[..0], &data[..]] {
        // SAFETY: valid buffer.
        let h = unsafe { libc::syscall(libc::SYS_write, fd.h, d.as_ptr(), d.len()) };
        let o = ours(|| x.o().write(fd.o, d), |k| k.to_string());
        x.check(|| format!("write({n}, {})", d.len()), host(h, num), o);
        // SAFETY: valid buffer.
        let h = unsafe { libc::syscall(libc::SYS_pwrite64, fd.h, d.as_ptr(), d.len(), 3) };
        let o = ours(|| x.o().pwrite64(fd.o, d, 3), |k| k.to_string());
        x.check(|| format!("pwrite64({n}, {}, 3)", d.len()), host(h, num), o);
    }
    readv_writev(x, fd, &[8, 0, 3]);
    readv_writev(x, fd, &[]);
    for whence in [libc::SEEK_SET, libc::SEEK_CUR, libc::SEEK_END] {
        // SAFETY: plain syscall.
        let h = unsafe { libc::syscall(libc::SYS_lseek, fd.h, 0i64, whence) };
        let o = ours(|| x.o().lseek(fd.o, 0, whence), |k| k.to_string());
        x.check(|| format!("lseek({n}, 0, {whence})"), host(h, num), o);
    }
    // SAFETY: plain syscalls.
    let h = unsafe { libc::syscall(libc::SYS_ftruncate, fd.h, 11i64) };
    let o = ours(|| x.o().ftruncate(fd.o, 11), |_| "ok".into());
    x.check(|| format!("ftruncate({n}, 11)"), host(h, unit), o);
    for mode in [
        0,
        libc::FALLOC_FL_KEEP_SIZE,
        libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
    ] {
        // SAFETY: plain syscall.
        let h = unsafe { libc::syscall(libc::SYS_fallocate, fd.h, mode, 0i64, 1i64) };
        let o = ours(|| x.o().fallocate(fd.o, mode, 0, 1), |_| "ok".into());
        x.check(|| format!("fallocate({n}, {mode}, 0, 1)"), host(h, unit), o);
    }
    // SAFETY: plain syscalls.
    let h = unsafe { libc::syscall(libc::SYS_fsync, fd.h) };
    let o = ours(|| x.o().fsync(fd.o), |_| "ok".into());
    x.check(|| format!("fsync({n})"), host(h, unit), o);
    // SAFETY: plain syscalls.
    let h = unsafe { libc::syscall(libc::SYS_fdatasync, fd.h) };
    let o = ours(|| x.o().fdatasync(fd.o), |_| "ok".into());
    x.check(|| format!("fdatasync({n})"), host(h, unit), o);
    for len in [0usize, 1, 4096] {
        let mut hb = vec![0u8; len];
        let mut ob = vec![0u8; len];
        // SAFETY: valid buffer.
        let h = unsafe { libc::syscall(libc::SYS_getdents64, fd.h, hb.as_mut_ptr(), len) };
        // Entry order and inode numbers are ours: compare whether anything came back.
        let h = host(h, |k| (k > 0).to_string());
        let o = ours(|| x.o().getdents64(fd.o, &mut ob), |k| (k > 0).to_string());
        x.check(|| format!("getdents64({n}, {len})"), h, o);
    }
}

pub(super) fn readv_writev(x: &mut X, fd: Fd, lens: &[usize]) {
    let n = fd.name;
    let mut hbufs: Vec<Vec<u8>> = lens.iter().map(|&l| vec![0u8; l]).collect();
    let mut obufs = hbufs.clone();
    let hiov: Vec<libc::iovec> = hbufs
        .iter_mut()
        .map(|b| libc::iovec {
            iov_base: b.as_mut_ptr().cast(),
            iov_len: b.len(),
        })
        .collect();
    // SAFETY: valid iovecs.
    let h = unsafe { libc::syscall(libc::SYS_readv, fd.h, hiov.as_ptr(), hiov.len()) };
    let h = host(h, |k| format!("{k} {:?}", hbufs.concat()));
    let o = {
        let mut oiov: Vec<IoSliceMut> = obufs.iter_mut().map(|b| IoSliceMut::new(b)).collect();
        ours(|| x.o().readv(fd.o, &mut oiov), |k| k.to_string())
    };
    let o = o.map(|k| format!("{k} {:?}", obufs.concat()));
    x.check(|| format!("readv({n}, {lens:?})"), h, o);
    let src: Vec<Vec<u8>> = lens.iter().map(|&l| vec![b'w'; l]).collect();
    let hiov: Vec<libc::iovec> = src
        .iter()
        .map(|b| libc::iovec {
            iov_base: b.as_ptr() as *mut _,
            iov_len: b.len(),
        })
        .collect();
    // SAFETY: valid iovecs (only read).
    let h = unsafe { libc::syscall(libc::SYS_writev, fd.h, hiov.as_ptr(), hiov.len()) };
    let oiov: Vec<IoSlice> = src.iter().map(|b| IoSlice::new(b)).collect();
    let o = ours(|| x.o().writev(fd.o, &oiov), |k| k.to_string());
    x.check(|| format!("writev({n}, {lens:?})"), host(h, num), o);
}

/// Raw `newfstatat` on the host.
pub(super) fn host_fstatat(dirfd: i32, path: &[u8], flags: i32) -> Res {
    let c = cs(path);
    // SAFETY: zeroed plain struct.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: valid pointers.
    let r = unsafe { libc::syscall(libc::SYS_newfstatat, dirfd, c.as_ptr(), &mut st, flags) };
    host(r, |_| host_stat(&st))
}

/// An eventfd or epoll: Linux 6.15+ refuses every attribute change on anonymous inodes
/// (`anon_inode_setattr`: EOPNOTSUPP); ours has one inode per file and allows them. A
/// deliberate difference (README), so those calls are not compared on these.
pub(super) fn anon(fd: Fd) -> bool {
    matches!(fd.name, "eventfd" | "epoll")
}

pub(super) fn meta_calls(x: &mut X, fd: Fd) {
    let n = fd.name;
    // SAFETY: zeroed plain struct.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: valid pointer.
    let h = unsafe { libc::syscall(libc::SYS_fstat, fd.h, &mut st) };
    let h = host(h, |_| host_stat(&st));
    let o = ours(|| x.o().fstat(fd.o), |s| our_stat(&s));
    x.check(|| format!("fstat({n})"), h, o);
    if anon(fd) {
        return;
    }
    for mode in [0o644u32, 0o644 | 0xffff_f000] {
        // SAFETY: plain syscall.
        let h = unsafe { libc::syscall(libc::SYS_fchmod, fd.h, mode) };
        let o = ours(|| x.o().fchmod(fd.o, mode), |_| "ok".into());
        x.check(|| format!("fchmod({n}, {mode:#o})"), host(h, unit), o);
    }
    for (u, g) in [(u32::MAX, u32::MAX), (0, 0), (u32::MAX - 1, u32::MAX - 1)] {
        // SAFETY: plain syscall.
        let h = unsafe { libc::syscall(libc::SYS_fchown, fd.h, u, g) };
        let o = ours(|| x.o().fchown(fd.o, u, g), |_| "ok".into());
        x.check(|| format!("fchown({n}, {u}, {g})"), host(h, unit), o);
    }
    // SAFETY: plain syscall.
    let h = unsafe { libc::syscall(libc::SYS_fchown, fd.h, 0, 0) };
    let o = ours(|| x.o().fchown(fd.o, 0, 0), |_| "ok".into());
    x.check(|| format!("fchown({n}, 0, 0) again"), host(h, unit), o);
}

/// The `*at` calls with `fd` as the directory descriptor.
pub(super) fn at_calls(x: &mut X, fd: Fd) {
    let n = fd.name;
    for (path, flags) in [
        (&b""[..], libc::AT_EMPTY_PATH),
        (b"", 0),
        (b"x", 0),
        (b"x", libc::AT_SYMLINK_NOFOLLOW),
        (b"/", 0),
        (b"..", 0),
        (b"x", -1),
        (b"", libc::AT_EMPTY_PATH | libc::AT_SYMLINK_NOFOLLOW),
    ] {
        let h = host_fstatat(fd.h, path, flags);
        let o = ours(|| x.o().newfstatat(fd.o, path, flags), |s| our_stat(&s));
        // "/" and ".." of a bad descriptor's cwd are directories outside our tree.
        let (h, o) = if path == b"/" || path == b".." {
            (h.map(|s| file_type(&s)), o.map(|s| file_type(&s)))
        } else {
            (h, o)
        };
        x.check(
            || {
                format!(
                    "newfstatat({n}, {:?}, {flags:#x})",
                    String::from_utf8_lossy(path)
                )
            },
            h,
            o,
        );
    }
    for (path, flags) in [
        (&b""[..], libc::AT_EMPTY_PATH),
        (b"x", 0),
        (b"x", libc::AT_SYMLINK_NOFOLLOW),
        (b"x", 0x8000_0000u32 as i32),
    ] {
        if anon(fd) && path.is_empty() {
            continue;
        }
        let c = cs(path);
        // SAFETY: valid C string.
        let h = unsafe { libc::syscall(libc::SYS_fchmodat2, fd.h, c.as_ptr(), 0o600, flags) };
        let o = ours(|| x.o().fchmodat(fd.o, path, 0o600, flags), |_| "ok".into());
        x.check(
            || {
                format!(
                    "fchmodat({n}, {:?}, {flags:#x})",
                    String::from_utf8_lossy(path)
                )
            },
            host(h, unit),
            o,
        );
        // SAFETY: valid C string.
        let h = unsafe { libc::syscall(libc::SYS_fchownat, fd.h, c.as_ptr(), -1, -1, flags) };
        let o = ours(
            || x.o().fchownat(fd.o, path, u32::MAX, u32::MAX, flags),
            |_| "ok".into(),
        );
        x.check(
            || {
                format!(
                    "fchownat({n}, {:?}, {flags:#x})",
                    String::from_utf8_lossy(path)
                )
            },
            host(h, unit),
            o,
        );
        for mode in [libc::F_OK, libc::R_OK | libc::W_OK, 8, -1] {
            // The host checks the real uid, which setfsuid does not change.
            if x.user && flags & libc::AT_EACCESS == 0 && mode > 0 && mode < 8 {
                continue;
            }
            // SAFETY: valid C string.
            let h = unsafe { libc::syscall(libc::SYS_faccessat2, fd.h, c.as_ptr(), mode, flags) };
            let o = ours(|| x.o().faccessat(fd.o, path, mode, flags), |_| "ok".into());
            x.check(
                || {
                    format!(
                        "faccessat({n}, {:?}, {mode}, {flags:#x})",
                        String::from_utf8_lossy(path)
                    )
                },
                host(h, unit),
                o,
            );
        }
    }
    // utimensat with and without a path, with a NULL times and explicit ones; an empty
    // path without AT_EMPTY_PATH is our futimens (the host's NULL path).
    for (path, flags) in [
        (&b""[..], 0),
        (b"", libc::AT_SYMLINK_NOFOLLOW),
        (b"", libc::AT_EMPTY_PATH),
        (b"x", 0),
        (b"x", libc::AT_SYMLINK_NOFOLLOW),
    ] {
        for times in [
            None,
            Some([Timespec { sec: 5, nsec: 6 }; 2]),
            Some(
                [Timespec {
                    sec: 0,
                    nsec: libc::UTIME_OMIT,
                }; 2],
            ),
        ] {
            if anon(fd) && path.is_empty() {
                continue;
            }
            let h = host_utimensat(fd.h, path, times, flags);
            let o = ours(
                || x.o().utimensat(fd.o, path, times, flags),
                |_| "ok".into(),
            );
            x.check(
                || {
                    format!(
                        "utimensat({n}, {:?}, {times:?}, {flags:#x})",
                        String::from_utf8_lossy(path)
                    )
                },
                h,
                o,
            );
        }
    }
    namespace_at(x, fd);
}

pub(super) fn host_utimensat(
    dirfd: i32,
    path: &[u8],
    times: Option<[Timespec; 2]>,
    flags: i32,
) -> Res {
    let ts = times.map(|t| {
        t.map(|t| libc::timespec {
            tv_sec: t.sec,
            tv_nsec: t.nsec,
        })
    });
    let tp = ts.as_ref().map_or(std::ptr::null(), |t| t.as_ptr());
    let c = cs(path);
    let pp = if path.is_empty() && flags & libc::AT_EMPTY_PATH == 0 && dirfd != libc::AT_FDCWD {
        std::ptr::null()
    } else {
        c.as_ptr()
    };
    // SAFETY: valid pointers (a NULL path is futimens).
    let r = unsafe { libc::syscall(libc::SYS_utimensat, dirfd, pp, tp, flags) };
    host(r, unit)
}

/// Creates and removes names under `fd`: mkdirat, openat, symlinkat, readlinkat, linkat,
/// renameat2, unlinkat.
pub(super) fn namespace_at(x: &mut X, fd: Fd) {
    let n = fd.name;
    let c = |s: &str| cs(s.as_bytes());
    // SAFETY: valid C strings and buffers.
    let h = unsafe { libc::syscall(libc::SYS_mkdirat, fd.h, c("nd").as_ptr(), 0o755) };
    let o = ours(|| x.o().mkdirat(fd.o, "nd", 0o755), |_| "ok".into());
    x.check(|| format!("mkdirat({n}, nd)"), host(h, unit), o);
    // SAFETY: valid C strings and buffers, plain integer arguments.
    let h = unsafe {
        libc::syscall(
            libc::SYS_openat,
            fd.h,
            c("nf").as_ptr(),
            libc::O_CREAT | libc::O_RDWR | libc::O_CLOEXEC,
            0o600,
        )
    };
    if h >= 0 {
        // SAFETY: valid C strings and buffers, plain integer arguments.
        unsafe { libc::close(h as i32) };
    }
    let o = ours(
        || {
            x.o()
                .openat(fd.o, "nf", libc::O_CREAT | libc::O_RDWR, 0o600)
        },
        |fd| {
            let _ = x.o().close(fd);
            "fd".into()
        },
    );
    x.check(
        || format!("openat({n}, nf, O_CREAT)"),
        host(h, |_| "fd".into()),
        o,
    );
    // SAFETY: valid C strings and buffers, plain integer arguments.
    let h = unsafe { libc::syscall(libc::SYS_symlinkat, c("t").as_ptr(), fd.h, c("sl").as_ptr()) };
    let o = ours(|| x.o().symlinkat("t", fd.o, "sl"), |_| "ok".into());
    x.check(|| format!("symlinkat(t, {n}, sl)"), host(h, unit), o);
    for p in ["sl", ""] {
        let mut hb = [0u8; 16];
        let mut ob = [0u8; 16];
        // SAFETY: valid C strings and buffers, plain integer arguments.
        let h = unsafe {
            libc::syscall(
                libc::SYS_readlinkat,
                fd.h,
                c(p).as_ptr(),
                hb.as_mut_ptr(),
                16,
            )
        };
        let h = host(h, |k| format!("{:?}", &hb[..k as usize]));
        let o = ours_read(&mut ob, |b| x.o().readlinkat(fd.o, p, b));
        x.check(|| format!("readlinkat({n}, {p:?})"), h, o);
    }
    for (a, b, flags) in [
        ("sl", "sl2", 0),
        ("", "sl3", libc::AT_EMPTY_PATH),
        ("", "sl4", 0),
        ("sl", "sl5", -1),
    ] {
        // SAFETY: valid C strings and buffers, plain integer arguments.
        let h = unsafe {
            libc::syscall(
                libc::SYS_linkat,
                fd.h,
                c(a).as_ptr(),
                fd.h,
                c(b).as_ptr(),
                flags,
            )
        };
        let o = ours(|| x.o().linkat(fd.o, a, fd.o, b, flags), |_| "ok".into());
        x.check(
            || format!("linkat({n}, {a:?}, {b:?}, {flags:#x})"),
            host(h, unit),
            o,
        );
    }
    // SAFETY: valid C strings and buffers, plain integer arguments.
    let h = unsafe {
        libc::syscall(
            libc::SYS_renameat2,
            fd.h,
            c("sl2").as_ptr(),
            fd.h,
            c("sl6").as_ptr(),
            0,
        )
    };
    let o = ours(
        || x.o().renameat2(fd.o, "sl2", fd.o, "sl6", 0),
        |_| "ok".into(),
    );
    x.check(|| format!("renameat2({n}, sl2, sl6)"), host(h, unit), o);
    for (p, flags) in [
        ("sl", 0),
        ("sl3", 0),
        ("sl6", 0),
        ("nf", 0),
        ("nd", 0),
        ("nd", libc::AT_REMOVEDIR),
        ("", libc::AT_REMOVEDIR),
        ("x", -1),
    ] {
        // SAFETY: valid C strings and buffers, plain integer arguments.
        let h = unsafe { libc::syscall(libc::SYS_unlinkat, fd.h, c(p).as_ptr(), flags) };
        let o = ours(|| x.o().unlinkat(fd.o, p, flags), |_| "ok".into());
        x.check(
            || format!("unlinkat({n}, {p:?}, {flags:#x})"),
            host(h, unit),
            o,
        );
    }
}

/// dup family, fcntl, flock, fchdir, epoll_ctl and poll.
pub(super) fn fd_calls(x: &mut X, fd: Fd, pipe_r: Fd, epfd: Fd) {
    let n = fd.name;
    let fdnum = |k: c_long| {
        if k >= 0 {
            "fd".to_string()
        } else {
            k.to_string()
        }
    };
    // SAFETY: plain syscalls and valid pointers.
    let h = unsafe { libc::syscall(libc::SYS_dup, fd.h) };
    if h >= 0 {
        // SAFETY: valid C strings and buffers, plain integer arguments.
        unsafe { libc::close(h as i32) };
    }
    let o = ours(
        || x.o().dup(fd.o),
        |k| {
            let _ = x.o().close(k);
            "fd".into()
        },
    );
    x.check(|| format!("dup({n})"), host(h, fdnum), o);
    for (newfd, flags) in [
        (SPARE_FD, 0),
        (SPARE_FD, libc::O_CLOEXEC),
        (SPARE_FD, libc::O_NONBLOCK),
        (SPARE_FD, -1),
        (fd.h, 0),
        (-1, 0),
        (i32::MAX, 0),
        (1 << 20, 0),
    ] {
        // The same number on both sides, except for fd itself.
        let onew = if newfd == fd.h { fd.o } else { newfd };
        // SAFETY: valid C strings and buffers, plain integer arguments.
        let h = unsafe { libc::syscall(libc::SYS_dup3, fd.h, newfd, flags) };
        let o = ours(|| x.o().dup3(fd.o, onew, flags), |k| k.to_string());
        let (h, o) = (h_fd(h, newfd), o.map(|k| norm_fd(&k, onew)));
        x.check(|| format!("dup3({n}, {newfd}, {flags:#x})"), h, o);
        // SAFETY: valid C strings and buffers, plain integer arguments.
        let h = unsafe { libc::syscall(libc::SYS_dup2, fd.h, newfd) };
        let o = ours(|| x.o().dup2(fd.o, onew), |k| k.to_string());
        let (h, o) = (h_fd(h, newfd), o.map(|k| norm_fd(&k, onew)));
        x.check(|| format!("dup2({n}, {newfd})"), h, o);
        if newfd == SPARE_FD {
            // SAFETY: valid C strings and buffers, plain integer arguments.
            unsafe { libc::close(SPARE_FD) };
            let _ = x.o().close(SPARE_FD);
        }
    }
    for (cmd, arg) in [
        (libc::F_GETFD, 0i64),
        (libc::F_SETFD, -1),
        (libc::F_GETFD, 0),
        (libc::F_SETFD, 0),
        (libc::F_GETFL, 0),
        (libc::F_SETFL, libc::O_NONBLOCK as i64),
        (libc::F_GETFL, 0),
        (libc::F_GETPIPE_SZ, 0),
        (libc::F_SETPIPE_SZ, -1),
        (libc::F_SETPIPE_SZ, i32::MAX as i64),
        (libc::F_SETPIPE_SZ, 4096),
        (libc::F_GETPIPE_SZ, 0),
        (9999, 0),
        (-1, 0),
        (i32::MIN, 0),
    ] {
        // SAFETY: valid C strings and buffers, plain integer arguments.
        let h = unsafe { libc::syscall(libc::SYS_fcntl, fd.h, cmd, arg) };
        let o = ours(
            || x.o().fcntl(fd.o, cmd, FcntlArg::Int(arg)),
            |k| k.to_string(),
        );
        let mut h = host(h, num);
        if cmd == libc::F_SETPIPE_SZ && arg == i32::MAX as i64 && h == Err(libc::EPERM) {
            // A 2 GiB pipe needs CAP_SYS_RESOURCE, which containers often drop (ours
            // models root with every capability): ours must refuse it (ENOMEM: the size
            // does not fit fcntl's int), never return a negative size.
            h = Err(libc::ENOMEM);
        }
        x.check(|| format!("fcntl({n}, {cmd}, {arg})"), h, o);
    }
    for (cmd, arg) in [
        (libc::F_DUPFD, 0i64),
        (libc::F_DUPFD_CLOEXEC, 500),
        (libc::F_DUPFD, -1),
        (libc::F_DUPFD, i32::MAX as i64),
        (libc::F_DUPFD, 1 << 20),
    ] {
        // SAFETY: valid C strings and buffers, plain integer arguments.
        let h = unsafe { libc::syscall(libc::SYS_fcntl, fd.h, cmd, arg) };
        if h >= 0 {
            // SAFETY: valid C strings and buffers, plain integer arguments.
            unsafe { libc::close(h as i32) };
        }
        let o = ours(
            || x.o().fcntl(fd.o, cmd, FcntlArg::Int(arg)),
            |k| {
                let _ = x.o().close(k);
                "fd".into()
            },
        );
        x.check(|| format!("fcntl({n}, {cmd}, {arg})"), host(h, fdnum), o);
    }
    for op in [
        libc::LOCK_SH | libc::LOCK_NB,
        libc::LOCK_EX | libc::LOCK_NB,
        libc::LOCK_UN,
        0,
        libc::LOCK_NB,
        libc::LOCK_SH | libc::LOCK_EX | libc::LOCK_NB,
        libc::LOCK_UN | 0x100,
        -1,
    ] {
        // SAFETY: valid C strings and buffers, plain integer arguments.
        let h = unsafe { libc::syscall(libc::SYS_flock, fd.h, op) };
        let o = ours(|| x.o().flock(fd.o, op), |_| "ok".into());
        x.check(|| format!("flock({n}, {op:#x})"), host(h, unit), o);
    }
    // SAFETY: valid C strings and buffers, plain integer arguments.
    let h = unsafe { libc::syscall(libc::SYS_fchdir, fd.h) };
    let o = ours(|| x.o().fchdir(fd.o), |_| "ok".into());
    x.check(|| format!("fchdir({n})"), host(h, unit), o);
    // SAFETY: valid C strings and buffers, plain integer arguments.
    assert_eq!(unsafe { libc::fchdir(x.b.host_base().0) }, 0);
    x.o().chdir("/base").unwrap();
    // epoll_ctl with fd as the target and as the epoll; poll on it.
    let ev = EpollEvent::new(libc::EPOLLIN as u32, 7);
    for op in [
        libc::EPOLL_CTL_ADD,
        libc::EPOLL_CTL_MOD,
        libc::EPOLL_CTL_DEL,
        99,
    ] {
        let mut hev = libc::epoll_event {
            events: ev.events,
            u64: ev.data,
        };
        // SAFETY: valid C strings and buffers, plain integer arguments.
        let h = unsafe { libc::syscall(libc::SYS_epoll_ctl, epfd.h, op, fd.h, &mut hev) };
        let o = ours(
            || x.o().epoll_ctl(epfd.o, op, fd.o, Some(&ev)),
            |_| "ok".into(),
        );
        x.check(|| format!("epoll_ctl(epoll, {op}, {n})"), host(h, unit), o);
        // SAFETY: valid C strings and buffers, plain integer arguments.
        let h = unsafe { libc::syscall(libc::SYS_epoll_ctl, fd.h, op, pipe_r.h, &mut hev) };
        let o = ours(
            || x.o().epoll_ctl(fd.o, op, pipe_r.o, Some(&ev)),
            |_| "ok".into(),
        );
        x.check(|| format!("epoll_ctl({n}, {op}, pipe)"), host(h, unit), o);
    }
    let mut hev = [libc::epoll_event { events: 0, u64: 0 }; 4];
    // SAFETY: valid C strings and buffers, plain integer arguments.
    let h = unsafe { libc::syscall(libc::SYS_epoll_wait, fd.h, hev.as_mut_ptr(), 4, 0) };
    let mut oev = [EpollEvent::default(); 4];
    let o = ours(|| x.o().epoll_wait(fd.o, &mut oev, 0), |k| k.to_string());
    x.check(|| format!("epoll_wait({n})"), host(h, num), o);
    for events in [libc::POLLIN | libc::POLLOUT, -1] {
        let mut hp = [libc::pollfd {
            fd: fd.h,
            events,
            revents: 0,
        }];
        let mut op = [libc::pollfd {
            fd: fd.o,
            events,
            revents: 0,
        }];
        let ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: valid C strings and buffers, plain integer arguments.
        let h = unsafe {
            libc::syscall(
                libc::SYS_ppoll,
                hp.as_mut_ptr(),
                1,
                &ts,
                std::ptr::null::<u8>(),
                8,
            )
        };
        let h = host(h, |k| format!("{k} {:#x}", hp[0].revents));
        let o = ours(|| x.o().poll(&mut op, 0), |k| k.to_string());
        let o = o.map(|k| format!("{k} {:#x}", op[0].revents));
        x.check(|| format!("poll({n}, {events:#x})"), h, o);
    }
}

/// A descriptor result: the number itself when it was asked for (`dup2`'s newfd).
pub(super) fn h_fd(h: c_long, newfd: i32) -> Res {
    host(h, |k| {
        if k == newfd as c_long {
            "newfd".into()
        } else {
            k.to_string()
        }
    })
}

pub(super) fn norm_fd(k: &str, newfd: i32) -> String {
    if k == newfd.to_string() {
        "newfd".into()
    } else {
        k.into()
    }
}
