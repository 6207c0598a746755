//! Shuttle model of `retire` (`src/retire.rs`): frees that run on the retiring thread
//! after a grace period that crossbeam detects.
//!
//! * An `RwLock` stands in for the epoch: readers hold it shared while pinned; the
//!   collector (crossbeam running deferred functions) takes it exclusively, so whatever it
//!   runs was deferred before every reader pinned at that moment unpinned.
//! * The owner publishes objects in a slot one after another (as a hash chain or a cwd
//!   pointer is updated), retires each replaced object into its local batch, seals a batch
//!   by deferring a flag setter, and frees the batches whose flags are set.
//! * Readers pin, load the slot and use the object.
//!
//! Checked: a reader never uses a freed object; every retired object is freed exactly
//! once, by the owner; the current object is never freed.

use shuttle::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use shuttle::sync::{Arc, Mutex, RwLock};
use shuttle::thread;

const OBJECTS: usize = 5;
const BATCH: usize = 2;

struct World {
    epoch: RwLock<()>,
    slot: AtomicUsize,
    freed: Vec<AtomicUsize>,
    /// crossbeam's queue of deferred functions (here: flag setters only).
    deferred: Mutex<Vec<Arc<AtomicBool>>>,
}

impl World {
    /// The collector: one grace period, then run what was deferred before it.
    fn collect(&self) {
        let batch: Vec<_> = self.deferred.lock().unwrap().drain(..).collect();
        let _grace = self.epoch.write().unwrap();
        for flag in batch {
            flag.store(true, Ordering::Release);
        }
    }

    fn free(&self, i: usize) {
        let before = self.freed[i].fetch_add(1, Ordering::AcqRel);
        assert_eq!(before, 0, "object {i} freed twice");
    }
}

struct Owner {
    current: Vec<usize>,
    sealed: Vec<(Arc<AtomicBool>, Vec<usize>)>,
}

impl Owner {
    fn retire(&mut self, w: &World, i: usize) {
        self.current.push(i);
        if self.current.len() >= BATCH {
            self.seal(w);
        }
    }
    fn seal(&mut self, w: &World) {
        if self.current.is_empty() {
            return;
        }
        let flag = Arc::new(AtomicBool::new(false));
        w.deferred.lock().unwrap().push(flag.clone());
        self.sealed.push((flag, std::mem::take(&mut self.current)));
        self.free_ready(w);
    }
    fn free_ready(&mut self, w: &World) {
        while self
            .sealed
            .first()
            .is_some_and(|(f, _)| f.load(Ordering::Acquire))
        {
            let (_, items) = self.sealed.remove(0);
            for i in items {
                w.free(i);
            }
        }
    }
}

fn retire_model() {
    let w = Arc::new(World {
        epoch: RwLock::new(()),
        slot: AtomicUsize::new(0),
        freed: (0..OBJECTS).map(|_| AtomicUsize::new(0)).collect(),
        deferred: Mutex::new(Vec::new()),
    });
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let w = w.clone();
            thread::spawn(move || {
                for _ in 0..2 {
                    let _pin = w.epoch.read().unwrap();
                    let i = w.slot.load(Ordering::Acquire);
                    assert_eq!(w.freed[i].load(Ordering::Acquire), 0, "read a freed object");
                }
            })
        })
        .collect();
    let collector = {
        let w = w.clone();
        thread::spawn(move || {
            for _ in 0..3 {
                w.collect();
                thread::yield_now();
            }
        })
    };
    let mut owner = Owner {
        current: Vec::new(),
        sealed: Vec::new(),
    };
    for next in 1..OBJECTS {
        let old = w.slot.swap(next, Ordering::AcqRel);
        owner.retire(&w, old);
    }
    for r in readers {
        r.join().unwrap();
    }
    collector.join().unwrap();
    // reclaim_local: seal the rest, let grace periods pass, free what is ready.
    owner.seal(&w);
    while !owner.sealed.is_empty() {
        w.collect();
        owner.free_ready(&w);
    }
    for i in 0..OBJECTS - 1 {
        assert_eq!(w.freed[i].load(Ordering::Acquire), 1, "object {i} leaked");
    }
    assert_eq!(w.freed[OBJECTS - 1].load(Ordering::Acquire), 0);
}

#[test]
fn shuttle_retire_frees_locally_after_a_grace_period() {
    shuttle::check_random(retire_model, 3000);
    shuttle::check_pct(retire_model, 3000, 3);
}
