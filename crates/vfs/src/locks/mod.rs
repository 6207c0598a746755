//! # File locks: POSIX record locks, OFD locks and `flock` (issue 4, seed 002)
//!
//! Linux's `fs/locks.c` semantics, without its global locks.
//!
//! ## Objects
//!
//! - [`LockManager`]: one per `Vfs`, built with [`Locking::Scalable`] or
//!   [`Locking::Legacy`]. Holds the deadlock graph, the listing registry and, for the
//!   legacy ablation only, the global lock.
//! - [`FileLockContext`]: one per inode that has ever been locked (Linux's
//!   `file_lock_context`), made by [`LockManager::new_context`] on first use; the inode
//!   keeps it in a `OnceLock<Box<FileLockContext>>`, so unlocked inodes pay one pointer.
//!   It holds the inode's POSIX+OFD list and its flock list (`list::Lists`).
//! - Owners ([`LockOwner`]): `Process(id)` for POSIX locks, `File(id)` (the open file
//!   description) for OFD and flock locks. OFD and POSIX locks share one list and conflict
//!   with each other; flock locks are a separate list, independent of both.
//!
//! ## Wiring (what the VFS and `Process` call)
//!
//! - The `Vfs` owns one `LockManager::new(options.locking)`; each inode has a
//!   `OnceLock<Box<FileLockContext>>`, filled by `new_context(st_dev, st_ino)` on the
//!   first lock operation.
//! - `fcntl` lock commands: [`LockManager::fcntl`] with an [`FcntlFile`] (position, size,
//!   access mode, open-file id, process id, pid) and the caller's [`CancelToken`]; it
//!   applies Linux's argument checks in Linux's order. After a granted POSIX lock,
//!   `Process` re-checks that the fd still refers to the same open file (Linux's
//!   close/fcntl race check) and if not calls `release_posix` and returns `EBADF`.
//! - `flock(2)`: [`flock_op_type`] first (`EINVAL` comes before `EBADF`), then `EBADF` for
//!   an fd opened with neither read nor write access (`O_PATH`), then
//!   [`LockManager::flock`].
//! - `close(fd)` of any fd whose inode has a context: [`LockManager::release_posix`] with
//!   the process id (POSIX rule, whichever fd it was). Last close of an open file
//!   description: [`LockManager::release_file`] (OFD and flock locks).
//! - Process exit closes every fd, which releases everything through the two calls above.
//!   `fork` needs nothing: POSIX locks are not inherited, OFD/flock locks belong to the
//!   shared open file descriptions.
//! - `/proc/locks` (kernfs, CLI): [`LockManager::proc_locks`] or [`LockManager::list`].
//!
//! ## Locks and what they protect
//!
//! - **context lock** (one per inode; Linux's `flc_lock`): the inode's lock lists, every
//!   waiter queued on them, and each queued waiter's `edge` field.
//! - **POSIX summary** (`summary.rs`, one per inode, scalable design only): a copy of the
//!   POSIX list when it holds at most one lock, under a sequence counter. Written only
//!   under the context lock (when a section changed the list), read without any lock: a
//!   non-blocking request that conflicts gets `EAGAIN`, and `F_GETLK` its answer, from
//!   the summary alone, so threads asking for a lock another holds only read a line.
//! - **graph lock** (`deadlock.rs`; Linux's `blocked_lock_lock`): the POSIX wait-for
//!   edges, in a table hashed by owner (Linux's `blocked_hash`).
//! - **registry shard locks** (the `DList` in `registry.rs`, one per CPU): the lists of contexts that
//!   only the listing walks.
//! - **legacy lock** (ablation only): everything; taken first by every operation.
//! - **cancel-token mutex** (one per token, `crate::cancel`): that token's wakers.
//!
//! Lock order: legacy lock -> context lock -> graph lock. The listing takes a registry
//! shard lock, releases it, then takes context locks one at a time. A cancel token's mutex
//! is never taken with a context lock held. No operation holds two context locks.
//!
//! Operations on different inodes share no lock and write no shared memory: the graph
//! lock is taken only when a request blocks (or a blocked POSIX request is granted,
//! retargeted or cancelled), never by an uncontended lock or unlock, and the registry
//! only when a context is created or dropped. Keeping the graph under one lock is what
//! makes the cycle check exact and atomic with the edge insertion (see below); its cost
//! falls on requests that are about to sleep anyway.
//!
//! ## Blocking and wakeups (no thundering herd; `handoff.rs`)
//!
//! A blocked request is a `list::Waiter` queued on the one held lock it conflicts with
//! first (Linux's `fl_blocked_requests`). Whenever a lock is removed, shrunk, split,
//! merged or changes type, its waiters are re-examined *by the thread making the change,
//! under the context lock*, oldest first (except that a waiter still polling its state
//! goes ahead of sleeping ones that have waited under a millisecond,
//! `list::prefer_polling`; threads are unparked only after the context lock is released,
//! `list::Wakeups`): a waiter that still conflicts is moved to the lock it now conflicts
//! with and not woken. A waiter that no longer conflicts is, by the manager's
//! [`HandOff`] policy, woken to retry (the scalable default, as Linux: the lock goes to
//! whichever thread runs and asks first, and waiters conflicting with the woken request
//! wait behind it without being woken), or granted right there and then woken (the
//! legacy design: arrival order, and every hand-off waits for the woken thread to be
//! scheduled). Either way an unlock wakes only requests it lets proceed: 100 writers
//! queued on one lock wake one thread per unlock.
//!
//! The waiter's thread polls its own `state` for a few microseconds, then sleeps in
//! [`CancelToken::wait_until`]; the completer stores `state` with Release and then
//! unparks it (the sleeper's Acquire load pairs with it). A request that lost a retry to
//! a thread that asked meanwhile backs off instead: it sleeps until a deadline of its
//! own, and a completion with `RETRY` does not wake it before then. `handoff.rs` details
//! the waiting, the retry, the back-off and cancellation.
//!
//! Memory orderings: everything shared is under the locks above except a waiter's
//! `state` (Release store by the completer, Acquire load by the sleeper), its `timed`
//! flag (the two `SeqCst` fences of `scalevfs_primitives::selfwake`) and a token's
//! `cancelled` flag (Release in `cancel`, Acquire in `is_cancelled`).
//!
//! ## Deadlock detection
//!
//! Only POSIX (process-owned) `F_SETLKW` requests are checked, as on Linux. The graph
//! has an edge `A -> Q` per blocked POSIX or OFD request of owner `A` whose current
//! blocker is a POSIX lock of process `Q` (Linux's `blocked_hash` holds exactly those
//! waiters), and the walk of a POSIX request starts at its blocker's owner, which may be
//! an open file description (an OFD lock) whose own waits lead back to the requester.
//! Before a request sleeps (and whenever re-examination moves it to a lock of another
//! owner) we take the graph lock, search for a path `Q ->* P`, and only if there is none
//! add `P -> Q`, all under the graph lock. Since every POSIX edge is added by such a check,
//! and the checks are serialized, the graph of POSIX waits never contains a cycle: of two
//! concurrent requests that would close one, the second to take the graph lock sees the
//! first's edge and fails with `EDEADLK`, the first sleeps. Edges are removed under the
//! graph lock before a waiter is completed, and a granted waiter's edge is removed in the
//! same context-lock section that removes the lock it waited on.
//!
//! Differences from Linux: Linux follows one waiting request per owner and gives up after
//! 10 steps (`MAX_DEADLK_ITERATIONS`), so long cycles sleep forever; we follow every
//! blocked request of every owner to any depth (bounded by a visited set). A request
//! re-queued on a new blocker is re-checked without being woken (Linux re-checks when the
//! woken task retries); the outcome is the same `EDEADLK`.
//!
//! ## Listing
//!
//! [`LockManager::proc_locks`] prints every held and waiting lock in `/proc/locks`
//! format. Contexts register on a per-CPU dlock-list (`registry.rs`, seed 001's `DList`)
//! once, when created; only the listing walks those lists.
//!
//! ## Legacy ablation (seed 002's "before")
//!
//! `Locking::Legacy` adds one global lock taken around every operation, keeps the
//! wait-for edges in one vector scanned linearly, and puts every context on one list. The
//! scalable path pays only an untaken branch for it.
//!
//! ## Other differences from Linux
//!
//! - Under [`HandOff::Grant`] a blocking request whose conflicting lock goes away is
//!   granted directly; Linux (and [`HandOff::Retry`]) wakes it to retry. Which waiter
//!   gets a lock first can therefore differ from a particular Linux run, never the set of
//!   outcomes a Linux scheduler could produce. Linux wakes every follower of a request
//!   when that request's retry ends; we re-examine them under the context lock and wake
//!   only those that can proceed.
//! - Deadlines on [`CancelToken`] produce `EINTR` (Linux has no timed lock wait).
//! - The listing's order is per context (its flock locks, then its POSIX/OFD locks, each
//!   followed by its waiters), and a waiter is always shown one level deep under the lock
//!   it waits on; Linux orders by per-CPU lists of locks and nests waiters that queue
//!   behind other waiters. The lines themselves are identical (checked against the host's
//!   `/proc/locks` in `host_diff.rs`).
//! - `F_SETLK` conflicts return `EAGAIN`, as Linux does (POSIX also allows `EACCES`; Linux
//!   never returns it for record locks).

