//! A directory's child table: a hash table of singly linked bucket lists that readers
//! search without any lock (Linux's RCU hash lists, with the epoch of `scalevfs_primitives::epoch` for RCU).
//!
//! ## Protocol
//!
//! * Writers (insert, unlink, grow) hold the directory's mutex; there is one writer at a
//!   time per table.
//! * Readers pin an epoch guard and walk: table pointer, bucket head, `next` pointers, all
//!   `Acquire` loads pairing with the writers' `Release` stores, so a reader that sees an
//!   entry sees it fully built.
//! * Insert builds the entry (its `next` = the current head) and publishes it with a
//!   `Release` store of the head.
//! * Unlink stores the entry's successor into its predecessor's link and hands the entry
//!   to the epoch collector: a reader standing on it still follows its (unchanged) `next`,
//!   and it is freed only after every guard pinned before the unlink is gone.
//! * Grow (more than two entries per bucket on average) builds a new table of twice the
//!   buckets with new entries, publishes it with one `Release` store, and retires the old
//!   table and its entries through the collector. Old entries are never modified after a
//!   grow, so a reader on the old table sees a consistent (slightly older) snapshot.
//!
//! An entry owns a reference on its node, so a node reached through the table stays alive
//! for the reader's guard. A lookup may return a node that is being unlinked concurrently,
//! as an RCU lookup may; callers check the node's active count.

use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};
use std::sync::Arc;

use scalevfs_primitives::epoch::{self, Atomic, Guard, Owned, Shared};

use crate::node::KernfsNode;

const MIN_BUCKETS: usize = 8;

