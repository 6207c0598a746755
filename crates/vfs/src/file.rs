//! Open file descriptions (`struct file`).
//!
//! An [`OpenFile`] holds the path it was opened by, its status flags (atomic: `F_SETFL`
//! changes them while other threads read), its access mode, and its position behind a
//! per-file lock (`f_pos_lock`): read, write, lseek and getdents64 on one description are
//! serialized, as Linux does for shared descriptions; different descriptions never share it.
//! [`FileRef`] is an [`Erc`]: the last `close` releases the path (and so the dentry and
//! inode) at once. Its memory is *type-stable* (see [`crate::erc`]): the block goes to a
//! per-thread cache and the thread's next open reuses it at once, while only blocks the
//! cache has no room for are freed, after an epoch grace period (fd lookup reads the slot
//! without a lock). So fd lookup, having counted the file, checks that the slot still
//! holds it, as Linux's `get_file_rcu` does since `struct file` became
//! `SLAB_TYPESAFE_BY_RCU`.
//!
//! Lock order: `pos` -> inode `rwsem`.

use crate::erc::{Erc, Release, TypeStableCache};
use crate::inode::Inode;
use crate::mount::write::KeptWriteAccess;
use crate::mount::Path;
use parking_lot::Mutex;
use std::any::Any;
use std::cell::UnsafeCell;
use std::mem::ManuallyDrop;
use std::sync::atomic::{AtomicI32, Ordering};
use std::thread::LocalKey;

thread_local! {
    /// This thread's free `OpenFile` blocks (see the module docs).
    static OPEN_FILE_BLOCKS: TypeStableCache<OpenFile> = const { TypeStableCache::new() };
}

/// A counted open file description.
pub type FileRef = Erc<OpenFile>;

/// Status flags `F_SETFL` may change.
pub const SETFL_MASK: i32 =
    libc::O_APPEND | libc::O_NONBLOCK | libc::O_NOATIME | libc::O_DIRECT | libc::O_ASYNC;

/// See the module docs.
pub struct OpenFile {
    path: UnsafeCell<ManuallyDrop<Path>>,
    /// The open flags that stay (access mode, O_APPEND, O_NONBLOCK, O_PATH, ...).
    flags: AtomicI32,
    /// Position (bytes for files, the readdir cookie for directories).
    pub pos: Mutex<i64>,
    /// The file system's per-open state (`FileSystem::open`), taken back by `release`.
    private: UnsafeCell<Option<Box<dyn Any + Send + Sync>>>,
    /// It holds a write access on its superblock until `release` (Linux's
    /// `FMODE_WRITER`): a regular file opened for writing.
    writer: bool,
}

// SAFETY: `path` is only written by `release`, when no other reference exists.
unsafe impl Sync for OpenFile {}
// SAFETY: as above.
unsafe impl Send for OpenFile {}

impl OpenFile {
    /// An open file description of `path` with open flags `flags`.
    pub fn new(path: Path, flags: i32) -> FileRef {
        Self::with_private(path, flags, None)
    }

    /// An open file with the file system's per-open state.
    pub fn with_private(
        path: Path,
        flags: i32,
        private: Option<Box<dyn Any + Send + Sync>>,
    ) -> FileRef {
        Self::make(path, flags, private, false)
    }

    /// An open file that keeps `access`, a write access on its superblock, until its
    /// last close (a regular file opened for writing: `mount::write`).
    pub(crate) fn writer(
        path: Path,
        flags: i32,
        private: Option<Box<dyn Any + Send + Sync>>,
        access: KeptWriteAccess,
    ) -> FileRef {
        debug_assert!(std::ptr::eq(
            access.sb,
            path.dentry.inode().expect("open files are positive").sb()
        ));
        access.into_file();
        Self::make(path, flags, private, true)
    }

