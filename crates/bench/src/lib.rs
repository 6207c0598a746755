//! # scalevfs-bench
//!
//! The benchmark suite behind `scalevfs bench`: every workload runs under each design
//! (the seed's `legacy` "before", the `scalable` "after", and where it makes sense the
//! `host` kernel) at several thread counts, and the runner reports medians and ratios.
//!
//! ## Method
//!
//! - **Workloads.** A [`Workload`] is set up once per (design, thread count) into an
//!   [`Instance`]; each worker thread asks the instance for its closure once and calls it
//!   in a loop, counting the operations it returns ([`workload`]).
//! - **Rounds.** All workers of a design start together on a barrier and stop on a shared
//!   flag after the round's duration; throughput is the operations counted over the time
//!   from the start to the last worker's last operation ([`runner`]). Each design gets an
//!   untimed warm-up round, then `--repeats` timed rounds (default 5 of 1 s; `--quick`: 3
//!   of 0.15 s).
//! - **Interleaving.** The designs' rounds alternate (legacy, scalable, host, legacy,
//!   scalable, host, ...), each design keeping its own sleeping worker pool, so that noise
//!   from the rest of a shared machine hits every design alike. `--interleave-threads`
//!   interleaves the thread counts too, so that a slow spell cannot pass for a collapse.
//! - **Medians.** A design's throughput is its median round; min and max show the spread.
//!   Noise on a shared VM is one-sided (a descheduled round is slow, never fast), which
//!   the median ignores and a mean would not ([`stats`]).
//! - **Ratios.** `scalable/legacy` and `scalable/host` are medians of the per-repeat ratios
//!   of rounds that ran next to each other, which cancels slow drift of the machine. On a
//!   2-core machine the absolute numbers say little; the ratios are the result.
//!   "Scaling 1 -> 2 threads" is the ratio of a design's medians at 2 and 1 threads: about
//!   2 for a design that shares nothing, below 1 for one that bounces a cache line.
//!   "No collapse" is a design's lowest median at N threads over its best at fewer.
//! - **Oversubscription.** Thread counts above the number of CPUs (16 and 64 here, on 2
//!   cores; the seeds ran 128-384 tasks on big machines) cannot add throughput, but they
//!   show what contention does when lock holders are preempted: a design whose lock holder
//!   can sleep collapses, one without shared locks stays flat.
//! - **Lock statistics.** `--lockstat` turns on per-lock-class counting during the rounds
//!   and prints each instance's table; counts of contended acquisitions explain a ratio and
//!   do not depend on the core count, but the counting slows every design.
//!
//! ## Outputs
//!
//! A Markdown report on stdout and in `<out>/report.md` (default `bench-out/`): a summary
//! of ratios, then a table per workload. One SVG plot per workload of median throughput
//! against threads, a line per design. JSON (`--json FILE`, default `<out>/results.json`):
//! machine information (nproc, kernel, CPU, date, the git commit of the checkout and of
//! the binary), the settings, and one record per (workload, design, threads) with the
//! median `ops_per_sec` and the raw `runs` ([`report::Report`]).

#![warn(missing_docs)]

pub mod cli;
pub mod memory;
pub mod plot;
pub mod report;
pub mod runner;
pub mod stats;
pub mod workload;
pub mod workloads;

pub use workload::{Design, Instance, Workload};
