//! Unit tests of the descriptor table: layout, sequential semantics (lowest free,
//! `EMFILE` at the limit, close-on-exec, the "full" hints), and `O_ANYFD`.

use super::chunk::{locate, Chunk, GROUP};
use super::{FdTable, O_ANYFD};
use crate::{Credentials, Process, Vfs};
use scalevfs_vfs::{Errno, FcntlArg};
use std::sync::Arc;

#[test]
fn neighbouring_descriptors_have_lines_of_their_own() {
    for k in [0, 1, 3] {
        let c = Chunk::new(k);
        let addr = |i: usize| c.slot(i) as *const _ as usize;
        // Every slot is used exactly once.
        let mut all: Vec<usize> = (0..c.len()).map(addr).collect();
        all.sort_unstable();
        all.dedup();
        assert_eq!(all.len(), c.len());
        for i in 0..7 {
            assert_ne!(
                addr(i) / 64,
                addr(i + 1) / 64,
                "chunk {k}: fds {i}, {}",
                i + 1
            );
        }
    }
}

#[test]
fn locate_covers_chunks() {
    assert_eq!(locate(0), (0, 0));
    assert_eq!(locate(63), (0, 63));
    assert_eq!(locate(64), (1, 0));
    assert_eq!(locate(191), (1, 127));
    assert_eq!(locate(192), (2, 0));
    assert_eq!(locate(959), (3, 511));
    assert_eq!(locate(1023), (4, 63));
}

/// `O_ANYFD` takes a descriptor of this CPU's range (64 up), leaves the lowest free
/// descriptor to plain opens, spills when its range is full, and still fills the
/// table to the limit before `EMFILE`. The flag is not kept in the status flags.
#[test]
fn anyfd_uses_a_range_of_its_own_and_fills_the_table() {
    let v = Vfs::new(Default::default());
    let p = Process::new(&v, Credentials::root());
    p.write_file("/f", b"abc").unwrap();
    let any = p.open("/f", libc::O_RDONLY | O_ANYFD, 0).unwrap();
    assert!((64..1024).contains(&any), "{any}");
    let fl = p.fcntl(any, libc::F_GETFL, FcntlArg::None).unwrap();
    assert_eq!(fl & O_ANYFD, 0, "status flags {fl:#x}");
    assert_eq!(p.pread64(any, &mut [0u8; 3], 0), Ok(3));
    assert_eq!(
        p.open("/f", libc::O_RDONLY, 0),
        Ok(0),
        "lowest free for plain opens"
    );
    p.close(any).unwrap();
    p.close(0).unwrap();

    // One range (64..128) below the limit: it fills, then spills to the lowest.
    p.set_fd_limit(130).unwrap();
    let fds: Vec<i32> = (0..130)
        .map(|_| p.open("/f", libc::O_RDONLY | O_ANYFD, 0).unwrap())
        .collect();
    assert_eq!(fds[..66], (64..130).collect::<Vec<_>>()[..]);
    assert_eq!(fds[66..], (0..64).collect::<Vec<_>>()[..]);
    assert_eq!(
        p.open("/f", libc::O_RDONLY | O_ANYFD, 0),
        Err(Errno::EMFILE)
    );
    for fd in fds {
        p.close(fd).unwrap();
    }
}

/// Threads of one process opening with and without `O_ANYFD` at once: every
/// descriptor they get refers to the file they opened and is theirs alone until they
/// close it.
#[test]
fn anyfd_and_lowest_fd_opens_together() {
    let v = Vfs::new(Default::default());
    let p = Process::new(&v, Credentials::root());
    // Fewer threads and rounds under Miri, which interprets an open in about 60 ms.
    let (threads, rounds) = if cfg!(miri) { (2, 2) } else { (8, 500) };
    for t in 0..threads {
        p.write_file(format!("/f{t}"), format!("file{t}").as_bytes())
            .unwrap();
    }
    std::thread::scope(|s| {
        for t in 0..threads {
            let p = &p;
            s.spawn(move || {
                let flags = libc::O_RDONLY | if t % 2 == 0 { O_ANYFD } else { 0 };
                for _ in 0..rounds {
                    let fds: Vec<i32> = (0..4)
                        .map(|_| p.open(format!("/f{t}"), flags, 0).unwrap())
                        .collect();
                    for &fd in &fds {
                        let mut buf = [0u8; 8];
                        let n = p.pread64(fd, &mut buf, 0).unwrap();
                        assert_eq!(&buf[..n], format!("file{t}").as_bytes(), "fd {fd}");
                    }
                    for fd in fds {
                        p.close(fd).unwrap();
                    }
                }
            });
        }
    });
    assert_eq!(p.open("/f0", libc::O_RDONLY, 0), Ok(0), "nothing left open");
}

