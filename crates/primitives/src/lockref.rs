//! # lockref: a spinlock and a reference count in one 64-bit word (seed 004)
//!
//! Before seed 004 every change of a dentry's reference count took its `d_lock`, so a hot
//! dentry (`/`, a shared working directory, a file many tasks open) serialized every
//! `dget`/`dput` of every CPU behind one spinlock. The lockref idea: put the lock and the
//! count in one 64-bit word, and while the lock is free change the count with a single
//! compare-exchange of the whole word. Only the transitions that really need the lock
//! (the last reference going away, reviving a zero count) take it.
//!
//! [`LockRef`] is that design; [`LegacyRef`] is the "before" (every change takes the lock),
//! with the same API. Both implement [`RefCount`], so the VFS and the benchmarks are generic
//! over the two.
//!
//! ## Word layout
//!
//! ```text
//!   63                              32 31                               1   0
//!  +----------------------------------+----------------------------------+---+
//!  |          count (i32)             |          0 (reserved)            | L |
//!  +----------------------------------+----------------------------------+---+
//! ```
//!
//! * `L` (bit 0) is the spinlock: set while a [`LockRefGuard`] exists.
//! * `count` is a signed 32-bit count. A negative count means *dead* ([`DEAD`] = -128, as
//!   Linux's `lockref_mark_dead`): the object is being torn down, and no new reference may
//!   be taken with [`RefCount::get_not_dead`].
//! * Saturation: a count that reaches `i32::MAX` is *saturated*: it sticks there (gets and
//!   puts leave it unchanged), so a reference-count overflow leaks the object instead of
//!   freeing it while references remain (the `refcount_t` policy). A dead count is terminal
//!   in the same way: increments and decrements leave it dead. `new`/`set_count` clamp
//!   values above `i32::MAX` to the saturated value.
//!
//! ## Fast path and lock
//!
//! * Fast path (count-only change): read the word; if `L` is clear, compute the new count and
//!   compare-exchange the whole word. The lock being clear in the expected value is what
//!   makes it safe: a locker that set `L` in between makes the compare-exchange fail.
//! * Lock: `fetch_or(L)`; the caller owns the lock if `L` was clear. `fetch_or` never
//!   fails because of a concurrent count change, so lockless traffic cannot starve a locker.
//!   Waiting for the lock spins (test-and-test-and-set, read-only) and then yields the CPU,
//!   so an oversubscribed machine (64 threads on 2 cores) does not burn the holder's slice.
//! * The lock is test-and-set, deliberately not fair: a FIFO lock hands the lock to the next
//!   waiter even when that waiter is preempted, and with more threads than CPUs everyone
//!   then waits out a time slice. The price is that a thread re-taking the lock back to
//!   back can starve waiters (lockers and fast paths alike); lockref critical sections are
//!   short and separated by other work.
//! * While the lock is held, only the holder writes the word (plain stores of the new count
//!   with `L` set; a waiter's `fetch_or` may write the same value again, which changes
//!   nothing). Unlock is a plain store of the word with `L` clear.
//!
//! ## Returning to the lockless path (beyond Linux)
//!
//! In Linux's `CMPXCHG_LOOP` a thread that sees the lock held gives up on the fast path at
//! once and queues on the spinlock. Under contention that is self-sustaining: one locker
//! makes every other CPU fall back, they queue, the lock is then *always* held by the next
//! waiter, so every newcomer sees it held and queues too: the fast path never comes back
//! while the load lasts (a 20-thread stat of one file: 8.4M ops/s down to 1.3M).
//!
//! Here a fast-path operation that sees `L` set **waits for it to clear** (spin, then yield)
//! and retries the compare-exchange; it does not queue on the lock. Each wait and each
//! failed compare-exchange costs one unit of a per-operation budget ([`RETRIES`], Linux's
//! 100). An operation takes the lock only when
//!   1. its count transition needs it (the count is at or near zero: `put_or_lock` of the
//!      last reference, `get_not_zero` of a zero count, ...), or
//!   2. its budget is exhausted, and then only for that one operation: the budget resets
//!      for the next one.
//!
//! Why this returns to lockless: the lock is held only by threads in case 1 or 2, never by
//! a queue of fast-path threads. When those few lockers are done, `L` clears and stays clear,
//! and every waiter's next compare-exchange can succeed. A thread that fell back (case 2)
//! holds the lock for one count change and starts its next operation on the fast path.
//! (Linux's convoy also needs its lock to be FIFO, which hands the lock straight to the
//! next queued fallback; ours is not, see above, but waiting rather than queueing is what
//! keeps fast paths from holding the lock at all.)
//!
//! Observing it: [`thread_stats`] counts the waits, fallbacks and lock acquisitions of the
//! calling thread. The test `returns_to_lockless_after_contention` holds the lock until
//! several fast paths are waiting on it and checks that none of them took it; its contrast
//! `linux_policy_queues_on_the_lock` runs Linux's policy (a test-only switch) and sees the
//! fallback.
//!
//! ## Differences from Linux's lockref
//!
//! * Waiting instead of falling back, as above.
//! * `put_return` never drops the last reference (1 -> 0) locklessly; it returns `None`
//!   and leaves the count alone (Linux returns 0 after decrementing). The last put always
//!   goes through the lock, as `put_or_lock` does.
//! * Saturation at `i32::MAX` and dead counts that `get`/`dec` leave alone (Linux does not
//!   check: its `count++` on a dead dentry would make -127).
//!
//! ## Memory ordering
//!
//! * Fast-path compare-exchange: `AcqRel` on success.
//!   - Release: a put publishes the caller's prior accesses to the object to whoever later
//!     takes the lock to tear it down (pairs with the Acquire of [`LockRef::lock`]'s
//!     `fetch_or`), and to later fast paths (pairs with their Acquire).
//!   - Acquire: pairs with the Release of a guard's unlock store (a holder that revived or
//!     changed the object under the lock is seen by a fast path that reads the unlocked
//!     word) and with the Release of earlier fast-path changes.
//!   - Failure: `Relaxed`; nothing is concluded from a failed exchange but its new value.
//! * A fast path that returns without writing (`get_not_zero` of 0, `get_not_dead` of a
//!   dead count, a saturated count) decides on a `Relaxed` load: a failure publishes
//!   nothing, and the caller must not touch the object. (A saturated count is a leak
//!   already; its callers hold other references that ordered their view of the object.)
//! * Lock: `fetch_or(L, Acquire)`, pairs with the Release of the previous holder's unlock
//!   and of every fast-path change before it.
//! * Unlock (guard drop): `store(Release)`, pairs with the Acquire of the next locker and
//!   of the next fast-path compare-exchange that reads the word.
//! * Stores of the count by the lock holder: `Relaxed`; the unlock orders them.
//! * [`RefCount::count`] is a `Relaxed` snapshot, for heuristics and statistics only.
//!
//! ## Lock order
//!
//! The lockref lock is a leaf in this crate: nothing here takes another lock while holding
//! it. The VFS nests it as Linux nests `d_lock` (parent before child); that order is the
//! caller's. Never hold a guard across a call that may take the same lockref (that
//! includes the fast-path methods, which wait for the lock to clear).

