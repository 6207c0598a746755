// A mount's state word and the two handshakes built on it (shared by `mount/mod.rs`, with
// `sync` bound to std, and by the loom model in `mount/loom_tests.rs`, with `sync` bound
// to loom). The argument is in the module docs of `mount`.

const ATTACHED: u8 = 0;
const UMOUNTING: u8 = 1;
const DETACHED: u8 = 2;

/// Where a mount stands: `ATTACHED`, `UMOUNTING` (a plain umount is deciding whether it
/// is busy) or `DETACHED` (out of the tree for good). The state publishes nothing: its
/// stores and loads are `Relaxed` around `SeqCst` fences (Dekker's pattern with the busy
/// check), or `SeqCst` where a caller only asks whether the mount is gone.
pub(crate) struct MountState(sync::AtomicU8);

impl MountState {
    pub(crate) fn new() -> MountState {
        MountState(sync::AtomicU8::new(ATTACHED))
    }

    /// Whether the mount was detached. `DETACHED` is final.
    pub(crate) fn is_detached(&self) -> bool {
        self.0.load(sync::Ordering::SeqCst) == DETACHED
    }

    /// Enters the mount from the table: takes a count on its root with `count_root`
    /// (`None`: the root is dead, so the mount is gone), then a `SeqCst` fence, *then*
    /// looks at the state. Either a concurrent umount's busy check (after its fence:
    /// `begin_umount`'s, or [`fence_before_busy_check`]) sees the count and calls the
    /// mount busy, or this sees
    /// the state umount set: `DETACHED` gives the count back and answers `None`, as if the
    /// mount had gone already; `UMOUNTING` gives it back and waits for the decision, so
    /// that the walker cannot be the reason an umount fails.
    pub(crate) fn enter<R>(&self, mut count_root: impl FnMut() -> Option<R>) -> Option<R> {
        let backoff = sync::Backoff::new();
        loop {
            let r = count_root()?;
            // SeqCst fence: pairs with the one in `begin_umount` (a plain umount) or in
            // `fence_before_busy_check` (a lazy one, after its `detach`): Dekker.
            sync::fence(sync::Ordering::SeqCst);
            match self.0.load(sync::Ordering::Relaxed) {
                ATTACHED => return Some(r),
                DETACHED => return None,
                _ => {
                    drop(r);
                    backoff.snooze();
                }
            }
        }
    }

    /// `..` out of the mount's root: takes a count on the mountpoint with
    /// `count_mountpoint`, then a `SeqCst` fence, then confirms that the mount is still
    /// attached (or gives the count back and answers `None`). The mountpoint may be the
    /// root of a mount that the same lazy umount detaches: either that mount's busy check
    /// (after [`fence_before_busy_check`]) sees our count, or we see our own mount
    /// detached (the umount detaches every mount of the tree before any busy check) and
    /// let go, so the shutdown never waits for this walker.
    pub(crate) fn count_if_attached<R>(
        &self,
        count_mountpoint: impl FnOnce() -> Option<R>,
    ) -> Option<R> {
        let r = count_mountpoint()?;
        // SeqCst fence: pairs with `fence_before_busy_check` (Dekker).
        sync::fence(sync::Ordering::SeqCst);
        if self.is_detached() {
            drop(r);
            return None;
        }
        Some(r)
    }

    /// A plain umount starts deciding: walkers entering now wait (see `enter`). Call with
    /// the table mutex held; then look at the counts.
    pub(crate) fn begin_umount(&self) {
        self.0.store(UMOUNTING, sync::Ordering::Relaxed);
        // SeqCst fence: pairs with the one in `enter`; the counts are read after it.
        sync::fence(sync::Ordering::SeqCst);
    }

    /// The umount decided the mount stays (it was busy). Waiting walkers poll the state.
    pub(crate) fn cancel_umount(&self) {
        self.0.store(ATTACHED, sync::Ordering::Relaxed);
    }

    /// Takes the mount out of the tree for good. Call with the table mutex held, after
    /// checking under it that the mount is not detached already.
    pub(crate) fn detach(&self) {
        self.0.store(DETACHED, sync::Ordering::Relaxed);
    }
}

/// The busy check's fence: the counts an umount reads after it include every count
/// taken by `enter` or `count_if_attached` that did not see the state set before it.
pub(crate) fn fence_before_busy_check() {
    sync::fence(sync::Ordering::SeqCst);
}
