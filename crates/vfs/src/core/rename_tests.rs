//! Tests of rename's two locking paths: a rename of non-directories takes neither the
//! rename mutex nor the rename sequence (scalable design), one that involves a directory
//! takes both, and the two run together without deadlock while path walks stay exact.

use super::VfsCore;
use crate::dentry::tests::{core, look};
use crate::mount::Path;
use crate::namei::Ctx;
use crate::perm::Cred;
use crate::Errno;
use scalevfs_primitives::Locking;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

fn with_ctx<R>(c: &VfsCore, f: impl FnOnce(&Ctx<'_>, &Path) -> R) -> R {
    let (root, cred) = (c.root(), Cred::root());
    let ctx = Ctx::new(&cred, &root);
    f(&ctx, &root)
}

fn mkdir(c: &VfsCore, path: &str) {
    with_ctx(c, |ctx, root| {
        c.mkdir(ctx, root, path.as_bytes(), 0o755, 0).unwrap()
    })
}

fn creat(c: &VfsCore, path: &str) {
    with_ctx(c, |ctx, root| {
        c.open(
            ctx,
            root,
            path.as_bytes(),
            libc::O_CREAT | libc::O_EXCL,
            0o644,
            0,
        )
        .unwrap();
    })
}

fn rename(c: &VfsCore, from: &str, to: &str, flags: u32) -> Result<(), Errno> {
    with_ctx(c, |ctx, root| {
        c.rename(ctx, root, from.as_bytes(), root, to.as_bytes(), flags)
    })
}

/// True if a rename (or mount change) wrote the sequence while `f` ran.
fn writes_sequence(c: &VfsCore, f: impl FnOnce()) -> bool {
    let seq = c.dcache.rename_lock.read_begin();
    f();
    c.dcache.rename_lock.read_retry(seq)
}

#[test]
fn only_renames_that_involve_a_directory_write_the_sequence() {
    for locking in [Locking::Scalable, Locking::Legacy] {
        let c = core(locking);
        for d in ["/a", "/b", "/a/sub"] {
            mkdir(&c, d);
        }
        creat(&c, "/a/f");
        creat(&c, "/a/g");
        let legacy = locking == Locking::Legacy;
        // Same directory, across directories, over a file, exchanged: files only.
        assert_eq!(
            writes_sequence(&c, || rename(&c, "/a/f", "/a/f2", 0).unwrap()),
            legacy
        );
        assert_eq!(
            writes_sequence(&c, || rename(&c, "/a/f2", "/b/f", 0).unwrap()),
            legacy
        );
        assert_eq!(
            writes_sequence(&c, || rename(&c, "/a/g", "/b/f", 0).unwrap()),
            legacy
        );
        creat(&c, "/a/h");
        assert_eq!(
            writes_sequence(&c, || {
                rename(&c, "/a/h", "/b/f", libc::RENAME_EXCHANGE).unwrap()
            }),
            legacy
        );
        // A directory, in one directory or across: always.
        assert!(writes_sequence(&c, || rename(&c, "/a/sub", "/a/s2", 0).unwrap()));
        assert!(writes_sequence(&c, || rename(&c, "/a/s2", "/b/s", 0).unwrap()));
        // A file over a directory fails as Linux says (checked on the locked path).
        assert_eq!(rename(&c, "/b/f", "/b/s", 0), Err(Errno::EISDIR));
        // A file over an ancestor of its directory: the loop check's ENOTEMPTY.
        mkdir(&c, "/b/s/t");
        creat(&c, "/b/s/t/x");
        assert_eq!(rename(&c, "/b/s/t/x", "/b/s", 0), Err(Errno::ENOTEMPTY));
        // Where everything ended up.
        assert!(look(&c, "/b/f").is_ok() && look(&c, "/a/h").is_ok());
        assert_eq!(look(&c, "/a/f").err(), Some(Errno::ENOENT));
        assert_eq!(look(&c, "/a/g").err(), Some(Errno::ENOENT));
        let f = look(&c, "/b/s/t/x").unwrap();
        assert_eq!(c.d_path(&c.root(), &f).unwrap(), b"/b/s/t/x");
    }
}

/// Files renamed back and forth between a directory and its subdirectory (the unlocked
/// path, parents locked by address) while directories move between the same two
/// (the locked path, ancestor first) and walkers resolve and d_path the files: no
/// deadlock, every file ends at exactly one of its two names, and d_path agrees.
#[test]
fn file_and_directory_renames_together_stress() {
    const FILES: usize = 4;
    const ROUNDS: usize = 300;
    for locking in [Locking::Scalable, Locking::Legacy] {
        let c = core(locking);
        mkdir(&c, "/p");
        mkdir(&c, "/p/q");
        mkdir(&c, "/p/d");
        for i in 0..FILES {
            creat(&c, &format!("/p/f{i}"));
        }
        let stop = Arc::new(AtomicBool::new(false));
        let renaming = Arc::new(AtomicUsize::new(FILES));
        std::thread::scope(|s| {
            for i in 0..FILES {
                let (c, renaming) = (&c, renaming.clone());
                s.spawn(move || {
                    for _ in 0..ROUNDS {
                        rename(c, &format!("/p/f{i}"), &format!("/p/q/f{i}"), 0).unwrap();
                        rename(c, &format!("/p/q/f{i}"), &format!("/p/f{i}"), 0).unwrap();
                    }
                    renaming.fetch_sub(1, Ordering::Relaxed);
                });
            }
            {
                let (c, stop) = (&c, stop.clone());
                s.spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        rename(c, "/p/d", "/p/q/d", 0).unwrap();
                        rename(c, "/p/q/d", "/p/d", 0).unwrap();
                    }
                });
            }
            {
                let (c, stop) = (&c, stop.clone());
                s.spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        for i in 0..FILES {
                            for dir in ["/p", "/p/q"] {
                                let name = format!("{dir}/f{i}");
                                if let Ok(p) = look(c, &name) {
                                    let path = c.d_path(&c.root(), &p).unwrap();
                                    let path = String::from_utf8(path).unwrap();
                                    assert!(
                                        path == format!("/p/f{i}") || path == format!("/p/q/f{i}"),
                                        "{path}"
                                    );
                                }
                            }
                        }
                    }
                });
            }
            // The file renamers finish; then the others stop.
            while renaming.load(Ordering::Relaxed) != 0 {
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            stop.store(true, Ordering::Relaxed);
        });
        for i in 0..FILES {
            assert!(look(&c, &format!("/p/f{i}")).is_ok());
            assert_eq!(look(&c, &format!("/p/q/f{i}")).err(), Some(Errno::ENOENT));
        }
        assert!(look(&c, "/p/d").is_ok());
    }
}
