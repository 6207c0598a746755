//! The lock manager's vocabulary: owners, classes, types, requests, held locks, the
//! `struct flock` range conversion and the listing's lines.

use std::fmt::Write as _;

use crate::abi::Flock;
use crate::Errno;

/// The largest file offset; a lock ending here runs "to EOF and beyond" (`l_len == 0`).
pub const OFFSET_MAX: i64 = i64::MAX;

/// Who owns a lock.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum LockOwner {
    /// A POSIX record-lock owner: the process (its unique id; Linux's `files_struct`).
    Process(u64),
    /// An open file description (its unique id): owner of OFD and flock locks.
    File(u64),
}

/// The kind of lock, as `/proc/locks` names them.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum LockClass {
    /// A POSIX record lock (`fcntl`).
    Posix,
    /// An open-file-description lock (`F_OFD_*`).
    Ofd,
    /// A `flock` lock.
    Flock,
}

impl LockClass {
    pub(super) fn of_posix(owner: LockOwner) -> Self {
        match owner {
            LockOwner::Process(_) => LockClass::Posix,
            LockOwner::File(_) => LockClass::Ofd,
        }
    }
}

/// `F_RDLCK`, `F_WRLCK` or `F_UNLCK`.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum LockType {
    /// Shared (`F_RDLCK`, `LOCK_SH`).
    Read,
    /// Exclusive (`F_WRLCK`, `LOCK_EX`).
    Write,
    /// Release (`F_UNLCK`, `LOCK_UN`).
    Unlock,
}

impl LockType {
    /// Decodes `l_type` (`EINVAL` if it is none of the three).
    pub fn from_l_type(t: i16) -> Result<Self, Errno> {
        match t as i32 {
            libc::F_RDLCK => Ok(LockType::Read),
            libc::F_WRLCK => Ok(LockType::Write),
            libc::F_UNLCK => Ok(LockType::Unlock),
            _ => Err(Errno::EINVAL),
        }
    }
    /// The `l_type` value.
    pub fn to_l_type(self) -> i16 {
        (match self {
            LockType::Read => libc::F_RDLCK,
            LockType::Write => libc::F_WRLCK,
            LockType::Unlock => libc::F_UNLCK,
        }) as i16
    }
}

/// A lock or unlock request on the byte range `start..=end` (`end == OFFSET_MAX`: to EOF
/// and beyond). For [`LockManager::setlk`](super::LockManager::setlk), `LockOwner::Process` makes a POSIX request and
/// `LockOwner::File` an OFD request.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct LockRequest {
    /// Who asks.
    pub owner: LockOwner,
    /// Reported as `l_pid` and in `/proc/locks`.
    pub pid: i32,
    /// Shared, exclusive or unlock.
    pub ty: LockType,
    /// First byte.
    pub start: i64,
    /// Last byte, inclusive (`OFFSET_MAX`: to the end of the file and beyond).
    pub end: i64,
}

impl LockRequest {
    pub(super) fn info(&self, class: LockClass) -> LockInfo {
        LockInfo {
            class,
            owner: self.owner,
            pid: self.pid,
            ty: self.ty,
            start: self.start,
            end: self.end,
        }
    }
    pub(super) fn check(&self) -> Result<(), Errno> {
        if self.start < 0 || self.end < self.start {
            return Err(Errno::EINVAL);
        }
        Ok(())
    }
}

/// A held (or, in a listing, requested) lock.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct LockInfo {
    /// POSIX, OFD or flock.
    pub class: LockClass,
    /// The holder.
    pub owner: LockOwner,
    /// The holder's pid (`l_pid`).
    pub pid: i32,
    /// Shared or exclusive.
    pub ty: LockType,
    /// First byte.
    pub start: i64,
    /// Inclusive; `OFFSET_MAX` for "to EOF".
    pub end: i64,
}

impl LockInfo {
    /// Fills `F_GETLK`'s answer as `posix_lock_to_flock` does: `SEEK_SET`, `l_len` 0 for a
    /// lock to EOF, and `l_pid` -1 for an OFD lock.
    pub fn to_flock(&self, fl: &mut Flock) {
        fl.l_type = self.ty.to_l_type();
        fl.l_whence = libc::SEEK_SET as i16;
        fl.l_start = self.start;
        fl.l_len = if self.end == OFFSET_MAX {
            0
        } else {
            self.end - self.start + 1
        };
        fl.l_pid = if self.class == LockClass::Ofd {
            -1
        } else {
            self.pid
        };
    }
}

