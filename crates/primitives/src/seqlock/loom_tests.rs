//! Loom models: every interleaving and every weak-memory outcome of small scenarios.
//!
//! Exclusion is checked with `loom::cell::UnsafeCell`, which reports any access pair not
//! ordered by happens-before, so these models check the memory orderings, not just the
//! interleavings. Torn reads are checked on a `SeqCell` pair written word by word.
//! Sized for `LOOM_MAX_PREEMPTIONS=2` (well under a second each); at 3 the rwlock models'
//! spin-wait loops exceed loom's default branch limit (state explosion, not a failure).

use super::*;
use loom::cell::UnsafeCell;
use loom::sync::Arc;
use loom::thread;

/// Writer stores `(v, v)` word by word; an optimistic reader that validates must see
/// `(0, 0)` or `(1, 1)` or `(2, 2)`, never a mix.
#[test]
fn loom_seqlock_no_torn_pair() {
    loom::model(|| {
        let lock = Arc::new(SeqLock::new());
        let cell = Arc::new(SeqCell::new([0u64, 0]));
        let (l2, c2) = (lock.clone(), cell.clone());
        let w = thread::spawn(move || {
            for v in 1..=2 {
                let _g = l2.write();
                c2.store([v, 0]);
                c2.store([v, v]);
            }
        });
        let s = lock.read_begin();
        let v = cell.load();
        if !lock.read_retry(s) {
            assert_eq!(v[0], v[1], "accepted a torn pair {v:?}");
        }
        w.join().unwrap();
    });
}

/// Same on a `SeqRwLock`, with a shared reader also present: it must not disturb the
/// optimistic reader's validation and must itself see a consistent pair.
#[test]
fn loom_seqrwlock_no_torn_pair() {
    loom::model(|| {
        let lock = Arc::new(SeqRwLock::with_shards(2));
        let cell = Arc::new(SeqCell::new([0u64, 0]));
        let (l2, c2) = (lock.clone(), cell.clone());
        let w = thread::spawn(move || {
            let _g = l2.write_lock();
            c2.store([1, 0]);
            c2.store([1, 1]);
        });
        let (l3, c3) = (lock.clone(), cell.clone());
        let r = thread::spawn(move || {
            let _g = l3.read_lock();
            let v = c3.load();
            assert_eq!(v[0], v[1], "shared reader saw a torn pair {v:?}");
        });
        let s = lock.read_begin();
        let v = cell.load();
        if !lock.read_retry(s) {
            assert_eq!(v[0], v[1], "accepted a torn pair {v:?}");
        }
        w.join().unwrap();
        r.join().unwrap();
    });
}

/// A thread that increments the plain cell under the write lock.
fn spawn_incrementing_writer(
    lock: &Arc<SeqRwLock>,
    data: &Arc<UnsafeCell<u64>>,
) -> thread::JoinHandle<()> {
    let (lock, data) = (lock.clone(), data.clone());
    thread::spawn(move || {
        let _g = lock.write_lock();
        // SAFETY: the write lock excludes every other accessor (what the models check).
        data.with_mut(|p| unsafe { *p += 1 });
    })
}

/// `read_lock` vs `write_lock`: one writer and two shared readers on a plain cell.
#[test]
fn loom_seqrwlock_readers_vs_writer() {
    loom::model(|| {
        let lock = Arc::new(SeqRwLock::with_shards(2));
        let data = Arc::new(UnsafeCell::new(0u64));
        let w = spawn_incrementing_writer(&lock, &data);
        let (l3, d3) = (lock.clone(), data.clone());
        let r = thread::spawn(move || {
            let _g = l3.read_lock();
            // SAFETY: shared readers only read; writers are excluded.
            let v = d3.with(|p| unsafe { *p });
            assert!(v <= 1);
        });
        {
            let _g = lock.read_lock();
            // SAFETY: as above.
            let v = data.with(|p| unsafe { *p });
            assert!(v <= 1);
        }
        w.join().unwrap();
        r.join().unwrap();
        // SAFETY: all other threads have been joined.
        assert_eq!(data.with(|p| unsafe { *p }), 1);
    });
}

