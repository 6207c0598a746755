"""The scalevfs Python package: files, names, metadata, permissions, locks (EDEADLK
between two processes' blocking locks, in threads), epoll, and bad input."""

import errno
import fcntl
import os
import select
import stat
import threading
import time

import pytest

import scalevfs


@pytest.fixture
def vfs():
    return scalevfs.Vfs()


@pytest.fixture
def root(vfs):
    with vfs.process() as p:
        yield p


# --- files ---


def test_open_write_read_seek_close(root):
    with root.open("/hello", os.O_CREAT | os.O_RDWR, 0o644) as f:
        assert f.write(b"hello, world") == 12
        assert f.seek(0) == 0
        assert f.read(5) == b"hello"
        assert f.read() == b", world"
        assert f.read() == b""
        assert f.tell() == 12
        assert f.seek(-5, os.SEEK_END) == 7
        assert f.read(-1) == b"world"
        fd = f.fileno()
        assert isinstance(fd, int) and fd >= 0
        assert f.readable() and f.writable() and f.seekable()
    assert f.closed
    with root.open("/hello") as f:
        assert f.readall() == b"hello, world"
        assert not f.writable()
        buf = bytearray(5)
        f.seek(0)
        assert f.readinto(buf) == 5 and buf == b"hello"


def test_large_read_in_chunks(root):
    data = os.urandom(300_000)
    with root.open("/big", os.O_CREAT | os.O_WRONLY) as f:
        assert f.write(data) == len(data)
        assert f.write(memoryview(b"xyz")) == 3
    with root.open("/big") as f:
        assert f.read() == data + b"xyz"


def test_os_style_descriptors(root):
    fd = root.os_open("/f", os.O_CREAT | os.O_RDWR, 0o600)
    assert root.write(fd, b"abcdef") == 6
    assert root.lseek(fd, 1, os.SEEK_SET) == 1
    assert root.read(fd, 2) == b"bc"
    assert root.pread(fd, 3, 3) == b"def"
    assert root.pwrite(fd, b"XY", 0) == 2
    fd2 = root.dup(fd)
    assert fd2 != fd
    assert root.pread(fd2, 6, 0) == b"XYcdef"
    assert root.dup2(fd, 50) == 50
    root.close(fd2)
    root.close(50)
    root.ftruncate(fd, 2)
    assert root.fstat(fd).st_size == 2
    root.close(fd)
    with pytest.raises(OSError) as e:
        root.close(fd)
    assert e.value.errno == errno.EBADF


def test_pipe(root):
    r, w = root.pipe()
    assert root.write(w, b"ping") == 4
    assert root.read(r, 100) == b"ping"
    root.close(w)
    assert root.read(r, 100) == b""
    root.close(r)
    r, w = root.pipe(os.O_NONBLOCK)
    with pytest.raises(BlockingIOError):
        root.read(r, 1)


# --- names and metadata ---


def test_mkdir_listdir_rename_unlink_rmdir(root):
    root.mkdir("/d")
    root.mkdir("/d/sub", 0o700)
    for name in ("a", "b", "c"):
        with root.open(f"/d/{name}", os.O_CREAT | os.O_WRONLY):
            pass
    assert sorted(root.listdir("/d")) == ["a", "b", "c", "sub"]
    assert sorted(root.listdir(b"/d")) == [b"a", b"b", b"c", b"sub"]
    root.rename("/d/a", "/d/z")
    assert sorted(root.listdir("/d")) == ["b", "c", "sub", "z"]
    root.unlink("/d/z")
    root.remove("/d/b")
    with pytest.raises(FileExistsError):
        root.mkdir("/d/sub")
    with pytest.raises(OSError) as e:
        root.rmdir("/d")
    assert e.value.errno == errno.ENOTEMPTY
    root.unlink("/d/c")
    root.rmdir("/d/sub")
    root.rmdir("/d")
    assert root.listdir("/") == []
    root.chdir("/")
    assert root.listdir() == []


def test_makedirs_and_cwd(root):
    root.makedirs("/a/b/c")
    root.makedirs("/a/b/c", exist_ok=True)
    with pytest.raises(FileExistsError):
        root.makedirs("/a/b/c")
    root.chdir("/a/b")
    assert root.getcwd() == "/a/b"
    assert root.getcwdb() == b"/a/b"
    assert root.listdir() == ["c"]