/// Converts a `struct flock` range to `start..=end` as `flock64_to_posix_lock` does:
/// `l_whence` relative to 0, the file position `pos` or the file size `size`; negative
/// `l_len` locks the bytes before the start; `l_len == 0` runs to `OFFSET_MAX`.
/// `EINVAL` for a bad `l_whence` or a range starting before 0, `EOVERFLOW` past
/// `OFFSET_MAX`.
pub fn flock_to_range(fl: &Flock, pos: i64, size: i64) -> Result<(i64, i64), Errno> {
    let base = match fl.l_whence as i32 {
        libc::SEEK_SET => 0,
        libc::SEEK_CUR => pos,
        libc::SEEK_END => size,
        _ => return Err(Errno::EINVAL),
    };
    if base < 0 {
        return Err(Errno::EINVAL);
    }
    if fl.l_start > OFFSET_MAX - base {
        return Err(Errno::EOVERFLOW);
    }
    let mut start = base + fl.l_start;
    if start < 0 {
        return Err(Errno::EINVAL);
    }
    let end;
    if fl.l_len > 0 {
        if fl.l_len - 1 > OFFSET_MAX - start {
            return Err(Errno::EOVERFLOW);
        }
        end = start + (fl.l_len - 1);
    } else if fl.l_len < 0 {
        if start + fl.l_len < 0 {
            return Err(Errno::EINVAL);
        }
        end = start - 1;
        start += fl.l_len;
    } else {
        end = OFFSET_MAX;
    }
    Ok((start, end))
}

/// What `fcntl`'s lock commands need to know about the open file.
#[derive(Copy, Clone, Debug)]
pub struct FcntlFile {
    /// The file position (for `SEEK_CUR`).
    pub pos: i64,
    /// The file size (for `SEEK_END`).
    pub size: i64,
    /// Opened for reading / writing (`F_RDLCK` needs the first, `F_WRLCK` the second).
    pub readable: bool,
    /// Opened for writing.
    pub writable: bool,
    /// The open file description's id (OFD owner).
    pub file_id: u64,
    /// The calling process's id (POSIX owner).
    pub process_id: u64,
    /// The calling process's pid (`l_pid`).
    pub pid: i32,
}

/// One line of the listing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListedLock {
    /// The `N:` ordinal; a waiter has its blocker's.
    pub id: usize,
    /// A blocked request (`->` in `/proc/locks`).
    pub waiting: bool,
    /// The lock.
    pub info: LockInfo,
    /// The device of the locked file.
    pub dev: u64,
    /// The inode number of the locked file.
    pub ino: u64,
}

impl ListedLock {
    /// The `/proc/locks` line (`lock_get_status`), with a trailing newline.
    pub fn proc_line(&self) -> String {
        let i = &self.info;
        let mut s = format!("{}: ", self.id);
        if self.waiting {
            s.push_str("-> ");
        }
        s.push_str(match i.class {
            LockClass::Posix => "POSIX  ADVISORY  ",
            LockClass::Ofd => "OFDLCK ADVISORY  ",
            LockClass::Flock => "FLOCK  ADVISORY  ",
        });
        s.push_str(match i.ty {
            LockType::Write => "WRITE ",
            LockType::Read => "READ ",
            LockType::Unlock => "UNLCK ",
        });
        let pid = if i.class == LockClass::Ofd { -1 } else { i.pid };
        // st_dev encoding (glibc's major()/minor()).
        let d = self.dev;
        let major = ((d >> 8) & 0xfff) | ((d >> 32) & !0xfff);
        let minor = (d & 0xff) | ((d >> 12) & !0xff);
        let _ = write!(s, "{pid} {major:02x}:{minor:02x}:{} ", self.ino);
        if i.class == LockClass::Flock {
            s.push_str("0 EOF\n");
        } else if i.end == OFFSET_MAX {
            let _ = writeln!(s, "{} EOF", i.start);
        } else {
            let _ = writeln!(s, "{} {}", i.start, i.end);
        }
        s
    }
}

/// Decodes a `flock(2)` operation: `Some(type)`, `None` for `LOCK_MAND` (ignored), or
/// `EINVAL` (Linux's `flock_translate_cmd`).
pub fn flock_op_type(op: i32) -> Result<Option<LockType>, Errno> {
    const LOCK_MAND: i32 = 32;
    if op & LOCK_MAND != 0 {
        return Ok(None);
    }
    match op & !libc::LOCK_NB {
        libc::LOCK_SH => Ok(Some(LockType::Read)),
        libc::LOCK_EX => Ok(Some(LockType::Write)),
        libc::LOCK_UN => Ok(Some(LockType::Unlock)),
        _ => Err(Errno::EINVAL),
    }
}
