//! Mounts and the mount table.
//!
//! A [`Mount`] attaches a superblock's root dentry at a mountpoint dentry of a parent mount.
//! A mount stays allocated while anybody can name it: a [`Path`] holds a count on a
//! dentry in it, which keeps it busy (so never unmounted), and a pinned walker that read it
//! from the table keeps its memory, which an unmounted mount gives back only after a grace
//! period (`MountTable::free`). So a path names its mount with a plain pointer: no shared
//! counter is touched when a path is copied.
//!
//! The table maps `(parent mount, mountpoint dentry)` to the child mount. It is an immutable
//! snapshot behind an epoch pointer: path walk loads it without a lock (only when it steps
//! on a dentry whose MOUNTED flag is set); `mount` and `umount` copy, change and republish
//! it under the table mutex, and bump the rename sequence so concurrent rcu-walks
//! re-validate.
//!
//! ## Unmount without a mount count
//! Linux counts every path that names a mount (`mnt_count`, per CPU) and `umount` checks
//! that count. We count nothing per path, so `umount` (`VfsCore::umount`) asks the dentries
//! instead. With the table mutex held it sets the mount's state to `UMOUNTING`, issues a
//! SeqCst fence, and, inside a rename-lock write section (so that rcu-walks that began
//! earlier re-validate and later ones wait), drops the unused cached dentries of the
//! superblock and calls the mount busy if any positive dentry of it but the root is still
//! alive (someone holds it: an open file, a cwd, a walk in progress) or the root has counts
//! beyond the mount's own and the caller's. Busy: the state goes back to `ATTACHED`.
//! Not busy: the mount leaves the table and becomes `DETACHED`.
//!
//! A ref-walk that found the mount in the table enters it with [`Mount::enter`]: a count on
//! the root, a SeqCst fence, *then* a look at the state. The two fences make it Dekker's
//! pattern: either umount's count check sees the walker's count (busy), or the walker sees
//! the state umount set. A walker that sees `UMOUNTING` drops its count and waits for the
//! decision, so a failed umount never shows anyone the covered directory; one that sees
//! `DETACHED` stays on the mountpoint, as if the mount had already gone. The state itself
//! publishes nothing (stores and loads are Relaxed around the fences).
//!
//! The mount owns one count of its root ([`MountDentry`]) until the superblock is shut
//! down, and one of its mountpoint until it is detached (Linux's `umount_mnt` puts the
//! mountpoint then: a lazily detached mount that is still in use must not keep a dentry
//! of its parent's file system busy, or that file system could not be unmounted). It
//! gives them back (the root's with `put_if_last`: a walker on its way out may still count
//! it for a moment) but keeps the pointers, which pinned walkers may still follow (a dead
//! dentry refuses new counts): `..` at a mount's root counts the mountpoint with
//! `try_get`, pinned since before it read the mount attached. `DETACHED` is final: umount
//! checks it again under the table mutex, so no later umount moves a detached mount to
//! `UMOUNTING` and back to `ATTACHED`. Why the pin is enough: the
//! detach stores `DETACHED` before the put that may kill the mountpoint, whose memory is
//! then retired through the epoch. The retirement's SeqCst fence and the walker's pin
//! fence are ordered one way or the other: either the walker reads `DETACHED` and does
//! not touch the mountpoint, or the epoch cannot free it before the walker unpins. A
//! mountpoint may itself be the root of a mount that the same lazy umount detaches and
//! finds unused; so after its `try_get` the walker issues a SeqCst fence and looks at its
//! own mount's state again, and gives the count back if it was detached. Dekker's pattern
//! with the fence in `mount_busy`: the busy check sees the walker's count, or the walker
//! lets go, and the shutdown (`release_last`) never waits on it.
//!
//! The state word and both handshakes are `MountState` (`state_impl.rs`), which the
//! loom models in `loom_tests.rs` run on loom's atomics: a walker entering from the table
//! against a plain and a lazy umount, `..` against a lazy umount of the mount below, and a
//! plain umount against a lazy one. A model fails when a walker's fence is taken out, or
//! the busy check's (`fence_before_busy_check`; a plain umount has a second one in
//! `begin_umount`), or umount's second look at `DETACHED` under the mutex, or when a
//! walker that meets `UMOUNTING` gives up instead of waiting for the verdict.
//!
//! Shutting down a detached, unused mount's file system is claimed first
//! (`VfsCore::claim_shutdown`: its superblock leaves the list of live ones), pinned or
//! under the table mutex; only the claimant frees the mount, so it runs the file system's
//! `kill_sb` unpinned and no other thread's retirements wait for it.
//!
//! Read-only mounts, remounting, and the write accesses that changing calls and files
//! open for writing hold are in [`mod@write`].
//!
//! Lock order: table mutex -> rename lock (write) -> d_lock. The superblock list's mutex
//! is a leaf.

