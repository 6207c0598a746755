//! # scalevfs FUSE groundwork (issue 7): the polyfuse spike
//!
//! This crate proves, on a real kernel, the FUSE mechanics the real `scalevfs mount` server
//! needs, over a small fixed in-memory tree (not the VFS, which is still being written) and
//! the real [`scalevfs_vfs::locks::LockManager`]. The design of the real server, and why
//! polyfuse was chosen over fuser, is in `docs/fuse.md`.
//!
//! ## What it serves
//!
//! `/hello`, `/lockme` (4 KiB of zeros), `/sub/inner`, and `/event`, a sysfs-like
//! attribute whose count [`Server::notify_event`] bumps: lookup, forget, getattr, opendir,
//! readdir, releasedir, open, read, write (in place, no growth), flush, release, statfs,
//! getlk, setlk, setlkw, flock and poll (with `FUSE_NOTIFY_POLL` wake-ups, the path kernfs
//! notify will take). Every other opcode gets `ENOSYS`.
//!
//! ## Threads
//!
//! `threads` workers each loop on `poll([/dev/fuse, shutdown eventfd])` and then read one
//! request from the shared, non-blocking `/dev/fuse` fd; the kernel hands each request to
//! exactly one reader, so workers share nothing but the maps below. A request that has to
//! *wait* (`FUSE_SETLKW` or a blocking flock that conflicts) never sleeps on a worker:
//! it is retried without waiting first, and only if that conflicts is it moved to a thread
//! of its own that sleeps in the lock manager on a [`CancelToken`]. So workers stay free
//! to read the `FUSE_INTERRUPT` that cancels it, and no number of blocked lockers can
//! starve the mount.
//!
//! ## Interrupts
//!
//! The token of a waiting request is published in [`Shards`] under the request's
//! `unique` *before* the wait starts and removed after the reply is written. A
//! `FUSE_INTERRUPT` for a published unique cancels the token (the lock manager unqueues
//! the waiter and the request is answered `EINTR`; a grant that won the race stands, as
//! on Linux). For an unknown unique (not yet published, or already answered) we answer
//! the interrupt `EAGAIN`, which makes the kernel queue it again if, and only if, the
//! target is still pending: the libfuse rule.
//!
//! ## Lock owners
//!
//! POSIX `fcntl` locks arrive with the kernel's hash of the caller's `files_struct` as
//! `lock_owner`: that is [`LockOwner::Process`]. flock requests carry `FUSE_LK_FLOCK`
//! (polyfuse gives them as `Operation::Flock`) and are owned by the open file description,
//! which maps 1:1 to our file handle `fh`: [`LockOwner::File`]`(fh)`. OFD locks arrive
//! indistinguishable from POSIX ones, owned by the hash of the `struct file`; they are
//! released at `FUSE_RELEASE` through the per-handle owner set (see `docs/fuse.md`).
//! `FUSE_FLUSH` (every `close(2)`) releases the flushing owner's POSIX locks: the POSIX
//! close rule.
//!
//! ## Lookup counts
//!
//! Each node has an atomic lookup count: +1 per successful lookup reply, -n per forget.
//! The nodes of this fixed tree are never freed, so the count is only checked (it must
//! return to zero once the kernel has forgotten everything); the real server's freeing
//! protocol is in `docs/fuse.md`.
//!
//! ## Shutdown
//!
//! [`Server::unmount`]: set the shutdown eventfd (wakes every worker's poll), cancel every
//! waiting lock request (they answer `EINTR`), abort the connection through fusectl
//! (pending requests fail with `ECONNABORTED`, later ones with `ENOTCONN`: closing `/dev/fuse` is not
//! enough while a forked child holds a copy of it), detach the mount
//! (`umount2(MNT_DETACH)`, which succeeds with files still open) and join the workers.
//!
//! ## Locks and orderings
//!
//! Each shard of [`Shards`] is a `parking_lot::Mutex` held only for one map operation;
//! a node's data is under its own `RwLock`; the per-handle owner set under its own mutex.
//! None of them is held while calling the lock manager or writing to `/dev/fuse`, so there
//! is no lock order beyond the lock manager's own. Counters are statistics (`Relaxed`);
//! the shutdown flag is published by the eventfd write, which every worker observes
//! through `poll` (a syscall, hence ordered).

