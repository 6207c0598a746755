//! How the workers wait for requests: an io_uring worker may watch for the next request
//! for a short while after answering one (`MountOptions::ring_spin`) before it sleeps.
//! An idle mount's workers must still sleep (no CPU time while nothing is asked), and
//! many clients, lock waiters among them, must be served exactly as without the spin.

mod common;
use common::*;

use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::time::Duration;

/// CPU time used so far, in nanoseconds, by this process's server threads (their names
/// start with `fuse-`), from `/proc/self/task/*/schedstat`.
fn server_cpu_ns() -> u64 {
    let mut total = 0;
    for task in std::fs::read_dir("/proc/self/task").unwrap().flatten() {
        let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
        if !comm.starts_with("fuse-") {
            continue;
        }
        let stat = std::fs::read_to_string(task.path().join("schedstat")).unwrap_or_default();
        total += stat
            .split_whitespace()
            .next()
            .and_then(|ns| ns.parse::<u64>().ok())
            .unwrap_or(0);
    }
    total
}

/// Opens and closes `p` `n` times (OPEN, FLUSH and RELEASE each).
fn open_close(p: &std::path::Path, n: usize) {
    for _ in 0..n {
        drop(std::fs::File::open(p).unwrap());
    }
}

/// After a burst of requests, a mount's workers use next to no CPU once they have answered
/// the last one (and spun, if they do), and next to none over the next second, without a
/// spin (the default) and with one of 5 ms (which each worker may spend once, after its
/// last answer).
fn idle_workers_sleep(spin: Duration) {
    let dir = tempfile::tempdir().unwrap();
    let options = scalevfs_fuse::MountOptions {
        ring_spin: spin,
        ..options(2)
    };
    let server = mount_with(dir.path(), &options).unwrap();
    let file = dir.path().join("f");
    std::fs::write(&file, b"x").unwrap();
    let before = server_cpu_ns();
    open_close(&file, 2000);
    assert!(
        server_cpu_ns() > before,
        "the workers' CPU time is not seen"
    );
    // The last RELEASE is answered in the background, and then each worker may spin once:
    // wait until that is over, that is until the workers' CPU time has stood still for
    // 100 ms (however long a loaded machine takes to run them), and bound the CPU time
    // they used meanwhile.
    wait_for(&server, "the last release", |s| s.open_files == 0);
    let settle_start = server_cpu_ns();
    let deadline = std::time::Instant::now() + PATIENCE;
    let mut last = settle_start;
    loop {
        std::thread::sleep(Duration::from_millis(100));
        let now = server_cpu_ns();
        if now == last {
            break;
        }
        last = now;
        assert!(
            std::time::Instant::now() < deadline,
            "the workers never stopped running (spin {spin:?})"
        );
    }
    let settling = Duration::from_nanos(last - settle_start);
    assert!(
        settling < Duration::from_millis(200),
        "the workers used {settling:?} of CPU after the last answer (spin {spin:?})"
    );
    let start = last;
    std::thread::sleep(Duration::from_secs(1));
    let idle = Duration::from_nanos(server_cpu_ns() - start);
    assert!(
        idle < Duration::from_millis(30),
        "idle workers used {idle:?} of CPU in a second (spin {spin:?})"
    );
    server.unmount().unwrap();
}

fuse_test! {
    fn an_idle_mount_uses_no_cpu() {
        require_fuse!();
        idle_workers_sleep(scalevfs_fuse::RING_SPIN);
        idle_workers_sleep(Duration::from_millis(5));
    }
}

fuse_test! {
    /// Eight threads, each with its own open file description, take turns at an OFD
    /// write lock (`F_OFD_SETLKW`, so most of them wait in the server and are answered
    /// from another thread) to increment a counter in the file, opening and closing
    /// another file between turns: every increment lands (the lock excluded the others),
    /// and nothing is left waiting or open. The io_uring workers spin 20 µs after each
    /// answer, so answers posted by the waiters' threads meet spinning workers too.
    fn lock_waiters_and_open_close_from_many_threads() {
        require_fuse!();
        const THREADS: usize = 8;
        const TURNS: u64 = 300;
        let dir = tempfile::tempdir().unwrap();
        let options = scalevfs_fuse::MountOptions {
            ring_spin: Duration::from_micros(20),
            ..options(2)
        };
        let server = mount_with(dir.path(), &options).unwrap();
        let counter = dir.path().join("counter");
        std::fs::write(&counter, 0u64.to_ne_bytes()).unwrap();
        let other = dir.path().join("other");
        std::fs::write(&other, b"x").unwrap();
        std::thread::scope(|s| {
            for _ in 0..THREADS {
                s.spawn(|| {
                    let f = open_rw(&counter);
                    for _ in 0..TURNS {
                        let mut fl = flock_struct(libc::F_WRLCK, 0, 8);
                        fcntl_lock(f.as_raw_fd(), libc::F_OFD_SETLKW, &mut fl).unwrap();
                        let mut n = [0u8; 8];
                        f.read_exact_at(&mut n, 0).unwrap();
                        let n = u64::from_ne_bytes(n) + 1;
                        f.write_all_at(&n.to_ne_bytes(), 0).unwrap();
                        let mut fl = flock_struct(libc::F_UNLCK, 0, 8);
                        fcntl_lock(f.as_raw_fd(), libc::F_OFD_SETLK, &mut fl).unwrap();
                        open_close(&other, 1);
                    }
                });
            }
        });
        let n = std::fs::read(&counter).unwrap();
        assert_eq!(n, (THREADS as u64 * TURNS).to_ne_bytes());
        wait_for(&server, "no waiter and no open file", |s| {
            s.waiting == 0 && s.open_files == 0
        });
        server.unmount().unwrap();
    }
}
