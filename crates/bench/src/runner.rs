//! The measurement loop.
//!
//! For one workload and one thread count the runner sets up an [`Instance`] per design and
//! starts a *pool* of `threads` worker threads for each. Each worker asks its instance for
//! its closure once (on its own thread, as the [`Instance`] contract says) and then waits
//! for rounds. A round releases all workers of one pool at once (a [`Barrier`] shared with
//! the runner), lets them call their closure in a loop, counting the operations it returns,
//! until the runner raises the pool's stop flag after the round's duration; each worker
//! then reports its count and the instants it started and finished its last call. The
//! round's throughput is the total count over the time from the first worker's start to
//! the last worker's finish, so every operation, including the last, overshooting batch of
//! each worker, is both counted and timed.
//!
//! Rounds of the designs are interleaved: warm-up of every design, then repeat 1 of legacy,
//! scalable, host, then repeat 2 of each, and so on, so that noise from the rest of the
//! machine (other processes, frequency changes) hits every design alike. The pools of the
//! designs not being measured sleep in a channel receive and use no CPU.
//!
//! With [`RunConfig::interleave_threads`] the thread counts of a workload are interleaved
//! the same way (repeat 1 of every design at every thread count, then repeat 2, ...), so
//! that a slow spell of a shared VM cannot make one thread count look like a collapse.
//! The price: every (design, thread count) instance and pool of the workload exists at
//! once, which FUSE workloads pay in mounts.
//!
//! A panic in a workload's closure is caught on the worker, reported as that design's
//! failure, and the design is skipped for the rest of the group; the other designs and
//! workloads carry on.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Barrier};
use std::thread::{self, Scope};
use std::time::{Duration, Instant};

use crate::{Design, Instance, Workload};

/// What to run, for every selected workload.
#[derive(Clone, Debug, PartialEq)]
pub struct RunConfig {
    /// Thread counts, in increasing order.
    pub threads: Vec<usize>,
    /// Length of one timed round.
    pub duration: Duration,
    /// Length of the untimed warm-up round each design gets before its timed rounds.
    pub warmup: Duration,
    /// Timed rounds per (design, thread count).
    pub repeats: usize,
    /// Gather lock statistics (see [`lockstat_hooks`]).
    pub lockstat: bool,
    /// Interleave the rounds of a workload's thread counts too (module docs).
    pub interleave_threads: bool,
}

/// The timed rounds of one (workload, design, thread count).
#[derive(Clone, Debug, PartialEq)]
pub struct Measurement {
    /// The workload's name.
    pub workload: String,
    /// The design measured.
    pub design: Design,
    /// Worker threads.
    pub threads: usize,
    /// Throughput of each timed round, in operations per second, in the order run.
    pub runs: Vec<f64>,
    /// Operations counted in each round, warm-up first (for tests and sanity checks).
    pub ops: Vec<u64>,
    /// The instance's lock statistics table, when `--lockstat` asked for it.
    pub lockstat: Option<String>,
}

/// A (workload, design, thread count) that could not be measured.
#[derive(Clone, Debug, PartialEq)]
pub struct Failure {
    /// The workload's name.
    pub workload: String,
    /// The design that failed.
    pub design: Design,
    /// Worker threads.
    pub threads: usize,
    /// What went wrong.
    pub error: String,
}

/// Everything a suite run produced.
#[derive(Clone, Debug, Default)]
pub struct SuiteOutcome {
    /// The (workload, design, thread count)s that were measured.
    pub measurements: Vec<Measurement>,
    /// The ones that failed.
    pub failures: Vec<Failure>,
}

/// Observer of the runner's progress (the CLI drives a progress bar with it).
pub trait Progress {
    /// Called before each round; `what` names the workload, thread count and design.
    fn round(&self, what: &str);
    /// Called when a workload is done.
    fn workload_done(&self, _name: &str) {}
}

/// No progress reporting.
pub struct Silent;

