//! Rename-lock workloads (the lockref and rename-seqlock series): many `d_path()`-like readers, rare `rename()`-like writers.
//!
//! The protected data is a "path" of `DEPTH` components, each four `u64` words on its own
//! cache line (a dentry), in [`SeqCell`]s; a writer bumps one component's words together, so
//! a consistent component has four equal words (the invariant readers check). A read walks
//! every component, as `d_path()` walks the parent chain. Thread 0 also writes once every
//! `WRITE_EVERY` operations, like an occasional `rename()` among many `d_path()`s.
//!
//! * `seqlock-read`: each read is `SeqRwLock::read_or_lock` (optimistic pass, shared-lock
//!   fallback) under `scalable`, and the whole rename lock taken exclusively
//!   (`write_seqlock`, as `d_path()` did before the seed) under `legacy`.
//! * `seqlock-shared-read`: each read takes `SeqRwLock::read_lock` (the seed's patched
//!   `d_path()`, which always took the new reader lock) under `scalable`; `legacy` as above.
//!   It isolates what the shared reader lock costs over optimistic reads, and what it gains
//!   over an exclusive lock.

use crate::{Design, Instance, Workload};
use crossbeam_utils::CachePadded;
use scalevfs_primitives::seqlock::{SeqCell, SeqLock, SeqRwLock};
use std::hint::black_box;

/// Thread 0 writes once per this many of its operations.
const WRITE_EVERY: u64 = 1000;
/// Operations per worker call, to keep the runner's loop out of the measurement.
const BATCH: u64 = 256;
/// Components per path walk.
const DEPTH: usize = 8;

/// How a `scalable` reader reads.
#[derive(Copy, Clone)]
enum ReadKind {
    /// `read_or_lock`: optimistic, shared-lock fallback.
    OrLock,
    /// `read_lock`: always shared-locked.
    Shared,
}

struct SeqlockWorkload {
    name: &'static str,
    description: &'static str,
    kind: ReadKind,
}

/// Every seqlock workload, in report order.
pub fn workloads() -> Vec<Box<dyn Workload>> {
    all()
        .into_iter()
        .map(|w| Box::new(w) as Box<dyn Workload>)
        .collect()
}

fn all() -> Vec<SeqlockWorkload> {
    vec![
        SeqlockWorkload {
            name: "seqlock-read",
            description: "rename seqlock: walk an 8-component path under the rename lock, thread 0 writes every 1000 ops; \
                          scalable = SeqRwLock optimistic read with shared-lock fallback, legacy = lock taken exclusively",
            kind: ReadKind::OrLock,
        },
        SeqlockWorkload {
            name: "seqlock-shared-read",
            description: "rename seqlock: as seqlock-read, but scalable readers always take the shared SeqRwLock read lock \
                          (the seed's patched d_path), legacy = lock taken exclusively",
            kind: ReadKind::Shared,
        },
    ]
}

impl Workload for SeqlockWorkload {
    fn name(&self) -> &'static str {
        self.name
    }

    fn description(&self) -> &'static str {
        self.description
    }

    fn designs(&self) -> &'static [Design] {
        &[Design::Legacy, Design::Scalable]
    }

    fn setup(&self, design: Design, threads: usize) -> Result<Box<dyn Instance>, String> {
        Ok(Box::new(self.build(design, threads)?))
    }
}

impl SeqlockWorkload {
    fn build(&self, design: Design, threads: usize) -> Result<SeqlockInstance, String> {
        if threads == 0 {
            return Err("seqlock workloads need at least one thread".into());
        }
        let lock = match design {
            Design::Legacy => Lock::Legacy(SeqLock::new()),
            Design::Scalable => Lock::Scalable(SeqRwLock::new(), self.kind),
            Design::Host => {
                return Err(format!(
                    "{} has no host design (no system call exposes the rename lock)",
                    self.name
                ))
            }
        };
        Ok(SeqlockInstance {
            lock: CachePadded::new(lock),
            path: (0..DEPTH)
                .map(|_| CachePadded::new(SeqCell::new([0; 4])))
                .collect(),
        })
    }
}

