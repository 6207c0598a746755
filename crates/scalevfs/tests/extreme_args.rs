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

mod common;
use common::Both;
use libc::c_long;
use scalevfs::{EpollEvent, FcntlArg, Flock, Process, Stat, SysResult, Timespec, VfsOptions};
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

// ------------------------------------------------------------------ descriptors

/// Every descriptor-taking call on every kind of descriptor.
#[test]
fn every_call_on_every_descriptor() {
    let mut x = X::new();
    // The closed descriptor: opened on both sides, then closed.
    let f = x.open_both("tmp", "f", libc::O_RDONLY, 0);
    // SAFETY: our own descriptors.
    unsafe {
        assert_eq!(libc::dup2(f.h, CLOSED_FD), CLOSED_FD);
        libc::close(CLOSED_FD);
    }
    x.o().dup2(f.o, CLOSED_FD).unwrap();
    x.o().close(CLOSED_FD).unwrap();
    let fds = x.fds();
    let pipe_r = fds
        .iter()
        .find(|f| f.name == "pipe read end")
        .copied()
        .unwrap();
    let epfd = fds.iter().find(|f| f.name == "epoll").copied().unwrap();
    for fd in &fds {
        io_calls(&mut x, *fd);
        meta_calls(&mut x, *fd);
        at_calls(&mut x, *fd);
        fd_calls(&mut x, *fd, pipe_r, epfd);
    }
    for fd in &fds {
        x.check(
            || format!("close({})", fd.name),
            // SAFETY: plain syscall (bad numbers are not open; ours are closed here).
            host(unsafe { libc::syscall(libc::SYS_close, fd.h) }, unit),
            ours(|| x.o().close(fd.o), |_| "ok".into()),
        );
    }
    x.host_fds.clear();
    x.finish("every_call_on_every_descriptor");
}

fn io_calls(x: &mut X, fd: Fd) {
    let n = fd.name;
    for len in [0usize, 4] {
        let mut hb = vec![0u8; len];
        let mut ob = vec![0u8; len];
        // SAFETY: valid buffer.
        let h = unsafe { libc::syscall(libc::SYS_read, fd.h, hb.as_mut_ptr(), len) };
        let h = host(h, |k| format!("{:?}", &hb[..k as usize]));
        let o = ours_read(&mut ob, |b| x.o().read(fd.o, b));
        x.check(|| format!("read({n}, {len})"), h, o);
        let mut hb = vec![0u8; len];
        let mut ob = vec![0u8; len];
        // SAFETY: valid buffer.
        let h = unsafe { libc::syscall(libc::SYS_pread64, fd.h, hb.as_mut_ptr(), len, 0) };
        let h = host(h, |k| format!("{:?}", &hb[..k as usize]));
        let o = ours_read(&mut ob, |b| x.o().pread64(fd.o, b, 0));
        x.check(|| format!("pread64({n}, {len}, 0)"), h, o);
    }
    // Eight bytes: a valid eventfd write too.
    let data = 1u64.to_ne_bytes();
    for d in [&data[..0], &data[..]] {
        // SAFETY: valid buffer.
        let h = unsafe { libc::syscall(libc::SYS_write, fd.h, d.as_ptr(), d.len()) };
        let o = ours(|| x.o().write(fd.o, d), |k| k.to_string());
        x.check(|| format!("write({n}, {})", d.len()), host(h, num), o);
        // SAFETY: valid buffer.
        let h = unsafe { libc::syscall(libc::SYS_pwrite64, fd.h, d.as_ptr(), d.len(), 3) };
        let o = ours(|| x.o().pwrite64(fd.o, d, 3), |k| k.to_string());
        x.check(|| format!("pwrite64({n}, {}, 3)", d.len()), host(h, num), o);
    }
    readv_writev(x, fd, &[8, 0, 3]);
    readv_writev(x, fd, &[]);
    for whence in [libc::SEEK_SET, libc::SEEK_CUR, libc::SEEK_END] {
        // SAFETY: plain syscall.
        let h = unsafe { libc::syscall(libc::SYS_lseek, fd.h, 0i64, whence) };
        let o = ours(|| x.o().lseek(fd.o, 0, whence), |k| k.to_string());
        x.check(|| format!("lseek({n}, 0, {whence})"), host(h, num), o);
    }
    // SAFETY: plain syscalls.
    let h = unsafe { libc::syscall(libc::SYS_ftruncate, fd.h, 11i64) };
    let o = ours(|| x.o().ftruncate(fd.o, 11), |_| "ok".into());
    x.check(|| format!("ftruncate({n}, 11)"), host(h, unit), o);
    for mode in [
        0,
        libc::FALLOC_FL_KEEP_SIZE,
        libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
    ] {
        // SAFETY: plain syscall.
        let h = unsafe { libc::syscall(libc::SYS_fallocate, fd.h, mode, 0i64, 1i64) };
        let o = ours(|| x.o().fallocate(fd.o, mode, 0, 1), |_| "ok".into());
        x.check(|| format!("fallocate({n}, {mode}, 0, 1)"), host(h, unit), o);
    }
    // SAFETY: plain syscalls.
    let h = unsafe { libc::syscall(libc::SYS_fsync, fd.h) };
    let o = ours(|| x.o().fsync(fd.o), |_| "ok".into());
    x.check(|| format!("fsync({n})"), host(h, unit), o);
    // SAFETY: plain syscalls.
    let h = unsafe { libc::syscall(libc::SYS_fdatasync, fd.h) };
    let o = ours(|| x.o().fdatasync(fd.o), |_| "ok".into());
    x.check(|| format!("fdatasync({n})"), host(h, unit), o);
    for len in [0usize, 1, 4096] {
        let mut hb = vec![0u8; len];
        let mut ob = vec![0u8; len];
        // SAFETY: valid buffer.
        let h = unsafe { libc::syscall(libc::SYS_getdents64, fd.h, hb.as_mut_ptr(), len) };
        // Entry order and inode numbers are ours: compare whether anything came back.
        let h = host(h, |k| (k > 0).to_string());
        let o = ours(|| x.o().getdents64(fd.o, &mut ob), |k| (k > 0).to_string());
        x.check(|| format!("getdents64({n}, {len})"), h, o);
    }
}

fn readv_writev(x: &mut X, fd: Fd, lens: &[usize]) {
    let n = fd.name;
    let mut hbufs: Vec<Vec<u8>> = lens.iter().map(|&l| vec![0u8; l]).collect();
    let mut obufs = hbufs.clone();
    let hiov: Vec<libc::iovec> = hbufs
        .iter_mut()
        .map(|b| libc::iovec {
            iov_base: b.as_mut_ptr().cast(),
            iov_len: b.len(),
        })
        .collect();
    // SAFETY: valid iovecs.
    let h = unsafe { libc::syscall(libc::SYS_readv, fd.h, hiov.as_ptr(), hiov.len()) };
    let h = host(h, |k| format!("{k} {:?}", hbufs.concat()));
    let o = {
        let mut oiov: Vec<IoSliceMut> = obufs.iter_mut().map(|b| IoSliceMut::new(b)).collect();
        ours(|| x.o().readv(fd.o, &mut oiov), |k| k.to_string())
    };
    let o = o.map(|k| format!("{k} {:?}", obufs.concat()));
    x.check(|| format!("readv({n}, {lens:?})"), h, o);
    let src: Vec<Vec<u8>> = lens.iter().map(|&l| vec![b'w'; l]).collect();
    let hiov: Vec<libc::iovec> = src
        .iter()
        .map(|b| libc::iovec {
            iov_base: b.as_ptr() as *mut _,
            iov_len: b.len(),
        })
        .collect();
    // SAFETY: valid iovecs (only read).
    let h = unsafe { libc::syscall(libc::SYS_writev, fd.h, hiov.as_ptr(), hiov.len()) };
    let oiov: Vec<IoSlice> = src.iter().map(|b| IoSlice::new(b)).collect();
    let o = ours(|| x.o().writev(fd.o, &oiov), |k| k.to_string());
    x.check(|| format!("writev({n}, {lens:?})"), host(h, num), o);
}

/// Raw `newfstatat` on the host.
fn host_fstatat(dirfd: i32, path: &[u8], flags: i32) -> Res {
    let c = cs(path);
    // SAFETY: zeroed plain struct.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: valid pointers.
    let r = unsafe { libc::syscall(libc::SYS_newfstatat, dirfd, c.as_ptr(), &mut st, flags) };
    host(r, |_| host_stat(&st))
}

/// An eventfd or epoll: Linux 6.15+ refuses every attribute change on anonymous inodes
/// (`anon_inode_setattr`: EOPNOTSUPP); ours has one inode per file and allows them. A
/// deliberate difference (README), so those calls are not compared on these.
fn anon(fd: Fd) -> bool {
    matches!(fd.name, "eventfd" | "epoll")
}

