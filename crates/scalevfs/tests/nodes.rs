//! mknodat and named pipes, statx, statfs, close_range. The non-blocking FIFO sequence,
//! device and socket nodes, statx and statfs also run on the host (real system calls on a
//! fresh directory under /dev/shm) and the results are compared; the blocking rendezvous
//! of named pipes is checked with threads.

use std::ffi::CString;
use std::sync::Arc;
use std::time::Duration;

use libc::{O_NONBLOCK, O_RDONLY, O_RDWR, O_WRONLY, S_IFBLK, S_IFCHR, S_IFIFO, S_IFSOCK};
use scalevfs::{CancelToken, Credentials, Errno, Locking, Process, Vfs, VfsOptions};

/// The calls a sequence makes, on the host or on scalevfs. Results are `Ok(value)` or
/// `Err(errno)`.
trait Sys {
    fn mknod(&self, path: &str, mode: u32, dev: u64) -> Result<i64, i32>;
    fn open(&self, path: &str, flags: i32) -> Result<i64, i32>;
    fn read(&self, fd: i64, n: usize) -> Result<Vec<u8>, i32>;
    fn write(&self, fd: i64, data: &[u8]) -> Result<i64, i32>;
    fn close(&self, fd: i64) -> Result<i64, i32>;
    /// `poll` of one fd for IN|OUT with no timeout: the revents.
    fn poll(&self, fd: i64) -> Result<i64, i32>;
    fn stat(&self, path: &str) -> Result<(u32, u64, i64), i32>;
    fn unlink(&self, path: &str) -> Result<i64, i32>;
}

struct Host {
    dir: String,
}

fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

fn check(r: i64) -> Result<i64, i32> {
    if r < 0 {
        Err(errno())
    } else {
        Ok(r)
    }
}

impl Host {
    fn c(&self, path: &str) -> CString {
        CString::new(format!("{}/{path}", self.dir)).unwrap()
    }
}

impl Sys for Host {
    fn mknod(&self, path: &str, mode: u32, dev: u64) -> Result<i64, i32> {
        // SAFETY: a NUL-terminated path.
        check(unsafe { libc::mknod(self.c(path).as_ptr(), mode, dev) } as i64)
    }
    fn open(&self, path: &str, flags: i32) -> Result<i64, i32> {
        // SAFETY: as above.
        check(unsafe { libc::open(self.c(path).as_ptr(), flags | libc::O_CLOEXEC) } as i64)
    }
    fn read(&self, fd: i64, n: usize) -> Result<Vec<u8>, i32> {
        let mut b = vec![0u8; n];
        // SAFETY: a writable buffer of `n` bytes.
        let r = check(unsafe { libc::read(fd as i32, b.as_mut_ptr().cast(), n) } as i64)?;
        b.truncate(r as usize);
        Ok(b)
    }
    fn write(&self, fd: i64, data: &[u8]) -> Result<i64, i32> {
        // SAFETY: a readable buffer.
        check(unsafe { libc::write(fd as i32, data.as_ptr().cast(), data.len()) } as i64)
    }
    fn close(&self, fd: i64) -> Result<i64, i32> {
        // SAFETY: our own descriptor.
        check(unsafe { libc::close(fd as i32) } as i64)
    }
    fn poll(&self, fd: i64) -> Result<i64, i32> {
        let mut p = libc::pollfd {
            fd: fd as i32,
            events: libc::POLLIN | libc::POLLOUT,
            revents: 0,
        };
        // SAFETY: one live pollfd.
        check(unsafe { libc::poll(&mut p, 1, 0) } as i64)?;
        Ok(p.revents as i64)
    }
    fn stat(&self, path: &str) -> Result<(u32, u64, i64), i32> {
        // SAFETY: a zeroed stat is a valid out-buffer.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: valid pointers.
        check(unsafe { libc::lstat(self.c(path).as_ptr(), &mut st) } as i64)?;
        Ok((st.st_mode, st.st_rdev, st.st_size))
    }
    fn unlink(&self, path: &str) -> Result<i64, i32> {
        // SAFETY: a NUL-terminated path.
        check(unsafe { libc::unlink(self.c(path).as_ptr()) } as i64)
    }
}

struct Ours(Process);

fn e<T>(r: Result<T, Errno>) -> Result<T, i32> {
    r.map_err(|e| e.0)
}

