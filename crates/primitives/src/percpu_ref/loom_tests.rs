use super::*;
use crate::sync::Arc;
use loom::thread;

/// A count in per-CPU mode with `count` references, on an arena of two CPUs. Which CPU's
/// counter a loom thread uses is `cpu`'s fallback; the protocol does not depend on it
/// (a switch closes every CPU's counter).
fn promoted(count: u32) -> Arc<(PcpuRef, SlotArena)> {
    let a = SlotArena::with_cpus(2);
    let r = PcpuRef::new(count);
    assert!(r.promote(&mut r.lock(), &a));
    Arc::new((r, a))
}

/// A get and put on another thread race the switch to atomic mode and its fold: no count
/// is lost, the count is never zero while the owner holds its reference, and the owner's
/// put afterwards is the last.
#[test]
fn loom_get_put_vs_demote() {
    loom::model(|| {
        let s = promoted(1);
        let s2 = s.clone();
        let t = thread::spawn(move || {
            let (r, a) = (&s2.0, &s2.1);
            r.get(Some(a));
            assert!(
                r.put_or_lock(Some(a)).is_none(),
                "the owner's reference is held"
            );
        });
        {
            let (r, a) = (&s.0, &s.1);
            let mut g = r.lock();
            assert!(r.demote(&mut g, a));
            assert!(g.count() >= 1, "never zero while counted");
        }
        t.join().unwrap();
        let (r, a) = (&s.0, &s.1);
        let g = r.put_or_lock(Some(a)).expect("the owner's put is the last");
        assert_eq!(g.count(), 1);
    });
}

/// The last reference is dropped on another thread while the owner's lock holder folds:
/// exactly one of them sees the count reach zero (the put under the lock, or the fold).
#[test]
fn loom_last_put_vs_fold() {
    loom::model(|| {
        let s = promoted(1);
        let s2 = s.clone();
        let t = thread::spawn(move || {
            let (r, a) = (&s2.0, &s2.1);
            match r.put_or_lock(Some(a)) {
                None => false,
                Some(mut g) => {
                    assert_eq!(g.count(), 1);
                    g.dec();
                    true
                }
            }
        });
        let folded_zero = {
            let (r, a) = (&s.0, &s.1);
            let mut g = r.lock();
            assert!(r.demote(&mut g, a));
            g.count() == 0
        };
        let put_was_last = t.join().unwrap();
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
        let s = promoted(1);
        let s2 = s.clone();
        let t = thread::spawn(move || {
            let (r, a) = (&s2.0, &s2.1);
            r.get(Some(a));
        });
        {
            let (r, a) = (&s.0, &s.1);
            let mut g = r.lock();
            r.demote(&mut g, a);
            assert!(r.promote(&mut g, a));
        }
        t.join().unwrap();
        let (r, a) = (&s.0, &s.1);
        let mut g = r.lock();
        assert!(r.demote(&mut g, a));
        assert_eq!(g.count(), 2);
    });
}
