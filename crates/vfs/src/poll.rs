//! # Readiness: poll masks, wait queues, `poll(2)`
//!
//! The user-space counterpart of Linux's `wait_queue_head` + `poll_table` + `f_op->poll`.
//!
//! - [`Pollable`]: anything an fd can refer to that reports readiness. `poll()` returns
//!   the current mask (Linux's `vfs_poll` without a poll table); `wait_queue()` is the
//!   queue a poller or an epoll item hooks onto; `ep_links()` is the file's epoll link
//!   set (Linux's `file->f_ep`). Files that return `None` from those two (regular tmpfs
//!   files: [`RegularFile`]) are always ready and cannot be added to an epoll (`EPERM`,
//!   Linux's `file_can_poll()`).
//! - [`WaitQueue`]: a list of [`WaitEntry`] callbacks under one lock. `wake(key)` runs
//!   every non-exclusive entry, then exclusive entries until one reports that it woke a
//!   task (Linux's `__wake_up_common` with `nr_exclusive == 1`). Non-exclusive entries
//!   run newest first, exclusive entries oldest first, as `add_wait_queue` /
//!   `add_wait_queue_exclusive` order them. The key is the event mask of the wakeup (0:
//!   "everything", as `wake_up_all` on release).
//! - [`poll`]: `poll(2)`/`ppoll(2)` over a set of pollables.
//!
//! ## Locks
//!
//! The queue's mutex protects its entry lists, and the callbacks run under it (as Linux
//! runs wake functions under `wq_head->lock`), so a remover that has taken the lock knows
//! no callback of its entry is running or will run. A callback may take the lock of an
//! epoll instance's ready list and then the lock of *another* wait queue (an epoll's
//! `poll_wait` when it is itself watched); the epoll loop check keeps that chain acyclic
//! and at most `EP_MAX_NESTS` deep. A callback never touches the queue that runs it.
//!
//! ## Sleeping
//!
//! [`wait_event`] is `wait_event_interruptible_timeout`: it registers a [`ThreadWaiter`]
//! on the queues *before* checking the condition, so a waker that changes the state and
//! then wakes the queue either runs after the registration (and unparks us) or changed
//! the state before our check (the queue lock orders the two). The [`CancelToken`]'s own
//! registration gives the same guarantee for cancellation (see `cancel.rs`).

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Wake, Waker};
use std::time::{Duration, Instant};

use crate::cancel::CancelToken;
use crate::epoll::EpLinks;
use crate::locks::sync::{self, Mutex, MutexGuard};
use crate::Errno;

/// Event bits (Linux's `EPOLL*` / `POLL*`, which share values).
pub mod events {
    /// Readable.
    pub const EPOLLIN: u32 = 0x1;
    /// Urgent data.
    pub const EPOLLPRI: u32 = 0x2;
    /// Writable.
    pub const EPOLLOUT: u32 = 0x4;
    /// Error.
    pub const EPOLLERR: u32 = 0x8;
    /// Hang-up (the other end closed).
    pub const EPOLLHUP: u32 = 0x10;
    /// `poll`: the descriptor is not open.
    pub const POLLNVAL: u32 = 0x20;
    /// Normal data readable.
    pub const EPOLLRDNORM: u32 = 0x40;
    /// Priority data readable.
    pub const EPOLLRDBAND: u32 = 0x80;
    /// Normal data writable.
    pub const EPOLLWRNORM: u32 = 0x100;
    /// Priority data writable.
    pub const EPOLLWRBAND: u32 = 0x200;
    /// Unused by Linux.
    pub const EPOLLMSG: u32 = 0x400;
    /// The peer shut down writing.
    pub const EPOLLRDHUP: u32 = 0x2000;
    /// `epoll_ctl`: wake one of the instances waiting on the file.
    pub const EPOLLEXCLUSIVE: u32 = 1 << 28;
    /// `epoll_ctl`: keep the system awake (accepted, no effect).
    pub const EPOLLWAKEUP: u32 = 1 << 29;
    /// `epoll_ctl`: report once, then disable until `EPOLL_CTL_MOD`.
    pub const EPOLLONESHOT: u32 = 1 << 30;
    /// `epoll_ctl`: edge-triggered.
    pub const EPOLLET: u32 = 1 << 31;
    /// What a regular file always reports (Linux: `DEFAULT_POLLMASK`).
    pub const DEFAULT_POLLMASK: u32 = EPOLLIN | EPOLLOUT | EPOLLRDNORM | EPOLLWRNORM;
}
use events::*;

