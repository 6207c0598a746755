//! Which of the VFS's classed locks (`scalevfs_vfs::lockclass`) each system-call family
//! takes, counted with lockstat, in the scalable and the legacy design. Its own test
//! binary, so that no other test's locking is counted (lockstat is process-wide).
//!
//! These are the counts `scalevfs bench --lockstat` reports; a change that makes a path
//! take a lock it did not take before shows up here first.

use libc::{EPOLLIN, EPOLL_CTL_ADD, EPOLL_CTL_DEL, F_SETLK, F_UNLCK, F_WRLCK, O_CREAT, SEEK_SET};
use scalevfs::{Credentials, EpollEvent, FcntlArg, Flock, Locking, Process, Vfs, VfsOptions};
use scalevfs_primitives::lockstat::{self, LockClass};
use scalevfs_vfs::lockclass::*;
use std::sync::Mutex;

/// Lockstat is global: the tests of this binary take turns, each for its whole run (its
/// setup and teardown take classed locks too, which must not land in another's counts).
static TURN: Mutex<()> = Mutex::new(());

fn my_turn() -> std::sync::MutexGuard<'static, ()> {
    TURN.lock().unwrap_or_else(|e| e.into_inner())
}

const CLASSES: [&LockClass; 12] = [
    &FLC_LOCK,
    &FILE_LOCK_LOCK,
    &BLOCKED_LOCK_LOCK,
    &EP_MTX,
    &EP_LOCK,
    &EP_SCAN,
    &EPNESTED_MUTEX,
    &EPMUTEX,
    &DENTRY_HASH_BUCKET,
    &INODE_HASH_BUCKET,
    &DENTRY_LRU,
    &NAME_LOCK,
];

/// Acquisitions per class while `f` runs (classes with none are left out).
fn footprint(f: impl FnOnce()) -> Vec<(&'static str, u64)> {
    lockstat::reset();
    lockstat::enable();
    f();
    lockstat::disable();
    CLASSES
        .iter()
        .map(|c| {
            let s = c.stats();
            (c.name(), s.read.acquisitions + s.write.acquisitions)
        })
        .filter(|&(_, n)| n > 0)
        .collect()
}

fn count(v: &[(&str, u64)], class: &LockClass) -> u64 {
    v.iter()
        .find(|(n, _)| *n == class.name())
        .map_or(0, |&(_, n)| n)
}

fn setup(locking: Locking) -> Process {
    let vfs = Vfs::new(VfsOptions {
        locking,
        ..Default::default()
    });
    let p = Process::new(&vfs, Credentials::root());
    p.mkdir("/d", 0o755).unwrap();
    let fd = p.open("/d/f", O_CREAT | libc::O_RDWR, 0o644).unwrap();
    p.write(fd, b"data").unwrap();
    p.close(fd).unwrap();
    p
}

fn lock(p: &Process, fd: i32, ty: i32) {
    let mut fl = Flock {
        l_type: ty as i16,
        l_whence: SEEK_SET as i16,
        l_start: 0,
        l_len: 1,
        l_pid: 0,
    };
    p.fcntl(fd, F_SETLK, FcntlArg::Flock(&mut fl)).unwrap();
}

#[test]
fn opening_and_reading_a_cached_file_takes_no_classed_lock() {
    let _turn = my_turn();
    let p = setup(Locking::Scalable);
    let read = || {
        let fd = p.open("/d/f", libc::O_RDONLY, 0).unwrap();
        p.read(fd, &mut [0; 4]).unwrap();
        p.close(fd).unwrap();
    };
    read(); // the dentries are cached from here on
    let s = footprint(|| (0..10).for_each(|_| read()));
    assert_eq!(s, vec![], "the path walk, open and close are lock-free");
}

/// Ten write locks and unlocks of one byte, after a first one has made the context.
fn lock_footprint(locking: Locking) -> Vec<(&'static str, u64)> {
    let p = setup(locking);
    let fd = p.open("/d/f", libc::O_RDWR, 0).unwrap();
    lock(&p, fd, F_WRLCK); // makes the inode's lock context
    lock(&p, fd, F_UNLCK);
    footprint(|| {
        for _ in 0..10 {
            lock(&p, fd, F_WRLCK);
            lock(&p, fd, F_UNLCK);
        }
    })
}

#[test]
fn a_file_lock_takes_its_inode_context_lock_only() {
    let _turn = my_turn();
    let s = lock_footprint(Locking::Scalable);
    assert_eq!(count(&s, &FLC_LOCK), 20, "one per request: {s:?}");
    assert_eq!(
        s.len(),
        1,
        "and nothing else (no waiter, no global lock): {s:?}"
    );
    let l = lock_footprint(Locking::Legacy);
    assert_eq!(count(&l, &FILE_LOCK_LOCK), 20, "the global lock: {l:?}");
    assert_eq!(count(&l, &FLC_LOCK), 20, "{l:?}");
}

#[test]
fn epoll_ctl_takes_one_item_shard_and_no_global_lock() {
    let _turn = my_turn();
    for locking in [Locking::Scalable, Locking::Legacy] {
        let p = setup(locking);
        let ep = p.epoll_create1(0).unwrap();
        let efd = p.eventfd(0, 0).unwrap();
        let ev = EpollEvent::new(EPOLLIN as u32, 7);
        let s = footprint(|| {
            for _ in 0..10 {
                p.epoll_ctl(ep, EPOLL_CTL_ADD, efd, Some(&ev)).unwrap();
                p.epoll_ctl(ep, EPOLL_CTL_DEL, efd, None).unwrap();
            }
        });
        assert_eq!(count(&s, &EP_MTX), 20, "{locking:?}: {s:?}");
        // Neither design takes a global epoll lock to add or remove an item.
        assert_eq!(count(&s, &EPMUTEX), 0, "{locking:?}: {s:?}");
        assert_eq!(count(&s, &EPNESTED_MUTEX), 0, "{locking:?}: {s:?}");
    }
}

#[test]
fn creating_and_unlinking_in_a_shared_directory_takes_name_locks_in_the_scalable_design() {
    let _turn = my_turn();
    for locking in [Locking::Scalable, Locking::Legacy] {
        let p = setup(locking);
        let s = footprint(|| {
            for i in 0..10 {
                let name = format!("/d/n{i}");
                let fd = p
                    .open(name.as_str(), O_CREAT | libc::O_EXCL, 0o644)
                    .unwrap();
                p.close(fd).unwrap();
                p.unlink(name.as_str()).unwrap();
            }
        });
        let names = count(&s, &NAME_LOCK);
        match locking {
            // One name lock for the lookup that misses, one each for create and unlink.
            Locking::Scalable => assert!(names >= 20, "{s:?}"),
            // The legacy design holds the directory exclusively instead.
            Locking::Legacy => assert_eq!(names, 0, "{s:?}"),
        }
        // Every new inode goes into the inode hash and comes out again.
        assert!(count(&s, &INODE_HASH_BUCKET) >= 20, "{locking:?}: {s:?}");
    }
}