fn meta_calls(x: &mut X, fd: Fd) {
    let n = fd.name;
    // SAFETY: zeroed plain struct.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: valid pointer.
    let h = unsafe { libc::syscall(libc::SYS_fstat, fd.h, &mut st) };
    let h = host(h, |_| host_stat(&st));
    let o = ours(|| x.o().fstat(fd.o), |s| our_stat(&s));
    x.check(|| format!("fstat({n})"), h, o);
    if anon(fd) {
        return;
    }
    for mode in [0o644u32, 0o644 | 0xffff_f000] {
        // SAFETY: plain syscall.
        let h = unsafe { libc::syscall(libc::SYS_fchmod, fd.h, mode) };
        let o = ours(|| x.o().fchmod(fd.o, mode), |_| "ok".into());
        x.check(|| format!("fchmod({n}, {mode:#o})"), host(h, unit), o);
    }
    for (u, g) in [(u32::MAX, u32::MAX), (0, 0), (u32::MAX - 1, u32::MAX - 1)] {
        // SAFETY: plain syscall.
        let h = unsafe { libc::syscall(libc::SYS_fchown, fd.h, u, g) };
        let o = ours(|| x.o().fchown(fd.o, u, g), |_| "ok".into());
        x.check(|| format!("fchown({n}, {u}, {g})"), host(h, unit), o);
    }
    // SAFETY: plain syscall.
    let h = unsafe { libc::syscall(libc::SYS_fchown, fd.h, 0, 0) };
    let o = ours(|| x.o().fchown(fd.o, 0, 0), |_| "ok".into());
    x.check(|| format!("fchown({n}, 0, 0) again"), host(h, unit), o);
}

/// The `*at` calls with `fd` as the directory descriptor.
fn at_calls(x: &mut X, fd: Fd) {
    let n = fd.name;
    for (path, flags) in [
        (&b""[..], libc::AT_EMPTY_PATH),
        (b"", 0),
        (b"x", 0),
        (b"x", libc::AT_SYMLINK_NOFOLLOW),
        (b"/", 0),
        (b"..", 0),
        (b"x", -1),
        (b"", libc::AT_EMPTY_PATH | libc::AT_SYMLINK_NOFOLLOW),
    ] {
        let h = host_fstatat(fd.h, path, flags);
        let o = ours(|| x.o().newfstatat(fd.o, path, flags), |s| our_stat(&s));
        // "/" and ".." of a bad descriptor's cwd are directories outside our tree.
        let (h, o) = if path == b"/" || path == b".." {
            (h.map(|s| file_type(&s)), o.map(|s| file_type(&s)))
        } else {
            (h, o)
        };
        x.check(
            || {
                format!(
                    "newfstatat({n}, {:?}, {flags:#x})",
                    String::from_utf8_lossy(path)
                )
            },
            h,
            o,
        );
    }
    for (path, flags) in [
        (&b""[..], libc::AT_EMPTY_PATH),
        (b"x", 0),
        (b"x", libc::AT_SYMLINK_NOFOLLOW),
        (b"x", 0x8000_0000u32 as i32),
    ] {
        if anon(fd) && path.is_empty() {
            continue;
        }
        let c = cs(path);
        // SAFETY: valid C string.
        let h = unsafe { libc::syscall(libc::SYS_fchmodat2, fd.h, c.as_ptr(), 0o600, flags) };
        let o = ours(|| x.o().fchmodat(fd.o, path, 0o600, flags), |_| "ok".into());
        x.check(
            || {
                format!(
                    "fchmodat({n}, {:?}, {flags:#x})",
                    String::from_utf8_lossy(path)
                )
            },
            host(h, unit),
            o,
        );
        // SAFETY: valid C string.
        let h = unsafe { libc::syscall(libc::SYS_fchownat, fd.h, c.as_ptr(), -1, -1, flags) };
        let o = ours(
            || x.o().fchownat(fd.o, path, u32::MAX, u32::MAX, flags),
            |_| "ok".into(),
        );
        x.check(
            || {
                format!(
                    "fchownat({n}, {:?}, {flags:#x})",
                    String::from_utf8_lossy(path)
                )
            },
            host(h, unit),
            o,
        );
        for mode in [libc::F_OK, libc::R_OK | libc::W_OK, 8, -1] {
            // The host checks the real uid, which setfsuid does not change.
            if x.user && flags & libc::AT_EACCESS == 0 && mode > 0 && mode < 8 {
                continue;
            }
            // SAFETY: valid C string.
            let h = unsafe { libc::syscall(libc::SYS_faccessat2, fd.h, c.as_ptr(), mode, flags) };
            let o = ours(|| x.o().faccessat(fd.o, path, mode, flags), |_| "ok".into());
            x.check(
                || {
                    format!(
                        "faccessat({n}, {:?}, {mode}, {flags:#x})",
                        String::from_utf8_lossy(path)
                    )
                },
                host(h, unit),
                o,
            );
        }
    }
    // utimensat with and without a path, with a NULL times and explicit ones; an empty
    // path without AT_EMPTY_PATH is our futimens (the host's NULL path).
    for (path, flags) in [
        (&b""[..], 0),
        (b"", libc::AT_SYMLINK_NOFOLLOW),
        (b"", libc::AT_EMPTY_PATH),
        (b"x", 0),
        (b"x", libc::AT_SYMLINK_NOFOLLOW),
    ] {
        for times in [
            None,
            Some([Timespec { sec: 5, nsec: 6 }; 2]),
            Some(
                [Timespec {
                    sec: 0,
                    nsec: libc::UTIME_OMIT,
                }; 2],
            ),
        ] {
            if anon(fd) && path.is_empty() {
                continue;
            }
            let h = host_utimensat(fd.h, path, times, flags);
            let o = ours(
                || x.o().utimensat(fd.o, path, times, flags),
                |_| "ok".into(),
            );
            x.check(
                || {
                    format!(
                        "utimensat({n}, {:?}, {times:?}, {flags:#x})",
                        String::from_utf8_lossy(path)
                    )
                },
                h,
                o,
            );
        }
    }
    namespace_at(x, fd);
}

fn host_utimensat(dirfd: i32, path: &[u8], times: Option<[Timespec; 2]>, flags: i32) -> Res {
    let ts = times.map(|t| {
        t.map(|t| libc::timespec {
            tv_sec: t.sec,
            tv_nsec: t.nsec,
        })
    });
    let tp = ts.as_ref().map_or(std::ptr::null(), |t| t.as_ptr());
    let c = cs(path);
    let pp = if path.is_empty() && flags & libc::AT_EMPTY_PATH == 0 && dirfd != libc::AT_FDCWD {
        std::ptr::null()
    } else {
        c.as_ptr()
    };
    // SAFETY: valid pointers (a NULL path is futimens).
    let r = unsafe { libc::syscall(libc::SYS_utimensat, dirfd, pp, tp, flags) };
    host(r, unit)
}

/// Creates and removes names under `fd`: mkdirat, openat, symlinkat, readlinkat, linkat,
/// renameat2, unlinkat.
fn namespace_at(x: &mut X, fd: Fd) {
    let n = fd.name;
    let c = |s: &str| cs(s.as_bytes());
    // SAFETY: valid C strings and buffers.
    let h = unsafe { libc::syscall(libc::SYS_mkdirat, fd.h, c("nd").as_ptr(), 0o755) };
    let o = ours(|| x.o().mkdirat(fd.o, "nd", 0o755), |_| "ok".into());
    x.check(|| format!("mkdirat({n}, nd)"), host(h, unit), o);
    // SAFETY: valid C strings and buffers, plain integer arguments.
    let h = unsafe {
        libc::syscall(
            libc::SYS_openat,
            fd.h,
            c("nf").as_ptr(),
            libc::O_CREAT | libc::O_RDWR | libc::O_CLOEXEC,
            0o600,
        )
    };
    if h >= 0 {
        // SAFETY: valid C strings and buffers, plain integer arguments.
        unsafe { libc::close(h as i32) };
    }
    let o = ours(
        || {
            x.o()
                .openat(fd.o, "nf", libc::O_CREAT | libc::O_RDWR, 0o600)
        },
        |fd| {
            let _ = x.o().close(fd);
            "fd".into()
        },
    );
    x.check(
        || format!("openat({n}, nf, O_CREAT)"),
        host(h, |_| "fd".into()),
        o,
    );
    // SAFETY: valid C strings and buffers, plain integer arguments.
    let h = unsafe { libc::syscall(libc::SYS_symlinkat, c("t").as_ptr(), fd.h, c("sl").as_ptr()) };
    let o = ours(|| x.o().symlinkat("t", fd.o, "sl"), |_| "ok".into());
    x.check(|| format!("symlinkat(t, {n}, sl)"), host(h, unit), o);
    for p in ["sl", ""] {
        let mut hb = [0u8; 16];
        let mut ob = [0u8; 16];
        // SAFETY: valid C strings and buffers, plain integer arguments.
        let h = unsafe {
            libc::syscall(
                libc::SYS_readlinkat,
                fd.h,
                c(p).as_ptr(),
                hb.as_mut_ptr(),
                16,
            )
        };
        let h = host(h, |k| format!("{:?}", &hb[..k as usize]));
        let o = ours_read(&mut ob, |b| x.o().readlinkat(fd.o, p, b));
        x.check(|| format!("readlinkat({n}, {p:?})"), h, o);
    }
    for (a, b, flags) in [
        ("sl", "sl2", 0),
        ("", "sl3", libc::AT_EMPTY_PATH),
        ("", "sl4", 0),
        ("sl", "sl5", -1),
    ] {
        // SAFETY: valid C strings and buffers, plain integer arguments.
        let h = unsafe {
            libc::syscall(
                libc::SYS_linkat,
                fd.h,
                c(a).as_ptr(),
                fd.h,
                c(b).as_ptr(),
                flags,
            )
        };
        let o = ours(|| x.o().linkat(fd.o, a, fd.o, b, flags), |_| "ok".into());
        x.check(
            || format!("linkat({n}, {a:?}, {b:?}, {flags:#x})"),
            host(h, unit),
            o,
        );
    }
    // SAFETY: valid C strings and buffers, plain integer arguments.
    let h = unsafe {
        libc::syscall(
            libc::SYS_renameat2,
            fd.h,
            c("sl2").as_ptr(),
            fd.h,
            c("sl6").as_ptr(),
            0,
        )
    };
    let o = ours(
        || x.o().renameat2(fd.o, "sl2", fd.o, "sl6", 0),
        |_| "ok".into(),
    );
    x.check(|| format!("renameat2({n}, sl2, sl6)"), host(h, unit), o);
    for (p, flags) in [
        ("sl", 0),
        ("sl3", 0),
        ("sl6", 0),
        ("nf", 0),
        ("nd", 0),
        ("nd", libc::AT_REMOVEDIR),
        ("", libc::AT_REMOVEDIR),
        ("x", -1),
    ] {
        // SAFETY: valid C strings and buffers, plain integer arguments.
        let h = unsafe { libc::syscall(libc::SYS_unlinkat, fd.h, c(p).as_ptr(), flags) };
        let o = ours(|| x.o().unlinkat(fd.o, p, flags), |_| "ok".into());
        x.check(
            || format!("unlinkat({n}, {p:?}, {flags:#x})"),
            host(h, unit),
            o,
        );
    }
}

