//! Inode flags (`chattr`/`lsattr`): `FS_IOC_GETFLAGS`/`FS_IOC_SETFLAGS`, their `struct
//! fsxattr` form, who may set what, and what append-only, immutable and no-atime forbid.

use crate::op::Fd;
use crate::script::Script;
use libc::*;
use scalevfs::fileattr::{
    FsxAttr, FS_APPEND_FL, FS_IMMUTABLE_FL, FS_IOC_FSGETXATTR, FS_IOC_FSSETXATTR, FS_IOC_GETFLAGS,
    FS_IOC_SETFLAGS, FS_NOATIME_FL, FS_NODUMP_FL, FS_SYNC_FL, FS_XFLAG_APPEND, FS_XFLAG_COWEXTSIZE,
    FS_XFLAG_DAX, FS_XFLAG_EXTSIZE, FS_XFLAG_EXTSZINHERIT, FS_XFLAG_HASATTR, FS_XFLAG_NOATIME,
    FS_XFLAG_NODUMP, FS_XFLAG_PROJINHERIT, FS_XFLAG_SYNC,
};
use scalevfs::Timespec;

const T: [Timespec; 2] = [
    Timespec { sec: 1000, nsec: 0 },
    Timespec { sec: 2000, nsec: 0 },
];

fn xattr(xflags: u32) -> FsxAttr {
    FsxAttr {
        xflags,
        ..FsxAttr::default()
    }
}

pub(super) fn cases(v: &mut Vec<Script>) {
    get_set(v);
    immutable(v);
    append(v);
    noatime_and_users(v);
}

fn get_set(v: &mut Vec<Script>) {
    // Every flag bit on a file and a directory: tmpfs keeps four.
    let mut s = Script::new("chattr/flags-file-and-dir");
    s.file("f", 0o644, "abc").mkdir("d", 0o755);
    let f = s.open("f", O_RDONLY, 0);
    let d = s.open("d", O_RDONLY | O_DIRECTORY, 0);
    for fd in [f, d] {
        s.getflags(fd).fsgetxattr(fd);
        for bit in 0..32 {
            s.setflags(fd, 1 << bit);
        }
        s.setflags(fd, FS_NODUMP_FL | FS_NOATIME_FL)
            .getflags(fd)
            .fsgetxattr(fd)
            .setflags(fd, FS_NODUMP_FL | FS_SYNC_FL)
            .getflags(fd)
            .setflags(fd, 0)
            .getflags(fd);
    }
    v.push(s);

    // struct fsxattr: the common xflags map to the flags; extent sizes, project ids and
    // other xflags are refused; fsx_nextents is ignored.
    let mut s = Script::new("chattr/fsxattr");
    s.file("f", 0o644, "abc").mkdir("d", 0o755);
    let f = s.open("f", O_RDONLY, 0);
    let d = s.open("d", O_RDONLY | O_DIRECTORY, 0);
    for fd in [f, d] {
        s.fssetxattr(fd, xattr(FS_XFLAG_NODUMP | FS_XFLAG_NOATIME))
            .getflags(fd)
            .fsgetxattr(fd)
            .fssetxattr(fd, xattr(FS_XFLAG_SYNC))
            .fssetxattr(fd, xattr(FS_XFLAG_PROJINHERIT))
            .fssetxattr(fd, xattr(FS_XFLAG_DAX))
            .fssetxattr(fd, xattr(FS_XFLAG_EXTSIZE))
            .fssetxattr(fd, xattr(FS_XFLAG_EXTSZINHERIT))
            .fssetxattr(fd, xattr(FS_XFLAG_COWEXTSIZE))
            .fssetxattr(fd, xattr(1 << 31))
            .fssetxattr(fd, xattr(1 << 20))
            .fssetxattr(fd, xattr(FS_XFLAG_NODUMP | 1 << 31))
            .getflags(fd);
        // One field each: extent size, project id, CoW extent size, extent count.
        for field in 1..5 {
            let mut words = [0u8; FsxAttr::SIZE];
            words[4 * field..4 * field + 4].copy_from_slice(&7u32.to_ne_bytes());
            s.ioctl(fd, FS_IOC_FSSETXATTR, words);
        }
        s.getflags(fd).fsgetxattr(fd);
    }
    v.push(s);

    // What has no flags, and what is no such request.
    let mut s = Script::new("chattr/errors");
    s.file("f", 0o644, "").mkfifo("p", 0o644).symlink("f", "l");
    let f = s.open("f", O_RDWR, 0);
    let p = s.open("p", O_RDWR, 0);
    let o = s.open("f", O_PATH, 0);
    let l = s.open("l", O_PATH | O_NOFOLLOW, 0);
    for fd in [p.into(), o.into(), l.into(), Fd::Raw(-1), Fd::Raw(77)] {
        s.getflags(fd).setflags(fd, 0).fsgetxattr(fd);
    }
    for req in [
        FS_IOC_GETFLAGS,
        FS_IOC_SETFLAGS,
        FS_IOC_FSGETXATTR,
        FS_IOC_FSSETXATTR,
    ] {
        s.ioctl(f, req, []).ioctl(p, req, []);
    }
    s.ioctl(f, 0x1234, [0u8; 8])
        .ioctl(f, 0x8004_6601, [0u8; 4])
        .ioctl(f, 0x4004_6602, [0u8; 4]);
    v.push(s);
}

