//! Directory listings: READDIR's `fuse_dirent` records and READDIRPLUS's
//! `fuse_direntplus` (an entry, then the dirent), each padded to 8 bytes, packed into
//! at most the size the kernel asked for.

use zerocopy::IntoBytes;

use super::abi;

/// A reply buffer of directory entries of at most `max` bytes.
pub struct DirentBuf {
    buf: Vec<u8>,
    max: usize,
}

fn padded(len: usize) -> usize {
    len.div_ceil(8) * 8
}

impl DirentBuf {
    /// An empty buffer that holds at most `max` bytes of entries (the READDIR `size`).
    pub fn new(max: usize) -> DirentBuf {
        DirentBuf {
            buf: Vec::with_capacity(max.min(64 * 1024)),
            max,
        }
    }

    /// Appends a READDIR entry; `false` (nothing appended) if it does not fit.
    /// `off` is the cookie of the *next* entry.
    pub fn push(&mut self, ino: u64, off: u64, typ: u32, name: &[u8]) -> bool {
        self.push_with(None, ino, off, typ, name)
    }

    /// Appends a READDIRPLUS entry; `false` (nothing appended) if it does not fit.
    pub fn push_plus(
        &mut self,
        entry: &abi::EntryOut,
        ino: u64,
        off: u64,
        typ: u32,
        name: &[u8],
    ) -> bool {
        self.push_with(Some(entry), ino, off, typ, name)
    }

    /// Whether an entry named `name` would still fit (READDIRPLUS checks before it
    /// counts a lookup for the entry).
    pub fn fits(&self, plus: bool, name: &[u8]) -> bool {
        self.buf.len() + Self::record_len(plus, name) <= self.max
    }

    fn record_len(plus: bool, name: &[u8]) -> usize {
        let entry = if plus {
            std::mem::size_of::<abi::EntryOut>()
        } else {
            0
        };
        entry + padded(std::mem::size_of::<abi::Dirent>() + name.len())
    }

    fn push_with(
        &mut self,
        entry: Option<&abi::EntryOut>,
        ino: u64,
        off: u64,
        typ: u32,
        name: &[u8],
    ) -> bool {
        if !self.fits(entry.is_some(), name) {
            return false;
        }
        let start = self.buf.len();
        if let Some(entry) = entry {
            self.buf.extend_from_slice(entry.as_bytes());
        }
        let d = abi::Dirent {
            ino,
            off,
            namelen: name.len() as u32,
            typ,
        };
        self.buf.extend_from_slice(d.as_bytes());
        self.buf.extend_from_slice(name);
        let end = start + Self::record_len(entry.is_some(), name);
        self.buf.resize(end, 0);
        true
    }

    /// The encoded entries, the reply's payload.
    pub fn as_bytes(&self) -> &[u8] {
        &self.buf
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_are_padded_and_never_exceed_the_size_asked_for() {
        let mut b = DirentBuf::new(64);
        assert!(b.push(5, 1, 4, b"abc")); // 24 + 3 -> 32
        assert_eq!(b.as_bytes().len(), 32);
        assert_eq!(&b.as_bytes()[24..27], b"abc");
        assert_eq!(&b.as_bytes()[27..32], &[0; 5]);
        assert!(b.push(6, 2, 8, b"12345678")); // 24 + 8 -> 32
        assert!(
            !b.push(7, 3, 8, b"x"),
            "a third entry would exceed 64 bytes"
        );
        assert_eq!(b.as_bytes().len(), 64);
        let mut p = DirentBuf::new(200);
        assert!(p.fits(true, b"n"));
        assert!(p.push_plus(&abi::EntryOut::default(), 1, 1, 4, b"n"));
        assert_eq!(p.as_bytes().len(), 128 + 32);
        assert!(!p.fits(true, b"n"));
    }
}
