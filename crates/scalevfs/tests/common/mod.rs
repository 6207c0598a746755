//! A small differential harness: the same operations on the host kernel (a fresh directory
//! on /dev/shm, through libc) and on scalevfs, with results compared call by call. Paths are
//! relative to each side's base directory. Descriptors are named by index in the order the
//! script opened them, so fd numbers themselves never need to agree. Also the small helpers
//! the other test files share ([`StopOnDrop`]).
#![allow(dead_code)]

use scalevfs::{Credentials, Errno, Process, Stat, Timespec, Vfs, VfsOptions};
use std::ffi::CString;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Once};

/// Sets the flag when dropped, also while a panic unwinds. Held by a test's own thread inside
/// `std::thread::scope` while helpers loop until the flag is set: if a check fails before the
/// test's own `store`, the helpers still stop, the scope joins them and the failure is
/// reported, instead of the scope waiting for them forever and hanging the test run.
pub struct StopOnDrop<'a>(pub &'a AtomicBool);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// A normalized result: what must agree between the host and scalevfs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Out {
    Unit,
    Int(i64),
    Bytes(Vec<u8>),
    /// mode, nlink, uid, gid, size (size only for regular files, symlinks and directories).
    Stat(u32, u64, u32, u32, i64),
    Names(Vec<Vec<u8>>),
}

pub type R = Result<Out, i32>;

pub fn norm_stat(s: &Stat) -> Out {
    Out::Stat(s.mode, s.nlink, s.uid, s.gid, s.size)
}

fn cs(p: &[u8]) -> CString {
    CString::new(p.to_vec()).unwrap()
}

fn host<T: PartialOrd + Default>(r: T, ok: impl FnOnce(T) -> Out) -> R {
    if r < T::default() {
        Err(Errno::last_os_error().raw())
    } else {
        Ok(ok(r))
    }
}

static UMASK: Once = Once::new();

/// One side of the comparison.
pub struct Host {
    base: i32,
    dir: std::path::PathBuf,
    fds: Vec<i32>,
}

