//! FUSE workloads (issue 7): the same real system calls on a scalevfs FUSE mount and on
//! host tmpfs, in the same run, so that `scalable/host` in the report is the throughput
//! of the FUSE mount relative to the kernel's own tmpfs: the FUSE overhead.
//!
//! * `fuse-open-close`: each thread opens its own file read-only and closes it
//!   (will-it-scale `open1`). Through FUSE: OPEN, FLUSH and RELEASE requests (the path
//!   lookup is served from the kernel's dentry cache while the entry is valid).
//! * `fuse-stat`: each thread `stat`s its own file by path. Through FUSE this reaches
//!   the server only when the kernel's attribute or entry cache has expired (the server's
//!   TTL decides how often), so it measures what a program sees, caches included.
//! * `fuse-locks`: each thread `F_SETLK`-locks and unlocks byte 0 of its own file
//!   (will-it-scale `lock1`). The server advertises POSIX locks, so every lock and unlock
//!   is a SETLK request answered by scalevfs's lock manager, not the kernel's.
//!
//! Designs: **scalable** is the FUSE mount (scalevfs's default, scalable design, served
//! by `scalevfs_fuse::Server` with 2 request threads on a fresh temporary directory,
//! mounted at setup and unmounted at teardown); **host** is a directory on /dev/shm.
//! Both run the code below on a [`HostDir`]-style path; only the directory differs.
//!
//! The FUSE design needs /dev/fuse access (root) and fusermount3. When one is missing it
//! is left out of `designs()` and the reason is printed once; the host design still
//! runs. The benchmark process serves its own mount: it never forks while files are open
//! there, and `Server`'s drop aborts the connection if a run panics, so a worker cannot be
//! left waiting for a server that is gone.

use std::ffi::CString;
use std::sync::OnceLock;

use scalevfs_fuse::{MountOptions, Server};

use crate::workloads::host_dir::{sys, HostDir};
use crate::{Design, Instance, Workload};

/// Operations per worker call.
const BATCH: u64 = 32;
/// FUSE request threads of the benchmark's mount.
pub const SERVER_THREADS: usize = 2;

const FUSE_AND_HOST: &[Design] = &[Design::Scalable, Design::Host];
const HOST_ONLY: &[Design] = &[Design::Host];

pub fn workloads() -> Vec<Box<dyn Workload>> {
    vec![
        Box::new(Fuse(Kind::OpenClose)),
        Box::new(Fuse(Kind::Stat)),
        Box::new(Fuse(Kind::Locks)),
    ]
}

/// Why the FUSE design cannot run here, if it cannot. Checked once per process (the
/// reason is printed then): `scalevfs mount`'s preflight checks, then a real mount on
/// which a file is created, so that a machine that cannot mount (no `CAP_SYS_ADMIN` in a
/// container) or a server that cannot create files yet skips the design instead of
/// failing every run.
pub fn fuse_unavailable() -> Option<&'static str> {
    static WHY: OnceLock<Option<String>> = OnceLock::new();
    WHY.get_or_init(|| {
        let why = probe().err();
        if let Some(why) = &why {
            eprintln!(
                "scalevfs bench: fuse-* workloads: FUSE design skipped ({why}); the host \
                 design still runs"
            );
        }
        why
    })
    .as_deref()
}

fn probe() -> Result<(), String> {
    scalevfs_fuse::preflight(&std::env::temp_dir()).map_err(|e| e.to_string())?;
    let side = Side::mount()?;
    let fd = sys::create(&side.path("probe"))?;
    sys::close(fd);
    Ok(())
}

#[derive(Copy, Clone, PartialEq, Eq, Debug)]
enum Kind {
    OpenClose,
    Stat,
    Locks,
}

struct Fuse(Kind);

