//! Differential tests: the same sequences of pipe / eventfd / epoll / poll calls on the
//! host kernel (through libc) and on scalevfs's modules; the traces must be equal.
//! Closing a host fd is its last close; on our side dropping the file object is (it runs
//! `release_file_from_epoll`).

use std::sync::Arc;

use scalevfs_primitives::Locking;
use scalevfs_vfs::epoll::{Epoll, EpollContext, EpollEvent, FdKey};
use scalevfs_vfs::epoll::{EPOLL_CTL_ADD as ADD, EPOLL_CTL_DEL as DEL, EPOLL_CTL_MOD as MOD};
use scalevfs_vfs::eventfd::EventFd;
use scalevfs_vfs::pipe::{pipe2, PipeEnd};
use scalevfs_vfs::poll::events::*;
use scalevfs_vfs::poll::{poll, PollFd, PollTarget, Pollable, RegularFile};
use scalevfs_vfs::Errno;

type H = usize;
type R<T> = Result<T, Errno>;

/// The calls a scenario makes, on fds named by handles.
trait Sys {
    fn pipe(&mut self, flags: i32) -> R<(H, H)>;
    fn eventfd(&mut self, init: u32, flags: i32) -> R<H>;
    fn epoll(&mut self) -> H;
    fn regular(&mut self) -> H;
    fn ctl(&mut self, ep: H, op: i32, h: H, events: u32, data: u64) -> R<()>;
    fn wait(&mut self, ep: H, max: usize, timeout: i32) -> R<Vec<(u32, u64)>>;
    fn read(&mut self, h: H, len: usize) -> R<Vec<u8>>;
    fn write(&mut self, h: H, data: &[u8]) -> R<usize>;
    fn close(&mut self, h: H);
    fn poll(&mut self, hs: &[(H, u16)], timeout: i32) -> R<Vec<u16>>;
    fn set_pipe_size(&mut self, h: H, size: u32) -> R<usize>;
}

// ---- host ----

struct Host {
    fds: Vec<i32>,
}

fn errno() -> Errno {
    Errno(std::io::Error::last_os_error().raw_os_error().unwrap())
}

fn chk(r: i64) -> R<i64> {
    if r < 0 {
        Err(errno())
    } else {
        Ok(r)
    }
}

impl Host {
    fn new() -> Host {
        // SAFETY: ignoring SIGPIPE process-wide makes host writes to a reader-less pipe
        // return EPIPE instead of killing the test; nothing relies on SIGPIPE.
        unsafe { libc::signal(libc::SIGPIPE, libc::SIG_IGN) };
        Host { fds: Vec::new() }
    }
    fn add(&mut self, fd: i32) -> H {
        self.fds.push(fd);
        self.fds.len() - 1
    }
}

impl Drop for Host {
    fn drop(&mut self) {
        for &fd in &self.fds {
            if fd >= 0 {
                // SAFETY: closing fds this test opened and still owns.
                unsafe { libc::close(fd) };
            }
        }
    }
}

