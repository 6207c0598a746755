//! Many-thread stress tests of the descriptor table, through `Process` (so every path
//! that installs or removes a descriptor runs as the system calls run it).

use crate::{Credentials, Process, Vfs};
use scalevfs_vfs::{Errno, FcntlArg};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};

const THREADS: usize = if cfg!(miri) { 3 } else { 8 };
// Under Miri an open costs about a fifth of a second.
const ROUNDS: usize = if cfg!(miri) { 8 } else { 2000 };

fn setup(threads: usize) -> (Arc<Vfs>, Process) {
    let v = Vfs::new(Default::default());
    let p = Process::new(&v, Credentials::root());
    for t in 0..threads {
        p.write_file(format!("/f{t}"), format!("file{t}").as_bytes())
            .unwrap();
    }
    (v, p)
}

fn check_content(p: &Process, fd: i32, t: usize) {
    let mut buf = [0u8; 8];
    let n = p.pread64(fd, &mut buf, 0).unwrap();
    assert_eq!(&buf[..n], format!("file{t}").as_bytes(), "fd {fd}");
}

/// Threads open and close their own files, some with `O_CLOEXEC` and `dup`: no
/// descriptor is ever handed to two holders at once (each holder marks it in `owner`
/// while it holds it), each refers to the holder's file, and afterwards every
/// descriptor is free again and allocation is lowest-free.
#[test]
fn no_descriptor_is_handed_out_twice() {
    let (v, p) = setup(THREADS);
    let base = v.inode_count();
    let owner: Vec<AtomicUsize> = (0..1024).map(|_| AtomicUsize::new(0)).collect();
    let claim = |fd: i32, t: usize| {
        let prev = owner[fd as usize].swap(t + 1, Ordering::SeqCst);
        assert_eq!(
            prev, 0,
            "fd {fd} handed to thread {t} while thread {prev} - 1 held it"
        );
    };
    let release = |fd: i32| owner[fd as usize].store(0, Ordering::SeqCst);
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let (p, claim, release) = (&p, &claim, &release);
            s.spawn(move || {
                for r in 0..ROUNDS {
                    let flags = libc::O_RDONLY | if r % 2 == 0 { libc::O_CLOEXEC } else { 0 };
                    let mut fds: Vec<i32> = (0..1 + r % 4)
                        .map(|_| p.open(format!("/f{t}"), flags, 0).unwrap())
                        .collect();
                    if r % 3 == 0 {
                        fds.push(p.dup(fds[0]).unwrap());
                    }
                    for &fd in &fds {
                        claim(fd, t);
                    }
                    for &fd in &fds {
                        check_content(p, fd, t);
                    }
                    for fd in fds {
                        release(fd);
                        p.close(fd).unwrap();
                    }
                }
            });
        }
    });
    for fd in 0..4 {
        assert_eq!(p.open("/f0", libc::O_RDONLY, 0), Ok(fd), "lowest free");
    }
    p.close_range(0, u32::MAX, 0).unwrap();
    for t in 0..THREADS {
        p.unlink(format!("/f{t}")).unwrap();
    }
    assert_eq!(v.inode_count(), base - THREADS, "no open file leaked");
}

/// Threads race for the last descriptors below the limit: exactly `limit` opens
/// succeed, all different, and the rest get `EMFILE`.
#[test]
fn emfile_exactly_at_the_limit_under_contention() {
    let limit = if cfg!(miri) { 20 } else { 300 };
    let (_v, p) = setup(1);
    p.set_fd_limit(limit).unwrap();
    let mut got: Vec<i32> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..THREADS)
            .map(|_| {
                let p = &p;
                s.spawn(move || {
                    let mut mine = Vec::new();
                    loop {
                        match p.open("/f0", libc::O_RDONLY, 0) {
                            Ok(fd) => mine.push(fd),
                            Err(e) => {
                                assert_eq!(e, Errno::EMFILE);
                                return mine;
                            }
                        }
                    }
                })
            })
            .collect();
        hs.into_iter().flat_map(|h| h.join().unwrap()).collect()
    });
    got.sort_unstable();
    assert_eq!(got, (0..limit as i32).collect::<Vec<_>>());
}

/// A close that completed before an open started is visible to it. Each round every
/// thread opens a descriptor it keeps and one it closes once all have opened (so the
/// closed ones are holes among held ones); after a barrier, one thread's open must get
/// the lowest hole.
#[test]
fn completed_closes_are_seen_by_later_opens() {
    let (_v, p) = setup(THREADS);
    let rounds = if cfg!(miri) { 3 } else { 300 };
    let barrier = Barrier::new(THREADS);
    let holes: Vec<AtomicUsize> = (0..THREADS).map(|_| AtomicUsize::new(0)).collect();
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let (p, barrier, holes) = (&p, &barrier, &holes);
            s.spawn(move || {
                for r in 0..rounds {
                    let kept = p.open(format!("/f{t}"), libc::O_RDONLY, 0).unwrap();
                    let hole = p.open(format!("/f{t}"), libc::O_RDONLY, 0).unwrap();
                    holes[t].store(hole as usize, Ordering::Relaxed);
                    barrier.wait();
                    p.close(hole).unwrap();
                    barrier.wait();
                    if t == r % THREADS {
                        let lowest = holes.iter().map(|h| h.load(Ordering::Relaxed)).min();
                        let fd = p.open(format!("/f{t}"), libc::O_RDONLY, 0).unwrap();
                        assert_eq!(Some(fd as usize), lowest, "round {r}");
                        p.close(fd).unwrap();
                    }
                    barrier.wait();
                    p.close(kept).unwrap();
                    barrier.wait();
                }
            });
        }
    });
}

