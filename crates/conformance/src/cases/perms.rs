//! Permission checks as unprivileged users: rwx bits for owner, group (primary and
//! supplementary) and others, directory search/write, sticky directories, setgid
//! directories, clearing of suid/sgid, EPERM versus EACCES, and the root override.
//!
//! Every script sets up as root and then drops to one identity. Sticky-directory cases
//! avoid symlinks and O_CREAT on others' files so the host's fs.protected_* sysctls do not
//! matter.

use crate::script::{ts, Script, G1, G2, G3, KEEP, NOW, OMIT, U1, U2};
use libc::*;

/// The identities, relative to objects owned by `U1:G3`.
const WHO: &[(&str, u32, u32, &[u32])] = &[
    ("owner", U1, G1, &[]),
    ("group", U2, G3, &[]),
    ("supp-group", U2, G2, &[G3]),
    ("other", U2, G2, &[]),
];

fn become_(s: &mut Script, who: (&str, u32, u32, &[u32])) {
    s.become_with_groups(who.1, who.2, who.3);
}

pub(super) fn cases(v: &mut Vec<Script>) {
    file_bits(v);
    dir_bits(v);
    sticky(v);
    setgid_dirs(v);
    suid_clearing(v);
    eperm_eacces(v);
}

fn file_bits(v: &mut Vec<Script>) {
    let modes = [
        0o000, 0o400, 0o200, 0o100, 0o040, 0o020, 0o010, 0o004, 0o002, 0o001, 0o070, 0o707, 0o777,
        0o640,
    ];
    for mode in modes {
        for &who in WHO {
            let mut s = Script::new(format!("perm-file/{mode:03o}/{}", who.0));
            s.file("f", 0o644, "secret")
                .chown("f", U1, G3)
                .chmod("f", mode);
            become_(&mut s, who);
            let r = s.open("f", O_RDONLY, 0);
            s.read(r, 10);
            let w = s.open("f", O_WRONLY, 0);
            s.write(w, "W");
            s.open("f", O_RDWR, 0);
            s.open("f", O_PATH, 0);
            for m in [R_OK, W_OK, X_OK, R_OK | W_OK] {
                s.access("f", m);
            }
            s.truncate("f", 1).stat("f");
            v.push(s);
        }
    }
}

fn dir_bits(v: &mut Vec<Script>) {
    let modes = [
        0o700, 0o600, 0o500, 0o300, 0o100, 0o070, 0o050, 0o030, 0o007, 0o001, 0o000,
    ];
    for mode in modes {
        for &who in WHO {
            let mut s = Script::new(format!("perm-dir/{mode:03o}/{}", who.0));
            s.mkdir("d", 0o755)
                .file_mode("d/f", 0o666, "x")
                .mkdir_mode("d/sub", 0o777)
                .chown("d", U1, G3)
                .chmod("d", mode);
            become_(&mut s, who);
            s.stat("d/f")
                .access("d", X_OK)
                .access("d", R_OK)
                .access("d", W_OK);
            let f = s.open("d/f", O_RDONLY, 0);
            s.close(f);
            let l = s.open("d", O_RDONLY | O_DIRECTORY, 0);
            s.getdents(l).close(l);
            let p = s.open("d", O_PATH, 0);
            s.fchdir(p).getcwd().chdir("/");
            let c = s.open("d/new", O_CREAT | O_WRONLY, 0o644);
            s.close(c);
            s.mkdir("d/m", 0o755)
                .rename("d/f", "d/g")
                .link("d/sub", "d/sub2")
                .symlink("t", "d/l")
                .unlink("d/f")
                .rmdir("d/sub")
                .chdir("d")
                .getcwd();
            v.push(s);
        }
    }
    let mut s = Script::new("perm-dir/search-needed-on-every-component");
    s.mkdir("a", 0o755)
        .mkdir("a/b", 0o755)
        .file("a/b/f", 0o644, "")
        .chmod("a", 0o754);
    s.become_user(U2, G2);
    s.stat("a/b/f").stat("a").open("a/b/f", O_RDONLY, 0);
    s.chdir("a/b");
    v.push(s);
    let mut s = Script::new("perm-dir/dotdot-needs-search");
    s.mkdir("a", 0o711)
        .mkdir("a/b", 0o700)
        .chown("a/b", U1, G1)
        .mkdir("a/b/c", 0o755);
    s.chown("a/b/c", U1, G1);
    s.become_user(U1, G1);
    s.chdir("a/b/c")
        .getcwd()
        .stat("..")
        .stat("../..")
        .chdir("..")
        .getcwd();
    v.push(s);
    let mut s = Script::new("perm-dir/root-override");
    s.mkdir("d", 0o000)
        .file("d/f", 0o000, "root reads")
        .file("x", 0o000, "");
    s.contents("d/f")
        .access("d/f", R_OK | W_OK)
        .access("d/f", X_OK)
        .access("d", X_OK)
        .chmod("x", 0o010)
        .access("x", X_OK)
        .chdir("d")
        .getcwd();
    v.push(s);
}

