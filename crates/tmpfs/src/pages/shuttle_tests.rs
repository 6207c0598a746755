//! Shuttle model of the page tree's reader/writer protocol (module docs): a writer grows
//! the tree (new root whose slot 0 is the old one), publishes a page, rewrites it inside a
//! write section of its sequence counter, then unlinks it and frees it after a grace
//! period; a reader pins, walks root -> slot -> page and copies the page's two words
//! between sequence checks. The reader must never touch a freed page, must see a page it
//! found initialized, and must copy it whole (both words from one write).
//!
//! The epoch is modelled by per-reader `pinned` flags: the grace period after an unlink
//! waits until every reader pinned at that moment has been seen unpinned, which is what
//! crossbeam's epoch (and so `retire`) guarantees.

use shuttle::sync::atomic::{AtomicBool, AtomicUsize, Ordering::*};
use shuttle::thread;
use std::sync::Arc;

const NONE: usize = usize::MAX;
const READERS: usize = 2;

struct World {
    /// Index of the root node (0 or 1); node `n`'s slot 0 is `slots[n]`.
    root: AtomicUsize,
    /// Node 0 (the first root) holds page 0 in its slot; node 1 (the grown root) holds
    /// node 0 in slot 0, represented by `grown`.
    leaf_slot: AtomicUsize,
    grown: AtomicBool,
    /// The page: its sequence, two words, whether it is initialized and freed.
    seq: AtomicUsize,
    words: [AtomicUsize; 2],
    initialized: AtomicBool,
    freed: AtomicBool,
    pinned: [AtomicBool; READERS],
}

fn model() {
    let w = Arc::new(World {
        root: AtomicUsize::new(0),
        leaf_slot: AtomicUsize::new(NONE),
        grown: AtomicBool::new(false),
        seq: AtomicUsize::new(0),
        words: [AtomicUsize::new(0), AtomicUsize::new(0)],
        initialized: AtomicBool::new(false),
        freed: AtomicBool::new(false),
        pinned: [AtomicBool::new(false), AtomicBool::new(false)],
    });
    let readers: Vec<_> = (0..READERS)
        .map(|r| {
            let w = w.clone();
            thread::spawn(move || {
                w.pinned[r].store(true, SeqCst);
                // The walk: the grown root leads to the same leaf through slot 0.
                if w.root.load(Acquire) == 1 {
                    assert!(w.grown.load(Relaxed), "a published root is initialized");
                }
                let page = w.leaf_slot.load(Acquire);
                if page != NONE {
                    assert!(
                        w.initialized.load(Relaxed),
                        "a published page is initialized"
                    );
                    loop {
                        let s = w.seq.load(Acquire);
                        if s % 2 == 1 {
                            thread::yield_now();
                            continue;
                        }
                        assert!(!w.freed.load(Relaxed), "read of a freed page");
                        let a = w.words[0].load(Relaxed);
                        let b = w.words[1].load(Relaxed);
                        shuttle::sync::atomic::fence(Acquire);
                        if w.seq.load(Relaxed) == s {
                            assert_eq!(a, b, "a torn page");
                            break;
                        }
                    }
                }
                w.pinned[r].store(false, SeqCst);
            })
        })
        .collect();
    let writer = {
        let w = w.clone();
        thread::spawn(move || {
            // Make and publish the page (initialized before the Release store).
            w.words[0].store(1, Relaxed);
            w.words[1].store(1, Relaxed);
            w.initialized.store(true, Relaxed);
            w.leaf_slot.store(0, Release);
            // Grow the tree: the old root stays reachable.
            w.grown.store(true, Relaxed);
            w.root.store(1, Release);
            // Rewrite the page inside a write section.
            let s = w.seq.load(Relaxed);
            w.seq.store(s + 1, Relaxed);
            shuttle::sync::atomic::fence(Release);
            w.words[0].store(2, Relaxed);
            w.words[1].store(2, Relaxed);
            w.seq.store(s + 2, Release);
            // Unlink, then wait out every reader pinned now, then free.
            w.leaf_slot.store(NONE, Relaxed);
            let pinned: Vec<bool> = w.pinned.iter().map(|p| p.load(SeqCst)).collect();
            for (r, was) in pinned.into_iter().enumerate() {
                while was && w.pinned[r].load(SeqCst) {
                    thread::yield_now();
                }
            }
            w.freed.store(true, Relaxed);
        })
    };
    for r in readers {
        r.join().unwrap();
    }
    writer.join().unwrap();
}

#[test]
fn shuttle_page_reads_race_rewrite_and_free() {
    shuttle::check_random(model, 3000);
    shuttle::check_pct(model, 3000, 3);
}
