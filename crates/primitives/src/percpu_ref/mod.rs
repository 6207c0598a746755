//! # percpu_ref: a lockref whose gets and puts can go to per-CPU counters
//!
//! A [`LockRef`] is one cache line that every CPU taking a reference writes: two CPUs
//! that open one file both write its dentry's count word. Linux has the same conflict;
//! sv6's Refcache and Linux's `percpu_ref` avoid it with per-CPU deltas. [`PcpuRef`] is a
//! `LockRef` (the count and the owner's lock in one word, seed 004's design) with a second
//! mode in which gets and puts change a counter of the calling CPU instead.
//!
//! ## Modes
//!
//! * **Atomic**: the `LockRef` holds the exact count; gets and puts are the `LockRef`'s.
//! * **Per-CPU**: the `LockRef` count holds a [`BIAS`] on top of its own part, and gets
//!   and puts add ±1 to the calling CPU's counter of the object's slot in a
//!   [`SlotArena`] (a compare-exchange of a line only that CPU writes). The true count is
//!   `lockref - BIAS + Σ counters`. Because of the bias the `LockRef` count never reaches
//!   zero in this mode, so no put takes the lock and nothing that happens at zero (caching
//!   on an LRU, killing) can happen while per-CPU counts exist: an object in per-CPU mode
//!   is never killed while counted, and is not killed at all until it is switched back.
//!
//! The mode lives in `slot`, a word beside the `LockRef`: the slot number, with [`MODE`]
//! set while in per-CPU mode. Both transitions run under the `LockRef`'s lock:
//!
//! * [`PcpuRef::promote`] (atomic -> per-CPU): takes a slot if the object has none yet,
//!   opens its counters (closed -> 0), adds the bias to the count, then stores the slot
//!   with `MODE` (`Release`).
//! * [`PcpuRef::demote`] (per-CPU -> atomic, Linux's `percpu_ref_switch_to_atomic`):
//!   clears `MODE`, closes every CPU's counter (swap to `CLOSED`), and sets the count to
//!   `lockref - BIAS + Σ drained`. The caller then looks at the exact count: if it is
//!   zero, it does what a last put does.
//!
//! No grace period is needed between the two steps of a switch, unlike Linux's: a counter
//! is changed only by a compare-exchange that refuses `CLOSED`, so every per-CPU get or
//! put either lands before its counter is closed (and is in the drained sum) or is
//! refused and retries on the `LockRef`, which waits for the lock the switcher holds. So
//! a count is never lost, and the count the switcher computes is exact. `MODE` is only a
//! hint that saves a look at the arena: a reader that sees it stale meets `CLOSED`.
//!
//! A grace period *is* needed before a slot is reused by another object
//! ([`SlotArena::free`]): a thread may have read the slot number and not yet added. The
//! owner gives the slot back only after it is dead and a grace period has passed (the
//! dcache does it with the dentry's own retire).
//!
//! ## When to promote
//!
//! [`PcpuRef::get`] and [`PcpuRef::get_not_dead`] in atomic mode note the calling thread
//! in `last_thread` (a word written only when it changes) and answer `true` ("promote me")
//! when it changed from another thread: the object is being counted by two threads, so it
//! is shared, and on any machine with more than one CPU two threads that count it run on
//! different CPUs. The thread and not the CPU: a thread's number is a thread-local load,
//! where asking for the CPU (`sched_getcpu`) on every atomic get cost 4% of a
//! single-threaded open/read/close (callgrind); and a thread that migrates does not make
//! its private objects look shared. The owner decides whether to promote (it has to do its own bookkeeping: the
//! dcache puts the dentry on its LRU, so that the shrinker, which demotes, sees it).
//!
//! ## What each call writes
//!
//! * Per-CPU get/put: the calling CPU's counter (its own line); reads `slot` and the
//!   arena's chunk table, which nobody writes.
//! * Atomic get/put: the `LockRef` word, and `last_thread` when the thread changed.
//! * Promote/demote: the `LockRef` word, `slot`, every CPU's counter of the slot.
//!
//! ## Orderings
//!
//! `promote`'s `Release` store of `slot` pairs with the `Acquire` load in the gets and
//! puts: a reader that sees `MODE` sees the opened counters. Counter changes and closes
//! are `AcqRel` read-modify-writes (see [`arena`]); the `LockRef`'s orderings are its own.
//! `last_thread` is `Relaxed`: a heuristic. The demote's `Relaxed` clear of `MODE` needs
//! nothing: correctness rests on the counters' `CLOSED`.
//!
//! ## Lock order
//!
//! The `LockRef`'s lock -> the arena's allocation mutex (in `promote`). Gets and puts take
//! no lock in per-CPU mode.

