//! `mount(MS_REMOUNT)` of a tmpfs read-only and back: `EBUSY` while a file on it is open
//! for writing or an unlinked file is still open, what stays open and usable, and every
//! changing call on a populated read-only file system (files, directories, a symlink and a
//! FIFO made before the remount). The host runs these in a mount namespace of its own, and
//! remounts only what the script mounted.

use crate::script::{Script, G1, U1};
use libc::*;

pub(super) fn cases(v: &mut Vec<Script>) {
    busy(v);
    errors(v);
    populated(v);
    stays_open(v);
}

/// A script with a read-write tmpfs on `m` holding `m/f` ("data"), `m/d` and `m/d/g`.
fn mounted(name: &str) -> Script {
    let mut s = Script::new(format!("remount/{name}"));
    s.mkdir("m", 0o755).mount_tmpfs("m");
    s.file("m/f", 0o644, "data")
        .mkdir("m/d", 0o755)
        .file("m/d/g", 0o644, "");
    s
}

/// What makes a remount read-only fail with `EBUSY`, and that it succeeds once that is
/// gone.
fn busy(v: &mut Vec<Script>) {
    for (name, flags) in [
        ("open-wronly", O_WRONLY),
        ("open-rdwr", O_RDWR),
        ("open-append", O_WRONLY | O_APPEND),
        ("open-rdonly", O_RDONLY),
        ("open-rdonly-trunc", O_RDONLY | O_TRUNC),
        ("open-path", O_PATH),
    ] {
        let mut s = mounted(&format!("busy/{name}"));
        let f = s.open("m/f", flags, 0);
        s.remount("m", true).remount("m", false);
        s.close(f).remount("m", true).remount("m", false);
        v.push(s);
    }
    // A file opened for writing and then duplicated: busy until the last close.
    let mut s = mounted("busy/dup");
    let f = s.open("m/f", O_WRONLY, 0);
    let g = s.dup(f);
    s.close(f).remount("m", true).close(g).remount("m", true);
    v.push(s);
    // An unlinked file still open, for reading only.
    let mut s = mounted("busy/unlinked-open");
    let f = s.open("m/f", O_RDONLY, 0);
    s.unlink("m/f").remount("m", true);
    s.close(f).remount("m", true);
    v.push(s);
    // An unlinked file that nobody holds is gone at once.
    let mut s = mounted("busy/unlinked-closed");
    s.unlink("m/f").remount("m", true).ls("m");
    v.push(s);
    // An O_TMPFILE file (open for writing, with no name).
    let mut s = mounted("busy/tmpfile");
    let f = s.open("m/d", O_TMPFILE | O_RDWR, 0o600);
    s.remount("m", true).close(f).remount("m", true);
    v.push(s);
    // A removed directory that is still open, and one that is a cwd.
    let mut s = mounted("busy/removed-dir-open");
    s.unlink("m/d/g");
    let d = s.open("m/d", O_RDONLY | O_DIRECTORY, 0);
    s.rmdir("m/d")
        .remount("m", true)
        .close(d)
        .remount("m", true);
    v.push(s);
    // A file opened for writing on another mount does not matter.
    let mut s = mounted("busy/other-mount");
    let f = s.open("f0", O_CREAT | O_WRONLY, 0o644);
    s.remount("m", true).close(f);
    v.push(s);
}

/// The path's errors, then `EPERM`, then `EINVAL` for anything but a mount's root.
fn errors(v: &mut Vec<Script>) {
    let mut s = mounted("errors");
    s.symlink("m", "l");
    s.remount("nope", true)
        .remount("m/nope", true)
        .remount("m/f", true)
        .remount("m/d", true)
        .remount("m/f/", true)
        .remount("l", true)
        .remount("l", false)
        .remount("m/.", true)
        .remount("m/d/..", false)
        .remount("m", true)
        .remount("m", true)
        .remount("m", false)
        .remount("m", false);
    s.umount2("m", 0).remount("m", true).remount("m", false);
    v.push(s);
    let mut s = mounted("errors/as-a-user");
    s.chmod("m", 0o777);
    s.become_user(U1, G1);
    s.remount("m", true)
        .remount("m/f", true)
        .remount("nope", true)
        .remount("m/f/x", false);
    v.push(s);
    // A mount made read-only becomes writable, and a lazily detached one is no target.
    let mut s = Script::new("remount/read-only-mount-to-read-write");
    s.mkdir("m", 0o755).mount_tmpfs_ro("m");
    s.mkdir("m/d", 0o755)
        .remount("m", false)
        .mkdir("m/d", 0o755)
        .remount("m", true)
        .mkdir("m/e", 0o755)
        .ls("m");
    let d = s.open("m/d", O_RDONLY | O_DIRECTORY, 0);
    s.umount2("m", MNT_DETACH).remount("m", false).close(d);
    v.push(s);
}

