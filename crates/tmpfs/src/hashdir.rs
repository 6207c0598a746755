//! A hashed directory: entries spread over [`BUCKETS`] buckets by a hash of their name,
//! each bucket with its own lock, counters and cache line, so that names changed in
//! different buckets (two creates, two unlinks, a create and a rename of other names)
//! write no common cache line.
//!
//! ## Buckets
//! A bucket holds its entries in a `Vec`, sorted by a per-bucket sequence number that
//! each insertion takes from the bucket's counter (an entry keeps its number for life).
//! Lookup scans the bucket's entries (24 bytes each: sequence, 32-bit hash, thin name,
//! inode) comparing the hash before the name: linear in the bucket's size, so a directory
//! of n names costs about n/16 entry visits per lookup that misses the dcache, per create
//! and per unlink. The bucket array is allocated
//! on the first insertion, so an empty directory costs one pointer; one with entries
//! costs [`BUCKETS`] cache lines (1 KiB) plus its entries. A name's bucket comes from a
//! fixed hash, the same in every run: two given names share a bucket in every run or in
//! none (one pair in 16 does). The keys are not secret, so names can be chosen to pile
//! into one bucket, which makes that bucket's scans linear in the directory's size.
//!
//! ## Positions (`getdents64` cookies)
//! Position 0 is `.`, 1 is `..`; an entry's position is `3 + (bucket << SEQ_BITS) + seq`,
//! and it reports as its `d_off` the position just after it (`seq + 1` in its bucket,
//! which carries into the next bucket's first position). A scan goes bucket by bucket and
//! within a bucket by sequence, resuming at the first entry at or after the position it
//! was given. An entry that exists throughout a scan keeps its bucket and sequence, so it
//! is returned exactly once; one created during the scan appears at most once. A bucket
//! whose counter reaches `2^SEQ_BITS` takes the lowest free number instead (Linux's
//! cyclic offset allocation); `ENOSPC` only when all of them are taken.
//!
//! ## Size, link count and times, folded on read
//! Each bucket counts its entries and its subdirectories, and records when it last
//! changed (nanoseconds since the epoch; 0: not since the directory's times were last
//! set explicitly). These are written only under the bucket's lock, by the operation
//! that changes the bucket, and read without a lock by `stat`
//! ([`HashedDir::attrs`]): size `40 + 20 x entries` (Linux tmpfs's `BOGO_DIRENT_SIZE`),
//! link count `2 + subdirectories`, mtime the latest bucket change (or the inode's own
//! mtime if none since `utimensat`), ctime the later of that and the inode's ctime. A
//! `stat` racing with changes may see some buckets before and some after them, as
//! Linux's `stat` may see a size and a time from different moments.
//!
//! ## Locks
//! One `parking_lot::Mutex` per bucket, a leaf below the VFS inode `rwsem`. A rename
//! within the directory that touches two buckets locks them in index order; a rename
//! across directories locks one bucket at a time (the VFS serializes it against other
//! changes of the same names). No `unsafe` here.

use crate::dirmap::ThinName;
use crate::BOGO_DIRENT_SIZE;
use crate::{DIR_OFFSET_EOD, DIR_OFFSET_MIN};
use parking_lot::Mutex;
use scalevfs_vfs::fs::{DirAttrs, DirEmit};
use scalevfs_vfs::{Errno, Inode, InodeRef, SysResult, Timespec};
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicI64, AtomicU32, Ordering};
use std::sync::OnceLock;

/// log2 of [`BUCKETS`].
const BUCKET_BITS: u32 = 4;
/// Buckets per directory.
pub(crate) const BUCKETS: usize = 1 << BUCKET_BITS;
/// Sequence bits of a position: positions stay below 2^30 + 3 < `DIR_OFFSET_EOD`.
const SEQ_BITS: u32 = 30 - BUCKET_BITS;
/// Sequence numbers a bucket hands out before it reuses free ones.
const SEQ_LIMIT: u32 = 1 << SEQ_BITS;

/// The position of sequence `seq` in bucket `b` (`seq` may be `SEQ_LIMIT`: the next
/// bucket's first position).
fn position(b: usize, seq: u32) -> u64 {
    DIR_OFFSET_MIN + ((b as u64) << SEQ_BITS) + u64::from(seq)
}

