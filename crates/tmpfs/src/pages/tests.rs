use super::{FilePages, FANOUT, LOCAL_FREE};
use crate::PAGE;
use scalevfs_vfs::Errno;

fn read(p: &FilePages, off: u64, len: usize) -> Vec<u8> {
    let mut buf = vec![0xAAu8; len];
    p.read_at(off, &mut buf);
    buf
}

#[test]
fn writes_read_back_across_page_and_word_edges() {
    let p = FilePages::default();
    let data: Vec<u8> = (0..3 * PAGE + 13).map(|i| (i * 7 % 251) as u8).collect();
    let off = PAGE as u64 - 5; // starts mid-word, mid-page
    assert_eq!(p.write().write_at(off, &data, || Ok(())), Ok(data.len()));
    assert_eq!(read(&p, off, data.len()), data);
    // Before the first byte written: zeros, then the data.
    let head = read(&p, off - 3, 6);
    assert_eq!(head, [0, 0, 0, data[0], data[1], data[2]]);
    assert_eq!(p.count(), 5);
}

#[test]
fn sparse_indices_grow_the_tree_and_read_zeros_between() {
    let p = FilePages::default();
    let far = (FANOUT as u64).pow(3) * 5 + 17; // needs a four-level tree
    p.write()
        .write_at(far * PAGE as u64, b"far", || Ok(()))
        .unwrap();
    p.write().write_at(1, b"near", || Ok(())).unwrap();
    assert_eq!(read(&p, far * PAGE as u64, 3), b"far");
    assert_eq!(read(&p, 0, 5), b"\0near");
    assert_eq!(read(&p, (far - 1) * PAGE as u64, 4), [0; 4]);
    assert_eq!(p.count(), 2);
    assert_eq!(p.next_data(1), Some(far));
    assert_eq!(p.next_data(far + 1), None);
}

#[test]
fn holes_count_as_pages_but_not_as_data() {
    let p = FilePages::default();
    {
        let mut w = p.write();
        for i in 2..5 {
            w.insert_hole(i);
        }
        w.insert_hole(3); // already there
        assert!(w.contains(4) && !w.contains(5));
    }
    assert_eq!(p.count(), 3);
    assert_eq!(p.next_data(0), None);
    assert_eq!(p.next_hole(2), 2);
    // Writing into a hole fills it without reserving another page.
    let mut reserved = 0;
    p.write()
        .write_at(3 * PAGE as u64, b"x", || {
            reserved += 1;
            Ok(())
        })
        .unwrap();
    assert_eq!((reserved, p.count()), (0, 3));
    assert_eq!(p.next_data(0), Some(3));
    assert_eq!(p.next_hole(3), 4);
}

#[test]
fn a_refused_reservation_gives_the_error_or_a_short_write() {
    let p = FilePages::default();
    let data = vec![1u8; 2 * PAGE];
    assert_eq!(
        p.write().write_at(0, &data, || Err(Errno::ENOSPC)),
        Err(Errno::ENOSPC)
    );
    let mut left = 1;
    let n = p.write().write_at(0, &data, || {
        if left == 0 {
            return Err(Errno::ENOSPC);
        }
        left -= 1;
        Ok(())
    });
    assert_eq!(n, Ok(PAGE));
    assert_eq!(p.count(), 1);
}

#[test]
fn remove_range_and_zero_cut_pages() {
    let p = FilePages::default();
    let data = vec![9u8; 6 * PAGE];
    p.write().write_at(0, &data, || Ok(())).unwrap();
    p.write().insert_hole(100);
    assert_eq!(p.write().remove_range(1, 3), 2);
    assert_eq!(p.count(), 5);
    assert_eq!(read(&p, PAGE as u64, 2 * PAGE), vec![0; 2 * PAGE]);
    {
        let mut w = p.write();
        w.zero(3 * PAGE as u64 + 10, 3 * PAGE as u64 + 20);
        w.zero(7 * PAGE as u64, 7 * PAGE as u64 + 5); // no page: nothing
    }
    let page3 = read(&p, 3 * PAGE as u64, PAGE);
    assert!(page3[..10].iter().all(|&b| b == 9) && page3[10..20].iter().all(|&b| b == 0));
    assert!(page3[20..].iter().all(|&b| b == 9));
    assert_eq!(p.write().remove_range(4, u64::MAX), 3); // 4, 5 and the hole at 100
    assert_eq!(p.count(), 2);
    assert_eq!(p.next_data(1), Some(3));
    scalevfs_vfs::retire::reclaim_local();
}

