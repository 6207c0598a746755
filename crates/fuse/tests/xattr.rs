//! Extended attributes through a real FUSE mount, with the system calls (and programs)
//! that use them: `setxattr`/`getxattr`/`listxattr`/`removexattr` and their `l`/`f`
//! variants, size queries and `ERANGE`, `XATTR_CREATE`/`XATTR_REPLACE`, the namespace
//! rules for a caller who is not root (a forked child), and `cp`/`tar` keeping a user
//! attribute. The attributes live in the served `Vfs` (in memory): nothing survives the
//! `Vfs`. Needs root, /dev/fuse and fusermount3; without them each test says why it is
//! skipped.

mod common;

use std::ffi::CStr;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::process::Command;

use common::*;

// Thin wrappers over the system calls: no allocation, so a forked child may use them.

fn ok(r: libc::c_int) -> Result<(), i32> {
    if r == 0 {
        Ok(())
    } else {
        Err(errno())
    }
}

fn len(r: libc::ssize_t) -> Result<usize, i32> {
    if r >= 0 {
        Ok(r as usize)
    } else {
        Err(errno())
    }
}

fn set(p: &CStr, name: &CStr, value: &[u8], flags: i32) -> Result<(), i32> {
    // SAFETY: NUL-terminated path and name; `value` is live for `value.len()` bytes.
    ok(unsafe {
        libc::setxattr(
            p.as_ptr(),
            name.as_ptr(),
            value.as_ptr().cast(),
            value.len(),
            flags,
        )
    })
}

fn lset(p: &CStr, name: &CStr, value: &[u8]) -> Result<(), i32> {
    // SAFETY: as in `set`.
    ok(unsafe {
        libc::lsetxattr(
            p.as_ptr(),
            name.as_ptr(),
            value.as_ptr().cast(),
            value.len(),
            0,
        )
    })
}

/// `getxattr` into `buf` (empty: a size query).
fn get(p: &CStr, name: &CStr, buf: &mut [u8]) -> Result<usize, i32> {
    // SAFETY: NUL-terminated path and name; `buf` is writable for `buf.len()` bytes.
    len(unsafe {
        libc::getxattr(
            p.as_ptr(),
            name.as_ptr(),
            buf.as_mut_ptr().cast(),
            buf.len(),
        )
    })
}

fn lget(p: &CStr, name: &CStr, buf: &mut [u8]) -> Result<usize, i32> {
    // SAFETY: as in `get`.
    len(unsafe {
        libc::lgetxattr(
            p.as_ptr(),
            name.as_ptr(),
            buf.as_mut_ptr().cast(),
            buf.len(),
        )
    })
}

/// `listxattr` into `buf` (empty: a size query).
fn list(p: &CStr, buf: &mut [u8]) -> Result<usize, i32> {
    // SAFETY: NUL-terminated path; `buf` is writable for `buf.len()` bytes.
    len(unsafe { libc::listxattr(p.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) })
}

fn remove(p: &CStr, name: &CStr) -> Result<(), i32> {
    // SAFETY: NUL-terminated path and name.
    ok(unsafe { libc::removexattr(p.as_ptr(), name.as_ptr()) })
}

/// The value of `name` (a size query first, as programs do).
fn value(p: &CStr, name: &CStr) -> Result<Vec<u8>, i32> {
    let mut buf = vec![0; get(p, name, &mut [])?];
    let n = get(p, name, &mut buf)?;
    buf.truncate(n);
    Ok(buf)
}

/// The names `listxattr` reports, sorted.
fn names(p: &CStr) -> Vec<String> {
    let mut buf = vec![0; list(p, &mut []).unwrap()];
    let n = list(p, &mut buf).unwrap();
    assert_eq!(n, buf.len(), "the size query announced the list's length");
    let mut v: Vec<String> = buf[..n]
        .split(|&b| b == 0)
        .filter(|s| !s.is_empty())
        .map(|s| String::from_utf8(s.to_vec()).unwrap())
        .collect();
    assert!(n == 0 || buf[n - 1] == 0, "NUL-terminated");
    v.sort();
    v
}

