//! Extended attributes (`user.`, `trusted.`, `security.`): Linux's semantics on top of
//! the table in `xattr_table`, which keeps them beside the inodes (a file without any
//! costs nothing) and lets `getxattr` and `listxattr` run without a lock and without
//! writing shared memory. Listed in descending name order, as Linux's tmpfs lists them.
//! `setxattr` and `removexattr` build the inode's new list from the current one under
//! the table's writer lock (a leaf, taken under the VFS inode `rwsem`).

use crate::xattr_table::{Xattr, XattrList};
use crate::Tmpfs;
use scalevfs_vfs::{Errno, Inode, SysResult};
use std::sync::Arc;

impl Tmpfs {
    pub(crate) fn xattr_getxattr(&self, inode: &Inode, name: &[u8]) -> SysResult<Vec<u8>> {
        self.xattrs.read(inode, |list| {
            let i = find_xattr(list, name).map_err(|_| Errno::ENODATA)?;
            Ok(list[i].value.to_vec())
        })
    }

    pub(crate) fn xattr_setxattr(
        &self,
        inode: &Inode,
        name: &[u8],
        value: &[u8],
        flags: i32,
    ) -> SysResult<()> {
        self.xattrs.update(inode, |list| {
            let attr = || {
                Arc::new(Xattr {
                    name: name.into(),
                    value: value.into(),
                })
            };
            let mut new: XattrList = list.to_vec();
            match find_xattr(list, name) {
                Ok(_) if flags & libc::XATTR_CREATE != 0 => return Err(Errno::EEXIST),
                Ok(i) => new[i] = attr(),
                Err(_) if flags & libc::XATTR_REPLACE != 0 => return Err(Errno::ENODATA),
                Err(i) => new.insert(i, attr()),
            }
            Ok(new)
        })
    }

    pub(crate) fn xattr_listxattr(&self, inode: &Inode) -> SysResult<Vec<Vec<u8>>> {
        Ok(self
            .xattrs
            .read(inode, |list| list.iter().map(|a| a.name.to_vec()).collect()))
    }

    pub(crate) fn xattr_removexattr(&self, inode: &Inode, name: &[u8]) -> SysResult<()> {
        self.xattrs.update(inode, |list| {
            let i = find_xattr(list, name).map_err(|_| Errno::ENODATA)?;
            let mut new: XattrList = list.to_vec();
            new.remove(i);
            Ok(new)
        })
    }
}

/// The inode has attributes in `Tmpfs::xattrs`. Set and cleared under the table's writer
/// lock; read Relaxed by readers (a reader that misses a concurrent first attribute ran
/// before it) and at eviction, which the last reference's Release/Acquire orders after
/// every change that inode saw.
pub(crate) const HAS_XATTRS: u16 = scalevfs_vfs::inode::I_FS_PRIVATE;

/// Where `name` is in `list` (sorted descending), or where it would go.
fn find_xattr(list: &[Arc<Xattr>], name: &[u8]) -> Result<usize, usize> {
    list.binary_search_by(|a| name.cmp(&a.name))
}
