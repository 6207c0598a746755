//! Extended attributes: set/get/list/remove (path followed, path not followed, fd) on
//! files, directories, symlinks and FIFOs; XATTR_CREATE/XATTR_REPLACE; names (empty,
//! 255/256 bytes, bare and unknown prefixes, `system.*`); values (empty, 64 KiB); size
//! queries and ERANGE; the namespaces as root and as a user (trusted.* hidden, security.*
//! read-only, user.* by file permission, sticky directories); descriptors; the order of
//! the argument checks and the path walk; times; and lifetime (rename, hard links, unlink).
//!
//! No `system.posix_acl_*` (scalevfs has no POSIX ACLs), no `security.capability` (the
//! kernel validates its value), and no limits (Linux's tmpfs charges xattrs to
//! `nr_inodes`; scalevfs's does not).

use crate::op::Fd;
use crate::script::{Script, G1, U1, U2};
use libc::*;

const CREATE: i32 = XATTR_CREATE;
const REPLACE: i32 = XATTR_REPLACE;

pub(super) fn cases(v: &mut Vec<Script>) {
    objects(v);
    flags(v);
    names(v);
    values(v);
    sizes(v);
    as_user(v);
    descriptors(v);
    order(v);
    times(v);
    lifetime(v);
}

fn new(name: &str) -> Script {
    Script::new(format!("xattr/{name}"))
}

/// A name of exactly `len` bytes in the `user.` namespace.
fn long_name(len: usize, fill: u8) -> Vec<u8> {
    let mut n = b"user.".to_vec();
    n.resize(len, fill);
    n
}

/// Set, read (size query and read), list, remove, and look again: the basic cycle on `path`.
fn cycle(s: &mut Script, path: &str, name: &str) {
    s.setxattr(path, name, "value", 0)
        .getxattr(path, name, 0)
        .getxattr(path, name, 64)
        .listxattr(path, 0)
        .listxattr(path, 256)
        .removexattr(path, name)
        .getxattr(path, name, 64)
        .listxattr(path, 256);
}

