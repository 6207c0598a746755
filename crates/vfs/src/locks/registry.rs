//! Per-CPU lists of lock contexts, walked only by the `/proc/locks` listing.
//!
//! Linux keeps every held lock on a per-CPU `file_lock_list`. We keep contexts instead, on
//! a [`DList`] (seed 001's dlock-list: one list and lock per CPU), and only register a
//! context once, when it is created (the first lock on an inode), and unregister it when
//! the inode drops it: the lock and unlock paths never touch these lists. The legacy
//! ablation uses the one-list form (`DList::with_locking(Locking::Legacy)`).
//!
//! The lists hold `Weak` references, so the listing skips a context that is being dropped
//! concurrently (its `upgrade` fails) without any unsafe code. The walk upgrades under
//! the shard lock and visits afterwards, so context locks never nest inside a shard lock.

use std::sync::{Arc, Weak};

use scalevfs_primitives::dlist::{DList, DListNode};
use scalevfs_primitives::Locking;

use super::CtxInner;

pub(crate) struct ContextList {
    list: DList<Weak<CtxInner>>,
}

impl ContextList {
    pub(crate) fn new(locking: Locking) -> Self {
        ContextList {
            list: DList::with_locking(locking),
        }
    }

    /// Registers `ctx` on the current CPU's list.
    pub(crate) fn insert(&self, ctx: &Arc<CtxInner>) -> DListNode {
        self.list.add(Arc::downgrade(ctx))
    }

    pub(crate) fn remove(&self, node: &DListNode) {
        self.list.remove(node);
    }

    /// Calls `f` on every live context.
    pub(crate) fn for_each(&self, mut f: impl FnMut(&CtxInner)) {
        let mut live = Vec::new();
        self.list.for_each(|w| live.extend(w.upgrade()));
        for c in &live {
            f(c)
        }
    }
}
