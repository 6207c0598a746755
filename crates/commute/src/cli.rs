//! `scalevfs commute`: select cases, check commutativity natively, trace the commuting
//! ones, attribute the conflicts, write the report, and check a conflict-free list.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::PathBuf;
use std::sync::Arc;

use clap::Args;

use crate::catalogue::{catalogue, fixtures, Case, Form};
use crate::exec::{check_commutes, Commutes, Workers};
use crate::report::{CaseResult, LineReport, Report};
use crate::symbol::Symbolizer;
use crate::trace::{self, conflicts, LineUse};
use crate::{find, Selected};

/// Arguments of `scalevfs commute`.
#[derive(Args, Debug, Default)]
pub struct CommuteArgs {
    /// Run only the cases whose name (`open/diff-dirs`) or id (`open/diff-dirs@shared`)
    /// matches this glob; may be repeated. Default: every case.
    #[arg(long = "case", value_name = "GLOB")]
    pub cases: Vec<String>,
    /// Where to write the JSON results [default: OUT/results.json].
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Directory for report.md and results.json.
    #[arg(long, default_value = "commute-results")]
    pub out: PathBuf,
    /// List the selected cases (id, scenario, calls) and exit.
    #[arg(long)]
    pub list: bool,
    /// Fail if a case listed in FILE (one id a line, `#` comments) is no longer
    /// conflict-free; print the selected cases that became conflict-free (to raise the
    /// list). Listed cases that --case leaves out are not checked.
    #[arg(long, value_name = "FILE")]
    pub check: Option<PathBuf>,
    /// Traced children (valgrind processes) run in parallel [default: CPUs, at most 4].
    #[arg(long, value_name = "N")]
    pub jobs: Option<usize>,
    /// Check commutativity only (no valgrind).
    #[arg(long)]
    pub no_trace: bool,
    /// Add the fixture cases (a deliberate conflict on a shared counter).
    #[arg(long, hide = true)]
    pub fixtures: bool,
    /// Internal: the traced child (run under valgrind by the driver).
    #[arg(long, hide = true)]
    pub trace_child: bool,
}

fn all_cases(fixture: bool) -> Vec<Case> {
    let mut cases = catalogue();
    if fixture {
        cases.extend(fixtures());
    }
    cases
}

fn read_list(path: &PathBuf) -> Result<Vec<String>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(text
        .lines()
        .map(|l| l.split('#').next().unwrap_or("").trim())
        .filter(|l| !l.is_empty())
        .map(str::to_string)
        .collect())
}

/// The selected case-forms, in catalogue order.
fn select(cases: &[Case], globs: &[String]) -> Result<Vec<Selected>, String> {
    let mut out = Vec::new();
    let mut matchers = Vec::new();
    for g in globs {
        let m = globset::Glob::new(g)
            .map_err(|e| format!("bad --case {g:?}: {e}"))?
            .compile_matcher();
        matchers.push((g, m, false));
    }
    for (i, c) in cases.iter().enumerate() {
        for form in Form::ALL {
            let id = c.id(form);
            let mut hit = matchers.is_empty();
            for (_, m, used) in &mut matchers {
                if m.is_match(&c.name) || m.is_match(&id) {
                    hit = true;
                    *used = true;
                }
            }
            if hit {
                out.push(Selected { index: i, form, id });
            }
        }
    }
    let unmatched: Vec<&String> = matchers
        .iter()
        .filter(|(_, _, used)| !*used)
        .map(|(g, _, _)| *g)
        .collect();
    if !unmatched.is_empty() {
        let names: Vec<&str> = cases.iter().map(|c| c.name.as_str()).collect();
        return Err(format!(
            "no case matches {}; the cases are (each @per-process and @shared):\n  {}",
            unmatched
                .iter()
                .map(|g| format!("{g:?}"))
                .collect::<Vec<_>>()
                .join(", "),
            names.join("\n  ")
        ));
    }
    Ok(out)
}

