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
//! Every lock in scalevfs is one of the instrumented wrappers [`Mutex`], [`RwLock`] (over
//! `parking_lot`, over `loom`'s locks under `--cfg loom`) and
//! [`SpinLock`](crate::spinlock::SpinLock). Each is either unclassed (`new(v)`: never
//! recorded) or belongs to one class (`with_class(v, &CLASS)`).
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
//! Not recorded, unlike Linux: con-bounces/acq-bounces (would need the last CPU per lock
//! instance, a write to the lock's line on every acquisition) and contention points
//! (call sites). Acquisitions by `try_lock` that fail are not counted.
//!
//! ## Cost
//!
//! Switched off (the default), a classed lock pays one load of its own class pointer and
//! one `Relaxed` load of the global `ENABLED` flag, which sits alone on its cache line
//! and is written only by [`enable`]/[`disable`], so it stays shared in every CPU's cache.
//! No timestamp is taken and the guard carries an empty stamp (tested on drop). Measured
//! on an uncontended spin lock/unlock loop, the worst case: about +0.2 ns on 5.6 ns (3%,
//! within run-to-run noise; `lockstat_off_overhead` in the bench crate). Switched on,
//! an acquisition costs two `clock_gettime` calls and a few shard-local atomics (~90 ns).
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
//! Deliberately, this module uses `std` atomics rather than [`crate::sync`]: a `static`
//! [`LockClass`] needs `const` atomics, which loom's are not, and loom has nothing to check
//! in counters that synchronize nothing. The locks themselves use `crate::sync`.

use std::fmt::Write as _;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};

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

/// Zeroes the statistics of every registered class.
pub fn reset() {
    for class in registered() {
        class.reset();
    }
}

fn registered() -> Vec<&'static LockClass> {
    // A poisoned registry only means a panic elsewhere while pushing; the Vec is intact.
    REGISTRY.lock().unwrap_or_else(|e| e.into_inner()).clone()
}

/// Read or write acquisition. Mutexes and spinlocks record `Write`.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Kind {
    Read = 0,
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

/// One kind's counters in one shard (64 bytes).
struct Counters {
    acquisitions: AtomicU64,
    contentions: AtomicU64,
    wait_min: AtomicU64,
    wait_max: AtomicU64,
    wait_total: AtomicU64,
    hold_min: AtomicU64,
    hold_max: AtomicU64,
    hold_total: AtomicU64,
}

impl Counters {
    const fn new() -> Self {
        Counters {
            acquisitions: AtomicU64::new(0),
            contentions: AtomicU64::new(0),
            wait_min: AtomicU64::new(u64::MAX),
            wait_max: AtomicU64::new(0),
            wait_total: AtomicU64::new(0),
            hold_min: AtomicU64::new(u64::MAX),
            hold_max: AtomicU64::new(0),
            hold_total: AtomicU64::new(0),
        }
    }

    fn reset(&self) {
        for c in [
            &self.acquisitions,
            &self.contentions,
            &self.wait_max,
            &self.wait_total,
            &self.hold_max,
            &self.hold_total,
        ] {
            c.store(0, Relaxed);
        }
        self.wait_min.store(u64::MAX, Relaxed);
        self.hold_min.store(u64::MAX, Relaxed);
    }

    fn add_to(&self, s: &mut KindStats) {
        s.acquisitions += self.acquisitions.load(Relaxed);
        s.contentions += self.contentions.load(Relaxed);
        s.wait.merge(
            self.wait_min.load(Relaxed),
            self.wait_max.load(Relaxed),
            self.wait_total.load(Relaxed),
        );
        s.hold.merge(
            self.hold_min.load(Relaxed),
            self.hold_max.load(Relaxed),
            self.hold_total.load(Relaxed),
        );
    }
}

/// Records a non-zero time into (min, max, total).
#[inline]
fn record_time(min: &AtomicU64, max: &AtomicU64, total: &AtomicU64, ns: u64) {
    total.fetch_add(ns, Relaxed);
    if ns > 0 {
        min.fetch_min(ns, Relaxed);
    }
    max.fetch_max(ns, Relaxed);
}

/// A class's counters for one CPU shard: read and write kinds, 128 bytes.
struct Shard([Counters; 2]);

/// A lock class: a name and its statistics. Declare it as a `static` (see module docs).
pub struct LockClass {
    name: &'static str,
    registered: AtomicBool,
    shards: [CachePadded<Shard>; NR_SHARDS],
}

