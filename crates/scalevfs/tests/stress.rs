//! Concurrency: many threads create, rename, link, unlink, open and close across shared and
//! private directories; then the invariants are checked (no lost or duplicated entries,
//! link counts right, no leaked inodes). Bounded iterations; both designs.

mod common;

use common::StopOnDrop;
use libc::*;
use rand::{rngs::StdRng, Rng, SeedableRng};
use scalevfs::{Credentials, Errno, Locking, Process, Vfs, VfsOptions};
use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

const THREADS: usize = if cfg!(miri) { 4 } else { 16 };
/// Rounds of the descriptor-table tests; Miri (which runs the two tests below the other
/// ones) interprets about 1000x slower.
const FD_ROUNDS: usize = if cfg!(miri) { 3 } else { 300 };
const DUP2_ROUNDS: usize = if cfg!(miri) { 30 } else { 20_000 };

fn vfs(locking: Locking) -> Arc<Vfs> {
    Vfs::new(VfsOptions {
        locking,
        ..VfsOptions::default()
    })
}

fn names(p: &Process, dir: &str) -> Vec<Vec<u8>> {
    p.readdir(dir)
        .unwrap()
        .into_iter()
        .map(|e| e.name)
        .filter(|n| n != b"." && n != b"..")
        .collect()
}

/// Removes everything below `dir` (files, links, symlinks, subdirectories).
fn rm_rf(p: &Process, dir: &str) {
    for n in names(p, dir) {
        let path = format!("{dir}/{}", String::from_utf8(n).unwrap());
        match p.lstat(&path) {
            Ok(s) if s.mode & S_IFMT == S_IFDIR => {
                rm_rf(p, &path);
                p.rmdir(&path).unwrap();
            }
            Ok(_) => p.unlink(&path).unwrap(),
            Err(e) => panic!("{path}: {e:?}"),
        }
    }
}

#[test]
fn no_leaked_inodes_after_unlink_and_close() {
    for locking in [Locking::Scalable, Locking::Legacy] {
        let v = vfs(locking);
        let p = Process::new(&v, Credentials::root());
        let mut fds = Vec::new();
        for d in 0..5 {
            p.mkdir(format!("/d{d}"), 0o755).unwrap();
            p.mkdir(format!("/d{d}/sub"), 0o755).unwrap();
            for f in 0..20 {
                let path = format!("/d{d}/f{f}");
                p.write_file(&path, &[f as u8; 5000]).unwrap();
                if f % 3 == 0 {
                    p.linkat(AT_FDCWD, &path, AT_FDCWD, format!("/d{d}/sub/h{f}"), 0)
                        .unwrap();
                }
                if f % 4 == 0 {
                    fds.push(p.open(&path, O_RDWR, 0).unwrap());
                }
            }
            p.symlinkat("f1", AT_FDCWD, format!("/d{d}/s")).unwrap();
            // Negative dentries too.
            assert_eq!(p.stat(format!("/d{d}/nothing")), Err(Errno::ENOENT));
        }
        p.chdir("/d3/sub").unwrap();
        let before = v.inode_count();
        assert_eq!(before, 1 + 5 * (2 + 20 + 1));
        for d in 0..5 {
            rm_rf(&p, &format!("/d{d}"));
            p.rmdir(format!("/d{d}")).unwrap();
        }
        v.drop_caches();
        // Open unlinked files, their (deleted) parent directories, which their dentries pin
        // as on Linux, and the (deleted) cwd keep their inodes.
        assert_eq!(v.inode_count(), 1 + fds.len() + 5 + 1);
        for fd in &fds {
            assert_eq!(p.fstat(*fd).unwrap().nlink, 0);
            assert_eq!(p.pread64(*fd, &mut [0u8; 3], 4000), Ok(3));
            p.close(*fd).unwrap();
        }
        p.chdir("/").unwrap();
        v.drop_caches();
        assert_eq!(v.inode_count(), 1, "{locking:?}: leaked inodes");
        let sb = &v.core().superblocks()[0];
        let mut walked = 0;
        sb.for_each_inode(|_| walked += 1);
        assert_eq!(walked, 1);
        assert_eq!(
            v.core().dcache.nr_dentry(),
            1,
            "only the root dentry is left"
        );
    }
}

