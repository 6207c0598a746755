//! # lockref: a spinlock and a reference count in one 64-bit word (Linux's lockref)
//!
//! Before lockref (Linux 3.12) every change of a dentry's reference count took its `d_lock`, so a hot
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

mod legacy;
mod scalable;
mod stats;
mod word;

#[cfg(all(test, loom))]
mod loom_tests;
#[cfg(all(test, not(loom)))]
mod tests;

pub use legacy::LegacyRef;
pub use scalable::LockRef;
pub use stats::{thread_stats, LockRefStats};
pub use word::LockRefGuard;
#[cfg(all(test, not(loom)))]
use word::Word;

use std::fmt;

/// The count of a dead object ([`LockRefGuard::mark_dead`]), as Linux's `lockref_mark_dead`.
pub const DEAD: i32 = -128;

/// Fast-path attempts (failed compare-exchanges plus waits for the lock) an operation may
/// make before it takes the lock. Linux uses 100. Loom models use a small budget so the
/// fallback path is explored too without exploding the state space.
#[cfg(not(loom))]
pub const RETRIES: u32 = 100;
/// Fast-path attempts before the lock, under loom: small, so the models reach the fallback.
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
