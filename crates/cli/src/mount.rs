//! `scalevfs mount` and `scalevfs umount`: serve a scalevfs file system on a directory
//! through FUSE (the server is `scalevfs_fuse::Server`; the plan is `docs/fuse.md`,
//! section 8).
//!
//! ## Mounting
//!
//! `preflight` runs first, in the calling process, so that a missing mount point, a
//! missing `/dev/fuse`, too little privilege or a missing `fusermount3` is one line on
//! stderr and exit status 1, daemon or not.
//!
//! Without `--foreground` the process forks **before** it mounts and before any thread
//! exists (a fork of a multi-threaded process may leave locks held forever in the child).
//! The child calls `setsid`, makes stdin/stdout `/dev/null` and its stderr the write end of
//! a pipe to the parent, and mounts. The parent copies what arrives on the pipe to its
//! own stderr (this is how `fusermount3`'s own complaints reach the user) until a
//! [`TOKEN`] line says `mounted` (exit 0) or `error` (print it, exit 1); end of file
//! without a token means the child died. Once mounted the child points stderr at
//! `/dev/null` too, so that nothing holds the caller's terminal or pipes open; a failure
//! after that point (an unmount that went wrong) goes to the system log.
//!
//! ## Running and stopping
//!
//! SIGINT and SIGTERM are blocked before `Server::mount_with` starts the worker threads
//! (threads inherit the mask), so they are only ever taken synchronously by the main
//! thread: it sleeps in `poll`, with no timeout, on a signalfd together with
//! `/proc/self/mountinfo`, which reports `POLLPRI` whenever the mount table changes. A
//! signal, or our mount disappearing from mountinfo (`scalevfs umount`, `fusermount3 -u`,
//! `umount -l`), ends the wait; then `Server::unmount` cancels waiting lock requests,
//! aborts the connection (files still open on a lazily detached mount then fail with
//! `ENOTCONN` instead of keeping a daemon nobody can reach), detaches our mount if it is
//! still there and on top, and joins the workers; the exit status is 0. Our mount is
//! recognised by its mount id, read right after mounting, so that neither a mount beneath
//! it nor another mount on the same directory later is ever taken for ours
//! (`scalevfs_fuse::mounts`).
//!
//! While serving, the server's idle watcher gives freed memory back to the kernel about
//! half a second after the last request (`MountOptions::on_idle`): mimalloc would
//! otherwise keep a deleted file's pages resident until later allocations.
//!
//! ## Unmounting
//!
//! `scalevfs umount X` pins the mount on top at X (an `O_PATH` descriptor), checks in
//! `/proc/self/mountinfo` that it is a scalevfs FUSE mount (fstype `fuse.scalevfs*`, or
//! plain `fuse` with a `scalevfs*` source, which is how a server that sets only `fsname=`
//! shows up) mounted at X, and detaches exactly that mount through the descriptor
//! (`umount2("/proc/self/fd/N", MNT_DETACH)`) as root, or with `fusermount3 -u -z`
//! otherwise. A scalevfs mount covered by another file system is refused as "not a
//! scalevfs mount": what is on top at X is not ours to remove. The daemon sees its mount
//! go and exits.

use std::ffi::CString;
use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use clap::builder::RangedU64ValueParser;
use clap::{Args, ValueEnum};
use scalevfs_fuse::{mounts, MountOptions, Server, Transport};

/// Marks the lines the daemon child writes for its parent (mixed on the same pipe with
/// whatever `fusermount3` prints).
const TOKEN: &str = "\u{1}scalevfs-daemon:";

