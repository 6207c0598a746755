//! # Pipes (Linux's `fs/pipe.c`)
//!
//! A ring of page-sized buffers ("slots"), 16 by default (64 KiB). As in Linux:
//! - a write first appends to the last buffer when the whole sub-page remainder of the
//!   write (`len % 4096`) fits in it, then fills new slots a page at a time; so a write of
//!   at most `PIPE_BUF` (4096) bytes never spans two slots and is atomic;
//! - the pipe is "full" when every slot is in use, whatever their fill, which is what
//!   `EPOLLOUT` and `EAGAIN` follow;
//! - a non-blocking write that cannot write everything returns the partial count, or
//!   `EAGAIN` if it wrote nothing; a blocking one sleeps and, when cancelled, returns the
//!   partial count or `EINTR`; with no reader it is `EPIPE` (no `SIGPIPE`: the embedder
//!   delivers signals if it has any);
//! - a read returns what is there (at least one byte), `0` at end of file (no writer), or
//!   blocks / `EAGAIN`; zero-length reads and writes return 0 at once;
//! - `pipe_poll`: the read end reports `EPOLLIN|EPOLLRDNORM` when not empty and
//!   `EPOLLHUP` when there is no writer; the write end `EPOLLOUT|EPOLLWRNORM` when not
//!   full and `EPOLLERR` when there is no reader. Pipes never report `EPOLLRDHUP`.
//! - wakeups: every write that gets past the zero-length check wakes the readers' queue
//!   with `EPOLLIN` when it returns, even with `EAGAIN` (Linux: when the pipe was empty or
//!   has ever been polled, which any epoll watcher has done; we always do), and a
//!   blocking writer also before it sleeps if it found the pipe empty; a read wakes the
//!   writers' queue with `EPOLLOUT` only if it freed a slot of a full pipe (Linux 6.x);
//!   resizing wakes the writers' queue with key 0; closing the last reader or writer
//!   wakes both queues with key 0. These decide when edge-triggered epoll items fire and
//!   the order of ready lists, so they follow Linux exactly.
//!
//! ## Named pipes (`FifoSlot`, Linux's `fifo_open`)
//!
//! A FIFO inode keeps a [`FifoSlot`]: the first open makes the pipe, the last close drops
//! it with whatever it held. An open for reading waits until a writer has opened (its
//! count `w_counter` moved), one for writing until a reader has; with `O_NONBLOCK` a
//! reader does not wait (and reports no `EPOLLHUP` until a writer has come and gone: the
//! end remembers `w_counter`, Linux's `f_pipe`) and a writer with no reader fails with
//! `ENXIO`; `O_RDWR` is both ends in one file and never waits. An end open for both waits
//! on `rd_wait` only, so the pipe then wakes `rd_wait` wherever it wakes writers.
//!
//! ## Sizes (`F_GETPIPE_SZ` / `F_SETPIPE_SZ`)
//!
//! [`PipeEnd::set_pipe_size`] rounds up to a power-of-two number of pages (0 becomes one
//! page; above 2^31 is `EINVAL`), fails with `EBUSY` if the pipe holds more slots than the
//! new size, and with `EPERM` when growing above `/proc/sys/fs/pipe-max-size` (1 MiB)
//! without `CAP_SYS_RESOURCE` (the caller says whether it has it). The per-user pipe
//! buffer limits (`pipe-user-pages-soft/hard`) are not modelled.
//!
//! ## Differences from Linux
//!
//! - Blocked readers (writers) are all woken and re-check; Linux queues them exclusively
//!   and wakes one, which then wakes the next. Outcomes are the same; only wakeups differ.
//! - No `O_DIRECT` packet mode (`EINVAL`), no `SIGPIPE` (the embedder's), no per-user
//!   pipe page accounting, no splice/vmsplice.
//!
//! ## Locks
//!
//! `state` (Linux's `pipe->mutex`) protects the ring and the reader/writer counts. Each
//! end has its own wait queue (`rd_wait`, `wr_wait`), woken after `state` is released.
//! A sleeping reader or writer hooks onto its queue before re-checking under `state`
//! (see `poll::wait_event`), so no wakeup is lost. Lock order: `state` is never held
//! while taking another pipe's or an epoll's lock; wait-queue locks are taken after it
//! (never while holding them).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crate::cancel::CancelToken;
use crate::epoll::{release_file_from_epoll, EpLinks};
use crate::locks::sync::Mutex;
use crate::poll::events::*;
use crate::poll::{wait_event, Pollable, WaitQueue};
use crate::Errno;

