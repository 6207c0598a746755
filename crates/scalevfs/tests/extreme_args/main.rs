//! Extreme arguments: every `Process` system call with boundary values (bad and special
//! descriptors, offsets and lengths at the ends of `i64`, unknown flag bits, over-long and
//! odd paths, out-of-range timestamps), compared with the same raw system call on the host
//! kernel (tmpfs on /dev/shm). Every call must return, without a panic, what Linux returns.
//!
//! Each test runs in its own thread with its own cwd and umask (`unshare(CLONE_FS)`), with
//! the host's cwd and ours both at the base directory, so `AT_FDCWD` and the path-only calls
//! (`truncate`, `chdir`) can be compared too. A mismatch or a panic is recorded and the test
//! fails at the end with the whole list. Deliberate differences (see the README's list) are
//! skipped with a comment where they occur.

#[path = "../common/mod.rs"]
mod common;

mod descriptors;
mod flags;
mod paths;
mod sizes;
mod times_and_locks;

use common::Both;
use descriptors::*;
use flags::*;
use libc::c_long;
use paths::*;
use scalevfs::{EpollEvent, FcntlArg, Flock, Process, Stat, SysResult, Timespec, VfsOptions};
use sizes::*;
use std::ffi::CString;
use std::io::{IoSlice, IoSliceMut};
use std::panic::{catch_unwind, AssertUnwindSafe};

/// A normalized outcome: the success value as text, or the errno.
type Res = Result<String, i32>;
/// Not an errno: our call panicked.
const PANICKED: i32 = -1;

/// A descriptor on both sides (bad values are the same number on both).
#[derive(Clone, Copy, Debug)]
struct Fd {
    name: &'static str,
    h: i32,
    o: i32,
}

/// A number no test thread reaches: opened, then closed, on both sides.
const CLOSED_FD: i32 = 997;
/// A free number for `dup2`/`dup3` targets.
const SPARE_FD: i32 = 998;

/// Descriptor values that name nothing open (`AT_FDCWD` is one for non-`*at` calls).
const BAD_FDS: [(&str, i32); 6] = [
    ("-1", -1),
    ("AT_FDCWD", libc::AT_FDCWD),
    ("i32::MIN", i32::MIN),
    ("i32::MAX", i32::MAX),
    ("1<<20", 1 << 20),
    ("closed", CLOSED_FD),
];

const OFFSETS: [i64; 9] = [
    i64::MIN,
    i64::MIN + 1,
    -1,
    0,
    1,
    1 << 40,
    i64::MAX - 2,
    i64::MAX - 1,
    i64::MAX,
];

fn cs(p: &[u8]) -> CString {
    CString::new(p.to_vec()).expect("host paths have no NUL")
}

fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// A raw host system call's outcome.
fn host(r: c_long, ok: impl FnOnce(c_long) -> String) -> Res {
    if r < 0 {
        Err(errno())
    } else {
        Ok(ok(r))
    }
}

fn unit(_: c_long) -> String {
    "ok".into()
}

fn num(r: c_long) -> String {
    r.to_string()
}

/// Our call that fills `buf`: the bytes it returned.
fn ours_read(buf: &mut [u8], f: impl FnOnce(&mut [u8]) -> SysResult<usize>) -> Res {
    let r = ours(|| f(&mut *buf), |k| k.to_string());
    r.map(|k| format!("{:?}", &buf[..k.parse::<usize>().expect("a count")]))
}

/// Our call's outcome; a panic is recorded as [`PANICKED`].
fn ours<T>(f: impl FnOnce() -> SysResult<T>, ok: impl FnOnce(T) -> String) -> Res {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(v)) => Ok(ok(v)),
        Ok(Err(e)) => Err(e.raw()),
        Err(_) => Err(PANICKED),
    }
}

fn host_stat(st: &libc::stat) -> String {
    format!(
        "mode {:o} nlink {} uid {} gid {} size {}",
        st.st_mode, st.st_nlink, st.st_uid, st.st_gid, st.st_size
    )
}