#[derive(Args, Debug)]
pub struct MountArgs {
    /// The directory to mount on.
    pub mountpoint: PathBuf,
    /// Limit on file data, like tmpfs `size=`: bytes, or with a K, M or G suffix (powers of
    /// 1024). 0 means no limit (the default).
    #[arg(long, value_name = "BYTES", value_parser = parse_size)]
    pub size: Option<u64>,
    /// Limit on the number of inodes, like tmpfs `nr_inodes=`. 0 means no limit (the
    /// default).
    #[arg(long, value_name = "N")]
    pub inodes: Option<u64>,
    /// Threads serving FUSE requests through /dev/fuse (default: the number of CPUs);
    /// with io_uring (--transport) one thread per CPU serves instead.
    #[arg(long, value_name = "N", value_parser = RangedU64ValueParser::<usize>::new().range(1..=1024))]
    pub threads: Option<usize>,
    /// Mount the kernfs demo tree at /sys inside the mount.
    #[arg(long)]
    pub sys: bool,
    /// Let other users use the mount (fusermount3 allows it for non-root users only with
    /// `user_allow_other` in /etc/fuse.conf).
    #[arg(long)]
    pub allow_other: bool,
    /// Stay in the foreground (default: become a daemon once mounted).
    #[arg(long)]
    pub foreground: bool,
    /// Do not serve extended attributes (they fail with EOPNOTSUPP), so that the kernel
    /// stops asking for security.capability before every write: faster small writes.
    #[arg(long)]
    pub no_xattr: bool,
    /// How requests reach the server: `uring` serves each CPU's requests on that CPU
    /// through io_uring (needs the fuse module's enable_uring parameter set to Y before
    /// mounting; the mount fails if it cannot), `dev` reads /dev/fuse with --threads
    /// workers, `auto` takes io_uring when the kernel offers it. The "mounted" line says
    /// which one serves, and why not io_uring.
    #[arg(long, value_enum, default_value_t = TransportArg::Auto)]
    pub transport: TransportArg,
}

/// `--transport` (see [`scalevfs_fuse::Transport`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum TransportArg {
    /// io_uring when the kernel offers it, else /dev/fuse.
    Auto,
    /// FUSE over io_uring, one queue per CPU.
    Uring,
    /// /dev/fuse read by worker threads.
    Dev,
}

impl From<TransportArg> for Transport {
    fn from(t: TransportArg) -> Transport {
        match t {
            TransportArg::Auto => Transport::Auto,
            TransportArg::Uring => Transport::Uring,
            TransportArg::Dev => Transport::Dev,
        }
    }
}

#[derive(Args, Debug)]
pub struct UmountArgs {
    /// Where a scalevfs file system is mounted.
    pub mountpoint: PathBuf,
}

/// `--size`: plain bytes or a K/M/G (KiB/MiB/GiB) suffix, either case.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let (digits, shift) = match s.as_bytes().last() {
        Some(b'k' | b'K') => (&s[..s.len() - 1], 10),
        Some(b'm' | b'M') => (&s[..s.len() - 1], 20),
        Some(b'g' | b'G') => (&s[..s.len() - 1], 30),
        _ => (s, 0),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!(
            "'{s}' is not a size: use bytes or a number with K, M or G"
        ));
    }
    digits
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(1 << shift))
        .ok_or_else(|| format!("'{s}' is too large"))
}

impl MountArgs {
    fn options(&self) -> MountOptions {
        let defaults = MountOptions::default();
        MountOptions {
            threads: self.threads.unwrap_or(defaults.threads),
            // tmpfs: size=0 and nr_inodes=0 mean "no limit".
            size_limit: self.size.filter(|&n| n != 0),
            inode_limit: self.inodes.filter(|&n| n != 0),
            sys: self.sys,
            allow_other: self.allow_other,
            transport: self.transport.into(),
            // A daemon keeps fusermount3's watchdog, which unmounts if the daemon dies; in
            // the foreground the user sees the process (and the watchdog would complain
            // on stderr after our own clean unmount).
            auto_unmount: !self.foreground,
            xattrs: !self.no_xattr,
            // Freed memory (a deleted file's pages) goes back to the kernel within about
            // a second of going idle, not at some later request.
            on_idle: Some(scalevfs_bench::memory::release_free_memory),
            ring_entries: defaults.ring_entries,
            ring_spin: defaults.ring_spin,
        }
    }
}

