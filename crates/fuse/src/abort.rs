//! Aborting a connection through fusectl (`/sys/fs/fuse/connections/N/abort`): pending
//! requests fail with `ECONNABORTED`, later ones with `ENOTCONN`, and every worker's
//! read or ring command ends. Closing our `/dev/fuse` descriptor is not enough while a
//! forked child holds a copy of it (`docs/fuse.md`, section 2, lesson 2).

use std::ffi::CString;
use std::io;
use std::path::Path;

/// What [`abort_connection`] did.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Abort {
    /// Aborted: pending requests fail, the workers' reads return `ENODEV`.
    Done,
    /// The connection had ended already.
    Gone,
    /// fusectl is not mounted and we may not mount it (only root may): the abort is
    /// best-effort. The detach alone ends the connection at once if nothing is open on
    /// the mount; otherwise the kernel ends it when the last file on the detached mount
    /// is closed, or when this process exits and closes `/dev/fuse`.
    NotPermitted,
}

const FUSECTL: &str = "/sys/fs/fuse/connections";

/// Writes to the connection's `abort` file in fusectl (mounting fusectl if it is not):
/// pending requests fail with `ECONNABORTED`, later ones with `ENOTCONN`.
pub(crate) fn abort_connection(conn: u32) -> io::Result<Abort> {
    abort_in(Path::new(FUSECTL), conn, fusectl_mounted, || {
        let c = |s: &str| CString::new(s).expect("no NUL");
        let (src, dir, ty) = (c("fusectl"), c(FUSECTL), c("fusectl"));
        // SAFETY: all pointers are valid NUL-terminated strings for the call; no data.
        let r =
            unsafe { libc::mount(src.as_ptr(), dir.as_ptr(), ty.as_ptr(), 0, std::ptr::null()) };
        if r < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(())
        }
    })
}

fn fusectl_mounted() -> io::Result<bool> {
    Ok(std::fs::read_to_string("/proc/self/mounts")?
        .lines()
        .any(|l| l.split(' ').nth(2) == Some("fusectl")))
}

/// [`abort_connection`] with fusectl at `dir`, and how to tell whether it is mounted and
/// to mount it.
fn abort_in(
    dir: &Path,
    conn: u32,
    mounted: impl FnOnce() -> io::Result<bool>,
    mount: impl FnOnce() -> io::Result<()>,
) -> io::Result<Abort> {
    let abort = dir.join(conn.to_string()).join("abort");
    if !abort.exists() {
        if mounted()? {
            return Ok(Abort::Gone);
        }
        match mount() {
            Ok(()) => {}
            // Someone mounted it meanwhile.
            Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {}
            // Not root: see `Abort::NotPermitted`.
            Err(e) if e.raw_os_error() == Some(libc::EPERM) => return Ok(Abort::NotPermitted),
            Err(e) => return Err(e),
        }
        if !abort.exists() {
            return Ok(Abort::Gone);
        }
    }
    // The directory goes when the superblock dies: an unmount from outside may finish
    // between the check above and this write, and then the connection is gone already.
    match std::fs::write(&abort, b"1") {
        Ok(()) => Ok(Abort::Done),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(Abort::Gone),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The abort's outcomes without fusectl: a non-root user's `EPERM` from mounting
    /// fusectl is not a failure (the unmount then succeeds on the detach alone).
    #[test]
    fn abort_without_fusectl_is_best_effort_for_non_root() {
        let dir = tempfile::tempdir().unwrap();
        let err = |n| move || Err(io::Error::from_raw_os_error(n));
        let no = || Ok(false);
        let r = abort_in(dir.path(), 7, no, err(libc::EPERM));
        assert_eq!(r.unwrap(), Abort::NotPermitted);
        let r = abort_in(dir.path(), 7, no, err(libc::ENODEV));
        assert_eq!(r.unwrap_err().raw_os_error(), Some(libc::ENODEV));
        let r = abort_in(dir.path(), 7, || Ok(true), || unreachable!());
        assert_eq!(
            r.unwrap(),
            Abort::Gone,
            "fusectl mounted, no such connection"
        );
        let r = abort_in(dir.path(), 7, no, || Ok(()));
        assert_eq!(r.unwrap(), Abort::Gone, "mounted now, no such connection");
        let conn = dir.path().join("7");
        std::fs::create_dir(&conn).unwrap();
        std::fs::write(conn.join("abort"), b"").unwrap();
        let r = abort_in(dir.path(), 7, || unreachable!(), || unreachable!());
        assert_eq!(r.unwrap(), Abort::Done);
        assert_eq!(std::fs::read(conn.join("abort")).unwrap(), b"1");
    }
}
