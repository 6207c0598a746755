//! What only scalevfs can show: cancellation, wake-ups across threads, fork, churn, limits.

use super::*;

pub(super) fn ours() -> Ours {
    Ours::new(Locking::Scalable)
}

/// A cancel fired from another thread after `ms`.
pub(super) fn cancel_after(ms: u64) -> (Arc<CancelToken>, std::thread::JoinHandle<()>) {
    let t = Arc::new(CancelToken::new());
    let t2 = t.clone();
    let h = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(ms));
        t2.cancel();
    });
    (t, h)
}

#[test]
fn blocking_calls_are_interruptible() {
    let o = ours();
    let p = &o.p;
    let mut fds = [0; 2];
    p.pipe2(&mut fds, 0).unwrap();
    let ep = p.epoll_create1(0).unwrap();
    p.epoll_ctl(ep, ADD, fds[0], Some(&EpollEvent::new(IN, 1)))
        .unwrap();

    let (t, h) = cancel_after(20);
    let mut b = [0u8; 4];
    assert_eq!(
        p.with_cancel(&t).read(fds[0], &mut b),
        Err(scalevfs::Errno::EINTR)
    );
    h.join().unwrap();

    let (t, h) = cancel_after(20);
    let mut evs = [EpollEvent::default(); 4];
    assert_eq!(
        p.with_cancel(&t).epoll_wait(ep, &mut evs, -1),
        Err(scalevfs::Errno::EINTR)
    );
    h.join().unwrap();

    let (t, h) = cancel_after(20);
    let mut pf = [libc::pollfd {
        fd: fds[0],
        events: libc::POLLIN,
        revents: 0,
    }];
    assert_eq!(
        p.with_cancel(&t).ppoll(&mut pf, None, None),
        Err(scalevfs::Errno::EINTR)
    );
    h.join().unwrap();

    // A full blocking pipe: the writer blocks, a cancel returns the partial count.
    p.fcntl(fds[1], libc::F_SETPIPE_SZ, FcntlArg::Int(4096))
        .unwrap();
    let (t, h) = cancel_after(20);
    assert_eq!(p.with_cancel(&t).write(fds[1], &[0u8; 6000]), Ok(4096));
    h.join().unwrap();

    // Timeouts return 0 events after about the timeout.
    let mut b = [0u8; 8192];
    assert_eq!(p.read(fds[0], &mut b), Ok(4096));
    let t0 = Instant::now();
    assert_eq!(p.epoll_wait(ep, &mut evs, 30), Ok(0));
    assert!(t0.elapsed() >= Duration::from_millis(25));
    let ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 1_000_000,
    };
    assert_eq!(p.ppoll(&mut pf, Some(&ts), None), Ok(0));
    let bad = libc::timespec {
        tv_sec: -1,
        tv_nsec: 0,
    };
    assert_eq!(
        p.ppoll(&mut pf, Some(&bad), None),
        Err(scalevfs::Errno::EINVAL)
    );
    assert_eq!(
        p.epoll_pwait(ep, &mut evs, 0, None),
        Ok(0),
        "epoll_pwait is epoll_wait"
    );
}

