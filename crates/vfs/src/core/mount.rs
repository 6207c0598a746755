//! Mounting and unmounting: `mount`, `umount` (with `MNT_DETACH` and `MNT_EXPIRE`), and
//! shutting down a file system once its last mount is gone.

use super::{VfsCore, LEAKED_SUPERBLOCKS};
use crate::fs::FileSystem;
use crate::inode::{InodeRef, SuperBlock};
use crate::mount::{MntRef, Mount, MountOptions, MountTable, Path};
use crate::{Errno, SysResult};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

impl VfsCore {
    /// Mounts `fs` on the directory `at`, or on top of whatever is mounted there already
    /// (Linux's `lock_mount`: a walk that ended in `.`, or a mount that another thread
    /// made meanwhile, leaves `at` on a covered directory).
    pub fn mount(&self, at: &Path, fs: Arc<dyn FileSystem>) -> SysResult<MntRef> {
        self.mount_with(at, fs, &MountOptions::default())
    }

    /// [`mount`](Self::mount) with `opts` (read-only: [`MountOptions::read_only`]).
    pub fn mount_with(
        &self,
        at: &Path,
        fs: Arc<dyn FileSystem>,
        opts: &MountOptions,
    ) -> SysResult<MntRef> {
        let mut at = self.cross_mounts(at.clone());
        loop {
            let Some(dir) = at.dentry.inode().filter(|i| i.is_dir()) else {
                return Err(Errno::ENOTDIR);
            };
            // The mountpoint held exclusively (Linux's `lock_mount` holds its inode): an
            // rmdir of it checks for a mount under the same lock, so it runs wholly before
            // this (and the directory is dead here: link count 0) or after (and sees the
            // mount). Lock order: directory locks, then the mount table, then the rename
            // lock.
            let mountpoint = self.lock_dir(dir);
            if at.dentry.is_unlinked() || dir.nlink() == 0 {
                return Err(Errno::ENOENT);
            }
            let mut all = self.mounts.lock();
            // Both checked under the table mutex, which every mount and detach holds.
            if at.mnt.is_detached() {
                // In a lazily unmounted tree (Linux 6.18's answer, found by the
                // conformance suite: not the EINVAL of check_mnt).
                return Err(Errno::ENOENT);
            }
            let g = scalevfs_primitives::epoch::pin();
            if self.mounts.lookup(at.mnt, at.dentry.as_ptr(), &g).is_some() {
                // Another mount came first: go on top of it.
                drop((g, all, mountpoint));
                at = self.cross_mounts(at);
                continue;
            }
            drop(g);
            // Made only once nothing can fail but the file system's own `fill_super`
            // (which takes no VFS lock), so no superblock is left behind by a mount that
            // lost a race. `sbs` is a leaf lock.
            let (sb, root) = self.new_sb(fs, opts)?;
            static NEXT_ID: AtomicU64 = AtomicU64::new(2);
            // Writers of the rename sequence: concurrent rcu-walks re-validate.
            let _w = self.dcache.rename_lock.write();
            return Ok(self.mounts.add_locked(
                &mut all,
                Mount::new(
                    NEXT_ID.fetch_add(1, Ordering::Relaxed),
                    sb,
                    root,
                    Some((at.mnt, at.dentry.clone())),
                ),
            ));
        }
    }

    /// `mount(2)` with `MS_REMOUNT` of the mount whose root is `target` (the caller
    /// resolved the path and checked the privilege): the file system becomes read-only or
    /// read-write as `opts` says (see `mount::write` for the handshake with writers).
    ///
    /// * `EINVAL`: `target` is not the root of an attached mount (`do_remount`).
    /// * `EBUSY` (to read-only): a change is in flight, a file on it is open for writing,
    ///   or a file unlinked from it is still open (`sb_prepare_remount_readonly`).
    pub fn remount(&self, target: &Path, opts: &MountOptions) -> SysResult<()> {
        let m = target.mnt;
        if !m.is_root(&target.dentry) {
            return Err(Errno::EINVAL);
        }
        // Serializes every change of the read-only flag (Linux holds `s_umount`).
        let _all = self.mounts.lock();
        if m.is_detached() {
            return Err(Errno::EINVAL);
        }
        if opts.read_only {
            m.sb.make_read_only()
        } else {
            m.sb.make_writable();
            Ok(())
        }
    }

