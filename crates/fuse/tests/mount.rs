//! Drives a real FUSE mount of the spike tree with real system calls, from this process and
//! from forked children. Needs root, /dev/fuse and fusermount3 (package fuse3); without
//! them each test prints why it is skipped and passes.

use std::ffi::CString;
use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::io::AsRawFd;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use scalevfs_fuse::{MountError, Server, Stats};

fn skip_reason() -> Option<String> {
    if !Path::new("/dev/fuse").exists() {
        return Some("/dev/fuse is absent".into());
    }
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Some("not root".into());
    }
    if scalevfs_fuse::fusermount_path().is_none() {
        return Some("fusermount3 is missing (apt-get install fuse3)".into());
    }
    None
}

/// The mount tests run one at a time: a child forked by one test inherits every fd the
/// other tests have open at that moment, which delays their last close (FUSE_RELEASE)
/// until the child exits and so changes what they observe.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

macro_rules! require_fuse {
    () => {
        if let Some(why) = skip_reason() {
            eprintln!("SKIPPED: FUSE mount test needs root, /dev/fuse and fusermount3: {why}");
            return;
        }
        let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    };
}

fn mount(threads: usize) -> (tempfile::TempDir, Server) {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::mount(dir.path(), threads).expect("mount");
    (dir, server)
}

fn cpath(p: &Path) -> CString {
    CString::new(p.as_os_str().as_bytes()).unwrap()
}

fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap()
}

fn open_rw(p: &Path) -> File {
    File::options().read(true).write(true).open(p).unwrap()
}

fn flock_struct(ty: i32, start: i64, len: i64) -> libc::flock {
    // SAFETY: libc::flock is plain data; all-zero is a valid value.
    let mut fl: libc::flock = unsafe { std::mem::zeroed() };
    fl.l_type = ty as i16;
    fl.l_whence = libc::SEEK_SET as i16;
    fl.l_start = start;
    fl.l_len = len;
    fl
}

/// `fcntl(fd, cmd, &fl)`: Ok or the errno.
fn fcntl_lock(fd: i32, cmd: i32, fl: &mut libc::flock) -> Result<(), i32> {
    // SAFETY: `fl` is a live, initialised struct flock.
    if unsafe { libc::fcntl(fd, cmd, fl as *mut libc::flock) } == 0 {
        Ok(())
    } else {
        Err(errno())
    }
}

fn flock(fd: i32, op: i32) -> Result<(), i32> {
    // SAFETY: plain syscall.
    if unsafe { libc::flock(fd, op) } == 0 {
        Ok(())
    } else {
        Err(errno())
    }
}

struct Pipe {
    r: i32,
    w: i32,
}

impl Pipe {
    fn new() -> Pipe {
        let mut fds = [0; 2];
        // SAFETY: `fds` has room for the two descriptors.
        assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
        Pipe {
            r: fds[0],
            w: fds[1],
        }
    }
    fn send(&self, b: u8) {
        // SAFETY: writes one byte from a live u8.
        let n = unsafe { libc::write(self.w, (&b as *const u8).cast(), 1) };
        assert_eq!(n, 1);
    }
    fn recv(&self) -> u8 {
        let mut b = 0u8;
        // SAFETY: reads one byte into a live u8.
        let n = unsafe { libc::read(self.r, (&mut b as *mut u8).cast(), 1) };
        assert_eq!(n, 1, "pipe closed early");
        b
    }
}

impl Drop for Pipe {
    fn drop(&mut self) {
        // SAFETY: we own both descriptors.
        unsafe {
            libc::close(self.r);
            libc::close(self.w);
        }
    }
}

/// Installs a SIGUSR1 handler that does nothing, without `SA_RESTART`, so that a system
/// call it interrupts returns `EINTR`.
fn catch_sigusr1_without_restart() {
    extern "C" fn on_usr1(_: i32) {}
    // SAFETY: a zeroed sigaction is valid; the handler is async-signal-safe (empty).
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_usr1 as extern "C" fn(i32) as usize;
        libc::sigemptyset(&mut sa.sa_mask);
        libc::sigaction(libc::SIGUSR1, &sa, std::ptr::null_mut());
    }
}

/// Forks; the child runs `f` (raw system calls only) and exits with its result.
fn fork_child(f: impl FnOnce() -> i32) -> i32 {
    // SAFETY: the child only makes system calls through `f` and then `_exit`s; it never
    // returns into the test harness.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        let code = f();
        // SAFETY: ends the child without running the parent's destructors.
        unsafe { libc::_exit(code) };
    }
    pid
}

