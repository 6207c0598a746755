//! The harness of the mount tests: gating (root, /dev/fuse, fusermount3), the
//! process-wide test mutex, fork helpers and bounded waits.
#![allow(dead_code)]

use std::ffi::CString;
use std::fs::File;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::time::{Duration, Instant};

use scalevfs_fuse::{Server, Stats, Transport};

pub mod uring_guard;

pub fn skip_reason() -> Option<String> {
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
pub static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// How long the bounded waits wait for something that needs only the scheduler to run
/// another thread or process (a request to reach the server, a child to finish): only a
/// failing run waits this long. (With 10 s, CI on a loaded 2-core machine running the
/// debug-assertion build once had only two of eight lock waiters at the server.)
pub const PATIENCE: Duration = Duration::from_secs(60);

#[macro_export]
macro_rules! require_fuse {
    () => {
        if let Some(why) = $crate::common::skip_reason() {
            eprintln!("SKIPPED: FUSE mount test needs root, /dev/fuse and fusermount3: {why}");
            return;
        }
        let _serial = $crate::common::SERIAL
            .lock()
            .unwrap_or_else(|e| e.into_inner());
    };
}

std::thread_local! {
    static TRANSPORT: std::cell::Cell<Transport> = const { std::cell::Cell::new(Transport::Dev) };
}

/// The transport the running test's mounts use (set by [`fuse_test!`]).
pub fn transport() -> Transport {
    TRANSPORT.with(|t| t.get())
}

/// Runs a test body with its mounts served over `transport`. For io_uring the fuse
/// module's `enable_uring` is held on meanwhile ([`uring_guard::EnableUring`]); where it
/// cannot be, the test is skipped with the reason.
pub fn run_over(transport: Transport, body: impl FnOnce()) {
    let _uring = match transport {
        Transport::Uring => match uring_guard::EnableUring::acquire() {
            Ok(g) => Some(g),
            Err(why) => {
                eprintln!("SKIPPED: the io_uring variant needs enable_uring: {why}");
                return;
            }
        },
        _ => None,
    };
    TRANSPORT.with(|t| t.set(transport));
    body();
}

/// Defines a mount test twice, as `NAME::dev` and `NAME::uring`: the body runs with its
/// mounts ([`mount`], [`options`]) served over `/dev/fuse`, then over io_uring.
#[macro_export]
macro_rules! fuse_test {
    ($(#[$meta:meta])* fn $name:ident() $body:block) => {
        $(#[$meta])*
        mod $name {
            #[allow(unused_imports)]
            use super::*;
            #[test]
            fn dev() {
                $crate::common::run_over(scalevfs_fuse::Transport::Dev, || $body)
            }
            #[test]
            fn uring() {
                $crate::common::run_over(scalevfs_fuse::Transport::Uring, || $body)
            }
        }
    };
}

/// Mount options with `threads` workers and the running test's transport.
pub fn options(threads: usize) -> scalevfs_fuse::MountOptions {
    scalevfs_fuse::MountOptions {
        threads,
        transport: transport(),
        ..Default::default()
    }
}

/// Mounts with `options`, checking that the test's transport serves the mount.
pub fn mount_with(
    dir: &Path,
    options: &scalevfs_fuse::MountOptions,
) -> Result<Server, scalevfs_fuse::MountError> {
    let server = Server::mount_with(dir, options)?;
    assert_eq!(
        server.transport().is_uring(),
        options.transport == Transport::Uring,
        "{}",
        server.transport()
    );
    Ok(server)
}

pub fn mount(threads: usize) -> (tempfile::TempDir, Server) {
    let dir = tempfile::tempdir().unwrap();
    let server = mount_with(dir.path(), &options(threads)).expect("mount");
    (dir, server)
}

/// A mount that other users may use too (`allow_other`), with its root open to all
/// (0777): for tests that drop to other uids. Returns the directory, the server and the
/// root's path.
#[allow(dead_code)] // not every test binary uses it
pub fn mount_for_everyone() -> (tempfile::TempDir, Server, std::path::PathBuf) {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let opts = scalevfs_fuse::MountOptions {
        allow_other: true,
        ..options(2)
    };
    let server = mount_with(dir.path(), &opts).unwrap();
    let root = dir.path().to_owned();
    std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o777)).unwrap();
    (dir, server, root)
}

pub fn cpath(p: &Path) -> CString {
    CString::new(p.as_os_str().as_bytes()).unwrap()
}

/// The errno of a failed call (panics if it succeeded).
pub fn errno_of<T: std::fmt::Debug>(r: std::io::Result<T>) -> i32 {
    r.unwrap_err().raw_os_error().unwrap()
}

pub fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap()
}

pub fn open_rw(p: &Path) -> File {
    File::options().read(true).write(true).open(p).unwrap()
}