fn objects(v: &mut Vec<Script>) {
    let mut s = new("file-cycle");
    s.file("f", 0o644, "data");
    s.listxattr("f", 0).listxattr("f", 16);
    cycle(&mut s, "f", "user.a");
    cycle(&mut s, "f", "trusted.a");
    cycle(&mut s, "f", "security.a");
    s.contents("f").stat("f");
    v.push(s);

    let mut s = new("dir-cycle");
    s.mkdir("d", 0o755).file("d/inner", 0o644, "");
    cycle(&mut s, "d", "user.a");
    cycle(&mut s, "d/", "trusted.a");
    s.setxattr("d", "user.b", "1", 0).listxattr("d/inner", 64);
    s.ls("d");
    v.push(s);

    let mut s = new("root-and-dots");
    s.mkdir("d", 0o755);
    s.setxattr("/", "user.root", "r", 0)
        .setxattr(".", "user.dot", "d", 0)
        .setxattr("d/..", "user.dotdot", "dd", 0)
        .listxattr("/", 256)
        .getxattr("d/../.", "user.root", 8);
    v.push(s);

    let mut s = new("list-order");
    s.file("f", 0o644, "");
    for n in [
        "user.b",
        "user.a",
        "user.c",
        "user.aa",
        "trusted.m",
        "security.z",
        "user.B",
        "user.\u{e9}",
        "trusted.a",
        "user.a.b",
        "security.A",
    ] {
        s.setxattr("f", n, n, 0);
    }
    s.listxattr("f", 0).listxattr("f", 4096);
    s.removexattr("f", "user.aa")
        .setxattr("f", "user.ab", "", 0)
        .listxattr("f", 4096);
    v.push(s);

    let mut s = new("symlink-followed");
    s.file("t", 0o644, "").symlink("t", "l");
    s.setxattr("l", "user.a", "via link", 0)
        .getxattr("t", "user.a", 64)
        .getxattr("l", "user.a", 64)
        .listxattr("l", 64)
        .lgetxattr("l", "user.a", 64)
        .llistxattr("l", 64)
        .removexattr("l", "user.a")
        .listxattr("t", 64);
    v.push(s);

    let mut s = new("symlink-itself");
    s.file("t", 0o644, "").symlink("t", "l");
    s.lsetxattr("l", "trusted.a", "on link", 0)
        .lsetxattr("l", "security.b", "sec", 0)
        .llistxattr("l", 0)
        .llistxattr("l", 64)
        .listxattr("l", 64)
        .lgetxattr("l", "trusted.a", 64)
        .getxattr("l", "trusted.a", 64)
        .lremovexattr("l", "trusted.a")
        .lremovexattr("l", "trusted.a")
        .llistxattr("l", 64)
        .listxattr("t", 64);
    v.push(s);

    let mut s = new("symlink-user-namespace");
    s.file("t", 0o644, "").symlink("t", "l");
    s.lsetxattr("l", "user.a", "1", 0)
        .lgetxattr("l", "user.a", 64)
        .lgetxattr("l", "user.a", 0)
        .lremovexattr("l", "user.a")
        .llistxattr("l", 64);
    s.mkdir("d", 0o755).symlink("d", "ld");
    s.lsetxattr("ld", "user.a", "1", 0)
        .setxattr("ld", "user.a", "1", 0)
        .lgetxattr("ld", "user.a", 8)
        .getxattr("ld", "user.a", 8);
    // A trailing slash follows the link even for the l-variants.
    s.lsetxattr("ld/", "user.b", "2", 0)
        .llistxattr("ld/", 64)
        .lgetxattr("ld/", "user.b", 8)
        .lremovexattr("ld/", "user.b")
        .lsetxattr("l/", "trusted.a", "1", 0)
        .llistxattr("l/", 64);
    v.push(s);

    let mut s = new("symlink-dangling-and-loop");
    s.symlink("nowhere", "dang")
        .symlink("loop2", "loop1")
        .symlink("loop1", "loop2");
    s.setxattr("dang", "user.a", "1", 0)
        .getxattr("dang", "user.a", 8)
        .listxattr("dang", 8)
        .removexattr("dang", "user.a")
        .lsetxattr("dang", "trusted.a", "1", 0)
        .llistxattr("dang", 64)
        .setxattr("loop1", "user.a", "1", 0)
        .getxattr("loop1", "user.a", 8)
        .listxattr("loop1", 8)
        .removexattr("loop1", "user.a")
        .lsetxattr("loop1", "trusted.a", "1", 0)
        .llistxattr("loop1", 64)
        .setxattr("loop1/x", "user.a", "1", 0)
        .lsetxattr("loop1/", "trusted.a", "1", 0)
        .lsetxattr("dang/", "trusted.a", "1", 0);
    v.push(s);

    let mut s = new("fifo");
    s.mkfifo("p", 0o644).lstat("p");
    s.setxattr("p", "user.a", "1", 0)
        .getxattr("p", "user.a", 8)
        .removexattr("p", "user.a")
        .setxattr("p", "trusted.a", "t", 0)
        .setxattr("p", "security.a", "s", 0)
        .listxattr("p", 0)
        .listxattr("p", 64)
        .getxattr("p", "trusted.a", 8)
        .lgetxattr("p", "security.a", 8)
        .removexattr("p", "trusted.a")
        .llistxattr("p", 64);
    v.push(s);

    let mut s = new("fifo-descriptor");
    s.mkfifo("p", 0o600);
    let f = s.open("p", O_RDONLY | O_NONBLOCK, 0);
    s.fsetxattr(f, "trusted.a", "t", 0)
        .fsetxattr(f, "user.a", "u", 0)
        .fgetxattr(f, "user.a", 8)
        .fgetxattr(f, "trusted.a", 8)
        .flistxattr(f, 64)
        .close(f)
        .listxattr("p", 64);
    let o = s.open("p", O_PATH, 0);
    s.fgetxattr(o, "trusted.a", 8).close(o);
    v.push(s);

    let mut s = new("missing-and-bad-paths");
    s.file("f", 0o644, "").mkdir("d", 0o755);
    for p in ["nope", "nope/x", "f/x", "", "f/", "d/", "d/nope/"] {
        s.setxattr(p, "user.a", "1", 0)
            .lsetxattr(p, "user.b", "1", 0)
            .getxattr(p, "user.a", 8)
            .lgetxattr(p, "user.a", 0)
            .listxattr(p, 64)
            .llistxattr(p, 0)
            .removexattr(p, "user.a")
            .lremovexattr(p, "user.b");
    }
    v.push(s);
}

