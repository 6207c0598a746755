//! Out-of-range timestamps, locks and polling, and an unprivileged caller.

use super::*;

// ------------------------------------------------------------------ timestamps

/// utimensat with every mix of UTIME_NOW/UTIME_OMIT/out-of-range nanoseconds and extreme
/// seconds; the stored times are compared too (explicit ones exactly).
#[test]
fn timestamps() {
    let mut x = X::new();
    let nsecs = [
        0,
        999_999_999,
        1_000_000_000,
        -1,
        i64::MIN,
        i64::MAX,
        libc::UTIME_NOW,
        libc::UTIME_OMIT,
        libc::UTIME_NOW + 1,
    ];
    let secs = [0, -1, i64::MIN, i64::MAX, 1 << 40];
    for &a in &nsecs {
        for &m in &nsecs {
            for &sec in &secs {
                let t = [Timespec { sec, nsec: a }, Timespec { sec: 7, nsec: m }];
                let h = host_utimensat(libc::AT_FDCWD, b"f", Some(t), 0);
                let o = ours(
                    || x.o().utimensat(libc::AT_FDCWD, "f", Some(t), 0),
                    |_| "ok".into(),
                );
                x.check(|| format!("utimensat(f, {t:?})"), h, o);
                times_both(&mut x, &t);
            }
        }
    }
    x.finish("timestamps");
}

/// Compares the stored atime/mtime of "f" where they were set explicitly.
pub(super) fn times_both(x: &mut X, t: &[Timespec; 2]) {
    let c = cs(b"f");
    // SAFETY: zeroed plain struct.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: valid pointers.
    assert_eq!(unsafe { libc::stat(c.as_ptr(), &mut st) }, 0);
    let s = x.o().stat("f").unwrap();
    let explicit = |ts: &Timespec| (0..1_000_000_000).contains(&ts.nsec);
    if explicit(&t[0]) && explicit(&t[1]) {
        let h = format!(
            "{}.{} {}.{}",
            st.st_atime, st.st_atime_nsec, st.st_mtime, st.st_mtime_nsec
        );
        let o = format!(
            "{}.{} {}.{}",
            s.atime.sec, s.atime.nsec, s.mtime.sec, s.mtime.nsec
        );
        x.check(|| format!("times after {t:?}"), Ok(h), Ok(o));
    }
}

// ------------------------------------------------------------------ locks and polling