/// The pipe buffer unit (a page); capacities are multiples of it.
pub const PAGE_SIZE: usize = 4096;
/// Writes up to this size are atomic.
pub const PIPE_BUF: usize = 4096;
/// Default number of slots (`PIPE_DEF_BUFFERS`).
pub const PIPE_DEF_BUFFERS: usize = 16;
/// `/proc/sys/fs/pipe-max-size`.
pub const PIPE_MAX_SIZE: usize = 1 << 20;

/// One page-sized buffer: `data` (capacity `PAGE_SIZE`) holds what was written,
/// `data[offset..]` what is still unread.
struct Slot {
    data: Vec<u8>,
    offset: usize,
}

struct State {
    slots: VecDeque<Slot>,
    max_usage: usize,
    readers: usize,
    writers: usize,
    /// Opens for reading and for writing so far (Linux's `r_counter`/`w_counter`): a
    /// FIFO opener waiting for its partner waits for the other count to move.
    r_counter: u64,
    w_counter: u64,
}

impl State {
    fn full(&self) -> bool {
        self.slots.len() >= self.max_usage
    }
}

/// The shared pipe (Linux's `pipe_inode_info`).
pub struct PipeInner {
    state: Mutex<State>,
    rd_wait: WaitQueue,
    wr_wait: WaitQueue,
    /// A FIFO end open for both reading and writing exists (or existed): such an end
    /// waits on `rd_wait` only (a `Pollable` has one queue), so what wakes the writers
    /// wakes `rd_wait` too. Set before that end is handed out (Release) and read by the
    /// wakers (Acquire).
    has_rdwr: AtomicBool,
}

impl PipeInner {
    fn new(readers: usize, writers: usize, counters: u64) -> Arc<PipeInner> {
        Arc::new(PipeInner {
            state: Mutex::new(State {
                slots: VecDeque::new(),
                max_usage: PIPE_DEF_BUFFERS,
                readers,
                writers,
                r_counter: counters,
                w_counter: counters,
            }),
            rd_wait: WaitQueue::new(),
            wr_wait: WaitQueue::new(),
            has_rdwr: AtomicBool::new(false),
        })
    }

    /// Wakes the writers' queue (and `rd_wait` if a read-write end may sleep there).
    fn wake_writers(&self, key: u32) {
        self.wr_wait.wake(key);
        // Acquire: pairs with the Release in `FifoSlot::open` for an `O_RDWR` end.
        if self.has_rdwr.load(Ordering::Acquire) {
            self.rd_wait.wake(key);
        }
    }
}

const READ: u8 = 1;
const WRITE: u8 = 2;

/// One end's pollable part: what epoll items keep alive.
pub struct PipeEndInner {
    pipe: Arc<PipeInner>,
    /// `READ`, `WRITE` or both (a FIFO opened `O_RDWR`).
    mode: u8,
    /// Linux's `f_pipe`: a FIFO reader opened with no writer around reports no `EPOLLHUP`
    /// until a writer has come (`w_counter` moved past this).
    hup_after: u64,
    links: EpLinks,
}

impl Pollable for PipeEndInner {
    fn poll(&self) -> u32 {
        let st = self.pipe.state.lock();
        let mut m = 0;
        if self.mode & READ != 0 {
            if !st.slots.is_empty() {
                m |= EPOLLIN | EPOLLRDNORM;
            }
            if st.writers == 0 && st.w_counter != self.hup_after {
                m |= EPOLLHUP;
            }
        }
        if self.mode & WRITE != 0 {
            if !st.full() {
                m |= EPOLLOUT | EPOLLWRNORM;
            }
            if st.readers == 0 {
                m |= EPOLLERR;
            }
        }
        m
    }
    fn wait_queue(&self) -> Option<&WaitQueue> {
        Some(if self.mode & READ != 0 {
            &self.pipe.rd_wait
        } else {
            &self.pipe.wr_wait
        })
    }
    fn ep_links(&self) -> Option<&EpLinks> {
        Some(&self.links)
    }
}

/// One end of a pipe, as an open file: what the open file description embeds. Dropping
/// it is the file's last close: it leaves every epoll watching it, then drops the
/// reader/writer count.
pub struct PipeEnd {
    inner: Arc<PipeEndInner>,
    nonblock: AtomicBool,
    /// Opened on a FIFO inode ([`FifoSlot::open`]), not made by [`pipe2`].
    fifo: bool,
}

