//! The scripts: ranges, conflicts, deadlocks, release on close, flock, errors, blocking and EINTR.

use super::*;

#[test]
fn split_merge_and_ranges() {
    let mut s = vec![
        Do(0, Op::Open(0, O_RDWR)),
        Do(1, Op::Open(0, O_RDWR)),
        Do(0, set(0, F_WRLCK, 0, 100)),
    ];
    s.extend(probes(1));
    // Split: unlock the middle, then downgrade part of it.
    s.push(Do(0, set(0, F_UNLCK, 40, 20)));
    s.extend(probes(1));
    s.push(Do(0, set(0, F_RDLCK, 45, 10)));
    s.push(Do(0, set(0, F_RDLCK, 0, 10)));
    s.extend(probes(1));
    // Merge: adjacent same-type locks become one; an overlapping upgrade swallows them.
    s.push(Do(0, set(0, F_RDLCK, 55, 5)));
    s.push(Do(0, set(0, F_RDLCK, 40, 5)));
    s.extend(probes(1));
    s.push(Do(0, set(0, F_WRLCK, 5, 200)));
    s.extend(probes(1));
    // SEEK_CUR, negative lengths, SEEK_END, to-EOF.
    s.extend([
        Do(0, set(0, F_UNLCK, 0, 0)),
        Do(0, Op::Seek(0, 50)),
        Do(0, Op::Fcntl(0, F_SETLK, Fl(F_WRLCK, SEEK_CUR, -10, -5, 0))),
        Do(0, Op::Truncate(0, 240)),
        Do(0, Op::Fcntl(0, F_SETLK, Fl(F_RDLCK, SEEK_END, -100, 0, 0))),
        Do(0, Op::Fcntl(0, F_SETLK, Fl(F_RDLCK, SEEK_END, 10, -5, 0))),
        Do(1, Op::Seek(0, 100)),
        Do(1, Op::Fcntl(0, F_GETLK, Fl(F_WRLCK, SEEK_CUR, -65, 1, 0))),
        Do(1, Op::Fcntl(0, F_GETLK, Fl(F_WRLCK, SEEK_END, -1, 0, 0))),
    ]);
    s.extend(probes(1));
    check(2, &s);
}

#[test]
fn every_conflict_type() {
    let mut s = vec![
        Do(0, Op::Open(0, O_RDWR)),
        Do(0, Op::Open(1, O_RDWR)),
        Do(1, Op::Open(0, O_RDWR)),
        Do(1, Op::Open(1, O_RDWR)),
    ];
    for (a, b) in [
        (F_RDLCK, F_RDLCK),
        (F_RDLCK, F_WRLCK),
        (F_WRLCK, F_RDLCK),
        (F_WRLCK, F_WRLCK),
    ] {
        // POSIX vs POSIX, different processes.
        s.push(Do(0, set(0, a, 0, 10)));
        s.push(Do(1, set(0, b, 5, 10)));
        s.push(Do(1, get(0, b, 0, 0)));
        s.push(Do(0, set(0, F_UNLCK, 0, 0)));
        s.push(Do(1, set(0, F_UNLCK, 0, 0)));
        // POSIX vs POSIX, same process, two fds: never conflicts (upgrade/downgrade).
        s.push(Do(0, set(0, a, 0, 10)));
        s.push(Do(0, set(1, b, 5, 10)));
        s.push(Do(1, get(0, F_WRLCK, 0, 0)));
        s.push(Do(0, set(0, F_UNLCK, 0, 0)));
        // OFD vs OFD in one process (two open file descriptions).
        s.push(Do(0, ofd(0, a, 0, 10)));
        s.push(Do(0, ofd(1, b, 5, 10)));
        s.push(Do(0, ofd_get(1, b, 0, 0)));
        s.push(Do(0, ofd(0, F_UNLCK, 0, 0)));
        // OFD vs POSIX, both ways.
        s.push(Do(0, ofd(0, a, 0, 10)));
        s.push(Do(0, set(1, b, 5, 10)));
        s.push(Do(1, set(0, b, 5, 10)));
        s.push(Do(1, get(0, b, 0, 0)));
        s.push(Do(0, ofd(0, F_UNLCK, 0, 0)));
        s.push(Do(1, set(0, a, 0, 10)));
        s.push(Do(0, ofd(0, b, 5, 10)));
        s.push(Do(0, ofd_get(0, b, 0, 0)));
        s.push(Do(1, set(0, F_UNLCK, 0, 0)));
        // Same OFD: upgrade/downgrade in place.
        s.push(Do(0, ofd(0, a, 0, 10)));
        s.push(Do(0, ofd(0, b, 5, 10)));
        s.push(Do(0, ofd_get(1, F_WRLCK, 0, 0)));
        s.push(Do(0, ofd(0, F_UNLCK, 0, 0)));
    }
    check(2, &s);
}

