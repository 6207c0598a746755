//! Pipes, eventfds, epoll and poll through `Process`, differentially against the host
//! kernel: every scenario runs on real host descriptors and on scalevfs (scalable and
//! legacy), and the logs of results (errno values, event masks, user data, bytes) must be
//! identical. Descriptor numbers never enter a log (they differ between the sides); an
//! invalid descriptor is always a number no side has open. Every wait is bounded
//! (timeouts of at most a few tens of milliseconds), so nothing can hang.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use scalevfs::{CancelToken, Credentials, EpollEvent, FcntlArg, Locking, Process, Vfs, VfsOptions};

const ADD: i32 = libc::EPOLL_CTL_ADD;
const DEL: i32 = libc::EPOLL_CTL_DEL;
const MOD: i32 = libc::EPOLL_CTL_MOD;
const IN: u32 = libc::EPOLLIN as u32;
const OUT: u32 = libc::EPOLLOUT as u32;
const ET: u32 = libc::EPOLLET as u32;
const ONESHOT: u32 = libc::EPOLLONESHOT as u32;
const RDHUP: u32 = libc::EPOLLRDHUP as u32;
/// A descriptor number nobody has open.
const BADFD: i32 = 900_000;

type Res<T> = Result<T, i32>;

/// The system calls the scenarios use.
trait Sys {
    fn pipe2(&self, flags: i32) -> Res<[i32; 2]>;
    fn eventfd(&self, init: u32, flags: i32) -> Res<i32>;
    fn epoll_create1(&self, flags: i32) -> Res<i32>;
    fn epoll_ctl(&self, ep: i32, op: i32, fd: i32, ev: Option<(u32, u64)>) -> Res<()>;
    fn epoll_wait(&self, ep: i32, max: usize, timeout: i32) -> Res<Vec<(u32, u64)>>;
    fn read(&self, fd: i32, n: usize) -> Res<Vec<u8>>;
    fn write(&self, fd: i32, b: &[u8]) -> Res<usize>;
    fn close(&self, fd: i32) -> Res<()>;
    fn dup(&self, fd: i32) -> Res<i32>;
    fn poll(&self, fds: &[(i32, i16)], timeout: i32) -> Res<(usize, Vec<i16>)>;
    fn fcntl(&self, fd: i32, cmd: i32, arg: i64) -> Res<i32>;
    fn lseek(&self, fd: i32, off: i64, whence: i32) -> Res<i64>;
    /// `st_mode` and `st_size`.
    fn fstat(&self, fd: i32) -> Res<(u32, i64)>;
    /// A new, unlinked regular file open O_RDWR.
    fn regular(&self) -> Res<i32>;
}

// ------------------------------------------------------------------ host

struct Host;

fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap()
}
fn chk(r: i64) -> Res<i64> {
    if r < 0 {
        Err(errno())
    } else {
        Ok(r)
    }
}

