//! Attribute changes through the mount behave as on Linux's tmpfs.

mod common;
use common::*;

use std::os::unix::fs::MetadataExt;

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