impl Sys for Ours {
    fn mknod(&self, path: &str, mode: u32, dev: u64) -> Result<i64, i32> {
        e(self.0.mknodat(libc::AT_FDCWD, path, mode, dev)).map(|()| 0)
    }
    fn open(&self, path: &str, flags: i32) -> Result<i64, i32> {
        e(self.0.open(path, flags | libc::O_CLOEXEC, 0)).map(|fd| fd as i64)
    }
    fn read(&self, fd: i64, n: usize) -> Result<Vec<u8>, i32> {
        let mut b = vec![0u8; n];
        let r = e(self.0.read(fd as i32, &mut b))?;
        b.truncate(r);
        Ok(b)
    }
    fn write(&self, fd: i64, data: &[u8]) -> Result<i64, i32> {
        e(self.0.write(fd as i32, data)).map(|n| n as i64)
    }
    fn close(&self, fd: i64) -> Result<i64, i32> {
        e(self.0.close(fd as i32)).map(|()| 0)
    }
    fn poll(&self, fd: i64) -> Result<i64, i32> {
        let mut p = [libc::pollfd {
            fd: fd as i32,
            events: libc::POLLIN | libc::POLLOUT,
            revents: 0,
        }];
        e(self.0.poll(&mut p, 0))?;
        Ok(p[0].revents as i64)
    }
    fn stat(&self, path: &str) -> Result<(u32, u64, i64), i32> {
        e(self.0.lstat(path)).map(|s| (s.mode, s.rdev, s.size))
    }
    fn unlink(&self, path: &str) -> Result<i64, i32> {
        e(self.0.unlink(path)).map(|()| 0)
    }
}

/// The sequence: every result, in order (descriptor numbers are left out: they differ).
fn sequence(s: &dyn Sys) -> Vec<String> {
    let mut out = Vec::new();
    let mut log = |what: &str, r: String| out.push(format!("{what}: {r}"));
    log("mkfifo", format!("{:?}", s.mknod("p", S_IFIFO | 0o644, 0)));
    log(
        "mkfifo again",
        format!("{:?}", s.mknod("p", S_IFIFO | 0o644, 0)),
    );
    log("stat", format!("{:?}", s.stat("p")));
    log(
        "writer without reader",
        format!("{:?}", s.open("p", O_WRONLY | O_NONBLOCK).map(|_| ())),
    );
    let r = s.open("p", O_RDONLY | O_NONBLOCK).unwrap();
    log("read, no writer ever", format!("{:?}", s.read(r, 10)));
    log("poll, no writer ever (no HUP)", format!("{:?}", s.poll(r)));
    let w = s.open("p", O_WRONLY | O_NONBLOCK).unwrap();
    log("poll writer", format!("{:?}", s.poll(w)));
    log("read, writer, empty", format!("{:?}", s.read(r, 10)));
    log("write", format!("{:?}", s.write(w, b"hello")));
    log("poll reader, data", format!("{:?}", s.poll(r)));
    log("read", format!("{:?}", s.read(r, 3)));
    log("read rest", format!("{:?}", s.read(r, 10)));
    log("write to reader fd", format!("{:?}", s.write(r, b"x")));
    log("read from writer fd", format!("{:?}", s.read(w, 1)));
    log("close writer", format!("{:?}", s.close(w)));
    log("poll reader, writer gone (HUP)", format!("{:?}", s.poll(r)));
    log("read, writer gone", format!("{:?}", s.read(r, 10)));
    log("close reader", format!("{:?}", s.close(r)));
    // O_RDWR never waits and talks to itself; data goes with the last close.
    let rw = s.open("p", O_RDWR | O_NONBLOCK).unwrap();
    log("poll rdwr", format!("{:?}", s.poll(rw)));
    log("write rdwr", format!("{:?}", s.write(rw, b"abc")));
    log("poll rdwr, data", format!("{:?}", s.poll(rw)));
    log("close rdwr", format!("{:?}", s.close(rw)));
    let rw = s.open("p", O_RDWR | O_NONBLOCK).unwrap();
    log("reopened: data gone", format!("{:?}", s.read(rw, 10)));
    log("unlink while open", format!("{:?}", s.unlink("p")));
    log("write after unlink", format!("{:?}", s.write(rw, b"z")));
    log("read after unlink", format!("{:?}", s.read(rw, 10)));
    log("close", format!("{:?}", s.close(rw)));
    // Other node types.
    log("mknod regular", format!("{:?}", s.mknod("r", 0o600, 0)));
    log("stat regular", format!("{:?}", s.stat("r")));
    log(
        "mknod socket",
        format!("{:?}", s.mknod("s", S_IFSOCK | 0o600, 0)),
    );
    log(
        "open socket",
        format!("{:?}", s.open("s", O_RDONLY).map(|_| ())),
    );
    // Major 240-254: "local/experimental use", no driver on any machine.
    let dev = libc::makedev(250, 7);
    log(
        "mknod char",
        format!("{:?}", s.mknod("c", S_IFCHR | 0o666, dev)),
    );
    log("stat char", format!("{:?}", s.stat("c")));
    log(
        "open char",
        format!("{:?}", s.open("c", O_RDONLY).map(|_| ())),
    );
    log(
        "mknod block",
        format!("{:?}", s.mknod("b", S_IFBLK | 0o600, dev)),
    );
    log(
        "open block",
        format!("{:?}", s.open("b", O_RDWR).map(|_| ())),
    );
    log(
        "mknod dir",
        format!("{:?}", s.mknod("d", libc::S_IFDIR | 0o700, 0)),
    );
    log(
        "mknod bad type",
        format!("{:?}", s.mknod("x", 0o170000 | 0o600, 0)),
    );
    log(
        "mknod in missing dir",
        format!("{:?}", s.mknod("no/x", S_IFIFO, 0)),
    );
    log(
        "mknod dir type, missing dir",
        format!("{:?}", s.mknod("no/x", libc::S_IFDIR, 0)),
    );
    out
}

