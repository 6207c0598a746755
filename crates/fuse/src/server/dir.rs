//! Requests on open directories: OPENDIR, READDIR, FSYNCDIR and RELEASEDIR.

use std::ffi::OsStr;
use std::io;
use std::os::unix::ffi::OsStrExt;

use polyfuse::op;
use polyfuse::reply::ReaddirOut;
use polyfuse::Request;

use super::{e, Dispatcher};

impl Dispatcher {
    pub(super) fn opendir(&self, req: &Request, op: op::Opendir<'_>) -> io::Result<()> {
        self.open(
            req,
            op.ino(),
            (op.flags() as i32 & !libc::O_ACCMODE) | libc::O_RDONLY | libc::O_DIRECTORY,
        )
    }

    pub(super) fn readdir(&self, req: &Request, op: op::Readdir<'_>) -> io::Result<()> {
        let fs = &self.fs;
        let core = fs.vfs.core();
        match fs.handle(op.fh()) {
            Ok(h) => {
                let mut out = ReaddirOut::new(op.size() as usize);
                let sb = h.node.inode().sb();
                let r = i64::try_from(op.offset())
                    .map_err(|_| libc::EINVAL)
                    .and_then(|pos| {
                        core.readdir_from(&h.file, pos, &mut |d| {
                            // `entry` is true when the entry did not fit: stop there;
                            // the kernel resumes from the previous entry's cookie.
                            !out.entry(
                                OsStr::from_bytes(d.name),
                                fs.nodes.ino_in(sb, d.ino),
                                d.d_type as u32,
                                d.next_pos as u64,
                            )
                        })
                        .map_err(e)
                    });
                match r {
                    Ok(_) => req.reply(out),
                    Err(err) => req.reply_error(err),
                }
            }
            Err(err) => req.reply_error(err),
        }
    }

    /// RELEASEDIR: as RELEASE.
    pub(super) fn releasedir(&self, req: &Request, op: op::Releasedir<'_>) -> io::Result<()> {
        self.release_fh(op.fh());
        req.reply(())
    }
}
