//! A minimal in-memory file system for the VFS core's unit tests (directories and empty
//! files only); the real one is `scalevfs-tmpfs`.

use crate::fs::{DirEmit, FileSystem};
use crate::inode::{Inode, InodeRef, NewInode, SuperBlock};
use crate::{Errno, SysResult};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};

#[derive(Default)]
pub struct TestFs {
    pub next: AtomicU64,
    /// Behave like kernfs: names may change behind the VFS's back (revalidate).
    pub changes_behind: bool,
    /// Take changes of different names concurrently (each directory's one map has its own
    /// lock), so that the VFS runs them holding directories shared (`core::dirlock`).
    pub shared_names: bool,
    /// Per-open hooks: opens and releases seen.
    pub opens: AtomicU64,
    pub releases: AtomicU64,
}

type Dir = Mutex<HashMap<Vec<u8>, InodeRef>>;

fn dir(i: &Inode) -> SysResult<&Dir> {
    i.private::<Dir>().ok_or(Errno::ENOTDIR)
}

impl TestFs {
    /// Removes `name` from `dir` without telling the VFS (a kernfs node going away).
    pub fn remove_behind(&self, d: &Inode, name: &[u8]) {
        let r = dir(d).expect("dir").lock().remove(name);
        drop(r);
    }

    fn inode(&self, sb: &SuperBlock, mode: u32) -> InodeRef {
        sb.new_inode(NewInode {
            ino: self.next.fetch_add(1, Ordering::Relaxed) + 1,
            mode,
            uid: 0,
            gid: 0,
            nlink: 1,
            rdev: 0,
            private: if mode & libc::S_IFMT == libc::S_IFDIR {
                Box::new(Dir::default())
            } else {
                Box::new(())
            },
        })
    }
}

impl FileSystem for TestFs {
    fn fs_type(&self) -> &'static str {
        "testfs"
    }
    fn fill_super(&self, sb: &SuperBlock) -> SysResult<InodeRef> {
        Ok(self.inode(sb, libc::S_IFDIR | 0o755))
    }
    fn kill_sb(&self, root: &Inode) {
        let mut stack = vec![std::mem::take(&mut *dir(root).expect("dir").lock())];
        while let Some(m) = stack.pop() {
            for (_, i) in m {
                if let Ok(d) = dir(&i) {
                    stack.push(std::mem::take(&mut *d.lock()));
                }
            }
        }
    }
    fn evict_inode(&self, _inode: &Inode) {}
    fn lookup(&self, d: &Inode, name: &[u8]) -> SysResult<Option<InodeRef>> {
        Ok(dir(d)?.lock().get(name).cloned())
    }
    fn create(&self, d: &Inode, name: &[u8], mode: u32, uid: u32, gid: u32) -> SysResult<InodeRef> {
        let i = self.inode(d.sb(), mode);
        i.set_uid(uid);
        i.set_gid(gid);
        dir(d)?.lock().insert(name.to_vec(), i.clone());
        Ok(i)
    }
    fn symlink(&self, _: &Inode, _: &[u8], _: &[u8], _: u32, _: u32) -> SysResult<InodeRef> {
        Err(Errno::EPERM)
    }
    fn link(&self, d: &Inode, name: &[u8], inode: &InodeRef) -> SysResult<()> {
        dir(d)?.lock().insert(name.to_vec(), inode.clone());
        inode.inc_nlink();
        Ok(())
    }
    fn unlink(&self, d: &Inode, name: &[u8], inode: &Inode) -> SysResult<()> {
        let r = dir(d)?.lock().remove(name).ok_or(Errno::ENOENT)?;
        inode.dec_nlink();
        drop(r);
        Ok(())
    }
    fn rmdir(&self, d: &Inode, name: &[u8], inode: &Inode) -> SysResult<()> {
        if !dir(inode)?.lock().is_empty() {
            return Err(Errno::ENOTEMPTY);
        }
        inode.set_nlink(0);
        let r = dir(d)?.lock().remove(name);
        drop(r);
        Ok(())
    }
    fn rename(&self, od: &Inode, on: &[u8], nd: &Inode, nn: &[u8], _flags: u32) -> SysResult<()> {
        let i = dir(od)?.lock().remove(on).ok_or(Errno::ENOENT)?;
        let old = dir(nd)?.lock().insert(nn.to_vec(), i);
        drop(old);
        Ok(())
    }
    fn readdir(
        &self,
        _: &Inode,
        _: u64,
        _: i64,
        _: &mut dyn FnMut(DirEmit<'_>) -> bool,
    ) -> SysResult<bool> {
        Ok(true)
    }
    fn read(&self, _: &Inode, _: u64, _: &mut [u8]) -> SysResult<usize> {
        Ok(0)
    }
    fn write(&self, _: &Inode, _: u64, _: &[u8]) -> SysResult<usize> {
        Err(Errno::ENOSPC)
    }
    fn setsize(&self, _: &Inode, _: u64) -> SysResult<()> {
        Ok(())
    }
    fn fallocate(&self, _: &Inode, _: i32, _: u64, _: u64) -> SysResult<()> {
        Err(Errno::EOPNOTSUPP)
    }
    fn seek_data(&self, _: &Inode, _: u64, _: bool) -> SysResult<u64> {
        Err(Errno::ENXIO)
    }
    fn readlink(&self, _: &Inode) -> SysResult<Vec<u8>> {
        Err(Errno::EINVAL)
    }
    fn blocks(&self, _: &Inode) -> u64 {
        0
    }
    fn open(&self, _: &Inode, _: i32) -> SysResult<Option<Box<dyn std::any::Any + Send + Sync>>> {
        self.opens.fetch_add(1, Ordering::Relaxed);
        Ok(Some(Box::new(42u32)))
    }
    fn release(&self, _: &Inode, private: Box<dyn std::any::Any + Send + Sync>) {
        assert_eq!(private.downcast_ref::<u32>(), Some(&42));
        self.releases.fetch_add(1, Ordering::Relaxed);
    }
    fn shared_name_changes(&self, _dir: &Inode) -> bool {
        self.shared_names
    }
    fn revalidates(&self) -> bool {
        self.changes_behind
    }
    fn revalidate(&self, d: &Inode, name: &[u8], inode: Option<&Inode>) -> bool {
        let m = dir(d).expect("dir").lock();
        match (m.get(name), inode) {
            (None, None) => true,
            (Some(i), Some(j)) => std::ptr::eq::<Inode>(&**i, j),
            _ => false,
        }
    }
}
