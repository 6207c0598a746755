//! Locking a directory for a namespace change: exclusively, or (scalable design) shared
//! with a lock on the names changed.
//!
//! Linux serializes every change of a directory's names on the directory's `i_rwsem`.
//! Here a change that adds or removes one name in one directory (create by
//! `open(O_CREAT)`, `mknod`, `mkdir`, `symlink`, `link`; `unlink`; `rmdir`) or renames
//! non-directories within the directory or across two directories (below) may instead
//! take:
//!
//! 1. the directory's **namespace lock** ([`Inode::ns_lock`], a per-CPU reader/writer
//!    lock, Linux's `percpu_rw_semaphore`, allocated by the directory's first namespace
//!    change, shared or exclusive, through one cell) *shared*: its acquisition writes
//!    only the calling CPU's reader indicator; and
//! 2. the **name lock** of each name it changes: one of [`NameLocks`], a table of mutexes
//!    hashed by (parent dentry, name), so that two changes of one name are serialized as
//!    `i_rwsem` serialized them, and two changes of different names (almost always)
//!    take different mutexes.
//!
//! It does so only when the file system says the directory takes concurrent changes of
//! different names ([`FileSystem::shared_name_changes`]: tmpfs's hashed directories,
//! which keep the directory's size, link count and times per bucket). Everything else
//! takes the directory **exclusively**: its `rwsem` for writing, then its namespace lock
//! for writing, which waits for the shared changes in progress and keeps new ones out.
//! That covers renames that move or replace a directory (and a directory being replaced,
//! as `vfs_rename` locks it), a rename across directories whose try below failed, the
//! directory being removed by `rmdir` (below), a directory being mounted on, and every
//! change in the legacy design.
//!
//! What the shared mode leaves to other locks:
//! * **Lookups** that miss the dcache (ref-walk, [`VfsCore::lookup_one`]) take the
//!   directory's `rwsem` shared *and* the name's lock, so a lookup cannot cache an answer
//!   that a concurrent unlink or create of that name has just made stale. Readdir takes
//!   the `rwsem` shared, and the file system keeps its positions stable under concurrent
//!   changes.
//! * **The directory itself**: `rmdir` of it (and a rename replacing it) takes it
//!   exclusively, so a shared change in it runs entirely before (and then `rmdir` sees an
//!   entry: `ENOTEMPTY`) or after (and then sees the link count 0: `ENOENT`). Its parent
//!   needs no more than the shared side and the name's lock: what `rmdir` changes in the
//!   parent is one name and the parent's link count, which the hashed directory keeps per
//!   bucket; a rename that moves the victim takes the parent exclusively. `mount` holds
//!   its mountpoint exclusively too, and `rmdir` checks for a mount under the victim's
//!   lock, so a directory is never both removed and mounted on. Under the parent's
//!   shared side the victim is only *tried* ([`VfsCore::try_lock_dir`]: its `rwsem` and
//!   its namespace lock, neither waited for): a rename across directories takes both
//!   `rwsem`s and then waits for each directory's shared holders to drain, so a shared
//!   holder must never wait for a directory's `rwsem`; and a shared change inside the
//!   victim may wait for a name lock that hashes like the one `rmdir` holds, so `rmdir`
//!   must not wait for those to drain either. If the try fails, `rmdir` lets everything
//!   go and starts again with the parent exclusive (and no name lock), as before.
//!
//! # Renames across directories
//!
//! A rename of a non-directory from one directory to another (and, for
//! `RENAME_EXCHANGE`, of a non-directory target back) moves no directory, so it needs
//! neither the superblock's rename mutex nor the loop checks, and it changes one name in
//! each directory. It holds both directories shared
//! ([`VfsCore::lock_names_across`]): the namespace lock of the directory at the lower
//! address *waited for*, the other's only *tried* (`SeqRwLock::try_read_lock`), then the
//! two names' locks together, lowest index first. A failed try lets everything go, and
//! the rename takes both directories exclusively instead (by address with the second
//! `rwsem` tried, else under the rename mutex, ancestor first); so does one that finds
//! a directory on either side once it holds the names (the dcache's answer beforehand is
//! only a hint that skips the shared attempt). Only the second lock is tried because an
//! exclusive locker may hold one directory's namespace lock for writing while it waits
//! for the other's readers to drain (a rename under the mutex locks an ancestor before
//! its descendant, `rmdir`'s retry the parent before the victim, whatever their
//! addresses): waiting for the second could close a cycle; waiting for the first, with
//! nothing held, cannot. Against the others:
//! * **`rmdir` of either directory** needs it exclusively: its shared attempt only tries
//!   the victim, which fails while the rename holds it shared, and its retry waits for
//!   the rename to leave; a rename that comes second finds the directory dead (its link
//!   count 0: `may_create`'s or `may_delete`'s `ENOENT`), as the exclusive path did.
//! * **A directory rename** that moves either directory holds only the two parents it
//!   changes (exclusively, under the mutex), not the moved directory, so it runs beside
//!   the file's rename: that rename works on the directories' inodes and dentries, which
//!   keep their identity wherever they move, and a file's dentry moves under its `d_lock`
//!   alone (`dentry` module docs). A rename that *replaces* either directory holds it
//!   exclusively (above), so a file is never moved into a directory between the file
//!   system's emptiness check and its death.
//! * **`mount`** on either directory holds it exclusively, so it waits for the rename or
//!   turns its try away; the rename moves no mountpoint (only directories are mounted on).
//! * **Lookups** of either name wait on its lock, as for a change in one directory.
//!   `getdents` of the two directories may, while the rename runs, list the file in both
//!   (tmpfs adds the new name, then removes the old one), as it may list a name created
//!   and another unlinked meanwhile in one directory: changes made while a listing runs
//!   are unspecified by POSIX, and the shared design gave up listing snapshots already.
//!
//! # Lock order
//!
//! (Also in the crate's lock-order tree.) An exclusive change: `rwsem` (write) ->
//! namespace lock (write), for each directory it holds, parents before the child they
//! contain (a replaced directory, `rmdir`'s victim), two parents under the rename mutex
//! ancestor first, else by address with the second only tried. A shared change:
//! namespace lock (read) [-> the other directory's namespace lock (read), only tried, for
//! a rename across directories] -> name lock(s) -> the non-directory's own `rwsem`
//! (unlink, link), or a tried exclusive lock of the directory `rmdir` removes ->
//! file-system locks. Two name locks are taken lowest index first (`lock_two_at`). A
//! shared change waits for no directory lock once it holds one (a rename across
//! directories only tries its second, `rmdir` only tries its victim), so an exclusive
//! locker waiting for the readers to drain always sees them finish, and Linux's
//! argument (`directory-locking.rst`, "Deadlock avoidance") covers the exclusive locks
//! alone. Name locks are taken last among directory locks and nothing but the
//! non-directory's `rwsem` and file-system leaves is taken under them, so the hash
//! collisions of the table cannot close a cycle. Shuttle models: `shuttle_tests.rs`
//! (one directory), `across_shuttle_tests.rs` (renames across directories against
//! `rmdir` and an exclusive holder of both).
//!
//! [`Inode::ns_lock`]: crate::inode::Inode::ns_lock
//! [`FileSystem::shared_name_changes`]: crate::fs::FileSystem::shared_name_changes

