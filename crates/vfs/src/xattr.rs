//! Extended attributes: the generic part of `setxattr`/`getxattr`/`listxattr`/`removexattr`
//! (Linux's `fs/xattr.c` and the commoncap checks every kernel has), in front of the file
//! system's store ([`FileSystem::getxattr`] and friends).
//!
//! ## Names and namespaces
//! A name is at most [`XATTR_NAME_MAX`] bytes and not empty (`ERANGE`), and a value at most
//! [`XATTR_SIZE_MAX`] (`E2BIG`); these are checked before the path is looked up, and for
//! the `f*` calls before the descriptor is (Linux 6.13+ copies the arguments first in
//! every variant). The namespaces are `user.`, `trusted.` and
//! `security.`, stored by the file system; `system.` is for POSIX ACLs, which scalevfs does
//! not have (`EOPNOTSUPP`, as a file system without ACL support answers), and any other
//! prefix is `EOPNOTSUPP`. A name that is only a prefix (`user.`) is `EINVAL`.
//!
//! ## Permission (`xattr_permission` and `cap_inode_setxattr`)
//! * `trusted.*`: root only; others get `EPERM` writing and `ENODATA` reading, and
//!   `listxattr` leaves the names out.
//! * `security.*`: anyone may read; writing and removing need root (`EPERM`).
//! * `user.*`: regular files and directories only (others: `EPERM` writing, `ENODATA`
//!   reading); a sticky directory's only by its owner or root (`EPERM`); then the file's
//!   read or write permission (`EACCES`).
//! * `listxattr` checks nothing beyond the path walk.
//!
//! ## Locking and times
//! `setxattr` and `removexattr` run under the inode's `rwsem` held exclusively, as Linux
//! takes `inode_lock`, and change the inode's ctime (not mtime). `getxattr` and
//! `listxattr` take no VFS lock: the file system's store has its own.

use crate::fs::FileSystem;
use crate::inode::Inode;
use crate::perm::{permission, Cred, MAY_READ, MAY_WRITE};
use crate::{Errno, SysResult};

/// Longest name (`XATTR_NAME_MAX`).
pub const XATTR_NAME_MAX: usize = 255;
/// Largest value (`XATTR_SIZE_MAX`).
pub const XATTR_SIZE_MAX: usize = 65536;
/// Largest `listxattr` result (`XATTR_LIST_MAX`).
pub const XATTR_LIST_MAX: usize = 65536;

const USER: &[u8] = b"user.";
const TRUSTED: &[u8] = b"trusted.";
const SECURITY: &[u8] = b"security.";
const SYSTEM: &[u8] = b"system.";

/// The checks the system calls make on their arguments before the path walk: the flags
/// (`EINVAL`), the name (`ERANGE`), the value's size (`E2BIG`).
pub fn check_set_args(name: &[u8], value_len: usize, flags: i32) -> SysResult<()> {
    if flags & !(libc::XATTR_CREATE | libc::XATTR_REPLACE) != 0 {
        return Err(Errno::EINVAL);
    }
    check_name(name)?;
    if value_len > XATTR_SIZE_MAX {
        return Err(Errno::E2BIG);
    }
    Ok(())
}

/// A name is 1 to 255 bytes (`ERANGE` otherwise), as `strncpy_from_user` into a
/// `XATTR_NAME_MAX + 1` buffer finds it.
pub fn check_name(name: &[u8]) -> SysResult<()> {
    if name.is_empty() || name.len() > XATTR_NAME_MAX || name.contains(&0) {
        return Err(Errno::ERANGE);
    }
    Ok(())
}

#[derive(Copy, Clone, PartialEq, Eq, Debug)]
enum Namespace {
    User,
    Trusted,
    Security,
}

/// The namespace of `name`: `EOPNOTSUPP` for `system.*` (no ACLs) and unknown prefixes,
/// `EINVAL` for a bare prefix.
fn namespace(name: &[u8]) -> SysResult<Namespace> {
    let (ns, prefix) = if name.starts_with(USER) {
        (Namespace::User, USER)
    } else if name.starts_with(TRUSTED) {
        (Namespace::Trusted, TRUSTED)
    } else if name.starts_with(SECURITY) {
        (Namespace::Security, SECURITY)
    } else {
        // `system.*` included: POSIX ACLs are not supported.
        return Err(Errno::EOPNOTSUPP);
    };
    if name.len() == prefix.len() {
        return Err(Errno::EINVAL);
    }
    Ok(ns)
}

/// `xattr_permission` (plus commoncap's `security.*` rule) for `mask` = MAY_READ or
/// MAY_WRITE, before the namespace is resolved, in Linux's order.
fn xattr_permission(inode: &Inode, cred: &Cred, name: &[u8], mask: u32) -> SysResult<()> {
    let write = mask & MAY_WRITE != 0;
    if write && (inode.is_immutable() || inode.is_append()) {
        return Err(Errno::EPERM);
    }
    if name.starts_with(SECURITY) || name.starts_with(SYSTEM) {
        return Ok(());
    }
    if name.starts_with(TRUSTED) {
        if !cred.is_root() {
            return Err(if write { Errno::EPERM } else { Errno::ENODATA });
        }
        return Ok(());
    }
    if name.starts_with(USER) {
        if !inode.is_reg() && !inode.is_dir() {
            return Err(if write { Errno::EPERM } else { Errno::ENODATA });
        }
        if inode.is_dir() && inode.mode() & libc::S_ISVTX != 0 && write && !cred.owns(inode) {
            return Err(Errno::EPERM);
        }
    }
    permission(inode, cred, mask)
}

