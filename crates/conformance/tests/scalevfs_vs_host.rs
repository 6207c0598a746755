//! Every scripted case on the host kernel (tmpfs) and on scalevfs: they must agree, except
//! for cases listed in `known::KNOWN_DIFFERENCES` (each with its reason, also in README).
//!

use scalevfs::{Locking, VfsOptions};
use scalevfs_conformance::{cases, HostBackend, Report, ScalevfsBackend};

#[test]
fn scalevfs_agrees_with_host() {
    // SAFETY: no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        panic!("the host side needs root (chroot, setuid); run as root as CI does");
    }
    let host = HostBackend::new().expect("host backend");
    let all = cases::all();
    // Both designs must behave like Linux: the scalable one and the legacy ablation.
    for locking in [Locking::Scalable, Locking::Legacy] {
        let svfs = ScalevfsBackend {
            options: VfsOptions {
                locking,
                ..VfsOptions::default()
            },
            ..ScalevfsBackend::default()
        };
        let report = Report::run(&host, &svfs, &all);
        println!("{}", report.summary(40));
        let bad = report.unexpected();
        assert!(
            bad.is_empty(),
            "{} of {} cases differ between the host and scalevfs with {locking:?} locking \
             (see the report above)",
            bad.len(),
            all.len()
        );
    }
}
