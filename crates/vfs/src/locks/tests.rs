//! Unit tests: every conflict type, the range algebra, errors, deadlock cycles,
//! cancellation, release rules and the listing format; each runs on both designs.

use super::*;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread;
use std::time::{Duration, Instant};

const MODES: [Locking; 2] = [Locking::Scalable, Locking::Legacy];
const W: LockType = LockType::Write;
const R: LockType = LockType::Read;
const U: LockType = LockType::Unlock;

fn p(n: u64) -> LockOwner {
    LockOwner::Process(n)
}
fn f(n: u64) -> LockOwner {
    LockOwner::File(n)
}

fn rq(owner: LockOwner, ty: LockType, start: i64, end: i64) -> LockRequest {
    let pid = match owner {
        LockOwner::Process(n) => n as i32,
        LockOwner::File(_) => 0,
    };
    LockRequest {
        owner,
        pid,
        ty,
        start,
        end,
    }
}

fn setup(mode: Locking) -> (LockManager, FileLockContext) {
    let m = LockManager::new(mode);
    let c = m.new_context(0x2a, 5678);
    (m, c)
}

/// Held POSIX/OFD locks as (owner, type, start, end), in list order.
fn held(m: &LockManager) -> Vec<(LockOwner, LockType, i64, i64)> {
    m.list()
        .into_iter()
        .filter(|l| !l.waiting && l.info.class != LockClass::Flock)
        .map(|l| (l.info.owner, l.info.ty, l.info.start, l.info.end))
        .collect()
}

fn flocks(m: &LockManager) -> Vec<(LockOwner, LockType)> {
    m.list()
        .into_iter()
        .filter(|l| !l.waiting && l.info.class == LockClass::Flock)
        .map(|l| (l.info.owner, l.info.ty))
        .collect()
}

fn waiting(m: &LockManager) -> usize {
    m.list().iter().filter(|l| l.waiting).count()
}

/// Polls `cond` (test-only: waits for another thread to block) for up to 60 s.
fn eventually(mut cond: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !cond() {
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "condition never held"
        );
        thread::sleep(Duration::from_millis(1));
    }
}

/// Lets the threads a test left blocked go when a check in the test's own thread fails:
/// made inside `thread::scope`, so it drops before the scope joins them. While a panic
/// unwinds it cancels `tokens` and frees every held lock of `ctxs` until no request waits
/// (10 s at most): the waiters return, the scope joins them and the failure is reported,
/// instead of the scope waiting for them forever. Does nothing when not panicking.
pub(super) struct UnblockOnPanic<'a> {
    pub(super) m: &'a LockManager,
    pub(super) ctxs: Vec<&'a FileLockContext>,
    pub(super) tokens: Vec<&'a CancelToken>,
}

impl Drop for UnblockOnPanic<'_> {
    fn drop(&mut self) {
        if !thread::panicking() {
            return;
        }
        for t in &self.tokens {
            t.cancel();
        }
        let t0 = Instant::now();
        while self.m.list().iter().any(|l| l.waiting) && t0.elapsed() < Duration::from_secs(10) {
            for l in self.m.list().into_iter().filter(|l| !l.waiting) {
                for c in &self.ctxs {
                    match l.info.owner {
                        LockOwner::Process(n) => self.m.release_posix(c, n),
                        LockOwner::File(n) => self.m.release_file(c, n),
                    }
                }
            }
            thread::sleep(Duration::from_millis(1));
        }
    }
}

fn set(m: &LockManager, c: &FileLockContext, r: LockRequest) -> Result<(), Errno> {
    m.setlk(c, &r, None)
}

#[test]
fn split_trim_and_unlock() {
    for mode in MODES {
        let (m, c) = setup(mode);
        set(&m, &c, rq(p(1), W, 0, 99)).unwrap();
        set(&m, &c, rq(p(1), U, 40, 59)).unwrap();
        assert_eq!(held(&m), vec![(p(1), W, 0, 39), (p(1), W, 60, 99)]);
        set(&m, &c, rq(p(1), R, 10, 20)).unwrap();
        assert_eq!(
            held(&m),
            vec![
                (p(1), W, 0, 9),
                (p(1), R, 10, 20),
                (p(1), W, 21, 39),
                (p(1), W, 60, 99)
            ]
        );
        // Unlock spanning several locks trims both ends.
        set(&m, &c, rq(p(1), U, 5, 65)).unwrap();
        assert_eq!(held(&m), vec![(p(1), W, 0, 4), (p(1), W, 66, 99)]);
        set(&m, &c, rq(p(1), U, 0, OFFSET_MAX)).unwrap();
        assert!(held(&m).is_empty());
        // Unlocking nothing is fine.
        set(&m, &c, rq(p(1), U, 0, 10)).unwrap();
    }
}