/// Two writers and a shared reader: writer/writer exclusion, and a reader that finds a
/// writer present, registers, and is granted by that writer's unlock while the second
/// writer waits for it (the GEN case).
#[test]
fn loom_seqrwlock_two_writers_one_reader() {
    loom::model(|| {
        let lock = Arc::new(SeqRwLock::with_shards(2));
        let data = Arc::new(UnsafeCell::new(0u64));
        let ws: Vec<_> = (0..2)
            .map(|_| {
                let (l, d) = (lock.clone(), data.clone());
                thread::spawn(move || {
                    let _g = l.write_lock();
                    // SAFETY: the write lock excludes every other accessor.
                    d.with_mut(|p| unsafe { *p += 1 });
                })
            })
            .collect();
        {
            let _g = lock.read_lock();
            // SAFETY: writers are excluded while the shared lock is held.
            let v = data.with(|p| unsafe { *p });
            assert!(v <= 2);
        }
        for w in ws {
            w.join().unwrap();
        }
        // SAFETY: all other threads have been joined.
        assert_eq!(data.with(|p| unsafe { *p }), 2);
        assert_eq!(lock.sequence(), 4);
    });
}

/// The per-CPU indicator vs writer-flag handshake (Dekker): a reader counted in shard 0
/// and one in shard 1 against a writer. The writer must see each reader's increment or
/// the reader must see the writer's flag; the plain cell reports any overlap.
#[test]
fn loom_seqrwlock_percpu_handshake() {
    loom::model(|| {
        let lock = Arc::new(SeqRwLock::with_shards(2));
        let data = Arc::new(UnsafeCell::new(0u64));
        let rs: Vec<_> = (0..2)
            .map(|shard| {
                let (l, d) = (lock.clone(), data.clone());
                thread::spawn(move || {
                    let _g = l.read_lock_on(shard);
                    // SAFETY: shared readers only read; the writer is excluded.
                    let v = d.with(|p| unsafe { *p });
                    assert!(v <= 1);
                })
            })
            .collect();
        {
            let _g = lock.write_lock();
            // SAFETY: the write lock excludes both readers (what this model checks).
            data.with_mut(|p| unsafe { *p += 1 });
        }
        for r in rs {
            r.join().unwrap();
        }
        // SAFETY: all other threads have been joined.
        assert_eq!(data.with(|p| unsafe { *p }), 1);
        assert!(format!("{lock:?}").contains("readers: 0"));
    });
}

/// `SeqLock::read_or_lock` against a writer: the result is never torn, and the locked
/// pass really excludes the writer (checked by the plain cell it reads only then).
#[test]
fn loom_seqlock_read_or_lock_fallback() {
    loom::model(|| {
        let lock = Arc::new(SeqLock::new());
        let cell = Arc::new(SeqCell::new([0u64, 0]));
        let plain = Arc::new(UnsafeCell::new(0u64));
        let (l2, c2, p2) = (lock.clone(), cell.clone(), plain.clone());
        let w = thread::spawn(move || {
            let _g = l2.write();
            c2.store([1, 0]);
            c2.store([1, 1]);
            // SAFETY: the writer lock excludes the locked pass, the only other accessor.
            p2.with_mut(|p| unsafe { *p = 1 });
        });
        let v = lock.read_or_lock(|mode| {
            let v = cell.load();
            if mode == ReadMode::Locked {
                // SAFETY: the locked pass holds the writer lock.
                let p = plain.with(|p| unsafe { *p });
                assert_eq!(p, v[0]);
            }
            v
        });
        assert_eq!(v[0], v[1], "read_or_lock returned a torn pair {v:?}");
        w.join().unwrap();
    });
}

