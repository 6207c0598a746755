//! [`SeqRwLock`]: seed 004's sequence read/write lock, on a phase-fair reader/writer lock.
//!
//! # The reader/writer lock and its fairness policy
//!
//! The seed layered its `seqrwlock_t` on the kernel's `rwlock_t`, which prefers readers:
//! "writers may be starved if there is a lot of contention", and on the rename lock
//! (every `rename()` is a writer, every `d_path()`/`getcwd()` a shared reader) that is a
//! real risk. We use a *phase-fair* ticket lock instead (Brandenburg & Anderson, "Spin-Based
//! Reader-Writer Synchronization for Multiprocessor Real-Time Systems", 2010, PF-T):
//! reader phases and writer phases alternate whenever both are waiting.
//!
//! ```text
//!   rin   = [ readers entered (units of RINC) | PRES | PHID ]   written by readers + writers
//!   rout  = [ readers left    (units of RINC) |   0  |  0   ]   written by readers
//!   win   = writer tickets handed out                          written by writers
//!   wout  = writer tickets served                              written by the holder
//! ```
//!
//! * Shared reader: `w = fetch_add(rin, RINC) & WBITS`. If `w == 0` it is in. Otherwise a
//!   writer is present; it waits until `rin & WBITS != w`, i.e. until *that* writer leaves
//!   (bits cleared) or the next one arrives (bits set with the other PHID). Leaving:
//!   `fetch_add(rout, RINC)`.
//! * Writer: takes a ticket on `win`, waits for `wout` to reach it (writers are FIFO), then
//!   `fetch_add(rin, PRES | ticket & PHID)` and waits until `rout` equals the reader count
//!   that `fetch_add` returned, i.e. until every reader that entered before it has left.
//!   Leaving: clear the bits in `rin`, then `wout += 1`.
//!
//! # Proof sketch
//!
//! * *Exclusion.* All `rin` updates are RMWs, so they are totally ordered. A reader whose
//!   `fetch_add` precedes a writer's is counted in the writer's reader ticket and the writer
//!   waits for its `rout` increment; a reader whose `fetch_add` follows sees the writer's
//!   bits and waits for them to change, which happens only when that writer unlocks or the
//!   next writer, which counted this reader and so waits for it, sets its bits. Writers
//!   exclude each other by the ticket.
//! * *No writer starvation.* Once a writer's ticket is served and its bits are in `rin`,
//!   every later reader waits, so it waits only for readers already in (at most one
//!   section per reader thread) and then enters. Writers ahead of it are served FIFO, each
//!   likewise bounded. A stream of new readers cannot delay it.
//! * *No reader starvation.* A reader that finds writer bits waits for at most that one
//!   writer: the next writer in line has counted the reader (its `fetch_add` on `rin` comes
//!   later) and waits for it, and its PHID differs from the current writer's, so the reader
//!   sees the change even if it missed the moment the bits were clear. It cannot miss two
//!   changes (ABA): the writer after next cannot start before the next one, which is waiting
//!   for this reader. A stream of writers therefore delays a reader by one write section.
//! * *Wrap-around.* `rin`/`rout` count modulo 2^32 in units of `RINC`, and `win`/`wout`
//!   modulo 2^32; only equality is tested, and the low bits of `rout` are always zero.
//!
//! *Known cost under oversubscription.* Fairness means a writer waits for a shared reader
//! that was preempted inside its section, and every new shared reader waits for that
//! writer; waiters spin briefly and then `yield`, which on CFS can keep handing the CPU to
//! other yielders before the preempted reader. With 16 threads on 2 CPUs and one write per
//! ~16000 reads, always-shared readers measured several times slower than one exclusive
//! lock. This is why `d_path` uses [`SeqRwLock::read_or_lock`], whose shared pass is rare.
//! Parking waiters (futex) would remove the convoy; not done.
//!
//! Optimistic readers ([`SeqRwLock::read_begin`]) never touch the reader/writer lock: they
//! only read the sequence counter, which is on its own cache line so that shared readers'
//! `rin`/`rout` traffic does not evict it.
//!
//! # Memory ordering
//!
//! * Reader entry: the Acquire `fetch_add`/load on `rin` pairs with the Release `fetch_and`
//!   on `rin` in writer unlock; later writers' RMWs on `rin` (Relaxed) continue that
//!   release sequence, so a reader released by seeing the next writer's bits is ordered too.
//! * Reader exit: the Release `fetch_add` on `rout` pairs with the writer's Acquire loads
//!   of `rout`; every `rout` update is an RMW, so the load that sees the final count
//!   synchronizes with every counted reader's exit.
//! * Writer to writer: the Release `fetch_add` on `wout` in unlock pairs with the next
//!   writer's Acquire load of `wout`.
//! * The writer's `fetch_add` on `rin` can be Relaxed: exclusion follows from the
//!   modification order of `rin` (above), and its own section is ordered after the readers
//!   by the Acquire on `rout` and after the previous writer by the Acquire on `wout`.
//! * The sequence counter's orderings are [`SeqCounter`]'s (module docs): writers bump it
//!   inside the write section; shared readers never touch it.

use super::{Backoff, ReadMode, SeqCount, SeqCounter};
use crate::sync::{AtomicU32, Ordering};
use crossbeam_utils::CachePadded;

/// Writer present.
const PRES: u32 = 0b10;
/// Writer phase id: the parity of the present writer's ticket.
const PHID: u32 = 0b01;
const WBITS: u32 = PRES | PHID;
/// One reader in `rin`/`rout`.
pub(super) const RINC: u32 = 0x100;

