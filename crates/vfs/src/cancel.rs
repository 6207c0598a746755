//! Cancellation of blocking system calls: the user-space stand-in for a pending signal.
//!
//! A [`CancelToken`] is handed to every call that may sleep (`F_SETLKW`, blocking `flock`,
//! and later pipe reads and `epoll_wait`). Cancelling it from any thread, or reaching its
//! deadline, makes the sleeping call return promptly with `EINTR`, as a signal does on
//! Linux; the FUSE server maps `FUSE_INTERRUPT` onto it.
//!
//! A deadline also yields `EINTR`, never `ETIMEDOUT`: Linux has no timed lock wait, and a
//! program that bounds `F_SETLKW` with `alarm(2)` sees exactly `EINTR`.
//!
//! ## Wakeups
//!
//! A sleeper registers a [`Waker`] with the token ([`CancelToken::register`]) and then
//! checks [`CancelToken::is_cancelled`]; [`CancelToken::cancel`] sets the flag and then wakes
//! every registered waker. The waker list is protected by the token's own mutex, and both
//! sides touch it in that order, so a cancel is never lost: either the cancel's wake pass
//! runs after the registration (and wakes the sleeper), or the flag store happened before
//! the cancel took the mutex, which is before the registration released it, so the
//! sleeper's check sees the flag. Nothing polls.
//!
//! Tokens are independent of each other: no global state, one small allocation per token.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Wake, Waker};
use std::time::Instant;

use crate::locks::sync::{self, Mutex};
use crate::Errno;

/// A cloneable cancellation flag with an optional deadline. Clones share the flag.
#[derive(Clone)]
pub struct CancelToken {
    inner: Arc<Inner>,
}

struct Inner {
    cancelled: AtomicBool,
    deadline: Option<Instant>,
    next_id: AtomicU64,
    /// Registered sleepers, by registration id.
    wakers: Mutex<Vec<(u64, Waker)>>,
}

impl Default for CancelToken {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for CancelToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CancelToken")
            .field("cancelled", &self.is_cancelled())
            .field("deadline", &self.inner.deadline)
            .finish()
    }
}

/// Deregisters a waker when dropped.
pub struct Registration<'a> {
    token: &'a CancelToken,
    id: u64,
}

impl Drop for Registration<'_> {
    fn drop(&mut self) {
        self.token
            .inner
            .wakers
            .lock()
            .retain(|(id, _)| *id != self.id);
    }
}

/// Wakes a parked thread.
struct ThreadWaker(sync::Thread);

impl Wake for ThreadWaker {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.0.unpark();
    }
}

impl CancelToken {
    /// A token that is cancelled only by [`cancel`](Self::cancel).
    pub fn new() -> Self {
        Self::build(None)
    }

    /// A token that also counts as cancelled once `deadline` has passed.
    pub fn with_deadline(deadline: Instant) -> Self {
        Self::build(Some(deadline))
    }

    fn build(deadline: Option<Instant>) -> Self {
        CancelToken {
            inner: Arc::new(Inner {
                cancelled: AtomicBool::new(false),
                deadline,
                next_id: AtomicU64::new(0),
                wakers: Mutex::new(Vec::new()),
            }),
        }
    }

    /// Cancels every wait on this token (and its clones), now and in the future.
    pub fn cancel(&self) {
        // Release: pairs with the Acquire in `is_cancelled`, so a sleeper that sees the
        // flag also sees what the canceller did before cancelling.
        self.inner.cancelled.store(true, Ordering::Release);
        let wakers = self.inner.wakers.lock();
        for (_, w) in wakers.iter() {
            w.wake_by_ref();
        }
    }

    /// Whether the token was cancelled or its deadline has passed.
    pub fn is_cancelled(&self) -> bool {
        // Acquire: pairs with the Release in `cancel`.
        self.inner.cancelled.load(Ordering::Acquire)
            || self.inner.deadline.is_some_and(|d| Instant::now() >= d)
    }

