//! The catalogue: system calls ([`Op`]s) and the pairs of them ([`Case`]s) the checker
//! runs, each in two [`Form`]s.
//!
//! A case is a [`Scenario`] (where the two threads' objects lie), call A (thread 1, on its
//! objects) and call B (thread 2, on its objects). The table [`OPS`] lists every call once;
//! the cases are generated from three lists of op names (one per scenario, each op paired
//! with itself) and one list whose ops are paired with each other on different files.

use std::sync::atomic::{AtomicU64, Ordering};

use scalevfs::{EpollEvent, FcntlArg, Flock, SysResult, Timespec};

use crate::world::{needs, Env, Scenario};

/// Buffers a call reads into or writes from, allocated before the measured window, and
/// the values it returns beyond its result (compared between the two orders).
pub struct Scratch {
    /// Data buffer (4 KiB, small: valgrind runs a `rep stosb` memset byte by byte, so
    /// every byte is two trace lines); `buf[..n]` is compared.
    pub buf: Vec<u8>,
    /// How much of `buf` is output.
    pub n: usize,
    /// Extra output values (a stat's fields, new descriptors, a lock's holder).
    pub v: [i64; 4],
}

impl Default for Scratch {
    fn default() -> Self {
        Scratch {
            buf: vec![0; 4096],
            n: 0,
            v: [0; 4],
        }
    }
}

impl Scratch {
    /// The call's result and outputs as text, the same for two equivalent runs.
    pub fn render(&self, r: &SysResult<i64>) -> String {
        let data = &self.buf[..self.n];
        let digest = data.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
            (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
        });
        format!("{r:?} v={:?} data[{}]={digest:016x}", self.v, self.n)
    }
}

/// The signature of a call: thread's objects in, result out.
pub type CallFn = fn(&Env, &mut Scratch) -> SysResult<i64>;

/// One system call (with its arguments chosen on the thread's own objects).
pub struct Op {
    /// Short name, used in case names.
    pub name: &'static str,
    /// The call.
    pub run: CallFn,
    /// Objects it needs ([`needs`]).
    pub needs: u32,
    /// It allocates a descriptor: under the lowest-free-descriptor rule two such calls in
    /// one process do not commute (each order hands out the numbers the other way).
    pub fd_alloc: bool,
}

const AT: i32 = libc::AT_FDCWD;

fn stat_summary(s: &mut Scratch, mode: u32, size: i64, nlink: u64, uid: u32) -> i64 {
    s.v = [i64::from(mode), size, nlink as i64, i64::from(uid)];
    0
}

fn fl(t: i32) -> Flock {
    Flock {
        l_type: t as i16,
        l_whence: libc::SEEK_SET as i16,
        l_start: 0,
        l_len: 0,
        l_pid: 0,
    }
}

fn setlk(e: &Env, cmd: i32, t: i32) -> SysResult<i64> {
    let mut f = fl(t);
    e.p.fcntl(e.fd, cmd, FcntlArg::Flock(&mut f)).map(i64::from)
}

fn data(e: &Env, s: &mut Scratch) -> usize {
    s.buf[..512].fill(b'a' + e.t as u8);
    512
}

macro_rules! ops {
    ($( $name:literal, $needs:expr, $fd:expr, |$e:ident, $s:ident| $body:expr; )*) => {
        /// Every call the catalogue knows.
        pub static OPS: &[Op] = &[$(Op {
            name: $name,
            run: {
                #[allow(unused_variables)]
                fn call($e: &Env, $s: &mut Scratch) -> SysResult<i64> { $body }
                call
            },
            needs: $needs,
            fd_alloc: $fd,
        }),*];
    };
}

/// Counter shared by the fixture calls (see [`FIXTURE_OPS`]).
pub static FIXTURE_COUNTER: AtomicU64 = AtomicU64::new(0);