fn immutable(v: &mut Vec<Script>) {
    let mut s = Script::new("chattr/immutable-file");
    s.file("f", 0o644, "abc")
        .mkdir("d", 0o755)
        .setxattr("f", "user.a", "1", 0);
    let w = s.open("f", O_RDWR, 0);
    s.setflags(w, FS_IMMUTABLE_FL).getflags(w);
    s.open("f", O_WRONLY, 0);
    s.open("f", O_RDONLY | O_TRUNC, 0);
    s.open("f", O_WRONLY | O_APPEND, 0);
    let r = s.open("f", O_RDONLY, 0);
    s.truncate("f", 0)
        .unlink("f")
        .rename("f", "g")
        .rename("f", "d/f")
        .link("f", "h")
        .chmod("f", 0o600)
        .chown("f", 0, 0)
        .utimens("f", None, 0)
        .utimens("f", Some(T), 0)
        .access("f", W_OK)
        .access("f", R_OK)
        .setxattr("f", "user.a", "2", 0)
        .removexattr("f", "user.a")
        .setxattr("f", "trusted.a", "2", 0)
        .getxattr("f", "user.a", 10)
        // A descriptor opened before still writes.
        .write(w, "x")
        .pwrite(w, "y", 0)
        .ftruncate(w, 2)
        .fallocate(w, 0, 0, 10)
        .fallocate(w, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, 1)
        .fcntl(w, F_SETFL, O_APPEND as i64)
        .read(r, 10)
        .setflags(w, FS_IMMUTABLE_FL | FS_NODUMP_FL)
        .getflags(r)
        .stat("f")
        .setflags(r, 0)
        .unlink("f");
    v.push(s);
}

