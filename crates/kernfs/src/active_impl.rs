// The active-reference protocol (shared by `active.rs` and the shuttle model in its tests,
// which include this file with `sync` bound to std or to shuttle). See `active.rs`.

use scalevfs_primitives::percpu_ref::{SlotArena, SlotCounters};

/// `active` after deactivation with no reference held (Linux's `KN_DEACTIVATED_BIAS`).
pub(crate) const DEACTIVATED_BIAS: i32 = i32::MIN + 1;

/// What `count` holds on top of its own part while a node's per-CPU counters are open.
/// It keeps the count far from both zero and the deactivated range while callers' puts
/// land on it after the close and before the switch (see `deactivate`).
pub(crate) const PERCPU_BIAS: i32 = 1 << 29;

/// The active-reference count of one node.
///
/// * Without per-CPU counters (`slot` is `None`): `count` is `>= 0` while active (the
///   number of in-flight callers), `DEACTIVATED_BIAS + n` once deactivated with `n`
///   callers still inside.
/// * With per-CPU counters: while active, `count` is `PERCPU_BIAS` and the callers are
///   counted by the node's counters in the per-CPU arena (their sum, each CPU's counter
///   a delta). `deactivate` closes the counters and folds their sum into `count`, which
///   then reads as above.
pub(crate) struct ActiveCount {
    count: sync::AtomicI32,
    /// How many of the counted references are *broken*: held by callbacks that removed
    /// this node or an ancestor (Linux's `kernfs_break_active_protection`). Changed and
    /// read only under the drain queue's mutex, so `Relaxed` (the mutex orders it).
    broken: sync::AtomicI32,
    /// The node's per-CPU counters, fixed at creation (`None`: the single count only).
    percpu: Option<SlotCounters<'static>>,
}

/// Where drainers sleep. One per file system (as Linux's `root->deactivate_waitq`); only
/// touched by removals and by the last callers on deactivated nodes, never on a hot path.
pub(crate) struct DrainQueue {
    lock: sync::Mutex<()>,
    cv: sync::Condvar,
}

impl ActiveCount {
    /// A count without per-CPU counters (directories, symlinks, the legacy design).
    pub(crate) fn new() -> Self {
        ActiveCount {
            count: sync::AtomicI32::new(0),
            broken: sync::AtomicI32::new(0),
            percpu: None,
        }
    }

    /// A count whose callers go to per-CPU counters in `arena` until deactivation
    /// (attribute files), or a plain one if the arena has no slot left.
    pub(crate) fn with_percpu(arena: &'static SlotArena) -> Self {
        let Some(percpu) = arena.alloc().and_then(|id| arena.counters(id)) else {
            return ActiveCount::new();
        };
        // No other thread knows the slot yet. `open`'s Relaxed stores are published with
        // the node itself (whoever reaches the node got it through a Release/Acquire
        // pair: an `Arc` handed over, a table insert).
        arena.open(percpu.id());
        ActiveCount {
            count: sync::AtomicI32::new(PERCPU_BIAS),
            broken: sync::AtomicI32::new(0),
            percpu: Some(percpu),
        }
    }

    /// `kernfs_get_active`: one more caller, unless the node was deactivated.
    #[inline]
    pub(crate) fn try_get(&self) -> bool {
        // An open counter: counted there. A closed one (deactivated) refuses, and the
        // single count below is negative by then, so the get fails.
        if self.percpu.is_some_and(|c| c.try_add(1)) {
            return true;
        }
        let mut v = self.count.load(sync::Ordering::Relaxed);
        loop {
            if v < 0 {
                return false;
            }
            // Acquire pairs with nothing essential (the node's data is immutable or has its
            // own locks); the RMW's place in the modification order is what matters: a get
            // ordered before `deactivate` is counted, one after it sees the bias and fails.
            match self.count.compare_exchange_weak(
                v,
                v + 1,
                sync::Ordering::Acquire,
                sync::Ordering::Relaxed,
            ) {
                Ok(_) => return true,
                Err(cur) => v = cur,
            }
        }
    }

    /// `kernfs_put_active`. The last caller of a deactivated node wakes the drainers.
    #[inline]
    pub(crate) fn put(&self, q: &DrainQueue) {
        // An open counter (of any CPU: the caller may have moved since its get) takes the
        // put; its AcqRel add pairs with the close's swap in `deactivate`, which the drain
        // synchronizes with through the switch (see `drain`).
        if self.percpu.is_some_and(|c| c.try_add(-1)) {
            return;
        }
        // Release pairs with the Acquire load in `drain`: everything the caller did under
        // its reference happens-before the drainer's return.
        let v = self.count.fetch_sub(1, sync::Ordering::Release) - 1;
        if v < 0 {
            // Deactivated: a drainer may be waiting.
            q.wake();
        }
    }