/// `pipe2(flags)`: `(read end, write end)`. `O_NONBLOCK` applies to both ends;
/// `O_CLOEXEC` is the fd table's; other flags (including `O_DIRECT` packet mode, not
/// implemented) are `EINVAL`.
pub fn pipe2(flags: i32) -> Result<(PipeEnd, PipeEnd), Errno> {
    // __do_pipe_flags accepts O_DIRECT (packet mode) and O_NOTIFICATION_PIPE (O_EXCL),
    // which are not provided: packet mode is EINVAL (a kernel before 3.4), notification
    // pipes ENOPKG (a kernel without CONFIG_WATCH_QUEUE).
    if flags & !(libc::O_NONBLOCK | libc::O_CLOEXEC | libc::O_EXCL) != 0 {
        return Err(Errno::EINVAL);
    }
    if flags & libc::O_EXCL != 0 {
        return Err(Errno::ENOPKG);
    }
    // get_pipe_inode: one reader, one writer, both counters at 1.
    let pipe = PipeInner::new(1, 1, 1);
    let nb = flags & libc::O_NONBLOCK != 0;
    Ok((
        PipeEnd::new(&pipe, READ, 0, nb, false),
        PipeEnd::new(&pipe, WRITE, 0, nb, false),
    ))
}

/// Where a FIFO inode keeps its pipe (Linux's `inode->i_pipe`): made by the first open,
/// gone when the last end closes (its data with it), made anew by the next open.
#[derive(Default)]
pub struct FifoSlot {
    pipe: parking_lot::Mutex<std::sync::Weak<PipeInner>>,
}

impl FifoSlot {
    /// `fifo_open` with the open's access mode and `O_NONBLOCK`: a reader waits for a
    /// writer and a writer for a reader unless `O_NONBLOCK` (then a writer with no reader
    /// is `ENXIO`); `O_RDWR` never waits. A cancelled wait is `EINTR` (a signal).
    pub fn open(&self, flags: i32, cancel: Option<&CancelToken>) -> Result<PipeEnd, Errno> {
        let nb = flags & libc::O_NONBLOCK != 0;
        let mode = match flags & libc::O_ACCMODE {
            libc::O_RDONLY => READ,
            libc::O_WRONLY => WRITE,
            libc::O_RDWR => READ | WRITE,
            _ => return Err(Errno::EINVAL),
        };
        let pipe = {
            let mut slot = self.pipe.lock();
            match slot.upgrade() {
                Some(p) => p,
                None => {
                    let p = PipeInner::new(0, 0, 0);
                    *slot = Arc::downgrade(&p);
                    p
                }
            }
        };
        if mode == READ | WRITE {
            // Release: pairs with the Acquire in `wake_writers`.
            pipe.has_rdwr.store(true, Ordering::Release);
        }
        let mut st = pipe.state.lock();
        if mode == WRITE && nb && st.readers == 0 {
            return Err(Errno::ENXIO);
        }
        let mut hup_after = 0;
        if mode & READ != 0 {
            st.r_counter += 1;
            st.readers += 1;
        }
        if mode & WRITE != 0 {
            st.w_counter += 1;
            st.writers += 1;
        }
        // wake_up_partner: the first reader or writer wakes whoever waits for it.
        let wake = (mode & READ != 0 && st.readers == 1) || (mode & WRITE != 0 && st.writers == 1);
        // Which count a lone reader or writer waits on, and its value now.
        let wait_for = match mode {
            READ if st.writers == 0 => {
                if nb {
                    // Suppress EPOLLHUP until a writer has been seen.
                    hup_after = st.w_counter;
                    None
                } else {
                    Some((false, st.w_counter))
                }
            }
            WRITE if st.readers == 0 => Some((true, st.r_counter)),
            _ => None,
        };
        drop(st);
        if wake {
            pipe.rd_wait.wake(0);
        }
        // The end exists from here on (its Drop undoes the counts if the wait fails).
        let end = PipeEnd::new(&pipe, mode, hup_after, nb, true);
        if let Some((want_reader, seen)) = wait_for {
            let waited = wait_event(&[&pipe.rd_wait], 0, None, cancel, || {
                let st = pipe.state.lock();
                let now = if want_reader {
                    st.r_counter
                } else {
                    st.w_counter
                };
                (now != seen).then_some(())
            });
            if waited.is_err() {
                return Err(Errno::EINTR);
            }
        }
        Ok(end)
    }
}