use crate::sync::{spin_loop, yield_now, AtomicU64, Ordering};
use std::fmt;

/// The count of a dead object ([`LockRefGuard::mark_dead`]), as Linux's `lockref_mark_dead`.
pub const DEAD: i32 = -128;

/// Fast-path attempts (failed compare-exchanges plus waits for the lock) an operation may
/// make before it takes the lock. Linux uses 100. Loom models use a small budget so the
/// fallback path is explored too without exploding the state space.
#[cfg(not(loom))]
pub const RETRIES: u32 = 100;
#[cfg(loom)]
pub const RETRIES: u32 = 2;

/// Spins on a held lock before starting to yield the CPU.
const SPINS_BEFORE_YIELD: u32 = 64;

const LOCKED: u64 = 1;
const COUNT_SHIFT: u32 = 32;

#[inline]
fn count_of(word: u64) -> i32 {
    (word >> COUNT_SHIFT) as u32 as i32
}

#[inline]
fn with_count(word: u64, count: i32) -> u64 {
    (word & LOCKED) | (u64::from(count as u32) << COUNT_SHIFT)
}

/// Clamps an unsigned count to the representable (saturated) range.
#[inline]
fn clamp(count: u32) -> i32 {
    i32::try_from(count).unwrap_or(i32::MAX)
}

/// `count + 1`, except that dead and saturated counts stick.
#[inline]
fn inc(count: i32) -> i32 {
    if count < 0 || count == i32::MAX {
        count
    } else {
        count + 1
    }
}

/// `count - 1`, except that dead, zero and saturated counts stick.
#[inline]
fn dec(count: i32) -> i32 {
    if count <= 0 || count == i32::MAX {
        count
    } else {
        count - 1
    }
}

// ---------------------------------------------------------------------------------------
// Per-thread statistics (observability of the fallback behaviour; slow paths only).

/// What the calling thread's [`LockRef`] operations did off the pure fast path, cumulative
/// since the thread started. Only slow events are counted, so the fast path pays nothing.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct LockRefStats {
    /// Fast-path operations that found the lock held and waited for it to clear (instead
    /// of queueing on it, as Linux does).
    pub waits: u64,
    /// Operations that exhausted their [`RETRIES`] budget and took the lock.
    pub fallbacks: u64,
    /// Lock acquisitions by [`LockRef`] operations (fallbacks plus transitions that need
    /// the lock); explicit [`LockRef::lock`]/[`LockRef::try_lock`] calls are not counted.
    pub locked: u64,
}

impl LockRefStats {
    /// The counts accumulated since `earlier`, a previous snapshot of the same thread
    /// (saturating, so a snapshot of another thread gives zeros rather than a panic).
    pub fn since(self, earlier: LockRefStats) -> LockRefStats {
        LockRefStats {
            waits: self.waits.saturating_sub(earlier.waits),
            fallbacks: self.fallbacks.saturating_sub(earlier.fallbacks),
            locked: self.locked.saturating_sub(earlier.locked),
        }
    }
}

#[cfg(not(loom))]
thread_local! {
    static STATS: std::cell::Cell<LockRefStats> = const {
        std::cell::Cell::new(LockRefStats { waits: 0, fallbacks: 0, locked: 0 })
    };
}

/// The calling thread's [`LockRefStats`] (all zero under loom).
pub fn thread_stats() -> LockRefStats {
    #[cfg(not(loom))]
    {
        STATS.with(|s| s.get())
    }
    #[cfg(loom)]
    {
        LockRefStats::default()
    }
}

#[inline]
fn note(f: impl FnOnce(&mut LockRefStats)) {
    #[cfg(not(loom))]
    STATS.with(|s| {
        let mut v = s.get();
        f(&mut v);
        s.set(v);
    });
    #[cfg(loom)]
    let _ = f;
}

// ---------------------------------------------------------------------------------------
// The word and its lock, shared by LockRef and LegacyRef.

/// The lock + count word. Both designs use it: `LockRef` adds the fast path, `LegacyRef`
/// only ever changes the count under the lock.
struct Word(
    AtomicU64,
    /// Test only: threads inside `wait_unlocked`, so a test can release the lock once its
    /// threads are known to be waiting.
    #[cfg(all(test, not(loom)))]
    std::sync::atomic::AtomicUsize,
);

impl Word {
    fn new(count: u32) -> Word {
        Word(
            AtomicU64::new(with_count(0, clamp(count))),
            #[cfg(all(test, not(loom)))]
            Default::default(),
        )
    }

    #[inline]
    fn count(&self) -> i32 {
        // Relaxed: a racy snapshot (see the module docs).
        count_of(self.0.load(Ordering::Relaxed))
    }

