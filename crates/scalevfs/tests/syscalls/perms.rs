//! Owners, modes, times and access checks, as root and as an unprivileged user.

use super::*;

#[test]
fn chmod_chown_utimens_access_as_root() {
    let mut b = Both::new();
    b.open("f", O_CREAT | RW, 0o644).unwrap();
    b.chmod("f", 0o7777).unwrap();
    b.stat("f", 0).unwrap();
    b.chmod("missing", 0o644).unwrap_err();
    b.chown("f", 1000, 1000, 0).unwrap();
    b.stat("f", 0).unwrap();
    b.chmod("f", 0o6755).unwrap();
    b.chown("f", u32::MAX, u32::MAX, 0).unwrap();
    b.stat("f", 0).unwrap();
    b.chmod("f", 0o6745).unwrap();
    b.chown("f", 0, u32::MAX, 0).unwrap();
    b.stat("f", 0).unwrap();
    b.symlink("f", "l").unwrap();
    b.chown("l", 5, 5, AT_SYMLINK_NOFOLLOW).unwrap();
    b.stat("l", AT_SYMLINK_NOFOLLOW).unwrap();
    b.stat("f", 0).unwrap();
    b.chown("f", 1, 1, 0x1).unwrap_err();
    b.mkdir("d", 0o755).unwrap();
    b.chmod("d", 0o2755).unwrap();
    b.chown("d", 7, 7, 0).unwrap();
    b.stat("d", 0).unwrap();
    let t = |s, n| Timespec { sec: s, nsec: n };
    b.utimens("f", None, 0).unwrap();
    b.utimens("f", Some([t(1, 2), t(3, 4)]), 0).unwrap();
    b.utimens("f", Some([t(0, UTIME_OMIT), t(0, UTIME_NOW)]), 0)
        .unwrap();
    b.utimens("missing", Some([t(0, UTIME_OMIT), t(0, UTIME_OMIT)]), 0)
        .unwrap();
    b.utimens("f", Some([t(0, 1_000_000_000), t(0, 0)]), 0)
        .unwrap_err();
    b.utimens("missing", None, 0).unwrap_err();
    b.utimens("f", None, 0x1).unwrap_err();
    b.utimens("l", None, AT_SYMLINK_NOFOLLOW).unwrap();
    b.access("f", F_OK, 0).unwrap();
    b.access("f", R_OK | W_OK, 0).unwrap();
    b.chmod("f", 0o644).unwrap();
    b.access("f", X_OK, 0).unwrap_err();
    b.access("d", X_OK, 0).unwrap();
    b.access("f", 8, 0).unwrap_err();
    b.access("f", F_OK, 0x1).unwrap_err();
    b.access("missing", F_OK, 0).unwrap_err();
    b.access("l", F_OK, AT_SYMLINK_NOFOLLOW).unwrap();
    let i = idx(b.open("f", O_RDONLY, 0));
    b.fchmod(i, 0o600).unwrap();
    b.fstat(i).unwrap();
    let p = idx(b.open("f", O_PATH, 0));
    b.fchmod(p, 0o600).unwrap_err();
}

