//! Shuttle model of the descriptor table's protocol (the parent module's docs), on
//! shuttle's atomics so that every interleaving shuttle picks is a real schedule of it.
//! The group hints run the table's own code (`chunk.rs`'s `note_freed`, `mark_full_if`,
//! `hint_says_full`, generic over the atomic); the slot scan mirrors `mod.rs` step for
//! step, with groups of [`GROUP`] slots instead of 64 (so that groups fill and empty
//! within a few operations):
//!
//! * `alloc` scans upwards, skipping groups whose hint is FULL, and CASes the first null
//!   slot; a claim in the upper half of a group whose slots below were all in use tries
//!   to mark the group FULL (OPEN -> PENDING, re-read every slot, PENDING -> FULL/OPEN);
//! * `close` swaps the slot to null, then resets a PENDING or FULL hint to OPEN;
//! * `replace` (dup2) swaps its file into the slot.
//!
//! Each file carries a count of the slots that hold it. Checked: every file installed is
//! dropped exactly once; an allocation never skips a descriptor that was free all the
//! time since a close that happened before it (each slot counts the closes that began
//! on it, so "free all the time" is decidable after the fact); once everyone is done, no
//! group marked FULL has a free slot.

use super::chunk::{hint_says_full, mark_full_if, note_freed, HintWord};
use shuttle::sync::atomic::{AtomicI32, AtomicU64, AtomicUsize, Ordering};
use shuttle::sync::Arc;
use shuttle::thread;

const GROUP: usize = 2;
const GROUPS: usize = 2;
const FDS: usize = GROUP * GROUPS;
const FILES: usize = 8;

impl HintWord for AtomicU64 {
    fn load(&self, o: Ordering) -> u64 {
        AtomicU64::load(self, o)
    }
    fn cas(&self, current: u64, new: u64) -> Result<u64, u64> {
        self.compare_exchange(current, new, Ordering::SeqCst, Ordering::SeqCst)
    }
}

struct Table {
    /// 0 = free, else file id + 1.
    slots: [AtomicUsize; FDS],
    hints: [AtomicU64; GROUPS],
    /// Per slot: closes begun on it (model bookkeeping, not part of the protocol).
    closes: [AtomicUsize; FDS],
    /// Per file: installs minus drops.
    counts: [AtomicI32; FILES],
}

impl Table {
    fn new() -> Table {
        Table {
            slots: std::array::from_fn(|_| AtomicUsize::new(0)),
            hints: std::array::from_fn(|_| AtomicU64::new(0)),
            closes: std::array::from_fn(|_| AtomicUsize::new(0)),
            counts: std::array::from_fn(|_| AtomicI32::new(0)),
        }
    }

    fn drop_file(&self, slot_value: usize) {
        let prev = self.counts[slot_value - 1].fetch_sub(1, Ordering::SeqCst);
        assert!(prev > 0, "file {} dropped twice", slot_value - 1);
    }

    fn alloc(&self, file: usize) -> Option<usize> {
        self.counts[file].fetch_add(1, Ordering::SeqCst);
        for g in 0..GROUPS {
            if hint_says_full(&self.hints[g]) {
                continue;
            }
            for j in 0..GROUP {
                let fd = g * GROUP + j;
                if self.slots[fd].load(Ordering::Relaxed) != 0 {
                    continue;
                }
                if self.slots[fd]
                    .compare_exchange(0, file + 1, Ordering::AcqRel, Ordering::Relaxed)
                    .is_ok()
                {
                    self.maybe_mark_full(g, j);
                    return Some(fd);
                }
            }
        }
        self.drop_file(file + 1);
        None
    }

    fn maybe_mark_full(&self, g: usize, j: usize) {
        let in_use = |j: usize| self.slots[g * GROUP + j].load(Ordering::SeqCst) != 0;
        if j < GROUP / 2 || !(j + 1..GROUP).all(in_use) {
            return;
        }
        mark_full_if(&self.hints[g], || (0..GROUP).all(in_use));
    }