/// dup family, fcntl, flock, fchdir, epoll_ctl and poll.
fn fd_calls(x: &mut X, fd: Fd, pipe_r: Fd, epfd: Fd) {
    let n = fd.name;
    let fdnum = |k: c_long| {
        if k >= 0 {
            "fd".to_string()
        } else {
            k.to_string()
        }
    };
    // SAFETY: plain syscalls and valid pointers.
    let h = unsafe { libc::syscall(libc::SYS_dup, fd.h) };
    if h >= 0 {
        // SAFETY: valid C strings and buffers, plain integer arguments.
        unsafe { libc::close(h as i32) };
    }
    let o = ours(
        || x.o().dup(fd.o),
        |k| {
            let _ = x.o().close(k);
            "fd".into()
        },
    );
    x.check(|| format!("dup({n})"), host(h, fdnum), o);
    for (newfd, flags) in [
        (SPARE_FD, 0),
        (SPARE_FD, libc::O_CLOEXEC),
        (SPARE_FD, libc::O_NONBLOCK),
        (SPARE_FD, -1),
        (fd.h, 0),
        (-1, 0),
        (i32::MAX, 0),
        (1 << 20, 0),
    ] {
        // The same number on both sides, except for fd itself.
        let onew = if newfd == fd.h { fd.o } else { newfd };
        // SAFETY: valid C strings and buffers, plain integer arguments.
        let h = unsafe { libc::syscall(libc::SYS_dup3, fd.h, newfd, flags) };
        let o = ours(|| x.o().dup3(fd.o, onew, flags), |k| k.to_string());
        let (h, o) = (h_fd(h, newfd), o.map(|k| norm_fd(&k, onew)));
        x.check(|| format!("dup3({n}, {newfd}, {flags:#x})"), h, o);
        // SAFETY: valid C strings and buffers, plain integer arguments.
        let h = unsafe { libc::syscall(libc::SYS_dup2, fd.h, newfd) };
        let o = ours(|| x.o().dup2(fd.o, onew), |k| k.to_string());
        let (h, o) = (h_fd(h, newfd), o.map(|k| norm_fd(&k, onew)));
        x.check(|| format!("dup2({n}, {newfd})"), h, o);
        if newfd == SPARE_FD {
            // SAFETY: valid C strings and buffers, plain integer arguments.
            unsafe { libc::close(SPARE_FD) };
            let _ = x.o().close(SPARE_FD);
        }
    }
    for (cmd, arg) in [
        (libc::F_GETFD, 0i64),
        (libc::F_SETFD, -1),
        (libc::F_GETFD, 0),
        (libc::F_SETFD, 0),
        (libc::F_GETFL, 0),
        (libc::F_SETFL, libc::O_NONBLOCK as i64),
        (libc::F_GETFL, 0),
        (libc::F_GETPIPE_SZ, 0),
        (libc::F_SETPIPE_SZ, -1),
        (libc::F_SETPIPE_SZ, i32::MAX as i64),
        (libc::F_SETPIPE_SZ, 4096),
        (libc::F_GETPIPE_SZ, 0),
        (9999, 0),
        (-1, 0),
        (i32::MIN, 0),
    ] {
        // SAFETY: valid C strings and buffers, plain integer arguments.
        let h = unsafe { libc::syscall(libc::SYS_fcntl, fd.h, cmd, arg) };
        let o = ours(
            || x.o().fcntl(fd.o, cmd, FcntlArg::Int(arg)),
            |k| k.to_string(),
        );
        let mut h = host(h, num);
        if cmd == libc::F_SETPIPE_SZ && arg == i32::MAX as i64 && h == Err(libc::EPERM) {
            // A 2 GiB pipe needs CAP_SYS_RESOURCE, which containers often drop (ours
            // models root with every capability): ours must refuse it (ENOMEM: the size
            // does not fit fcntl's int), never return a negative size.
            h = Err(libc::ENOMEM);
        }
        x.check(|| format!("fcntl({n}, {cmd}, {arg})"), h, o);
    }
    for (cmd, arg) in [
        (libc::F_DUPFD, 0i64),
        (libc::F_DUPFD_CLOEXEC, 500),
        (libc::F_DUPFD, -1),
        (libc::F_DUPFD, i32::MAX as i64),
        (libc::F_DUPFD, 1 << 20),
    ] {
        // SAFETY: valid C strings and buffers, plain integer arguments.
        let h = unsafe { libc::syscall(libc::SYS_fcntl, fd.h, cmd, arg) };
        if h >= 0 {
            // SAFETY: valid C strings and buffers, plain integer arguments.
            unsafe { libc::close(h as i32) };
        }
        let o = ours(
            || x.o().fcntl(fd.o, cmd, FcntlArg::Int(arg)),
            |k| {
                let _ = x.o().close(k);
                "fd".into()
            },
        );
        x.check(|| format!("fcntl({n}, {cmd}, {arg})"), host(h, fdnum), o);
    }
    for op in [
        libc::LOCK_SH | libc::LOCK_NB,
        libc::LOCK_EX | libc::LOCK_NB,
        libc::LOCK_UN,
        0,
        libc::LOCK_NB,
        libc::LOCK_SH | libc::LOCK_EX | libc::LOCK_NB,
        libc::LOCK_UN | 0x100,
        -1,
    ] {
        // SAFETY: valid C strings and buffers, plain integer arguments.
        let h = unsafe { libc::syscall(libc::SYS_flock, fd.h, op) };
        let o = ours(|| x.o().flock(fd.o, op), |_| "ok".into());
        x.check(|| format!("flock({n}, {op:#x})"), host(h, unit), o);
    }
    // SAFETY: valid C strings and buffers, plain integer arguments.
    let h = unsafe { libc::syscall(libc::SYS_fchdir, fd.h) };
    let o = ours(|| x.o().fchdir(fd.o), |_| "ok".into());
    x.check(|| format!("fchdir({n})"), host(h, unit), o);
    // SAFETY: valid C strings and buffers, plain integer arguments.
    assert_eq!(unsafe { libc::fchdir(x.b.host_base().0) }, 0);
    x.o().chdir("/base").unwrap();
    // epoll_ctl with fd as the target and as the epoll; poll on it.
    let ev = EpollEvent::new(libc::EPOLLIN as u32, 7);
    for op in [
        libc::EPOLL_CTL_ADD,
        libc::EPOLL_CTL_MOD,
        libc::EPOLL_CTL_DEL,
        99,
    ] {
        let mut hev = libc::epoll_event {
            events: ev.events,
            u64: ev.data,
        };
        // SAFETY: valid C strings and buffers, plain integer arguments.
        let h = unsafe { libc::syscall(libc::SYS_epoll_ctl, epfd.h, op, fd.h, &mut hev) };
        let o = ours(
            || x.o().epoll_ctl(epfd.o, op, fd.o, Some(&ev)),
            |_| "ok".into(),
        );
        x.check(|| format!("epoll_ctl(epoll, {op}, {n})"), host(h, unit), o);
        // SAFETY: valid C strings and buffers, plain integer arguments.
        let h = unsafe { libc::syscall(libc::SYS_epoll_ctl, fd.h, op, pipe_r.h, &mut hev) };
        let o = ours(
            || x.o().epoll_ctl(fd.o, op, pipe_r.o, Some(&ev)),
            |_| "ok".into(),
        );
        x.check(|| format!("epoll_ctl({n}, {op}, pipe)"), host(h, unit), o);
    }
    let mut hev = [libc::epoll_event { events: 0, u64: 0 }; 4];
    // SAFETY: valid C strings and buffers, plain integer arguments.
    let h = unsafe { libc::syscall(libc::SYS_epoll_wait, fd.h, hev.as_mut_ptr(), 4, 0) };
    let mut oev = [EpollEvent::default(); 4];
    let o = ours(|| x.o().epoll_wait(fd.o, &mut oev, 0), |k| k.to_string());
    x.check(|| format!("epoll_wait({n})"), host(h, num), o);
    for events in [libc::POLLIN | libc::POLLOUT, -1] {
        let mut hp = [libc::pollfd {
            fd: fd.h,
            events,
            revents: 0,
        }];
        let mut op = [libc::pollfd {
            fd: fd.o,
            events,
            revents: 0,
        }];
        let ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: valid C strings and buffers, plain integer arguments.
        let h = unsafe {
            libc::syscall(
                libc::SYS_ppoll,
                hp.as_mut_ptr(),
                1,
                &ts,
                std::ptr::null::<u8>(),
                8,
            )
        };
        let h = host(h, |k| format!("{k} {:#x}", hp[0].revents));
        let o = ours(|| x.o().poll(&mut op, 0), |k| k.to_string());
        let o = o.map(|k| format!("{k} {:#x}", op[0].revents));
        x.check(|| format!("poll({n}, {events:#x})"), h, o);
    }
}

