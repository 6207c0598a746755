//! `scalevfs`: the command-line front end.

use clap::{Parser, Subcommand};

mod sys;

/// Counts allocations only while `scalevfs bench` measures memory per empty file; otherwise
/// one relaxed load per allocation (see `scalevfs_bench::memory`).
#[global_allocator]
static ALLOC: scalevfs_bench::memory::CountingAlloc = scalevfs_bench::memory::CountingAlloc;

#[derive(Parser)]
#[command(
    name = "scalevfs",
    version,
    about = "A scalable Linux-compatible VFS in user space"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the benchmark suite: each workload under the legacy and scalable designs (and the
    /// host kernel), reporting median throughput and ratios.
    Bench(scalevfs_bench::cli::BenchArgs),
    /// Browse the built-in sysfs-style demo tree (kernfs mounted at /sys in a scalevfs VFS):
    /// `sys ls [-R] [PATH]`, `sys cat PATH` (e.g. /sys/kernel/scalevfs/lock_stat).
    Sys(sys::SysArgs),
}

fn main() {
    let cli = Cli::parse();
    let (what, result) = match &cli.command {
        Command::Bench(args) => ("bench", scalevfs_bench::cli::run(args)),
        Command::Sys(args) => ("sys", sys::run(args)),
    };
    if let Err(e) = result {
        eprintln!("scalevfs {what}: {e}");
        std::process::exit(1);
    }
}
