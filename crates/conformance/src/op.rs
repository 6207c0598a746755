//! Script steps ([`Op`]) and what each step produced ([`Outcome`]).
//!
//! An `Op` is one system call (or a small harness helper such as "read the whole file"), with
//! fds named by symbolic [`Slot`]s so that scripts do not depend on fd numbers. An `Outcome`
//! is the comparable part of the result: the return value, the errno, a subset of `struct
//! stat` (type, permission bits, size, link count, owner; never inode numbers or times), the
//! sorted names of a directory, or a relative comparison of timestamps.

use std::fmt;

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

// --- symbolic flag names, so a failing step prints the way strace would ---

fn names(v: i64, table: &[(i64, &str)], zero: &str) -> String {
    let mut out = Vec::new();
    let mut rest = v;
    for &(bit, name) in table {
        if bit != 0 && rest & bit == bit {
            out.push(name.to_string());
            rest &= !bit;
        }
    }
    if rest != 0 {
        out.push(format!("{rest:#o}"));
    }
    if out.is_empty() {
        zero.to_string()
    } else {
        out.join("|")
    }
}

pub fn open_flags(flags: i32) -> String {
    let acc = match flags & libc::O_ACCMODE {
        libc::O_RDONLY => "O_RDONLY",
        libc::O_WRONLY => "O_WRONLY",
        libc::O_RDWR => "O_RDWR",
        _ => "O_ACCMODE",
    };
    let rest = names(
        (flags & !libc::O_ACCMODE) as i64,
        &[
            (libc::O_CREAT as i64, "O_CREAT"),
            (libc::O_EXCL as i64, "O_EXCL"),
            (libc::O_NOCTTY as i64, "O_NOCTTY"),
            (libc::O_TRUNC as i64, "O_TRUNC"),
            (libc::O_APPEND as i64, "O_APPEND"),
            (libc::O_NONBLOCK as i64, "O_NONBLOCK"),
            (libc::O_DIRECTORY as i64, "O_DIRECTORY"),
            (libc::O_NOFOLLOW as i64, "O_NOFOLLOW"),
            (libc::O_NOATIME as i64, "O_NOATIME"),
            (libc::O_CLOEXEC as i64, "O_CLOEXEC"),
            (libc::O_PATH as i64, "O_PATH"),
            (0o100000, "O_LARGEFILE"),
        ],
        "",
    );
    if rest.is_empty() {
        acc.to_string()
    } else {
        format!("{acc}|{rest}")
    }
}

pub fn at_flags(flags: i32) -> String {
    names(
        flags as i64,
        &[
            (libc::AT_SYMLINK_NOFOLLOW as i64, "AT_SYMLINK_NOFOLLOW"),
            (libc::AT_REMOVEDIR as i64, "AT_REMOVEDIR"),
            (libc::AT_SYMLINK_FOLLOW as i64, "AT_SYMLINK_FOLLOW"),
            (libc::AT_EMPTY_PATH as i64, "AT_EMPTY_PATH"),
            (libc::AT_EACCESS as i64, "AT_EACCESS"),
        ],
        "0",
    )
}

fn rename_flags(flags: u32) -> String {
    names(
        flags as i64,
        &[
            (libc::RENAME_NOREPLACE as i64, "RENAME_NOREPLACE"),
            (libc::RENAME_EXCHANGE as i64, "RENAME_EXCHANGE"),
            (libc::RENAME_WHITEOUT as i64, "RENAME_WHITEOUT"),
        ],
        "0",
    )
}

fn access_mode(mode: i32) -> String {
    names(
        mode as i64,
        &[
            (libc::R_OK as i64, "R_OK"),
            (libc::W_OK as i64, "W_OK"),
            (libc::X_OK as i64, "X_OK"),
        ],
        "F_OK",
    )
}

