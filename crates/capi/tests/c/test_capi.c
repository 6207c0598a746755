/* The C API as an embedder uses it: built and run by crates/capi/tests/capi.rs
 * (cc -std=c11 -Wall -Wextra -Werror ... libscalevfs.a -lpthread -ldl -lm).
 *
 * 1. An embedder's sequence: a vfs, root and two users, mkdir, open/write/read/close,
 *    permissions, a POSIX lock conflict between two processes (EAGAIN), epoll on a
 *    pipe (with a thread that writes while another waits), a getdents64 listing.
 * 2. Many threads taking one lock with F_SETLKW (one process each) and F_OFD_SETLKW
 *    (one process handle shared by all threads): mutual exclusion and no lost update;
 *    a process handle freed while threads are calling with it.
 * 3. Bad input: NULL pointers, bad descriptors, freed / NULL / made-up handles.
 *
 * Prints "test_capi: PASS (N checks)" or the failures and "test_capi: FAIL", and
 * exits non-zero on failure. */
#define _GNU_SOURCE
#include "scalevfs.h"

#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

static int checks, failures;

#define CHECK(cond)                                                                  \
    do {                                                                             \
        checks++;                                                                    \
        if (!(cond)) {                                                               \
            failures++;                                                              \
            fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond);          \
        }                                                                            \
    } while (0)

