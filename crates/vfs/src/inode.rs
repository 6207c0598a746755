//! Inodes, superblocks and the inode cache.
//!
//! ## Inode
//! An [`Inode`] holds the attributes every file system shares (mode, owner, link count, size,
//! times) as atomics, so `stat`, permission checks and rcu-walk read them without a lock,
//! plus the file system's private data. Attribute *changes* that must be atomic together
//! (chmod + ctime, write + size + mtime) are made under `rwsem` (Linux's `i_rwsem`) by the
//! caller; readers may see a mix of old and new fields, as `stat` on Linux may.
//!
//! ## Lifetime
//! [`InodeRef`] is an [`Erc`]: counted references from positive dentries and from the file
//! system's own links (a tmpfs directory entry holds one). When the last goes, the inode is
//! *evicted at once* (removed from the inode cache and the superblock's list, and the file
//! system frees its data and gives back its space: `unlink` + `close` frees space, as on
//! Linux) and its memory is freed after an epoch grace period, because rcu-walk may still be
//! reading its mode.
//!
//! ## Superblock inode list (seed 001)
//! Every live inode is on its superblock's list ([`InodeList`]: a per-CPU `DList`, or the
//! legacy single locked list). Adding and removing touch only the current CPU's shard.
//! [`SuperBlock::for_each_inode`] walks it the way `evict_inodes` does: it takes a reference
//! to an inode (skipping ones already being evicted) before using it.
//!
//! ## Inode cache
//! Hashed by inode number in a per-superblock [`RcuHash`]: lookup takes no lock (epoch +
//! `try_get_raw`, which refuses an inode whose count reached zero), insert contends only
//! within a bucket.
//!
//! Lock order: `Inode::rwsem` (parent before child, or by address for two non-related
//! inodes) -> file system internal locks -> inode list shard / icache bucket (leaves).