impl Sys for Host {
    fn pipe(&mut self, flags: i32) -> R<(H, H)> {
        let mut p = [0i32; 2];
        // SAFETY: `p` is a valid two-int array.
        chk(unsafe { libc::pipe2(p.as_mut_ptr(), flags) } as i64)?;
        Ok((self.add(p[0]), self.add(p[1])))
    }
    fn eventfd(&mut self, init: u32, flags: i32) -> R<H> {
        // SAFETY: plain system call.
        let fd = chk(unsafe { libc::eventfd(init, flags) } as i64)?;
        Ok(self.add(fd as i32))
    }
    fn epoll(&mut self) -> H {
        // SAFETY: plain system call.
        let fd = unsafe { libc::epoll_create1(0) };
        assert!(fd >= 0);
        self.add(fd)
    }
    fn regular(&mut self) -> H {
        // A tmpfs file when /dev/shm exists (as the issue asks), unlinked at once.
        static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let dir = if std::path::Path::new("/dev/shm").is_dir() {
            "/dev/shm"
        } else {
            "/tmp"
        };
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let path = format!("{dir}/scalevfs-epoll-{}-{n}", std::process::id());
        let c = std::ffi::CString::new(path).unwrap();
        // SAFETY: `c` is a valid NUL-terminated path.
        let fd = unsafe { libc::open(c.as_ptr(), libc::O_CREAT | libc::O_RDWR, 0o600) };
        assert!(fd >= 0);
        // SAFETY: same path; the open fd keeps the file.
        unsafe { libc::unlink(c.as_ptr()) };
        self.add(fd)
    }
    fn ctl(&mut self, ep: H, op: i32, h: H, events: u32, data: u64) -> R<()> {
        let mut ev = libc::epoll_event { events, u64: data };
        // SAFETY: `ev` is a valid epoll_event.
        chk(unsafe { libc::epoll_ctl(self.fds[ep], op, self.fds[h], &mut ev) } as i64).map(|_| ())
    }
    fn wait(&mut self, ep: H, max: usize, timeout: i32) -> R<Vec<(u32, u64)>> {
        let mut evs = vec![libc::epoll_event { events: 0, u64: 0 }; max.max(1)];
        // SAFETY: `evs` has room for `max` events (or 1 when max is 0, which is EINVAL).
        let n = chk(
            unsafe { libc::epoll_wait(self.fds[ep], evs.as_mut_ptr(), max as i32, timeout) } as i64,
        )?;
        Ok(evs[..n as usize]
            .iter()
            .map(|e| {
                let (a, b) = (e.events, e.u64);
                (a, b)
            })
            .collect())
    }
    fn read(&mut self, h: H, len: usize) -> R<Vec<u8>> {
        let mut b = vec![0u8; len];
        // SAFETY: `b` has `len` writable bytes.
        let n = chk(unsafe { libc::read(self.fds[h], b.as_mut_ptr().cast(), len) } as i64)?;
        b.truncate(n as usize);
        Ok(b)
    }
    fn write(&mut self, h: H, data: &[u8]) -> R<usize> {
        // SAFETY: `data` has `len` readable bytes.
        chk(unsafe { libc::write(self.fds[h], data.as_ptr().cast(), data.len()) } as i64)
            .map(|n| n as usize)
    }
    fn close(&mut self, h: H) {
        // SAFETY: closing an fd this test owns; the slot is then forgotten.
        unsafe { libc::close(self.fds[h]) };
        self.fds[h] = -1;
    }
    fn poll(&mut self, hs: &[(H, u16)], timeout: i32) -> R<Vec<u16>> {
        let mut p: Vec<libc::pollfd> = hs
            .iter()
            .map(|&(h, e)| libc::pollfd {
                fd: self.fds[h],
                events: e as i16,
                revents: 0,
            })
            .collect();
        // SAFETY: `p` is a valid pollfd array of that length.
        chk(unsafe { libc::poll(p.as_mut_ptr(), p.len() as _, timeout) } as i64)?;
        Ok(p.iter().map(|x| x.revents as u16).collect())
    }
    fn set_pipe_size(&mut self, h: H, size: u32) -> R<usize> {
        // SAFETY: plain fcntl on an owned fd.
        chk(unsafe { libc::fcntl(self.fds[h], libc::F_SETPIPE_SZ, size as libc::c_int) } as i64)
            .map(|n| n as usize)
    }
}

// ---- scalevfs ----

enum File {
    Pipe(PipeEnd),
    Efd(EventFd),
    Ep(Epoll),
    Reg,
}

impl File {
    fn pollable(&self) -> Arc<dyn Pollable> {
        match self {
            File::Pipe(p) => p.pollable(),
            File::Efd(e) => e.pollable(),
            File::Ep(e) => e.pollable(),
            File::Reg => Arc::new(RegularFile),
        }
    }
}

struct Ours {
    ctx: Arc<EpollContext>,
    fds: Vec<Option<Arc<File>>>,
}

impl Ours {
    fn new(locking: Locking) -> Ours {
        Ours {
            ctx: EpollContext::with_accounting(locking),
            fds: Vec::new(),
        }
    }
    fn add(&mut self, f: File) -> H {
        self.fds.push(Some(Arc::new(f)));
        self.fds.len() - 1
    }
    fn get(&self, h: H) -> R<Arc<File>> {
        self.fds[h].clone().ok_or(Errno::EBADF)
    }
}

