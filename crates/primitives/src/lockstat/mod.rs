//! Lock statistics per lock class, like Linux's `/proc/lock_stat` (CONFIG_LOCK_STAT).
//!
//! A [`LockClass`] names a set of locks that play one role ("rename_lock", "kernfs open
//! file mutexes"); it is declared as a `static`:
//!
//! ```
//! use scalevfs_primitives::lockstat::{self, LockClass, Mutex};
//! static RENAME_LOCK: LockClass = LockClass::new("rename_lock");
//! let m = Mutex::with_class(0u32, &RENAME_LOCK);
//! lockstat::enable();
//! *m.lock() += 1;
//! lockstat::disable();
//! assert!(lockstat::report().contains("rename_lock"));
//! ```
//!
//! The instrumented wrappers are [`Mutex`], [`RwLock`] (over `parking_lot`, over `loom`'s
//! locks under `--cfg loom`) and [`SpinLock`](crate::spinlock::SpinLock). Each is either
//! unclassed (`new(v)`: never recorded) or belongs to one class (`with_class(v, &CLASS)`).
//! The locks that threads meet on are classed: this crate's hashed tables and dlist
//! shards, kernfs's locks, and the VFS's file-lock, epoll, cache and directory locks
//! (`scalevfs_vfs::lockclass`, `scalevfs_tmpfs`'s directory buckets). The rest (a dentry's
//! `d_lock`, a pipe's state, a file's position, ...) are plain `parking_lot` locks and are
//! not recorded: a wrapper is 16 bytes larger (its class and hold stamp), which objects
//! made by the million do not pay.
//!
//! ## What is recorded (the hooks of Documentation/locking/lockstat.rst)
//!
//! ```text
//!   lock ── try ──ok──────────────┐            acquisitions += 1
//!            └─fail: contended ─ <wait> ─┐     contentions += 1, wait time
//!                                        acquired ── <hold> ── guard drop: hold time
//! ```
//!
//! Per class and per kind (read or write; mutexes and spinlocks are "write"):
//! acquisitions, contentions (acquisitions whose first try failed), wait time min/max/total
//! (from the failed try to acquisition) and hold time min/max/total (from acquisition to
//! guard drop; recorded before the unlock). Times are nanoseconds of `CLOCK_MONOTONIC`.
//! Minimums are of non-zero times, as in Linux.
//!
//! Besides the classes, a locking protocol can count its own steps as [`LockEvent`]s
//! (`event.rs`: how a waiter was served, whether its retry won), which the report lists
//! below the table.
//!
//! Not recorded, unlike Linux: con-bounces/acq-bounces (would need the last CPU per lock
//! instance, a write to the lock's line on every acquisition) and contention points
//! (call sites). Acquisitions by `try_lock` that fail are not counted.
//!
//! ## Cost
//!
//! Switched off (the default), an acquisition of any wrapper tests the global `ENABLED`
//! flag (one `Relaxed` load; the flag sits alone on its cache line and is written only by
//! [`enable`]/[`disable`], so it stays shared in every CPU's cache) and then takes the raw
//! lock; the guard is one pointer (plus a zero stamp for read guards), and its drop tests
//! the hold stamp and unlocks. Everything that records is in `#[cold]` `#[inline(never)]`
//! methods of the locks taking only `&self`, so the fast path computes no argument for them.
//!
//! Exclusive holds (mutexes, spinlocks, rwlock writers) keep their hold start in the lock
//! itself (`HoldStart`: a plain word only the holder touches, on the line its acquisition
//! has just taken exclusive), so the off test at the unlock is one compare with memory and a
//! branch. Shared holds overlap, so each read guard keeps its own stamp.
//!
//! What remains off is two not-taken branches per lock/unlock: 3 instructions for the flag
//! (LLVM does not fold an atomic load into a compare) and 2 for the stamp. Measured by
//! callgrind (instructions per operation; `scripts/lockstat-cost.sh` for the first row,
//! `scripts/callgrind.sh hashed-distinct dlist-add-del` for the others, compiled out =
//! built with `--no-default-features`):
//!
//! ```text
//!                                   compiled out   compiled in, off   on
//!   classed SpinLock lock/unlock         9               14           255
//!   hashed-distinct (Mutex table)       21.5             25.5 (+18.6%)
//!   dlist-add-del (SpinLock shards)    178.5            188.5 (+5.6%)
//! ```
//!
//! (Before this layout: 21 instructions for the spin lock, 38.5 (+79%) and 212.5 (+19%) for
//! the workloads.) In time the two branches are lost in the locked RMWs they sit next to:
//! `scripts/lockstat-ab.sh` (CPU time per operation of `one_thread`, compiled in vs out,
//! alternating, median of 7) measured hashed-distinct 10.83 vs 10.73 ns (+1.0%) and
//! dlist-add-del 17.19 vs 17.71 ns (within run-to-run noise of about ±5%) on the 2-CPU VM,
//! and an uncontended classed spin lock/unlock with lockstat off took 5.58 ns, as the bare
//! `RawSpinLock` (`lockstat_off_overhead` in the bench crate).
//! Getting the instruction counts themselves within 2% would need no test at all when off
//! (code patching, like the kernel's static keys), which this crate does not do.
//! Switched on, an acquisition costs two `clock_gettime` calls and a few shard-local
//! atomics (~90 ns).
//!
//! Switched on, the counters must not become the contended line they measure: each class
//! has [`NR_SHARDS`] cache-padded shards, and an event is added to the shard of the CPU the
//! thread runs on ([`crate::cpu::current_shard`]). The CPU is only a hint (the thread may
//! migrate): every counter is atomic, so a stale hint costs a shared line, never a lost
//! count. A report sums the shards.
//!
//! ## Registry
//!
//! Classes register themselves in a global list on their first recorded event, so
//! [`report`] and [`reset`] can find them. The registry mutex is taken only on that first
//! event (a class's `registered` flag is checked with a `Relaxed` load first; a stale
//! `false` only makes the thread take the mutex and re-check under it), and by
//! `report`/`reset`; never on a hot path.
//!
//! ## Memory ordering
//!
//! The counters order nothing: they are statistics, updated with `Relaxed` read-modify-writes
//! and read with `Relaxed` loads by `report`, which is exact once the measured threads have
//! been joined (the join orders their updates before the report) and approximate while they
//! run. `enable`/`disable` are `Relaxed` too: an acquisition racing with them may or may not
//! be recorded, like Linux's `lock_stat` sysctl.
//!
//! A hold stamped while enabled is recorded when its guard drops, even if lockstat was
//! disabled meanwhile (the drop tests the stamp, not the flag). An exclusive lock's stamp
//! is written only by its holder and ordered between holders by the lock's own Release
//! unlock / Acquire lock.
//!
//! ## Why the guards are not `lock_api`'s
//!
//! `lock_api::Mutex<R, T>` would supply the `UnsafeCell`, `Deref` and `Sync` boilerplate of
//! [`Mutex`] and [`RwLock`], but two things here do not fit its raw-lock traits: under
//! `--cfg loom` the raw lock is loom's, whose unlock is the drop of a guard that must be
//! kept somewhere (`lock_api::RawMutex::unlock` has no place for it), and a read guard
//! carries its own hold stamp (shared holds overlap), while `lock_api`'s guards carry
//! nothing but the lock. The raw locks do use `parking_lot`'s `lock_api` traits.
//!
//! Deliberately, this module uses `std` atomics rather than [`crate::sync`]: a `static`
//! [`LockClass`] needs `const` atomics, which loom's are not, and loom has nothing to check
//! in counters that synchronize nothing. The locks themselves use `crate::sync`.

