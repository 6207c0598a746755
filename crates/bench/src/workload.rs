//! What a benchmark workload is.
//!
//! A [`Workload`] is set up once per (design, thread count) into an [`Instance`]; the
//! runner then asks the instance for one worker closure per thread, on that thread, and
//! calls it in a loop until the measurement interval ends. A worker returns how many
//! operations its call performed, so cheap operations can be batched to keep the runner's
//! own loop out of the measurement.

use std::fmt;

/// The design a run measures.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Design {
    /// The Linux patch series' "before": one global lock / one list / a lock-protected count.
    Legacy,
    /// The series' "after" (scalevfs's default).
    Scalable,
    /// The same operations through real system calls on the host kernel.
    Host,
}

impl Design {
    /// Every design, in the order rounds interleave.
    pub const ALL: [Design; 3] = [Design::Legacy, Design::Scalable, Design::Host];

    /// The design's name in reports and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Design::Legacy => "legacy",
            Design::Scalable => "scalable",
            Design::Host => "host",
        }
    }

    /// The primitives' / VFS's switch for this design (`Host` has none).
    pub fn locking(self) -> Option<scalevfs_primitives::Locking> {
        match self {
            Design::Legacy => Some(scalevfs_primitives::Locking::Legacy),
            Design::Scalable => Some(scalevfs_primitives::Locking::Scalable),
            Design::Host => None,
        }
    }
}

impl fmt::Display for Design {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A benchmark workload, such as "lockref get/put on one shared object".
pub trait Workload: Send + Sync {
    /// Short, unique, kebab-case name used by `--workload` (`lockref-shared`).
    fn name(&self) -> &'static str;
    /// One line for the report: what each operation does and which Linux patch series it reproduces.
    fn description(&self) -> &'static str;
    /// The designs this workload can run under.
    fn designs(&self) -> &'static [Design];
    /// Builds the shared state for `threads` workers under `design`.
    fn setup(&self, design: Design, threads: usize) -> Result<Box<dyn Instance>, String>;
}

/// A workload set up for one design and thread count.
pub trait Instance: Sync {
    /// Called once on worker thread `thread` (0-based, `< threads`); the returned closure
    /// performs one batch of operations per call and returns how many it did.
    fn worker(&self, thread: usize) -> Box<dyn FnMut() -> u64 + '_>;
    /// Lock statistics (a `/proc/lock_stat`-like table) of the round just measured. The
    /// runner calls it right after a round run with lockstat enabled (after a reset), so the
    /// default, every lock class that recorded something, is that round's table.
    fn lockstat(&self) -> Option<String> {
        Some(scalevfs_primitives::lockstat::report())
    }
}
