//! Epoch-based reclamation whose grace periods advance only on the paths that free memory.
//!
//! Readers [`pin`] the thread, load pointers ([`Atomic::load`] gives a [`Shared`] tied to
//! the [`Guard`]'s lifetime) and unpin by dropping the guard; writers unlink an object and
//! hand it to [`Guard::defer_destroy`] (or [`defer_free`], without a pin), and it is freed
//! after every thread that could still reach it has unpinned. The API is the subset of
//! crossbeam-epoch's that this workspace uses, with the same names and signatures.
//!
//! ## Why not crossbeam-epoch
//! crossbeam-epoch's `pin()` tries to advance the global epoch every 128 pins: it reads
//! every thread's record and writes the global epoch, and a full bag of deferred functions
//! goes to a global queue. So two system calls that share nothing still write a common
//! cache line now and then, just by pinning. Here a pin writes only its own thread's
//! record, a deferral only thread-local bags, and only a thread whose bag is full (or
//! that flushes) advances the epoch, so grace periods advance off the paths of every
//! call that frees nothing (Linux's RCU and sv6 go further, with a grace-period thread:
//! see "Advance" below for why the process's collector does not).
//!
//! ## Algorithm
//! * **Global epoch**: a counter on a cache line of its own, written only when it advances.
//! * **Participants**: one record per thread, cache-line aligned, in a registry (a
//!   spinlock-protected vector; registering and exiting write it, once per thread). A
//!   record holds the epoch its thread observed when it pinned, and a pinned bit.
//! * **Pin** (outermost only; pins nest through a thread-local count): (P1) read the global
//!   epoch, (P2) store it with the pinned bit into the own record, (P3) a `SeqCst` fence.
//!   **Unpin** (U1): store "not pinned" into the own record.
//! * **Defer**: push the function onto the thread's open bag (thread-local).
//! * **Seal**: when the open bag holds [`BAG_SIZE`] functions (the first bag of each
//!   thread after the first a little fewer, so that threads doing the same work in step
//!   do not seal and scan in the same call), or on a flush: (S1) a
//!   `SeqCst` fence, (S2) read the global epoch `E`, and move the bag, stamped `E`, to the
//!   thread's sealed bags. A bag stamped `E` may run once the global epoch is `E + 2`.
//! * **Advance**: (A1) read the global epoch `cur`, (A2) a `SeqCst` fence, (A3) read
//!   every record; if every pinned one observed `cur`, (A4) compare-and-swap the epoch from
//!   `cur` to `cur + 1`. After a seal the sealing thread makes one attempt; [`flush`]
//!   makes two. Then the thread runs its sealed bags that have expired, on itself: a free
//!   runs on the thread that retired the object, whose cache still holds it.
//!   [`Global::with_advancer`] makes a collector that instead asks a **grace-period
//!   thread** (module `advancer`, Linux's RCU kthread) to advance: the sealing thread
//!   sets a flag and unparks it. That takes even the scan off the callers' paths, but the
//!   process's collector does not use it: each request is a futex wake-up and the
//!   thread's scan and epoch write move cache lines between CPUs, which cost inode-churn
//!   a third of its single-thread throughput on the 2-core VM (0.36 against 0.50 million
//!   ops/s), for three case-forms of the scalability check.
//! * **Thread exit**: the thread's bags (the open one sealed) go to a global orphan list,
//!   which the next collecting thread adopts.
//! * [`synchronize`]: seal a stamp `E` (S1, S2) and advance until the epoch is `E + 2`:
//!   one full grace period. Refused (a panic) while pinned, since the caller's own pin
//!   would hold the epoch back forever.
//!
//! Stamping a whole bag when it is sealed, rather than each function when deferred, costs
//! one fence per 64 deferrals instead of one each; an early item's stamp is later than it
//! needs to be, which only delays its free.
//!
//! ## What each call writes
//! | call | writes |
//! |---|---|
//! | `pin`, guard drop | its own record (nothing when nested) |
//! | `defer*` | its own bags (thread-local) |
//! | every 64th `defer*`, `flush`, `synchronize` | reads every record and the orphan flag; writes the registry lock and, if the epoch advances, the global epoch |
//! | the same with a grace-period thread | reads the orphan flag; writes the request flag (and the thread's parker) unless a request is pending |
//! | first pin of a thread, thread exit | the registry (and the orphan list at exit) |
//!
//! So two calls that commute write no common line unless one of them fills its thread's
//! bag: one call in `64 / deferrals per call` (unlink retires a dentry, an inode, names
//! and hash nodes, so it fills a bag more often than rename). That call's scan reads the record the
//! other call's pin wrote, and its advance writes the epoch the other's pin reads (the
//! scalability checker shows it in stat+unlink and write+unlink in different
//! directories). A program that never frees never advances, and a pin that defers
//! nothing never writes a shared line.
//!
//! Idle memory: a thread's sealed bags run when it next seals, flushes or exits;
//! [`flush`] (called by `drop_caches` and teardown through the VFS's `reclaim`) seals the
//! open bag and advances twice, so with no reader pinned it frees everything this thread
//! retired, and what exited threads left. Dropping a collector runs its orphans (no
//! participant is left then: each holds the collector). A grace-period thread parks
//! between requests: an idle process runs nothing.
//!
//! ## Why a freed object is unreachable (the memory-ordering argument)
//! Writer W unlinks object X (a store sequenced before W's seal fence F_W = S1), then
//! reads `E` (S2). Reader R pins: reads `e` (P1), stores its record (P2), fence F_R (P3),
//! then loads pointers. The `SeqCst` fences are totally ordered (C++20 [atomics.order]):
//!
//! 1. F_W before F_R: R's loads after F_R see W's unlink (or later stores) (fence-fence
//!    rule), so R cannot reach X from the structure. Nor from an object Y unlinked
//!    before X and still held: R reaching Y means R's fence came before Y's unlink,
//!    hence before F_W.
//! 2. F_R before F_W: R's read `e` (P1) is not later in the epoch's modification order
//!    than W's read `E` (S2): otherwise W's read would be coherence-ordered before R's,
//!    with F_W sequenced before the one and the other before F_R, forcing F_W before F_R.
//!    So `e <= E`. X runs only once the epoch is `E + 2`, so some thread A advanced it
//!    from `E + 1`: A read `E + 1` (A1) before its fence F_A (A2); W's read of `E` is
//!    coherence-ordered before A's read, so F_W precedes F_A, hence F_R precedes F_A, and
//!    A's scan (A3) sees R's record as of P2 or later (R registered before A's scan:
//!    otherwise the registry lock orders F_A before F_R). While R is still pinned there it
//!    says `e <= E < E + 1` and A does not advance. So A advanced only after R unpinned
//!    (U1) or re-pinned later, and A's Acquire load read that Release store (U1, or P2 of
//!    a later pin), so everything R did with X happens-before A's advance (A4, Release),
//!    which happens-before the free: on A itself, or on the thread that reads the epoch
//!    with Acquire (every write of the epoch is a CAS, so a later value continues A4's
//!    release sequence).
//!
//! Hence a bag stamped `E` runs at `E + 2` after every reader that could reach its
//! objects has unpinned, and the reader's accesses happen-before the free. Pins are only
//! ever taken as [`Guard`]s and `Shared<'g, T>` borrows the guard, so safe code cannot use
//! a loaded pointer after unpinning. On x86 the pin's P2 and P3 are one `swap` with
//! `SeqCst` (a locked instruction is a full barrier, as `mfence` is, and cheaper); loom
//! and Miri check the portable store-and-fence.
//!
//! ## Locks
//! The registry lock and the orphan lock are leaf spinlocks, taken only on the rare paths
//! above; deferred functions run with neither held. A grace-period thread takes only the
//! registry lock, and holds the collector weakly (it exits when the collector goes). Deferred functions may pin, defer and
//! flush (bags are taken out before they run).

