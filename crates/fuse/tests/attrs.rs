//! Attribute changes through the mount behave as on Linux's tmpfs.

mod common;
use common::*;

use std::os::unix::fs::MetadataExt;
use std::path::Path;

fuse_test! {
    /// `chown(f, -1, -1)` changes nothing but ctime, as on tmpfs (the kernel sends the server
    /// a SETATTR with nothing to set).
    fn chown_to_the_same_owner_updates_ctime() {
        require_fuse!();
        let (dir, server) = mount(2);
        let f = dir.path().join("f");
        std::fs::write(&f, b"x").unwrap();
        let before = std::fs::metadata(&f).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(20));
        // SAFETY: a NUL-terminated path; -1 ids mean "unchanged".
        let r = unsafe { libc::chown(cpath(&f).as_ptr(), u32::MAX, u32::MAX) };
        assert_eq!(r, 0, "chown: errno {}", errno());
        // The kernel takes the attributes the server answers the SETATTR with.
        let after = std::fs::metadata(&f).unwrap();
        assert_eq!((after.uid(), after.gid()), (before.uid(), before.gid()));
        assert!(
            (after.ctime(), after.ctime_nsec()) > (before.ctime(), before.ctime_nsec()),
            "ctime moved: {:?} -> {:?}",
            (before.ctime(), before.ctime_nsec()),
            (after.ctime(), after.ctime_nsec())
        );
        drop(server);
    }
}

fuse_test! {
    /// Times before 1970 survive the mount as on host tmpfs: FUSE attribute times are a u64
    /// that the kernel reads as a signed time64, so a negative time must be sent as its two's
    /// complement, not clamped to 0.
    fn times_before_1970_read_back_as_on_host_tmpfs() {
        require_fuse!();
        let (dir, server) = mount(2);
        let host = tempfile::tempdir_in("/dev/shm").unwrap();
        let times: [(i64, i64); 4] = [
            (-1, 0),
            (-1, 999_999_999),
            (-2_208_988_800, 123_456_789), // 1900-01-01
            (-(1 << 40), 7),
        ];
        // (atime, mtime) through `stat`.
        let stat = |p: &Path| {
            let m = std::fs::symlink_metadata(p).unwrap();
            (m.atime(), m.atime_nsec(), m.mtime(), m.mtime_nsec())
        };
        for (i, &(sec, nsec)) in times.iter().enumerate() {
            let mut got = Vec::new();
            for base in [dir.path(), host.path()] {
                let p = base.join(format!("t{i}"));
                std::fs::write(&p, b"x").unwrap();
                let ts = [
                    libc::timespec {
                        tv_sec: sec,
                        tv_nsec: nsec,
                    },
                    libc::timespec {
                        tv_sec: sec / 2,
                        tv_nsec: nsec / 3,
                    },
                ];
                let c = cpath(&p);
                // SAFETY: a NUL-terminated path and two live timespecs.
                let r = unsafe { libc::utimensat(libc::AT_FDCWD, c.as_ptr(), ts.as_ptr(), 0) };
                assert_eq!(r, 0, "utimensat {}: errno {}", p.display(), errno());
                got.push(stat(&p));
            }
            assert_eq!(got[0], got[1], "FUSE mount vs host tmpfs for {sec}.{nsec}");
            assert_eq!(got[0], (sec, nsec, sec / 2, nsec / 3));
        }
        // Again after the kernel dropped its cached attributes (fresh GETATTR/LOOKUP), and
        // in the served VFS itself.
        let _ = std::fs::write("/proc/sys/vm/drop_caches", b"2");
        std::thread::sleep(std::time::Duration::from_millis(1100)); // the attribute TTL
        let p = scalevfs::Process::new(server.vfs(), scalevfs::Credentials::root());
        for (i, &(sec, nsec)) in times.iter().enumerate() {
            let want = (sec, nsec, sec / 2, nsec / 3);
            assert_eq!(stat(&dir.path().join(format!("t{i}"))), want);
            let st = p.stat(format!("/t{i}")).unwrap();
            assert_eq!(
                (st.atime.sec, st.atime.nsec, st.mtime.sec, st.mtime.nsec),
                want
            );
        }
        drop(p);
        wait_for(&server, "every file released", |s| s.open_files == 0);
        server.unmount().unwrap();
    }
}
