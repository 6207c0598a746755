//! `scalevfs bench`: argument parsing and the top level of a benchmark run.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::Args;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::report::{Machine, Report};
use crate::runner::{run_suite, total_rounds, Progress, RunConfig};
use crate::{plot, workloads, Workload};

/// Default thread counts: 1 and 2 (this machine's cores), then oversubscribed as the seeds
/// ran 128-384 tasks.
pub const DEFAULT_THREADS: &[usize] = &[1, 2, 16, 64];
/// `--quick` thread counts.
pub const QUICK_THREADS: &[usize] = &[1, 2, 16];
const DEFAULT_DURATION_S: f64 = 1.0;
const DEFAULT_REPEATS: usize = 5;
const QUICK_DURATION_S: f64 = 0.15;
const QUICK_REPEATS: usize = 3;
/// More threads than this is a typo, not a benchmark (and one pool per design is started).
pub const MAX_THREADS: usize = 1024;

/// Arguments of `scalevfs bench`.
#[derive(Args, Clone, Debug, PartialEq)]
pub struct BenchArgs {
    /// Run only this workload (repeatable or comma-separated; `PREFIX*` selects every
    /// workload whose name starts with PREFIX). Default: all.
    #[arg(
        long = "workload",
        short = 'w',
        value_name = "NAME",
        value_delimiter = ','
    )]
    pub workloads: Vec<String>,
    /// Thread counts, comma-separated [default: 1,2,16,64; with --quick: 1,2,16].
    #[arg(long, value_name = "LIST", value_parser = parse_threads)]
    pub threads: Option<ThreadList>,
    /// Seconds per timed repeat [default: 1; with --quick: 0.15].
    #[arg(long, value_name = "S", value_parser = parse_seconds)]
    pub duration: Option<f64>,
    /// Timed repeats per design and thread count; the report gives the median [default: 5;
    /// with --quick: 3].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub repeats: Option<u32>,
    /// Fewer thread counts, fewer and shorter repeats: the whole suite in about a minute.
    #[arg(long)]
    pub quick: bool,
    /// Where to write the JSON results [default: OUT/results.json].
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Directory for report.md, results.json and one SVG plot per workload.
    #[arg(long, value_name = "DIR", default_value = "bench-out")]
    pub out: PathBuf,
    /// Gather lock statistics during the runs and print each design's table (slows every
    /// design down).
    #[arg(long)]
    pub lockstat: bool,
    /// Interleave the rounds of the thread counts as well as of the designs, so that a slow
    /// spell of a shared machine hits every thread count alike (every thread count's
    /// instance and threads exist at once).
    #[arg(long)]
    pub interleave_threads: bool,
    /// List the workloads and exit.
    #[arg(long)]
    pub list: bool,
}

/// A list of thread counts, from `--threads 1,2,16`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ThreadList(pub Vec<usize>);

/// Parses `1,2,16,64`: positive counts up to [`MAX_THREADS`], sorted, duplicates dropped.
pub fn parse_threads(s: &str) -> Result<ThreadList, String> {
    let mut v = Vec::new();
    for part in s.split(',').map(str::trim) {
        let n: usize = part
            .parse()
            .map_err(|_| format!("'{part}' is not a thread count (expected e.g. 1,2,16,64)"))?;
        if n == 0 || n > MAX_THREADS {
            return Err(format!("thread count {n} is outside 1..={MAX_THREADS}"));
        }
        v.push(n);
    }
    v.sort_unstable();
    v.dedup();
    Ok(ThreadList(v))
}

/// Parses a positive number of seconds (at most an hour).
pub fn parse_seconds(s: &str) -> Result<f64, String> {
    let x: f64 = s
        .trim()
        .parse()
        .map_err(|_| format!("'{s}' is not a number of seconds"))?;
    if !(x > 0.0 && x <= 3600.0) {
        return Err(format!("duration {s} is outside (0, 3600] seconds"));
    }
    Ok(x)
}

/// The workloads `names` select from `all`, in registry order; every name must match.
pub fn select<'a>(
    all: &'a [Box<dyn Workload>],
    names: &[String],
) -> Result<Vec<&'a dyn Workload>, String> {
    if all.is_empty() {
        return Err("no workloads are registered".into());
    }
    if names.is_empty() {
        return Ok(all.iter().map(|w| &**w).collect());
    }
    let matches = |pat: &str, name: &str| match pat.strip_suffix('*') {
        Some(prefix) => name.starts_with(prefix),
        None => pat == name,
    };
    for pat in names {
        if !all.iter().any(|w| matches(pat, w.name())) {
            let valid: Vec<&str> = all.iter().map(|w| w.name()).collect();
            return Err(format!(
                "unknown workload '{pat}'; valid workloads: {}",
                valid.join(", ")
            ));
        }
    }
    Ok(all
        .iter()
        .filter(|w| names.iter().any(|p| matches(p, w.name())))
        .map(|w| &**w)
        .collect())
}

