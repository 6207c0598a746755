//! # epoll (Linux's `fs/eventpoll.c`), with seed 003's refcounted teardown
//!
//! ## Objects
//!
//! - [`EpollContext`]: one per `Vfs`. Holds the nesting lock (Linux's `epnested_mutex`,
//!   taken only by `EPOLL_CTL_ADD` of an epoll into another), for the
//!   [`Locking::Legacy`] ablation the global release lock (Linux's old `epmutex`), and
//!   the optional allocation counters.
//! - [`EventPoll`]: the instance (`struct eventpoll`), always in an `Arc`. See "The
//!   context" below for what it keeps of its context.
//! - [`Epoll`]: the epoll *file*: what the open file description embeds. Dropping it is
//!   the file's last close (`ep_eventpoll_release` → `ep_clear_and_put`).
//! - `EpItem`: one watched (file, fd) (`struct epitem`). It is at once the wait-queue
//!   entry hooked on the target (`eppoll_entry` + `ep_poll_callback`), an entry of the
//!   target file's [`EpLinks`] (`file->f_ep`), of the instance's item map (the rbtree,
//!   keyed by [`FdKey`]), and maybe of its ready list.
//! - [`EpLinks`]: a file's list of items watching it. Watchable objects (pipe ends,
//!   eventfds, epolls) embed one; an empty one is a lock word and an unallocated `Vec`.
//!
//! ## Wiring into `Process` (for the fd-table owner)
//!
//! - The open file description embeds the file object: [`Epoll`],
//!   [`crate::pipe::PipeEnd`] or [`crate::eventfd::EventFd`]. Dropping it *is* the last
//!   close (each runs [`release_file_from_epoll`] and then its own release), so the OFD
//!   needs no extra field; its `Drop` (last `fput`) does the rest. Regular files need
//!   nothing: answer `poll` with [`crate::poll::RegularFile`] (always ready) and hand it
//!   to `ctl`, which returns `EPERM`. An owner-defined pollable must call
//!   [`release_file_from_epoll`] on its last close.
//! - `epoll_create1(flags)` → [`epoll_create1`] (`EPOLL_CLOEXEC` is the fd table's).
//! - `epoll_ctl(epfd, op, fd, ev)`: `EBADF` for bad fds, `EINVAL` if `epfd` is not an
//!   epoll (but `EPERM` first if `fd` is not pollable, as Linux); else
//!   `Epoll::ctl(&ctx, op, FdKey { file: <OFD identity>, fd }, &file.pollable(), ev)`
//!   with the `Vfs`'s context, while holding the target file. `EFAULT` for bad pointers
//!   is the embedder's.
//! - `epoll_wait/epoll_pwait(epfd, events, maxevents, timeout)` → [`Epoll::wait`] with a
//!   slice of `maxevents` (`maxevents <= 0` → pass an empty slice → `EINVAL`) and the
//!   process's cancel token (a pending signal); `epoll_pwait`'s mask is the embedder's.
//! - `pipe2(fds, flags)` → [`crate::pipe::pipe2`]; `read`/`write` → `PipeEnd::read/write`;
//!   `F_SETFL(O_NONBLOCK)` → `set_nonblock`; `F_GETPIPE_SZ`/`F_SETPIPE_SZ` →
//!   `pipe_size`/`set_pipe_size(arg, has CAP_SYS_RESOURCE)`.
//! - `eventfd2(initval, flags)` → [`crate::eventfd::EventFd::new`].
//! - `poll`/`ppoll` → [`crate::poll::poll`] with a [`crate::poll::PollTarget`] per fd.
//!
//! ## The context
//!
//! An instance of the scalable design keeps no counted reference to its
//! [`EpollContext`]: a count there would be one cache line written by every
//! `epoll_create1` and every last close of an epoll in the whole `Vfs`. It keeps the
//! design (`locking`, by value) and the context's identity (`context_id`, a number never
//! reused, only compared); [`Epoll::ctl`] takes the context from its caller, the layer
//! that owns it (the `Vfs`), and needs it only for the nesting lock of an `EPOLL_CTL_ADD`
//! of an epoll into an epoll. That call first checks that both instances belong to the
//! context it was given (`EINVAL` otherwise; Linux has a single context, so no such
//! error), so every epoll-to-epoll edge joins two instances of one context and one
//! nesting lock serializes every insertion that could link them, as `epnested_mutex`
//! does. The legacy ablation (whose release paths take the context's `epmutex`) and the
//! accounting mode (whose instances and items count their frees in the context) hold an
//! `Arc` of the context in each instance (`counted_ctx`), as before.
//!
//! ## References and teardown (seed 003)
//!
//! The instance is reference counted by its `Arc`: the [`Epoll`] file holds one
//! reference, and its items together hold one more (Linux: every epitem holds one on
//! `ep->refcount`). Nothing else keeps one beyond a call. The items' reference is made
//! with the instance and counted by `item_refs`, a
//! [`PcpuCount`](scalevfs_primitives::percpu_count): an item is counted at its insertion
//! and uncounted when its memory goes (`EpItem`'s `Drop`). The epoll file's last close,
//! after `clear`, *kills* the count; whoever then brings it to zero (the close itself if
//! no item is left, else the last item) releases the items' reference. Its `item.ep` is
//! a handle that owns no count of its own: it stays valid while the item is counted.
//! Why not a count per item, as Linux: every `EPOLL_CTL_ADD` and every removal would
//! write the instance's one count, and threads sharing an instance met on that line on
//! every operation. On the 2-vCPU VM (three runs of each alternated, 7 repeats)
//! `epoll-churn-shared` ran at 1.81-2.86M ops/s at 64 threads with one count and at
//! 2.49-2.72M with this one, 1.92-2.84M and 2.62-2.78M at 4; at 2 threads both stay
//! bimodal (1.4-2.5M). `epoll-churn` (an instance per thread) did not change. Once
//! threads meet on the ready lists (the instance is sharded, `ready.rs`) the count is
//! per CPU; before that, and always in the legacy ablation, it is one atomic word.
//!
//! Two release paths, neither taking a global lock:
//!
//! - *watched file's last close* → [`release_file_from_epoll`] (`eventpoll_release_file`):
//!   repeatedly, under the file's link lock, take the first item and set its `dying`
//!   flag; unlock; lock the item's shard of its instance's map and remove the item for good (`force`);
//!   drop it, which uncounts it from its instance's items.
//! - *epoll file's last close* → `clear_and_put`: shard by shard, remove every item whose
//!   `dying` flag (checked under the target's link lock) is clear; a dying item is left
//!   in the map for the first path to finish; then drop the file's reference.
//!
//! The `dying` flag is what makes the two paths safe without a common lock: an item is
//! removed by exactly one of them (the flag is set and tested under the same link lock,
//! and the removal from the link list happens in that same critical section), and
//! whichever drops the last `Arc` (the file's, the items', or a walker's clone) frees
//! the instance, on whatever thread that is.
//!
//! ## Why every pointer a walker follows stays valid (the 2026 use-after-free)
//!
//! When the release paths stopped taking `epmutex`, code that walked the epoll graph
//! while relying on that mutex to keep instances alive (the nested-epoll depth and loop
//! checks) could follow an `epitem->ep` into a freed instance. Here no walker follows a
//! raw pointer: every hop is an `Arc` clone taken under the lock that protects the
//! container it comes from (an instance's map under its shard locks; a file's links under the
//! link lock; the ready list under the ready lock), and the lock is dropped only after
//! the clone exists. A concurrent release may unlink an item or drop its own references
//! meanwhile, but the memory the walker holds stays valid until its clone drops, and it
//! reads at worst a stale graph (which only over-counts depth: the checks stay
//! conservative). The item↔instance and item↔target reference cycles are broken
//! explicitly by removal; the leak tests count every allocation and free.
//!
//! ## Locks (lock order top to bottom)
//!
//! | lock | protects |
//! |---|---|
//! | `EpollContext::nested` | insertions of an epoll into an epoll (loop/depth check) |
//! | `EpollContext::legacy` | legacy ablation only: both release paths |
//! | `EventPoll` item-map shard locks (`items.rs`; one at a time) | that shard's part of the item map |
//! | a ready shard's `scan` (`ready.rs`; outer instance before inner; one shard at a time) | one scan of that shard at a time; its items' `events`/`data` changes (`EPOLL_CTL_MOD`) |
//! | target `EpLinks` lock | the target's item list and each item's `dying` flag |
//! | target `WaitQueue` lock | the target's hooked items; callbacks run under it |
//! | a ready shard's `ready` (`ready.rs`) | that shard's ready and overflow lists, its items' `linked`/`on_ovf`/`removed` flags |
//! | `EventPoll::wq` lock | sleeping `epoll_wait` callers (exclusive, wake one) |
//!
//! A callback (target queue lock held) takes its item's ready-shard lock and, only if a
//! waiter is queued (`WaitQueue::has_waiters`), the `wq` lock; it releases them, then wakes the instance's `poll_wait` (outer instances watching
//! this one), whose callbacks take the outer instances' locks: lock chains follow the
//! nesting, which the loop check keeps acyclic and at most [`EP_MAX_NESTS`] deep.
//!
//! ## Scans and the overflow list
//!
//! The ready list is split into per-CPU shards once two threads meet on it (`ready.rs`:
//! an instance used by one thread at a time keeps one shard and Linux's exact order).
//! Per shard, `epoll_wait` (`ep_send_events`) takes `scan`, moves the ready list out (`scanning`),
//! and polls each item without the ready lock, as Linux does with `ovflist`: callbacks
//! arriving during the scan go to the overflow list; at the end the undelivered items,
//! then the overflow items not already linked, then the level-triggered re-queues form
//! the new ready list (Linux's order). `EPOLLONESHOT` disarms an item after delivery
//! (`events &= EP_PRIVATE_BITS`) until `EPOLL_CTL_MOD`.
//!
//! Registration and scans (a shared instance): `EPOLL_CTL_ADD`, `EPOLL_CTL_DEL` and the
//! watched file's last close take only the key's shard lock, so threads adding and
//! removing different descriptors neither wait for each other nor for a scan. An item
//! added during a scan joins the ready list, not the scan. An item removed during a scan
//! is flagged `removed` under the ready lock and unlinked from the ready and overflow
//! lists; the scan drops it from its private list instead of re-queueing it, and skips
//! it if it has not reached it yet. `EPOLL_CTL_MOD` takes `scan` (see `modify`).
//!
//! ## Memory orderings
//!
//! `EPOLL_CTL_MOD` stores the new `events` and then polls the target; a waker changes the
//! target's state and then (in the callback) loads `events`. That store-buffer pattern
//! needs both sides sequentially consistent: `events` is stored and loaded with `SeqCst`
//! and eventfd's counter likewise (pipes and nested epolls order it through their locks).
//! Every other flag is read and written under the lock named in the table (Relaxed),
//! except that a scan also reads `removed` without the ready lock, as a hint (it checks
//! it again under the lock before re-queueing).
//!
//! ## Differences from Linux
//!
//! - No `reverse_path_check` (the 1000/500/100/50/10 wakeup-path limits, `EINVAL`), no
//!   `max_user_watches` (`ENOSPC`), no busy polling; `EPOLLWAKEUP` is cleared silently
//!   (Linux does so without `CAP_BLOCK_SUSPEND`).
//! - The depth check is Linux 6.x's (ELOOP when a chain would exceed five epolls, counted
//!   both below the target and above the instance); it runs only when the target is an
//!   epoll (Linux also takes `epnested_mutex` when the instance itself is watched, for the
//!   path check we do not do).
//! - A cancelled `epoll_wait` returns `EINTR` (signals are the embedder's).
//! - Once an instance is sharded (two threads met on its ready list), `epoll_wait` returns
//!   the events of the first shard that has any, from its own CPU's on (one wait in 32
//!   also those of one more), and may leave events of other shards for a later wait
//!   where Linux returns every ready event up to `maxevents`; the order across shards is
//!   not the ready order (`ready.rs`).
//! - Linux's `EPOLL_CTL_ADD`/`DEL` wait for a running scan (`ep->mtx`); ours do not, so
//!   an `epoll_wait` may return an event of a descriptor whose `EPOLL_CTL_DEL` (or last
//!   close) returned while the wait ran, as if the wait had collected it just before. It
//!   never returns one for a descriptor removed before the wait began.

