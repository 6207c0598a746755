//! The recording paths the locks call when lockstat is on: acquisition with wait time, and
//! the hold start ([`HoldStart`]) that the release turns into a hold time.

#[cfg(feature = "lockstat")]
use std::cell::UnsafeCell;

use super::{now_ns, Kind, LockClass};

/// A hold start: nanoseconds of `CLOCK_MONOTONIC`, never 0 (0 means "not recorded").
#[inline]
fn stamp_now() -> u64 {
    now_ns().max(1)
}

/// Where an exclusive lock keeps the hold start of its current holder, if recorded: in the
/// lock, not in the guard, so the guard is one pointer and its drop tests one word on the
/// line the holder has just written (the lock word's line).
///
/// Only the holder touches it (set after acquiring, read and cleared before unlocking), so
/// it is a plain cell protected by the lock itself: the lock's Release unlock / Acquire
/// lock orders one holder's clear before the next holder's read. Plain, not atomic, so the
/// test compiles to one compare with memory. Zero-sized when lockstat is compiled out.
pub(crate) struct HoldStart {
    #[cfg(feature = "lockstat")]
    since: UnsafeCell<u64>,
}

impl HoldStart {
    pub(crate) const fn new() -> Self {
        HoldStart {
            #[cfg(feature = "lockstat")]
            since: UnsafeCell::new(0),
        }
    }

    /// Whether the current hold was stamped (lockstat on at acquisition): then the holder
    /// calls [`record_release`](Self::record_release), from a cold path, before unlocking.
    /// One compare with memory and a branch; constant `false` when compiled out.
    ///
    /// # Safety
    ///
    /// The caller holds the lock exclusively.
    #[inline(always)]
    pub(crate) unsafe fn is_stamped(&self) -> bool {
        // SAFETY: the caller holds the lock, which makes it the cell's only user. Volatile
        // only keeps the load next to its test, where it folds into one compare.
        #[cfg(feature = "lockstat")]
        return unsafe { self.since.get().read_volatile() } != 0;
        #[cfg(not(feature = "lockstat"))]
        false
    }

    /// Records the hold time into `class` and clears the stamp.
    ///
    /// # Safety
    ///
    /// The caller holds the lock exclusively.
    pub(crate) unsafe fn record_release(&self, class: &Option<&'static LockClass>) {
        #[cfg(feature = "lockstat")]
        {
            // SAFETY: the caller holds the lock, which makes it the cell's only user.
            let since = std::mem::take(unsafe { &mut *self.since.get() });
            if let (Some(class), true) = (class, since != 0) {
                class.record_released(Kind::Write, now_ns().saturating_sub(since));
            }
        }
        #[cfg(not(feature = "lockstat"))]
        let _ = class;
    }

    /// # Safety
    ///
    /// The caller has just acquired the lock exclusively.
    #[inline(always)]
    unsafe fn set(&self, since: u64) {
        // SAFETY: the caller holds the lock, which makes it the cell's only user.
        #[cfg(feature = "lockstat")]
        unsafe {
            *self.since.get() = since
        };
        #[cfg(not(feature = "lockstat"))]
        let _ = since;
    }
}

/// Records a shared guard's hold time (`since` is its stamp, non-zero). Shared holders
/// overlap, so each read guard carries its own stamp.
pub(crate) fn record_shared_release(class: &Option<&'static LockClass>, since: u64) {
    if let Some(class) = class {
        class.record_released(Kind::Read, now_ns().saturating_sub(since));
    }
}

/// The recording acquisition (lockstat on): first `try_lock`; if that fails the
/// acquisition is contended and the wait until `lock()` returns is recorded. Returns the
/// hold start, 0 for an unclassed lock (nothing recorded).
///
/// The locks call the recording functions from their own `#[cold]` `#[inline(never)]`
/// methods taking only `&self`: the fast path then tests the flag and, off, goes straight
/// to the raw lock without computing any argument of the recording path.
#[inline]
pub(super) fn acquire_recorded<G>(
    class: &Option<&'static LockClass>,
    kind: Kind,
    try_lock: impl FnOnce() -> Option<G>,
    lock: impl FnOnce() -> G,
) -> (G, u64) {
    let Some(class) = *class else {
        return (lock(), 0);
    };
    let (g, wait) = match try_lock() {
        Some(g) => (g, None),
        None => {
            let t0 = now_ns();
            let g = lock();
            (g, Some(now_ns().saturating_sub(t0)))
        }
    };
    class.record_acquired(kind, wait);
    (g, stamp_now())
}

/// Records a successful `try_lock` (an uncontended acquisition); returns the hold start.
#[inline]
pub(super) fn try_recorded(class: &Option<&'static LockClass>, kind: Kind) -> u64 {
    match *class {
        Some(class) => {
            class.record_acquired(kind, None);
            stamp_now()
        }
        None => 0,
    }
}

/// Recording exclusive acquisition (lockstat on): acquires through `try_lock`/`lock`,
/// records into `class` and stamps `hold`.
///
/// # Safety
///
/// `hold` belongs to the lock that `try_lock` and `lock` acquire exclusively.
#[inline]
pub(crate) unsafe fn acquire_exclusive_recorded<G>(
    class: &Option<&'static LockClass>,
    hold: &HoldStart,
    try_lock: impl FnOnce() -> Option<G>,
    lock: impl FnOnce() -> G,
) -> G {
    let (g, since) = acquire_recorded(class, Kind::Write, try_lock, lock);
    // SAFETY: `lock` or `try_lock` has just acquired the lock exclusively (our contract).
    unsafe { hold.set(since) };
    g
}

/// Records a successful exclusive `try_lock` (lockstat on) and stamps `hold`.
///
/// # Safety
///
/// The caller has just acquired, exclusively, the lock `hold` belongs to.
#[inline]
pub(crate) unsafe fn try_exclusive_recorded(class: &Option<&'static LockClass>, hold: &HoldStart) {
    // SAFETY: the caller holds the lock exclusively (our contract).
    unsafe { hold.set(try_recorded(class, Kind::Write)) };
}
