//! An epoll instance's item map (Linux's rbtree `ep->rbr`), split into shards by key so
//! that threads registering and closing different descriptors in one shared instance
//! take different locks. Each shard is a map under its own cache-padded mutex; the
//! number of shards is four per CPU rounded up to a power of two (at most
//! [`MAX_SHARDS`]; see [`ITEM_SHARDS_PER_CPU`]), one in the legacy design.
//!
//! A shard's lock protects its map and nothing else; the item fields are protected as
//! the `epoll` module docs say. Shard locks are taken one at a time and before any
//! other lock of the instance (the walks over all items take them one after the other).

use std::collections::BTreeMap;
use std::sync::Arc;

use crossbeam_utils::CachePadded;
use scalevfs_primitives::hashed::hash_64;
use scalevfs_primitives::Locking;

use super::{EpItem, FdKey};
use crate::locks::sync::{ClassedGuard, ClassedMutex};

/// The most shards an instance has.
pub(super) const MAX_SHARDS: usize = 64;

/// One shard: the items whose keys hash to it.
pub(super) type Shard = BTreeMap<FdKey, Arc<EpItem>>;

pub(super) struct ItemMap {
    shards: Box<[CachePadded<ClassedMutex<Shard>>]>,
    /// `log2(shards.len())`.
    bits: u32,
}

/// Ready lists of a scalable instance once sharded (`ready.rs`), one per CPU: the CPU
/// count rounded up to a power of two, at most [`MAX_SHARDS`].
pub(super) fn shard_count() -> usize {
    scalevfs_primitives::cpu::num_cpus()
        .next_power_of_two()
        .min(MAX_SHARDS)
}

/// Item-map shards of a scalable instance: [`ITEM_SHARDS_PER_CPU`] per CPU, rounded up to
/// a power of two, at most [`MAX_SHARDS`].
pub(super) fn item_shard_count() -> usize {
    (scalevfs_primitives::cpu::num_cpus() * ITEM_SHARDS_PER_CPU)
        .next_power_of_two()
        .min(MAX_SHARDS)
}

/// Keys pick their shard by hash, so two threads registering their own descriptors
/// share a shard with probability one in the shard count: with one shard per CPU, one
/// time in two on two CPUs (`epoll-churn-shared` at 2 threads ran at 0.67x of one
/// thread, its item-shard lock contended in 14% of acquisitions). Four per CPU make
/// that one in eight for 512 bytes more per instance on two CPUs (8 KiB in all from 16
/// CPUs up).
const ITEM_SHARDS_PER_CPU: usize = 4;

impl ItemMap {
    pub(super) fn new(locking: Locking) -> Self {
        let n = match locking {
            Locking::Legacy => 1,
            Locking::Scalable => item_shard_count(),
        };
        ItemMap {
            shards: (0..n)
                .map(|_| {
                    CachePadded::new(ClassedMutex::with_class(
                        BTreeMap::new(),
                        &crate::lockclass::EP_MTX,
                    ))
                })
                .collect(),
            bits: n.ilog2(),
        }
    }

    /// Locks the shard that holds (or would hold) `key`.
    pub(super) fn lock(&self, key: &FdKey) -> ClassedGuard<'_, Shard> {
        let mixed = (key.file as u64) ^ (key.fd as u32 as u64).rotate_left(32);
        self.shards[hash_64(mixed, self.bits) as usize].lock()
    }

    /// Every shard in turn, each locked while `f` runs on it.
    pub(super) fn for_each_shard(&self, mut f: impl FnMut(&mut Shard)) {
        for s in self.shards.iter() {
            f(&mut s.lock());
        }
    }

    /// A snapshot of every item (clones taken under each shard's lock).
    pub(super) fn all(&self) -> Vec<Arc<EpItem>> {
        let mut out = Vec::new();
        self.for_each_shard(|m| out.extend(m.values().cloned()));
        out
    }

    #[cfg(test)]
    pub(super) fn shard_count(&self) -> usize {
        self.shards.len()
    }
}
