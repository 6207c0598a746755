//! Differential conformance harness (issue 3): owned by the conformance work.