/// The (bucket, sequence) a position stands for; `None`: past the last bucket.
fn split_position(pos: u64) -> Option<(usize, u32)> {
    let rel = pos.saturating_sub(DIR_OFFSET_MIN);
    let b = (rel >> SEQ_BITS) as usize;
    (b < BUCKETS).then_some((b, (rel & u64::from(SEQ_LIMIT - 1)) as u32))
}

/// A name's hash (SipHash-1-3 with fixed keys): the high bits pick the bucket, the low 32
/// are kept beside the entry. Fixed, so that which names share a bucket (and so a lock
/// and a cache line) is the same in every run.
fn hash_name(name: &[u8]) -> u64 {
    std::hash::BuildHasherDefault::<std::hash::DefaultHasher>::default().hash_one(name)
}

/// 24 bytes: the name is a thin pointer to its length and bytes.
struct Entry {
    seq: u32,
    /// The low 32 bits of the name's hash, compared before the name.
    hash: u32,
    name: ThinName,
    inode: InodeRef,
}

impl Entry {
    fn bytes(&self) -> &[u8] {
        std::borrow::Borrow::borrow(&self.name)
    }
}

#[derive(Default)]
struct Entries {
    /// Sorted by `seq`.
    list: Vec<Entry>,
    next_seq: u32,
}

impl Entries {
    fn find(&self, hash: u32, name: &[u8]) -> Option<usize> {
        self.list
            .iter()
            .position(|e| e.hash == hash && e.bytes() == name)
    }
    /// A sequence number for a new entry (see the module docs), or `None` if every one is
    /// taken.
    fn take_seq(&mut self) -> Option<u32> {
        if self.next_seq < SEQ_LIMIT {
            self.next_seq += 1;
            return Some(self.next_seq - 1);
        }
        // The lowest number not in the sorted list.
        let mut want = 0u32;
        for e in &self.list {
            if e.seq != want {
                break;
            }
            want += 1;
        }
        (want < SEQ_LIMIT).then_some(want)
    }
}

/// One bucket: its entries under its lock, and the counters `stat` folds (module docs).
#[repr(align(64))]
#[derive(Default)]
struct Bucket {
    entries: Mutex<Entries>,
    count: AtomicU32,
    subdirs: AtomicU32,
    changed_ns: AtomicI64,
}

impl Bucket {
    /// Records a change made under the lock: `count`/`subdirs` deltas and the time.
    fn changed(&self, count: i32, subdirs: i32, now_ns: i64) {
        // Relaxed: written only under the bucket lock; `stat` reads a snapshot that may
        // mix buckets, as the module docs say.
        let add = |c: &AtomicU32, d: i32| {
            c.store(
                c.load(Ordering::Relaxed).wrapping_add_signed(d),
                Ordering::Relaxed,
            )
        };
        add(&self.count, count);
        add(&self.subdirs, subdirs);
        self.changed_ns.store(now_ns, Ordering::Relaxed);
    }
}

/// See the module docs.
#[derive(Default)]
pub(crate) struct HashedDir {
    buckets: OnceLock<Box<[Bucket]>>,
}

fn now_ns() -> i64 {
    let t = scalevfs_vfs::inode::now();
    t.sec.saturating_mul(1_000_000_000).saturating_add(t.nsec)
}

fn subdir(i: &Inode) -> i32 {
    i32::from(i.is_dir())
}

impl HashedDir {
    fn buckets(&self) -> &[Bucket] {
        self.buckets
            .get_or_init(|| (0..BUCKETS).map(|_| Bucket::default()).collect())
    }

    /// The bucket of `name` and the hash kept beside its entry.
    fn slot(name: &[u8]) -> (usize, u32) {
        let h = hash_name(name);
        ((h >> (64 - BUCKET_BITS)) as usize, h as u32)
    }

    pub(crate) fn get(&self, name: &[u8]) -> Option<InodeRef> {
        let buckets = self.buckets.get()?;
        let (b, h) = Self::slot(name);
        let e = buckets[b].entries.lock();
        e.find(h, name).map(|i| e.list[i].inode.clone())
    }

