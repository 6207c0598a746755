// The active-reference protocol (shared by `active.rs` and the shuttle model in its tests,
// which include this file with `sync` bound to std or to shuttle). See `active.rs`.

/// `active` after deactivation with no reference held (Linux's `KN_DEACTIVATED_BIAS`).
pub(crate) const DEACTIVATED_BIAS: i32 = i32::MIN + 1;

/// The active-reference count of one node: `>= 0` while active (the number of in-flight
/// callers), `DEACTIVATED_BIAS + n` once deactivated with `n` callers still inside.
pub(crate) struct ActiveCount {
    count: sync::AtomicI32,
    /// How many of the counted references are *broken*: held by callbacks that removed
    /// this node or an ancestor (Linux's `kernfs_break_active_protection`). Changed and
    /// read only under the drain queue's mutex, so `Relaxed` (the mutex orders it).
    broken: sync::AtomicI32,
}

/// Where drainers sleep. One per file system (as Linux's `root->deactivate_waitq`); only
/// touched by removals and by the last callers on deactivated nodes, never on a hot path.
pub(crate) struct DrainQueue {
    lock: sync::Mutex<()>,
    cv: sync::Condvar,
}

impl ActiveCount {
    pub(crate) fn new() -> Self {
        ActiveCount {
            count: sync::AtomicI32::new(0),
            broken: sync::AtomicI32::new(0),
        }
    }

    /// `kernfs_get_active`: one more caller, unless the node was deactivated.
    #[inline]
    pub(crate) fn try_get(&self) -> bool {
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
        // Release pairs with the Acquire load in `drain`: everything the caller did under
        // its reference happens-before the drainer's return.
        let v = self.count.fetch_sub(1, sync::Ordering::Release) - 1;
        if v < 0 {
            // Deactivated: a drainer may be waiting.
            q.wake();
        }
    }

    /// Adds the bias: no new reference can be taken. `false` if already deactivated.
    pub(crate) fn deactivate(&self) -> bool {
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
                Ok(_) => return true,
                Err(cur) => v = cur,
            }
        }
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
        // Release pairs with the Acquire loads in `drain`, as in `put`.
        self.count.fetch_sub(1, sync::Ordering::Release);
        q.cv.notify_all();
    }

    /// `kernfs_drain`: after `deactivate`, waits until no reference is left (`breaker ==
    /// false`), or until only broken ones are left (`breaker == true`: the caller is a
    /// callback removing its own subtree, and must wait neither for itself nor for other
    /// such callbacks).
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
        // The test is under `q.lock`, and `put` (of a deactivated node), `put_broken` and
        // `break_refs` take it to notify after their change, so no wakeup is lost.
        loop {
            let b = if breaker {
                self.broken.load(sync::Ordering::Relaxed)
            } else {
                0
            };
            // Acquire pairs with the Release in `put` and `put_broken`.
            if self.count.load(sync::Ordering::Acquire) == DEACTIVATED_BIAS + b {
                return;
            }
            g = q.cv.wait(g).unwrap_or_else(|e| e.into_inner());
        }
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
