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
//! ## Removal from inside a callback (`kernfs_remove_self`)
//!
//! A callback that removes its *own* node (or an ancestor) would wait for itself, and two
//! such callbacks (two writers of one sysfs "remove" attribute) would wait for each other:
//! each holds a reference the other's drain counts. So the removing thread first *breaks*
//! its references on the nodes it removes (Linux's `kernfs_break_active_protection`): the
//! caller's thread records the nodes it holds callback references on (`HELD`, in
//! `node.rs`), and `remove` marks those references broken and adds them to the node's
//! `broken` count before draining. A removal by a thread that held references in the
//! subtree (now broken) waits on each node of the subtree until only broken references
//! are left (`count == BIAS + broken`); a removal by any other thread (from outside the
//! subtree's callbacks) still waits for every reference (`count == BIAS`), so its
//! guarantee above is unchanged. A reference stays
//! broken until its callback returns (`put_broken`), so a self-removal never waits for
//! another one, whichever finishes first. Only one removal wins the deactivation (it
//! returns `Ok`; `remove_self` returns `true`); the others drain and unlink too, so the
//! node is gone when any of them returns. Two callbacks removing each *other's* nodes
//! (not their own or an ancestor) still deadlock, as in Linux: do not do that.

//! ## Orderings
//!
//! `put` is `Release` and the drain's load is `Acquire`, so everything a callback did
//! happens-before `remove` returns. The sleeping side uses a mutex and condition variable
//! per file system (Linux: `root->deactivate_waitq`): a `put` that leaves a deactivated
//! count takes the mutex and notifies, the drainer re-checks under the mutex, so no wakeup
//! is lost. `broken` is changed (`break_refs`, `put_broken`) and read (`drain`) only under
//! that mutex; why `count == BIAS + broken` is then an exact test is in `drain`. They are plain `std` locks without a lockstat class: they are touched only by
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
        pub use shuttle::sync::atomic::{AtomicBool, AtomicI32, AtomicUsize, Ordering};
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
        count.drain(&q, false);
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

    /// A thread holding a reference removes the node itself (breaking its reference) while
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
                count.break_refs(&q, 1);
                count.drain(&q, true);
                count.put_broken(&q);
                other.join().unwrap();
                // Fully drained: a drain with no holds returns at once.
                count.drain(&q, false);
            },
            3000,
        );
    }

    /// Two callbacks of one node (two writers of a "remove" attribute) remove it at the
    /// same time, each breaking its own reference, while a plain reader comes and goes and
    /// a third thread removes it from outside. Shuttle reports a deadlock if the two
    /// self-removals wait for each other (the bug this protocol fixes: each waited for
    /// `BIAS + 1` while the count sat at `BIAS + 2`). Checked: exactly one deactivation
    /// wins; a self-removal's drain returns only after the reader left; the outside drain
    /// returns only after both callbacks returned (broken references still count for it);
    /// and the count ends at exactly the bias.
    fn concurrent_self_removals_model() {
        let count = Arc::new(ActiveCount::new());
        let q = Arc::new(DrainQueue::new());
        let reader_inside = Arc::new(sync::AtomicBool::new(false));
        let (entered, done) = (
            Arc::new(sync::AtomicUsize::new(0)),
            Arc::new(sync::AtomicUsize::new(0)),
        );
        let writers: Vec<_> = (0..2)
            .map(|_| {
                let (count, q, reader_inside) = (count.clone(), q.clone(), reader_inside.clone());
                let (entered, done) = (entered.clone(), done.clone());
                thread::spawn(move || {
                    if !count.try_get() {
                        return false; // removed before this writer got in
                    }
                    entered.fetch_add(1, sync::Ordering::SeqCst);
                    // The store: remove its own node (`Kernfs::remove` from a callback).
                    let won = count.deactivate();
                    count.break_refs(&q, 1);
                    count.drain(&q, true);
                    assert!(
                        !reader_inside.load(sync::Ordering::Relaxed),
                        "self-removal returned with an unbroken reader inside"
                    );
                    thread::yield_now();
                    done.fetch_add(1, sync::Ordering::SeqCst);
                    count.put_broken(&q);
                    won
                })
            })
            .collect();
        let reader = {
            let (count, q, reader_inside) = (count.clone(), q.clone(), reader_inside.clone());
            thread::spawn(move || {
                for _ in 0..2 {
                    if count.try_get() {
                        reader_inside.store(true, sync::Ordering::Relaxed);
                        thread::yield_now();
                        reader_inside.store(false, sync::Ordering::Relaxed);
                        count.put(&q);
                    }
                }
            })
        };
        // The outside removal (holds no reference).
        let mut wins = usize::from(count.deactivate());
        count.drain(&q, false);
        assert_eq!(
            done.load(sync::Ordering::SeqCst),
            entered.load(sync::Ordering::SeqCst),
            "outside removal returned while a callback ran"
        );
        assert!(!reader_inside.load(sync::Ordering::Relaxed));
        for w in writers {
            wins += usize::from(w.join().unwrap());
        }
        reader.join().unwrap();
        assert_eq!(wins, 1, "exactly one removal deactivates");
        count.drain(&q, false);
        count.drain(&q, true);
    }

    #[test]
    fn shuttle_concurrent_self_removals_random() {
        shuttle::check_random(concurrent_self_removals_model, 10_000);
    }

    #[test]
    fn shuttle_concurrent_self_removals_pct() {
        shuttle::check_pct(concurrent_self_removals_model, 10_000, 3);
    }
}
