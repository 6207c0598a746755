//! Differential tests against the host kernel, at the lock-manager level (the
//! `Process`-level ones come with the VFS wiring).
//!
//! Each actor is a real forked process with its own open file description of one tmpfs
//! file (`/dev/shm`): its POSIX locks are the process's, its OFD and flock locks the
//! description's. The same script runs against a [`LockManager`] with actor `k` as
//! `Process(k)` / `File(gen)`, and every result (return value, errno, `F_GETLK` answer)
//! must be identical. The child runs only async-signal-safe calls (`read`, `write`,
//! `fcntl`, `flock`, `open`, `close`, `_exit`), so forking from the threaded test harness
//! is sound.

use super::tests::UnblockOnPanic;
use super::*;
use rand::{Rng, SeedableRng};
use std::ffi::CString;
use std::time::Duration;

const OP_FCNTL: i32 = 1;
const OP_FLOCK: i32 = 2;
const OP_REOPEN: i32 = 3;

#[repr(C)]
#[derive(Copy, Clone)]
struct Cmd {
    op: i32,
    arg: i32,
    fl: libc::flock,
}

#[repr(C)]
#[derive(Copy, Clone)]
struct Reply {
    ret: i32,
    errno: i32,
    fl: libc::flock,
}

/// Reads or writes exactly `len` bytes (async-signal-safe).
fn xfer(fd: i32, buf: *mut u8, len: usize, write: bool) -> bool {
    let mut done = 0;
    while done < len {
        // SAFETY: buf..buf+len is a live object owned by the caller.
        let n = unsafe {
            if write {
                libc::write(fd, buf.add(done) as *const libc::c_void, len - done)
            } else {
                libc::read(fd, buf.add(done) as *mut libc::c_void, len - done)
            }
        };
        if n <= 0 {
            return false;
        }
        done += n as usize;
    }
    true
}

struct Actor {
    pid: i32,
    cmd_w: i32,
    rep_r: i32,
}

/// The child's loop: no allocation, only async-signal-safe calls.
fn child(path: &CString, cmd_r: i32, rep_w: i32) -> ! {
    // SAFETY: path is a valid C string; the calls below only touch our own locals.
    unsafe {
        let mut fd = libc::open(path.as_ptr(), libc::O_RDWR);
        loop {
            let mut c: Cmd = std::mem::zeroed();
            if !xfer(
                cmd_r,
                &mut c as *mut Cmd as *mut u8,
                std::mem::size_of::<Cmd>(),
                false,
            ) {
                libc::_exit(0);
            }
            let mut r = Reply {
                ret: 0,
                errno: 0,
                fl: c.fl,
            };
            match c.op {
                OP_FCNTL => r.ret = libc::fcntl(fd, c.arg, &mut r.fl as *mut libc::flock),
                OP_FLOCK => r.ret = libc::flock(fd, c.arg),
                OP_REOPEN => {
                    libc::close(fd);
                    fd = libc::open(path.as_ptr(), libc::O_RDWR);
                    r.ret = if fd >= 0 { 0 } else { -1 };
                }
                _ => libc::_exit(0),
            }
            if r.ret < 0 {
                r.errno = *libc::__errno_location();
            }
            xfer(
                rep_w,
                &mut r as *mut Reply as *mut u8,
                std::mem::size_of::<Reply>(),
                true,
            );
        }
    }
}

impl Actor {
    fn spawn(path: &CString) -> Actor {
        let mut a = [0i32; 2];
        let mut b = [0i32; 2];
        // SAFETY: pipe writes two fds into the arrays; fork's child only runs `child`.
        unsafe {
            assert_eq!(libc::pipe(a.as_mut_ptr()), 0);
            assert_eq!(libc::pipe(b.as_mut_ptr()), 0);
            let pid = libc::fork();
            assert!(pid >= 0);
            if pid == 0 {
                child(path, a[0], b[1]);
            }
            libc::close(a[0]);
            libc::close(b[1]);
            Actor {
                pid,
                cmd_w: a[1],
                rep_r: b[0],
            }
        }
    }
    fn send(&self, mut c: Cmd) {
        assert!(xfer(
            self.cmd_w,
            &mut c as *mut Cmd as *mut u8,
            std::mem::size_of::<Cmd>(),
            true
        ));
    }
    fn recv(&self) -> Reply {
        // SAFETY: Reply is plain old data; all-zero is a valid value.
        let mut r: Reply = unsafe { std::mem::zeroed() };
        assert!(xfer(
            self.rep_r,
            &mut r as *mut Reply as *mut u8,
            std::mem::size_of::<Reply>(),
            false
        ));
        r
    }
    fn call(&self, c: Cmd) -> Reply {
        self.send(c);
        self.recv()
    }
}

