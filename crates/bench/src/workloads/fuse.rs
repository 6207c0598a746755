//! FUSE workloads: the same real system calls on a scalevfs FUSE mount and on
//! host tmpfs, in the same run, so that `scalable/host` in the report is the throughput
//! of the FUSE mount relative to the kernel's own tmpfs: the FUSE overhead.
//!
//! * `fuse-open-close`: each thread opens its own file read-only and closes it
//!   (will-it-scale `open1`). Through FUSE: OPEN, FLUSH and RELEASE requests (the path
//!   lookup is served from the kernel's dentry cache while the entry is valid).
//! * `fuse-stat`: each thread `stat`s its own file by path. Through FUSE this reaches
//!   the server only when the kernel's attribute or entry cache has expired (the server's
//!   TTL decides how often), so it measures what a program sees, caches included.
//! * `fuse-locks`: each thread `F_SETLK`-locks and unlocks byte 0 of its own file
//!   (will-it-scale `lock1`). The server advertises POSIX locks, so every lock and unlock
//!   is a SETLK request answered by scalevfs's lock manager, not the kernel's.
//! * `fuse-proc-open-close`, `fuse-proc-stat`, `fuse-proc-locks`: the same loops run by
//!   real forked client processes, one per thread (the benchmark thread only hands its
//!   process a batch through a pipe and waits for it): the server then sees what other
//!   programs send, each with its own pid, `files_struct` and so POSIX lock owner.
//!
//! The server's worker count is `SCALEVFS_BENCH_FUSE_THREADS` (default 2), read once.
//! Its transport is `SCALEVFS_BENCH_FUSE_TRANSPORT` (read once): `auto` (the default:
//! io_uring when the kernel offers it), `uring`, `dev`, or `both`, which runs the two
//! side by side in one run: **legacy** is the `/dev/fuse` mount and **scalable** the
//! io_uring one (its setup fails, saying why, where io_uring is off: the fuse module's
//! `enable_uring` must be Y, which the benchmark never sets itself). The transport that
//! serves each mount is printed once per design.
//! The mount runs the `scalevfs` daemon's idle hook (freed memory given back half a second
//! after the last request; `MountOptions::on_idle`) unless `SCALEVFS_BENCH_FUSE_IDLE_HOOK=0`:
//! running the same workload both ways shows what the idle watcher costs per request.
//!
//! Designs: **scalable** is the FUSE mount (scalevfs's default, scalable design, served
//! by `scalevfs_fuse::Server` with 2 request threads on a fresh temporary directory,
//! mounted at setup and unmounted at teardown); **host** is a directory on /dev/shm.
//! Both run the code below on a [`HostDir`]-style path; only the directory differs.
//!
//! The FUSE design needs /dev/fuse access (root) and fusermount3. When one is missing it
//! is left out of `designs()` and the reason is printed once; the host design still
//! runs. The benchmark process serves its own mount: it never forks while files are open
//! there, and `Server`'s drop aborts the connection if a run panics, so a worker cannot be
//! left waiting for a server that is gone.

use std::ffi::CString;
use std::sync::OnceLock;

use scalevfs_fuse::{MountOptions, Server, Transport};

use crate::workloads::host_dir::{sys, HostDir};
use crate::{Design, Instance, Workload};

/// Operations per worker call.
const BATCH: u64 = 32;
/// Operations per batch of a client process: large enough that the pipe round trip to
/// the process (two wake-ups) is a small part of a batch even on host tmpfs.
const PROC_BATCH: u64 = 512;
/// FUSE request threads of the benchmark's mount, unless `SCALEVFS_BENCH_FUSE_THREADS`
/// says otherwise.
pub const SERVER_THREADS: usize = 2;

/// The server's worker count: `SCALEVFS_BENCH_FUSE_THREADS` if it is a positive
/// number, else [`SERVER_THREADS`].
pub fn server_threads() -> usize {
    static N: OnceLock<usize> = OnceLock::new();
    *N.get_or_init(|| {
        std::env::var("SCALEVFS_BENCH_FUSE_THREADS")
            .ok()
            .and_then(|v| v.parse().ok())
            .filter(|&n| n > 0)
            .unwrap_or(SERVER_THREADS)
    })
}

/// Which transports the FUSE designs use (`SCALEVFS_BENCH_FUSE_TRANSPORT`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transports {
    /// One mount per run, served by this transport (the scalable design).
    One(Transport),
    /// `/dev/fuse` as the legacy design and io_uring as the scalable one.
    Both,
}

