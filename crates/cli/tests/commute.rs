//! `scalevfs commute`: the fixture conflict is found and attributed, `--check` retraces and
//! fails on it, bad input is an error, non-commuting cases are reported as such.

use std::process::Command;

fn scalevfs() -> Command {
    Command::new(env!("CARGO_BIN_EXE_scalevfs"))
}

fn have_valgrind() -> bool {
    let ok = Command::new("valgrind")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        // scripts/test.sh installs it; CI must not pass without the traced tests.
        assert!(
            std::env::var_os("CI").is_none(),
            "valgrind is missing (apt-get install valgrind)"
        );
        eprintln!("skipping: valgrind is not installed (apt-get install valgrind)");
    }
    ok
}

#[test]
fn fixture_conflict_is_reported_with_file_and_line() {
    if !have_valgrind() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = scalevfs()
        .args(["commute", "--fixtures", "--case", "fixture/*", "--out"])
        .arg(dir.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for form in ["per-process", "shared"] {
        let row = stdout
            .lines()
            .find(|l| l.starts_with(&format!("| fixture/shared-counter | {form} |")))
            .unwrap_or_else(|| panic!("no {form} row in\n{stdout}"));
        assert!(row.contains("| yes | **no** |"), "{row}");
        assert!(
            row.contains("bump (crates/commute/src/catalogue.rs:"),
            "attribution missing: {row}"
        );
    }
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("results.json")).unwrap())
            .unwrap();
    let case = &json["cases"][0];
    assert_eq!(case["conflict_free"], false);
    assert!(case["conflicting_lines"].as_u64().unwrap() >= 1);
    assert!(case["lines"][0]["a_chain"]
        .as_str()
        .unwrap()
        .contains("fetch_add"));
}

/// A listed case that conflicts is traced once more, each in a child of its own, and the
/// check fails when it conflicts again (the fixture's shared counter always does).
#[test]
fn check_retraces_each_listed_conflict_and_fails_when_it_repeats() {
    if !have_valgrind() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let list = dir.path().join("list.txt");
    std::fs::write(
        &list,
        "fixture/shared-counter@per-process\nfixture/shared-counter@shared\n",
    )
    .unwrap();
    let out = scalevfs()
        .args(["commute", "--fixtures", "--case", "fixture/*", "--check"])
        .arg(&list)
        .arg("--out")
        .arg(dir.path())
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(!out.status.success(), "{stdout}\n{stderr}");
    assert!(
        stderr.contains("tracing the 2 listed cases that conflicted once more"),
        "{stderr}"
    );
    assert!(
        stdout.contains("2 listed cases are no longer conflict-free"),
        "{stdout}"
    );
}

#[test]
fn unknown_case_lists_the_names() {
    let out = scalevfs()
        .args(["commute", "--case", "no-such-call/*", "--no-trace"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no case matches \"no-such-call/*\""), "{err}");
    assert!(err.contains("stat/diff-dirs"), "{err}");
}

#[test]
fn missing_valgrind_says_how_to_install_it() {
    let out = scalevfs()
        .args(["commute", "--case", "stat/diff-dirs"])
        .env("PATH", "/nonexistent")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("apt-get install valgrind"), "{err}");
}

#[test]
fn noncommuting_cases_are_reported_not_counted() {
    let dir = tempfile::tempdir().unwrap();
    let out = scalevfs()
        .args([
            "commute",
            "--no-trace",
            "--case",
            "chdir/diff-dirs",
            "--case",
        ])
        .arg("open/diff-dirs")
        .arg("--out")
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(out.status.success());
    let stdout = String::from_utf8_lossy(&out.stdout);
    let shared_chdir = stdout
        .lines()
        .find(|l| l.starts_with("| chdir/diff-dirs | shared |"))
        .unwrap();
    assert!(shared_chdir.contains("| no |"), "{shared_chdir}");
    assert!(shared_chdir.contains("cwd"), "{shared_chdir}");
    let shared_open = stdout
        .lines()
        .find(|l| l.starts_with("| open/diff-dirs | shared |"))
        .unwrap();
    assert!(
        shared_open.contains("lowest free descriptor"),
        "{shared_open}"
    );
    assert!(stdout.contains("2 non-commuting (not counted)"), "{stdout}");
}
