//! Hashed lock tables (Linux's kernfs hashed mutexes, spinlocks and rwsems).
//!
//! Before those patches (Linux 5.19), kernfs serialized every open/release of every sysfs file on one global
//! `kernfs_open_file_mutex` (and one `kernfs_open_node_lock`, one per-fs `kernfs_rwsem`),
//! so 200 processes reading unrelated files all queued on one lock. The patches replace
//! each global lock by a table of locks, and an object is protected by the lock its
//! *address* hashes to. Unrelated objects then mostly take different locks; the table is
//! small and fixed, so there is no per-object lock to allocate or to keep in the object.
//!
//! ## What the locks protect
//!
//! Lock `i` of a table protects whatever the table's user says belongs to the objects whose
//! address (or key) hashes to `i`, and optionally a `T` of its own (by default `()`). Two
//! objects may share a lock (a collision only costs some false contention, never
//! correctness), so code holding an object's lock must not assume it excludes only that
//! object, and must never take the same table's lock for another object without going
//! through [`lock_two`](HashedLocks::lock_two).
//!
//! ## Size
//!
//! [`table_bits`]`(ncpus)` = `2 * ilog2(min(ncpus, 32))` bits, the formula of kernfs's
//! `NR_KERNFS_LOCK_BITS`, but at least [`MIN_TABLE_BITS`] (64 locks): 64 up to 8 CPUs, 1024
//! from 32 CPUs up. Enough that the running threads rarely collide (a birthday bound over
//! ~ncpus objects wants about ncpus² buckets), few enough to stay in cache. kernfs applies
//! the formula to `NR_CPUS`, the kernel's *configured* maximum (8192 on distribution
//! kernels, so 1024 locks on any machine); we apply it to the CPUs present, and the floor
//! keeps small machines from colliding often: with 4 locks (the bare formula for 2 CPUs)
//! two threads on different objects shared a lock one time in four, which cost
//! kernfs-showgids a fifth of its 1->2 thread scaling.
//! [`with_bits`](HashedLocks::with_bits) sets the size explicitly (at most
//! [`MAX_TABLE_BITS`]); `with_bits(0)` (or [`legacy`](HashedLocks::legacy)) is the
//! "before": one global lock behind the same API.
//!
//! Every lock sits in its own [`CachePadded`] slot, so threads taking different locks never
//! share (and bounce) a cache line.
//!
//! ## Hash
//!
//! The kernel's `hash_ptr`/`hash_64`: multiply by the 64-bit golden ratio and keep the top
//! `bits` bits. The top bits of the product depend on every input bit, so the low address
//! bits, which alignment makes constant, do not decide the bucket.
//!
//! ## Lock order
//!
//! Locks of one table are ordered by their address (kernfs v6: "use address of rwsems to
//! determine locking order in case of nested locking"). [`lock_two`](HashedLocks::lock_two)
//! (and [`read_two`](HashedLocks::read_two)/[`write_two`](HashedLocks::write_two)) takes the
//! lower-addressed lock first and, if both objects hash to one lock, takes it once, so two
//! threads locking (a, b) and (b, a) cannot ABBA-deadlock and nobody self-deadlocks on a
//! collision. Never hold a lock of a table while calling `lock_*` on the same table for
//! another object. Across tables the caller defines the order.
//!
//! ## Lockstat
//!
//! All locks of one table belong to one [`LockClass`] (or none), like a kernel hashed table
//! whose locks share a lockdep class; the report shows the table as one line.
//!
//! Memory orderings are those of the underlying locks ([`Mutex`], [`RwLock`], [`SpinLock`]).

use crossbeam_utils::CachePadded;

use crate::lockstat::{LockClass, Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};
use crate::spinlock::{SpinLock, SpinLockGuard};
use crate::Locking;

/// The largest table: 65536 locks (8 MiB of padded slots).
pub const MAX_TABLE_BITS: u32 = 16;

/// The kernel's `GOLDEN_RATIO_64` (include/linux/hash.h).
const GOLDEN_RATIO_64: u64 = 0x61C8_8646_80B5_83EB;

/// The smallest scalable table: 64 locks (8 KiB of padded slots).
pub const MIN_TABLE_BITS: u32 = 6;

