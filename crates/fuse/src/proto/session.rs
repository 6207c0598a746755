//! The connection: the mount (see [`super::mount`] for the two ways to get its `/dev/fuse`
//! descriptor), the INIT handshake, one [`Channel`] per worker (the mount's fd, or a clone
//! of it made with `FUSE_DEV_IOC_CLONE`, so that each worker has its own processing
//! queue in the kernel), reading requests into a worker's buffer, and writing replies
//! and notifications.
//!
//! A reply must be written to the channel that read its request (the kernel looks the
//! `unique` up in that device's processing queue), so a [`Replier`] carries its channel.
//! Notifications (unique 0) may go to any channel of the connection.

use std::io::{self, IoSlice};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::Child;
use std::sync::Arc;

use zerocopy::{FromBytes, IntoBytes};

use super::abi::{self, init, opcode};
use super::mount::{direct_mount, fusermount_mount, Mounter};
use super::op::{Cursor, DecodeError, Operation};
use super::uring;

/// `FUSE_DEV_IOC_CLONE`: `_IOR(229, 0, uint32_t)`.
const FUSE_DEV_IOC_CLONE: libc::c_ulong = 0x8004_e500;

/// Room for the largest request: a WRITE of `max_write` bytes plus its header and
/// argument (the kernel refuses a read buffer smaller than that, or than 8 KiB).
pub fn request_buffer_size(max_write: u32) -> usize {
    (max_write as usize + 4096).max(8192)
}

/// One `/dev/fuse` descriptor of the connection.
#[derive(Debug)]
pub struct Channel {
    fd: OwnedFd,
}

impl Channel {
    /// Reads one request into `buf`. `Ok(None)`: the connection ended (`ENODEV`).
    /// `ENOENT` (the request was interrupted before we read it) and `EINTR` are retried.
    pub fn read<'b>(&self, buf: &'b mut [u8]) -> io::Result<Option<&'b [u8]>> {
        loop {
            // SAFETY: `buf` is valid for writes of `buf.len()` bytes for the call.
            let n = unsafe { libc::read(self.fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
            if n >= 0 {
                return Ok(Some(&buf[..n as usize]));
            }
            let err = io::Error::last_os_error();
            match err.raw_os_error() {
                Some(libc::ENODEV) => return Ok(None),
                Some(libc::ENOENT | libc::EINTR | libc::EAGAIN) => continue,
                _ => return Err(err),
            }
        }
    }

    /// Writes one message (header and parts) with a single `writev`: the device takes
    /// a message only whole.
    pub fn send(&self, unique: u64, error: i32, parts: &[&[u8]]) -> io::Result<()> {
        let len =
            std::mem::size_of::<abi::OutHeader>() + parts.iter().map(|p| p.len()).sum::<usize>();
        let header = abi::OutHeader {
            len: u32::try_from(len).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?,
            error,
            unique,
        };
        // Every reply has at most three parts: no allocation on the reply path.
        const MAX_PARTS: usize = 4;
        if parts.len() >= MAX_PARTS {
            return Err(io::Error::from_raw_os_error(libc::EINVAL));
        }
        let mut iov = [IoSlice::new(&[]); MAX_PARTS];
        iov[0] = IoSlice::new(header.as_bytes());
        let mut n_iov = 1;
        for p in parts.iter().filter(|p| !p.is_empty()) {
            iov[n_iov] = IoSlice::new(p);
            n_iov += 1;
        }
        // SAFETY: `IoSlice` is ABI-compatible with `iovec`; the first `n_iov` entries
        // are set and every slice outlives the call.
        let n = unsafe {
            libc::writev(
                self.fd.as_raw_fd(),
                iov.as_ptr().cast(),
                n_iov as libc::c_int,
            )
        };
        if n < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(())
        }
    }

    /// A new descriptor on the same connection with its own processing queue
    /// (`FUSE_DEV_IOC_CLONE`).
    pub fn try_clone_queue(&self) -> io::Result<Channel> {
        let dev = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open("/dev/fuse")?;
        let mut session_fd: u32 = self.fd.as_raw_fd() as u32;
        // SAFETY: the ioctl reads one u32 (the fd to clone) from the valid pointer.
        let r = unsafe { libc::ioctl(dev.as_raw_fd(), FUSE_DEV_IOC_CLONE, &mut session_fd) };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Channel { fd: dev.into() })
    }
}