/// `SCALEVFS_BENCH_FUSE_TRANSPORT`: `auto` (default), `uring`, `dev` or `both`; anything
/// else is reported once and read as `auto`.
pub fn transports() -> Transports {
    static T: OnceLock<Transports> = OnceLock::new();
    *T.get_or_init(|| match std::env::var("SCALEVFS_BENCH_FUSE_TRANSPORT") {
        Err(_) => Transports::One(Transport::Auto),
        Ok(v) if v == "both" => Transports::Both,
        Ok(v) => v.parse().map(Transports::One).unwrap_or_else(|e: String| {
            eprintln!("scalevfs bench: SCALEVFS_BENCH_FUSE_TRANSPORT: {e}; using auto");
            Transports::One(Transport::Auto)
        }),
    })
}

/// The transport of `design`'s mount.
fn transport_of(design: Design) -> Transport {
    match (transports(), design) {
        (Transports::Both, Design::Legacy) => Transport::Dev,
        (Transports::Both, _) => Transport::Uring,
        (Transports::One(t), _) => t,
    }
}

/// Whether the mount runs the daemon's idle hook: yes unless
/// `SCALEVFS_BENCH_FUSE_IDLE_HOOK=0`.
fn idle_hook() -> Option<fn()> {
    static ON: OnceLock<bool> = OnceLock::new();
    ON.get_or_init(|| std::env::var("SCALEVFS_BENCH_FUSE_IDLE_HOOK").as_deref() != Ok("0"))
        .then_some(crate::memory::release_free_memory as fn())
}

const FUSE_AND_HOST: &[Design] = &[Design::Scalable, Design::Host];
const BOTH_TRANSPORTS_AND_HOST: &[Design] = &[Design::Legacy, Design::Scalable, Design::Host];
const HOST_ONLY: &[Design] = &[Design::Host];

/// This module's workloads, in the order the report lists them.
pub fn workloads() -> Vec<Box<dyn Workload>> {
    let mut v: Vec<Box<dyn Workload>> = Vec::new();
    for procs in [false, true] {
        for kind in [Kind::OpenClose, Kind::Stat, Kind::Locks] {
            v.push(Box::new(Fuse { kind, procs }));
        }
    }
    v
}

/// Why the FUSE design cannot run here, if it cannot. Checked once per process (the
/// reason is printed then): `scalevfs mount`'s preflight checks, then a real mount on
/// which a file is created, so that a machine that cannot mount (no `CAP_SYS_ADMIN` in a
/// container) or a server that cannot create files yet skips the design instead of
/// failing every run.
pub fn fuse_unavailable() -> Option<&'static str> {
    static WHY: OnceLock<Option<String>> = OnceLock::new();
    WHY.get_or_init(|| {
        let why = probe().err();
        if let Some(why) = &why {
            eprintln!(
                "scalevfs bench: fuse-* workloads: FUSE design skipped ({why}); the host \
                 design still runs"
            );
        }
        why
    })
    .as_deref()
}

fn probe() -> Result<(), String> {
    scalevfs_fuse::preflight(&std::env::temp_dir()).map_err(|e| e.to_string())?;
    let side = Side::mount(Transport::Dev)?;
    let fd = sys::create(&side.path("probe"))?;
    sys::close(fd);
    Ok(())
}

#[derive(Copy, Clone, PartialEq, Eq, Debug)]
enum Kind {
    OpenClose,
    Stat,
    Locks,
}

struct Fuse {
    kind: Kind,
    /// Driven by forked client processes, not by the benchmark's threads.
    procs: bool,
}

