//! mkdirat, unlinkat, renameat2 (matrix of source x destination x flags, plus the
//! directory-tree special cases), linkat, symlinkat, readlinkat, getdents64.

use super::{observe, Kind};
use crate::script::Script;
use crate::Fd;
use libc::*;

pub(super) fn cases(v: &mut Vec<Script>) {
    mkdir_unlink(v);
    rename(v);
    link_symlink(v);
    getdents(v);
}

fn mkdir_unlink(v: &mut Vec<Script>) {
    for kind in Kind::ALL {
        let mut s = Script::new(format!("mkdir/over-{}", kind.tag()));
        kind.make(&mut s, "t");
        s.mkdir("t", 0o755);
        observe(&mut s, &["t"]);
        v.push(s);
        let mut s = Script::new(format!("unlink/{}", kind.tag()));
        kind.make(&mut s, "t");
        s.unlink("t");
        observe(&mut s, &["t"]);
        v.push(s);
        let mut s = Script::new(format!("rmdir/{}", kind.tag()));
        kind.make(&mut s, "t");
        s.rmdir("t");
        observe(&mut s, &["t"]);
        v.push(s);
    }
    let mut s = Script::new("mkdir/errors");
    s.file("f", 0o644, "");
    s.mkdir("", 0o755)
        .mkdir(".", 0o755)
        .mkdir("..", 0o755)
        .mkdir("/", 0o755)
        .mkdir("nodir/x", 0o755)
        .mkdir("f/x", 0o755)
        .mkdir_at(Fd::Raw(-1), "x", 0o755);
    v.push(s);
    let mut s = Script::new("mkdir/nested-and-nlink");
    s.mkdir("a", 0o755)
        .mkdir("a/b", 0o755)
        .mkdir("a/b/c", 0o755)
        .stat("a")
        .stat("a/b")
        .stat("a/b/c")
        .stat(".");
    v.push(s);
    let mut s = Script::new("mkdir/dirfd-relative");
    s.mkdir("a", 0o755);
    let a = s.open("a", O_RDONLY | O_DIRECTORY, 0);
    s.mkdir_at(a, "b", 0o700).stat("a/b");
    v.push(s);
    let mut s = Script::new("rmdir/dots");
    s.mkdir("d", 0o755).mkdir("d/e", 0o755);
    s.rmdir(".")
        .rmdir("..")
        .rmdir("d/.")
        .rmdir("d/..")
        .rmdir("d/e/..")
        .rmdir("/")
        .rmdir("d/e/")
        .ls("d");
    v.push(s);
    let mut s = Script::new("rmdir/cwd");
    s.mkdir("d", 0o755)
        .chdir("d")
        .rmdir("../d")
        .getcwd()
        .stat(".");
    s.open(".", O_RDONLY | O_DIRECTORY, 0);
    s.file("x", 0o644, "").mkdir("y", 0o755);
    v.push(s);
    let mut s = Script::new("rmdir/open-dir-then-list");
    s.mkdir("d", 0o755);
    let d = s.open("d", O_RDONLY | O_DIRECTORY, 0);
    s.rmdir("d").getdents(d).fstat(d).mkdir_at(d, "x", 0o755);
    v.push(s);
    let mut s = Script::new("unlink/errors");
    s.mkdir("d", 0o755).file("f", 0o644, "");
    s.unlink("")
        .unlink(".")
        .unlink("..")
        .unlink("d/")
        .unlink("f/")
        .unlink("nodir/f")
        .unlink_at(Fd::Cwd, "f", 0x4000_0000)
        .unlink_at(Fd::Raw(-1), "f", 0)
        .ls(".");
    v.push(s);
    let mut s = Script::new("unlink/one-of-two-links");
    s.file("f", 0o644, "shared")
        .link("f", "g")
        .unlink("f")
        .stat("g")
        .contents("g");
    v.push(s);
    let mut s = Script::new("unlink/dirfd-relative");
    s.mkdir("d", 0o755)
        .file("d/f", 0o644, "")
        .mkdir("d/e", 0o755);
    let d = s.open("d", O_PATH | O_DIRECTORY, 0);
    s.unlink_at(d, "f", 0)
        .unlink_at(d, "e", AT_REMOVEDIR)
        .ls("d");
    v.push(s);
}

