//! Script steps ([`Op`]) and what each step produced ([`Outcome`]).
//!
//! An `Op` is one system call (or a small harness helper such as "read the whole file"), with
//! fds named by symbolic [`Slot`]s so that scripts do not depend on fd numbers. An `Outcome`
//! is the comparable part of the result: the return value, the errno, a subset of `struct
//! stat` (type, permission bits, size, link count, owner; never inode numbers or times), the
//! sorted names of a directory, or a relative comparison of timestamps.

use std::fmt;

mod show;
pub use show::{at_flags, open_flags};

use scalevfs::Timespec;
use serde::{Deserialize, Serialize};

/// A symbolic fd: `open ... -> $n` stores the fd each target returned in slot `n`.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Slot(pub u16);

/// An fd argument of a step.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Fd {
    /// `AT_FDCWD`.
    Cwd,
    /// The fd stored in a slot; an empty slot (the open failed) passes -1, so the step fails
    /// with `EBADF` on that target, and the difference shows up at the open.
    Slot(Slot),
    /// A literal fd number (used for `EBADF` cases and for `dup2` targets).
    Raw(i32),
}

/// What an extended-attribute call names: a path whose trailing symlink is followed
/// (`setxattr`), a path whose trailing symlink is not (`lsetxattr`), or a descriptor
/// (`fsetxattr`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum XattrOn {
    Path(Vec<u8>),
    Link(Vec<u8>),
    Fd(Fd),
}

impl From<Slot> for Fd {
    fn from(s: Slot) -> Fd {
        Fd::Slot(s)
    }
}

