//! Many-thread stress: churn threads create thousands of eventfds and pipes, register
//! each in a shared instance and in their own instance, signal it, wait for it on their
//! own instance (no event may be lost for a live registration), DEL every third from the
//! shared instance, then close it without DEL; meanwhile waiter threads sit in `epoll_wait` on the shared instances and a closer
//! thread keeps closing and replacing them. At the end every instance and item
//! allocated must have been freed.

use super::*;
use crate::eventfd::EventFd;
use crate::pipe::pipe2;
use std::sync::atomic::AtomicBool;

const CHURNERS: usize = 16;
const PER_CHURNER: usize = 1000;
const SHARED: usize = 4;

fn run(locking: Locking) {
    let c = EpollContext::with_accounting(locking);
    let shared: Vec<Mutex<Arc<Epoll>>> = (0..SHARED)
        .map(|_| Mutex::new(Arc::new(Epoll::new(&c))))
        .collect();
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        let mut churners = Vec::new();
        for t in 0..CHURNERS {
            let (c, shared) = (&c, &shared);
            churners.push(s.spawn(move || {
                let mine = Epoll::new(c);
                let mut ev = [EpollEvent::default(); 4];
                for i in 0..PER_CHURNER {
                    let id = (t * PER_CHURNER + i) as u64;
                    // Alternate eventfds and pipes; keep the write end of a pipe alive
                    // until the read end is closed.
                    let (file, signal): (Box<dyn std::any::Any>, Arc<dyn Pollable>) = if i % 2 == 0
                    {
                        let e = EventFd::new(0, 0).unwrap();
                        e.write(&1u64.to_ne_bytes(), None).unwrap();
                        let p = e.pollable();
                        (Box::new(e), p)
                    } else {
                        let (r, w) = pipe2(0).unwrap();
                        w.write(b"x", None).unwrap();
                        let p = r.pollable();
                        (Box::new((r, w)), p)
                    };
                    let sh = shared[(t + i) % SHARED].lock().clone();
                    let k = FdKey {
                        file: id as usize,
                        fd: 3,
                    };
                    sh.ctl(c, EPOLL_CTL_ADD, k, &signal, EpollEvent::new(EPOLLIN, id))
                        .unwrap();
                    mine.ctl(
                        c,
                        EPOLL_CTL_ADD,
                        k,
                        &signal,
                        EpollEvent::new(EPOLLIN | EPOLLET, id),
                    )
                    .unwrap();
                    // Our own registration is live: its event must arrive.
                    let n = mine.wait(&mut ev, 10_000, None).unwrap();
                    assert_eq!(n, 1, "event lost for {id}");
                    assert_eq!(ev[0], EpollEvent::new(EPOLLIN, id));
                    if i % 3 == 0 {
                        // DEL from the shared instance while its waiters scan it (our
                        // `Arc` keeps the instance open even if the closer replaced it).
                        sh.ctl(c, EPOLL_CTL_DEL, k, &signal, EpollEvent::default())
                            .unwrap();
                    }
                    drop(sh);
                    drop(signal);
                    // Close without DEL (from both instances).
                    drop(file);
                    assert_eq!(mine.wait(&mut ev, 0, None), Ok(0));
                }
            }));
        }
        for t in 0..2 {
            let (shared, stop) = (&shared, &stop);
            s.spawn(move || {
                let mut ev = [EpollEvent::default(); 16];
                let mut i = t;
                while !stop.load(Ordering::Relaxed) {
                    let ep = shared[i % SHARED].lock().clone();
                    ep.wait(&mut ev, 1, None).unwrap();
                    i += 1;
                }
            });
        }
        let (c, shared, stop) = (&c, &shared, &stop);
        s.spawn(move || {
            let mut i = 0;
            while !stop.load(Ordering::Relaxed) {
                // Close a shared instance (its items without DEL) and replace it.
                let old =
                    std::mem::replace(&mut *shared[i % SHARED].lock(), Arc::new(Epoll::new(c)));
                drop(old);
                i += 1;
                std::thread::yield_now();
            }
        });
        let results: Vec<_> = churners.into_iter().map(|h| h.join()).collect();
        stop.store(true, Ordering::Relaxed);
        for r in results {
            if let Err(p) = r {
                std::panic::resume_unwind(p);
            }
        }
    });
    drop(shared);
    let a = c.accounting().unwrap();
    assert_eq!(a.live(), (0, 0), "leak");
    assert_eq!(
        a.items_allocated.load(Ordering::Relaxed),
        CHURNERS * PER_CHURNER * 2
    );
}

#[test]
fn stress_churn_scalable() {
    run(Locking::Scalable);
}

#[test]
fn stress_churn_legacy() {
    run(Locking::Legacy);
}
