//! Getting a `/dev/fuse` descriptor with a mount behind it, in one of two ways:
//!
//! * **`fusermount3`** (libfuse's setuid helper), for any user: it opens `/dev/fuse`,
//!   mounts, and sends the descriptor back over a socket named in `_FUSE_COMMFD`
//!   (`SCM_RIGHTS`). With `auto_unmount` it stays running and unmounts when our end of
//!   the socket closes, so a daemon that dies leaves no dead mount behind. Preferred
//!   whenever it is installed.
//! * **`mount(2)` directly**, for a caller with `CAP_SYS_ADMIN` on a machine without
//!   `fusermount3` (a bare container or VM): we open `/dev/fuse` ourselves and pass it to
//!   the kernel as `fd=N`, the way libfuse's `fuse_mount_sys` does. There is no watchdog:
//!   if the daemon is killed, the mount stays (its calls fail with `ENOTCONN`) until
//!   `scalevfs umount` or `umount -l` removes it.

use std::ffi::{CString, OsString};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};

use super::session::MountConfig;

/// How a mount is made (see the module docs).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Mounter {
    /// Through the `fusermount3` at this path.
    Fusermount(PathBuf),
    /// With `mount(2)`, as a caller with `CAP_SYS_ADMIN`.
    Direct,
}

/// Mounts with `mount(2)`: `/dev/fuse` opened here, source and type from the
/// `fsname=`/`subtype=` options, the other options passed to the kernel after `fd=`,
/// `rootmode=`, `user_id=` and `group_id=`.
pub(super) fn direct_mount(mountpoint: &Path, config: &MountConfig) -> io::Result<OwnedFd> {
    let (source, fstype, data) = direct_mount_arguments(config);
    let dev = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/fuse")?;
    let fd = OwnedFd::from(dev);
    // SAFETY: getuid/getgid cannot fail and touch no memory.
    let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
    let data = format!(
        "fd={},rootmode=40000,user_id={uid},group_id={gid}{data}",
        fd.as_raw_fd()
    );
    let c = |s: &[u8]| CString::new(s).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL));
    let (target, source, fstype, data) = (
        c(mountpoint.as_os_str().as_bytes())?,
        c(source.as_bytes())?,
        c(fstype.as_bytes())?,
        c(data.as_bytes())?,
    );
    // SAFETY: every pointer is a NUL-terminated string that outlives the call; the kernel
    // only reads them.
    let r = unsafe {
        libc::mount(
            source.as_ptr(),
            target.as_ptr(),
            fstype.as_ptr(),
            libc::MS_NOSUID | libc::MS_NODEV,
            data.as_ptr().cast(),
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(fd)
}

/// `(source, type, ",opt,..." for the data string)` of a direct mount of `config`.
fn direct_mount_arguments(config: &MountConfig) -> (String, String, String) {
    let (mut source, mut fstype, mut data) =
        ("scalevfs".to_string(), "fuse".to_string(), String::new());
    for opt in &config.options {
        if let Some(name) = opt.strip_prefix("fsname=") {
            source = name.to_string();
        } else if let Some(sub) = opt.strip_prefix("subtype=") {
            fstype = format!("fuse.{sub}");
        } else {
            data.push(',');
            data.push_str(opt);
        }
    }
    (source, fstype, data)
}

/// Runs `fusermount3 -o OPTIONS -- MOUNTPOINT` with one end of a socket pair in
/// `_FUSE_COMMFD` and receives the `/dev/fuse` fd it sends (`SCM_RIGHTS`).
pub(super) fn fusermount_mount(
    fusermount: &Path,
    mountpoint: &Path,
    config: &MountConfig,
) -> io::Result<(OwnedFd, Option<(Child, UnixStream)>)> {
    let (ours, theirs) = UnixStream::pair()?;
    let mut opts = config.options.clone();
    if config.auto_unmount {
        opts.push("auto_unmount".into());
    }
    let mut cmd = Command::new(fusermount);
    if !opts.is_empty() {
        cmd.arg("-o").arg(opts.join(","));
    }
    cmd.arg("--").arg(mountpoint);
    let their_fd = theirs.as_raw_fd();
    cmd.env("_FUSE_COMMFD", OsString::from(their_fd.to_string()));
    // SAFETY: the closure runs in the forked child before exec and calls only fcntl,
    // which is async-signal-safe; it touches no memory of the parent.
    unsafe {
        cmd.pre_exec(move || {
            if libc::fcntl(their_fd, libc::F_SETFD, 0) < 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = cmd.spawn()?;
    drop(theirs);
    let fd = match receive_fd(&ours) {
        Ok(fd) => fd,
        Err(e) => {
            let _ = child.wait();
            return Err(e);
        }
    };
    if config.auto_unmount {
        Ok((fd, Some((child, ours))))
    } else {
        // Without auto_unmount fusermount3 exits right after sending the fd.
        let _ = child.wait();
        Ok((fd, None))
    }
}

fn receive_fd(sock: &UnixStream) -> io::Result<OwnedFd> {
    let mut byte = [0u8; 1];
    let mut iov = libc::iovec {
        iov_base: byte.as_mut_ptr().cast(),
        iov_len: 1,
    };
    // Room for one cmsghdr carrying one int, 8-aligned.
    let mut control = [0u64; 4];
    // SAFETY: msghdr is plain data; all-zero is a valid empty header.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = std::mem::size_of_val(&control) as _;
    // SAFETY: `msg` points at `iov` and `control`, both live and writable for the call.
    let n = unsafe { libc::recvmsg(sock.as_raw_fd(), &mut msg, libc::MSG_CMSG_CLOEXEC) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `msg` was filled by recvmsg; CMSG_FIRSTHDR checks msg_controllen.
    let cmsg = unsafe { libc::CMSG_FIRSTHDR(&msg) };
    // SAFETY: a non-null cmsg points inside `control`.
    if cmsg.is_null() || unsafe { (*cmsg).cmsg_type } != libc::SCM_RIGHTS {
        return Err(io::Error::other(
            "fusermount3 did not send a /dev/fuse descriptor (see its message above)",
        ));
    }
    // SAFETY: an SCM_RIGHTS message carries at least one int after its header, inside
    // `control`; read unaligned to be safe.
    let fd: RawFd = unsafe { std::ptr::read_unaligned(libc::CMSG_DATA(cmsg).cast()) };
    // SAFETY: the kernel just installed `fd` in our table for us; nobody else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn direct_mount_takes_source_and_type_from_the_options() {
        let config = MountConfig {
            options: [
                "default_permissions",
                "fsname=scalevfs",
                "subtype=scalevfs",
                "allow_other",
            ]
            .map(String::from)
            .to_vec(),
            auto_unmount: true,
            want: 0,
            max_write: 4096,
        };
        let (source, fstype, data) = direct_mount_arguments(&config);
        assert_eq!(source, "scalevfs");
        assert_eq!(fstype, "fuse.scalevfs");
        assert_eq!(data, ",default_permissions,allow_other");
    }
}
