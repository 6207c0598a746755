use super::*;
use crate::sync::{Arc, AtomicU32, Ordering};
use loom::thread;

/// A fast-path get/put pair while another thread holds the lock and changes the count:
/// no update is lost.
#[test]
fn loom_get_put_while_locked() {
    loom::model(|| {
        let r = Arc::new(LockRef::new(2));
        let r2 = r.clone();
        let t = thread::spawn(move || {
            let mut g = r2.lock();
            g.inc();
        });
        r.get();
        if r.put_return().is_none() {
            r.lock().dec();
        }
        t.join().unwrap();
        assert_eq!(r.count(), 3);
    });
}

/// A fast path and a thread that locks, unlocks and then changes the count: with the
/// loom budget of 2, the fast path can wait once, lose its compare-exchange and fall
/// back to the lock; every mix of waiting, retrying and falling back keeps the count.
#[test]
fn loom_fallback_keeps_count() {
    loom::model(|| {
        let r = Arc::new(LockRef::new(1));
        let r2 = r.clone();
        let t = thread::spawn(move || r2.get());
        drop(r.lock());
        r.get();
        t.join().unwrap();
        assert_eq!(r.count(), 3);
    });
}

/// put_or_lock of the last reference races get_not_dead: either the put wins (marks
/// dead, the get fails) or the get wins first (the put is lockless, the object lives).
#[test]
fn loom_put_or_lock_vs_get_not_dead() {
    loom::model(|| {
        let r = Arc::new(LockRef::new(1));
        let r2 = r.clone();
        let t = thread::spawn(move || match r2.put_or_lock() {
            None => false,
            Some(mut g) => {
                assert_eq!(g.count(), 1);
                g.dec();
                g.mark_dead();
                true
            }
        });
        let got = r.get_not_dead();
        let killed = t.join().unwrap();
        assert!(killed != got, "exactly one wins: killed={killed} got={got}");
        if killed {
            assert!(r.is_dead());
        } else {
            assert_eq!(r.count(), 1);
        }
    });
}

/// The unlock's Release pairs with the fast path's Acquire: a get_not_zero that sees
/// the count a lock holder revived also sees what the holder wrote before unlocking.
#[test]
fn loom_unlock_publishes_to_fast_path() {
    loom::model(|| {
        let r = Arc::new(LockRef::new(0));
        let data = Arc::new(AtomicU32::new(0));
        let (r2, d2) = (r.clone(), data.clone());
        let t = thread::spawn(move || {
            let mut g = r2.lock();
            d2.store(1, Ordering::Relaxed);
            g.set_count(1);
        });
        if r.get_not_zero() {
            assert_eq!(data.load(Ordering::Relaxed), 1);
        }
        t.join().unwrap();
    });
}

/// A lockless put's Release pairs with the lock's Acquire: whichever thread drops the
/// last reference under the lock sees the other holder's accesses.
#[test]
fn loom_put_publishes_to_last_dput() {
    fn holder(r: &LockRef, mine: &AtomicU32, other: &AtomicU32) -> bool {
        mine.store(1, Ordering::Relaxed);
        match r.put_or_lock() {
            None => false,
            Some(mut g) => {
                // We are last: the other put happened before, and so did its store.
                assert_eq!(g.count(), 1);
                assert_eq!(other.load(Ordering::Relaxed), 1);
                g.dec();
                g.mark_dead();
                true
            }
        }
    }
    loom::model(|| {
        let r = Arc::new(LockRef::new(2));
        let a = Arc::new(AtomicU32::new(0));
        let b = Arc::new(AtomicU32::new(0));
        let (r2, a2, b2) = (r.clone(), a.clone(), b.clone());
        let t = thread::spawn(move || holder(&r2, &b2, &a2));
        let me = holder(&r, &a, &b);
        let other = t.join().unwrap();
        assert!(me != other, "exactly one is last");
        assert!(r.is_dead());
    });
}