#[test]
fn mknod_and_named_pipes_match_the_host() {
    let root = std::path::Path::new("/dev/shm");
    // SAFETY: geteuid has no preconditions.
    let root_user = unsafe { libc::geteuid() } == 0;
    if !root.is_dir() || !root_user {
        eprintln!("no /dev/shm or not root (mknod of devices): skipping the host side");
        return;
    }
    let dir = root.join(format!("scalevfs-fifo-{}", std::process::id()));
    std::fs::create_dir(&dir).unwrap();
    let host = Host {
        dir: dir.to_str().unwrap().into(),
    };
    let want = sequence(&host);
    std::fs::remove_dir_all(&dir).unwrap();
    for locking in [Locking::Scalable, Locking::Legacy] {
        let vfs = Vfs::new(VfsOptions {
            locking,
            ..VfsOptions::default()
        });
        let ours = Ours(Process::new(&vfs, Credentials::root()));
        let got = sequence(&ours);
        for (w, g) in want.iter().zip(&got) {
            assert_eq!(w, g, "{locking:?}");
        }
        assert_eq!(want.len(), got.len());
    }
}

fn setup() -> (Arc<Vfs>, Process) {
    let vfs = Vfs::new(VfsOptions::default());
    let p = Process::new(&vfs, Credentials::root());
    p.mknodat(libc::AT_FDCWD, "/p", S_IFIFO | 0o666, 0).unwrap();
    (vfs, p)
}

/// A reader waits for a writer and a writer for a reader; they meet and talk. The waiting
/// side runs on a thread of its own, not a scoped one: when a check here fails first, the
/// test fails at once instead of joining a thread that waits for its partner forever.
#[test]
fn blocking_opens_meet() {
    let (vfs, p) = setup();
    let reader = {
        let vfs = vfs.clone();
        std::thread::spawn(move || {
            let q = Process::new(&vfs, Credentials::root());
            let fd = q.open("/p", O_RDONLY, 0).unwrap();
            let mut b = [0u8; 5];
            let n = q.read(fd, &mut b).unwrap();
            (b, n)
        })
    };
    std::thread::sleep(Duration::from_millis(20));
    let fd = p.open("/p", O_WRONLY, 0).unwrap();
    assert_eq!(p.write(fd, b"hello"), Ok(5));
    let (b, n) = reader.join().unwrap();
    assert_eq!(&b[..n], b"hello");
    p.close(fd).unwrap();
    // And the other way round: a writer waits for a reader.
    let writer = {
        let vfs = vfs.clone();
        std::thread::spawn(move || {
            let q = Process::new(&vfs, Credentials::root());
            let fd = q.open("/p", O_WRONLY, 0).unwrap();
            q.write(fd, b"back").unwrap()
        })
    };
    std::thread::sleep(Duration::from_millis(20));
    let fd = p.open("/p", O_RDONLY, 0).unwrap();
    assert_eq!(writer.join().unwrap(), 4);
    let mut b = [0u8; 8];
    assert_eq!(p.read(fd, &mut b), Ok(4));
    p.close(fd).unwrap();
}