use std::collections::HashMap;
use std::ffi::{CString, OsStr, OsString};
use std::fmt;
use std::io::{self, Read as _};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::io::{AsRawFd, RawFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use parking_lot::{Mutex, RwLock};
use polyfuse::op::{Forget, Operation};
use polyfuse::reply::{
    AttrOut, EntryOut, FileAttr, LkOut, OpenOut, PollOut, ReaddirOut, StatfsOut, WriteOut,
};
use polyfuse::{KernelConfig, Request, Session};
use scalevfs_primitives::Locking;
use scalevfs_vfs::cancel::CancelToken;
use scalevfs_vfs::locks::{
    FileLockContext, LockManager, LockOwner, LockRequest, LockType, OFFSET_MAX,
};
use scalevfs_vfs::Errno;

/// The root's node id, fixed by the FUSE protocol.
pub const ROOT_INO: u64 = 1;
const TTL: Duration = Duration::from_secs(1);
const NSHARDS: usize = 16;

/// Why a mount could not be set up: each is one line for the user (see `docs/fuse.md`).
#[derive(Debug)]
pub enum MountError {
    NoMountPoint(PathBuf),
    NotADirectory(PathBuf),
    NoDevFuse,
    NoPrivilege,
    NoFusermount,
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

/// Finds `fusermount3` (polyfuse mounts through it; see `docs/fuse.md`).
pub fn fusermount_path() -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_else(|| OsString::from("/usr/bin:/bin"));
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/bin"), PathBuf::from("/bin")])
        .map(|d| d.join("fusermount3"))
        .find(|p| p.is_file())
}

/// The checks `scalevfs mount` makes before mounting, in the order the user can fix them.
pub fn preflight(mountpoint: &Path) -> Result<PathBuf, MountError> {
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
    fusermount_path().ok_or(MountError::NoFusermount)
}

/// A 16-way sharded map, so that concurrent requests on different keys take different
/// mutexes (keys are request uniques and file handles: sequential, so `key % 16` spreads
/// them evenly).
struct Shards<V> {
    shards: [Mutex<HashMap<u64, V>>; NSHARDS],
}

impl<V: Clone> Shards<V> {
    fn new() -> Self {
        Shards {
            shards: std::array::from_fn(|_| Mutex::new(HashMap::new())),
        }
    }
    fn shard(&self, key: u64) -> &Mutex<HashMap<u64, V>> {
        &self.shards[(key % NSHARDS as u64) as usize]
    }
    fn insert(&self, key: u64, v: V) {
        self.shard(key).lock().insert(key, v);
    }
    fn get(&self, key: u64) -> Option<V> {
        self.shard(key).lock().get(&key).cloned()
    }
    fn remove(&self, key: u64) -> Option<V> {
        self.shard(key).lock().remove(&key)
    }
    fn len(&self) -> usize {
        self.shards.iter().map(|s| s.lock().len()).sum()
    }
    fn values(&self) -> Vec<V> {
        self.shards
            .iter()
            .flat_map(|s| s.lock().values().cloned().collect::<Vec<_>>())
            .collect()
    }
}

enum Kind {
    Dir(Vec<(OsString, u64)>),
    File(RwLock<Vec<u8>>),
    /// A sysfs-like attribute: reads give the event count; poll reports `POLLPRI |
    /// POLLERR` once [`Server::notify_event`] has run since the open file last read it.
    Event,
}

struct Node {
    ino: u64,
    parent: u64,
    kind: Kind,
    /// Lookup replies minus forgotten lookups.
    lookups: AtomicU64,
    locks: FileLockContext,
}

/// An open file handle (one per kernel open file description).
struct OpenFile {
    ino: u64,
    /// POSIX-style owners that locked through this handle and have not flushed it since:
    /// at release these can only be OFD owners (see `docs/fuse.md`).
    owners: Mutex<Vec<u64>>,
    /// The event count this open file last read (`Kind::Event` only).
    seen: AtomicU64,
}

/// Counters a test reads to see what reached the server.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Stats {
    /// Sum of all non-root nodes' lookup counts.
    pub lookups: u64,
    /// getlk/setlk/setlkw requests without `FUSE_LK_FLOCK`.
    pub posix_requests: u64,
    /// setlk/setlkw requests with `FUSE_LK_FLOCK`.
    pub flock_requests: u64,
    /// Lock requests sleeping right now.
    pub waiting: u64,
    /// `FUSE_INTERRUPT`s that cancelled a waiting request.
    pub interrupts: u64,
    /// Open file handles.
    pub open_files: u64,
    /// Poll handles (`kh`) waiting for a notification.
    pub poll_handles: u64,
}

struct Fs {
    nodes: Vec<Node>,
    locks: LockManager,
    files: Shards<Arc<OpenFile>>,
    waits: Shards<CancelToken>,
    next_fh: AtomicU64,
    posix_requests: AtomicU64,
    flock_requests: AtomicU64,
    interrupts: AtomicU64,
    /// The event node's count (Release in `notify_event`, Acquire in poll and read).
    event: AtomicU64,
    /// fh -> kh of open event files that asked to be notified. One mutex: only the one
    /// event node uses it (the real server keeps this per kernfs open file).
    polls: Mutex<HashMap<u64, u64>>,
}

