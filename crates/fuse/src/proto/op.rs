//! Request decoding: a request read from the kernel (header, then the opcode's argument
//! struct, then names or data) into an [`Operation`] that borrows the read buffer.
//!
//! Every length comes from the kernel, but nothing is trusted: a struct is read by copy
//! from the bytes that are there (`Cursor::fetch`: no alignment needed), a name must
//! end in its NUL inside the request, and a request too short for its opcode decodes to
//! `Err(DecodeError)`, which the server answers `EIO`.

use zerocopy::FromBytes;

use super::abi::{self, opcode};

/// A request too short for what its opcode carries.
#[derive(Debug, PartialEq, Eq)]
pub struct DecodeError;

/// The bytes after the header, consumed front to back: on `/dev/fuse` one run of bytes;
/// on io_uring the opcode's first argument (its fixed struct, in the entry's `op_in`)
/// and then the other arguments (in the payload buffer), read where they lie.
pub(crate) struct Cursor<'a> {
    /// The first argument (io_uring), taken whole by the first [`Cursor::fetch`]; empty
    /// on `/dev/fuse`.
    head: &'a [u8],
    rest: &'a [u8],
}

impl<'a> Cursor<'a> {
    pub(crate) fn new(bytes: &'a [u8]) -> Self {
        Cursor {
            head: &[],
            rest: bytes,
        }
    }

    /// The first argument `head` apart from the others, `rest` (io_uring's layout).
    pub(crate) fn split(head: &'a [u8], rest: &'a [u8]) -> Self {
        Cursor { head, rest }
    }

    /// The next `T`, copied out of the bytes (so the buffer's alignment does not matter).
    /// A separate first argument is one struct: what `T` leaves of it is skipped.
    pub(crate) fn fetch<T: FromBytes>(&mut self) -> Result<T, DecodeError> {
        if !self.head.is_empty() {
            let v = T::read_from_prefix(self.head).map_err(|_| DecodeError)?.0;
            self.head = &[];
            return Ok(v);
        }
        let (v, rest) = T::read_from_prefix(self.rest).map_err(|_| DecodeError)?;
        self.rest = rest;
        Ok(v)
    }

    /// The bytes after a separate first argument; an error while that is unread (no
    /// opcode has a name or data as its first argument).
    fn after_head(&self) -> Result<&'a [u8], DecodeError> {
        if self.head.is_empty() {
            Ok(self.rest)
        } else {
            Err(DecodeError)
        }
    }

    /// A NUL-terminated name, without its NUL.
    fn name(&mut self) -> Result<&'a [u8], DecodeError> {
        let bytes = self.after_head()?;
        let end = bytes.iter().position(|&b| b == 0).ok_or(DecodeError)?;
        let (name, rest) = bytes.split_at(end);
        self.rest = &rest[1..];
        Ok(name)
    }

    fn bytes(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        let bytes = self.after_head()?;
        if bytes.len() < n {
            return Err(DecodeError);
        }
        let (b, rest) = bytes.split_at(n);
        self.rest = rest;
        Ok(b)
    }

    pub(crate) fn rest(self) -> &'a [u8] {
        self.rest
    }
}