impl LockClass {
    /// A class named `name` (shown in [`report`]), with zeroed statistics.
    pub const fn new(name: &'static str) -> Self {
        LockClass {
            name,
            registered: AtomicBool::new(false),
            shards: [const { CachePadded::new(Shard([Counters::new(), Counters::new()])) };
                NR_SHARDS],
        }
    }

    /// The class's name.
    pub fn name(&self) -> &'static str {
        self.name
    }

    fn register(&'static self) {
        // Relaxed: the flag only spares the mutex; the mutex orders the push itself.
        if self.registered.load(Relaxed) {
            return;
        }
        let mut reg = REGISTRY.lock().unwrap_or_else(|e| e.into_inner());
        if !self.registered.load(Relaxed) {
            reg.push(self);
            self.registered.store(true, Relaxed);
        }
    }

    #[inline]
    fn counters(&'static self, kind: Kind) -> &'static Counters {
        self.register();
        &self.shards[crate::cpu::current_shard(NR_SHARDS)].0[kind as usize]
    }

    /// Records an acquisition; `wait_ns` is `Some` if it was contended.
    fn record_acquired(&'static self, kind: Kind, wait_ns: Option<u64>) {
        let c = self.counters(kind);
        c.acquisitions.fetch_add(1, Relaxed);
        if let Some(ns) = wait_ns {
            c.contentions.fetch_add(1, Relaxed);
            record_time(&c.wait_min, &c.wait_max, &c.wait_total, ns);
        }
    }

    fn record_released(&'static self, kind: Kind, hold_ns: u64) {
        let c = self.counters(kind);
        record_time(&c.hold_min, &c.hold_max, &c.hold_total, hold_ns);
    }

    /// Zeroes this class's statistics.
    pub fn reset(&'static self) {
        for shard in &self.shards {
            shard.0.iter().for_each(Counters::reset);
        }
    }

    /// The class's statistics, summed over the shards.
    pub fn stats(&'static self) -> ClassStats {
        let mut s = ClassStats {
            name: self.name,
            read: KindStats::default(),
            write: KindStats::default(),
        };
        for shard in &self.shards {
            shard.0[Kind::Read as usize].add_to(&mut s.read);
            shard.0[Kind::Write as usize].add_to(&mut s.write);
        }
        s
    }
}

/// Min (of non-zero times; 0 if none), max and total of a time, in nanoseconds.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct TimeStats {
    pub min: u64,
    pub max: u64,
    pub total: u64,
}

impl TimeStats {
    fn merge(&mut self, min: u64, max: u64, total: u64) {
        if min != u64::MAX && (self.min == 0 || min < self.min) {
            self.min = min;
        }
        self.max = self.max.max(max);
        self.total += total;
    }
}

/// One kind's statistics of a class.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct KindStats {
    pub acquisitions: u64,
    pub contentions: u64,
    pub wait: TimeStats,
    pub hold: TimeStats,
}

/// A snapshot of one class's statistics.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClassStats {
    pub name: &'static str,
    pub read: KindStats,
    pub write: KindStats,
}

/// Snapshots of every registered class.
pub fn snapshot() -> Vec<ClassStats> {
    registered().into_iter().map(LockClass::stats).collect()
}

/// A `/proc/lock_stat`-like table of every registered class that recorded something.
pub fn report() -> String {
    format_report(
        snapshot()
            .into_iter()
            .filter(|s| s.read.acquisitions + s.write.acquisitions > 0)
            .collect(),
    )
}