/// A descriptor result: the number itself when it was asked for (`dup2`'s newfd).
fn h_fd(h: c_long, newfd: i32) -> Res {
    host(h, |k| {
        if k == newfd as c_long {
            "newfd".into()
        } else {
            k.to_string()
        }
    })
}

fn norm_fd(k: &str, newfd: i32) -> String {
    if k == newfd.to_string() {
        "newfd".into()
    } else {
        k.into()
    }
}

// ------------------------------------------------------------------ offsets and sizes

/// lseek, pread64/pwrite64, ftruncate/truncate and fallocate with offsets and lengths at
/// the ends of `i64`, on a regular file (and lseek on every kind of descriptor).
#[test]
fn offsets_and_lengths() {
    let mut x = X::new();
    let fds = x.fds();
    let whences = [
        libc::SEEK_SET,
        libc::SEEK_CUR,
        libc::SEEK_END,
        libc::SEEK_DATA,
        libc::SEEK_HOLE,
        5,
        -1,
        i32::MAX,
    ];
    for fd in &fds {
        for &off in &OFFSETS {
            for whence in whences {
                // SAFETY: plain syscall.
                let h = unsafe { libc::syscall(libc::SYS_lseek, fd.h, off, whence) };
                let o = ours(|| x.o().lseek(fd.o, off, whence), |k| k.to_string());
                x.check(
                    || format!("lseek({}, {off}, {whence})", fd.name),
                    host(h, num),
                    o,
                );
            }
        }
    }
    let f = x.open_both("g", "g", libc::O_CREAT | libc::O_RDWR, 0o644);
    for &off in &OFFSETS {
        for len in [0usize, 1, 2, 10] {
            let data = vec![b'p'; len];
            // SAFETY: valid buffer.
            let h = unsafe { libc::syscall(libc::SYS_pwrite64, f.h, data.as_ptr(), len, off) };
            let o = ours(|| x.o().pwrite64(f.o, &data, off), |k| k.to_string());
            x.check(|| format!("pwrite64({len}, {off})"), host(h, num), o);
            let mut hb = vec![0u8; len];
            let mut ob = vec![0u8; len];
            // SAFETY: valid buffer.
            let h = unsafe { libc::syscall(libc::SYS_pread64, f.h, hb.as_mut_ptr(), len, off) };
            let h = host(h, |k| format!("{:?}", &hb[..k as usize]));
            let o = ours_read(&mut ob, |b| x.o().pread64(f.o, b, off));
            x.check(|| format!("pread64({len}, {off})"), h, o);
            stat_both(&mut x, "g", &format!("after pwrite64({len}, {off})"));
        }
        // write/read at a position set by lseek (past i64::MAX - len: EINVAL or EFBIG).
        for whence in [libc::SEEK_SET, libc::SEEK_END] {
            // SAFETY: plain syscall.
            let h = unsafe { libc::syscall(libc::SYS_lseek, f.h, off, whence) };
            let o = ours(|| x.o().lseek(f.o, off, whence), |k| k.to_string());
            x.check(|| format!("lseek(g, {off}, {whence})"), host(h, num), o);
            // SAFETY: valid buffer.
            let h = unsafe { libc::syscall(libc::SYS_write, f.h, b"ww".as_ptr(), 2) };
            let o = ours(|| x.o().write(f.o, b"ww"), |k| k.to_string());
            x.check(
                || format!("write(2) at lseek({off}, {whence})"),
                host(h, num),
                o,
            );
            let mut hb = [0u8; 3];
            let mut ob = [0u8; 3];
            // SAFETY: valid buffer.
            let h = unsafe { libc::syscall(libc::SYS_read, f.h, hb.as_mut_ptr(), 3) };
            let h = host(h, |k| format!("{:?}", &hb[..k as usize]));
            let o = ours_read(&mut ob, |b| x.o().read(f.o, b));
            x.check(|| format!("read(3) after lseek({off}, {whence})"), h, o);
        }
        // SAFETY: plain syscall.
        let h = unsafe { libc::syscall(libc::SYS_ftruncate, f.h, off) };
        let o = ours(|| x.o().ftruncate(f.o, off), |_| "ok".into());
        x.check(|| format!("ftruncate({off})"), host(h, unit), o);
        stat_both(&mut x, "g", &format!("after ftruncate({off})"));
        let c = cs(b"g");
        // SAFETY: valid C string.
        let h = unsafe { libc::syscall(libc::SYS_truncate, c.as_ptr(), off) };
        let o = ours(|| x.o().truncate("g", off), |_| "ok".into());
        x.check(|| format!("truncate({off})"), host(h, unit), o);
        stat_both(&mut x, "g", &format!("after truncate({off})"));
    }
    // Back to a small file for fallocate.
    x.o().ftruncate(f.o, 100).unwrap();
    // SAFETY: plain syscall.
    assert_eq!(unsafe { libc::ftruncate(f.h, 100) }, 0);
    let modes = [
        0,
        libc::FALLOC_FL_KEEP_SIZE,
        libc::FALLOC_FL_PUNCH_HOLE,
        libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
        libc::FALLOC_FL_COLLAPSE_RANGE,
        libc::FALLOC_FL_COLLAPSE_RANGE | libc::FALLOC_FL_KEEP_SIZE,
        libc::FALLOC_FL_ZERO_RANGE | libc::FALLOC_FL_PUNCH_HOLE,
        libc::FALLOC_FL_INSERT_RANGE,
        libc::FALLOC_FL_UNSHARE_RANGE,
        0x80,
        0x80 | libc::FALLOC_FL_KEEP_SIZE,
        libc::FALLOC_FL_INSERT_RANGE | libc::FALLOC_FL_KEEP_SIZE,
        0x100,
        -1,
        i32::MIN,
    ];
    let lens = [i64::MIN, -1, 0, 1, 1 << 50, i64::MAX - 1, i64::MAX];
    for mode in modes {
        for &off in &OFFSETS {
            for &len in &lens {
                // SAFETY: plain syscall.
                let h = unsafe { libc::syscall(libc::SYS_fallocate, f.h, mode, off, len) };
                let o = ours(|| x.o().fallocate(f.o, mode, off, len), |_| "ok".into());
                x.check(
                    || format!("fallocate({mode:#x}, {off}, {len})"),
                    host(h, unit),
                    o,
                );
            }
        }
        stat_both(&mut x, "g", &format!("after fallocate mode {mode:#x}"));
    }
    x.finish("offsets_and_lengths");
}

/// Compares `stat(path)` on both sides (relative to the cwd, the base on both).
fn stat_both(x: &mut X, path: &str, when: &str) {
    let h = host_fstatat(libc::AT_FDCWD, path.as_bytes(), 0);
    let o = ours(|| x.o().stat(path), |s| our_stat(&s));
    x.check(|| format!("stat({path:?}) {when}"), h, o);
}

/// readv/writev with more than IOV_MAX (1024) buffers, and with exactly 1024.
#[test]
fn iovec_counts() {
    let mut x = X::new();
    let f = x.open_both("f", "f", libc::O_RDWR, 0);
    for count in [1024usize, 1025, 4096] {
        let lens = vec![1usize; count];
        readv_writev(&mut x, f, &lens);
        // SAFETY: plain syscall.
        let h = unsafe { libc::syscall(libc::SYS_lseek, f.h, 0i64, libc::SEEK_SET) };
        let o = ours(|| x.o().lseek(f.o, 0, libc::SEEK_SET), |k| k.to_string());
        x.check(|| "lseek(0)".into(), host(h, num), o);
    }
    x.finish("iovec_counts");
}

// ------------------------------------------------------------------ flags and modes

