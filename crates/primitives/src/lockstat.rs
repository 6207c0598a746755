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
//! Deliberately, this module uses `std` atomics rather than [`crate::sync`]: a `static`
//! [`LockClass`] needs `const` atomics, which loom's are not, and loom has nothing to check
//! in counters that synchronize nothing. The locks themselves use `crate::sync`.

use std::cell::UnsafeCell;
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

impl std::fmt::Debug for LockClass {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LockClass")
            .field("name", &self.name)
            .finish()
    }
}

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
fn acquire_recorded<G>(
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
fn try_recorded(class: &Option<&'static LockClass>, kind: Kind) -> u64 {
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

/// The raw locks under [`Mutex`] and [`RwLock`]: parking_lot's, and loom's under
/// `--cfg loom`. Acquiring returns a "held" token that the guard keeps: parking_lot's is
/// zero-sized (the guard unlocks explicitly); loom's is loom's own guard, which unlocks when
/// it drops, right after the wrapper guard's `drop` has recorded the hold.
#[cfg(not(loom))]
mod imp {
    use parking_lot::lock_api::{RawMutex as _, RawRwLock as _};
    use std::marker::PhantomData;

    /// Proof of a hold. `!Send`, like parking_lot's own guards: its raw locks are to be
    /// unlocked in the context that locked them.
    pub struct Held<'a>(PhantomData<(&'a (), *const ())>);
    pub type MutexHeld<'a> = Held<'a>;
    pub type ReadHeld<'a> = Held<'a>;
    pub type WriteHeld<'a> = Held<'a>;

    fn held<'a>() -> Held<'a> {
        Held(PhantomData)
    }

    pub struct RawMutex(parking_lot::RawMutex);

    impl RawMutex {
        pub fn new() -> Self {
            RawMutex(parking_lot::RawMutex::INIT)
        }
        #[inline]
        pub fn lock(&self) -> Held<'_> {
            self.0.lock();
            held()
        }
        #[inline]
        pub fn try_lock(&self) -> Option<Held<'_>> {
            self.0.try_lock().then(held)
        }
        /// # Safety
        /// The caller holds the mutex, through a `Held` of this lock it is dropping.
        #[inline]
        pub unsafe fn unlock(&self) {
            // SAFETY: the caller holds the mutex (our contract).
            unsafe { self.0.unlock() }
        }
    }

    pub struct RawRwLock(parking_lot::RawRwLock);

    impl RawRwLock {
        pub fn new() -> Self {
            RawRwLock(parking_lot::RawRwLock::INIT)
        }
        #[inline]
        pub fn read(&self) -> Held<'_> {
            self.0.lock_shared();
            held()
        }
        #[inline]
        pub fn try_read(&self) -> Option<Held<'_>> {
            self.0.try_lock_shared().then(held)
        }
        #[inline]
        pub fn write(&self) -> Held<'_> {
            self.0.lock_exclusive();
            held()
        }
        #[inline]
        pub fn try_write(&self) -> Option<Held<'_>> {
            self.0.try_lock_exclusive().then(held)
        }
        /// # Safety
        /// The caller holds a shared hold it gives up.
        #[inline]
        pub unsafe fn unlock_shared(&self) {
            // SAFETY: the caller holds a shared hold (our contract).
            unsafe { self.0.unlock_shared() }
        }
        /// # Safety
        /// The caller holds the exclusive hold and gives it up.
        #[inline]
        pub unsafe fn unlock_exclusive(&self) {
            // SAFETY: the caller holds the lock exclusively (our contract).
            unsafe { self.0.unlock_exclusive() }
        }
    }
}

/// Under loom, poisoning cannot happen without a panic, which fails the model anyway.
#[cfg(loom)]
mod imp {
    pub type MutexHeld<'a> = loom::sync::MutexGuard<'a, ()>;
    pub type ReadHeld<'a> = loom::sync::RwLockReadGuard<'a, ()>;
    pub type WriteHeld<'a> = loom::sync::RwLockWriteGuard<'a, ()>;

    pub struct RawMutex(loom::sync::Mutex<()>);

