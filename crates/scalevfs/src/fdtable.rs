//! The file descriptor table.
//!
//! ## Layout
//! Descriptors live in up to [`NCHUNKS`] chunks of growing size: chunk `k` holds `64 << k`
//! descriptors starting at `64 * (2^k - 1)`. A chunk is allocated the first time a
//! descriptor in it is needed (under `grow`, the only lock, taken a handful of times in a
//! table's life) and never moves or shrinks until the table is dropped, so lookups and
//! allocations never see a table being copied.
//!
//! Each chunk has an allocation bitmap, a close-on-exec bitmap, and one slot per descriptor
//! holding an uncounted pointer to an [`OpenFile`] whose count the table owns.
//!
//! ## Cache lines (threads of one process share the table)
//! Lowest-fd allocation means two threads that open and close at the same time use
//! neighbouring descriptors (3 and 4). Neighbouring slots would share a cache line, and
//! every install, lookup and close would move it between the CPUs. So slots are *spread*:
//! descriptor `i` of a chunk lives on line `i % lines`, so descriptors 0..7 each have a
//! line of their own (and so do 8..15, ...). The bitmaps are cache-padded, each word
//! apart from the other bitmap and from the slots. What two such threads still share is
//! the allocation word itself, which lowest-fd semantics makes inherent (Linux serializes
//! the same step on `files->file_lock`): one CAS to claim, one `fetch_and` to release.
//! Close-on-exec bits are written only when they change, so a plain open/close never
//! writes that word.
//!
//! ## Operations (no lock)
//! * **Allocate** (lowest free descriptor `>= min`): scan the bitmaps from `min` and claim the
//!   first clear bit with a CAS; then publish the file in the slot with a Release store.
//!   Concurrent opens contend only on the bitmap word's cache line, never on a lock; each
//!   gets the lowest descriptor free at its CAS, which is what POSIX asks.
//! * **Lookup**: pin the epoch, Acquire-load the slot (pairs with the publishing Release), and
//!   take a count with `try_get` (refuses a file whose last count is gone). File memory is
//!   freed through the epoch, so the load-then-count race with `close` is safe.
//! * **Close**: swap the slot to null (AcqRel), clear close-on-exec, then clear the
//!   allocation bit (Release: pairs with the Acquire of the next allocator's CAS, so the
//!   slot is empty before the descriptor can be reused), and drop the table's count outside
//!   any lock (the last drop releases the file at once).
//!
//! The per-process limit (`RLIMIT_NOFILE`, default 1024) is an atomic read by allocation.

use crossbeam_utils::CachePadded;
use parking_lot::Mutex;
use scalevfs_vfs::erc::{Erc, ErcInner};
use scalevfs_vfs::{Errno, FileRef, OpenFile, SysResult};
use std::ptr;
use std::sync::atomic::{AtomicPtr, AtomicU32, AtomicU64, Ordering};

/// Number of chunks: 64 * (2^15 - 1) descriptors at most.
pub const NCHUNKS: usize = 15;
/// The largest limit `set_limit` accepts (Linux's default `nr_open`).
pub const NR_OPEN: u32 = 1 << 20;

/// Slots per 64-byte cache line.
const SLOTS_PER_LINE: usize = 64 / std::mem::size_of::<AtomicPtr<()>>();

/// A descriptor slot: an uncounted pointer to the file whose count the table owns.
type Slot = AtomicPtr<ErcInner<OpenFile>>;

struct Chunk {
    base: u32,
    bits: Box<[CachePadded<AtomicU64>]>,
    cloexec: Box<[CachePadded<AtomicU64>]>,
    /// Indexed through [`Chunk::slot`], which spreads neighbouring descriptors over lines.
    /// Line-aligned, so that the spreading really gives each a line of its own.
    slots: Box<[CachePadded<[Slot; SLOTS_PER_LINE]>]>,
}

impl Chunk {
    fn new(k: usize) -> Chunk {
        let n = 64usize << k;
        Chunk {
            base: chunk_base(k) as u32,
            bits: (0..n / 64)
                .map(|_| CachePadded::new(AtomicU64::new(0)))
                .collect(),
            cloexec: (0..n / 64)
                .map(|_| CachePadded::new(AtomicU64::new(0)))
                .collect(),
            slots: (0..n / SLOTS_PER_LINE)
                .map(|_| CachePadded::new(std::array::from_fn(|_| AtomicPtr::new(ptr::null_mut()))))
                .collect(),
        }
    }

    fn len(&self) -> usize {
        self.slots.len() * SLOTS_PER_LINE
    }

