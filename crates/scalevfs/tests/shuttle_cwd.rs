//! Shuttle model of the cwd protocol (`src/cwd.rs`), written against shuttle's atomics and
//! locks so every interleaving shuttle picks is a real schedule of the protocol:
//!
//! * the cwd is a slot index mirrored under a sequence counter; `chdir` (serialized by a
//!   mutex) stores a new index inside a write section, then drops its count on the old
//!   dentry; a dentry whose count reaches zero is retired, and freed only after a grace
//!   period (an `RwLock` standing in for the epoch: readers hold it shared while pinned,
//!   the collector takes it exclusively), as crossbeam's deferred destruction does; a
//!   `dput` while pinned only retires, it never waits;
//! * borrowing readers (getcwd) pin, read the index between `read_begin` and
//!   `read_retry`, and use the dentry without a count;
//! * counting readers (relative lookups) do the same and take a count with
//!   `get_not_dead` before validating, dropping it if a chdir raced.
//!
//! Checked: a reader never uses a freed dentry; a validated index is one some chdir
//! stored; counts never go negative; every dentry that stopped being the cwd is freed
//! once the readers are gone (no leak), and the final cwd is not.

use shuttle::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, AtomicUsize, Ordering};
use shuttle::sync::{Arc, Mutex, RwLock};
use shuttle::thread;

const SLOTS: usize = 3;
const DEAD: i32 = -128;

struct Dentry {
    /// The count; `DEAD` once killed (as `LockRef::mark_dead`).
    count: AtomicI32,
    freed: AtomicBool,
}

struct World {
    dentries: Vec<Dentry>,
    /// The epoch: pinned readers hold it shared.
    epoch: RwLock<()>,
    seq: AtomicU32,
    cwd: AtomicUsize,
    /// Serializes chdir (the cwd's `held` mutex).
    writer: Mutex<()>,
    /// Killed dentries waiting for a grace period (the epoch's garbage).
    retired: Mutex<Vec<usize>>,
}

impl World {
    fn new() -> World {
        let dentries = (0..SLOTS)
            .map(|_| Dentry {
                // Slot 0 starts as the cwd (its count is the cwd's); the others are held
                // by whoever will chdir to them.
                count: AtomicI32::new(1),
                freed: AtomicBool::new(false),
            })
            .collect::<Vec<_>>();
        World {
            dentries,
            epoch: RwLock::new(()),
            seq: AtomicU32::new(0),
            cwd: AtomicUsize::new(0),
            writer: Mutex::new(()),
            retired: Mutex::new(Vec::new()),
        }
    }

    fn read_begin(&self) -> u32 {
        loop {
            let s = self.seq.load(Ordering::Acquire);
            if s & 1 == 0 {
                return s;
            }
            thread::yield_now();
        }
    }

    fn read_retry(&self, s: u32) -> bool {
        std::sync::atomic::fence(Ordering::Acquire);
        self.seq.load(Ordering::Relaxed) != s
    }

    /// `get_not_dead`.
    fn try_get(&self, i: usize) -> bool {
        let c = &self.dentries[i].count;
        let mut v = c.load(Ordering::Relaxed);
        loop {
            if v <= 0 {
                return false; // dead (or at zero and about to die: never for a cwd)
            }
            match c.compare_exchange(v, v + 1, Ordering::Acquire, Ordering::Relaxed) {
                Ok(_) => return true,
                Err(now) => v = now,
            }
        }
    }

    /// `dput`: the last count kills the dentry and retires it.
    fn put(&self, i: usize) {
        let d = &self.dentries[i];
        let old = d.count.fetch_sub(1, Ordering::AcqRel);
        assert!(old >= 1, "count went negative on {i}");
        if old == 1
            && d.count
                .compare_exchange(0, DEAD, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
        {
            self.retired.lock().unwrap().push(i);
        }
    }

    /// The collector: frees what was retired once every reader pinned before has unpinned.
    fn collect(&self) {
        let _grace = self.epoch.write().unwrap();
        for i in self.retired.lock().unwrap().drain(..) {
            self.dentries[i].freed.store(true, Ordering::Release);
        }
    }

    /// `Cwd::set`: the caller passes in its count on `new`.
    fn chdir(&self, new: usize) {
        let old = {
            let _w = self.writer.lock().unwrap();
            let s = self.seq.load(Ordering::Relaxed);
            self.seq.store(s + 1, Ordering::Relaxed);
            std::sync::atomic::fence(Ordering::Release);
            let old = self.cwd.load(Ordering::Relaxed);
            self.cwd.store(new, Ordering::Relaxed);
            self.seq.store(s + 2, Ordering::Release);
            old
        };
        self.put(old);
    }

    /// `Cwd::with_borrowed`: returns the slot it used, checking it was never freed.
    fn getcwd(&self) -> usize {
        let _pin = self.epoch.read().unwrap();
        loop {
            let s = self.read_begin();
            let i = self.cwd.load(Ordering::Relaxed);
            assert!(
                !self.dentries[i].freed.load(Ordering::Acquire),
                "borrowed a freed dentry"
            );
            if !self.read_retry(s) {
                return i;
            }
        }
    }

    /// `Cwd::get`: a counted slot.
    fn get(&self) -> usize {
        let _pin = self.epoch.read().unwrap();
        loop {
            let s = self.read_begin();
            let i = self.cwd.load(Ordering::Relaxed);
            assert!(!self.dentries[i].freed.load(Ordering::Acquire));
            let counted = self.try_get(i);
            if self.read_retry(s) {
                if counted {
                    self.put(i);
                }
                continue;
            }
            assert!(counted, "the validated cwd {i} was dead");
            return i;
        }
    }
}

fn cwd_model() {
    let w = Arc::new(World::new());
    let readers: Vec<_> = (0..2)
        .map(|r| {
            let w = w.clone();
            thread::spawn(move || {
                for _ in 0..2 {
                    let i = if r == 0 { w.getcwd() } else { w.get() };
                    assert!(i < SLOTS);
                    if r == 1 {
                        w.put(i);
                    }
                }
            })
        })
        .collect();
    // The chdir-ing thread: slot 0 -> 1 -> 2, passing its count on each.
    w.chdir(1);
    w.collect();
    w.chdir(2);
    w.collect();
    for r in readers {
        r.join().unwrap();
    }
    w.collect();
    for i in 0..2 {
        assert!(
            w.dentries[i].freed.load(Ordering::Acquire),
            "old cwd {i} leaked"
        );
    }
    assert!(!w.dentries[2].freed.load(Ordering::Acquire));
    assert_eq!(w.dentries[2].count.load(Ordering::Acquire), 1);
}

#[test]
fn shuttle_cwd_borrow_and_count_against_chdir() {
    shuttle::check_random(cwd_model, 3000);
    shuttle::check_pct(cwd_model, 3000, 3);
}
