//! Read, write and llseek of an open attribute file.
//!
//! # Read semantics (seq_file with `single_open`, as sysfs)
//!
//! * A read at position 0 (or at a position other than where the previous read ended)
//!   calls `show` afresh; a read continuing where the last one ended is served from the
//!   buffer without calling `show`, so partial reads of one open file see one consistent
//!   content. A read after the buffer is consumed returns 0 (EOF) without `show`.
//! * Content is at most 4095 bytes (sysfs cuts `PAGE_SIZE - 1`).
//! * After removal, already-buffered bytes are still returned; any read that needs the
//!   node (even to find EOF) fails with `ENODEV`, as `kernfs_seq_start` does.
//! * `llseek` is `generic_file_llseek` with `i_size` 4096 and `s_maxbytes` `2^31 - 1`
//!   (so `SEEK_END` is relative to 4096, as on the host), under an active reference
//!   (`ENODEV` after removal).
//!
//! # Write semantics
//!
//! A write passes at most 4096 bytes (a longer one is cut, as `kernfs_fop_write_iter`
//! without `atomic_write_len`) in one `store` call, whatever the position; the callback's
//! count (capped at the length) or errno is the result. A zero-length write returns 0
//! without calling `store` (`sysfs_kf_write`). The position is not checked against
//! `s_maxbytes` (no `EFBIG`, as `kernfs_fop_write_iter` skips `generic_write_checks`),
//! only against `rw_verify_area`'s overflow of `pos + count` (`EINVAL`); a `write`
//! advances the position by the count, past `2^31 - 1` too (checked on the host).

use super::*;

impl SeqState {
    /// Runs `show` into the buffer (Linux: `kernfs_seq_start` + `kernfs_seq_show` +
    /// `kernfs_seq_next` + `kernfs_seq_stop` for a single record). On success the record is
    /// buffered (`count` bytes from 0) and `index` is 1.
    fn show(&mut self, of: &KernfsOpenFile) -> SysResult<()> {
        let node = &*of.node;
        let f = node.file().expect("read of an attribute file");
        node.with_active(|| {
            if let Some(on) = &of.open {
                // Acquire pairs with the increment in `notify` (SeqCst, so a release).
                of.event
                    .store(on.event.load(Ordering::Acquire), Ordering::Relaxed);
            }
            // No page-sized reservation: attributes are short, and a small buffer comes
            // from the allocator's thread cache.
            self.buf.clear();
            let r = f.ops.show(node, &mut self.buf);
            // sysfs_kf_seq_show: at most PAGE_SIZE - 1 bytes.
            self.buf.truncate(PAGE_SIZE - 1);
            r
        })?;
        self.count = self.buf.len();
        self.from = 0;
        self.index = 1;
        Ok(())
    }

    /// `traverse`: positions the window at `offset` by showing afresh.
    fn traverse(&mut self, of: &KernfsOpenFile, offset: i64) -> SysResult<()> {
        self.index = 0;
        self.count = 0;
        self.from = 0;
        if offset == 0 {
            return Ok(());
        }
        self.show(of)?;
        let off = offset as u64;
        if (self.count as u64) > off {
            self.from = off as usize;
            self.count -= self.from;
        } else {
            self.count = 0;
        }
        Ok(())
    }
}

impl KernfsOpenFile {
    /// The node this file is open on.
    pub fn node(&self) -> &Arc<KernfsNode> {
        &self.node
    }

    /// Whether opened for reading / writing.
    pub fn access(&self) -> (bool, bool) {
        (self.readable, self.writable)
    }

    /// `pread`: reads at `pos` with seq_file semantics (see the module docs); does not
    /// move the file position.
    ///
    /// Errors: `EBADF` (not open for reading), `EISDIR`, `EINVAL` (negative position, or
    /// `pos + out.len()` past `i64::MAX`), `ENODEV` (removed), or the `show` callback's
    /// errno.
    pub fn read_at(&self, out: &mut [u8], pos: i64) -> SysResult<usize> {
        let mut st = self.state.lock();
        self.read_locked(&mut st, out, pos)
    }

    /// `read`: reads at the file position and advances it.
    pub fn read(&self, out: &mut [u8]) -> SysResult<usize> {
        let mut st = self.state.lock();
        let pos = st.f_pos;
        let n = self.read_locked(&mut st, out, pos)?;
        st.f_pos += n as i64;
        Ok(n)
    }

    fn read_locked(&self, m: &mut SeqState, out: &mut [u8], pos: i64) -> SysResult<usize> {
        if !self.readable {
            return Err(Errno::EBADF);
        }
        if self.node.kind() == NodeKind::Dir {
            return Err(Errno::EISDIR);
        }
        verify_area(pos, out.len())?;
        if out.is_empty() {
            return Ok(0);
        }
        // seq_read_iter, specialized to one record.
        if pos == 0 {
            m.index = 0;
            m.count = 0;
        }
        if pos != m.read_pos {
            if let Err(e) = m.traverse(self, pos) {
                m.read_pos = 0;
                m.index = 0;
                m.count = 0;
                return Err(e);
            }
            m.read_pos = pos;
        }
        let mut copied = 0;
        if m.count > 0 {
            let n = m.count.min(out.len());
            out[..n].copy_from_slice(&m.buf[m.from..m.from + n]);
            m.count -= n;
            m.from += n;
            copied = n;
            if m.count > 0 {
                m.read_pos += copied as i64;
                return Ok(copied);
            }
        }
        m.from = 0;
        let err = if m.index != 0 {
            // kernfs_seq_start past the record: EOF, but only with the node still there.
            if self.node.is_active() {
                Ok(())
            } else {
                Err(Errno::ENODEV)
            }
        } else {
            match m.show(self) {
                Ok(()) => {
                    let n = m.count.min(out.len() - copied);
                    out[copied..copied + n].copy_from_slice(&m.buf[..n]);
                    m.count -= n;
                    m.from = n;
                    copied += n;
                    Ok(())
                }
                Err(e) => {
                    m.count = 0;
                    Err(e)
                }
            }
        };
        if copied == 0 {
            return err.map(|()| 0);
        }
        m.read_pos += copied as i64;
        Ok(copied)
    }