pub mod arena;
#[cfg(all(test, loom))]
mod loom_tests;
#[cfg(all(test, not(loom)))]
mod tests;

pub use arena::{expire_cpu_hint, SlotArena, SlotCounters, SlotId};

use crate::lockref::{LockRef, LockRefGuard};
use crate::sync::{AtomicU32, Ordering};

/// What the `LockRef` count carries in per-CPU mode on top of the object's own part.
pub const BIAS: i32 = 1 << 30;
/// Set in `slot` while in per-CPU mode.
pub const MODE: u32 = 1 << 31;
/// `last_thread` before the first atomic get, and "not numbered yet" in [`thread_number`].
const NO_THREAD: u32 = 0;

/// The calling thread's number (1, 2, ...; wraps past `u32::MAX`, skipping 0).
#[inline]
fn thread_number() -> u32 {
    use std::cell::Cell;
    use std::sync::atomic::{AtomicU32, Ordering::Relaxed};
    static NEXT: AtomicU32 = AtomicU32::new(1);
    thread_local! {
        static NUMBER: Cell<u32> = const { Cell::new(NO_THREAD) };
    }
    NUMBER.with(|n| {
        if n.get() == NO_THREAD {
            // Relaxed: the numbers only have to differ.
            let mut v = NEXT.fetch_add(1, Relaxed);
            if v == NO_THREAD {
                v = NEXT.fetch_add(1, Relaxed);
            }
            n.set(v);
        }
        n.get()
    })
}

/// See the module docs.
pub struct PcpuRef {
    lockref: LockRef,
    /// 0 (no slot yet) or the slot's number, with [`MODE`] in per-CPU mode. Changed
    /// under the lock.
    slot: AtomicU32,
    /// The thread of the last atomic-mode get, or `NO_THREAD`; written only when it changes.
    last_thread: AtomicU32,
}

impl std::fmt::Debug for PcpuRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PcpuRef")
            .field("lockref", &self.lockref.count())
            .field("slot", &self.slot.load(Ordering::Relaxed))
            .finish()
    }
}

impl PcpuRef {
    /// A count of `count`, in atomic mode.
    pub fn new(count: u32) -> PcpuRef {
        PcpuRef {
            lockref: LockRef::new(count),
            slot: AtomicU32::new(0),
            last_thread: AtomicU32::new(NO_THREAD),
        }
    }

    /// The slot, if in per-CPU mode (as far as the caller can tell: module docs).
    #[inline]
    fn percpu_slot(&self) -> Option<SlotId> {
        // Acquire: pairs with the Release store in `promote` (the counters are open).
        let w = self.slot.load(Ordering::Acquire);
        if w & MODE == 0 {
            None
        } else {
            SlotId::from_raw(w & !MODE)
        }
    }

    /// Adds `delta` to the calling CPU's counter if in per-CPU mode; false otherwise.
    #[inline]
    fn percpu_add(&self, arena: Option<&SlotArena>, delta: i64) -> bool {
        match (arena, self.percpu_slot()) {
            (Some(a), Some(id)) => a.try_add(id, delta),
            _ => false,
        }
    }

    /// Notes the calling thread after an atomic-mode get: true if the previous one was
    /// another thread's (the object is shared: the owner may promote it).
    #[inline]
    fn note_thread(&self, arena: Option<&SlotArena>) -> bool {
        if arena.is_none() {
            return false;
        }
        let now = thread_number();
        // Relaxed: a heuristic (module docs).
        let last = self.last_thread.load(Ordering::Relaxed);
        if last == now {
            return false;
        }
        self.last_thread.store(now, Ordering::Relaxed);
        last != NO_THREAD
    }

    /// Takes a reference (the caller holds one). Without an arena, the plain `LockRef`.
    /// True: the object was counted by another thread before; the owner may promote it.
    #[inline]
    pub fn get(&self, arena: Option<&SlotArena>) -> bool {
        if self.percpu_add(arena, 1) {
            return false;
        }
        self.lockref.get();
        self.note_thread(arena)
    }

