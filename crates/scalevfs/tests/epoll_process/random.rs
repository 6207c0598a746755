//! Random epoll scripts against the host kernel.
//!
//! Two epoll instances, two non-blocking pipes, an eventfd, a semaphore eventfd, a regular
//! file and two slots for `dup`s. The steps: `epoll_ctl` (each op, an invalid one, masks of
//! `IN`/`OUT`/`ET`/`ONESHOT`/`RDHUP`/`PRI`/`EXCLUSIVE`, either epoll as the target, so
//! nesting and loops), `epoll_wait` with 0 to 8 events and no wait, `read` and `write` of
//! sizes that empty and fill a pipe and of every eventfd value class, `close`, `dup`, and
//! `poll`. So registrations outlive a closed descriptor through a `dup`, ends hang up,
//! one-shot items disarm, and edge-triggered items fire once per change. Every result is
//! logged with the ready events in the order they came; descriptor numbers never are.
//! Nothing blocks: every descriptor is non-blocking and every wait has a zero timeout.
//! After each script every descriptor is closed and the VFS dropped, and the teardown
//! must find nothing still referenced (no epoll keeps a file alive).
//!
//! CI runs [`CI_CASES`] scripts; `EPOLL_CASES`, `EPOLL_SEED` and `EPOLL_LEN` run more, by
//! hand.

use super::*;
use crate::common::{run_random_scripts, soak_settings};
use proptest::prelude::*;

/// The objects, by slot.
const EP0: usize = 0;
const EP1: usize = 1;
const DUPS: [usize; 2] = [9, 10];
const NSLOTS: usize = 11;
const NAMES: [&str; NSLOTS] = [
    "ep0", "ep1", "pipeA.r", "pipeA.w", "pipeB.r", "pipeB.w", "efd", "efd.sem", "file", "dup0",
    "dup1",
];
const CI_CASES: u32 = 300;

#[derive(Clone, Debug)]
enum Step {
    Ctl {
        ep: usize,
        op: i32,
        target: usize,
        /// `None`: a null event pointer.
        ev: Option<(u32, u64)>,
    },
    Wait {
        ep: usize,
        max: usize,
    },
    Write {
        target: usize,
        bytes: Payload,
    },
    Read {
        target: usize,
        n: usize,
    },
    Close(usize),
    /// Closes the dup slot if open, then `dup`s `from` into it.
    Dup {
        into: usize,
        from: usize,
    },
    Poll(Vec<(usize, i16)>),
}

/// What a write sends: for an eventfd, a value (or a short buffer).
#[derive(Clone, Copy, Debug)]
enum Payload {
    Byte,
    Value(u64),
    Short,
    /// More than a pipe holds.
    Flood,
}

impl Payload {
    fn bytes(self) -> Vec<u8> {
        match self {
            Payload::Byte => b"x".to_vec(),
            Payload::Value(v) => v.to_ne_bytes().to_vec(),
            Payload::Short => vec![1, 0, 0, 0],
            Payload::Flood => vec![7; 70_000],
        }
    }
}

fn slot() -> impl Strategy<Value = usize> {
    0..NSLOTS
}

/// A slot, mostly one that can be registered and become ready (pipe ends, eventfds and
/// their `dup`s).
fn pollable() -> impl Strategy<Value = usize> {
    prop_oneof![10 => 2..8usize, 3 => prop::sample::select(DUPS.to_vec()), 2 => slot()]
}

/// A slot to write to (mostly a pipe's write end or an eventfd) or to read from.
fn writable() -> impl Strategy<Value = usize> {
    prop_oneof![6 => prop::sample::select(vec![3usize, 5, 6, 7]), 1 => slot()]
}
fn readable() -> impl Strategy<Value = usize> {
    prop_oneof![6 => prop::sample::select(vec![2usize, 4, 6, 7, 9]), 1 => slot()]
}

fn events() -> impl Strategy<Value = u32> {
    let bit = |p: f64, b: u32| prop::bool::weighted(p).prop_map(move |on| if on { b } else { 0 });
    (
        bit(0.6, IN),
        bit(0.4, OUT),
        bit(0.3, ET),
        bit(0.12, ONESHOT),
        bit(0.15, RDHUP),
        bit(0.05, libc::EPOLLPRI as u32),
        bit(0.05, libc::EPOLLEXCLUSIVE as u32),
    )
        .prop_map(|(a, b, c, d, e, f, g)| a | b | c | d | e | f | g)
}

fn step() -> impl Strategy<Value = Step> {
    let ep = || prop_oneof![6 => Just(EP0), 4 => Just(EP1), 1 => slot()];
    let ctl_op = prop_oneof![8 => Just(ADD), 4 => Just(MOD), 2 => Just(DEL), 1 => Just(7)];
    let payload = prop_oneof![
        3 => Just(Payload::Byte),
        3 => prop::sample::select(vec![1u64, 2, u64::MAX - 1, u64::MAX]).prop_map(Payload::Value),
        1 => Just(Payload::Short),
        1 => Just(Payload::Flood),
    ];
    let poll_events = prop::sample::select(vec![
        libc::POLLIN,
        libc::POLLOUT,
        libc::POLLIN | libc::POLLOUT,
        libc::POLLPRI | libc::POLLRDHUP,
        0,
    ]);
    prop_oneof![
        10 => (ep(), ctl_op, pollable(), events(), 0u64..3, prop::bool::weighted(0.95)).prop_map(
            |(ep, op, target, events, k, some)| Step::Ctl {
                ep,
                op,
                target,
                ev: some.then_some((events, target as u64 * 100 + k)),
            }
        ),
        6 => (ep(), prop::sample::select(vec![0usize, 1, 2, 8]))
            .prop_map(|(ep, max)| Step::Wait { ep, max }),
        6 => (writable(), payload).prop_map(|(target, bytes)| Step::Write { target, bytes }),
        4 => (readable(), prop::sample::select(vec![1usize, 4, 8, 100_000]))
            .prop_map(|(target, n)| Step::Read { target, n }),
        1 => pollable().prop_map(Step::Close),
        1 => (prop::sample::select(DUPS.to_vec()), slot())
            .prop_map(|(into, from)| Step::Dup { into, from }),
        2 => prop::collection::vec((slot(), poll_events), 1..4).prop_map(Step::Poll),
    ]
}

