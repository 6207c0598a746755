//! # scalevfs._scalevfs
//!
//! The native half of the `scalevfs` Python package (`python/`): `Vfs` and `Process`
//! classes whose methods are the [`scalevfs::Process`] system calls, with Linux's
//! arguments, raising `OSError` (so Python picks `FileNotFoundError`,
//! `PermissionError`, ...) with the errno and the file name(s). The Pythonic face (file
//! objects, `os`-style names, `os.stat_result`, an `epoll` object) is the pure-Python
//! `scalevfs/__init__.py`; this module stays thin.
//!
//! * Paths are `str`, `bytes` or `os.PathLike`, as `os` takes them: `bytes` are passed
//!   through (any bytes but NUL), `str` is encoded as `os.fsencode` does (UTF-8 with
//!   `surrogateescape`), and an embedded NUL is `ValueError`.
//! * Calls that may block (open of a FIFO, read and write of pipes, `F_SETLKW`,
//!   `flock`, `epoll_wait`, `poll`) release the GIL, so other Python threads run (and
//!   can release the lock being waited for); quick ones keep it (cheaper).
//! * `Process.exit()` is process exit (its descriptors close, its locks go); later calls
//!   raise `OSError(EBADF)`, never crash.

#![warn(missing_docs)]

use std::borrow::Cow;
use std::sync::Arc;

use parking_lot::RwLock;
use pyo3::exceptions::{PyOSError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyString, PyTuple};
use scalevfs::{EpollEvent, Errno, FcntlArg, Flock, Stat, SysResult, VfsOptions};

/// Linux's `MAX_RW_COUNT`: one read moves at most this much.
const MAX_RW_COUNT: usize = i32::MAX as usize & !4095;

