//! # scalevfs FUSE server
//!
//! Serves a scalevfs [`Vfs`] (a tmpfs root) through the kernel's FUSE driver, so that
//! unmodified programs use it, with file locks that reach our lock manager. The design and
//! the lessons of the spike that preceded it are in `docs/fuse.md`. The protocol is
//! spoken by this crate ([`proto`]: the kernel's ABI structs, request decoding, the
//! INIT handshake, replies), so every opcode the kernel offers can be served.
//!
//! ## Nodes and handles
//!
//! A FUSE node id names a VFS inode held by a [`Node`](scalevfs::frontend::Node) (a counted
//! dentry reference: keeps the inode alive without a path) in the sharded node table of
//! `tables`; the node id is the inode number (the root: 1), and the table counts the
//! kernel's lookups exactly (one critical section per lookup and per forget: libfuse PR
//! #1368/#1371). An `fh` names an open file description of the VFS (`node_open`, no fd)
//! in the sharded file table.
//!
//! ## Credentials
//!
//! Mounted with `default_permissions`: the kernel checks permissions with the caller's
//! fsuid, fsgid, supplementary groups and capabilities (a FUSE request carries only uid,
//! gid and pid), decides when set-id bits must go (with `FUSE_HANDLE_KILLPRIV_V2` it
//! flags the WRITE or SETATTR and the server clears them, `Fs::kill_suidgid`) and
//! applies the umask. The VFS
//! then runs each operation without permission checks, and new files are owned by the
//! request's uid and gid (or a setgid directory's group). The exceptions: a CREATE that
//! finds its name already there (made behind the kernel's back after its LOOKUP): the
//! kernel checked nothing on that file, so the server does, with the caller's
//! credentials (`Fs::create`); and the extended attribute requests, which the VFS checks
//! again with the caller's credentials because the kernel passes a LISTXATTR answer
//! through as is (`trusted.*` must be hidden here from callers who are not root).
//!
//! ## Threads and transports
//!
//! Requests reach the server one of two ways ([`Transport`], `transport.rs`):
//!
//! * **`/dev/fuse`**: `threads` workers each loop on a blocking read of their own
//!   `/dev/fuse` descriptor (the first the mount's, the others `FUSE_DEV_IOC_CLONE`s of
//!   it: one input queue for all, whose wait is exclusive, so one idle worker is woken
//!   per request; a processing queue each) into a buffer of their own, and end on
//!   `ENODEV`, which the abort at unmount guarantees. A reply goes to the descriptor its
//!   request came from.
//! * **io_uring** (`FUSE_OVER_IO_URING`, [`proto::uring`]): the kernel queues each
//!   request on the queue of its caller's CPU; one worker per possible CPU, pinned to it,
//!   registers entries (buffers) on that queue through its own ring and answers each
//!   request with `COMMIT_AND_FETCH` on the entry it came in on. One `/dev/fuse` worker
//!   still reads what the kernel sends there (INTERRUPT, FORGET, and everything until
//!   every queue has an entry). The workers end when the connection's end fails their
//!   commands.
//!
//! `Transport::Auto` takes io_uring when the fuse module's `enable_uring` is on (the
//! server never sets it), io_uring is allowed, INIT offers it and every queue registers;
//! [`Server::transport`] says which one serves and why not io_uring.
//!
//! A request that has to *wait* (`FUSE_SETLKW` or a blocking flock that conflicts) never
//! sleeps on a worker: it is tried without waiting first, and only if that conflicts is
//! it moved to a thread of its own that sleeps in the lock manager on a
//! [`CancelToken`](scalevfs_vfs::cancel::CancelToken). So workers stay free to read the
//! `FUSE_INTERRUPT` that cancels it, and no number of blocked lockers can starve the
//! mount. Its answer goes back where the request came from: to its `/dev/fuse`
//! descriptor, or, on io_uring, to its queue's mailbox, whose worker commits it on the
//! entry the request holds (the queue registers more entries while too many are held).
//!
//! ## Interrupts
//!
//! The token of a waiting request is published under the request's `unique` *before* the
//! wait starts and removed after the reply is written. A `FUSE_INTERRUPT` for a published
//! unique cancels the token (the lock manager unqueues the waiter and the request is
//! answered `EINTR`; a grant that won the race stands, as on Linux). For an unknown unique
//! (not yet published, or already answered) we answer the interrupt `EAGAIN`, which makes
//! the kernel queue it again if, and only if, the target is still pending: the libfuse
//! rule. The kernel looks the target up in the processing queue of the descriptor the
//! answer is written to, so the answer is offered to every worker's descriptor until one
//! takes it. A request served through io_uring is in no descriptor's processing queue,
//! so with io_uring an interrupt that finds no waiter is also remembered (for ten
//! seconds; uniques are never reused) and cancels the wait its target publishes next.
//!
//! A ring can also lose an interrupt in the kernel: a signal that lands after a request
//! is queued but before it is copied to a ring entry is never passed on (the ring, unlike
//! `/dev/fuse`, does not check for one when it sends), and the caller would sleep until
//! the lock came. Such a signal is still pending when the server sees the request, so a
//! ring request about to wait first reads its caller's pending signals from
//! `/proc/TID/status` and, if one is there that the caller does not block, answers
//! `EINTR` at once (`Stats::lost_interrupts` counts these).
//!
//! ## `/sys` and poll
//!
//! With `MountOptions::sys` the kernfs demo tree is mounted at `/sys` in the `Vfs`
//! before serving. Its nodes get node ids tagged with their superblock, TTL 0 (kernfs
//! changes behind our back) and `direct_io` opens (every read reaches the attribute's
//! `show`). `FUSE_POLL` answers the kernfs open file's mask and, when the kernel asks to
//! be notified (`kh`), registers once per handle a kernfs waiter that sends
//! `FUSE_NOTIFY_POLL` for `kh`; so `sysfs_notify` (`Kernfs::notify`) wakes a `poll` or
//! `epoll` on the mount. Regular files answer `DEFAULT_POLLMASK` (not `ENOSYS`, which
//! would make the kernel stop asking for every file).
//!
//! ## Lock owners
//!
//! POSIX `fcntl` locks arrive with the kernel's hash of the caller's `files_struct` as
//! `lock_owner`: [`LockOwner::Process`](scalevfs_vfs::locks::LockOwner). flock requests
//! carry `FUSE_LK_FLOCK` in `lk_flags` and are owned by the VFS open
//! file description behind the `fh` (`LockOwner::File(lock_id)`). OFD locks arrive
//! indistinguishable from POSIX ones, owned by the hash of the `struct file`; they are
//! released at `FUSE_RELEASE` through the per-handle owner set (`docs/fuse.md` section 5).
//! `FUSE_FLUSH` (every `close(2)`) releases the flushing owner's POSIX locks: the POSIX
//! close rule.
//!
//! ## Shutdown
//!
//! [`Server::unmount`]: cancel every waiting lock request (they answer `EINTR`), abort the
//! connection through fusectl (pending requests fail with `ECONNABORTED`, later ones with
//! `ENOTCONN`; closing `/dev/fuse` is not enough while a forked child holds a copy of it;
//! the workers' reads return `ENODEV`), detach our mount (`umount2(MNT_DETACH)`, which
//! succeeds with files still open; only the mount whose id we read right after mounting,
//! and only while it is on top of the mount point: never whatever else is mounted there,
//! see [`mounts`]; a non-root user whose system has no fusectl mounted
//! cannot abort, and the detach alone then ends the connection, at once if nothing is
//! open), join the workers, then cancel again (a SETLKW being
//! dispatched during the first cancel publishes its wait after it), wait for every lock
//! waiter's thread to end, release every handle's locks (POSIX owners included: no FLUSH
//! comes after an abort) and drop every node and handle.
//!
//! ## Locks and orderings
//!
//! The shard mutexes of `tables` are leaves, never held while calling the VFS or writing
//! to `/dev/fuse`; a handle's owner set has its own mutex, also a leaf; its poll
//! registration mutex is taken before the kernfs open file's wait-queue lock (the waker
//! that lock runs takes nothing of ours); an io_uring queue's mailbox mutex is a leaf
//! too (its eventfd is written after it is released). Counters are
//! statistics, sharded per CPU (`Relaxed`: they order nothing).

