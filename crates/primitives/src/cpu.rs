//! Which CPU the caller runs on, for per-CPU sharding (dlock-list shards, lockstat counters).
//!
//! We use `sched_getcpu(3)`. Since glibc 2.35 it reads the CPU number the kernel keeps in
//! the thread's registered rseq area: a plain load, about 2.5 ns on this machine, no system
//! call. The answer can be stale by the time it is used (the thread may migrate), so callers
//! treat it as a *hint* for which shard to use and never as a proof of exclusivity: every
//! shard still has its own lock, and a node remembers the shard it went to.
//!
//! Why the CPU and not a thread-local shard id: the number of shards then equals the number
//! of CPUs, which bounds both the memory and the iteration cost, and when 64 threads share 2
//! CPUs only the 2 running threads can contend, which is the best any sharding can do.
//! A thread-local id would need as many shards as threads to give the same guarantee.
//!
//! Under loom and Miri (which cannot call `sched_getcpu`, a foreign function it has no shim
//! for), and if `sched_getcpu` fails, a per-thread round-robin id stands in for it.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;

/// The number of CPUs this process may run on (at least 1).
pub fn num_cpus() -> usize {
    static N: OnceLock<usize> = OnceLock::new();
    *N.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

/// A stable per-thread number, handed out round-robin (the fallback shard hint).
fn thread_index() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        // Relaxed: the value only has to be unique-ish, it orders nothing.
        static INDEX: usize = NEXT.fetch_add(1, Ordering::Relaxed);
    }
    INDEX.with(|i| *i)
}

/// The CPU the calling thread is running on right now (a hint: it may migrate at once).
#[inline]
pub fn current_cpu() -> usize {
    // Miri cannot call foreign functions it has no shim for: it uses the fallback, as loom does.
    #[cfg(not(any(loom, miri)))]
    {
        // SAFETY: sched_getcpu has no preconditions; it returns -1 on error.
        let cpu = unsafe { libc::sched_getcpu() };
        if cpu >= 0 {
            return cpu as usize;
        }
    }
    thread_index()
}

/// The shard (`0..nshards`) the calling thread should use now.
#[inline]
pub fn current_shard(nshards: usize) -> usize {
    debug_assert!(nshards > 0);
    current_cpu() % nshards
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shard_is_in_range() {
        for n in 1..9 {
            assert!(current_shard(n) < n);
        }
        assert!(num_cpus() >= 1);
    }

    #[test]
    #[cfg_attr(
        miri,
        ignore = "sysconf(_SC_NPROCESSORS_CONF) reads /sys, which Miri cannot"
    )]
    fn current_cpu_is_a_valid_cpu() {
        // On Linux the CPU number is below the number of configured CPUs.
        // SAFETY: sysconf has no preconditions.
        let configured = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_CONF) };
        assert!((current_cpu() as i64) < configured.max(1) * 64);
    }
}
