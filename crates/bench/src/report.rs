//! Results as data (JSON, via serde) and as a Markdown report.
//!
//! A [`Report`] holds everything a run produced, so the Markdown and the plots are pure
//! functions of it (and of a `results.json` read back later).

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use crate::runner::{Failure, Measurement, RunConfig};
use crate::stats::{median, min_max, paired_ratio, ratio};
use crate::{Design, Workload};

/// The machine a run measured.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Machine {
    /// CPUs this process may run on.
    pub nproc: usize,
    /// `uname -r`.
    pub kernel: String,
    /// The CPU model, from `/proc/cpuinfo`.
    pub cpu: String,
    /// When the run started, UTC, ISO 8601.
    pub date: String,
    /// `git rev-parse HEAD` of the working directory (`-dirty` if it has changes).
    pub git_commit: Option<String>,
    /// The commit HEAD was when the binary was built (changes not committed then are not
    /// shown); differs from `git_commit` for a binary carried to another checkout.
    #[serde(default)]
    pub build_commit: Option<String>,
}

/// The settings of a run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Settings {
    /// The thread counts each workload ran at.
    pub threads: Vec<usize>,
    /// Length of each timed repeat, in seconds.
    pub duration_s: f64,
    /// Length of the untimed warm-up round, in seconds.
    pub warmup_s: f64,
    /// Timed repeats per (workload, design, thread count).
    pub repeats: usize,
    /// Whether lock statistics were counted (`--lockstat`).
    pub lockstat: bool,
    /// Whether the thread counts' rounds were interleaved too (`--interleave-threads`).
    #[serde(default)]
    pub interleave_threads: bool,
}

/// A workload as the report lists it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WorkloadInfo {
    /// The workload's name (as `--workload` takes it).
    pub name: String,
    /// One line on what it measures.
    pub description: String,
    /// The designs it ran under.
    pub designs: Vec<String>,
}

/// One (workload, design, thread count).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Record {
    /// The workload's name.
    pub workload: String,
    /// The design's name.
    pub design: String,
    /// Worker threads.
    pub threads: usize,
    /// Length of each timed repeat, in seconds.
    pub duration_s: f64,
    /// The median of `runs`.
    pub ops_per_sec: f64,
    /// The slowest of `runs`.
    pub min_ops_per_sec: f64,
    /// The fastest of `runs`.
    pub max_ops_per_sec: f64,
    /// Operations per second of each timed repeat, in the order run.
    pub runs: Vec<f64>,
    /// The instance's lock statistics, with `--lockstat`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lockstat: Option<String>,
}

/// A (workload, design, thread count) that failed.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ErrorRecord {
    /// The workload's name.
    pub workload: String,
    /// The design's name.
    pub design: String,
    /// Worker threads.
    pub threads: usize,
    /// What went wrong.
    pub error: String,
}

/// Everything a run produced.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// The machine the run was on.
    pub machine: Machine,
    /// The run's settings.
    pub settings: Settings,
    /// The workloads that ran.
    pub workloads: Vec<WorkloadInfo>,
    /// One record per (workload, design, thread count) that completed.
    pub results: Vec<Record>,
    /// The (workload, design, thread count)s that failed.
    #[serde(default)]
    pub errors: Vec<ErrorRecord>,
    /// Memory per empty file for each VFS design (empty when not measured).
    #[serde(default)]
    pub memory: Vec<crate::memory::MemoryRecord>,
}

impl Machine {
    /// Describes the machine this process runs on.
    pub fn detect() -> Machine {
        let read = |p: &str| std::fs::read_to_string(p).ok();
        Machine {
            nproc: scalevfs_primitives::cpu::num_cpus(),
            kernel: read("/proc/sys/kernel/osrelease")
                .map(|s| s.trim().to_string())
                .unwrap_or_else(|| "unknown".into()),
            cpu: read("/proc/cpuinfo")
                .and_then(|s| {
                    s.lines()
                        .find(|l| l.starts_with("model name"))
                        .and_then(|l| l.split_once(':'))
                        .map(|(_, v)| v.trim().to_string())
                })
                .unwrap_or_else(|| "unknown".into()),
            date: iso8601_utc(SystemTime::now()),
            git_commit: git_commit(),
            build_commit: option_env!("SCALEVFS_BUILD_COMMIT").map(str::to_string),
        }
    }
}

