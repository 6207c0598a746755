//! Extended attributes through `Process` (the rules are in `scalevfs_vfs::xattr`; the
//! conformance suite compares the same calls with the host's tmpfs).

use libc::{O_RDONLY, XATTR_CREATE, XATTR_REPLACE};
use scalevfs::{Credentials, Errno, Locking, Process, Vfs, VfsOptions};

fn both(f: impl Fn(&Process, &std::sync::Arc<Vfs>)) {
    for locking in [Locking::Scalable, Locking::Legacy] {
        let vfs = Vfs::new(VfsOptions {
            locking,
            ..VfsOptions::default()
        });
        let p = Process::new(&vfs, Credentials::root());
        f(&p, &vfs);
    }
}

fn get(p: &Process, path: &str, name: &str) -> Result<Vec<u8>, Errno> {
    let n = p.getxattr(path, name.as_bytes(), &mut [])?;
    let mut buf = vec![0u8; n];
    let m = p.getxattr(path, name.as_bytes(), &mut buf)?;
    buf.truncate(m);
    Ok(buf)
}

fn list(p: &Process, path: &str) -> Vec<String> {
    let n = p.listxattr(path, &mut []).unwrap();
    let mut buf = vec![0u8; n];
    let m = p.listxattr(path, &mut buf).unwrap();
    buf[..m]
        .split(|&b| b == 0)
        .filter(|s| !s.is_empty())
        .map(|s| String::from_utf8(s.to_vec()).unwrap())
        .collect()
}

#[test]
fn set_get_list_remove() {
    both(|p, _| {
        p.write_file("/f", b"").unwrap();
        for n in [
            "user.b",
            "user.a",
            "user.c",
            "security.z",
            "trusted.m",
            "user.aa",
        ] {
            p.setxattr("/f", n.as_bytes(), n.as_bytes(), 0).unwrap();
        }
        // Linux's tmpfs lists names in descending byte order.
        assert_eq!(
            list(p, "/f"),
            [
                "user.c",
                "user.b",
                "user.aa",
                "user.a",
                "trusted.m",
                "security.z"
            ]
        );
        assert_eq!(get(p, "/f", "user.aa").unwrap(), b"user.aa");
        assert_eq!(
            p.getxattr("/f", b"user.aa", &mut [0; 3]),
            Err(Errno::ERANGE)
        );
        assert_eq!(
            p.setxattr("/f", b"user.a", b"2", XATTR_CREATE),
            Err(Errno::EEXIST)
        );
        assert_eq!(
            p.setxattr("/f", b"user.q", b"2", XATTR_REPLACE),
            Err(Errno::ENODATA)
        );
        p.setxattr("/f", b"user.a", b"", XATTR_REPLACE).unwrap();
        assert_eq!(get(p, "/f", "user.a").unwrap(), b"");
        p.removexattr("/f", b"user.a").unwrap();
        assert_eq!(p.removexattr("/f", b"user.a"), Err(Errno::ENODATA));
        assert_eq!(get(p, "/f", "user.a"), Err(Errno::ENODATA));
        assert_eq!(p.setxattr("/f", b"foo.a", b"1", 0), Err(Errno::EOPNOTSUPP));
        assert_eq!(p.setxattr("/f", b"user.", b"1", 0), Err(Errno::EINVAL));
        assert_eq!(p.setxattr("/f", b"", b"1", 0), Err(Errno::ERANGE));
        assert_eq!(p.setxattr("/f", &[b'u'; 256], b"1", 0), Err(Errno::ERANGE));
        assert_eq!(
            p.setxattr("/f", b"user.big", &vec![0; 65537], 0),
            Err(Errno::E2BIG)
        );
        assert_eq!(p.setxattr("/nope", b"user.a", b"1", 4), Err(Errno::EINVAL));
        // Descriptors: not O_PATH ones.
        let fd = p.open("/f", O_RDONLY, 0).unwrap();
        assert_eq!(p.fsetxattr(fd, b"user.fd", b"1", 0), Ok(()));
        let mut b = [0u8; 1];
        assert_eq!(p.fgetxattr(fd, b"user.fd", &mut b), Ok(1));
        p.close(fd).unwrap();
        let fd = p.open("/f", libc::O_PATH, 0).unwrap();
        assert_eq!(p.fgetxattr(fd, b"user.fd", &mut b), Err(Errno::EBADF));
        p.close(fd).unwrap();
    });
}