    /// The slot of the chunk's `i`-th descriptor: line `i % lines`, so that descriptors
    /// close in number (used by threads opening at the same time) are on different lines.
    fn slot(&self, i: usize) -> &Slot {
        let lines = self.slots.len();
        &self.slots[i % lines][i / lines]
    }
}

/// See the module docs.
pub struct FdTable {
    chunks: [AtomicPtr<Chunk>; NCHUNKS],
    grow: Mutex<()>,
    limit: AtomicU32,
}

/// The first descriptor of chunk `k`.
fn chunk_base(k: usize) -> u64 {
    64 * ((1u64 << k) - 1)
}

/// Which chunk and index hold `fd`.
fn locate(fd: u32) -> (usize, usize) {
    let k = (63 - ((fd as u64 / 64) + 1).leading_zeros()) as usize;
    (k, (fd as u64 - chunk_base(k)) as usize)
}

impl Default for FdTable {
    fn default() -> Self {
        FdTable {
            chunks: std::array::from_fn(|_| AtomicPtr::new(ptr::null_mut())),
            grow: Mutex::new(()),
            limit: AtomicU32::new(1024),
        }
    }
}

impl FdTable {
    pub fn limit(&self) -> u32 {
        self.limit.load(Ordering::Relaxed)
    }
    /// Sets the limit (`RLIMIT_NOFILE`); `EPERM` above [`NR_OPEN`].
    pub fn set_limit(&self, n: u32) -> SysResult<()> {
        if n > NR_OPEN {
            return Err(Errno::EPERM);
        }
        self.limit.store(n, Ordering::Relaxed);
        Ok(())
    }

    fn chunk(&self, k: usize) -> Option<&Chunk> {
        // Acquire: pairs with the Release publication in `chunk_or_grow`.
        let p = self.chunks[k].load(Ordering::Acquire);
        // SAFETY: chunks are freed only by Drop (`&mut self`).
        unsafe { p.as_ref() }
    }

    fn chunk_or_grow(&self, k: usize) -> &Chunk {
        if let Some(c) = self.chunk(k) {
            return c;
        }
        let _g = self.grow.lock();
        if let Some(c) = self.chunk(k) {
            return c;
        }
        let p = Box::into_raw(Box::new(Chunk::new(k)));
        // Release: the chunk's zeroed contents are visible to whoever loads the pointer.
        self.chunks[k].store(p, Ordering::Release);
        // SAFETY: just allocated; freed only by Drop.
        unsafe { &*p }
    }

    /// Installs `file` at the lowest free descriptor `>= min` (`EMFILE` at the limit).
    pub fn alloc(&self, min: u32, file: FileRef, cloexec: bool) -> SysResult<i32> {
        let limit = self.limit();
        if min >= limit {
            return Err(Errno::EMFILE);
        }
        let (k0, _) = locate(min);
        for k in k0..NCHUNKS {
            // A chunk wholly past the limit is never needed: do not allocate it.
            if chunk_base(k) >= limit as u64 {
                break;
            }
            let c = self.chunk_or_grow(k);
            let start = min.saturating_sub(c.base) as usize;
            for w in start / 64..c.bits.len() {
                let low_mask = if w == start / 64 {
                    (1u64 << (start % 64)) - 1
                } else {
                    0
                };
                let mut v = c.bits[w].load(Ordering::Relaxed);
                loop {
                    let free = !(v | low_mask);
                    if free == 0 {
                        break;
                    }
                    let bit = free.trailing_zeros() as usize;
                    let fd = c.base as usize + w * 64 + bit;
                    if fd >= limit as usize {
                        return Err(Errno::EMFILE);
                    }
                    // Acquire: pairs with the Release clear in `close`: the slot is null.
                    match c.bits[w].compare_exchange_weak(
                        v,
                        v | (1 << bit),
                        Ordering::Acquire,
                        Ordering::Relaxed,
                    ) {
                        Ok(_) => {
                            self.set_cloexec_in(c, w, bit, cloexec);
                            let p = Erc::into_raw(file) as *mut _;
                            // Release: the file is visible before its pointer (pairs with the
                            // Acquire in `get`).
                            c.slot(w * 64 + bit).store(p, Ordering::Release);
                            return Ok(fd as i32);
                        }
                        Err(now) => v = now,
                    }
                }
            }
        }
        Err(Errno::EMFILE)
    }

