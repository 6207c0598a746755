//! `scalevfs`: the command-line front end.

use clap::{Parser, Subcommand};

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
}

fn main() {
    let cli = Cli::parse();
    let result = match &cli.command {
        Command::Bench(args) => scalevfs_bench::cli::run(args),
    };
    if let Err(e) = result {
        eprintln!("scalevfs bench: {e}");
        std::process::exit(1);
    }
}