use crate::abi::{Stat, Timespec};
use crate::erc::{Erc, ErcInner, Release};
use crate::fs::FileSystem;
use crate::locks::FileLockContext;
use crate::prims::{InodeList, InodeListNode};
use crate::rcuhash::RcuHash;
use crate::Errno;
use once_cell::race::OnceBox;
use parking_lot::RwLock;
use scalevfs_primitives::percpu::PerCpuCounter;
use scalevfs_primitives::seqlock::SeqRwLock;
use scalevfs_primitives::Locking;
use std::any::Any;
use std::sync::atomic::{AtomicI64, AtomicU16, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

/// A counted inode reference.
pub type InodeRef = Erc<Inode>;

/// A timestamp readable without a lock (seconds and nanoseconds may tear against a
/// concurrent update, as Linux's `i_mtime` may).
#[derive(Default)]
pub struct AtomicTime {
    sec: AtomicI64,
    nsec: AtomicI64,
}

impl AtomicTime {
    /// A time of `t`.
    pub fn new(t: Timespec) -> AtomicTime {
        AtomicTime {
            sec: AtomicI64::new(t.sec),
            nsec: AtomicI64::new(t.nsec),
        }
    }
    /// The time (seconds and nanoseconds may be torn by a concurrent `set`, as on Linux).
    pub fn get(&self) -> Timespec {
        Timespec {
            sec: self.sec.load(Ordering::Relaxed),
            nsec: self.nsec.load(Ordering::Relaxed),
        }
    }
    /// Sets the time.
    pub fn set(&self, t: Timespec) {
        self.sec.store(t.sec, Ordering::Relaxed);
        self.nsec.store(t.nsec, Ordering::Relaxed);
    }
}

/// The current time (CLOCK_REALTIME).
pub fn now() -> Timespec {
    let d = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    Timespec {
        sec: d.as_secs() as i64,
        nsec: d.subsec_nanos() as i64,
    }
}

/// CLOCK_REALTIME_COARSE: the time of the last timer tick (a few ms old), read without
/// the TSC (Linux's `ktime_get_coarse_real_ts64`). Cheap enough to ask on every read.
fn now_coarse() -> Timespec {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid out-parameter; the call cannot fail for this clock id.
    unsafe { libc::clock_gettime(libc::CLOCK_REALTIME_COARSE, &mut ts) };
    Timespec {
        sec: ts.tv_sec,
        nsec: ts.tv_nsec,
    }
}

/// See the module docs.
pub struct Inode {
    /// The inode number.
    pub ino: u64,
    sb: *const SuperBlock,
    /// Type and permission bits (16 bits hold them), beside `flags` in one word.
    mode: AtomicU16,
    /// Inode flags: the `chattr` flags the file system keeps (`FS_*_FL` below 0x100, see
    /// [`crate::fileattr`]), [`I_LINKABLE`] and [`I_FS_PRIVATE`].
    flags: AtomicU16,
    uid: AtomicU32,
    gid: AtomicU32,
    nlink: AtomicU32,
    size: AtomicU64,
    /// The device a device node stands for.
    pub rdev: u64,
    /// Last access.
    pub atime: AtomicTime,
    /// Last modification of the data.
    pub mtime: AtomicTime,
    /// Last status change.
    pub ctime: AtomicTime,
    /// Creation time (statx's `btime`) in nanoseconds since the epoch: set once, so a
    /// plain word (8 bytes, where a `Timespec` would take 16).
    btime_ns: i64,
    /// Linux's `i_rwsem`: directories: exclusive for namespace changes, shared for lookup
    /// and readdir; regular files: exclusive for write/truncate/fallocate.
    pub rwsem: RwLock<()>,
    /// Directories in the scalable design: the namespace lock, a per-CPU reader/writer
    /// lock whose shared side is taken by changes of non-directory names that the file
    /// system lets run concurrently, and whose exclusive side (after `rwsem`) by every
    /// other namespace change (`core::dirlock`). Allocated by the directory's first
    /// namespace change (a directory that never changes does not pay for its reader
    /// shards); never for other inodes or in the legacy design.
    ns_lock: OnceBox<SeqRwLock>,
    /// The file system's data (tmpfs: pages, directory entries, link target).
    pub private: Box<dyn Any + Send + Sync>,
    /// The inode's file-lock context (`crate::locks`), created on its first lock
    /// operation. An inode that is never locked pays this word-sized slot (plus the
    /// `OnceLock` state word) and nothing else.
    pub lock_ctx: OnceLock<Box<FileLockContext>>,
    /// Where the inode sits on its superblock's list, as `InodeListNode::to_bits`: set once
    /// by `new_inode` before the inode is shared, read by `evict`, which runs after the
    /// last reference's Release decrement and Acquire fence (`Erc::drop`), so Relaxed
    /// suffices. `u64::MAX` in the first word: not on the list (not set yet).
    sb_node: [AtomicU64; 2],
}

// SAFETY: `sb` points to the superblock, which is Sync and outlives its inodes (see
// `SuperBlock` docs); everything else is Send + Sync.
unsafe impl Send for Inode {}
// SAFETY: as above.
unsafe impl Sync for Inode {}

/// Reader shards of a directory's namespace lock at most: each costs a cache line (two on
/// x86-64) per directory; CPUs beyond share them, which costs cache traffic, not
/// correctness.
const NS_LOCK_SHARDS: usize = 16;

fn num_cpus() -> usize {
    scalevfs_primitives::cpu::num_cpus()
}

/// Inode flag: an `O_TMPFILE` file opened without `O_EXCL`, which `linkat` may give a
/// name although its link count is 0 (Linux's `I_LINKABLE`); the first link clears it.
pub const I_LINKABLE: u16 = 1 << 15;
/// Inode flag the file system may use for its own purpose (tmpfs: the inode has extended
/// attributes); the VFS never reads or changes it.
pub const I_FS_PRIVATE: u16 = 1 << 14;
/// Where the `chattr` flags sit in the flag word.
const FS_FLAGS: u16 = 0xff;

/// The attributes a file system gives a new inode.
pub struct NewInode {
    /// The inode number.
    pub ino: u64,
    /// Type and permission bits.
    pub mode: u32,
    /// Owner.
    pub uid: u32,
    /// Group.
    pub gid: u32,
    /// Link count. 0 while the inode is in use means an unlinked file still open, which
    /// makes a remount read-only `EBUSY` (`SuperBlock::make_read_only`).
    pub nlink: u32,
    /// The device a device node stands for.
    pub rdev: u64,
    /// The file system's own per-inode data.
    pub private: Box<dyn Any + Send + Sync>,
}

impl Inode {
    /// The superblock the inode belongs to.
    pub fn sb(&self) -> &SuperBlock {
        // SAFETY: a superblock outlives its inodes: it is torn down only after its inode list
        // is empty, and leaked otherwise (see `SuperBlock`).
        unsafe { &*self.sb }
    }
    /// The file system of the superblock.
    pub fn fs(&self) -> &dyn FileSystem {
        &*self.sb().fs
    }
    /// Type and permission bits.
    pub fn mode(&self) -> u32 {
        self.mode.load(Ordering::Relaxed).into()
    }
    /// The `S_IFMT` bits.
    pub fn file_type(&self) -> u32 {
        self.mode() & libc::S_IFMT
    }
    /// Whether it is a directory.
    pub fn is_dir(&self) -> bool {
        self.file_type() == libc::S_IFDIR
    }
    /// Whether it is a regular file.
    pub fn is_reg(&self) -> bool {
        self.file_type() == libc::S_IFREG
    }
    /// Whether it is a symbolic link.
    pub fn is_symlink(&self) -> bool {
        self.file_type() == libc::S_IFLNK
    }
    /// Sets the permission bits (07777), keeping the type.
    pub fn set_perm(&self, perm: u32) {
        let t = self.file_type();
        self.mode
            .store((t | (perm & 0o7777)) as u16, Ordering::Relaxed);
    }
    /// The `chattr` flags (`FS_IMMUTABLE_FL`, ...).
    pub fn fs_flags(&self) -> u32 {
        u32::from(self.flags.load(Ordering::Relaxed) & FS_FLAGS)
    }
    /// Sets the `chattr` flags (the file system supports them; below 0x100).
    pub fn set_fs_flags(&self, f: u32) {
        debug_assert!(f & !u32::from(FS_FLAGS) == 0);
        let f = f as u16 & FS_FLAGS;
        let _ = self
            .flags
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |o| {
                Some(o & !FS_FLAGS | f)
            });
    }
    /// `IS_IMMUTABLE`.
    pub fn is_immutable(&self) -> bool {
        self.fs_flags() & crate::fileattr::FS_IMMUTABLE_FL != 0
    }
    /// `IS_APPEND`.
    pub fn is_append(&self) -> bool {
        self.fs_flags() & crate::fileattr::FS_APPEND_FL != 0
    }
    /// Whether flag `f` (such as [`I_LINKABLE`]) is set.
    pub fn has_flag(&self, f: u16) -> bool {
        self.flags.load(Ordering::Relaxed) & f != 0
    }
    /// Sets or clears flag `f`; returns whether it was set before.
    pub fn set_flag(&self, f: u16, on: bool) -> bool {
        let old = if on {
            self.flags.fetch_or(f, Ordering::Relaxed)
        } else {
            self.flags.fetch_and(!f, Ordering::Relaxed)
        };
        old & f != 0
    }
    /// Owner.
    pub fn uid(&self) -> u32 {
        self.uid.load(Ordering::Relaxed)
    }
    /// Group.
    pub fn gid(&self) -> u32 {
        self.gid.load(Ordering::Relaxed)
    }
    /// Sets the owner.
    pub fn set_uid(&self, v: u32) {
        self.uid.store(v, Ordering::Relaxed)
    }
    /// Sets the group.
    pub fn set_gid(&self, v: u32) {
        self.gid.store(v, Ordering::Relaxed)
    }
    /// Link count.
    pub fn nlink(&self) -> u32 {
        self.nlink.load(Ordering::Relaxed)
    }
    /// Sets the link count.
    pub fn set_nlink(&self, n: u32) {
        self.nlink.store(n, Ordering::Relaxed)
    }
    /// Adds a link.
    pub fn inc_nlink(&self) {
        self.nlink.fetch_add(1, Ordering::Relaxed);
    }
    /// Drops a link.
    pub fn dec_nlink(&self) {
        let _ = self
            .nlink
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1));
    }
    /// Size in bytes.
    pub fn size(&self) -> u64 {
        self.size.load(Ordering::Relaxed)
    }
    /// Sets the size.
    pub fn set_size(&self, s: u64) {
        self.size.store(s, Ordering::Relaxed)
    }
    /// Sets mtime and ctime to now (a write or a directory change).
    pub fn touch_mc(&self) {
        let t = now();
        self.mtime.set(t);
        self.ctime.set(t);
    }
    /// Linux's `file_update_time` for a FIFO's write, which holds no inode lock: mtime and
    /// ctime move to now only once the coarse clock has passed them, so a busy FIFO stores
    /// to the inode's time line once a tick, not once a write (Linux's timestamps have a
    /// tick's granularity too, unless `stat` asked for the ctime since). Two writers that
    /// race may interleave their seconds and nanoseconds, as Linux's two plain stores
    /// may. Nothing moves on a read-only mount, where the write itself goes on
    /// (`__mnt_want_write_file` fails and `file_update_time` gives up quietly).
    pub fn file_update_time(&self) {
        let t = now_coarse();
        if t > self.mtime.get() || t > self.ctime.get() {
            // Under a write access, so that a remount read-only cannot come in between.
            if let Ok(_write) = self.sb().want_write() {
                self.touch_mc();
            }
        }
    }
    /// Sets the status-change time to now.
    pub fn touch_c(&self) {
        self.ctime.set(now());
    }
    /// `relatime`: update atime only if it is not newer than mtime or ctime, or is a day old.
    /// Most reads of a file update nothing, so they must not pay for a precise clock: the
    /// day-old test uses the coarse clock (a tick's error is nothing against a day).
    pub fn touch_atime(&self) {
        if self.fs_flags() & crate::fileattr::FS_NOATIME_FL != 0 {
            return;
        }
        let a = self.atime.get();
        // A read-only mount keeps atimes (`atime_needs_update`, then `touch_atime`'s write
        // access): asked only when relatime would update, so that the common read touches
        // no superblock line.
        if a <= self.mtime.get() || a <= self.ctime.get() || now_coarse().sec - a.sec >= 24 * 3600 {
            if let Ok(_write) = self.sb().want_write() {
                self.atime.set(now());
            }
        }
    }
    /// The attributes, as `stat` reports them.
    pub fn stat(&self) -> Stat {
        let sb = self.sb();
        let mut st = Stat {
            dev: sb.dev,
            ino: self.ino,
            mode: self.mode(),
            nlink: self.nlink() as u64,
            uid: self.uid(),
            gid: self.gid(),
            rdev: self.rdev,
            size: self.size() as i64,
            blksize: 4096,
            blocks: sb.fs.blocks(self) as i64,
            atime: self.atime.get(),
            mtime: self.mtime.get(),
            ctime: self.ctime.get(),
        };
        if self.is_dir() {
            if let Some(a) = sb.fs.dir_attrs(self) {
                st.size = a.size as i64;
                st.nlink = a.nlink.into();
                st.mtime = a.mtime;
                st.ctime = a.ctime;
            }
        }
        st
    }
    /// Sets the modification time explicitly (`utimensat`; call with `rwsem` held
    /// exclusively): the file system forgets a directory's own record of later changes
    /// ([`FileSystem::mtime_set`]).
    pub fn set_mtime(&self, t: Timespec) {
        self.mtime.set(t);
        self.fs().mtime_set(self);
    }
    /// Creation time.
    pub fn btime(&self) -> crate::abi::Timespec {
        crate::abi::Timespec {
            sec: self.btime_ns.div_euclid(1_000_000_000),
            nsec: self.btime_ns.rem_euclid(1_000_000_000),
        }
    }
    /// Whether it is a directory with a namespace lock (scalable design), without
    /// allocating the lock.
    pub fn has_ns_lock(&self) -> bool {
        self.is_dir() && self.sb().locking == Locking::Scalable
    }
    /// Whether the namespace lock has been allocated (tests).
    #[cfg(test)]
    pub(crate) fn ns_lock_allocated(&self) -> bool {
        self.ns_lock.get().is_some()
    }
    /// The directory's namespace lock (scalable design; see `core::dirlock`), allocated
    /// at the first call. Every caller gets the same lock: a racing allocation that
    /// loses is dropped.
    pub fn ns_lock(&self) -> Option<&SeqRwLock> {
        self.has_ns_lock().then(|| {
            self.ns_lock
                .get_or_init(|| Box::new(SeqRwLock::with_shards(NS_LOCK_SHARDS.min(num_cpus()))))
        })
    }
    /// Downcasts the file system's private data.
    pub fn private<T: 'static>(&self) -> Option<&T> {
        self.private.downcast_ref::<T>()
    }
}

