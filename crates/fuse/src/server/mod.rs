//! Request dispatch: every FUSE operation mapped to the VFS's inode-handle API
//! ([`scalevfs_vfs::handle`]) and lock manager. See the crate docs for the design.

use std::ffi::OsStr;
use std::io::{self, Read as _};
use std::os::unix::ffi::OsStrExt;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use polyfuse::op::{Operation, SetAttrTime};
use polyfuse::reply::{
    AttrOut, EntryOut, FileAttr, LkOut, OpenOut, PollOut, ReaddirOut, StatfsOut, WriteOut, XattrOut,
};
use polyfuse::{Request, Session};
use scalevfs::inodes::{Node, Owner, SetAttr, SetTime};
use scalevfs::Vfs;
use scalevfs_kernfs::vfs::KernfsFile;
use scalevfs_kernfs::{Waker, DEFAULT_POLLMASK};
use scalevfs_primitives::percpu::PerCpuCounter;
use scalevfs_vfs::cancel::CancelToken;
use scalevfs_vfs::locks::{
    FileLockContext, LockManager, LockOwner, LockRequest, LockType, OFFSET_MAX,
};
use scalevfs_vfs::{xattr, Cred, Errno, FileRef, Stat, Timespec};

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
    /// Open file and directory handles.
    pub open_files: u64,
    /// CREATEs that found the name already there without `O_EXCL` (created behind the
    /// kernel's back after its LOOKUP).
    pub create_races: u64,
    /// COPY_FILE_RANGE requests (copies done in the server, not by the kernel's
    /// read/write fallback).
    pub copy_requests: u64,
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
    create_races: PerCpuCounter,
    copy_requests: PerCpuCounter,
}

fn e(err: Errno) -> i32 {
    err.0
}

/// A FUSE attribute time: polyfuse takes a `Duration` and sends its seconds as the u64
/// `fuse_attr` field, which the kernel reads as a signed time64; so a time before 1970
/// goes as the two's complement of its seconds (`-1.5 s`: seconds `-2`, nsec 5e8, as in
/// a `timespec`). Never overflows: nsec < 1e9 carries nothing into the seconds.
fn fuse_time(t: Timespec) -> Duration {
    Duration::new(t.sec as u64, t.nsec.clamp(0, 999_999_999) as u32)
}

/// `ino`: the number the mount reports ([`NodeTable::ino_of`]), not `st.ino`.
fn fill_attr(st: &Stat, ino: u64, a: &mut FileAttr) {
    a.ino(ino);
    a.mode(st.mode);
    a.nlink(st.nlink as u32);
    a.uid(st.uid);
    a.gid(st.gid);
    a.rdev(st.rdev as u32);
    a.size(st.size as u64);
    a.blksize(st.blksize as u32);
    a.blocks(st.blocks as u64);
    a.atime(fuse_time(st.atime));
    a.mtime(fuse_time(st.mtime));
    a.ctime(fuse_time(st.ctime));
}

fn name_bytes(n: &OsStr) -> &[u8] {
    n.as_bytes()
}

