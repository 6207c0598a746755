//! `renameat2(RENAME_WHITEOUT)`: the rename leaves a whiteout (a character device 0/0,
//! mode 0, owned by the caller) at the old name. Since Linux 5.8 it needs no capability.

use crate::script::Script;
use libc::*;

const WH: u32 = RENAME_WHITEOUT;

pub(super) fn cases(v: &mut Vec<Script>) {
    // A file, over nothing and over a file; the directory gains one entry.
    let mut s = Script::new("rename/whiteout/file");
    s.file("a", 0o644, "A").file("b", 0o644, "B").stat(".");
    s.rename2("a", "a2", WH)
        .lstat("a")
        .rdev("a")
        .lstat("a2")
        .contents("a2")
        .stat(".")
        .rename2("a2", "b", WH)
        .lstat("a2")
        .contents("b")
        .ls(".")
        .stat(".");
    v.push(s);

    // Opening a whiteout: no driver behind 0/0 (root); its mode 0 (others). Its own case:
    // a FUSE mount is nodev, where opening any device node is EACCES.
    let mut s = Script::new("rename/whiteout/open");
    s.mkdir_mode("d", 0o777).file("d/a", 0o644, "");
    s.rename2("d/a", "d/b", WH);
    let w = s.open("d/a", O_RDONLY, 0);
    let p = s.open("d/a", O_PATH, 0);
    s.fstat(w).fstat(p).become_user(1000, 1000);
    s.open("d/a", O_RDONLY, 0);
    s.unlink("d/a").ls("d");
    v.push(s);

    // The flag rules: with NOREPLACE allowed, with EXCHANGE never; unknown bits.
    let mut s = Script::new("rename/whiteout/flags");
    s.file("a", 0o644, "A").file("b", 0o644, "B");
    s.rename2("a", "b", WH | RENAME_NOREPLACE)
        .rename2("a", "c", WH | RENAME_EXCHANGE)
        .rename2("a", "b", WH | RENAME_EXCHANGE)
        .rename2("a", "b", WH | RENAME_EXCHANGE | RENAME_NOREPLACE)
        .rename2("a", "b", WH | 0x8)
        .rename2("a", "c", WH | RENAME_NOREPLACE)
        .lstat("a")
        .lstat("c")
        .ls(".");
    v.push(s);

    // Directories, symlinks, and a whiteout renamed with a whiteout.
    let mut s = Script::new("rename/whiteout/kinds");
    s.mkdir("d", 0o755)
        .file("d/f", 0o644, "")
        .symlink("d", "l")
        .mkdir("e", 0o755)
        .stat(".");
    s.rename2("d", "d2", WH)
        .lstat("d")
        .stat("d2")
        .stat(".")
        .rename2("l", "l2", WH)
        .lstat("l")
        .lstat("l2")
        .rename2("l", "l3", WH)
        .lstat("l")
        .lstat("l3")
        .rename2("d2/", "e", WH)
        .lstat("d2")
        .stat("e")
        .ls(".");
    v.push(s);

    // Errors: no source, a non-empty target (no whiteout made), same file, a file over a
    // directory, a loop, a trailing slash on a file, across mounts.
    let mut s = Script::new("rename/whiteout/errors");
    s.mkdir("d", 0o755)
        .file("d/f", 0o644, "")
        .mkdir("e", 0o755)
        .file("a", 0o644, "")
        .link("a", "hard")
        .mkdir("m", 0o755)
        .mount_tmpfs("m");
    s.rename2("missing", "x", WH)
        .rename2("e", "d", WH)
        .lstat("e")
        .rename2("a", "a", WH)
        .rename2("a", "hard", WH)
        .lstat("a")
        .rename2("a", "d", WH)
        .rename2("d", "a", WH)
        .rename2("d", "d/sub", WH)
        .rename2("a/", "z", WH)
        .rename2("a", "m/a", WH)
        .rename2("", "x", WH)
        .rename2(".", "x", WH)
        .rename2("e", ".", WH)
        .ls(".")
        .umount2("m", 0);
    v.push(s);

    // Across directories; times of both directories.
    let mut s = Script::new("rename/whiteout/across-dirs");
    s.mkdir("d", 0o755)
        .mkdir("e", 0o755)
        .file("d/f", 0o644, "x");
    s.snap("d")
        .rename2("d/f", "e/f", WH)
        .times_since("d")
        .lstat("d/f")
        .lstat("e/f")
        .stat("d")
        .stat("e")
        .ls("d")
        .ls("e");
    v.push(s);

    // As an unprivileged user: allowed; the whiteout is the caller's (a setgid directory
    // gives its group); the usual write and sticky rules; opening a whiteout is EACCES.
    let mut s = Script::new("rename/whiteout/user");
    s.mkdir_mode("own", 0o755)
        .chown("own", 1000, 1000)
        .mkdir_mode("sgid", 0o2777)
        .chown("sgid", 0, 50)
        .mkdir_mode("sticky", 0o1777)
        .mkdir_mode("ro", 0o755)
        .file("ro/f", 0o666, "")
        .file("sticky/root", 0o666, "")
        .become_user(1000, 1000)
        .file("own/a", 0o644, "")
        .file("sgid/a", 0o644, "")
        .file("sticky/mine", 0o644, "");
    s.rename2("own/a", "own/b", WH)
        .lstat("own/a")
        .rename2("sgid/a", "sgid/b", WH)
        .lstat("sgid/a")
        .rename2("sticky/mine", "sticky/mine2", WH)
        .lstat("sticky/mine")
        .rename2("sticky/root", "sticky/r2", WH)
        .rename2("ro/f", "own/f", WH)
        .rename2("own/b", "ro/b", WH)
        .unlink("own/a")
        .unlink("sticky/mine")
        .ls("own");
    v.push(s);
}