/* a == b, printing both on failure (for results and -errno). */
#define EQ(a, b)                                                                     \
    do {                                                                             \
        long long a_ = (long long)(a), b_ = (long long)(b);                          \
        checks++;                                                                    \
        if (a_ != b_) {                                                              \
            failures++;                                                              \
            fprintf(stderr, "FAIL %s:%d: %s == %lld, expected %s == %lld\n", __FILE__, \
                    __LINE__, #a, a_, #b, b_);                                       \
        }                                                                            \
    } while (0)

/* A descriptor or size: >= 0. */
#define OK(x)                                                                        \
    do {                                                                             \
        long long r_ = (long long)(x);                                               \
        checks++;                                                                    \
        if (r_ < 0) {                                                                \
            failures++;                                                              \
            fprintf(stderr, "FAIL %s:%d: %s = -%s\n", __FILE__, __LINE__, #x,       \
                    strerror((int)-r_));                                             \
        }                                                                            \
    } while (0)

/* --- 1. the embedder's sequence --- */

struct linux_dirent64 {
    uint64_t d_ino;
    int64_t d_off;
    unsigned short d_reclen;
    unsigned char d_type;
    char d_name[];
};

static svfs_process *writer_p;
static int writer_fd;

static void *late_writer(void *arg) {
    (void)arg;
    struct timespec t = {0, 20 * 1000 * 1000};
    nanosleep(&t, NULL);
    svfs_write(writer_p, writer_fd, "late", 4);
    return NULL;
}

static void embedder_sequence(void) {
    svfs_vfs *vfs = svfs_vfs_new();
    CHECK(vfs != NULL);
    svfs_process *root = svfs_process_new(vfs, 0, 0);
    svfs_process *alice = svfs_process_new(vfs, 1000, 1000);
    svfs_process *bob = svfs_process_new(vfs, 1001, 1001);
    CHECK(root && alice && bob);
    CHECK(svfs_getpid(alice) != svfs_getpid(bob));

    /* mkdir, a home for alice, and the permissions that come with it. */
    EQ(svfs_mkdir(root, "/home", 0755), 0);
    EQ(svfs_mkdir(root, "/home/alice", 0700), 0);
    EQ(svfs_fchownat(root, AT_FDCWD, "/home/alice", 1000, 1000, 0), 0);
    EQ(svfs_mkdir(root, "/home", 0755), -EEXIST);
    EQ(svfs_mkdir(bob, "/home/bob", 0755), -EACCES);

    /* open, write, read, close. */
    int fd = svfs_open(alice, "/home/alice/notes", O_CREAT | O_RDWR, 0600);
    OK(fd);
    EQ(svfs_write(alice, fd, "hello, world", 12), 12);
    EQ(svfs_lseek(alice, fd, 0, SEEK_SET), 0);
    char buf[64] = {0};
    EQ(svfs_read(alice, fd, buf, sizeof buf), 12);
    CHECK(memcmp(buf, "hello, world", 12) == 0);
    EQ(svfs_pread64(alice, fd, buf, 5, 7), 5);
    CHECK(memcmp(buf, "world", 5) == 0);
    struct stat st;
    EQ(svfs_fstat(alice, fd, &st), 0);
    EQ(st.st_size, 12);
    EQ(st.st_uid, 1000);
    EQ(st.st_mode, S_IFREG | 0600);
    EQ(svfs_close(alice, fd), 0);
    EQ(svfs_close(alice, fd), -EBADF);
    EQ(svfs_open(bob, "/home/alice/notes", O_RDONLY, 0), -EACCES);
    EQ(svfs_stat(bob, "/home/alice/notes", &st), -EACCES);
    EQ(svfs_stat(root, "/home/alice/notes", &st), 0);
    EQ(svfs_open(alice, "/home/alice/missing", O_RDONLY, 0), -ENOENT);

    /* symlink, readlink, rename, unlink. */
    EQ(svfs_symlink(alice, "notes", "/home/alice/link"), 0);
    EQ(svfs_readlinkat(alice, AT_FDCWD, "/home/alice/link", buf, sizeof buf), 5);
    CHECK(memcmp(buf, "notes", 5) == 0);
    EQ(svfs_rename(alice, "/home/alice/notes", "/home/alice/notes2"), 0);
    EQ(svfs_stat(alice, "/home/alice/link", &st), -ENOENT);
    EQ(svfs_unlink(alice, "/home/alice/link"), 0);

    /* Paths are bytes: a name that is not UTF-8. */
    EQ(svfs_mkdir(root, "/shared", 01777), 0);
    EQ(svfs_chmod(root, "/shared", 01777), 0); /* past the umask (022) */
    fd = svfs_open(alice, "/shared/\xff\xfe-latin1-\xe9", O_CREAT | O_WRONLY, 0644);
    OK(fd);
    EQ(svfs_close(alice, fd), 0);
    EQ(svfs_stat(bob, "/shared/\xff\xfe-latin1-\xe9", &st), 0);

    /* A POSIX record lock conflict between two processes: EAGAIN, then F_GETLK names
     * the holder, and the unlock (or the holder's exit) lets the other in. */
    int afd = svfs_open(alice, "/shared/lockfile", O_CREAT | O_RDWR, 0666);
    OK(afd);
    EQ(svfs_fchmod(alice, afd, 0666), 0); /* past the umask */
    int bfd = svfs_open(bob, "/shared/lockfile", O_RDWR, 0);
    OK(bfd);
    struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 100};
    EQ(svfs_fcntl_lock(alice, afd, F_SETLK, &fl), 0);
    struct flock fb = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 50, .l_len = 10};
    EQ(svfs_fcntl_lock(bob, bfd, F_SETLK, &fb), -EAGAIN);
    EQ(svfs_fcntl(bob, bfd, F_SETLK, (unsigned long)&fb), -EAGAIN);
    EQ(svfs_fcntl_lock(bob, bfd, F_GETLK, &fb), 0);
    EQ(fb.l_type, F_WRLCK);
    EQ(fb.l_start, 0);
    EQ(fb.l_len, 100);
    EQ(fb.l_pid, svfs_getpid(alice));
    fb = (struct flock){.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 100, .l_len = 10};
    EQ(svfs_fcntl_lock(bob, bfd, F_SETLK, &fb), 0); /* no overlap */
    fl.l_type = F_UNLCK;
    EQ(svfs_fcntl_lock(alice, afd, F_SETLK, &fl), 0);
    fb.l_start = 50;
    EQ(svfs_fcntl_lock(bob, bfd, F_SETLK, &fb), 0);
    /* flock: one open file description's lock against another's. */
    EQ(svfs_flock(alice, afd, LOCK_EX | LOCK_NB), 0);
    EQ(svfs_flock(bob, bfd, LOCK_SH | LOCK_NB), -EWOULDBLOCK);
    /* The holder's exit releases its locks. */
    svfs_process *carol = svfs_process_new(vfs, 1002, 1002);
    int cfd = svfs_open(carol, "/shared/lockfile", O_RDWR, 0);
    OK(cfd);
    fl = (struct flock){.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 1000, .l_len = 1};
    EQ(svfs_fcntl_lock(carol, cfd, F_SETLK, &fl), 0);
    EQ(svfs_fcntl_lock(bob, bfd, F_SETLK, &fl), -EAGAIN);
    EQ(svfs_process_free(carol), 0);
    EQ(svfs_fcntl_lock(bob, bfd, F_SETLK, &fl), 0);
    EQ(svfs_close(alice, afd), 0);
    EQ(svfs_close(bob, bfd), 0);

    /* epoll on a pipe. */
    int pfd[2];
    EQ(svfs_pipe2(alice, pfd, O_NONBLOCK), 0);
    int ep = svfs_epoll_create1(alice, EPOLL_CLOEXEC);
    OK(ep);
    struct epoll_event ev = {.events = EPOLLIN, .data.u64 = 42};
    EQ(svfs_epoll_ctl(alice, ep, EPOLL_CTL_ADD, pfd[0], &ev), 0);
    EQ(svfs_epoll_ctl(alice, ep, EPOLL_CTL_ADD, pfd[0], &ev), -EEXIST);
    struct epoll_event out[4];
    EQ(svfs_epoll_wait(alice, ep, out, 4, 0), 0);
    EQ(svfs_read(alice, pfd[0], buf, 1), -EAGAIN);
    EQ(svfs_write(alice, pfd[1], "x", 1), 1);
    EQ(svfs_epoll_wait(alice, ep, out, 4, 0), 1);
    EQ(out[0].events, EPOLLIN);
    EQ(out[0].data.u64, 42);
    EQ(svfs_read(alice, pfd[0], buf, sizeof buf), 1);
    EQ(svfs_epoll_wait(alice, ep, out, 4, 0), 0);
    /* A blocking wait that another thread's write ends. */
    writer_p = alice;
    writer_fd = pfd[1];
    pthread_t t;
    pthread_create(&t, NULL, late_writer, NULL);
    /* The late writer needs only to be scheduled: a minute, so a loaded machine cannot
     * make the wait time out. */
    EQ(svfs_epoll_wait(alice, ep, out, 4, 60000), 1);
    pthread_join(t, NULL);
    EQ(svfs_read(alice, pfd[0], buf, sizeof buf), 4);
    EQ(svfs_close(alice, pfd[1]), 0);
    EQ(svfs_epoll_wait(alice, ep, out, 4, 0), 1);
    EQ(out[0].events, EPOLLHUP);
    struct pollfd pf = {.fd = pfd[0], .events = POLLIN};
    EQ(svfs_poll(alice, &pf, 1, 0), 1);
    EQ(pf.revents, POLLHUP);
    EQ(svfs_close(alice, ep), 0);
    EQ(svfs_close(alice, pfd[0]), 0);

    /* getdents64 with a small buffer: several calls, every name once. */
    EQ(svfs_mkdir(root, "/list", 0755), 0);
    const char *names[] = {"alpha", "beta", "gamma", "a-rather-longer-name-than-the-others"};
    for (int i = 0; i < 4; i++) {
        char path[128];
        snprintf(path, sizeof path, "/list/%s", names[i]);
        fd = svfs_open(root, path, O_CREAT | O_WRONLY, 0644);
        OK(fd);
        svfs_close(root, fd);
    }
    EQ(svfs_mkdir(root, "/list/sub", 0755), 0);
    int dfd = svfs_open(root, "/list", O_RDONLY | O_DIRECTORY, 0);
    OK(dfd);
    int seen[4] = {0}, dots = 0, sub = 0, calls = 0, total = 0;
    char dbuf[80];
    for (;;) {
        ssize_t n = svfs_getdents64(root, dfd, dbuf, sizeof dbuf);
        OK(n);
        if (n <= 0)
            break;
        calls++;
        for (ssize_t off = 0; off < n;) {
            struct linux_dirent64 *d = (struct linux_dirent64 *)(dbuf + off);
            total++;
            if (!strcmp(d->d_name, ".") || !strcmp(d->d_name, "..")) {
                dots++;
                CHECK(d->d_type == DT_DIR);
            } else if (!strcmp(d->d_name, "sub")) {
                sub++;
                CHECK(d->d_type == DT_DIR);
            } else {
                for (int i = 0; i < 4; i++) {
                    if (!strcmp(d->d_name, names[i])) {
                        seen[i]++;
                        CHECK(d->d_type == DT_REG);
                    }
                }
            }
            off += d->d_reclen;
        }
    }
    EQ(total, 7);
    EQ(dots, 2);
    EQ(sub, 1);
    for (int i = 0; i < 4; i++)
        EQ(seen[i], 1);
    CHECK(calls > 1);
    EQ(svfs_getdents64(root, dfd, dbuf, 8), 0); /* at the end: 0 even for a tiny buffer */
    EQ(svfs_close(root, dfd), 0);

    /* cwd, statfs. */
    EQ(svfs_chdir(alice, "/home/alice"), 0);
    EQ(svfs_getcwd(alice, buf, sizeof buf), 12);
    CHECK(strcmp(buf, "/home/alice") == 0);
    struct statfs sf;
    EQ(svfs_statfs(alice, ".", &sf), 0);
    EQ(sf.f_type, 0x01021994); /* TMPFS_MAGIC */
    EQ(sf.f_namelen, 255);

    EQ(svfs_process_free(root), 0);
    EQ(svfs_process_free(alice), 0);
    EQ(svfs_process_free(bob), 0);
    EQ(svfs_vfs_free(vfs), 0);
}

