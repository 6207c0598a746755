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
    reason: "scalable design only: a hashed tmpfs directory lists its entries in hash \
             order, numbered by (bucket, slot), where Linux lists them newest first, \
             numbered from one per-directory counter that every create writes. Positions \
             0 (.), 1 (..), 2 (the first entry), the end, and every position the \
             directory returned (d_off, telldir) resume as on Linux; a seek to a number \
             it never returned (3 and 4 here) resumes elsewhere. The legacy design \
             agrees",
}];

/// The reason a case may differ, if it is listed.
pub fn known_difference(case: &str) -> Option<&'static str> {
    KNOWN_DIFFERENCES
        .iter()
        .find(|k| k.case == case)
        .map(|k| k.reason)
}
