//! The kernel's FUSE ABI (`include/uapi/linux/fuse.h`, protocol 7.45 as in Linux 6.18):
//! the structs we decode and encode, as `#[repr(C)]` types without padding so that
//! `zerocopy` reads them from request bytes (by copy: no alignment needed) and writes
//! them as reply bytes. Only what this server speaks is here.

use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

/// The protocol major version we implement.
pub const KERNEL_VERSION: u32 = 7;
/// The protocol minor version we offer (the kernel's own minor wins if it is lower).
pub const KERNEL_MINOR_VERSION: u32 = 45;
/// The oldest minor we accept: 7.31 is what the previous server (polyfuse) spoke.
pub const MINIMUM_MINOR_VERSION: u32 = 31;

/// Opcodes (`enum fuse_opcode`).
pub mod opcode;
/// The io_uring transport's ABI (`FUSE_OVER_IO_URING`).
pub mod uring;

/// `fuse_notify_code`: the `error` field of a notification (unique 0).
pub const NOTIFY_POLL: i32 = 1;

/// INIT flags (`init_in.flags | init_in.flags2 << 32`, the same in `init_out`).
pub mod init {
    /// `FUSE_ASYNC_READ`.
    pub const ASYNC_READ: u64 = 1 << 0;
    /// `FUSE_POSIX_LOCKS`.
    pub const POSIX_LOCKS: u64 = 1 << 1;
    /// `FUSE_ATOMIC_O_TRUNC`.
    pub const ATOMIC_O_TRUNC: u64 = 1 << 3;
    /// `FUSE_BIG_WRITES`.
    pub const BIG_WRITES: u64 = 1 << 5;
    /// `FUSE_FLOCK_LOCKS`.
    pub const FLOCK_LOCKS: u64 = 1 << 10;
    /// `FUSE_AUTO_INVAL_DATA`.
    pub const AUTO_INVAL_DATA: u64 = 1 << 12;
    /// `FUSE_ASYNC_DIO`.
    pub const ASYNC_DIO: u64 = 1 << 15;
    /// `FUSE_DO_READDIRPLUS`.
    pub const DO_READDIRPLUS: u64 = 1 << 13;
    /// `FUSE_READDIRPLUS_AUTO`.
    pub const READDIRPLUS_AUTO: u64 = 1 << 14;
    /// `FUSE_PARALLEL_DIROPS`.
    pub const PARALLEL_DIROPS: u64 = 1 << 18;
    /// `FUSE_MAX_PAGES`.
    pub const MAX_PAGES: u64 = 1 << 22;
    /// `FUSE_NO_OPEN_SUPPORT`.
    pub const NO_OPEN_SUPPORT: u64 = 1 << 17;
    /// `FUSE_NO_OPENDIR_SUPPORT`.
    pub const NO_OPENDIR_SUPPORT: u64 = 1 << 24;
    /// `FUSE_HANDLE_KILLPRIV_V2`.
    pub const HANDLE_KILLPRIV_V2: u64 = 1 << 28;
    /// `FUSE_INIT_EXT`.
    pub const INIT_EXT: u64 = 1 << 30;
    /// `FUSE_OVER_IO_URING` (in `flags2`): requests may be served through io_uring
    /// ([`super::uring`]); offered only while the module's `enable_uring` is on.
    pub const OVER_IO_URING: u64 = 1 << 41;
}

/// `fuse_attr` validity bits of SETATTR (`FATTR_*`).
pub mod fattr {
    /// `FATTR_MODE`.
    pub const MODE: u32 = 1 << 0;
    /// `FATTR_UID`.
    pub const UID: u32 = 1 << 1;
    /// `FATTR_GID`.
    pub const GID: u32 = 1 << 2;
    /// `FATTR_SIZE`.
    pub const SIZE: u32 = 1 << 3;
    /// `FATTR_ATIME`.
    pub const ATIME: u32 = 1 << 4;
    /// `FATTR_MTIME`.
    pub const MTIME: u32 = 1 << 5;
    /// `FATTR_FH`.
    pub const FH: u32 = 1 << 6;
    /// `FATTR_ATIME_NOW`.
    pub const ATIME_NOW: u32 = 1 << 7;
    /// `FATTR_MTIME_NOW`.
    pub const MTIME_NOW: u32 = 1 << 8;
    /// `FATTR_KILL_SUIDGID`.
    pub const KILL_SUIDGID: u32 = 1 << 11;
}