// One instance per run, cache-padded anyway: boxing the larger variant would only add a hop.
#[allow(clippy::large_enum_variant)]
enum Lock {
    /// Before the seed: a `seqlock_t` whose pointer-following readers take it exclusively.
    Legacy(SeqLock),
    /// After: a sequence read/write lock.
    Scalable(SeqRwLock, ReadKind),
}

struct SeqlockInstance {
    lock: CachePadded<Lock>,
    /// One cache line per component: readers share them, only the rare writer invalidates one.
    path: Vec<CachePadded<SeqCell<4>>>,
}

/// What a walk saw: a checksum, and whether every component was consistent.
#[derive(Copy, Clone)]
struct Walk {
    sum: u64,
    consistent: bool,
}

impl SeqlockInstance {
    /// Reads every component. May see torn components unless writers are excluded, so it
    /// only reports them; callers judge once the read is validated.
    fn walk(&self) -> Walk {
        let mut w = Walk {
            sum: 0,
            consistent: true,
        };
        for c in &self.path {
            let v = c.load();
            w.consistent &= v.iter().all(|&x| x == v[0]);
            w.sum = w.sum.wrapping_add(v[0]);
        }
        w
    }

    fn read(&self) -> u64 {
        let w = match &*self.lock {
            Lock::Legacy(l) => {
                // As d_path() before the seed: write_seqlock(&rename_lock).
                let _g = l.write();
                self.walk()
            }
            Lock::Scalable(l, ReadKind::OrLock) => l.read_or_lock(|_| self.walk()),
            Lock::Scalable(l, ReadKind::Shared) => {
                let _g = l.read_lock();
                self.walk()
            }
        };
        debug_assert!(w.consistent, "validated read saw a torn component");
        w.sum
    }

    /// Bumps every word of component `i % DEPTH`.
    fn write(&self, i: usize) {
        let c = &self.path[i % DEPTH];
        let bump = |v: [u64; 4]| v.map(|x| x.wrapping_add(1));
        match &*self.lock {
            Lock::Legacy(l) => {
                let _g = l.write();
                c.store(bump(c.load()));
            }
            Lock::Scalable(l, _) => {
                let _g = l.write_lock();
                c.store(bump(c.load()));
            }
        }
    }
}

impl Instance for SeqlockInstance {
    fn worker(&self, thread: usize) -> Box<dyn FnMut() -> u64 + '_> {
        // Thread 0 writes when this reaches zero, once per WRITE_EVERY operations.
        let mut until_write = WRITE_EVERY;
        let mut writes = 0;
        Box::new(move || {
            for _ in 0..BATCH {
                until_write -= 1;
                if thread == 0 && until_write == 0 {
                    self.write(writes);
                    writes += 1;
                } else {
                    black_box(self.read());
                }
                if until_write == 0 {
                    until_write = WRITE_EVERY;
                }
            }
            BATCH
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_workload_runs_on_two_threads() {
        assert_eq!(workloads().len(), all().len());
        for w in all() {
            for &design in w.designs() {
                let inst = w.build(design, 2).expect("setup");
                std::thread::scope(|s| {
                    for t in 0..2 {
                        let inst = &inst;
                        s.spawn(move || {
                            let mut work = inst.worker(t);
                            let done: u64 = (0..20).map(|_| work()).sum();
                            assert_eq!(done, 20 * BATCH);
                        });
                    }
                });
                // Thread 0 did 20 * 256 = 5120 ops, so 5 writes, to components 0..5.
                let seen: Vec<[u64; 4]> = inst.path.iter().map(|c| c.load()).collect();
                let want: Vec<[u64; 4]> = (0..DEPTH).map(|i| [u64::from(i < 5); 4]).collect();
                assert_eq!(seen, want, "{} {design}", w.name());
                assert!(inst.walk().consistent);
                assert_eq!(inst.read(), 5);
                assert!(w.setup(design, 2).is_ok());
            }
            assert!(w.setup(Design::Host, 2).is_err());
            assert!(w.setup(Design::Scalable, 0).is_err());
        }
    }
}