/// The same table restricted to `classes`.
pub fn report_for(classes: &[&'static LockClass]) -> String {
    format_report(classes.iter().map(|c| c.stats()).collect())
}

/// Formats like Linux's lock_stat: one line per class and kind (`name-W:`/`name-R:` when the
/// class saw both), times in microseconds with two decimals, sorted by contentions.
fn format_report(mut stats: Vec<ClassStats>) -> String {
    let total_con = |s: &ClassStats| s.read.contentions + s.write.contentions;
    stats.sort_by(|a, b| total_con(b).cmp(&total_con(a)).then(a.name.cmp(b.name)));
    let us = |ns: u64| format!("{}.{:02}", ns / 1000, (ns % 1000) / 10);
    let mut out = String::from("lock_stat version 0.4 (scalevfs; no bounces, times in us)\n");
    let _ = writeln!(
        out,
        "{:>40} {:>12} {:>14} {:>14} {:>16} {:>14} {:>14} {:>14} {:>16}",
        "class name",
        "contentions",
        "waittime-min",
        "waittime-max",
        "waittime-total",
        "acquisitions",
        "holdtime-min",
        "holdtime-max",
        "holdtime-total"
    );
    out.push_str(&"-".repeat(170));
    out.push('\n');
    for s in &stats {
        let both = s.read.acquisitions > 0 && s.write.acquisitions > 0;
        for (k, suffix) in [(&s.write, "-W"), (&s.read, "-R")] {
            if k.acquisitions == 0 && k.contentions == 0 {
                continue;
            }
            let label = if both || suffix == "-R" {
                format!("{}{}:", s.name, suffix)
            } else {
                format!("{}:", s.name)
            };
            let _ = writeln!(
                out,
                "{:>40} {:>12} {:>14} {:>14} {:>16} {:>14} {:>14} {:>14} {:>16}",
                label,
                k.contentions,
                us(k.wait.min),
                us(k.wait.max),
                us(k.wait.total),
                k.acquisitions,
                us(k.hold.min),
                us(k.hold.max),
                us(k.hold.total)
            );
        }
    }
    out
}

/// The start of a recorded hold, kept in a guard; dropping it records the hold time.
/// Guards declare it before the inner guard, so it drops (and records) before the unlock.
///
/// Two words, so that `Option<HoldStamp>` is two words with `None` a null class pointer:
/// the kind is packed into bit 0 of the start time (monotonic nanoseconds stay far below
/// 2^63). A three-word stamp measurably slowed the lockstat-off path, which moves it.
#[derive(Debug)]
pub struct HoldStamp {
    class: &'static LockClass,
    /// `start_ns << 1 | kind`.
    since_kind: u64,
}

impl HoldStamp {
    #[inline]
    fn now(class: &'static LockClass, kind: Kind) -> Self {
        HoldStamp {
            class,
            since_kind: now_ns() << 1 | kind as u64,
        }
    }
}

impl HoldStamp {
    /// Records the hold time. Guards call it just before they unlock; it is out of line and
    /// cold so that an unrecorded guard's drop is one test of its `Option<HoldStamp>`.
    #[cold]
    #[inline(never)]
    pub fn record_release(&self) {
        let kind = if self.since_kind & 1 == 0 {
            Kind::Read
        } else {
            Kind::Write
        };
        let held = now_ns().saturating_sub(self.since_kind >> 1);
        self.class.record_released(kind, held);
    }
}

impl std::fmt::Debug for LockClass {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LockClass")
            .field("name", &self.name)
            .finish()
    }
}

/// Acquires through `lock`, recording into `class` if it is set and lockstat is on.
///
/// Off (or unclassed), this is exactly `lock()`. On, it first tries `try_lock`; if that
/// fails the acquisition is contended and the wait until `lock()` returns is recorded.
#[inline(always)]
pub fn acquire<G>(
    class: Option<&'static LockClass>,
    kind: Kind,
    try_lock: impl FnOnce() -> Option<G>,
    lock: impl FnOnce() -> G,
) -> (G, Option<HoldStamp>) {
    // The global flag first: off, this is one load and a not-taken branch.
    if is_enabled() {
        if let Some(class) = class {
            return acquire_recorded(class, kind, try_lock, lock);
        }
    }
    (lock(), None)
}

#[cold]
#[inline(never)]
fn acquire_recorded<G>(
    class: &'static LockClass,
    kind: Kind,
    try_lock: impl FnOnce() -> Option<G>,
    lock: impl FnOnce() -> G,
) -> (G, Option<HoldStamp>) {
    let (g, wait) = match try_lock() {
        Some(g) => (g, None),
        None => {
            let t0 = now_ns();
            let g = lock();
            (g, Some(now_ns().saturating_sub(t0)))
        }
    };
    class.record_acquired(kind, wait);
    (g, Some(HoldStamp::now(class, kind)))
}

