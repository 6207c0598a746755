//! Typed flags and enums for the arguments the raw calls take as integers: open flags,
//! modes, `AT_*`, `RENAME_*`, `RESOLVE_*`, xattr and epoll flags, lock kinds, file types.
//! Each flag has Linux's value, so [`bits`](OFlags::bits) is what the raw call takes.
//!
//! The casts between `libc`'s integer types live here, once, so that callers need none.

use bitflags::bitflags;

bitflags! {
    /// `open(2)` flags other than the access mode (which [`OpenOptions`](super::OpenOptions)
    /// sets from `read`/`write`).
    #[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
    pub struct OFlags: i32 {
        const WRONLY = libc::O_WRONLY;
        const RDWR = libc::O_RDWR;
        const CREAT = libc::O_CREAT;
        const EXCL = libc::O_EXCL;
        const NOCTTY = libc::O_NOCTTY;
        const TRUNC = libc::O_TRUNC;
        const APPEND = libc::O_APPEND;
        const NONBLOCK = libc::O_NONBLOCK;
        const DSYNC = libc::O_DSYNC;
        const SYNC = libc::O_SYNC;
        const ASYNC = libc::O_ASYNC;
        const DIRECT = libc::O_DIRECT;
        const LARGEFILE = libc::O_LARGEFILE;
        const DIRECTORY = libc::O_DIRECTORY;
        const NOFOLLOW = libc::O_NOFOLLOW;
        const NOATIME = libc::O_NOATIME;
        const CLOEXEC = libc::O_CLOEXEC;
        const PATH = libc::O_PATH;
        /// `O_TMPFILE` (includes `O_DIRECTORY`'s bit, as in Linux).
        const TMPFILE = libc::O_TMPFILE;
    }
}

bitflags! {
    /// A file mode's permission and set-id bits (`07777`).
    #[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
    pub struct Mode: u32 {
        const SUID = libc::S_ISUID;
        const SGID = libc::S_ISGID;
        const SVTX = libc::S_ISVTX;
        const RUSR = libc::S_IRUSR;
        const WUSR = libc::S_IWUSR;
        const XUSR = libc::S_IXUSR;
        const RGRP = libc::S_IRGRP;
        const WGRP = libc::S_IWGRP;
        const XGRP = libc::S_IXGRP;
        const ROTH = libc::S_IROTH;
        const WOTH = libc::S_IWOTH;
        const XOTH = libc::S_IXOTH;
        const RWXU = libc::S_IRWXU;
        const RWXG = libc::S_IRWXG;
        const RWXO = libc::S_IRWXO;
    }
}

impl Mode {
    /// The mode `0oNNNN`; bits outside `07777` are dropped.
    pub const fn octal(bits: u32) -> Mode {
        Mode::from_bits_truncate(bits)
    }
}

bitflags! {
    /// `AT_*` flags of the `*at` calls.
    #[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
    pub struct AtFlags: i32 {
        const SYMLINK_NOFOLLOW = libc::AT_SYMLINK_NOFOLLOW;
        const REMOVEDIR = libc::AT_REMOVEDIR;
        const SYMLINK_FOLLOW = libc::AT_SYMLINK_FOLLOW;
        const NO_AUTOMOUNT = libc::AT_NO_AUTOMOUNT;
        const EMPTY_PATH = libc::AT_EMPTY_PATH;
        /// `faccessat`: check with the effective ids (the same bit as `AT_REMOVEDIR`).
        const EACCESS = libc::AT_EACCESS;
    }
}

bitflags! {
    /// `renameat2(2)` flags.
    #[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
    pub struct RenameFlags: u32 {
        const NOREPLACE = libc::RENAME_NOREPLACE;
        const EXCHANGE = libc::RENAME_EXCHANGE;
        const WHITEOUT = libc::RENAME_WHITEOUT;
    }
}

bitflags! {
    /// `openat2(2)`'s `RESOLVE_*` flags.
    #[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
    pub struct ResolveFlags: u64 {
        const NO_XDEV = libc::RESOLVE_NO_XDEV;
        const NO_MAGICLINKS = libc::RESOLVE_NO_MAGICLINKS;
        const NO_SYMLINKS = libc::RESOLVE_NO_SYMLINKS;
        /// Fail (`EXDEV`) where the walk would leave the starting directory.
        const BENEATH = libc::RESOLVE_BENEATH;
        /// Treat the starting directory as the root: `..` and absolute paths stop there.
        const IN_ROOT = libc::RESOLVE_IN_ROOT;
        const CACHED = libc::RESOLVE_CACHED;
    }
}

bitflags! {
    /// `setxattr(2)` flags.
    #[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
    pub struct XattrFlags: i32 {
        /// Fail (`EEXIST`) if the attribute exists.
        const CREATE = libc::XATTR_CREATE;
        /// Fail (`ENODATA`) unless the attribute exists.
        const REPLACE = libc::XATTR_REPLACE;
    }
}

bitflags! {
    /// `epoll` event bits (`EPOLLIN`, ...) and input flags (`EPOLLET`, ...).
    #[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
    pub struct EpollFlags: u32 {
        const IN = libc::EPOLLIN as u32;
        const PRI = libc::EPOLLPRI as u32;
        const OUT = libc::EPOLLOUT as u32;
        const ERR = libc::EPOLLERR as u32;
        const HUP = libc::EPOLLHUP as u32;
        const RDNORM = libc::EPOLLRDNORM as u32;
        const RDBAND = libc::EPOLLRDBAND as u32;
        const WRNORM = libc::EPOLLWRNORM as u32;
        const WRBAND = libc::EPOLLWRBAND as u32;
        const RDHUP = libc::EPOLLRDHUP as u32;
        const EXCLUSIVE = libc::EPOLLEXCLUSIVE as u32;
        const WAKEUP = libc::EPOLLWAKEUP as u32;
        const ONESHOT = libc::EPOLLONESHOT as u32;
        const ET = libc::EPOLLET as u32;
    }
}

