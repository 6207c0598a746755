//! newfstatat/fstat (AT_SYMLINK_NOFOLLOW, AT_EMPTY_PATH), fchmodat/fchmod,
//! fchownat/fchown, utimensat (UTIME_NOW/UTIME_OMIT), faccessat, and which calls move
//! which timestamps.

use super::Kind;
use crate::script::{ts, Script, KEEP, NOW, OMIT};
use crate::Fd;
use libc::*;

pub(super) fn cases(v: &mut Vec<Script>) {
    // stat of every kind, following and not following.
    for kind in Kind::ALL {
        for (fname, flags) in [("follow", 0), ("nofollow", AT_SYMLINK_NOFOLLOW)] {
            let mut s = Script::new(format!("stat/{fname}/{}", kind.tag()));
            kind.make(&mut s, "t");
            s.stat_at(Fd::Cwd, "t", flags)
                .stat_at(Fd::Cwd, "./t", flags);
            v.push(s);
        }
    }
    let mut s = Script::new("stat/root-and-dots");
    s.mkdir("d", 0o755).mkdir("d/e", 0o700);
    s.stat("/")
        .stat(".")
        .stat("..")
        .stat("d/..")
        .stat("d/e/../..")
        .stat("/..");
    v.push(s);
    let mut s = Script::new("stat/empty-path");
    s.file("f", 0o644, "abc").mkdir("d", 0o711);
    let f = s.open("f", O_RDONLY, 0);
    let d = s.open("d", O_PATH, 0);
    s.stat_at(f, "", AT_EMPTY_PATH)
        .stat_at(d, "", AT_EMPTY_PATH)
        .stat_at(Fd::Cwd, "", AT_EMPTY_PATH)
        .stat_at(f, "", 0)
        .stat_at(Fd::Raw(-1), "", AT_EMPTY_PATH)
        .stat_at(f, "", AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW);
    v.push(s);
    let mut s = Script::new("stat/dirfd-relative");
    s.mkdir("d", 0o755)
        .file("d/f", 0o600, "xy")
        .file("f", 0o644, "");
    let d = s.open("d", O_RDONLY | O_DIRECTORY, 0);
    let f = s.open("f", O_RDONLY, 0);
    s.stat_at(d, "f", 0)
        .stat_at(d, "..", 0)
        .stat_at(f, "x", 0)
        .stat_at(Fd::Raw(-1), "f", 0)
        .stat_at(Fd::Raw(99), "/d/f", 0);
    v.push(s);
    let mut s = Script::new("stat/invalid-flags");
    s.file("f", 0o644, "");
    s.stat_at(Fd::Cwd, "f", 0x4000_0000)
        .stat_at(Fd::Cwd, "f", AT_REMOVEDIR);
    v.push(s);
    let mut s = Script::new("stat/nlink-counts");
    s.mkdir("d", 0o755)
        .mkdir("d/a", 0o755)
        .mkdir("d/b", 0o755)
        .file("d/f", 0o644, "")
        .link("d/f", "g")
        .stat("d")
        .stat(".")
        .stat("d/f")
        .rmdir("d/a")
        .stat("d")
        .unlink("g")
        .stat("d/f");
    v.push(s);
    let mut s = Script::new("stat/symlink-size-is-target-length");
    s.symlink("a/b/c/d", "l")
        .symlink("/", "r")
        .lstat("l")
        .lstat("r")
        .stat("r");
    v.push(s);
    let mut s = Script::new("stat/dir-size-grows-with-entries");
    s.mkdir("d", 0o755)
        .stat("d")
        .file("d/a", 0o644, "")
        .stat("d");
    s.mkdir("d/b", 0o755)
        .symlink("x", "d/c")
        .stat("d")
        .unlink("d/a")
        .stat("d");
    v.push(s);

    // chmod.
    for kind in [Kind::Reg, Kind::Dir] {
        for mode in [
            0o000, 0o644, 0o4755, 0o2755, 0o2745, 0o1777, 0o7777, 0o170644,
        ] {
            let mut s = Script::new(format!("chmod/{}/{mode:o}", kind.tag()));
            kind.make(&mut s, "t");
            s.chmod("t", mode).stat("t");
            v.push(s);
        }
    }
    let mut s = Script::new("chmod/follows-symlink");
    s.file("f", 0o644, "")
        .symlink("f", "l")
        .chmod("l", 0o600)
        .stat("f")
        .lstat("l");
    v.push(s);
    let mut s = Script::new("chmod/nofollow");
    s.file("f", 0o644, "").symlink("f", "l");
    s.chmod_at(Fd::Cwd, "l", 0o600, AT_SYMLINK_NOFOLLOW)
        .chmod_at(Fd::Cwd, "f", 0o600, AT_SYMLINK_NOFOLLOW)
        .stat("f")
        .lstat("l");
    // A symlink's EOPNOTSUPP comes before the owner's EPERM, also through O_PATH.
    s.become_user(1000, 1000);
    let l = s.open("l", O_PATH | O_NOFOLLOW, 0);
    s.chmod_at(Fd::Cwd, "l", 0o600, AT_SYMLINK_NOFOLLOW)
        .chmod_at(l, "", 0o600, AT_EMPTY_PATH)
        .chmod_at(Fd::Cwd, "f", 0o600, AT_SYMLINK_NOFOLLOW);
    v.push(s);
    let mut s = Script::new("chmod/errors");
    s.file("f", 0o644, "");
    s.chmod("missing", 0o644)
        .chmod("", 0o644)
        .chmod("f/x", 0o644)
        .chmod_at(Fd::Cwd, "f", 0o644, 0x4000_0000)
        .chmod_at(Fd::Raw(-1), "f", 0o644, 0);
    v.push(s);
    let mut s = Script::new("chmod/fchmod-and-empty-path");
    s.file("f", 0o644, "");
    let f = s.open("f", O_RDONLY, 0);
    let p = s.open("f", O_PATH, 0);
    s.fchmod(f, 0o640)
        .stat("f")
        .fchmod(p, 0o600)
        .chmod_at(p, "", 0o604, AT_EMPTY_PATH)
        .stat("f")
        .fchmod(Fd::Raw(-1), 0o600);
    v.push(s);

    // chown (as root).
    let mut s = Script::new("chown/root-basic");
    s.file("f", 0o644, "")
        .chown("f", 5, 6)
        .stat("f")
        .chown("f", KEEP, 7)
        .stat("f")
        .chown("f", 8, KEEP)
        .stat("f")
        .chown("f", KEEP, KEEP)
        .stat("f");
    v.push(s);
    let mut s = Script::new("chown/symlink-follow-vs-nofollow");
    s.file("f", 0o644, "").symlink("f", "l");
    s.chown("l", 3, 3).lchown("l", 4, 4).stat("f").lstat("l");
    v.push(s);
    let mut s = Script::new("chown/fchown-and-empty-path");
    s.file("f", 0o644, "");
    let f = s.open("f", O_RDONLY, 0);
    let p = s.open("f", O_PATH, 0);
    s.fchown(f, 9, 9)
        .fstat(f)
        .fchown(p, 1, 1)
        .chown_at(p, "", 2, 2, AT_EMPTY_PATH)
        .stat("f");
    v.push(s);
    let mut s = Script::new("chown/errors");
    s.file("f", 0o644, "");
    s.chown("missing", 1, 1)
        .chown("", 1, 1)
        .chown_at(Fd::Cwd, "f", 1, 1, AT_REMOVEDIR);
    v.push(s);
    for mode in [0o4755, 0o2755, 0o2745, 0o6777, 0o6700] {
        for kind in [Kind::Reg, Kind::Dir] {
            let mut s = Script::new(format!("chown/root-clears-suid/{}/{mode:o}", kind.tag()));
            kind.make(&mut s, "t");
            s.chmod("t", mode).chown("t", 5, 5).stat("t");
            s.chmod("t", mode).chown("t", KEEP, KEEP).stat("t");
            v.push(s);
        }
    }

    // utimensat.
    let mut s = Script::new("utimens/explicit-times");
    s.file("f", 0o644, "");
    s.utimens("f", Some([ts(1000, 5), ts(2000, 999_999_999)]), 0)
        .exact_times("f");
    v.push(s);
    let mut s = Script::new("utimens/omit-one");
    s.file("f", 0o644, "");
    s.utimens("f", Some([ts(1000, 0), ts(2000, 0)]), 0)
        .utimens("f", Some([OMIT, ts(3000, 0)]), 0)
        .exact_times("f")
        .utimens("f", Some([ts(4000, 0), OMIT]), 0)
        .exact_times("f");
    v.push(s);
    for (name, times) in [
        ("null", None),
        ("now-now", Some([NOW, NOW])),
        ("now-omit", Some([NOW, OMIT])),
        ("omit-now", Some([OMIT, NOW])),
        ("omit-omit", Some([OMIT, OMIT])),
        ("explicit", Some([ts(1, 0), ts(2, 0)])),
    ] {
        let mut s = Script::new(format!("utimens/relative/{name}"));
        s.file("f", 0o644, "")
            .snap("f")
            .utimens("f", times, 0)
            .times_since("f");
        v.push(s);
        let mut s = Script::new(format!("utimens/futimens/{name}"));
        s.file("f", 0o644, "");
        let f = s.open("f", O_RDONLY, 0);
        s.snap("f").futimens(f, times).times_since("f");
        v.push(s);
    }
    let mut s = Script::new("utimens/symlink-nofollow");
    s.file("f", 0o644, "").symlink("f", "l");
    // Following the link afterwards would touch its atime (relatime), so look first.
    s.utimens("l", Some([ts(100, 0), ts(200, 0)]), AT_SYMLINK_NOFOLLOW)
        .exact_times("l")
        .utimens("l", Some([ts(300, 0), ts(400, 0)]), 0)
        .exact_times("f");
    v.push(s);
    let mut s = Script::new("utimens/errors");
    s.file("f", 0o644, "");
    let p = s.open("f", O_PATH, 0);
    s.utimens("f", Some([ts(0, 1_000_000_000), OMIT]), 0)
        .utimens("f", Some([ts(0, -1), OMIT]), 0)
        .utimens("missing", None, 0)
        .utimens("f", None, AT_REMOVEDIR)
        .futimens(Fd::Raw(-1), None)
        .futimens(p, None)
        .utimens_at(p, "", Some([ts(7, 0), ts(8, 0)]), AT_EMPTY_PATH)
        // Both omitted: nothing is checked, not the flags, not the path. A bad time is
        // checked after the walk.
        .utimens("missing", Some([OMIT, OMIT]), AT_REMOVEDIR)
        .utimens("missing", Some([ts(0, 1_000_000_000), OMIT]), 0)
        .utimens("f", Some([ts(0, -1), OMIT]), AT_REMOVEDIR)
        .exact_times("f");
    v.push(s);

    // Which operations move which timestamps (relative to a snapshot).
    type Act = fn(&mut Script);
    let acts: &[(&str, &str, Act)] = &[
        ("write", "f", |s| {
            let f = s.open("f", O_WRONLY, 0);
            s.write(f, "x").close(f);
        }),
        ("read", "f", |s| {
            let f = s.open("f", O_RDONLY | O_NOATIME, 0);
            s.read(f, 1).close(f);
        }),
        ("truncate", "f", |s| {
            s.truncate("f", 1);
        }),
        ("truncate-same-size", "f", |s| {
            s.truncate("f", 4);
        }),
        ("chmod", "f", |s| {
            s.chmod("f", 0o600);
        }),
        ("chown", "f", |s| {
            s.chown("f", 1, 1);
        }),
        ("link", "f", |s| {
            s.link("f", "g");
        }),
        ("rename-file", "f", |s| {
            s.rename("f", "h").rename("h", "f");
        }),
        ("create-in-dir", "d", |s| {
            s.file("d/new", 0o644, "");
        }),
        ("unlink-in-dir", "d", |s| {
            s.unlink("d/g");
        }),
        ("mkdir-in-dir", "d", |s| {
            s.mkdir("d/sub", 0o755);
        }),
        ("rename-within-dir", "d", |s| {
            s.rename("d/g", "d/g2");
        }),
        ("stat-is-neutral", "f", |s| {
            s.stat("f").lstat("f").access("f", R_OK);
        }),
        ("open-trunc", "f", |s| {
            let f = s.open("f", O_WRONLY | O_TRUNC, 0);
            s.close(f);
        }),
        ("fallocate", "f", |s| {
            let f = s.open("f", O_WRONLY, 0);
            s.fallocate(f, 0, 0, 8192).close(f);
        }),
    ];
    // (name, path to snapshot, path to compare, action): the paths differ when the action
    // moves the object.
    let more: &[(&str, &str, &str, Act)] = &[
        ("write-empty", "f", "f", |s| {
            let f = s.open("f", O_WRONLY, 0);
            s.write(f, "").close(f);
        }),
        ("open-trunc-empty-file", "z", "z", |s| {
            let f = s.open("z", O_WRONLY | O_TRUNC, 0);
            s.close(f);
        }),
        ("ftruncate-empty-to-zero", "z", "z", |s| {
            let f = s.open("z", O_WRONLY, 0);
            s.ftruncate(f, 0).close(f);
        }),
        ("symlink-in-dir", "d", "d", |s| {
            s.symlink("x", "d/l");
        }),
        ("rmdir-in-dir", "d", "d", |s| {
            s.rmdir("d/sub0");
        }),
        ("rename-out-of-dir", "d", "d", |s| {
            s.rename("d/g", "moved");
        }),
        ("rename-into-dir", "d", "d", |s| {
            s.rename("f", "d/f");
        }),
        ("renamed-file-itself", "d/g", "moved", |s| {
            s.rename("d/g", "moved");
        }),
        ("renamed-dir-itself", "d/sub0", "moved", |s| {
            s.rename("d/sub0", "moved");
        }),
        ("unlinked-file-itself", "f", "f2", |s| {
            s.link("f", "f2").snap("f2").unlink("f");
        }),
        ("utimens-sets-ctime", "f", "f", |s| {
            s.utimens("f", Some([ts(1, 0), ts(1, 0)]), 0);
        }),
        ("chmod-same-mode", "f", "f", |s| {
            s.chmod("f", 0o644);
        }),
        ("failed-unlink", "d", "d", |s| {
            s.unlink("d/missing");
        }),
    ];
    let all = acts
        .iter()
        .map(|&(n, p, a)| (n, p, p, a))
        .chain(more.iter().copied());
    for (name, path, check, act) in all {
        let mut s = Script::new(format!("times/{name}"));
        s.file("f", 0o644, "data")
            .file("z", 0o644, "")
            .mkdir("d", 0o755)
            .mkdir("d/sub0", 0o755)
            .file("d/g", 0o644, "");
        s.snap(path);
        act(&mut s);
        s.times_since(check);
        v.push(s);
    }

    // A FIFO's reads and writes move its times (pipe_read's file_accessed, pipe_write's
    // file_update_time); empty and failed ones, opens and closes do not.
    let fifo: &[(&str, Act)] = &[
        ("open-close", |s| {
            let r = s.open("p", O_RDONLY | O_NONBLOCK, 0);
            let w = s.open("p", O_WRONLY, 0);
            s.close(w).close(r);
        }),
        ("write", |s| {
            let r = s.open("p", O_RDONLY | O_NONBLOCK, 0);
            let w = s.open("p", O_WRONLY, 0);
            s.write(w, "xy").close(w).close(r);
        }),
        ("write-empty", |s| {
            let r = s.open("p", O_RDONLY | O_NONBLOCK, 0);
            let w = s.open("p", O_WRONLY, 0);
            s.write(w, "").close(w).close(r);
        }),
        ("read", |s| {
            let r = s.open("p", O_RDONLY | O_NONBLOCK, 0);
            let w = s.open("p", O_WRONLY, 0);
            s.write(w, "xy").snap("p").read(r, 1).close(w).close(r);
        }),
        ("read-noatime", |s| {
            let r = s.open("p", O_RDONLY | O_NONBLOCK | O_NOATIME, 0);
            let w = s.open("p", O_WRONLY, 0);
            s.write(w, "xy").snap("p").read(r, 1).close(w).close(r);
        }),
        ("read-empty", |s| {
            let r = s.open("p", O_RDONLY | O_NONBLOCK, 0);
            let w = s.open("p", O_WRONLY, 0);
            s.read(r, 1).close(w).read(r, 1).close(r);
        }),
        ("read-write-end-rdwr", |s| {
            let rw = s.open("p", O_RDWR, 0);
            s.write(rw, "xy")
                .times_since("p")
                .snap("p")
                .read(rw, 2)
                .close(rw);
        }),
    ];
    for (name, act) in fifo {
        let mut s = Script::new(format!("times/fifo-{name}"));
        s.mkfifo("p", 0o644).snap("p");
        act(&mut s);
        s.times_since("p");
        v.push(s);
    }

    // faccessat as root on every kind, following and not.
    for kind in Kind::ALL {
        for (fname, flags) in [("follow", 0), ("nofollow", AT_SYMLINK_NOFOLLOW)] {
            let mut s = Script::new(format!("access/{fname}/{}", kind.tag()));
            kind.make(&mut s, "t");
            for m in [F_OK, R_OK, W_OK, X_OK] {
                s.access_at(Fd::Cwd, "t", m, flags);
            }
            s.chmod("/", 0o644);
            s.access_at(Fd::Cwd, "t", X_OK, flags);
            v.push(s);
        }
    }
    // faccessat as root.
    let mut s = Script::new("access/root");
    s.file("f0", 0o000, "")
        .file("fx", 0o100, "")
        .file("fr", 0o644, "");
    s.mkdir("d0", 0o000);
    for p in ["f0", "fx", "fr", "d0"] {
        for m in [F_OK, R_OK, W_OK, X_OK, R_OK | W_OK | X_OK] {
            s.access(p, m);
        }
    }
    v.push(s);
    let mut s = Script::new("access/errors-and-flags");
    s.file("f", 0o644, "").symlink("nowhere", "dangling");
    s.access("missing", F_OK)
        .access("", F_OK)
        .access("f", 8)
        .access("f/", F_OK)
        .access_at(Fd::Cwd, "dangling", F_OK, 0)
        .access_at(Fd::Cwd, "dangling", F_OK, AT_SYMLINK_NOFOLLOW)
        .access_at(Fd::Cwd, "f", R_OK, AT_EACCESS)
        .access_at(Fd::Cwd, "f", R_OK, AT_REMOVEDIR)
        .access_at(Fd::Cwd, "", R_OK, AT_EMPTY_PATH);
    v.push(s);
}
