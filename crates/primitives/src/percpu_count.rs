//! # percpu_count: references counted in per-CPU cells until the owner lets go
//!
//! Linux's `percpu_ref` reduced to a count: [`PcpuCount`] counts the references that many
//! short-lived objects hold on one long-lived owner (the items of an epoll instance hold
//! the instance). While the owner lives, a reference taken or dropped on a CPU changes that
//! CPU's *cell*, a cache line that other CPUs write only when a thread migrates between
//! its read of the CPU number and its write; so threads on different CPUs that take and
//! drop references share no line. When the owner lets go ([`PcpuCount::kill`]), every
//! cell is closed and the references still held are moved into one atomic count; from
//! then on each drop decrements it, and the drop that takes it to zero is told so.
//!
//! ## Cells, made on demand
//! A count starts with no cells: [`PcpuCount::get`] and [`PcpuCount::put`] change the
//! *central* word, as a plain atomic count would (Linux's `ep->refcount`). The owner calls
//! [`PcpuCount::spread`] once threads meet on it; from then on gets and puts go to the
//! calling CPU's cell (one cache-padded word per CPU: 64 bytes each). A reference taken
//! in one place may be dropped in another (central or any cell), and a cell may go
//! negative: only the sum means anything.
//!
//! ## The protocol
//! - `central` starts at [`BIAS`], the owner's part.
//! - `get` (while the owner lives, or by a holder of a reference: never from zero) and
//!   `put` change a cell by a compare-exchange that refuses [`CLOSED`]; finding the cell
//!   closed (or no cells), they change `central` instead.
//! - `kill` swaps every cell to `CLOSED`, sums what they held (`s`), and adds `s - BIAS`
//!   to `central` in one read-modify-write. The result is the exact number of references
//!   left: every cell change either came before its cell's swap (and is in `s`) or was
//!   refused and redone on `central`. If it is zero, `kill` returns true.
//! - A `put` on `central` that takes it from 1 to 0 returns true. None can before `kill`'s
//!   add: until then `central` holds `BIAS` (2^62), more than any number of references, so
//!   the puts that `kill` has not yet counted cannot take it to zero.
//!
//! Exactly one caller sees zero: the counts are exact and zero is reached once (no `get`
//! starts from zero). Nothing here waits or takes a lock.
//!
//! ## Orderings
//! Every change is an `AcqRel` read-modify-write (the cells' compare-exchanges, `kill`'s
//! swaps and add, the puts' subtractions on `central`), so each holder's uses of the owner
//! happen before its put, each put before the swap or add that reads it, and all of them
//! before the caller that sees zero, which may then free the owner (as `Arc`'s last drop,
//! with the acquire on the last step). The cells are published by a `OnceLock` (its
//! initialisation happens before any `get` of a reader that sees them).

use crate::cpu;
use crate::sync::{AtomicU64, Ordering};
use crossbeam_utils::CachePadded;
use std::sync::OnceLock;

/// The owner's part of `central` until [`PcpuCount::kill`]: more than any number of
/// references.
pub const BIAS: u64 = 1 << 62;
/// A cell's value once [`PcpuCount::kill`] has closed it (no count reaches it: cells hold
/// small two's-complement numbers).
pub const CLOSED: u64 = 1 << 63;

/// See the module docs.
pub struct PcpuCount {
    central: CachePadded<AtomicU64>,
    cells: OnceLock<Box<[CachePadded<AtomicU64>]>>,
}

impl Default for PcpuCount {
    fn default() -> Self {
        PcpuCount::new()
    }
}

impl PcpuCount {
    /// A count of no references, with no cells yet, for a living owner.
    pub fn new() -> PcpuCount {
        PcpuCount {
            central: CachePadded::new(AtomicU64::new(BIAS)),
            cells: OnceLock::new(),
        }
    }

    /// Gives the count one cell per CPU, if it has none (the owner calls it once threads
    /// meet on it; never after [`PcpuCount::kill`]).
    pub fn spread(&self) {
        self.spread_over(cpu::num_cpus());
    }

    fn spread_over(&self, n: usize) {
        self.cells.get_or_init(|| {
            (0..n)
                .map(|_| CachePadded::new(AtomicU64::new(0)))
                .collect()
        });
    }

    /// Whether gets and puts go to per-CPU cells.
    pub fn is_spread(&self) -> bool {
        self.cells.get().is_some()
    }

    /// Takes a reference: while the owner lives (before [`PcpuCount::kill`]), or while
    /// the caller holds one (never from zero).
    #[inline]
    pub fn get(&self) {
        self.get_at(self.current_cell());
    }

    /// Drops a reference: true if it was the last one and the owner has let go, so that
    /// the caller must free the owner.
    #[inline]
    pub fn put(&self) -> bool {
        self.put_at(self.current_cell())
    }

    fn get_at(&self, cell: Option<usize>) {
        self.change_at(cell, 1);
    }

    fn put_at(&self, cell: Option<usize>) -> bool {
        !self.change_at(cell, u64::MAX) && self.put_central()
    }

    fn current_cell(&self) -> Option<usize> {
        self.cells.get().map(|c| cpu::current_shard(c.len()))
    }

