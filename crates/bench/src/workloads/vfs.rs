//! VFS workloads (the dlock-list and lockref/rename-lock series) through the system-call API, for the legacy and
//! scalable designs of scalevfs and for the host kernel (the same calls through libc on a
//! fresh directory under /dev/shm).
//!
//! * `dcache`: the lockref series' AIM7 "short" shape: every thread opens, reads and closes the same
//!   few files (hot dentries: lockref vs a locked count, path walk of a shared prefix).
//! * `dcache-lockref`: `dcache` (scalable only) with every dentry count in its `LockRef`:
//!   the ablation of per-CPU dentry counts (`CoreOptions::percpu_dentry_counts`).
//! * `dcache-distinct`: the same on a file per thread. The threads still share their
//!   process's descriptor table: lowest-free-fd allocation makes every open read the
//!   slots of the lower descriptors, which the other threads' opens and closes write
//!   (Linux takes `files->file_lock` there).
//! * `dcache-distinct-procs`: the same with a process per worker, as AIM7 forks its
//!   workers (scalevfs: `Process::fork`; host: the thread `unshare(CLONE_FILES)`s): nothing
//!   is shared, so it should scale linearly.
//! * `d_path`: getcwd from every thread while thread 0 renames an ancestor now and then
//!   (the rename lock: shared readers vs d_path taking it exclusively). The host side reads
//!   `/proc/self/fd/N` of a descriptor on the directory, which is the kernel's d_path.
//! * `inode-churn`: the dlock-list series' exit microbenchmark shape: each thread creates many files
//!   and removes them (inode create/evict: the superblock inode list).
//! * `stat-walk`: the dlock-list series' traversal: each thread `fstatat`s every entry of its own tree.
//! * `dir-create-same`: `inode-churn` with every thread's names in one shared directory
//!   (the directory's lock, name map, size and times are shared by every create/unlink).
//! * `dir-rename-same`: each thread renames its own files back and forth within one shared
//!   directory (rename of non-directories: no rename mutex or sequence; the directory is
//!   still shared).
//!
//! Except in `dcache-distinct-procs`, all threads of a run share one process (one fd
//! table), as threads do on the host.

use std::ffi::CString;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use scalevfs::{CoreOptions, Credentials, Process, Vfs, VfsOptions};

use crate::workloads::host_dir::{sys, HostDir};
use crate::{Design, Instance, Workload};

const ALL: &[Design] = &[Design::Legacy, Design::Scalable, Design::Host];
/// Operations per worker call.
const BATCH: u64 = 32;

/// This module's workloads, in the order the report lists them.
pub fn workloads() -> Vec<Box<dyn Workload>> {
    vec![
        Box::new(Dcache {
            distinct: false,
            procs: false,
            lockref_only: false,
        }),
        Box::new(Dcache {
            distinct: false,
            procs: false,
            lockref_only: true,
        }),
        Box::new(Dcache {
            distinct: true,
            procs: false,
            lockref_only: false,
        }),
        Box::new(Dcache {
            distinct: true,
            procs: true,
            lockref_only: false,
        }),
        Box::new(DPath),
        Box::new(InodeChurn {
            layout: ChurnLayout::OwnDirCreate,
        }),
        Box::new(InodeChurn {
            layout: ChurnLayout::SharedDirCreate,
        }),
        Box::new(InodeChurn {
            layout: ChurnLayout::SharedDirRename,
        }),
        Box::new(StatWalk),
    ]
}

/// One side: scalevfs (a `Vfs` and a process) or the host (a directory on /dev/shm).
enum Env {
    Ours { _vfs: Arc<Vfs>, p: Box<Process> },
    Host(HostDir),
}

impl Env {
    fn new(design: Design) -> Result<Env, String> {
        Env::with_core(design, CoreOptions::default())
    }