#[test]
fn permissions_and_namespaces_for_a_user() {
    both(|p, vfs| {
        p.mkdir("/d", 0o777).unwrap();
        p.fchmodat(libc::AT_FDCWD, "/d", 0o777, 0).unwrap();
        p.write_file("/d/f", b"").unwrap();
        p.fchmodat(libc::AT_FDCWD, "/d/f", 0o644, 0).unwrap();
        p.setxattr("/d/f", b"trusted.t", b"1", 0).unwrap();
        p.setxattr("/d/f", b"user.u", b"1", 0).unwrap();
        p.setxattr("/d/f", b"security.s", b"1", 0).unwrap();
        let u = Process::new(vfs, Credentials::user(1000, 1000));
        assert_eq!(
            list(&u, "/d/f"),
            ["user.u", "security.s"],
            "trusted.* is hidden"
        );
        assert_eq!(get(&u, "/d/f", "trusted.t"), Err(Errno::ENODATA));
        assert_eq!(get(&u, "/d/f", "security.s").unwrap(), b"1");
        assert_eq!(get(&u, "/d/f", "user.u").unwrap(), b"1");
        assert_eq!(u.setxattr("/d/f", b"user.x", b"1", 0), Err(Errno::EACCES));
        assert_eq!(u.setxattr("/d/f", b"trusted.x", b"1", 0), Err(Errno::EPERM));
        assert_eq!(
            u.setxattr("/d/f", b"security.x", b"1", 0),
            Err(Errno::EPERM)
        );
        assert_eq!(u.removexattr("/d/f", b"user.u"), Err(Errno::EACCES));
        u.write_file("/d/mine", b"").unwrap();
        assert_eq!(u.setxattr("/d/mine", b"user.x", b"1", 0), Ok(()));
        assert_eq!(
            u.setxattr("/d/mine", b"security.x", b"1", 0),
            Err(Errno::EPERM)
        );
        // user.* only on regular files and directories; symlinks take trusted.*.
        p.symlinkat("f", libc::AT_FDCWD, "/d/l").unwrap();
        assert_eq!(p.lsetxattr("/d/l", b"user.x", b"1", 0), Err(Errno::EPERM));
        assert_eq!(p.lsetxattr("/d/l", b"trusted.x", b"1", 0), Ok(()));
        assert_eq!(p.lgetxattr("/d/l", b"user.x", &mut []), Err(Errno::ENODATA));
        assert_eq!(get(p, "/d/l", "user.u").unwrap(), b"1", "followed to /d/f");
        // A sticky directory: user.* writes by its owner or root only.
        p.fchmodat(libc::AT_FDCWD, "/d", 0o1777, 0).unwrap();
        assert_eq!(u.setxattr("/d", b"user.x", b"1", 0), Err(Errno::EPERM));
        assert_eq!(p.setxattr("/d", b"user.x", b"1", 0), Ok(()));
    });
}

#[test]
fn setting_changes_ctime_only_and_eviction_drops_them() {
    both(|p, vfs| {
        p.write_file("/f", b"x").unwrap();
        let old = scalevfs::Timespec { sec: 1000, nsec: 0 };
        p.utimensat(libc::AT_FDCWD, "/f", Some([old, old]), 0)
            .unwrap();
        let before = p.stat("/f").unwrap();
        p.setxattr("/f", b"user.a", b"1", 0).unwrap();
        let after = p.stat("/f").unwrap();
        assert_eq!(after.mtime, before.mtime);
        assert!(after.ctime > before.ctime);
        let base = vfs.inode_count();
        for i in 0..100 {
            let path = format!("/g{i}");
            p.write_file(&path, b"").unwrap();
            p.setxattr(&path, b"user.a", &[7; 100], 0).unwrap();
            p.unlink(&path).unwrap();
            // A new file with the same name (and maybe a reused number) has none.
            p.write_file(&path, b"").unwrap();
            assert!(list(p, &path).is_empty());
            p.unlink(&path).unwrap();
        }
        assert_eq!(vfs.inode_count(), base);
    });
}