    fn set_cloexec_in(&self, c: &Chunk, w: usize, bit: usize, on: bool) {
        // Relaxed: the bit is only meaningful to the thread that owns the descriptor (and to
        // fork/exec snapshots); skipping the RMW when nothing changes keeps plain
        // open/close from writing this shared word at all.
        if (c.cloexec[w].load(Ordering::Relaxed) & (1 << bit) != 0) == on {
            return;
        }
        if on {
            c.cloexec[w].fetch_or(1 << bit, Ordering::Relaxed);
        } else {
            c.cloexec[w].fetch_and(!(1 << bit), Ordering::Relaxed);
        }
    }

    fn slot(&self, fd: i32) -> Option<(&Chunk, usize)> {
        if fd < 0 {
            return None;
        }
        let (k, i) = locate(fd as u32);
        if k >= NCHUNKS {
            return None;
        }
        self.chunk(k).map(|c| (c, i))
    }

    /// A counted reference to the file at `fd` (`EBADF` if none).
    pub fn get(&self, fd: i32) -> SysResult<FileRef> {
        let (c, i) = self.slot(fd).ok_or(Errno::EBADF)?;
        let _g = crossbeam_epoch::pin();
        // Acquire: pairs with the Release store in `alloc`/`replace`.
        let p = c.slot(i).load(Ordering::Acquire);
        if p.is_null() {
            return Err(Errno::EBADF);
        }
        // SAFETY: pinned; file memory is retired through the epoch after its last count, and
        // try_get refuses a zero count.
        unsafe { Erc::try_get_raw(p) }.ok_or(Errno::EBADF)
    }

    /// Runs `f` on the file at `fd` without taking a count (cheaper for short operations).
    pub fn with<R>(&self, fd: i32, f: impl FnOnce(&OpenFile) -> R) -> SysResult<R> {
        let file = self.get(fd)?;
        Ok(f(&file))
    }

    /// Closes `fd`: returns the table's reference (the caller drops it outside any lock).
    pub fn close(&self, fd: i32) -> SysResult<FileRef> {
        let (c, i) = self.slot(fd).ok_or(Errno::EBADF)?;
        // Acquire: pairs with the Release that installed the file (we now own its count);
        // Release: readers that load null see the slot cleared before the bit.
        let p = c.slot(i).swap(ptr::null_mut(), Ordering::AcqRel);
        if p.is_null() {
            return Err(Errno::EBADF);
        }
        let (w, bit) = (i / 64, i % 64);
        self.set_cloexec_in(c, w, bit, false);
        // Release: the null slot is visible before the descriptor can be claimed again
        // (pairs with the Acquire CAS in `alloc`).
        c.bits[w].fetch_and(!(1 << bit), Ordering::Release);
        // SAFETY: the slot owned this count; we took it out.
        Ok(unsafe { Erc::from_raw(p) })
    }

    /// Installs `file` at exactly `fd` (dup2/dup3), closing what was there. Returns the
    /// replaced file, if any, for the caller to drop.
    ///
    /// A descriptor whose bit is set but whose slot is null is in the middle of an `alloc`
    /// (claimed, file about to be stored) or of a `close` (slot emptied, bit about to be
    /// cleared). Both finish within a few instructions and never block, so we wait for
    /// them rather than fail: Linux's `EBUSY` is for a descriptor reserved across a whole
    /// `open`, which our `alloc` never does (it claims and installs at once). We only ever
    /// write a null slot whose bit we claimed ourselves, so a racing `alloc`'s store can
    /// never be overwritten, nor its file taken for ours.
    pub fn replace(&self, fd: i32, file: FileRef, cloexec: bool) -> SysResult<Option<FileRef>> {
        if fd < 0 || fd as u32 >= self.limit() {
            return Err(Errno::EBADF);
        }
        let (k, i) = locate(fd as u32);
        let c = self.chunk_or_grow(k);
        let (w, bit) = (i / 64, i % 64);
        let p = Erc::into_raw(file) as *mut _;
        let slot = c.slot(i);
        let mut backoff = crossbeam_utils::Backoff::new();
        let old = loop {
            // Acquire: as in `alloc` (pairs with the Release clear in `close`).
            if c.bits[w].fetch_or(1 << bit, Ordering::Acquire) & (1 << bit) == 0 {
                // Ours now, and empty: publish (Release pairs with the Acquire in `get`).
                slot.store(p, Ordering::Release);
                break ptr::null_mut();
            }
            // Acquire: pairs with the installer's Release; we may take over its count.
            let cur = slot.load(Ordering::Acquire);
            // AcqRel: Release publishes our file (pairs with the Acquire in `get`), Acquire
            // takes over the replaced file's count.
            if !cur.is_null()
                && slot
                    .compare_exchange(cur, p, Ordering::AcqRel, Ordering::Relaxed)
                    .is_ok()
            {
                break cur;
            }
            // Null with the bit set: an `alloc` or `close` in flight; let it finish.
            if backoff.is_completed() {
                std::thread::yield_now();
                backoff = crossbeam_utils::Backoff::new();
            } else {
                backoff.snooze();
            }
        };
        self.set_cloexec_in(c, w, bit, cloexec);
        // SAFETY: the slot owned the old count; we took it out.
        Ok((!old.is_null()).then(|| unsafe { Erc::from_raw(old) }))
    }

