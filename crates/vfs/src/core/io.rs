//! File I/O on an open file description: `read`/`write` (at the position or at an
//! offset), `copy_file_range`, `lseek`, `ftruncate`, `fallocate` and `fsync`.

use super::VfsCore;
use crate::file::OpenFile;
use crate::inode::Inode;
use crate::namei::Ctx;
use crate::perm;
use crate::{Errno, SysResult};

impl VfsCore {
    /// `read`: reads at the file position and advances it (under the position lock).
    pub fn read(&self, f: &OpenFile, buf: &mut [u8]) -> SysResult<usize> {
        if !f.readable() {
            return Err(Errno::EBADF);
        }
        let inode = f.inode();
        if inode.is_dir() {
            return Err(Errno::EISDIR);
        }
        let mut pos = f.pos.lock();
        let n = self.read_at(f, inode, buf, *pos)?;
        *pos += n as i64;
        Ok(n)
    }

    fn read_at(&self, f: &OpenFile, inode: &Inode, buf: &mut [u8], off: i64) -> SysResult<usize> {
        check_rw_area(off, buf.len())?;
        let n = inode.fs().read_file(f, off as u64, buf)?;
        if f.flags() & libc::O_NOATIME == 0 {
            inode.touch_atime();
        }
        Ok(n)
    }

    /// `pread64`: reads at `off`, leaving the file position alone.
    pub fn pread(&self, f: &OpenFile, buf: &mut [u8], off: i64) -> SysResult<usize> {
        if !f.readable() {
            return Err(Errno::EBADF);
        }
        let inode = f.inode();
        if inode.is_dir() {
            return Err(Errno::EISDIR);
        }
        if off < 0 {
            return Err(Errno::EINVAL);
        }
        self.read_at(f, inode, buf, off)
    }