ops! {
    "open", 0, true, |e, s| e.p.open(&e.file, libc::O_RDONLY, 0).map(i64::from);
    "openat", needs::DIRFD, true, |e, s| e.p.openat(e.dfd, &e.file_name, libc::O_RDONLY, 0).map(i64::from);
    "creat-excl", 0, true, |e, s| e.p
        .open(&e.new, libc::O_CREAT | libc::O_EXCL | libc::O_RDWR, 0o644)
        .map(i64::from);
    "stat", 0, false, |e, s| e.p.stat(&e.file).map(|t| stat_summary(s, t.mode, t.size, t.nlink, t.uid));
    "fstatat", needs::DIRFD, false, |e, s| e.p
        .newfstatat(e.dfd, &e.file_name, 0)
        .map(|t| stat_summary(s, t.mode, t.size, t.nlink, t.uid));
    "lstat", 0, false, |e, s| e.p.lstat(&e.link).map(|t| stat_summary(s, t.mode, t.size, t.nlink, t.uid));
    "statx", 0, false, |e, s| e.p
        .statx(AT, &e.file, 0, libc::STATX_BASIC_STATS)
        .map(|t| stat_summary(s, t.mode, t.size as i64, u64::from(t.nlink), t.uid));
    "fstat", needs::FD, false, |e, s| e.p.fstat(e.fd).map(|t| stat_summary(s, t.mode, t.size, t.nlink, t.uid));
    "access", 0, false, |e, s| e.p.faccessat(AT, &e.file, libc::R_OK, 0).map(|()| 0);
    "read", needs::FD, false, |e, s| e.p.read(e.fd, &mut s.buf[..512]).map(|n| { s.n = n; n as i64 });
    "pread", needs::FD, false, |e, s| e.p.pread64(e.fd, &mut s.buf[..512], e.off + 512).map(|n| { s.n = n; n as i64 });
    "write", needs::FD, false, |e, s| { let n = data(e, s); e.p.write(e.fd, &s.buf[..n]).map(|n| n as i64) };
    "pwrite", needs::FD, false, |e, s| { let n = data(e, s); e.p.pwrite64(e.fd, &s.buf[..n], e.off + 1024).map(|n| n as i64) };
    "lseek", needs::FD, false, |e, s| e.p.lseek(e.fd, 100, libc::SEEK_CUR);
    "ftruncate", needs::FD, false, |e, s| e.p.ftruncate(e.fd, 100).map(|()| 0);
    "truncate", 0, false, |e, s| e.p.truncate(&e.file, 100).map(|()| 0);
    "fallocate", needs::FD, false, |e, s| e.p.fallocate(e.fd, 0, 0, 16384).map(|()| 0);
    "fsync", needs::FD, false, |e, s| e.p.fsync(e.fd).map(|()| 0);
    "close", needs::FD, false, |e, s| e.p.close(e.fd).map(|()| 0);
    "unlink", 0, false, |e, s| e.p.unlink(&e.file).map(|()| 0);
    "rename", 0, false, |e, s| e.p.rename(&e.file, &e.moved).map(|()| 0);
    "rename-xdir", 0, false, |e, s| e.p.rename(&e.file, &e.xmoved).map(|()| 0);
    "mkdir", 0, false, |e, s| e.p.mkdir(&e.mkd, 0o755).map(|()| 0);
    "rmdir", 0, false, |e, s| e.p.rmdir(&e.sub).map(|()| 0);
    "link", 0, false, |e, s| e.p.linkat(AT, &e.file, AT, &e.hard, 0).map(|()| 0);
    "symlink", 0, false, |e, s| e.p.symlinkat("target", AT, &e.sym).map(|()| 0);
    "readlink", 0, false, |e, s| e.p.readlinkat(AT, &e.link, &mut s.buf[..256]).map(|n| { s.n = n; n as i64 });
    "getdents", needs::DIRFD, false, |e, s| e.p.getdents64(e.dfd, &mut s.buf).map(|n| n as i64);
    "chmod", 0, false, |e, s| e.p.fchmodat(AT, &e.file, 0o640, 0).map(|()| 0);
    "chown", 0, false, |e, s| e.p.fchownat(AT, &e.file, 1000, 1000, 0).map(|()| 0);
    "utimens", 0, false, |e, s| {
        let ts = Timespec { sec: 1_000_000, nsec: 5 };
        e.p.utimensat(AT, &e.file, Some([ts, ts]), 0).map(|()| 0)
    };
    "setxattr", 0, false, |e, s| e.p.setxattr(&e.file, &e.xname, b"v", 0).map(|()| 0);
    "getxattr", 0, false, |e, s| e.p.getxattr(&e.file, b"user.x", &mut s.buf[..64]).map(|n| { s.n = n; n as i64 });
    "listxattr", 0, false, |e, s| e.p.listxattr(&e.file, &mut s.buf[..256]).map(|n| { s.n = n; n as i64 });
    "setlk-wr", needs::FD, false, |e, s| setlk(e, libc::F_SETLK, libc::F_WRLCK);
    "setlk-rd", needs::FD, false, |e, s| setlk(e, libc::F_SETLK, libc::F_RDLCK);
    "ofd-setlk-wr", needs::FD, false, |e, s| setlk(e, libc::F_OFD_SETLK, libc::F_WRLCK);
    "ofd-setlk-rd", needs::FD, false, |e, s| setlk(e, libc::F_OFD_SETLK, libc::F_RDLCK);
    "getlk", needs::FD, false, |e, s| {
        let mut f = fl(libc::F_RDLCK);
        let r = e.p.fcntl(e.fd, libc::F_GETLK, FcntlArg::Flock(&mut f));
        let holder = e.pids.iter().position(|&p| p == f.l_pid).map_or(-1, |i| i as i64);
        s.v = [i64::from(f.l_type), holder, f.l_start, f.l_len];
        r.map(i64::from)
    };
    "flock-ex", needs::FD, false, |e, s| e.p.flock(e.fd, libc::LOCK_EX | libc::LOCK_NB).map(|()| 0);
    "flock-sh", needs::FD, false, |e, s| e.p.flock(e.fd, libc::LOCK_SH | libc::LOCK_NB).map(|()| 0);
    "dup", needs::FD, true, |e, s| e.p.dup(e.fd).map(i64::from);
    "dup2", needs::FD, false, |e, s| e.p.dup2(e.fd, 60 + e.t as i32).map(i64::from);
    "pipe2", 0, true, |e, s| {
        let mut fds = [-1; 2];
        let r = e.p.pipe2(&mut fds, libc::O_CLOEXEC);
        s.v[..2].copy_from_slice(&[i64::from(fds[0]), i64::from(fds[1])]);
        r.map(|()| 0)
    };
    "pipe-write", needs::PIPE, false, |e, s| e.p.write(e.pipe[1], b"y").map(|n| n as i64);
    "pipe-read", needs::PIPE, false, |e, s| e.p.read(e.pipe[0], &mut s.buf[..16]).map(|n| { s.n = n; n as i64 });
    "eventfd", 0, true, |e, s| e.p.eventfd(0, libc::EFD_NONBLOCK).map(i64::from);
    "eventfd-write", needs::EVENTFD, false, |e, s| e.p.write(e.efd, &2u64.to_ne_bytes()).map(|n| n as i64);
    "eventfd-read", needs::EVENTFD, false, |e, s| e.p.read(e.efd, &mut s.buf[..8]).map(|n| { s.n = n; n as i64 });
    "epoll-create", 0, true, |e, s| e.p.epoll_create1(0).map(i64::from);
    "epoll-ctl", needs::EPOLL | needs::EVENTFD, false, |e, s| {
        let ev = EpollEvent::new(libc::EPOLLIN as u32, e.t as u64);
        e.p.epoll_ctl(e.ep, libc::EPOLL_CTL_ADD, e.efd, Some(&ev)).map(|()| 0)
    };
    "epoll-close", needs::EPOLL_ADDED, false, |e, s| e.p.close(e.ep).map(|()| 0);
    "epoll-wait", needs::EPOLL_ADDED, false, |e, s| {
        let mut evs = [EpollEvent::new(0, 0); 4];
        let r = e.p.epoll_wait(e.ep, &mut evs, 0);
        s.v[..2].copy_from_slice(&[i64::from(evs[0].events), evs[0].data as i64]);
        r.map(|n| n as i64)
    };
    "getcwd", 0, false, |e, s| e.p.getcwd(&mut s.buf[..256]).map(|n| { s.n = n; n as i64 });
    "chdir", 0, false, |e, s| e.p.chdir(&e.dir).map(|()| 0);
    "kernfs-read", needs::KERNFS, false, |e, s| e.p.pread64(e.kfd, &mut s.buf[..256], 0).map(|n| { s.n = n; n as i64 });
}

