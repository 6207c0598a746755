//! Runs one workload on one thread for a fixed number of worker calls (plus a warm-up of a
//! tenth as many) and prints how many operations that was in all: the unit
//! `scripts/callgrind.sh` measures instruction counts on.
//! With THREADS, that many threads each make CALLS calls (for `perf record` of one design).
//! On stderr: `worker-phase ELAPSED CPU`, the seconds of the CALLS calls alone (after setup
//! and a warm-up of CALLS/10 calls per thread) and the CPU seconds the worker threads used
//! in them (`scripts/scaling.sh` reads it).
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

/// CPU time the calling thread has used (`RUSAGE_THREAD`), in seconds.
fn thread_cpu_seconds() -> f64 {
    // SAFETY: getrusage fills the struct we pass; all-zero is a valid rusage.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: valid pointer to a rusage.
    if unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut ru) } != 0 {
        return 0.0;
    }
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(ru.ru_utime) + tv(ru.ru_stime)
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
    // A warm-up of a tenth of the calls on every thread, then a barrier: the timed phase is
    // the steady state (caches, allocator pages and the epoch's garbage warm), as the
    // benchmark runner measures after its warm-up round.
    let warm = std::sync::Barrier::new(threads + 1);
    let warm = &warm;
    let mut start = std::time::Instant::now();
    let (ops, cpu): (u64, f64) = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                s.spawn(move || {
                    let mut worker = inst.worker(t);
                    let warm_ops = (0..calls / 10).map(|_| worker()).sum::<u64>();
                    warm.wait();
                    let cpu0 = thread_cpu_seconds();
                    let ops = (0..calls).map(|_| worker()).sum::<u64>();
                    (warm_ops + ops, thread_cpu_seconds() - cpu0)
                })
            })
            .collect();
        warm.wait();
        start = std::time::Instant::now();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or((0, 0.0)))
            .fold((0, 0.0), |(o, c), (o2, c2)| (o + o2, c + c2))
    });
    eprintln!("worker-phase {:.6} {cpu:.6}", start.elapsed().as_secs_f64());
    println!("{ops}");
    Ok(())
}
