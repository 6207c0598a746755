//! [`Dir`]: an open directory of a [`Process`] that names files only beneath itself, in
//! the shape of cap-std's `Dir`; and [`ReadDir`], its entries as an iterator.
//!
//! ## Confinement
//! Every path is resolved from the directory with `openat2`'s [`ResolveFlags::BENEATH`]
//! (a path that would leave it, by `..`, an absolute path or a symlink, is `EXDEV`), or
//! with [`ResolveFlags::IN_ROOT`] for a directory made with
//! [`in_root`](Dir::in_root) (`..` and absolute paths stop at it, as at a `chroot`).
//!
//! The calls with no `openat2` form (`mkdirat`, `unlinkat`, `renameat2`, `linkat`,
//! `symlinkat`) open the *parent* of the last component confined (`O_PATH`) and then act
//! on the last component in it. None of them follows a final symlink, and Linux refuses
//! a final `.` or `..` in each of them before looking it up, so the name they act on is
//! inside the directory. What follows the final component (`metadata`, `read_link`,
//! `set_permissions`, opening) goes through a confined `openat2` of the whole path.

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::PathBuf;

use super::file::{Descriptor, File};
use super::flags::{AtFlags, FileType, Mode, OFlags, RenameFlags, ResolveFlags};
use super::open_options::OpenOptions;
use super::path_arg::PathArg;
use super::stat::Metadata;
use crate::{Errno, OpenHow, Process, SysResult};

/// An open directory through which files beneath it are named (see the module docs).
/// Closed on drop.
pub struct Dir<'p> {
    proc: &'p Process,
    fd: i32,
    resolve: ResolveFlags,
}

impl std::fmt::Debug for Dir<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dir")
            .field("pid", &self.proc.pid())
            .field("fd", &self.fd)
            .field("resolve", &self.resolve)
            .finish()
    }
}

impl Drop for Dir<'_> {
    fn drop(&mut self) {
        // The descriptor is ours; a close error has no one to go to.
        let _ = self.proc.close(self.fd);
    }
}

impl Descriptor for Dir<'_> {
    fn process(&self) -> &Process {
        self.proc
    }
    fn fd(&self) -> i32 {
        self.fd
    }
}

/// The flags every directory handle is opened with.
const DIR_FLAGS: OFlags = OFlags::DIRECTORY.union(OFlags::CLOEXEC);
/// The flags of the `O_PATH` handles on parents and targets.
const PATH_FLAGS: OFlags = OFlags::PATH.union(OFlags::CLOEXEC);

