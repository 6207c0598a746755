//! One bucket's entries: a slot array (the entries' positions) with a hash index by name.
//!
//! An entry keeps its slot for life, so its `getdents64` position never changes; a scan
//! walks the slots in index order. Lookup, insertion and removal cost O(1) expected: the
//! index (`hashbrown::HashTable`) maps a name's hash to slot numbers, and freed slots go
//! on a free list threaded through the slot array (the most recently freed is reused
//! first, as a new entry needs any free position, not a particular one).
//!
//! Memory: 24 bytes a slot (a thin name pointer, an inode pointer, 32 bits of the name's
//! hash) plus about 5 bytes of index per entry; the arrays keep their largest size while
//! the bucket has entries, and are freed when it empties if they grew past
//! [`KEEP_WHEN_EMPTY`] slots. Everything here runs under the bucket's lock (`&mut self`).

use crate::dirmap::ThinName;
use hashbrown::HashTable;
use scalevfs_vfs::InodeRef;

/// Slots a bucket may hold: positions have this many numbers per bucket (`hashdir`).
pub(super) const SLOT_LIMIT: u32 = 1 << 22;

/// The end of the free list.
const NO_SLOT: u32 = u32::MAX;

/// An emptied bucket whose arrays have more slots than this frees them.
pub(super) const KEEP_WHEN_EMPTY: usize = 32;

/// An entry: 24 bytes.
pub(super) struct Entry {
    /// The low 32 bits of the name's hash (`hashdir::hash_name`), compared before the
    /// name and spread again for the index.
    pub(super) hash: u32,
    pub(super) name: ThinName,
    pub(super) inode: InodeRef,
}

impl Entry {
    pub(super) fn bytes(&self) -> &[u8] {
        std::borrow::Borrow::borrow(&self.name)
    }
}

/// A slot: an entry, or free (with the next free slot). 24 bytes: the free variant fits
/// beside the name pointer's niche.
enum Slot {
    Used(Entry),
    Free { next: u32 },
}

