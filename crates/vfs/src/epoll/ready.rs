//! An epoll instance's ready lists (Linux's `ep->rdllist` and `ep->ovflist`), split into
//! per-CPU shards once threads meet on the instance.
//!
//! ## Shards
//!
//! An instance starts with one shard: every item is readied on it and every scan takes
//! it, so a program that uses the instance from one thread at a time sees Linux's exact
//! order (ready order, level-triggered items re-queued at the end). The first time a
//! thread finds a shard's ready lock or scan lock held by another thread (`try_lock`
//! fails), the instance becomes *sharded*: the other shards are allocated (one per CPU,
//! as the item map's, one in the legacy design, which never shards) and items
//! registered from then on belong to the shard of the CPU that registers them. Items
//! keep their shard for life, so each item is on at most one shard's lists.
//!
//! A thread that registers its own descriptors, signals them and waits for them (a
//! connection per thread sharing one instance) then takes only its own CPU's locks: the
//! callback locks the item's shard, and a wait scans its own CPU's shard first.
//!
//! ## What a wait collects
//!
//! `epoll_wait` scans its own CPU's shard, then the shards after it in order until it
//! has found an event or looked at them all; it skips a shard whose `busy` flag is
//! clear without taking its locks. One wait in [`EXTRA_SCAN_EVERY`] (32) that has found
//! an event also scans one more busy shard, chosen by a per-thread rotation, so that a
//! shard whose CPU runs no waiter is still emptied by the others' waits (within 32 waits
//! per shard of any one thread) while every wait finds events of its own. It returns at
//! most `maxevents` events, as Linux, but (sharded only) it may leave events of shards it
//! did not look at for a later wait, where Linux would return every ready event up to
//! `maxevents`.
//!
//! Why not every wait: where each thread signals and waits for its own descriptors (a
//! connection per thread), the extra scan mostly finds the other thread's event between
//! its signal and its wait, takes that shard's locks, and returns the event to the wrong
//! thread, whose own wait then finds nothing and scans every shard in turn. On the
//! 2-vCPU VM `epoll-churn-shared` (two alternated runs, one binary) kept 0.52x and 0.56x
//! of its best at fewer threads with an extra scan on every wait (bimodal repeats,
//! 1.0-1.3M ops/s at 2, 16 and 64 threads in the slow ones), 0.70-0.75x with one in 8,
//! and 0.99-1.01x with one in 32 (2.5M at 2 threads, 2.7M at 64).
//!
//! ## Locks
//!
//! Per shard, outer before inner: `scan` (one scan of this shard at a time, and
//! `EPOLL_CTL_MOD` of its items against them), then `ready` (the lists, `scanning`, and
//! the items' `linked`/`on_ovf`/`removed` flags). A thread holds one shard's locks at a
//! time. `busy` is written under `ready` and read without it as a hint: it is set
//! whenever the lists are non-empty or a scan runs, so a clear flag read after an event
//! was readied (happens-before) cannot be stale; a wait about to sleep checks each shard
//! under its `ready` lock instead (see the wait in `file.rs`).

use std::cell::Cell;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

use crossbeam_utils::CachePadded;
use scalevfs_primitives::Locking;

use super::{EpItem, EpollEvent, EventPoll, EPOLLET, EPOLLONESHOT, EP_PRIVATE_BITS};
use crate::locks::sync::{self, ClassedGuard, ClassedMutex};

/// One shard's lists (under its `ready` lock).
#[derive(Default)]
pub(super) struct Ready {
    pub(super) rdllist: VecDeque<Arc<EpItem>>,
    /// A scan is running (`ovflist != EP_UNACTIVE_PTR`).
    pub(super) scanning: bool,
    pub(super) ovf: Vec<Arc<EpItem>>,
}

/// One shard: see the module docs.
pub(super) struct ReadyShard {
    scan: ClassedMutex<()>,
    ready: ClassedMutex<Ready>,
    /// The lists are non-empty or a scan runs (written under `ready`).
    busy: AtomicBool,
}

/// The guard of a shard's `ready` lock, which keeps `busy` in step with the lists when
/// it drops.
pub(super) struct ReadyGuard<'a> {
    g: ClassedGuard<'a, Ready>,
    busy: &'a AtomicBool,
}

impl std::ops::Deref for ReadyGuard<'_> {
    type Target = Ready;
    fn deref(&self) -> &Ready {
        &self.g
    }
}

impl std::ops::DerefMut for ReadyGuard<'_> {
    fn deref_mut(&mut self) -> &mut Ready {
        &mut self.g
    }
}