fn flags(v: &mut Vec<Script>) {
    let mut s = new("flag-create");
    s.file("f", 0o644, "");
    s.setxattr("f", "user.a", "first", CREATE)
        .setxattr("f", "user.a", "second", CREATE)
        .getxattr("f", "user.a", 64)
        .setxattr("f", "trusted.a", "t", CREATE)
        .setxattr("f", "trusted.a", "t2", CREATE)
        .getxattr("f", "trusted.a", 64);
    v.push(s);

    let mut s = new("flag-replace");
    s.file("f", 0o644, "");
    s.setxattr("f", "user.a", "first", REPLACE)
        .getxattr("f", "user.a", 64)
        .listxattr("f", 64)
        .setxattr("f", "user.a", "first", 0)
        .setxattr("f", "user.a", "second", REPLACE)
        .getxattr("f", "user.a", 64)
        .setxattr("f", "user.a", "", REPLACE)
        .getxattr("f", "user.a", 64)
        .getxattr("f", "user.a", 0);
    v.push(s);

    let mut s = new("flag-both");
    s.file("f", 0o644, "");
    s.setxattr("f", "user.a", "x", CREATE | REPLACE)
        .listxattr("f", 64)
        .setxattr("f", "user.a", "x", 0)
        .setxattr("f", "user.a", "y", CREATE | REPLACE)
        .getxattr("f", "user.a", 64);
    v.push(s);

    let mut s = new("flag-bad");
    s.file("f", 0o644, "");
    for flags in [4, 8, 0x10, 0x100, -1, i32::MIN, CREATE | 4, REPLACE | 0x40] {
        s.setxattr("f", "user.a", "x", flags);
    }
    s.lsetxattr("f", "user.a", "x", 4);
    let f = s.open("f", O_RDONLY, 0);
    s.fsetxattr(f, "user.a", "x", 4).listxattr("f", 64);
    v.push(s);
}