    impl RawMutex {
        pub fn new() -> Self {
            RawMutex(loom::sync::Mutex::new(()))
        }
        pub fn lock(&self) -> MutexHeld<'_> {
            self.0.lock().unwrap()
        }
        pub fn try_lock(&self) -> Option<MutexHeld<'_>> {
            self.0.try_lock().ok()
        }
        /// # Safety
        /// None needed: the `MutexHeld` the caller drops next unlocks.
        pub unsafe fn unlock(&self) {}
    }

    pub struct RawRwLock(loom::sync::RwLock<()>);

    impl RawRwLock {
        pub fn new() -> Self {
            RawRwLock(loom::sync::RwLock::new(()))
        }
        pub fn read(&self) -> ReadHeld<'_> {
            self.0.read().unwrap()
        }
        pub fn try_read(&self) -> Option<ReadHeld<'_>> {
            self.0.try_read().ok()
        }
        pub fn write(&self) -> WriteHeld<'_> {
            self.0.write().unwrap()
        }
        pub fn try_write(&self) -> Option<WriteHeld<'_>> {
            self.0.try_write().ok()
        }
        /// # Safety
        /// None needed: the `ReadHeld` the caller drops next unlocks.
        pub unsafe fn unlock_shared(&self) {}
        /// # Safety
        /// None needed: the `WriteHeld` the caller drops next unlocks.
        pub unsafe fn unlock_exclusive(&self) {}
    }
}

/// A sleeping mutex (parking_lot's raw mutex and an `UnsafeCell`) that records into its
/// class.
pub struct Mutex<T> {
    raw: imp::RawMutex,
    hold: HoldStart,
    class: Option<&'static LockClass>,
    data: UnsafeCell<T>,
}

// SAFETY: the mutex hands out access to `T` to one thread at a time, so `T: Send` suffices
// for sharing it (like `std::sync::Mutex`); moving the mutex moves the `T`.
unsafe impl<T: Send> Sync for Mutex<T> {}
// SAFETY: as above.
unsafe impl<T: Send> Send for Mutex<T> {}

impl<T: Default> Default for Mutex<T> {
    fn default() -> Self {
        Mutex::new(T::default())
    }
}

impl<T> Mutex<T> {
    /// An unclassed mutex: never recorded.
    pub fn new(v: T) -> Self {
        Mutex {
            raw: imp::RawMutex::new(),
            hold: HoldStart::new(),
            class: None,
            data: UnsafeCell::new(v),
        }
    }

    /// A mutex of lock class `class`.
    pub fn with_class(v: T, class: &'static LockClass) -> Self {
        Mutex {
            class: Some(class),
            ..Mutex::new(v)
        }
    }

    /// The lock's class, if any.
    pub fn class(&self) -> Option<&'static LockClass> {
        self.class
    }

    /// The data, through exclusive access to the mutex (no locking needed).
    pub fn get_mut(&mut self) -> &mut T {
        self.data.get_mut()
    }

    /// Consumes the mutex, returning the data.
    pub fn into_inner(self) -> T {
        self.data.into_inner()
    }

    /// Blocks until the mutex is acquired.
    #[inline]
    pub fn lock(&self) -> MutexGuard<'_, T> {
        let _held = if is_enabled() {
            self.lock_recorded()
        } else {
            self.raw.lock()
        };
        MutexGuard { lock: self, _held }
    }

    /// Acquires the mutex if it is free.
    #[inline]
    pub fn try_lock(&self) -> Option<MutexGuard<'_, T>> {
        let _held = self.raw.try_lock()?;
        if is_enabled() {
            // SAFETY: we have just acquired the mutex.
            unsafe { self.try_recorded() };
        }
        Some(MutexGuard { lock: self, _held })
    }

    #[cold]
    #[inline(never)]
    fn lock_recorded(&self) -> imp::MutexHeld<'_> {
        // SAFETY: `hold` is this mutex's, which the closures acquire.
        unsafe {
            acquire_exclusive_recorded(
                &self.class,
                &self.hold,
                || self.raw.try_lock(),
                || self.raw.lock(),
            )
        }
    }

    /// # Safety
    ///
    /// The caller has just acquired the mutex.
    #[cold]
    #[inline(never)]
    unsafe fn try_recorded(&self) {
        // SAFETY: the caller holds the mutex (our contract).
        unsafe { try_exclusive_recorded(&self.class, &self.hold) }
    }

    /// # Safety
    ///
    /// The caller holds the mutex.
    #[cold]
    #[inline(never)]
    unsafe fn release_recorded(&self) {
        // SAFETY: the caller holds the mutex (our contract).
        unsafe { self.hold.record_release(&self.class) }
    }
}