impl Machine {
    /// The code that ran, for the report: the working directory's commit, or the binary's
    /// when they differ (a binary carried to another checkout) or only it is known.
    pub fn commit(&self) -> String {
        match (&self.build_commit, &self.git_commit) {
            (Some(b), Some(g)) if g.starts_with(b.as_str()) => g.clone(),
            (Some(b), Some(g)) => format!("{b} (the binary's; run in checkout {g})"),
            (Some(b), None) => format!("{b} (the binary's)"),
            (None, g) => g.clone().unwrap_or_else(|| "unknown".into()),
        }
    }
}

fn git_commit() -> Option<String> {
    let run = |args: &[&str]| {
        std::process::Command::new("git")
            .args(args)
            .stderr(std::process::Stdio::null())
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    let head = run(&["rev-parse", "HEAD"]).filter(|h| !h.is_empty())?;
    let dirty =
        run(&["status", "--porcelain", "--untracked-files=no"]).is_some_and(|s| !s.is_empty());
    Some(if dirty { format!("{head}-dirty") } else { head })
}

/// `t` as `YYYY-MM-DDTHH:MM:SSZ`.
pub fn iso8601_utc(t: SystemTime) -> String {
    let secs = t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let (days, rem) = (secs / 86_400, secs % 86_400);
    // Days since 1970-01-01 to a civil date (H. Hinnant's `civil_from_days`).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

impl Report {
    /// Assembles the report of a run.
    pub fn new(
        machine: Machine,
        cfg: &RunConfig,
        workloads: &[&dyn Workload],
        measurements: &[Measurement],
        failures: &[Failure],
    ) -> Report {
        Report {
            machine,
            settings: Settings {
                threads: cfg.threads.clone(),
                duration_s: cfg.duration.as_secs_f64(),
                warmup_s: cfg.warmup.as_secs_f64(),
                repeats: cfg.repeats,
                lockstat: cfg.lockstat,
                interleave_threads: cfg.interleave_threads,
            },
            workloads: workloads
                .iter()
                .map(|w| WorkloadInfo {
                    name: w.name().into(),
                    description: w.description().into(),
                    designs: w.designs().iter().map(|d| d.name().into()).collect(),
                })
                .collect(),
            results: measurements
                .iter()
                .map(|m| {
                    let (lo, hi) = min_max(&m.runs).unwrap_or((0.0, 0.0));
                    Record {
                        workload: m.workload.clone(),
                        design: m.design.name().into(),
                        threads: m.threads,
                        duration_s: cfg.duration.as_secs_f64(),
                        ops_per_sec: median(&m.runs).unwrap_or(0.0),
                        min_ops_per_sec: lo,
                        max_ops_per_sec: hi,
                        runs: m.runs.clone(),
                        lockstat: m.lockstat.clone(),
                    }
                })
                .collect(),
            errors: failures
                .iter()
                .map(|f| ErrorRecord {
                    workload: f.workload.clone(),
                    design: f.design.name().into(),
                    threads: f.threads,
                    error: f.error.clone(),
                })
                .collect(),
            memory: Vec::new(),
        }
    }

    /// The record of (workload, design, threads), if it was measured.
    pub fn record(&self, workload: &str, design: Design, threads: usize) -> Option<&Record> {
        self.results
            .iter()
            .find(|r| r.workload == workload && r.design == design.name() && r.threads == threads)
    }

    /// The thread counts measured for `workload`, ascending.
    pub fn thread_counts(&self, workload: &str) -> Vec<usize> {
        let set: BTreeSet<usize> = self
            .results
            .iter()
            .filter(|r| r.workload == workload)
            .map(|r| r.threads)
            .collect();
        set.into_iter().collect()
    }

    /// The paired ratio `b / a` at one thread count (see [`paired_ratio`]).
    pub fn design_ratio(
        &self,
        workload: &str,
        b: Design,
        a: Design,
        threads: usize,
    ) -> Option<f64> {
        let rb = self.record(workload, b, threads)?;
        let ra = self.record(workload, a, threads)?;
        paired_ratio(&rb.runs, &ra.runs)
    }

    /// How `design` scales from `from` to `to` threads: the ratio of their medians.
    pub fn scaling(&self, workload: &str, design: Design, from: usize, to: usize) -> Option<f64> {
        ratio(
            self.record(workload, design, to)?.ops_per_sec,
            self.record(workload, design, from)?.ops_per_sec,
        )
    }

    /// How far `design`'s throughput falls as threads are added: the lowest, over the
    /// thread counts measured, of its median at that count over its best median at any
    /// fewer threads (1.0 or more: it never falls; `None` with fewer than two counts).
    /// The contention rule asks at least 0.8.
    pub fn no_collapse(&self, workload: &str, design: Design) -> Option<f64> {
        let mut best: Option<f64> = None;
        let mut worst: Option<f64> = None;
        for t in self.thread_counts(workload) {
            let Some(x) = self.record(workload, design, t).map(|r| r.ops_per_sec) else {
                continue;
            };
            if let Some(r) = best.and_then(|b| ratio(x, b)) {
                worst = Some(worst.map_or(r, |w: f64| w.min(r)));
            }
            best = Some(best.map_or(x, |b| b.max(x)));
        }
        worst
    }

    /// The Markdown report: method, a summary of ratios, then a table per workload.
    pub fn markdown(&self) -> String {
        let mut s = String::new();
        let m = &self.machine;
        let st = &self.settings;
        let _ = writeln!(s, "# scalevfs benchmark report\n");
        let _ = writeln!(
            s,
            "Machine: {} CPUs ({}), Linux {}, {}, commit {}.\n",
            m.nproc,
            m.cpu,
            m.kernel,
            m.date,
            m.commit()
        );
        let _ = writeln!(
            s,
            "Method: each design runs {} timed repeats of {} s after a {} s warm-up, the designs' \
             repeats interleaved{}; throughput is the median repeat (min-max in brackets); \
             ratios are medians of the per-repeat ratios of neighbouring runs. Thread counts \
             above {} are oversubscribed.{}\n",
            st.repeats,
            st.duration_s,
            st.warmup_s,
            if st.interleave_threads {
                " (and those of every thread count)"
            } else {
                ""
            },
            m.nproc,
            if st.lockstat {
                " Lock statistics were on, which slows every design."
            } else {
                ""
            }
        );
        self.summary(&mut s, Design::Legacy);
        self.summary(&mut s, Design::Host);
        if !self.memory.is_empty() {
            let _ = writeln!(
                s,
                "## Memory per empty file

Bytes one more empty file adds (inode, dentry, \
                 directory entry, cache slots), counted by the allocator over {} files \
                 (Linux tmpfs: about 800 for inode plus dentry).

| design | bytes |\n|---|--:|",
                self.memory[0].files
            );
            for m in &self.memory {
                let _ = writeln!(s, "| {} | {:.0} |", m.design, m.bytes_per_file);
            }
            s.push('\n');
        }
        for w in &self.workloads {
            self.workload_section(&mut s, w);
        }
        if !self.errors.is_empty() {
            let _ = writeln!(s, "## Errors\n");
            for e in &self.errors {
                let _ = writeln!(
                    s,
                    "- {} / {} / {} threads: {}",
                    e.workload, e.design, e.threads, e.error
                );
            }
            s.push('\n');
        }
        s
    }

    /// A table of `scalable / base` for every workload (rows) and thread count (columns).
    fn summary(&self, s: &mut String, base: Design) {
        let threads: BTreeSet<usize> = self.results.iter().map(|r| r.threads).collect();
        let rows: Vec<(&str, Vec<Option<f64>>)> = self
            .workloads
            .iter()
            .map(|w| {
                let cells = threads
                    .iter()
                    .map(|&t| self.design_ratio(&w.name, Design::Scalable, base, t))
                    .collect();
                (w.name.as_str(), cells)
            })
            .filter(|(_, cells): &(&str, Vec<Option<f64>>)| cells.iter().any(Option::is_some))
            .collect();
        if rows.is_empty() {
            return;
        }
        let _ = writeln!(s, "## Summary: scalable / {base} throughput\n");
        let _ = write!(s, "| workload |");
        for t in &threads {
            let _ = write!(s, " {t} thr |");
        }
        let _ = write!(s, "\n|---|");
        for _ in &threads {
            s.push_str("--:|");
        }
        s.push('\n');
        for (name, cells) in rows {
            let _ = write!(s, "| {name} |");
            for c in cells {
                let _ = write!(s, " {} |", fmt_ratio(c));
            }
            s.push('\n');
        }
        s.push('\n');
    }

    fn workload_section(&self, s: &mut String, w: &WorkloadInfo) {
        let name = w.name.as_str();
        let designs: Vec<Design> = Design::ALL
            .into_iter()
            .filter(|d| w.designs.iter().any(|n| n == d.name()))
            .collect();
        let has = |d: Design| designs.contains(&d);
        let _ = writeln!(s, "## {name}\n\n{}\n", w.description);
        let threads = self.thread_counts(name);
        if threads.is_empty() {
            let _ = writeln!(s, "No results.\n");
            return;
        }
        let _ = write!(s, "| threads |");
        for d in &designs {
            let _ = write!(s, " {d} ops/s (min-max) |");
        }
        let ratios: Vec<Design> = [Design::Legacy, Design::Host]
            .into_iter()
            .filter(|&d| has(d) && has(Design::Scalable))
            .collect();
        for d in &ratios {
            let _ = write!(s, " scalable/{d} |");
        }
        let _ = write!(s, "\n|--:|");
        for _ in 0..designs.len() + ratios.len() {
            s.push_str("--:|");
        }
        s.push('\n');
        for &t in &threads {
            let _ = write!(s, "| {t} |");
            for &d in &designs {
                match self.record(name, d, t) {
                    Some(r) => {
                        let _ = write!(
                            s,
                            " {} ({}-{}) |",
                            fmt_ops(r.ops_per_sec),
                            fmt_ops(r.min_ops_per_sec),
                            fmt_ops(r.max_ops_per_sec)
                        );
                    }
                    None => s.push_str(" - |"),
                }
            }
            for &d in &ratios {
                let _ = write!(
                    s,
                    " {} |",
                    fmt_ratio(self.design_ratio(name, Design::Scalable, d, t))
                );
            }
            s.push('\n');
        }
        s.push('\n');
        if threads.contains(&1) && threads.contains(&2) {
            let parts: Vec<String> = designs
                .iter()
                .map(|&d| format!("{d} {}", fmt_ratio(self.scaling(name, d, 1, 2))))
                .collect();
            let _ = writeln!(s, "Scaling 1 -> 2 threads: {}.\n", parts.join(", "));
        }
        if threads.len() > 1 {
            let parts: Vec<String> = designs
                .iter()
                .map(|&d| format!("{d} {}", fmt_ratio(self.no_collapse(name, d))))
                .collect();
            let _ = writeln!(
                s,
                "No collapse (lowest throughput at N threads over the best at fewer): {}.\n",
                parts.join(", ")
            );
        }
        let _ = writeln!(s, "![{name}: throughput against threads]({name}.svg)\n");
        for r in self.results.iter().filter(|r| r.workload == name) {
            if let Some(table) = &r.lockstat {
                let _ = writeln!(
                    s,
                    "#### Lock statistics: {} threads, {}\n\n```\n{}\n```\n",
                    r.threads,
                    r.design,
                    table.trim_end()
                );
            }
        }
    }
}

/// Operations per second with three significant digits and an SI suffix (`12.3M`).
pub fn fmt_ops(x: f64) -> String {
    if !x.is_finite() {
        return "-".into();
    }
    if x == 0.0 {
        return "0".into();
    }
    let (v, unit) = match x.abs() {
        a if a >= 1e9 => (x / 1e9, "G"),
        a if a >= 1e6 => (x / 1e6, "M"),
        a if a >= 1e3 => (x / 1e3, "k"),
        _ => (x, ""),
    };
    let decimals = match v.abs() {
        a if a >= 99.95 => 0,
        a if a >= 9.995 => 1,
        _ => 2,
    };
    format!("{v:.decimals$}{unit}")
}

/// A ratio as `1.93x`, or `-` when there is none.
pub fn fmt_ratio(r: Option<f64>) -> String {
    match r {
        Some(r) if r >= 99.95 => format!("{r:.0}x"),
        Some(r) if r >= 9.995 => format!("{r:.1}x"),
        Some(r) => format!("{r:.2}x"),
        None => "-".into(),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::time::Duration;

    pub(crate) fn sample() -> Report {
        let rec = |design: &str, threads, runs: Vec<f64>| Record {
            workload: "w".into(),
            design: design.into(),
            threads,
            duration_s: 0.5,
            ops_per_sec: median(&runs).unwrap(),
            min_ops_per_sec: min_max(&runs).unwrap().0,
            max_ops_per_sec: min_max(&runs).unwrap().1,
            runs,
            lockstat: None,
        };
        Report {
            machine: Machine {
                nproc: 2,
                kernel: "6.1.0".into(),
                cpu: "Test CPU".into(),
                date: "2026-11-22T15:00:00Z".into(),
                git_commit: Some("abc".into()),
                build_commit: None,
            },
            settings: Settings {
                threads: vec![1, 2],
                duration_s: 0.5,
                warmup_s: 0.1,
                repeats: 3,
                lockstat: false,
                interleave_threads: false,
            },
            workloads: vec![WorkloadInfo {
                name: "w".into(),
                description: "A test workload.".into(),
                designs: vec!["legacy".into(), "scalable".into(), "host".into()],
            }],
            results: vec![
                rec("legacy", 1, vec![1e6, 2e6, 3e6]),
                rec("scalable", 1, vec![2e6, 4e6, 6e6]),
                rec("host", 1, vec![1e5, 1e5, 1e5]),
                rec("legacy", 2, vec![1e6, 1e6, 1e6]),
                Record {
                    lockstat: Some("class acq\nx 1".into()),
                    ..rec("scalable", 2, vec![8e6, 8e6, 8e6])
                },
            ],
            errors: vec![ErrorRecord {
                workload: "w".into(),
                design: "host".into(),
                threads: 2,
                error: "setup: EMFILE".into(),
            }],
            memory: vec![crate::memory::MemoryRecord {
                design: "scalable".into(),
                bytes_per_file: 586.4,
                files: 1000,
            }],
        }
    }

    #[test]
    fn json_round_trip_and_shape() {
        let r = sample();
        let json = serde_json::to_string_pretty(&r).unwrap();
        let back: Report = serde_json::from_str(&json).unwrap();
        assert_eq!(back, r);
        let v: serde_json::Value = serde_json::from_str(&json).unwrap();
        let first = &v["results"][0];
        for key in [
            "workload",
            "design",
            "threads",
            "duration_s",
            "ops_per_sec",
            "runs",
        ] {
            assert!(first.get(key).is_some(), "missing {key}: {first}");
        }
        assert_eq!(first["ops_per_sec"], 2e6);
        assert_eq!(first["runs"].as_array().unwrap().len(), 3);
        assert_eq!(v["machine"]["nproc"], 2);
        // No lockstat key unless there is a table.
        assert!(first.get("lockstat").is_none());
        assert!(v["results"][4]["lockstat"].is_string());
    }

    #[test]
    fn ratios_and_scaling() {
        let r = sample();
        assert_eq!(
            r.design_ratio("w", Design::Scalable, Design::Legacy, 1),
            Some(2.0)
        );
        assert_eq!(
            r.design_ratio("w", Design::Scalable, Design::Host, 1),
            Some(40.0)
        );
        assert_eq!(r.design_ratio("w", Design::Scalable, Design::Host, 2), None);
        assert_eq!(r.scaling("w", Design::Scalable, 1, 2), Some(2.0));
        assert_eq!(r.scaling("w", Design::Legacy, 1, 2), Some(0.5));
        assert_eq!(r.scaling("w", Design::Host, 1, 2), None);
    }

    #[test]
    fn no_collapse_is_the_worst_fall_below_the_best_at_fewer_threads() {
        let mut r = sample();
        let at = |threads, x: f64| Record {
            workload: "w".into(),
            design: "legacy".into(),
            threads,
            duration_s: 0.5,
            ops_per_sec: x,
            min_ops_per_sec: x,
            max_ops_per_sec: x,
            runs: vec![x],
            lockstat: None,
        };
        // legacy: 2M at 1 thread, 1M at 2 (0.5), then 1.8M at 4 (0.9 of the best, 2M) and
        // 1.2M at 8 (0.6 of 2M, not of 1.8M).
        r.results.push(at(4, 1.8e6));
        r.results.push(at(8, 1.2e6));
        assert_eq!(r.no_collapse("w", Design::Legacy), Some(0.5));
        r.results
            .retain(|x| !(x.design == "legacy" && x.threads == 2));
        let worst = r.no_collapse("w", Design::Legacy).unwrap();
        assert!((worst - 0.6).abs() < 1e-9, "{worst}");
        // scalable rises (4M, 8M); host has one count only.
        assert_eq!(r.no_collapse("w", Design::Scalable), Some(2.0));
        assert_eq!(r.no_collapse("w", Design::Host), None);
        let md = r.markdown();
        assert!(
            md.contains("No collapse (lowest throughput at N threads over the best at fewer): legacy 0.60x, scalable 2.00x, host -."),
            "{md}"
        );
    }

    #[test]
    fn markdown_table() {
        let md = sample().markdown();
        let expected_rows = [
            "| threads | legacy ops/s (min-max) | scalable ops/s (min-max) | host ops/s (min-max) | scalable/legacy | scalable/host |",
            "|--:|--:|--:|--:|--:|--:|",
            "| 1 | 2.00M (1.00M-3.00M) | 4.00M (2.00M-6.00M) | 100k (100k-100k) | 2.00x | 40.0x |",
            "| 2 | 1.00M (1.00M-1.00M) | 8.00M (8.00M-8.00M) | - | 8.00x | - |",
        ];
        let table = expected_rows.join("\n");
        assert!(md.contains(&table), "{md}");
        assert!(md.contains("Scaling 1 -> 2 threads: legacy 0.50x, scalable 2.00x, host -."));
        assert!(md.contains("| w | 2.00x | 8.00x |"), "{md}");
        assert!(md.contains("## Summary: scalable / host throughput"));
        assert!(md.contains("![w: throughput against threads](w.svg)"));
        assert!(
            md.contains("#### Lock statistics: 2 threads, scalable\n\n```\nclass acq\nx 1\n```")
        );
        assert!(md.contains("- w / host / 2 threads: setup: EMFILE"));
        assert!(md.contains("## Memory per empty file"), "{md}");
        assert!(md.contains("| scalable | 586 |"), "{md}");
        assert!(md.contains("Thread counts above 2 are oversubscribed."));
    }

    #[test]
    fn number_formatting() {
        assert_eq!(fmt_ops(0.0), "0");
        assert_eq!(fmt_ops(1.5), "1.50");
        assert_eq!(fmt_ops(950.0), "950");
        assert_eq!(fmt_ops(12_345.0), "12.3k");
        assert_eq!(fmt_ops(1_234_567.0), "1.23M");
        assert_eq!(fmt_ops(123_456_789.0), "123M");
        assert_eq!(fmt_ops(2.5e9), "2.50G");
        assert_eq!(fmt_ops(f64::NAN), "-");
        assert_eq!(fmt_ratio(Some(1.934)), "1.93x");
        assert_eq!(fmt_ratio(Some(250.2)), "250x");
        assert_eq!(fmt_ratio(None), "-");
    }

    #[test]
    fn utc_dates() {
        let at = |s| iso8601_utc(UNIX_EPOCH + Duration::from_secs(s));
        assert_eq!(at(0), "1970-01-01T00:00:00Z");
        assert_eq!(at(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(at(1_700_000_000), "2023-11-14T22:13:20Z");
    }

    #[test]
    fn the_commit_names_the_binary_when_it_ran_in_another_checkout() {
        let m = |build: Option<&str>, git: Option<&str>| Machine {
            nproc: 1,
            kernel: String::new(),
            cpu: String::new(),
            date: String::new(),
            git_commit: git.map(str::to_string),
            build_commit: build.map(str::to_string),
        };
        assert_eq!(m(Some("abc"), Some("abc-dirty")).commit(), "abc-dirty");
        assert_eq!(
            m(Some("abc"), Some("def")).commit(),
            "abc (the binary's; run in checkout def)"
        );
        assert_eq!(m(Some("abc"), None).commit(), "abc (the binary's)");
        assert_eq!(m(None, Some("def")).commit(), "def");
        assert_eq!(m(None, None).commit(), "unknown");
        // Reports written before the field existed still load.
        let old = r#"{"nproc":1,"kernel":"k","cpu":"c","date":"d","git_commit":"abc"}"#;
        let read: Machine = serde_json::from_str(old).unwrap();
        assert_eq!(read.build_commit, None);
    }
}
