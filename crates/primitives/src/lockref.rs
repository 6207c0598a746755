//! TODO(owner: see issue 2): lockref