impl Sys for Host {
    fn pipe2(&self, flags: i32) -> Res<[i32; 2]> {
        let mut fds = [0; 2];
        // SAFETY: fds is a valid array of two ints.
        chk(unsafe { libc::pipe2(fds.as_mut_ptr(), flags) } as i64)?;
        Ok(fds)
    }
    fn eventfd(&self, init: u32, flags: i32) -> Res<i32> {
        // SAFETY: plain system call.
        chk(unsafe { libc::eventfd(init, flags) } as i64).map(|v| v as i32)
    }
    fn epoll_create1(&self, flags: i32) -> Res<i32> {
        // SAFETY: plain system call.
        chk(unsafe { libc::epoll_create1(flags) } as i64).map(|v| v as i32)
    }
    fn epoll_ctl(&self, ep: i32, op: i32, fd: i32, ev: Option<(u32, u64)>) -> Res<()> {
        let mut e = ev.map(|(events, u64)| libc::epoll_event { events, u64 });
        let p = e
            .as_mut()
            .map_or(std::ptr::null_mut(), |e| e as *mut libc::epoll_event);
        // SAFETY: p is null or points at a live epoll_event.
        chk(unsafe { libc::epoll_ctl(ep, op, fd, p) } as i64).map(|_| ())
    }
    fn epoll_wait(&self, ep: i32, max: usize, timeout: i32) -> Res<Vec<(u32, u64)>> {
        let mut evs = vec![libc::epoll_event { events: 0, u64: 0 }; max.max(1)];
        // SAFETY: evs holds at least `max` events.
        let n = chk(unsafe { libc::epoll_wait(ep, evs.as_mut_ptr(), max as i32, timeout) } as i64)?;
        Ok(evs[..n as usize]
            .iter()
            .map(|e| {
                let (events, data) = (e.events, e.u64);
                (events, data)
            })
            .collect())
    }
    fn read(&self, fd: i32, n: usize) -> Res<Vec<u8>> {
        let mut b = vec![0u8; n];
        // SAFETY: b has n bytes.
        let r = chk(unsafe { libc::read(fd, b.as_mut_ptr().cast(), n) } as i64)?;
        b.truncate(r as usize);
        Ok(b)
    }
    fn write(&self, fd: i32, b: &[u8]) -> Res<usize> {
        // SAFETY: b is valid for its length.
        chk(unsafe { libc::write(fd, b.as_ptr().cast(), b.len()) } as i64).map(|v| v as usize)
    }
    fn close(&self, fd: i32) -> Res<()> {
        // SAFETY: closing a descriptor this test owns.
        chk(unsafe { libc::close(fd) } as i64).map(|_| ())
    }
    fn dup(&self, fd: i32) -> Res<i32> {
        // SAFETY: plain system call.
        chk(unsafe { libc::dup(fd) } as i64).map(|v| v as i32)
    }
    fn poll(&self, fds: &[(i32, i16)], timeout: i32) -> Res<(usize, Vec<i16>)> {
        let mut p: Vec<libc::pollfd> = fds
            .iter()
            .map(|&(fd, events)| libc::pollfd {
                fd,
                events,
                revents: 0,
            })
            .collect();
        // SAFETY: p is a valid array of pollfd.
        let n = chk(unsafe { libc::poll(p.as_mut_ptr(), p.len() as _, timeout) } as i64)?;
        Ok((n as usize, p.iter().map(|x| x.revents).collect()))
    }
    fn fcntl(&self, fd: i32, cmd: i32, arg: i64) -> Res<i32> {
        // SAFETY: integer-argument fcntl commands only.
        chk(unsafe { libc::fcntl(fd, cmd, arg as libc::c_long) } as i64).map(|v| v as i32)
    }
    fn lseek(&self, fd: i32, off: i64, whence: i32) -> Res<i64> {
        // SAFETY: plain system call.
        chk(unsafe { libc::lseek(fd, off, whence) })
    }
    fn fstat(&self, fd: i32) -> Res<(u32, i64)> {
        // SAFETY: st is written by fstat.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: st is a valid stat buffer.
        chk(unsafe { libc::fstat(fd, &mut st) } as i64)?;
        Ok((st.st_mode, st.st_size))
    }
    fn regular(&self) -> Res<i32> {
        static N: AtomicUsize = AtomicUsize::new(0);
        let dir = if std::path::Path::new("/dev/shm").is_dir() {
            "/dev/shm"
        } else {
            "/tmp"
        };
        let p = format!(
            "{dir}/scalevfs-epoll-{}-{}\0",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        );
        // SAFETY: p is NUL-terminated.
        let fd = chk(
            unsafe { libc::open(p.as_ptr().cast(), libc::O_CREAT | libc::O_RDWR, 0o600) } as i64,
        )?;
        // SAFETY: as above.
        unsafe { libc::unlink(p.as_ptr().cast()) };
        Ok(fd as i32)
    }
}

// ------------------------------------------------------------------ scalevfs

struct Ours {
    p: Process,
    n: AtomicUsize,
}

impl Ours {
    fn new(locking: Locking) -> Ours {
        let vfs = Vfs::new(VfsOptions {
            locking,
            ..Default::default()
        });
        Ours {
            p: Process::new(&vfs, Credentials::root()),
            n: AtomicUsize::new(0),
        }
    }
}

fn e<T>(r: scalevfs::SysResult<T>) -> Res<T> {
    r.map_err(|e| e.0)
}

impl Sys for Ours {
    fn pipe2(&self, flags: i32) -> Res<[i32; 2]> {
        let mut fds = [0; 2];
        e(self.p.pipe2(&mut fds, flags))?;
        Ok(fds)
    }
    fn eventfd(&self, init: u32, flags: i32) -> Res<i32> {
        e(self.p.eventfd(init, flags))
    }
    fn epoll_create1(&self, flags: i32) -> Res<i32> {
        e(self.p.epoll_create1(flags))
    }
    fn epoll_ctl(&self, ep: i32, op: i32, fd: i32, ev: Option<(u32, u64)>) -> Res<()> {
        let ev = ev.map(|(events, data)| EpollEvent { events, data });
        e(self.p.epoll_ctl(ep, op, fd, ev.as_ref()))
    }
    fn epoll_wait(&self, ep: i32, max: usize, timeout: i32) -> Res<Vec<(u32, u64)>> {
        let mut evs = vec![EpollEvent::default(); max];
        let n = e(self.p.epoll_wait(ep, &mut evs, timeout))?;
        Ok(evs[..n].iter().map(|e| (e.events, e.data)).collect())
    }
    fn read(&self, fd: i32, n: usize) -> Res<Vec<u8>> {
        let mut b = vec![0u8; n];
        let r = e(self.p.read(fd, &mut b))?;
        b.truncate(r);
        Ok(b)
    }
    fn write(&self, fd: i32, b: &[u8]) -> Res<usize> {
        e(self.p.write(fd, b))
    }
    fn close(&self, fd: i32) -> Res<()> {
        e(self.p.close(fd))
    }
    fn dup(&self, fd: i32) -> Res<i32> {
        e(self.p.dup(fd))
    }
    fn poll(&self, fds: &[(i32, i16)], timeout: i32) -> Res<(usize, Vec<i16>)> {
        let mut p: Vec<libc::pollfd> = fds
            .iter()
            .map(|&(fd, events)| libc::pollfd {
                fd,
                events,
                revents: 0,
            })
            .collect();
        let n = e(self.p.poll(&mut p, timeout))?;
        Ok((n, p.iter().map(|x| x.revents).collect()))
    }
    fn fcntl(&self, fd: i32, cmd: i32, arg: i64) -> Res<i32> {
        e(self.p.fcntl(fd, cmd, FcntlArg::Int(arg)))
    }
    fn lseek(&self, fd: i32, off: i64, whence: i32) -> Res<i64> {
        e(self.p.lseek(fd, off, whence))
    }
    fn fstat(&self, fd: i32) -> Res<(u32, i64)> {
        let st = e(self.p.fstat(fd))?;
        Ok((st.mode, st.size))
    }
    fn regular(&self) -> Res<i32> {
        let name = format!("/f{}", self.n.fetch_add(1, Ordering::Relaxed));
        let fd = e(self.p.open(&name, libc::O_CREAT | libc::O_RDWR, 0o600))?;
        e(self.p.unlink(&name))?;
        Ok(fd)
    }
}