use crate::dentry::{Dentry, DentryRef};
use crate::inode::SuperBlock;
use scalevfs_primitives::epoch::{Atomic, Guard, Owned};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

mod sync {
    pub use crossbeam_utils::Backoff;
    pub use std::sync::atomic::{fence, AtomicU8, Ordering};
}

include!("state_impl.rs");

#[cfg(test)]
mod loom_tests;

pub mod write;
pub use write::WriteAccess;

/// A dentry a mount holds one count of until `MountDentry::release`. The pointer stays
/// valid for readers that hold a reference into the mount, or that are pinned (as for any
/// dentry: its memory outlives the grace period after it dies).
pub struct MountDentry {
    ptr: *const Dentry,
    released: AtomicBool,
}

impl MountDentry {
    fn new(d: DentryRef) -> MountDentry {
        MountDentry {
            ptr: DentryRef::into_raw(d),
            released: AtomicBool::new(false),
        }
    }
    /// The dentry's address.
    pub fn as_ptr(&self) -> *const Dentry {
        self.ptr
    }
    /// The dentry itself. For a mount's root: for a caller that holds a reference into
    /// the mount, or is pinned. For a mountpoint, whose count a detach gives back: for a
    /// caller that holds the table mutex and saw the mount attached, or that pinned before
    /// it saw the mount attached (a released one may be dead, but its memory is there
    /// until the caller unpins; see the module docs).
    pub fn dentry(&self) -> &Dentry {
        // SAFETY: see above; the mount's count or the caller's pin keeps it allocated.
        unsafe { &*self.ptr }
    }
    /// A counted reference. Only for callers that know the count is not given back: a
    /// mount's root, while they hold a reference into the mount or know it busy.
    pub fn get(&self) -> DentryRef {
        // SAFETY: the mount's own count keeps the dentry alive: not released (see above).
        unsafe { DentryRef::from_borrowed(self.ptr) }
    }
    /// Gives the mount's count back (once).
    fn release(&self) {
        if !self.released.swap(true, Ordering::AcqRel) {
            // SAFETY: the count `new` took over from the `DentryRef`, given back once.
            drop(unsafe { DentryRef::from_raw(self.ptr) });
        }
    }
    /// Gives the mount's count back once it is the last one: a detached mount's root may
    /// still be counted for a moment by a walker on its way out (`Mount::enter` saw the
    /// mount detached); the root must die with our count, so that no walker's `try_get`
    /// revives it and the shutdown finds its inode gone.
    fn release_last(&self) {
        if self.released.load(Ordering::Acquire) {
            return;
        }
        let backoff = crossbeam_utils::Backoff::new();
        // SAFETY: not released yet: we own a count.
        while !unsafe { crate::dentry::put_if_last(self.ptr) } {
            backoff.snooze();
        }
        self.released.store(true, Ordering::Release);
    }
}

/// See the module docs.
pub struct Mount {
    /// The mount id (`STATX_MNT_ID`, `/proc/self/mountinfo`).
    pub id: u64,
    /// The mounted superblock.
    pub sb: Arc<SuperBlock>,
    root: MountDentry,
    /// Parent mount and mountpoint (`None` for the root mount and internal mounts).
    parent: Option<(MntRef, MountDentry)>,
    /// Attached, being unmounted, or detached (see the module docs).
    pub(crate) state: MountState,
    /// `MNT_EXPIRE`: set by the first expiry request, unmounted by the second unless the
    /// mount was used in between ([`note_use`](Mount::note_use)).
    pub(crate) expiry_mark: AtomicBool,
}

// SAFETY: the raw dentry pointers are counted (or epoch-protected) as the module docs say;
// everything else is Send + Sync.
unsafe impl Send for Mount {}
// SAFETY: as above; the flags are atomics.
unsafe impl Sync for Mount {}

