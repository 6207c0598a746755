"""scalevfs: a Linux-compatible VFS in user space, with an ``os``-style face.

A :class:`Vfs` is a tree of files in memory (a tmpfs at ``/``); a :class:`Process` is a
guest process in it (credentials, descriptor table, cwd, umask, POSIX lock owner), with
``os``-style methods (``mkdir``, ``stat``, ``listdir``, ``rename``, ``pipe``, ...),
:meth:`Process.open` returning a file object, ``fcntl`` locks, ``flock`` and an
``epoll`` object like ``select.epoll``. Errors are ``OSError`` subclasses
(``FileNotFoundError``, ``PermissionError``, ...) with Linux's errno and the file name.

Paths are ``str``, ``bytes`` or ``os.PathLike``; ``bytes`` need not be UTF-8, and
methods that return names return ``bytes`` for a ``bytes`` argument, as ``os`` does.
Blocking calls (``F_SETLKW``, ``flock``, reads of pipes, ``epoll.poll``) release the GIL.

>>> import os, scalevfs
>>> p = scalevfs.Vfs().process()
>>> with p.open("/hello", os.O_CREAT | os.O_RDWR) as f:
...     f.write(b"hi")
2
>>> p.stat("/hello").st_size
2
"""

from __future__ import annotations

import errno as _errno
import io
import math
import os
import select as _select
from typing import Any, List, Optional, Tuple, Union

from . import _scalevfs

__all__ = [
    "AT_FDCWD",
    "MNT_FORCE",
    "MNT_DETACH",
    "MNT_EXPIRE",
    "UMOUNT_NOFOLLOW",
    "Vfs",
    "Process",
    "File",
    "Epoll",
    "PathArg",
]

#: ``dir_fd`` for "relative to the cwd" (Linux's ``AT_FDCWD``).
AT_FDCWD: int = _scalevfs.AT_FDCWD

#: ``umount`` flags (Linux's values; the ``os`` module has none of them).
MNT_FORCE: int = _scalevfs.MNT_FORCE
MNT_DETACH: int = _scalevfs.MNT_DETACH
MNT_EXPIRE: int = _scalevfs.MNT_EXPIRE
UMOUNT_NOFOLLOW: int = _scalevfs.UMOUNT_NOFOLLOW

PathArg = Union[str, bytes, "os.PathLike[str]", "os.PathLike[bytes]"]

# Linux's values (the os and fcntl modules lack some of them).
_AT_SYMLINK_NOFOLLOW = 0x100
_AT_REMOVEDIR = 0x200
_AT_EACCESS = 0x200
_RENAME_NOREPLACE = 1
_F_GETLK, _F_SETLK, _F_SETLKW = 5, 6, 7
_F_OFD_GETLK = 36
_F_RDLCK, _F_WRLCK, _F_UNLCK = 0, 1, 2
_EPOLL_CTL_ADD, _EPOLL_CTL_DEL, _EPOLL_CTL_MOD = 1, 2, 3
_READ_CHUNK = 64 * 1024


def _names_like(path: Any, name: bytes) -> Union[str, bytes]:
    """``name`` as ``os`` would return it for ``path``: bytes for a bytes path."""
    if isinstance(path, bytes) or (
        not isinstance(path, str) and isinstance(os.fspath(path), bytes)
    ):
        return name
    return os.fsdecode(name)


_STAT_EXTRA = (
    "st_atime",
    "st_mtime",
    "st_ctime",
    "st_atime_ns",
    "st_mtime_ns",
    "st_ctime_ns",
    "st_blksize",
    "st_blocks",
    "st_rdev",
)


def _positional_stat_layout() -> bool:
    """Whether ``os.stat_result`` takes exactly the 10 visible fields and then
    ``_STAT_EXTRA`` in order (CPython on Linux), so it can be built from one tuple (2.5
    times faster than the keyword dict that works everywhere)."""
    n = os.stat_result.n_fields
    if n != 10 + len(_STAT_EXTRA):
        return False
    probe = os.stat_result(tuple(range(n)))
    return all(getattr(probe, name, None) == 10 + i for i, name in enumerate(_STAT_EXTRA))


_POSITIONAL_STAT = _positional_stat_layout()