fn names(v: &mut Vec<Script>) {
    let mut s = new("name-empty");
    s.file("f", 0o644, "");
    s.setxattr("f", "", "x", 0)
        .getxattr("f", "", 8)
        .getxattr("f", "", 0)
        .removexattr("f", "")
        .lsetxattr("f", "", "x", 0)
        .lgetxattr("f", "", 8)
        .lremovexattr("f", "");
    let f = s.open("f", O_RDONLY, 0);
    s.fsetxattr(f, "", "x", 0)
        .fgetxattr(f, "", 8)
        .fremovexattr(f, "");
    v.push(s);

    let mut s = new("name-255-bytes");
    let n = long_name(255, b'n');
    s.file("f", 0o644, "");
    s.setxattr("f", &n, "long", 0)
        .getxattr("f", &n, 8)
        .listxattr("f", 0)
        .listxattr("f", 512)
        .setxattr("f", long_name(255, b'm'), "m", 0)
        .listxattr("f", 512)
        .removexattr("f", &n)
        .listxattr("f", 512);
    v.push(s);

    let mut s = new("name-256-bytes");
    let n = long_name(256, b'n');
    s.file("f", 0o644, "");
    s.setxattr("f", &n, "long", 0)
        .getxattr("f", &n, 8)
        .removexattr("f", &n)
        .lsetxattr("f", &n, "long", 0)
        .lgetxattr("f", &n, 0)
        .lremovexattr("f", &n)
        .setxattr("f", long_name(4000, b'z'), "long", 0)
        .listxattr("f", 64);
    let f = s.open("f", O_RDONLY, 0);
    s.fsetxattr(f, &n, "x", 0)
        .fgetxattr(f, &n, 8)
        .fremovexattr(f, &n);
    v.push(s);

    let mut s = new("bare-prefix");
    s.file("f", 0o644, "");
    for n in ["user.", "trusted.", "security."] {
        s.setxattr("f", n, "x", 0)
            .getxattr("f", n, 8)
            .getxattr("f", n, 0)
            .removexattr("f", n);
    }
    s.listxattr("f", 64);
    v.push(s);

    let mut s = new("unknown-prefix");
    s.file("f", 0o644, "");
    for n in [
        "foo.bar",
        "user",
        "USER.a",
        "users.a",
        "os2.x",
        "trusted",
        ".user.a",
        "xfsroot.a",
    ] {
        s.setxattr("f", n, "x", 0)
            .getxattr("f", n, 8)
            .removexattr("f", n);
    }
    s.listxattr("f", 64);
    v.push(s);

    let mut s = new("system-namespace");
    s.file("f", 0o644, "").mkdir("d", 0o755);
    for n in ["system.foo", "system.", "system.posix", "system.nfs4_acl"] {
        s.setxattr("f", n, "x", 0)
            .getxattr("f", n, 8)
            .getxattr("d", n, 0)
            .removexattr("f", n);
    }
    s.listxattr("f", 64).listxattr("d", 64);
    v.push(s);

    let mut s = new("name-bytes");
    s.file("f", 0o644, "");
    let odd: [&[u8]; 5] = [
        b"user.\xff\xfe",
        b"user. ",
        b"user.a/b",
        b"user..",
        b"trusted.\x01",
    ];
    for n in odd {
        s.setxattr("f", n, n, 0);
    }
    s.listxattr("f", 256);
    for n in odd {
        s.getxattr("f", n, 16);
    }
    v.push(s);
}

fn values(v: &mut Vec<Script>) {
    let mut s = new("value-empty");
    s.file("f", 0o644, "");
    s.setxattr("f", "user.e", "", 0)
        .getxattr("f", "user.e", 0)
        .getxattr("f", "user.e", 16)
        .getxattr("f", "user.e", 1)
        .listxattr("f", 64)
        .setxattr("f", "user.e", "", CREATE)
        .setxattr("f", "trusted.e", "", 0)
        .getxattr("f", "trusted.e", 4)
        .removexattr("f", "user.e")
        .getxattr("f", "user.e", 16);
    v.push(s);

    let mut s = new("value-64k");
    let big: Vec<u8> = (0..65536u32).map(|i| (i * 7 % 251) as u8).collect();
    s.file("f", 0o644, "");
    s.setxattr("f", "user.big", &big, 0)
        .getxattr("f", "user.big", 0)
        .getxattr("f", "user.big", 65535)
        .getxattr("f", "user.big", 65536)
        .getxattr("f", "user.big", 70000)
        .setxattr("f", "trusted.big", &big[..1000], 0)
        .getxattr("f", "trusted.big", 1000)
        .listxattr("f", 64);
    v.push(s);

    let mut s = new("value-64k-plus-one");
    let big = vec![b'v'; 65537];
    s.file("f", 0o644, "");
    s.setxattr("f", "user.big", &big, 0)
        .setxattr("nope", "user.big", &big, 0)
        .lsetxattr("f", "user.big", &big, CREATE)
        .setxattr("f", "user.big", vec![b'w'; 1 << 20], 0)
        .listxattr("f", 64);
    let f = s.open("f", O_RDONLY, 0);
    s.fsetxattr(f, "user.big", &big, 0);
    v.push(s);

    let mut s = new("value-overwrite");
    s.file("f", 0o644, "");
    s.setxattr("f", "user.a", "a long first value", 0)
        .setxattr("f", "user.a", "short", 0)
        .getxattr("f", "user.a", 64)
        .getxattr("f", "user.a", 0)
        .setxattr("f", "user.a", "a value longer than before, again", 0)
        .getxattr("f", "user.a", 64)
        .listxattr("f", 64);
    v.push(s);

    let mut s = new("value-binary");
    s.file("f", 0o644, "");
    s.setxattr("f", "user.bin", b"\0\x01\xff\0abc\0", 0)
        .getxattr("f", "user.bin", 0)
        .getxattr("f", "user.bin", 64);
    v.push(s);
}

