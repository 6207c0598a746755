//! A regular file's pages: a radix tree from page index to page that readers walk without
//! a lock and without writing shared memory (Linux's page cache `xarray` under RCU).
//!
//! ## Layout
//! Each tree node has [`FANOUT`] slots and a `shift`: the node's slots are indexed by bits
//! `[shift, shift + 6)` of the page index. A node with shift 0 is a leaf, whose slots hold
//! pages; the others hold child nodes. The root covers indices below `64 << root.shift`;
//! the tree grows upward (a new root whose slot 0 is the old one) when a writer needs a
//! larger index, and never shrinks before the file is freed (an emptied node costs 520
//! bytes per 64 pages of the file's largest size). A leaf slot is null (no page), `hole()`
//! (allocated by `fallocate` but never written: reads as zeros, counts as a hole for
//! `SEEK_DATA`/`SEEK_HOLE`), or a page. A page's bytes are atomic words (a reader racing a
//! writer is never a data race) under the page's own sequence counter: a writer changes a
//! published page inside a write section, and a reader copies the page again if a write
//! section overlapped its copy. So a read sees each page's part of a write whole (POSIX's
//! read/write atomicity, page by page, as the read/write lock gave), and the counter is
//! written only by writers of that page.
//!
//! ## Readers and writers
//! * **Readers** (`read_at`, `next_data`, `next_hole`) pin the epoch, load the root and
//!   each slot with `Acquire`, and copy words with `Relaxed` loads between the page's
//!   sequence checks. They store nothing but their thread's epoch slot: two reads of one
//!   file share its lines in the Shared state only. (A read/write lock's reader count is
//!   a store to one line per file, which every reader of that file would take in turn.)
//! * **Writers** ([`FilePages::write`]) hold the file's `writer` mutex, so they are
//!   serialized among themselves. They publish a node or page with a `Release` store after
//!   initializing it (pairs with the readers' `Acquire` loads of the slot, or of `root`),
//!   change bytes of published pages with atomic stores in a write section, and unlink a
//!   page by storing null into its slot and retiring it ([`scalevfs_vfs::retire`]): it is
//!   freed after a grace period, when every reader that could have loaded the pointer has
//!   unpinned. Nodes are never unlinked while the file lives. An evicted file's pages
//!   ([`FilePages::free_all`]) and the tree itself (`Drop`) are freed at once: no reader
//!   remains then, since a reader holds a reference on the inode.
//! * `len`, the number of non-null leaf slots, is stored by writers under the mutex, so
//!   `stat` (`st_blocks`) reads one word. It is exact whenever no writer is inside.
//!
//! ## Where freed pages go
//! A retired page is freed by the retiring thread after the grace period, into that
//! thread's small cache of free pages ([`LOCAL_FREE`] pages), which the same thread's next
//! page allocations take first. So truncating a file that another thread wrote returns
//! its pages to neither that thread's allocator arena nor a global pool: the free writes
//! only this thread's memory. A full cache, or a thread that is exiting, frees to the
//! allocator.
//!
//! ## Lock order
//! `writer` is a leaf: the only things taken under it are the tmpfs-wide page reservation
//! counter (an atomic) and the thread-local retire and free-page lists.

use crate::PAGE;
use parking_lot::{Mutex, MutexGuard};
use scalevfs_primitives::seqlock::SeqCounter;
use scalevfs_vfs::SysResult;
use std::cell::RefCell;
use std::ptr;
use std::sync::atomic::{AtomicPtr, AtomicU64, Ordering};

const WORDS: usize = PAGE / 8;
/// Index bits per tree level.
const BITS: u32 = 6;
/// Slots per node.
pub const FANOUT: usize = 1 << BITS;
/// Pages a thread keeps for reuse after freeing them (256 KiB).
pub const LOCAL_FREE: usize = 64;

/// One page of file data, as atomic words, and the sequence counter that lets a reader
/// copy it whole (see the module docs).
pub struct Page {
    seq: SeqCounter,
    words: [AtomicU64; WORDS],
}