mod class;
mod event;
mod mutex;
mod raw;
mod record;
mod rwlock;

#[cfg(all(test, loom))]
mod loom_tests;
#[cfg(all(test, not(loom)))]
mod tests;
#[cfg(all(test, not(loom)))]
use class::format_report;

pub use class::{report, report_for, snapshot, ClassStats, KindStats, LockClass, TimeStats};
pub use event::LockEvent;
pub use mutex::{Mutex, MutexGuard};
pub(crate) use record::{acquire_exclusive_recorded, try_exclusive_recorded, HoldStart};
pub use rwlock::{RwLock, RwLockReadGuard, RwLockWriteGuard};

use std::sync::atomic::{AtomicBool, Ordering::Relaxed};

use crossbeam_utils::CachePadded;

/// Counter shards per class. A power of two at least the CPU count of the machines we
/// measure on; with more CPUs, CPUs share shards (still correct, just more sharing).
pub const NR_SHARDS: usize = 32;

/// The global on/off switch. Read on every classed acquisition, written only by
/// [`enable`]/[`disable`]: padded so no hot data shares (and invalidates) its line.
static ENABLED: CachePadded<AtomicBool> = CachePadded::new(AtomicBool::new(false));

/// The classes that recorded at least one event since the process started.
static REGISTRY: std::sync::Mutex<Vec<&'static LockClass>> = std::sync::Mutex::new(Vec::new());