/// The `size` bytes a WRITE carries. `EIO` if they cannot be read or fewer arrived (as
/// libfuse answers a short write buffer): writing part of them would report a short
/// write of bytes the caller never placed there.
fn write_payload(data: impl io::Read, size: u32) -> Res<Vec<u8>> {
    let mut buf = Vec::with_capacity(size as usize);
    match data.take(u64::from(size)).read_to_end(&mut buf) {
        Ok(n) if n == size as usize => Ok(buf),
        _ => Err(libc::EIO),
    }
}

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
            create_races: PerCpuCounter::new(true),
            copy_requests: PerCpuCounter::new(true),
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
            open_files: self.files.len() as u64,
            create_races: self.create_races.sum() as u64,
            copy_requests: self.copy_requests.sum() as u64,
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
    fn reply_entry(&self, req: &Request, node: Node, open: Option<OpenOut>) -> io::Result<()> {
        let st = node.stat();
        let ino = self.nodes.ino_of(node.inode());
        let generation = node.generation();
        let ttl = self.ttl(&node);
        let id = self.nodes.remember(node);
        let mut out = EntryOut::default();
        fill_attr(&st, ino, out.attr());
        out.ino(id);
        out.generation(generation);
        out.ttl_attr(ttl);
        out.ttl_entry(ttl);
        let r = match open {
            None => req.reply(out),
            Some(o) => req.reply((out, o)),
        };
        if r.is_err() {
            self.nodes.forget(id, 1);
        }
        r
    }

    fn reply_attr(&self, req: &Request, node: &Node) -> io::Result<()> {
        let mut out = AttrOut::default();
        fill_attr(&node.stat(), self.nodes.ino_of(node.inode()), out.attr());
        out.ttl(self.ttl(node));
        req.reply(out)
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

    /// Waits for a lock on a thread of its own: publishes a [`CancelToken`] under
    /// `unique` (a `FUSE_INTERRUPT` or the unmount cancels it), runs `f` with it, answers
    /// with `reply`, and only then unpublishes, so an interrupt racing with the answer
    /// finds either the token (a harmless cancel) or nothing (`EAGAIN`, which the kernel
    /// drops). If no thread can be made, answers `ENOLCK` here.
    fn wait_for_lock<F, R>(self: &Arc<Self>, unique: u64, h: Arc<Handle>, f: F, reply: R)
    where
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

    fn open_handle(&self, node: Node, flags: i32) -> Res<u64> {
        let file = self.vfs.core().node_open(&node, flags).map_err(e)?;
        Ok(self.files.insert(Handle::new(node, file)))
    }

    /// CREATE: `open(dir/name, O_CREAT | flags, mode)`. The kernel sends it after its
    /// LOOKUP found no entry, and takes the reply as a file it created: it checks
    /// nothing on the file and does not truncate it. So if the name appeared meanwhile
    /// (behind the kernel's back) and `O_EXCL` is not set, this is an open of an existing
    /// file that only we can check, as `open(2)` would: the file's permissions for the
    /// caller and `O_TRUNC` ([`caller_cred`]). A CREATE reply must be a regular file (the
    /// kernel answers `EIO` otherwise), so anything else gets `ESTALE`: the kernel then
    /// walks the path again with `LOOKUP_REVAL`, finds the name and opens it itself, as
    /// Linux does (a directory's `EISDIR`, a symlink followed, a FIFO's open sleeping in
    /// the caller rather than on a worker).
    fn create(
        &self,
        dir: &Node,
        name: &[u8],
        mode: u32,
        flags: i32,
        req: &Request,
    ) -> Res<(Node, FileRef)> {
        self.create_as(dir, name, mode, flags, owner_of(req), || caller_cred(req))
    }

    /// [`Fs::create`] with the owner of a new file and the caller's credentials (asked
    /// for only if the name exists).
    fn create_as(
        &self,
        dir: &Node,
        name: &[u8],
        mode: u32,
        flags: i32,
        owner: Owner,
        cred: impl Fn() -> Cred,
    ) -> Res<(Node, FileRef)> {
        let core = self.vfs.core();
        // The name may come and go behind our back as well: a few rounds, then let the
        // kernel walk again.
        for _ in 0..3 {
            match core.node_create(dir, name, mode, flags, owner) {
                Err(Errno::EEXIST) if flags & libc::O_EXCL == 0 => {}
                r => return r.map_err(e),
            }
            self.create_races.add(1);
            let node = match core.node_lookup(dir, name) {
                Err(Errno::ENOENT) => continue,
                r => r.map_err(e)?,
            };
            if !node.inode().is_reg() {
                return Err(libc::ESTALE);
            }
            let file = core.node_open_as(&node, flags, &cred()).map_err(e)?;
            return Ok((node, file));
        }
        Err(libc::ESTALE)
    }
}

/// Runs on every worker thread.
pub(crate) struct Dispatcher {
    pub session: Session,
    /// Shared with the threads that wait for locks.
    pub fs: Arc<Fs>,
}

