//! [`SeqRwLock`]: the rename lock's sequence read/write lock (the `seqrwlock_t` patches), on a per-CPU ("big reader") lock.
//!
//! # The reader/writer lock
//!
//! Those patches layered `seqrwlock_t` on the kernel's `rwlock_t`, whose readers all RMW one
//! shared word: on a read-mostly lock (every `d_path()`/`getcwd()` a shared reader, every
//! `rename()` a writer) that word's cache line bounces between CPUs on every read, and a
//! single reader pays two atomic RMWs on it. We use per-CPU reader indicators instead, as
//! Linux's `percpu_rw_semaphore` (and the old `brlock`) does:
//!
//! ```text
//!   shards[c].owned  = 1 while one reader owns it      CAS 0->1 in, plain store 0 out
//!   shards[c].shared = further readers of this shard   fetch_add in, fetch_sub out
//!   gate = [ waiting | granted | GEN | WRITER ]        RMW by writers and slow-path readers
//!            63..32    31..2     1      0
//! ```
//!
//! * Shared reader, fast path: pick the shard of the CPU this thread last ran on (a
//!   thread-local hint, see below), claim its `owned` slot with a CAS, or if that is taken
//!   (its owner was preempted inside its section, or the hint is stale) count itself in
//!   `shared`, which sits on the same line. Then load `gate`: if `WRITER` is clear it is
//!   in. The guard remembers the indicator (the thread may migrate before it unlocks).
//!   Otherwise it backs out and takes the slow path. A read touches only its CPU's line,
//!   which stays in that CPU's cache, and the usual case costs one locked instruction (the
//!   CAS) plus a plain store, like the exclusive lock it replaces.
//! * Shared reader, slow path (a writer was seen): a CAS loop on `gate`. If `WRITER` is
//!   clear, it enters as a *granted* reader (`granted += 1`, the central indicator, which
//!   it decrements on unlock). If `WRITER` is set, it registers (`waiting += 1`) and waits
//!   for `GEN` to flip: the writer's unlock converts every waiting reader into a granted one
//!   in the same RMW that clears `WRITER`, so the reader is already in when it wakes.
//! * Writer: takes the `writers` mutex, sets `WRITER` (`fetch_or`), waits until every
//!   shard's `owned` and `shared` and `granted` are zero, then makes the sequence odd.
//!   Unlock: sequence even, then one CAS: clear `WRITER`, flip `GEN`, move `waiting` into
//!   `granted`; wake sleeping readers if there were any; release the mutex.
//!
//! The shard hint is a thread-local copy of `sched_getcpu()`, refreshed only when the
//! thread finds its shard's `owned` slot taken, which is how a collision with another
//! CPU's reader or a migration shows. A stale hint costs cache traffic, never correctness.
//!
//! # Proof sketch
//!
//! * *Exclusion (Dekker).* A fast reader stores to its indicator, then loads `gate`; a
//!   writer sets `WRITER` in `gate`, then loads every indicator. Both pairs are separated
//!   by a full barrier (below), so at least one side sees the other's store: either the
//!   reader sees `WRITER` and backs out, or the writer sees the reader's indicator and
//!   waits for it to clear. Slow-path readers and writers both RMW `gate`, so they are
//!   totally ordered by its modification order: a reader granted before `WRITER` was set
//!   is in `granted`, which the writer drains; after, it sees `WRITER` and only registers.
//!   Writers exclude each other by the mutex.
//! * *No writer starvation.* Once `WRITER` is set, no reader gets in: fast readers back
//!   out, slow readers register and wait. The writer therefore waits only for readers that
//!   were in (or granted) before, at most one section per reader thread.
//! * *No reader starvation.* A reader that registers waits for the one writer holding
//!   `WRITER` at that moment: that writer's unlock grants it in the same RMW that clears
//!   `WRITER`, and the next writer, which can set `WRITER` only afterwards, finds it in
//!   `granted` and waits for it. So a stream of writers delays a shared reader by at most
//!   one write section (plus the fast-path attempt and the CAS loop, which fails only when
//!   another thread's RMW on `gate` succeeded). `GEN` cannot flip twice while a reader
//!   waits (no ABA): the second flip needs a writer that has drained this granted reader.
//! * *Writers among themselves* queue on the mutex (`std::sync::Mutex`: not FIFO, but
//!   queued writers sleep). Writers on the rename lock are rare.
//! * *Counters.* `shared` counts in `usize`; `granted` and `waiting` have 30 and 32 bits,
//!   which bounds the number of threads, not of operations (every add is undone later).
//!
//! # Memory ordering
//!
//! * *The Dekker pair.* Reader: `owned.compare_exchange(SeqCst)` (or
//!   `shared.fetch_add(SeqCst)`) then `gate.load(SeqCst)`. Writer: `gate.fetch_or(SeqCst)`,
//!   `fence(SeqCst)`, then `owned`/`shared` `.load(SeqCst)`. All are SeqCst accesses, so
//!   they lie in the single total order S, consistent with program order: if the reader's
//!   load misses `WRITER`, it precedes the `fetch_or` in S, so the reader's RMW does too,
//!   and the writer's SeqCst load of that indicator sees it (or a later value). On x86 the
//!   reader's side is `lock cmpxchg` + plain `mov`, no `mfence` (a locked RMW already
//!   drains the store buffer). Loom models SeqCst *accesses* only as AcqRel (a documented
//!   loom limitation) but models SeqCst *fences*, so under loom the reader also issues
//!   `fence(SeqCst)` between the two (fence/fence Dekker, also valid C11), pairing with
//!   the writer's fence; the models check the protocol on top of it (and fail without it).
//! * *Reader entry.* The fast reader's SeqCst (so Acquire) load of `gate`, and the slow
//!   reader's Acquire CAS/loads of `gate`, pair with the Release CAS in `write_unlock`;
//!   every later change of `gate` is an RMW, so the release sequence reaches whatever value
//!   the reader reads, and the last write section happens-before the read section.
//! * *Reader exit.* The Release store to `owned` / `fetch_sub` on `shared` (or on `gate`
//!   for a granted reader) pairs with the writer's SeqCst (Acquire) loads while draining.
//!   `shared` changes only by RMWs, so the load that sees zero synchronizes with every
//!   counted reader's exit. `owned` is stored to, so each owner's SeqCst (Acquire) CAS
//!   synchronizes with the previous owner's exit store, chaining every earlier owner's
//!   section before the last store the writer reads. Backing out is a Release store too
//!   (the writer may read it instead of the previous owner's exit).
//! * *Writer to writer.* The mutex (its unlock Releases, the next lock Acquires).
//! * *Sleeping readers.* A waiting reader checks `GEN` under `park` before sleeping on
//!   `granted_cv`; the writer flips `GEN` (the CAS) before taking `park` to notify, so the
//!   wakeup cannot be lost.
//! * The sequence counter's orderings are [`SeqCounter`]'s (module docs): writers bump it
//!   inside the write section; shared readers never touch it.
//!
//! # Lock order
//!
//! `writers` -> `park` (a writer's unlock notifies under `park` while holding `writers`).
//! Readers take only `park`, and only while waiting. Both are leaves otherwise.
//!
//! # Cost and memory
//!
//! A shared read: a thread-local load, one `lock cmpxchg` on a line owned by this CPU, a
//! load of `gate` (shared, clean) and a plain store to leave. A write visits every shard:
//! `O(CPUs)`, the price of rare writers. Each lock holds one cache line per shard
//! (`num_cpus()` rounded up to a power of two): it is meant for a few global locks (the
//! rename lock), not for one per object.
//!
//! # Waiting
//!
//! A writer draining readers spins, then yields ([`Backoff`]): readers leave quickly unless
//! preempted. A reader waiting for a grant spins and yields, then sleeps on a condition
//! variable. How long it stays awake depends on how many readers already wait: while the
//! waiters and the writer fit on the CPUs, the writer is probably running and will be done
//! soon, and a wakeup would cost more than the wait (2 threads on 2 CPUs lost to the
//! exclusive lock when waiters slept early). Beyond that, yielding waiters kept taking the
//! CPU from the preempted readers and writer they waited for (16 and 64 threads on 2 CPUs
//! lost to the exclusive lock with yield-only waits), so they sleep soon.
//!
//! Optimistic readers ([`SeqRwLock::read_begin`]) never touch the reader/writer lock: they
//! only read the sequence counter, which is on its own cache line.

