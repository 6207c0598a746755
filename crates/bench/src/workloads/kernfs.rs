//! kernfs workloads: `kernfs-showgids`, the loop of the kernfs hashed-locks series.
//!
//! Each operation opens a GID attribute by path, reads 40 bytes and closes it; a worker
//! call does the 254 GIDs of `class/infiniband/mlx5_0/ports/1/gids/` in order (the seed's
//! inner loop), as an unprivileged user. Thread `t` of `n` starts its round at GID
//! `t * 254 / n` and wraps around: the seed's 200 processes started at different times and
//! drift apart, while threads started together would otherwise run in lockstep on the
//! same file (all designs get the same rotation).
//!
//! * `legacy` / `scalable`: scalevfs-kernfs's demo tree, through its API directly (path
//!   walk with search-permission checks, `open`, `read`, release). Legacy serializes every
//!   open and close on one open-file mutex and one open-node spinlock and takes the tree
//!   rwsem for every lookup step and permission check (the seed's profile); scalable
//!   hashes the open-file mutex by node, walks locklessly, and publishes the open node for
//!   lockless readers.
//! * `host`: the same loop with real `open`/`read`/`close` on the host's sysfs. This machine
//!   has no InfiniBand, so it reads 254 attribute files of the densest attribute
//!   directories present, `/sys/devices/virtual/block/loop*/queue/*` (48 each), cycling if
//!   fewer exist.
//!
//! `kernfs-showgids-vfs` is the same loop through the whole stack: the demo tree mounted at
//! `/sys` in a scalevfs `Vfs` (legacy: a legacy kernfs in a legacy VFS), each thread a
//! `Process` of its own (the seed's processes) doing `openat` by absolute path, `read` of
//! 40 bytes and `close`; the host design is the same host loop on the same host files.
//!
//! `SCALEVFS_LOCKSTAT=1` (or `scalevfs bench --lockstat`) adds the kernfs lock classes'
//! statistics to the report.

use std::ffi::CString;

use std::sync::Arc;

use scalevfs::{Credentials, Process, Vfs, VfsOptions};
use scalevfs_kernfs::demo::{demo_tree, gid_path, DemoTree, DEMO_GIDS};
use scalevfs_kernfs::{Creds, Kernfs, KernfsFs, Locking};
use scalevfs_primitives::lockstat;

use crate::workloads::hashed::LOCKSTAT_ENV;
use crate::{Design, Instance, Workload};

/// The unprivileged caller of the loop.
const READER: Creds<'static> = Creds {
    uid: 1000,
    gid: 1000,
    groups: &[],
};

/// Bytes read per open, as in the seed.
const READ_LEN: usize = 40;

/// Where the host design finds its attribute files.
pub const HOST_GLOB_PARENT: &str = "/sys/devices/virtual/block";

struct ShowGids;

impl Workload for ShowGids {
    fn name(&self) -> &'static str {
        "kernfs-showgids"
    }

    fn description(&self) -> &'static str {
        "open, read 40 bytes, close each of 254 sysfs GID files by path (kernfs hashed locks); host: 254 files of /sys/devices/virtual/block/loop*/queue"
    }

    fn designs(&self) -> &'static [Design] {
        &Design::ALL
    }

    fn setup(&self, design: Design, threads: usize) -> Result<Box<dyn Instance>, String> {
        if threads == 0 {
            return Err("kernfs-showgids needs at least one thread".into());
        }
        let from_env = std::env::var(LOCKSTAT_ENV).is_ok_and(|v| v == "1");
        match design.locking() {
            Some(locking) => {
                let fs = Kernfs::new(locking);
                let tree = demo_tree(&fs).map_err(|e| format!("demo tree: {e:?}"))?;
                if from_env {
                    scalevfs_kernfs::lock_classes()
                        .iter()
                        .for_each(|c| c.reset());
                    lockstat::enable();
                }
                Ok(Box::new(TreeLoop {
                    threads,
                    fs,
                    _tree: tree,
                    paths: (0..DEMO_GIDS).map(gid_path).collect(),
                    from_env,
                }))
            }
            None => Ok(Box::new(HostLoop {
                threads,
                paths: host_files(DEMO_GIDS)?,
            })),
        }
    }
}

