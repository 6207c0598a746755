//! kernfs hashed-lock workloads: threads working on *unrelated* objects.
//!
//! `hashed-distinct`: each thread repeatedly locks its own object, touches it and unlocks,
//! like 200 processes each opening and closing their own sysfs attribute. `legacy` takes
//! one global mutex (kernfs's `kernfs_open_file_mutex`), so all threads serialize on one
//! lock and its cache line; `scalable` takes the object's lock in a hashed table of padded
//! mutexes (`table_bits(ncpus)` bits), so threads mostly take different locks and only
//! hash collisions contend.
//!
//! Set `SCALEVFS_LOCKSTAT=1` to record lock statistics during a run (or switch
//! [`lockstat`] on before `setup`); [`Instance::lockstat`] then returns the table's line.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use crossbeam_utils::CachePadded;
use scalevfs_primitives::hashed::{table_bits, HashedMutexes};
use scalevfs_primitives::lockstat::{self, LockClass};

use crate::{Design, Instance, Workload};

/// Lock/unlock pairs per worker call, to keep the runner's loop out of the measurement.
const BATCH: u64 = 64;

/// The environment variable that switches lockstat on for a run.
pub const LOCKSTAT_ENV: &str = "SCALEVFS_LOCKSTAT";

static TABLE_CLASS: LockClass = LockClass::new("hashed_open_file_mutex");
static GLOBAL_CLASS: LockClass = LockClass::new("global_open_file_mutex");

struct HashedDistinct;

impl Workload for HashedDistinct {
    fn name(&self) -> &'static str {
        "hashed-distinct"
    }

    fn description(&self) -> &'static str {
        "lock/touch/unlock each thread's own object: hashed mutex table sized as kernfs sizes it on a machine of 32 or more CPUs (2*ilog2(32) = 10 bits) vs one global mutex"
    }

    fn designs(&self) -> &'static [Design] {
        &[Design::Legacy, Design::Scalable]
    }

    fn setup(&self, design: Design, threads: usize) -> Result<Box<dyn Instance>, String> {
        Ok(Box::new(Distinct::new(design, threads)?))
    }
}

impl Distinct {
    fn new(design: Design, threads: usize) -> Result<Self, String> {
        if threads == 0 {
            return Err("hashed-distinct needs at least one thread".into());
        }
        let (locking, class) = match design {
            Design::Legacy => (scalevfs_primitives::Locking::Legacy, &GLOBAL_CLASS),
            Design::Scalable => (scalevfs_primitives::Locking::Scalable, &TABLE_CLASS),
            Design::Host => return Err("hashed-distinct has no host design".into()),
        };
        let from_env = std::env::var(LOCKSTAT_ENV).is_ok_and(|v| v == "1");
        class.reset();
        if from_env {
            lockstat::enable();
        }
        // The table kernfs's formula gives the seed's 384-CPU machine (capped at 32 CPUs: 10
        // bits), as any distribution kernel has (kernfs sizes by NR_CPUS). With the 64-lock
        // floor a small machine gets, two threads' objects would still share a lock about
        // one run in 64, and the "disjoint" workload would partly measure hash luck.
        let table = match locking {
            scalevfs_primitives::Locking::Scalable => {
                HashedMutexes::from_fn(table_bits(32), Some(class), |_| ())
            }
            scalevfs_primitives::Locking::Legacy => HashedMutexes::new_for_class(locking, class),
        };
        Ok(Distinct {
            table,
            objects: (0..threads)
                .map(|_| CachePadded::new(AtomicU64::new(0)))
                .collect(),
            class,
            from_env,
        })
    }
}

struct Distinct {
    table: HashedMutexes,
    /// One object per thread, each on its own line: only the locks can be shared.
    objects: Box<[CachePadded<AtomicU64>]>,
    class: &'static LockClass,
    /// Whether this instance switched lockstat on (and must switch it off).
    from_env: bool,
}

impl Instance for Distinct {
    fn worker(&self, thread: usize) -> Box<dyn FnMut() -> u64 + '_> {
        let obj: &AtomicU64 = &self.objects[thread % self.objects.len()];
        Box::new(move || {
            for _ in 0..BATCH {
                let _g = self.table.lock_ptr(obj);
                // The critical section: a read-modify-write the lock makes exclusive.
                obj.store(obj.load(Relaxed) + 1, Relaxed);
            }
            BATCH
        })
    }

    fn lockstat(&self) -> Option<String> {
        Some(lockstat::report_for(&[self.class]))
    }
}

impl Drop for Distinct {
    fn drop(&mut self) {
        if self.from_env {
            lockstat::disable();
        }
    }
}

/// This module's workloads, in the order the report lists them.
pub fn workloads() -> Vec<Box<dyn Workload>> {
    vec![Box::new(HashedDistinct)]
}