use super::{Backoff, ReadMode, SeqCount, SeqCounter};
use crate::sync::{fence, AtomicU64, AtomicUsize, Ordering};
use crossbeam_utils::CachePadded;
use std::cell::Cell;
// Blocking waits: loom's versions under loom, so the models see them block (a model with
// two threads spin-yielding for a third exceeds loom's branch limit).
#[cfg(loom)]
use loom::sync::{Condvar, Mutex, MutexGuard};
#[cfg(not(loom))]
use std::sync::{Condvar, Mutex, MutexGuard};

/// A writer holds the lock (or is draining readers to take it).
const WRITER: u64 = 1;
/// Flipped by every writer unlock: tells waiting readers they have been granted.
const GEN: u64 = 2;
/// One granted (slow-path) reader in the read section.
const GRANT: u64 = 4;
const GRANT_MASK: u64 = 0xffff_fffc;
/// One reader waiting for the current writer's unlock.
const WAIT: u64 = 1 << 32;

thread_local! {
    /// This thread's shard hint: the CPU it last looked up. Refreshed (`sched_getcpu`) only
    /// when its shard's `owned` slot is taken, which is how a collision with a reader on
    /// another CPU (or a migration) shows; a stale hint costs cache traffic, never
    /// correctness. Shared by all locks: it describes the thread, not the lock. Starts at
    /// the CPU the thread first reads a lock on, so that two new threads on different
    /// CPUs do not start on one shard.
    static CPU_HINT: Cell<usize> = Cell::new(first_cpu_hint());
}

