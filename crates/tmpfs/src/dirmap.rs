//! A directory's entries in the legacy design (one map behind the directory's one lock):
//! names stored once, in thin buffers, and the readdir cookies.

use scalevfs_vfs::InodeRef;
use std::alloc::{alloc, dealloc, handle_alloc_error, Layout};
use std::collections::{BTreeMap, HashMap};
use std::ptr::NonNull;

use crate::{DIR_OFFSET_EOD, DIR_OFFSET_FIRST, DIR_OFFSET_MIN};
use scalevfs_vfs::fs::DirEmit;

/// A directory's entries. Each name is stored once, in `by_name`'s key (a [`ThinName`]);
/// `by_cookie` borrows it through a [`NameRef`]. Both maps change together, under the
/// directory lock (`&mut self`), so a `NameRef` never outlives its name.
#[derive(Default)]
pub(crate) struct DirMap {
    /// Cookies are below `DIR_OFFSET_EOD` (`i32::MAX`), so `u32` holds them: 4-byte B-tree keys.
    pub(crate) by_name: HashMap<ThinName, u32>,
    pub(crate) by_cookie: BTreeMap<u32, (NameRef, InodeRef)>,
    pub(crate) next_cookie: u64,
}

/// An owned file name in one allocation: a length byte, then the bytes (a name is at most
/// `NAME_MAX` = 255 bytes). A thin pointer: 8 bytes in a hash bucket, where `Box<[u8]>` takes 16.
pub(crate) struct ThinName(NonNull<u8>);

// SAFETY: an owned, immutable byte buffer.
unsafe impl Send for ThinName {}
// SAFETY: as above.
unsafe impl Sync for ThinName {}

impl ThinName {
    fn layout(len: usize) -> Layout {
        Layout::from_size_align(1 + len, 1).expect("at most 256 bytes")
    }
    /// `None` if `name` is longer than `NAME_MAX`.
    pub(crate) fn new(name: &[u8]) -> Option<ThinName> {
        let len = u8::try_from(name.len()).ok()?;
        let layout = Self::layout(name.len());
        // SAFETY: the layout has a non-zero size.
        let p =
            NonNull::new(unsafe { alloc(layout) }).unwrap_or_else(|| handle_alloc_error(layout));
        // SAFETY: `p` has room for the length byte and `name`; the regions do not overlap.
        unsafe {
            p.as_ptr().write(len);
            std::ptr::copy_nonoverlapping(name.as_ptr(), p.as_ptr().add(1), name.len());
        }
        Some(ThinName(p))
    }
    pub(crate) fn as_ref(&self) -> NameRef {
        NameRef(self.0)
    }
}

impl Drop for ThinName {
    fn drop(&mut self) {
        // SAFETY: the name is still allocated; `new` allocated it with this layout.
        let len = unsafe { self.as_ref().bytes() }.len();
        // SAFETY: as above.
        unsafe { dealloc(self.0.as_ptr(), Self::layout(len)) }
    }
}

impl std::borrow::Borrow<[u8]> for ThinName {
    fn borrow(&self) -> &[u8] {
        // SAFETY: the name lives as long as `self`.
        unsafe { self.as_ref().bytes() }
    }
}

// Hash and Eq agree with `[u8]`'s, as `Borrow` requires (lookups are by `&[u8]`).
impl std::hash::Hash for ThinName {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        std::borrow::Borrow::<[u8]>::borrow(self).hash(h)
    }
}
impl PartialEq for ThinName {
    fn eq(&self, o: &Self) -> bool {
        std::borrow::Borrow::<[u8]>::borrow(self) == std::borrow::Borrow::<[u8]>::borrow(o)
    }
}
impl Eq for ThinName {}

/// A borrowed [`ThinName`] (see [`DirMap`] for why it stays valid).
#[derive(Clone, Copy)]
pub(crate) struct NameRef(NonNull<u8>);

// SAFETY: a read-only view of a `ThinName`, which is Send + Sync.
unsafe impl Send for NameRef {}
// SAFETY: as above.
unsafe impl Sync for NameRef {}

