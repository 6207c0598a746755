//! Read-only mounts and remounting: Linux's `mnt_want_write` and `MNT_WRITE_HOLD`.
//!
//! Every call that changes a file system holds a *write access* on its superblock while it
//! makes the change ([`SuperBlock::want_write`], a [`WriteAccess`] guard), and an open
//! file description opened for writing a regular file holds one for its whole life (taken
//! at open, given back at its last close). A superblock counts its write accesses in a
//! per-CPU counter, so that changes on different CPUs write no common line; only a remount
//! read-only (`SuperBlock::make_read_only`) sums it. (Every mount has a superblock of
//! its own, so the superblock's flag is the mount's too.)
//!
//! ## The handshake
//! A writer counts itself on its CPU's shard, issues a `SeqCst` fence, then loads the
//! state. A remount read-only sets `WRITE_HOLD`, issues a `SeqCst` fence, then sums the
//! shards. By the fences, either the sum sees the writer's count (the remount fails with
//! `EBUSY`, as Linux's does while files are open for writing), or the writer's load sees
//! `WRITE_HOLD` (or the verdict that replaced it): it waits until the hold ends, and the
//! Release store that ends it, read with Acquire, shows it `RDONLY` (the writer gives its
//! count back: `EROFS`) or not (it goes on). With the hold set and no writer counted, no
//! change is in flight, so the remount may also look at what only changes make: Linux
//! refuses while an unlinked file is still open (`s_remove_count`); we look for an inode
//! with no links on the superblock's list.
//!
//! A writer's count may be given back on another CPU's shard than it was taken on, so a
//! shard may go negative. The sum still never misses a writer in flight: a decrement that
//! the sum reads belongs to a writer whose fence came before the remount's (a writer whose
//! fence came after waits out the hold, so its decrement happens after the sum), and that
//! writer's increment is then in the sum too. A writer that counts itself while a remount
//! is deciding may make it fail with `EBUSY` although it then waits: a remount racing
//! writers may fail, as Linux's may.
//!
//! Atime and a FIFO's mtime updates take a write access too (only when they update),
//! and skip the update on a read-only file system, as Linux's `touch_atime` and
//! `file_update_time` do.
//!
//! What it costs: a writer's access is two `Relaxed` adds on its CPU's line and a
//! `SeqCst` fence, plus a load of the state word, which only remounts write. Single
//! thread, instructions per operation (callgrind, `one_thread`, scalable design), before
//! and after: `dir-create-same` 9664 -> 9735 (+0.7%), `dir-rename-same` 9794 -> 9813,
//! `inode-churn` 9471 -> 9541, `dcache` 2980 -> 3010, `dcache-distinct` 3256 -> 3286.
//! (The per-CPU counter now takes its CPU from the thread's hint; asking the kernel on
//! every add made it +3.2% for `dir-create-same`.) The scalability checker finds the same
//! conflict-free cases as before: accesses on different CPUs write different lines.
//!
//! The state word and the handshake are `WriteGate` (`write_gate_impl.rs`), which the loom
//! model in `write_loom_tests.rs` runs on loom's atomics, with a writer that migrates
//! between taking and giving back its count.
//!
//! Lock order: remounts hold the mount table mutex (which serializes every change of the
//! state word), then the inode list's shard locks for the look at unlinked inodes. A writer
//! waits out a hold holding whatever it holds (directory locks): the remount takes none of
//! those.

use crate::inode::SuperBlock;

mod sync {
    pub use crossbeam_utils::Backoff;
    pub use std::sync::atomic::{fence, AtomicU8, Ordering};
}

include!("write_gate_impl.rs");

#[cfg(test)]
#[path = "write_loom_tests.rs"]
mod loom_tests;

impl WriterCount for scalevfs_primitives::percpu::PerCpuCounter {
    #[inline]
    fn add(&self, delta: isize) {
        scalevfs_primitives::percpu::PerCpuCounter::add(self, delta)
    }
    fn sum(&self) -> isize {
        scalevfs_primitives::percpu::PerCpuCounter::sum(self)
    }
}

/// A write access on a superblock, given back when dropped (Linux's `mnt_want_write` ...
/// `mnt_drop_write`). See the module docs.
#[must_use = "the write access ends when the guard is dropped"]
pub struct WriteAccess<'a> {
    pub(crate) sb: &'a SuperBlock,
}

impl WriteAccess<'_> {
    /// Keeps the access past the guard, for an open file description that holds it until
    /// its last close (`SuperBlock::put_write_access`).
    pub(crate) fn keep(self) -> KeptWriteAccess {
        let kept = KeptWriteAccess {
            sb: self.sb as *const SuperBlock,
        };
        std::mem::forget(self);
        kept
    }
}

/// A write access that outlived its guard's borrow, on its way into an open file
/// description (`OpenFile::writer`, which gives it back at the file's last close). Until
/// then it is still given back when dropped: an open that fails after taking it (the file
/// system's `open`, a truncation) leaves no count behind.
pub(crate) struct KeptWriteAccess {
    /// Whose access it is. Made from a guard on an inode of it, by a caller whose path
    /// keeps that inode, and so the superblock, alive until the token is consumed or
    /// dropped.
    pub(crate) sb: *const SuperBlock,
}

impl KeptWriteAccess {
    /// Hands the access to an open file description, which now owes it back.
    pub(crate) fn into_file(self) {
        std::mem::forget(self);
    }
}

impl Drop for KeptWriteAccess {
    fn drop(&mut self) {
        // SAFETY: the superblock outlives the token (see the field's docs).
        unsafe { (*self.sb).put_write_access() };
    }
}

impl Drop for WriteAccess<'_> {
    fn drop(&mut self) {
        self.sb.put_write_access();
    }
}