/// Table size in bits for `ncpus` CPUs: `2 * ilog2(min(ncpus, 32))`, at least
/// [`MIN_TABLE_BITS`].
pub fn table_bits(ncpus: usize) -> u32 {
    (2 * ncpus.clamp(1, 32).ilog2()).max(MIN_TABLE_BITS)
}

/// `hash_64(val, bits)`: the top `bits` bits of `val * GOLDEN_RATIO_64`; 0 if `bits == 0`.
/// `bits` above 63 count as 63 (tables have at most [`MAX_TABLE_BITS`]).
#[inline]
pub fn hash_64(val: u64, bits: u32) -> u64 {
    let bits = bits.min(63);
    // `(h >> 1) >> (63 - bits)` is `h >> (64 - bits)` for bits >= 1, and 0 for bits == 0,
    // without a branch or an overlong shift.
    (val.wrapping_mul(GOLDEN_RATIO_64) >> 1) >> (63 - bits)
}

/// A lock that can sit in a hashed table.
pub trait TableLock {
    /// The data each lock protects.
    type Data;
    /// An unlocked lock around `v`, of class `class`.
    fn make(v: Self::Data, class: Option<&'static LockClass>) -> Self;
}

/// A lock with an exclusive acquisition ([`Mutex`], [`SpinLock`]).
pub trait ExclusiveLock: TableLock {
    /// Holds the lock; gives access to the data.
    type Guard<'a>: std::ops::DerefMut<Target = Self::Data>
    where
        Self: 'a;
    /// Blocks until the lock is held.
    fn lock_exclusive(&self) -> Self::Guard<'_>;
}

macro_rules! table_lock {
    ($lock:ident, $guard:ident) => {
        impl<T> TableLock for $lock<T> {
            type Data = T;
            fn make(v: T, class: Option<&'static LockClass>) -> Self {
                match class {
                    Some(c) => $lock::with_class(v, c),
                    None => $lock::new(v),
                }
            }
        }
    };
    ($lock:ident, $guard:ident, exclusive) => {
        table_lock!($lock, $guard);
        impl<T> ExclusiveLock for $lock<T> {
            type Guard<'a>
                = $guard<'a, T>
            where
                T: 'a;
            #[inline]
            fn lock_exclusive(&self) -> $guard<'_, T> {
                self.lock()
            }
        }
    };
}
table_lock!(Mutex, MutexGuard, exclusive);
table_lock!(SpinLock, SpinLockGuard, exclusive);
table_lock!(RwLock, RwLockWriteGuard);

/// A table of `2^bits` cache-padded locks, indexed by a hash of an address or a key.
pub struct HashedLocks<L> {
    locks: Box<[CachePadded<L>]>,
    bits: u32,
}

/// Hashed mutexes (kernfs's `open_file_mutex` table).
pub type HashedMutexes<T = ()> = HashedLocks<Mutex<T>>;
/// Hashed spinlocks (kernfs's `open_node_lock` table).
pub type HashedSpinLocks<T = ()> = HashedLocks<SpinLock<T>>;
/// Hashed reader-writer locks (kernfs's hashed `kernfs_rwsem`).
pub type HashedRwLocks<T = ()> = HashedLocks<RwLock<T>>;

impl<L: TableLock> HashedLocks<L> {
    /// A table of `2^min(bits, MAX_TABLE_BITS)` locks of class `class`, lock `i` protecting
    /// `init(i)`.
    pub fn from_fn(
        bits: u32,
        class: Option<&'static LockClass>,
        mut init: impl FnMut(usize) -> L::Data,
    ) -> Self {
        let bits = bits.min(MAX_TABLE_BITS);
        let locks = (0..1usize << bits)
            .map(|i| CachePadded::new(L::make(init(i), class)))
            .collect();
        HashedLocks { locks, bits }
    }
}

