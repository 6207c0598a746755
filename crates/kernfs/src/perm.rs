//! Credentials and Linux's `generic_permission` for kernfs nodes.
//!
//! Lock-free in the scalable design: a node's mode, uid and gid are separate atomics read
//! with `Relaxed` loads, as Linux's RCU path walk reads `i_mode`/`i_uid`/`i_gid` with
//! `READ_ONCE`. A concurrent chmod/chown may be seen half done (new mode, old owner); Linux
//! has the same window. The legacy design takes the tree rwsem for reading around the check,
//! as `kernfs_iop_permission` did before the hashed-lock patches (it shows up in their profile).

use scalevfs_vfs::{Errno, SysResult};

use crate::node::{KernfsNode, NodeKind};

/// Read permission (`MAY_READ`).
pub const MAY_READ: u32 = 4;
/// Write permission (`MAY_WRITE`).
pub const MAY_WRITE: u32 = 2;
/// Execute / search permission (`MAY_EXEC`).
pub const MAY_EXEC: u32 = 1;

/// Who is asking: fsuid, fsgid and supplementary groups (borrowed, so a check allocates
/// nothing). uid 0 has every capability (DAC override, FOWNER, CHOWN), as root does.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Creds<'a> {
    /// File-system user id.
    pub uid: u32,
    /// File-system group id.
    pub gid: u32,
    /// Supplementary groups.
    pub groups: &'a [u32],
}

impl Creds<'static> {
    /// uid 0, gid 0, no supplementary groups.
    pub const ROOT: Creds<'static> = Creds {
        uid: 0,
        gid: 0,
        groups: &[],
    };
}

impl<'a> Creds<'a> {
    /// A non-root caller.
    pub fn new(uid: u32, gid: u32, groups: &'a [u32]) -> Self {
        Creds { uid, gid, groups }
    }

    /// Whether this is root (all capabilities).
    pub fn is_root(&self) -> bool {
        self.uid == 0
    }

    /// `in_group_p`: the primary or a supplementary group.
    pub fn in_group(&self, gid: u32) -> bool {
        self.gid == gid || self.groups.contains(&gid)
    }
}

/// `generic_permission` on `(mode, uid, gid)` of a node of kind `kind`. `mask` is a
/// combination of [`MAY_READ`], [`MAY_WRITE`], [`MAY_EXEC`]. Exactly one class (owner,
/// group or other) decides, even when it is more restrictive than another. Root may read
/// and write anything, search any directory, and execute a file with any `x` bit.
pub fn check_mode(
    kind: NodeKind,
    mode: u32,
    uid: u32,
    gid: u32,
    creds: &Creds<'_>,
    mask: u32,
) -> SysResult<()> {
    let mask = mask & (MAY_READ | MAY_WRITE | MAY_EXEC);
    if creds.is_root() {
        if mask & MAY_EXEC == 0 || kind == NodeKind::Dir || mode & 0o111 != 0 {
            return Ok(());
        }
        return Err(Errno::EACCES);
    }
    let bits = if creds.uid == uid {
        mode >> 6
    } else if creds.in_group(gid) {
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

/// [`check_mode`] on a node's current attributes (see the module docs for the locking).
pub(crate) fn node_permission(node: &KernfsNode, creds: &Creds<'_>, mask: u32) -> SysResult<()> {
    let (mode, uid, gid) = node.mode_uid_gid();
    check_mode(node.kind(), mode, uid, gid, creds, mask)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_and_root() {
        let u = Creds::new(1000, 100, &[200]);
        let f = NodeKind::File;
        // Owner class decides even when group/other would allow more.
        assert_eq!(
            check_mode(f, 0o077, 1000, 100, &u, MAY_READ),
            Err(Errno::EACCES)
        );
        assert_eq!(
            check_mode(f, 0o640, 1000, 5, &u, MAY_READ | MAY_WRITE),
            Ok(())
        );
        // Supplementary group.
        assert_eq!(check_mode(f, 0o040, 1, 200, &u, MAY_READ), Ok(()));
        assert_eq!(
            check_mode(f, 0o040, 1, 200, &u, MAY_WRITE),
            Err(Errno::EACCES)
        );
        // Other.
        assert_eq!(check_mode(f, 0o004, 1, 2, &u, MAY_READ), Ok(()));
        assert_eq!(check_mode(f, 0o440, 1, 2, &u, MAY_READ), Err(Errno::EACCES));
        // Root: read/write always, exec only with an x bit, search any dir.
        let r = Creds::ROOT;
        assert_eq!(check_mode(f, 0, 1, 1, &r, MAY_READ | MAY_WRITE), Ok(()));
        assert_eq!(check_mode(f, 0o644, 1, 1, &r, MAY_EXEC), Err(Errno::EACCES));
        assert_eq!(check_mode(f, 0o010, 1, 1, &r, MAY_EXEC), Ok(()));
        assert_eq!(check_mode(NodeKind::Dir, 0, 1, 1, &r, MAY_EXEC), Ok(()));
        assert!(r.is_root() && !u.is_root() && u.in_group(100) && !u.in_group(7));
    }
}