    /// Adds `name` -> `inode`: `EEXIST` if the name is there, `ENOSPC` if its bucket has
    /// no free position.
    pub(crate) fn insert(&self, name: &[u8], inode: InodeRef) -> SysResult<()> {
        let (b, h) = Self::slot(name);
        let bucket = &self.buckets()[b];
        let mut e = bucket.entries.lock();
        if e.find(h, name).is_some() {
            return Err(Errno::EEXIST);
        }
        Self::insert_locked(bucket, &mut e, h, name, inode)
    }

    fn insert_locked(
        bucket: &Bucket,
        e: &mut Entries,
        hash: u32,
        name: &[u8],
        inode: InodeRef,
    ) -> SysResult<()> {
        let seq = e.take_seq().ok_or(Errno::ENOSPC)?;
        Self::insert_seq(bucket, e, seq, hash, name, inode);
        Ok(())
    }

    /// Inserts an entry with sequence `seq` (taken from `e`, or freed in it).
    fn insert_seq(
        bucket: &Bucket,
        e: &mut Entries,
        seq: u32,
        hash: u32,
        name: &[u8],
        inode: InodeRef,
    ) {
        let at = e.list.partition_point(|x| x.seq < seq);
        bucket.changed(1, subdir(&inode), now_ns());
        e.list.insert(
            at,
            Entry {
                seq,
                hash,
                // Callers reject names longer than NAME_MAX (`check_name`) first.
                name: ThinName::new(name).expect("name checked against NAME_MAX"),
                inode,
            },
        );
    }

    fn remove_locked(bucket: &Bucket, e: &mut Entries, hash: u32, name: &[u8]) -> Option<InodeRef> {
        let i = e.find(hash, name)?;
        let gone = e.list.remove(i);
        bucket.changed(-1, -subdir(&gone.inode), now_ns());
        Some(gone.inode)
    }

    /// Removes `name`; returns its inode.
    pub(crate) fn remove(&self, name: &[u8]) -> Option<InodeRef> {
        let buckets = self.buckets.get()?;
        let (b, h) = Self::slot(name);
        Self::remove_locked(&buckets[b], &mut buckets[b].entries.lock(), h, name)
    }

    /// Within this directory: `from` (which must exist) takes the name `to`, replacing what
    /// `to` named (returned). Both buckets are locked together (in index order), so no
    /// one sees neither name or both.
    pub(crate) fn rename_within(&self, from: &[u8], to: &[u8]) -> SysResult<Option<InodeRef>> {
        let buckets = self.buckets.get().ok_or(Errno::ENOENT)?;
        let ((fb, fh), (tb, th)) = (Self::slot(from), Self::slot(to));
        if fb == tb {
            let mut g = buckets[fb].entries.lock();
            return Self::move_entry((&buckets[fb], &mut g, fh), None, from, (th, to));
        }
        let mut lo = buckets[fb.min(tb)].entries.lock();
        let mut hi = buckets[fb.max(tb)].entries.lock();
        let (fl, tl) = if fb < tb {
            (&mut *lo, &mut *hi)
        } else {
            (&mut *hi, &mut *lo)
        };
        Self::move_entry(
            (&buckets[fb], fl, fh),
            Some((&buckets[tb], tl)),
            from,
            (th, to),
        )
    }

    /// `rename_within` with the buckets locked: `dst` is `None` when both names share the
    /// source bucket.
    fn move_entry(
        (sb, src, fh): (&Bucket, &mut Entries, u32),
        mut dst: Option<(&Bucket, &mut Entries)>,
        from: &[u8],
        (th, to): (u32, &[u8]),
    ) -> SysResult<Option<InodeRef>> {
        src.find(fh, from).ok_or(Errno::ENOENT)?;
        if from == to {
            return Ok(None);
        }
        // The target's bucket and entries, borrowed anew for each step (they may be the
        // source's).
        macro_rules! dst {
            () => {
                match dst {
                    Some((b, ref mut e)) => (b, &mut **e),
                    None => (sb, &mut *src),
                }
            };
        }
        // A position first, so that a full bucket (2^26 names) changes nothing.
        let seq = {
            let (_, d) = dst!();
            d.take_seq().ok_or(Errno::ENOSPC)?
        };
        let old = {
            let (b, d) = dst!();
            Self::remove_locked(b, d, th, to)
        };
        let inode = Self::remove_locked(sb, src, fh, from).expect("found above");
        let (b, d) = dst!();
        Self::insert_seq(b, d, seq, th, to, inode);
        Ok(old)
    }

