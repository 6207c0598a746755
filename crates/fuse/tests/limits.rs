//! A mount's `--size` limit against a shared writable mapping that grows past it.

mod common;
use common::*;

use std::fs::File;
use std::io::Write;
use std::os::fd::AsRawFd;
use std::path::Path;

fuse_test! {
    /// On tmpfs the store that crosses the limit raises SIGBUS. Through FUSE the store lands
    /// in the kernel's page cache; the server answers the write-back with `ENOSPC`, `msync`
    /// reports it, and what the server accepted (up to the limit) is in the file. Nothing the
    /// server acknowledged is lost; the pages it refused are the kernel's to drop (listed in the
    /// README's FUSE differences). The kernel sends write-back requests (up to 128 KiB each) to
    /// the server's workers in no fixed order, so the accepted pages need not be a prefix of
    /// the file: the test counts them wherever they are.
    fn mapping_past_the_size_limit_reports_enospc_and_keeps_what_fitted() {
        require_fuse!();
        let dir = tempfile::tempdir().unwrap();
        let limit = 1u64 << 20;
        let opts = scalevfs_fuse::MountOptions {
            size_limit: Some(limit),
            ..options(2)
        };
        let server = mount_with(dir.path(), &opts).expect("mount");
        let path = dir.path().join("mapped");
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .unwrap();
        let len = 2 * limit as usize;
        f.set_len(len as u64).unwrap();
        // SAFETY: a fresh shared mapping of `len` bytes of our own file; unmapped below.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                f.as_raw_fd(),
                0,
            )
        };
        assert_ne!(p, libc::MAP_FAILED);
        // SAFETY: `p` maps `len` writable bytes.
        unsafe { std::ptr::write_bytes(p.cast::<u8>(), 0x5a, len) };
        // SAFETY: `p`/`len` are the mapping made above.
        let r = unsafe { libc::msync(p, len, libc::MS_SYNC) };
        let err = errno();
        // SAFETY: as above; the mapping is not used after this.
        unsafe { libc::munmap(p, len) };
        assert_eq!(
            (r, err),
            (-1, libc::ENOSPC),
            "msync reports the refused write-back"
        );
        drop(f);
        let data = std::fs::read(&path).unwrap();
        assert_eq!(data.len(), len, "the size stays");
        assert!(
            data.iter().all(|&b| b == 0x5a || b == 0),
            "every byte is either what was stored or a refused page's zeroes"
        );
        let written = data.iter().filter(|&&b| b == 0x5a).count();
        assert_eq!(written % 4096, 0, "whole pages are kept: {written}");
        assert!(
            written as u64 >= limit - 128 * 1024,
            "what the server accepted is kept: {written} bytes"
        );
        assert!(written as u64 <= limit, "no more than the limit: {written}");
        drop(server);
    }
}

/// Waits ([`PATIENCE`] at most) until `statfs` of `p` satisfies `cond`.
fn wait_for_statfs(p: &Path, what: &str, cond: impl Fn(&libc::statfs) -> bool) {
    let deadline = std::time::Instant::now() + PATIENCE;
    loop {
        let s = statfs_of(p);
        if cond(&s) {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "timed out waiting for {what}: f_bfree {} f_ffree {}",
            s.f_bfree,
            s.f_ffree
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

/// `statfs(2)` on the mount.
fn statfs_of(p: &Path) -> libc::statfs {
    let c = cpath(p);
    // SAFETY: zeroed statfs is valid; the path is NUL-terminated.
    let mut s: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    assert_eq!(unsafe { libc::statfs(c.as_ptr(), &mut s) }, 0);
    s
}

fuse_test! {
    /// `MountOptions::size_limit` and `inode_limit` (`--size`, `--inodes`) as a program on
    /// the mount sees them: `statfs` reports them, and writes and creations beyond them fail
    /// with `ENOSPC`, as on a tmpfs mounted with `size=` and `nr_inodes=`.
    fn size_and_inode_limits_are_seen_through_the_mount() {
        require_fuse!();
        let dir = tempfile::tempdir().unwrap();
        let opts = scalevfs_fuse::MountOptions {
            size_limit: Some(1 << 20),
            inode_limit: Some(16),
            ..options(2)
        };
        let server = mount_with(dir.path(), &opts).unwrap();
        let root = dir.path().to_owned();
        let s = statfs_of(&root);
        assert_eq!((s.f_bsize, s.f_blocks, s.f_bfree), (4096, 256, 256));
        assert_eq!((s.f_files, s.f_ffree), (16, 15), "the root is one inode");
        // Data: 2 MiB do not fit in 1 MiB.
        let mut f = File::create(root.join("big")).unwrap();
        let e = f.write_all(&vec![7u8; 2 << 20]).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::ENOSPC), "{e}");
        drop(f);
        let len = std::fs::metadata(root.join("big")).unwrap().len();
        assert!(len > 0 && len <= 1 << 20, "{len}");
        assert_eq!(statfs_of(&root).f_bfree, 256 - len.div_ceil(4096));
        // The unlinked file's pages go when its last reference does: the kernel's FORGET
        // (and RELEASE, after close) arrive in the background, as an open unlinked file keeps
        // its pages on tmpfs.
        std::fs::remove_file(root.join("big")).unwrap();
        wait_for_statfs(&root, "the unlinked file's pages freed", |s| {
            s.f_bfree == 256
        });
        // Inodes: 15 more, then ENOSPC for files and directories alike.
        for i in 0..15 {
            std::fs::write(root.join(format!("f{i}")), b"x").unwrap();
        }
        assert_eq!(statfs_of(&root).f_ffree, 0);
        assert_eq!(
            errno_of(std::fs::write(root.join("one-more"), b"x")),
            libc::ENOSPC
        );
        assert_eq!(
            errno_of(std::fs::create_dir(root.join("dir"))),
            libc::ENOSPC
        );
        // As above: f0's inode is freed once the kernel has released and forgotten it.
        std::fs::remove_file(root.join("f0")).unwrap();
        wait_for_statfs(&root, "f0's inode freed", |s| s.f_ffree == 1);
        std::fs::create_dir(root.join("dir")).unwrap();
        wait_for(&server, "every file released", |s| s.open_files == 0);
        server.unmount().unwrap();
    }
}
