//! The current directory of a process, readable by its threads without writing shared
//! memory (Linux's `fs_struct`: `fs->pwd`, one counted path per process).
//!
//! ## Algorithm
//! The cwd is one counted [`Path`] in an `Arc`, held in an [`ArcSwap`]: the process holds
//! one dentry count on its cwd, whatever its threads do.
//!
//! * **Readers** (`getcwd`, and every relative path walk, which starts at the cwd) *pin*
//!   the current `Arc` with [`ArcSwap::load`]: arc-swap records the pin in a slot of the
//!   reading thread (a "debt"), not in the `Arc`'s count, so a pin writes only that
//!   thread's memory. A walk starts from the pinned path and takes no count on the cwd
//!   dentry: processes whose cwd is the same directory share its line in the Shared
//!   state only, as do threads of one process.
//! * **Writers** (`chdir`, `fchdir`) store a new `Arc`. arc-swap pays every reader's debt
//!   on the old `Arc` (turns each pin into a real count) before the store returns, so the
//!   old path, and with it the count on the old cwd dentry, lives until the last pinned
//!   reader drops its pin; that drop (`dput`) then runs on the reader's thread at the end
//!   of its call, where dropping a counted [`Path`] start ran before.
//!
//! ## Why a pinned path is safe to use
//! A pin is a strong reference to the `Arc` (arc-swap's guarantee), which owns the
//! counted path: the dentry cannot die or be freed while pinned, so a walk may also take
//! counts on it (`dget`) as from any counted path.
//!
//! ## Lock order
//! No lock: arc-swap's writers and readers are lock-free (its debt slots are per thread).

use arc_swap::{ArcSwap, Guard};
use scalevfs_vfs::dentry::Dentry;
use scalevfs_vfs::{MntRef, Path};
use std::sync::Arc;

pub(crate) struct Cwd {
    path: ArcSwap<Path>,
}

/// The cwd as a reader pinned it: a [`Path`] that stays counted while this lives.
pub(crate) type PinnedCwd = Guard<Arc<Path>>;

impl Cwd {
    pub(crate) fn new(p: Path) -> Cwd {
        Cwd {
            path: ArcSwap::from_pointee(p),
        }
    }

    /// Makes `p` the cwd; the old one is dropped (`dput`) when its last pin goes.
    pub(crate) fn set(&self, p: Path) {
        self.path.store(Arc::new(p));
    }

    /// Runs `f` on the cwd without taking a count on its dentry.
    pub(crate) fn with_borrowed<R>(&self, f: impl FnOnce(MntRef, &Dentry) -> R) -> R {
        let pinned = self.pin();
        f(pinned.mnt, &pinned.dentry)
    }

    /// The cwd, pinned: the start of a relative path walk.
    pub(crate) fn pin(&self) -> PinnedCwd {
        self.path.load()
    }

    /// A counted reference to the cwd (a new process's cwd, `chroot(".")`).
    pub(crate) fn get(&self) -> Path {
        Path::clone(&self.pin())
    }
}

#[cfg(test)]
mod tests {
    use super::Cwd;
    use crate::{Credentials, Process, Vfs, VfsOptions};
    use scalevfs_vfs::namei::Ctx;

    /// Threads walk relative paths from pinned cwds while another thread keeps changing
    /// the cwd between directories that are made and removed: every pinned path is
    /// alive (its dentry is counted) for the whole walk, and nothing leaks.
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
