//! Extended attributes as a user (namespaces, permissions, sticky directories), through
//! descriptors, the order of the argument checks and the path walk, times, and
//! lifetime across rename, hard links and unlink.

use super::{cycle, long_name, new, CREATE, REPLACE};
use crate::op::Fd;
use crate::script::{Script, G1, U1, U2};
use libc::*;

pub(super) fn as_user(v: &mut Vec<Script>) {
    /// Root's file `d/f` (mode `mode`) with a trusted, a user and a security attribute, in a
    /// directory everyone may use, then U1.
    fn setup(name: &str, mode: u32) -> Script {
        let mut s = new(name);
        s.mkdir_mode("d", 0o777).file_mode("d/f", mode, "data");
        s.setxattr("d/f", "trusted.t", "T", 0)
            .setxattr("d/f", "user.u", "U", 0)
            .setxattr("d/f", "security.s", "S", 0);
        s.become_user(U1, G1);
        s
    }

    let mut s = setup("user-list-hides-trusted", 0o644);
    s.listxattr("d/f", 0)
        .listxattr("d/f", 64)
        .listxattr("d/f", 9)
        .getxattr("d/f", "trusted.t", 8)
        .getxattr("d/f", "trusted.t", 0)
        .getxattr("d/f", "trusted.nope", 8)
        .getxattr("d/f", "security.s", 8)
        .getxattr("d/f", "user.u", 8);
    v.push(s);

    let mut s = setup("user-trusted-security-eperm", 0o666);
    s.file("d/mine", 0o644, "");
    for p in ["d/f", "d/mine"] {
        s.setxattr(p, "trusted.x", "1", 0)
            .setxattr(p, "security.x", "1", 0)
            .setxattr(p, "trusted.t", "1", REPLACE)
            .removexattr(p, "trusted.t")
            .removexattr(p, "security.s")
            .removexattr(p, "trusted.nope")
            .setxattr(p, "trusted.", "1", 0)
            .setxattr(p, "security.", "1", 0);
    }
    s.listxattr("d/f", 64);
    v.push(s);

    let mut s = setup("user-without-write-permission", 0o644);
    s.setxattr("d/f", "user.x", "1", 0)
        .setxattr("d/f", "user.u", "2", REPLACE)
        .setxattr("d/f", "user.new", "2", REPLACE)
        .setxattr("d/f", "user.u", "2", CREATE)
        .removexattr("d/f", "user.u")
        .removexattr("d/f", "user.nope")
        .getxattr("d/f", "user.u", 8)
        .setxattr("d", "user.x", "1", 0)
        .setxattr("/", "user.x", "1", 0);
    v.push(s);

    let mut s = setup("user-with-write-permission", 0o666);
    s.setxattr("d/f", "user.x", "1", 0)
        .setxattr("d/f", "user.u", "mine now", REPLACE)
        .getxattr("d/f", "user.u", 16)
        .removexattr("d/f", "user.x")
        .listxattr("d/f", 64)
        .setxattr("d", "user.d", "dir", 0)
        .getxattr("d", "user.d", 8);
    v.push(s);

    let mut s = setup("user-without-read-permission", 0o600);
    s.getxattr("d/f", "user.u", 8)
        .getxattr("d/f", "user.u", 0)
        .getxattr("d/f", "user.nope", 0)
        .getxattr("d/f", "security.s", 8)
        .getxattr("d/f", "trusted.t", 8)
        .listxattr("d/f", 64)
        .setxattr("d/f", "user.x", "1", 0);
    v.push(s);

    let mut s = new("user-own-file");
    s.mkdir_mode("d", 0o777).become_user(U1, G1);
    s.file("d/mine", 0o644, "").mkdir("d/sub", 0o755);
    cycle(&mut s, "d/mine", "user.a");
    cycle(&mut s, "d/sub", "user.a");
    s.chmod("d/mine", 0o444)
        .setxattr("d/mine", "user.ro", "1", 0)
        .getxattr("d/mine", "user.ro", 8)
        .chmod("d/mine", 0o200)
        .setxattr("d/mine", "user.wo", "1", 0)
        .getxattr("d/mine", "user.wo", 8)
        .listxattr("d/mine", 64)
        .chmod("d/mine", 0o000)
        .listxattr("d/mine", 64)
        .removexattr("d/mine", "user.wo");
    v.push(s);

    let mut s = new("user-group-and-other-bits");
    s.mkdir_mode("d", 0o777);
    s.file_mode("d/g", 0o664, "")
        .chown("d/g", 0, G1)
        .file_mode("d/o", 0o646, "")
        .file_mode("d/none", 0o640, "")
        .chown("d/none", U2, 0);
    s.become_user(U1, G1);
    for p in ["d/g", "d/o", "d/none"] {
        s.setxattr(p, "user.x", "1", 0).getxattr(p, "user.x", 8);
    }
    v.push(s);

    let mut s = new("sticky-dir-non-owner");
    s.mkdir_mode("t", 0o1777)
        .setxattr("t", "user.r", "root's", 0)
        .mkdir_mode("t2", 0o1775);
    s.become_user(U1, G1);
    s.setxattr("t", "user.x", "1", 0)
        .setxattr("t", "user.r", "1", REPLACE)
        .removexattr("t", "user.r")
        .removexattr("t", "user.nope")
        .getxattr("t", "user.r", 16)
        .listxattr("t", 64)
        .setxattr("t2", "user.x", "1", 0)
        .setxattr("t", "trusted.x", "1", 0);
    // Inside the sticky directory, one's own file is as anywhere else.
    s.file("t/mine", 0o644, "")
        .setxattr("t/mine", "user.x", "1", 0)
        .getxattr("t/mine", "user.x", 8);
    v.push(s);

    let mut s = new("sticky-dir-owner");
    s.mkdir_mode("t", 0o1777).chown("t", U1, G1);
    s.setxattr("t", "user.root", "1", 0);
    s.become_user(U1, G1);
    s.setxattr("t", "user.x", "1", 0)
        .removexattr("t", "user.root")
        .listxattr("t", 64)
        .chmod("t", 0o1555)
        .setxattr("t", "user.y", "1", 0);
    v.push(s);

    let mut s = new("user-symlink-and-fifo");
    s.mkdir_mode("d", 0o777).mkfifo("d/p", 0o666);
    s.lsetxattr("d/p", "trusted.t", "t", 0);
    s.become_user(U1, G1);
    s.file("d/f", 0o644, "").symlink("f", "d/l");
    s.lsetxattr("d/l", "user.x", "1", 0)
        .lsetxattr("d/l", "trusted.x", "1", 0)
        .lgetxattr("d/l", "user.x", 8)
        .lremovexattr("d/l", "user.x")
        .llistxattr("d/l", 64)
        .setxattr("d/l", "user.x", "via link", 0)
        .getxattr("d/f", "user.x", 16)
        .setxattr("d/p", "user.x", "1", 0)
        .getxattr("d/p", "user.x", 8)
        .getxattr("d/p", "trusted.t", 8)
        .listxattr("d/p", 64);
    v.push(s);

    let mut s = new("user-search-denied");
    s.mkdir_mode("d", 0o700)
        .file("d/f", 0o666, "")
        .setxattr("d/f", "user.a", "1", 0);
    s.become_user(U1, G1);
    s.getxattr("d/f", "user.a", 8)
        .listxattr("d/f", 64)
        .setxattr("d/f", "user.a", "2", 0)
        .removexattr("d/f", "user.a")
        .lgetxattr("d/f", "", 8)
        .setxattr("d/f", "user.a", "2", 4);
    v.push(s);

    // Who sees the names root set, and which order: U1 and root list the same file.
    let mut s = new("user-and-root-lists");
    s.file("f", 0o644, "");
    for n in ["trusted.b", "user.b", "security.b", "trusted.a", "user.a"] {
        s.setxattr("f", n, "1", 0);
    }
    s.listxattr("f", 128);
    s.become_user(U2, G1);
    s.listxattr("f", 0).listxattr("f", 128);
    v.push(s);
}