// ------------------------------------------------------------------ harness

/// A log of results, compared between the sides.
struct Log(Vec<String>);

impl Log {
    fn rec<T: std::fmt::Debug>(&mut self, what: &str, r: T) {
        self.0.push(format!("{what}: {r:?}"));
    }
}

/// Runs `scenario` on the host and on scalevfs (both designs) and compares the logs.
fn differential(scenario: fn(&dyn Sys, &mut Log)) {
    // SAFETY: ignoring SIGPIPE (Rust's runtime already does) so EPIPE is returned.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_IGN) };
    let mut host = Log(Vec::new());
    scenario(&Host, &mut host);
    assert!(!host.0.is_empty());
    for locking in [Locking::Scalable, Locking::Legacy] {
        let mut ours = Log(Vec::new());
        scenario(&Ours::new(locking), &mut ours);
        for (i, (h, o)) in host.0.iter().zip(&ours.0).enumerate() {
            assert_eq!(
                h, o,
                "step {i} differs ({locking:?}); host log: {:#?}",
                host.0
            );
        }
        assert_eq!(host.0.len(), ours.0.len());
    }
}

const U64_1: [u8; 8] = 1u64.to_ne_bytes();

// ------------------------------------------------------------------ scenarios

#[test]
fn level_vs_edge() {
    differential(|s, l| {
        let ep = s.epoll_create1(0).unwrap();
        let efd = s.eventfd(0, libc::EFD_NONBLOCK).unwrap();
        let [r, w] = s.pipe2(libc::O_NONBLOCK).unwrap();
        l.rec("add lt", s.epoll_ctl(ep, ADD, efd, Some((IN, 1))));
        l.rec("add et", s.epoll_ctl(ep, ADD, r, Some((IN | ET, 2))));
        l.rec("empty", s.epoll_wait(ep, 8, 0));
        l.rec("sig efd", s.write(efd, &U64_1));
        l.rec("sig pipe", s.write(w, b"abc"));
        let first = s.epoll_wait(ep, 8, 0);
        assert_eq!(first.as_ref().map(|v| v.len()), Ok(2));
        l.rec("wait 1", first);
        l.rec("wait 2 (lt only)", s.epoll_wait(ep, 8, 0));
        l.rec("more pipe data", s.write(w, b"d"));
        l.rec("wait 3 (et fires again)", s.epoll_wait(ep, 8, 0));
        l.rec("maxevents 1", s.epoll_wait(ep, 1, 0));
        l.rec("drain efd", s.read(efd, 8));
        l.rec("wait 4", s.epoll_wait(ep, 8, 0));
        l.rec("drain pipe", s.read(r, 16));
        l.rec("wait 5", s.epoll_wait(ep, 8, 0));
        for fd in [ep, efd, r, w] {
            s.close(fd).unwrap();
        }
    });
}

#[test]
fn oneshot_rearm_and_mod_del() {
    differential(|s, l| {
        let ep = s.epoll_create1(0).unwrap();
        let efd = s.eventfd(0, libc::EFD_NONBLOCK).unwrap();
        l.rec("add", s.epoll_ctl(ep, ADD, efd, Some((IN | ONESHOT, 7))));
        l.rec("add again", s.epoll_ctl(ep, ADD, efd, Some((IN, 7))));
        l.rec("sig", s.write(efd, &U64_1));
        l.rec("wait", s.epoll_wait(ep, 4, 0));
        l.rec("disarmed", s.epoll_wait(ep, 4, 0));
        l.rec("sig 2", s.write(efd, &U64_1));
        l.rec("still disarmed", s.epoll_wait(ep, 4, 0));
        l.rec("rearm", s.epoll_ctl(ep, MOD, efd, Some((IN | ONESHOT, 8))));
        l.rec("after rearm", s.epoll_wait(ep, 4, 0));
        l.rec("mod to out", s.epoll_ctl(ep, MOD, efd, Some((OUT, 9))));
        l.rec("out", s.epoll_wait(ep, 4, 0));
        l.rec("del", s.epoll_ctl(ep, DEL, efd, None));
        l.rec("after del", s.epoll_wait(ep, 4, 0));
        l.rec("del again", s.epoll_ctl(ep, DEL, efd, None));
        l.rec("mod missing", s.epoll_ctl(ep, MOD, efd, Some((IN, 1))));
        l.rec(
            "exclusive add",
            s.epoll_ctl(ep, ADD, efd, Some((IN | libc::EPOLLEXCLUSIVE as u32, 1))),
        );
        l.rec(
            "exclusive mod",
            s.epoll_ctl(ep, MOD, efd, Some((IN | libc::EPOLLEXCLUSIVE as u32, 1))),
        );
        l.rec("mod of exclusive", s.epoll_ctl(ep, MOD, efd, Some((IN, 1))));
        s.close(efd).unwrap();
        s.close(ep).unwrap();
    });
}