    /// Spins, then yields, until the lock bit is clear; returns the unlocked word seen.
    #[inline(never)]
    fn wait_unlocked(&self) -> u64 {
        let mut spins = 0;
        #[cfg(all(test, not(loom)))]
        self.1.fetch_add(1, Ordering::SeqCst);
        loop {
            // Relaxed: the caller's following fetch_or / compare-exchange is the Acquire.
            let w = self.0.load(Ordering::Relaxed);
            if w & LOCKED == 0 {
                #[cfg(all(test, not(loom)))]
                self.1.fetch_sub(1, Ordering::SeqCst);
                return w;
            }
            if spins < SPINS_BEFORE_YIELD {
                spins += 1;
                spin_loop();
            } else {
                yield_now();
            }
        }
    }

    #[inline]
    fn try_lock(&self) -> Option<LockRefGuard<'_>> {
        // Acquire: pairs with the Release of the previous unlock and of fast-path changes.
        // fetch_or keeps the count bits intact, so it cannot lose a concurrent count change.
        if self.0.fetch_or(LOCKED, Ordering::Acquire) & LOCKED == 0 {
            Some(LockRefGuard { word: &self.0 })
        } else {
            None
        }
    }

    #[inline]
    fn lock(&self) -> LockRefGuard<'_> {
        loop {
            if let Some(g) = self.try_lock() {
                return g;
            }
            // Test-and-test-and-set: wait read-only, then try again.
            self.wait_unlocked();
        }
    }
}

/// Holds the lock of a [`LockRef`] or [`LegacyRef`]; the count may be changed through it.
/// Dropping it unlocks.
#[must_use = "dropping the guard unlocks at once"]
pub struct LockRefGuard<'a> {
    word: &'a AtomicU64,
}

impl LockRefGuard<'_> {
    #[inline]
    fn load(&self) -> u64 {
        // Relaxed: we hold the lock, so no one else changes the word (a waiter's fetch_or
        // rewrites the same value).
        self.word.load(Ordering::Relaxed)
    }

    #[inline]
    fn store_count(&mut self, count: i32) {
        // Relaxed: published by the unlock's Release store.
        self.word
            .store(with_count(LOCKED, count), Ordering::Relaxed);
    }

    /// The count (negative if dead).
    #[inline]
    pub fn count(&self) -> i32 {
        count_of(self.load())
    }

    /// Sets the count (values above `i32::MAX` saturate). Revives a dead count.
    #[inline]
    pub fn set_count(&mut self, count: u32) {
        self.store_count(clamp(count));
    }

    /// Increments the count (a dead or saturated count is left unchanged).
    #[inline]
    pub fn inc(&mut self) {
        let c = self.count();
        self.store_count(inc(c));
    }

    /// Decrements the count (a zero, dead or saturated count is left unchanged).
    #[inline]
    pub fn dec(&mut self) {
        let c = self.count();
        self.store_count(dec(c));
    }

    /// Marks the object dead: count = [`DEAD`] (Linux's `lockref_mark_dead`). Later
    /// `get_not_dead` calls fail until the count is set again.
    #[inline]
    pub fn mark_dead(&mut self) {
        self.store_count(DEAD);
    }

    /// Whether the count is dead (negative).
    #[inline]
    pub fn is_dead(&self) -> bool {
        self.count() < 0
    }

    /// Increments if `ok(count)`, then unlocks: the locked half of the conditional gets.
    #[inline]
    fn inc_if(mut self, ok: impl FnOnce(i32) -> bool) -> bool {
        let ok = ok(self.count());
        if ok {
            self.inc();
        }
        ok
    }

    /// The locked half of `put_or_lock`: keeps the lock for the last reference (count
    /// `<= 1`, unchanged), else drops one reference and unlocks.
    #[inline]
    fn put_or_keep(mut self) -> Option<Self> {
        if self.count() <= 1 {
            return Some(self);
        }
        self.dec();
        None
    }
}

impl Drop for LockRefGuard<'_> {
    #[inline]
    fn drop(&mut self) {
        let w = self.load();
        // Release: pairs with the Acquire of the next locker's fetch_or and of the next
        // fast-path compare-exchange that reads this unlocked word.
        self.word.store(w & !LOCKED, Ordering::Release);
    }
}

impl fmt::Debug for LockRefGuard<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LockRefGuard")
            .field("count", &self.count())
            .finish()
    }
}

// ---------------------------------------------------------------------------------------
// The common API.

/// A lock-protected reference count: the API the VFS codes against, implemented by the
/// scalable [`LockRef`] and the legacy [`LegacyRef`].
///
/// Both designs share the guard type ([`LockRefGuard`]) because they share the word layout;
/// they differ only in which count changes avoid the lock.
pub trait RefCount: Send + Sync + fmt::Debug {
    /// A count of `count` (clamped to `i32::MAX`), unlocked.
    fn new(count: u32) -> Self
    where
        Self: Sized;
    /// A racy snapshot of the count (negative if dead).
    fn count(&self) -> i32;
    /// Whether the count is dead (negative).
    fn is_dead(&self) -> bool {
        self.count() < 0
    }
    /// Takes a reference unconditionally (the caller already holds one).
    fn get(&self);
    /// Takes a reference if the count is positive; false (and no change) otherwise.
    fn get_not_zero(&self) -> bool;
    /// Takes a reference if the count is not dead (zero is allowed); false otherwise.
    fn get_not_dead(&self) -> bool;
    /// Drops a reference if that can be done without the lock: the new count, or `None`
    /// (nothing changed) if the count is `<= 1` (dropping it needs the lock) or the
    /// lockless attempt failed. Like Linux's `lockref_put_return` returning -1, except
    /// that the last reference (1 -> 0) is never dropped locklessly.
    fn put_return(&self) -> Option<u32>;
    /// Drops a reference if the count is `> 1` and returns `None`; otherwise takes the lock
    /// *without* changing the count and returns the guard, so the caller can decide what
    /// the last reference means (Linux's `lockref_put_or_lock`, the `dput` path).
    fn put_or_lock(&self) -> Option<LockRefGuard<'_>>;
    /// Takes the lock.
    fn lock(&self) -> LockRefGuard<'_>;
    /// Takes the lock if it is free.
    fn try_lock(&self) -> Option<LockRefGuard<'_>>;
}

