//! Random operation sequences.