#[test]
fn close_without_del_and_dup() {
    differential(|s, l| {
        let ep = s.epoll_create1(0).unwrap();
        let ep2 = s.epoll_create1(0).unwrap();
        let efd = s.eventfd(5, 0).unwrap();
        l.rec("add", s.epoll_ctl(ep, ADD, efd, Some((IN, 1))));
        l.rec("add ep2", s.epoll_ctl(ep2, ADD, efd, Some((IN, 2))));
        let d = s.dup(efd).unwrap();
        l.rec("close original", s.close(efd));
        // The description is still open through the dup: Linux keeps the item.
        l.rec("still watched", s.epoll_wait(ep, 4, 0));
        l.rec("ctl on closed fd", s.epoll_ctl(ep, DEL, BADFD, None));
        l.rec("close last", s.close(d));
        // Last close of the description: removed from every epoll.
        l.rec("gone", s.epoll_wait(ep, 4, 0));
        l.rec("gone ep2", s.epoll_wait(ep2, 4, 0));
        let [r, w] = s.pipe2(0).unwrap();
        l.rec("add pipe", s.epoll_ctl(ep, ADD, r, Some((IN, 3))));
        l.rec("write", s.write(w, b"x"));
        l.rec("close read end", s.close(r));
        l.rec("pipe gone", s.epoll_wait(ep, 4, 0));
        l.rec("write no reader", s.write(w, b"x"));
        s.close(w).unwrap();
        s.close(ep).unwrap();
        s.close(ep2).unwrap();
    });
}

#[test]
fn nested_epoll_and_loops() {
    differential(|s, l| {
        let inner = s.epoll_create1(0).unwrap();
        let outer = s.epoll_create1(0).unwrap();
        let efd = s.eventfd(0, libc::EFD_NONBLOCK).unwrap();
        l.rec("inner add", s.epoll_ctl(inner, ADD, efd, Some((IN, 1))));
        l.rec(
            "outer add inner",
            s.epoll_ctl(outer, ADD, inner, Some((IN, 2))),
        );
        l.rec("outer idle", s.epoll_wait(outer, 4, 0));
        l.rec("sig", s.write(efd, &U64_1));
        l.rec("outer ready", s.epoll_wait(outer, 4, 0));
        l.rec("inner", s.epoll_wait(inner, 4, 0));
        l.rec("self", s.epoll_ctl(inner, ADD, inner, Some((IN, 3))));
        l.rec("loop", s.epoll_ctl(inner, ADD, outer, Some((IN, 3))));
        // A chain: each new epoll watches the previous one; Linux refuses past its depth.
        let mut chain = vec![outer];
        for i in 0..6 {
            let e = s.epoll_create1(0).unwrap();
            l.rec(
                &format!("chain {i}"),
                s.epoll_ctl(e, ADD, *chain.last().unwrap(), Some((IN, 10 + i))),
            );
            chain.push(e);
        }
        l.rec("drain", s.read(efd, 8));
        l.rec("outer after drain", s.epoll_wait(outer, 4, 0));
        // Closing the inner epoll removes it from the outer one.
        l.rec("sig again", s.write(efd, &U64_1));
        l.rec("close inner", s.close(inner));
        l.rec("outer after close", s.epoll_wait(outer, 4, 0));
        for fd in chain.into_iter().chain([efd]) {
            s.close(fd).unwrap();
        }
        assert!(l
            .0
            .iter()
            .any(|x| x.starts_with("chain") && x.ends_with("Err(40)")));
    });
}

