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
        /// `O_WRONLY`: open for writing only (an access mode).
        const WRONLY = libc::O_WRONLY;
        /// `O_RDWR`: open for reading and writing (an access mode).
        const RDWR = libc::O_RDWR;
        /// `O_CREAT`: create the file if it does not exist.
        const CREAT = libc::O_CREAT;
        /// `O_EXCL`: with `O_CREAT`, fail (`EEXIST`) if the name exists.
        const EXCL = libc::O_EXCL;
        /// `O_NOCTTY`: do not make a terminal the controlling terminal.
        const NOCTTY = libc::O_NOCTTY;
        /// `O_TRUNC`: truncate a regular file opened for writing to length 0.
        const TRUNC = libc::O_TRUNC;
        /// `O_APPEND`: every write goes to the end of the file.
        const APPEND = libc::O_APPEND;
        /// `O_NONBLOCK`: non-blocking I/O (`EAGAIN` instead of waiting).
        const NONBLOCK = libc::O_NONBLOCK;
        /// `O_DSYNC`: writes complete as with `fdatasync`.
        const DSYNC = libc::O_DSYNC;
        /// `O_SYNC`: writes complete as with `fsync`.
        const SYNC = libc::O_SYNC;
        /// `O_ASYNC`: signal-driven I/O (`SIGIO` when I/O is possible).
        const ASYNC = libc::O_ASYNC;
        /// `O_DIRECT`: bypass the page cache.
        const DIRECT = libc::O_DIRECT;
        /// `O_LARGEFILE`: allow offsets beyond 2 GiB (implied on 64-bit).
        const LARGEFILE = libc::O_LARGEFILE;
        /// `O_DIRECTORY`: fail (`ENOTDIR`) unless the path names a directory.
        const DIRECTORY = libc::O_DIRECTORY;
        /// `O_NOFOLLOW`: fail (`ELOOP`) if the last component is a symlink.
        const NOFOLLOW = libc::O_NOFOLLOW;
        /// `O_NOATIME`: do not update the access time on reads.
        const NOATIME = libc::O_NOATIME;
        /// `O_CLOEXEC`: close the descriptor on `execve`.
        const CLOEXEC = libc::O_CLOEXEC;
        /// `O_PATH`: a descriptor that only locates the file (no read or write).
        const PATH = libc::O_PATH;
        /// `O_TMPFILE` (includes `O_DIRECTORY`'s bit, as in Linux).
        const TMPFILE = libc::O_TMPFILE;
    }
}

bitflags! {
    /// A file mode's permission and set-id bits (`07777`).
    #[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
    pub struct Mode: u32 {
        /// `S_ISUID` (`04000`): set-user-id on execution.
        const SUID = libc::S_ISUID;
        /// `S_ISGID` (`02000`): set-group-id on execution (a directory: new entries get its group).
        const SGID = libc::S_ISGID;
        /// `S_ISVTX` (`01000`): sticky; in a directory, only owners may remove or rename entries.
        const SVTX = libc::S_ISVTX;
        /// `S_IRUSR` (`0400`): the owner may read.
        const RUSR = libc::S_IRUSR;
        /// `S_IWUSR` (`0200`): the owner may write.
        const WUSR = libc::S_IWUSR;
        /// `S_IXUSR` (`0100`): the owner may execute (or search a directory).
        const XUSR = libc::S_IXUSR;
        /// `S_IRGRP` (`0040`): the group may read.
        const RGRP = libc::S_IRGRP;
        /// `S_IWGRP` (`0020`): the group may write.
        const WGRP = libc::S_IWGRP;
        /// `S_IXGRP` (`0010`): the group may execute (or search a directory).
        const XGRP = libc::S_IXGRP;
        /// `S_IROTH` (`0004`): others may read.
        const ROTH = libc::S_IROTH;
        /// `S_IWOTH` (`0002`): others may write.
        const WOTH = libc::S_IWOTH;
        /// `S_IXOTH` (`0001`): others may execute (or search a directory).
        const XOTH = libc::S_IXOTH;
        /// `S_IRWXU` (`0700`): the owner's read, write and execute bits.
        const RWXU = libc::S_IRWXU;
        /// `S_IRWXG` (`0070`): the group's read, write and execute bits.
        const RWXG = libc::S_IRWXG;
        /// `S_IRWXO` (`0007`): others' read, write and execute bits.
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
        /// `AT_SYMLINK_NOFOLLOW`: do not follow a symlink in the last component.
        const SYMLINK_NOFOLLOW = libc::AT_SYMLINK_NOFOLLOW;
        /// `AT_REMOVEDIR`: `unlinkat` removes a directory (as `rmdir`).
        const REMOVEDIR = libc::AT_REMOVEDIR;
        /// `AT_SYMLINK_FOLLOW`: `linkat` follows a symlink in the last component.
        const SYMLINK_FOLLOW = libc::AT_SYMLINK_FOLLOW;
        /// `AT_NO_AUTOMOUNT`: do not trigger an automount at the last component.
        const NO_AUTOMOUNT = libc::AT_NO_AUTOMOUNT;
        /// `AT_EMPTY_PATH`: an empty path means the descriptor itself.
        const EMPTY_PATH = libc::AT_EMPTY_PATH;
        /// `faccessat`: check with the effective ids (the same bit as `AT_REMOVEDIR`).
        const EACCESS = libc::AT_EACCESS;
    }
}