def test_stat_result(root):
    before = time.time()
    with root.open("/s", os.O_CREAT | os.O_WRONLY, 0o640) as f:
        f.write(b"12345")
    st = root.stat("/s")
    assert isinstance(st, os.stat_result)
    assert stat.S_ISREG(st.st_mode)
    assert stat.S_IMODE(st.st_mode) == 0o640  # umask 022
    assert st.st_size == 5
    assert st.st_nlink == 1
    assert st.st_uid == 0 and st.st_gid == 0
    assert st.st_ino > 0
    assert st.st_blksize > 0
    assert before - 2 <= st.st_mtime <= time.time() + 2
    assert st.st_mtime_ns // 1_000_000_000 == st[stat.ST_MTIME]
    assert stat.S_ISDIR(root.stat("/").st_mode)
    assert root.stat(root.os_open("/s", os.O_RDONLY)).st_size == 5


def test_chmod_symlink_readlink_link(root):
    with root.open("/t", os.O_CREAT | os.O_WRONLY):
        pass
    root.chmod("/t", 0o600)
    assert stat.S_IMODE(root.stat("/t").st_mode) == 0o600
    root.symlink("t", "/l")
    assert root.readlink("/l") == "t"
    assert root.readlink(b"/l") == b"t"
    assert stat.S_ISLNK(root.lstat("/l").st_mode)
    assert stat.S_ISREG(root.stat("/l").st_mode)
    root.link("/t", "/hard")
    assert root.stat("/t").st_nlink == 2
    with pytest.raises(FileExistsError) as e:
        root.rename_noreplace("/t", "/hard")
    assert e.value.filename == "/t" and e.value.filename2 == "/hard"


def test_xattrs(root):
    with root.open("/x", os.O_CREAT | os.O_WRONLY):
        pass
    root.setxattr("/x", "user.color", b"blue")
    assert root.getxattr("/x", "user.color") == b"blue"
    assert root.listxattr("/x") == ["user.color"]
    root.removexattr("/x", "user.color")
    assert root.listxattr("/x") == []


def test_errors_are_oserror_subclasses_with_filename(root):
    with pytest.raises(FileNotFoundError) as e:
        root.open("/missing/file")
    assert e.value.errno == errno.ENOENT
    assert e.value.filename == "/missing/file"
    assert e.value.strerror == os.strerror(errno.ENOENT)
    with pytest.raises(FileNotFoundError) as e:
        root.stat(b"/nope")
    assert e.value.filename == b"/nope"
    root.mkdir("/dir")
    with pytest.raises(IsADirectoryError):
        root.open("/dir", os.O_WRONLY)
    with pytest.raises(NotADirectoryError):
        root.listdir(root.open("/file", os.O_CREAT).name)


def test_size_limit_enospc():
    with scalevfs.Vfs(size_limit=64 * 1024).process() as p:
        with p.open("/f", os.O_CREAT | os.O_WRONLY) as f:
            with pytest.raises(OSError) as e:
                f.write(b"x" * (128 * 1024))
                f.write(b"x" * (128 * 1024))
            assert e.value.errno == errno.ENOSPC


# --- mounts ---


def test_mount_tmpfs_limits_read_only_and_umount(vfs, root):
    root.mkdir("/rw")
    root.mkdir("/ro")
    with vfs.process(uid=1000, gid=1000) as user:
        with pytest.raises(PermissionError) as e:
            user.mount_tmpfs("/rw")
        assert e.value.errno == errno.EPERM and e.value.filename == "/rw"
    root.mount_tmpfs("/rw", size=8192, nr_inodes=16)
    assert root.statfs("/rw")[5] == 16  # f_files
    with root.open("/rw/f", os.O_CREAT | os.O_WRONLY) as f:
        f.write(b"x" * 8192)
        with pytest.raises(OSError) as e:
            f.write(b"x")
        assert e.value.errno == errno.ENOSPC
        with pytest.raises(OSError) as e:
            root.umount("/rw")
        assert e.value.errno == errno.EBUSY
    # Remounting read-only waits for the writer to close.
    with root.open("/rw/g", os.O_CREAT | os.O_WRONLY) as f:
        with pytest.raises(OSError) as e:
            root.remount("/rw", read_only=True)
        assert e.value.errno == errno.EBUSY
    root.remount("/rw", read_only=True)
    with pytest.raises(OSError) as e:
        root.open("/rw/g", os.O_WRONLY)
    assert e.value.errno == errno.EROFS
    root.remount("/rw", read_only=False)
    root.umount("/rw")
    assert not root.exists("/rw/f")

    root.mount_tmpfs("/ro", read_only=True)
    assert root.statfs("/ro")[9] & os.ST_RDONLY
    with pytest.raises(OSError) as e:
        root.open("/ro/f", os.O_CREAT | os.O_WRONLY)
    assert e.value.errno == errno.EROFS and e.value.filename == "/ro/f"
    with pytest.raises(OSError) as e:
        root.mkdir("/ro/d")
    assert e.value.errno == errno.EROFS
    root.umount("/ro", scalevfs.MNT_DETACH)
    root.mkdir("/ro/d")  # the directory beneath, writable