#![warn(missing_docs)]

use std::ffi::OsString;
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::thread::JoinHandle;

use scalevfs::{Vfs, VfsOptions};
use scalevfs_kernfs::demo::{demo_tree, DemoTree};
use scalevfs_kernfs::{Kernfs, KernfsFs};

mod abort;
mod idle;
pub mod mounts;
pub mod proto;
mod server;
mod tables;
mod transport;

use abort::{abort_connection, Abort};
use proto::abi::init;
pub use proto::Mounter;
use proto::{Channel, MountConfig, Session};
pub use server::Stats;
use server::{Dispatcher, Fs};
pub use transport::{uring_precheck, Transport, TransportInUse, ENABLE_URING};

/// Why a mount could not be set up: each is one line for the user (see `docs/fuse.md`).
#[derive(Debug)]
pub enum MountError {
    /// The mount point does not exist.
    NoMountPoint(PathBuf),
    /// The mount point is not a directory.
    NotADirectory(PathBuf),
    /// `/dev/fuse` is missing (no fuse module, or a container without the device).
    NoDevFuse,
    /// `/dev/fuse` exists but we may not open it.
    NoPrivilege,
    /// `fusermount3` is not on the `PATH`, and we may not mount ourselves (not root).
    NoFusermount,
    /// Any other failure setting up the mount (`fusermount3`, INIT, the mount table).
    Mount(io::Error),
}