fn whence(w: i32) -> String {
    match w {
        libc::SEEK_SET => "SEEK_SET".into(),
        libc::SEEK_CUR => "SEEK_CUR".into(),
        libc::SEEK_END => "SEEK_END".into(),
        libc::SEEK_DATA => "SEEK_DATA".into(),
        libc::SEEK_HOLE => "SEEK_HOLE".into(),
        w => w.to_string(),
    }
}

fn fcntl_cmd(c: i32) -> String {
    match c {
        libc::F_DUPFD => "F_DUPFD".into(),
        libc::F_DUPFD_CLOEXEC => "F_DUPFD_CLOEXEC".into(),
        libc::F_GETFD => "F_GETFD".into(),
        libc::F_SETFD => "F_SETFD".into(),
        libc::F_GETFL => "F_GETFL".into(),
        libc::F_SETFL => "F_SETFL".into(),
        c => c.to_string(),
    }
}

fn xattr_flags(flags: i32) -> String {
    names(
        flags as i64,
        &[
            (libc::XATTR_CREATE as i64, "XATTR_CREATE"),
            (libc::XATTR_REPLACE as i64, "XATTR_REPLACE"),
        ],
        "0",
    )
}

impl XattrOn {
    /// The call's prefix (`""`, `"l"` or `"f"`) and its first argument.
    fn parts(&self) -> (&'static str, String) {
        match self {
            XattrOn::Path(p) => ("", show_bytes(p)),
            XattrOn::Link(p) => ("l", show_bytes(p)),
            XattrOn::Fd(fd) => ("f", fd.to_string()),
        }
    }
}

impl fmt::Display for Fd {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Fd::Cwd => f.write_str("AT_FDCWD"),
            Fd::Slot(s) => write!(f, "${}", s.0),
            Fd::Raw(n) => write!(f, "{n}"),
        }
    }
}