struct ShowGidsVfs;

impl Workload for ShowGidsVfs {
    fn name(&self) -> &'static str {
        "kernfs-showgids-vfs"
    }

    fn description(&self) -> &'static str {
        "kernfs-showgids through the VFS: openat /sys/class/infiniband/.../gids/N, read 40 bytes, close, one Process per thread; host: as kernfs-showgids"
    }

    fn designs(&self) -> &'static [Design] {
        &Design::ALL
    }

    fn setup(&self, design: Design, threads: usize) -> Result<Box<dyn Instance>, String> {
        if threads == 0 {
            return Err("kernfs-showgids-vfs needs at least one thread".into());
        }
        match design.locking() {
            Some(locking) => Ok(Box::new(VfsLoop::new(locking, threads)?)),
            None => Ok(Box::new(HostLoop {
                threads,
                paths: host_files(DEMO_GIDS)?,
            })),
        }
    }
}

/// The demo tree mounted at `/sys` of a VFS of the same design.
struct VfsLoop {
    threads: usize,
    vfs: Arc<Vfs>,
    _tree: DemoTree,
    paths: Vec<String>,
    from_env: bool,
}

impl VfsLoop {
    fn new(locking: Locking, threads: usize) -> Result<Self, String> {
        let vfs = Vfs::new(VfsOptions {
            locking,
            ..Default::default()
        });
        Process::new(&vfs, Credentials::root())
            .mkdirat(libc::AT_FDCWD, "/sys", 0o755)
            .map_err(|e| format!("mkdir /sys: {e}"))?;
        let fs = Kernfs::new(locking);
        let tree = demo_tree(&fs).map_err(|e| format!("demo tree: {e:?}"))?;
        vfs.mount("/sys", KernfsFs::new(fs))
            .map_err(|e| format!("mount /sys: {e}"))?;
        let from_env = std::env::var(LOCKSTAT_ENV).is_ok_and(|v| v == "1");
        if from_env {
            lockstat::reset();
            lockstat::enable();
        }
        Ok(VfsLoop {
            threads,
            vfs,
            _tree: tree,
            paths: (0..DEMO_GIDS)
                .map(|i| format!("/sys/{}", gid_path(i)))
                .collect(),
            from_env,
        })
    }
}

impl Instance for VfsLoop {
    fn worker(&self, thread: usize) -> Box<dyn FnMut() -> u64 + '_> {
        let mut buf = [0u8; 64];
        let (first, rest) = rotated(&self.paths, thread, self.threads);
        // Each thread is a process of its own, as the seed's readers were.
        let p = Process::new(&self.vfs, Credentials::user(READER.uid, READER.gid));
        Box::new(move || {
            for path in first.iter().chain(rest) {
                let fd = p
                    .openat(libc::AT_FDCWD, path, libc::O_RDONLY | libc::O_CLOEXEC, 0)
                    .expect("GID file opens");
                let n = p.read(fd, &mut buf[..READ_LEN]).expect("GID file reads");
                debug_assert_eq!(n, READ_LEN);
                std::hint::black_box(&buf[..n]);
                p.close(fd).expect("GID file closes");
            }
            self.paths.len() as u64
        })
    }

    fn lockstat(&self) -> Option<String> {
        (self.from_env || lockstat::is_enabled()).then(lockstat::report)
    }
}

impl Drop for VfsLoop {
    fn drop(&mut self) {
        if self.from_env {
            lockstat::disable();
        }
    }
}

