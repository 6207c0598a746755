//! proptest: random operation sequences on the host kernel and on scalevfs, compared
//! step by step, shrunk to a minimal differing sequence on failure.
//!
//! `host_vs_host_random` checks that generated scripts are deterministic on the reference;
//! `scalevfs_vs_host_random` compares scalevfs with it.

use proptest::test_runner::{Config, TestCaseError, TestRunner};
use scalevfs_conformance::{random, run_case, Backend, HostBackend, ScalevfsBackend};

fn differential(a: &dyn Backend, b: &dyn Backend, cases: u32) {
    let mut runner = TestRunner::new(Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    });
    let result = runner.run(&random::script(25), |script| {
        let r = run_case(a, b, &script);
        if r.agrees() {
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