impl Progress for Silent {
    fn round(&self, _what: &str) {}
}

/// The number of rounds (warm-up included) [`run_suite`] will run, for a progress bar.
pub fn total_rounds(workloads: &[&dyn Workload], cfg: &RunConfig) -> u64 {
    let designs: usize = workloads.iter().map(|w| w.designs().len()).sum();
    (designs * cfg.threads.len() * (cfg.repeats + 1)) as u64
}

/// The single place where the global lock statistics are switched on and off: on (after a
/// reset) before the last timed round of each (design, thread count) pool, off right after
/// it, and then that pool's [`Instance::lockstat`] table is read, so each table covers
/// its own round alone.
pub fn lockstat_hooks(enable: bool) {
    use scalevfs_primitives::lockstat;
    if enable {
        lockstat::reset();
        lockstat::enable();
    } else {
        lockstat::disable();
    }
}

/// Runs every workload under each of its designs at each thread count.
pub fn run_suite(
    workloads: &[&dyn Workload],
    cfg: &RunConfig,
    progress: &dyn Progress,
) -> SuiteOutcome {
    let mut out = SuiteOutcome::default();
    for w in workloads {
        if cfg.interleave_threads {
            run_group(*w, &cfg.threads, cfg, progress, &mut out);
        } else {
            for &threads in &cfg.threads {
                run_group(*w, &[threads], cfg, progress, &mut out);
            }
        }
        progress.workload_done(w.name());
    }
    out
}

/// One worker's report for one round: operations, and when it started and finished.
type RoundResult = Result<(u64, Instant, Instant), String>;

/// A command to a pool's workers.
enum Cmd {
    /// Wait on the barrier, then run until the stop flag is raised.
    Run(Arc<Barrier>, Arc<AtomicBool>),
}

/// The worker threads of one design.
struct Pool<'env> {
    design: Design,
    threads: usize,
    inst: &'env dyn Instance,
    cmds: Vec<mpsc::Sender<Cmd>>,
    results: mpsc::Receiver<RoundResult>,
    measurement: Measurement,
    failed: bool,
}

/// Measures one workload at the thread counts `counts`, every design and count
/// interleaved.
fn run_group(
    w: &dyn Workload,
    counts: &[usize],
    cfg: &RunConfig,
    progress: &dyn Progress,
    out: &mut SuiteOutcome,
) {
    let fail = |design: Design, threads: usize, error: String| Failure {
        workload: w.name().to_string(),
        design,
        threads,
        error,
    };
    let mut instances: Vec<(Design, usize, Box<dyn Instance>)> = Vec::new();
    for &threads in counts {
        for &design in w.designs() {
            match catch_unwind(AssertUnwindSafe(|| w.setup(design, threads))) {
                Ok(Ok(inst)) => instances.push((design, threads, inst)),
                Ok(Err(e)) => out
                    .failures
                    .push(fail(design, threads, format!("setup: {e}"))),
                Err(p) => out.failures.push(fail(
                    design,
                    threads,
                    format!("setup panicked: {}", panic_message(&p)),
                )),
            }
        }
    }
    thread::scope(|s| {
        let mut pools = Vec::new();
        for (design, threads, inst) in &instances {
            let (design, threads) = (*design, *threads);
            match spawn_pool(s, &**inst, threads) {
                Ok((cmds, results)) => pools.push(Pool {
                    design,
                    threads,
                    inst: &**inst,
                    cmds,
                    results,
                    measurement: Measurement {
                        workload: w.name().to_string(),
                        design,
                        threads,
                        runs: Vec::new(),
                        ops: Vec::new(),
                        lockstat: None,
                    },
                    failed: false,
                }),
                Err(e) => out.failures.push(fail(design, threads, e)),
            }
        }
        for round in 0..=cfg.repeats {
            let (len, label) = if round == 0 {
                (cfg.warmup, "warm-up".to_string())
            } else {
                (cfg.duration, format!("{round}/{}", cfg.repeats))
            };
            for pool in pools.iter_mut() {
                progress.round(&format!(
                    "{} t={} {} {label}",
                    w.name(),
                    pool.threads,
                    pool.design
                ));
                if pool.failed {
                    continue;
                }
                // Lock statistics cover each design's last timed round alone: the counters
                // are global, so rounds of different designs must not share them.
                let stat_round = cfg.lockstat && round == cfg.repeats && round > 0;
                if stat_round {
                    lockstat_hooks(true);
                }
                let result = run_round(pool, len);
                if stat_round {
                    lockstat_hooks(false);
                    pool.measurement.lockstat =
                        catch_unwind(AssertUnwindSafe(|| pool.inst.lockstat())).unwrap_or_else(
                            |p| Some(format!("lockstat() panicked: {}", panic_message(&p))),
                        );
                }
                match result {
                    Ok((ops, elapsed)) => {
                        pool.measurement.ops.push(ops);
                        if round > 0 {
                            pool.measurement
                                .runs
                                .push(ops as f64 / elapsed.as_secs_f64().max(1e-9));
                        }
                    }
                    Err(e) => {
                        pool.failed = true;
                        out.failures.push(fail(pool.design, pool.threads, e));
                    }
                }
            }
        }
        // Dropping the senders ends the workers; the scope joins them.
        for pool in pools {
            if !pool.failed {
                out.measurements.push(pool.measurement);
            }
        }
    });
}