# --- permissions ---


def test_permissions_for_a_non_root_process(vfs, root):
    root.mkdir("/private", 0o700)
    with root.open("/private/secret", os.O_CREAT | os.O_WRONLY, 0o600) as f:
        f.write(b"s")
    with root.open("/readonly", os.O_CREAT | os.O_WRONLY, 0o644):
        pass
    with vfs.process(uid=1000, gid=1000) as user:
        with pytest.raises(PermissionError) as e:
            user.open("/private/secret")
        assert e.value.errno == errno.EACCES
        assert e.value.filename == "/private/secret"
        with pytest.raises(PermissionError) as e:
            user.listdir("/private")
        assert e.value.errno == errno.EACCES
        with pytest.raises(PermissionError) as e:
            user.open("/readonly", os.O_WRONLY)
        assert e.value.errno == errno.EACCES
        with pytest.raises(PermissionError) as e:
            user.chmod("/readonly", 0o777)
        assert e.value.errno == errno.EPERM
        assert user.access("/readonly", os.R_OK)
        assert not user.access("/readonly", os.W_OK)
        # Its own files are its own.
        user.mkdir("/tmp-user")
        assert root.stat("/tmp-user").st_uid == 1000


# --- locks ---


def test_posix_lock_conflict_between_processes(vfs, root):
    with root.open("/lock", os.O_CREAT | os.O_RDWR, 0o666):
        pass
    a, b = vfs.process(), vfs.process()
    fa, fb = a.open("/lock", os.O_RDWR), b.open("/lock", os.O_RDWR)
    a.fcntl_lock(fa, fcntl.F_SETLK, fcntl.F_WRLCK, 0, 10)
    with pytest.raises(BlockingIOError) as e:
        b.fcntl_lock(fb, fcntl.F_SETLK, fcntl.F_WRLCK, 5, 1)
    assert e.value.errno == errno.EAGAIN
    t, _w, start, length, pid = b.fcntl_lock(fb, fcntl.F_GETLK, fcntl.F_WRLCK, 5, 1)
    assert (t, start, length, pid) == (fcntl.F_WRLCK, 0, 10, a.pid)
    # lockf, as os.lockf: from the current position.
    fb.seek(20)
    b.lockf(fb, os.F_TLOCK, 5)
    fa.seek(22)
    with pytest.raises(BlockingIOError):
        a.lockf(fa, os.F_TLOCK, 1)
    with pytest.raises(PermissionError):
        a.lockf(fa, os.F_TEST, 1)
    # The holder's exit releases its locks.
    a.exit()
    b.fcntl_lock(fb, fcntl.F_SETLK, fcntl.F_WRLCK, 0, 10)
    b.exit()