impl Workload for Fuse {
    fn name(&self) -> &'static str {
        match (self.kind, self.procs) {
            (Kind::OpenClose, false) => "fuse-open-close",
            (Kind::Stat, false) => "fuse-stat",
            (Kind::Locks, false) => "fuse-locks",
            (Kind::OpenClose, true) => "fuse-proc-open-close",
            (Kind::Stat, true) => "fuse-proc-stat",
            (Kind::Locks, true) => "fuse-proc-locks",
        }
    }
    fn description(&self) -> &'static str {
        if self.procs {
            return match self.kind {
                Kind::OpenClose => {
                    "open (O_RDONLY) and close one's own file, in a forked client process per \
                     thread; scalable = a scalevfs FUSE mount, host = /dev/shm"
                }
                Kind::Stat => {
                    "stat one's own file by path, in a forked client process per thread; \
                     scalable = a scalevfs FUSE mount, host = /dev/shm"
                }
                Kind::Locks => {
                    "F_SETLK-lock and unlock byte 0 of one's own file, in a forked client \
                     process per thread; scalable = a scalevfs FUSE mount, host = /dev/shm"
                }
            };
        }
        match self.kind {
            Kind::OpenClose => {
                "open (O_RDONLY) and close one's own file with real syscalls; scalable = a \
                 scalevfs FUSE mount, host = /dev/shm: scalable/host is the FUSE overhead"
            }
            Kind::Stat => {
                "stat one's own file by path with real syscalls; scalable = a scalevfs FUSE \
                 mount (kernel attribute caching included), host = /dev/shm"
            }
            Kind::Locks => {
                "F_SETLK-lock and unlock byte 0 of one's own file with real fcntl calls; \
                 scalable = a scalevfs FUSE mount (every call a SETLK request to scalevfs's \
                 lock manager), host = /dev/shm"
            }
        }
    }
    fn designs(&self) -> &'static [Design] {
        if fuse_unavailable().is_some() {
            HOST_ONLY
        } else if transports() == Transports::Both {
            BOTH_TRANSPORTS_AND_HOST
        } else {
            FUSE_AND_HOST
        }
    }
    fn setup(&self, design: Design, threads: usize) -> Result<Box<dyn Instance>, String> {
        let inst = FuseInst::new(self.kind, design, threads)?;
        if self.procs {
            Ok(Box::new(ProcInst::new(inst)?))
        } else {
            Ok(Box::new(inst))
        }
    }
}

/// Where the files live: a FUSE mount, or a directory on host tmpfs.
enum Side {
    /// Field order is drop order: unmount, then remove the empty mount point.
    Fuse {
        server: Option<Box<Server>>,
        mountpoint: HostDir,
    },
    Host(HostDir),
}

impl Side {
    /// A scalevfs FUSE mount on a fresh temporary directory, served over `transport`.
    fn mount(transport: Transport) -> Result<Side, String> {
        let mountpoint = HostDir::fresh_in(&std::env::temp_dir(), "fuse-mnt")?;
        let options = MountOptions {
            threads: server_threads(),
            // No fusermount3 watchdog: `Server`'s drop cleans up after a panic, and the
            // watchdog would complain on stderr after every clean unmount.
            auto_unmount: false,
            // As the daemon: the worker's per-request idle check included.
            on_idle: idle_hook(),
            transport,
            ..MountOptions::default()
        };
        let server = Server::mount_with(mountpoint.path(), &options)
            .map_err(|e| format!("{}: {e}", mountpoint.path().display()))?;
        static SAID: [std::sync::Once; 3] = [const { std::sync::Once::new() }; 3];
        SAID[transport as usize].call_once(|| {
            eprintln!(
                "scalevfs bench: fuse-* mount asked for {transport:?}: {}",
                server.transport()
            )
        });
        Ok(Side::Fuse {
            server: Some(Box::new(server)),
            mountpoint,
        })
    }

    fn path(&self, rel: &str) -> CString {
        match self {
            Side::Fuse { mountpoint: d, .. } | Side::Host(d) => d.cpath(rel),
        }
    }
}

impl Drop for Side {
    fn drop(&mut self) {
        if let Side::Fuse { server, mountpoint } = self {
            if let Some(Err(e)) = server.take().map(|s| s.unmount()) {
                eprintln!(
                    "scalevfs bench: unmounting {}: {e}",
                    mountpoint.path().display()
                );
            }
        }
    }
}

struct FuseInst {
    kind: Kind,
    /// Per thread: its file's path and (for `Locks`) an open descriptor on it.
    files: Vec<(CString, i32)>,
    /// Held for its drop, which comes after `Drop::drop` has closed the files.
    _side: Side,
}

impl FuseInst {
    fn new(kind: Kind, design: Design, threads: usize) -> Result<FuseInst, String> {
        let side = match design {
            Design::Host => Side::Host(HostDir::shm("fuse")?),
            Design::Legacy if transports() != Transports::Both => {
                return Err("fuse-* workloads have a legacy design only with \
                            SCALEVFS_BENCH_FUSE_TRANSPORT=both"
                    .into())
            }
            Design::Scalable | Design::Legacy => match fuse_unavailable() {
                Some(why) => return Err(format!("no FUSE here: {why}")),
                None => Side::mount(transport_of(design))?,
            },
        };
        // On an error `side` is dropped here: the mount goes, then its directory.
        let files = create_files(&side, threads, kind == Kind::Locks)?;
        Ok(FuseInst {
            kind,
            files,
            _side: side,
        })
    }
}

impl Drop for FuseInst {
    fn drop(&mut self) {
        // Close before the side unmounts: nothing of ours is left open on the mount.
        for &(_, fd) in &self.files {
            if fd >= 0 {
                sys::close(fd);
            }
        }
    }
}

