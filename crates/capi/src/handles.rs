//! The handle registry: what a C caller holds is a generation-checked slot number, never a
//! pointer to Rust memory.
//!
//! A handle is 64 bits: the slot index (24 bits), a type tag (8 bits: a `svfs_vfs *`
//! passed where a `svfs_process *` is expected is simply not found) and the slot's
//! generation (32 bits, bumped when the handle is freed). Slots live in chunks that are
//! allocated on first use and never freed, so looking up a handle that was freed, never
//! issued, or is garbage reads a valid slot or none at all: `EBADF`, never a use after
//! free. (A handle is only reused after its slot's generation wraps: 2^32 frees of one
//! slot.)
//!
//! A lookup takes the slot's read lock just long enough to clone the `Arc` it holds, so
//! a call runs on its own reference: freeing a handle while another thread is inside a
//! call (blocked in `F_SETLKW`, say) does not wait for that call, and the object goes
//! when the last call on it returns. The cost is four uncontended atomic operations on
//! the slot's cache line per call; threads sharing one process handle share that line.

use std::sync::{Arc, OnceLock};

use parking_lot::{Mutex, RwLock};
use scalevfs_rs::Errno;

#[cfg(not(target_pointer_width = "64"))]
compile_error!("scalevfs-capi encodes 64-bit handles in pointers: 64-bit targets only");

/// Slots per chunk.
const CHUNK: usize = 4096;
/// Chunks: at most `CHUNK * CHUNKS` (1 Mi) live handles of one type.
const CHUNKS: usize = 256;
const INDEX_BITS: u32 = 24;
const INDEX_MASK: u64 = (1 << INDEX_BITS) - 1;

/// One slot: the generation of its current (or next) handle and the object it names.
struct Slot<T> {
    entry: RwLock<Entry<T>>,
}

struct Entry<T> {
    generation: u32,
    value: Option<Arc<T>>,
}

impl<T> Default for Slot<T> {
    fn default() -> Self {
        Slot {
            entry: RwLock::new(Entry {
                generation: 1,
                value: None,
            }),
        }
    }
}

/// Slots handed out so far (`next`) and the freed ones to reuse.
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

impl<T> Registry<T> {
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
        let chunk = self.chunks[index / CHUNK]
            .get_or_init(|| (0..CHUNK).map(|_| Slot::default()).collect());
        let mut e = chunk[index % CHUNK].entry.write();
        e.value = Some(value);
        Some(u64::from(e.generation) << 32 | u64::from(self.tag) << INDEX_BITS | index as u64)
    }

    /// The slot and generation a handle names, if it has this registry's tag.
    fn decode(&self, handle: u64) -> Option<(&Slot<T>, u32)> {
        if (handle >> INDEX_BITS) as u8 != self.tag {
            return None;
        }
        let slot = self.slot((handle & INDEX_MASK) as usize)?;
        Some((slot, (handle >> 32) as u32))
    }

    /// The object `handle` names: `EBADF` for a freed, stale or made-up handle.
    pub(crate) fn get(&self, handle: u64) -> Result<Arc<T>, Errno> {
        let (slot, generation) = self.decode(handle).ok_or(Errno::EBADF)?;
        let e = slot.entry.read();
        match &e.value {
            Some(v) if e.generation == generation => Ok(v.clone()),
            _ => Err(Errno::EBADF),
        }
    }

    /// Unregisters `handle` and returns its object: `EBADF` if it does not name one (so a
    /// double free is an error, not a crash).
    pub(crate) fn remove(&self, handle: u64) -> Result<Arc<T>, Errno> {
        let (slot, generation) = self.decode(handle).ok_or(Errno::EBADF)?;
        let value = {
            let mut e = slot.entry.write();
            if e.generation != generation || e.value.is_none() {
                return Err(Errno::EBADF);
            }
            // Generation 0 is never issued, so no handle is 0 (NULL) even at slot 0.
            e.generation = e.generation.wrapping_add(1).max(1);
            e.value.take()
        };
        self.free.lock().free.push((handle & INDEX_MASK) as usize);
        value.ok_or(Errno::EBADF)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn freed_stale_and_foreign_handles_are_ebadf() {
        static R: Registry<u32> = Registry::new(7);
        static OTHER: Registry<u32> = Registry::new(8);
        let h = R.insert(Arc::new(5)).unwrap();
        assert_ne!(h, 0);
        assert_eq!(*R.get(h).unwrap(), 5);
        assert_eq!(OTHER.get(h).unwrap_err(), Errno::EBADF);
        assert_eq!(R.get(h ^ (1 << 40)).unwrap_err(), Errno::EBADF);
        assert_eq!(R.get(12345).unwrap_err(), Errno::EBADF);
        assert_eq!(*R.remove(h).unwrap(), 5);
        assert_eq!(R.get(h).unwrap_err(), Errno::EBADF);
        assert_eq!(R.remove(h).unwrap_err(), Errno::EBADF);
        // The slot is reused with a new generation: the old handle stays dead.
        let h2 = R.insert(Arc::new(6)).unwrap();
        assert_eq!(h2 & INDEX_MASK, h & INDEX_MASK);
        assert_ne!(h2, h);
        assert_eq!(R.get(h).unwrap_err(), Errno::EBADF);
        assert_eq!(*R.get(h2).unwrap(), 6);
    }
}