fn owner_of(req: &Request) -> Owner {
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
fn caller_cred(req: &Request) -> Cred {
    let (uid, gid) = (req.uid(), req.gid());
    let groups = std::fs::read_to_string(format!("/proc/{}/status", req.pid()))
        .ok()
        .filter(|_| req.pid() != 0)
        .and_then(|s| status_groups(&s, uid, gid))
        .unwrap_or_default();
    Cred { uid, gid, groups }
}

/// The credentials an xattr request on `name` (`None`: a listing) is checked with. The
/// kernel made the same checks before sending it (see `scalevfs_vfs::handle`); ours
/// matter where it did not (it passes a listing through as is, so `trusted.*` must be
/// hidden here from callers who are not root). Only `user.*` names are checked against
/// the file's permission bits and so need the supplementary groups ([`caller_cred`], a
/// read of `/proc`); every other rule depends on the uid alone. This keeps cheap the
/// kernel's `getxattr("security.capability")`, which `file_remove_privs` sends before
/// every write(2): FUSE inodes get `S_NOSEC` only with `FUSE_HANDLE_KILLPRIV_V2`
/// (protocol 7.33), which polyfuse 0.5.1 (7.31) cannot negotiate.
fn xattr_cred(req: &Request, name: Option<&[u8]>) -> Cred {
    match name {
        Some(n) if n.starts_with(b"user.") => caller_cred(req),
        _ => Cred {
            uid: req.uid(),
            gid: req.gid(),
            groups: Vec::new(),
        },
    }
}

/// The buffer for a GETXATTR or LISTXATTR of `size` bytes (0: a size query). The kernel
/// never asks for more than `XATTR_SIZE_MAX` (= `XATTR_LIST_MAX`), and no more is
/// allocated here whatever a request says.
fn xattr_buf(size: u32) -> Vec<u8> {
    vec![0; (size as usize).min(xattr::XATTR_SIZE_MAX.max(xattr::XATTR_LIST_MAX))]
}

/// Answers a GETXATTR or LISTXATTR: for a size query (an empty `buf`) the length in a
/// `fuse_getxattr_out`, otherwise the first `len` bytes of `buf` (the VFS answered
/// `ERANGE` if they did not fit).
fn reply_xattr(req: &Request, r: Res<usize>, mut buf: Vec<u8>) -> io::Result<()> {
    match r {
        Ok(len) if buf.is_empty() => {
            let mut out = XattrOut::default();
            out.size(u32::try_from(len).unwrap_or(u32::MAX));
            req.reply(out)
        }
        Ok(len) => {
            buf.truncate(len);
            req.reply(buf)
        }
        Err(err) => req.reply_error(err),
    }
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
    pub fn dispatch(self: &Arc<Self>, req: Request) {
        let op = match req.operation() {
            Ok(op) => op,
            Err(_) => {
                let _ = req.reply_error(libc::EIO);
                return;
            }
        };
        let fs = &self.fs;
        let core = fs.vfs.core();
        // Replies fail only if the request was interrupted and aborted, or the connection
        // is gone: either way there is nobody to tell.
        let r: io::Result<()> = match op {
            Operation::Lookup(op) => match fs
                .node(op.parent())
                .and_then(|d| core.node_lookup(&d, name_bytes(op.name())).map_err(e))
            {
                Ok(n) => fs.reply_entry(&req, n, None),
                Err(err) => req.reply_error(err),
            },
            Operation::Forget(forgets) => {
                for f in forgets.as_ref() {
                    fs.nodes.forget(f.ino(), f.nlookup());
                }
                Ok(()) // forget has no reply
            }
            Operation::Getattr(op) => match fs.node(op.ino()) {
                Ok(n) => fs.reply_attr(&req, &n),
                Err(err) => req.reply_error(err),
            },
            Operation::Setattr(op) => {
                let t = |x: Option<SetAttrTime>| {
                    x.map(|x| match x {
                        SetAttrTime::Timespec(d) => SetTime::At(Timespec {
                            // The kernel's u64 is a signed time64 (see `fuse_time`).
                            sec: d.as_secs() as i64,
                            nsec: d.subsec_nanos() as i64,
                        }),
                        _ => SetTime::Now, // SetAttrTime::Now (the enum is non_exhaustive)
                    })
                };
                let a = SetAttr {
                    mode: op.mode().map(|m| m & 0o7777),
                    uid: op.uid(),
                    gid: op.gid(),
                    size: op.size(),
                    atime: t(op.atime()),
                    mtime: t(op.mtime()),
                };
                match fs
                    .node(op.ino())
                    .and_then(|n| core.node_setattr(&n, &a).map_err(e).map(|_| n))
                {
                    Ok(n) => fs.reply_attr(&req, &n),
                    Err(err) => req.reply_error(err),
                }
            }
            Operation::Readlink(op) => match fs
                .node(op.ino())
                .and_then(|n| core.node_readlink(&n).map_err(e))
            {
                Ok(t) => req.reply(t),
                Err(err) => req.reply_error(err),
            },
            Operation::Symlink(op) => self.entry(&req, op.parent(), |d| {
                core.node_symlink(
                    d,
                    name_bytes(op.name()),
                    name_bytes(op.link()),
                    owner_of(&req),
                )
            }),
            Operation::Mknod(op) => self.entry(&req, op.parent(), |d| {
                core.node_mknod(
                    d,
                    name_bytes(op.name()),
                    op.mode(),
                    op.rdev() as u64,
                    owner_of(&req),
                )
            }),
            Operation::Mkdir(op) => self.entry(&req, op.parent(), |d| {
                core.node_mkdir(d, name_bytes(op.name()), op.mode(), owner_of(&req))
            }),
            Operation::Unlink(op) => self.unit(&req, op.parent(), |d| {
                core.node_unlink(d, name_bytes(op.name()))
            }),
            Operation::Rmdir(op) => self.unit(&req, op.parent(), |d| {
                core.node_rmdir(d, name_bytes(op.name()))
            }),
            Operation::Rename(op) => {
                let r = fs.node(op.parent()).and_then(|d| {
                    let nd = fs.node(op.newparent())?;
                    core.node_rename(
                        &d,
                        name_bytes(op.name()),
                        &nd,
                        name_bytes(op.newname()),
                        op.flags(),
                    )
                    .map_err(e)
                });
                match r {
                    Ok(()) => req.reply(()),
                    Err(err) => req.reply_error(err),
                }
            }
            Operation::Link(op) => match fs.node(op.ino()) {
                Ok(n) => self.entry(&req, op.newparent(), |d| {
                    core.node_link(&n, d, name_bytes(op.newname()))
                }),
                Err(err) => req.reply_error(err),
            },
            Operation::Create(op) => {
                let flags = op.open_flags() as i32;
                let r = fs
                    .node(op.parent())
                    .and_then(|d| fs.create(&d, name_bytes(op.name()), op.mode(), flags, &req));
                match r {
                    Ok((node, file)) => {
                        let fh = fs.files.insert(Handle::new(node.clone(), file));
                        let mut o = OpenOut::default();
                        o.fh(fh);
                        let r = fs.reply_entry(&req, node, Some(o));
                        if r.is_err() {
                            fs.files.remove(fh); // no RELEASE will come
                        }
                        r
                    }
                    Err(err) => req.reply_error(err),
                }
            }
            Operation::Open(op) => self.open(&req, op.ino(), op.flags() as i32),
            Operation::Opendir(op) => self.open(
                &req,
                op.ino(),
                (op.flags() as i32 & !libc::O_ACCMODE) | libc::O_RDONLY | libc::O_DIRECTORY,
            ),
            Operation::Read(op) => match fs.handle(op.fh()) {
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
            },
            Operation::Write(op, data) => match fs.handle(op.fh()) {
                Ok(h) => {
                    let r = i64::try_from(op.offset())
                        .map_err(|_| libc::EINVAL)
                        .and_then(|off| {
                            let buf = write_payload(data, op.size())?;
                            core.file_write_at(&h.file, &buf, off).map_err(e)
                        });
                    match r {
                        Ok(n) => {
                            let mut out = WriteOut::default();
                            out.size(n as u32);
                            req.reply(out)
                        }
                        Err(err) => req.reply_error(err),
                    }
                }
                Err(err) => req.reply_error(err),
            },
            Operation::Flush(op) => {
                // close(2) of some fd: the POSIX close rule for the flushing owner.
                let owner = op.lock_owner().into_raw();
                if let Ok(h) = fs.handle(op.fh()) {
                    if let Some(ctx) = h.node.inode().lock_ctx.get() {
                        fs.locks().release_posix(ctx, owner);
                    }
                    h.owners.lock().retain(|o| *o != owner);
                }
                req.reply(())
            }
            Operation::Release(op) => {
                self.release(op.fh());
                req.reply(())
            }
            Operation::Releasedir(op) => {
                self.release(op.fh());
                req.reply(())
            }
            Operation::Fsync(op) => match fs.handle(op.fh()) {
                Ok(h) => match core.fsync(&h.file) {
                    Ok(()) => req.reply(()),
                    Err(err) => req.reply_error(e(err)),
                },
                Err(err) => req.reply_error(err),
            },
            Operation::Fsyncdir(_) => req.reply(()),
            Operation::Readdir(op) => match fs.handle(op.fh()) {
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
            },
            Operation::Statfs(_) => {
                let s = fs.vfs.statfs();
                let mut out = StatfsOut::default();
                let st = out.statfs();
                st.bsize(s.bsize);
                st.frsize(s.bsize);
                st.blocks(s.blocks);
                st.bfree(s.bfree);
                st.bavail(s.bavail);
                st.files(s.files);
                st.ffree(s.ffree);
                st.namelen(s.namelen);
                req.reply(out)
            }
            Operation::Access(op) => {
                // Only sent without default_permissions (we always mount with it): check
                // with the caller's credentials for completeness.
                match fs.node(op.ino()) {
                    Ok(n) => {
                        let cred = caller_cred(&req);
                        let m = op.mask() as i32;
                        let mut mask = 0;
                        if m & libc::R_OK != 0 {
                            mask |= scalevfs_vfs::perm::MAY_READ;
                        }
                        if m & libc::W_OK != 0 {
                            mask |= scalevfs_vfs::perm::MAY_WRITE;
                        }
                        if m & libc::X_OK != 0 {
                            mask |= scalevfs_vfs::perm::MAY_EXEC;
                        }
                        match scalevfs_vfs::perm::permission(n.inode(), &cred, mask) {
                            Ok(()) => req.reply(()),
                            Err(err) => req.reply_error(e(err)),
                        }
                    }
                    Err(err) => req.reply_error(err),
                }
            }
            Operation::CopyFileRange(op) => {
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
                match r {
                    Ok(n) => {
                        let mut out = WriteOut::default();
                        out.size(n as u32);
                        req.reply(out)
                    }
                    Err(err) => req.reply_error(err),
                }
            }
            Operation::Fallocate(op) => match fs.handle(op.fh()) {
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
            },
            Operation::Getlk(op) => {
                fs.posix_requests.add(1);
                let r = fs.node(op.ino()).and_then(|n| {
                    let lr = lock_request(
                        LockOwner::Process(op.owner().into_raw()),
                        op.pid(),
                        op.typ(),
                        op.start(),
                        op.end(),
                    )?;
                    Ok(fs.locks().getlk(fs.lock_ctx(&n), &lr))
                });
                match r {
                    Ok(found) => {
                        let mut out = LkOut::default();
                        let fl = out.file_lock();
                        match found {
                            Some(info) => {
                                fl.typ(info.ty.to_l_type() as u32);
                                fl.start(info.start as u64);
                                fl.end(info.end as u64);
                                fl.pid(info.pid as u32);
                            }
                            None => fl.typ(libc::F_UNLCK as u32),
                        }
                        req.reply(out)
                    }
                    Err(err) => req.reply_error(err),
                }
            }
            Operation::Setlk(op) => {
                fs.posix_requests.add(1);
                let owner = op.owner().into_raw();
                let prepared = fs.handle(op.fh()).and_then(|h| {
                    let lr = lock_request(
                        LockOwner::Process(owner),
                        op.pid(),
                        op.typ(),
                        op.start(),
                        op.end(),
                    )?;
                    Ok((h, lr))
                });
                match prepared {
                    Err(err) => req.reply_error(err),
                    Ok((h, lr)) => {
                        if lr.ty != LockType::Unlock {
                            let mut owners = h.owners.lock();
                            if !owners.contains(&owner) {
                                owners.push(owner);
                            }
                        }
                        let sleep = op.sleep();
                        self.lock_op(req, h, sleep, move |fs, ctx, _, token| {
                            fs.locks().setlk(ctx, &lr, token)
                        });
                        Ok(())
                    }
                }
            }
            Operation::Flock(op) => {
                fs.flock_requests.add(1);
                let lop = op.op().unwrap_or(0) as i32;
                let pid = req.pid() as i32;
                match fs.handle(op.fh()) {
                    Err(err) => req.reply_error(err),
                    Ok(h) => {
                        let sleep = lop & libc::LOCK_NB == 0;
                        // Owner: the open file description (as `flock(2)` on Linux), whose
                        // last reference releases it (`OpenFile::release`).
                        self.lock_op(req, h, sleep, move |fs, ctx, h, token| {
                            let op = if token.is_some() {
                                lop
                            } else {
                                lop | libc::LOCK_NB
                            };
                            fs.locks().flock(ctx, h.file.lock_id(), pid, op, token)
                        });
                        Ok(())
                    }
                }
            }
            Operation::Interrupt(op) => match fs.waits.get(op.unique()) {
                Some(token) => {
                    fs.interrupts.add(1);
                    token.cancel();
                    Ok(()) // an interrupt is not answered unless it must be requeued
                }
                // Not (yet or any more) waiting: the kernel requeues the interrupt only if
                // the target is still pending.
                None => req.reply_error(libc::EAGAIN),
            },
            Operation::Poll(op) => match fs.handle(op.fh()) {
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
            },
            // Extended attributes switched off: ENOSYS, so that the kernel answers
            // EOPNOTSUPP itself from then on and stops asking (see `MountOptions::xattrs`).
            Operation::Setxattr(_)
            | Operation::Getxattr(_)
            | Operation::Listxattr(_)
            | Operation::Removexattr(_)
                if !fs.xattrs =>
            {
                req.reply_error(libc::ENOSYS)
            }
            // Extended attributes, checked again with the caller's credentials (see
            // `xattr_cred`). Never ENOSYS: the kernel would answer EOPNOTSUPP for the
            // operation from then on without asking.
            Operation::Setxattr(op) => {
                let name = name_bytes(op.name());
                self.unit(&req, op.ino(), |n| {
                    let cred = xattr_cred(&req, Some(name));
                    core.node_setxattr(n, &cred, name, op.value(), op.flags() as i32)
                })
            }
            Operation::Getxattr(op) => {
                let name = name_bytes(op.name());
                let mut buf = xattr_buf(op.size());
                let r = fs.node(op.ino()).and_then(|n| {
                    let cred = xattr_cred(&req, Some(name));
                    core.node_getxattr(&n, &cred, name, &mut buf).map_err(e)
                });
                reply_xattr(&req, r, buf)
            }
            Operation::Listxattr(op) => {
                let mut buf = xattr_buf(op.size());
                let r = fs.node(op.ino()).and_then(|n| {
                    core.node_listxattr(&n, &xattr_cred(&req, None), &mut buf)
                        .map_err(e)
                });
                reply_xattr(&req, r, buf)
            }
            Operation::Removexattr(op) => {
                let name = name_bytes(op.name());
                self.unit(&req, op.ino(), |n| {
                    core.node_removexattr(n, &xattr_cred(&req, Some(name)), name)
                })
            }
            // Bmap, copy_file_range, lseek: not in the VFS or not decoded by polyfuse (the
            // kernel falls back or reports EOPNOTSUPP).
            _ => req.reply_error(libc::ENOSYS),
        };
        drop(r);
    }

    /// A request creating `dir/name`: runs `f` on the parent and replies with an entry.
    fn entry(
        &self,
        req: &Request,
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
        req: &Request,
        parent: u64,
        f: impl FnOnce(&Node) -> Result<(), Errno>,
    ) -> io::Result<()> {
        match self.fs.node(parent).and_then(|d| f(&d).map_err(e)) {
            Ok(()) => req.reply(()),
            Err(err) => req.reply_error(err),
        }
    }

    fn open(&self, req: &Request, ino: u64, flags: i32) -> io::Result<()> {
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
    fn release(&self, fh: u64) {
        if let Some(h) = self.fs.files.remove(fh) {
            self.fs.release_handle(&h);
        }
    }

    /// Runs a lock operation: once without waiting on this worker; if it conflicts and the
    /// caller may sleep, again on a thread of its own ([`Fs::wait_for_lock`]) so that the
    /// workers stay free for the `FUSE_INTERRUPT` (see the crate docs). `f(fs, ctx, h,
    /// None)` must not sleep.
    fn lock_op<F>(self: &Arc<Self>, req: Request, h: Arc<Handle>, sleep: bool, f: F)
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
                let _ = req.reply(());
                return;
            }
            Err(err) => {
                let _ = req.reply_error(e(err));
                return;
            }
        }
        let unique = req.unique();
        fs.wait_for_lock(unique, h, f, move |res| {
            let _ = match res {
                Ok(()) => req.reply(()),
                Err(err) => req.reply_error(e(err)),
            };
        });
    }
}