/* --- 2. threads and locks --- */

enum { THREADS = 8, ITERS = 1000 };

struct locker {
    svfs_vfs *vfs;
    svfs_process *shared; /* NULL: a process of its own, with F_SETLKW */
    atomic_int *inside;
    atomic_int *violations;
    atomic_int *errors;
};

static void *locker_main(void *arg) {
    struct locker *l = arg;
    svfs_process *p = l->shared ? l->shared : svfs_process_new(l->vfs, 0, 0);
    int setlkw = l->shared ? F_OFD_SETLKW : F_SETLKW;
    int fd = svfs_open(p, "/counter", O_RDWR, 0);
    if (fd < 0) {
        atomic_fetch_add(l->errors, 1);
        return NULL;
    }
    for (int i = 0; i < ITERS; i++) {
        struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
        if (svfs_fcntl_lock(p, fd, setlkw, &fl) != 0) {
            atomic_fetch_add(l->errors, 1);
            break;
        }
        if (atomic_fetch_add(l->inside, 1) != 0)
            atomic_fetch_add(l->violations, 1);
        /* A read-modify-write that a second holder would make lose updates. */
        uint64_t n = 0;
        if (svfs_pread64(p, fd, &n, sizeof n, 0) != sizeof n)
            atomic_fetch_add(l->errors, 1);
        n++;
        if (svfs_pwrite64(p, fd, &n, sizeof n, 0) != sizeof n)
            atomic_fetch_add(l->errors, 1);
        atomic_fetch_sub(l->inside, 1);
        fl.l_type = F_UNLCK;
        if (svfs_fcntl_lock(p, fd, setlkw, &fl) != 0)
            atomic_fetch_add(l->errors, 1);
    }
    svfs_close(p, fd);
    if (!l->shared)
        svfs_process_free(p);
    return NULL;
}

