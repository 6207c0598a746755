//! Directory reading: `getdents64`, `readdir_from` (for the FUSE server), and the
//! `linux_dirent64` helpers ([`decode_dirents`], [`d_type_of_mode`]).

use super::{VfsCore, DIR_OFFSET_EOD};
use crate::abi::DirEntry;
use crate::file::OpenFile;
use crate::{Errno, SysResult};

impl VfsCore {
    /// `getdents64`: fills `buf` with `linux_dirent64` records from the directory's position.
    pub fn getdents64(&self, f: &OpenFile, buf: &mut [u8]) -> SysResult<usize> {
        if f.is_path() {
            return Err(Errno::EBADF);
        }
        let inode = f.inode();
        if !inode.is_dir() {
            return Err(Errno::ENOTDIR);
        }
        let mut pos = f.pos.lock();
        let mut used = 0usize;
        let mut too_small = false;
        let start = *pos;
        let at_end = self.readdir_from(f, start, &mut |e| {
            let reclen = (19 + e.name.len() + 1 + 7) & !7;
            if used + reclen > buf.len() {
                too_small = used == 0;
                return false;
            }
            let r = &mut buf[used..used + reclen];
            r[0..8].copy_from_slice(&e.ino.to_ne_bytes());
            r[8..16].copy_from_slice(&e.next_pos.to_ne_bytes());
            r[16..18].copy_from_slice(&(reclen as u16).to_ne_bytes());
            r[18] = e.d_type;
            r[19..19 + e.name.len()].copy_from_slice(e.name);
            for b in &mut r[19 + e.name.len()..] {
                *b = 0;
            }
            used += reclen;
            *pos = e.next_pos;
            true
        })?;
        if too_small {
            return Err(Errno::EINVAL);
        }
        if at_end {
            // Linux's tmpfs (simple_offset) parks the position at DIR_OFFSET_EOD.
            *pos = DIR_OFFSET_EOD;
        }
        Ok(used)
    }

    /// Emits the entries of the directory open as `f` from cookie `pos` (0: the start,
    /// with `.` and `..`) until `emit` returns false; true if the end was reached. The
    /// cookies (`next_pos`) are stable: a later call from any of them continues there.
    pub fn readdir_from(
        &self,
        f: &OpenFile,
        pos: i64,
        emit: &mut dyn FnMut(crate::fs::DirEmit<'_>) -> bool,
    ) -> SysResult<bool> {
        let inode = f.inode();
        if !inode.is_dir() {
            return Err(Errno::ENOTDIR);
        }
        let _r = inode.rwsem.read();
        if inode.nlink() == 0 {
            return Err(Errno::ENOENT);
        }
        let parent_ino = f.path().dentry.parent_ino().unwrap_or(inode.ino);
        let at_end = inode.fs().readdir(inode, parent_ino, pos, emit)?;
        inode.touch_atime();
        Ok(at_end)
    }
}

/// Decodes a `getdents64` buffer into entries.
pub fn decode_dirents(buf: &[u8]) -> Vec<DirEntry> {
    let mut v = Vec::new();
    let mut i = 0;
    while i + 19 <= buf.len() {
        let ino = u64::from_ne_bytes(buf[i..i + 8].try_into().unwrap_or([0; 8]));
        let off = i64::from_ne_bytes(buf[i + 8..i + 16].try_into().unwrap_or([0; 8]));
        let reclen = u16::from_ne_bytes([buf[i + 16], buf[i + 17]]) as usize;
        if reclen < 20 || i + reclen > buf.len() {
            break;
        }
        let d_type = buf[i + 18];
        let name_area = &buf[i + 19..i + reclen];
        let len = name_area
            .iter()
            .position(|&b| b == 0)
            .unwrap_or(name_area.len());
        v.push(DirEntry {
            ino,
            off,
            d_type,
            name: name_area[..len].to_vec(),
        });
        i += reclen;
    }
    v
}

/// The `d_type` of a file mode (`DT_REG`, `DT_DIR`, ...).
pub fn d_type_of_mode(mode: u32) -> u8 {
    dt_of(mode)
}

fn dt_of(mode: u32) -> u8 {
    ((mode & libc::S_IFMT) >> 12) as u8
}