impl NameRef {
    /// # Safety
    /// The `ThinName` this came from must outlive `'a`.
    pub(crate) unsafe fn bytes<'a>(self) -> &'a [u8] {
        // SAFETY: per the contract, the buffer holds a length byte and that many bytes.
        unsafe {
            let len = *self.0.as_ptr() as usize;
            std::slice::from_raw_parts(self.0.as_ptr().add(1), len)
        }
    }
}

impl DirMap {
    pub(crate) fn get(&self, name: &[u8]) -> Option<&InodeRef> {
        self.by_name
            .get(name)
            .and_then(|c| self.by_cookie.get(c))
            .map(|e| &e.1)
    }
    pub(crate) fn insert(&mut self, name: &[u8], inode: InodeRef) {
        // Positions 0 and 1 are "." and "..", 2 means "the newest entry", and the end of
        // the directory is DIR_OFFSET_EOD; entries get cookies from 3 up, as Linux's
        // simple_offset directories (tmpfs) do.
        let c = self.next_cookie.clamp(DIR_OFFSET_MIN, DIR_OFFSET_EOD - 1);
        self.next_cookie = c + 1;
        let c = c as u32; // below DIR_OFFSET_EOD
                          // Callers reject names longer than NAME_MAX (`check_name`) before they get here.
        let n = ThinName::new(name).expect("name checked against NAME_MAX");
        self.by_cookie.insert(c, (n.as_ref(), inode));
        self.by_name.insert(n, c);
    }
    pub(crate) fn remove(&mut self, name: &[u8]) -> Option<InodeRef> {
        // The cookie entry goes first: it borrows the name `by_name` owns.
        let c = *self.by_name.get(name)?;
        let e = self.by_cookie.remove(&c);
        self.by_name.remove(name);
        e.map(|e| e.1)
    }
    pub(crate) fn is_empty(&self) -> bool {
        self.by_name.is_empty()
    }

    /// `readdir` from position `pos` (1: `..`, then the entries): see
    /// [`FileSystem::readdir`](scalevfs_vfs::FileSystem::readdir).
    pub(crate) fn readdir(
        &self,
        parent_ino: u64,
        mut pos: u64,
        emit: &mut dyn FnMut(DirEmit<'_>) -> bool,
    ) -> bool {
        // Entries are listed newest first, in falling cookie order, as Linux 6.14+ lists
        // tmpfs directories; each entry's `d_off` is the next (older) entry's cookie, so a
        // scan that resumes from it never returns an entry twice nor skips one that stayed.
        let newest = || {
            self.by_cookie
                .keys()
                .next_back()
                .map_or(DIR_OFFSET_EOD, |&c| c.into())
        };
        if pos == 1 {
            if !emit(DirEmit {
                ino: parent_ino,
                next_pos: newest() as i64,
                d_type: libc::DT_DIR,
                name: b"..",
            }) {
                return false;
            }
            pos = DIR_OFFSET_FIRST;
        }
        if pos >= DIR_OFFSET_EOD {
            return true;
        }
        let from = if pos <= DIR_OFFSET_FIRST {
            u64::MAX
        } else {
            pos
        };
        // `from` is below DIR_OFFSET_EOD, or u64::MAX for "from the newest".
        let from = u32::try_from(from).unwrap_or(u32::MAX);
        let mut entries = self.by_cookie.range(..=from).rev().peekable();
        while let Some((_, (name, inode))) = entries.next() {
            let next_pos = entries.peek().map_or(DIR_OFFSET_EOD, |(&c, _)| c.into());
            if !emit(DirEmit {
                ino: inode.ino,
                next_pos: next_pos as i64,
                d_type: scalevfs_vfs::core::d_type_of_mode(inode.mode()),
                // SAFETY: `&self` (the directory lock) keeps the entry, and so its name.
                name: unsafe { name.bytes() },
            }) {
                return false;
            }
        }
        true
    }
}
