//! Memory per empty file: what one more empty file (inode, dentry, directory entry, cache
//! slots) costs, measured with a counting allocator.
//!
//! The binary that wants the figure installs [`CountingAlloc`] as its global allocator (the
//! `scalevfs` CLI does). It counts only while [`measure_per_empty_file`] runs, and only the
//! measuring thread's allocations (a thread-local tally), so the rest of a benchmark run pays
//! one `Relaxed` load of a read-mostly flag per allocation and shares no counter between
//! threads. Without it installed the figure is reported as unavailable.
//!
//! ## Why mimalloc underneath
//! Dentries, inodes and names are freed through the epoch, so they are often freed by a
//! thread other than the one that allocated them. glibc's malloc returns such a block to
//! its arena under the arena's lock, and two benchmark threads then serialize on a lock
//! that is no part of any design we compare (seen as `__lll_lock_wait_private` in
//! inode-churn profiles). mimalloc frees across threads without a lock, so the numbers
//! measure the VFS. Embedders of the library pick their own allocator.

use mimalloc::MiMalloc;
use std::alloc::{GlobalAlloc, Layout};
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};

use scalevfs::{Credentials, Locking, Process, Vfs, VfsOptions};
use serde::{Deserialize, Serialize};

/// Gives the memory mimalloc holds free back to the kernel now: forces the collection of
/// the calling thread's heap, of abandoned pages, and the purge of every free range the
/// arenas hold (which mimalloc otherwise does lazily, on later allocations, so an idle
/// process keeps the memory of a deleted large file resident). The `scalevfs` daemon
/// calls it when its FUSE server goes idle (`MountOptions::on_idle`): at most once per
/// idle period, so the hot path pays nothing.
pub fn release_free_memory() {
    // SAFETY: mi_collect has no preconditions; it may be called from any thread at any
    // time (it takes mimalloc's own locks).
    unsafe { libmimalloc_sys::mi_collect(true) };
}

/// Counting is on only during a measurement; `Relaxed` suffices because the measuring
/// thread itself switches it and only its own tally is read.
static COUNTING: AtomicBool = AtomicBool::new(false);

thread_local! {
    /// Bytes this thread allocated minus freed while counting was on.
    static TALLY: Cell<isize> = const { Cell::new(0) };
}

/// mimalloc, plus a per-thread tally while a measurement runs.
pub struct CountingAlloc;

#[inline]
fn count(delta: isize) {
    if COUNTING.load(Relaxed) {
        // `try_with`: never panic inside the allocator, even during thread teardown.
        let _ = TALLY.try_with(|t| t.set(t.get() + delta));
    }
}

// SAFETY: every call is forwarded unchanged to `MiMalloc`; the only addition is the tally,
// which allocates nothing.
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count(layout.size() as isize);
        // SAFETY: our caller upholds `GlobalAlloc::alloc`'s contract, which is MiMalloc's.
        unsafe { MiMalloc.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count(layout.size() as isize);
        // SAFETY: as for `alloc`.
        unsafe { MiMalloc.alloc_zeroed(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        count(-(layout.size() as isize));
        // SAFETY: `ptr` came from `MiMalloc` with this layout (we forward every allocation).
        unsafe { MiMalloc.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count(new_size as isize - layout.size() as isize);
        // SAFETY: as for `dealloc`; `new_size` is checked by our caller.
        unsafe { MiMalloc.realloc(ptr, layout, new_size) }
    }
}

/// One design's figure.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MemoryRecord {
    /// The design's name.
    pub design: String,
    /// Bytes per additional empty file, averaged over `files`.
    pub bytes_per_file: f64,
    /// How many empty files were created to measure it.
    pub files: usize,
}

fn tally() -> isize {
    TALLY.with(Cell::get)
}

/// Creates `files` empty files in one directory of a fresh `Vfs` (after a warm-up that lets
/// the hash tables reach their steady size) and returns the bytes each one added, or `None`
/// when [`CountingAlloc`] is not the global allocator.
pub fn measure_per_empty_file(locking: Locking, files: usize) -> Option<f64> {
    let vfs = Vfs::new(VfsOptions {
        locking,
        ..VfsOptions::default()
    });
    let p = Process::new(&vfs, Credentials::root());
    p.mkdir("/d", 0o755).ok()?;
    let create = |name: &str| -> Option<()> {
        let fd = p.open(name, libc::O_CREAT | libc::O_WRONLY, 0o644).ok()?;
        p.close(fd).ok()
    };
    for i in 0..files / 10 {
        create(&format!("/d/warm{i:07}"))?;
    }
    let names: Vec<String> = (0..files).map(|i| format!("/d/f{i:07}")).collect();
    COUNTING.store(true, Relaxed);
    let before = tally();
    let probe = std::hint::black_box(Box::new([0u8; 64]));
    let installed = tally() != before;
    drop(probe);
    let start = tally();
    let mut ok = installed;
    if installed {
        for name in &names {
            if create(name).is_none() {
                ok = false;
                break;
            }
        }
    }
    let grown = tally() - start;
    COUNTING.store(false, Relaxed);
    ok.then(|| grown as f64 / files as f64)
}

/// The figure for each VFS design.
pub fn measure_all(files: usize) -> Vec<MemoryRecord> {
    [Locking::Legacy, Locking::Scalable]
        .into_iter()
        .filter_map(|locking| {
            let design = match locking {
                Locking::Legacy => "legacy",
                Locking::Scalable => "scalable",
            };
            measure_per_empty_file(locking, files).map(|b| MemoryRecord {
                design: design.into(),
                bytes_per_file: b,
                files,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unavailable_without_the_counting_allocator() {
        // The test binary uses the system allocator, so nothing is counted.
        assert_eq!(measure_per_empty_file(Locking::Scalable, 100), None);
        assert!(measure_all(100).is_empty());
    }
}
