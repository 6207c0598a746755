//! dup, dup2, dup3, fcntl (F_DUPFD, F_DUPFD_CLOEXEC, F_GETFD, F_SETFD, F_GETFL, F_SETFL),
//! close, chdir, fchdir, getcwd.

use crate::script::Script;
use crate::Fd;
use libc::*;

fn with_file(name: &str) -> (Script, crate::Slot) {
    let mut s = Script::new(format!("fd/{name}"));
    s.file("f", 0o644, "0123456789");
    let f = s.open("f", O_RDWR, 0);
    (s, f)
}

/// Every fd-taking call on a bad fd: never opened (-1, a large number) and just closed.
fn badf(v: &mut Vec<Script>) {
    type Call = fn(&mut Script, Fd);
    let calls: &[(&str, Call)] = &[
        ("close", |s, f| {
            s.close(f);
        }),
        ("read", |s, f| {
            s.read(f, 1);
        }),
        ("write", |s, f| {
            s.write(f, "x");
        }),
        ("pread", |s, f| {
            s.pread(f, 1, 0);
        }),
        ("pwrite", |s, f| {
            s.pwrite(f, "x", 0);
        }),
        ("readv", |s, f| {
            s.readv(f, &[1]);
        }),
        ("preadv", |s, f| {
            s.preadv(f, &[1], 0);
        }),
        ("pwritev", |s, f| {
            s.pwritev(f, &["x"], 0);
        }),
        // The offset is checked before the descriptor (ksys_pread64, do_preadv).
        ("pread-negative-offset", |s, f| {
            s.pread(f, 1, -1);
        }),
        ("pwrite-negative-offset", |s, f| {
            s.pwrite(f, "x", -1);
        }),
        ("preadv-negative-offset", |s, f| {
            s.preadv(f, &[1], -1);
        }),
        ("writev", |s, f| {
            s.writev(f, &["x"]);
        }),
        ("lseek", |s, f| {
            s.lseek(f, 0, SEEK_SET);
        }),
        ("fstat", |s, f| {
            s.fstat(f);
        }),
        ("fchmod", |s, f| {
            s.fchmod(f, 0o600);
        }),
        ("fchown", |s, f| {
            s.fchown(f, 1, 1);
        }),
        ("futimens", |s, f| {
            s.futimens(f, None);
        }),
        ("getdents", |s, f| {
            s.getdents(f);
        }),
        ("ftruncate", |s, f| {
            s.ftruncate(f, 0);
        }),
        ("fallocate", |s, f| {
            s.fallocate(f, 0, 0, 1);
        }),
        ("dup", |s, f| {
            s.dup(f);
        }),
        ("dup2", |s, f| {
            s.dup2(f, Fd::Raw(20));
        }),
        ("dup3", |s, f| {
            s.dup3(f, Fd::Raw(20), 0);
        }),
        ("fcntl-getfd", |s, f| {
            s.fcntl(f, F_GETFD, 0);
        }),
        ("fcntl-setfl", |s, f| {
            s.fcntl(f, F_SETFL, O_APPEND as i64);
        }),
        ("fcntl-dupfd", |s, f| {
            s.fcntl_dup(f, F_DUPFD, 0);
        }),
        ("fchdir", |s, f| {
            s.fchdir(f);
        }),
        ("fsync", |s, f| {
            s.fsync(f);
        }),
        ("fdatasync", |s, f| {
            s.fdatasync(f);
        }),
        ("openat-dirfd", |s, f| {
            s.open_at(f, "x", O_RDONLY, 0);
        }),
        ("fstatat-empty-path", |s, f| {
            s.stat_at(f, "", AT_EMPTY_PATH);
        }),
    ];
    for (name, call) in calls {
        let mut s = Script::new(format!("badf/{name}"));
        s.file("f", 0o644, "x");
        let f = s.open("f", O_RDWR, 0);
        s.close(f);
        call(&mut s, Fd::Raw(-1));
        call(&mut s, Fd::Raw(1000));
        call(&mut s, f.into());
        s.stat("f");
        v.push(s);
    }
}