fn sizes(v: &mut Vec<Script>) {
    let mut s = new("get-erange");
    s.file("f", 0o644, "");
    s.setxattr("f", "user.a", "hello", 0);
    for size in [0, 1, 4, 5, 6, 4096] {
        s.getxattr("f", "user.a", size);
    }
    s.getxattr("f", "user.missing", 1);
    v.push(s);

    let mut s = new("list-erange");
    s.file("f", 0o644, "");
    s.setxattr("f", "user.a", "", 0)
        .setxattr("f", "user.bb", "", 0);
    for size in [0, 1, 7, 8, 14, 15, 16] {
        s.listxattr("f", size);
    }
    v.push(s);

    let mut s = new("list-empty");
    s.file("f", 0o644, "").mkdir("d", 0o755).symlink("f", "l");
    s.listxattr("f", 0)
        .listxattr("f", 1)
        .listxattr("d", 0)
        .listxattr("d", 100)
        .llistxattr("l", 0)
        .llistxattr("l", 1);
    v.push(s);

    let mut s = new("enodata");
    s.file("f", 0o644, "");
    s.getxattr("f", "user.a", 8)
        .getxattr("f", "user.a", 0)
        .removexattr("f", "user.a")
        .getxattr("f", "trusted.a", 8)
        .getxattr("f", "security.a", 8)
        .removexattr("f", "trusted.a")
        .removexattr("f", "security.a")
        .setxattr("f", "user.b", "", 0)
        .getxattr("f", "user.a", 8)
        .getxattr("f", "user.bb", 8)
        .getxattr("f", "user.", 8)
        .removexattr("f", "user.a");
    v.push(s);

    let mut s = new("removed-then-listed");
    s.file("f", 0o644, "");
    for n in ["user.a", "user.b", "user.c", "trusted.t"] {
        s.setxattr("f", n, "1", 0);
    }
    s.removexattr("f", "user.b")
        .listxattr("f", 0)
        .listxattr("f", 64)
        .removexattr("f", "user.a")
        .removexattr("f", "user.c")
        .removexattr("f", "trusted.t")
        .listxattr("f", 0)
        .listxattr("f", 64)
        .setxattr("f", "user.b", "2", CREATE)
        .listxattr("f", 64);
    v.push(s);

    // 257 names of 255 bytes: 65,792 bytes of list, more than XATTR_LIST_MAX.
    let mut s = new("list-larger-than-64k");
    s.file("f", 0o644, "");
    for i in 0..257u32 {
        let mut n = long_name(255, b'x');
        n[5..8].copy_from_slice(format!("{i:03}").as_bytes());
        s.setxattr("f", &n, "", 0);
    }
    s.listxattr("f", 0)
        .listxattr("f", 65535)
        .listxattr("f", 65536)
        .listxattr("f", 65792)
        .listxattr("f", 70000);
    s.become_user(U1, G1).listxattr("f", 0);
    v.push(s);
}

fn as_user(v: &mut Vec<Script>) {
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

fn descriptors(v: &mut Vec<Script>) {
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

fn order(v: &mut Vec<Script>) {
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

fn times(v: &mut Vec<Script>) {
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

fn lifetime(v: &mut Vec<Script>) {
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
