//! The handle registry: what a C caller holds is a generation-checked slot number, never a
//! pointer to Rust memory.
//!
//! A handle is 64 bits: the slot index (24 bits), a type tag (8 bits: a `svfs_vfs *`
//! passed where a `svfs_process *` is expected is simply not found) and the slot's
//! generation (32 bits, bumped when the object is dropped). Slots live in chunks that are
//! allocated on first use and never freed, so looking up a handle that was freed, never
//! issued, or is garbage reads a valid slot or none at all: `EBADF`, never a use after
//! free. (A handle is only reused after its slot's generation wraps: 2^32 frees of one
//! slot.)
//!
//! ## One word per slot
//!
//! A slot's `state` packs the generation, a `LIVE` bit (it holds an object that calls
//! may use), a `DEAD` bit (its object was freed and waits for the calls still inside it)
//! and the number of calls inside it. A call [`enter`](Registry::enter)s with one
//! `fetch_add` (which also tells it whether the generation matches and the slot is
//! live) and leaves with one `fetch_sub`: two atomic operations on the slot's line per
//! call, no lock. [`free`](Registry::free) clears `LIVE` and sets `DEAD` in one CAS, so
//! exactly one of two racing frees wins (a double free is `EBADF`), runs the object's
//! last rites (process exit) and leaves like a call. Whoever leaves last while `DEAD` is
//! set claims the object with a CAS that clears `DEAD` and bumps the generation, drops
//! it and returns the slot to the free list. So freeing a handle while another thread
//! is inside a call with it (blocked in `F_SETLKW`, say) does not wait for that call:
//! the call finishes on the object, which goes when it leaves.
//!
//! A stale handle's `enter` increments the count of whatever the slot holds now, sees
//! the generation differ and leaves; it may end up being the last to leave a dead object
//! and drop it, which is fine: nobody is inside it.

use std::ops::Deref;
use std::sync::atomic::{AtomicPtr, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use parking_lot::Mutex;
use scalevfs_rs::Errno;

#[cfg(not(target_pointer_width = "64"))]
compile_error!("scalevfs-capi encodes 64-bit handles in pointers: 64-bit targets only");

/// Slots per chunk.
const CHUNK: usize = 4096;
/// Chunks: at most `CHUNK * CHUNKS` (1 Mi) live handles of one type.
const CHUNKS: usize = 256;
const INDEX_BITS: u32 = 24;
const INDEX_MASK: u64 = (1 << INDEX_BITS) - 1;

/// `state`: the generation in the high half, then these bits, then the call count.
const GEN_SHIFT: u32 = 32;
const GEN_ONE: u64 = 1 << GEN_SHIFT;
const LIVE: u64 = 1 << 31;
const DEAD: u64 = 1 << 30;
const COUNT_MASK: u64 = DEAD - 1;

/// One slot: its state word and the object (`Arc::into_raw`, null when empty).
struct Slot<T> {
    state: AtomicU64,
    value: AtomicPtr<T>,
}

impl<T> Default for Slot<T> {
    fn default() -> Self {
        Slot {
            state: AtomicU64::new(GEN_ONE),
            value: AtomicPtr::new(std::ptr::null_mut()),
        }
    }
}

/// Slots handed out so far (`next`) and the empty ones to reuse.
struct FreeList {
    next: usize,
    free: Vec<usize>,
}

/// The handles of one type (`tag`).
pub(crate) struct Registry<T> {
    tag: u8,
    chunks: [OnceLock<Box<[Slot<T>]>>; CHUNKS],
    free: Mutex<FreeList>,
}

/// A call inside the object a handle names: derefs to it; leaving drops the count.
pub(crate) struct Ref<'a, T: Send + Sync> {
    registry: &'a Registry<T>,
    index: usize,
    value: *const T,
}

impl<T: Send + Sync> Deref for Ref<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: `value` came from `Arc::into_raw` in `insert` and this `Ref` entered the
        // slot while it was LIVE with the handle's generation; the object is dropped only
        // by the last to leave after a free, and this `Ref` has not left yet.
        unsafe { &*self.value }
    }
}

impl<T: Send + Sync> Drop for Ref<'_, T> {
    fn drop(&mut self) {
        self.registry.leave(self.index);
    }
}

impl<T: Send + Sync> Registry<T> {
    pub(crate) const fn new(tag: u8) -> Self {
        Registry {
            tag,
            chunks: [const { OnceLock::new() }; CHUNKS],
            free: Mutex::new(FreeList {
                next: 0,
                free: Vec::new(),
            }),
        }
    }