    /// [`Env::new`] with dcache tuning (ignored on the host).
    fn with_core(design: Design, core: CoreOptions) -> Result<Env, String> {
        match design.locking() {
            Some(locking) => {
                let vfs = Vfs::with_core_options(
                    VfsOptions {
                        locking,
                        ..VfsOptions::default()
                    },
                    core,
                );
                let p = Process::new(&vfs, Credentials::root());
                p.set_fd_limit(1 << 16).map_err(|e| e.to_string())?;
                p.mkdir("/bench", 0o755).map_err(|e| e.to_string())?;
                Ok(Env::Ours {
                    _vfs: vfs,
                    p: Box::new(p),
                })
            }
            None => Ok(Env::Host(HostDir::shm("vfs")?)),
        }
    }

    /// Gives the calling worker a descriptor table of its own, as a forked process has:
    /// on our side a forked `Process` to make its calls through (returned), on the host
    /// `unshare(CLONE_FILES)` for the calling thread (nothing returned: `self` serves).
    fn own_fd_table(&self) -> Result<Option<Env>, String> {
        match self {
            Env::Ours { p, .. } => Ok(Some(Env::Ours {
                _vfs: p.vfs().clone(),
                p: Box::new(p.fork()),
            })),
            Env::Host(_) => {
                // SAFETY: affects only the calling (worker) thread's fd table.
                if unsafe { libc::unshare(libc::CLONE_FILES) } != 0 {
                    return Err(format!(
                        "unshare(CLONE_FILES): {}",
                        std::io::Error::last_os_error()
                    ));
                }
                Ok(None)
            }
        }
    }

    /// The full path of `rel` on this side, NUL-terminated for libc.
    fn path(&self, rel: &str) -> CString {
        match self {
            Env::Ours { .. } => CString::new(format!("/bench/{rel}")).expect("no NUL"),
            Env::Host(dir) => dir.cpath(rel),
        }
    }

    fn mkdir(&self, rel: &str) -> Result<(), String> {
        let p = self.path(rel);
        match self {
            Env::Ours { p: proc_, .. } => proc_
                .mkdir(p.as_bytes(), 0o755)
                .map_err(|e| format!("{rel}: {e}")),
            Env::Host(_) => {
                // SAFETY: valid C string.
                if unsafe { libc::mkdir(p.as_ptr(), 0o755) } == 0 {
                    Ok(())
                } else {
                    Err(format!("{rel}: {}", std::io::Error::last_os_error()))
                }
            }
        }
    }

    fn write_file(&self, rel: &str, data: &[u8]) -> Result<(), String> {
        let fd = self.open(
            &self.path(rel),
            libc::O_CREAT | libc::O_WRONLY | libc::O_TRUNC,
        );
        if fd < 0 {
            return Err(format!("create {rel} failed"));
        }
        self.write(fd, data);
        self.close(fd);
        Ok(())
    }

    #[inline]
    fn open(&self, p: &CString, flags: i32) -> i32 {
        match self {
            Env::Ours { p: proc_, .. } => proc_.open(p.as_bytes(), flags, 0o644).unwrap_or(-1),
            Env::Host(_) => sys::open(p, flags),
        }
    }

