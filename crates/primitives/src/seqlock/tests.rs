use super::*;
use std::sync::atomic::{AtomicBool as StdBool, AtomicUsize as StdUsize, Ordering::SeqCst};
use std::sync::{Arc, Barrier};
use std::thread;

/// A 4-word value whose words are always equal when consistent.
fn consistent(v: [u64; 4]) -> bool {
    v.iter().all(|&x| x == v[0])
}

#[test]
fn counter_begin_retry() {
    let c = SeqCounter::new();
    let s = c.read_begin();
    assert_eq!(s.value() & 1, 0);
    assert!(!c.read_retry(s));
    c.write_begin();
    assert_eq!(c.raw() & 1, 1);
    // A raw sample taken mid-write never validates.
    let odd = c.read_begin_raw();
    assert!(c.read_retry(odd));
    assert!(
        c.read_retry(s),
        "a write in progress invalidates earlier reads"
    );
    c.write_end();
    assert!(
        c.read_retry(s),
        "a completed write invalidates earlier reads"
    );
    let s2 = c.read_begin();
    assert_eq!(s2.value(), s.value() + 2);
    assert!(!c.read_retry(s2));
}

#[test]
fn counter_wraps() {
    let c = SeqCounter {
        seq: crate::sync::AtomicU32::new(u32::MAX - 1),
    };
    let s = c.read_begin();
    c.write_begin();
    c.write_end();
    assert_eq!(c.raw(), 0);
    assert!(c.read_retry(s));
    assert!(!c.read_retry(c.read_begin()));
}

#[test]
fn seqlock_write_and_excl() {
    let l = SeqLock::new();
    let s = l.read_begin();
    {
        let _x = l.read_excl();
        // The exclusive reader excludes writers but does not bump the sequence.
        assert!(l.try_write().is_none());
        assert!(!l.read_retry(s));
    }
    {
        let _w = l.write();
        assert_eq!(l.sequence() & 1, 1);
        assert!(l.try_write().is_none());
    }
    assert!(l.read_retry(s));
    assert_eq!(l.sequence(), 2);
    let w = l.try_write().expect("free lock");
    drop(w);
    assert_eq!(l.sequence(), 4);
}

#[test]
fn seqlock_read_or_lock_modes() {
    let l = SeqLock::new();
    let cell = SeqCell::new([7, 7]);
    let mut modes = Vec::new();
    let v = l.read_or_lock(|m| {
        modes.push(m);
        cell.load()
    });
    assert_eq!(v, [7, 7]);
    assert_eq!(modes, [ReadMode::Optimistic]);

    // A write during the optimistic pass forces exactly one locked pass.
    let mut modes = Vec::new();
    let v = l.read_or_lock(|m| {
        modes.push(m);
        if m == ReadMode::Optimistic {
            let _w = l.write();
            cell.store([8, 8]);
        }
        cell.load()
    });
    assert_eq!(v, [8, 8]);
    assert_eq!(modes, [ReadMode::Optimistic, ReadMode::Locked]);
}

#[test]
fn seqrwlock_basic() {
    let l = SeqRwLock::new();
    let s = l.read_begin();
    {
        let _a = l.read_lock();
        let _b = l.read_lock();
        // Shared readers do not bump the sequence.
        assert!(!l.read_retry(s));
    }
    {
        let _w = l.write_lock();
        assert_eq!(l.sequence() & 1, 1);
    }
    assert!(l.read_retry(s));
    assert_eq!(l.sequence(), 2);
    let _a = l.read_lock();
    let dbg = format!("{l:?}");
    assert!(
        dbg.contains("readers: 1") && dbg.contains("seq: 2"),
        "{dbg}"
    );
}

