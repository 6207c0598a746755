//! TODO(owner: dlist helper): current shard id (rseq-backed sched_getcpu or thread-local).