#[test]
fn hup_and_err_on_pipe_close() {
    differential(|s, l| {
        let ep = s.epoll_create1(0).unwrap();
        let [r, w] = s.pipe2(libc::O_NONBLOCK).unwrap();
        l.rec("add r", s.epoll_ctl(ep, ADD, r, Some((IN | RDHUP, 1))));
        l.rec("add w", s.epoll_ctl(ep, ADD, w, Some((OUT | ET, 2))));
        l.rec("initial", s.epoll_wait(ep, 4, 0));
        l.rec("write", s.write(w, b"hi"));
        l.rec("close w", s.close(w));
        l.rec("hup", s.epoll_wait(ep, 4, 0));
        l.rec("poll r", s.poll(&[(r, libc::POLLIN)], 0));
        l.rec("read data", s.read(r, 8));
        l.rec("eof", s.read(r, 8));
        l.rec("hup still", s.epoll_wait(ep, 4, 0));
        let [r2, w2] = s.pipe2(0).unwrap();
        l.rec("add w2", s.epoll_ctl(ep, ADD, w2, Some((OUT, 3))));
        l.rec("close r2", s.close(r2));
        l.rec("err", s.epoll_wait(ep, 4, 0));
        l.rec("poll w2", s.poll(&[(w2, libc::POLLOUT)], 0));
        l.rec("epipe", s.write(w2, b"x"));
        for fd in [r, w2, ep] {
            s.close(fd).unwrap();
        }
    });
}

#[test]
fn errno_cases() {
    differential(|s, l| {
        let ep = s.epoll_create1(0).unwrap();
        let reg = s.regular().unwrap();
        let efd = s.eventfd(0, libc::EFD_NONBLOCK).unwrap();
        l.rec("regular", s.epoll_ctl(ep, ADD, reg, Some((IN, 1))));
        l.rec("not epoll", s.epoll_ctl(efd, ADD, efd, Some((IN, 1))));
        l.rec(
            "not epoll, regular target",
            s.epoll_ctl(reg, ADD, reg, Some((IN, 1))),
        );
        l.rec("bad epfd", s.epoll_ctl(BADFD, ADD, efd, Some((IN, 1))));
        l.rec("bad fd", s.epoll_ctl(ep, ADD, BADFD, Some((IN, 1))));
        l.rec("bad op", s.epoll_ctl(ep, 99, efd, Some((IN, 1))));
        l.rec("null event", s.epoll_ctl(ep, ADD, efd, None));
        l.rec("wait maxevents 0", s.epoll_wait(ep, 0, 0));
        l.rec("wait bad fd", s.epoll_wait(BADFD, 1, 0));
        l.rec("wait not epoll", s.epoll_wait(efd, 1, 0));
        l.rec("create bad flags", s.epoll_create1(1));
        l.rec("pipe bad flags", s.pipe2(libc::O_APPEND).map(|_| ()));
        l.rec(
            "eventfd bad flags",
            s.eventfd(0, libc::O_APPEND).map(|_| ()),
        );
        l.rec("eventfd empty", s.read(efd, 8));
        l.rec("eventfd short read", s.read(efd, 4));
        l.rec("eventfd short write", s.write(efd, &[1, 2, 3]));
        l.rec("eventfd max", s.write(efd, &u64::MAX.to_ne_bytes()));
        l.rec(
            "eventfd long write",
            s.write(efd, &[2, 0, 0, 0, 0, 0, 0, 0, 9, 9]),
        );
        l.rec("eventfd read", s.read(efd, 16));
        l.rec("eventfd fill", s.write(efd, &(u64::MAX - 1).to_ne_bytes()));
        l.rec("eventfd overflow", s.write(efd, &U64_1));
        l.rec(
            "eventfd poll",
            s.poll(&[(efd, libc::POLLIN | libc::POLLOUT)], 0),
        );
        let sem = s
            .eventfd(2, libc::EFD_SEMAPHORE | libc::EFD_NONBLOCK)
            .unwrap();
        l.rec("sem 1", s.read(sem, 8));
        l.rec("sem 2", s.read(sem, 8));
        l.rec("sem 3", s.read(sem, 8));
        let [r, w] = s.pipe2(libc::O_NONBLOCK).unwrap();
        l.rec("pipe empty", s.read(r, 8));
        l.rec("pipe read on write end", s.read(w, 8));
        l.rec("pipe write on read end", s.write(r, b"x"));
        l.rec("pipe lseek", s.lseek(r, 0, libc::SEEK_CUR));
        l.rec("eventfd lseek", s.lseek(efd, 0, libc::SEEK_CUR));
        l.rec(
            "pipe fstat",
            s.fstat(r).map(|(m, sz)| (m & libc::S_IFMT, m & 0o777, sz)),
        );
        l.rec("eventfd fstat", s.fstat(efd).map(|(m, _)| m));
        l.rec("epoll fstat", s.fstat(ep).map(|(m, _)| m));
        // Fill the pipe, then EAGAIN.
        let chunk = vec![7u8; 4096];
        let mut total = 0;
        let last = loop {
            match s.write(w, &chunk) {
                Ok(n) => total += n,
                Err(e) => break e,
            }
        };
        l.rec("filled", (total, last));
        for fd in [ep, reg, efd, sem, r, w] {
            s.close(fd).unwrap();
        }
    });
}