/// FNV-1a: names come from the embedder, not from an adversary, and are short.
pub(crate) fn name_hash(name: &[u8]) -> u64 {
    name.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
        (h ^ b as u64).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

struct Entry {
    hash: u64,
    name: Arc<[u8]>,
    node: Arc<KernfsNode>,
    next: Atomic<Entry>,
}

struct Buckets {
    heads: Box<[Atomic<Entry>]>,
}

impl Buckets {
    fn new(n: usize) -> Self {
        Buckets {
            heads: (0..n).map(|_| Atomic::null()).collect(),
        }
    }

    fn head(&self, hash: u64) -> &Atomic<Entry> {
        // `heads.len()` is a power of two.
        &self.heads[hash as usize & (self.heads.len() - 1)]
    }
}

/// See the module docs. `len` lives with the writer (under the directory mutex).
pub(crate) struct ChildTable {
    table: Atomic<Buckets>,
}

impl ChildTable {
    pub(crate) fn new() -> Self {
        ChildTable {
            table: Atomic::new(Buckets::new(MIN_BUCKETS)),
        }
    }

    /// The node called `name`, for as long as `guard` is pinned. Lock-free.
    pub(crate) fn find<'g>(
        &self,
        name: &[u8],
        hash: u64,
        guard: &'g Guard,
    ) -> Option<&'g Arc<KernfsNode>> {
        // Acquire pairs with the Release publication of the table in `grow`.
        let t = self.table.load(Acquire, guard);
        // SAFETY: the table is retired only through `guard.defer_destroy` after being
        // replaced, so it lives as long as this guard; it is never null.
        let t = unsafe { t.deref() };
        // Acquire pairs with the Release stores that publish entries (insert, unlink).
        let mut cur = t.head(hash).load(Acquire, guard);
        // SAFETY: entries are freed only through the collector after being unlinked, so
        // every entry reachable under this guard outlives it.
        while let Some(e) = unsafe { cur.as_ref() } {
            if e.hash == hash && *e.name == *name {
                return Some(&e.node);
            }
            cur = e.next.load(Acquire, guard);
        }
        None
    }

    /// Adds `node` as `name`; the caller holds the directory mutex, has checked that the
    /// name is free, and passes the directory's entry count after the insert.
    pub(crate) fn insert(
        &self,
        name: Arc<[u8]>,
        hash: u64,
        node: Arc<KernfsNode>,
        len_after: usize,
        guard: &Guard,
    ) {
        // Relaxed: we are the only writer (directory mutex), which also ordered us after
        // the previous writer.
        let mut t = self.table.load(Relaxed, guard);
        // SAFETY: as in `find`; we hold the writer lock, so the table is current.
        if len_after > 2 * unsafe { t.deref() }.heads.len() {
            t = self.grow(t, guard);
        }
        // SAFETY: as above.
        let head = unsafe { t.deref() }.head(hash);
        let e = Owned::new(Entry {
            hash,
            name,
            node,
            next: Atomic::from(head.load(Relaxed, guard)),
        });
        // Release pairs with the Acquire loads in `find`: the entry is built before seen.
        head.store(e, Release);
    }

    /// Removes `node`'s entry (found by identity). The caller holds the directory mutex.
    pub(crate) fn unlink(&self, node: &KernfsNode, hash: u64, guard: &Guard) -> bool {
        let t = self.table.load(Relaxed, guard);
        // SAFETY: as in `insert`.
        let mut link = unsafe { t.deref() }.head(hash);
        loop {
            let cur = link.load(Relaxed, guard);
            // SAFETY: we are the only writer; the entry is live (reachable).
            let Some(e) = (unsafe { cur.as_ref() }) else {
                return false;
            };
            if std::ptr::eq(&*e.node, node) {
                // Release: a reader that reaches the successor through the new link sees it
                // built (it was already published; this keeps the rule uniform).
                link.store(e.next.load(Relaxed, guard), Release);
                // SAFETY: unlinked just now, so no new reader can reach it; readers that
                // did are protected by their guards, which the collector waits for.
                unsafe { guard.defer_destroy(cur) };
                return true;
            }
            link = &e.next;
        }
    }

    fn grow<'g>(&self, old: Shared<'g, Buckets>, guard: &'g Guard) -> Shared<'g, Buckets> {
        // SAFETY: as in `insert`.
        let o = unsafe { old.deref() };
        let new = Buckets::new(o.heads.len() * 2);
        for h in o.heads.iter() {
            let mut cur = h.load(Relaxed, guard);
            // SAFETY: we are the only writer; entries reachable from the current table are live.
            while let Some(e) = unsafe { cur.as_ref() } {
                let head = new.head(e.hash);
                let copy = Owned::new(Entry {
                    hash: e.hash,
                    name: e.name.clone(),
                    node: e.node.clone(),
                    next: Atomic::from(head.load(Relaxed, guard)),
                });
                // Relaxed: the new table is not published yet.
                head.store(copy, Relaxed);
                cur = e.next.load(Relaxed, guard);
            }
        }
        // Release pairs with the Acquire table load in `find`.
        let new = Owned::new(new).into_shared(guard);
        self.table.store(new, Release);
        // SAFETY: the old table is unreachable for new readers; it and its entries are
        // freed after every reader pinned before this point has unpinned.
        unsafe {
            let old_ptr = old.as_raw() as usize;
            guard.defer_unchecked(move || {
                drop(Box::from_raw(old_ptr as *mut Buckets).free_entries());
            });
        }
        new
    }

    /// Unlinks every entry (file system teardown), returning their nodes.
    pub(crate) fn drain_all(&self, guard: &Guard) -> Vec<Arc<KernfsNode>> {
        let t = self.table.load(Relaxed, guard);
        // SAFETY: as in `insert`; the caller holds the directory mutex.
        let t = unsafe { t.deref() };
        let mut out = Vec::new();
        for h in t.heads.iter() {
            // Release for uniformity with `unlink` (a reader's Acquire load of the head
            // then sees an empty bucket; nothing new is published).
            let mut cur = h.swap(Shared::null(), Release, guard);
            // SAFETY: detached from the table just now; see `unlink`.
            while let Some(e) = unsafe { cur.as_ref() } {
                out.push(e.node.clone());
                let next = e.next.load(Relaxed, guard);
                // SAFETY: unreachable for new readers; freed after current ones.
                unsafe { guard.defer_destroy(cur) };
                cur = next;
            }
        }
        out
    }
}

impl Buckets {
    /// Frees the entries of a table nobody can reach any more.
    fn free_entries(self) -> Self {
        for h in self.heads.iter() {
            // SAFETY: the table is unreachable (retired after a grace period, or its
            // directory is being dropped), so we have exclusive access.
            let guard = unsafe { epoch::unprotected() };
            let mut cur = h.swap(Shared::null(), Relaxed, guard);
            while !cur.is_null() {
                // SAFETY: exclusive access (see above); each entry is owned by its link.
                let e = unsafe { cur.into_owned() };
                cur = e.next.load(Relaxed, guard);
            }
        }
        self
    }
}

impl Drop for ChildTable {
    fn drop(&mut self) {
        // SAFETY: `&mut self`: the directory node is being dropped, so no reader holds it
        // (readers reach a directory through an entry or a reference, both of which keep
        // the node alive) and nobody else can reach the table.
        unsafe {
            let guard = epoch::unprotected();
            let t = self.table.swap(Shared::null(), Relaxed, guard);
            if !t.is_null() {
                drop(t.into_owned().into_box().free_entries());
            }
        }
    }
}
