//! Every scripted case on the host kernel (tmpfs) and on scalevfs: they must agree, except
//! for cases listed in `known::KNOWN_DIFFERENCES` (each with its reason, also in README).
//!
//! Ignored until the VFS core lands (on the harness branch every `Process` method returns
//! ENOSYS). Run it with `cargo test -p scalevfs-conformance --test scalevfs_vs_host --
//! --ignored`; the owner removes the `#[ignore]` when merging the VFS.

use scalevfs_conformance::{cases, HostBackend, Report, ScalevfsBackend};

#[test]
#[ignore = "needs the scalevfs system-call API (issue 3); run with --ignored"]
fn scalevfs_agrees_with_host() {
    // SAFETY: no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        panic!("the host side needs root (chroot, setuid); run as root as CI does");
    }
    let host = HostBackend::new().expect("host backend");
    let svfs = ScalevfsBackend::default();
    let all = cases::all();
    let report = Report::run(&host, &svfs, &all);
    println!("{}", report.summary(40));
    let bad = report.unexpected();
    assert!(
        bad.is_empty(),
        "{} of {} cases differ between the host and scalevfs (see the report above)",
        bad.len(),
        all.len()
    );
}
