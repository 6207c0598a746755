//! File locks: GETLK, SETLK/SETLKW (POSIX locks), FLOCK, the FLUSH that releases a
//! POSIX owner's locks, and INTERRUPT, which cancels a waiting lock request. A request
//! that must wait does so on a thread of its own ([`Fs::wait_for_lock`]).

use std::io;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use parking_lot::Mutex;
use scalevfs_vfs::cancel::CancelToken;
use scalevfs_vfs::locks::{FileLockContext, LockOwner, LockRequest, LockType, OFFSET_MAX};
use scalevfs_vfs::Errno;

use super::{e, Dispatcher, Fs, Res};
use crate::proto::{abi, Replier, Request};
use crate::tables::{Handle, Waits};

/// FUSE lock ranges are `u64` with `OFFSET_MAX` (as `u64`) for "to EOF".
pub(crate) fn lock_request(
    owner: LockOwner,
    pid: u32,
    typ: u32,
    start: u64,
    end: u64,
) -> Result<LockRequest, i32> {
    let ty = LockType::from_l_type(typ as i16).map_err(e)?;
    let start = i64::try_from(start).map_err(|_| libc::EINVAL)?;
    let end = i64::try_from(end.min(OFFSET_MAX as u64)).map_err(|_| libc::EINVAL)?;
    Ok(LockRequest {
        owner,
        pid: pid as i32,
        ty,
        start,
        end,
    })
}

/// A lock call, run by [`Dispatcher::lock_op`] (`f(fs, ctx, h, None)` must not sleep).
pub(super) trait LockCall:
    Fn(&Fs, &FileLockContext, &Handle, Option<&CancelToken>) -> Result<(), Errno> + Send + 'static
{
}

impl<F> LockCall for F where
    F: Fn(&Fs, &FileLockContext, &Handle, Option<&CancelToken>) -> Result<(), Errno>
        + Send
        + 'static
{
}

/// A SETLK or FLOCK ready to run ([`Dispatcher::run_lock`]).
pub(super) struct Prepared<F> {
    h: Arc<Handle>,
    /// The caller may sleep (SETLKW, or FLOCK without `LOCK_NB`).
    sleep: bool,
    f: F,
}

impl Fs {
    /// Waits for a lock on a thread of its own: publishes a [`CancelToken`] under
    /// `unique` (a `FUSE_INTERRUPT` or the unmount cancels it), runs `f` with it, answers
    /// with `reply`, and only then unpublishes, so an interrupt racing with the answer
    /// finds either the token (a harmless cancel) or nothing (`EAGAIN`, which the kernel
    /// drops). If no thread can be made, answers `ENOLCK` here.
    ///
    /// `ring_caller` is the calling thread of a request that came through io_uring, whose
    /// interrupt the kernel may have dropped ([`interrupt_may_be_lost`]): if it has a
    /// signal pending, the wait is cancelled before it starts.
    pub(super) fn wait_for_lock<F, R>(
        self: &Arc<Self>,
        unique: u64,
        ring_caller: Option<u32>,
        h: Arc<Handle>,
        f: F,
        reply: R,
    ) where
        F: FnOnce(&Fs, &FileLockContext, &Handle, Option<&CancelToken>) -> Result<(), Errno>
            + Send
            + 'static,
        R: FnOnce(Result<(), Errno>) + Send + 'static,
    {
        let token = CancelToken::new();
        self.waits.insert(unique, token.clone());
        let fs = self.clone();
        // `reply` goes to the thread through a slot, so that it can still be called here
        // if no thread can be made.
        let slot = Arc::new(Mutex::new(Some(reply)));
        let theirs = slot.clone();
        let spawned = std::thread::Builder::new()
            .name("fuse-lock-wait".into())
            .spawn(move || {
                // Unpublishes (and counts the thread gone) last, even if `f` panicked.
                let _finish = Finish(&fs.waits, unique);
                let Some(reply) = theirs.lock().take() else {
                    return;
                };
                if ring_caller.is_some_and(interrupt_may_be_lost) {
                    fs.lost_interrupts.add(1);
                    token.cancel();
                }
                let ctx = fs.lock_ctx(&h.node);
                reply(f(&fs, ctx, &h, Some(&token)));
            });
        match spawned {
            Ok(t) => self.waits.adopt(t),
            Err(_) => {
                let _finish = Finish(&self.waits, unique);
                if let Some(reply) = slot.lock().take() {
                    reply(Err(Errno::ENOLCK));
                }
            }
        }
    }
}