fn sticky(v: &mut Vec<Script>) {
    let setup = |name: &str, dir_owner: u32| {
        let mut s = Script::new(format!("sticky/{name}"));
        s.mkdir_mode("t", 0o777)
            .chmod("t", 0o1777)
            .chown("t", dir_owner, dir_owner)
            .file_mode("t/mine", 0o666, "m")
            .chown("t/mine", U1, G1)
            .file_mode("t/theirs", 0o666, "t")
            .chown("t/theirs", U2, G2)
            .mkdir_mode("t/theirdir", 0o777)
            .chown("t/theirdir", U2, G2);
        s
    };
    let mut s = setup("unlink-others-file", 0);
    s.become_user(U1, G1)
        .unlink("t/theirs")
        .rmdir("t/theirdir")
        .unlink("t/mine")
        .ls("t");
    v.push(s);
    let mut s = setup("rename-others-file", 0);
    s.become_user(U1, G1)
        .rename("t/theirs", "t/stolen")
        .rename("t/mine", "t/theirs")
        .rename2("t/mine", "t/theirs", RENAME_EXCHANGE)
        .rename("t/mine", "t/mine2")
        .rename("t/theirdir", "t/x")
        .ls("t");
    v.push(s);
    let mut s = setup("dir-owner-may-delete", U1);
    s.become_user(U1, G1)
        .unlink("t/theirs")
        .rmdir("t/theirdir")
        .ls("t");
    v.push(s);
    let mut s = setup("root-may-delete", 0);
    s.unlink("t/theirs").unlink("t/mine").ls("t");
    v.push(s);
    let mut s = setup("write-others-file-allowed", 0);
    s.become_user(U1, G1);
    let f = s.open("t/theirs", O_WRONLY, 0);
    s.write(f, "ok").close(f).contents("t/theirs");
    v.push(s);
    let mut s = setup("non-sticky-allows-unlink", 0);
    s.chmod("t", 0o777);
    s.become_user(U1, G1)
        .unlink("t/theirs")
        .rename("t/theirdir", "t/moved")
        .ls("t");
    v.push(s);
    let mut s = setup("create-and-remove-own", 0);
    s.become_user(U1, G1)
        .file("t/new", 0o600, "")
        .mkdir("t/newdir", 0o700)
        .stat("t/new")
        .unlink("t/new")
        .rmdir("t/newdir")
        .ls("t");
    v.push(s);
}