impl Mount {
    /// Mount `id` of `sb` whose root is `root`, on `parent` (mount and mountpoint; `None` for a root or internal mount).
    pub fn new(
        id: u64,
        sb: Arc<SuperBlock>,
        root: DentryRef,
        parent: Option<(MntRef, DentryRef)>,
    ) -> Mount {
        Mount {
            id,
            sb,
            root: MountDentry::new(root),
            parent: parent.map(|(m, d)| (m, MountDentry::new(d))),
            state: MountState::new(),
            expiry_mark: AtomicBool::new(false),
        }
    }
    /// The mount was used (a path walk ended in it, or a file opened in it was closed):
    /// clears a pending `MNT_EXPIRE` mark, as Linux's `mntput` does. The mark is read
    /// first and written only when set, so the hot path only reads the line.
    #[inline]
    pub fn note_use(&self) {
        // Relaxed: the mark is advisory (Linux: READ_ONCE/WRITE_ONCE); an expiry request
        // racing a use may see either, as in Linux.
        if self.expiry_mark.load(Ordering::Relaxed) {
            self.expiry_mark.store(false, Ordering::Relaxed);
        }
    }
    /// The root dentry, uncounted (see [`MountDentry`]).
    pub fn root(&self) -> &MountDentry {
        &self.root
    }
    /// Is `d` this mount's root?
    pub fn is_root(&self, d: &Dentry) -> bool {
        std::ptr::eq(d, self.root.ptr)
    }
    /// The parent mount and mountpoint; `None` for the root mount, internal mounts and
    /// mounts that umount detached (Linux: a detached mount has no parent).
    pub fn parent(&self) -> Option<(MntRef, &MountDentry)> {
        if self.is_detached() {
            return None;
        }
        self.parent.as_ref().map(|(m, d)| (*m, d))
    }
    /// Whether the mount was detached (by any umount; final).
    pub fn is_detached(&self) -> bool {
        self.state.is_detached()
    }
    /// Enters the mount from the table (ref-walk): a count on its root, or `None` if
    /// umount detached it meanwhile (see `MountState::enter` and the module docs).
    pub fn enter(&self) -> Option<DentryRef> {
        // SAFETY: the caller found us in the table while pinned; until the grace period
        // after umount gives the root back, its memory is allocated.
        self.state
            .enter(|| unsafe { DentryRef::try_get(self.root.ptr) })
    }
    /// The mountpoint's count, taken over from the mount (once; `None` after that or for
    /// a mount with no parent): the mount was detached (module docs), and the caller
    /// holds the table mutex, so no other detach runs.
    pub(crate) fn take_mountpoint(&self) -> Option<DentryRef> {
        debug_assert!(self.is_detached());
        let (_, mp) = self.parent.as_ref()?;
        if mp.released.swap(true, Ordering::AcqRel) {
            return None;
        }
        // SAFETY: the count `MountDentry::new` took over, handed on once (the flag).
        Some(unsafe { DentryRef::from_raw(mp.ptr) })
    }
    /// Gives back the root and mountpoint counts (superblock shutdown of a detached,
    /// unused mount; see [`MountDentry::release_last`]).
    pub(crate) fn release(&self) {
        self.root.release_last();
        if let Some((_, mp)) = &self.parent {
            mp.release();
        }
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        // VFS teardown: give the counts back without waiting (whatever still holds the
        // root outlived the VFS, and the teardown leaks rather than frees then).
        self.root.release();
        if let Some((_, mp)) = &self.parent {
            mp.release();
        }
    }
}

/// How a file system is mounted: the `mount(2)` flags kept here.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct MountOptions {
    /// `MS_RDONLY`: nothing on the mount may be changed. Every call that would change a
    /// file, a directory's entries or any attribute fails with `EROFS`, in Linux's order
    /// among the call's other errors; reads leave atimes alone; `statfs` reports
    /// `ST_RDONLY`. FIFOs, sockets and device nodes on it stay writable, as in Linux. A
    /// remount changes it ([`mod@write`]).
    pub read_only: bool,
}

impl MountOptions {
    /// Read-write, the default.
    pub fn new() -> MountOptions {
        MountOptions::default()
    }
    /// Sets [`read_only`](Self::read_only).
    pub fn read_only(mut self, read_only: bool) -> MountOptions {
        self.read_only = read_only;
        self
    }
}

/// A mount, named without a count (mounts outlive every path that names them).
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub struct MntRef(pub(crate) *const Mount);

// SAFETY: Mount is Sync, and stays allocated while a path names it or a pinned walker
// holds it (the module docs).
unsafe impl Send for MntRef {}
// SAFETY: as above.
unsafe impl Sync for MntRef {}

