//! A hash table whose lookups take no lock and write nothing (the dcache and icache hashes).
//!
//! Each bucket is a singly linked chain of immutable nodes plus a small mutex.
//!
//! * **Lookup** pins the epoch and walks the chain with Acquire loads; it takes no
//!   lock and writes no shared memory (pinning writes only the thread's own epoch slot).
//! * **Insert / remove** take the bucket's mutex, so writers contend only within a bucket.
//!   Insert publishes a fully built node at the head with a Release store (pairs with the
//!   Acquire loads of lookup); remove unlinks with a Release store and hands the node to the
//!   epoch collector, so a lookup that is still walking it stays memory-safe until it unpins.
//! * Nodes are never changed after publication (a rename removes the old node and inserts a
//!   new one), so a lookup never sees a half-updated key.
//!
//! * **Nodes may own their cache lines** (the `A` parameter: [`LineAligned`] for the
//!   dcache). A remove writes the `next` field of the node before the one it unlinks, and
//!   every walk reads the nodes it passes; were nodes packed with other small objects of
//!   their size class, those accesses would land on a line where another thread's
//!   allocator is handing out memory (the checker saw exactly that: one process renaming
//!   a file across directories while the other allocated). Aligned to 64 bytes, a node
//!   shares its line with nothing. The cost is memory: a dcache node grows from 40 to 64
//!   bytes (24 bytes more per cached dentry: an empty tmpfs file took 488 bytes in all,
//!   now 512); a lookup touches one line per node either way and costs the same
//!   instructions. The icache, which changes only when an inode is made or evicted, keeps
//!   packed 24-byte nodes ([`Packed`]): aligned, they would cost 40 bytes more per inode.
//!
//! Lock order: a bucket mutex is a leaf lock (nothing is taken while holding it).

use crossbeam_utils::CachePadded;
use scalevfs_primitives::epoch::{Atomic, Guard, Owned, Shared};
use scalevfs_primitives::lockstat::{LockClass, Mutex};
use std::sync::atomic::Ordering;

/// Node alignment: nodes packed by their size class (module docs).
pub struct Packed;

/// Node alignment: each node alone on its 64-byte cache line (module docs).
#[repr(align(64))]
pub struct LineAligned;

/// One entry; `A` sets its alignment (a zero-length array of it takes no space).
struct Node<K, V, A> {
    _align: [A; 0],
    hash: u64,
    key: K,
    val: V,
    next: Atomic<Node<K, V, A>>,
}

struct Bucket<K, V, A> {
    head: Atomic<Node<K, V, A>>,
    lock: Mutex<()>,
}

/// See the module docs. `A`: [`Packed`] or [`LineAligned`] nodes.
pub struct RcuHash<K, V, A = Packed> {
    buckets: Box<[CachePadded<Bucket<K, V, A>>]>,
    mask: usize,
}