    /// Adds `delta` (two's complement) to cell `at`; false if there is no such cell or it
    /// is closed, and then a get has been made on `central` instead (a put is left to the
    /// caller, which must learn whether it reached zero).
    fn change_at(&self, at: Option<usize>, delta: u64) -> bool {
        if let (Some(cells), Some(i)) = (self.cells.get(), at) {
            let cell = &cells[i];
            let mut v = cell.load(Ordering::Relaxed);
            while v != CLOSED {
                // AcqRel: see the module docs ("Orderings").
                match cell.compare_exchange_weak(
                    v,
                    v.wrapping_add(delta),
                    Ordering::AcqRel,
                    Ordering::Relaxed,
                ) {
                    Ok(_) => return true,
                    Err(now) => v = now,
                }
            }
        }
        if delta == 1 {
            // AcqRel: as the cells'.
            self.central.fetch_add(1, Ordering::AcqRel);
        }
        false
    }

    fn put_central(&self) -> bool {
        // AcqRel: the last put acquires every other holder's release.
        self.central.fetch_sub(1, Ordering::AcqRel) == 1
    }

    /// The owner lets go (once): true if no reference is left, so that the caller must
    /// free the owner; otherwise the last [`PcpuCount::put`] will say so.
    pub fn kill(&self) -> bool {
        let mut held = 0u64;
        if let Some(cells) = self.cells.get() {
            for c in cells.iter() {
                // AcqRel: reads every change made to the cell before it closes.
                let v = c.swap(CLOSED, Ordering::AcqRel);
                debug_assert_ne!(v, CLOSED, "killed twice");
                held = held.wrapping_add(v);
            }
        }
        let delta = held.wrapping_sub(BIAS);
        // AcqRel: as the puts'.
        self.central
            .fetch_add(delta, Ordering::AcqRel)
            .wrapping_add(delta)
            == 0
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn a_kill_with_nothing_held_is_the_last() {
        let c = PcpuCount::new();
        assert!(c.kill());
    }

    #[test]
    fn the_last_put_after_the_kill_is_told() {
        for spread in [false, true] {
            let c = PcpuCount::new();
            if spread {
                c.spread_over(4);
            }
            c.get_at(Some(0));
            c.get_at(Some(1));
            c.get_at(Some(1));
            // A reference taken on one CPU and dropped on another.
            assert!(!c.put_at(Some(3)));
            assert!(!c.kill(), "two references are left");
            assert!(!c.put());
            assert!(c.put(), "the last put");
        }
    }

    #[test]
    fn references_taken_before_the_spread_are_counted_after_it() {
        let c = PcpuCount::new();
        c.get();
        c.get();
        c.spread_over(2);
        assert!(!c.put());
        c.get();
        assert!(!c.kill());
        assert!(!c.put());
        assert!(c.put());
    }

    /// Many threads take and drop references on their CPUs (overridden, so that they
    /// spread over the cells and migrate) while the owner lets go: exactly one caller is
    /// told the count reached zero, and only once every reference is dropped.
    #[test]
    fn stress_exactly_one_caller_sees_zero() {
        use std::sync::atomic::AtomicUsize;
        // Plain std atomics for the test's own bookkeeping.
        const THREADS: usize = if cfg!(miri) { 3 } else { 8 };
        const ROUNDS: usize = if cfg!(miri) { 20 } else { 2000 };
        for round in 0..if cfg!(miri) { 2 } else { 20 } {
            let c = PcpuCount::new();
            c.spread_over(4);
            let zeros = AtomicUsize::new(0);
            // Every thread holds one reference taken before the kill, as items do.
            for _ in 0..THREADS {
                c.get();
            }
            std::thread::scope(|s| {
                for t in 0..THREADS {
                    let (c, zeros) = (&c, &zeros);
                    s.spawn(move || {
                        for i in 0..ROUNDS {
                            cpu::set_cpu_override(Some((t + i) % 5));
                            // Take one more while holding ours (never from zero), and
                            // drop it, maybe on another CPU.
                            c.get();
                            cpu::set_cpu_override(Some((t + i + 1) % 5));
                            if c.put() {
                                zeros.fetch_add(1, Ordering::Relaxed);
                            }
                        }
                        cpu::set_cpu_override(Some(t % 3));
                        if c.put() {
                            zeros.fetch_add(1, Ordering::Relaxed);
                        }
                        cpu::set_cpu_override(None);
                    });
                }
                if c.kill() {
                    zeros.fetch_add(1, Ordering::Relaxed);
                }
            });
            assert_eq!(zeros.load(Ordering::Relaxed), 1, "round {round}");
        }
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;
    use loom::sync::atomic::AtomicUsize;
    use loom::sync::Arc;
    use loom::thread;

    /// Two holders drop their references on different cells while the owner lets go:
    /// exactly one of the three sees zero, in every interleaving.
    #[test]
    fn loom_exactly_one_sees_zero() {
        loom::model(|| {
            let c = Arc::new(PcpuCount::new());
            c.spread_over(2);
            c.get_at(Some(0));
            c.get_at(Some(1));
            let zeros = Arc::new(AtomicUsize::new(0));
            let holders: Vec<_> = (0..2)
                .map(|i| {
                    let (c, zeros) = (c.clone(), zeros.clone());
                    thread::spawn(move || {
                        // Dropped on the other cell than it was taken on.
                        if c.put_at(Some(1 - i)) {
                            zeros.fetch_add(1, Ordering::Relaxed);
                        }
                    })
                })
                .collect();
            if c.kill() {
                zeros.fetch_add(1, Ordering::Relaxed);
            }
            for h in holders {
                h.join().unwrap();
            }
            assert_eq!(zeros.load(Ordering::Relaxed), 1);
        });
    }
}
