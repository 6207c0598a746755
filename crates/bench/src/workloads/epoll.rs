//! epoll workloads (the refcounted-teardown series: no global `epmutex` on close).
//!
//! * `epoll-churn`: the connection-rate shape. Each thread has its own epoll instance and
//!   loops: create an eventfd (a "connection"), register it, signal it, `epoll_wait` for
//!   it, close it *without* `EPOLL_CTL_DEL`. The close runs the watched-file release path:
//!   legacy takes the global `epmutex` there (the series' "before"), scalable only the
//!   file's and its own instance's locks.
//! * `epoll-churn-shared`: the same with one instance shared by all threads
//!   (edge-triggered; the wait does not block and returns whatever is ready).
//! * `epoll-churn-fd`: `epoll-churn` through the system-call API: each thread is a
//!   `Process` (an nginx worker) on one shared `Vfs`, and each connection is
//!   `eventfd` + `epoll_ctl` + `write` + `epoll_wait` + `close` on descriptors, so the
//!   fd table, the open file description and its last-close path are measured too.
//! * `epoll-wait`: `perf bench epoll wait`'s shape: each thread's instance watches
//!   [`WATCHED`] eventfds of which [`READY`] are always readable (level-triggered); one
//!   operation is one `epoll_wait` returning those. No release path: legacy and scalable
//!   should match; it measures the scan.
//!
//! Host: the same system calls on the host kernel (eventfd2, epoll_ctl, write,
//! epoll_wait, close).

use std::sync::Arc;

use scalevfs::{Credentials, Process, Vfs, VfsOptions};
use scalevfs_vfs::epoll::{Epoll, EpollContext, EpollEvent, FdKey, EPOLL_CTL_ADD};
use scalevfs_vfs::eventfd::{EventFd, EFD_NONBLOCK};
use scalevfs_vfs::poll::events::{EPOLLET, EPOLLIN};

use crate::{Design, Instance, Workload};

/// Connections per worker call in the churn workloads.
const CHURN_BATCH: u64 = 16;
/// Waits per worker call in `epoll-wait`.
const WAIT_BATCH: u64 = 64;
/// Watched eventfds per thread in `epoll-wait`.
pub const WATCHED: usize = 256;
/// Of which this many are ready.
pub const READY: usize = 4;

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Kind {
    Churn,
    ChurnShared,
    ChurnFd,
    Wait,
}

struct EpollWorkload(Kind);

/// This module's workloads, in the order the report lists them.
pub fn workloads() -> Vec<Box<dyn Workload>> {
    vec![
        Box::new(EpollWorkload(Kind::Churn)),
        Box::new(EpollWorkload(Kind::ChurnShared)),
        Box::new(EpollWorkload(Kind::ChurnFd)),
        Box::new(EpollWorkload(Kind::Wait)),
    ]
}

impl Workload for EpollWorkload {
    fn name(&self) -> &'static str {
        match self.0 {
            Kind::Churn => "epoll-churn",
            Kind::ChurnShared => "epoll-churn-shared",
            Kind::ChurnFd => "epoll-churn-fd",
            Kind::Wait => "epoll-wait",
        }
    }
    fn description(&self) -> &'static str {
        match self.0 {
            Kind::Churn => {
                "epoll teardown: per-thread epoll; each op creates an eventfd, registers it, \
                 signals it, waits for it and closes it without EPOLL_CTL_DEL"
            }
            Kind::ChurnShared => {
                "epoll teardown: as epoll-churn, all threads registering in one shared epoll \
                 instance (edge-triggered, non-blocking wait)"
            }
            Kind::ChurnFd => {
                "epoll teardown through Process: per-thread process and epoll fd; each op is \
                 eventfd, epoll_ctl, write, epoll_wait and close (no DEL) on descriptors"
            }
            Kind::Wait => {
                "perf bench epoll wait shape: per-thread epoll watching 256 eventfds, 4 \
                 ready; one op is one epoll_wait"
            }
        }
    }
    fn designs(&self) -> &'static [Design] {
        &Design::ALL
    }
    fn setup(&self, design: Design, _threads: usize) -> Result<Box<dyn Instance>, String> {
        let ctx = design.locking().map(EpollContext::new);
        let shared = match (self.0, design) {
            (Kind::ChurnShared, Design::Host) => Shared::Host(HostFd::epoll()?),
            (Kind::ChurnShared, _) => {
                Shared::Ours(Epoll::new(ctx.as_ref().expect("non-host design")))
            }
            _ => Shared::None,
        };
        let vfs = match (self.0, design.locking()) {
            (Kind::ChurnFd, Some(locking)) => Some(Vfs::new(VfsOptions {
                locking,
                ..Default::default()
            })),
            _ => None,
        };
        Ok(Box::new(EpollInstance {
            kind: self.0,
            ctx,
            shared,
            vfs,
        }))
    }
}

enum Shared {
    None,
    Ours(Epoll),
    Host(HostFd),
}

