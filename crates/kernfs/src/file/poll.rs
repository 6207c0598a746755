//! Poll and notify waiters of an open attribute file.
//!
//! # Poll and notify
//!
//! `notify` increments the open node's event counter (a release) and wakes the waiters;
//! nothing happens if nobody has the file open, as in Linux. An open file remembers the
//! counter when its `show` runs (`Acquire`); `poll` reports `POLLERR|POLLPRI` (plus the
//! default readable/writable bits) while the counter differs. As in Linux, an open file
//! that has not read yet reports `POLLERR|POLLPRI` (the counter starts at 1, the file's at
//! 0), and a removed node always does. Waiters register a callback ([`Waker`]) on the open
//! node's wait queue ([`POLL_WAITQ_CLASS`]); `notify` calls every callback under that
//! queue's mutex, so a callback must be short and must not add or remove waiters.
//!
//! `notify` takes that mutex only if the open node's waiter count (`nwaiters`) is not 0,
//! so notifying a file nobody polls takes no lock. No wakeup is lost: a waiter registers
//! (list push, then `nwaiters` increment, SeqCst, under the mutex) *before* its poll
//! check loads the event counter (SeqCst); `notify` increments the counter (SeqCst) and
//! *then* loads `nwaiters` (SeqCst). All four are in one total order S: if notify's load
//! does not see the waiter's increment, it precedes that increment in S, so the
//! counter increment precedes the waiter's check, which sees it and reports
//! `POLL_CHANGED`. Otherwise notify takes the mutex after the waiter's registration and
//! finds it listed. Removal's wake-up of pollers always takes the mutex.

use super::*;

impl KernfsOpenFile {
    /// `kernfs_fop_poll`: [`DEFAULT_POLLMASK`], plus [`POLL_CHANGED`] if the attribute was
    /// notified since this file last read it (or it never read, or the node is removed).
    pub fn poll(&self) -> u32 {
        let Some(on) = &self.open else {
            return DEFAULT_POLLMASK;
        };
        if !self.node.try_get_active() {
            return DEFAULT_POLLMASK | POLL_CHANGED;
        }
        // SeqCst: Acquire pairs with the increment in `notify`; SeqCst orders this load
        // after a waiter registration before it (`add_waiter`), see the module docs.
        let changed = self.event.load(Ordering::Relaxed) != on.event.load(Ordering::SeqCst);
        self.node.put_active();
        if changed {
            DEFAULT_POLLMASK | POLL_CHANGED
        } else {
            DEFAULT_POLLMASK
        }
    }

    /// Registers `w` to be called on `notify` (and removal) of this file's node; `None`
    /// for directories (they never change readiness). Register *before* checking
    /// [`poll`](Self::poll), so no notification is lost.
    pub fn add_waiter(&self, w: Waker) -> Option<WaiterKey> {
        let on = self.open.as_ref()?;
        let mut q = on.waitq.lock();
        let key = q.next_key;
        q.next_key += 1;
        q.waiters.push((key, self.id, w));
        // SeqCst pairs with the SeqCst load in `notify` (`wake_if_waiters`): see the
        // module docs. Under the mutex, so a notify that sees it finds the waiter listed.
        on.nwaiters.fetch_add(1, Ordering::SeqCst);
        Some(WaiterKey(key))
    }

    /// Unregisters a waiter; `false` if it was not registered here.
    pub fn remove_waiter(&self, key: WaiterKey) -> bool {
        let Some(on) = &self.open else {
            return false;
        };
        let mut q = on.waitq.lock();
        match q.waiters.iter().position(|(k, _, _)| *k == key.0) {
            Some(i) => {
                q.waiters.swap_remove(i);
                // Relaxed: a notify that still sees the old count only takes the mutex.
                on.nwaiters.fetch_sub(1, Ordering::Relaxed);
                true
            }
            None => false,
        }
    }

    /// Blocks until [`poll`](Self::poll) reports [`POLL_CHANGED`] or `timeout` passes
    /// (`None`: no limit), returning the last poll mask. Like `poll(2)` with `POLLPRI`.
    pub fn wait_event(&self, timeout: Option<Duration>) -> u32 {
        let me = std::thread::current();
        let Some(key) = self.add_waiter(Arc::new(move |_| me.unpark())) else {
            return self.poll();
        };
        let deadline = timeout.map(|t| Instant::now() + t);
        let mask = loop {
            let m = self.poll();
            if m & POLL_CHANGED != 0 {
                break m;
            }
            match deadline {
                None => std::thread::park(),
                Some(d) => {
                    let now = Instant::now();
                    if now >= d {
                        break m;
                    }
                    std::thread::park_timeout(d - now);
                }
            }
        };
        self.remove_waiter(key);
        mask
    }
}
