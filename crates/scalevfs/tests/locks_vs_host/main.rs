//! Differential tests of file locks against the host kernel.
//!
//! Each test is a script of steps run by numbered owners. On the host an owner is a real
//! forked process on a file in /dev/shm (tmpfs), driven over a pair of pipes with
//! fixed-size messages (the child does only `read`, `write` and the call itself, no
//! allocation); on scalevfs an owner is a thread running a `Process::fork()` of one parent.
//! Both sides' results are normalized (an `l_pid` becomes the owner's index) and compared
//! step by step.
//!
//! A step that blocks (`Start`) is confirmed blocked by watching the lock listing
//! (`/proc/locks` on the host, `Vfs::proc_locks` here) for a new waiter on the file. Every
//! wait is bounded: a reply that does not come within `REPLY` is recorded as `TIMEOUT`
//! (and then differs), and dropping an owner kills the host child.
//!
//! `EINTR`: the host child installs a no-op `SIGUSR1` handler without `SA_RESTART` and the
//! harness signals it while it sleeps in `F_SETLKW`/`flock`; the scalevfs owner runs blocking
//! calls through `with_cancel(&token).fcntl`/`.flock` and the harness cancels the
//! token.

use std::ffi::CString;
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use libc::{
    F_GETLK, F_OFD_GETLK, F_OFD_SETLK, F_OFD_SETLKW, F_RDLCK, F_SETLK, F_SETLKW, F_UNLCK, F_WRLCK,
    LOCK_EX, LOCK_NB, LOCK_SH, LOCK_UN, O_RDONLY, O_RDWR, O_WRONLY, SEEK_CUR, SEEK_END, SEEK_SET,
};
use scalevfs::CancelToken;
use scalevfs::{Credentials, FcntlArg, Flock, Process, Vfs, VfsOptions};

/// How long a reply or a waiter may take to show up. Generous: on a loaded 2-core CI
/// machine a forked owner once took more than 5 s to be scheduled and block (the host side
/// then read "neither blocked nor completed"); only a failing run waits this long.
const REPLY: Duration = Duration::from_secs(30);

mod cases;
#[path = "../common/mod.rs"]
mod common;
mod random;

#[derive(Copy, Clone, Debug)]
enum Op {
    /// Opens the test file into descriptor slot `.0` with flags `.1`.
    Open(usize, i32),
    Close(usize),
    /// `fcntl(slot, cmd, &{type, whence, start, len, pid})`.
    Fcntl(usize, i32, Fl),
    Flock(usize, i32),
    /// `lseek(slot, off, SEEK_SET)`.
    Seek(usize, i64),
    Truncate(usize, i64),
    /// `slot .0 = dup(slot .1)`: a second descriptor of the same open file description.
    Dup(usize, usize),
}

#[derive(Copy, Clone, Debug)]
struct Fl(i32, i32, i64, i64, i32);

fn lk(ty: i32, start: i64, len: i64) -> Fl {
    Fl(ty, SEEK_SET, start, len, 0)
}

#[derive(Copy, Clone, Debug)]
enum Step {
    /// Runs an operation that must complete.
    Do(usize, Op),
    /// Starts an operation that should block; recorded as `blocked` once a new waiter
    /// appears in the listing, or with its result if it completes instead.
    Start(usize, Op),
    /// Collects the result of the owner's started operation.
    Finish(usize),
    /// Interrupts the owner's blocked operation (signal / cancel token).
    Interrupt(usize),
    /// The lock listing of the test file (`/proc/locks`), normalized: no ids, owners by
    /// index, lines sorted.
    List,
}
use Step::*;

/// A raw reply: return value, errno, and the `struct flock` after the call.
#[derive(Copy, Clone, Debug)]
struct Reply {
    ret: i64,
    errno: i32,
    fl: Fl,
}