/// `try_read_lock` gets in beside other readers, is turned away (at once, leaving no
/// waiting reader behind) while a writer holds the lock or drains readers, and gets in
/// again once the writer has left.
#[test]
fn seqrwlock_try_read_lock() {
    let l = SeqRwLock::with_shards(2);
    {
        let _a = l.read_lock_on(0);
        let _b = l.try_read_lock_on(0).expect("readers share");
        let _c = l.try_read_lock().expect("readers share");
        assert!(format!("{l:?}").contains("readers: 3"));
    }
    {
        let _w = l.write_lock();
        assert!(l.try_read_lock().is_none());
        assert!(l.try_read_lock_on(1).is_none());
        let dbg = format!("{l:?}");
        assert!(
            dbg.contains("readers: 0") && dbg.contains("readers_waiting: 0"),
            "{dbg}"
        );
    }
    // A writer draining readers turns tries away too: the reader it waits for holds a
    // guard, and a try meanwhile must fail rather than let more readers in.
    let reader = l.read_lock_on(0);
    std::thread::scope(|s| {
        let w = s.spawn(|| drop(l.write_lock()));
        while !format!("{l:?}").contains("writer_present: true") {
            std::thread::yield_now();
        }
        assert!(l.try_read_lock_on(1).is_none());
        drop(reader);
        w.join().unwrap();
    });
    assert!(l.try_read_lock().is_some());
    assert_eq!(l.sequence(), 4);
}

#[test]
fn seqrwlock_read_or_lock_modes() {
    let l = SeqRwLock::new();
    let cell = SeqCell::new([1, 1, 1]);
    let mut modes = Vec::new();
    let v = l.read_or_lock(|m| {
        modes.push(m);
        if m == ReadMode::Optimistic {
            let _w = l.write_lock();
            cell.store([2, 2, 2]);
        }
        cell.load()
    });
    assert_eq!(v, [2, 2, 2]);
    assert_eq!(modes, [ReadMode::Optimistic, ReadMode::Locked]);
}

#[test]
fn seqrwlock_shard_counts() {
    assert_eq!(SeqRwLock::with_shards(0).shards.len(), 1);
    assert_eq!(SeqRwLock::with_shards(3).shards.len(), 4);
    assert_eq!(SeqRwLock::with_shards(8).shards.len(), 8);
    assert!(SeqRwLock::new().shards.len() >= crate::cpu::num_cpus());
    // Every shard works, a second reader of a shard shares its line, and a guard unlocks
    // what it locked.
    let l = SeqRwLock::with_shards(4);
    let guards: Vec<_> = (0..8).map(|s| l.read_lock_on(s)).collect();
    assert!(format!("{l:?}").contains("readers: 8"));
    assert!(l
        .shards
        .iter()
        .all(|s| s.owned.load(SeqCst) == 1 && s.shared.load(SeqCst) == 1));
    drop(guards);
    drop(l.write_lock());
    assert_eq!(l.sequence(), 2);
}

/// The slow path by hand: a writer present turns readers away from the fast path and
/// registers them; its unlock grants them (flipping GEN), and the next writer waits for
/// them. Several rounds, so GEN flips both ways.
#[test]
fn seqrwlock_writer_grants_waiting_readers() {
    let l = SeqRwLock::with_shards(2);
    for round in 0..6u32 {
        let writers = l.write_enter();
        // The fast path backs out and leaves its shard as it was.
        assert!(l.read_fast(&l.shards[round as usize % 2]).is_none());
        assert!(l
            .shards
            .iter()
            .all(|s| s.owned.load(SeqCst) + s.shared.load(SeqCst) == 0));
        let dbg = format!("{l:?}");
        assert!(
            dbg.contains("readers: 0") && dbg.contains("writer_present: true"),
            "{dbg}"
        );
        let gen = l
            .read_register()
            .expect("a writer is present: the reader must wait");
        let gen2 = l.read_register().expect("second waiter");
        assert_eq!(gen.ahead, 0);
        assert_eq!(
            gen2,
            super::rw::Waiter {
                gen: gen.gen,
                ahead: 1
            }
        );
        assert!(format!("{l:?}").contains("readers_waiting: 2"));
        // Waiting readers are not in: the writer drains without them.
        l.write_drain();
        drop(SeqWriteGuard {
            lock: &l,
            _writers: writers,
        });
        assert_eq!(l.sequence(), 2 * (round + 1));
        // Both were granted by the unlock and are in now.
        l.read_wait_granted(gen);
        l.read_wait_granted(gen2);
        let dbg = format!("{l:?}");
        assert!(
            dbg.contains("readers: 2") && dbg.contains("readers_waiting: 0"),
            "{dbg}"
        );
        drop(SeqReadGuard::granted(&l));
        drop(SeqReadGuard::granted(&l));
        // No writer: the slow path enters directly.
        assert_eq!(l.read_register(), None);
        drop(SeqReadGuard::granted(&l));
    }
    assert!(format!("{l:?}").contains("readers: 0"));
}

