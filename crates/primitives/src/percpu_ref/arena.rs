//! [`SlotArena`]: the per-CPU counters of many objects, packed per CPU (Linux's percpu
//! allocator, for [`PcpuRef`](super::PcpuRef)).
//!
//! An object that gets a slot gets one 8-byte counter on every CPU; it holds only the
//! slot's number. Slots are handed out in chunks of [`CHUNK`]: a chunk is one allocation
//! with one cache-aligned block of `CHUNK` counters per CPU, so CPU `c`'s counters of many
//! objects share lines with each other (all written from CPU `c`) and never with another
//! CPU's. Chunks are made on demand under the allocation mutex and never freed before the
//! arena; the chunk table itself is read-only once a chunk is set, so finding a counter
//! reads shared memory only.
//!
//! A counter is either *open* (a signed delta, stored as two's complement) or [`CLOSED`].
//! [`SlotArena::try_add`] changes an open counter by compare-exchange and refuses a closed
//! one; [`SlotArena::close`] swaps every CPU's counter to `CLOSED` and returns their sum;
//! [`SlotArena::open`] sets every closed counter to zero. A free slot is closed on every CPU.
//! An owner that keeps one slot for its whole life can hold a [`SlotCounters`] instead of
//! the number: the same adds and close, without the chunk lookup, on a cached CPU hint.
//!
//! Orderings: `try_add` and `close` are `AcqRel` read-modify-writes of the counter, so a
//! `try_add` that a `close` drained is ordered before the code after the close (a put's
//! earlier accesses of the object happen-before its teardown), and one that ran after the
//! close sees `CLOSED`. `open` is `Relaxed`: the owner publishes the slot afterwards with
//! a `Release` store that the readers' `Acquire` load pairs with (`PcpuRef`).
//!
//! Lock order: the allocation mutex is a leaf (taken under a `PcpuRef`'s lock).

use crate::cpu;
use crate::sync::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};

/// Counters per CPU in one chunk (a multiple of 8: a CPU's block is whole cache lines).
#[cfg(not(any(loom, miri)))]
pub const CHUNK: usize = 1024;
/// Counters per CPU in one chunk, under loom: small, so a model builds few atomics.
#[cfg(loom)]
pub const CHUNK: usize = 8;
/// Counters per CPU in one chunk, under Miri: small, with few chunks, because Miri takes
/// about 5 ms to drop each of a table's 1024 `OnceLock`s (5 s per arena, per `Vfs`).
#[cfg(all(miri, not(loom)))]
pub const CHUNK: usize = 64;
/// Chunks an arena may make: it hands out at most `CHUNKS * CHUNK` slots (a million;
/// past that, objects stay in atomic mode).
#[cfg(not(any(loom, miri)))]
const CHUNKS: usize = 1024;
#[cfg(loom)]
const CHUNKS: usize = 2;
#[cfg(all(miri, not(loom)))]
const CHUNKS: usize = 16;

/// A closed counter: adds are refused (the owner is in atomic mode).
pub const CLOSED: u64 = 1 << 63;

/// One CPU's counters of one chunk, on whole cache lines of their own.
#[repr(align(64))]
struct Block([AtomicU64; CHUNK]);

impl Block {
    fn closed() -> Block {
        // A repeat expression, not `array::from_fn`, which under Miri re-borrows the
        // whole block for every counter it writes (quadratic in CHUNK). loom's atomics
        // have no const constructor.
        #[cfg(not(loom))]
        return Block([const { AtomicU64::new(CLOSED) }; CHUNK]);
        #[cfg(loom)]
        Block(std::array::from_fn(|_| AtomicU64::new(CLOSED)))
    }
}

/// A slot: one counter on every CPU. The number is at least 1, so an owner can keep
/// "no slot" as 0 in the same word.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SlotId(u32);

impl SlotId {
    /// The largest slot number an arena hands out (fits below a `u32`'s top bit).
    pub const MAX: u32 = (CHUNKS * CHUNK) as u32;

    /// The slot's number (`1..=MAX`).
    pub fn get(self) -> u32 {
        self.0
    }

    /// The slot of number `n`, if `n` is one an arena hands out.
    #[inline]
    pub fn from_raw(n: u32) -> Option<SlotId> {
        (1..=Self::MAX).contains(&n).then_some(SlotId(n))
    }

    #[inline]
    fn chunk_and_index(self) -> (usize, usize) {
        let i = (self.0 - 1) as usize;
        (i / CHUNK, i % CHUNK)
    }
}

#[derive(Default)]
struct Ids {
    /// Slots never handed out start here (0-based).
    next: u32,
    /// Slots given back, all closed.
    free: Vec<u32>,
}

