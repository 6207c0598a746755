//! The current directory of a process, readable by its threads without writing shared
//! memory (Linux's `fs_struct`: `fs->pwd` under the `fs->seq` sequence counter).
//!
//! ## Algorithm
//! The cwd's counted [`Path`] lives in an `Arc` in `held`, a mutex that only `chdir`
//! takes: the process holds one count on its cwd dentry, whatever its threads do. The
//! mount and dentry addresses, and a `Weak` of the `Arc` (as `Weak::into_raw`), are
//! mirrored in `ptrs`, a [`SeqCell`] guarded by `seq`:
//!
//! * **Borrowing readers** (`getcwd`) pin the epoch, read the pointers between
//!   `read_begin` and `read_retry`, and use the dentry *without taking a count*; if a
//!   `chdir` ran meanwhile they throw the result away and retry. Nothing is written: two
//!   threads calling `getcwd` share the counter's line in the Shared state only.
//! * **Pinning readers** (relative path walks, which need a start that stays counted for
//!   the whole walk) do the same and upgrade the `Weak` to a strong `Arc` before
//!   validating: one RMW on the `Arc`'s count, which belongs to this process. So
//!   processes whose cwd is the same directory write no common line (each has its own
//!   `Arc`), and the dentry's count is not touched per call; only threads of one process
//!   share the `Arc`'s line.
//! * **Writers** (`chdir`) lock `held`, store the new pointers inside a write section,
//!   swap the `Arc`, unlock, retire the old `Weak` through the epoch, and drop the old
//!   `Arc`: the old path (its `dput`) goes with the last strong reference, the writer's or
//!   that of the last walk still using it, on that thread and with no lock held.
//!
//! ## Why a borrowed dentry is safe to read
//! Dentries are freed only through the epoch after their last count is gone (see
//! `scalevfs_vfs::dentry`), and a reader pins before loading the pointer. A pointer it
//! loads was the cwd at some moment after it pinned, or else the write that replaced it
//! (and so the `dput` that may retire the dentry) came before the pin; the pin's SeqCst
//! fence then makes the reader load the newer pointer. So the loaded dentry, and its
//! ancestors (a dentry holds a count on its parent), are retired, if ever, after the pin,
//! and stay allocated until the reader unpins. Mounts are never freed before the VFS.
//!
//! ## Why the upgrade is safe
//! The `Arc`'s allocation lives while a `Weak` does. The `Weak` in `ptrs` is given up
//! only after a later `chdir` replaced it, through the epoch (`retire_fn`), so a reader
//! that pinned before loading it upgrades live memory. `Weak::upgrade` refuses a count
//! that reached zero (the path is being dropped), which can only be a cwd a racing
//! `chdir` replaced, and then `read_retry` fails too.
//!
//! ## Lock order
//! `held` is a leaf: nothing is locked while it is held except the sequence counter's
//! write section.

use parking_lot::Mutex;
use scalevfs_primitives::seqlock::{SeqCell, SeqCounter};
use scalevfs_vfs::dentry::Dentry;
use scalevfs_vfs::{MntRef, Path};
use std::mem::ManuallyDrop;
use std::sync::{Arc, Weak};

pub(crate) struct Cwd {
    /// The counted cwd; the lock serializes writers.
    held: Mutex<Arc<Path>>,
    seq: SeqCounter,
    /// `[mount address, dentry address, Weak::into_raw]` of `held`, written only in `seq`'s
    /// write sections. The `Weak` is owned by this cell.
    ptrs: SeqCell<3>,
}

/// The cwd as a walk pinned it: a [`Path`] that stays counted while this lives.
pub(crate) type PinnedCwd = Arc<Path>;

/// The words mirrored for `p`, giving `ptrs` a `Weak` of it.
fn words(p: &Arc<Path>) -> [u64; 3] {
    let weak = Weak::into_raw(Arc::downgrade(p));
    [
        p.mnt.addr() as u64,
        p.dentry.as_ptr() as u64,
        weak as usize as u64,
    ]
}

/// The `Weak` whose raw pointer `ptrs` holds in word 2.
fn weak_ptr(word: u64) -> *const Path {
    word as usize as *const Path
}

impl Cwd {
    pub(crate) fn new(p: Path) -> Cwd {
        let p = Arc::new(p);
        Cwd {
            ptrs: SeqCell::new(words(&p)),
            seq: SeqCounter::new(),
            held: Mutex::new(p),
        }
    }