/// A file that can report readiness. See the module docs.
pub trait Pollable: Send + Sync {
    /// The current readiness mask (never blocks; may take the object's own lock).
    fn poll(&self) -> u32;
    /// The queue pollers and epoll items hook onto; `None` for files that are always
    /// ready and never wake anyone (regular files).
    fn wait_queue(&self) -> Option<&WaitQueue>;
    /// The file's epoll link set (`file->f_ep`); `None` exactly when `wait_queue` is.
    fn ep_links(&self) -> Option<&EpLinks>;
    /// `Some` when this file is an epoll instance (for the nesting checks).
    fn as_epoll(&self) -> Option<&crate::epoll::EventPoll> {
        None
    }
    /// Whether `epoll_ctl(ADD)` accepts this file (Linux's `file_can_poll`); `EPERM` if not.
    fn supports_epoll(&self) -> bool {
        self.wait_queue().is_some() && self.ep_links().is_some()
    }
}

/// A regular (tmpfs) file: always [`DEFAULT_POLLMASK`], not watchable by epoll.
#[derive(Debug, Default, Clone, Copy)]
pub struct RegularFile;

impl Pollable for RegularFile {
    fn poll(&self) -> u32 {
        DEFAULT_POLLMASK
    }
    fn wait_queue(&self) -> Option<&WaitQueue> {
        None
    }
    fn ep_links(&self) -> Option<&EpLinks> {
        None
    }
}

/// A callback hooked onto a [`WaitQueue`] (Linux's `wait_queue_entry`).
pub trait WaitEntry: Send + Sync {
    /// Called under the queue's lock with the wakeup's event key (0: any). Returns
    /// whether it woke a task, which is what stops an exclusive wakeup.
    fn wake(&self, key: u32) -> bool;
    /// Whether the entry unhooks itself when `wake` returns true
    /// (`autoremove_wake_function`).
    fn autoremove(&self) -> bool {
        false
    }
}

#[derive(Default)]
struct Entries {
    /// Non-exclusive entries, oldest first (woken newest first).
    shared: Vec<Arc<dyn WaitEntry>>,
    /// Exclusive entries, oldest first (woken oldest first, until one wakes a task).
    exclusive: Vec<Arc<dyn WaitEntry>>,
}

/// A wait queue head. See the module docs.
pub struct WaitQueue {
    entries: Mutex<Entries>,
    /// How many entries are queued: written under the lock when it changes, read without
    /// it by [`has_waiters`](WaitQueue::has_waiters) (Linux's `waitqueue_active`).
    queued: AtomicUsize,
}

impl Default for WaitQueue {
    fn default() -> Self {
        Self::new()
    }
}

fn same(a: &Arc<dyn WaitEntry>, b: &Arc<dyn WaitEntry>) -> bool {
    // Compare data pointers only: vtable pointers of one type may differ between
    // codegen units.
    std::ptr::eq(Arc::as_ptr(a) as *const u8, Arc::as_ptr(b) as *const u8)
}

/// The locked queue: add, remove and wake while holding the lock, so an object whose
/// state is protected by this lock (eventfd's counter) changes state and wakes atomically.
pub struct WaitQueueGuard<'a> {
    g: MutexGuard<'a, Entries>,
    queued: &'a AtomicUsize,
}

impl Drop for WaitQueueGuard<'_> {
    fn drop(&mut self) {
        let n = self.g.shared.len() + self.g.exclusive.len();
        // Relaxed: written under the lock; see `WaitQueue::has_waiters` for the readers.
        if self.queued.load(Ordering::Relaxed) != n {
            self.queued.store(n, Ordering::Relaxed);
        }
    }
}

