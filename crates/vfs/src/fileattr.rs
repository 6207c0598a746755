//! Inode flags (`chattr`/`lsattr`: `FS_IOC_GETFLAGS`/`FS_IOC_SETFLAGS`) and the extended
//! form `struct fsxattr` (`FS_IOC_FSGETXATTR`/`FS_IOC_FSSETXATTR`), as Linux's
//! `vfs_fileattr_get`/`vfs_fileattr_set` handle them. A file system says which flags its
//! inodes take ([`crate::FileSystem::fileattr_flags`]; tmpfs: append-only, immutable,
//! no-dump, no-atime); the VFS keeps them in the inode and enforces them.

/// `FS_IOC_GETFLAGS` (`_IOR('f', 1, long)`; the argument is an `int` nevertheless).
pub const FS_IOC_GETFLAGS: u32 = 0x8008_6601;
/// `FS_IOC_SETFLAGS` (`_IOW('f', 2, long)`; an `int` too).
pub const FS_IOC_SETFLAGS: u32 = 0x4008_6602;
/// `FS_IOC_FSGETXATTR` (`_IOR('X', 31, struct fsxattr)`).
pub const FS_IOC_FSGETXATTR: u32 = 0x801c_581f;
/// `FS_IOC_FSSETXATTR` (`_IOW('X', 32, struct fsxattr)`).
pub const FS_IOC_FSSETXATTR: u32 = 0x401c_5820;

/// Synchronous updates (accepted, no effect).
pub const FS_SYNC_FL: u32 = 0x0000_0008;
/// Immutable: no write, truncate, link, rename, unlink or attribute change.
pub const FS_IMMUTABLE_FL: u32 = 0x0000_0010;
/// Append only: writes go to the end; no truncate, unlink or rename.
pub const FS_APPEND_FL: u32 = 0x0000_0020;
/// Not to be dumped (accepted, no effect).
pub const FS_NODUMP_FL: u32 = 0x0000_0040;
/// Do not update the access time.
pub const FS_NOATIME_FL: u32 = 0x0000_0080;
/// Direct access (rejected by tmpfs).
pub const FS_DAX_FL: u32 = 0x0200_0000;
/// Children inherit the project id (rejected by tmpfs).
pub const FS_PROJINHERIT_FL: u32 = 0x2000_0000;

/// `FS_IMMUTABLE_FL` as an extended flag.
pub const FS_XFLAG_IMMUTABLE: u32 = 0x0000_0008;
/// `FS_APPEND_FL` as an extended flag.
pub const FS_XFLAG_APPEND: u32 = 0x0000_0010;
/// `FS_SYNC_FL` as an extended flag.
pub const FS_XFLAG_SYNC: u32 = 0x0000_0020;
/// `FS_NOATIME_FL` as an extended flag.
pub const FS_XFLAG_NOATIME: u32 = 0x0000_0040;
/// `FS_NODUMP_FL` as an extended flag.
pub const FS_XFLAG_NODUMP: u32 = 0x0000_0080;
/// An extent size hint is set.
pub const FS_XFLAG_EXTSIZE: u32 = 0x0000_0800;
/// Children inherit the extent size hint.
pub const FS_XFLAG_EXTSZINHERIT: u32 = 0x0000_1000;
/// `FS_PROJINHERIT_FL` as an extended flag.
pub const FS_XFLAG_PROJINHERIT: u32 = 0x0000_0200;
/// `FS_DAX_FL` as an extended flag.
pub const FS_XFLAG_DAX: u32 = 0x0000_8000;
/// A copy-on-write extent size hint is set.
pub const FS_XFLAG_COWEXTSIZE: u32 = 0x0001_0000;
/// Reported, never set (`FS_XFLAG_RDONLY_MASK`).
pub const FS_XFLAG_HASATTR: u32 = 0x8000_0000;
/// Every xflag Linux defines (`FS_XFLAGS_MASK`: bits 0-16 but 0x4, and `HASATTR`); a
/// `FS_IOC_FSSETXATTR` with any other bit is `EOPNOTSUPP`.
pub const FS_XFLAGS_MASK: u32 = 0x0001_fffb | FS_XFLAG_HASATTR;

