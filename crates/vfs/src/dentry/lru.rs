//! The per-CPU LRU shards of unused dentries (see the module docs of `dentry`).

use super::*;
use scalevfs_primitives::lockstat;

/// Per-CPU LRU lists of unused dentries (see the module docs).
pub struct Lru {
    pub(super) shards: Box<[CachePadded<lockstat::Mutex<LruShard>>]>,
    pub(super) limit_per_shard: usize,
}

#[derive(Default)]
pub(super) struct LruShard {
    pub(super) slots: Vec<usize>,
    pub(super) free: Vec<u32>,
    pub(super) len: usize,
    /// Round-robin scan position of the shrinker.
    pub(super) hand: usize,
}

impl Lru {
    pub(super) fn new(nshards: usize, max_unused: usize) -> Lru {
        Lru {
            shards: (0..nshards)
                .map(|_| {
                    CachePadded::new(lockstat::Mutex::with_class(
                        LruShard::default(),
                        &crate::lockclass::DENTRY_LRU,
                    ))
                })
                .collect(),
            limit_per_shard: (max_unused / nshards).max(16),
        }
    }
    /// Adds `d` to the current CPU's shard; returns its node and the shard if it is over its
    /// limit (the caller shrinks it after dropping `d_lock`).
    pub(super) fn add(&self, d: usize) -> (u64, Option<usize>) {
        let s = scalevfs_primitives::cpu::current_shard(self.shards.len());
        let mut sh = self.shards[s].lock();
        let idx = match sh.free.pop() {
            Some(i) => {
                sh.slots[i as usize] = d;
                i
            }
            None => {
                sh.slots.push(d);
                sh.slots.len() as u32 - 1
            }
        };
        sh.len += 1;
        let over = (sh.len > self.limit_per_shard).then_some(s);
        (((s as u64) << 32) | idx as u64, over)
    }
    pub(super) fn remove(&self, node: u64, d: usize) {
        let (s, idx) = ((node >> 32) as usize, (node & 0xffff_ffff) as usize);
        let mut sh = self.shards[s].lock();
        if sh.slots.get(idx) == Some(&d) {
            sh.slots[idx] = 0;
            sh.free.push(idx as u32);
            sh.len -= 1;
        }
    }
    /// Number of dentries on the LRU.
    pub fn len(&self) -> usize {
        self.shards.iter().map(|s| s.lock().len).sum()
    }
    /// Whether the LRU is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
