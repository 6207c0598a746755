//! The table of extended attributes: inode number -> the inode's attributes, read without
//! a lock and without a write to shared memory.
//!
//! ## Layout
//! * **Buckets**: `2^bits` of them; inode `ino` belongs to bucket `hash_64(ino, bits)`.
//!   A bucket is a pointer, on a cache line of its own, to an immutable **inode map**
//!   (inode number -> cell) of the bucket's inodes that have attributes, or null when it
//!   has none; and a writer lock, the same index of a table of hashed mutexes.
//! * **Cell** ([`InodeXattrs`]): one per inode with attributes, holding a pointer to the
//!   inode's current **list**: immutable, never empty, sorted in descending name order.
//!   Each attribute of a list is reference counted, so that a new list shares the
//!   attributes it does not change with the old one (a change copies pointers, not values).
//!
//! A file without attributes costs nothing: it has no cell and no map entry, and its
//! [`HAS_XATTRS`] flag is clear, so that readers and eviction skip the table.
//!
//! ## Readers (`getxattr`, `listxattr`)
//! Skip the table when [`HAS_XATTRS`] is clear; else pin the epoch, Acquire-load the
//! bucket's map, look the inode up in it (reads only), Acquire-load its cell's list, copy
//! out what the call returns, unpin. They take no lock; the only memory they write is
//! their thread's own epoch record.
//!
//! ## Writers (`setxattr`, `removexattr`, eviction)
//! Under the bucket's writer lock, pinned:
//! * an inode that has a cell and keeps at least one attribute: build the new list,
//!   Release-swap it into the cell, retire the old list;
//! * an inode's first attribute: a new cell holding the list, a copy of the map with the
//!   inode added, Release-stored into the bucket, the old map retired; then
//!   [`HAS_XATTRS`] is set;
//! * an inode's last attribute, or its eviction: a copy of the map without the inode
//!   (null if it was the last), Release-stored, the old map and the cell (with its
//!   list) retired; [`HAS_XATTRS`] is cleared.
//!
//! Retired objects are handed to the epoch collector after the lock is released, and are
//! freed once every thread pinned at that time has unpinned; a reader holds its pin while
//! it uses what it loaded.
//!
//! ## Why a reader sees one whole list of a moment within its call
//! A list is never changed once published. A reader that found the inode's cell in the
//! current map reads the cell's list of the moment of its load. A reader that found it in
//! a map that a writer has since replaced reads what the cell held at the replacement:
//! the map copy keeps the same cell (value changes go on in it), or, if the cell was
//! dropped from the map, nobody writes it again; either way the list was current at some
//! moment between the reader's map load and its list load.
//!
//! ## Cost
//! Nothing per inode without attributes. Per file system, `2^bits` padded map pointers
//! and as many padded writer locks, apart so that a writer's lock word is not on the line
//! that readers of the bucket's other inodes read (`bits` is [`table_bits`] of the CPU
//! count, at least [`MIN_BITS`]: 64 KiB with 256 buckets). An inode with attributes has a
//! cell (8 bytes), a list (a 24-byte vector of 8-byte pointers), a map entry (16 bytes
//! and a control byte) and per attribute an `Arc` (48 bytes plus the name and value).
//! Changing a value builds a list of pointers;
//! an inode's first and last attribute copy its bucket's map, about (inodes with
//! attributes) / `2^bits` entries. A getxattr costs about 830 instructions against about
//! 950 with the mutex (`fgetxattr` of one of three attributes, callgrind).
//!
//! ## Locks
//! A bucket's writer lock is a leaf (taken under the VFS inode `rwsem`);
//! [`HAS_XATTRS`] is set and cleared under it, so the flag's changes follow the map's.
//!
//! ## Tests
//! `xattr_tests` (semantics, frees, a many-thread stress of readers against set, remove
//! and eviction on inodes sharing two buckets; also run under Miri and ThreadSanitizer)
//! and `xattr_shuttle_tests` (a model of the two-level publication and its grace
//! periods).

