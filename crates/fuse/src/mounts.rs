//! Finding and removing *our* mount, never "whatever is mounted at this path".
//!
//! A directory can carry a stack of mounts: a user's tmpfs, our FUSE mount on top of it,
//! perhaps another scalevfs mount on top of ours. `umount2(path)` removes whichever is on
//! top *when it runs*, so an unmount by path after our mount is already gone (detached from
//! outside, or by `scalevfs umount`) removes the mount beneath it, and the user's files
//! with it. So every unmount here goes by identity:
//!
//! 1. Right after mounting, [`TopMount::open`] pins the mount on top of the mount point
//!    with an `O_PATH` descriptor and reads its mount id from `/proc/self/fdinfo` (the
//!    VFS answers that: no request reaches any file system). That id, and the device
//!    number from mountinfo, identify our mount for its whole life: mount ids are not
//!    reused while the mount exists.
//! 2. To unmount, [`detach_ours`] pins the mount on top again and detaches it only if its
//!    id is ours, through the pinned descriptor (`umount2("/proc/self/fd/N")`), so that the
//!    check and the unmount concern the same mount even if another mount lands on the
//!    directory between the two. A non-root caller cannot `umount2`; it goes through the
//!    setuid `fusermount3 -u -z PATH`, which resolves the path again: the check just before
//!    it leaves a window of microseconds (documented in the README).
//! 3. A mount that is not on top any more (gone, or covered by a later mount) is left
//!    alone: [`Detach::Gone`] or [`Detach::Covered`].
//!
//! Nothing here holds a descriptor on the mount between these calls: a held reference
//! would make a plain `umount PATH` from outside fail with `EBUSY`.

use std::ffi::CString;
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// One line of `/proc/self/mountinfo` that is a FUSE mount (`proc_pid_mountinfo(5)`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MountEntry {
    /// Field 1: the mount id.
    pub id: u64,
    /// Field 3: the device's major and minor numbers. For FUSE the minor number is the
    /// connection's name under `/sys/fs/fuse/connections`.
    pub dev: (u32, u32),
    /// Field 5, unescaped.
    pub mount_point: Vec<u8>,
    /// Served by scalevfs: fstype `fuse.scalevfs*`, or plain `fuse` with a `scalevfs*`
    /// source (a server that sets only `fsname=`).
    pub scalevfs: bool,
}

/// The FUSE mounts in this mount namespace, bottom first.
pub fn fuse_mounts() -> io::Result<Vec<MountEntry>> {
    Ok(parse_mountinfo(&std::fs::read_to_string(
        "/proc/self/mountinfo",
    )?))
}

/// The FUSE mounts in a mountinfo text (the optional fields end with `-`, then fstype
/// and source). fusectl and fuseblk are not FUSE mounts in this sense.
pub fn parse_mountinfo(text: &str) -> Vec<MountEntry> {
    text.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            let sep = f.iter().position(|x| *x == "-")?;
            let (fstype, source) = (*f.get(sep + 1)?, *f.get(sep + 2)?);
            if fstype != "fuse" && !fstype.starts_with("fuse.") {
                return None;
            }
            let (major, minor) = f.get(2)?.split_once(':')?;
            Some(MountEntry {
                id: f.first()?.parse().ok()?,
                dev: (major.parse().ok()?, minor.parse().ok()?),
                mount_point: unescape(f.get(4)?),
                scalevfs: fstype.starts_with("fuse.scalevfs")
                    || (fstype == "fuse" && source.starts_with("scalevfs")),
            })
        })
        .collect()
}

/// mountinfo writes space, tab, newline and backslash as `\ooo` octal escapes.
pub(crate) fn unescape(s: &str) -> Vec<u8> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b.get(i + 1..i + 4) {
            Some(d) if b[i] == b'\\' && d.iter().all(|c| (b'0'..=b'7').contains(c)) => {
                let v = u32::from(d[0] - b'0') * 64 + u32::from(d[1] - b'0') * 8;
                out.push((v + u32::from(d[2] - b'0')) as u8);
                i += 4;
            }
            _ => {
                out.push(b[i]);
                i += 1;
            }
        }
    }
    out
}

/// The mount on top of a directory, pinned by an `O_PATH` descriptor of its root.
#[derive(Debug)]
pub struct TopMount {
    fd: OwnedFd,
    /// Its mount id (as in mountinfo's first field).
    pub id: u64,
}

