//! Request dispatch: every FUSE operation mapped to the VFS's inode-handle API
//! ([`scalevfs_vfs::handle`]) and lock manager. See the crate docs for the design.
//!
//! This module holds the server's state ([`Fs`]: nodes, handles, lock waiters) and
//! [`Dispatcher::dispatch`], which hands each request to its operation's method:
//!
//! | module   | requests                                                                   |
//! |----------|----------------------------------------------------------------------------|
//! | `entry`  | LOOKUP, FORGET, GETATTR, SETATTR, READLINK, SYMLINK, MKNOD, MKDIR, UNLINK, RMDIR, RENAME, LINK, CREATE, TMPFILE, STATFS, ACCESS |
//! | `file`   | OPEN, READ, WRITE, RELEASE(DIR), FSYNC, COPY_FILE_RANGE, FALLOCATE, LSEEK, POLL |
//! | `dir`    | OPENDIR, READDIR, READDIRPLUS                                              |
//! | `ioctl`  | IOCTL (the inode-flag requests)                                            |
//! | `xattr`  | SETXATTR, GETXATTR, LISTXATTR, REMOVEXATTR                                 |
//! | `locks`  | GETLK, SETLK, SETLKW, FLOCK, FLUSH, INTERRUPT                              |

mod dir;
mod entry;
mod file;
mod ioctl;
mod locks;
#[cfg(test)]
mod tests;
mod xattr;

use std::io;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use scalevfs::frontend::{Node, Owner};
use scalevfs::Vfs;
use scalevfs_kernfs::vfs::KernfsFile;
use scalevfs_primitives::percpu::PerCpuCounter;
use scalevfs_vfs::locks::{FileLockContext, LockManager};
use scalevfs_vfs::{Cred, Errno, Stat, Timespec};

use zerocopy::IntoBytes;

use crate::proto::abi;
use crate::proto::{Channel, Notifier, Operation, Request};
use crate::tables::{FileTable, Handle, NodeTable, Waits};

/// How long the kernel may cache entries and attributes of the tmpfs root. Every change
/// goes through this mount (nobody else holds the `Vfs` while it is served), and the
/// kernel invalidates what its own operations change, so caching is safe; see the
/// README's FUSE differences for what it costs (atime). Nodes of other file systems
/// (kernfs under `/sys`, which changes behind our back) are not cached (TTL 0).
const TTL: Duration = Duration::from_secs(1);

/// Counters a test reads to see what reached the server.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Stats {
    /// Nodes the kernel holds a reference to (the root excluded).
    pub nodes: u64,
    /// Sum of those nodes' lookup counts.
    pub lookups: u64,
    /// getlk/setlk/setlkw requests without `FUSE_LK_FLOCK`.
    pub posix_requests: u64,
    /// setlk/setlkw requests with `FUSE_LK_FLOCK`.
    pub flock_requests: u64,
    /// Lock requests sleeping right now.
    pub waiting: u64,
    /// `FUSE_INTERRUPT`s that cancelled a waiting request.
    pub interrupts: u64,
    /// Waits from io_uring cancelled because their caller had a signal pending whose
    /// interrupt the kernel may have dropped (see `server/locks.rs`).
    pub lost_interrupts: u64,
    /// Open file and directory handles.
    pub open_files: u64,
    /// CREATEs that found the name already there without `O_EXCL` (created behind the
    /// kernel's back after its LOOKUP).
    pub create_races: u64,
    /// COPY_FILE_RANGE requests (copies done in the server, not by the kernel's
    /// read/write fallback).
    pub copy_requests: u64,
    /// GETXATTR requests (with `HANDLE_KILLPRIV_V2`, writes no longer send one each).
    pub getxattr_requests: u64,
}

