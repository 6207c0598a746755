//! # eventfd (Linux's `fs/eventfd.c`)
//!
//! A 64-bit counter. `write` adds (blocking or `EAGAIN` if the sum would exceed
//! `0xffff_ffff_ffff_fffe`; the value `u64::MAX` is `EINVAL`); `read` returns the counter
//! and zeroes it, or returns 1 and decrements in `EFD_SEMAPHORE` mode (blocking or
//! `EAGAIN` at 0). A read buffer shorter than 8 bytes, or a write
//! buffer of any size but 8, is `EINVAL`. Poll: `EPOLLIN` when the
//! counter is non-zero, `EPOLLOUT` while another write of 1 fits, `EPOLLERR` when the
//! counter is `u64::MAX` (reachable in Linux only through in-kernel `eventfd_signal`
//! overflow; kept for fidelity).
//!
//! ## Locks
//!
//! As in Linux the counter is protected by the wait queue's own lock (`ctx->wqh.lock`):
//! a read or write changes it and wakes the queue in one critical section (a read
//! wakes with `EPOLLOUT`, a write with `EPOLLIN`, also a write of 0, as Linux does).
//! `poll` reads it without the lock, like Linux's `READ_ONCE`. The stores and that load
//! are `SeqCst`: with the `SeqCst` store and load of an epoll item's `events` (see
//! `epoll`'s "Memory orderings") either `EPOLL_CTL_MOD`'s poll sees a new count or the
//! write's wakeup sees the new `events`.
//!
//! `EFD_CLOEXEC` belongs to the fd table; `EFD_NONBLOCK` is the file's `O_NONBLOCK`,
//! kept here and changeable with [`EventFd::set_nonblock`] (`F_SETFL`).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use crate::cancel::CancelToken;
use crate::epoll::{release_file_from_epoll, EpLinks};
use crate::poll::events::*;
use crate::poll::{wait_event, Pollable, WaitError, WaitQueue};
use crate::Errno;

/// Reads decrement by one and return 1 (semaphore mode).
pub const EFD_SEMAPHORE: i32 = libc::EFD_SEMAPHORE;
/// Non-blocking reads and writes.
pub const EFD_NONBLOCK: i32 = libc::EFD_NONBLOCK;
/// Close on `exec`.
pub const EFD_CLOEXEC: i32 = libc::EFD_CLOEXEC;

/// The largest counter value a write can produce.
const COUNT_MAX: u64 = u64::MAX - 1;

/// The shared part of an eventfd (what epoll items keep alive).
pub struct EventFdInner {
    /// Written only under `wq`'s lock.
    count: AtomicU64,
    semaphore: bool,
    wq: WaitQueue,
    links: EpLinks,
}

impl Pollable for EventFdInner {
    fn poll(&self) -> u32 {
        // SeqCst: pairs with the SeqCst stores in read/write (module docs).
        let c = self.count.load(Ordering::SeqCst);
        let mut m = 0;
        if c > 0 {
            m |= EPOLLIN;
        }
        if c == u64::MAX {
            m |= EPOLLERR;
        }
        if c < COUNT_MAX {
            m |= EPOLLOUT;
        }
        m
    }
    fn wait_queue(&self) -> Option<&WaitQueue> {
        Some(&self.wq)
    }
    fn ep_links(&self) -> Option<&EpLinks> {
        Some(&self.links)
    }
}

/// An eventfd open file: what the open file description embeds. Dropping it is the
/// file's last close (removes it from every epoll watching it).
pub struct EventFd {
    inner: Arc<EventFdInner>,
    nonblock: AtomicBool,
}

impl EventFd {
    /// `eventfd2(initval, flags)`; `EINVAL` for unknown flags.
    pub fn new(initval: u32, flags: i32) -> Result<EventFd, Errno> {
        if flags & !(EFD_SEMAPHORE | EFD_NONBLOCK | EFD_CLOEXEC) != 0 {
            return Err(Errno::EINVAL);
        }
        Ok(EventFd {
            inner: Arc::new(EventFdInner {
                count: AtomicU64::new(initval as u64),
                semaphore: flags & EFD_SEMAPHORE != 0,
                wq: WaitQueue::new(),
                links: EpLinks::new(),
            }),
            nonblock: AtomicBool::new(flags & EFD_NONBLOCK != 0),
        })
    }

    /// The object to pass to `epoll_ctl` and `poll`.
    pub fn pollable(&self) -> Arc<dyn Pollable> {
        self.inner.clone()
    }

    /// `F_SETFL(O_NONBLOCK)`.
    pub fn set_nonblock(&self, on: bool) {
        // Relaxed: a flag read by later calls of this file, ordered by the caller.
        self.nonblock.store(on, Ordering::Relaxed);
    }

    /// Whether reads and writes fail with `EAGAIN` instead of blocking.
    pub fn nonblock(&self) -> bool {
        self.nonblock.load(Ordering::Relaxed)
    }

