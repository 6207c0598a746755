/* Per-call cost of the C API: N svfs_fstat calls, N open+close pairs, N 64-byte preads,
 * and N svfs_getpid (a handle lookup and nothing else), timed with clock_gettime.
 * Built and run by `cargo run --release -p scalevfs-capi --example percall`, which
 * prints the Rust API's figures for the same loops next to these. */
#define _GNU_SOURCE
#include "scalevfs.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static void report(const char *what, double secs, long n) {
    printf("C     %-24s %8.1f ns/call\n", what, secs * 1e9 / n);
}

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 1000000;
    svfs_vfs *vfs = svfs_vfs_new();
    svfs_process *p = svfs_process_new(vfs, 0, 0);
    int fd = svfs_open(p, "/f", O_CREAT | O_RDWR, 0644);
    char buf[64] = {0};
    svfs_write(p, fd, buf, sizeof buf);
    struct stat st;
    long bad = 0;

    double t = now();
    for (long i = 0; i < n; i++)
        bad += svfs_getpid(p) < 0;
    report("svfs_getpid", now() - t, n);

    t = now();
    for (long i = 0; i < n; i++)
        bad += svfs_fstat(p, fd, &st) != 0;
    report("svfs_fstat", now() - t, n);

    t = now();
    for (long i = 0; i < n; i++)
        bad += svfs_pread64(p, fd, buf, sizeof buf, 0) != sizeof buf;
    report("svfs_pread64 (64 B)", now() - t, n);

    t = now();
    for (long i = 0; i < n; i++) {
        int f = svfs_open(p, "/f", O_RDONLY, 0);
        bad += f < 0 || svfs_close(p, f) != 0;
    }
    report("svfs_open+svfs_close", now() - t, n);

    t = now();
    for (long i = 0; i < n; i++)
        bad += svfs_stat(p, "/f", &st) != 0;
    report("svfs_stat (\"/f\")", now() - t, n);

    svfs_process_free(p);
    svfs_vfs_free(vfs);
    if (bad) {
        fprintf(stderr, "percall: %ld calls failed\n", bad);
        return 1;
    }
    return 0;
}
