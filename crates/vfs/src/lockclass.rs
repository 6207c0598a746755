//! The lock classes of the VFS core: the names under which `scalevfs bench --lockstat` (and
//! [`scalevfs_primitives::lockstat::report`]) counts acquisitions, contentions, wait and
//! hold times, as Linux's `/proc/lock_stat` does per lock class.
//!
//! A class names one role in the crate's lock order (the crate docs, "Lock order"), with
//! Linux's name where Linux has the lock: every inode's file-lock context lock is one
//! class, `flc_lock`. The classed locks are those that threads meet on when they share
//! one object: the file-lock, epoll, directory and cache locks below. A lock that is not
//! here (a dentry's `d_lock`, a pipe's, a file position's, the epoll links of a file) is
//! not recorded: a classed lock is 16 bytes larger, which objects made by the million do
//! not pay.
//!
//! Recording is off unless enabled; switched off, a classed lock costs one load and two
//! not-taken branches per acquisition over an unclassed one, and no test at all where
//! lockstat is compiled out (the library's default; the `scalevfs` binary compiles it
//! in). Measured single-threaded with callgrind (`scripts/callgrind.sh`'s method,
//! instructions per operation, before and after these locks were classed), lockstat
//! compiled in: locks-same 1334 -> 1393 (a lock and an unlock, +4.4%: mostly the lock
//! manager's guard drop, which the compiler then keeps out of line), epoll-churn-shared
//! 2493 -> 2578 (+3.4%), dir-create-same 9510 -> 9636 (+1.3%), dcache unchanged (its open,
//! read and close take none of these locks); compiled out: 1334 -> 1354, 2525 -> 2504,
//! 9508 -> 9522.

use scalevfs_primitives::lockstat::{LockClass, LockEvent};

/// A file-lock context's lock (one per inode with locks): the lock lists and the queued
/// waiters. Linux: `file_lock_context.flc_lock`.
pub static FLC_LOCK: LockClass = LockClass::new("flc_lock");

/// The steps of a blocked file-lock request (`locks::handoff`, module docs "Waiting" and
/// "Backing off"), counted while lockstat is on and listed below the table: how waiters
/// were served. A request *blocked* (its first attempt queued it); its first wait ended
/// *completed while polling* or it *slept*; a completion *unparked* the waiter (a futex
/// wake-up if it slept), or *skipped the wake-up* of one backing off; a request told to retry *retried*, and the retry either
/// took the lock or *blocked again* (lost to a barger; it then backs off, and its *back-off
/// expired* if no release came first). Retries that blocked again about as often as they
/// were made: the running thread keeps the lock and the waiter sleeps. Retries that
/// nearly all won, with as many first waits completed while polling: the lock passes
/// back and forth between threads on every hand-off.
pub static FLC_BLOCKED: LockEvent = LockEvent::new("flc wait: request blocked");
/// See [`FLC_BLOCKED`].
pub static FLC_POLL_HIT: LockEvent = LockEvent::new("flc wait: completed while polling");
/// See [`FLC_BLOCKED`].
pub static FLC_SLEPT: LockEvent = LockEvent::new("flc wait: slept");
/// See [`FLC_BLOCKED`].
pub static FLC_UNPARKED: LockEvent = LockEvent::new("flc wait: waiter unparked");
/// See [`FLC_BLOCKED`].
pub static FLC_WAKE_SKIPPED: LockEvent = LockEvent::new("flc wait: wake-up skipped (backs off)");
/// See [`FLC_BLOCKED`].
pub static FLC_RETRIED: LockEvent = LockEvent::new("flc wait: retried");
/// See [`FLC_BLOCKED`].
pub static FLC_RETRY_BLOCKED: LockEvent = LockEvent::new("flc wait: retry blocked again");
/// See [`FLC_BLOCKED`].
pub static FLC_BACKOFF_EXPIRED: LockEvent = LockEvent::new("flc wait: back-off expired");

/// The legacy design's one lock over every file-lock operation (the ablation).
pub static FILE_LOCK_LOCK: LockClass = LockClass::new("file_lock_lock (legacy)");

/// The wait-for graph of POSIX lock owners (deadlock detection). Linux:
/// `blocked_lock_lock`.
pub static BLOCKED_LOCK_LOCK: LockClass = LockClass::new("blocked_lock_lock");

/// A shard of an epoll instance's items (its registered descriptors). Linux: `ep->mtx`,
/// one per instance.
pub static EP_MTX: LockClass = LockClass::new("ep->mtx (item shard)");

/// An epoll instance's ready and overflow list, or one of its per-CPU shards. Linux:
/// `ep->lock`.
pub static EP_LOCK: LockClass = LockClass::new("ep->lock (ready list)");

/// A ready-list shard's scan lock: one `epoll_wait` harvests a shard at a time.
pub static EP_SCAN: LockClass = LockClass::new("ep_scan");

/// Epoll-in-epoll insertions (the loop and depth checks). Linux: `epnested_mutex`.
pub static EPNESTED_MUTEX: LockClass = LockClass::new("epnested_mutex");

/// The legacy design's global epoll release lock (the ablation). Linux before 6.4:
/// `epmutex`.
pub static EPMUTEX: LockClass = LockClass::new("epmutex (legacy)");

/// A bucket of the dentry hash (inserts and removals; lookups take no lock).
pub static DENTRY_HASH_BUCKET: LockClass = LockClass::new("dentry_hashtable bucket");

/// A bucket of the inode hash (inserts and removals; lookups take no lock).
pub static INODE_HASH_BUCKET: LockClass = LockClass::new("inode_hashtable bucket");

/// A per-CPU shard of the LRU of unused dentries. Linux: the `list_lru` node lock.
pub static DENTRY_LRU: LockClass = LockClass::new("dentry LRU shard");

/// A name lock: the hashed mutexes that serialize changes of one name in a directory
/// changed shared (`core::dirlock`).
pub static NAME_LOCK: LockClass = LockClass::new("dir name lock");
