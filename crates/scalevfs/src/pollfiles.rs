//! Pollable files behind descriptors: pipes, eventfds and epoll instances, wired into the
//! fd table (the `Process` methods `pipe2`, `eventfd`, `epoll_*`, `poll`, `ppoll` and the
//! read/write dispatch are thin wrappers over the functions here).
//!
//! ## Open file descriptions
//!
//! As in Linux, a pipe end, an eventfd or an epoll is an ordinary open file description
//! ([`OpenFile`]) on an internal, never-attached mount (Linux's `pipefs` and
//! `anon_inodefs`), whose per-open state (`file->private_data`, our
//! [`OpenFile::private`]) is the file object: a [`Special`]. So:
//! - regular tmpfs files pay almost nothing: `read`/`write` ask `private::<Special>()`,
//!   one load of a field that is `None` for tmpfs, and the special paths are out of line
//!   (`#[inline(never)]`) so they do not change how the regular path is inlined;
//! - `fstat`, `fchmod`, `fchdir` (`ENOTDIR`), `getdents64` (`ENOTDIR`), `ftruncate`
//!   (`EINVAL`), `fsync` (`EINVAL`) and `fallocate` (`ESPIPE`) work through the generic VFS
//!   paths on the file's own inode (`S_IFIFO|0600` for pipe ends; `0600` with no type
//!   bits for eventfd and epoll, as Linux's anonymous inode);
//! - the last close of the description runs [`FileSystem::release`] of the internal file
//!   system, which drops the `Special`; that drop is the file object's last close and
//!   runs `release_file_from_epoll` (the watched-file release path of epoll's refcounted teardown) before the
//!   object's own release.
//!
//! Each file gets its own inode and dentry (Linux shares one anonymous inode between all
//! eventfds and epolls): a shared inode would put one reference count on every
//! create/close of every thread. Inode numbers come from per-thread batches (Linux's
//! `get_next_ino`), so creation touches no shared counter but once per 1024 files.
//!
//! ## Locks and scaling
//!
//! This layer takes no lock of its own on any per-call path: descriptors come from the
//! lock-free fd table; creating a file touches the internal superblock's inode list and
//! inode hash (sharded, as for tmpfs inodes) and the dcache's per-CPU counters; the last
//! close runs the file object's release, which takes only that file's and its watching
//! instances' locks (epoll's refcounted teardown; the legacy design adds the global `epmutex`). The internal
//! mount is created once, under a `OnceLock`.
//!
//! ## Differences from Linux
//! - Every eventfd/epoll has its own inode number (Linux: one anonymous inode).
//! - No signals: `EPIPE` comes without `SIGPIPE`; `epoll_pwait`/`ppoll` ignore the
//!   signal mask (a cancel token stands for a pending signal: `EINTR`).
//! - `pread`/`pwrite` and `lseek` on pipes are `ESPIPE`; `lseek` on an eventfd or epoll
//!   returns 0 (`noop_llseek`).

use std::any::Any;
use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use scalevfs_primitives::Locking;
use scalevfs_vfs::cancel::CancelToken;
use scalevfs_vfs::epoll::{Epoll, EpollContext, EpollEvent, FdKey, EPOLL_CLOEXEC, EPOLL_CTL_DEL};
use scalevfs_vfs::eventfd::{EventFd, EFD_CLOEXEC};
use scalevfs_vfs::fs::DirEmit;
use scalevfs_vfs::inode::NewInode;
use scalevfs_vfs::mount::Mount;
use scalevfs_vfs::poll::{self, PollTarget, Pollable, RegularFile};
use scalevfs_vfs::{
    Errno, FileRef, FileSystem, Inode, InodeRef, MntRef, OpenFile, Path, SuperBlock, SysResult,
    VfsCore,
};

use crate::fdtable::FdTable;

/// What a special open file description is (its `private_data`).
pub enum Special {
    Pipe(scalevfs_vfs::pipe::PipeEnd),
    EventFd(EventFd),
    Epoll(Epoll),
}

impl Special {
    fn pollable(&self) -> Arc<dyn Pollable> {
        match self {
            Special::Pipe(p) => p.pollable(),
            Special::EventFd(e) => e.pollable(),
            Special::Epoll(e) => e.pollable(),
        }
    }
    fn set_nonblock(&self, on: bool) {
        match self {
            Special::Pipe(p) => p.set_nonblock(on),
            Special::EventFd(e) => e.set_nonblock(on),
            Special::Epoll(_) => {}
        }
    }
}

