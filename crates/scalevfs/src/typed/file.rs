//! [`File`]: an open file of a [`Process`] that closes on drop, with `std::io`'s `Read`,
//! `Write` and `Seek`, record and `flock` locks with typed kinds, and (through
//! [`Descriptor`], which [`Dir`](super::Dir) shares) metadata and extended attributes.

use std::io::{self, Read, Seek, SeekFrom, Write};

use super::flags::{FlockOp, LockKind, Mode, XattrFlags};
use super::stat::Metadata;
use crate::{Errno, FcntlArg, Flock, Process, SysResult};

/// What the typed handles ([`File`], [`Dir`](super::Dir)) do through their descriptor.
pub trait Descriptor {
    /// The process the descriptor belongs to.
    fn process(&self) -> &Process;
    /// The descriptor number (valid until the handle is dropped).
    fn fd(&self) -> i32;

    /// `fstat`.
    fn metadata(&self) -> SysResult<Metadata> {
        self.process().fstat(self.fd()).map(Metadata::from)
    }
    /// `fchmod`.
    fn set_permissions(&self, mode: Mode) -> SysResult<()> {
        self.process().fchmod(self.fd(), mode.bits())
    }
    /// `fchown`; `None` leaves that id as it is.
    fn set_owner(&self, uid: Option<u32>, gid: Option<u32>) -> SysResult<()> {
        let keep = crate::UNCHANGED;
        self.process()
            .fchown(self.fd(), uid.unwrap_or(keep), gid.unwrap_or(keep))
    }
    /// `fsync`.
    fn sync_all(&self) -> SysResult<()> {
        self.process().fsync(self.fd())
    }
    /// `fgetxattr`: the whole value.
    fn xattr(&self, name: &[u8]) -> SysResult<Vec<u8>> {
        sized_read(|buf| self.process().fgetxattr(self.fd(), name, buf))
    }
    /// `fsetxattr`.
    fn set_xattr(&self, name: &[u8], value: &[u8], flags: XattrFlags) -> SysResult<()> {
        self.process()
            .fsetxattr(self.fd(), name, value, flags.bits())
    }
    /// `fremovexattr`.
    fn remove_xattr(&self, name: &[u8]) -> SysResult<()> {
        self.process().fremovexattr(self.fd(), name)
    }
    /// `flistxattr`: the attribute names, each without its NUL.
    fn list_xattr(&self) -> SysResult<XattrNames> {
        let list = sized_read(|buf| self.process().flistxattr(self.fd(), buf))?;
        Ok(XattrNames { list, at: 0 })
    }
}

/// Runs a call that fills a buffer and says how much it needs when given an empty one
/// (`getxattr`, `listxattr`): asks for the size, then reads, again if the value grew
/// meanwhile (`ERANGE`).
fn sized_read(mut call: impl FnMut(&mut [u8]) -> SysResult<usize>) -> SysResult<Vec<u8>> {
    loop {
        let size = call(&mut [])?;
        let mut buf = vec![0u8; size];
        match call(&mut buf) {
            Ok(n) => {
                buf.truncate(n);
                return Ok(buf);
            }
            Err(Errno::ERANGE) => continue,
            Err(e) => return Err(e),
        }
    }
}

/// The names `listxattr` returned, one item each (no NUL, no decoding).
#[derive(Clone, Debug)]
pub struct XattrNames {
    list: Vec<u8>,
    at: usize,
}

impl Iterator for XattrNames {
    type Item = Vec<u8>;
    fn next(&mut self) -> Option<Vec<u8>> {
        let rest = self.list.get(self.at..).filter(|r| !r.is_empty())?;
        let len = rest.iter().position(|&b| b == 0).unwrap_or(rest.len());
        self.at += len + 1;
        Some(rest[..len].to_vec())
    }
}

/// Who owns a record lock: the process (`F_SETLK`, released by any close of the file by
/// the process) or the open file description (`F_OFD_SETLK`, shared by its duplicates
/// and released with its last close).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum LockOwner {
    /// A POSIX record lock, owned by the process (`F_SETLK`, `F_SETLKW`, `F_GETLK`).
    Process,
    /// An open file description lock (`F_OFD_SETLK`, `F_OFD_SETLKW`, `F_OFD_GETLK`).
    OpenFile,
}

/// A byte range and lock kind, from the start of the file: `len` 0 means "to the end of
/// the file and beyond".
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct RecordLock {
    /// Read (shared), write (exclusive) or unlock (`l_type`).
    pub kind: LockKind,
    /// The first byte of the range, as an offset from the start of the file (`l_start`).
    pub start: i64,
    /// The length of the range in bytes; 0 for "to the end of the file and beyond" (`l_len`).
    pub len: i64,
}

impl RecordLock {
    /// A lock of `kind` on `len` bytes from `start`.
    pub fn new(kind: LockKind, start: i64, len: i64) -> RecordLock {
        RecordLock { kind, start, len }
    }
    fn flock(&self) -> Flock {
        Flock {
            l_type: self.kind.raw(),
            l_whence: 0, // SEEK_SET
            l_start: self.start,
            l_len: self.len,
            l_pid: 0,
        }
    }
}

/// A lock that `get_lock` found in the way.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct LockHolder {
    /// The conflicting lock's kind and byte range.
    pub lock: RecordLock,
    /// The holding process, for a POSIX lock; `None` for an OFD lock (`l_pid` -1).
    pub pid: Option<i32>,
}