impl<'p> Dir<'p> {
    /// Opens the directory at `path` as `proc` resolves paths (from its cwd or root,
    /// unconfined): where a `Dir` gets its authority from. It confines with
    /// `RESOLVE_BENEATH`.
    pub fn open_ambient(proc: &'p Process, path: impl PathArg) -> SysResult<Dir<'p>> {
        let fd = proc.openat(libc::AT_FDCWD, path.path_bytes(), DIR_FLAGS.bits(), 0)?;
        Ok(Dir {
            proc,
            fd,
            resolve: ResolveFlags::BENEATH,
        })
    }
    /// This directory, resolving with `RESOLVE_IN_ROOT` rather than `RESOLVE_BENEATH`:
    /// absolute paths and `..` stop at it instead of failing with `EXDEV`.
    pub fn in_root(mut self) -> Dir<'p> {
        self.resolve = ResolveFlags::IN_ROOT;
        self
    }
    /// How this directory confines the paths it resolves.
    pub fn resolve_flags(&self) -> ResolveFlags {
        self.resolve
    }
    /// The process whose descriptor this is.
    pub fn process(&self) -> &'p Process {
        self.proc
    }
    /// A confined `openat2` of `path`; the descriptor is owned by the caller.
    fn openat2(&self, path: &[u8], flags: OFlags, mode: Mode) -> SysResult<i32> {
        // An absolute path under RESOLVE_BENEATH is EXDEV in openat2 itself. openat2
        // refuses a mode unless the call may create (`EINVAL`).
        let creates = flags.intersects(OFlags::CREAT | OFlags::TMPFILE);
        let how = OpenHow {
            flags: u64::from(flags.bits().cast_unsigned()),
            mode: if creates { u64::from(mode.bits()) } else { 0 },
            resolve: self.resolve.bits(),
        };
        self.proc.openat2(self.fd, path, &how)
    }
    /// Runs `op(dirfd, name)` with `dirfd` the confined parent of `path`'s last component
    /// and `name` that component (trailing slashes kept, as the raw calls want them).
    fn in_parent<R>(
        &self,
        path: &[u8],
        op: impl FnOnce(i32, &[u8]) -> SysResult<R>,
    ) -> SysResult<R> {
        if path.is_empty() {
            return Err(Errno::ENOENT);
        }
        let trimmed = path.len() - path.iter().rev().take_while(|&&b| b == b'/').count();
        match path[..trimmed].iter().rposition(|&b| b == b'/') {
            None if trimmed > 0 => op(self.fd, path),
            // "/" (or "//..."): the root itself, as the name ".".
            None => {
                let parent =
                    File::from_fd(self.proc, self.openat2(b"/", PATH_FLAGS, Mode::empty())?);
                op(parent.fd(), b".")
            }
            Some(slash) => {
                let fd = self.openat2(
                    &path[..=slash],
                    PATH_FLAGS | OFlags::DIRECTORY,
                    Mode::empty(),
                )?;
                let parent = File::from_fd(self.proc, fd);
                op(parent.fd(), &path[slash + 1..])
            }
        }
    }
    /// A confined `O_PATH` handle on `path` (following a final symlink unless `nofollow`).
    fn open_path(&self, path: &[u8], nofollow: bool) -> SysResult<File<'p>> {
        let mut flags = PATH_FLAGS;
        flags.set(OFlags::NOFOLLOW, nofollow);
        Ok(File::from_fd(
            self.proc,
            self.openat2(path, flags, Mode::empty())?,
        ))
    }

    /// Opens the file at `path` for reading.
    pub fn open(&self, path: impl PathArg) -> SysResult<File<'p>> {
        self.open_with(path, OpenOptions::new().read(true))
    }
    /// Opens (or creates) the file at `path` as `options` say.
    pub fn open_with(&self, path: impl PathArg, options: &OpenOptions) -> SysResult<File<'p>> {
        let (flags, mode) = options.flags()?;
        Ok(File::from_fd(
            self.proc,
            self.openat2(path.path_bytes(), flags, mode)?,
        ))
    }
    /// Creates (or truncates) the file at `path` for writing, mode `0o666` less the umask.
    pub fn create(&self, path: impl PathArg) -> SysResult<File<'p>> {
        self.open_with(
            path,
            OpenOptions::new().write(true).create(true).truncate(true),
        )
    }
    /// Opens the directory at `path`, confined as this one is.
    pub fn open_dir(&self, path: impl PathArg) -> SysResult<Dir<'p>> {
        let fd = self.openat2(path.path_bytes(), DIR_FLAGS, Mode::empty())?;
        Ok(Dir {
            proc: self.proc,
            fd,
            resolve: self.resolve,
        })
    }
    /// A second handle on this directory.
    pub fn try_clone(&self) -> SysResult<Dir<'p>> {
        self.open_dir(".")
    }
    /// `mkdirat`, mode `0o777` less the umask.
    pub fn create_dir(&self, path: impl PathArg) -> SysResult<()> {
        self.create_dir_with_mode(path, Mode::RWXU | Mode::RWXG | Mode::RWXO)
    }
    /// `mkdirat` with `mode` (less the umask).
    pub fn create_dir_with_mode(&self, path: impl PathArg, mode: Mode) -> SysResult<()> {
        self.in_parent(path.path_bytes(), |fd, name| {
            self.proc.mkdirat(fd, name, mode.bits())
        })
    }
    /// Creates `path` and every missing directory above it (existing directories are
    /// fine; anything else in the way is `EEXIST`/`ENOTDIR`).
    pub fn create_dir_all(&self, path: impl PathArg) -> SysResult<()> {
        let path = path.path_bytes();
        let mut end = 0;
        while end < path.len() {
            end += path[end..]
                .iter()
                .position(|&b| b == b'/')
                .map_or(path.len() - end, |i| i + 1);
            let prefix = &path[..end];
            if prefix.iter().all(|&b| b == b'/') {
                continue;
            }
            match self.create_dir(prefix) {
                Err(Errno::EEXIST) if self.metadata(prefix)?.is_dir() => {}
                r => r?,
            }
        }
        Ok(())
    }
    /// `unlinkat`: removes a non-directory.
    pub fn remove_file(&self, path: impl PathArg) -> SysResult<()> {
        self.in_parent(path.path_bytes(), |fd, name| {
            self.proc.unlinkat(fd, name, 0)
        })
    }
    /// `unlinkat(AT_REMOVEDIR)`: removes an empty directory.
    pub fn remove_dir(&self, path: impl PathArg) -> SysResult<()> {
        self.in_parent(path.path_bytes(), |fd, name| {
            self.proc.unlinkat(fd, name, AtFlags::REMOVEDIR.bits())
        })
    }
    /// `renameat2(from, to_dir/to)`.
    pub fn rename(&self, from: impl PathArg, to_dir: &Dir<'_>, to: impl PathArg) -> SysResult<()> {
        self.rename_with(from, to_dir, to, RenameFlags::empty())
    }
    /// `renameat2` with `flags` (`NOREPLACE`, `EXCHANGE`, `WHITEOUT`).
    pub fn rename_with(
        &self,
        from: impl PathArg,
        to_dir: &Dir<'_>,
        to: impl PathArg,
        flags: RenameFlags,
    ) -> SysResult<()> {
        self.in_parent(from.path_bytes(), |ofd, oname| {
            to_dir.in_parent(to.path_bytes(), |nfd, nname| {
                self.proc.renameat2(ofd, oname, nfd, nname, flags.bits())
            })
        })
    }
    /// `linkat`: a new name `dst` (under `dst_dir`) for the file `src` (not following a
    /// symlink).
    pub fn hard_link(
        &self,
        src: impl PathArg,
        dst_dir: &Dir<'_>,
        dst: impl PathArg,
    ) -> SysResult<()> {
        self.in_parent(src.path_bytes(), |ofd, oname| {
            dst_dir.in_parent(dst.path_bytes(), |nfd, nname| {
                self.proc.linkat(ofd, oname, nfd, nname, 0)
            })
        })
    }
    /// `symlinkat`: a symlink at `link` whose target is `original` (stored as given).
    pub fn symlink(&self, original: impl PathArg, link: impl PathArg) -> SysResult<()> {
        self.in_parent(link.path_bytes(), |fd, name| {
            self.proc.symlinkat(original.path_bytes(), fd, name)
        })
    }
    /// The target of the symlink at `path`.
    pub fn read_link(&self, path: impl PathArg) -> SysResult<PathBuf> {
        let link = self.open_path(path.path_bytes(), true)?;
        let mut buf = vec![0u8; scalevfs_vfs::namei::PATH_MAX];
        let n = self.proc.readlinkat(link.fd(), b"", &mut buf)?;
        buf.truncate(n);
        Ok(PathBuf::from(OsString::from_vec(buf)))
    }
    /// `stat` of `path`, following a final symlink (confined as every walk is).
    pub fn metadata(&self, path: impl PathArg) -> SysResult<Metadata> {
        self.open_path(path.path_bytes(), false)?.metadata()
    }
    /// `lstat` of `path`: a final symlink itself.
    pub fn symlink_metadata(&self, path: impl PathArg) -> SysResult<Metadata> {
        self.open_path(path.path_bytes(), true)?.metadata()
    }
    /// Whether `path` names something (following symlinks); errors other than "not
    /// there" count as there.
    pub fn exists(&self, path: impl PathArg) -> bool {
        !matches!(self.metadata(path), Err(Errno::ENOENT | Errno::ENOTDIR))
    }
    /// `chmod` of `path` (following a final symlink).
    pub fn set_permissions(&self, path: impl PathArg, mode: Mode) -> SysResult<()> {
        let target = self.open_path(path.path_bytes(), false)?;
        self.proc
            .fchmodat(target.fd(), b"", mode.bits(), AtFlags::EMPTY_PATH.bits())
    }
    /// The whole content of the file at `path`.
    pub fn read(&self, path: impl PathArg) -> SysResult<Vec<u8>> {
        let f = self.open(path)?;
        let mut out = Vec::new();
        let mut buf = vec![0u8; 65536];
        loop {
            match self.proc.read(f.fd(), &mut buf)? {
                0 => return Ok(out),
                n => out.extend_from_slice(&buf[..n]),
            }
        }
    }
    /// Creates (or truncates) the file at `path` with `data`; a write that makes no
    /// progress is `EIO`.
    pub fn write(&self, path: impl PathArg, data: &[u8]) -> SysResult<()> {
        let f = self.create(path)?;
        let mut rest = data;
        while !rest.is_empty() {
            match self.proc.write(f.fd(), rest)? {
                0 => return Err(Errno::EIO),
                n => rest = &rest[n.min(rest.len())..],
            }
        }
        Ok(())
    }
    /// The entries of the directory at `path` (without `.` and `..`).
    pub fn read_dir(&self, path: impl PathArg) -> SysResult<ReadDir<'p>> {
        Ok(ReadDir::new(self.open_dir(path)?))
    }
    /// The entries of this directory (without `.` and `..`), from the start.
    pub fn entries(&self) -> SysResult<ReadDir<'p>> {
        self.read_dir(".")
    }
}