/// `fuse_open_out.open_flags`: bypass the page cache for this open file.
pub const FOPEN_DIRECT_IO: u32 = 1 << 0;
/// `fuse_open_out.open_flags`: keep the file's cached pages on this open.
pub const FOPEN_KEEP_CACHE: u32 = 1 << 1;
/// `fuse_open_in.open_flags` / `fuse_create_in.open_flags` (HANDLE_KILLPRIV_V2).
pub const FUSE_OPEN_KILL_SUIDGID: u32 = 1 << 0;
/// `fuse_write_in.write_flags` (HANDLE_KILLPRIV_V2).
pub const FUSE_WRITE_KILL_SUIDGID: u32 = 1 << 2;
/// `fuse_lk_in.lk_flags`: a `flock(2)` request, not a POSIX lock.
pub const FUSE_LK_FLOCK: u32 = 1 << 0;
/// `fuse_poll_in.flags`: the kernel wants a `FUSE_NOTIFY_POLL` for `kh`.
pub const FUSE_POLL_SCHEDULE_NOTIFY: u32 = 1 << 0;
/// `fuse_ioctl_in.flags`: an unrestricted ioctl (the server names the iovecs).
pub const FUSE_IOCTL_UNRESTRICTED: u32 = 1 << 1;
/// `fuse_ioctl_in.flags`: the caller is a 32-bit process (compat ioctl).
pub const FUSE_IOCTL_32BIT: u32 = 1 << 3;

/// The kernel's `struct fuse_in_header`.
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
#[repr(C)]
pub struct InHeader {
    /// Length in bytes.
    pub len: u32,
    /// The request opcode ([`opcode`]).
    pub opcode: u32,
    /// The request id the reply names (0: a notification).
    pub unique: u64,
    /// The node id (here the inode number).
    pub nodeid: u64,
    /// The user id.
    pub uid: u32,
    /// The group id.
    pub gid: u32,
    /// The process id.
    pub pid: u32,
    /// Length of the request extensions, in units of 8 bytes.
    pub total_extlen: u16,
    /// Padding (zero).
    pub padding: u16,
}

/// The kernel's `struct fuse_out_header`.
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
#[repr(C)]
pub struct OutHeader {
    /// Length in bytes.
    pub len: u32,
    /// A negated errno (0: success), or a notification code when `unique` is 0.
    pub error: i32,
    /// The request id the reply names (0: a notification).
    pub unique: u64,
}

/// The kernel's `struct fuse_attr`.
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
#[repr(C)]
pub struct Attr {
    /// The inode number.
    pub ino: u64,
    /// The file size in bytes.
    pub size: u64,
    /// Allocated 512-byte blocks.
    pub blocks: u64,
    /// Access time, seconds.
    pub atime: u64,
    /// Modification time, seconds.
    pub mtime: u64,
    /// Status change time, seconds.
    pub ctime: u64,
    /// Access time, nanoseconds.
    pub atimensec: u32,
    /// Modification time, nanoseconds.
    pub mtimensec: u32,
    /// Status change time, nanoseconds.
    pub ctimensec: u32,
    /// The file mode (type and permission bits).
    pub mode: u32,
    /// The number of links.
    pub nlink: u32,
    /// The user id.
    pub uid: u32,
    /// The group id.
    pub gid: u32,
    /// The device number of a device node.
    pub rdev: u32,
    /// The preferred I/O block size.
    pub blksize: u32,
    /// `FUSE_ATTR_*` flags.
    pub flags: u32,
}

/// The kernel's `struct fuse_entry_out`.
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
#[repr(C)]
pub struct EntryOut {
    /// The node id (here the inode number).
    pub nodeid: u64,
    /// The inode generation (node id plus generation is unique for the filesystem's lifetime).
    pub generation: u64,
    /// How long the kernel may cache the name, seconds.
    pub entry_valid: u64,
    /// How long the kernel may cache the attributes, seconds.
    pub attr_valid: u64,
    /// How long the kernel may cache the name, nanoseconds.
    pub entry_valid_nsec: u32,
    /// How long the kernel may cache the attributes, nanoseconds.
    pub attr_valid_nsec: u32,
    /// The attributes.
    pub attr: Attr,
}

