//! File-lock workloads (the file-lock scalability series) through the system-call API, for the legacy and scalable
//! lock managers of scalevfs and for the host kernel (the same `fcntl` calls through libc on
//! files under /dev/shm).
//!
//! * `locks-same`: every thread locks and unlocks byte 0 of one shared file (the series'
//!   first test, will-it-scale `lock2`). The threads share one process, so to make them
//!   distinct owners (as lock2's processes are) each takes `F_OFD_SETLK` write locks through
//!   its own open file description; a lock attempt that finds the byte held fails with
//!   `EAGAIN` and still counts as one operation (one lock attempt + unlock).
//! * `locks-distinct`: every thread locks and unlocks byte 0 of its own file with POSIX
//!   `F_SETLK` (the series' second test, will-it-scale `lock1`): no shared lock state at all,
//!   so it should scale with the thread count.
//! * `locks-blocking`: every thread takes a write lock on bytes 0..100 of one file with
//!   `F_OFD_SETLKW` (sleeping while another holds it) and releases it: the blocking and
//!   wakeup path (the series' thundering-herd remark).
//!
//! One operation is one lock + unlock pair.

use std::sync::Arc;

use scalevfs::{Credentials, FcntlArg, Flock, Process, Vfs, VfsOptions};

use crate::workloads::host_dir::{sys, HostDir};
use crate::{Design, Instance, Workload};

const ALL: &[Design] = &[Design::Legacy, Design::Scalable, Design::Host];
/// Lock/unlock pairs per worker call.
const BATCH: u64 = 64;

/// This module's workloads, in the order the report lists them.
pub fn workloads() -> Vec<Box<dyn Workload>> {
    vec![
        Box::new(Locks(Kind::Same)),
        Box::new(Locks(Kind::Distinct)),
        Box::new(Locks(Kind::Blocking)),
    ]
}

#[derive(Copy, Clone, PartialEq, Eq)]
enum Kind {
    Same,
    Distinct,
    Blocking,
}

struct Locks(Kind);

impl Workload for Locks {
    fn name(&self) -> &'static str {
        match self.0 {
            Kind::Same => "locks-same",
            Kind::Distinct => "locks-distinct",
            Kind::Blocking => "locks-blocking",
        }
    }
    fn description(&self) -> &'static str {
        match self.0 {
            Kind::Same => {
                "will-it-scale lock2: N threads F_OFD_SETLK-lock and unlock byte 0 of \
                 one file, each through its own open file description (distinct owners, like \
                 lock2's processes); EAGAIN attempts count"
            }
            Kind::Distinct => {
                "will-it-scale lock1: each thread F_SETLK-locks and unlocks byte 0 of \
                 its own file (no shared lock state)"
            }
            Kind::Blocking => {
                "N threads contend for a write lock on bytes 0..100 of one file with \
                 F_OFD_SETLKW (sleep and wakeup), then unlock"
            }
        }
    }
    fn designs(&self) -> &'static [Design] {
        ALL
    }
    fn setup(&self, design: Design, threads: usize) -> Result<Box<dyn Instance>, String> {
        Ok(Box::new(LocksInst::new(self.0, design, threads)?))
    }
}

/// One side: scalevfs (a `Vfs` and one process whose threads are the workers) or the host.
enum Env {
    Ours { _vfs: Arc<Vfs>, p: Box<Process> },
    Host(HostDir),
}

struct LocksInst {
    env: Env,
    /// Each worker's descriptor.
    fds: Vec<i32>,
    set_cmd: i32,
    wait_cmd: i32,
    len: i64,
}