/// Unknown flag bits and invalid combinations for every call that takes flags or a mode.
#[test]
fn unknown_flags_and_modes() {
    let mut x = X::new();
    let c = |s: &str| cs(s.as_bytes());
    let mut open_flags = vec![
        0x7fff_ffff,
        -1,
        i32::MIN,
        libc::O_TMPFILE | libc::O_RDONLY,
        libc::O_TMPFILE & !libc::O_DIRECTORY | libc::O_RDWR,
        libc::O_CREAT | libc::O_DIRECTORY | libc::O_RDWR,
        libc::O_PATH | -1,
        libc::O_ACCMODE,
        libc::O_ACCMODE | libc::O_CREAT,
        libc::O_RDONLY | libc::O_TRUNC,
        0x4000_0000,
        0o10 | libc::O_RDONLY,
    ];
    // Each single bit.
    open_flags.extend((0..31).map(|b| 1 << b));
    for path in ["f", "d", "l", "newfile", "dang", "loop1"] {
        for &flags in &open_flags {
            for mode in [0o644u32, 0xffff_ffff] {
                // SAFETY: valid C string.
                let h = unsafe {
                    libc::syscall(
                        libc::SYS_openat,
                        libc::AT_FDCWD,
                        c(path).as_ptr(),
                        flags,
                        mode,
                    )
                };
                let hs = h_open(h);
                let o = ours(
                    || x.o().openat(libc::AT_FDCWD, path, flags, mode),
                    |fd| {
                        let _ = x.o().close(fd);
                        "fd".into()
                    },
                );
                x.check(|| format!("openat({path}, {flags:#x}, {mode:#o})"), hs, o);
                // Whatever was created must look the same (then goes, on both).
                stat_both(&mut x, "newfile", &format!("after open flags {flags:#x}"));
                unlink_both(&mut x, "newfile");
            }
        }
    }
    for mode in [0xffff_ffffu32, 0o7777, 0o170_777, 0o1_000_000] {
        // SAFETY: valid C string.
        let h = unsafe { libc::syscall(libc::SYS_mkdirat, libc::AT_FDCWD, c("md").as_ptr(), mode) };
        let o = ours(
            || x.o().mkdirat(libc::AT_FDCWD, "md", mode),
            |_| "ok".into(),
        );
        x.check(|| format!("mkdirat(md, {mode:#o})"), host(h, unit), o);
        stat_both(&mut x, "md", &format!("after mkdir mode {mode:#o}"));
        // SAFETY: valid C string.
        let h = unsafe { libc::syscall(libc::SYS_fchmodat, libc::AT_FDCWD, c("f").as_ptr(), mode) };
        let o = ours(
            || x.o().fchmodat(libc::AT_FDCWD, "f", mode, 0),
            |_| "ok".into(),
        );
        x.check(|| format!("fchmodat(f, {mode:#o})"), host(h, unit), o);
        stat_both(&mut x, "f", &format!("after chmod {mode:#o}"));
        // SAFETY: valid C string.
        let h = unsafe {
            libc::syscall(
                libc::SYS_unlinkat,
                libc::AT_FDCWD,
                c("md").as_ptr(),
                libc::AT_REMOVEDIR,
            )
        };
        let o = ours(
            || x.o().unlinkat(libc::AT_FDCWD, "md", libc::AT_REMOVEDIR),
            |_| "ok".into(),
        );
        x.check(
            || format!("rmdir(md) after mode {mode:#o}"),
            host(h, unit),
            o,
        );
    }
    x.o().fchmodat(libc::AT_FDCWD, "f", 0o644, 0).unwrap();
    // SAFETY: valid C string.
    unsafe { libc::chmod(c("f").as_ptr(), 0o644) };
    let bits = |v: &mut Vec<i32>| v.extend((0..32).map(|b| (1u32 << b) as i32));
    let mut at_flags = vec![-1, 0x7fff_ffff];
    bits(&mut at_flags);
    for &flags in &at_flags {
        for path in ["f", "d", "l", "nothing"] {
            let h = host_fstatat(libc::AT_FDCWD, path.as_bytes(), flags);
            let o = ours(
                || x.o().newfstatat(libc::AT_FDCWD, path, flags),
                |s| our_stat(&s),
            );
            x.check(|| format!("newfstatat({path}, {flags:#x})"), h, o);
            // SAFETY: valid C string.
            let h = unsafe {
                libc::syscall(
                    libc::SYS_faccessat2,
                    libc::AT_FDCWD,
                    c(path).as_ptr(),
                    0,
                    flags,
                )
            };
            let o = ours(
                || x.o().faccessat(libc::AT_FDCWD, path, 0, flags),
                |_| "ok".into(),
            );
            x.check(
                || format!("faccessat({path}, {flags:#x})"),
                host(h, unit),
                o,
            );
            // SAFETY: valid C string.
            let h = unsafe {
                libc::syscall(
                    libc::SYS_fchownat,
                    libc::AT_FDCWD,
                    c(path).as_ptr(),
                    -1,
                    -1,
                    flags,
                )
            };
            let o = ours(
                || {
                    x.o()
                        .fchownat(libc::AT_FDCWD, path, u32::MAX, u32::MAX, flags)
                },
                |_| "ok".into(),
            );
            x.check(|| format!("fchownat({path}, {flags:#x})"), host(h, unit), o);
            // fchmodat2 on a symlink with AT_SYMLINK_NOFOLLOW: EOPNOTSUPP on both.
            // SAFETY: valid C string.
            let h = unsafe {
                libc::syscall(
                    libc::SYS_fchmodat2,
                    libc::AT_FDCWD,
                    c(path).as_ptr(),
                    0o644,
                    flags,
                )
            };
            let o = ours(
                || x.o().fchmodat(libc::AT_FDCWD, path, 0o644, flags),
                |_| "ok".into(),
            );
            x.check(
                || format!("fchmodat2({path}, {flags:#x})"),
                host(h, unit),
                o,
            );
            let ts = Some([Timespec { sec: 1, nsec: 2 }; 2]);
            let h = host_utimensat(libc::AT_FDCWD, path.as_bytes(), ts, flags);
            let o = ours(
                || x.o().utimensat(libc::AT_FDCWD, path, ts, flags),
                |_| "ok".into(),
            );
            x.check(|| format!("utimensat({path}, {flags:#x})"), h, o);
            // SAFETY: valid C strings.
            let h = unsafe {
                libc::syscall(
                    libc::SYS_linkat,
                    libc::AT_FDCWD,
                    c(path).as_ptr(),
                    libc::AT_FDCWD,
                    c("lk").as_ptr(),
                    flags,
                )
            };
            let o = ours(
                || {
                    x.o()
                        .linkat(libc::AT_FDCWD, path, libc::AT_FDCWD, "lk", flags)
                },
                |_| "ok".into(),
            );
            x.check(
                || format!("linkat({path}, lk, {flags:#x})"),
                host(h, unit),
                o,
            );
            unlink_both(&mut x, "lk");
            // unlinkat on a name that would otherwise go: "uf" / "ud".
            for (name, dir) in [("uf", false), ("ud", true)] {
                make_both(&mut x, name, dir);
                // SAFETY: valid C string.
                let h = unsafe {
                    libc::syscall(libc::SYS_unlinkat, libc::AT_FDCWD, c(name).as_ptr(), flags)
                };
                let o = ours(
                    || x.o().unlinkat(libc::AT_FDCWD, name, flags),
                    |_| "ok".into(),
                );
                x.check(|| format!("unlinkat({name}, {flags:#x})"), host(h, unit), o);
                unlink_both(&mut x, name);
            }
        }
    }
    // renameat2 flags: every bit, the invalid pairs, and RENAME_WHITEOUT.
    let mut rflags: Vec<u32> = (0..32).map(|b| 1u32 << b).collect();
    rflags.extend([
        u32::MAX,
        libc::RENAME_EXCHANGE | libc::RENAME_NOREPLACE,
        libc::RENAME_EXCHANGE | libc::RENAME_WHITEOUT,
        libc::RENAME_NOREPLACE | libc::RENAME_WHITEOUT,
    ]);
    for &flags in &rflags {
        make_both(&mut x, "ra", false);
        make_both(&mut x, "rb", false);
        // SAFETY: valid C strings.
        let h = unsafe {
            libc::syscall(
                libc::SYS_renameat2,
                libc::AT_FDCWD,
                c("ra").as_ptr(),
                libc::AT_FDCWD,
                c("rb").as_ptr(),
                flags,
            )
        };
        let o = ours(
            || {
                x.o()
                    .renameat2(libc::AT_FDCWD, "ra", libc::AT_FDCWD, "rb", flags)
            },
            |_| "ok".into(),
        );
        x.check(
            || format!("renameat2(ra, rb, {flags:#x})"),
            host(h, unit),
            o,
        );
        unlink_both(&mut x, "ra");
        unlink_both(&mut x, "rb");
    }
    // pipe2, eventfd, epoll_create1 with every flag bit.
    let mut flags = vec![-1, 0x7fff_ffff];
    bits(&mut flags);
    for &fl in &flags {
        let mut hp = [0i32; 2];
        // SAFETY: valid array.
        let h = unsafe { libc::syscall(libc::SYS_pipe2, hp.as_mut_ptr(), fl) };
        if h >= 0 {
            // SAFETY: our own descriptors.
            unsafe { libc::close(hp[0]) };
            // SAFETY: as above.
            unsafe { libc::close(hp[1]) };
        }
        let mut op = [0i32; 2];
        let o = ours(|| x.o().pipe2(&mut op, fl), |_| "ok".to_string());
        if o.is_ok() {
            let _ = x.o().close(op[0]);
            let _ = x.o().close(op[1]);
        }
        // Packet-mode pipes (O_DIRECT) are not provided (README): EINVAL, as before
        // Linux 3.4.
        if fl != libc::O_DIRECT {
            x.check(|| format!("pipe2({fl:#x})"), host(h, unit), o);
        }
        for init in [0u32, u32::MAX] {
            // SAFETY: plain syscall.
            let h = unsafe { libc::syscall(libc::SYS_eventfd2, init, fl) };
            if h >= 0 {
                // SAFETY: our own descriptor.
                unsafe { libc::close(h as i32) };
            }
            let o = ours(
                || x.o().eventfd(init, fl),
                |fd| {
                    let _ = x.o().close(fd);
                    "fd".into()
                },
            );
            x.check(
                || format!("eventfd({init}, {fl:#x})"),
                host(h, |_| "fd".into()),
                o,
            );
        }
        // SAFETY: plain syscall.
        let h = unsafe { libc::syscall(libc::SYS_epoll_create1, fl) };
        if h >= 0 {
            // SAFETY: our own descriptor.
            unsafe { libc::close(h as i32) };
        }
        let o = ours(
            || x.o().epoll_create1(fl),
            |fd| {
                let _ = x.o().close(fd);
                "fd".into()
            },
        );
        x.check(
            || format!("epoll_create1({fl:#x})"),
            host(h, |_| "fd".into()),
            o,
        );
    }
    x.finish("unknown_flags_and_modes");
}

fn h_open(h: c_long) -> Res {
    if h >= 0 {
        // SAFETY: our own descriptor.
        unsafe { libc::close(h as i32) };
    }
    host(h, |_| "fd".into())
}

/// Removes `name` (file or directory) on both sides if it exists.
fn unlink_both(x: &mut X, name: &str) {
    let c = cs(name.as_bytes());
    for flags in [0, libc::AT_REMOVEDIR] {
        // SAFETY: valid C string.
        unsafe { libc::unlinkat(libc::AT_FDCWD, c.as_ptr(), flags) };
        let _ = x.o().unlinkat(libc::AT_FDCWD, name, flags);
    }
}