impl Release for Inode {
    fn release(&self) {
        self.sb().evict(self);
    }
}

/// A mounted file system instance.
///
/// Lifetime: owned by the mount table (`Arc`). Inodes point to it without a count (a shared
/// counter per inode creation would put one hot cache line back on every create); the VFS
/// drops a superblock only after its inode list is empty, and leaks it otherwise (Linux's
/// "busy inodes after unmount").
pub struct SuperBlock {
    /// The device number (`st_dev`).
    pub dev: u64,
    /// The file system.
    pub fs: Arc<dyn FileSystem>,
    /// The design of its lock-protected structures.
    pub locking: Locking,
    inodes: InodeList,
    /// Keyed by the hash alone, which is the inode number itself (no key copy: 24-byte nodes).
    icache: RcuHash<(), usize>,
    /// Linux's `s_vfs_rename_mutex`: serializes cross-directory renames, so the ancestry
    /// checked by rename cannot change under it.
    pub rename_mutex: parking_lot::Mutex<()>,
    /// `fs.revalidates()`, cached: path walk checks it per directory.
    pub revalidates: bool,
    /// Positive dentries naming this superblock's inodes (changed when a dentry gains or
    /// loses its inode, never on a cached lookup). umount reads it to tell whether anyone
    /// still holds a dentry of the file system (see `mount/mod.rs`). Per CPU, so that creates
    /// and unlinks on different CPUs share no counter.
    pub(crate) dentries: PerCpuCounter,
    /// `MS_RDONLY`, and the remount handshake (`mount::write`): every mount has a
    /// superblock of its own, so this is the mount's flag too.
    write_gate: crate::mount::write::WriteGate,
    /// Write accesses in flight and held by files open for writing, per CPU (read only by
    /// a remount read-only).
    writers: PerCpuCounter,
}