/// A record lock's kind (`l_type` of `struct flock`).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum LockKind {
    /// `F_RDLCK`: shared.
    Read,
    /// `F_WRLCK`: exclusive.
    Write,
    /// `F_UNLCK`: release.
    Unlock,
}

impl LockKind {
    /// The `l_type` value.
    pub fn raw(self) -> i16 {
        (match self {
            LockKind::Read => libc::F_RDLCK,
            LockKind::Write => libc::F_WRLCK,
            LockKind::Unlock => libc::F_UNLCK,
        }) as i16
    }
    /// The kind an `l_type` value names (`None` for anything else).
    pub fn from_raw(l_type: i16) -> Option<LockKind> {
        match i32::from(l_type) {
            libc::F_RDLCK => Some(LockKind::Read),
            libc::F_WRLCK => Some(LockKind::Write),
            libc::F_UNLCK => Some(LockKind::Unlock),
            _ => None,
        }
    }
}

/// A `flock(2)` operation.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum FlockOp {
    /// `LOCK_SH`.
    Shared,
    /// `LOCK_EX`.
    Exclusive,
    /// `LOCK_UN`.
    Unlock,
}

impl FlockOp {
    /// The `operation` argument, with `LOCK_NB` when `wait` is false.
    pub fn raw(self, wait: bool) -> i32 {
        let op = match self {
            FlockOp::Shared => libc::LOCK_SH,
            FlockOp::Exclusive => libc::LOCK_EX,
            FlockOp::Unlock => libc::LOCK_UN,
        };
        if wait {
            op
        } else {
            op | libc::LOCK_NB
        }
    }
}

/// What kind of file an inode is (`S_IFMT` of a mode, `d_type` of an entry).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum FileType {
    Regular,
    Directory,
    Symlink,
    Fifo,
    Socket,
    CharDevice,
    BlockDevice,
    /// `d_type` `DT_UNKNOWN`, or a mode with no known type bits.
    Unknown,
}

impl FileType {
    /// The type in a mode's `S_IFMT` bits.
    pub fn from_mode(mode: u32) -> FileType {
        match mode & libc::S_IFMT {
            libc::S_IFREG => FileType::Regular,
            libc::S_IFDIR => FileType::Directory,
            libc::S_IFLNK => FileType::Symlink,
            libc::S_IFIFO => FileType::Fifo,
            libc::S_IFSOCK => FileType::Socket,
            libc::S_IFCHR => FileType::CharDevice,
            libc::S_IFBLK => FileType::BlockDevice,
            _ => FileType::Unknown,
        }
    }
    /// The type a `getdents64` `d_type` names.
    pub fn from_dirent(d_type: u8) -> FileType {
        match d_type {
            libc::DT_REG => FileType::Regular,
            libc::DT_DIR => FileType::Directory,
            libc::DT_LNK => FileType::Symlink,
            libc::DT_FIFO => FileType::Fifo,
            libc::DT_SOCK => FileType::Socket,
            libc::DT_CHR => FileType::CharDevice,
            libc::DT_BLK => FileType::BlockDevice,
            _ => FileType::Unknown,
        }
    }
    pub fn is_dir(self) -> bool {
        self == FileType::Directory
    }
    pub fn is_file(self) -> bool {
        self == FileType::Regular
    }
    pub fn is_symlink(self) -> bool {
        self == FileType::Symlink
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lock_kinds_round_trip_and_reject_other_values() {
        for k in [LockKind::Read, LockKind::Write, LockKind::Unlock] {
            assert_eq!(LockKind::from_raw(k.raw()), Some(k));
        }
        assert_eq!(LockKind::from_raw(77), None);
        assert_eq!(FlockOp::Exclusive.raw(false), libc::LOCK_EX | libc::LOCK_NB);
        assert_eq!(FlockOp::Shared.raw(true), libc::LOCK_SH);
    }

    #[test]
    fn file_types_from_modes_and_dirents_agree() {
        let pairs = [
            (libc::S_IFREG, libc::DT_REG),
            (libc::S_IFDIR, libc::DT_DIR),
            (libc::S_IFLNK, libc::DT_LNK),
            (libc::S_IFIFO, libc::DT_FIFO),
            (libc::S_IFSOCK, libc::DT_SOCK),
            (libc::S_IFCHR, libc::DT_CHR),
            (libc::S_IFBLK, libc::DT_BLK),
        ];
        for (mode, dt) in pairs {
            let t = FileType::from_mode(mode | 0o644);
            assert_ne!(t, FileType::Unknown);
            assert_eq!(t, FileType::from_dirent(dt));
        }
        assert_eq!(FileType::from_mode(0o644), FileType::Unknown);
        assert_eq!(FileType::from_dirent(libc::DT_UNKNOWN), FileType::Unknown);
    }

    #[test]
    fn octal_modes_keep_only_permission_and_set_id_bits() {
        assert_eq!(
            Mode::octal(0o644),
            Mode::RUSR | Mode::WUSR | Mode::RGRP | Mode::ROTH
        );
        assert_eq!(Mode::octal(libc::S_IFREG | 0o4755).bits(), 0o4755);
    }
}