impl Sys for Ours {
    fn pipe(&mut self, flags: i32) -> R<(H, H)> {
        let (r, w) = pipe2(flags)?;
        Ok((self.add(File::Pipe(r)), self.add(File::Pipe(w))))
    }
    fn eventfd(&mut self, init: u32, flags: i32) -> R<H> {
        let e = EventFd::new(init, flags)?;
        Ok(self.add(File::Efd(e)))
    }
    fn epoll(&mut self) -> H {
        let e = Epoll::new(&self.ctx);
        self.add(File::Ep(e))
    }
    fn regular(&mut self) -> H {
        self.add(File::Reg)
    }
    fn ctl(&mut self, ep: H, op: i32, h: H, events: u32, data: u64) -> R<()> {
        let (epf, tf) = (self.get(ep)?, self.get(h)?);
        let target = tf.pollable();
        let File::Ep(e) = &*epf else {
            return Err(if target.supports_epoll() {
                Errno::EINVAL
            } else {
                Errno::EPERM
            });
        };
        let key = FdKey {
            file: Arc::as_ptr(&tf) as usize,
            fd: h as i32,
        };
        e.ctl(&self.ctx, op, key, &target, EpollEvent::new(events, data))
    }
    fn wait(&mut self, ep: H, max: usize, timeout: i32) -> R<Vec<(u32, u64)>> {
        let f = self.get(ep)?;
        let File::Ep(e) = &*f else {
            return Err(Errno::EINVAL);
        };
        let mut evs = vec![EpollEvent::default(); max];
        let n = e.wait(&mut evs, timeout, None)?;
        Ok(evs[..n].iter().map(|e| (e.events, e.data)).collect())
    }
    fn read(&mut self, h: H, len: usize) -> R<Vec<u8>> {
        let f = self.get(h)?;
        let mut b = vec![0u8; len];
        let n = match &*f {
            File::Pipe(p) => p.read(&mut b, None)?,
            File::Efd(e) => e.read(&mut b, None)?,
            _ => return Err(Errno::EINVAL),
        };
        b.truncate(n);
        Ok(b)
    }
    fn write(&mut self, h: H, data: &[u8]) -> R<usize> {
        let f = self.get(h)?;
        match &*f {
            File::Pipe(p) => p.write(data, None),
            File::Efd(e) => e.write(data, None),
            _ => Err(Errno::EINVAL),
        }
    }
    fn close(&mut self, h: H) {
        self.fds[h] = None;
    }
    fn poll(&mut self, hs: &[(H, u16)], timeout: i32) -> R<Vec<u16>> {
        let mut p: Vec<PollFd> = hs
            .iter()
            .map(|&(h, e)| {
                let t = match &self.fds[h] {
                    Some(f) => PollTarget::File(f.pollable()),
                    // The host side passes -1 for a closed handle.
                    None => PollTarget::Ignore,
                };
                PollFd::new(t, e)
            })
            .collect();
        poll(&mut p, timeout, None)?;
        Ok(p.iter().map(|x| x.revents).collect())
    }
    fn set_pipe_size(&mut self, h: H, size: u32) -> R<usize> {
        let f = self.get(h)?;
        match &*f {
            File::Pipe(p) => p.set_pipe_size(size, true),
            _ => Err(Errno::EBADF),
        }
    }
}

// ---- scenarios ----

struct Trace(Vec<String>);

impl Trace {
    fn log<T: std::fmt::Debug>(&mut self, what: &str, v: T) {
        self.0.push(format!("{what}: {v:?}"));
    }
}

const IN: u32 = EPOLLIN;
const OUT: u32 = EPOLLOUT;

fn one(v: u64) -> [u8; 8] {
    v.to_ne_bytes()
}

fn level_vs_edge(s: &mut dyn Sys, t: &mut Trace) {
    let (lt, et) = (s.epoll(), s.epoll());
    let (r, w) = s.pipe(libc::O_NONBLOCK).unwrap();
    t.log("add lt", s.ctl(lt, ADD, r, IN, 1));
    t.log("add et", s.ctl(et, ADD, r, IN | EPOLLET, 2));
    t.log("empty lt", s.wait(lt, 8, 0));
    t.log("write", s.write(w, b"abc"));
    for i in 0..2 {
        t.log(&format!("lt {i}"), s.wait(lt, 8, 0));
        t.log(&format!("et {i}"), s.wait(et, 8, 0));
    }
    t.log("read 1", s.read(r, 1));
    t.log("lt after partial read", s.wait(lt, 8, 0));
    t.log("et after partial read", s.wait(et, 8, 0));
    t.log("write again", s.write(w, b"d"));
    t.log("et after new data", s.wait(et, 8, 0));
    t.log("read rest", s.read(r, 100));
    t.log("lt drained", s.wait(lt, 8, 0));
    t.log("read empty", s.read(r, 100));
    // Edge-triggered write end: EPOLLOUT edges come when the pipe stops being full.
    t.log("add et w", s.ctl(et, ADD, w, OUT | EPOLLET, 3));
    t.log("et w initial", s.wait(et, 8, 0));
    t.log("fill", s.write(w, &vec![0u8; 70000]));
    t.log("et w full", s.wait(et, 8, 0));
    t.log("read small", s.read(r, 10).map(|v| v.len()));
    t.log("et after read from full", s.wait(et, 8, 0));
    t.log("read small again", s.read(r, 10).map(|v| v.len()));
    t.log("et after read not from full", s.wait(et, 8, 0));
}