static void lock_threads(int shared_handle) {
    svfs_vfs *vfs = svfs_vfs_new();
    svfs_process *root = svfs_process_new(vfs, 0, 0);
    int fd = svfs_open(root, "/counter", O_CREAT | O_RDWR, 0644);
    uint64_t zero = 0;
    EQ(svfs_pwrite64(root, fd, &zero, sizeof zero, 0), sizeof zero);
    atomic_int inside = 0, violations = 0, errors = 0;
    struct locker l = {vfs, shared_handle ? root : NULL, &inside, &violations, &errors};
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++)
        pthread_create(&t[i], NULL, locker_main, &l);
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    uint64_t n = 0;
    EQ(svfs_pread64(root, fd, &n, sizeof n, 0), sizeof n);
    EQ(n, THREADS * ITERS);
    EQ(atomic_load(&violations), 0);
    EQ(atomic_load(&errors), 0);
    svfs_process_free(root);
    svfs_vfs_free(vfs);
}

/* A handle freed while other threads are calling with it: each call returns its answer
 * or -EBADF, never crashes, and once the free has returned every call is -EBADF. */
struct racer {
    svfs_process *p;
    int fd;
    atomic_int *freed;
    atomic_int *ok, *ebadf, *other;
};

static void *racer_main(void *arg) {
    struct racer *r = arg;
    struct stat st;
    for (;;) {
        int was_freed = atomic_load(r->freed);
        int rc = svfs_fstat(r->p, r->fd, &st);
        if (rc == 0 && !was_freed)
            atomic_fetch_add(r->ok, 1);
        else if (rc == -EBADF)
            atomic_fetch_add(r->ebadf, 1);
        else
            atomic_fetch_add(r->other, 1);
        if (was_freed)
            return NULL;
    }
}