/// The kernel's `struct fuse_attr_out`.
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
#[repr(C)]
pub struct AttrOut {
    /// How long the kernel may cache the attributes, seconds.
    pub attr_valid: u64,
    /// How long the kernel may cache the attributes, nanoseconds.
    pub attr_valid_nsec: u32,
    /// Padding (zero).
    pub dummy: u32,
    /// The attributes.
    pub attr: Attr,
}

/// The kernel's `struct fuse_init_in`.
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
#[repr(C)]
pub struct InitIn {
    /// The protocol major version.
    pub major: u32,
    /// The protocol minor version.
    pub minor: u32,
    /// The largest readahead, in bytes.
    pub max_readahead: u32,
    /// `fuse_init_in.flags`.
    pub flags: u32,
    /// The upper 32 bits of the INIT flags.
    pub flags2: u32,
    /// Unused (zero).
    pub unused: [u32; 11],
}

/// The kernel's `struct fuse_init_out`.
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
#[repr(C)]
pub struct InitOut {
    /// The protocol major version.
    pub major: u32,
    /// The protocol minor version.
    pub minor: u32,
    /// The largest readahead, in bytes.
    pub max_readahead: u32,
    /// `fuse_init_out.flags`.
    pub flags: u32,
    /// The most background requests.
    pub max_background: u16,
    /// Background requests at which the kernel counts the filesystem congested.
    pub congestion_threshold: u16,
    /// The largest WRITE, in bytes.
    pub max_write: u32,
    /// Timestamp granularity, in nanoseconds.
    pub time_gran: u32,
    /// The most pages in one request.
    pub max_pages: u16,
    /// DAX mapping alignment (log2).
    pub map_alignment: u16,
    /// The upper 32 bits of the INIT flags.
    pub flags2: u32,
    /// The most stacked filesystems below (passthrough).
    pub max_stack_depth: u32,
    /// Request timeout, in seconds (0: none).
    pub request_timeout: u16,
    /// Unused (zero).
    pub unused: [u16; 11],
}

/// The kernel's `struct fuse_forget_in`.
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
#[repr(C)]
pub struct ForgetIn {
    /// How many lookups the kernel forgets.
    pub nlookup: u64,
}

/// The kernel's `struct fuse_batch_forget_in`.
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
#[repr(C)]
pub struct BatchForgetIn {
    /// How many entries follow.
    pub count: u32,
    /// Padding (zero).
    pub dummy: u32,
}

/// The kernel's `struct fuse_forget_one`.
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
#[repr(C)]
pub struct ForgetOne {
    /// The node id (here the inode number).
    pub nodeid: u64,
    /// How many lookups the kernel forgets.
    pub nlookup: u64,
}

/// The kernel's `struct fuse_getattr_in`.
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
#[repr(C)]
pub struct GetattrIn {
    /// `FUSE_GETATTR_*` flags.
    pub getattr_flags: u32,
    /// Padding (zero).
    pub dummy: u32,
    /// The file handle OPEN, OPENDIR or CREATE returned.
    pub fh: u64,
}

/// The kernel's `struct fuse_setattr_in`.
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
#[repr(C)]
pub struct SetattrIn {
    /// Which fields are set (`FATTR_*` bits).
    pub valid: u32,
    /// Padding (zero).
    pub padding: u32,
    /// The file handle OPEN, OPENDIR or CREATE returned.
    pub fh: u64,
    /// A size in bytes.
    pub size: u64,
    /// The lock owner (an opaque id of the kernel's `fl_owner_t`).
    pub lock_owner: u64,
    /// Access time, seconds.
    pub atime: u64,
    /// Modification time, seconds.
    pub mtime: u64,
    /// Status change time, seconds.
    pub ctime: u64,
    /// Access time, nanoseconds.
    pub atimensec: u32,
    /// Modification time, nanoseconds.
    pub mtimensec: u32,
    /// Status change time, nanoseconds.
    pub ctimensec: u32,
    /// The file mode (type and permission bits).
    pub mode: u32,
    /// Unused (zero).
    pub unused4: u32,
    /// The user id.
    pub uid: u32,
    /// The group id.
    pub gid: u32,
    /// Unused (zero).
    pub unused5: u32,
}