fn setgid_dirs(v: &mut Vec<Script>) {
    let setup = |name: &str| {
        let mut s = Script::new(format!("setgid-dir/{name}"));
        s.mkdir_mode("g", 0o777)
            .chown("g", 0, G3)
            .chmod("g", 0o2777);
        s
    };
    let mut s = setup("file-inherits-group");
    s.become_user(U1, G1).file("g/f", 0o644, "").stat("g/f");
    v.push(s);
    let mut s = setup("subdir-inherits-group-and-bit");
    s.become_user(U1, G1)
        .mkdir("g/d", 0o755)
        .stat("g/d")
        .mkdir("g/d/e", 0o700)
        .stat("g/d/e");
    v.push(s);
    let mut s = setup("sgid-file-by-non-member-cleared");
    s.become_user(U1, G1);
    let f = s.open("g/f", O_CREAT | O_WRONLY, 0o2755);
    s.fstat(f);
    v.push(s);
    let mut s = setup("sgid-file-by-member-kept");
    s.become_with_groups(U1, G1, &[G3]);
    let f = s.open("g/f", O_CREAT | O_WRONLY, 0o2755);
    s.fstat(f);
    v.push(s);
    let mut s = setup("root-creates");
    s.file("g/f", 0o2755, "")
        .stat("g/f")
        .mkdir("g/d", 0o755)
        .stat("g/d");
    v.push(s);
    let mut s = setup("plain-dir-uses-fsgid");
    s.chmod("g", 0o777)
        .become_user(U1, G1)
        .file("g/f", 0o644, "")
        .mkdir("g/d", 0o755);
    s.stat("g/f").stat("g/d");
    v.push(s);
    let mut s = setup("link-and-rename-keep-group");
    s.file("f", 0o644, "").chown("f", U1, G1).chmod("/", 0o777);
    s.become_user(U1, G1).rename("f", "g/f").stat("g/f");
    v.push(s);
}

fn suid_clearing(v: &mut Vec<Script>) {
    type Act = fn(&mut Script);
    let acts: &[(&str, Act)] = &[
        ("write", |s| {
            let f = s.open("f", O_WRONLY, 0);
            s.write(f, "x").close(f);
        }),
        ("write-empty", |s| {
            let f = s.open("f", O_WRONLY, 0);
            s.write(f, "").close(f);
        }),
        ("pwrite", |s| {
            let f = s.open("f", O_RDWR, 0);
            s.pwrite(f, "x", 100).close(f);
        }),
        ("truncate", |s| {
            s.truncate("f", 1);
        }),
        ("ftruncate", |s| {
            let f = s.open("f", O_WRONLY, 0);
            s.ftruncate(f, 0).close(f);
        }),
        ("open-trunc", |s| {
            let f = s.open("f", O_WRONLY | O_TRUNC, 0);
            s.close(f);
        }),
        ("fallocate", |s| {
            let f = s.open("f", O_WRONLY, 0);
            s.fallocate(f, 0, 0, 100).close(f);
        }),
        ("fallocate-keep-size", |s| {
            let f = s.open("f", O_WRONLY, 0);
            s.fallocate(f, FALLOC_FL_KEEP_SIZE, 0, 8192).close(f);
        }),
        ("fallocate-punch", |s| {
            let f = s.open("f", O_WRONLY, 0);
            s.fallocate(f, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, 1)
                .close(f);
        }),
        ("fallocate-fails", |s| {
            let f = s.open("f", O_WRONLY, 0);
            s.fallocate(f, FALLOC_FL_PUNCH_HOLE, 0, 1).close(f);
        }),
        ("chown-keep", |s| {
            s.chown("f", KEEP, KEEP);
        }),
        ("chown-own-group", |s| {
            s.chown("f", U1, G1);
        }),
        ("chmod-keeps", |s| {
            s.stat("f");
        }),
    ];
    for mode in [0o4755, 0o2755, 0o6755, 0o2745, 0o6777] {
        for (name, act) in acts {
            let mut s = Script::new(format!("suid/user-{name}/{mode:o}"));
            s.file("f", 0o644, "data")
                .chown("f", U1, G1)
                .chmod("f", mode);
            s.become_user(U1, G1);
            act(&mut s);
            s.stat("f");
            v.push(s);
        }
        let mut s = Script::new(format!("suid/root-write-keeps/{mode:o}"));
        s.file("f", 0o644, "data")
            .chown("f", U1, G1)
            .chmod("f", mode);
        let f = s.open("f", O_WRONLY, 0);
        s.write(f, "x")
            .fallocate(f, 0, 0, 100)
            .close(f)
            .stat("f")
            .truncate("f", 0)
            .stat("f");
        v.push(s);
    }
}

