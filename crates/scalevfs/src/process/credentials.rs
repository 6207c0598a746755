//! A process's identity ([`Credentials`]: real, effective, saved and file-system user and
//! group ids, supplementary groups) and the system calls that change it (`setresuid`,
//! `setresgid`, `setuid`, `setgid`, `setfsuid`, `setfsgid`, `setgroups`) with Linux's
//! rules (`kernel/sys.c`, `kernel/groups.c`).
//!
//! ## Privilege
//! Capabilities follow the ids, as they do for a root-owned Linux process without
//! `SECBIT_KEEP_CAPS` or file capabilities (`cap_emulate_setxuid`, `cap_task_fix_setuid`):
//! * the capabilities outside the file system (`CAP_SETUID`, `CAP_SETGID`,
//!   `CAP_SYS_ADMIN` for `mount`, ...) are held while the effective uid is 0;
//! * the file-system capabilities (`CAP_DAC_OVERRIDE`, `CAP_FOWNER`, `CAP_CHOWN`,
//!   `CAP_FSETID`, ...) are held while the file-system uid is 0: permission checks see
//!   only the fs ids and the groups (see [`Credentials::fs_cred`]).
//!
//! A process whose real or saved uid is still 0 may take effective uid 0 back (it is one
//! of its own ids); once none of real, effective and saved is 0 that way is closed, as
//! Linux clears the permitted set then.
//!
//! ## Concurrency
//! The calls that change credentials take `&mut Process`: no other thread is inside a
//! call of this process while they run, so every other call reads the credentials
//! without synchronization. (Linux changes one thread's credentials and glibc repeats
//! the change on every thread; an embedder forwarding a guest's `setuid` holds the
//! process exclusively for that moment.)

use scalevfs_vfs::{Cred, Errno, SysResult};

use super::Process;

/// `NGROUPS_MAX`: the most supplementary groups `setgroups` takes.
pub const NGROUPS_MAX: usize = 65536;

/// Who a process is: the four user ids and four group ids of Linux's `struct cred`
/// (named as there: `uid` is the real uid) and the supplementary groups.
///
/// New files are owned by the fs ids and permission checks use the fs ids and the
/// groups; the effective uid decides the other privileges (see the module docs).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Credentials {
    /// Real user id.
    pub uid: u32,
    /// Effective user id.
    pub euid: u32,
    /// Saved set-user-id.
    pub suid: u32,
    /// File-system user id (follows `euid` unless `setfsuid` changed it).
    pub fsuid: u32,
    /// Real group id.
    pub gid: u32,
    /// Effective group id.
    pub egid: u32,
    /// Saved set-group-id.
    pub sgid: u32,
    /// File-system group id (follows `egid` unless `setfsgid` changed it).
    pub fsgid: u32,
    /// Supplementary groups, sorted (as Linux's `groups_sort` leaves them).
    pub groups: Vec<u32>,
}

/// `(uid_t)-1`: "leave this id unchanged" in the `setres*id` calls.
pub const UNCHANGED: u32 = u32::MAX;

impl Credentials {
    /// Root: every id 0, no supplementary groups.
    pub fn root() -> Credentials {
        Credentials::user(0, 0)
    }
    /// `uid` and `gid` as all four user and group ids, no supplementary groups.
    pub fn user(uid: u32, gid: u32) -> Credentials {
        Credentials {
            uid,
            euid: uid,
            suid: uid,
            fsuid: uid,
            gid,
            egid: gid,
            sgid: gid,
            fsgid: gid,
            groups: Vec::new(),
        }
    }
    /// These credentials with `groups` as the supplementary groups.
    pub fn with_groups(mut self, groups: impl Into<Vec<u32>>) -> Credentials {
        self.groups = groups.into();
        self.groups.sort_unstable();
        self
    }
    /// Whether the process holds the capabilities outside the file system
    /// (`CAP_SETUID`, `CAP_SETGID`, `CAP_SYS_ADMIN`, ...): effective uid 0.
    pub fn is_privileged(&self) -> bool {
        self.euid == 0
    }
    /// What permission checks see: the fs ids and the groups.
    pub fn fs_cred(&self) -> Cred {
        Cred {
            uid: self.fsuid,
            gid: self.fsgid,
            groups: self.groups.clone(),
        }
    }
    /// What `faccessat` without `AT_EACCESS` checks with: the real ids in place of the fs
    /// ids (Linux's `access_override_creds`).
    pub fn access_cred(&self) -> Cred {
        Cred {
            uid: self.uid,
            gid: self.gid,
            groups: self.groups.clone(),
        }
    }
    /// The user ids, for the rules [`Ids`] applies.
    fn uids(&mut self) -> Ids<'_> {
        Ids {
            real: &mut self.uid,
            effective: &mut self.euid,
            saved: &mut self.suid,
            fs: &mut self.fsuid,
        }
    }
    /// The group ids, for the rules [`Ids`] applies.
    fn gids(&mut self) -> Ids<'_> {
        Ids {
            real: &mut self.gid,
            effective: &mut self.egid,
            saved: &mut self.sgid,
            fs: &mut self.fsgid,
        }
    }
}

