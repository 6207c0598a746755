//! File locks through a real FUSE mount reach the VFS's lock manager: POSIX and flock
//! told apart, cross-process conflicts, EDEADLK, OFD locks, blocked waits interrupted by
//! signals (FUSE_INTERRUPT). Needs root, /dev/fuse and fusermount3.

mod common;

use std::os::unix::io::AsRawFd;

use common::*;

/// Mounts with a 4 KiB `lockme` file (and `hello`) in the root.
fn mount_lockme(threads: usize) -> (tempfile::TempDir, scalevfs_fuse::Server) {
    let (dir, server) = mount(threads);
    std::fs::write(dir.path().join("lockme"), [0u8; 4096]).unwrap();
    std::fs::write(dir.path().join("hello"), b"hello, fuse\n").unwrap();
    // RELEASE comes after close(2) returns: start from no open handles.
    wait_for(&server, "the setup's files released", |s| s.open_files == 0);
    (dir, server)
}

/// Pins the calling thread (and the children it forks) to CPU 0, so that their
/// requests all go to one io_uring queue.
fn pin_to_cpu0() {
    // SAFETY: a zeroed cpu_set_t is the empty set; CPU 0 is inside it; 0 is this thread.
    let pinned = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(0, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of_val(&set), &set) == 0
    };
    assert!(pinned, "pin to CPU 0: errno {}", errno());
}

/// Lets the calling thread run on every CPU again.
fn unpin() {
    // SAFETY: a full cpu_set_t; 0 is this thread.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for cpu in 0..libc::CPU_SETSIZE as usize {
            libc::CPU_SET(cpu, &mut set);
        }
        libc::sched_setaffinity(0, std::mem::size_of_val(&set), &set);
    }
}

/// Waits until all of `children` wait for the lock `holder` holds on byte 0, unlocks
/// it, and checks that every child got the lock in turn and that nobody waits after.
fn unlock_for_waiters(server: &scalevfs_fuse::Server, holder: &std::fs::File, children: Vec<i32>) {
    let n = children.len() as u64;
    wait_for(server, "every child waiting", |s| s.waiting == n);
    let mut fl = flock_struct(libc::F_UNLCK, 0, 1);
    fcntl_lock(holder.as_raw_fd(), libc::F_SETLK, &mut fl).unwrap();
    for pid in children {
        assert_eq!(wait_child(pid), 0, "a waiter did not get the lock");
    }
    // A waiter's thread answers first and unpublishes its wait after, so the last
    // child can have exited a moment before the count drops.
    wait_for(server, "no waiter left", |s| s.waiting == 0);
}