/// `paths` rotated to start at thread `t`'s share: (`paths[start..]`, `paths[..start]`).
fn rotated<T>(paths: &[T], t: usize, threads: usize) -> (&[T], &[T]) {
    let start = (t % threads.max(1)) * paths.len() / threads.max(1);
    let (a, b) = paths.split_at(start);
    (b, a)
}

struct TreeLoop {
    threads: usize,
    fs: Kernfs,
    _tree: DemoTree,
    paths: Vec<String>,
    from_env: bool,
}

impl Instance for TreeLoop {
    fn worker(&self, thread: usize) -> Box<dyn FnMut() -> u64 + '_> {
        let mut buf = [0u8; 64];
        let (first, rest) = rotated(&self.paths, thread, self.threads);
        Box::new(move || {
            for p in first.iter().chain(rest) {
                let node = self
                    .fs
                    .lookup_path(p, &READER, true)
                    .expect("GID file exists");
                let of = self
                    .fs
                    .open(&node, libc::O_RDONLY | libc::O_CLOEXEC, &READER)
                    .expect("GID file opens");
                let n = of.read(&mut buf[..READ_LEN]).expect("GID file reads");
                debug_assert_eq!(n, READ_LEN);
                std::hint::black_box(&buf[..n]);
                // Dropping `of` is close (release).
            }
            self.paths.len() as u64
        })
    }

    fn lockstat(&self) -> Option<String> {
        (self.from_env || lockstat::is_enabled())
            .then(|| lockstat::report_for(&scalevfs_kernfs::lock_classes()))
    }
}

impl Drop for TreeLoop {
    fn drop(&mut self) {
        if self.from_env {
            lockstat::disable();
        }
    }
}

/// Up to `want` readable attribute files under `HOST_GLOB_PARENT/loop*/queue`, cycled to
/// exactly `want` paths.
fn host_files(want: usize) -> Result<Vec<CString>, String> {
    let mut found = Vec::new();
    let mut devs: Vec<_> = std::fs::read_dir(HOST_GLOB_PARENT)
        .map_err(|e| format!("{HOST_GLOB_PARENT}: {e}"))?
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with("loop"))
        .map(|e| e.path().join("queue"))
        .collect();
    devs.sort();
    for q in devs {
        let Ok(rd) = std::fs::read_dir(&q) else {
            continue;
        };
        let mut files: Vec<_> = rd.filter_map(|e| e.ok()).map(|e| e.path()).collect();
        files.sort();
        for f in files {
            // Only attributes a plain read succeeds on (some are write-only or fail).
            if f.is_file() && std::fs::read(&f).is_ok_and(|c| !c.is_empty()) {
                found.push(
                    CString::new(f.into_os_string().into_encoded_bytes())
                        .map_err(|e| e.to_string())?,
                );
            }
            if found.len() == want {
                return Ok(found);
            }
        }
    }
    if found.is_empty() {
        return Err(format!(
            "no readable attribute under {HOST_GLOB_PARENT}/loop*/queue"
        ));
    }
    let n = found.len();
    Ok((0..want).map(|i| found[i % n].clone()).collect())
}

struct HostLoop {
    threads: usize,
    paths: Vec<CString>,
}

impl Instance for HostLoop {
    fn worker(&self, thread: usize) -> Box<dyn FnMut() -> u64 + '_> {
        let mut buf = [0u8; 64];
        let (first, rest) = rotated(&self.paths, thread, self.threads);
        Box::new(move || {
            for p in first.iter().chain(rest) {
                // SAFETY: `p` is a valid C string; the fd is closed below.
                let fd = unsafe { libc::open(p.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
                assert!(fd >= 0, "open {p:?}");
                // SAFETY: `buf` has room for READ_LEN bytes; `fd` is open.
                let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), READ_LEN) };
                std::hint::black_box(n);
                // SAFETY: `fd` is ours.
                unsafe { libc::close(fd) };
            }
            self.paths.len() as u64
        })
    }
}

