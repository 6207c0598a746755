//! Random lock scripts against the host kernel.
//!
//! Three owners (processes), three descriptor slots each, one file. The steps are the
//! calls that never block: `F_SETLK`, `F_GETLK` and their OFD forms with small, negative,
//! to-EOF and overflowing ranges from every `whence`, `flock` with `LOCK_NB`, `open` with
//! each access mode, `close`, `dup`, `lseek` and `ftruncate` (which move `SEEK_CUR` and
//! `SEEK_END`), and the file's lock listing. Ranges are small so that locks overlap,
//! split, merge and conflict. Every script ends with the listing, so a difference in the
//! locks held shows even when no call's result differed. Proptest shrinks a failing
//! script to a short one.
//!
//! CI runs [`CI_CASES`] scripts; `LOCKS_CASES` and `LOCKS_SEED` run more, by hand.

use super::*;
use crate::common::{run_random_scripts, soak_settings};
use proptest::prelude::*;

const OWNERS: usize = 3;
const SLOTS: usize = 3;
/// Scripts per CI run.
const CI_CASES: u32 = 160;

fn slot() -> impl Strategy<Value = usize> {
    0..SLOTS
}

fn lock_type() -> impl Strategy<Value = i32> {
    prop_oneof![10 => Just(F_WRLCK), 10 => Just(F_RDLCK), 5 => Just(F_UNLCK), 1 => Just(7)]
}

fn whence() -> impl Strategy<Value = i32> {
    prop_oneof![20 => Just(SEEK_SET), 4 => Just(SEEK_CUR), 4 => Just(SEEK_END), 1 => Just(9)]
}

fn start() -> impl Strategy<Value = i64> {
    prop_oneof![
        24 => -3i64..14,
        1 => prop::sample::select(vec![i64::MAX, i64::MAX - 4, i64::MIN, i64::MAX / 2]),
    ]
}

fn len() -> impl Strategy<Value = i64> {
    prop_oneof![
        3 => Just(0i64),
        12 => -4i64..8,
        1 => prop::sample::select(vec![i64::MAX, i64::MIN, i64::MAX - 2]),
    ]
}

fn fcntl() -> impl Strategy<Value = Op> {
    let cmd = prop_oneof![
        4 => Just(F_SETLK),
        3 => Just(F_GETLK),
        4 => Just(F_OFD_SETLK),
        3 => Just(F_OFD_GETLK),
    ];
    let pid = prop_oneof![12 => Just(0), 1 => Just(1)];
    (slot(), cmd, lock_type(), whence(), start(), len(), pid)
        .prop_map(|(s, cmd, ty, w, st, l, pid)| Op::Fcntl(s, cmd, Fl(ty, w, st, l, pid)))
}

fn op() -> impl Strategy<Value = Op> {
    let flock = prop::sample::select(vec![
        LOCK_SH | LOCK_NB,
        LOCK_EX | LOCK_NB,
        LOCK_UN,
        LOCK_UN | LOCK_NB,
        LOCK_NB,
        LOCK_SH | LOCK_EX | LOCK_NB,
    ]);
    prop_oneof![
        2 => (slot(), prop::sample::select(vec![O_RDWR, O_RDWR, O_RDONLY, O_WRONLY]))
            .prop_map(|(s, f)| Op::Open(s, f)),
        1 => slot().prop_map(Op::Close),
        1 => (slot(), slot()).prop_map(|(to, from)| Op::Dup(to, from)),
        10 => fcntl(),
        3 => (slot(), flock).prop_map(|(s, o)| Op::Flock(s, o)),
        1 => (slot(), 0i64..12).prop_map(|(s, off)| Op::Seek(s, off)),
        1 => (slot(), 0i64..12).prop_map(|(s, len)| Op::Truncate(s, len)),
    ]
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        10 => (0..OWNERS, op()).prop_map(|(o, op)| Do(o, op)),
        1 => Just(List),
    ]
}

/// Every owner starts with its slots open (read-write, read-write, read-only), so that
/// most steps act on a descriptor; the generated steps follow, then the listing.
fn script(max_len: usize) -> impl Strategy<Value = Vec<Step>> {
    prop::collection::vec(step(), 1..=max_len).prop_map(|body| {
        let modes = [O_RDWR, O_RDWR, O_RDONLY];
        let mut s: Vec<Step> = (0..OWNERS)
            .flat_map(|o| (0..SLOTS).map(move |k| Do(o, Op::Open(k, modes[k]))))
            .collect();
        s.extend(body);
        s.push(List);
        s
    })
}

/// Runs `cases` scripts from `seed` and panics with the first difference, shrunk.
fn run(cases: u32, seed: u64, max_len: usize) {
    run_random_scripts(cases, seed, script(max_len), |steps| {
        differences(OWNERS, steps)
    });
}

#[test]
fn random_lock_scripts_agree_with_the_host() {
    run(CI_CASES, 1, 30);
}

/// A longer run, by hand: `LOCKS_CASES=5000 LOCKS_SEED=7 cargo test --release --test
/// locks_vs_host -- --ignored soak`.
#[test]
#[ignore]
fn random_lock_scripts_soak() {
    let (cases, seed, max_len) = soak_settings("LOCKS", 2000, 60);
    run(cases, seed, max_len);
}