impl WaitQueueGuard<'_> {
    /// `add_wait_queue` (`exclusive == false`) or `add_wait_queue_exclusive`.
    pub fn add(&mut self, entry: Arc<dyn WaitEntry>, exclusive: bool) {
        if exclusive {
            self.g.exclusive.push(entry);
        } else {
            self.g.shared.push(entry);
        }
    }

    /// Unhooks `entry` if it is queued; returns whether it was.
    pub fn remove(&mut self, entry: &Arc<dyn WaitEntry>) -> bool {
        let e = &mut *self.g;
        for list in [&mut e.shared, &mut e.exclusive] {
            if let Some(i) = list.iter().position(|e| same(e, entry)) {
                list.remove(i);
                return true;
            }
        }
        false
    }

    /// Whether any entry is queued (`waitqueue_active`).
    pub fn is_active(&self) -> bool {
        !self.g.shared.is_empty() || !self.g.exclusive.is_empty()
    }

    /// `__wake_up_locked_key(wq, key)` with one exclusive wakeup.
    pub fn wake(&mut self, key: u32) {
        let e = &mut *self.g;
        let mut i = e.shared.len();
        while i > 0 {
            i -= 1;
            let entry = &e.shared[i];
            if entry.wake(key) && entry.autoremove() {
                e.shared.remove(i);
            }
        }
        let mut i = 0;
        while i < e.exclusive.len() {
            let entry = &e.exclusive[i];
            if entry.wake(key) {
                if entry.autoremove() {
                    e.exclusive.remove(i);
                }
                return;
            }
            i += 1;
        }
    }
}

impl WaitQueue {
    /// An empty queue.
    pub fn new() -> Self {
        WaitQueue {
            entries: Mutex::new(Entries::default()),
            queued: AtomicUsize::new(0),
        }
    }

    /// Whether an entry may be queued, without taking the lock (Linux's
    /// `waitqueue_active`). Exact for a caller whose last check of the condition a
    /// sleeper waits for is ordered after the sleeper's `add` by a lock both take: the
    /// sleeper adds, then checks the condition under lock L; the waker changes the
    /// condition under L, then calls this. Either the sleeper's check saw the change, or
    /// its `add` (before its unlock of L) happened before the waker's lock of L, and so
    /// before this load.
    pub fn has_waiters(&self) -> bool {
        // Relaxed: ordered by the lock L of the contract above.
        self.queued.load(Ordering::Relaxed) != 0
    }

    /// [`wake`](WaitQueue::wake) if [`has_waiters`](WaitQueue::has_waiters): no lock
    /// taken (no shared line written) when nobody waits. Same contract as `has_waiters`.
    pub fn wake_if_waiters(&self, key: u32) {
        if self.has_waiters() {
            self.wake(key);
        }
    }

    /// Takes the queue lock.
    pub fn lock(&self) -> WaitQueueGuard<'_> {
        WaitQueueGuard {
            g: self.entries.lock(),
            queued: &self.queued,
        }
    }

    /// Locks, hooks `entry` on, unlocks.
    pub fn add(&self, entry: Arc<dyn WaitEntry>, exclusive: bool) {
        self.lock().add(entry, exclusive)
    }

    /// Locks, unhooks `entry` (no-op if absent), unlocks.
    pub fn remove(&self, entry: &Arc<dyn WaitEntry>) -> bool {
        self.lock().remove(entry)
    }

    /// Locks, wakes with `key`, unlocks.
    pub fn wake(&self, key: u32) {
        self.lock().wake(key)
    }
}

/// A sleeping thread hooked onto wait queues: wakes (unparks) the thread when a wakeup's
/// key intersects `filter` (0 key: always). Also a [`Waker`] for cancel tokens.
pub struct ThreadWaiter {
    thread: sync::Thread,
    filter: u32,
    autoremove: bool,
    /// Set by a wakeup from a queue. Release here pairs with the Acquire in
    /// [`ThreadWaiter::woken`].
    woken: AtomicBool,
}

impl ThreadWaiter {
    /// A waiter for the calling thread.
    pub fn current(filter: u32, autoremove: bool) -> Arc<ThreadWaiter> {
        Arc::new(ThreadWaiter {
            thread: sync::current(),
            filter,
            autoremove,
            woken: AtomicBool::new(false),
        })
    }

    /// Whether a queue wakeup has reached this waiter.
    pub fn woken(&self) -> bool {
        // Acquire: pairs with the Release store in `wake`.
        self.woken.load(Ordering::Acquire)
    }
}

impl WaitEntry for ThreadWaiter {
    fn wake(&self, key: u32) -> bool {
        if key != 0 && key & self.filter == 0 {
            return false;
        }
        // Release: pairs with the Acquire in `woken`.
        self.woken.store(true, Ordering::Release);
        self.thread.unpark();
        true
    }
    fn autoremove(&self) -> bool {
        self.autoremove
    }
}

