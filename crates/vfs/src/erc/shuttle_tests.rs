//! Shuttle model of type-stable reuse against a lock-free lookup (the parent module's
//! docs and the descriptor table's `get`), on shuttle's atomics so that every interleaving
//! shuttle picks is a real schedule of it. The steps mirror the real code:
//!
//! * `new`: take a block from the cache (one cache for all model threads, since shuttle
//!   runs them on one OS thread, which makes reuse across threads as likely as possible)
//!   or a fresh one, write the value, store the count 1;
//! * `put`: decrement; the last one drops the value and returns the block to the cache;
//! * `get`: load the slot, CAS the count up unless zero (looking again on zero), load
//!   the slot again, and keep the count only if it still holds the block;
//! * a writer cycles one set of blocks through two slots: slot 0 only ever holds values
//!   of kind A, slot 1 only kind B, closes with a swap to empty, replaces (dup2) with a
//!   swap.
//!
//! Checked: a lookup of slot 0 never returns a kind-B value (without the second load of
//! the slot it does, within a few hundred schedules); no block is returned to the cache
//! twice; at the end every value was dropped and every block is in the cache.

use shuttle::sync::atomic::{AtomicUsize, Ordering};
use shuttle::sync::{Arc, Mutex};
use shuttle::thread;

const BLOCKS: usize = 4;
const EMPTY: usize = usize::MAX;
const KIND_A: usize = 0;
const KIND_B: usize = 1;

struct Model {
    counts: [AtomicUsize; BLOCKS],
    /// The value: `kind` of the object in the block, `EMPTY` once dropped.
    values: [AtomicUsize; BLOCKS],
    /// Blocks never used yet.
    fresh: AtomicUsize,
    cache: Mutex<Vec<usize>>,
    /// Block index + 1, or 0.
    slots: [AtomicUsize; 2],
}

impl Model {
    fn new_object(&self, kind: usize) -> usize {
        let b = match self.cache.lock().unwrap().pop() {
            Some(b) => b,
            None => self.fresh.fetch_add(1, Ordering::SeqCst),
        };
        assert!(b < BLOCKS, "more live objects than the model allows");
        assert_eq!(self.counts[b].load(Ordering::SeqCst), 0);
        self.values[b].store(kind, Ordering::SeqCst);
        self.counts[b].store(1, Ordering::SeqCst);
        b
    }

    fn put(&self, b: usize) {
        if self.counts[b].fetch_sub(1, Ordering::SeqCst) == 1 {
            assert_ne!(self.values[b].swap(EMPTY, Ordering::SeqCst), EMPTY);
            let mut cache = self.cache.lock().unwrap();
            assert!(!cache.contains(&b), "a block cached twice");
            cache.push(b);
        }
    }

    /// `try_get_raw`: up unless zero.
    fn try_get(&self, b: usize) -> bool {
        let mut n = self.counts[b].load(Ordering::SeqCst);
        loop {
            if n == 0 {
                return false;
            }
            match self.counts[b].compare_exchange(n, n + 1, Ordering::SeqCst, Ordering::SeqCst) {
                Ok(_) => return true,
                Err(v) => n = v,
            }
        }
    }

    /// `FdTable::get`: the block now in `slot`, counted, or `None` if empty.
    fn get(&self, slot: usize) -> Option<usize> {
        loop {
            let v = self.slots[slot].load(Ordering::SeqCst);
            if v == 0 {
                return None;
            }
            let b = v - 1;
            if !self.try_get(b) {
                continue;
            }
            if self.slots[slot].load(Ordering::SeqCst) == v {
                return Some(b);
            }
            self.put(b);
        }
    }

    /// Installs a new object of `slot`'s kind by swapping it in (dup2 when the slot
    /// held one).
    fn replace(&self, slot: usize) {
        let b = self.new_object(slot);
        let old = self.slots[slot].swap(b + 1, Ordering::SeqCst);
        if old != 0 {
            self.put(old - 1);
        }
    }

    fn close(&self, slot: usize) {
        let old = self.slots[slot].swap(0, Ordering::SeqCst);
        if old != 0 {
            self.put(old - 1);
        }
    }
}

#[test]
fn a_lookup_never_returns_an_object_that_reused_the_block_elsewhere() {
    shuttle::check_random(
        || {
            let m = Arc::new(Model {
                counts: std::array::from_fn(|_| AtomicUsize::new(0)),
                values: std::array::from_fn(|_| AtomicUsize::new(EMPTY)),
                fresh: AtomicUsize::new(0),
                cache: Mutex::new(Vec::new()),
                slots: std::array::from_fn(|_| AtomicUsize::new(0)),
            });
            m.replace(KIND_A);
            let writer = {
                let m = m.clone();
                thread::spawn(move || {
                    for _ in 0..2 {
                        m.close(KIND_A);
                        m.replace(KIND_B);
                        m.close(KIND_B);
                        m.replace(KIND_A);
                        m.replace(KIND_A);
                    }
                })
            };
            let reader = {
                let m = m.clone();
                thread::spawn(move || {
                    for _ in 0..3 {
                        if let Some(b) = m.get(KIND_A) {
                            assert_eq!(
                                m.values[b].load(Ordering::SeqCst),
                                KIND_A,
                                "slot 0's lookup returned another slot's object"
                            );
                            m.put(b);
                        }
                    }
                })
            };
            writer.join().unwrap();
            reader.join().unwrap();
            m.close(KIND_A);
            m.close(KIND_B);
            let used = m.fresh.load(Ordering::SeqCst);
            assert_eq!(m.cache.lock().unwrap().len(), used, "a block lost");
            for b in 0..used {
                assert_eq!(
                    m.values[b].load(Ordering::SeqCst),
                    EMPTY,
                    "a value not dropped"
                );
            }
        },
        20_000,
    );
}