impl Host {
    fn new() -> Host {
        UMASK.call_once(|| {
            // SAFETY: umask has no preconditions; every test uses the same value.
            unsafe { libc::umask(0o022) };
        });
        static N: AtomicUsize = AtomicUsize::new(0);
        let dir = std::path::PathBuf::from(format!(
            "/dev/shm/scalevfs-test-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir(&dir).unwrap();
        let c = cs(dir.as_os_str().as_encoded_bytes());
        // SAFETY: valid C string.
        unsafe { libc::chmod(c.as_ptr(), 0o777) };
        // SAFETY: valid C string.
        let base = unsafe { libc::open(c.as_ptr(), libc::O_PATH | libc::O_DIRECTORY) };
        assert!(base >= 0);
        Host {
            base,
            dir,
            fds: Vec::new(),
        }
    }
    fn fd(&self, i: usize) -> i32 {
        self.fds.get(i).copied().unwrap_or(-1)
    }
    /// The descriptor of index `i`, forgotten: once closed, its number may be reused by
    /// another test thread of this process, so a second close (or the final cleanup) must
    /// not close that number again. It becomes -1, which `close` answers with `EBADF`,
    /// exactly what the host says for a descriptor closed twice.
    fn take_fd(&mut self, i: usize) -> i32 {
        self.fds
            .get_mut(i)
            .map_or(-1, |fd| std::mem::replace(fd, -1))
    }
}

impl Drop for Host {
    fn drop(&mut self) {
        for &fd in self.fds.iter().filter(|&&fd| fd >= 0) {
            // SAFETY: closing our own descriptors (closed ones are -1, see `take_fd`).
            unsafe { libc::close(fd) };
        }
        // SAFETY: as above.
        unsafe { libc::close(self.base) };
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Switches the calling thread's filesystem uid/gid (per-thread on Linux; fsuid != 0 also
/// drops the file capabilities), and its supplementary groups with the raw system call.
fn host_become(uid: u32, gid: u32, groups: &[u32]) {
    // SAFETY: raw per-thread credential syscalls with valid arguments.
    unsafe {
        libc::syscall(libc::SYS_setgroups, groups.len(), groups.as_ptr());
        libc::setfsgid(gid);
        libc::setfsuid(uid);
    }
}

/// The scalevfs side: a root process and a user process over one tree.
pub struct Ours {
    pub vfs: Arc<Vfs>,
    pub root: Process,
    pub user: Process,
    base_root: i32,
    base_user: i32,
    fds: Vec<(bool, i32)>,
}

impl Ours {
    fn new(user: Credentials, options: VfsOptions) -> Ours {
        let vfs = Vfs::new(options);
        let root = Process::new(&vfs, Credentials::root());
        root.mkdir("/base", 0o777).unwrap();
        root.fchmodat(libc::AT_FDCWD, "/base", 0o777, 0).unwrap();
        let user = Process::new(&vfs, user);
        let base_root = root
            .open("/base", libc::O_PATH | libc::O_DIRECTORY, 0)
            .unwrap();
        let base_user = user
            .open("/base", libc::O_PATH | libc::O_DIRECTORY, 0)
            .unwrap();
        Ours {
            vfs,
            root,
            user,
            base_root,
            base_user,
            fds: Vec::new(),
        }
    }
}

fn ours<T>(r: Result<T, Errno>, ok: impl FnOnce(T) -> Out) -> R {
    r.map(ok).map_err(|e| e.raw())
}

/// Runs every call on both sides and asserts equal results.
pub struct Both {
    pub h: Host,
    pub o: Ours,
    as_user: bool,
    ucred: Credentials,
    pub log: Vec<String>,
}

impl Default for Both {
    fn default() -> Self {
        Self::new()
    }
}

impl Both {
    pub fn new() -> Both {
        Both::with_options(VfsOptions::default())
    }

    /// As [`Both::new`], with the scalevfs side built from `options`.
    pub fn with_options(options: VfsOptions) -> Both {
        let ucred = Credentials::user(1000, 1000).with_groups([2000]);
        Both {
            h: Host::new(),
            o: Ours::new(ucred.clone(), options),
            as_user: false,
            ucred,
            log: Vec::new(),
        }
    }

    /// Runs the following calls as uid 1000 / gid 1000 (groups 2000), or as root again.
    pub fn user(&mut self, on: bool) {
        self.as_user = on;
        if on {
            host_become(self.ucred.uid, self.ucred.gid, &self.ucred.groups);
        } else {
            host_become(0, 0, &[]);
        }
    }

    /// The host's base directory (an `O_PATH` descriptor) and its path, for calls the
    /// methods below do not wrap.
    pub fn host_base(&self) -> (i32, &std::path::Path) {
        (self.h.base, &self.h.dir)
    }

    /// The current scalevfs process and its base directory descriptor.
    pub fn p(&self) -> (&Process, i32) {
        if self.as_user {
            (&self.o.user, self.o.base_user)
        } else {
            (&self.o.root, self.o.base_root)
        }
    }

    fn cmp(&mut self, what: String, h: R, o: R) -> R {
        let name = |r: &R| match r {
            Err(e) => format!("Err({:?})", Errno(*e)),
            Ok(v) => format!("{v:?}"),
        };
        assert_eq!(
            name(&o),
            name(&h),
            "\n{what}: scalevfs (left) differs from the host (right)\nafter: {:#?}",
            self.log
        );
        self.log.push(format!("{what} = {}", name(&h)));
        h
    }

    fn ofd(&self, i: usize) -> i32 {
        self.o.fds.get(i).map(|x| x.1).unwrap_or(-1)
    }

    pub fn open(&mut self, path: &str, flags: i32, mode: u32) -> R {
        let c = cs(path.as_bytes());
        // SAFETY: valid C string and flags.
        let hr = unsafe { libc::openat(self.h.base, c.as_ptr(), flags, mode) };
        let n = self.h.fds.len() as i64;
        // The result is the slot index, not the fd number (those differ between the sides).
        let h = host(hr, |_| Out::Int(n));
        if hr >= 0 {
            self.h.fds.push(hr);
        }
        let (p, b) = self.p();
        let or = p.openat(b, path, flags, mode);
        let user = self.as_user;
        let m = self.o.fds.len() as i64;
        if let Ok(fd) = or {
            self.o.fds.push((user, fd));
        }
        let o = ours(or, |_| Out::Int(m));
        self.cmp(format!("open({path:?}, {flags:#o}, {mode:#o})"), h, o)
    }

    fn oproc(&self, i: usize) -> &Process {
        match self.o.fds.get(i) {
            Some((true, _)) => &self.o.user,
            _ => &self.o.root,
        }
    }

    pub fn close(&mut self, i: usize) -> R {
        // SAFETY: closing a descriptor we opened.
        let h = host(unsafe { libc::close(self.h.take_fd(i)) }, |_| Out::Unit);
        let o = ours(self.oproc(i).close(self.ofd(i)), |_| Out::Unit);
        self.cmp(format!("close(#{i})"), h, o)
    }

    pub fn read(&mut self, i: usize, n: usize) -> R {
        let mut b = vec![0u8; n];
        // SAFETY: buffer of n bytes.
        let hr = unsafe { libc::read(self.h.fd(i), b.as_mut_ptr().cast(), n) };
        let h = host(hr, |k| Out::Bytes(b[..k as usize].to_vec()));
        let mut b2 = vec![0u8; n];
        let o = ours(self.oproc(i).read(self.ofd(i), &mut b2), |k| {
            Out::Bytes(b2[..k].to_vec())
        });
        self.cmp(format!("read(#{i}, {n})"), h, o)
    }

    pub fn pread(&mut self, i: usize, n: usize, off: i64) -> R {
        let mut b = vec![0u8; n];
        // SAFETY: buffer of n bytes.
        let hr = unsafe { libc::pread(self.h.fd(i), b.as_mut_ptr().cast(), n, off) };
        let h = host(hr, |k| Out::Bytes(b[..k as usize].to_vec()));
        let mut b2 = vec![0u8; n];
        let o = ours(self.oproc(i).pread64(self.ofd(i), &mut b2, off), |k| {
            Out::Bytes(b2[..k].to_vec())
        });
        self.cmp(format!("pread(#{i}, {n}, {off})"), h, o)
    }

    pub fn write(&mut self, i: usize, data: &[u8]) -> R {
        // SAFETY: valid buffer.
        let hr = unsafe { libc::write(self.h.fd(i), data.as_ptr().cast(), data.len()) };
        let h = host(hr, |k| Out::Int(k as i64));
        let o = ours(self.oproc(i).write(self.ofd(i), data), |k| {
            Out::Int(k as i64)
        });
        self.cmp(format!("write(#{i}, {} bytes)", data.len()), h, o)
    }

    pub fn pwrite(&mut self, i: usize, data: &[u8], off: i64) -> R {
        // SAFETY: valid buffer.
        let hr = unsafe { libc::pwrite(self.h.fd(i), data.as_ptr().cast(), data.len(), off) };
        let h = host(hr, |k| Out::Int(k as i64));
        let o = ours(self.oproc(i).pwrite64(self.ofd(i), data, off), |k| {
            Out::Int(k as i64)
        });
        self.cmp(format!("pwrite(#{i}, {} bytes, {off})", data.len()), h, o)
    }

    pub fn lseek(&mut self, i: usize, off: i64, whence: i32) -> R {
        // SAFETY: plain syscall.
        let h = host(unsafe { libc::lseek(self.h.fd(i), off, whence) }, Out::Int);
        let o = ours(self.oproc(i).lseek(self.ofd(i), off, whence), Out::Int);
        self.cmp(format!("lseek(#{i}, {off}, {whence})"), h, o)
    }

    pub fn stat(&mut self, path: &str, flags: i32) -> R {
        let c = cs(path.as_bytes());
        // SAFETY: valid pointers.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: valid pointers.
        let hr = unsafe { libc::fstatat(self.h.base, c.as_ptr(), &mut st, flags) };
        let h = host(hr, |_| {
            Out::Stat(st.st_mode, st.st_nlink, st.st_uid, st.st_gid, st.st_size)
        });
        let (p, b) = self.p();
        let o = ours(p.newfstatat(b, path, flags), |s| norm_stat(&s));
        self.cmp(format!("stat({path:?}, {flags:#x})"), h, o)
    }

    pub fn fstat(&mut self, i: usize) -> R {
        // SAFETY: valid pointers.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: valid pointers.
        let hr = unsafe { libc::fstat(self.h.fd(i), &mut st) };
        let h = host(hr, |_| {
            Out::Stat(st.st_mode, st.st_nlink, st.st_uid, st.st_gid, st.st_size)
        });
        let o = ours(self.oproc(i).fstat(self.ofd(i)), |s| norm_stat(&s));
        self.cmp(format!("fstat(#{i})"), h, o)
    }

    pub fn mkdir(&mut self, path: &str, mode: u32) -> R {
        let c = cs(path.as_bytes());
        // SAFETY: valid C string.
        let h = host(
            unsafe { libc::mkdirat(self.h.base, c.as_ptr(), mode) },
            |_| Out::Unit,
        );
        let (p, b) = self.p();
        let o = ours(p.mkdirat(b, path, mode), |_| Out::Unit);
        self.cmp(format!("mkdir({path:?}, {mode:#o})"), h, o)
    }

    pub fn unlink(&mut self, path: &str, flags: i32) -> R {
        let c = cs(path.as_bytes());
        // SAFETY: valid C string.
        let h = host(
            unsafe { libc::unlinkat(self.h.base, c.as_ptr(), flags) },
            |_| Out::Unit,
        );
        let (p, b) = self.p();
        let o = ours(p.unlinkat(b, path, flags), |_| Out::Unit);
        self.cmp(format!("unlink({path:?}, {flags:#x})"), h, o)
    }

    pub fn rename(&mut self, a: &str, bb: &str, flags: u32) -> R {
        let (ca, cb) = (cs(a.as_bytes()), cs(bb.as_bytes()));
        // SAFETY: valid C strings.
        let hr = unsafe {
            libc::syscall(
                libc::SYS_renameat2,
                self.h.base,
                ca.as_ptr(),
                self.h.base,
                cb.as_ptr(),
                flags,
            )
        };
        let h = host(hr, |_| Out::Unit);
        let (p, b) = self.p();
        let o = ours(p.renameat2(b, a, b, bb, flags), |_| Out::Unit);
        self.cmp(format!("rename({a:?}, {bb:?}, {flags})"), h, o)
    }

    pub fn link(&mut self, a: &str, bb: &str, flags: i32) -> R {
        let (ca, cb) = (cs(a.as_bytes()), cs(bb.as_bytes()));
        // SAFETY: valid C strings.
        let hr = unsafe { libc::linkat(self.h.base, ca.as_ptr(), self.h.base, cb.as_ptr(), flags) };
        let h = host(hr, |_| Out::Unit);
        let (p, b) = self.p();
        let o = ours(p.linkat(b, a, b, bb, flags), |_| Out::Unit);
        self.cmp(format!("link({a:?}, {bb:?}, {flags:#x})"), h, o)
    }

    pub fn symlink(&mut self, target: &str, path: &str) -> R {
        let (ct, cp) = (cs(target.as_bytes()), cs(path.as_bytes()));
        // SAFETY: valid C strings.
        let h = host(
            unsafe { libc::symlinkat(ct.as_ptr(), self.h.base, cp.as_ptr()) },
            |_| Out::Unit,
        );
        let (p, b) = self.p();
        let o = ours(p.symlinkat(target, b, path), |_| Out::Unit);
        self.cmp(format!("symlink({target:?}, {path:?})"), h, o)
    }

    pub fn readlink(&mut self, path: &str, n: usize) -> R {
        let c = cs(path.as_bytes());
        let mut b = vec![0u8; n];
        // SAFETY: valid buffer.
        let hr = unsafe { libc::readlinkat(self.h.base, c.as_ptr(), b.as_mut_ptr().cast(), n) };
        let h = host(hr, |k| Out::Bytes(b[..k as usize].to_vec()));
        let mut b2 = vec![0u8; n];
        let (p, base) = self.p();
        let o = ours(p.readlinkat(base, path, &mut b2), |k| {
            Out::Bytes(b2[..k].to_vec())
        });
        self.cmp(format!("readlink({path:?}, {n})"), h, o)
    }

    pub fn chmod(&mut self, path: &str, mode: u32) -> R {
        let c = cs(path.as_bytes());
        // SAFETY: valid C string.
        let h = host(
            unsafe { libc::fchmodat(self.h.base, c.as_ptr(), mode, 0) },
            |_| Out::Unit,
        );
        let (p, b) = self.p();
        let o = ours(p.fchmodat(b, path, mode, 0), |_| Out::Unit);
        self.cmp(format!("chmod({path:?}, {mode:#o})"), h, o)
    }

    pub fn fchmod(&mut self, i: usize, mode: u32) -> R {
        // SAFETY: plain syscall.
        let h = host(unsafe { libc::fchmod(self.h.fd(i), mode) }, |_| Out::Unit);
        let o = ours(self.oproc(i).fchmod(self.ofd(i), mode), |_| Out::Unit);
        self.cmp(format!("fchmod(#{i}, {mode:#o})"), h, o)
    }

    pub fn chown(&mut self, path: &str, uid: u32, gid: u32, flags: i32) -> R {
        let c = cs(path.as_bytes());
        // SAFETY: valid C string.
        let h = host(
            unsafe { libc::fchownat(self.h.base, c.as_ptr(), uid, gid, flags) },
            |_| Out::Unit,
        );
        let (p, b) = self.p();
        let o = ours(p.fchownat(b, path, uid, gid, flags), |_| Out::Unit);
        self.cmp(format!("chown({path:?}, {uid}, {gid}, {flags:#x})"), h, o)
    }

    pub fn truncate(&mut self, path: &str, len: i64) -> R {
        // truncate(2) has no *at form: use the host's absolute path, ours from the base.
        let full = self.h.dir.join(path);
        let c = cs(full.as_os_str().as_encoded_bytes());
        // SAFETY: valid C string.
        let h = host(unsafe { libc::truncate(c.as_ptr(), len) }, |_| Out::Unit);
        let (p, _) = self.p();
        let o = ours(p.truncate(format!("/base/{path}"), len), |_| Out::Unit);
        self.cmp(format!("truncate({path:?}, {len})"), h, o)
    }

    pub fn ftruncate(&mut self, i: usize, len: i64) -> R {
        // SAFETY: plain syscall.
        let h = host(unsafe { libc::ftruncate(self.h.fd(i), len) }, |_| Out::Unit);
        let o = ours(self.oproc(i).ftruncate(self.ofd(i), len), |_| Out::Unit);
        self.cmp(format!("ftruncate(#{i}, {len})"), h, o)
    }

    pub fn fallocate(&mut self, i: usize, mode: i32, off: i64, len: i64) -> R {
        // SAFETY: plain syscall.
        let h = host(
            unsafe { libc::fallocate(self.h.fd(i), mode, off, len) },
            |_| Out::Unit,
        );
        let o = ours(self.oproc(i).fallocate(self.ofd(i), mode, off, len), |_| {
            Out::Unit
        });
        self.cmp(format!("fallocate(#{i}, {mode}, {off}, {len})"), h, o)
    }

    pub fn access(&mut self, path: &str, mode: i32, flags: i32) -> R {
        let c = cs(path.as_bytes());
        // SAFETY: valid C string. The raw syscall: glibc emulates AT_EACCESS itself.
        let hr =
            unsafe { libc::syscall(libc::SYS_faccessat2, self.h.base, c.as_ptr(), mode, flags) };
        let h = host(hr, |_| Out::Unit);
        let (p, b) = self.p();
        let o = ours(p.faccessat(b, path, mode, flags), |_| Out::Unit);
        self.cmp(format!("access({path:?}, {mode}, {flags:#x})"), h, o)
    }

    pub fn utimens(&mut self, path: &str, times: Option<[Timespec; 2]>, flags: i32) -> R {
        let c = cs(path.as_bytes());
        let ts = times.map(|t| {
            [
                libc::timespec {
                    tv_sec: t[0].sec,
                    tv_nsec: t[0].nsec,
                },
                libc::timespec {
                    tv_sec: t[1].sec,
                    tv_nsec: t[1].nsec,
                },
            ]
        });
        let tp = ts.as_ref().map_or(std::ptr::null(), |t| t.as_ptr());
        // SAFETY: valid pointers.
        let h = host(
            unsafe { libc::utimensat(self.h.base, c.as_ptr(), tp, flags) },
            |_| Out::Unit,
        );
        let (p, b) = self.p();
        let o = ours(p.utimensat(b, path, times, flags), |_| Out::Unit);
        self.cmp(format!("utimensat({path:?}, {times:?}, {flags:#x})"), h, o)
    }

    /// getdents64 until the end; names sorted (orders differ between implementations).
    pub fn getdents(&mut self, i: usize) -> R {
        let mut hn = Vec::new();
        let h = loop {
            let mut b = vec![0u8; 4096];
            // SAFETY: valid buffer.
            let n =
                unsafe { libc::syscall(libc::SYS_getdents64, self.h.fd(i), b.as_mut_ptr(), 4096) };
            if n < 0 {
                break Err(Errno::last_os_error().raw());
            }
            if n == 0 {
                hn.sort();
                break Ok(Out::Names(hn));
            }
            hn.extend(
                scalevfs_vfs::core::decode_dirents(&b[..n as usize])
                    .into_iter()
                    .map(|e| e.name),
            );
        };
        let mut on = Vec::new();
        let o = loop {
            let mut b = vec![0u8; 4096];
            match self.oproc(i).getdents64(self.ofd(i), &mut b) {
                Err(e) => break Err(e.raw()),
                Ok(0) => {
                    on.sort();
                    break Ok(Out::Names(on));
                }
                Ok(n) => on.extend(
                    scalevfs_vfs::core::decode_dirents(&b[..n])
                        .into_iter()
                        .map(|e| e.name),
                ),
            }
        };
        self.cmp(format!("getdents(#{i})"), h, o)
    }

    pub fn getfl(&mut self, i: usize) -> R {
        // SAFETY: plain syscall.
        let h = host(unsafe { libc::fcntl(self.h.fd(i), libc::F_GETFL) }, |v| {
            Out::Int(v as i64)
        });
        let o = ours(
            self.oproc(i)
                .fcntl(self.ofd(i), libc::F_GETFL, scalevfs::FcntlArg::None),
            |v| Out::Int(v as i64),
        );
        self.cmp(format!("F_GETFL(#{i})"), h, o)
    }

    pub fn setfl(&mut self, i: usize, v: i32) -> R {
        // SAFETY: plain syscall.
        let h = host(
            unsafe { libc::fcntl(self.h.fd(i), libc::F_SETFL, v) },
            |v| Out::Int(v as i64),
        );
        let o = ours(
            self.oproc(i).fcntl(
                self.ofd(i),
                libc::F_SETFL,
                scalevfs::FcntlArg::Int(v as i64),
            ),
            |v| Out::Int(v as i64),
        );
        self.cmp(format!("F_SETFL(#{i}, {v:#o})"), h, o)
    }

    pub fn fsync(&mut self, i: usize) -> R {
        // SAFETY: plain syscall.
        let h = host(unsafe { libc::fsync(self.h.fd(i)) }, |_| Out::Unit);
        let o = ours(self.oproc(i).fsync(self.ofd(i)), |_| Out::Unit);
        self.cmp(format!("fsync(#{i})"), h, o)
    }
}

impl Drop for Both {
    fn drop(&mut self) {
        if self.as_user {
            host_become(0, 0, &[]);
        }
    }
}

/// Runs `cases` random scripts of `strategy` from a fixed `seed` through `differ` (the
/// first difference from the host as text, or `None`), and panics with the first
/// difference, shrunk to a short script. The same seed gives the same scripts.
pub fn run_random_scripts<S: proptest::strategy::Strategy>(
    cases: u32,
    seed: u64,
    strategy: S,
    differ: impl Fn(&S::Value) -> Option<String>,
) {
    use proptest::test_runner::{Config, RngAlgorithm, TestCaseError, TestRng, TestRunner};
    let mut bytes = [0u8; 32];
    bytes[..8].copy_from_slice(&seed.to_le_bytes());
    let config = Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    };
    let rng = TestRng::from_seed(RngAlgorithm::ChaCha, &bytes);
    let result = TestRunner::new_with_rng(config, rng).run(&strategy, |script| {
        differ(&script).map_or(Ok(()), |d| Err(TestCaseError::fail(d)))
    });
    if let Err(e) = result {
        panic!("seed {seed}: {e}");
    }
}

/// A by-hand soak's `(cases, seed, max_len)`: the environment variables `{prefix}_CASES`,
/// `{prefix}_SEED` and `{prefix}_LEN`, or `cases`, seed 2 and `max_len`.
pub fn soak_settings(prefix: &str, cases: u32, max_len: usize) -> (u32, u64, usize) {
    let var = |name: &str, default: u64| {
        std::env::var(format!("{prefix}_{name}"))
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    };
    (
        var("CASES", cases.into()) as u32,
        var("SEED", 2),
        var("LEN", max_len as u64) as usize,
    )
}