    /// `umount2(2)` of the mount whose root is `target` (the caller resolved the path and
    /// checked the flags and privilege). See `mount/mod.rs` for how "busy" is decided without a
    /// mount count.
    ///
    /// * `EINVAL`: `target` is not the root of a mount, or of one still attached;
    ///   `MNT_EXPIRE` with `MNT_FORCE`/`MNT_DETACH`.
    /// * `EBUSY`: the root mount; without `MNT_DETACH`, a mount with mounts below it or
    ///   that somebody uses (an open file, a cwd, a walk in progress).
    /// * `EAGAIN`: the first `MNT_EXPIRE` of an unused mount marks it.
    ///
    /// `MNT_DETACH` takes the mount and every mount below it out of the tree at once; each
    /// file system is shut down as soon as nobody uses it (checked here and by later
    /// `umount`/`drop_caches` calls). `MNT_FORCE` changes nothing for our file systems
    /// (tmpfs has no `umount_begin` either).
    pub fn umount(&self, target: Path, flags: i32) -> SysResult<()> {
        // The top of what is mounted there (Linux's `LOOKUP_MOUNTPOINT`): a walk that ended
        // in `.` or a symlink's `.` stands on the covered directory.
        let target = self.cross_mounts(target);
        let m = target.mnt;
        if !m.is_root(&target.dentry) || m.is_detached() {
            return Err(Errno::EINVAL);
        }
        let lazy = flags & libc::MNT_DETACH != 0;
        let expire = flags & libc::MNT_EXPIRE != 0;
        let all = self.mounts.lock();
        // Again under the table mutex: a concurrent umount may have detached it since (and
        // then `parent()` says `None` as for the root mount), and a detached mount never
        // becomes attached again (`mount/mod.rs`).
        if m.is_detached() {
            return Err(Errno::EINVAL);
        }
        if m.parent().is_none() {
            // The root mount (Linux's `umount` remounts it read-only; `remount` does that).
            return Err(if expire { Errno::EINVAL } else { Errno::EBUSY });
        }
        if expire && flags & (libc::MNT_FORCE | libc::MNT_DETACH) != 0 {
            return Err(Errno::EINVAL);
        }
        // Pinned until the mounts we work on are claimed or passed over: once the mutex is
        // dropped, another umount's `reap_detached` may shut down and retire a detached,
        // unused one.
        let _g = scalevfs_primitives::epoch::pin();
        if !lazy {
            if !MountTable::children(&all, m).is_empty() {
                return Err(Errno::EBUSY);
            }
            m.state.begin_umount();
            // rcu-walks that started before must re-validate, and new ones wait for the
            // decision (see `mount/mod.rs`).
            let w = self.dcache.rename_lock.write();
            let verdict = if self.mount_busy(m, 1) {
                Err(Errno::EBUSY)
            } else if expire && !m.expiry_mark.swap(true, Ordering::Relaxed) {
                Err(Errno::EAGAIN)
            } else {
                self.mounts.detach(&[m]);
                Ok(())
            };
            drop(w);
            if verdict.is_err() {
                m.state.cancel_umount();
                return verdict;
            }
            // Claimed under the mutex, so no reaper frees the mount before we are done.
            let claim = self.claim_shutdown(m);
            drop((all, _g, target));
            if let Some(c) = claim {
                self.shut_down(c);
            }
            self.reap_detached();
            return Ok(());
        }
        let mut tree = vec![m];
        let mut i = 0;
        while i < tree.len() {
            tree.extend(MountTable::children(&all, tree[i]));
            i += 1;
        }
        {
            let _w = self.dcache.rename_lock.write();
            self.mounts.detach(&tree);
        }
        // Detached mounts give their mountpoints back at once (`mount/mod.rs`), also those
        // still in use: taken under the mutex, put after it (a put may kill the dentry).
        let mountpoints: Vec<_> = tree.iter().filter_map(|d| d.take_mountpoint()).collect();
        drop(all);
        drop(target);
        drop(mountpoints);
        // Children first, as `reap_detached` does. Claimed while pinned, shut down after.
        let claims: Vec<_> = tree
            .iter()
            .rev()
            .filter(|d| !self.mount_busy(**d, 0))
            .filter_map(|d| self.claim_shutdown(*d))
            .collect();
        drop(_g);
        for c in claims {
            self.shut_down(c);
        }
        self.reap_detached();
        Ok(())
    }