/// The kernel's `struct fuse_mknod_in`.
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
#[repr(C)]
pub struct MknodIn {
    /// The file mode (type and permission bits).
    pub mode: u32,
    /// The device number of a device node.
    pub rdev: u32,
    /// The caller's umask.
    pub umask: u32,
    /// Padding (zero).
    pub padding: u32,
}

/// The kernel's `struct fuse_mkdir_in`.
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
#[repr(C)]
pub struct MkdirIn {
    /// The file mode (type and permission bits).
    pub mode: u32,
    /// The caller's umask.
    pub umask: u32,
}

/// The kernel's `struct fuse_rename_in`.
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
#[repr(C)]
pub struct RenameIn {
    /// The node id of the target directory.
    pub newdir: u64,
}

/// The kernel's `struct fuse_rename2_in`.
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
#[repr(C)]
pub struct Rename2In {
    /// The node id of the target directory.
    pub newdir: u64,
    /// `fuse_rename2_in.flags`.
    pub flags: u32,
    /// Padding (zero).
    pub padding: u32,
}

/// The kernel's `struct fuse_link_in`.
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
#[repr(C)]
pub struct LinkIn {
    /// The node id of the existing inode.
    pub oldnodeid: u64,
}

/// The kernel's `struct fuse_open_in`.
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
#[repr(C)]
pub struct OpenIn {
    /// `fuse_open_in.flags`.
    pub flags: u32,
    /// `FOPEN_*` / `FUSE_OPEN_*` flags.
    pub open_flags: u32,
}

/// The kernel's `struct fuse_create_in`.
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
#[repr(C)]
pub struct CreateIn {
    /// `fuse_create_in.flags`.
    pub flags: u32,
    /// The file mode (type and permission bits).
    pub mode: u32,
    /// The caller's umask.
    pub umask: u32,
    /// `FOPEN_*` / `FUSE_OPEN_*` flags.
    pub open_flags: u32,
}

/// The kernel's `struct fuse_open_out`.
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
#[repr(C)]
pub struct OpenOut {
    /// The file handle OPEN, OPENDIR or CREATE returned.
    pub fh: u64,
    /// `FOPEN_*` / `FUSE_OPEN_*` flags.
    pub open_flags: u32,
    /// The passthrough backing file id (0: none).
    pub backing_id: i32,
}

/// The kernel's `struct fuse_release_in`.
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
#[repr(C)]
pub struct ReleaseIn {
    /// The file handle OPEN, OPENDIR or CREATE returned.
    pub fh: u64,
    /// `fuse_release_in.flags`.
    pub flags: u32,
    /// `FUSE_RELEASE_*` flags.
    pub release_flags: u32,
    /// The lock owner (an opaque id of the kernel's `fl_owner_t`).
    pub lock_owner: u64,
}

/// The kernel's `struct fuse_flush_in`.
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
#[repr(C)]
pub struct FlushIn {
    /// The file handle OPEN, OPENDIR or CREATE returned.
    pub fh: u64,
    /// Unused (zero).
    pub unused: u32,
    /// Padding (zero).
    pub padding: u32,
    /// The lock owner (an opaque id of the kernel's `fl_owner_t`).
    pub lock_owner: u64,
}

/// READ, READDIR and READDIRPLUS.
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
#[repr(C)]
pub struct ReadIn {
    /// The file handle OPEN, OPENDIR or CREATE returned.
    pub fh: u64,
    /// A file offset in bytes.
    pub offset: u64,
    /// A size in bytes.
    pub size: u32,
    /// `FUSE_READ_*` flags.
    pub read_flags: u32,
    /// The lock owner (an opaque id of the kernel's `fl_owner_t`).
    pub lock_owner: u64,
    /// `fuse_read_in.flags`.
    pub flags: u32,
    /// Padding (zero).
    pub padding: u32,
}

/// The kernel's `struct fuse_write_in`.
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
#[repr(C)]
pub struct WriteIn {
    /// The file handle OPEN, OPENDIR or CREATE returned.
    pub fh: u64,
    /// A file offset in bytes.
    pub offset: u64,
    /// A size in bytes.
    pub size: u32,
    /// `FUSE_WRITE_*` flags.
    pub write_flags: u32,
    /// The lock owner (an opaque id of the kernel's `fl_owner_t`).
    pub lock_owner: u64,
    /// `fuse_write_in.flags`.
    pub flags: u32,
    /// Padding (zero).
    pub padding: u32,
}