#[test]
fn blocking_read_is_woken_by_writer_thread() {
    let o = ours();
    let p = &o.p;
    let mut fds = [0; 2];
    p.pipe2(&mut fds, 0).unwrap();
    let efd = p.eventfd(0, 0).unwrap();
    let ep = p.epoll_create1(0).unwrap();
    p.epoll_ctl(ep, ADD, efd, Some(&EpollEvent::new(IN, 42)))
        .unwrap();
    std::thread::scope(|sc| {
        sc.spawn(|| {
            // If a check here fails, close the write end on the way out: the blocking read
            // below then ends (EOF, and fails its check) instead of waiting forever.
            struct CloseOnPanic<'a>(&'a Process, i32);
            impl Drop for CloseOnPanic<'_> {
                fn drop(&mut self) {
                    if std::thread::panicking() {
                        let _ = self.0.close(self.1);
                    }
                }
            }
            let _close = CloseOnPanic(p, fds[1]);
            std::thread::sleep(Duration::from_millis(10));
            assert_eq!(p.write(fds[1], b"wake"), Ok(4));
            assert_eq!(p.write(efd, &3u64.to_ne_bytes()), Ok(8));
        });
        let mut b = [0u8; 16];
        // Bounded by the writer: it runs unconditionally after 10 ms (and closes its end if
        // it fails).
        assert_eq!(p.read(fds[0], &mut b), Ok(4));
        assert_eq!(&b[..4], b"wake");
        let mut evs = [EpollEvent::default(); 2];
        assert_eq!(p.epoll_wait(ep, &mut evs, 60_000), Ok(1));
        assert_eq!(evs[0], EpollEvent::new(IN, 42));
        assert_eq!(p.read(efd, &mut b), Ok(8));
        assert_eq!(u64::from_ne_bytes(b[..8].try_into().unwrap()), 3);
    });
    // readv/writev through the gathered path.
    use std::io::{IoSlice, IoSliceMut};
    assert_eq!(
        p.writev(fds[1], &[IoSlice::new(b"ab"), IoSlice::new(b"cde")]),
        Ok(5)
    );
    let (mut a, mut b) = ([0u8; 3], [0u8; 3]);
    assert_eq!(
        p.readv(
            fds[0],
            &mut [IoSliceMut::new(&mut a), IoSliceMut::new(&mut b)]
        ),
        Ok(5)
    );
    assert_eq!((&a, &b[..2]), (b"abc", &b"de"[..]));
    assert_eq!(p.pread64(fds[0], &mut a, 0), Err(scalevfs::Errno::ESPIPE));
    assert_eq!(p.fchdir(fds[0]), Err(scalevfs::Errno::ENOTDIR));
    assert_eq!(p.ftruncate(fds[1], 0), Err(scalevfs::Errno::EINVAL));
    assert_eq!(p.fsync(fds[1]), Err(scalevfs::Errno::EINVAL));
    assert_eq!(p.fallocate(fds[1], 0, 0, 1), Err(scalevfs::Errno::ESPIPE));
    assert_eq!(p.lseek(efd, 5, libc::SEEK_SET), Ok(0));
}

#[test]
fn fork_shares_descriptions_until_last_close() {
    let o = ours();
    let p = &o.p;
    let efd = p.eventfd(1, libc::EFD_NONBLOCK).unwrap();
    let ep = p.epoll_create1(0).unwrap();
    p.epoll_ctl(ep, ADD, efd, Some(&EpollEvent::new(IN, 5)))
        .unwrap();
    let child = p.fork();
    let mut evs = [EpollEvent::default(); 2];
    p.close(efd).unwrap();
    // The child still holds the description: still watched (level-triggered, count 1).
    assert_eq!(p.epoll_wait(ep, &mut evs, 0), Ok(1));
    child.exit();
    // The last close removed it from the epoll (an item kept alive would keep
    // reporting the non-zero counter).
    assert_eq!(p.epoll_wait(ep, &mut evs, 0), Ok(0));
}

