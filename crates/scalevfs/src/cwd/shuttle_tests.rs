//! Shuttle model of the cwd's pinning protocol (module docs): a walk pins, reads the
//! mirrored `Weak` between sequence checks and upgrades it; `chdir` publishes a new path,
//! retires the old `Weak` after a grace period and drops the old strong reference. A walk
//! must upgrade only while a `Weak` keeps the allocation (`Arc`'s contract), and a path it
//! pinned must not be dropped (`dput`) until it lets go.
//!
//! The epoch is modelled by per-reader `pinned` flags, as crossbeam's grace period is:
//! the retired `Weak` goes only after every reader pinned at the retire was seen unpinned.

use shuttle::sync::atomic::{AtomicBool, AtomicUsize, Ordering::*};
use shuttle::thread;
use std::sync::Arc;

const READERS: usize = 2;

struct World {
    seq: AtomicUsize,
    current: AtomicUsize,
    /// Per path (0: the first cwd, 1: the new one): strong count, whether the cell's
    /// `Weak` is still alive, whether the path was dropped (its `dput`).
    strong: [AtomicUsize; 2],
    weak_alive: [AtomicBool; 2],
    dropped: [AtomicBool; 2],
    pinned: [AtomicBool; READERS],
}

fn drop_strong(w: &World, p: usize) {
    if w.strong[p].fetch_sub(1, AcqRel) == 1 {
        w.dropped[p].store(true, SeqCst);
    }
}

/// A relative walk by reader `r`: pin the cwd, use it, let go.
fn walk(w: &World, r: usize) {
    w.pinned[r].store(true, SeqCst);
    let got = loop {
        let s = w.seq.load(Acquire);
        if s % 2 == 1 {
            thread::yield_now();
            continue;
        }
        let p = w.current.load(Acquire);
        assert!(w.weak_alive[p].load(SeqCst), "upgrade of freed memory");
        // Weak::upgrade: increment unless zero.
        let mut n = w.strong[p].load(Relaxed);
        let upgraded = loop {
            if n == 0 {
                break false;
            }
            match w.strong[p].compare_exchange(n, n + 1, Acquire, Relaxed) {
                Ok(_) => break true,
                Err(now) => n = now,
            }
        };
        shuttle::sync::atomic::fence(Acquire);
        if w.seq.load(Relaxed) != s {
            if upgraded {
                drop_strong(w, p);
            }
            continue;
        }
        assert!(upgraded, "the validated cwd had no strong reference");
        break p;
    };
    w.pinned[r].store(false, SeqCst);
    // The walk runs unpinned, on its strong reference.
    assert!(!w.dropped[got].load(SeqCst), "a pinned cwd was dropped");
    drop_strong(w, got);
}

fn model() {
    let w = Arc::new(World {
        seq: AtomicUsize::new(0),
        current: AtomicUsize::new(0),
        strong: [AtomicUsize::new(1), AtomicUsize::new(0)],
        weak_alive: [AtomicBool::new(true), AtomicBool::new(false)],
        dropped: [AtomicBool::new(false), AtomicBool::new(false)],
        pinned: [AtomicBool::new(false), AtomicBool::new(false)],
    });
    let readers: Vec<_> = (0..READERS)
        .map(|r| {
            let w = w.clone();
            thread::spawn(move || walk(&w, r))
        })
        .collect();
    let chdir = {
        let w = w.clone();
        thread::spawn(move || {
            w.strong[1].store(1, Relaxed);
            w.weak_alive[1].store(true, Relaxed);
            let s = w.seq.load(Relaxed);
            w.seq.store(s + 1, Relaxed);
            shuttle::sync::atomic::fence(Release);
            w.current.store(1, Release);
            w.seq.store(s + 2, Release);
            // retire_fn(drop(old Weak)): after a grace period.
            let pinned: Vec<bool> = w.pinned.iter().map(|p| p.load(SeqCst)).collect();
            drop_strong(&w, 0);
            for (r, was) in pinned.into_iter().enumerate() {
                while was && w.pinned[r].load(SeqCst) {
                    thread::yield_now();
                }
            }
            w.weak_alive[0].store(false, SeqCst);
        })
    };
    for r in readers {
        r.join().unwrap();
    }
    chdir.join().unwrap();
    assert!(w.dropped[0].load(SeqCst), "the old cwd leaked");
}

#[test]
fn shuttle_cwd_pins_race_chdir() {
    shuttle::check_random(model, 3000);
    shuttle::check_pct(model, 3000, 3);
}
