//! A per-CPU counter (Linux's `percpu_counter`, without the batching): one cache-padded
//! atomic per CPU. `add` touches only the calling CPU's line, so counting on many CPUs at
//! once shares nothing; `sum` reads every line and is exact only when nobody is adding.
//! The CPU is the thread's hint, looked up again every few adds (as the per-CPU
//! reference counts do: `percpu_ref::arena`), since asking the kernel costs more than the
//! add.
//!
//! A thread may migrate between reading its CPU number and adding, so two threads can add
//! to the same shard: that is why each shard is an atomic (a `Relaxed` RMW, never a lost
//! update). A single shard may go negative (added on one CPU, taken away on another); only
//! the sum means anything.
//!
//! Orderings: `Relaxed` throughout. A counter orders nothing by itself; a caller that needs
//! "every add before X is in the sum" gets it from the synchronisation around X (a lock,
//! or a join), as Linux's `percpu_counter_sum` callers do.

use crate::cpu;
use crossbeam_utils::CachePadded;
use std::sync::atomic::{AtomicIsize, Ordering};

/// See the module docs.
pub struct PerCpuCounter {
    shards: Box<[CachePadded<AtomicIsize>]>,
}

impl PerCpuCounter {
    /// A counter at zero with one shard per CPU, or a single shard (`per_cpu == false`:
    /// the legacy designs' one shared counter).
    pub fn new(per_cpu: bool) -> PerCpuCounter {
        let n = if per_cpu { cpu::num_cpus() } else { 1 };
        PerCpuCounter {
            shards: (0..n)
                .map(|_| CachePadded::new(AtomicIsize::new(0)))
                .collect(),
        }
    }

    /// Adds `delta` on the calling CPU's shard.
    #[inline]
    pub fn add(&self, delta: isize) {
        let s = crate::percpu_ref::arena::hinted_shard(self.shards.len());
        self.shards[s].fetch_add(delta, Ordering::Relaxed);
    }

    /// The sum of every shard (exact when no `add` runs concurrently).
    pub fn sum(&self) -> isize {
        self.shards.iter().map(|s| s.load(Ordering::Relaxed)).sum()
    }

    /// How many shards (CPUs) it has.
    pub fn shards(&self) -> usize {
        self.shards.len()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn sums_adds_from_many_threads() {
        let c = PerCpuCounter::new(true);
        assert_eq!(c.shards(), cpu::num_cpus());
        std::thread::scope(|s| {
            for t in 0..8 {
                let c = &c;
                s.spawn(move || {
                    for i in 0..10_000 {
                        c.add(if (i + t) % 3 == 0 { -1 } else { 2 });
                    }
                });
            }
        });
        let per_thread = |t: isize| -> isize {
            (0..10_000)
                .map(|i| if (i + t) % 3 == 0 { -1 } else { 2 })
                .sum()
        };
        assert_eq!(c.sum(), (0..8).map(per_thread).sum::<isize>());
    }

    #[test]
    fn legacy_has_one_shard() {
        let c = PerCpuCounter::new(false);
        assert_eq!(c.shards(), 1);
        c.add(5);
        c.add(-7);
        assert_eq!(c.sum(), -2);
    }
}