pub(crate) mod deadlock;
mod handoff;
pub(crate) mod list;
pub(crate) mod registry;
mod summary;
pub(crate) mod sync;
mod types;

#[cfg(test)]
mod host_diff;
#[cfg(test)]
mod proptests;
#[cfg(test)]
mod shuttle_tests;
#[cfg(test)]
mod stress;
#[cfg(test)]
mod tests;

use std::sync::atomic::AtomicU32;
use std::sync::Arc;

use scalevfs_primitives::Locking;

use crate::abi::Flock;
use crate::cancel::CancelToken;
use crate::Errno;
use crossbeam_utils::CachePadded;
use deadlock::Graph;
pub use handoff::HandOff;
use list::{find_conflict, flock_apply, posix_apply, remove_owner, Lists, Pace, Waiter};
use registry::ContextList;
use summary::{PosixSummary, Snapshot};
use sync::{ClassedGuard, ClassedMutex};
pub use types::*;

/// Per-inode lock state (Linux's `file_lock_context`). Made by
/// [`LockManager::new_context`]; unregisters itself from the listing when dropped.
pub struct FileLockContext {
    inner: Arc<CtxInner>,
    /// The manager that made it: `OpenFile::release` reaches it through here, without an
    /// `Arc` clone (a shared counter write) on every last close of a locked file. A
    /// per-CPU proxy of the manager (see [`LockManager::new_context`]).
    mgr: Arc<CachePadded<LockManager>>,
    slot: scalevfs_primitives::dlist::DListNode,
}

