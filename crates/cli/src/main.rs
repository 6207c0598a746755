//! `scalevfs`: the command-line front end.

use clap::{Parser, Subcommand};

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
    Bench,
}

fn main() {
    let cli = Cli::parse();
    match cli.command {
        Command::Bench => {
            eprintln!("scalevfs bench: not built yet");
            std::process::exit(1);
        }
    }
}
