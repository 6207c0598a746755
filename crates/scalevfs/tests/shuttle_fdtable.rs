//! Shuttle model of the descriptor-slot protocol (`src/fdtable.rs`), written against
//! shuttle's atomics so that every interleaving shuttle picks is a real schedule of it:
//!
//! * `alloc` claims the lowest clear bit of the allocation word with a CAS, then stores
//!   its file in the slot (it owns that null slot now);
//! * `close` swaps the slot to null, then clears the bit;
//! * `replace` (dup2) sets the bit: if it was clear, the null slot is its own and it
//!   stores; otherwise it CASes an installed file out of the slot, and waits while the
//!   slot is null (an `alloc` or `close` in flight).
//!
//! Each file carries a count of the slots that hold it (one per install). Checked: dup2
//! never fails, every file installed is dropped exactly once (no leak, no double drop),
//! and once everyone is done no descriptor is claimed without a file.

use shuttle::sync::atomic::{AtomicI32, AtomicU64, AtomicUsize, Ordering};
use shuttle::sync::Arc;
use shuttle::thread;

const FDS: usize = 2;
const FILES: usize = 4;

struct Table {
    bits: AtomicU64,
    /// 0 = empty, else file id + 1.
    slots: [AtomicUsize; FDS],
    /// Per file: installs minus drops.
    counts: [AtomicI32; FILES],
}

impl Table {
    fn new() -> Table {
        Table {
            bits: AtomicU64::new(0),
            slots: std::array::from_fn(|_| AtomicUsize::new(0)),
            counts: std::array::from_fn(|_| AtomicI32::new(0)),
        }
    }

    fn drop_file(&self, slot_value: usize) {
        let prev = self.counts[slot_value - 1].fetch_sub(1, Ordering::SeqCst);
        assert!(prev > 0, "file {} dropped twice", slot_value - 1);
    }

    fn alloc(&self, file: usize) -> Option<usize> {
        self.counts[file].fetch_add(1, Ordering::SeqCst);
        let mut v = self.bits.load(Ordering::Relaxed);
        loop {
            let free = !v & ((1 << FDS) - 1);
            if free == 0 {
                self.drop_file(file + 1);
                return None;
            }
            let bit = free.trailing_zeros() as usize;
            match self.bits.compare_exchange(
                v,
                v | (1 << bit),
                Ordering::Acquire,
                Ordering::Relaxed,
            ) {
                Ok(_) => {
                    self.slots[bit].store(file + 1, Ordering::Release);
                    return Some(bit);
                }
                Err(now) => v = now,
            }
        }
    }

    fn close(&self, fd: usize) -> bool {
        let p = self.slots[fd].swap(0, Ordering::AcqRel);
        if p == 0 {
            return false;
        }
        self.bits.fetch_and(!(1 << fd), Ordering::Release);
        self.drop_file(p);
        true
    }

    fn replace(&self, fd: usize, file: usize) {
        self.counts[file].fetch_add(1, Ordering::SeqCst);
        let p = file + 1;
        let old = loop {
            if self.bits.fetch_or(1 << fd, Ordering::Acquire) & (1 << fd) == 0 {
                self.slots[fd].store(p, Ordering::Release);
                break 0;
            }
            let cur = self.slots[fd].load(Ordering::Acquire);
            if cur != 0
                && self.slots[fd]
                    .compare_exchange(cur, p, Ordering::AcqRel, Ordering::Relaxed)
                    .is_ok()
            {
                break cur;
            }
            thread::yield_now();
        };
        if old != 0 {
            self.drop_file(old);
        }
    }
}

fn check_end(t: &Table) {
    for fd in 0..FDS {
        t.close(fd);
    }
    assert_eq!(t.bits.load(Ordering::SeqCst), 0, "a descriptor was lost");
    for (f, c) in t.counts.iter().enumerate() {
        assert_eq!(
            c.load(Ordering::SeqCst),
            0,
            "file {f} leaked or dropped twice"
        );
    }
}

/// An open-then-close races a dup2 onto the descriptor the open is about to get, and a
/// second opener competes for the numbers.
#[test]
fn shuttle_dup2_against_open_and_close() {
    shuttle::check_random(
        || {
            let t = Arc::new(Table::new());
            let opener = {
                let t = t.clone();
                thread::spawn(move || {
                    if let Some(fd) = t.alloc(0) {
                        // dup2 may have replaced it, or the other thread closed it.
                        t.close(fd);
                    }
                })
            };
            let other = {
                let t = t.clone();
                thread::spawn(move || {
                    if let Some(fd) = t.alloc(1) {
                        t.close(fd);
                    }
                })
            };
            t.replace(0, 2);
            t.replace(1, 3);
            opener.join().unwrap();
            other.join().unwrap();
            check_end(&t);
        },
        20_000,
    );
}

/// Two dup2s onto the same descriptor race a close of it: one of the files ends up
/// installed (or none, if the close came last), and every replaced file is dropped once.
#[test]
fn shuttle_dup2_against_dup2_and_close() {
    shuttle::check_random(
        || {
            let t = Arc::new(Table::new());
            let a = {
                let t = t.clone();
                thread::spawn(move || t.replace(0, 0))
            };
            let b = {
                let t = t.clone();
                thread::spawn(move || t.replace(0, 1))
            };
            t.close(0);
            a.join().unwrap();
            b.join().unwrap();
            check_end(&t);
        },
        20_000,
    );
}