fuse_test! {
    fn set_get_list_and_remove_through_the_kernel() {
        require_fuse!();
        let (dir, server) = mount(2);
        let root = dir.path();
        std::fs::write(root.join("f"), b"data").unwrap();
        std::fs::create_dir(root.join("d")).unwrap();
        let f = cpath(&root.join("f"));
        let d = cpath(&root.join("d"));

        assert_eq!(names(&f), Vec::<String>::new());
        assert_eq!(get(&f, c"user.a", &mut []), Err(libc::ENODATA));
        // An error answer must not turn xattrs off in the kernel (ENOSYS would).
        set(&f, c"user.a", b"hello", 0).unwrap();
        assert_eq!(get(&f, c"user.a", &mut []), Ok(5), "size query");
        let mut small = [0u8; 4];
        assert_eq!(get(&f, c"user.a", &mut small), Err(libc::ERANGE));
        assert_eq!(value(&f, c"user.a").unwrap(), b"hello");
        let mut big = [0u8; 100];
        assert_eq!(get(&f, c"user.a", &mut big), Ok(5), "a larger buffer");
        assert_eq!(&big[..5], b"hello");

        // XATTR_CREATE and XATTR_REPLACE.
        assert_eq!(
            set(&f, c"user.a", b"x", libc::XATTR_CREATE),
            Err(libc::EEXIST)
        );
        assert_eq!(
            set(&f, c"user.b", b"x", libc::XATTR_REPLACE),
            Err(libc::ENODATA)
        );
        set(&f, c"user.a", b"replaced", libc::XATTR_REPLACE).unwrap();
        set(&f, c"user.b", b"", libc::XATTR_CREATE).unwrap();
        assert_eq!(value(&f, c"user.a").unwrap(), b"replaced");
        assert_eq!(value(&f, c"user.b").unwrap(), b"", "an empty value");
        assert_eq!(
            set(
                &f,
                c"user.c",
                b"x",
                libc::XATTR_CREATE | libc::XATTR_REPLACE | 4
            ),
            Err(libc::EINVAL),
            "unknown flags"
        );

        // Listing: size query, ERANGE, the names.
        assert_eq!(list(&f, &mut []), Ok(14)); // "user.a\0user.b\0"
        let mut small = [0u8; 13];
        assert_eq!(list(&f, &mut small), Err(libc::ERANGE));
        assert_eq!(names(&f), ["user.a", "user.b"]);

        // Remove.
        remove(&f, c"user.b").unwrap();
        assert_eq!(remove(&f, c"user.b"), Err(libc::ENODATA));
        assert_eq!(get(&f, c"user.b", &mut []), Err(libc::ENODATA));
        assert_eq!(names(&f), ["user.a"]);

        // No POSIX ACLs (a valid one: the kernel parses the value first, EINVAL otherwise),
        // as a file system without ACL support; no unknown namespace.
        let mut acl = 2u32.to_le_bytes().to_vec(); // POSIX_ACL_XATTR_VERSION
        for (tag, perm) in [(0x01u16, 6u16), (0x04, 4), (0x20, 4)] {
            // ACL_USER_OBJ rw-, ACL_GROUP_OBJ r--, ACL_OTHER r--, id unused
            acl.extend(tag.to_le_bytes());
            acl.extend(perm.to_le_bytes());
            acl.extend(u32::MAX.to_le_bytes());
        }
        assert_eq!(
            set(&f, c"system.posix_acl_access", &acl, 0),
            Err(libc::EOPNOTSUPP)
        );
        assert_eq!(set(&f, c"foo.bar", b"x", 0), Err(libc::EOPNOTSUPP));
        assert_eq!(get(&f, c"foo.bar", &mut []), Err(libc::EOPNOTSUPP));

        // root may use trusted.* and security.*.
        set(&f, c"trusted.t", b"T", 0).unwrap();
        set(&f, c"security.s", b"S", 0).unwrap();
        assert_eq!(value(&f, c"trusted.t").unwrap(), b"T");
        assert_eq!(names(&f), ["security.s", "trusted.t", "user.a"]);

        // Directories, the f-variants on an open fd, and the largest value (64 KiB: the
        // request is larger than the kernel's 4 KiB minimum read buffer).
        set(&d, c"user.dir", b"on a directory", 0).unwrap();
        assert_eq!(value(&d, c"user.dir").unwrap(), b"on a directory");
        let file = std::fs::File::open(root.join("f")).unwrap();
        let fd = std::os::fd::AsRawFd::as_raw_fd(&file);
        let big: Vec<u8> = (0..65536u32).map(|i| (i * 7 % 251) as u8).collect();
        // SAFETY: an open fd, a NUL-terminated name and a live buffer of `big.len()` bytes.
        ok(unsafe { libc::fsetxattr(fd, c"user.big".as_ptr(), big.as_ptr().cast(), big.len(), 0) })
            .unwrap();
        let mut back = vec![0u8; 65536];
        // SAFETY: as above, `back` writable for its length.
        let n = unsafe {
            libc::fgetxattr(
                fd,
                c"user.big".as_ptr(),
                back.as_mut_ptr().cast(),
                back.len(),
            )
        };
        assert_eq!(len(n), Ok(65536));
        assert!(back == big, "the 64 KiB value came back intact");
        let too_big = vec![0u8; 65537];
        assert_eq!(set(&f, c"user.huge", &too_big, 0), Err(libc::E2BIG));
        // SAFETY: an open fd and a NUL-terminated name.
        ok(unsafe { libc::fremovexattr(fd, c"user.big".as_ptr()) }).unwrap();
        drop(file);

        // Setting changes ctime, not mtime.
        let before = std::fs::metadata(root.join("f")).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(20));
        set(&f, c"user.a", b"again", 0).unwrap();
        let after = std::fs::metadata(root.join("f")).unwrap();
        assert!(
            (after.ctime(), after.ctime_nsec()) > (before.ctime(), before.ctime_nsec()),
            "ctime"
        );
        assert_eq!(
            (after.mtime(), after.mtime_nsec()),
            (before.mtime(), before.mtime_nsec()),
            "mtime"
        );

        // The attributes are the VFS's: seen from a Process on the served Vfs, and what it
        // sets is seen through the mount (the kernel caches no xattr).
        let p = scalevfs::Process::new(server.vfs(), scalevfs::Credentials::root());
        let mut buf = [0u8; 16];
        let n = p.getxattr(b"/f", b"user.a", &mut buf).unwrap();
        assert_eq!(&buf[..n], b"again");
        p.setxattr(b"/d", b"user.behind", b"the kernel's back", 0)
            .unwrap();
        assert_eq!(value(&d, c"user.behind").unwrap(), b"the kernel's back");
        // Writes (each makes the kernel ask for security.capability) leave them alone.
        std::fs::write(root.join("f"), b"more data").unwrap();
        assert_eq!(value(&f, c"user.a").unwrap(), b"again");
        server.unmount().unwrap();
    }
}