fn access(u: &LineUse) -> String {
    match (u.read, u.write) {
        (true, true) => "rw",
        (false, true) => "w",
        _ => "r",
    }
    .to_string()
}

/// Fills `r`'s trace fields from case trace `t` of the child described by `info`.
fn apply(r: &mut CaseResult, info: &trace::ChildInfo, t: trace::Traced, sym: &mut Symbolizer) {
    let objects = t.objects;
    let name = |line: u64| {
        objects
            .iter()
            .find(|o| line < o.addr + o.size.max(1) && o.addr < line + trace::LINE)
            .map(|o| {
                if line >= o.addr {
                    format!("{}+{:#x}", o.name, line - o.addr)
                } else {
                    format!("{} (start)", o.name)
                }
            })
    };
    match t.trace {
        Err(e) => r.error = Some(e),
        Ok(t) => {
            let cs = conflicts(&t, info);
            r.instructions = t.instructions;
            r.conflict_free = Some(cs.is_empty());
            r.conflicting_lines = cs.len();
            // (A's frame, B's frame) -> (lines, sides writing, first line's object).
            let mut pairs: BTreeMap<(String, String), (usize, u8, Option<String>)> =
                BTreeMap::new();
            for (k, cf) in cs.iter().enumerate() {
                let first = |u: &LineUse| {
                    // Prefer a writing instruction: it is what makes the conflict.
                    u.insns
                        .iter()
                        .find(|(_, w)| *w)
                        .or(u.insns.first())
                        .map(|(i, _)| *i)
                        .unwrap_or(0)
                };
                let (sa, sb) = (sym.site(first(&cf.a), info), sym.site(first(&cf.b), info));
                let e = pairs.entry((sa.blame(), sb.blame())).or_default();
                e.0 += 1;
                e.1 = e.1.max(u8::from(cf.a.write) + u8::from(cf.b.write));
                if e.2.is_none() {
                    e.2 = name(cf.line);
                }
                if k < 8 {
                    let list = |u: &LineUse, sym: &mut Symbolizer| -> Vec<String> {
                        u.insns
                            .iter()
                            .map(|(i, w)| {
                                format!(
                                    "{}{}",
                                    if *w { "w " } else { "r " },
                                    sym.site(*i, info).blame()
                                )
                            })
                            .collect()
                    };
                    r.lines.push(LineReport {
                        line: format!("{:#x}", cf.line),
                        object: name(cf.line),
                        access: [access(&cf.a), access(&cf.b)],
                        a: list(&cf.a, sym),
                        b: list(&cf.b, sym),
                        a_chain: sa.chain(),
                        b_chain: sb.chain(),
                    });
                }
            }
            r.top = pairs.into_iter().max_by_key(|(_, (n, w, _))| (*n, *w)).map(
                |((a, b), (n, _, obj))| {
                    let b = if a == b { "same".to_string() } else { b };
                    let obj = obj.map_or(String::new(), |o| format!(" in {o}"));
                    let more = if n < cs.len() {
                        format!(" ({n} of {} lines)", cs.len())
                    } else {
                        String::new()
                    };
                    format!("{a} × {b}{obj}{more}")
                },
            );
        }
    }
}