fn process_with_file() -> (Arc<Vfs>, Process) {
    let v = Vfs::new(Default::default());
    let p = Process::new(&v, Credentials::root());
    p.write_file("/f", b"abc").unwrap();
    (v, p)
}

fn open(p: &Process) -> i32 {
    p.open("/f", libc::O_RDONLY, 0).unwrap()
}

/// A stand-in file pointer for the chunk-level tests, which never dereference slots.
fn fake_file() -> *mut scalevfs_vfs::erc::ErcInner<scalevfs_vfs::OpenFile> {
    std::ptr::dangling_mut()
}

/// Sequentially, every allocation gets the lowest free descriptor, across groups and
/// chunks (0..64 is chunk 0, 64..192 chunk 1, ...), with closes anywhere in between.
#[test]
fn sequential_allocation_is_lowest_free() {
    let (_v, p) = process_with_file();
    let n = if cfg!(miri) { 130 } else { 700 };
    for fd in 0..n {
        assert_eq!(open(&p), fd);
    }
    // Holes in full groups of several chunks, closed out of order.
    let holes = [n - 1, 3, 100, 64, 63, 200.min(n - 2), 0];
    for &fd in &holes {
        p.close(fd).unwrap();
    }
    let mut sorted = holes.to_vec();
    sorted.sort_unstable();
    for fd in sorted {
        assert_eq!(open(&p), fd);
    }
    assert_eq!(open(&p), n);
    // F_DUPFD: the lowest free at or above its argument.
    p.close(10).unwrap();
    p.close(100).unwrap();
    assert_eq!(p.fcntl(0, libc::F_DUPFD, FcntlArg::Int(11)), Ok(100));
    assert_eq!(p.fcntl(0, libc::F_DUPFD, FcntlArg::Int(5)), Ok(10));
}

/// `EMFILE` comes exactly at the limit, also for a limit inside a group, and a close
/// makes room again; dup2 at or above the limit is `EBADF`.
#[test]
fn emfile_exactly_at_the_limit() {
    for limit in [1u32, 63, 64, 65, 100, 192] {
        let (_v, p) = process_with_file();
        p.set_fd_limit(limit).unwrap();
        assert_eq!(open(&p), 0);
        // The rest filled by dup, which allocates as open does at a third of the cost
        // under Miri (no path walk), where this test was the slowest of the fdtable's.
        for fd in 1..limit as i32 {
            assert_eq!(p.dup(0), Ok(fd), "limit {limit}");
        }
        assert_eq!(p.open("/f", libc::O_RDONLY, 0), Err(Errno::EMFILE));
        assert_eq!(p.dup(0), Err(Errno::EMFILE));
        assert_eq!(p.dup2(0, limit as i32), Err(Errno::EBADF));
        p.close(limit as i32 / 2).unwrap();
        assert_eq!(open(&p), limit as i32 / 2);
        assert_eq!(p.open("/f", libc::O_RDONLY, 0), Err(Errno::EMFILE));
    }
}

/// The close-on-exec flag lives with the descriptor: set by `O_CLOEXEC`, `F_SETFD`,
/// `dup3`; cleared by `dup`, `dup2`, close; `F_SETFD` of a closed descriptor is `EBADF`.
#[test]
fn cloexec_lives_in_the_slot() {
    let (_v, p) = process_with_file();
    let getfd = |fd| p.fcntl(fd, libc::F_GETFD, FcntlArg::None);
    let a = p.open("/f", libc::O_RDONLY | libc::O_CLOEXEC, 0).unwrap();
    assert_eq!(getfd(a), Ok(libc::FD_CLOEXEC));
    let b = p.dup(a).unwrap();
    assert_eq!(getfd(b), Ok(0));
    p.fcntl(b, libc::F_SETFD, FcntlArg::Int(libc::FD_CLOEXEC as i64))
        .unwrap();
    assert_eq!(getfd(b), Ok(libc::FD_CLOEXEC));
    assert_eq!(p.dup2(a, b), Ok(b));
    assert_eq!(getfd(b), Ok(0), "dup2 clears it");
    assert_eq!(p.dup3(a, 9, libc::O_CLOEXEC), Ok(9));
    assert_eq!(getfd(9), Ok(libc::FD_CLOEXEC));
    assert_eq!(p.pread64(9, &mut [0u8; 3], 0), Ok(3));
    p.close(a).unwrap();
    assert_eq!(getfd(a), Err(Errno::EBADF));
    assert_eq!(
        p.fcntl(a, libc::F_SETFD, FcntlArg::Int(libc::FD_CLOEXEC as i64)),
        Err(Errno::EBADF)
    );
    assert_eq!(open(&p), a);
    assert_eq!(
        getfd(a),
        Ok(0),
        "a reused descriptor starts without the flag"
    );
}