fn our_stat(s: &Stat) -> String {
    format!(
        "mode {:o} nlink {} uid {} gid {} size {}",
        s.mode, s.nlink, s.uid, s.gid, s.size
    )
}

fn name(r: &Res) -> String {
    match r {
        Err(PANICKED) => "PANIC".into(),
        Err(e) => format!("Err({:?})", scalevfs::Errno(*e)),
        Ok(v) => format!("Ok({v})"),
    }
}

/// One comparison session: a fresh host directory and a fresh `Vfs`.
struct X {
    b: Both,
    /// Host descriptors this test opened (closed on drop).
    host_fds: Vec<i32>,
    bad: Vec<String>,
    calls: usize,
    /// Calls run as uid 1000 (`Both::user`).
    user: bool,
}

impl X {
    fn new() -> X {
        // Our tmpfs gets the host's size limit, so "too big" is ENOSPC on both sides.
        let (h_size, limit) = host_limits();
        let b = Both::with_options(VfsOptions {
            size_limit: Some(h_size),
            ..Default::default()
        });
        b.o.root.set_fd_limit(limit).unwrap();
        b.o.user.set_fd_limit(limit).unwrap();
        // SAFETY: this test thread gets its own cwd and umask; no pointers.
        assert_eq!(unsafe { libc::unshare(libc::CLONE_FS) }, 0);
        // SAFETY: the base descriptor is open.
        assert_eq!(unsafe { libc::fchdir(b.host_base().0) }, 0);
        b.p().0.chdir("/base").unwrap();
        let mut x = X {
            b,
            host_fds: Vec::new(),
            bad: Vec::new(),
            calls: 0,
            user: false,
        };
        x.tree();
        x
    }

    fn o(&self) -> &Process {
        self.b.p().0
    }

    fn check(&mut self, what: impl FnOnce() -> String, h: Res, o: Res) {
        self.calls += 1;
        if h != o {
            let mut w = what();
            if w.len() > 160 {
                w = format!("{}...", &w[..w.floor_char_boundary(160)]);
            }
            let cut = |s: String| s.chars().take(120).collect::<String>();
            self.bad.push(format!(
                "{w}: ours {} host {}",
                cut(name(&o)),
                cut(name(&h))
            ));
        }
    }

    /// Setup step: must succeed on both sides.
    fn both_ok(&mut self, what: &str, h: c_long, o: SysResult<()>) {
        assert!(h >= 0, "host {what}: errno {}", errno());
        o.unwrap_or_else(|e| panic!("ours {what}: {e:?}"));
    }

    fn tree(&mut self) {
        let (hb, _) = self.b.host_base();
        let ob = self.b.p().1;
        for d in ["d", "d/sub"] {
            let c = cs(d.as_bytes());
            // SAFETY: valid C string.
            let h = unsafe { libc::mkdirat(hb, c.as_ptr(), 0o755) };
            let o = self.o().mkdirat(ob, d, 0o755);
            self.both_ok(d, h as c_long, o);
        }
        for f in ["f", "d/x"] {
            let fd = self.open_both("setup", f, libc::O_CREAT | libc::O_RDWR, 0o644);
            // SAFETY: valid buffer.
            let h = unsafe { libc::write(fd.h, b"hello world".as_ptr().cast(), 11) };
            let o = self.o().write(fd.o, b"hello world").map(|_| ());
            self.both_ok(f, h as c_long, o);
        }
        for (t, l) in [
            ("f", "l"),
            ("d", "ld"),
            ("nowhere", "dang"),
            ("loop2", "loop1"),
            ("loop1", "loop2"),
        ] {
            let (ct, cl) = (cs(t.as_bytes()), cs(l.as_bytes()));
            // SAFETY: valid C strings.
            let h = unsafe { libc::symlinkat(ct.as_ptr(), hb, cl.as_ptr()) };
            let o = self.o().symlinkat(t, ob, l);
            self.both_ok(l, h as c_long, o);
        }
    }

