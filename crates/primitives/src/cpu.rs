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
//!
//! ## Test hook: a per-thread CPU override
//!
//! [`set_cpu_override`] makes [`current_cpu`] answer a fixed CPU on the calling thread.
//! The scalability checker (`scalevfs commute`, crate `scalevfs-commute`) runs its two
//! threads under valgrind, which serializes them on one host CPU and has no rseq area, so
//! both would report the same CPU and share every per-CPU shard; it pins its thread 1 to
//! CPU 0 and thread 2 to CPU 1 with this override (and `sched_setaffinity` where it can).
//! The cost on the default path is one thread-local load and a predictable branch (a
//! `const`-initialized `Cell`, no lazy-init check): a few tenths of a nanosecond next to
//! the `sched_getcpu` call. It is ignored under loom.

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

/// "No override" in [`CPU_OVERRIDE`].
#[cfg(not(loom))]
const NO_OVERRIDE: usize = usize::MAX;

#[cfg(not(loom))]
thread_local! {
    /// The calling thread's [`set_cpu_override`], or [`NO_OVERRIDE`].
    static CPU_OVERRIDE: std::cell::Cell<usize> = const { std::cell::Cell::new(NO_OVERRIDE) };
}

/// Makes [`current_cpu`] (and so [`current_shard`]) on the calling thread answer `cpu`
/// until it is called again; `None` goes back to asking the kernel. A test hook: the
/// scalability checker uses it to put its two threads on different per-CPU shards when
/// valgrind runs them on one host CPU (see the module docs). Only the calling thread is
/// affected; a no-op under loom.
pub fn set_cpu_override(cpu: Option<usize>) {
    #[cfg(not(loom))]
    CPU_OVERRIDE.with(|c| c.set(cpu.unwrap_or(NO_OVERRIDE)));
    // The per-CPU counters keep the thread's CPU for a few adds: make them ask again.
    crate::percpu_ref::expire_cpu_hint();
    #[cfg(loom)]
    let _ = cpu;
}

/// The calling thread's [`set_cpu_override`], if any.
pub fn cpu_override() -> Option<usize> {
    #[cfg(not(loom))]
    {
        let c = CPU_OVERRIDE.with(|c| c.get());
        (c != NO_OVERRIDE).then_some(c)
    }
    #[cfg(loom)]
    None
}

/// The CPU the calling thread is running on right now (a hint: it may migrate at once),
/// or the thread's [`set_cpu_override`] if it has one.
#[inline]
pub fn current_cpu() -> usize {
    #[cfg(not(loom))]
    {
        let forced = CPU_OVERRIDE.with(|c| c.get());
        if forced != NO_OVERRIDE {
            return forced;
        }
    }
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

    #[cfg(not(loom))]
    #[test]
    fn cpu_override_is_per_thread() {
        set_cpu_override(Some(5));
        assert_eq!(current_cpu(), 5);
        assert_eq!(current_shard(4), 1);
        assert_eq!(cpu_override(), Some(5));
        std::thread::spawn(|| assert_eq!(cpu_override(), None))
            .join()
            .unwrap();
        set_cpu_override(None);
        assert_eq!(cpu_override(), None);
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
