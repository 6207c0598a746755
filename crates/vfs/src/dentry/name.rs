//! Name buffers: one epoch-managed allocation per name, shared with the hash node.

use super::*;

/// A byte of a name buffer. An `AtomicU8` (same layout as `u8`) and not a `u8` because
/// crossbeam-epoch can hand out the fresh buffer only through a shared reference: its
/// `DerefMut` for `[MaybeUninit<T>]` derives the `&mut` slice from a `&` to the array
/// header, and writing through that is undefined behaviour (Miri, Tree Borrows: "write
/// access through a Frozen tag"). The interior mutability of `AtomicU8` makes the bytes
/// writable through the shared reference; once filled they are never written again.
pub(super) type NameByte = MaybeUninit<AtomicU8>;

/// A name buffer: one epoch-managed allocation holding the length and the bytes.
pub(super) fn new_name(name: &[u8]) -> Owned<[NameByte]> {
    let o = Owned::<[NameByte]>::init(name.len());
    for (d, s) in o.iter().zip(name) {
        // SAFETY: `o` is ours alone (not yet published), so nothing reads the byte while it
        // is written; `AtomicU8` is an `UnsafeCell`, so writing through a pointer derived
        // from the shared reference is allowed; the pointer is valid and aligned (`u8`).
        unsafe { d.as_ptr().cast_mut().write(AtomicU8::new(*s)) };
    }
    o
}

/// The bytes of a name buffer made by [`new_name`].
pub(super) fn name_bytes(n: &[NameByte]) -> &[u8] {
    // SAFETY: `new_name` initialized every byte, `MaybeUninit<AtomicU8>` has `u8`'s layout,
    // and a published buffer is never written again, so viewing it as plain bytes for the
    // lifetime of `n` races with nothing.
    unsafe { &*(n as *const [NameByte] as *const [u8]) }
}

/// A dentry's name buffer, referenced by its hash node instead of copied.
///
/// Valid for as long as the node is reachable: the name is retired (through the epoch) only
/// after the node has been unlinked: `d_move` unhashes before it replaces the name, `kill`
/// unhashes before it retires the dentry (which owns the name). A lookup that still walks
/// an unlinked node is pinned, so the retired name outlives it too.
#[derive(Copy, Clone)]
/// A thin pointer (the buffer holds its length), so a hash node stays 40 bytes.
pub(super) struct NameRef(pub(super) usize);

// SAFETY: a read-only view of an epoch-managed buffer (see the type docs).
unsafe impl Send for NameRef {}

impl NameRef {
    /// # Safety
    /// The node holding this name must be reachable, or the caller pinned while it was.
    pub(super) unsafe fn get<'a>(self) -> &'a [u8] {
        // SAFETY: per the contract; `self.0` came from `Shared::into_usize` of a name buffer.
        name_bytes(unsafe { Shared::<[NameByte]>::from_usize(self.0).deref() })
    }
}