fuse_test! {
    fn posix_and_flock_reach_the_server_as_different_kinds() {
        require_fuse!();
        let (dir, server) = mount_lockme(2);
        let path = dir.path().join("lockme");
        let f1 = open_rw(&path);
        let f2 = open_rw(&path);

        let s0 = server.stats();
        let mut fl = flock_struct(libc::F_WRLCK, 0, 10);
        fcntl_lock(f1.as_raw_fd(), libc::F_SETLK, &mut fl).unwrap();
        let s1 = server.stats();
        assert_eq!(
            s1.posix_requests,
            s0.posix_requests + 1,
            "fcntl reached the server"
        );
        assert_eq!(s1.flock_requests, s0.flock_requests, "fcntl is not a flock");

        flock(f1.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB).unwrap();
        let s2 = server.stats();
        assert_eq!(
            s2.flock_requests,
            s1.flock_requests + 1,
            "flock reached the server"
        );
        assert_eq!(
            s2.posix_requests, s1.posix_requests,
            "flock is not a POSIX lock"
        );

        // flock conflicts between open file descriptions, even in one process...
        assert_eq!(
            flock(f2.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB),
            Err(libc::EWOULDBLOCK)
        );
        // ...while a POSIX lock of the same process does not conflict with itself.
        let mut fl = flock_struct(libc::F_WRLCK, 0, 0);
        fcntl_lock(f2.as_raw_fd(), libc::F_SETLK, &mut fl).unwrap();

        // Another process: POSIX conflicts (and F_GETLK names our pid), flock conflicts, and a
        // POSIX lock and a flock never conflict with each other.
        let p = cpath(&path);
        let pid = fork_child(|| {
            // SAFETY: raw syscalls on a valid path.
            let fd = unsafe { libc::open(p.as_ptr(), libc::O_RDWR) };
            if fd < 0 {
                return 1;
            }
            let mut fl = flock_struct(libc::F_WRLCK, 5, 1);
            if fcntl_lock(fd, libc::F_SETLK, &mut fl) != Err(libc::EAGAIN) {
                return 2;
            }
            let mut fl = flock_struct(libc::F_RDLCK, 5, 1);
            if fcntl_lock(fd, libc::F_GETLK, &mut fl).is_err()
                || fl.l_type != libc::F_WRLCK as i16
                // SAFETY: getppid has no preconditions.
                || fl.l_pid != unsafe { libc::getppid() }
            {
                return 3;
            }
            if flock(fd, libc::LOCK_SH | libc::LOCK_NB) != Err(libc::EWOULDBLOCK) {
                return 4;
            }
            0
        });
        assert_eq!(wait_child(pid), 0);

        // Closing f1 releases its flock (FUSE_RELEASE) *and* this process's POSIX locks
        // (FUSE_FLUSH, the POSIX close rule), so f2 can take the flock. FLUSH is synchronous,
        // but the kernel sends RELEASE in the background after close(2) returns (it keeps no
        // local flock to remove), so wait for it: a FUSE difference from tmpfs.
        drop(f1);
        wait_for(&server, "f1's release", |s| s.open_files == 1);
        flock(f2.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB).unwrap();
        let pid = fork_child(|| {
            // SAFETY: raw syscalls on a valid path.
            let fd = unsafe { libc::open(p.as_ptr(), libc::O_RDWR) };
            let mut fl = flock_struct(libc::F_WRLCK, 0, 0);
            match fcntl_lock(fd, libc::F_SETLK, &mut fl) {
                Ok(()) => 0,
                Err(_) => 5,
            }
        });
        assert_eq!(wait_child(pid), 0, "close released the POSIX locks");
        drop(f2);
        wait_for(&server, "all files released", |s| s.open_files == 0);
        server.unmount().unwrap();
    }
}

fuse_test! {
    fn blocked_setlkw_is_interrupted_by_a_signal() {
        require_fuse!();
        // One worker: the blocked request must not occupy it, or neither the interrupt nor
        // the stat below could be served.
        let (dir, server) = mount_lockme(1);
        let path = dir.path().join("lockme");
        let f = open_rw(&path);
        let mut fl = flock_struct(libc::F_WRLCK, 0, 0);
        fcntl_lock(f.as_raw_fd(), libc::F_SETLK, &mut fl).unwrap();

        let p = cpath(&path);
        let pid = fork_child(|| {
            catch_sigusr1_without_restart();
            setlkw_exit_code(&p)
        });
        wait_for(&server, "the child to block in F_SETLKW", |s| {
            s.waiting == 1
        });
        // The single worker is free while the child waits.
        assert_eq!(
            std::fs::read(dir.path().join("hello")).unwrap(),
            b"hello, fuse\n"
        );
        // SAFETY: signals our own child.
        unsafe { libc::kill(pid, libc::SIGUSR1) };
        assert_eq!(wait_child(pid), 0, "F_SETLKW returned EINTR");
        let s = server.stats();
        assert_eq!(
            s.interrupts, 1,
            "the kernel sent FUSE_INTERRUPT and it cancelled the wait"
        );
        wait_for(&server, "the waiter to be gone", |s| s.waiting == 0);

        // No stale waiter is left behind: unlock, and another process gets the lock at once.
        let mut fl = flock_struct(libc::F_UNLCK, 0, 0);
        fcntl_lock(f.as_raw_fd(), libc::F_SETLK, &mut fl).unwrap();
        let pid = fork_child(|| {
            // SAFETY: raw syscalls on a valid path.
            let fd = unsafe { libc::open(p.as_ptr(), libc::O_RDWR) };
            let mut fl = flock_struct(libc::F_WRLCK, 0, 0);
            fcntl_lock(fd, libc::F_SETLK, &mut fl).map_or(1, |()| 0)
        });
        assert_eq!(wait_child(pid), 0);
        server.unmount().unwrap();
    }
}