/// The special file behind `f`, if it is one.
#[inline]
pub fn special(f: &OpenFile) -> Option<&Special> {
    f.private::<Special>()
}

/// The object `poll` and `epoll_ctl` see for `f`: a pipe, eventfd or epoll; what the file
/// system offers (kernfs attributes: `POLLPRI|POLLERR` on notify); otherwise, as for tmpfs
/// files and directories, always ready and refusing epoll (`EPERM`).
pub fn pollable_of(f: &OpenFile) -> Arc<dyn Pollable> {
    match special(f) {
        Some(s) => s.pollable(),
        None => f
            .inode()
            .fs()
            .pollable(f)
            .unwrap_or_else(|| Arc::new(RegularFile)),
    }
}

/// The internal file system of pipes and anonymous files. Nothing can be looked up or
/// created in it; operations that reach it through generic paths fail as on Linux.
struct AnonFs;

const ROOT_INO: u64 = 1;

/// Next inode number: per-thread batches of [`INO_BATCH`] from one shared counter.
fn next_ino() -> u64 {
    const INO_BATCH: u64 = 1024;
    static NEXT: AtomicU64 = AtomicU64::new(ROOT_INO + 1);
    thread_local!(static RANGE: Cell<(u64, u64)> = const { Cell::new((0, 0)) });
    RANGE.with(|r| {
        let (mut next, mut end) = r.get();
        if next == end {
            // Relaxed: only uniqueness matters.
            next = NEXT.fetch_add(INO_BATCH, Ordering::Relaxed);
            end = next + INO_BATCH;
        }
        r.set((next + 1, end));
        next
    })
}

impl FileSystem for AnonFs {
    fn fs_type(&self) -> &'static str {
        "anon_inodefs"
    }
    fn fill_super(&self, sb: &SuperBlock) -> SysResult<InodeRef> {
        Ok(sb.new_inode(NewInode {
            ino: ROOT_INO,
            mode: libc::S_IFDIR | 0o500,
            uid: 0,
            gid: 0,
            nlink: 2,
            rdev: 0,
            private: Box::new(()),
        }))
    }
    fn kill_sb(&self, _root: &Inode) {}
    fn evict_inode(&self, _inode: &Inode) {}
    fn lookup(&self, _dir: &Inode, _name: &[u8]) -> SysResult<Option<InodeRef>> {
        Ok(None)
    }
    fn readdir(
        &self,
        _dir: &Inode,
        _parent_ino: u64,
        _pos: i64,
        _emit: &mut dyn FnMut(DirEmit<'_>) -> bool,
    ) -> SysResult<bool> {
        Ok(true)
    }
    fn read(&self, _: &Inode, _: u64, _: &mut [u8]) -> SysResult<usize> {
        Err(Errno::EINVAL)
    }
    fn write(&self, _: &Inode, _: u64, _: &[u8]) -> SysResult<usize> {
        Err(Errno::EINVAL)
    }
    fn setsize(&self, _: &Inode, _: u64) -> SysResult<()> {
        Err(Errno::EINVAL)
    }
    fn fallocate(&self, _: &Inode, _: i32, _: u64, _: u64) -> SysResult<()> {
        Err(Errno::ESPIPE)
    }
    fn seek_data(&self, _: &Inode, _: u64, _: bool) -> SysResult<u64> {
        Err(Errno::ESPIPE)
    }
    fn readlink(&self, _: &Inode) -> SysResult<Vec<u8>> {
        Err(Errno::EINVAL)
    }
    fn fsync(&self, _inode: &Inode) -> SysResult<()> {
        Err(Errno::EINVAL)
    }
    fn blocks(&self, _: &Inode) -> u64 {
        0
    }
    /// The description's last close: dropping the [`Special`] runs the epoll release
    /// path and the object's own release.
    fn release(&self, _inode: &Inode, private: Box<dyn Any + Send + Sync>) {
        drop(private);
    }
}

/// Per-`Vfs` state for pollable files: the epoll context and the internal mount.
pub struct PollFiles {
    ctx: Arc<EpollContext>,
    locking: Locking,
    /// Mounted on first use (a VFS that never makes a pipe has no extra dentry).
    anon: OnceLock<(MntRef, Arc<SuperBlock>)>,
}