/// Exact model of a private directory (name -> inode identity), checked at the end.
fn private_worker(p: &Process, t: usize, iters: usize) -> BTreeSet<String> {
    let dir = format!("/p{t}");
    let mut model: HashMap<String, u64> = HashMap::new();
    let mut next_id = 0u64;
    let mut rng = StdRng::seed_from_u64(t as u64);
    for _ in 0..iters {
        let a = format!("n{}", rng.gen_range(0..12));
        let b = format!("n{}", rng.gen_range(0..12));
        let (pa, pb) = (format!("{dir}/{a}"), format!("{dir}/{b}"));
        match rng.gen_range(0..6) {
            0 => {
                let r = p.open(&pa, O_CREAT | O_EXCL | O_WRONLY, 0o644);
                assert_eq!(r.is_ok(), !model.contains_key(&a), "create {pa}");
                if let Ok(fd) = r {
                    next_id += 1;
                    model.insert(a.clone(), next_id);
                    p.write(fd, a.as_bytes()).unwrap();
                    p.close(fd).unwrap();
                }
            }
            1 => assert_eq!(
                p.unlink(&pa).is_ok(),
                model.remove(&a).is_some(),
                "unlink {pa}"
            ),
            2 => {
                let r = p.rename(&pa, &pb);
                assert_eq!(r.is_ok(), model.contains_key(&a), "rename {pa} {pb}");
                // Renaming one hard link onto another of the same inode does nothing.
                if r.is_ok() && model.get(&a) != model.get(&b) {
                    let id = model.remove(&a).unwrap();
                    model.insert(b.clone(), id);
                }
            }
            3 => {
                let r = p.linkat(AT_FDCWD, &pa, AT_FDCWD, &pb, 0);
                let ok = model.contains_key(&a) && !model.contains_key(&b);
                assert_eq!(r.is_ok(), ok, "link {pa} {pb}: {r:?}");
                if ok {
                    let id = model[&a];
                    model.insert(b.clone(), id);
                }
            }
            4 => {
                let r = p.open(&pa, O_RDONLY, 0);
                assert_eq!(r.is_ok(), model.contains_key(&a));
                if let Ok(fd) = r {
                    let mut buf = [0u8; 8];
                    p.read(fd, &mut buf).unwrap();
                    p.close(fd).unwrap();
                }
            }
            _ => {
                let r = p.stat(&pa);
                assert_eq!(r.is_ok(), model.contains_key(&a));
                if let Ok(st) = r {
                    let links = model
                        .values()
                        .filter(|&&i| Some(&i) == model.get(&a))
                        .count();
                    assert_eq!(st.nlink, links as u64, "nlink of {pa}");
                }
            }
        }
    }
    model.into_keys().collect()
}

fn shared_worker(p: &Process, t: usize, iters: usize) {
    let mut rng = StdRng::seed_from_u64(1000 + t as u64);
    let dirs = ["/s1", "/s2"];
    for _ in 0..iters {
        let pa = format!("{}/n{}", dirs[rng.gen_range(0..2)], rng.gen_range(0..16));
        let pb = format!("{}/n{}", dirs[rng.gen_range(0..2)], rng.gen_range(0..16));
        let r: Result<(), Errno> = match rng.gen_range(0..7) {
            0 => p
                .open(&pa, O_CREAT | O_EXCL | O_WRONLY, 0o644)
                .and_then(|fd| p.close(fd)),
            1 => p.unlink(&pa),
            2 => p.rename(&pa, &pb),
            3 => p.renameat2(AT_FDCWD, &pa, AT_FDCWD, &pb, RENAME_EXCHANGE),
            4 => p.linkat(AT_FDCWD, &pa, AT_FDCWD, &pb, 0),
            5 => p.open(&pa, O_RDONLY, 0).and_then(|fd| p.close(fd)),
            _ => p.stat(&pa).map(|_| ()),
        };
        if let Err(e) = r {
            assert!(
                [Errno::ENOENT, Errno::EEXIST].contains(&e),
                "unexpected {e:?} on {pa} / {pb}"
            );
        }
    }
}

