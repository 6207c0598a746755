//! The current directory of a process, readable by its threads without writing shared
//! memory (Linux's `fs_struct`: `fs->pwd` under the `fs->seq` sequence counter).
//!
//! ## Algorithm
//! The cwd's counted [`Path`] lives in `held`, a mutex that only `chdir` takes. Its two
//! pointers (mount and dentry) are mirrored in `ptrs`, a [`SeqCell`] guarded by `seq`:
//!
//! * **Borrowing readers** (`getcwd`) pin the epoch, read the pointers between
//!   `read_begin` and `read_retry`, and use the dentry *without taking a count*; if a
//!   `chdir` ran meanwhile they throw the result away and retry. Nothing is written: two
//!   threads calling `getcwd` share the counter's line in the Shared state only.
//! * **Counting readers** (relative path lookups, which need a counted start) do the same
//!   and take a count with `try_get` (refused for a dead dentry) before validating.
//!   The count is one RMW on the cwd dentry's lockref, the only shared write left.
//! * **Writers** (`chdir`) lock `held`, store the new pointers inside a write section,
//!   swap the counted path and drop the old one after unlocking (its `dput` may free it).
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
//! ## Lock order
//! `held` is a leaf: nothing is locked while it is held except the sequence counter's
//! write section.

use parking_lot::Mutex;
use scalevfs_primitives::seqlock::{SeqCell, SeqCounter};
use scalevfs_vfs::dentry::{Dentry, DentryRef};
use scalevfs_vfs::{MntRef, Path};

pub(crate) struct Cwd {
    /// The counted cwd; the lock serializes writers.
    held: Mutex<Path>,
    seq: SeqCounter,
    /// `[mount address, dentry address]` of `held`, written only in `seq`'s write sections.
    ptrs: SeqCell<2>,
}

fn words(p: &Path) -> [u64; 2] {
    [p.mnt.addr() as u64, p.dentry.as_ptr() as u64]
}

impl Cwd {
    pub(crate) fn new(p: Path) -> Cwd {
        Cwd {
            ptrs: SeqCell::new(words(&p)),
            seq: SeqCounter::new(),
            held: Mutex::new(p),
        }
    }

    /// Makes `p` the cwd; the old one is dropped (`dput`) after the lock is released.
    pub(crate) fn set(&self, p: Path) {
        let mut held = self.held.lock();
        self.seq.write_begin();
        // Release: pairs with the Acquire loads below, which follow the pointers before
        // `read_retry` validates them.
        self.ptrs.store_release(words(&p));
        self.seq.write_end();
        let old = std::mem::replace(&mut *held, p);
        drop(held);
        drop(old);
    }

    /// Runs `f` on the cwd without taking a count; reruns it if a `chdir` raced (so `f`
    /// must have no side effects).
    pub(crate) fn with_borrowed<R>(&self, mut f: impl FnMut(MntRef, &Dentry) -> R) -> R {
        let _pin = crossbeam_epoch::pin();
        loop {
            let start = self.seq.read_begin();
            let [mnt, dentry] = self.ptrs.load_acquire();
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

    /// A counted reference to the cwd (the start of a relative path walk).
    pub(crate) fn get(&self) -> Path {
        let _pin = crossbeam_epoch::pin();
        loop {
            let start = self.seq.read_begin();
            let [mnt, dentry] = self.ptrs.load_acquire();
            // SAFETY: allocated while we are pinned (module docs); `try_get` refuses a dead
            // dentry, which can only be a cwd that a racing `chdir` already replaced.
            let counted = unsafe { DentryRef::try_get(dentry as usize as *const Dentry) };
            if self.seq.read_retry(start) {
                continue; // a chdir raced: drop the count (if any) and read again
            }
            match counted {
                Some(dentry) => {
                    // SAFETY: validated pair; the mount holds the dentry we just counted,
                    // so it is busy and allocated (`scalevfs_vfs::mount`).
                    let mnt = unsafe { MntRef::from_addr(mnt as usize) };
                    return Path { mnt, dentry };
                }
                // Unreachable while `held` holds a count, but never spin on it.
                None => return self.held.lock().clone(),
            }
        }
    }
}
