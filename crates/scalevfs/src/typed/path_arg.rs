//! [`PathArg`]: what every call taking a path takes (the system calls of
//! [`Process`](crate::Process), the typed layer, [`ProcessBuilder`](crate::ProcessBuilder)):
//! a [`std::path::Path`] (and what borrows as one: `&str`, `String`, `PathBuf`, `OsStr`)
//! or a byte string (`&[u8]`, `b"..."`, `Vec<u8>`), also behind `Box`, `Rc`, `Arc` or
//! `Cow`. Linux paths are bytes; nothing is decoded or checked for UTF-8.

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// A path as the bytes Linux sees.
pub trait PathArg {
    /// The path's bytes (no NUL).
    fn path_bytes(&self) -> &[u8];
}

impl<T: PathArg + ?Sized> PathArg for &T {
    fn path_bytes(&self) -> &[u8] {
        (**self).path_bytes()
    }
}

impl<T: PathArg + ?Sized> PathArg for Box<T> {
    fn path_bytes(&self) -> &[u8] {
        (**self).path_bytes()
    }
}

impl<T: PathArg + ?Sized> PathArg for std::rc::Rc<T> {
    fn path_bytes(&self) -> &[u8] {
        (**self).path_bytes()
    }
}

impl<T: PathArg + ?Sized> PathArg for std::sync::Arc<T> {
    fn path_bytes(&self) -> &[u8] {
        (**self).path_bytes()
    }
}

impl<T: PathArg + ToOwned + ?Sized> PathArg for std::borrow::Cow<'_, T> {
    fn path_bytes(&self) -> &[u8] {
        (**self).path_bytes()
    }
}

/// `PathArg` for types whose bytes one expression gives.
macro_rules! path_arg {
    ($($ty:ty => |$p:ident| $bytes:expr;)*) => {$(
        impl PathArg for $ty {
            fn path_bytes(&self) -> &[u8] {
                let $p = self;
                $bytes
            }
        }
    )*};
}

path_arg! {
    [u8] => |p| p;
    Vec<u8> => |p| p;
    str => |p| p.as_bytes();
    String => |p| p.as_bytes();
    OsStr => |p| p.as_bytes();
    OsString => |p| p.as_bytes();
    Path => |p| p.as_os_str().as_bytes();
    PathBuf => |p| p.as_os_str().as_bytes();
}

impl<const N: usize> PathArg for [u8; N] {
    fn path_bytes(&self) -> &[u8] {
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes(p: impl PathArg) -> Vec<u8> {
        p.path_bytes().to_vec()
    }

    #[test]
    fn every_spelling_gives_the_same_bytes() {
        let want = b"/a/\xffb".to_vec();
        let os = OsStr::from_bytes(&want);
        assert_eq!(bytes(b"/a/\xffb"), want);
        assert_eq!(bytes(&want[..]), want);
        assert_eq!(bytes(want.clone()), want);
        assert_eq!(bytes(os), want);
        assert_eq!(bytes(Path::new(os)), want);
        assert_eq!(bytes(PathBuf::from(os)), want);
        assert_eq!(bytes(os.to_os_string()), want);
        assert_eq!(bytes("/a/b"), b"/a/b");
        assert_eq!(bytes(String::from("/a/b")), b"/a/b");
        assert_eq!(bytes(std::borrow::Cow::Borrowed(&want[..])), want);
        assert_eq!(bytes(Box::<[u8]>::from(&want[..])), want);
        assert_eq!(bytes(std::sync::Arc::<Path>::from(Path::new(os))), want);
    }
}