/// Waits at most 20 s for `pid`; returns its exit code (kills it and panics on timeout).
fn wait_child(pid: i32) -> i32 {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let mut status = 0;
        // SAFETY: `status` is a live c_int.
        let r = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
        if r == pid {
            assert!(libc::WIFEXITED(status), "child died by signal: {status:#x}");
            return libc::WEXITSTATUS(status);
        }
        if Instant::now() > deadline {
            // SAFETY: signals our own child.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            panic!("child {pid} did not finish");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn wait_for(server: &Server, what: &str, cond: impl Fn(&Stats) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !cond(&server.stats()) {
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {what}: {:?}",
            server.stats()
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn mounted(p: &Path) -> bool {
    let mi = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    let p = p.to_str().unwrap();
    mi.lines().any(|l| l.split(' ').nth(4) == Some(p))
}

#[test]
fn preflight_reports_one_line_errors() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nope");
    let e = scalevfs_fuse::preflight(&missing).unwrap_err();
    assert!(matches!(e, MountError::NoMountPoint(_)));
    assert_eq!(
        e.to_string(),
        format!("mount point {} does not exist", missing.display())
    );
    let file = dir.path().join("f");
    std::fs::write(&file, b"x").unwrap();
    let e = scalevfs_fuse::preflight(&file).unwrap_err();
    assert!(matches!(e, MountError::NotADirectory(_)));
    assert!(!e.to_string().contains('\n'));
}

#[test]
fn tree_is_served_by_many_threads() {
    require_fuse!();
    let (dir, server) = mount(4);
    let root = dir.path();
    assert!(mounted(root));
    let mut names: Vec<_> = std::fs::read_dir(root)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, ["event", "hello", "lockme", "sub"]);
    assert!(std::fs::metadata(root.join("sub")).unwrap().is_dir());
    assert_eq!(std::fs::metadata(root.join("lockme")).unwrap().len(), 4096);
    assert_eq!(
        std::fs::read_dir(root.join("sub")).unwrap().count(),
        1,
        "sub holds only inner"
    );
    assert_eq!(
        std::fs::metadata(root.join("nope"))
            .unwrap_err()
            .raw_os_error(),
        Some(libc::ENOENT)
    );
    assert_eq!(
        std::fs::metadata(root.join("hello/x"))
            .unwrap_err()
            .raw_os_error(),
        Some(libc::ENOTDIR)
    );
    // 16 threads reading at once, from this process.
    std::thread::scope(|s| {
        for _ in 0..16 {
            s.spawn(|| {
                for _ in 0..50 {
                    assert_eq!(std::fs::read(root.join("hello")).unwrap(), b"hello, fuse\n");
                    assert_eq!(std::fs::read(root.join("sub/inner")).unwrap(), b"inner\n");
                }
            });
        }
    });
    // And from a forked process.
    let p = cpath(&root.join("sub/inner"));
    let pid = fork_child(|| {
        let mut buf = [0u8; 16];
        // SAFETY: raw syscalls on a valid path and buffer.
        unsafe {
            let fd = libc::open(p.as_ptr(), libc::O_RDONLY);
            if fd < 0 {
                return 1;
            }
            let n = libc::read(fd, buf.as_mut_ptr().cast(), buf.len());
            if n != 6 || &buf[..6] != b"inner\n" {
                return 2;
            }
        }
        0
    });
    assert_eq!(wait_child(pid), 0);
    server.unmount().unwrap();
    assert!(!mounted(root));
}