#[test]
fn merge_adjacent_and_overlapping() {
    for mode in MODES {
        let (m, c) = setup(mode);
        set(&m, &c, rq(p(1), W, 0, 9)).unwrap();
        set(&m, &c, rq(p(1), W, 10, 19)).unwrap();
        assert_eq!(held(&m), vec![(p(1), W, 0, 19)]);
        set(&m, &c, rq(p(1), W, 30, 39)).unwrap();
        set(&m, &c, rq(p(1), W, 20, 29)).unwrap();
        assert_eq!(held(&m), vec![(p(1), W, 0, 39)]);
        set(&m, &c, rq(p(1), W, 35, OFFSET_MAX)).unwrap();
        assert_eq!(held(&m), vec![(p(1), W, 0, OFFSET_MAX)]);
        // Adjacent locks of different types stay apart.
        let (m, c) = setup(mode);
        set(&m, &c, rq(p(1), R, 0, 9)).unwrap();
        set(&m, &c, rq(p(1), W, 10, 19)).unwrap();
        assert_eq!(held(&m), vec![(p(1), R, 0, 9), (p(1), W, 10, 19)]);
        // A write that trims a read and touches a write merges with the write.
        set(&m, &c, rq(p(1), W, 5, 9)).unwrap();
        assert_eq!(held(&m), vec![(p(1), R, 0, 4), (p(1), W, 5, 19)]);
    }
}

#[test]
fn upgrade_fails_atomically_then_succeeds() {
    for mode in MODES {
        let (m, c) = setup(mode);
        set(&m, &c, rq(p(1), R, 0, 99)).unwrap();
        set(&m, &c, rq(p(2), R, 50, 50)).unwrap();
        assert_eq!(set(&m, &c, rq(p(1), W, 0, 99)), Err(Errno::EAGAIN));
        assert_eq!(held(&m), vec![(p(1), R, 0, 99), (p(2), R, 50, 50)]);
        set(&m, &c, rq(p(1), W, 0, 10)).unwrap();
        assert_eq!(
            held(&m),
            vec![(p(1), W, 0, 10), (p(1), R, 11, 99), (p(2), R, 50, 50)]
        );
    }
}

#[test]
fn downgrade_wakes_readers_only() {
    for mode in MODES {
        let (m, c) = setup(mode);
        set(&m, &c, rq(p(1), W, 0, 99)).unwrap();
        thread::scope(|s| {
            let _unblock = UnblockOnPanic {
                m: &m,
                ctxs: vec![&c],
                tokens: vec![],
            };
            let reader = s.spawn(|| m.setlk(&c, &rq(p(2), R, 50, 60), Some(&CancelToken::new())));
            let writer = s.spawn(|| m.setlk(&c, &rq(p(3), W, 70, 70), Some(&CancelToken::new())));
            eventually(|| waiting(&m) == 2);
            set(&m, &c, rq(p(1), R, 0, 99)).unwrap();
            assert_eq!(reader.join().unwrap(), Ok(()));
            // The writer still conflicts with the (now read) lock and stays queued.
            assert_eq!(waiting(&m), 1);
            set(&m, &c, rq(p(1), U, 0, OFFSET_MAX)).unwrap();
            assert_eq!(writer.join().unwrap(), Ok(()));
        });
        assert_eq!(held(&m), vec![(p(2), R, 50, 60), (p(3), W, 70, 70)]);
    }
}