impl AsRawFd for Channel {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

/// Where a request came from, so where its reply goes.
#[derive(Clone, Copy)]
pub(crate) enum Origin<'a> {
    /// Read from this `/dev/fuse` descriptor: the reply is written to it.
    Dev(&'a Arc<Channel>),
    /// Taken from an io_uring entry: the reply is staged in the queue's slot and
    /// committed on the entry once the request is done ([`uring`](super::uring)).
    Ring(&'a uring::Slot),
}

/// A decoded request, borrowing the buffers it was read into and where it came from.
pub struct Request<'a> {
    /// The request's header.
    pub header: abi::InHeader,
    /// The opcode's first argument where it lies apart (io_uring); empty on `/dev/fuse`.
    op_in: &'a [u8],
    arg: &'a [u8],
    origin: Origin<'a>,
}

impl<'a> Request<'a> {
    /// The header and argument bytes of a message read from `chan`; `None` if it is
    /// shorter than a header or than the length it claims.
    pub fn parse(msg: &'a [u8], chan: &'a Arc<Channel>) -> Option<Request<'a>> {
        let mut c = Cursor::new(msg);
        let header: abi::InHeader = c.fetch().ok()?;
        let len = header.len as usize;
        if len < std::mem::size_of::<abi::InHeader>() || len > msg.len() {
            return None;
        }
        Some(Request {
            header,
            op_in: &[],
            arg: &msg[std::mem::size_of::<abi::InHeader>()..len],
            origin: Origin::Dev(chan),
        })
    }

    /// A request whose first argument `op_in` lies apart from the others, `arg`.
    pub(crate) fn from_parts(
        header: abi::InHeader,
        op_in: &'a [u8],
        arg: &'a [u8],
        origin: Origin<'a>,
    ) -> Request<'a> {
        Request {
            header,
            op_in,
            arg,
            origin,
        }
    }

    /// Decodes the request's arguments.
    pub fn operation(&self) -> Result<Operation<'a>, DecodeError> {
        Operation::decode_split(&self.header, self.op_in, self.arg)
    }

    /// The request id the reply must name.
    pub fn unique(&self) -> u64 {
        self.header.unique
    }
    /// The caller's user id (from the header).
    pub fn uid(&self) -> u32 {
        self.header.uid
    }
    /// The caller's group id (from the header).
    pub fn gid(&self) -> u32 {
        self.header.gid
    }
    /// The caller's thread id, in the server's pid namespace (from the header).
    pub fn pid(&self) -> u32 {
        self.header.pid
    }
    /// The node the request is about (from the header).
    pub fn nodeid(&self) -> u64 {
        self.header.nodeid
    }

    /// Whether the request came through io_uring (whose interrupts cannot be requeued:
    /// the kernel looks an interrupt's answer up on `/dev/fuse` only).
    pub fn from_ring(&self) -> bool {
        matches!(self.origin, Origin::Ring(_))
    }

    fn answer(&self, error: i32, parts: &[&[u8]]) -> io::Result<()> {
        match self.origin {
            Origin::Dev(chan) => chan.send(self.header.unique, error, parts),
            Origin::Ring(slot) => slot.stage(error, parts),
        }
    }

    /// Answers with the concatenation of `parts`.
    pub fn reply_parts(&self, parts: &[&[u8]]) -> io::Result<()> {
        self.answer(0, parts)
    }

    /// Answers with one struct (or `()`-like empty reply with `&[]`).
    pub fn reply<T: IntoBytes + zerocopy::Immutable + ?Sized>(&self, out: &T) -> io::Result<()> {
        self.reply_parts(&[out.as_bytes()])
    }

    /// Answers success with no payload.
    pub fn reply_empty(&self) -> io::Result<()> {
        self.reply_parts(&[])
    }

    /// Answers with an errno (positive, as in `libc::ENOENT`).
    pub fn reply_error(&self, errno: i32) -> io::Result<()> {
        self.answer(-errno, &[])
    }

    /// An owned handle that can answer this request later, from another thread. On
    /// io_uring the request's entry is then held until that answer.
    pub fn replier(&self) -> Replier {
        match self.origin {
            Origin::Dev(chan) => Replier {
                unique: self.header.unique,
                to: ReplyTo::Dev(chan.clone()),
            },
            Origin::Ring(slot) => uring::replier(slot),
        }
    }
}

