//! The typed layer: `Dir` confinement (`RESOLVE_BENEATH` and `RESOLVE_IN_ROOT`), its
//! namespace operations, `File` as `std::io` `Read`/`Write`/`Seek`, typed locks, xattrs,
//! directory listings, epoll on a pipe, `Metadata`.

use std::ffi::OsStr;
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::time::{Duration, SystemTime};

use scalevfs::{
    Credentials, Descriptor, Dir, Epoll, EpollFlags, Errno, FileType, FlockOp, LockKind, LockOwner,
    Mode, OFlags, OpenOptions, Process, RecordLock, RenameFlags, Vfs, VfsOptions, XattrFlags,
};

fn setup() -> (std::sync::Arc<Vfs>, Process) {
    let vfs = Vfs::new(VfsOptions::default());
    let p = Process::new(&vfs, Credentials::root());
    p.mkdir("/sandbox", 0o755).unwrap();
    p.mkdir("/outside", 0o755).unwrap();
    p.write_file("/outside/secret", b"s").unwrap();
    (vfs, p)
}

#[test]
fn beneath_refuses_every_way_out() {
    let (_vfs, p) = setup();
    let d = Dir::open_ambient(&p, "/sandbox").unwrap();
    d.symlink("/outside/secret", "abs").unwrap();
    d.symlink("../outside/secret", "rel").unwrap();
    d.create_dir("sub").unwrap();
    for escape in [
        "../outside/secret",
        "/outside/secret",
        "abs",
        "rel",
        "sub/../../outside/secret",
    ] {
        assert_eq!(d.open(escape).err(), Some(Errno::EXDEV), "{escape}");
        assert_eq!(d.metadata(escape).err(), Some(Errno::EXDEV), "{escape}");
    }
    // Name operations confine the parent; none follows the last component.
    assert_eq!(d.create_dir("../outside/x").err(), Some(Errno::EXDEV));
    assert_eq!(d.remove_file("../outside/secret").err(), Some(Errno::EXDEV));
    assert_eq!(d.create_dir("abs/x").err(), Some(Errno::EXDEV));
    d.remove_file("abs").unwrap();
    assert!(
        p.stat("/outside/secret").is_ok(),
        "the link went, not its target"
    );
    assert_eq!(d.remove_dir("..").err(), Some(Errno::ENOTEMPTY));
    assert_eq!(d.create_dir("..").err(), Some(Errno::EEXIST));
    // Inside is fine, `..` included.
    d.write("sub/f", b"x").unwrap();
    assert_eq!(d.read("sub/../sub/f").unwrap(), b"x");
}

#[test]
fn in_root_treats_the_directory_as_the_root() {
    let (_vfs, p) = setup();
    p.mkdir("/sandbox/outside", 0o755).unwrap();
    p.write_file("/sandbox/outside/secret", b"inner").unwrap();
    let d = Dir::open_ambient(&p, "/sandbox").unwrap().in_root();
    d.symlink("/outside/secret", "abs").unwrap();
    for path in [
        "../outside/secret",
        "/outside/secret",
        "abs",
        "../../../abs",
    ] {
        assert_eq!(d.read(path).unwrap(), b"inner", "{path}");
    }
    let sub = d.open_dir("outside").unwrap();
    // A directory opened from it is its own root, confined the same way.
    assert_eq!(sub.resolve_flags(), scalevfs::ResolveFlags::IN_ROOT);
    assert_eq!(sub.read("../../secret").unwrap(), b"inner");
    assert_eq!(sub.read("/outside/secret").err(), Some(Errno::ENOENT));
}

