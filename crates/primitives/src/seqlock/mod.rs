//! Sequence counters, sequence locks and sequence read/write locks (Linux's rename lock and the `seqrwlock_t` patches).
//!
//! # Reader/writer consistency without reader stores
//!
//! A *sequence counter* ([`SeqCounter`], Linux's `seqcount_t`) is even while the data it
//! guards is stable and odd while a writer is changing it. An *optimistic reader* samples
//! the counter, reads the data, and samples it again: if both samples are the same even
//! value no writer ran in between and what it read is consistent; otherwise it retries.
//! Optimistic readers never write shared memory, so any number of them run in parallel
//! without bouncing a cache line. Writers must exclude each other by other means:
//!
//! * [`SeqLock`] (Linux's `seqlock_t`) pairs the counter with a writer lock. Its
//!   *locking reader* ([`SeqLock::read_excl`], `read_seqlock_excl`) takes that lock without
//!   bumping the counter, so it excludes writers and other locking readers but leaves the
//!   optimistic readers undisturbed. [`SeqLock::read_or_lock`] is
//!   `read_seqbegin_or_lock`/`need_seqretry`/`done_seqretry`: one optimistic pass, then
//!   one pass under the lock, which cannot fail.
//! * [`SeqRwLock`] is the `seqrwlock_t` patches' *sequence read/write lock*: the counter plus a per-CPU
//!   ("big reader") reader/writer lock in which neither readers nor writers starve. Its *shared readers* ([`SeqRwLock::read_lock`]) exclude writers,
//!   not each other, and do not bump the counter, so many pointer-following readers (the
//!   `d_path()`s those patches are about) proceed together, which `SeqLock`'s exclusive locking
//!   reader (the rename lock before them) could not. [`SeqRwLock::read_or_lock`] falls
//!   back to a shared pass.
//!
//! Usage, the same for both locks:
//!
//! ```
//! use scalevfs_primitives::seqlock::{ReadMode, SeqCell, SeqRwLock};
//! let lock = SeqRwLock::new();
//! let pair = SeqCell::<2>::new([0, 0]);
//! // optimistic reader
//! let v = loop {
//!     let seq = lock.read_begin();
//!     let v = pair.load();
//!     if !lock.read_retry(seq) { break v; }
//! };
//! assert_eq!(v[0], v[1]);
//! // writer
//! {
//!     let _w = lock.write_lock();
//!     pair.store([1, 1]);
//! }
//! // optimistic first, then shared-locked (d_path)
//! let v = lock.read_or_lock(|_mode: ReadMode| pair.load());
//! assert_eq!(v, [1, 1]);
//! ```
//!
//! # What the locks protect
//!
//! Whatever the caller says: the counter orders *the caller's* data. For optimistic
//! readers to be free of data races even formally, that data must be atomics: an
//! optimistic pass may overlap a writer, and a plain read racing a write is undefined
//! behaviour in Rust as it is in C11. [`SeqCell`] packages the pattern for a few words;
//! larger structures keep each field in an atomic and load/store them `Relaxed` exactly as
//! `SeqCell` does. An optimistic pass must therefore tolerate garbage (a torn mix of old
//! and new values): it may not panic, loop forever or index out of bounds on what it read
//! before `read_retry` has vouched for it. Pointers read optimistically must stay valid to
//! dereference on their own (RCU, epoch or `Arc`), which is why `d_path` follows dentry
//! parents under RCU and only trusts the result once the rename sequence is unchanged.
//!
//! # Memory ordering (Linux's `smp_rmb`/`smp_wmb` placements, in C11 terms)
//!
//! ```text
//!   writer (exclusive)                        optimistic reader
//!   s = seq (even)                            s1 = seq.load(Acquire)      (A1)  [waits while odd]
//!   seq.store(s + 1, Relaxed)                 d  = data.load(Relaxed) ...
//!   fence(Release)                  (W1)      fence(Acquire)              (R1)  = smp_rmb
//!   data.store(.., Relaxed) ...               s2 = seq.load(Relaxed)
//!   seq.store(s + 2, Release)       (W2)      consistent iff s1 == s2
//! ```
//!
//! * W2 / A1: if the reader's first sample is `s + 2`, every data store of that write
//!   section happens-before its data loads, so it cannot read older values.
//! * W1 / R1: if any data load reads a store of a write section that started after `s1`,
//!   the release fence (sequenced after that section's odd store) synchronizes with the
//!   acquire fence (sequenced before `s2`), so `s2` sees at least the odd store and the
//!   reader retries. This is the `smp_wmb` after `write_seqcount_begin` and the `smp_rmb`
//!   in `read_seqcount_retry`; see Boehm, "Can seqlocks get along with programming
//!   language memory models?" (MSPC 2012) for the C11 version.
//!
//! Writers serialize through the writer lock, whose Acquire/Release pairs order one
//! writer's stores (counter included) before the next writer's, so `seq` only needs
//! Relaxed reads on the writer side.
//!
//! # Lock order
//!
//! Both locks are leaves as far as this module is concerned: no method takes any lock
//! outside this module (`SeqRwLock`'s internal mutexes are ordered in its own docs).
//! A shared reader of a `SeqRwLock` must not try to take its write lock (self-deadlock, as
//! with any rwlock), and a write section must not call `read_begin` on its own lock (it
//! would wait for itself, forever, because the counter is odd).
//!
//! Shared read sections of one `SeqRwLock` must not nest on one thread. Unlike Linux's
//! reader-preferring `rwlock_t`, which allows recursive `read_lock`, a writer that queues
//! between the outer and the inner `read_lock` blocks the inner one (that is what keeps
//! writers from starving) while waiting for the outer one: deadlock. The same holds for
//! `read_or_lock` called from inside a shared section or another `read_or_lock` closure.
//! `try_read_lock` never waits (a writer present turns it away), so it may be taken
//! inside any shared section, where a blocking `read_lock` of a second lock could wait for
//! a writer that itself waits for the first lock's readers to drain.
//!
//! # Waiting
//!
//! Waits spin, then yield (`Backoff`): a few dozen `spin_loop` hints, then
//! [`crate::sync::yield_now`] on every round, so 64 threads on 2 CPUs make progress instead
//! of spinning through a preempted lock holder's time slice. `SeqRwLock`'s writers and its
//! readers waiting for a writer also sleep (mutex, condition variable); see its docs.