/// Creates a file or directory `name` on both sides.
fn make_both(x: &mut X, name: &str, dir: bool) {
    let c = cs(name.as_bytes());
    if dir {
        // SAFETY: valid C string.
        unsafe { libc::mkdirat(libc::AT_FDCWD, c.as_ptr(), 0o755) };
        let _ = x.o().mkdirat(libc::AT_FDCWD, name, 0o755);
    } else {
        // SAFETY: valid C string.
        let fd = unsafe {
            libc::openat(
                libc::AT_FDCWD,
                c.as_ptr(),
                libc::O_CREAT | libc::O_WRONLY,
                0o644,
            )
        };
        if fd >= 0 {
            // SAFETY: our own descriptor.
            unsafe { libc::close(fd) };
        }
        if let Ok(fd) = x
            .o()
            .openat(libc::AT_FDCWD, name, libc::O_CREAT | libc::O_WRONLY, 0o644)
        {
            let _ = x.o().close(fd);
        }
    }
}

// ------------------------------------------------------------------ paths

fn path_cases() -> Vec<Vec<u8>> {
    let mut v: Vec<Vec<u8>> = [
        "",
        "/",
        "/../..",
        "/..//../.",
        "f/",
        "f/.",
        "f//",
        "f/..",
        "l/",
        "ld/",
        "d/",
        "d//x/",
        "dang/",
        "loop1",
        "loop1/",
        "loop1/x",
        ".",
        "..",
        "./",
        "d/../f",
        "nothing/..",
    ]
    .iter()
    .map(|s| s.as_bytes().to_vec())
    .collect();
    // Whole-path lengths around PATH_MAX (4096 with the NUL): "././.../f".
    for len in [4094usize, 4095, 4096, 4097, 8192] {
        let mut p = b"./".repeat((len - 1) / 2);
        if p.len() + 1 < len {
            p.push(b'/');
        }
        p.push(b'f');
        assert_eq!(p.len(), len);
        v.push(p);
    }
    // Component lengths around NAME_MAX (255).
    for len in [255usize, 256, 4095] {
        v.push(vec![b'n'; len]);
        let mut p = b"d/".to_vec();
        p.extend(vec![b'n'; len]);
        v.push(p);
    }
    v
}

/// Every path-taking call with odd paths: empty, absolute climbs, trailing slashes on
/// non-directories, PATH_MAX and NAME_MAX boundaries, symlink loops.
#[test]
fn odd_paths() {
    let mut x = X::new();
    let paths = path_cases();
    let c = |p: &[u8]| cs(p);
    // Absolute paths resolve outside the base on the host: compare the file type only.
    let strip = |p: &[u8], r: Res| {
        if p.first() == Some(&b'/') || p == b".." {
            r.map(|s| file_type(&s))
        } else {
            r
        }
    };
    for p in &paths {
        let show = || {
            String::from_utf8_lossy(&p[..p.len().min(40)]).into_owned()
                + &format!("..({})", p.len())
        };
        for flags in [0, libc::AT_SYMLINK_NOFOLLOW] {
            let h = strip(p, host_fstatat(libc::AT_FDCWD, p, flags));
            let o = strip(
                p,
                ours(
                    || x.o().newfstatat(libc::AT_FDCWD, p, flags),
                    |s| our_stat(&s),
                ),
            );
            x.check(|| format!("newfstatat({}, {flags:#x})", show()), h, o);
        }
        // Read-only calls first.
        // SAFETY: valid C strings and buffers.
        let h = unsafe {
            libc::syscall(
                libc::SYS_faccessat2,
                libc::AT_FDCWD,
                c(p).as_ptr(),
                libc::R_OK,
                0,
            )
        };
        let o = ours(
            || x.o().faccessat(libc::AT_FDCWD, p, libc::R_OK, 0),
            |_| "ok".into(),
        );
        x.check(|| format!("faccessat({})", show()), host(h, unit), o);
        let mut hb = [0u8; 64];
        let mut ob = [0u8; 64];
        // SAFETY: valid C strings and buffers, plain integer arguments.
        let h = unsafe {
            libc::syscall(
                libc::SYS_readlinkat,
                libc::AT_FDCWD,
                c(p).as_ptr(),
                hb.as_mut_ptr(),
                64,
            )
        };
        let h = host(h, |k| format!("{:?}", &hb[..k as usize]));
        let o = ours_read(&mut ob, |b| x.o().readlinkat(libc::AT_FDCWD, p, b));
        x.check(|| format!("readlinkat({})", show()), h, o);
        for flags in [
            libc::O_RDONLY,
            libc::O_PATH,
            libc::O_RDONLY | libc::O_DIRECTORY,
            libc::O_WRONLY | libc::O_CREAT,
            libc::O_RDONLY | libc::O_NOFOLLOW,
        ] {
            // SAFETY: valid C strings and buffers, plain integer arguments.
            let h = unsafe {
                libc::syscall(
                    libc::SYS_openat,
                    libc::AT_FDCWD,
                    c(p).as_ptr(),
                    flags,
                    0o644,
                )
            };
            let h = h_open(h);
            let o = ours(
                || x.o().openat(libc::AT_FDCWD, p, flags, 0o644),
                |fd| {
                    let _ = x.o().close(fd);
                    "fd".into()
                },
            );
            x.check(|| format!("openat({}, {flags:#x})", show()), h, o);
        }
        // SAFETY: valid C strings and buffers, plain integer arguments.
        let h = unsafe { libc::syscall(libc::SYS_chdir, c(p).as_ptr()) };
        let o = ours(|| x.o().chdir(p), |_| "ok".into());
        x.check(|| format!("chdir({})", show()), host(h, unit), o);
        // SAFETY: valid C strings and buffers, plain integer arguments.
        assert_eq!(unsafe { libc::fchdir(x.b.host_base().0) }, 0);
        x.o().chdir("/base").unwrap();
        // SAFETY: valid C strings and buffers, plain integer arguments.
        let h = unsafe { libc::syscall(libc::SYS_truncate, c(p).as_ptr(), 11i64) };
        let o = ours(|| x.o().truncate(p, 11), |_| "ok".into());
        x.check(|| format!("truncate({})", show()), host(h, unit), o);
        // SAFETY: valid C strings and buffers, plain integer arguments.
        let h = unsafe { libc::syscall(libc::SYS_fchmodat, libc::AT_FDCWD, c(p).as_ptr(), 0o755) };
        let o = ours(
            || x.o().fchmodat(libc::AT_FDCWD, p, 0o755, 0),
            |_| "ok".into(),
        );
        let (h, o) = if p.first() == Some(&b'/') {
            (Ok(String::new()), Ok(String::new()))
        } else {
            (host(h, unit), o)
        };
        x.check(|| format!("fchmodat({})", show()), h, o);
        let ts = Some([Timespec { sec: 9, nsec: 9 }; 2]);
        let h = host_utimensat(libc::AT_FDCWD, p, ts, 0);
        let o = ours(
            || x.o().utimensat(libc::AT_FDCWD, p, ts, 0),
            |_| "ok".into(),
        );
        let (h, o) = if p.first() == Some(&b'/') {
            (Ok(String::new()), Ok(String::new()))
        } else {
            (h, o)
        };
        x.check(|| format!("utimensat({})", show()), h, o);
        // Namespace changes: as the new name (then undone), and as the old name of a
        // rename (renaming back) and a link.
        // SAFETY: valid C strings and buffers, plain integer arguments.
        let h = unsafe { libc::syscall(libc::SYS_mkdirat, libc::AT_FDCWD, c(p).as_ptr(), 0o755) };
        let o = ours(|| x.o().mkdirat(libc::AT_FDCWD, p, 0o755), |_| "ok".into());
        x.check(|| format!("mkdirat({})", show()), host(h, unit), o);
        if h >= 0 {
            // SAFETY: valid C strings and buffers, plain integer arguments.
            let h = unsafe {
                libc::syscall(
                    libc::SYS_unlinkat,
                    libc::AT_FDCWD,
                    c(p).as_ptr(),
                    libc::AT_REMOVEDIR,
                )
            };
            let o = ours(
                || x.o().unlinkat(libc::AT_FDCWD, p, libc::AT_REMOVEDIR),
                |_| "ok".into(),
            );
            x.check(|| format!("rmdir({})", show()), host(h, unit), o);
        }
        // SAFETY: valid C strings and buffers, plain integer arguments.
        let h = unsafe {
            libc::syscall(
                libc::SYS_symlinkat,
                c(b"t").as_ptr(),
                libc::AT_FDCWD,
                c(p).as_ptr(),
            )
        };
        let o = ours(|| x.o().symlinkat("t", libc::AT_FDCWD, p), |_| "ok".into());
        x.check(|| format!("symlinkat(t, {})", show()), host(h, unit), o);
        if h >= 0 {
            // SAFETY: valid C strings and buffers, plain integer arguments.
            let h = unsafe { libc::syscall(libc::SYS_unlinkat, libc::AT_FDCWD, c(p).as_ptr(), 0) };
            let o = ours(|| x.o().unlinkat(libc::AT_FDCWD, p, 0), |_| "ok".into());
            x.check(|| format!("unlink({})", show()), host(h, unit), o);
        }
        // As a symlink target (any bytes but too long ones are fine).
        // SAFETY: valid C strings and buffers, plain integer arguments.
        let h = unsafe {
            libc::syscall(
                libc::SYS_symlinkat,
                c(p).as_ptr(),
                libc::AT_FDCWD,
                c(b"st").as_ptr(),
            )
        };
        let o = ours(|| x.o().symlinkat(p, libc::AT_FDCWD, "st"), |_| "ok".into());
        x.check(|| format!("symlinkat({}, st)", show()), host(h, unit), o);
        unlink_both(&mut x, "st");
        if p.first() == Some(&b'/') {
            // The host's "/" is another file system (EXDEV); ours is this one.
            continue;
        }
        // SAFETY: valid C strings and buffers, plain integer arguments.
        let h = unsafe {
            libc::syscall(
                libc::SYS_linkat,
                libc::AT_FDCWD,
                c(p).as_ptr(),
                libc::AT_FDCWD,
                c(b"lk").as_ptr(),
                0,
            )
        };
        let o = ours(
            || x.o().linkat(libc::AT_FDCWD, p, libc::AT_FDCWD, "lk", 0),
            |_| "ok".into(),
        );
        x.check(|| format!("linkat({}, lk)", show()), host(h, unit), o);
        unlink_both(&mut x, "lk");
        // SAFETY: valid C strings and buffers, plain integer arguments.
        let h = unsafe {
            libc::syscall(
                libc::SYS_linkat,
                libc::AT_FDCWD,
                c(b"f").as_ptr(),
                libc::AT_FDCWD,
                c(p).as_ptr(),
                0,
            )
        };
        let o = ours(
            || x.o().linkat(libc::AT_FDCWD, "f", libc::AT_FDCWD, p, 0),
            |_| "ok".into(),
        );
        x.check(|| format!("linkat(f, {})", show()), host(h, unit), o);
        if h >= 0 {
            // SAFETY: valid C strings and buffers, plain integer arguments.
            let h = unsafe { libc::syscall(libc::SYS_unlinkat, libc::AT_FDCWD, c(p).as_ptr(), 0) };
            let o = ours(|| x.o().unlinkat(libc::AT_FDCWD, p, 0), |_| "ok".into());
            x.check(|| format!("unlink({})", show()), host(h, unit), o);
        }
        for flags in [0u32, libc::RENAME_NOREPLACE, libc::RENAME_EXCHANGE] {
            make_both(&mut x, "rn", false);
            // SAFETY: valid C strings and buffers, plain integer arguments.
            let h = unsafe {
                libc::syscall(
                    libc::SYS_renameat2,
                    libc::AT_FDCWD,
                    c(b"rn").as_ptr(),
                    libc::AT_FDCWD,
                    c(p).as_ptr(),
                    flags,
                )
            };
            let o = ours(
                || {
                    x.o()
                        .renameat2(libc::AT_FDCWD, "rn", libc::AT_FDCWD, p, flags)
                },
                |_| "ok".into(),
            );
            x.check(
                || format!("renameat2(rn, {}, {flags})", show()),
                host(h, unit),
                o,
            );
            if h >= 0 {
                // SAFETY: valid C strings and buffers, plain integer arguments.
                let h = unsafe {
                    libc::syscall(
                        libc::SYS_renameat2,
                        libc::AT_FDCWD,
                        c(p).as_ptr(),
                        libc::AT_FDCWD,
                        c(b"rn").as_ptr(),
                        flags,
                    )
                };
                let o = ours(
                    || {
                        x.o()
                            .renameat2(libc::AT_FDCWD, p, libc::AT_FDCWD, "rn", flags)
                    },
                    |_| "ok".into(),
                );
                x.check(
                    || format!("renameat2({}, rn, {flags})", show()),
                    host(h, unit),
                    o,
                );
            }
            unlink_both(&mut x, "rn");
        }
        for flags in [0, libc::AT_REMOVEDIR] {
            // Only on names that do not exist or cannot be removed (the tree stays).
            if matches!(
                &p[..],
                b"f/"
                    | b"f/."
                    | b"f//"
                    | b"l/"
                    | b"ld/"
                    | b"d/"
                    | b"d//x/"
                    | b"dang/"
                    | b"loop1/"
                    | b"loop1/x"
                    | b""
                    | b"/"
                    | b"/../.."
                    | b"/..//../."
                    | b"."
                    | b".."
                    | b"./"
                    | b"f/.."
                    | b"nothing/.."
            ) || p.len() > 200
            {
                // SAFETY: valid C strings and buffers, plain integer arguments.
                let h = unsafe {
                    libc::syscall(libc::SYS_unlinkat, libc::AT_FDCWD, c(p).as_ptr(), flags)
                };
                let o = ours(|| x.o().unlinkat(libc::AT_FDCWD, p, flags), |_| "ok".into());
                x.check(
                    || format!("unlinkat({}, {flags:#x})", show()),
                    host(h, unit),
                    o,
                );
            }
        }
        stat_both(&mut x, "f", &format!("after {}", show()));
        stat_both(&mut x, "d", &format!("after {}", show()));
    }
    x.finish("odd_paths");
}