    /// Takes a reference unless the object is dead: `None` if dead, else `Some(promote?)`
    /// as [`get`](Self::get). An object in per-CPU mode is never dead (the bias).
    #[inline]
    pub fn get_not_dead(&self, arena: Option<&SlotArena>) -> Option<bool> {
        if self.percpu_add(arena, 1) {
            return Some(false);
        }
        if self.lockref.get_not_dead() {
            Some(self.note_thread(arena))
        } else {
            None
        }
    }

    /// Drops a reference: in per-CPU mode on the CPU's counter (`None`); else as
    /// [`LockRef::put_or_lock`] (the lock and the unchanged count if it is the last).
    #[inline]
    pub fn put_or_lock(&self, arena: Option<&SlotArena>) -> Option<LockRefGuard<'_>> {
        if self.percpu_add(arena, -1) {
            return None;
        }
        self.lockref.put_or_lock()
    }

    /// Takes the lock.
    #[inline]
    pub fn lock(&self) -> LockRefGuard<'_> {
        self.lockref.lock()
    }

    /// Takes the lock if it is free.
    #[inline]
    pub fn try_lock(&self) -> Option<LockRefGuard<'_>> {
        self.lockref.try_lock()
    }

    /// Whether it is in per-CPU mode (exact under the lock, a hint otherwise).
    #[inline]
    pub fn is_percpu(&self) -> bool {
        self.slot.load(Ordering::Relaxed) & MODE != 0
    }

    /// A racy snapshot of the true count (negative if dead).
    pub fn count(&self, arena: Option<&SlotArena>) -> i32 {
        let c = self.lockref.count();
        match (arena, self.percpu_slot()) {
            (Some(a), Some(id)) => {
                (i64::from(c) - i64::from(BIAS) + a.sum(id)).clamp(0, i64::from(i32::MAX)) as i32
            }
            _ => c,
        }
    }

    /// Switches to per-CPU mode. `g` must be this object's lock, and the caller must keep
    /// the object alive (a count, or the lock against its teardown). False (nothing done)
    /// if already in per-CPU mode, dead, at zero, at `BIAS` or more, or if the arena
    /// has no slot left.
    pub fn promote(&self, g: &mut LockRefGuard<'_>, arena: &SlotArena) -> bool {
        let w = self.slot.load(Ordering::Relaxed);
        let c = g.count();
        if w & MODE != 0 || c <= 0 || c >= BIAS {
            return false;
        }
        let id = match SlotId::from_raw(w) {
            Some(id) => id,
            None => match arena.alloc() {
                Some(id) => id,
                None => return false,
            },
        };
        arena.open(id);
        g.set_count((c + BIAS) as u32);
        // Release: pairs with the Acquire in `percpu_slot` (the counters are open).
        self.slot.store(id.get() | MODE, Ordering::Release);
        true
    }

    /// Switches to atomic mode and leaves the exact count in the `LockRef` (`g.count()`).
    /// `g` must be this object's lock. False if it was in atomic mode already.
    pub fn demote(&self, g: &mut LockRefGuard<'_>, arena: &SlotArena) -> bool {
        let w = self.slot.load(Ordering::Relaxed);
        let Some(id) = SlotId::from_raw(w & !MODE).filter(|_| w & MODE != 0) else {
            return false;
        };
        // Relaxed: a hint; the closed counters are what stop per-CPU changes.
        self.slot.store(id.get(), Ordering::Relaxed);
        let drained = arena.close(id);
        let exact = i64::from(g.count()) - i64::from(BIAS) + drained;
        debug_assert!(exact >= 0, "per-CPU count went below zero: {exact}");
        g.set_count(exact.clamp(0, i64::from(i32::MAX)) as u32);
        true
    }

    /// The slot this object holds (in atomic mode only: `None` while in per-CPU mode or if
    /// it never had one), to give back with [`SlotArena::free`] once the object is dead.
    pub fn slot(&self) -> Option<SlotId> {
        let w = self.slot.load(Ordering::Relaxed);
        if w & MODE != 0 {
            None
        } else {
            SlotId::from_raw(w)
        }
    }
}