mod excl;
mod rw;

#[cfg(all(test, loom))]
mod loom_tests;
#[cfg(all(test, not(loom)))]
mod tests;

pub use excl::{SeqLock, SeqLockExclGuard, SeqLockWriteGuard};
pub use rw::{SeqReadGuard, SeqRwLock, SeqWriteGuard};

use crate::sync::{fence, AtomicU32, AtomicU64, Ordering};

/// A sample of a sequence counter, taken by `read_begin`, checked by `read_retry`.
///
/// Always even when returned by `read_begin`. Counters wrap; only equality matters, and a
/// reader would have to sleep through 2^31 write sections to be fooled.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct SeqCount(u32);

impl SeqCount {
    /// The raw counter value (for diagnostics and tests).
    pub fn value(self) -> u32 {
        self.0
    }
}

/// Which pass of a `read_or_lock` section is running.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum ReadMode {
    /// Lockless pass: values may be torn and the result is discarded if a writer ran.
    Optimistic,
    /// Pass under the lock (exclusive for [`SeqLock`], shared for [`SeqRwLock`]): writers
    /// are excluded, what is read is consistent and the result is returned as is.
    Locked,
}

/// Spin-then-yield waiting for every loop in this module.
///
/// Spins for `2^step` hints, doubling up to `2^SPIN_LIMIT`, then yields on each call:
/// short waits (a writer finishing a few stores) stay on-CPU, long ones (the holder was
/// preempted, or 64 threads share 2 CPUs) give the CPU back.
pub(crate) struct Backoff {
    step: u32,
}

impl Backoff {
    const SPIN_LIMIT: u32 = 6;

    pub(crate) fn new() -> Self {
        Backoff { step: 0 }
    }

    pub(crate) fn snooze(&mut self) {
        // Under loom one yield is one scheduling point; spinning would only add states.
        if cfg!(loom) {
            crate::sync::yield_now();
        } else if self.step <= Self::SPIN_LIMIT {
            for _ in 0..(1u32 << self.step) {
                crate::sync::spin_loop();
            }
            self.step += 1;
        } else {
            crate::sync::yield_now();
        }
    }
}

/// A bare sequence counter (Linux's `seqcount_t`): the optimistic-reader half of a
/// [`SeqLock`], for data whose writers are already serialized by some other lock (a
/// dentry's `d_seq` is written under its `d_lock`).
///
/// `write_begin`/`write_end` are safe functions because the protected data lives in
/// atomics: concurrent writers cannot cause undefined behaviour, only a counter that no
/// longer means anything. Callers must still serialize them.
pub struct SeqCounter {
    seq: AtomicU32,
}

impl std::fmt::Debug for SeqCounter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SeqCounter")
            .field("seq", &self.raw())
            .finish()
    }
}

impl Default for SeqCounter {
    fn default() -> Self {
        Self::new()
    }
}

impl SeqCounter {
    /// A counter at 0 (even: no write in progress).
    pub fn new() -> Self {
        SeqCounter {
            seq: AtomicU32::new(0),
        }
    }

    /// Starts an optimistic read: waits until no write is in progress and returns the
    /// (even) counter (`read_seqcount_begin`).
    #[inline]
    pub fn read_begin(&self) -> SeqCount {
        let mut backoff = Backoff::new();
        loop {
            // Acquire pairs with the Release store in `write_end` (W2): the data stores of
            // the write section that made the counter this value are visible to our loads.
            let s = self.seq.load(Ordering::Acquire);
            if s & 1 == 0 {
                return SeqCount(s);
            }
            backoff.snooze();
        }
    }