/// Calls of the fixture cases (only with `--fixtures`): both bump one shared counter, so
/// the checker must report a conflict in this file.
pub static FIXTURE_OPS: &[Op] = &[Op {
    name: "bump-shared-counter",
    run: bump,
    needs: 0,
    fd_alloc: false,
}];

fn bump(_: &Env, _: &mut Scratch) -> SysResult<i64> {
    FIXTURE_COUNTER.fetch_add(1, Ordering::Relaxed);
    Ok(0)
}

/// The op named `name` (in [`OPS`] or [`FIXTURE_OPS`]).
pub fn op(name: &str) -> &'static Op {
    OPS.iter()
        .chain(FIXTURE_OPS)
        .find(|o| o.name == name)
        .unwrap_or_else(|| panic!("no op {name}"))
}

/// One process per thread, or both threads in one process.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Form {
    /// Each thread has its own [`scalevfs::Process`] (its own descriptor table, cwd, lock
    /// owner).
    PerProcess,
    /// Both threads call into one [`scalevfs::Process`].
    Shared,
}

impl Form {
    /// The name used in reports and case ids.
    pub fn name(self) -> &'static str {
        match self {
            Form::PerProcess => "per-process",
            Form::Shared => "shared",
        }
    }

    /// Both forms.
    pub const ALL: [Form; 2] = [Form::PerProcess, Form::Shared];
}

