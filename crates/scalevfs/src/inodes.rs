//! The inode-handle API on [`Vfs`]: what a FUSE server needs besides the operations by
//! inode of [`scalevfs_vfs::handle`] (reached through [`Vfs::core`]): the lock context of
//! a node for the [`LockManager`](scalevfs_vfs::locks::LockManager) with owners that are
//! not a [`Process`](crate::Process), `statfs`, and the live-inode count.
//!
//! ```
//! use scalevfs::inodes::Owner;
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

pub use scalevfs_vfs::handle::{Node, Owner, SetAttr, SetTime};

use crate::{locking, Vfs};

/// `struct statfs` of the root tmpfs, in 4 KiB blocks.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct StatFs {
    pub bsize: u32,
    pub blocks: u64,
    pub bfree: u64,
    pub bavail: u64,
    pub files: u64,
    pub ffree: u64,
    pub namelen: u32,
}

/// tmpfs's default size without `size=`: half of the RAM (Linux's `shmem_default_max_blocks`).
fn half_of_ram() -> u64 {
    // SAFETY: `sysinfo` fills the zeroed struct we pass.
    let mut si: libc::sysinfo = unsafe { std::mem::zeroed() };
    // SAFETY: as above; a live, writable struct.
    if unsafe { libc::sysinfo(&mut si) } != 0 {
        return 1 << 30;
    }
    (si.totalram as u64).saturating_mul(si.mem_unit as u64) / 2
}

impl Vfs {
    /// The lock context of `node`'s inode, created on first use (see [`crate::locking`]).
    pub fn lock_context<'a>(&self, node: &'a Node) -> &'a FileLockContext {
        locking::context(self.locks(), node.inode())
    }

    /// `statfs` of the root file system: size and inode limits (tmpfs defaults without
    /// them: half the RAM; as many inodes as blocks), blocks and inodes in use.
    pub fn statfs(&self) -> StatFs {
        const BSIZE: u64 = 4096;
        let root = self.core().root_node();
        let sb = root.inode().sb();
        let mut used = 0u64;
        sb.for_each_inode(|i| used += sb.fs.blocks(i));
        let used = used.div_ceil(BSIZE / 512);
        let blocks = self.options().size_limit.unwrap_or_else(half_of_ram) / BSIZE;
        let files = self.options().inode_limit.unwrap_or(blocks);
        let free = blocks.saturating_sub(used);
        StatFs {
            bsize: BSIZE as u32,
            blocks,
            bfree: free,
            bavail: free,
            files,
            ffree: files.saturating_sub(sb.inode_count() as u64),
            namelen: 255,
        }
    }
}

#[cfg(test)]
mod tests;
