//! Blocked waiters: which ones a write wakes (EPOLLEXCLUSIVE) and what they see.

use super::*;

/// Two instances watch one eventfd, each with a thread blocked in `epoll_wait`; one
/// write. With `EPOLLEXCLUSIVE` only the first instance's item is queued (its callback
/// woke a waiter, which ends the exclusive wakeup); without it both are.
pub(super) fn exclusive_host(flags: u32) -> Vec<usize> {
    let mut h = Host::new();
    let e = h.eventfd(0, libc::EFD_NONBLOCK).unwrap();
    let eps = [h.epoll(), h.epoll()];
    for &ep in &eps {
        h.ctl(ep, ADD, e, IN | flags, ep as u64).unwrap();
    }
    let fds: Vec<i32> = eps.iter().map(|&ep| h.fds[ep]).collect();
    let threads: Vec<_> = fds
        .into_iter()
        .map(|fd| {
            std::thread::spawn(move || {
                let mut ev = [libc::epoll_event { events: 0, u64: 0 }; 4];
                // SAFETY: `ev` has room for 4 events; the fd outlives the thread.
                unsafe { libc::epoll_wait(fd, ev.as_mut_ptr(), 4, 400) as usize }
            })
        })
        .collect();
    std::thread::sleep(std::time::Duration::from_millis(100));
    h.write(e, &one(1)).unwrap();
    threads.into_iter().map(|t| t.join().unwrap()).collect()
}

pub(super) fn exclusive_ours(flags: u32) -> Vec<usize> {
    let ctx = EpollContext::with_accounting(Locking::Scalable);
    let e = EventFd::new(0, libc::EFD_NONBLOCK).unwrap();
    let eps: Vec<Arc<Epoll>> = (0..2).map(|_| Arc::new(Epoll::new(&ctx))).collect();
    for (i, ep) in eps.iter().enumerate() {
        let key = FdKey { file: 1, fd: 3 };
        ep.ctl(
            &ctx,
            ADD,
            key,
            &e.pollable(),
            EpollEvent::new(IN | flags, i as u64),
        )
        .unwrap();
    }
    let threads: Vec<_> = eps
        .iter()
        .map(|ep| {
            let ep = ep.clone();
            std::thread::spawn(move || {
                let mut ev = [EpollEvent::default(); 4];
                ep.wait(&mut ev, 400, None).unwrap()
            })
        })
        .collect();
    std::thread::sleep(std::time::Duration::from_millis(100));
    e.write(&one(1), None).unwrap();
    let r = threads.into_iter().map(|t| t.join().unwrap()).collect();
    drop((eps, e));
    assert_eq!(ctx.accounting().unwrap().live(), (0, 0));
    r
}

#[test]
fn diff_exclusive_wakes_one_instance() {
    for flags in [EPOLLEXCLUSIVE, 0] {
        let host = exclusive_host(flags);
        assert_eq!(host, exclusive_ours(flags), "flags {flags:#x}");
        assert_eq!(host.iter().sum::<usize>(), if flags == 0 { 2 } else { 1 });
    }
}

/// Blocking calls: a blocked reader is woken by a write, a blocked epoll_wait by an
/// event, and timeouts expire, on both sides.
#[test]
fn diff_blocking_wakeups() {
    // Host.
    let mut h = Host::new();
    let (r, w) = h.pipe(0).unwrap();
    let ep = h.epoll();
    h.ctl(ep, ADD, r, IN, 5).unwrap();
    let (epfd, wfd) = (h.fds[ep], h.fds[w]);
    let t = std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_millis(50));
        // SAFETY: writing one byte from a static buffer to an fd the test keeps open.
        unsafe { libc::write(wfd, b"z".as_ptr().cast(), 1) };
    });
    let mut ev = [libc::epoll_event { events: 0, u64: 0 }; 2];
    // SAFETY: `ev` has room for 2 events.
    let n = unsafe { libc::epoll_wait(epfd, ev.as_mut_ptr(), 2, -1) };
    t.join().unwrap();
    let host = (n, ev[0].events, h.wait(ep, 2, 10), h.read(r, 5));

    // Ours.
    let ctx = EpollContext::new(Locking::Scalable);
    let (rp, wp) = pipe2(0).unwrap();
    let e = Epoll::new(&ctx);
    e.ctl(
        &ctx,
        ADD,
        FdKey { file: 1, fd: 0 },
        &rp.pollable(),
        EpollEvent::new(IN, 5),
    )
    .unwrap();
    let t = std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_millis(50));
        wp.write(b"z", None).unwrap();
        wp
    });
    let mut evs = [EpollEvent::default(); 2];
    let n = e.wait(&mut evs, -1, None).unwrap();
    let _wp = t.join().unwrap();
    let mut evs2 = [EpollEvent::default(); 2];
    let again = e.wait(&mut evs2, 10, None).map(|n| {
        evs2[..n]
            .iter()
            .map(|x| (x.events, x.data))
            .collect::<Vec<_>>()
    });
    let mut b = [0u8; 5];
    let rd = rp.read(&mut b, None).map(|n| b[..n].to_vec());
    let ours = (n as i32, evs[0].events, again, rd);
    assert_eq!(host, ours);
}