def _stat_result(t: Any) -> os.stat_result:
    (mode, ino, dev, nlink, uid, gid, size), times, (blksize, blocks, rdev) = t
    a_s, a_ns, m_s, m_ns, c_s, c_ns = times
    extra = (
        a_s + a_ns * 1e-9,
        m_s + m_ns * 1e-9,
        c_s + c_ns * 1e-9,
        a_s * 1_000_000_000 + a_ns,
        m_s * 1_000_000_000 + m_ns,
        c_s * 1_000_000_000 + c_ns,
        blksize,
        blocks,
        rdev,
    )
    visible = (mode, ino, dev, nlink, uid, gid, size, a_s, m_s, c_s)
    if _POSITIONAL_STAT:
        return os.stat_result(visible + extra)
    return os.stat_result(visible, dict(zip(_STAT_EXTRA, extra)))


def _fd(obj: Any) -> int:
    """A descriptor number, or an object's ``fileno()`` (as ``select`` takes them)."""
    if isinstance(obj, int):
        return obj
    return int(obj.fileno())


class Vfs:
    """A tree of files in memory: a tmpfs at ``/`` of at most ``size_limit`` bytes and
    ``inode_limit`` inodes (``None``: unlimited; past them: ``ENOSPC``)."""

    def __init__(
        self, size_limit: Optional[int] = None, inode_limit: Optional[int] = None
    ) -> None:
        self._vfs = _scalevfs.Vfs(size_limit, inode_limit)

    def process(self, uid: int = 0, gid: int = 0, groups: Tuple[int, ...] = ()) -> Process:
        """A new process with these credentials (uid 0: root); cwd ``/``, umask 022."""
        return Process(self._vfs.process(uid, gid, list(groups)))

    def proc_locks(self) -> str:
        """Every held and waiting file lock, as ``/proc/locks`` shows them."""
        return self._vfs.proc_locks()