#[cfg(not(any(loom, miri)))]
mod advancer;
mod atomic;
mod deferred;
mod global;
mod local;

#[cfg(all(test, loom))]
mod loom_tests;
#[cfg(all(test, not(loom)))]
mod tests;

pub use atomic::{Atomic, Owned, Pointable, Pointer, Shared};
pub use global::Global;
pub use local::{Guard, LocalHandle, BAG_SIZE};

#[cfg(not(loom))]
mod default {
    use super::{Global, LocalHandle};
    use std::sync::{Arc, LazyLock};

    /// The process's collector.
    static COLLECTOR: LazyLock<Arc<Global>> = LazyLock::new(|| Arc::new(Global::new()));

    thread_local! {
        static HANDLE: LocalHandle = LocalHandle::register(&COLLECTOR);
    }

    /// Runs `f` with this thread's handle; during thread-local teardown, with a
    /// temporary one (whose state lives until the guards taken from it are dropped).
    #[inline]
    pub(super) fn with_handle<R>(f: impl FnOnce(&LocalHandle) -> R) -> R {
        let mut f = Some(f);
        HANDLE
            .try_with(|h| f.take().map(|f| f(h)))
            .ok()
            .flatten()
            .unwrap_or_else(|| match f.take() {
                Some(f) => f(&LocalHandle::register(&COLLECTOR)),
                None => unreachable!("the closure ran if the handle existed"),
            })
    }

