//! Linux ABI types shared by the system-call API, the file systems and the front ends.
//!
//! Flag and mode constants are Linux's own values, so callers use `libc::O_CREAT`,
//! `libc::AT_FDCWD`, `libc::S_IFREG` and so on directly; this module only adds the structs.

/// `struct timespec`.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timespec {
    /// Seconds since the epoch.
    pub sec: i64,
    /// Nanoseconds (0 to 999,999,999).
    pub nsec: i64,
}

/// The fields of Linux's `struct stat` (as `newfstatat` fills it).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct Stat {
    /// The device of the file system (`st_dev`).
    pub dev: u64,
    /// The inode number.
    pub ino: u64,
    /// File type and permission bits (`S_IFMT | 07777`).
    pub mode: u32,
    /// The number of hard links.
    pub nlink: u64,
    /// Owner.
    pub uid: u32,
    /// Group.
    pub gid: u32,
    /// The device a device node stands for.
    pub rdev: u64,
    /// Size in bytes (a symlink: its target's length).
    pub size: i64,
    /// Preferred I/O size.
    pub blksize: i64,
    /// 512-byte blocks allocated.
    pub blocks: i64,
    /// Last access.
    pub atime: Timespec,
    /// Last modification of the data.
    pub mtime: Timespec,
    /// Last status change.
    pub ctime: Timespec,
}

/// The fields of Linux's `struct statx` that a file system fills (`statx(2)`): `mask`
/// says which of the optional ones are valid.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct Statx {
    /// `STATX_*` bits of the fields filled in.
    pub mask: u32,
    /// Preferred I/O size.
    pub blksize: u32,
    /// `STATX_ATTR_*` bits set for the file.
    pub attributes: u64,
    /// The number of hard links.
    pub nlink: u32,
    /// Owner.
    pub uid: u32,
    /// Group.
    pub gid: u32,
    /// File type and permission bits.
    pub mode: u32,
    /// The inode number.
    pub ino: u64,
    /// Size in bytes.
    pub size: u64,
    /// 512-byte blocks allocated.
    pub blocks: u64,
    /// `STATX_ATTR_*` bits the file system knows about.
    pub attributes_mask: u64,
    /// Last access.
    pub atime: Timespec,
    /// Creation time.
    pub btime: Timespec,
    /// Last status change.
    pub ctime: Timespec,
    /// Last modification of the data.
    pub mtime: Timespec,
    /// Major number of the device a device node stands for.
    pub rdev_major: u32,
    /// Minor number of the device a device node stands for.
    pub rdev_minor: u32,
    /// Major number of the file system's device.
    pub dev_major: u32,
    /// Minor number of the file system's device.
    pub dev_minor: u32,
    /// The mount's id (`STATX_MNT_ID`).
    pub mnt_id: u64,
}

/// `struct statfs` (`statfs(2)`, `fstatfs(2)`), less `f_fsid` and `f_spare`.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct Statfs {
    /// The file system's magic number (`TMPFS_MAGIC`, `SYSFS_MAGIC`).
    pub f_type: i64,
    /// Block size for the counts below.
    pub bsize: i64,
    /// Total blocks.
    pub blocks: u64,
    /// Free blocks.
    pub bfree: u64,
    /// Free blocks for unprivileged users.
    pub bavail: u64,
    /// Total inodes.
    pub files: u64,
    /// Free inodes.
    pub ffree: u64,
    /// Longest file name.
    pub namelen: i64,
    /// Fragment size.
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
    /// `O_*` open flags.
    pub flags: u64,
    /// Permission bits for a created file (0 unless `O_CREAT`/`O_TMPFILE`).
    pub mode: u64,
    /// `RESOLVE_*` bits.
    pub resolve: u64,
}

/// `struct flock` for `fcntl` record locks (`F_GETLK`, `F_SETLK`, `F_OFD_SETLK`, ...).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct Flock {
    /// `F_RDLCK`, `F_WRLCK` or `F_UNLCK`.
    pub l_type: i16,
    /// `SEEK_SET`, `SEEK_CUR` or `SEEK_END`.
    pub l_whence: i16,
    /// Start of the range, relative to `l_whence`.
    pub l_start: i64,
    /// 0 means "to end of file and beyond"; negative lengths lock before `l_start`.
    pub l_len: i64,
    /// `F_GETLK`: the holder's pid (-1 for an OFD lock); must be 0 for `F_OFD_*`.
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
    /// The inode number.
    pub ino: u64,
    /// The `d_off` cookie: seeking the directory to it continues after this entry.
    pub off: i64,
    /// `DT_REG`, `DT_DIR`, `DT_LNK`, ...
    pub d_type: u8,
    /// The entry's name (no NUL).
    pub name: Vec<u8>,
}