def test_edeadlk_between_two_processes_blocking_locks(vfs, root):
    with root.open("/dl", os.O_CREAT | os.O_RDWR, 0o666):
        pass
    a, b = vfs.process(), vfs.process()
    fa, fb = a.open("/dl", os.O_RDWR), b.open("/dl", os.O_RDWR)
    a.fcntl_lock(fa, fcntl.F_SETLKW, fcntl.F_WRLCK, 0, 1)
    b.fcntl_lock(fb, fcntl.F_SETLKW, fcntl.F_WRLCK, 1, 1)
    result = {}

    def a_waits_for_b():
        try:
            a.fcntl_lock(fa, fcntl.F_SETLKW, fcntl.F_WRLCK, 1, 1)
            result["a"] = "locked"
        except OSError as e:
            result["a"] = e.errno

    t = threading.Thread(target=a_waits_for_b)
    t.start()
    # Wait until a is blocked on b's lock (a "->" line in /proc/locks).
    deadline = time.monotonic() + 60
    while "->" not in vfs.proc_locks():
        assert time.monotonic() < deadline, vfs.proc_locks()
        time.sleep(0.005)
    # b now waiting for a would close the cycle.
    with pytest.raises(OSError) as e:
        b.fcntl_lock(fb, fcntl.F_SETLKW, fcntl.F_WRLCK, 0, 1)
    assert e.value.errno == errno.EDEADLK
    # b gives way: a gets its lock.
    b.fcntl_lock(fb, fcntl.F_SETLK, fcntl.F_UNLCK, 1, 1)
    t.join(60)
    assert not t.is_alive()
    assert result["a"] == "locked"


def test_blocking_lock_mutual_exclusion_across_threads(vfs, root):
    """Threads (one process each) take one F_SETLKW lock: never two at once."""
    with root.open("/counter", os.O_CREAT | os.O_RDWR, 0o666) as f:
        f.write(b"0")
    inside, violations, errors = [0], [0], []
    guard = threading.Lock()

    def worker():
        with vfs.process() as p, p.open("/counter", os.O_RDWR) as f:
            for _ in range(200):
                p.fcntl_lock(f, fcntl.F_SETLKW, fcntl.F_WRLCK)
                with guard:
                    inside[0] += 1
                    if inside[0] != 1:
                        violations[0] += 1
                n = int(p.pread(f.fileno(), 20, 0))
                p.ftruncate(f.fileno(), 0)
                p.pwrite(f.fileno(), str(n + 1).encode(), 0)
                with guard:
                    inside[0] -= 1
                p.fcntl_lock(f, fcntl.F_SETLK, fcntl.F_UNLCK)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert violations[0] == 0
    assert root.open("/counter").read() == b"800"


def test_flock(vfs, root):
    with root.open("/fl", os.O_CREAT | os.O_RDWR, 0o666):
        pass
    a, b = vfs.process(), vfs.process()
    fa, fb = a.open("/fl"), b.open("/fl")
    a.flock(fa, fcntl.LOCK_EX | fcntl.LOCK_NB)
    with pytest.raises(BlockingIOError):
        b.flock(fb, fcntl.LOCK_SH | fcntl.LOCK_NB)
    # A blocking flock in a thread, released by the holder.
    done = threading.Event()

    def wait():
        b.flock(fb, fcntl.LOCK_SH)
        done.set()

    t = threading.Thread(target=wait)
    t.start()
    assert not done.wait(0.1)
    a.flock(fa, fcntl.LOCK_UN)
    assert done.wait(60)
    t.join()


# --- epoll ---


def test_epoll_on_a_pipe(root):
    r, w = root.pipe(os.O_NONBLOCK)
    with root.epoll() as ep:
        ep.register(r, select.EPOLLIN)
        assert ep.poll(0) == []
        root.write(w, b"x")
        assert ep.poll(1) == [(r, select.EPOLLIN)]
        assert root.read(r, 10) == b"x"
        assert ep.poll(0) == []
        ep.modify(r, select.EPOLLIN | select.EPOLLET)
        ep.register(w, select.EPOLLOUT)
        assert ep.poll(0) == [(w, select.EPOLLOUT)]
        ep.unregister(w)
        with pytest.raises(FileNotFoundError):
            ep.unregister(w)
        with pytest.raises(FileExistsError):
            ep.register(r)

        # A blocking poll that another thread's write ends (the GIL is released).
        def late_write():
            time.sleep(0.05)
            root.write(w, b"late")

        t = threading.Thread(target=late_write)
        t.start()
        assert ep.poll(60) == [(r, select.EPOLLIN)]
        t.join()
        root.close(w)
        assert ep.poll(0) == [(r, select.EPOLLIN | select.EPOLLHUP)]
    assert ep.closed
    with pytest.raises(ValueError):
        ep.poll(0)


def test_poll(root):
    r, w = root.pipe()
    assert root.poll([(r, select.POLLIN), (w, select.POLLOUT)], 0) == [(w, select.POLLOUT)]