/// An open file of a [`Process`], closed on drop.
pub struct File<'p> {
    proc: &'p Process,
    fd: i32,
}

impl std::fmt::Debug for File<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("File")
            .field("pid", &self.proc.pid())
            .field("fd", &self.fd)
            .finish()
    }
}

impl<'p> File<'p> {
    /// Takes ownership of `fd`, an open descriptor of `proc`: the `File` closes it.
    pub fn from_fd(proc: &'p Process, fd: i32) -> File<'p> {
        File { proc, fd }
    }
    /// Gives the descriptor up without closing it.
    pub fn into_fd(self) -> i32 {
        let fd = self.fd;
        std::mem::forget(self);
        fd
    }
    /// A second handle on the same open file description (`F_DUPFD_CLOEXEC`).
    pub fn try_clone(&self) -> SysResult<File<'p>> {
        let fd = self
            .proc
            .fcntl(self.fd, libc::F_DUPFD_CLOEXEC, FcntlArg::Int(0))?;
        Ok(File::from_fd(self.proc, fd))
    }
    /// `ftruncate`.
    pub fn set_len(&self, len: u64) -> SysResult<()> {
        let len = i64::try_from(len).map_err(|_| Errno::EINVAL)?;
        self.proc.ftruncate(self.fd, len)
    }
    /// `fdatasync`.
    pub fn sync_data(&self) -> SysResult<()> {
        self.proc.fdatasync(self.fd)
    }
    /// `pread64`: reads at `offset` without moving the file offset.
    pub fn read_at(&self, buf: &mut [u8], offset: u64) -> SysResult<usize> {
        let offset = i64::try_from(offset).map_err(|_| Errno::EINVAL)?;
        self.proc.pread64(self.fd, buf, offset)
    }
    /// `pwrite64`: writes at `offset` without moving the file offset.
    pub fn write_at(&self, buf: &[u8], offset: u64) -> SysResult<usize> {
        let offset = i64::try_from(offset).map_err(|_| Errno::EINVAL)?;
        self.proc.pwrite64(self.fd, buf, offset)
    }
    /// Takes or releases a record lock: `F_SETLK` (`EAGAIN` on a conflict) or, with
    /// `wait`, `F_SETLKW` (`EDEADLK` if waiting would deadlock); the OFD variants for
    /// [`LockOwner::OpenFile`].
    pub fn set_lock(&self, owner: LockOwner, lock: RecordLock, wait: bool) -> SysResult<()> {
        let cmd = match (owner, wait) {
            (LockOwner::Process, false) => libc::F_SETLK,
            (LockOwner::Process, true) => libc::F_SETLKW,
            (LockOwner::OpenFile, false) => libc::F_OFD_SETLK,
            (LockOwner::OpenFile, true) => libc::F_OFD_SETLKW,
        };
        let mut fl = lock.flock();
        self.proc
            .fcntl(self.fd, cmd, FcntlArg::Flock(&mut fl))
            .map(|_| ())
    }
    /// `F_GETLK` / `F_OFD_GETLK`: the first lock that would stop `lock` from being taken,
    /// or `None` if it could be.
    pub fn get_lock(&self, owner: LockOwner, lock: RecordLock) -> SysResult<Option<LockHolder>> {
        let cmd = match owner {
            LockOwner::Process => libc::F_GETLK,
            LockOwner::OpenFile => libc::F_OFD_GETLK,
        };
        let mut fl = lock.flock();
        self.proc.fcntl(self.fd, cmd, FcntlArg::Flock(&mut fl))?;
        let kind = LockKind::from_raw(fl.l_type).ok_or(Errno::EINVAL)?;
        if kind == LockKind::Unlock {
            return Ok(None);
        }
        Ok(Some(LockHolder {
            lock: RecordLock::new(kind, fl.l_start, fl.l_len),
            pid: (fl.l_pid > 0).then_some(fl.l_pid),
        }))
    }
    /// `flock(2)`: `EWOULDBLOCK` on a conflict unless `wait`.
    pub fn flock(&self, op: FlockOp, wait: bool) -> SysResult<()> {
        self.proc.flock(self.fd, op.raw(wait))
    }
}

impl Descriptor for File<'_> {
    fn process(&self) -> &Process {
        self.proc
    }
    fn fd(&self) -> i32 {
        self.fd
    }
}

impl Drop for File<'_> {
    fn drop(&mut self) {
        // The descriptor is ours; a close error (none for tmpfs) has no one to go to.
        let _ = self.proc.close(self.fd);
    }
}

impl Read for &File<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        Ok(self.proc.read(self.fd, buf)?)
    }
}

impl Write for &File<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        Ok(self.proc.write(self.fd, buf)?)
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Seek for &File<'_> {
    fn seek(&mut self, pos: SeekFrom) -> io::Result<u64> {
        let (off, whence) = match pos {
            SeekFrom::Start(n) => (i64::try_from(n).map_err(|_| Errno::EINVAL)?, libc::SEEK_SET),
            SeekFrom::Current(n) => (n, libc::SEEK_CUR),
            SeekFrom::End(n) => (n, libc::SEEK_END),
        };
        let at = self.proc.lseek(self.fd, off, whence)?;
        Ok(u64::try_from(at).map_err(|_| Errno::EOVERFLOW)?)
    }
}

impl Read for File<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        (&*self).read(buf)
    }
}

impl Write for File<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        (&*self).write(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Seek for File<'_> {
    fn seek(&mut self, pos: SeekFrom) -> io::Result<u64> {
        (&*self).seek(pos)
    }
}
