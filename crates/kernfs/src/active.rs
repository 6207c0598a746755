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
//! ## Per-CPU counters (attribute files, scalable design)
//!
//! With one count per node (Linux's `kn->active`, the legacy design here), every read,
//! write, poll and open of an attribute file writes that count's line twice, so two CPUs
//! reading one sysfs file always share a written line. In the scalable design every
//! attribute file gets per-CPU counters at creation, as Linux's `percpu_ref` and sv6's
//! Refcache count: a slot in one process-wide [`SlotArena`] (see
//! `scalevfs_primitives::percpu_ref`), i.e. one 8-byte counter per CPU, packed with other
//! nodes' counters of the same CPU, plus a handle on them in the node (a `SlotCounters`:
//! the slot's chunk and number, 24 bytes that fit in the node's former padding: a node is
//! still 256 bytes). A get or put adds ±1 to the calling CPU's counter by a
//! compare-exchange that refuses a closed counter; the true count is the sum (a put may
//! land on another CPU than its get). The CPU is a per-thread hint looked up every 32 adds
//! (`SlotCounters`' docs say why), so a migrated thread may add to its old CPU's counter
//! for a few calls: it costs a shared line, never a count. Attribute files are few and
//! their references are the hot path, so they start per-CPU (no promotion step: the first
//! two readers do not share a line either). Directories and symlinks keep the single count
//! (no caller takes references on them: it only records their deactivation). The arena's
//! memory is `8 * CPUs` bytes per attribute file, allocated in chunks of 1024 slots per
//! CPU; a node gives its slot back when it is freed.
//!
//! Deactivation is Linux's `percpu_ref_kill`: the winner of the single count's bias
//! (`deactivate`) closes the node's counters and adds their sum, less the `PERCPU_BIAS`
//! the single count held while they were open, to the single count; from then on the
//! node behaves as with one count. No grace period is needed, unlike Linux's: a counter
//! refuses adds once closed, so every per-CPU get or put either is in the closing sum or
//! goes to the single count (a get then fails, the count being negative).
//!
//! ## Why the drain terminates and cannot miss a caller
//!
//! `try_get` and `deactivate` are read-modify-writes of one atomic, so they are totally
//! ordered. A `try_get` before the deactivation incremented the count, so the drainer waits
//! for its `put`; a `try_get` after it saw a negative count and failed. With per-CPU
//! counters the closes play that role: a get before its counter's close is in the sum the
//! drainer waits for; one after it is refused and then fails on the single count, which was
//! negative before the first close. The drain accepts no count before the winner's switch
//! (the count still carries `PERCPU_BIAS`). Callers never block while holding a reference
//! except inside the embedder's callback, so the drain ends when the callbacks return.
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
//!
//! ## Orderings
//!
//! `put` is `Release` and the drain's load is `Acquire`, so everything a callback did
//! happens-before `remove` returns. A per-CPU put is an `AcqRel` add that the close's
//! `AcqRel` swap reads, and the switch that follows is an `AcqRel` add that the drain's
//! `Acquire` load reads, so the same holds through the counters. The sleeping side uses a
//! mutex and condition variable per file system (Linux: `root->deactivate_waitq`): a `put`
//! that leaves a deactivated count takes the mutex and notifies, the drainer re-checks
//! under the mutex, so no wakeup is lost; the switch of the per-CPU counters notifies
//! likewise (a losing remover may drain while the winner switches). `broken` is changed
//! (`break_refs`, `put_broken`) and read (`drain`) only under that mutex; why `count ==
//! BIAS + broken` is then an exact test is in `drain`. They are plain `std` locks without
//! a lockstat class: they are touched only by removals, and the shuttle model below swaps
//! them for shuttle's.
//!
//! ## Lock order
//!
//! The drain queue's mutex is a leaf; the arena's allocation mutex is a leaf taken at
//! node creation and freeing, never under the drain queue's mutex.

use std::sync::LazyLock;

mod sync {
    pub use std::sync::atomic::{AtomicI32, Ordering};
    pub use std::sync::{Condvar, Mutex};
}

include!("active_impl.rs");

/// The per-CPU counters of every attribute file of every scalable instance in this
/// process (one arena: its chunks are shared, and a slot is given back when its node is
/// freed).
pub(crate) fn percpu_counters() -> &'static SlotArena {
    static COUNTERS: LazyLock<SlotArena> = LazyLock::new(SlotArena::new);
    &COUNTERS
}