    /// Makes `p` the cwd; the old one is dropped (`dput`) with its last pin.
    pub(crate) fn set(&self, p: Path) {
        let p = Arc::new(p);
        let new = words(&p);
        let mut held = self.held.lock();
        // Only writers store `ptrs`, and we hold `held`.
        let old_weak = weak_ptr(self.ptrs.load()[2]);
        self.seq.write_begin();
        // Release: pairs with the Acquire loads below, which follow the pointers before
        // `read_retry` validates them.
        self.ptrs.store_release(new);
        self.seq.write_end();
        let old = std::mem::replace(&mut *held, p);
        drop(held);
        // SAFETY: `ptrs` owned this `Weak` (from `words`) and no longer names it.
        let old_weak = unsafe { Weak::from_raw(old_weak) };
        // SAFETY: unreachable for new readers (replaced above); dropping a `Weak` frees
        // memory at most, and takes no lock.
        unsafe { scalevfs_vfs::retire::retire_fn(move || drop(old_weak)) };
        drop(old);
    }
    /// Runs `f` on the cwd without taking a count; reruns it if a `chdir` raced (so `f`
    /// must have no side effects).
    pub(crate) fn with_borrowed<R>(&self, mut f: impl FnMut(MntRef, &Dentry) -> R) -> R {
        let _pin = scalevfs_primitives::epoch::pin();
        loop {
            let start = self.seq.read_begin();
            let [mnt, dentry, _] = self.ptrs.load_acquire();
            // SAFETY: every value `ptrs` ever held came from `MntRef::addr` of a mount that
            // a cwd path named; we pinned before the load, and a mount is freed only a
            // grace period after its last path went (`scalevfs_vfs::mount`).
            let mnt = unsafe { MntRef::from_addr(mnt as usize) };
            // SAFETY: pinned before the load; see the module docs for why the dentry stays
            // allocated until we unpin. A torn pair fails `read_retry` below, and both
            // words are always values some writer stored (so valid pointers).
            let d = unsafe { &*(dentry as usize as *const Dentry) };
            let r = f(mnt, d);
            if !self.seq.read_retry(start) {
                return r;
            }
        }
    }

    /// The cwd, pinned: the start of a relative path walk (see the module docs).
    pub(crate) fn pin(&self) -> PinnedCwd {
        let _pin = scalevfs_primitives::epoch::pin();
        loop {
            let start = self.seq.read_begin();
            let [_, _, weak] = self.ptrs.load_acquire();
            // SAFETY: a `Weak` that `ptrs` held after we pinned (module docs), so its
            // allocation lives until we unpin; `ManuallyDrop`: the cell keeps owning it.
            let weak = ManuallyDrop::new(unsafe { Weak::from_raw(weak_ptr(weak)) });
            let pinned = weak.upgrade();
            if self.seq.read_retry(start) {
                continue; // a chdir raced: drop the pin (if any) and read again
            }
            match pinned {
                Some(p) => return p,
                // Unreachable while `held` holds the `Arc`, but never spin on it.
                None => return self.held.lock().clone(),
            }
        }
    }

    /// A counted reference to the cwd (a new process's cwd, `chroot(".")`).
    pub(crate) fn get(&self) -> Path {
        Path::clone(&self.pin())
    }
}

impl Drop for Cwd {
    fn drop(&mut self) {
        // SAFETY: `ptrs` owns this `Weak` (from `words`); `&mut self`: no reader remains.
        drop(unsafe { Weak::from_raw(weak_ptr(self.ptrs.load()[2])) });
    }
}

#[cfg(test)]
mod shuttle_tests;

#[cfg(test)]
mod tests {
    use super::Cwd;
    use crate::{Credentials, Process, Vfs, VfsOptions};
    use scalevfs_vfs::namei::Ctx;

    /// Threads walk relative paths from pinned cwds while another thread keeps changing
    /// the cwd among four directories: every pinned path stays alive (its dentry counted
    /// and hashed) for the whole walk, and its walk finds the directory's child.
    #[test]
    fn pins_survive_concurrent_chdir() {
        let vfs = Vfs::new(VfsOptions::default());
        let p = Process::new(&vfs, Credentials::root());
        for i in 0..4 {
            p.mkdir(format!("/d{i}").as_str(), 0o755).unwrap();
            p.mkdir(format!("/d{i}/sub").as_str(), 0o755).unwrap();
        }
        let root = vfs.core.root();
        let cred = Credentials::root().fs_cred();
        let cwd = Cwd::new(root.clone());
        let rounds = if cfg!(miri) { 10 } else { 2000 };
        let stop = std::sync::atomic::AtomicBool::new(false);
        std::thread::scope(|s| {
            for _ in 0..3 {
                s.spawn(|| {
                    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                        let pinned = cwd.pin();
                        let ctx = Ctx::new(&cred, &root);
                        // Every cwd this test sets has a child "sub", or is the root.
                        let r = vfs.core.lookup(&ctx, &pinned, b"sub", true, false);
                        assert!(r.is_ok() || pinned.dentry.as_ptr() == root.dentry.as_ptr());
                        assert!(!pinned.dentry.is_unlinked());
                    }
                });
            }
            s.spawn(|| {
                for r in 0..rounds {
                    let name = format!("/d{}", r % 4);
                    let ctx = Ctx::new(&cred, &root);
                    let d = vfs.core.lookup(&ctx, &root, name.as_bytes(), true, false);
                    cwd.set(d.unwrap());
                }
                cwd.set(root.clone());
                stop.store(true, std::sync::atomic::Ordering::Relaxed);
            });
        });
    }
}