    fn make(
        path: Path,
        flags: i32,
        private: Option<Box<dyn Any + Send + Sync>>,
        writer: bool,
    ) -> FileRef {
        debug_assert!(path.dentry.inode().is_some());
        debug_assert!(
            writer
                || !(path.dentry.inode().is_some_and(|i| i.is_reg())
                    && matches!(flags & libc::O_ACCMODE, libc::O_WRONLY | libc::O_RDWR)),
            "a regular file open for writing holds a write access (OpenFile::writer)"
        );
        Erc::new(OpenFile {
            path: UnsafeCell::new(ManuallyDrop::new(path)),
            flags: AtomicI32::new(
                flags
                    & !(libc::O_CREAT
                        | libc::O_EXCL
                        | libc::O_TRUNC
                        | libc::O_CLOEXEC
                        | libc::O_NOCTTY),
            ),
            pos: Mutex::new(0),
            private: UnsafeCell::new(private),
            writer,
        })
    }
    /// Where the file was opened.
    pub fn path(&self) -> &Path {
        // SAFETY: the path is taken only in `release`, after the last reference is gone.
        unsafe { &*self.path.get() }
    }
    /// The file's inode.
    pub fn inode(&self) -> &Inode {
        self.path().dentry.inode().expect("open files are positive")
    }
    /// The file system's per-open state, downcast.
    pub fn private<T: 'static>(&self) -> Option<&T> {
        // SAFETY: written only at creation and in `release` (no other reference then).
        unsafe { &*self.private.get() }
            .as_ref()
            .and_then(|b| b.downcast_ref::<T>())
    }
    /// The open flags (`O_ACCMODE` and status flags).
    pub fn flags(&self) -> i32 {
        self.flags.load(Ordering::Relaxed)
    }
    /// `F_SETFL`: replaces the changeable status flags.
    pub fn set_status_flags(&self, f: i32) {
        let _ = self
            .flags
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |old| {
                Some((old & !SETFL_MASK) | (f & SETFL_MASK))
            });
    }
    /// This open file description's identity as a lock owner (OFD and flock locks) and
    /// in epoll's keys: its address, unique among live descriptions. A later description
    /// may reuse it (the memory is type-stable), but only after `release` has dropped
    /// every lock it owned and every epoll item watching it.
    pub fn lock_id(&self) -> u64 {
        self as *const OpenFile as u64
    }
    /// Whether it was opened with `O_PATH` (no I/O).
    pub fn is_path(&self) -> bool {
        self.flags() & libc::O_PATH != 0
    }
    /// Whether it was opened for reading.
    pub fn readable(&self) -> bool {
        !self.is_path()
            && matches!(
                self.flags() & libc::O_ACCMODE,
                libc::O_RDONLY | libc::O_RDWR
            )
    }
    /// Whether it was opened for writing.
    pub fn writable(&self) -> bool {
        !self.is_path()
            && matches!(
                self.flags() & libc::O_ACCMODE,
                libc::O_WRONLY | libc::O_RDWR
            )
    }
}

impl Release for OpenFile {
    fn type_stable_cache() -> Option<&'static LocalKey<TypeStableCache<Self>>> {
        Some(&OPEN_FILE_BLOCKS)
    }

    fn release(&self) {
        // The last close of the description drops its OFD and flock locks (Linux's
        // `locks_remove_file` in `__fput`), before the path (and maybe the inode) goes.
        if let Some(ctx) = self.inode().lock_ctx.get() {
            ctx.manager().release_file(ctx, self.lock_id());
        }
        // SAFETY: the last reference is gone (Erc calls release once); nobody else can reach
        // the private state or the path any more, so we may take them.
        if let Some(p) = unsafe { (*self.private.get()).take() } {
            let inode = self.inode();
            inode.fs().release(inode, p);
        }
        // `__fput`'s `put_file_access`: a remount read-only may succeed from now on.
        if self.writer {
            self.inode().sb().put_write_access();
        }
        // Linux's `__fput` ends with `mntput`, which clears an `MNT_EXPIRE` mark.
        self.path().mnt.note_use();
        // SAFETY: as above.
        unsafe { ManuallyDrop::drop(&mut *self.path.get()) };
    }
}