impl BenchArgs {
    /// The run configuration these arguments ask for.
    pub fn config(&self) -> RunConfig {
        let (threads, secs, repeats) = if self.quick {
            (QUICK_THREADS, QUICK_DURATION_S, QUICK_REPEATS)
        } else {
            (DEFAULT_THREADS, DEFAULT_DURATION_S, DEFAULT_REPEATS)
        };
        let duration = Duration::from_secs_f64(self.duration.unwrap_or(secs));
        RunConfig {
            threads: self
                .threads
                .as_ref()
                .map_or_else(|| threads.to_vec(), |t| t.0.clone()),
            duration,
            // Enough to fault in memory and settle caches and frequency, not more.
            warmup: (duration / 4).min(Duration::from_millis(500)),
            repeats: self.repeats.map_or(repeats, |r| r as usize),
            lockstat: self.lockstat,
            interleave_threads: self.interleave_threads,
        }
    }
}

/// The workload list `--list` prints.
pub fn list(all: &[Box<dyn Workload>]) -> String {
    let width = all.iter().map(|w| w.name().len()).max().unwrap_or(0);
    let mut s = String::new();
    for w in all {
        let designs: Vec<&str> = w.designs().iter().map(|d| d.name()).collect();
        s.push_str(&format!(
            "{:width$}  [{}]  {}\n",
            w.name(),
            designs.join(", "),
            w.description()
        ));
    }
    s
}

/// A progress bar on a terminal; one line per finished workload otherwise.
struct Bar {
    pb: ProgressBar,
    tty: bool,
    workloads: usize,
    done: std::cell::Cell<usize>,
}

impl Progress for Bar {
    fn round(&self, what: &str) {
        self.pb.set_message(what.to_string());
        self.pb.inc(1);
    }
    fn workload_done(&self, name: &str) {
        self.done.set(self.done.get() + 1);
        if !self.tty {
            eprintln!(
                "scalevfs bench: {name} done ({}/{})",
                self.done.get(),
                self.workloads
            );
        }
    }
}

/// Runs `scalevfs bench`.
pub fn run(args: &BenchArgs) -> Result<(), String> {
    run_with(&workloads::all(), args)
}

/// Runs `scalevfs bench` over the workloads in `all`.
pub fn run_with(all: &[Box<dyn Workload>], args: &BenchArgs) -> Result<(), String> {
    if args.list {
        print!("{}", list(all));
        return Ok(());
    }
    let selected = select(all, &args.workloads)?;
    let cfg = args.config();
    std::fs::create_dir_all(&args.out)
        .map_err(|e| format!("cannot create {}: {e}", args.out.display()))?;
    let machine = Machine::detect();

    let tty = std::io::stderr().is_terminal();
    let target = if tty {
        ProgressDrawTarget::stderr()
    } else {
        ProgressDrawTarget::hidden()
    };
    let pb = ProgressBar::with_draw_target(Some(total_rounds(&selected, &cfg)), target);
    pb.set_style(
        ProgressStyle::with_template("{bar:30} {pos}/{len} rounds, eta {eta} {wide_msg}")
            .map_err(|e| e.to_string())?,
    );
    let bar = Bar {
        pb,
        tty,
        workloads: selected.len(),
        done: 0.into(),
    };
    let outcome = run_suite(&selected, &cfg, &bar);
    bar.pb.finish_and_clear();

    let mut report = Report::new(
        machine,
        &cfg,
        &selected,
        &outcome.measurements,
        &outcome.failures,
    );
    // The VFS's memory per empty file, when the binary counts allocations (the CLI does).
    report.memory = crate::memory::measure_all(if args.quick { 5_000 } else { 20_000 });
    let md = report.markdown();
    print!("{md}");
    let md_path = args.out.join("report.md");
    write(&md_path, md.as_bytes())?;
    let json_path = args
        .json
        .clone()
        .unwrap_or_else(|| args.out.join("results.json"));
    let json = serde_json::to_string_pretty(&report).map_err(|e| e.to_string())?;
    write(&json_path, json.as_bytes())?;
    let plots = plot::write_plots(&report, &args.out)?;
    eprintln!(
        "scalevfs bench: wrote {}, {} and {} plot(s) in {}",
        md_path.display(),
        json_path.display(),
        plots.len(),
        args.out.display()
    );
    if !report.errors.is_empty() {
        return Err(format!(
            "{} run(s) failed; see the Errors section of {}",
            report.errors.len(),
            md_path.display()
        ));
    }
    Ok(())
}