    fn close(&self, fd: usize) -> bool {
        self.close_counted(fd).0
    }

    /// Closes `fd`; also returns the number of closes begun on it, this one included.
    fn close_counted(&self, fd: usize) -> (bool, usize) {
        let closes = self.closes[fd].fetch_add(1, Ordering::SeqCst) + 1;
        let p = self.slots[fd].swap(0, Ordering::SeqCst);
        if p == 0 {
            return (false, closes);
        }
        note_freed(&self.hints[fd / GROUP]);
        self.drop_file(p);
        (true, closes)
    }

    fn replace(&self, fd: usize, file: usize) {
        self.counts[file].fetch_add(1, Ordering::SeqCst);
        let old = self.slots[fd].swap(file + 1, Ordering::AcqRel);
        if old != 0 {
            self.drop_file(old);
        }
    }

    /// Closes `fd` (which the caller holds), then allocates: if the close emptied the
    /// slot, the allocation may not pass over `fd` if it stayed free from the close to
    /// the allocation's end.
    fn close_then_alloc(&self, fd: usize, file: usize) -> Option<usize> {
        let (closed, closes) = self.close_counted(fd);
        let got = self.alloc(file);
        // A close that found the slot empty (a dup2 and another close got there first)
        // freed nothing: the close that did may still be running.
        if closed && got.is_none_or(|r| r > fd) {
            let still_free = self.slots[fd].load(Ordering::SeqCst) == 0
                && self.closes[fd].load(Ordering::SeqCst) == closes;
            assert!(
                !still_free,
                "allocation got {got:?} past fd {fd}, free since a close before it"
            );
        }
        got
    }

    fn check_end(&self) {
        for g in 0..GROUPS {
            if hint_says_full(&self.hints[g]) {
                for j in 0..GROUP {
                    assert_ne!(
                        self.slots[g * GROUP + j].load(Ordering::SeqCst),
                        0,
                        "group {g} marked full"
                    );
                }
            }
        }
        for fd in 0..FDS {
            self.close(fd);
        }
        for (f, c) in self.counts.iter().enumerate() {
            assert_eq!(
                c.load(Ordering::SeqCst),
                0,
                "file {f} leaked or dropped twice"
            );
        }
    }
}

/// Runs `a` and `b` on two threads and `main` on this one, over random schedules, then
/// checks the end state.
fn model(a: fn(&Table), b: fn(&Table), main: fn(&Table)) {
    shuttle::check_random(
        move || {
            let t = Arc::new(Table::new());
            let threads = [a, b].map(|f| {
                let t = t.clone();
                thread::spawn(move || f(&t))
            });
            main(&t);
            for h in threads {
                h.join().unwrap();
            }
            t.check_end();
        },
        50_000,
    );
}

/// Two threads fill groups and close and reopen descriptors in them, so that fills
/// (PENDING -> FULL) race closes in the same group: no completed close is ever passed
/// over by a later allocation of the closing thread, and no FULL mark outlives a free
/// slot.
#[test]
fn shuttle_fill_races_close() {
    model(
        |t| {
            let x = t.alloc(0).unwrap();
            let y = t.alloc(1);
            if let Some(r) = t.close_then_alloc(x, 2) {
                t.close(r);
            }
            if let Some(y) = y {
                t.close_then_alloc(y, 3);
            }
        },
        |t| {
            let x = t.alloc(4).unwrap();
            let _ = t.alloc(5);
            t.close_then_alloc(x, 6);
        },
        |_| {},
    );
}

/// dup2 onto descriptors that allocations and closes race for: no file is lost or
/// dropped twice, and the hints stay truthful.
#[test]
fn shuttle_dup2_against_alloc_and_close() {
    model(
        |t| {
            if let Some(fd) = t.alloc(0) {
                t.close_then_alloc(fd, 1);
            }
            let _ = t.alloc(2);
        },
        |t| {
            t.replace(1, 3);
            t.replace(0, 4);
            t.close(1);
        },
        |t| {
            let _ = t.alloc(5);
        },
    );
}