#[test]
fn deadlock_cycles_of_two_and_three() {
    let mut s: Vec<Step> = (0..3).map(|i| Do(i, Op::Open(0, O_RDWR))).collect();
    let w = |s: usize, start: i64| Op::Fcntl(s, F_SETLKW, lk(F_WRLCK, start, 1));
    // Two owners.
    s.extend([
        Do(0, set(0, F_WRLCK, 0, 1)),
        Do(1, set(0, F_WRLCK, 1, 1)),
        Start(0, w(0, 1)),
        Do(1, w(0, 0)),
        Do(1, set(0, F_UNLCK, 1, 1)),
        Finish(0),
        Do(2, get(0, F_WRLCK, 0, 0)),
        Do(2, get(0, F_WRLCK, 1, 0)),
        Do(0, set(0, F_UNLCK, 0, 0)),
    ]);
    // Three owners.
    s.extend([
        Do(0, set(0, F_WRLCK, 0, 1)),
        Do(1, set(0, F_WRLCK, 1, 1)),
        Do(2, set(0, F_WRLCK, 2, 1)),
        Start(0, w(0, 1)),
        Start(1, w(0, 2)),
        Do(2, w(0, 0)),
        // Break the cycle: 2 lets go, 1 then gets 2 and 0 gets 1 once 1 lets go.
        Do(2, set(0, F_UNLCK, 2, 1)),
        Finish(1),
        Do(1, set(0, F_UNLCK, 1, 2)),
        Finish(0),
        Do(2, get(0, F_WRLCK, 0, 0)),
        Do(2, get(0, F_WRLCK, 1, 0)),
    ]);
    check(3, &s);
}

/// Linux checks a POSIX request for deadlock also through an OFD waiter that waits on a
/// POSIX lock (such a waiter is in `blocked_hash`, keyed by its open file): here owner 1's
/// POSIX request, blocked by owner 0's OFD lock whose description waits on owner 1, fails
/// with `EDEADLK`.
#[test]
fn deadlock_through_an_ofd_waiter() {
    let w = |s: usize, start: i64| Op::Fcntl(s, F_SETLKW, lk(F_WRLCK, start, 1));
    let s = vec![
        Do(0, Op::Open(1, O_RDWR)),
        Do(1, Op::Open(0, O_RDWR)),
        Do(0, ofd(1, F_WRLCK, 10, 1)),
        Do(1, set(0, F_WRLCK, 11, 1)),
        Start(0, Op::Fcntl(1, F_OFD_SETLKW, lk(F_WRLCK, 11, 1))),
        Start(1, w(0, 10)),
        Interrupt(1),
        Finish(1),
        Do(1, set(0, F_UNLCK, 11, 1)),
        Finish(0),
    ];
    check(2, &s);
}

#[test]
fn close_releases_posix_locks_of_the_inode() {
    let s = vec![
        Do(0, Op::Open(0, O_RDWR)),
        Do(0, Op::Open(1, O_RDONLY)),
        Do(0, Op::Open(2, O_RDWR)),
        Do(0, Op::Open(3, O_RDWR)),
        Do(1, Op::Open(0, O_RDWR)),
        Do(0, set(0, F_WRLCK, 0, 10)),
        Do(0, ofd(2, F_WRLCK, 20, 10)),
        Do(0, Op::Flock(3, LOCK_EX)),
        Do(1, get(0, F_RDLCK, 0, 0)),
        Do(1, get(0, F_RDLCK, 20, 0)),
        Do(1, Op::Flock(0, LOCK_SH | LOCK_NB)),
        // Closing a different, read-only fd of the same inode drops the POSIX lock...
        Do(0, Op::Close(1)),
        Do(1, get(0, F_RDLCK, 0, 0)),
        // ... but not the OFD lock or the flock lock of the other descriptions.
        Do(1, get(0, F_RDLCK, 20, 0)),
        Do(1, Op::Flock(0, LOCK_SH | LOCK_NB)),
        // Their own last close does.
        Do(0, Op::Close(2)),
        Do(1, get(0, F_RDLCK, 0, 0)),
        Do(0, Op::Close(3)),
        Do(1, Op::Flock(0, LOCK_SH | LOCK_NB)),
        Do(1, set(0, F_WRLCK, 0, 0)),
    ];
    check(2, &s);
}

#[test]
fn flock_conversion_and_independence() {
    let s = vec![
        Do(0, Op::Open(0, O_RDONLY)),
        Do(1, Op::Open(0, O_RDWR)),
        Do(0, Op::Flock(0, LOCK_EX)),
        Do(1, Op::Flock(0, LOCK_SH | LOCK_NB)),
        Do(1, Op::Flock(0, LOCK_EX | LOCK_NB)),
        // Downgrade, share, and a failed upgrade.
        Do(0, Op::Flock(0, LOCK_SH)),
        Do(1, Op::Flock(0, LOCK_SH | LOCK_NB)),
        Do(0, Op::Flock(0, LOCK_EX | LOCK_NB)),
        Do(1, Op::Flock(0, LOCK_UN)),
        Do(0, Op::Flock(0, LOCK_EX | LOCK_NB)),
        // flock and POSIX locks are independent.
        Do(1, set(0, F_WRLCK, 0, 0)),
        Do(1, Op::Flock(0, LOCK_SH | LOCK_NB)),
        // A blocked flock waits for the unlock.
        Start(1, Op::Flock(0, LOCK_SH)),
        Do(0, Op::Flock(0, LOCK_UN)),
        Finish(1),
        Do(0, Op::Flock(0, LOCK_EX | LOCK_NB)),
        // Unlocking nothing succeeds; bad operations.
        Do(0, Op::Flock(0, LOCK_UN)),
        Do(0, Op::Flock(0, LOCK_UN)),
        Do(0, Op::Flock(0, 0)),
        Do(0, Op::Flock(0, LOCK_SH | LOCK_EX)),
    ];
    check(2, &s);
}