use crate::xattr::HAS_XATTRS;
use crossbeam_utils::CachePadded;
use hashbrown::HashTable;
use scalevfs_primitives::epoch::{self, Atomic, Guard, Owned, Pointer, Shared};
use scalevfs_primitives::hashed::{table_bits, HashedMutexes};
use scalevfs_vfs::{Inode, SysResult};
use std::ptr::NonNull;
use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};
use std::sync::Arc;

/// The least number of bucket bits (256 buckets): more buckets than the lock table of
/// a small machine has, so that maps stay short.
pub(crate) const MIN_BITS: u32 = 8;

/// One extended attribute.
pub(crate) struct Xattr {
    pub(crate) name: Box<[u8]>,
    pub(crate) value: Box<[u8]>,
}

/// An inode's attributes, sorted by name in descending byte order (`listxattr` on
/// Linux's tmpfs reports them so: its `simple_xattrs` red-black tree). Immutable once
/// published.
pub(crate) type XattrList = Vec<Arc<Xattr>>;

/// An inode's cell: its current list (never null while the cell is in a map).
struct InodeXattrs {
    list: Atomic<XattrList>,
}

impl Drop for InodeXattrs {
    fn drop(&mut self) {
        // SAFETY: a cell is dropped after the grace period that followed its removal from
        // the map, or with the table; no reader can reach it or its list any more, and
        // the list it holds was never retired separately (only replaced lists are).
        unsafe {
            let list = self.list.load(Relaxed, epoch::unprotected());
            if !list.is_null() {
                drop(list.into_owned());
            }
        }
    }
}

/// A cell's address in an inode map. Maps are copied (the copy shares the cells); a cell
/// is freed only through the epoch collector, after its removal from the current map.
#[derive(Clone, Copy)]
struct CellPtr(NonNull<InodeXattrs>);

/// A bucket's inodes that have attributes. Immutable once published.
#[derive(Clone, Default)]
struct InodeMap {
    cells: HashTable<(u64, CellPtr)>,
}

// SAFETY: a map only holds pointers to cells, which are `Send + Sync` (an `Atomic` of a
// `Send + Sync` list); the map itself is never changed after it is published.
unsafe impl Send for InodeMap {}
// SAFETY: as above.
unsafe impl Sync for InodeMap {}

/// The hash of an inode number inside a map: a multiplier other than the bucket's
/// (whose top bits are the same for every inode of a bucket), folded so that the low bits,
/// which pick the position, depend on the high ones.
fn map_hash(ino: u64) -> u64 {
    let h = ino.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    h ^ (h >> 32)
}

impl InodeMap {
    fn get<'g>(&self, ino: u64, _guard: &'g Guard) -> Option<&'g InodeXattrs> {
        let (_, cell) = self.cells.find(map_hash(ino), |(k, _)| *k == ino)?;
        // SAFETY: a cell reachable from a map that the caller loaded while pinned by
        // `_guard` is retired only after that map stopped being current, so it is freed
        // only after `_guard` unpins.
        Some(unsafe { cell.0.as_ref() })
    }

    fn with(&self, ino: u64, cell: CellPtr) -> InodeMap {
        let mut m = self.clone();
        m.cells
            .insert_unique(map_hash(ino), (ino, cell), |(k, _)| map_hash(*k));
        m
    }

    fn without(&self, ino: u64) -> InodeMap {
        let mut m = self.clone();
        if let Ok(e) = m.cells.find_entry(map_hash(ino), |(k, _)| *k == ino) {
            e.remove();
        }
        m
    }
}

/// See the module docs.
pub(crate) struct XattrTable {
    maps: Box<[CachePadded<Atomic<InodeMap>>]>,
    writers: HashedMutexes,
}

/// What a writer unlinked, to retire once its lock is released.
#[derive(Default)]
struct Retired<'g> {
    list: Option<Shared<'g, XattrList>>,
    map: Option<Shared<'g, InodeMap>>,
    cell: Option<Shared<'g, InodeXattrs>>,
}

impl Retired<'_> {
    /// Hands everything to the collector.
    ///
    /// # Safety
    /// Each pointer was unlinked (no new reader can reach it) and is retired once.
    unsafe fn retire(self, guard: &Guard) {
        // SAFETY: per our contract; dropping lists, maps and cells takes no lock.
        unsafe {
            if let Some(p) = self.list {
                guard.defer_destroy(p);
            }
            if let Some(p) = self.map.filter(|p| !p.is_null()) {
                guard.defer_destroy(p);
            }
            if let Some(p) = self.cell {
                guard.defer_destroy(p);
            }
        }
    }
}

