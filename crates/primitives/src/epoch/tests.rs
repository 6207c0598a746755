use super::*;
use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

/// A fresh collector and this thread's handle on it (isolated from other tests).
fn collector() -> (Arc<Global>, LocalHandle) {
    let g = Arc::new(Global::new());
    let h = LocalHandle::register(&g);
    (g, h)
}

/// A deferred function that counts its runs.
fn counter(h: &LocalHandle, runs: &Arc<AtomicUsize>) {
    let r = runs.clone();
    // SAFETY: the closure owns what it touches.
    unsafe {
        h.defer_fn(move || {
            r.fetch_add(1, Ordering::Relaxed);
        })
    };
}

#[test]
fn pins_nest_and_the_last_unpin_clears_the_record() {
    let (_g, h) = collector();
    assert!(!h.is_pinned());
    let a = h.pin();
    let b = h.pin();
    drop(a);
    assert!(h.is_pinned(), "one guard is still alive");
    drop(b);
    assert!(!h.is_pinned());
}

#[test]
fn a_pin_that_defers_nothing_never_moves_the_epoch() {
    let (g, h) = collector();
    let before = g.epoch_relaxed();
    for _ in 0..if cfg!(miri) { 500 } else { 10_000 } {
        drop(h.pin());
    }
    assert_eq!(g.epoch_relaxed(), before, "pins advanced the epoch");
}

#[test]
fn only_a_full_bag_seals_and_advances() {
    let (g, h) = collector();
    let runs = Arc::new(AtomicUsize::new(0));
    for _ in 0..BAG_SIZE - 1 {
        counter(&h, &runs);
    }
    assert_eq!(g.epoch_relaxed(), 0, "advanced before the bag was full");
    assert_eq!(h.pending(), BAG_SIZE - 1);
    counter(&h, &runs);
    assert_eq!(g.epoch_relaxed(), 1, "a full bag advances once");
    // The next bag: its seal advances once more, and the first bag (two epochs old) runs.
    for _ in 0..BAG_SIZE {
        counter(&h, &runs);
    }
    assert_eq!(g.epoch_relaxed(), 2);
    assert_eq!(runs.load(Ordering::Relaxed), BAG_SIZE);
    assert_eq!(h.pending(), BAG_SIZE);
}

/// Threads doing the same work in step fill their bags in different calls: the second
/// thread's first bag is smaller, later ones are full-sized.
#[test]
fn the_second_threads_first_bag_is_staggered() {
    let (g, _first) = collector();
    let second = LocalHandle::register(&g);
    let runs = Arc::new(AtomicUsize::new(0));
    let first_bag = BAG_SIZE - 23;
    for _ in 0..first_bag - 1 {
        counter(&second, &runs);
    }
    assert_eq!(g.epoch_relaxed(), 0);
    counter(&second, &runs);
    assert_eq!(g.epoch_relaxed(), 1, "the staggered first bag sealed");
    for _ in 0..BAG_SIZE - 1 {
        counter(&second, &runs);
    }
    assert_eq!(g.epoch_relaxed(), 1, "the second bag is full-sized");
    counter(&second, &runs);
    assert_eq!(runs.load(Ordering::Relaxed), first_bag);
}