impl Drop for Actor {
    fn drop(&mut self) {
        // Kill rather than ask: after a failed assertion the child may be asleep in
        // F_SETLKW, and other forked children hold copies of our pipe ends.
        // SAFETY: our own child, by pid; then close our pipe ends and reap it.
        unsafe {
            libc::kill(self.pid, libc::SIGKILL);
            libc::close(self.cmd_w);
            libc::close(self.rep_r);
            libc::waitpid(self.pid, std::ptr::null_mut(), 0);
        }
    }
}

fn to_abi(fl: &libc::flock) -> Flock {
    Flock {
        l_type: fl.l_type,
        l_whence: fl.l_whence,
        l_start: fl.l_start,
        l_len: fl.l_len,
        l_pid: fl.l_pid,
    }
}

fn from_abi(fl: &Flock) -> libc::flock {
    // SAFETY: libc::flock is plain old data; all-zero is a valid value.
    let mut out: libc::flock = unsafe { std::mem::zeroed() };
    out.l_type = fl.l_type;
    out.l_whence = fl.l_whence;
    out.l_start = fl.l_start;
    out.l_len = fl.l_len;
    out.l_pid = fl.l_pid;
    out
}

/// Host and model, side by side.
struct Pair {
    actors: Vec<Actor>,
    gens: Vec<u64>,
    m: LockManager,
    ctx: FileLockContext,
    path: CString,
}

impl Pair {
    fn new(n: usize, tag: &str) -> Pair {
        let dir = if std::path::Path::new("/dev/shm").is_dir() {
            std::path::PathBuf::from("/dev/shm")
        } else {
            std::env::temp_dir()
        };
        let p = dir.join(format!("scalevfs-locks-{}-{tag}", std::process::id()));
        std::fs::write(&p, b"").unwrap();
        let path = CString::new(p.to_str().unwrap()).unwrap();
        let actors = (0..n).map(|_| Actor::spawn(&path)).collect();
        let m = LockManager::new(Locking::Scalable);
        let md = std::fs::metadata(&p).unwrap();
        use std::os::unix::fs::MetadataExt;
        // Same (dev, ino) as the host file, so /proc/locks lines compare verbatim.
        let ctx = m.new_context(md.dev(), md.ino());
        Pair {
            actors,
            gens: (0..n as u64).collect(),
            m,
            ctx,
            path,
        }
    }

    fn file(&self, k: usize) -> FcntlFile {
        FcntlFile {
            pos: 0,
            size: 0,
            readable: true,
            writable: true,
            file_id: self.gens[k],
            process_id: k as u64,
            pid: self.actors[k].pid,
        }
    }

    fn model_fcntl(&self, k: usize, cmd: i32, fl: &Flock) -> (Result<(), Errno>, Flock) {
        let mut fl = *fl;
        let r = self.m.fcntl(&self.ctx, cmd, &mut fl, &self.file(k), None);
        (r, fl)
    }

    /// Runs a non-blocking fcntl on both sides and compares.
    fn fcntl(&self, k: usize, cmd: i32, fl: Flock) -> Result<(), Errno> {
        let h = self.actors[k].call(Cmd {
            op: OP_FCNTL,
            arg: cmd,
            fl: from_abi(&fl),
        });
        let (r, out) = self.model_fcntl(k, cmd, &fl);
        let host = if h.ret < 0 {
            Err(Errno(h.errno))
        } else {
            Ok(())
        };
        assert_eq!(r, host, "actor {k} fcntl {cmd} {fl:?}");
        if r.is_ok() && (cmd == libc::F_GETLK || cmd == libc::F_OFD_GETLK) {
            assert_eq!(out, to_abi(&h.fl), "actor {k} getlk {fl:?}");
        }
        r
    }

    fn flock(&self, k: usize, op: i32) -> Result<(), Errno> {
        let h = self.actors[k].call(Cmd {
            op: OP_FLOCK,
            arg: op,
            // SAFETY: plain old data.
            fl: unsafe { std::mem::zeroed() },
        });
        let r = self
            .m
            .flock(&self.ctx, self.gens[k], self.actors[k].pid, op, None);
        let host = if h.ret < 0 {
            Err(Errno(h.errno))
        } else {
            Ok(())
        };
        assert_eq!(r, host, "actor {k} flock {op}");
        r
    }