/// One step of a script.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Op {
    Open {
        dir: Fd,
        path: Vec<u8>,
        flags: i32,
        mode: u32,
        to: Slot,
    },
    Close(Fd),
    Read {
        fd: Fd,
        len: usize,
    },
    Write {
        fd: Fd,
        data: Vec<u8>,
    },
    Pread {
        fd: Fd,
        len: usize,
        off: i64,
    },
    Pwrite {
        fd: Fd,
        data: Vec<u8>,
        off: i64,
    },
    Readv {
        fd: Fd,
        lens: Vec<usize>,
    },
    Writev {
        fd: Fd,
        bufs: Vec<Vec<u8>>,
    },
    Preadv {
        fd: Fd,
        lens: Vec<usize>,
        off: i64,
    },
    CopyFileRange {
        fd_in: Fd,
        off_in: Option<i64>,
        fd_out: Fd,
        off_out: Option<i64>,
        len: usize,
        flags: u32,
    },
    Pwritev {
        fd: Fd,
        bufs: Vec<Vec<u8>>,
        off: i64,
    },
    Lseek {
        fd: Fd,
        off: i64,
        whence: i32,
    },
    Stat {
        dir: Fd,
        path: Vec<u8>,
        flags: i32,
    },
    Fstat(Fd),
    /// `fstat(fd).st_blocks` (512-byte units; tmpfs counts whole pages).
    Blocks(Fd),
    /// `lstat(path).st_rdev` (a whiteout is a character device 0/0).
    Rdev(Vec<u8>),
    Chmod {
        dir: Fd,
        path: Vec<u8>,
        mode: u32,
        flags: i32,
    },
    Fchmod {
        fd: Fd,
        mode: u32,
    },
    Chown {
        dir: Fd,
        path: Vec<u8>,
        uid: u32,
        gid: u32,
        flags: i32,
    },
    Fchown {
        fd: Fd,
        uid: u32,
        gid: u32,
    },
    /// `path: None` is `futimens(dir, times)`.
    Utimens {
        dir: Fd,
        path: Option<Vec<u8>>,
        times: Option<[Timespec; 2]>,
        flags: i32,
    },
    Access {
        dir: Fd,
        path: Vec<u8>,
        mode: i32,
        flags: i32,
    },
    /// Returns the previous mask.
    Umask(u32),
    Mkdir {
        dir: Fd,
        path: Vec<u8>,
        mode: u32,
    },
    Unlink {
        dir: Fd,
        path: Vec<u8>,
        flags: i32,
    },
    Rename {
        olddir: Fd,
        old: Vec<u8>,
        newdir: Fd,
        new: Vec<u8>,
        flags: u32,
    },
    Link {
        olddir: Fd,
        old: Vec<u8>,
        newdir: Fd,
        new: Vec<u8>,
        flags: i32,
    },
    Symlink {
        target: Vec<u8>,
        dir: Fd,
        path: Vec<u8>,
    },
    Readlink {
        dir: Fd,
        path: Vec<u8>,
        size: usize,
    },
    /// `getdents64` until it returns 0; the outcome is the sorted (name, d_type) list.
    Getdents(Fd),
    /// One `getdents64` call with a `size`-byte buffer; the outcome is the number of
    /// entries decoded (used for the too-small-buffer and end-of-directory cases).
    GetdentsOnce {
        fd: Fd,
        size: usize,
    },
    Truncate {
        path: Vec<u8>,
        len: i64,
    },
    Ftruncate {
        fd: Fd,
        len: i64,
    },
    Fallocate {
        fd: Fd,
        mode: i32,
        off: i64,
        len: i64,
    },
    /// `ioctl(fd, request, arg)` on a copy of `arg` (empty: a null pointer); the outcome
    /// is the bytes afterwards.
    Ioctl {
        fd: Fd,
        request: u32,
        arg: Vec<u8>,
    },
    Dup {
        fd: Fd,
        to: Slot,
    },
    Dup2 {
        old: Fd,
        new: Fd,
        to: Slot,
    },
    Dup3 {
        old: Fd,
        new: Fd,
        flags: i32,
        to: Slot,
    },
    /// Integer-argument commands; `to` receives the fd of `F_DUPFD`/`F_DUPFD_CLOEXEC`.
    Fcntl {
        fd: Fd,
        cmd: i32,
        arg: i64,
        to: Option<Slot>,
    },
    Chdir(Vec<u8>),
    Fchdir(Fd),
    Getcwd {
        size: usize,
    },
    Fsync(Fd),
    Fdatasync(Fd),
    /// `mount("tmpfs", path, "tmpfs", 0, "")`: a fresh, empty tmpfs on `path`.
    MountTmpfs(Vec<u8>),
    /// A new tmpfs mounted read-only (`MS_RDONLY`).
    MountTmpfsRo(Vec<u8>),
    /// `mount(NULL, path, NULL, MS_REMOUNT | (MS_RDONLY if read_only), NULL)`.
    Remount {
        path: Vec<u8>,
        read_only: bool,
    },
    Umount2 {
        path: Vec<u8>,
        flags: i32,
    },
    /// `setxattr`, `lsetxattr` or `fsetxattr`.
    SetXattr {
        on: XattrOn,
        name: Vec<u8>,
        value: Vec<u8>,
        flags: i32,
    },
    /// `getxattr`, `lgetxattr` or `fgetxattr` with a `size`-byte buffer: with size 0 the
    /// outcome is the value's length, otherwise the bytes returned.
    GetXattr {
        on: XattrOn,
        name: Vec<u8>,
        size: usize,
    },
    /// `listxattr`, `llistxattr` or `flistxattr` with a `size`-byte buffer: with size 0
    /// the outcome is the list's length, otherwise its exact bytes (names and order).
    ListXattr {
        on: XattrOn,
        size: usize,
    },
    /// `removexattr`, `lremovexattr` or `fremovexattr`.
    RemoveXattr {
        on: XattrOn,
        name: Vec<u8>,
    },
    // --- harness helpers ---
    /// Make a FIFO (`mknodat(AT_FDCWD, path, S_IFIFO | mode, 0)`, the umask applies). Not a
    /// call of the `Process` contract, which has no `mknod`: scalevfs makes it through its
    /// inode-handle API, as its FUSE server does. Setup only: the path is taken from the
    /// root, through directories, with no symlinks.
    Mkfifo {
        path: Vec<u8>,
        mode: u32,
    },
    /// Drop root: close every slot, `chdir("/")`, switch to these credentials, umask 022.
    SetCreds {
        uid: u32,
        gid: u32,
        groups: Vec<u32>,
    },
    /// Remember `path`'s (lstat) timestamps and wait for the clock to move on.
    SnapTimes(Vec<u8>),
    /// Compare `path`'s timestamps with the last snapshot: each is before, same or after.
    TimesSince(Vec<u8>),
    /// The exact atime and mtime (only meaningful after an explicit `utimensat`).
    ExactTimes(Vec<u8>),
    /// `open(path, O_RDONLY)`, read to the end, close: the outcome is the file's bytes.
    Contents(Vec<u8>),
}