/// Where a [`Replier`]'s answer goes.
enum ReplyTo {
    /// The `/dev/fuse` descriptor that read the request.
    Dev(Arc<Channel>),
    /// The io_uring entry the request came in on, through its queue's mailbox.
    Ring(uring::Deferred),
}

/// Answers one request from any thread, where the request came from.
pub struct Replier {
    unique: u64,
    to: ReplyTo,
}

impl Replier {
    pub(crate) fn ring(unique: u64, deferred: uring::Deferred) -> Replier {
        Replier {
            unique,
            to: ReplyTo::Ring(deferred),
        }
    }

    fn send(&self, error: i32) -> io::Result<()> {
        match &self.to {
            ReplyTo::Dev(chan) => chan.send(self.unique, error, &[]),
            ReplyTo::Ring(d) => d.send(self.unique, error),
        }
    }

    /// Answers success with no payload.
    pub fn reply_empty(&self) -> io::Result<()> {
        self.send(0)
    }

    /// Answers with an errno (positive, as in `libc::ENOENT`).
    pub fn reply_error(&self, errno: i32) -> io::Result<()> {
        self.send(-errno)
    }
}

/// Sends notifications (unique 0) on the connection.
#[derive(Clone, Debug)]
pub struct Notifier {
    chan: Arc<Channel>,
}

impl Notifier {
    /// `FUSE_NOTIFY_POLL`: the kernel polls the file registered with `kh` again.
    pub fn poll_wakeup(&self, kh: u64) -> io::Result<()> {
        let out = abi::NotifyPollWakeupOut { kh };
        self.chan.send(0, abi::NOTIFY_POLL, &[out.as_bytes()])
    }
}

/// How to mount and what to negotiate.
#[derive(Clone, Debug)]
pub struct MountConfig {
    /// Mount options (`default_permissions`, `fsname=...`, `subtype=...`), as
    /// `fusermount3 -o` takes them.
    pub options: Vec<String>,
    /// Keep `fusermount3` running so that it unmounts if we die (ignored by a direct
    /// mount, which has no such watchdog).
    pub auto_unmount: bool,
    /// The `init::*` flags we want; the kernel's offer is intersected with them.
    pub want: u64,
    /// The largest WRITE we accept, in bytes.
    pub max_write: u32,
}

/// What INIT settled.
#[derive(Clone, Copy, Debug)]
pub struct Negotiated {
    /// The protocol minor version in use (the lower of the two sides').
    pub minor: u32,
    /// The flags both sides have (`init::*`).
    pub flags: u64,
    /// What the kernel offered (to say why a feature is off).
    pub offered: u64,
    /// The largest WRITE we told the kernel to send, in bytes.
    pub max_write: u32,
}

/// A mounted connection: the first channel (the mount's own fd) and what INIT settled.
pub struct Session {
    chan: Arc<Channel>,
    negotiated: Negotiated,
    /// `fusermount3`, still running with `auto_unmount` (it unmounts when our end of
    /// the socket closes): reaped when the session drops.
    fusermount: Option<(Child, UnixStream)>,
}

impl Session {
    /// Mounts on `mountpoint` the way `mounter` says and answers INIT.
    pub fn mount(
        mounter: &Mounter,
        mountpoint: &Path,
        config: &MountConfig,
    ) -> io::Result<Session> {
        let (fd, child) = match mounter {
            Mounter::Fusermount(path) => fusermount_mount(path, mountpoint, config)?,
            Mounter::Direct => (direct_mount(mountpoint, config)?, None),
        };
        let chan = Arc::new(Channel { fd });
        let negotiated = handshake(&chan, config)?;
        Ok(Session {
            chan,
            negotiated,
            fusermount: child,
        })
    }