    /// `vfs_copy_file_range` for files without a `copy_file_range`/clone method (tmpfs):
    /// the checks of `generic_copy_file_checks` in Linux's order, then a copy in chunks
    /// (Linux's `do_splice_direct` fallback). `pos_in`/`pos_out` are where to read and
    /// write; the caller updates offsets or file positions by the returned count.
    ///
    /// `EISDIR` if either is a directory, `EINVAL` if either is not a regular file, `EBADF`
    /// if `fin` is not readable or `fout` not writable or is `O_APPEND`, `EXDEV` across
    /// superblocks, `EOVERFLOW` if an end wraps around, then the copy is cut at `fin`'s
    /// end (`EFBIG` at the maximum file size), `EINVAL` for overlapping ranges of one file
    /// or a negative or overflowing position. Nothing to copy returns 0.
    pub fn copy_file_range(
        &self,
        ctx: &Ctx<'_>,
        fin: &OpenFile,
        pos_in: i64,
        fout: &OpenFile,
        pos_out: i64,
        len: usize,
    ) -> SysResult<usize> {
        let (iin, iout) = (fin.inode(), fout.inode());
        // generic_file_rw_checks
        if iin.is_dir() || iout.is_dir() {
            return Err(Errno::EISDIR);
        }
        if !iin.is_reg() || !iout.is_reg() {
            return Err(Errno::EINVAL);
        }
        if !fin.readable() || !fout.writable() || fout.flags() & libc::O_APPEND != 0 {
            return Err(Errno::EBADF);
        }
        if !std::ptr::eq(iin.sb(), iout.sb()) {
            return Err(Errno::EXDEV);
        }
        // The ends may not wrap (compared as unsigned 64-bit values, as the C does).
        let len64 = len as u64;
        if (pos_in as u64).checked_add(len64).is_none()
            || (pos_out as u64).checked_add(len64).is_none()
        {
            return Err(Errno::EOVERFLOW);
        }
        // Shorten to the end of the source.
        let size_in = iin.size() as i64;
        let mut count = if pos_in >= size_in {
            0
        } else {
            len64.min((size_in - pos_in) as u64)
        };
        // generic_write_check_limits (signed: a negative position is left to the checks
        // below).
        let max = iout.fs().max_file_size().min(i64::MAX as u64) as i64;
        if pos_out >= max {
            return Err(Errno::EFBIG);
        }
        count = count.min(max.wrapping_sub(pos_out) as u64);
        // Overlapping ranges of one file (unsigned, as the C compares them).
        let (pin, pout) = (pos_in as u64, pos_out as u64);
        if std::ptr::eq(iin, iout)
            && pout.wrapping_add(count) > pin
            && pout < pin.wrapping_add(count)
        {
            return Err(Errno::EINVAL);
        }
        let count = count as usize;
        check_rw_area(pos_in, count)?;
        check_rw_area(pos_out, count)?;
        if count == 0 {
            return Ok(0);
        }
        let mut buf = vec![0u8; count.min(64 << 10)];
        let mut done = 0;
        while done < count {
            let want = (count - done).min(buf.len());
            let off = done as i64;
            let n = match self.read_at(fin, iin, &mut buf[..want], pos_in + off) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if done == 0 => return Err(e),
                Err(_) => break,
            };
            match self.write_at(ctx, fout, &buf[..n], pos_out + off, false) {
                Ok((w, _)) => {
                    done += w;
                    if w < n {
                        break;
                    }
                }
                Err(e) if done == 0 => return Err(e),
                Err(_) => break,
            }
        }
        Ok(done)
    }

    /// `write`: writes at the file position (the end with `O_APPEND`) and advances it.
    pub fn write(&self, ctx: &Ctx<'_>, f: &OpenFile, buf: &[u8]) -> SysResult<usize> {
        if !f.writable() {
            return Err(Errno::EBADF);
        }
        let mut pos = f.pos.lock();
        let (n, end) = self.write_at(ctx, f, buf, *pos, f.flags() & libc::O_APPEND != 0)?;
        *pos = end;
        Ok(n)
    }

    /// `pwrite64`: writes at `off` (the end with `O_APPEND`), leaving the file position alone.
    pub fn pwrite(&self, ctx: &Ctx<'_>, f: &OpenFile, buf: &[u8], off: i64) -> SysResult<usize> {
        if !f.writable() {
            return Err(Errno::EBADF);
        }
        if off < 0 {
            return Err(Errno::EINVAL);
        }
        // Linux: pwrite on an O_APPEND description appends (a documented bug we keep).
        self.write_at(ctx, f, buf, off, f.flags() & libc::O_APPEND != 0)
            .map(|(n, _)| n)
    }

    /// Writes at `off` (or at the end); returns bytes written and the new position.
    ///
    /// As Linux: the range is checked at `off` (`rw_verify_area`, before `O_APPEND` moves
    /// it), and an empty write returns 0 at `off`, so it moves no position, not even with
    /// `O_APPEND` (`generic_write_checks` returns before it reads the size).
    fn write_at(
        &self,
        ctx: &Ctx<'_>,
        f: &OpenFile,
        buf: &[u8],
        off: i64,
        append: bool,
    ) -> SysResult<(usize, i64)> {
        let inode = f.inode();
        if inode.is_dir() {
            return Err(Errno::EISDIR);
        }
        check_rw_area(off, buf.len())?;
        if buf.is_empty() {
            return Ok((0, off));
        }
        let _w = inode.rwsem.write();
        let off = if append { inode.size() as i64 } else { off };
        let max = inode.fs().max_file_size();
        if off as u64 >= max {
            return Err(Errno::EFBIG);
        }
        let len = buf.len().min((max - off as u64) as usize);
        perm::kill_suid_on_write(inode, ctx.cred);
        let n = inode.fs().write_file(f, off as u64, &buf[..len])?;
        inode.touch_mc();
        Ok((n, off + n as i64))
    }

    /// `lseek`: moves the file position (`SEEK_SET`/`CUR`/`END`/`DATA`/`HOLE`).
    pub fn lseek(&self, f: &OpenFile, off: i64, whence: i32) -> SysResult<i64> {
        if f.is_path() {
            return Err(Errno::EBADF);
        }
        let inode = f.inode();
        let mut pos = f.pos.lock();
        if let Some(r) = inode.fs().llseek(f, *pos, off, whence) {
            *pos = r?;
            return Ok(*pos);
        }
        let size = inode.size() as i64;
        let new = match whence {
            libc::SEEK_SET => off,
            libc::SEEK_CUR => pos.checked_add(off).ok_or(Errno::EINVAL)?,
            libc::SEEK_END if !inode.is_dir() => size.checked_add(off).ok_or(Errno::EINVAL)?,
            libc::SEEK_DATA | libc::SEEK_HOLE if inode.is_reg() => {
                if off < 0 || off >= size {
                    return Err(Errno::ENXIO);
                }
                let r = inode
                    .fs()
                    .seek_data(inode, off as u64, whence == libc::SEEK_DATA)?;
                (r as i64).min(size)
            }
            _ => return Err(Errno::EINVAL),
        };
        if new < 0 {
            return Err(Errno::EINVAL);
        }
        *pos = new;
        Ok(new)
    }

    /// `ftruncate`: sets the size of the file open on `f` (opened for writing).
    pub fn ftruncate(&self, ctx: &Ctx<'_>, f: &OpenFile, len: i64) -> SysResult<()> {
        if f.is_path() {
            return Err(Errno::EBADF);
        }
        let inode = f.inode();
        if !inode.is_reg() || !f.writable() {
            return Err(Errno::EINVAL);
        }
        if len >= 0 {
            crate::perm::may_ftruncate(inode)?;
        }
        self.do_truncate(ctx, inode, len, true)
    }

    /// `fallocate`: allocates or punches a range (the modes Linux's tmpfs takes).
    pub fn fallocate(&self, f: &OpenFile, mode: i32, off: i64, len: i64) -> SysResult<()> {
        if off < 0 || len <= 0 {
            return Err(Errno::EINVAL);
        }
        // vfs_fallocate: the mode must be a valid combination before anything else is
        // looked at; whether this file system supports it comes last, after the EFBIG
        // check (so an unsupported but valid mode over a too-large range is EFBIG).
        const MODE_MASK: i32 = libc::FALLOC_FL_PUNCH_HOLE
            | libc::FALLOC_FL_COLLAPSE_RANGE
            | libc::FALLOC_FL_ZERO_RANGE
            | libc::FALLOC_FL_INSERT_RANGE
            | libc::FALLOC_FL_UNSHARE_RANGE
            | FALLOC_FL_WRITE_ZEROES;
        let keep = mode & libc::FALLOC_FL_KEEP_SIZE != 0;
        let valid = mode & !(MODE_MASK | libc::FALLOC_FL_KEEP_SIZE) == 0
            && match mode & MODE_MASK {
                0 | libc::FALLOC_FL_UNSHARE_RANGE | libc::FALLOC_FL_ZERO_RANGE => true,
                libc::FALLOC_FL_PUNCH_HOLE => keep,
                libc::FALLOC_FL_COLLAPSE_RANGE | libc::FALLOC_FL_INSERT_RANGE => !keep,
                FALLOC_FL_WRITE_ZEROES => !keep,
                _ => false,
            };
        if !valid {
            return Err(Errno::EOPNOTSUPP);
        }
        if !f.writable() {
            return Err(Errno::EBADF);
        }
        let inode = f.inode();
        // Only plain allocation on an append-only file; nothing on an immutable one.
        if mode & !libc::FALLOC_FL_KEEP_SIZE != 0 && inode.is_append() || inode.is_immutable() {
            return Err(Errno::EPERM);
        }
        if inode.file_type() == libc::S_IFIFO {
            return Err(Errno::ESPIPE);
        }
        if inode.is_dir() {
            return Err(Errno::EISDIR);
        }
        if !inode.is_reg() {
            return Err(Errno::ENODEV);
        }
        let end = off.checked_add(len).ok_or(Errno::EFBIG)?;
        if end as u64 > inode.fs().max_file_size() {
            return Err(Errno::EFBIG);
        }
        // A valid mode the file system does not provide is its `EOPNOTSUPP` (tmpfs:
        // allocation and hole punching), as `->fallocate` answers after these checks.
        let _w = inode.rwsem.write();
        inode.fs().fallocate(inode, mode, off as u64, len as u64)?;
        inode.touch_mc();
        Ok(())
    }

    /// `fsync`: the file system's `fsync` (nothing to do for tmpfs); `EINVAL` for special files.
    pub fn fsync(&self, f: &OpenFile) -> SysResult<()> {
        if f.is_path() {
            return Err(Errno::EBADF);
        }
        let inode = f.inode();
        inode.fs().fsync(inode)
    }
}

/// `FALLOC_FL_WRITE_ZEROES` (Linux 6.17; not in the libc crate yet).
const FALLOC_FL_WRITE_ZEROES: i32 = 0x80;

/// `rw_verify_area`: a position plus count past `i64::MAX` is `EINVAL`.
fn check_rw_area(off: i64, len: usize) -> SysResult<()> {
    if off < 0 || (off as i128 + len as i128) > i64::MAX as i128 {
        return Err(Errno::EINVAL);
    }
    Ok(())
}