impl Drop for ReadyGuard<'_> {
    fn drop(&mut self) {
        let busy = !self.g.rdllist.is_empty() || self.g.scanning || !self.g.ovf.is_empty();
        // Relaxed: a hint, written under the lock (module docs); stored only on a change,
        // so a shard that stays busy does not write the line again.
        if self.busy.load(Ordering::Relaxed) != busy {
            self.busy.store(busy, Ordering::Relaxed);
        }
    }
}

/// Locks `m`, setting `met` if another thread held it.
fn lock_noting_contention<'a, T>(m: &'a ClassedMutex<T>, met: &mut bool) -> ClassedGuard<'a, T> {
    match m.try_lock() {
        Some(g) => g,
        None => {
            *met = true;
            m.lock()
        }
    }
}

/// An instance's shards: see the module docs.
pub(super) struct ReadyShards {
    first: CachePadded<ReadyShard>,
    /// Shards 1.. once the instance is sharded.
    rest: OnceLock<Box<[CachePadded<ReadyShard>]>>,
    /// How many shards a sharded instance has (1: never shards).
    count: usize,
}

impl ReadyShards {
    pub(super) fn new(locking: Locking) -> Self {
        ReadyShards {
            first: CachePadded::new(ReadyShard::default()),
            rest: OnceLock::new(),
            count: match locking {
                Locking::Legacy => 1,
                Locking::Scalable => super::items::shard_count(),
            },
        }
    }

    fn get(&self, i: usize) -> &ReadyShard {
        match i {
            0 => &self.first,
            _ => &self.rest.get().expect("a shard past 0 exists once sharded")[i - 1],
        }
    }

    /// The shards that exist now (one, or all once sharded).
    pub(super) fn live(&self) -> usize {
        if self.rest.get().is_some() {
            self.count
        } else {
            1
        }
    }

    /// Shards the instance: called when a thread found another on a shard's lock.
    pub(super) fn met(&self) {
        if self.count > 1 && self.rest.get().is_none() {
            self.rest.get_or_init(|| {
                (1..self.count)
                    .map(|_| CachePadded::new(ReadyShard::default()))
                    .collect()
            });
        }
    }

    /// The shard an item registered now belongs to: the calling CPU's once sharded.
    pub(super) fn shard_for_new_item(&self) -> u16 {
        match self.live() {
            1 => 0,
            n => this_cpu_shard(n) as u16,
        }
    }

    /// Locks `item`'s shard's lists (noting contention: the callback's path).
    pub(super) fn lock_ready_of(&self, item: &EpItem) -> ReadyGuard<'_> {
        let s = self.get(item.shard as usize);
        let mut met = false;
        let g = lock_noting_contention(&s.ready, &mut met);
        if met {
            self.met();
        }
        ReadyGuard { g, busy: &s.busy }
    }

    /// Locks `item`'s shard's scan lock (`EPOLL_CTL_MOD`).
    pub(super) fn lock_scan_of(&self, item: &EpItem) -> ClassedGuard<'_, ()> {
        self.get(item.shard as usize).scan.lock()
    }

    /// Whether any shard may hold events (hints; see the module docs).
    pub(super) fn any_busy(&self) -> bool {
        // Relaxed: hints (module docs).
        (0..self.live()).any(|i| self.get(i).busy.load(Ordering::Relaxed))
    }

    /// Whether any shard holds events or runs a scan, checked under each `ready` lock in
    /// turn (a sleeper's last check, after it queued itself on `ep.wq`).
    pub(super) fn any_ready_locked(&self) -> bool {
        (0..self.live()).any(|i| {
            let r = self.get(i).ready.lock();
            !r.rdllist.is_empty() || r.scanning
        })
    }

    /// `ep_eventpoll_poll`'s check, shard by shard: whether an item on a ready list
    /// really is ready; items found not ready are dropped from the list, as in Linux.
    pub(super) fn poll_any(&self, ep: &EventPoll) -> bool {
        (0..self.live()).any(|i| {
            let s = self.get(i);
            let _m = s.scan.lock();
            let mut tx = s.start_scan();
            let mut found = false;
            while let Some(item) = tx.front() {
                if item.target.poll() & item.events.load(Ordering::SeqCst) != 0 {
                    found = true;
                    break;
                }
                item.linked.store(false, Ordering::Relaxed);
                tx.pop_front();
            }
            if s.done_scan(tx) {
                ep.wq.wake_if_waiters(0);
            }
            found
        })
    }

    /// `ep_send_events` over the shards (module docs): fills `out`, returns how many.
    pub(super) fn send_events(&self, ep: &EventPoll, out: &mut [EpollEvent]) -> usize {
        let n = self.live();
        if n == 1 {
            return self.send_from(ep, 0, out);
        }
        let own = this_cpu_shard(n);
        for k in 0..n {
            let found = self.send_from(ep, (own + k) % n, out);
            if found > 0 {
                // Sometimes one more shard, by this thread's rotation (module docs).
                return match extra_shard(n, own) {
                    Some(extra) => found + self.send_from(ep, extra, &mut out[found..]),
                    None => found,
                };
            }
        }
        0
    }

    fn send_from(&self, ep: &EventPoll, i: usize, out: &mut [EpollEvent]) -> usize {
        let s = self.get(i);
        // Relaxed: a hint (module docs); a wait that finds nothing checks under the lock.
        if out.is_empty() || !s.busy.load(Ordering::Relaxed) {
            return 0;
        }
        let mut met = false;
        let scan = lock_noting_contention(&s.scan, &mut met);
        if met {
            self.met();
        }
        let n = s.send_events(ep, out);
        drop(scan);
        n
    }
}

