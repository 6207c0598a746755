//! Loom models of pin / defer / advance / free: every interleaving and every weak-memory
//! outcome of a reader racing a writer that unlinks a node and frees it.
//!
//! Instead of freeing, the deferred function poisons the node through a
//! `loom::cell::UnsafeCell`, which reports any access pair not ordered by happens-before:
//! so a free that could race with a reader's access fails the model even when the
//! interleaving happens to read the old value. The nodes are freed after the model's
//! threads are joined.

use super::*;
use crate::sync::Ordering;
use loom::cell::UnsafeCell;
use loom::sync::Arc;
use loom::thread;

const POISON: u64 = u64::MAX;

struct Node(UnsafeCell<u64>);

/// A node pointer the deferred poison function carries to wherever it runs.
struct NodePtr(*const Node);
// SAFETY: the node is only accessed through its `UnsafeCell`, whose accesses loom checks.
unsafe impl Send for NodePtr {}

impl NodePtr {
    /// # Safety
    /// The node is allocated (the models free nodes only after joining).
    unsafe fn poison(&self) {
        // SAFETY: per the contract.
        unsafe { (*self.0).0.with_mut(|v| *v = POISON) };
    }
}

/// Reads the node in `slot` under a pin: never the poison.
fn read(global: &Arc<Global>, slot: &Atomic<Node>) -> u64 {
    let h = LocalHandle::register(global);
    let guard = h.pin();
    let n = slot.load(Ordering::Acquire, &guard);
    // SAFETY: loaded under the pin; nodes are poisoned (not freed) inside the model.
    let v = unsafe { n.deref() }.0.with(|p| unsafe { *p });
    assert_ne!(v, POISON, "read a node after its grace period");
    v
}

/// Swaps a new node (value 2) into `slot`; the old one, now unreachable.
fn swap_out(slot: &Atomic<Node>, guard: &Guard) -> NodePtr {
    let old = slot.swap(
        Owned::new(Node(UnsafeCell::new(2))),
        Ordering::AcqRel,
        guard,
    );
    NodePtr(old.as_raw())
}

/// The writer swaps a new node in and defers the old one's poison; `pinned`: through a
/// guard (`defer_unchecked`), else unpinned (`defer_fn`, the retire path). Then flushes
/// twice. Returns the old node.
fn write(h: &LocalHandle, slot: &Atomic<Node>, pinned: bool) -> *const Node {
    let guard = h.pin();
    let ptr = swap_out(slot, &guard);
    let raw = ptr.0;
    if pinned {
        // SAFETY: swapped out; the node stays allocated until the model frees it.
        unsafe { guard.defer_unchecked(move || ptr.poison()) };
        drop(guard);
    } else {
        drop(guard);
        // SAFETY: as above.
        unsafe { h.defer_fn(move || ptr.poison()) };
    }
    h.flush();
    h.flush();
    raw
}

fn model(pinned: bool) {
    loom::model(move || {
        let global = Arc::new(Global::new());
        let slot = Arc::new(Atomic::new(Node(UnsafeCell::new(1))));
        let (g2, s2) = (global.clone(), slot.clone());
        let reader = thread::spawn(move || read(&g2, &s2));
        let h = LocalHandle::register(&global);
        let old = write(&h, &slot, pinned);
        let seen = reader.join().unwrap();
        assert!(seen == 1 || seen == 2, "read {seen}");
        // Liveness: with the reader gone, a flush runs the poison.
        h.flush();
        assert_eq!(h.pending(), 0, "the grace period did not end");
        // SAFETY: every thread is done: free both nodes.
        unsafe {
            drop(Box::from_raw(old.cast_mut()));
            drop(slot.load(Ordering::Relaxed, unprotected()).into_owned());
        }
    });
}

#[test]
fn loom_free_waits_for_a_pinned_reader() {
    model(true);
}

#[test]
fn loom_free_waits_for_a_pinned_reader_when_deferred_unpinned() {
    model(false);
}

/// A thread that defers and exits while the main thread is pinned: its bag is orphaned,
/// and the main thread adopts it; the poison waits for the main thread's own pin.
#[test]
fn loom_orphaned_bag_waits_for_a_pinned_reader() {
    loom::model(|| {
        let global = Arc::new(Global::new());
        let slot = Arc::new(Atomic::new(Node(UnsafeCell::new(1))));
        let h = LocalHandle::register(&global);
        let guard = h.pin();
        let seen = slot.load(Ordering::Acquire, &guard);
        let (g3, s3) = (global.clone(), slot.clone());
        let writer = thread::spawn(move || {
            let h = LocalHandle::register(&g3);
            let guard = h.pin();
            let ptr = swap_out(&s3, &guard);
            let raw = ptr.0 as usize;
            // SAFETY: swapped out; allocated until the model frees it.
            unsafe { guard.defer_unchecked(move || ptr.poison()) };
            raw
        });
        let old = writer.join().unwrap() as *mut Node;
        guard.flush();
        guard.flush();
        // SAFETY: loaded under `guard`, which is still pinned.
        let v = unsafe { seen.deref() }.0.with(|p| unsafe { *p });
        assert_eq!(v, 1, "the adopted orphan ran under a pin");
        drop(guard);
        h.flush();
        h.flush();
        assert_eq!(h.pending(), 0, "the orphan was not run");
        // SAFETY: every thread is done.
        unsafe {
            drop(Box::from_raw(old));
            drop(slot.load(Ordering::Relaxed, unprotected()).into_owned());
        }
    });
}