fuse_test! {
    /// A caller who is not root (a forked child, uid 1000, in group 4242): `trusted.*` is
    /// hidden from its listings (size query included) and refused, `security.*` readable but
    /// not writable, `user.*` follows the file's permission bits (supplementary groups
    /// included) and the sticky-directory rule, and is refused on a symlink (`lsetxattr`).
    fn names_and_permissions_for_a_caller_who_is_not_root() {
        require_fuse!();
        let (_dir, server, root) = mount_for_everyone();
        let path = |n: &str| cpath(&root.join(n));
        let (f, mine, grp, ro, link, sticky) = (
            path("f"),
            path("mine"),
            path("grp"),
            path("ro"),
            path("link"),
            path("sticky"),
        );
        for (name, mode, gid) in [("f", 0o666, 0), ("grp", 0o660, 4242), ("ro", 0o644, 0)] {
            std::fs::write(root.join(name), b"x").unwrap();
            std::fs::set_permissions(root.join(name), std::fs::Permissions::from_mode(mode)).unwrap();
            std::os::unix::fs::chown(root.join(name), Some(0), Some(gid)).unwrap();
        }
        std::fs::write(root.join("mine"), b"x").unwrap();
        std::os::unix::fs::chown(root.join("mine"), Some(1000), Some(1000)).unwrap();
        std::os::unix::fs::symlink("mine", root.join("link")).unwrap();
        std::fs::create_dir(root.join("sticky")).unwrap();
        std::fs::set_permissions(root.join("sticky"), std::fs::Permissions::from_mode(0o1777)).unwrap();
        set(&f, c"user.u", b"U", 0).unwrap();
        set(&f, c"trusted.t", b"T", 0).unwrap();
        set(&f, c"security.s", b"S", 0).unwrap();
        set(&ro, c"user.r", b"R", 0).unwrap();
        assert_eq!(names(&f), ["security.s", "trusted.t", "user.u"]);
        // root cannot put user.* on a symlink either (EPERM), nor read one (ENODATA).
        assert_eq!(lset(&link, c"user.x", b"x"), Err(libc::EPERM));
        assert_eq!(lget(&link, c"user.x", &mut []), Err(libc::ENODATA));

        let pid = fork_child(|| {
            let groups = [4242 as libc::gid_t];
            // SAFETY: raw syscalls in the child: uid 1000, gid 1000, groups {4242}.
            unsafe {
                if libc::setgroups(1, groups.as_ptr()) != 0
                    || libc::setgid(1000) != 0
                    || libc::setuid(1000) != 0
                {
                    return 1;
                }
            }
            let mut buf = [0u8; 64];
            // The listing without trusted.t, in either order.
            let want: [&[u8]; 2] = [b"security.s\0user.u\0", b"user.u\0security.s\0"];
            if list(&f, &mut []) != Ok(want[0].len()) {
                return 2;
            }
            if list(&f, &mut buf) != Ok(want[0].len()) || !want.contains(&&buf[..want[0].len()]) {
                return 3;
            }
            if get(&f, c"trusted.t", &mut buf) != Err(libc::ENODATA) {
                return 4;
            }
            if set(&f, c"trusted.x", b"x", 0) != Err(libc::EPERM) {
                return 5;
            }
            if remove(&f, c"trusted.t") != Err(libc::EPERM) {
                return 6;
            }
            // security.*: read yes, write no.
            if get(&f, c"security.s", &mut buf) != Ok(1) || buf[0] != b'S' {
                return 7;
            }
            if set(&f, c"security.x", b"x", 0) != Err(libc::EPERM) {
                return 8;
            }
            if remove(&f, c"security.s") != Err(libc::EPERM) {
                return 9;
            }
            // user.*: the file's permission bits.
            if get(&f, c"user.u", &mut buf) != Ok(1) || set(&f, c"user.c", b"child", 0).is_err() {
                return 10;
            }
            if get(&ro, c"user.r", &mut buf) != Ok(1) {
                return 11;
            }
            if set(&ro, c"user.x", b"x", 0) != Err(libc::EACCES) {
                return 12;
            }
            if remove(&ro, c"user.r") != Err(libc::EACCES) {
                return 13;
            }
            // Group 4242 is a supplementary group: rw on grp (0660 root:4242).
            if set(&grp, c"user.g", b"group", 0).is_err() || get(&grp, c"user.g", &mut buf) != Ok(5) {
                return 14;
            }
            // A symlink (the child's own): EPERM to write, ENODATA to read.
            if lset(&link, c"user.x", b"x") != Err(libc::EPERM) {
                return 15;
            }
            if lget(&link, c"user.x", &mut buf) != Err(libc::ENODATA) {
                return 16;
            }
            // A sticky directory of root's: not its owner.
            if set(&sticky, c"user.x", b"x", 0) != Err(libc::EPERM) {
                return 17;
            }
            // Its own file: anything in user.*.
            if set(&mine, c"user.m", b"m", 0).is_err() || remove(&mine, c"user.m").is_err() {
                return 18;
            }
            0
        });
        assert_eq!(wait_child(pid), 0, "the step of the child that failed");
        assert_eq!(value(&f, c"user.c").unwrap(), b"child");
        assert_eq!(value(&grp, c"user.g").unwrap(), b"group");
        assert_eq!(names(&f), ["security.s", "trusted.t", "user.c", "user.u"]);
        server.unmount().unwrap();
    }
}