/// This module's workloads, in the order the report lists them.
pub fn workloads() -> Vec<Box<dyn Workload>> {
    vec![Box::new(ShowGids), Box::new(ShowGidsVfs)]
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// Runs `rounds` worker calls on `threads` threads of every design of `w` (the host
    /// design may be unavailable), checking each call covers the 254 GIDs.
    fn run_every_design(w: &dyn Workload, threads: usize, rounds: u64) {
        for &design in w.designs() {
            let inst = match w.setup(design, threads) {
                Ok(i) => i,
                Err(e) if design == Design::Host => {
                    eprintln!("host design unavailable here: {e}");
                    continue;
                }
                Err(e) => panic!("{design}: {e}"),
            };
            std::thread::scope(|s| {
                for t in 0..threads {
                    let inst = &inst;
                    s.spawn(move || {
                        let mut work = inst.worker(t);
                        let ops: u64 = (0..rounds).map(|_| work()).sum();
                        assert_eq!(ops, rounds * DEMO_GIDS as u64);
                    });
                }
            });
        }
        assert!(w.setup(Design::Scalable, 0).is_err());
    }

    #[test]
    fn showgids_runs_two_threads_in_every_design() {
        assert_eq!(ShowGids.name(), "kernfs-showgids");
        run_every_design(&ShowGids, 2, 3);
    }

    #[test]
    fn showgids_vfs_reads_every_gid_through_the_mount() {
        assert_eq!(ShowGidsVfs.name(), "kernfs-showgids-vfs");
        run_every_design(&ShowGidsVfs, 3, 2);
        // One round on a fresh tree shows each GID once.
        let v = VfsLoop::new(Locking::Scalable, 1).unwrap();
        let mut work = v.worker(0);
        assert_eq!(work(), DEMO_GIDS as u64);
        drop(work);
        let reads = Process::new(&v.vfs, Credentials::root())
            .read_file("/sys/kernel/scalevfs/gid_reads")
            .unwrap();
        assert_eq!(reads, format!("{DEMO_GIDS}\n").into_bytes());
    }

    #[test]
    fn rotation_covers_every_path_once() {
        let p: Vec<usize> = (0..254).collect();
        for threads in [1, 2, 3, 16] {
            for t in 0..threads {
                let (a, b) = rotated(&p, t, threads);
                let mut all: Vec<usize> = a.iter().chain(b).copied().collect();
                assert_eq!(all[0], t * 254 / threads);
                all.sort_unstable();
                assert_eq!(all, p);
            }
        }
    }

    fn process_cpu_ns() -> u64 {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `ts` is a valid, writable timespec.
        unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
        ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
    }

    /// Throughput of each design at 1, 2 and 16 threads (for the report; no assertion on
    /// speed). `cargo test -p scalevfs-bench --release -- --ignored --nocapture measure_showgids`
    #[test]
    #[ignore = "measurement; run in release with --nocapture"]
    fn measure_showgids() {
        for (w, threads) in [1, 2, 16]
            .into_iter()
            .flat_map(|t| [(&ShowGids as &dyn Workload, t), (&ShowGidsVfs, t)])
        {
            for &design in w.designs() {
                let Ok(inst) = w.setup(design, threads) else {
                    continue;
                };
                let cpu0 = process_cpu_ns();
                let ops = crate::workloads::test_support::ops_in(
                    &*inst,
                    threads,
                    Duration::from_millis(1000),
                );
                // CPU time per operation: on a machine shared with other load, wall-clock
                // throughput mostly measures the load; CPU per op rising with threads is
                // what contention costs (the host design's kernel time counts too).
                let cpu = process_cpu_ns() - cpu0;
                println!(
                    "{:<20} {design:>8} {threads:>2} threads: {:>8.3} Mops/s, {:>6.0} CPU ns/op",
                    w.name(),
                    ops as f64 / 1e6,
                    cpu as f64 / ops as f64
                );
                if let Some(r) = inst.lockstat() {
                    println!("{r}");
                }
            }
        }
    }
}