    fn slot(&self, index: usize) -> Option<&Slot<T>> {
        self.chunks
            .get(index / CHUNK)?
            .get()
            .map(|chunk| &chunk[index % CHUNK])
    }

    /// Registers `value`; `None` when every slot is in use.
    pub(crate) fn insert(&self, value: Arc<T>) -> Option<u64> {
        let index = {
            let mut fl = self.free.lock();
            match fl.free.pop() {
                Some(i) => i,
                None if fl.next < CHUNK * CHUNKS => {
                    fl.next += 1;
                    fl.next - 1
                }
                None => return None,
            }
        };
        let slot = &self.chunks[index / CHUNK]
            .get_or_init(|| (0..CHUNK).map(|_| Slot::default()).collect())[index % CHUNK];
        // An empty slot: neither LIVE nor DEAD (stale handles may be passing through its
        // count). The object first, then LIVE (Release: a call that sees LIVE sees it).
        slot.value
            .store(Arc::into_raw(value).cast_mut(), Ordering::Relaxed);
        let s = slot.state.fetch_or(LIVE, Ordering::Release);
        debug_assert_eq!(s & (LIVE | DEAD), 0);
        Some(s & !(GEN_ONE - 1) | u64::from(self.tag) << INDEX_BITS | index as u64)
    }

    /// The slot index and generation a handle names, if it has this registry's tag.
    fn decode(&self, handle: u64) -> Option<(usize, u64)> {
        if (handle >> INDEX_BITS) as u8 != self.tag {
            return None;
        }
        let index = (handle & INDEX_MASK) as usize;
        self.slot(index)?;
        Some((index, handle >> GEN_SHIFT))
    }