/// One decoded request. `ino`/`parent` is the header's node id unless stated.
#[derive(Debug)]
pub enum Operation<'a> {
    /// LOOKUP: find `name` in directory `parent`.
    Lookup {
        /// The name (without its NUL).
        name: &'a [u8],
    },
    /// FORGET (one node: the header's) and BATCH_FORGET.
    Forget(Forgets<'a>),
    /// GETATTR: the attributes of `ino`.
    Getattr(abi::GetattrIn),
    /// SETATTR: change the attributes of `ino`.
    Setattr(abi::SetattrIn),
    /// READLINK: the target of symlink `ino`.
    Readlink,
    /// SYMLINK: make symlink `name` in `parent`, pointing at `target`.
    Symlink {
        /// The name (without its NUL).
        name: &'a [u8],
        /// The symlink's target.
        target: &'a [u8],
    },
    /// MKNOD: make node `name` in `parent`.
    Mknod {
        /// The fixed argument struct.
        arg: abi::MknodIn,
        /// The name (without its NUL).
        name: &'a [u8],
    },
    /// MKDIR: make directory `name` in `parent`.
    Mkdir {
        /// The fixed argument struct.
        arg: abi::MkdirIn,
        /// The name (without its NUL).
        name: &'a [u8],
    },
    /// UNLINK: remove the non-directory `name` from `parent`.
    Unlink {
        /// The name (without its NUL).
        name: &'a [u8],
    },
    /// RMDIR: remove the empty directory `name` from `parent`.
    Rmdir {
        /// The name (without its NUL).
        name: &'a [u8],
    },
    /// RENAME (flags 0) and RENAME2.
    Rename {
        /// The node id of the target directory.
        newdir: u64,
        /// `RENAME_*` flags (0 for RENAME).
        flags: u32,
        /// The name (without its NUL).
        name: &'a [u8],
        /// The new name.
        newname: &'a [u8],
    },
    /// LINK: make `newname` in `parent` a hard link to `oldnodeid`.
    Link {
        /// The node id of the existing inode.
        oldnodeid: u64,
        /// The new name.
        newname: &'a [u8],
    },
    /// OPEN: open file `ino`.
    Open(abi::OpenIn),
    /// READ from an open file.
    Read(abi::ReadIn),
    /// WRITE `data` to an open file.
    Write {
        /// The fixed argument struct.
        arg: abi::WriteIn,
        /// The bytes to write.
        data: &'a [u8],
    },
    /// STATFS: the filesystem's statistics.
    Statfs,
    /// RELEASE: the last close of an open file.
    Release(abi::ReleaseIn),
    /// FSYNC: flush an open file to stable storage.
    Fsync(abi::FsyncIn),
    /// SETXATTR: set extended attribute `name` to `value`.
    Setxattr {
        /// The fixed argument struct.
        arg: abi::SetxattrIn,
        /// The name (without its NUL).
        name: &'a [u8],
        /// The value.
        value: &'a [u8],
    },
    /// GETXATTR: the value of extended attribute `name`.
    Getxattr {
        /// The fixed argument struct.
        arg: abi::GetxattrIn,
        /// The name (without its NUL).
        name: &'a [u8],
    },
    /// LISTXATTR: the names of `ino`'s extended attributes.
    Listxattr(abi::GetxattrIn),
    /// REMOVEXATTR: remove extended attribute `name`.
    Removexattr {
        /// The name (without its NUL).
        name: &'a [u8],
    },
    /// FLUSH: a `close(2)` of one file descriptor of an open file.
    Flush(abi::FlushIn),
    /// OPENDIR: open directory `ino`.
    Opendir(abi::OpenIn),
    /// READDIR: entries of an open directory.
    Readdir(abi::ReadIn),
    /// READDIRPLUS: entries of an open directory, with their attributes.
    Readdirplus(abi::ReadIn),
    /// RELEASEDIR: the last close of an open directory.
    Releasedir(abi::ReleaseIn),
    /// FSYNCDIR: flush an open directory.
    Fsyncdir(abi::FsyncIn),
    /// GETLK: the first lock that would conflict with the given one.
    Getlk(abi::LkIn),
    /// SETLK and SETLKW (`sleep`), POSIX or flock (`lk_flags & FUSE_LK_FLOCK`).
    Setlk {
        /// The fixed argument struct.
        arg: abi::LkIn,
        /// SETLKW: wait for a conflicting lock to go.
        sleep: bool,
    },
    /// ACCESS: check access to `ino` (`access(2)`).
    Access(abi::AccessIn),
    /// CREATE: create and open file `name` in `parent`.
    Create {
        /// The fixed argument struct.
        arg: abi::CreateIn,
        /// The name (without its NUL).
        name: &'a [u8],
    },
    /// TMPFILE: create and open an unnamed file in `parent` (`O_TMPFILE`).
    Tmpfile {
        /// The fixed argument struct.
        arg: abi::CreateIn,
    },
    /// INTERRUPT: abort an earlier request (its caller got a signal).
    Interrupt(abi::InterruptIn),
    /// DESTROY: the filesystem is being unmounted.
    Destroy,
    /// IOCTL on an open file, with its input `data`.
    Ioctl {
        /// The fixed argument struct.
        arg: abi::IoctlIn,
        /// The ioctl's input data.
        data: &'a [u8],
    },
    /// POLL: the readiness of an open file.
    Poll(abi::PollIn),
    /// FALLOCATE: allocate or punch a range of an open file.
    Fallocate(abi::FallocateIn),
    /// LSEEK on an open file (the kernel sends `SEEK_DATA` and `SEEK_HOLE`).
    Lseek(abi::LseekIn),
    /// COPY_FILE_RANGE: copy a range between two open files.
    CopyFileRange(abi::CopyFileRangeIn),
    /// An opcode we do not serve (answered `ENOSYS`).
    Unknown(u32),
}

