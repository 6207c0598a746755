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

/// The list. Empty: no deliberate differences are known yet.
pub const KNOWN_DIFFERENCES: &[KnownDifference] = &[];

/// The reason a case may differ, if it is listed.
pub fn known_difference(case: &str) -> Option<&'static str> {
    KNOWN_DIFFERENCES
        .iter()
        .find(|k| k.case == case)
        .map(|k| k.reason)
}