pub(crate) struct Fs {
    // Fields drop in order: the node and file tables hold dentries, inodes and open files
    // of `vfs`, so they go first. Were `vfs` (often its last reference) dropped before
    // them, the VFS would be torn down with busy inodes and leak (`leaked_cores`).
    pub nodes: NodeTable,
    pub files: FileTable,
    pub waits: Waits,
    pub vfs: Arc<Vfs>,
    /// Serve extended attributes (`MountOptions::xattrs`); off: `ENOSYS`.
    xattrs: bool,
    // Statistics, sharded by CPU so that lock requests on different files do not all
    // write one cache line.
    posix_requests: PerCpuCounter,
    flock_requests: PerCpuCounter,
    interrupts: PerCpuCounter,
    lost_interrupts: PerCpuCounter,
    create_races: PerCpuCounter,
    copy_requests: PerCpuCounter,
    getxattr_requests: PerCpuCounter,
}

fn e(err: Errno) -> i32 {
    err.0
}

/// A FUSE attribute time: the u64 `fuse_attr` seconds field, which the kernel reads as
/// a signed time64, so a time before 1970 goes as the two's complement of its seconds
/// (`-1.5 s`: seconds `-2`, nsec 5e8, as in a `timespec`), and the nanoseconds.
fn fuse_time(t: Timespec) -> (u64, u32) {
    (t.sec as u64, t.nsec.clamp(0, 999_999_999) as u32)
}

/// `ino`: the number the mount reports ([`NodeTable::ino_of`]), not `st.ino`.
fn fuse_attr(st: &Stat, ino: u64) -> abi::Attr {
    let (atime, atimensec) = fuse_time(st.atime);
    let (mtime, mtimensec) = fuse_time(st.mtime);
    let (ctime, ctimensec) = fuse_time(st.ctime);
    abi::Attr {
        ino,
        size: st.size as u64,
        blocks: st.blocks as u64,
        atime,
        mtime,
        ctime,
        atimensec,
        mtimensec,
        ctimensec,
        mode: st.mode,
        nlink: st.nlink as u32,
        uid: st.uid,
        gid: st.gid,
        rdev: st.rdev as u32,
        blksize: st.blksize as u32,
        flags: 0,
    }
}

type Res<T> = Result<T, i32>;

impl Fs {
    /// Serves extended attributes or not (see `MountOptions::xattrs`).
    pub fn with_xattrs(mut self, on: bool) -> Fs {
        self.xattrs = on;
        self
    }
    pub fn new(vfs: Arc<Vfs>) -> Fs {
        let root = vfs.core().root_node();
        Fs {
            vfs,
            xattrs: true,
            nodes: NodeTable::new(root),
            files: FileTable::new(),
            waits: Waits::new(),
            posix_requests: PerCpuCounter::new(true),
            flock_requests: PerCpuCounter::new(true),
            interrupts: PerCpuCounter::new(true),
            lost_interrupts: PerCpuCounter::new(true),
            create_races: PerCpuCounter::new(true),
            copy_requests: PerCpuCounter::new(true),
            getxattr_requests: PerCpuCounter::new(true),
        }
    }

    pub fn stats(&self) -> Stats {
        let (nodes, lookups) = self.nodes.counts();
        Stats {
            nodes,
            lookups,
            posix_requests: self.posix_requests.sum() as u64,
            flock_requests: self.flock_requests.sum() as u64,
            waiting: self.waits.len() as u64,
            interrupts: self.interrupts.sum() as u64,
            lost_interrupts: self.lost_interrupts.sum() as u64,
            open_files: self.files.len() as u64,
            create_races: self.create_races.sum() as u64,
            copy_requests: self.copy_requests.sum() as u64,
            getxattr_requests: self.getxattr_requests.sum() as u64,
        }
    }

    fn node(&self, id: u64) -> Res<Node> {
        self.nodes.get(id).ok_or(libc::ESTALE)
    }

    fn handle(&self, fh: u64) -> Res<Arc<Handle>> {
        self.files.get(fh).ok_or(libc::EBADF)
    }