impl SuperBlock {
    /// A superblock of `fs` with device number `dev`.
    pub fn new(dev: u64, fs: Arc<dyn FileSystem>, locking: Locking) -> SuperBlock {
        SuperBlock {
            dev,
            locking,
            inodes: InodeList::with_locking(locking),
            // Miri (Tree Borrows) spends seconds per superblock on 4096 buckets, and the
            // bucket count changes no code path: 16 there.
            icache: RcuHash::with_class(
                if cfg!(miri) { 4 } else { 12 },
                &crate::lockclass::INODE_HASH_BUCKET,
            ),
            rename_mutex: parking_lot::Mutex::new(()),
            revalidates: fs.revalidates(),
            dentries: PerCpuCounter::new(locking == Locking::Scalable),
            fs,
            write_gate: crate::mount::write::WriteGate::new(false),
            writers: PerCpuCounter::new(locking == Locking::Scalable),
        }
    }

    /// The same superblock, read-only (`MS_RDONLY`) or not. Set before the file system
    /// fills it, which may look at it ([`is_read_only`](Self::is_read_only)).
    pub fn with_read_only(mut self, read_only: bool) -> SuperBlock {
        self.write_gate = crate::mount::write::WriteGate::new(read_only);
        self
    }

    /// Whether it is read-only now.
    pub fn is_read_only(&self) -> bool {
        self.write_gate.is_read_only()
    }

