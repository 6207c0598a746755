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

mod random;
mod scenarios;
mod wakeups;

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

// ---- the scenarios' trace and runners ----

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