/// `try_lock` with recording: a success counts as an uncontended acquisition.
#[inline(always)]
pub fn try_acquire<G>(
    class: Option<&'static LockClass>,
    kind: Kind,
    try_lock: impl FnOnce() -> Option<G>,
) -> Option<(G, Option<HoldStamp>)> {
    let g = try_lock()?;
    let stamp = match class {
        Some(class) if is_enabled() => {
            class.record_acquired(kind, None);
            Some(HoldStamp::now(class, kind))
        }
        _ => None,
    };
    Some((g, stamp))
}

/// The locks under the wrappers: parking_lot normally, loom's under `--cfg loom`.
#[cfg(not(loom))]
mod imp {
    pub use parking_lot::{
        Mutex, MutexGuard, RwLock, RwLockReadGuard as ReadGuard, RwLockWriteGuard as WriteGuard,
    };
    pub fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
        m.lock()
    }
    pub fn try_lock<T>(m: &Mutex<T>) -> Option<MutexGuard<'_, T>> {
        m.try_lock()
    }
    pub fn read<T>(l: &RwLock<T>) -> ReadGuard<'_, T> {
        l.read()
    }
    pub fn try_read<T>(l: &RwLock<T>) -> Option<ReadGuard<'_, T>> {
        l.try_read()
    }
    pub fn write<T>(l: &RwLock<T>) -> WriteGuard<'_, T> {
        l.write()
    }
    pub fn try_write<T>(l: &RwLock<T>) -> Option<WriteGuard<'_, T>> {
        l.try_write()
    }
}

/// Under loom, poisoning cannot happen without a panic, which fails the model anyway.
#[cfg(loom)]
mod imp {
    pub use loom::sync::{
        Mutex, MutexGuard, RwLock, RwLockReadGuard as ReadGuard, RwLockWriteGuard as WriteGuard,
    };
    pub fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
        m.lock().unwrap()
    }
    pub fn try_lock<T>(m: &Mutex<T>) -> Option<MutexGuard<'_, T>> {
        m.try_lock().ok()
    }
    pub fn read<T>(l: &RwLock<T>) -> ReadGuard<'_, T> {
        l.read().unwrap()
    }
    pub fn try_read<T>(l: &RwLock<T>) -> Option<ReadGuard<'_, T>> {
        l.try_read().ok()
    }
    pub fn write<T>(l: &RwLock<T>) -> WriteGuard<'_, T> {
        l.write().unwrap()
    }
    pub fn try_write<T>(l: &RwLock<T>) -> Option<WriteGuard<'_, T>> {
        l.try_write().ok()
    }
}

/// Defines a guard: a hold stamp (dropped first: hold time ends before the unlock) and the
/// inner guard.
macro_rules! guard {
    ($(#[$m:meta])* $name:ident, $inner:ident $(, $mut:ident)?) => {
        $(#[$m])*
        #[must_use = "dropping the guard unlocks at once"]
        pub struct $name<'a, T> {
            _stamp: Option<HoldStamp>,
            inner: imp::$inner<'a, T>,
        }
        impl<T> Drop for $name<'_, T> {
            #[inline]
            fn drop(&mut self) {
                // The hold ends here, before `inner` (dropped after this) unlocks.
                if let Some(stamp) = &self._stamp {
                    stamp.record_release();
                }
            }
        }
        impl<T> Deref for $name<'_, T> {
            type Target = T;
            fn deref(&self) -> &T {
                &self.inner
            }
        }
        $(impl<T> DerefMut for $name<'_, T> {
            fn $mut(&mut self) -> &mut T {
                &mut self.inner
            }
        })?
    };
}

guard!(
    /// A [`Mutex`] guard.
    MutexGuard, MutexGuard, deref_mut
);
guard!(
    /// A shared [`RwLock`] guard.
    RwLockReadGuard, ReadGuard
);
guard!(
    /// An exclusive [`RwLock`] guard.
    RwLockWriteGuard, WriteGuard, deref_mut
);

/// A sleeping mutex (parking_lot) that records into its class.
#[derive(Default)]
pub struct Mutex<T> {
    inner: imp::Mutex<T>,
    class: Option<&'static LockClass>,
}

impl<T> Mutex<T> {
    /// An unclassed mutex: never recorded.
    pub fn new(v: T) -> Self {
        Mutex {
            inner: imp::Mutex::new(v),
            class: None,
        }
    }

    /// A mutex of lock class `class`.
    pub fn with_class(v: T, class: &'static LockClass) -> Self {
        Mutex {
            inner: imp::Mutex::new(v),
            class: Some(class),
        }
    }