    #[inline]
    fn read(&self, fd: i32, buf: &mut [u8]) -> isize {
        match self {
            Env::Ours { p, .. } => p.read(fd, buf).map_or(-1, |n| n as isize),
            // SAFETY: valid buffer.
            Env::Host(_) => unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) },
        }
    }

    fn write(&self, fd: i32, buf: &[u8]) -> isize {
        match self {
            Env::Ours { p, .. } => p.write(fd, buf).map_or(-1, |n| n as isize),
            // SAFETY: valid buffer.
            Env::Host(_) => unsafe { libc::write(fd, buf.as_ptr().cast(), buf.len()) },
        }
    }

    #[inline]
    fn close(&self, fd: i32) {
        match self {
            Env::Ours { p, .. } => {
                let _ = p.close(fd);
            }
            Env::Host(_) => sys::close(fd),
        }
    }

    #[inline]
    fn unlink(&self, p: &CString) -> bool {
        match self {
            Env::Ours { p: proc_, .. } => proc_.unlink(p.as_bytes()).is_ok(),
            // SAFETY: valid C string.
            Env::Host(_) => unsafe { libc::unlink(p.as_ptr()) == 0 },
        }
    }

    fn rename(&self, a: &CString, b: &CString) -> bool {
        match self {
            Env::Ours { p, .. } => p.rename(a.as_bytes(), b.as_bytes()).is_ok(),
            // SAFETY: valid C strings.
            Env::Host(_) => unsafe { libc::rename(a.as_ptr(), b.as_ptr()) == 0 },
        }
    }

    /// `fstatat(dirfd, name, 0)`; returns the size (keeps the result alive).
    #[inline]
    fn fstatat(&self, dirfd: i32, name: &CString) -> i64 {
        match self {
            Env::Ours { p, .. } => p
                .newfstatat(dirfd, name.as_bytes(), 0)
                .map_or(-1, |s| s.size),
            Env::Host(_) => {
                // SAFETY: zeroed stat is a valid out-buffer.
                let mut st: libc::stat = unsafe { std::mem::zeroed() };
                // SAFETY: valid pointers.
                if unsafe { libc::fstatat(dirfd, name.as_ptr(), &mut st, 0) } == 0 {
                    st.st_size
                } else {
                    -1
                }
            }
        }
    }
}

// ------------------------------------------------------------------- dcache

struct Dcache {
    distinct: bool,
    /// A process (descriptor table) per worker.
    procs: bool,
    /// Dentry counts stay in their `LockRef` (no per-CPU mode).
    lockref_only: bool,
}

/// Files in the shared set (AIM7 "short" reads a handful of files).
const SHARED_FILES: usize = 4;
/// The contents of every file the dcache workloads read.
const FILE_DATA: [u8; 4096] = [b'x'; 4096];

/// Thread `t`'s own file in the distinct variants.
fn distinct_file(t: usize) -> String {
    format!("a/b/c/t{t}/file")
}

struct DcacheInst {
    env: Env,
    /// Per thread: the paths it cycles through.
    paths: Vec<Vec<CString>>,
    /// A file per worker, which the worker creates.
    distinct: bool,
    procs: bool,
}

impl Workload for Dcache {
    fn name(&self) -> &'static str {
        match (self.distinct, self.procs) {
            (false, _) if self.lockref_only => "dcache-lockref",
            (false, _) => "dcache",
            (true, false) => "dcache-distinct",
            (true, true) => "dcache-distinct-procs",
        }
    }
    fn description(&self) -> &'static str {
        if self.lockref_only {
            "dcache with dentry counts in their LockRef only (no per-CPU counts)"
        } else if self.procs {
            "open, read 64 bytes, close a file of one's own below a 3-level path, a process per worker (disjoint)"
        } else if self.distinct {
            "open, read 64 bytes, close a file of one's own below a 3-level path (threads share the fd table)"
        } else {
            "open, read 64 bytes, close the same few files from every thread (AIM7 short; lockref)"
        }
    }
    fn designs(&self) -> &'static [Design] {
        if self.lockref_only {
            &[Design::Scalable]
        } else {
            ALL
        }
    }
    fn setup(&self, design: Design, threads: usize) -> Result<Box<dyn Instance>, String> {
        let core = CoreOptions {
            percpu_dentry_counts: !self.lockref_only,
            ..CoreOptions::default()
        };
        let env = Env::with_core(design, core)?;
        for d in ["a", "a/b", "a/b/c"] {
            env.mkdir(d)?;
        }
        let paths = if self.distinct {
            // Each worker creates its own directory and file, on its own thread (see
            // `DcacheInst::worker`).
            (0..threads)
                .map(|t| vec![env.path(&distinct_file(t))])
                .collect()
        } else {
            let mut set = Vec::new();
            for i in 0..SHARED_FILES {
                let rel = format!("a/b/c/file{i}");
                env.write_file(&rel, &FILE_DATA)?;
                set.push(env.path(&rel));
            }
            vec![set; threads]
        };
        Ok(Box::new(DcacheInst {
            env,
            paths,
            distinct: self.distinct,
            procs: self.procs,
        }))
    }
}

