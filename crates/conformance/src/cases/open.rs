//! openat: flags x existing object, O_CREAT modes and umask, O_PATH, O_CLOEXEC,
//! O_NOATIME, O_TRUNC, O_APPEND.

use super::{observe, Kind};
use crate::script::Script;
use libc::*;

/// The flag combinations of the matrix, with a name for each.
const FLAGS: &[(&str, i32)] = &[
    ("rdonly", O_RDONLY),
    ("wronly", O_WRONLY),
    ("rdwr", O_RDWR),
    ("creat", O_CREAT | O_WRONLY),
    ("creat-excl", O_CREAT | O_EXCL | O_WRONLY),
    ("creat-rdonly", O_CREAT | O_RDONLY),
    ("trunc-wronly", O_TRUNC | O_WRONLY),
    ("trunc-rdonly", O_TRUNC | O_RDONLY),
    ("append", O_APPEND | O_WRONLY),
    ("directory", O_DIRECTORY | O_RDONLY),
    ("directory-wronly", O_DIRECTORY | O_WRONLY),
    ("directory-creat", O_DIRECTORY | O_CREAT | O_RDONLY),
    ("nofollow", O_NOFOLLOW | O_RDONLY),
    ("nofollow-creat", O_NOFOLLOW | O_CREAT | O_WRONLY),
    ("path", O_PATH),
    ("path-nofollow", O_PATH | O_NOFOLLOW),
    ("path-directory", O_PATH | O_DIRECTORY),
    ("cloexec", O_CLOEXEC | O_RDONLY),
    ("noatime", O_NOATIME | O_RDONLY),
];