pub(super) fn descriptors(v: &mut Vec<Script>) {
    let mut s = new("fd-cycle");
    s.file("f", 0o644, "");
    let f = s.open("f", O_RDONLY, 0);
    s.fsetxattr(f, "user.a", "ro fd", 0)
        .fgetxattr(f, "user.a", 0)
        .fgetxattr(f, "user.a", 16)
        .flistxattr(f, 0)
        .flistxattr(f, 64)
        .fremovexattr(f, "user.a")
        .fremovexattr(f, "user.a")
        .fgetxattr(f, "user.a", 16)
        .fsetxattr(f, "trusted.a", "t", CREATE)
        .fsetxattr(f, "trusted.a", "t", CREATE)
        .flistxattr(f, 2);
    let w = s.open("f", O_WRONLY, 0);
    s.fgetxattr(w, "trusted.a", 8)
        .fsetxattr(w, "user.w", "1", 0);
    let d = s.open(".", O_RDONLY | O_DIRECTORY, 0);
    s.fsetxattr(d, "user.dir", "1", 0).flistxattr(d, 64);
    s.listxattr("f", 64).listxattr("/", 64);
    v.push(s);

    let mut s = new("fd-o-path");
    s.file("f", 0o644, "").setxattr("f", "user.a", "1", 0);
    s.symlink("f", "l");
    let p = s.open("f", O_PATH, 0);
    let l = s.open("l", O_PATH | O_NOFOLLOW, 0);
    for fd in [p, l] {
        s.fsetxattr(fd, "user.b", "1", 0)
            .fgetxattr(fd, "user.a", 8)
            .fgetxattr(fd, "user.a", 0)
            .flistxattr(fd, 64)
            .fremovexattr(fd, "user.a");
    }
    s.listxattr("f", 64);
    v.push(s);

    let mut s = new("fd-closed-and-bad");
    s.file("f", 0o644, "");
    let f = s.open("f", O_RDONLY, 0);
    s.close(f);
    for fd in [Fd::Slot(f), Fd::Raw(-1), Fd::Raw(1000), Fd::Raw(AT_FDCWD)] {
        s.fsetxattr(fd, "user.a", "1", 0)
            .fgetxattr(fd, "user.a", 8)
            .flistxattr(fd, 64)
            .fremovexattr(fd, "user.a");
    }
    v.push(s);

    let mut s = new("fd-unlinked-file");
    s.file("f", 0o644, "").setxattr("f", "user.a", "before", 0);
    let f = s.open("f", O_RDWR, 0);
    s.unlink("f")
        .fgetxattr(f, "user.a", 16)
        .fsetxattr(f, "user.b", "after", 0)
        .flistxattr(f, 64)
        .fremovexattr(f, "user.a")
        .flistxattr(f, 64)
        .fstat(f);
    v.push(s);

    let mut s = new("fd-removed-dir");
    s.mkdir("d", 0o755).setxattr("d", "user.a", "1", 0);
    let d = s.open("d", O_RDONLY | O_DIRECTORY, 0);
    s.rmdir("d")
        .flistxattr(d, 64)
        .fsetxattr(d, "user.b", "2", 0)
        .fgetxattr(d, "user.b", 8);
    v.push(s);

    // Permission is the inode's, not the descriptor's access mode.
    let mut s = new("fd-permission-is-the-inodes");
    s.mkdir_mode("d", 0o777)
        .file_mode("d/root", 0o644, "")
        .setxattr("d/root", "user.a", "1", 0);
    s.become_user(U1, G1);
    let r = s.open("d/root", O_RDONLY, 0);
    s.fsetxattr(r, "user.x", "1", 0)
        .fremovexattr(r, "user.a")
        .fgetxattr(r, "user.a", 8);
    s.file("d/mine", 0o644, "");
    let m = s.open("d/mine", O_RDWR, 0);
    s.fchmod(m, 0o444)
        .fsetxattr(m, "user.x", "1", 0)
        .fchmod(m, 0o044)
        .fgetxattr(m, "user.x", 8)
        .flistxattr(m, 64)
        .fsetxattr(m, "trusted.x", "1", 0);
    v.push(s);
}