#[cfg(test)]
mod context_tests;
mod file;
mod items;
mod nesting;
mod ready;
#[cfg(test)]
mod shuttle_tests;
#[cfg(test)]
mod stress;
#[cfg(test)]
mod tests;

use std::mem::ManuallyDrop;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Weak};
use std::task::Waker;

use crossbeam_utils::CachePadded;
use scalevfs_primitives::percpu_count::PcpuCount;
use scalevfs_primitives::Locking;

use crate::cancel::CancelToken;
use crate::locks::sync::{ClassedMutex, Mutex};
use crate::poll::events::*;
use crate::poll::{
    deadline_from_ms, park_once, Pollable, ThreadWaiter, WaitEntry, WaitError, WaitQueue,
};
use crate::Errno;
pub use file::{epoll_create1, Epoll};
use items::{ItemMap, Shard};
use ready::ReadyShards;

/// `epoll_ctl`: add a file.
pub const EPOLL_CTL_ADD: i32 = 1;
/// `epoll_ctl`: remove a file.
pub const EPOLL_CTL_DEL: i32 = 2;
/// `epoll_ctl`: change a file's events and data.
pub const EPOLL_CTL_MOD: i32 = 3;
/// `epoll_create1`: close the instance on `exec`.
pub const EPOLL_CLOEXEC: i32 = libc::EPOLL_CLOEXEC;
/// Linux's `EP_MAX_NESTS`: at most this many epoll-to-epoll edges in a chain.
pub const EP_MAX_NESTS: usize = 4;
/// Bits that configure an item rather than name events.
const EP_PRIVATE_BITS: u32 = EPOLLWAKEUP | EPOLLONESHOT | EPOLLET | EPOLLEXCLUSIVE;
/// The only bits allowed with `EPOLLEXCLUSIVE`.
const EPOLLEXCLUSIVE_OK_BITS: u32 =
    EPOLLIN | EPOLLOUT | EPOLLERR | EPOLLHUP | EPOLLWAKEUP | EPOLLET | EPOLLEXCLUSIVE;