/// The hint a thread starts with: its CPU (0 under loom, as in `refresh_cpu_hint`).
fn first_cpu_hint() -> usize {
    #[cfg(not(loom))]
    return crate::cpu::current_cpu();
    #[cfg(loom)]
    return 0;
}

/// Locks a mutex that guards no data (`()`), so a poisoned one is as good as any.
fn lock_unit(m: &Mutex<()>) -> MutexGuard<'_, ()> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The full barrier between a reader's indicator RMW and its load of `gate`. Not
/// needed outside loom (both are SeqCst accesses, see the module docs); loom models SeqCst
/// accesses only as AcqRel, so there the barrier is an explicit SeqCst fence.
#[inline(always)]
fn reader_dekker_fence() {
    #[cfg(loom)]
    fence(Ordering::SeqCst);
}

/// How many [`Backoff::snooze`]s (spins, then one yield) a reader waiting for a grant
/// tries before it sleeps, when more readers wait than there are CPUs. Measured with 64
/// threads on 2 CPUs: sleeping sooner (3) or later (64) both lost.
const WAIT_SNOOZES: u32 = 8;
/// The same while the waiters and the writer fit on the CPUs: mostly yields.
const WAIT_SNOOZES_FEW: u32 = 256;

/// A reader registered as waiting for a writer's unlock (`read_register`).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(super) struct Waiter {
    /// `gate`'s GEN bit when it registered: the writer's unlock flips it.
    pub(super) gen: u64,
    /// Readers already waiting for this writer.
    pub(super) ahead: u64,
}

/// Looks up the current CPU for this thread's later `read_lock`s. Not under loom, whose
/// model threads share one OS thread's thread-locals: the hint would carry over from one
/// explored execution to the next, and loom needs every execution to replay exactly.
#[cold]
#[inline(never)]
fn refresh_cpu_hint() {
    #[cfg(not(loom))]
    CPU_HINT.with(|h| h.set(crate::cpu::current_cpu()));
}

/// One CPU's reader indicators, on one cache line (only that CPU's readers write it).
#[derive(Default)]
pub(super) struct CpuReaders {
    /// 1 while a reader owns it: entered with a CAS, left with a plain store.
    pub(super) owned: AtomicUsize,
    /// Readers that found `owned` taken (its owner was preempted in its section, or the
    /// hint is stale): entered and left with RMWs.
    pub(super) shared: AtomicUsize,
}