/// Every changing call on what a read-only remount froze, against its other errors.
fn populated(v: &mut Vec<Script>) {
    let mut s = mounted("populated");
    s.symlink("f", "m/s")
        .mkfifo("m/p", 0o644)
        .mkdir("m/e", 0o755);
    s.remount("m", true);
    s.open("m/f", O_WRONLY, 0);
    s.open("m/f", O_RDWR | O_APPEND, 0);
    s.open("m/f", O_RDONLY | O_TRUNC, 0);
    s.open("m/f", O_CREAT | O_RDONLY, 0o644);
    s.open("m/f", O_CREAT | O_EXCL | O_RDONLY, 0o644);
    s.open("m/s", O_WRONLY, 0);
    s.open("m/d", O_TMPFILE | O_RDWR, 0o600);
    s.truncate("m/f", 0)
        .chmod("m/f", 0o600)
        .chmod("m/s", 0o600)
        .chown("m/f", 1, 1)
        .utimens("m/f", None, 0)
        .access("m/f", W_OK)
        .access("m/f", R_OK)
        .access("m/p", W_OK)
        .setxattr("m/f", "user.x", "v", 0)
        .removexattr("m/f", "user.x");
    s.unlink("m/f")
        .unlink("m/d")
        .unlink("m/nope")
        .rmdir("m/e")
        .rmdir("m/d")
        .rename("m/f", "m/g")
        .rename("m/f", "m/d/g")
        .rename("m/nope", "m/g")
        .rename("f0", "m/f")
        .link("m/f", "m/g")
        .link("m/f", "m/d")
        .mkdir("m/e", 0o755)
        .mkdir("m/new", 0o755)
        .symlink("x", "m/s")
        .symlink("x", "m/new");
    s.contents("m/f")
        .ls("m")
        .ls("m/d")
        .lstat("m/s")
        .readlink("m/s");
    // A FIFO on it stays writable.
    let r = s.open("m/p", O_RDONLY | O_NONBLOCK, 0);
    let w = s.open("m/p", O_WRONLY, 0);
    s.write(w, "through").read(r, 16).close(w).close(r);
    // Reads leave the atime.
    s.snap("m/f").contents("m/f").times_since("m/f");
    // Read-write again: all of it works.
    s.remount("m", false);
    let f = s.open("m/f", O_WRONLY | O_APPEND, 0);
    s.write(f, "+").close(f);
    s.rename("m/f", "m/g").unlink("m/s").rmdir("m/e");
    s.contents("m/g").ls("m");
    v.push(s);
}

/// What a remount read-only leaves open, and what those descriptors may still do.
fn stays_open(v: &mut Vec<Script>) {
    let mut s = mounted("stays-open");
    s.mkfifo("m/p", 0o644);
    let r = s.open("m/f", O_RDONLY, 0);
    let d = s.open("m/d", O_RDONLY | O_DIRECTORY, 0);
    let o = s.open("m/f", O_PATH, 0);
    let pr = s.open("m/p", O_RDONLY | O_NONBLOCK, 0);
    let pw = s.open("m/p", O_WRONLY, 0);
    s.chdir("m/d");
    s.remount("/m", true);
    s.read(r, 2)
        .pread(r, 2, 2)
        .getdents(d)
        .fstat(o)
        .fchmod(r, 0o600)
        .fchown(r, 0, 0)
        .futimens(r, None)
        .fsetxattr(r, "user.x", "v", 0)
        .ftruncate(r, 0)
        .write(pw, "x")
        .read(pr, 1)
        .mkdir("sub", 0o755)
        .getcwd();
    s.close(r).close(d).close(o).close(pr).close(pw).chdir("/");
    s.remount("m", false).mkdir("m/d/sub", 0o755).ls("m/d");
    v.push(s);
}