    /// The lock's class, if any.
    pub fn class(&self) -> Option<&'static LockClass> {
        self.class
    }

    /// The data, through exclusive access to the mutex (no locking needed).
    pub fn get_mut(&mut self) -> &mut T {
        #[cfg(loom)]
        return self.inner.get_mut().unwrap();
        #[cfg(not(loom))]
        self.inner.get_mut()
    }

    /// Consumes the mutex, returning the data.
    pub fn into_inner(self) -> T {
        #[cfg(loom)]
        return self.inner.into_inner().unwrap();
        #[cfg(not(loom))]
        self.inner.into_inner()
    }

    /// Blocks until the mutex is acquired.
    #[inline]
    pub fn lock(&self) -> MutexGuard<'_, T> {
        let (inner, _stamp) = acquire(
            self.class,
            Kind::Write,
            || imp::try_lock(&self.inner),
            || imp::lock(&self.inner),
        );
        MutexGuard { _stamp, inner }
    }

    /// Acquires the mutex if it is free.
    #[inline]
    pub fn try_lock(&self) -> Option<MutexGuard<'_, T>> {
        let (inner, _stamp) = try_acquire(self.class, Kind::Write, || imp::try_lock(&self.inner))?;
        Some(MutexGuard { _stamp, inner })
    }
}

impl<T> std::fmt::Debug for Mutex<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mutex").field("class", &self.class).finish()
    }
}

/// A reader-writer lock (parking_lot) that records reads and writes into its class.
#[derive(Default)]
pub struct RwLock<T> {
    inner: imp::RwLock<T>,
    class: Option<&'static LockClass>,
}

impl<T> RwLock<T> {
    /// An unclassed rwlock: never recorded.
    pub fn new(v: T) -> Self {
        RwLock {
            inner: imp::RwLock::new(v),
            class: None,
        }
    }

    /// An rwlock of lock class `class`.
    pub fn with_class(v: T, class: &'static LockClass) -> Self {
        RwLock {
            inner: imp::RwLock::new(v),
            class: Some(class),
        }
    }

    /// The lock's class, if any.
    pub fn class(&self) -> Option<&'static LockClass> {
        self.class
    }

    /// The data, through exclusive access to the lock (no locking needed).
    pub fn get_mut(&mut self) -> &mut T {
        #[cfg(loom)]
        return self.inner.get_mut().unwrap();
        #[cfg(not(loom))]
        self.inner.get_mut()
    }

    /// Consumes the lock, returning the data.
    pub fn into_inner(self) -> T {
        #[cfg(loom)]
        return self.inner.into_inner().unwrap();
        #[cfg(not(loom))]
        self.inner.into_inner()
    }

    /// Blocks until a shared hold is acquired.
    #[inline]
    pub fn read(&self) -> RwLockReadGuard<'_, T> {
        let (inner, _stamp) = acquire(
            self.class,
            Kind::Read,
            || imp::try_read(&self.inner),
            || imp::read(&self.inner),
        );
        RwLockReadGuard { _stamp, inner }
    }

    /// Blocks until an exclusive hold is acquired.
    #[inline]
    pub fn write(&self) -> RwLockWriteGuard<'_, T> {
        let (inner, _stamp) = acquire(
            self.class,
            Kind::Write,
            || imp::try_write(&self.inner),
            || imp::write(&self.inner),
        );
        RwLockWriteGuard { _stamp, inner }
    }

    /// A shared hold if no writer holds the lock.
    #[inline]
    pub fn try_read(&self) -> Option<RwLockReadGuard<'_, T>> {
        let (inner, _stamp) = try_acquire(self.class, Kind::Read, || imp::try_read(&self.inner))?;
        Some(RwLockReadGuard { _stamp, inner })
    }

    /// An exclusive hold if the lock is free.
    #[inline]
    pub fn try_write(&self) -> Option<RwLockWriteGuard<'_, T>> {
        let (inner, _stamp) = try_acquire(self.class, Kind::Write, || imp::try_write(&self.inner))?;
        Some(RwLockWriteGuard { _stamp, inner })
    }
}

impl<T> std::fmt::Debug for RwLock<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RwLock")
            .field("class", &self.class)
            .finish()
    }
}