pub(crate) struct CtxInner {
    dev: u64,
    ino: u64,
    lists: ClassedMutex<Lists>,
    /// Blocked requests polling their state right now (see `sleep`): bounded so that
    /// pollers never take every CPU from the threads that will grant them.
    spinners: AtomicU32,
    /// The POSIX list's summary for lock-free `EAGAIN` and `F_GETLK` answers (scalable
    /// design only), on its own cache line: askers read it while lockers write `lists`.
    posix_summary: CachePadded<PosixSummary>,
}

impl Drop for FileLockContext {
    fn drop(&mut self) {
        self.mgr.shared.registry.remove(&self.slot);
    }
}

impl FileLockContext {
    /// The manager this context belongs to.
    pub fn manager(&self) -> &LockManager {
        &self.mgr
    }
}

impl std::fmt::Debug for FileLockContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FileLockContext")
            .field("dev", &self.inner.dev)
            .field("ino", &self.inner.ino)
            .finish()
    }
}

struct Shared {
    locking: Locking,
    hand_off: HandOff,
    legacy: Option<ClassedMutex<()>>,
    graph: Graph,
    registry: ContextList,
}

/// The file-lock subsystem of one `Vfs`. Cheap to clone (two `Arc`s).
#[derive(Clone)]
pub struct LockManager {
    shared: Arc<Shared>,
    /// One handle of this manager per CPU, for contexts to keep (`new_context`). `None` in
    /// the handles themselves: a handle holding the others would keep them alive forever.
    /// Each handle is line-aligned (`CachePadded` inside the `Arc`), so that its reference
    /// count shares a line with no other handle's.
    proxies: Option<Arc<[Arc<CachePadded<LockManager>>]>>,
}

impl std::fmt::Debug for LockManager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LockManager")
            .field("locking", &self.shared.locking)
            .finish()
    }
}