/// The kernel's `struct fuse_write_out`.
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
#[repr(C)]
pub struct WriteOut {
    /// A size in bytes.
    pub size: u32,
    /// Padding (zero).
    pub padding: u32,
}

/// The kernel's `struct fuse_kstatfs`.
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
#[repr(C)]
pub struct Kstatfs {
    /// Total blocks.
    pub blocks: u64,
    /// Free blocks.
    pub bfree: u64,
    /// Free blocks available to unprivileged users.
    pub bavail: u64,
    /// Total inodes.
    pub files: u64,
    /// Free inodes.
    pub ffree: u64,
    /// Block size.
    pub bsize: u32,
    /// The longest file name.
    pub namelen: u32,
    /// Fragment size.
    pub frsize: u32,
    /// Padding (zero).
    pub padding: u32,
    /// Unused (zero).
    pub spare: [u32; 6],
}

/// The kernel's `struct fuse_fsync_in`.
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
#[repr(C)]
pub struct FsyncIn {
    /// The file handle OPEN, OPENDIR or CREATE returned.
    pub fh: u64,
    /// `FUSE_FSYNC_*` flags (bit 0: data only).
    pub fsync_flags: u32,
    /// Padding (zero).
    pub padding: u32,
}

/// The SETXATTR argument without `FUSE_SETXATTR_EXT` (which we do not negotiate).
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
#[repr(C)]
pub struct SetxattrIn {
    /// A size in bytes.
    pub size: u32,
    /// `fuse_setxattr_in.flags`.
    pub flags: u32,
}

/// The kernel's `struct fuse_getxattr_in`.
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
#[repr(C)]
pub struct GetxattrIn {
    /// A size in bytes.
    pub size: u32,
    /// Padding (zero).
    pub padding: u32,
}

/// The kernel's `struct fuse_getxattr_out`.
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
#[repr(C)]
pub struct GetxattrOut {
    /// A size in bytes.
    pub size: u32,
    /// Padding (zero).
    pub padding: u32,
}

/// The kernel's `struct fuse_file_lock`.
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
#[repr(C)]
pub struct FileLock {
    /// The first byte of the range.
    pub start: u64,
    /// The last byte of the range (inclusive).
    pub end: u64,
    /// The file type (`DT_*`).
    pub typ: u32,
    /// The process id.
    pub pid: u32,
}

/// The kernel's `struct fuse_lk_in`.
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
#[repr(C)]
pub struct LkIn {
    /// The file handle OPEN, OPENDIR or CREATE returned.
    pub fh: u64,
    /// The lock owner (an opaque id of the kernel's `fl_owner_t`).
    pub owner: u64,
    /// The lock.
    pub lk: FileLock,
    /// `FUSE_LK_*` flags.
    pub lk_flags: u32,
    /// Padding (zero).
    pub padding: u32,
}

/// The kernel's `struct fuse_lk_out`.
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
#[repr(C)]
pub struct LkOut {
    /// The lock.
    pub lk: FileLock,
}

/// The kernel's `struct fuse_access_in`.
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
#[repr(C)]
pub struct AccessIn {
    /// The access mask (`R_OK`, `W_OK`, `X_OK`).
    pub mask: u32,
    /// Padding (zero).
    pub padding: u32,
}

/// The kernel's `struct fuse_interrupt_in`.
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
#[repr(C)]
pub struct InterruptIn {
    /// The request id the reply names (0: a notification).
    pub unique: u64,
}

/// The kernel's `struct fuse_ioctl_in`.
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
#[repr(C)]
pub struct IoctlIn {
    /// The file handle OPEN, OPENDIR or CREATE returned.
    pub fh: u64,
    /// `fuse_ioctl_in.flags`.
    pub flags: u32,
    /// The ioctl command number.
    pub cmd: u32,
    /// The ioctl argument (a user address or a value).
    pub arg: u64,
    /// Bytes of input data that follow.
    pub in_size: u32,
    /// Bytes of output data the caller accepts.
    pub out_size: u32,
}

/// The kernel's `struct fuse_ioctl_out`.
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
#[repr(C)]
pub struct IoctlOut {
    /// The ioctl's return value.
    pub result: i32,
    /// `fuse_ioctl_out.flags`.
    pub flags: u32,
    /// Input iovecs (unrestricted ioctls only).
    pub in_iovs: u32,
    /// Output iovecs (unrestricted ioctls only).
    pub out_iovs: u32,
}

