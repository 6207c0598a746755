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

#[path = "../common/mod.rs"]
mod common;
mod random;
mod scalevfs_only;
mod scenarios;

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