fn cancelled(cancel: Option<&CancelToken>) -> bool {
    cancel.is_some_and(|c| c.is_cancelled())
}

impl PipeEnd {
    fn new(pipe: &Arc<PipeInner>, mode: u8, hup_after: u64, nonblock: bool, fifo: bool) -> PipeEnd {
        PipeEnd {
            inner: Arc::new(PipeEndInner {
                pipe: pipe.clone(),
                mode,
                hup_after,
                links: EpLinks::new(),
            }),
            nonblock: AtomicBool::new(nonblock),
            fifo,
        }
    }

    /// Whether this end was opened on a FIFO inode. Linux updates a FIFO's times on reads
    /// and writes, and an anonymous pipe's never (`pipeanon_fops`, in Linux since 2025; the
    /// 6.18 host kernel the conformance suite compares against behaves so).
    pub fn is_fifo(&self) -> bool {
        self.fifo
    }

    /// The object to pass to `epoll_ctl` and `poll`.
    pub fn pollable(&self) -> Arc<dyn Pollable> {
        self.inner.clone()
    }

    /// Open for reading (a pipe's read end, or a FIFO opened for reading).
    pub fn is_read_end(&self) -> bool {
        self.inner.mode & READ != 0
    }

    /// Open for writing.
    pub fn is_write_end(&self) -> bool {
        self.inner.mode & WRITE != 0
    }

    /// `F_SETFL(O_NONBLOCK)`.
    pub fn set_nonblock(&self, on: bool) {
        // Relaxed: a flag read by later calls on this file, ordered by the caller.
        self.nonblock.store(on, Ordering::Relaxed);
    }

    /// Whether reads and writes fail with `EAGAIN` instead of blocking.
    pub fn nonblock(&self) -> bool {
        self.nonblock.load(Ordering::Relaxed)
    }

    fn pipe(&self) -> &PipeInner {
        &self.inner.pipe
    }

    /// `F_GETPIPE_SZ`.
    pub fn pipe_size(&self) -> usize {
        self.pipe().state.lock().max_usage * PAGE_SIZE
    }

    /// `F_SETPIPE_SZ(arg)`: returns the new size. `privileged`: the caller has
    /// `CAP_SYS_RESOURCE`. See the module docs.
    pub fn set_pipe_size(&self, arg: u32, privileged: bool) -> Result<usize, Errno> {
        let size = arg as usize;
        let size = if size > 1 << 31 {
            return Err(Errno::EINVAL);
        } else if size < PAGE_SIZE {
            PAGE_SIZE
        } else {
            size.next_power_of_two()
        };
        let nr = size / PAGE_SIZE;
        let mut st = self.pipe().state.lock();
        if nr > st.max_usage && size > PIPE_MAX_SIZE && !privileged {
            return Err(Errno::EPERM);
        }
        if st.slots.len() > nr {
            return Err(Errno::EBUSY);
        }
        st.max_usage = nr;
        drop(st);
        // pipe_resize_ring: "this might have made more room for writers" - an
        // unconditional wakeup with no key (edge-triggered watchers of the write end see
        // it, even when the size did not change).
        self.pipe().wake_writers(0);
        Ok(size)
    }

    /// `read(2)` on the read end (`EBADF` on the write end).
    pub fn read(&self, buf: &mut [u8], cancel: Option<&CancelToken>) -> Result<usize, Errno> {
        if self.inner.mode & READ == 0 {
            return Err(Errno::EBADF);
        }
        if buf.is_empty() {
            return Ok(0);
        }
        let pipe = self.pipe();
        // Linux 6.x: writers are woken only when a read frees a slot of a full pipe.
        let mut wake_writer = false;
        let mut try_read = |wake_writer: &mut bool| -> Option<Result<usize, Errno>> {
            let mut st = pipe.state.lock();
            let mut n = 0;
            while n < buf.len() {
                let Some(s) = st.slots.front_mut() else { break };
                let c = (s.data.len() - s.offset).min(buf.len() - n);
                buf[n..n + c].copy_from_slice(&s.data[s.offset..s.offset + c]);
                s.offset += c;
                n += c;
                if s.offset == s.data.len() {
                    *wake_writer |= st.full();
                    st.slots.pop_front();
                }
            }
            if n > 0 {
                return Some(Ok(n));
            }
            if st.writers == 0 {
                return Some(Ok(0));
            }
            None
        };
        let res = match try_read(&mut wake_writer) {
            Some(r) => r,
            None if self.nonblock() => Err(Errno::EAGAIN),
            None => wait_event(&[&pipe.rd_wait], EPOLLIN | EPOLLHUP, None, cancel, || {
                try_read(&mut wake_writer)
            })
            .unwrap_or(Err(Errno::EINTR)),
        };
        if wake_writer {
            pipe.wake_writers(EPOLLOUT | EPOLLWRNORM);
        }
        res
    }

