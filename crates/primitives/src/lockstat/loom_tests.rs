use super::*;
use crate::sync::{AtomicUsize, Ordering};
use loom::cell::UnsafeCell as LoomUnsafeCell;
use loom::sync::Arc;

/// Two threads increment a loom-tracked cell under the mutex (one by `try_lock` when it
/// can): loom reports a data race if a guard's drop failed to unlock after the hold or
/// the next holder were not ordered after it.
#[test]
fn loom_mutex_mutual_exclusion() {
    loom::model(|| {
        let m = Arc::new(Mutex::new(LoomUnsafeCell::new(0usize)));
        let m2 = Arc::clone(&m);
        let t = loom::thread::spawn(move || {
            let g = m2.lock();
            // SAFETY: the guard gives exclusive access to the cell.
            g.with_mut(|p| unsafe { *p += 1 });
        });
        let g = m.try_lock().unwrap_or_else(|| m.lock());
        // SAFETY: as above.
        g.with_mut(|p| unsafe { *p += 1 });
        drop(g);
        t.join().unwrap();
        // SAFETY: both holds are over; we hold the mutex.
        assert_eq!(m.lock().with(|p| unsafe { *p }), 2);
    });
}

/// A writer stores two `Relaxed` words under the write lock; a reader loads them under
/// the read lock and must see both or neither (the lock excludes and orders them).
#[test]
fn loom_rwlock_reader_sees_whole_write() {
    loom::model(|| {
        let l = Arc::new(RwLock::new((AtomicUsize::new(0), AtomicUsize::new(0))));
        let l2 = Arc::clone(&l);
        let t = loom::thread::spawn(move || {
            let g = l2.write();
            g.0.store(1, Ordering::Relaxed);
            g.1.store(1, Ordering::Relaxed);
        });
        if let Some(g) = l.try_read() {
            assert_eq!(g.1.load(Ordering::Relaxed), g.0.load(Ordering::Relaxed));
        }
        let g = l.read();
        assert_eq!(g.1.load(Ordering::Relaxed), g.0.load(Ordering::Relaxed));
        drop(g);
        t.join().unwrap();
    });
}
