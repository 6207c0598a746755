//! The FUSE protocol, owned: the kernel's ABI structs ([`abi`]), request decoding into
//! typed operations ([`op`]), the mount ([`mount`]: through `fusermount3`, or `mount(2)`
//! directly), and the connection ([`session`]: the INIT handshake, per-worker channels,
//! replies and notifications).
//! `docs/fuse.md` section 1 says why we speak the protocol ourselves instead of through
//! a crate.

pub mod abi;
pub mod dirents;
pub mod mount;
pub mod op;
pub mod session;
pub mod spin;
pub mod uring;

pub use mount::Mounter;
pub use op::{Forgets, Operation};
pub use session::{Channel, MountConfig, Negotiated, Notifier, Replier, Request, Session};