impl Instance for DcacheInst {
    fn worker(&self, thread: usize) -> Box<dyn FnMut() -> u64 + '_> {
        let paths = &self.paths[thread];
        let mut i = thread;
        let mut buf = [0u8; 64];
        let own = if self.procs {
            self.env
                .own_fd_table()
                .expect("a worker gets a descriptor table of its own")
        } else {
            None
        };
        if self.distinct {
            // Created here, on the worker's thread, as will-it-scale's and AIM7's workers
            // create their own files: the allocator then places this thread's dentry,
            // inode and page map apart from the other workers'. Created by the setup
            // thread they sit side by side, and the page-map lock that every read takes
            // shares a cache line between two workers' files (false sharing: perf showed
            // tmpfs's read at 4x its single-thread cost).
            let rel = distinct_file(thread);
            let env = own.as_ref().unwrap_or(&self.env);
            env.mkdir(rel.rsplit_once('/').expect("a/b/c/tN/file").0)
                .and_then(|()| env.write_file(&rel, &FILE_DATA))
                .expect("a worker creates its own file");
        }
        Box::new(move || {
            let env = own.as_ref().unwrap_or(&self.env);
            for _ in 0..BATCH {
                let fd = env.open(&paths[i % paths.len()], libc::O_RDONLY);
                debug_assert!(fd >= 0);
                std::hint::black_box(env.read(fd, &mut buf));
                env.close(fd);
                i += 1;
            }
            BATCH
        })
    }
}

// ------------------------------------------------------------------- d_path

struct DPath;

/// Thread 0 renames the top directory every this many getcwd calls.
const RENAME_EVERY: u64 = 256;

enum Reader {
    Ours(Box<Process>),
    Host { fd: i32, link: CString },
}

struct DPathInst {
    env: Env,
    readers: Vec<Reader>,
    names: [CString; 2],
    flips: AtomicU64,
}

impl Workload for DPath {
    fn name(&self) -> &'static str {
        "d_path"
    }
    fn description(&self) -> &'static str {
        "getcwd of a 4-deep directory from every thread while thread 0 renames its top now and then (rename seqlock)"
    }
    fn designs(&self) -> &'static [Design] {
        ALL
    }
    fn setup(&self, design: Design, threads: usize) -> Result<Box<dyn Instance>, String> {
        let env = Env::new(design)?;
        for d in ["top0", "top0/x", "top0/x/y", "top0/x/y/z"] {
            env.mkdir(d)?;
        }
        let deep = env.path("top0/x/y/z");
        let mut readers = Vec::new();
        for _ in 0..threads {
            readers.push(match &env {
                Env::Ours { p, .. } => {
                    let q = p.fork();
                    q.chdir(deep.as_bytes()).map_err(|e| e.to_string())?;
                    Reader::Ours(Box::new(q))
                }
                Env::Host(_) => {
                    // SAFETY: valid C string.
                    let fd = unsafe {
                        libc::open(
                            deep.as_ptr(),
                            libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC,
                        )
                    };
                    if fd < 0 {
                        return Err(std::io::Error::last_os_error().to_string());
                    }
                    Reader::Host {
                        fd,
                        link: CString::new(format!("/proc/self/fd/{fd}")).expect("no NUL"),
                    }
                }
            });
        }
        let names = [env.path("top0"), env.path("top1")];
        Ok(Box::new(DPathInst {
            env,
            readers,
            names,
            flips: AtomicU64::new(0),
        }))
    }
}

impl Drop for DPathInst {
    fn drop(&mut self) {
        for r in &self.readers {
            if let Reader::Host { fd, .. } = r {
                // SAFETY: closing our descriptor.
                unsafe { libc::close(*fd) };
            }
        }
    }
}