/// `struct epoll_event` (unpacked; the embedder converts).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct EpollEvent {
    /// `EPOLL*` event bits.
    pub events: u32,
    /// The caller's data, returned with the events.
    pub data: u64,
}

impl EpollEvent {
    /// An event of `events` carrying `data`.
    pub fn new(events: u32, data: u64) -> Self {
        EpollEvent { events, data }
    }
}

/// Identifies a registration, as Linux's `epoll_filefd`: the open file description
/// (any stable identity, e.g. `Arc::as_ptr` of it as `usize`) and the fd number.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct FdKey {
    /// The open file description's identity.
    pub file: usize,
    /// The descriptor number.
    pub fd: i32,
}

/// Allocation counters for leak tests (off by default: counting would share a cache
/// line between all threads).
#[derive(Default, Debug)]
pub struct Accounting {
    /// Epoll instances created.
    pub instances_allocated: AtomicUsize,
    /// Epoll instances freed.
    pub instances_freed: AtomicUsize,
    /// Items (watched files) created.
    pub items_allocated: AtomicUsize,
    /// Items freed.
    pub items_freed: AtomicUsize,
}

impl Accounting {
    /// `(live instances, live items)`.
    pub fn live(&self) -> (usize, usize) {
        // Relaxed: read after the threads that counted were joined.
        let l = |a: &AtomicUsize, f: &AtomicUsize| {
            a.load(Ordering::Relaxed) - f.load(Ordering::Relaxed)
        };
        (
            l(&self.instances_allocated, &self.instances_freed),
            l(&self.items_allocated, &self.items_freed),
        )
    }
}