// ---------------------------------------------------------------------------------------
// LockRef: the scalable design.

/// What a fast-path step wants to do with the count it read.
enum Step<R> {
    /// Compare-exchange the count to this value, then return `R`.
    Set(i32, R),
    /// Return `R` without writing.
    Done(R),
    /// This transition needs the lock.
    NeedLock,
}

/// A spinlock and a 32-bit reference count in one 64-bit word, changed by compare-exchange
/// while the lock is free (seed 004's lockref), returning to the lockless path after
/// contention. See the module docs.
pub struct LockRef {
    word: Word,
    /// Test only: fall back to the lock as soon as it is seen held, as Linux's
    /// `CMPXCHG_LOOP` does, so a test can measure what waiting instead buys.
    #[cfg(test)]
    linux_fallback: bool,
}

impl LockRef {
    /// A count of `count` (clamped to `i32::MAX`), unlocked.
    pub fn new(count: u32) -> LockRef {
        LockRef {
            word: Word::new(count),
            #[cfg(test)]
            linux_fallback: false,
        }
    }

    /// The fast path: applies `step` to the count by compare-exchange while the lock is
    /// free. `None` means: take the lock (the step asked for it, or the budget ran out).
    #[inline]
    fn fast<R>(&self, mut step: impl FnMut(i32) -> Step<R>) -> Option<R> {
        // Relaxed: the compare-exchange below is the Acquire.
        let mut old = self.word.0.load(Ordering::Relaxed);
        let mut budget = RETRIES;
        loop {
            if old & LOCKED != 0 {
                #[cfg(test)]
                if self.linux_fallback {
                    note(|s| s.fallbacks += 1);
                    return None;
                }
                // Wait for the holder instead of queueing behind it (module docs).
                note(|s| s.waits += 1);
                old = self.word.wait_unlocked();
            } else {
                match step(count_of(old)) {
                    Step::Done(r) => return Some(r),
                    Step::NeedLock => return None,
                    Step::Set(count, r) => {
                        // AcqRel on success: see "Memory ordering" in the module docs.
                        match self.word.0.compare_exchange_weak(
                            old,
                            with_count(old, count),
                            Ordering::AcqRel,
                            Ordering::Relaxed,
                        ) {
                            Ok(_) => return Some(r),
                            Err(cur) => old = cur,
                        }
                    }
                }
            }
            budget -= 1;
            if budget == 0 {
                note(|s| s.fallbacks += 1);
                return None;
            }
        }
    }

    /// The slow path: the lock, counted in [`thread_stats`].
    #[inline(never)]
    fn slow_lock(&self) -> LockRefGuard<'_> {
        note(|s| s.locked += 1);
        self.word.lock()
    }

    /// Takes a reference unconditionally (the caller already holds one).
    #[inline]
    pub fn get(&self) {
        let done = self.fast(|c| {
            let n = inc(c);
            if n == c {
                Step::Done(())
            } else {
                Step::Set(n, ())
            }
        });
        if done.is_none() {
            self.slow_lock().inc();
        }
    }

    /// Takes a reference if the count is positive.
    #[inline]
    pub fn get_not_zero(&self) -> bool {
        let fast = self.fast(|c| {
            if c <= 0 {
                Step::Done(false)
            } else if c == i32::MAX {
                Step::Done(true)
            } else {
                Step::Set(c + 1, true)
            }
        });
        fast.unwrap_or_else(|| self.slow_lock().inc_if(|c| c > 0))
    }

    /// Takes a reference if the count is not dead (a zero count is revived to 1).
    #[inline]
    pub fn get_not_dead(&self) -> bool {
        let fast = self.fast(|c| {
            if c < 0 {
                Step::Done(false)
            } else if c == i32::MAX {
                Step::Done(true)
            } else {
                Step::Set(c + 1, true)
            }
        });
        fast.unwrap_or_else(|| self.slow_lock().inc_if(|c| c >= 0))
    }

    /// Drops a reference locklessly if the count is `> 1`; see [`RefCount::put_return`].
    #[inline]
    pub fn put_return(&self) -> Option<u32> {
        self.fast(|c| {
            if c <= 1 {
                Step::NeedLock
            } else if c == i32::MAX {
                Step::Done(c as u32)
            } else {
                Step::Set(c - 1, (c - 1) as u32)
            }
        })
    }

    /// Drops a reference if the count is `> 1`, else returns the lock with the count
    /// unchanged; see [`RefCount::put_or_lock`].
    #[inline]
    pub fn put_or_lock(&self) -> Option<LockRefGuard<'_>> {
        let fast = self.fast(|c| {
            if c <= 1 {
                Step::NeedLock
            } else {
                Step::Set(dec(c), ())
            }
        });
        if fast.is_some() {
            return None;
        }
        // The count is <= 1, or the budget ran out and the count may still be > 1.
        self.slow_lock().put_or_keep()
    }
}

// ---------------------------------------------------------------------------------------
// LegacyRef: the "before" design.

/// Seed 004's "before": a spinlock-protected count. Every change takes the lock, like
/// `d_lock` around `d_count` before lockref. Same word layout and guard as [`LockRef`].
pub struct LegacyRef {
    word: Word,
}

impl LegacyRef {
    /// A count of `count` (clamped to `i32::MAX`), unlocked.
    pub fn new(count: u32) -> LegacyRef {
        LegacyRef {
            word: Word::new(count),
        }
    }

    /// Takes a reference unconditionally.
    #[inline]
    pub fn get(&self) {
        self.word.lock().inc();
    }

    /// Takes a reference if the count is positive.
    #[inline]
    pub fn get_not_zero(&self) -> bool {
        self.word.lock().inc_if(|c| c > 0)
    }