    /// Enters the object `handle` names: `EBADF` for a freed, stale or made-up handle.
    pub(crate) fn enter(&self, handle: u64) -> Result<Ref<'_, T>, Errno> {
        let (index, generation) = self.decode(handle).ok_or(Errno::EBADF)?;
        let slot = self.slot(index).ok_or(Errno::EBADF)?;
        let s = slot.state.fetch_add(1, Ordering::Acquire);
        if s >> GEN_SHIFT != generation || s & LIVE == 0 {
            self.leave(index);
            return Err(Errno::EBADF);
        }
        Ok(Ref {
            registry: self,
            index,
            value: slot.value.load(Ordering::Acquire),
        })
    }

    /// Leaves a slot; the last to leave a freed object drops it.
    fn leave(&self, index: usize) {
        let Some(slot) = self.slot(index) else {
            return;
        };
        let mut s = slot.state.fetch_sub(1, Ordering::AcqRel) - 1;
        while s & COUNT_MASK == 0 && s & DEAD != 0 {
            // Claim the object: clear DEAD, bump the generation (count 0, not LIVE).
            let empty = (s & !(GEN_ONE - 1)).wrapping_add(GEN_ONE);
            match slot
                .state
                .compare_exchange(s, empty, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => {
                    let p = slot.value.swap(std::ptr::null_mut(), Ordering::Acquire);
                    // SAFETY: `p` came from `Arc::into_raw` in `insert`; only the one CAS
                    // that clears DEAD gets here for it, and nobody is inside the object
                    // (count 0; new calls see it is not LIVE and do not touch `value`).
                    drop(unsafe { Arc::from_raw(p) });
                    self.free.lock().free.push(index);
                    return;
                }
                // Someone entered (and will leave, and retry) or claimed it first.
                Err(cur) => s = cur,
            }
        }
    }

    /// Frees `handle`: `EBADF` if it does not name a live object (so a double free is an
    /// error, not a crash). Otherwise runs `last_rites` on the object (which calls made
    /// before may still be using) and returns; the object goes when the last call leaves.
    pub(crate) fn free(&self, handle: u64, last_rites: impl FnOnce(&T)) -> Result<(), Errno> {
        let (index, generation) = self.decode(handle).ok_or(Errno::EBADF)?;
        let slot = self.slot(index).ok_or(Errno::EBADF)?;
        let mut s = slot.state.load(Ordering::Acquire);
        loop {
            if s >> GEN_SHIFT != generation || s & LIVE == 0 {
                return Err(Errno::EBADF);
            }
            // Not LIVE but DEAD, and inside it ourselves for the last rites.
            let next = (s & !LIVE | DEAD) + 1;
            match slot
                .state
                .compare_exchange(s, next, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => break,
                Err(cur) => s = cur,
            }
        }
        let r = Ref {
            registry: self,
            index,
            value: slot.value.load(Ordering::Acquire),
        };
        last_rites(&r);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    #[test]
    fn freed_stale_and_foreign_handles_are_ebadf() {
        static R: Registry<u32> = Registry::new(7);
        static OTHER: Registry<u32> = Registry::new(8);
        let h = R.insert(Arc::new(5)).unwrap();
        assert_ne!(h, 0);
        assert_eq!(*R.enter(h).unwrap(), 5);
        assert_eq!(OTHER.enter(h).err(), Some(Errno::EBADF));
        assert_eq!(R.enter(h ^ (1 << 40)).err(), Some(Errno::EBADF));
        assert_eq!(R.enter(12345).err(), Some(Errno::EBADF));
        let mut rites = 0;
        R.free(h, |v| rites += *v).unwrap();
        assert_eq!(rites, 5);
        assert_eq!(R.enter(h).err(), Some(Errno::EBADF));
        assert_eq!(R.free(h, |_| unreachable!()), Err(Errno::EBADF));
        // The slot is reused with a new generation: the old handle stays dead.
        let h2 = R.insert(Arc::new(6)).unwrap();
        assert_eq!(h2 & INDEX_MASK, h & INDEX_MASK);
        assert_ne!(h2, h);
        assert_eq!(R.enter(h).err(), Some(Errno::EBADF));
        assert_eq!(*R.enter(h2).unwrap(), 6);
    }

    #[test]
    fn a_freed_object_lives_until_the_last_call_leaves() {
        static R: Registry<Arc<()>> = Registry::new(9);
        let witness = Arc::new(());
        let h = R.insert(Arc::new(witness.clone())).unwrap();
        let inside = R.enter(h).unwrap();
        R.free(h, |_| {}).unwrap();
        assert_eq!(R.enter(h).err(), Some(Errno::EBADF));
        assert_eq!(Arc::strong_count(&witness), 2, "dropped under a call");
        drop(inside);
        assert_eq!(
            Arc::strong_count(&witness),
            1,
            "not dropped by the last call"
        );
    }

    /// Threads enter handles (current and stale) while another frees and inserts: a
    /// `Ref` only ever reaches the object its handle was issued for, and every object is
    /// dropped exactly once.
    #[test]
    fn stress_enter_free_insert() {
        struct Obj {
            /// The handle it was issued under (set right after `insert`).
            handle: AtomicU64,
            drops: Arc<AtomicUsize>,
        }
        impl Drop for Obj {
            fn drop(&mut self) {
                self.drops.fetch_add(1, Ordering::Relaxed);
            }
        }
        static R: Registry<Obj> = Registry::new(10);
        const SLOTS: usize = 8;
        const ROUNDS: usize = 200_000;
        let drops = Arc::new(AtomicUsize::new(0));
        let new = |drops: &Arc<AtomicUsize>| {
            let h = R
                .insert(Arc::new(Obj {
                    handle: AtomicU64::new(0),
                    drops: drops.clone(),
                }))
                .unwrap();
            R.enter(h).unwrap().handle.store(h, Ordering::SeqCst);
            h
        };
        let table: Arc<Vec<AtomicU64>> =
            Arc::new((0..SLOTS).map(|_| AtomicU64::new(new(&drops))).collect());
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let readers: Vec<_> = (0..3)
            .map(|_| {
                let (table, stop) = (table.clone(), stop.clone());
                std::thread::spawn(move || {
                    let mut n = 0usize;
                    while !stop.load(Ordering::Relaxed) {
                        n += 1;
                        let h = table[n % SLOTS].load(Ordering::SeqCst);
                        if let Ok(r) = R.enter(h) {
                            assert_eq!(r.handle.load(Ordering::SeqCst), h);
                        }
                    }
                })
            })
            .collect();
        for k in 0..ROUNDS {
            let t = &table[k % SLOTS];
            R.free(t.load(Ordering::SeqCst), |_| {}).unwrap();
            t.store(new(&drops), Ordering::SeqCst);
        }
        stop.store(true, Ordering::Relaxed);
        for r in readers {
            r.join().unwrap();
        }
        for t in table.iter() {
            R.free(t.load(Ordering::SeqCst), |_| {}).unwrap();
        }
        assert_eq!(drops.load(Ordering::SeqCst), SLOTS + ROUNDS);
    }
}