impl fmt::Display for MountError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MountError::NoMountPoint(p) => {
                write!(f, "mount point {} does not exist", p.display())
            }
            MountError::NotADirectory(p) => {
                write!(f, "mount point {} is not a directory", p.display())
            }
            MountError::NoDevFuse => write!(
                f,
                "/dev/fuse is missing: load the fuse module (modprobe fuse) or run the \
                 container with --device /dev/fuse"
            ),
            MountError::NoPrivilege => write!(
                f,
                "no permission to open /dev/fuse: run as root or add yourself to the group \
                 that owns it"
            ),
            MountError::NoFusermount => write!(
                f,
                "fusermount3 not found: install the fuse3 package (apt-get install fuse3)"
            ),
            MountError::Mount(e) => write!(f, "mount failed: {e}"),
        }
    }
}

impl std::error::Error for MountError {}

/// Finds `fusermount3` (we mount through it; see `docs/fuse.md`).
pub fn fusermount_path() -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_else(|| OsString::from("/usr/bin:/bin"));
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/bin"), PathBuf::from("/bin")])
        .map(|d| d.join("fusermount3"))
        .find(|p| p.is_file())
}

/// The checks `scalevfs mount` makes before mounting, in the order the user can fix them,
/// and how the mount will be made: through `fusermount3` when it is installed, else with
/// `mount(2)` when we are root (see [`proto::mount`]).
pub fn preflight(mountpoint: &Path) -> Result<Mounter, MountError> {
    match std::fs::metadata(mountpoint) {
        Err(_) => return Err(MountError::NoMountPoint(mountpoint.to_owned())),
        Ok(m) if !m.is_dir() => return Err(MountError::NotADirectory(mountpoint.to_owned())),
        Ok(_) => {}
    }
    match std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/fuse")
    {
        Ok(_) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Err(MountError::NoDevFuse),
        Err(e) if e.kind() == io::ErrorKind::PermissionDenied => {
            return Err(MountError::NoPrivilege)
        }
        Err(e) => return Err(MountError::Mount(e)),
    }
    match fusermount_path() {
        Some(path) => Ok(Mounter::Fusermount(path)),
        // SAFETY: geteuid cannot fail and touches no memory.
        None if unsafe { libc::geteuid() } == 0 => Ok(Mounter::Direct),
        None => Err(MountError::NoFusermount),
    }
}

/// The largest WRITE request the kernel sends us (see `Server::mount_with`).
pub const MAX_WRITE: u32 = 128 * 1024;

