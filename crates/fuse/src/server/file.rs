//! Requests on open files: OPEN and RELEASE, READ and WRITE, FSYNC, COPY_FILE_RANGE,
//! FALLOCATE and POLL.

use std::io::{self, Read as _};
use std::sync::Arc;

use polyfuse::op;
use polyfuse::reply::{OpenOut, PollOut, WriteOut};
use polyfuse::{Data, Request};
use scalevfs::frontend::Node;
use scalevfs_kernfs::vfs::KernfsFile;
use scalevfs_kernfs::{Waker, DEFAULT_POLLMASK};

use super::{e, Dispatcher, Fs, Res};
use crate::tables::Handle;

/// The `size` bytes a WRITE carries. `EIO` if they cannot be read or fewer arrived (as
/// libfuse answers a short write buffer): writing part of them would report a short
/// write of bytes the caller never placed there.
pub(super) fn write_payload(data: impl io::Read, size: u32) -> Res<Vec<u8>> {
    let mut buf = Vec::with_capacity(size as usize);
    match data.take(u64::from(size)).read_to_end(&mut buf) {
        Ok(n) if n == size as usize => Ok(buf),
        _ => Err(libc::EIO),
    }
}

/// Answers a WRITE or COPY_FILE_RANGE: the count written, or the error.
fn reply_written(req: &Request, r: Res<usize>) -> io::Result<()> {
    match r {
        Ok(n) => {
            let mut out = WriteOut::default();
            out.size(n as u32);
            req.reply(out)
        }
        Err(err) => req.reply_error(err),
    }
}

impl Fs {
    fn open_handle(&self, node: Node, flags: i32) -> Res<u64> {
        let file = self.vfs.core().node_open(&node, flags).map_err(e)?;
        Ok(self.files.insert(Handle::new(node, file)))
    }
}

impl Dispatcher {
    /// OPEN and OPENDIR: a new handle on `ino` opened with `flags`.
    pub(super) fn open(&self, req: &Request, ino: u64, flags: i32) -> io::Result<()> {
        let opened = self.fs.node(ino).and_then(|n| {
            // Attribute files of kernfs: every read must reach us (sysfs re-reads after a
            // poll), not the page cache.
            let direct = !self.fs.in_root_fs(&n) && !n.is_dir();
            Ok((self.fs.open_handle(n, flags)?, direct))
        });
        match opened {
            Ok((fh, direct)) => {
                let mut out = OpenOut::default();
                out.fh(fh);
                out.direct_io(direct);
                let r = req.reply(out);
                if r.is_err() {
                    self.fs.files.remove(fh); // no RELEASE will come
                }
                r
            }
            Err(err) => req.reply_error(err),
        }
    }

    /// Last close of the open file description `fh` (see [`Fs::release_handle`]).
    pub(super) fn release_fh(&self, fh: u64) {
        if let Some(h) = self.fs.files.remove(fh) {
            self.fs.release_handle(&h);
        }
    }

    pub(super) fn release(&self, req: &Request, op: op::Release<'_>) -> io::Result<()> {
        self.release_fh(op.fh());
        req.reply(())
    }

    pub(super) fn read(&self, req: &Request, op: op::Read<'_>) -> io::Result<()> {
        let core = self.fs.vfs.core();
        match self.fs.handle(op.fh()) {
            Ok(h) => {
                let mut buf = vec![0u8; op.size() as usize];
                match i64::try_from(op.offset())
                    .map_err(|_| libc::EINVAL)
                    .and_then(|off| core.file_read_at(&h.file, &mut buf, off).map_err(e))
                {
                    Ok(n) => {
                        buf.truncate(n);
                        req.reply(buf)
                    }
                    Err(err) => req.reply_error(err),
                }
            }
            Err(err) => req.reply_error(err),
        }
    }

