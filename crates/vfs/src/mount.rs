//! Mounts and the mount table.
//!
//! A [`Mount`] attaches a superblock's root dentry at a mountpoint dentry of a parent mount.
//! Mounts live as long as the VFS (a detached mount stays allocated), so a [`Path`] can
//! name its mount with a plain pointer: no shared counter is touched when a path is copied.
//!
//! The table maps `(parent mount, mountpoint dentry)` to the child mount. It is an immutable
//! snapshot behind an epoch pointer: path walk loads it without a lock (only when it steps
//! on a dentry whose MOUNTED flag is set); `mount` copies, changes and republishes it under
//! the table mutex, and bumps the rename sequence so concurrent rcu-walks re-validate.
//!
//! Lock order: table mutex -> rename lock (write) -> d_lock.

use crate::dentry::{Dentry, DentryRef};
use crate::inode::SuperBlock;
use crossbeam_epoch::{Atomic, Guard, Owned};
use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// See the module docs.
pub struct Mount {
    pub id: u64,
    pub sb: Arc<SuperBlock>,
    pub root: DentryRef,
    /// Parent mount and mountpoint (`None` for the root mount).
    pub parent: Option<(MntRef, DentryRef)>,
}

/// A mount, named without a count (mounts outlive every path that names them).
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub struct MntRef(pub(crate) *const Mount);

// SAFETY: Mount is Sync and lives as long as the VFS.
unsafe impl Send for MntRef {}
// SAFETY: as above.
unsafe impl Sync for MntRef {}

impl std::ops::Deref for MntRef {
    type Target = Mount;
    fn deref(&self) -> &Mount {
        // SAFETY: mounts are freed only when the VFS is, after every path is gone.
        unsafe { &*self.0 }
    }
}

impl MntRef {
    pub fn addr(self) -> usize {
        self.0 as usize
    }
    /// The mount whose [`addr`](Self::addr) is `addr`.
    ///
    /// # Safety
    /// `addr` must come from `addr()` of a mount of a VFS that is still alive.
    pub unsafe fn from_addr(addr: usize) -> MntRef {
        MntRef(addr as *const Mount)
    }
}

/// A location: a mount and a dentry in it (`struct path`).
#[derive(Clone)]
pub struct Path {
    pub mnt: MntRef,
    pub dentry: DentryRef,
}

impl PartialEq for Path {
    fn eq(&self, o: &Path) -> bool {
        self.mnt == o.mnt && self.dentry == o.dentry
    }
}

/// The mount table (see the module docs).
pub struct MountTable {
    /// Boxed: `MntRef`s point at the mounts, so they must not move when the vector grows.
    #[allow(clippy::vec_box)]
    all: parking_lot::Mutex<Vec<Box<Mount>>>,
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

    /// Adds a mount; returns it. `publish` runs after the table is updated (the caller sets
    /// the mountpoint's MOUNTED flag and bumps the rename sequence there).
    pub fn add(&self, m: Mount) -> MntRef {
        let mut all = self.all.lock();
        let b = Box::new(m);
        let r = MntRef(&*b);
        if let Some((pm, mp)) = &b.parent {
            let g = crossbeam_epoch::pin();
            // SAFETY: pinned; the current snapshot is replaced only under `all`, which we hold.
            // Acquire: pairs with the previous publication's Release.
            let cur = unsafe { self.map.load(Ordering::Acquire, &g).deref() };
            let mut next = cur.clone();
            next.insert((pm.addr(), mp.as_ptr() as usize), r.0 as usize);
            // Release: the new snapshot's contents are visible to lookups (pairs with Acquire).
            let old = self.map.swap(Owned::new(next), Ordering::AcqRel, &g);
            // SAFETY: the old snapshot is unreachable; pinned readers keep it alive.
            unsafe { g.defer_destroy(old) };
            mp.set_mounted(true);
        }
        all.push(b);
        r
    }

    /// Drops every mount (VFS teardown): children first.
    pub fn clear(&self) -> Vec<Arc<SuperBlock>> {
        let mut all = std::mem::take(&mut *self.all.lock());
        let mut sbs = Vec::new();
        while let Some(m) = all.pop() {
            if let Some((_, mp)) = &m.parent {
                mp.set_mounted(false);
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
            let g = crossbeam_epoch::unprotected();
            let m = self.map.load(Ordering::Relaxed, g);
            if !m.is_null() {
                drop(m.into_owned());
            }
        }
    }
}