/// `SeqRwLock::read_or_lock` against a writer, as d_path against rename.
#[test]
fn loom_seqrwlock_read_or_lock_fallback() {
    loom::model(|| {
        let lock = Arc::new(SeqRwLock::with_shards(2));
        let cell = Arc::new(SeqCell::new([0u64, 0]));
        let plain = Arc::new(UnsafeCell::new(0u64));
        let (l2, c2, p2) = (lock.clone(), cell.clone(), plain.clone());
        let w = thread::spawn(move || {
            let _g = l2.write_lock();
            c2.store([1, 0]);
            c2.store([1, 1]);
            // SAFETY: the write lock excludes the shared pass, the only other accessor.
            p2.with_mut(|p| unsafe { *p = 1 });
        });
        let v = lock.read_or_lock(|mode| {
            let v = cell.load();
            if mode == ReadMode::Locked {
                // SAFETY: the shared pass excludes the writer.
                let p = plain.with(|p| unsafe { *p });
                assert_eq!(p, v[0]);
            }
            v
        });
        assert_eq!(v[0], v[1], "read_or_lock returned a torn pair {v:?}");
        w.join().unwrap();
    });
}

/// `SeqLock::read_excl` vs `write`: mutual exclusion and no sequence bump by the reader.
#[test]
fn loom_seqlock_excl_vs_write() {
    loom::model(|| {
        let lock = Arc::new(SeqLock::new());
        let data = Arc::new(UnsafeCell::new(0u64));
        let (l2, d2) = (lock.clone(), data.clone());
        let w = thread::spawn(move || {
            let _g = l2.write();
            // SAFETY: the writer lock excludes the other accessor.
            d2.with_mut(|p| unsafe { *p += 1 });
        });
        {
            let _g = lock.read_excl();
            // SAFETY: the writer lock is held.
            data.with_mut(|p| unsafe { *p += 10 });
        }
        w.join().unwrap();
        // SAFETY: joined.
        assert_eq!(data.with(|p| unsafe { *p }), 11);
        assert_eq!(lock.sequence(), 2);
    });
}

/// `try_write_lock` against a shared reader and a blocking writer: when it succeeds it
/// excludes both (the plain cell reports any overlap); when it gives up, the reader that
/// registered meanwhile is still let in and the blocking writer still gets the lock (no
/// lost grant, no hang).
#[test]
fn loom_seqrwlock_try_write_vs_reader_and_writer() {
    loom::model(|| {
        let lock = Arc::new(SeqRwLock::with_shards(2));
        let data = Arc::new(UnsafeCell::new(0u64));
        let (l2, d2) = (lock.clone(), data.clone());
        let t = thread::spawn(move || match l2.try_write_lock() {
            Some(_g) => {
                // SAFETY: the write lock excludes every other accessor.
                d2.with_mut(|p| unsafe { *p += 1 });
                1
            }
            None => 0,
        });
        let (l3, d3) = (lock.clone(), data.clone());
        let w = thread::spawn(move || {
            let _g = l3.write_lock();
            // SAFETY: as above.
            d3.with_mut(|p| unsafe { *p += 1 });
        });
        {
            let _g = lock.read_lock();
            // SAFETY: writers are excluded while the shared lock is held.
            let v = data.with(|p| unsafe { *p });
            assert!(v <= 2);
        }
        let tried = t.join().unwrap();
        w.join().unwrap();
        // SAFETY: all other threads have been joined.
        assert_eq!(data.with(|p| unsafe { *p }), 1 + tried);
        assert_eq!(lock.sequence(), 2 * (1 + tried as u32));
    });
}

/// `try_read_lock` against a writer: when it gets in it excludes the writer (the plain
/// cell reports any overlap); when it is turned away it leaves nothing behind, so the
/// writer finishes and a later reader gets in (no hang, no lost count).
#[test]
fn loom_seqrwlock_try_read_vs_writer() {
    loom::model(|| {
        let lock = Arc::new(SeqRwLock::with_shards(2));
        let data = Arc::new(UnsafeCell::new(0u64));
        let w = spawn_incrementing_writer(&lock, &data);
        if let Some(_g) = lock.try_read_lock_on(1) {
            // SAFETY: the writer is excluded while the shared lock is held.
            let v = data.with(|p| unsafe { *p });
            assert!(v <= 1);
        }
        w.join().unwrap();
        {
            let _g = lock.read_lock();
            // SAFETY: as above.
            assert_eq!(data.with(|p| unsafe { *p }), 1);
        }
        assert!(format!("{lock:?}").contains("readers: 0"));
        assert_eq!(lock.sequence(), 2);
    });
}
