//! A hashed directory: entries spread over [`BUCKETS`] buckets by a hash of their name,
//! each bucket with its own lock, counters and cache line, so that names changed in
//! different buckets (two creates, two unlinks, a create and a rename of other names)
//! write no common cache line.
//!
//! ## Buckets
//! A bucket's entries live in a slot array with a hash index by name (`slots`): lookup,
//! insertion and removal cost O(1) expected whatever the directory's size, and an entry
//! keeps its slot, and so its position, for life. A name's bucket comes from a fixed
//! hash, the same in every run: two given names share a bucket in every run or in none
//! (one pair in 256 does). The keys are not secret, so names can be chosen to pile into
//! one bucket; that serializes their changes on one lock but costs no more per operation.
//!
//! ## The bucket table, and what it costs
//! The [`BUCKETS`] buckets sit in a two-level table: 16 groups of 16 buckets. The first
//! level, allocated at the directory's first entry, is 16 `OnceBox` pointers, each on a
//! cache line of its own (1 KiB); a group, its 16 one-line buckets together (1 KiB), is
//! allocated when the first name that hashes into it arrives and then stays until the
//! directory is freed. A group pointer is written once (a compare-and-swap: a racing
//! maker's group is dropped unused) and afterwards only read, and it has its line to
//! itself, so two changes in different buckets write no common line: not in the table,
//! and not in the buckets, whose lines are their own. What two changes can share is the
//! making of one group, when both are the first in it. Nothing in the table is freed
//! before the directory itself, so a caller, who holds the directory's inode, can follow
//! any pointer it finds published (`OnceBox` publishes with Release and reads with
//! Acquire).
//!
//! An empty directory costs one pointer; one with entries 2 KiB, and 1 KiB more for each
//! further group in use (17 KiB once all 16 are), besides about 29 bytes an entry and its
//! name (`slots` module docs); a bucket's slot arrays come at its first entry. `stat`
//! and `rmdir`'s emptiness check visit the buckets of the groups in use, so on a large
//! directory they read 256 lines.
//!
//! ## Positions (`getdents64` cookies)
//! Position 0 is `.`, 1 is `..` and 2 the first entry, as in Linux's tmpfs; an entry's
//! position is `3 + (bucket << 22) + slot` (2^22 slots a bucket), below 2^30 + 3 <
//! `DIR_OFFSET_EOD`. A scan
//! goes bucket by bucket and within a bucket by slot, resuming at the first entry at or
//! after the position it was given. As Linux's, each entry reports as its `d_off` the
//! position of the entry that follows it (`..` that of the first entry), and the last
//! one `DIR_OFFSET_EOD`, so a `telldir`/`seekdir` round trip resumes where Linux's would.
//! An entry that exists throughout a scan keeps its slot, so it is returned exactly once;
//! one created during the scan appears at most once. What differs from Linux: the order
//! (hash order, where Linux lists newest first), and so where a seek to a number the
//! directory never returned resumes (Linux numbers entries from one per-directory
//! counter, which every create would write).
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
//! One mutex per bucket (lock class [`BUCKET_CLASS`] for `--lockstat`), a leaf below the
//! VFS's directory locks. A rename within the directory that touches two buckets locks
//! them in index order; a rename across directories locks one bucket at a time (the VFS
//! serializes it against other changes of the same names); a scan holds one bucket at a
//! time and skips empty ones without locking them. No `unsafe` here.

mod slots;

#[cfg(test)]
pub(crate) use slots::VISITS;

use crate::dirmap::ThinName;
use crate::BOGO_DIRENT_SIZE;
use crate::{DIR_OFFSET_EOD, DIR_OFFSET_MIN};
use once_cell::race::OnceBox;
use scalevfs_primitives::lockstat::{LockClass, Mutex, MutexGuard};
use scalevfs_vfs::fs::{DirAttrs, DirEmit};
use scalevfs_vfs::{Errno, Inode, InodeRef, SysResult, Timespec};
use slots::{Entry, Slots, SLOT_LIMIT};
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicI64, AtomicU32, Ordering};