impl<L: TableLock> HashedLocks<L>
where
    L::Data: Default,
{
    /// The scalable table, sized for this machine ([`table_bits`] of the CPU count).
    pub fn new() -> Self {
        Self::new_for(Locking::Scalable)
    }

    /// The scalable table, or for [`Locking::Legacy`] the one-lock table.
    pub fn new_for(locking: Locking) -> Self {
        Self::from_fn(Self::bits_for(locking), None, |_| L::Data::default())
    }

    /// [`new_for`](Self::new_for) with every lock of class `class`.
    pub fn new_for_class(locking: Locking, class: &'static LockClass) -> Self {
        Self::from_fn(Self::bits_for(locking), Some(class), |_| L::Data::default())
    }

    /// A table of `2^bits` locks (`bits` is clamped to [`MAX_TABLE_BITS`]).
    pub fn with_bits(bits: u32) -> Self {
        Self::from_fn(bits, None, |_| L::Data::default())
    }

    /// [`with_bits`](Self::with_bits) with every lock of class `class`.
    pub fn with_bits_and_class(bits: u32, class: &'static LockClass) -> Self {
        Self::from_fn(bits, Some(class), |_| L::Data::default())
    }

    /// The "before" design: one global lock behind the same API.
    pub fn legacy() -> Self {
        Self::with_bits(0)
    }

    fn bits_for(locking: Locking) -> u32 {
        match locking {
            Locking::Legacy => 0,
            Locking::Scalable => table_bits(crate::cpu::num_cpus()),
        }
    }
}

impl<L: TableLock> Default for HashedLocks<L>
where
    L::Data: Default,
{
    fn default() -> Self {
        Self::new()
    }
}

impl<L> HashedLocks<L> {
    /// log2 of the number of locks.
    pub fn bits(&self) -> u32 {
        self.bits
    }

    /// The number of locks (`2^bits`).
    pub fn len(&self) -> usize {
        self.locks.len()
    }

    /// Always false: a table has at least one lock.
    pub fn is_empty(&self) -> bool {
        self.locks.is_empty()
    }

    /// The index of the lock protecting the object at `p` (only the address is used).
    #[inline]
    pub fn index_of_ptr<T: ?Sized>(&self, p: *const T) -> usize {
        hash_64(p.cast::<()>() as usize as u64, self.bits) as usize
    }

    /// The index of the lock protecting key `k`.
    #[inline]
    pub fn index_of_key(&self, k: u64) -> usize {
        hash_64(k, self.bits) as usize
    }

    /// Lock `index`.
    ///
    /// # Panics
    ///
    /// If `index >= self.len()`; indices from `index_of_*` are always in range.
    #[inline]
    pub fn get(&self, index: usize) -> &L {
        &self.locks[index]
    }

    /// The lock protecting the object at `p`.
    #[inline]
    pub fn get_ptr<T: ?Sized>(&self, p: *const T) -> &L {
        self.get(self.index_of_ptr(p))
    }

    /// The lock protecting key `k`.
    #[inline]
    pub fn get_key(&self, k: u64) -> &L {
        self.get(self.index_of_key(k))
    }

    /// Acquires locks `i` and `j` with `acquire`, in address order, `i`'s guard first in
    /// the result; the second is `None` if `i == j` (one lock, taken once).
    #[inline]
    fn two<'a, G>(&'a self, i: usize, j: usize, acquire: impl Fn(&'a L) -> G) -> (G, Option<G>) {
        let (a, b) = (self.get(i), self.get(j));
        if i == j {
            return (acquire(a), None);
        }
        if (a as *const L) < (b as *const L) {
            let ga = acquire(a);
            (ga, Some(acquire(b)))
        } else {
            let gb = acquire(b);
            (acquire(a), Some(gb))
        }
    }
}

impl<L: ExclusiveLock> HashedLocks<L> {
    /// Locks the lock protecting the object at `p`.
    #[inline]
    pub fn lock_ptr<T: ?Sized>(&self, p: *const T) -> L::Guard<'_> {
        self.get_ptr(p).lock_exclusive()
    }

    /// Locks the lock protecting key `k`.
    #[inline]
    pub fn lock_key(&self, k: u64) -> L::Guard<'_> {
        self.get_key(k).lock_exclusive()
    }

    /// Locks the locks of the objects at `a` and `b` without ABBA deadlock (see the module
    /// docs): `(a's guard, b's guard or None if they share a lock)`.
    #[inline]
    pub fn lock_two<A: ?Sized, B: ?Sized>(
        &self,
        a: *const A,
        b: *const B,
    ) -> (L::Guard<'_>, Option<L::Guard<'_>>) {
        self.lock_two_at(self.index_of_ptr(a), self.index_of_ptr(b))
    }

    /// [`lock_two`](Self::lock_two) for keys.
    #[inline]
    pub fn lock_two_keys(&self, a: u64, b: u64) -> (L::Guard<'_>, Option<L::Guard<'_>>) {
        self.lock_two_at(self.index_of_key(a), self.index_of_key(b))
    }

    /// [`lock_two`](Self::lock_two) for lock indices (panics if out of range).
    #[inline]
    pub fn lock_two_at(&self, i: usize, j: usize) -> (L::Guard<'_>, Option<L::Guard<'_>>) {
        self.two(i, j, L::lock_exclusive)
    }
}