    /// `pwrite`: passes `data` (cut to one page) to `store` in one call, whatever `pos`
    /// (`kernfs_fop_write_iter` ignores it: no `EFBIG` past `s_maxbytes`).
    ///
    /// Errors: `EBADF` (not open for writing), `EINVAL` (negative position, or `pos +
    /// data.len()` past `i64::MAX`, as `rw_verify_area`), `ENODEV` (removed), or the
    /// `store` callback's errno.
    pub fn write_at(&self, data: &[u8], pos: i64) -> SysResult<usize> {
        let _st = self.state.lock();
        self.write_locked(data, pos)
    }

    /// `write`: writes at the file position and advances it by the count stored (past
    /// [`MAX_POS`] too, as Linux's `iocb->ki_pos += len`; only `llseek` is bounded).
    pub fn write(&self, data: &[u8]) -> SysResult<usize> {
        let mut st = self.state.lock();
        let n = self.write_locked(data, st.f_pos)?;
        // No overflow: `write_locked` checked `f_pos + data.len()` and `n <= data.len()`.
        st.f_pos += n as i64;
        Ok(n)
    }

    fn write_locked(&self, data: &[u8], pos: i64) -> SysResult<usize> {
        if !self.writable {
            return Err(Errno::EBADF);
        }
        verify_area(pos, data.len())?;
        let data = &data[..data.len().min(PAGE_SIZE)];
        let f = self
            .node
            .file()
            .expect("writable files are attribute files");
        self.node.with_active(|| {
            if data.is_empty() {
                return Ok(0);
            }
            f.ops.store(&self.node, data).map(|n| n.min(data.len()))
        })
    }

    /// `lseek` (`generic_file_llseek` with size 4096 and maximum position `2^31 - 1`):
    /// `SEEK_SET`, `SEEK_CUR`, `SEEK_END`, `SEEK_DATA`, `SEEK_HOLE`.
    ///
    /// Errors: `EINVAL` (bad `whence`, negative or too large result), `ENXIO`
    /// (`SEEK_DATA`/`SEEK_HOLE` at or past 4096), `ENODEV` (file removed).
    pub fn llseek(&self, offset: i64, whence: i32) -> SysResult<i64> {
        let mut st = self.state.lock();
        let new = self.seek_locked(st.f_pos, offset, whence)?;
        st.f_pos = new;
        Ok(new)
    }

    /// [`llseek`](Self::llseek) for a caller that keeps the file position itself (the
    /// VFS): the new position from the current one `pos`, this file's own untouched.
    pub fn llseek_from(&self, pos: i64, offset: i64, whence: i32) -> SysResult<i64> {
        let _st = self.state.lock();
        self.seek_locked(pos, offset, whence)
    }

    /// `kernfs_fop_llseek` (caller: the open file's mutex held, as `of->mutex`).
    fn seek_locked(&self, pos: i64, offset: i64, whence: i32) -> SysResult<i64> {
        let size = match self.node.kind() {
            NodeKind::File => ATTR_SIZE as i64,
            _ => 0,
        };
        let seek = || -> SysResult<i64> {
            let new = match whence {
                libc::SEEK_SET => offset,
                libc::SEEK_CUR => {
                    // generic_file_llseek_size: the position as it is, even past the
                    // maximum (a write may have moved it there).
                    if offset == 0 {
                        return Ok(pos);
                    }
                    pos.checked_add(offset).ok_or(Errno::EINVAL)?
                }
                libc::SEEK_END => size.checked_add(offset).ok_or(Errno::EINVAL)?,
                libc::SEEK_DATA => {
                    if offset < 0 || offset >= size {
                        return Err(Errno::ENXIO);
                    }
                    offset
                }
                libc::SEEK_HOLE => {
                    if offset < 0 || offset >= size {
                        return Err(Errno::ENXIO);
                    }
                    size
                }
                _ => return Err(Errno::EINVAL),
            };
            if !(0..=MAX_POS).contains(&new) {
                return Err(Errno::EINVAL);
            }
            Ok(new)
        };
        if self.node.kind() != NodeKind::File {
            return seek();
        }
        // kernfs_fop_llseek: under an active reference (not a callback: no HELD record).
        if !self.node.try_get_active() {
            return Err(Errno::ENODEV);
        }
        let r = seek();
        self.node.put_active();
        r
    }

    /// The current file position.
    pub fn position(&self) -> i64 {
        self.state.lock().f_pos
    }
}

/// `rw_verify_area`: `EINVAL` for a negative position or one whose end (`pos + len`)
/// is past `i64::MAX`.
fn verify_area(pos: i64, len: usize) -> SysResult<()> {
    if pos < 0 || i128::from(pos) + len as i128 > i128::from(i64::MAX) {
        return Err(Errno::EINVAL);
    }
    Ok(())
}
