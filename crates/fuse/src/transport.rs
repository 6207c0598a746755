//! How requests reach the server: `/dev/fuse` descriptors read by worker threads, or FUSE
//! over io_uring with one queue per CPU.
//!
//! * **`/dev/fuse`** ([`dev_worker`]): `threads` workers each block in `read(2)` on their
//!   own descriptor (the mount's, or a `FUSE_DEV_IOC_CLONE`): one input queue for all,
//!   so a request is taken by whichever worker the kernel wakes, usually on another CPU
//!   than the caller's.
//! * **io_uring** ([`ring_worker`]): the kernel keeps one request queue per possible CPU
//!   and puts each request on its caller's CPU's queue. Each queue is served by a worker
//!   pinned to that CPU, through its own ring (`proto::uring`), so the caller, the
//!   worker and the wake-ups between them stay on one CPU, and a reply and the wait for
//!   the next request are one system call. The kernel still sends INTERRUPT and FORGET
//!   on `/dev/fuse` (and every request until each queue has an entry), so one
//!   [`dev_worker`] reads the mount's descriptor too.
//!
//! [`Transport::Auto`] takes io_uring when it can: the kernel allows io_uring
//! (`/proc/sys/kernel/io_uring_disabled`), the fuse module's `enable_uring` parameter is
//! on when the mount is made (only then does INIT offer `FUSE_OVER_IO_URING`), INIT
//! offered it, and every queue registered. The server never changes the parameter;
//! [`TransportInUse`] says which transport serves the mount and, if not io_uring, why.

use std::fmt;
use std::io;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use crate::idle::IdleWatch;
use crate::proto::{self, Channel, Request};
use crate::server::Dispatcher;

/// Which transport a mount should use (`scalevfs mount --transport`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Transport {
    /// io_uring when the kernel offers it, else `/dev/fuse`.
    #[default]
    Auto,
    /// io_uring, or the mount fails saying why not.
    Uring,
    /// `/dev/fuse` read by worker threads.
    Dev,
}

impl std::str::FromStr for Transport {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "auto" => Ok(Transport::Auto),
            "uring" => Ok(Transport::Uring),
            "dev" => Ok(Transport::Dev),
            _ => Err(format!("unknown transport '{s}' (auto, uring or dev)")),
        }
    }
}

/// The transport serving a mount.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TransportInUse {
    /// FUSE over io_uring with this many CPU queues.
    Uring {
        /// Queues registered (one per possible CPU).
        queues: usize,
    },
    /// `/dev/fuse` worker threads.
    Dev {
        /// Why not io_uring (`None`: `--transport dev` asked for it).
        why_not_uring: Option<String>,
    },
}

impl TransportInUse {
    /// Whether io_uring serves the mount.
    pub fn is_uring(&self) -> bool {
        matches!(self, TransportInUse::Uring { .. })
    }
}

impl fmt::Display for TransportInUse {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TransportInUse::Uring { queues } => {
                write!(f, "transport io_uring, {queues} CPU queues")
            }
            TransportInUse::Dev {
                why_not_uring: None,
            } => write!(f, "transport /dev/fuse"),
            TransportInUse::Dev {
                why_not_uring: Some(why),
            } => write!(f, "transport /dev/fuse; io_uring off: {why}"),
        }
    }
}

/// The fuse module's switch for FUSE over io_uring.
pub const ENABLE_URING: &str = "/sys/module/fuse/parameters/enable_uring";
const IO_URING_DISABLED: &str = "/proc/sys/kernel/io_uring_disabled";

/// Why io_uring cannot serve a mount made now, before mounting: `Err` with the reason.
pub fn uring_precheck() -> Result<(), String> {
    check_settings(
        std::fs::read_to_string(IO_URING_DISABLED).ok().as_deref(),
        std::fs::read_to_string(ENABLE_URING).ok().as_deref(),
        // SAFETY: geteuid has no preconditions.
        unsafe { libc::geteuid() } == 0,
    )
}

/// [`uring_precheck`] on the two settings' contents (`None`: the file is missing).
fn check_settings(disabled: Option<&str>, enable: Option<&str>, root: bool) -> Result<(), String> {
    match disabled.map(str::trim) {
        Some("2") => return Err(format!("{IO_URING_DISABLED} is 2 (io_uring is off)")),
        Some("1") if !root => {
            return Err(format!(
                "{IO_URING_DISABLED} is 1 (io_uring for privileged users only)"
            ))
        }
        _ => {}
    }
    match enable.map(str::trim) {
        Some("Y") => Ok(()),
        Some(v) => Err(format!(
            "{ENABLE_URING} is {v} (root may set it to Y before mounting)"
        )),
        None => Err(format!(
            "{ENABLE_URING} is missing (the kernel has no FUSE over io_uring: 6.14 or later)"
        )),
    }
}

/// The kernel's queue count: one per possible CPU (`num_possible_cpus()`).
pub fn possible_cpus() -> usize {
    std::fs::read_to_string("/sys/devices/system/cpu/possible")
        .ok()
        .and_then(|s| count_cpu_list(s.trim()))
        .unwrap_or_else(scalevfs_primitives::cpu::num_cpus)
}