static void free_while_in_use(void) {
    svfs_vfs *vfs = svfs_vfs_new();
    svfs_process *p = svfs_process_new(vfs, 0, 0);
    int fd = svfs_open(p, "/f", O_CREAT | O_RDWR, 0644);
    atomic_int freed = 0, ok = 0, ebadf = 0, other = 0;
    struct racer r = {p, fd, &freed, &ok, &ebadf, &other};
    pthread_t t[4];
    for (int i = 0; i < 4; i++)
        pthread_create(&t[i], NULL, racer_main, &r);
    /* Free while the racers are busy with the handle: once they have made some calls
     * (a loaded machine may start them late; a minute at most). */
    struct timespec start, now, pause = {0, 1000 * 1000};
    clock_gettime(CLOCK_MONOTONIC, &start);
    do {
        nanosleep(&pause, NULL);
        clock_gettime(CLOCK_MONOTONIC, &now);
    } while (atomic_load(&ok) < 100 && now.tv_sec - start.tv_sec < 60);
    EQ(svfs_process_free(p), 0);
    atomic_store(&freed, 1);
    for (int i = 0; i < 4; i++)
        pthread_join(t[i], NULL);
    CHECK(atomic_load(&ok) > 0);
    /* At least each thread's last call, made after the free returned (a call racing
     * with the free may see the handle gone, or its descriptor closed by the exit). */
    CHECK(atomic_load(&ebadf) >= 4);
    EQ(atomic_load(&other), 0);
    svfs_vfs_free(vfs);
}

/* --- 3. mounts: a tmpfs with limits, one read-only, umount2 --- */

