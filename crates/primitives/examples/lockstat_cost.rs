//! The cost of lockstat on an uncontended spin lock, for `valgrind --tool=callgrind`
//! instruction counts (repeatable on a noisy machine, unlike time).
//!
//! ```text
//! cargo build --release -p scalevfs-primitives --example lockstat_cost
//! scripts/lockstat-cost.sh      # runs each variant under callgrind and prints instr/op
//! ```
//!
//! Variants: `raw` (the bare lock word, no lockstat code at all), `unclassed` (the
//! `SpinLock` wrapper without a class), `off` (a classed lock with lockstat switched off:
//! what every scalevfs lock pays by default), `on` (switched on).

use std::hint::black_box;

use scalevfs_primitives::lockstat::{self, LockClass};
use scalevfs_primitives::spinlock::{RawSpinLock, SpinLock};

static CLASS: LockClass = LockClass::new("lockstat_cost");

fn main() {
    let mut args = std::env::args().skip(1);
    let variant = args.next().unwrap_or_else(|| "off".into());
    let n: u64 = match args.next().map(|s| s.parse()) {
        None => 1_000_000,
        Some(Ok(n)) => n,
        Some(Err(e)) => {
            eprintln!("lockstat_cost: bad iteration count: {e}");
            std::process::exit(2);
        }
    };
    let raw = RawSpinLock::new();
    let unclassed = SpinLock::new(0u64);
    let classed = SpinLock::with_class(0u64, &CLASS);
    match variant.as_str() {
        "raw" => {
            for _ in 0..n {
                raw.lock();
                black_box(&raw);
                // SAFETY: this thread took the lock on the line above.
                unsafe { raw.unlock() };
            }
        }
        "unclassed" => {
            for _ in 0..n {
                *black_box(&unclassed).lock() += 1;
            }
        }
        "off" | "on" => {
            if variant == "on" {
                lockstat::enable();
            }
            for _ in 0..n {
                *black_box(&classed).lock() += 1;
            }
        }
        other => {
            eprintln!("lockstat_cost: unknown variant '{other}' (raw, unclassed, off, on)");
            std::process::exit(2);
        }
    }
}
