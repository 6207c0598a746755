//! The file descriptor table.
//!
//! ## Layout
//! Descriptors live in up to [`NCHUNKS`] chunks of growing size: chunk `k` holds `64 << k`
//! descriptors starting at `64 * (2^k - 1)`. A chunk is allocated the first time a
//! descriptor in it is needed (under `grow`, the only lock, taken a handful of times in a
//! table's life) and never moves or shrinks until the table is dropped, so lookups and
//! allocations never see a table being copied.
//!
//! A descriptor's whole state is its **slot**: null when free, else an uncounted pointer
//! to the [`OpenFile`] whose count the table owns, with the close-on-exec flag in the
//! pointer's low bit. There is no allocation bitmap: claiming a descriptor is one CAS of
//! its slot from null to the file, closing it one swap back to null. So two threads that
//! open, close, or `dup2` onto different descriptors write different slots, and nothing
//! else but, when a group of 64 fills or a full one gets a free slot, its hint (below).
//!
//! ## Cache lines (threads of one process share the table)
//! Lowest-fd allocation means two threads that open and close at the same time use
//! neighbouring descriptors (3 and 4). Neighbouring slots would share a cache line, and
//! every install, lookup and close would move it between the CPUs. So slots are *spread*:
//! the chunk is cut into groups of 64 descriptors on 8 lines each, and descriptor `j` of a
//! group lives on the group's line `j % 8`, so descriptors 0..7 each have a line of their
//! own (and so do 8..15, ...), and a scan of one group reads at most 8 lines.
//!
//! ## The "full" hint of a group
//! To find the lowest free descriptor in a table with many open, allocation skips the
//! groups whose slots are all in use. Each group has a hint word: `OPEN` (scan it),
//! `PENDING` (a filler is checking), `FULL` (skip it), and a version bumped by every
//! transition. It is written only when a group fills, and when a close frees a slot of a
//! group marked `FULL` (or `PENDING`); the common open and close only read it.
//! * **Fill**: an allocation that claimed descriptor `j >= 32` of a group, with every slot
//!   below it in use, looks at the slots above; if they are in use too it CASes the hint
//!   `OPEN -> PENDING` (new version), reads every slot of the group again, and CASes
//!   `PENDING -> FULL` if all are in use (back to `OPEN` if not). The final CAS fails if
//!   a close reset the hint meanwhile (the version moved on).
//! * **Close**: after the swap that empties its slot, reads the hint and resets a
//!   `PENDING` or `FULL` one to `OPEN` (new version) before returning.
//! * Why no completed close is ever hidden: the close's swap and hint read, and the
//!   filler's `PENDING` CAS and re-read of the slots, are SeqCst (Dekker): either the close
//!   reads `PENDING` (or later) and resets it, or the filler's re-read sees the empty slot.
//!   An allocation that starts after the close returned reads the hint no older than the
//!   close's reset (coherence), so it cannot read a `FULL` set from a scan that missed the
//!   slot. A stale `OPEN` only costs a scan.
//!
//! ## Lowest free descriptor, linearizably
//! An allocation scans slots upwards from `min` (skipping `FULL` groups) and claims the
//! first null slot it reads. A close that completed before the allocation started emptied
//! its slot before the allocation reads it, so the allocation reads null there (or the
//! file of an allocation that reused it meanwhile): it never returns a descriptor above
//! one that is free as far as it could know. Two allocations at the same time get
//! different descriptors (the CAS); whichever order they are linearized in, each got the
//! lowest one free at its CAS among those it could not have seen taken. This is what
//! POSIX asks; unlike Linux, which serializes the step on `files->file_lock`, concurrent
//! opens write only their own slots.
//!
//! ## Operations (no lock)
//! * **Allocate** (lowest free descriptor `>= min`, `EMFILE` at the limit): the scan above,
//!   then CAS the slot from null to the file (AcqRel: Release publishes the file to `get`,
//!   Acquire pairs with the emptying swap of the previous close).
//! * **Lookup**: pin the epoch, Acquire-load the slot (pairs with the publishing Release),
//!   take a count with `try_get` (refuses a file whose last count is gone), and load the
//!   slot again: file memory is type-stable (`erc`'s docs), so the block may by now hold
//!   another file, counted or not; a lookup keeps its count only if the slot still holds
//!   the pointer, else drops it and looks again (Linux's `get_file_rcu`). File memory is
//!   freed only through the epoch, so the load-then-count race with `close` is safe.
//! * **Close**: swap the slot to null (SeqCst, which is also AcqRel: we take over the
//!   count), reset the group's hint if needed, and hand the table's count to the caller,
//!   who drops it outside any lock.
//! * **dup2** (`replace`): swap the new file into the slot, whatever was there; the old
//!   file, if any, goes to the caller. There is no in-between state (claimed but not yet
//!   installed), so dup2 neither fails with Linux's `EBUSY` nor waits.
//! * **Close-on-exec**: read from the slot; `F_SETFD` CASes the flag bit of a non-null
//!   slot, so it cannot resurrect a descriptor closed meanwhile.
//!
//! The per-process limit (`RLIMIT_NOFILE`, default 1024) is an atomic read by allocation.
//!
//! ## Any descriptor (`O_ANYFD`, sv6's idea; opt-in)
//! POSIX's lowest-free rule is what makes threads that open at the same time read each
//! other's slots. A caller that does not need the lowest descriptor (it passes the
//! number around, it never relies on `open` reusing the one it just closed) can ask for
//! *any* free descriptor ([`FdTable::alloc_any`]): the descriptors from 64 up are split
//! into ranges of 64, one group each, one range per CPU (as many as the limit allows);
//! the caller takes the lowest free descriptor of its CPU's range, so threads on
//! different CPUs touch different lines. A full range spills upwards, then to the lowest
//! free descriptor, so `EMFILE` still means the table is full. Plain allocations are
//! unchanged and still get the lowest free descriptor.
//!
//! Both `Locking` designs use this table.