impl Fs {
    fn new() -> Fs {
        let locks = LockManager::new(Locking::Scalable);
        let mk = |ino, parent, kind| Node {
            ino,
            parent,
            kind,
            lookups: AtomicU64::new(0),
            locks: locks.new_context(0, ino),
        };
        let dir =
            |v: &[(&str, u64)]| Kind::Dir(v.iter().map(|(n, i)| (OsString::from(n), *i)).collect());
        let file = |b: &[u8]| Kind::File(RwLock::new(b.to_vec()));
        let nodes = vec![
            mk(
                1,
                1,
                dir(&[("hello", 2), ("lockme", 3), ("sub", 4), ("event", 6)]),
            ),
            mk(2, 1, file(b"hello, fuse\n")),
            mk(3, 1, file(&[0; 4096])),
            mk(4, 1, dir(&[("inner", 5)])),
            mk(5, 4, file(b"inner\n")),
            mk(6, 1, Kind::Event),
        ];
        Fs {
            nodes,
            locks,
            files: Shards::new(),
            waits: Shards::new(),
            next_fh: AtomicU64::new(1),
            posix_requests: AtomicU64::new(0),
            flock_requests: AtomicU64::new(0),
            interrupts: AtomicU64::new(0),
            event: AtomicU64::new(0),
            polls: Mutex::new(HashMap::new()),
        }
    }

    fn node(&self, ino: u64) -> Result<&Node, i32> {
        ino.checked_sub(1)
            .and_then(|i| self.nodes.get(i as usize))
            .ok_or(libc::ESTALE)
    }

    fn fill_attr(&self, n: &Node, attr: &mut FileAttr) {
        attr.ino(n.ino);
        match &n.kind {
            Kind::Dir(children) => {
                attr.mode(libc::S_IFDIR | 0o755);
                let subdirs = children
                    .iter()
                    .filter(|(_, i)| matches!(self.nodes[*i as usize - 1].kind, Kind::Dir(_)))
                    .count();
                attr.nlink(2 + subdirs as u32);
            }
            Kind::File(data) => {
                attr.mode(libc::S_IFREG | 0o644);
                attr.nlink(1);
                attr.size(data.read().len() as u64);
            }
            Kind::Event => {
                attr.mode(libc::S_IFREG | 0o444);
                attr.nlink(1);
                attr.size(4096); // as sysfs: the real length is known only by reading
            }
        }
        attr.blksize(4096);
    }

    fn stats(&self) -> Stats {
        Stats {
            lookups: self.nodes[1..]
                .iter()
                .map(|n| n.lookups.load(Ordering::Relaxed))
                .sum(),
            posix_requests: self.posix_requests.load(Ordering::Relaxed),
            flock_requests: self.flock_requests.load(Ordering::Relaxed),
            waiting: self.waits.len() as u64,
            interrupts: self.interrupts.load(Ordering::Relaxed),
            open_files: self.files.len() as u64,
            poll_handles: self.polls.lock().len() as u64,
        }
    }

    fn forget(&self, f: &Forget) {
        if let Ok(n) = self.node(f.ino()) {
            // The kernel never forgets more than it looked up; saturate anyway so that a
            // buggy kernel cannot wrap the count.
            let _ = n
                .lookups
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |c| {
                    Some(c.saturating_sub(f.nlookup()))
                });
        }
    }

    fn open_file(&self, fh: u64, ino: u64) -> Result<Arc<OpenFile>, i32> {
        match self.files.get(fh) {
            Some(f) if f.ino == ino => Ok(f),
            _ => Err(libc::EBADF),
        }
    }
}

fn errno(e: Errno) -> i32 {
    e.0
}

/// FUSE lock ranges are `u64` with `OFFSET_MAX` (as `u64`) for "to EOF".
fn lock_request(
    owner: LockOwner,
    pid: u32,
    typ: u32,
    start: u64,
    end: u64,
) -> Result<LockRequest, i32> {
    let ty = LockType::from_l_type(typ as i16).map_err(errno)?;
    let start = i64::try_from(start).map_err(|_| libc::EINVAL)?;
    let end = i64::try_from(end.min(OFFSET_MAX as u64)).map_err(|_| libc::EINVAL)?;
    Ok(LockRequest {
        owner,
        pid: pid as i32,
        ty,
        start,
        end,
    })
}

/// What `scalevfs mount` asks of a mount (its command-line options).
#[derive(Clone, Debug)]
pub struct MountOptions {
    /// Worker threads reading requests (at least 1).
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
    /// Keep a fusermount3 child that unmounts if the daemon dies.
    pub auto_unmount: bool,
}

impl Default for MountOptions {
    fn default() -> Self {
        MountOptions {
            threads: std::thread::available_parallelism().map_or(2, |n| n.get()),
            size_limit: None,
            inode_limit: None,
            sys: false,
            allow_other: false,
            auto_unmount: true,
        }
    }
}

