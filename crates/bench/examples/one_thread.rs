//! Runs one workload on one thread for a fixed number of worker calls and prints how many
//! operations that was: the unit `scripts/callgrind.sh` measures instruction counts on.
//!
//! ```text
//! one_thread WORKLOAD DESIGN CALLS      e.g.  one_thread dlist-add-del scalable 1000
//! ```

use scalevfs_bench::{workloads, Design};

fn main() {
    if let Err(e) = run() {
        eprintln!("one_thread: {e}");
        std::process::exit(2);
    }
}

fn run() -> Result<(), String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [name, design, calls] = args.as_slice() else {
        return Err("usage: one_thread WORKLOAD DESIGN CALLS".into());
    };
    let design = Design::ALL
        .into_iter()
        .find(|d| d.name() == design)
        .ok_or_else(|| format!("unknown design '{design}' (legacy, scalable, host)"))?;
    let calls: u64 = calls
        .parse()
        .map_err(|e| format!("bad CALLS '{calls}': {e}"))?;
    let all = workloads::all();
    let w = all
        .iter()
        .find(|w| w.name() == name)
        .ok_or_else(|| format!("unknown workload '{name}'"))?;
    let inst = w.setup(design, 1)?;
    let mut worker = inst.worker(0);
    let ops: u64 = (0..calls).map(|_| worker()).sum();
    println!("{ops}");
    Ok(())
}
