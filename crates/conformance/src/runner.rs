//! Running scripts on two [`Backend`]s and comparing what they did.
//!
//! A backend runs a whole script in a fresh world (a new case directory on the host, a new
//! `Vfs` for scalevfs) and returns one [`Outcome`] per step. Two runs agree when every step
//! agrees ([`Outcome::agrees`]); the report of a disagreement prints the script with both
//! outcomes of every step and marks the ones that differ.

use std::fmt::Write as _;

use crate::known::{
    known_difference, listings_resumed_after_changes, unreturned_position_reads,
    CHANGED_DURING_LISTING, UNRETURNED_POSITION,
};
use crate::op::{open_flags, CompareOptions, Op, Outcome};
use crate::script::Script;
use crate::target::{Executor, Target};

/// A system under test that can run a script from a clean start.
pub trait Backend: Sync {
    fn describe(&self) -> String;
    /// One outcome per step; fewer (ending in [`Outcome::Harness`]) if the run broke off.
    fn run(&self, script: &Script) -> Vec<Outcome>;
    fn compare_options(&self) -> CompareOptions {
        CompareOptions::default()
    }
}

/// Run a script's steps on a target that is at its start state, emitting each outcome as
/// it is produced (the host child streams them so a crash keeps the earlier ones).
pub fn run_script(target: &mut dyn Target, script: &Script, sink: &mut dyn FnMut(Outcome)) {
    let mut ex = Executor::new(target);
    if let Err(m) = ex.prelude() {
        sink(Outcome::Harness(format!("prelude: {m}")));
        return;
    }
    for op in &script.steps {
        let o = ex.step(op);
        let stop = matches!(o, Outcome::Harness(_));
        sink(o);
        if stop {
            return;
        }
    }
    ex.close_all();
}

/// Both runs of one script.
#[derive(Clone, Debug)]
pub struct CaseResult {
    pub script: Script,
    pub a: Vec<Outcome>,
    pub b: Vec<Outcome>,
    /// Indices of the steps that differ (a missing outcome differs).
    pub differing: Vec<usize>,
    /// The reason, if this case is listed as a deliberate difference, or if every step
    /// that differs is one a step-level rule covers (`known::unreturned_position_reads`,
    /// `known::listings_resumed_after_changes`).
    pub known: Option<&'static str>,
}

impl CaseResult {
    pub fn agrees(&self) -> bool {
        self.differing.is_empty()
    }

    /// The script with both outcomes under each step; differing steps marked `<<`.
    pub fn render(&self, a_name: &str, b_name: &str) -> String {
        let mut s = String::new();
        let _ = writeln!(s, "=== {} ===", self.script.name);
        if let Some(why) = self.known {
            let _ = writeln!(s, "(known difference: {why})");
        }
        let steps = &self.script.steps;
        let show = |v: &Vec<Outcome>, i: usize| match v.get(i) {
            None => "(not run)".to_string(),
            Some(o) => show_outcome(steps.get(i), o),
        };
        let n = self.script.steps.len().max(self.a.len()).max(self.b.len());
        for i in 0..n {
            let op = self
                .script
                .steps
                .get(i)
                .map_or_else(|| "(harness)".to_string(), |o| o.to_string());
            let mark = if self.differing.contains(&i) {
                "<<"
            } else {
                "  "
            };
            let (oa, ob) = (show(&self.a, i), show(&self.b, i));
            if oa == ob && mark == "  " {
                let _ = writeln!(s, "  {mark}{i:3}: {op}\n           = {oa}");
            } else {
                let _ = writeln!(
                    s,
                    "  {mark}{i:3}: {op}\n           {a_name}: {oa}\n           {b_name}: {ob}"
                );
            }
        }
        s
    }
}

/// An outcome, with flag words decoded where the step says what they are.
fn show_outcome(op: Option<&Op>, o: &Outcome) -> String {
    match (op, o) {
        (
            Some(Op::Fcntl {
                cmd: libc::F_GETFL, ..
            }),
            Outcome::Val(v),
        ) => format!("{v:#o} ({})", open_flags(*v as i32)),
        (Some(Op::Umask(_)), Outcome::Val(v)) => format!("{v:#o}"),
        _ => o.to_string(),
    }
}

/// Indices of differing steps.
pub fn differing_steps(a: &[Outcome], b: &[Outcome], opts: CompareOptions) -> Vec<usize> {
    (0..a.len().max(b.len()))
        .filter(|&i| match (a.get(i), b.get(i)) {
            (Some(x), Some(y)) => !x.agrees(y, opts),
            _ => true,
        })
        .collect()
}