/// A waiting open is interrupted by its cancel token (a signal) with EINTR, and leaves no
/// reader behind: a non-blocking writer then still finds none.
#[test]
fn a_waiting_open_is_interrupted() {
    let (_vfs, p) = setup();
    let cancel = CancelToken::new();
    std::thread::scope(|s| {
        let c = cancel.clone();
        s.spawn(move || {
            std::thread::sleep(Duration::from_millis(30));
            c.cancel();
        });
        assert_eq!(
            p.with_cancel(&cancel)
                .openat(libc::AT_FDCWD, "/p", O_RDONLY, 0),
            Err(Errno::EINTR)
        );
    });
    assert_eq!(p.open("/p", O_WRONLY | O_NONBLOCK, 0), Err(Errno::ENXIO));
}

/// Device nodes are root's; a FIFO is anyone's, with the umask applied.
#[test]
fn mknod_privilege_and_umask() {
    let (vfs, p) = setup();
    p.mkdirat(libc::AT_FDCWD, "/d", 0o777).unwrap();
    p.fchmodat(libc::AT_FDCWD, "/d", 0o777, 0).unwrap();
    p.mkdirat(libc::AT_FDCWD, "/ro", 0o755).unwrap();
    let u = Process::new(&vfs, Credentials::user(1000, 1000));
    assert_eq!(
        u.mknodat(
            libc::AT_FDCWD,
            "/d/c",
            S_IFCHR | 0o600,
            libc::makedev(250, 1)
        ),
        Err(Errno::EPERM)
    );
    assert_eq!(
        u.mknodat(
            libc::AT_FDCWD,
            "/ro/c",
            S_IFCHR | 0o600,
            libc::makedev(250, 1)
        ),
        Err(Errno::EACCES),
        "may_create comes first"
    );
    assert_eq!(
        u.mknodat(libc::AT_FDCWD, "/d/f", S_IFIFO | 0o666, 0),
        Ok(())
    );
    let st = u.lstat("/d/f").unwrap();
    assert_eq!(st.mode, S_IFIFO | 0o644);
    assert_eq!(st.uid, 1000);
}