    /// Does anyone use `m`? Drops the unused cached dentries of its file system first
    /// (`shrink_dcache_for_umount`); then any positive dentry left but the root, or a
    /// count on the root beyond the mount's own and the `held` ones of our caller, is a
    /// user (see `mount/mod.rs`; Linux's umount likewise discounts the caller's `mnt_count`).
    fn mount_busy(&self, m: MntRef, held: u32) -> bool {
        self.dcache.shrink_sb(&m.sb);
        // Pairs with the fences of walkers that count a root (`MountState::enter`,
        // `count_if_attached`): either the counts read here include theirs, or they see
        // the mount detached and give them back.
        crate::mount::fence_before_busy_check();
        m.sb.dentries.sum() > 1 || m.root().dentry().count() > 1 + held
    }

    /// Claims the shutdown of the detached, unused mount `m`: takes its superblock out of
    /// `sbs`, so that no other umount or reaper shuts it down too. `None`: another one
    /// claimed it first. The caller is pinned, or holds the table mutex, so that `m` is
    /// allocated; from the claim on, only the claimant frees it ([`shut_down`]), so the
    /// claimant needs no pin to finish: the file system's `kill_sb` runs unpinned and does
    /// not hold back every other retirement in the process while it works.
    ///
    /// [`shut_down`]: Self::shut_down
    fn claim_shutdown(&self, m: MntRef) -> Option<ShutdownClaim> {
        let mut sbs = self.sbs.lock();
        let i = sbs.iter().position(|(sb, _)| Arc::ptr_eq(sb, &m.sb))?;
        let (sb, root_inode) = sbs.swap_remove(i);
        Some(ShutdownClaim { m, sb, root_inode })
    }

    /// Shuts down a claimed file system (`generic_shutdown_super`): gives back the mount's
    /// root and mountpoint, lets the file system drop its links (`kill_sb`), and walks the
    /// superblock's inode list the way `evict_inodes` does: an inode still on it is still
    /// referenced ("busy inodes after unmount"), and then the superblock is left allocated
    /// rather than freed. Last, the mount is freed (after a grace period).
    fn shut_down(&self, claim: ShutdownClaim) {
        let ShutdownClaim { m, sb, root_inode } = claim;
        m.release();
        sb.fs.kill_sb(&root_inode);
        drop(root_inode);
        let mut busy = 0usize;
        sb.for_each_inode(|_| busy += 1);
        if busy != 0 {
            LEAKED_SUPERBLOCKS.fetch_add(1, Ordering::Relaxed);
            std::mem::forget(sb);
        }
        self.mounts.free(m);
    }

    /// Shuts down lazily detached file systems that nobody uses any more.
    pub(super) fn reap_detached(&self) {
        let claims: Vec<ShutdownClaim> = {
            // Pinned until each is claimed or passed over: a concurrent reaper may shut
            // down and retire one of these meanwhile.
            let _g = scalevfs_primitives::epoch::pin();
            let detached: Vec<MntRef> = {
                let all = self.mounts.lock();
                all.iter()
                    .filter(|m| m.is_detached())
                    .map(|m| m.mnt())
                    .collect()
            };
            detached
                .into_iter()
                .rev()
                .filter(|m| self.sbs.lock().iter().any(|(sb, _)| Arc::ptr_eq(sb, &m.sb)))
                .filter(|m| !self.mount_busy(*m, 0))
                .filter_map(|m| self.claim_shutdown(m))
                .collect()
        };
        for c in claims {
            self.shut_down(c);
        }
    }
}

/// A detached, unused mount whose shutdown one caller claimed (see
/// `VfsCore::claim_shutdown`).
struct ShutdownClaim {
    m: MntRef,
    sb: Arc<SuperBlock>,
    root_inode: InodeRef,
}