/// The comparable subset of `struct stat`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatView {
    /// `st_mode & S_IFMT`.
    pub kind: u32,
    /// `st_mode & 07777`.
    pub perm: u32,
    pub size: i64,
    pub nlink: u64,
    pub uid: u32,
    pub gid: u32,
}

impl StatView {
    pub fn of(st: &scalevfs::Stat) -> StatView {
        StatView {
            kind: st.mode & libc::S_IFMT,
            perm: st.mode & 0o7777,
            size: st.size,
            nlink: st.nlink,
            uid: st.uid,
            gid: st.gid,
        }
    }
}

/// How a timestamp compares with its snapshot.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Moved {
    Earlier,
    Same,
    Later,
}

impl Moved {
    pub fn of(before: Timespec, after: Timespec) -> Moved {
        match after.cmp(&before) {
            std::cmp::Ordering::Less => Moved::Earlier,
            std::cmp::Ordering::Equal => Moved::Same,
            std::cmp::Ordering::Greater => Moved::Later,
        }
    }
}

/// What one step produced on one target.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Outcome {
    Ok,
    /// A count, offset, mask or flag word.
    Val(i64),
    /// A new fd (numbers are compared: both sides allocate the lowest free fd from 0).
    Fd(i32),
    /// Data read, a link target, a cwd.
    Bytes(Vec<u8>),
    Stat(StatView),
    /// Sorted `(name, d_type)` pairs.
    Dents(Vec<(Vec<u8>, u8)>),
    Times {
        atime: Moved,
        mtime: Moved,
        ctime: Moved,
    },
    /// Seconds and nanoseconds of atime and mtime.
    Exact([(i64, i64); 2]),
    /// `copy_file_range`'s count and the offsets it wrote back (`None`: none passed).
    Copied {
        n: i64,
        off_in: Option<i64>,
        off_out: Option<i64>,
    },
    /// The errno (positive).
    Err(i32),
    /// The harness itself failed on this target (a panic, a dead child, a failed setuid).
    Harness(String),
}

/// Options that relax the comparison for targets that are not tmpfs.
#[derive(Clone, Copy, Debug, Default)]
pub struct CompareOptions {
    /// Directory `st_size` is file-system specific (tmpfs counts 20 bytes per entry).
    pub ignore_dir_size: bool,
}

impl Outcome {
    pub fn from_errno(e: scalevfs::Errno) -> Outcome {
        Outcome::Err(e.raw())
    }

    /// Whether two outcomes agree.
    pub fn agrees(&self, other: &Outcome, opts: CompareOptions) -> bool {
        match (self, other) {
            (Outcome::Stat(a), Outcome::Stat(b)) if opts.ignore_dir_size => {
                let (mut a, mut b) = (*a, *b);
                if a.kind == libc::S_IFDIR {
                    a.size = 0;
                }
                if b.kind == libc::S_IFDIR {
                    b.size = 0;
                }
                a == b
            }
            _ => self == other,
        }
    }
}