fn oneshot_and_mod(s: &mut dyn Sys, t: &mut Trace) {
    let ep = s.epoll();
    let e = s.eventfd(0, libc::EFD_NONBLOCK).unwrap();
    t.log("add oneshot", s.ctl(ep, ADD, e, IN | EPOLLONESHOT, 7));
    t.log("none", s.wait(ep, 4, 0));
    t.log("signal", s.write(e, &one(1)));
    t.log("fires", s.wait(ep, 4, 0));
    t.log("disarmed", s.wait(ep, 4, 0));
    t.log("signal again", s.write(e, &one(1)));
    t.log("still disarmed", s.wait(ep, 4, 0));
    t.log("rearm", s.ctl(ep, MOD, e, IN | EPOLLONESHOT, 8));
    t.log("fires after rearm", s.wait(ep, 4, 0));
    t.log("mod to OUT", s.ctl(ep, MOD, e, OUT, 9));
    t.log("out", s.wait(ep, 4, 0));
    t.log("mod to IN|ET", s.ctl(ep, MOD, e, IN | EPOLLET, 10));
    t.log("et once", s.wait(ep, 4, 0));
    t.log("et none", s.wait(ep, 4, 0));
    t.log("write 0 wakes", s.write(e, &one(0)));
    t.log("et after write 0", s.wait(ep, 4, 0));
    t.log("read", s.read(e, 8));
    t.log(
        "mod IN|RDHUP|PRI",
        s.ctl(ep, MOD, e, IN | EPOLLRDHUP | EPOLLPRI, 11),
    );
    t.log("nothing", s.wait(ep, 4, 0));
    t.log("del", s.ctl(ep, DEL, e, 0, 0));
    t.log("del again", s.ctl(ep, DEL, e, 0, 0));
    t.log("mod missing", s.ctl(ep, MOD, e, IN, 0));
    t.log("add", s.ctl(ep, ADD, e, IN, 12));
    t.log("add twice", s.ctl(ep, ADD, e, IN, 12));
    t.log("bad op", s.ctl(ep, 9, e, IN, 12));
    t.log("write", s.write(e, &one(5)));
    t.log("after re-add", s.wait(ep, 4, 0));
}

fn close_without_del(s: &mut dyn Sys, t: &mut Trace) {
    let ep = s.epoll();
    let (r, w) = s.pipe(libc::O_NONBLOCK).unwrap();
    let (r2, w2) = s.pipe(libc::O_NONBLOCK).unwrap();
    let e = s.eventfd(3, 0).unwrap();
    t.log("add r", s.ctl(ep, ADD, r, IN | EPOLLRDHUP, 1));
    t.log("add e", s.ctl(ep, ADD, e, IN, 2));
    t.log("add w2", s.ctl(ep, ADD, w2, OUT, 3));
    t.log("add w (ET)", s.ctl(ep, ADD, w, OUT | EPOLLET, 4));
    t.log("initial", s.wait(ep, 8, 0));
    s.close(e);
    t.log("after closing e", s.wait(ep, 8, 0));
    s.close(w);
    t.log("after closing w: HUP, no RDHUP", s.wait(ep, 8, 0));
    t.log("read eof", s.read(r, 10));
    s.close(r2);
    t.log("after closing r2: ERR", s.wait(ep, 8, 0));
    t.log("write epipe", s.write(w2, b"x"));
    t.log("poll", s.poll(&[(r, IN as u16), (w2, OUT as u16)], 0));
    s.close(r);
    s.close(w2);
    t.log("all closed", s.wait(ep, 8, 0));
}

fn ordering_and_maxevents(s: &mut dyn Sys, t: &mut Trace) {
    let ep = s.epoll();
    let es: Vec<H> = (0..4)
        .map(|_| s.eventfd(0, libc::EFD_NONBLOCK).unwrap())
        .collect();
    for (i, &e) in es.iter().enumerate() {
        let et = if i % 2 == 1 { EPOLLET } else { 0 };
        t.log("add", s.ctl(ep, ADD, e, IN | et, i as u64));
    }
    for &i in &[2usize, 0, 3, 1] {
        t.log("write", s.write(es[i], &one(1)));
    }
    t.log("maxevents 0", s.wait(ep, 0, 0));
    for k in 0..4 {
        t.log(&format!("wait 3 #{k}"), s.wait(ep, 3, 0));
    }
    t.log("write 3", s.write(es[3], &one(1)));
    t.log("wait 1", s.wait(ep, 1, 0));
    t.log("wait 8", s.wait(ep, 8, 0));
}