#[test]
fn errors_ebadf_einval_eoverflow_eagain() {
    let s = vec![
        Do(0, Op::Open(0, O_RDONLY)),
        Do(0, Op::Open(1, O_WRONLY)),
        Do(0, Op::Open(2, O_RDWR)),
        Do(1, Op::Open(0, O_RDWR)),
        // EBADF: lock type not allowed by the access mode (set only; F_GETLK is fine).
        Do(0, set(0, F_WRLCK, 0, 1)),
        Do(0, set(1, F_RDLCK, 0, 1)),
        Do(0, ofd(0, F_WRLCK, 0, 1)),
        Do(0, ofd(1, F_RDLCK, 0, 1)),
        Do(0, get(0, F_WRLCK, 0, 1)),
        Do(0, set(0, F_UNLCK, 0, 1)),
        // EINVAL: bad l_whence, bad l_type, OFD with l_pid, range before 0.
        Do(0, Op::Fcntl(2, F_SETLK, Fl(F_WRLCK, 7, 0, 1, 0))),
        Do(0, Op::Fcntl(2, F_SETLK, Fl(9, SEEK_SET, 0, 1, 0))),
        Do(0, Op::Fcntl(2, F_GETLK, Fl(F_UNLCK, SEEK_SET, 0, 1, 0))),
        Do(0, Op::Fcntl(2, F_OFD_SETLK, Fl(F_WRLCK, SEEK_SET, 0, 1, 5))),
        Do(0, Op::Fcntl(2, F_OFD_GETLK, Fl(F_WRLCK, SEEK_SET, 0, 1, 5))),
        Do(0, set(2, F_WRLCK, -1, 1)),
        Do(0, set(2, F_WRLCK, 5, -6)),
        // EOVERFLOW: past the largest offset.
        Do(0, set(2, F_WRLCK, i64::MAX, 2)),
        Do(
            0,
            Op::Fcntl(2, F_SETLK, Fl(F_WRLCK, SEEK_END, i64::MAX, 1, 0)),
        ),
        // A POSIX l_pid is ignored.
        Do(0, Op::Fcntl(2, F_SETLK, Fl(F_WRLCK, SEEK_SET, 0, 1, 12345))),
        // EAGAIN.
        Do(1, set(0, F_RDLCK, 0, 1)),
        Do(1, ofd(0, F_RDLCK, 0, 1)),
        Do(1, set(0, F_RDLCK, 1, 1)),
        // Unlocking what one does not hold succeeds.
        Do(1, set(0, F_UNLCK, 0, 0)),
        Do(1, ofd(0, F_UNLCK, 0, 0)),
    ];
    check(2, &s);
}

#[test]
fn blocking_waits_and_eintr() {
    let s = vec![
        Do(0, Op::Open(0, O_RDWR)),
        Do(1, Op::Open(0, O_RDWR)),
        Do(1, Op::Open(1, O_RDWR)),
        Do(0, set(0, F_WRLCK, 0, 10)),
        // A waiting POSIX request is granted when the lock goes.
        Start(1, Op::Fcntl(0, F_SETLKW, lk(F_WRLCK, 5, 10))),
        Do(0, set(0, F_UNLCK, 0, 0)),
        Finish(1),
        Do(0, get(0, F_RDLCK, 0, 0)),
        // EINTR for F_SETLKW, F_OFD_SETLKW and flock; the holder keeps its lock.
        Start(0, Op::Fcntl(0, F_SETLKW, lk(F_RDLCK, 0, 0))),
        Interrupt(0),
        Finish(0),
        Start(0, Op::Fcntl(0, F_OFD_SETLKW, lk(F_WRLCK, 7, 1))),
        Interrupt(0),
        Finish(0),
        Do(0, get(0, F_RDLCK, 0, 0)),
        Do(1, Op::Flock(1, LOCK_EX)),
        Start(0, Op::Flock(0, LOCK_SH)),
        Interrupt(0),
        Finish(0),
        Do(0, Op::Flock(0, LOCK_SH | LOCK_NB)),
        // A downgrade lets a waiting reader in.
        Start(0, Op::Fcntl(0, F_SETLKW, lk(F_RDLCK, 5, 1))),
        Do(1, set(0, F_RDLCK, 0, 20)),
        Finish(0),
        Do(1, get(1, F_WRLCK, 0, 0)),
    ];
    check(2, &s);
}