/// Per-`Vfs` epoll state. See the module docs.
pub struct EpollContext {
    locking: Locking,
    /// Never reused: the instances made in this context carry it (`EventPoll::context_id`).
    id: u64,
    acct: Option<Accounting>,
    /// `epnested_mutex`. On its own cache line: every `epoll_create1` reads the fields
    /// above, and only epoll-in-epoll insertions write this one.
    nested: CachePadded<ClassedMutex<()>>,
    /// Legacy ablation: the old `epmutex` on both release paths.
    legacy: ClassedMutex<()>,
}

/// The next [`EpollContext::id`] (a context is made once per `Vfs`).
static NEXT_CONTEXT_ID: AtomicU64 = AtomicU64::new(1);

impl EpollContext {
    /// A context of design `locking`.
    pub fn new(locking: Locking) -> Arc<Self> {
        Self::build(locking, None)
    }

    /// A context that counts allocations and frees of instances and items.
    pub fn with_accounting(locking: Locking) -> Arc<Self> {
        Self::build(locking, Some(Accounting::default()))
    }

    fn build(locking: Locking, acct: Option<Accounting>) -> Arc<Self> {
        Arc::new(EpollContext {
            locking,
            // Relaxed: only uniqueness matters, which the atomic add gives.
            id: NEXT_CONTEXT_ID.fetch_add(1, Ordering::Relaxed),
            acct,
            nested: CachePadded::new(ClassedMutex::with_class(
                (),
                &crate::lockclass::EPNESTED_MUTEX,
            )),
            legacy: ClassedMutex::with_class((), &crate::lockclass::EPMUTEX),
        })
    }