/// The marker of an allocated page that was never written. A dangling, aligned, non-null
/// address that no allocation can have; never dereferenced.
fn hole() -> *mut Page {
    ptr::NonNull::<Page>::dangling().as_ptr()
}

/// A tree node: children (shift > 0) or pages (shift 0), as untyped pointers.
struct Node {
    shift: u32,
    slots: [AtomicPtr<()>; FANOUT],
}

impl Node {
    fn boxed(shift: u32) -> *mut Node {
        Box::into_raw(Box::new(Node {
            shift,
            slots: [const { AtomicPtr::new(ptr::null_mut()) }; FANOUT],
        }))
    }
    /// Whether the tree under this root covers `idx` (a root's first index is 0).
    fn covers(&self, idx: u64) -> bool {
        (idx >> self.shift) >> BITS == 0
    }
    fn slot(&self, idx: u64) -> &AtomicPtr<()> {
        &self.slots[((idx >> self.shift) & (FANOUT as u64 - 1)) as usize]
    }
}

thread_local! {
    static FREE_PAGES: RefCell<Vec<Box<Page>>> = const { RefCell::new(Vec::new()) };
}

/// A zeroed page, from this thread's free pages if it has one.
fn alloc_page() -> *mut Page {
    let reused = FREE_PAGES.try_with(|f| f.borrow_mut().pop()).ok().flatten();
    let page = match reused {
        Some(mut p) => {
            for w in &mut p.words {
                *w.get_mut() = 0;
            }
            p
        }
        None => Box::new(Page {
            seq: SeqCounter::new(),
            // A repeat expression, not `array::from_fn`: the same code natively, but under
            // Miri from_fn re-borrows the whole array for every element it writes, time
            // quadratic in the length, which made a file's first write take seconds there.
            words: [const { AtomicU64::new(0) }; WORDS],
        }),
    };
    Box::into_raw(page)
}

/// Frees a page no reader can reach, into this thread's free pages while there is room.
fn free_page(page: Box<Page>) {
    let mut page = Some(page);
    let _ = FREE_PAGES.try_with(|f| {
        let mut f = f.borrow_mut();
        if f.len() < LOCAL_FREE {
            f.extend(page.take());
        }
    });
    // A full cache, or a thread whose cache is gone (exiting): to the allocator.
    drop(page);
}

/// A retired page's address, moved to the retire list (freed on this thread or, after it
/// exits, on whichever thread collects).
struct RetiredPage(*mut Page);
// SAFETY: a page is atomics only; the pointer is dereferenced by nobody but the free.
unsafe impl Send for RetiredPage {}

/// Unlinked `page` (a real page, not `hole()`): frees it after a grace period.
fn retire_page(page: *mut Page) {
    let retired = RetiredPage(page);
    let free = move || {
        let retired = retired;
        // SAFETY: run after the grace period: no reader holds the pointer; it came from
        // `Box::into_raw` in `alloc_page` and is freed once.
        free_page(unsafe { Box::from_raw(retired.0) })
    };
    // SAFETY: the caller unlinked `page` from its slot (new readers cannot load it) and
    // owns it; `free_page` takes no lock (a thread-local list).
    unsafe { scalevfs_vfs::retire::retire_fn(free) }
}

/// Copies `out.len()` bytes from `page` at byte `at` as of one instant between writes:
/// retried while a writer changes the page.
fn load_bytes(page: &Page, at: usize, out: &mut [u8]) {
    loop {
        let start = page.seq.read_begin();
        load_words(page, at, out);
        if !page.seq.read_retry(start) {
            return;
        }
    }
}

