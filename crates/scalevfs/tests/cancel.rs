//! The cancellation context (`Process::with_cancel`): every blocking call it has gives up
//! with `EINTR` once its token has fired, a call that does not block is unaffected, and
//! the deprecated `_interruptible` names still behave the same way.

use scalevfs::{CancelToken, Credentials, EpollEvent, Errno, FcntlArg, Flock, Process, Vfs};

fn fired() -> CancelToken {
    let t = CancelToken::new();
    t.cancel();
    t
}

#[test]
fn a_fired_token_interrupts_every_blocking_call() {
    let vfs = Vfs::new(Default::default());
    let p = Process::new(&vfs, Credentials::root());
    let q = Process::new(&vfs, Credentials::root());
    let t = fired();
    let c = p.with_cancel(&t);
    let mut fds = [0; 2];
    p.pipe2(&mut fds, 0).unwrap();
    let mut buf = [0u8; 4];
    assert_eq!(c.read(fds[0], &mut buf), Err(Errno::EINTR));
    let ep = p.epoll_create1(0).unwrap();
    let ev = EpollEvent::new(libc::EPOLLIN.cast_unsigned(), 0);
    p.epoll_ctl(ep, libc::EPOLL_CTL_ADD, fds[0], Some(&ev))
        .unwrap();
    let mut evs = [EpollEvent::default(); 2];
    assert_eq!(c.epoll_wait(ep, &mut evs, -1), Err(Errno::EINTR));
    assert_eq!(c.epoll_pwait(ep, &mut evs, -1, None), Err(Errno::EINTR));
    let mut pf = [libc::pollfd {
        fd: fds[0],
        events: libc::POLLIN,
        revents: 0,
    }];
    assert_eq!(c.poll(&mut pf, -1), Err(Errno::EINTR));
    assert_eq!(c.ppoll(&mut pf, None, None), Err(Errno::EINTR));
    p.mknodat(libc::AT_FDCWD, "/fifo", libc::S_IFIFO | 0o644, 0)
        .unwrap();
    assert_eq!(
        c.openat(libc::AT_FDCWD, "/fifo", libc::O_RDONLY, 0),
        Err(Errno::EINTR)
    );
    // Lock waits: q holds both kinds of lock, p's waits are cancelled.
    p.write_file("/f", b"x").unwrap();
    let qf = q.open("/f", libc::O_RDWR, 0).unwrap();
    let pf_fd = p.open("/f", libc::O_RDWR, 0).unwrap();
    let mut wr = Flock {
        l_type: i16::try_from(libc::F_WRLCK).unwrap(),
        ..Flock::default()
    };
    q.fcntl(qf, libc::F_SETLK, FcntlArg::Flock(&mut wr))
        .unwrap();
    q.flock(qf, libc::LOCK_EX).unwrap();
    let mut want = wr;
    assert_eq!(
        c.fcntl(pf_fd, libc::F_SETLKW, FcntlArg::Flock(&mut want)),
        Err(Errno::EINTR)
    );
    assert_eq!(c.flock(pf_fd, libc::LOCK_SH), Err(Errno::EINTR));
    // What does not block is not interrupted.
    assert_eq!(c.write(fds[1], b"hi"), Ok(2));
    assert_eq!(c.read(fds[0], &mut buf), Ok(2));
    assert_eq!(c.fcntl(pf_fd, libc::F_GETFD, FcntlArg::None), Ok(0));
    assert_eq!(
        c.openat(libc::AT_FDCWD, "", libc::O_RDONLY, 0),
        Err(Errno::ENOENT)
    );
    assert!(std::ptr::eq(c.process(), &p) && c.token().is_cancelled());
}

#[test]
#[allow(deprecated)]
fn the_deprecated_names_are_the_same_calls() {
    let vfs = Vfs::new(Default::default());
    let p = Process::new(&vfs, Credentials::root());
    let t = fired();
    let mut fds = [0; 2];
    p.pipe2(&mut fds, 0).unwrap();
    let mut buf = [0u8; 4];
    assert_eq!(
        p.read_interruptible(fds[0], &mut buf, &t),
        Err(Errno::EINTR)
    );
    let mut pf = [libc::pollfd {
        fd: fds[0],
        events: libc::POLLIN,
        revents: 0,
    }];
    assert_eq!(p.poll_interruptible(&mut pf, -1, &t), Err(Errno::EINTR));
    assert_eq!(p.write_interruptible(fds[1], b"x", &t), Ok(1));
    assert_eq!(p.read_interruptible(fds[0], &mut buf, &t), Ok(1));
}