/// The f-variants check their arguments before the descriptor, as Linux (6.13+) does; a
/// name's namespace is checked after it.
#[test]
fn fd_calls_check_arguments_before_the_descriptor() {
    both(|p, _| {
        p.write_file("/f", b"").unwrap();
        let closed = p.open("/f", O_RDONLY, 0).unwrap();
        p.close(closed).unwrap();
        let opath = p.open("/f", libc::O_PATH, 0).unwrap();
        for fd in [closed, opath] {
            assert_eq!(p.fsetxattr(fd, b"user.a", b"1", 4), Err(Errno::EINVAL));
            assert_eq!(p.fsetxattr(fd, b"", b"1", 0), Err(Errno::ERANGE));
            assert_eq!(
                p.fsetxattr(fd, b"user.a", &vec![0; 65537], 0),
                Err(Errno::E2BIG)
            );
            assert_eq!(p.fsetxattr(fd, b"foo.a", b"1", 0), Err(Errno::EBADF));
            assert_eq!(p.fgetxattr(fd, &[b'u'; 256], &mut []), Err(Errno::ERANGE));
            assert_eq!(p.fgetxattr(fd, b"user.", &mut []), Err(Errno::EBADF));
            assert_eq!(p.fremovexattr(fd, b""), Err(Errno::ERANGE));
            assert_eq!(p.fremovexattr(fd, b"foo.a"), Err(Errno::EBADF));
            assert_eq!(p.flistxattr(fd, &mut []), Err(Errno::EBADF));
        }
    });
}

/// `fsetxattr` and `fgetxattr` are `setxattrat`/`getxattrat` with an empty path on Linux
/// 6.15+, so `AT_FDCWD` names the cwd; `flistxattr` and `fremovexattr` say `EBADF`.
#[test]
fn at_fdcwd_is_the_cwd_for_fsetxattr_and_fgetxattr() {
    both(|p, _| {
        p.mkdir("/d", 0o755).unwrap();
        p.chdir("/d").unwrap();
        let cwd = libc::AT_FDCWD;
        p.fsetxattr(cwd, b"user.a", b"cwd", 0).unwrap();
        let mut b = [0u8; 8];
        assert_eq!(p.fgetxattr(cwd, b"user.a", &mut b), Ok(3));
        assert_eq!(&b[..3], b"cwd");
        assert_eq!(get(p, "/d", "user.a").unwrap(), b"cwd");
        assert_eq!(list(p, "/"), Vec::<String>::new());
        assert_eq!(p.flistxattr(cwd, &mut []), Err(Errno::EBADF));
        assert_eq!(p.fremovexattr(cwd, b"user.a"), Err(Errno::EBADF));
        assert_eq!(p.fsetxattr(-1, b"user.a", b"1", 0), Err(Errno::EBADF));
        assert_eq!(p.fgetxattr(-1, b"user.a", &mut b), Err(Errno::EBADF));
    });
}

/// `listxattr` takes at most `XATTR_LIST_MAX` bytes of buffer: a longer list is `E2BIG`
/// however large the caller's buffer, while a size query still gets its length.
#[test]
fn a_list_longer_than_list_max_is_e2big() {
    both(|p, _| {
        p.write_file("/f", b"").unwrap();
        // 257 names of 255 bytes: 65,792 bytes with their NULs.
        for i in 0..257 {
            let mut n = format!("user.{i:03}").into_bytes();
            n.resize(255, b'x');
            p.setxattr("/f", &n, b"", 0).unwrap();
        }
        assert_eq!(p.listxattr("/f", &mut []), Ok(65792));
        assert_eq!(p.listxattr("/f", &mut vec![0; 65535]), Err(Errno::ERANGE));
        for size in [65536, 65792, 70000] {
            assert_eq!(
                p.listxattr("/f", &mut vec![0; size]),
                Err(Errno::E2BIG),
                "{size}"
            );
        }
    });
}