/// The file type of a normalized stat ("mode 40755 ...").
fn file_type(s: &str) -> String {
    let mode = s
        .split(' ')
        .nth(1)
        .and_then(|m| u32::from_str_radix(m, 8).ok());
    format!("{:o}", mode.unwrap_or(0) & libc::S_IFMT)
}

/// Symlink chains of 40 and 41 links (MAXSYMLINKS), deep directories, a cwd of 4096+
/// bytes (getcwd's ERANGE and ENAMETOOLONG), and getcwd with small buffers.
#[test]
fn deep_trees_and_link_chains() {
    let mut x = X::new();
    let c = |p: &str| cs(p.as_bytes());
    // s0 -> s1 -> ... -> s41 -> f.
    for i in (0..42).rev() {
        let target = if i == 41 {
            "f".to_string()
        } else {
            format!("s{}", i + 1)
        };
        let name = format!("s{i}");
        // SAFETY: valid C strings.
        let h = unsafe { libc::symlinkat(c(&target).as_ptr(), libc::AT_FDCWD, c(&name).as_ptr()) };
        let o = x.o().symlinkat(&target, libc::AT_FDCWD, &name);
        x.both_ok(&name, h as c_long, o);
    }
    for start in [0, 1, 2] {
        let p = format!("s{start}");
        stat_both(&mut x, &p, "(link chain)");
        // SAFETY: valid C string.
        let h = unsafe {
            libc::syscall(
                libc::SYS_openat,
                libc::AT_FDCWD,
                c(&p).as_ptr(),
                libc::O_RDONLY,
            )
        };
        let h = h_open(h);
        let o = ours(
            || x.o().openat(libc::AT_FDCWD, &p, libc::O_RDONLY, 0),
            |fd| {
                let _ = x.o().close(fd);
                "fd".into()
            },
        );
        x.check(|| format!("open({p})"), h, o);
        let h = host_fstatat(libc::AT_FDCWD, format!("{p}/").as_bytes(), 0);
        let o = ours(|| x.o().stat(format!("{p}/")), |s| our_stat(&s));
        x.check(|| format!("stat({p}/)"), h, o);
    }
    // A deep tree: 300 levels of 20-byte names (6300 bytes), entered step by step.
    let comp = "abcdefghijklmnopqrs";
    for i in 0..300 {
        // SAFETY: valid C string.
        let h =
            // SAFETY: valid C strings and buffers, plain integer arguments.
            unsafe { libc::syscall(libc::SYS_mkdirat, libc::AT_FDCWD, c(comp).as_ptr(), 0o755) };
        let o = ours(
            || x.o().mkdirat(libc::AT_FDCWD, comp, 0o755),
            |_| "ok".into(),
        );
        x.check(|| format!("mkdir level {i}"), host(h, unit), o);
        // SAFETY: valid C string.
        let h = unsafe { libc::syscall(libc::SYS_chdir, c(comp).as_ptr()) };
        let o = ours(|| x.o().chdir(comp), |_| "ok".into());
        x.check(|| format!("chdir level {i}"), host(h, unit), o);
    }
    // getcwd: the path is longer than a page on both sides (the host's base prefix is
    // longer than ours, so only the errno is compared).
    for len in [0usize, 1, 2, 4096, 8192] {
        let mut hb = vec![0u8; len];
        let mut ob = vec![0u8; len];
        // SAFETY: valid buffer.
        let h = unsafe { libc::syscall(libc::SYS_getcwd, hb.as_mut_ptr(), len) };
        let o = ours(|| x.o().getcwd(&mut ob), |_| "ok".into());
        x.check(|| format!("deep getcwd({len})"), host(h, unit), o);
    }
    // Climb back with one long relative path of "..": 300 * 3 = 900 bytes.
    let up = "../".repeat(300) + "f";
    let h = host_fstatat(libc::AT_FDCWD, up.as_bytes(), 0);
    let o = ours(|| x.o().stat(&up), |s| our_stat(&s));
    x.check(|| "stat(../ x300 f)".into(), h, o);
    let deeper = format!("{}/f", [comp; 250].join("/"));
    // SAFETY: valid C strings and buffers, plain integer arguments.
    assert_eq!(unsafe { libc::fchdir(x.b.host_base().0) }, 0);
    x.o().chdir("/base").unwrap();
    let h = host_fstatat(libc::AT_FDCWD, deeper.as_bytes(), 0);
    let o = ours(|| x.o().stat(&deeper), |s| our_stat(&s));
    x.check(|| "stat(5000-byte path)".into(), h, o);
    for len in [0usize, 1, 2, 3] {
        let mut hb = vec![0u8; len];
        let mut ob = vec![0u8; len];
        // SAFETY: valid buffer.
        let h = unsafe { libc::syscall(libc::SYS_getcwd, hb.as_mut_ptr(), len) };
        let o = ours(|| x.o().getcwd(&mut ob), |_| "ok".into());
        x.check(|| format!("getcwd({len})"), host(h, unit), o);
    }
    x.finish("deep_trees_and_link_chains");
}

