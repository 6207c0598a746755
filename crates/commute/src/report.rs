//! Results as data (JSON) and as a Markdown report, with the headline: the conflict-free
//! share of the commuting cases, per form.

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

/// A conflicting line and who touched it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct LineReport {
    /// The line's address in the traced child (hex).
    pub line: String,
    /// The well-known object it is in (`Process 1+0x40`), if any.
    pub object: Option<String>,
    /// What call A did (`r`, `w`, `rw`) and B did.
    pub access: [String; 2],
    /// Call A's instructions on the line: the blamed frame of each.
    pub a: Vec<String>,
    /// Call B's.
    pub b: Vec<String>,
    /// The full inline chain of A's first instruction, innermost first.
    pub a_chain: String,
    /// Of B's first instruction.
    pub b_chain: String,
}

/// One case in one form.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct CaseResult {
    /// `name@form`.
    pub id: String,
    /// The case name.
    pub name: String,
    /// `per-process` or `shared`.
    pub form: String,
    /// Call A's op.
    pub a: String,
    /// Call B's op.
    pub b: String,
    /// Whether both orders agree (results and state).
    pub commutes: bool,
    /// Why not, if not.
    pub why_not: Option<String>,
    /// Whether the two calls share no line one of them writes (`None`: not traced).
    pub conflict_free: Option<bool>,
    /// How many such lines.
    pub conflicting_lines: usize,
    /// The most frequent (A's frame, B's frame) pair among them.
    pub top: Option<String>,
    /// The conflicting lines (the first few).
    pub lines: Vec<LineReport>,
    /// Instructions each call executed under the trace.
    pub instructions: [u64; 2],
    /// Why there is no trace, if the case failed.
    pub error: Option<String>,
    /// A fixture case (not counted in the headline).
    pub fixture: bool,
}

/// Conflict-free commuting cases over commuting traced cases.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct Share {
    /// Commuting, traced, conflict-free.
    pub conflict_free: usize,
    /// Commuting and traced.
    pub commuting: usize,
}

impl Share {
    /// As a percentage.
    pub fn percent(&self) -> f64 {
        if self.commuting == 0 {
            0.0
        } else {
            100.0 * self.conflict_free as f64 / self.commuting as f64
        }
    }

    fn show(&self) -> String {
        format!(
            "{}/{} ({:.0}%)",
            self.conflict_free,
            self.commuting,
            self.percent()
        )
    }
}

/// Everything a run produced.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Report {
    /// `git rev-parse HEAD` of the working directory, if any.
    pub git_commit: Option<String>,
    /// Every selected case-form.
    pub cases: Vec<CaseResult>,
    /// Per-process form.
    pub per_process: Share,
    /// Shared form.
    pub shared: Share,
    /// Commuting cases that could not be traced (errors).
    pub failed: usize,
    /// Non-commuting cases (not counted).
    pub noncommuting: usize,
}

impl Report {
    /// Builds the shares from the cases.
    pub fn new(cases: Vec<CaseResult>) -> Report {
        let mut r = Report {
            git_commit: git_commit(),
            cases,
            per_process: Share::default(),
            shared: Share::default(),
            failed: 0,
            noncommuting: 0,
        };
        for c in r.cases.iter().filter(|c| !c.fixture) {
            if !c.commutes {
                r.noncommuting += 1;
                continue;
            }
            let Some(free) = c.conflict_free else {
                if c.error.is_some() {
                    r.failed += 1;
                }
                continue;
            };
            let s = if c.form == "shared" {
                &mut r.shared
            } else {
                &mut r.per_process
            };
            s.commuting += 1;
            s.conflict_free += usize::from(free);
        }
        r
    }

    /// The headline (printed last).
    pub fn headline(&self) -> String {
        format!(
            "conflict-free: per-process {} of commuting cases, shared {}; \
             {} non-commuting (not counted){}",
            self.per_process.show(),
            self.shared.show(),
            self.noncommuting,
            if self.failed > 0 {
                format!(", {} failed", self.failed)
            } else {
                String::new()
            }
        )
    }

    /// The Markdown report: headline, table, then the conflicting lines of each case.
    pub fn markdown(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(s, "# scalevfs commute: scalable commutativity check\n");
        if let Some(c) = &self.git_commit {
            let _ = writeln!(s, "Commit `{c}`.\n");
        }
        let _ = writeln!(s, "**{}**\n", self.headline());
        let _ = writeln!(
            s,
            "A case is two calls that commute (both orders give the same results and \
             state); it is conflict-free when no 64-byte line written by one call is read \
             or written by the other (stacks excluded), as traced by valgrind's lackey.\n"
        );
        let _ = writeln!(
            s,
            "| case | form | commutes | conflict-free | lines | top attribution (A × B) |"
        );
        let _ = writeln!(s, "|---|---|---|---|---:|---|");
        for c in &self.cases {
            let commutes = if c.commutes { "yes" } else { "no" };
            let free = match (c.conflict_free, &c.error) {
                (Some(true), _) => "yes".to_string(),
                (Some(false), _) => "**no**".to_string(),
                (None, Some(_)) => "error".to_string(),
                (None, None) => "—".to_string(),
            };
            let top = match (&c.top, &c.why_not, &c.error) {
                (Some(t), _, _) => t.clone(),
                (None, Some(w), _) => format!("_{w}_"),
                (None, None, Some(e)) => format!("_{e}_"),
                _ => String::new(),
            };
            let _ = writeln!(
                s,
                "| {} | {} | {commutes} | {free} | {} | {} |",
                c.name,
                c.form,
                c.conflicting_lines,
                top.replace('|', "\\|")
            );
        }
        let with: Vec<&CaseResult> = self.cases.iter().filter(|c| !c.lines.is_empty()).collect();
        if !with.is_empty() {
            let _ = writeln!(s, "\n## Conflicting lines\n");
            for c in with {
                let _ = writeln!(s, "### {}\n", c.id);
                for l in &c.lines {
                    let _ = writeln!(
                        s,
                        "* line {}{} (A {}, B {}):\n  * A: {}\n  * B: {}",
                        l.line,
                        l.object
                            .as_ref()
                            .map_or(String::new(), |o| format!(" in {o}")),
                        l.access[0],
                        l.access[1],
                        l.a_chain,
                        l.b_chain
                    );
                }
                let _ = writeln!(s);
            }
        }
        let _ = writeln!(s, "\n**{}**", self.headline());
        s
    }
}

fn git_commit() -> Option<String> {
    let out = std::process::Command::new("git")
        .args(["rev-parse", "--short", "HEAD"])
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}