impl Wake for ThreadWaiter {
    fn wake(self: Arc<Self>) {
        self.thread.unpark();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.thread.unpark();
    }
}

/// Why a wait ended without its condition.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum WaitError {
    /// The timeout passed.
    TimedOut,
    /// The cancel token fired (`EINTR`).
    Interrupted,
}

impl From<WaitError> for Errno {
    fn from(e: WaitError) -> Errno {
        match e {
            WaitError::TimedOut => Errno::ETIMEDOUT,
            WaitError::Interrupted => Errno::EINTR,
        }
    }
}

/// The deadline of a Linux millisecond timeout: `None` for "forever" (negative).
pub fn deadline_from_ms(timeout_ms: i32) -> Option<Instant> {
    (timeout_ms >= 0).then(|| Instant::now() + Duration::from_millis(timeout_ms as u64))
}

/// Parks the calling thread once, until unparked, `deadline` or the cancel token's
/// deadline. Returns `Err` if the deadline passed or the token is cancelled.
pub(crate) fn park_once(
    deadline: Option<Instant>,
    cancel: Option<&CancelToken>,
) -> Result<(), WaitError> {
    if cancel.is_some_and(|c| c.is_cancelled()) {
        return Err(WaitError::Interrupted);
    }
    let now = Instant::now();
    if deadline.is_some_and(|d| now >= d) {
        return Err(WaitError::TimedOut);
    }
    let limit = match (deadline, cancel.and_then(|c| c.deadline())) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    };
    match limit {
        Some(l) => sync::park_timeout(l.saturating_duration_since(now)),
        None => sync::park(),
    }
    Ok(())
}

/// `wait_event_interruptible_timeout` over several queues: returns the first `Some` that
/// `cond` yields, checked once before registering and after every wakeup. Wakeups whose
/// key misses `filter` are ignored. See the module docs for why no wakeup is lost.
pub fn wait_event<T>(
    queues: &[&WaitQueue],
    filter: u32,
    deadline: Option<Instant>,
    cancel: Option<&CancelToken>,
    mut cond: impl FnMut() -> Option<T>,
) -> Result<T, WaitError> {
    if let Some(v) = cond() {
        return Ok(v);
    }
    let waiter = ThreadWaiter::current(filter, false);
    let entry: Arc<dyn WaitEntry> = waiter.clone();
    for q in queues {
        q.add(entry.clone(), false);
    }
    let _reg = cancel.map(|c| c.register(Waker::from(waiter.clone())));
    let res = loop {
        if let Some(v) = cond() {
            break Ok(v);
        }
        if let Err(e) = park_once(deadline, cancel) {
            // A last look: the condition wins over a simultaneous timeout or cancel.
            break cond().ok_or(e);
        }
    };
    for q in queues {
        q.remove(&entry);
    }
    res
}

/// What one `pollfd` refers to.
#[derive(Clone)]
pub enum PollTarget {
    /// A negative fd: ignored, `revents` 0.
    Ignore,
    /// A closed fd: `POLLNVAL`.
    BadFd,
    /// An open file.
    File(Arc<dyn Pollable>),
}

/// One `struct pollfd`, with the fd already resolved by the caller.
#[derive(Clone)]
pub struct PollFd {
    /// What to poll.
    pub target: PollTarget,
    /// Requested events (`POLLERR`/`POLLHUP` are always reported).
    pub events: u16,
    /// Returned events.
    pub revents: u16,
}

impl PollFd {
    /// A request for `events` on `target`.
    pub fn new(target: PollTarget, events: u16) -> Self {
        PollFd {
            target,
            events,
            revents: 0,
        }
    }
}

fn poll_scan(fds: &mut [PollFd]) -> usize {
    let mut n = 0;
    for p in fds.iter_mut() {
        let mask = match &p.target {
            PollTarget::Ignore => 0,
            PollTarget::BadFd => POLLNVAL,
            PollTarget::File(f) => f.poll() & (p.events as u32 | EPOLLERR | EPOLLHUP),
        };
        p.revents = mask as u16;
        n += (mask != 0) as usize;
    }
    n
}

