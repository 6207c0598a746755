//! Offsets, lengths and iovec counts at the ends of their ranges.

use super::*;

// ------------------------------------------------------------------ offsets and sizes

/// lseek, pread64/pwrite64, ftruncate/truncate and fallocate with offsets and lengths at
/// the ends of `i64`, on a regular file (and lseek on every kind of descriptor).
#[test]
fn offsets_and_lengths() {
    let mut x = X::new();
    let fds = x.fds();
    let whences = [
        libc::SEEK_SET,
        libc::SEEK_CUR,
        libc::SEEK_END,
        libc::SEEK_DATA,
        libc::SEEK_HOLE,
        5,
        -1,
        i32::MAX,
    ];
    for fd in &fds {
        for &off in &OFFSETS {
            for whence in whences {
                // SAFETY: plain syscall.
                let h = unsafe { libc::syscall(libc::SYS_lseek, fd.h, off, whence) };
                let o = ours(|| x.o().lseek(fd.o, off, whence), |k| k.to_string());
                x.check(
                    || format!("lseek({}, {off}, {whence})", fd.name),
                    host(h, num),
                    o,
                );
            }
        }
    }
    let f = x.open_both("g", "g", libc::O_CREAT | libc::O_RDWR, 0o644);
    for &off in &OFFSETS {
        for len in [0usize, 1, 2, 10] {
            let data = vec![b'p'; len];
            // SAFETY: valid buffer.
            let h = unsafe { libc::syscall(libc::SYS_pwrite64, f.h, data.as_ptr(), len, off) };
            let o = ours(|| x.o().pwrite64(f.o, &data, off), |k| k.to_string());
            x.check(|| format!("pwrite64({len}, {off})"), host(h, num), o);
            let mut hb = vec![0u8; len];
            let mut ob = vec![0u8; len];
            // SAFETY: valid buffer.
            let h = unsafe { libc::syscall(libc::SYS_pread64, f.h, hb.as_mut_ptr(), len, off) };
            let h = host(h, |k| format!("{:?}", &hb[..k as usize]));
            let o = ours_read(&mut ob, |b| x.o().pread64(f.o, b, off));
            x.check(|| format!("pread64({len}, {off})"), h, o);
            stat_both(&mut x, "g", &format!("after pwrite64({len}, {off})"));
        }
        // write/read at a position set by lseek (past i64::MAX - len: EINVAL or EFBIG).
        for whence in [libc::SEEK_SET, libc::SEEK_END] {
            // SAFETY: plain syscall.
            let h = unsafe { libc::syscall(libc::SYS_lseek, f.h, off, whence) };
            let o = ours(|| x.o().lseek(f.o, off, whence), |k| k.to_string());
            x.check(|| format!("lseek(g, {off}, {whence})"), host(h, num), o);
            // SAFETY: valid buffer.
            let h = unsafe { libc::syscall(libc::SYS_write, f.h, b"ww".as_ptr(), 2) };
            let o = ours(|| x.o().write(f.o, b"ww"), |k| k.to_string());
            x.check(
                || format!("write(2) at lseek({off}, {whence})"),
                host(h, num),
                o,
            );
            let mut hb = [0u8; 3];
            let mut ob = [0u8; 3];
            // SAFETY: valid buffer.
            let h = unsafe { libc::syscall(libc::SYS_read, f.h, hb.as_mut_ptr(), 3) };
            let h = host(h, |k| format!("{:?}", &hb[..k as usize]));
            let o = ours_read(&mut ob, |b| x.o().read(f.o, b));
            x.check(|| format!("read(3) after lseek({off}, {whence})"), h, o);
        }
        // SAFETY: plain syscall.
        let h = unsafe { libc::syscall(libc::SYS_ftruncate, f.h, off) };
        let o = ours(|| x.o().ftruncate(f.o, off), |_| "ok".into());
        x.check(|| format!("ftruncate({off})"), host(h, unit), o);
        stat_both(&mut x, "g", &format!("after ftruncate({off})"));
        let c = cs(b"g");
        // SAFETY: valid C string.
        let h = unsafe { libc::syscall(libc::SYS_truncate, c.as_ptr(), off) };
        let o = ours(|| x.o().truncate("g", off), |_| "ok".into());
        x.check(|| format!("truncate({off})"), host(h, unit), o);
        stat_both(&mut x, "g", &format!("after truncate({off})"));
    }
    // Back to a small file for fallocate.
    x.o().ftruncate(f.o, 100).unwrap();
    // SAFETY: plain syscall.
    assert_eq!(unsafe { libc::ftruncate(f.h, 100) }, 0);
    let modes = [
        0,
        libc::FALLOC_FL_KEEP_SIZE,
        libc::FALLOC_FL_PUNCH_HOLE,
        libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
        libc::FALLOC_FL_COLLAPSE_RANGE,
        libc::FALLOC_FL_COLLAPSE_RANGE | libc::FALLOC_FL_KEEP_SIZE,
        libc::FALLOC_FL_ZERO_RANGE | libc::FALLOC_FL_PUNCH_HOLE,
        libc::FALLOC_FL_INSERT_RANGE,
        libc::FALLOC_FL_UNSHARE_RANGE,
        0x80,
        0x80 | libc::FALLOC_FL_KEEP_SIZE,
        libc::FALLOC_FL_INSERT_RANGE | libc::FALLOC_FL_KEEP_SIZE,
        0x100,
        -1,
        i32::MIN,
    ];
    let lens = [i64::MIN, -1, 0, 1, 1 << 50, i64::MAX - 1, i64::MAX];
    for mode in modes {
        for &off in &OFFSETS {
            for &len in &lens {
                // SAFETY: plain syscall.
                let h = unsafe { libc::syscall(libc::SYS_fallocate, f.h, mode, off, len) };
                let o = ours(|| x.o().fallocate(f.o, mode, off, len), |_| "ok".into());
                x.check(
                    || format!("fallocate({mode:#x}, {off}, {len})"),
                    host(h, unit),
                    o,
                );
            }
        }
        stat_both(&mut x, "g", &format!("after fallocate mode {mode:#x}"));
    }
    x.finish("offsets_and_lengths");
}

/// Compares `stat(path)` on both sides (relative to the cwd, the base on both).
pub(super) fn stat_both(x: &mut X, path: &str, when: &str) {
    let h = host_fstatat(libc::AT_FDCWD, path.as_bytes(), 0);
    let o = ours(|| x.o().stat(path), |s| our_stat(&s));
    x.check(|| format!("stat({path:?}) {when}"), h, o);
}

/// readv/writev with more than IOV_MAX (1024) buffers, and with exactly 1024.
#[test]
fn iovec_counts() {
    let mut x = X::new();
    let f = x.open_both("f", "f", libc::O_RDWR, 0);
    for count in [1024usize, 1025, 4096] {
        let lens = vec![1usize; count];
        readv_writev(&mut x, f, &lens);
        // SAFETY: plain syscall.
        let h = unsafe { libc::syscall(libc::SYS_lseek, f.h, 0i64, libc::SEEK_SET) };
        let o = ours(|| x.o().lseek(f.o, 0, libc::SEEK_SET), |k| k.to_string());
        x.check(|| "lseek(0)".into(), host(h, num), o);
    }
    x.finish("iovec_counts");
}
