//! [`Cursor`]: a walk over a [`DList`] that holds at most one shard lock and pins its
//! place while unlocked (see the parent module's "Cursor and concurrent removal").

use super::{DList, DListNode, Guard, Slab, NIL};

/// A walk over a [`DList`], shard by shard, holding at most one shard lock: the
/// `dlock_list_iter` of the dlock-list patches.
///
/// As an [`Iterator`] it yields clones of the items (`T` is typically an `Arc`) so the caller
/// can keep one after dropping the lock. After `next` returns `Some`, the current shard is
/// locked until [`unlock`](Self::unlock) (or the walk moves on); `next` retakes the lock if
/// needed. See the module docs for what a walk is guaranteed to see.
///
/// ```
/// # use scalevfs_primitives::dlist::DList;
/// let list = DList::new();
/// for i in 0..10 { list.add(i); }
/// let mut cursor = list.cursor();
/// while let Some(item) = cursor.next() {
///     if item % 2 == 0 {
///         cursor.remove_current(); // eviction
///     } else {
///         cursor.unlocked(|| std::thread::yield_now()); // blocking work, lock dropped
///     }
/// }
/// assert_eq!(list.len(), 5);
/// ```
pub struct Cursor<'a, T> {
    pub(super) list: &'a DList<T>,
    /// The shard being walked; `list.shards()` once done.
    pub(super) shard: usize,
    /// The shard's lock, while held.
    pub(super) guard: Option<Guard<'a, Slab<T>>>,
    /// Whether `next` has been read from this shard's head.
    pub(super) started: bool,
    /// The next slot to examine in `shard` (NIL: end of shard).
    pub(super) next: u32,
    /// `next` is pinned (only while unlocked).
    pub(super) pinned: bool,
    /// The node last yielded.
    pub(super) current: Option<DListNode>,
}

impl<T> Cursor<'_, T> {
    /// Drops the shard lock, pinning the cursor's position (`dlock_list_unlock`).
    /// A no-op if not locked.
    pub fn unlock(&mut self) {
        let Some(mut slab) = self.guard.take() else {
            return;
        };
        if self.started && self.next != NIL {
            slab.slot(self.next).pins += 1;
            self.pinned = true;
        }
    }

    /// Retakes the shard lock dropped by [`unlock`](Self::unlock) (`dlock_list_relock`).
    /// A no-op if locked or the walk is over; `next` relocks by itself.
    pub fn relock(&mut self) {
        if self.guard.is_some() || self.shard >= self.list.shards.len() {
            return;
        }
        let mut slab = self.list.shard(self.shard);
        if self.pinned {
            self.next = slab.unpin(self.next);
            self.pinned = false;
        }
        self.guard = Some(slab);
    }

    /// Runs `f` with the shard lock dropped: for blocking work (iput,
    /// invalidate_mapping_pages, cond_resched) in the middle of a walk. Anything, including
    /// the current item, may be removed meanwhile; the walk goes on from where it was. The
    /// lock is retaken lazily, by the next `next` (or an explicit [`relock`](Self::relock)).
    pub fn unlocked<R>(&mut self, f: impl FnOnce() -> R) -> R {
        self.unlock();
        f()
    }

    /// The node of the item last yielded, if any (it may have been removed since).
    pub fn current_node(&self) -> Option<DListNode> {
        self.current
    }

    /// Removes the item last yielded, if it is still on the list, and returns it; the walk
    /// continues with the next item. Under the held lock if locked, else it takes it.
    pub fn remove_current(&mut self) -> Option<T> {
        let node = self.current.take()?;
        match &mut self.guard {
            Some(slab) => slab.remove(node.slot, node.gen),
            None => self.list.remove(&node),
        }
    }

    /// Moves to the next live slot (locking and crossing shards as needed); returns it
    /// with the shard locked.
    fn advance(&mut self) -> Option<&T> {
        let nshards = self.list.shards.len();
        loop {
            if self.shard >= nshards {
                return None;
            }
            self.relock();
            let slab = self.guard.as_mut().expect("relock took the lock");
            if !self.started {
                self.next = slab.head;
                self.started = true;
            }
            while self.next != NIL {
                let i = self.next;
                self.next = slab.slot(i).next;
                if slab.slot(i).item.is_some() {
                    let gen = slab.slot(i).gen;
                    self.current = Some(DListNode {
                        shard: self.shard as u32,
                        slot: i,
                        gen,
                    });
                    let Some(item) = &self.guard.as_ref()?.slots[i as usize].item else {
                        unreachable!("checked above")
                    };
                    return Some(item);
                }
            }
            // End of this shard: release it before taking the next (never two at once).
            self.guard = None;
            self.shard += 1;
            self.started = false;
            self.current = None;
        }
    }
}

impl<T: Clone> Iterator for Cursor<'_, T> {
    type Item = T;

    fn next(&mut self) -> Option<T> {
        self.advance().cloned()
    }
}

impl<T> Drop for Cursor<'_, T> {
    fn drop(&mut self) {
        if self.pinned {
            // Unlocked with a pin: drop it, freeing the slot if it became a zombie.
            self.relock();
        }
    }
}