static void mounts(void) {
    svfs_vfs *vfs = svfs_vfs_new();
    svfs_process *root = svfs_process_new(vfs, 0, 0);
    svfs_process *user = svfs_process_new(vfs, 1000, 1000);
    struct statfs sf;
    EQ(svfs_mkdir(root, "/rw", 0755), 0);
    EQ(svfs_mkdir(root, "/ro", 0755), 0);
    EQ(svfs_mount_tmpfs(user, "/rw", 0, 0, 0), -EPERM);
    EQ(svfs_mount_tmpfs(root, "/rw", 0, 0, MS_NOSUID), -EINVAL);
    EQ(svfs_mount_tmpfs(root, "/missing", 0, 0, 0), -ENOENT);

    EQ(svfs_mount_tmpfs(root, "/rw", 8192, 16, 0), 0);
    int fd = svfs_open(root, "/rw/f", O_CREAT | O_WRONLY, 0644);
    OK(fd);
    EQ(svfs_write(root, fd, "data", 4), 4);
    EQ(svfs_statfs(root, "/rw", &sf), 0);
    EQ(sf.f_files, 16);
    EQ(sf.f_flags & ST_RDONLY, 0);
    EQ(svfs_umount2(root, "/rw", 0), -EBUSY);
    EQ(svfs_close(root, fd), 0);
    EQ(svfs_umount2(root, "/rw", 0), 0);
    EQ(svfs_open(root, "/rw/f", O_RDONLY, 0), -ENOENT);

    /* Remounting: busy while a file is open for writing, then read-only, then back. */
    EQ(svfs_mount_tmpfs(root, "/rw", 0, 0, 0), 0);
    fd = svfs_open(root, "/rw/g", O_CREAT | O_RDWR, 0644);
    OK(fd);
    EQ(svfs_remount(root, "/rw", MS_RDONLY), -EBUSY);
    EQ(svfs_remount(user, "/rw", MS_RDONLY), -EPERM);
    EQ(svfs_remount(root, "/rw/g", MS_RDONLY), -EINVAL);
    EQ(svfs_remount(root, "/rw", MS_RDONLY | MS_NOSUID), -EINVAL);
    EQ(svfs_close(root, fd), 0);
    EQ(svfs_remount(root, "/rw", MS_RDONLY), 0);
    EQ(svfs_open(root, "/rw/g", O_WRONLY, 0), -EROFS);
    EQ(svfs_remount(root, "/rw", 0), 0);
    fd = svfs_open(root, "/rw/g", O_WRONLY, 0);
    OK(fd);
    EQ(svfs_close(root, fd), 0);
    EQ(svfs_umount2(root, "/rw", 0), 0);

    EQ(svfs_mount_tmpfs(root, "/ro", 0, 0, MS_RDONLY), 0);
    EQ(svfs_open(root, "/ro/f", O_CREAT | O_WRONLY, 0644), -EROFS);
    EQ(svfs_mkdir(root, "/ro/d", 0755), -EROFS);
    EQ(svfs_statfs(root, "/ro", &sf), 0);
    CHECK(sf.f_flags & ST_RDONLY);
    EQ(svfs_umount2(root, "/ro", MNT_DETACH), 0);
    EQ(svfs_mkdir(root, "/ro/d", 0755), 0);

    EQ(svfs_process_free(user), 0);
    EQ(svfs_process_free(root), 0);
    EQ(svfs_vfs_free(vfs), 0);
}

/* --- 4. bad input --- */

