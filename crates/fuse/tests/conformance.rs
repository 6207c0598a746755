//! The conformance harness's scripted cases against a FUSE mount of scalevfs and against
//! host tmpfs (/dev/shm): every difference must be listed in `FUSE_DIFFERENCES` with its
//! reason (the same list is in the README, "FUSE mount: differences from host tmpfs").
//! Needs root, /dev/fuse and fusermount3.

mod common;

use scalevfs_conformance::{cases, HostBackend, Report};

/// Cases that differ through FUSE, each with the reason (README: "FUSE mount: differences
/// from host tmpfs").
const FUSE_DIFFERENCES: &[(&str, &str)] = &[
    ("xattr/list-larger-than-64k", LIST_MAX),
    ("rename/whiteout/open", NODEV),
    ("chattr/immutable-file", KERNEL_IMMUTABLE),
    ("chattr/append-file", KERNEL_APPEND),
    ("chattr/noatime", KERNEL_ATIME),
    ("getdents/seek-to-positions", HASHED_POSITIONS),
    ("times/fifo-write", FIFO_TIMES),
    ("times/fifo-read", FIFO_TIMES),
    ("times/fifo-read-write-end-rdwr", FIFO_TIMES),
];

/// Why a FIFO's times stay after reads and writes.
const FIFO_TIMES: &str = "the kernel runs a FIFO on a FUSE mount itself, so its reads \
    and writes never reach the server, and it leaves the times of a FUSE inode to the \
    server (S_NOATIME, and S_NOCMTIME without writeback caching): atime, mtime and ctime \
    stay where tmpfs moves them. The library and its C API move them as tmpfs does";

/// Why seeking a directory to raw numbers differs (the conformance crate's known
/// difference: the server runs the scalable design).
const HASHED_POSITIONS: &str = "a hashed tmpfs directory numbers positions by (bucket, \
    slot), stable under concurrent changes but not Linux's per-directory counter: positions \
    the directory returned resume as on tmpfs, a seek to a number it never returned \
    resumes elsewhere";

/// Why `access(W_OK)` on an immutable file differs (everything else the server checks).
const KERNEL_IMMUTABLE: &str = "FUSE has no attribute that tells the kernel an inode is \
    immutable (fuse_attr.flags carries only SUBMOUNT and DAX), and with default_permissions \
    the kernel answers access(2) itself (generic_permission, no FUSE_ACCESS): W_OK is ok \
    where tmpfs says EPERM. Opens, truncation, setattr, link, unlink and rename reach the \
    server, which refuses them as tmpfs does";

/// Why `F_SETFL` changing `O_APPEND` on an append-only file differs.
const KERNEL_APPEND: &str = "FUSE has no attribute that tells the kernel an inode is \
    append-only, and fcntl(F_SETFL) is the kernel's alone (no FUSE request), so its \
    IS_APPEND check in setfl never fires: changing O_APPEND is 0 where tmpfs says EPERM. \
    Opens, truncation (setattr, with ftruncate's rule when it comes with a file), setattr, \
    link, unlink and rename reach the server, which refuses them as tmpfs does";

/// Why the atime after a read differs.
const KERNEL_ATIME: &str = "the FUSE kernel marks every inode S_NOATIME and leaves atime to \
    the server, which sees only the reads the page cache misses: the pread after the flag \
    is cleared is served from the cache the first read filled, so atime stays where tmpfs \
    moves it (relatime). The noatime read itself agrees";

/// Why opening a device node differs.
const NODEV: &str = "fusermount3 mounts with nodev, where opening a device node (a \
    whiteout is one) is EACCES; on tmpfs root gets ENXIO (no driver for 0/0)";

/// Why a size query of a list longer than 64 KiB differs.
const LIST_MAX: &str = "the kernel's fuse_listxattr caps the size a server reports for a \
    size-0 query at XATTR_LIST_MAX (65536); tmpfs reports the whole length (65792). Reading \
    the list agrees (E2BIG in both)";

fuse_test! {
    fn fuse_mount_agrees_with_host_tmpfs() {
        require_fuse!();
        // The host side drops to other uids in permission cases: allow_other.
        let (dir, server, _root) = common::mount_for_everyone();
        let host = HostBackend::new().expect("host tmpfs backend");
        let fuse = HostBackend::in_dir(dir.path()).expect("backend in the FUSE mount");
        let mut all = cases::all();
        if !serves_xattrs(dir.path()) {
            // A server without xattrs: the kernel answers EOPNOTSUPP to every call, so the
            // xattr family would only measure that. It runs once the server serves them.
            eprintln!("NOTE: the FUSE server does not serve xattrs; the xattr/ cases are not run");
            all.retain(|s| s.category() != "xattr");
        }
        let report = Report::run(&host, &fuse, &all);
        println!("{}", report.summary(400));
        let differ: Vec<&str> = report
            .cases
            .iter()
            .filter(|c| !c.agrees())
            .map(|c| c.script.name.as_str())
            .collect();
        println!("DIFFERING: {differ:?}");
        let unexpected: Vec<&&str> = differ
            .iter()
            .filter(|n| !FUSE_DIFFERENCES.iter().any(|(k, _)| k == *n))
            .collect();
        let stale: Vec<&str> = FUSE_DIFFERENCES
            .iter()
            .map(|(k, _)| *k)
            .filter(|k| !differ.contains(k))
            .collect();
        drop(fuse);
        server.unmount().unwrap();
        assert!(
            unexpected.is_empty(),
            "unexplained differences: {unexpected:?}"
        );
        assert!(stale.is_empty(), "listed but agreeing now: {stale:?}");
    }
}

/// Whether the mount serves extended attributes (without them, FUSE's kernel side answers
/// `EOPNOTSUPP`).
fn serves_xattrs(dir: &std::path::Path) -> bool {
    let probe = dir.join("xattr-probe");
    std::fs::write(&probe, b"").unwrap();
    let p = common::cpath(&probe);
    // SAFETY: `p` and the name are NUL-terminated; the value is 1 readable byte.
    let r = unsafe {
        libc::setxattr(
            p.as_ptr(),
            c"user.probe".as_ptr(),
            c"1".as_ptr().cast(),
            1,
            0,
        )
    };
    let unsupported = r != 0 && common::errno() == libc::EOPNOTSUPP;
    std::fs::remove_file(&probe).unwrap();
    !unsupported
}