// Fewer under Miri, which interprets (about 1000x slower).
const WRITER_ITERS: u64 = if cfg!(miri) { 15 } else { 2_000 };
const READER_ITERS: usize = if cfg!(miri) { 15 } else { 2_000 };

/// Writers keep a 4-word value all-equal; optimistic readers must never accept a torn
/// value, `read_or_lock` readers never return one.
#[test]
fn stress_seqlock_no_torn_reads() {
    let lock = Arc::new(SeqLock::new());
    let cell = Arc::new(SeqCell::new([0u64; 4]));
    let mut hs = Vec::new();
    for w in 0..4 {
        let (lock, cell) = (lock.clone(), cell.clone());
        hs.push(thread::spawn(move || {
            for i in 0..WRITER_ITERS {
                let _g = lock.write();
                let v = i * 4 + w;
                // Store word by word with a pause, to widen the tearing window.
                let mut cur = cell.load();
                for k in 0..4 {
                    cur[k] = v;
                    cell.store(cur);
                    std::hint::spin_loop();
                }
            }
        }));
    }
    for r in 0..12 {
        let (lock, cell) = (lock.clone(), cell.clone());
        hs.push(thread::spawn(move || {
            for _ in 0..READER_ITERS {
                if r % 2 == 0 {
                    let v = loop {
                        let s = lock.read_begin();
                        let v = cell.load();
                        if !lock.read_retry(s) {
                            break v;
                        }
                    };
                    assert!(consistent(v), "accepted torn value {v:?}");
                } else {
                    let v = lock.read_or_lock(|m| {
                        let v = cell.load();
                        if m == ReadMode::Locked {
                            assert!(consistent(v), "torn value under lock {v:?}");
                        }
                        v
                    });
                    assert!(consistent(v), "read_or_lock returned torn {v:?}");
                }
            }
        }));
    }
    for h in hs {
        h.join().unwrap();
    }
    assert_eq!(lock.sequence(), 2 * 4 * WRITER_ITERS as u32);
}