impl PollFiles {
    pub fn new(locking: Locking) -> PollFiles {
        PollFiles {
            ctx: EpollContext::new(locking),
            locking,
            anon: OnceLock::new(),
        }
    }

    pub fn epoll_context(&self) -> &Arc<EpollContext> {
        &self.ctx
    }

    fn anon(&self, core: &VfsCore) -> &(MntRef, Arc<SuperBlock>) {
        self.anon.get_or_init(|| {
            // The device number is outside the range VfsCore hands out (from 0x20 up).
            let sb = Arc::new(SuperBlock::new(0x10, Arc::new(AnonFs), self.locking));
            let root_inode = AnonFs.fill_super(&sb).expect("anon root");
            let root = core.dcache.alloc_root(root_inode);
            // Not attached anywhere (`parent: None`): no path walk reaches it. The mount
            // table owns it and frees it with the VFS.
            let mnt = core.mounts.add(Mount::new(0, sb.clone(), root, None));
            (mnt, sb)
        })
    }

    /// A path naming a new inode of the internal file system.
    fn new_path(&self, core: &VfsCore, mode: u32, uid: u32, gid: u32) -> Path {
        let (mnt, sb) = self.anon(core);
        let inode = sb.new_inode(NewInode {
            ino: next_ino(),
            mode,
            uid,
            gid,
            nlink: 1,
            rdev: 0,
            private: Box::new(()),
        });
        Path {
            mnt: *mnt,
            dentry: core.dcache.alloc_root(inode),
        }
    }

    fn anon_file(&self, core: &VfsCore, flags: i32, s: Special) -> FileRef {
        // Linux's anonymous inode: mode 0600 without a type, owned by root.
        let path = self.new_path(core, 0o600, 0, 0);
        OpenFile::with_private(path, flags, Some(Box::new(s)))
    }
}

impl Drop for PollFiles {
    fn drop(&mut self) {
        // Inodes point at the superblock without a count: if a description outlives
        // the VFS (a leaked `FileRef`), keep the superblock rather than free it under
        // them (the root inode is counted until the mount table drops it).
        if let Some((_, sb)) = self.anon.get() {
            if sb.inode_count() > 1 {
                std::mem::forget(sb.clone());
            }
        }
    }
}

// ------------------------------------------------------------------ creation

/// A named pipe: `f`, just opened on a FIFO inode (not `O_PATH`), becomes an end of the
/// inode's pipe, after waiting for its partner as `fifo_open` does (see
/// `scalevfs_vfs::pipe::FifoSlot::open`). Any other file comes back as it is.
pub fn open_fifo(f: FileRef, cancel: Option<&CancelToken>) -> SysResult<FileRef> {
    let inode = f.inode();
    if f.is_path() || inode.file_type() != libc::S_IFIFO {
        return Ok(f);
    }
    let slot = inode.fs().fifo(inode).ok_or(Errno::ENXIO)?;
    let end = slot.open(f.flags(), cancel)?;
    Ok(OpenFile::with_private(
        f.path().clone(),
        f.flags(),
        Some(Box::new(Special::Pipe(end))),
    ))
}

pub fn pipe2(
    pf: &PollFiles,
    core: &VfsCore,
    fds: &FdTable,
    uid: u32,
    gid: u32,
    out: &mut [i32; 2],
    flags: i32,
) -> SysResult<()> {
    let (r, w) = scalevfs_vfs::pipe::pipe2(flags)?;
    let nb = flags & libc::O_NONBLOCK;
    // Both ends name one inode, as Linux's pipefs inode.
    let path = pf.new_path(core, libc::S_IFIFO | 0o600, uid, gid);
    let rf = OpenFile::with_private(
        path.clone(),
        libc::O_RDONLY | nb,
        Some(Box::new(Special::Pipe(r))),
    );
    let wf = OpenFile::with_private(path, libc::O_WRONLY | nb, Some(Box::new(Special::Pipe(w))));
    let cloexec = flags & libc::O_CLOEXEC != 0;
    let rfd = fds.alloc(0, rf, cloexec)?;
    let wfd = match fds.alloc(0, wf, cloexec) {
        Ok(fd) => fd,
        Err(e) => {
            drop(fds.close(rfd));
            return Err(e);
        }
    };
    *out = [rfd, wfd];
    Ok(())
}

