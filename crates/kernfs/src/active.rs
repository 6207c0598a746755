//! Active references (Linux's `kernfs_get_active`/`kernfs_put_active`/`kernfs_drain`).
//!
//! Every `show`/`store` callback (and every operation that looks at a node's ops: open,
//! llseek, poll) runs under an *active reference* on its node. `remove` first
//! *deactivates* the node (adds `DEACTIVATED_BIAS`, a large negative number, so new
//! references fail: `try_get` is an increment-unless-negative), then *drains*: waits until
//! the count is exactly the bias again, i.e. every caller that got in before the
//! deactivation has left. After that no callback of the node runs, and none will: the
//! embedder may free whatever the callback uses.
//!
//! ## Why the drain terminates and cannot miss a caller
//!
//! `try_get` and `deactivate` are read-modify-writes of one atomic, so they are totally
//! ordered. A `try_get` before the deactivation incremented the count, so the drainer waits
//! for its `put`; a `try_get` after it saw a negative count and failed. Callers never block
//! while holding a reference except inside the embedder's callback, so the drain ends when
//! the callbacks return.
//!
//! A callback that removes its *own* node (or an ancestor) would wait for itself. The
//! caller's thread records the nodes it holds callback references on (`HELD`, in
//! `node.rs`) and the drain waits for `BIAS + own holds` instead, as Linux's
//! `kernfs_break_active_protection` does for `kernfs_remove_self`. Two callbacks removing
//! each other's nodes still deadlock, as in Linux: do not do that.
//!
//! ## Orderings
//!
//! `put` is `Release` and the drain's load is `Acquire`, so everything a callback did
//! happens-before `remove` returns. The sleeping side uses a mutex and condition variable
//! per file system (Linux: `root->deactivate_waitq`): a `put` that leaves a deactivated
//! count takes the mutex and notifies, the drainer re-checks under the mutex, so no wakeup
//! is lost. They are plain `std` locks without a lockstat class: they are touched only by
//! removals, and the shuttle model below swaps them for shuttle's.

mod sync {
    pub use std::sync::atomic::{AtomicI32, Ordering};
    pub use std::sync::{Condvar, Mutex};
}

include!("active_impl.rs");

#[cfg(test)]
mod shuttle_model {
    //! The same code under shuttle's scheduler (random and PCT interleavings).
    mod sync {
        pub use shuttle::sync::atomic::{AtomicBool, AtomicI32, Ordering};
        pub use shuttle::sync::{Condvar, Mutex};
    }
    include!("active_impl.rs");

    use shuttle::sync::Arc;
    use shuttle::thread;

    /// Readers take references and check the object is not freed while they hold one; the
    /// remover deactivates, drains and then "frees". Shuttle reports a deadlock (a lost
    /// wakeup) or a failed assertion (a reader inside after the drain).
    fn drain_model(readers: usize, rounds: usize) {
        let count = Arc::new(ActiveCount::new());
        let q = Arc::new(DrainQueue::new());
        let freed = Arc::new(sync::AtomicBool::new(false));
        let ts: Vec<_> = (0..readers)
            .map(|_| {
                let (count, q, freed) = (count.clone(), q.clone(), freed.clone());
                thread::spawn(move || {
                    let mut got = 0;
                    for _ in 0..rounds {
                        if count.try_get() {
                            got += 1;
                            assert!(!freed.load(sync::Ordering::Relaxed), "used after drain");
                            thread::yield_now();
                            assert!(!freed.load(sync::Ordering::Relaxed), "used after drain");
                            count.put(&q);
                        }
                    }
                    got
                })
            })
            .collect();
        assert!(count.deactivate());
        assert!(!count.deactivate(), "second deactivation must fail");
        count.drain(&q, 0);
        freed.store(true, sync::Ordering::Relaxed);
        assert!(!count.try_get());
        for t in ts {
            t.join().unwrap();
        }
        assert!(!count.is_active());
    }

    #[test]
    fn shuttle_drain_random() {
        shuttle::check_random(|| drain_model(2, 3), 10_000);
    }

    #[test]
    fn shuttle_drain_pct() {
        shuttle::check_pct(|| drain_model(3, 2), 10_000, 3);
    }

    /// A thread holding a reference removes the node itself (`self_held = 1`) while
    /// another reader comes and goes: the drain must wait for the other reader only, and
    /// the final put of the self-remover leaves the count at exactly the bias.
    #[test]
    fn shuttle_self_removal_does_not_wait_for_itself() {
        shuttle::check_random(
            || {
                let count = Arc::new(ActiveCount::new());
                let q = Arc::new(DrainQueue::new());
                let other = {
                    let (count, q) = (count.clone(), q.clone());
                    thread::spawn(move || {
                        if count.try_get() {
                            thread::yield_now();
                            count.put(&q);
                        }
                    })
                };
                assert!(count.try_get());
                assert!(count.deactivate());
                count.drain(&q, 1);
                count.put(&q);
                other.join().unwrap();
                // Fully drained: a drain with no holds returns at once.
                count.drain(&q, 0);
            },
            3000,
        );
    }
}
