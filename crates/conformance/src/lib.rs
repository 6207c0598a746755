//! # scalevfs-conformance: the differential conformance harness
//!
//! The same operation scripts run against the host kernel and against scalevfs, and the
//! results are compared step by step: return values, errno values, and the `stat` fields
//! that must match (file type, permission bits, size, link count, owner; not inode numbers
//! or times, whose changes are compared relatively).
//!
//! - [`Script`] is a named list of [`Op`]s written with a builder DSL; fds are symbolic
//!   [`Slot`]s. [`cases::all`] is the suite (families generated programmatically where a
//!   matrix is clearer), [`random`] generates random sequences for proptest.
//! - [`Target`] is one method per system call of the `scalevfs::Process` contract, with two
//!   implementations: [`HostTarget`] (raw Linux system calls) and [`ScalevfsTarget`].
//! - [`Backend`] runs a whole script from a clean start: [`HostBackend`] forks a child that
//!   chroots into a fresh case directory (tmpfs at `/dev/shm` by default, or any directory
//!   such as a FUSE mount) and drops privileges for permission cases; [`ScalevfsBackend`]
//!   builds a fresh `Vfs`.
//! - [`Report`] compares two backends over a suite; [`known`] lists deliberate differences.

pub mod cases;
pub mod host;
pub mod known;
pub mod op;
pub mod random;
pub mod runner;
pub mod scalevfs_target;
pub mod script;
pub mod target;

pub use host::{HostBackend, HostTarget};
pub use op::{CompareOptions, Fd, Op, Outcome, Slot, StatView, XattrOn};
pub use runner::{run_case, run_script, Backend, CaseResult, Report};
pub use scalevfs_target::{ScalevfsBackend, ScalevfsTarget};
pub use script::Script;
pub use target::{Executor, Target};
