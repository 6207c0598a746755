//! `O_TMPFILE` (an unnamed file in a directory, named later by `linkat` with
//! `AT_EMPTY_PATH` unless opened with `O_EXCL`) and `linkat(fd, "", ..., AT_EMPTY_PATH)` in
//! general: what it links, its errors, and who may (since Linux 6.10, anyone, for a file
//! they opened themselves).

use crate::op::Fd;
use crate::script::Script;
use libc::*;

const EMPTY: i32 = AT_EMPTY_PATH;

pub(super) fn cases(v: &mut Vec<Script>) {
    tmpfile(v);
    link_empty_path(v);
}

fn tmpfile(v: &mut Vec<Script>) {
    // Unnamed until linked; the umask applies; linking again gives more names.
    let mut s = Script::new("open/tmpfile/link-it");
    s.mkdir("d", 0o755);
    let t = s.open("d", O_TMPFILE | O_RDWR, 0o666);
    s.fstat(t)
        .write(t, "data")
        .fcntl(t, F_GETFL, 0)
        .ls("d")
        .link_at(t, "", Fd::Cwd, "d/named", EMPTY)
        .fstat(t)
        .contents("d/named")
        .link_at(t, "", Fd::Cwd, "named2", EMPTY)
        .link_at(t, "", Fd::Cwd, "d/named", EMPTY)
        .stat("named2")
        .ls("d")
        .unlink("d/named")
        .unlink("named2")
        .fstat(t)
        .link_at(t, "", Fd::Cwd, "again", EMPTY)
        .stat("again");
    v.push(s);

    // O_EXCL: never linkable; a write-only one is; the file works as any other.
    let mut s = Script::new("open/tmpfile/excl-and-wronly");
    s.mkdir("d", 0o755);
    let x = s.open("d", O_TMPFILE | O_RDWR | O_EXCL, 0o600);
    let w = s.open("d", O_TMPFILE | O_WRONLY, 0o640);
    s.link_at(x, "", Fd::Cwd, "x", EMPTY)
        .link_at(x, "", Fd::Cwd, "x", 0)
        .link_at(x, "", Fd::Cwd, "x", EMPTY | AT_SYMLINK_FOLLOW)
        .fstat(x)
        .write(w, "abc")
        .ftruncate(w, 10)
        .fchmod(w, 0o604)
        .fallocate(w, 0, 0, 8192)
        .read(w, 1)
        .fstat(w)
        .link_at(w, "", Fd::Cwd, "w", EMPTY)
        .stat("w")
        .contents("w")
        .ls("d");
    v.push(s);

    // The flag checks (EINVAL) come before the walk; then ENOENT/ENOTDIR; O_PATH drops
    // O_TMPFILE; mode bits past 07777 are dropped by openat.
    let mut s = Script::new("open/tmpfile/errors-and-flags");
    s.mkdir("d", 0o755)
        .file("f", 0o644, "")
        .symlink("d", "ld")
        .symlink("f", "lf");
    for (path, flags, mode) in [
        ("d", O_TMPFILE | O_RDONLY, 0o600),
        ("d", O_TMPFILE | O_WRONLY | O_CREAT, 0o600),
        ("d", (O_TMPFILE & !O_DIRECTORY) | O_RDWR, 0o600),
        ("missing", O_TMPFILE | O_RDONLY, 0o600),
        ("f", O_TMPFILE | O_RDWR, 0o600),
        ("lf", O_TMPFILE | O_RDWR, 0o600),
        ("missing", O_TMPFILE | O_RDWR, 0o600),
        ("missing/x", O_TMPFILE | O_RDWR, 0o600),
        ("f/x", O_TMPFILE | O_RDWR, 0o600),
        ("ld", O_TMPFILE | O_RDWR, 0o600),
        ("ld", O_TMPFILE | O_RDWR | O_NOFOLLOW, 0o600),
        ("d/", O_TMPFILE | O_RDWR, 0o600),
        (".", O_TMPFILE | O_RDWR, 0o7777),
        ("d/..", O_TMPFILE | O_RDWR, 0o10644),
        ("d", O_TMPFILE | O_RDWR | O_TRUNC | O_APPEND, 0o600),
        ("d", O_TMPFILE | O_RDWR | O_PATH, 0o600),
        ("", O_TMPFILE | O_RDWR, 0o600),
    ] {
        let t = s.open(path, flags, mode);
        s.fstat(t).fcntl(t, F_GETFL, 0).close(t);
    }
    s.ls("d").ls(".");
    v.push(s);

    // The directory must be writable and searchable by the caller; owner and group are
    // the caller's (or a setgid directory's group).
    let mut s = Script::new("open/tmpfile/user-permissions");
    s.mkdir_mode("own", 0o755)
        .chown("own", 1000, 1000)
        .mkdir_mode("ro", 0o755)
        .mkdir_mode("wonly", 0o733)
        .mkdir_mode("noexec", 0o777 & !0o111)
        .mkdir_mode("sticky", 0o1777)
        .mkdir_mode("sgid", 0o2777)
        .chown("sgid", 0, 50)
        .become_user(1000, 1000);
    for dir in ["own", "ro", "wonly", "noexec", "sticky", "sgid", "noexec/x"] {
        let t = s.open(dir, O_TMPFILE | O_RDWR, 0o2770);
        s.fstat(t)
            .link_at(t, "", Fd::Cwd, "own/new", EMPTY)
            .close(t);
        s.unlink("own/new");
    }
    v.push(s);

    // Across mounts: EXDEV; into a directory the caller cannot write: EACCES.
    let mut s = Script::new("open/tmpfile/link-elsewhere");
    s.mkdir("m", 0o755)
        .mount_tmpfs("m")
        .mkdir_mode("ro", 0o555)
        .mkdir_mode("pub", 0o777);
    let t = s.open("m", O_TMPFILE | O_RDWR, 0o644);
    s.link_at(t, "", Fd::Cwd, "x", EMPTY)
        .link_at(t, "", Fd::Cwd, "m/x", EMPTY)
        .close(t)
        .umount2("m", 0)
        .become_user(1000, 1000);
    let root = s.open(".", O_TMPFILE | O_RDWR, 0o644);
    let t = s.open("pub", O_TMPFILE | O_RDWR, 0o644);
    s.fstat(root)
        .link_at(t, "", Fd::Cwd, "ro/x", EMPTY)
        .link_at(t, "", Fd::Cwd, "pub/x", EMPTY)
        .stat("pub/x");
    v.push(s);
}

