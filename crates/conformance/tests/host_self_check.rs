//! Every script on two host backends in two different tmpfs directories: they must agree.
//! This validates the harness (fork/chroot/credential switching, slot handling, outcome
//! transport) and that every case is deterministic on the reference.

use std::collections::HashSet;

use scalevfs_conformance::{cases, known, run_case, Backend, HostBackend, Outcome, Report, Script};

fn root() -> bool {
    // SAFETY: no preconditions.
    unsafe { libc::geteuid() == 0 }
}

#[test]
fn suite_is_large_and_names_are_unique() {
    let all = cases::all();
    assert!(all.len() >= 300, "only {} cases", all.len());
    let mut seen = HashSet::new();
    for s in &all {
        assert!(
            seen.insert(s.name.clone()),
            "duplicate case name {}",
            s.name
        );
        assert!(!s.steps.is_empty(), "{} has no steps", s.name);
    }
    // Every deliberate difference names a real case and is documented in the README.
    let readme = include_str!("../README.md");
    for k in known::KNOWN_DIFFERENCES {
        assert!(
            seen.contains(k.case),
            "known difference {} is not a case",
            k.case
        );
        assert!(!k.reason.is_empty(), "{} has no reason", k.case);
        assert!(
            readme.contains(k.case),
            "{} is not listed in README.md",
            k.case
        );
    }
}

#[test]
fn host_agrees_with_host() {
    if !root() {
        eprintln!("host_self_check needs root (chroot, setuid); skipped");
        return;
    }
    let a = HostBackend::new().expect("host backend A");
    let b = HostBackend::new().expect("host backend B");
    assert_ne!(a.base(), b.base());
    let all = cases::all();
    let report = Report::run(&a, &b, &all);
    let bad: Vec<_> = report.cases.iter().filter(|c| !c.agrees()).collect();
    for c in &bad {
        eprintln!("{}", c.render("A", "B"));
    }
    assert!(
        bad.is_empty(),
        "{} of {} cases differ between two host runs",
        bad.len(),
        all.len()
    );
    // The harness itself must never have failed on the reference.
    for c in &report.cases {
        for (i, o) in c.a.iter().enumerate() {
            assert!(
                !matches!(o, Outcome::Harness(_)),
                "{} step {i}: {o}",
                c.script.name
            );
        }
        assert_eq!(c.a.len(), c.script.steps.len(), "{}", c.script.name);
    }
    eprintln!("{}", report.summary(0));
}

/// A backend that changes one outcome of the host's run: the comparison must catch it and
/// point at that step. This checks the checker.
struct Mutant<'a>(&'a HostBackend);

impl Backend for Mutant<'_> {
    fn describe(&self) -> String {
        "mutated host".into()
    }
    fn run(&self, script: &Script) -> Vec<Outcome> {
        let mut out = self.0.run(script);
        if let Some(o) = out.iter_mut().find(|o| matches!(o, Outcome::Err(_))) {
            *o = Outcome::Err(libc::EEXIST);
        }
        out
    }
}

#[test]
fn mutated_outcomes_are_caught() {
    if !root() {
        eprintln!("needs root; skipped");
        return;
    }
    let host = HostBackend::new().expect("host");
    let mutant = Mutant(&host);
    let mut s = Script::new("check/mutant");
    s.mkdir("d", 0o755)
        .file("d/f", 0o644, "x")
        .rmdir("d")
        .stat("d");
    let r = run_case(&host, &mutant, &s);
    // Step 4 is the rmdir: ENOTEMPTY on the host, EEXIST on the mutant.
    assert_eq!(r.differing, vec![4], "{}", r.render("host", "mutant"));
    assert!(r.render("host", "mutant").contains("ENOTEMPTY"));
    let report = Report {
        a_name: host.describe(),
        b_name: mutant.describe(),
        cases: vec![r],
    };
    assert_eq!(report.unexpected().len(), 1);
    assert!(report.summary(5).contains("1 cases, 1 differ"));
}

#[test]
fn non_tmpfs_reference_is_refused_clearly() {
    if !root() {
        return;
    }
    // The crate directory is on the worktree's file system; if that happens to be tmpfs
    // there is nothing to check.
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    if scalevfs_conformance::host::is_tmpfs(dir).unwrap() {
        return;
    }
    let err = HostBackend::new_tmpfs_under(dir)
        .err()
        .expect("must refuse");
    assert!(err.contains("is not a tmpfs"), "{err}");
}

#[test]
fn private_tmpfs_agrees_with_dev_shm() {
    if !root() {
        return;
    }
    let private = match HostBackend::private_tmpfs() {
        Ok(b) => b,
        Err(e) => {
            eprintln!("cannot mount a tmpfs here ({e}); skipped");
            return;
        }
    };
    let shm = HostBackend::new().expect("host");
    let some: Vec<Script> = cases::all().into_iter().step_by(25).collect();
    let report = Report::run(&shm, &private, &some);
    assert!(report.unexpected().is_empty(), "{}", report.summary(5));
}