    pub(super) fn write(&self, req: &Request, op: op::Write<'_>, data: Data<'_>) -> io::Result<()> {
        let core = self.fs.vfs.core();
        match self.fs.handle(op.fh()) {
            Ok(h) => {
                let r = i64::try_from(op.offset())
                    .map_err(|_| libc::EINVAL)
                    .and_then(|off| {
                        let buf = write_payload(data, op.size())?;
                        core.file_write_at(&h.file, &buf, off).map_err(e)
                    });
                reply_written(req, r)
            }
            Err(err) => req.reply_error(err),
        }
    }

    pub(super) fn fsync(&self, req: &Request, op: op::Fsync<'_>) -> io::Result<()> {
        match self.fs.handle(op.fh()) {
            Ok(h) => match self.fs.vfs.core().fsync(&h.file) {
                Ok(()) => req.reply(()),
                Err(err) => req.reply_error(e(err)),
            },
            Err(err) => req.reply_error(err),
        }
    }

    pub(super) fn copy_file_range(
        &self,
        req: &Request,
        op: op::CopyFileRange<'_>,
    ) -> io::Result<()> {
        let fs = &self.fs;
        let core = fs.vfs.core();
        // The kernel ran generic_copy_file_checks already; its reply holds a u32
        // count, so one request copies less than 4 GiB (the caller loops).
        const MAX_COPY: u64 = u32::MAX as u64 & !4095;
        fs.copy_requests.add(1);
        let r = (|| {
            let (fin, fout) = (fs.handle(op.fh_in())?, fs.handle(op.fh_out())?);
            let off_in = i64::try_from(op.offset_in()).map_err(|_| libc::EINVAL)?;
            let off_out = i64::try_from(op.offset_out()).map_err(|_| libc::EINVAL)?;
            if op.flags() != 0 {
                return Err(libc::EINVAL);
            }
            let len = op.length().min(MAX_COPY) as usize;
            core.file_copy_range(&fin.file, off_in, &fout.file, off_out, len)
                .map_err(e)
        })();
        reply_written(req, r)
    }

    pub(super) fn fallocate(&self, req: &Request, op: op::Fallocate<'_>) -> io::Result<()> {
        let core = self.fs.vfs.core();
        match self.fs.handle(op.fh()) {
            Ok(h) => {
                let r = match (i64::try_from(op.offset()), i64::try_from(op.length())) {
                    (Ok(off), Ok(len)) => core
                        .fallocate(&h.file, op.mode() as i32, off, len)
                        .map_err(e),
                    _ => Err(libc::EFBIG),
                };
                match r {
                    Ok(()) => req.reply(()),
                    Err(err) => req.reply_error(err),
                }
            }
            Err(err) => req.reply_error(err),
        }
    }

    pub(super) fn poll(&self, req: &Request, op: op::Poll<'_>) -> io::Result<()> {
        match self.fs.handle(op.fh()) {
            Ok(h) => {
                let revents = match h.file.private::<Arc<KernfsFile>>() {
                    Some(kf) => {
                        // Register before computing the mask, so a notify in between
                        // is not lost: it either finds the waker or happened before
                        // `poll` below reads the event count.
                        if let Some(kh) = op.kh() {
                            let mut reg = h.poll.lock();
                            if reg.map(|(k, _)| k) != Some(kh) {
                                let notifier = self.session.notifier();
                                let waker: Waker = Arc::new(move |_| {
                                    // Fails only if the connection is gone.
                                    let _ = notifier.poll_wakeup(kh);
                                });
                                if let Some(key) = kf.open_file().add_waiter(waker) {
                                    if let Some((_, old)) = reg.replace((kh, key)) {
                                        kf.open_file().remove_waiter(old);
                                    }
                                }
                            }
                        }
                        kf.open_file().poll()
                    }
                    // Regular files (not ENOSYS, which would make the kernel stop
                    // asking for every file, kernfs ones included).
                    None => DEFAULT_POLLMASK,
                };
                let mut out = PollOut::default();
                out.revents(revents & op.events());
                req.reply(out)
            }
            Err(err) => req.reply_error(err),
        }
    }
}