    /// Close and reopen: the process's POSIX locks and the old description's OFD and
    /// flock locks go.
    fn reopen(&mut self, k: usize) {
        let h = self.actors[k].call(Cmd {
            op: OP_REOPEN,
            arg: 0,
            // SAFETY: plain old data.
            fl: unsafe { std::mem::zeroed() },
        });
        assert_eq!(h.ret, 0);
        self.m.release_posix(&self.ctx, k as u64);
        self.m.release_file(&self.ctx, self.gens[k]);
        self.gens[k] += 1000;
    }
}

impl Pair {
    /// " MAJ:MIN:INO " as /proc/locks prints our file.
    fn proc_key(&self) -> String {
        let d = self.ctx.inner.dev;
        let major = ((d >> 8) & 0xfff) | ((d >> 32) & !0xfff);
        let minor = (d & 0xff) | ((d >> 12) & !0xff);
        format!(" {major:02x}:{minor:02x}:{} ", self.ctx.inner.ino)
    }

    /// Polls the host's /proc/locks until `n` requests wait on our file (10 s at most).
    fn wait_host_waiters(&self, n: usize) {
        let key = self.proc_key();
        let t0 = std::time::Instant::now();
        loop {
            let text = std::fs::read_to_string("/proc/locks").unwrap();
            let waiting = text
                .lines()
                .filter(|l| l.contains(&key) && l.contains("->"))
                .count();
            if waiting >= n {
                return;
            }
            assert!(
                t0.elapsed() < Duration::from_secs(10),
                "host requests never blocked"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// The host's /proc/locks lines for our file and ours, without the ordinals, sorted.
    ///
    /// The host side is other processes: one that was just told to act (or was woken) may
    /// not have finished in the kernel when we look, so a difference is re-read for up to
    /// 2 s before it counts (seen once on a loaded 2-core machine). A real difference stays.
    fn compare_listing(&self) {
        let key = self.proc_key();
        let strip = |l: &str| l.split_once(": ").map(|x| x.1.to_string()).unwrap();
        let mut ours: Vec<String> = self.m.proc_locks().lines().map(strip).collect();
        ours.sort();
        let t0 = std::time::Instant::now();
        loop {
            let mut host: Vec<String> = std::fs::read_to_string("/proc/locks")
                .unwrap()
                .lines()
                .filter(|l| l.contains(&key))
                .map(strip)
                .collect();
            host.sort();
            // Generous: a host waiter may take seconds to show on a loaded CI machine.
            if ours == host || t0.elapsed() > Duration::from_secs(30) {
                assert_eq!(ours, host);
                return;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

impl Drop for Pair {
    fn drop(&mut self) {
        self.actors.clear();
        let _ = std::fs::remove_file(self.path.to_str().unwrap());
    }
}

fn fl(ty: i32, whence: i32, start: i64, len: i64, pid: i32) -> Flock {
    Flock {
        l_type: ty as i16,
        l_whence: whence as i16,
        l_start: start,
        l_len: len,
        l_pid: pid,
    }
}

#[test]
fn host_diff_random_scripts() {
    let mut pair = Pair::new(3, "random");
    let mut rng = rand::rngs::StdRng::seed_from_u64(4);
    let types = [libc::F_RDLCK, libc::F_WRLCK, libc::F_UNLCK, 7];
    for i in 0..3000 {
        let k = rng.gen_range(0..3);
        // Mostly valid values, sometimes an invalid l_type or l_whence.
        let nt = if rng.gen_bool(0.05) { 4 } else { 3 };
        let ty = types[rng.gen_range(0..nt)];
        let nw = if rng.gen_bool(0.05) { 4 } else { 3 };
        let whence = [libc::SEEK_SET, libc::SEEK_CUR, libc::SEEK_END, 9][rng.gen_range(0..nw)];
        let start = rng.gen_range(-2..10);
        let len = rng.gen_range(-4..6);
        let pid = if rng.gen_bool(0.1) { 5 } else { 0 };
        match rng.gen_range(0..10) {
            0..=2 => drop(pair.fcntl(k, libc::F_SETLK, fl(ty, whence, start, len, pid))),
            3..=4 => drop(pair.fcntl(k, libc::F_OFD_SETLK, fl(ty, whence, start, len, pid))),
            5 => drop(pair.fcntl(k, libc::F_GETLK, fl(ty, whence, start, len, pid))),
            6 => drop(pair.fcntl(k, libc::F_OFD_GETLK, fl(ty, whence, start, len, pid))),
            7..=8 => {
                let op = [libc::LOCK_SH, libc::LOCK_EX, libc::LOCK_UN, 0][rng.gen_range(0..4)];
                let _ = pair.flock(k, op | libc::LOCK_NB);
            }
            _ => pair.reopen(k),
        }
        if i % 25 == 0 {
            pair.compare_listing();
        }
    }
}

#[test]
fn host_diff_overflow_ranges() {
    let pair = Pair::new(1, "overflow");
    let max = OFFSET_MAX;
    for (start, len) in [
        (max, 1),
        (max, 2),
        (1, max),
        (2, max),
        (max - 5, 0),
        (-1, 1),
        (5, -6),
    ] {
        let _ = pair.fcntl(
            0,
            libc::F_SETLK,
            fl(libc::F_WRLCK, libc::SEEK_SET, start, len, 0),
        );
        let _ = pair.fcntl(
            0,
            libc::F_GETLK,
            fl(libc::F_WRLCK, libc::SEEK_SET, start, len, 0),
        );
    }
}

/// EDEADLK cycles of 2 and 3 processes: actor i holds byte i and blocks on byte i+1;
/// the last request closing the cycle gets EDEADLK on both sides.
#[test]
fn host_diff_deadlock_cycles() {
    for n in [2usize, 3] {
        let pair = Pair::new(n, &format!("deadlock{n}"));
        for k in 0..n {
            pair.fcntl(
                k,
                libc::F_SETLK,
                fl(libc::F_WRLCK, libc::SEEK_SET, k as i64, 1, 0),
            )
            .unwrap();
        }
        let tokens: Vec<_> = (0..n).map(|_| CancelToken::new()).collect();
        std::thread::scope(|s| {
            let _unblock = UnblockOnPanic {
                m: &pair.m,
                ctxs: vec![&pair.ctx],
                tokens: tokens.iter().collect(),
            };
            let mut model_waits = Vec::new();
            for (k, t) in tokens.iter().enumerate().take(n - 1) {
                let want = fl(libc::F_WRLCK, libc::SEEK_SET, k as i64 + 1, 1, 0);
                pair.actors[k].send(Cmd {
                    op: OP_FCNTL,
                    arg: libc::F_SETLKW,
                    fl: from_abi(&want),
                });
                let pair = &pair;
                model_waits.push(s.spawn(move || {
                    let mut w = want;
                    pair.m
                        .fcntl(&pair.ctx, libc::F_SETLKW, &mut w, &pair.file(k), Some(t))
                }));
                // The host child must be asleep before the next one asks.
                pair.wait_host_waiters(k + 1);
            }
            let while_model_blocks = std::time::Instant::now();
            while pair.m.list().iter().filter(|l| l.waiting).count() < n - 1 {
                assert!(while_model_blocks.elapsed() < Duration::from_secs(10));
                std::thread::sleep(Duration::from_millis(1));
            }
            // Held and waiting ("->") lines agree.
            pair.compare_listing();
            let last = n - 1;
            let want = fl(libc::F_WRLCK, libc::SEEK_SET, 0, 1, 0);
            let h = pair.actors[last].call(Cmd {
                op: OP_FCNTL,
                arg: libc::F_SETLKW,
                fl: from_abi(&want),
            });
            assert_eq!((h.ret, h.errno), (-1, libc::EDEADLK));
            let mut w = want;
            let r = pair
                .m
                .fcntl(&pair.ctx, libc::F_SETLKW, &mut w, &pair.file(last), None);
            assert_eq!(r, Err(Errno::EDEADLK));
            // Unwind: the last actor unlocks; each blocked one is granted in turn.
            pair.fcntl(
                last,
                libc::F_SETLK,
                fl(libc::F_UNLCK, libc::SEEK_SET, 0, 0, 0),
            )
            .unwrap();
            for (k, mw) in model_waits.into_iter().enumerate().rev() {
                let h = pair.actors[k].recv();
                assert_eq!(h.ret, 0, "host actor {k} granted");
                assert_eq!(mw.join().unwrap(), Ok(()));
                pair.fcntl(k, libc::F_SETLK, fl(libc::F_UNLCK, libc::SEEK_SET, 0, 0, 0))
                    .unwrap();
            }
        });
    }
}

/// A blocking flock upgrade (which drops the old lock first) and a blocking POSIX
/// request woken by a downgrade: same waiting lines, same outcomes.
#[test]
fn host_diff_blocking_flock_and_downgrade() {
    let pair = Pair::new(3, "blocking");
    pair.flock(0, libc::LOCK_SH).unwrap();
    pair.flock(1, libc::LOCK_SH).unwrap();
    pair.fcntl(
        2,
        libc::F_SETLK,
        fl(libc::F_WRLCK, libc::SEEK_SET, 0, 10, 0),
    )
    .unwrap();
    let want = fl(libc::F_RDLCK, libc::SEEK_SET, 5, 1, 0);
    std::thread::scope(|s| {
        let _unblock = UnblockOnPanic {
            m: &pair.m,
            ctxs: vec![&pair.ctx],
            tokens: vec![],
        };
        pair.actors[1].send(Cmd {
            op: OP_FLOCK,
            arg: libc::LOCK_EX,
            // SAFETY: plain old data.
            fl: unsafe { std::mem::zeroed() },
        });
        pair.actors[0].send(Cmd {
            op: OP_FCNTL,
            arg: libc::F_SETLKW,
            fl: from_abi(&want),
        });
        let p = &pair;
        let up = s.spawn(move || {
            p.m.flock(&p.ctx, p.gens[1], p.actors[1].pid, libc::LOCK_EX, None)
        });
        let rd = s.spawn(move || {
            let mut w = want;
            p.m.fcntl(&p.ctx, libc::F_SETLKW, &mut w, &p.file(0), None)
        });
        let t0 = std::time::Instant::now();
        while pair.m.list().iter().filter(|l| l.waiting).count() < 2 {
            assert!(t0.elapsed() < Duration::from_secs(10));
            std::thread::sleep(Duration::from_millis(1));
        }
        pair.wait_host_waiters(2);
        pair.compare_listing();
        // Downgrade: the reader is granted, the flock upgrade still waits.
        pair.fcntl(
            2,
            libc::F_SETLK,
            fl(libc::F_RDLCK, libc::SEEK_SET, 0, 10, 0),
        )
        .unwrap();
        assert_eq!(pair.actors[0].recv().ret, 0);
        assert_eq!(rd.join().unwrap(), Ok(()));
        pair.compare_listing();
        // Unlocking actor 0's SH flock grants actor 1's EX.
        pair.flock(0, libc::LOCK_UN).unwrap();
        assert_eq!(pair.actors[1].recv().ret, 0);
        assert_eq!(up.join().unwrap(), Ok(()));
        pair.compare_listing();
    });
}

/// The waiter moved onto a new blocker that closes a cycle: Linux's retry and our
/// re-examination both answer EDEADLK to the mover.
#[test]
fn host_diff_retarget_deadlock() {
    let pair = Pair::new(3, "retarget");
    let w = |start| fl(libc::F_WRLCK, libc::SEEK_SET, start, 1, 0);
    pair.fcntl(1, libc::F_SETLK, fl(libc::F_RDLCK, libc::SEEK_SET, 0, 1, 0))
        .unwrap();
    pair.fcntl(2, libc::F_SETLK, fl(libc::F_RDLCK, libc::SEEK_SET, 0, 1, 0))
        .unwrap();
    pair.fcntl(0, libc::F_SETLK, w(5)).unwrap();
    std::thread::scope(|s| {
        let _unblock = UnblockOnPanic {
            m: &pair.m,
            ctxs: vec![&pair.ctx],
            tokens: vec![],
        };
        let p = &pair;
        let mut model = Vec::new();
        for (k, start) in [(0usize, 0i64), (2, 5)] {
            p.actors[k].send(Cmd {
                op: OP_FCNTL,
                arg: libc::F_SETLKW,
                fl: from_abi(&w(start)),
            });
            let before = p.m.list().iter().filter(|l| l.waiting).count();
            model.push(s.spawn(move || {
                let mut f = w(start);
                p.m.fcntl(&p.ctx, libc::F_SETLKW, &mut f, &p.file(k), None)
            }));
            let t0 = std::time::Instant::now();
            while p.m.list().iter().filter(|l| l.waiting).count() == before {
                assert!(t0.elapsed() < Duration::from_secs(10));
                std::thread::sleep(Duration::from_millis(1));
            }
            p.wait_host_waiters(before + 1);
        }
        pair.compare_listing();
        pair.fcntl(1, libc::F_SETLK, fl(libc::F_UNLCK, libc::SEEK_SET, 0, 0, 0))
            .unwrap();
        let h = pair.actors[0].recv();
        assert_eq!((h.ret, h.errno), (-1, libc::EDEADLK));
        let mut model = model.into_iter();
        assert_eq!(model.next().unwrap().join().unwrap(), Err(Errno::EDEADLK));
        pair.compare_listing();
        // Actor 0 gives up its lock; actor 2 is granted.
        pair.fcntl(0, libc::F_SETLK, fl(libc::F_UNLCK, libc::SEEK_SET, 0, 0, 0))
            .unwrap();
        assert_eq!(pair.actors[2].recv().ret, 0);
        assert_eq!(model.next().unwrap().join().unwrap(), Ok(()));
        pair.compare_listing();
    });
}