/// With a grace-period thread, the thread whose bag fills only asks: the thread moves the
/// epoch on two steps, and the next full bag runs the first one.
#[test]
#[cfg_attr(miri, ignore = "no grace-period thread under Miri")]
fn the_grace_period_thread_advances_for_a_full_bag() {
    let g = Arc::new(Global::with_advancer());
    let h = LocalHandle::register(&g);
    let runs = Arc::new(AtomicUsize::new(0));
    for _ in 0..BAG_SIZE {
        counter(&h, &runs);
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    while g.epoch_relaxed() < 2 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(
        g.epoch_relaxed(),
        2,
        "the grace-period thread did not advance twice"
    );
    assert_eq!(
        runs.load(Ordering::Relaxed),
        0,
        "the bag runs on its own thread"
    );
    for _ in 0..BAG_SIZE {
        counter(&h, &runs);
    }
    assert_eq!(runs.load(Ordering::Relaxed), BAG_SIZE);
    drop(h);
    // The grace-period thread may hold the collector for a moment longer.
    drop(g);
    let deadline = Instant::now() + Duration::from_secs(60);
    while runs.load(Ordering::Relaxed) < 2 * BAG_SIZE && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(
        runs.load(Ordering::Relaxed),
        2 * BAG_SIZE,
        "dropping the collector runs its orphans"
    );
}

#[test]
fn flush_runs_everything_when_nobody_is_pinned() {
    let (_g, h) = collector();
    let runs = Arc::new(AtomicUsize::new(0));
    for _ in 0..5 {
        counter(&h, &runs);
    }
    assert_eq!(runs.load(Ordering::Relaxed), 0, "ran before a grace period");
    h.flush();
    assert_eq!(runs.load(Ordering::Relaxed), 5);
    assert_eq!(h.pending(), 0);
}

#[test]
fn a_pinned_reader_holds_back_the_free() {
    let (g, h) = collector();
    let (pinned_tx, pinned_rx) = mpsc::channel();
    let (done_tx, done_rx) = mpsc::channel::<()>();
    let g2 = g.clone();
    let reader = std::thread::spawn(move || {
        let h = LocalHandle::register(&g2);
        let _pin = h.pin();
        pinned_tx.send(()).unwrap();
        done_rx.recv().unwrap();
    });
    pinned_rx.recv().unwrap();
    let runs = Arc::new(AtomicUsize::new(0));
    counter(&h, &runs);
    for _ in 0..8 {
        h.flush();
    }
    assert_eq!(
        runs.load(Ordering::Relaxed),
        0,
        "freed under a pinned reader"
    );
    assert!(g.epoch_relaxed() <= 1, "the epoch passed a pinned reader");
    done_tx.send(()).unwrap();
    reader.join().unwrap();
    h.flush();
    assert_eq!(runs.load(Ordering::Relaxed), 1);
}

#[test]
fn a_pinned_flusher_advances_at_most_once_past_itself() {
    let (g, h) = collector();
    let runs = Arc::new(AtomicUsize::new(0));
    counter(&h, &runs);
    let pin = h.pin();
    for _ in 0..4 {
        pin.flush();
    }
    assert_eq!(g.epoch_relaxed(), 1, "advanced past its own pin");
    assert_eq!(runs.load(Ordering::Relaxed), 0);
    drop(pin);
    h.flush();
    assert_eq!(runs.load(Ordering::Relaxed), 1);
}

#[test]
fn an_exited_threads_bags_are_adopted() {
    let (g, h) = collector();
    let runs = Arc::new(AtomicUsize::new(0));
    let (g2, r2) = (g.clone(), runs.clone());
    std::thread::spawn(move || {
        let h = LocalHandle::register(&g2);
        for _ in 0..BAG_SIZE + 3 {
            counter(&h, &r2);
        }
    })
    .join()
    .unwrap();
    assert_eq!(g.participants(), 1, "the exited thread's record is gone");
    let ran_on_exit = runs.load(Ordering::Relaxed);
    h.flush();
    h.flush();
    assert_eq!(runs.load(Ordering::Relaxed), BAG_SIZE + 3);
    assert!(ran_on_exit < BAG_SIZE + 3, "nothing is run at exit");
}

#[test]
fn a_guard_outliving_its_handle_keeps_the_state_and_orphans_it() {
    let (g, h) = collector();
    let other = LocalHandle::register(&g);
    let guard = other.pin();
    drop(other);
    assert_eq!(g.participants(), 2, "still pinned through the guard");
    let runs = Arc::new(AtomicUsize::new(0));
    let r = runs.clone();
    guard.defer(move || r.fetch_add(1, Ordering::Relaxed));
    drop(guard);
    assert_eq!(g.participants(), 1);
    h.flush();
    h.flush();
    assert_eq!(runs.load(Ordering::Relaxed), 1);
}

#[test]
fn synchronize_waits_for_readers_pinned_before_it() {
    let (g, _h) = collector();
    let (pinned_tx, pinned_rx) = mpsc::channel();
    let released = Arc::new(AtomicBool::new(false));
    let (g2, rel2) = (g.clone(), released.clone());
    let reader = std::thread::spawn(move || {
        let h = LocalHandle::register(&g2);
        let pin = h.pin();
        pinned_tx.send(()).unwrap();
        std::thread::sleep(Duration::from_millis(50));
        rel2.store(true, Ordering::Relaxed);
        drop(pin);
    });
    pinned_rx.recv().unwrap();
    let sync = LocalHandle::register(&g);
    sync.synchronize();
    assert!(
        released.load(Ordering::Relaxed),
        "returned while a reader pinned before the call was still pinned"
    );
    reader.join().unwrap();
}

#[test]
#[should_panic(expected = "while pinned")]
fn synchronize_while_pinned_is_refused() {
    let (_g, h) = collector();
    let _pin = h.pin();
    h.synchronize();
}

#[test]
fn unprotected_runs_deferred_functions_at_once() {
    let runs = Arc::new(AtomicUsize::new(0));
    let r = runs.clone();
    // SAFETY: nothing is shared.
    let g = unsafe { unprotected() };
    g.defer(move || r.fetch_add(1, Ordering::Relaxed));
    assert_eq!(runs.load(Ordering::Relaxed), 1);
    let a = Atomic::new(7u32);
    // SAFETY: `a` is ours alone.
    unsafe { g.defer_destroy(a.load(Ordering::Relaxed, g)) };
}

#[test]
fn atomic_owned_shared_round_trip() {
    let (_g, h) = collector();
    let a = Atomic::new(1u64);
    let guard = h.pin();
    let one = a.load(Ordering::Acquire, &guard);
    // SAFETY: `one` is live (we free it below, after the last use).
    assert_eq!(unsafe { *one.deref() }, 1);
    let old = a.swap(Owned::new(2u64), Ordering::AcqRel, &guard);
    assert_eq!(old, one);
    // SAFETY: unlinked; nobody else has it.
    assert_eq!(*unsafe { old.into_owned() }.into_box(), 1);
    let two = a.load(Ordering::Acquire, &guard);
    let addr = two.into_usize();
    // SAFETY: from `into_usize` of a `Shared` of this type.
    let back = unsafe { Shared::<u64>::from_usize(addr) };
    assert_eq!(back, two);
    // SAFETY: live until the defer below runs.
    assert_eq!(unsafe { back.as_ref() }, Some(&2));
    a.store(Shared::null(), Ordering::Release);
    assert!(a.load(Ordering::Relaxed, &guard).is_null());
    // SAFETY: unlinked above.
    unsafe { guard.defer_destroy(two) };
    drop(guard);
    h.flush();
    assert_eq!(h.pending(), 0);
}

#[test]
fn arrays_are_one_length_prefixed_allocation() {
    let (_g, h) = collector();
    let mut o = Owned::<[MaybeUninit<u16>]>::init(5);
    for (i, e) in o.iter_mut().enumerate() {
        e.write(i as u16 * 3);
    }
    let a: Atomic<[MaybeUninit<u16>]> = Atomic::from(o);
    let guard = h.pin();
    let s = a.load(Ordering::Acquire, &guard);
    // SAFETY: live; every element was written above.
    let read: Vec<u16> = unsafe { s.deref() }
        .iter()
        .map(|e| unsafe { e.assume_init() })
        .collect();
    assert_eq!(read, [0, 3, 6, 9, 12]);
    let empty = Owned::<[MaybeUninit<u64>]>::init(0);
    assert_eq!(empty.len(), 0);
    // SAFETY: unlinked (the location is dropped with the test).
    unsafe { guard.defer_destroy(s) };
}

#[test]
fn the_default_collector_flushes_and_counts() {
    let runs = Arc::new(AtomicUsize::new(0));
    let r = runs.clone();
    // SAFETY: the closure owns what it touches.
    unsafe {
        defer_fn(move || {
            r.fetch_add(1, Ordering::Relaxed);
        })
    };
    assert!(pending_local() >= 1);
    assert!(!is_pinned());
    // Other tests' threads may be pinned in the shared collector: flush until it ran.
    let deadline = Instant::now() + Duration::from_secs(60);
    while runs.load(Ordering::Relaxed) == 0 && Instant::now() < deadline {
        flush();
        std::thread::yield_now();
    }
    assert_eq!(runs.load(Ordering::Relaxed), 1);
    synchronize();
    assert!(default::collector().participants() >= 1);
}

const LIVE: u64 = 0x5a5a_5a5a_5a5a_5a5a;
const DEAD: u64 = 0xdead_dead_dead_dead;

/// A node whose destructor poisons it: a reader that sees the poison read freed memory.
struct Node {
    canary: AtomicU64,
    value: u64,
    drops: Arc<AtomicUsize>,
}

impl Drop for Node {
    fn drop(&mut self) {
        assert_eq!(
            self.canary.swap(DEAD, Ordering::Relaxed),
            LIVE,
            "dropped twice"
        );
        self.drops.fetch_add(1, Ordering::Relaxed);
    }
}

/// Readers dereference the current node of a few slots under pins while writers swap in
/// new nodes and defer the old ones: no reader ever sees a poisoned node, and every node
/// is dropped exactly once. Under Miri (small sizes) a use-after-free is reported as such.
#[test]
fn stress_readers_never_see_a_freed_node() {
    const SLOTS: usize = 4;
    let (readers, writers, swaps) = if cfg!(miri) {
        (2, 2, 40)
    } else {
        (4, 4, 20_000)
    };
    let drops = Arc::new(AtomicUsize::new(0));
    let new_node = |v: u64| {
        Owned::new(Node {
            canary: AtomicU64::new(LIVE),
            value: v,
            drops: drops.clone(),
        })
    };
    let slots: Arc<Vec<Atomic<Node>>> = Arc::new(
        (0..SLOTS)
            .map(|i| Atomic::from(new_node(i as u64)))
            .collect(),
    );
    let stop = Arc::new(AtomicBool::new(false));
    std::thread::scope(|s| {
        for _ in 0..readers {
            let (slots, stop) = (slots.clone(), stop.clone());
            s.spawn(move || {
                let mut reads = 0u64;
                while !stop.load(Ordering::Relaxed) || reads < 100 {
                    let guard = pin();
                    for slot in slots.iter() {
                        let n = slot.load(Ordering::Acquire, &guard);
                        // SAFETY: loaded under `guard`; nodes are freed only through the
                        // epoch after being swapped out.
                        let n = unsafe { n.deref() };
                        assert_eq!(n.canary.load(Ordering::Relaxed), LIVE, "use after free");
                        assert!(n.value < (1 << 40));
                    }
                    drop(guard);
                    reads += 1;
                }
            });
        }
        let mut handles = Vec::new();
        for w in 0..writers {
            let slots = slots.clone();
            let new_node = &new_node;
            handles.push(s.spawn(move || {
                for i in 0..swaps {
                    let guard = pin();
                    let slot = &slots[(i + w) % SLOTS];
                    let old = slot.swap(new_node(i as u64), Ordering::AcqRel, &guard);
                    // SAFETY: swapped out, so unreachable for new readers; dropped once.
                    unsafe { guard.defer_destroy(old) };
                }
                flush();
            }));
        }
        for h in handles {
            h.join().unwrap();
        }
        stop.store(true, Ordering::Relaxed);
    });
    // Writers exited: their bags are orphans; flush until every swapped-out node ran.
    let swapped = writers * swaps;
    let deadline = Instant::now() + Duration::from_secs(60);
    while drops.load(Ordering::Relaxed) < swapped && Instant::now() < deadline {
        flush();
        std::thread::yield_now();
    }
    assert_eq!(
        drops.load(Ordering::Relaxed),
        swapped,
        "a swapped-out node leaked"
    );
    for slot in slots.iter() {
        // SAFETY: every thread is done; the nodes still linked are ours.
        unsafe { drop(slot.load(Ordering::Relaxed, unprotected()).into_owned()) };
    }
    assert_eq!(drops.load(Ordering::Relaxed), swapped + SLOTS);
}
