//! # scalevfs-primitives
//!
//! The locking primitives the seed patch threads describe, knowing nothing of files.
//! Each module is documented like a kernel header: what it protects, its memory
//! orderings, and its lock order. Each scalable primitive has a *legacy* counterpart with
//! the same API (one global lock, one list, a lock-protected count), so that every seed's
//! "before" design is one switch away and a benchmark can show both side by side.
//!
//! | module      | seed | scalable                          | legacy counterpart            |
//! |-------------|------|-----------------------------------|-------------------------------|
//! | [`lockref`] | 004  | `LockRef` (cmpxchg refcount)      | `LegacyRef` (lock + count)    |
//! | [`seqlock`] | 004  | `SeqLock`, `SeqRwLock`            | (rename lock taken exclusive) |
//! | [`hashed`]  | 000  | hashed tables of padded locks     | one global lock               |
//! | [`dlist`]   | 001  | `DList`: per-CPU lists            | `LockedList`: one list        |
//! | [`lockstat`]| -    | per-lock-class statistics         |                               |
//! | [`percpu`]  | 001  | `PerCpuCounter`: a counter per CPU | one shard                    |
//!
//! Under `--cfg loom` the atomics and locks come from [`loom`](https://docs.rs/loom) so the
//! models in each module's tests can explore every interleaving; see [`sync`].

pub mod cpu;
pub mod dlist;
pub mod hashed;
pub mod lockref;
pub mod lockstat;
pub mod percpu;
pub mod seqlock;
pub mod spinlock;
pub mod sync;

/// Which design a subsystem uses: the seed's "before" (`Legacy`) or "after" (`Scalable`).
///
/// Chosen once, at construction, so that one benchmark run can show both designs side by
/// side. The default is the scalable design.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Hash)]
pub enum Locking {
    /// One global lock / one list / a lock-protected count, as before each seed's patches.
    Legacy,
    /// The scalable designs.
    #[default]
    Scalable,
}