/// How a request that conflicts behaves.
#[derive(Copy, Clone)]
enum Wait<'a> {
    /// `F_SETLK`: fail with `EAGAIN`.
    No,
    /// Sleep until granted (no token: the uncontended `F_SETLKW` allocates nothing).
    Forever,
    /// Sleep until granted or the token fires.
    Until(&'a CancelToken),
}

/// A request queued on a lock: its waiter and the token it sleeps on (`None`: forever).
pub(crate) type Queued<'t> = (Arc<Waiter>, Option<&'t CancelToken>);

/// Both locks of an operation: the legacy global lock (if any), then the context's.
/// Dropping it republishes the POSIX list's summary while the context lock is still held
/// (fields drop after `drop` runs).
struct Guard<'a> {
    lists: ClassedGuard<'a, Lists>,
    summary: &'a PosixSummary,
    /// A request found a conflict: keep the summary from now on (see `summary.rs`).
    contended: bool,
    _legacy: Option<ClassedGuard<'a, ()>>,
}

impl Drop for Guard<'_> {
    #[inline]
    fn drop(&mut self) {
        self.summary.publish(&self.lists.posix, self.contended);
    }
}

impl LockManager {
    /// A manager with `locking`'s hand-off policy: [`HandOff::Retry`] for the scalable
    /// design, [`HandOff::Grant`] for the legacy one.
    pub fn new(locking: Locking) -> Self {
        let hand_off = match locking {
            Locking::Scalable => HandOff::Retry,
            Locking::Legacy => HandOff::Grant,
        };
        Self::with_hand_off(locking, hand_off)
    }

    /// A manager with an explicit hand-off policy (an ablation: `Grant` with the
    /// scalable design is the design before wake-and-retry).
    pub fn with_hand_off(locking: Locking, hand_off: HandOff) -> Self {
        let legacy = locking == Locking::Legacy;
        let shared = Arc::new(Shared {
            locking,
            hand_off,
            legacy: legacy.then(|| ClassedMutex::with_class((), &crate::lockclass::FILE_LOCK_LOCK)),
            graph: Graph::new(!legacy),
            registry: ContextList::new(locking),
        });
        let proxy = || {
            Arc::new(CachePadded::new(LockManager {
                shared: shared.clone(),
                proxies: None,
            }))
        };
        let proxies = (0..scalevfs_primitives::cpu::num_cpus())
            .map(|_| proxy())
            .collect();
        LockManager {
            shared,
            proxies: Some(proxies),
        }
    }

    /// The design it was built with.
    pub fn locking(&self) -> Locking {
        self.shared.locking
    }

    /// How this manager hands a released lock to its waiters.
    pub fn hand_off(&self) -> HandOff {
        self.shared.hand_off
    }

    /// A context for the inode `(dev, ino)` (`dev` as `st_dev` reports it).
    ///
    /// The context keeps a reference to the manager: the handle of the CPU it is made on,
    /// so that first locks on different files, made on different CPUs, increment
    /// different reference counts instead of the one `Arc` of the whole manager. Each
    /// handle keeps the manager alive, so a context may outlive the `Vfs` that made it.
    pub fn new_context(&self, dev: u64, ino: u64) -> FileLockContext {
        let inner = Arc::new(CtxInner {
            dev,
            ino,
            lists: ClassedMutex::with_class(Lists::default(), &crate::lockclass::FLC_LOCK),
            spinners: AtomicU32::new(0),
            posix_summary: CachePadded::new(PosixSummary::default()),
        });
        let slot = self.shared.registry.insert(&inner);
        FileLockContext {
            inner,
            mgr: match &self.proxies {
                Some(p) => Arc::clone(&p[scalevfs_primitives::cpu::current_shard(p.len())]),
                None => Arc::new(CachePadded::new(LockManager {
                    shared: self.shared.clone(),
                    proxies: None,
                })),
            },
            slot,
        }
    }

    #[inline]
    fn lock<'a>(&'a self, ctx: &'a FileLockContext) -> Guard<'a> {
        debug_assert!(
            Arc::ptr_eq(&ctx.mgr.shared, &self.shared),
            "context of another manager"
        );
        let legacy = self.shared.legacy.as_ref().map(|l| l.lock());
        Guard {
            lists: ctx.inner.lists.lock(),
            summary: &ctx.inner.posix_summary,
            contended: false,
            _legacy: legacy,
        }
    }

