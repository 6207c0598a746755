//! Linux error numbers.
//!
//! Every fallible call in scalevfs returns `Result<T, Errno>` with the value Linux would
//! return on tmpfs, so an embedder can hand it straight back to a guest as `-errno`.

use std::fmt;

/// A Linux `errno` value (positive, as in `errno.h`).
#[derive(Copy, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Errno(pub i32);

/// Shorthand for results of system-call-shaped functions.
pub type SysResult<T> = Result<T, Errno>;

macro_rules! errnos {
    ($($name:ident),* $(,)?) => {
        impl Errno {
            $(
                #[doc = concat!("`", stringify!($name), "`")]
                pub const $name: Errno = Errno(libc::$name);
            )*

            /// The symbolic name (`"ENOENT"`), or `None` for a value this table lacks.
            pub fn name(self) -> Option<&'static str> {
                match self.0 {
                    $(libc::$name => Some(stringify!($name)),)*
                    _ => None,
                }
            }
        }
    };
}

errnos!(
    EPERM,
    ENOENT,
    ESRCH,
    EINTR,
    EIO,
    ENXIO,
    E2BIG,
    ENOEXEC,
    EBADF,
    ECHILD,
    EAGAIN,
    ENOMEM,
    EACCES,
    EFAULT,
    ENOTBLK,
    EBUSY,
    EEXIST,
    EXDEV,
    ENODEV,
    ENOTDIR,
    EISDIR,
    EINVAL,
    ENFILE,
    EMFILE,
    ENOTTY,
    ETXTBSY,
    EFBIG,
    ENOSPC,
    ESPIPE,
    EROFS,
    EMLINK,
    EPIPE,
    EDOM,
    ERANGE,
    EDEADLK,
    ENAMETOOLONG,
    ENOLCK,
    ENOSYS,
    ENOTEMPTY,
    ELOOP,
    ENODATA,
    ENOPKG,
    EOVERFLOW,
    EOPNOTSUPP,
    ESTALE,
    ETIMEDOUT,
    ECANCELED,
    EBADFD,
    ENOTSOCK,
    EDQUOT,
);

impl Errno {
    /// `ENOTSUP` is `EOPNOTSUPP` on Linux.
    pub const ENOTSUP: Errno = Errno::EOPNOTSUPP;
    /// `EWOULDBLOCK` is `EAGAIN` on Linux.
    pub const EWOULDBLOCK: Errno = Errno::EAGAIN;

    /// The raw positive value.
    pub fn raw(self) -> i32 {
        self.0
    }

    /// The errno left in the calling thread by the last failing libc call (used by tests and
    /// benchmarks that run the same operation on the host kernel).
    pub fn last_os_error() -> Errno {
        Errno(
            std::io::Error::last_os_error()
                .raw_os_error()
                .unwrap_or(libc::EIO),
        )
    }
}

impl fmt::Debug for Errno {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(n) => f.write_str(n),
            None => write!(f, "Errno({})", self.0),
        }
    }
}

impl fmt::Display for Errno {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let msg = std::io::Error::from_raw_os_error(self.0);
        write!(f, "{self:?}: {msg}")
    }
}

impl std::error::Error for Errno {}

impl From<Errno> for std::io::Error {
    fn from(e: Errno) -> Self {
        std::io::Error::from_raw_os_error(e.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_values_match_libc() {
        assert_eq!(Errno::ENOENT.raw(), 2);
        assert_eq!(format!("{:?}", Errno::EDEADLK), "EDEADLK");
        assert_eq!(Errno(9999).name(), None);
        assert!(Errno::EACCES.to_string().contains("Permission denied"));
    }
}