#[test]
fn free_all_empties_the_file_at_once() {
    let p = FilePages::default();
    p.write().write_at(0, &[3u8; 3 * PAGE], || Ok(())).unwrap();
    p.write().insert_hole(7);
    let retired = scalevfs_vfs::retire::pending_local();
    // SAFETY: no reader: this thread is the only user of `p`.
    assert_eq!(unsafe { p.free_all() }, 4);
    assert_eq!(
        scalevfs_vfs::retire::pending_local(),
        retired,
        "nothing deferred"
    );
    assert_eq!(p.count(), 0);
    assert_eq!(read(&p, 0, 8), [0; 8]);
    assert_eq!(p.next_data(0), None);
}

#[test]
fn freed_pages_are_reused_by_the_freeing_thread() {
    std::thread::spawn(|| {
        let p = FilePages::default();
        let data = vec![5u8; 2 * LOCAL_FREE * PAGE];
        p.write().write_at(0, &data, || Ok(())).unwrap();
        drop(p); // no reader: freed at once, the first LOCAL_FREE into the cache
        let cached = super::FREE_PAGES.with(|f| f.borrow().len());
        assert_eq!(cached, LOCAL_FREE);
        // A reused page reads as zeros where it was not written.
        let q = FilePages::default();
        q.write().write_at(1, b"y", || Ok(())).unwrap();
        assert_eq!(read(&q, 0, 3), [0, b'y', 0]);
        assert_eq!(super::FREE_PAGES.with(|f| f.borrow().len()), LOCAL_FREE - 1);
    })
    .join()
    .unwrap();
}

/// Readers copy pages while a writer rewrites, truncates and re-extends them: every page a
/// reader sees is one that some write (or truncation) left whole (each write fills pages
/// with one byte value), and retired pages are freed only after the readers are done with
/// them (a free too early shows under ThreadSanitizer or Miri, and as garbage here).
#[test]
fn readers_race_writers_and_truncation() {
    const PAGES: usize = if cfg!(miri) { 2 } else { 8 };
    let (rounds, readers) = if cfg!(miri) { (6, 1) } else { (2000, 3) };
    let p = FilePages::default();
    let stop = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|s| {
        for _ in 0..readers {
            s.spawn(|| {
                let mut buf = vec![0u8; PAGES * PAGE];
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    p.read_at(0, &mut buf);
                    for (i, page) in buf.chunks_exact(PAGE).enumerate() {
                        assert!(page.iter().all(|&b| b == page[0]), "page {i} is torn");
                    }
                    let _ = p.next_data(0);
                    let _ = p.next_hole(0);
                }
            });
        }
        s.spawn(|| {
            for r in 0..rounds {
                let v = (r % 250 + 1) as u8;
                let data = vec![v; PAGES * PAGE];
                p.write().write_at(0, &data, || Ok(())).unwrap();
                let cut = (r % PAGES) as u64;
                p.write().remove_range(cut, u64::MAX);
                if r % 3 == 0 {
                    p.write().insert_hole(cut);
                }
            }
            stop.store(true, std::sync::atomic::Ordering::Relaxed);
            scalevfs_vfs::retire::reclaim_local();
        });
    });
    let mut w = p.write();
    let exact = (0..PAGES as u64).filter(|&i| w.contains(i)).count() as u64;
    drop(w);
    assert_eq!(p.count(), exact);
}

proptest::proptest! {
    /// Writes and reads at any offset and length (every split into a partial first word,
    /// whole words and a partial last word, within and across pages) agree with a byte
    /// vector written the same way. (Too slow under Miri; the fixed-edge test above
    /// covers the same splits there.)
    #[cfg_attr(miri, ignore)]
    #[test]
    fn any_writes_and_reads_agree_with_a_byte_model(
        writes in proptest::collection::vec((0u64..3 * PAGE as u64, 0usize..2 * PAGE, proptest::num::u8::ANY), 1..12),
        reads in proptest::collection::vec((0u64..4 * PAGE as u64, 0usize..2 * PAGE), 1..12),
    ) {
        let p = FilePages::default();
        let mut model = vec![0u8; 6 * PAGE];
        for (i, &(off, len, seed)) in writes.iter().enumerate() {
            let data: Vec<u8> = (0..len).map(|k| seed.wrapping_add((k * 31 + i) as u8)).collect();
            proptest::prop_assert_eq!(p.write().write_at(off, &data, || Ok(())), Ok(len));
            model[off as usize..off as usize + len].copy_from_slice(&data);
        }
        for &(off, len) in &reads {
            proptest::prop_assert_eq!(read(&p, off, len), &model[off as usize..off as usize + len]);
        }
    }
}
