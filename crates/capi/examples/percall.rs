//! Per-call cost of the C API next to the Rust API's: the same loops (`fstat`,
//! 64-byte `pread64`, `open`+`close`, `stat`) through [`scalevfs_rs::Process`] here, then
//! through `libscalevfs.a` from `examples/percall.c` (compiled with `cc -O2`).
//!
//! `cargo run --release -p scalevfs-capi --example percall [-- N]` (N: calls per loop,
//! default 1,000,000).

use std::path::PathBuf;
use std::process::Command;
use std::time::Instant;

use scalevfs_rs::{Credentials, Process, Vfs, VfsOptions};

fn report(what: &str, t: Instant, n: u64) {
    let ns = t.elapsed().as_nanos() as f64 / n as f64;
    println!("Rust  {what:<24} {ns:8.1} ns/call");
}

fn main() {
    let n: u64 = std::env::args()
        .nth(1)
        .map(|a| a.parse().expect("N"))
        .unwrap_or(1_000_000);
    let vfs = Vfs::new(VfsOptions::default());
    let p = Process::new(&vfs, Credentials::root());
    let fd = p.open("/f", libc::O_CREAT | libc::O_RDWR, 0o644).unwrap();
    let mut buf = [0u8; 64];
    p.write(fd, &buf).unwrap();

    let t = Instant::now();
    for _ in 0..n {
        std::hint::black_box(p.fstat(fd).unwrap());
    }
    report("fstat", t, n);
    let t = Instant::now();
    for _ in 0..n {
        assert_eq!(p.pread64(fd, &mut buf, 0).unwrap(), 64);
    }
    report("pread64 (64 B)", t, n);
    let t = Instant::now();
    for _ in 0..n {
        let f = p.open("/f", libc::O_RDONLY, 0).unwrap();
        p.close(f).unwrap();
    }
    report("open+close", t, n);
    let t = Instant::now();
    for _ in 0..n {
        std::hint::black_box(p.stat("/f").unwrap());
    }
    report("stat (\"/f\")", t, n);
    drop(p);

    // The C side: target/<profile>/examples/percall -> target/<profile>/deps.
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let exe = std::env::current_exe().unwrap();
    let deps = exe.parent().unwrap().parent().unwrap().join("deps");
    let out = exe.with_file_name("percall-c");
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let ok = Command::new(&cc)
        .args([
            "-std=c11", "-O2", "-Wall", "-Wextra", "-Werror", "-pthread", "-I",
        ])
        .arg(dir.join("include"))
        .arg(dir.join("examples/percall.c"))
        .arg(deps.join("libscalevfs.a"))
        .args(["-lpthread", "-ldl", "-lm", "-o"])
        .arg(&out)
        .status()
        .expect("cc")
        .success();
    assert!(ok, "compiling percall.c failed");
    let ok = Command::new(&out)
        .arg(n.to_string())
        .status()
        .unwrap()
        .success();
    assert!(ok, "percall.c failed");
}
