//! Many threads change names in one tmpfs directory through the VFS at once: creates
//! (`open(O_CREAT|O_EXCL)`, `mkdir`, `symlink`, `link`), unlinks, renames within the
//! directory and lookups run with the directory held shared (scalable design), while
//! other threads take it exclusively (`rmdir` of a subdirectory, a rename across
//! directories). The end state must be exact: every name where its thread left it, the
//! dcache agreeing with the file system, `stat` reporting Linux's size and link count.
//! Both designs run the same workload.

use scalevfs_primitives::Locking;
use scalevfs_tmpfs::{Tmpfs, TmpfsOptions};
use scalevfs_vfs::namei::Ctx;
use scalevfs_vfs::perm::Cred;
use scalevfs_vfs::{CoreOptions, Errno, Path, VfsCore};
use std::sync::Arc;

fn core(locking: Locking) -> Arc<VfsCore> {
    VfsCore::new(
        CoreOptions {
            locking,
            ..CoreOptions::default()
        },
        Arc::new(Tmpfs::new(TmpfsOptions::default())),
    )
    .unwrap()
}

fn with<R>(c: &VfsCore, f: impl FnOnce(&Ctx<'_>, &Path) -> R) -> R {
    let (root, cred) = (c.root(), Cred::root());
    let ctx = Ctx::new(&cred, &root);
    f(&ctx, &root)
}

fn creat(c: &VfsCore, p: &str) -> Result<(), Errno> {
    const EXCL: i32 = libc::O_CREAT | libc::O_EXCL;
    with(c, |ctx, root| {
        c.open(ctx, root, p.as_bytes(), EXCL, 0o644, 0).map(drop)
    })
}

fn exists(c: &VfsCore, p: &str) -> bool {
    with(c, |ctx, root| {
        c.lookup(ctx, root, p.as_bytes(), false, false)
    })
    .is_ok()
}

fn stat(c: &VfsCore, p: &str) -> scalevfs_vfs::Stat {
    with(c, |ctx, root| {
        c.lookup(ctx, root, p.as_bytes(), false, false)
    })
    .unwrap()
    .dentry
    .inode()
    .unwrap()
    .stat()
}

const THREADS: usize = 6;
const ROUNDS: usize = 300;

/// One worker's round `r` in `/d`: create, fail to create again, rename, link, symlink,
/// mkdir; then remove all but every third round's names.
fn round(c: &VfsCore, t: usize, r: usize) {
    let n = |k: &str| format!("/d/{k}{t}_{r}");
    creat(c, &n("a")).unwrap();
    assert_eq!(creat(c, &n("a")), Err(Errno::EEXIST));
    with(c, |ctx, root| {
        c.rename(ctx, root, n("a").as_bytes(), root, n("b").as_bytes(), 0)
            .unwrap();
        let old = c
            .lookup(ctx, root, n("b").as_bytes(), false, false)
            .unwrap();
        c.link(ctx, &old, root, n("h").as_bytes()).unwrap();
        c.symlink(ctx, n("b").as_bytes(), root, n("s").as_bytes())
            .unwrap();
        c.mkdir(ctx, root, n("k").as_bytes(), 0o755, 0).unwrap();
        assert_eq!(
            c.mkdir(ctx, root, n("k").as_bytes(), 0o755, 0),
            Err(Errno::EEXIST)
        );
        if !r.is_multiple_of(3) {
            for k in ["b", "h", "s"] {
                c.unlink(ctx, root, n(k).as_bytes(), false).unwrap();
            }
            c.unlink(ctx, root, n("k").as_bytes(), true).unwrap();
            assert_eq!(
                c.unlink(ctx, root, n("b").as_bytes(), false),
                Err(Errno::ENOENT)
            );
        }
    });
}

#[test]
fn many_threads_change_names_in_one_directory() {
    for locking in [Locking::Scalable, Locking::Legacy] {
        let c = core(locking);
        with(&c, |ctx, root| {
            c.mkdir(ctx, root, b"/d", 0o755, 0).unwrap();
            c.mkdir(ctx, root, b"/e", 0o755, 0).unwrap();
        });
        std::thread::scope(|s| {
            for t in 0..THREADS {
                let c = &c;
                s.spawn(move || {
                    for r in 0..ROUNDS {
                        round(c, t, r);
                    }
                });
            }
            // Exclusive holders meanwhile: an empty subdirectory made and removed, and a
            // file moved out of /d and back.
            let c = &c;
            s.spawn(move || {
                for r in 0..ROUNDS {
                    with(c, |ctx, root| {
                        c.mkdir(ctx, root, b"/d/x", 0o755, 0).unwrap();
                        creat(c, "/d/x/inner").unwrap();
                        assert_eq!(c.unlink(ctx, root, b"/d/x", true), Err(Errno::ENOTEMPTY));
                        c.unlink(ctx, root, b"/d/x/inner", false).unwrap();
                        c.unlink(ctx, root, b"/d/x", true).unwrap();
                        creat(c, "/d/mv").unwrap();
                        c.rename(ctx, root, b"/d/mv", root, b"/e/mv", 0).unwrap();
                        c.rename(ctx, root, b"/e/mv", root, b"/d/mv", 0).unwrap();
                        c.unlink(ctx, root, b"/d/mv", false).unwrap();
                        let _ = r;
                    });
                }
            });
        });
        let kept = THREADS * ROUNDS.div_ceil(3);
        for t in 0..THREADS {
            for r in 0..ROUNDS {
                for k in ["a", "b", "h", "s", "k"] {
                    let want = k != "a" && r % 3 == 0;
                    let p = format!("/d/{k}{t}_{r}");
                    assert_eq!(exists(&c, &p), want, "{p} ({locking:?})");
                }
            }
        }
        c.drop_caches();
        // After the dcache is dropped, the file system agrees.
        assert!(exists(&c, "/d/b0_0") && !exists(&c, "/d/b0_1"));
        let st = stat(&c, "/d");
        // Per kept round: b, h, s, k.
        assert_eq!(st.size as usize, 40 + 20 * 4 * kept, "{locking:?}");
        assert_eq!(st.nlink as usize, 2 + kept, "{locking:?}");
        assert_eq!(stat(&c, "/d/b0_0").nlink, 2, "b and h: {locking:?}");
    }
}