fn stress(locking: Locking, iters: usize) {
    let v = vfs(locking);
    let p = Process::new(&v, Credentials::root());
    for d in ["/s1", "/s2"] {
        p.mkdir(d, 0o755).unwrap();
    }
    for t in 0..THREADS {
        p.mkdir(format!("/p{t}"), 0o755).unwrap();
    }
    let models: Vec<BTreeSet<String>> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..THREADS)
            .map(|t| {
                let p = &p;
                s.spawn(move || {
                    if t % 2 == 0 {
                        private_worker(p, t, iters)
                    } else {
                        shared_worker(p, t, iters);
                        BTreeSet::new()
                    }
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    // Private directories match their models exactly.
    for (t, m) in models.iter().enumerate().filter(|(t, _)| t % 2 == 0) {
        let got: BTreeSet<String> = names(&p, &format!("/p{t}"))
            .into_iter()
            .map(|n| String::from_utf8(n).unwrap())
            .collect();
        assert_eq!(&got, m, "private dir {t}");
    }
    // Shared directories: no duplicates, every entry resolves, link counts are right.
    let mut links: HashMap<u64, (u64, u32)> = HashMap::new();
    for d in ["/s1", "/s2"] {
        let ns = names(&p, d);
        let set: BTreeSet<_> = ns.iter().cloned().collect();
        assert_eq!(set.len(), ns.len(), "duplicate entries in {d}");
        for n in ns {
            let st = p
                .lstat(format!("{d}/{}", String::from_utf8(n).unwrap()))
                .unwrap();
            let e = links.entry(st.ino).or_insert((st.nlink, 0));
            e.1 += 1;
        }
    }
    for (ino, (nlink, seen)) in &links {
        assert_eq!(*nlink, *seen as u64, "inode {ino}: nlink vs entries");
    }
    // Nothing leaked: after removing everything only the root is left.
    for t in 0..THREADS {
        rm_rf(&p, &format!("/p{t}"));
        p.rmdir(format!("/p{t}")).unwrap();
    }
    for d in ["/s1", "/s2"] {
        rm_rf(&p, d);
        p.rmdir(d).unwrap();
    }
    v.drop_caches();
    assert_eq!(v.inode_count(), 1, "{locking:?}: leaked inodes");
    assert_eq!(v.core().dcache.nr_dentry(), 1);
}

#[test]
fn stress_namespace_scalable() {
    stress(Locking::Scalable, 1500);
}

#[test]
fn stress_namespace_legacy() {
    stress(Locking::Legacy, 800);
}

/// `n` root processes whose cwd is `dir`.
fn processes_in(v: &Arc<Vfs>, dir: &str, n: usize) -> Vec<Process> {
    (0..n)
        .map(|_| {
            let q = Process::new(v, Credentials::root());
            q.chdir(dir).unwrap();
            q
        })
        .collect()
}

/// getcwd races with renames of the cwd directory itself: a dentry being moved never
/// looks unlinked, so getcwd always answers one of the two names (Linux's `__d_move`
/// keeps the dentry hashed; an earlier version cleared the flag for the move and getcwd
/// failed with ENOENT now and then).
#[test]
fn rename_of_the_cwd_against_getcwd() {
    for locking in [Locking::Scalable, Locking::Legacy] {
        let v = vfs(locking);
        let p = Process::new(&v, Credentials::root());
        p.mkdir("/d", 0o755).unwrap();
        p.mkdir("/d/c", 0o755).unwrap();
        let readers = processes_in(&v, "/d/c", 3);
        let stop = AtomicBool::new(false);
        std::thread::scope(|s| {
            let _stop = StopOnDrop(&stop);
            for q in &readers {
                let stop = &stop;
                s.spawn(move || {
                    let mut n = 0;
                    while !stop.load(Ordering::Relaxed) || n < 100 {
                        n += 1;
                        let cwd = q.cwd().unwrap();
                        assert!(cwd == b"/d/c" || cwd == b"/d/e", "{cwd:?}");
                    }
                });
            }
            for _ in 0..3000 {
                p.rename("/d/c", "/d/e").unwrap();
                p.rename("/d/e", "/d/c").unwrap();
            }
            stop.store(true, Ordering::Relaxed);
        });
    }
}

/// Lookups and getcwd race with renames of an ancestor: every answer is one of the two
/// consistent states.
#[test]
fn rename_against_lookup_and_getcwd() {
    for locking in [Locking::Scalable, Locking::Legacy] {
        let v = vfs(locking);
        let p = Process::new(&v, Credentials::root());
        p.mkdir("/a", 0o755).unwrap();
        p.mkdir("/a/b", 0o755).unwrap();
        p.mkdir("/a/b/c", 0o755).unwrap();
        p.write_file("/a/b/c/file", b"x").unwrap();
        let stop = AtomicBool::new(false);
        let readers = processes_in(&v, "/a/b/c", 4);
        std::thread::scope(|s| {
            let _stop = StopOnDrop(&stop);
            for (r, q) in readers.iter().enumerate() {
                let stop = &stop;
                s.spawn(move || {
                    let mut n = 0;
                    while !stop.load(Ordering::Relaxed) || n < 100 {
                        n += 1;
                        let cwd = q.cwd().unwrap();
                        assert!(cwd == b"/a/b/c" || cwd == b"/x/b/c", "{cwd:?}");
                        for path in ["/a/b/c/file", "/x/b/c/file"] {
                            match q.stat(path) {
                                Ok(st) => assert_eq!(st.size, 1),
                                Err(e) => assert_eq!(e, Errno::ENOENT),
                            }
                        }
                        assert_eq!(q.stat("file").unwrap().size, 1);
                        if r == 0 {
                            assert_eq!(q.stat("../../b/c/file").unwrap().size, 1);
                        }
                    }
                });
            }
            for _ in 0..300 {
                p.rename("/a", "/x").unwrap();
                p.rename("/x", "/a").unwrap();
            }
            stop.store(true, Ordering::Relaxed);
        });
        assert_eq!(p.stat("/a/b/c/file").unwrap().size, 1);
    }
}

/// Threads of ONE process read the cwd (getcwd borrows it without a count, relative paths
/// take one) while other threads of it chdir back and forth and remove and recreate an
/// old cwd: every read sees one whole cwd, never a mix or a freed one, and nothing leaks.
#[test]
fn chdir_against_getcwd_in_one_process() {
    for locking in [Locking::Scalable, Locking::Legacy] {
        let v = vfs(locking);
        let p = Process::new(&v, Credentials::root());
        for d in ["/one", "/two", "/two/deep"] {
            p.mkdir(d, 0o755).unwrap();
        }
        p.write_file("/one/tag", b"1").unwrap();
        p.write_file("/two/deep/tag", b"22").unwrap();
        let base = v.inode_count();
        let stop = AtomicBool::new(false);
        std::thread::scope(|s| {
            let _stop = StopOnDrop(&stop);
            for t in 0..6 {
                let (p, stop) = (&p, &stop);
                s.spawn(move || {
                    let mut n = 0;
                    while !stop.load(Ordering::Relaxed) || n < 200 {
                        n += 1;
                        match p.cwd() {
                            Ok(c) => assert!(
                                [&b"/one"[..], b"/two/deep", b"/", b"/gone"].contains(&&c[..]),
                                "{:?}",
                                String::from_utf8_lossy(&c)
                            ),
                            // The cwd was a removed directory at that moment.
                            Err(e) => assert_eq!(e, Errno::ENOENT),
                        }
                        if t % 2 == 0 {
                            match p.stat("tag") {
                                Ok(st) => assert!(st.size == 1 || st.size == 2),
                                Err(e) => assert_eq!(e, Errno::ENOENT),
                            }
                        }
                    }
                });
            }
            for i in 0..4000 {
                p.chdir(["/one", "/two/deep"][i % 2]).unwrap();
                if i % 64 == 63 {
                    // A cwd that is removed while other threads read it.
                    p.mkdir("/gone", 0o755).unwrap();
                    p.chdir("/gone").unwrap();
                    p.rmdir("/gone").unwrap();
                }
            }
            stop.store(true, Ordering::Relaxed);
        });
        p.chdir("/").unwrap();
        assert_eq!(p.cwd().unwrap(), b"/");
        v.drop_caches();
        assert_eq!(v.inode_count(), base, "{locking:?}: a replaced cwd leaked");
    }
}

/// getdents64 while the directory changes: entries that exist throughout appear exactly
/// once, and no entry (name, inode) appears twice.
#[test]
fn getdents_consistent_under_churn() {
    let v = vfs(Locking::Scalable);
    let p = Process::new(&v, Credentials::root());
    p.mkdir("/d", 0o755).unwrap();
    for k in 0..200 {
        p.write_file(format!("/d/stable{k}"), b"").unwrap();
    }
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        let _stop = StopOnDrop(&stop);
        let (p2, stop2) = (&p, &stop);
        s.spawn(move || {
            let mut k = 0u64;
            while !stop2.load(Ordering::Relaxed) {
                let path = format!("/d/churn{}", k % 50);
                let _ = p2.write_file(&path, b"");
                let _ = p2.unlink(format!("/d/churn{}", (k + 25) % 50));
                k += 1;
            }
        });
        for _ in 0..200 {
            let fd = p.open("/d", O_RDONLY | O_DIRECTORY, 0).unwrap();
            let mut seen = BTreeSet::new();
            let mut buf = [0u8; 300];
            loop {
                let n = p.getdents64(fd, &mut buf).unwrap();
                if n == 0 {
                    break;
                }
                for e in scalevfs_vfs::core::decode_dirents(&buf[..n]) {
                    // An entry (name and inode) is never reported twice. A name removed and
                    // created again during the scan is a new entry and may appear again, as
                    // with Linux's tmpfs.
                    assert!(seen.insert((e.name.clone(), e.ino)), "{:?} twice", e.name);
                }
            }
            for k in 0..200 {
                let name = format!("stable{k}").into_bytes();
                assert_eq!(
                    seen.iter().filter(|(n, _)| *n == name).count(),
                    1,
                    "stable{k} must appear exactly once"
                );
            }
            p.close(fd).unwrap();
        }
        stop.store(true, Ordering::Relaxed);
    });
}

/// dup2 onto low descriptors races with other threads' opens and closes of those very
/// numbers: dup2 never fails (a descriptor caught between claim and install, or between
/// emptying and release, is waited for), no descriptor is lost and no file leaks. (An
/// earlier dup2 could take a racing open's file for its own: the opener's file was
/// dropped, dup2's own leaked, and the descriptor stayed claimed with nothing in it.)
#[test]
fn dup2_against_open_and_close() {
    let v = vfs(Locking::Scalable);
    let p = Process::new(&v, Credentials::root());
    let base = v.inode_count();
    p.write_file("/f", b"abc").unwrap();
    std::thread::scope(|s| {
        for _ in 0..3 {
            let p = &p;
            s.spawn(move || {
                for _ in 0..DUP2_ROUNDS {
                    let fd = p.open("/f", O_RDONLY, 0).unwrap();
                    // Another thread's dup2 may have replaced it, or closed it already.
                    let _ = p.close(fd);
                }
            });
        }
        let p = &p;
        s.spawn(move || {
            for _ in 0..DUP2_ROUNDS {
                let src = p.open("/f", O_RDONLY, 0).unwrap();
                for target in 0..6 {
                    if target != src {
                        assert_eq!(p.dup2(src, target), Ok(target));
                    }
                }
                let _ = p.close(src);
            }
        });
    });
    for fd in 0..64 {
        let _ = p.close(fd);
    }
    assert_eq!(p.open("/f", O_RDONLY, 0), Ok(0), "no descriptor was lost");
    p.close(0).unwrap();
    p.unlink("/f").unwrap();
    assert_eq!(v.inode_count(), base, "no open file leaked");
}

/// Many threads of one process open and close descriptors: numbers stay unique and the
/// lowest free one is reused.
#[test]
fn fd_table_concurrent() {
    let v = vfs(Locking::Scalable);
    let p = Process::new(&v, Credentials::root());
    p.write_file("/f", b"abc").unwrap();
    std::thread::scope(|s| {
        for _ in 0..THREADS {
            let p = &p;
            s.spawn(move || {
                for _ in 0..FD_ROUNDS {
                    let fds: Vec<i32> =
                        (0..8).map(|_| p.open("/f", O_RDONLY, 0).unwrap()).collect();
                    for &fd in &fds {
                        assert_eq!(p.pread64(fd, &mut [0u8; 3], 0), Ok(3));
                    }
                    for fd in fds {
                        p.close(fd).unwrap();
                    }
                }
            });
        }
    });
    assert_eq!(p.open("/f", O_RDONLY, 0), Ok(0));
}

/// The LRU shrinks itself under a flood of negative lookups while other threads create and
/// remove files.
#[test]
fn dcache_shrinks_under_load() {
    use scalevfs_vfs::core::CoreOptions;
    let v = Vfs::with_core_options(
        VfsOptions::default(),
        CoreOptions {
            max_unused_dentries: 256,
            ..CoreOptions::default()
        },
    );
    let p = Process::new(&v, Credentials::root());
    p.mkdir("/d", 0o755).unwrap();
    std::thread::scope(|s| {
        for t in 0..8 {
            let p = &p;
            s.spawn(move || {
                for k in 0..2000 {
                    let _ = p.stat(format!("/d/neg-{t}-{k}"));
                    if k % 10 == 0 {
                        p.write_file(format!("/d/f{t}"), b"x").unwrap();
                        assert_eq!(p.read_file(format!("/d/f{t}")).unwrap(), b"x");
                        p.unlink(format!("/d/f{t}")).unwrap();
                    }
                }
            });
        }
    });
    assert!(v.core().dcache.nr_dentry() < 4000, "the LRU kept too much");
    v.drop_caches();
    assert_eq!(v.core().dcache.nr_dentry(), 1);
}

/// Renames between a directory and its subdirectory race with rmdir of the subdirectory
/// (which locks parent, then child): the rename must lock the ancestor first too. Both
/// address orders are covered: `/c` is created before `/p` and then moved below it.
#[test]
fn rename_and_rmdir_lock_order() {
    for locking in [Locking::Scalable, Locking::Legacy] {
        let v = vfs(locking);
        let p = Process::new(&v, Credentials::root());
        p.mkdir("/c", 0o755).unwrap();
        p.mkdir("/p", 0o755).unwrap();
        p.rename("/c", "/p/c").unwrap();
        p.mkdir("/a", 0o755).unwrap();
        p.mkdir("/a/c", 0o755).unwrap();
        for top in ["/a", "/p"] {
            p.write_file(format!("{top}/c/keep"), b"").unwrap();
            p.write_file(format!("{top}/x"), b"").unwrap();
        }
        std::thread::scope(|s| {
            for top in ["/a", "/p"] {
                let p = &p;
                s.spawn(move || {
                    for _ in 0..2000 {
                        p.rename(format!("{top}/x"), format!("{top}/c/x")).unwrap();
                        p.rename(format!("{top}/c/x"), format!("{top}/x")).unwrap();
                    }
                });
                s.spawn(move || {
                    for _ in 0..2000 {
                        assert_eq!(p.rmdir(format!("{top}/c")), Err(Errno::ENOTEMPTY));
                    }
                });
            }
        });
    }
}

/// `rmdir` in a directory whose name changes run shared races creates and unlinks inside
/// the victim, renames into and out of it, and `mkdir` of the same name: nothing
/// deadlocks (the victim is only tried under the parent's shared side), every answer is
/// one Linux gives, and afterwards the parent's link count and listing agree.
#[test]
fn rmdir_races_changes_inside_and_renames() {
    for locking in [Locking::Scalable, Locking::Legacy] {
        let v = vfs(locking);
        let p = Process::new(&v, Credentials::root());
        p.mkdir("/d", 0o755).unwrap();
        p.mkdir("/e", 0o755).unwrap();
        p.write_file("/d/x", b"").unwrap();
        // Name changes in /d run shared once its namespace lock exists.
        p.write_file("/d/warm", b"").unwrap();
        std::thread::scope(|s| {
            let p = &p;
            s.spawn(move || {
                for _ in 0..3000 {
                    let r = p.mkdir("/d/sub", 0o755);
                    assert!(r.is_ok() || r == Err(Errno::EEXIST), "mkdir: {r:?}");
                    let r = p.rmdir("/d/sub");
                    assert!(
                        r.is_ok() || [Errno::ENOENT, Errno::ENOTEMPTY].contains(&r.unwrap_err()),
                        "rmdir: {r:?}"
                    );
                }
            });
            s.spawn(move || {
                for _ in 0..3000 {
                    let r = p.write_file("/d/sub/f", b"");
                    assert!(r.is_ok() || r == Err(Errno::ENOENT), "create: {r:?}");
                    let r = p.unlink("/d/sub/f");
                    assert!(r.is_ok() || r == Err(Errno::ENOENT), "unlink: {r:?}");
                }
            });
            s.spawn(move || {
                for _ in 0..3000 {
                    let r = p.rename("/d/x", "/d/sub/x");
                    assert!(r.is_ok() || r == Err(Errno::ENOENT), "rename in: {r:?}");
                    if r.is_ok() {
                        p.rename("/d/sub/x", "/d/x").unwrap();
                    }
                    // A directory moved across the parent, and back. `/e/sub` may be
                    // left over from a round whose way back found a new, non-empty
                    // `/d/sub`: then this rename replaces it if empty, else ENOTEMPTY.
                    let r = p.rename("/d/sub", "/e/sub");
                    assert!(
                        r.is_ok() || [Errno::ENOENT, Errno::ENOTEMPTY].contains(&r.unwrap_err()),
                        "rename out: {r:?}"
                    );
                    if r.is_ok() {
                        let back = p.rename("/e/sub", "/d/sub");
                        assert!(back.is_ok() || back == Err(Errno::ENOTEMPTY), "{back:?}");
                    }
                }
            });
        });
        // Whatever is left, the parents' link counts and listings agree.
        for dir in ["/d", "/e"] {
            let subdirs = p
                .readdir(dir)
                .unwrap()
                .iter()
                .filter(|e| e.name != b"." && e.name != b".." && e.d_type == DT_DIR)
                .count();
            assert_eq!(p.stat(dir).unwrap().nlink as usize, 2 + subdirs, "{dir}");
        }
    }
}

/// Files renamed across two directories in both directions at once (in the scalable
/// design both parents held shared), while the temporary parents they also move between
/// are made and removed, one of them is replaced by a directory renamed onto it, and a
/// directory moves between the two: nothing deadlocks; a rename that succeeds leaves the
/// file where it said, never in a removed or replaced directory; one that fails leaves it
/// where it was; and nothing leaks.
#[test]
fn file_renames_across_directories_race_rmdir_and_directory_renames() {
    const MOVERS: usize = if cfg!(miri) { 2 } else { 6 };
    const ROUNDS: usize = if cfg!(miri) { 10 } else { 1500 };
    for locking in [Locking::Scalable, Locking::Legacy] {
        let v = vfs(locking);
        let p = Process::new(&v, Credentials::root());
        for d in ["/a", "/b", "/a/d"] {
            p.mkdir(d, 0o755).unwrap();
        }
        let side = |i: usize| (["/a", "/b"][i % 2], ["/b", "/a"][i % 2]);
        for i in 0..MOVERS {
            p.write_file(format!("{}/f{i}", side(i).0), b"").unwrap();
        }
        let base = v.inode_count();
        let stop = AtomicBool::new(false);
        std::thread::scope(|s| {
            let _stop = StopOnDrop(&stop);
            let (p, stop) = (&p, &stop);
            let movers: Vec<_> = (0..MOVERS)
                .map(|i| {
                    s.spawn(move || {
                        let (mut here, mut there) = side(i);
                        for _ in 0..ROUNDS {
                            p.rename(format!("{here}/f{i}"), format!("{there}/f{i}"))
                                .unwrap();
                            std::mem::swap(&mut here, &mut there);
                            // A file of its own from /a/t to /b/t, each may be missing.
                            let (src, dst) = (format!("/a/t/m{i}"), format!("/b/t/m{i}"));
                            if p.write_file(&src, b"") == Err(Errno::ENOENT) {
                                continue;
                            }
                            match p.rename(&src, &dst) {
                                Ok(()) => p.unlink(&dst).unwrap(),
                                Err(e) => {
                                    assert_eq!(e, Errno::ENOENT);
                                    p.unlink(&src).unwrap();
                                }
                            }
                        }
                    })
                })
                .collect();
            s.spawn(move || {
                let ok = [Errno::EEXIST, Errno::ENOENT, Errno::ENOTEMPTY];
                while !stop.load(Ordering::Relaxed) {
                    for r in [
                        p.mkdir("/a/t", 0o755),
                        p.mkdir("/b/t", 0o755),
                        p.rmdir("/a/t"),
                        p.rmdir("/b/t"),
                    ] {
                        assert!(r.is_ok() || ok.contains(&r.unwrap_err()), "{r:?}");
                    }
                }
            });
            s.spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    // Replaces /b/t when it is empty (or makes it when it is missing).
                    p.mkdir("/x", 0o755).unwrap();
                    match p.rename("/x", "/b/t") {
                        Ok(()) => {}
                        Err(e) => {
                            assert_eq!(e, Errno::ENOTEMPTY);
                            p.rmdir("/x").unwrap();
                        }
                    }
                }
            });
            s.spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    p.rename("/a/d", "/b/d").unwrap();
                    p.rename("/b/d", "/a/d").unwrap();
                }
            });
            for m in movers {
                m.join().unwrap();
            }
        });
        for i in 0..MOVERS {
            let (start, other) = side(i);
            let (at, gone) = if ROUNDS.is_multiple_of(2) {
                (start, other)
            } else {
                (other, start)
            };
            assert!(p.lstat(format!("{at}/f{i}")).is_ok(), "{locking:?}: f{i}");
            assert_eq!(p.lstat(format!("{gone}/f{i}")), Err(Errno::ENOENT));
        }
        for d in ["/a/t", "/b/t"] {
            let r = p.rmdir(d);
            assert!(r.is_ok() || r == Err(Errno::ENOENT), "{d}: {r:?}");
        }
        assert!(p.lstat("/a/d").is_ok());
        v.drop_caches();
        assert_eq!(v.inode_count(), base, "{locking:?}: leaked inodes");
    }
}