impl Instance for FuseInst {
    fn worker(&self, thread: usize) -> Box<dyn FnMut() -> u64 + '_> {
        let (path, fd) = &self.files[thread];
        let fd = *fd;
        let kind = self.kind;
        Box::new(move || {
            for _ in 0..BATCH {
                one_op(kind, path, fd);
            }
            BATCH
        })
    }
}

/// One operation of `kind` on `path` (or on `fd`, for locks), as the loops run it.
#[inline]
fn one_op(kind: Kind, path: &std::ffi::CStr, fd: i32) {
    match kind {
        Kind::OpenClose => {
            let fd = sys::open(path, libc::O_RDONLY);
            debug_assert!(fd >= 0, "open {path:?}");
            sys::close(fd);
        }
        Kind::Stat => {
            let size = std::hint::black_box(sys::stat_size(path));
            debug_assert!(size >= 0, "stat {path:?}");
        }
        Kind::Locks => {
            let locked = sys::lock(fd, libc::F_SETLK, libc::F_WRLCK, 1);
            debug_assert!(locked, "nobody else locks this file");
            let unlocked = sys::lock(fd, libc::F_SETLK, libc::F_UNLCK, 1);
            debug_assert!(unlocked, "unlock cannot fail");
        }
    }
}

/// A forked client process running one thread's loop: each byte on `go` asks for a
/// batch of [`PROC_BATCH`] operations, answered by a byte on `done`; a 0 byte (or the
/// pipe's end) makes it exit.
struct Client {
    pid: i32,
    go: i32,
    done: i32,
}

/// A [`FuseInst`] whose loops run in forked client processes.
struct ProcInst {
    clients: Vec<Client>,
    /// Its files are closed in the parent (the clients open their own).
    inst: FuseInst,
}

fn pipe() -> Result<(i32, i32), String> {
    let mut fds = [0; 2];
    // SAFETY: `fds` has room for the two descriptors.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(format!("pipe: {}", std::io::Error::last_os_error()));
    }
    Ok((fds[0], fds[1]))
}

fn write_byte(fd: i32, b: u8) -> bool {
    // SAFETY: writes one byte from a live u8.
    unsafe { libc::write(fd, (&b as *const u8).cast(), 1) == 1 }
}

/// 0 at the pipe's end or on an error.
fn read_byte(fd: i32) -> u8 {
    let mut b = 0u8;
    // SAFETY: reads one byte into a live u8.
    match unsafe { libc::read(fd, (&mut b as *mut u8).cast(), 1) } {
        1 => b,
        _ => 0,
    }
}

/// The client process's body (after `fork`, in a process that may have had other
/// threads: only system calls here, no allocation, no lock).
fn client_main(kind: Kind, path: &std::ffi::CStr, go: i32, done: i32) -> ! {
    let fd = if kind == Kind::Locks {
        sys::open(path, libc::O_RDWR)
    } else {
        -1
    };
    while read_byte(go) == 1 {
        for _ in 0..PROC_BATCH {
            one_op(kind, path, fd);
        }
        if !write_byte(done, 1) {
            break;
        }
    }
    // SAFETY: ends the forked child without running the parent's destructors.
    unsafe { libc::_exit(0) }
}

impl ProcInst {
    fn new(mut inst: FuseInst) -> Result<ProcInst, String> {
        // Nothing of ours may be open on the mount while we fork (a child's copy would
        // delay its RELEASE): the clients open their own files.
        for f in &mut inst.files {
            if f.1 >= 0 {
                sys::close(f.1);
                f.1 = -1;
            }
        }
        let mut me = ProcInst {
            clients: Vec::new(),
            inst,
        };
        for t in 0..me.inst.files.len() {
            let (go_r, go_w) = pipe()?;
            let (done_r, done_w) = pipe()?;
            // SAFETY: the child runs only `client_main` (system calls) and `_exit`.
            let pid = unsafe { libc::fork() };
            if pid == 0 {
                client_main(me.inst.kind, &me.inst.files[t].0, go_r, done_w);
            }
            sys::close(go_r);
            sys::close(done_w);
            if pid < 0 {
                sys::close(go_w);
                sys::close(done_r);
                return Err(format!("fork: {}", std::io::Error::last_os_error()));
            }
            me.clients.push(Client {
                pid,
                go: go_w,
                done: done_r,
            });
        }
        Ok(me)
    }
}