#[test]
fn conflict_matrix() {
    for mode in MODES {
        let (m, c) = setup(mode);
        // POSIX/POSIX: readers share, writers exclude, same owner never conflicts.
        set(&m, &c, rq(p(1), R, 0, 9)).unwrap();
        set(&m, &c, rq(p(2), R, 5, 14)).unwrap();
        assert_eq!(set(&m, &c, rq(p(3), W, 9, 9)), Err(Errno::EAGAIN));
        set(&m, &c, rq(p(3), W, 15, 20)).unwrap();
        assert_eq!(set(&m, &c, rq(p(1), R, 20, 20)), Err(Errno::EAGAIN));
        set(&m, &c, rq(p(3), W, 15, 25)).unwrap();
        // OFD vs POSIX, both directions.
        assert_eq!(set(&m, &c, rq(f(7), W, 0, 0)), Err(Errno::EAGAIN));
        set(&m, &c, rq(f(7), R, 0, 0)).unwrap();
        set(&m, &c, rq(f(7), W, 100, 200)).unwrap();
        assert_eq!(set(&m, &c, rq(p(1), R, 150, 150)), Err(Errno::EAGAIN));
        // Two open files (even of one process) conflict with each other.
        assert_eq!(set(&m, &c, rq(f(8), R, 150, 150)), Err(Errno::EAGAIN));
        set(&m, &c, rq(f(7), W, 150, 300)).unwrap();
        assert_eq!(
            held(&m)
                .into_iter()
                .filter(|l| l.0 == f(7))
                .collect::<Vec<_>>(),
            vec![(f(7), R, 0, 0), (f(7), W, 100, 300)]
        );
        // flock is independent of POSIX and OFD locks.
        m.flock(&c, 7, 1, libc::LOCK_EX | libc::LOCK_NB, None)
            .unwrap();
        m.flock(&c, 9, 1, libc::LOCK_SH | libc::LOCK_NB, None)
            .unwrap_err();
        assert_eq!(flocks(&m), vec![(f(7), W)]);
        set(&m, &c, rq(p(4), W, 400, 500)).unwrap();
    }
}

#[test]
fn flock_shared_exclusive_and_conversion() {
    for mode in MODES {
        let (m, c) = setup(mode);
        let nb = libc::LOCK_NB;
        m.flock(&c, 1, 10, libc::LOCK_SH, None).unwrap();
        m.flock(&c, 2, 20, libc::LOCK_SH | nb, None).unwrap();
        assert_eq!(
            m.flock(&c, 3, 30, libc::LOCK_EX | nb, None),
            Err(Errno::EAGAIN)
        );
        // Same type again: no-op.
        m.flock(&c, 1, 10, libc::LOCK_SH | nb, None).unwrap();
        // A failed upgrade loses the old lock, as on Linux.
        assert_eq!(
            m.flock(&c, 1, 10, libc::LOCK_EX | nb, None),
            Err(Errno::EAGAIN)
        );
        assert_eq!(flocks(&m), vec![(f(2), R)]);
        // Blocking upgrade: drops f(2)'s SH, waits for f(1)'s SH to go.
        m.flock(&c, 1, 10, libc::LOCK_SH, None).unwrap();
        thread::scope(|s| {
            let _unblock = UnblockOnPanic {
                m: &m,
                ctxs: vec![&c],
                tokens: vec![],
            };
            let h = s.spawn(|| m.flock(&c, 2, 20, libc::LOCK_EX, None));
            eventually(|| waiting(&m) == 1);
            assert_eq!(flocks(&m), vec![(f(1), R)]);
            m.flock(&c, 1, 10, libc::LOCK_UN, None).unwrap();
            assert_eq!(h.join().unwrap(), Ok(()));
        });
        assert_eq!(flocks(&m), vec![(f(2), W)]);
        m.flock(&c, 1, 10, libc::LOCK_UN, None).unwrap();
        m.flock(&c, 2, 20, libc::LOCK_UN, None).unwrap();
        assert!(flocks(&m).is_empty());
        assert_eq!(m.flock(&c, 1, 10, 0, None), Err(Errno::EINVAL));
        assert_eq!(
            m.flock(&c, 1, 10, libc::LOCK_SH | libc::LOCK_EX, None),
            Err(Errno::EINVAL)
        );
        assert_eq!(m.flock(&c, 1, 10, 32 | libc::LOCK_SH, None), Ok(()));
        assert!(flocks(&m).is_empty(), "LOCK_MAND is ignored");
    }
}