fn append(v: &mut Vec<Script>) {
    let mut s = Script::new("chattr/append-file");
    s.file("f", 0o644, "abc");
    let w = s.open("f", O_RDWR, 0);
    s.setflags(w, FS_APPEND_FL).getflags(w).fsgetxattr(w);
    s.open("f", O_WRONLY, 0);
    s.open("f", O_RDWR, 0);
    s.open("f", O_RDONLY | O_TRUNC, 0);
    s.open("f", O_WRONLY | O_APPEND | O_TRUNC, 0);
    let a = s.open("f", O_WRONLY | O_APPEND, 0);
    s.open("f", O_RDWR | O_APPEND, 0);
    s.open("f", O_RDONLY, 0);
    s.write(w, "x")
        .pwrite(a, "Z", 0)
        .ftruncate(w, 1)
        .ftruncate(w, -1)
        .ftruncate(a, 1)
        .truncate("f", 0)
        .fallocate(w, 0, 0, 100)
        .fallocate(w, FALLOC_FL_KEEP_SIZE, 0, 8192)
        .fallocate(w, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, 1)
        .fcntl(a, F_SETFL, 0)
        .fcntl(a, F_SETFL, (O_APPEND | O_NONBLOCK) as i64)
        .fcntl(w, F_SETFL, O_APPEND as i64)
        .fcntl(w, F_SETFL, 0)
        .unlink("f")
        .rename("f", "g")
        .link("f", "h")
        .chmod("f", 0o600)
        .chown("f", 0, 0)
        .utimens("f", None, 0)
        .utimens("f", Some(T), 0)
        .access("f", W_OK)
        .setxattr("f", "user.a", "1", 0)
        .contents("f")
        .setflags(w, 0)
        .unlink("f");
    v.push(s);

    // A directory: immutable keeps its entries as they are; append-only lets entries be
    // added, not removed or renamed away.
    for (name, flag) in [
        ("immutable-dir", FS_IMMUTABLE_FL),
        ("append-dir", FS_APPEND_FL),
    ] {
        let mut s = Script::new(format!("chattr/{name}"));
        s.mkdir("d", 0o755)
            .file("d/x", 0o644, "x")
            .mkdir("d/sub", 0o755)
            .mkdir("e", 0o755);
        let d = s.open("d", O_RDONLY | O_DIRECTORY, 0);
        s.setflags(d, flag);
        s.open("d/new", O_CREAT | O_RDWR, 0o644);
        s.open("d/x", O_RDWR, 0);
        s.mkdir("d/sub2", 0o755)
            .symlink("x", "d/l")
            .link("d/x", "d/x2")
            .link("d/x", "e/x2")
            .rename("e", "d/e")
            .unlink("d/x")
            .unlink("d/new")
            .rmdir("d/sub")
            .rename("d/x", "d/y")
            .rename("d/x", "e/x")
            .rmdir("d")
            .chmod("d/x", 0o600)
            .chmod("d", 0o700)
            .ls("d")
            .setflags(d, 0)
            .unlink("d/x");
        v.push(s);
    }
}

fn noatime_and_users(v: &mut Vec<Script>) {
    // No-atime: a read leaves atime; without it, it moves again.
    let mut s = Script::new("chattr/noatime");
    s.file("f", 0o644, "abc").utimens("f", Some(T), 0);
    let f = s.open("f", O_RDONLY, 0);
    s.setflags(f, FS_NOATIME_FL)
        .read(f, 10)
        .exact_times("f")
        .setflags(f, 0)
        .snap("f")
        .pread(f, 10, 0)
        .times_since("f");
    v.push(s);

    // The owner may set the plain flags, not append-only nor immutable; others none.
    let mut s = Script::new("chattr/users");
    s.mkdir_mode("w", 0o777)
        .file_mode("w/root", 0o666, "r")
        .become_user(1000, 1000)
        .file("w/mine", 0o644, "m");
    let m = s.open("w/mine", O_RDONLY, 0);
    let r = s.open("w/root", O_RDWR, 0);
    s.setflags(m, FS_NODUMP_FL)
        .getflags(m)
        .setflags(m, FS_APPEND_FL)
        .setflags(m, FS_IMMUTABLE_FL | FS_NODUMP_FL)
        .setflags(m, 1)
        .fssetxattr(m, xattr(FS_XFLAG_APPEND))
        .fssetxattr(m, xattr(FS_XFLAG_NOATIME))
        .fsgetxattr(m)
        .setflags(m, 0)
        .getflags(r)
        .fsgetxattr(r)
        .setflags(r, FS_NODUMP_FL)
        .setflags(r, 0)
        .fssetxattr(r, xattr(0));
    // Unknown xflags (bit 0x4, bit 26) before the owner check (Linux 6.17+).
    s.fssetxattr(r, xattr(0x4))
        .fssetxattr(r, xattr(0x0400_0000))
        .fssetxattr(m, xattr(0x0400_0000))
        .fssetxattr(m, xattr(FS_XFLAG_HASATTR));
    v.push(s);
}