trait Side {
    fn send(&mut self, owner: usize, op: Op);
    fn recv(&mut self, owner: usize, timeout: Duration) -> Option<Reply>;
    fn interrupt(&mut self, owner: usize);
    fn pid(&self, owner: usize) -> i32;
    /// The lock listing, `/proc/locks` format.
    fn listing(&self) -> String;
    /// The test file's inode number, as the listing shows it.
    fn ino(&self) -> u64;
    /// Waiting requests on the test file in the lock listing.
    fn waiters(&self) -> usize {
        let tag = format!(":{} ", self.ino());
        self.listing()
            .lines()
            .filter(|l| l.contains("-> ") && l.contains(&tag))
            .count()
    }
}

/// The test file's lines of the listing, comparable across sides: the lock ids and the
/// device dropped, a pid replaced by its owner's index, the lines sorted.
fn normalized_listing(side: &dyn Side, n: usize) -> String {
    let tag = format!(":{} ", side.ino());
    let mut lines: Vec<String> = side
        .listing()
        .lines()
        .filter(|l| l.contains(&tag))
        .map(|l| {
            let rest = l.split_once(": ").map_or(l, |(_, r)| r);
            let mut f: Vec<String> = rest.split_whitespace().map(String::from).collect();
            // `[->] CLASS ADVISORY TYPE PID MAJ:MIN:INO START END`
            let at = usize::from(f.first().is_some_and(|w| w == "->"));
            if let Some(pid) = f.get(at + 3).and_then(|p| p.parse::<i32>().ok()) {
                if let Some(i) = (0..n).find(|&i| side.pid(i) == pid) {
                    f[at + 3] = format!("owner{i}");
                }
            }
            if let Some(dev) = f.get_mut(at + 4) {
                *dev = "file".into();
            }
            f.join(" ")
        })
        .collect();
    lines.sort();
    if lines.is_empty() {
        "no locks".into()
    } else {
        lines.join("; ")
    }
}

fn errno_name(e: i32) -> String {
    match e {
        libc::EAGAIN => "EAGAIN".into(),
        libc::EACCES => "EACCES".into(),
        libc::EBADF => "EBADF".into(),
        libc::EINVAL => "EINVAL".into(),
        libc::EOVERFLOW => "EOVERFLOW".into(),
        libc::EDEADLK => "EDEADLK".into(),
        libc::EINTR => "EINTR".into(),
        e => format!("errno {e}"),
    }
}

fn show(side: &dyn Side, n: usize, op: &Op, r: Option<Reply>) -> String {
    let Some(r) = r else {
        return "TIMEOUT".into();
    };
    if r.ret < 0 {
        return errno_name(r.errno);
    }
    match op {
        Op::Fcntl(_, cmd, _) if *cmd == F_GETLK || *cmd == F_OFD_GETLK => {
            let Fl(ty, whence, start, len, pid) = r.fl;
            if ty == F_UNLCK {
                return "unlocked".into();
            }
            let who = match (0..n).find(|&i| side.pid(i) == pid) {
                Some(i) => format!("owner{i}"),
                None => format!("pid {pid}"),
            };
            let ty = if ty == F_RDLCK { "RD" } else { "WR" };
            format!("{ty} whence={whence} start={start} len={len} {who}")
        }
        // Descriptor numbers and file positions need not agree.
        Op::Open(..) | Op::Seek(..) | Op::Dup(..) => "ok".into(),
        _ => format!("ok {}", r.ret),
    }
}

fn run_script(side: &mut dyn Side, n: usize, steps: &[Step]) -> Vec<String> {
    let mut out = Vec::new();
    let mut started: Vec<Option<Op>> = vec![None; n];
    let mut early: Vec<Option<String>> = vec![None; n];
    for (k, step) in steps.iter().enumerate() {
        let line = match *step {
            Do(o, op) => {
                side.send(o, op);
                let r = side.recv(o, REPLY);
                show(side, n, &op, r)
            }
            Start(o, op) => {
                let before = side.waiters();
                side.send(o, op);
                started[o] = Some(op);
                let deadline = Instant::now() + REPLY;
                loop {
                    if side.waiters() > before {
                        break "blocked".to_string();
                    }
                    if let Some(r) = side.recv(o, Duration::from_millis(2)) {
                        let s = format!("completed: {}", show(side, n, &op, Some(r)));
                        early[o] = Some(s.clone());
                        break s;
                    }
                    if Instant::now() > deadline {
                        break "neither blocked nor completed".to_string();
                    }
                }
            }
            Finish(o) => match early[o].take() {
                Some(_) => "already completed".into(),
                None => {
                    let op = started[o].take().expect("Finish without Start");
                    let r = side.recv(o, REPLY);
                    show(side, n, &op, r)
                }
            },
            Interrupt(o) => {
                side.interrupt(o);
                "interrupted".into()
            }
            List => normalized_listing(side, n),
        };
        out.push(format!("{k}: {step:?} -> {line}"));
    }
    out
}