#[test]
fn flock_waiter_granted_on_unlock() {
    for mode in MODES {
        let (m, c) = setup(mode);
        m.flock(&c, 1, 10, libc::LOCK_EX, None).unwrap();
        thread::scope(|s| {
            let _unblock = UnblockOnPanic {
                m: &m,
                ctxs: vec![&c],
                tokens: vec![],
            };
            let h = s.spawn(|| m.flock(&c, 2, 20, libc::LOCK_SH, None));
            eventually(|| waiting(&m) == 1);
            let l = m.proc_locks();
            assert!(
                l.contains("1: -> FLOCK  ADVISORY  READ 20 00:2a:5678 0 EOF"),
                "{l}"
            );
            m.flock(&c, 1, 10, libc::LOCK_UN, None).unwrap();
            assert_eq!(h.join().unwrap(), Ok(()));
        });
        assert_eq!(flocks(&m), vec![(f(2), R)]);
    }
}

#[test]
fn flock_to_range_rules() {
    let fl = |whence: i32, start: i64, len: i64| Flock {
        l_type: libc::F_WRLCK as i16,
        l_whence: whence as i16,
        l_start: start,
        l_len: len,
        l_pid: 0,
    };
    let (set, cur, end) = (libc::SEEK_SET, libc::SEEK_CUR, libc::SEEK_END);
    assert_eq!(flock_to_range(&fl(set, 10, 5), 0, 0), Ok((10, 14)));
    assert_eq!(flock_to_range(&fl(set, 10, 0), 0, 0), Ok((10, OFFSET_MAX)));
    assert_eq!(flock_to_range(&fl(cur, -5, 5), 100, 0), Ok((95, 99)));
    assert_eq!(
        flock_to_range(&fl(end, 0, 0), 0, 1000),
        Ok((1000, OFFSET_MAX))
    );
    assert_eq!(flock_to_range(&fl(end, -10, 10), 0, 1000), Ok((990, 999)));
    // Negative length: the bytes before l_start.
    assert_eq!(flock_to_range(&fl(set, 10, -4), 0, 0), Ok((6, 9)));
    assert_eq!(flock_to_range(&fl(set, 10, -10), 0, 0), Ok((0, 9)));
    assert_eq!(flock_to_range(&fl(set, 10, -11), 0, 0), Err(Errno::EINVAL));
    assert_eq!(flock_to_range(&fl(set, -1, 1), 0, 0), Err(Errno::EINVAL));
    assert_eq!(
        flock_to_range(&fl(cur, -101, 1), 100, 0),
        Err(Errno::EINVAL)
    );
    assert_eq!(flock_to_range(&fl(3, 0, 1), 0, 0), Err(Errno::EINVAL));
    // Overflow past OFFSET_MAX.
    assert_eq!(
        flock_to_range(&fl(cur, OFFSET_MAX, 1), 1, 0),
        Err(Errno::EOVERFLOW)
    );
    assert_eq!(
        flock_to_range(&fl(set, OFFSET_MAX, 2), 0, 0),
        Err(Errno::EOVERFLOW)
    );
    assert_eq!(
        flock_to_range(&fl(set, OFFSET_MAX, 1), 0, 0),
        Ok((OFFSET_MAX, OFFSET_MAX))
    );
    assert_eq!(
        flock_to_range(&fl(set, 1, OFFSET_MAX), 0, 0),
        Ok((1, OFFSET_MAX))
    );
    assert_eq!(
        flock_to_range(&fl(set, 2, OFFSET_MAX), 0, 0),
        Err(Errno::EOVERFLOW)
    );
}

fn file(process: u64, fid: u64) -> FcntlFile {
    FcntlFile {
        pos: 0,
        size: 0,
        readable: true,
        writable: true,
        file_id: fid,
        process_id: process,
        pid: process as i32,
    }
}

fn flk(ty: i32, start: i64, len: i64, pid: i32) -> Flock {
    Flock {
        l_type: ty as i16,
        l_whence: libc::SEEK_SET as i16,
        l_start: start,
        l_len: len,
        l_pid: pid,
    }
}