/// Sequence read/write lock: optimistic readers, shared (pointer-following) readers and
/// exclusive writers, with phase-fair arbitration between shared readers and writers. See
/// the module docs for the algorithm, orderings and proof sketch. Shared sections must not
/// nest (see the lock-order notes in [`crate::seqlock`]).
pub struct SeqRwLock {
    /// Bumped only by writers; read by optimistic readers. Own cache line, so shared
    /// readers' traffic on the words below never evicts it from optimistic readers' caches.
    seq: CachePadded<SeqCounter>,
    // The rwlock words share one line: a shared reader RMWs both `rin` and `rout`, and a
    // short section usually finds the line still local at exit (one transfer, not two).
    // Measured no worse than padding them apart on this 2-CPU machine.
    pub(super) rin: AtomicU32,
    pub(super) rout: AtomicU32,
    pub(super) win: AtomicU32,
    pub(super) wout: AtomicU32,
}

impl std::fmt::Debug for SeqRwLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Relaxed: a diagnostic snapshot; the fields may be mutually inconsistent.
        let rin = self.rin.load(Ordering::Relaxed);
        let rout = self.rout.load(Ordering::Relaxed);
        f.debug_struct("SeqRwLock")
            .field("seq", &self.sequence())
            .field("readers", &(rin.wrapping_sub(rout) / RINC))
            .field("writer_present", &(rin & PRES != 0))
            .field(
                "writers_queued",
                &self
                    .win
                    .load(Ordering::Relaxed)
                    .wrapping_sub(self.wout.load(Ordering::Relaxed)),
            )
            .finish()
    }
}

impl Default for SeqRwLock {
    fn default() -> Self {
        Self::new()
    }
}

impl SeqRwLock {
    pub fn new() -> Self {
        SeqRwLock {
            seq: CachePadded::new(SeqCounter::new()),
            rin: AtomicU32::new(0),
            rout: AtomicU32::new(0),
            win: AtomicU32::new(0),
            wout: AtomicU32::new(0),
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

    /// Registers a shared reader; returns the writer bits it saw (0: it is in).
    #[inline]
    pub(super) fn read_enter(&self) -> u32 {
        // Acquire pairs with the Release `fetch_and` in `write_unlock` (see module docs).
        self.rin.fetch_add(RINC, Ordering::Acquire) & WBITS
    }

    /// Waits for the writer whose bits `read_enter` saw to leave (or be followed).
    pub(super) fn read_wait(&self, w: u32) {
        let mut backoff = Backoff::new();
        // Acquire pairs with the Release `fetch_and` in `write_unlock`, continued by the
        // next writer's RMW on `rin` (release sequence).
        while w != 0 && self.rin.load(Ordering::Acquire) & WBITS == w {
            backoff.snooze();
        }
    }

    /// Takes the lock shared (`read_seqrwlock`): waits for at most the writer in its section
    /// (phase-fair), then excludes writers until the guard drops. Does not bump the
    /// sequence, so optimistic readers do not retry because of it.
    pub fn read_lock(&self) -> SeqReadGuard<'_> {
        let w = self.read_enter();
        self.read_wait(w);
        SeqReadGuard { lock: self }
    }

    fn read_unlock(&self) {
        // Release pairs with the writer's Acquire loads of `rout` in `write_wait_readers`.
        self.rout.fetch_add(RINC, Ordering::Release);
    }

    /// Queues a writer and announces it in `rin`; from here on no new shared reader gets in.
    /// Returns the reader ticket to wait for.
    pub(super) fn write_enter(&self) -> u32 {
        // Relaxed: the ticket orders nothing; the Acquire load of `wout` below does.
        let ticket = self.win.fetch_add(1, Ordering::Relaxed);
        let mut backoff = Backoff::new();
        // Acquire pairs with the Release `fetch_add` on `wout` in `write_unlock`.
        while self.wout.load(Ordering::Acquire) != ticket {
            backoff.snooze();
        }
        // Relaxed: exclusion comes from `rin`'s modification order (module docs).
        self.rin
            .fetch_add(PRES | (ticket & PHID), Ordering::Relaxed)
            & !WBITS
    }

    /// Waits until every reader counted in `rticket` has left, then starts the section.
    pub(super) fn write_wait_readers(&self, rticket: u32) {
        let mut backoff = Backoff::new();
        // Acquire pairs with the readers' Release `fetch_add` on `rout` in `read_unlock`.
        while self.rout.load(Ordering::Acquire) != rticket {
            backoff.snooze();
        }
        self.seq.write_begin();
    }

    /// Takes the lock exclusively (`write_seqrwlock`) and makes the sequence odd. Waits for
    /// the writers queued before it (FIFO) and the shared readers already in; blocks new
    /// shared readers from the moment it is first in line.
    pub fn write_lock(&self) -> SeqWriteGuard<'_> {
        let rticket = self.write_enter();
        self.write_wait_readers(rticket);
        SeqWriteGuard { lock: self }
    }

    fn write_unlock(&self) {
        self.seq.write_end();
        // Release pairs with the readers' Acquire RMW/loads of `rin` in `read_enter`/`read_wait`.
        self.rin.fetch_and(!WBITS, Ordering::Release);
        // Release pairs with the next writer's Acquire load of `wout` in `write_enter`.
        self.wout.fetch_add(1, Ordering::Release);
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
}

impl Drop for SeqReadGuard<'_> {
    fn drop(&mut self) {
        self.lock.read_unlock();
    }
}

/// A write section of a [`SeqRwLock`] (`write_seqrwunlock` on drop).
#[must_use = "the write section ends when the guard is dropped"]
pub struct SeqWriteGuard<'a> {
    pub(super) lock: &'a SeqRwLock,
}

impl Drop for SeqWriteGuard<'_> {
    fn drop(&mut self) {
        self.lock.write_unlock();
    }
}
