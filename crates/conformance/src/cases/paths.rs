//! Path resolution: `.` and `..`, symlink chains and loops (ELOOP after 40), trailing
//! slashes, empty paths, ENAMETOOLONG limits, ENOTDIR, absolute paths and dirfds.

use super::Kind;
use crate::script::Script;
use crate::Fd;
use libc::*;

/// An operation applied to a path (for the trailing-slash and empty-path families).
type PathOp = fn(&mut Script, &str);

fn path_ops() -> Vec<(&'static str, PathOp)> {
    vec![
        ("stat", |s, p| {
            s.stat(p);
        }),
        ("lstat", |s, p| {
            s.lstat(p);
        }),
        ("open-rdonly", |s, p| {
            let f = s.open(p, O_RDONLY, 0);
            s.close(f);
        }),
        ("open-creat", |s, p| {
            let f = s.open(p, O_CREAT | O_WRONLY, 0o644);
            s.close(f);
        }),
        ("open-path", |s, p| {
            let f = s.open(p, O_PATH, 0);
            s.close(f);
        }),
        ("mkdir", |s, p| {
            s.mkdir(p, 0o755);
        }),
        ("unlink", |s, p| {
            s.unlink(p);
        }),
        ("rmdir", |s, p| {
            s.rmdir(p);
        }),
        ("rename-from", |s, p| {
            s.rename(p, "renamed");
        }),
        ("rename-to", |s, p| {
            s.mkdir("src_dir", 0o755).rename("src_dir", p);
        }),
        ("link-to", |s, p| {
            s.file("src_file", 0o644, "").link("src_file", p);
        }),
        ("symlink-at", |s, p| {
            s.symlink("somewhere", p);
        }),
        ("readlink", |s, p| {
            s.readlink(p);
        }),
        ("chmod", |s, p| {
            s.chmod(p, 0o700);
        }),
        ("chown", |s, p| {
            s.chown(p, 3, 3);
        }),
        ("access", |s, p| {
            s.access(p, F_OK);
        }),
        ("truncate", |s, p| {
            s.truncate(p, 0);
        }),
        ("utimens", |s, p| {
            s.utimens(p, None, 0);
        }),
        ("chdir", |s, p| {
            s.chdir(p).getcwd();
        }),
    ]
}