/// Copies `out.len()` bytes from `page` at byte `at` with word-sized atomic loads: a
/// partial first and last word, and whole words between them in one loop without bounds
/// checks (compiled to plain 8-byte moves).
fn load_words(page: &Page, at: usize, out: &mut [u8]) {
    // Relaxed everywhere: the page was published by a Release store this reader's Acquire
    // load saw; later changes are ordered by the page's sequence counter (`load_bytes`).
    let load = |w: usize| page.words[w].load(Ordering::Relaxed).to_ne_bytes();
    let (first, skip) = (at / 8, at % 8);
    let head = if skip == 0 {
        0
    } else {
        (8 - skip).min(out.len())
    };
    if head > 0 {
        out[..head].copy_from_slice(&load(first)[skip..skip + head]);
    }
    let w0 = (at + head) / 8;
    let whole_len = (out.len() - head) / 8 * 8;
    let (whole, tail) = out[head..].split_at_mut(whole_len);
    for (chunk, word) in whole.chunks_exact_mut(8).zip(&page.words[w0..]) {
        chunk.copy_from_slice(&word.load(Ordering::Relaxed).to_ne_bytes());
    }
    if !tail.is_empty() {
        let n = tail.len();
        tail.copy_from_slice(&load(w0 + whole.len() / 8)[..n]);
    }
}

/// Stores `src` into a published `page` at byte `at`, inside a write section of its
/// sequence counter, so readers see all of it or none.
fn store_bytes(page: &Page, at: usize, src: &[u8]) {
    page.seq.write_begin();
    store_words(page, at, src);
    page.seq.write_end();
}

/// Stores `src` into `page` at byte `at` with word-sized atomic stores, as `load_words`
/// loads: a partial first and last word merged into the word's current bytes (the caller
/// is the only writer, so that load and store cannot lose another writer's bytes), whole
/// words between them.
fn store_words(page: &Page, at: usize, src: &[u8]) {
    let merge = |w: usize, o: usize, bytes: &[u8]| {
        let mut b = page.words[w].load(Ordering::Relaxed).to_ne_bytes();
        b[o..o + bytes.len()].copy_from_slice(bytes);
        page.words[w].store(u64::from_ne_bytes(b), Ordering::Relaxed);
    };
    let (first, skip) = (at / 8, at % 8);
    let head = if skip == 0 {
        0
    } else {
        (8 - skip).min(src.len())
    };
    if head > 0 {
        merge(first, skip, &src[..head]);
    }
    let w0 = (at + head) / 8;
    let (whole, tail) = src[head..].split_at((src.len() - head) / 8 * 8);
    for (chunk, word) in whole.chunks_exact(8).zip(&page.words[w0..]) {
        let bytes: [u8; 8] = chunk.try_into().expect("chunks_exact(8)");
        word.store(u64::from_ne_bytes(bytes), Ordering::Relaxed);
    }
    if !tail.is_empty() {
        merge(w0 + whole.len() / 8, 0, tail);
    }
}

/// See the module docs.
pub struct FilePages {
    root: AtomicPtr<Node>,
    len: AtomicU64,
    writer: Mutex<()>,
}

impl Default for FilePages {
    fn default() -> FilePages {
        FilePages {
            root: AtomicPtr::new(ptr::null_mut()),
            len: AtomicU64::new(0),
            writer: Mutex::new(()),
        }
    }
}

/// What a leaf slot holds, for readers.
enum Slot<'g> {
    Absent,
    Hole,
    Data(&'g Page),
}

impl FilePages {
    /// The number of pages (holes included), without the lock (as of the last writer).
    pub fn count(&self) -> u64 {
        // Relaxed: a statistic; writers store it under the lock.
        self.len.load(Ordering::Relaxed)
    }