class Process:
    """A process in a :class:`Vfs`. Methods follow ``os`` (names, arguments, errors);
    :meth:`exit` is process exit (descriptors close, locks go; later calls raise
    ``OSError(EBADF)``). Usable from many threads, and as a context manager that exits."""

    def __init__(self, native: _scalevfs.Process) -> None:
        self._p = native

    def __repr__(self) -> str:
        state = " exited" if self._p.exited else ""
        return f"<scalevfs.Process pid={self.pid} uid={self.uid} gid={self.gid}{state}>"

    def __enter__(self) -> Process:
        return self

    def __exit__(self, *exc: object) -> None:
        self.exit()

    @property
    def pid(self) -> int:
        return self._p.pid

    @property
    def uid(self) -> int:
        return self._p.uid

    @property
    def gid(self) -> int:
        return self._p.gid

    @property
    def exited(self) -> bool:
        return self._p.exited

    def exit(self) -> None:
        """Process exit: closes every descriptor (its locks go with them). Idempotent."""
        self._p.exit()

    def fork(self) -> Process:
        """A child sharing the open files (a copy of the descriptor table), cwd, umask
        and credentials, with its own pid (POSIX lock owner)."""
        return Process(self._p.fork())

    # --- files ---

    def open(
        self,
        path: PathArg,
        flags: int = os.O_RDONLY,
        mode: int = 0o666,
        *,
        dir_fd: Optional[int] = None,
    ) -> File:
        """``open(2)`` as a file object (``read``, ``write``, ``seek``, ``with``)."""
        fd = self._p.openat(AT_FDCWD if dir_fd is None else dir_fd, path, flags, mode)
        return File(self, fd, path, flags)

    def os_open(
        self, path: PathArg, flags: int, mode: int = 0o777, *, dir_fd: Optional[int] = None
    ) -> int:
        """``os.open``: a descriptor number."""
        return self._p.openat(AT_FDCWD if dir_fd is None else dir_fd, path, flags, mode)

    def close(self, fd: int) -> None:
        self._p.close(fd)

    def read(self, fd: int, n: int) -> bytes:
        return self._p.read(fd, n)

    def write(self, fd: int, data: bytes) -> int:
        return self._p.write(fd, data if isinstance(data, bytes) else bytes(data))

    def pread(self, fd: int, n: int, offset: int) -> bytes:
        return self._p.pread(fd, n, offset)

    def pwrite(self, fd: int, data: bytes, offset: int) -> int:
        return self._p.pwrite(fd, data if isinstance(data, bytes) else bytes(data), offset)

    def lseek(self, fd: int, pos: int, whence: int) -> int:
        return self._p.lseek(fd, pos, whence)

    def dup(self, fd: int) -> int:
        return self._p.dup(fd)

    def dup2(self, fd: int, fd2: int, inheritable: bool = True) -> int:
        if inheritable:
            return self._p.dup2(fd, fd2)
        return self._p.dup3(fd, fd2, os.O_CLOEXEC)

    def pipe(self, flags: int = 0) -> Tuple[int, int]:
        """``pipe2(flags)``: ``(read end, write end)``."""
        return self._p.pipe2(flags)

    def eventfd(self, initval: int = 0, flags: int = 0) -> int:
        return self._p.eventfd(initval, flags)

    def ftruncate(self, fd: int, length: int) -> None:
        self._p.ftruncate(fd, length)

    def truncate(self, path: Union[PathArg, int], length: int) -> None:
        if isinstance(path, int):
            self._p.ftruncate(path, length)
        else:
            self._p.truncate(path, length)

    # --- metadata ---

    def stat(
        self,
        path: Union[PathArg, int],
        *,
        dir_fd: Optional[int] = None,
        follow_symlinks: bool = True,
    ) -> os.stat_result:
        """``os.stat`` (a descriptor number: ``fstat``)."""
        if isinstance(path, int):
            return _stat_result(self._p.fstat(path))
        flags = 0 if follow_symlinks else _AT_SYMLINK_NOFOLLOW
        d = AT_FDCWD if dir_fd is None else dir_fd
        return _stat_result(self._p.newfstatat(d, path, flags))

    def lstat(self, path: PathArg, *, dir_fd: Optional[int] = None) -> os.stat_result:
        return self.stat(path, dir_fd=dir_fd, follow_symlinks=False)

    def fstat(self, fd: int) -> os.stat_result:
        return _stat_result(self._p.fstat(fd))

    def chmod(
        self,
        path: Union[PathArg, int],
        mode: int,
        *,
        dir_fd: Optional[int] = None,
        follow_symlinks: bool = True,
    ) -> None:
        if isinstance(path, int):
            self._p.fchmod(path, mode)
            return
        flags = 0 if follow_symlinks else _AT_SYMLINK_NOFOLLOW
        self._p.fchmodat(AT_FDCWD if dir_fd is None else dir_fd, path, mode, flags)

    def fchmod(self, fd: int, mode: int) -> None:
        self._p.fchmod(fd, mode)

    def chown(
        self,
        path: Union[PathArg, int],
        uid: int,
        gid: int,
        *,
        dir_fd: Optional[int] = None,
        follow_symlinks: bool = True,
    ) -> None:
        if isinstance(path, int):
            self._p.fchown(path, uid, gid)
            return
        flags = 0 if follow_symlinks else _AT_SYMLINK_NOFOLLOW
        self._p.fchownat(AT_FDCWD if dir_fd is None else dir_fd, path, uid, gid, flags)

    def access(
        self,
        path: PathArg,
        mode: int,
        *,
        dir_fd: Optional[int] = None,
        effective_ids: bool = False,
        follow_symlinks: bool = True,
    ) -> bool:
        """``os.access``: ``True`` if allowed (errors other than the answer still raise
        nothing, as in ``os``)."""
        flags = (_AT_EACCESS if effective_ids else 0) | (
            0 if follow_symlinks else _AT_SYMLINK_NOFOLLOW
        )
        try:
            self._p.faccessat(AT_FDCWD if dir_fd is None else dir_fd, path, mode, flags)
        except OSError:
            return False
        return True

    def umask(self, mask: int) -> int:
        return self._p.umask(mask)

    def mount_tmpfs(
        self,
        path: PathArg,
        *,
        size: Optional[int] = None,
        nr_inodes: Optional[int] = None,
        read_only: bool = False,
    ) -> None:
        """Mounts a fresh tmpfs on the directory ``path`` (root only), as ``mount -t tmpfs
        -o size=SIZE,nr_inodes=N[,ro]``: ``None`` is unlimited; on a ``read_only`` mount
        every change raises ``OSError(EROFS)``."""
        self._p.mount_tmpfs(path, size, nr_inodes, read_only)

    def remount(self, path: PathArg, *, read_only: bool) -> None:
        """``mount -o remount,ro`` (or ``rw``) of the mount at ``path`` (root only): going
        read-only raises ``OSError(EBUSY)`` while a file on it is open for writing or an
        unlinked file is still open."""
        self._p.remount(path, read_only)

    def umount(self, path: PathArg, flags: int = 0) -> None:
        """``umount2(2)``: ``flags`` from ``MNT_FORCE``, ``MNT_DETACH``, ``MNT_EXPIRE``,
        ``UMOUNT_NOFOLLOW``. A mount in use raises ``OSError(EBUSY)`` unless
        ``MNT_DETACH``."""
        self._p.umount2(path, flags)

    def statfs(self, path: PathArg) -> Tuple[int, ...]:
        """``statfs(2)``: ``(f_type, f_bsize, f_blocks, f_bfree, f_bavail, f_files,
        f_ffree, f_namelen, f_frsize, f_flags)``."""
        return self._p.statfs(path)

    # --- names ---

    def mkdir(self, path: PathArg, mode: int = 0o777, *, dir_fd: Optional[int] = None) -> None:
        self._p.mkdirat(AT_FDCWD if dir_fd is None else dir_fd, path, mode)

    def makedirs(self, path: PathArg, mode: int = 0o777, exist_ok: bool = False) -> None:
        """``os.makedirs``."""
        p = os.fsdecode(path)
        head, tail = os.path.split(p)
        if not tail:
            head, tail = os.path.split(head)
        if head and tail and not self.exists(head):
            self.makedirs(head, mode, exist_ok=True)
        try:
            self.mkdir(p, mode)
        except OSError:
            if not exist_ok or not self.isdir(p):
                raise

    def rmdir(self, path: PathArg, *, dir_fd: Optional[int] = None) -> None:
        self._p.unlinkat(AT_FDCWD if dir_fd is None else dir_fd, path, _AT_REMOVEDIR)

    def unlink(self, path: PathArg, *, dir_fd: Optional[int] = None) -> None:
        self._p.unlinkat(AT_FDCWD if dir_fd is None else dir_fd, path, 0)

    remove = unlink

    def rename(self, src: PathArg, dst: PathArg) -> None:
        """``os.rename`` (replaces ``dst``; ``rename(2)``)."""
        self._p.renameat2(AT_FDCWD, src, AT_FDCWD, dst, 0)

    replace = rename

    def rename_noreplace(self, src: PathArg, dst: PathArg) -> None:
        """``renameat2(RENAME_NOREPLACE)``: ``FileExistsError`` if ``dst`` exists."""
        self._p.renameat2(AT_FDCWD, src, AT_FDCWD, dst, _RENAME_NOREPLACE)

    def link(self, src: PathArg, dst: PathArg) -> None:
        self._p.linkat(AT_FDCWD, src, AT_FDCWD, dst, 0)

    def symlink(self, src: PathArg, dst: PathArg) -> None:
        """``os.symlink``: a link at ``dst`` pointing to ``src``."""
        self._p.symlinkat(src, AT_FDCWD, dst)

    def readlink(self, path: PathArg, *, dir_fd: Optional[int] = None) -> Union[str, bytes]:
        target = self._p.readlinkat(AT_FDCWD if dir_fd is None else dir_fd, path)
        return _names_like(path, target)

    def listdir(self, path: PathArg = ".") -> List[Any]:
        """``os.listdir``: names (``bytes`` for a ``bytes`` path), without ``.``/``..``."""
        return [_names_like(path, name) for name, _ino, _type in self._p.readdir(path)]

    def exists(self, path: PathArg) -> bool:
        try:
            self._p.newfstatat(AT_FDCWD, path, 0)
        except OSError:
            return False
        return True

    def isdir(self, path: PathArg) -> bool:
        try:
            return (self._p.newfstatat(AT_FDCWD, path, 0)[0][0] & 0o170000) == 0o040000
        except OSError:
            return False

    def chdir(self, path: Union[PathArg, int]) -> None:
        if isinstance(path, int):
            self._p.fchdir(path)
        else:
            self._p.chdir(path)

    def getcwd(self) -> str:
        return os.fsdecode(self._p.getcwd())

    def getcwdb(self) -> bytes:
        return self._p.getcwd()

    # --- extended attributes (os.getxattr & co.) ---

    def getxattr(self, path: PathArg, attribute: PathArg, *, follow_symlinks: bool = True) -> bytes:
        return self._p.getxattr(path, attribute, follow_symlinks)

    def setxattr(
        self,
        path: PathArg,
        attribute: PathArg,
        value: bytes,
        flags: int = 0,
        *,
        follow_symlinks: bool = True,
    ) -> None:
        self._p.setxattr(path, attribute, bytes(value), flags, follow_symlinks)

    def listxattr(self, path: PathArg, *, follow_symlinks: bool = True) -> List[str]:
        return [os.fsdecode(n) for n in self._p.listxattr(path, follow_symlinks)]

    def removexattr(self, path: PathArg, attribute: PathArg, *, follow_symlinks: bool = True) -> None:
        self._p.removexattr(path, attribute, follow_symlinks)

    # --- locks ---

    def fcntl(self, fd: Any, cmd: int, arg: int = 0) -> int:
        """``fcntl`` with an integer argument (``F_GETFL``, ``F_SETFL``, ``F_DUPFD``...)."""
        return self._p.fcntl(_fd(fd), cmd, arg)

    def fcntl_lock(
        self,
        fd: Any,
        cmd: int,
        type: int,
        start: int = 0,
        len: int = 0,
        whence: int = os.SEEK_SET,
    ) -> Optional[Tuple[int, int, int, int, int]]:
        """A record lock: ``cmd`` is ``fcntl.F_SETLK``, ``F_SETLKW``, ``F_GETLK`` or the
        ``F_OFD_*`` ones, ``type`` ``fcntl.F_RDLCK``, ``F_WRLCK`` or ``F_UNLCK``; ``len``
        0 is "to the end and beyond". ``F_SETLKW`` waits (releasing the GIL) and raises
        ``OSError(EDEADLK)`` when waiting would deadlock; ``F_SETLK`` raises
        ``BlockingIOError`` (``EAGAIN``) on a conflict. ``F_GETLK`` returns
        ``(type, whence, start, len, pid)`` (type ``F_UNLCK``: no conflict); the others
        ``None``."""
        r = self._p.fcntl_lock(_fd(fd), cmd, type, whence, start, len)
        if cmd in (_F_GETLK, _F_OFD_GETLK):
            return r
        return None

    def lockf(self, fd: Any, cmd: int, len: int = 0) -> None:
        """``os.lockf``: ``os.F_LOCK``, ``F_TLOCK``, ``F_ULOCK`` or ``F_TEST`` on ``len``
        bytes from the current position (0: to the end and beyond), as POSIX locks."""
        fd = _fd(fd)
        if cmd == os.F_TEST:
            t = self._p.fcntl_lock(fd, _F_GETLK, _F_WRLCK, os.SEEK_CUR, 0, len)
            if t[0] != _F_UNLCK and t[4] != self.pid:
                raise OSError(_errno.EACCES, os.strerror(_errno.EACCES))
            return
        how = {
            os.F_LOCK: (_F_SETLKW, _F_WRLCK),
            os.F_TLOCK: (_F_SETLK, _F_WRLCK),
            os.F_ULOCK: (_F_SETLK, _F_UNLCK),
        }.get(cmd)
        if how is None:
            raise OSError(_errno.EINVAL, os.strerror(_errno.EINVAL))
        self._p.fcntl_lock(fd, how[0], how[1], os.SEEK_CUR, 0, len)

    def flock(self, fd: Any, operation: int) -> None:
        """``fcntl.flock``: ``LOCK_SH``, ``LOCK_EX``, ``LOCK_UN``, ``| LOCK_NB``."""
        self._p.flock(_fd(fd), operation)

    # --- polling ---

    def epoll(self, sizehint: int = -1, flags: int = 0) -> Epoll:
        """A new epoll instance, used like ``select.epoll``."""
        return Epoll(self, self._p.epoll_create1(flags))

    def poll(self, fds: List[Tuple[int, int]], timeout_ms: int = -1) -> List[Tuple[int, int]]:
        """``poll(2)``: ``[(fd, events)]`` in, ``[(fd, revents)]`` for the ready ones out."""
        return self._p.poll(fds, timeout_ms)