// --- the host side: forked processes ---

struct HostOwner {
    pid: libc::pid_t,
    cmd: i32,
    resp: i32,
}

struct Host {
    owners: Vec<HostOwner>,
    path: String,
    ino: u64,
}

extern "C" fn noop_handler(_: libc::c_int) {}

/// Reads exactly `buf.len()` bytes, retrying `EINTR`; false at EOF or on error.
fn read_full(fd: i32, buf: &mut [u8]) -> bool {
    let mut got = 0;
    while got < buf.len() {
        // SAFETY: the pointer and length describe the rest of `buf`.
        let r = unsafe { libc::read(fd, buf[got..].as_mut_ptr().cast(), buf.len() - got) };
        if r < 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) {
            continue;
        }
        if r <= 0 {
            return false;
        }
        got += r as usize;
    }
    true
}

fn write_full(fd: i32, buf: &[u8]) -> bool {
    // Messages are 64 bytes, below PIPE_BUF: one write is atomic.
    loop {
        // SAFETY: the pointer and length describe `buf`.
        let r = unsafe { libc::write(fd, buf.as_ptr().cast(), buf.len()) };
        if r < 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) {
            continue;
        }
        return r == buf.len() as isize;
    }
}

fn encode(v: [i64; 8]) -> [u8; 64] {
    let mut b = [0u8; 64];
    for (i, x) in v.iter().enumerate() {
        b[i * 8..i * 8 + 8].copy_from_slice(&x.to_ne_bytes());
    }
    b
}

fn decode(b: &[u8; 64]) -> [i64; 8] {
    let mut v = [0i64; 8];
    for (i, x) in v.iter_mut().enumerate() {
        *x = i64::from_ne_bytes(b[i * 8..i * 8 + 8].try_into().unwrap());
    }
    v
}

fn encode_op(op: Op) -> [i64; 8] {
    match op {
        Op::Open(s, f) => [0, s as i64, f as i64, 0, 0, 0, 0, 0],
        Op::Close(s) => [1, s as i64, 0, 0, 0, 0, 0, 0],
        Op::Fcntl(s, cmd, Fl(t, w, st, l, p)) => {
            [2, s as i64, cmd as i64, t as i64, w as i64, st, l, p as i64]
        }
        Op::Flock(s, o) => [3, s as i64, o as i64, 0, 0, 0, 0, 0],
        Op::Seek(s, off) => [4, s as i64, off, 0, 0, 0, 0, 0],
        Op::Truncate(s, len) => [5, s as i64, len, 0, 0, 0, 0, 0],
        Op::Dup(to, from) => [6, to as i64, from as i64, 0, 0, 0, 0, 0],
    }
}