pub(super) fn cases(v: &mut Vec<Script>) {
    // Trailing slashes: every operation on every kind of object, named "t/".
    for (oname, op) in path_ops() {
        for kind in Kind::BASIC {
            let mut s = Script::new(format!("slash/{oname}/{}", kind.tag()));
            kind.make(&mut s, "t");
            op(&mut s, "t/");
            s.ls(".");
            v.push(s);
        }
    }
    // Empty paths: ENOENT everywhere (without AT_EMPTY_PATH).
    for (oname, op) in path_ops() {
        let mut s = Script::new(format!("empty/{oname}"));
        s.file("f", 0o644, "");
        op(&mut s, "");
        v.push(s);
    }

    // `.` and `..`.
    let mut s = Script::new("dots/resolution");
    s.mkdir("a", 0o755)
        .mkdir("a/b", 0o755)
        .file("a/b/f", 0o644, "F");
    for p in [
        "a/./b/f",
        "a/b/../b/f",
        "./a//b///f",
        "/../a/b/f",
        "../../a/b/f",
        "a/b/f/.",
        "a/b/f/..",
        "a/./.",
        "a/b/../../a/b/f",
        "//a/b/f",
    ] {
        s.stat(p);
    }
    v.push(s);
    let mut s = Script::new("dots/create-through-dotdot");
    s.mkdir("a", 0o755).mkdir("a/b", 0o755);
    s.file("a/b/../new", 0o644, "")
        .mkdir("a/./b/./c", 0o755)
        .ls("a")
        .ls("a/b");
    v.push(s);
    let mut s = Script::new("dots/dotdot-through-symlink");
    s.mkdir("a", 0o755)
        .mkdir("a/b", 0o755)
        .symlink("a/b", "lb")
        .file("a/marker", 0o644, "");
    s.stat("lb/../marker")
        .stat("lb/..")
        .chdir("lb")
        .getcwd()
        .chdir("..")
        .getcwd();
    v.push(s);

    // Symlink chains: 40 links are followed, 41 give ELOOP.
    for n in [1usize, 8, 39, 40, 41, 45] {
        let mut s = Script::new(format!("symlink-chain/{n}"));
        s.file("target", 0o644, "end");
        s.symlink("target", "l0");
        for i in 1..n {
            s.symlink(format!("l{}", i - 1), format!("l{i}"));
        }
        let last = format!("l{}", n - 1);
        s.stat(&last)
            .lstat(&last)
            .contents(&last)
            .access(&last, R_OK);
        v.push(s);
    }
    let mut s = Script::new("symlink-chain/dir-components");
    s.mkdir("d", 0o755).file("d/f", 0o644, "");
    s.symlink("d", "m0");
    for i in 1..41 {
        s.symlink(format!("m{}", i - 1), format!("m{i}"));
    }
    s.stat("m39/f").stat("m40/f").stat("m39").stat("m40");
    v.push(s);
    let mut s = Script::new("symlink-chain/total-across-components");
    s.mkdir("d", 0o755);
    // Each component is a 10-link chain to "d": ok once, but counts accumulate per walk.
    s.symlink("d", "a0");
    for i in 1..10 {
        s.symlink(format!("a{}", i - 1), format!("a{i}"));
    }
    s.symlink("../a9", "d/up");
    s.stat("a9/up/up/up")
        .stat("a9/up/up/up/up")
        .stat("a9/up/up/up/up/up");
    v.push(s);
    let mut s = Script::new("symlink-loop/self");
    s.symlink("l", "l");
    s.stat("l").lstat("l").stat("l/x").open("l", O_RDONLY, 0);
    s.open("l", O_CREAT | O_WRONLY, 0o644);
    s.open("l", O_RDONLY | O_NOFOLLOW, 0);
    s.open("l", O_PATH | O_NOFOLLOW, 0);
    s.readlink("l").unlink("l").lstat("l");
    v.push(s);
    let mut s = Script::new("symlink-loop/pair");
    s.symlink("b", "a")
        .symlink("a", "b")
        .stat("a")
        .chdir("a")
        .access("b", F_OK)
        .mkdir("a/x", 0o755);
    v.push(s);
    let mut s = Script::new("symlink/nofollow-final-only");
    s.mkdir("d", 0o755)
        .file("d/f", 0o644, "")
        .symlink("d", "ld")
        .symlink("f", "d/lf");
    s.open("ld/f", O_RDONLY | O_NOFOLLOW, 0);
    s.open("ld/lf", O_RDONLY | O_NOFOLLOW, 0);
    s.open("ld", O_RDONLY | O_NOFOLLOW | O_DIRECTORY, 0);
    s.stat_at(Fd::Cwd, "ld/lf", AT_SYMLINK_NOFOLLOW);
    v.push(s);
    let mut s = Script::new("symlink/absolute-targets-in-root");
    s.mkdir("d", 0o755)
        .file("d/f", 0o644, "abs")
        .symlink("/d/f", "abs")
        .symlink("/..", "up");
    s.contents("abs")
        .stat("up")
        .stat("up/d/f")
        .symlink("/d", "d/self");
    s.stat("d/self/self/f");
    v.push(s);
    let mut s = Script::new("symlink/relative-targets-from-subdir");
    s.mkdir("a", 0o755)
        .mkdir("a/b", 0o755)
        .file("x", 0o644, "top");
    s.symlink("../../x", "a/b/l")
        .contents("a/b/l")
        .symlink(".", "a/dot")
        .stat("a/dot/dot/b");
    v.push(s);
    let mut s = Script::new("symlink/create-through-dangling");
    s.mkdir("d", 0o755)
        .symlink("d/new", "l")
        .symlink("missingdir/new", "m");
    let f = s.open("l", O_CREAT | O_WRONLY, 0o600);
    s.close(f);
    s.open("m", O_CREAT | O_WRONLY, 0o600);
    s.open("l", O_CREAT | O_EXCL | O_WRONLY, 0o600);
    s.ls("d");
    v.push(s);

    // Name length limits.
    let n255 = "n".repeat(255);
    let n256 = "n".repeat(256);
    let mut s = Script::new("names/component-255-ok");
    s.file(&n255, 0o644, "")
        .stat(&n255)
        .mkdir(format!("{n255}x"), 0o755);
    s.mkdir(format!("d{}", &n255[1..]), 0o755).ls(".");
    v.push(s);
    let mut s = Script::new("names/component-256");
    s.open(&n256, O_CREAT | O_WRONLY, 0o644);
    s.stat(&n256)
        .mkdir(&n256, 0o755)
        .symlink("x", &n256)
        .unlink(&n256);
    s.rename("x", &n256).access(&n256, F_OK).chdir(&n256);
    s.mkdir("d", 0o755)
        .stat(format!("d/{n256}"))
        .stat(format!("missing/{n256}"));
    s.stat(format!("{n256}/missing"));
    v.push(s);
    let mut s = Script::new("names/symlink-target-component-256");
    s.symlink(&n256, "l").readlink("l").stat("l");
    v.push(s);
    // Paths: 4095 bytes resolve, 4096 are ENAMETOOLONG (PATH_MAX counts the NUL).
    let deep = |len: usize| {
        let mut p = "./".repeat((len - 1) / 2);
        while p.len() < len - 1 {
            p.push('/');
        }
        p.push('f');
        assert_eq!(p.len(), len);
        p
    };
    for len in [4094usize, 4095, 4096, 5000] {
        let mut s = Script::new(format!("names/path-length-{len}"));
        s.file("f", 0o644, "");
        s.stat(deep(len)).open(deep(len), O_RDONLY, 0);
        s.mkdir(format!("{}x", &deep(len)[..len - 1]), 0o755);
        s.access(deep(len), F_OK).unlink(deep(len)).stat("f");
        v.push(s);
    }
    let mut s = Script::new("names/slashes-only");
    s.stat("/")
        .stat("//")
        .stat("///")
        .stat(".//.//")
        .open("//", O_RDONLY, 0);
    v.push(s);

    // ENOTDIR.
    let mut s = Script::new("notdir/through-file");
    s.file("f", 0o644, "")
        .file("g", 0o644, "")
        .symlink("f", "lf");
    s.stat("f/x")
        .stat("f/.")
        .stat("f/..")
        .stat("lf/")
        .stat("lf/x")
        .open("f/", O_RDONLY, 0);
    s.open("f", O_DIRECTORY, 0);
    s.mkdir("f/d", 0o755)
        .chdir("f")
        .rename("g", "f/g")
        .rename("g/", "h");
    v.push(s);
    let mut s = Script::new("notdir/dirfd-is-file");
    s.file("f", 0o644, "");
    let f = s.open("f", O_RDONLY, 0);
    s.open_at(f, "x", O_RDONLY, 0);
    s.open_at(f, "/f", O_RDONLY, 0);
    s.mkdir_at(f, "x", 0o755)
        .stat_at(f, "x", 0)
        .unlink_at(f, "x", 0)
        .symlink_at("t", f, "x");
    v.push(s);
    let mut s = Script::new("badf/dirfds");
    s.file("f", 0o644, "");
    s.open_at(Fd::Raw(-1), "f", O_RDONLY, 0);
    s.open_at(Fd::Raw(77), "f", O_RDONLY, 0);
    s.open_at(Fd::Raw(-1), "/f", O_RDONLY, 0);
    s.stat_at(Fd::Raw(-100), "f", 0);
    v.push(s);
    let mut s = Script::new("isdir/writes-on-dirs");
    s.mkdir("d", 0o755);
    s.open("d", O_WRONLY, 0);
    s.open("d", O_RDWR, 0);
    s.open("d", O_CREAT | O_RDONLY, 0o644);
    s.open("d", O_TRUNC | O_RDONLY, 0);
    s.open("d/", O_CREAT | O_WRONLY, 0o644);
    s.truncate("d", 0);
    v.push(s);
}