#[cfg(test)]
mod tests {
    use super::*;
    use scalevfs_primitives::spinlock::{RawSpinLock, SpinLock};
    use std::time::{Duration, Instant};

    #[test]
    fn every_workload_runs_two_threads() {
        for w in workloads() {
            for &design in w.designs() {
                let inst = w.setup(design, 2).expect("setup");
                std::thread::scope(|s| {
                    for t in 0..2 {
                        let inst = &inst;
                        s.spawn(move || {
                            let mut work = inst.worker(t);
                            assert_eq!((0..3).map(|_| work()).sum::<u64>(), 3 * BATCH);
                        });
                    }
                });
            }
            assert!(w.setup(Design::Host, 2).is_err());
            assert!(w.setup(Design::Scalable, 0).is_err());
        }
    }

    #[test]
    fn each_worker_touches_its_own_object() {
        for design in [Design::Legacy, Design::Scalable] {
            let d = Distinct::new(design, 4).unwrap();
            std::thread::scope(|s| {
                for t in 0..4 {
                    let d = &d;
                    s.spawn(move || {
                        let mut work = d.worker(t);
                        (0..=t).for_each(|_| assert_eq!(work(), BATCH));
                    });
                }
            });
            for (t, o) in d.objects.iter().enumerate() {
                assert_eq!(o.load(Relaxed), (t as u64 + 1) * BATCH);
            }
        }
    }

    /// Best-of-`rounds` ns per op of `f` run `n` times.
    fn ns_per_op(n: u64, rounds: usize, mut f: impl FnMut(u64)) -> f64 {
        (0..rounds)
            .map(|_| {
                let t = Instant::now();
                f(n);
                t.elapsed().as_nanos() as f64 / n as f64
            })
            .fold(f64::INFINITY, f64::min)
    }

    /// The cost of lockstat compiled in but switched off: an uncontended SpinLock
    /// lock/unlock with a class, lockstat off, vs the bare `RawSpinLock`.
    /// `cargo test -p scalevfs-bench --release -- --ignored --nocapture lockstat_off`
    #[test]
    #[ignore = "measurement; run in release with --nocapture"]
    fn lockstat_off_overhead() {
        static C: LockClass = LockClass::new("overhead_probe");
        lockstat::disable();
        let raw = RawSpinLock::new();
        let unclassed = SpinLock::new(0u64);
        let classed = SpinLock::with_class(0u64, &C);
        let n = 20_000_000;
        let (mut r, mut u, mut c) = (f64::INFINITY, f64::INFINITY, f64::INFINITY);
        // Interleave the variants so machine noise hits all of them alike.
        for _ in 0..5 {
            r = r.min(ns_per_op(n, 1, |n| {
                for _ in 0..n {
                    raw.lock();
                    std::hint::black_box(&raw);
                    // SAFETY: locked just above.
                    unsafe { raw.unlock() };
                }
            }));
            u = u.min(ns_per_op(n, 1, |n| {
                for _ in 0..n {
                    std::hint::black_box(&*unclassed.lock());
                }
            }));
            c = c.min(ns_per_op(n, 1, |n| {
                for _ in 0..n {
                    std::hint::black_box(&*classed.lock());
                }
            }));
        }
        println!(
            "lock/unlock ns: raw {r:.3}, unclassed {u:.3}, classed+off {c:.3}; \
             overhead classed+off/raw = {:+.2}%",
            (c / r - 1.0) * 100.0
        );
        lockstat::enable();
        let on = ns_per_op(n / 10, 3, |n| {
            for _ in 0..n {
                std::hint::black_box(&*classed.lock());
            }
        });
        lockstat::disable();
        println!("classed+on {on:.3} ns/op");
        assert_eq!(C.stats().write.acquisitions, 3 * (n / 10));
    }

    /// Throughput of each design at 1, 2 and 16 threads (for the report; no assertion on
    /// speed). `cargo test -p scalevfs-bench --release -- --ignored --nocapture measure_hashed`
    #[test]
    #[ignore = "measurement; run in release with --nocapture"]
    fn measure_hashed_distinct() {
        for threads in [1, 2, 16] {
            for &design in HashedDistinct.designs() {
                let inst = HashedDistinct.setup(design, threads).unwrap();
                let ops = crate::workloads::test_support::ops_in(
                    &*inst,
                    threads,
                    Duration::from_millis(500),
                );
                println!(
                    "hashed-distinct {design:>8} {threads:>2} threads: {:>8.2} Mops/s",
                    ops as f64 / 0.5e6
                );
                if let Some(r) = inst.lockstat() {
                    println!("{r}");
                }
            }
        }
    }
}