/// Starts `threads` workers on `inst`; returns a command sender per worker and the
/// channel their round results arrive on.
fn spawn_pool<'scope, 'env>(
    s: &'scope Scope<'scope, 'env>,
    inst: &'env dyn Instance,
    threads: usize,
) -> Result<(Vec<mpsc::Sender<Cmd>>, mpsc::Receiver<RoundResult>), String> {
    let (res_tx, res_rx) = mpsc::channel();
    let mut cmds = Vec::with_capacity(threads);
    for t in 0..threads {
        let (cmd_tx, cmd_rx) = mpsc::channel();
        let res_tx = res_tx.clone();
        thread::Builder::new()
            .name(format!("bench-{t}"))
            .spawn_scoped(s, move || worker(inst, t, cmd_rx, res_tx))
            // The workers spawned so far exit when `cmds` is dropped.
            .map_err(|e| format!("cannot start worker thread {t} of {threads}: {e}"))?;
        cmds.push(cmd_tx);
    }
    Ok((cmds, res_rx))
}

/// One worker thread: builds its closure once, then runs rounds until its command
/// channel closes.
fn worker(
    inst: &dyn Instance,
    t: usize,
    cmds: mpsc::Receiver<Cmd>,
    results: mpsc::Sender<RoundResult>,
) {
    let mut f = catch_unwind(AssertUnwindSafe(|| inst.worker(t)))
        .map_err(|p| format!("worker({t}) panicked: {}", panic_message(&p)));
    while let Ok(Cmd::Run(start, stop)) = cmds.recv() {
        start.wait();
        let began = Instant::now();
        let r = match &mut f {
            Ok(f) => catch_unwind(AssertUnwindSafe(|| {
                // At least one call per round, so that a worker the scheduler starts late
                // still contributes (and a round never measures nothing).
                let mut ops = f();
                // Relaxed: the flag only ends the loop; the counts travel back over the
                // results channel, which orders them.
                while !stop.load(Ordering::Relaxed) {
                    ops = ops.wrapping_add(f());
                }
                (ops, began, Instant::now())
            }))
            .map_err(|p| format!("thread {t} panicked: {}", panic_message(&p))),
            Err(e) => Err(e.clone()),
        };
        if let Err(e) = &r {
            // Never call a closure again after it panicked mid-operation.
            f = Err(e.clone());
        }
        if results.send(r).is_err() {
            return;
        }
    }
}