class File(io.RawIOBase):
    """An open file of a :class:`Process` (``Process.open``): unbuffered, like
    ``open(..., buffering=0)``. ``close()`` closes the descriptor."""

    def __init__(self, process: Process, fd: int, name: Any, flags: int) -> None:
        super().__init__()
        self._proc = process
        self._fd = fd
        self.name = name
        self._flags = flags

    def __repr__(self) -> str:
        return f"<scalevfs.File name={self.name!r} fd={self._fd} closed={self.closed}>"

    def _check(self) -> None:
        if self.closed:
            raise ValueError("I/O operation on closed file")

    def fileno(self) -> int:
        self._check()
        return self._fd

    def readable(self) -> bool:
        self._check()
        return self._flags & os.O_ACCMODE != os.O_WRONLY

    def writable(self) -> bool:
        self._check()
        return self._flags & os.O_ACCMODE != os.O_RDONLY

    def seekable(self) -> bool:
        self._check()
        try:
            self._proc._p.lseek(self._fd, 0, os.SEEK_CUR)
        except OSError:
            return False
        return True

    def read(self, size: Optional[int] = -1) -> bytes:
        """Up to ``size`` bytes (one ``read(2)``); all of the rest for ``-1``/``None``."""
        self._check()
        if size is None or size < 0:
            return self.readall()
        return self._proc._p.read(self._fd, size)

    def readall(self) -> bytes:
        self._check()
        chunks: List[bytes] = []
        while True:
            b = self._proc._p.read(self._fd, _READ_CHUNK)
            if not b:
                return b"".join(chunks)
            chunks.append(b)

    def readinto(self, buffer: Any) -> int:
        self._check()
        m = memoryview(buffer).cast("B")
        data = self._proc._p.read(self._fd, len(m))
        m[: len(data)] = data
        return len(data)

    def write(self, b: Any) -> int:
        self._check()
        return self._proc._p.write(self._fd, b if isinstance(b, bytes) else bytes(b))

    def seek(self, offset: int, whence: int = os.SEEK_SET) -> int:
        self._check()
        return self._proc._p.lseek(self._fd, offset, whence)

    def tell(self) -> int:
        return self.seek(0, os.SEEK_CUR)

    def truncate(self, size: Optional[int] = None) -> int:
        self._check()
        if size is None:
            size = self.tell()
        self._proc._p.ftruncate(self._fd, size)
        return size

    def stat(self) -> os.stat_result:
        self._check()
        return _stat_result(self._proc._p.fstat(self._fd))

    def close(self) -> None:
        if self.closed:
            return
        try:
            # After the process's exit the descriptor is already gone.
            if not self._proc._p.exited:
                self._proc._p.close(self._fd)
        finally:
            super().close()


