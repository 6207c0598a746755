//! The epoll file: `epoll_create1`, and `epoll_ctl` and `epoll_wait` on an [`Epoll`]
//! (the syscall-facing half; the instance, its items and ready list are in the parent
//! module).

use super::*;

/// An epoll file (what the open file description embeds). See the module docs.
pub struct Epoll {
    pub(super) ep: Arc<EventPoll>,
}

/// `epoll_create1(flags)`: `EINVAL` unless `flags` is 0 or `EPOLL_CLOEXEC` (the fd
/// table's business).
pub fn epoll_create1(ctx: &Arc<EpollContext>, flags: i32) -> Result<Epoll, Errno> {
    if flags & !EPOLL_CLOEXEC != 0 {
        return Err(Errno::EINVAL);
    }
    Ok(Epoll::new(ctx))
}

impl Epoll {
    /// A new, empty epoll instance in `ctx`. Of the scalable design it keeps no
    /// reference to `ctx`: later calls of [`Epoll::ctl`] pass it again.
    pub fn new(ctx: &Arc<EpollContext>) -> Epoll {
        Epoll {
            ep: EventPoll::new(ctx),
        }
    }

    /// The object to pass as a target to another epoll's `ctl`, or to `poll`.
    pub fn pollable(&self) -> Arc<dyn Pollable> {
        self.ep.clone()
    }

    /// The instance.
    pub fn instance(&self) -> &Arc<EventPoll> {
        &self.ep
    }

    /// `epoll_ctl(op, key, event)` on `target` (the caller resolved the fd, keeps the
    /// target file open during the call and answers `EBADF` itself). `event` is ignored
    /// for `EPOLL_CTL_DEL`. `ctx` is the context this instance was made in (the
    /// caller's `Vfs`'s; `EINVAL` if not, or if an epoll `target` was made in another):
    /// an `EPOLL_CTL_ADD` of an epoll takes its nesting lock (module docs, "The context").
    pub fn ctl(
        &self,
        ctx: &EpollContext,
        op: i32,
        key: FdKey,
        target: &Arc<dyn Pollable>,
        event: EpollEvent,
    ) -> Result<(), Errno> {
        if !self.ep.belongs_to(ctx) {
            return Err(Errno::EINVAL);
        }
        if !target.supports_epoll() {
            return Err(Errno::EPERM);
        }
        let mut ev = event;
        let has_event = op != EPOLL_CTL_DEL;
        if has_event {
            ev.events &= !EPOLLWAKEUP;
        }
        let tep = target.as_epoll();
        if tep.is_some_and(|t| std::ptr::eq(t, &*self.ep)) {
            return Err(Errno::EINVAL);
        }
        if has_event && ev.events & EPOLLEXCLUSIVE != 0 {
            if op == EPOLL_CTL_MOD {
                return Err(Errno::EINVAL);
            }
            if op == EPOLL_CTL_ADD && (tep.is_some() || ev.events & !EPOLLEXCLUSIVE_OK_BITS != 0) {
                return Err(Errno::EINVAL);
            }
        }
        let _nested = match tep {
            Some(t) if op == EPOLL_CTL_ADD => {
                // Every epoll-to-epoll edge stays inside one context, so that its nesting
                // lock covers every insertion the loop check must see.
                if !t.belongs_to(ctx) {
                    return Err(Errno::EINVAL);
                }
                let g = ctx.nested.lock();
                nesting::loop_check(&self.ep, t)?;
                Some(g)
            }
            _ => None,
        };
        let mut map = self.ep.items.lock(&key);
        let existing = map.get(&key).cloned();
        match (op, existing) {
            (EPOLL_CTL_ADD, None) => {
                ev.events |= EPOLLERR | EPOLLHUP;
                self.ep.insert(&mut map, key, target, ev);
                Ok(())
            }
            (EPOLL_CTL_ADD, Some(_)) => Err(Errno::EEXIST),
            (EPOLL_CTL_DEL, Some(item)) => {
                self.ep.remove_item(&mut map, &item, false);
                Ok(())
            }
            (EPOLL_CTL_MOD, Some(item)) => {
                if item.events.load(Ordering::Relaxed) & EPOLLEXCLUSIVE != 0 {
                    return Err(Errno::EINVAL);
                }
                ev.events |= EPOLLERR | EPOLLHUP;
                self.ep.modify(&item, ev);
                Ok(())
            }
            (EPOLL_CTL_DEL | EPOLL_CTL_MOD, None) => Err(Errno::ENOENT),
            _ => Err(Errno::EINVAL),
        }
    }

    /// `epoll_wait`/`epoll_pwait`: waits up to `timeout_ms` (negative: forever, 0: do
    /// not block) for events, fills `events` and returns how many. An empty `events`
    /// (`maxevents <= 0`) is `EINVAL`; a cancel is `EINTR` when no event is available.
    pub fn wait(
        &self,
        events: &mut [EpollEvent],
        timeout_ms: i32,
        cancel: Option<&CancelToken>,
    ) -> Result<usize, Errno> {
        if events.is_empty() {
            return Err(Errno::EINVAL);
        }
        let ep = &*self.ep;
        let deadline = deadline_from_ms(timeout_ms);
        let mut timed_out = timeout_ms == 0;
        let mut eavail = ep.events_available();
        loop {
            if eavail {
                let n = ep.send_events(events);
                if n > 0 {
                    return Ok(n);
                }
            }
            if timed_out {
                return Ok(0);
            }
            if cancel.is_some_and(|c| c.is_cancelled()) {
                return Err(Errno::EINTR);
            }
            let waiter = ThreadWaiter::current(0, true);
            let entry: Arc<dyn WaitEntry> = waiter.clone();
            // Queue first, then check every ready list under its lock: a callback
            // readies an item under that lock and then checks `wq.has_waiters()`, so
            // either we see the item or it sees us (`WaitQueue::has_waiters`).
            ep.wq.add(entry.clone(), true);
            eavail = ep.ready.any_ready_locked();
            if eavail {
                ep.wq.remove(&entry);
            } else {
                let _reg = cancel.map(|c| c.register(Waker::from(waiter.clone())));
                while !waiter.woken() {
                    match park_once(deadline, cancel) {
                        Ok(()) => {}
                        Err(WaitError::TimedOut) => {
                            timed_out = true;
                            break;
                        }
                        Err(WaitError::Interrupted) => break,
                    }
                }
                ep.wq.remove(&entry);
            }
            eavail = true;
        }
    }
}

impl Drop for Epoll {
    fn drop(&mut self) {
        // __fput: eventpoll_release (outer instances watching this one), then
        // ep_eventpoll_release.
        release_file_from_epoll(&*self.ep);
        self.ep.clear();
        if self.ep.item_refs.kill() {
            // SAFETY: no item is left (`PcpuCount::kill`): the items' reference, made in
            // `EventPoll::new`, is released here, once; `self.ep` keeps its own.
            unsafe { Arc::decrement_strong_count(Arc::as_ptr(&self.ep)) }
        }
    }
}
