//! Builds `tests/c/test_capi.c` with the system C compiler (`$CC`, default `cc`) against
//! `libscalevfs.a` and runs it: the C API as an embedder uses it (see the C file).

use std::path::PathBuf;
use std::process::Command;

/// The directory cargo built this package's library into for this test run
/// (`target/<profile>/deps`, where the test binary is too; `cargo test` does not copy the
/// library up to `target/<profile>`, so the copy there may be stale).
fn lib_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    exe.parent().unwrap().to_path_buf()
}

#[test]
fn c_test_program_passes() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let lib = lib_dir().join("libscalevfs.a");
    assert!(lib.exists(), "{} not built", lib.display());
    let exe = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("test_capi");
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let status = Command::new(&cc)
        .args([
            "-std=c11", "-O2", "-g", "-Wall", "-Wextra", "-Werror", "-pthread",
        ])
        .arg("-I")
        .arg(dir.join("include"))
        .arg(dir.join("tests/c/test_capi.c"))
        .arg(&lib)
        .args(["-lpthread", "-ldl", "-lm", "-o"])
        .arg(&exe)
        .status()
        .unwrap_or_else(|e| panic!("cannot run {cc}: {e}"));
    assert!(status.success(), "compiling test_capi.c failed");
    let out = Command::new(&exe).output().unwrap();
    print!("{}", String::from_utf8_lossy(&out.stdout));
    eprint!("{}", String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "test_capi failed: {}", out.status);
}