fn nested(s: &mut dyn Sys, t: &mut Trace) {
    let (outer, inner) = (s.epoll(), s.epoll());
    let e = s.eventfd(0, libc::EFD_NONBLOCK).unwrap();
    t.log("self add", s.ctl(outer, ADD, outer, IN, 0));
    t.log("inner watches e", s.ctl(inner, ADD, e, IN, 1));
    t.log("outer watches inner", s.ctl(outer, ADD, inner, IN, 2));
    t.log("loop", s.ctl(inner, ADD, outer, IN, 3));
    t.log(
        "exclusive on epoll",
        s.ctl(outer, MOD, inner, IN | EPOLLEXCLUSIVE, 3),
    );
    t.log("outer quiet", s.wait(outer, 4, 0));
    t.log("signal", s.write(e, &one(1)));
    t.log("outer sees inner", s.wait(outer, 4, 0));
    t.log("poll inner", s.poll(&[(inner, IN as u16)], 0));
    t.log("inner sees e", s.wait(inner, 4, 0));
    t.log("drain", s.read(e, 8));
    t.log("outer quiet again", s.wait(outer, 4, 0));
    t.log("signal 2", s.write(e, &one(1)));
    s.close(inner);
    t.log("outer after inner closed", s.wait(outer, 4, 0));
    // Depth: chains of epolls, built downwards and upwards.
    let p = s.eventfd(0, 0).unwrap();
    let mut prev = p;
    for i in 0..7 {
        let ep = s.epoll();
        let r = s.ctl(ep, ADD, prev, IN, 0);
        t.log(&format!("down chain {i}"), r);
        if r.is_err() {
            break;
        }
        prev = ep;
    }
    let eps: Vec<H> = (0..8).map(|_| s.epoll()).collect();
    for i in 0..7 {
        let r = s.ctl(eps[i], ADD, eps[i + 1], IN, 0);
        t.log(&format!("up chain {i}"), r);
        if r.is_err() {
            break;
        }
    }
    // A diamond is not a loop.
    let (a, b, c, d) = (s.epoll(), s.epoll(), s.epoll(), s.epoll());
    t.log("a>b", s.ctl(a, ADD, b, IN, 0));
    t.log("a>c", s.ctl(a, ADD, c, IN, 0));
    t.log("b>d", s.ctl(b, ADD, d, IN, 0));
    t.log("c>d", s.ctl(c, ADD, d, IN, 0));
    t.log("d>a", s.ctl(d, ADD, a, IN, 0));
    s.close(b);
    t.log("d>a after closing b", s.ctl(d, ADD, a, IN, 0));
    s.close(c);
    t.log("d>a after closing c", s.ctl(d, ADD, a, IN, 0));
}

fn errnos(s: &mut dyn Sys, t: &mut Trace) {
    let ep = s.epoll();
    let f = s.regular();
    let (r, w) = s.pipe(libc::O_NONBLOCK).unwrap();
    t.log("regular file", s.ctl(ep, ADD, f, IN, 0));
    t.log("regular del", s.ctl(ep, DEL, f, IN, 0));
    t.log("not an epoll", s.ctl(r, ADD, w, IN, 0));
    t.log(
        "poll regular",
        s.poll(&[(f, (IN | OUT | EPOLLPRI) as u16)], 0),
    );
    t.log(
        "excl+oneshot",
        s.ctl(ep, ADD, r, IN | EPOLLEXCLUSIVE | EPOLLONESHOT, 0),
    );
    t.log(
        "excl+rdhup",
        s.ctl(ep, ADD, r, IN | EPOLLEXCLUSIVE | EPOLLRDHUP, 0),
    );
    t.log(
        "excl ok",
        s.ctl(ep, ADD, r, IN | EPOLLEXCLUSIVE | EPOLLET, 0),
    );
    t.log("mod excl item", s.ctl(ep, MOD, r, IN, 0));
    t.log("mod with excl", s.ctl(ep, MOD, w, IN | EPOLLEXCLUSIVE, 0));
    t.log("del excl item", s.ctl(ep, DEL, r, 0, 0));
    t.log("read eagain", s.read(r, 1));
    t.log("read 0", s.read(r, 0));
    t.log("write 0", s.write(w, b""));
    t.log("pipe2 bad flags", s.pipe(0x10).map(|_| ()));
    let e = s.eventfd(0, libc::EFD_NONBLOCK).unwrap();
    t.log("efd short read", s.read(e, 7));
    t.log("efd short write", s.write(e, &[1, 0, 0]));
    t.log("efd long write", s.write(e, &[1; 12]));
    t.log("efd long read", s.read(e, 16));
    t.log("efd max", s.write(e, &one(u64::MAX)));
    t.log("efd near max", s.write(e, &one(u64::MAX - 1)));
    t.log("efd overflow", s.write(e, &one(1)));
    t.log("efd poll full", s.poll(&[(e, (IN | OUT) as u16)], 0));
    t.log("efd read", s.read(e, 8));
    t.log("efd empty", s.read(e, 8));
    t.log("efd bad flags", s.eventfd(0, 0x40).map(|_| ()));
    let se = s
        .eventfd(3, libc::EFD_SEMAPHORE | libc::EFD_NONBLOCK)
        .unwrap();
    for i in 0..4 {
        t.log(&format!("sem read {i}"), s.read(se, 8));
    }
    s.close(r);
    t.log("epipe", s.write(w, b"x"));
}