#[test]
fn poll_mixed_fds() {
    differential(|s, l| {
        let reg = s.regular().unwrap();
        let efd = s.eventfd(3, libc::EFD_NONBLOCK).unwrap();
        let efd0 = s.eventfd(0, libc::EFD_NONBLOCK).unwrap();
        let [r, w] = s.pipe2(libc::O_NONBLOCK).unwrap();
        let ep = s.epoll_create1(0).unwrap();
        l.rec("ep add", s.epoll_ctl(ep, ADD, efd, Some((IN, 1))));
        let all = libc::POLLIN | libc::POLLOUT | libc::POLLPRI;
        let set = [
            (reg, all),
            (efd, libc::POLLIN),
            (efd0, libc::POLLIN),
            (r, libc::POLLIN),
            (w, libc::POLLOUT),
            (BADFD, libc::POLLIN),
            (-1, libc::POLLIN),
            (ep, libc::POLLIN),
        ];
        l.rec("poll", s.poll(&set, 0));
        l.rec(
            "poll empty pipe only",
            s.poll(&[(r, libc::POLLIN), (efd0, libc::POLLIN)], 10),
        );
        l.rec("write", s.write(w, b"z"));
        l.rec("poll pipe ready", s.poll(&[(r, libc::POLLIN)], 10));
        for fd in [reg, efd, efd0, r, w, ep] {
            s.close(fd).unwrap();
        }
    });
}

#[test]
fn fcntl_flags_and_pipe_size() {
    differential(|s, l| {
        let [r, w] = s.pipe2(libc::O_CLOEXEC).unwrap();
        let efd = s
            .eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK)
            .unwrap();
        let ep = s.epoll_create1(libc::EPOLL_CLOEXEC).unwrap();
        let ep0 = s.epoll_create1(0).unwrap();
        for (n, fd) in [("r", r), ("w", w), ("efd", efd), ("ep", ep), ("ep0", ep0)] {
            l.rec(&format!("getfd {n}"), s.fcntl(fd, libc::F_GETFD, 0));
            l.rec(&format!("getfl {n}"), s.fcntl(fd, libc::F_GETFL, 0));
        }
        l.rec(
            "setfl nonblock",
            s.fcntl(r, libc::F_SETFL, libc::O_NONBLOCK as i64),
        );
        l.rec("getfl r", s.fcntl(r, libc::F_GETFL, 0));
        l.rec("read eagain", s.read(r, 4));
        l.rec("efd clear nonblock", s.fcntl(efd, libc::F_SETFL, 0));
        l.rec("getfl efd", s.fcntl(efd, libc::F_GETFL, 0));
        l.rec(
            "efd set nonblock",
            s.fcntl(efd, libc::F_SETFL, libc::O_NONBLOCK as i64),
        );
        l.rec("efd read eagain", s.read(efd, 8));
        l.rec("getpipe", s.fcntl(r, libc::F_GETPIPE_SZ, 0));
        l.rec("set 0", s.fcntl(w, libc::F_SETPIPE_SZ, 0));
        l.rec("set 10000", s.fcntl(w, libc::F_SETPIPE_SZ, 10000));
        l.rec("get via r", s.fcntl(r, libc::F_GETPIPE_SZ, 0));
        l.rec("fill", s.write(w, &[1u8; 12288]));
        l.rec("shrink busy", s.fcntl(w, libc::F_SETPIPE_SZ, 4096));
        l.rec("on eventfd", s.fcntl(efd, libc::F_GETPIPE_SZ, 0));
        l.rec("set on eventfd", s.fcntl(efd, libc::F_SETPIPE_SZ, 4096));
        for fd in [r, w, efd, ep, ep0] {
            s.close(fd).unwrap();
        }
    });
}

// ------------------------------------------------------------------ scalevfs only

fn ours() -> Ours {
    Ours::new(Locking::Scalable)
}

/// A cancel fired from another thread after `ms`.
fn cancel_after(ms: u64) -> (Arc<CancelToken>, std::thread::JoinHandle<()>) {
    let t = Arc::new(CancelToken::new());
    let t2 = t.clone();
    let h = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(ms));
        t2.cancel();
    });
    (t, h)
}