/// The message `os.strerror` gives for `e`.
fn strerror(e: Errno) -> String {
    let mut buf = [0u8; 128];
    // SAFETY: `buf` is writable for its length; strerror_r (the XSI one the libc crate
    // binds) NUL-terminates what it writes there.
    let r = unsafe { libc::strerror_r(e.0, buf.as_mut_ptr().cast(), buf.len()) };
    if r != 0 {
        return format!("Unknown error {}", e.0);
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

/// `OSError(errno, strerror[, filename[, None, filename2]])`: Python's `OSError`
/// constructor picks the subclass for the errno (`FileNotFoundError`, ...).
fn os_error(e: Errno, f1: Option<&Bound<'_, PyAny>>, f2: Option<&Bound<'_, PyAny>>) -> PyErr {
    let msg = strerror(e);
    match (f1, f2) {
        (Some(a), Some(b)) => PyOSError::new_err((
            e.0,
            msg,
            a.clone().unbind(),
            Option::<i32>::None,
            b.clone().unbind(),
        )),
        (Some(a), None) => PyOSError::new_err((e.0, msg, a.clone().unbind())),
        _ => PyOSError::new_err((e.0, msg)),
    }
}

/// A path argument as bytes (see the module docs).
fn fspath<'a>(obj: &'a Bound<'_, PyAny>) -> PyResult<Cow<'a, [u8]>> {
    let bytes: Cow<'a, [u8]> = if let Ok(b) = obj.cast::<PyBytes>() {
        Cow::Borrowed(b.as_bytes())
    } else if let Ok(s) = obj.cast::<PyString>() {
        match s.to_cow() {
            Ok(s) => Cow::Owned(s.as_bytes().to_vec()),
            // Lone surrogates (from os.fsdecode of bytes that are not UTF-8).
            Err(_) => Cow::Owned(
                s.call_method1("encode", ("utf-8", "surrogateescape"))?
                    .cast::<PyBytes>()?
                    .as_bytes()
                    .to_vec(),
            ),
        }
    } else if obj.hasattr("__fspath__")? {
        let p = obj.call_method0("__fspath__")?;
        if p.is_instance_of::<PyBytes>() || p.is_instance_of::<PyString>() {
            Cow::Owned(fspath(&p)?.into_owned())
        } else {
            return Err(pyo3::exceptions::PyTypeError::new_err(
                "__fspath__ must return str or bytes",
            ));
        }
    } else {
        return Err(pyo3::exceptions::PyTypeError::new_err(format!(
            "expected str, bytes or os.PathLike object, not {}",
            obj.get_type().name()?
        )));
    };
    if bytes.contains(&0) {
        return Err(PyValueError::new_err("embedded null byte"));
    }
    Ok(bytes)
}

/// A result without file names.
fn ok<T>(r: SysResult<T>) -> PyResult<T> {
    r.map_err(|e| os_error(e, None, None))
}

/// A result whose error names `path`.
fn ok_path<T>(r: SysResult<T>, path: &Bound<'_, PyAny>) -> PyResult<T> {
    r.map_err(|e| os_error(e, Some(path), None))
}

/// A stat as the wrapper makes an `os.stat_result` of it: `((mode, ino, dev, nlink, uid,
/// gid, size), (atime s, ns, mtime s, ns, ctime s, ns), (blksize, blocks, rdev))`.
type StatTuple = (
    (u32, u64, u64, u64, u32, u32, i64),
    (i64, i64, i64, i64, i64, i64),
    (i64, i64, u64),
);

fn stat_tuple(s: &Stat) -> StatTuple {
    (
        (s.mode, s.ino, s.dev, s.nlink, s.uid, s.gid, s.size),
        (
            s.atime.sec,
            s.atime.nsec,
            s.mtime.sec,
            s.mtime.nsec,
            s.ctime.sec,
            s.ctime.nsec,
        ),
        (s.blksize, s.blocks, s.rdev),
    )
}

/// A VFS: a tmpfs at `/` (with optional `size=` and `nr_inodes=` limits), its caches
/// and lock tables.
#[pyclass(frozen, module = "scalevfs._scalevfs")]
struct Vfs {
    inner: Arc<scalevfs::Vfs>,
}

#[pymethods]
impl Vfs {
    #[new]
    #[pyo3(signature = (size_limit=None, inode_limit=None))]
    fn new(size_limit: Option<u64>, inode_limit: Option<u64>) -> Self {
        Vfs {
            inner: scalevfs::Vfs::new(VfsOptions {
                size_limit,
                inode_limit,
                ..VfsOptions::default()
            }),
        }
    }

    /// A new process with these credentials (uid 0: root, with every capability).
    #[pyo3(signature = (uid=0, gid=0, groups=Vec::new()))]
    fn process(&self, uid: u32, gid: u32, groups: Vec<u32>) -> Process {
        let creds = scalevfs::Credentials::user(uid, gid).with_groups(groups);
        Process::wrap(scalevfs::Process::new(&self.inner, creds))
    }

    /// Every held and waiting file lock, in `/proc/locks` format.
    fn proc_locks(&self) -> String {
        self.inner.proc_locks()
    }

    /// Inodes alive in the VFS.
    fn inode_count(&self) -> usize {
        self.inner.inode_count()
    }
}

/// A process: descriptor table, cwd, umask, credentials, POSIX lock owner. Methods are
/// the system calls, with Linux's arguments.
#[pyclass(frozen, module = "scalevfs._scalevfs")]
struct Process {
    /// `None` after `exit()`.
    inner: RwLock<Option<Arc<scalevfs::Process>>>,
    pid: i32,
    uid: u32,
    gid: u32,
}

impl Process {
    fn wrap(p: scalevfs::Process) -> Process {
        Process {
            pid: p.pid(),
            uid: p.credentials().uid,
            gid: p.credentials().gid,
            inner: RwLock::new(Some(Arc::new(p))),
        }
    }
    /// The live process, or `OSError(EBADF)` after `exit()`.
    fn get(&self) -> PyResult<Arc<scalevfs::Process>> {
        self.inner.read().clone().ok_or_else(|| {
            PyOSError::new_err((libc::EBADF, "the process has exited (Process.exit())"))
        })
    }
}

#[pymethods]
impl Process {
    /// The pid (`F_GETLK`'s `l_pid`).
    #[getter]
    fn pid(&self) -> i32 {
        self.pid
    }
    #[getter]
    fn uid(&self) -> u32 {
        self.uid
    }
    #[getter]
    fn gid(&self) -> u32 {
        self.gid
    }
    /// Whether `exit()` was called.
    #[getter]
    fn exited(&self) -> bool {
        self.inner.read().is_none()
    }

    /// Process exit: every descriptor closes and the process's locks go. Idempotent.
    fn exit(&self, py: Python<'_>) {
        let p = self.inner.write().take();
        if let Some(p) = p {
            py.detach(|| p.exit());
        }
    }

    /// `fork`: a child with a copy of the descriptor table, the cwd, umask and
    /// credentials, and its own pid (POSIX lock owner).
    fn fork(&self) -> PyResult<Process> {
        Ok(Process::wrap(self.get()?.fork()))
    }

    fn openat(
        &self,
        py: Python<'_>,
        dirfd: i32,
        path: &Bound<'_, PyAny>,
        flags: i32,
        mode: u32,
    ) -> PyResult<i32> {
        let p = self.get()?;
        let b = fspath(path)?;
        ok_path(py.detach(|| p.openat(dirfd, &b, flags, mode)), path)
    }

    fn close(&self, fd: i32) -> PyResult<()> {
        ok(self.get()?.close(fd))
    }

    /// `read(fd, n)`: at most `n` bytes (fewer at end of file; `b""` at its end).
    fn read<'py>(&self, py: Python<'py>, fd: i32, n: isize) -> PyResult<Bound<'py, PyBytes>> {
        let p = self.get()?;
        let n = usize::try_from(n)
            .map_err(|_| PyValueError::new_err("negative read size"))?
            .min(MAX_RW_COUNT);
        let mut buf = vec![0u8; n];
        let got = ok(py.detach(|| p.read(fd, &mut buf)))?;
        Ok(PyBytes::new(py, &buf[..got]))
    }

    fn write(&self, py: Python<'_>, fd: i32, data: &[u8]) -> PyResult<usize> {
        let p = self.get()?;
        ok(py.detach(|| p.write(fd, data)))
    }

    fn pread<'py>(
        &self,
        py: Python<'py>,
        fd: i32,
        n: isize,
        offset: i64,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let p = self.get()?;
        let n = usize::try_from(n)
            .map_err(|_| PyValueError::new_err("negative read size"))?
            .min(MAX_RW_COUNT);
        let mut buf = vec![0u8; n];
        let got = ok(py.detach(|| p.pread64(fd, &mut buf, offset)))?;
        Ok(PyBytes::new(py, &buf[..got]))
    }

    fn pwrite(&self, py: Python<'_>, fd: i32, data: &[u8], offset: i64) -> PyResult<usize> {
        let p = self.get()?;
        ok(py.detach(|| p.pwrite64(fd, data, offset)))
    }

    fn lseek(&self, fd: i32, offset: i64, whence: i32) -> PyResult<i64> {
        ok(self.get()?.lseek(fd, offset, whence))
    }

    fn fstat(&self, fd: i32) -> PyResult<StatTuple> {
        ok(self.get()?.fstat(fd).map(|s| stat_tuple(&s)))
    }

    fn newfstatat(&self, dirfd: i32, path: &Bound<'_, PyAny>, flags: i32) -> PyResult<StatTuple> {
        let r = self.get()?.newfstatat(dirfd, fspath(path)?, flags);
        ok_path(r.map(|s| stat_tuple(&s)), path)
    }

    fn mkdirat(&self, dirfd: i32, path: &Bound<'_, PyAny>, mode: u32) -> PyResult<()> {
        ok_path(self.get()?.mkdirat(dirfd, fspath(path)?, mode), path)
    }

    fn unlinkat(&self, dirfd: i32, path: &Bound<'_, PyAny>, flags: i32) -> PyResult<()> {
        ok_path(self.get()?.unlinkat(dirfd, fspath(path)?, flags), path)
    }

    fn renameat2(
        &self,
        olddirfd: i32,
        old: &Bound<'_, PyAny>,
        newdirfd: i32,
        new: &Bound<'_, PyAny>,
        flags: u32,
    ) -> PyResult<()> {
        let r = self
            .get()?
            .renameat2(olddirfd, fspath(old)?, newdirfd, fspath(new)?, flags);
        r.map_err(|e| os_error(e, Some(old), Some(new)))
    }

    fn linkat(
        &self,
        olddirfd: i32,
        old: &Bound<'_, PyAny>,
        newdirfd: i32,
        new: &Bound<'_, PyAny>,
        flags: i32,
    ) -> PyResult<()> {
        let r = self
            .get()?
            .linkat(olddirfd, fspath(old)?, newdirfd, fspath(new)?, flags);
        r.map_err(|e| os_error(e, Some(old), Some(new)))
    }

    fn symlinkat(
        &self,
        target: &Bound<'_, PyAny>,
        dirfd: i32,
        linkpath: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let r = self
            .get()?
            .symlinkat(fspath(target)?, dirfd, fspath(linkpath)?);
        r.map_err(|e| os_error(e, Some(target), Some(linkpath)))
    }

    /// The link's target (bytes).
    fn readlinkat<'py>(
        &self,
        py: Python<'py>,
        dirfd: i32,
        path: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let mut buf = vec![0u8; 4096];
        let n = ok_path(self.get()?.readlinkat(dirfd, fspath(path)?, &mut buf), path)?;
        Ok(PyBytes::new(py, &buf[..n]))
    }

    /// The entries of a directory, without `.` and `..`: `(name, ino, d_type)`.
    fn readdir<'py>(
        &self,
        py: Python<'py>,
        path: &Bound<'py, PyAny>,
    ) -> PyResult<Vec<(Bound<'py, PyBytes>, u64, u8)>> {
        let entries = ok_path(self.get()?.readdir(fspath(path)?), path)?;
        Ok(entries
            .iter()
            .filter(|e| e.name != b"." && e.name != b"..")
            .map(|e| (PyBytes::new(py, &e.name), e.ino, e.d_type))
            .collect())
    }

    /// `getdents64(fd, count)`: the raw `struct linux_dirent64` records (b"" at the end).
    fn getdents64<'py>(
        &self,
        py: Python<'py>,
        fd: i32,
        count: usize,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let mut buf = vec![0u8; count.min(1 << 20)];
        let n = ok(self.get()?.getdents64(fd, &mut buf))?;
        Ok(PyBytes::new(py, &buf[..n]))
    }

    fn fchmodat(&self, dirfd: i32, path: &Bound<'_, PyAny>, mode: u32, flags: i32) -> PyResult<()> {
        ok_path(
            self.get()?.fchmodat(dirfd, fspath(path)?, mode, flags),
            path,
        )
    }

    fn fchmod(&self, fd: i32, mode: u32) -> PyResult<()> {
        ok(self.get()?.fchmod(fd, mode))
    }

    fn fchownat(
        &self,
        dirfd: i32,
        path: &Bound<'_, PyAny>,
        uid: i64,
        gid: i64,
        flags: i32,
    ) -> PyResult<()> {
        let r = self
            .get()?
            .fchownat(dirfd, fspath(path)?, uid as u32, gid as u32, flags);
        ok_path(r, path)
    }

    fn fchown(&self, fd: i32, uid: i64, gid: i64) -> PyResult<()> {
        ok(self.get()?.fchown(fd, uid as u32, gid as u32))
    }

    fn faccessat(
        &self,
        dirfd: i32,
        path: &Bound<'_, PyAny>,
        mode: i32,
        flags: i32,
    ) -> PyResult<()> {
        ok_path(
            self.get()?.faccessat(dirfd, fspath(path)?, mode, flags),
            path,
        )
    }

    fn truncate(&self, path: &Bound<'_, PyAny>, length: i64) -> PyResult<()> {
        ok_path(self.get()?.truncate(fspath(path)?, length), path)
    }

    fn ftruncate(&self, fd: i32, length: i64) -> PyResult<()> {
        ok(self.get()?.ftruncate(fd, length))
    }

    fn umask(&self, mask: u32) -> PyResult<u32> {
        Ok(self.get()?.umask(mask))
    }

    fn chdir(&self, path: &Bound<'_, PyAny>) -> PyResult<()> {
        ok_path(self.get()?.chdir(fspath(path)?), path)
    }

    fn fchdir(&self, fd: i32) -> PyResult<()> {
        ok(self.get()?.fchdir(fd))
    }

    /// The cwd (bytes).
    fn getcwd<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        let mut buf = vec![0u8; 4096];
        let n = ok(self.get()?.getcwd(&mut buf))?;
        Ok(PyBytes::new(py, &buf[..n - 1]))
    }

    fn dup(&self, fd: i32) -> PyResult<i32> {
        ok(self.get()?.dup(fd))
    }

    fn dup2(&self, oldfd: i32, newfd: i32) -> PyResult<i32> {
        ok(self.get()?.dup2(oldfd, newfd))
    }

    fn dup3(&self, oldfd: i32, newfd: i32, flags: i32) -> PyResult<i32> {
        ok(self.get()?.dup3(oldfd, newfd, flags))
    }

    /// `pipe2(flags)`: `(read end, write end)`.
    fn pipe2(&self, flags: i32) -> PyResult<(i32, i32)> {
        let mut fds = [0; 2];
        ok(self.get()?.pipe2(&mut fds, flags))?;
        Ok((fds[0], fds[1]))
    }

    fn eventfd(&self, initval: u32, flags: i32) -> PyResult<i32> {
        ok(self.get()?.eventfd(initval, flags))
    }

    /// `fcntl(fd, cmd, arg)` for the commands with an integer argument.
    fn fcntl(&self, fd: i32, cmd: i32, arg: i64) -> PyResult<i32> {
        ok(self.get()?.fcntl(fd, cmd, FcntlArg::Int(arg)))
    }

    /// `fcntl(fd, cmd, &flock)` for the record-lock commands: returns the (possibly
    /// updated, for `F_GETLK`) `(l_type, l_whence, l_start, l_len, l_pid)`. Releases the
    /// GIL (`F_SETLKW` waits).
    #[allow(clippy::too_many_arguments)]
    fn fcntl_lock(
        &self,
        py: Python<'_>,
        fd: i32,
        cmd: i32,
        l_type: i16,
        l_whence: i16,
        l_start: i64,
        l_len: i64,
    ) -> PyResult<(i16, i16, i64, i64, i32)> {
        let p = self.get()?;
        let mut fl = Flock {
            l_type,
            l_whence,
            l_start,
            l_len,
            l_pid: 0,
        };
        ok(py.detach(|| p.fcntl(fd, cmd, FcntlArg::Flock(&mut fl))))?;
        Ok((fl.l_type, fl.l_whence, fl.l_start, fl.l_len, fl.l_pid))
    }

    /// `flock(fd, op)`; releases the GIL.
    fn flock(&self, py: Python<'_>, fd: i32, op: i32) -> PyResult<()> {
        let p = self.get()?;
        ok(py.detach(|| p.flock(fd, op)))
    }

    fn epoll_create1(&self, flags: i32) -> PyResult<i32> {
        ok(self.get()?.epoll_create1(flags))
    }

    /// `epoll_ctl(epfd, op, fd, {events, data})`.
    fn epoll_ctl(&self, epfd: i32, op: i32, fd: i32, events: u32, data: u64) -> PyResult<()> {
        let ev = EpollEvent::new(events, data);
        ok(self.get()?.epoll_ctl(epfd, op, fd, Some(&ev)))
    }

    /// `epoll_wait`: `[(data, events), ...]`. Releases the GIL.
    fn epoll_wait(
        &self,
        py: Python<'_>,
        epfd: i32,
        maxevents: i32,
        timeout_ms: i32,
    ) -> PyResult<Vec<(u64, u32)>> {
        let p = self.get()?;
        let mut evs = vec![EpollEvent::default(); maxevents.clamp(0, 1 << 16) as usize];
        let n = ok(py.detach(|| p.epoll_wait(epfd, &mut evs, timeout_ms)))?;
        Ok(evs[..n].iter().map(|e| (e.data, e.events)).collect())
    }

    /// `poll([(fd, events), ...], timeout_ms)`: `[(fd, revents), ...]` for those with
    /// events. Releases the GIL.
    fn poll(
        &self,
        py: Python<'_>,
        fds: Vec<(i32, i16)>,
        timeout_ms: i32,
    ) -> PyResult<Vec<(i32, i16)>> {
        let p = self.get()?;
        let mut pfds: Vec<libc::pollfd> = fds
            .iter()
            .map(|&(fd, events)| libc::pollfd {
                fd,
                events,
                revents: 0,
            })
            .collect();
        ok(py.detach(|| p.poll(&mut pfds, timeout_ms)))?;
        Ok(pfds
            .iter()
            .filter(|p| p.revents != 0)
            .map(|p| (p.fd, p.revents))
            .collect())
    }

    fn setxattr(
        &self,
        path: &Bound<'_, PyAny>,
        name: &Bound<'_, PyAny>,
        value: &[u8],
        flags: i32,
        follow: bool,
    ) -> PyResult<()> {
        let p = self.get()?;
        let (pb, nb) = (fspath(path)?, fspath(name)?);
        let r = if follow {
            p.setxattr(pb, &nb, value, flags)
        } else {
            p.lsetxattr(pb, &nb, value, flags)
        };
        ok_path(r, path)
    }

    fn getxattr<'py>(
        &self,
        py: Python<'py>,
        path: &Bound<'py, PyAny>,
        name: &Bound<'py, PyAny>,
        follow: bool,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let p = self.get()?;
        let (pb, nb) = (fspath(path)?, fspath(name)?);
        let get = |buf: &mut [u8]| {
            if follow {
                p.getxattr(&pb, &nb, buf)
            } else {
                p.lgetxattr(&pb, &nb, buf)
            }
        };
        let mut buf = vec![0u8; ok_path(get(&mut []), path)?];
        let n = ok_path(get(&mut buf), path)?;
        Ok(PyBytes::new(py, &buf[..n]))
    }

    /// The attribute names (bytes).
    fn listxattr<'py>(
        &self,
        py: Python<'py>,
        path: &Bound<'py, PyAny>,
        follow: bool,
    ) -> PyResult<Bound<'py, PyList>> {
        let p = self.get()?;
        let pb = fspath(path)?;
        let list = |buf: &mut [u8]| {
            if follow {
                p.listxattr(&pb, buf)
            } else {
                p.llistxattr(&pb, buf)
            }
        };
        let mut buf = vec![0u8; ok_path(list(&mut []), path)?];
        let n = ok_path(list(&mut buf), path)?;
        let names: Vec<_> = buf[..n]
            .split(|&b| b == 0)
            .filter(|s| !s.is_empty())
            .map(|s| PyBytes::new(py, s))
            .collect();
        PyList::new(py, names)
    }

    fn removexattr(
        &self,
        path: &Bound<'_, PyAny>,
        name: &Bound<'_, PyAny>,
        follow: bool,
    ) -> PyResult<()> {
        let p = self.get()?;
        let (pb, nb) = (fspath(path)?, fspath(name)?);
        let r = if follow {
            p.removexattr(pb, &nb)
        } else {
            p.lremovexattr(pb, &nb)
        };
        ok_path(r, path)
    }

    /// `mount("tmpfs", path, "tmpfs", flags, "size=..,nr_inodes=..")`: a fresh tmpfs
    /// on the directory `path` (root only), with limits (`None`: unlimited), read-only
    /// (`MS_RDONLY`) if `read_only`.
    #[pyo3(signature = (path, size_limit=None, inode_limit=None, read_only=false))]
    fn mount_tmpfs(
        &self,
        path: &Bound<'_, PyAny>,
        size_limit: Option<u64>,
        inode_limit: Option<u64>,
        read_only: bool,
    ) -> PyResult<()> {
        let fs = scalevfs::Tmpfs::new(scalevfs::TmpfsOptions {
            size_limit,
            inode_limit,
        });
        let opts = scalevfs::MountOptions::new().read_only(read_only);
        ok_path(
            self.get()?.mount_with(fspath(path)?, Arc::new(fs), opts),
            path,
        )
    }

    /// `mount(NULL, path, NULL, MS_REMOUNT | (MS_RDONLY if read_only), NULL)` (root only):
    /// `EBUSY` to read-only while a file on it is open for writing or an unlinked file is
    /// still open.
    fn remount(&self, path: &Bound<'_, PyAny>, read_only: bool) -> PyResult<()> {
        let opts = scalevfs::MountOptions::new().read_only(read_only);
        ok_path(self.get()?.remount(fspath(path)?, opts), path)
    }

    /// `umount2(path, flags)` (`MNT_FORCE`, `MNT_DETACH`, `MNT_EXPIRE`,
    /// `UMOUNT_NOFOLLOW`).
    fn umount2(&self, path: &Bound<'_, PyAny>, flags: i32) -> PyResult<()> {
        ok_path(self.get()?.umount2(fspath(path)?, flags), path)
    }

    /// `(f_type, f_bsize, f_blocks, f_bfree, f_bavail, f_files, f_ffree, f_namelen,
    /// f_frsize, f_flags)` of the file system `path` is on.
    fn statfs<'py>(
        &self,
        py: Python<'py>,
        path: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyTuple>> {
        let s = ok_path(self.get()?.statfs(fspath(path)?), path)?;
        (
            s.f_type, s.bsize, s.blocks, s.bfree, s.bavail, s.files, s.ffree, s.namelen, s.frsize,
            s.flags,
        )
            .into_pyobject(py)
    }
}

/// The native module.
#[pymodule]
fn _scalevfs(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Vfs>()?;
    m.add_class::<Process>()?;
    m.add("AT_FDCWD", libc::AT_FDCWD)?;
    m.add("MNT_FORCE", libc::MNT_FORCE)?;
    m.add("MNT_DETACH", libc::MNT_DETACH)?;
    m.add("MNT_EXPIRE", libc::MNT_EXPIRE)?;
    m.add("UMOUNT_NOFOLLOW", libc::UMOUNT_NOFOLLOW)?;
    m.add("MAX_RW_COUNT", MAX_RW_COUNT)?;
    Ok(())
}
