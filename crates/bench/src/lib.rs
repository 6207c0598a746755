//! # scalevfs-bench
//!
//! The benchmark suite behind `scalevfs bench`: every workload runs under each design
//! (the seed's `legacy` "before", the `scalable` "after", and where it makes sense the
//! `host` kernel) at several thread counts, and the runner reports medians and ratios.

pub mod workload;
pub mod workloads;

pub use workload::{Design, Instance, Workload};