impl<T> std::fmt::Debug for Mutex<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mutex").field("class", &self.class).finish()
    }
}

/// A reader-writer lock (parking_lot's raw rwlock and an `UnsafeCell`) that records reads
/// and writes into its class.
pub struct RwLock<T> {
    raw: imp::RawRwLock,
    /// The writer's hold start; readers keep theirs in their guards.
    hold: HoldStart,
    class: Option<&'static LockClass>,
    data: UnsafeCell<T>,
}

// SAFETY: readers on several threads share `&T` (so `T: Sync`), a writer gets `&mut T` (so
// `T: Send`), like `std::sync::RwLock`; moving the lock moves the `T`.
unsafe impl<T: Send + Sync> Sync for RwLock<T> {}
// SAFETY: moving the lock moves the `T`.
unsafe impl<T: Send> Send for RwLock<T> {}

impl<T: Default> Default for RwLock<T> {
    fn default() -> Self {
        RwLock::new(T::default())
    }
}

impl<T> RwLock<T> {
    /// An unclassed rwlock: never recorded.
    pub fn new(v: T) -> Self {
        RwLock {
            raw: imp::RawRwLock::new(),
            hold: HoldStart::new(),
            class: None,
            data: UnsafeCell::new(v),
        }
    }

    /// An rwlock of lock class `class`.
    pub fn with_class(v: T, class: &'static LockClass) -> Self {
        RwLock {
            class: Some(class),
            ..RwLock::new(v)
        }
    }

    /// The lock's class, if any.
    pub fn class(&self) -> Option<&'static LockClass> {
        self.class
    }

    /// The data, through exclusive access to the lock (no locking needed).
    pub fn get_mut(&mut self) -> &mut T {
        self.data.get_mut()
    }

    /// Consumes the lock, returning the data.
    pub fn into_inner(self) -> T {
        self.data.into_inner()
    }

    /// Blocks until a shared hold is acquired.
    #[inline]
    pub fn read(&self) -> RwLockReadGuard<'_, T> {
        let (_held, since) = if is_enabled() {
            self.read_recorded()
        } else {
            (self.raw.read(), 0)
        };
        RwLockReadGuard {
            lock: self,
            since,
            _held,
        }
    }

    /// Blocks until an exclusive hold is acquired.
    #[inline]
    pub fn write(&self) -> RwLockWriteGuard<'_, T> {
        let _held = if is_enabled() {
            self.write_recorded()
        } else {
            self.raw.write()
        };
        RwLockWriteGuard { lock: self, _held }
    }

    /// A shared hold if no writer holds the lock.
    #[inline]
    pub fn try_read(&self) -> Option<RwLockReadGuard<'_, T>> {
        let _held = self.raw.try_read()?;
        let since = if is_enabled() {
            self.try_read_recorded()
        } else {
            0
        };
        Some(RwLockReadGuard {
            lock: self,
            since,
            _held,
        })
    }

    /// An exclusive hold if the lock is free.
    #[inline]
    pub fn try_write(&self) -> Option<RwLockWriteGuard<'_, T>> {
        let _held = self.raw.try_write()?;
        if is_enabled() {
            // SAFETY: we have just acquired the lock exclusively.
            unsafe { self.try_write_recorded() };
        }
        Some(RwLockWriteGuard { lock: self, _held })
    }

    #[cold]
    #[inline(never)]
    fn read_recorded(&self) -> (imp::ReadHeld<'_>, u64) {
        acquire_recorded(
            &self.class,
            Kind::Read,
            || self.raw.try_read(),
            || self.raw.read(),
        )
    }

    #[cold]
    #[inline(never)]
    fn try_read_recorded(&self) -> u64 {
        try_recorded(&self.class, Kind::Read)
    }

    #[cold]
    #[inline(never)]
    fn read_release_recorded(&self, since: u64) {
        record_shared_release(&self.class, since);
    }

    #[cold]
    #[inline(never)]
    fn write_recorded(&self) -> imp::WriteHeld<'_> {
        // SAFETY: `hold` is this lock's writer stamp; the closures acquire it exclusively.
        unsafe {
            acquire_exclusive_recorded(
                &self.class,
                &self.hold,
                || self.raw.try_write(),
                || self.raw.write(),
            )
        }
    }

    /// # Safety
    ///
    /// The caller has just acquired the lock exclusively.
    #[cold]
    #[inline(never)]
    unsafe fn try_write_recorded(&self) {
        // SAFETY: the caller holds the lock exclusively (our contract).
        unsafe { try_exclusive_recorded(&self.class, &self.hold) }
    }

    /// # Safety
    ///
    /// The caller holds the lock exclusively.
    #[cold]
    #[inline(never)]
    unsafe fn write_release_recorded(&self) {
        // SAFETY: the caller holds the lock exclusively (our contract).
        unsafe { self.hold.record_release(&self.class) }
    }
}