impl Workload for Fuse {
    fn name(&self) -> &'static str {
        match self.0 {
            Kind::OpenClose => "fuse-open-close",
            Kind::Stat => "fuse-stat",
            Kind::Locks => "fuse-locks",
        }
    }
    fn description(&self) -> &'static str {
        match self.0 {
            Kind::OpenClose => {
                "open (O_RDONLY) and close one's own file with real syscalls; scalable = a \
                 scalevfs FUSE mount (2 server threads), host = /dev/shm: scalable/host is the \
                 FUSE overhead (issue 7)"
            }
            Kind::Stat => {
                "stat one's own file by path with real syscalls; scalable = a scalevfs FUSE \
                 mount (kernel attribute caching included), host = /dev/shm (issue 7)"
            }
            Kind::Locks => {
                "F_SETLK-lock and unlock byte 0 of one's own file with real fcntl calls; \
                 scalable = a scalevfs FUSE mount (every call a SETLK request to scalevfs's \
                 lock manager), host = /dev/shm (issue 7)"
            }
        }
    }
    fn designs(&self) -> &'static [Design] {
        if fuse_unavailable().is_some() {
            HOST_ONLY
        } else {
            FUSE_AND_HOST
        }
    }
    fn setup(&self, design: Design, threads: usize) -> Result<Box<dyn Instance>, String> {
        Ok(Box::new(FuseInst::new(self.0, design, threads)?))
    }
}

/// Where the files live: a FUSE mount, or a directory on host tmpfs.
enum Side {
    /// Field order is drop order: unmount, then remove the empty mount point.
    Fuse {
        server: Option<Box<Server>>,
        mountpoint: HostDir,
    },
    Host(HostDir),
}

impl Side {
    /// A scalevfs FUSE mount on a fresh temporary directory.
    fn mount() -> Result<Side, String> {
        let mountpoint = HostDir::fresh_in(&std::env::temp_dir(), "fuse-mnt")?;
        let options = MountOptions {
            threads: SERVER_THREADS,
            // No fusermount3 watchdog: `Server`'s drop cleans up after a panic, and the
            // watchdog would complain on stderr after every clean unmount.
            auto_unmount: false,
            ..MountOptions::default()
        };
        let server = Server::mount_with(mountpoint.path(), &options)
            .map_err(|e| format!("{}: {e}", mountpoint.path().display()))?;
        Ok(Side::Fuse {
            server: Some(Box::new(server)),
            mountpoint,
        })
    }

    fn path(&self, rel: &str) -> CString {
        match self {
            Side::Fuse { mountpoint: d, .. } | Side::Host(d) => d.cpath(rel),
        }
    }
}

impl Drop for Side {
    fn drop(&mut self) {
        if let Side::Fuse { server, mountpoint } = self {
            if let Some(Err(e)) = server.take().map(|s| s.unmount()) {
                eprintln!(
                    "scalevfs bench: unmounting {}: {e}",
                    mountpoint.path().display()
                );
            }
        }
    }
}

struct FuseInst {
    kind: Kind,
    /// Per thread: its file's path and (for `Locks`) an open descriptor on it.
    files: Vec<(CString, i32)>,
    /// Held for its drop, which comes after `Drop::drop` has closed the files.
    _side: Side,
}

impl FuseInst {
    fn new(kind: Kind, design: Design, threads: usize) -> Result<FuseInst, String> {
        let side = match design {
            Design::Host => Side::Host(HostDir::shm("fuse")?),
            Design::Scalable => match fuse_unavailable() {
                Some(why) => return Err(format!("no FUSE here: {why}")),
                None => Side::mount()?,
            },
            Design::Legacy => return Err("fuse-* workloads have no legacy design".into()),
        };
        // On an error `side` is dropped here: the mount goes, then its directory.
        let files = create_files(&side, threads, kind == Kind::Locks)?;
        Ok(FuseInst {
            kind,
            files,
            _side: side,
        })
    }
}

impl Drop for FuseInst {
    fn drop(&mut self) {
        // Close before the side unmounts: nothing of ours is left open on the mount.
        for &(_, fd) in &self.files {
            if fd >= 0 {
                sys::close(fd);
            }
        }
    }
}