/// Which indicator a fast-path reader is counted in.
#[derive(Copy, Clone)]
pub(super) enum Ind<'a> {
    Owned(&'a AtomicUsize),
    Shared(&'a AtomicUsize),
    /// A granted reader, counted in `gate`.
    Gate,
}

/// Sequence read/write lock: optimistic readers, shared (pointer-following) readers and
/// exclusive writers. Shared readers use per-CPU indicators, so they scale and do not
/// bounce a shared line; neither readers nor writers starve. See the module docs for the
/// algorithm, orderings and proof sketch. Shared sections must not nest (see the
/// lock-order notes in [`crate::seqlock`]).
pub struct SeqRwLock {
    /// Bumped only by writers; read by optimistic readers. Own cache line.
    seq: CachePadded<SeqCounter>,
    /// Writer bit, writer generation, granted and waiting slow-path readers (module docs).
    /// Own cache line: fast readers only load it, so it stays shared-clean in every CPU's
    /// cache until a writer arrives.
    gate: CachePadded<AtomicU64>,
    /// Per-CPU reader indicators, one cache line each; `shards.len()` is a power of two.
    pub(super) shards: Box<[CachePadded<CpuReaders>]>,
    /// Serializes writers; held for the whole write section, so a queued writer sleeps.
    writers: Mutex<()>,
    /// Readers waiting for a grant sleep on `granted_cv` under `park` (no lost wakeup: the
    /// writer flips GEN before taking `park` to notify; a waiter checks GEN under `park`).
    park: Mutex<()>,
    granted_cv: Condvar,
}

impl std::fmt::Debug for SeqRwLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Relaxed: a diagnostic snapshot; the fields may be mutually inconsistent.
        let g = self.gate.load(Ordering::Relaxed);
        let fast: usize = self
            .shards
            .iter()
            .map(|s| s.owned.load(Ordering::Relaxed) + s.shared.load(Ordering::Relaxed))
            .sum();
        f.debug_struct("SeqRwLock")
            .field("seq", &self.sequence())
            .field("readers", &(fast + ((g & GRANT_MASK) / GRANT) as usize))
            .field("writer_present", &(g & WRITER != 0))
            .field("readers_waiting", &(g / WAIT))
            .field("shards", &self.shards.len())
            .finish()
    }
}

impl Default for SeqRwLock {
    fn default() -> Self {
        Self::new()
    }
}

impl SeqRwLock {
    /// A lock with one reader shard per CPU (rounded up to a power of two).
    pub fn new() -> Self {
        Self::with_shards(crate::cpu::num_cpus())
    }

    /// A lock with `shards` reader shards (rounded up to a power of two, at least 1). Fewer
    /// shards than CPUs only makes readers on different CPUs share a line.
    pub fn with_shards(shards: usize) -> Self {
        let n = shards.clamp(1, 1 << 16).next_power_of_two();
        SeqRwLock {
            seq: CachePadded::new(SeqCounter::new()),
            gate: CachePadded::new(AtomicU64::new(0)),
            shards: (0..n).map(|_| CachePadded::default()).collect(),
            writers: Mutex::new(()),
            park: Mutex::new(()),
            granted_cv: Condvar::new(),
        }
    }

    /// Starts an optimistic read (`read_seqrwbegin`): waits while a writer is in its
    /// section. Shared readers do not make it wait.
    #[inline]
    pub fn read_begin(&self) -> SeqCount {
        self.seq.read_begin()
    }

    /// `true` if the optimistic read started at `start` must be retried (`read_seqrwretry`).
    #[inline]
    pub fn read_retry(&self, start: SeqCount) -> bool {
        self.seq.read_retry(start)
    }