/// `scalevfs mount`. Returns (in the foreground process or the daemon's parent) only the
/// error line to print; the daemon itself never returns.
pub fn mount(args: &MountArgs) -> Result<(), String> {
    scalevfs_fuse::preflight(&args.mountpoint).map_err(|e| e.to_string())?;
    // Canonical before any chdir("/"), and not after mounting: resolving the mount point
    // then would send a GETATTR to our own server.
    let path = std::fs::canonicalize(&args.mountpoint)
        .map_err(|e| format!("{}: {e}", args.mountpoint.display()))?;
    let options = args.options();
    if args.foreground {
        return serve(&path, &options, None);
    }
    // clap and preflight start no thread; check, since the child below relies on it.
    let threads = std::fs::read_dir("/proc/self/task").map_or(1, |d| d.count());
    if threads != 1 {
        return Err(format!(
            "internal error: {threads} threads before the daemon fork"
        ));
    }
    let (read_end, write_end) = pipe()?;
    // SAFETY: this process has one thread (checked above), so the child is a complete
    // copy of it, with no lock held by a thread that does not exist there.
    match unsafe { libc::fork() } {
        -1 => Err(format!("fork: {}", std::io::Error::last_os_error())),
        0 => {
            drop(read_end);
            let code = match daemon_child(&path, &options, write_end) {
                Ok(()) => 0,
                Err(_) => 1,
            };
            std::process::exit(code);
        }
        child => {
            drop(write_end);
            parent_wait(&path, child, read_end)
        }
    }
}