fn pipe_capacity(s: &mut dyn Sys, t: &mut Trace) {
    let (r, w) = s.pipe(libc::O_NONBLOCK).unwrap();
    let mut n = 0;
    for _ in 0..5000 {
        if s.write(w, b"x").is_ok() {
            n += 1;
        }
    }
    t.log("byte writes", n);
    t.log("big", s.write(w, &vec![1u8; 100_000]));
    t.log("one more", s.write(w, b"y"));
    t.log("read 10", s.read(r, 10).map(|v| v.len()));
    t.log("full still", s.write(w, b"y"));
    t.log("read 5000", s.read(r, 5000).map(|v| v.len()));
    t.log("write 5000", s.write(w, &[2u8; 5000]));
    t.log("write 100", s.write(w, &[2u8; 100]));
    t.log("poll", s.poll(&[(r, IN as u16), (w, OUT as u16)], 0));
    t.log("shrink busy", s.set_pipe_size(w, 4096));
    t.log("drain", s.read(r, 1 << 20).map(|v| v.len()));
    t.log("drain 2", s.read(r, 1 << 20).map(|v| v.len()));
    t.log("shrink", s.set_pipe_size(w, 100));
    t.log("grow odd", s.set_pipe_size(r, 5 * 4096));
    t.log("huge", s.set_pipe_size(r, u32::MAX));
    t.log("write 40000", s.write(w, &[3u8; 40000]));
    t.log("write 4096", s.write(w, &[3u8; 4096]));
    t.log("write 1", s.write(w, &[3u8; 1]));
}

fn polls(s: &mut dyn Sys, t: &mut Trace) {
    let (r, w) = s.pipe(0).unwrap();
    let e = s.eventfd(0, 0).unwrap();
    let q = (IN | OUT | EPOLLRDHUP) as u16;
    t.log("initial", s.poll(&[(r, q), (w, q), (e, q)], 0));
    t.log("write", s.write(w, b"x"));
    t.log("after write", s.poll(&[(r, q), (w, 0), (e, IN as u16)], 0));
    t.log("eventfd 1", s.write(e, &one(1)));
    t.log("after eventfd", s.poll(&[(e, IN as u16)], 10));
    s.close(w);
    t.log("writer closed", s.poll(&[(r, IN as u16)], 0));
    t.log("read", s.read(r, 8));
    t.log("eof", s.poll(&[(r, 0)], -1));
    s.close(r);
    t.log("closed fd", s.poll(&[(r, IN as u16), (e, IN as u16)], 0));
}

fn run(name: &str, f: fn(&mut dyn Sys, &mut Trace)) {
    run_closure(name, &f)
}

fn run_closure(name: &str, f: &dyn Fn(&mut dyn Sys, &mut Trace)) {
    let mut host = Trace(Vec::new());
    f(&mut Host::new(), &mut host);
    if std::env::var_os("SHOW_TRACE").is_some() {
        eprintln!("{name}:\n  {}", host.0.join("\n  "));
    }
    for locking in [Locking::Scalable, Locking::Legacy] {
        let mut ours = Trace(Vec::new());
        let mut sys = Ours::new(locking);
        f(&mut sys, &mut ours);
        for (i, (h, o)) in host.0.iter().zip(&ours.0).enumerate() {
            assert_eq!(h, o, "{name} ({locking:?}) step {i}: host vs ours");
        }
        assert_eq!(host.0.len(), ours.0.len(), "{name}");
        let ctx = sys.ctx.clone();
        drop(sys);
        assert_eq!(ctx.accounting().unwrap().live(), (0, 0), "{name}: leak");
    }
}

#[test]
fn diff_level_vs_edge() {
    run("level_vs_edge", level_vs_edge);
}
#[test]
fn diff_oneshot_and_mod() {
    run("oneshot_and_mod", oneshot_and_mod);
}
#[test]
fn diff_close_without_del() {
    run("close_without_del", close_without_del);
}
#[test]
fn diff_ordering_and_maxevents() {
    run("ordering_and_maxevents", ordering_and_maxevents);
}
#[test]
fn diff_nested() {
    run("nested", nested);
}
#[test]
fn diff_errnos() {
    run("errnos", errnos);
}
#[test]
fn diff_pipe_capacity() {
    run("pipe_capacity", pipe_capacity);
}
#[test]
fn diff_polls() {
    run("polls", polls);
}

/// Two instances watch one eventfd, each with a thread blocked in `epoll_wait`; one
/// write. With `EPOLLEXCLUSIVE` only the first instance's item is queued (its callback
/// woke a waiter, which ends the exclusive wakeup); without it both are.
fn exclusive_host(flags: u32) -> Vec<usize> {
    let mut h = Host::new();
    let e = h.eventfd(0, libc::EFD_NONBLOCK).unwrap();
    let eps = [h.epoll(), h.epoll()];
    for &ep in &eps {
        h.ctl(ep, ADD, e, IN | flags, ep as u64).unwrap();
    }
    let fds: Vec<i32> = eps.iter().map(|&ep| h.fds[ep]).collect();
    let threads: Vec<_> = fds
        .into_iter()
        .map(|fd| {
            std::thread::spawn(move || {
                let mut ev = [libc::epoll_event { events: 0, u64: 0 }; 4];
                // SAFETY: `ev` has room for 4 events; the fd outlives the thread.
                unsafe { libc::epoll_wait(fd, ev.as_mut_ptr(), 4, 400) as usize }
            })
        })
        .collect();
    std::thread::sleep(std::time::Duration::from_millis(100));
    h.write(e, &one(1)).unwrap();
    threads.into_iter().map(|t| t.join().unwrap()).collect()
}