#[test]
fn namespace_operations_and_listing() {
    let (_vfs, p) = setup();
    let d = Dir::open_ambient(&p, "/sandbox").unwrap();
    d.create_dir_all("a/b/c").unwrap();
    d.create_dir_all("a/b/c/").unwrap();
    d.write("a/f", b"data").unwrap();
    assert_eq!(d.create_dir_all("a/f/g").err(), Some(Errno::ENOTDIR));
    d.hard_link("a/f", &d, "a/g").unwrap();
    assert_eq!(d.metadata("a/g").unwrap().nlink(), 2);
    d.symlink("f", "a/link").unwrap();
    assert_eq!(d.read_link("a/link").unwrap(), Path::new("f"));
    assert!(d.symlink_metadata("a/link").unwrap().is_symlink());
    assert!(d.metadata("a/link").unwrap().is_file());
    let other = d.open_dir("a/b").unwrap();
    d.rename("a/g", &other, "moved").unwrap();
    assert!(!d.exists("a/g") && d.exists("a/b/moved"));
    assert_eq!(
        d.rename_with("a/f", &other, "moved", RenameFlags::NOREPLACE)
            .err(),
        Some(Errno::EEXIST)
    );
    d.rename_with("a/f", &other, "moved", RenameFlags::EXCHANGE)
        .unwrap();
    let mut names: Vec<(Vec<u8>, FileType)> = d
        .read_dir("a")
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (e.file_name().as_bytes().to_vec(), e.file_type())
        })
        .collect();
    names.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(
        names,
        [
            (b"b".to_vec(), FileType::Directory),
            (b"f".to_vec(), FileType::Regular),
            (b"link".to_vec(), FileType::Symlink),
        ]
    );
    // A name that is not UTF-8 comes back as the same bytes.
    let odd = OsStr::from_bytes(b"caf\xe9");
    d.write(Path::new(odd), b"").unwrap();
    assert!(d.entries().unwrap().any(|e| e.unwrap().file_name() == odd));
    d.set_permissions("a/f", Mode::octal(0o600)).unwrap();
    assert_eq!(d.metadata("a/f").unwrap().permissions(), Mode::octal(0o600));
    assert_eq!(d.remove_dir("a").err(), Some(Errno::ENOTEMPTY));
    d.remove_dir("a/b/c").unwrap();
    d.remove_file("a/f").unwrap();
    assert_eq!(d.remove_file("a/f").err(), Some(Errno::ENOENT));
    assert_eq!(d.create_dir("").err(), Some(Errno::ENOENT));
}

#[test]
fn files_are_std_io_and_close_on_drop() {
    let (_vfs, p) = setup();
    let d = Dir::open_ambient(&p, "/sandbox").unwrap();
    let fd;
    {
        let mut f = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .mode(Mode::octal(0o640))
            .open(&d, "f")
            .unwrap();
        fd = f.fd();
        f.write_all(b"hello world").unwrap();
        f.seek(SeekFrom::Start(6)).unwrap();
        let mut s = String::new();
        f.read_to_string(&mut s).unwrap();
        assert_eq!(s, "world");
        assert_eq!(f.seek(SeekFrom::End(-5)).unwrap(), 6);
        f.set_len(5).unwrap();
        let mut buf = [0u8; 5];
        assert_eq!(f.read_at(&mut buf, 0).unwrap(), 5);
        assert_eq!(&buf, b"hello");
        let m = f.metadata().unwrap();
        assert_eq!((m.len(), m.permissions()), (5, Mode::octal(0o640)));
        let age = SystemTime::now().duration_since(m.modified()).unwrap();
        assert!(age < Duration::from_secs(60), "{age:?}");
        assert_eq!(p.fcntl(fd, libc::F_GETFD, scalevfs::FcntlArg::None), Ok(1));
        // The seek error is the errno, as an io::Error.
        let e = f.seek(SeekFrom::Current(-100)).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EINVAL));
    }
    assert_eq!(p.file(fd).err(), Some(Errno::EBADF), "dropped: closed");
    assert_eq!(
        OpenOptions::new()
            .create_new(true)
            .write(true)
            .open(&d, "f")
            .err(),
        Some(Errno::EEXIST)
    );
    assert_eq!(
        d.open_with("f", &OpenOptions::new()).err(),
        Some(Errno::EINVAL)
    );
}

