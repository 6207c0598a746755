//! Open files: the per-node open list under hashed mutexes, sysfs read/write/llseek
//! semantics, and poll/notify.
//!
//! ## The open node (Linux's `kernfs_open_node`)
//!
//! A file node that has been opened has an `OpenNode`: the list of its open files, the
//! event counter `notify` bumps, and the poll wait queue. `node.open` points to it.
//!
//! * The list and the pointer's *changes* are protected by the node's **open-file mutex**:
//!   lock `hash(node address)` of a table of `2^table_bits(ncpus)` cache-padded mutexes
//!   ([`HashedMutexes`](scalevfs_primitives::hashed::HashedMutexes), class
//!   [`OPEN_FILE_MUTEX_CLASS`]). Opens and closes of unrelated nodes mostly take different
//!   mutexes; a collision costs false contention, never correctness. (Linux's kernfs hashed
//!   locks, 5.19+.) The legacy design has one mutex (a table of one).
//! * The pointer is *read* without a lock: the first open publishes it with a `Release`
//!   store of an `Arc::into_raw` reference owned by the node, and `notify` reads it with an
//!   `Acquire` load (merged Linux: `rcu_assign_pointer` / `rcu_dereference`).
//! * **The scalable design keeps the open node for the node's lifetime** (the node's drop
//!   frees it); Linux frees it when the last file closes (`kfree_rcu`). Sysfs readers
//!   usually have a file open alone (open, read, close), so freeing made every open
//!   allocate an open node and publish it, and every close unpublish it and retire it:
//!   two more writes of the node's shared cache line and an allocation that the next
//!   opener, often on the other CPU, could not reuse. kernfs-showgids scaled 1.43x from 1
//!   to 2 threads that way, bimodal between 1.35x and 1.85x run to run, and 1.82x with the
//!   open node kept (`scripts/scaling.sh --rounds 5`, medians); one thread is 10% faster.
//!   The price is one open node (136 bytes with its `Arc` counts) per attribute file ever
//!   opened, until the node is freed (after its removal). A file's waiters are dropped
//!   when it closes, so a kept open node holds no wakers of closed files.
//! * The legacy design is kernfs's before the hashed locks: it reads and writes the pointer under one
//!   global spinlock ([`OPEN_NODE_LOCK_CLASS`], the old `kernfs_open_node_lock`) and
//!   frees the open node with the last close (at once: its readers hold that spinlock).
//! * Each open file holds its own `Arc` of its open node, so its poll/wait paths need
//!   neither lock nor guard.
//!
//! ## Per open file
//!
//! A mutex ([`OF_MUTEX_CLASS`]; Linux's `of->mutex` and `seq_file->lock` in one) serializes
//! read, write and llseek of one open file, and protects the seq_file state: the buffered
//! content, the unread window, `read_pos` and the file position. Callbacks run under it and
//! under an active reference. It is the outermost lock: a callback may call any kernfs
//! method.
//!
//! Reads, writes and seeks (seq_file semantics) are in `io`; poll and notify in `poll`.

use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use scalevfs_primitives::lockstat::{LockClass, Mutex};
use scalevfs_vfs::{Errno, SysResult};

use crate::node::{KernfsNode, NodeKind, ATTR_SIZE};
use crate::perm::{Creds, MAY_READ, MAY_WRITE};
use crate::{Core, Kernfs};

mod io;
mod poll;

/// Lock class of the hashed open-file mutexes (legacy: the one global mutex).
pub static OPEN_FILE_MUTEX_CLASS: LockClass = LockClass::new("kernfs_open_file_mutex");
/// Lock class of the legacy global open-node spinlock.
pub static OPEN_NODE_LOCK_CLASS: LockClass = LockClass::new("kernfs_open_node_lock");
/// Lock class of every open file's mutex.
pub static OF_MUTEX_CLASS: LockClass = LockClass::new("kernfs_of_mutex");
/// Lock class of every open node's poll wait queue.
pub static POLL_WAITQ_CLASS: LockClass = LockClass::new("kernfs_poll_waitq");

/// One page: the most a read returns from one `show`, the most a write passes to `store`.
pub const PAGE_SIZE: usize = 4096;
/// `s_maxbytes` of sysfs (`MAX_NON_LFS`): the largest file position.
pub const MAX_POS: i64 = (1 << 31) - 1;

/// `POLLIN | POLLOUT | POLLRDNORM | POLLWRNORM` (Linux's `DEFAULT_POLLMASK`).
pub const DEFAULT_POLLMASK: u32 =
    (libc::POLLIN | libc::POLLOUT | libc::POLLRDNORM | libc::POLLWRNORM) as u32;