    /// The design it was built with.
    pub fn locking(&self) -> Locking {
        self.locking
    }

    /// The allocation counters, if enabled.
    pub fn accounting(&self) -> Option<&Accounting> {
        self.acct.as_ref()
    }
}

/// A file's epoll links (`file->f_ep`). See the module docs.
pub struct EpLinks {
    items: Mutex<Vec<Arc<EpItem>>>,
}

impl Default for EpLinks {
    fn default() -> Self {
        Self::new()
    }
}

impl EpLinks {
    /// No items.
    pub fn new() -> Self {
        EpLinks {
            items: Mutex::new(Vec::new()),
        }
    }

    /// How many epoll items watch this file.
    pub fn len(&self) -> usize {
        self.items.lock().len()
    }

    /// Whether no epoll item watches this file.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// One registration (`struct epitem`).
pub struct EpItem {
    /// Its instance. Not a count of its own: the item is counted in the instance's
    /// `item_refs`, and the items together hold one reference (module docs, "References
    /// and teardown"); this handle is dropped only by the item that releases that one.
    ep: ManuallyDrop<Arc<EventPoll>>,
    me: Weak<EpItem>,
    key: FdKey,
    target: Arc<dyn Pollable>,
    /// Requested events plus private bits; written under its shard's scan lock (and at insertion),
    /// read by callbacks.
    events: AtomicU32,
    /// Written under its shard's scan lock (and at insertion).
    data: AtomicU64,
    /// Set under the target's link lock by the file-release path.
    dying: AtomicBool,
    /// On the ready list or a scan's list (ready lock; the scanner during its scan).
    linked: AtomicBool,
    /// On the overflow list (ready lock).
    on_ovf: AtomicBool,
    /// Removed from its instance (set under the ready lock): a scan that has it in its
    /// private list drops it instead of delivering or re-queueing it.
    removed: AtomicBool,
    /// Its ready-list shard (`ready.rs`), fixed at registration.
    shard: u16,
}

impl Drop for EpItem {
    fn drop(&mut self) {
        if let Some(a) = self.ep.accounting() {
            a.items_freed.fetch_add(1, Ordering::Relaxed);
        }
        if self.ep.item_refs.put() {
            // SAFETY: the last item after the epoll file let go (`PcpuCount::put`): the
            // items' reference, made in `EventPoll::new`, is released here, once, through
            // this handle, which is not used again.
            unsafe { ManuallyDrop::drop(&mut self.ep) }
        }
    }
}

fn same_item(a: &Arc<EpItem>, b: &Arc<EpItem>) -> bool {
    Arc::ptr_eq(a, b)
}

impl EpItem {
    fn entry(self: &Arc<Self>) -> Arc<dyn WaitEntry> {
        self.clone()
    }
    fn links(&self) -> &EpLinks {
        self.target
            .ep_links()
            .expect("ctl admits only targets with links")
    }
    fn queue(&self) -> &WaitQueue {
        self.target
            .wait_queue()
            .expect("ctl admits only targets with a queue")
    }
}

impl WaitEntry for EpItem {
    /// `ep_poll_callback`.
    fn wake(&self, key: u32) -> bool {
        let ep = &*self.ep;
        // SeqCst: pairs with the SeqCst store in `modify` (see the module docs).
        let events = self.events.load(Ordering::SeqCst);
        let exclusive = events & EPOLLEXCLUSIVE != 0;
        if events & !EP_PRIVATE_BITS == 0 || (key != 0 && key & events == 0) {
            return !exclusive;
        }
        let mut ewake = false;
        {
            let mut r = ep.ready.lock_ready_of(self);
            let me = self.me.upgrade().expect("a queued item is alive");
            if r.scanning {
                if !self.on_ovf.swap(true, Ordering::Relaxed) {
                    r.ovf.push(me);
                }
            } else if !self.linked.swap(true, Ordering::Relaxed) {
                r.rdllist.push_back(me);
            }
            // Under the shard's ready lock, which a sleeper takes after queueing itself
            // (`WaitQueue::has_waiters`'s contract): no `wq` lock when nobody sleeps.
            if ep.wq.has_waiters() {
                let mut wq = ep.wq.lock();
                if exclusive {
                    ewake = match key & (EPOLLIN | EPOLLOUT) {
                        EPOLLIN => events & EPOLLIN != 0,
                        EPOLLOUT => events & EPOLLOUT != 0,
                        0 => true,
                        _ => false,
                    };
                }
                wq.wake(0);
            }
        }
        // A poller of this epoll file queues itself, then polls it (`poll_any`), which
        // takes this shard's ready lock: `has_waiters`'s contract holds.
        ep.poll_wait.wake_if_waiters(EPOLLIN);
        ewake || !exclusive
    }
}

/// An epoll instance (`struct eventpoll`). See the module docs.
pub struct EventPoll {
    /// The design of its context (module docs, "The context").
    locking: Locking,
    /// Its context's `id`: `ctl` checks the context it is given against it.
    context_id: u64,
    /// Its context, held only by the legacy ablation and in accounting mode (a count
    /// every instance of the `Vfs` would write otherwise).
    counted_ctx: Option<Arc<EpollContext>>,
    /// The items, sharded by key (`items.rs`).
    items: ItemMap,
    /// The ready lists, each with its scan lock (`ready.rs`; Linux's `ep->rdllist`,
    /// `ep->ovflist`, and `ep->mtx` as the scans use it).
    ready: ReadyShards,
    /// `epoll_wait` sleepers.
    wq: WaitQueue,
    /// Pollers of this epoll file.
    poll_wait: WaitQueue,
    /// Items watching this epoll file (`ep->refs`).
    links: EpLinks,
    /// Counts this instance's items, which together hold one reference on it (module
    /// docs, "References and teardown"); per CPU once threads meet on the ready lists.
    item_refs: PcpuCount,
}

impl Drop for EventPoll {
    fn drop(&mut self) {
        if let Some(a) = self.accounting() {
            a.instances_freed.fetch_add(1, Ordering::Relaxed);
        }
    }
}

impl Pollable for EventPoll {
    /// `ep_eventpoll_poll`: readable when an item on the ready list really is ready;
    /// items found not ready are dropped from the list, as in Linux.
    fn poll(&self) -> u32 {
        if self.ready.poll_any(self) {
            EPOLLIN | EPOLLRDNORM
        } else {
            0
        }
    }
    fn wait_queue(&self) -> Option<&WaitQueue> {
        Some(&self.poll_wait)
    }
    fn ep_links(&self) -> Option<&EpLinks> {
        Some(&self.links)
    }
    fn as_epoll(&self) -> Option<&EventPoll> {
        Some(self)
    }
}

impl EventPoll {
    fn new(ctx: &Arc<EpollContext>) -> Arc<Self> {
        if let Some(a) = &ctx.acct {
            a.instances_allocated.fetch_add(1, Ordering::Relaxed);
        }
        let counted = ctx.locking == Locking::Legacy || ctx.acct.is_some();
        let ep = Arc::new(EventPoll {
            locking: ctx.locking,
            context_id: ctx.id,
            counted_ctx: counted.then(|| ctx.clone()),
            items: ItemMap::new(ctx.locking),
            ready: ReadyShards::new(ctx.locking),
            wq: WaitQueue::new(),
            poll_wait: WaitQueue::new(),
            links: EpLinks::new(),
            item_refs: PcpuCount::new(),
        });
        // The items' reference: released by `Epoll::drop` if no item is left then, else
        // by the last item (`PcpuCount`).
        std::mem::forget(Arc::clone(&ep));
        ep
    }