#[test]
fn many_threads_churn_watched_fds() {
    // Threads create, register, signal, wait for and close eventfds and pipes without
    // EPOLL_CTL_DEL, some in one shared instance, while one thread closes and recreates
    // its own epoll instances. Every registration's event must be seen.
    let vfs = Vfs::new(VfsOptions::default());
    let p = Process::new(&vfs, Credentials::root());
    p.set_fd_limit(4096).unwrap();
    let shared = p.epoll_create1(0).unwrap();
    std::thread::scope(|sc| {
        for t in 0..8u64 {
            let p = &p;
            sc.spawn(move || {
                let own = p.epoll_create1(0).unwrap();
                let mut evs = [EpollEvent::default(); 8];
                for i in 0..300u64 {
                    let data = t << 32 | i;
                    let ep = if i % 2 == 0 { own } else { shared };
                    let efd = p.eventfd(0, libc::EFD_NONBLOCK).unwrap();
                    let mut fds = [0; 2];
                    p.pipe2(&mut fds, libc::O_NONBLOCK).unwrap();
                    p.epoll_ctl(ep, ADD, efd, Some(&EpollEvent::new(IN | ET, data)))
                        .unwrap();
                    p.epoll_ctl(own, ADD, fds[0], Some(&EpollEvent::new(IN, !data)))
                        .unwrap();
                    p.write(efd, &U64_1).unwrap();
                    p.write(fds[1], b"x").unwrap();
                    if ep == own {
                        let n = p.epoll_wait(own, &mut evs, 1000).unwrap();
                        let mut got: Vec<u64> = evs[..n].iter().map(|e| e.data).collect();
                        if got.len() < 2 {
                            let m = p.epoll_wait(own, &mut evs, 1000).unwrap();
                            got.extend(evs[..m].iter().map(|e| e.data));
                        }
                        got.sort_unstable();
                        let mut want = vec![data, !data];
                        want.sort_unstable();
                        assert_eq!(got, want);
                    } else {
                        let n = p.epoll_wait(own, &mut evs, 1000).unwrap();
                        assert_eq!(evs[..n].iter().map(|e| e.data).collect::<Vec<_>>(), [!data]);
                    }
                    p.close(fds[0]).unwrap();
                    p.close(fds[1]).unwrap();
                    p.close(efd).unwrap();
                }
                p.close(own).unwrap();
            });
        }
        sc.spawn(|| {
            for _ in 0..200 {
                let ep = p.epoll_create1(0).unwrap();
                let efd = p.eventfd(1, 0).unwrap();
                p.epoll_ctl(ep, ADD, efd, Some(&EpollEvent::new(IN, 1)))
                    .unwrap();
                p.epoll_ctl(shared, ADD, ep, Some(&EpollEvent::new(IN, 2)))
                    .unwrap();
                p.close(ep).unwrap();
                p.close(efd).unwrap();
            }
        });
    });
    // Nothing left registered in the shared instance: every watched file was closed.
    let mut evs = [EpollEvent::default(); 8];
    assert_eq!(p.epoll_wait(shared, &mut evs, 0), Ok(0));
    p.close(shared).unwrap();
    // Every anonymous file was released: the inode count of the internal mount is not
    // visible, but the tmpfs root holds nothing and the VFS tears down cleanly.
    assert_eq!(vfs.inode_count(), 1);
}

#[test]
fn descriptor_limits_and_unprivileged_pipe_size() {
    let vfs = Vfs::new(VfsOptions::default());
    let p = Process::new(&vfs, Credentials::user(1000, 1000));
    p.set_fd_limit(4).unwrap();
    let a = p.eventfd(0, 0).unwrap();
    let b = p.epoll_create1(0).unwrap();
    let c = p.eventfd(0, 0).unwrap();
    // One descriptor left: pipe2 needs two and must not leak the first.
    let mut fds = [-1; 2];
    assert_eq!(p.pipe2(&mut fds, 0), Err(scalevfs::Errno::EMFILE));
    assert_eq!(fds, [-1, -1]);
    let last = p.eventfd(0, 0).unwrap();
    p.close(last).unwrap();
    p.close(c).unwrap();
    p.pipe2(&mut fds, 0).unwrap();
    // Growing above pipe-max-size (1 MiB) needs CAP_SYS_RESOURCE; up to it is fine.
    let set = |n: i64| p.fcntl(fds[0], libc::F_SETPIPE_SZ, FcntlArg::Int(n));
    assert_eq!(set(1 << 21), Err(scalevfs::Errno::EPERM));
    assert_eq!(set(1 << 20), Ok(1 << 20));
    assert_eq!(p.fstat(fds[0]).map(|s| (s.uid, s.gid)), Ok((1000, 1000)));
    for fd in [a, b, fds[0], fds[1]] {
        p.close(fd).unwrap();
    }
}