fn exclusive_ours(flags: u32) -> Vec<usize> {
    let ctx = EpollContext::with_accounting(Locking::Scalable);
    let e = EventFd::new(0, libc::EFD_NONBLOCK).unwrap();
    let eps: Vec<Arc<Epoll>> = (0..2).map(|_| Arc::new(Epoll::new(&ctx))).collect();
    for (i, ep) in eps.iter().enumerate() {
        let key = FdKey { file: 1, fd: 3 };
        ep.ctl(
            &ctx,
            ADD,
            key,
            &e.pollable(),
            EpollEvent::new(IN | flags, i as u64),
        )
        .unwrap();
    }
    let threads: Vec<_> = eps
        .iter()
        .map(|ep| {
            let ep = ep.clone();
            std::thread::spawn(move || {
                let mut ev = [EpollEvent::default(); 4];
                ep.wait(&mut ev, 400, None).unwrap()
            })
        })
        .collect();
    std::thread::sleep(std::time::Duration::from_millis(100));
    e.write(&one(1), None).unwrap();
    let r = threads.into_iter().map(|t| t.join().unwrap()).collect();
    drop((eps, e));
    assert_eq!(ctx.accounting().unwrap().live(), (0, 0));
    r
}

#[test]
fn diff_exclusive_wakes_one_instance() {
    for flags in [EPOLLEXCLUSIVE, 0] {
        let host = exclusive_host(flags);
        assert_eq!(host, exclusive_ours(flags), "flags {flags:#x}");
        assert_eq!(host.iter().sum::<usize>(), if flags == 0 { 2 } else { 1 });
    }
}

/// Blocking calls: a blocked reader is woken by a write, a blocked epoll_wait by an
/// event, and timeouts expire, on both sides.
#[test]
fn diff_blocking_wakeups() {
    // Host.
    let mut h = Host::new();
    let (r, w) = h.pipe(0).unwrap();
    let ep = h.epoll();
    h.ctl(ep, ADD, r, IN, 5).unwrap();
    let (epfd, wfd) = (h.fds[ep], h.fds[w]);
    let t = std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_millis(50));
        // SAFETY: writing one byte from a static buffer to an fd the test keeps open.
        unsafe { libc::write(wfd, b"z".as_ptr().cast(), 1) };
    });
    let mut ev = [libc::epoll_event { events: 0, u64: 0 }; 2];
    // SAFETY: `ev` has room for 2 events.
    let n = unsafe { libc::epoll_wait(epfd, ev.as_mut_ptr(), 2, -1) };
    t.join().unwrap();
    let host = (n, ev[0].events, h.wait(ep, 2, 10), h.read(r, 5));

    // Ours.
    let ctx = EpollContext::new(Locking::Scalable);
    let (rp, wp) = pipe2(0).unwrap();
    let e = Epoll::new(&ctx);
    e.ctl(
        &ctx,
        ADD,
        FdKey { file: 1, fd: 0 },
        &rp.pollable(),
        EpollEvent::new(IN, 5),
    )
    .unwrap();
    let t = std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_millis(50));
        wp.write(b"z", None).unwrap();
        wp
    });
    let mut evs = [EpollEvent::default(); 2];
    let n = e.wait(&mut evs, -1, None).unwrap();
    let _wp = t.join().unwrap();
    let mut evs2 = [EpollEvent::default(); 2];
    let again = e.wait(&mut evs2, 10, None).map(|n| {
        evs2[..n]
            .iter()
            .map(|x| (x.events, x.data))
            .collect::<Vec<_>>()
    });
    let mut b = [0u8; 5];
    let rd = rp.read(&mut b, None).map(|n| b[..n].to_vec());
    let ours = (n as i32, evs[0].events, again, rd);
    assert_eq!(host, ours);
}