/// The hint protocol on one chunk: a group is marked full only when every slot is in
/// use, a close of any slot clears the mark, and a mark attempt that a close overtakes
/// (the version moved on) leaves the group open.
#[test]
fn full_hint_follows_the_slots() {
    let c = Chunk::new(1);
    let fill = |g: usize| {
        for j in 0..GROUP {
            c.slot(g * GROUP + j)
                .store(fake_file(), std::sync::atomic::Ordering::Relaxed);
        }
    };
    fill(0);
    assert!(!c.group_full(0), "only allocation marks");
    c.maybe_mark_full(0, 10);
    assert!(!c.group_full(0), "claims low in a group do not look");
    c.maybe_mark_full(0, GROUP - 1);
    assert!(c.group_full(0));
    assert!(!c.group_full(1));
    c.slot(40)
        .store(std::ptr::null_mut(), std::sync::atomic::Ordering::SeqCst);
    c.note_freed(0);
    assert!(!c.group_full(0));
    // A claim high in the group with a free slot above it: not full.
    c.slot(40)
        .store(fake_file(), std::sync::atomic::Ordering::Relaxed);
    c.slot(GROUP - 1)
        .store(std::ptr::null_mut(), std::sync::atomic::Ordering::Relaxed);
    c.maybe_mark_full(0, 40);
    assert!(!c.group_full(0));
    fill(1);
    c.maybe_mark_full(1, 40);
    assert!(
        c.group_full(1),
        "a claim at 40 that finds the rest in use marks it"
    );
    c.note_freed(0);
    assert!(c.group_full(1), "a close clears only its own group");
}

/// The whole-table operations see exactly the open descriptors: `close_range`,
/// `CLOSE_RANGE_CLOEXEC`, fork's copy (flags included), and exec's close-on-exec pass.
#[test]
fn fork_exec_and_close_range_see_the_open_descriptors() {
    let (_v, mut p) = process_with_file();
    for _ in 0..70 {
        open(&p);
    }
    for fd in (0..70).step_by(3) {
        p.close(fd).unwrap();
    }
    p.fcntl(1, libc::F_SETFD, FcntlArg::Int(libc::FD_CLOEXEC as i64))
        .unwrap();
    assert_eq!(p.dup3(1, 66, libc::O_CLOEXEC), Ok(66));
    p.close_range(60, 65, libc::CLOSE_RANGE_CLOEXEC).unwrap();
    let child = p.fork();
    let open_fds = |p: &Process| -> Vec<i32> {
        (0..80)
            .filter(|&fd| p.fcntl(fd, libc::F_GETFD, FcntlArg::None).is_ok())
            .collect()
    };
    assert_eq!(open_fds(&child), open_fds(&p));
    for fd in open_fds(&p) {
        assert_eq!(
            child.fcntl(fd, libc::F_GETFD, FcntlArg::None),
            p.fcntl(fd, libc::F_GETFD, FcntlArg::None),
            "fd {fd}"
        );
    }
    p.exec_foreign_image();
    let kept: Vec<i32> = (0..60)
        .filter(|fd| fd % 3 != 0 && *fd != 1)
        .chain([67, 68])
        .collect();
    assert_eq!(open_fds(&p), kept);
    p.close_range(0, u32::MAX, 0).unwrap();
    assert_eq!(open_fds(&p), Vec::<i32>::new());
    assert_eq!(open(&p), 0);
    // The child still has its copies.
    assert_eq!(child.pread64(66, &mut [0u8; 3], 0), Ok(3));
}

/// The table by itself: a default table is empty, and dropping one with files in it
/// releases them (checked by the stress tests' inode counts too).
#[test]
fn empty_table_has_nothing_open() {
    let t = FdTable::default();
    assert_eq!(t.open_in(0, u32::MAX), Vec::<i32>::new());
    assert_eq!(t.get(0).err(), Some(Errno::EBADF));
    assert_eq!(t.close(5).err(), Some(Errno::EBADF));
    assert_eq!(t.set_cloexec(-1, true), Err(Errno::EBADF));
    assert!(t.snapshot().is_empty());
}