impl std::ops::Deref for MntRef {
    type Target = Mount;
    fn deref(&self) -> &Mount {
        // SAFETY: a mount is freed only after a grace period once no path names it (see
        // the module docs); a `MntRef` comes from such a path or from a pinned walk.
        unsafe { &*self.0 }
    }
}

impl MntRef {
    /// The mount's address (identity only).
    pub fn addr(self) -> usize {
        self.0 as usize
    }
    /// The mount whose [`addr`](Self::addr) is `addr`.
    ///
    /// # Safety
    /// `addr` must come from `addr()` of a mount that is still allocated: one that a path
    /// the caller holds names, or that the caller read while pinned (see the module docs).
    pub unsafe fn from_addr(addr: usize) -> MntRef {
        MntRef(addr as *const Mount)
    }
}

/// A location: a mount and a dentry in it (`struct path`).
#[derive(Clone)]
pub struct Path {
    /// The mount.
    pub mnt: MntRef,
    /// The dentry in it.
    pub dentry: DentryRef,
}

impl PartialEq for Path {
    fn eq(&self, o: &Path) -> bool {
        self.mnt == o.mnt && self.dentry == o.dentry
    }
}

/// The owner of one mount in the table's list: a heap allocation that `MntRef`s point
/// into, so it must not move when the list grows. It holds the pointer that
/// `Box::leak` gave rather than the `Box`: moving a `Box` asserts that it is the only
/// way to the memory (a retag, under Stacked and Tree Borrows alike), which every
/// `MntRef` walkers hold would contradict.
pub(crate) struct OwnedMount(std::ptr::NonNull<Mount>);

// SAFETY: an owner like `Box<Mount>`, and `Mount` is Send + Sync.
unsafe impl Send for OwnedMount {}
// SAFETY: as above.
unsafe impl Sync for OwnedMount {}

impl OwnedMount {
    fn new(m: Mount) -> OwnedMount {
        OwnedMount(std::ptr::NonNull::from(Box::leak(Box::new(m))))
    }
    /// The mount, named without a count.
    pub(crate) fn mnt(&self) -> MntRef {
        MntRef(self.0.as_ptr())
    }
    /// Gives up ownership: the pointer, for the caller to free as a `Box`.
    fn into_raw(self) -> *mut Mount {
        let p = self.0.as_ptr();
        std::mem::forget(self);
        p
    }
}

impl std::ops::Deref for OwnedMount {
    type Target = Mount;
    fn deref(&self) -> &Mount {
        // SAFETY: owned (allocated until `drop` or `into_raw`); only shared references to
        // a mount are ever made.
        unsafe { self.0.as_ref() }
    }
}

impl Drop for OwnedMount {
    fn drop(&mut self) {
        // SAFETY: from `Box::leak` in `new`, freed once (here or by `into_raw`'s caller).
        drop(unsafe { Box::from_raw(self.0.as_ptr()) });
    }
}

/// Every mount (see [`OwnedMount`]).
pub(crate) type MountList = Vec<OwnedMount>;

/// The mount table (see the module docs).
pub struct MountTable {
    all: parking_lot::Mutex<MountList>,
    map: Atomic<HashMap<(usize, usize), usize>>,
}

impl Default for MountTable {
    fn default() -> Self {
        MountTable {
            all: parking_lot::Mutex::new(Vec::new()),
            map: Atomic::new(HashMap::new()),
        }
    }
}

impl MountTable {
    /// The mount attached at `(mnt, d)`, if any. Lock-free.
    pub fn lookup(&self, mnt: MntRef, d: *const Dentry, g: &Guard) -> Option<MntRef> {
        // Acquire: pairs with the Release publication in `add`.
        let m = self.map.load(Ordering::Acquire, g);
        // SAFETY: snapshots are retired through the epoch; `g` is pinned.
        let m = unsafe { m.deref() };
        m.get(&(mnt.addr(), d as usize))
            .map(|&p| MntRef(p as *const Mount))
    }

    /// Adds a mount; returns it. The caller holds the rename lock for writing (so that
    /// concurrent rcu-walks re-validate) and sets nothing else: the mountpoint's MOUNTED
    /// flag is set here, after the table is published.
    pub fn add(&self, m: Mount) -> MntRef {
        self.add_locked(&mut self.all.lock(), m)
    }