fn show_times(t: &Option<[Timespec; 2]>) -> String {
    let one = |t: &Timespec| match t.nsec {
        libc::UTIME_NOW => "UTIME_NOW".to_string(),
        libc::UTIME_OMIT => "UTIME_OMIT".to_string(),
        n => format!("{}.{:09}", t.sec, n),
    };
    match t {
        None => "NULL".into(),
        Some([a, m]) => format!("[{}, {}]", one(a), one(m)),
    }
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let p = show_bytes;
        match self {
            Op::Open {
                dir,
                path,
                flags,
                mode,
                to,
            } => write!(
                f,
                "${} = openat({dir}, {}, {}, {mode:#o})",
                to.0,
                p(path),
                open_flags(*flags)
            ),
            Op::Close(fd) => write!(f, "close({fd})"),
            Op::Read { fd, len } => write!(f, "read({fd}, {len})"),
            Op::Write { fd, data } => write!(f, "write({fd}, {})", show_bytes(data)),
            Op::Pread { fd, len, off } => write!(f, "pread64({fd}, {len}, {off})"),
            Op::Pwrite { fd, data, off } => {
                write!(f, "pwrite64({fd}, {}, {off})", show_bytes(data))
            }
            Op::Readv { fd, lens } => write!(f, "readv({fd}, {lens:?})"),
            Op::Writev { fd, bufs } => {
                let b: Vec<String> = bufs.iter().map(|b| show_bytes(b)).collect();
                write!(f, "writev({fd}, [{}])", b.join(", "))
            }
            Op::Preadv { fd, lens, off } => write!(f, "preadv({fd}, {lens:?}, {off})"),
            Op::CopyFileRange {
                fd_in,
                off_in,
                fd_out,
                off_out,
                len,
                flags,
            } => {
                let off = |o: &Option<i64>| o.map_or("NULL".to_string(), |v| format!("[{v}]"));
                write!(
                    f,
                    "copy_file_range({fd_in}, {}, {fd_out}, {}, {len}, {flags:#x})",
                    off(off_in),
                    off(off_out)
                )
            }
            Op::Pwritev { fd, bufs, off } => {
                let b: Vec<String> = bufs.iter().map(|b| show_bytes(b)).collect();
                write!(f, "pwritev({fd}, [{}], {off})", b.join(", "))
            }
            Op::Lseek { fd, off, whence: w } => write!(f, "lseek({fd}, {off}, {})", whence(*w)),
            Op::Stat { dir, path, flags } => {
                write!(f, "newfstatat({dir}, {}, {})", p(path), at_flags(*flags))
            }
            Op::Fstat(fd) => write!(f, "fstat({fd})"),
            Op::Chmod {
                dir,
                path,
                mode,
                flags,
            } => write!(
                f,
                "fchmodat({dir}, {}, {mode:#o}, {})",
                p(path),
                at_flags(*flags)
            ),
            Op::Fchmod { fd, mode } => write!(f, "fchmod({fd}, {mode:#o})"),
            Op::Chown {
                dir,
                path,
                uid,
                gid,
                flags,
            } => write!(
                f,
                "fchownat({dir}, {}, {}, {}, {})",
                p(path),
                *uid as i32,
                *gid as i32,
                at_flags(*flags)
            ),
            Op::Fchown { fd, uid, gid } => {
                write!(f, "fchown({fd}, {}, {})", *uid as i32, *gid as i32)
            }
            Op::Utimens {
                dir,
                path: None,
                times,
                ..
            } => write!(f, "futimens({dir}, {})", show_times(times)),
            Op::Utimens {
                dir,
                path: Some(path),
                times,
                flags,
            } => write!(
                f,
                "utimensat({dir}, {}, {}, {})",
                p(path),
                show_times(times),
                at_flags(*flags)
            ),
            Op::Access {
                dir,
                path,
                mode,
                flags,
            } => write!(
                f,
                "faccessat2({dir}, {}, {}, {})",
                p(path),
                access_mode(*mode),
                at_flags(*flags)
            ),
            Op::Umask(m) => write!(f, "umask({m:#o})"),
            Op::Mkdir { dir, path, mode } => write!(f, "mkdirat({dir}, {}, {mode:#o})", p(path)),
            Op::Unlink { dir, path, flags } => {
                write!(f, "unlinkat({dir}, {}, {})", p(path), at_flags(*flags))
            }
            Op::Rename {
                olddir,
                old,
                newdir,
                new,
                flags,
            } => write!(
                f,
                "renameat2({olddir}, {}, {newdir}, {}, {})",
                p(old),
                p(new),
                rename_flags(*flags)
            ),
            Op::Link {
                olddir,
                old,
                newdir,
                new,
                flags,
            } => write!(
                f,
                "linkat({olddir}, {}, {newdir}, {}, {})",
                p(old),
                p(new),
                at_flags(*flags)
            ),
            Op::Symlink { target, dir, path } => {
                write!(f, "symlinkat({}, {dir}, {})", p(target), p(path))
            }
            Op::Readlink { dir, path, size } => {
                write!(f, "readlinkat({dir}, {}, {size})", p(path))
            }
            Op::Getdents(fd) => write!(f, "getdents64({fd}) to the end"),
            Op::GetdentsOnce { fd, size } => write!(f, "getdents64({fd}, {size})"),
            Op::Truncate { path, len } => write!(f, "truncate({}, {len})", p(path)),
            Op::Ftruncate { fd, len } => write!(f, "ftruncate({fd}, {len})"),
            Op::Fallocate { fd, mode, off, len } => {
                write!(f, "fallocate({fd}, {mode}, {off}, {len})")
            }
            Op::Dup { fd, to } => write!(f, "${} = dup({fd})", to.0),
            Op::Dup2 { old, new, to } => write!(f, "${} = dup2({old}, {new})", to.0),
            Op::Dup3 {
                old,
                new,
                flags,
                to,
            } => write!(
                f,
                "${} = dup3({old}, {new}, {})",
                to.0,
                open_flags(*flags).replace("O_RDONLY|", "")
            ),
            Op::Fcntl { fd, cmd, arg, to } => {
                if let Some(to) = to {
                    write!(f, "${} = ", to.0)?;
                }
                write!(f, "fcntl({fd}, {}, {arg:#o})", fcntl_cmd(*cmd))
            }
            Op::Chdir(path) => write!(f, "chdir({})", p(path)),
            Op::Fchdir(fd) => write!(f, "fchdir({fd})"),
            Op::Getcwd { size } => write!(f, "getcwd({size})"),
            Op::Fsync(fd) => write!(f, "fsync({fd})"),
            Op::Fdatasync(fd) => write!(f, "fdatasync({fd})"),
            Op::MountTmpfs(path) => write!(f, "mount(tmpfs, {})", p(path)),
            Op::Umount2 { path, flags } => write!(f, "umount2({}, {flags:#x})", p(path)),
            Op::SetXattr {
                on,
                name,
                value,
                flags,
            } => {
                let (l, on) = on.parts();
                write!(
                    f,
                    "{l}setxattr({on}, {}, {}, {}, {})",
                    p(name),
                    p(value),
                    value.len(),
                    xattr_flags(*flags)
                )
            }
            Op::GetXattr { on, name, size } => {
                let (l, on) = on.parts();
                write!(f, "{l}getxattr({on}, {}, {size})", p(name))
            }
            Op::ListXattr { on, size } => {
                let (l, on) = on.parts();
                write!(f, "{l}listxattr({on}, {size})")
            }
            Op::RemoveXattr { on, name } => {
                let (l, on) = on.parts();
                write!(f, "{l}removexattr({on}, {})", p(name))
            }
            Op::Mkfifo { path, mode } => write!(f, "-- mkfifo({}, {mode:#o})", p(path)),
            Op::SetCreds { uid, gid, groups } => {
                write!(f, "-- become uid={uid} gid={gid} groups={groups:?}")
            }
            Op::SnapTimes(path) => write!(f, "-- snapshot times of {}", p(path)),
            Op::TimesSince(path) => write!(f, "-- times of {} vs snapshot", p(path)),
            Op::ExactTimes(path) => write!(f, "-- exact times of {}", p(path)),
            Op::Contents(path) => write!(f, "-- contents of {}", p(path)),
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

    #[test]
    fn steps_print_like_strace() {
        let op = Op::Open {
            dir: Fd::Cwd,
            path: b"a/f".to_vec(),
            flags: libc::O_CREAT | libc::O_WRONLY | libc::O_EXCL,
            mode: 0o644,
            to: Slot(3),
        };
        assert_eq!(
            op.to_string(),
            "$3 = openat(AT_FDCWD, \"a/f\", O_WRONLY|O_CREAT|O_EXCL, 0o644)"
        );
        assert_eq!(Outcome::Err(libc::ELOOP).to_string(), "ELOOP");
        assert_eq!(show_bytes(b"a\"\xff"), "\"a\\\"\\xff\"");
        assert_eq!(at_flags(0), "0");
        let set = Op::SetXattr {
            on: XattrOn::Link(b"l".to_vec()),
            name: b"user.a".to_vec(),
            value: b"v".to_vec(),
            flags: libc::XATTR_CREATE | 8,
        };
        assert_eq!(
            set.to_string(),
            "lsetxattr(\"l\", \"user.a\", \"v\", 1, XATTR_CREATE|0o10)"
        );
        let list = Op::ListXattr {
            on: XattrOn::Fd(Fd::Slot(Slot(2))),
            size: 0,
        };
        assert_eq!(list.to_string(), "flistxattr($2, 0)");
        assert_eq!(
            at_flags(libc::AT_SYMLINK_NOFOLLOW | libc::AT_EMPTY_PATH),
            "AT_SYMLINK_NOFOLLOW|AT_EMPTY_PATH"
        );
    }
}