const RENAME_FLAGS: &[(&str, u32)] = &[
    ("plain", 0),
    ("noreplace", RENAME_NOREPLACE),
    ("exchange", RENAME_EXCHANGE),
];

fn rename(v: &mut Vec<Script>) {
    // The matrix: every source kind onto every destination kind with every flag.
    let srcs = [Kind::Missing, Kind::Reg, Kind::Dir, Kind::LnkReg];
    let dsts = [
        Kind::Missing,
        Kind::Reg,
        Kind::Dir,
        Kind::FullDir,
        Kind::LnkDir,
    ];
    for src in srcs {
        for dst in dsts {
            for &(fname, flags) in RENAME_FLAGS {
                let mut s = Script::new(format!("rename/{fname}/{}-over-{}", src.tag(), dst.tag()));
                src.make(&mut s, "s");
                dst.make(&mut s, "t");
                s.rename2("s", "t", flags);
                observe(&mut s, &["s", "t"]);
                v.push(s);
            }
        }
    }
    let mut s = Script::new("rename/into-own-subdir");
    s.mkdir("a", 0o755).mkdir("a/b", 0o755);
    s.rename("a", "a/b/c")
        .rename("a", "a/c")
        .rename2("a", "a/b", RENAME_EXCHANGE)
        .rename2("a/b", "a", RENAME_EXCHANGE)
        .ls("a");
    v.push(s);
    let mut s = Script::new("rename/parent-over-child");
    s.mkdir("a", 0o755).mkdir("a/b", 0o755);
    s.rename("a/b", "a").rename("a", "a/b").ls("a");
    v.push(s);
    let mut s = Script::new("rename/dots");
    s.mkdir("d", 0o755).mkdir("e", 0o755);
    s.rename(".", "x")
        .rename("d/.", "x")
        .rename("d/..", "x")
        .rename("d", ".")
        .rename("d", "e/..")
        .rename("d", "e/.");
    observe(&mut s, &["d", "e"]);
    v.push(s);
    let mut s = Script::new("rename/same-file");
    s.file("f", 0o644, "x").link("f", "g");
    s.rename("f", "f").rename("f", "g");
    observe(&mut s, &["f", "g"]);
    v.push(s);
    let mut s = Script::new("rename/same-dir-and-self");
    s.mkdir("d", 0o755)
        .rename("d", "d")
        .rename("d", "d/")
        .rename("d/", "e/");
    observe(&mut s, &["d", "e"]);
    v.push(s);
    let mut s = Script::new("rename/trailing-slash-on-file");
    s.file("f", 0o644, "");
    s.rename("f/", "g").rename("f", "g/").rename("f", "g");
    observe(&mut s, &["f", "g"]);
    v.push(s);
    let mut s = Script::new("rename/flags-invalid");
    s.file("f", 0o644, "").file("g", 0o644, "");
    s.rename2("f", "g", RENAME_NOREPLACE | RENAME_EXCHANGE)
        .rename2("f", "g", 0x100)
        .rename2("f", "g", RENAME_WHITEOUT | RENAME_EXCHANGE);
    observe(&mut s, &["f", "g"]);
    v.push(s);
    let mut s = Script::new("rename/across-dirs-updates-nlink");
    s.mkdir("a", 0o755).mkdir("b", 0o755).mkdir("a/x", 0o755);
    s.stat("a")
        .stat("b")
        .rename("a/x", "b/x")
        .stat("a")
        .stat("b")
        .stat("b/x/..");
    s.stat("b/x");
    v.push(s);
    let mut s = Script::new("rename/exchange-dir-and-file-across-dirs");
    s.mkdir("a", 0o755)
        .mkdir("b", 0o755)
        .mkdir("a/d", 0o755)
        .file("b/f", 0o644, "y");
    s.rename2("a/d", "b/f", RENAME_EXCHANGE)
        .stat("a")
        .stat("b")
        .lstat("a/d")
        .lstat("b/f")
        .stat("b/f/..");
    v.push(s);
    let mut s = Script::new("rename/symlink-moves-link-not-target");
    s.mkdir("d", 0o755).symlink("d", "l").rename("l", "m");
    observe(&mut s, &["d", "l", "m"]);
    s.readlink("m");
    v.push(s);
    let mut s = Script::new("rename/missing-parent-and-notdir");
    s.file("f", 0o644, "").mkdir("d", 0o755);
    s.rename("f", "nodir/f")
        .rename("nodir/f", "g")
        .rename("f", "f/g")
        .rename("d", "f/d")
        .rename("", "g")
        .rename("f", "");
    observe(&mut s, &["f", "d"]);
    v.push(s);
    let mut s = Script::new("rename/dirfd-relative");
    s.mkdir("a", 0o755)
        .mkdir("b", 0o755)
        .file("a/f", 0o644, "m");
    let a = s.open("a", O_RDONLY | O_DIRECTORY, 0);
    let b = s.open("b", O_PATH | O_DIRECTORY, 0);
    s.rename_at(a, "f", b, "g", 0)
        .ls("a")
        .ls("b")
        .contents("b/g");
    s.rename_at(Fd::Raw(-1), "b/g", Fd::Cwd, "h", 0);
    v.push(s);
    // The old name's walk, errors and all, comes before the new dirfd is looked at.
    let mut s = Script::new("rename/old-walk-before-new-dirfd");
    s.mkdir("a", 0o755)
        .file("a/f", 0o644, "m")
        .file("x", 0o644, "");
    let f = s.open("x", O_RDONLY, 0);
    let a = s.open("a", O_RDONLY | O_DIRECTORY, 0);
    s.rename_at(f, "f", Fd::Raw(-1), "g", 0)
        .rename_at(f, "f", Fd::Raw(77), "g", 0)
        .rename_at(Fd::Cwd, "nowhere/f", Fd::Raw(-1), "g", 0)
        .rename_at(Fd::Cwd, "x/f", Fd::Raw(-1), "g", 0)
        .rename_at(a, "f", Fd::Raw(-1), "g", 0)
        .rename_at(a, "f", f, "g", 0)
        .rename_at(Fd::Raw(-1), "f", f, "g", 0)
        .ls("a");
    v.push(s);
    let mut s = Script::new("rename/open-fd-survives");
    s.file("f", 0o644, "data");
    let f = s.open("f", O_RDONLY, 0);
    s.rename("f", "g")
        .fstat(f)
        .read(f, 10)
        .file("f", 0o644, "new")
        .contents("f");
    v.push(s);
    let mut s = Script::new("rename/over-open-file");
    s.file("f", 0o644, "old").file("g", 0o644, "new");
    let f = s.open("f", O_RDONLY, 0);
    s.rename("g", "f").fstat(f).read(f, 10).contents("f");
    v.push(s);
}