/// Shared readers, optimistic readers and writers of a `SeqRwLock`: writers never overlap
/// anyone, shared readers overlap only each other, nothing torn is ever accepted.
#[test]
fn stress_seqrwlock_exclusion() {
    let lock = Arc::new(SeqRwLock::new());
    let cell = Arc::new(SeqCell::new([0u64; 4]));
    // Shared readers inside, writers inside.
    let readers_in = Arc::new(StdUsize::new(0));
    let writers_in = Arc::new(StdUsize::new(0));
    let max_shared = Arc::new(StdUsize::new(0));
    let mut hs = Vec::new();
    for w in 0..4u64 {
        let (lock, cell, rin, win) = (
            lock.clone(),
            cell.clone(),
            readers_in.clone(),
            writers_in.clone(),
        );
        hs.push(thread::spawn(move || {
            for i in 0..WRITER_ITERS {
                let _g = lock.write_lock();
                assert_eq!(win.fetch_add(1, SeqCst), 0, "two writers inside");
                assert_eq!(rin.load(SeqCst), 0, "writer overlaps a shared reader");
                let v = i * 4 + w;
                let mut cur = cell.load();
                for k in 0..4 {
                    cur[k] = v;
                    cell.store(cur);
                }
                assert_eq!(rin.load(SeqCst), 0, "shared reader entered a write section");
                win.fetch_sub(1, SeqCst);
            }
        }));
    }
    for r in 0..12 {
        let (lock, cell, rin, win, max) = (
            lock.clone(),
            cell.clone(),
            readers_in.clone(),
            writers_in.clone(),
            max_shared.clone(),
        );
        hs.push(thread::spawn(move || {
            for _ in 0..READER_ITERS {
                match r % 3 {
                    0 => {
                        let _g = lock.read_lock();
                        let n = rin.fetch_add(1, SeqCst) + 1;
                        max.fetch_max(n, SeqCst);
                        assert_eq!(win.load(SeqCst), 0, "shared reader overlaps a writer");
                        let v = cell.load();
                        assert!(consistent(v), "torn value under read_lock {v:?}");
                        rin.fetch_sub(1, SeqCst);
                    }
                    1 => {
                        let v = loop {
                            let s = lock.read_begin();
                            let v = cell.load();
                            if !lock.read_retry(s) {
                                break v;
                            }
                        };
                        assert!(consistent(v), "accepted torn value {v:?}");
                    }
                    _ => {
                        let v = lock.read_or_lock(|m| {
                            let v = cell.load();
                            if m == ReadMode::Locked {
                                assert_eq!(win.load(SeqCst), 0);
                                assert!(consistent(v));
                            }
                            v
                        });
                        assert!(consistent(v), "read_or_lock returned torn {v:?}");
                    }
                }
            }
        }));
    }
    for h in hs {
        h.join().unwrap();
    }
    assert_eq!(lock.sequence(), 2 * 4 * WRITER_ITERS as u32);
}

/// 64 threads on (typically) 2 CPUs: shared readers migrate between shards mid-section
/// and are preempted inside it; writers still never overlap them and nobody hangs.
#[test]
fn stress_seqrwlock_oversubscribed() {
    // Fewer under Miri, which interprets (about 1000x slower); a multiple of 16 (writers).
    const THREADS: usize = if cfg!(miri) { 16 } else { 64 };
    const ITERS: usize = if cfg!(miri) { 20 } else { 300 };
    let lock = Arc::new(SeqRwLock::new());
    // Shared readers inside (high half) and writers inside (low bit), in one word.
    let inside = Arc::new(StdUsize::new(0));
    let hs: Vec<_> = (0..THREADS)
        .map(|t| {
            let (lock, inside) = (lock.clone(), inside.clone());
            thread::spawn(move || {
                for i in 0..ITERS {
                    if t % 16 == 0 {
                        let _g = lock.write_lock();
                        assert_eq!(inside.fetch_add(1, SeqCst), 0, "writer overlaps");
                        thread::yield_now();
                        inside.fetch_sub(1, SeqCst);
                    } else {
                        let _g = lock.read_lock();
                        let was = inside.fetch_add(2, SeqCst);
                        assert_eq!(was & 1, 0, "shared reader overlaps a writer");
                        if i % 8 == 0 {
                            // Invite a migration while counted in a shard.
                            thread::yield_now();
                        }
                        inside.fetch_sub(2, SeqCst);
                    }
                }
            })
        })
        .collect();
    for h in hs {
        h.join().unwrap();
    }
    assert_eq!(lock.sequence(), 2 * (THREADS / 16 * ITERS) as u32);
    assert!(format!("{lock:?}").contains("readers: 0"));
}