static void bad_input(void) {
    svfs_vfs *vfs = svfs_vfs_new();
    svfs_process *p = svfs_process_new(vfs, 0, 0);
    char buf[16];
    struct stat st;

    /* NULL pointers: EFAULT where Linux copies from or to user memory, EINVAL where it
     * checks a size first, EBADF where it checks the descriptor first. */
    EQ(svfs_open(p, NULL, O_RDONLY, 0), -EFAULT);
    EQ(svfs_mkdir(p, NULL, 0755), -EFAULT);
    EQ(svfs_stat(p, "/", NULL), -EFAULT);
    EQ(svfs_rename(p, "/", NULL), -EFAULT);
    int fd = svfs_open(p, "/f", O_CREAT | O_RDWR, 0644);
    OK(fd);
    EQ(svfs_read(p, fd, NULL, 10), -EFAULT);
    EQ(svfs_read(p, fd, NULL, 0), 0);
    EQ(svfs_write(p, fd, NULL, 10), -EFAULT);
    EQ(svfs_fstat(p, fd, NULL), -EFAULT);
    EQ(svfs_fcntl_lock(p, fd, F_SETLK, NULL), -EFAULT);
    EQ(svfs_fcntl(p, fd, F_GETLK, 0), -EFAULT);
    EQ(svfs_pipe2(p, NULL, 0), -EFAULT);
    EQ(svfs_getcwd(p, NULL, 64), -EFAULT);
    EQ(svfs_readlinkat(p, AT_FDCWD, "/f", buf, 0), -EINVAL);
    int ep = svfs_epoll_create1(p, 0);
    EQ(svfs_epoll_wait(p, ep, NULL, 0, 0), -EINVAL);
    EQ(svfs_epoll_wait(p, ep, NULL, 4, 0), -EFAULT);
    EQ(svfs_epoll_wait(p, 9999, NULL, 0, 0), -EBADF);
    EQ(svfs_epoll_wait(p, 9999, NULL, 4, 0), -EBADF);
    EQ(svfs_epoll_ctl(p, ep, EPOLL_CTL_ADD, fd, NULL), -EFAULT);

    /* Bad descriptors. */
    EQ(svfs_read(p, 9999, buf, sizeof buf), -EBADF);
    EQ(svfs_read(p, 9999, NULL, 10), -EBADF);
    EQ(svfs_close(p, -1), -EBADF);
    EQ(svfs_fstat(p, 12345, &st), -EBADF);
    EQ(svfs_lseek(p, -5, 0, SEEK_SET), -EBADF);
    EQ(svfs_dup2(p, 77, 3), -EBADF);
    EQ(svfs_openat(p, 555, "relative", O_RDONLY, 0), -EBADF);
    EQ(svfs_fcntl(p, fd, 0x7fff, 0), -EINVAL);

    /* Handles: freed, double-freed, NULL, made up, of the wrong type. */
    svfs_process *q = svfs_process_new(vfs, 1000, 1000);
    CHECK(q != NULL);
    int qfd = svfs_open(q, "/f", O_RDONLY, 0);
    OK(qfd);
    EQ(svfs_process_free(q), 0);
    svfs_clear_last_error();
    EQ(svfs_read(q, qfd, buf, sizeof buf), -EBADF);
    CHECK(svfs_last_error() != NULL && strstr(svfs_last_error(), "freed") != NULL);
    EQ(svfs_open(q, "/f", O_RDONLY, 0), -EBADF);
    EQ(svfs_process_free(q), -EBADF);
    /* A new process may reuse q's slot: q stays dead (generation check). */
    svfs_process *r = svfs_process_new(vfs, 0, 0);
    CHECK(r != NULL && r != q);
    EQ(svfs_close(q, 0), -EBADF);
    EQ(svfs_process_free(r), 0);
    EQ(svfs_close(NULL, 0), -EBADF);
    EQ(svfs_close((svfs_process *)(uintptr_t)0x1234, 0), -EBADF);
    EQ(svfs_close((svfs_process *)(uintptr_t)0xdeadbeefcafef00dULL, 0), -EBADF);
    EQ(svfs_close((svfs_process *)vfs, 0), -EBADF);
    EQ(svfs_getpid(q), -EBADF);
    errno = 0;
    CHECK(svfs_process_new(NULL, 0, 0) == NULL && errno == EBADF);
    errno = 0;
    CHECK(svfs_process_fork(q) == NULL && errno == EBADF);
    EQ(svfs_vfs_free((svfs_vfs *)p), -EBADF);

    /* A vfs freed while a process still uses it: the process keeps the tree. */
    EQ(svfs_vfs_free(vfs), 0);
    EQ(svfs_vfs_free(vfs), -EBADF);
    errno = 0;
    CHECK(svfs_process_new(vfs, 0, 0) == NULL && errno == EBADF);
    EQ(svfs_write(p, fd, "still here", 10), 10);
    EQ(svfs_stat(p, "/f", &st), 0);
    EQ(st.st_size, 10);
    EQ(svfs_process_free(p), 0);
}

int main(void) {
    embedder_sequence();
    lock_threads(0);
    lock_threads(1);
    free_while_in_use();
    mounts();
    bad_input();
    if (failures) {
        printf("test_capi: FAIL (%d of %d checks failed)\n", failures, checks);
        return 1;
    }
    printf("test_capi: PASS (%d checks)\n", checks);
    return 0;
}