/// What `scalevfs mount` asks of a mount (its command-line options).
#[derive(Clone, Debug)]
pub struct MountOptions {
    /// Worker threads reading requests from `/dev/fuse` (at least 1); with io_uring one
    /// worker per CPU queue serves instead, and one reads `/dev/fuse`.
    pub threads: usize,
    /// tmpfs `size=` in bytes (`None`: unlimited).
    pub size_limit: Option<u64>,
    /// tmpfs `nr_inodes=` (`None`: unlimited).
    pub inode_limit: Option<u64>,
    /// Mount the kernfs demo tree at `/sys` inside the mount.
    pub sys: bool,
    /// Let users other than the mounter use the mount (fusermount3 needs
    /// `user_allow_other` in /etc/fuse.conf for non-root mounters).
    pub allow_other: bool,
    /// Keep a fusermount3 child that unmounts if the daemon dies. Without it, root mounts
    /// with `mount(2)` directly ([`Mounter::Direct`]); with it but no `fusermount3`
    /// installed, root mounts directly too, without the watchdog.
    pub auto_unmount: bool,
    /// Serve extended attributes. Off, the server answers their requests `ENOSYS`, so the
    /// kernel stops sending them: every attribute call then fails with `EOPNOTSUPP`, but
    /// the kernel no longer asks for `security.capability` before each `write(2)` (a round
    /// trip; small writes are about 1.5x faster without it).
    pub xattrs: bool,
    /// Called from a helper thread once the server has answered no request for about
    /// half a second after some activity ([`QUIET_BEFORE_IDLE`]), once per idle period;
    /// never while requests keep coming, and nothing polls while idle. The `scalevfs`
    /// daemon gives freed memory back to the kernel here.
    pub on_idle: Option<fn()>,
    /// How requests reach the server ([`Transport`]): with io_uring, one worker per CPU
    /// queue serves requests (`threads` is then the `/dev/fuse` fallback's count).
    pub transport: Transport,
    /// With io_uring: the entries each CPU queue registers at the start (at least 1;
    /// default [`proto::uring::ENTRIES_PER_QUEUE`]), each with a `max_write`-sized buffer.
    /// A queue registers more while lock waiters hold entries.
    pub ring_entries: usize,
    /// With io_uring: how long a queue's worker watches for the next request after
    /// answering one before it sleeps (default [`RING_SPIN`], zero: it sleeps at once).
    /// Spinning saves the sleep and the wake-up when the next request comes within the
    /// bound, at the price of up to this much CPU time after each answer; a worker that
    /// has answered nothing since it last slept never spins.
    pub ring_spin: std::time::Duration,
}

/// The default of [`MountOptions::ring_spin`]: none. The caller and the worker of a
/// queue share a CPU, so a spinning worker mostly delays the caller it has just woken;
/// on the 2-vCPU VM every bound tried (5-50 µs) was slower than sleeping at once, and
/// on 16 cores none gained more than noise while 20-100 µs lost up to 60% (`docs/fuse.md`,
/// "Where the time of a request goes").
pub const RING_SPIN: std::time::Duration = std::time::Duration::ZERO;

pub use idle::QUIET as QUIET_BEFORE_IDLE;

impl Default for MountOptions {
    fn default() -> Self {
        MountOptions {
            threads: std::thread::available_parallelism().map_or(2, |n| n.get()),
            size_limit: None,
            inode_limit: None,
            sys: false,
            allow_other: false,
            auto_unmount: true,
            xattrs: true,
            on_idle: None,
            transport: Transport::default(),
            ring_entries: proto::uring::ENTRIES_PER_QUEUE,
            ring_spin: RING_SPIN,
        }
    }
}

/// A mounted scalevfs and its worker threads.
pub struct Server {
    inner: Arc<Dispatcher>,
    workers: Vec<JoinHandle<io::Result<()>>>,
    /// The idle watcher, with `MountOptions::on_idle`.
    idle: Option<(Arc<idle::IdleWatch>, JoinHandle<()>)>,
    mountpoint: PathBuf,
    /// Our mount's id (mountinfo's first field): what [`mounts::detach_ours`] removes,
    /// and nothing else.
    mount_id: u64,
    /// The connection's name under `/sys/fs/fuse/connections`: the minor number of the
    /// mount's anonymous device.
    conn: u32,
    /// `stop` ran (or `wait` saw the connection end).
    stopped: bool,
    /// The kernfs mounted at `/sys` inside, and its demo tree's nodes.
    sys: Option<(Arc<KernfsFs>, DemoTree)>,
    /// Which transport serves the mount, and why not io_uring if not.
    transport: TransportInUse,
    /// The connection (its first `/dev/fuse` fd, and `fusermount3` with `auto_unmount`).
    session: Session,
    /// The path the session was mounted through: disarmed by `stop`, and declared after
    /// `session` so that it outlives it (fields drop in declaration order): with
    /// `auto_unmount`, `fusermount3` unmounts that path when the session closes.
    decoy: mounts::UnmountDecoy,
}

