//! What `state_impl.rs` and `write_gate_impl.rs` call `sync` in their loom models: loom's
//! atomics and fences, and a spin wait that yields so that loom schedules another thread.

pub use loom::sync::atomic::{fence, AtomicU8, Ordering};

/// A spin wait in the model: a yield, so that loom schedules another thread.
pub struct Backoff;

impl Backoff {
    pub fn new() -> Backoff {
        Backoff
    }
    pub fn snooze(&self) {
        loom::thread::yield_now();
    }
}