impl LocksInst {
    fn new(kind: Kind, design: Design, threads: usize) -> Result<LocksInst, String> {
        let env = match design.locking() {
            Some(locking) => {
                let vfs = Vfs::new(VfsOptions {
                    locking,
                    ..VfsOptions::default()
                });
                let p = Process::new(&vfs, Credentials::root());
                p.set_fd_limit(1 << 16).map_err(|e| e.to_string())?;
                p.mkdir("/bench", 0o755).map_err(|e| e.to_string())?;
                Env::Ours {
                    _vfs: vfs,
                    p: Box::new(p),
                }
            }
            None => Env::Host(HostDir::shm("locks")?),
        };
        let mut inst = LocksInst {
            env,
            fds: Vec::new(),
            set_cmd: if kind == Kind::Distinct {
                libc::F_SETLK
            } else {
                libc::F_OFD_SETLK
            },
            wait_cmd: if kind == Kind::Blocking {
                libc::F_OFD_SETLKW
            } else {
                0
            },
            len: if kind == Kind::Blocking { 100 } else { 1 },
        };
        for t in 0..threads {
            let name = match kind {
                Kind::Distinct => format!("f{t}"),
                _ => "shared".to_string(),
            };
            let fd = inst.open(&name)?;
            inst.fds.push(fd);
        }
        Ok(inst)
    }

    fn open(&self, rel: &str) -> Result<i32, String> {
        let flags = libc::O_CREAT | libc::O_RDWR;
        let fd = match &self.env {
            Env::Ours { p, .. } => p
                .open(format!("/bench/{rel}"), flags, 0o644)
                .map_err(|e| format!("{rel}: {e}"))?,
            Env::Host(dir) => sys::create(&dir.cpath(rel))?,
        };
        Ok(fd)
    }

    /// `fcntl(fd, cmd, {ty, SEEK_SET, 0, len})`: true on success.
    #[inline]
    fn fcntl(&self, fd: i32, cmd: i32, ty: i32) -> bool {
        match &self.env {
            Env::Ours { p, .. } => {
                let mut fl = Flock {
                    l_type: ty as i16,
                    l_whence: libc::SEEK_SET as i16,
                    l_start: 0,
                    l_len: self.len,
                    l_pid: 0,
                };
                p.fcntl(fd, cmd, FcntlArg::Flock(&mut fl)).is_ok()
            }
            Env::Host(_) => sys::lock(fd, cmd, ty, self.len),
        }
    }
}

impl Instance for LocksInst {
    fn worker(&self, thread: usize) -> Box<dyn FnMut() -> u64 + '_> {
        let fd = self.fds[thread];
        let lock_cmd = if self.wait_cmd != 0 {
            self.wait_cmd
        } else {
            self.set_cmd
        };
        Box::new(move || {
            for _ in 0..BATCH {
                if self.fcntl(fd, lock_cmd, libc::F_WRLCK) {
                    let unlocked = self.fcntl(fd, self.set_cmd, libc::F_UNLCK);
                    debug_assert!(unlocked, "unlock cannot fail");
                }
            }
            BATCH
        })
    }
}

impl Drop for LocksInst {
    fn drop(&mut self) {
        match &self.env {
            Env::Ours { p, .. } => {
                for &fd in &self.fds {
                    let _ = p.close(fd);
                }
            }
            // The directory goes with the HostDir, after this.
            Env::Host(_) => self.fds.iter().for_each(|&fd| sys::close(fd)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workloads::test_support::run_every_design;

    #[test]
    fn every_locks_workload_runs_on_two_threads_under_each_design() {
        for w in workloads() {
            for (design, ops) in run_every_design(&*w, 2, 20) {
                assert_eq!(ops, [20 * BATCH; 2], "{} {design}", w.name());
            }
        }
    }

    /// The workloads really lock: while a worker's descriptor holds the lock, another
    /// worker's attempt on the shared file fails, and after the batch nothing is held.
    #[test]
    fn same_file_workers_are_distinct_owners() {
        for design in Design::ALL {
            let inst = LocksInst::new(Kind::Same, design, 2).unwrap();
            let (a, b) = (inst.fds[0], inst.fds[1]);
            assert!(inst.fcntl(a, libc::F_OFD_SETLK, libc::F_WRLCK), "{design}");
            assert!(!inst.fcntl(b, libc::F_OFD_SETLK, libc::F_WRLCK), "{design}");
            assert!(inst.fcntl(a, libc::F_OFD_SETLK, libc::F_UNLCK), "{design}");
            let mut work = inst.worker(1);
            assert_eq!(work(), BATCH);
            drop(work);
            assert!(inst.fcntl(a, libc::F_OFD_SETLK, libc::F_WRLCK), "{design}");
        }
    }
}