/// Builds the kernfs demo tree and mounts it at `/sys` in `vfs` (`docs/fuse.md` section
/// 6; the library's demo tree, which `scalevfs sys` extends with `kernel/scalevfs/locks`).
fn mount_sys(vfs: &Arc<Vfs>) -> Result<(Arc<KernfsFs>, DemoTree), scalevfs_vfs::Errno> {
    let core = vfs.core();
    let root_owner = scalevfs::frontend::Owner { uid: 0, gid: 0 };
    core.node_mkdir(&core.root_node(), b"sys", 0o755, root_owner)?;
    let k = Kernfs::new(scalevfs_kernfs::Locking::Scalable);
    let tree = demo_tree(&k)?;
    let fs = KernfsFs::new(k);
    vfs.mount("/sys", fs.clone())?;
    Ok((fs, tree))
}

impl Server {
    /// Mounts a new empty scalevfs on `mountpoint` with `threads` workers (at least 1) and
    /// the other options at their defaults.
    pub fn mount(mountpoint: &Path, threads: usize) -> Result<Server, MountError> {
        Server::mount_with(
            mountpoint,
            &MountOptions {
                threads,
                ..MountOptions::default()
            },
        )
    }

    /// Mounts a new scalevfs (tmpfs root with `size_limit` and `inode_limit`) on
    /// `mountpoint` as `options` say; with `sys`, the kernfs demo tree is mounted at
    /// `/sys` inside it ([`Server::sys`]).
    pub fn mount_with(mountpoint: &Path, options: &MountOptions) -> Result<Server, MountError> {
        let vfs = Vfs::new(VfsOptions {
            size_limit: options.size_limit,
            inode_limit: options.inode_limit,
            ..VfsOptions::default()
        });
        let sys =
            if options.sys {
                Some(mount_sys(&vfs).map_err(|e| {
                    MountError::Mount(io::Error::other(format!("building /sys: {e}")))
                })?)
            } else {
                None
            };
        let mut server = Server::serve(vfs, mountpoint, options)?;
        server.sys = sys;
        Ok(server)
    }

    /// The kernfs tree under `/sys` (with `MountOptions::sys`): `sys().0.kernfs().notify`
    /// is `sysfs_notify`, which wakes pollers through FUSE poll notifications.
    pub fn sys(&self) -> Option<(&KernfsFs, &DemoTree)> {
        self.sys.as_ref().map(|(k, t)| (&**k, t))
    }