#[cfg(test)]
thread_local! {
    /// Entries whose names a lookup or removal compared on this thread (tests: the cost
    /// of a lookup, independent of timing).
    pub(crate) static VISITS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// Whether `slot` holds `name` (whose hash's low 32 bits are `hash`).
fn holds(slot: &Slot, hash: u32, name: &[u8]) -> bool {
    #[cfg(test)]
    VISITS.with(|v| v.set(v.get() + 1));
    matches!(slot, Slot::Used(e) if e.hash == hash && e.bytes() == name)
}

/// The index's hash of an entry: the stored 32 bits spread over 64 (Fibonacci hashing),
/// so that the table's control bytes, which take the top bits, vary.
fn index_hash(hash: u32) -> u64 {
    u64::from(hash).wrapping_mul(0x9e37_79b9_7f4a_7c15)
}

/// See the module docs.
pub(super) struct Slots {
    slots: Vec<Slot>,
    /// Slot numbers of the used slots, hashed by [`index_hash`].
    index: HashTable<u32>,
    /// The first free slot ([`NO_SLOT`]: none but past the end).
    free: u32,
}

impl Default for Slots {
    fn default() -> Self {
        Slots {
            slots: Vec::new(),
            index: HashTable::new(),
            free: NO_SLOT,
        }
    }
}

impl Slots {
    /// The slot holding `name` (whose hash's low 32 bits are `hash`).
    pub(super) fn find(&self, hash: u32, name: &[u8]) -> Option<u32> {
        let slots = &self.slots;
        self.index
            .find(index_hash(hash), |&s| holds(&slots[s as usize], hash, name))
            .copied()
    }

    pub(super) fn entry(&self, slot: u32) -> &Entry {
        match &self.slots[slot as usize] {
            Slot::Used(e) => e,
            Slot::Free { .. } => unreachable!("slot {slot} is free"),
        }
    }

    pub(super) fn entry_mut(&mut self, slot: u32) -> &mut Entry {
        match &mut self.slots[slot as usize] {
            Slot::Used(e) => e,
            Slot::Free { .. } => unreachable!("slot {slot} is free"),
        }
    }

    /// Swaps the inodes of two used slots (`RENAME_EXCHANGE` within a bucket).
    pub(super) fn swap_inodes(&mut self, a: u32, b: u32) {
        let (x, y) = (a.min(b) as usize, a.max(b) as usize);
        let (low, high) = self.slots.split_at_mut(y);
        if let (Some(Slot::Used(p)), Some(Slot::Used(q))) = (low.get_mut(x), high.first_mut()) {
            std::mem::swap(&mut p.inode, &mut q.inode);
        }
    }

    /// Reserves a slot for [`Slots::fill`]: a free one, or a new one at the end; `None`
    /// if all [`SLOT_LIMIT`] are taken. A reserved slot reads as free until filled.
    pub(super) fn reserve(&mut self) -> Option<u32> {
        if self.free != NO_SLOT {
            let s = self.free;
            let Slot::Free { next } = self.slots[s as usize] else {
                unreachable!("the free list holds free slots")
            };
            self.free = next;
            return Some(s);
        }
        let s = u32::try_from(self.slots.len())
            .ok()
            .filter(|&s| s < SLOT_LIMIT)?;
        self.slots.push(Slot::Free { next: NO_SLOT });
        Some(s)
    }

    /// Puts `entry` in the reserved slot `slot`.
    pub(super) fn fill(&mut self, slot: u32, entry: Entry) {
        let hash = entry.hash;
        self.slots[slot as usize] = Slot::Used(entry);
        let slots = &self.slots;
        self.index
            .insert_unique(index_hash(hash), slot, |&s| match &slots[s as usize] {
                Slot::Used(e) => index_hash(e.hash),
                Slot::Free { .. } => unreachable!("the index holds used slots"),
            });
    }

    /// Takes the entry `name` out; its slot goes on the free list.
    pub(super) fn remove(&mut self, hash: u32, name: &[u8]) -> Option<Entry> {
        let slots = &self.slots;
        let found = self
            .index
            .find_entry(index_hash(hash), |&s| holds(&slots[s as usize], hash, name));
        let (slot, _) = found.ok()?.remove();
        let freed = std::mem::replace(
            &mut self.slots[slot as usize],
            Slot::Free { next: self.free },
        );
        self.free = slot;
        match freed {
            Slot::Used(e) => Some(e),
            Slot::Free { .. } => unreachable!("the index holds used slots"),
        }
    }

    /// Whether the arrays are worth freeing now that the bucket is empty (module docs).
    pub(super) fn oversized_when_empty(&self) -> bool {
        self.index.is_empty() && self.slots.capacity() > KEEP_WHEN_EMPTY
    }

    /// The used slots from `from` on, in slot order.
    pub(super) fn iter_from(&self, from: u32) -> impl Iterator<Item = (u32, &Entry)> {
        let from = (from as usize).min(self.slots.len());
        self.slots[from..]
            .iter()
            .enumerate()
            .filter_map(move |(i, s)| match s {
                // Below SLOT_LIMIT, so the sum fits.
                Slot::Used(e) => Some(((from + i) as u32, e)),
                Slot::Free { .. } => None,
            })
    }

    /// Every entry, taken out.
    pub(super) fn into_entries(self) -> impl Iterator<Item = Entry> {
        self.slots.into_iter().filter_map(|s| match s {
            Slot::Used(e) => Some(e),
            Slot::Free { .. } => None,
        })
    }

    /// Entries (tests).
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.index.len()
    }

    /// Slots, used or free (tests).
    #[cfg(test)]
    pub(super) fn slot_count(&self) -> usize {
        self.slots.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_stay_small() {
        // Regression guard for memory per file: a thin name, an inode pointer, a hash.
        assert_eq!(std::mem::size_of::<Slot>(), 24);
        assert_eq!(std::mem::size_of::<Slots>(), 64);
    }

    #[test]
    fn reserved_slots_are_numbered_in_order_and_skipped_by_scans() {
        // Reuse of freed slots needs entries (inodes): `hashdir_tests` checks it.
        let mut s = Slots::default();
        let got: Vec<u32> = (0..3).map(|_| s.reserve().unwrap()).collect();
        assert_eq!(got, [0, 1, 2]);
        assert_eq!(s.iter_from(0).count(), 0);
        assert_eq!(s.free, NO_SLOT);
    }

    #[test]
    fn index_hash_spreads_into_the_top_bits() {
        // The table's control byte is the top 7 bits: hashes differing in low bits only
        // must not all share it.
        let tops: std::collections::HashSet<u64> =
            (0..64u32).map(|h| index_hash(h) >> 57).collect();
        assert!(tops.len() > 32, "{} distinct control bytes", tops.len());
    }
}
