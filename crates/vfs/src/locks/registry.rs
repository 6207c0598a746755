//! Per-CPU lists of lock contexts, walked only by the `/proc/locks` listing.
//!
//! Linux keeps every held lock on a per-CPU `file_lock_list`. We keep contexts instead, and
//! only register a context once, when it is created (the first lock on an inode), and
//! unregister it when the inode drops it: the lock and unlock paths never touch this.
//! A context goes to the shard of the CPU it was created on and remembers its slot.
//! Each shard has its own mutex; the listing takes one shard at a time.
//!
//! The shards hold `Weak` references, so the listing can skip a context that is being
//! dropped concurrently (its `upgrade` fails) without any unsafe code.
//!
//! This is the small internal stand-in for `scalevfs_primitives::dlist::DList`
//! (seed 001), which has not landed yet: [`ContextList`] is the one type to swap.

use std::sync::{Arc, Weak};

use crossbeam_utils::CachePadded;
use scalevfs_primitives::cpu;

use super::sync::Mutex;
use super::CtxInner;

/// The type the lock manager uses for its context list.
pub(crate) type ContextList = Registry;

pub(crate) struct Registry {
    shards: Box<[CachePadded<Mutex<Slab>>]>,
}

#[derive(Default)]
struct Slab {
    entries: Vec<Option<Weak<CtxInner>>>,
    free: Vec<usize>,
}

impl Registry {
    /// `nshards` lists: one per CPU for the scalable design, one for the legacy one.
    pub(crate) fn new(nshards: usize) -> Self {
        Registry {
            shards: (0..nshards.max(1))
                .map(|_| CachePadded::new(Mutex::new(Slab::default())))
                .collect(),
        }
    }

    /// Registers `ctx` on the current CPU's list; returns its (shard, slot).
    pub(crate) fn insert(&self, ctx: &Arc<CtxInner>) -> (usize, usize) {
        let shard = cpu::current_shard(self.shards.len());
        let mut s = self.shards[shard].lock();
        let w = Some(Arc::downgrade(ctx));
        let slot = match s.free.pop() {
            Some(i) => {
                s.entries[i] = w;
                i
            }
            None => {
                s.entries.push(w);
                s.entries.len() - 1
            }
        };
        (shard, slot)
    }

    pub(crate) fn remove(&self, (shard, slot): (usize, usize)) {
        let mut s = self.shards[shard].lock();
        s.entries[slot] = None;
        s.free.push(slot);
    }

    /// Calls `f` on every live context, shard by shard.
    pub(crate) fn for_each(&self, mut f: impl FnMut(&CtxInner)) {
        for shard in self.shards.iter() {
            // Upgrade under the shard lock, visit outside it, so `f` (which takes context
            // locks) never nests inside a shard lock that a dropping context waits for.
            let live: Vec<Arc<CtxInner>> = shard
                .lock()
                .entries
                .iter()
                .flatten()
                .filter_map(Weak::upgrade)
                .collect();
            for c in &live {
                f(c)
            }
        }
    }
}