fuse_test! {
    fn blocked_flock_is_interrupted_and_woken() {
        require_fuse!();
        let (dir, server) = mount_lockme(2);
        let path = dir.path().join("lockme");
        let f = open_rw(&path);
        flock(f.as_raw_fd(), libc::LOCK_EX).unwrap();
        let p = cpath(&path);
        let pid = fork_child(|| {
            catch_sigusr1_without_restart();
            // SAFETY: raw syscalls on a valid path.
            unsafe {
                let fd = libc::open(p.as_ptr(), libc::O_RDWR);
                match flock(fd, libc::LOCK_SH) {
                    Err(libc::EINTR) => {}
                    Ok(()) => return 1,
                    Err(e) => return 10 + e,
                }
                // Block again; this time the holder unlocks and we are woken with the lock.
                if flock(fd, libc::LOCK_SH) != Ok(()) {
                    return 2;
                }
            }
            0
        });
        wait_for(&server, "the child to block in flock", |s| s.waiting == 1);
        // SAFETY: signals our own child.
        unsafe { libc::kill(pid, libc::SIGUSR1) };
        wait_for(&server, "the interrupt", |s| s.interrupts == 1);
        // Unlock only once the child's second flock has arrived, i.e. once the first has
        // returned: an unlock that overtook the cancelled waiter would legitimately grant it
        // (the signal then counts as arriving after the call), and the child would see
        // success instead of EINTR. (Parent, child's first, child's second request.)
        wait_for(&server, "the child's second flock", |s| {
            s.flock_requests == 3
        });
        flock(f.as_raw_fd(), libc::LOCK_UN).unwrap();
        assert_eq!(wait_child(pid), 0);
        server.unmount().unwrap();
    }
}

fuse_test! {
    fn deadlock_between_two_processes_is_edeadlk() {
        require_fuse!();
        let (dir, server) = mount_lockme(2);
        let path = dir.path().join("lockme");
        let f = open_rw(&path);
        let mut fl = flock_struct(libc::F_WRLCK, 0, 1);
        fcntl_lock(f.as_raw_fd(), libc::F_SETLK, &mut fl).unwrap();
        let ready = Pipe::new();
        let p = cpath(&path);
        let pid = fork_child(|| {
            // SAFETY: raw syscalls on a valid path.
            let fd = unsafe { libc::open(p.as_ptr(), libc::O_RDWR) };
            let mut fl = flock_struct(libc::F_WRLCK, 1, 1);
            if fcntl_lock(fd, libc::F_SETLK, &mut fl).is_err() {
                return 1;
            }
            ready.send(1);
            // Waits for byte 0, held by the parent, until the parent unlocks it, unless this
            // request is the one that closes the cycle (see below).
            let mut fl = flock_struct(libc::F_WRLCK, 0, 1);
            match fcntl_lock(fd, libc::F_SETLKW, &mut fl) {
                Ok(()) => 0,
                Err(libc::EDEADLK) => 3,
                Err(_) => 2,
            }
        });
        assert_eq!(ready.recv(), 1);
        // `waiting` counts the child's request once the server has taken it, possibly just
        // before the lock manager queued it. So either our request closes the cycle (EDEADLK
        // for us, and the child gets byte 0 when we unlock), or, if the child's queueing ran
        // after ours, the child's does (EDEADLK for the child, which exits and so releases
        // byte 1 to us). Linux answers the same way: the request that closes the cycle fails.
        wait_for(&server, "the child to block", |s| s.waiting == 1);
        let mut fl = flock_struct(libc::F_WRLCK, 1, 1);
        match fcntl_lock(f.as_raw_fd(), libc::F_SETLKW, &mut fl) {
            Err(libc::EDEADLK) => {
                let mut fl = flock_struct(libc::F_UNLCK, 0, 1);
                fcntl_lock(f.as_raw_fd(), libc::F_SETLK, &mut fl).unwrap();
                assert_eq!(
                    wait_child(pid),
                    0,
                    "the child got byte 0 once it was unlocked"
                );
            }
            Ok(()) => assert_eq!(
                wait_child(pid),
                3,
                "then the child's request closed the cycle"
            ),
            Err(e) => panic!("F_SETLKW: errno {e}, expected EDEADLK"),
        }
        server.unmount().unwrap();
    }
}

