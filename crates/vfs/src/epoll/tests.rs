//! Unit tests of epoll's waiting and teardown (the semantics are compared with the host
//! kernel in `tests/epoll_vs_host.rs`).

use super::*;
use crate::eventfd::EventFd;
use crate::pipe::pipe2;
use crate::poll::{poll, PollFd, PollTarget};
use std::time::{Duration, Instant};

fn key(fd: i32) -> FdKey {
    FdKey { file: 0, fd }
}

fn ctx() -> Arc<EpollContext> {
    EpollContext::with_accounting(Locking::Scalable)
}

fn signal(e: &EventFd) {
    e.write(&1u64.to_ne_bytes(), None).unwrap();
}

#[test]
fn timeouts_and_cancel() {
    let c = ctx();
    let ep = Epoll::new(&c);
    let mut ev = [EpollEvent::default(); 2];
    assert_eq!(ep.wait(&mut [], 0, None), Err(Errno::EINVAL));
    assert_eq!(ep.wait(&mut ev, 0, None), Ok(0));
    let t0 = Instant::now();
    assert_eq!(ep.wait(&mut ev, 30, None), Ok(0));
    assert!(t0.elapsed() >= Duration::from_millis(30));
    // A cancel from another thread interrupts an infinite wait.
    let tok = CancelToken::new();
    let t2 = tok.clone();
    let h = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(20));
        t2.cancel();
    });
    assert_eq!(ep.wait(&mut ev, -1, Some(&tok)), Err(Errno::EINTR));
    h.join().unwrap();
    // Available events win over a pending cancel.
    let e = EventFd::new(1, 0).unwrap();
    ep.ctl(
        &c,
        EPOLL_CTL_ADD,
        key(1),
        &e.pollable(),
        EpollEvent::new(EPOLLIN, 9),
    )
    .unwrap();
    assert_eq!(ep.wait(&mut ev, -1, Some(&tok)), Ok(1));
    // A deadline token gives EINTR, not a timeout.
    let ep2 = Epoll::new(&c);
    let tok = CancelToken::with_deadline(Instant::now() + Duration::from_millis(10));
    assert_eq!(ep2.wait(&mut ev, -1, Some(&tok)), Err(Errno::EINTR));
    drop((ep, ep2, e));
    assert_eq!(c.accounting().unwrap().live(), (0, 0));
}

#[test]
fn nested_wakeup_reaches_a_blocked_outer_waiter() {
    let c = ctx();
    let outer = Arc::new(Epoll::new(&c));
    let inner = Epoll::new(&c);
    let e = EventFd::new(0, 0).unwrap();
    inner
        .ctl(
            &c,
            EPOLL_CTL_ADD,
            key(1),
            &e.pollable(),
            EpollEvent::new(EPOLLIN, 1),
        )
        .unwrap();
    outer
        .ctl(
            &c,
            EPOLL_CTL_ADD,
            key(2),
            &inner.pollable(),
            EpollEvent::new(EPOLLIN, 2),
        )
        .unwrap();
    let o = outer.clone();
    let h = std::thread::spawn(move || {
        let mut ev = [EpollEvent::default(); 2];
        let n = o.wait(&mut ev, 60_000, None).unwrap();
        ev[..n].to_vec()
    });
    std::thread::sleep(Duration::from_millis(20));
    signal(&e);
    assert_eq!(h.join().unwrap(), vec![EpollEvent::new(EPOLLIN, 2)]);
    drop((outer, inner, e));
    assert_eq!(c.accounting().unwrap().live(), (0, 0));
}

#[test]
fn poll_blocks_until_ready() {
    let (r, w) = pipe2(0).unwrap();
    let rp = r.pollable();
    let h = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(20));
        drop(w);
    });
    let mut fds = [PollFd::new(PollTarget::File(rp), EPOLLIN as u16)];
    assert_eq!(poll(&mut fds, 60_000, None), Ok(1));
    assert_eq!(fds[0].revents as u32, EPOLLHUP);
    h.join().unwrap();
    let (r, _w) = pipe2(0).unwrap();
    let mut fds = [PollFd::new(PollTarget::File(r.pollable()), EPOLLIN as u16)];
    assert_eq!(poll(&mut fds, 10, None), Ok(0));
    let tok = CancelToken::new();
    tok.cancel();
    assert_eq!(poll(&mut fds, -1, Some(&tok)), Err(Errno::EINTR));
}

/// An instance watching ten ready eventfds.
fn watch_ten(c: &Arc<EpollContext>, sharded: bool) -> (Epoll, Vec<EventFd>) {
    let ep = Epoll::new(c);
    if sharded {
        // As when two threads meet on it: its items are counted per CPU (whatever the
        // number of CPUs, which is one under Miri).
        ep.ep.item_refs.spread();
    }
    let fds: Vec<EventFd> = (0..10).map(|_| EventFd::new(1, 0).unwrap()).collect();
    for (i, f) in fds.iter().enumerate() {
        let ev = EpollEvent::new(EPOLLIN, 0);
        ep.ctl(c, EPOLL_CTL_ADD, key(i as i32), &f.pollable(), ev)
            .unwrap();
    }
    (ep, fds)
}