/// See the module docs.
pub struct SlotArena {
    ncpus: usize,
    /// Chunk `k`: `ncpus` blocks, CPU `c`'s at index `c`.
    chunks: Box<[OnceLock<Box<[Block]>>]>,
    ids: Mutex<Ids>,
}

impl SlotArena {
    /// An arena with a counter per CPU of this machine.
    pub fn new() -> SlotArena {
        SlotArena::with_cpus(cpu::num_cpus())
    }

    /// An arena with `ncpus` counters per slot (at least 1); the CPU of a thread is taken
    /// modulo `ncpus`.
    pub fn with_cpus(ncpus: usize) -> SlotArena {
        SlotArena {
            ncpus: ncpus.max(1),
            chunks: (0..CHUNKS).map(|_| OnceLock::new()).collect(),
            ids: Mutex::new(Ids::default()),
        }
    }

    /// How many CPUs it keeps counters for.
    pub fn cpus(&self) -> usize {
        self.ncpus
    }

    /// A slot, closed on every CPU; `None` once [`SlotId::MAX`] slots are in use.
    pub fn alloc(&self) -> Option<SlotId> {
        let mut ids = self.ids.lock().unwrap_or_else(|e| e.into_inner());
        let n = match ids.free.pop() {
            Some(n) => n,
            None => {
                if ids.next >= SlotId::MAX {
                    return None;
                }
                let n = ids.next;
                ids.next += 1;
                n
            }
        };
        let id = SlotId(n + 1);
        let (k, _) = id.chunk_and_index();
        self.chunks[k].get_or_init(|| (0..self.ncpus).map(|_| Block::closed()).collect());
        Some(id)
    }

    /// Gives `id` back for reuse.
    ///
    /// # Safety
    /// Not a memory-safety contract but a counting one, which the owner's memory safety
    /// rests on: `id` must be closed on every CPU, and no thread may still be about to
    /// [`try_add`](Self::try_add) to it for its old owner (the owner waited a grace period
    /// after it stopped publishing the slot), or the add would count for the next owner.
    pub unsafe fn free(&self, id: SlotId) {
        let mut ids = self.ids.lock().unwrap_or_else(|e| e.into_inner());
        ids.free.push(id.0 - 1);
    }

    #[inline]
    pub(super) fn counter(&self, id: SlotId, cpu: usize) -> Option<&AtomicU64> {
        let (k, i) = id.chunk_and_index();
        Some(&self.chunks.get(k)?.get()?[cpu].0[i])
    }

    /// Adds `delta` to the calling CPU's counter of `id` if it is open; `false` (nothing
    /// changed) if it is closed. The CPU is the thread's as last looked up, as for
    /// [`SlotCounters::try_add`] (see [`HINT_USES`]): a stale one only puts the add on
    /// another CPU's counter, and the sum is the same.
    #[inline]
    pub fn try_add(&self, id: SlotId, delta: i64) -> bool {
        self.counter(id, hinted_shard(self.ncpus))
            .is_some_and(|c| add_unless_closed(c, delta))
    }

    /// The counters of `id`, found once (see [`SlotCounters`]); `None` for a slot this
    /// arena never handed out.
    pub fn counters(&self, id: SlotId) -> Option<SlotCounters<'_>> {
        let (k, _) = id.chunk_and_index();
        Some(SlotCounters {
            blocks: self.chunks.get(k)?.get()?,
            id,
        })
    }

    /// Sets every CPU's counter of `id` from closed to zero. Call while no other thread
    /// opens or closes `id` (the owner's lock).
    pub fn open(&self, id: SlotId) {
        for cpu in 0..self.ncpus {
            if let Some(c) = self.counter(id, cpu) {
                // Relaxed: published by the owner's Release store of the slot (module docs).
                // A compare-exchange, not a store: an open counter is never reset.
                let r = c.compare_exchange(CLOSED, 0, Ordering::Relaxed, Ordering::Relaxed);
                debug_assert!(r.is_ok(), "opening an open counter");
            }
        }
    }

    /// Closes every CPU's counter of `id` and returns the sum of what they held. Adds that
    /// ran before a counter closed are in the sum; later ones are refused. Call while no
    /// other thread opens or closes `id` (the owner's lock).
    pub fn close(&self, id: SlotId) -> i64 {
        self.counters(id).map_or(0, |c| c.close())
    }

    /// The sum of the open counters of `id` (a racy snapshot; 0 if closed).
    pub fn sum(&self, id: SlotId) -> i64 {
        (0..self.ncpus)
            .filter_map(|cpu| self.counter(id, cpu))
            // Relaxed: a snapshot for diagnostics.
            .map(|c| c.load(Ordering::Relaxed))
            .filter(|&v| v != CLOSED)
            .fold(0i64, |s, v| s.wrapping_add(v as i64))
    }
}