/// The nodes and counts of a FORGET or BATCH_FORGET.
#[derive(Debug)]
pub enum Forgets<'a> {
    /// FORGET: one node.
    One(abi::ForgetOne),
    /// The raw `fuse_forget_one` array: read one at a time by [`Forgets::iter`].
    Batch(&'a [u8]),
}

impl Forgets<'_> {
    /// Each node and its lookup count, in order.
    pub fn iter(&self) -> impl Iterator<Item = abi::ForgetOne> + '_ {
        let (one, batch) = match self {
            Forgets::One(f) => (Some(*f), &[][..]),
            Forgets::Batch(b) => (None, *b),
        };
        one.into_iter().chain(
            batch
                .chunks_exact(std::mem::size_of::<abi::ForgetOne>())
                .filter_map(|c| abi::ForgetOne::read_from_bytes(c).ok()),
        )
    }
}

impl<'a> Operation<'a> {
    /// Decodes the bytes after the header of a request with `header` (`/dev/fuse`).
    pub fn decode(header: &abi::InHeader, arg: &'a [u8]) -> Result<Self, DecodeError> {
        Self::decode_split(header, &[], arg)
    }

    /// Decodes a request whose first argument `op_in` (the opcode's fixed struct) lies
    /// apart from the others, `payload` (an io_uring entry's two buffers; `op_in` is
    /// empty on `/dev/fuse`, where all arguments follow the header in one run).
    pub fn decode_split(
        header: &abi::InHeader,
        op_in: &'a [u8],
        payload: &'a [u8],
    ) -> Result<Self, DecodeError> {
        // Extension headers (security context, supplementary groups) trail the request
        // when negotiated; we negotiate none, but never read them as arguments.
        let ext = usize::from(header.total_extlen) * 8;
        let payload = &payload[..payload.len().checked_sub(ext).ok_or(DecodeError)?];
        let mut c = Cursor::split(op_in, payload);
        use Operation as O;
        Ok(match header.opcode {
            opcode::LOOKUP => O::Lookup { name: c.name()? },
            opcode::FORGET => O::Forget(Forgets::One(abi::ForgetOne {
                nodeid: header.nodeid,
                nlookup: c.fetch::<abi::ForgetIn>()?.nlookup,
            })),
            opcode::BATCH_FORGET => {
                let n = c.fetch::<abi::BatchForgetIn>()?.count as usize;
                let len = n
                    .checked_mul(std::mem::size_of::<abi::ForgetOne>())
                    .ok_or(DecodeError)?;
                O::Forget(Forgets::Batch(c.bytes(len)?))
            }
            opcode::GETATTR => O::Getattr(c.fetch()?),
            opcode::SETATTR => O::Setattr(c.fetch()?),
            opcode::READLINK => O::Readlink,
            opcode::SYMLINK => O::Symlink {
                name: c.name()?,
                target: c.name()?,
            },
            opcode::MKNOD => O::Mknod {
                arg: c.fetch()?,
                name: c.name()?,
            },
            opcode::MKDIR => O::Mkdir {
                arg: c.fetch()?,
                name: c.name()?,
            },
            opcode::UNLINK => O::Unlink { name: c.name()? },
            opcode::RMDIR => O::Rmdir { name: c.name()? },
            opcode::RENAME => O::Rename {
                newdir: c.fetch::<abi::RenameIn>()?.newdir,
                flags: 0,
                name: c.name()?,
                newname: c.name()?,
            },
            opcode::RENAME2 => {
                let a: abi::Rename2In = c.fetch()?;
                O::Rename {
                    newdir: a.newdir,
                    flags: a.flags,
                    name: c.name()?,
                    newname: c.name()?,
                }
            }
            opcode::LINK => O::Link {
                oldnodeid: c.fetch::<abi::LinkIn>()?.oldnodeid,
                newname: c.name()?,
            },
            opcode::OPEN => O::Open(c.fetch()?),
            opcode::READ => O::Read(c.fetch()?),
            opcode::WRITE => {
                let arg: abi::WriteIn = c.fetch()?;
                O::Write {
                    data: c.bytes(arg.size as usize)?,
                    arg,
                }
            }
            opcode::STATFS => O::Statfs,
            opcode::RELEASE => O::Release(c.fetch()?),
            opcode::FSYNC => O::Fsync(c.fetch()?),
            opcode::SETXATTR => {
                let arg: abi::SetxattrIn = c.fetch()?;
                O::Setxattr {
                    name: c.name()?,
                    value: c.bytes(arg.size as usize)?,
                    arg,
                }
            }
            opcode::GETXATTR => O::Getxattr {
                arg: c.fetch()?,
                name: c.name()?,
            },
            opcode::LISTXATTR => O::Listxattr(c.fetch()?),
            opcode::REMOVEXATTR => O::Removexattr { name: c.name()? },
            opcode::FLUSH => O::Flush(c.fetch()?),
            opcode::OPENDIR => O::Opendir(c.fetch()?),
            opcode::READDIR => O::Readdir(c.fetch()?),
            opcode::READDIRPLUS => O::Readdirplus(c.fetch()?),
            opcode::RELEASEDIR => O::Releasedir(c.fetch()?),
            opcode::FSYNCDIR => O::Fsyncdir(c.fetch()?),
            opcode::GETLK => O::Getlk(c.fetch()?),
            opcode::SETLK | opcode::SETLKW => O::Setlk {
                arg: c.fetch()?,
                sleep: header.opcode == opcode::SETLKW,
            },
            opcode::ACCESS => O::Access(c.fetch()?),
            opcode::CREATE => O::Create {
                arg: c.fetch()?,
                name: c.name()?,
            },
            // The name (the dentry's, "/") means nothing for an unnamed file.
            opcode::TMPFILE => O::Tmpfile { arg: c.fetch()? },
            opcode::INTERRUPT => O::Interrupt(c.fetch()?),
            opcode::DESTROY => O::Destroy,
            opcode::IOCTL => {
                let arg: abi::IoctlIn = c.fetch()?;
                O::Ioctl {
                    data: c.bytes(arg.in_size as usize)?,
                    arg,
                }
            }
            opcode::POLL => O::Poll(c.fetch()?),
            opcode::FALLOCATE => O::Fallocate(c.fetch()?),
            opcode::LSEEK => O::Lseek(c.fetch()?),
            opcode::COPY_FILE_RANGE => O::CopyFileRange(c.fetch()?),
            other => {
                let _ = c.rest();
                O::Unknown(other)
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use zerocopy::IntoBytes;

    fn header(opcode: u32) -> abi::InHeader {
        abi::InHeader {
            opcode,
            nodeid: 7,
            ..Default::default()
        }
    }

    #[test]
    fn names_and_structs_decode_and_short_requests_are_errors() {
        let h = header(opcode::RENAME2);
        let mut b = abi::Rename2In {
            newdir: 9,
            flags: 1,
            padding: 0,
        }
        .as_bytes()
        .to_vec();
        b.extend_from_slice(b"a\0bc\0");
        match Operation::decode(&h, &b).unwrap() {
            Operation::Rename {
                newdir,
                flags,
                name,
                newname,
            } => assert_eq!(
                (newdir, flags, name, newname),
                (9, 1, &b"a"[..], &b"bc"[..])
            ),
            op => panic!("{op:?}"),
        }
        // The second name lost its NUL; then the struct itself cut short.
        assert_eq!(
            Operation::decode(&h, &b[..b.len() - 1]).unwrap_err(),
            DecodeError
        );
        assert_eq!(Operation::decode(&h, &b[..10]).unwrap_err(), DecodeError);
    }

    #[test]
    fn write_data_must_be_all_there() {
        let h = header(opcode::WRITE);
        let mut b = abi::WriteIn {
            size: 4,
            ..Default::default()
        }
        .as_bytes()
        .to_vec();
        b.extend_from_slice(b"abc");
        assert_eq!(Operation::decode(&h, &b).unwrap_err(), DecodeError);
        b.push(b'd');
        match Operation::decode(&h, &b).unwrap() {
            Operation::Write { data, .. } => assert_eq!(data, b"abcd"),
            op => panic!("{op:?}"),
        }
    }

    #[test]
    fn batch_forget_lists_every_node_and_a_lying_count_is_an_error() {
        let h = header(opcode::BATCH_FORGET);
        let mut b = abi::BatchForgetIn { count: 2, dummy: 0 }
            .as_bytes()
            .to_vec();
        for (nodeid, nlookup) in [(3, 1), (4, 5)] {
            b.extend_from_slice(abi::ForgetOne { nodeid, nlookup }.as_bytes());
        }
        match Operation::decode(&h, &b).unwrap() {
            Operation::Forget(f) => {
                let got: Vec<_> = f.iter().map(|f| (f.nodeid, f.nlookup)).collect();
                assert_eq!(got, [(3, 1), (4, 5)]);
            }
            op => panic!("{op:?}"),
        }
        b[0] = 3;
        assert_eq!(Operation::decode(&h, &b).unwrap_err(), DecodeError);
        let one = Operation::decode(&header(opcode::FORGET), 2u64.as_bytes()).unwrap();
        match one {
            Operation::Forget(f) => {
                let got: Vec<_> = f.iter().map(|f| (f.nodeid, f.nlookup)).collect();
                assert_eq!(got, [(7, 2)]);
            }
            op => panic!("{op:?}"),
        }
    }

    #[test]
    fn extension_headers_are_not_read_as_arguments() {
        let mut h = header(opcode::LOOKUP);
        h.total_extlen = 1;
        let b = b"name\0\0\0\0x\0\0\0\0\0\0\0";
        match Operation::decode(&h, &b[..]).unwrap() {
            Operation::Lookup { name } => assert_eq!(name, b"name"),
            op => panic!("{op:?}"),
        }
        assert_eq!(Operation::decode(&h, &b[..4]).unwrap_err(), DecodeError);
    }

    /// io_uring's layout: the fixed struct in `op_in`, names and data in the payload,
    /// decoded as the same bytes in one run are.
    #[test]
    fn split_requests_decode_like_contiguous_ones() {
        let h = header(opcode::RENAME2);
        let arg = abi::Rename2In {
            newdir: 9,
            flags: 1,
            padding: 0,
        };
        match Operation::decode_split(&h, arg.as_bytes(), b"a\0bc\0").unwrap() {
            Operation::Rename {
                newdir,
                name,
                newname,
                ..
            } => assert_eq!((newdir, name, newname), (9, &b"a"[..], &b"bc"[..])),
            op => panic!("{op:?}"),
        }
        let w = header(opcode::WRITE);
        let arg = abi::WriteIn {
            size: 3,
            ..Default::default()
        };
        match Operation::decode_split(&w, arg.as_bytes(), b"xyz").unwrap() {
            Operation::Write { data, .. } => assert_eq!(data, b"xyz"),
            op => panic!("{op:?}"),
        }
        assert_eq!(
            Operation::decode_split(&w, &arg.as_bytes()[..20], b"xyz").unwrap_err(),
            DecodeError,
            "a first argument shorter than its struct"
        );
        let l = header(opcode::LOOKUP);
        match Operation::decode_split(&l, &[], b"name\0").unwrap() {
            Operation::Lookup { name } => assert_eq!(name, b"name"),
            op => panic!("{op:?}"),
        }
        assert_eq!(
            Operation::decode_split(&l, b"x", b"name\0").unwrap_err(),
            DecodeError,
            "a name never comes as the first argument"
        );
    }

    /// Bad input is an error, never a panic: every opcode with random argument bytes of
    /// random lengths (and random extension lengths).
    #[test]
    fn random_requests_decode_or_fail_without_panicking() {
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut ok = 0;
        for _ in 0..20_000 {
            let mut h = header((next() % 60) as u32);
            h.total_extlen = (next() % 4) as u16;
            let len = (next() % 200) as usize;
            let bytes: Vec<u8> = (0..len)
                .map(|_| match next() % 4 {
                    0 => 0,
                    _ => next() as u8,
                })
                .collect();
            if Operation::decode(&h, &bytes).is_ok() {
                ok += 1;
            }
            let cut = (next() as usize % (len + 1)).min(128);
            let _ = Operation::decode_split(&h, &bytes[..cut], &bytes[cut..]);
        }
        assert!(ok > 0, "some random requests are well formed");
    }
}