impl<T> std::fmt::Debug for RwLock<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RwLock")
            .field("class", &self.class)
            .finish()
    }
}

/// Holds a [`Mutex`]; dropping it records the hold time (if stamped) and unlocks.
#[must_use = "dropping the guard unlocks at once"]
pub struct MutexGuard<'a, T> {
    lock: &'a Mutex<T>,
    /// Dropped after `drop` has recorded the hold (under loom, this unlocks).
    _held: imp::MutexHeld<'a>,
}

/// Holds an [`RwLock`] shared; dropping it records the hold time (if stamped) and unlocks.
#[must_use = "dropping the guard unlocks at once"]
pub struct RwLockReadGuard<'a, T> {
    lock: &'a RwLock<T>,
    /// The hold start, 0 if not recorded.
    since: u64,
    _held: imp::ReadHeld<'a>,
}

/// Holds an [`RwLock`] exclusively; dropping it records the hold time (if stamped) and
/// unlocks.
#[must_use = "dropping the guard unlocks at once"]
pub struct RwLockWriteGuard<'a, T> {
    lock: &'a RwLock<T>,
    _held: imp::WriteHeld<'a>,
}

// SAFETY: sharing a guard across threads shares only `&T` (through `Deref`), so `T: Sync`
// suffices, as for parking_lot's guards (the `Held` marker makes them `!Send` and `!Sync`).
unsafe impl<T: Sync> Sync for MutexGuard<'_, T> {}
// SAFETY: as above.
unsafe impl<T: Sync> Sync for RwLockReadGuard<'_, T> {}
// SAFETY: as above.
unsafe impl<T: Sync> Sync for RwLockWriteGuard<'_, T> {}

impl<T> Deref for MutexGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: the guard holds the mutex, so no other thread accesses the data.
        unsafe { &*self.lock.data.get() }
    }
}

impl<T> DerefMut for MutexGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: the guard holds the mutex, and `&mut self` excludes other borrows through it.
        unsafe { &mut *self.lock.data.get() }
    }
}

impl<T> Drop for MutexGuard<'_, T> {
    #[inline]
    fn drop(&mut self) {
        // The hold ends here, before the unlock.
        // SAFETY: this guard holds the mutex; its borrows of the data end here.
        unsafe {
            if self.lock.hold.is_stamped() {
                self.lock.release_recorded();
            }
            self.lock.raw.unlock();
        }
    }
}

impl<T> Deref for RwLockReadGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: the guard holds the lock shared, so no thread writes the data.
        unsafe { &*self.lock.data.get() }
    }
}

impl<T> Drop for RwLockReadGuard<'_, T> {
    #[inline]
    fn drop(&mut self) {
        if COMPILED_IN && self.since != 0 {
            self.lock.read_release_recorded(self.since);
        }
        // SAFETY: this guard holds a shared hold and its borrows of the data end here.
        unsafe { self.lock.raw.unlock_shared() };
    }
}

impl<T> Deref for RwLockWriteGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: the guard holds the lock exclusively.
        unsafe { &*self.lock.data.get() }
    }
}