    fn lock_ctx<'a>(&self, node: &'a Node) -> &'a FileLockContext {
        self.vfs.lock_context(node)
    }

    fn locks(&self) -> &LockManager {
        self.vfs.locks()
    }

    /// Whether `node` belongs to the tmpfs root (not a file system mounted inside).
    fn in_root_fs(&self, node: &Node) -> bool {
        std::ptr::eq(node.inode().sb(), self.nodes.root().inode().sb())
    }

    fn ttl(&self, node: &Node) -> Duration {
        if self.in_root_fs(node) {
            TTL
        } else {
            Duration::ZERO
        }
    }

    /// Replies with an entry for `node`, counting the kernel's new reference first (the
    /// FORGET may arrive on another worker as soon as the reply is written) and taking it
    /// back if the reply could not be delivered (an interrupted request: no FORGET comes).
    fn reply_entry(
        &self,
        req: &Request<'_>,
        node: Node,
        open: Option<abi::OpenOut>,
    ) -> io::Result<()> {
        let out = self.entry_out(node);
        let r = match open {
            None => req.reply(&out),
            Some(o) => req.reply_parts(&[out.as_bytes(), o.as_bytes()]),
        };
        if r.is_err() {
            self.nodes.forget(out.nodeid, 1);
        }
        r
    }

    /// The entry the kernel gets for `node`, counted as its new reference (undo with
    /// `nodes.forget(out.nodeid, 1)` if the reply is not delivered).
    fn entry_out(&self, node: Node) -> abi::EntryOut {
        let st = node.stat();
        let ino = self.nodes.ino_of(node.inode());
        let generation = node.generation();
        let ttl = self.ttl(&node);
        let id = self.nodes.remember(node);
        abi::EntryOut {
            nodeid: id,
            generation,
            entry_valid: ttl.as_secs(),
            attr_valid: ttl.as_secs(),
            entry_valid_nsec: ttl.subsec_nanos(),
            attr_valid_nsec: ttl.subsec_nanos(),
            attr: fuse_attr(&st, ino),
        }
    }

    fn reply_attr(&self, req: &Request<'_>, node: &Node) -> io::Result<()> {
        let ttl = self.ttl(node);
        let out = abi::AttrOut {
            attr_valid: ttl.as_secs(),
            attr_valid_nsec: ttl.subsec_nanos(),
            dummy: 0,
            attr: fuse_attr(&node.stat(), self.nodes.ino_of(node.inode())),
        };
        req.reply(&out)
    }

    /// Last close of an open file description (RELEASE, or unmount): the locks of owners
    /// that never flushed it (OFD owners) go; its flock and `LockOwner::File` locks go too
    /// (also with the last reference of the VFS open file, which a lock waiter may still
    /// hold).
    fn release_handle(&self, h: &Handle) {
        if let Some((_, key)) = h.poll.lock().take() {
            if let Some(kf) = h.file.private::<Arc<KernfsFile>>() {
                kf.open_file().remove_waiter(key);
            }
        }
        let owners = std::mem::take(&mut *h.owners.lock());
        if let Some(ctx) = h.node.inode().lock_ctx.get() {
            for owner in owners {
                self.locks().release_posix(ctx, owner);
            }
            self.locks().release_file(ctx, h.file.lock_id());
        }
    }

    /// After the workers stopped (nothing publishes a wait any more): cancels every
    /// waiting lock request (again: one may have been published after the unmount's
    /// first cancel), waits for their threads to answer and joins them, then releases
    /// every handle as
    /// RELEASE would, POSIX owners included (no FLUSH will come for them), and drops
    /// every node. `Err` if a waiter did not end in time.
    pub fn shutdown(&self) -> io::Result<()> {
        self.waits.cancel_all();
        let idle = self.waits.wait_idle(Duration::from_secs(10));
        if idle {
            self.waits.join_all(); // they have answered: only their exit is left
        }
        // After the waiters: a grant that beat the cancel is released here too (its
        // owner joined the handle's set before it waited).
        for h in self.files.drain() {
            self.release_handle(&h);
        }
        self.nodes.clear();
        if idle {
            Ok(())
        } else {
            Err(io::Error::other("a FUSE lock waiter did not end"))
        }
    }
}