#[test]
fn fcntl_errors_and_getlk() {
    for mode in MODES {
        let (m, c) = setup(mode);
        let f1 = file(1, 11);
        // EBADF: lock type not allowed by the access mode (set commands only).
        let ro = FcntlFile {
            writable: false,
            ..f1
        };
        let mut l = flk(libc::F_WRLCK, 0, 1, 0);
        assert_eq!(
            m.fcntl(&c, libc::F_SETLK, &mut l, &ro, None),
            Err(Errno::EBADF)
        );
        let mut l = flk(libc::F_WRLCK, 0, 1, 0);
        assert_eq!(m.fcntl(&c, libc::F_GETLK, &mut l, &ro, None), Ok(()));
        // EINVAL: bad type, unlock in F_GETLK, OFD l_pid != 0, bad command.
        let mut l = flk(7, 0, 1, 0);
        assert_eq!(
            m.fcntl(&c, libc::F_SETLK, &mut l, &f1, None),
            Err(Errno::EINVAL)
        );
        let mut l = flk(libc::F_UNLCK, 0, 1, 0);
        assert_eq!(
            m.fcntl(&c, libc::F_GETLK, &mut l, &f1, None),
            Err(Errno::EINVAL)
        );
        for cmd in [libc::F_OFD_SETLK, libc::F_OFD_SETLKW, libc::F_OFD_GETLK] {
            let mut l = flk(libc::F_RDLCK, 0, 1, 5);
            assert_eq!(m.fcntl(&c, cmd, &mut l, &f1, None), Err(Errno::EINVAL));
        }
        let mut l = flk(libc::F_RDLCK, 0, 1, 0);
        assert_eq!(
            m.fcntl(&c, libc::F_GETFD, &mut l, &f1, None),
            Err(Errno::EINVAL)
        );
        // POSIX l_pid is ignored on input.
        let mut l = flk(libc::F_WRLCK, 10, 10, 12345);
        m.fcntl(&c, libc::F_SETLK, &mut l, &f1, None).unwrap();
        // F_GETLK from another process reports the lock with its pid.
        let f2 = file(2, 22);
        let mut l = flk(libc::F_RDLCK, 0, 0, 0);
        m.fcntl(&c, libc::F_GETLK, &mut l, &f2, None).unwrap();
        assert_eq!(l, flk(libc::F_WRLCK, 10, 10, 1));
        // The owner itself sees no conflict: only l_type changes.
        let mut l = flk(libc::F_WRLCK, 0, 0, 99);
        m.fcntl(&c, libc::F_GETLK, &mut l, &f1, None).unwrap();
        assert_eq!(l, flk(libc::F_UNLCK, 0, 0, 99));
        // OFD lock to EOF: reported with l_len 0 and l_pid -1.
        let mut l = flk(libc::F_RDLCK, 100, 0, 0);
        m.fcntl(&c, libc::F_OFD_SETLK, &mut l, &f2, None).unwrap();
        let mut l = flk(libc::F_WRLCK, 200, 1, 0);
        m.fcntl(&c, libc::F_GETLK, &mut l, &f1, None).unwrap();
        assert_eq!(l, flk(libc::F_RDLCK, 100, 0, -1));
        // OFD getlk from the same process but another file sees the POSIX lock.
        let f1b = file(1, 12);
        let mut l = flk(libc::F_RDLCK, 0, 0, 0);
        m.fcntl(&c, libc::F_OFD_GETLK, &mut l, &f1b, None).unwrap();
        assert_eq!(l, flk(libc::F_WRLCK, 10, 10, 1));
        // EAGAIN on conflict.
        let mut l = flk(libc::F_WRLCK, 15, 1, 0);
        assert_eq!(
            m.fcntl(&c, libc::F_SETLK, &mut l, &f2, None),
            Err(Errno::EAGAIN)
        );
        assert_eq!(
            m.fcntl(&c, libc::F_OFD_SETLK, &mut l, &f2, None),
            Err(Errno::EAGAIN)
        );
        // EOVERFLOW from the range.
        let mut l = flk(libc::F_WRLCK, OFFSET_MAX, 2, 0);
        assert_eq!(
            m.fcntl(&c, libc::F_SETLK, &mut l, &f1, None),
            Err(Errno::EOVERFLOW)
        );
        // Bad request ranges from direct callers are EINVAL, never a panic.
        assert_eq!(set(&m, &c, rq(p(1), W, 5, 4)), Err(Errno::EINVAL));
        assert_eq!(set(&m, &c, rq(p(1), W, -1, 4)), Err(Errno::EINVAL));
    }
}

