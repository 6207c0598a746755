//! TODO: seqlock workloads.

use crate::Workload;

pub fn workloads() -> Vec<Box<dyn Workload>> {
    Vec::new()
}
