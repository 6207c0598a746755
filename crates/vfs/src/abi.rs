//! Linux ABI types shared by the system-call API, the file systems and the front ends.
//!
//! Flag and mode constants are Linux's own values, so callers use `libc::O_CREAT`,
//! `libc::AT_FDCWD`, `libc::S_IFREG` and so on directly; this module only adds the structs.

/// `struct timespec`.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timespec {
    pub sec: i64,
    pub nsec: i64,
}

/// The fields of Linux's `struct stat` (as `newfstatat` fills it).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct Stat {
    pub dev: u64,
    pub ino: u64,
    /// File type and permission bits (`S_IFMT | 07777`).
    pub mode: u32,
    pub nlink: u64,
    pub uid: u32,
    pub gid: u32,
    pub rdev: u64,
    pub size: i64,
    pub blksize: i64,
    /// 512-byte blocks allocated.
    pub blocks: i64,
    pub atime: Timespec,
    pub mtime: Timespec,
    pub ctime: Timespec,
}

/// The fields of Linux's `struct statx` that a file system fills (`statx(2)`): `mask`
/// says which of the optional ones are valid.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct Statx {
    /// `STATX_*` bits of the fields filled in.
    pub mask: u32,
    pub blksize: u32,
    /// `STATX_ATTR_*` bits set for the file.
    pub attributes: u64,
    pub nlink: u32,
    pub uid: u32,
    pub gid: u32,
    /// File type and permission bits.
    pub mode: u32,
    pub ino: u64,
    pub size: u64,
    /// 512-byte blocks allocated.
    pub blocks: u64,
    /// `STATX_ATTR_*` bits the file system knows about.
    pub attributes_mask: u64,
    pub atime: Timespec,
    /// Creation time.
    pub btime: Timespec,
    pub ctime: Timespec,
    pub mtime: Timespec,
    pub rdev_major: u32,
    pub rdev_minor: u32,
    pub dev_major: u32,
    pub dev_minor: u32,
    pub mnt_id: u64,
}

/// `struct statfs` (`statfs(2)`, `fstatfs(2)`), less `f_fsid` and `f_spare`.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct Statfs {
    /// The file system's magic number (`TMPFS_MAGIC`, `SYSFS_MAGIC`).
    pub f_type: i64,
    pub bsize: i64,
    pub blocks: u64,
    pub bfree: u64,
    pub bavail: u64,
    pub files: u64,
    pub ffree: u64,
    pub namelen: i64,
    pub frsize: i64,
    /// `ST_*` mount flags, with `ST_VALID`.
    pub flags: i64,
}

impl Statfs {
    /// What a file system with no numbers of its own reports: 4 KiB blocks, 255-byte
    /// names, `ST_VALID | ST_RELATIME` (atime follows the relatime rules everywhere).
    pub fn empty(f_type: i64) -> Statfs {
        Statfs {
            f_type,
            bsize: 4096,
            namelen: 255,
            frsize: 4096,
            flags: ST_VALID | libc::ST_RELATIME as i64,
            ..Statfs::default()
        }
    }
}

/// `ST_VALID`: `f_flags` is filled in (Linux's internal flag, not in libc).
pub const ST_VALID: i64 = 0x20;

/// `struct open_how` (`openat2(2)`): open flags, creation mode, `RESOLVE_*` bits.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct OpenHow {
    pub flags: u64,
    pub mode: u64,
    pub resolve: u64,
}

/// `struct flock` for `fcntl` record locks (`F_GETLK`, `F_SETLK`, `F_OFD_SETLK`, ...).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct Flock {
    /// `F_RDLCK`, `F_WRLCK` or `F_UNLCK`.
    pub l_type: i16,
    /// `SEEK_SET`, `SEEK_CUR` or `SEEK_END`.
    pub l_whence: i16,
    pub l_start: i64,
    /// 0 means "to end of file and beyond"; negative lengths lock before `l_start`.
    pub l_len: i64,
    pub l_pid: i32,
}

/// The third argument of `fcntl`, which Linux interprets according to the command.
#[derive(Debug)]
pub enum FcntlArg<'a> {
    /// Commands without an argument (`F_GETFD`, `F_GETFL`, ...).
    None,
    /// Integer argument (`F_DUPFD`, `F_SETFD`, `F_SETFL`, `F_SETPIPE_SZ`, ...).
    Int(i64),
    /// Pointer to a `struct flock` (`F_GETLK`, `F_SETLK`, `F_SETLKW`, `F_OFD_*`).
    Flock(&'a mut Flock),
}

/// One directory entry as `getdents64` reports it, decoded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DirEntry {
    pub ino: u64,
    /// The `d_off` cookie: seeking the directory to it continues after this entry.
    pub off: i64,
    /// `DT_REG`, `DT_DIR`, `DT_LNK`, ...
    pub d_type: u8,
    pub name: Vec<u8>,
}