impl<T> DerefMut for RwLockWriteGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: the guard holds the lock exclusively, and `&mut self` excludes other
        // borrows through it.
        unsafe { &mut *self.lock.data.get() }
    }
}

impl<T> Drop for RwLockWriteGuard<'_, T> {
    #[inline]
    fn drop(&mut self) {
        // SAFETY: this guard holds the lock exclusively; its borrows of the data end here.
        unsafe {
            if self.lock.hold.is_stamped() {
                self.lock.write_release_recorded();
            }
            self.lock.raw.unlock_exclusive();
        }
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
    #[cfg(feature = "lockstat")]
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

    /// A guard taken while enabled records its hold when dropped after `disable`, and
    /// clears its lock's stamp: later holds, taken while off, record nothing.
    #[test]
    #[cfg(feature = "lockstat")]
    fn hold_taken_while_enabled_records_after_disable() {
        static C: LockClass = LockClass::new("test_disable_mid_hold");
        let _s = test_serial();
        let m = Mutex::with_class(0u32, &C);
        let l = RwLock::with_class(0u32, &C);
        let s = crate::spinlock::SpinLock::with_class(0u32, &C);
        enable();
        let (gm, gr, gs) = (m.lock(), l.read(), s.try_lock().expect("free"));
        disable();
        std::thread::sleep(std::time::Duration::from_millis(2));
        drop((gm, gr, gs));
        let st = C.stats();
        assert_eq!((st.write.acquisitions, st.read.acquisitions), (2, 1));
        assert!(st.write.hold.min >= 2_000_000, "{st:?}");
        assert!(st.read.hold.min >= 2_000_000, "{st:?}");
        for _ in 0..3 {
            *m.lock() += 1;
            *l.write() += 1;
            *s.lock() += 1;
            drop((m.try_lock(), l.try_read()));
            drop(l.try_write());
        }
        assert_eq!(C.stats(), st);
        assert_eq!((*m.lock(), *l.read(), *s.lock()), (3, 3, 3));
        C.reset();
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

#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;
    use crate::sync::{AtomicUsize, Ordering};
    use loom::cell::UnsafeCell as LoomUnsafeCell;
    use loom::sync::Arc;

    /// Two threads increment a loom-tracked cell under the mutex (one by `try_lock` when it
    /// can): loom reports a data race if a guard's drop failed to unlock after the hold or
    /// the next holder were not ordered after it.
    #[test]
    fn loom_mutex_mutual_exclusion() {
        loom::model(|| {
            let m = Arc::new(Mutex::new(LoomUnsafeCell::new(0usize)));
            let m2 = Arc::clone(&m);
            let t = loom::thread::spawn(move || {
                let g = m2.lock();
                // SAFETY: the guard gives exclusive access to the cell.
                g.with_mut(|p| unsafe { *p += 1 });
            });
            let g = m.try_lock().unwrap_or_else(|| m.lock());
            // SAFETY: as above.
            g.with_mut(|p| unsafe { *p += 1 });
            drop(g);
            t.join().unwrap();
            // SAFETY: both holds are over; we hold the mutex.
            assert_eq!(m.lock().with(|p| unsafe { *p }), 2);
        });
    }

    /// A writer stores two `Relaxed` words under the write lock; a reader loads them under
    /// the read lock and must see both or neither (the lock excludes and orders them).
    #[test]
    fn loom_rwlock_reader_sees_whole_write() {
        loom::model(|| {
            let l = Arc::new(RwLock::new((AtomicUsize::new(0), AtomicUsize::new(0))));
            let l2 = Arc::clone(&l);
            let t = loom::thread::spawn(move || {
                let g = l2.write();
                g.0.store(1, Ordering::Relaxed);
                g.1.store(1, Ordering::Relaxed);
            });
            if let Some(g) = l.try_read() {
                assert_eq!(g.1.load(Ordering::Relaxed), g.0.load(Ordering::Relaxed));
            }
            let g = l.read();
            assert_eq!(g.1.load(Ordering::Relaxed), g.0.load(Ordering::Relaxed));
            drop(g);
            t.join().unwrap();
        });
    }
}