/// A mounted spike file system and its worker threads.
pub struct Server {
    inner: Arc<Inner>,
    workers: Vec<JoinHandle<io::Result<()>>>,
    mountpoint: PathBuf,
    /// The connection's name under `/sys/fs/fuse/connections`: the minor number of the
    /// mount's anonymous device.
    conn: u32,
}

struct Inner {
    session: Session,
    fs: Fs,
    /// Readable once shutdown has begun (never drained).
    shutdown: EventFd,
}

struct EventFd(RawFd);

impl EventFd {
    fn new() -> io::Result<EventFd> {
        // SAFETY: plain syscall with constant flags.
        let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(EventFd(fd))
    }
    fn signal(&self) {
        let one: u64 = 1;
        // SAFETY: writes 8 bytes from a live u64 to our own eventfd.
        unsafe { libc::write(self.0, (&one as *const u64).cast(), 8) };
    }
}

impl Drop for EventFd {
    fn drop(&mut self) {
        // SAFETY: we own the fd and close it once.
        unsafe { libc::close(self.0) };
    }
}

impl Server {
    /// Mounts the spike tree on `mountpoint` and starts `threads` workers (at least 1).
    pub fn mount(mountpoint: &Path, threads: usize) -> Result<Server, MountError> {
        Server::mount_with(
            mountpoint,
            &MountOptions {
                threads,
                ..MountOptions::default()
            },
        )
    }

    /// Mounts on `mountpoint` as `options` say (the spike ignores the size, inode and
    /// `sys` options).
    pub fn mount_with(mountpoint: &Path, options: &MountOptions) -> Result<Server, MountError> {
        let threads = options.threads;
        let fusermount = preflight(mountpoint)?;
        let mut config = KernelConfig::default();
        if options.allow_other {
            config.mount_option("allow_other");
        }
        config
            .auto_unmount(options.auto_unmount)
            .fusermount_path(&fusermount)
            .mount_option("default_permissions")
            .mount_option("fsname=scalevfs-spike")
            .posix_locks(true)
            .flock_locks(true);
        let canonical = std::fs::canonicalize(mountpoint).map_err(MountError::Mount)?;
        let session = Session::mount(mountpoint.to_owned(), config).map_err(MountError::Mount)?;
        // Not stat(2): that would send GETATTR to a server with no workers yet.
        let conn = connection_id(&canonical).map_err(MountError::Mount)?;
        let fd = session.as_raw_fd();
        // SAFETY: F_GETFL/F_SETFL on the session's open /dev/fuse fd.
        unsafe {
            let fl = libc::fcntl(fd, libc::F_GETFL);
            if fl < 0 || libc::fcntl(fd, libc::F_SETFL, fl | libc::O_NONBLOCK) < 0 {
                return Err(MountError::Mount(io::Error::last_os_error()));
            }
        }
        let inner = Arc::new(Inner {
            session,
            fs: Fs::new(),
            shutdown: EventFd::new().map_err(MountError::Mount)?,
        });
        let workers = (0..threads.max(1))
            .map(|i| {
                let inner = inner.clone();
                std::thread::Builder::new()
                    .name(format!("fuse-worker-{i}"))
                    .spawn(move || inner.worker())
                    .map_err(MountError::Mount)
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Server {
            inner,
            workers,
            mountpoint: mountpoint.to_owned(),
            conn,
        })
    }

    pub fn mountpoint(&self) -> &Path {
        &self.mountpoint
    }

    pub fn stats(&self) -> Stats {
        self.inner.fs.stats()
    }

    /// `sysfs_notify` on `/event`: bumps its count and wakes every poller through
    /// `FUSE_NOTIFY_POLL` (the kernel then polls again and sees `POLLPRI`).
    pub fn notify_event(&self) {
        let fs = &self.inner.fs;
        // Release: pairs with the Acquire loads in FUSE_POLL and FUSE_READ.
        fs.event.fetch_add(1, Ordering::Release);
        let khs: Vec<u64> = fs.polls.lock().drain().map(|(_, kh)| kh).collect();
        let notifier = self.inner.session.notifier();
        for kh in khs {
            // Fails only if the connection is gone.
            let _ = notifier.poll_wakeup(kh);
        }
    }

    /// Detaches the mount and stops the server, even with files open or lockers waiting.
    pub fn unmount(mut self) -> io::Result<()> {
        self.stop()
    }

    fn stop(&mut self) -> io::Result<()> {
        if self.workers.is_empty() {
            return Ok(());
        }
        self.inner.shutdown.signal();
        for t in self.inner.fs.waits.values() {
            t.cancel();
        }
        // Requests in flight (a close(2) flushing, a lock waiter) would wait for a reply
        // forever, and closing our /dev/fuse fd does not end the connection while another
        // process (a forked child) holds a copy: abort it explicitly. Abort *before* the
        // detach: while mounted, the connection's fusectl name is surely still ours.
        let aborted = abort_connection(self.conn);
        let detached = detach(&self.mountpoint);
        for w in self.workers.drain(..) {
            match w.join() {
                Ok(Ok(())) => {}
                Ok(Err(e)) => eprintln!("scalevfs-fuse: worker failed: {e}"),
                Err(_) => eprintln!("scalevfs-fuse: worker panicked"),
            }
        }
        aborted.and(detached)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.stop();
    }
}

/// The minor device number of the FUSE mount on `mountpoint` (canonical), from
/// `/proc/self/mountinfo` (the last matching line is the mount on top).
fn connection_id(mountpoint: &Path) -> io::Result<u32> {
    let info = std::fs::read_to_string("/proc/self/mountinfo")?;
    let want = mountpoint.as_os_str().as_bytes();
    info.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            let fstype = f.iter().skip_while(|x| **x != "-").nth(1)?;
            (fstype.starts_with("fuse") && unescape_mountinfo(f.get(4)?) == want)
                .then(|| f[2].split_once(':')?.1.parse().ok())?
        })
        .next_back()
        .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "FUSE mount not in mountinfo"))
}