    /// `write(2)` on the write end (`EBADF` on the read end).
    pub fn write(&self, buf: &[u8], cancel: Option<&CancelToken>) -> Result<usize, Errno> {
        if self.inner.mode & WRITE == 0 {
            return Err(Errno::EBADF);
        }
        if buf.is_empty() {
            return Ok(0);
        }
        let pipe = self.pipe();
        let mut done = 0usize;
        let mut first = true;
        // Writes what fits; `Some` when finished (all written, or EPIPE), `None` when
        // the pipe is full. One critical section per call, as Linux holds pipe->mutex.
        let mut fill = |done: &mut usize| -> Option<Result<usize, Errno>> {
            let mut st = pipe.state.lock();
            if std::mem::take(&mut first) && st.readers > 0 {
                // Merge the sub-page remainder into the last buffer if it all fits.
                let chars = buf.len() % PAGE_SIZE;
                if chars != 0 {
                    if let Some(last) = st.slots.back_mut() {
                        if last.data.len() + chars <= PAGE_SIZE {
                            last.data.extend_from_slice(&buf[..chars]);
                            *done = chars;
                        }
                    }
                }
            }
            loop {
                if st.readers == 0 {
                    return Some(if *done > 0 {
                        Ok(*done)
                    } else {
                        Err(Errno::EPIPE)
                    });
                }
                if *done == buf.len() {
                    return Some(Ok(*done));
                }
                if st.full() {
                    return None;
                }
                let c = (buf.len() - *done).min(PAGE_SIZE);
                let mut data = Vec::with_capacity(PAGE_SIZE);
                data.extend_from_slice(&buf[*done..*done + c]);
                st.slots.push_back(Slot { data, offset: 0 });
                *done += c;
            }
        };
        let res = loop {
            let was_empty = pipe.state.lock().slots.is_empty();
            let r = fill(&mut done);
            if let Some(r) = r {
                break r;
            }
            if self.nonblock() {
                break if done > 0 {
                    Ok(done)
                } else {
                    Err(Errno::EAGAIN)
                };
            }
            if cancelled(cancel) {
                break if done > 0 {
                    Ok(done)
                } else {
                    Err(Errno::EINTR)
                };
            }
            if was_empty {
                pipe.rd_wait.wake(EPOLLIN | EPOLLRDNORM);
            }
            // Sleep until not full (or no reader), then fill again.
            let w = wait_event(&[&pipe.wr_wait], EPOLLOUT | EPOLLERR, None, cancel, || {
                let st = pipe.state.lock();
                (!st.full() || st.readers == 0).then_some(())
            });
            if w.is_err() {
                break if done > 0 {
                    Ok(done)
                } else {
                    Err(Errno::EINTR)
                };
            }
        };
        // pipe_write's exit: readers are woken on every return (epoll wants a wakeup
        // whether or not the pipe was empty, and Linux does it even when nothing was
        // written), so edge-triggered watchers of the read end fire as on Linux.
        pipe.rd_wait.wake(EPOLLIN | EPOLLRDNORM);
        res
    }
}