/// `statx` on a file and a directory for several masks: the same mask, attributes,
/// attribute mask, block size, type and size as the host's tmpfs; the creation time is when
/// the file was made.
#[test]
fn statx_matches_the_host() {
    let root = std::path::Path::new("/dev/shm");
    if !root.is_dir() {
        eprintln!("no /dev/shm: skipping");
        return;
    }
    let dir = root.join(format!("scalevfs-statx-{}", std::process::id()));
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(dir.join("f"), b"12345").unwrap();
    let masks = [
        0,
        libc::STATX_BASIC_STATS,
        libc::STATX_ALL,
        libc::STATX_MTIME,
        libc::STATX_BTIME,
        libc::STATX_TYPE | libc::STATX_SIZE,
    ];
    let host = |path: &std::path::Path, flags: i32, mask: u32| -> Result<[u64; 6], i32> {
        let c = CString::new(path.to_str().unwrap()).unwrap();
        // SAFETY: a zeroed statx is a valid out-buffer.
        let mut sx: libc::statx = unsafe { std::mem::zeroed() };
        // SAFETY: valid pointers.
        let r = unsafe { libc::statx(libc::AT_FDCWD, c.as_ptr(), flags, mask, &mut sx) };
        if r != 0 {
            return Err(errno());
        }
        Ok([
            sx.stx_mask as u64,
            sx.stx_attributes,
            sx.stx_attributes_mask,
            sx.stx_blksize as u64,
            sx.stx_mode as u64 & libc::S_IFMT as u64,
            sx.stx_size,
        ])
    };
    let vfs = Vfs::new(VfsOptions::default());
    let p = Process::new(&vfs, Credentials::root());
    let before = p.stat("/").unwrap().mtime;
    p.mkdirat(libc::AT_FDCWD, "/d", 0o755).unwrap();
    p.write_file("/d/f", b"12345").unwrap();
    let ours = |path: &str, flags: i32, mask: u32| -> Result<[u64; 6], i32> {
        let s = e(p.statx(libc::AT_FDCWD, path, flags, mask))?;
        Ok([
            s.mask as u64,
            s.attributes,
            s.attributes_mask,
            s.blksize as u64,
            s.mode as u64 & libc::S_IFMT as u64,
            s.size,
        ])
    };
    for mask in masks {
        assert_eq!(
            ours("/d/f", 0, mask),
            host(&dir.join("f"), 0, mask),
            "file, mask {mask:#x}"
        );
        let (mut h, o) = (host(&dir, 0, mask).unwrap(), ours("/d", 0, mask).unwrap());
        h[5] = o[5]; // directory sizes differ with their entries
        assert_eq!(o, h, "directory, mask {mask:#x}");
    }
    for (flags, mask) in [
        (0, 0x8000_0000u32),
        (libc::AT_STATX_FORCE_SYNC | libc::AT_STATX_DONT_SYNC, 0),
        (0x1, 0),
    ] {
        assert_eq!(
            ours("/d/f", flags, mask),
            host(&dir.join("f"), flags, mask),
            "flags {flags:#x}, mask {mask:#x}"
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
    let sx = p
        .statx(libc::AT_FDCWD, "/d/f", 0, libc::STATX_BTIME)
        .unwrap();
    assert!(sx.btime >= before && sx.btime <= sx.ctime, "{sx:?}");
    // The mount root says so.
    let sx = p.statx(libc::AT_FDCWD, "/", 0, 0).unwrap();
    assert_ne!(sx.attributes & libc::STATX_ATTR_MOUNT_ROOT as u64, 0);
}

/// `statfs` of tmpfs and of a kernfs-free VFS's root: tmpfs's magic, block size, name
/// length and flags as the host's tmpfs reports them; the limits of a limited tmpfs.
#[test]
fn statfs_is_tmpfs() {
    /// The kernel's `struct statfs` on x86_64 (libc's lacks `f_flags`).
    #[repr(C)]
    #[derive(Default)]
    struct KStatfs {
        f_type: i64,
        f_bsize: i64,
        f_blocks: u64,
        f_bfree: u64,
        f_bavail: u64,
        f_files: u64,
        f_ffree: u64,
        f_fsid: [i32; 2],
        f_namelen: i64,
        f_frsize: i64,
        f_flags: i64,
        f_spare: [i64; 4],
    }
    let c = CString::new("/dev/shm").unwrap();
    let mut h = KStatfs::default();
    // SAFETY: a path and a writable buffer of the kernel's layout.
    if unsafe { libc::syscall(libc::SYS_statfs, c.as_ptr(), &mut h as *mut KStatfs) } != 0 {
        eprintln!("no /dev/shm: skipping");
        return;
    }
    let vfs = Vfs::new(VfsOptions {
        size_limit: Some(1 << 20),
        inode_limit: Some(100),
        ..VfsOptions::default()
    });
    let p = Process::new(&vfs, Credentials::root());
    p.write_file("/f", &[1u8; 8192]).unwrap();
    let s = p.statfs("/f").unwrap();
    assert_eq!(
        (s.f_type, s.bsize, s.namelen, s.frsize, s.flags),
        (h.f_type, h.f_bsize, h.f_namelen, h.f_frsize, h.f_flags)
    );
    assert_eq!((s.blocks, s.bfree, s.files, s.ffree), (256, 254, 100, 98));
    let fd = p.open("/f", libc::O_PATH, 0).unwrap();
    assert_eq!(p.fstatfs(fd), Ok(s), "fstatfs takes an O_PATH descriptor");
    assert_eq!(p.fstatfs(99), Err(Errno::EBADF));
}

/// `close_range`: closes the open descriptors of the range (holes and numbers past the
/// table are fine), or marks them close-on-exec; bad arguments are EINVAL.
#[test]
fn close_range_closes_or_marks() {
    let (_vfs, p) = setup();
    p.write_file("/f", b"").unwrap();
    let fds: Vec<i32> = (0..10)
        .map(|_| p.open("/f", O_RDONLY, 0).unwrap())
        .collect();
    assert_eq!(fds, (0..10).collect::<Vec<_>>());
    p.close(4).unwrap();
    assert_eq!(p.close_range(5, 3, 0), Err(Errno::EINVAL));
    assert_eq!(p.close_range(0, 1, 0x80), Err(Errno::EINVAL));
    p.close_range(3, 6, libc::CLOSE_RANGE_CLOEXEC).unwrap();
    for fd in [3, 5, 6] {
        assert_eq!(
            p.fcntl(fd, libc::F_GETFD, scalevfs::FcntlArg::None),
            Ok(libc::FD_CLOEXEC)
        );
    }
    assert_eq!(p.fcntl(2, libc::F_GETFD, scalevfs::FcntlArg::None), Ok(0));
    p.close_range(2, u32::MAX, 0).unwrap();
    assert_eq!(p.close(2), Err(Errno::EBADF));
    assert_eq!(p.close(9), Err(Errno::EBADF));
    assert_eq!(p.open("/f", O_RDONLY, 0), Ok(2), "the lowest free again");
    assert_eq!(p.syncfs(1), Ok(()));
    assert_eq!(p.syncfs(7), Err(Errno::EBADF));
}
