//! Opcodes (`enum fuse_opcode` in `include/uapi/linux/fuse.h`).

/// `FUSE_LOOKUP`.
pub const LOOKUP: u32 = 1;
/// `FUSE_FORGET`.
pub const FORGET: u32 = 2;
/// `FUSE_GETATTR`.
pub const GETATTR: u32 = 3;
/// `FUSE_SETATTR`.
pub const SETATTR: u32 = 4;
/// `FUSE_READLINK`.
pub const READLINK: u32 = 5;
/// `FUSE_SYMLINK`.
pub const SYMLINK: u32 = 6;
/// `FUSE_MKNOD`.
pub const MKNOD: u32 = 8;
/// `FUSE_MKDIR`.
pub const MKDIR: u32 = 9;
/// `FUSE_UNLINK`.
pub const UNLINK: u32 = 10;
/// `FUSE_RMDIR`.
pub const RMDIR: u32 = 11;
/// `FUSE_RENAME`.
pub const RENAME: u32 = 12;
/// `FUSE_LINK`.
pub const LINK: u32 = 13;
/// `FUSE_OPEN`.
pub const OPEN: u32 = 14;
/// `FUSE_READ`.
pub const READ: u32 = 15;
/// `FUSE_WRITE`.
pub const WRITE: u32 = 16;
/// `FUSE_STATFS`.
pub const STATFS: u32 = 17;
/// `FUSE_RELEASE`.
pub const RELEASE: u32 = 18;
/// `FUSE_FSYNC`.
pub const FSYNC: u32 = 20;
/// `FUSE_SETXATTR`.
pub const SETXATTR: u32 = 21;
/// `FUSE_GETXATTR`.
pub const GETXATTR: u32 = 22;
/// `FUSE_LISTXATTR`.
pub const LISTXATTR: u32 = 23;
/// `FUSE_REMOVEXATTR`.
pub const REMOVEXATTR: u32 = 24;
/// `FUSE_FLUSH`.
pub const FLUSH: u32 = 25;
/// `FUSE_INIT`.
pub const INIT: u32 = 26;
/// `FUSE_OPENDIR`.
pub const OPENDIR: u32 = 27;
/// `FUSE_READDIR`.
pub const READDIR: u32 = 28;
/// `FUSE_RELEASEDIR`.
pub const RELEASEDIR: u32 = 29;
/// `FUSE_FSYNCDIR`.
pub const FSYNCDIR: u32 = 30;
/// `FUSE_GETLK`.
pub const GETLK: u32 = 31;
/// `FUSE_SETLK`.
pub const SETLK: u32 = 32;
/// `FUSE_SETLKW`.
pub const SETLKW: u32 = 33;
/// `FUSE_ACCESS`.
pub const ACCESS: u32 = 34;
/// `FUSE_CREATE`.
pub const CREATE: u32 = 35;
/// `FUSE_INTERRUPT`.
pub const INTERRUPT: u32 = 36;
/// `FUSE_BMAP`.
pub const BMAP: u32 = 37;
/// `FUSE_DESTROY`.
pub const DESTROY: u32 = 38;
/// `FUSE_IOCTL`.
pub const IOCTL: u32 = 39;
/// `FUSE_POLL`.
pub const POLL: u32 = 40;
/// `FUSE_NOTIFY_REPLY`.
pub const NOTIFY_REPLY: u32 = 41;
/// `FUSE_BATCH_FORGET`.
pub const BATCH_FORGET: u32 = 42;
/// `FUSE_FALLOCATE`.
pub const FALLOCATE: u32 = 43;
/// `FUSE_READDIRPLUS`.
pub const READDIRPLUS: u32 = 44;
/// `FUSE_RENAME2`.
pub const RENAME2: u32 = 45;
/// `FUSE_LSEEK`.
pub const LSEEK: u32 = 46;
/// `FUSE_COPY_FILE_RANGE`.
pub const COPY_FILE_RANGE: u32 = 47;
/// `FUSE_SETUPMAPPING`.
pub const SETUPMAPPING: u32 = 48;
/// `FUSE_REMOVEMAPPING`.
pub const REMOVEMAPPING: u32 = 49;
/// `FUSE_SYNCFS`.
pub const SYNCFS: u32 = 50;
/// `FUSE_TMPFILE`.
pub const TMPFILE: u32 = 51;
/// `FUSE_STATX`.
pub const STATX: u32 = 52;
/// `FUSE_COPY_FILE_RANGE_64`.
pub const COPY_FILE_RANGE_64: u32 = 53;