#[test]
fn posix_and_flock_reach_the_server_as_different_kinds() {
    require_fuse!();
    let (dir, server) = mount(2);
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

#[test]
fn blocked_setlkw_is_interrupted_by_a_signal() {
    require_fuse!();
    // One worker: the blocked request must not occupy it, or neither the interrupt nor
    // the stat below could be served.
    let (dir, server) = mount(1);
    let path = dir.path().join("lockme");
    let f = open_rw(&path);
    let mut fl = flock_struct(libc::F_WRLCK, 0, 0);
    fcntl_lock(f.as_raw_fd(), libc::F_SETLK, &mut fl).unwrap();

    let p = cpath(&path);
    let pid = fork_child(|| {
        catch_sigusr1_without_restart();
        // SAFETY: raw syscalls on a valid path.
        unsafe {
            let fd = libc::open(p.as_ptr(), libc::O_RDWR);
            if fd < 0 {
                return 1;
            }
            let mut fl = flock_struct(libc::F_WRLCK, 0, 0);
            match fcntl_lock(fd, libc::F_SETLKW, &mut fl) {
                Err(libc::EINTR) => 0,
                Ok(()) => 2,
                Err(_) => 3,
            }
        }
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

#[test]
fn blocked_flock_is_interrupted_and_woken() {
    require_fuse!();
    let (dir, server) = mount(2);
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

#[test]
fn deadlock_between_two_processes_is_edeadlk() {
    require_fuse!();
    let (dir, server) = mount(2);
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

#[test]
fn ofd_locks_live_until_the_last_close() {
    require_fuse!();
    let (dir, server) = mount(2);
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

#[test]
fn lookup_counts_return_to_zero_after_forget() {
    require_fuse!();
    let (dir, server) = mount(2);
    for name in ["hello", "lockme", "sub/inner"] {
        std::fs::read(dir.path().join(name)).unwrap();
    }
    assert!(server.stats().lookups >= 4, "{:?}", server.stats());
    // Evicting the unused dentries and inodes makes the kernel send FORGET/BATCH_FORGET.
    let deadline = Instant::now() + Duration::from_secs(10);
    while server.stats().lookups != 0 {
        if let Err(e) = std::fs::write("/proc/sys/vm/drop_caches", b"2") {
            eprintln!("SKIPPED: cannot write /proc/sys/vm/drop_caches to force forgets: {e}");
            return;
        }
        assert!(
            Instant::now() < deadline,
            "lookups leaked: {:?}",
            server.stats()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    server.unmount().unwrap();
}

#[test]
fn unmount_with_open_files_and_a_blocked_locker() {
    require_fuse!();
    let (dir, server) = mount(2);
    let root = dir.path().to_owned();
    let mut held = File::open(root.join("hello")).unwrap();
    let f = open_rw(&root.join("lockme"));
    let mut fl = flock_struct(libc::F_WRLCK, 0, 0);
    fcntl_lock(f.as_raw_fd(), libc::F_SETLK, &mut fl).unwrap();
    let p = cpath(&root.join("lockme"));
    let pid = fork_child(|| {
        // SAFETY: raw syscalls on a valid path.
        let fd = unsafe { libc::open(p.as_ptr(), libc::O_RDWR) };
        let mut fl = flock_struct(libc::F_WRLCK, 0, 0);
        // The unmount cancels the wait: EINTR, or, if the abort overtakes our reply, the
        // kernel's ECONNABORTED for a pending request (ENOTCONN for a restarted one).
        match fcntl_lock(fd, libc::F_SETLKW, &mut fl) {
            Err(libc::EINTR) | Err(libc::ECONNABORTED) | Err(libc::ENOTCONN) => 0,
            Ok(()) => 1,
            Err(e) => e,
        }
    });
    wait_for(&server, "the child to block", |s| s.waiting == 1);
    server.unmount().unwrap();
    assert!(!mounted(&root), "detached while files were open");
    assert_eq!(wait_child(pid), 0, "the blocked locker was released");
    let mut buf = [0u8; 4];
    let e = held.read(&mut buf).unwrap_err();
    assert_eq!(
        e.raw_os_error(),
        Some(libc::ENOTCONN),
        "the connection is aborted"
    );
}

fn signal_unmounts(sig: i32) {
    let dir = tempfile::tempdir().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_scalevfs-fuse-spike"))
        .arg(dir.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert!(line.starts_with("mounted"), "{line:?}");
    assert!(mounted(dir.path()));
    let held = File::open(dir.path().join("hello")).unwrap();
    // SAFETY: signals our own child.
    unsafe { libc::kill(child.id() as i32, sig) };
    let deadline = Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        if Instant::now() > deadline {
            child.kill().unwrap();
            panic!("daemon did not exit on signal {sig}");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    assert!(status.success(), "{status:?}");
    assert!(!mounted(dir.path()), "unmounted on signal {sig}");
    drop(held);
}

#[test]
fn sigterm_unmounts_cleanly_with_a_file_open() {
    require_fuse!();
    signal_unmounts(libc::SIGTERM);
}

#[test]
fn sigint_unmounts_cleanly_with_a_file_open() {
    require_fuse!();
    signal_unmounts(libc::SIGINT);
}

#[test]
fn poll_is_woken_by_a_notification() {
    require_fuse!();
    let (dir, server) = mount(2);
    let mut f = File::open(dir.path().join("event")).unwrap();
    let mut text = String::new();
    f.read_to_string(&mut text).unwrap();
    assert_eq!(text, "0\n");
    let fd = f.as_raw_fd();
    let poller = std::thread::spawn(move || {
        let mut pfd = libc::pollfd {
            fd,
            events: libc::POLLPRI,
            revents: 0,
        };
        // SAFETY: one live pollfd; bounded by a 20 s timeout.
        let n = unsafe { libc::poll(&mut pfd, 1, 20_000) };
        (n, pfd.revents)
    });
    // The kernel asked to be notified (FUSE_POLL_SCHEDULE_NOTIFY) and is now sleeping.
    wait_for(&server, "the poll to register", |s| s.poll_handles == 1);
    server.notify_event();
    let (n, revents) = poller.join().unwrap();
    assert_eq!(
        n, 1,
        "poll returned because of the notification, not the timeout"
    );
    assert_ne!(revents & libc::POLLPRI, 0);
    // Reading the new value consumes the event, as on sysfs.
    let mut buf = [0u8; 8];
    let k = nix_pread(fd, &mut buf);
    assert_eq!(&buf[..k], b"1\n");
    drop(f);
    server.unmount().unwrap();
}

fn nix_pread(fd: i32, buf: &mut [u8]) -> usize {
    // SAFETY: reads into a live buffer of the given length.
    let n = unsafe { libc::pread(fd, buf.as_mut_ptr().cast(), buf.len(), 0) };
    assert!(n >= 0, "pread: {}", errno());
    n as usize
}
