//! Run the conformance suite on two targets and print a summary: N cases, M differ, and
//! the differing scripts with both outcomes of every step.
//!
//! ```text
//! conformance-report                      # host tmpfs vs scalevfs
//! conformance-report --dir /mnt/fuse      # host tmpfs vs the host kernel in a directory
//! conformance-report --host-only --filter rename/ --dump   # show the reference outcomes
//! conformance-report --random 200         # also random sequences (seeded)
//! ```

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use scalevfs_conformance::{cases, random, Backend, HostBackend, Report, ScalevfsBackend, Script};

#[derive(Parser)]
#[command(about = "Differential conformance: host kernel vs scalevfs (or vs a directory)")]
struct Args {
    /// Compare against the host kernel working in this directory (e.g. a FUSE mount of
    /// scalevfs) instead of the in-process scalevfs.
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Compare the host with itself (two tmpfs directories): checks the harness.
    #[arg(long)]
    host_only: bool,
    /// Only cases whose name contains this.
    #[arg(long)]
    filter: Option<String>,
    /// Also run this many random sequences.
    #[arg(long, default_value_t = 0)]
    random: usize,
    /// Seed for the random sequences.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Render at most this many differing cases in full.
    #[arg(long, default_value_t = 20)]
    max_diffs: usize,
    /// Print every case in full, agreeing or not.
    #[arg(long)]
    dump: bool,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let reference = match HostBackend::new() {
        Ok(b) => b,
        Err(e) => {
            eprintln!("conformance-report: {e}");
            return ExitCode::from(2);
        }
    };
    let other: Box<dyn Backend> = if let Some(dir) = &args.dir {
        match HostBackend::in_dir(dir) {
            Ok(b) => Box::new(b),
            Err(e) => {
                eprintln!("conformance-report: {e}");
                return ExitCode::from(2);
            }
        }
    } else if args.host_only {
        Box::new(HostBackend::new().expect("second host backend"))
    } else {
        Box::new(ScalevfsBackend::default())
    };
    let mut scripts: Vec<Script> = cases::all();
    scripts.extend(random::sample(args.random, args.seed));
    if let Some(f) = &args.filter {
        scripts.retain(|s| s.name.contains(f.as_str()));
    }
    let report = Report::run(&reference, other.as_ref(), &scripts);
    if args.dump {
        for c in &report.cases {
            println!("{}", c.render("A", "B"));
        }
    }
    print!("{}", report.summary(args.max_diffs));
    if report.unexpected().is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
