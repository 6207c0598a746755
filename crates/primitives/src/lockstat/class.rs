//! [`LockClass`]: a class's per-CPU counter shards, their snapshot and the report.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};

use crossbeam_utils::CachePadded;

use super::{register_once, registered, Kind, NR_SHARDS, REGISTRY};

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
        register_once(&self.registered, &REGISTRY, self);
    }

    #[inline]
    fn counters(&'static self, kind: Kind) -> &'static Counters {
        self.register();
        &self.shards[crate::cpu::current_shard(NR_SHARDS)].0[kind as usize]
    }

    /// Records an acquisition; `wait_ns` is `Some` if it was contended.
    pub(super) fn record_acquired(&'static self, kind: Kind, wait_ns: Option<u64>) {
        let c = self.counters(kind);
        c.acquisitions.fetch_add(1, Relaxed);
        if let Some(ns) = wait_ns {
            c.contentions.fetch_add(1, Relaxed);
            record_time(&c.wait_min, &c.wait_max, &c.wait_total, ns);
        }
    }

    pub(super) fn record_released(&'static self, kind: Kind, hold_ns: u64) {
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
    /// The shortest non-zero time (0 if none was recorded).
    pub min: u64,
    /// The longest time.
    pub max: u64,
    /// The sum of all times.
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
    /// Acquisitions, contended or not.
    pub acquisitions: u64,
    /// Acquisitions whose first try failed.
    pub contentions: u64,
    /// Time from the failed try to the acquisition (contended acquisitions only).
    pub wait: TimeStats,
    /// Time from the acquisition to the guard's drop.
    pub hold: TimeStats,
}

/// A snapshot of one class's statistics.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClassStats {
    /// The class's name.
    pub name: &'static str,
    /// Shared (reader) acquisitions.
    pub read: KindStats,
    /// Exclusive acquisitions (writers, mutexes, spinlocks).
    pub write: KindStats,
}

/// Snapshots of every registered class.
pub fn snapshot() -> Vec<ClassStats> {
    registered().into_iter().map(LockClass::stats).collect()
}

/// A `/proc/lock_stat`-like table of every registered class that recorded something,
/// followed by the [`LockEvent`](super::LockEvent)s that counted (`events:`, one line
/// each).
pub fn report() -> String {
    let mut out = format_report(
        snapshot()
            .into_iter()
            .filter(|s| s.read.acquisitions + s.write.acquisitions > 0)
            .collect(),
    );
    out.push_str(&super::event::format_events());
    out
}

/// The same table restricted to `classes`.
pub fn report_for(classes: &[&'static LockClass]) -> String {
    format_report(classes.iter().map(|c| c.stats()).collect())
}

/// Formats like Linux's lock_stat: one line per class and kind (`name-W:`/`name-R:` when the
/// class saw both), times in microseconds with two decimals, sorted by contentions.
pub(super) fn format_report(mut stats: Vec<ClassStats>) -> String {
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
