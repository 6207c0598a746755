//! A regular file's pages: a map from page index to page under a read/write lock, plus the
//! number of pages kept beside it so that `stat` (`st_blocks`) reads one word and takes no
//! lock: a read lock writes the lock's reader count, the one line that two `stat`s of a
//! file would otherwise both write. The count is stored when a write guard drops, while
//! the lock is still held, so it is exact whenever no writer is inside.

use parking_lot::{RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::collections::BTreeMap;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicU64, Ordering};

/// See the module docs.
pub struct FilePages<P> {
    map: RwLock<BTreeMap<u64, P>>,
    len: AtomicU64,
}

impl<P> Default for FilePages<P> {
    fn default() -> FilePages<P> {
        FilePages {
            map: RwLock::new(BTreeMap::new()),
            len: AtomicU64::new(0),
        }
    }
}

impl<P> FilePages<P> {
    pub fn read(&self) -> RwLockReadGuard<'_, BTreeMap<u64, P>> {
        self.map.read()
    }
    pub fn write(&self) -> PagesWriteGuard<'_, P> {
        PagesWriteGuard {
            map: self.map.write(),
            len: &self.len,
        }
    }
    /// The number of pages, without the lock (as of the last writer to finish).
    pub fn count(&self) -> u64 {
        // Relaxed: a statistic; writers store it under the lock.
        self.len.load(Ordering::Relaxed)
    }
}

/// Exclusive access to the map; records the page count when dropped.
pub struct PagesWriteGuard<'a, P> {
    map: RwLockWriteGuard<'a, BTreeMap<u64, P>>,
    len: &'a AtomicU64,
}

impl<P> Deref for PagesWriteGuard<'_, P> {
    type Target = BTreeMap<u64, P>;
    fn deref(&self) -> &BTreeMap<u64, P> {
        &self.map
    }
}

impl<P> DerefMut for PagesWriteGuard<'_, P> {
    fn deref_mut(&mut self) -> &mut BTreeMap<u64, P> {
        &mut self.map
    }
}

impl<P> Drop for PagesWriteGuard<'_, P> {
    fn drop(&mut self) {
        let n = self.map.len() as u64;
        // Skipped when unchanged, so a writer that adds no page writes no extra line.
        if self.len.load(Ordering::Relaxed) != n {
            self.len.store(n, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::FilePages;

    #[test]
    fn the_count_follows_every_writer() {
        let p = FilePages::<u8>::default();
        assert_eq!(p.count(), 0);
        p.write().insert(3, 1);
        p.write().insert(9, 1);
        assert_eq!(p.count(), 2);
        p.write().remove(&3);
        assert_eq!(p.count(), 1);
        drop(std::mem::take(&mut *p.write()));
        assert_eq!(p.count(), 0);
        assert!(p.read().is_empty());
    }

    #[test]
    fn concurrent_writers_leave_the_exact_count() {
        let p = FilePages::<u8>::default();
        std::thread::scope(|s| {
            for t in 0..4u64 {
                let p = &p;
                s.spawn(move || {
                    for i in 0..500 {
                        p.write().insert(t * 1000 + i, 0);
                        if i % 3 == 0 {
                            p.write().remove(&(t * 1000 + i));
                        }
                    }
                });
            }
        });
        assert_eq!(p.count(), p.read().len() as u64);
    }
}