    /// The POSIX list's summary (see `summary.rs`), in the scalable design; `None` when
    /// a writer is changing it, or in the legacy ablation (which always takes its locks).
    #[inline]
    fn snapshot(&self, ctx: &FileLockContext) -> Option<Snapshot> {
        if self.shared.locking == Locking::Legacy {
            return None;
        }
        ctx.inner.posix_summary.read()
    }

    /// `F_GETLK` / `F_OFD_GETLK`: the first lock that would conflict with `req`, if any.
    /// For an `Unlock` request (only `F_OFD_GETLK` allows it, Linux 6.7+), the first lock
    /// of `req.owner` itself that overlaps the range.
    pub fn getlk(&self, ctx: &FileLockContext, req: &LockRequest) -> Option<LockInfo> {
        match self.snapshot(ctx) {
            Some(Snapshot::Empty) => return None,
            Some(Snapshot::One(h)) => {
                let hit = if req.ty == LockType::Unlock {
                    h.owner == req.owner && h.start <= req.end && req.start <= h.end
                } else {
                    list::conflicts(&h, req)
                };
                return hit.then_some(h);
            }
            Some(Snapshot::Many) | None => {}
        }
        let mut g = self.lock(ctx);
        // Keep the summary from now on: `F_GETLK` is asked again and again of a file some
        // threads lock (a lock prober), and answered from it then without a lock.
        g.contended = true;
        let list = &g.lists.posix;
        let i = if req.ty == LockType::Unlock {
            list.iter().position(|h| {
                h.info.owner == req.owner && h.info.start <= req.end && req.start <= h.info.end
            })
        } else {
            find_conflict(list, req)
        };
        i.map(|i| list[i].info)
    }

    /// `F_SETLK` (`wait == None`) or `F_SETLKW` (`wait == Some(token)`), POSIX or OFD by
    /// `req.owner`. Conflict: `EAGAIN` without `wait`; with it, sleeps until granted,
    /// `EDEADLK` if the wait would deadlock (POSIX only), `EINTR` if the token is
    /// cancelled or expires first.
    pub fn setlk(
        &self,
        ctx: &FileLockContext,
        req: &LockRequest,
        wait: Option<&CancelToken>,
    ) -> Result<(), Errno> {
        match wait {
            None => self.setlk_inner(ctx, req, Wait::No),
            Some(t) => self.setlk_inner(ctx, req, Wait::Until(t)),
        }
    }

    fn setlk_inner(
        &self,
        ctx: &FileLockContext,
        req: &LockRequest,
        wait: Wait<'_>,
    ) -> Result<(), Errno> {
        req.check()?;
        if matches!(wait, Wait::No) && req.ty != LockType::Unlock {
            // A conflicting non-blocking request fails without taking the context lock.
            if let Some(Snapshot::One(h)) = self.snapshot(ctx) {
                if list::conflicts(&h, req) {
                    return Err(Errno::EAGAIN);
                }
            }
        }
        self.request(ctx, |g, reeval, pace| {
            match find_conflict(&g.lists.posix, req) {
                None => {
                    posix_apply(&mut g.lists.posix, req, reeval);
                    Ok(None)
                }
                Some(i) => {
                    g.contended = true;
                    self.block_posix(&mut g.lists, i, req, wait, *pace)
                }
            }
        })
    }

