//! Cred and permission checks (Linux's `generic_permission`, `may_delete`, sticky
//! directories, set-id bit rules). Lock-free: they read the inode's atomic attributes.

use crate::inode::Inode;
use crate::{Errno, SysResult};

/// Permission to execute a file or search a directory.
pub const MAY_EXEC: u32 = 1;
/// Permission to write.
pub const MAY_WRITE: u32 = 2;
/// Permission to read.
pub const MAY_READ: u32 = 4;

/// The identity permission checks and the ownership of new files use: a process's
/// file-system user and group ids and its supplementary groups (what Linux's
/// `current_fsuid()`, `current_fsgid()` and `in_group_p` read). uid 0 has every
/// file-system capability; other uids have none. A process's full credentials (real,
/// effective, saved and fs ids) are `scalevfs::Credentials`, which derives this.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cred {
    /// The file-system user id.
    pub uid: u32,
    /// The file-system group id.
    pub gid: u32,
    /// Supplementary groups.
    pub groups: Vec<u32>,
}

impl Cred {
    /// uid 0, gid 0, no supplementary groups: every capability.
    pub fn root() -> Cred {
        Cred::user(0, 0)
    }
    /// `uid`/`gid` with no supplementary groups.
    pub fn user(uid: u32, gid: u32) -> Cred {
        Cred {
            uid,
            gid,
            groups: Vec::new(),
        }
    }
    /// Root has every capability (DAC override, FOWNER, FSETID, CHOWN).
    pub fn is_root(&self) -> bool {
        self.uid == 0
    }
    /// Whether `gid` is the primary group or one of the supplementary groups.
    pub fn in_group(&self, gid: u32) -> bool {
        self.gid == gid || self.groups.contains(&gid)
    }
    /// `inode_owner_or_capable`.
    pub fn owns(&self, inode: &Inode) -> bool {
        self.is_root() || self.uid == inode.uid()
    }
}

/// `inode_permission`: `mask` is a combination of MAY_READ/WRITE/EXEC. Nobody may write
/// a file, directory or symlink on a read-only mount (`EROFS`, `sb_permission`; devices,
/// FIFOs and sockets stay writable) or an immutable inode (`EPERM`); then
/// `generic_permission`.
pub fn permission(inode: &Inode, cred: &Cred, mask: u32) -> SysResult<()> {
    if mask & MAY_WRITE != 0 {
        if inode.sb().is_read_only()
            && matches!(
                inode.file_type(),
                libc::S_IFREG | libc::S_IFDIR | libc::S_IFLNK
            )
        {
            return Err(Errno::EROFS);
        }
        if inode.is_immutable() {
            return Err(Errno::EPERM);
        }
    }
    let mode = inode.mode();
    if cred.is_root() {
        // CAP_DAC_OVERRIDE: read and write always; exec if a directory or any x bit is set.
        if mask & MAY_EXEC == 0 || inode.is_dir() || mode & 0o111 != 0 {
            return Ok(());
        }
        return Err(Errno::EACCES);
    }
    let bits = if cred.uid == inode.uid() {
        mode >> 6
    } else if cred.in_group(inode.gid()) {
        mode >> 3
    } else {
        mode
    } & 7;
    if bits & mask == mask {
        Ok(())
    } else {
        Err(Errno::EACCES)
    }
}

/// `notify_change`'s rule: the mode, owner and explicit times of an append-only or
/// immutable inode do not change (`EPERM`).
pub fn may_setattr(inode: &Inode) -> SysResult<()> {
    if inode.is_append() || inode.is_immutable() {
        return Err(Errno::EPERM);
    }
    Ok(())
}

/// `truncate(2)`'s and `open(O_TRUNC)`'s rule after the write permission check: an
/// append-only or immutable file keeps its size (`EPERM`). (`ftruncate` on a descriptor
/// opened for writing checks append-only only.)
pub fn may_truncate(inode: &Inode) -> SysResult<()> {
    if inode.is_append() || inode.is_immutable() {
        return Err(Errno::EPERM);
    }
    Ok(())
}

/// `ftruncate`'s rule on a descriptor opened for writing: an append-only file keeps its
/// size (`EPERM`); an immutable one opened before it became immutable does not.
pub fn may_ftruncate(inode: &Inode) -> SysResult<()> {
    if inode.is_append() {
        return Err(Errno::EPERM);
    }
    Ok(())
}

/// The sticky-directory rule: in a sticky directory only the file's owner, the
/// directory's owner or root may remove or rename an entry.
pub fn check_sticky(dir: &Inode, inode: &Inode, cred: &Cred) -> SysResult<()> {
    if dir.mode() & libc::S_ISVTX == 0
        || cred.is_root()
        || cred.uid == inode.uid()
        || cred.uid == dir.uid()
    {
        Ok(())
    } else {
        Err(Errno::EPERM)
    }
}

/// `may_create` on the directory: not deleted, write and search permission.
pub fn may_create(dir: &Inode, cred: &Cred) -> SysResult<()> {
    if dir.nlink() == 0 {
        return Err(Errno::ENOENT);
    }
    permission(dir, cred, MAY_WRITE | MAY_EXEC)
}

/// `may_delete` of `victim` from `dir`; `isdir` is what the caller wants to remove.
/// Append-only directories keep their entries, append-only and immutable inodes their
/// names (`EPERM`).
pub fn may_delete(dir: &Inode, victim: &Inode, isdir: bool, cred: &Cred) -> SysResult<()> {
    permission(dir, cred, MAY_WRITE | MAY_EXEC)?;
    if dir.is_append() {
        return Err(Errno::EPERM);
    }
    check_sticky(dir, victim, cred)?;
    if victim.is_append() || victim.is_immutable() {
        return Err(Errno::EPERM);
    }
    if isdir {
        if !victim.is_dir() {
            return Err(Errno::ENOTDIR);
        }
    } else if victim.is_dir() {
        return Err(Errno::EISDIR);
    }
    if dir.nlink() == 0 {
        return Err(Errno::ENOENT);
    }
    Ok(())
}