fn write(path: &Path, data: &[u8]) -> Result<(), String> {
    std::fs::write(path, data).map_err(|e| format!("cannot write {}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::Report;
    use crate::Design;
    use clap::Parser;

    #[derive(Parser, Debug)]
    struct TestCli {
        #[command(flatten)]
        args: BenchArgs,
    }

    fn parse(argv: &[&str]) -> Result<BenchArgs, clap::Error> {
        TestCli::try_parse_from(std::iter::once("bench").chain(argv.iter().copied()))
            .map(|c| c.args)
    }

    #[test]
    fn thread_lists() {
        assert_eq!(
            parse_threads("1,2,16,64"),
            Ok(ThreadList(vec![1, 2, 16, 64]))
        );
        assert_eq!(parse_threads(" 16, 2,2,1"), Ok(ThreadList(vec![1, 2, 16])));
        assert!(parse_threads("").is_err());
        assert!(parse_threads("1,,2").is_err());
        assert!(parse_threads("0").unwrap_err().contains("outside"));
        assert!(parse_threads("4096").is_err());
        assert!(parse_threads("two").unwrap_err().contains("'two'"));
        assert!(parse_threads("-1").is_err());
    }

    #[test]
    fn seconds() {
        assert_eq!(parse_seconds("0.25"), Ok(0.25));
        for bad in ["0", "-1", "nan", "inf", "1e9", "x"] {
            assert!(parse_seconds(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn defaults_quick_and_overrides() {
        let a = parse(&[]).unwrap();
        let c = a.config();
        assert_eq!(c.threads, DEFAULT_THREADS);
        assert_eq!(c.duration, Duration::from_secs(1));
        assert_eq!(c.repeats, 5);
        assert_eq!(c.warmup, Duration::from_millis(250));
        assert_eq!(a.out, PathBuf::from("bench-out"));
        assert!(!c.lockstat);

        let q = parse(&["--quick"]).unwrap().config();
        assert_eq!(q.threads, QUICK_THREADS);
        assert_eq!(q.repeats, QUICK_REPEATS);

        let a = parse(&[
            "--quick",
            "--threads",
            "4,1",
            "--duration",
            "0.5",
            "--repeats",
            "7",
            "-w",
            "a,b",
            "--workload",
            "c",
            "--json",
            "r.json",
            "--out",
            "d",
            "--lockstat",
        ])
        .unwrap();
        assert_eq!(a.workloads, ["a", "b", "c"]);
        assert_eq!(a.json, Some(PathBuf::from("r.json")));
        let c = a.config();
        assert_eq!(c.threads, [1, 4]);
        assert_eq!(c.duration, Duration::from_millis(500));
        assert_eq!(c.repeats, 7);
        assert!(c.lockstat);
    }

    #[test]
    fn bad_arguments_are_errors() {
        for argv in [
            &["--threads", "0"][..],
            &["--threads", "a"],
            &["--repeats", "0"],
            &["--duration", "-2"],
            &["--bogus"],
        ] {
            assert!(parse(argv).is_err(), "{argv:?}");
        }
    }

    #[test]
    fn selecting_workloads() {
        let all = workloads::all();
        assert_eq!(select(&all, &[]).unwrap().len(), all.len());
        let one = select(&all, &["counter".into()]).unwrap();
        assert_eq!(one.len(), 1);
        assert_eq!(one[0].name(), "counter");
        assert_eq!(select(&all, &["count*".into()]).unwrap().len(), 1);
        let err = select(&all, &["nope".into()]).err().unwrap();
        assert!(
            err.starts_with("unknown workload 'nope'; valid workloads: "),
            "{err}"
        );
        assert!(err.contains("counter"), "{err}");
        assert!(select(&[], &[]).is_err());
    }

    #[test]
    fn list_names_every_workload() {
        let all = workloads::all();
        let text = list(&all);
        assert_eq!(text.lines().count(), all.len());
        let counter = text.lines().find(|l| l.starts_with("counter ")).unwrap();
        assert!(
            counter.contains("[legacy, scalable, host]") && counter.contains("Baseline"),
            "{text}"
        );
    }

    #[test]
    fn quick_run_writes_json_markdown_and_svg() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out");
        let json = dir.path().join("r.json");
        let args = parse(&[
            "-w",
            "counter",
            "--threads",
            "1,2,3",
            "--duration",
            "0.01",
            "--repeats",
            "2",
            "--out",
            out.to_str().unwrap(),
            "--json",
            json.to_str().unwrap(),
        ])
        .unwrap();
        run(&args).unwrap();
        let report: Report =
            serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        assert!(report.errors.is_empty());
        assert_eq!(report.results.len(), 3 * 3);
        for d in Design::ALL {
            for t in [1, 2, 3] {
                let r = report
                    .record("counter", d, t)
                    .expect("a record per design and count");
                assert_eq!(r.runs.len(), 2);
                assert!(r.ops_per_sec > 0.0);
                assert_eq!(r.duration_s, 0.01);
            }
        }
        let md = std::fs::read_to_string(out.join("report.md")).unwrap();
        assert!(md.contains("## counter"));
        let svg = std::fs::read_to_string(out.join("counter.svg")).unwrap();
        assert!(svg.contains("<svg"));
    }

    #[test]
    fn unwritable_output_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f");
        std::fs::write(&file, b"").unwrap();
        let args = parse(&["-w", "counter", "--out", file.to_str().unwrap()]).unwrap();
        let err = run(&args).unwrap_err();
        assert!(err.starts_with("cannot create"), "{err}");
    }
}