    /// Like `read_begin` but does not wait: may return an odd count, which then always
    /// fails `read_retry` (`raw_read_seqcount`). For readers that would rather do
    /// something else than wait for a writer.
    #[inline]
    pub fn read_begin_raw(&self) -> SeqCount {
        // Acquire: as in `read_begin`.
        SeqCount(self.seq.load(Ordering::Acquire))
    }

    /// Ends an optimistic read: `true` if a writer ran (or was running) since `start` and
    /// everything read since must be discarded (`read_seqcount_retry`).
    #[inline]
    pub fn read_retry(&self, start: SeqCount) -> bool {
        // smp_rmb: this Acquire fence pairs with the Release fence in `write_begin` (W1).
        // If any of our Relaxed data loads read a store made after a writer's odd
        // increment, that increment happens-before the load below, so we see it.
        fence(Ordering::Acquire);
        let now = self.seq.load(Ordering::Relaxed);
        // An odd `start` (from `read_begin_raw`) never validates.
        start.0 & 1 != 0 || now != start.0
    }

    /// Makes the counter odd: optimistic readers started from now on wait, those in
    /// progress will retry (`write_seqcount_begin`). The caller serializes writers.
    #[inline]
    pub fn write_begin(&self) {
        // Relaxed load: writers are serialized by the caller's lock, whose Acquire gave us
        // the previous writer's final store.
        let s = self.seq.load(Ordering::Relaxed);
        debug_assert!(s & 1 == 0, "nested or concurrent seqcount writers");
        self.seq.store(s.wrapping_add(1), Ordering::Relaxed);
        // smp_wmb: Release fence paired with the Acquire fence in `read_retry` (R1): orders
        // the odd store before every data store of this section, for any reader that
        // reads one of those data stores.
        fence(Ordering::Release);
    }

    /// Makes the counter even again, publishing the section (`write_seqcount_end`).
    #[inline]
    pub fn write_end(&self) {
        let s = self.seq.load(Ordering::Relaxed);
        debug_assert!(s & 1 == 1, "write_end without write_begin");
        // Release pairs with the Acquire load in `read_begin` (A1): a reader that samples
        // this even value sees all of the section's data stores.
        self.seq.store(s.wrapping_add(1), Ordering::Release);
    }

    /// The current raw value (diagnostics, tests).
    pub fn raw(&self) -> u32 {
        // Relaxed: a snapshot that orders nothing.
        self.seq.load(Ordering::Relaxed)
    }
}

/// `N` words of data protected by a sequence counter, stored in atomics so that optimistic
/// readers racing a writer are not data races.
///
/// `load` between `read_begin` and `read_retry` (or under a read/write lock), `store` only
/// inside a write section. Both are Relaxed per word: the ordering comes from the counter
/// (see the module docs), exactly as Linux's plain accesses between `smp_rmb`s.
pub struct SeqCell<const N: usize> {
    words: [AtomicU64; N],
}

impl<const N: usize> std::fmt::Debug for SeqCell<N> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // A snapshot that may be torn if a writer is active.
        f.debug_tuple("SeqCell").field(&self.load()).finish()
    }
}

impl<const N: usize> SeqCell<N> {
    /// A cell holding `init`.
    pub fn new(init: [u64; N]) -> Self {
        SeqCell {
            words: init.map(AtomicU64::new),
        }
    }

    /// Reads every word. Unless a write section is excluded (write or shared lock held), the
    /// result may be torn until `read_retry` returns `false`.
    #[inline]
    pub fn load(&self) -> [u64; N] {
        // Relaxed: ordered by `read_begin`'s Acquire load and `read_retry`'s Acquire fence.
        std::array::from_fn(|i| self.words[i].load(Ordering::Relaxed))
    }

    /// Reads word `i` (with the same rules as [`SeqCell::load`]).
    #[inline]
    pub fn load_word(&self, i: usize) -> u64 {
        // Relaxed: as in `load`.
        self.words[i].load(Ordering::Relaxed)
    }

    /// Reads every word with `Acquire`: for words that are pointers the reader follows
    /// *before* `read_retry` validates them. Each load pairs with the `Release` store of
    /// [`SeqCell::store_release`] it reads, so what the writer did before publishing the
    /// pointer (initializing the object) happens-before the reader's use of it, also for
    /// tools that do not model standalone fences (ThreadSanitizer).
    #[inline]
    pub fn load_acquire(&self) -> [u64; N] {
        std::array::from_fn(|i| self.words[i].load(Ordering::Acquire))
    }

    /// Writes every word with `Release` (pairs with [`SeqCell::load_acquire`]). Call only
    /// inside a write section of the lock guarding this cell.
    #[inline]
    pub fn store_release(&self, value: [u64; N]) {
        for (w, v) in self.words.iter().zip(value) {
            w.store(v, Ordering::Release);
        }
    }

    /// Writes every word. Call only inside a write section of the lock guarding this cell.
    #[inline]
    pub fn store(&self, value: [u64; N]) {
        for (w, v) in self.words.iter().zip(value) {
            // Relaxed: ordered by `write_begin`'s Release fence and `write_end`'s Release store.
            w.store(v, Ordering::Relaxed);
        }
    }
}
