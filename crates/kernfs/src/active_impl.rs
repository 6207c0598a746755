// The active-reference protocol (shared by `active.rs` and the shuttle model in its tests,
// which include this file with `sync` bound to std or to shuttle). See `active.rs`.

/// `active` after deactivation with no reference held (Linux's `KN_DEACTIVATED_BIAS`).
pub(crate) const DEACTIVATED_BIAS: i32 = i32::MIN + 1;

/// The active-reference count of one node: `>= 0` while active (the number of in-flight
/// callers), `DEACTIVATED_BIAS + n` once deactivated with `n` callers still inside.
pub(crate) struct ActiveCount {
    count: sync::AtomicI32,
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
            // Deactivated: a drainer may be waiting (for BIAS, or BIAS + its own holds).
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

    /// `kernfs_drain`: after `deactivate`, waits until only `self_held` references remain
    /// (those the calling thread itself holds: a callback removing its own node).
    pub(crate) fn drain(&self, q: &DrainQueue, self_held: i32) {
        let target = DEACTIVATED_BIAS + self_held;
        // Acquire pairs with the Release in `put`.
        if self.count.load(sync::Ordering::Acquire) == target {
            return;
        }
        let mut g = q.lock.lock().unwrap_or_else(|e| e.into_inner());
        // The check is under `q.lock` and `put` takes it to notify after its decrement, so
        // a decrement after the check cannot notify before this thread waits.
        while self.count.load(sync::Ordering::Acquire) != target {
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