    /// Takes a reference if the count is not dead.
    #[inline]
    pub fn get_not_dead(&self) -> bool {
        self.word.lock().inc_if(|c| c >= 0)
    }

    /// Drops a reference if the count is `> 1` (under the lock); `None` otherwise.
    #[inline]
    pub fn put_return(&self) -> Option<u32> {
        let mut g = self.word.lock();
        let c = g.count();
        if c <= 1 {
            return None;
        }
        g.dec();
        Some(g.count() as u32)
    }

    /// Drops a reference if the count is `> 1`, else returns the lock, count unchanged.
    #[inline]
    pub fn put_or_lock(&self) -> Option<LockRefGuard<'_>> {
        self.word.lock().put_or_keep()
    }
}

/// The methods both designs share through the word: the racy count and the lock.
macro_rules! impl_word_api {
    ($t:ident) => {
        impl $t {
            /// A racy snapshot of the count (negative if dead).
            #[inline]
            pub fn count(&self) -> i32 {
                self.word.count()
            }

            /// Whether the count is dead (negative).
            #[inline]
            pub fn is_dead(&self) -> bool {
                self.count() < 0
            }

            /// Takes the lock.
            #[inline]
            pub fn lock(&self) -> LockRefGuard<'_> {
                self.word.lock()
            }

            /// Takes the lock if it is free.
            #[inline]
            pub fn try_lock(&self) -> Option<LockRefGuard<'_>> {
                self.word.try_lock()
            }
        }

        impl fmt::Debug for $t {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.debug_struct(stringify!($t))
                    .field("count", &self.count())
                    .finish()
            }
        }
    };
}
impl_word_api!(LockRef);
impl_word_api!(LegacyRef);

