//! Extended attributes (`user.`, `trusted.`, `security.`): kept beside the inodes, in a
//! map from inode number to the inode's attributes under a table of hashed mutexes
//! (`Tmpfs::xattrs`), so a file without any costs nothing. Listed in descending name
//! order, as Linux's tmpfs lists them. The lock is a leaf (taken under the VFS inode
//! `rwsem`).

use crate::Tmpfs;
use scalevfs_vfs::{Errno, Inode, SysResult};

impl Tmpfs {
    pub(crate) fn xattr_getxattr(&self, inode: &Inode, name: &[u8]) -> SysResult<Vec<u8>> {
        let m = self.xattrs.lock_key(inode.ino);
        let list = m.get(&inode.ino).ok_or(Errno::ENODATA)?;
        let i = find_xattr(list, name).map_err(|_| Errno::ENODATA)?;
        Ok(list[i].1.to_vec())
    }

    pub(crate) fn xattr_setxattr(
        &self,
        inode: &Inode,
        name: &[u8],
        value: &[u8],
        flags: i32,
    ) -> SysResult<()> {
        let mut m = self.xattrs.lock_key(inode.ino);
        let list = m.entry(inode.ino).or_default();
        let fresh = list.is_empty();
        let r = match find_xattr(list, name) {
            Ok(_) if flags & libc::XATTR_CREATE != 0 => Err(Errno::EEXIST),
            Ok(i) => {
                list[i].1 = value.into();
                Ok(())
            }
            Err(_) if flags & libc::XATTR_REPLACE != 0 => Err(Errno::ENODATA),
            Err(i) => {
                list.insert(i, (name.into(), value.into()));
                Ok(())
            }
        };
        if list.is_empty() {
            m.remove(&inode.ino);
        } else if fresh {
            inode.set_flag(HAS_XATTRS, true);
        }
        r
    }

    pub(crate) fn xattr_listxattr(&self, inode: &Inode) -> SysResult<Vec<Vec<u8>>> {
        let m = self.xattrs.lock_key(inode.ino);
        Ok(m.get(&inode.ino)
            .map(|l| l.iter().map(|(n, _)| n.to_vec()).collect())
            .unwrap_or_default())
    }

    pub(crate) fn xattr_removexattr(&self, inode: &Inode, name: &[u8]) -> SysResult<()> {
        let mut m = self.xattrs.lock_key(inode.ino);
        let list = m.get_mut(&inode.ino).ok_or(Errno::ENODATA)?;
        let i = find_xattr(list, name).map_err(|_| Errno::ENODATA)?;
        list.remove(i);
        if list.is_empty() {
            m.remove(&inode.ino);
            inode.set_flag(HAS_XATTRS, false);
        }
        Ok(())
    }
}

/// The inode has an entry in `Tmpfs::xattrs`. Set and cleared under the inode's `xattrs`
/// lock; read Relaxed at eviction, which the last reference's Release/Acquire orders after
/// every change that inode saw.
pub(crate) const HAS_XATTRS: u16 = scalevfs_vfs::inode::I_FS_PRIVATE;

/// One inode's extended attributes, kept sorted by name in *descending* byte order:
/// `listxattr` on Linux's tmpfs reports them so (its `simple_xattrs` red-black tree).
pub(crate) type Xattrs = Vec<(Box<[u8]>, Box<[u8]>)>;

/// Where `name` is in `list` (sorted descending), or where it would go.
fn find_xattr(list: &Xattrs, name: &[u8]) -> Result<usize, usize> {
    list.binary_search_by(|(n, _)| name.cmp(n))
}