/// The four user ids or the four group ids: Linux's rules are the same for both
/// (`CAP_SETUID` and `CAP_SETGID` alike are held with effective uid 0).
struct Ids<'a> {
    real: &'a mut u32,
    effective: &'a mut u32,
    saved: &'a mut u32,
    fs: &'a mut u32,
}

impl Ids<'_> {
    /// Whether `id` is the real, effective or saved id.
    fn holds(&self, id: u32) -> bool {
        id == *self.real || id == *self.effective || id == *self.saved
    }
    /// `setres*id`: without privilege each id given must be one of the current three.
    /// The fs id follows the effective one. Whether anything changed: a call that changes
    /// nothing (the fs id included) returns before touching anything, as Linux's does.
    fn set_res(self, new: [u32; 3], privileged: bool) -> SysResult<bool> {
        let given = |n: u32, cur: u32| n == UNCHANGED || n == cur;
        if given(new[0], *self.real)
            && (new[1] == UNCHANGED || (new[1] == *self.effective && new[1] == *self.fs))
            && given(new[2], *self.saved)
        {
            return Ok(false);
        }
        if !privileged && new.iter().any(|&n| n != UNCHANGED && !self.holds(n)) {
            return Err(Errno::EPERM);
        }
        for (id, n) in [&mut *self.real, &mut *self.effective, &mut *self.saved]
            .into_iter()
            .zip(new)
        {
            if n != UNCHANGED {
                *id = n;
            }
        }
        *self.fs = *self.effective;
        Ok(true)
    }
    /// `set*id`: with privilege all four ids; without, the effective and fs ids, to the
    /// real or saved id (`EPERM` otherwise). `-1` is `EINVAL`.
    fn set_one(self, id: u32, privileged: bool) -> SysResult<()> {
        if id == UNCHANGED {
            return Err(Errno::EINVAL);
        }
        if privileged {
            *self.real = id;
            *self.saved = id;
        } else if id != *self.real && id != *self.saved {
            return Err(Errno::EPERM);
        }
        *self.effective = id;
        *self.fs = id;
        Ok(())
    }
    /// `setfs*id`: sets the fs id if `id` is one of the four ids or with privilege (not
    /// for `-1`); returns the previous fs id either way.
    fn set_fs(self, id: u32, privileged: bool) -> u32 {
        let old = *self.fs;
        if id != UNCHANGED && (self.holds(id) || id == old || privileged) {
            *self.fs = id;
        }
        old
    }
}

