//! [`OpenOptions`]: `std::fs::OpenOptions`'s builder, turned into `open(2)` flags.

use super::dir::Dir;
use super::file::File;
use super::flags::{Mode, OFlags};
use super::path_arg::PathArg;
use crate::{Errno, SysResult};

/// How to open a file, as `std::fs::OpenOptions` says it; [`Dir::open_with`] (or
/// [`open`](Self::open)) opens it. Files are always opened close-on-exec.
#[derive(Clone, Debug)]
pub struct OpenOptions {
    read: bool,
    write: bool,
    append: bool,
    truncate: bool,
    create: bool,
    create_new: bool,
    mode: Mode,
    custom: OFlags,
}

impl Default for OpenOptions {
    fn default() -> OpenOptions {
        OpenOptions::new()
    }
}

impl OpenOptions {
    /// Nothing set; the creation mode is `0o666` (less the umask).
    pub fn new() -> OpenOptions {
        OpenOptions {
            read: false,
            write: false,
            append: false,
            truncate: false,
            create: false,
            create_new: false,
            mode: Mode::octal(0o666),
            custom: OFlags::empty(),
        }
    }
    /// Opens for reading (`O_RDONLY`, or `O_RDWR` with writing).
    pub fn read(&mut self, on: bool) -> &mut OpenOptions {
        self.read = on;
        self
    }
    /// Opens for writing (`O_WRONLY`, or `O_RDWR` with reading).
    pub fn write(&mut self, on: bool) -> &mut OpenOptions {
        self.write = on;
        self
    }
    /// `O_APPEND` (implies writing).
    pub fn append(&mut self, on: bool) -> &mut OpenOptions {
        self.append = on;
        self
    }
    /// `O_TRUNC`.
    pub fn truncate(&mut self, on: bool) -> &mut OpenOptions {
        self.truncate = on;
        self
    }
    /// `O_CREAT`.
    pub fn create(&mut self, on: bool) -> &mut OpenOptions {
        self.create = on;
        self
    }
    /// `O_CREAT | O_EXCL`: `EEXIST` if the name exists (a symlink included).
    pub fn create_new(&mut self, on: bool) -> &mut OpenOptions {
        self.create_new = on;
        self
    }
    /// The mode of a created file (the umask applies).
    pub fn mode(&mut self, mode: Mode) -> &mut OpenOptions {
        self.mode = mode;
        self
    }
    /// More flags (`O_NOFOLLOW`, `O_NONBLOCK`, ...); the access-mode bits are ignored.
    pub fn custom_flags(&mut self, flags: OFlags) -> &mut OpenOptions {
        self.custom = flags - (OFlags::WRONLY | OFlags::RDWR);
        self
    }
    /// Opens `path` under `dir` (see [`Dir::open_with`]).
    pub fn open<'p>(&self, dir: &Dir<'p>, path: impl PathArg) -> SysResult<File<'p>> {
        dir.open_with(path, self)
    }
    /// The `open(2)` flags and mode; `EINVAL` for the combinations `std` refuses (no
    /// access mode; creating or truncating without writing; truncating in append mode).
    pub fn flags(&self) -> SysResult<(OFlags, Mode)> {
        let writes = self.write || self.append;
        let mut flags = match (self.read, writes) {
            (true, false) => OFlags::empty(),
            (false, true) => OFlags::WRONLY,
            (true, true) => OFlags::RDWR,
            (false, false) => return Err(Errno::EINVAL),
        };
        if !writes && (self.truncate || self.create || self.create_new) {
            return Err(Errno::EINVAL);
        }
        if self.truncate && self.append && !self.create_new {
            return Err(Errno::EINVAL);
        }
        flags.set(OFlags::APPEND, self.append);
        flags.set(OFlags::TRUNC, self.truncate);
        flags.set(OFlags::CREAT, self.create || self.create_new);
        flags.set(OFlags::EXCL, self.create_new);
        Ok((flags | self.custom | OFlags::CLOEXEC, self.mode))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn access_modes_and_refusals_follow_std() {
        let f = |o: &OpenOptions| o.flags().map(|(f, _)| f - OFlags::CLOEXEC);
        assert_eq!(f(OpenOptions::new().read(true)), Ok(OFlags::empty()));
        assert_eq!(f(OpenOptions::new().write(true)), Ok(OFlags::WRONLY));
        assert_eq!(
            f(OpenOptions::new().read(true).append(true)),
            Ok(OFlags::RDWR | OFlags::APPEND)
        );
        assert_eq!(
            f(OpenOptions::new().write(true).create_new(true)),
            Ok(OFlags::WRONLY | OFlags::CREAT | OFlags::EXCL)
        );
        assert_eq!(f(&OpenOptions::new()), Err(Errno::EINVAL));
        assert_eq!(
            f(OpenOptions::new().read(true).create(true)),
            Err(Errno::EINVAL)
        );
        assert_eq!(
            f(OpenOptions::new().append(true).truncate(true)),
            Err(Errno::EINVAL)
        );
        assert_eq!(
            f(OpenOptions::new()
                .read(true)
                .custom_flags(OFlags::RDWR | OFlags::NOFOLLOW)),
            Ok(OFlags::NOFOLLOW),
            "custom flags cannot change the access mode"
        );
    }
}
