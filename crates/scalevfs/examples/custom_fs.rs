//! A file system of one's own under the VFS: `StaticFs` serves a fixed set of read-only
//! files from memory by implementing the `FileSystem` trait; mounted on `/data`, it is
//! used through the same calls as the root tmpfs.
//!
//! Run with `cargo run --release -p scalevfs --example custom_fs`.

use std::sync::{Arc, Mutex};

use scalevfs::fs::{DirEmit, FileSystem, Inode, InodeRef, NewInode, SuperBlock};
use scalevfs::libc;
use scalevfs::{Dir, Errno, FileType, ProcessBuilder, SysResult, Vfs, VfsOptions};

/// Read-only files, named and filled when the file system is made.
struct StaticFs {
    files: Vec<(&'static str, &'static [u8])>,
}

/// The root directory's entries: (name, inode), in the order `readdir` reports them.
type Entries = Mutex<Vec<(Vec<u8>, InodeRef)>>;

fn entries(dir: &Inode) -> SysResult<&Entries> {
    dir.private::<Entries>().ok_or(Errno::ENOTDIR)
}

impl FileSystem for StaticFs {
    fn fs_type(&self) -> &'static str {
        "staticfs"
    }
    fn fill_super(&self, sb: &SuperBlock) -> SysResult<InodeRef> {
        let mut children = Vec::new();
        for (ino, (name, data)) in (2..).zip(&self.files) {
            let file = sb.new_inode(NewInode {
                ino,
                mode: libc::S_IFREG | 0o444,
                uid: 0,
                gid: 0,
                nlink: 1,
                rdev: 0,
                private: Box::new(data.to_vec()),
            });
            file.set_size(u64::try_from(data.len()).map_err(|_| Errno::EFBIG)?);
            children.push((name.as_bytes().to_vec(), file));
        }
        Ok(sb.new_inode(NewInode {
            ino: 1,
            mode: libc::S_IFDIR | 0o555,
            uid: 0,
            gid: 0,
            nlink: 2,
            rdev: 0,
            private: Box::new(Entries::new(children)),
        }))
    }
    fn kill_sb(&self, root: &Inode) {
        if let Ok(e) = entries(root) {
            e.lock().map(|mut e| e.clear()).ok();
        }
    }
    fn evict_inode(&self, _inode: &Inode) {}
    fn lookup(&self, dir: &Inode, name: &[u8]) -> SysResult<Option<InodeRef>> {
        let e = entries(dir)?.lock().map_err(|_| Errno::EIO)?;
        Ok(e.iter().find(|(n, _)| n == name).map(|(_, i)| i.clone()))
    }
    /// Positions: 0 is `.`, 1 is `..`, `2 + i` the i-th file.
    fn readdir(
        &self,
        dir: &Inode,
        parent_ino: u64,
        pos: i64,
        emit: &mut dyn FnMut(DirEmit<'_>) -> bool,
    ) -> SysResult<bool> {
        let e = entries(dir)?.lock().map_err(|_| Errno::EIO)?;
        let dots = [(&b"."[..], dir.ino), (&b".."[..], parent_ino)];
        let all = dots
            .into_iter()
            .map(|(n, ino)| (n, ino, libc::DT_DIR))
            .chain(e.iter().map(|(n, i)| (&n[..], i.ino, libc::DT_REG)));
        for (at, (name, ino, d_type)) in (0..).zip(all).skip(usize::try_from(pos).unwrap_or(0)) {
            let next_pos = at + 1;
            if !emit(DirEmit {
                ino,
                next_pos,
                d_type,
                name,
            }) {
                return Ok(false);
            }
        }
        Ok(true)
    }
    fn read(&self, inode: &Inode, off: u64, buf: &mut [u8]) -> SysResult<usize> {
        let data = inode.private::<Vec<u8>>().ok_or(Errno::EISDIR)?;
        let from = data.len().min(usize::try_from(off).unwrap_or(usize::MAX));
        let n = buf.len().min(data.len() - from);
        buf[..n].copy_from_slice(&data[from..from + n]);
        Ok(n)
    }
    fn write(&self, _: &Inode, _: u64, _: &[u8]) -> SysResult<usize> {
        Err(Errno::EROFS)
    }
    fn setsize(&self, _: &Inode, _: u64) -> SysResult<()> {
        Err(Errno::EROFS)
    }
    fn fallocate(&self, _: &Inode, _: i32, _: u64, _: u64) -> SysResult<()> {
        Err(Errno::EOPNOTSUPP)
    }
    /// No holes: data everywhere up to the size.
    fn seek_data(&self, inode: &Inode, off: u64, data: bool) -> SysResult<u64> {
        Ok(if data { off } else { inode.size() })
    }
    fn readlink(&self, _: &Inode) -> SysResult<Vec<u8>> {
        Err(Errno::EINVAL)
    }
    fn blocks(&self, _: &Inode) -> u64 {
        0
    }
}

fn main() -> Result<(), Errno> {
    let vfs = Vfs::new(VfsOptions::default());
    let p = ProcessBuilder::new(&vfs).build()?;
    p.mkdir("/data", 0o755)?;
    vfs.mount(
        "/data",
        Arc::new(StaticFs {
            files: vec![("motd", b"welcome\n"), ("version", b"1.0\n")],
        }),
    )?;

    let data = Dir::open_ambient(&p, "/data")?;
    for entry in data.entries()? {
        let entry = entry?;
        assert_eq!(entry.file_type(), FileType::Regular);
        let content = data.read(entry.file_name())?;
        println!("{:?}: {} bytes", entry.file_name(), content.len());
    }
    assert_eq!(data.read("motd")?, b"welcome\n");
    assert_eq!(data.create("new").err(), Some(Errno::EACCES), "no create");
    assert_eq!(
        data.remove_file("motd").err(),
        Some(Errno::EPERM),
        "no unlink"
    );
    println!("staticfs is read-only, as its FileSystem implementation says");
    drop(data);
    vfs.umount("/data")?;
    Ok(())
}

#[test]
fn example_runs() {
    main().unwrap();
}