pub fn eventfd(
    pf: &PollFiles,
    core: &VfsCore,
    fds: &FdTable,
    initval: u32,
    flags: i32,
) -> SysResult<i32> {
    let e = EventFd::new(initval, flags)?;
    let f = pf.anon_file(
        core,
        libc::O_RDWR | (flags & libc::O_NONBLOCK),
        Special::EventFd(e),
    );
    fds.alloc(0, f, flags & EFD_CLOEXEC != 0)
}

pub fn epoll_create1(pf: &PollFiles, core: &VfsCore, fds: &FdTable, flags: i32) -> SysResult<i32> {
    let ep = scalevfs_vfs::epoll::epoll_create1(&pf.ctx, flags)?;
    let f = pf.anon_file(core, libc::O_RDWR, Special::Epoll(ep));
    fds.alloc(0, f, flags & EPOLL_CLOEXEC != 0)
}

// ------------------------------------------------------------------ epoll

/// A descriptor usable by `epoll_ctl`/`epoll_wait` (`fdget`: `O_PATH` ones are `EBADF`).
fn get_file(fds: &FdTable, fd: i32) -> SysResult<FileRef> {
    let f = fds.get(fd)?;
    if f.is_path() {
        return Err(Errno::EBADF);
    }
    Ok(f)
}

pub fn epoll_ctl(
    pf: &PollFiles,
    fds: &FdTable,
    epfd: i32,
    op: i32,
    fd: i32,
    event: Option<&EpollEvent>,
) -> SysResult<()> {
    // Linux copies the event before looking at the descriptors.
    let ev = match event {
        Some(e) => *e,
        None if op != EPOLL_CTL_DEL => return Err(Errno::EFAULT),
        None => EpollEvent::default(),
    };
    let ef = get_file(fds, epfd)?;
    // Holding `tf` keeps the target open for the whole call, as Linux's fdget.
    let tf = get_file(fds, fd)?;
    let target = pollable_of(&tf);
    let Some(Special::Epoll(ep)) = special(&ef) else {
        // EPERM (target not pollable) comes before EINVAL (not an epoll), as Linux.
        if !target.supports_epoll() {
            return Err(Errno::EPERM);
        }
        return Err(Errno::EINVAL);
    };
    let key = FdKey {
        file: &*tf as *const OpenFile as usize,
        fd,
    };
    ep.ctl(&pf.ctx, op, key, &target, ev)
}

pub fn epoll_wait(
    fds: &FdTable,
    epfd: i32,
    events: &mut [EpollEvent],
    timeout_ms: i32,
    cancel: Option<&CancelToken>,
) -> SysResult<usize> {
    // Linux 6.15+ (`do_epoll_wait`, then `ep_check_params`): the descriptor (`EBADF`),
    // then maxevents, then that it is an epoll (both `EINVAL`).
    let ef = get_file(fds, epfd)?;
    if events.is_empty() || events.len() > (i32::MAX as usize) / 12 {
        return Err(Errno::EINVAL);
    }
    let Some(Special::Epoll(ep)) = special(&ef) else {
        return Err(Errno::EINVAL);
    };
    ep.wait(events, timeout_ms, cancel)
}

// ------------------------------------------------------------------ poll

/// `poll`: resolves each `pollfd` (negative fd: ignored; closed: `POLLNVAL`) and waits.
pub fn poll(
    fds: &FdTable,
    pfds: &mut [libc::pollfd],
    timeout_ms: i32,
    cancel: Option<&CancelToken>,
) -> SysResult<usize> {
    if pfds.len() > fds.limit() as usize {
        return Err(Errno::EINVAL);
    }
    let mut v: Vec<poll::PollFd> = pfds
        .iter()
        .map(|p| {
            let target = if p.fd < 0 {
                PollTarget::Ignore
            } else {
                // fdget: an O_PATH descriptor is as good as closed (POLLNVAL).
                match fds.get(p.fd) {
                    Ok(f) if !f.is_path() => PollTarget::File(pollable_of(&f)),
                    _ => PollTarget::BadFd,
                }
            };
            poll::PollFd::new(target, p.events as u16)
        })
        .collect();
    let r = poll::poll(&mut v, timeout_ms, cancel);
    for (p, q) in pfds.iter_mut().zip(&v) {
        p.revents = q.revents as i16;
    }
    r
}