impl TopMount {
    /// Pins whatever is mounted on top at `path` (or the directory itself when nothing
    /// is). Sends no request to any file system, so it works on a mount whose server is
    /// gone and never waits for one that is slow.
    pub fn open(path: &Path) -> io::Result<TopMount> {
        let c = CString::new(path.as_os_str().as_bytes())
            .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
        // SAFETY: `c` is a valid NUL-terminated path for the duration of the call.
        let fd = unsafe {
            libc::open(
                c.as_ptr(),
                libc::O_PATH | libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_DIRECTORY,
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` was just returned by open and is owned by nobody else.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let id = mount_id_of(&fd)?;
        Ok(TopMount { fd, id })
    }

    /// Detaches exactly this mount (`umount2(MNT_DETACH)` through the pinned descriptor):
    /// it leaves the namespace now, and its file system ends when the last file open on
    /// it is closed. Needs `CAP_SYS_ADMIN` (`EPERM` otherwise).
    pub fn detach(self) -> io::Result<()> {
        let link = CString::new(format!("/proc/self/fd/{}", self.fd.as_raw_fd()))
            .expect("no NUL in a number");
        // SAFETY: `link` is a valid NUL-terminated path for the duration of the call; the
        // magic link resolves to the pinned mount's root, which is what umount2 removes.
        if unsafe { libc::umount2(link.as_ptr(), libc::MNT_DETACH) } < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }
}

/// The mount id of the mount `fd` is on, from `/proc/self/fdinfo` (no file system call).
fn mount_id_of(fd: &OwnedFd) -> io::Result<u64> {
    let info = std::fs::read_to_string(format!("/proc/self/fdinfo/{}", fd.as_raw_fd()))?;
    info.lines()
        .find_map(|l| l.strip_prefix("mnt_id:"))
        .and_then(|v| v.trim().parse().ok())
        .ok_or_else(|| io::Error::other("no mnt_id in /proc/self/fdinfo"))
}

/// What [`detach_ours`] found.
#[derive(Debug, PartialEq, Eq)]
pub enum Detach {
    /// Our mount was on top and is detached now.
    Done,
    /// Our mount is no longer in the mount table: nothing to do.
    Gone,
    /// Our mount is still there, but another mount covers it: it is left alone (so is the
    /// other mount), since no path reaches ours.
    Covered,
}

/// Detaches the mount with id `ours` from `path` if, and only if, it is the mount on top
/// there. Never removes anything else (see the module docs). A non-root caller goes
/// through `fusermount3 -u -z`, found by `fusermount`.
pub fn detach_ours(
    path: &Path,
    ours: u64,
    fusermount: impl FnOnce() -> Option<std::path::PathBuf>,
) -> io::Result<Detach> {
    let top = match TopMount::open(path) {
        Ok(t) => t,
        // The mount point itself is gone (its parent was unmounted, say): so is our mount
        // from this path.
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => return Ok(still_there(ours)),
        Err(e) => return Err(e),
    };
    if top.id != ours {
        return Ok(still_there(ours));
    }
    match top.detach() {
        Ok(()) => Ok(Detach::Done),
        Err(e) if e.raw_os_error() == Some(libc::EPERM) => {
            // The setuid helper resolves the path itself: the check above is as close to
            // it as we can get (a window of microseconds; see the module docs).
            let fusermount = fusermount().ok_or(e)?;
            let out = std::process::Command::new(fusermount)
                .args(["-u", "-z", "--"])
                .arg(path)
                .stdin(std::process::Stdio::null())
                .output()?;
            if out.status.success() {
                return Ok(Detach::Done);
            }
            // fusermount3's own line says why (not the owner, say).
            let why = String::from_utf8_lossy(&out.stderr);
            Err(io::Error::other(why.lines().next().map_or_else(
                || format!("fusermount3 failed: {}", out.status),
                |l| l.trim().to_string(),
            )))
        }
        // Detached meanwhile by someone else.
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => Ok(Detach::Gone),
        Err(e) => Err(e),
    }
}

/// `Covered` if mount `id` is still in this namespace's table, else `Gone`.
fn still_there(id: u64) -> Detach {
    let listed = std::fs::read_to_string("/proc/self/mountinfo").map(|t| {
        t.lines()
            .any(|l| l.split(' ').next().and_then(|f| f.parse().ok()) == Some(id))
    });
    match listed {
        Ok(true) => Detach::Covered,
        _ => Detach::Gone,
    }
}

/// The path we hand to `fusermount3` in place of the mount point.
///
/// With `auto_unmount`, `fusermount3` stays running and, when our end of its socket
/// closes (the session drops, or the daemon dies), unmounts by the path it was given:
/// after ours is gone, that would be whatever is beneath (the bug this module exists to
/// prevent). So it gets `DIR/parent/NAME`, where `DIR` is a private directory (mode 0700,
/// ours) and `parent` a symlink to the mount point's parent. `fusermount3` resolves the
/// parent (`realpath`) and mounts on the real directory; before the session drops,
/// [`UnmountDecoy::disarm`] points the symlink at `DIR/inert`, which holds an empty
/// directory `NAME`: that unmount then finds a directory that is no mount point and
/// touches nothing. Nobody else can write in our directory.
pub(crate) struct UnmountDecoy {
    dir: tempfile::TempDir,
    link: std::path::PathBuf,
    path: std::path::PathBuf,
}

impl UnmountDecoy {
    /// A decoy for the canonical `mountpoint` (which must have a parent: not `/`).
    pub(crate) fn new(mountpoint: &Path) -> io::Result<UnmountDecoy> {
        let (Some(parent), Some(name)) = (mountpoint.parent(), mountpoint.file_name()) else {
            return Err(io::Error::other("cannot mount on /"));
        };
        let dir = tempfile::Builder::new()
            .prefix("scalevfs-mount-")
            .tempdir()?;
        std::fs::create_dir_all(dir.path().join("inert").join(name))?;
        let link = dir.path().join("parent");
        std::os::unix::fs::symlink(parent, &link)?;
        let path = link.join(name);
        Ok(UnmountDecoy { dir, link, path })
    }

    /// What `fusermount3` mounts on (through the symlink, the real mount point).
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Makes the path lead to `DIR/inert/NAME`, an empty directory that is no mount
    /// point (atomically: a new symlink renamed over the old). Call before the FUSE
    /// session drops; idempotent. Should this fail, the symlink is removed instead: the
    /// unmount then fails on a missing path (and says so on stderr).
    pub(crate) fn disarm(&self) {
        let fresh = self.dir.path().join("parent.new");
        let _ = std::fs::remove_file(&fresh);
        let swapped = std::os::unix::fs::symlink(self.dir.path().join("inert"), &fresh)
            .and_then(|()| std::fs::rename(&fresh, &self.link));
        if swapped.is_err() {
            let _ = std::fs::remove_file(&self.link);
        }
    }
}

/// The mountinfo entry for mount id `id`, if it is a FUSE mount.
pub fn fuse_mount_by_id(id: u64) -> io::Result<Option<MountEntry>> {
    Ok(fuse_mounts()?.into_iter().find(|m| m.id == id))
}

/// Opens `/proc/self/mountinfo` for `poll(POLLPRI)`: it reports a change of this
/// namespace's mount table (any mount or unmount) once per change.
pub fn mount_table_events() -> io::Result<File> {
    File::open("/proc/self/mountinfo")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mountinfo_lines() {
        let text = "\
22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
90 22 0:50 / /tmp/a\\040b rw,nosuid,nodev,relatime shared:7 - fuse.scalevfs scalevfs rw,user_id=0
91 22 0:51 / /tmp/c rw,nosuid - fuse scalevfs-spike rw,user_id=0
92 22 0:52 / /tmp/d rw,nosuid - fuse other rw,user_id=0
93 22 0:53 / /tmp/e rw - fuse.sshfs scalevfs rw
94 22 0:54 / /tmp/f\\134g - fuse.scalevfs-test x rw
95 22 0:55 / /sys/fs/fuse/connections rw - fusectl none rw";
        let all = parse_mountinfo(text);
        assert_eq!(all.len(), 5, "every FUSE mount, ext4 left out: {all:?}");
        let m: Vec<MountEntry> = all.into_iter().filter(|m| m.scalevfs).collect();
        let points: Vec<&[u8]> = m.iter().map(|m| &m.mount_point[..]).collect();
        assert_eq!(points, [&b"/tmp/a b"[..], b"/tmp/c", b"/tmp/f\\g"], "{m:?}");
        assert_eq!((m[0].id, m[0].dev), (90, (0, 50)));
        assert!(parse_mountinfo("garbage\n\n1 2 3").is_empty());
    }

    #[test]
    fn mountinfo_escapes_are_decoded() {
        assert_eq!(unescape(r"/tmp/a\040b\134c"), b"/tmp/a b\\c");
        assert_eq!(unescape(r"/x\09"), b"/x\\09", "not three octal digits");
        assert_eq!(unescape("/plain"), b"/plain");
    }

    /// The pinned descriptor names the mount a path is on: `/` and `/proc` differ, and a
    /// directory that is no mount point has its parent mount's id.
    #[test]
    fn top_mount_ids_come_from_fdinfo() {
        let root = TopMount::open(Path::new("/")).unwrap();
        let proc_ = TopMount::open(Path::new("/proc")).unwrap();
        assert_ne!(root.id, proc_.id);
        let proc_self = TopMount::open(Path::new("/proc/self/fdinfo")).unwrap();
        assert_eq!(proc_self.id, proc_.id);
        let none = TopMount::open(Path::new("/nonexistent-scalevfs-dir")).unwrap_err();
        assert_eq!(none.raw_os_error(), Some(libc::ENOENT));
    }

    /// A mount id that is not ours is never detached, whatever is at the path.
    #[test]
    fn detach_ours_leaves_other_mounts_alone() {
        let root_id = TopMount::open(Path::new("/")).unwrap().id;
        let r = detach_ours(Path::new("/"), root_id + 1_000_000, || None).unwrap();
        assert_eq!(r, Detach::Gone, "an id not in the table is gone");
        let proc_id = TopMount::open(Path::new("/proc")).unwrap().id;
        let r = detach_ours(Path::new("/"), proc_id, || None).unwrap();
        assert_eq!(
            r,
            Detach::Covered,
            "/proc's mount is listed, not on top at /"
        );
    }
}
