//! The registry of workloads. Each module contributes `pub fn workloads() -> Vec<Box<dyn Workload>>`.

use crate::Workload;

pub mod counter;
pub mod dlist;
pub mod epoll;
pub mod hashed;
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
    v.extend(locks::workloads());
    v.extend(counter::workloads());
    v
}