#[test]
fn proc_locks_format() {
    for mode in MODES {
        let (m, c) = setup(mode);
        set(&m, &c, rq(p(1234), W, 0, OFFSET_MAX)).unwrap();
        set(&m, &c, rq(f(3), R, 0, 0)).unwrap_err();
        m.flock(&c, 3, 77, libc::LOCK_SH, None).unwrap();
        let c2 = m.new_context((8 << 8) | 1, 42);
        set(&m, &c2, rq(f(3), R, 5, 9)).unwrap();
        let text = m.proc_locks();
        let mut lines: Vec<&str> = text
            .lines()
            .map(|l| l.split_once(": ").unwrap().1)
            .collect();
        lines.sort();
        assert_eq!(
            lines,
            vec![
                "FLOCK  ADVISORY  READ 77 00:2a:5678 0 EOF",
                "OFDLCK ADVISORY  READ -1 08:01:42 5 9",
                "POSIX  ADVISORY  WRITE 1234 00:2a:5678 0 EOF",
            ]
        );
        drop(c2);
        assert_eq!(m.list().len(), 2, "a dropped context leaves the listing");
    }
}

/// Spawns a thread that blocks on `r`; returns its handle once it is queued.
fn block<'s>(
    s: &'s thread::Scope<'s, '_>,
    m: &'s LockManager,
    c: &'s FileLockContext,
    r: LockRequest,
    t: &'s CancelToken,
) -> thread::ScopedJoinHandle<'s, Result<(), Errno>> {
    let before = waiting(m);
    let h = s.spawn(move || m.setlk(c, &r, Some(t)));
    eventually(|| waiting(m) > before);
    h
}

/// n owners each hold byte i and wait for byte i+1; the last one closing the cycle gets
/// EDEADLK, everybody else is granted once it gives up.
fn deadlock_cycle(mode: Locking, n: u64) {
    let (m, c) = setup(mode);
    for i in 0..n {
        set(&m, &c, rq(p(i), W, i as i64, i as i64)).unwrap();
    }
    let tokens: Vec<CancelToken> = (0..n).map(|_| CancelToken::new()).collect();
    thread::scope(|s| {
        let _unblock = UnblockOnPanic {
            m: &m,
            ctxs: vec![&c],
            tokens: tokens.iter().collect(),
        };
        let hs: Vec<_> = (0..n - 1)
            .map(|i| {
                block(
                    s,
                    &m,
                    &c,
                    rq(p(i), W, i as i64 + 1, i as i64 + 1),
                    &tokens[i as usize],
                )
            })
            .collect();
        let last = n - 1;
        assert_eq!(
            m.setlk(&c, &rq(p(last), W, 0, 0), Some(&tokens[last as usize])),
            Err(Errno::EDEADLK)
        );
        // Break the cycle: the last owner unlocks, the chain unwinds.
        set(&m, &c, rq(p(last), U, 0, OFFSET_MAX)).unwrap();
        for (i, h) in hs.into_iter().enumerate().rev() {
            assert_eq!(h.join().unwrap(), Ok(()));
            set(&m, &c, rq(p(i as u64), U, 0, OFFSET_MAX)).unwrap();
        }
    });
    assert_eq!(m.shared.graph.len(), 0);
    assert!(m.list().is_empty());
}

#[test]
fn edeadlk_two_owners() {
    for mode in MODES {
        deadlock_cycle(mode, 2);
    }
}

#[test]
fn edeadlk_three_owners() {
    for mode in MODES {
        deadlock_cycle(mode, 3);
    }
}

#[test]
fn edeadlk_twenty_owners_beyond_linux_limit() {
    for mode in MODES {
        deadlock_cycle(mode, 20);
    }
}

#[test]
fn edeadlk_across_inodes() {
    let m = LockManager::new(Locking::Scalable);
    let (a, b) = (m.new_context(1, 1), m.new_context(1, 2));
    set(&m, &a, rq(p(1), W, 0, 0)).unwrap();
    set(&m, &b, rq(p(2), W, 0, 0)).unwrap();
    let t = CancelToken::new();
    thread::scope(|s| {
        let _unblock = UnblockOnPanic {
            m: &m,
            ctxs: vec![&a, &b],
            tokens: vec![&t],
        };
        let h = block(s, &m, &b, rq(p(1), W, 0, 0), &t);
        assert_eq!(
            m.setlk(&a, &rq(p(2), R, 0, 0), Some(&t)),
            Err(Errno::EDEADLK)
        );
        set(&m, &b, rq(p(2), U, 0, 0)).unwrap();
        assert_eq!(h.join().unwrap(), Ok(()));
    });
}

