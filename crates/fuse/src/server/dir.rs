//! Requests on open directories: OPENDIR, READDIR and READDIRPLUS (RELEASEDIR is
//! RELEASE's).
//!
//! READDIRPLUS answers each entry with its attributes and a node, so that `ls -l`
//! costs no LOOKUP per name. Every entry but `.` and `..` counts one kernel reference
//! (the kernel ignores those two, so they carry node id 0 and count nothing). The
//! names are gathered first and looked up after the listing, because the listing
//! holds the directory's lock; only entries that fit the kernel's buffer are looked up,
//! and if the reply cannot be delivered their references are taken back.

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

    pub(super) fn readdirplus(&self, req: &Request<'_>, op: &abi::ReadIn) -> io::Result<()> {
        let fs = &self.fs;
        let core = fs.vfs.core();
        let h = match fs.handle(op.fh) {
            Ok(h) => h,
            Err(err) => return req.reply_error(err),
        };
        let Ok(pos) = i64::try_from(op.offset) else {
            return req.reply_error(libc::EINVAL);
        };
        // (name, d_ino, type, next cookie) of the entries that fit.
        let mut names: Vec<(Vec<u8>, u64, u32, u64)> = Vec::new();
        let mut sizing = DirentBuf::new(op.size as usize);
        let sb = h.node.inode().sb();
        let listed = core.readdir_from(&h.file, pos, &mut |d| {
            // Sized with an empty entry: pushes only grow `sizing` by the record length.
            if !sizing.push_plus(&abi::EntryOut::default(), 0, 0, 0, d.name) {
                return false;
            }
            names.push((
                d.name.to_vec(),
                fs.nodes.ino_in(sb, d.ino),
                d.d_type as u32,
                d.next_pos as u64,
            ));
            true
        });
        if let Err(err) = listed {
            return req.reply_error(e(err));
        }
        let mut out = DirentBuf::new(op.size as usize);
        let mut counted = Vec::with_capacity(names.len());
        for (name, ino, typ, next) in &names {
            let dot = name == b"." || name == b"..";
            // A name gone since the listing: attributes unknown (node id 0), as for dots.
            let found = if dot {
                None
            } else {
                core.node_lookup(&h.node, name).ok()
            };
            let entry = match found {
                Some(node) => {
                    let entry = fs.entry_out(node);
                    counted.push(entry.nodeid);
                    entry
                }
                None => abi::EntryOut::default(),
            };
            let pushed = out.push_plus(&entry, *ino, *next, *typ, name);
            debug_assert!(pushed, "sized by the same records above");
        }
        let r = req.reply(out.as_bytes());
        if r.is_err() {
            for id in counted {
                fs.nodes.forget(id, 1);
            }
        }
        r
    }
}