/// `cap_inode_setxattr`/`cap_inode_removexattr`: `security.*` needs CAP_SYS_ADMIN.
fn cap_check(cred: &Cred, name: &[u8]) -> SysResult<()> {
    if name.starts_with(SECURITY) && !cred.is_root() {
        return Err(Errno::EPERM);
    }
    Ok(())
}

fn fs_of(inode: &Inode) -> &dyn FileSystem {
    inode.fs()
}

/// `vfs_setxattr`: the caller checked the arguments ([`check_set_args`]).
pub fn set(inode: &Inode, cred: &Cred, name: &[u8], value: &[u8], flags: i32) -> SysResult<()> {
    // The mount before the permission checks (`filename_setxattr`).
    let _write = inode.sb().want_write()?;
    xattr_permission(inode, cred, name, MAY_WRITE)?;
    cap_check(cred, name)?;
    namespace(name)?;
    let _w = inode.rwsem.write();
    fs_of(inode).setxattr(inode, name, value, flags)?;
    inode.touch_c();
    Ok(())
}

/// `vfs_getxattr` into `buf`: the value's length; with an empty `buf`, just the length
/// (`ERANGE` if `buf` is too small).
pub fn get(inode: &Inode, cred: &Cred, name: &[u8], buf: &mut [u8]) -> SysResult<usize> {
    check_name(name)?;
    xattr_permission(inode, cred, name, MAY_READ)?;
    namespace(name)?;
    let value = fs_of(inode).getxattr(inode, name)?;
    copy_out(&value, buf)
}

/// `listxattr` into `buf`: the names, each NUL-terminated, `trusted.*` only for root;
/// with an empty `buf`, just the length (`ERANGE` if `buf` is too small). As the system
/// call does, a buffer larger than [`XATTR_LIST_MAX`] counts as that large, so a list
/// longer than that is `E2BIG` for every buffer (a size query still gets its length).
pub fn list(inode: &Inode, cred: &Cred, buf: &mut [u8]) -> SysResult<usize> {
    let max = buf.len().min(XATTR_LIST_MAX);
    let buf = &mut buf[..max];
    let mut out = Vec::new();
    for n in fs_of(inode).listxattr(inode)? {
        if n.starts_with(TRUSTED) && !cred.is_root() {
            continue;
        }
        out.extend_from_slice(&n);
        out.push(0);
    }
    match copy_out(&out, buf) {
        // A list that does not fit even the largest buffer the call takes.
        Err(Errno::ERANGE) if buf.len() >= XATTR_LIST_MAX => Err(Errno::E2BIG),
        r => r,
    }
}

/// `vfs_removexattr`.
pub fn remove(inode: &Inode, cred: &Cred, name: &[u8]) -> SysResult<()> {
    check_name(name)?;
    let _write = inode.sb().want_write()?;
    xattr_permission(inode, cred, name, MAY_WRITE)?;
    cap_check(cred, name)?;
    namespace(name)?;
    let _w = inode.rwsem.write();
    fs_of(inode).removexattr(inode, name)?;
    inode.touch_c();
    Ok(())
}

/// Copies `data` to `buf` as the xattr calls do: an empty `buf` asks for the size.
fn copy_out(data: &[u8], buf: &mut [u8]) -> SysResult<usize> {
    if buf.is_empty() {
        return Ok(data.len());
    }
    let dst = buf.get_mut(..data.len()).ok_or(Errno::ERANGE)?;
    dst.copy_from_slice(data);
    Ok(data.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_namespaces() {
        assert_eq!(check_name(b""), Err(Errno::ERANGE));
        assert_eq!(check_name(&[b'a'; 256]), Err(Errno::ERANGE));
        assert_eq!(check_name(&[b'a'; 255]), Ok(()));
        assert_eq!(namespace(b"user.a"), Ok(Namespace::User));
        assert_eq!(namespace(b"trusted.a"), Ok(Namespace::Trusted));
        assert_eq!(namespace(b"security.a"), Ok(Namespace::Security));
        assert_eq!(namespace(b"user."), Err(Errno::EINVAL));
        assert_eq!(
            namespace(b"system.posix_acl_access"),
            Err(Errno::EOPNOTSUPP)
        );
        assert_eq!(namespace(b"user"), Err(Errno::EOPNOTSUPP));
        assert_eq!(namespace(b"foo.bar"), Err(Errno::EOPNOTSUPP));
        assert_eq!(check_set_args(b"user.a", 65537, 0), Err(Errno::E2BIG));
        assert_eq!(check_set_args(b"user.a", 1, 4), Err(Errno::EINVAL));
        assert_eq!(check_set_args(b"", 1, 4), Err(Errno::EINVAL), "flags first");
    }

    #[test]
    fn copy_out_asks_for_the_size_with_an_empty_buffer() {
        assert_eq!(copy_out(b"abc", &mut []), Ok(3));
        assert_eq!(copy_out(b"abc", &mut [0; 2]), Err(Errno::ERANGE));
        let mut b = [0u8; 4];
        assert_eq!(copy_out(b"abc", &mut b), Ok(3));
        assert_eq!(&b[..3], b"abc");
    }
}