# --- bad input ---


def test_non_utf8_bytes_paths(root):
    name = b"/caf\xe9-\xff\xfe"
    with root.open(name, os.O_CREAT | os.O_WRONLY) as f:
        f.write(b"latin-1")
    assert b"caf\xe9-\xff\xfe" in root.listdir(b"/")
    # The same name as str (os.fsdecode: surrogateescape) works too.
    decoded = os.fsdecode(b"caf\xe9-\xff\xfe")
    assert decoded in root.listdir("/")
    assert root.stat("/" + decoded).st_size == 7
    root.symlink(name, b"/link")
    assert root.readlink(b"/link") == name
    root.rename(name, b"/\x80")
    assert root.open(b"/\x80").read() == b"latin-1"
    # os.PathLike works.
    import pathlib

    assert root.stat(pathlib.PurePosixPath("/\udc80")).st_size == 7


def test_embedded_nul_and_wrong_types(root):
    with pytest.raises(ValueError):
        root.open("/a\0b", os.O_CREAT)
    with pytest.raises(ValueError):
        root.stat(b"/a\0")
    with pytest.raises(TypeError):
        root.stat(3.5)
    with pytest.raises(TypeError):
        root.mkdir(None)
    with pytest.raises(OSError) as e:
        root.read(-1, 10)
    assert e.value.errno == errno.EBADF
    with pytest.raises(OSError) as e:
        root.read(12345, 10)
    assert e.value.errno == errno.EBADF
    with pytest.raises(ValueError):
        root.read(0, -5)
    with pytest.raises(OverflowError):
        root.close(2**40)


def test_closed_file(root):
    f = root.open("/c", os.O_CREAT | os.O_RDWR)
    fd = f.fileno()
    f.close()
    f.close()  # idempotent
    for op in (f.read, f.readall, f.fileno, f.tell, lambda: f.write(b"x"), lambda: f.seek(0)):
        with pytest.raises(ValueError):
            op()
    with pytest.raises(OSError) as e:
        root.read(fd, 1)
    assert e.value.errno == errno.EBADF


def test_exited_process(vfs):
    q = vfs.process()
    g = q.open("/file", os.O_CREAT | os.O_RDWR)
    q.exit()
    assert q.exited
    q.exit()  # idempotent
    for call in (
        lambda: q.stat("/"),
        lambda: q.open("/file"),
        lambda: q.read(g.fileno(), 1),
        lambda: q.mkdir("/x"),
        lambda: q.fork(),
    ):
        with pytest.raises(OSError) as e:
            call()
        assert e.value.errno == errno.EBADF
    with pytest.raises(OSError):
        g.read()
    g.close()  # no error: the descriptor went with the process


def test_process_from_many_threads(vfs):
    """One process used by many threads at once (files of their own)."""
    with vfs.process() as p:
        p.mkdir("/mt")

        def worker(i):
            for j in range(100):
                with p.open(f"/mt/{i}-{j}", os.O_CREAT | os.O_WRONLY) as f:
                    f.write(b"x" * j)

        threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(p.listdir("/mt")) == 400
        assert p.stat("/mt/3-99").st_size == 99


def test_fork_shares_open_files_but_not_posix_locks(vfs, root):
    with root.open("/shared", os.O_CREAT | os.O_RDWR, 0o666) as f:
        root.fcntl_lock(f, fcntl.F_SETLK, fcntl.F_WRLCK)
        child = root.fork()
        assert child.pid != root.pid
        with pytest.raises(BlockingIOError):
            child.fcntl_lock(f.fileno(), fcntl.F_SETLK, fcntl.F_WRLCK)
        child.write(f.fileno(), b"from child")
        assert f.tell() == 10
        child.exit()


def test_stat_result_both_constructions(root, monkeypatch):
    """The fast positional os.stat_result and the portable keyword one agree."""
    with root.open("/st", os.O_CREAT | os.O_WRONLY, 0o600) as f:
        f.write(b"abc")
    fast = root.stat("/st")
    monkeypatch.setattr(scalevfs, "_POSITIONAL_STAT", False)
    slow = root.stat("/st")
    assert fast == slow
    for name in scalevfs._STAT_EXTRA:
        assert getattr(fast, name) == getattr(slow, name), name
    assert fast.st_rdev == 0 and fast.st_blocks >= 0