struct EpollInstance {
    kind: Kind,
    /// `None` for the host design.
    ctx: Option<Arc<EpollContext>>,
    shared: Shared,
    /// `epoll-churn-fd` on scalevfs: the tree the per-thread processes share.
    vfs: Option<Arc<Vfs>>,
}

/// A host fd closed on drop.
struct HostFd(i32);

impl HostFd {
    fn epoll() -> Result<HostFd, String> {
        // SAFETY: plain system call.
        let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if fd < 0 {
            return Err(format!(
                "epoll_create1: {}",
                std::io::Error::last_os_error()
            ));
        }
        Ok(HostFd(fd))
    }
    fn eventfd(init: u32) -> HostFd {
        // SAFETY: plain system call.
        let fd = unsafe { libc::eventfd(init, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        assert!(fd >= 0, "eventfd: {}", std::io::Error::last_os_error());
        HostFd(fd)
    }
    fn add(&self, fd: &HostFd, events: u32, data: u64) {
        let mut ev = libc::epoll_event { events, u64: data };
        // SAFETY: valid fds and a valid event.
        let r = unsafe { libc::epoll_ctl(self.0, libc::EPOLL_CTL_ADD, fd.0, &mut ev) };
        assert_eq!(r, 0, "epoll_ctl: {}", std::io::Error::last_os_error());
    }
    fn signal(&self) {
        let v = 1u64;
        // SAFETY: writes 8 bytes from a local.
        let r = unsafe { libc::write(self.0, (&v as *const u64).cast(), 8) };
        assert_eq!(r, 8);
    }
    fn wait(&self, evs: &mut [libc::epoll_event]) -> usize {
        // SAFETY: `evs` has room for its length.
        let n = unsafe { libc::epoll_wait(self.0, evs.as_mut_ptr(), evs.len() as i32, 0) };
        assert!(n >= 0, "epoll_wait: {}", std::io::Error::last_os_error());
        n as usize
    }
}

impl Drop for HostFd {
    fn drop(&mut self) {
        // SAFETY: closes an fd this object owns.
        unsafe { libc::close(self.0) };
    }
}

fn key(thread: usize, i: u64) -> FdKey {
    FdKey {
        file: thread,
        fd: i as i32,
    }
}

const ONE: [u8; 8] = 1u64.to_ne_bytes();

impl EpollInstance {
    fn ctx(&self) -> &Arc<EpollContext> {
        self.ctx.as_ref().expect("non-host design")
    }

    /// One scalevfs connection: create, register, signal, wait, close without DEL.
    fn churn_ours(
        ctx: &EpollContext,
        ep: &Epoll,
        thread: usize,
        i: u64,
        evs: &mut [EpollEvent],
        timeout: i32,
    ) {
        let e = EventFd::new(0, EFD_NONBLOCK).expect("eventfd");
        let ev = EpollEvent::new(EPOLLIN | EPOLLET, i);
        ep.ctl(ctx, EPOLL_CTL_ADD, key(thread, i), &e.pollable(), ev)
            .expect("epoll_ctl");
        e.write(&ONE, None).expect("signal");
        let n = ep.wait(evs, timeout, None).expect("epoll_wait");
        std::hint::black_box(n);
        drop(e);
    }

    fn churn_host(ep: &HostFd, i: u64, evs: &mut [libc::epoll_event]) -> usize {
        let e = HostFd::eventfd(0);
        ep.add(&e, EPOLLIN | EPOLLET, i);
        e.signal();
        let n = ep.wait(evs);
        drop(e);
        n
    }
}

impl Instance for EpollInstance {
    fn worker(&self, thread: usize) -> Box<dyn FnMut() -> u64 + '_> {
        match (self.kind, &self.shared) {
            (Kind::Churn, _) if self.ctx.is_some() => {
                let ctx = self.ctx();
                let ep = Epoll::new(ctx);
                let mut evs = [EpollEvent::default(); 4];
                let mut i = 0u64;
                Box::new(move || {
                    for _ in 0..CHURN_BATCH {
                        // The connection is ready when waited for: a -1 timeout never
                        // sleeps here, and would expose a lost event as a hang.
                        Self::churn_ours(ctx, &ep, thread, i, &mut evs, -1);
                        i += 1;
                    }
                    CHURN_BATCH
                })
            }
            (Kind::ChurnFd, _) if self.vfs.is_some() => {
                let p = Process::new(self.vfs.as_ref().expect("checked"), Credentials::root());
                let epfd = p.epoll_create1(libc::EPOLL_CLOEXEC).expect("epoll_create1");
                let mut evs = [EpollEvent::default(); 4];
                let mut i = 0u64;
                Box::new(move || {
                    for _ in 0..CHURN_BATCH {
                        let efd = p
                            .eventfd(0, EFD_NONBLOCK | libc::EFD_CLOEXEC)
                            .expect("eventfd");
                        let ev = EpollEvent::new(EPOLLIN | EPOLLET, i);
                        p.epoll_ctl(epfd, EPOLL_CTL_ADD, efd, Some(&ev))
                            .expect("epoll_ctl");
                        p.write(efd, &ONE).expect("signal");
                        // Ready when waited for: -1 would expose a lost event as a hang.
                        let n = p.epoll_wait(epfd, &mut evs, -1).expect("epoll_wait");
                        std::hint::black_box(n);
                        p.close(efd).expect("close");
                        i += 1;
                    }
                    CHURN_BATCH
                })
            }
            // Host: the same system calls as `epoll-churn`'s host design.
            (Kind::Churn | Kind::ChurnFd, _) => {
                let ep = HostFd::epoll().expect("epoll_create1");
                let mut evs = [libc::epoll_event { events: 0, u64: 0 }; 4];
                let mut i = 0u64;
                Box::new(move || {
                    for _ in 0..CHURN_BATCH {
                        let n = Self::churn_host(&ep, i, &mut evs);
                        debug_assert_eq!(n, 1);
                        i += 1;
                    }
                    CHURN_BATCH
                })
            }
            (Kind::ChurnShared, Shared::Ours(ep)) => {
                let ctx = self.ctx();
                let mut evs = [EpollEvent::default(); 16];
                let mut i = 0u64;
                Box::new(move || {
                    for _ in 0..CHURN_BATCH {
                        Self::churn_ours(ctx, ep, thread, i, &mut evs, 0);
                        i += 1;
                    }
                    CHURN_BATCH
                })
            }
            (Kind::ChurnShared, Shared::Host(ep)) => {
                let mut evs = [libc::epoll_event { events: 0, u64: 0 }; 16];
                let mut i = 0u64;
                Box::new(move || {
                    for _ in 0..CHURN_BATCH {
                        Self::churn_host(ep, i, &mut evs);
                        i += 1;
                    }
                    CHURN_BATCH
                })
            }
            (Kind::ChurnShared, Shared::None) => unreachable!("setup makes the shared instance"),
            (Kind::Wait, _) if self.ctx.is_some() => {
                let ctx = self.ctx();
                let ep = Epoll::new(ctx);
                let files: Vec<EventFd> = (0..WATCHED)
                    .map(|i| EventFd::new((i < READY) as u32, EFD_NONBLOCK).expect("eventfd"))
                    .collect();
                for (i, f) in files.iter().enumerate() {
                    let ev = EpollEvent::new(EPOLLIN, i as u64);
                    ep.ctl(ctx, EPOLL_CTL_ADD, key(thread, i as u64), &f.pollable(), ev)
                        .expect("epoll_ctl");
                }
                let mut evs = [EpollEvent::default(); 16];
                Box::new(move || {
                    for _ in 0..WAIT_BATCH {
                        let n = ep.wait(&mut evs, 0, None).expect("epoll_wait");
                        debug_assert_eq!(n, READY);
                    }
                    std::hint::black_box(&files);
                    WAIT_BATCH
                })
            }
            (Kind::Wait, _) => {
                let ep = HostFd::epoll().expect("epoll_create1");
                let files: Vec<HostFd> = (0..WATCHED)
                    .map(|i| HostFd::eventfd((i < READY) as u32))
                    .collect();
                for (i, f) in files.iter().enumerate() {
                    ep.add(f, EPOLLIN, i as u64);
                }
                let mut evs = [libc::epoll_event { events: 0, u64: 0 }; 16];
                Box::new(move || {
                    for _ in 0..WAIT_BATCH {
                        let n = ep.wait(&mut evs);
                        debug_assert_eq!(n, READY);
                    }
                    std::hint::black_box(&files);
                    WAIT_BATCH
                })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use scalevfs_primitives::Locking;

    #[test]
    fn every_workload_runs_two_threads() {
        for w in workloads() {
            for &design in w.designs() {
                let inst = w.setup(design, 2).unwrap();
                let done: u64 = std::thread::scope(|s| {
                    let hs: Vec<_> = (0..2)
                        .map(|t| {
                            let inst = &inst;
                            s.spawn(move || {
                                let mut f = inst.worker(t);
                                (0..3).map(|_| f()).sum::<u64>()
                            })
                        })
                        .collect();
                    hs.into_iter().map(|h| h.join().unwrap()).sum()
                });
                let per_call = if w.name() == "epoll-wait" {
                    WAIT_BATCH
                } else {
                    CHURN_BATCH
                };
                assert_eq!(done, 2 * 3 * per_call, "{} {design}", w.name());
            }
        }
    }

    #[test]
    fn churn_frees_everything() {
        for locking in [Locking::Scalable, Locking::Legacy] {
            let ctx = EpollContext::with_accounting(locking);
            let inst = EpollInstance {
                kind: Kind::Churn,
                ctx: Some(ctx.clone()),
                shared: Shared::None,
                vfs: None,
            };
            assert_eq!(inst.ctx.as_ref().map(|c| c.locking()), Some(locking));
            {
                let mut f = inst.worker(0);
                for _ in 0..10 {
                    f();
                }
            }
            drop(inst);
            let a = ctx.accounting().unwrap();
            assert_eq!(a.live(), (0, 0));
            assert_eq!(
                a.items_allocated.load(std::sync::atomic::Ordering::Relaxed),
                10 * CHURN_BATCH as usize
            );
        }
    }
}
