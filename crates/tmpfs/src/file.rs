//! Regular files' data: the file's pages (`pages::FilePages`, a radix tree that readers
//! walk without a lock; writers hold its mutex, and the VFS already serializes them with
//! the inode's `rwsem`). Pages count against `size=` when a limit is set.

use crate::{pages, phys_pages, Tmpfs, PAGE};
use scalevfs_vfs::{Errno, Inode, SysResult};

impl Tmpfs {
    pub(crate) fn file_read(&self, inode: &Inode, off: u64, buf: &mut [u8]) -> SysResult<usize> {
        let p = pages(inode)?;
        let size = inode.size();
        if off >= size || buf.is_empty() {
            return Ok(0);
        }
        let n = buf.len().min((size - off) as usize);
        p.read_at(off, &mut buf[..n]);
        Ok(n)
    }

    pub(crate) fn file_write(&self, inode: &Inode, off: u64, buf: &[u8]) -> SysResult<usize> {
        let mut p = pages(inode)?.write();
        let done = p.write_at(off, buf, || self.reserve_pages(1))?;
        let end = off + done as u64;
        if end > inode.size() {
            inode.set_size(end);
        }
        Ok(done)
    }

    pub(crate) fn file_setsize(&self, inode: &Inode, size: u64) -> SysResult<()> {
        let mut p = pages(inode)?.write();
        let old = inode.size();
        if size < old {
            let first_gone = size.div_ceil(PAGE as u64);
            self.unreserve_pages(p.remove_range(first_gone, u64::MAX));
            if !size.is_multiple_of(PAGE as u64) {
                p.zero(size, first_gone * PAGE as u64);
            }
        }
        inode.set_size(size);
        Ok(())
    }

    pub(crate) fn file_fallocate(
        &self,
        inode: &Inode,
        mode: i32,
        off: u64,
        len: u64,
    ) -> SysResult<()> {
        // shmem_fallocate: allocation (with or without KEEP_SIZE) and hole punching; the
        // VFS already refused PUNCH_HOLE without KEEP_SIZE.
        if mode & !(libc::FALLOC_FL_KEEP_SIZE | libc::FALLOC_FL_PUNCH_HOLE) != 0 {
            return Err(Errno::EOPNOTSUPP);
        }
        if mode & libc::FALLOC_FL_PUNCH_HOLE != 0 {
            return self.punch_hole(inode, off, len);
        }
        let mut p = pages(inode)?.write();
        let end = off + len;
        let (first, last) = (off / PAGE as u64, (end - 1) / PAGE as u64);
        // Refuse a range that cannot fit before walking it page by page (a range of 2^50
        // pages would take forever and exhaust memory): shmem_fallocate's `end - start >
        // max_blocks` check is ENOSPC; without a size limit Linux allocates until memory
        // runs out (ENOMEM), so a range larger than physical memory is ENOMEM here.
        let span = last - first + 1;
        match self.max_pages {
            Some(max) if span > max => return Err(Errno::ENOSPC),
            None if span > phys_pages() => return Err(Errno::ENOMEM),
            _ => {}
        }
        let missing = (first..=last).filter(|&i| !p.contains(i)).count() as u64;
        self.reserve_pages(missing)?;
        for i in first..=last {
            p.insert_hole(i);
        }
        if mode & libc::FALLOC_FL_KEEP_SIZE == 0 && end > inode.size() {
            inode.set_size(end);
        }
        Ok(())
    }

    pub(crate) fn file_seek_data(&self, inode: &Inode, off: u64, data: bool) -> SysResult<u64> {
        let p = pages(inode)?;
        let idx = off / PAGE as u64;
        let size = inode.size();
        if data {
            match p.next_data(idx) {
                Some(i) if i * (PAGE as u64) < size => Ok(off.max(i * PAGE as u64)),
                _ => Err(Errno::ENXIO),
            }
        } else {
            Ok(off.max(p.next_hole(idx) * PAGE as u64).min(size))
        }
    }

    /// `FALLOC_FL_PUNCH_HOLE`: frees the pages wholly inside `[off, off+len)` and zeroes
    /// the covered part of a page it cuts into, as `shmem_truncate_range` does; the size
    /// does not change. Walks only the pages that exist, so a huge range costs nothing.
    pub(crate) fn punch_hole(&self, inode: &Inode, off: u64, len: u64) -> SysResult<()> {
        let mut p = pages(inode)?.write();
        let pg = PAGE as u64;
        let end = off.saturating_add(len);
        // Pages [first, last) are covered whole.
        let (first, last) = (off.div_ceil(pg), end / pg);
        if first > last {
            // Within one page.
            p.zero(off, end);
        } else {
            if !off.is_multiple_of(pg) {
                p.zero(off, first * pg);
            }
            if !end.is_multiple_of(pg) {
                p.zero(last * pg, end);
            }
        }
        if first < last {
            self.unreserve_pages(p.remove_range(first, last));
        }
        Ok(())
    }
}