/// Runs `scalevfs commute`.
pub fn run(args: &CommuteArgs) -> Result<(), String> {
    let cases = all_cases(args.fixtures);
    if args.trace_child {
        return trace::child(&cases);
    }
    let listed = args.check.as_ref().map(read_list).transpose()?;
    for id in listed.iter().flatten() {
        if find(&cases, id).is_none() {
            return Err(format!(
                "{id} (in the --check list) is not a case of the catalogue (see --list)"
            ));
        }
    }
    let sel = select(&cases, &args.cases)?;
    if args.list {
        for s in &sel {
            let c = &cases[s.index];
            let note = c
                .declared_noncommuting(s.form)
                .map_or(String::new(), |w| format!("  (non-commuting: {w})"));
            println!(
                "{:40} {:9} A={} B={}{note}",
                s.id,
                c.scenario.name(),
                c.a.name,
                c.b.name
            );
        }
        return Ok(());
    }
    if !args.no_trace {
        // Fail early, before the native checks.
        trace::valgrind_available()?;
    }

    // 1. The native commutativity check.
    let workers = Workers::start();
    let mut verdicts = Vec::new();
    for s in &sel {
        let v = check_commutes(&workers, &cases[s.index], s.form)
            .map_err(|e| format!("{}: {e}", s.id))?;
        verdicts.push(v);
    }
    let commuting: Vec<Selected> = sel
        .iter()
        .zip(&verdicts)
        .filter(|(_, v)| **v == Commutes::Yes)
        .map(|(s, _)| s.clone())
        .collect();
    eprintln!(
        "scalevfs commute: {} of {} selected cases commute; tracing them under valgrind",
        commuting.len(),
        sel.len()
    );

    // 2. The trace: the commuting cases dealt round-robin to `jobs` valgrind children.
    let started = std::time::Instant::now();
    let jobs = args
        .jobs
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get().min(4)))
        .clamp(1, commuting.len().max(1));
    let mut by_id: HashMap<String, (Arc<trace::ChildInfo>, trace::Traced)> = HashMap::new();
    if !args.no_trace && !commuting.is_empty() {
        let chunks: Vec<Vec<Selected>> = (0..jobs)
            .map(|j| commuting.iter().skip(j).step_by(jobs).cloned().collect())
            .collect();
        let fixtures = args.fixtures;
        let handles: Vec<_> = chunks
            .into_iter()
            .map(|c| std::thread::spawn(move || trace::trace(&c, fixtures)))
            .collect();
        for h in handles {
            let (info, traced) = h
                .join()
                .map_err(|_| "a tracing thread panicked".to_string())??;
            let info = Arc::new(info);
            for t in traced {
                by_id.insert(t.id.clone(), (info.clone(), t));
            }
        }
        eprintln!(
            "scalevfs commute: traced {} cases in {:.0} s ({jobs} valgrind processes)",
            by_id.len(),
            started.elapsed().as_secs_f64()
        );
    }
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let mut sym = Symbolizer::new(&exe);

    // 3. The results.
    let mut results = Vec::new();
    for (s, v) in sel.iter().zip(&verdicts) {
        let c = &cases[s.index];
        let mut r = CaseResult {
            id: s.id.clone(),
            name: c.name.clone(),
            form: s.form.name().to_string(),
            a: c.a.name.to_string(),
            b: c.b.name.to_string(),
            commutes: *v == Commutes::Yes,
            why_not: match v {
                Commutes::No(w) => Some(w.clone()),
                Commutes::Yes => None,
            },
            conflict_free: None,
            conflicting_lines: 0,
            top: None,
            lines: Vec::new(),
            instructions: [0; 2],
            error: None,
            fixture: c.fixture,
        };
        if let Some((info, t)) = by_id.remove(&s.id) {
            apply(&mut r, &info, t, &mut sym);
        }
        results.push(r);
    }
    let report = Report::new(results);

    // 4. Output.
    std::fs::create_dir_all(&args.out).map_err(|e| format!("{}: {e}", args.out.display()))?;
    let md = report.markdown();
    let md_path = args.out.join("report.md");
    std::fs::write(&md_path, &md).map_err(|e| format!("{}: {e}", md_path.display()))?;
    let json_path = args
        .json
        .clone()
        .unwrap_or_else(|| args.out.join("results.json"));
    let json = serde_json::to_string_pretty(&report).map_err(|e| e.to_string())?;
    std::fs::write(&json_path, json).map_err(|e| format!("{}: {e}", json_path.display()))?;
    println!("| case | form | commutes | conflict-free | lines | top attribution (A × B) |");
    for line in md
        .lines()
        .filter(|l| l.starts_with("| ") && !l.starts_with("| case"))
    {
        println!("{line}");
    }
    println!(
        "\nReport: {}, JSON: {}",
        md_path.display(),
        json_path.display()
    );

    let mut failed = false;
    if let Some(list) = listed {
        let listed: BTreeSet<&str> = list.iter().map(String::as_str).collect();
        // A listed case that conflicted is traced once more, alone, before it counts as
        // lost: some conflicts are periodic (the epoch advances when a thread's bag of
        // deferred frees fills, wherever that falls), and a second trace at another position tells them apart.
        let suspects: Vec<Selected> = sel
            .iter()
            .filter(|s| listed.contains(s.id.as_str()))
            .filter(|s| {
                report
                    .cases
                    .iter()
                    .any(|c| c.id == s.id && c.commutes && c.conflict_free == Some(false))
            })
            .cloned()
            .collect();
        let mut flaky = BTreeMap::new();
        if !suspects.is_empty() {
            eprintln!(
                "scalevfs commute: tracing the {} listed cases that conflicted once more",
                suspects.len()
            );
            // Each alone, in a child of its own (`jobs` at a time), so that where a
            // periodic event falls depends on the case's own calls only, not on the
            // cases traced before it in the same child.
            let fixtures = args.fixtures;
            for batch in suspects.chunks(jobs) {
                let handles: Vec<_> = batch
                    .iter()
                    .cloned()
                    .map(|c| std::thread::spawn(move || trace::trace(&[c], fixtures)))
                    .collect();
                for h in handles {
                    let (info, traced) = h
                        .join()
                        .map_err(|_| "a tracing thread panicked".to_string())??;
                    for t in traced {
                        let Some(c) = report.cases.iter().find(|c| c.id == t.id) else {
                            continue;
                        };
                        let mut again = c.clone();
                        apply(&mut again, &info, t, &mut sym);
                        if again.conflict_free == Some(true) {
                            flaky.insert(c.id.clone(), c.top.clone().unwrap_or_default());
                        }
                    }
                }
            }
        }
        let mut lost = Vec::new();
        let mut gained = Vec::new();
        for c in &report.cases {
            let free = c.commutes && c.conflict_free == Some(true);
            if let Some(top) = flaky.get(&c.id) {
                println!(
                    "\ncheck: {} conflicted in one of two traces (a periodic conflict?): {top}",
                    c.id
                );
            } else if listed.contains(c.id.as_str()) && !free {
                let why = if !c.commutes {
                    format!(
                        "no longer commutes: {}",
                        c.why_not.clone().unwrap_or_default()
                    )
                } else if let Some(e) = &c.error {
                    format!("failed: {e}")
                } else {
                    format!(
                        "{} conflicting lines; top: {}",
                        c.conflicting_lines,
                        c.top.clone().unwrap_or_default()
                    )
                };
                lost.push(format!("{}: {why}", c.id));
            }
            if !listed.contains(c.id.as_str()) && free && !c.fixture {
                gained.push(c.id.clone());
            }
        }
        let run: BTreeSet<&str> = report.cases.iter().map(|c| c.id.as_str()).collect();
        let skipped = listed.iter().filter(|id| !run.contains(**id)).count();
        if skipped > 0 {
            println!("\ncheck: {skipped} listed cases were not selected (--case) and not checked");
        }
        if !gained.is_empty() {
            println!(
                "\nConflict-free now but not in the list (add them to raise it):\n{}",
                gained.join("\n")
            );
        }
        if lost.is_empty() {
            println!(
                "\ncheck: all {} listed cases are still conflict-free",
                listed.len() - skipped
            );
        } else {
            println!(
                "\ncheck FAILED: {} listed cases are no longer conflict-free:\n{}",
                lost.len(),
                lost.join("\n")
            );
            failed = true;
        }
    }
    println!("\n{}", report.headline());
    if failed {
        return Err("conflict-free list check failed".into());
    }
    Ok(())
}