pub fn flock_struct(ty: i32, start: i64, len: i64) -> libc::flock {
    // SAFETY: libc::flock is plain data; all-zero is a valid value.
    let mut fl: libc::flock = unsafe { std::mem::zeroed() };
    fl.l_type = ty as i16;
    fl.l_whence = libc::SEEK_SET as i16;
    fl.l_start = start;
    fl.l_len = len;
    fl
}

/// `fcntl(fd, cmd, &fl)`: Ok or the errno.
pub fn fcntl_lock(fd: i32, cmd: i32, fl: &mut libc::flock) -> Result<(), i32> {
    // SAFETY: `fl` is a live, initialised struct flock.
    if unsafe { libc::fcntl(fd, cmd, fl as *mut libc::flock) } == 0 {
        Ok(())
    } else {
        Err(errno())
    }
}

pub fn flock(fd: i32, op: i32) -> Result<(), i32> {
    // SAFETY: plain syscall.
    if unsafe { libc::flock(fd, op) } == 0 {
        Ok(())
    } else {
        Err(errno())
    }
}

pub struct Pipe {
    pub r: i32,
    pub w: i32,
}

impl Pipe {
    pub fn new() -> Pipe {
        let mut fds = [0; 2];
        // SAFETY: `fds` has room for the two descriptors.
        assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
        Pipe {
            r: fds[0],
            w: fds[1],
        }
    }
    pub fn send(&self, b: u8) {
        // SAFETY: writes one byte from a live u8.
        let n = unsafe { libc::write(self.w, (&b as *const u8).cast(), 1) };
        assert_eq!(n, 1);
    }
    /// Waits at most 60 s for a byte: the parent keeps the write end open too, so a child
    /// that exits (or fails) before it sends would otherwise leave this read waiting forever.
    pub fn recv(&self) -> u8 {
        let mut pfd = libc::pollfd {
            fd: self.r,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one live pollfd.
        let ready = unsafe { libc::poll(&mut pfd, 1, 60_000) };
        assert_eq!(ready, 1, "nothing came through the pipe within 60 s");
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
pub fn catch_sigusr1_without_restart() {
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
pub fn fork_child(f: impl FnOnce() -> i32) -> i32 {
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

/// Waits at most [`PATIENCE`] for `pid`; returns its exit code (kills it and panics on
/// timeout).
pub fn wait_child(pid: i32) -> i32 {
    let deadline = Instant::now() + PATIENCE;
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

/// Waits (at most [`PATIENCE`]) until the server's counters satisfy `cond`.
pub fn wait_for(server: &Server, what: &str, cond: impl Fn(&Stats) -> bool) {
    let deadline = Instant::now() + PATIENCE;
    while !cond(&server.stats()) {
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {what}: {:?}",
            server.stats()
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

pub fn mounted(p: &Path) -> bool {
    let mi = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    let p = p.to_str().unwrap();
    mi.lines().any(|l| l.split(' ').nth(4) == Some(p))
}

/// Waits (at most [`PATIENCE`], writing `drop_caches` meanwhile) until the kernel has
/// forgotten every node. `false`: `drop_caches` cannot be written here.
pub fn forget_all(server: &Server) -> bool {
    let deadline = Instant::now() + PATIENCE;
    while server.stats().lookups != 0 {
        if let Err(e) = std::fs::write("/proc/sys/vm/drop_caches", b"2") {
            eprintln!("cannot write /proc/sys/vm/drop_caches to force forgets: {e}");
            return false;
        }
        assert!(
            Instant::now() < deadline,
            "lookups leaked: {:?}",
            server.stats()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    true
}

/// The end of a leak test: waits for every file to be released and every lookup to be
/// forgotten, then checks that the node table is empty and the VFS is back to `base`
/// inodes, and unmounts. Skips the check (saying so) if forgets cannot be forced.
pub fn unmount_leaking_nothing(server: Server, base: usize) {
    wait_for(&server, "every file released", |s| s.open_files == 0);
    if !forget_all(&server) {
        eprintln!("SKIPPED the forget half of the leak test");
        return;
    }
    let vfs = server.vfs().clone();
    vfs.drop_caches();
    assert_eq!(server.stats().nodes, 0);
    assert_eq!(vfs.inode_count(), base, "no inode leaked");
    server.unmount().unwrap();
}

/// In a forked child: opens `p` and write-locks it all with `F_SETLKW`; the exit code
/// says how the wait ended: 0 `EINTR`, 1 the open failed, 2 the lock was granted,
/// 3 another error.
pub fn setlkw_exit_code(p: &std::ffi::CStr) -> i32 {
    // SAFETY: `p` is a valid NUL-terminated path.
    let fd = unsafe { libc::open(p.as_ptr(), libc::O_RDWR) };
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