/// mountinfo writes space, tab, newline and backslash as `\ooo` octal escapes.
fn unescape_mountinfo(s: &str) -> Vec<u8> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let oct = b
            .get(i + 1..i + 4)
            .filter(|d| d.iter().all(|c| (b'0'..=b'7').contains(c)));
        match oct {
            Some(d) if b[i] == b'\\' => {
                out.push((d[0] - b'0') * 64 + (d[1] - b'0') * 8 + (d[2] - b'0'));
                i += 4;
            }
            _ => {
                out.push(b[i]);
                i += 1;
            }
        }
    }
    out
}

/// Writes to the connection's `abort` file in fusectl (mounting fusectl if it is not):
/// pending requests fail with `ECONNABORTED`, later ones with `ENOTCONN`.
fn abort_connection(conn: u32) -> io::Result<()> {
    const DIR: &str = "/sys/fs/fuse/connections";
    let abort = PathBuf::from(format!("{DIR}/{conn}/abort"));
    if !abort.exists() {
        let fusectl_mounted = std::fs::read_to_string("/proc/self/mounts")?
            .lines()
            .any(|l| l.split(' ').nth(2) == Some("fusectl"));
        if fusectl_mounted {
            return Ok(()); // the connection is already gone
        }
        let c = |s: &str| CString::new(s).expect("no NUL");
        let (src, dir, ty) = (c("fusectl"), c(DIR), c("fusectl"));
        // SAFETY: all pointers are valid NUL-terminated strings for the call; no data.
        let r =
            unsafe { libc::mount(src.as_ptr(), dir.as_ptr(), ty.as_ptr(), 0, std::ptr::null()) };
        // EBUSY: someone mounted it meanwhile.
        if r < 0 && io::Error::last_os_error().raw_os_error() != Some(libc::EBUSY) {
            return Err(io::Error::last_os_error());
        }
        if !abort.exists() {
            return Ok(());
        }
    }
    std::fs::write(&abort, b"1")
}

/// `umount2(MNT_DETACH)`: the mount leaves the namespace now, even while busy.
fn detach(mountpoint: &Path) -> io::Result<()> {
    let c = CString::new(mountpoint.as_os_str().as_bytes())
        .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    // SAFETY: `c` is a valid NUL-terminated path for the duration of the call.
    if unsafe { libc::umount2(c.as_ptr(), libc::MNT_DETACH) } < 0 {
        let e = io::Error::last_os_error();
        // EINVAL: not a mount point any more (e.g. `scalevfs umount` got there first).
        if e.raw_os_error() != Some(libc::EINVAL) {
            return Err(e);
        }
    }
    Ok(())
}