impl Dispatcher {
    /// Runs a lock operation: once without waiting on this worker; if it conflicts and the
    /// caller may sleep, again on a thread of its own ([`Fs::wait_for_lock`]) so that the
    /// workers stay free for the `FUSE_INTERRUPT` (see the crate docs). `f(fs, ctx, h,
    /// None)` must not sleep.
    fn lock_op<F>(self: &Arc<Self>, req: &Request<'_>, h: Arc<Handle>, sleep: bool, f: F)
    where
        F: Fn(&Fs, &FileLockContext, &Handle, Option<&CancelToken>) -> Result<(), Errno>
            + Send
            + 'static,
    {
        let fs = &self.fs;
        let ctx = fs.lock_ctx(&h.node);
        match f(fs, ctx, &h, None) {
            Err(Errno::EAGAIN) if sleep => {}
            Ok(()) => {
                let _ = req.reply_empty();
                return;
            }
            Err(err) => {
                let _ = req.reply_error(e(err));
                return;
            }
        }
        let unique = req.unique();
        let ring_caller = req.from_ring().then(|| req.pid());
        let replier: Replier = req.replier();
        fs.wait_for_lock(unique, ring_caller, h, f, move |res| {
            let _ = match res {
                Ok(()) => replier.reply_empty(),
                Err(err) => replier.reply_error(e(err)),
            };
        });
    }

    /// Answers a prepared SETLK or FLOCK: its error, or the lock call run by
    /// [`lock_op`](Self::lock_op) (which answers it, now or after a wait).
    pub(super) fn run_lock(
        self: &Arc<Self>,
        req: &Request<'_>,
        prepared: Res<Prepared<impl LockCall>>,
    ) -> io::Result<()> {
        match prepared {
            Err(err) => req.reply_error(err),
            Ok(Prepared { h, sleep, f }) => {
                self.lock_op(req, h, sleep, f);
                Ok(())
            }
        }
    }

    pub(super) fn getlk(&self, req: &Request<'_>, op: &abi::LkIn) -> io::Result<()> {
        let fs = &self.fs;
        fs.posix_requests.add(1);
        let r = fs.node(req.nodeid()).and_then(|n| {
            let lr = lock_request(
                LockOwner::Process(op.owner),
                op.lk.pid,
                op.lk.typ,
                op.lk.start,
                op.lk.end,
            )?;
            // A file that never held a lock has no context, and a query creates none.
            let ctx = n.inode().lock_ctx.get();
            Ok(ctx.and_then(|ctx| fs.locks().getlk(ctx, &lr)))
        });
        match r {
            Ok(found) => {
                let lk = match found {
                    Some(info) => abi::FileLock {
                        typ: info.ty.to_l_type() as u32,
                        start: info.start as u64,
                        end: info.end as u64,
                        pid: info.pid as u32,
                    },
                    None => abi::FileLock {
                        typ: libc::F_UNLCK as u32,
                        ..Default::default()
                    },
                };
                req.reply(&abi::LkOut { lk })
            }
            Err(err) => req.reply_error(err),
        }
    }

    /// SETLK and SETLKW: a POSIX lock for the request's lock owner, who joins the
    /// handle's owners (released at FLUSH or RELEASE), ready for [`run_lock`](Self::run_lock)
    /// with whether the caller may sleep.
    pub(super) fn setlk(&self, op: &abi::LkIn, sleep: bool) -> Res<Prepared<impl LockCall>> {
        let fs = &self.fs;
        fs.posix_requests.add(1);
        let owner = op.owner;
        let (h, lr) = fs.handle(op.fh).and_then(|h| {
            let lr = lock_request(
                LockOwner::Process(owner),
                op.lk.pid,
                op.lk.typ,
                op.lk.start,
                op.lk.end,
            )?;
            Ok((h, lr))
        })?;
        if lr.ty != LockType::Unlock {
            let mut owners = h.owners.lock();
            if !owners.contains(&owner) {
                owners.push(owner);
            }
        }
        let f = move |fs: &Fs, ctx: &FileLockContext, _: &Handle, token: Option<&CancelToken>| {
            fs.locks().setlk(ctx, &lr, token)
        };
        Ok(Prepared { h, sleep, f })
    }

    /// FLOCK (SETLK/SETLKW with `FUSE_LK_FLOCK`), ready for [`run_lock`](Self::run_lock).
    pub(super) fn flock(
        &self,
        req: &Request<'_>,
        op: &abi::LkIn,
        sleep: bool,
    ) -> Res<Prepared<impl LockCall>> {
        let fs = &self.fs;
        fs.flock_requests.add(1);
        // The kernel sends flock(2)'s operation as a lock type, LOCK_NB as SETLK.
        let lop = match op.lk.typ as i32 {
            libc::F_RDLCK => libc::LOCK_SH,
            libc::F_WRLCK => libc::LOCK_EX,
            libc::F_UNLCK => libc::LOCK_UN,
            _ => 0,
        } | if sleep { 0 } else { libc::LOCK_NB };
        let pid = req.pid() as i32;
        let h = fs.handle(op.fh)?;
        // Owner: the open file description (as `flock(2)` on Linux), whose last
        // reference releases it (`OpenFile::release`).
        let f = move |fs: &Fs, ctx: &FileLockContext, h: &Handle, token: Option<&CancelToken>| {
            let op = if token.is_some() {
                lop
            } else {
                lop | libc::LOCK_NB
            };
            fs.locks().flock(ctx, h.file.lock_id(), pid, op, token)
        };
        Ok(Prepared { h, sleep, f })
    }

    pub(super) fn flush(&self, req: &Request<'_>, op: &abi::FlushIn) -> io::Result<()> {
        let fs = &self.fs;
        // close(2) of some fd: the POSIX close rule for the flushing owner.
        let owner = op.lock_owner;
        if let Ok(h) = fs.handle(op.fh) {
            if let Some(ctx) = h.node.inode().lock_ctx.get() {
                fs.locks().release_posix(ctx, owner);
            }
            h.owners.lock().retain(|o| *o != owner);
        }
        req.reply_empty()
    }

    pub(super) fn interrupt(&self, req: &Request<'_>, op: &abi::InterruptIn) -> io::Result<()> {
        let fs = &self.fs;
        // With io_uring the target may be on a ring, where the kernel cannot find an
        // `EAGAIN` answer: the interrupt is remembered for a wait published later.
        let found = if self.uring.load(Ordering::Relaxed) {
            fs.waits.interrupt_or_remember(op.unique)
        } else {
            fs.waits.get(op.unique)
        };
        match found {
            Some(token) => {
                fs.interrupts.add(1);
                token.cancel();
                Ok(()) // an interrupt is not answered unless it must be requeued
            }
            // Not (yet or any more) waiting: the kernel requeues the interrupt only if
            // the target is still pending.
            None => {
                self.requeue_interrupt(req);
                Ok(())
            }
        }
    }

    /// Answers an interrupt `EAGAIN` (the kernel queues it again if its target is still
    /// pending). The kernel looks the target up in the processing queue of the device
    /// the answer is written to, and with cloned devices the target may have been read
    /// by another worker: so the answer is offered to each channel until one holds the
    /// target (the others refuse it with `ENOENT`). None holding it means the target
    /// was answered already, and the interrupt is dropped, as the kernel would.
    fn requeue_interrupt(&self, req: &Request<'_>) {
        let own = req.reply_error(libc::EAGAIN);
        if own.is_ok() {
            return;
        }
        for chan in self.channels.get().into_iter().flatten() {
            if chan.send(req.unique(), -libc::EAGAIN, &[]).is_ok() {
                return;
            }
        }
    }
}

/// Whether the kernel may have dropped the `FUSE_INTERRUPT` of a request from thread
/// `tid` (in the server's pid namespace; 0 when the caller is outside it) that came
/// through io_uring and is about to wait.
///
/// The kernel queues an interrupt at the signal only if the request was already sent.
/// For a request sent later, `/dev/fuse` checks for a signal that came meanwhile
/// (`fuse_dev_do_read`) but a ring does not (`fuse_uring_prepare_send`, Linux 6.14 to at
/// least 6.18). So a signal that lands between the request's queueing and its copy to the
/// ring is never passed on, and the caller sleeps, killable only by SIGKILL, until the
/// lock comes. Such a signal is still pending now: the caller cannot return to user space,
/// where it would be delivered, before we answer. A signal that lands after the copy is
/// passed on as an INTERRUPT. So a pending signal that the caller does not block means an
/// interrupt, sent or lost, and cancelling the wait is what either would do.
///
/// A signal sent to the whole process (`ShdPnd`) may still be taken by another of its
/// threads, which leaves this one asleep on Linux: such a signal counts only if it is
/// still pending after [`SHARED_SIGNAL_GRACE`].
fn interrupt_may_be_lost(tid: u32) -> bool {
    let pending = || {
        if tid == 0 {
            return None;
        }
        let status = std::fs::read_to_string(format!("/proc/{tid}/status")).ok()?;
        status_pending_signals(&status)
    };
    match pending() {
        Some(PendingSignals { own: true, .. }) => true,
        Some(PendingSignals { shared: true, .. }) => {
            std::thread::sleep(SHARED_SIGNAL_GRACE);
            pending().is_some_and(|p| p.own || p.shared)
        }
        _ => false,
    }
}

/// How long a signal sent to a whole process must stay pending before a waiting thread of
/// it counts as interrupted ([`interrupt_may_be_lost`]). Another thread that can take the
/// signal takes it at its next return to user space: within a scheduler tick.
const SHARED_SIGNAL_GRACE: std::time::Duration = std::time::Duration::from_millis(10);

/// The signals a thread has pending and does not block, from its `/proc/TID/status`.
#[derive(Debug, PartialEq)]
pub(super) struct PendingSignals {
    /// Sent to this thread (`SigPnd`).
    pub own: bool,
    /// Sent to its process (`ShdPnd`).
    pub shared: bool,
}

/// Parses `SigPnd`, `ShdPnd` and `SigBlk` (hexadecimal masks); `None` if one is missing.
pub(super) fn status_pending_signals(status: &str) -> Option<PendingSignals> {
    let mask = |key: &str| {
        let value = status.lines().find_map(|l| l.strip_prefix(key))?;
        u64::from_str_radix(value.trim(), 16).ok()
    };
    let blocked = mask("SigBlk:")?;
    Some(PendingSignals {
        own: mask("SigPnd:")? & !blocked != 0,
        shared: mask("ShdPnd:")? & !blocked != 0,
    })
}

/// Unpublishes a waiting request when dropped ([`Waits::finish`]).
struct Finish<'a>(&'a Waits, u64);

impl Drop for Finish<'_> {
    fn drop(&mut self) {
        self.0.finish(self.1);
    }
}