type Pair<G> = (G, Option<G>);

impl<T> HashedLocks<RwLock<T>> {
    /// Shared hold of the lock protecting the object at `p`.
    #[inline]
    pub fn read_ptr<P: ?Sized>(&self, p: *const P) -> RwLockReadGuard<'_, T> {
        self.get_ptr(p).read()
    }

    /// Exclusive hold of the lock protecting the object at `p`.
    #[inline]
    pub fn write_ptr<P: ?Sized>(&self, p: *const P) -> RwLockWriteGuard<'_, T> {
        self.get_ptr(p).write()
    }

    /// Shared hold of the lock protecting key `k`.
    #[inline]
    pub fn read_key(&self, k: u64) -> RwLockReadGuard<'_, T> {
        self.get_key(k).read()
    }

    /// Exclusive hold of the lock protecting key `k`.
    #[inline]
    pub fn write_key(&self, k: u64) -> RwLockWriteGuard<'_, T> {
        self.get_key(k).write()
    }

    /// Shared holds for the objects at `a` and `b`, in address order, one if they collide.
    /// (Ordering matters for readers too: a queued writer blocks new readers.)
    #[inline]
    pub fn read_two<A: ?Sized, B: ?Sized>(
        &self,
        a: *const A,
        b: *const B,
    ) -> Pair<RwLockReadGuard<'_, T>> {
        self.two(self.index_of_ptr(a), self.index_of_ptr(b), RwLock::read)
    }

    /// Exclusive holds for the objects at `a` and `b`, in address order, one if they collide.
    #[inline]
    pub fn write_two<A: ?Sized, B: ?Sized>(
        &self,
        a: *const A,
        b: *const B,
    ) -> Pair<RwLockWriteGuard<'_, T>> {
        self.two(self.index_of_ptr(a), self.index_of_ptr(b), RwLock::write)
    }

    /// [`write_two`](Self::write_two) for lock indices (panics if out of range).
    #[inline]
    pub fn write_two_at(&self, i: usize, j: usize) -> Pair<RwLockWriteGuard<'_, T>> {
        self.two(i, j, RwLock::write)
    }

    /// [`read_two`](Self::read_two) for lock indices (panics if out of range).
    #[inline]
    pub fn read_two_at(&self, i: usize, j: usize) -> Pair<RwLockReadGuard<'_, T>> {
        self.two(i, j, RwLock::read)
    }
}

