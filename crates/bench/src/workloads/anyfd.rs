//! `dcache-distinct-anyfd`: `dcache-distinct` (threads of one process, each opening,
//! reading and closing a file of its own below a 3-level path) with `O_ANYFD` on every
//! open, so that each thread takes descriptors from its CPU's range instead of the
//! lowest free one (`scalevfs::O_ANYFD`). Set beside `dcache-distinct`'s
//! scalable row in the same run, it is what giving up the lowest-descriptor rule buys.
//!
//! Host: the same calls without the flag (Linux has no `O_ANYFD`), on files in /dev/shm.

use std::ffi::CString;
use std::sync::Arc;

use scalevfs::O_ANYFD;
use scalevfs::{Credentials, Process, Vfs, VfsOptions};

use crate::workloads::host_dir::{sys, HostDir};
use crate::{Design, Instance, Workload};

/// Opens per worker call.
const BATCH: u64 = 32;

struct AnyFd;

/// This module's workloads, in the order the report lists them.
pub fn workloads() -> Vec<Box<dyn Workload>> {
    vec![Box::new(AnyFd)]
}

/// Thread `t`'s file, below a 3-level path as in `dcache-distinct`.
fn file_of(t: usize) -> String {
    format!("a/b/c/t{t}/file")
}

enum Env {
    Ours(Box<Process>),
    Host(HostDir),
}

struct AnyFdInst {
    env: Env,
}

impl Workload for AnyFd {
    fn name(&self) -> &'static str {
        "dcache-distinct-anyfd"
    }
    fn description(&self) -> &'static str {
        "dcache-distinct with O_ANYFD: open (any free descriptor, from a per-CPU range), \
         read 64 bytes, close a file of one's own (one fd table; host: without the flag)"
    }
    fn designs(&self) -> &'static [Design] {
        &[Design::Scalable, Design::Host]
    }
    fn setup(&self, design: Design, _threads: usize) -> Result<Box<dyn Instance>, String> {
        let env = match design.locking() {
            Some(locking) => {
                let vfs: Arc<Vfs> = Vfs::new(VfsOptions {
                    locking,
                    ..Default::default()
                });
                let p = Process::new(&vfs, Credentials::root());
                for d in ["/a", "/a/b", "/a/b/c"] {
                    p.mkdir(d, 0o755).map_err(|e| format!("mkdir {d}: {e:?}"))?;
                }
                Env::Ours(Box::new(p))
            }
            None => {
                let dir = HostDir::shm("anyfd")?;
                for d in ["a", "a/b", "a/b/c"] {
                    std::fs::create_dir(dir.path().join(d)).map_err(|e| e.to_string())?;
                }
                Env::Host(dir)
            }
        };
        Ok(Box::new(AnyFdInst { env }))
    }
}

impl Instance for AnyFdInst {
    fn worker(&self, thread: usize) -> Box<dyn FnMut() -> u64 + '_> {
        // Created on the worker's own thread, as in `dcache-distinct` (see there).
        let rel = file_of(thread);
        let mut buf = [0u8; 64];
        match &self.env {
            Env::Ours(p) => {
                let path = format!("/{rel}");
                p.mkdir(path.rsplit_once('/').expect("a/b/c/tN/file").0, 0o755)
                    .and_then(|()| p.write_file(&path, &[b'x'; 4096]))
                    .expect("a worker creates its own file");
                Box::new(move || {
                    for _ in 0..BATCH {
                        let fd = p
                            .open(&path, libc::O_RDONLY | O_ANYFD, 0)
                            .expect("open own file");
                        std::hint::black_box(p.pread64(fd, &mut buf, 0).expect("read"));
                        p.close(fd).expect("close");
                    }
                    BATCH
                })
            }
            Env::Host(dir) => {
                let file = dir.path().join(&rel);
                std::fs::create_dir(file.parent().expect("a/b/c/tN"))
                    .and_then(|()| std::fs::write(&file, [b'x'; 4096]))
                    .expect("a worker creates its own file");
                let path: CString = dir.cpath(&rel);
                Box::new(move || {
                    for _ in 0..BATCH {
                        let fd = sys::open(&path, libc::O_RDONLY);
                        // SAFETY: `buf` has room for 64 bytes.
                        let n = unsafe { libc::pread(fd, buf.as_mut_ptr().cast(), 64, 0) };
                        std::hint::black_box(n);
                        sys::close(fd);
                    }
                    BATCH
                })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workloads::test_support::ops_in;
    use std::time::Duration;

    /// Every design runs with a few threads and does work (the descriptor ranges
    /// themselves are tested in `scalevfs::fdtable`).
    #[test]
    fn every_design_runs() {
        for design in AnyFd.designs() {
            let inst = AnyFd.setup(*design, 3).unwrap();
            assert!(
                ops_in(&*inst, 3, Duration::from_millis(50)) > 0,
                "{design:?}"
            );
        }
    }
}
