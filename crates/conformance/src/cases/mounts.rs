//! mount (a fresh tmpfs) and umount2: when a mount is busy, lazy detach, expiry, stacking,
//! symlinks and privilege. The host runs these in a mount namespace of its own.

use crate::script::Script;
use libc::*;

pub(super) fn cases(v: &mut Vec<Script>) {
    basics(v);
    busy(v);
    flags(v);
    lazy(v);
}

/// A script with `m/under` in the directory `m`, then a tmpfs mounted on `m`.
fn mounted(name: &str) -> Script {
    let mut s = Script::new(format!("mount/{name}"));
    s.mkdir("m", 0o755);
    s.file("m/under", 0o644, "u");
    s.mount_tmpfs("m");
    s
}

fn basics(v: &mut Vec<Script>) {
    let mut s = mounted("cover-and-uncover");
    s.stat("m/under")
        .file("m/f", 0o644, "x")
        .ls("m")
        .umount2("m", 0);
    s.contents("m/under").stat("m/f").ls("m");
    v.push(s);

    let mut s = Script::new("mount/errors");
    s.mkdir("m", 0o755).file("f", 0o644, "");
    s.umount2("m", 0)
        .umount2("f", 0)
        .umount2("nope", 0)
        .umount2("nope/x", 0)
        .umount2("f/x", 0)
        .umount2("", 0)
        .umount2("m", 0x100)
        .umount2("nope", 0x100)
        .mount_tmpfs("f")
        .mount_tmpfs("nope");
    v.push(s);

    let mut s = mounted("not-the-root-of-the-mount");
    s.mkdir("m/d", 0o755).file("m/g", 0o644, "");
    s.umount2("m/d", 0).umount2("m/g", 0).umount2("m/.", 0);
    s.contents("m/under");
    v.push(s);

    let mut s = mounted("rmdir-and-rename-of-a-mountpoint");
    s.mkdir("other", 0o755);
    s.rmdir("m").rename("m", "m2").rename("other", "m");
    s.umount2("m", 0).rmdir("m").ls(".");
    v.push(s);

    // tmpfs copies only within one superblock.
    let mut s = mounted("copy-file-range-across-mounts");
    s.file("f", 0o644, "outside").file("m/g", 0o644, "inside");
    let out = s.open("f", O_RDWR, 0);
    let inside = s.open("m/g", O_RDWR, 0);
    s.copy_file_range(out, None, inside, None, 3, 0)
        .copy_file_range(inside, None, out, None, 3, 0)
        .copy_file_range(inside, Some(0), inside, Some(6), 6, 0)
        .close(out)
        .close(inside)
        .contents("m/g");
    v.push(s);

    // From the covered directory (the cwd from before the mount), `.` and a symlink to
    // `.` name the top of what is mounted there, for mount and umount alike.
    let mut s = Script::new("mount/from-the-covered-directory");
    s.mkdir("m", 0o755).file("m/under", 0o644, "u").chdir("m");
    s.symlink(".", "self").mount_tmpfs(".").ls(".").ls("/m");
    s.mount_tmpfs("self").file("/m/top", 0o644, "t").ls("/m");
    s.umount2(".", 0).ls("/m").umount2("self", 0).ls("/m");
    s.umount2(".", 0).chdir("/").contents("m/under");
    v.push(s);

    let mut s = mounted("stacked");
    s.file("m/first", 0o644, "1").mount_tmpfs("m");
    s.stat("m/first").file("m/second", 0o644, "2");
    s.umount2("m", 0).contents("m/first").stat("m/second");
    s.umount2("m", 0).contents("m/under").umount2("m", 0);
    v.push(s);

    let mut s = mounted("across-mounts");
    s.file("outside", 0o644, "o").file("m/inside", 0o644, "i");
    s.rename("outside", "m/x")
        .link("m/inside", "l")
        .contents("m/../outside");
    v.push(s);

    let mut s = mounted("as-a-user");
    s.mkdir_mode("d", 0o777);
    s.become_user(1000, 1000);
    s.umount2("m", 0)
        .umount2("nope", 0)
        .umount2("m", 0x100)
        .umount2("m", MNT_DETACH)
        .mount_tmpfs("d")
        .mount_tmpfs("nope");
    v.push(s);
}