/// What a changed (or removed) attribute adds to the poll mask.
pub const POLL_CHANGED: u32 = (libc::POLLERR | libc::POLLPRI) as u32;

/// A poll waiter: called with the event mask by `notify` (and on removal), under the wait
/// queue's mutex. Keep it short; it must not add or remove waiters.
pub type Waker = Arc<dyn Fn(u32) + Send + Sync>;

/// Identifies a registered waiter, for [`KernfsOpenFile::remove_waiter`].
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct WaiterKey(u64);

/// The ids of a node's open files (an id is unique within its open node). Most nodes have
/// one opener at a time, so the first id is kept inline: an open and close then allocate
/// nothing for the list (a `Vec` would allocate on the first push).
struct OpenList {
    first: Option<u64>,
    rest: Vec<u64>,
    next_id: u64,
}

impl OpenList {
    fn push(&mut self) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        if self.first.is_none() {
            self.first = Some(id);
        } else {
            self.rest.push(id);
        }
        id
    }

    fn remove(&mut self, id: u64) {
        if self.first == Some(id) {
            self.first = self.rest.pop();
        } else if let Some(i) = self.rest.iter().position(|&x| x == id) {
            self.rest.swap_remove(i);
        }
    }

    fn len(&self) -> usize {
        usize::from(self.first.is_some()) + self.rest.len()
    }
}

#[derive(Default)]
struct WaitList {
    next_key: u64,
    /// (key, id of the open file that registered it, callback).
    waiters: Vec<(u64, u64, Waker)>,
}

/// See the module docs.
pub(crate) struct OpenNode {
    event: AtomicU64,
    /// Protected by the node's open-file mutex (not by a lock of its own).
    list: UnsafeCell<OpenList>,
    waitq: Mutex<WaitList>,
    /// How many waiters `waitq` holds: changed under its mutex, read without it by
    /// `notify`, which skips the mutex when it is 0 (see the module docs).
    nwaiters: AtomicUsize,
}

// SAFETY: `list` is only accessed while holding the owning node's open-file mutex (see
// `Kernfs::get_open_node`/`put_open_node`); everything else is atomic or locked.
unsafe impl Sync for OpenNode {}
// SAFETY: the fields are Send (UnsafeCell<OpenList> is Send as OpenList is).
unsafe impl Send for OpenNode {}

impl OpenNode {
    fn new() -> Self {
        OpenNode {
            // Starts at 1 while open files start at 0: poll reports a change until the
            // first read, as kernfs does.
            event: AtomicU64::new(1),
            list: UnsafeCell::new(OpenList {
                first: None,
                rest: Vec::new(),
                next_id: 0,
            }),
            waitq: Mutex::with_class(WaitList::default(), &POLL_WAITQ_CLASS),
            nwaiters: AtomicUsize::new(0),
        }
    }

    pub(crate) fn wake(&self, mask: u32) {
        let q = self.waitq.lock();
        for (_, _, w) in &q.waiters {
            w(mask);
        }
    }

    /// `wake` unless no waiter is registered, without taking the mutex then. Call it
    /// after a SeqCst change of `event` (see the module docs for why no wakeup is lost).
    fn wake_if_waiters(&self, mask: u32) {
        // SeqCst pairs with the SeqCst increment in `add_waiter` (store buffering: see
        // the module docs).
        if self.nwaiters.load(Ordering::SeqCst) != 0 {
            self.wake(mask);
        }
    }
}

/// The seq_file state of one open file (see the module docs).
struct SeqState {
    buf: Vec<u8>,
    /// Unread window `buf[from..from + count]`.
    from: usize,
    count: usize,
    /// 0: the single record is still to be shown; 1: shown (EOF after the buffer).
    index: u8,
    read_pos: i64,
    f_pos: i64,
}

/// An open kernfs file or directory. Dropping it is `release`.
pub struct KernfsOpenFile {
    node: Arc<KernfsNode>,
    /// The open node (files only).
    open: Option<Arc<OpenNode>>,
    id: u64,
    readable: bool,
    writable: bool,
    /// The open node's event counter when `show` last ran.
    event: AtomicU64,
    state: Mutex<SeqState>,
}

