//! proptest: random operation sequences on the host kernel and on scalevfs, compared
//! step by step, shrunk to a minimal differing sequence on failure.
//!
//! `host_vs_host_random` checks that generated scripts are deterministic on the reference;
//! `scalevfs_vs_host_random` compares scalevfs with it.

use proptest::test_runner::{Config, TestCaseError, TestRunner};
use scalevfs_conformance::{
    known, random, run_case, Backend, Fd, HostBackend, Op, ScalevfsBackend, Slot,
};

fn differential(a: &dyn Backend, b: &dyn Backend, cases: u32) {
    let mut runner = TestRunner::new(Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    });
    let result = runner.run(&random::script(25), |script| {
        let r = run_case(a, b, &script);
        // A known difference here is a step-level one (the random scripts are listed
        // nowhere): a directory resumed at a position it never returned.
        if r.agrees() || r.known.is_some() {
            Ok(())
        } else {
            Err(TestCaseError::fail(r.render("A", "B")))
        }
    });
    if let Err(e) = result {
        panic!("A = {}\nB = {}\n{e}", a.describe(), b.describe());
    }
}

fn root() -> bool {
    // SAFETY: no preconditions.
    unsafe { libc::geteuid() == 0 }
}

#[test]
fn host_vs_host_random() {
    if !root() {
        eprintln!("needs root (chroot, setuid); skipped");
        return;
    }
    let a = HostBackend::new().expect("host A");
    let b = HostBackend::new().expect("host B");
    differential(&a, &b, 64);
}

#[test]
fn scalevfs_vs_host_random() {
    assert!(root(), "the host side needs root (chroot, setuid)");
    let host = HostBackend::new().expect("host");
    let svfs = ScalevfsBackend::default();
    differential(&host, &svfs, 256);
}

/// The generated script CI once shrank to: `d` (one entry) resumed at position 4, which
/// Linux's tmpfs lists `b` from and the hashed directory nothing. It must pass as the one
/// step-level known difference, and any other step must still agree.
#[test]
fn a_directory_resumed_at_a_position_it_never_returned_is_a_known_difference() {
    assert!(root(), "the host side needs root (chroot, setuid)");
    let host = HostBackend::new().expect("host");
    let svfs = ScalevfsBackend::default();
    let d = Fd::Slot(Slot(1));
    let script = random::script_from(
        "random/resume-at-4".into(),
        vec![
            Op::Dup { fd: d, to: Slot(3) },
            Op::Lseek {
                fd: d,
                off: 4,
                whence: libc::SEEK_SET,
            },
            Op::Getdents(Fd::Slot(Slot(3))),
        ],
    );
    let r = run_case(&host, &svfs, &script);
    assert!(
        r.agrees() || r.known == Some(known::UNRETURNED_POSITION),
        "{}",
        r.render("host", "scalevfs")
    );
    // The rule names exactly the listing through the dup.
    let listing = script
        .steps
        .iter()
        .position(|op| *op == Op::Getdents(Fd::Slot(Slot(3))))
        .expect("the listing step");
    assert_eq!(
        known::unreturned_position_reads(&script, &r.a),
        vec![listing]
    );
}