    /// The deadline, if any.
    pub fn deadline(&self) -> Option<Instant> {
        self.inner.deadline
    }

    /// Registers `waker` to be woken on [`cancel`](Self::cancel) until the returned guard
    /// drops. Check [`is_cancelled`](Self::is_cancelled) *after* registering.
    pub fn register(&self, waker: Waker) -> Registration<'_> {
        // Relaxed: the id only has to be unique per token.
        let id = self.inner.next_id.fetch_add(1, Ordering::Relaxed);
        self.inner.wakers.lock().push((id, waker));
        Registration { token: self, id }
    }

    /// Parks the calling thread until `done()` returns true (`Ok`) or the token is
    /// cancelled or expires (`EINTR`). `done` is checked first, so a condition that is
    /// already met wins over a cancellation. Whoever makes `done()` true must unpark this
    /// thread afterwards (spurious unparks are harmless: the loop re-checks).
    pub fn wait_until(&self, done: impl FnMut() -> bool) -> Result<(), Errno> {
        self.wait(done, None).map(|_| ())
    }

    /// [`wait_until`](Self::wait_until) that also returns at `until`, a wake-up time of
    /// the caller's own: `Ok(true)` once `done`, `Ok(false)` if `until` passed first.
    pub(crate) fn wait_until_or(
        &self,
        done: impl FnMut() -> bool,
        until: Instant,
    ) -> Result<bool, Errno> {
        self.wait(done, Some(until))
    }

    /// The loop of both waits: `Ok(true)` once `done`, `Ok(false)` once `until` (if any)
    /// has passed, `EINTR` once cancelled or past the token's deadline.
    fn wait(&self, mut done: impl FnMut() -> bool, until: Option<Instant>) -> Result<bool, Errno> {
        if done() {
            return Ok(true);
        }
        let _reg = self.register(Waker::from(Arc::new(ThreadWaker(sync::current()))));
        loop {
            if done() {
                return Ok(true);
            }
            if self.is_cancelled() {
                return Err(Errno::EINTR);
            }
            // Sleep until the earlier of the token's deadline and the caller's time.
            let wake = match (self.inner.deadline, until) {
                (Some(d), Some(u)) => Some(d.min(u)),
                (d, u) => d.or(u),
            };
            let Some(wake) = wake else {
                sync::park();
                continue;
            };
            let now = Instant::now();
            if until.is_some_and(|u| now >= u) {
                return Ok(false);
            }
            sync::park_timeout(wake.saturating_duration_since(now));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;
    use std::time::Duration;

    #[test]
    fn cancel_wakes_a_sleeper_promptly() {
        let t = CancelToken::new();
        let t2 = t.clone();
        let h = std::thread::spawn(move || t2.wait_until(|| false));
        std::thread::sleep(Duration::from_millis(20));
        assert!(!t.is_cancelled());
        t.cancel();
        assert_eq!(h.join().unwrap(), Err(Errno::EINTR));
        assert!(t.is_cancelled());
        assert!(t.inner.wakers.lock().is_empty(), "registration dropped");
    }

    #[test]
    fn deadline_expires() {
        let t = CancelToken::with_deadline(Instant::now() + Duration::from_millis(10));
        assert_eq!(t.wait_until(|| false), Err(Errno::EINTR));
        assert!(t.is_cancelled());
    }

    #[test]
    fn done_wins_over_cancel() {
        let t = CancelToken::new();
        t.cancel();
        assert_eq!(t.wait_until(|| true), Ok(()));
    }

    #[test]
    fn condition_wakeup() {
        let t = CancelToken::new();
        let flag = Arc::new(AtomicBool::new(false));
        let f2 = flag.clone();
        let me = std::thread::current();
        let h = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(10));
            f2.store(true, Ordering::Release);
            me.unpark();
        });
        assert_eq!(t.wait_until(|| flag.load(Ordering::Acquire)), Ok(()));
        h.join().unwrap();
    }
}