/// The number of CPUs in a list such as `0-3,5,7-8`.
fn count_cpu_list(list: &str) -> Option<usize> {
    list.split(',')
        .map(|part| match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (usize, usize) = (a.parse().ok()?, b.parse().ok()?);
                b.checked_sub(a).map(|n| n + 1)
            }
            None => part.parse::<usize>().ok().map(|_| 1),
        })
        .sum()
}

/// Pins the calling thread to `cpu`; false if it cannot (the CPU is offline).
fn pin_to(cpu: usize) -> bool {
    // SAFETY: cpu_set_t is plain data; all-zero is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    if cpu >= 8 * std::mem::size_of::<libc::cpu_set_t>() {
        return false;
    }
    // SAFETY: `cpu` is inside the set (checked above).
    unsafe { libc::CPU_SET(cpu, &mut set) };
    // SAFETY: the set is a live cpu_set_t of the size passed; 0 is this thread.
    unsafe { libc::sched_setaffinity(0, std::mem::size_of_val(&set), &set) == 0 }
}

/// A `/dev/fuse` worker: reads requests from `chan` into its own buffer and answers each.
pub(crate) fn dev_worker(
    inner: &Arc<Dispatcher>,
    chan: &Arc<Channel>,
    max_write: u32,
    idle: Option<&IdleWatch>,
) -> io::Result<()> {
    let mut buf = vec![0u8; proto::session::request_buffer_size(max_write)];
    loop {
        // ENODEV: the connection ended (abort or unmount).
        let Some(msg) = chan.read(&mut buf)? else {
            return Ok(());
        };
        match Request::parse(msg, chan) {
            Some(req) => inner.dispatch(req),
            // Shorter than its header says: answer EIO if there is a unique to answer
            // (so the caller is not left waiting); without a header, nothing to answer.
            None => {
                if let Some(unique) = msg.get(8..16) {
                    let unique = u64::from_ne_bytes(unique.try_into().expect("8 bytes"));
                    let _ = chan.send(unique, -libc::EIO, &[]);
                }
                continue;
            }
        }
        if let Some(w) = idle {
            w.request_seen();
        }
    }
}

/// How each io_uring queue is set up (from `MountOptions`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct RingSettings {
    /// The connection's `max_write`: each entry's payload buffer holds that much.
    pub max_write: u32,
    /// Entries registered at the start.
    pub entries: usize,
    /// How long the worker watches for the next request after an answer.
    pub spin: std::time::Duration,
}

/// An io_uring worker for queue `qid`: pins itself to CPU `qid`, registers the queue's
/// entries on `dev`'s connection, says how that went through `registered`, then serves
/// the queue until the connection ends.
pub(crate) fn ring_worker(
    inner: &Arc<Dispatcher>,
    dev: &Arc<Channel>,
    qid: u16,
    settings: RingSettings,
    idle: Option<&IdleWatch>,
    mountpoint: &Path,
    registered: std::sync::mpsc::Sender<io::Result<()>>,
) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    // Offline CPU: its queue gets no requests until it comes online; serve it unpinned.
    pin_to(usize::from(qid));
    let RingSettings {
        max_write,
        entries,
        spin,
    } = settings;
    let mut queue =
        match proto::uring::RingQueue::register(dev.as_raw_fd(), qid, max_write, entries, spin) {
            Ok(q) => {
                let _ = registered.send(Ok(()));
                q
            }
            Err(e) => {
                let _ = registered.send(Err(io::Error::new(
                    e.kind(),
                    format!("registering io_uring queue {qid}: {e}"),
                )));
                return Ok(());
            }
        };
    drop(registered);
    let kicker = QueueKicker::new(usize::from(qid), mountpoint);
    queue.run(
        |req| {
            inner.dispatch(req);
            if let Some(w) = idle {
                w.request_seen();
            }
        },
        || kicker.kick(),
    )
}

/// Makes a request arrive on one io_uring queue when the queue asks (see
/// `proto::uring`, "Requests answered later"): a thread pinned to the queue's CPU,
/// started at the first kick, asks the mount for its `statfs` (which the kernel never
/// answers from a cache) once per kick. It holds only the mount point's path, so it
/// keeps nothing busy; it ends when the queue's worker does. A kick that finds that
/// thread still inside its `statfs` (which may be waiting in the kernel's queue behind
/// the very requests the kick is for) also asks once from a one-shot thread pinned to
/// the same CPU, at most `EXTRA_KICKERS` alive at a time.
struct QueueKicker {
    cpu: usize,
    mountpoint: std::path::PathBuf,
    state: Arc<KickState>,
    thread: std::cell::OnceCell<Option<std::thread::Thread>>,
}

#[derive(Default)]
struct KickState {
    pending: AtomicBool,
    stop: AtomicBool,
    /// The kicker thread is inside a `statfs` (which waits in the kernel's queue if it
    /// found no free entry).
    busy: AtomicBool,
    /// One-shot kicker threads alive (see [`QueueKicker::kick`]).
    extra: AtomicUsize,
}

/// One-shot kicker threads a queue may have alive at once.
const EXTRA_KICKERS: usize = 4;