/// Runs on every worker thread.
pub(crate) struct Dispatcher {
    /// Sends poll notifications.
    pub notifier: Notifier,
    /// Every `/dev/fuse` worker's channel (set once, before they start): an
    /// interrupt's `EAGAIN` must reach the processing queue that holds its target
    /// ([`Dispatcher::requeue_interrupt`]).
    pub channels: OnceLock<Vec<Arc<Channel>>>,
    /// io_uring queues serve requests: an interrupt that finds no waiting target is
    /// remembered for it (the kernel cannot queue it again; see `Waits`). Set before
    /// the ring workers start (`Relaxed`: thread spawn orders it).
    pub uring: AtomicBool,
    /// Shared with the threads that wait for locks.
    pub fs: Arc<Fs>,
}

fn owner_of(req: &Request<'_>) -> Owner {
    Owner {
        uid: req.uid(),
        gid: req.gid(),
    }
}

/// The caller's credentials for a check the kernel did not make: the header's fsuid and
/// fsgid, and the supplementary groups of the calling thread from `/proc/PID/status` when
/// that thread is visible and still has the header's fsuid and fsgid (none otherwise: a
/// caller in another pid namespace, or gone). uid 0 counts as holding every capability
/// (`Cred::is_root`); other capabilities are not seen.
fn caller_cred(req: &Request<'_>) -> Cred {
    let (uid, gid) = (req.uid(), req.gid());
    let groups = std::fs::read_to_string(format!("/proc/{}/status", req.pid()))
        .ok()
        .filter(|_| req.pid() != 0)
        .and_then(|s| status_groups(&s, uid, gid))
        .unwrap_or_default();
    Cred { uid, gid, groups }
}

/// The `Groups:` of a `/proc/PID/status` text whose fsuid and fsgid (the fourth `Uid:`
/// and `Gid:` fields) are `uid` and `gid`; `None` if they differ or a line is missing.
fn status_groups(status: &str, uid: u32, gid: u32) -> Option<Vec<u32>> {
    let field = |key: &str| status.lines().find_map(|l| l.strip_prefix(key));
    let fs_id = |key: &str| -> Option<u32> { field(key)?.split_whitespace().nth(3)?.parse().ok() };
    if fs_id("Uid:")? != uid || fs_id("Gid:")? != gid {
        return None;
    }
    field("Groups:")?
        .split_whitespace()
        .map(|g| g.parse().ok())
        .collect()
}