/// A pair of calls on a scenario.
pub struct Case {
    /// `A/scenario` when both calls are the same, `A+B/scenario` otherwise.
    pub name: String,
    /// Where the objects lie.
    pub scenario: Scenario,
    /// Thread 1's call.
    pub a: &'static Op,
    /// Thread 2's call.
    pub b: &'static Op,
    /// A fixture (a deliberate conflict, for testing the checker itself).
    pub fixture: bool,
}

impl Case {
    /// What the two calls need.
    pub fn needs(&self) -> u32 {
        self.a.needs | self.b.needs
    }

    /// The id of the case in a form: `name@form`.
    pub fn id(&self, form: Form) -> String {
        format!("{}@{}", self.name, form.name())
    }

    /// Whether the catalogue declares the case non-commuting in `form` (without running
    /// it): both calls allocate descriptors in one table.
    pub fn declared_noncommuting(&self, form: Form) -> Option<&'static str> {
        (form == Form::Shared && self.a.fd_alloc && self.b.fd_alloc)
            .then_some("both calls take the lowest free descriptor of one table")
    }
}

/// Ops paired with themselves, each thread in its own directory.
const DIFF_DIRS: &[&str] = &[
    "open",
    "openat",
    "creat-excl",
    "stat",
    "fstatat",
    "lstat",
    "statx",
    "fstat",
    "access",
    "read",
    "pread",
    "write",
    "pwrite",
    "lseek",
    "ftruncate",
    "truncate",
    "fallocate",
    "fsync",
    "close",
    "unlink",
    "rename",
    "rename-xdir",
    "mkdir",
    "rmdir",
    "link",
    "symlink",
    "readlink",
    "getdents",
    "chmod",
    "chown",
    "utimens",
    "setxattr",
    "getxattr",
    "listxattr",
    "setlk-wr",
    "setlk-rd",
    "ofd-setlk-wr",
    "ofd-setlk-rd",
    "getlk",
    "flock-ex",
    "flock-sh",
    "dup",
    "dup2",
    "pipe2",
    "pipe-write",
    "pipe-read",
    "eventfd",
    "eventfd-write",
    "eventfd-read",
    "epoll-create",
    "epoll-ctl",
    "epoll-close",
    "epoll-wait",
    "getcwd",
    "chdir",
    "kernfs-read",
];