impl XattrTable {
    pub(crate) fn new() -> XattrTable {
        Self::with_bits(table_bits(scalevfs_primitives::cpu::num_cpus()).max(MIN_BITS))
    }

    /// A table of `2^bits` buckets (tests use few, so that inodes share maps).
    pub(crate) fn with_bits(bits: u32) -> XattrTable {
        let writers = HashedMutexes::with_bits(bits);
        XattrTable {
            maps: (0..writers.len())
                .map(|_| CachePadded::new(Atomic::null()))
                .collect(),
            writers,
        }
    }

    /// Runs `f` on the inode's attributes (empty if it has none). Takes no lock and writes
    /// no shared memory.
    pub(crate) fn read<R>(&self, inode: &Inode, f: impl FnOnce(&[Arc<Xattr>]) -> R) -> R {
        if !inode.has_flag(HAS_XATTRS) {
            return f(&[]);
        }
        let guard = epoch::pin();
        let map = self.maps[self.writers.index_of_key(inode.ino)].load(Acquire, &guard);
        // SAFETY: a published map is freed only after a grace period that follows its
        // replacement; we are pinned. Acquire: pairs with the Release store that
        // published it (`update`, `unlink`).
        let cell = unsafe { map.as_ref() }.and_then(|m| m.get(inode.ino, &guard));
        match cell {
            Some(c) => f(c.list(Acquire, &guard)),
            None => f(&[]),
        }
    }

    /// Replaces the inode's attributes by what `change` makes of the current ones (empty
    /// when it has none); an error from `change` changes nothing.
    pub(crate) fn update(
        &self,
        inode: &Inode,
        change: impl FnOnce(&[Arc<Xattr>]) -> SysResult<XattrList>,
    ) -> SysResult<()> {
        self.write_bucket(inode.ino, |slot, map, guard| {
            // SAFETY: only writers, who hold the lock, retire maps and cells.
            let map_ref = unsafe { map.as_ref() };
            let cell = map_ref.and_then(|m| m.get(inode.ino, guard));
            let new = change(cell.map_or(&[], |c| c.list(Relaxed, guard)))?;
            Ok(match cell {
                Some(c) if !new.is_empty() => Retired {
                    // Release: publishes the new list to readers (pairs with the Acquire
                    // load in `read`).
                    list: Some(c.list.swap(Owned::new(new), Release, guard)),
                    ..Retired::default()
                },
                Some(_) => {
                    inode.set_flag(HAS_XATTRS, false);
                    Self::unlink(slot, map, inode.ino, guard)
                }
                None if new.is_empty() => Retired::default(),
                None => {
                    let cell = Owned::new(InodeXattrs {
                        list: Atomic::new(new),
                    })
                    .into_shared(guard);
                    let ptr = CellPtr(NonNull::new(cell.as_raw().cast_mut()).expect("allocated"));
                    let grown = map_ref.map_or_else(InodeMap::default, |m| m.clone());
                    // Release: publishes the map, the cell and its list to readers (pairs
                    // with the Acquire load in `read`).
                    slot.store(Owned::new(grown.with(inode.ino, ptr)), Release);
                    inode.set_flag(HAS_XATTRS, true);
                    Retired {
                        map: Some(map),
                        ..Retired::default()
                    }
                }
            })
        })
    }

    /// Drops the inode's attributes (eviction).
    pub(crate) fn remove_inode(&self, inode: &Inode) {
        if !inode.has_flag(HAS_XATTRS) {
            return;
        }
        let r = self.write_bucket(inode.ino, |slot, map, guard| {
            inode.set_flag(HAS_XATTRS, false);
            Ok(Self::unlink(slot, map, inode.ino, guard))
        });
        debug_assert!(r.is_ok(), "unlinking never fails");
    }

