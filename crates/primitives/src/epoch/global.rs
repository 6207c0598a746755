//! The shared half of the collector: the global epoch, the registry of participant records,
//! and the orphan list of exited threads' bags. See the [module docs](super) for the
//! algorithm and the ordering argument; the line numbers there refer to the steps marked
//! `(A1)`..(A4)` here.

use crossbeam_utils::CachePadded;

use super::deferred::SealedBag;
use crate::spinlock::SpinLock;
use crate::sync::{fence, yield_now, Arc, AtomicBool, AtomicU64, AtomicUsize, Ordering};

/// The low bit of a participant's state: set while the thread is pinned.
pub(super) const PINNED: u64 = 1;

/// One thread's record: the epoch it observed when it last pinned, shifted left by one,
/// and [`PINNED`]. Written only by its thread (pin, unpin); read by advancing threads.
/// Cache-line aligned so that no other thread's writes share its line.
pub(super) struct Participant {
    pub(super) state: AtomicU64,
}

/// A registered participant: the registry and the thread share it.
pub(super) type Record = Arc<CachePadded<Participant>>;

/// What threads change only when they register, exit or advance (the rare paths).
struct Rare {
    /// Every live thread's record. Scanned under the lock by advancing threads; changed
    /// under it by registering and exiting threads. A leaf lock.
    registry: SpinLock<Vec<Record>>,
    /// Bags of exited threads, stamped; adopted by the next collecting thread. A leaf lock.
    orphans: SpinLock<Vec<SealedBag>>,
    /// Whether `orphans` may be non-empty: lets a collecting thread skip the lock.
    has_orphans: AtomicBool,
    /// Threads registered so far (staggers their first bags; see `Local::bag_limit`).
    registrations: AtomicUsize,
}

/// A collector: one global epoch and the threads registered with it. The process has one
/// (behind [`super::pin`]); tests and loom models make their own.
pub struct Global {
    /// The global epoch. Written only when it advances (one successful CAS per advance);
    /// read by every pin. On a line of its own so that nothing else's writes evict it.
    epoch: CachePadded<AtomicU64>,
    rare: CachePadded<Rare>,
    /// The grace-period thread, if this collector has one.
    #[cfg(not(any(loom, miri)))]
    advancer: Option<CachePadded<super::advancer::Advancer>>,
}

impl Drop for Global {
    fn drop(&mut self) {
        #[cfg(not(any(loom, miri)))]
        if let Some(adv) = self.advancer() {
            super::advancer::stop(adv);
        }
        for bag in std::mem::take(&mut *self.rare.orphans.lock()) {
            // SAFETY: every participant holds a reference to its collector, so none is
            // left: nobody is pinned, and nothing can reach what the bags free. (Exiting
            // threads orphaned every bag they had.)
            unsafe { bag.run() };
        }
    }
}

impl Default for Global {
    fn default() -> Self {
        Self::new()
    }
}

impl Global {
    /// A collector at epoch 0 with no participants, whose sealing threads advance the
    /// epoch themselves.
    pub fn new() -> Self {
        Global {
            epoch: CachePadded::new(AtomicU64::new(0)),
            rare: CachePadded::new(Rare {
                registry: SpinLock::new(Vec::new()),
                orphans: SpinLock::new(Vec::new()),
                has_orphans: AtomicBool::new(false),
                registrations: AtomicUsize::new(0),
            }),
            #[cfg(not(any(loom, miri)))]
            advancer: None,
        }
    }

    /// A collector whose epoch is advanced by a grace-period thread, spawned on the first
    /// full bag (see `advancer`). Under loom and Miri, the same as [`Global::new`].
    pub fn with_advancer() -> Self {
        #[allow(unused_mut)]
        let mut global = Self::new();
        #[cfg(not(any(loom, miri)))]
        {
            global.advancer = Some(CachePadded::new(Default::default()));
        }
        global
    }

    /// The grace-period thread's state, if the collector has one.
    #[cfg(not(any(loom, miri)))]
    pub(super) fn advancer(&self) -> Option<&super::advancer::Advancer> {
        self.advancer.as_deref()
    }

    /// The global epoch, read without ordering (pin reads it so; see the module docs).
    #[inline]
    pub(super) fn epoch_relaxed(&self) -> u64 {
        self.epoch.load(Ordering::Relaxed)
    }

    /// The global epoch, as a collecting thread reads it before freeing.
    pub(super) fn epoch_acquire(&self) -> u64 {
        // Acquire: pairs with the Release CAS of the advance (A4) that wrote this value or
        // an earlier one of its release sequence (every write of the epoch is a CAS), so
        // what that advance's scan acquired happens-before the frees that follow.
        self.epoch.load(Ordering::Acquire)
    }