    /// The counter (for `/proc/self/fdinfo`'s `eventfd-count`).
    pub fn count(&self) -> u64 {
        // Relaxed: a snapshot for reporting.
        self.inner.count.load(Ordering::Relaxed)
    }

    /// `read(2)`: fills `buf[..8]` with the value (native endian) and returns 8.
    pub fn read(&self, buf: &mut [u8], cancel: Option<&CancelToken>) -> Result<usize, Errno> {
        if buf.len() < 8 {
            return Err(Errno::EINVAL);
        }
        let inner = &*self.inner;
        let try_read = || {
            let mut wq = inner.wq.lock();
            // Relaxed: stores happen only under the queue lock we hold.
            let c = inner.count.load(Ordering::Relaxed);
            if c == 0 {
                return None;
            }
            let v = if inner.semaphore { 1 } else { c };
            // SeqCst: pairs with the SeqCst load in `poll` (module docs).
            inner.count.store(c - v, Ordering::SeqCst);
            wq.wake(EPOLLOUT);
            Some(v)
        };
        let v = if self.nonblock() {
            try_read().ok_or(Errno::EAGAIN)?
        } else {
            wait_event(&[&inner.wq], EPOLLOUT | EPOLLIN, None, cancel, try_read)
                .map_err(|_: WaitError| Errno::EINTR)?
        };
        buf[..8].copy_from_slice(&v.to_ne_bytes());
        Ok(8)
    }

    /// `write(2)`: adds the native-endian value in `buf` (exactly 8 bytes, else
    /// `EINVAL`, as Linux); returns 8.
    pub fn write(&self, buf: &[u8], cancel: Option<&CancelToken>) -> Result<usize, Errno> {
        if buf.len() != 8 {
            return Err(Errno::EINVAL);
        }
        let v = u64::from_ne_bytes(buf[..8].try_into().expect("8 bytes"));
        if v == u64::MAX {
            return Err(Errno::EINVAL);
        }
        let inner = &*self.inner;
        let try_write = || {
            let mut wq = inner.wq.lock();
            // Relaxed: stores happen only under the queue lock we hold.
            let c = inner.count.load(Ordering::Relaxed);
            if u64::MAX - c <= v {
                return None;
            }
            // SeqCst: pairs with the SeqCst load in `poll` (module docs).
            inner.count.store(c + v, Ordering::SeqCst);
            wq.wake(EPOLLIN);
            Some(())
        };
        if self.nonblock() {
            try_write().ok_or(Errno::EAGAIN)?;
        } else {
            wait_event(&[&inner.wq], EPOLLOUT | EPOLLIN, None, cancel, try_write)
                .map_err(|_: WaitError| Errno::EINTR)?;
        }
        Ok(8)
    }
}

impl Drop for EventFd {
    fn drop(&mut self) {
        release_file_from_epoll(&*self.inner);
        // eventfd_release: wake pollers with EPOLLHUP.
        self.inner.wq.wake(EPOLLHUP);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rd(e: &EventFd) -> Result<u64, Errno> {
        let mut b = [0u8; 8];
        e.read(&mut b, None).map(|_| u64::from_ne_bytes(b))
    }
    fn wr(e: &EventFd, v: u64) -> Result<usize, Errno> {
        e.write(&v.to_ne_bytes(), None)
    }

    #[test]
    fn counter_rules() {
        let e = EventFd::new(3, EFD_NONBLOCK).unwrap();
        assert_eq!(e.read(&mut [0u8; 7], None), Err(Errno::EINVAL));
        assert_eq!(e.write(&[0u8; 7], None), Err(Errno::EINVAL));
        assert_eq!(rd(&e), Ok(3));
        assert_eq!(rd(&e), Err(Errno::EAGAIN));
        assert_eq!(wr(&e, u64::MAX), Err(Errno::EINVAL));
        assert_eq!(wr(&e, COUNT_MAX), Ok(8));
        assert_eq!(e.pollable().poll(), EPOLLIN);
        assert_eq!(wr(&e, 1), Err(Errno::EAGAIN));
        assert_eq!(wr(&e, 0), Ok(8));
        assert_eq!(rd(&e), Ok(COUNT_MAX));
        assert_eq!(EventFd::new(0, 0x4).err(), Some(Errno::EINVAL));
    }

    #[test]
    fn semaphore_and_blocking() {
        let e = Arc::new(EventFd::new(2, EFD_SEMAPHORE).unwrap());
        assert_eq!(rd(&e), Ok(1));
        assert_eq!(rd(&e), Ok(1));
        let e2 = e.clone();
        let h = std::thread::spawn(move || rd(&e2));
        std::thread::sleep(std::time::Duration::from_millis(20));
        wr(&e, 5).unwrap();
        assert_eq!(h.join().unwrap(), Ok(1));
        assert_eq!(e.count(), 4);
        let t = CancelToken::new();
        let e3 = EventFd::new(0, 0).unwrap();
        t.cancel();
        assert_eq!(e3.read(&mut [0u8; 8], Some(&t)), Err(Errno::EINTR));
    }
}