/// Shared readers really share: two threads hold `read_lock` at the same time.
#[test]
fn shared_readers_overlap() {
    let lock = Arc::new(SeqRwLock::new());
    let barrier = Arc::new(Barrier::new(2));
    let hs: Vec<_> = (0..2)
        .map(|_| {
            let (lock, barrier) = (lock.clone(), barrier.clone());
            thread::spawn(move || {
                let _g = lock.read_lock();
                // Both must be inside for either to pass: deadlocks if readers exclude.
                barrier.wait();
            })
        })
        .collect();
    for h in hs {
        h.join().unwrap();
    }
}

/// A continuous stream of shared readers cannot starve a writer: once the writer is
/// announced, at most one more pass per reader thread completes before it gets in.
#[test]
fn writer_not_starved_by_reader_stream() {
    // Fewer under Miri, which interprets (about 1000x slower).
    const READERS: usize = if cfg!(miri) { 4 } else { 16 };
    const ROUNDS: usize = if cfg!(miri) { 3 } else { 50 };
    let lock = Arc::new(SeqRwLock::new());
    let passes = Arc::new(StdUsize::new(0));
    let stop = Arc::new(StdBool::new(false));
    let hs: Vec<_> = (0..READERS)
        .map(|_| {
            let (lock, passes, stop) = (lock.clone(), passes.clone(), stop.clone());
            thread::spawn(move || {
                while !stop.load(SeqCst) {
                    let _g = lock.read_lock();
                    // Counted inside the section: only readers already in can count.
                    passes.fetch_add(1, SeqCst);
                }
            })
        })
        .collect();
    for _ in 0..ROUNDS {
        // Let the stream run.
        let p0 = passes.load(SeqCst);
        while passes.load(SeqCst) < p0 + 2 * READERS {
            thread::yield_now();
        }
        let writers = lock.write_enter();
        let before = passes.load(SeqCst);
        lock.write_drain();
        let after = passes.load(SeqCst);
        let _g = SeqWriteGuard {
            lock: &lock,
            _writers: writers,
        };
        assert!(
            after - before <= READERS,
            "{} reader passes completed while a writer waited",
            after - before
        );
    }
    stop.store(true, SeqCst);
    for h in hs {
        h.join().unwrap();
    }
}

/// A continuous stream of writers cannot starve a shared reader: once it has registered
/// (slow path, a writer present), at most one write section (the one in progress)
/// completes before it gets in.
#[test]
fn reader_not_starved_by_writer_stream() {
    // Fewer under Miri, which interprets (about 1000x slower).
    const WRITERS: usize = if cfg!(miri) { 4 } else { 8 };
    const ROUNDS: usize = if cfg!(miri) { 3 } else { 50 };
    let lock = Arc::new(SeqRwLock::new());
    let passes = Arc::new(StdUsize::new(0));
    let stop = Arc::new(StdBool::new(false));
    let hs: Vec<_> = (0..WRITERS)
        .map(|_| {
            let (lock, passes, stop) = (lock.clone(), passes.clone(), stop.clone());
            thread::spawn(move || {
                while !stop.load(SeqCst) {
                    let _g = lock.write_lock();
                    passes.fetch_add(1, SeqCst);
                }
            })
        })
        .collect();
    for _ in 0..ROUNDS {
        let p0 = passes.load(SeqCst);
        while passes.load(SeqCst) < p0 + 2 * WRITERS {
            thread::yield_now();
        }
        // Register while a writer is present (else we got straight in: leave, try again).
        let gen = loop {
            match lock.read_register() {
                Some(gen) => break gen,
                None => drop(SeqReadGuard::granted(&lock)),
            }
        };
        let before = passes.load(SeqCst);
        lock.read_wait_granted(gen);
        let after = passes.load(SeqCst);
        drop(SeqReadGuard::granted(&lock));
        assert!(
            after - before <= 1,
            "{} write sections completed while a reader waited",
            after - before
        );
    }
    stop.store(true, SeqCst);
    for h in hs {
        h.join().unwrap();
    }
}
