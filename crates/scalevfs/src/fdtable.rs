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
//!
//! ## Any descriptor (`O_ANYFD`, sv6's idea; opt-in)
//! POSIX's lowest-free rule is what makes threads that open at the same time share the
//! allocation word. A caller that does not need the lowest descriptor (it passes the
//! number around, it never relies on `open` reusing the one it just closed) can ask for
//! *any* free descriptor ([`FdTable::alloc_any`]): the descriptors from 64 up are split
//! into ranges of 64, one word of the bitmap each, one range per CPU (as many as the
//! limit allows); the caller takes the lowest free descriptor of its CPU's range, so
//! threads on different CPUs write different words. A full range spills upwards, then
//! to the lowest free descriptor, so `EMFILE` still means the table is full. Plain
//! allocations are unchanged and still get the lowest free descriptor.

use crossbeam_utils::CachePadded;
use parking_lot::Mutex;
use scalevfs_vfs::erc::{Erc, ErcInner};
use scalevfs_vfs::{Errno, FileRef, OpenFile, SysResult};
use std::ptr;
use std::sync::atomic::{AtomicPtr, AtomicU32, AtomicU64, Ordering};

/// `open`/`openat` flag: any free descriptor will do, not the lowest (sv6's `O_ANYFD`; see
/// the module docs). A bit Linux's open flags do not use; never stored in the file's
/// status flags.
pub const O_ANYFD: i32 = 0x4000_0000;

/// Installs the file `open` made for `flags` (`O_CLOEXEC`, `O_ANYFD`).
pub fn install_opened(fds: &FdTable, file: FileRef, flags: i32) -> SysResult<i32> {
    let cloexec = flags & libc::O_CLOEXEC != 0;
    if flags & O_ANYFD != 0 {
        fds.alloc_any(file, cloexec)
    } else {
        fds.alloc(0, file, cloexec)
    }
}

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

/// A descriptor whose allocation bit `claim` set: chunk, word, bit, and its number.
struct Claimed<'a> {
    c: &'a Chunk,
    w: usize,
    bit: usize,
    fd: usize,
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
        let claimed = self.claim(min)?;
        Ok(self.install(claimed, file, cloexec))
    }

    /// Installs `file` at any free descriptor (`O_ANYFD`, see the module docs): the
    /// lowest free one in this CPU's range if any, else the lowest free one from this
    /// range up, else the lowest free one (`EMFILE` at the limit).
    pub fn alloc_any(&self, file: FileRef, cloexec: bool) -> SysResult<i32> {
        let ranges = (self.limit() / 64).saturating_sub(1) as usize;
        let ranges = ranges.min(scalevfs_primitives::cpu::num_cpus());
        let claimed = match ranges {
            0 => self.claim(0),
            n => {
                let first = 64 * (1 + scalevfs_primitives::cpu::current_shard(n) as u32);
                self.claim(first).or_else(|_| self.claim(0))
            }
        }?;
        Ok(self.install(claimed, file, cloexec))
    }

    /// Claims the lowest free descriptor `>= min`: its bit is set, its slot still null.
    fn claim(&self, min: u32) -> SysResult<Claimed<'_>> {
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
                        Ok(_) => return Ok(Claimed { c, w, bit, fd }),
                        Err(now) => v = now,
                    }
                }
            }
        }
        Err(Errno::EMFILE)
    }

    /// Publishes `file` in a claimed descriptor.
    fn install(&self, d: Claimed<'_>, file: FileRef, cloexec: bool) -> i32 {
        self.set_cloexec_in(d.c, d.w, d.bit, cloexec);
        let p = Erc::into_raw(file) as *mut _;
        // Release: the file is visible before its pointer (pairs with the Acquire in `get`).
        d.c.slot(d.w * 64 + d.bit).store(p, Ordering::Release);
        d.fd as i32
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

    /// `O_ANYFD` takes a descriptor of this CPU's range (64 up), leaves the lowest free
    /// descriptor to plain opens, spills when its range is full, and still fills the
    /// table to the limit before `EMFILE`. The flag is not kept in the status flags.
    #[test]
    fn anyfd_uses_a_range_of_its_own_and_fills_the_table() {
        use super::O_ANYFD;
        use crate::{Credentials, Process, Vfs};
        let v = Vfs::new(Default::default());
        let p = Process::new(&v, Credentials::root());
        p.write_file("/f", b"abc").unwrap();
        let any = p.open("/f", libc::O_RDONLY | O_ANYFD, 0).unwrap();
        assert!((64..1024).contains(&any), "{any}");
        let fl = p
            .fcntl(any, libc::F_GETFL, scalevfs_vfs::FcntlArg::None)
            .unwrap();
        assert_eq!(fl & O_ANYFD, 0, "status flags {fl:#x}");
        assert_eq!(p.pread64(any, &mut [0u8; 3], 0), Ok(3));
        assert_eq!(
            p.open("/f", libc::O_RDONLY, 0),
            Ok(0),
            "lowest free for plain opens"
        );
        p.close(any).unwrap();
        p.close(0).unwrap();

        // One range (64..128) below the limit: it fills, then spills to the lowest.
        p.set_fd_limit(130).unwrap();
        let fds: Vec<i32> = (0..130)
            .map(|_| p.open("/f", libc::O_RDONLY | O_ANYFD, 0).unwrap())
            .collect();
        assert_eq!(fds[..66], (64..130).collect::<Vec<_>>()[..]);
        assert_eq!(fds[66..], (0..64).collect::<Vec<_>>()[..]);
        assert_eq!(
            p.open("/f", libc::O_RDONLY | O_ANYFD, 0),
            Err(scalevfs_vfs::Errno::EMFILE)
        );
        for fd in fds {
            p.close(fd).unwrap();
        }
    }

    /// Threads of one process opening with and without `O_ANYFD` at once: every
    /// descriptor they get refers to the file they opened and is theirs alone until they
    /// close it.
    #[test]
    fn anyfd_and_lowest_fd_opens_together() {
        use super::O_ANYFD;
        use crate::{Credentials, Process, Vfs};
        let v = Vfs::new(Default::default());
        let p = Process::new(&v, Credentials::root());
        let rounds = if cfg!(miri) { 5 } else { 500 };
        for t in 0..8 {
            p.write_file(format!("/f{t}"), format!("file{t}").as_bytes())
                .unwrap();
        }
        std::thread::scope(|s| {
            for t in 0..8 {
                let p = &p;
                s.spawn(move || {
                    let flags = libc::O_RDONLY | if t % 2 == 0 { O_ANYFD } else { 0 };
                    for _ in 0..rounds {
                        let fds: Vec<i32> = (0..4)
                            .map(|_| p.open(format!("/f{t}"), flags, 0).unwrap())
                            .collect();
                        for &fd in &fds {
                            let mut buf = [0u8; 8];
                            let n = p.pread64(fd, &mut buf, 0).unwrap();
                            assert_eq!(&buf[..n], format!("file{t}").as_bytes(), "fd {fd}");
                        }
                        for fd in fds {
                            p.close(fd).unwrap();
                        }
                    }
                });
            }
        });
        assert_eq!(p.open("/f0", libc::O_RDONLY, 0), Ok(0), "nothing left open");
    }
}
