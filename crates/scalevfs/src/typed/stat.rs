//! [`Metadata`]: a [`Stat`] with typed accessors (file type, permissions, times as
//! [`SystemTime`]).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::flags::{FileType, Mode};
use crate::{Stat, Timespec};

/// What `stat` reports about a file, with typed accessors; [`raw`](Self::raw) has every
/// field.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Metadata(Stat);

impl From<Stat> for Metadata {
    fn from(st: Stat) -> Metadata {
        Metadata(st)
    }
}

/// A `struct timespec` as a [`SystemTime`] (times before 1970 included).
fn system_time(t: Timespec) -> SystemTime {
    let nsec = u32::try_from(t.nsec.clamp(0, 999_999_999)).unwrap_or(0);
    if t.sec >= 0 {
        UNIX_EPOCH + Duration::new(t.sec.unsigned_abs(), nsec)
    } else {
        UNIX_EPOCH - Duration::from_secs(t.sec.unsigned_abs()) + Duration::new(0, nsec)
    }
}

impl Metadata {
    /// Every field, as `newfstatat` fills them.
    pub fn raw(&self) -> &Stat {
        &self.0
    }
    /// The file's type, from the `S_IFMT` bits of `st_mode`.
    pub fn file_type(&self) -> FileType {
        FileType::from_mode(self.0.mode)
    }
    /// Whether the file is a directory.
    pub fn is_dir(&self) -> bool {
        self.file_type().is_dir()
    }
    /// Whether the file is a regular file.
    pub fn is_file(&self) -> bool {
        self.file_type().is_file()
    }
    /// Whether the file is a symbolic link (seen only by a stat that does not follow it).
    pub fn is_symlink(&self) -> bool {
        self.file_type().is_symlink()
    }
    /// The permission and set-id bits.
    pub fn permissions(&self) -> Mode {
        Mode::from_bits_truncate(self.0.mode)
    }
    /// The size in bytes (0 for what has none).
    pub fn len(&self) -> u64 {
        u64::try_from(self.0.size).unwrap_or(0)
    }
    /// Whether [`len`](Self::len) is 0.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The owner's user id (`st_uid`).
    pub fn uid(&self) -> u32 {
        self.0.uid
    }
    /// The owner's group id (`st_gid`).
    pub fn gid(&self) -> u32 {
        self.0.gid
    }
    /// The inode number (`st_ino`).
    pub fn ino(&self) -> u64 {
        self.0.ino
    }
    /// The number of hard links (`st_nlink`).
    pub fn nlink(&self) -> u64 {
        self.0.nlink
    }
    /// Last data modification (`st_mtime`).
    pub fn modified(&self) -> SystemTime {
        system_time(self.0.mtime)
    }
    /// Last access (`st_atime`).
    pub fn accessed(&self) -> SystemTime {
        system_time(self.0.atime)
    }
    /// Last status change (`st_ctime`).
    pub fn changed(&self) -> SystemTime {
        system_time(self.0.ctime)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_before_and_after_the_epoch() {
        let t = |sec, nsec| system_time(Timespec { sec, nsec });
        assert_eq!(t(0, 0), UNIX_EPOCH);
        assert_eq!(t(5, 7), UNIX_EPOCH + Duration::new(5, 7));
        assert_eq!(t(-2, 500_000_000), UNIX_EPOCH - Duration::from_millis(1500));
    }

    #[test]
    fn accessors_read_the_mode() {
        let m = Metadata::from(Stat {
            mode: libc::S_IFDIR | 0o1755,
            size: -1,
            ..Stat::default()
        });
        assert!(m.is_dir() && !m.is_file() && !m.is_symlink());
        assert_eq!(m.permissions(), Mode::octal(0o1755));
        assert_eq!(m.len(), 0);
    }
}
