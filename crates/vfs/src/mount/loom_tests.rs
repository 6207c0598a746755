//! Loom models of the mount state's handshakes: the code of `state_impl.rs` itself, on
//! loom's atomics and fences, so that every interleaving and every weak-memory outcome
//! that loom allows is a real run of it. A dentry's count is modelled by one atomic that
//! reads 0 once dead (a lockref's dead mark: `try_get` fails), with `Relaxed` operations
//! only, so that the fences alone must carry each argument.
//!
//! * A walker entering a mount from the table races a plain umount, and a lazy one: a
//!   walker that got in holds a count that the umount's busy check saw.
//! * `..` from a mount's root races a lazy umount of the mount below (whose root is the
//!   mountpoint): a walker that kept its count on the mountpoint was seen by the busy
//!   check, so the shutdown's wait for the last count ends.
//! * A plain umount races a lazy one, with the table mutex and the steps of
//!   `VfsCore::umount`: a detached mount stays detached.

// Both models bind `sync` to the same loom shim.
#[allow(clippy::duplicate_mod)]
#[path = "loom_sync.rs"]
mod sync;

include!("state_impl.rs");

use loom::sync::atomic::{AtomicBool, AtomicUsize};
use loom::sync::{Arc, Mutex};
use loom::thread;
use sync::Ordering;

/// A dentry's reference count; 0 is dead.
struct Count(AtomicUsize);

/// One counted reference, given back when dropped.
struct Held<'a>(&'a Count);