impl Instance for DPathInst {
    fn worker(&self, thread: usize) -> Box<dyn FnMut() -> u64 + '_> {
        let reader = &self.readers[thread];
        let mut buf = vec![0u8; 4096];
        let mut n = 0u64;
        Box::new(move || {
            for _ in 0..BATCH {
                match reader {
                    Reader::Ours(p) => {
                        std::hint::black_box(p.getcwd(&mut buf).unwrap_or(0));
                    }
                    Reader::Host { link, .. } => {
                        // SAFETY: valid pointers.
                        std::hint::black_box(unsafe {
                            libc::readlink(link.as_ptr(), buf.as_mut_ptr().cast(), buf.len())
                        });
                    }
                }
                n += 1;
                if thread == 0 && n.is_multiple_of(RENAME_EVERY) {
                    let f = self.flips.fetch_add(1, Ordering::Relaxed) as usize;
                    let ok = self
                        .env
                        .rename(&self.names[f % 2], &self.names[(f + 1) % 2]);
                    debug_assert!(ok);
                }
            }
            BATCH
        })
    }
}

// ------------------------------------------------------------------- inode-churn

/// Where `inode-churn`'s threads work and what they do.
#[derive(Clone, Copy, PartialEq)]
enum ChurnLayout {
    /// `inode-churn`: create and unlink in a directory of one's own.
    OwnDirCreate,
    /// `dir-create-same`: create and unlink one's own names in one shared directory.
    SharedDirCreate,
    /// `dir-rename-same`: rename one's own files back and forth in one shared directory.
    SharedDirRename,
}

struct InodeChurn {
    layout: ChurnLayout,
}

struct ChurnInst {
    env: Env,
    layout: ChurnLayout,
    /// Per thread: the file names it creates and removes (or renames) each call.
    paths: Vec<Vec<CString>>,
    /// Per thread, `SharedDirRename`: the names its files are renamed to.
    renamed: Vec<Vec<CString>>,
}

impl Workload for InodeChurn {
    fn name(&self) -> &'static str {
        match self.layout {
            ChurnLayout::OwnDirCreate => "inode-churn",
            ChurnLayout::SharedDirCreate => "dir-create-same",
            ChurnLayout::SharedDirRename => "dir-rename-same",
        }
    }
    fn description(&self) -> &'static str {
        match self.layout {
            ChurnLayout::OwnDirCreate => "create 32 files in one's own directory, then unlink them (inode create/evict: sb inode list; dlock-list)",
            ChurnLayout::SharedDirCreate => "create 32 files of one's own in one shared directory, then unlink them (the directory's lock, map, size, times)",
            ChurnLayout::SharedDirRename => "rename 32 files of one's own within one shared directory and back (the directory; no global rename lock)",
        }
    }
    fn designs(&self) -> &'static [Design] {
        ALL
    }
    fn setup(&self, design: Design, threads: usize) -> Result<Box<dyn Instance>, String> {
        Ok(Box::new(ChurnInst::new(design, threads, self.layout)?))
    }
}

impl ChurnInst {
    fn new(design: Design, threads: usize, layout: ChurnLayout) -> Result<ChurnInst, String> {
        let env = Env::new(design)?;
        if layout != ChurnLayout::OwnDirCreate {
            env.mkdir("shared")?;
        }
        let names = |prefix: &str| -> Vec<Vec<CString>> {
            (0..threads)
                .map(|t| {
                    (0..BATCH)
                        .map(|i| match layout {
                            ChurnLayout::OwnDirCreate => env.path(&format!("t{t}/{prefix}{i}")),
                            _ => env.path(&format!("shared/t{t}-{prefix}{i}")),
                        })
                        .collect()
                })
                .collect()
        };
        let (paths, renamed) = (names("f"), names("g"));
        Ok(ChurnInst {
            env,
            layout,
            paths,
            renamed,
        })
    }

    fn create(&self, p: &CString) {
        let fd = self
            .env
            .open(p, libc::O_CREAT | libc::O_EXCL | libc::O_WRONLY);
        debug_assert!(fd >= 0);
        self.env.close(fd);
    }
}