/// log2 of [`BUCKETS`].
const BUCKET_BITS: u32 = 8;
/// Buckets per directory.
pub(crate) const BUCKETS: usize = 1 << BUCKET_BITS;
/// Buckets per group, the second level of the table.
const GROUP: usize = 16;
/// Groups, the first level of the table.
const GROUPS: usize = BUCKETS / GROUP;
/// Slot bits of a position (`SLOT_LIMIT` slots per bucket).
const SLOT_BITS: u32 = SLOT_LIMIT.trailing_zeros();

/// The position of slot `slot` in bucket `b`.
fn position(b: usize, slot: u32) -> u64 {
    DIR_OFFSET_MIN + ((b as u64) << SLOT_BITS) + u64::from(slot)
}

/// The (bucket, slot) a position stands for; `None`: past the last bucket.
fn split_position(pos: u64) -> Option<(usize, u32)> {
    let rel = pos.saturating_sub(DIR_OFFSET_MIN);
    let b = (rel >> SLOT_BITS) as usize;
    (b < BUCKETS).then_some((b, (rel & u64::from(SLOT_LIMIT - 1)) as u32))
}

/// A name's hash (SipHash-1-3 with fixed keys): the high bits pick the bucket, the low 32
/// are kept beside the entry. Fixed, so that which names share a bucket (and so a lock
/// and a cache line) is the same in every run.
fn hash_name(name: &[u8]) -> u64 {
    std::hash::BuildHasherDefault::<std::hash::DefaultHasher>::default().hash_one(name)
}

/// The lock class of the bucket mutexes, as `scalevfs bench --lockstat` reports them.
pub(crate) static BUCKET_CLASS: LockClass = LockClass::new("tmpfs dir bucket");

/// One bucket: its entries under its lock (allocated at its first entry), and the
/// counters `stat` folds (module docs). One cache line.
#[repr(align(64))]
struct Bucket {
    slots: Mutex<Option<Box<Slots>>>,
    count: AtomicU32,
    subdirs: AtomicU32,
    changed_ns: AtomicI64,
}

impl Default for Bucket {
    fn default() -> Self {
        Bucket {
            slots: Mutex::with_class(None, &BUCKET_CLASS),
            count: AtomicU32::new(0),
            subdirs: AtomicU32::new(0),
            changed_ns: AtomicI64::new(0),
        }
    }
}

type Locked<'a> = MutexGuard<'a, Option<Box<Slots>>>;

