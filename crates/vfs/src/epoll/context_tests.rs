//! Tests of what an instance keeps of its [`EpollContext`] (module docs, "The context"):
//! no counted reference in the scalable design, the context's identity checked by
//! `ctl`, and the nesting checks under the caller's context, many threads at once.

use super::*;
use crate::eventfd::EventFd;
use std::collections::HashMap;

fn key(fd: i32) -> FdKey {
    FdKey { file: 0, fd }
}

fn add(c: &EpollContext, ep: &Epoll, fd: i32, t: &Arc<dyn Pollable>) -> Result<(), Errno> {
    ep.ctl(c, EPOLL_CTL_ADD, key(fd), t, EpollEvent::new(EPOLLIN, 0))
}

/// Creating and closing an instance of the scalable design changes neither count of the
/// context's `Arc` (no line every instance writes); the legacy ablation and the
/// accounting mode keep one strong reference per live instance.
#[test]
fn only_legacy_and_accounting_instances_count_the_context() {
    let cases = [
        (EpollContext::new(Locking::Scalable), false),
        (EpollContext::new(Locking::Legacy), true),
        (EpollContext::with_accounting(Locking::Scalable), true),
        (EpollContext::with_accounting(Locking::Legacy), true),
    ];
    for (c, counted) in cases {
        let eps: Vec<Epoll> = (0..3).map(|_| Epoll::new(&c)).collect();
        let want = if counted { 1 + eps.len() } else { 1 };
        assert_eq!(Arc::strong_count(&c), want, "{:?}", c.locking());
        assert_eq!(Arc::weak_count(&c), 0);
        drop(eps);
        assert_eq!(Arc::strong_count(&c), 1);
    }
}

/// `ctl` answers `EINVAL` for a context other than the instance's, and for an epoll
/// target made in another context, so that no epoll-to-epoll edge crosses contexts (each
/// has its own nesting lock). The instances' own context works for every op.
#[test]
fn ctl_refuses_a_foreign_context() {
    for locking in [Locking::Scalable, Locking::Legacy] {
        let (c1, c2) = (EpollContext::new(locking), EpollContext::new(locking));
        let (a, b) = (Epoll::new(&c1), Epoll::new(&c1));
        let foreign = Epoll::new(&c2);
        let e = EventFd::new(1, 0).unwrap();
        let (ep, bp, fp) = (e.pollable(), b.pollable(), foreign.pollable());
        assert_eq!(add(&c2, &a, 1, &ep), Err(Errno::EINVAL));
        assert_eq!(add(&c2, &a, 2, &bp), Err(Errno::EINVAL));
        assert_eq!(add(&c1, &a, 3, &fp), Err(Errno::EINVAL));
        assert_eq!(add(&c2, &foreign, 4, &a.pollable()), Err(Errno::EINVAL));
        assert!(a.instance().items.all().is_empty());
        add(&c1, &a, 1, &ep).unwrap();
        add(&c1, &a, 2, &bp).unwrap();
        add(&c2, &foreign, 5, &ep).unwrap();
        let none = EpollEvent::default();
        assert_eq!(
            a.ctl(&c2, EPOLL_CTL_DEL, key(1), &ep, none),
            Err(Errno::EINVAL)
        );
        a.ctl(&c1, EPOLL_CTL_MOD, key(1), &ep, EpollEvent::new(EPOLLIN, 7))
            .unwrap();
        let mut ev = [EpollEvent::default(); 4];
        assert_eq!(a.wait(&mut ev, 0, None), Ok(1));
        assert_eq!(ev[0], EpollEvent::new(EPOLLIN, 7));
        a.ctl(&c1, EPOLL_CTL_DEL, key(1), &ep, none).unwrap();
        a.ctl(&c1, EPOLL_CTL_DEL, key(2), &bp, none).unwrap();
    }
}

/// A scalable instance keeps no pointer into its context: after the context is gone its
/// nested registrations still deliver, `ctl` with any other context is `EINVAL`, and
/// closing the instances removes every item from the watched file.
#[test]
fn instances_outlive_their_context() {
    let c = EpollContext::new(Locking::Scalable);
    let (outer, inner) = (Epoll::new(&c), Epoll::new(&c));
    let e = EventFd::new(0, 0).unwrap();
    let watched = e.pollable();
    add(&c, &inner, 1, &watched).unwrap();
    add(&c, &outer, 2, &inner.pollable()).unwrap();
    drop(c);
    e.write(&1u64.to_ne_bytes(), None).unwrap();
    let mut ev = [EpollEvent::default(); 2];
    assert_eq!(outer.wait(&mut ev, 0, None), Ok(1));
    assert_eq!(inner.wait(&mut ev, 0, None), Ok(1));
    let other = EpollContext::new(Locking::Scalable);
    assert_eq!(add(&other, &inner, 3, &watched), Err(Errno::EINVAL));
    drop((outer, inner));
    assert!(watched.ep_links().unwrap().is_empty());
}