    /// Whether `ctx` is the context this instance was made in.
    fn belongs_to(&self, ctx: &EpollContext) -> bool {
        self.context_id == ctx.id
    }

    /// The allocation counters of its context, if enabled.
    fn accounting(&self) -> Option<&Accounting> {
        self.counted_ctx.as_ref().and_then(|c| c.acct.as_ref())
    }

    /// The legacy ablation's release lock (`epmutex`); `None` in the scalable design.
    fn legacy_release_lock(&self) -> Option<&ClassedMutex<()>> {
        match (self.locking, &self.counted_ctx) {
            (Locking::Legacy, Some(c)) => Some(&c.legacy),
            _ => None,
        }
    }

    /// Whether a ready list may hold events (hints: see `ready.rs`).
    fn events_available(&self) -> bool {
        self.ready.any_busy()
    }

    /// Links `item` on the ready list if it is not, and wakes (`ep_insert`/`ep_modify`).
    fn make_ready(&self, item: &Arc<EpItem>) {
        let mut woke = false;
        {
            let mut r = self.ready.lock_ready_of(item);
            if !item.linked.swap(true, Ordering::Relaxed) {
                r.rdllist.push_back(item.clone());
                // Under the shard's ready lock: `has_waiters`'s contract (see `wake`).
                self.wq.wake_if_waiters(0);
                woke = true;
            }
        }
        if woke {
            self.poll_wait.wake_if_waiters(EPOLLIN);
        }
    }