/// The locked bucket's slots, allocated if it has none yet.
fn slots_of<'g>(g: &'g mut Locked<'_>) -> &'g mut Slots {
    g.get_or_insert_with(Box::default)
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

/// The second level of the bucket table: [`GROUP`] buckets, allocated together when the
/// first of them is needed.
#[derive(Default)]
struct Group([Bucket; GROUP]);

/// A pointer to a group, on a cache line of its own (64 bytes: `CachePadded` would take
/// 128 on x86-64, for the adjacent-line prefetcher, doubling the first level).
#[repr(align(64))]
struct GroupPointer(OnceBox<Group>);

/// The first level: [`GROUPS`] pointers to groups.
struct Table([GroupPointer; GROUPS]);

impl Default for Table {
    fn default() -> Self {
        Table([const { GroupPointer(OnceBox::new()) }; GROUPS])
    }
}

/// A bucket and its slots, locked.
type BucketSlots<'a> = (&'a Bucket, &'a mut Slots);

/// An entry copied out of its bucket, emitted once the position after it is known
/// (`readdir`).
pub(crate) struct Pending {
    ino: u64,
    d_type: u8,
    len: u8,
    name: [u8; 255],
}

impl Pending {
    fn new(ino: u64, d_type: u8, name: &[u8]) -> Pending {
        let mut p = Pending {
            ino,
            d_type,
            // Names are at most NAME_MAX (255) bytes: `ThinName` holds them so.
            len: name.len() as u8,
            name: [0; 255],
        };
        p.name[..name.len()].copy_from_slice(name);
        p
    }
    fn of(e: &Entry) -> Pending {
        let d_type = scalevfs_vfs::core::d_type_of_mode(e.inode.mode());
        Pending::new(e.inode.ino, d_type, e.bytes())
    }
    /// The `..` entry, emitted before the first entry.
    pub(crate) fn dotdot(parent_ino: u64) -> Pending {
        Pending::new(parent_ino, libc::DT_DIR, b"..")
    }
    fn emit(&self, next_pos: u64, emit: &mut dyn FnMut(DirEmit<'_>) -> bool) -> bool {
        emit(DirEmit {
            ino: self.ino,
            next_pos: next_pos as i64,
            d_type: self.d_type,
            name: &self.name[..usize::from(self.len)],
        })
    }
}

/// See the module docs.
#[derive(Default)]
pub(crate) struct HashedDir {
    table: OnceBox<Table>,
}

fn now_ns() -> i64 {
    let t = scalevfs_vfs::inode::now();
    t.sec.saturating_mul(1_000_000_000).saturating_add(t.nsec)
}

fn subdir(i: &Inode) -> i32 {
    i32::from(i.is_dir())
}

fn new_entry(hash: u32, name: &[u8], inode: InodeRef) -> Entry {
    Entry {
        hash,
        // Callers reject names longer than NAME_MAX (`check_name`) first.
        name: ThinName::new(name).expect("name checked against NAME_MAX"),
        inode,
    }
}

impl HashedDir {
    /// Bucket `b`, if it was ever allocated. Reads only: each level's pointer is written
    /// once, when its first bucket is made.
    fn bucket(&self, b: usize) -> Option<&Bucket> {
        Some(&self.table.get()?.0[b / GROUP].0.get()?.0[b % GROUP])
    }

    /// Bucket `b`, allocated (with the levels above it) if it was not. Racing makers of
    /// one level agree: `OnceBox` keeps the first box published and drops the others.
    fn bucket_or_new(&self, b: usize) -> &Bucket {
        &self.table.get_or_init(Box::default).0[b / GROUP]
            .0
            .get_or_init(Box::default)
            .0[b % GROUP]
    }

    /// The buckets allocated so far, in index order, from `first` on.
    fn buckets_from(&self, first: usize) -> impl Iterator<Item = (usize, &Bucket)> {
        let groups = self.table.get().map(|t| &t.0[..]).unwrap_or(&[]);
        groups
            .iter()
            .enumerate()
            .skip(first / GROUP)
            .filter_map(|(g, group)| Some((g, group.0.get()?)))
            .flat_map(|(g, group)| {
                group
                    .0
                    .iter()
                    .enumerate()
                    .map(move |(i, b)| (g * GROUP + i, b))
            })
            .skip_while(move |(b, _)| *b < first)
    }

    /// The bucket of `name` and the hash kept beside its entry.
    fn slot(name: &[u8]) -> (usize, u32) {
        let h = hash_name(name);
        ((h >> (64 - BUCKET_BITS)) as usize, h as u32)
    }

    pub(crate) fn get(&self, name: &[u8]) -> Option<InodeRef> {
        let (b, h) = Self::slot(name);
        let g = self.bucket(b)?.slots.lock();
        let s = g.as_deref()?;
        s.find(h, name).map(|i| s.entry(i).inode.clone())
    }

    /// Adds `name` -> `inode`: `EEXIST` if the name is there, `ENOSPC` if its bucket has
    /// no free position.
    pub(crate) fn insert(&self, name: &[u8], inode: InodeRef) -> SysResult<()> {
        let (b, h) = Self::slot(name);
        let bucket = self.bucket_or_new(b);
        let mut g = bucket.slots.lock();
        let s = slots_of(&mut g);
        if s.find(h, name).is_some() {
            return Err(Errno::EEXIST);
        }
        let slot = s.reserve().ok_or(Errno::ENOSPC)?;
        Self::fill(bucket, s, slot, new_entry(h, name, inode));
        Ok(())
    }

    /// Puts `entry` in the reserved `slot` and counts it.
    fn fill(bucket: &Bucket, s: &mut Slots, slot: u32, entry: Entry) {
        bucket.changed(1, subdir(&entry.inode), now_ns());
        s.fill(slot, entry);
    }

    /// Takes `name` out of the locked bucket and uncounts it.
    fn take(bucket: &Bucket, s: &mut Slots, hash: u32, name: &[u8]) -> Option<Entry> {
        let gone = s.remove(hash, name)?;
        bucket.changed(-1, -subdir(&gone.inode), now_ns());
        Some(gone)
    }

    /// Frees an emptied bucket's arrays if they grew large (`slots` module docs).
    fn trim(g: &mut Locked<'_>) {
        if g.as_deref().is_some_and(Slots::oversized_when_empty) {
            **g = None;
        }
    }

    /// Removes `name`; returns its inode.
    pub(crate) fn remove(&self, name: &[u8]) -> Option<InodeRef> {
        let (b, h) = Self::slot(name);
        let bucket = self.bucket(b)?;
        let mut g = bucket.slots.lock();
        let gone = Self::take(bucket, g.as_deref_mut()?, h, name)?;
        Self::trim(&mut g);
        Some(gone.inode)
    }

    /// Runs `f` with buckets `a` (which must exist: `ENOENT` if it never did) and `b`
    /// (made if need be), both locked, the lower index first; the second is `None` when
    /// they are one.
    fn with_two<R>(
        &self,
        a: usize,
        b: usize,
        f: impl FnOnce(BucketSlots<'_>, Option<BucketSlots<'_>>) -> R,
    ) -> SysResult<R> {
        let ba = self.bucket(a).ok_or(Errno::ENOENT)?;
        if a == b {
            return Ok(f((ba, slots_of(&mut ba.slots.lock())), None));
        }
        let bb = self.bucket_or_new(b);
        let (mut ga, mut gb) = if a < b {
            let ga = ba.slots.lock();
            (ga, bb.slots.lock())
        } else {
            let gb = bb.slots.lock();
            (ba.slots.lock(), gb)
        };
        Ok(f((ba, slots_of(&mut ga)), Some((bb, slots_of(&mut gb)))))
    }

    /// Within this directory: `from` (which must exist) takes the name `to`, replacing what
    /// `to` named (returned). Both buckets are locked together (in index order), so no
    /// one sees neither name or both.
    pub(crate) fn rename_within(&self, from: &[u8], to: &[u8]) -> SysResult<Option<InodeRef>> {
        let ((fb, fh), (tb, th)) = (Self::slot(from), Self::slot(to));
        self.with_two(fb, tb, |src, dst| {
            Self::move_entry((fh, from), (th, to), src, dst)
        })?
    }

    /// `rename_within` with the buckets locked: `dst` is `None` when both names share the
    /// source bucket.
    fn move_entry(
        (fh, from): (u32, &[u8]),
        (th, to): (u32, &[u8]),
        (sb, src): BucketSlots<'_>,
        dst: Option<BucketSlots<'_>>,
    ) -> SysResult<Option<InodeRef>> {
        src.find(fh, from).ok_or(Errno::ENOENT)?;
        if from == to {
            return Ok(None);
        }
        // The target's bucket and slots, borrowed anew for each step (they may be the
        // source's).
        let mut dst = dst;
        macro_rules! target {
            () => {
                match dst {
                    Some((b, ref mut d)) => (b, &mut **d),
                    None => (sb, &mut *src),
                }
            };
        }
        // A slot first, so that a full bucket changes nothing.
        let slot = target!().1.reserve().ok_or(Errno::ENOSPC)?;
        let old = {
            let (b, d) = target!();
            Self::take(b, d, th, to)
        };
        let inode = Self::take(sb, src, fh, from).expect("found above").inode;
        let (b, d) = target!();
        Self::fill(b, d, slot, new_entry(th, to, inode));
        Ok(old.map(|e| e.inode))
    }

    /// Across directories: `name` (in this, the target directory) now names `inode`,
    /// replacing what it named (returned), under one bucket lock.
    pub(crate) fn replace(&self, name: &[u8], inode: InodeRef) -> SysResult<Option<InodeRef>> {
        let (b, h) = Self::slot(name);
        let bucket = self.bucket_or_new(b);
        let mut g = bucket.slots.lock();
        let s = slots_of(&mut g);
        let slot = s.reserve().ok_or(Errno::ENOSPC)?;
        let old = Self::take(bucket, s, h, name);
        Self::fill(bucket, s, slot, new_entry(h, name, inode));
        Ok(old.map(|e| e.inode))
    }

    /// `RENAME_EXCHANGE`: the existing entry `name` keeps its position and now names
    /// `inode`; returns what it named.
    pub(crate) fn swap_inode(&self, name: &[u8], inode: InodeRef) -> Option<InodeRef> {
        let (b, h) = Self::slot(name);
        let bucket = self.bucket(b)?;
        let mut g = bucket.slots.lock();
        let s = g.as_deref_mut()?;
        let i = s.find(h, name)?;
        let e = s.entry_mut(i);
        let d = subdir(&inode) - subdir(&e.inode);
        bucket.changed(0, d, now_ns());
        Some(std::mem::replace(&mut e.inode, inode))
    }

    /// `RENAME_EXCHANGE` within this directory: `a` and `b` (both present) swap inodes,
    /// keeping their positions, with both buckets locked together (index order) so no one
    /// sees one name changed and not the other.
    pub(crate) fn exchange_within(&self, a: &[u8], b: &[u8]) -> SysResult<()> {
        let ((ab, ah), (bb, bh)) = (Self::slot(a), Self::slot(b));
        self.with_two(ab, bb, |la, lb| {
            Self::swap_entries([(ah, a), (bh, b)], la, lb)
        })?
    }

    /// `exchange_within` with the buckets locked: `lb` is `None` when both names share
    /// `a`'s bucket.
    fn swap_entries(
        [(ah, a), (bh, b)]: [(u32, &[u8]); 2],
        (ba, sa): BucketSlots<'_>,
        lb: Option<BucketSlots<'_>>,
    ) -> SysResult<()> {
        let ai = sa.find(ah, a).ok_or(Errno::ENOENT)?;
        match lb {
            None => {
                let bi = sa.find(bh, b).ok_or(Errno::ENOENT)?;
                sa.swap_inodes(ai, bi);
                ba.changed(0, 0, now_ns());
            }
            Some((bb, sb)) => {
                let bi = sb.find(bh, b).ok_or(Errno::ENOENT)?;
                std::mem::swap(&mut sa.entry_mut(ai).inode, &mut sb.entry_mut(bi).inode);
                let d = subdir(&sa.entry(ai).inode) - subdir(&sb.entry(bi).inode);
                ba.changed(0, d, now_ns());
                bb.changed(0, -d, now_ns());
            }
        }
        Ok(())
    }

    /// Whether it has no entries (exact while the caller keeps names from being added,
    /// as `rmdir` does by holding the directory exclusively).
    pub(crate) fn is_empty(&self) -> bool {
        // Relaxed: the caller's lock orders the counts' last changes before this read.
        self.buckets_from(0)
            .all(|(_, b)| b.count.load(Ordering::Relaxed) == 0)
    }

    /// Takes every entry out (unmount, eviction); the counters are left as they were.
    pub(crate) fn drain(&self) -> Vec<InodeRef> {
        let mut all = Vec::new();
        for (_, b) in self.buckets_from(0) {
            if let Some(s) = b.slots.lock().take() {
                all.extend(s.into_entries().map(|e| e.inode));
            }
        }
        all
    }

    /// Emits `first` (if any: `..`), then the entries from position `pos` (at least
    /// `DIR_OFFSET_MIN`; module docs), each with the position of the one after it, until
    /// `emit` says stop (`Ok(false)`) or the last one is emitted (`Ok(true)`).
    pub(crate) fn readdir(
        &self,
        pos: u64,
        first: Option<Pending>,
        emit: &mut dyn FnMut(DirEmit<'_>) -> bool,
    ) -> bool {
        let mut pending = first;
        if let Some((first_bucket, first_slot)) = split_position(pos.max(DIR_OFFSET_MIN)) {
            for (b, bucket) in self.buckets_from(first_bucket) {
                // An empty bucket is not locked (a scan writes no lock word it need not).
                // Relaxed: an entry added before the scan began (happens-before it) made
                // this count non-zero; one added concurrently may be missed, as allowed.
                if bucket.count.load(Ordering::Relaxed) == 0 {
                    continue;
                }
                let from = if b == first_bucket { first_slot } else { 0 };
                let g = bucket.slots.lock();
                for (slot, e) in g.as_deref().into_iter().flat_map(|s| s.iter_from(from)) {
                    if let Some(p) = pending.take() {
                        if !p.emit(position(b, slot), emit) {
                            return false;
                        }
                    }
                    pending = Some(Pending::of(e));
                }
            }
        }
        pending.is_none_or(|p| p.emit(DIR_OFFSET_EOD, emit))
    }

    /// Size, link count and times, folded from the buckets (module docs); `dir` supplies
    /// the link count base (0 once removed) and the times set explicitly.
    pub(crate) fn attrs(&self, dir: &Inode) -> DirAttrs {
        let (mut count, mut subdirs, mut changed) = (0u64, 0u32, 0i64);
        for (_, b) in self.buckets_from(0) {
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
        for (_, b) in self.buckets_from(0) {
            let _g = b.slots.lock();
            b.changed_ns.store(0, Ordering::Relaxed);
        }
    }

    /// Entries and slots of bucket `b` (tests: slot reuse).
    #[cfg(test)]
    pub(crate) fn bucket_sizes(&self, b: usize) -> (usize, usize) {
        self.bucket(b)
            .and_then(|bucket| {
                let g = bucket.slots.lock();
                g.as_deref().map(|s| (s.len(), s.slot_count()))
            })
            .unwrap_or((0, 0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_round_trip_and_carry_into_the_next_bucket() {
        assert_eq!(split_position(position(3, 7)), Some((3, 7)));
        assert_eq!(split_position(position(3, SLOT_LIMIT)), Some((4, 0)));
        assert_eq!(split_position(position(BUCKETS - 1, SLOT_LIMIT)), None);
        assert!(position(BUCKETS - 1, SLOT_LIMIT) < DIR_OFFSET_EOD);
        assert_eq!(split_position(0), Some((0, 0)));
    }

    #[test]
    fn a_bucket_is_one_cache_line_and_a_group_pointer_too() {
        assert_eq!(std::mem::size_of::<Bucket>(), 64);
        assert_eq!(std::mem::size_of::<Group>(), 64 * GROUP);
        assert_eq!(std::mem::size_of::<Table>(), 64 * GROUPS);
    }

    #[test]
    fn a_scan_of_the_table_visits_made_buckets_in_order_from_any_start() {
        let d = HashedDir::default();
        assert_eq!(d.buckets_from(0).count(), 0);
        // Groups 0, 1 and 12 (of 16 buckets each).
        for b in [200, 3, 17] {
            d.bucket_or_new(b);
        }
        let from = |f| d.buckets_from(f).map(|(b, _)| b).collect::<Vec<_>>();
        let groups = |g: &[usize]| -> Vec<usize> {
            g.iter().flat_map(|g| g * GROUP..(g + 1) * GROUP).collect()
        };
        assert_eq!(from(0), groups(&[0, 1, 12]));
        assert_eq!(from(16), groups(&[1, 12]));
        assert_eq!(from(17), groups(&[1, 12])[1..]);
        assert_eq!(from(201), groups(&[12])[9..]);
        assert!(std::ptr::eq(d.bucket(17).unwrap(), d.bucket_or_new(17)));
        assert!(d.bucket(18).is_some());
        assert!(d.bucket(32).is_none());
    }
}