/// `"bytes"` with non-printable bytes escaped, long data abbreviated.
pub fn show_bytes(b: &[u8]) -> String {
    const MAX: usize = 48;
    let mut s = String::from("\"");
    for &c in b.iter().take(MAX) {
        match c {
            b'"' => s.push_str("\\\""),
            b'\\' => s.push_str("\\\\"),
            0x20..=0x7e => s.push(c as char),
            b'\n' => s.push_str("\\n"),
            0 => s.push_str("\\0"),
            _ => s.push_str(&format!("\\x{c:02x}")),
        }
    }
    s.push('"');
    if b.len() > MAX {
        s.push_str(&format!("...({} bytes)", b.len()));
    }
    s
}

pub fn errno_name(e: i32) -> String {
    format!("{:?}", scalevfs::Errno(e))
}

fn type_name(kind: u32) -> &'static str {
    match kind {
        libc::S_IFREG => "REG",
        libc::S_IFDIR => "DIR",
        libc::S_IFLNK => "LNK",
        libc::S_IFIFO => "FIFO",
        libc::S_IFCHR => "CHR",
        libc::S_IFBLK => "BLK",
        libc::S_IFSOCK => "SOCK",
        _ => "?",
    }
}

fn dtype_name(t: u8) -> &'static str {
    match t {
        libc::DT_REG => "reg",
        libc::DT_DIR => "dir",
        libc::DT_LNK => "lnk",
        libc::DT_UNKNOWN => "unknown",
        _ => "other",
    }
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Outcome::Ok => f.write_str("ok"),
            Outcome::Val(v) => write!(f, "{v}"),
            Outcome::Fd(n) => write!(f, "fd {n}"),
            Outcome::Bytes(b) => f.write_str(&show_bytes(b)),
            Outcome::Stat(s) => write!(
                f,
                "{{{} {:04o} size={} nlink={} uid={} gid={}}}",
                type_name(s.kind),
                s.perm,
                s.size,
                s.nlink,
                s.uid,
                s.gid
            ),
            Outcome::Dents(d) => {
                f.write_str("[")?;
                for (i, (n, t)) in d.iter().enumerate() {
                    if i > 0 {
                        f.write_str(" ")?;
                    }
                    write!(f, "{}:{}", String::from_utf8_lossy(n), dtype_name(*t))?;
                }
                f.write_str("]")
            }
            Outcome::Times {
                atime,
                mtime,
                ctime,
            } => write!(f, "atime {atime:?}, mtime {mtime:?}, ctime {ctime:?}"),
            Outcome::Exact([a, m]) => {
                write!(f, "atime {}.{:09}, mtime {}.{:09}", a.0, a.1, m.0, m.1)
            }
            Outcome::Copied { n, off_in, off_out } => {
                write!(f, "{n}, off_in {off_in:?}, off_out {off_out:?}")
            }
            Outcome::Err(e) => f.write_str(&errno_name(*e)),
            Outcome::Harness(m) => write!(f, "HARNESS: {m}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn st(kind: u32, size: i64) -> Outcome {
        Outcome::Stat(StatView {
            kind,
            perm: 0o755,
            size,
            nlink: 2,
            uid: 0,
            gid: 0,
        })
    }

    #[test]
    fn dir_size_only_relaxed_on_request() {
        let relaxed = CompareOptions {
            ignore_dir_size: true,
        };
        let strict = CompareOptions::default();
        let (a, b) = (st(libc::S_IFDIR, 40), st(libc::S_IFDIR, 4096));
        assert!(!a.agrees(&b, strict));
        assert!(a.agrees(&b, relaxed));
        let (f, g) = (st(libc::S_IFREG, 1), st(libc::S_IFREG, 2));
        assert!(!f.agrees(&g, relaxed));
        assert!(!Outcome::Err(libc::ENOENT).agrees(&Outcome::Err(libc::ENOTDIR), relaxed));
    }
}