#[test]
fn ofd_waits_are_not_deadlock_checked() {
    for mode in MODES {
        let (m, c) = setup(mode);
        set(&m, &c, rq(f(1), W, 0, 0)).unwrap();
        set(&m, &c, rq(f(2), W, 1, 1)).unwrap();
        let (t1, t2) = (CancelToken::new(), CancelToken::new());
        thread::scope(|s| {
            let _unblock = UnblockOnPanic {
                m: &m,
                ctxs: vec![&c],
                tokens: vec![&t1, &t2],
            };
            let h1 = block(s, &m, &c, rq(f(1), W, 1, 1), &t1);
            let h2 = block(s, &m, &c, rq(f(2), W, 0, 0), &t2);
            // Both sleep, as on Linux; interrupting them is the only way out.
            t1.cancel();
            t2.cancel();
            assert_eq!(h1.join().unwrap(), Err(Errno::EINTR));
            assert_eq!(h2.join().unwrap(), Err(Errno::EINTR));
        });
        assert_eq!(waiting(&m), 0);
    }
}

#[test]
fn eintr_by_cancel_and_deadline() {
    for mode in MODES {
        let (m, c) = setup(mode);
        set(&m, &c, rq(p(1), W, 0, 9)).unwrap();
        let t = CancelToken::new();
        thread::scope(|s| {
            let _unblock = UnblockOnPanic {
                m: &m,
                ctxs: vec![&c],
                tokens: vec![&t],
            };
            let h = block(s, &m, &c, rq(p(2), R, 5, 5), &t);
            t.cancel();
            assert_eq!(h.join().unwrap(), Err(Errno::EINTR));
        });
        assert_eq!(waiting(&m), 0);
        assert_eq!(m.shared.graph.len(), 0);
        // An already-cancelled token fails at once on conflict, not without one.
        assert_eq!(m.setlk(&c, &rq(p(2), R, 5, 5), Some(&t)), Err(Errno::EINTR));
        m.setlk(&c, &rq(p(2), R, 50, 50), Some(&t)).unwrap();
        let d = CancelToken::with_deadline(Instant::now() + Duration::from_millis(20));
        assert_eq!(m.setlk(&c, &rq(p(3), W, 0, 0), Some(&d)), Err(Errno::EINTR));
        let d = CancelToken::with_deadline(Instant::now() + Duration::from_millis(20));
        m.flock(&c, 1, 1, libc::LOCK_EX, None).unwrap();
        assert_eq!(
            m.flock(&c, 2, 2, libc::LOCK_EX, Some(&d)),
            Err(Errno::EINTR)
        );
        assert_eq!(waiting(&m), 0);
    }
}

#[test]
fn release_rules() {
    for mode in MODES {
        let (m, c) = setup(mode);
        set(&m, &c, rq(p(1), W, 0, 9)).unwrap();
        set(&m, &c, rq(p(1), R, 20, 29)).unwrap();
        set(&m, &c, rq(f(5), W, 40, 49)).unwrap();
        m.flock(&c, 5, 1, libc::LOCK_EX, None).unwrap();
        set(&m, &c, rq(p(2), W, 50, 59)).unwrap();
        // POSIX close rule: all of process 1's POSIX locks, nothing else.
        m.release_posix(&c, 1);
        assert_eq!(held(&m), vec![(f(5), W, 40, 49), (p(2), W, 50, 59)]);
        assert_eq!(flocks(&m), vec![(f(5), W)]);
        // Last close of file 5 with a waiter on its OFD lock: the waiter is granted.
        let t = CancelToken::new();
        thread::scope(|s| {
            let _unblock = UnblockOnPanic {
                m: &m,
                ctxs: vec![&c],
                tokens: vec![&t],
            };
            let h = block(s, &m, &c, rq(p(3), W, 45, 45), &t);
            m.release_ofd(&c, 5);
            assert_eq!(h.join().unwrap(), Ok(()));
        });
        assert_eq!(flocks(&m), vec![(f(5), W)]);
        m.release_file(&c, 5);
        assert!(flocks(&m).is_empty());
        assert_eq!(held(&m), vec![(p(2), W, 50, 59), (p(3), W, 45, 45)]);
    }
}