    /// A POSIX/OFD request conflicting with the lock at `i`: `EAGAIN`, `EINTR` or
    /// `EDEADLK`, or queued on that lock (the waiter and the token to sleep on).
    fn block_posix<'t>(
        &self,
        lists: &mut Lists,
        i: usize,
        req: &LockRequest,
        wait: Wait<'t>,
        pace: Pace,
    ) -> Result<Option<Queued<'t>>, Errno> {
        let token = match wait {
            Wait::No => return Err(Errno::EAGAIN),
            Wait::Forever => None,
            Wait::Until(t) if t.is_cancelled() => return Err(Errno::EINTR),
            Wait::Until(t) => Some(t),
        };
        let w = Arc::new(Waiter::new(*req, LockClass::of_posix(req.owner), pace));
        if !self.wait_edge(&w, lists.posix[i].info.owner) {
            return Err(Errno::EDEADLK);
        }
        lists.posix[i].waiters.push(w.clone());
        Ok(Some((w, token)))
    }

    /// `flock(2)` for the open file description `file`: `op` is `LOCK_SH`, `LOCK_EX` or
    /// `LOCK_UN`, optionally with `LOCK_NB`. Without `LOCK_NB` a conflicting request
    /// sleeps until granted or until `cancel` (if given) fires (`EINTR`). A conversion
    /// drops the old lock first, so a failed or interrupted conversion loses it, as on
    /// Linux. `LOCK_MAND` is ignored (success), as Linux does since 5.17.
    pub fn flock(
        &self,
        ctx: &FileLockContext,
        file: u64,
        pid: i32,
        op: i32,
        cancel: Option<&CancelToken>,
    ) -> Result<(), Errno> {
        let ty = flock_op_type(op)?;
        let Some(ty) = ty else { return Ok(()) };
        let req = LockRequest {
            owner: LockOwner::File(file),
            pid,
            ty,
            start: 0,
            end: OFFSET_MAX,
        };
        self.request(ctx, |g, reeval, pace| {
            match flock_apply(&mut g.lists.flock, &req, reeval) {
                Ok(()) => Ok(None),
                Err(_) if op & libc::LOCK_NB != 0 => Err(Errno::EAGAIN),
                Err(_) if cancel.is_some_and(CancelToken::is_cancelled) => Err(Errno::EINTR),
                Err(i) => {
                    // Queue before re-examining the old lock's waiters: they may release
                    // the lock we queue on.
                    let w = Arc::new(Waiter::new(req, LockClass::Flock, *pace));
                    g.lists.flock[i].waiters.push(w.clone());
                    Ok(Some((w, cancel)))
                }
            }
        })
    }

    /// The POSIX close rule: `process` closed some fd of this inode, so all its POSIX locks
    /// on the inode go (Linux's `locks_remove_posix`). Also call it for every open file at
    /// process exit.
    pub fn release_posix(&self, ctx: &FileLockContext, process: u64) {
        self.release(ctx, LockOwner::Process(process), false);
    }

    /// The last close of open file description `file`: its OFD locks go.
    pub fn release_ofd(&self, ctx: &FileLockContext, file: u64) {
        self.release(ctx, LockOwner::File(file), false);
    }

    /// The last close of open file description `file`: its OFD and flock locks go
    /// (Linux's `locks_remove_file`).
    pub fn release_file(&self, ctx: &FileLockContext, file: u64) {
        self.release(ctx, LockOwner::File(file), true);
    }

    fn release(&self, ctx: &FileLockContext, owner: LockOwner, flock: bool) {
        let woken = {
            let mut g = self.lock(ctx);
            let mut reeval = Vec::new();
            remove_owner(&mut g.lists.posix, owner, &mut reeval);
            if flock {
                remove_owner(&mut g.lists.flock, owner, &mut reeval);
            }
            self.reeval(&mut g.lists, reeval)
        };
        woken.wake();
    }

    /// `fcntl(fd, cmd, fl)` for the lock commands (`F_GETLK`, `F_SETLK`, `F_SETLKW`,
    /// `F_OFD_GETLK`, `F_OFD_SETLK`, `F_OFD_SETLKW`), with Linux's checks in Linux's order:
    /// range (`EINVAL`/`EOVERFLOW`), `l_type` (`EINVAL`), access mode (`EBADF`, set only),
    /// OFD `l_pid != 0` (`EINVAL`). `cancel` bounds the `W` commands (`None`: sleep until
    /// granted). Other commands: `EINVAL`.
    pub fn fcntl(
        &self,
        ctx: &FileLockContext,
        cmd: i32,
        fl: &mut Flock,
        file: &FcntlFile,
        cancel: Option<&CancelToken>,
    ) -> Result<(), Errno> {
        match parse_fcntl(cmd, fl, file)? {
            FcntlCommand::Get(req) => {
                match self.getlk(ctx, &req) {
                    None => fl.l_type = libc::F_UNLCK as i16,
                    Some(info) => info.to_flock(fl),
                }
                Ok(())
            }
            FcntlCommand::Set(req) if cmd == libc::F_SETLK || cmd == libc::F_OFD_SETLK => {
                self.setlk(ctx, &req, None)
            }
            FcntlCommand::Set(req) => {
                let wait = cancel.map_or(Wait::Forever, Wait::Until);
                self.setlk_inner(ctx, &req, wait)
            }
        }
    }

    /// [`LockManager::fcntl`] on an inode that has no lock context (it never held a
    /// lock): a query answers `F_UNLCK` and an unlock does nothing, after the same checks,
    /// and neither creates a context, as Linux's `posix_test_lock` and
    /// `posix_lock_inode` create none. So two queries of a never-locked file write
    /// nothing. `None` for a lock request: it needs the context.
    pub fn fcntl_without_context(
        &self,
        cmd: i32,
        fl: &mut Flock,
        file: &FcntlFile,
    ) -> Option<Result<(), Errno>> {
        match parse_fcntl(cmd, fl, file) {
            Err(e) => Some(Err(e)),
            Ok(FcntlCommand::Get(_)) => {
                fl.l_type = libc::F_UNLCK as i16;
                Some(Ok(()))
            }
            Ok(FcntlCommand::Set(req)) if req.ty == LockType::Unlock => Some(Ok(())),
            Ok(FcntlCommand::Set(_)) => None,
        }
    }

    /// Every held and waiting lock, context by context (flock list, then POSIX list; each
    /// lock followed by its waiters).
    pub fn list(&self) -> Vec<ListedLock> {
        let mut out = Vec::new();
        let mut id = 0;
        self.shared.registry.for_each(|c| {
            let l = c.lists.lock();
            for h in l.flock.iter().chain(l.posix.iter()) {
                id += 1;
                out.push(ListedLock {
                    id,
                    waiting: false,
                    info: h.info,
                    dev: c.dev,
                    ino: c.ino,
                });
                for w in &h.waiters {
                    out.push(ListedLock {
                        id,
                        waiting: true,
                        info: w.req.info(w.class),
                        dev: c.dev,
                        ino: c.ino,
                    });
                }
            }
        });
        out
    }

    /// The listing in `/proc/locks` format.
    pub fn proc_locks(&self) -> String {
        self.list().iter().map(ListedLock::proc_line).collect()
    }
}