pub(super) fn order(v: &mut Vec<Script>) {
    // The path calls copy and check their arguments (flags, then the name, then the size)
    // before walking the path.
    let big = vec![b'v'; 65537];
    let mut s = new("order-path-calls");
    s.file("f", 0o644, "");
    s.setxattr("nope", "user.a", "1", 4)
        .setxattr("nope", "", "1", 0)
        .setxattr("nope", long_name(256, b'n'), "1", 0)
        .setxattr("nope", "user.a", &big, 0)
        .setxattr("nope", "", "1", 4)
        .setxattr("nope", "", &big, 0)
        .setxattr("f", "", &big, 8)
        .setxattr("f/x", "", "1", 0)
        .setxattr("", "", "1", 0)
        .setxattr("nope", "foo.a", "1", 0)
        .setxattr("nope", "user.", "1", 0)
        .setxattr("f/x", "system.x", "1", 0)
        .getxattr("nope", "", 8)
        .getxattr("nope", long_name(256, b'n'), 0)
        .getxattr("nope", "foo.a", 8)
        .getxattr("f/x", "user.", 8)
        .removexattr("nope", "")
        .removexattr("f/x", long_name(300, b'n'))
        .removexattr("nope", "user.")
        .listxattr("nope", 0)
        .lsetxattr("nope", "", "1", 4)
        .lgetxattr("nope", "", 8)
        .lremovexattr("nope", "");
    v.push(s);

    // The f-variants: which comes first, the descriptor or the arguments?
    let mut s = new("order-fd-calls");
    s.file("f", 0o644, "");
    let f = s.open("f", O_RDONLY, 0);
    let p = s.open("f", O_PATH, 0);
    s.close(f);
    for fd in [Fd::Slot(f), Fd::Slot(p)] {
        s.fsetxattr(fd, "user.a", "1", 4)
            .fsetxattr(fd, "", "1", 0)
            .fsetxattr(fd, long_name(256, b'n'), "1", 0)
            .fsetxattr(fd, "user.a", &big, 0)
            .fsetxattr(fd, "foo.a", "1", 0)
            .fsetxattr(fd, "user.", "1", 0)
            .fgetxattr(fd, "", 8)
            .fgetxattr(fd, long_name(256, b'n'), 0)
            .fgetxattr(fd, "foo.a", 8)
            .fremovexattr(fd, "")
            .fremovexattr(fd, "foo.a")
            .flistxattr(fd, 0);
    }
    v.push(s);

    // Permission, then the namespace's capability, then the prefix, then the store.
    let mut s = new("order-checks-as-user");
    s.mkdir_mode("d", 0o777)
        .file_mode("d/f", 0o644, "")
        .file_mode("d/w", 0o666, "");
    s.become_user(U1, G1);
    for p in ["d/f", "d/w"] {
        s.setxattr(p, "user.", "1", 0)
            .setxattr(p, "foo.x", "1", 0)
            .setxattr(p, "system.x", "1", 0)
            .setxattr(p, "security.", "1", 0)
            .setxattr(p, "trusted.", "1", 0)
            .setxattr(p, "user.nope", "1", REPLACE)
            .getxattr(p, "trusted.", 8)
            .getxattr(p, "user.", 8)
            .getxattr(p, "foo.x", 8)
            .getxattr(p, "system.x", 8)
            .removexattr(p, "foo.x")
            .removexattr(p, "user.")
            .removexattr(p, "security.");
    }
    v.push(s);
}