    /// The mount's own channel (the `/dev/fuse` fd the mount was made with).
    pub fn channel(&self) -> &Arc<Channel> {
        &self.chan
    }

    /// What INIT settled.
    pub fn negotiated(&self) -> Negotiated {
        self.negotiated
    }

    /// A handle that sends notifications on this connection.
    pub fn notifier(&self) -> Notifier {
        Notifier {
            chan: self.chan.clone(),
        }
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        if let Some((mut child, sock)) = self.fusermount.take() {
            drop(sock);
            let _ = child.wait();
        }
    }
}

/// Answers the kernel's INIT on `chan` (requests before it are answered `EIO`).
fn handshake(chan: &Channel, config: &MountConfig) -> io::Result<Negotiated> {
    let mut buf = vec![0u8; request_buffer_size(config.max_write)];
    for _ in 0..10 {
        let msg = chan
            .read(&mut buf)?
            .ok_or_else(|| io::Error::other("the connection ended before INIT"))?;
        let mut c = Cursor::new(msg);
        let header: abi::InHeader = c
            .fetch()
            .map_err(|_| io::Error::other("short request before INIT"))?;
        if header.opcode != opcode::INIT {
            chan.send(header.unique, -libc::EIO, &[])?;
            continue;
        }
        let init_in: abi::InitIn = decode_init_in(c.rest())?;
        if init_in.major > abi::KERNEL_VERSION {
            // The kernel sends INIT again with our major.
            let out = abi::InitOut {
                major: abi::KERNEL_VERSION,
                minor: abi::KERNEL_MINOR_VERSION,
                ..Default::default()
            };
            chan.send(header.unique, 0, &[out.as_bytes()])?;
            continue;
        }
        if init_in.major < abi::KERNEL_VERSION || init_in.minor < abi::MINIMUM_MINOR_VERSION {
            chan.send(header.unique, -libc::EPROTO, &[])?;
            return Err(io::Error::other(format!(
                "the kernel speaks FUSE {}.{}; we need 7.{} or later",
                init_in.major,
                init_in.minor,
                abi::MINIMUM_MINOR_VERSION
            )));
        }
        let (out, negotiated) = negotiate(&init_in, config);
        chan.send(header.unique, 0, &[out.as_bytes()])?;
        return Ok(negotiated);
    }
    Err(io::Error::other("no INIT from the kernel"))
}

/// A short `fuse_init_in` (older kernels send 16 bytes) reads as zero-extended.
fn decode_init_in(bytes: &[u8]) -> io::Result<abi::InitIn> {
    if bytes.len() < 16 {
        return Err(io::Error::other("short FUSE_INIT"));
    }
    let mut full = [0u8; std::mem::size_of::<abi::InitIn>()];
    let n = bytes.len().min(full.len());
    full[..n].copy_from_slice(&bytes[..n]);
    abi::InitIn::read_from_bytes(&full).map_err(|_| io::Error::other("bad FUSE_INIT"))
}