    pub fn cloexec(&self, fd: i32) -> SysResult<bool> {
        let (c, i) = self.slot(fd).ok_or(Errno::EBADF)?;
        // Acquire: pairs with the installing Release store.
        if c.slot(i).load(Ordering::Acquire).is_null() {
            return Err(Errno::EBADF);
        }
        Ok(c.cloexec[i / 64].load(Ordering::Relaxed) & (1 << (i % 64)) != 0)
    }

    pub fn set_cloexec(&self, fd: i32, on: bool) -> SysResult<()> {
        let (c, i) = self.slot(fd).ok_or(Errno::EBADF)?;
        // Acquire: pairs with the installing Release store.
        if c.slot(i).load(Ordering::Acquire).is_null() {
            return Err(Errno::EBADF);
        }
        self.set_cloexec_in(c, i / 64, i % 64, on);
        Ok(())
    }

    /// The open descriptors from `first` to `last` (inclusive), in order: one pass over
    /// the allocation bitmaps, so a huge range over a small table costs nothing.
    pub fn open_in(&self, first: u32, last: u32) -> Vec<i32> {
        let mut v = Vec::new();
        for k in 0..NCHUNKS {
            let Some(c) = self.chunk(k) else { break };
            for (w, word) in c.bits.iter().enumerate() {
                let mut bits = word.load(Ordering::Acquire);
                while bits != 0 {
                    let fd = c.base as u64 + (w * 64) as u64 + bits.trailing_zeros() as u64;
                    bits &= bits - 1;
                    if fd > last as u64 {
                        return v;
                    }
                    if fd >= first as u64 {
                        v.push(fd as i32);
                    }
                }
            }
        }
        v
    }

    /// Every open descriptor with its close-on-exec flag (for `fork`).
    pub fn snapshot(&self) -> Vec<(i32, FileRef, bool)> {
        let mut v = Vec::new();
        for k in 0..NCHUNKS {
            let Some(c) = self.chunk(k) else { break };
            for i in 0..c.len() {
                if c.slot(i).load(Ordering::Relaxed).is_null() {
                    continue;
                }
                let fd = (c.base as usize + i) as i32;
                if let (Ok(f), Ok(ce)) = (self.get(fd), self.cloexec(fd)) {
                    v.push((fd, f, ce));
                }
            }
        }
        v
    }

    /// Closes every descriptor (process exit).
    pub fn close_all(&self) {
        for k in 0..NCHUNKS {
            let Some(c) = self.chunk(k) else { break };
            for i in 0..c.len() {
                if !c.slot(i).load(Ordering::Relaxed).is_null() {
                    let _ = self.close((c.base as usize + i) as i32);
                }
            }
        }
    }
}

impl Drop for FdTable {
    fn drop(&mut self) {
        self.close_all();
        for c in &self.chunks {
            let p = c.load(Ordering::Relaxed);
            if !p.is_null() {
                // SAFETY: `&mut self`: nothing else uses the chunk.
                drop(unsafe { Box::from_raw(p) });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{locate, Chunk};

    #[test]
    fn neighbouring_descriptors_have_lines_of_their_own() {
        for k in [0, 1, 3] {
            let c = Chunk::new(k);
            let addr = |i: usize| c.slot(i) as *const _ as usize;
            // Every slot is used exactly once.
            let mut all: Vec<usize> = (0..c.len()).map(addr).collect();
            all.sort_unstable();
            all.dedup();
            assert_eq!(all.len(), c.len());
            for i in 0..7 {
                assert_ne!(
                    addr(i) / 64,
                    addr(i + 1) / 64,
                    "chunk {k}: fds {i}, {}",
                    i + 1
                );
            }
        }
    }

    #[test]
    fn locate_covers_chunks() {
        assert_eq!(locate(0), (0, 0));
        assert_eq!(locate(63), (0, 63));
        assert_eq!(locate(64), (1, 0));
        assert_eq!(locate(191), (1, 127));
        assert_eq!(locate(192), (2, 0));
        assert_eq!(locate(959), (3, 511));
        assert_eq!(locate(1023), (4, 63));
    }
}