    /// Serves `vfs` (its root directory) on `mountpoint`. Nobody else should change the
    /// tree while it is served: the kernel caches entries and attributes for a second.
    pub fn serve(
        vfs: Arc<Vfs>,
        mountpoint: &Path,
        options: &MountOptions,
    ) -> Result<Server, MountError> {
        // As libfuse: without the watchdog, a root caller mounts with mount(2) itself
        // (no helper process to start); `fusermount3` is needed only for its watchdog.
        let mounter = match preflight(mountpoint)? {
            // SAFETY: geteuid cannot fail and touches no memory.
            Mounter::Fusermount(_) if !options.auto_unmount && unsafe { libc::geteuid() } == 0 => {
                Mounter::Direct
            }
            m => m,
        };
        let mut mount_options: Vec<String> =
            ["default_permissions", "fsname=scalevfs", "subtype=scalevfs"]
                .into_iter()
                .map(String::from)
                .collect();
        if options.allow_other {
            mount_options.push("allow_other".into());
        }
        // io_uring is asked for in INIT only where it can work (the kernel offers it
        // only while `enable_uring` is on anyway).
        let uring_check = match options.transport {
            Transport::Dev => Err(None),
            Transport::Auto | Transport::Uring => uring_precheck().map_err(Some),
        };
        let config = MountConfig {
            options: mount_options,
            auto_unmount: options.auto_unmount,
            // HANDLE_KILLPRIV_V2: the kernel marks the superblock SB_NOSEC, so a write
            // no longer costs a getxattr("security.capability") round trip each; it
            // asks us to clear set-id bits with flags on WRITE and SETATTR instead of
            // sending mode changes. Not FUSE_ATOMIC_O_TRUNC: O_TRUNC arrives as a
            // setattr of the size (see the crate docs).
            want: init::HANDLE_KILLPRIV_V2
                | init::ASYNC_READ
                | init::PARALLEL_DIROPS
                | init::AUTO_INVAL_DATA
                | init::ASYNC_DIO
                | init::POSIX_LOCKS
                | init::FLOCK_LOCKS
                | init::DO_READDIRPLUS
                | init::READDIRPLUS_AUTO
                | if uring_check.is_ok() {
                    init::OVER_IO_URING
                } else {
                    0
                },
            // 128 KiB is Linux's default FUSE request size (max_pages 32); larger writes
            // arrive as several requests. Each worker's request buffer is this big.
            max_write: MAX_WRITE,
        };
        let canonical = std::fs::canonicalize(mountpoint).map_err(MountError::Mount)?;
        let decoy = mounts::UnmountDecoy::new(&canonical).map_err(MountError::Mount)?;
        let session = match Session::mount(&mounter, decoy.path(), &config) {
            Ok(s) => s,
            Err(e) => {
                decoy.disarm();
                return Err(MountError::Mount(e));
            }
        };
        // Right after mounting, before anything else can land on the directory, the mount
        // on top there is ours. Not stat(2): that would send GETATTR to a server with no
        // workers yet (`TopMount` asks the VFS only).
        let (mount_id, conn) = identify(&canonical).map_err(MountError::Mount)?;
        let first = session.channel().clone();
        let negotiated = session.negotiated();
        // `Err(None)`: io_uring not asked for (`Transport::Dev`); `Err(Some(why))`: off.
        let uring = match uring_check {
            Err(why) => Err(why),
            Ok(()) if negotiated.flags & init::OVER_IO_URING == 0 => {
                Err(Some("INIT did not offer FUSE_OVER_IO_URING".to_string()))
            }
            Ok(()) => Ok(()),
        };
        let why_not_uring = uring.clone().err().flatten();
        let inner = Arc::new(Dispatcher {
            notifier: session.notifier(),
            channels: std::sync::OnceLock::new(),
            uring: std::sync::atomic::AtomicBool::new(false),
            fs: Arc::new(Fs::new(vfs).with_xattrs(options.xattrs)),
        });
        let mut server = Server {
            decoy,
            inner,
            workers: Vec::new(),
            idle: None,
            mountpoint: canonical,
            mount_id,
            conn,
            stopped: false,
            sys: None,
            transport: TransportInUse::Dev { why_not_uring },
            session,
        };
        if let Some(hook) = options.on_idle {
            server.idle = Some(idle::IdleWatch::start(hook).map_err(MountError::Mount)?);
        }
        // On any error below, dropping `server` unmounts and stops what runs.
        let uring = uring.and_then(|()| {
            server
                .start_uring(&first, negotiated.max_write, options)
                .map_err(|e| Some(e.to_string()))
        });
        match uring.err().flatten() {
            None => {}
            Some(why) if options.transport == Transport::Uring => {
                return Err(MountError::Mount(io::Error::other(format!(
                    "FUSE over io_uring is not available: {why}"
                ))));
            }
            Some(why) => {
                server.transport = TransportInUse::Dev {
                    why_not_uring: (options.transport != Transport::Dev).then_some(why),
                };
            }
        }
        // `/dev/fuse` workers: all of them without io_uring; one with it, for what the
        // kernel still sends there (INTERRUPT, FORGET). Every worker but the first reads
        // from a clone of the connection's fd with its own processing queue
        // (`FUSE_DEV_IOC_CLONE`); if cloning fails, it shares the first one (correct: the
        // kernel's input queue is one for all anyway).
        let dev_workers = if server.transport.is_uring() {
            1
        } else {
            options.threads.max(1)
        };
        let channels: Vec<Arc<Channel>> = (0..dev_workers)
            .map(|i| match i {
                0 => first.clone(),
                _ => first
                    .try_clone_queue()
                    .map(Arc::new)
                    .unwrap_or_else(|_| first.clone()),
            })
            .collect();
        // The workers' channels, for interrupts: set before any of them runs.
        let _ = server.inner.channels.set(channels.clone());
        for (i, chan) in channels.into_iter().enumerate() {
            let inner = server.inner.clone();
            let idle = server.idle.as_ref().map(|(w, _)| w.clone());
            let w = std::thread::Builder::new()
                .name(format!("fuse-worker-{i}"))
                .spawn(move || {
                    transport::dev_worker(&inner, &chan, negotiated.max_write, idle.as_deref())
                })
                .map_err(MountError::Mount)?; // Drop unmounts what is already running
            server.workers.push(w);
        }
        Ok(server)
    }