/// The INIT answer for the kernel's offer `init_in`.
pub(crate) fn negotiate(init_in: &abi::InitIn, config: &MountConfig) -> (abi::InitOut, Negotiated) {
    let mut offered = u64::from(init_in.flags);
    if offered & init::INIT_EXT != 0 {
        offered |= u64::from(init_in.flags2) << 32;
    }
    let flags = offered & (config.want | init::INIT_EXT | init::BIG_WRITES | init::MAX_PAGES);
    let page = 4096u32;
    let out = abi::InitOut {
        major: abi::KERNEL_VERSION,
        minor: init_in.minor.min(abi::KERNEL_MINOR_VERSION),
        max_readahead: init_in.max_readahead,
        flags: flags as u32,
        flags2: (flags >> 32) as u32,
        max_write: config.max_write,
        time_gran: 1,
        max_pages: config.max_write.div_ceil(page).min(u32::from(u16::MAX)) as u16,
        ..Default::default()
    };
    let negotiated = Negotiated {
        minor: out.minor,
        flags,
        offered,
        max_write: config.max_write,
    };
    (out, negotiated)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::FromRawFd;

    fn pipe() -> (OwnedFd, OwnedFd) {
        let mut fds = [0; 2];
        // SAFETY: `fds` has room for the two descriptors.
        assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
        // SAFETY: both descriptors were just made for us and are owned by nobody else.
        unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) }
    }

    #[test]
    fn a_reply_is_one_message_with_its_header() {
        let (r, w) = pipe();
        let chan = Channel { fd: w };
        chan.send(7, -libc::ENOENT, &[b"ab", b"", b"cde"]).unwrap();
        let mut buf = [0u8; 64];
        // SAFETY: reads into a live buffer of its length.
        let n = unsafe { libc::read(r.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
        assert_eq!(n, 21);
        let h = abi::OutHeader::read_from_prefix(&buf).unwrap().0;
        assert_eq!((h.len, h.error, h.unique), (21, -libc::ENOENT, 7));
        assert_eq!(&buf[16..21], b"abcde");
        let too_many = chan.send(1, 0, &[b"a", b"b", b"c", b"d"]).unwrap_err();
        assert_eq!(too_many.raw_os_error(), Some(libc::EINVAL));
    }

    #[test]
    fn a_message_shorter_than_its_header_or_its_length_is_refused() {
        let (_r, w) = pipe();
        let chan = Arc::new(Channel { fd: w });
        let mut h = abi::InHeader {
            len: 45,
            opcode: opcode::LOOKUP,
            unique: 3,
            nodeid: 1,
            ..Default::default()
        };
        let mut msg = h.as_bytes().to_vec();
        msg.extend_from_slice(b"name\0");
        let req = Request::parse(&msg, &chan).unwrap();
        assert_eq!((req.unique(), req.nodeid()), (3, 1));
        assert!(matches!(
            req.operation(),
            Ok(Operation::Lookup { name: b"name" })
        ));
        assert!(
            Request::parse(&msg[..44], &chan).is_none(),
            "shorter than its len"
        );
        assert!(
            Request::parse(&msg[..30], &chan).is_none(),
            "shorter than a header"
        );
        h.len = 12;
        let mut msg = h.as_bytes().to_vec();
        msg.extend_from_slice(b"name\0");
        assert!(
            Request::parse(&msg, &chan).is_none(),
            "a len below the header's size"
        );
    }

    #[test]
    fn init_takes_what_both_sides_have() {
        let config = MountConfig {
            options: Vec::new(),
            auto_unmount: false,
            want: init::POSIX_LOCKS | init::DO_READDIRPLUS | init::HANDLE_KILLPRIV_V2,
            max_write: 128 * 1024,
        };
        let kernel = abi::InitIn {
            major: 7,
            minor: 50,
            max_readahead: 4096,
            flags: (init::POSIX_LOCKS | init::HANDLE_KILLPRIV_V2 | init::INIT_EXT | init::MAX_PAGES)
                as u32,
            flags2: 1, // bit 32: nothing we want
            ..Default::default()
        };
        let (out, n) = negotiate(&kernel, &config);
        assert_eq!(
            out.minor,
            abi::KERNEL_MINOR_VERSION,
            "ours when the kernel's is newer"
        );
        assert_eq!(
            n.flags,
            init::POSIX_LOCKS | init::HANDLE_KILLPRIV_V2 | init::INIT_EXT | init::MAX_PAGES
        );
        assert_eq!(n.offered & (1 << 32), 1 << 32, "flags2 read with INIT_EXT");
        assert_eq!(
            (out.flags2, out.max_pages, out.max_write),
            (0, 32, 128 * 1024)
        );
        let old = abi::InitIn {
            minor: 31,
            flags: init::POSIX_LOCKS as u32,
            flags2: 1,
            ..kernel
        };
        let (out, n) = negotiate(&old, &config);
        assert_eq!(out.minor, 31);
        assert_eq!(n.offered, init::POSIX_LOCKS, "no flags2 without INIT_EXT");
    }
}