#[test]
fn blocking_calls_are_interruptible() {
    let o = ours();
    let p = &o.p;
    let mut fds = [0; 2];
    p.pipe2(&mut fds, 0).unwrap();
    let ep = p.epoll_create1(0).unwrap();
    p.epoll_ctl(ep, ADD, fds[0], Some(&EpollEvent::new(IN, 1)))
        .unwrap();

    let (t, h) = cancel_after(20);
    let mut b = [0u8; 4];
    assert_eq!(
        p.with_cancel(&t).read(fds[0], &mut b),
        Err(scalevfs::Errno::EINTR)
    );
    h.join().unwrap();

    let (t, h) = cancel_after(20);
    let mut evs = [EpollEvent::default(); 4];
    assert_eq!(
        p.with_cancel(&t).epoll_wait(ep, &mut evs, -1),
        Err(scalevfs::Errno::EINTR)
    );
    h.join().unwrap();

    let (t, h) = cancel_after(20);
    let mut pf = [libc::pollfd {
        fd: fds[0],
        events: libc::POLLIN,
        revents: 0,
    }];
    assert_eq!(
        p.with_cancel(&t).ppoll(&mut pf, None, None),
        Err(scalevfs::Errno::EINTR)
    );
    h.join().unwrap();

    // A full blocking pipe: the writer blocks, a cancel returns the partial count.
    p.fcntl(fds[1], libc::F_SETPIPE_SZ, FcntlArg::Int(4096))
        .unwrap();
    let (t, h) = cancel_after(20);
    assert_eq!(p.with_cancel(&t).write(fds[1], &[0u8; 6000]), Ok(4096));
    h.join().unwrap();

    // Timeouts return 0 events after about the timeout.
    let mut b = [0u8; 8192];
    assert_eq!(p.read(fds[0], &mut b), Ok(4096));
    let t0 = Instant::now();
    assert_eq!(p.epoll_wait(ep, &mut evs, 30), Ok(0));
    assert!(t0.elapsed() >= Duration::from_millis(25));
    let ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 1_000_000,
    };
    assert_eq!(p.ppoll(&mut pf, Some(&ts), None), Ok(0));
    let bad = libc::timespec {
        tv_sec: -1,
        tv_nsec: 0,
    };
    assert_eq!(
        p.ppoll(&mut pf, Some(&bad), None),
        Err(scalevfs::Errno::EINVAL)
    );
    assert_eq!(
        p.epoll_pwait(ep, &mut evs, 0, None),
        Ok(0),
        "epoll_pwait is epoll_wait"
    );
}

#[test]
fn blocking_read_is_woken_by_writer_thread() {
    let o = ours();
    let p = &o.p;
    let mut fds = [0; 2];
    p.pipe2(&mut fds, 0).unwrap();
    let efd = p.eventfd(0, 0).unwrap();
    let ep = p.epoll_create1(0).unwrap();
    p.epoll_ctl(ep, ADD, efd, Some(&EpollEvent::new(IN, 42)))
        .unwrap();
    std::thread::scope(|sc| {
        sc.spawn(|| {
            // If a check here fails, close the write end on the way out: the blocking read
            // below then ends (EOF, and fails its check) instead of waiting forever.
            struct CloseOnPanic<'a>(&'a Process, i32);
            impl Drop for CloseOnPanic<'_> {
                fn drop(&mut self) {
                    if std::thread::panicking() {
                        let _ = self.0.close(self.1);
                    }
                }
            }
            let _close = CloseOnPanic(p, fds[1]);
            std::thread::sleep(Duration::from_millis(10));
            assert_eq!(p.write(fds[1], b"wake"), Ok(4));
            assert_eq!(p.write(efd, &3u64.to_ne_bytes()), Ok(8));
        });
        let mut b = [0u8; 16];
        // Bounded by the writer: it runs unconditionally after 10 ms (and closes its end if
        // it fails).
        assert_eq!(p.read(fds[0], &mut b), Ok(4));
        assert_eq!(&b[..4], b"wake");
        let mut evs = [EpollEvent::default(); 2];
        assert_eq!(p.epoll_wait(ep, &mut evs, 5000), Ok(1));
        assert_eq!(evs[0], EpollEvent::new(IN, 42));
        assert_eq!(p.read(efd, &mut b), Ok(8));
        assert_eq!(u64::from_ne_bytes(b[..8].try_into().unwrap()), 3);
    });
    // readv/writev through the gathered path.
    use std::io::{IoSlice, IoSliceMut};
    assert_eq!(
        p.writev(fds[1], &[IoSlice::new(b"ab"), IoSlice::new(b"cde")]),
        Ok(5)
    );
    let (mut a, mut b) = ([0u8; 3], [0u8; 3]);
    assert_eq!(
        p.readv(
            fds[0],
            &mut [IoSliceMut::new(&mut a), IoSliceMut::new(&mut b)]
        ),
        Ok(5)
    );
    assert_eq!((&a, &b[..2]), (b"abc", &b"de"[..]));
    assert_eq!(p.pread64(fds[0], &mut a, 0), Err(scalevfs::Errno::ESPIPE));
    assert_eq!(p.fchdir(fds[0]), Err(scalevfs::Errno::ENOTDIR));
    assert_eq!(p.ftruncate(fds[1], 0), Err(scalevfs::Errno::EINVAL));
    assert_eq!(p.fsync(fds[1]), Err(scalevfs::Errno::EINVAL));
    assert_eq!(p.fallocate(fds[1], 0, 0, 1), Err(scalevfs::Errno::ESPIPE));
    assert_eq!(p.lseek(efd, 5, libc::SEEK_SET), Ok(0));
}

#[test]
fn fork_shares_descriptions_until_last_close() {
    let o = ours();
    let p = &o.p;
    let efd = p.eventfd(1, libc::EFD_NONBLOCK).unwrap();
    let ep = p.epoll_create1(0).unwrap();
    p.epoll_ctl(ep, ADD, efd, Some(&EpollEvent::new(IN, 5)))
        .unwrap();
    let child = p.fork();
    let mut evs = [EpollEvent::default(); 2];
    p.close(efd).unwrap();
    // The child still holds the description: still watched (level-triggered, count 1).
    assert_eq!(p.epoll_wait(ep, &mut evs, 0), Ok(1));
    child.exit();
    // The last close removed it from the epoll (an item kept alive would keep
    // reporting the non-zero counter).
    assert_eq!(p.epoll_wait(ep, &mut evs, 0), Ok(0));
}