fuse_test! {
    /// Unmodified programs keep a user attribute through the mount: `cp --preserve=xattr`
    /// within the mount and out to host tmpfs and back, and `tar --xattrs`.
    fn cp_and_tar_keep_user_attributes() {
        require_fuse!();
        let works = |prog: &str, arg: &str| {
            Command::new(prog)
                .arg(arg)
                .output()
                .is_ok_and(|o| o.status.success())
        };
        let have_cp = works("cp", "--version");
        let have_tar = Command::new("tar").arg("--help").output().is_ok_and(|o| {
            o.status.success() && String::from_utf8_lossy(&o.stdout).contains("--xattrs")
        });
        if !have_cp && !have_tar {
            eprintln!("SKIPPED: needs GNU cp or GNU tar with --xattrs");
            return;
        }
        let (dir, server) = mount(2);
        let root = dir.path();
        std::fs::write(root.join("src"), b"contents").unwrap();
        set(&cpath(&root.join("src")), c"user.tag", b"kept", 0).unwrap();
        let run = |cmd: &str| {
            let out = Command::new("sh").arg("-c").arg(cmd).output().unwrap();
            assert!(
                out.status.success(),
                "{cmd}: {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        };
        let q = |p: &Path| format!("'{}'", p.display());
        let tag = |p: &Path| value(&cpath(p), c"user.tag");
        if have_cp {
            run(&format!(
                "cp --preserve=xattr {} {}",
                q(&root.join("src")),
                q(&root.join("copy"))
            ));
            assert_eq!(
                tag(&root.join("copy")),
                Ok(b"kept".to_vec()),
                "cp in the mount"
            );
            // Out to host tmpfs (user xattrs since Linux 6.6) and back, where it can be kept.
            let host = tempfile::tempdir_in("/dev/shm").unwrap();
            let out = host.path().join("out");
            run(&format!(
                "cp --preserve=xattr {} {}",
                q(&root.join("src")),
                q(&out)
            ));
            match tag(&out) {
                Ok(v) => {
                    assert_eq!(v, b"kept");
                    run(&format!(
                        "cp --preserve=xattr {} {}",
                        q(&out),
                        q(&root.join("back"))
                    ));
                    assert_eq!(tag(&root.join("back")), Ok(b"kept".to_vec()), "cp back in");
                }
                Err(e) => {
                    eprintln!("host /dev/shm keeps no user xattr (errno {e}): round trip skipped")
                }
            }
        } else {
            eprintln!("SKIPPED the cp half: no GNU cp");
        }
        if have_tar {
            std::fs::create_dir(root.join("x")).unwrap();
            let archive = tempfile::NamedTempFile::new().unwrap();
            run(&format!(
                "tar --xattrs -C {} -cf {} src && tar --xattrs --xattrs-include='user.*' -C {} -xf {}",
                q(root),
                q(archive.path()),
                q(&root.join("x")),
                q(archive.path())
            ));
            assert_eq!(tag(&root.join("x/src")), Ok(b"kept".to_vec()), "tar");
            assert_eq!(std::fs::read(root.join("x/src")).unwrap(), b"contents");
        } else {
            eprintln!("SKIPPED the tar half: no GNU tar with --xattrs");
        }
        server.unmount().unwrap();
    }
}

fuse_test! {
    /// Mounted with extended attributes off (`scalevfs mount --no-xattr`), every attribute
    /// call fails with EOPNOTSUPP from the kernel itself, and files still work.
    fn switched_off_they_are_eopnotsupp() {
        require_fuse!();
        let dir = tempfile::tempdir().unwrap();
        let opts = scalevfs_fuse::MountOptions {
            xattrs: false,
            ..options(2)
        };
        let server = mount_with(dir.path(), &opts).unwrap();
        let f = dir.path().join("f");
        std::fs::write(&f, b"data").unwrap();
        let p = cpath(&f);
        let mut buf = [0u8; 64];
        assert_eq!(set(&p, c"user.a", b"1", 0), Err(libc::EOPNOTSUPP));
        assert_eq!(get(&p, c"user.a", &mut buf), Err(libc::EOPNOTSUPP));
        assert_eq!(std::fs::read(&f).unwrap(), b"data");
        std::fs::write(&f, b"more").unwrap();
        drop(server);
    }
}
