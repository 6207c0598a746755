//! How steps print: strace-like, with symbolic flag names, so a failing step reads the
//! way `strace` would show it.

use std::fmt;

use scalevfs::Timespec;

use super::{show_bytes, Fd, Op, XattrOn};

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
            (libc::O_TMPFILE as i64, "O_TMPFILE"),
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

fn falloc_mode(mode: i32) -> String {
    names(
        mode as u32 as i64,
        &[
            (libc::FALLOC_FL_KEEP_SIZE as i64, "FALLOC_FL_KEEP_SIZE"),
            (libc::FALLOC_FL_PUNCH_HOLE as i64, "FALLOC_FL_PUNCH_HOLE"),
            (
                libc::FALLOC_FL_COLLAPSE_RANGE as i64,
                "FALLOC_FL_COLLAPSE_RANGE",
            ),
            (libc::FALLOC_FL_ZERO_RANGE as i64, "FALLOC_FL_ZERO_RANGE"),
            (
                libc::FALLOC_FL_INSERT_RANGE as i64,
                "FALLOC_FL_INSERT_RANGE",
            ),
            (
                libc::FALLOC_FL_UNSHARE_RANGE as i64,
                "FALLOC_FL_UNSHARE_RANGE",
            ),
        ],
        "0",
    )
}

fn ioctl_name(r: u32) -> String {
    use scalevfs::fileattr::*;
    match r {
        FS_IOC_GETFLAGS => "FS_IOC_GETFLAGS".into(),
        FS_IOC_SETFLAGS => "FS_IOC_SETFLAGS".into(),
        FS_IOC_FSGETXATTR => "FS_IOC_FSGETXATTR".into(),
        FS_IOC_FSSETXATTR => "FS_IOC_FSSETXATTR".into(),
        r => format!("{r:#x}"),
    }
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
            Op::Blocks(fd) => write!(f, "fstat({fd}).st_blocks"),
            Op::Rdev(path) => write!(f, "lstat({}).st_rdev", p(path)),
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
                write!(f, "fallocate({fd}, {}, {off}, {len})", falloc_mode(*mode))
            }
            Op::Ioctl { fd, request, arg } => {
                write!(
                    f,
                    "ioctl({fd}, {}, {})",
                    ioctl_name(*request),
                    show_bytes(arg)
                )
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
            Op::MountTmpfsRo(path) => write!(f, "mount(tmpfs, {}, MS_RDONLY)", p(path)),
            Op::Remount { path, read_only } => write!(
                f,
                "mount(NULL, {}, MS_REMOUNT{})",
                p(path),
                if *read_only { "|MS_RDONLY" } else { "" }
            ),
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
    use crate::op::{show_bytes, Outcome, Slot};

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