    /// Starts one io_uring worker per CPU queue and waits until each has registered its
    /// entries; `Err` (with the first failure) if one could not. Those already serving
    /// then stay until the connection ends: the kernel serves the mount through
    /// `/dev/fuse` until every queue has an entry, which it never will.
    fn start_uring(
        &mut self,
        dev: &Arc<Channel>,
        max_write: u32,
        options: &MountOptions,
    ) -> io::Result<()> {
        let settings = transport::RingSettings {
            max_write,
            entries: options.ring_entries,
            spin: options.ring_spin,
        };
        let queues = transport::possible_cpus();
        let qids = u16::try_from(queues).map_err(|_| io::Error::other("too many CPUs"))?;
        self.inner
            .uring
            .store(true, std::sync::atomic::Ordering::Relaxed);
        let (tx, rx) = std::sync::mpsc::channel();
        for qid in 0..qids {
            let inner = self.inner.clone();
            let dev = dev.clone();
            let idle = self.idle.as_ref().map(|(w, _)| w.clone());
            let tx = tx.clone();
            let mountpoint = self.mountpoint.clone();
            let w = std::thread::Builder::new()
                .name(format!("fuse-ring-{qid}"))
                .spawn(move || {
                    let idle = idle.as_deref();
                    transport::ring_worker(&inner, &dev, qid, settings, idle, &mountpoint, tx)
                })?;
            self.workers.push(w);
        }
        drop(tx);
        let mut first_err = None;
        for _ in 0..queues {
            match rx.recv() {
                Ok(Ok(())) => {}
                Ok(Err(e)) => {
                    first_err.get_or_insert(e);
                }
                Err(_) => {
                    first_err.get_or_insert(io::Error::other("an io_uring worker ended"));
                }
            }
        }
        match first_err {
            Some(e) => {
                self.inner
                    .uring
                    .store(false, std::sync::atomic::Ordering::Relaxed);
                Err(e)
            }
            None => {
                self.transport = TransportInUse::Uring { queues };
                Ok(())
            }
        }
    }

    /// Which transport serves the mount, and why not io_uring if not (the startup
    /// line of `scalevfs mount`).
    pub fn transport(&self) -> &TransportInUse {
        &self.transport
    }

    /// The mount point, canonical.
    pub fn mountpoint(&self) -> &Path {
        &self.mountpoint
    }

    /// What the INIT handshake settled (protocol minor, flags).
    pub fn protocol(&self) -> proto::Negotiated {
        self.session.negotiated()
    }

    /// Our mount's id, as in `/proc/self/mountinfo`'s first field.
    pub fn mount_id(&self) -> u64 {
        self.mount_id
    }

    /// The served file system (for inspection: the live-inode count, `/proc/locks`).
    pub fn vfs(&self) -> &Arc<Vfs> {
        &self.inner.fs.vfs
    }

    /// The server's counters now (see [`Stats`]).
    pub fn stats(&self) -> Stats {
        self.inner.fs.stats()
    }

