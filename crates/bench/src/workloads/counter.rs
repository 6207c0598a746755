//! `counter`: the cost of one shared, written cache line, as a baseline for every seed.
//!
//! Not a seed of its own: the smallest workload that shows what all five seeds fight.
//! - legacy: every thread does `fetch_add` on one shared `AtomicU64`, so the cache line
//!   bounces between CPUs on every operation;
//! - scalable: every thread does `fetch_add` on its own cache-padded counter (a per-thread
//!   count a reader would sum), so no line is shared;
//! - host: `getppid(2)`, about the cheapest real system call, as the host kernel's
//!   reference cost of one trip into the kernel.
//!
//! Relaxed orderings throughout: the counters order nothing; they only count.

use std::sync::atomic::{AtomicU64, Ordering};

use crossbeam_utils::CachePadded;

use crate::{Design, Instance, Workload};

/// Operations per closure call for the atomics (keeps the runner's loop out of the cost).
const ATOMIC_BATCH: u64 = 1024;
/// Operations per closure call for the system call.
const SYSCALL_BATCH: u64 = 32;

/// This module's workloads, in the order the report lists them.
pub fn workloads() -> Vec<Box<dyn Workload>> {
    vec![Box::new(Counter)]
}

/// The `counter` workload.
pub struct Counter;

/// The state of one run.
pub struct CounterInstance {
    design: Design,
    /// Legacy: the one counter every thread writes.
    shared: CachePadded<AtomicU64>,
    /// Scalable: one counter per thread, each on its own cache line.
    per_thread: Vec<CachePadded<AtomicU64>>,
}

impl CounterInstance {
    /// The sum of all counters (every increment any worker made).
    pub fn total(&self) -> u64 {
        self.shared.load(Ordering::Relaxed)
            + self
                .per_thread
                .iter()
                .map(|c| c.load(Ordering::Relaxed))
                .sum::<u64>()
    }
}

impl Workload for Counter {
    fn name(&self) -> &'static str {
        "counter"
    }
    fn description(&self) -> &'static str {
        "Baseline, no seed: fetch_add on one shared counter (legacy) vs on a per-thread \
         cache-padded counter (scalable); host: getppid(2), one cheap system call."
    }
    fn designs(&self) -> &'static [Design] {
        &Design::ALL
    }
    fn setup(&self, design: Design, threads: usize) -> Result<Box<dyn Instance>, String> {
        Ok(Box::new(CounterInstance::new(design, threads)))
    }
}

impl CounterInstance {
    /// A zeroed counter for `design`, with one padded slot per thread.
    pub fn new(design: Design, threads: usize) -> CounterInstance {
        CounterInstance {
            design,
            shared: CachePadded::new(AtomicU64::new(0)),
            per_thread: (0..threads)
                .map(|_| CachePadded::new(AtomicU64::new(0)))
                .collect(),
        }
    }
}

impl Instance for CounterInstance {
    fn worker(&self, thread: usize) -> Box<dyn FnMut() -> u64 + '_> {
        match self.design {
            Design::Legacy => Box::new(move || {
                for _ in 0..ATOMIC_BATCH {
                    self.shared.fetch_add(1, Ordering::Relaxed);
                }
                ATOMIC_BATCH
            }),
            Design::Scalable => {
                // A thread number beyond the setup's count would be a runner bug; share the
                // last slot rather than panic.
                let mine = &self.per_thread[thread.min(self.per_thread.len().saturating_sub(1))];
                Box::new(move || {
                    for _ in 0..ATOMIC_BATCH {
                        mine.fetch_add(1, Ordering::Relaxed);
                    }
                    ATOMIC_BATCH
                })
            }
            Design::Host => Box::new(|| {
                for _ in 0..SYSCALL_BATCH {
                    // SAFETY: getppid takes no arguments, cannot fail and touches no memory
                    // of ours.
                    std::hint::black_box(unsafe { libc::getppid() });
                }
                SYSCALL_BATCH
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_design_counts_what_it_returns() {
        for design in Design::ALL {
            let inst = CounterInstance::new(design, 4);
            let returned: u64 = std::thread::scope(|s| {
                let hs: Vec<_> = (0..4)
                    .map(|t| {
                        let inst = &inst;
                        s.spawn(move || {
                            let mut f = inst.worker(t);
                            (0..50).map(|_| f()).sum::<u64>()
                        })
                    })
                    .collect();
                hs.into_iter().map(|h| h.join().unwrap()).sum()
            });
            let expected_batch = if design == Design::Host {
                SYSCALL_BATCH
            } else {
                ATOMIC_BATCH
            };
            assert_eq!(returned, 4 * 50 * expected_batch);
            match design {
                Design::Host => assert_eq!(inst.total(), 0),
                Design::Legacy => assert_eq!(inst.shared.load(Ordering::Relaxed), returned),
                Design::Scalable => {
                    assert_eq!(inst.shared.load(Ordering::Relaxed), 0);
                    for c in &inst.per_thread {
                        assert_eq!(c.load(Ordering::Relaxed), 50 * ATOMIC_BATCH);
                    }
                }
            }
        }
    }
}
