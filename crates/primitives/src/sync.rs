//! The one place the primitives get their atomics, spin hints and thread yields from.
//!
//! Normal builds use `std`; `RUSTFLAGS="--cfg loom"` builds use loom's instrumented
//! versions (<https://docs.rs/loom>) so that the loom models in each module's tests explore every interleaving and
//! every weak-memory outcome the C11 model allows. Code in this crate must import atomics
//! from here, never from `std::sync::atomic` directly, or loom cannot see them.

#[cfg(loom)]
pub use loom::sync::atomic::{fence, AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
#[cfg(not(loom))]
pub use std::sync::atomic::{fence, AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};

#[cfg(loom)]
pub use loom::sync::Arc;
#[cfg(not(loom))]
pub use std::sync::Arc;

/// Busy-wait hint for a spinning loop. Under loom it yields to the scheduler instead, which
/// is what lets a model make progress while a thread spins on another's store.
#[inline]
pub fn spin_loop() {
    #[cfg(loom)]
    loom::thread::yield_now();
    #[cfg(not(loom))]
    std::hint::spin_loop();
}

/// Gives up the CPU. Oversubscribed benchmarks (64 threads on 2 cores) need spinners to
/// yield, or a preempted lock holder is waited on for a whole time slice.
#[inline]
pub fn yield_now() {
    #[cfg(loom)]
    loom::thread::yield_now();
    #[cfg(not(loom))]
    std::thread::yield_now();
}