pub(super) fn cases(v: &mut Vec<Script>) {
    badf(v);
    let (mut s, f) = with_file("dup-lowest-free");
    let a = s.dup(f);
    let b = s.dup(f);
    s.close(a);
    let c = s.dup(b);
    s.fcntl(c, F_GETFL, 0).close(f).close(b).close(c);
    v.push(s);
    let (mut s, f) = with_file("dup-drops-cloexec");
    s.fcntl(f, F_SETFD, FD_CLOEXEC as i64);
    let d = s.dup(f);
    s.fcntl(f, F_GETFD, 0).fcntl(d, F_GETFD, 0);
    v.push(s);
    let (mut s, f) = with_file("dup-errors");
    s.dup(Fd::Raw(-1));
    s.dup(Fd::Raw(100));
    s.close(f);
    s.dup(f);
    v.push(s);
    let (mut s, f) = with_file("dup2-same-fd");
    s.dup2(f, f);
    s.dup2(Fd::Raw(50), Fd::Raw(50));
    s.fcntl(f, F_GETFD, 0);
    v.push(s);
    let (mut s, f) = with_file("dup2-to-free-number");
    let d = s.dup2(f, Fd::Raw(10));
    s.read(d, 3)
        .read(f, 3)
        .fcntl(d, F_GETFD, 0)
        .close(Fd::Raw(10))
        .close(d);
    let e = s.dup(f);
    s.close(e);
    v.push(s);
    let (mut s, f) = with_file("dup2-replaces-open-fd");
    s.file("g", 0o644, "other");
    let g = s.open("g", O_RDONLY | O_CLOEXEC, 0);
    let d = s.dup2(f, g);
    s.read(g, 4).fcntl(d, F_GETFD, 0).fcntl(g, F_GETFL, 0);
    v.push(s);
    let (mut s, f) = with_file("dup2-errors");
    s.dup2(Fd::Raw(-1), Fd::Raw(10));
    s.dup2(f, Fd::Raw(-1));
    s.dup2(Fd::Raw(40), f);
    s.read(f, 2);
    v.push(s);
    let (mut s, f) = with_file("dup3-cloexec");
    let d = s.dup3(f, Fd::Raw(7), O_CLOEXEC);
    s.fcntl(d, F_GETFD, 0);
    let e = s.dup3(f, Fd::Raw(8), 0);
    s.fcntl(e, F_GETFD, 0);
    v.push(s);
    let (mut s, f) = with_file("dup3-errors");
    s.dup3(f, f, 0);
    s.dup3(f, f, O_CLOEXEC);
    s.dup3(f, Fd::Raw(9), O_APPEND);
    s.dup3(Fd::Raw(-1), Fd::Raw(9), 0);
    s.dup3(f, Fd::Raw(-1), 0);
    v.push(s);
    let (mut s, f) = with_file("fcntl-dupfd");
    let a = s.fcntl_dup(f, F_DUPFD, 0);
    let b = s.fcntl_dup(f, F_DUPFD, 20);
    let c = s.fcntl_dup(f, F_DUPFD, 20);
    let d = s.fcntl_dup(f, F_DUPFD_CLOEXEC, 5);
    s.fcntl(a, F_GETFD, 0)
        .fcntl(d, F_GETFD, 0)
        .close(b)
        .close(c);
    s.fcntl_dup(f, F_DUPFD, -1);
    s.fcntl_dup(Fd::Raw(-1), F_DUPFD, 0);
    v.push(s);
    let (mut s, f) = with_file("fcntl-setfd");
    s.fcntl(f, F_GETFD, 0)
        .fcntl(f, F_SETFD, FD_CLOEXEC as i64)
        .fcntl(f, F_GETFD, 0)
        .fcntl(f, F_SETFD, 0)
        .fcntl(f, F_GETFD, 0)
        .fcntl(f, F_SETFD, 0xff)
        .fcntl(f, F_GETFD, 0);
    v.push(s);
    for (name, flags) in [
        ("rdonly", O_RDONLY),
        ("wronly", O_WRONLY),
        ("rdwr-append", O_RDWR | O_APPEND),
        ("cloexec", O_RDONLY | O_CLOEXEC),
        ("trunc-creat", O_WRONLY | O_TRUNC | O_CREAT),
        ("nonblock", O_RDONLY | O_NONBLOCK),
        ("noatime", O_RDONLY | O_NOATIME),
        ("path", O_PATH),
        ("directory", O_RDONLY | O_DIRECTORY),
    ] {
        let mut s = Script::new(format!("fcntl/getfl/{name}"));
        s.file("f", 0o644, "").mkdir("d", 0o755);
        let path = if flags & O_DIRECTORY != 0 { "d" } else { "f" };
        let f = s.open(path, flags, 0o644);
        s.fcntl(f, F_GETFL, 0);
        v.push(s);
    }
    let (mut s, f) = with_file("fcntl-setfl-append");
    s.fcntl(f, F_SETFL, O_APPEND as i64)
        .fcntl(f, F_GETFL, 0)
        .write(f, "A")
        .fcntl(f, F_SETFL, 0)
        .lseek(f, 0, SEEK_SET)
        .write(f, "B")
        .contents("f");
    v.push(s);
    let (mut s, f) = with_file("fcntl-setfl-ignores-accmode-and-creation");
    s.fcntl(
        f,
        F_SETFL,
        (O_WRONLY | O_TRUNC | O_CREAT | O_EXCL | O_NONBLOCK) as i64,
    )
    .fcntl(f, F_GETFL, 0)
    .read(f, 3)
    .contents("f");
    v.push(s);
    let (mut s, f) = with_file("fcntl-setfl-shared-by-dup");
    let d = s.dup(f);
    s.fcntl(f, F_SETFL, (O_APPEND | O_NONBLOCK) as i64)
        .fcntl(d, F_GETFL, 0);
    v.push(s);
    let (mut s, f) = with_file("fcntl-errors");
    s.fcntl(Fd::Raw(-1), F_GETFD, 0)
        .fcntl(Fd::Raw(33), F_GETFL, 0)
        .fcntl(f, 9999, 0);
    let p = s.open("f", O_PATH, 0);
    s.fcntl(p, F_GETFD, 0)
        .fcntl(p, F_SETFL, O_APPEND as i64)
        .fcntl(p, F_GETFL, 0);
    v.push(s);
    let (mut s, f) = with_file("close-twice");
    s.close(f).close(f).read(f, 1);
    v.push(s);
    let (mut s, f) = with_file("close-one-of-dups");
    let d = s.dup(f);
    s.close(f).read(d, 4).close(d).read(d, 4);
    v.push(s);

    // chdir, fchdir, getcwd.
    let mut s = Script::new("cwd/basic");
    s.mkdir("a", 0o755).mkdir("a/b", 0o755).getcwd();
    s.chdir("a")
        .getcwd()
        .chdir("b")
        .getcwd()
        .chdir("..")
        .getcwd();
    s.chdir("/a/b")
        .getcwd()
        .chdir("../..")
        .getcwd()
        .chdir("..")
        .getcwd();
    v.push(s);
    let mut s = Script::new("cwd/relative-ops-after-chdir");
    s.mkdir("a", 0o755)
        .chdir("a")
        .file("f", 0o644, "in a")
        .mkdir("sub", 0o755);
    s.chdir("/").ls("a").contents("a/f");
    v.push(s);
    let mut s = Script::new("cwd/chdir-errors");
    s.file("f", 0o644, "")
        .symlink("f", "lf")
        .symlink("nowhere", "dangling");
    s.chdir("f")
        .chdir("lf")
        .chdir("dangling")
        .chdir("missing")
        .chdir("")
        .chdir("f/");
    s.getcwd();
    v.push(s);
    let mut s = Script::new("cwd/chdir-through-symlink");
    s.mkdir("real", 0o755)
        .symlink("real", "link")
        .chdir("link")
        .getcwd();
    v.push(s);
    let mut s = Script::new("cwd/fchdir");
    s.mkdir("d", 0o755).file("f", 0o644, "");
    let d = s.open("d", O_RDONLY | O_DIRECTORY, 0);
    let p = s.open("d", O_PATH, 0);
    let f = s.open("f", O_RDONLY, 0);
    s.fchdir(d)
        .getcwd()
        .chdir("/")
        .fchdir(p)
        .getcwd()
        .fchdir(f)
        .fchdir(Fd::Raw(-1));
    s.getcwd();
    v.push(s);
    let mut s = Script::new("cwd/getcwd-buffer-sizes");
    s.mkdir("abc", 0o755).chdir("abc");
    s.getcwd_sz(0)
        .getcwd_sz(1)
        .getcwd_sz(4)
        .getcwd_sz(5)
        .getcwd_sz(100);
    v.push(s);
    let mut s = Script::new("cwd/getcwd-after-rename");
    s.mkdir("a", 0o755)
        .mkdir("a/b", 0o755)
        .chdir("a/b")
        .rename("/a", "/z")
        .getcwd();
    s.rename("/z/b", "/b2").getcwd();
    v.push(s);
    let mut s = Script::new("cwd/getcwd-removed-dir");
    s.mkdir("a", 0o755)
        .chdir("a")
        .rmdir("/a")
        .getcwd()
        .chdir("..")
        .getcwd();
    v.push(s);
    let mut s = Script::new("cwd/at-fdcwd-follows-chdir");
    s.mkdir("a", 0o755).file("a/f", 0o644, "").chdir("a");
    s.stat_at(Fd::Cwd, "f", 0).stat("/a/f").stat("../a/f");
    v.push(s);
}