/// Run one script on both backends and compare.
pub fn run_case(a: &dyn Backend, b: &dyn Backend, script: &Script) -> CaseResult {
    let oa = a.run(script);
    let ob = b.run(script);
    let (xa, xb) = (a.compare_options(), b.compare_options());
    let opts = CompareOptions {
        ignore_dir_size: xa.ignore_dir_size || xb.ignore_dir_size,
    };
    let differing = differing_steps(&oa, &ob, opts);
    let known = known_difference(&script.name).or_else(|| {
        // Otherwise a difference is known only if every differing step is one the
        // step-level rule covers.
        if differing.is_empty() {
            return None;
        }
        let positions = unreturned_position_reads(script, &oa);
        if differing.iter().all(|i| positions.contains(i)) {
            return Some(UNRETURNED_POSITION);
        }
        let changed = listings_resumed_after_changes(script, &oa);
        differing
            .iter()
            .all(|i| positions.contains(i) || changed.contains(i))
            .then_some(CHANGED_DURING_LISTING)
    });
    CaseResult {
        script: script.clone(),
        a: oa,
        b: ob,
        differing,
        known,
    }
}

/// The results of a suite run on two backends.
pub struct Report {
    pub a_name: String,
    pub b_name: String,
    pub cases: Vec<CaseResult>,
}

impl Report {
    pub fn run(a: &dyn Backend, b: &dyn Backend, scripts: &[Script]) -> Report {
        Report {
            a_name: a.describe(),
            b_name: b.describe(),
            cases: scripts.iter().map(|s| run_case(a, b, s)).collect(),
        }
    }

    /// Cases that differ and are not listed as deliberate.
    pub fn unexpected(&self) -> Vec<&CaseResult> {
        self.cases
            .iter()
            .filter(|c| !c.agrees() && c.known.is_none())
            .collect()
    }

    /// Cases listed as deliberate differences that now agree (the list should shrink).
    pub fn stale_known(&self) -> Vec<&CaseResult> {
        self.cases
            .iter()
            .filter(|c| c.agrees() && c.known.is_some())
            .collect()
    }

    /// Counts per category: (category, cases, differing).
    pub fn by_category(&self) -> Vec<(String, usize, usize)> {
        let mut v: Vec<(String, usize, usize)> = Vec::new();
        for c in &self.cases {
            let cat = c.script.category().to_string();
            let i = match v.iter().position(|(n, _, _)| *n == cat) {
                Some(i) => i,
                None => {
                    v.push((cat, 0, 0));
                    v.len() - 1
                }
            };
            v[i].1 += 1;
            if !c.agrees() {
                v[i].2 += 1;
            }
        }
        v
    }

    /// "N cases, M differ", the per-category table, and every unexpected diff (at most
    /// `max_diffs` of them rendered in full).
    pub fn summary(&self, max_diffs: usize) -> String {
        let mut s = String::new();
        let differ = self.cases.iter().filter(|c| !c.agrees()).count();
        let known = self
            .cases
            .iter()
            .filter(|c| !c.agrees() && c.known.is_some())
            .count();
        let _ = writeln!(s, "A = {}\nB = {}", self.a_name, self.b_name);
        let _ = writeln!(
            s,
            "{} cases, {} differ ({} known/deliberate, {} unexpected)",
            self.cases.len(),
            differ,
            known,
            differ - known
        );
        for (cat, n, d) in self.by_category() {
            let _ = writeln!(s, "  {cat:<14} {n:4} cases {d:4} differ");
        }
        for c in self.stale_known() {
            let _ = writeln!(
                s,
                "note: {} is listed as a known difference but agrees now",
                c.script.name
            );
        }
        let unexpected = self.unexpected();
        for c in unexpected.iter().take(max_diffs) {
            s.push_str(&c.render("A", "B"));
        }
        if unexpected.len() > max_diffs {
            let _ = writeln!(s, "... and {} more:", unexpected.len() - max_diffs);
            for c in &unexpected[max_diffs..] {
                let first = c.differing.first().copied().unwrap_or(0);
                let _ = writeln!(
                    s,
                    "  {} (step {first}: A {} / B {})",
                    c.script.name,
                    c.a.get(first).map_or("-".into(), |o| o.to_string()),
                    c.b.get(first).map_or("-".into(), |o| o.to_string())
                );
            }
        }
        s
    }
}
