//! Requests on open files: OPEN and RELEASE, READ and WRITE, FSYNC, COPY_FILE_RANGE,
//! FALLOCATE, LSEEK (`SEEK_DATA`/`SEEK_HOLE`; the kernel does the others itself) and
//! POLL.

use std::io;
use std::sync::Arc;

use scalevfs::frontend::Node;
use scalevfs_kernfs::vfs::KernfsFile;
use scalevfs_kernfs::{Waker, DEFAULT_POLLMASK};

use super::{e, Dispatcher, Fs, Res};
use crate::proto::{abi, Request};
use crate::tables::Handle;

/// Answers a WRITE or COPY_FILE_RANGE: the count written, or the error.
fn reply_written(req: &Request<'_>, r: Res<usize>) -> io::Result<()> {
    match r {
        Ok(n) => req.reply(&abi::WriteOut {
            size: n as u32,
            padding: 0,
        }),
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
    pub(super) fn open(&self, req: &Request<'_>, ino: u64, flags: i32) -> io::Result<()> {
        let opened = self.fs.node(ino).and_then(|n| {
            let open_flags = if !self.fs.in_root_fs(&n) {
                // Attribute files of kernfs: every read must reach us (sysfs re-reads
                // after a poll), not the page cache.
                if n.is_dir() {
                    0
                } else {
                    abi::FOPEN_DIRECT_IO
                }
            } else if n.inode().is_reg() {
                // Every change to a tmpfs file goes through this mount, so the kernel's
                // pages of it are current: keep them across opens (AUTO_INVAL_DATA
                // still drops them if the size or mtime changes unexpectedly).
                abi::FOPEN_KEEP_CACHE
            } else {
                0
            };
            Ok((self.fs.open_handle(n, flags)?, open_flags))
        });
        match opened {
            Ok((fh, open_flags)) => {
                let out = abi::OpenOut {
                    fh,
                    open_flags,
                    backing_id: 0,
                };
                let r = req.reply(&out);
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

    /// RELEASE and RELEASEDIR.
    pub(super) fn release(&self, req: &Request<'_>, op: &abi::ReleaseIn) -> io::Result<()> {
        self.release_fh(op.fh);
        req.reply_empty()
    }

    pub(super) fn read(&self, req: &Request<'_>, op: &abi::ReadIn) -> io::Result<()> {
        let core = self.fs.vfs.core();
        match self.fs.handle(op.fh) {
            Ok(h) => {
                let mut buf = vec![0u8; op.size as usize];
                match i64::try_from(op.offset)
                    .map_err(|_| libc::EINVAL)
                    .and_then(|off| core.file_read_at(&h.file, &mut buf, off).map_err(e))
                {
                    Ok(n) => {
                        buf.truncate(n);
                        req.reply(&buf[..])
                    }
                    Err(err) => req.reply_error(err),
                }
            }
            Err(err) => req.reply_error(err),
        }
    }

    pub(super) fn write(
        &self,
        req: &Request<'_>,
        op: &abi::WriteIn,
        data: &[u8],
    ) -> io::Result<()> {
        let core = self.fs.vfs.core();
        match self.fs.handle(op.fh) {
            Ok(h) => {
                let r = i64::try_from(op.offset)
                    .map_err(|_| libc::EINVAL)
                    .and_then(|off| core.file_write_at(&h.file, data, off).map_err(e));
                if r.is_ok() && op.write_flags & abi::FUSE_WRITE_KILL_SUIDGID != 0 {
                    self.fs.kill_suidgid(&h.node);
                }
                reply_written(req, r)
            }
            Err(err) => req.reply_error(err),
        }
    }

    pub(super) fn fsync(&self, req: &Request<'_>, op: &abi::FsyncIn) -> io::Result<()> {
        match self.fs.handle(op.fh) {
            Ok(h) => match self.fs.vfs.core().fsync(&h.file) {
                Ok(()) => req.reply_empty(),
                Err(err) => req.reply_error(e(err)),
            },
            Err(err) => req.reply_error(err),
        }
    }

    pub(super) fn copy_file_range(
        &self,
        req: &Request<'_>,
        op: &abi::CopyFileRangeIn,
    ) -> io::Result<()> {
        let fs = &self.fs;
        let core = fs.vfs.core();
        // The kernel ran generic_copy_file_checks already; its reply holds a u32
        // count, so one request copies less than 4 GiB (the caller loops).
        const MAX_COPY: u64 = u32::MAX as u64 & !4095;
        fs.copy_requests.add(1);
        let r = (|| {
            let (fin, fout) = (fs.handle(op.fh_in)?, fs.handle(op.fh_out)?);
            let off_in = i64::try_from(op.off_in).map_err(|_| libc::EINVAL)?;
            let off_out = i64::try_from(op.off_out).map_err(|_| libc::EINVAL)?;
            if op.flags != 0 {
                return Err(libc::EINVAL);
            }
            let len = op.len.min(MAX_COPY) as usize;
            core.file_copy_range(&fin.file, off_in, &fout.file, off_out, len)
                .map_err(e)
        })();
        reply_written(req, r)
    }

    pub(super) fn fallocate(&self, req: &Request<'_>, op: &abi::FallocateIn) -> io::Result<()> {
        let core = self.fs.vfs.core();
        match self.fs.handle(op.fh) {
            Ok(h) => {
                let r = match (i64::try_from(op.offset), i64::try_from(op.length)) {
                    (Ok(off), Ok(len)) => {
                        core.fallocate(&h.file, op.mode as i32, off, len).map_err(e)
                    }
                    _ => Err(libc::EFBIG),
                };
                match r {
                    Ok(()) => req.reply_empty(),
                    Err(err) => req.reply_error(err),
                }
            }
            Err(err) => req.reply_error(err),
        }
    }

    pub(super) fn poll(&self, req: &Request<'_>, op: &abi::PollIn) -> io::Result<()> {
        match self.fs.handle(op.fh) {
            Ok(h) => {
                let revents = match h.file.private::<Arc<KernfsFile>>() {
                    Some(kf) => {
                        // Register before computing the mask, so a notify in between
                        // is not lost: it either finds the waker or happened before
                        // `poll` below reads the event count.
                        if op.flags & abi::FUSE_POLL_SCHEDULE_NOTIFY != 0 {
                            let kh = op.kh;
                            let mut reg = h.poll.lock();
                            if reg.map(|(k, _)| k) != Some(kh) {
                                let notifier = self.notifier.clone();
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
                req.reply(&abi::PollOut {
                    revents: revents & op.events,
                    padding: 0,
                })
            }
            Err(err) => req.reply_error(err),
        }
    }

    /// LSEEK: the kernel sends only `SEEK_DATA` and `SEEK_HOLE` (it moves the file
    /// position itself); the answer is the VFS's (`ENXIO` at or past the end).
    pub(super) fn lseek(&self, req: &Request<'_>, op: &abi::LseekIn) -> io::Result<()> {
        let core = self.fs.vfs.core();
        let r = self.fs.handle(op.fh).and_then(|h| {
            let off = i64::try_from(op.offset).map_err(|_| libc::ENXIO)?;
            core.lseek(&h.file, off, op.whence as i32).map_err(e)
        });
        match r {
            Ok(offset) => req.reply(&abi::LseekOut {
                offset: offset as u64,
            }),
            Err(err) => req.reply_error(err),
        }
    }
}