/// Both teardown orders, with items still registered, free everything exactly once
/// (the items' count in one word, or per CPU).
#[test]
fn teardown_orders_free_everything() {
    let designs = [
        (Locking::Scalable, false),
        (Locking::Scalable, true),
        (Locking::Legacy, false),
    ];
    for (locking, sharded) in designs {
        let c = EpollContext::with_accounting(locking);
        let a = c.accounting().unwrap();
        // Watched files first, then the instance.
        let (ep, fds) = watch_ten(&c, sharded);
        assert_eq!(ep.ep.item_refs.is_spread(), sharded);
        assert_eq!(a.live(), (1, 10));
        drop(fds);
        assert_eq!(a.live(), (1, 0));
        drop(ep);
        assert_eq!(a.live(), (0, 0));
        // Instance first, then the files (which must no longer see it).
        let (ep, fds) = watch_ten(&c, sharded);
        drop(ep);
        assert_eq!(a.live(), (0, 0));
        assert!(fds
            .iter()
            .all(|f| f.pollable().ep_links().unwrap().is_empty()));
        drop(fds);
        assert_eq!(a.instances_allocated.load(Ordering::Relaxed), 2);
        assert_eq!(a.items_freed.load(Ordering::Relaxed), 20);
    }
}

/// One file watched by several instances, closed without DEL.
#[test]
fn file_in_many_instances() {
    let c = ctx();
    let eps: Vec<Epoll> = (0..5).map(|_| Epoll::new(&c)).collect();
    let e = EventFd::new(0, 0).unwrap();
    for ep in &eps {
        ep.ctl(
            &c,
            EPOLL_CTL_ADD,
            key(3),
            &e.pollable(),
            EpollEvent::new(EPOLLIN, 0),
        )
        .unwrap();
    }
    signal(&e);
    let mut ev = [EpollEvent::default(); 4];
    for ep in &eps {
        assert_eq!(ep.wait(&mut ev, 0, None), Ok(1));
    }
    drop(e);
    for ep in &eps {
        assert_eq!(ep.wait(&mut ev, 0, None), Ok(0));
    }
    assert_eq!(c.accounting().unwrap().live(), (5, 0));
    drop(eps);
    assert_eq!(c.accounting().unwrap().live(), (0, 0));
}

/// `epoll_wait` in one thread, ADD in another: the registration made while the waiter
/// sleeps delivers its already-pending event.
#[test]
fn add_while_waiting() {
    let c = ctx();
    let ep = Arc::new(Epoll::new(&c));
    let e = EventFd::new(1, 0).unwrap();
    let ep2 = ep.clone();
    let h = std::thread::spawn(move || {
        let mut ev = [EpollEvent::default(); 1];
        ep2.wait(&mut ev, 60_000, None).map(|n| ev[..n].to_vec())
    });
    std::thread::sleep(Duration::from_millis(20));
    ep.ctl(
        &c,
        EPOLL_CTL_ADD,
        key(1),
        &e.pollable(),
        EpollEvent::new(EPOLLIN, 4),
    )
    .unwrap();
    assert_eq!(h.join().unwrap(), Ok(vec![EpollEvent::new(EPOLLIN, 4)]));
}

/// The scalable instance spreads its items over four shards per CPU (rounded up to a power
/// of two), the legacy one keeps them in one; either way every key is found again by
/// `EPOLL_CTL_ADD` (`EEXIST`), `EPOLL_CTL_MOD` and `EPOLL_CTL_DEL`, and a DEL leaves the
/// map empty.
#[test]
fn item_map_shards() {
    for locking in [Locking::Scalable, Locking::Legacy] {
        let c = EpollContext::with_accounting(locking);
        let ep = Epoll::new(&c);
        let want = match locking {
            Locking::Legacy => 1,
            Locking::Scalable => (scalevfs_primitives::cpu::num_cpus() * 4)
                .next_power_of_two()
                .min(items::MAX_SHARDS),
        };
        assert_eq!(ep.instance().items.shard_count(), want);
        let files: Vec<EventFd> = (0..256).map(|_| EventFd::new(0, 0).unwrap()).collect();
        let keys = |i: usize| FdKey {
            file: i * 64,
            fd: i as i32,
        };
        for (i, f) in files.iter().enumerate() {
            let ev = EpollEvent::new(EPOLLIN, i as u64);
            ep.ctl(&c, EPOLL_CTL_ADD, keys(i), &f.pollable(), ev)
                .unwrap();
        }
        let mut used = 0;
        ep.instance()
            .items
            .for_each_shard(|m| used += usize::from(!m.is_empty()));
        assert_eq!(ep.instance().items.all().len(), 256);
        assert!(used > want / 2, "{used} of {want} shards used");
        for (i, f) in files.iter().enumerate() {
            let ev = EpollEvent::new(EPOLLIN, i as u64);
            let t = f.pollable();
            assert_eq!(
                ep.ctl(&c, EPOLL_CTL_ADD, keys(i), &t, ev),
                Err(Errno::EEXIST)
            );
            ep.ctl(&c, EPOLL_CTL_MOD, keys(i), &t, ev).unwrap();
            ep.ctl(&c, EPOLL_CTL_DEL, keys(i), &t, ev).unwrap();
            assert_eq!(
                ep.ctl(&c, EPOLL_CTL_DEL, keys(i), &t, ev),
                Err(Errno::ENOENT)
            );
        }
        assert!(ep.instance().items.all().is_empty());
    }
}