/// Runs one round of `pool` for `len`; returns the operations and the elapsed time.
fn run_round(pool: &mut Pool, len: Duration) -> Result<(u64, Duration), String> {
    let start = Arc::new(Barrier::new(pool.cmds.len() + 1));
    let stop = Arc::new(AtomicBool::new(false));
    for c in &pool.cmds {
        c.send(Cmd::Run(start.clone(), stop.clone()))
            .map_err(|_| "a worker thread exited".to_string())?;
    }
    start.wait();
    thread::sleep(len);
    stop.store(true, Ordering::Relaxed);
    // The round spans the first worker's start to the last worker's finish. Not the
    // runner's own clock: with 64 workers on 2 CPUs the runner may be scheduled again
    // long after the workers started.
    let mut total = 0u64;
    let (mut t0, mut end): (Option<Instant>, Option<Instant>) = (None, None);
    let mut first_err = None;
    for _ in 0..pool.cmds.len() {
        match pool.results.recv() {
            Ok(Ok((ops, began, at))) => {
                total = total.wrapping_add(ops);
                t0 = Some(t0.map_or(began, |t| t.min(began)));
                end = Some(end.map_or(at, |e| e.max(at)));
            }
            Ok(Err(e)) => {
                first_err.get_or_insert(e);
            }
            Err(_) => return Err("a worker thread exited".to_string()),
        }
    }
    match (first_err, t0, end) {
        (Some(e), _, _) => Err(e),
        (None, Some(t0), Some(end)) => Ok((total, end - t0)),
        _ => Err("a pool without workers".to_string()),
    }
}