    /// Adds the bias: no new reference can be taken once this returns `true` (a caller
    /// that got in before is counted). `false` if already deactivated: the winner may
    /// still be switching the per-CPU counters, which `drain` waits for.
    ///
    /// With per-CPU counters the winner then closes them and adds their sum (less
    /// `PERCPU_BIAS`) to the single count. Between its bias and its close a caller may
    /// still get in on an open counter: it is in the sum, so every drain waits for it.
    /// After the close no counter takes a get, and the single count is negative: every
    /// later get fails. Until the sum is added the count is `DEACTIVATED_BIAS +
    /// PERCPU_BIAS + (puts that met a closed counter)`, which no drain accepts.
    pub(crate) fn deactivate(&self, q: &DrainQueue) -> bool {
        let mut v = self.count.load(sync::Ordering::Relaxed);
        loop {
            if v < 0 {
                return false;
            }
            // AcqRel: Acquire pairs with the Release `put`s before it (harmless, the
            // drain's Acquire load is what orders callbacks before the removal); Release
            // orders the remover's earlier writes before any caller that fails `try_get`
            // and then looks at the node.
            match self.count.compare_exchange_weak(
                v,
                v.wrapping_add(DEACTIVATED_BIAS),
                sync::Ordering::AcqRel,
                sync::Ordering::Relaxed,
            ) {
                Ok(_) => break,
                Err(cur) => v = cur,
            }
        }
        if let Some(percpu) = self.percpu {
            // Only this thread won, so only it closes (the arena's rule: one closer).
            let sum = percpu.close();
            // The sum of in-flight callers fits an i32 (it is at most the threads alive).
            let switch = (sum - i64::from(PERCPU_BIAS)) as i32;
            // AcqRel: Acquire makes the counters' puts (drained by the close) happen-before
            // this; Release hands them on to the drainer's Acquire load of the count.
            self.count.fetch_add(switch, sync::Ordering::AcqRel);
            // A drainer (a losing remover) may wait for the switch.
            q.wake();
        }
        true
    }

    /// Whether new references can still be taken (a hint: it may change right after).
    #[inline]
    pub(crate) fn is_active(&self) -> bool {
        self.count.load(sync::Ordering::Relaxed) >= 0
    }

    /// `kernfs_break_active_protection` for `n` references the caller holds, after the
    /// node was deactivated: drains by callers that hold broken references themselves no
    /// longer wait for these (other drains still do). They stay broken until they are put
    /// with [`put_broken`](Self::put_broken).
    pub(crate) fn break_refs(&self, q: &DrainQueue, n: i32) {
        let _g = q.lock.lock().unwrap_or_else(|e| e.into_inner());
        self.broken.fetch_add(n, sync::Ordering::Relaxed);
        // Breaking can complete another breaker's drain.
        q.cv.notify_all();
    }

    /// `put` of a broken reference (its node is deactivated, so a drainer may wait).
    pub(crate) fn put_broken(&self, q: &DrainQueue) {
        let _g = q.lock.lock().unwrap_or_else(|e| e.into_inner());
        // Unbroken before it is put: `broken` never exceeds the counted references.
        self.broken.fetch_sub(1, sync::Ordering::Relaxed);
        // A counter still open (the winning remover has not closed it yet): the close
        // will sum this put. Otherwise the single count; Release pairs with the Acquire
        // loads in `drain`, as in `put`.
        let on_counter = self.percpu.is_some_and(|c| c.try_add(-1));
        if !on_counter {
            self.count.fetch_sub(1, sync::Ordering::Release);
        }
        q.cv.notify_all();
    }

    /// `kernfs_drain`: after `deactivate`, waits until no reference is left (`breaker ==
    /// false`), or until only broken ones are left (`breaker == true`: the caller is a
    /// callback removing its own subtree, and must wait neither for itself nor for other
    /// such callbacks).
    ///
    /// Both tests hold only once the per-CPU counters (if any) were switched: before,
    /// the count still carries `PERCPU_BIAS`. After the switch every reference is in the
    /// single count, and its Acquire load synchronizes with the switch's AcqRel add,
    /// which came after the close drained every per-CPU put.
    ///
    /// Why the breaker's test is exact: it reads `broken` (B) and then `count` (C) under
    /// the queue mutex. The B broken references are not put before this thread unlocks
    /// (`put_broken` takes the mutex), so they are in C (coherence); hence
    /// `C == BIAS + B` means no unbroken reference is left, and its Acquire load has
    /// synchronized with every unbroken `put` (Release, RMWs of one release sequence).
    /// New references cannot appear (deactivated), and a reference that is broken after
    /// the test notifies under the mutex.
    pub(crate) fn drain(&self, q: &DrainQueue, breaker: bool) {
        // Acquire pairs with the Release in `put`.
        if !breaker && self.count.load(sync::Ordering::Acquire) == DEACTIVATED_BIAS {
            return;
        }
        let mut g = q.lock.lock().unwrap_or_else(|e| e.into_inner());
        // The test is under `q.lock`, and `put` (of a deactivated node), `put_broken`,
        // `break_refs` and the per-CPU switch in `deactivate` take it to notify after
        // their change, so no wakeup is lost.
        loop {
            let b = if breaker {
                self.broken.load(sync::Ordering::Relaxed)
            } else {
                0
            };
            // Acquire pairs with the Release in `put`, `put_broken` and the switch.
            if self.count.load(sync::Ordering::Acquire) == DEACTIVATED_BIAS + b {
                return;
            }
            g = q.cv.wait(g).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// Gives the per-CPU slot back to `arena`, the one [`with_percpu`](Self::with_percpu)
    /// took it from (the node is being freed: `&mut`, so no caller can be about to add
    /// to it). Returns the references that were still counted, which is 0 unless a caller
    /// leaked one.
    pub(crate) fn release_slot(&mut self, arena: &SlotArena) -> i64 {
        let Some(percpu) = self.percpu.take() else {
            return 0;
        };
        // Closed already if the node was deactivated (then this sums nothing).
        let left = percpu.close();
        // SAFETY: not a memory-safety contract (see `SlotArena::free`): the slot is closed
        // on every CPU just above, and `&mut self` means no thread holds the node, so
        // none can be about to add to the slot for it.
        unsafe { arena.free(percpu.id()) };
        left
    }
}

impl DrainQueue {
    pub(crate) fn new() -> Self {
        DrainQueue {
            lock: sync::Mutex::new(()),
            cv: sync::Condvar::new(),
        }
    }

    fn wake(&self) {
        let _g = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        self.cv.notify_all();
    }
}