#[test]
fn permissions_as_user() {
    let mut b = Both::new();
    b.mkdir("ro", 0o755).unwrap();
    b.open("ro/f", O_CREAT | RW, 0o644).unwrap();
    b.mkdir("nox", 0o766).unwrap();
    b.open("nox/f", O_CREAT | RW, 0o666).unwrap();
    b.mkdir("mine", 0o755).unwrap();
    b.chown("mine", 1000, 1000, 0).unwrap();
    b.open("mine/own", O_CREAT | RW, 0o644).unwrap();
    b.chown("mine/own", 1000, 1000, 0).unwrap();
    b.open("grp", O_CREAT | RW, 0o640).unwrap();
    b.chown("grp", 0, 2000, 0).unwrap();
    b.open("other", O_CREAT | RW, 0o604).unwrap();
    b.open("exe", O_CREAT | RW, 0o4755).unwrap();
    b.chown("exe", 1000, 1000, 0).unwrap();
    b.chmod("exe", 0o6775).unwrap();
    b.mkdir("sticky", 0o1777).unwrap();
    b.chmod("sticky", 0o1777).unwrap();
    b.open("sticky/rootfile", O_CREAT | RW, 0o666).unwrap();
    b.mkdir("sgid", 0o2777).unwrap();
    b.chmod("sgid", 0o2777).unwrap();
    b.chown("sgid", 0, 3000, 0).unwrap();
    b.user(true);
    b.open("ro/f", O_RDONLY, 0).unwrap();
    b.open("ro/f", O_WRONLY, 0).unwrap_err();
    b.open("ro/new", O_CREAT | RW, 0o644).unwrap_err();
    b.mkdir("ro/new", 0o755).unwrap_err();
    b.unlink("ro/f", 0).unwrap_err();
    b.rename("ro/f", "ro/g", 0).unwrap_err();
    b.open("nox/f", O_RDONLY, 0).unwrap_err();
    b.stat("nox/f", 0).unwrap_err();
    b.stat("nox", 0).unwrap();
    // The host's faccessat checks the real uid unless AT_EACCESS: use the fsuid.
    b.access("nox/f", F_OK, AT_EACCESS).unwrap_err();
    b.open("grp", O_RDONLY, 0).unwrap();
    b.open("grp", O_WRONLY, 0).unwrap_err();
    b.open("other", O_RDONLY, 0).unwrap();
    b.access("other", R_OK, AT_EACCESS).unwrap();
    b.access("other", W_OK, AT_EACCESS).unwrap_err();
    b.access("exe", X_OK, AT_EACCESS).unwrap();
    b.chmod("ro/f", 0o777).unwrap_err();
    b.chown("ro/f", 1000, 1000, 0).unwrap_err();
    b.chown("mine/own", 0, u32::MAX, 0).unwrap_err();
    b.chown("mine/own", 1000, u32::MAX, 0).unwrap();
    b.chown("mine/own", u32::MAX, 2000, 0).unwrap();
    b.stat("mine/own", 0).unwrap();
    b.chown("mine/own", u32::MAX, 3000, 0).unwrap_err();
    b.chmod("mine/own", 0o2755).unwrap();
    b.stat("mine/own", 0).unwrap();
    b.chown("mine/own", u32::MAX, 1000, 0).unwrap();
    b.chmod("mine/own", 0o2755).unwrap();
    b.stat("mine/own", 0).unwrap();
    b.open("mine/own", O_RDONLY | O_NOATIME, 0).unwrap();
    b.open("ro/f", O_RDONLY | O_NOATIME, 0).unwrap_err();
    let t = |s, n| Timespec { sec: s, nsec: n };
    b.utimens("ro/f", None, 0).unwrap_err();
    b.utimens("ro/f", Some([t(1, 1), t(1, 1)]), 0).unwrap_err();
    b.utimens("mine/own", Some([t(1, 1), t(1, 1)]), 0).unwrap();
    b.utimens("nox/f", None, 0).unwrap_err();
    // Writing clears set-id bits of a non-root writer.
    let e = idx(b.open("exe", RW, 0));
    b.write(e, b"x").unwrap();
    b.stat("exe", 0).unwrap();
    b.close(e).unwrap();
    // Sticky directory: cannot remove another user's file.
    b.unlink("sticky/rootfile", 0).unwrap_err();
    b.rename("sticky/rootfile", "sticky/x", 0).unwrap_err();
    b.open("sticky/mine", O_CREAT | RW, 0o644).unwrap();
    b.rename("sticky/mine", "sticky/mine2", 0).unwrap();
    b.unlink("sticky/mine2", 0).unwrap();
    // Setgid directory passes its group (and setgid on subdirectories).
    b.open("sgid/f", O_CREAT | RW, 0o644).unwrap();
    b.stat("sgid/f", 0).unwrap();
    b.mkdir("sgid/sub", 0o755).unwrap();
    b.stat("sgid/sub", 0).unwrap();
    // Hard links to files one cannot write (protected_hardlinks).
    b.link("ro/f", "mine/link", 0).unwrap_err();
    b.link("mine/own", "mine/link", 0).unwrap();
    b.open("mine/f2", O_CREAT | RW, 0o600).unwrap();
    b.mkdir("mine/sub", 0o755).unwrap();
    b.rename("mine/sub", "sticky/sub", 0).unwrap();
    b.truncate("ro/f", 0).unwrap_err();
    b.user(false);
    b.chmod("mine", 0o555).unwrap();
    b.user(true);
    b.open("mine/f3", O_CREAT | RW, 0o600).unwrap_err();
    b.unlink("mine/f2", 0).unwrap_err();
    b.user(false);
}

