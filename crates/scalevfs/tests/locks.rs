//! File locks through `Process`: ownership across fork, release on exit, drop and dup2,
//! the `/proc/locks` listing, and interruptible waits.

use std::time::{Duration, Instant};

use libc::{
    F_GETLK, F_OFD_SETLK, F_OFD_SETLKW, F_RDLCK, F_SETLK, F_SETLKW, F_UNLCK, F_WRLCK, LOCK_EX,
    LOCK_NB, LOCK_SH, O_CREAT, O_RDWR, SEEK_SET,
};
use scalevfs::{
    CancelToken, Credentials, Errno, FcntlArg, Flock, Locking, Process, Vfs, VfsOptions,
};

fn fl(ty: i32, start: i64, len: i64) -> Flock {
    Flock {
        l_type: ty as i16,
        l_whence: SEEK_SET as i16,
        l_start: start,
        l_len: len,
        l_pid: 0,
    }
}

fn set(p: &Process, fd: i32, cmd: i32, ty: i32, start: i64, len: i64) -> Result<i32, Errno> {
    p.fcntl(fd, cmd, FcntlArg::Flock(&mut fl(ty, start, len)))
}

/// The pid holding a lock that conflicts with a write lock on the whole file, if any.
fn holder(p: &Process, fd: i32) -> Option<i32> {
    let mut f = fl(F_WRLCK, 0, 0);
    p.fcntl(fd, F_GETLK, FcntlArg::Flock(&mut f)).unwrap();
    (f.l_type != F_UNLCK as i16).then_some(f.l_pid)
}

fn setup(locking: Locking) -> (std::sync::Arc<Vfs>, Process) {
    let vfs = Vfs::new(VfsOptions {
        locking,
        ..Default::default()
    });
    let p = Process::new(&vfs, Credentials::root());
    (vfs, p)
}

#[test]
fn fork_gives_a_new_posix_owner_and_shares_ofd_and_flock_locks() {
    for locking in [Locking::Scalable, Locking::Legacy] {
        let (_vfs, p) = setup(locking);
        let fd = p.open("/f", O_CREAT | O_RDWR, 0o644).unwrap();
        set(&p, fd, F_SETLK, F_WRLCK, 0, 10).unwrap();
        let c = p.fork();
        // The child does not own the parent's POSIX lock.
        assert_eq!(holder(&c, fd), Some(p.pid()));
        assert_eq!(set(&c, fd, F_SETLK, F_WRLCK, 0, 1), Err(Errno::EAGAIN));
        // OFD and flock locks belong to the shared description: the child owns them too.
        set(&p, fd, F_OFD_SETLK, F_WRLCK, 20, 10).unwrap();
        set(&c, fd, F_OFD_SETLK, F_RDLCK, 20, 10).unwrap();
        p.flock(fd, LOCK_EX).unwrap();
        c.flock(fd, LOCK_SH | LOCK_NB).unwrap();
        // The child's exit closes a shared description: nothing of the parent's goes.
        drop(c);
        assert_eq!(holder(&p.fork(), fd), Some(p.pid()));
    }
}

#[test]
fn exit_and_drop_release_every_lock() {
    for locking in [Locking::Scalable, Locking::Legacy] {
        let (vfs, p) = setup(locking);
        let fd = p.open("/f", O_CREAT | O_RDWR, 0o644).unwrap();
        let q = Process::new(&vfs, Credentials::root());
        let a = q.open("/f", O_RDWR, 0).unwrap();
        let b = q.open("/f", O_RDWR, 0).unwrap();
        let d = q.open("/f", O_RDWR, 0).unwrap();
        set(&q, a, F_SETLK, F_WRLCK, 0, 10).unwrap();
        set(&q, b, F_OFD_SETLK, F_WRLCK, 20, 10).unwrap();
        q.flock(d, LOCK_EX).unwrap();
        assert_eq!(vfs.proc_locks().lines().count(), 3);
        q.exit();
        assert_eq!(vfs.proc_locks(), "");
        assert_eq!(holder(&p, fd), None);
        p.flock(fd, LOCK_EX | LOCK_NB).unwrap();

        let r = Process::new(&vfs, Credentials::root());
        let e = r.open("/f", O_RDWR, 0).unwrap();
        set(&r, e, F_SETLK, F_RDLCK, 0, 0).unwrap();
        assert_eq!(holder(&p, fd), Some(r.pid()));
        drop(r);
        assert_eq!(holder(&p, fd), None);
    }
}

#[test]
fn dup2_over_a_descriptor_of_the_inode_drops_posix_locks() {
    let (_vfs, p) = setup(Locking::Scalable);
    let fd = p.open("/f", O_CREAT | O_RDWR, 0o644).unwrap();
    let other = p.open("/f", O_RDWR, 0).unwrap();
    let g = p.open("/g", O_CREAT | O_RDWR, 0o644).unwrap();
    set(&p, fd, F_SETLK, F_WRLCK, 0, 0).unwrap();
    let c = p.fork();
    assert_eq!(holder(&c, fd), Some(p.pid()));
    p.dup2(g, other).unwrap();
    assert_eq!(holder(&c, fd), None);
    set(&p, fd, F_SETLK, F_WRLCK, 0, 0).unwrap();
    p.dup3(g, fd, 0).unwrap();
    assert_eq!(holder(&c, other), None);
}