/// `poll(2)`/`ppoll(2)`: fills every `revents` and returns how many are non-zero,
/// blocking until one is, `timeout_ms` passes (negative: forever; 0: never block) or
/// `cancel` fires (`EINTR`). The caller maps fds (`nfds > RLIMIT_NOFILE` is `EINVAL`
/// there) and the signal mask of `ppoll`.
pub fn poll(
    fds: &mut [PollFd],
    timeout_ms: i32,
    cancel: Option<&CancelToken>,
) -> Result<usize, Errno> {
    let n = poll_scan(fds);
    if n > 0 || timeout_ms == 0 {
        return Ok(n);
    }
    let deadline = deadline_from_ms(timeout_ms);
    // Linux's pollwake filters each wakeup by the fd's own requested mask; one waiter
    // per file gives the same filtering.
    let hooks: Vec<Hook> = fds
        .iter()
        .filter_map(|p| match &p.target {
            PollTarget::File(f) if f.wait_queue().is_some() => Some(Hook {
                entry: ThreadWaiter::current(p.events as u32 | EPOLLERR | EPOLLHUP, false),
                file: f.clone(),
            }),
            _ => None,
        })
        .collect();
    for h in &hooks {
        if let Some(q) = h.file.wait_queue() {
            q.add(h.entry.clone(), false);
        }
    }
    let tw = ThreadWaiter::current(0, false);
    let _reg = cancel.map(|c| c.register(Waker::from(tw)));
    let res = loop {
        let n = poll_scan(fds);
        if n > 0 {
            break Ok(n);
        }
        if let Err(e) = park_once(deadline, cancel) {
            let n = poll_scan(fds);
            break match e {
                _ if n > 0 => Ok(n),
                WaitError::TimedOut => Ok(0),
                WaitError::Interrupted => Err(Errno::EINTR),
            };
        }
    };
    for h in &hooks {
        if let Some(q) = h.file.wait_queue() {
            q.remove(&h.entry);
        }
    }
    res
}

/// A `poll` caller's waiter hooked onto one file's queue.
struct Hook {
    entry: Arc<dyn WaitEntry>,
    file: Arc<dyn Pollable>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    struct Count(AtomicUsize, bool);
    impl WaitEntry for Count {
        fn wake(&self, _key: u32) -> bool {
            self.0.fetch_add(1, Ordering::Relaxed);
            self.1
        }
    }

    #[test]
    fn exclusive_wakeup_stops_at_first_taker() {
        let q = WaitQueue::new();
        let a = Arc::new(Count(AtomicUsize::new(0), false));
        let b = Arc::new(Count(AtomicUsize::new(0), true));
        let c = Arc::new(Count(AtomicUsize::new(0), true));
        let s = Arc::new(Count(AtomicUsize::new(0), true));
        q.add(a.clone(), true);
        q.add(b.clone(), true);
        q.add(c.clone(), true);
        q.add(s.clone(), false);
        q.wake(EPOLLIN);
        let n = |x: &Arc<Count>| x.0.load(Ordering::Relaxed);
        assert_eq!((n(&s), n(&a), n(&b), n(&c)), (1, 1, 1, 0));
        let e: Arc<dyn WaitEntry> = b.clone();
        assert!(q.remove(&e));
        assert!(!q.remove(&e));
        q.wake(EPOLLIN);
        assert_eq!((n(&s), n(&a), n(&b), n(&c)), (2, 2, 1, 1));
    }

    #[test]
    fn poll_regular_file_and_bad_fd() {
        let mut fds = vec![
            PollFd::new(PollTarget::File(Arc::new(RegularFile)), EPOLLIN as u16),
            PollFd::new(PollTarget::BadFd, EPOLLIN as u16),
            PollFd::new(PollTarget::Ignore, EPOLLIN as u16),
        ];
        assert_eq!(poll(&mut fds, -1, None), Ok(2));
        assert_eq!(fds[0].revents as u32, EPOLLIN);
        assert_eq!(fds[1].revents as u32, POLLNVAL);
        assert_eq!(fds[2].revents, 0);
    }

    #[test]
    fn wait_event_times_out_and_cancels() {
        let q = WaitQueue::new();
        let d = Instant::now() + Duration::from_millis(5);
        assert_eq!(
            wait_event(&[&q], EPOLLIN, Some(d), None, || None::<()>),
            Err(WaitError::TimedOut)
        );
        let t = CancelToken::new();
        t.cancel();
        assert_eq!(
            wait_event(&[&q], EPOLLIN, None, Some(&t), || None::<()>),
            Err(WaitError::Interrupted)
        );
        assert!(!q.lock().is_active());
    }
}