mod chunk;
#[cfg(all(test, not(miri)))]
mod shuttle_tests;
#[cfg(test)]
mod stress;
#[cfg(test)]
mod tests;

use chunk::{chunk_base, file_of, locate, tagged, Chunk, Slot, CLOEXEC, GROUP};
use parking_lot::Mutex;
use scalevfs_vfs::erc::{Erc, ErcInner};
use scalevfs_vfs::{Errno, FileRef, OpenFile, SysResult};
use std::ptr;
use std::sync::atomic::{AtomicPtr, AtomicU32, Ordering};

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

/// See the module docs.
pub struct FdTable {
    chunks: [AtomicPtr<Chunk>; NCHUNKS],
    grow: Mutex<()>,
    limit: AtomicU32,
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
        // Release: the chunk's zeroed contents are visible to whoever loads the pointer
        // (pairs with the Acquire in `chunk`).
        self.chunks[k].store(p, Ordering::Release);
        // SAFETY: just allocated; freed only by Drop.
        unsafe { &*p }
    }

    /// Installs `file` at the lowest free descriptor `>= min` (`EMFILE` at the limit).
    pub fn alloc(&self, min: u32, file: FileRef, cloexec: bool) -> SysResult<i32> {
        install_raw(file, cloexec, |p| self.install_lowest(min, p))
    }

    /// Installs `file` at any free descriptor (`O_ANYFD`, see the module docs): the
    /// lowest free one in this CPU's range if any, else the lowest free one from this
    /// range up, else the lowest free one (`EMFILE` at the limit).
    pub fn alloc_any(&self, file: FileRef, cloexec: bool) -> SysResult<i32> {
        let ranges = (self.limit() / 64).saturating_sub(1) as usize;
        let ranges = ranges.min(scalevfs_primitives::cpu::num_cpus());
        let first = match ranges {
            0 => 0,
            n => 64 * (1 + scalevfs_primitives::cpu::current_shard(n) as u32),
        };
        install_raw(file, cloexec, |p| match self.install_lowest(first, p) {
            Err(_) if first > 0 => self.install_lowest(0, p),
            r => r,
        })
    }

    /// Stores `p` (a file pointer with its flag) in the lowest null slot `>= min`.
    fn install_lowest(&self, min: u32, p: *mut ErcInner<OpenFile>) -> SysResult<i32> {
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
            for g in start / GROUP..c.groups() {
                if c.group_full(g) {
                    continue;
                }
                let j0 = if g == start / GROUP { start % GROUP } else { 0 };
                for j in j0..GROUP {
                    let i = g * GROUP + j;
                    let fd = c.base as usize + i;
                    if fd >= limit as usize {
                        return Err(Errno::EMFILE);
                    }
                    let slot = c.slot(i);
                    if !slot.load(Ordering::Relaxed).is_null() {
                        continue;
                    }
                    // Release: the file is visible before its pointer (pairs with the
                    // Acquire in `get`); Acquire pairs with the emptying swap in `close`.
                    if slot
                        .compare_exchange(ptr::null_mut(), p, Ordering::AcqRel, Ordering::Relaxed)
                        .is_ok()
                    {
                        if j0 == 0 {
                            c.maybe_mark_full(g, j);
                        }
                        return Ok(fd as i32);
                    }
                    // Taken by a concurrent allocation or dup2: it is not free at our CAS;
                    // go on upwards.
                }
            }
        }
        Err(Errno::EMFILE)
    }

    /// The chunk and the slot of `fd`, if its chunk exists.
    fn slot(&self, fd: i32) -> Option<(&Chunk, usize, &Slot)> {
        if fd < 0 {
            return None;
        }
        let (k, i) = locate(fd as u32);
        if k >= NCHUNKS {
            return None;
        }
        self.chunk(k).map(|c| (c, i, c.slot(i)))
    }

    /// The slot value at `fd` (`EBADF` if none): file pointer and flag.
    fn load(&self, fd: i32) -> SysResult<*mut ErcInner<OpenFile>> {
        let (_, _, slot) = self.slot(fd).ok_or(Errno::EBADF)?;
        // Acquire: pairs with the Release that installed the file.
        let v = slot.load(Ordering::Acquire);
        if v.is_null() {
            return Err(Errno::EBADF);
        }
        Ok(v)
    }

    /// A counted reference to the file at `fd` (`EBADF` if none).
    pub fn get(&self, fd: i32) -> SysResult<FileRef> {
        let (_, _, slot) = self.slot(fd).ok_or(Errno::EBADF)?;
        loop {
            let guard = scalevfs_primitives::epoch::pin();
            // Acquire: pairs with the Release that installed the file.
            let v = slot.load(Ordering::Acquire);
            if v.is_null() {
                return Err(Errno::EBADF);
            }
            // SAFETY: pinned; file memory is freed only through the epoch, and try_get
            // refuses a zero count.
            let Some(file) = (unsafe { Erc::try_get_raw(file_of(v)) }) else {
                // Its last count went after our load: closed, or replaced by dup2 (then
                // the descriptor was never free, and EBADF would be wrong). Look again.
                continue;
            };
            // The block is type-stable: the count may be that of a file that reused it
            // since our load. Keep it only if the slot still holds it (Acquire, for the
            // same pairing as above; `erc`'s type-stable docs say why this load cannot
            // return the old installation once we counted a new file).
            if file_of(slot.load(Ordering::Acquire)) == file_of(v) {
                return Ok(file);
            }
            // Another file now: drop ours unpinned (its release may be the last) and look
            // again (dup2 may have replaced the file without the slot ever being empty).
            drop(guard);
            drop(file);
        }
    }

    /// Runs `f` on the file at `fd`.
    pub fn with<R>(&self, fd: i32, f: impl FnOnce(&OpenFile) -> R) -> SysResult<R> {
        let file = self.get(fd)?;
        Ok(f(&file))
    }

    /// Closes `fd`: returns the table's reference (the caller drops it outside any lock).
    pub fn close(&self, fd: i32) -> SysResult<FileRef> {
        let (c, i, slot) = self.slot(fd).ok_or(Errno::EBADF)?;
        // Acquire: pairs with the Release that installed the file (we now own its count).
        // SeqCst: with the hint read in `note_freed` (see there).
        let v = slot.swap(ptr::null_mut(), Ordering::SeqCst);
        if v.is_null() {
            return Err(Errno::EBADF);
        }
        c.note_freed(i / GROUP);
        // SAFETY: the slot owned this count; we took it out.
        Ok(unsafe { Erc::from_raw(file_of(v)) })
    }

    /// Installs `file` at exactly `fd` (dup2/dup3), closing what was there. Returns the
    /// replaced file, if any, for the caller to drop. A free `fd` becomes used without
    /// touching its group's hint: a hint that stays `OPEN` is always correct.
    pub fn replace(&self, fd: i32, file: FileRef, cloexec: bool) -> SysResult<Option<FileRef>> {
        if fd < 0 || fd as u32 >= self.limit() {
            return Err(Errno::EBADF);
        }
        let (k, i) = locate(fd as u32);
        let c = self.chunk_or_grow(k);
        let p = tagged(Erc::into_raw(file) as *mut _, cloexec);
        // Release: publishes our file (pairs with the Acquire in `get`); Acquire: takes
        // over the replaced file's count (pairs with its installer's Release).
        let old = c.slot(i).swap(p, Ordering::AcqRel);
        // SAFETY: the slot owned the old count; we took it out.
        Ok((!old.is_null()).then(|| unsafe { Erc::from_raw(file_of(old)) }))
    }

    pub fn cloexec(&self, fd: i32) -> SysResult<bool> {
        Ok(self.load(fd)?.addr() & CLOEXEC != 0)
    }

    /// Sets or clears `fd`'s close-on-exec flag (`EBADF` if it is not open).
    pub fn set_cloexec(&self, fd: i32, on: bool) -> SysResult<()> {
        let (_, _, slot) = self.slot(fd).ok_or(Errno::EBADF)?;
        let mut v = slot.load(Ordering::Relaxed);
        loop {
            if v.is_null() {
                return Err(Errno::EBADF);
            }
            let want = tagged(file_of(v), on);
            if want == v {
                return Ok(());
            }
            // Relaxed: only the flag changes; the file was published by its installer.
            match slot.compare_exchange_weak(v, want, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => return Ok(()),
                Err(now) => v = now,
            }
        }
    }

    /// Every used slot with its descriptor, in order, up to `last`.
    fn used(&self, last: u32) -> impl Iterator<Item = (i32, *mut ErcInner<OpenFile>)> + '_ {
        (0..NCHUNKS)
            .map_while(|k| self.chunk(k))
            .take_while(move |c| c.base <= last)
            .flat_map(|c| {
                (0..c.len()).filter_map(move |i| {
                    // Acquire: pairs with the installing Release.
                    let v = c.slot(i).load(Ordering::Acquire);
                    (!v.is_null()).then(|| ((c.base as usize + i) as i32, v))
                })
            })
            .take_while(move |&(fd, _)| fd as u32 <= last)
    }

    /// The open descriptors from `first` to `last` (inclusive), in order.
    pub fn open_in(&self, first: u32, last: u32) -> Vec<i32> {
        self.used(last)
            .map(|(fd, _)| fd)
            .filter(|&fd| fd as u32 >= first)
            .collect()
    }

    /// Every open descriptor with its close-on-exec flag (for `fork`).
    pub fn snapshot(&self) -> Vec<(i32, FileRef, bool)> {
        let fds: Vec<i32> = self.used(u32::MAX).map(|(fd, _)| fd).collect();
        fds.into_iter()
            .filter_map(|fd| {
                // Re-read under `get`'s pin: the descriptor may have been closed since.
                let v = self.load(fd).ok()?;
                Some((fd, self.get(fd).ok()?, v.addr() & CLOEXEC != 0))
            })
            .collect()
    }

    /// Closes every descriptor (process exit).
    pub fn close_all(&self) {
        let fds: Vec<i32> = self.used(u32::MAX).map(|(fd, _)| fd).collect();
        for fd in fds {
            let _ = self.close(fd);
        }
    }
}

/// Runs `install` on `file`'s slot value (its count handed to the table); if it fails,
/// takes the count back and drops it.
fn install_raw(
    file: FileRef,
    cloexec: bool,
    install: impl FnOnce(*mut ErcInner<OpenFile>) -> SysResult<i32>,
) -> SysResult<i32> {
    let p = tagged(Erc::into_raw(file) as *mut _, cloexec);
    install(p).inspect_err(|_| {
        // SAFETY: `p` came from `into_raw` above and was not installed.
        drop(unsafe { Erc::from_raw(file_of(p)) });
    })
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