impl Instance for ChurnInst {
    fn worker(&self, thread: usize) -> Box<dyn FnMut() -> u64 + '_> {
        let (paths, renamed) = (&self.paths[thread], &self.renamed[thread]);
        match self.layout {
            // Each worker makes its directory itself (see `DcacheInst::worker`: the
            // directory's lock, times and size are written by every create and unlink).
            ChurnLayout::OwnDirCreate => self
                .env
                .mkdir(&format!("t{thread}"))
                .expect("a worker makes its own directory"),
            ChurnLayout::SharedDirCreate => {}
            ChurnLayout::SharedDirRename => paths.iter().for_each(|p| self.create(p)),
        }
        Box::new(move || {
            if self.layout == ChurnLayout::SharedDirRename {
                for (a, b) in paths.iter().zip(renamed) {
                    let ok = self.env.rename(a, b) && self.env.rename(b, a);
                    debug_assert!(ok);
                }
                return 2 * BATCH;
            }
            for p in paths {
                self.create(p);
            }
            for p in paths {
                let ok = self.env.unlink(p);
                debug_assert!(ok);
            }
            BATCH
        })
    }
}

// ------------------------------------------------------------------- stat-walk

struct StatWalk;

const WALK_DIRS: usize = 8;
const WALK_FILES: usize = 32;

struct WalkInst {
    env: Env,
    /// Per thread: descriptors of its directories.
    dirfds: Vec<Vec<i32>>,
    names: Vec<CString>,
}

impl Workload for StatWalk {
    fn name(&self) -> &'static str {
        "stat-walk"
    }
    fn description(&self) -> &'static str {
        "fstatat every entry of one directory of one's own tree per call (the dlock-list series' traversal)"
    }
    fn designs(&self) -> &'static [Design] {
        ALL
    }
    fn setup(&self, design: Design, threads: usize) -> Result<Box<dyn Instance>, String> {
        let env = Env::new(design)?;
        let names: Vec<CString> = (0..WALK_FILES)
            .map(|i| CString::new(format!("entry{i}")).expect("no NUL"))
            .collect();
        let mut dirfds = Vec::new();
        for t in 0..threads {
            env.mkdir(&format!("t{t}"))?;
            let mut fds = Vec::new();
            for d in 0..WALK_DIRS {
                let dir = format!("t{t}/d{d}");
                env.mkdir(&dir)?;
                for n in &names {
                    env.write_file(&format!("{dir}/{}", n.to_str().expect("ascii")), b"")?;
                }
                let fd = env.open(&env.path(&dir), libc::O_RDONLY | libc::O_DIRECTORY);
                if fd < 0 {
                    return Err(format!("open {dir} failed"));
                }
                fds.push(fd);
            }
            dirfds.push(fds);
        }
        Ok(Box::new(WalkInst { env, dirfds, names }))
    }
}

impl Drop for WalkInst {
    fn drop(&mut self) {
        for fds in &self.dirfds {
            for &fd in fds {
                self.env.close(fd);
            }
        }
    }
}