/// One entry of a directory listing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    name: OsString,
    ino: u64,
    file_type: FileType,
}

impl Entry {
    /// The entry's name (one component, bytes as stored).
    pub fn file_name(&self) -> &OsStr {
        &self.name
    }
    /// The inode number `getdents64` reported.
    pub fn ino(&self) -> u64 {
        self.ino
    }
    /// The type `getdents64` reported (no `stat` is made).
    pub fn file_type(&self) -> FileType {
        self.file_type
    }
}

/// A directory's entries, read with `getdents64` a buffer at a time.
pub struct ReadDir<'p> {
    dir: Dir<'p>,
    pending: std::vec::IntoIter<crate::DirEntry>,
    done: bool,
}

impl<'p> ReadDir<'p> {
    fn new(dir: Dir<'p>) -> ReadDir<'p> {
        ReadDir {
            dir,
            pending: Vec::new().into_iter(),
            done: false,
        }
    }
}

impl Iterator for ReadDir<'_> {
    type Item = SysResult<Entry>;
    fn next(&mut self) -> Option<SysResult<Entry>> {
        loop {
            if let Some(e) = self.pending.next() {
                if e.name == b"." || e.name == b".." {
                    continue;
                }
                return Some(Ok(Entry {
                    file_type: FileType::from_dirent(e.d_type),
                    ino: e.ino,
                    name: OsStr::from_bytes(&e.name).to_os_string(),
                }));
            }
            if self.done {
                return None;
            }
            let mut buf = vec![0u8; 8192];
            match self.dir.proc.getdents64(self.dir.fd, &mut buf) {
                Ok(0) => self.done = true,
                Ok(n) => self.pending = scalevfs_vfs::core::decode_dirents(&buf[..n]).into_iter(),
                Err(e) => {
                    self.done = true;
                    return Some(Err(e));
                }
            }
        }
    }
}