use super::VfsCore;
use crate::dentry::Dentry;
use crate::inode::Inode;
use crate::rcuhash::hash_name;
use parking_lot::RwLockWriteGuard;
use scalevfs_primitives::hashed::HashedMutexes;
use scalevfs_primitives::lockstat::MutexGuard;
use scalevfs_primitives::seqlock::{SeqReadGuard, SeqWriteGuard};
use scalevfs_primitives::Locking;

/// The name locks (module docs): 2^10 mutexes, one cache line each, per VFS.
pub(crate) type NameLocks = HashedMutexes<()>;

/// log2 of the name locks: two names share a mutex with probability 1/1024 (1/16 under
/// Miri, which takes seconds to build a table of 1024).
pub(crate) const NAME_LOCK_BITS: u32 = if cfg!(miri) { 4 } else { 10 };

/// A directory held exclusively: its `rwsem` and its namespace lock for writing.
pub(crate) struct ExclusiveDir<'a> {
    // Dropped in declaration order: the namespace lock first, then the rwsem.
    _ns: Option<SeqWriteGuard<'a>>,
    _rwsem: RwLockWriteGuard<'a, ()>,
}

/// A directory held shared, with the locks of the names changed.
pub(crate) struct SharedNames<'a> {
    _names: (MutexGuard<'a, ()>, Option<MutexGuard<'a, ()>>),
    _ns: SeqReadGuard<'a>,
}

/// Two directories held shared for a rename of non-directories from one to the other
/// ([`VfsCore::lock_names_across`]): both namespace locks shared, and the two names' locks.
pub(crate) struct SharedAcross<'a> {
    // Dropped in declaration order: the name locks, then the namespace locks.
    _names: (MutexGuard<'a, ()>, Option<MutexGuard<'a, ()>>),
    _tried: SeqReadGuard<'a>,
    _waited: SeqReadGuard<'a>,
}