    /// Across directories: `name` (in this, the target directory) now names `inode`,
    /// replacing what it named (returned), under one bucket lock.
    pub(crate) fn replace(&self, name: &[u8], inode: InodeRef) -> SysResult<Option<InodeRef>> {
        let (b, h) = Self::slot(name);
        let bucket = &self.buckets()[b];
        let mut e = bucket.entries.lock();
        let seq = e.take_seq().ok_or(Errno::ENOSPC)?;
        let old = Self::remove_locked(bucket, &mut e, h, name);
        Self::insert_seq(bucket, &mut e, seq, h, name, inode);
        Ok(old)
    }

    /// `RENAME_EXCHANGE`: the existing entry `name` keeps its position and now names
    /// `inode`; returns what it named.
    pub(crate) fn swap_inode(&self, name: &[u8], inode: InodeRef) -> Option<InodeRef> {
        let buckets = self.buckets.get()?;
        let (b, h) = Self::slot(name);
        let mut e = buckets[b].entries.lock();
        let i = e.find(h, name)?;
        let d = subdir(&inode) - subdir(&e.list[i].inode);
        buckets[b].changed(0, d, now_ns());
        Some(std::mem::replace(&mut e.list[i].inode, inode))
    }

    /// `RENAME_EXCHANGE` within this directory: `a` and `b` (both present) swap inodes,
    /// keeping their positions, with both buckets locked together (index order) so no one
    /// sees one name changed and not the other.
    pub(crate) fn exchange_within(&self, a: &[u8], b: &[u8]) -> SysResult<()> {
        let buckets = self.buckets.get().ok_or(Errno::ENOENT)?;
        let ((ab, ah), (bb, bh)) = (Self::slot(a), Self::slot(b));
        let mut lo = buckets[ab.min(bb)].entries.lock();
        let mut hi = (ab != bb).then(|| buckets[ab.max(bb)].entries.lock());
        let (ae, be) = match hi.as_deref_mut() {
            None => (&mut *lo, None),
            Some(h) if ab < bb => (&mut *lo, Some(h)),
            Some(h) => (h, Some(&mut *lo)),
        };
        let ai = ae.find(ah, a).ok_or(Errno::ENOENT)?;
        match be {
            None => {
                let bi = ae.find(bh, b).ok_or(Errno::ENOENT)?;
                let (x, y) = (ai.min(bi), ai.max(bi));
                let (l, r) = ae.list.split_at_mut(y);
                std::mem::swap(&mut l[x].inode, &mut r[0].inode);
                buckets[ab].changed(0, 0, now_ns());
            }
            Some(be) => {
                let bi = be.find(bh, b).ok_or(Errno::ENOENT)?;
                std::mem::swap(&mut ae.list[ai].inode, &mut be.list[bi].inode);
                let d = subdir(&ae.list[ai].inode) - subdir(&be.list[bi].inode);
                buckets[ab].changed(0, d, now_ns());
                buckets[bb].changed(0, -d, now_ns());
            }
        }
        Ok(())
    }

    /// Whether it has no entries (exact while the caller keeps names from being added,
    /// as `rmdir` does by holding the directory exclusively).
    pub(crate) fn is_empty(&self) -> bool {
        // Relaxed: the caller's lock orders the counts' last changes before this read.
        self.buckets
            .get()
            .is_none_or(|bs| bs.iter().all(|b| b.count.load(Ordering::Relaxed) == 0))
    }