fn busy(v: &mut Vec<Script>) {
    let mut s = mounted("busy-open-file");
    s.mkdir("m/d", 0o755).file("m/d/f", 0o644, "x");
    let f = s.open("m/d/f", O_RDONLY, 0);
    s.umount2("m", 0).contents("m/d/f").close(f).umount2("m", 0);
    v.push(s);

    let mut s = mounted("busy-open-root");
    let d = s.open("m", O_RDONLY | O_DIRECTORY, 0);
    s.umount2("m", 0).close(d).umount2("m", 0);
    v.push(s);

    let mut s = mounted("busy-open-path-descriptor");
    let d = s.open("m", O_PATH, 0);
    s.umount2("m", 0).close(d).umount2("m", 0);
    v.push(s);

    let mut s = mounted("busy-cwd-inside");
    s.mkdir("m/d", 0o755).chdir("m/d");
    s.umount2("/m", 0).chdir("..").umount2("/m", 0).chdir("/");
    s.umount2("/m", 0).getcwd();
    v.push(s);

    let mut s = mounted("busy-unlinked-open-file");
    let f = s.open("m/gone", O_CREAT | O_RDWR, 0o644);
    s.unlink("m/gone").umount2("m", 0).close(f).umount2("m", 0);
    v.push(s);

    let mut s = mounted("busy-mount-below");
    s.mkdir("m/d", 0o755).mount_tmpfs("m/d");
    s.umount2("m", 0).umount2("m/d", 0).umount2("m", 0);
    v.push(s);

    let mut s = mounted("not-busy-after-cached-lookups");
    s.mkdir("m/a", 0o755)
        .mkdir("m/a/b", 0o755)
        .file("m/a/b/f", 0o644, "f");
    s.symlink("a/b", "m/l")
        .stat("m/l/f")
        .stat("m/a/b/nope")
        .ls("m/a/b");
    s.umount2("m", 0).ls("m");
    v.push(s);
}

fn flags(v: &mut Vec<Script>) {
    let mut s = mounted("expire");
    s.umount2("m", MNT_EXPIRE)
        .umount2("m", MNT_EXPIRE | MNT_DETACH)
        .umount2("m", MNT_EXPIRE | MNT_FORCE)
        .umount2("m", MNT_EXPIRE)
        .contents("m/under");
    v.push(s);

    // Using the mount between two expiry requests clears the mark (Linux's mntput), so
    // the second request only marks it again.
    let mut s = mounted("expire-mark-cleared-by-use");
    s.file("m/f", 0o644, "x");
    s.umount2("m", MNT_EXPIRE)
        .stat("m/f")
        .umount2("m", MNT_EXPIRE)
        .ls("m")
        .umount2("m", MNT_EXPIRE)
        .umount2("m", MNT_EXPIRE)
        .contents("m/under");
    v.push(s);

    let mut s = mounted("expire-busy");
    let f = s.open("m", O_RDONLY | O_DIRECTORY, 0);
    s.umount2("m", MNT_EXPIRE).close(f);
    s.umount2("m", MNT_EXPIRE).umount2("m", MNT_EXPIRE);
    v.push(s);

    let mut s = mounted("force");
    s.umount2("m", MNT_FORCE).contents("m/under");
    v.push(s);

    let mut s = mounted("symlink-to-the-mountpoint");
    s.symlink("m", "lnk").symlink("/m", "abs");
    s.umount2("lnk", UMOUNT_NOFOLLOW)
        .umount2("abs", UMOUNT_NOFOLLOW)
        .umount2("lnk", 0)
        .contents("m/under");
    v.push(s);
}

fn lazy(v: &mut Vec<Script>) {
    let mut s = mounted("lazy-with-an-open-file");
    s.file("m/f", 0o644, "still here");
    let f = s.open("m/f", O_RDWR, 0);
    s.umount2("m", MNT_DETACH).contents("m/under").stat("m/f");
    s.pread(f, 10, 0)
        .pwrite(f, "again", 0)
        .pread(f, 10, 0)
        .fstat(f);
    s.close(f).umount2("m", 0);
    v.push(s);

    let mut s = mounted("lazy-with-the-cwd-inside");
    s.mkdir("m/d", 0o755).file("m/d/f", 0o644, "f").chdir("m/d");
    s.umount2("/m", MNT_DETACH)
        .getcwd()
        .contents("f")
        .chdir("..");
    s.getcwd().ls(".").chdir("..").getcwd().ls("d");
    s.mkdir("d/e", 0o755).mount_tmpfs("d/e").umount2(".", 0);
    s.chdir("/").contents("m/under");
    v.push(s);

    let mut s = mounted("lazy-tree");
    s.mkdir("m/d", 0o755)
        .mount_tmpfs("m/d")
        .file("m/d/f", 0o644, "f");
    let f = s.open("m/d/f", O_RDONLY, 0);
    s.umount2("m", MNT_DETACH).contents("m/under").stat("m/d");
    s.pread(f, 1, 0).close(f).umount2("m", MNT_DETACH);
    v.push(s);

    // A detached mount still in use gives its mountpoint back at once, so the file
    // system it was mounted on can be unmounted: the top of a stack, then a mount on a
    // subdirectory.
    let mut s = mounted("lazy-top-of-a-stack-in-use");
    s.mount_tmpfs("m").file("m/top", 0o644, "t");
    let f = s.open("m/top", O_RDONLY, 0);
    s.umount2("m", MNT_DETACH).stat("m/top").umount2("m", 0);
    s.contents("m/under").pread(f, 1, 0).fstat(f).close(f);
    v.push(s);

    let mut s = mounted("lazy-child-in-use-then-its-parent");
    s.mkdir("m/d", 0o755)
        .mount_tmpfs("m/d")
        .mkdir("m/d/x", 0o755);
    s.chdir("m/d/x").umount2("/m/d", MNT_DETACH).getcwd();
    s.umount2("/m", 0).chdir("..").getcwd().chdir("/").ls("m");
    v.push(s);
}
