use super::*;
use crate::sync::Arc;
use loom::thread;

type Shared = Arc<(PcpuRef, SlotArena)>;

/// Runs `other` on a second thread against a count in per-CPU mode with `count`
/// references (an arena of two CPUs; which CPU's counter a loom thread uses is `cpu`'s
/// fallback, and the protocol does not depend on it: a switch closes every CPU's counter),
/// while this thread runs `switch` under the count's lock. Returns both results and the
/// count, for the model's checks after the join.
fn race<R: Send + 'static, S>(
    count: u32,
    other: fn(&PcpuRef, &SlotArena) -> R,
    switch: impl FnOnce(&PcpuRef, &mut LockRefGuard<'_>, &SlotArena) -> S,
) -> (R, S, Shared) {
    let a = SlotArena::with_cpus(2);
    let r = PcpuRef::new(count);
    assert!(r.promote(&mut r.lock(), &a));
    let s: Shared = Arc::new((r, a));
    let s2 = s.clone();
    let t = thread::spawn(move || other(&s2.0, &s2.1));
    let switched = {
        let (r, a) = (&s.0, &s.1);
        switch(r, &mut r.lock(), a)
    };
    (t.join().unwrap(), switched, s)
}

/// A get and put on another thread race the switch to atomic mode and its fold: no count
/// is lost, the count is never zero while the owner holds its reference, and the owner's
/// put afterwards is the last.
#[test]
fn loom_get_put_vs_demote() {
    loom::model(|| {
        let ((), (), s) = race(
            1,
            |r, a| {
                r.get(Some(a));
                let put = r.put_or_lock(Some(a));
                assert!(put.is_none(), "the owner's reference is held");
            },
            |r, g, a| {
                assert!(r.demote(g, a));
                assert!(g.count() >= 1, "never zero while counted");
            },
        );
        let g =
            s.0.put_or_lock(Some(&s.1))
                .expect("the owner's put is the last");
        assert_eq!(g.count(), 1);
    });
}

/// The last reference is dropped on another thread while the owner's lock holder folds:
/// exactly one of them sees the count reach zero (the put under the lock, or the fold).
#[test]
fn loom_last_put_vs_fold() {
    loom::model(|| {
        let (put_was_last, folded_zero, s) = race(
            1,
            |r, a| match r.put_or_lock(Some(a)) {
                None => false,
                Some(mut g) => {
                    assert_eq!(g.count(), 1);
                    g.dec();
                    true
                }
            },
            |r, g, a| {
                assert!(r.demote(g, a));
                g.count() == 0
            },
        );
        assert!(
            folded_zero != put_was_last,
            "exactly one sees zero: fold={folded_zero} put={put_was_last}"
        );
        assert_eq!(s.0.lock().count(), 0);
    });
}

/// A get that read the per-CPU mode races a demote followed by a promote (the slot is
/// closed and opened again): the get lands in one of the modes and is counted once.
#[test]
fn loom_get_vs_demote_and_promote() {
    loom::model(|| {
        let (_, (), s) = race(
            1,
            |r, a| r.get(Some(a)),
            |r, g, a| {
                r.demote(g, a);
                assert!(r.promote(g, a));
            },
        );
        let (r, a) = (&s.0, &s.1);
        let mut g = r.lock();
        assert!(r.demote(&mut g, a));
        assert_eq!(g.count(), 2);
    });
}