/// The forked child's loop: no allocation, only system calls on fixed buffers.
fn child_main(path: &CString, cmd: i32, resp: i32) -> ! {
    let mut slots = [-1i32; 8];
    let mut buf = [0u8; 64];
    loop {
        if !read_full(cmd, &mut buf) {
            // SAFETY: leaving the forked child without running the parent's destructors.
            unsafe { libc::_exit(0) };
        }
        let v = decode(&buf);
        let slot = (v[1] as usize) % slots.len();
        let fd = slots[slot];
        let mut fl = libc::flock {
            l_type: v[3] as i16,
            l_whence: v[4] as i16,
            l_start: v[5],
            l_len: v[6],
            l_pid: v[7] as i32,
        };
        // SAFETY: plain system calls on our descriptors, the NUL-terminated path and the
        // local `fl`.
        let r: i64 = unsafe {
            match v[0] {
                0 => {
                    let fd = libc::open(path.as_ptr(), v[2] as i32, 0o644);
                    slots[slot] = fd;
                    fd as i64
                }
                1 => {
                    slots[slot] = -1;
                    libc::close(fd) as i64
                }
                2 => libc::fcntl(fd, v[2] as i32, &mut fl as *mut libc::flock) as i64,
                3 => libc::flock(fd, v[2] as i32) as i64,
                4 => libc::lseek(fd, v[2], SEEK_SET),
                5 => libc::ftruncate(fd, v[2]) as i64,
                6 => {
                    let new = libc::dup(slots[(v[2] as usize) % slots.len()]);
                    slots[slot] = new;
                    new as i64
                }
                _ => -1,
            }
        };
        let errno = if r < 0 {
            std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
        } else {
            0
        };
        let out = encode([
            r,
            errno as i64,
            fl.l_type as i64,
            fl.l_whence as i64,
            fl.l_start,
            fl.l_len,
            fl.l_pid as i64,
            0,
        ]);
        if !write_full(resp, &out) {
            // SAFETY: as above.
            unsafe { libc::_exit(1) };
        }
    }
}