bitflags! {
    /// `renameat2(2)` flags.
    #[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
    pub struct RenameFlags: u32 {
        /// `RENAME_NOREPLACE`: fail (`EEXIST`) if the new name exists.
        const NOREPLACE = libc::RENAME_NOREPLACE;
        /// `RENAME_EXCHANGE`: atomically swap the two names (both must exist).
        const EXCHANGE = libc::RENAME_EXCHANGE;
        /// `RENAME_WHITEOUT`: leave a whiteout (overlayfs) at the old name.
        const WHITEOUT = libc::RENAME_WHITEOUT;
    }
}

bitflags! {
    /// `openat2(2)`'s `RESOLVE_*` flags.
    #[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
    pub struct ResolveFlags: u64 {
        /// `RESOLVE_NO_XDEV`: fail (`EXDEV`) where the walk would cross a mount point.
        const NO_XDEV = libc::RESOLVE_NO_XDEV;
        /// `RESOLVE_NO_MAGICLINKS`: fail (`ELOOP`) at a magic link (`/proc/[pid]/fd/*`, ...).
        const NO_MAGICLINKS = libc::RESOLVE_NO_MAGICLINKS;
        /// `RESOLVE_NO_SYMLINKS`: fail (`ELOOP`) at any symlink, magic links included.
        const NO_SYMLINKS = libc::RESOLVE_NO_SYMLINKS;
        /// Fail (`EXDEV`) where the walk would leave the starting directory.
        const BENEATH = libc::RESOLVE_BENEATH;
        /// Treat the starting directory as the root: `..` and absolute paths stop there.
        const IN_ROOT = libc::RESOLVE_IN_ROOT;
        /// `RESOLVE_CACHED`: fail (`EAGAIN`) unless the walk can be done from the caches alone.
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
        /// `EPOLLIN`: readable.
        const IN = libc::EPOLLIN as u32;
        /// `EPOLLPRI`: an exceptional condition (urgent or priority data).
        const PRI = libc::EPOLLPRI as u32;
        /// `EPOLLOUT`: writable.
        const OUT = libc::EPOLLOUT as u32;
        /// `EPOLLERR`: an error condition (always reported).
        const ERR = libc::EPOLLERR as u32;
        /// `EPOLLHUP`: hang-up (always reported).
        const HUP = libc::EPOLLHUP as u32;
        /// `EPOLLRDNORM`: normal data readable.
        const RDNORM = libc::EPOLLRDNORM as u32;
        /// `EPOLLRDBAND`: priority-band data readable.
        const RDBAND = libc::EPOLLRDBAND as u32;
        /// `EPOLLWRNORM`: normal data writable.
        const WRNORM = libc::EPOLLWRNORM as u32;
        /// `EPOLLWRBAND`: priority-band data writable.
        const WRBAND = libc::EPOLLWRBAND as u32;
        /// `EPOLLRDHUP`: the peer closed its end, or shut down writing.
        const RDHUP = libc::EPOLLRDHUP as u32;
        /// `EPOLLEXCLUSIVE` (input): wake one of the epoll instances waiting on the target.
        const EXCLUSIVE = libc::EPOLLEXCLUSIVE as u32;
        /// `EPOLLWAKEUP` (input): hold a wakeup source while the event is pending.
        const WAKEUP = libc::EPOLLWAKEUP as u32;
        /// `EPOLLONESHOT` (input): disarm after one event, until re-armed with `modify`.
        const ONESHOT = libc::EPOLLONESHOT as u32;
        /// `EPOLLET` (input): edge-triggered rather than level-triggered.
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
    /// A regular file (`S_IFREG`, `DT_REG`).
    Regular,
    /// A directory (`S_IFDIR`, `DT_DIR`).
    Directory,
    /// A symbolic link (`S_IFLNK`, `DT_LNK`).
    Symlink,
    /// A named pipe (`S_IFIFO`, `DT_FIFO`).
    Fifo,
    /// A Unix-domain socket (`S_IFSOCK`, `DT_SOCK`).
    Socket,
    /// A character device (`S_IFCHR`, `DT_CHR`).
    CharDevice,
    /// A block device (`S_IFBLK`, `DT_BLK`).
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
    /// Whether this is [`Directory`](FileType::Directory).
    pub fn is_dir(self) -> bool {
        self == FileType::Directory
    }
    /// Whether this is [`Regular`](FileType::Regular).
    pub fn is_file(self) -> bool {
        self == FileType::Regular
    }
    /// Whether this is [`Symlink`](FileType::Symlink).
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