#[test]
fn typed_locks_between_two_processes() {
    let (vfs, p) = setup();
    let q = Process::new(&vfs, Credentials::root());
    let dp = Dir::open_ambient(&p, "/sandbox").unwrap();
    let dq = Dir::open_ambient(&q, "/sandbox").unwrap();
    dp.write("db", b"0123456789").unwrap();
    let rw = OpenOptions::new().read(true).write(true).clone();
    let fp = dp.open_with("db", &rw).unwrap();
    let fq = dq.open_with("db", &rw).unwrap();
    let head = RecordLock::new(LockKind::Write, 0, 4);
    fp.set_lock(LockOwner::Process, head, false).unwrap();
    assert_eq!(
        fq.set_lock(LockOwner::Process, head, false),
        Err(Errno::EAGAIN)
    );
    let holder = fq
        .get_lock(LockOwner::Process, RecordLock::new(LockKind::Read, 2, 1))
        .unwrap()
        .unwrap();
    assert_eq!(holder.pid, Some(p.pid()));
    assert_eq!(holder.lock, head);
    // Beyond the lock, nothing is in the way.
    let tail = RecordLock::new(LockKind::Write, 4, 0);
    assert_eq!(fq.get_lock(LockOwner::Process, tail), Ok(None));
    // OFD locks conflict with POSIX locks and report no pid.
    fq.set_lock(LockOwner::OpenFile, tail, false).unwrap();
    let ofd = fp.get_lock(LockOwner::Process, tail).unwrap().unwrap();
    assert_eq!((ofd.pid, ofd.lock.kind), (None, LockKind::Write));
    fp.set_lock(
        LockOwner::Process,
        RecordLock::new(LockKind::Unlock, 0, 0),
        false,
    )
    .unwrap();
    fq.set_lock(LockOwner::Process, head, true).unwrap();
    // flock: separate open files conflict.
    fp.flock(FlockOp::Exclusive, false).unwrap();
    assert_eq!(fq.flock(FlockOp::Shared, false), Err(Errno::EWOULDBLOCK));
    fp.flock(FlockOp::Unlock, false).unwrap();
    fq.flock(FlockOp::Shared, false).unwrap();
}

#[test]
fn xattrs_are_listed_by_name() {
    let (_vfs, p) = setup();
    let d = Dir::open_ambient(&p, "/sandbox").unwrap();
    let f = d.create("f").unwrap();
    f.set_xattr(b"user.a", b"1", XattrFlags::CREATE).unwrap();
    f.set_xattr(b"user.bb", b"22", XattrFlags::empty()).unwrap();
    assert_eq!(
        f.set_xattr(b"user.a", b"x", XattrFlags::CREATE),
        Err(Errno::EEXIST)
    );
    let mut names: Vec<Vec<u8>> = f.list_xattr().unwrap().collect();
    names.sort();
    assert_eq!(names, [b"user.a".to_vec(), b"user.bb".to_vec()]);
    assert_eq!(f.xattr(b"user.bb").unwrap(), b"22");
    f.remove_xattr(b"user.a").unwrap();
    assert_eq!(f.xattr(b"user.a"), Err(Errno::ENODATA));
    assert_eq!(d.list_xattr().unwrap().count(), 0);
}

#[test]
fn epoll_reports_a_readable_pipe() {
    let (_vfs, p) = setup();
    let (r, mut w) = p.pipe(OFlags::NONBLOCK).unwrap();
    let ep = Epoll::new(&p).unwrap();
    ep.add(&r, EpollFlags::IN, 7).unwrap();
    assert_eq!(ep.wait(4, Some(Duration::ZERO)).unwrap(), []);
    w.write_all(b"ping").unwrap();
    let evs = ep.wait(4, Some(Duration::from_secs(5))).unwrap();
    assert_eq!(evs.len(), 1);
    assert_eq!(evs[0].data, 7);
    assert!(evs[0].flags.contains(EpollFlags::IN));
    drop(w);
    let evs = ep.wait(4, None).unwrap();
    assert!(evs[0].flags.contains(EpollFlags::IN | EpollFlags::HUP));
    ep.delete(&r).unwrap();
    assert_eq!(ep.delete(&r), Err(Errno::ENOENT));
}