/// Unpublishes a waiting request when dropped ([`Waits::finish`]).
struct Finish<'a>(&'a Waits, u64);

impl Drop for Finish<'_> {
    fn drop(&mut self) {
        self.0.finish(self.1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A regular file `f` (0644, root's) in the root of `fs`'s VFS.
    fn root_file(fs: &Fs) -> Node {
        let core = fs.vfs.core();
        core.node_mknod(
            &core.root_node(),
            b"f",
            libc::S_IFREG | 0o644,
            0,
            Owner { uid: 0, gid: 0 },
        )
        .unwrap()
    }

    #[test]
    fn fuse_lock_ranges_convert_to_lock_requests() {
        let r = lock_request(LockOwner::Process(7), 42, libc::F_WRLCK as u32, 5, u64::MAX).unwrap();
        assert_eq!(
            (r.start, r.end, r.ty, r.pid),
            (5, OFFSET_MAX, LockType::Write, 42)
        );
        assert_eq!(
            lock_request(LockOwner::Process(7), 1, 99, 0, 1),
            Err(libc::EINVAL),
            "bad type"
        );
        assert_eq!(
            lock_request(
                LockOwner::Process(7),
                1,
                libc::F_RDLCK as u32,
                u64::MAX,
                u64::MAX
            ),
            Err(libc::EINVAL),
            "start beyond OFFSET_MAX"
        );
    }

    /// CREATE of a name that exists (made behind the kernel's back) without `O_EXCL`: an
    /// open checked with the caller's credentials, `O_TRUNC` honoured, anything but a
    /// regular file handed back to the kernel (`ESTALE`).
    #[test]
    fn create_of_an_existing_name_is_a_checked_open() {
        let fs = Fs::new(Vfs::new(scalevfs::VfsOptions::default()));
        let core = fs.vfs.core();
        let root = core.root_node();
        let user = |uid| Owner { uid, gid: uid };
        let cred = |uid| {
            move || Cred {
                uid,
                gid: uid,
                groups: Vec::new(),
            }
        };
        let f = core
            .node_mknod(&root, b"secret", libc::S_IFREG | 0o600, 0, user(1000))
            .unwrap();
        core.file_write_at(&core.node_open(&f, libc::O_WRONLY).unwrap(), b"data", 0)
            .unwrap();
        let create = |name: &[u8], flags, uid| {
            fs.create_as(&root, name, 0o644, flags, user(uid), cred(uid))
                .map(|(n, _)| n)
        };
        assert_eq!(
            create(b"secret", libc::O_RDWR, 2000).err(),
            Some(libc::EACCES),
            "someone else's 0600 file"
        );
        assert_eq!(
            create(b"secret", libc::O_RDONLY | libc::O_TRUNC, 2000).err(),
            Some(libc::EACCES),
            "O_TRUNC needs write permission"
        );
        assert_eq!(f.stat().size, 4);
        let n = create(b"secret", libc::O_WRONLY | libc::O_TRUNC, 1000).unwrap();
        assert_eq!(n.ino(), f.ino(), "the existing file, opened");
        assert_eq!(f.stat().size, 0, "O_TRUNC honoured");
        assert_eq!(
            create(b"secret", libc::O_RDWR | libc::O_EXCL, 1000).err(),
            Some(libc::EEXIST)
        );
        // A group member's access comes from the supplementary groups.
        core.node_setattr(
            &f,
            &scalevfs::inodes::SetAttr {
                mode: Some(0o640),
                gid: Some(3000),
                ..Default::default()
            },
        )
        .unwrap();
        let member = || Cred {
            uid: 2000,
            gid: 2000,
            groups: vec![3000],
        };
        fs.create_as(&root, b"secret", 0o644, libc::O_RDONLY, user(2000), member)
            .unwrap();
        // Not a regular file: the kernel must open it (a FIFO would block a worker here).
        core.node_mknod(&root, b"fifo", libc::S_IFIFO | 0o666, 0, user(0))
            .unwrap();
        core.node_mkdir(&root, b"dir", 0o777, user(0)).unwrap();
        core.node_symlink(&root, b"link", b"secret", user(0))
            .unwrap();
        for name in [&b"fifo"[..], b"dir", b"link"] {
            assert_eq!(
                create(name, libc::O_RDONLY | libc::O_NONBLOCK, 0).err(),
                Some(libc::ESTALE),
                "{name:?}"
            );
        }
        // A new name is created with the given owner.
        let n = create(b"new", libc::O_RDWR, 2000).unwrap();
        assert_eq!((n.stat().uid, n.stat().gid), (2000, 2000));
        assert_eq!(fs.stats().create_races, 7);
    }

    /// The unmount's last step, with a lock waiter published after its first cancel (a
    /// SETLKW being dispatched when the unmount began) and a POSIX owner that will never
    /// FLUSH (the connection is aborted): the waiter is answered and its thread gone, and
    /// no lock is left in the lock manager.
    #[test]
    fn shutdown_leaves_no_waiter_and_no_lock_behind() {
        let fs = Arc::new(Fs::new(Vfs::new(scalevfs::VfsOptions::default())));
        let core = fs.vfs.core();
        let n = root_file(&fs);
        let open = || {
            let file = core.node_open(&n, libc::O_RDWR).unwrap();
            fs.handle(fs.files.insert(Handle::new(n.clone(), file)))
                .unwrap()
        };
        let (ha, hb) = (open(), open());
        let lock = |owner| lock_request(LockOwner::Process(owner), 1, libc::F_WRLCK as u32, 0, 9);
        // Owner 1 holds a lock through `ha`, as SETLK leaves it.
        ha.owners.lock().push(1);
        fs.locks()
            .setlk(fs.lock_ctx(&n), &lock(1).unwrap(), None)
            .unwrap();
        // Owner 2 waits for it through `hb`.
        hb.owners.lock().push(2);
        let (tx, rx) = std::sync::mpsc::channel();
        let req = lock(2).unwrap();
        fs.wait_for_lock(
            7,
            hb,
            move |fs, ctx, _, token| fs.locks().setlk(ctx, &req, token),
            move |r| tx.send(r).unwrap(),
        );
        assert_eq!(fs.stats().waiting, 1);
        drop(ha);
        fs.shutdown().unwrap();
        let answer = rx
            .try_recv()
            .expect("the waiter answered before shutdown returned");
        assert!(matches!(answer, Err(Errno::EINTR) | Ok(())), "{answer:?}");
        assert_eq!(fs.stats().waiting, 0);
        assert!(fs.waits.threads_is_empty(), "its thread was joined");
        assert_eq!(
            fs.locks().list().len(),
            0,
            "no lock left: {}",
            fs.vfs.proc_locks()
        );
        assert_eq!((fs.stats().open_files, fs.stats().nodes), (0, 0));
    }

    /// The node-level xattr calls the four requests make, with a caller's credentials:
    /// size queries and `ERANGE`, the set flags, `trusted.*` hidden from and refused to a
    /// caller who is not root; and no buffer beyond `XATTR_SIZE_MAX` whatever a request
    /// asks for.
    #[test]
    fn xattr_requests_run_with_the_callers_credentials() {
        let fs = Fs::new(Vfs::new(scalevfs::VfsOptions::default()));
        let core = fs.vfs.core();
        let f = root_file(&fs);
        let (admin, user) = (
            Cred::root(),
            Cred {
                uid: 1000,
                gid: 1000,
                groups: vec![],
            },
        );
        core.node_setxattr(&f, &admin, b"user.a", b"abc", 0)
            .unwrap();
        core.node_setxattr(&f, &admin, b"trusted.t", b"t", 0)
            .unwrap();
        assert_eq!(
            core.node_setxattr(&f, &admin, b"user.a", b"x", libc::XATTR_CREATE),
            Err(Errno::EEXIST)
        );
        assert_eq!(
            core.node_setxattr(&f, &admin, b"user.b", b"x", libc::XATTR_REPLACE),
            Err(Errno::ENODATA)
        );
        assert_eq!(core.node_getxattr(&f, &user, b"user.a", &mut []), Ok(3));
        assert_eq!(
            core.node_getxattr(&f, &user, b"user.a", &mut [0; 2]),
            Err(Errno::ERANGE)
        );
        let mut buf = xattr_buf(100);
        assert_eq!(core.node_getxattr(&f, &user, b"user.a", &mut buf), Ok(3));
        assert_eq!(&buf[..3], b"abc");
        assert_eq!(
            core.node_getxattr(&f, &user, b"trusted.t", &mut buf),
            Err(Errno::ENODATA)
        );
        assert_eq!(core.node_listxattr(&f, &user, &mut []), Ok(7), "user.a\\0");
        assert_eq!(core.node_listxattr(&f, &admin, &mut []), Ok(17));
        assert_eq!(
            core.node_setxattr(&f, &user, b"user.a", b"x", 0),
            Err(Errno::EACCES),
            "0644, not the owner"
        );
        assert_eq!(
            core.node_removexattr(&f, &user, b"trusted.t"),
            Err(Errno::EPERM)
        );
        core.node_removexattr(&f, &admin, b"trusted.t").unwrap();
        assert_eq!(
            core.node_removexattr(&f, &admin, b"trusted.t"),
            Err(Errno::ENODATA)
        );
        assert_eq!(xattr_buf(0).len(), 0, "a size query");
        assert_eq!(xattr_buf(u32::MAX).len(), xattr::XATTR_SIZE_MAX);
    }

    #[test]
    fn supplementary_groups_come_from_status_when_the_fs_ids_match() {
        let status = "Name:\tx\nUid:\t1\t2\t3\t1000\nGid:\t4\t5\t6\t100\nGroups:\t7 8 \n";
        assert_eq!(status_groups(status, 1000, 100), Some(vec![7, 8]));
        assert_eq!(status_groups(status, 1, 100), None, "fsuid differs");
        assert_eq!(status_groups(status, 1000, 4), None, "fsgid differs");
        let none = "Uid:\t0\t0\t0\t0\nGid:\t0\t0\t0\t0\nGroups:\t\n";
        assert_eq!(status_groups(none, 0, 0), Some(vec![]));
        assert_eq!(status_groups("Uid:\t0\t0\t0\t0\n", 0, 0), None);
        assert_eq!(status_groups("garbage", 0, 0), None);
    }

    #[test]
    fn a_write_payload_that_fails_or_falls_short_is_eio() {
        struct Failing(usize);
        impl io::Read for Failing {
            fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
                if self.0 == 0 {
                    return Err(io::Error::from_raw_os_error(libc::EFAULT));
                }
                let n = self.0.min(buf.len());
                buf[..n].fill(b'x');
                self.0 -= n;
                Ok(n)
            }
        }
        assert_eq!(write_payload(&b"abcdef"[..], 6), Ok(b"abcdef".to_vec()));
        assert_eq!(write_payload(&b"abcdef"[..], 4), Ok(b"abcd".to_vec()));
        assert_eq!(write_payload(&b"ab"[..], 4), Err(libc::EIO), "short");
        assert_eq!(write_payload(Failing(3), 8), Err(libc::EIO), "read error");
        assert_eq!(write_payload(Failing(0), 0), Ok(Vec::new()));
    }

    #[test]
    fn times_before_the_epoch_are_twos_complement_seconds() {
        let t = |sec, nsec| fuse_time(Timespec { sec, nsec });
        assert_eq!(t(2, 7), Duration::new(2, 7));
        assert_eq!(t(-1, 500_000_000), Duration::new(u64::MAX, 500_000_000));
        let d = t(-2_208_988_800, 3);
        assert_eq!((d.as_secs() as i64, d.subsec_nanos()), (-2_208_988_800, 3));
        assert_eq!(t(i64::MIN, 999_999_999).as_secs(), 1 << 63);
    }
}