pub(super) fn cases(v: &mut Vec<Script>) {
    // Matrix: each flag combination on each kind of object.
    for &(fname, flags) in FLAGS {
        for kind in Kind::ALL {
            let mut s = Script::new(format!("open/{fname}/{}", kind.tag()));
            kind.make(&mut s, "t");
            let f = s.open("t", flags, 0o640);
            s.fcntl(f, F_GETFL, 0)
                .fcntl(f, F_GETFD, 0)
                .fstat(f)
                .close(f);
            observe(&mut s, &["t"]);
            if kind == Kind::Dangling {
                s.lstat("t.target");
            }
            v.push(s);
        }
    }

    // O_CREAT modes through the umask, for files and directories.
    for umask in [0o000, 0o022, 0o077, 0o777] {
        for mode in [0o777, 0o644, 0o4755, 0o2755, 0o1777, 0o7777] {
            let mut s = Script::new(format!("umask/file/{umask:03o}/{mode:04o}"));
            s.umask(umask);
            let f = s.open("f", O_CREAT | O_EXCL | O_RDWR, mode);
            s.fstat(f).close(f).umask(0o022);
            v.push(s);
            let mut s = Script::new(format!("umask/dir/{umask:03o}/{mode:04o}"));
            s.umask(umask).mkdir("d", mode).umask(0o022).stat("d");
            v.push(s);
        }
    }
    let mut s = Script::new("umask/returns-previous");
    s.umask(0o077).umask(0o002).umask(0o7777).umask(0o022);
    v.push(s);
    let mut s = Script::new("umask/symlink-ignores-umask");
    s.umask(0o777).symlink("x", "l").lstat("l");
    v.push(s);

    // O_TRUNC and O_APPEND effects on data.
    let mut s = Script::new("open/trunc-clears-data");
    s.file("f", 0o644, "hello world");
    let f = s.open("f", O_WRONLY | O_TRUNC, 0);
    s.fstat(f).write(f, "hi").close(f).contents("f");
    v.push(s);
    let mut s = Script::new("open/append-writes-at-end-after-seek");
    s.file("f", 0o644, "abc");
    let f = s.open("f", O_RDWR | O_APPEND, 0);
    s.lseek(f, 0, SEEK_SET)
        .write(f, "XY")
        .lseek(f, 0, SEEK_CUR)
        .pread(f, 10, 0)
        .close(f)
        .contents("f");
    v.push(s);
    let mut s = Script::new("open/append-pwrite-appends");
    s.file("f", 0o644, "abc");
    let f = s.open("f", O_WRONLY | O_APPEND, 0);
    s.pwrite(f, "Z", 0).close(f).contents("f");
    v.push(s);
    let mut s = Script::new("open/creat-existing-keeps-mode-and-data");
    s.file("f", 0o600, "keep");
    let f = s.open("f", O_CREAT | O_WRONLY, 0o777);
    s.fstat(f).close(f).contents("f");
    v.push(s);
    let mut s = Script::new("open/creat-in-missing-dir");
    s.open("nodir/f", O_CREAT | O_WRONLY, 0o644);
    v.push(s);
    let mut s = Script::new("open/creat-through-file");
    s.file("f", 0o644, "");
    s.open("f/g", O_CREAT | O_WRONLY, 0o644);
    v.push(s);
    let mut s = Script::new("open/accmode-3");
    s.file("f", 0o644, "data");
    let f = s.open("f", O_ACCMODE, 0);
    s.read(f, 4).write(f, "x").fcntl(f, F_GETFL, 0).close(f);
    v.push(s);
    let mut s = Script::new("open/fds-lowest-free");
    s.file("f", 0o644, "");
    let a = s.open("f", O_RDONLY, 0);
    let b = s.open("f", O_RDONLY, 0);
    let c = s.open("f", O_RDONLY, 0);
    s.close(b);
    let d = s.open("f", O_RDONLY, 0);
    s.close(a).close(c).close(d);
    v.push(s);
    let mut s = Script::new("open/two-opens-independent-offsets");
    s.file("f", 0o644, "0123456789");
    let a = s.open("f", O_RDONLY, 0);
    let b = s.open("f", O_RDONLY, 0);
    s.read(a, 3).read(b, 5).read(a, 3).close(a).close(b);
    v.push(s);
    let mut s = Script::new("open/invalid-creat-mode-bits-ignored");
    let f = s.open("f", O_CREAT | O_WRONLY, 0o170644);
    s.fstat(f).close(f);
    v.push(s);

    // O_PATH descriptors: what they can and cannot do.
    let mut s = Script::new("open/path-fd-file-ops");
    s.file("f", 0o644, "data");
    let f = s.open("f", O_PATH, 0);
    s.read(f, 4)
        .write(f, "x")
        .fstat(f)
        .fchmod(f, 0o600)
        .fchown(f, 0, 0)
        .ftruncate(f, 0)
        .lseek(f, 0, SEEK_SET)
        .fsync(f)
        .futimens(f, None)
        .fcntl(f, F_GETFL, 0)
        .getdents(f)
        .close(f)
        .stat("f");
    v.push(s);
    let mut s = Script::new("open/path-fd-dir-as-dirfd");
    s.mkdir("d", 0o755).file("d/f", 0o644, "in d");
    let d = s.open("d", O_PATH | O_DIRECTORY, 0);
    let f = s.open_at(d, "f", O_RDONLY, 0);
    s.read(f, 10)
        .stat_at(d, "f", 0)
        .getdents(d)
        .fchdir(d)
        .getcwd();
    v.push(s);
    let mut s = Script::new("open/path-nofollow-symlink-fd");
    s.symlink("nowhere", "l");
    let l = s.open("l", O_PATH | O_NOFOLLOW, 0);
    s.fstat(l)
        .stat_at(l, "", AT_EMPTY_PATH)
        .readlink_at(l, "", 100)
        .read(l, 1)
        .close(l);
    v.push(s);
    let mut s = Script::new("open/path-ignores-creat-and-trunc");
    s.file("f", 0o644, "data");
    let f = s.open("f", O_PATH | O_TRUNC | O_CREAT, 0o600);
    s.fcntl(f, F_GETFL, 0)
        .close(f)
        .stat("f")
        .open("new", O_PATH | O_CREAT, 0o600);
    s.stat("new");
    v.push(s);

    // O_CLOEXEC and O_NOATIME.
    let mut s = Script::new("open/cloexec-flag-visible");
    s.file("f", 0o644, "");
    let a = s.open("f", O_RDONLY | O_CLOEXEC, 0);
    let b = s.open("f", O_RDONLY, 0);
    s.fcntl(a, F_GETFD, 0)
        .fcntl(b, F_GETFD, 0)
        .fcntl(a, F_GETFL, 0);
    v.push(s);
    let mut s = Script::new("open/noatime-owner-ok");
    s.file("f", 0o644, "");
    let f = s.open("f", O_RDONLY | O_NOATIME, 0);
    s.fcntl(f, F_GETFL, 0);
    v.push(s);
}
