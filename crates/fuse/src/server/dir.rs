//! Requests on open directories: OPENDIR, READDIR, FSYNCDIR and RELEASEDIR.

use std::io;

use super::{e, Dispatcher};
use crate::proto::abi;
use crate::proto::dirents::DirentBuf;
use crate::proto::Request;

impl Dispatcher {
    pub(super) fn opendir(&self, req: &Request<'_>, op: &abi::OpenIn) -> io::Result<()> {
        self.open(
            req,
            req.nodeid(),
            (op.flags as i32 & !libc::O_ACCMODE) | libc::O_RDONLY | libc::O_DIRECTORY,
        )
    }

    pub(super) fn readdir(&self, req: &Request<'_>, op: &abi::ReadIn) -> io::Result<()> {
        let fs = &self.fs;
        let core = fs.vfs.core();
        match fs.handle(op.fh) {
            Ok(h) => {
                let mut out = DirentBuf::new(op.size as usize);
                let sb = h.node.inode().sb();
                let r = i64::try_from(op.offset)
                    .map_err(|_| libc::EINVAL)
                    .and_then(|pos| {
                        core.readdir_from(&h.file, pos, &mut |d| {
                            // `push` is false when the entry did not fit: stop there;
                            // the kernel resumes from the previous entry's cookie.
                            out.push(
                                fs.nodes.ino_in(sb, d.ino),
                                d.next_pos as u64,
                                d.d_type as u32,
                                d.name,
                            )
                        })
                        .map_err(e)
                    });
                match r {
                    Ok(_) => req.reply(out.as_bytes()),
                    Err(err) => req.reply_error(err),
                }
            }
            Err(err) => req.reply_error(err),
        }
    }
}