impl QueueKicker {
    fn new(cpu: usize, mountpoint: &Path) -> QueueKicker {
        QueueKicker {
            cpu,
            mountpoint: mountpoint.to_path_buf(),
            state: Arc::default(),
            thread: std::cell::OnceCell::new(),
        }
    }

    fn kick(&self) {
        // Relaxed: `unpark` below orders it before the kicker's next look (an unpark
        // happens-before the return of the `park` it ends).
        self.state.pending.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.get_or_init(|| self.spawn()) {
            t.unpark();
        }
        // A kicker whose `statfs` is still waiting may be waiting in the kernel's queue,
        // behind the requests this kick is for; then a request from another thread is
        // what brings them in. Relaxed: a hint; a stale answer costs one `statfs` more
        // or one repeat of the queue's re-kick later.
        if self.state.busy.load(Ordering::Relaxed) {
            if self.state.extra.fetch_add(1, Ordering::Relaxed) < EXTRA_KICKERS {
                let (cpu, state, path) = (self.cpu, self.state.clone(), self.path());
                let spawned = std::thread::Builder::new()
                    .name(format!("fuse-kick-{cpu}+"))
                    .spawn(move || {
                        pin_to(cpu);
                        if let Some(path) = path {
                            statfs_of(&path);
                        }
                        state.extra.fetch_sub(1, Ordering::Relaxed);
                    });
                if spawned.is_err() {
                    self.state.extra.fetch_sub(1, Ordering::Relaxed);
                }
            } else {
                self.state.extra.fetch_sub(1, Ordering::Relaxed);
            }
        }
    }

    fn path(&self) -> Option<std::ffi::CString> {
        use std::os::unix::ffi::OsStrExt;
        std::ffi::CString::new(self.mountpoint.as_os_str().as_bytes()).ok()
    }

    /// The kicker thread; `None` if it cannot be started (the queue then relies on the
    /// next request of its CPU, as without kicks).
    fn spawn(&self) -> Option<std::thread::Thread> {
        let path = self.path()?;
        let (cpu, state) = (self.cpu, self.state.clone());
        let handle = std::thread::Builder::new()
            .name(format!("fuse-kick-{cpu}"))
            .spawn(move || {
                pin_to(cpu);
                // Relaxed: see `kick` and `drop` (each store is followed by an unpark).
                while !state.stop.load(Ordering::Relaxed) {
                    if state.pending.swap(false, Ordering::Relaxed) {
                        state.busy.store(true, Ordering::Relaxed);
                        statfs_of(&path);
                        state.busy.store(false, Ordering::Relaxed);
                    } else {
                        std::thread::park();
                    }
                }
            })
            .ok()?;
        // Detached: it exits at its next wake-up after `drop`.
        Some(handle.thread().clone())
    }
}

/// Asks the mount at `path` for its `statfs`: a request on the caller's CPU's queue. The
/// answer is not needed; the request itself is the point.
fn statfs_of(path: &std::ffi::CStr) {
    // SAFETY: `statfs` is plain data; all-zero is a valid value.
    let mut buf: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: a NUL-terminated path and a live, writable statfs.
    unsafe { libc::statfs(path.as_ptr(), &mut buf) };
}

impl Drop for QueueKicker {
    fn drop(&mut self) {
        self.state.stop.store(true, Ordering::Relaxed);
        if let Some(Some(t)) = self.thread.get() {
            t.unpark();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_say_why_io_uring_is_off() {
        assert_eq!(check_settings(Some("0\n"), Some("Y\n"), false), Ok(()));
        assert_eq!(check_settings(Some("1\n"), Some("Y\n"), true), Ok(()));
        let why = |d, e, root| check_settings(d, e, root).unwrap_err();
        assert!(why(Some("2\n"), Some("Y\n"), true).contains("io_uring_disabled is 2"));
        assert!(why(Some("1\n"), Some("Y\n"), false).contains("privileged"));
        assert!(why(Some("0\n"), Some("N\n"), true).contains("enable_uring is N"));
        assert!(why(None, None, true).contains("enable_uring is missing"));
    }

    #[test]
    fn cpu_lists_count_every_cpu() {
        assert_eq!(count_cpu_list("0-1"), Some(2));
        assert_eq!(count_cpu_list("0"), Some(1));
        assert_eq!(count_cpu_list("0-3,5,7-8"), Some(7));
        assert_eq!(count_cpu_list("x"), None);
        assert_eq!(count_cpu_list("3-1"), None);
    }

    #[test]
    fn transports_parse_and_describe_themselves() {
        assert_eq!("uring".parse(), Ok(Transport::Uring));
        assert_eq!("auto".parse(), Ok(Transport::Auto));
        assert_eq!("dev".parse(), Ok(Transport::Dev));
        assert!("tcp".parse::<Transport>().is_err());
        let off = TransportInUse::Dev {
            why_not_uring: Some("INIT did not offer it".into()),
        };
        assert_eq!(
            off.to_string(),
            "transport /dev/fuse; io_uring off: INIT did not offer it"
        );
        assert!(TransportInUse::Uring { queues: 2 }.is_uring());
    }
}