impl Process {
    /// The process's credentials.
    pub fn credentials(&self) -> &Credentials {
        &self.creds
    }
    /// Replaces every credential at once (what an embedder that knows the guest's identity
    /// does; no privilege check).
    pub fn set_credentials(&mut self, mut creds: Credentials) {
        creds.groups.sort_unstable();
        self.commit(creds);
    }
    fn commit(&mut self, creds: Credentials) {
        self.cred = creds.fs_cred();
        self.creds = creds;
    }
    /// `getresuid(2)`: (real, effective, saved).
    pub fn getresuid(&self) -> (u32, u32, u32) {
        (self.creds.uid, self.creds.euid, self.creds.suid)
    }
    /// `getresgid(2)`: (real, effective, saved).
    pub fn getresgid(&self) -> (u32, u32, u32) {
        (self.creds.gid, self.creds.egid, self.creds.sgid)
    }
    /// `getuid(2)`, the real uid.
    pub fn getuid(&self) -> u32 {
        self.creds.uid
    }
    /// `geteuid(2)`.
    pub fn geteuid(&self) -> u32 {
        self.creds.euid
    }
    /// `getgid(2)`, the real gid.
    pub fn getgid(&self) -> u32 {
        self.creds.gid
    }
    /// `getegid(2)`.
    pub fn getegid(&self) -> u32 {
        self.creds.egid
    }
    /// `getgroups(2)`: the supplementary groups, sorted.
    pub fn getgroups(&self) -> &[u32] {
        &self.creds.groups
    }
    /// `setresuid(2)`: [`UNCHANGED`] (`-1`) leaves an id as it is. Without privilege each
    /// id given must be the current real, effective or saved uid (`EPERM`). The fs uid
    /// follows the new effective uid, unless the call changes nothing (then it changes
    /// nothing at all, as Linux's returns early).
    pub fn setresuid(&mut self, ruid: u32, euid: u32, suid: u32) -> SysResult<()> {
        let mut c = self.creds.clone();
        let privileged = c.is_privileged();
        if c.uids().set_res([ruid, euid, suid], privileged)? {
            self.commit(c);
        }
        Ok(())
    }
    /// `setresgid(2)`: as [`setresuid`](Self::setresuid) for the group ids (the privilege
    /// is `CAP_SETGID`, held with effective uid 0); the fs gid follows the effective gid.
    pub fn setresgid(&mut self, rgid: u32, egid: u32, sgid: u32) -> SysResult<()> {
        let mut c = self.creds.clone();
        let privileged = c.is_privileged();
        if c.gids().set_res([rgid, egid, sgid], privileged)? {
            self.commit(c);
        }
        Ok(())
    }
    /// `setuid(2)`: with privilege, sets the real, effective, saved and fs uid; without,
    /// only the effective and fs uid, to the real or saved uid (`EPERM` otherwise).
    /// `-1` is `EINVAL`.
    pub fn setuid(&mut self, uid: u32) -> SysResult<()> {
        let mut c = self.creds.clone();
        let privileged = c.is_privileged();
        c.uids().set_one(uid, privileged)?;
        self.commit(c);
        Ok(())
    }
    /// `setgid(2)`: as [`setuid`](Self::setuid) for the group ids.
    pub fn setgid(&mut self, gid: u32) -> SysResult<()> {
        let mut c = self.creds.clone();
        let privileged = c.is_privileged();
        c.gids().set_one(gid, privileged)?;
        self.commit(c);
        Ok(())
    }
    /// `setfsuid(2)`: returns the previous fs uid, and sets it if `uid` is the real,
    /// effective, saved or current fs uid, or with privilege; otherwise (and for `-1`)
    /// changes nothing. It never fails, as Linux's does not.
    pub fn setfsuid(&mut self, uid: u32) -> u32 {
        let mut c = self.creds.clone();
        let privileged = c.is_privileged();
        let old = c.uids().set_fs(uid, privileged);
        self.commit(c);
        old
    }
    /// `setfsgid(2)`: as [`setfsuid`](Self::setfsuid) for the fs gid.
    pub fn setfsgid(&mut self, gid: u32) -> u32 {
        let mut c = self.creds.clone();
        let privileged = c.is_privileged();
        let old = c.gids().set_fs(gid, privileged);
        self.commit(c);
        old
    }
    /// `setgroups(2)`: `EINVAL` for more than [`NGROUPS_MAX`] groups, then `EPERM` without
    /// privilege (`CAP_SETGID`); the list is kept sorted, duplicates included.
    pub fn setgroups(&mut self, groups: &[u32]) -> SysResult<()> {
        if groups.len() > NGROUPS_MAX {
            return Err(Errno::EINVAL);
        }
        if !self.creds.is_privileged() {
            return Err(Errno::EPERM);
        }
        let c = self.creds.clone().with_groups(groups);
        self.commit(c);
        Ok(())
    }
}
