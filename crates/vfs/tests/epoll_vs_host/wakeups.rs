//! Blocked waiters: which ones a write wakes (EPOLLEXCLUSIVE) and what they see.

use super::*;

/// The event data of the per-instance "release" eventfds below; the watched eventfd's
/// items carry small numbers.
const RELEASE: u64 = 1 << 40;

/// Whether thread `tid` of this process sleeps inside one of the system calls `nrs`
/// (`/proc/self/task/TID/syscall` names the call of a blocked thread, and says `running`
/// otherwise).
fn sleeps_in(tid: libc::pid_t, nrs: &[libc::c_long]) -> bool {
    let path = format!("/proc/self/task/{tid}/syscall");
    let s = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let nr = s.split_whitespace().next().and_then(|n| n.parse().ok());
    nr.is_some_and(|nr| nrs.contains(&nr))
}

/// Waits until every thread of `tids` sleeps inside one of `nrs`, seen twice 20 ms apart
/// (a thread briefly asleep on some lock on its way into the wait does not count), for
/// 60 s at most. An `EPOLLEXCLUSIVE` wakeup depends on who is asleep in `epoll_wait` when
/// the event comes: an instance that nobody waits on yet queues the item without ending
/// the wakeup, so the next instance gets it too.
fn wait_until_asleep(tids: &[libc::pid_t], nrs: &[libc::c_long]) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let all = || tids.iter().all(|&t| sleeps_in(t, nrs));
    loop {
        if all() {
            std::thread::sleep(std::time::Duration::from_millis(20));
            if all() {
                return;
            }
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the waiters {tids:?} never went to sleep in {nrs:?}"
        );
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}

/// Two instances watch one eventfd, each with a thread blocked in `epoll_wait`; one
/// write. With `EPOLLEXCLUSIVE` only the first instance's item is queued (its callback
/// woke a waiter, which ends the exclusive wakeup); without it both are. Returns, per
/// instance, whether its waiter saw the write. Once both threads are asleep and the
/// write is made, a per-instance release eventfd ends the wait of a thread that the
/// write did not wake (no timeout to race).
pub(super) fn exclusive_host(flags: u32) -> Vec<usize> {
    let mut h = Host::new();
    let e = h.eventfd(0, libc::EFD_NONBLOCK).unwrap();
    let eps = [h.epoll(), h.epoll()];
    let mut releases = Vec::new();
    for &ep in &eps {
        h.ctl(ep, ADD, e, IN | flags, ep as u64).unwrap();
        let r = h.eventfd(0, libc::EFD_NONBLOCK).unwrap();
        h.ctl(ep, ADD, r, IN, RELEASE).unwrap();
        releases.push(r);
    }
    let fds: Vec<i32> = eps.iter().map(|&ep| h.fds[ep]).collect();
    let (tid_tx, tid_rx) = std::sync::mpsc::channel();
    let threads: Vec<_> = fds
        .into_iter()
        .map(|fd| {
            let tid_tx = tid_tx.clone();
            std::thread::spawn(move || {
                // SAFETY: gettid has no preconditions.
                tid_tx.send(unsafe { libc::gettid() }).unwrap();
                let mut ev = [libc::epoll_event { events: 0, u64: 0 }; 4];
                // SAFETY: `ev` has room for 4 events; the fd outlives the thread.
                let n = unsafe { libc::epoll_wait(fd, ev.as_mut_ptr(), 4, -1) };
                assert!(n > 0, "epoll_wait: {n}");
                ev[..n as usize].iter().filter(|e| e.u64 != RELEASE).count()
            })
        })
        .collect();
    let tids: Vec<libc::pid_t> = threads.iter().map(|_| tid_rx.recv().unwrap()).collect();
    let epoll_waits = [
        libc::SYS_epoll_wait,
        libc::SYS_epoll_pwait,
        libc::SYS_epoll_pwait2,
    ];
    wait_until_asleep(&tids, &epoll_waits);
    h.write(e, &one(1)).unwrap();
    for r in releases {
        h.write(r, &one(1)).unwrap();
    }
    threads.into_iter().map(|t| t.join().unwrap()).collect()
}

pub(super) fn exclusive_ours(flags: u32) -> Vec<usize> {
    let ctx = EpollContext::with_accounting(Locking::Scalable);
    let e = EventFd::new(0, libc::EFD_NONBLOCK).unwrap();
    let eps: Vec<Arc<Epoll>> = (0..2).map(|_| Arc::new(Epoll::new(&ctx))).collect();
    let releases: Vec<EventFd> = (0..2)
        .map(|_| EventFd::new(0, libc::EFD_NONBLOCK).unwrap())
        .collect();
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
        let key = FdKey { file: 2, fd: 4 };
        let release = releases[i].pollable();
        ep.ctl(&ctx, ADD, key, &release, EpollEvent::new(IN, RELEASE))
            .unwrap();
    }
    let (tid_tx, tid_rx) = std::sync::mpsc::channel();
    let threads: Vec<_> = eps
        .iter()
        .map(|ep| {
            let (ep, tid_tx) = (ep.clone(), tid_tx.clone());
            std::thread::spawn(move || {
                // SAFETY: gettid has no preconditions.
                tid_tx.send(unsafe { libc::gettid() }).unwrap();
                let mut ev = [EpollEvent::default(); 4];
                let n = ep.wait(&mut ev, -1, None).unwrap();
                ev[..n].iter().filter(|e| e.data != RELEASE).count()
            })
        })
        .collect();
    let tids: Vec<libc::pid_t> = threads.iter().map(|_| tid_rx.recv().unwrap()).collect();
    // Our waiters sleep by parking their thread: a futex wait.
    wait_until_asleep(&tids, &[libc::SYS_futex]);
    e.write(&one(1), None).unwrap();
    for r in &releases {
        r.write(&one(1), None).unwrap();
    }
    let r = threads.into_iter().map(|t| t.join().unwrap()).collect();
    drop((eps, e, releases));
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