/// Ops paired with themselves, both threads' (different) files in one directory.
const SAME_DIR: &[&str] = &[
    "open",
    "openat",
    "creat-excl",
    "stat",
    "fstatat",
    "lstat",
    "statx",
    "access",
    "truncate",
    "unlink",
    "rename",
    "rename-xdir",
    "mkdir",
    "rmdir",
    "link",
    "symlink",
    "readlink",
    "getdents",
    "chmod",
    "chown",
    "utimens",
    "setxattr",
    "getxattr",
    "listxattr",
    "chdir",
];

/// Ops paired with themselves on one file (each thread its own descriptor and offset).
const SAME_FILE: &[&str] = &[
    "open",
    "openat",
    "stat",
    "fstatat",
    "lstat",
    "statx",
    "fstat",
    "access",
    "read",
    "pread",
    "write",
    "pwrite",
    "lseek",
    "fsync",
    "close",
    "readlink",
    "getxattr",
    "listxattr",
    "setlk-rd",
    "ofd-setlk-rd",
    "getlk",
    "flock-sh",
    "dup",
    "dup2",
    "kernfs-read",
];

/// Ops paired with each other (each pair once), each thread in its own directory.
const MIXED: &[&str] = &[
    "open",
    "creat-excl",
    "stat",
    "read",
    "write",
    "pwrite",
    "close",
    "unlink",
    "rename",
    "mkdir",
    "getdents",
    "chmod",
    "setlk-wr",
    "setxattr",
];

/// The fixture cases (both calls bump one shared counter).
pub fn fixtures() -> Vec<Case> {
    vec![Case {
        name: "fixture/shared-counter".into(),
        scenario: Scenario::DiffDirs,
        a: &FIXTURE_OPS[0],
        b: &FIXTURE_OPS[0],
        fixture: true,
    }]
}

/// Every case of the catalogue, in a fixed order.
pub fn catalogue() -> Vec<Case> {
    let mut cases = Vec::new();
    let same = |list: &[&str], sc: Scenario, cases: &mut Vec<Case>| {
        for &n in list {
            cases.push(Case {
                name: format!("{n}/{}", sc.name()),
                scenario: sc,
                a: op(n),
                b: op(n),
                fixture: false,
            });
        }
    };
    same(DIFF_DIRS, Scenario::DiffDirs, &mut cases);
    same(SAME_DIR, Scenario::SameDir, &mut cases);
    same(SAME_FILE, Scenario::SameFile, &mut cases);
    for (i, &a) in MIXED.iter().enumerate() {
        for &b in &MIXED[i + 1..] {
            cases.push(Case {
                name: format!("{a}+{b}/{}", Scenario::DiffDirs.name()),
                scenario: Scenario::DiffDirs,
                a: op(a),
                b: op(b),
                fixture: false,
            });
        }
    }
    cases
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn catalogue_is_large_and_names_are_unique() {
        let cases = catalogue();
        assert!(cases.len() >= 150, "{} cases", cases.len());
        let mut names: Vec<&str> = cases.iter().map(|c| c.name.as_str()).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), cases.len());
    }
}