fn eperm_eacces(v: &mut Vec<Script>) {
    let setup = |name: &str| {
        let mut s = Script::new(format!("eperm/{name}"));
        s.file_mode("theirs", 0o666, "t")
            .chown("theirs", U2, G2)
            .file("ro", 0o444, "r")
            .chown("ro", U2, G2)
            .file("mine", 0o644, "m")
            .chown("mine", U1, G1)
            .chmod("/", 0o777);
        s
    };
    let mut s = setup("chmod-others-file");
    s.become_user(U1, G1)
        .chmod("theirs", 0o600)
        .chmod("mine", 0o600)
        .stat("mine");
    v.push(s);
    let mut s = setup("chown-to-other-user");
    s.become_user(U1, G1)
        .chown("mine", U2, KEEP)
        .chown("theirs", U1, KEEP)
        .stat("mine");
    v.push(s);
    let mut s = setup("chown-group-membership");
    s.become_with_groups(U1, G1, &[G3])
        .chown("mine", KEEP, G2)
        .chown("mine", KEEP, G3)
        .stat("mine")
        .chown("mine", U1, G1)
        .stat("mine")
        .chown("theirs", KEEP, G3);
    v.push(s);
    let mut s = setup("chmod-sgid-non-member-dropped");
    s.chown("mine", U1, G3);
    s.become_user(U1, G1)
        .chmod("mine", 0o2755)
        .stat("mine")
        .chmod("mine", 0o4755);
    s.stat("mine");
    v.push(s);
    let mut s = setup("utimens-others-file");
    s.become_user(U1, G1)
        .utimens("theirs", Some([ts(5, 0), ts(5, 0)]), 0)
        .utimens("theirs", None, 0)
        .utimens("theirs", Some([NOW, NOW]), 0)
        .utimens("theirs", Some([NOW, OMIT]), 0)
        .utimens("theirs", Some([OMIT, OMIT]), 0)
        .utimens("ro", None, 0)
        .utimens("ro", Some([NOW, NOW]), 0)
        .utimens("mine", Some([ts(5, 0), ts(6, 0)]), 0)
        .exact_times("mine");
    v.push(s);
    let mut s = setup("noatime-others-file");
    s.become_user(U1, G1);
    s.open("theirs", O_RDONLY | O_NOATIME, 0);
    s.open("mine", O_RDONLY | O_NOATIME, 0);
    v.push(s);
    let mut s = setup("ftruncate-after-chmod");
    s.become_user(U1, G1);
    let f = s.open("mine", O_RDWR, 0);
    s.fchmod(f, 0o000)
        .ftruncate(f, 0)
        .write(f, "still")
        .truncate("mine", 0)
        .fstat(f);
    v.push(s);
    let mut s = setup("write-dir-needed");
    s.mkdir("ro_dir", 0o755)
        .file_mode("ro_dir/f", 0o666, "")
        .mkdir_mode("ro_dir/sub", 0o777);
    s.become_user(U1, G1);
    s.file("ro_dir/new", 0o644, "");
    let f = s.open("ro_dir/f", O_CREAT | O_WRONLY, 0o644);
    s.close(f);
    s.open("ro_dir/f", O_CREAT | O_EXCL | O_WRONLY, 0o644);
    s.unlink("ro_dir/f")
        .rename("ro_dir/f", "moved")
        .link("ro_dir/f", "lnk");
    s.mkdir("ro_dir/sub/x", 0o755).stat("ro_dir/sub/x");
    v.push(s);
    let mut s = setup("move-dir-needs-write-on-it");
    s.mkdir_mode("a", 0o777)
        .mkdir_mode("b", 0o777)
        .mkdir("a/d", 0o755)
        .mkdir_mode("a/e", 0o777);
    s.become_user(U1, G1)
        .rename("a/d", "b/d")
        .rename("a/d", "a/d2")
        .rename("a/e", "b/e");
    s.ls("a").ls("b");
    v.push(s);
    let mut s = setup("access-uses-real-ids");
    s.become_with_groups(U1, G1, &[G2])
        .access("theirs", R_OK | W_OK)
        .access("ro", W_OK)
        .access("ro", R_OK)
        .access_at(crate::Fd::Cwd, "ro", R_OK, AT_EACCESS);
    v.push(s);
    let mut s = setup("readlink-and-lstat-need-no-perms");
    s.mkdir("d", 0o711).symlink("secret", "d/l");
    s.become_user(U1, G1).readlink("d/l").lstat("d/l").ls("d");
    v.push(s);
}