#[test]
fn rename_dir_needs_write_on_itself_across_parents() {
    let mut b = Both::new();
    b.mkdir("a", 0o777).unwrap();
    b.mkdir("b", 0o777).unwrap();
    b.chmod("a", 0o777).unwrap();
    b.chmod("b", 0o777).unwrap();
    b.mkdir("a/d", 0o555).unwrap();
    b.chown("a/d", 1000, 1000, 0).unwrap();
    b.mkdir("a/e", 0o555).unwrap();
    b.user(true);
    b.rename("a/d", "b/d", 0).unwrap_err();
    b.rename("a/d", "a/d2", 0).unwrap();
    b.rename("a/e", "b/e", 0).unwrap_err();
    b.user(false);
}

#[test]
fn umask_applies() {
    use scalevfs::{Credentials, Process, Vfs, VfsOptions};
    let vfs = Vfs::new(VfsOptions::default());
    let p = Process::new(&vfs, Credentials::root());
    p.umask(0o027);
    p.open("/f", O_CREAT | RW, 0o777).unwrap();
    p.mkdir("/d", 0o777).unwrap();
    assert_eq!(p.stat("/f").unwrap().mode, S_IFREG | 0o750);
    assert_eq!(p.stat("/d").unwrap().mode, S_IFDIR | 0o750);
}

#[test]
fn times_change_like_linux() {
    use scalevfs::{Credentials, Process, Vfs, VfsOptions};
    let vfs = Vfs::new(VfsOptions::default());
    let p = Process::new(&vfs, Credentials::root());
    p.mkdir("/d", 0o755).unwrap();
    let old = Timespec { sec: 1000, nsec: 0 };
    let reset = |path: &str| p.utimensat(AT_FDCWD, path, Some([old, old]), 0).unwrap();
    reset("/d");
    p.write_file("/d/f", b"x").unwrap();
    let d = p.stat("/d").unwrap();
    assert!(d.mtime > old && d.ctime > d.mtime || d.ctime >= d.mtime);
    assert!(d.mtime > old);
    reset("/d/f");
    let fd = p.open("/d/f", RW, 0).unwrap();
    let mut b = [0u8; 1];
    p.read(fd, &mut b).unwrap();
    let s = p.fstat(fd).unwrap();
    assert!(
        s.atime > old,
        "read updates atime (relatime: atime <= mtime)"
    );
    assert_eq!(s.mtime, old);
    // relatime: an atime newer than mtime and ctime, and less than a day old, stays.
    let later = Timespec {
        sec: s.ctime.sec + 3600,
        nsec: 0,
    };
    p.utimensat(AT_FDCWD, "/d/f", Some([later, old]), 0)
        .unwrap();
    p.pread64(fd, &mut b, 0).unwrap();
    assert_eq!(
        p.fstat(fd).unwrap().atime,
        later,
        "relatime keeps a recent atime"
    );
    p.write(fd, b"y").unwrap();
    let s2 = p.fstat(fd).unwrap();
    assert!(s2.mtime > old && s2.ctime >= s2.mtime);
    reset("/d/f");
    p.fchmod(fd, 0o600).unwrap();
    let s3 = p.fstat(fd).unwrap();
    assert_eq!(s3.mtime, old);
    assert!(s3.ctime > old);
    reset("/d");
    p.unlink("/d/f").unwrap();
    assert!(p.stat("/d").unwrap().mtime > old);
    let ino_ctime = p.fstat(fd).unwrap().ctime;
    assert!(ino_ctime > old);
    // O_NOATIME reads leave atime alone.
    p.write_file("/n", b"abc").unwrap();
    reset("/n");
    let n = p.open("/n", O_RDONLY | O_NOATIME, 0).unwrap();
    p.read(n, &mut b).unwrap();
    assert_eq!(p.fstat(n).unwrap().atime, old);
    // UTIME_OMIT keeps one of the two.
    p.utimensat(
        AT_FDCWD,
        "/n",
        Some([
            Timespec {
                sec: 5,
                nsec: UTIME_OMIT,
            },
            Timespec { sec: 7, nsec: 8 },
        ]),
        0,
    )
    .unwrap();
    let s = p.stat("/n").unwrap();
    assert_eq!((s.atime, s.mtime), (old, Timespec { sec: 7, nsec: 8 }));
    // futimens: empty path on a descriptor.
    p.utimensat(n, "", None, 0).unwrap();
    assert!(p.stat("/n").unwrap().mtime.sec > 7);
}
