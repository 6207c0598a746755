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

use crate::script::{Script, G1, U1};
use libc::*;

mod access;
use access::{as_user, descriptors, lifetime, order, times};

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
