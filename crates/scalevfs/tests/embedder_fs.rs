//! An embedder's own file system, written against the `scalevfs` crate alone (no other
//! scalevfs crate is named here): a read-only directory holding one file and one FIFO, mounted next to
//! the root tmpfs and used through the system-call API, read-write and read-only.

use std::sync::Arc;

use scalevfs::dirent::decode_dirents;
use scalevfs::frontend::SetAttr;
use scalevfs::fs::{DirEmit, FifoSlot, FileSystem, Inode, InodeRef, NewInode, SuperBlock};
use scalevfs::libc;
use scalevfs::{Credentials, Errno, MountOptions, Process, SysResult, Vfs, VfsOptions};

const GREETING: &[u8] = b"hello from an embedded fs\n";
const ROOT_INO: u64 = 1;
const FILE_INO: u64 = 2;
const FIFO_INO: u64 = 3;

/// The file system's own data: its one file, created with the root.
#[derive(Default)]
struct GreetingFs;

/// What the root directory's inode keeps: its two entries' inodes.
struct RootDir {
    file: InodeRef,
    fifo: InodeRef,
}

impl FileSystem for GreetingFs {
    fn fs_type(&self) -> &'static str {
        "greetingfs"
    }
    fn fill_super(&self, sb: &SuperBlock) -> SysResult<InodeRef> {
        // Root owns all three; a directory has two links, the others one.
        let node = |ino, mode: u32, private: Box<dyn std::any::Any + Send + Sync>| {
            sb.new_inode(NewInode {
                ino,
                mode,
                uid: 0,
                gid: 0,
                nlink: if mode & libc::S_IFMT == libc::S_IFDIR {
                    2
                } else {
                    1
                },
                rdev: 0,
                private,
            })
        };
        let file = node(FILE_INO, libc::S_IFREG | 0o444, Box::new(()));
        file.set_size(GREETING.len() as u64);
        let fifo = node(FIFO_INO, libc::S_IFIFO | 0o666, Box::<FifoSlot>::default());
        Ok(node(
            ROOT_INO,
            libc::S_IFDIR | 0o555,
            Box::new(RootDir { file, fifo }),
        ))
    }
    fn kill_sb(&self, _root: &Inode) {}
    fn evict_inode(&self, _inode: &Inode) {}
    fn lookup(&self, dir: &Inode, name: &[u8]) -> SysResult<Option<InodeRef>> {
        let root = dir.private::<RootDir>().ok_or(Errno::ENOTDIR)?;
        Ok(match name {
            b"greeting" => Some(root.file.clone()),
            b"pipe" => Some(root.fifo.clone()),
            _ => None,
        })
    }
    fn create(&self, _: &Inode, _: &[u8], _: u32, _: u32, _: u32) -> SysResult<InodeRef> {
        Err(Errno::EROFS)
    }
    fn readdir(
        &self,
        dir: &Inode,
        parent_ino: u64,
        pos: i64,
        emit: &mut dyn FnMut(DirEmit<'_>) -> bool,
    ) -> SysResult<bool> {
        let entries: [(u64, u8, &[u8]); 4] = [
            (dir.ino, libc::DT_DIR, b"."),
            (parent_ino, libc::DT_DIR, b".."),
            (FILE_INO, libc::DT_REG, b"greeting"),
            (FIFO_INO, libc::DT_FIFO, b"pipe"),
        ];
        for (i, &(ino, d_type, name)) in entries.iter().enumerate().skip(pos.max(0) as usize) {
            let next_pos = i as i64 + 1;
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
    fn read(&self, _inode: &Inode, off: u64, buf: &mut [u8]) -> SysResult<usize> {
        let rest = GREETING.get(off as usize..).unwrap_or_default();
        let n = rest.len().min(buf.len());
        buf[..n].copy_from_slice(&rest[..n]);
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
    fn seek_data(&self, _: &Inode, off: u64, data: bool) -> SysResult<u64> {
        let len = GREETING.len() as u64;
        match (off < len, data) {
            (false, _) => Err(Errno::ENXIO),
            (true, true) => Ok(off),
            (true, false) => Ok(len),
        }
    }
    fn readlink(&self, _: &Inode) -> SysResult<Vec<u8>> {
        Err(Errno::EINVAL)
    }
    fn blocks(&self, _: &Inode) -> u64 {
        0
    }
    fn fifo<'a>(&self, inode: &'a Inode) -> Option<&'a FifoSlot> {
        inode.private::<FifoSlot>()
    }
}

fn mounted() -> (Arc<Vfs>, Process) {
    mounted_with(MountOptions::new())
}

fn mounted_with(opts: MountOptions) -> (Arc<Vfs>, Process) {
    let vfs = Vfs::new(VfsOptions::default());
    let p = Process::new(&vfs, Credentials::root());
    p.mkdirat(libc::AT_FDCWD, "/mnt", 0o755).unwrap();
    p.mount_with("/mnt", Arc::new(GreetingFs), opts).unwrap();
    (vfs, p)
}

#[test]
fn an_embedders_file_system_serves_reads_and_directory_listings() {
    let (_vfs, p) = mounted();
    let fd = p
        .openat(libc::AT_FDCWD, "/mnt/greeting", libc::O_RDONLY, 0)
        .unwrap();
    let mut buf = [0u8; 64];
    let n = p.read(fd, &mut buf).unwrap();
    assert_eq!(&buf[..n], GREETING);
    assert_eq!(p.read(fd, &mut buf).unwrap(), 0, "end of file");
    p.close(fd).unwrap();

    let dir = p
        .openat(
            libc::AT_FDCWD,
            "/mnt",
            libc::O_RDONLY | libc::O_DIRECTORY,
            0,
        )
        .unwrap();
    let mut dents = [0u8; 4096];
    let n = p.getdents64(dir, &mut dents).unwrap();
    let names: Vec<Vec<u8>> = decode_dirents(&dents[..n])
        .into_iter()
        .map(|e| e.name)
        .collect();
    assert_eq!(names, [&b"."[..], b"..", b"greeting", b"pipe"]);
    p.close(dir).unwrap();
}

#[test]
fn the_file_systems_errors_reach_the_caller_as_errno_values() {
    let (_vfs, p) = mounted();
    let e = p
        .openat(
            libc::AT_FDCWD,
            "/mnt/new",
            libc::O_CREAT | libc::O_WRONLY,
            0o644,
        )
        .unwrap_err();
    assert_eq!(e, Errno::EROFS);
    assert_eq!(
        p.openat(libc::AT_FDCWD, "/mnt/missing", libc::O_RDONLY, 0)
            .unwrap_err(),
        Errno::ENOENT
    );
    // Errno is an error type: a name and strerror text, and an io::Error of that errno.
    assert!(e.to_string().starts_with("EROFS: "), "{e}");
    let io: std::io::Error = e.into();
    assert_eq!(io.raw_os_error(), Some(libc::EROFS));
}

#[test]
fn a_read_only_mount_refuses_changes_before_the_file_system_sees_them() {
    const F: &str = "/mnt/greeting";
    let at = libc::AT_FDCWD;
    // Read-write, the file system's own answers: root opens the 0444 file for writing
    // (DAC override), and the write is what fails.
    let (_vfs, p) = mounted();
    let fd = p.openat(at, F, libc::O_WRONLY, 0).unwrap();
    assert_eq!(p.write(fd, b"x"), Err(Errno::EROFS));
    // Open for writing: a remount read-only must wait for the close.
    let ro = MountOptions::new().read_only(true);
    assert_eq!(p.remount("/mnt", ro), Err(Errno::EBUSY));
    p.close(fd).unwrap();
    // An open whose truncation the file system refuses leaves no write access behind.
    assert_eq!(
        p.openat(at, F, libc::O_WRONLY | libc::O_TRUNC, 0),
        Err(Errno::EROFS)
    );
    p.remount("/mnt", ro).unwrap();
    p.remount("/mnt", MountOptions::new()).unwrap();
    assert_eq!(p.statfs("/mnt").unwrap().flags & libc::ST_RDONLY as i64, 0);
    // A read moves the atime here (relatime: it was not newer than the mtime).
    let atime = p.stat(F).unwrap().atime;
    let fd = p.openat(at, F, libc::O_RDONLY, 0).unwrap();
    p.read(fd, &mut [0u8; 8]).unwrap();
    p.close(fd).unwrap();
    assert_ne!(p.stat(F).unwrap().atime, atime);

    let (vfs, p) = mounted_with(MountOptions::new().read_only(true));
    let atime = p.stat(F).unwrap().atime;
    for flags in [libc::O_WRONLY, libc::O_RDWR, libc::O_RDONLY | libc::O_TRUNC] {
        assert_eq!(p.openat(at, F, flags, 0), Err(Errno::EROFS), "{flags:#x}");
    }
    assert_eq!(p.truncate(F, 0), Err(Errno::EROFS));
    assert_eq!(p.fchmodat(at, F, 0o644, 0), Err(Errno::EROFS));
    assert_eq!(p.fchownat(at, F, 1, 1, 0), Err(Errno::EROFS));
    assert_eq!(p.utimensat(at, F, None, 0), Err(Errno::EROFS));
    assert_eq!(p.faccessat(at, F, libc::W_OK, 0), Err(Errno::EROFS));
    assert_eq!(p.setxattr(F, b"user.x", b"v", 0), Err(Errno::EROFS));
    assert_eq!(p.unlinkat(at, F, 0), Err(Errno::EROFS));
    assert_eq!(p.unlinkat(at, "/mnt/missing", 0), Err(Errno::EROFS));
    assert_eq!(p.linkat(at, F, at, "/mnt/again", 0), Err(Errno::EROFS));
    assert_eq!(p.linkat(at, F, at, "/elsewhere", 0), Err(Errno::EXDEV));
    assert_eq!(p.mkdirat(at, "/mnt/d", 0o755), Err(Errno::EROFS));
    // Reads work, and leave the atime alone.
    let fd = p.openat(at, F, libc::O_RDONLY, 0).unwrap();
    let mut buf = [0u8; 64];
    let n = p.read(fd, &mut buf).unwrap();
    assert_eq!(&buf[..n], GREETING);
    assert_eq!(p.fchmod(fd, 0o644), Err(Errno::EROFS));
    p.close(fd).unwrap();
    assert_eq!(p.faccessat(at, F, libc::R_OK, 0), Ok(()));
    assert_eq!(
        p.stat(F).unwrap().atime,
        atime,
        "no atime on a read-only mount"
    );
    let flags = p.statfs("/mnt").unwrap().flags;
    assert_ne!(flags & libc::ST_RDONLY as i64, 0, "statfs says read-only");
    // The front ends' handle API (FUSE's SETATTR) refuses too.
    let c = vfs.core();
    let file = c.node_lookup(&c.node_lookup(&c.root_node(), b"mnt").unwrap(), b"greeting");
    let file = file.unwrap();
    for set in [
        SetAttr {
            size: Some(0),
            ..SetAttr::default()
        },
        SetAttr {
            size: Some(0),
            by_file: true,
            ..SetAttr::default()
        },
        SetAttr {
            mode: Some(0o600),
            ..SetAttr::default()
        },
    ] {
        assert_eq!(c.node_setattr(&file, &set), Err(Errno::EROFS), "{set:?}");
    }
    drop(file);
    // The mount point's own file system stays writable around it, and the mount comes off.
    p.mkdirat(at, "/elsewhere", 0o755).unwrap();
    p.umount2("/mnt", 0).unwrap();
    p.mkdirat(at, "/mnt/d", 0o755).unwrap();
}

/// A FIFO's writes move its mtime and ctime and its reads its atime, as Linux's
/// `pipe_write` and `pipe_read` do; on a read-only mount it is still written and read,
/// and its times stay.
#[test]
fn fifo_io_moves_the_times_except_on_a_read_only_mount() {
    const P: &str = "/mnt/pipe";
    let tick = std::time::Duration::from_millis(25); // past a coarse clock tick
    for read_only in [false, true] {
        let (_vfs, p) = mounted_with(MountOptions::new().read_only(read_only));
        let fd = p.openat(libc::AT_FDCWD, P, libc::O_RDWR, 0).unwrap();
        let before = p.stat(P).unwrap();
        std::thread::sleep(tick);
        assert_eq!(p.write(fd, b"ab"), Ok(2));
        let written = p.stat(P).unwrap();
        std::thread::sleep(tick);
        let mut buf = [0u8; 2];
        assert_eq!(p.read(fd, &mut buf), Ok(2));
        assert_eq!(&buf, b"ab");
        let read = p.stat(P).unwrap();
        p.close(fd).unwrap();
        let times = |st: &scalevfs::Stat| (st.atime, st.mtime, st.ctime);
        if read_only {
            assert_eq!(times(&read), times(&before), "read-only: no time moves");
        } else {
            assert!(written.mtime > before.mtime && written.ctime > before.ctime);
            assert_eq!(written.atime, before.atime, "a write leaves the atime");
            assert!(read.atime > written.atime, "relatime: atime was not newer");
            assert_eq!((read.mtime, read.ctime), (written.mtime, written.ctime));
        }
    }
}
