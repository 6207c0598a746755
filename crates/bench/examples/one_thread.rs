//! Runs one workload on one thread for a fixed number of worker calls and prints how many
//! operations that was: the unit `scripts/callgrind.sh` measures instruction counts on.
//! With THREADS, that many threads each make CALLS calls (for `perf record` of one design).
//!
//! ```text
//! one_thread WORKLOAD DESIGN CALLS [THREADS]   e.g.  one_thread dlist-add-del scalable 1000
//! ```

use scalevfs_bench::{workloads, Design};

/// The allocator `scalevfs bench` runs with, so that profiles match its numbers.
#[global_allocator]
static ALLOC: scalevfs_bench::memory::CountingAlloc = scalevfs_bench::memory::CountingAlloc;

fn main() {
    if let Err(e) = run() {
        eprintln!("one_thread: {e}");
        std::process::exit(2);
    }
}

fn run() -> Result<(), String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (name, design, calls, threads) = match args.as_slice() {
        [n, d, c] => (n, d, c, "1"),
        [n, d, c, t] => (n, d, c, t.as_str()),
        _ => return Err("usage: one_thread WORKLOAD DESIGN CALLS [THREADS]".into()),
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
    let threads: usize = threads
        .parse()
        .map_err(|e| format!("bad THREADS '{threads}': {e}"))?;
    let inst = w.setup(design, threads)?;
    let inst = &*inst;
    let ops: u64 = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                s.spawn(move || {
                    let mut worker = inst.worker(t);
                    (0..calls).map(|_| worker()).sum::<u64>()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap_or(0)).sum()
    });
    println!("{ops}");
    Ok(())
}