/// Runs `steps` on `s` from a fresh set of objects (the dup slots hold `pipeA.r` and
/// `efd`), then drains both epolls, polls every
/// slot, and closes what is left.
fn run_on(s: &dyn Sys, steps: &[Step]) -> Vec<String> {
    let mut log = Log(Vec::new());
    let mut fd = [-1i32; NSLOTS];
    fd[EP0] = s.epoll_create1(0).unwrap();
    fd[EP1] = s.epoll_create1(0).unwrap();
    [fd[2], fd[3]] = s.pipe2(libc::O_NONBLOCK).unwrap();
    [fd[4], fd[5]] = s.pipe2(libc::O_NONBLOCK).unwrap();
    fd[6] = s.eventfd(0, libc::EFD_NONBLOCK).unwrap();
    fd[7] = s
        .eventfd(0, libc::EFD_NONBLOCK | libc::EFD_SEMAPHORE)
        .unwrap();
    fd[8] = s.regular().unwrap();
    fd[DUPS[0]] = s.dup(fd[2]).unwrap();
    fd[DUPS[1]] = s.dup(fd[6]).unwrap();
    let mut all: Vec<Step> = steps.to_vec();
    all.extend([EP0, EP1].map(|ep| Step::Wait { ep, max: 16 }));
    all.push(Step::Poll(
        (0..NSLOTS)
            .map(|k| (k, libc::POLLIN | libc::POLLOUT))
            .collect(),
    ));
    for (i, step) in all.iter().enumerate() {
        let what = format!("{i} {step:?}");
        match step {
            Step::Ctl { ep, op, target, ev } => {
                log.rec(&what, s.epoll_ctl(fd[*ep], *op, fd[*target], *ev));
            }
            Step::Wait { ep, max } => log.rec(&what, s.epoll_wait(fd[*ep], *max, 0)),
            Step::Write { target, bytes } => log.rec(&what, s.write(fd[*target], &bytes.bytes())),
            Step::Read { target, n } => {
                // The length and the first bytes: a drained pipe's 64 KiB would swamp the log.
                let r = s.read(fd[*target], *n);
                log.rec(&what, r.map(|b| (b.len(), b[..b.len().min(8)].to_vec())));
            }
            Step::Close(k) => log.rec(&what, s.close(std::mem::replace(&mut fd[*k], -1))),
            Step::Dup { into, from } => {
                if fd[*into] >= 0 {
                    s.close(std::mem::replace(&mut fd[*into], -1)).unwrap();
                }
                let r = s.dup(fd[*from]);
                fd[*into] = *r.as_ref().unwrap_or(&-1);
                log.rec(&what, r.map(|_| "dup"));
            }
            Step::Poll(list) => {
                let fds: Vec<(i32, i16)> = list.iter().map(|&(k, ev)| (fd[k], ev)).collect();
                log.rec(&what, s.poll(&fds, 0));
            }
        }
    }
    for f in fd.into_iter().filter(|&f| f >= 0) {
        s.close(f).unwrap();
    }
    log.0
}

/// The first design whose log differs from the host's, with both logs.
fn differences(steps: &[Step]) -> Option<String> {
    // SAFETY: ignoring SIGPIPE (Rust's runtime already does) so EPIPE is returned.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_IGN) };
    let host = run_on(&Host, steps).join("\n");
    for locking in [Locking::Scalable, Locking::Legacy] {
        let leaked = scalevfs_vfs::core::leaked_cores();
        let ours = run_on(&Ours::new(locking), steps).join("\n");
        // Every descriptor is closed and the VFS dropped by now: a file an epoll still
        // held (a reference cycle) would make the teardown leak.
        if scalevfs_vfs::core::leaked_cores() != leaked {
            return Some(format!("scalevfs {locking:?} leaked its VFS\n{ours}"));
        }
        if ours != host {
            let slots: Vec<String> = NAMES
                .iter()
                .enumerate()
                .map(|(k, n)| format!("{k}={n}"))
                .collect();
            return Some(format!(
                "host and scalevfs {locking:?} differ (slots {})\n--- host:\n{host}\n--- scalevfs:\n{ours}",
                slots.join(" ")
            ));
        }
    }
    None
}

/// Runs `cases` scripts from `seed` and panics with the first difference, shrunk.
fn run(cases: u32, seed: u64, max_len: usize) {
    let steps = prop::collection::vec(step(), 1..=max_len);
    run_random_scripts(cases, seed, steps, |steps| differences(steps));
}

#[test]
fn random_epoll_scripts_agree_with_the_host() {
    run(CI_CASES, 1, 30);
}

/// A longer run, by hand: `EPOLL_CASES=5000 EPOLL_SEED=7 cargo test --release --test
/// epoll_process -- --ignored soak`.
#[test]
#[ignore]
fn random_epoll_scripts_soak() {
    let (cases, seed, max_len) = soak_settings("EPOLL", 3000, 60);
    run(cases, seed, max_len);
}