/// The flags and xflags that mean the same thing (`FS_COMMON_FL`/`FS_XFLAG_COMMON`).
const FLAG_XFLAG: [(u32, u32); 7] = [
    (FS_SYNC_FL, FS_XFLAG_SYNC),
    (FS_IMMUTABLE_FL, FS_XFLAG_IMMUTABLE),
    (FS_APPEND_FL, FS_XFLAG_APPEND),
    (FS_NODUMP_FL, FS_XFLAG_NODUMP),
    (FS_NOATIME_FL, FS_XFLAG_NOATIME),
    (FS_DAX_FL, FS_XFLAG_DAX),
    (FS_PROJINHERIT_FL, FS_XFLAG_PROJINHERIT),
];

/// `struct fsxattr` (28 bytes, native byte order).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FsxAttr {
    /// `FS_XFLAG_*` bits.
    pub xflags: u32,
    /// Extent size hint (0 on tmpfs).
    pub extsize: u32,
    /// Number of extents (0 on tmpfs).
    pub nextents: u32,
    /// Project id (0 on tmpfs).
    pub projid: u32,
    /// Copy-on-write extent size hint (0 on tmpfs).
    pub cowextsize: u32,
}

impl FsxAttr {
    /// Its size in memory (with `fsx_pad[8]`).
    pub const SIZE: usize = 28;

    /// The xflags of `flags` (`fileattr_fill_flags`), everything else 0.
    pub fn from_flags(flags: u32) -> FsxAttr {
        FsxAttr {
            xflags: map(flags, |(f, x)| (f, x)),
            ..FsxAttr::default()
        }
    }
    /// The flags these xflags stand for (`fileattr_fill_xflags`).
    pub fn flags(&self) -> u32 {
        map(self.xflags, |(f, x)| (x, f))
    }
    /// Decodes the first [`FsxAttr::SIZE`] bytes of `b` (`None` if shorter).
    pub fn from_bytes(b: &[u8]) -> Option<FsxAttr> {
        let w = |i: usize| -> Option<u32> {
            Some(u32::from_ne_bytes(
                b.get(4 * i..4 * i + 4)?.try_into().ok()?,
            ))
        };
        b.get(..Self::SIZE)?;
        Some(FsxAttr {
            xflags: w(0)?,
            extsize: w(1)?,
            nextents: w(2)?,
            projid: w(3)?,
            cowextsize: w(4)?,
        })
    }
    /// Encodes into `b` (at least [`FsxAttr::SIZE`] bytes), padding zeroed.
    pub fn write_to(&self, b: &mut [u8]) {
        let words = [
            self.xflags,
            self.extsize,
            self.nextents,
            self.projid,
            self.cowextsize,
        ];
        for (i, w) in words.iter().enumerate() {
            b[4 * i..4 * i + 4].copy_from_slice(&w.to_ne_bytes());
        }
        b[20..Self::SIZE].fill(0);
    }
}

/// The bits of `v` translated through [`FLAG_XFLAG`] (`pick` orders a pair as from, to).
fn map(v: u32, pick: impl Fn((u32, u32)) -> (u32, u32)) -> u32 {
    FLAG_XFLAG
        .iter()
        .map(|&p| pick(p))
        .filter(|&(from, _)| v & from != 0)
        .fold(0, |acc, (_, to)| acc | to)
}

/// The xflags with a flag counterpart (`FS_XFLAG_COMMON`).
pub(crate) const XFLAG_COMMON: u32 = FS_XFLAG_SYNC
    | FS_XFLAG_IMMUTABLE
    | FS_XFLAG_APPEND
    | FS_XFLAG_NODUMP
    | FS_XFLAG_NOATIME
    | FS_XFLAG_DAX
    | FS_XFLAG_PROJINHERIT;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_and_xflags_map_both_ways() {
        let f = FS_IMMUTABLE_FL | FS_NODUMP_FL | FS_NOATIME_FL;
        let x = FsxAttr::from_flags(f);
        assert_eq!(
            x.xflags,
            FS_XFLAG_IMMUTABLE | FS_XFLAG_NODUMP | FS_XFLAG_NOATIME
        );
        assert_eq!(x.flags(), f);
        let mut b = [0xffu8; FsxAttr::SIZE];
        x.write_to(&mut b);
        assert_eq!(FsxAttr::from_bytes(&b), Some(x));
        assert_eq!(FsxAttr::from_bytes(&b[..27]), None);
        assert_eq!(&b[20..], &[0; 8]);
    }
}