/// dup2 onto descriptors that opens and closes race for, fork taking copies and exec
/// closing the close-on-exec ones, all at once: dup2 never fails, every copy a child
/// gets refers to a live file with its flag, and nothing leaks.
#[test]
fn dup2_close_fork_and_exec_together() {
    let (v, p) = setup(THREADS);
    let base = v.inode_count();
    let rounds = ROUNDS / 4;
    std::thread::scope(|s| {
        for t in 0..THREADS - 2 {
            let p = &p;
            s.spawn(move || {
                for r in 0..rounds {
                    let flags = libc::O_RDONLY | if r % 2 == 0 { libc::O_CLOEXEC } else { 0 };
                    let fd = p.open(format!("/f{t}"), flags, 0).unwrap();
                    // A dup2 of another thread may have replaced it, or closed it.
                    let _ = p.close(fd);
                }
            });
        }
        let p = &p;
        s.spawn(move || {
            for r in 0..rounds {
                let src = p.open("/f0", libc::O_RDONLY, 0).unwrap();
                for target in [1, 2, 5, 70] {
                    if target != src {
                        assert_eq!(
                            p.dup3(src, target, (r % 2) as i32 * libc::O_CLOEXEC),
                            Ok(target)
                        );
                    }
                }
                let _ = p.close(src);
            }
        });
        s.spawn(move || {
            for _ in 0..rounds / 8 {
                let mut child = p.fork();
                let before: Vec<(i32, i32)> = (0..80)
                    .filter_map(|fd| {
                        Some((fd, child.fcntl(fd, libc::F_GETFD, FcntlArg::None).ok()?))
                    })
                    .collect();
                for &(fd, _) in &before {
                    assert!(child.pread64(fd, &mut [0u8; 8], 0).is_ok(), "fd {fd}");
                }
                child.exec_foreign_image();
                for (fd, flags) in before {
                    let open = child.fcntl(fd, libc::F_GETFD, FcntlArg::None).is_ok();
                    assert_eq!(open, flags & libc::FD_CLOEXEC == 0, "fd {fd}");
                }
            }
        });
    });
    p.close_range(0, u32::MAX, 0).unwrap();
    assert_eq!(
        p.open("/f0", libc::O_RDONLY, 0),
        Ok(0),
        "no descriptor was lost"
    );
    p.close(0).unwrap();
    for t in 0..THREADS {
        p.unlink(format!("/f{t}")).unwrap();
    }
    assert_eq!(v.inode_count(), base - THREADS, "no open file leaked");
}

/// Open-file memory is type-stable: a file closed in one table is reused at once by the
/// same thread's next open, here in another process's table. Lookups racing with that
/// must never return the reused file: process A only ever holds `/a`, so every `fstat`
/// of one of its descriptors that succeeds must show `/a`'s inode, while the churning
/// threads move their blocks between A's descriptors and B's `/b`.
#[test]
fn a_lookup_never_returns_a_file_that_reused_the_block_in_another_table() {
    let (v, a) = setup(0);
    let b = Process::new(&v, Credentials::root());
    a.write_file("/a", b"a").unwrap();
    a.write_file("/b", b"b").unwrap();
    let ino_a = a.stat("/a").unwrap().ino;
    let churners = THREADS / 2;
    let done = AtomicUsize::new(0);
    let hits = AtomicUsize::new(0);
    let start = Barrier::new(THREADS);
    // Churn for at least ROUNDS * 4 rounds, and on until the lookups found files a few
    // times (or 10 s passed): with the other tests running beside this one, a reader may
    // get the CPU only after a short churn is over.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let churn_on = |round: usize| {
        round < ROUNDS * 4
            || (hits.load(Ordering::Relaxed) < 100 && std::time::Instant::now() < deadline)
    };
    std::thread::scope(|s| {
        for _ in 0..churners {
            let (a, b, done, start, churn_on) = (&a, &b, &done, &start, &churn_on);
            s.spawn(move || {
                start.wait();
                let mut round = 0;
                while churn_on(round) {
                    round += 1;
                    let fd = a.open("/a", libc::O_RDONLY, 0).unwrap();
                    a.close(fd).unwrap();
                    let fd = b.open("/b", libc::O_RDONLY, 0).unwrap();
                    b.close(fd).unwrap();
                }
                done.fetch_add(1, Ordering::SeqCst);
            });
        }
        for _ in 0..THREADS - churners {
            let (a, done, hits, start) = (&a, &done, &hits, &start);
            s.spawn(move || {
                start.wait();
                while done.load(Ordering::SeqCst) < churners {
                    for fd in 0..churners as i32 {
                        match a.fstat(fd) {
                            Ok(st) => {
                                assert_eq!(st.ino, ino_a, "fd {fd} of A returned B's file");
                                hits.fetch_add(1, Ordering::Relaxed);
                            }
                            Err(e) => assert_eq!(e, Errno::EBADF),
                        }
                    }
                }
            });
        }
    });
    // Under Miri's scheduler the few rounds may all slip between the lookups.
    if !cfg!(miri) {
        assert!(
            hits.load(Ordering::Relaxed) > 0,
            "the lookups never found a file"
        );
    }
}
