//! A chunk of descriptors: the slots (each slot is its descriptor's whole state), their
//! layout on cache lines, and the per-group "full" hints (see the parent module's docs).

use crossbeam_utils::CachePadded;
use scalevfs_vfs::erc::ErcInner;
use scalevfs_vfs::OpenFile;
use std::ptr;
use std::sync::atomic::{AtomicPtr, AtomicU64, Ordering};

/// Descriptors per group: the unit of the "full" hint.
pub(super) const GROUP: usize = 64;
/// Slots per 64-byte cache line.
const SLOTS_PER_LINE: usize = 64 / std::mem::size_of::<AtomicPtr<()>>();
/// Lines per group: descriptor `j` of a group lives on the group's line `j % LINES`.
const LINES: usize = GROUP / SLOTS_PER_LINE;

/// The close-on-exec flag, kept in the low bit of the slot's pointer.
pub(super) const CLOEXEC: usize = 1;
const _: () = assert!(std::mem::align_of::<ErcInner<OpenFile>>() > CLOEXEC);

/// A descriptor slot: null (free), or an uncounted pointer to the file whose count the
/// table owns, with [`CLOEXEC`] in its low bit.
pub(super) type Slot = AtomicPtr<ErcInner<OpenFile>>;

/// A slot value's file pointer, without the flag.
pub(super) fn file_of(v: *mut ErcInner<OpenFile>) -> *mut ErcInner<OpenFile> {
    v.map_addr(|a| a & !CLOEXEC)
}

/// `file` as stored in a slot with close-on-exec `on`.
pub(super) fn tagged(file: *mut ErcInner<OpenFile>, on: bool) -> *mut ErcInner<OpenFile> {
    file.map_addr(|a| a | if on { CLOEXEC } else { 0 })
}

/// Hint tags (low two bits of a group's hint word; the rest is a version that every
/// transition bumps, so that a filler's final CAS fails if anything happened meanwhile).
const TAG: u64 = 3;
/// The group may have free slots: allocation scans it.
const OPEN: u64 = 0;
/// A filler is checking whether every slot is in use.
const PENDING: u64 = 1;
/// Every slot was in use when the filler looked, and no close has freed one since:
/// allocation skips the group.
const FULL: u64 = 2;

/// The two atomic operations the hint protocol uses, so that the shuttle model runs the
/// protocol below on shuttle's atomics.
pub(super) trait HintWord {
    fn load(&self, o: Ordering) -> u64;
    fn cas(&self, current: u64, new: u64) -> Result<u64, u64>;
}

impl HintWord for AtomicU64 {
    fn load(&self, o: Ordering) -> u64 {
        AtomicU64::load(self, o)
    }
    /// SeqCst: see [`note_freed`].
    fn cas(&self, current: u64, new: u64) -> Result<u64, u64> {
        self.compare_exchange(current, new, Ordering::SeqCst, Ordering::SeqCst)
    }
}

/// Whether allocation may skip a group whose hint is `hint`.
pub(super) fn hint_says_full<H: HintWord>(hint: &H) -> bool {
    // Acquire: a FULL read here was stored after the filler's scan; a close that
    // happened before us reset it first (coherence), so we cannot read a stale FULL.
    hint.load(Ordering::Acquire) & TAG == FULL
}

/// After a close emptied a slot of the group (with a SeqCst swap): resets the group's
/// FULL or PENDING hint to OPEN, so that no allocation skips the freed slot.
pub(super) fn note_freed<H: HintWord>(hint: &H) {
    // SeqCst, with the SeqCst swap that emptied the slot and the filler's SeqCst CAS
    // and scan (Dekker): either we see its PENDING/FULL here, or its scan sees our
    // empty slot.
    let mut h = hint.load(Ordering::SeqCst);
    while h & TAG != OPEN {
        match hint.cas(h, ((h >> 2) + 1) << 2 | OPEN) {
            Ok(_) => break,
            Err(now) => h = now,
        }
    }
}

