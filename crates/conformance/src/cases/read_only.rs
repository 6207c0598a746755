//! A tmpfs mounted read-only (`MS_RDONLY`): every call that would change it fails with
//! `EROFS`, in Linux's order among the call's other errors, and reads change nothing (no
//! atime). The host runs these in a mount namespace of its own.

use crate::script::{Script, G1, NOW, OMIT, U1};
use libc::*;

pub(super) fn cases(v: &mut Vec<Script>) {
    names(v);
    attributes(v);
    as_a_user(v);
    stacked(v);
}

/// A script with the file `f` outside, and a read-only tmpfs on the directory `m`.
fn read_only(name: &str) -> Script {
    let mut s = Script::new(format!("read-only/{name}"));
    s.mkdir("m", 0o755).file("f", 0o644, "outside");
    s.mount_tmpfs_ro("m");
    s
}

/// Creating, removing and renaming names: the walk's errors, `EEXIST`, a trailing slash's
/// `ENOENT`/`EISDIR` and `EXDEV` come before `EROFS`; an unlink's `ENOENT` after it.
fn names(v: &mut Vec<Script>) {
    let mut s = read_only("names");
    s.stat("m").ls("m");
    s.mkdir("m/d", 0o755)
        .mkdir("m", 0o755)
        .mkdir("m/.", 0o755)
        .mkdir("m/nope/d", 0o755)
        .mkdir("m/d/", 0o755);
    s.open("m/f", O_CREAT | O_WRONLY, 0o644);
    s.open("m/f", O_CREAT | O_EXCL | O_RDONLY, 0o644);
    s.open("m/f/", O_CREAT | O_RDONLY, 0o644);
    s.open("m", O_CREAT | O_RDONLY, 0o644);
    s.open("m", O_CREAT | O_EXCL | O_RDONLY, 0o644);
    s.open("m/nope/f", O_CREAT | O_RDONLY, 0o644);
    s.open("m", O_TMPFILE | O_RDWR, 0o600);
    s.open("m", O_WRONLY, 0);
    s.open("m", O_RDONLY | O_TRUNC, 0);
    s.unlink("m/nope")
        .unlink("m/.")
        .unlink("m/nope/x")
        .rmdir("m/nope")
        .rmdir("m/.")
        .rmdir("m/..");
    s.rename("m/a", "m/b")
        .rename("m/a", "f")
        .rename("f", "m/a")
        .rename2("m/a", "m/.", RENAME_NOREPLACE)
        .rename("m/.", "m/a");
    s.link("f", "m/l")
        .link("f", "m")
        .symlink("x", "m/s")
        .symlink("x", "m");
    s.mkfifo("m/p", 0o644);
    s.ls("m").ls(".");
    v.push(s);
}

/// Attributes of the mount's root: `chmod`, `chown`, times, `truncate`, `access`,
/// extended attributes and inode flags, by path and by descriptor.
fn attributes(v: &mut Vec<Script>) {
    let mut s = read_only("attributes");
    s.snap("m");
    s.chmod("m", 0o700)
        .chown("m", 1, 1)
        .chown("m", u32::MAX, u32::MAX)
        .utimens("m", None, 0)
        .utimens("m", Some([OMIT, OMIT]), 0)
        .utimens("m", Some([NOW, OMIT]), 0)
        .truncate("m", 0)
        .access("m", W_OK)
        .access("m", R_OK | X_OK)
        .setxattr("m", "user.x", "v", 0)
        .setxattr("m", "nonamespace", "v", 0)
        .removexattr("m", "user.x")
        .listxattr("m", 64);
    let d = s.open("m", O_RDONLY | O_DIRECTORY, 0);
    s.fchmod(d, 0o700)
        .fchown(d, 1, 1)
        .futimens(d, None)
        .getflags(d)
        .setflags(d, 0)
        .fsetxattr(d, "user.x", "v", 0)
        .fremovexattr(d, "user.x")
        .getdents(d)
        .close(d);
    // Nothing changed, the directory's atime included.
    s.times_since("m").stat("m");
    v.push(s);
}

/// An unprivileged caller meets `EROFS` before the permission checks it would fail.
fn as_a_user(v: &mut Vec<Script>) {
    let mut s = read_only("as-a-user");
    s.become_user(U1, G1);
    s.mkdir("m/d", 0o755);
    s.open("m/f", O_CREAT | O_WRONLY, 0o644);
    s.unlink("m/nope")
        .rename("m/a", "m/b")
        .chmod("m", 0o700)
        .chown("m", U1, G1)
        .utimens("m", None, 0)
        .access("m", W_OK)
        .setxattr("m", "trusted.x", "v", 0)
        .setxattr("m", "user.x", "v", 0);
    s.open("m", O_RDONLY | O_DIRECTORY, 0);
    v.push(s);
}

/// A read-write tmpfs mounted on the read-only one's root is writable; once it is gone
/// the read-only one is seen again, and once that is gone the directory below.
fn stacked(v: &mut Vec<Script>) {
    let mut s = read_only("stacked");
    s.mount_tmpfs("m");
    s.file("m/g", 0o644, "top").mkdir("m/d", 0o755).ls("m");
    s.umount2("m", 0).ls("m").mkdir("m/d", 0o755);
    s.umount2("m", 0).mkdir("m/d", 0o755).ls("m");
    s.mount_tmpfs_ro("m/d")
        .mount_tmpfs_ro("m/d")
        .umount2("m/d", MNT_DETACH)
        .ls("m/d");
    v.push(s);
}