fn link_symlink(v: &mut Vec<Script>) {
    for kind in Kind::BASIC {
        let mut s = Script::new(format!("link/from-{}", kind.tag()));
        kind.make(&mut s, "t");
        s.link("t", "n");
        observe(&mut s, &["t", "n"]);
        v.push(s);
        let mut s = Script::new(format!("link/follow-from-{}", kind.tag()));
        kind.make(&mut s, "t");
        s.link_at(Fd::Cwd, "t", Fd::Cwd, "n", AT_SYMLINK_FOLLOW);
        observe(&mut s, &["t", "n"]);
        v.push(s);
        let mut s = Script::new(format!("link/onto-{}", kind.tag()));
        s.file("f", 0o644, "");
        kind.make(&mut s, "t");
        s.link("f", "t");
        observe(&mut s, &["f", "t"]);
        v.push(s);
        let mut s = Script::new(format!("symlink/onto-{}", kind.tag()));
        kind.make(&mut s, "t");
        s.symlink("anything", "t");
        observe(&mut s, &["t"]);
        v.push(s);
        let mut s = Script::new(format!("readlink/{}", kind.tag()));
        kind.make(&mut s, "t");
        s.readlink("t").readlink("./t").readlink("t/");
        v.push(s);
    }
    let mut s = Script::new("link/errors");
    s.file("f", 0o644, "").mkdir("d", 0o755);
    s.link("", "x")
        .link("f", "")
        .link("f", "nodir/x")
        .link("f", "x/")
        .link("f/", "x")
        .link("d/", "x")
        .link_at(Fd::Cwd, "f", Fd::Cwd, "x", 0x4000_0000)
        .link_at(Fd::Raw(-1), "f", Fd::Cwd, "x", 0)
        .link(".", "x");
    observe(&mut s, &["f"]);
    v.push(s);
    let mut s = Script::new("link/empty-path-fd");
    s.file("f", 0o644, "linked");
    let f = s.open("f", O_RDONLY, 0);
    s.link_at(f, "", Fd::Cwd, "g", AT_EMPTY_PATH)
        .link_at(f, "", Fd::Cwd, "h", 0)
        .contents("g")
        .stat("f");
    v.push(s);
    let mut s = Script::new("link/unlinked-fd-cannot-relink");
    s.file("f", 0o644, "x");
    let f = s.open("f", O_RDONLY, 0);
    s.unlink("f")
        .link_at(f, "", Fd::Cwd, "g", AT_EMPTY_PATH)
        .stat("g");
    v.push(s);
    let mut s = Script::new("link/many-and-unlink-all");
    s.file("f", 0o644, "x");
    for i in 0..5 {
        s.link("f", format!("l{i}"));
    }
    s.stat("f");
    for i in 0..5 {
        s.unlink(format!("l{i}"));
    }
    s.stat("f");
    v.push(s);
    let mut s = Script::new("link/across-dirs");
    s.mkdir("a", 0o755)
        .mkdir("b", 0o755)
        .file("a/f", 0o644, "q");
    let a = s.open("a", O_PATH | O_DIRECTORY, 0);
    let b = s.open("b", O_RDONLY | O_DIRECTORY, 0);
    s.link_at(a, "f", b, "g", 0).stat("b/g").contents("b/g");
    v.push(s);

    let mut s = Script::new("symlink/targets-stored-verbatim");
    let targets: [&[u8]; 7] = [
        b"x",
        b"/abs/path",
        b"../up",
        b"a//b/",
        b".",
        b"\xff\xfe",
        b" sp ace",
    ];
    for (i, t) in targets.iter().enumerate() {
        s.symlink(t, format!("l{i}"))
            .readlink(format!("l{i}"))
            .lstat(format!("l{i}"));
    }
    v.push(s);
    let mut s = Script::new("symlink/errors");
    s.file("f", 0o644, "");
    s.symlink("", "l")
        .symlink("x", "")
        .symlink("x", "nodir/l")
        .symlink("x", "f/l")
        .symlink("x", "l/")
        .symlink_at("x", Fd::Raw(-1), "l")
        .symlink(vec![b'a'; 4095], "long")
        .symlink(vec![b'a'; 4096], "toolong")
        .lstat("long");
    v.push(s);
    let mut s = Script::new("readlink/buffer-sizes");
    s.symlink("0123456789", "l");
    s.readlink_at(Fd::Cwd, "l", 1)
        .readlink_at(Fd::Cwd, "l", 10)
        .readlink_at(Fd::Cwd, "l", 11)
        .readlink_at(Fd::Cwd, "l", 0);
    v.push(s);
    let mut s = Script::new("readlink/empty-path-and-dirfd");
    s.mkdir("d", 0o755).symlink("tgt", "d/l");
    let d = s.open("d", O_RDONLY | O_DIRECTORY, 0);
    let l = s.open("d/l", O_PATH | O_NOFOLLOW, 0);
    s.readlink_at(d, "l", 100)
        .readlink_at(l, "", 100)
        .readlink_at(d, "", 100)
        .readlink("")
        .readlink("missing");
    v.push(s);
    let mut s = Script::new("symlink/dirfd-relative");
    s.mkdir("d", 0o755);
    let d = s.open("d", O_PATH | O_DIRECTORY, 0);
    s.symlink_at("target", d, "l").readlink("d/l");
    v.push(s);
}

