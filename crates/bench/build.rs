//! Records the commit the binary is built from (`SCALEVFS_BUILD_COMMIT`), so that a report
//! made by a binary carried to another machine names the code that ran, not the checkout
//! it happens to run in. Nothing is recorded outside a git checkout.

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
        .filter(|s| !s.is_empty())
}

fn main() {
    // Build again when HEAD moves: `HEAD` changes on a checkout, its reflog on every
    // commit, reset or checkout (the paths `git` gives also work in a worktree).
    for path in ["HEAD", "logs/HEAD"] {
        if let Some(p) = git(&["rev-parse", "--git-path", path]) {
            println!("cargo:rerun-if-changed={p}");
        }
    }
    if let Some(head) = git(&["rev-parse", "HEAD"]) {
        println!("cargo:rustc-env=SCALEVFS_BUILD_COMMIT={head}");
    }
}