/// How a namespace change holds its directory (a guard: held only to be dropped).
#[expect(dead_code, reason = "the variants' guards are held only to be dropped")]
pub(crate) enum DirLock<'a> {
    /// See [`ExclusiveDir`].
    Exclusive(ExclusiveDir<'a>),
    /// See [`SharedNames`].
    Shared(SharedNames<'a>),
    /// A non-directory victim's own `rwsem` (unlink).
    Plain(RwLockWriteGuard<'a, ()>),
}

impl VfsCore {
    /// Takes `dir` exclusively (module docs).
    pub(crate) fn lock_dir<'a>(&self, dir: &'a Inode) -> ExclusiveDir<'a> {
        let rwsem = dir.rwsem.write();
        ExclusiveDir {
            _ns: dir.ns_lock().map(|l| l.write_lock()),
            _rwsem: rwsem,
        }
    }

    /// Takes `dir` exclusively if nobody holds it (its `rwsem`, and its namespace lock on
    /// either side); `None` otherwise, without waiting. Used under a parent's shared side
    /// and a name lock, where waiting for either could deadlock (module docs).
    pub(crate) fn try_lock_dir<'a>(&self, dir: &'a Inode) -> Option<ExclusiveDir<'a>> {
        let rwsem = dir.rwsem.try_write()?;
        let ns = match dir.ns_lock() {
            Some(l) => Some(l.try_write_lock()?),
            None => None,
        };
        Some(ExclusiveDir {
            _ns: ns,
            _rwsem: rwsem,
        })
    }

    /// Whether changes of non-directory names in `dir` may run shared (module docs).
    pub(crate) fn shares_names(&self, dir: &Inode) -> bool {
        self.locking == Locking::Scalable && dir.has_ns_lock() && dir.fs().shared_name_changes(dir)
    }

    /// The index of the name lock of `name` in the directory `parent`.
    fn name_lock_index(&self, parent: &Dentry, name: &[u8]) -> usize {
        self.name_locks.index_of_key(hash_name(parent.id(), name))
    }

    /// Locks `dir` for a change of `names`: one name added or removed, or two
    /// non-directories renamed within it; shared if the directory allows it, else
    /// exclusively.
    pub(crate) fn lock_names<'a>(
        &'a self,
        parent: &Dentry,
        dir: &'a Inode,
        names: (&[u8], Option<&[u8]>),
    ) -> DirLock<'a> {
        if !self.shares_names(dir) {
            return DirLock::Exclusive(self.lock_dir(dir));
        }
        let ns = dir.ns_lock().expect("checked by shares_names").read_lock();
        let a = self.name_lock_index(parent, names.0);
        let b = names.1.map_or(a, |n| self.name_lock_index(parent, n));
        DirLock::Shared(SharedNames {
            _names: self.name_locks.lock_two_at(a, b),
            _ns: ns,
        })
    }

    /// Locks the two directories of a rename of non-directories across them (module
    /// docs, "Renames across directories"): `old` = (parent dentry, directory, name) of the
    /// source, `new` of the target. Both namespace locks shared, the one at the lower
    /// address waited for and the other only tried, then both names' locks. `None`, with
    /// nothing held, where either directory takes no shared changes or a writer holds (or
    /// is draining) the second namespace lock: the caller then takes the directories
    /// exclusively.
    pub(crate) fn lock_names_across<'a>(
        &'a self,
        old: (&Dentry, &'a Inode, &[u8]),
        new: (&Dentry, &'a Inode, &[u8]),
    ) -> Option<SharedAcross<'a>> {
        if !self.shares_names(old.1) || !self.shares_names(new.1) {
            return None;
        }
        let (first, second) = if (old.1 as *const Inode) < (new.1 as *const Inode) {
            (old.1, new.1)
        } else {
            (new.1, old.1)
        };
        let waited = first
            .ns_lock()
            .expect("checked by shares_names")
            .read_lock();
        let tried = second
            .ns_lock()
            .expect("checked by shares_names")
            .try_read_lock()?;
        let a = self.name_lock_index(old.0, old.2);
        let b = self.name_lock_index(new.0, new.2);
        Some(SharedAcross {
            _names: self.name_locks.lock_two_at(a, b),
            _tried: tried,
            _waited: waited,
        })
    }

    /// The lock a lookup that misses the dcache takes on `name` in `dir` (module docs):
    /// `None` where name changes never run shared.
    pub(crate) fn lookup_name_lock(
        &self,
        parent: &Dentry,
        dir: &Inode,
        name: &[u8],
    ) -> Option<MutexGuard<'_, ()>> {
        self.shares_names(dir)
            .then(|| self.name_locks.lock_key(hash_name(parent.id(), name)))
    }
}

#[cfg(test)]
mod across_shuttle_tests;
#[cfg(test)]
mod shuttle_tests;

#[cfg(test)]
mod tests {
    use crate::dentry::tests::{core, look};
    use crate::namei::Ctx;
    use crate::perm::Cred;
    use scalevfs_primitives::Locking;

    #[test]
    fn a_directory_gets_its_namespace_lock_at_its_first_change() {
        for locking in [Locking::Scalable, Locking::Legacy] {
            let c = core(locking);
            let (root, cred) = (c.root(), Cred::root());
            let ctx = Ctx::new(&cred, &root);
            c.mkdir(&ctx, &root, b"/d", 0o755, 0).unwrap();
            let d = look(&c, "/d").unwrap();
            let dir = d.dentry.inode().unwrap();
            let scalable = locking == Locking::Scalable;
            assert_eq!(dir.has_ns_lock(), scalable);
            // Made and looked up, not changed: no lock yet.
            assert!(!dir.ns_lock_allocated());
            assert!(look(&c, "/d/missing").is_err());
            assert!(!dir.ns_lock_allocated());
            c.mkdir(&ctx, &root, b"/d/sub", 0o755, 0).unwrap();
            assert_eq!(dir.ns_lock_allocated(), scalable, "{locking:?}");
        }
    }
}