impl Inner {
    fn worker(self: Arc<Self>) -> io::Result<()> {
        let mut fds = [
            libc::pollfd {
                fd: self.session.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: self.shutdown.0,
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        loop {
            // SAFETY: `fds` is a live array of two pollfds.
            let r = unsafe { libc::poll(fds.as_mut_ptr(), 2, -1) };
            if r < 0 {
                let e = io::Error::last_os_error();
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(e);
            }
            if fds[1].revents != 0 {
                return Ok(());
            }
            match self.session.next_request() {
                Ok(Some(req)) => self.dispatch(req),
                Ok(None) => return Ok(()), // ENODEV: the connection was aborted
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue, // another worker won
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        }
    }

    fn dispatch(self: &Arc<Self>, req: Request) {
        let op = match req.operation() {
            Ok(op) => op,
            Err(_) => {
                let _ = req.reply_error(libc::EIO);
                return;
            }
        };
        let fs = &self.fs;
        // Replies fail only if the request was interrupted and aborted, or the connection
        // is gone: either way there is nobody to tell.
        let _ = match op {
            Operation::Lookup(op) => {
                let r = fs.node(op.parent()).and_then(|p| match &p.kind {
                    Kind::Dir(ch) => ch
                        .iter()
                        .find(|(n, _)| n.as_os_str() == op.name())
                        .map(|(_, i)| *i)
                        .ok_or(libc::ENOENT),
                    Kind::File(_) | Kind::Event => Err(libc::ENOTDIR),
                });
                match r {
                    Ok(ino) => {
                        let n = &fs.nodes[ino as usize - 1];
                        let mut out = EntryOut::default();
                        fs.fill_attr(n, out.attr());
                        out.ino(ino);
                        out.ttl_attr(TTL);
                        out.ttl_entry(TTL);
                        // Count before replying: once the kernel has the reply it may send
                        // the matching forget on another worker (libfuse PR #1368's race).
                        n.lookups.fetch_add(1, Ordering::Relaxed);
                        let res = req.reply(out);
                        if res.is_err() {
                            // The kernel did not take the entry (interrupted): no forget comes.
                            n.lookups.fetch_sub(1, Ordering::Relaxed);
                        }
                        res
                    }
                    Err(e) => req.reply_error(e),
                }
            }
            Operation::Forget(forgets) => {
                for f in forgets.as_ref() {
                    fs.forget(f);
                }
                Ok(()) // forget has no reply
            }
            Operation::Getattr(op) => match fs.node(op.ino()) {
                Ok(n) => {
                    let mut out = AttrOut::default();
                    fs.fill_attr(n, out.attr());
                    out.ttl(TTL);
                    req.reply(out)
                }
                Err(e) => req.reply_error(e),
            },
            Operation::Opendir(op) => match fs.node(op.ino()).map(|n| &n.kind) {
                Ok(Kind::Dir(_)) => req.reply(OpenOut::default()),
                Ok(Kind::File(_) | Kind::Event) => req.reply_error(libc::ENOTDIR),
                Err(e) => req.reply_error(e),
            },
            Operation::Readdir(op) => match fs.node(op.ino()) {
                Ok(
                    n @ Node {
                        kind: Kind::Dir(children),
                        ..
                    },
                ) => {
                    let mut out = ReaddirOut::new(op.size() as usize);
                    let all = [
                        (OsStr::new("."), n.ino, libc::DT_DIR),
                        (OsStr::new(".."), n.parent, libc::DT_DIR),
                    ]
                    .into_iter()
                    .chain(children.iter().map(|(name, i)| {
                        let t = match fs.nodes[*i as usize - 1].kind {
                            Kind::Dir(_) => libc::DT_DIR,
                            Kind::File(_) | Kind::Event => libc::DT_REG,
                        };
                        (name.as_os_str(), *i, t)
                    }));
                    for (k, (name, ino, typ)) in all.enumerate().skip(op.offset() as usize) {
                        if out.entry(name, ino, typ as u32, k as u64 + 1) {
                            break;
                        }
                    }
                    req.reply(out)
                }
                Ok(_) => req.reply_error(libc::ENOTDIR),
                Err(e) => req.reply_error(e),
            },
            Operation::Releasedir(_) => req.reply(()),
            Operation::Open(op) => match fs.node(op.ino()).map(|n| &n.kind) {
                Ok(kind @ (Kind::File(_) | Kind::Event)) => {
                    let fh = fs.next_fh.fetch_add(1, Ordering::Relaxed);
                    fs.files.insert(
                        fh,
                        Arc::new(OpenFile {
                            ino: op.ino(),
                            owners: Mutex::new(Vec::new()),
                            seen: AtomicU64::new(fs.event.load(Ordering::Acquire)),
                        }),
                    );
                    let mut out = OpenOut::default();
                    out.fh(fh);
                    // Attribute reads must reach us each time, not the page cache.
                    out.direct_io(matches!(kind, Kind::Event));
                    req.reply(out)
                }
                Ok(Kind::Dir(_)) => req.reply_error(libc::EISDIR),
                Err(e) => req.reply_error(e),
            },
            Operation::Read(op) => match fs.node(op.ino()).map(|n| &n.kind) {
                Ok(Kind::Event) => match fs.open_file(op.fh(), op.ino()) {
                    Ok(f) => {
                        // Acquire: pairs with the Release in `notify_event`.
                        let ev = fs.event.load(Ordering::Acquire);
                        f.seen.store(ev, Ordering::Relaxed);
                        let text = format!("{ev}\n").into_bytes();
                        let start = (op.offset() as usize).min(text.len());
                        let end = start.saturating_add(op.size() as usize).min(text.len());
                        req.reply(text[start..end].to_vec())
                    }
                    Err(e) => req.reply_error(e),
                },
                Ok(Kind::File(data)) => {
                    let d = data.read();
                    let start = (op.offset() as usize).min(d.len());
                    let end = start.saturating_add(op.size() as usize).min(d.len());
                    req.reply(d[start..end].to_vec())
                }
                Ok(Kind::Dir(_)) => req.reply_error(libc::EISDIR),
                Err(e) => req.reply_error(e),
            },
            Operation::Write(op, mut data) => match fs.node(op.ino()).map(|n| &n.kind) {
                Ok(Kind::File(file)) => {
                    let mut buf = Vec::with_capacity(op.size() as usize);
                    let _ = data.read_to_end(&mut buf);
                    let mut d = file.write();
                    let start = op.offset() as usize;
                    if start.saturating_add(buf.len()) > d.len() {
                        drop(d);
                        req.reply_error(libc::EFBIG) // the toy files do not grow
                    } else {
                        d[start..start + buf.len()].copy_from_slice(&buf);
                        drop(d);
                        let mut out = WriteOut::default();
                        out.size(buf.len() as u32);
                        req.reply(out)
                    }
                }
                Ok(Kind::Dir(_)) => req.reply_error(libc::EISDIR),
                Ok(Kind::Event) => req.reply_error(libc::EACCES),
                Err(e) => req.reply_error(e),
            },
            Operation::Flush(op) => {
                // close(2) of some fd: the POSIX close rule for the flushing owner.
                let owner = op.lock_owner().into_raw();
                if let (Ok(n), Ok(f)) = (fs.node(op.ino()), fs.open_file(op.fh(), op.ino())) {
                    fs.locks.release_posix(&n.locks, owner);
                    f.owners.lock().retain(|o| *o != owner);
                }
                req.reply(())
            }
            Operation::Release(op) => {
                // Last close of the open file description: its flock lock, and the locks of
                // owners that never flushed it (OFD locks), go.
                if let (Ok(n), Some(f)) = (fs.node(op.ino()), fs.files.remove(op.fh())) {
                    for owner in std::mem::take(&mut *f.owners.lock()) {
                        fs.locks.release_posix(&n.locks, owner);
                    }
                    fs.locks.release_file(&n.locks, op.fh());
                    fs.polls.lock().remove(&op.fh());
                }
                req.reply(())
            }
            Operation::Statfs(_) => {
                let mut out = StatfsOut::default();
                let st = out.statfs();
                st.bsize(4096);
                st.frsize(4096);
                st.files(fs.nodes.len() as u64);
                st.namelen(255);
                req.reply(out)
            }
            Operation::Getlk(op) => {
                fs.posix_requests.fetch_add(1, Ordering::Relaxed);
                let r = fs.node(op.ino()).and_then(|n| {
                    let lr = lock_request(
                        LockOwner::Process(op.owner().into_raw()),
                        op.pid(),
                        op.typ(),
                        op.start(),
                        op.end(),
                    )?;
                    Ok(fs.locks.getlk(&n.locks, &lr))
                });
                match r {
                    Ok(found) => {
                        let mut out = LkOut::default();
                        let fl = out.file_lock();
                        match found {
                            Some(info) => {
                                fl.typ(info.ty.to_l_type() as u32);
                                fl.start(info.start as u64);
                                fl.end(info.end as u64);
                                fl.pid(info.pid as u32);
                            }
                            None => fl.typ(libc::F_UNLCK as u32),
                        }
                        req.reply(out)
                    }
                    Err(e) => req.reply_error(e),
                }
            }
            Operation::Setlk(op) => {
                fs.posix_requests.fetch_add(1, Ordering::Relaxed);
                let owner = op.owner().into_raw();
                let prepared = fs.node(op.ino()).and_then(|_| {
                    let f = fs.open_file(op.fh(), op.ino())?;
                    let lr = lock_request(
                        LockOwner::Process(owner),
                        op.pid(),
                        op.typ(),
                        op.start(),
                        op.end(),
                    )?;
                    Ok((f, lr))
                });
                match prepared {
                    Err(e) => req.reply_error(e),
                    Ok((f, lr)) => {
                        if lr.ty != LockType::Unlock {
                            let mut owners = f.owners.lock();
                            if !owners.contains(&owner) {
                                owners.push(owner);
                            }
                        }
                        let ino = op.ino();
                        let sleep = op.sleep();
                        self.lock_op(req, ino, sleep, move |fs, ctx, token| {
                            fs.locks.setlk(ctx, &lr, token)
                        })
                    }
                }
            }
            Operation::Flock(op) => {
                fs.flock_requests.fetch_add(1, Ordering::Relaxed);
                let (ino, fh) = (op.ino(), op.fh());
                let lop = op.op().unwrap_or(0) as i32;
                let pid = req.pid() as i32;
                match fs.open_file(fh, ino) {
                    Err(e) => req.reply_error(e),
                    Ok(_) => {
                        let sleep = lop & libc::LOCK_NB == 0;
                        self.lock_op(req, ino, sleep, move |fs, ctx, token| {
                            let op = if token.is_some() {
                                lop
                            } else {
                                lop | libc::LOCK_NB
                            };
                            fs.locks.flock(ctx, fh, pid, op, token)
                        })
                    }
                }
            }
            Operation::Interrupt(op) => match fs.waits.get(op.unique()) {
                Some(token) => {
                    fs.interrupts.fetch_add(1, Ordering::Relaxed);
                    token.cancel();
                    Ok(()) // an interrupt is not answered unless it must be requeued
                }
                // Not (yet or any more) waiting: the kernel requeues the interrupt only if
                // the target is still pending.
                None => req.reply_error(libc::EAGAIN),
            },
            Operation::Poll(op) => match fs.open_file(op.fh(), op.ino()) {
                Ok(f) => {
                    // Register before computing the mask, so a notify in between is not
                    // lost: it either finds the kh or happened before our load below.
                    if let Some(kh) = op.kh() {
                        fs.polls.lock().insert(op.fh(), kh);
                    }
                    let mut revents = (libc::POLLIN | libc::POLLRDNORM) as u32;
                    // Acquire: pairs with the Release in `notify_event`.
                    if fs.event.load(Ordering::Acquire) != f.seen.load(Ordering::Relaxed) {
                        revents |= (libc::POLLERR | libc::POLLPRI) as u32;
                    }
                    let mut out = PollOut::default();
                    out.revents(revents & op.events());
                    req.reply(out)
                }
                Err(e) => req.reply_error(e),
            },
            _ => req.reply_error(libc::ENOSYS),
        };
    }

    /// Runs a lock operation: once without waiting on this worker; if it conflicts and the
    /// caller may sleep, again on a thread of its own that waits on a published
    /// [`CancelToken`] (see the module docs). `f(fs, ctx, None)` must not sleep.
    fn lock_op<F>(self: &Arc<Self>, req: Request, ino: u64, sleep: bool, f: F) -> io::Result<()>
    where
        F: Fn(&Fs, &FileLockContext, Option<&CancelToken>) -> Result<(), Errno> + Send + 'static,
    {
        let ctx = &self.fs.nodes[ino as usize - 1].locks;
        match f(&self.fs, ctx, None) {
            Err(Errno::EAGAIN) if sleep => {}
            Ok(()) => return req.reply(()),
            Err(e) => return req.reply_error(errno(e)),
        }
        let token = CancelToken::new();
        let unique = req.unique();
        self.fs.waits.insert(unique, token.clone());
        let inner = self.clone();
        // The request goes to the waiting thread through a slot, so that it can still be
        // answered here if no thread can be made.
        let slot = Arc::new(Mutex::new(Some(req)));
        let theirs = slot.clone();
        let spawned = std::thread::Builder::new()
            .name("fuse-lock-wait".into())
            .spawn(move || {
                let Some(req) = theirs.lock().take() else {
                    return;
                };
                let fs = &inner.fs;
                let ctx = &fs.nodes[ino as usize - 1].locks;
                let res = f(fs, ctx, Some(&token));
                let _ = match res {
                    Ok(()) => req.reply(()),
                    Err(e) => req.reply_error(errno(e)),
                };
                // Unpublish only after replying, so an interrupt racing with the reply sees
                // either the token (harmless cancel) or an answered request (EAGAIN, which
                // the kernel drops).
                fs.waits.remove(unique);
            });
        if spawned.is_err() {
            self.fs.waits.remove(unique);
            if let Some(req) = slot.lock().take() {
                return req.reply_error(libc::ENOLCK);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mountinfo_escapes_are_decoded() {
        assert_eq!(unescape_mountinfo(r"/tmp/a\040b\134c"), b"/tmp/a b\\c");
        assert_eq!(
            unescape_mountinfo(r"/x\09"),
            b"/x\\09",
            "not three octal digits"
        );
        assert_eq!(unescape_mountinfo("/plain"), b"/plain");
    }

    #[test]
    fn fuse_lock_ranges_convert_to_lock_requests() {
        let r = lock_request(LockOwner::Process(7), 42, libc::F_WRLCK as u32, 5, u64::MAX).unwrap();
        assert_eq!(
            (r.start, r.end, r.ty, r.pid),
            (5, OFFSET_MAX, LockType::Write, 42)
        );
        assert_eq!(
            lock_request(LockOwner::Process(7), 1, 99, 0, 1),
            Err(libc::EINVAL),
            "bad type"
        );
        assert_eq!(
            lock_request(
                LockOwner::Process(7),
                1,
                libc::F_RDLCK as u32,
                u64::MAX,
                u64::MAX
            ),
            Err(libc::EINVAL),
            "start beyond OFFSET_MAX"
        );
    }
}