#[cfg(test)]
mod shuttle_model {
    //! The same code under shuttle's scheduler (random and PCT interleavings), each model
    //! for both kinds of count: the single one and per-CPU counters (a real `SlotArena`
    //! of two CPUs; each call runs on a CPU drawn by shuttle's random source, so a put
    //! often lands on another CPU than its get, as after a migration). The arena's own
    //! atomics are not shuttle's, so its calls are atomic steps here: the model explores
    //! where they fall among the count's operations, not inside them (the arena's loom
    //! model covers those).
    mod sync {
        pub use shuttle::sync::atomic::{AtomicBool, AtomicI32, AtomicUsize, Ordering};
        pub use shuttle::sync::{Condvar, Mutex};
    }
    include!("active_impl.rs");

    use shuttle::rand::{thread_rng, RngCore};
    use shuttle::sync::Arc;
    use shuttle::thread;

    /// The models' per-CPU counters: two CPUs. Not shuttle's objects, so one arena can
    /// serve every execution (each gives its slot back at its end).
    static ARENA: std::sync::LazyLock<SlotArena> =
        std::sync::LazyLock::new(|| SlotArena::with_cpus(2));

    /// One node's count and the drain queue, with each call made on a random CPU.
    struct Node {
        count: ActiveCount,
        q: DrainQueue,
    }

    impl Node {
        fn new(percpu: bool) -> Arc<Node> {
            let count = if percpu {
                let c = ActiveCount::with_percpu(&ARENA);
                assert!(c.percpu.is_some(), "the model arena has slots");
                c
            } else {
                ActiveCount::new()
            };
            Arc::new(Node {
                count,
                q: DrainQueue::new(),
            })
        }

        /// Moves the calling model thread to a random CPU (of the arena's two).
        fn migrate() {
            let cpu = (thread_rng().next_u64() % 2) as usize;
            scalevfs_primitives::cpu::set_cpu_override(Some(cpu));
            scalevfs_primitives::percpu_ref::expire_cpu_hint();
        }

        fn try_get(&self) -> bool {
            Self::migrate();
            self.count.try_get()
        }

        fn put(&self) {
            Self::migrate();
            self.count.put(&self.q);
        }

        fn put_broken(&self) {
            Self::migrate();
            self.count.put_broken(&self.q);
        }

        fn deactivate(&self) -> bool {
            self.count.deactivate(&self.q)
        }

        /// The end of every model: fully drained, and no count lost or left on a counter.
        fn check_drained(node: Arc<Node>) {
            node.count.drain(&node.q, false);
            let mut node = Arc::try_unwrap(node).unwrap_or_else(|_| panic!("node still shared"));
            let count = &mut node.count;
            assert_eq!(count.release_slot(&ARENA), 0, "a count left on a counter");
            assert_eq!(
                count.count.load(sync::Ordering::Relaxed),
                DEACTIVATED_BIAS,
                "a count lost or left over"
            );
        }
    }

    /// Checks `model` with the single count and with per-CPU counters, random schedules.
    fn random_both(model: fn(bool)) {
        for percpu in [false, true] {
            shuttle::check_random(move || model(percpu), 10_000);
        }
    }

    /// As `random_both`, with PCT schedules (depth 3).
    fn pct_both(model: fn(bool)) {
        for percpu in [false, true] {
            shuttle::check_pct(move || model(percpu), 10_000, 3);
        }
    }

    /// Readers take references and check the object is not freed while they hold one; the
    /// remover deactivates, drains and then "frees". Shuttle reports a deadlock (a lost
    /// wakeup) or a failed assertion (a reader inside after the drain).
    fn drain_model(percpu: bool, readers: usize, rounds: usize) {
        let node = Node::new(percpu);
        let freed = Arc::new(sync::AtomicBool::new(false));
        let ts: Vec<_> = (0..readers)
            .map(|_| {
                let (node, freed) = (node.clone(), freed.clone());
                thread::spawn(move || {
                    let mut got = 0;
                    for _ in 0..rounds {
                        if node.try_get() {
                            got += 1;
                            assert!(!freed.load(sync::Ordering::Relaxed), "used after drain");
                            thread::yield_now();
                            assert!(!freed.load(sync::Ordering::Relaxed), "used after drain");
                            node.put();
                        }
                    }
                    got
                })
            })
            .collect();
        assert!(node.deactivate());
        assert!(!node.deactivate(), "second deactivation must fail");
        node.count.drain(&node.q, false);
        freed.store(true, sync::Ordering::Relaxed);
        assert!(!node.try_get());
        for t in ts {
            t.join().unwrap();
        }
        assert!(!node.count.is_active());
        Node::check_drained(node);
    }

    #[test]
    fn shuttle_drain_random() {
        for percpu in [false, true] {
            shuttle::check_random(move || drain_model(percpu, 2, 3), 10_000);
        }
    }