    /// The process's collector (tests).
    #[cfg(test)]
    pub(super) fn collector() -> &'static Arc<Global> {
        &COLLECTOR
    }
}

/// Pins the current thread (see [`LocalHandle::pin`]).
#[cfg(not(loom))]
#[inline]
pub fn pin() -> Guard {
    default::with_handle(|h| h.pin())
}

/// A guard that pins nothing: loads through it are unprotected, and deferring through it
/// runs the function at once.
///
/// # Safety
/// Only where no other thread can free (or, for deferrals, still use) what is accessed,
/// e.g. in a destructor holding `&mut` to the whole structure.
pub unsafe fn unprotected() -> &'static Guard {
    local::UNPROTECTED.guard()
}

/// Whether the current thread is pinned.
#[cfg(not(loom))]
pub fn is_pinned() -> bool {
    default::with_handle(|h| h.is_pinned())
}

/// Seals this thread's open bag, tries to advance the epoch twice, and runs this thread's
/// expired bags and those exited threads left (see [`LocalHandle::flush`]).
#[cfg(not(loom))]
pub fn flush() {
    default::with_handle(|h| h.flush());
}

/// Waits for a full grace period (see [`LocalHandle::synchronize`]).
///
/// # Panics
/// If the current thread is pinned.
#[cfg(not(loom))]
pub fn synchronize() {
    default::with_handle(|h| h.synchronize());
}

/// Runs `free(data)` on this thread after a grace period that starts now; no pin needed
/// (see [`LocalHandle::defer_free`]).
///
/// # Safety
/// As for [`LocalHandle::defer_free`].
#[cfg(not(loom))]
pub unsafe fn defer_free(data: *mut (), free: unsafe fn(*mut ())) {
    // SAFETY: per our contract.
    default::with_handle(|h| unsafe { h.defer_free(data, free) });
}

/// Runs `f` on this thread after a grace period that starts now; no pin needed.
///
/// # Safety
/// As for [`Guard::defer_unchecked`].
#[cfg(not(loom))]
pub unsafe fn defer_fn<F: FnOnce()>(f: F) {
    // SAFETY: per our contract.
    default::with_handle(|h| unsafe { h.defer_fn(f) });
}

/// Deferred functions of this thread not yet run.
#[cfg(not(loom))]
pub fn pending_local() -> usize {
    default::with_handle(|h| h.pending())
}