pub(super) fn times(v: &mut Vec<Script>) {
    let mut s = new("set-changes-ctime-only");
    s.file("f", 0o644, "x");
    s.snap("f").setxattr("f", "user.a", "1", 0).times_since("f");
    s.snap("f")
        .setxattr("f", "user.a", "2", REPLACE)
        .times_since("f");
    s.snap("f")
        .setxattr("f", "trusted.a", "", 0)
        .times_since("f");
    v.push(s);

    let mut s = new("remove-changes-ctime-only");
    s.file("f", 0o644, "x").setxattr("f", "user.a", "1", 0);
    s.snap("f").removexattr("f", "user.a").times_since("f");
    v.push(s);

    let mut s = new("failed-calls-keep-times");
    s.file("f", 0o644, "x").setxattr("f", "user.a", "1", 0);
    s.snap("f")
        .setxattr("f", "user.a", "2", CREATE)
        .setxattr("f", "user.b", "2", REPLACE)
        .removexattr("f", "user.nope")
        .setxattr("f", "foo.a", "1", 0)
        .setxattr("f", "user.", "1", 0)
        .setxattr("f", "user.a", "1", 4)
        .times_since("f");
    v.push(s);

    let mut s = new("reads-keep-times");
    s.file("f", 0o644, "x").setxattr("f", "user.a", "1", 0);
    s.snap("f")
        .getxattr("f", "user.a", 8)
        .getxattr("f", "user.a", 0)
        .getxattr("f", "user.nope", 8)
        .listxattr("f", 64)
        .listxattr("f", 0)
        .times_since("f");
    v.push(s);

    let mut s = new("dir-symlink-fd-ctime");
    s.mkdir("d", 0o755).file("t", 0o644, "").symlink("t", "l");
    s.snap("d").setxattr("d", "user.a", "1", 0).times_since("d");
    s.snap("l")
        .lsetxattr("l", "trusted.a", "1", 0)
        .times_since("l");
    s.snap("t")
        .lsetxattr("l", "trusted.b", "1", 0)
        .times_since("t");
    s.snap("t").setxattr("l", "user.a", "1", 0).times_since("t");
    let f = s.open("t", O_RDONLY, 0);
    s.snap("t").fsetxattr(f, "user.b", "1", 0).times_since("t");
    s.snap("t").fremovexattr(f, "user.b").times_since("t");
    s.snap(".").setxattr("d", "user.b", "1", 0).times_since(".");
    v.push(s);
}