/// Random scripts of non-blocking calls over a handful of pipes, eventfds, epolls and a
/// regular file (nesting, closes without DEL, oneshot, ET, MOD, bad handles included),
/// run on both sides; every result must match.
fn random_script(s: &mut dyn Sys, t: &mut Trace, seed: u64) {
    use rand::{Rng, SeedableRng};
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut hs: Vec<H> = Vec::new();
    // Regular files only take part in ctl and poll (our side has no file contents).
    let mut regular: Vec<H> = Vec::new();
    let mut eps: Vec<H> = Vec::new();
    let flag_set = [
        IN,
        OUT,
        IN | OUT,
        IN | EPOLLET,
        OUT | EPOLLET,
        IN | EPOLLONESHOT,
        IN | EPOLLRDHUP,
        IN | EPOLLEXCLUSIVE,
        IN | OUT | EPOLLET | EPOLLONESHOT,
        EPOLLPRI,
    ];
    let steps: usize = std::env::var("EPOLL_STEPS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(80);
    for step in 0..steps {
        let pick = |rng: &mut rand::rngs::StdRng, hs: &Vec<H>| hs[rng.gen_range(0..hs.len())];
        // Mostly live epolls for ctl/wait; closes are rarer than the rest.
        let op = if hs.len() < 3 {
            0
        } else {
            [
                0, 0, 1, 1, 2, 2, 3, 4, 4, 5, 6, 6, 7, 8, 8, 9, 10, 10, 11, 0,
            ][rng.gen_range(0..20)]
        };
        let pick_ep = |rng: &mut rand::rngs::StdRng, hs: &Vec<H>, eps: &Vec<H>| {
            if !eps.is_empty() && rng.gen_bool(0.9) {
                eps[rng.gen_range(0..eps.len())]
            } else {
                hs[rng.gen_range(0..hs.len())]
            }
        };
        let tag = format!("{step} op{op}");
        match op {
            0 => match rng.gen_range(0..4) {
                0 => {
                    let (r, w) = s.pipe(libc::O_NONBLOCK).unwrap();
                    t.log(&format!("{tag} pipe"), (r, w));
                    hs.extend([r, w]);
                }
                1 => {
                    let h = s.eventfd(rng.gen_range(0..2), libc::EFD_NONBLOCK).unwrap();
                    t.log(&format!("{tag} eventfd"), h);
                    hs.push(h);
                }
                2 => {
                    let h = s.epoll();
                    t.log(&format!("{tag} epoll"), h);
                    eps.push(h);
                    hs.push(h);
                }
                _ => {
                    let h = s.regular();
                    t.log(&format!("{tag} regular"), h);
                    regular.push(h);
                    hs.push(h);
                }
            },
            1..=3 => {
                let (ep, h) = (pick_ep(&mut rng, &hs, &eps), pick(&mut rng, &hs));
                let op = [ADD, ADD, MOD, DEL][rng.gen_range(0..4)];
                let ev = flag_set[rng.gen_range(0..flag_set.len())];
                t.log(
                    &format!("{tag} ctl ep{ep} op{op} h{h} {ev:#x}"),
                    s.ctl(ep, op, h, ev, h as u64),
                );
            }
            4 | 5 => {
                let ep = pick_ep(&mut rng, &hs, &eps);
                t.log(
                    &format!("{tag} wait ep{ep}"),
                    s.wait(ep, rng.gen_range(1..4), 0),
                );
            }
            6 | 7 => {
                let h = pick(&mut rng, &hs);
                if regular.contains(&h) {
                    continue;
                }
                let data: Vec<u8> = match rng.gen_range(0..3) {
                    0 => one(rng.gen_range(0..3)).to_vec(),
                    1 => vec![7u8; rng.gen_range(1..5000)],
                    _ => vec![7u8; 70000],
                };
                t.log(
                    &format!("{tag} write h{h} {}", data.len()),
                    s.write(h, &data),
                );
            }
            8 => {
                let h = pick(&mut rng, &hs);
                if regular.contains(&h) {
                    continue;
                }
                let n = [8, 100, 70000][rng.gen_range(0..3)];
                t.log(
                    &format!("{tag} read h{h} {n}"),
                    s.read(h, n).map(|v| v.len()),
                );
            }
            9 => {
                let h = pick(&mut rng, &hs);
                s.close(h);
                eps.retain(|&e| e != h);
                t.log(&tag, ("close", h));
            }
            10 => {
                let q: Vec<(H, u16)> = (0..3)
                    .map(|_| (pick(&mut rng, &hs), flag_set[rng.gen_range(0..4)] as u16))
                    .collect();
                t.log(&format!("{tag} poll {q:?}"), s.poll(&q, 0));
            }
            _ => {
                let h = pick(&mut rng, &hs);
                let n = [4096, 8192, 65536][rng.gen_range(0..3)];
                t.log(&format!("{tag} setsz h{h} {n}"), s.set_pipe_size(h, n));
            }
        }
    }
}

#[test]
fn diff_random_scripts() {
    let seeds: u64 = std::env::var("EPOLL_SEEDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(300);
    let first: u64 = std::env::var("EPOLL_SEED0")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    for seed in first..first + seeds {
        let f = move |s: &mut dyn Sys, t: &mut Trace| random_script(s, t, seed);
        run_closure(&format!("random seed {seed}"), &f);
    }
}