impl Drop for Held<'_> {
    fn drop(&mut self) {
        self.0 .0.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Count {
    fn new(n: usize) -> Count {
        Count(AtomicUsize::new(n))
    }
    /// A count, unless the dentry is dead.
    fn try_get(&self) -> Option<Held<'_>> {
        let mut n = self.0.load(Ordering::Relaxed);
        loop {
            if n == 0 {
                return None;
            }
            match self
                .0
                .compare_exchange(n, n + 1, Ordering::Relaxed, Ordering::Relaxed)
            {
                Ok(_) => return Some(Held(self)),
                Err(now) => n = now,
            }
        }
    }
    /// What a busy check reads.
    fn read(&self) -> usize {
        self.0.load(Ordering::Relaxed)
    }
    /// Kills the dentry if `1` (the caller's) is its only count (`put_if_last`).
    fn put_if_last(&self) -> bool {
        self.0
            .compare_exchange(1, 0, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
    }
}

/// A mount: its state and its root's count (1: the mount's own).
struct MountModel {
    state: MountState,
    root: Count,
}

impl MountModel {
    fn new() -> Arc<MountModel> {
        Arc::new(MountModel {
            state: MountState::new(),
            root: Count::new(1),
        })
    }
}

/// A walk in a mount: holds its count until the umount has decided (`decided`), so that a
/// count the umount's busy check missed shows in the verdict.
fn walk_until(decided: &AtomicBool, held: Held<'_>) {
    while !decided.load(Ordering::Relaxed) {
        thread::yield_now();
    }
    drop(held);
}

/// The shutdown's wait for the last count (`MountDentry::release_last`).
fn release_last(c: &Count) {
    while !c.put_if_last() {
        thread::yield_now();
    }
}

/// A walker enters while an umount decides; `lazy` picks the kind of umount. Checks that
/// no walker is inside a mount the umount found unused, and that a shut-down root is
/// dead.
fn enter_against_umount(lazy: bool) {
    let m = MountModel::new();
    let decided = Arc::new(AtomicBool::new(false));
    let walker = {
        let (m, decided) = (m.clone(), decided.clone());
        thread::spawn(move || match m.state.enter(|| m.root.try_get()) {
            Some(held) => {
                walk_until(&decided, held);
                true
            }
            None => false,
        })
    };
    let unused = if lazy {
        m.state.detach();
        fence_before_busy_check();
        m.root.read() == 1
    } else {
        m.state.begin_umount();
        fence_before_busy_check();
        let unused = m.root.read() == 1;
        if unused {
            m.state.detach();
        } else {
            m.state.cancel_umount();
        }
        unused
    };
    decided.store(true, Ordering::Relaxed);
    if unused {
        release_last(&m.root);
    }
    let entered = walker.join().unwrap();
    assert!(
        !(entered && unused),
        "a walker entered a mount that umount found unused"
    );
    // A walker that met a plain umount deciding waited for the verdict: it gives up only
    // on a mount that went (after a lazy umount it may also meet `DETACHED` while the
    // mount stays busy for someone else's count).
    assert!(
        lazy || entered || unused,
        "a walker gave up on a mount that stayed"
    );
    if unused {
        assert_eq!(m.root.read(), 0, "the shut-down root is dead");
    } else {
        assert_eq!(m.root.read(), 1, "every walker's count came back");
    }
}

#[test]
fn loom_enter_against_plain_umount() {
    loom::model(|| enter_against_umount(false));
}

#[test]
fn loom_enter_against_lazy_umount() {
    loom::model(|| enter_against_umount(true));
}

/// Mount `a` is mounted on the root of mount `b`; a lazy umount of `b` detaches both,
/// gives back `a`'s count on its mountpoint, and shuts `b` down if unused. A walker at
/// `a`'s root runs `..` as `dotdot` does: the parent only while `a` is attached, then
/// `count_if_attached`.
#[test]
fn loom_dotdot_against_lazy_umount_of_the_mount_below() {
    loom::model(|| {
        let a = MountModel::new();
        // `b`'s root: its mount's count, and `a`'s on its mountpoint.
        let b = Arc::new(MountModel {
            state: MountState::new(),
            root: Count::new(2),
        });
        let decided = Arc::new(AtomicBool::new(false));
        let walker = {
            let (a, b, decided) = (a.clone(), b.clone(), decided.clone());
            thread::spawn(move || {
                if a.state.is_detached() {
                    return false;
                }
                match a.state.count_if_attached(|| b.root.try_get()) {
                    Some(held) => {
                        walk_until(&decided, held); // the walk goes on in `b`
                        true
                    }
                    None => false,
                }
            })
        };
        a.state.detach();
        b.state.detach();
        drop(Held(&b.root)); // `take_mountpoint`, then its put
        fence_before_busy_check();
        let unused = b.root.read() == 1;
        decided.store(true, Ordering::Relaxed);
        if unused {
            release_last(&b.root);
        }
        let kept = walker.join().unwrap();
        assert!(
            !(kept && unused),
            "the walker kept a count on a root the shutdown waits for"
        );
        assert_eq!(b.root.read(), if unused { 0 } else { 1 });
    });
}

/// A plain umount of a busy mount (someone holds a count on its root) races a lazy one,
/// with `VfsCore::umount`'s steps: the detached check before and again under the table
/// mutex. The lazy one always succeeds, and the mount ends detached.
#[test]
fn loom_plain_umount_against_lazy_umount() {
    loom::model(|| {
        let m = Arc::new(MountModel {
            state: MountState::new(),
            root: Count::new(2),
        });
        let table = Arc::new(Mutex::new(()));
        let plain = {
            let (m, table) = (m.clone(), table.clone());
            thread::spawn(move || {
                if m.state.is_detached() {
                    return Err(libc::EINVAL);
                }
                let _all = table.lock().unwrap();
                if m.state.is_detached() {
                    return Err(libc::EINVAL);
                }
                m.state.begin_umount();
                fence_before_busy_check();
                if m.root.read() > 1 {
                    m.state.cancel_umount();
                    return Err(libc::EBUSY);
                }
                m.state.detach();
                Ok(())
            })
        };
        let lazy = {
            if m.state.is_detached() {
                Err(libc::EINVAL)
            } else {
                let _all = table.lock().unwrap();
                if m.state.is_detached() {
                    Err(libc::EINVAL)
                } else {
                    m.state.detach();
                    Ok(())
                }
            }
        };
        let plain = plain.join().unwrap();
        assert_eq!(lazy, Ok(()));
        assert!(plain == Err(libc::EBUSY) || plain == Err(libc::EINVAL));
        assert!(m.state.is_detached(), "a detached mount came back");
    });
}