#[test]
fn many_threads_churn_watched_fds() {
    // Threads create, register, signal, wait for and close eventfds and pipes without
    // EPOLL_CTL_DEL, some in one shared instance, while one thread closes and recreates
    // its own epoll instances. Every registration's event must be seen.
    let vfs = Vfs::new(VfsOptions::default());
    let p = Process::new(&vfs, Credentials::root());
    p.set_fd_limit(4096).unwrap();
    let shared = p.epoll_create1(0).unwrap();
    std::thread::scope(|sc| {
        for t in 0..8u64 {
            let p = &p;
            sc.spawn(move || {
                let own = p.epoll_create1(0).unwrap();
                let mut evs = [EpollEvent::default(); 8];
                for i in 0..300u64 {
                    let data = t << 32 | i;
                    let ep = if i % 2 == 0 { own } else { shared };
                    let efd = p.eventfd(0, libc::EFD_NONBLOCK).unwrap();
                    let mut fds = [0; 2];
                    p.pipe2(&mut fds, libc::O_NONBLOCK).unwrap();
                    p.epoll_ctl(ep, ADD, efd, Some(&EpollEvent::new(IN | ET, data)))
                        .unwrap();
                    p.epoll_ctl(own, ADD, fds[0], Some(&EpollEvent::new(IN, !data)))
                        .unwrap();
                    p.write(efd, &U64_1).unwrap();
                    p.write(fds[1], b"x").unwrap();
                    if ep == own {
                        let n = p.epoll_wait(own, &mut evs, 1000).unwrap();
                        let mut got: Vec<u64> = evs[..n].iter().map(|e| e.data).collect();
                        if got.len() < 2 {
                            let m = p.epoll_wait(own, &mut evs, 1000).unwrap();
                            got.extend(evs[..m].iter().map(|e| e.data));
                        }
                        got.sort_unstable();
                        let mut want = vec![data, !data];
                        want.sort_unstable();
                        assert_eq!(got, want);
                    } else {
                        let n = p.epoll_wait(own, &mut evs, 1000).unwrap();
                        assert_eq!(evs[..n].iter().map(|e| e.data).collect::<Vec<_>>(), [!data]);
                    }
                    p.close(fds[0]).unwrap();
                    p.close(fds[1]).unwrap();
                    p.close(efd).unwrap();
                }
                p.close(own).unwrap();
            });
        }
        sc.spawn(|| {
            for _ in 0..200 {
                let ep = p.epoll_create1(0).unwrap();
                let efd = p.eventfd(1, 0).unwrap();
                p.epoll_ctl(ep, ADD, efd, Some(&EpollEvent::new(IN, 1)))
                    .unwrap();
                p.epoll_ctl(shared, ADD, ep, Some(&EpollEvent::new(IN, 2)))
                    .unwrap();
                p.close(ep).unwrap();
                p.close(efd).unwrap();
            }
        });
    });
    // Nothing left registered in the shared instance: every watched file was closed.
    let mut evs = [EpollEvent::default(); 8];
    assert_eq!(p.epoll_wait(shared, &mut evs, 0), Ok(0));
    p.close(shared).unwrap();
    // Every anonymous file was released: the inode count of the internal mount is not
    // visible, but the tmpfs root holds nothing and the VFS tears down cleanly.
    assert_eq!(vfs.inode_count(), 1);
}

#[test]
fn descriptor_limits_and_unprivileged_pipe_size() {
    let vfs = Vfs::new(VfsOptions::default());
    let p = Process::new(&vfs, Credentials::user(1000, 1000));
    p.set_fd_limit(4).unwrap();
    let a = p.eventfd(0, 0).unwrap();
    let b = p.epoll_create1(0).unwrap();
    let c = p.eventfd(0, 0).unwrap();
    // One descriptor left: pipe2 needs two and must not leak the first.
    let mut fds = [-1; 2];
    assert_eq!(p.pipe2(&mut fds, 0), Err(scalevfs::Errno::EMFILE));
    assert_eq!(fds, [-1, -1]);
    let last = p.eventfd(0, 0).unwrap();
    p.close(last).unwrap();
    p.close(c).unwrap();
    p.pipe2(&mut fds, 0).unwrap();
    // Growing above pipe-max-size (1 MiB) needs CAP_SYS_RESOURCE; up to it is fine.
    let set = |n: i64| p.fcntl(fds[0], libc::F_SETPIPE_SZ, FcntlArg::Int(n));
    assert_eq!(set(1 << 21), Err(scalevfs::Errno::EPERM));
    assert_eq!(set(1 << 20), Ok(1 << 20));
    assert_eq!(p.fstat(fds[0]).map(|s| (s.uid, s.gid)), Ok((1000, 1000)));
    for fd in [a, b, fds[0], fds[1]] {
        p.close(fd).unwrap();
    }
}