impl Kernfs {
    /// Opens `node` with `open(2)` flags for `creds`, checking as Linux does:
    /// `ELOOP` for a symlink (resolve it first), `EISDIR` for a directory opened for
    /// writing (or with `O_CREAT`), `ENOTDIR` for `O_DIRECTORY` on a file, `EEXIST` for
    /// `O_CREAT|O_EXCL`, `EACCES` from the permission check (`O_TRUNC` needs write
    /// permission), then kernfs's own: `ENODEV` if the file was removed (`ENOENT` for a
    /// directory), `EACCES` for writing a file without any `w` bit or without `store`
    /// ([`has_store`](crate::AttributeOps::has_store)), or reading one without any `r`
    /// bit or without `show` (even for root, as `KERNFS_ROOT_EXTRA_OPEN_PERM_CHECK`).
    /// Other flags (`O_CLOEXEC`, `O_NONBLOCK`, `O_APPEND`, `O_TRUNC`'s truncation) are the
    /// VFS's or have no effect on kernfs files.
    pub fn open(
        &self,
        node: &Arc<KernfsNode>,
        flags: i32,
        creds: &Creds<'_>,
    ) -> SysResult<KernfsOpenFile> {
        self.check_same_fs(node)?;
        if flags & (libc::O_CREAT | libc::O_EXCL) == libc::O_CREAT | libc::O_EXCL {
            return Err(Errno::EEXIST);
        }
        let acc = flags & libc::O_ACCMODE;
        let (readable, writable) = match acc {
            libc::O_RDONLY => (true, false),
            libc::O_WRONLY => (false, true),
            libc::O_RDWR => (true, true),
            // 3: "no access" (ioctl only), but checked for read and write.
            _ => (false, false),
        };
        let mut mask = match acc {
            libc::O_RDONLY => MAY_READ,
            libc::O_WRONLY => MAY_WRITE,
            _ => MAY_READ | MAY_WRITE,
        };
        if flags & libc::O_TRUNC != 0 {
            mask |= MAY_WRITE;
        }
        match node.kind() {
            NodeKind::Link => return Err(Errno::ELOOP),
            NodeKind::Dir if flags & libc::O_CREAT != 0 || mask & MAY_WRITE != 0 => {
                return Err(Errno::EISDIR)
            }
            NodeKind::File if flags & libc::O_DIRECTORY != 0 => return Err(Errno::ENOTDIR),
            _ => {}
        }
        self.permission(node, creds, mask)?;
        let state = Mutex::with_class(
            SeqState {
                buf: Vec::new(),
                from: 0,
                count: 0,
                index: 0,
                read_pos: 0,
                f_pos: 0,
            },
            &OF_MUTEX_CLASS,
        );
        let mut of = KernfsOpenFile {
            node: node.clone(),
            open: None,
            id: 0,
            readable,
            writable,
            event: AtomicU64::new(0),
            state,
        };
        if node.kind() == NodeKind::Dir {
            if !node.is_active() {
                return Err(Errno::ENOENT);
            }
            return Ok(of);
        }
        // kernfs_fop_open: under an active reference.
        if !node.try_get_active() {
            return Err(Errno::ENODEV);
        }
        let mode = node.mode();
        let ops = &node.file().expect("a file node").ops;
        // kernfs_fop_open's KERNFS_ROOT_EXTRA_OPEN_PERM_CHECK: a mode bit *and* the method.
        let r = if (writable && (mode & 0o222 == 0 || !ops.has_store()))
            || (readable && (mode & 0o444 == 0 || !ops.has_show()))
        {
            Err(Errno::EACCES)
        } else {
            let (on, id) = self.get_open_node(node);
            of.open = Some(on);
            of.id = id;
            Ok(of)
        };
        node.put_active();
        r
    }

    /// Adds an open file to `node`'s open node (creating it), returning the open node and
    /// the file's id in its list.
    fn get_open_node(&self, node: &KernfsNode) -> (Arc<OpenNode>, u64) {
        let f = node.file().expect("open files are attribute files");
        // Allocate outside the mutex if the node looks unopened (a racy peek: Relaxed is
        // enough, the decision is re-made under the mutex), to keep the hold time short.
        let mut fresh = f
            .open
            .load(Ordering::Relaxed)
            .is_null()
            .then(|| Arc::new(OpenNode::new()));
        let (on, id) = {
            let _locked = lock_open_node(&self.inner.core, node);
            // Relaxed: the pointer only changes under the mutex we hold, which orders us
            // after its last writer.
            let mut p = f.open.load(Ordering::Relaxed);
            if p.is_null() {
                let on = fresh.take().unwrap_or_else(|| Arc::new(OpenNode::new()));
                p = Arc::into_raw(on).cast_mut();
                // Release pairs with the Acquire load in `with_open_node`: the open node is
                // fully built before a lockless reader can see it.
                f.open.store(p, Ordering::Release);
            }
            // SAFETY: `p` is the node's own strong reference (published above or earlier,
            // and dropped only after being cleared under this mutex), so the object is
            // alive; cloning it is sound.
            let on = unsafe {
                Arc::increment_strong_count(p);
                Arc::from_raw(p)
            };
            // SAFETY: the list is protected by this node's open-file mutex, which we hold.
            let list = unsafe { &mut *on.list.get() };
            let id = list.push();
            (on, id)
        };
        drop(fresh); // an unused speculative allocation, freed outside the mutex
        (on, id)
    }

