//! scalevfs as a [`Target`]: a fresh [`Vfs`] per script and a [`Process`] per identity.

use std::io::{IoSlice, IoSliceMut};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use scalevfs::{
    Credentials, Errno, FcntlArg, MountOptions, Process, Stat, SysResult, Timespec, Tmpfs,
    TmpfsOptions, Vfs, VfsOptions,
};

use crate::op::Outcome;
use crate::runner::{run_script, Backend};
use crate::script::Script;
use crate::target::Target;

/// One `Process` on one `Vfs`. Switching credentials starts a new `Process` (the contract
/// has no setuid), which is why the harness closes all fds at that point on both sides.
pub struct ScalevfsTarget {
    vfs: Arc<Vfs>,
    proc: Process,
}

impl ScalevfsTarget {
    pub fn new(options: VfsOptions) -> ScalevfsTarget {
        let vfs = Vfs::new(options);
        let proc = Process::new(&vfs, Credentials::root());
        ScalevfsTarget { vfs, proc }
    }
    pub fn process(&self) -> &Process {
        &self.proc
    }
}

impl Target for ScalevfsTarget {
    fn openat(&mut self, dirfd: i32, path: &[u8], flags: i32, mode: u32) -> SysResult<i32> {
        self.proc.openat(dirfd, path, flags, mode)
    }
    fn close(&mut self, fd: i32) -> SysResult<()> {
        self.proc.close(fd)
    }
    fn read(&mut self, fd: i32, buf: &mut [u8]) -> SysResult<usize> {
        self.proc.read(fd, buf)
    }
    fn write(&mut self, fd: i32, buf: &[u8]) -> SysResult<usize> {
        self.proc.write(fd, buf)
    }
    fn pread64(&mut self, fd: i32, buf: &mut [u8], off: i64) -> SysResult<usize> {
        self.proc.pread64(fd, buf, off)
    }
    fn pwrite64(&mut self, fd: i32, buf: &[u8], off: i64) -> SysResult<usize> {
        self.proc.pwrite64(fd, buf, off)
    }
    fn readv(&mut self, fd: i32, bufs: &mut [IoSliceMut<'_>]) -> SysResult<usize> {
        self.proc.readv(fd, bufs)
    }
    fn writev(&mut self, fd: i32, bufs: &[IoSlice<'_>]) -> SysResult<usize> {
        self.proc.writev(fd, bufs)
    }
    fn preadv(&mut self, fd: i32, bufs: &mut [IoSliceMut<'_>], off: i64) -> SysResult<usize> {
        self.proc.preadv(fd, bufs, off)
    }
    fn pwritev(&mut self, fd: i32, bufs: &[IoSlice<'_>], off: i64) -> SysResult<usize> {
        self.proc.pwritev(fd, bufs, off)
    }
    fn copy_file_range(
        &mut self,
        fd_in: i32,
        off_in: Option<&mut i64>,
        fd_out: i32,
        off_out: Option<&mut i64>,
        len: usize,
        flags: u32,
    ) -> SysResult<usize> {
        self.proc
            .copy_file_range(fd_in, off_in, fd_out, off_out, len, flags)
    }
    fn lseek(&mut self, fd: i32, off: i64, whence: i32) -> SysResult<i64> {
        self.proc.lseek(fd, off, whence)
    }
    fn newfstatat(&mut self, dirfd: i32, path: &[u8], flags: i32) -> SysResult<Stat> {
        self.proc.newfstatat(dirfd, path, flags)
    }
    fn fstat(&mut self, fd: i32) -> SysResult<Stat> {
        self.proc.fstat(fd)
    }
    fn fchmodat(&mut self, dirfd: i32, path: &[u8], mode: u32, flags: i32) -> SysResult<()> {
        self.proc.fchmodat(dirfd, path, mode, flags)
    }
    fn fchmod(&mut self, fd: i32, mode: u32) -> SysResult<()> {
        self.proc.fchmod(fd, mode)
    }
    fn fchownat(
        &mut self,
        dirfd: i32,
        path: &[u8],
        uid: u32,
        gid: u32,
        flags: i32,
    ) -> SysResult<()> {
        self.proc.fchownat(dirfd, path, uid, gid, flags)
    }
    fn fchown(&mut self, fd: i32, uid: u32, gid: u32) -> SysResult<()> {
        self.proc.fchown(fd, uid, gid)
    }
    fn utimensat(
        &mut self,
        dirfd: i32,
        path: Option<&[u8]>,
        times: Option<[Timespec; 2]>,
        flags: i32,
    ) -> SysResult<()> {
        // The contract spells futimens as an empty path (see `Process::utimensat`).
        self.proc
            .utimensat(dirfd, path.unwrap_or(b""), times, flags)
    }
    fn faccessat(&mut self, dirfd: i32, path: &[u8], mode: i32, flags: i32) -> SysResult<()> {
        self.proc.faccessat(dirfd, path, mode, flags)
    }
    fn umask(&mut self, mask: u32) -> u32 {
        self.proc.umask(mask)
    }
    fn mkdirat(&mut self, dirfd: i32, path: &[u8], mode: u32) -> SysResult<()> {
        self.proc.mkdirat(dirfd, path, mode)
    }
    fn unlinkat(&mut self, dirfd: i32, path: &[u8], flags: i32) -> SysResult<()> {
        self.proc.unlinkat(dirfd, path, flags)
    }
    fn renameat2(&mut self, od: i32, old: &[u8], nd: i32, new: &[u8], flags: u32) -> SysResult<()> {
        self.proc.renameat2(od, old, nd, new, flags)
    }
    fn linkat(&mut self, od: i32, old: &[u8], nd: i32, new: &[u8], flags: i32) -> SysResult<()> {
        self.proc.linkat(od, old, nd, new, flags)
    }
    fn symlinkat(&mut self, target: &[u8], dirfd: i32, path: &[u8]) -> SysResult<()> {
        self.proc.symlinkat(target, dirfd, path)
    }
    fn readlinkat(&mut self, dirfd: i32, path: &[u8], buf: &mut [u8]) -> SysResult<usize> {
        self.proc.readlinkat(dirfd, path, buf)
    }
    fn getdents64(&mut self, fd: i32, buf: &mut [u8]) -> SysResult<usize> {
        self.proc.getdents64(fd, buf)
    }
    fn truncate(&mut self, path: &[u8], len: i64) -> SysResult<()> {
        self.proc.truncate(path, len)
    }
    fn ftruncate(&mut self, fd: i32, len: i64) -> SysResult<()> {
        self.proc.ftruncate(fd, len)
    }
    fn fallocate(&mut self, fd: i32, mode: i32, off: i64, len: i64) -> SysResult<()> {
        self.proc.fallocate(fd, mode, off, len)
    }
    fn ioctl(&mut self, fd: i32, request: u32, arg: &mut [u8]) -> SysResult<i32> {
        self.proc.ioctl(fd, request, arg)
    }
    fn dup(&mut self, fd: i32) -> SysResult<i32> {
        self.proc.dup(fd)
    }
    fn dup2(&mut self, old: i32, new: i32) -> SysResult<i32> {
        self.proc.dup2(old, new)
    }
    fn dup3(&mut self, old: i32, new: i32, flags: i32) -> SysResult<i32> {
        self.proc.dup3(old, new, flags)
    }
    fn fcntl(&mut self, fd: i32, cmd: i32, arg: i64) -> SysResult<i32> {
        let arg = match cmd {
            libc::F_GETFD | libc::F_GETFL => FcntlArg::None,
            _ => FcntlArg::Int(arg),
        };
        self.proc.fcntl(fd, cmd, arg)
    }
    fn chdir(&mut self, path: &[u8]) -> SysResult<()> {
        self.proc.chdir(path)
    }
    fn fchdir(&mut self, fd: i32) -> SysResult<()> {
        self.proc.fchdir(fd)
    }
    fn getcwd(&mut self, buf: &mut [u8]) -> SysResult<usize> {
        self.proc.getcwd(buf)
    }
    fn fsync(&mut self, fd: i32) -> SysResult<()> {
        self.proc.fsync(fd)
    }
    fn mount_tmpfs(&mut self, path: &[u8], read_only: bool) -> SysResult<()> {
        self.proc.mount_with(
            path,
            Arc::new(Tmpfs::new(TmpfsOptions::default())),
            MountOptions::new().read_only(read_only),
        )
    }
    fn remount(&mut self, path: &[u8], read_only: bool) -> SysResult<()> {
        // The host target answers for its case root's file system without asking (see
        // `HostTarget::remount`): there the case root is a plain directory, here the root
        // mount. So remounts are compared on the mounts a script made, and on the root's
        // file system both sides give the answer the host kernel gives for a directory
        // that is no mount root.
        if self.proc.stat(path)?.dev == self.proc.stat("/")?.dev {
            let root = self.proc.credentials().euid == 0;
            return Err(if root { Errno::EINVAL } else { Errno::EPERM });
        }
        self.proc
            .remount(path, MountOptions::new().read_only(read_only))
    }
    fn umount2(&mut self, path: &[u8], flags: i32) -> SysResult<()> {
        self.proc.umount2(path, flags)
    }
    fn fdatasync(&mut self, fd: i32) -> SysResult<()> {
        self.proc.fdatasync(fd)
    }
    fn setxattr(&mut self, path: &[u8], name: &[u8], value: &[u8], flags: i32) -> SysResult<()> {
        self.proc.setxattr(path, name, value, flags)
    }
    fn lsetxattr(&mut self, path: &[u8], name: &[u8], value: &[u8], flags: i32) -> SysResult<()> {
        self.proc.lsetxattr(path, name, value, flags)
    }
    fn fsetxattr(&mut self, fd: i32, name: &[u8], value: &[u8], flags: i32) -> SysResult<()> {
        self.proc.fsetxattr(fd, name, value, flags)
    }
    fn getxattr(&mut self, path: &[u8], name: &[u8], buf: &mut [u8]) -> SysResult<usize> {
        self.proc.getxattr(path, name, buf)
    }
    fn lgetxattr(&mut self, path: &[u8], name: &[u8], buf: &mut [u8]) -> SysResult<usize> {
        self.proc.lgetxattr(path, name, buf)
    }
    fn fgetxattr(&mut self, fd: i32, name: &[u8], buf: &mut [u8]) -> SysResult<usize> {
        self.proc.fgetxattr(fd, name, buf)
    }
    fn listxattr(&mut self, path: &[u8], buf: &mut [u8]) -> SysResult<usize> {
        self.proc.listxattr(path, buf)
    }
    fn llistxattr(&mut self, path: &[u8], buf: &mut [u8]) -> SysResult<usize> {
        self.proc.llistxattr(path, buf)
    }
    fn flistxattr(&mut self, fd: i32, buf: &mut [u8]) -> SysResult<usize> {
        self.proc.flistxattr(fd, buf)
    }
    fn removexattr(&mut self, path: &[u8], name: &[u8]) -> SysResult<()> {
        self.proc.removexattr(path, name)
    }
    fn lremovexattr(&mut self, path: &[u8], name: &[u8]) -> SysResult<()> {
        self.proc.lremovexattr(path, name)
    }
    fn fremovexattr(&mut self, fd: i32, name: &[u8]) -> SysResult<()> {
        self.proc.fremovexattr(fd, name)
    }
    fn mkfifo(&mut self, path: &[u8], mode: u32) -> SysResult<()> {
        self.proc
            .mknodat(libc::AT_FDCWD, path, libc::S_IFIFO | (mode & 0o7777), 0)
    }
    fn set_credentials(&mut self, creds: &Credentials) -> Result<(), String> {
        self.proc = Process::new(&self.vfs, creds.clone());
        Ok(())
    }
}

/// Runs each script on a fresh in-memory scalevfs, on its own thread so that a panic is
/// an outcome and a hang (a deadlock in the VFS) is a timeout rather than a stuck suite.
pub struct ScalevfsBackend {
    pub options: VfsOptions,
    /// How long one script may run.
    pub timeout: Duration,
}

impl Default for ScalevfsBackend {
    fn default() -> Self {
        ScalevfsBackend {
            options: VfsOptions::default(),
            timeout: Duration::from_secs(30),
        }
    }
}

impl Backend for ScalevfsBackend {
    fn describe(&self) -> String {
        format!("scalevfs ({:?} locking)", self.options.locking)
    }
    fn run(&self, script: &Script) -> Vec<Outcome> {
        let (tx, rx) = mpsc::channel::<Outcome>();
        let (script, options) = (script.clone(), self.options.clone());
        let spawned = std::thread::Builder::new()
            .name("scalevfs-conformance".into())
            .spawn(move || {
                let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    let mut t = ScalevfsTarget::new(options);
                    run_script(&mut t, &script, &mut |o| {
                        let _ = tx.send(o);
                    });
                }));
                if let Err(p) = r {
                    let msg = p
                        .downcast_ref::<&str>()
                        .map(|s| s.to_string())
                        .or_else(|| p.downcast_ref::<String>().cloned())
                        .unwrap_or_default();
                    let _ = tx.send(Outcome::Harness(format!("scalevfs panicked: {msg}")));
                }
            });
        if let Err(e) = spawned {
            return vec![Outcome::Harness(format!("spawn: {e}"))];
        }
        let deadline = Instant::now() + self.timeout;
        let mut out = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match rx.recv_timeout(left) {
                Ok(o) => out.push(o),
                Err(mpsc::RecvTimeoutError::Disconnected) => return out,
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    // The thread is stuck inside scalevfs; it is leaked, the suite goes on.
                    out.push(Outcome::Harness(format!(
                        "scalevfs did not finish within {:?} (hang?)",
                        self.timeout
                    )));
                    return out;
                }
            }
        }
    }
}