    /// `ep_send_events`: fills `out` from the ready lists (`ready.rs`).
    fn send_events(&self, out: &mut [EpollEvent]) -> usize {
        self.ready.send_events(self, out)
    }

    /// `__ep_remove`; caller holds the item's shard lock (passed as `map`). Returns
    /// false (and does nothing) for a dying item unless `force`. A scan running now may
    /// hold the item in its private list: the `removed` flag makes it drop the item.
    fn remove_item(&self, map: &mut Shard, item: &Arc<EpItem>, force: bool) -> bool {
        {
            let mut l = item.links().items.lock();
            if item.dying.load(Ordering::Relaxed) && !force {
                return false;
            }
            if let Some(i) = l.iter().position(|x| same_item(x, item)) {
                l.swap_remove(i);
            }
        }
        // After this no callback of the item runs (they run under the queue lock).
        item.queue().remove(&item.entry());
        {
            let mut r = self.ready.lock_ready_of(item);
            item.removed.store(true, Ordering::Relaxed);
            if item.linked.swap(false, Ordering::Relaxed) {
                r.rdllist.retain(|x| !same_item(x, item));
            }
            if item.on_ovf.swap(false, Ordering::Relaxed) {
                r.ovf.retain(|x| !same_item(x, item));
            }
        }
        map.remove(&item.key);
        true
    }