/// `ppoll`'s timeout in poll's milliseconds, rounded up (`EINVAL` if negative or invalid).
pub fn ppoll_timeout(ts: Option<&libc::timespec>) -> SysResult<i32> {
    let Some(ts) = ts else { return Ok(-1) };
    if ts.tv_sec < 0 || !(0..1_000_000_000).contains(&ts.tv_nsec) {
        return Err(Errno::EINVAL);
    }
    let ms = (ts.tv_sec as i128) * 1000 + (ts.tv_nsec as i128 + 999_999) / 1_000_000;
    Ok(ms.min(i32::MAX as i128) as i32)
}

// ------------------------------------------------------------------ read, write, fcntl

/// `read` on a special file.
#[inline(never)]
pub fn read(
    s: &Special,
    f: &OpenFile,
    buf: &mut [u8],
    cancel: Option<&CancelToken>,
) -> SysResult<usize> {
    if !f.readable() {
        return Err(Errno::EBADF);
    }
    match s {
        Special::Pipe(p) => {
            let n = p.read(buf, cancel)?;
            // pipe_read's file_accessed, for FIFOs only (see `PipeEnd::is_fifo`).
            if n > 0 && p.is_fifo() && f.flags() & libc::O_NOATIME == 0 {
                f.inode().touch_atime();
            }
            Ok(n)
        }
        Special::EventFd(e) => e.read(buf, cancel),
        // eventpoll_fops has no read.
        Special::Epoll(_) => Err(Errno::EINVAL),
    }
}

/// `write` on a special file.
#[inline(never)]
pub fn write(
    s: &Special,
    f: &OpenFile,
    buf: &[u8],
    cancel: Option<&CancelToken>,
) -> SysResult<usize> {
    if !f.writable() {
        return Err(Errno::EBADF);
    }
    match s {
        Special::Pipe(p) => {
            let n = p.write(buf, cancel)?;
            // pipe_write's file_update_time, for FIFOs only.
            if n > 0 && p.is_fifo() {
                f.inode().file_update_time();
            }
            Ok(n)
        }
        Special::EventFd(e) => e.write(buf, cancel),
        Special::Epoll(_) => Err(Errno::EINVAL),
    }
}

/// `readv`: one read into a gathered buffer, scattered after (a pipe read is one
/// operation under the pipe lock on Linux too; an eventfd needs 8 bytes in total).
#[inline(never)]
pub fn readv(
    s: &Special,
    f: &OpenFile,
    bufs: &mut [std::io::IoSliceMut<'_>],
    cancel: Option<&CancelToken>,
) -> SysResult<usize> {
    let total: usize = bufs.iter().map(|b| b.len()).sum();
    let mut tmp = vec![0u8; total];
    let n = read(s, f, &mut tmp, cancel)?;
    let mut off = 0;
    for b in bufs.iter_mut() {
        if off == n {
            break;
        }
        let k = b.len().min(n - off);
        b[..k].copy_from_slice(&tmp[off..off + k]);
        off += k;
    }
    Ok(n)
}

/// `pread`/`pwrite`/`lseek` on a special file: pipes are not seekable; eventfd and
/// epoll use `noop_llseek` (position 0) and are not seekable for `pread`.
#[inline(never)]
pub fn seek(s: &Special) -> SysResult<i64> {
    match s {
        Special::Pipe(_) => Err(Errno::ESPIPE),
        _ => Ok(0),
    }
}

/// `F_SETFL` side effect on the file object (`O_NONBLOCK`).
pub fn setfl(s: &Special, flags: i32) {
    s.set_nonblock(flags & libc::O_NONBLOCK != 0);
}

/// `F_GETPIPE_SZ` (`arg` ignored) and `F_SETPIPE_SZ`; `EBADF` on non-pipes, as Linux.
pub fn pipe_size(f: &OpenFile, set: Option<i64>, privileged: bool) -> SysResult<i32> {
    let Some(Special::Pipe(p)) = special(f) else {
        return Err(Errno::EBADF);
    };
    match set {
        None => Ok(p.pipe_size() as i32),
        Some(arg) => {
            // Linux takes the argument as an unsigned int.
            let arg = arg as u32;
            // Linux returns the new size as a long; a 2 GiB ring (what round_pipe_size
            // makes of (2^30, 2^31]) does not fit our i32: refuse it as a failed
            // allocation (ENOMEM, where only CAP_SYS_RESOURCE gets that far) rather than
            // return a negative size.
            if privileged && arg > 1 << 30 && arg <= 1 << 31 {
                return Err(Errno::ENOMEM);
            }
            Ok(p.set_pipe_size(arg, privileged)? as i32)
        }
    }
}
