//! One shard's list: a slab of slots linked through indices (see the parent module's
//! "Representation").

use super::NIL;

/// A slot's state is `item` plus `zombie`: live (`Some`, linked), free (`None`, on the free
/// list) or zombie (`None` and `zombie`: the item was removed while a cursor had the slot
/// pinned; still linked until unpinned). Not an enum: an `Option` of an item with a niche
/// (a pointer, `NonZeroUsize`, `Weak`) costs no tag, and the flag fits beside `pins`, so a
/// slot of such an item is 32 bytes rather than 40.
pub(super) struct Slot<T> {
    pub(super) item: Option<T>,
    pub(super) zombie: bool,
    /// Bumped when the item is removed, so stale nodes no longer match.
    pub(super) gen: u64,
    /// Links of the shard's list (`next` also links the free list).
    pub(super) prev: u32,
    pub(super) next: u32,
    /// Number of unlocked cursors that will resume here.
    pub(super) pins: u32,
}

/// One shard's list: a slab whose linked slots form the list, newest first.
pub(super) struct Slab<T> {
    pub(super) slots: Vec<Slot<T>>,
    pub(super) head: u32,
    pub(super) free: u32,
    /// Live items (zombies excluded).
    pub(super) len: usize,
}

impl<T> Slab<T> {
    pub(super) fn new() -> Self {
        Slab {
            slots: Vec::new(),
            head: NIL,
            free: NIL,
            len: 0,
        }
    }

    pub(super) fn slot(&mut self, i: u32) -> &mut Slot<T> {
        &mut self.slots[i as usize]
    }

    /// Links `item` at the head; returns its slot and generation.
    pub(super) fn insert(&mut self, item: T) -> (u32, u64) {
        let i = if self.free != NIL {
            let i = self.free;
            self.free = self.slot(i).next;
            i
        } else {
            let i = u32::try_from(self.slots.len())
                .ok()
                .filter(|&i| i != NIL)
                .expect("dlist: more than 2^32-1 items in one shard");
            self.slots.push(Slot {
                item: None,
                zombie: false,
                gen: 0,
                prev: NIL,
                next: NIL,
                pins: 0,
            });
            i
        };
        let head = self.head;
        if head != NIL {
            self.slot(head).prev = i;
        }
        self.head = i;
        self.len += 1;
        let s = self.slot(i);
        s.item = Some(item);
        s.prev = NIL;
        s.next = head;
        (i, s.gen)
    }

    /// Takes the item out of slot `i` if it still holds generation `gen`.
    pub(super) fn remove(&mut self, i: u32, gen: u64) -> Option<T> {
        let s = self.slots.get_mut(i as usize)?;
        if s.gen != gen || s.item.is_none() {
            return None;
        }
        s.gen = s.gen.wrapping_add(1);
        let pinned = s.pins > 0;
        let Some(item) = s.item.take() else {
            unreachable!("checked above")
        };
        s.zombie = true;
        self.len -= 1;
        if !pinned {
            self.release(i);
        }
        Some(item)
    }

    /// Unlinks slot `i` (live or zombie) and puts it on the free list.
    pub(super) fn release(&mut self, i: u32) {
        let (prev, next) = (self.slot(i).prev, self.slot(i).next);
        if prev != NIL {
            self.slot(prev).next = next;
        } else {
            self.head = next;
        }
        if next != NIL {
            self.slot(next).prev = prev;
        }
        let free = self.free;
        let s = self.slot(i);
        s.item = None;
        s.zombie = false;
        s.prev = NIL;
        s.next = free;
        self.free = i;
    }

    /// Drops a cursor's pin on `i`; returns where that cursor resumes: `i` itself, or, if
    /// `i` was a zombie and this was its last pin, its successor (and `i` is freed).
    pub(super) fn unpin(&mut self, i: u32) -> u32 {
        let s = self.slot(i);
        s.pins -= 1;
        if s.pins == 0 && s.zombie {
            let next = s.next;
            self.release(i);
            next
        } else {
            i
        }
    }

    /// Visits the live items in list order; `f` returns false to remove the item, which is
    /// then pushed on `removed` (dropped by the caller after unlocking).
    pub(super) fn retain_into(&mut self, removed: &mut Vec<T>, mut f: impl FnMut(&T) -> bool) {
        let mut i = self.head;
        while i != NIL {
            let s = self.slot(i);
            let next = s.next;
            if let Some(item) = &s.item {
                if !f(item) {
                    let gen = s.gen;
                    removed.extend(self.remove(i, gen));
                }
            }
            i = next;
        }
    }
}