macro_rules! impl_refcount {
    ($t:ty) => {
        impl RefCount for $t {
            fn new(count: u32) -> Self {
                <$t>::new(count)
            }
            #[inline]
            fn count(&self) -> i32 {
                <$t>::count(self)
            }
            #[inline]
            fn get(&self) {
                <$t>::get(self)
            }
            #[inline]
            fn get_not_zero(&self) -> bool {
                <$t>::get_not_zero(self)
            }
            #[inline]
            fn get_not_dead(&self) -> bool {
                <$t>::get_not_dead(self)
            }
            #[inline]
            fn put_return(&self) -> Option<u32> {
                <$t>::put_return(self)
            }
            #[inline]
            fn put_or_lock(&self) -> Option<LockRefGuard<'_>> {
                <$t>::put_or_lock(self)
            }
            #[inline]
            fn lock(&self) -> LockRefGuard<'_> {
                <$t>::lock(self)
            }
            #[inline]
            fn try_lock(&self) -> Option<LockRefGuard<'_>> {
                <$t>::try_lock(self)
            }
        }
    };
}
impl_refcount!(LockRef);
impl_refcount!(LegacyRef);

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;
    use std::sync::{Arc, Barrier};
    use std::thread;

    /// Runs `f` for both designs.
    fn both(f: impl Fn(&dyn Fn(u32) -> Box<dyn RefCount>)) {
        f(&|c| Box::new(LockRef::new(c)));
        f(&|c| Box::new(LegacyRef::new(c)));
    }

    /// Returns once `n` threads are inside `wait_unlocked` of `word`.
    fn wait_for_waiters(word: &Word, n: usize) {
        while word.1.load(std::sync::atomic::Ordering::SeqCst) < n {
            thread::yield_now();
        }
    }

    /// Linux's dput decision: drop a reference; the last one marks the object dead.
    /// Returns true if this call killed it.
    fn dput<R: RefCount + ?Sized>(r: &R) -> bool {
        match r.put_or_lock() {
            None => false,
            Some(mut g) => {
                if g.count() == 1 {
                    g.dec();
                    g.mark_dead();
                    true
                } else {
                    g.dec();
                    false
                }
            }
        }
    }

    #[test]
    fn word_layout() {
        assert_eq!(count_of(with_count(LOCKED, -128)), -128);
        assert_eq!(with_count(LOCKED, 5) & LOCKED, LOCKED);
        assert_eq!(with_count(0, 5), 5 << 32);
        assert_eq!(count_of(with_count(0, i32::MAX)), i32::MAX);
    }

    #[test]
    fn new_count_and_dead() {
        both(|mk| {
            let r = mk(3);
            assert_eq!(r.count(), 3);
            assert!(!r.is_dead());
            let r = mk(u32::MAX);
            assert_eq!(r.count(), i32::MAX, "clamped");
            let r = mk(0);
            assert_eq!(r.count(), 0);
            assert!(!r.is_dead());
        });
    }

    #[test]
    fn get_and_put_return() {
        both(|mk| {
            let r = mk(1);
            r.get();
            r.get();
            assert_eq!(r.count(), 3);
            assert_eq!(r.put_return(), Some(2));
            assert_eq!(r.put_return(), Some(1));
            // The last reference is never dropped locklessly.
            assert_eq!(r.put_return(), None);
            assert_eq!(r.count(), 1);
            let z = mk(0);
            assert_eq!(z.put_return(), None);
            assert_eq!(z.count(), 0);
        });
    }

    #[test]
    fn get_not_zero_and_not_dead() {
        both(|mk| {
            let r = mk(0);
            assert!(!r.get_not_zero());
            assert_eq!(r.count(), 0);
            assert!(r.get_not_dead(), "zero is not dead");
            assert_eq!(r.count(), 1);
            assert!(r.get_not_zero());
            assert_eq!(r.count(), 2);
            r.lock().mark_dead();
            assert!(r.is_dead());
            assert_eq!(r.count(), DEAD);
            assert!(!r.get_not_dead());
            assert!(!r.get_not_zero());
            assert_eq!(r.count(), DEAD);
            assert_eq!(r.put_return(), None);
            assert!(r.put_or_lock().is_some(), "dead count: caller decides");
        });
    }

    #[test]
    fn put_or_lock_semantics() {
        both(|mk| {
            let r = mk(2);
            assert!(r.put_or_lock().is_none());
            assert_eq!(r.count(), 1);
            {
                let g = r.put_or_lock().expect("count 1 returns the lock");
                assert_eq!(g.count(), 1, "not decremented");
                assert!(r.try_lock().is_none(), "held");
            }
            assert!(r.try_lock().is_some(), "guard drop unlocked");
            let z = mk(0);
            assert_eq!(z.put_or_lock().map(|g| g.count()), Some(0));
        });
    }

    #[test]
    fn guard_methods() {
        both(|mk| {
            let r = mk(5);
            {
                let mut g = r.lock();
                assert_eq!(g.count(), 5);
                g.inc();
                assert_eq!(g.count(), 6);
                g.dec();
                g.dec();
                assert_eq!(g.count(), 4);
                g.set_count(0);
                g.dec();
                assert_eq!(g.count(), 0, "dec of zero sticks");
                g.set_count(u32::MAX);
                assert_eq!(g.count(), i32::MAX, "set_count clamps");
                g.mark_dead();
                assert!(g.is_dead());
                g.inc();
                g.dec();
                assert_eq!(g.count(), DEAD, "dead is terminal for inc/dec");
                g.set_count(7);
                assert!(!g.is_dead(), "set_count revives");
                assert_eq!(format!("{g:?}"), "LockRefGuard { count: 7 }");
            }
            assert_eq!(r.count(), 7);
            assert!(format!("{r:?}").contains("count: 7"));
        });
    }

    #[test]
    fn try_lock_excludes() {
        both(|mk| {
            let r = mk(1);
            let g = r.try_lock().expect("free");
            assert!(r.try_lock().is_none());
            drop(g);
            let g2 = r.lock();
            assert!(r.try_lock().is_none());
            drop(g2);
            assert!(r.try_lock().is_some());
        });
    }

    #[test]
    fn saturation_is_sticky() {
        both(|mk| {
            let r = mk(i32::MAX as u32);
            r.get();
            assert_eq!(r.count(), i32::MAX);
            assert!(r.get_not_zero());
            assert!(r.get_not_dead());
            assert_eq!(r.count(), i32::MAX);
            assert!(r.put_return().is_some());
            assert!(r.put_or_lock().is_none());
            assert_eq!(r.count(), i32::MAX, "saturated counts never drop to a free");
            let almost = mk(i32::MAX as u32 - 1);
            almost.get();
            almost.get();
            assert_eq!(almost.count(), i32::MAX);
        });
    }

    /// A thread that finds the lock held waits and then succeeds locklessly; it does not
    /// take the lock (Linux would queue on it). Afterwards, no operation takes the lock.
    #[test]
    fn returns_to_lockless_after_contention() {
        let r = Arc::new(LockRef::new(1));
        let threads = 4;
        let started = Arc::new(Barrier::new(threads + 1));
        let g = r.lock();
        let hs: Vec<_> = (0..threads)
            .map(|_| {
                let (r, started) = (r.clone(), started.clone());
                thread::spawn(move || {
                    started.wait();
                    let before = thread_stats();
                    r.get(); // finds the lock held (main holds it until all have waited)
                    let during = thread_stats().since(before);
                    // Fewer under Miri, which interprets (about 1000x slower).
                    for _ in 0..if cfg!(miri) { 100 } else { 1000 } {
                        r.get();
                        // The count stays > 1 (this thread holds a reference), so this
                        // always drops one: locklessly, or under the lock if the budget
                        // ran out.
                        assert!(r.put_or_lock().is_none());
                    }
                    let after = thread_stats().since(before);
                    (during, after)
                })
            })
            .collect();
        started.wait();
        // Hold the lock until every worker's fast path is waiting on it.
        wait_for_waiters(&r.word, threads);
        drop(g);
        for h in hs {
            let (during, after) = h.join().unwrap();
            assert!(
                during.waits >= 1,
                "{during:?}: the fast path saw the lock held"
            );
            assert_eq!(during.locked, 0, "{during:?}: and did not queue on it");
            // Back on the lockless path: the lock is taken only where a fast path ran
            // out of its budget of compare-exchanges, never because it had been held.
            // Against 3 other fast paths the budget is rarely exhausted, but a thread
            // that is descheduled or slowed (ThreadSanitizer, 4 threads on 2 cores) can
            // lose it now and then; a few in 2000 operations is still lockless.
            assert_eq!(after.locked, after.fallbacks, "{after:?}: locked only on budget");
            assert!(after.fallbacks <= 20, "{after:?}: back on the lockless path");
        }
        assert_eq!(r.count(), 1 + threads as i32);
        // A single thread now never touches the lock.
        let before = thread_stats();
        for _ in 0..100 {
            r.get();
            assert!(r.get_not_zero());
            assert!(r.get_not_dead());
            assert!(r.put_or_lock().is_none());
            assert!(r.put_return().is_some());
            assert!(r.put_return().is_some());
        }
        assert_eq!(thread_stats().since(before), LockRefStats::default());
    }

    /// The contrast: under Linux's policy the same situation makes the fast path queue on
    /// the lock (which is what `returns_to_lockless_after_contention` rules out).
    #[test]
    fn linux_policy_queues_on_the_lock() {
        let mut r = LockRef::new(1);
        r.linux_fallback = true;
        let g = r.lock();
        let during = thread::scope(|s| {
            let h = s.spawn(|| {
                let before = thread_stats();
                r.get();
                thread_stats().since(before)
            });
            wait_for_waiters(&r.word, 1);
            drop(g);
            h.join().unwrap()
        });
        assert_eq!((during.waits, during.fallbacks, during.locked), (0, 1, 1));
        assert_eq!(r.count(), 2);
    }

    /// Transitions that need the lock take it, and are counted.
    #[test]
    fn needed_transitions_take_the_lock() {
        let r = LockRef::new(1);
        let before = thread_stats();
        drop(r.put_or_lock().expect("last reference"));
        assert_eq!(thread_stats().since(before).locked, 1);
        assert_eq!(thread_stats().since(before).fallbacks, 0);
    }

    /// 32 threads mix every operation; a locker thread keeps taking the lock. The final
    /// count equals the initial one.
    #[test]
    fn stress_mixed() {
        fn run<R: RefCount + 'static>(r: R) {
            // Fewer under Miri, which interprets (about 1000x slower).
            const THREADS: usize = if cfg!(miri) { 4 } else { 32 };
            const ITERS: usize = if cfg!(miri) { 100 } else { 2000 };
            let r = Arc::new(r);
            let hs: Vec<_> = (0..THREADS)
                .map(|t| {
                    let r = r.clone();
                    thread::spawn(move || {
                        for i in 0..ITERS {
                            match (i + t) % 5 {
                                0 => {
                                    r.get();
                                    if r.put_return().is_none() {
                                        r.lock().dec();
                                    }
                                }
                                1 => {
                                    assert!(r.get_not_zero());
                                    assert!(r.put_or_lock().is_none(), "we hold one more");
                                }
                                2 => {
                                    assert!(r.get_not_dead());
                                    r.get();
                                    assert!(r.put_or_lock().is_none());
                                    assert!(r.put_or_lock().is_none());
                                }
                                3 => {
                                    let mut g = r.lock();
                                    g.inc();
                                    g.dec();
                                }
                                _ => {
                                    if let Some(mut g) = r.try_lock() {
                                        g.inc();
                                        drop(g);
                                        assert!(r.put_or_lock().is_none());
                                    }
                                }
                            }
                        }
                    })
                })
                .collect();
            for h in hs {
                h.join().unwrap();
            }
            assert_eq!(r.count(), 1);
        }
        run(LockRef::new(1));
        run(LegacyRef::new(1));
    }

    /// Workers and lookups race to drop the last reference: exactly one dput sees it and
    /// marks the object dead, and no lookup succeeds afterwards.
    #[test]
    fn stress_teardown() {
        fn run<R: RefCount + 'static>(mk: fn(u32) -> R) {
            // Fewer under Miri, which interprets (about 1000x slower).
            const WORKERS: usize = if cfg!(miri) { 4 } else { 24 };
            const LOOKUPS: usize = if cfg!(miri) { 2 } else { 8 };
            const ROUNDS: usize = if cfg!(miri) { 2 } else { 10 };
            const GETS: usize = if cfg!(miri) { 20 } else { 200 };
            for _round in 0..ROUNDS {
                let r = Arc::new(mk(WORKERS as u32));
                let kills = Arc::new(AtomicUsize::new(0));
                let hs: Vec<_> = (0..WORKERS + LOOKUPS)
                    .map(|t| {
                        let (r, kills) = (r.clone(), kills.clone());
                        thread::spawn(move || {
                            let mut killed = 0;
                            if t < WORKERS {
                                for _ in 0..GETS {
                                    r.get();
                                    killed += usize::from(dput(&*r));
                                }
                                killed += usize::from(dput(&*r)); // its own reference
                            } else {
                                while r.get_not_dead() {
                                    killed += usize::from(dput(&*r));
                                }
                            }
                            kills.fetch_add(killed, std::sync::atomic::Ordering::Relaxed);
                        })
                    })
                    .collect();
                for h in hs {
                    h.join().unwrap();
                }
                assert_eq!(kills.load(std::sync::atomic::Ordering::Relaxed), 1);
                assert!(r.is_dead());
                assert!(!r.get_not_dead());
            }
        }
        run(LockRef::new);
        run(LegacyRef::new);
    }

    /// Ad-hoc measurement of the return to lockless, against Linux's immediate fallback:
    /// `cargo test -p scalevfs-primitives --release --lib lockref::tests::measure --
    /// --ignored --nocapture`. Phase 1: a locker thread keeps taking the lock while the
    /// others do get/put pairs; phase 2: the locker stops. Prints pairs/s and the lock
    /// acquisitions by the gets and puts per million pairs, per phase.
    #[test]
    #[ignore]
    fn measure_return_to_lockless() {
        use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
        use std::time::Duration;
        let phase = Duration::from_millis(400);
        for linux in [false, true] {
            for threads in [1usize, 2, 16, 64] {
                let mut r = LockRef::new(1);
                r.linux_fallback = linux;
                let (stop_locker, stop, flip) = (
                    AtomicBool::new(false),
                    AtomicBool::new(false),
                    AtomicBool::new(false),
                );
                // [phase][pairs, locked, waits]
                let sums: [[AtomicU64; 3]; 2] = Default::default();
                let add = |p: usize, pairs: u64, d: LockRefStats| {
                    sums[p][0].fetch_add(pairs, Relaxed);
                    sums[p][1].fetch_add(d.locked, Relaxed);
                    sums[p][2].fetch_add(d.waits, Relaxed);
                };
                thread::scope(|s| {
                    s.spawn(|| {
                        while !stop_locker.load(Relaxed) {
                            // A d_lock critical section of about a microsecond.
                            let mut g = r.lock();
                            g.inc();
                            for _ in 0..200 {
                                std::hint::spin_loop();
                            }
                            g.dec();
                            drop(g);
                            // ... then as long outside it (a greedy re-locker would starve
                            // everyone, under either policy: the lock is not fair).
                            for _ in 0..200 {
                                std::hint::spin_loop();
                            }
                        }
                    });
                    for _ in 0..threads {
                        s.spawn(|| {
                            let add = &add;
                            let mut p = 0;
                            let (mut pairs, mut base) = (0, thread_stats());
                            while !stop.load(Relaxed) {
                                for _ in 0..64 {
                                    r.get();
                                    assert!(r.put_or_lock().is_none());
                                }
                                pairs += 64;
                                if p == 0 && flip.load(Relaxed) {
                                    add(0, pairs, thread_stats().since(base));
                                    (p, pairs, base) = (1, 0, thread_stats());
                                }
                            }
                            add(p, pairs, thread_stats().since(base));
                        });
                    }
                    thread::sleep(phase);
                    stop_locker.store(true, Relaxed);
                    flip.store(true, Relaxed);
                    thread::sleep(phase);
                    stop.store(true, Relaxed);
                });
                let mode = if linux {
                    "linux-fallback"
                } else {
                    "wait-and-retry"
                };
                let d = phase.as_secs_f64();
                let pr = |i: usize| {
                    let pairs = sums[i][0].load(Relaxed) as f64;
                    let locked = sums[i][1].load(Relaxed) as f64;
                    let waits = sums[i][2].load(Relaxed) as f64;
                    format!(
                        "{:6.2} M pairs/s, per 1M pairs: {:7.1} waits {:7.1} locks",
                        pairs / d / 1e6,
                        1e6 * waits / pairs.max(1.0),
                        1e6 * locked / pairs.max(1.0)
                    )
                };
                println!(
                    "{mode:15} {threads:3} thr  with locker: {}   after: {}",
                    pr(0),
                    pr(1)
                );
            }
        }
    }

    /// Oversubscription: 64 threads on 2 cores, with frequent lockers, must finish (the
    /// waiters yield instead of burning a preempted holder's time slice).
    #[test]
    fn stress_oversubscribed() {
        // Fewer under Miri, which interprets (about 1000x slower).
        let (threads, iters) = if cfg!(miri) { (16, 50) } else { (64, 500) };
        let r = Arc::new(LockRef::new(1));
        let hs: Vec<_> = (0..threads)
            .map(|t| {
                let r = r.clone();
                thread::spawn(move || {
                    for i in 0..iters {
                        if (i + t) % 16 == 0 {
                            let mut g = r.lock();
                            g.inc();
                            g.dec();
                        } else {
                            r.get();
                            assert!(r.put_or_lock().is_none());
                        }
                    }
                })
            })
            .collect();
        for h in hs {
            h.join().unwrap();
        }
        assert_eq!(r.count(), 1);
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;
    use crate::sync::{Arc, AtomicU32};
    use loom::thread;

    /// A fast-path get/put pair while another thread holds the lock and changes the count:
    /// no update is lost.
    #[test]
    fn loom_get_put_while_locked() {
        loom::model(|| {
            let r = Arc::new(LockRef::new(2));
            let r2 = r.clone();
            let t = thread::spawn(move || {
                let mut g = r2.lock();
                g.inc();
            });
            r.get();
            if r.put_return().is_none() {
                r.lock().dec();
            }
            t.join().unwrap();
            assert_eq!(r.count(), 3);
        });
    }

    /// A fast path and a thread that locks, unlocks and then changes the count: with the
    /// loom budget of 2, the fast path can wait once, lose its compare-exchange and fall
    /// back to the lock; every mix of waiting, retrying and falling back keeps the count.
    #[test]
    fn loom_fallback_keeps_count() {
        loom::model(|| {
            let r = Arc::new(LockRef::new(1));
            let r2 = r.clone();
            let t = thread::spawn(move || r2.get());
            drop(r.lock());
            r.get();
            t.join().unwrap();
            assert_eq!(r.count(), 3);
        });
    }

    /// put_or_lock of the last reference races get_not_dead: either the put wins (marks
    /// dead, the get fails) or the get wins first (the put is lockless, the object lives).
    #[test]
    fn loom_put_or_lock_vs_get_not_dead() {
        loom::model(|| {
            let r = Arc::new(LockRef::new(1));
            let r2 = r.clone();
            let t = thread::spawn(move || match r2.put_or_lock() {
                None => false,
                Some(mut g) => {
                    assert_eq!(g.count(), 1);
                    g.dec();
                    g.mark_dead();
                    true
                }
            });
            let got = r.get_not_dead();
            let killed = t.join().unwrap();
            assert!(killed != got, "exactly one wins: killed={killed} got={got}");
            if killed {
                assert!(r.is_dead());
            } else {
                assert_eq!(r.count(), 1);
            }
        });
    }

    /// The unlock's Release pairs with the fast path's Acquire: a get_not_zero that sees
    /// the count a lock holder revived also sees what the holder wrote before unlocking.
    #[test]
    fn loom_unlock_publishes_to_fast_path() {
        loom::model(|| {
            let r = Arc::new(LockRef::new(0));
            let data = Arc::new(AtomicU32::new(0));
            let (r2, d2) = (r.clone(), data.clone());
            let t = thread::spawn(move || {
                let mut g = r2.lock();
                d2.store(1, Ordering::Relaxed);
                g.set_count(1);
            });
            if r.get_not_zero() {
                assert_eq!(data.load(Ordering::Relaxed), 1);
            }
            t.join().unwrap();
        });
    }

    /// A lockless put's Release pairs with the lock's Acquire: whichever thread drops the
    /// last reference under the lock sees the other holder's accesses.
    #[test]
    fn loom_put_publishes_to_last_dput() {
        fn holder(r: &LockRef, mine: &AtomicU32, other: &AtomicU32) -> bool {
            mine.store(1, Ordering::Relaxed);
            match r.put_or_lock() {
                None => false,
                Some(mut g) => {
                    // We are last: the other put happened before, and so did its store.
                    assert_eq!(g.count(), 1);
                    assert_eq!(other.load(Ordering::Relaxed), 1);
                    g.dec();
                    g.mark_dead();
                    true
                }
            }
        }
        loom::model(|| {
            let r = Arc::new(LockRef::new(2));
            let a = Arc::new(AtomicU32::new(0));
            let b = Arc::new(AtomicU32::new(0));
            let (r2, a2, b2) = (r.clone(), a.clone(), b.clone());
            let t = thread::spawn(move || holder(&r2, &b2, &a2));
            let me = holder(&r, &a, &b);
            let other = t.join().unwrap();
            assert!(me != other, "exactly one is last");
            assert!(r.is_dead());
        });
    }
}
