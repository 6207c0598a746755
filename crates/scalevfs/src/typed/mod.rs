//! The typed layer over the system calls of [`Process`](crate::Process): bit-flag types in
//! place of `libc` integers, [`std::path::Path`] (or byte strings) as paths, a
//! capability-style [`Dir`]/[`File`] pair and an [`OpenOptions`] builder, directory and
//! extended-attribute listings as iterators, and [`Stat`](crate::Stat) accessors.
//!
//! Everything here is made of the raw calls (`openat2`, `read`, `fcntl`, ...): it has
//! their semantics and errno values.

mod dir;
mod events;
mod file;
mod flags;
mod open_options;
mod path_arg;
mod stat;

pub use dir::{Dir, Entry, ReadDir};
pub use events::{Epoll, Event};
pub use file::{Descriptor, File, LockHolder, LockOwner, RecordLock, XattrNames};
pub use flags::{
    AtFlags, EpollFlags, FileType, FlockOp, LockKind, Mode, OFlags, RenameFlags, ResolveFlags,
    XattrFlags,
};
pub use open_options::OpenOptions;
pub use path_arg::PathArg;
pub use stat::Metadata;