// ------------------------------------------------------------------ timestamps

/// utimensat with every mix of UTIME_NOW/UTIME_OMIT/out-of-range nanoseconds and extreme
/// seconds; the stored times are compared too (explicit ones exactly).
#[test]
fn timestamps() {
    let mut x = X::new();
    let nsecs = [
        0,
        999_999_999,
        1_000_000_000,
        -1,
        i64::MIN,
        i64::MAX,
        libc::UTIME_NOW,
        libc::UTIME_OMIT,
        libc::UTIME_NOW + 1,
    ];
    let secs = [0, -1, i64::MIN, i64::MAX, 1 << 40];
    for &a in &nsecs {
        for &m in &nsecs {
            for &sec in &secs {
                let t = [Timespec { sec, nsec: a }, Timespec { sec: 7, nsec: m }];
                let h = host_utimensat(libc::AT_FDCWD, b"f", Some(t), 0);
                let o = ours(
                    || x.o().utimensat(libc::AT_FDCWD, "f", Some(t), 0),
                    |_| "ok".into(),
                );
                x.check(|| format!("utimensat(f, {t:?})"), h, o);
                times_both(&mut x, &t);
            }
        }
    }
    x.finish("timestamps");
}

/// Compares the stored atime/mtime of "f" where they were set explicitly.
fn times_both(x: &mut X, t: &[Timespec; 2]) {
    let c = cs(b"f");
    // SAFETY: zeroed plain struct.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: valid pointers.
    assert_eq!(unsafe { libc::stat(c.as_ptr(), &mut st) }, 0);
    let s = x.o().stat("f").unwrap();
    let explicit = |ts: &Timespec| (0..1_000_000_000).contains(&ts.nsec);
    if explicit(&t[0]) && explicit(&t[1]) {
        let h = format!(
            "{}.{} {}.{}",
            st.st_atime, st.st_atime_nsec, st.st_mtime, st.st_mtime_nsec
        );
        let o = format!(
            "{}.{} {}.{}",
            s.atime.sec, s.atime.nsec, s.mtime.sec, s.mtime.nsec
        );
        x.check(|| format!("times after {t:?}"), Ok(h), Ok(o));
    }
}

// ------------------------------------------------------------------ locks and polling

/// fcntl record locks with extreme starts, lengths, whences and types; poll/ppoll and
/// epoll_wait with odd counts and timeouts.
#[test]
fn locks_and_polling() {
    let mut x = X::new();
    let f = x.open_both("f", "f", libc::O_RDWR, 0);
    let types = [libc::F_RDLCK, libc::F_WRLCK, libc::F_UNLCK, 3, -1];
    let whences = [libc::SEEK_SET, libc::SEEK_CUR, libc::SEEK_END, 3, -1];
    let starts = [i64::MIN, -12, -1, 0, 1, i64::MAX - 1, i64::MAX];
    let lens = [i64::MIN, -2, -1, 0, 1, i64::MAX];
    let cmds = [
        libc::F_GETLK,
        libc::F_SETLK,
        libc::F_OFD_GETLK,
        libc::F_OFD_SETLK,
    ];
    // SAFETY: plain syscalls; the position makes SEEK_CUR differ from SEEK_SET.
    unsafe { libc::lseek(f.h, 5, libc::SEEK_SET) };
    x.o().lseek(f.o, 5, libc::SEEK_SET).unwrap();
    for cmd in cmds {
        for ty in types {
            for wh in whences {
                for &start in &starts {
                    for &len in &lens {
                        let mut hl = libc::flock {
                            l_type: ty as i16,
                            l_whence: wh as i16,
                            l_start: start,
                            l_len: len,
                            l_pid: 0,
                        };
                        let mut ol = Flock {
                            l_type: ty as i16,
                            l_whence: wh as i16,
                            l_start: start,
                            l_len: len,
                            l_pid: 0,
                        };
                        // SAFETY: valid pointer.
                        let h = unsafe { libc::syscall(libc::SYS_fcntl, f.h, cmd, &mut hl) };
                        let h = host(h, |k| {
                            format!(
                                "{k} {} {} {} {}",
                                hl.l_type, hl.l_whence, hl.l_start, hl.l_len
                            )
                        });
                        let o = ours(
                            || x.o().fcntl(f.o, cmd, FcntlArg::Flock(&mut ol)),
                            |k| k.to_string(),
                        );
                        let o = o.map(|k| {
                            format!(
                                "{k} {} {} {} {}",
                                ol.l_type, ol.l_whence, ol.l_start, ol.l_len
                            )
                        });
                        x.check(
                            || {
                                format!(
                                    "fcntl({cmd}, type {ty} whence {wh} start {start} len {len})"
                                )
                            },
                            h,
                            o,
                        );
                    }
                }
            }
        }
    }
    // poll: negative and huge descriptors, more entries than the descriptor limit.
    let (_, limit) = host_limits();
    for n in [0usize, 3, limit as usize + 1] {
        let mut hp: Vec<libc::pollfd> = (0..n)
            .map(|i| libc::pollfd {
                fd: [-1, i32::MAX, 1 << 20][i % 3],
                events: -1,
                revents: 0,
            })
            .collect();
        let mut op = hp.clone();
        let ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: valid array.
        let h = unsafe {
            libc::syscall(
                libc::SYS_ppoll,
                hp.as_mut_ptr(),
                n,
                &ts,
                std::ptr::null::<u8>(),
                8,
            )
        };
        let h = host(h, |k| {
            format!("{k} {:?}", hp.iter().map(|p| p.revents).collect::<Vec<_>>())
        });
        let o = ours(|| x.o().poll(&mut op, 0), |k| k.to_string());
        let o = o.map(|k| format!("{k} {:?}", op.iter().map(|p| p.revents).collect::<Vec<_>>()));
        x.check(|| format!("poll({n} entries)"), h, o);
    }
    for (sec, nsec) in [
        (0i64, -1i64),
        (-1, 0),
        (0, 1_000_000_000),
        (i64::MIN, 0),
        (0, i64::MAX),
    ] {
        let ts = libc::timespec {
            tv_sec: sec,
            tv_nsec: nsec,
        };
        let mut hp: [libc::pollfd; 0] = [];
        // SAFETY: valid pointers.
        let h = unsafe {
            libc::syscall(
                libc::SYS_ppoll,
                hp.as_mut_ptr(),
                0,
                &ts,
                std::ptr::null::<u8>(),
                8,
            )
        };
        let o = ours(|| x.o().ppoll(&mut [], Some(&ts), None), |k| k.to_string());
        x.check(|| format!("ppoll(timeout {sec}.{nsec})"), host(h, num), o);
    }
    // SAFETY: plain syscall.
    let hep = unsafe { libc::epoll_create1(0) };
    x.host_fds.push(hep);
    let oep = x.o().epoll_create1(0).unwrap();
    for n in [0usize, 1] {
        let mut hev = vec![libc::epoll_event { events: 0, u64: 0 }; n];
        // SAFETY: valid buffer.
        let h = unsafe { libc::syscall(libc::SYS_epoll_wait, hep, hev.as_mut_ptr(), n, 0) };
        let mut oev = vec![EpollEvent::default(); n];
        let o = ours(|| x.o().epoll_wait(oep, &mut oev, 0), |k| k.to_string());
        x.check(|| format!("epoll_wait(maxevents {n})"), host(h, num), o);
    }
    // epoll_ctl: an epoll watching itself, unknown ops, a NULL event.
    let mut hev = libc::epoll_event {
        events: u32::MAX,
        u64: 0,
    };
    for op in [libc::EPOLL_CTL_ADD, 0, 4, -1] {
        // SAFETY: valid pointer.
        let h = unsafe { libc::syscall(libc::SYS_epoll_ctl, hep, op, hep, &mut hev) };
        let ev = EpollEvent::new(u32::MAX, 0);
        let o = ours(|| x.o().epoll_ctl(oep, op, oep, Some(&ev)), |_| "ok".into());
        x.check(|| format!("epoll_ctl(self, {op})"), host(h, unit), o);
        // SAFETY: a NULL event.
        let h = unsafe { libc::syscall(libc::SYS_epoll_ctl, hep, op, f.h, std::ptr::null::<u8>()) };
        let o = ours(|| x.o().epoll_ctl(oep, op, f.o, None), |_| "ok".into());
        x.check(|| format!("epoll_ctl(file, {op}, NULL)"), host(h, unit), o);
    }
    x.finish("locks_and_polling");
}

/// The same descriptor calls as an unprivileged user (uid 1000): permission errors must
/// come in Linux's order with the bad arguments.
#[test]
fn unprivileged_user() {
    let mut x = X::new();
    x.b.user(true);
    x.user = true;
    x.o().chdir("/base").unwrap();
    let mut fds: Vec<Fd> = BAD_FDS
        .iter()
        .map(|&(name, n)| Fd { name, h: n, o: n })
        .collect();
    fds.push(x.open_both("own file", "uf", libc::O_CREAT | libc::O_RDWR, 0o600));
    fds.push(x.open_both("root's file", "f", libc::O_RDONLY, 0));
    fds.push(x.open_both("root's dir", "d", libc::O_RDONLY, 0));
    fds.push(x.open_both("root's file O_PATH", "f", libc::O_PATH, 0));
    for fd in &fds {
        meta_calls(&mut x, *fd);
        at_calls(&mut x, *fd);
    }
    x.b.user(false);
    x.finish("unprivileged_user");
}