impl Dispatcher {
    /// Answers `req`: one method per operation, in the files of this module.
    pub fn dispatch(self: &Arc<Self>, req: Request<'_>) {
        let op = match req.operation() {
            Ok(op) => op,
            Err(_) => {
                let _ = req.reply_error(libc::EIO);
                return;
            }
        };
        let ino = req.nodeid();
        // Replies fail only if the request was interrupted and aborted, or the connection
        // is gone: either way there is nobody to tell.
        let r: io::Result<()> = match op {
            Operation::Lookup { name } => self.lookup(&req, name),
            Operation::Forget(forgets) => self.forget(forgets),
            Operation::Getattr(_) => self.getattr(&req),
            Operation::Setattr(arg) => self.setattr(&req, &arg),
            Operation::Readlink => self.readlink(&req),
            Operation::Symlink { name, target } => self.symlink(&req, name, target),
            Operation::Mknod { arg, name } => self.mknod(&req, &arg, name),
            Operation::Mkdir { arg, name } => self.mkdir(&req, &arg, name),
            Operation::Unlink { name } => self.unlink(&req, name),
            Operation::Rmdir { name } => self.rmdir(&req, name),
            Operation::Rename {
                newdir,
                flags,
                name,
                newname,
            } => self.rename(&req, name, newdir, newname, flags),
            Operation::Link { oldnodeid, newname } => self.link(&req, oldnodeid, newname),
            Operation::Create { arg, name } => self.create(&req, &arg, name),
            Operation::Tmpfile { arg } => self.tmpfile(&req, &arg),
            Operation::Open(arg) => self.open(&req, ino, arg.flags as i32),
            Operation::Opendir(arg) => self.opendir(&req, &arg),
            Operation::Read(arg) => self.read(&req, &arg),
            Operation::Write { arg, data } => self.write(&req, &arg, data),
            Operation::Flush(arg) => self.flush(&req, &arg),
            Operation::Release(arg) | Operation::Releasedir(arg) => self.release(&req, &arg),
            Operation::Fsync(arg) => self.fsync(&req, &arg),
            Operation::Fsyncdir(_) => req.reply_empty(),
            Operation::Readdir(arg) => self.readdir(&req, &arg),
            Operation::Readdirplus(arg) => self.readdirplus(&req, &arg),
            Operation::Statfs => self.statfs(&req),
            Operation::Access(arg) => self.access(&req, &arg),
            Operation::CopyFileRange(arg) => self.copy_file_range(&req, &arg),
            Operation::Fallocate(arg) => self.fallocate(&req, &arg),
            Operation::Getlk(arg) => self.getlk(&req, &arg),
            Operation::Setlk { arg, sleep } if arg.lk_flags & abi::FUSE_LK_FLOCK != 0 => {
                let prepared = self.flock(&req, &arg, sleep);
                self.run_lock(&req, prepared)
            }
            Operation::Setlk { arg, sleep } => {
                let prepared = self.setlk(&arg, sleep);
                self.run_lock(&req, prepared)
            }
            Operation::Interrupt(arg) => self.interrupt(&req, &arg),
            Operation::Poll(arg) => self.poll(&req, &arg),
            Operation::Lseek(arg) => self.lseek(&req, &arg),
            Operation::Ioctl { arg, data } => self.ioctl(&req, &arg, data),
            // Extended attributes switched off: ENOSYS, so that the kernel answers
            // EOPNOTSUPP itself from then on and stops asking (see `MountOptions::xattrs`).
            Operation::Setxattr { .. }
            | Operation::Getxattr { .. }
            | Operation::Listxattr(_)
            | Operation::Removexattr { .. }
                if !self.fs.xattrs =>
            {
                req.reply_error(libc::ENOSYS)
            }
            // Extended attributes, checked again with the caller's credentials (see
            // `xattr_cred`). Never ENOSYS: the kernel would answer EOPNOTSUPP for the
            // operation from then on without asking.
            Operation::Setxattr { arg, name, value } => self.setxattr(&req, &arg, name, value),
            Operation::Getxattr { arg, name } => self.getxattr(&req, &arg, name),
            Operation::Listxattr(arg) => self.listxattr(&req, &arg),
            Operation::Removexattr { name } => self.removexattr(&req, name),
            Operation::Destroy => Ok(()),
            // BMAP, SETUPMAPPING, STATX and the rest: not in the VFS (the kernel falls
            // back or reports EOPNOTSUPP).
            _ => req.reply_error(libc::ENOSYS),
        };
        drop(r);
    }

    /// A request creating `dir/name`: runs `f` on the parent and replies with an entry.
    fn entry(
        &self,
        req: &Request<'_>,
        parent: u64,
        f: impl FnOnce(&Node) -> Result<Node, Errno>,
    ) -> io::Result<()> {
        match self.fs.node(parent).and_then(|d| f(&d).map_err(e)) {
            Ok(n) => self.fs.reply_entry(req, n, None),
            Err(err) => req.reply_error(err),
        }
    }

    /// A request on `dir` with an empty reply.
    fn unit(
        &self,
        req: &Request<'_>,
        parent: u64,
        f: impl FnOnce(&Node) -> Result<(), Errno>,
    ) -> io::Result<()> {
        match self.fs.node(parent).and_then(|d| f(&d).map_err(e)) {
            Ok(()) => req.reply_empty(),
            Err(err) => req.reply_error(err),
        }
    }
}
