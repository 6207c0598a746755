//! copy_file_range beyond what the scripted conformance cases cover: copies larger than
//! one internal chunk (64 KiB), sources with holes, and a copy racing writers of the
//! source (the checks and the result are the conformance suite's, compared with the host).

mod common;

use common::StopOnDrop;
use scalevfs::{Credentials, Process, Vfs, VfsOptions};

fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 7 + i / 4096) as u8).collect()
}

#[test]
fn large_and_sparse_copies_keep_every_byte() {
    let vfs = Vfs::new(VfsOptions::default());
    let p = Process::new(&vfs, Credentials::root());
    let data = pattern(300_000);
    let src = p.open("/src", libc::O_CREAT | libc::O_RDWR, 0o644).unwrap();
    assert_eq!(p.pwrite64(src, &data, 0).unwrap(), data.len());
    // A hole, then more data far out.
    let far = 5 << 20;
    assert_eq!(p.pwrite64(src, &data[..1000], far).unwrap(), 1000);
    let size = far as usize + 1000;
    let dst = p.open("/dst", libc::O_CREAT | libc::O_RDWR, 0o644).unwrap();
    // Positions: one call copies everything up to the source's end.
    assert_eq!(
        p.copy_file_range(src, None, dst, None, usize::MAX >> 1, 0)
            .unwrap(),
        size
    );
    assert_eq!(p.lseek(src, 0, libc::SEEK_CUR).unwrap(), size as i64);
    assert_eq!(p.lseek(dst, 0, libc::SEEK_CUR).unwrap(), size as i64);
    let mut got = vec![0u8; size];
    assert_eq!(p.pread64(dst, &mut got, 0).unwrap(), size);
    let mut want = vec![0u8; size];
    want[..data.len()].copy_from_slice(&data);
    want[far as usize..].copy_from_slice(&data[..1000]);
    assert!(got == want, "the copy differs from the source");

    // Offsets, into the middle of the same file (no overlap): positions stay put.
    let (mut oi, mut oo) = (1i64, 400_000i64);
    assert_eq!(
        p.copy_file_range(src, Some(&mut oi), src, Some(&mut oo), 150_000, 0)
            .unwrap(),
        150_000
    );
    assert_eq!((oi, oo), (150_001, 550_000));
    assert_eq!(p.lseek(src, 0, libc::SEEK_CUR).unwrap(), size as i64);
    let mut mid = vec![0u8; 150_000];
    p.pread64(src, &mut mid, 400_000).unwrap();
    assert!(mid[..] == data[1..150_001], "the in-file copy differs");
}

/// A copy while another thread rewrites the source: every copied block is one that was in
/// the source at some time (tmpfs reads and writes a file's pages under its page-map
/// lock, so the copy's 64 KiB reads see each 4 KiB write whole), and nothing hangs.
#[test]
fn copy_racing_writers_copies_whole_blocks() {
    let vfs = Vfs::new(VfsOptions::default());
    let p = Process::new(&vfs, Credentials::root());
    const BLOCKS: usize = 64;
    let src = p.open("/src", libc::O_CREAT | libc::O_RDWR, 0o644).unwrap();
    for b in 0..BLOCKS {
        p.pwrite64(src, &[0u8; 4096], (b * 4096) as i64).unwrap();
    }
    let stop = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|s| {
        let _stop_writer = StopOnDrop(&stop);
        let writer = s.spawn(|| {
            let mut v = 1u8;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                for b in 0..BLOCKS {
                    p.pwrite64(src, &[v; 4096], (b * 4096) as i64).unwrap();
                }
                v = v.wrapping_add(1).max(1);
            }
        });
        let dst = p.open("/dst", libc::O_CREAT | libc::O_RDWR, 0o644).unwrap();
        for _ in 0..50 {
            let (mut oi, mut oo) = (0i64, 0i64);
            let n = p
                .copy_file_range(src, Some(&mut oi), dst, Some(&mut oo), BLOCKS * 4096, 0)
                .unwrap();
            assert_eq!(n, BLOCKS * 4096);
            let mut got = vec![0u8; n];
            p.pread64(dst, &mut got, 0).unwrap();
            let torn = got.chunks(4096).position(|c| c.iter().any(|&x| x != c[0]));
            assert_eq!(torn, None, "a copied block is torn");
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        writer.join().unwrap();
    });
}
