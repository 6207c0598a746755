//! Deliberate differences from the host kernel.
//!
//! A case listed here may differ without failing the differential tests; the report still
//! shows it, and notes when a listed case starts agreeing (so the list only shrinks). Every
//! entry must also appear, with its reason, in the crate README.

/// A case (by script name) that is allowed to differ, and why.
#[derive(Clone, Copy, Debug)]
pub struct KnownDifference {
    pub case: &'static str,
    pub reason: &'static str,
}

/// The list.
pub const KNOWN_DIFFERENCES: &[KnownDifference] = &[KnownDifference {
    case: "getdents/seek-to-positions",
    reason: "scalable design only: a hashed tmpfs directory's positions are (bucket, \
             per-bucket sequence), stable across creates and unlinks but not Linux's \
             per-directory counter, so a seek to a number the directory never returned \
             resumes elsewhere than on Linux (Linux's numbering needs one counter that \
             every create in the directory writes); the legacy design agrees",
}];

/// The reason a case may differ, if it is listed.
pub fn known_difference(case: &str) -> Option<&'static str> {
    KNOWN_DIFFERENCES
        .iter()
        .find(|k| k.case == case)
        .map(|k| k.reason)
}