#[test]
fn proc_locks_lists_held_and_waiting_locks() {
    let (vfs, p) = setup(Locking::Scalable);
    let fd = p.open("/f", O_CREAT | O_RDWR, 0o644).unwrap();
    let ino = p.fstat(fd).unwrap().ino;
    set(&p, fd, F_SETLK, F_WRLCK, 0, 0).unwrap();
    let c = p.fork();
    let token = CancelToken::new();
    std::thread::scope(|s| {
        // Interrupt the waiter even when a check below fails before `token.cancel()`: the
        // scope joins it first, and it would wait forever.
        struct CancelOnDrop<'a>(&'a CancelToken);
        impl Drop for CancelOnDrop<'_> {
            fn drop(&mut self) {
                self.0.cancel();
            }
        }
        let _cancel = CancelOnDrop(&token);
        let t = s.spawn(|| {
            c.with_cancel(&token)
                .fcntl(fd, F_SETLKW, FcntlArg::Flock(&mut fl(F_RDLCK, 5, 1)))
        });
        let deadline = Instant::now() + Duration::from_secs(60);
        while !vfs.proc_locks().contains("->") && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        let listing = vfs.proc_locks();
        let lines: Vec<&str> = listing.lines().collect();
        assert_eq!(lines.len(), 2, "{listing}");
        assert!(
            lines[0].starts_with("1: POSIX  ADVISORY  WRITE "),
            "{listing}"
        );
        assert!(lines[0].contains(&format!(" {} ", p.pid())), "{listing}");
        assert!(lines[0].ends_with(&format!(":{ino} 0 EOF")), "{listing}");
        assert!(
            lines[1].starts_with("1: -> POSIX  ADVISORY  READ "),
            "{listing}"
        );
        assert!(lines[1].ends_with(&format!(":{ino} 5 5")), "{listing}");
        token.cancel();
        assert_eq!(t.join().unwrap(), Err(Errno::EINTR));
    });
    assert_eq!(vfs.proc_locks().lines().count(), 1);
}

#[test]
fn interruptible_waits_end_with_eintr_or_the_grant() {
    let (_vfs, p) = setup(Locking::Scalable);
    let fd = p.open("/f", O_CREAT | O_RDWR, 0o644).unwrap();
    let fd2 = p.open("/f", O_RDWR, 0).unwrap();
    set(&p, fd, F_OFD_SETLK, F_WRLCK, 0, 0).unwrap();
    p.flock(fd, LOCK_EX).unwrap();
    // A deadline counts as an interrupt.
    let soon = || CancelToken::with_deadline(Instant::now() + Duration::from_millis(20));
    let mut f = fl(F_WRLCK, 0, 1);
    assert_eq!(
        p.with_cancel(&soon())
            .fcntl(fd2, F_OFD_SETLKW, FcntlArg::Flock(&mut f)),
        Err(Errno::EINTR)
    );
    assert_eq!(
        p.with_cancel(&soon()).flock(fd2, LOCK_SH),
        Err(Errno::EINTR)
    );
    // Non-lock commands pass through.
    assert_eq!(
        p.with_cancel(&soon())
            .fcntl(fd, libc::F_GETFD, FcntlArg::None),
        Ok(0)
    );
    // A wait that is granted succeeds.
    std::thread::scope(|s| {
        let t = s.spawn(|| {
            let token = CancelToken::with_deadline(Instant::now() + Duration::from_secs(60));
            p.with_cancel(&token).flock(fd2, LOCK_SH)
        });
        std::thread::sleep(Duration::from_millis(10));
        p.flock(fd, libc::LOCK_UN).unwrap();
        assert_eq!(t.join().unwrap(), Ok(()));
    });
}

#[test]
fn flock_checks_the_operation_before_the_descriptor() {
    let (_vfs, p) = setup(Locking::Scalable);
    // As on Linux 6.x: EINVAL and LOCK_MAND's success come before the fd lookup.
    assert_eq!(p.flock(999, 0), Err(Errno::EINVAL));
    assert_eq!(p.flock(999, 32 | LOCK_SH), Ok(()));
    assert_eq!(p.flock(999, LOCK_SH), Err(Errno::EBADF));
    let fd = p.open("/f", O_CREAT | O_RDWR, 0o644).unwrap();
    let path = p.open("/f", libc::O_PATH, 0).unwrap();
    for op in [LOCK_SH, LOCK_EX | LOCK_NB, libc::LOCK_UN] {
        assert_eq!(p.flock(path, op), Err(Errno::EBADF));
    }
    assert_eq!(set(&p, path, F_SETLK, F_RDLCK, 0, 1), Err(Errno::EBADF));
    assert_eq!(holder(&p, fd), None);
}
