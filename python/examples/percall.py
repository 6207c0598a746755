"""Per-call cost of the Python package: the same loops as the C API's
crates/capi/examples/percall (fstat, 64-byte pread, open+close, stat), through the
os-style wrapper (scalevfs.Process) and through the native module directly
(Process._p), timed with time.perf_counter.

    python examples/percall.py [N]      (N calls per loop, default 1,000,000)
"""

import os
import sys
import time

import scalevfs


def timed(label, n, fn):
    t = time.perf_counter()
    fn(n)
    ns = (time.perf_counter() - t) * 1e9 / n
    print(f"Python {label:<34} {ns:8.1f} ns/call")


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
    p = scalevfs.Vfs().process()
    fd = p.os_open("/f", os.O_CREAT | os.O_RDWR, 0o644)
    p.write(fd, b"\0" * 64)
    native = p._p

    def native_fstat(n):
        f = native.fstat
        for _ in range(n):
            f(fd)

    def wrapper_fstat(n):
        f = p.fstat
        for _ in range(n):
            f(fd)

    def native_pread(n):
        f = native.pread
        for _ in range(n):
            f(fd, 64, 0)

    def native_open_close(n):
        o, c = native.openat, native.close
        for _ in range(n):
            c(o(-100, "/f", os.O_RDONLY, 0))

    def wrapper_open_close(n):
        for _ in range(n):
            with p.open("/f"):
                pass

    def native_stat(n):
        f = native.newfstatat
        for _ in range(n):
            f(-100, "/f", 0)

    def wrapper_stat(n):
        f = p.stat
        for _ in range(n):
            f("/f")

    def empty_loop(n):
        for _ in range(n):
            pass

    timed("(empty loop)", n, empty_loop)
    timed("_p.fstat (tuple)", n, native_fstat)
    timed("fstat (os.stat_result)", n, wrapper_fstat)
    timed("_p.pread (64 B)", n, native_pread)
    timed("_p.openat+_p.close", n, native_open_close)
    timed("with open() (File object)", n, wrapper_open_close)
    timed("_p.newfstatat ('/f')", n, native_stat)
    timed("stat ('/f', os.stat_result)", n, wrapper_stat)
    p.exit()


if __name__ == "__main__":
    main()