/// The longest chain of epoll-to-epoll edges below `ep`, or `None` on a cycle.
fn longest_chain(
    ep: &EventPoll,
    on_path: &mut Vec<*const EventPoll>,
    memo: &mut HashMap<*const EventPoll, usize>,
) -> Option<usize> {
    let me = ep as *const EventPoll;
    if on_path.contains(&me) {
        return None;
    }
    if let Some(&d) = memo.get(&me) {
        return Some(d);
    }
    on_path.push(me);
    let mut depth = 0;
    for item in ep.items.all() {
        if let Some(child) = item.target.as_epoll() {
            depth = depth.max(longest_chain(child, on_path, memo)? + 1);
        }
    }
    on_path.pop();
    memo.insert(me, depth);
    Some(depth)
}

const POOL: usize = 8;
const THREADS: usize = 8;
const STEPS: usize = 3000;

/// Many threads insert instances of one pool into each other (and delete, and close and
/// replace instances) under one context that no instance counts: every insertion that
/// could close a cycle or make a chain too deep meets the others under the context's
/// nesting lock, so the graph left at the end has no cycle and no chain of more than
/// `EP_MAX_NESTS` edges, and some insertions were refused with `ELOOP`.
fn nesting_stress(c: Arc<EpollContext>) {
    let pool: Vec<Mutex<Arc<Epoll>>> = (0..POOL)
        .map(|_| Mutex::new(Arc::new(Epoll::new(&c))))
        .collect();
    let refused = AtomicUsize::new(0);
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let (c, pool, refused) = (&c, &pool, &refused);
            s.spawn(move || {
                let mut x = 0x9e37_79b9_7f4a_7c15u64 ^ (t as u64 + 1);
                for _ in 0..STEPS {
                    // xorshift64: a cheap deterministic sequence per thread.
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    let (i, j) = (
                        (x % POOL as u64) as usize,
                        ((x >> 8) % POOL as u64) as usize,
                    );
                    let outer = pool[i].lock().clone();
                    let inner = pool[j].lock().clone();
                    let k = FdKey {
                        file: Arc::as_ptr(&inner) as usize,
                        fd: j as i32,
                    };
                    let target = inner.pollable();
                    match (x >> 16) % 8 {
                        0 => {
                            let fresh = Arc::new(Epoll::new(c));
                            drop(std::mem::replace(&mut *pool[i].lock(), fresh));
                        }
                        1..=2 => {
                            let r = outer.ctl(c, EPOLL_CTL_DEL, k, &target, EpollEvent::default());
                            match r {
                                Ok(()) | Err(Errno::ENOENT) => {}
                                Err(Errno::EINVAL) => assert_eq!(i, j),
                                Err(e) => panic!("unexpected {e:?}"),
                            }
                        }
                        _ => {
                            let ev = EpollEvent::new(EPOLLIN, 0);
                            match outer.ctl(c, EPOLL_CTL_ADD, k, &target, ev) {
                                Ok(()) | Err(Errno::EEXIST) => {}
                                Err(Errno::EINVAL) => assert_eq!(i, j),
                                Err(Errno::ELOOP) => {
                                    refused.fetch_add(1, Ordering::Relaxed);
                                }
                                Err(e) => panic!("unexpected {e:?}"),
                            }
                        }
                    }
                }
            });
        }
    });
    assert!(
        refused.load(Ordering::Relaxed) > 0,
        "no insertion was refused"
    );
    let mut memo = HashMap::new();
    for slot in &pool {
        let ep = slot.lock().clone();
        let depth = longest_chain(ep.instance(), &mut Vec::new(), &mut memo);
        assert!(depth.is_some_and(|d| d <= EP_MAX_NESTS), "{depth:?}");
    }
    drop(pool);
}

#[test]
fn stress_nesting_scalable_uncounted() {
    nesting_stress(EpollContext::new(Locking::Scalable));
}

#[test]
fn stress_nesting_legacy() {
    nesting_stress(EpollContext::new(Locking::Legacy));
}

/// With accounting on, the stress also frees everything it allocated (the leftover
/// graph is acyclic, so closing the pool's instances frees every instance and item).
#[test]
fn stress_nesting_frees_everything() {
    let c = EpollContext::with_accounting(Locking::Scalable);
    nesting_stress(c.clone());
    assert_eq!(c.accounting().unwrap().live(), (0, 0), "leak");
}