    #[test]
    fn shuttle_drain_pct() {
        for percpu in [false, true] {
            shuttle::check_pct(move || drain_model(percpu, 3, 2), 10_000, 3);
        }
    }

    /// Two removers race to deactivate while readers come and go: exactly one wins, and
    /// the loser's drain (which may start while the winner is still switching the per-CPU
    /// counters) returns only after every counted reader left, as the winner's does.
    fn racing_removers_model(percpu: bool) {
        let node = Node::new(percpu);
        let inside = Arc::new(sync::AtomicUsize::new(0));
        let readers: Vec<_> = (0..2)
            .map(|_| {
                let (node, inside) = (node.clone(), inside.clone());
                thread::spawn(move || {
                    for _ in 0..2 {
                        if node.try_get() {
                            inside.fetch_add(1, sync::Ordering::SeqCst);
                            thread::yield_now();
                            inside.fetch_sub(1, sync::Ordering::SeqCst);
                            node.put();
                        }
                    }
                })
            })
            .collect();
        let removers: Vec<_> = (0..2)
            .map(|_| {
                let (node, inside) = (node.clone(), inside.clone());
                thread::spawn(move || {
                    let won = node.deactivate();
                    node.count.drain(&node.q, false);
                    assert_eq!(inside.load(sync::Ordering::SeqCst), 0, "drained too early");
                    assert!(!node.try_get(), "a get after a drain");
                    won
                })
            })
            .collect();
        let wins: usize = removers
            .into_iter()
            .map(|r| usize::from(r.join().unwrap()))
            .sum();
        assert_eq!(wins, 1, "exactly one removal deactivates");
        for r in readers {
            r.join().unwrap();
        }
        Node::check_drained(node);
    }

    #[test]
    fn shuttle_racing_removers_random() {
        random_both(racing_removers_model);
    }

    #[test]
    fn shuttle_racing_removers_pct() {
        pct_both(racing_removers_model);
    }

    /// A thread holding a reference removes the node itself (breaking its reference) while
    /// another reader comes and goes: the drain must wait for the other reader only, and
    /// the final put of the self-remover leaves the count at exactly the bias.
    #[test]
    fn shuttle_self_removal_does_not_wait_for_itself() {
        for percpu in [false, true] {
            shuttle::check_random(
                move || {
                    let node = Node::new(percpu);
                    let other = {
                        let node = node.clone();
                        thread::spawn(move || {
                            if node.try_get() {
                                thread::yield_now();
                                node.put();
                            }
                        })
                    };
                    assert!(node.try_get());
                    assert!(node.deactivate());
                    node.count.break_refs(&node.q, 1);
                    node.count.drain(&node.q, true);
                    node.put_broken();
                    other.join().unwrap();
                    // Fully drained: a drain with no holds returns at once.
                    Node::check_drained(node);
                },
                3000,
            );
        }
    }

    /// Two callbacks of one node (two writers of a "remove" attribute) remove it at the
    /// same time, each breaking its own reference, while a plain reader comes and goes and
    /// a third thread removes it from outside. Shuttle reports a deadlock if the two
    /// self-removals wait for each other (the bug this protocol fixes: each waited for
    /// `BIAS + 1` while the count sat at `BIAS + 2`). Checked: exactly one deactivation
    /// wins; a self-removal's drain returns only after the reader left; the outside drain
    /// returns only after both callbacks returned (broken references still count for it);
    /// and the count ends at exactly the bias.
    fn concurrent_self_removals_model(percpu: bool) {
        let node = Node::new(percpu);
        let reader_inside = Arc::new(sync::AtomicBool::new(false));
        let (entered, done) = (
            Arc::new(sync::AtomicUsize::new(0)),
            Arc::new(sync::AtomicUsize::new(0)),
        );
        let writers: Vec<_> = (0..2)
            .map(|_| {
                let (node, reader_inside) = (node.clone(), reader_inside.clone());
                let (entered, done) = (entered.clone(), done.clone());
                thread::spawn(move || {
                    if !node.try_get() {
                        return false; // removed before this writer got in
                    }
                    entered.fetch_add(1, sync::Ordering::SeqCst);
                    // The store: remove its own node (`Kernfs::remove` from a callback).
                    let won = node.deactivate();
                    node.count.break_refs(&node.q, 1);
                    node.count.drain(&node.q, true);
                    assert!(
                        !reader_inside.load(sync::Ordering::Relaxed),
                        "self-removal returned with an unbroken reader inside"
                    );
                    thread::yield_now();
                    done.fetch_add(1, sync::Ordering::SeqCst);
                    node.put_broken();
                    won
                })
            })
            .collect();
        let reader = {
            let (node, reader_inside) = (node.clone(), reader_inside.clone());
            thread::spawn(move || {
                for _ in 0..2 {
                    if node.try_get() {
                        reader_inside.store(true, sync::Ordering::Relaxed);
                        thread::yield_now();
                        reader_inside.store(false, sync::Ordering::Relaxed);
                        node.put();
                    }
                }
            })
        };
        // The outside removal (holds no reference).
        let mut wins = usize::from(node.deactivate());
        node.count.drain(&node.q, false);
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
        node.count.drain(&node.q, true);
        Node::check_drained(node);
    }

