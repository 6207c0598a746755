//! FUSE over io_uring (`include/uapi/linux/fuse.h`, `fs/fuse/dev_uring.c`, protocol
//! 7.42 and later): the commands a server submits as `IORING_OP_URING_CMD` on a
//! `/dev/fuse` descriptor, and the buffers each ring entry registers.
//!
//! A ring entry is two buffers the server owns: a `ReqHeader` and a payload buffer of
//! at least the ring's `max_payload_sz` (the largest of 8 KiB, `max_write` and
//! `max_pages` pages). `REGISTER` hands them to the kernel (the SQE's `addr` points at an
//! array of two iovecs, `len` is 2); the command completes when a request has been copied
//! in: the `fuse_in_header` in `in_out`, the opcode's first argument (its fixed struct,
//! possibly empty) in `op_in`, the other arguments in the payload buffer, and
//! `ring_ent_in_out` with `commit_id` and the payload's size. The server answers with
//! `COMMIT_AND_FETCH`: a `fuse_out_header` in `in_out`, the reply's arguments in the
//! payload buffer, `payload_sz` set, and the request's `commit_id` (its unique) in the
//! command; the same command then waits for the entry's next request.

use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

/// `FUSE_IO_URING_CMD_REGISTER`: register an entry's buffers and fetch a request.
pub const CMD_REGISTER: u32 = 1;
/// `FUSE_IO_URING_CMD_COMMIT_AND_FETCH`: answer the entry's request, fetch the next.
pub const CMD_COMMIT_AND_FETCH: u32 = 2;

/// `FUSE_URING_IN_OUT_HEADER_SZ`: room for the in or out header.
pub const IN_OUT_HEADER_SZ: usize = 128;
/// `FUSE_URING_OP_IN_OUT_SZ`: room for the opcode's fixed argument struct.
pub const OP_IN_OUT_SZ: usize = 128;
/// The kernel's `FUSE_MIN_READ_BUFFER`: the least payload buffer it accepts.
pub const MIN_PAYLOAD: usize = 8192;

/// The kernel's `struct fuse_uring_ent_in_out`, the last part of [`ReqHeader`].
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
#[repr(C)]
pub struct EntInOut {
    /// Zero.
    pub flags: u64,
    /// The request's unique, to name in the `COMMIT_AND_FETCH` that answers it.
    pub commit_id: u64,
    /// Bytes of the payload buffer in use (the request's, then the reply's).
    pub payload_sz: u32,
    /// Padding (zero).
    pub padding: u32,
    /// Reserved (zero).
    pub reserved: u64,
}

/// The kernel's `struct fuse_uring_req_header`: an entry's header buffer.
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, Immutable, KnownLayout)]
#[repr(C)]
pub struct ReqHeader {
    /// `fuse_in_header` from the kernel, `fuse_out_header` from the server.
    pub in_out: [u8; IN_OUT_HEADER_SZ],
    /// The opcode's first argument (its fixed struct; empty for LOOKUP and the like).
    pub op_in: [u8; OP_IN_OUT_SZ],
    /// The payload's size and the commit id.
    pub ring_ent_in_out: EntInOut,
}

/// The kernel's `struct fuse_uring_cmd_req`, in the SQE's command area.
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
#[repr(C)]
pub struct CmdReq {
    /// Zero.
    pub flags: u64,
    /// `COMMIT_AND_FETCH`: the unique of the request answered.
    pub commit_id: u64,
    /// The queue (the CPU whose requests it takes).
    pub qid: u16,
    /// Padding (zero).
    pub padding: [u8; 6],
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::{offset_of, size_of};

    /// The sizes and offsets of `fuse.h`.
    #[test]
    fn uring_structs_match_the_kernel_abi() {
        assert_eq!(size_of::<EntInOut>(), 32);
        assert_eq!(size_of::<ReqHeader>(), 288);
        assert_eq!(offset_of!(ReqHeader, op_in), 128);
        assert_eq!(offset_of!(ReqHeader, ring_ent_in_out), 256);
        assert_eq!(offset_of!(EntInOut, payload_sz), 16);
        assert_eq!(size_of::<CmdReq>(), 24);
        assert_eq!(offset_of!(CmdReq, qid), 16);
    }
}