    /// Linux's `mnt_want_write`: a write access, held until the guard drops, or `EROFS` if
    /// the file system is read-only. Taken by every call that changes it, where Linux
    /// takes it, so that its `EROFS` comes in Linux's order among the call's other errors,
    /// and held until the change is made, so that a remount read-only cannot succeed
    /// in between (`mount::write`).
    pub fn want_write(&self) -> crate::SysResult<crate::mount::WriteAccess<'_>> {
        if self.write_gate.get_write(&self.writers) {
            Ok(crate::mount::WriteAccess { sb: self })
        } else {
            Err(crate::Errno::EROFS)
        }
    }

    /// Gives back a write access that a [`WriteAccess`](crate::mount::WriteAccess) kept
    /// past its guard (an open file's, at its last close).
    pub(crate) fn put_write_access(&self) {
        self.write_gate.put_write(&self.writers);
    }

    /// A remount read-only (`sb_prepare_remount_readonly`): `EBUSY` while a change is in
    /// flight, a file is open for writing, or an unlinked file is still open (an inode
    /// with no links is still on the list). The caller holds the mount table mutex.
    pub(crate) fn make_read_only(&self) -> crate::SysResult<()> {
        let unlinked_in_use = || {
            let mut found = false;
            self.for_each_inode(|i| found |= i.nlink() == 0);
            found
        };
        if self.is_read_only() {
            // Linux asks nothing of a file system that is read-only already.
            return Ok(());
        }
        // First without the hold, so that a file system that is busy anyway fails at once
        // rather than stall its writers for a walk of every inode (the walk under the hold
        // is still needed: an unlink may come in between).
        if unlinked_in_use() {
            return Err(crate::Errno::EBUSY);
        }
        if self
            .write_gate
            .make_read_only(&self.writers, unlinked_in_use)
        {
            Ok(())
        } else {
            Err(crate::Errno::EBUSY)
        }
    }

    /// A remount read-write. The caller holds the mount table mutex.
    pub(crate) fn make_writable(&self) {
        self.write_gate.make_writable();
    }

    /// Creates an inode with one reference, on the superblock's list and in the inode cache.
    /// Called by file systems.
    pub fn new_inode(&self, n: NewInode) -> InodeRef {
        let t = now();
        let r = Erc::new(Inode {
            ino: n.ino,
            sb: self,
            mode: AtomicU16::new(u16::try_from(n.mode).expect("type and permission bits")),
            flags: AtomicU16::new(0),
            uid: AtomicU32::new(n.uid),
            gid: AtomicU32::new(n.gid),
            nlink: AtomicU32::new(n.nlink),
            size: AtomicU64::new(0),
            rdev: n.rdev,
            atime: AtomicTime::new(t),
            mtime: AtomicTime::new(t),
            ctime: AtomicTime::new(t),
            btime_ns: t.sec.saturating_mul(1_000_000_000).saturating_add(t.nsec),
            rwsem: RwLock::new(()),
            ns_lock: OnceBox::new(),
            private: n.private,
            lock_ctx: OnceLock::new(),
            sb_node: [AtomicU64::new(u64::MAX), AtomicU64::new(0)],
        });
        let raw = Erc::as_raw(&r) as usize;
        // Non-zero: a heap address (the list stores it in an `Option` without a tag).
        let node = self
            .inodes
            .add(std::num::NonZeroUsize::new(raw).expect("a heap address"));
        for (w, b) in r.sb_node.iter().zip(node.to_bits()) {
            w.store(b, Ordering::Relaxed);
        }
        let ino = n.ino;
        if self.icache.insert_unique(ino, (), raw, |_| true).is_err() {
            // A file system reusing a live inode number is a bug in that file system.
            debug_assert!(false, "duplicate inode number {ino}");
        }
        r
    }

    /// The cached inode numbered `ino`, if it is live (`iget` for cached inodes). Lock-free.
    pub fn iget(&self, ino: u64) -> Option<InodeRef> {
        let g = scalevfs_primitives::epoch::pin();
        let raw = self.icache.lookup(ino, &g, |_| true)?;
        // SAFETY: pinned, and an inode leaves the icache (in `evict`) before its memory is
        // retired.
        unsafe { Erc::try_get_raw(raw as *const ErcInner<Inode>) }
    }

    fn evict(&self, inode: &Inode) {
        let ino = inode.ino;
        self.icache.remove(ino, |_, _| true);
        let bits = inode.sb_node.each_ref().map(|w| w.load(Ordering::Relaxed));
        if bits[0] != u64::MAX {
            self.inodes.remove(&InodeListNode::from_bits(bits));
        }
        self.fs.evict_inode(inode);
    }

    /// The number of live inodes (walks nothing: the list keeps a count).
    pub fn inode_count(&self) -> usize {
        self.inodes.len()
    }

    /// Calls `f` on every live inode, holding a reference to it: the walk of `evict_inodes`
    /// and `drop_pagecache_sb`. It takes a reference under the shard lock (skipping inodes
    /// already being evicted, whose count reached zero), drops the lock to run `f`, and
    /// drops the previous inode's reference there too (`iput(toput_inode)`): the last
    /// reference evicts, which takes a shard lock.
    pub fn for_each_inode(&self, mut f: impl FnMut(&InodeRef)) {
        let mut cur = self.inodes.cursor();
        let mut prev: Option<InodeRef> = None;
        while let Some(raw) = cur.next() {
            // SAFETY: we hold the shard lock, and an inode leaves the list (under that lock)
            // before its memory is retired, so `raw` is allocated.
            let Some(r) = (unsafe { Erc::try_get_raw(raw.get() as *const ErcInner<Inode>) }) else {
                continue;
            };
            let old = prev.replace(r);
            let cur_ref = prev.as_ref().expect("just set");
            cur.unlocked(|| {
                f(cur_ref);
                drop(old);
            });
        }
        drop(cur);
        drop(prev);
    }
}

/// Maps an errno-free size check: `Err(EFBIG)` if `end` exceeds `max`.
pub fn check_size(end: u64, max: u64) -> Result<(), Errno> {
    if end > max {
        Err(Errno::EFBIG)
    } else {
        Ok(())
    }
}