/// Serializes the tests (of this crate) that switch lockstat on or off or reset it: the
/// switch is process-global and tests run in parallel.
#[cfg(all(test, not(loom)))]
pub(crate) fn test_serial() -> std::sync::MutexGuard<'static, ()> {
    static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn off_records_nothing() {
        static C: LockClass = LockClass::new("test_off");
        let _s = test_serial();
        disable();
        let m = Mutex::with_class(0, &C);
        let l = RwLock::with_class(0, &C);
        for _ in 0..100 {
            *m.lock() += 1;
            let _r = l.read();
            drop(m.try_lock());
        }
        assert_eq!(*m.lock(), 100);
        assert_eq!(C.stats().write, KindStats::default());
        assert_eq!(C.stats().read, KindStats::default());
    }

    #[test]
    #[cfg(feature = "lockstat")]
    fn unclassed_never_registers() {
        let _s = test_serial();
        enable();
        let m = Mutex::new(1);
        *m.lock() += 1;
        disable();
        assert_eq!(*m.lock(), 2);
        assert_eq!(m.class().map(|c| c.name()), None);
    }

    #[test]
    #[cfg(feature = "lockstat")]
    fn counts_reads_writes_and_hold_times() {
        static C: LockClass = LockClass::new("test_rw_counts");
        let _s = test_serial();
        let l = RwLock::with_class(0u64, &C);
        enable();
        for _ in 0..10 {
            *l.write() += 1;
        }
        for _ in 0..7 {
            let g = l.read();
            assert!(*g >= 10);
            std::thread::sleep(std::time::Duration::from_micros(50));
        }
        let t = l.try_write().expect("free");
        drop(t);
        disable();
        let s = C.stats();
        assert_eq!(s.write.acquisitions, 11);
        assert_eq!(s.read.acquisitions, 7);
        assert_eq!(s.read.contentions, 0);
        // Each read hold slept >= 50 us.
        assert!(s.read.hold.min >= 50_000, "{:?}", s.read.hold);
        assert!(s.read.hold.total >= 7 * 50_000);
        assert!(s.read.hold.max >= s.read.hold.min);
        let r = report_for(&[&C]);
        assert!(r.contains("test_rw_counts-W:"), "{r}");
        assert!(r.contains("test_rw_counts-R:"), "{r}");
        assert!(report().contains("test_rw_counts-R:"));
        C.reset();
        assert_eq!(C.stats().write, KindStats::default());
    }

    #[test]
    #[cfg(feature = "lockstat")]
    fn contention_is_recorded_with_wait_time() {
        static C: LockClass = LockClass::new("test_contended");
        let _s = test_serial();
        let m = Arc::new(Mutex::with_class(0u64, &C));
        enable();
        let g = m.lock();
        let m2 = Arc::clone(&m);
        let t = std::thread::spawn(move || *m2.lock() += 1);
        // Hold the lock until the other thread is surely waiting on it.
        std::thread::sleep(std::time::Duration::from_millis(20));
        drop(g);
        t.join().unwrap();
        disable();
        let s = C.stats().write;
        assert_eq!(s.acquisitions, 2);
        assert_eq!(s.contentions, 1);
        assert!(s.wait.total >= 1_000_000, "{s:?}");
        assert_eq!(s.wait.max, s.wait.total);
        assert!(s.hold.max >= 20_000_000, "{s:?}");
        assert_eq!(*m.lock(), 1);
        let mut m = Arc::into_inner(m).unwrap();
        *m.get_mut() += 1;
        assert_eq!(m.into_inner(), 2);
        let mut l = RwLock::new(3);
        *l.get_mut() += 1;
        assert_eq!(l.into_inner(), 4);
    }

    #[test]
    fn report_sorts_by_contentions() {
        let a = ClassStats {
            name: "aaa",
            read: KindStats::default(),
            write: KindStats {
                acquisitions: 5,
                ..Default::default()
            },
        };
        let mut b = a.clone();
        b.name = "bbb";
        b.write.contentions = 3;
        b.write.wait = TimeStats {
            min: 1500,
            max: 2500,
            total: 4000,
        };
        let r = format_report(vec![a, b]);
        let (pa, pb) = (r.find("aaa:").unwrap(), r.find("bbb:").unwrap());
        assert!(pb < pa, "{r}");
        // Microseconds with two decimals, as Linux prints them.
        assert!(r.contains(" 1.50 ") && r.contains(" 4.00 "), "{r}");
    }
}