/// Whether lockstat is compiled in (the default `lockstat` cargo feature). Without it,
/// [`is_enabled`] is a constant `false` and every lock's recording code is compiled away:
/// the baseline against which `scripts/callgrind.sh` measures the cost of lockstat off.
pub const COMPILED_IN: bool = cfg!(feature = "lockstat");

/// Starts recording for every classed lock (a no-op when lockstat is not compiled in).
pub fn enable() {
    if COMPILED_IN {
        ENABLED.store(true, Relaxed);
    }
}

/// Stops recording. Guards taken while enabled still record their hold time when dropped.
pub fn disable() {
    ENABLED.store(false, Relaxed);
}

/// Whether recording is on: one `Relaxed` load of a read-mostly flag.
#[inline(always)]
pub fn is_enabled() -> bool {
    COMPILED_IN && ENABLED.load(Relaxed)
}

/// Zeroes the statistics of every registered class and the count of every event.
pub fn reset() {
    for class in registered() {
        class.reset();
    }
    event::reset_events();
}

fn registered() -> Vec<&'static LockClass> {
    listed(&REGISTRY)
}

/// The items of a registry (of classes or of events).
fn listed<T: ?Sized>(registry: &std::sync::Mutex<Vec<&'static T>>) -> Vec<&'static T> {
    // A poisoned registry only means a panic elsewhere while pushing; the Vec is intact.
    registry.lock().unwrap_or_else(|e| e.into_inner()).clone()
}

/// Lists `item` in `registry` on its first recorded event, so that [`report`] and [`reset`]
/// find it; `registered` is the item's own flag.
fn register_once<T: ?Sized>(
    registered: &AtomicBool,
    registry: &std::sync::Mutex<Vec<&'static T>>,
    item: &'static T,
) {
    // Relaxed: the flag only spares the mutex; the mutex orders the push itself.
    if registered.load(Relaxed) {
        return;
    }
    let mut reg = registry.lock().unwrap_or_else(|e| e.into_inner());
    if !registered.load(Relaxed) {
        reg.push(item);
        registered.store(true, Relaxed);
    }
}

/// Read or write acquisition. Mutexes and spinlocks record `Write`.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A shared (reader) acquisition.
    Read = 0,
    /// An exclusive acquisition (writer, mutex, spinlock).
    Write = 1,
}

/// Nanoseconds of `CLOCK_MONOTONIC` (vDSO, no system call).
#[inline]
fn now_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; CLOCK_MONOTONIC always exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    (ts.tv_sec as u64) * 1_000_000_000 + ts.tv_nsec as u64
}

/// Serializes the tests (of this crate) that switch lockstat on or off or reset it: the
/// switch is process-global and tests run in parallel.
#[cfg(all(test, not(loom)))]
pub(crate) fn test_serial() -> std::sync::MutexGuard<'static, ()> {
    static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}