impl<L> std::fmt::Debug for HashedLocks<L> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HashedLocks")
            .field("bits", &self.bits)
            .finish()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::lockstat;
    use rand::{Rng, SeedableRng};
    use std::sync::Arc;

    #[test]
    #[cfg_attr(
        miri,
        ignore = "builds a 65536-lock table: 20 s interpreted, for arithmetic, not unsafe code"
    )]
    fn table_bits_follow_kernfs() {
        assert_eq!(table_bits(0), MIN_TABLE_BITS);
        assert_eq!(table_bits(1), MIN_TABLE_BITS);
        assert_eq!(table_bits(2), MIN_TABLE_BITS);
        assert_eq!(table_bits(3), MIN_TABLE_BITS);
        assert_eq!(table_bits(8), 6);
        assert_eq!(table_bits(16), 8);
        assert_eq!(table_bits(32), 10);
        assert_eq!(table_bits(384), 10);
        let t = HashedMutexes::<()>::new();
        assert_eq!(t.len(), 1 << table_bits(crate::cpu::num_cpus()));
        assert!(t.len() >= 2 && !t.is_empty());
        assert_eq!(HashedSpinLocks::<()>::with_bits(99).bits(), MAX_TABLE_BITS);
    }

    #[test]
    fn legacy_is_one_lock() {
        let t = HashedMutexes::<u32>::new_for(Locking::Legacy);
        assert_eq!((t.len(), t.bits()), (1, 0));
        assert_eq!(HashedRwLocks::<()>::legacy().len(), 1);
        let (x, y) = (1u8, 2u8);
        assert_eq!(t.index_of_ptr(&x), 0);
        assert_eq!(t.index_of_key(u64::MAX), 0);
        // Two objects on the one lock: taken once, no self-deadlock.
        let (mut g, none) = t.lock_two(&x, &y);
        assert!(none.is_none());
        *g += 1;
        drop(g);
        assert_eq!(*t.lock_key(7), 1);
    }

    #[test]
    fn hash_spreads_aligned_addresses() {
        // 64-byte-aligned objects: the low 6 address bits are constant.
        let objs: Vec<CachePadded<u64>> = (0..4096).map(CachePadded::new).collect();
        let t = HashedSpinLocks::<()>::with_bits(6);
        let mut hits = [0usize; 64];
        for o in &objs {
            hits[t.index_of_ptr(&**o)] += 1;
        }
        // 64 objects per lock on average; a hash that kept the low bits would use one lock.
        assert!(hits.iter().all(|&h| h > 16), "{hits:?}");
        // Consecutive keys spread as well.
        let mut seen = [false; 64];
        (0..1024).for_each(|k| seen[t.index_of_key(k)] = true);
        assert!(seen.iter().all(|&s| s));
        assert_eq!(hash_64(12345, 0), 0);
        assert!(hash_64(u64::MAX, 63) < 1 << 63);
        assert_eq!(hash_64(u64::MAX, 99), hash_64(u64::MAX, 63));
    }

    #[test]
    fn lock_two_same_object_and_order() {
        let t = HashedMutexes::<u32>::from_fn(3, None, |i| i as u32);
        let (g, none) = t.lock_two_at(5, 5);
        assert_eq!((*g, none.is_none()), (5, true));
        drop(g);
        // Guards come back in argument order, whatever the lock order.
        let (ga, gb) = t.lock_two_at(6, 1);
        assert_eq!((*ga, *gb.unwrap()), (6, 1));
        let (ga, gb) = t.lock_two_keys(3, 3);
        assert!(gb.is_none());
        assert_eq!(*ga as usize, t.index_of_key(3));
        let rw = HashedRwLocks::<u32>::from_fn(2, None, |i| i as u32);
        let (r1, r2) = rw.read_two_at(3, 0);
        let (r3, _) = rw.read_two_at(0, 3);
        assert_eq!((*r1, *r2.unwrap(), *r3), (3, 0, 0));
    }

    /// Threads lock random pairs (a quarter of them equal) of 64 objects through a small
    /// table, so pairs collide and cross in both orders all the time. A deadlock hangs the
    /// test; a broken exclusion loses an increment of the per-lock counters, whose total must
    /// equal the number of distinct locks taken.
    fn stress_pairs<L: ExclusiveLock<Data = u64> + Send + Sync + 'static>(
        table: HashedLocks<L>,
    ) -> u64 {
        fn bump(g: &mut u64) {
            let v = *g;
            std::hint::black_box(&v);
            *g = v + 1;
        }
        // Fewer under Miri, which interprets (about 1000x slower).
        const THREADS: u64 = if cfg!(miri) { 3 } else { 32 };
        const OPS: u64 = if cfg!(miri) { 20 } else { 10_000 };
        let table = Arc::new(table);
        let objs: Arc<Vec<u64>> = Arc::new((0..64).collect());
        let ts: Vec<_> = (0..THREADS)
            .map(|seed| {
                let (table, objs) = (Arc::clone(&table), Arc::clone(&objs));
                std::thread::spawn(move || {
                    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
                    let mut taken = 0;
                    for _ in 0..OPS {
                        let a = rng.gen_range(0..objs.len());
                        let b = if rng.gen_bool(0.25) {
                            a
                        } else {
                            rng.gen_range(0..objs.len())
                        };
                        let (mut ga, gb) = table.lock_two(&objs[a], &objs[b]);
                        bump(&mut ga);
                        taken += 1;
                        if let Some(mut gb) = gb {
                            bump(&mut gb);
                            taken += 1;
                        }
                    }
                    taken
                })
            })
            .collect();
        let taken: u64 = ts.into_iter().map(|t| t.join().unwrap()).sum();
        let sum: u64 = (0..table.len())
            .map(|i| *table.get(i).lock_exclusive())
            .sum();
        assert_eq!(sum, taken);
        taken
    }

    #[test]
    #[cfg(feature = "lockstat")]
    fn stress_lock_two_mutexes_with_lockstat() {
        static C: LockClass = LockClass::new("test_hashed_mutexes");
        let _s = lockstat::test_serial();
        lockstat::enable();
        let t = HashedMutexes::<u64>::from_fn(3, Some(&C), |_| 0);
        let taken = stress_pairs(t);
        lockstat::disable();
        // The final sum's 8 locks were taken too.
        assert_eq!(C.stats().write.acquisitions, taken + 8);
        assert_eq!(C.stats().read.acquisitions, 0);
    }

    #[test]
    fn stress_lock_two_spinlocks_lockstat_off() {
        static C: LockClass = LockClass::new("test_hashed_spin_off");
        let _s = lockstat::test_serial();
        lockstat::disable();
        let t = HashedSpinLocks::<u64>::from_fn(3, Some(&C), |_| 0);
        stress_pairs(t);
        assert_eq!(C.stats().write, lockstat::KindStats::default());
    }

    #[test]
    fn stress_lock_two_legacy() {
        let t = HashedSpinLocks::<u64>::legacy();
        assert!(stress_pairs(t) > 0);
    }

    /// Writers bump the counters of a pair of locks under `write_two`; readers, holding
    /// `read_two`, must see both counters stable across a yield (no writer inside), and the
    /// counters' total must equal the number of write holds.
    #[test]
    fn stress_rwlock_pairs() {
        let t = Arc::new(HashedRwLocks::<u64>::from_fn(2, None, |_| 0));
        // Fewer under Miri, which interprets (about 1000x slower).
        let (threads, ops) = if cfg!(miri) { (4u64, 20) } else { (16, 5_000) };
        let ts: Vec<_> = (0..threads)
            .map(|seed| {
                let t = Arc::clone(&t);
                std::thread::spawn(move || {
                    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
                    let mut written = 0;
                    for _ in 0..ops {
                        let (a, b) = (rng.gen_range(0..4u64), rng.gen_range(0..4u64));
                        if seed % 2 == 0 {
                            let (mut ga, gb) = t.write_two_at(a as usize, b as usize);
                            *ga += 1;
                            written += 1;
                            if let Some(mut gb) = gb {
                                *gb += 1;
                                written += 1;
                            }
                        } else {
                            let (ra, rb) = t.read_two_at(a as usize, b as usize);
                            let before = (*ra, rb.as_ref().map(|g| **g));
                            std::thread::yield_now();
                            assert_eq!(before, (*ra, rb.as_ref().map(|g| **g)));
                        }
                    }
                    written
                })
            })
            .collect();
        let written: u64 = ts.into_iter().map(|t| t.join().unwrap()).sum();
        let total: u64 = (0..t.len()).map(|i| *t.get(i).read()).sum();
        assert_eq!(total, written);
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;
    use loom::sync::Arc;

    /// Two threads lock (0, 1) and (1, 0) of a two-lock table. Without address ordering
    /// loom finds the ABBA deadlock; with it every interleaving completes, and the guards
    /// come back in argument order.
    #[test]
    fn loom_lock_two_orders_by_address() {
        loom::model(|| {
            let t = Arc::new(HashedMutexes::<usize>::from_fn(1, None, |i| i));
            let t2 = Arc::clone(&t);
            let th = loom::thread::spawn(move || {
                let (ga, gb) = t2.lock_two_at(1, 0);
                assert_eq!((*ga, *gb.unwrap()), (1, 0));
            });
            let (ga, gb) = t.lock_two_at(0, 1);
            assert_eq!((*ga, *gb.unwrap()), (0, 1));
            drop(ga);
            th.join().unwrap();
        });
    }

    /// The same with spinlocks and a collision: (0, 0) takes the lock once.
    #[test]
    fn loom_spin_lock_two_with_collision() {
        loom::model(|| {
            let t = Arc::new(HashedSpinLocks::<usize>::from_fn(1, None, |_| 0));
            let t2 = Arc::clone(&t);
            let th = loom::thread::spawn(move || {
                let (mut ga, gb) = t2.lock_two_at(1, 0);
                *ga += 1;
                *gb.unwrap() += 1;
            });
            let (mut g, none) = t.lock_two_at(0, 0);
            assert!(none.is_none());
            *g += 1;
            drop(g);
            th.join().unwrap();
            assert_eq!((*t.get(0).lock(), *t.get(1).lock()), (2, 1));
        });
    }
}