    #[test]
    fn shuttle_concurrent_self_removals_random() {
        random_both(concurrent_self_removals_model);
    }

    #[test]
    fn shuttle_concurrent_self_removals_pct() {
        pct_both(concurrent_self_removals_model);
    }
}

#[cfg(test)]
mod stress {
    //! The production code with real threads: readers hammer one node's per-CPU counters
    //! (each get and put on a CPU of its own choosing, so puts often land on another CPU
    //! than their gets) while two removers race to deactivate and drain it.
    use super::*;
    use scalevfs_primitives::cpu::set_cpu_override;
    use scalevfs_primitives::percpu_ref::expire_cpu_hint;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

    const CPUS: usize = 4;
    const READERS: usize = 8;
    const ROUNDS: usize = 150;

    /// Moves the calling thread to `cpu` (as far as the counters can tell) at once.
    fn move_to(cpu: Option<usize>) {
        set_cpu_override(cpu);
        expire_cpu_hint();
    }

    /// A lost count or wakeup makes a drain wait forever: fail instead of hanging.
    #[test]
    fn readers_hammer_while_removers_deactivate_and_drain() {
        let (done, wait) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            hammer_rounds();
            let _ = done.send(());
        });
        match wait.recv_timeout(std::time::Duration::from_secs(60)) {
            Ok(()) => {}
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => panic!("a drain hangs"),
            // The rounds panicked: their message is printed above.
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => panic!("a round failed"),
        }
    }

    fn hammer_rounds() {
        static ARENA: std::sync::LazyLock<SlotArena> =
            std::sync::LazyLock::new(|| SlotArena::with_cpus(CPUS));
        let gets = AtomicUsize::new(0);
        for round in 0..ROUNDS {
            let mut count = ActiveCount::with_percpu(&ARENA);
            assert!(count.percpu.is_some());
            let q = DrainQueue::new();
            let (inside, freed) = (AtomicUsize::new(0), AtomicBool::new(false));
            let wins = std::thread::scope(|s| {
                for t in 0..READERS {
                    let (count, q) = (&count, &q);
                    let (inside, freed, gets) = (&inside, &freed, &gets);
                    s.spawn(move || {
                        let mut i = t;
                        // Until 100 gets in a row were refused (the node is gone for good).
                        let mut refused_in_a_row = 0;
                        while refused_in_a_row < 100 {
                            i += 1;
                            move_to(Some(i % CPUS));
                            if count.try_get() {
                                refused_in_a_row = 0;
                                gets.fetch_add(1, Ordering::Relaxed);
                                inside.fetch_add(1, Ordering::SeqCst);
                                assert!(!freed.load(Ordering::SeqCst), "a get after the drain");
                                std::hint::spin_loop();
                                inside.fetch_sub(1, Ordering::SeqCst);
                                move_to(Some((i * 7 + t) % CPUS));
                                count.put(q);
                            } else {
                                refused_in_a_row += 1;
                            }
                        }
                        move_to(None);
                    });
                }
                let removers: Vec<_> = (0..2)
                    .map(|_| {
                        let (count, q) = (&count, &q);
                        let (inside, freed) = (&inside, &freed);
                        s.spawn(move || {
                            // Let the readers in first (longer in some rounds).
                            for _ in 0..(round % 7) * 200 {
                                std::hint::spin_loop();
                            }
                            let won = count.deactivate(q);
                            count.drain(q, false);
                            assert_eq!(inside.load(Ordering::SeqCst), 0, "drained too early");
                            freed.store(true, Ordering::SeqCst);
                            assert!(!count.try_get(), "a get after the drain");
                            won
                        })
                    })
                    .collect();
                removers
                    .into_iter()
                    .map(|r| usize::from(r.join().unwrap()))
                    .sum::<usize>()
            });
            assert_eq!(wins, 1, "round {round}: exactly one deactivation wins");
            assert_eq!(
                count.count.load(Ordering::Relaxed),
                DEACTIVATED_BIAS,
                "round {round}: a count lost or left over"
            );
            assert_eq!(count.release_slot(&ARENA), 0, "round {round}");
        }
        // The readers did get in: the removals raced with counted callers.
        assert!(gets.load(Ordering::Relaxed) > 0);
    }
}
