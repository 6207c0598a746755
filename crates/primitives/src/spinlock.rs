//! TODO(owner: see issue 2): spinlock