impl Drop for PipeEnd {
    fn drop(&mut self) {
        // __fput: eventpoll_release() first, then f_op->release.
        release_file_from_epoll(&*self.inner);
        let pipe = self.pipe();
        let mut st = pipe.state.lock();
        if self.inner.mode & READ != 0 {
            st.readers -= 1;
        }
        if self.inner.mode & WRITE != 0 {
            st.writers -= 1;
        }
        let wake = (st.readers == 0) != (st.writers == 0);
        drop(st);
        if wake {
            pipe.rd_wait.wake(0);
            pipe.wr_wait.wake(0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capacity_is_slot_based() {
        let (r, w) = pipe2(libc::O_NONBLOCK).unwrap();
        // Small writes merge into one page.
        for _ in 0..4096 {
            assert_eq!(w.write(b"x", None), Ok(1));
        }
        assert_eq!(w.write(&[0; 4096 * 15], None), Ok(4096 * 15));
        assert_eq!(w.write(b"y", None), Err(Errno::EAGAIN));
        assert_eq!(w.pollable().poll() & EPOLLOUT, 0);
        let mut b = vec![0u8; 10];
        assert_eq!(r.read(&mut b, None), Ok(10));
        // Still 16 slots in use: full.
        assert_eq!(w.write(b"y", None), Err(Errno::EAGAIN));
        let mut b = vec![0u8; 4096];
        assert_eq!(r.read(&mut b, None), Ok(4096));
        assert_eq!(w.write(&[1; 5000], None), Ok(4096));
    }

    #[test]
    fn eof_epipe_and_sizes() {
        let (r, w) = pipe2(0).unwrap();
        assert_eq!(r.write(b"x", None), Err(Errno::EBADF));
        assert_eq!(w.pipe_size(), 65536);
        assert_eq!(w.set_pipe_size(0, false), Ok(4096));
        assert_eq!(w.set_pipe_size(5000, false), Ok(8192));
        assert_eq!(w.set_pipe_size(2 << 20, false), Err(Errno::EPERM));
        assert_eq!(w.set_pipe_size(2 << 20, true), Ok(2 << 20));
        assert_eq!(w.set_pipe_size(u32::MAX, true), Err(Errno::EINVAL));
        w.set_pipe_size(8192, false).unwrap();
        w.write(&[0; 8192], None).unwrap();
        assert_eq!(w.set_pipe_size(4096, false), Err(Errno::EBUSY));
        drop(w);
        let mut b = vec![0u8; 10000];
        assert_eq!(r.read(&mut b, None), Ok(8192));
        assert_eq!(r.read(&mut b, None), Ok(0));
        assert_eq!(r.pollable().poll(), EPOLLHUP);
        let (r, w) = pipe2(0).unwrap();
        drop(r);
        assert_eq!(w.write(b"x", None), Err(Errno::EPIPE));
        assert_eq!(w.pollable().poll(), EPOLLOUT | EPOLLWRNORM | EPOLLERR);
    }

    #[test]
    fn blocking_write_partial_on_cancel() {
        let (r, w) = pipe2(0).unwrap();
        let t = CancelToken::new();
        let t2 = t.clone();
        let h = std::thread::spawn(move || w.write(&vec![7u8; 100_000], Some(&t2)));
        std::thread::sleep(std::time::Duration::from_millis(30));
        t.cancel();
        assert_eq!(h.join().unwrap(), Ok(65536));
        let t = CancelToken::new();
        t.cancel();
        assert_eq!(
            r.read(&mut [0u8; 1], Some(&t)),
            Ok(1),
            "data wins over cancel"
        );
    }

    #[test]
    fn blocking_read_wakes() {
        let (r, w) = pipe2(0).unwrap();
        let h = std::thread::spawn(move || {
            let mut b = [0u8; 8];
            r.read(&mut b, None).map(|n| b[..n].to_vec())
        });
        std::thread::sleep(std::time::Duration::from_millis(20));
        w.write(b"hey", None).unwrap();
        assert_eq!(h.join().unwrap(), Ok(b"hey".to_vec()));
    }

    /// Blocking writers of PIPE_BUF-sized records, each of one repeated byte, race one
    /// reader: no record is ever split or interleaved with another.
    #[test]
    fn pipe_buf_writes_are_atomic() {
        const WRITERS: usize = 16;
        const RECORDS: usize = 64;
        let (r, w) = pipe2(0).unwrap();
        let w = Arc::new(w);
        let mut got = vec![0usize; WRITERS];
        std::thread::scope(|s| {
            for t in 0..WRITERS {
                let w = w.clone();
                s.spawn(move || {
                    for _ in 0..RECORDS {
                        assert_eq!(w.write(&[t as u8; PIPE_BUF], None), Ok(PIPE_BUF));
                    }
                });
            }
            drop(w);
            // Owned here, so that a failed check below drops the read end on its way out:
            // the writers still blocked then get EPIPE instead of waiting forever.
            let r = r;
            let mut rec = Vec::new();
            let mut b = vec![0u8; 3000];
            loop {
                let n = r.read(&mut b, None).unwrap();
                if n == 0 {
                    break;
                }
                rec.extend_from_slice(&b[..n]);
                while rec.len() >= PIPE_BUF {
                    let first = rec[0];
                    assert!(rec[..PIPE_BUF].iter().all(|&x| x == first), "torn record");
                    got[first as usize] += 1;
                    rec.drain(..PIPE_BUF);
                }
            }
            assert!(rec.is_empty());
        });
        assert_eq!(got, vec![RECORDS; WRITERS]);
    }
}