    /// Takes every entry out (unmount, eviction); the counters are left as they were.
    pub(crate) fn drain(&self) -> Vec<InodeRef> {
        let Some(buckets) = self.buckets.get() else {
            return Vec::new();
        };
        let mut all = Vec::new();
        for b in buckets.iter() {
            let taken = std::mem::take(&mut *b.entries.lock());
            all.extend(taken.list.into_iter().map(|e| e.inode));
        }
        all
    }

    /// Emits the entries from position `pos` (at least `DIR_OFFSET_MIN`; see the module
    /// docs) until `emit` says stop (`Ok(false)`) or the last bucket ends (`Ok(true)`).
    pub(crate) fn readdir(&self, pos: u64, emit: &mut dyn FnMut(DirEmit<'_>) -> bool) -> bool {
        let Some(buckets) = self.buckets.get() else {
            return true;
        };
        let Some((first, mut from)) = split_position(pos.max(DIR_OFFSET_MIN)) else {
            return true;
        };
        for (b, bucket) in buckets.iter().enumerate().skip(first) {
            let e = bucket.entries.lock();
            let start = e.list.partition_point(|x| x.seq < from);
            for x in &e.list[start..] {
                let next_pos = position(b, x.seq + 1);
                if !emit(DirEmit {
                    ino: x.inode.ino,
                    next_pos: next_pos.min(DIR_OFFSET_EOD) as i64,
                    d_type: scalevfs_vfs::core::d_type_of_mode(x.inode.mode()),
                    name: x.bytes(),
                }) {
                    return false;
                }
            }
            from = 0;
        }
        true
    }

    /// Size, link count and times, folded from the buckets (module docs); `dir` supplies
    /// the link count base (0 once removed) and the times set explicitly.
    pub(crate) fn attrs(&self, dir: &Inode) -> DirAttrs {
        let (mut count, mut subdirs, mut changed) = (0u64, 0u32, 0i64);
        for b in self.buckets.get().into_iter().flatten() {
            // Relaxed: a snapshot (module docs).
            count += u64::from(b.count.load(Ordering::Relaxed));
            subdirs = subdirs.wrapping_add(b.subdirs.load(Ordering::Relaxed));
            changed = changed.max(b.changed_ns.load(Ordering::Relaxed));
        }
        let base = dir.nlink();
        let ctime = dir.ctime.get();
        let (mtime, ctime) = if changed == 0 {
            (dir.mtime.get(), ctime)
        } else {
            let t = Timespec {
                sec: changed.div_euclid(1_000_000_000),
                nsec: changed.rem_euclid(1_000_000_000),
            };
            (t, t.max(ctime))
        };
        DirAttrs {
            size: 2 * BOGO_DIRENT_SIZE + BOGO_DIRENT_SIZE * count,
            nlink: if base == 0 { 0 } else { base + subdirs },
            mtime,
            ctime,
        }
    }

    /// The directory's times were set explicitly (`utimensat`, with the directory held
    /// exclusively): the buckets' change times no longer count.
    pub(crate) fn clear_times(&self) {
        for b in self.buckets.get().into_iter().flatten() {
            let _e = b.entries.lock();
            b.changed_ns.store(0, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_round_trip_and_carry_into_the_next_bucket() {
        assert_eq!(split_position(position(3, 7)), Some((3, 7)));
        assert_eq!(split_position(position(3, SEQ_LIMIT)), Some((4, 0)));
        assert_eq!(split_position(position(BUCKETS - 1, SEQ_LIMIT)), None);
        assert!(position(BUCKETS - 1, SEQ_LIMIT) < DIR_OFFSET_EOD);
        assert_eq!(split_position(0), Some((0, 0)));
    }

    #[test]
    fn entries_stay_small() {
        // Regression guard for memory per file: a thin name, an inode pointer, a sequence.
        assert_eq!(std::mem::size_of::<Entry>(), 24);
        assert_eq!(
            std::mem::size_of::<Bucket>(),
            64,
            "one cache line per bucket"
        );
    }

    #[test]
    fn a_full_counter_reuses_the_lowest_free_number() {
        let mut e = Entries {
            list: Vec::new(),
            next_seq: SEQ_LIMIT,
        };
        assert_eq!(e.take_seq(), Some(0));
        assert_eq!(e.next_seq, SEQ_LIMIT);
    }
}