impl Instance for WalkInst {
    fn worker(&self, thread: usize) -> Box<dyn FnMut() -> u64 + '_> {
        let fds = &self.dirfds[thread];
        let mut d = 0;
        Box::new(move || {
            let fd = fds[d % fds.len()];
            d += 1;
            for n in &self.names {
                std::hint::black_box(self.env.fstatat(fd, n));
            }
            self.names.len() as u64
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workloads::test_support::run_every_design;

    #[test]
    fn every_vfs_workload_runs_on_two_threads_under_each_design() {
        for w in workloads() {
            for (design, ops) in run_every_design(&*w, 2, 20) {
                assert!(
                    ops.iter().all(|&n| n >= 20),
                    "{} {design}: {ops:?}",
                    w.name()
                );
            }
        }
    }

    /// `dcache-distinct-procs`' workers really have descriptor tables of their own: a
    /// descriptor a worker opens is not, in the run's shared table, that file.
    #[test]
    fn own_fd_table_is_not_the_shared_one() {
        for design in [Design::Scalable, Design::Host] {
            let env = Env::new(design).unwrap();
            env.write_file("f", b"x").unwrap();
            let path = env.path("f");
            let (opened_tx, opened_rx) = std::sync::mpsc::channel();
            let (checked_tx, checked_rx) = std::sync::mpsc::channel::<()>();
            std::thread::scope(|s| {
                let (env, path) = (&env, &path);
                s.spawn(move || {
                    let own = env.own_fd_table().unwrap();
                    let worker = own.as_ref().unwrap_or(env);
                    let fd = worker.open(path, libc::O_RDONLY);
                    let mut b = [0u8; 1];
                    assert_eq!(worker.read(fd, &mut b), 1, "{design}");
                    opened_tx.send(fd).unwrap();
                    checked_rx.recv().unwrap();
                    worker.close(fd);
                });
                let fd = opened_rx.recv().unwrap();
                // This thread still uses the shared table (on the host other tests' threads
                // use it too, so `fd` may be open there: just not on our file).
                let ours_in_shared_table = match env {
                    Env::Ours { p, .. } => p.fstat(fd).is_ok(),
                    Env::Host(dir) => {
                        // SAFETY: zeroed stat buffers are valid out-parameters.
                        let (mut a, mut b): (libc::stat, libc::stat) =
                            unsafe { (std::mem::zeroed(), std::mem::zeroed()) };
                        // SAFETY: valid path and buffers.
                        let same = unsafe {
                            libc::stat(dir.cpath("f").as_ptr(), &mut a) == 0
                                && libc::fstat(fd, &mut b) == 0
                        };
                        same && a.st_ino == b.st_ino && a.st_dev == b.st_dev
                    }
                };
                checked_tx.send(()).unwrap();
                assert!(
                    !ours_in_shared_table,
                    "{design}: fd {fd} is open in the shared table"
                );
            });
        }
    }

    #[test]
    fn inode_churn_creates_and_evicts() {
        for design in [Design::Legacy, Design::Scalable] {
            let inst = ChurnInst::new(design, 2, ChurnLayout::OwnDirCreate).unwrap();
            let Env::Ours { _vfs: vfs, p } = &inst.env else {
                unreachable!("scalevfs design")
            };
            // The worker makes its directory when it is built: count after that.
            let mut work = inst.worker(1);
            let before = vfs.inode_count();
            assert_eq!(work(), BATCH);
            assert_eq!(work(), BATCH);
            drop(work);
            assert!(p.readdir("/bench/t1").unwrap().len() == 2, "only . and ..");
            vfs.drop_caches();
            assert_eq!(vfs.inode_count(), before, "every created inode was evicted");
        }
    }

    #[test]
    fn shared_directory_churn_and_renames_leave_the_directory_as_found() {
        for design in [Design::Legacy, Design::Scalable] {
            for layout in [ChurnLayout::SharedDirCreate, ChurnLayout::SharedDirRename] {
                let inst = ChurnInst::new(design, 2, layout).unwrap();
                let Env::Ours { p, .. } = &inst.env else {
                    unreachable!("scalevfs design")
                };
                let (mut w0, mut w1) = (inst.worker(0), inst.worker(1));
                let done = w0() + w1();
                drop((w0, w1));
                let listed = p.readdir("/bench/shared").unwrap().len();
                if layout == ChurnLayout::SharedDirCreate {
                    assert_eq!(done, 2 * BATCH);
                    assert_eq!(listed, 2, "only . and ..");
                } else {
                    assert_eq!(done, 4 * BATCH);
                    assert_eq!(
                        listed,
                        2 + 2 * BATCH as usize,
                        "every file back at its name"
                    );
                    assert!(p.stat("/bench/shared/t1-f0").is_ok());
                    assert_eq!(
                        p.stat("/bench/shared/t1-g0").err(),
                        Some(scalevfs::Errno::ENOENT)
                    );
                }
            }
        }
    }
}