/// The daemon's parent: relays the child's stderr until it says how the mount went.
fn parent_wait(path: &Path, child: libc::pid_t, read_end: OwnedFd) -> Result<(), String> {
    let mut lines = BufReader::new(File::from(read_end));
    let mut line = Vec::new();
    loop {
        line.clear();
        // Bytes, not a String: fusermount3 may print a path that is not UTF-8.
        match lines.read_until(b'\n', &mut line) {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        let text = String::from_utf8_lossy(&line);
        let text = text.trim_end_matches('\n');
        match text.strip_prefix(TOKEN) {
            Some(m) if m.starts_with("mounted") => {
                let how = m.strip_prefix("mounted ").unwrap_or("");
                println!("mounted {} (daemon pid {child}, {how})", path.display());
                return Ok(());
            }
            Some(error) => {
                reap(child);
                return Err(error.strip_prefix("error ").unwrap_or(error).to_string());
            }
            None => eprintln!("{text}"),
        }
    }
    let status = reap(child);
    Err(format!(
        "the daemon exited before mounting ({})",
        status.unwrap_or_else(|| "status unknown".into())
    ))
}

/// Waits for the failed daemon child; describes how it ended.
fn reap(child: libc::pid_t) -> Option<String> {
    let mut status = 0;
    // SAFETY: waiting for our own child; `status` is a live c_int.
    if unsafe { libc::waitpid(child, &mut status, 0) } != child {
        return None;
    }
    Some(if libc::WIFSIGNALED(status) {
        format!("killed by signal {}", libc::WTERMSIG(status))
    } else {
        format!("exit status {}", libc::WEXITSTATUS(status))
    })
}

/// The daemon: detach from the terminal, route stderr to the parent, serve.
fn daemon_child(path: &Path, options: &MountOptions, to_parent: OwnedFd) -> Result<(), String> {
    let null = File::options()
        .read(true)
        .write(true)
        .open("/dev/null")
        .map_err(|e| format!("/dev/null: {e}"))?;
    // SAFETY: setsid, dup2 and chdir are plain syscalls on fds we own (or 0-2) and a
    // NUL-terminated constant path.
    unsafe {
        libc::setsid();
        libc::dup2(null.as_raw_fd(), 0);
        libc::dup2(null.as_raw_fd(), 1);
        libc::dup2(to_parent.as_raw_fd(), 2);
        libc::chdir(c"/".as_ptr());
    }
    drop(to_parent);
    let report = |msg: &str| {
        // One write(2) of one line, so it cannot interleave with fusermount3's output.
        let _ = std::io::stderr().write_all(format!("{TOKEN}{msg}\n").as_bytes());
    };
    let mounted = |how: &str| {
        report(&format!("mounted {how}"));
        // Nobody reads our stderr any more: let go of the parent's pipe (and so of the
        // caller's terminal or pipes), and make later writes succeed into /dev/null.
        // SAFETY: dup2 of an open fd onto fd 2.
        unsafe { libc::dup2(null.as_raw_fd(), 2) };
    };
    let result = serve(path, options, Some(&mounted));
    if let Err(e) = &result {
        // Before `mounted` the parent relays this line; after it stderr is /dev/null,
        // so the system log is the only place a detached daemon's failure can be read.
        report(&format!("error {e}"));
        log_error(&format!("scalevfs mount {}: {e}", path.display()));
    }
    result
}

/// One `LOG_DAEMON | LOG_ERR` line in the system log (journald or syslogd, if running).
fn log_error(msg: &str) {
    let Ok(msg) = CString::new(msg.replace('\0', "")) else {
        return;
    };
    // SAFETY: a constant "%s" format with one NUL-terminated string argument.
    unsafe {
        libc::syslog(
            libc::LOG_DAEMON | libc::LOG_ERR,
            c"%s".as_ptr(),
            msg.as_ptr(),
        )
    };
}

/// Mounts, says so, waits for a signal or for the mount to disappear, unmounts.
fn serve(
    path: &Path,
    options: &MountOptions,
    mounted: Option<&dyn Fn(&str)>,
) -> Result<(), String> {
    let signals = SignalFd::block_int_term()?;
    let server = Server::mount_with(path, options).map_err(|e| e.to_string())?;
    let how = server.transport().to_string();
    match mounted {
        Some(f) => f(&how),
        None => println!("mounted {} ({how})", path.display()),
    }
    let why = wait_for_end(&signals, server.mount_id())?;
    let result = server.unmount().map_err(|e| format!("unmount failed: {e}"));
    if mounted.is_none() && result.is_ok() {
        println!("unmounted {} ({why})", path.display());
    }
    result
}

/// Blocks until SIGINT/SIGTERM arrives or mount `ours` leaves the mount table; says
/// which. Sleeps in `poll` with no timeout: the signalfd and the mount table's `POLLPRI`
/// (one event per change of this namespace's mounts, reset by the `poll` that reports it,
/// so a change between two checks is reported by the next `poll`) are the only wake-ups.
fn wait_for_end(signals: &SignalFd, ours: u64) -> Result<String, String> {
    let table = mounts::mount_table_events().map_err(|e| format!("mountinfo: {e}"))?;
    let mut fds = [
        libc::pollfd {
            fd: signals.fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        },
        libc::pollfd {
            fd: table.as_raw_fd(),
            events: libc::POLLPRI,
            revents: 0,
        },
    ];
    loop {
        // Checked before each sleep: a change before `table` was opened is seen here.
        let still = mounts::fuse_mount_by_id(ours).map_or(true, |m| m.is_some());
        if !still {
            return Ok("unmounted from outside".into());
        }
        // SAFETY: `fds` is a live array of two pollfds.
        let r = unsafe { libc::poll(fds.as_mut_ptr(), 2, -1) };
        if r < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(format!("poll: {e}"));
        }
        if fds[0].revents & libc::POLLIN != 0 {
            return Ok(format!("signal {}", signals.read()?));
        }
    }
}

/// SIGINT and SIGTERM, blocked in this thread (and so in every thread it starts later),
/// readable from a signalfd.
struct SignalFd {
    fd: OwnedFd,
}

impl SignalFd {
    fn block_int_term() -> Result<SignalFd, String> {
        // SAFETY: sigset_t is plain data initialised by sigemptyset before use;
        // pthread_sigmask and signalfd only read it.
        let fd = unsafe {
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, libc::SIGINT);
            libc::sigaddset(&mut set, libc::SIGTERM);
            libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
            libc::signalfd(-1, &set, libc::SFD_CLOEXEC)
        };
        if fd < 0 {
            return Err(format!("signalfd: {}", std::io::Error::last_os_error()));
        }
        // SAFETY: `fd` was just returned by signalfd and is owned by nobody else.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        Ok(SignalFd { fd })
    }

    /// The number of the pending signal (after poll said one is there).
    fn read(&self) -> Result<u32, String> {
        // SAFETY: signalfd_siginfo is plain data; zeroed is a valid value.
        let mut info: libc::signalfd_siginfo = unsafe { std::mem::zeroed() };
        let size = std::mem::size_of::<libc::signalfd_siginfo>();
        // SAFETY: reading at most `size` bytes into `info`.
        let n = unsafe {
            libc::read(
                self.fd.as_raw_fd(),
                (&mut info as *mut libc::signalfd_siginfo).cast(),
                size,
            )
        };
        if n != size as isize {
            return Err(format!("signalfd: {}", std::io::Error::last_os_error()));
        }
        Ok(info.ssi_signo)
    }
}

