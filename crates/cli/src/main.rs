//! `scalevfs`: the command-line front end.

use clap::{Parser, Subcommand};

mod mount;
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
    /// Mount a scalevfs file system on a directory through FUSE (in memory: the contents
    /// are gone when the daemon exits). Becomes a daemon once mounted unless --foreground;
    /// SIGINT, SIGTERM or `scalevfs umount` unmount it.
    Mount(mount::MountArgs),
    /// Unmount a scalevfs FUSE mount (the daemon then exits).
    Umount(mount::UmountArgs),
    /// Check the scalable commutativity rule: pairs of commuting calls, traced under
    /// valgrind, must share no cache line that one of them writes (needs valgrind).
    Commute(scalevfs_commute::cli::CommuteArgs),
}

fn main() {
    let cli = Cli::parse();
    let (what, result) = match &cli.command {
        Command::Bench(args) => ("bench", scalevfs_bench::cli::run(args)),
        Command::Sys(args) => ("sys", sys::run(args)),
        Command::Mount(args) => ("mount", mount::mount(args)),
        Command::Umount(args) => ("umount", mount::umount(args)),
        Command::Commute(args) => ("commute", scalevfs_commute::cli::run(args)),
    };
    if let Err(e) = result {
        eprintln!("scalevfs {what}: {e}");
        std::process::exit(1);
    }
}