#[test]
fn unlock_wakes_only_one_of_many_writers() {
    for mode in MODES {
        let (m, c) = setup(mode);
        set(&m, &c, rq(p(0), W, 0, 0)).unwrap();
        let granted = AtomicUsize::new(0);
        let n = 10;
        thread::scope(|s| {
            let _unblock = UnblockOnPanic {
                m: &m,
                ctxs: vec![&c],
                tokens: vec![],
            };
            for i in 1..=n {
                let (m, c, granted) = (&m, &c, &granted);
                s.spawn(move || {
                    m.setlk(c, &rq(p(i), W, 0, 0), Some(&CancelToken::new()))
                        .unwrap();
                    granted.fetch_add(1, Ordering::SeqCst);
                });
            }
            eventually(|| waiting(&m) == n as usize);
            for k in 0..n {
                // Whoever holds byte 0 unlocks it; exactly one more waiter is granted.
                let holder = held(&m)[0].0;
                set(&m, &c, rq(holder, U, 0, 0)).unwrap();
                eventually(|| granted.load(Ordering::SeqCst) == k as usize + 1);
                assert_eq!(waiting(&m), (n - k - 1) as usize);
                assert_eq!(held(&m).len(), 1);
            }
        });
    }
}

#[test]
fn contexts_are_independent() {
    let m = LockManager::new(Locking::Scalable);
    let cs: Vec<_> = (0..8).map(|i| m.new_context(1, i)).collect();
    for c in &cs {
        set(&m, c, rq(p(1), W, 0, 0)).unwrap();
        set(&m, c, rq(p(2), W, 1, 1)).unwrap();
    }
    assert_eq!(m.list().len(), 16);
    assert_eq!(m.locking(), Locking::Scalable);
}

/// A waiter whose blocker goes away but which still conflicts with another owner's lock
/// is moved, not woken; if the move closes a cycle it gets EDEADLK (Linux: the woken
/// task's retry finds the cycle).
#[test]
fn retarget_closes_cycle() {
    for mode in MODES {
        let (m, c) = setup(mode);
        set(&m, &c, rq(p(2), R, 0, 0)).unwrap();
        set(&m, &c, rq(p(3), R, 0, 0)).unwrap();
        set(&m, &c, rq(p(1), W, 5, 5)).unwrap();
        let (ta, tc) = (CancelToken::new(), CancelToken::new());
        thread::scope(|s| {
            let _unblock = UnblockOnPanic {
                m: &m,
                ctxs: vec![&c],
                tokens: vec![&ta, &tc],
            };
            // p1 waits on p2's read lock (the first conflict).
            let a = block(s, &m, &c, rq(p(1), W, 0, 0), &ta);
            // p3 waits on p1's lock: p3 -> p1 -> p2, no cycle.
            let c3 = block(s, &m, &c, rq(p(3), W, 5, 5), &tc);
            // p2 goes: p1 now conflicts with p3's read lock; p1 -> p3 -> p1 is a cycle.
            set(&m, &c, rq(p(2), U, 0, 0)).unwrap();
            assert_eq!(a.join().unwrap(), Err(Errno::EDEADLK));
            m.release_posix(&c, 1);
            assert_eq!(c3.join().unwrap(), Ok(()));
        });
        assert_eq!(held(&m), vec![(p(3), R, 0, 0), (p(3), W, 5, 5)]);
        assert_eq!(m.shared.graph.len(), 0);
    }
}

/// Contexts made on different CPUs keep different handles of the manager (no shared
/// reference count between first locks on different files), and a context keeps the
/// manager alive after the `LockManager` that made it is gone.
#[test]
fn contexts_keep_per_cpu_handles_of_their_manager() {
    use scalevfs_primitives::cpu::set_cpu_override;
    let m = LockManager::new(Locking::Scalable);
    set_cpu_override(Some(0));
    let a = m.new_context(7, 1);
    set_cpu_override(Some(1));
    let b = m.new_context(7, 2);
    set_cpu_override(None);
    let ncpu = scalevfs_primitives::cpu::num_cpus();
    assert_eq!(Arc::ptr_eq(&a.mgr, &b.mgr), ncpu < 2, "{ncpu} CPUs");
    drop(m);
    let req = LockRequest {
        owner: LockOwner::File(9),
        pid: -1,
        ty: LockType::Write,
        start: 0,
        end: 0,
    };
    a.manager().setlk(&a, &req, None).unwrap();
    assert_eq!(a.manager().list().len(), 1);
    a.manager().release_file(&a, 9);
    assert!(a.manager().list().is_empty());
}