    /// `ep_insert`; caller holds the key's shard lock.
    fn insert(
        self: &Arc<Self>,
        map: &mut Shard,
        key: FdKey,
        target: &Arc<dyn Pollable>,
        ev: EpollEvent,
    ) {
        if let Some(a) = self.accounting() {
            a.items_allocated.fetch_add(1, Ordering::Relaxed);
        }
        if self.locking == Locking::Scalable && self.ready.live() > 1 {
            // Threads meet on this instance: count its items per CPU.
            self.item_refs.spread();
        }
        // Before the epoll file's last close (the caller holds it): a get after the kill
        // is impossible.
        self.item_refs.get();
        // SAFETY: a handle that owns no count of its own (the items' reference stands
        // behind it while the item is counted); `EpItem::drop` never drops it but to
        // release that reference.
        let ep = ManuallyDrop::new(unsafe { Arc::from_raw(Arc::as_ptr(self)) });
        let item = Arc::new_cyclic(|me| EpItem {
            ep,
            me: me.clone(),
            key,
            target: target.clone(),
            events: AtomicU32::new(ev.events),
            data: AtomicU64::new(ev.data),
            dying: AtomicBool::new(false),
            linked: AtomicBool::new(false),
            on_ovf: AtomicBool::new(false),
            removed: AtomicBool::new(false),
            shard: self.ready.shard_for_new_item(),
        });
        item.links().items.lock().push(item.clone());
        map.insert(key, item.clone());
        item.queue()
            .add(item.entry(), ev.events & EPOLLEXCLUSIVE != 0);
        if target.poll() & ev.events != 0 {
            self.make_ready(&item);
        }
    }

    /// `ep_modify`; caller holds the item's shard lock. Excludes scans, so that a scan
    /// never delivers the old `data` with the new events nor disarms (`EPOLLONESHOT`)
    /// what this call re-arms.
    fn modify(&self, item: &Arc<EpItem>, ev: EpollEvent) {
        let _scan = self.ready.lock_scan_of(item);
        item.data.store(ev.data, Ordering::Relaxed);
        // SeqCst: pairs with the SeqCst load in the callback (module docs).
        item.events.store(ev.events, Ordering::SeqCst);
        if item.target.poll() & ev.events != 0 {
            self.make_ready(item);
        }
    }

    /// `ep_clear_and_put` minus the put (the caller drops its `Arc`).
    fn clear(&self) {
        let _legacy = self.legacy_release_lock().map(ClassedMutex::lock);
        self.poll_wait.wake(0);
        self.items.for_each_shard(|map| {
            let all: Vec<Arc<EpItem>> = map.values().cloned().collect();
            for it in &all {
                self.remove_item(map, it, false);
            }
        });
    }
}

/// Removes `file` from every epoll instance watching it: call on the file's last close
/// (before the file's own release), as Linux's `eventpoll_release`. Takes no global lock
/// (except in the legacy ablation).
pub fn release_file_from_epoll(file: &dyn Pollable) {
    let Some(links) = file.ep_links() else { return };
    let legacy_ctx = {
        let l = links.items.lock();
        match l.first() {
            None => return,
            Some(it) if it.ep.locking == Locking::Legacy => it.ep.counted_ctx.clone(),
            Some(_) => None,
        }
    };
    let _legacy = legacy_ctx.as_ref().map(|c| c.legacy.lock());
    loop {
        let item = {
            let l = links.items.lock();
            let Some(it) = l.first() else { break };
            // Under the link lock: `clear` of the instance now skips this item.
            it.dying.store(true, Ordering::Relaxed);
            it.clone()
        };
        {
            let ep = &item.ep;
            let mut map = ep.items.lock(&item.key);
            ep.remove_item(&mut map, &item, true);
        }
        // Dropping the item uncounts it from its instance; if it was the last item after
        // the epoll file's last close, the instance is freed here.
        drop(item);
    }
}
