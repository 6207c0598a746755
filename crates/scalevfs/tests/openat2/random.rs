//! Random `openat2` calls against the host kernel, on the tree of the fixed cases.
//!
//! Each script is a list of calls on a fresh tree. A path is a name in `sandbox` followed
//! by up to two components from the tree's names, `.`, `..` and an empty one (so `//`),
//! with or without a leading and a trailing slash; the flags include `O_PATH`, `O_NOFOLLOW`, `O_DIRECTORY`, `O_CREAT`,
//! `O_EXCL` and `O_TRUNC`; `resolve` is any set of the `RESOLVE_*` flags; the start is any
//! of the fixed cases' directories. So symlinks that climb, jump to `/`, loop or dangle
//! meet every scoping flag, from every kind of descriptor, and creates change what later
//! calls find. A `RESOLVE_CACHED` call may be `EAGAIN` on either side (see the fixed
//! cases).
//!
//! CI runs [`CI_CASES`] scripts; `OPENAT2_CASES`, `OPENAT2_SEED` and `OPENAT2_LEN` run
//! more, by hand (`--ignored random_openat2_soak`).

use super::*;
use crate::common::{run_random_scripts, soak_settings};
use proptest::prelude::*;

const CI_CASES: u32 = 64;

/// Names that resolve to something in `sandbox` (most of its symlinks), and names that
/// resolve only somewhere else or nowhere (`x`, `new`), `.`, `..` and an empty one.
const FIRST: &[&str] = &[
    "a",
    "both",
    "lnk_rel",
    "lnk_abs",
    "lnk_up",
    "lnk_dir",
    "lnk_mid_up",
    "lnk_chain",
    "lnk_chain_abs",
    "lnk_both_abs",
    "lnk_both_up",
    "lnk_dotdot",
    "lnk_root",
    "lnk_dotdot_abs",
    "lnk_loop",
    "lnk_dangle_up",
    "lnk_dangle_abs",
    "lnk_dangle_in",
    "lnk_dangle_mid",
    "lnk_dangle_dir",
    "lnk_newabs",
];
const OTHER: &[&str] = &[
    "b", "f", "outside", "sandbox", "mv", "x", "new", ".", "..", "", "lnk_a_up", "lnk_a_ok",
];

fn component() -> impl Strategy<Value = &'static str> {
    prop_oneof![
        3 => prop::sample::select(FIRST),
        2 => prop::sample::select(OTHER),
    ]
}

fn path() -> impl Strategy<Value = String> {
    (
        prop::bool::weighted(0.15),
        prop::sample::select(FIRST),
        prop::collection::vec(component(), 0..3),
        prop::bool::weighted(0.15),
    )
        .prop_map(|(lead, first, rest, trail)| {
            let mut p = std::iter::once(first)
                .chain(rest)
                .collect::<Vec<_>>()
                .join("/");
            if lead {
                p.insert(0, '/');
            }
            if trail {
                p.push('/');
            }
            p
        })
}

fn flags() -> impl Strategy<Value = i32> {
    use libc::{O_EXCL, O_TRUNC};
    prop::sample::select(vec![
        O_RDONLY,
        O_RDONLY,
        O_DIRECTORY,
        O_PATH,
        O_PATH | O_NOFOLLOW,
        O_NOFOLLOW,
        O_RDWR,
        O_CREAT | O_WRONLY,
        O_CREAT | O_EXCL | O_WRONLY,
        O_CREAT | O_WRONLY | O_NOFOLLOW,
        O_WRONLY | O_TRUNC,
        O_PATH | O_DIRECTORY,
    ])
}

fn resolve() -> impl Strategy<Value = u64> {
    let bit = |p: f64, b: u64| prop::bool::weighted(p).prop_map(move |on| if on { b } else { 0 });
    let scope = prop_oneof![
        8 => Just(0),
        6 => Just(BENEATH),
        6 => Just(IN_ROOT),
        1 => Just(BENEATH | IN_ROOT),
    ];
    (
        scope,
        bit(0.12, NO_SYMLINKS),
        bit(0.2, NO_XDEV),
        bit(0.1, NO_MAGICLINKS),
        bit(0.08, CACHED),
    )
        .prop_map(|(a, c, d, e, f)| a | c | d | e | f)
}

fn dir() -> impl Strategy<Value = Dir> {
    use Dir::*;
    prop_oneof![
        12 => Just(Sandbox),
        3 => Just(Cwd),
        1 => prop::sample::select(vec![File, Bad, Removed, Moved, Link]),
    ]
}

type OwnedCase = (Dir, String, i32, u64, u64);

fn case() -> impl Strategy<Value = OwnedCase> {
    (dir(), path(), flags(), resolve())
        .prop_map(|(d, p, f, r)| (d, p, f, if f & O_CREAT != 0 { 0o600 } else { 0 }, r))
}

/// The first call whose outcome differs from the host's, over both designs.
fn differences(script: &[OwnedCase]) -> Option<String> {
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let cases: Vec<Case<'_>> = script
        .iter()
        .map(|(d, p, f, m, r)| (*d, p.as_str(), *f, *m, *r))
        .collect();
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let base = format!(
        "/dev/shm/scalevfs-openat2-random-{}-{n}",
        std::process::id()
    );
    std::fs::create_dir(&base).unwrap();
    let host = host_run(&base, &cases);
    std::fs::remove_dir_all(&base).unwrap();
    // Warm caches (rcu-walk where it can) in both designs, and cold ones (ref-walk).
    for (locking, cold) in [
        (Locking::Scalable, false),
        (Locking::Legacy, false),
        (Locking::Scalable, true),
    ] {
        let ours = ours_run(locking, cold, &cases);
        for ((case, h), o) in cases.iter().zip(&host).zip(&ours) {
            let cached_eagain =
                case.4 & CACHED != 0 && (*h == Err(libc::EAGAIN) || *o == Err(libc::EAGAIN));
            if h != o && !cached_eagain {
                return Some(format!(
                    "{case:?} ({locking:?}, cold {cold}): host {h:?}, ours {o:?}"
                ));
            }
        }
    }
    None
}

fn run(cases: u32, seed: u64, max_len: usize) {
    let script = prop::collection::vec(case(), 1..=max_len);
    run_random_scripts(cases, seed, script, |s| differences(s));
}

#[test]
fn random_openat2_calls_agree_with_the_host() {
    if !std::path::Path::new("/dev/shm").is_dir() {
        eprintln!("no /dev/shm: skipping");
        return;
    }
    run(CI_CASES, 1, 24);
}

/// A longer run, by hand: `OPENAT2_CASES=3000 OPENAT2_SEED=7 cargo test --release --test
/// openat2 -- --ignored random_openat2_soak`.
#[test]
#[ignore]
fn random_openat2_soak() {
    let (cases, seed, max_len) = soak_settings("OPENAT2", 1000, 40);
    run(cases, seed, max_len);
}