impl<K: Send + 'static, V: Send + Copy + 'static, A: Send + 'static> RcuHash<K, V, A> {
    /// A table of `1 << bits` buckets whose mutexes are of lock class `class`.
    pub fn with_class(bits: u32, class: &'static LockClass) -> Self {
        let n = 1usize << bits;
        RcuHash {
            buckets: (0..n)
                .map(|_| {
                    CachePadded::new(Bucket {
                        head: Atomic::null(),
                        lock: Mutex::with_class((), class),
                    })
                })
                .collect(),
            mask: n - 1,
        }
    }

    fn bucket(&self, hash: u64) -> &Bucket<K, V, A> {
        &self.buckets[(hash as usize ^ (hash >> 32) as usize) & self.mask]
    }

    /// Finds the value whose key `eq` accepts. Lock-free; valid while `guard` is pinned.
    pub fn lookup(&self, hash: u64, guard: &Guard, mut eq: impl FnMut(&K) -> bool) -> Option<V> {
        let b = self.bucket(hash);
        // Acquire: pairs with the Release store that published the node (insert/remove).
        let mut cur = b.head.load(Ordering::Acquire, guard);
        // SAFETY: nodes reachable from a bucket are freed only through the epoch collector
        // after being unlinked, and `guard` is pinned, so every node we reach stays allocated.
        while let Some(n) = unsafe { cur.as_ref() } {
            if n.hash == hash && eq(&n.key) {
                return Some(n.val);
            }
            // Acquire: pairs with the Release store that linked this `next`.
            cur = n.next.load(Ordering::Acquire, guard);
        }
        None
    }

    /// Inserts `key -> val` unless a key `eq` accepts is present; then returns that value.
    pub fn insert_unique(
        &self,
        hash: u64,
        key: K,
        val: V,
        mut eq: impl FnMut(&K) -> bool,
    ) -> Result<(), V> {
        let b = self.bucket(hash);
        let _l = b.lock.lock();
        let guard = scalevfs_primitives::epoch::pin();
        let head = b.head.load(Ordering::Relaxed, &guard);
        let mut cur = head;
        // SAFETY: we hold the bucket lock, so no node of this chain is unlinked or freed.
        while let Some(n) = unsafe { cur.as_ref() } {
            if n.hash == hash && eq(&n.key) {
                return Err(n.val);
            }
            cur = n.next.load(Ordering::Relaxed, &guard);
        }
        let node = Owned::new(Node {
            _align: [],
            hash,
            key,
            val,
            next: Atomic::null(),
        });
        node.next.store(head, Ordering::Relaxed);
        // Release: publishes the node's contents to lookups (pairs with their Acquire load).
        b.head.store(node, Ordering::Release);
        Ok(())
    }

    /// Removes the first entry `pred` accepts; returns whether one was removed.
    pub fn remove(&self, hash: u64, mut pred: impl FnMut(&K, &V) -> bool) -> bool {
        let b = self.bucket(hash);
        let _l = b.lock.lock();
        let guard = scalevfs_primitives::epoch::pin();
        let mut link: &Atomic<Node<K, V, A>> = &b.head;
        loop {
            let cur: Shared<'_, Node<K, V, A>> = link.load(Ordering::Relaxed, &guard);
            // SAFETY: the bucket lock is held, so the chain cannot change under us.
            let Some(n) = (unsafe { cur.as_ref() }) else {
                return false;
            };
            if n.hash == hash && pred(&n.key, &n.val) {
                let next = n.next.load(Ordering::Relaxed, &guard);
                // Release: lookups that load `link` after this see a consistent chain.
                link.store(next, Ordering::Release);
                // SAFETY: the node is unlinked; lookups still walking it are pinned, so it
                // is freed only after they unpin (its drop frees memory only).
                unsafe { crate::retire::retire_owned(cur) };
                return true;
            }
            link = &n.next;
        }
    }

    /// Calls `f` on every entry (diagnostics and teardown; takes each bucket lock in turn).
    pub fn for_each(&self, mut f: impl FnMut(&K, V)) {
        let guard = scalevfs_primitives::epoch::pin();
        for b in self.buckets.iter() {
            let _l = b.lock.lock();
            let mut cur = b.head.load(Ordering::Relaxed, &guard);
            // SAFETY: the bucket lock is held.
            while let Some(n) = unsafe { cur.as_ref() } {
                f(&n.key, n.val);
                cur = n.next.load(Ordering::Relaxed, &guard);
            }
        }
    }
}

impl<K, V, A> Drop for RcuHash<K, V, A> {
    fn drop(&mut self) {
        // SAFETY: `&mut self`: no lookup can be running; free the chains directly.
        unsafe {
            let guard = scalevfs_primitives::epoch::unprotected();
            for b in self.buckets.iter() {
                let mut cur = b.head.load(Ordering::Relaxed, guard);
                while !cur.is_null() {
                    let next = cur.deref().next.load(Ordering::Relaxed, guard);
                    drop(cur.into_owned());
                    cur = next;
                }
            }
        }
    }
}

/// A fast, decent 64-bit hash of a parent id and a name (FxHash-style multiply-rotate).
pub fn hash_name(parent: u64, name: &[u8]) -> u64 {
    const K: u64 = 0x517c_c1b7_2722_0a95;
    let mut h = parent.wrapping_mul(K);
    let mut chunks = name.chunks_exact(8);
    for c in &mut chunks {
        let w = u64::from_le_bytes(c.try_into().unwrap_or([0; 8]));
        h = (h.rotate_left(5) ^ w).wrapping_mul(K);
    }
    let mut tail = [0u8; 8];
    let r = chunks.remainder();
    tail[..r.len()].copy_from_slice(r);
    h = (h.rotate_left(5) ^ u64::from_le_bytes(tail) ^ (name.len() as u64)).wrapping_mul(K);
    h ^ (h >> 29)
}

