//! [`LockEvent`]: a named count of a step a locking protocol took ("a blocked request was
//! completed while it polled"), recorded while lockstat is on, printed below the classes'
//! table.
//!
//! A class's contentions and times say *that* threads met on a lock; the events of the
//! protocol built on it say *how* they met: whether a waiter slept or was handed the lock
//! while it polled, whether its retry won. They are counted on slow paths only (a request
//! that blocks), so the off test, one `Relaxed` load of the global flag, costs the fast
//! paths nothing.
//!
//! Like the classes' counters, an event's count is sharded by CPU (cache-padded shards,
//! the shard of the CPU the thread runs on, a hint), so counting does not make the
//! protocol's threads meet on a line they would not meet on otherwise. Counts are `Relaxed`
//! and order nothing; a report sums the shards.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};

use crossbeam_utils::CachePadded;

use super::{is_enabled, listed, register_once, NR_SHARDS};

/// The events that counted at least once since the process started.
static EVENTS: std::sync::Mutex<Vec<&'static LockEvent>> = std::sync::Mutex::new(Vec::new());

/// A named event count; declare it as a `static` and call [`LockEvent::count`] where the
/// step happens.
///
/// ```
/// use scalevfs_primitives::lockstat::{self, LockEvent};
/// static HANDED_ON: LockEvent = LockEvent::new("demo: lock handed on");
/// lockstat::enable();
/// HANDED_ON.count();
/// lockstat::disable();
/// HANDED_ON.count(); // off: not counted
/// assert!(HANDED_ON.total() >= 1);
/// assert!(lockstat::report().contains("demo: lock handed on"));
/// ```
pub struct LockEvent {
    name: &'static str,
    registered: AtomicBool,
    shards: [CachePadded<AtomicU64>; NR_SHARDS],
}

impl LockEvent {
    /// An event named `name` (a `const fn`, for `static`s).
    pub const fn new(name: &'static str) -> Self {
        LockEvent {
            name,
            registered: AtomicBool::new(false),
            shards: [const { CachePadded::new(AtomicU64::new(0)) }; NR_SHARDS],
        }
    }

    /// The event's name.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// Counts one occurrence if lockstat is on.
    #[inline]
    pub fn count(&'static self) {
        if is_enabled() {
            self.count_recorded();
        }
    }

    #[cold]
    #[inline(never)]
    fn count_recorded(&'static self) {
        register_once(&self.registered, &EVENTS, self);
        self.shards[crate::cpu::current_shard(NR_SHARDS)].fetch_add(1, Relaxed);
    }

    /// The count, summed over the shards.
    pub fn total(&self) -> u64 {
        self.shards.iter().map(|s| s.load(Relaxed)).sum()
    }

    fn reset(&self) {
        self.shards.iter().for_each(|s| s.store(0, Relaxed));
    }
}

/// Zeroes every registered event.
pub(super) fn reset_events() {
    listed(&EVENTS).iter().for_each(|e| e.reset());
}

/// The lines the report ends with: one per event that counted since the last reset, by
/// name; empty if none did.
pub(super) fn format_events() -> String {
    let mut events: Vec<(&str, u64)> = listed(&EVENTS)
        .iter()
        .map(|e| (e.name, e.total()))
        .filter(|&(_, n)| n > 0)
        .collect();
    if events.is_empty() {
        return String::new();
    }
    events.sort_unstable();
    let mut out = String::from("events:\n");
    for (name, n) in events {
        out.push_str(&format!("{name:>56} {n:>12}\n"));
    }
    out
}
