//! # scalevfs-primitives
//!
//! The locking primitives of five Linux patch series that took global locks out of the VFS,
//! knowing nothing of files.
//! Each module is documented like a kernel header: what it protects, its memory
//! orderings, and its lock order. Each scalable primitive has a *legacy* counterpart with
//! the same API (one global lock, one list, a lock-protected count), so that every series'
//! "before" design is one switch away and a benchmark can show both side by side.
//!
//! | module      | Linux origin                 | scalable                           | legacy counterpart            |
//! |-------------|------------------------------|------------------------------------|-------------------------------|
//! | [`lockref`] | lockref (3.12)               | `LockRef` (cmpxchg refcount)       | `LegacyRef` (lock + count)    |
//! | [`seqlock`] | rename lock, `seqrwlock_t`   | `SeqLock`, `SeqRwLock`             | (rename lock taken exclusive) |
//! | [`hashed`]  | kernfs hashed locks (5.19)   | hashed tables of padded locks      | one global lock               |
//! | [`dlist`]   | dlock-list                   | `DList`: per-CPU lists             | `LockedList`: one list        |
//! | [`lockstat`]| `CONFIG_LOCK_STAT`           | per-lock-class statistics          |                               |
//! | [`percpu`]  | dlock-list (counters)        | `PerCpuCounter`: a counter per CPU | one shard                     |
//! | [`epoch`]   | RCU (grace periods)          | epochs advanced by freeing threads  | (crossbeam-epoch, replaced)   |
//! | [`percpu_ref`] | `percpu_ref`, sv6 Refcache | `PcpuRef`: per-CPU gets and puts   | (`LockRef` alone)             |
//! | [`percpu_count`] | `percpu_ref` (kill, switch to atomic) | `PcpuCount`: references in per-CPU cells | (no cells: one atomic count) |
//! | [`selfwake`] | (timed futex waits)        | completing a self-waking sleeper without a wake-up | (every completion wakes) |
//!
//! Under `--cfg loom` the atomics and locks come from [`loom`](https://docs.rs/loom) so the
//! models in each module's tests can explore every interleaving; see [`sync`].

#![warn(missing_docs)]

pub mod cpu;
pub mod dlist;
pub mod epoch;
pub mod hashed;
pub mod lockref;
pub mod lockstat;
pub mod percpu;
pub mod percpu_count;
pub mod percpu_ref;
pub mod selfwake;
pub mod seqlock;
pub mod spinlock;
pub mod sync;

/// Which design a subsystem uses: the "before" (`Legacy`) or "after" (`Scalable`) of its Linux patch series.
///
/// Chosen once, at construction, so that one benchmark run can show both designs side by
/// side. The default is the scalable design.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Hash)]
pub enum Locking {
    /// One global lock / one list / a lock-protected count, as before each patch series.
    Legacy,
    /// The scalable designs.
    #[default]
    Scalable,
}