fuse_test! {
    fn ofd_locks_live_until_the_last_close() {
        require_fuse!();
        let (dir, server) = mount_lockme(2);
        let path = dir.path().join("lockme");
        let f1 = open_rw(&path);
        let f2 = open_rw(&path);
        let mut fl = flock_struct(libc::F_WRLCK, 0, 0);
        fcntl_lock(f1.as_raw_fd(), libc::F_OFD_SETLK, &mut fl).unwrap();
        // A different open file description conflicts, even in the same process.
        let mut fl = flock_struct(libc::F_WRLCK, 0, 0);
        assert_eq!(
            fcntl_lock(f2.as_raw_fd(), libc::F_OFD_SETLK, &mut fl),
            Err(libc::EAGAIN)
        );
        // Closing a dup of f1 flushes but does not release the OFD lock.
        let dup = f1.try_clone().unwrap();
        drop(dup);
        let mut fl = flock_struct(libc::F_WRLCK, 0, 0);
        assert_eq!(
            fcntl_lock(f2.as_raw_fd(), libc::F_OFD_SETLK, &mut fl),
            Err(libc::EAGAIN)
        );
        // The last close of f1 (FUSE_RELEASE) does.
        drop(f1);
        wait_for(&server, "f1 to be released", |s| s.open_files == 1);
        let mut fl = flock_struct(libc::F_WRLCK, 0, 0);
        fcntl_lock(f2.as_raw_fd(), libc::F_OFD_SETLK, &mut fl).unwrap();
        drop(f2);
        server.unmount().unwrap();
    }
}

fuse_test! {
    /// More lockers than a ring queue has entries wait on one CPU (so on one io_uring
    /// queue); the holder's unlock, from that CPU too, still gets through (the queue
    /// registers more entries while others are held), and every waiter then gets the
    /// lock in turn.
    fn more_waiters_on_one_cpu_than_ring_entries_still_let_the_holder_unlock() {
        require_fuse!();
        let (dir, server) = mount_lockme(2);
        let path = dir.path().join("lockme");
        let cpath = cpath(&path);
        pin_to_cpu0();
        let holder = open_rw(&path);
        let mut fl = flock_struct(libc::F_WRLCK, 0, 1);
        fcntl_lock(holder.as_raw_fd(), libc::F_SETLK, &mut fl).unwrap();
        const WAITERS: usize = 8;
        // One waiter at a time, each counted waiting before the next: this test checks
        // that held entries are replaced, so the holder's unlock still gets through; the
        // burst (more requests at once than available entries) is the next test's.
        let children: Vec<i32> = (0..WAITERS)
            .map(|n| {
                let pid = fork_child(|| {
                    // SAFETY: a NUL-terminated path.
                    let fd = unsafe { libc::open(cpath.as_ptr(), libc::O_RDWR) };
                    if fd < 0 {
                        return 1;
                    }
                    let mut fl = flock_struct(libc::F_WRLCK, 0, 1);
                    if fcntl_lock(fd, libc::F_SETLKW, &mut fl).is_err() {
                        return 2;
                    }
                    // SAFETY: closing our own descriptor (releases the lock).
                    unsafe { libc::close(fd) };
                    0
                });
                wait_for(&server, "the next child waiting", |s| s.waiting == n as u64 + 1);
                pid
            })
            .collect();
        unlock_for_waiters(&server, &holder, children);
        unpin();
    }

}