class Epoll:
    """An epoll instance of a :class:`Process`, used like ``select.epoll``: descriptors
    (or objects with ``fileno()``) are registered with ``select.EPOLL*`` masks, and
    :meth:`poll` returns ``[(fd, events)]``."""

    def __init__(self, process: Process, epfd: int) -> None:
        self._proc = process
        self._epfd: Optional[int] = epfd

    def __enter__(self) -> Epoll:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def closed(self) -> bool:
        return self._epfd is None

    def _ep(self) -> int:
        if self._epfd is None:
            raise ValueError("I/O operation on closed epoll object")
        return self._epfd

    def fileno(self) -> int:
        return self._ep()

    def close(self) -> None:
        if self._epfd is not None:
            epfd, self._epfd = self._epfd, None
            if not self._proc._p.exited:
                self._proc._p.close(epfd)

    def register(
        self,
        fd: Any,
        eventmask: int = _select.EPOLLIN | _select.EPOLLPRI | _select.EPOLLOUT,
    ) -> None:
        n = _fd(fd)
        self._proc._p.epoll_ctl(self._ep(), _EPOLL_CTL_ADD, n, eventmask, n)

    def modify(self, fd: Any, eventmask: int) -> None:
        n = _fd(fd)
        self._proc._p.epoll_ctl(self._ep(), _EPOLL_CTL_MOD, n, eventmask, n)

    def unregister(self, fd: Any) -> None:
        n = _fd(fd)
        self._proc._p.epoll_ctl(self._ep(), _EPOLL_CTL_DEL, n, 0, n)

    def poll(self, timeout: Optional[float] = None, maxevents: int = -1) -> List[Tuple[int, int]]:
        """Waits up to ``timeout`` seconds (``None`` or negative: forever) for events;
        releases the GIL while it waits."""
        if timeout is None or timeout < 0:
            ms = -1
        else:
            ms = math.ceil(timeout * 1000)
        if maxevents < 0:
            maxevents = 1024
        elif maxevents == 0:
            raise ValueError("maxevents must be greater than 0")
        return [(int(d), ev) for d, ev in self._proc._p.epoll_wait(self._ep(), maxevents, ms)]
