//! A mount's `--size` limit against a shared writable mapping that grows past it.

mod common;
use common::*;

use std::os::fd::AsRawFd;

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