    /// Exclusive access for changes.
    pub fn write(&self) -> PagesWriter<'_> {
        PagesWriter {
            pages: self,
            _lock: self.writer.lock(),
        }
    }

    /// The leaf slot of `idx`, while `_guard` is pinned.
    fn lookup<'g>(&self, idx: u64, _guard: &'g scalevfs_primitives::epoch::Guard) -> Slot<'g> {
        // Acquire: pairs with the Release stores that published the root, each child node
        // and each page (`PagesWriter::slot_mut`, `write_at`), so their contents are
        // initialized for us.
        let mut node = self.root.load(Ordering::Acquire);
        if node.is_null()
            // SAFETY: nodes are published initialized (above) and freed only with the
            // file, which the caller keeps alive (it holds the inode).
            || !unsafe { &*node }.covers(idx)
        {
            return Slot::Absent;
        }
        loop {
            // SAFETY: as above.
            let n = unsafe { &*node };
            let child = n.slot(idx).load(Ordering::Acquire);
            if child.is_null() {
                return Slot::Absent;
            }
            if n.shift == 0 {
                let page = child.cast::<Page>();
                if page == hole() {
                    return Slot::Hole;
                }
                // SAFETY: we are pinned and loaded the pointer from its slot, so it is
                // retired (if ever) after our pin and freed after we unpin (`'g`).
                return Slot::Data(unsafe { &*page });
            }
            node = child.cast::<Node>();
        }
    }

    /// Copies `buf.len()` bytes at byte `off` into `buf`; missing pages and holes read as
    /// zeros. Writes no shared memory.
    pub fn read_at(&self, off: u64, buf: &mut [u8]) {
        let guard = scalevfs_primitives::epoch::pin();
        let mut done = 0;
        while done < buf.len() {
            let at = off + done as u64;
            let (idx, in_page) = (at / PAGE as u64, (at % PAGE as u64) as usize);
            let chunk = (PAGE - in_page).min(buf.len() - done);
            match self.lookup(idx, &guard) {
                Slot::Data(page) => load_bytes(page, in_page, &mut buf[done..done + chunk]),
                Slot::Absent | Slot::Hole => buf[done..done + chunk].fill(0),
            }
            done += chunk;
        }
    }

    /// The first page index at or after `idx` that holds data (`SEEK_DATA`).
    pub fn next_data(&self, idx: u64) -> Option<u64> {
        let guard = scalevfs_primitives::epoch::pin();
        // Acquire: as in `lookup`.
        let root = self.root.load(Ordering::Acquire);
        let mut found = None;
        if !root.is_null() {
            // SAFETY: as in `lookup`: published initialized, freed with the file.
            scan(unsafe { &*root }, 0, idx, u64::MAX, &mut |i, slot| {
                let p = slot.load(Ordering::Acquire);
                if !p.is_null() && p.cast::<Page>() != hole() {
                    found = Some(i);
                }
                found.is_none()
            });
        }
        drop(guard);
        found
    }

    /// The first page index at or after `idx` that holds no data (`SEEK_HOLE`).
    pub fn next_hole(&self, mut idx: u64) -> u64 {
        let guard = scalevfs_primitives::epoch::pin();
        while matches!(self.lookup(idx, &guard), Slot::Data(_)) {
            idx += 1;
        }
        idx
    }
}

/// Calls `f(index, slot)` for each non-null leaf slot of `node`'s subtree whose index is in
/// `[from, to)`, in index order, while `f` returns true; returns false once it has stopped.
/// `base` is the first index `node` covers.
fn scan(
    node: &Node,
    base: u64,
    from: u64,
    to: u64,
    f: &mut dyn FnMut(u64, &AtomicPtr<()>) -> bool,
) -> bool {
    let span = 1u64 << node.shift;
    for (i, slot) in node.slots.iter().enumerate() {
        let first = base + i as u64 * span;
        let last = first.saturating_add(span); // exclusive
        if last <= from || first >= to {
            continue;
        }
        // Acquire: as in `lookup` (a reader's scan); a writer's own stores are ordered
        // before its loads anyway.
        let child = slot.load(Ordering::Acquire);
        if child.is_null() {
            continue;
        }
        let go_on = if node.shift == 0 {
            f(first, slot)
        } else {
            // SAFETY: a child node, published initialized and freed only with the file.
            scan(unsafe { &*child.cast::<Node>() }, first, from, to, f)
        };
        if !go_on {
            return false;
        }
    }
    true
}

/// Exclusive access to a file's pages (its `writer` mutex).
pub struct PagesWriter<'a> {
    pages: &'a FilePages,
    _lock: MutexGuard<'a, ()>,
}