fn pipe() -> Result<(OwnedFd, OwnedFd), String> {
    let mut fds = [0; 2];
    // SAFETY: `fds` has room for the two descriptors pipe2 returns.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } < 0 {
        return Err(format!("pipe: {}", std::io::Error::last_os_error()));
    }
    // SAFETY: both fds were just created and are owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

// ------------------------------------------------------------------- umount

/// `scalevfs umount`: detaches the scalevfs mount on top at the path, and nothing else.
pub fn umount(args: &UmountArgs) -> Result<(), String> {
    let shown = args.mountpoint.display();
    let not_ours = || format!("{shown} is not a scalevfs mount");
    let path = mount_path(&args.mountpoint).ok_or_else(not_ours)?;
    // The mount on top there, pinned, so that what we check is what we detach.
    let top = mounts::TopMount::open(&path).map_err(|_| not_ours())?;
    let entry =
        mounts::fuse_mount_by_id(top.id).map_err(|e| format!("/proc/self/mountinfo: {e}"))?;
    if !entry.is_some_and(|m| m.scalevfs && m.mount_point == path.as_os_str().as_bytes()) {
        return Err(not_ours());
    }
    let id = top.id;
    match top.detach() {
        Ok(()) => return Ok(()),
        Err(e) if e.raw_os_error() == Some(libc::EPERM) => {}
        Err(e) => return Err(format!("cannot unmount {shown}: {e}")),
    }
    // Not root: the setuid helper, right after a fresh check (see `mounts::detach_ours`).
    match mounts::detach_ours(&path, id, scalevfs_fuse::fusermount_path) {
        Ok(mounts::Detach::Done | mounts::Detach::Gone) => Ok(()),
        Ok(mounts::Detach::Covered) => Err(format!(
            "{shown} changed while unmounting: another mount is on top now"
        )),
        Err(e) => Err(format!("no permission to unmount {shown} ({e})")),
    }
}

/// `p` made absolute without touching its last component: on a mount whose daemon is
/// gone, `stat` of the mount point fails with `ENOTCONN`, and it must still be possible
/// to unmount it.
fn mount_path(p: &Path) -> Option<PathBuf> {
    if let Ok(c) = std::fs::canonicalize(p) {
        return Some(c);
    }
    let name = p.file_name()?;
    let parent = match p.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    Some(std::fs::canonicalize(parent).ok()?.join(name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("0"), Ok(0));
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("1k"), Ok(1024));
        assert_eq!(parse_size("64M"), Ok(64 << 20));
        assert_eq!(parse_size("2G"), Ok(2 << 30));
        for bad in ["", "K", "-1", "+1", "1.5G", "1T", "12X", " 1", "0x10"] {
            assert!(parse_size(bad).is_err(), "{bad:?}");
        }
        assert!(parse_size("18446744073709551615").is_ok());
        assert!(parse_size("18446744073709551615K")
            .unwrap_err()
            .contains("too large"));
    }

    #[test]
    fn options_follow_tmpfs_zero_means_unlimited() {
        let a = MountArgs {
            mountpoint: "/x".into(),
            size: Some(0),
            inodes: Some(7),
            threads: Some(3),
            sys: true,
            allow_other: false,
            foreground: true,
            no_xattr: true,
            transport: TransportArg::Uring,
        };
        let o = a.options();
        assert_eq!(
            (
                o.threads,
                o.size_limit,
                o.inode_limit,
                o.sys,
                o.auto_unmount,
                o.xattrs,
                o.transport
            ),
            (3, None, Some(7), true, false, false, Transport::Uring)
        );
    }
}