fn getdents(v: &mut Vec<Script>) {
    let mut s = Script::new("getdents/empty-dir");
    s.mkdir("d", 0o755).ls("d").ls(".");
    v.push(s);
    let mut s = Script::new("getdents/types");
    s.mkdir("d", 0o755)
        .file("d/f", 0o644, "")
        .mkdir("d/sub", 0o755)
        .symlink("f", "d/l")
        .symlink("nowhere", "d/dangling")
        .link("d/f", "d/hard")
        .ls("d");
    v.push(s);
    let mut s = Script::new("getdents/many-entries");
    s.mkdir("d", 0o755);
    for i in 0..300 {
        s.file(format!("d/entry-with-a-longish-name-{i:04}"), 0o644, "");
    }
    s.ls("d");
    for i in (0..300).step_by(3) {
        s.unlink(format!("d/entry-with-a-longish-name-{i:04}"));
    }
    s.ls("d");
    v.push(s);
    let mut s = Script::new("getdents/long-names");
    s.mkdir("d", 0o755);
    s.file(format!("d/{}", "n".repeat(255)), 0o644, "");
    s.mkdir(format!("d/{}", "m".repeat(200)), 0o755).ls("d");
    v.push(s);
    let mut s = Script::new("getdents/after-changes");
    s.mkdir("d", 0o755)
        .file("d/a", 0o644, "")
        .file("d/b", 0o644, "");
    s.rename("d/a", "d/c")
        .unlink("d/b")
        .mkdir("d/e", 0o755)
        .ls("d");
    v.push(s);
    let mut s = Script::new("getdents/small-buffers");
    s.mkdir("d", 0o755).file("d/abc", 0o644, "");
    let d = s.open("d", O_RDONLY | O_DIRECTORY, 0);
    s.getdents_once(d, 0)
        .getdents_once(d, 1)
        .getdents_once(d, 23)
        .getdents_once(d, 24)
        .getdents(d);
    v.push(s);
    // Resuming at a position: tmpfs lists newest first, entry cookies start at 3, position
    // 2 means "the newest entry" and i32::MAX is the end (found by the random differential
    // test: a seek to 3 listed nothing on scalevfs).
    let mut s = Script::new("getdents/seek-to-positions");
    s.mkdir("d", 0o755)
        .file("d/x", 0o644, "")
        .file("d/y", 0o644, "")
        .file("d/z", 0o644, "")
        .unlink("d/y");
    let d = s.open("d", O_RDONLY | O_DIRECTORY, 0);
    for pos in [1, 2, 3, 4, 5, 6, 100, i64::from(i32::MAX)] {
        s.lseek(d, pos, SEEK_SET).getdents(d);
    }
    v.push(s);
    let mut s = Script::new("getdents/end-and-rewind");
    s.mkdir("d", 0o755).file("d/x", 0o644, "");
    let d = s.open("d", O_RDONLY | O_DIRECTORY, 0);
    s.getdents(d)
        .getdents_once(d, 4096)
        .lseek(d, 0, SEEK_SET)
        .getdents_once(d, 4096)
        .getdents_once(d, 4096);
    v.push(s);
    let mut s = Script::new("getdents/wrong-fds");
    s.file("f", 0o644, "").mkdir("d", 0o755);
    let f = s.open("f", O_RDONLY, 0);
    let p = s.open("d", O_PATH, 0);
    s.getdents(f).getdents(p).getdents(Fd::Raw(-1));
    v.push(s);
    let mut s = Script::new("getdents/root-dotdot");
    s.ls("/").ls("..").ls("/..");
    v.push(s);
}