fn panic_message(p: &Box<dyn std::any::Any + Send>) -> String {
    // Deref the box: `&Box<dyn Any>` would itself coerce to `&dyn Any`.
    let p: &(dyn std::any::Any + Send) = &**p;
    if let Some(s) = p.downcast_ref::<&str>() {
        s.to_string()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "(non-string panic payload)".to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU64;

    /// Counts every operation it performs, so the runner's tally can be checked.
    struct Tally {
        panic_on: Option<Design>,
    }
    struct TallyInst {
        done: AtomicU64,
        panics: bool,
    }
    impl Workload for Tally {
        fn name(&self) -> &'static str {
            "tally"
        }
        fn description(&self) -> &'static str {
            "test"
        }
        fn designs(&self) -> &'static [Design] {
            &[Design::Legacy, Design::Scalable]
        }
        fn setup(&self, design: Design, _threads: usize) -> Result<Box<dyn Instance>, String> {
            Ok(Box::new(TallyInst {
                done: AtomicU64::new(0),
                panics: self.panic_on == Some(design),
            }))
        }
    }
    impl Instance for TallyInst {
        fn worker(&self, _thread: usize) -> Box<dyn FnMut() -> u64 + '_> {
            Box::new(move || {
                assert!(!self.panics, "boom");
                self.done.fetch_add(3, Ordering::Relaxed);
                3
            })
        }
        fn lockstat(&self) -> Option<String> {
            Some(format!("tally {}", self.done.load(Ordering::Relaxed)))
        }
    }

    fn cfg(threads: Vec<usize>) -> RunConfig {
        RunConfig {
            threads,
            duration: Duration::from_millis(5),
            warmup: Duration::from_millis(1),
            repeats: 3,
            lockstat: false,
            interleave_threads: false,
        }
    }

    #[test]
    fn every_design_and_thread_count_is_measured() {
        let w = Tally { panic_on: None };
        let out = run_suite(&[&w], &cfg(vec![1, 3, 8]), &Silent);
        assert!(out.failures.is_empty(), "{:?}", out.failures);
        assert_eq!(out.measurements.len(), 6);
        for m in &out.measurements {
            assert_eq!(m.runs.len(), 3);
            assert_eq!(m.ops.len(), 4);
            assert!(m.runs.iter().all(|&r| r > 0.0 && r.is_finite()));
            assert!(m.ops.iter().all(|&o| o > 0 && o % 3 == 0));
        }
    }

    /// Records the rounds in the order they ran.
    #[derive(Default)]
    struct Order(std::sync::Mutex<Vec<String>>);
    impl Progress for Order {
        fn round(&self, what: &str) {
            self.0.lock().unwrap().push(what.to_string());
        }
    }

    #[test]
    fn interleaved_thread_counts_alternate_round_by_round() {
        let w = Tally { panic_on: None };
        let order = Order::default();
        let cfg = RunConfig {
            interleave_threads: true,
            ..cfg(vec![1, 3])
        };
        let out = run_suite(&[&w], &cfg, &order);
        assert!(out.failures.is_empty(), "{:?}", out.failures);
        assert_eq!(out.measurements.len(), 4);
        assert!(out.measurements.iter().all(|m| m.runs.len() == 3));
        let rounds = order.0.into_inner().unwrap();
        let repeat_one: Vec<&str> = rounds[4..8].iter().map(String::as_str).collect();
        assert_eq!(
            repeat_one,
            [
                "tally t=1 legacy 1/3",
                "tally t=1 scalable 1/3",
                "tally t=3 legacy 1/3",
                "tally t=3 scalable 1/3"
            ]
        );
        assert_eq!(rounds.len() as u64, total_rounds(&[&w], &cfg));
    }

    #[test]
    fn runner_counts_exactly_what_the_workers_did() {
        let inst = TallyInst {
            done: AtomicU64::new(0),
            panics: false,
        };
        let mut pool_ops = Vec::new();
        thread::scope(|s| {
            let (cmds, results) = spawn_pool(s, &inst, 4).unwrap();
            let mut pool = Pool {
                design: Design::Legacy,
                threads: 4,
                inst: &inst,
                cmds,
                results,
                measurement: Measurement {
                    workload: "tally".into(),
                    design: Design::Legacy,
                    threads: 4,
                    runs: vec![],
                    ops: vec![],
                    lockstat: None,
                },
                failed: false,
            };
            for _ in 0..3 {
                let (n, elapsed) = run_round(&mut pool, Duration::from_millis(3)).unwrap();
                assert!(elapsed > Duration::ZERO);
                pool_ops.push(n);
            }
        });
        let counted: u64 = pool_ops.iter().sum();
        assert_eq!(counted, inst.done.load(Ordering::Relaxed));
        assert!(pool_ops.iter().all(|&n| n > 0));
    }

    #[test]
    fn a_panicking_design_is_reported_and_the_others_still_run() {
        let w = Tally {
            panic_on: Some(Design::Legacy),
        };
        let out = run_suite(&[&w], &cfg(vec![2]), &Silent);
        assert_eq!(out.failures.len(), 1);
        assert_eq!(out.failures[0].design, Design::Legacy);
        assert!(out.failures[0].error.contains("boom"), "{:?}", out.failures);
        assert_eq!(out.measurements.len(), 1);
        assert_eq!(out.measurements[0].design, Design::Scalable);
    }

    #[test]
    fn lockstat_tables_are_collected_only_when_asked() {
        let w = Tally { panic_on: None };
        let off = run_suite(&[&w], &cfg(vec![2]), &Silent);
        assert!(off.measurements.iter().all(|m| m.lockstat.is_none()));
        let on = run_suite(
            &[&w],
            &RunConfig {
                lockstat: true,
                ..cfg(vec![1, 2])
            },
            &Silent,
        );
        assert_eq!(on.measurements.len(), 4);
        for m in &on.measurements {
            // The table is read after all rounds: it has seen every counted operation.
            let total: u64 = m.ops.iter().sum();
            assert_eq!(m.lockstat.as_deref(), Some(&*format!("tally {total}")));
        }
    }

    #[test]
    fn total_rounds_counts_warmups() {
        let w = Tally { panic_on: None };
        assert_eq!(total_rounds(&[&w], &cfg(vec![1, 2])), 2 * 2 * 4);
    }
}