/// fcntl record locks with extreme starts, lengths, whences and types; poll/ppoll and
/// epoll_wait with odd counts and timeouts.
#[test]
fn locks_and_polling() {
    let mut x = X::new();
    let f = x.open_both("f", "f", libc::O_RDWR, 0);
    let types = [libc::F_RDLCK, libc::F_WRLCK, libc::F_UNLCK, 3, -1];
    let whences = [libc::SEEK_SET, libc::SEEK_CUR, libc::SEEK_END, 3, -1];
    let starts = [i64::MIN, -12, -1, 0, 1, i64::MAX - 1, i64::MAX];
    let lens = [i64::MIN, -2, -1, 0, 1, i64::MAX];
    let cmds = [
        libc::F_GETLK,
        libc::F_SETLK,
        libc::F_OFD_GETLK,
        libc::F_OFD_SETLK,
    ];
    // SAFETY: plain syscalls; the position makes SEEK_CUR differ from SEEK_SET.
    unsafe { libc::lseek(f.h, 5, libc::SEEK_SET) };
    x.o().lseek(f.o, 5, libc::SEEK_SET).unwrap();
    for cmd in cmds {
        for ty in types {
            for wh in whences {
                for &start in &starts {
                    for &len in &lens {
                        let mut hl = libc::flock {
                            l_type: ty as i16,
                            l_whence: wh as i16,
                            l_start: start,
                            l_len: len,
                            l_pid: 0,
                        };
                        let mut ol = Flock {
                            l_type: ty as i16,
                            l_whence: wh as i16,
                            l_start: start,
                            l_len: len,
                            l_pid: 0,
                        };
                        // SAFETY: valid pointer.
                        let h = unsafe { libc::syscall(libc::SYS_fcntl, f.h, cmd, &mut hl) };
                        let h = host(h, |k| {
                            format!(
                                "{k} {} {} {} {}",
                                hl.l_type, hl.l_whence, hl.l_start, hl.l_len
                            )
                        });
                        let o = ours(
                            || x.o().fcntl(f.o, cmd, FcntlArg::Flock(&mut ol)),
                            |k| k.to_string(),
                        );
                        let o = o.map(|k| {
                            format!(
                                "{k} {} {} {} {}",
                                ol.l_type, ol.l_whence, ol.l_start, ol.l_len
                            )
                        });
                        x.check(
                            || {
                                format!(
                                    "fcntl({cmd}, type {ty} whence {wh} start {start} len {len})"
                                )
                            },
                            h,
                            o,
                        );
                    }
                }
            }
        }
    }
    // poll: negative and huge descriptors, more entries than the descriptor limit.
    let (_, limit) = host_limits();
    for n in [0usize, 3, limit as usize + 1] {
        let mut hp: Vec<libc::pollfd> = (0..n)
            .map(|i| libc::pollfd {
                fd: [-1, i32::MAX, 1 << 20][i % 3],
                events: -1,
                revents: 0,
            })
            .collect();
        let mut op = hp.clone();
        let ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: valid array.
        let h = unsafe {
            libc::syscall(
                libc::SYS_ppoll,
                hp.as_mut_ptr(),
                n,
                &ts,
                std::ptr::null::<u8>(),
                8,
            )
        };
        let h = host(h, |k| {
            format!("{k} {:?}", hp.iter().map(|p| p.revents).collect::<Vec<_>>())
        });
        let o = ours(|| x.o().poll(&mut op, 0), |k| k.to_string());
        let o = o.map(|k| format!("{k} {:?}", op.iter().map(|p| p.revents).collect::<Vec<_>>()));
        x.check(|| format!("poll({n} entries)"), h, o);
    }
    for (sec, nsec) in [
        (0i64, -1i64),
        (-1, 0),
        (0, 1_000_000_000),
        (i64::MIN, 0),
        (0, i64::MAX),
    ] {
        let ts = libc::timespec {
            tv_sec: sec,
            tv_nsec: nsec,
        };
        let mut hp: [libc::pollfd; 0] = [];
        // SAFETY: valid pointers.
        let h = unsafe {
            libc::syscall(
                libc::SYS_ppoll,
                hp.as_mut_ptr(),
                0,
                &ts,
                std::ptr::null::<u8>(),
                8,
            )
        };
        let o = ours(|| x.o().ppoll(&mut [], Some(&ts), None), |k| k.to_string());
        x.check(|| format!("ppoll(timeout {sec}.{nsec})"), host(h, num), o);
    }
    // SAFETY: plain syscall.
    let hep = unsafe { libc::epoll_create1(0) };
    x.host_fds.push(hep);
    let oep = x.o().epoll_create1(0).unwrap();
    for n in [0usize, 1] {
        let mut hev = vec![libc::epoll_event { events: 0, u64: 0 }; n];
        // SAFETY: valid buffer.
        let h = unsafe { libc::syscall(libc::SYS_epoll_wait, hep, hev.as_mut_ptr(), n, 0) };
        let mut oev = vec![EpollEvent::default(); n];
        let o = ours(|| x.o().epoll_wait(oep, &mut oev, 0), |k| k.to_string());
        x.check(|| format!("epoll_wait(maxevents {n})"), host(h, num), o);
    }
    // epoll_ctl: an epoll watching itself, unknown ops, a NULL event.
    let mut hev = libc::epoll_event {
        events: u32::MAX,
        u64: 0,
    };
    for op in [libc::EPOLL_CTL_ADD, 0, 4, -1] {
        // SAFETY: valid pointer.
        let h = unsafe { libc::syscall(libc::SYS_epoll_ctl, hep, op, hep, &mut hev) };
        let ev = EpollEvent::new(u32::MAX, 0);
        let o = ours(|| x.o().epoll_ctl(oep, op, oep, Some(&ev)), |_| "ok".into());
        x.check(|| format!("epoll_ctl(self, {op})"), host(h, unit), o);
        // SAFETY: a NULL event.
        let h = unsafe { libc::syscall(libc::SYS_epoll_ctl, hep, op, f.h, std::ptr::null::<u8>()) };
        let o = ours(|| x.o().epoll_ctl(oep, op, f.o, None), |_| "ok".into());
        x.check(|| format!("epoll_ctl(file, {op}, NULL)"), host(h, unit), o);
    }
    x.finish("locks_and_polling");
}

/// The same descriptor calls as an unprivileged user (uid 1000): permission errors must
/// come in Linux's order with the bad arguments.
#[test]
fn unprivileged_user() {
    let mut x = X::new();
    x.b.user(true);
    x.user = true;
    x.o().chdir("/base").unwrap();
    let mut fds: Vec<Fd> = BAD_FDS
        .iter()
        .map(|&(name, n)| Fd { name, h: n, o: n })
        .collect();
    fds.push(x.open_both("own file", "uf", libc::O_CREAT | libc::O_RDWR, 0o600));
    fds.push(x.open_both("root's file", "f", libc::O_RDONLY, 0));
    fds.push(x.open_both("root's dir", "d", libc::O_RDONLY, 0));
    fds.push(x.open_both("root's file O_PATH", "f", libc::O_PATH, 0));
    for fd in &fds {
        meta_calls(&mut x, *fd);
        at_calls(&mut x, *fd);
    }
    x.b.user(false);
    x.finish("unprivileged_user");
}
