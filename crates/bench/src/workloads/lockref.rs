//! lockref workloads: `dget`/`dput` pairs on a lockref.
//!
//! * `lockref-shared`: every thread takes and drops references to one shared object (a
//!   hot dentry such as `/` or a shared working directory). Legacy takes the lock for
//!   every change; scalable changes the count by compare-exchange.
//! * `lockref-shared-locked`: the same, plus one short critical section under the object's
//!   lock per batch (other `d_lock` users on a hot dentry). This is where Linux's lockref
//!   collapses into always taking the lock; ours waits for the holder and returns to the
//!   lockless path, which the instance's lock statistics show.
//! * `lockref-private`: each thread uses its own object, each on its own cache line: the
//!   commuting case, which should scale with the cores under both designs.
//!
//! One operation is one get/put pair; a worker call does [`BATCH`] of them. The instance
//! holds one reference itself, so the puts never drop the last reference.

use crate::{Design, Instance, Workload};
use crossbeam_utils::CachePadded;
use scalevfs_primitives::lockref::{thread_stats, LegacyRef, LockRef, LockRefStats, RefCount};
use std::sync::atomic::{AtomicU64, Ordering};

/// get/put pairs per worker call.
pub const BATCH: u64 = 64;

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Kind {
    Shared,
    SharedLocked,
    Private,
}

struct LockrefWorkload(Kind);

/// All the lockref workloads, in report order.
pub fn workloads() -> Vec<Box<dyn Workload>> {
    vec![
        Box::new(LockrefWorkload(Kind::Shared)),
        Box::new(LockrefWorkload(Kind::SharedLocked)),
        Box::new(LockrefWorkload(Kind::Private)),
    ]
}

impl Workload for LockrefWorkload {
    fn name(&self) -> &'static str {
        match self.0 {
            Kind::Shared => "lockref-shared",
            Kind::SharedLocked => "lockref-shared-locked",
            Kind::Private => "lockref-private",
        }
    }

    fn description(&self) -> &'static str {
        match self.0 {
            Kind::Shared => "lockref: get/put pairs on one shared refcount (a hot dentry)",
            Kind::SharedLocked => {
                "lockref: get/put pairs on one shared refcount, plus one lock/unlock per 64 \
                 pairs (other d_lock users): does the lockless path survive lock traffic?"
            }
            Kind::Private => {
                "lockref: get/put pairs, each thread its own refcount (own cache line)"
            }
        }
    }

    fn designs(&self) -> &'static [Design] {
        &[Design::Legacy, Design::Scalable]
    }

    fn setup(&self, design: Design, threads: usize) -> Result<Box<dyn Instance>, String> {
        if threads == 0 {
            return Err("lockref workloads need at least one thread".into());
        }
        match design {
            Design::Legacy => Ok(Box::new(Objects::<LegacyRef>::new(self.0, threads))),
            Design::Scalable => Ok(Box::new(Objects::<LockRef>::new(self.0, threads))),
            Design::Host => Err(format!("{} has no host-kernel variant", self.name())),
        }
    }
}

/// The objects of one instance: one shared object, or one per thread; each on its own
/// cache line so that only the sharing the workload intends shows.
struct Objects<R> {
    kind: Kind,
    objs: Vec<CachePadded<R>>,
    /// [`LockRefStats`] summed over finished workers (scalable design only).
    waits: AtomicU64,
    fallbacks: AtomicU64,
    locked: AtomicU64,
    ops: AtomicU64,
}

impl<R: RefCount> Objects<R> {
    fn new(kind: Kind, threads: usize) -> Self {
        let n = if kind == Kind::Private { threads } else { 1 };
        Objects {
            kind,
            // The instance's own reference: puts never drop the last one.
            objs: (0..n).map(|_| CachePadded::new(R::new(1))).collect(),
            waits: AtomicU64::new(0),
            fallbacks: AtomicU64::new(0),
            locked: AtomicU64::new(0),
            ops: AtomicU64::new(0),
        }
    }
}

/// A dput that never expects the last reference (the instance holds one).
#[inline]
fn put<R: RefCount>(r: &R) {
    if let Some(mut g) = r.put_or_lock() {
        g.dec();
    }
}

/// A worker's state; adds its thread's lock statistics to the instance when dropped.
struct Worker<'a, R> {
    inst: &'a Objects<R>,
    obj: &'a R,
    /// The thread the worker was made on, and its statistics then: the stats are
    /// per-thread, so they are only accounted if the worker is dropped there too.
    thread: std::thread::ThreadId,
    start: LockRefStats,
    ops: u64,
}

impl<R: RefCount> Worker<'_, R> {
    #[inline]
    fn batch(&mut self) -> u64 {
        let r = self.obj;
        for _ in 0..BATCH {
            r.get();
            put(r);
        }
        if self.inst.kind == Kind::SharedLocked {
            let mut g = r.lock();
            g.inc();
            g.dec();
        }
        self.ops += BATCH;
        BATCH
    }
}