    /// Removes open file `id` from `node`'s open node, with the waiters it registered;
    /// the legacy design frees the open node with the last file (see the module docs).
    fn put_open_node(core: &Core, node: &KernfsNode, on: &OpenNode, id: u64) {
        // Relaxed: this file's own registrations happened-before its release (same thread,
        // or handed over with the file), so a file with waiters sees a count above 0.
        if on.nwaiters.load(Ordering::Relaxed) != 0 {
            let mut q = on.waitq.lock();
            let before = q.waiters.len();
            q.waiters.retain(|&(_, owner, _)| owner != id);
            on.nwaiters
                .fetch_sub(before - q.waiters.len(), Ordering::Relaxed);
        }
        let f = node.file().expect("open files are attribute files");
        let retired = {
            let _m = core.open_file_locks.lock_ptr(node as *const KernfsNode);
            let legacy_lock = core.open_node_lock.as_ref().map(|l| l.lock());
            // SAFETY: the list is protected by this node's open-file mutex, which we hold.
            let list = unsafe { &mut *on.list.get() };
            list.remove(id);
            // Only the legacy design (it has the open-node lock) frees the open node.
            (list.len() == 0 && legacy_lock.is_some()).then(|| {
                // Relaxed: unpublishing orders nothing; legacy readers hold the spinlock.
                let p = f.open.swap(std::ptr::null_mut(), Ordering::Relaxed);
                debug_assert!(std::ptr::eq(p, on));
                p as usize
            })
        };
        if let Some(p) = retired {
            // SAFETY: `p` is the node's strong reference, unpublished above under the
            // open-node lock, which legacy readers hold while they clone it: nobody can
            // load it any more, so the node's reference can be dropped now (outside the
            // locks).
            drop(unsafe { Arc::from_raw(p as *const OpenNode) });
        }
    }

    /// Runs `f` on `node`'s open node, if the file is open somewhere (lockless read of the
    /// pointer; legacy: under the global open-node spinlock).
    fn with_open_node(&self, node: &KernfsNode, f: impl FnOnce(&OpenNode)) {
        let Some(fd) = node.file() else {
            return;
        };
        if let Some(l) = &self.inner.core.open_node_lock {
            let on = {
                let _s = l.lock();
                // Acquire (redundant under the lock, kept for uniformity) pairs with the
                // Release publication in `get_open_node`.
                let p = fd.open.load(Ordering::Acquire);
                if p.is_null() {
                    return;
                }
                // SAFETY: under the open-node lock a non-null pointer is the node's live
                // strong reference (cleared under this lock before it is dropped).
                unsafe {
                    Arc::increment_strong_count(p);
                    Arc::from_raw(p)
                }
            };
            f(&on);
            return;
        }
        // Acquire pairs with the Release publication in `get_open_node`.
        let p = fd.open.load(Ordering::Acquire);
        // SAFETY: in the scalable design a published open node is freed only when the node
        // is dropped (`FileData`'s drop), and the caller borrows the node.
        if let Some(on) = unsafe { p.as_ref() } {
            f(on);
        }
    }

    /// `sysfs_notify`/`kernfs_notify`: marks `node`'s content changed and wakes its
    /// pollers (`POLLERR|POLLPRI`). No effect on directories, symlinks, or files nobody has
    /// open. Lock-free unless a poller is registered (then the open node's wait queue
    /// mutex); the legacy design takes the global open-node spinlock.
    pub fn notify(&self, node: &KernfsNode) {
        self.with_open_node(node, |on| {
            // SeqCst: as a release, it pairs with the Acquire loads in `poll` and `show`
            // (what the embedder changed before notifying is visible to whoever sees the
            // new count); as SeqCst, it is ordered before the `nwaiters` load that follows
            // (pairs with `add_waiter` and `poll`, see the module docs).
            on.event.fetch_add(1, Ordering::SeqCst);
            on.wake_if_waiters(POLL_CHANGED);
        });
    }

