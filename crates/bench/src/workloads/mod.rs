//! The registry of workloads. Each module contributes `pub fn workloads() -> Vec<Box<dyn Workload>>`.

use crate::Workload;

pub mod anyfd;
pub mod counter;
pub mod dlist;
pub mod epoll;
pub mod fuse;
pub mod hashed;
pub mod host_dir;
pub mod kernfs;
pub mod lockref;
pub mod locks;
pub mod seqlock;
pub mod vfs;

/// Every workload, in report order.
pub fn all() -> Vec<Box<dyn Workload>> {
    let mut v = Vec::new();
    v.extend(lockref::workloads());
    v.extend(seqlock::workloads());
    v.extend(hashed::workloads());
    v.extend(kernfs::workloads());
    v.extend(dlist::workloads());
    v.extend(epoll::workloads());
    v.extend(vfs::workloads());
    v.extend(anyfd::workloads());
    v.extend(locks::workloads());
    v.extend(fuse::workloads());
    v.extend(counter::workloads());
    v
}

/// Shared by the workloads' smoke tests.
#[cfg(test)]
pub(crate) mod test_support {
    use crate::{Design, Instance, Workload};
    use std::time::{Duration, Instant};

    /// Runs `threads` workers of `inst` for `len` and returns the operations they did (the
    /// ignored `measure_*` tests' loop; the real measurements are the runner's). Each
    /// worker makes at least one call, as the runner's do: on a loaded machine a thread
    /// may start only after `len` has passed.
    pub fn ops_in(inst: &dyn Instance, threads: usize, len: Duration) -> u64 {
        let deadline = Instant::now() + len;
        std::thread::scope(|s| {
            let hs: Vec<_> = (0..threads)
                .map(|t| {
                    s.spawn(move || {
                        let mut work = inst.worker(t);
                        let mut ops = work();
                        while Instant::now() < deadline {
                            ops += work();
                        }
                        ops
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).sum()
        })
    }

    /// Sets `w` up for `threads` threads under each of its designs and makes `calls` worker
    /// calls on every thread; returns, per design, the operations each thread's calls
    /// reported. Setup errors and worker panics fail the test with the workload's name.
    pub fn run_every_design(
        w: &dyn Workload,
        threads: usize,
        calls: usize,
    ) -> Vec<(Design, Vec<u64>)> {
        w.designs()
            .iter()
            .map(|&design| {
                let inst = w
                    .setup(design, threads)
                    .unwrap_or_else(|e| panic!("{} {design}: {e}", w.name()));
                let ops = std::thread::scope(|s| {
                    let hs: Vec<_> = (0..threads)
                        .map(|t| {
                            let inst = &inst;
                            s.spawn(move || {
                                let mut work = inst.worker(t);
                                (0..calls).map(|_| work()).sum::<u64>()
                            })
                        })
                        .collect();
                    hs.into_iter().map(|h| h.join().unwrap()).collect()
                });
                (design, ops)
            })
            .collect()
    }
}