impl<R> Drop for Worker<'_, R> {
    fn drop(&mut self) {
        let d = if std::thread::current().id() == self.thread {
            thread_stats().since(self.start)
        } else {
            LockRefStats::default()
        };
        // Relaxed: plain statistics, read after the workers are gone.
        self.inst.waits.fetch_add(d.waits, Ordering::Relaxed);
        self.inst
            .fallbacks
            .fetch_add(d.fallbacks, Ordering::Relaxed);
        self.inst.locked.fetch_add(d.locked, Ordering::Relaxed);
        self.inst.ops.fetch_add(self.ops, Ordering::Relaxed);
    }
}

impl<R: RefCount> Instance for Objects<R> {
    fn worker(&self, thread: usize) -> Box<dyn FnMut() -> u64 + '_> {
        let obj: &R = &self.objs[thread % self.objs.len()];
        let mut w = Worker {
            inst: self,
            obj,
            thread: std::thread::current().id(),
            start: thread_stats(),
            ops: 0,
        };
        Box::new(move || w.batch())
    }

    fn lockstat(&self) -> Option<String> {
        let ops = self.ops.load(Ordering::Relaxed);
        let (waits, fallbacks, locked) = (
            self.waits.load(Ordering::Relaxed),
            self.fallbacks.load(Ordering::Relaxed),
            self.locked.load(Ordering::Relaxed),
        );
        if ops == 0 {
            return None;
        }
        Some(format!(
            "lockref: {ops} get/put pairs; fast path waited for the lock {waits} times, \
             {fallbacks} budget fallbacks, {locked} lock acquisitions by get/put \
             (LegacyRef records none: every get and put takes the lock)"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_kebab() {
        let ws = workloads();
        let mut names: Vec<_> = ws.iter().map(|w| w.name()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), ws.len());
        for w in &ws {
            assert!(w.name().starts_with("lockref-"));
            assert!(!w.description().is_empty());
        }
    }

    #[test]
    fn every_workload_runs_for_two_threads() {
        for w in workloads() {
            assert!(w.setup(Design::Host, 2).is_err());
            assert!(w.setup(Design::Legacy, 0).is_err());
            for &d in w.designs() {
                let inst = w.setup(d, 2).unwrap();
                std::thread::scope(|s| {
                    for t in 0..2 {
                        let inst = &inst;
                        s.spawn(move || {
                            let mut work = inst.worker(t);
                            let done: u64 = (0..10).map(|_| work()).sum();
                            assert_eq!(done, 10 * BATCH);
                        });
                    }
                });
                let stat = inst.lockstat().unwrap();
                assert!(
                    stat.contains(&format!("{} get/put pairs", 20 * BATCH)),
                    "{stat}"
                );
            }
        }
    }

    #[test]
    fn counts_return_to_the_instance_reference() {
        let inst = Objects::<LockRef>::new(Kind::SharedLocked, 3);
        std::thread::scope(|s| {
            for t in 0..3 {
                let inst = &inst;
                s.spawn(move || {
                    let mut work = inst.worker(t);
                    for _ in 0..50 {
                        work();
                    }
                });
            }
        });
        assert_eq!(inst.objs[0].count(), 1);
        let p = Objects::<LegacyRef>::new(Kind::Private, 3);
        assert_eq!(p.objs.len(), 3);
        let mut work = p.worker(2);
        work();
        assert!(p.objs.iter().all(|o| o.count() == 1));
    }

    /// Ad-hoc measurement (not a runner): `cargo test -p scalevfs-bench --release --lib
    /// lockref::tests::measure -- --ignored --nocapture`.
    #[test]
    #[ignore]
    fn measure() {
        use std::sync::atomic::AtomicBool;
        use std::time::{Duration, Instant};
        let secs = 0.5;
        for w in workloads() {
            for &d in w.designs() {
                for threads in [1usize, 2, 16, 64] {
                    let inst = w.setup(d, threads).unwrap();
                    let stop = AtomicBool::new(false);
                    let total = AtomicU64::new(0);
                    let t0 = Instant::now();
                    std::thread::scope(|s| {
                        for t in 0..threads {
                            let (inst, stop, total) = (&inst, &stop, &total);
                            s.spawn(move || {
                                let mut work = inst.worker(t);
                                let mut n = 0;
                                while !stop.load(Ordering::Relaxed) {
                                    n += work();
                                }
                                total.fetch_add(n, Ordering::Relaxed);
                            });
                        }
                        std::thread::sleep(Duration::from_secs_f64(secs));
                        stop.store(true, Ordering::Relaxed);
                    });
                    let el = t0.elapsed().as_secs_f64();
                    let ops = total.load(Ordering::Relaxed) as f64 / el;
                    println!(
                        "{:24} {:9} {:3} thr {:8.2} M pairs/s  {}",
                        w.name(),
                        d.name(),
                        threads,
                        ops / 1e6,
                        inst.lockstat().unwrap_or_default()
                    );
                }
            }
        }
    }
}