impl Drop for ProcInst {
    fn drop(&mut self) {
        // Every client exits (closing its files on the mount) before the mount goes.
        for c in &self.clients {
            write_byte(c.go, 0);
            sys::close(c.go);
        }
        for c in &self.clients {
            let mut status = 0;
            // SAFETY: reaps our own child.
            unsafe { libc::waitpid(c.pid, &mut status, 0) };
            sys::close(c.done);
        }
    }
}

impl Instance for ProcInst {
    fn worker(&self, thread: usize) -> Box<dyn FnMut() -> u64 + '_> {
        let c = &self.clients[thread];
        Box::new(move || {
            if !write_byte(c.go, 1) || read_byte(c.done) != 1 {
                panic!("fuse client process {} died", c.pid);
            }
            PROC_BATCH
        })
    }
}

/// Creates `t0`..`t{threads-1}` on `side`; keeps them open if `keep_open`.
fn create_files(
    side: &Side,
    threads: usize,
    keep_open: bool,
) -> Result<Vec<(CString, i32)>, String> {
    let mut files: Vec<(CString, i32)> = Vec::with_capacity(threads);
    for t in 0..threads {
        let path = side.path(&format!("t{t}"));
        let fd = match sys::create(&path) {
            Ok(fd) => fd,
            Err(e) => {
                files.iter().for_each(|&(_, fd)| sys::close(fd));
                return Err(e);
            }
        };
        if !keep_open {
            sys::close(fd);
        }
        files.push((path, if keep_open { fd } else { -1 }));
    }
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workloads::test_support::run_every_design;

    /// Every workload under every design this machine offers: host tmpfs always, the FUSE
    /// mount when this machine can mount one and create a file on it (root, /dev/fuse,
    /// fusermount3; otherwise the design is left out, with the reason).
    #[test]
    fn every_fuse_workload_runs_under_each_available_design() {
        let expected = match fuse_unavailable() {
            Some(why) => {
                println!("SKIPPED: fuse design: {why}");
                HOST_ONLY
            }
            None => FUSE_AND_HOST,
        };
        for w in workloads() {
            assert_eq!(w.designs(), expected);
            let ran = run_every_design(&*w, 2, 10);
            assert_eq!(ran.len(), expected.len());
            let batch = if w.name().starts_with("fuse-proc-") {
                PROC_BATCH
            } else {
                BATCH
            };
            for (design, ops) in ran {
                assert_eq!(ops, [10 * batch; 2], "{} {design}", w.name());
            }
        }
    }

    #[test]
    fn workers_work_on_their_own_file() {
        let inst = FuseInst::new(Kind::Locks, Design::Host, 2).unwrap();
        let Side::Host(dir) = &inst._side else {
            unreachable!("host design")
        };
        assert_eq!(inst.files[1].0, dir.cpath("t1"));
        let other = sys::create(&dir.cpath("t1")).unwrap();
        // Thread 1's lock shows to another open file description while held, and the
        // worker leaves nothing locked.
        assert!(sys::lock(inst.files[1].1, libc::F_SETLK, libc::F_WRLCK, 1));
        assert_eq!(sys::getlk(other, libc::F_OFD_GETLK, 1), libc::F_WRLCK);
        assert!(sys::lock(inst.files[1].1, libc::F_SETLK, libc::F_UNLCK, 1));
        let mut work = inst.worker(1);
        assert_eq!(work(), BATCH);
        drop(work);
        assert_eq!(sys::getlk(other, libc::F_OFD_GETLK, 1), libc::F_UNLCK);
        sys::close(other);
        let path = dir.path().to_owned();
        drop(inst);
        assert!(!path.exists(), "teardown removes the directory");
    }

    /// Each client is a live process of its own, and it exits with the instance.
    #[test]
    fn process_clients_are_processes_of_their_own() {
        let inst = ProcInst::new(FuseInst::new(Kind::Locks, Design::Host, 2).unwrap()).unwrap();
        let pids: Vec<i32> = inst.clients.iter().map(|c| c.pid).collect();
        // SAFETY: getpid has no preconditions.
        let me = unsafe { libc::getpid() };
        assert!(pids.iter().all(|&p| p != me) && pids[0] != pids[1]);
        let mut work = inst.worker(1);
        assert_eq!(work(), PROC_BATCH);
        drop(work);
        drop(inst);
        for pid in pids {
            // SAFETY: probes a pid we reaped: it no longer exists.
            assert_eq!(unsafe { libc::kill(pid, 0) }, -1, "client {pid} exited");
        }
    }

    #[test]
    fn no_legacy_design() {
        assert!(FuseInst::new(Kind::Stat, Design::Legacy, 1).is_err());
    }
}