/// Adds `delta` to `c` unless it is [`CLOSED`].
#[inline]
fn add_unless_closed(c: &AtomicU64, delta: i64) -> bool {
    // Relaxed: the compare-exchange below is the ordering point.
    let mut v = c.load(Ordering::Relaxed);
    loop {
        if v == CLOSED {
            return false;
        }
        // AcqRel: see the module docs (pairs with `close`'s swap).
        match c.compare_exchange_weak(
            v,
            v.wrapping_add(delta as u64),
            Ordering::AcqRel,
            Ordering::Relaxed,
        ) {
            Ok(_) => return true,
            Err(now) => v = now,
        }
    }
}

/// One slot's counters ([`SlotArena::counters`]), for an owner that keeps its slot for
/// its whole life and counts on every call: it holds the slot's chunk, so an add costs
/// no chunk lookup, and it finds the calling CPU through a thread-local copy of the
/// CPU, looked up again every [`HINT_USES`] adds, instead of asking on every add. A stale
/// copy (the thread migrated) only makes the add land on another CPU's counter for a few
/// calls: the sum is the same.
#[derive(Clone, Copy)]
pub struct SlotCounters<'a> {
    /// The slot's chunk: CPU `c`'s block at index `c`.
    blocks: &'a [Block],
    id: SlotId,
}

impl std::fmt::Debug for SlotCounters<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("SlotCounters").field(&self.id).finish()
    }
}

impl SlotCounters<'_> {
    /// The slot.
    pub fn id(&self) -> SlotId {
        self.id
    }

    /// As [`SlotArena::try_add`], on the counter of the calling thread's CPU as last looked
    /// up (see [`HINT_USES`], [`expire_cpu_hint`]).
    #[inline]
    pub fn try_add(&self, delta: i64) -> bool {
        let (_, i) = self.id.chunk_and_index();
        add_unless_closed(&self.blocks[hinted_shard(self.blocks.len())].0[i], delta)
    }

    /// As [`SlotArena::close`].
    pub fn close(&self) -> i64 {
        let (_, i) = self.id.chunk_and_index();
        let mut sum = 0i64;
        for b in self.blocks {
            // AcqRel: pairs with `try_add` (module docs).
            let v = b.0[i].swap(CLOSED, Ordering::AcqRel);
            if v != CLOSED {
                sum = sum.wrapping_add(v as i64);
            }
        }
        sum
    }
}

/// How many [`SlotCounters::try_add`] calls of a thread reuse one CPU lookup.
pub const HINT_USES: u32 = 32;

#[cfg(not(loom))]
thread_local! {
    /// The calling thread's CPU as last looked up, and how many more adds may use it.
    static HINT: std::cell::Cell<(usize, u32)> = const { std::cell::Cell::new((0, 0)) };
}

/// The calling thread's CPU for the adds: [`cpu::current_cpu`] (the kernel's answer or
/// the thread's [`cpu::set_cpu_override`]), asked once every [`HINT_USES`] calls and kept
/// in a thread-local in between. These adds run on every sysfs read and on every get and
/// put of a shared dentry; `sched_getcpu` is a call into libc and a load of the rseq area
/// natively (1% of a 2-thread rename in one directory, by `perf`), and under valgrind (no
/// rseq area) a vDSO call of ~40 instructions; the override check alone was ~20.
#[cfg(not(loom))]
#[inline]
fn cpu_hint() -> usize {
    HINT.with(|h| match h.get() {
        (cpu, left @ 1..) => {
            h.set((cpu, left - 1));
            cpu
        }
        (_, 0) => {
            let cpu = cpu::current_cpu();
            h.set((cpu, HINT_USES - 1));
            cpu
        }
    })
}

/// The counter of `n` (one per CPU) that the calling thread adds to: its CPU hint's,
/// modulo `n` for a CPU past the arena's (the division only then).
#[inline]
pub(crate) fn hinted_shard(n: usize) -> usize {
    let cpu = cpu_hint();
    if cpu < n {
        cpu
    } else {
        cpu % n
    }
}

/// Makes the calling thread's next add ([`SlotArena::try_add`],
/// [`SlotCounters::try_add`]) look its CPU up again. [`cpu::set_cpu_override`] calls it,
/// so that an override applies at once.
pub fn expire_cpu_hint() {
    #[cfg(not(loom))]
    HINT.with(|h| h.set((0, 0)));
}

/// Under loom: the thread's (fixed) CPU, as [`cpu::current_cpu`] answers there.
#[cfg(loom)]
fn cpu_hint() -> usize {
    cpu::current_cpu()
}

impl Default for SlotArena {
    fn default() -> Self {
        SlotArena::new()
    }
}