fn pipe() -> (i32, i32) {
    let mut p = [0i32; 2];
    // SAFETY: `p` has room for the two descriptors.
    assert_eq!(unsafe { libc::pipe2(p.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
    (p[0], p[1])
}

impl Host {
    fn new(n: usize) -> Host {
        static SEQ: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let k = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let path = format!("/dev/shm/scalevfs-locks-{}-{k}", std::process::id());
        std::fs::write(&path, b"").unwrap();
        let ino = std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(&path).unwrap());
        let cpath = CString::new(path.clone()).unwrap();
        let mut owners = Vec::new();
        for _ in 0..n {
            let (cmd_r, cmd_w) = pipe();
            let (resp_r, resp_w) = pipe();
            // SAFETY: the child only makes system calls (see `child_main`) and `_exit`s.
            let pid = unsafe { libc::fork() };
            assert!(pid >= 0, "fork failed");
            if pid == 0 {
                // SAFETY: installing a no-op handler; no SA_RESTART, so a blocked
                // F_SETLKW/flock returns EINTR on SIGUSR1.
                unsafe {
                    let mut sa: libc::sigaction = std::mem::zeroed();
                    sa.sa_sigaction = noop_handler as extern "C" fn(libc::c_int) as usize;
                    sa.sa_flags = 0;
                    libc::sigemptyset(&mut sa.sa_mask);
                    libc::sigaction(libc::SIGUSR1, &sa, std::ptr::null_mut());
                    // Die with the test process.
                    libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                }
                child_main(&cpath, cmd_r, resp_w);
            }
            // SAFETY: closing the child's ends in the parent.
            unsafe {
                libc::close(cmd_r);
                libc::close(resp_w);
            }
            owners.push(HostOwner {
                pid,
                cmd: cmd_w,
                resp: resp_r,
            });
        }
        Host { owners, path, ino }
    }
}

impl Side for Host {
    fn send(&mut self, owner: usize, op: Op) {
        assert!(write_full(self.owners[owner].cmd, &encode(encode_op(op))));
    }
    fn recv(&mut self, owner: usize, timeout: Duration) -> Option<Reply> {
        let fd = self.owners[owner].resp;
        let mut pfd = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd.
        let r = unsafe { libc::poll(&mut pfd, 1, timeout.as_millis() as i32) };
        if r <= 0 {
            return None;
        }
        let mut buf = [0u8; 64];
        if !read_full(fd, &mut buf) {
            return None;
        }
        let v = decode(&buf);
        Some(Reply {
            ret: v[0],
            errno: v[1] as i32,
            fl: Fl(v[2] as i32, v[3] as i32, v[4], v[5], v[6] as i32),
        })
    }
    fn interrupt(&mut self, owner: usize) {
        // SAFETY: signalling our own child.
        unsafe { libc::kill(self.owners[owner].pid, libc::SIGUSR1) };
    }
    fn pid(&self, owner: usize) -> i32 {
        self.owners[owner].pid
    }
    fn listing(&self) -> String {
        std::fs::read_to_string("/proc/locks").unwrap_or_default()
    }
    fn ino(&self) -> u64 {
        self.ino
    }
}

impl Drop for Host {
    fn drop(&mut self) {
        for o in &self.owners {
            // SAFETY: our own child and pipe ends.
            unsafe {
                libc::kill(o.pid, libc::SIGKILL);
                libc::waitpid(o.pid, std::ptr::null_mut(), 0);
                libc::close(o.cmd);
                libc::close(o.resp);
            }
        }
        let _ = std::fs::remove_file(&self.path);
    }
}

// --- the scalevfs side: Process::fork() owners on threads ---

struct SvfsOwner {
    pid: i32,
    tx: Option<Sender<Op>>,
    rx: Receiver<Reply>,
    cancel: Arc<Mutex<Option<CancelToken>>>,
    thread: Option<JoinHandle<()>>,
}

struct Svfs {
    vfs: Arc<Vfs>,
    owners: Vec<SvfsOwner>,
    ino: u64,
}

fn run_op(p: &Process, slots: &mut [i32; 8], op: Op, cancel: &Mutex<Option<CancelToken>>) -> Reply {
    let mut fl = Flock::default();
    let blocking = |cmd: i32| cmd == F_SETLKW || cmd == F_OFD_SETLKW;
    let token = || {
        let t = CancelToken::new();
        *cancel.lock().unwrap() = Some(t.clone());
        t
    };
    let r: Result<i64, scalevfs::Errno> = match op {
        // A slot holds what the call returned, as on the host: -1 after a failure.
        Op::Open(s, flags) => {
            let r = p.open("/f", flags, 0o644);
            slots[s] = *r.as_ref().unwrap_or(&-1);
            r.map(i64::from)
        }
        Op::Close(s) => p.close(std::mem::replace(&mut slots[s], -1)).map(|_| 0),
        Op::Fcntl(s, cmd, Fl(t, w, st, l, pid)) => {
            fl = Flock {
                l_type: t as i16,
                l_whence: w as i16,
                l_start: st,
                l_len: l,
                l_pid: pid,
            };
            let r = if blocking(cmd) {
                p.with_cancel(&token())
                    .fcntl(slots[s], cmd, FcntlArg::Flock(&mut fl))
            } else {
                p.fcntl(slots[s], cmd, FcntlArg::Flock(&mut fl))
            };
            r.map(i64::from)
        }
        Op::Flock(s, o) => if o & LOCK_NB == 0 {
            p.with_cancel(&token()).flock(slots[s], o)
        } else {
            p.flock(slots[s], o)
        }
        .map(|_| 0),
        Op::Seek(s, off) => p.lseek(slots[s], off, SEEK_SET),
        Op::Truncate(s, len) => p.ftruncate(slots[s], len).map(|_| 0),
        Op::Dup(to, from) => {
            let r = p.dup(slots[from]);
            slots[to] = *r.as_ref().unwrap_or(&-1);
            r.map(i64::from)
        }
    };
    *cancel.lock().unwrap() = None;
    let (ret, errno) = match r {
        Ok(v) => (v, 0),
        Err(e) => (-1, e.0),
    };
    Reply {
        ret,
        errno,
        fl: Fl(
            fl.l_type as i32,
            fl.l_whence as i32,
            fl.l_start,
            fl.l_len,
            fl.l_pid,
        ),
    }
}

impl Svfs {
    fn new(n: usize, options: VfsOptions) -> Svfs {
        let vfs = Vfs::new(options);
        let parent = Process::new(&vfs, Credentials::root());
        parent.write_file("/f", b"").unwrap();
        let ino = parent.stat("/f").unwrap().ino;
        let mut owners = Vec::new();
        for _ in 0..n {
            let p = parent.fork();
            let pid = p.pid();
            let (tx, orx) = channel::<Op>();
            let (otx, rx) = channel::<Reply>();
            let cancel = Arc::new(Mutex::new(None));
            let c2 = cancel.clone();
            let thread = std::thread::spawn(move || {
                let mut slots = [-1i32; 8];
                while let Ok(op) = orx.recv() {
                    if otx.send(run_op(&p, &mut slots, op, &c2)).is_err() {
                        break;
                    }
                }
            });
            owners.push(SvfsOwner {
                pid,
                tx: Some(tx),
                rx,
                cancel,
                thread: Some(thread),
            });
        }
        Svfs { vfs, owners, ino }
    }
}

impl Side for Svfs {
    fn send(&mut self, owner: usize, op: Op) {
        self.owners[owner].tx.as_ref().unwrap().send(op).unwrap();
    }
    fn recv(&mut self, owner: usize, timeout: Duration) -> Option<Reply> {
        self.owners[owner].rx.recv_timeout(timeout).ok()
    }
    fn interrupt(&mut self, owner: usize) {
        if let Some(t) = self.owners[owner].cancel.lock().unwrap().as_ref() {
            t.cancel();
        }
    }
    fn pid(&self, owner: usize) -> i32 {
        self.owners[owner].pid
    }
    fn listing(&self) -> String {
        self.vfs.proc_locks()
    }
    fn ino(&self) -> u64 {
        self.ino
    }
}

impl Drop for Svfs {
    fn drop(&mut self) {
        // Unblock anything still waiting, then let the threads finish.
        for o in &mut self.owners {
            if let Some(t) = o.cancel.lock().unwrap().as_ref() {
                t.cancel();
            }
            o.tx = None;
        }
        for o in &mut self.owners {
            if let Some(t) = o.thread.take() {
                let _ = t.join();
            }
        }
    }
}

/// Runs `steps` on the host and on both scalevfs designs; the first design whose results
/// differ from the host's, with both transcripts.
fn differences(n: usize, steps: &[Step]) -> Option<String> {
    let host = run_script(&mut Host::new(n), n, steps).join("\n");
    for locking in [scalevfs::Locking::Scalable, scalevfs::Locking::Legacy] {
        let opts = VfsOptions {
            locking,
            ..Default::default()
        };
        let leaked = scalevfs_vfs::core::leaked_cores();
        let ours = run_script(&mut Svfs::new(n, opts), n, steps).join("\n");
        // The owners have exited and the VFS is dropped: a lock that kept its file alive
        // would make the teardown leak.
        if scalevfs_vfs::core::leaked_cores() != leaked {
            return Some(format!("scalevfs {locking:?} leaked its VFS\n{ours}"));
        }
        if ours != host {
            return Some(format!(
                "host and scalevfs {locking:?} differ\n--- host:\n{host}\n--- scalevfs:\n{ours}"
            ));
        }
    }
    None
}

/// Runs `steps` on the host and on both scalevfs designs and compares.
fn check(n: usize, steps: &[Step]) {
    if let Some(d) = differences(n, steps) {
        panic!("{d}");
    }
}

fn set(s: usize, ty: i32, start: i64, len: i64) -> Op {
    Op::Fcntl(s, F_SETLK, lk(ty, start, len))
}
fn get(s: usize, ty: i32, start: i64, len: i64) -> Op {
    Op::Fcntl(s, F_GETLK, lk(ty, start, len))
}
fn ofd(s: usize, ty: i32, start: i64, len: i64) -> Op {
    Op::Fcntl(s, F_OFD_SETLK, lk(ty, start, len))
}
fn ofd_get(s: usize, ty: i32, start: i64, len: i64) -> Op {
    Op::Fcntl(s, F_OFD_GETLK, lk(ty, start, len))
}

/// Probes from owner `o` (slot 0) that reveal owner 0's lock layout on 0..300.
fn probes(o: usize) -> Vec<Step> {
    let mut v = Vec::new();
    for start in [0, 9, 10, 39, 40, 45, 59, 60, 99, 100, 150, 250] {
        v.push(Do(o, get(0, F_WRLCK, start, 1)));
        v.push(Do(o, get(0, F_RDLCK, start, 1)));
    }
    v.push(Do(o, get(0, F_WRLCK, 0, 0)));
    v
}