    /// Takes the lock shared (`read_seqrwlock`): waits for at most the write section in
    /// progress, then excludes writers until the guard drops. Does not bump the sequence,
    /// so optimistic readers do not retry because of it.
    #[inline]
    pub fn read_lock(&self) -> SeqReadGuard<'_> {
        let hint = CPU_HINT.with(Cell::get);
        self.read_lock_on(hint)
    }

    /// Takes the lock shared if no writer is present (holding it or draining readers to
    /// take it); `None` otherwise, at once. The fast path alone: never registers as a
    /// waiting reader, so a failed try leaves no trace. For callers that hold locks a
    /// writer of this one may be waiting for.
    #[inline]
    pub fn try_read_lock(&self) -> Option<SeqReadGuard<'_>> {
        let hint = CPU_HINT.with(Cell::get);
        self.try_read_lock_on(hint)
    }

    /// `try_read_lock` through shard `hint % shards` (tests and loom models pick it).
    #[inline]
    pub(super) fn try_read_lock_on(&self, hint: usize) -> Option<SeqReadGuard<'_>> {
        let cpu = &self.shards[hint & (self.shards.len() - 1)];
        self.read_fast(cpu)
            .map(|ind| SeqReadGuard { lock: self, ind })
    }

    /// `read_lock` through shard `hint % shards` (tests and loom models pick the shard).
    #[inline]
    pub(super) fn read_lock_on(&self, hint: usize) -> SeqReadGuard<'_> {
        // `& (len - 1)`: the length is a power of two, and a mask is cheaper than `%`.
        let i = hint & (self.shards.len() - 1);
        // SAFETY: `with_shards` makes the length a power of two, so at least 1, and
        // `hint & (len - 1) <= len - 1`: `i` is in bounds (this skips the bounds check
        // on the hottest path).
        let cpu = unsafe { self.shards.get_unchecked(i) };
        match self.read_fast(cpu) {
            Some(ind) => SeqReadGuard { lock: self, ind },
            None => self.read_lock_slow(),
        }
    }

    /// The fast path: `Some(indicator)` if the reader is in, `None` if a writer is present.
    #[inline]
    pub(super) fn read_fast<'a>(&self, cpu: &'a CpuReaders) -> Option<Ind<'a>> {
        // SeqCst (both RMWs): the reader half of the Dekker pair with `write_enter` (module
        // docs). The CAS's Acquire half pairs with the previous owner's Release store in
        // `read_unlock`, so that owner's section happens-before our back-out store below.
        let ind = if cpu
            .owned
            .compare_exchange(0, 1, Ordering::SeqCst, Ordering::Relaxed)
            .is_ok()
        {
            Ind::Owned(&cpu.owned)
        } else {
            refresh_cpu_hint();
            cpu.shared.fetch_add(1, Ordering::SeqCst);
            Ind::Shared(&cpu.shared)
        };
        reader_dekker_fence();
        // SeqCst: the Dekker pair; its Acquire half pairs with the Release CAS in
        // `write_unlock` (release sequence of `gate`).
        if self.gate.load(Ordering::SeqCst) & WRITER == 0 {
            return Some(ind);
        }
        // Back out. Release, as in `read_unlock`: the writer may read this value instead
        // of the previous owner's exit and must still be ordered after that exit. (For
        // `shared`, an RMW, Relaxed would do: it continues the release sequence.)
        self.read_unlock(ind);
        None
    }

    /// The slow path: a writer is present. Enter through `gate`: granted at once if the
    /// writer has left, else after its unlock.
    #[cold]
    #[inline(never)]
    fn read_lock_slow(&self) -> SeqReadGuard<'_> {
        if let Some(w) = self.read_register() {
            self.read_wait_granted(w);
        }
        SeqReadGuard {
            lock: self,
            ind: Ind::Gate,
        }
    }

    /// Enters through `gate`: `None` if the reader is in (no writer; counted in `granted`),
    /// `Some(waiter)` if it registered as waiting for the writer present.
    pub(super) fn read_register(&self) -> Option<Waiter> {
        // Relaxed: a first guess for the CAS, which does the ordering.
        let mut g = self.gate.load(Ordering::Relaxed);
        loop {
            let (new, waiting) = if g & WRITER == 0 {
                (g + GRANT, false)
            } else {
                (g + WAIT, true)
            };
            // Acquire pairs with the Release CAS in `write_unlock` (when entering directly,
            // the previous write section happens-before ours). Relaxed on failure: retried.
            match self
                .gate
                .compare_exchange_weak(g, new, Ordering::Acquire, Ordering::Relaxed)
            {
                Ok(_) => {
                    return waiting.then_some(Waiter {
                        gen: g & GEN,
                        ahead: g / WAIT,
                    })
                }
                Err(cur) => g = cur,
            }
        }
    }

    /// Waits until the writer `w` registered with has unlocked, which granted this reader.
    pub(super) fn read_wait_granted(&self, w: Waiter) {
        // Acquire (both loads) pairs with the Release CAS in `write_unlock` that flipped
        // GEN and counted us in `granted`: that write section happens-before our section.
        let granted = || self.gate.load(Ordering::Acquire) & GEN != w.gen;
        // Spin, then yield, then sleep. While the waiters and the writer fit on the CPUs,
        // the writer is probably running and a write section is short: keep the CPU
        // (sleeping costs a wakeup each, which with frequent writes is most of the time).
        // Past that, sleep soon, leaving the CPU to the writer and the preempted readers
        // it waits for (module docs, "Waiting"). Under loom, sleep at once (two threads
        // spin-yielding for a third exceed loom's branch limit).
        let snoozes = if cfg!(loom) {
            0
        } else if (w.ahead as usize) + 1 < crate::cpu::num_cpus() {
            WAIT_SNOOZES_FEW
        } else {
            WAIT_SNOOZES
        };
        let mut backoff = Backoff::new();
        for _ in 0..snoozes {
            if granted() {
                return;
            }
            backoff.snooze();
        }
        let mut p = lock_unit(&self.park);
        while !granted() {
            p = self.granted_cv.wait(p).unwrap_or_else(|e| e.into_inner());
        }
    }

    #[inline]
    fn read_unlock(&self, ind: Ind<'_>) {
        match ind {
            // Release pairs with the writer's SeqCst (Acquire) loads of the slot in
            // `write_drain` and with the next owner's SeqCst (Acquire) CAS. A plain store:
            // we own the slot.
            Ind::Owned(slot) => slot.store(0, Ordering::Release),
            // Release pairs with the writer's SeqCst (Acquire) loads in `write_drain`.
            Ind::Shared(count) => {
                count.fetch_sub(1, Ordering::Release);
            }
            // Release pairs with the writer's Acquire loads of `gate` in `write_drain`.
            Ind::Gate => {
                self.gate.fetch_sub(GRANT, Ordering::Release);
            }
        }
    }

    /// Takes the writer mutex and the writer bit; from here on no new shared reader gets
    /// in. Returns the writer mutex's guard, held until the write section ends.
    pub(super) fn write_enter(&self) -> MutexGuard<'_, ()> {
        let w = lock_unit(&self.writers);
        // SeqCst: the writer half of the Dekker pair (module docs). The previous writer's
        // section is ordered before ours by the mutex (its Release unlock, our Acquire lock).
        let old = self.gate.fetch_or(WRITER, Ordering::SeqCst);
        debug_assert!(old & WRITER == 0, "writer bit set without the writer mutex");
        // SeqCst fence: pairs with the reader's `reader_dekker_fence` under loom; outside
        // loom redundant with the SeqCst accesses, and cheap next to a drain.
        fence(Ordering::SeqCst);
        w
    }

    /// Whether a reader is in (or granted), as a writer that has set `WRITER` sees it.
    fn readers_present(&self) -> bool {
        self.shards.iter().any(|cpu| {
            // SeqCst: the Dekker pair, as in `write_drain`.
            cpu.owned.load(Ordering::SeqCst) != 0 || cpu.shared.load(Ordering::SeqCst) != 0
        })
            // Acquire, as in `write_drain`: pairs with granted readers' Release `fetch_sub`.
            || self.gate.load(Ordering::Acquire) & GRANT_MASK != 0
    }

    /// Waits until every reader that got in before `write_enter` has left, then starts the
    /// write section (sequence odd).
    pub(super) fn write_drain(&self) {
        let mut backoff = Backoff::new();
        for cpu in self.shards.iter() {
            for ind in [&cpu.owned, &cpu.shared] {
                // SeqCst: the Dekker pair (module docs); its Acquire half pairs with the
                // readers' Release store / `fetch_sub` in `read_unlock`.
                while ind.load(Ordering::SeqCst) != 0 {
                    backoff.snooze();
                }
            }
        }
        // Acquire pairs with granted readers' Release `fetch_sub` in `read_unlock`.
        while self.gate.load(Ordering::Acquire) & GRANT_MASK != 0 {
            backoff.snooze();
        }
        self.seq.write_begin();
    }

    /// Takes the lock exclusively (`write_seqrwlock`) and makes the sequence odd. Blocks
    /// new shared readers at once, then waits for the ones already in.
    pub fn write_lock(&self) -> SeqWriteGuard<'_> {
        let writers = self.write_enter();
        self.write_drain();
        SeqWriteGuard {
            lock: self,
            _writers: writers,
        }
    }

    /// Takes the lock exclusively if no writer holds it and no reader is in; `None`
    /// otherwise, at once (a reader that arrived meanwhile is let in, as by an unlock).
    /// For callers that hold locks a reader of this one may be waiting for.
    pub fn try_write_lock(&self) -> Option<SeqWriteGuard<'_>> {
        let writers = match self.writers.try_lock() {
            Ok(w) => w,
            Err(std::sync::TryLockError::Poisoned(e)) => e.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => return None,
        };
        // Set WRITER only while no reader is granted: a granted reader may still be
        // asleep, waiting to see GEN flip, and giving up below flips GEN again, which
        // it would then miss (ABA). With none granted, the only readers waiting on GEN
        // when we give up are those that registered behind our WRITER.
        // Relaxed: a first guess for the CAS.
        let mut g = self.gate.load(Ordering::Relaxed);
        loop {
            if g & (WRITER | GRANT_MASK) != 0 {
                return None;
            }
            // SeqCst: the writer half of the Dekker pair, as `write_enter`'s `fetch_or`.
            match self.gate.compare_exchange_weak(
                g,
                g | WRITER,
                Ordering::SeqCst,
                Ordering::Relaxed,
            ) {
                Ok(_) => break,
                Err(cur) => g = cur,
            }
        }
        fence(Ordering::SeqCst);
        if self.readers_present() {
            // Give up: clear WRITER and grant the readers that registered meanwhile, as
            // `write_unlock` does (the sequence was never made odd). None is granted
            // (checked above; none can be granted while WRITER is set).
            self.release_writer_bit();
            return None;
        }
        self.seq.write_begin();
        Some(SeqWriteGuard {
            lock: self,
            _writers: writers,
        })
    }

    fn write_unlock(&self) {
        self.seq.write_end();
        self.release_writer_bit();
    }

    /// Clears `WRITER`, flips `GEN` and grants every waiting reader, waking the sleepers.
    fn release_writer_bit(&self) {
        // Relaxed: a first guess for the CAS.
        let mut g = self.gate.load(Ordering::Relaxed);
        loop {
            debug_assert!(g & WRITER != 0 && g & GRANT_MASK == 0);
            // Clear WRITER, flip GEN, turn every waiting reader into a granted one.
            let new = (g & GEN ^ GEN) | (g / WAIT * GRANT);
            // Release pairs with readers' Acquire loads/CAS of `gate` (`read_fast`,
            // `read_register`, `read_wait_granted`).
            match self
                .gate
                .compare_exchange_weak(g, new, Ordering::Release, Ordering::Relaxed)
            {
                Ok(_) => break,
                Err(cur) => g = cur,
            }
        }
        if g >= WAIT {
            // Some granted readers may be asleep. Taking `park` orders this notify after
            // any waiter's GEN check under `park` (no lost wakeup).
            let _p = lock_unit(&self.park);
            self.granted_cv.notify_all();
        }
    }

    /// The d_path/getcwd reader: one optimistic pass; if a writer interfered, one pass
    /// under [`read_lock`](Self::read_lock) (shared with other such readers), which cannot
    /// fail. `f` runs at most twice. `f` must tolerate torn values in the optimistic pass.
    pub fn read_or_lock<T>(&self, mut f: impl FnMut(ReadMode) -> T) -> T {
        let start = self.read_begin();
        let v = f(ReadMode::Optimistic);
        if !self.read_retry(start) {
            return v;
        }
        let _shared = self.read_lock();
        f(ReadMode::Locked)
    }

    /// The current raw sequence (diagnostics, tests).
    pub fn sequence(&self) -> u32 {
        self.seq.raw()
    }
}