    /// Runs `f` on the slot of `ino`'s bucket and its current map, pinned and under the
    /// bucket's writer lock; then, with the lock released, retires what `f` unlinked.
    fn write_bucket(
        &self,
        ino: u64,
        f: impl for<'g> FnOnce(
            &Atomic<InodeMap>,
            Shared<'g, InodeMap>,
            &'g Guard,
        ) -> SysResult<Retired<'g>>,
    ) -> SysResult<()> {
        let guard = epoch::pin();
        let retired = {
            let i = self.writers.index_of_key(ino);
            let _w = self.writers.get(i).lock();
            let slot = &self.maps[i];
            // Relaxed: the bucket and its cells are written only under the writer lock,
            // whose acquisition orders the previous holder's stores before ours.
            f(slot, slot.load(Relaxed, &guard), &guard)?
        };
        // SAFETY: `f` unlinked what `retired` holds under the lock, once.
        unsafe { retired.retire(&guard) };
        Ok(())
    }

    /// Publishes a copy of `map` (the slot's current one) without `ino`; returns the old
    /// map and the inode's cell to retire. Under the bucket's writer lock.
    fn unlink<'g>(
        slot: &Atomic<InodeMap>,
        map: Shared<'g, InodeMap>,
        ino: u64,
        guard: &'g Guard,
    ) -> Retired<'g> {
        // SAFETY: the caller holds the writer lock; only writers retire maps.
        let Some(m) = (unsafe { map.as_ref() }) else {
            return Retired::default();
        };
        let Some(cell) = m.get(ino, guard) else {
            return Retired::default();
        };
        let shrunk = m.without(ino);
        if shrunk.cells.is_empty() {
            // Release: as below (a null map holds nothing to publish, but keeps one rule).
            slot.store(Shared::null(), Release);
        } else {
            // Release: publishes the map to readers (pairs with the Acquire load in `read`).
            slot.store(Owned::new(shrunk), Release);
        }
        Retired {
            map: Some(map),
            // SAFETY: the pointer came from `Owned::into_shared` of a cell (in `update`).
            cell: Some(unsafe { cell_shared(cell) }),
            ..Retired::default()
        }
    }

    /// The attribute `name` of inode `ino`, shared with the table (tests: a `Weak` of it
    /// tells when the table has freed it).
    #[cfg(test)]
    pub(crate) fn attribute(&self, inode: &Inode, name: &[u8]) -> Option<Arc<Xattr>> {
        self.read(inode, |list| {
            list.iter().find(|a| *a.name == *name).cloned()
        })
    }

    /// Whether the table holds attributes of inode `ino` (tests).
    #[cfg(test)]
    pub(crate) fn contains(&self, ino: u64) -> bool {
        let guard = epoch::pin();
        let map = self.maps[self.writers.index_of_key(ino)].load(Acquire, &guard);
        // SAFETY: as in `read`.
        unsafe { map.as_ref() }.is_some_and(|m| m.get(ino, &guard).is_some())
    }
}

/// The epoch pointer to a cell found in a map.
///
/// # Safety
/// `cell` is a cell of a map (made by `Owned::into_shared` in `update`).
unsafe fn cell_shared<'g>(cell: &InodeXattrs) -> Shared<'g, InodeXattrs> {
    // SAFETY: per our contract, the pointer came from an `Owned` of this type.
    unsafe { Shared::from_ptr(std::ptr::from_ref(cell).cast_mut().cast()) }
}

impl InodeXattrs {
    fn list<'g>(&self, ord: std::sync::atomic::Ordering, guard: &'g Guard) -> &'g [Arc<Xattr>] {
        // SAFETY: a cell in a map always holds a list; a list is retired only after it
        // was replaced, and freed after the grace period, which `guard` holds back.
        unsafe { self.list.load(ord, guard).deref() }
    }
}

impl Drop for XattrTable {
    fn drop(&mut self) {
        for slot in self.maps.iter() {
            // SAFETY: `&mut self`: no reader or writer is left; every map, cell and list
            // still published is freed here once (retired ones went to the collector).
            unsafe {
                let map = slot.load(Relaxed, epoch::unprotected());
                if map.is_null() {
                    continue;
                }
                let map = map.into_owned();
                for (_, cell) in map.cells.iter() {
                    drop(cell_shared(cell.0.as_ref()).into_owned());
                }
            }
        }
    }
}