impl PagesWriter<'_> {
    /// The leaf slot of `idx`, made (with the nodes above it) if `create`.
    fn slot_mut(&mut self, idx: u64, create: bool) -> Option<&AtomicPtr<()>> {
        let pages = self.pages;
        // Relaxed loads of our own tree: only writers store, and we hold the mutex, whose
        // acquisition ordered us after every earlier writer.
        let mut root = pages.root.load(Ordering::Relaxed);
        if root.is_null() {
            if !create {
                return None;
            }
            root = Node::boxed(0);
            // Release: pairs with the readers' Acquire load of `root` (`lookup`).
            pages.root.store(root, Ordering::Release);
        }
        // SAFETY: nodes are freed only with the file (`Drop`), which `&self` outlives.
        while !unsafe { &*root }.covers(idx) {
            if !create {
                return None;
            }
            // SAFETY: as above.
            let up = Node::boxed(unsafe { &*root }.shift + BITS);
            // SAFETY: just made, not yet published.
            unsafe { &*up }.slots[0].store(root.cast(), Ordering::Relaxed);
            // Release: as above; the old root stays reachable (slot 0), so readers that
            // loaded it still walk a valid tree.
            pages.root.store(up, Ordering::Release);
            root = up;
        }
        let mut node = root;
        loop {
            // SAFETY: as above.
            let n = unsafe { &*node };
            let slot = n.slot(idx);
            if n.shift == 0 {
                return Some(slot);
            }
            let mut child = slot.load(Ordering::Relaxed);
            if child.is_null() {
                if !create {
                    return None;
                }
                child = Node::boxed(n.shift - BITS).cast();
                // Release: pairs with the readers' Acquire load of this slot.
                slot.store(child, Ordering::Release);
            }
            node = child.cast();
        }
    }

    fn set_len(&self, n: u64) {
        // Relaxed: read as a statistic (`count`); stored only under the mutex.
        self.pages.len.store(n, Ordering::Relaxed);
    }

    /// Whether page `idx` exists (data or hole).
    pub fn contains(&mut self, idx: u64) -> bool {
        self.slot_mut(idx, false)
            .is_some_and(|s| !s.load(Ordering::Relaxed).is_null())
    }

    /// Makes page `idx` exist as a hole unless it exists (`fallocate`).
    pub fn insert_hole(&mut self, idx: u64) {
        let slot = self.slot_mut(idx, true).expect("created");
        if slot.load(Ordering::Relaxed).is_null() {
            // Relaxed: a marker, not a pointer to memory a reader follows.
            slot.store(hole().cast(), Ordering::Relaxed);
            self.set_len(self.pages.count() + 1);
        }
    }

    /// Writes `src` at byte `off`, making missing pages; `reserve` is asked before each
    /// missing page is made. Returns the bytes written, short if `reserve` refused after
    /// the first page, or its error if it refused the first.
    pub fn write_at(
        &mut self,
        off: u64,
        src: &[u8],
        mut reserve: impl FnMut() -> SysResult<()>,
    ) -> SysResult<usize> {
        let mut done = 0;
        while done < src.len() {
            let at = off + done as u64;
            let (idx, in_page) = (at / PAGE as u64, (at % PAGE as u64) as usize);
            let chunk = (PAGE - in_page).min(src.len() - done);
            let mut added = false;
            let slot = self.slot_mut(idx, true).expect("created");
            let page = slot.load(Ordering::Relaxed).cast::<Page>();
            if page.is_null() || page == hole() {
                if page.is_null() {
                    if let Err(err) = reserve() {
                        if done == 0 {
                            return Err(err);
                        }
                        break;
                    }
                    added = true;
                }
                let fresh = alloc_page();
                // SAFETY: just allocated, not yet published (so no write section needed).
                store_words(unsafe { &*fresh }, in_page, &src[done..done + chunk]);
                // Release: pairs with the readers' Acquire load of the slot: the bytes
                // above are visible to whoever sees the page.
                slot.store(fresh.cast(), Ordering::Release);
            } else {
                // SAFETY: a published page, unlinked only by writers (we hold the mutex).
                store_bytes(unsafe { &*page }, in_page, &src[done..done + chunk]);
            }
            if added {
                self.set_len(self.pages.count() + 1);
            }
            done += chunk;
        }
        Ok(done)
    }

    /// Zeroes bytes `[from, to)`, which lie in one page, if that page holds data.
    pub fn zero(&mut self, from: u64, to: u64) {
        if to <= from {
            return;
        }
        let idx = from / PAGE as u64;
        debug_assert_eq!((to - 1) / PAGE as u64, idx, "one page");
        let Some(slot) = self.slot_mut(idx, false) else {
            return;
        };
        let page = slot.load(Ordering::Relaxed).cast::<Page>();
        if !page.is_null() && page != hole() {
            let at = (from % PAGE as u64) as usize;
            let zeros = [0u8; PAGE];
            // SAFETY: a published page; we hold the mutex, so nobody unlinks it.
            store_bytes(unsafe { &*page }, at, &zeros[..(to - from) as usize]);
        }
    }

    /// Removes the pages (and holes) with index in `[from, to)`; returns how many.
    pub fn remove_range(&mut self, from: u64, to: u64) -> u64 {
        // Relaxed: our own tree (see `slot_mut`).
        let root = self.pages.root.load(Ordering::Relaxed);
        if root.is_null() || from >= to {
            return 0;
        }
        let mut gone = 0;
        // SAFETY: nodes are freed only with the file.
        scan(unsafe { &*root }, 0, from, to, &mut |_, slot| {
            // Relaxed: a null store unlinks; the readers that load the old pointer are
            // covered by the grace period, which orders the free after their reads.
            let old = slot.swap(ptr::null_mut(), Ordering::Relaxed).cast::<Page>();
            if old != hole() {
                retire_page(old);
            }
            gone += 1;
            true
        });
        self.set_len(self.pages.count() - gone);
        gone
    }
}

