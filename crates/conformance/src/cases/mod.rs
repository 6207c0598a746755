//! The scripted suite.

use crate::script::Script;

/// Every scripted case, in a stable order.
pub fn all() -> Vec<Script> {
    let v = Vec::new();
    v
}