    /// [`add`](Self::add) with the table mutex ([`lock`](Self::lock)) held.
    pub(crate) fn add_locked(&self, all: &mut MountList, m: Mount) -> MntRef {
        let b = OwnedMount::new(m);
        let r = b.mnt();
        if let Some((pm, mp)) = &b.parent {
            self.republish(|map| {
                map.insert((pm.addr(), mp.as_ptr() as usize), r.0 as usize);
            });
            mp.dentry().set_mounted(true);
        }
        all.push(b);
        r
    }

    /// How many mounts exist (attached, or detached and not yet shut down).
    pub fn count(&self) -> usize {
        self.all.lock().len()
    }

    /// The table mutex: held across an umount's decision, so that no mount or umount
    /// changes the tree meanwhile.
    pub(crate) fn lock(&self) -> parking_lot::MutexGuard<'_, MountList> {
        self.all.lock()
    }

    /// The attached mounts whose parent is `m` (with the table mutex held).
    pub(crate) fn children(all: &[OwnedMount], m: MntRef) -> Vec<MntRef> {
        all.iter()
            .filter(|c| !c.is_detached() && c.parent.as_ref().is_some_and(|(p, _)| *p == m))
            .map(|c| c.mnt())
            .collect()
    }

    /// Takes `gone` out of the table for good (with the table mutex and the rename lock
    /// for writing held): they become `DETACHED`, their mountpoints lose MOUNTED.
    pub(crate) fn detach(&self, gone: &[MntRef]) {
        self.republish(|map| {
            map.retain(|_, child| !gone.iter().any(|g| g.addr() == *child));
        });
        for m in gone {
            if let Some((_, mp)) = &m.parent {
                mp.dentry().set_mounted(false);
            }
            // The table change above is ordered for rcu-walks by the rename lock; ref-walks
            // that loaded the old table meet the state in `enter`.
            m.state.detach();
        }
    }

    /// Frees a detached mount whose file system was shut down: nobody holds a path in it
    /// (its dentries are all gone), but an rcu-walk that read the table before the mount
    /// was detached may still hold the pointer, or a dead inode's pointer to the
    /// superblock, so the mount, and with it the superblock and the file system object,
    /// are dropped after a grace period (on this thread, by `retire`: their drops take no
    /// lock, as tmpfs's and kernfs's do not). Without this every mount and unmount would
    /// keep its superblock (hash buckets, per-CPU lists) until the VFS goes.
    pub(crate) fn free(&self, m: MntRef) {
        let mut all = self.all.lock();
        let Some(i) = all.iter().position(|b| b.mnt() == m) else {
            return;
        };
        debug_assert!(m.is_detached());
        // `remove`, not `swap_remove`: `clear` relies on children coming after parents.
        let b = all.remove(i);
        drop(all);
        // SAFETY: out of the table and of `all`, so no new reference can be made; pinned
        // walkers that loaded it earlier unpin before the grace period ends.
        unsafe { crate::retire::retire_box(b.into_raw()) };
    }

    /// Publishes a changed copy of the map (with the table mutex held).
    fn republish(&self, change: impl FnOnce(&mut HashMap<(usize, usize), usize>)) {
        let g = scalevfs_primitives::epoch::pin();
        // SAFETY: pinned; the current snapshot is replaced only under the table mutex, which
        // our caller holds. Acquire: pairs with the previous publication's Release.
        let cur = unsafe { self.map.load(Ordering::Acquire, &g).deref() };
        let mut next = cur.clone();
        change(&mut next);
        // Release: the new snapshot's contents are visible to lookups (pairs with Acquire).
        let old = self.map.swap(Owned::new(next), Ordering::AcqRel, &g);
        // SAFETY: the old snapshot is unreachable; pinned readers keep it alive.
        unsafe { g.defer_destroy(old) };
    }

    /// Drops every mount (VFS teardown): children first.
    pub fn clear(&self) -> Vec<Arc<SuperBlock>> {
        let mut all = std::mem::take(&mut *self.all.lock());
        let mut sbs = Vec::new();
        while let Some(m) = all.pop() {
            if let Some((_, mp)) = &m.parent {
                if !m.is_detached() {
                    mp.dentry().set_mounted(false);
                }
            }
            sbs.push(m.sb.clone());
            drop(m);
        }
        sbs
    }
}

impl Drop for MountTable {
    fn drop(&mut self) {
        // SAFETY: `&mut self`: no reader is left.
        unsafe {
            let g = scalevfs_primitives::epoch::unprotected();
            let m = self.map.load(Ordering::Relaxed, g);
            if !m.is_null() {
                drop(m.into_owned());
            }
        }
    }
}