    /// Opens `path` (relative to the base) on both sides; must succeed.
    fn open_both(&mut self, name: &'static str, path: &str, flags: i32, mode: u32) -> Fd {
        let (hb, _) = self.b.host_base();
        let ob = self.b.p().1;
        let c = cs(path.as_bytes());
        // SAFETY: valid C string.
        let h = unsafe { libc::openat(hb, c.as_ptr(), flags, mode) };
        assert!(h >= 0, "host open {path}: errno {}", errno());
        self.host_fds.push(h);
        let o = self.o().openat(ob, path, flags, mode).unwrap();
        Fd { name, h, o }
    }

    /// Every kind of descriptor: bad numbers, files, directories, `O_PATH`, pipes,
    /// eventfd, epoll.
    fn fds(&mut self) -> Vec<Fd> {
        let mut v: Vec<Fd> = BAD_FDS
            .iter()
            .map(|&(name, n)| Fd { name, h: n, o: n })
            .collect();
        v.push(self.open_both("file rw", "f", libc::O_RDWR, 0));
        v.push(self.open_both("file ro", "f", libc::O_RDONLY, 0));
        v.push(self.open_both("file wo|append", "f", libc::O_WRONLY | libc::O_APPEND, 0));
        v.push(self.open_both("file O_PATH", "f", libc::O_PATH, 0));
        v.push(self.open_both("dir", "d", libc::O_RDONLY | libc::O_DIRECTORY, 0));
        v.push(self.open_both("dir O_PATH", "d", libc::O_PATH, 0));
        v.push(self.open_both("symlink O_PATH", "l", libc::O_PATH | libc::O_NOFOLLOW, 0));
        let mut hp = [0i32; 2];
        // SAFETY: valid array.
        assert_eq!(unsafe { libc::pipe2(hp.as_mut_ptr(), libc::O_NONBLOCK) }, 0);
        let mut op = [0i32; 2];
        self.o().pipe2(&mut op, libc::O_NONBLOCK).unwrap();
        // SAFETY: plain syscalls.
        let (he, hep) = unsafe { (libc::eventfd(3, libc::EFD_NONBLOCK), libc::epoll_create1(0)) };
        assert!(he >= 0 && hep >= 0);
        let oe = self.o().eventfd(3, libc::EFD_NONBLOCK).unwrap();
        let oep = self.o().epoll_create1(0).unwrap();
        self.host_fds.extend([hp[0], hp[1], he, hep]);
        v.push(Fd {
            name: "pipe read end",
            h: hp[0],
            o: op[0],
        });
        v.push(Fd {
            name: "pipe write end",
            h: hp[1],
            o: op[1],
        });
        v.push(Fd {
            name: "eventfd",
            h: he,
            o: oe,
        });
        v.push(Fd {
            name: "epoll",
            h: hep,
            o: oep,
        });
        v
    }

    /// Fails the test with every mismatch seen.
    fn finish(self, test: &str) {
        assert!(self.calls > 0);
        assert!(
            self.bad.is_empty(),
            "{test}: {} of {} calls differ from the host:\n{}",
            self.bad.len(),
            self.calls,
            self.bad.join("\n")
        );
    }
}

impl Drop for X {
    fn drop(&mut self) {
        for &fd in &self.host_fds {
            // SAFETY: our own descriptors.
            unsafe { libc::close(fd) };
        }
    }
}

/// The size of /dev/shm in bytes and the descriptor limit (ours is set to the host's).
fn host_limits() -> (u64, u32) {
    // SAFETY: valid pointers.
    let mut s: libc::statvfs = unsafe { std::mem::zeroed() };
    let p = cs(b"/dev/shm");
    // SAFETY: valid pointers.
    assert_eq!(unsafe { libc::statvfs(p.as_ptr(), &mut s) }, 0);
    // SAFETY: valid pointers.
    let mut r: libc::rlimit = unsafe { std::mem::zeroed() };
    // SAFETY: valid pointers.
    assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) }, 0);
    (s.f_blocks * s.f_frsize, r.rlim_cur.min(1 << 20) as u32)
}