pub(super) fn lifetime(v: &mut Vec<Script>) {
    let mut s = new("survive-rename");
    s.mkdir("a", 0o755).mkdir("b", 0o755);
    s.file("a/f", 0o644, "")
        .setxattr("a/f", "user.a", "kept", 0);
    s.setxattr("a", "user.dir", "kept too", 0);
    s.rename("a/f", "a/g")
        .getxattr("a/g", "user.a", 16)
        .rename("a/g", "b/h")
        .listxattr("b/h", 64)
        .rename("a", "b/a")
        .getxattr("b/a", "user.dir", 16);
    v.push(s);

    let mut s = new("rename-over");
    s.file("f", 0o644, "").setxattr("f", "user.f", "f", 0);
    s.file("g", 0o644, "").setxattr("g", "user.g", "g", 0);
    let old = s.open("f", O_RDONLY, 0);
    s.rename("g", "f")
        .listxattr("f", 64)
        .flistxattr(old, 64)
        .getxattr("f", "user.f", 8);
    s.file("x", 0o644, "").setxattr("x", "user.x", "x", 0);
    s.rename2("x", "f", RENAME_EXCHANGE)
        .listxattr("f", 64)
        .listxattr("x", 64);
    v.push(s);

    let mut s = new("hard-links-share");
    s.file("f", 0o644, "").link("f", "h");
    s.setxattr("h", "user.a", "via h", 0)
        .getxattr("f", "user.a", 16)
        .setxattr("f", "user.b", "via f", 0)
        .listxattr("h", 64)
        .removexattr("f", "user.a")
        .listxattr("h", 64)
        .unlink("f")
        .listxattr("h", 64)
        .stat("h");
    v.push(s);

    let mut s = new("new-file-after-unlink");
    s.file("f", 0o644, "");
    s.setxattr("f", "user.a", "old", 0)
        .setxattr("f", "trusted.a", "old", 0);
    s.unlink("f").file("f", 0o644, "");
    s.listxattr("f", 0)
        .getxattr("f", "user.a", 8)
        .getxattr("f", "trusted.a", 8)
        .setxattr("f", "user.a", "new", CREATE);
    for i in 0..4 {
        s.setxattr("f", format!("user.{i}"), "x", 0)
            .unlink("f")
            .file("f", 0o644, "")
            .listxattr("f", 64);
    }
    s.mkdir("d", 0o755).setxattr("d", "user.d", "1", 0);
    s.rmdir("d").mkdir("d", 0o755).listxattr("d", 64);
    v.push(s);

    let mut s = new("unaffected-by-other-changes");
    s.file("f", 0o644, "").setxattr("f", "user.a", "1", 0);
    s.setxattr("f", "security.s", "2", 0);
    s.chmod("f", 0o600)
        .chown("f", U1, G1)
        .truncate("f", 100)
        .file("g", 0o644, "");
    let f = s.open("f", O_WRONLY | O_TRUNC, 0);
    s.write(f, "data").close(f);
    s.utimens("f", None, 0)
        .listxattr("f", 64)
        .listxattr("g", 64);
    v.push(s);

    // Setting and removing attributes leaves set-id bits alone (unlike write or chown).
    let mut s = new("setid-bits-kept");
    s.mkdir_mode("d", 0o777)
        .file_mode("d/f", 0o6755, "")
        .chown("d/f", U1, G1)
        .chmod("d/f", 0o6775);
    s.setxattr("d/f", "user.root", "1", 0).stat("d/f");
    s.become_user(U1, G1);
    s.setxattr("d/f", "user.a", "1", 0)
        .removexattr("d/f", "user.root")
        .stat("d/f");
    v.push(s);
}