/// A lock command of `fcntl`, checked.
enum FcntlCommand {
    /// `F_GETLK`, `F_OFD_GETLK`.
    Get(LockRequest),
    /// `F_SETLK`, `F_SETLKW` and their OFD forms.
    Set(LockRequest),
}

/// Checks a lock command of `fcntl` as Linux does, in Linux's order (see
/// [`LockManager::fcntl`]).
fn parse_fcntl(cmd: i32, fl: &Flock, file: &FcntlFile) -> Result<FcntlCommand, Errno> {
    let ofd = matches!(
        cmd,
        libc::F_OFD_GETLK | libc::F_OFD_SETLK | libc::F_OFD_SETLKW
    );
    let owner = if ofd {
        LockOwner::File(file.file_id)
    } else {
        LockOwner::Process(file.process_id)
    };
    let get = match cmd {
        libc::F_GETLK | libc::F_OFD_GETLK => true,
        libc::F_SETLK | libc::F_SETLKW | libc::F_OFD_SETLK | libc::F_OFD_SETLKW => false,
        _ => return Err(Errno::EINVAL),
    };
    // F_GETLK wants F_RDLCK or F_WRLCK; F_OFD_GETLK also takes F_UNLCK (Linux 6.7+:
    // "which of my own OFD locks overlap this range").
    if get && !ofd && ![libc::F_RDLCK, libc::F_WRLCK].contains(&(fl.l_type as i32)) {
        return Err(Errno::EINVAL);
    }
    let (start, end) = flock_to_range(fl, file.pos, file.size)?;
    let ty = LockType::from_l_type(fl.l_type)?;
    if !get
        && ((ty == LockType::Read && !file.readable) || (ty == LockType::Write && !file.writable))
    {
        return Err(Errno::EBADF);
    }
    if ofd && fl.l_pid != 0 {
        return Err(Errno::EINVAL);
    }
    let req = LockRequest {
        owner,
        pid: file.pid,
        ty,
        start,
        end,
    };
    Ok(if get {
        FcntlCommand::Get(req)
    } else {
        FcntlCommand::Set(req)
    })
}
