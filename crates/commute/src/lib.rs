//! # scalevfs-commute: the scalability checker
//!
//! The *scalable commutativity rule* (Clements et al., "The Scalable Commutativity Rule",
//! SOSP 2013, and their tool COMMUTER): whenever two operations commute (their results and
//! the resulting state do not depend on their order), there is an implementation in which
//! they are *conflict-free*: neither touches a cache line that the other writes, so on
//! different cores they run without exchanging cache lines and scale. This crate checks
//! scalevfs against the rule, call pair by call pair, and is run as `scalevfs commute`.
//!
//! ## Cases ([`catalogue`])
//!
//! A case is a setup ([`world::Scenario`]: both threads' objects in different directories,
//! in one directory, or one file) and two calls of the [`scalevfs::Process`] API, call A on
//! thread 1's objects and call B on thread 2's. Each runs in two [`catalogue::Form`]s: one
//! `Process` per thread (`per-process`) and both threads in one `Process` (`shared`).
//! The cases are generated from a table of ops ([`catalogue::OPS`], one line per call) and
//! four lists (each op with itself per scenario; a set of ops with each other).
//!
//! ## What counts
//!
//! 1. **Commutes** (native, [`exec::check_commutes`]): A;B and B;A are run from identical
//!    fresh setups; both calls' results (with inode numbers, times and pids left out or
//!    named) and the canonical state afterwards ([`world::World::dump`]: every object's
//!    path, type, mode, owner, size, link count, content digest, symlink target and
//!    extended attributes; each process's cwd and descriptor table; the file-lock table)
//!    must be equal. A case whose orders disagree is *non-commuting*: reported, never
//!    counted. In the shared form two descriptor-allocating calls are declared
//!    non-commuting without running (the lowest-free-descriptor rule hands out the numbers
//!    by order).
//! 2. **Conflict-free** (traced): no 64-byte line that one call writes is read or written
//!    by the other ([`trace::conflicts`]). Each thread's own stack and the marker line are
//!    not counted. Everything else is: the VFS's objects, the processes' tables, the
//!    allocator's metadata, the standard library's.
//! 3. The headline is the conflict-free share over the commuting cases, per form.
//!
//! The traced child runs all its cases in one tree (each case in its own `/w<k>`, `/c<k>`
//! directories, with fresh processes): building and dropping a tree per case would be most
//! of the trace. The native check uses a fresh tree per run.
//!
//! ### Periodic work
//!
//! Some shared writes are periodic rather than per call. The epoch
//! (`scalevfs_primitives::epoch`) is advanced by the call that fills its thread's bag of 64
//! deferred frees: that call reads every thread's record and writes the global epoch, and
//! runs the thread's expired frees. Which call of a case that is depends only on how many
//! objects the thread retired before, in the cases traced earlier in the same child. So
//! each worker starts its measured call with its bag empty ([`epoch::flush`] at the end of
//! the setup, as a fresh process starts), and a call that retires fewer than 64 objects
//! never advances the epoch inside its window. What this leaves out, the advance itself,
//! costs one scan of the threads' records per 64 retired objects per thread (Linux does the
//! same work in its RCU grace-period kthread and sv6 in a per-core timer, outside any
//! system call); the README's checker section says so. `--check` still traces a listed
//! case that conflicted once more, alone, and fails only if it conflicts again.
//!
//! [`epoch::flush`]: scalevfs_primitives::epoch::flush
//!
//! ## Tracing ([`trace`])
//!
//! The driver re-executes its own binary as `valgrind --tool=lackey --trace-mem=yes
//! --log-fd=N scalevfs commute --trace-child`. lackey prints every instruction
//! (`I  addr,size`) and every load, store and modify (` L`/` S`/` M addr,size`) of the
//! child into a pipe, which the driver parses as it streams (gigabytes: large chunks,
//! byte-level, nothing allocated per line). The child runs, for each case: a fresh setup
//! (the shared directories on the driver thread, each thread's own files, descriptors,
//! pipes, eventfds and epolls *on that thread*, so a free in a call goes to the thread's
//! own allocator cache), a **warm-up** (A on thread 1 and B on thread 2, on other objects
//! of the same kinds, so that thread-locals, allocator caches, epoch handles, per-CPU
//! shards and lock contexts exist), then A on thread 1 and B on thread 2, one after the
//! other, the other thread parked on a channel.
//!
//! ### The marker protocol
//!
//! [`exec::MARKERS`] is one 64-byte static line of eight `AtomicU64` slots; event `k`
//! ([`exec::Event`]: case begins, A begins, A ends, B begins, B ends) is one plain store to
//! slot `k`, so lackey's ` S addr,8` line says which event happened by its address alone.
//! The child first prints (on stdout, the side channel) the marker address, its load bias,
//! its workers' stack bounds (`pthread_getattr_np`) and its memory map, then waits on stdin
//! for the list of case ids; the driver stores the marker address for the parser before it
//! sends the list, so no marker store can precede it. Accesses between "A begins" and "A
//! ends" are A's, and likewise for B; case `k` of the trace is the `k`-th id sent.
//!
//! ### The CPU override
//!
//! valgrind runs the child's threads one at a time on one host CPU, and without an rseq
//! area `sched_getcpu` reports the same CPU to both, so both would pick the same per-CPU
//! shard (dlock lists, per-CPU counters, lockstat). Each worker calls
//! [`scalevfs_primitives::cpu::set_cpu_override`] (thread 1: CPU 0, thread 2: CPU 1),
//! which [`scalevfs_primitives::cpu::current_cpu`] answers on that thread, and is pinned
//! with `sched_setaffinity` where that CPU exists (valgrind runs each guest thread on a
//! kernel thread of its own, one at a time, so `getcpu` then differs as well). Structures
//! sized by the CPU count (`num_cpus()`) still have as many shards as the machine has
//! CPUs, so the per-CPU results need a machine with at least two (CI's has two). The
//! diagnostic `SCALEVFS_COMMUTE_PIN=none` turns both off (then `mkdir/diff-dirs` conflicts
//! on `PerCpuCounter::add`), `SCALEVFS_COMMUTE_PIN=override` keeps the override alone.
//!
//! ### Attribution ([`symbol`])
//!
//! For each conflicting line the report names the instructions of each call that touched
//! it, symbolized with `addr2line` over this executable's DWARF (the release profile keeps
//! `debug = 1`), inlined frames included; the frame blamed is the innermost one in this
//! workspace's `crates/`. Addresses in shared libraries are named by library and offset.
//! The report's "top attribution" is the (A frame, B frame) pair blamed for most lines.
//!
//! ## Output and CI
//!
//! `scalevfs commute [--case GLOB]... [--out DIR] [--json FILE] [--list] [--check FILE]`
//! writes `report.md` and `results.json` like `scalevfs bench` and prints the table and,
//! last, the headline. `--check crates/commute/conflict-free.txt` fails when a listed case
//! is no longer conflict-free and prints those that became conflict-free (raise the list).
//! The hidden `--fixtures` adds `fixture/shared-counter`, whose calls bump one static
//! counter: the test suite checks it is reported with this crate's file and line.

#![warn(missing_docs)]

pub mod catalogue;
pub mod cli;
pub mod exec;
pub mod report;
pub mod symbol;
pub mod trace;
pub mod world;

use catalogue::{Case, Form};

/// A selected case in one form.
#[derive(Clone, Debug)]
pub struct Selected {
    /// Index into the catalogue.
    pub index: usize,
    /// The form.
    pub form: Form,
    /// `name@form`.
    pub id: String,
}

/// The case and form of an id `name@form`.
pub fn find<'a>(cases: &'a [Case], id: &str) -> Option<(&'a Case, Form)> {
    let (name, form) = id.rsplit_once('@')?;
    let form = Form::ALL.into_iter().find(|f| f.name() == form)?;
    cases.iter().find(|c| c.name == name).map(|c| (c, form))
}
