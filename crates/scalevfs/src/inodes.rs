//! The inode-handle API on [`Vfs`]: what a FUSE server needs besides the operations by
//! inode of [`scalevfs_vfs::handle`] (reached through [`Vfs::core`]): the lock context of
//! a node for the [`LockManager`](scalevfs_vfs::locks::LockManager) with owners that are
//! not a [`Process`](crate::Process), `statfs`, and the live-inode count.
//!
//! ```
//! use scalevfs::frontend::Owner;
//! use scalevfs::{Vfs, VfsOptions};
//! let vfs = Vfs::new(VfsOptions::default());
//! let core = vfs.core();
//! let root = core.root_node();
//! let me = Owner { uid: 1000, gid: 1000 };
//! let (node, file) = core.node_create(&root, b"f", 0o644, libc::O_RDWR, me).unwrap();
//! assert_eq!(core.file_write_at(&file, b"hi", 0).unwrap(), 2);
//! assert_eq!(node.stat().uid, 1000);
//! assert_eq!(core.node_lookup(&root, b"f").unwrap().ino(), node.ino());
//! ```

use scalevfs_vfs::locks::FileLockContext;
use scalevfs_vfs::Statfs;

pub use scalevfs_vfs::handle::{Node, Owner, SetAttr, SetTime};

use crate::{locking, Vfs};

impl Vfs {
    #[doc(hidden)]
    /// The lock context of `node`'s inode, created on first use (see [`crate::locking`]).
    pub fn lock_context<'a>(&self, node: &'a Node) -> &'a FileLockContext {
        locking::context(self.locks(), node.inode())
    }

    /// `statfs` of the root file system (the file system's own `statfs`: for tmpfs, its
    /// limits, or half the RAM and as many inodes as blocks without them).
    pub fn statfs(&self) -> Statfs {
        let root = self.core().root_node();
        let sb = root.inode().sb();
        sb.fs.statfs(sb)
    }
}

#[cfg(test)]
mod tests;