impl Instance for FuseInst {
    fn worker(&self, thread: usize) -> Box<dyn FnMut() -> u64 + '_> {
        let (path, fd) = &self.files[thread];
        let fd = *fd;
        match self.kind {
            Kind::OpenClose => Box::new(move || {
                for _ in 0..BATCH {
                    let fd = sys::open(path, libc::O_RDONLY);
                    debug_assert!(fd >= 0, "open {path:?}");
                    sys::close(fd);
                }
                BATCH
            }),
            Kind::Stat => Box::new(move || {
                for _ in 0..BATCH {
                    let size = std::hint::black_box(sys::stat_size(path));
                    debug_assert!(size >= 0, "stat {path:?}");
                }
                BATCH
            }),
            Kind::Locks => Box::new(move || {
                for _ in 0..BATCH {
                    let locked = sys::lock(fd, libc::F_SETLK, libc::F_WRLCK, 1);
                    debug_assert!(locked, "nobody else locks this file");
                    let unlocked = sys::lock(fd, libc::F_SETLK, libc::F_UNLCK, 1);
                    debug_assert!(unlocked, "unlock cannot fail");
                }
                BATCH
            }),
        }
    }
}

/// Creates `t0`..`t{threads-1}` on `side`; keeps them open if `keep_open`.
fn create_files(
    side: &Side,
    threads: usize,
    keep_open: bool,
) -> Result<Vec<(CString, i32)>, String> {
    let mut files: Vec<(CString, i32)> = Vec::with_capacity(threads);
    for t in 0..threads {
        let path = side.path(&format!("t{t}"));
        let fd = match sys::create(&path) {
            Ok(fd) => fd,
            Err(e) => {
                files.iter().for_each(|&(_, fd)| sys::close(fd));
                return Err(e);
            }
        };
        if !keep_open {
            sys::close(fd);
        }
        files.push((path, if keep_open { fd } else { -1 }));
    }
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workloads::test_support::run_every_design;

    /// Every workload under every design this machine offers: host tmpfs always, the FUSE
    /// mount when this machine can mount one and create a file on it (root, /dev/fuse,
    /// fusermount3; otherwise the design is left out, with the reason).
    #[test]
    fn every_fuse_workload_runs_under_each_available_design() {
        let expected = match fuse_unavailable() {
            Some(why) => {
                println!("SKIPPED: fuse design: {why}");
                HOST_ONLY
            }
            None => FUSE_AND_HOST,
        };
        for w in workloads() {
            assert_eq!(w.designs(), expected);
            let ran = run_every_design(&*w, 2, 10);
            assert_eq!(ran.len(), expected.len());
            for (design, ops) in ran {
                assert_eq!(ops, [10 * BATCH; 2], "{} {design}", w.name());
            }
        }
    }

    #[test]
    fn workers_work_on_their_own_file() {
        let inst = FuseInst::new(Kind::Locks, Design::Host, 2).unwrap();
        let Side::Host(dir) = &inst._side else {
            unreachable!("host design")
        };
        assert_eq!(inst.files[1].0, dir.cpath("t1"));
        let other = sys::create(&dir.cpath("t1")).unwrap();
        // Thread 1's lock shows to another open file description while held, and the
        // worker leaves nothing locked.
        assert!(sys::lock(inst.files[1].1, libc::F_SETLK, libc::F_WRLCK, 1));
        assert_eq!(sys::getlk(other, libc::F_OFD_GETLK, 1), libc::F_WRLCK);
        assert!(sys::lock(inst.files[1].1, libc::F_SETLK, libc::F_UNLCK, 1));
        let mut work = inst.worker(1);
        assert_eq!(work(), BATCH);
        drop(work);
        assert_eq!(sys::getlk(other, libc::F_OFD_GETLK, 1), libc::F_UNLCK);
        sys::close(other);
        let path = dir.path().to_owned();
        drop(inst);
        assert!(!path.exists(), "teardown removes the directory");
    }

    #[test]
    fn no_legacy_design() {
        assert!(FuseInst::new(Kind::Stat, Design::Legacy, 1).is_err());
    }
}