/// The set-id bits a write or truncate by `cred` must clear (`should_remove_suid`): setuid,
/// and setgid if group-executable, unless the writer is root (CAP_FSETID).
pub fn kill_suid_on_write(inode: &Inode, cred: &Cred) {
    let mode = inode.mode();
    if cred.is_root() || !inode.is_reg() {
        return;
    }
    let mut kill = 0;
    if mode & libc::S_ISUID != 0 {
        kill |= libc::S_ISUID;
    }
    if mode & libc::S_ISGID != 0 && mode & libc::S_IXGRP != 0 {
        kill |= libc::S_ISGID;
    }
    if kill != 0 {
        inode.set_perm(mode & 0o7777 & !kill);
    }
}

/// `may_linkat` with `fs.protected_hardlinks = 1` (the default on current distributions):
/// a non-owner may only link a regular, non-set-id file it can read and write.
pub fn may_link(inode: &Inode, cred: &Cred) -> SysResult<()> {
    if cred.owns(inode) {
        return Ok(());
    }
    let mode = inode.mode();
    let safe = inode.is_reg()
        && mode & libc::S_ISUID == 0
        && !(mode & libc::S_ISGID != 0 && mode & libc::S_IXGRP != 0)
        && permission(inode, cred, MAY_READ | MAY_WRITE).is_ok();
    if safe {
        Ok(())
    } else {
        Err(Errno::EPERM)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inode::{NewInode, SuperBlock};
    use crate::testfs::TestFs;
    use scalevfs_primitives::Locking;
    use std::sync::Arc;

    fn sb() -> Arc<SuperBlock> {
        Arc::new(SuperBlock::new(
            9,
            Arc::new(TestFs::default()),
            Locking::Scalable,
        ))
    }

    fn inode(sb: &SuperBlock, ino: u64, mode: u32, uid: u32, gid: u32) -> crate::InodeRef {
        sb.new_inode(NewInode {
            ino,
            mode,
            uid,
            gid,
            nlink: 1,
            rdev: 0,
            private: Box::new(()),
        })
    }

    #[test]
    fn owner_group_other_and_root() {
        let sb = sb();
        let f = inode(&sb, 1, libc::S_IFREG | 0o640, 10, 20);
        let owner = Cred {
            uid: 10,
            gid: 99,
            groups: vec![],
        };
        let member = Cred {
            uid: 11,
            gid: 99,
            groups: vec![20],
        };
        let other = Cred {
            uid: 12,
            gid: 99,
            groups: vec![],
        };
        assert!(permission(&f, &owner, MAY_READ | MAY_WRITE).is_ok());
        assert_eq!(permission(&f, &owner, MAY_EXEC), Err(Errno::EACCES));
        assert!(permission(&f, &member, MAY_READ).is_ok());
        assert_eq!(permission(&f, &member, MAY_WRITE), Err(Errno::EACCES));
        assert_eq!(permission(&f, &other, MAY_READ), Err(Errno::EACCES));
        // The owner class applies even when it grants less than others.
        f.set_perm(0o077);
        assert_eq!(permission(&f, &owner, MAY_READ), Err(Errno::EACCES));
        // Root: read/write always; exec only with some x bit (or on a directory).
        let root = Cred::root();
        f.set_perm(0o000);
        assert!(permission(&f, &root, MAY_READ | MAY_WRITE).is_ok());
        assert_eq!(permission(&f, &root, MAY_EXEC), Err(Errno::EACCES));
        f.set_perm(0o001);
        assert!(permission(&f, &root, MAY_EXEC).is_ok());
        let d = inode(&sb, 2, libc::S_IFDIR, 10, 20);
        assert!(permission(&d, &root, MAY_EXEC).is_ok());
    }

    #[test]
    fn sticky_delete_and_suid_rules() {
        let sb = sb();
        let dir = inode(&sb, 1, libc::S_IFDIR | 0o1777, 0, 0);
        let theirs = inode(&sb, 2, libc::S_IFREG | 0o666, 10, 10);
        let me = Cred {
            uid: 11,
            gid: 11,
            groups: vec![],
        };
        assert_eq!(may_delete(&dir, &theirs, false, &me), Err(Errno::EPERM));
        assert_eq!(
            may_delete(&dir, &theirs, true, &Cred::root()),
            Err(Errno::ENOTDIR)
        );
        let sub = inode(&sb, 3, libc::S_IFDIR | 0o777, 11, 11);
        assert_eq!(may_delete(&dir, &sub, false, &me), Err(Errno::EISDIR));
        assert!(may_delete(&dir, &sub, true, &me).is_ok());
        let exe = inode(&sb, 4, libc::S_IFREG | 0o6755, 11, 11);
        kill_suid_on_write(&exe, &me);
        assert_eq!(exe.mode() & 0o7777, 0o0755);
        let keep = inode(&sb, 5, libc::S_IFREG | 0o2745, 11, 11);
        kill_suid_on_write(&keep, &me);
        assert_eq!(
            keep.mode() & 0o7777,
            0o2745,
            "setgid without group exec stays"
        );
        assert_eq!(
            may_link(&theirs, &me),
            Ok(()),
            "regular, readable and writable"
        );
        theirs.set_perm(0o644);
        assert_eq!(may_link(&theirs, &me), Err(Errno::EPERM));
    }
}