/// A shared-reader section of a [`SeqRwLock`] (`read_seqrwunlock` on drop).
#[must_use = "the read section ends when the guard is dropped"]
pub struct SeqReadGuard<'a> {
    pub(super) lock: &'a SeqRwLock,
    /// The indicator this reader is counted in (of the shard it entered through, not the
    /// current CPU's: the thread may have migrated).
    pub(super) ind: Ind<'a>,
}

impl SeqReadGuard<'_> {
    /// The guard of a reader counted in `gate` (tests that drive the slow path by hand).
    #[cfg(all(test, not(loom)))]
    pub(super) fn granted(lock: &SeqRwLock) -> SeqReadGuard<'_> {
        SeqReadGuard {
            lock,
            ind: Ind::Gate,
        }
    }
}

impl Drop for SeqReadGuard<'_> {
    #[inline]
    fn drop(&mut self) {
        self.lock.read_unlock(self.ind);
    }
}

/// A write section of a [`SeqRwLock`] (`write_seqrwunlock` on drop).
#[must_use = "the write section ends when the guard is dropped"]
pub struct SeqWriteGuard<'a> {
    pub(super) lock: &'a SeqRwLock,
    /// The writer mutex, released after `write_unlock` (fields drop after `drop`).
    pub(super) _writers: MutexGuard<'a, ()>,
}

impl Drop for SeqWriteGuard<'_> {
    fn drop(&mut self) {
        self.lock.write_unlock();
    }
}