    /// Blocks until the connection ends from outside (`scalevfs umount`, `fusermount3 -u`,
    /// `umount`): the workers see `ENODEV`. Then cleans up as [`Server::unmount`] does.
    pub fn wait(mut self) -> io::Result<()> {
        self.stopped = true;
        let mut first = Ok(());
        for w in self.workers.drain(..) {
            let r = join(w);
            if first.is_ok() {
                first = r;
            }
        }
        self.stop_idle_watch();
        self.decoy.disarm();
        first.and(self.inner.fs.shutdown())
    }

    fn stop_idle_watch(&mut self) {
        if let Some((w, h)) = self.idle.take() {
            w.stop();
            let _ = h.join();
        }
    }

    /// Detaches the mount and stops the server, even with files open or lockers waiting.
    pub fn unmount(mut self) -> io::Result<()> {
        self.stop()
    }

    fn stop(&mut self) -> io::Result<()> {
        if std::mem::replace(&mut self.stopped, true) {
            return Ok(());
        }
        self.inner.fs.waits.cancel_all();
        // Requests in flight (a close(2) flushing, a lock waiter) would wait for a reply
        // forever, and closing our /dev/fuse fd does not end the connection while another
        // process (a forked child) holds a copy: abort it explicitly. Abort *before* the
        // detach: while mounted, the connection's fusectl name is surely still ours. The
        // abort also wakes every worker's read with ENODEV.
        let aborted = abort_connection(self.conn);
        // Only our own mount, and only while it is on top: after an unmount from outside
        // the path leads to whatever was beneath it (see `mounts`).
        let detached = match mounts::detach_ours(&self.mountpoint, self.mount_id, fusermount_path) {
            Ok(mounts::Detach::Done | mounts::Detach::Gone) => Ok(()),
            Ok(mounts::Detach::Covered) => Err(io::Error::other(format!(
                "{} is covered by a later mount: ours is left under it (its connection is \
                 aborted)",
                self.mountpoint.display()
            ))),
            Err(e) => Err(e),
        };
        match aborted {
            Ok(Abort::Done | Abort::Gone) => {
                for w in self.workers.drain(..) {
                    let _ = join(w);
                }
            }
            // Not aborted: a worker stays blocked in read while files are open on the
            // detached mount. Join those that end soon (nothing open: the detach ended
            // the connection), leave the others.
            Ok(Abort::NotPermitted) | Err(_) => {
                let deadline = std::time::Instant::now() + std::time::Duration::from_secs(1);
                while self.workers.iter().any(|w| !w.is_finished())
                    && std::time::Instant::now() < deadline
                {
                    std::thread::sleep(std::time::Duration::from_millis(5));
                }
                for w in self.workers.drain(..) {
                    if w.is_finished() {
                        let _ = join(w);
                    }
                }
            }
        }
        // Without fusectl a non-root user cannot abort, and need not: the detach
        // succeeded, the server is stopped (see `Abort::NotPermitted`).
        let aborted = aborted.map(|_| ());
        self.stop_idle_watch();
        self.decoy.disarm();
        // A SETLKW read before the abort may have published its wait after the cancel
        // above: `shutdown` cancels again now that the workers are gone, waits for the
        // waiters, and releases every lock our handles' owners hold.
        let shut = self.inner.fs.shutdown();
        aborted.and(detached).and(shut)
    }
}

fn join(w: JoinHandle<io::Result<()>>) -> io::Result<()> {
    match w.join() {
        Ok(r) => r,
        Err(_) => Err(io::Error::other("a FUSE worker panicked")),
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.stop();
    }
}

/// Our mount's id and connection number: the mount on top at `mountpoint` right after
/// mounting, and the minor number of its device from mountinfo.
fn identify(mountpoint: &Path) -> io::Result<(u64, u32)> {
    let top = mounts::TopMount::open(mountpoint)?;
    match mounts::fuse_mount_by_id(top.id)? {
        Some(m) => Ok((m.id, m.dev.1)),
        None => Err(io::Error::other(format!(
            "the mount on top of {} right after mounting is not a FUSE mount",
            mountpoint.display()
        ))),
    }
}