/// The kernel's `struct fuse_poll_in`.
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
#[repr(C)]
pub struct PollIn {
    /// The file handle OPEN, OPENDIR or CREATE returned.
    pub fh: u64,
    /// The kernel's poll handle, named again in its wakeup notification.
    pub kh: u64,
    /// `fuse_poll_in.flags`.
    pub flags: u32,
    /// The requested events (`POLL*` bits).
    pub events: u32,
}

/// The kernel's `struct fuse_poll_out`.
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
#[repr(C)]
pub struct PollOut {
    /// The ready events (`POLL*` bits).
    pub revents: u32,
    /// Padding (zero).
    pub padding: u32,
}

/// The kernel's `struct fuse_notify_poll_wakeup_out`.
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
#[repr(C)]
pub struct NotifyPollWakeupOut {
    /// The kernel's poll handle, named again in its wakeup notification.
    pub kh: u64,
}

/// The kernel's `struct fuse_fallocate_in`.
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
#[repr(C)]
pub struct FallocateIn {
    /// The file handle OPEN, OPENDIR or CREATE returned.
    pub fh: u64,
    /// A file offset in bytes.
    pub offset: u64,
    /// The length of the range in bytes.
    pub length: u64,
    /// The file mode (type and permission bits).
    pub mode: u32,
    /// Padding (zero).
    pub padding: u32,
}

/// The kernel's `struct fuse_copy_file_range_in`.
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
#[repr(C)]
pub struct CopyFileRangeIn {
    /// The source file handle.
    pub fh_in: u64,
    /// The source offset.
    pub off_in: u64,
    /// The target node id.
    pub nodeid_out: u64,
    /// The target file handle.
    pub fh_out: u64,
    /// The target offset.
    pub off_out: u64,
    /// How many bytes to copy.
    pub len: u64,
    /// `fuse_copy_file_range_in.flags`.
    pub flags: u64,
}

/// The kernel's `struct fuse_lseek_in`.
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
#[repr(C)]
pub struct LseekIn {
    /// The file handle OPEN, OPENDIR or CREATE returned.
    pub fh: u64,
    /// A file offset in bytes.
    pub offset: u64,
    /// `SEEK_SET`, `SEEK_CUR`, `SEEK_END`, `SEEK_DATA` or `SEEK_HOLE`.
    pub whence: u32,
    /// Padding (zero).
    pub padding: u32,
}

/// The kernel's `struct fuse_lseek_out`.
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
#[repr(C)]
pub struct LseekOut {
    /// A file offset in bytes.
    pub offset: u64,
}

/// The fixed part of a READDIR entry; the name follows, padded to 8 bytes.
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
#[repr(C)]
pub struct Dirent {
    /// The inode number.
    pub ino: u64,
    /// The offset of the next entry (the cookie to resume from).
    pub off: u64,
    /// The length of the name that follows.
    pub namelen: u32,
    /// The file type (`DT_*`).
    pub typ: u32,
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::size_of;

    /// The sizes `fuse.h` gives these structs (its `FUSE_COMPAT_*` sizes and the
    /// kernel's `BUILD_BUG_ON`s).
    #[test]
    fn struct_sizes_match_the_kernel_abi() {
        assert_eq!(size_of::<InHeader>(), 40);
        assert_eq!(size_of::<OutHeader>(), 16);
        assert_eq!(size_of::<Attr>(), 88);
        assert_eq!(size_of::<EntryOut>(), 128);
        assert_eq!(size_of::<AttrOut>(), 104);
        assert_eq!(size_of::<InitIn>(), 64);
        assert_eq!(size_of::<InitOut>(), 64);
        assert_eq!(size_of::<SetattrIn>(), 88);
        assert_eq!(size_of::<ReadIn>(), 40);
        assert_eq!(size_of::<WriteIn>(), 40);
        assert_eq!(size_of::<Kstatfs>(), 80);
        assert_eq!(size_of::<LkIn>(), 48);
        assert_eq!(size_of::<IoctlIn>(), 32);
        assert_eq!(size_of::<CopyFileRangeIn>(), 56);
        assert_eq!(size_of::<Dirent>(), 24);
    }
}