/// `linkat` with an empty path and `AT_EMPTY_PATH`: links what the descriptor names.
fn link_empty_path(v: &mut Vec<Script>) {
    let mut s = Script::new("link/empty-path");
    s.file("f", 0o644, "abc")
        .mkdir("d", 0o755)
        .symlink("f", "l");
    let f = s.open("f", O_RDONLY, 0);
    let p = s.open("f", O_PATH, 0);
    let d = s.open("d", O_RDONLY | O_DIRECTORY, 0);
    let l = s.open("l", O_PATH | O_NOFOLLOW, 0);
    s.link_at(f, "", Fd::Cwd, "g", EMPTY)
        .stat("g")
        .link_at(p, "", Fd::Cwd, "h", EMPTY | AT_SYMLINK_FOLLOW)
        .link_at(l, "", Fd::Cwd, "l2", EMPTY)
        .lstat("l2")
        .link_at(d, "", Fd::Cwd, "d2", EMPTY)
        .link_at(Fd::Cwd, "", Fd::Cwd, "cwd", EMPTY)
        .link_at(Fd::Raw(-1), "", Fd::Cwd, "bad", EMPTY)
        .link_at(Fd::Raw(99), "", Fd::Cwd, "bad", EMPTY)
        .link_at(f, "", Fd::Cwd, "nope", 0)
        .link_at(f, "", Fd::Cwd, "nope", EMPTY | 0x10000)
        .link_at(f, "", Fd::Cwd, "g", EMPTY)
        .link_at(f, "", Fd::Cwd, "", EMPTY)
        .link_at(f, "", d, "in-d", EMPTY)
        .unlink("f")
        .unlink("g")
        .unlink("h")
        .unlink("d/in-d")
        .fstat(f)
        .link_at(f, "", Fd::Cwd, "back", EMPTY)
        .link_at(p, "", Fd::Cwd, "back", EMPTY)
        .stat("back");
    v.push(s);

    // An unprivileged caller may link a file it opened (Linux 6.10+), subject to the
    // usual rules (protected_hardlinks: another user's file it cannot write is EPERM).
    let mut s = Script::new("link/empty-path-user");
    s.mkdir_mode("w", 0o777)
        .file_mode("w/root-ro", 0o644, "r")
        .file_mode("w/root-rw", 0o666, "w")
        .become_user(1000, 1000)
        .file("w/mine", 0o600, "m");
    for name in ["w/mine", "w/root-ro", "w/root-rw"] {
        let f = s.open(name, O_RDONLY, 0);
        s.link_at(f, "", Fd::Cwd, format!("{name}.link"), EMPTY)
            .stat(format!("{name}.link"));
    }
    v.push(s);
}