/// Marks the group FULL if `all_in_use` (which must read every slot of the group with
/// SeqCst loads) finds every slot in use, unless a close frees one meanwhile.
pub(super) fn mark_full_if<H: HintWord>(hint: &H, all_in_use: impl FnOnce() -> bool) {
    let h = hint.load(Ordering::Relaxed);
    if h & TAG != OPEN {
        return;
    }
    let pending = ((h >> 2) + 1) << 2 | PENDING;
    if hint.cas(h, pending).is_err() {
        return;
    }
    let end = (pending & !TAG) | if all_in_use() { FULL } else { OPEN };
    // Fails if a close reset the hint meanwhile (the version moved on): leave it OPEN.
    let _ = hint.cas(pending, end);
}

pub(super) struct Chunk {
    pub(super) base: u32,
    /// One hint word per group of [`GROUP`] descriptors; written only when a group fills
    /// or a close frees a slot of a group marked full.
    hints: Box<[AtomicU64]>,
    /// Indexed through [`Chunk::slot`], which spreads neighbouring descriptors over lines.
    /// Line-aligned, so that the spreading really gives each a line of its own.
    slots: Box<[CachePadded<[Slot; SLOTS_PER_LINE]>]>,
}

/// The first descriptor of chunk `k`.
pub(super) fn chunk_base(k: usize) -> u64 {
    64 * ((1u64 << k) - 1)
}

/// Which chunk and index hold `fd`.
pub(super) fn locate(fd: u32) -> (usize, usize) {
    let k = (63 - ((fd as u64 / 64) + 1).leading_zeros()) as usize;
    (k, (fd as u64 - chunk_base(k)) as usize)
}

impl Chunk {
    pub(super) fn new(k: usize) -> Chunk {
        let n = 64usize << k;
        Chunk {
            base: chunk_base(k) as u32,
            hints: (0..n / GROUP).map(|_| AtomicU64::new(OPEN)).collect(),
            slots: (0..n / SLOTS_PER_LINE)
                .map(|_| CachePadded::new(std::array::from_fn(|_| AtomicPtr::new(ptr::null_mut()))))
                .collect(),
        }
    }

    pub(super) fn len(&self) -> usize {
        self.slots.len() * SLOTS_PER_LINE
    }

    pub(super) fn groups(&self) -> usize {
        self.hints.len()
    }

    /// The slot of the chunk's `i`-th descriptor: in its group's lines, line
    /// `i % LINES`, so that descriptors close in number (used by threads opening at the
    /// same time) are on different lines, and a group's scan reads at most `LINES` lines.
    pub(super) fn slot(&self, i: usize) -> &Slot {
        let (g, j) = (i / GROUP, i % GROUP);
        &self.slots[g * LINES + j % LINES][j / LINES]
    }

    /// Whether allocation may skip group `g` (every slot in use; see the module docs).
    pub(super) fn group_full(&self, g: usize) -> bool {
        hint_says_full(&self.hints[g])
    }

    /// After a close emptied a slot of group `g`: see [`note_freed`].
    pub(super) fn note_freed(&self, g: usize) {
        note_freed(&self.hints[g]);
    }

    /// After an allocation claimed descriptor `j` of group `g`, every slot below it in
    /// use: if the slots above are in use too, marks the group FULL (unless a close frees
    /// a slot meanwhile). Cheap when the group is not nearly full: it stops at the first
    /// free slot above `j`, and only claims at `j >= GROUP / 2` look at all.
    pub(super) fn maybe_mark_full(&self, g: usize, j: usize) {
        let in_use = |j: usize, o| !self.slot(g * GROUP + j).load(o).is_null();
        if j < GROUP / 2 || !(j + 1..GROUP).all(|j| in_use(j, Ordering::Relaxed)) {
            return;
        }
        mark_full_if(&self.hints[g], || {
            (0..GROUP).all(|j| in_use(j, Ordering::SeqCst))
        });
    }
}