fuse_test! {
    /// A burst of blocking lock requests from one CPU, more than its queue has entries
    /// (one, here): the kernel queues the rest, and hands a queued request only to an
    /// entry that commits. Each hold registers a new entry and then provokes a request of
    /// its own on that CPU (`proto::uring`, "Requests answered later"), whose commit
    /// brings the next queued request in; without it, seven of these waiters would wait
    /// for a request that never comes. Over `/dev/fuse` the same burst just queues.
    fn a_burst_of_waiters_on_one_cpu_reaches_the_server_with_one_ring_entry() {
        require_fuse!();
        let dir = tempfile::tempdir().unwrap();
        let opts = scalevfs_fuse::MountOptions {
            ring_entries: 1,
            ..options(2)
        };
        let server = mount_with(dir.path(), &opts).expect("mount");
        let path = dir.path().join("lockme");
        std::fs::write(&path, [0u8; 4096]).unwrap();
        wait_for(&server, "the setup's files released", |s| s.open_files == 0);
        let cpath = cpath(&path);
        pin_to_cpu0();
        let holder = open_rw(&path);
        let mut fl = flock_struct(libc::F_WRLCK, 0, 1);
        fcntl_lock(holder.as_raw_fd(), libc::F_SETLK, &mut fl).unwrap();
        const WAITERS: usize = 8;
        // The children open the file first, then all ask for the lock at once.
        let mut fds = [0i32; 2];
        // SAFETY: `fds` is a live array of two descriptors for pipe(2) to fill.
        assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
        let (go_r, go_w) = (fds[0], fds[1]);
        let children: Vec<i32> = (0..WAITERS)
            .map(|_| {
                fork_child(|| {
                    // SAFETY: a NUL-terminated path.
                    let fd = unsafe { libc::open(cpath.as_ptr(), libc::O_RDWR) };
                    if fd < 0 {
                        return 1;
                    }
                    // Real-time, so that once let go all eight ask before the queue's
                    // (normal-priority) worker runs again on this CPU: a true burst.
                    let rt = libc::sched_param { sched_priority: 1 };
                    // SAFETY: a live sched_param; 0 is this process.
                    if unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &rt) } != 0 {
                        return 4;
                    }
                    let mut byte = 0u8;
                    // SAFETY: reading one byte into a live byte from our pipe end.
                    if unsafe { libc::read(go_r, (&mut byte as *mut u8).cast(), 1) } != 1 {
                        return 3;
                    }
                    let mut fl = flock_struct(libc::F_WRLCK, 0, 1);
                    if fcntl_lock(fd, libc::F_SETLKW, &mut fl).is_err() {
                        return 2;
                    }
                    // SAFETY: closing our own descriptor (releases the lock).
                    unsafe { libc::close(fd) };
                    0
                })
            })
            .collect();
        wait_for(&server, "every child's open answered", |s| s.open_files == 1 + WAITERS as u64);
        let go = [0u8; WAITERS];
        // SAFETY: writing WAITERS bytes from a live buffer to our pipe end.
        assert_eq!(unsafe { libc::write(go_w, go.as_ptr().cast(), WAITERS) }, WAITERS as isize);
        unlock_for_waiters(&server, &holder, children);
        // SAFETY: our own pipe ends, closed once.
        unsafe {
            libc::close(go_r);
            libc::close(go_w);
        }
        unpin();
    }
}