impl FilePages {
    /// Frees every page at once, without a grace period (an evicted inode); returns how
    /// many pages (holes included) there were.
    ///
    /// # Safety
    /// No reader may be inside `read_at`, `next_data` or `next_hole` of this file, nor
    /// enter one: true of an inode being evicted, since every reader holds a reference
    /// to it.
    pub unsafe fn free_all(&self) -> u64 {
        let w = self.write();
        // Relaxed: our own tree (see `slot_mut`).
        let root = self.root.load(Ordering::Relaxed);
        if root.is_null() {
            return 0;
        }
        let mut gone = 0;
        // SAFETY: nodes are freed only with the file.
        scan(unsafe { &*root }, 0, 0, u64::MAX, &mut |_, slot| {
            let old = slot.swap(ptr::null_mut(), Ordering::Relaxed).cast::<Page>();
            if old != hole() {
                // SAFETY: unlinked, and no reader can hold it (the caller's contract);
                // from `Box::into_raw` in `alloc_page`, freed once.
                free_page(unsafe { Box::from_raw(old) });
            }
            gone += 1;
            true
        });
        w.set_len(0);
        drop(w);
        gone
    }
}

impl Drop for FilePages {
    fn drop(&mut self) {
        fn free(node: *mut Node) {
            // SAFETY: `&mut FilePages`: no reader or writer remains; each node and page is
            // owned by exactly one slot and freed once, from its `Box::into_raw`.
            let n = unsafe { Box::from_raw(node) };
            for slot in &n.slots {
                let p = slot.load(Ordering::Relaxed);
                if p.is_null() {
                    continue;
                }
                if n.shift > 0 {
                    free(p.cast());
                } else if p.cast::<Page>() != hole() {
                    // SAFETY: as above.
                    free_page(unsafe { Box::from_raw(p.cast::<Page>()) });
                }
            }
        }
        let root = *self.root.get_mut();
        if !root.is_null() {
            free(root);
        }
    }
}

#[cfg(test)]
mod shuttle_tests;
#[cfg(test)]
mod tests;