    /// Wakes `node`'s pollers without a new event (used on removal).
    pub(crate) fn wake_pollers(&self, node: &KernfsNode) {
        self.with_open_node(node, |on| on.wake(POLL_CHANGED));
    }

    /// How many open files `node` has (0 for directories).
    pub fn open_count(&self, node: &KernfsNode) -> usize {
        let Some(f) = node.file() else {
            return 0;
        };
        let _locked = lock_open_node(&self.inner.core, node);
        let p = f.open.load(Ordering::Relaxed);
        // SAFETY: under the open-file mutex the pointer is either null or the node's live
        // reference, and the list is protected by that mutex.
        unsafe { p.as_ref().map_or(0, |on| (*on.list.get()).len()) }
    }
}

/// Takes what guards `node`'s open-node pointer and open list: its hashed open-file mutex,
/// then (legacy design) the global open-node spinlock. Both are held until the returned
/// guards drop, the spinlock first (a tuple drops its fields in order).
fn lock_open_node<'a>(core: &'a Core, node: &KernfsNode) -> impl Sized + 'a {
    let file_mutex = core.open_file_locks.lock_ptr(node as *const KernfsNode);
    let legacy_lock = core.open_node_lock.as_ref().map(|l| l.lock());
    (legacy_lock, file_mutex)
}

impl Drop for KernfsOpenFile {
    /// `kernfs_fop_release`: leaves the open node's list (freeing it with the last file).
    fn drop(&mut self) {
        if let Some(on) = self.open.take() {
            Kernfs::put_open_node(&self.node.core, &self.node, &on, self.id);
        }
    }
}

impl std::fmt::Debug for KernfsOpenFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KernfsOpenFile")
            .field("node", &self.node)
            .field("readable", &self.readable)
            .field("writable", &self.writable)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The scalable design keeps a node's open node after the last close (opening it again
    /// reuses it) and frees it with the node; the legacy design frees it with the last
    /// close, as kernfs did before its hashed locks.
    #[test]
    fn open_node_lives_as_long_as_the_node_in_the_scalable_design() {
        use crate::{FnAttr, Locking};
        for locking in [Locking::Scalable, Locking::Legacy] {
            let fs = Kernfs::new(locking);
            let node = fs
                .create_file(fs.root(), "a", 0o444, 0, 0, FnAttr::constant("x"))
                .unwrap();
            let of = fs.open(&node, libc::O_RDONLY, &Creds::ROOT).unwrap();
            let kept = Arc::downgrade(of.open.as_ref().unwrap());
            drop(of);
            let published = !node.file().unwrap().open.load(Ordering::Relaxed).is_null();
            assert_eq!(published, locking == Locking::Scalable, "{locking:?}");
            let again = fs.open(&node, libc::O_RDONLY, &Creds::ROOT).unwrap();
            let same = std::ptr::eq(Arc::as_ptr(again.open.as_ref().unwrap()), kept.as_ptr());
            assert_eq!(same, locking == Locking::Scalable, "{locking:?}");
            drop(again);
            fs.remove(&node).unwrap();
            drop(node);
            drop(fs);
            // The last references (table entries) go after a grace period.
            for _ in 0..10_000 {
                if kept.strong_count() == 0 {
                    break;
                }
                scalevfs_primitives::epoch::flush();
            }
            assert_eq!(kept.strong_count(), 0, "{locking:?}: the open node leaked");
        }
    }

    #[test]
    fn open_list_keeps_every_id_once() {
        let mut l = OpenList {
            first: None,
            rest: Vec::new(),
            next_id: 0,
        };
        let ids: Vec<u64> = (0..4).map(|_| l.push()).collect();
        assert_eq!((ids.clone(), l.len()), (vec![0, 1, 2, 3], 4));
        l.remove(0); // the inline one: refilled from the rest
        assert_eq!((l.len(), l.first.is_some()), (3, true));
        l.remove(2);
        l.remove(2); // unknown id: no effect
        assert_eq!(l.len(), 2);
        let mut left: Vec<u64> = l.first.into_iter().chain(l.rest.iter().copied()).collect();
        left.sort_unstable();
        assert_eq!(left, vec![1, 3]);
        l.remove(1);
        l.remove(3);
        assert_eq!((l.len(), l.first), (0, None));
    }
}