    /// Adds a participant record (once per thread; writes the registry's line).
    /// Returns the record and how many threads registered before.
    pub(super) fn register(&self) -> (Record, usize) {
        let record = Arc::new(CachePadded::new(Participant {
            state: AtomicU64::new(0),
        }));
        let mut registry = self.rare.registry.lock();
        registry.push(record.clone());
        // Relaxed: a count of registrations, read only here (under the registry lock).
        let ordinal = self.rare.registrations.fetch_add(1, Ordering::Relaxed);
        drop(registry);
        (record, ordinal)
    }

    /// Removes a participant record (thread exit). The thread is not pinned.
    pub(super) fn unregister(&self, record: &Record) {
        let mut registry = self.rare.registry.lock();
        if let Some(i) = registry.iter().position(|r| Arc::ptr_eq(r, record)) {
            registry.swap_remove(i);
        }
    }

    /// Number of registered participants (tests).
    pub fn participants(&self) -> usize {
        self.rare.registry.lock().len()
    }

    /// Hands an exited thread's bags to whichever thread collects next.
    pub(super) fn push_orphans(&self, bags: impl IntoIterator<Item = SealedBag>) {
        let mut orphans = self.rare.orphans.lock();
        orphans.extend(bags);
        if !orphans.is_empty() {
            // Relaxed: a hint only; the lock orders the bags themselves.
            self.rare.has_orphans.store(true, Ordering::Relaxed);
        }
    }

    /// Takes the orphaned bags, if any (one relaxed load when there are none).
    pub(super) fn take_orphans(&self) -> Vec<SealedBag> {
        // Relaxed: a hint; a bag pushed just after this load is adopted next time.
        if !self.rare.has_orphans.load(Ordering::Relaxed) {
            return Vec::new();
        }
        let mut orphans = self.rare.orphans.lock();
        self.rare.has_orphans.store(false, Ordering::Relaxed);
        std::mem::take(&mut *orphans)
    }

    /// Stamps a bag being sealed: the epoch read after a `SeqCst` fence (S1, S2), which
    /// orders every unlink before it against every pin (see "Why a freed object is
    /// unreachable" in the module docs).
    pub(super) fn seal_epoch(&self) -> u64 {
        // (S1) SeqCst: the fence F_W of the argument.
        fence(Ordering::SeqCst);
        // (S2) Relaxed: the fence orders it.
        self.epoch.load(Ordering::Relaxed)
    }

    /// One attempt to advance the global epoch by one: succeeds if every pinned
    /// participant has observed the current epoch. Returns the epoch afterwards (the new
    /// one, or whatever another thread advanced it to), read with acquire semantics.
    ///
    /// `wait`: take the registry lock even if another thread holds it (flush, synchronize);
    /// otherwise give up at once, since the holder is advancing anyway.
    pub(super) fn try_advance(&self, wait: bool) -> u64 {
        // (A1) Relaxed, and before the fence: see the module docs (an advance from E+1
        // read E+1 before its fence, which orders its fence after the sealer's).
        let cur = self.epoch.load(Ordering::Relaxed);
        let registry = if wait {
            self.rare.registry.lock()
        } else {
            match self.rare.registry.try_lock() {
                Some(r) => r,
                None => return self.epoch_acquire(),
            }
        };
        // (A2) SeqCst: the fence F_A of the argument; every pin whose fence precedes it in
        // the single total order is visible to the loads below.
        fence(Ordering::SeqCst);
        for p in registry.iter() {
            // (A3) Acquire: pairs with the Release store of `unpin` (or of a later pin),
            // so everything the participant did while pinned at an older epoch
            // happens-before the frees this advance allows.
            let s = p.state.load(Ordering::Acquire);
            if s & PINNED != 0 && s >> 1 != cur {
                return self.epoch_acquire();
            }
        }
        drop(registry);
        // (A4) Release on success: pairs with `epoch_acquire` of collecting threads.
        // Acquire on failure: the value read is used like `epoch_acquire`'s. A CAS, not a
        // store: two advancers that both scanned at `cur` must advance once, not move the
        // epoch back after a third advanced it further.
        match self
            .epoch
            .compare_exchange(cur, cur + 1, Ordering::Release, Ordering::Acquire)
        {
            Ok(_) => cur + 1,
            Err(now) => now,
        }
    }

    /// Advances until the epoch is at least `target`, yielding between attempts. The
    /// caller must not be pinned (its own pin would hold the epoch back forever).
    pub(super) fn advance_to(&self, target: u64) {
        let mut spins = 0u32;
        while self.try_advance(true) < target {
            spins = spins.saturating_add(1);
            if spins > 16 {
                #[cfg(not(loom))]
                std::thread::sleep(std::time::Duration::from_micros(50));
            }
            yield_now();
        }
    }
}