#[cfg(test)]
mod tests {
    use super::*;

    static TEST_CLASS: LockClass = LockClass::new("rcuhash test bucket");

    #[test]
    fn insert_lookup_remove() {
        let t: RcuHash<u64, usize> = RcuHash::with_class(2, &TEST_CLASS);
        for i in 0..100u64 {
            assert!(t.insert_unique(i, i, i as usize * 2, |k| *k == i).is_ok());
        }
        assert_eq!(t.insert_unique(5, 5, 0, |k| *k == 5), Err(10));
        let g = scalevfs_primitives::epoch::pin();
        for i in 0..100u64 {
            assert_eq!(t.lookup(i, &g, |k| *k == i), Some(i as usize * 2));
        }
        assert!(t.remove(7, |k, _| *k == 7));
        assert!(!t.remove(7, |k, _| *k == 7));
        assert_eq!(t.lookup(7, &g, |k| *k == 7), None);
        let mut n = 0;
        t.for_each(|_, _| n += 1);
        assert_eq!(n, 99);
    }

    #[test]
    fn concurrent_insert_remove_lookup() {
        // Fewer under Miri, which interprets (about 1000x slower).
        const N: u64 = if cfg!(miri) { 100 } else { 2000 };
        let t: RcuHash<u64, u64> = RcuHash::with_class(4, &TEST_CLASS);
        std::thread::scope(|s| {
            for th in 0..4u64 {
                let t = &t;
                s.spawn(move || {
                    for i in 0..N {
                        let k = th * 10_000 + i;
                        t.insert_unique(k, k, k, |x| *x == k).unwrap();
                        let g = scalevfs_primitives::epoch::pin();
                        assert_eq!(t.lookup(k, &g, |x| *x == k), Some(k));
                        drop(g);
                        if i % 2 == 0 {
                            assert!(t.remove(k, |x, _| *x == k));
                        }
                    }
                });
            }
        });
        let mut n = 0;
        t.for_each(|_, _| n += 1);
        assert_eq!(n, 4 * N / 2);
    }

    #[test]
    fn node_sizes() {
        use std::mem::{align_of, size_of};
        // icache: keyed by the hash alone, packed; dcache: (parent id, thin name
        // pointer), one cache line each.
        assert_eq!(size_of::<Node<(), usize, Packed>>(), 24);
        assert_eq!(size_of::<Node<(u64, usize), usize, Packed>>(), 40);
        let line = (size_of::<Node<(u64, usize), usize, LineAligned>>(), 64);
        assert_eq!(
            line,
            (align_of::<Node<(u64, usize), usize, LineAligned>>(), 64)
        );
    }

    #[test]
    fn line_aligned_nodes_start_cache_lines() {
        let t: RcuHash<u64, usize, LineAligned> = RcuHash::with_class(0, &TEST_CLASS);
        for i in 0..4u64 {
            t.insert_unique(i, i, 0, |k| *k == i).unwrap();
        }
        let g = scalevfs_primitives::epoch::pin();
        let mut cur = t.buckets[0].head.load(Ordering::Acquire, &g);
        let mut seen = 0;
        while !cur.is_null() {
            assert_eq!(cur.as_raw() as usize % 64, 0, "a node starts a cache line");
            // SAFETY: reachable from the bucket while pinned, and nothing removes.
            cur = unsafe { cur.deref() }.next.load(Ordering::Acquire, &g);
            seen += 1;
        }
        assert_eq!(seen, 4);
        assert!(t.remove(2, |k, _| *k == 2));
        assert_eq!(t.lookup(3, &g, |k| *k == 3), Some(0));
    }

    #[test]
    fn hash_name_differs() {
        assert_ne!(hash_name(1, b"a"), hash_name(2, b"a"));
        assert_ne!(hash_name(1, b"a"), hash_name(1, b"b"));
        assert_ne!(hash_name(1, b"abcdefgh1"), hash_name(1, b"abcdefgh2"));
    }
}