impl Default for ReadyShard {
    fn default() -> Self {
        ReadyShard {
            scan: ClassedMutex::with_class((), &crate::lockclass::EP_SCAN),
            ready: ClassedMutex::with_class(Ready::default(), &crate::lockclass::EP_LOCK),
            busy: AtomicBool::new(false),
        }
    }
}

impl ReadyShard {
    fn lock_ready(&self) -> ReadyGuard<'_> {
        ReadyGuard {
            g: self.ready.lock(),
            busy: &self.busy,
        }
    }

    /// `ep_start_scan`; caller holds `scan`.
    fn start_scan(&self) -> VecDeque<Arc<EpItem>> {
        let mut r = self.lock_ready();
        r.scanning = true;
        std::mem::take(&mut r.rdllist)
    }

    /// `ep_done_scan`; caller holds `scan`. Items removed during the scan are dropped.
    /// Returns whether events are left, for the caller to wake another waiter.
    fn done_scan(&self, tx: VecDeque<Arc<EpItem>>) -> bool {
        let mut r = self.lock_ready();
        let mut list = tx;
        list.retain(|it| !it.removed.load(Ordering::Relaxed));
        for it in std::mem::take(&mut r.ovf) {
            it.on_ovf.store(false, Ordering::Relaxed);
            if !it.linked.swap(true, Ordering::Relaxed) {
                list.push_back(it);
            }
        }
        list.extend(r.rdllist.drain(..));
        r.rdllist = list;
        r.scanning = false;
        !r.rdllist.is_empty()
    }

    /// One shard's scan: fills `out` from its ready list; caller holds `scan`.
    fn send_events(&self, ep: &EventPoll, out: &mut [EpollEvent]) -> usize {
        let mut tx = self.start_scan();
        let mut res = 0;
        while res < out.len() {
            let Some(item) = tx.pop_front() else { break };
            item.linked.store(false, Ordering::Relaxed);
            // Relaxed: a removal racing this scan may or may not be seen here (see
            // "Differences from Linux" in the module docs of `epoll`); the re-queue below
            // checks it under the lock.
            if item.removed.load(Ordering::Relaxed) {
                continue;
            }
            let ev = item.events.load(Ordering::SeqCst);
            let revents = item.target.poll() & ev;
            if revents == 0 {
                continue;
            }
            out[res] = EpollEvent::new(revents, item.data.load(Ordering::Relaxed));
            res += 1;
            if ev & EPOLLONESHOT != 0 {
                item.events.store(ev & EP_PRIVATE_BITS, Ordering::SeqCst);
            } else if ev & EPOLLET == 0 {
                let mut r = self.lock_ready();
                if !item.removed.load(Ordering::Relaxed) {
                    item.linked.store(true, Ordering::Relaxed);
                    r.rdllist.push_back(item);
                }
            }
        }
        if self.done_scan(tx) {
            ep.wq.wake_if_waiters(0);
        }
        res
    }
}

/// The shard of the calling CPU among `n` (in a shuttle model: of the model thread).
fn this_cpu_shard(n: usize) -> usize {
    match sync::model_cpu() {
        Some(c) => c % n,
        None => scalevfs_primitives::cpu::current_shard(n),
    }
}

/// One wait in this many that finds events also scans one more busy shard (module docs,
/// "What a wait collects").
pub(super) const EXTRA_SCAN_EVERY: usize = 32;

thread_local! {
    /// This thread's waits that found events: it picks which of them scan one more shard,
    /// and which shard.
    static ROTATION: Cell<usize> = const { Cell::new(0) };
}

/// The one more shard this wait scans, never `own`: `None` but for one wait in
/// [`EXTRA_SCAN_EVERY`], and then the next shard of this thread's rotation.
fn extra_shard(n: usize, own: usize) -> Option<usize> {
    ROTATION.with(|r| {
        let w = r.get();
        r.set(w.wrapping_add(1));
        (w % EXTRA_SCAN_EVERY == 0).then(|| {
            let j = (w / EXTRA_SCAN_EVERY) % n;
            if j == own {
                (j + 1) % n
            } else {
                j
            }
        })
    })
}
