//! Unit tests of the server: requests' helpers and the node-level calls they make.

use super::locks::lock_request;
use super::xattr::xattr_buf;
use super::*;
use scalevfs_vfs::locks::{LockOwner, LockType, OFFSET_MAX};
use scalevfs_vfs::xattr;

/// A regular file `f` (0644, root's) in the root of `fs`'s VFS.
fn root_file(fs: &Fs) -> Node {
    let core = fs.vfs.core();
    core.node_mknod(
        &core.root_node(),
        b"f",
        libc::S_IFREG | 0o644,
        0,
        Owner { uid: 0, gid: 0 },
    )
    .unwrap()
}

/// A read-write handle of `n`, as OPEN makes it.
fn open_handle(fs: &Fs, n: &Node) -> Arc<Handle> {
    let file = fs.vfs.core().node_open(n, libc::O_RDWR).unwrap();
    fs.handle(fs.files.insert(Handle::new(n.clone(), file)))
        .unwrap()
}

#[test]
fn fuse_lock_ranges_convert_to_lock_requests() {
    let r = lock_request(LockOwner::Process(7), 42, libc::F_WRLCK as u32, 5, u64::MAX).unwrap();
    assert_eq!(
        (r.start, r.end, r.ty, r.pid),
        (5, OFFSET_MAX, LockType::Write, 42)
    );
    assert_eq!(
        lock_request(LockOwner::Process(7), 1, 99, 0, 1),
        Err(libc::EINVAL),
        "bad type"
    );
    assert_eq!(
        lock_request(
            LockOwner::Process(7),
            1,
            libc::F_RDLCK as u32,
            u64::MAX,
            u64::MAX
        ),
        Err(libc::EINVAL),
        "start beyond OFFSET_MAX"
    );
}

/// CREATE of a name that exists (made behind the kernel's back) without `O_EXCL`: an
/// open checked with the caller's credentials, `O_TRUNC` honoured, anything but a
/// regular file handed back to the kernel (`ESTALE`).
#[test]
fn create_of_an_existing_name_is_a_checked_open() {
    let fs = Fs::new(Vfs::new(scalevfs::VfsOptions::default()));
    let core = fs.vfs.core();
    let root = core.root_node();
    let user = |uid| Owner { uid, gid: uid };
    let cred = |uid| {
        move || Cred {
            uid,
            gid: uid,
            groups: Vec::new(),
        }
    };
    let f = core
        .node_mknod(&root, b"secret", libc::S_IFREG | 0o600, 0, user(1000))
        .unwrap();
    core.file_write_at(&core.node_open(&f, libc::O_WRONLY).unwrap(), b"data", 0)
        .unwrap();
    let create = |name: &[u8], flags, uid| {
        fs.create_as(&root, name, 0o644, flags, user(uid), cred(uid))
            .map(|(n, _)| n)
    };
    assert_eq!(
        create(b"secret", libc::O_RDWR, 2000).err(),
        Some(libc::EACCES),
        "someone else's 0600 file"
    );
    assert_eq!(
        create(b"secret", libc::O_RDONLY | libc::O_TRUNC, 2000).err(),
        Some(libc::EACCES),
        "O_TRUNC needs write permission"
    );
    assert_eq!(f.stat().size, 4);
    let n = create(b"secret", libc::O_WRONLY | libc::O_TRUNC, 1000).unwrap();
    assert_eq!(n.ino(), f.ino(), "the existing file, opened");
    assert_eq!(f.stat().size, 0, "O_TRUNC honoured");
    assert_eq!(
        create(b"secret", libc::O_RDWR | libc::O_EXCL, 1000).err(),
        Some(libc::EEXIST)
    );
    // A group member's access comes from the supplementary groups.
    core.node_setattr(
        &f,
        &scalevfs::frontend::SetAttr {
            mode: Some(0o640),
            gid: Some(3000),
            ..Default::default()
        },
    )
    .unwrap();
    let member = || Cred {
        uid: 2000,
        gid: 2000,
        groups: vec![3000],
    };
    fs.create_as(&root, b"secret", 0o644, libc::O_RDONLY, user(2000), member)
        .unwrap();
    // Not a regular file: the kernel must open it (a FIFO would block a worker here).
    core.node_mknod(&root, b"fifo", libc::S_IFIFO | 0o666, 0, user(0))
        .unwrap();
    core.node_mkdir(&root, b"dir", 0o777, user(0)).unwrap();
    core.node_symlink(&root, b"link", b"secret", user(0))
        .unwrap();
    for name in [&b"fifo"[..], b"dir", b"link"] {
        assert_eq!(
            create(name, libc::O_RDONLY | libc::O_NONBLOCK, 0).err(),
            Some(libc::ESTALE),
            "{name:?}"
        );
    }
    // A new name is created with the given owner.
    let n = create(b"new", libc::O_RDWR, 2000).unwrap();
    assert_eq!((n.stat().uid, n.stat().gid), (2000, 2000));
    assert_eq!(fs.stats().create_races, 7);
}

/// The unmount's last step, with a lock waiter published after its first cancel (a
/// SETLKW being dispatched when the unmount began) and a POSIX owner that will never
/// FLUSH (the connection is aborted): the waiter is answered and its thread gone, and
/// no lock is left in the lock manager.
#[test]
fn shutdown_leaves_no_waiter_and_no_lock_behind() {
    let fs = Arc::new(Fs::new(Vfs::new(scalevfs::VfsOptions::default())));
    let n = root_file(&fs);
    let open = || open_handle(&fs, &n);
    let (ha, hb) = (open(), open());
    let lock = |owner| lock_request(LockOwner::Process(owner), 1, libc::F_WRLCK as u32, 0, 9);
    // Owner 1 holds a lock through `ha`, as SETLK leaves it.
    ha.owners.lock().push(1);
    fs.locks()
        .setlk(fs.lock_ctx(&n), &lock(1).unwrap(), None)
        .unwrap();
    // Owner 2 waits for it through `hb`.
    hb.owners.lock().push(2);
    let (tx, rx) = std::sync::mpsc::channel();
    let req = lock(2).unwrap();
    fs.wait_for_lock(
        7,
        None,
        hb,
        move |fs, ctx, _, token| fs.locks().setlk(ctx, &req, token),
        move |r| tx.send(r).unwrap(),
    );
    assert_eq!(fs.stats().waiting, 1);
    drop(ha);
    fs.shutdown().unwrap();
    let answer = rx
        .try_recv()
        .expect("the waiter answered before shutdown returned");
    assert!(matches!(answer, Err(Errno::EINTR) | Ok(())), "{answer:?}");
    assert_eq!(fs.stats().waiting, 0);
    assert!(fs.waits.threads_is_empty(), "its thread was joined");
    assert_eq!(
        fs.locks().list().len(),
        0,
        "no lock left: {}",
        fs.vfs.proc_locks()
    );
    assert_eq!((fs.stats().open_files, fs.stats().nodes), (0, 0));
}

/// The node-level xattr calls the four requests make, with a caller's credentials:
/// size queries and `ERANGE`, the set flags, `trusted.*` hidden from and refused to a
/// caller who is not root; and no buffer beyond `XATTR_SIZE_MAX` whatever a request
/// asks for.
#[test]
fn xattr_requests_run_with_the_callers_credentials() {
    let fs = Fs::new(Vfs::new(scalevfs::VfsOptions::default()));
    let core = fs.vfs.core();
    let f = root_file(&fs);
    let (admin, user) = (
        Cred::root(),
        Cred {
            uid: 1000,
            gid: 1000,
            groups: vec![],
        },
    );
    core.node_setxattr(&f, &admin, b"user.a", b"abc", 0)
        .unwrap();
    core.node_setxattr(&f, &admin, b"trusted.t", b"t", 0)
        .unwrap();
    assert_eq!(
        core.node_setxattr(&f, &admin, b"user.a", b"x", libc::XATTR_CREATE),
        Err(Errno::EEXIST)
    );
    assert_eq!(
        core.node_setxattr(&f, &admin, b"user.b", b"x", libc::XATTR_REPLACE),
        Err(Errno::ENODATA)
    );
    assert_eq!(core.node_getxattr(&f, &user, b"user.a", &mut []), Ok(3));
    assert_eq!(
        core.node_getxattr(&f, &user, b"user.a", &mut [0; 2]),
        Err(Errno::ERANGE)
    );
    let mut buf = xattr_buf(100);
    assert_eq!(core.node_getxattr(&f, &user, b"user.a", &mut buf), Ok(3));
    assert_eq!(&buf[..3], b"abc");
    assert_eq!(
        core.node_getxattr(&f, &user, b"trusted.t", &mut buf),
        Err(Errno::ENODATA)
    );
    assert_eq!(core.node_listxattr(&f, &user, &mut []), Ok(7), "user.a\\0");
    assert_eq!(core.node_listxattr(&f, &admin, &mut []), Ok(17));
    assert_eq!(
        core.node_setxattr(&f, &user, b"user.a", b"x", 0),
        Err(Errno::EACCES),
        "0644, not the owner"
    );
    assert_eq!(
        core.node_removexattr(&f, &user, b"trusted.t"),
        Err(Errno::EPERM)
    );
    core.node_removexattr(&f, &admin, b"trusted.t").unwrap();
    assert_eq!(
        core.node_removexattr(&f, &admin, b"trusted.t"),
        Err(Errno::ENODATA)
    );
    assert_eq!(xattr_buf(0).len(), 0, "a size query");
    assert_eq!(xattr_buf(u32::MAX).len(), xattr::XATTR_SIZE_MAX);
}

#[test]
fn supplementary_groups_come_from_status_when_the_fs_ids_match() {
    let status = "Name:\tx\nUid:\t1\t2\t3\t1000\nGid:\t4\t5\t6\t100\nGroups:\t7 8 \n";
    assert_eq!(status_groups(status, 1000, 100), Some(vec![7, 8]));
    assert_eq!(status_groups(status, 1, 100), None, "fsuid differs");
    assert_eq!(status_groups(status, 1000, 4), None, "fsgid differs");
    let none = "Uid:\t0\t0\t0\t0\nGid:\t0\t0\t0\t0\nGroups:\t\n";
    assert_eq!(status_groups(none, 0, 0), Some(vec![]));
    assert_eq!(status_groups("Uid:\t0\t0\t0\t0\n", 0, 0), None);
    assert_eq!(status_groups("garbage", 0, 0), None);
}

#[test]
fn times_before_the_epoch_are_twos_complement_seconds() {
    let t = |sec, nsec| fuse_time(Timespec { sec, nsec });
    assert_eq!(t(2, 7), (2, 7));
    assert_eq!(t(-1, 500_000_000), (u64::MAX, 500_000_000));
    let (sec, nsec) = t(-2_208_988_800, 3);
    assert_eq!((sec as i64, nsec), (-2_208_988_800, 3));
    assert_eq!(t(i64::MIN, 999_999_999).0, 1 << 63);
}

#[test]
fn pending_signals_are_read_from_status_without_the_blocked_ones() {
    let status =
        |pnd, shd, blk| format!("Name:\tx\nSigPnd:\t{pnd}\nShdPnd:\t{shd}\nSigBlk:\t{blk}\n");
    let read = |s: String| super::locks::status_pending_signals(&s);
    let p = |own, shared| Some(super::locks::PendingSignals { own, shared });
    let (none, usr1) = ("0000000000000000", "0000000000000200");
    assert_eq!(read(status(none, none, none)), p(false, false));
    assert_eq!(read(status(usr1, none, none)), p(true, false));
    assert_eq!(read(status(none, usr1, none)), p(false, true));
    assert_eq!(read(status(usr1, usr1, usr1)), p(false, false), "blocked");
    assert_eq!(read(status(usr1, none, "0000000000000400")), p(true, false));
    assert_eq!(read("SigPnd:\t0\nShdPnd:\t0\n".into()), None, "no SigBlk");
    assert_eq!(read(status("zz", none, none)), None);
}

/// A lock request that came through io_uring, from a thread whose signal is pending when
/// the server sees it (the kernel sent the request without its interrupt), does not wait:
/// it is answered `EINTR`. A caller without a pending signal waits as usual. The caller
/// here is a stopped child process, whose signals stay pending.
#[test]
fn a_ring_caller_with_a_pending_signal_is_not_left_waiting() {
    let fs = Arc::new(Fs::new(Vfs::new(scalevfs::VfsOptions::default())));
    let n = root_file(&fs);
    let open = || open_handle(&fs, &n);
    let lock = |owner| lock_request(LockOwner::Process(owner), 1, libc::F_WRLCK as u32, 0, 9);
    let held = open();
    held.owners.lock().push(1);
    fs.locks()
        .setlk(fs.lock_ctx(&n), &lock(1).unwrap(), None)
        .unwrap();

    // SAFETY: the child only waits for signals until it is killed.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0);
    if pid == 0 {
        loop {
            // SAFETY: sleeps until a signal comes.
            unsafe { libc::pause() };
        }
    }
    let mut status = 0;
    // SAFETY: stops our own child and waits until it has stopped.
    unsafe {
        libc::kill(pid, libc::SIGSTOP);
        assert_eq!(libc::waitpid(pid, &mut status, libc::WUNTRACED), pid);
    }
    assert!(libc::WIFSTOPPED(status));

    let wait = |unique, owner: u64| {
        let (tx, rx) = std::sync::mpsc::channel();
        let req = lock(owner).unwrap();
        let h = open();
        h.owners.lock().push(owner);
        fs.wait_for_lock(
            unique,
            Some(pid as u32),
            h,
            move |fs, ctx, _, token| fs.locks().setlk(ctx, &req, token),
            move |r| tx.send(r).unwrap(),
        );
        rx
    };
    // No signal pending: the request waits for the lock.
    let waiting = wait(8, 2);
    std::thread::sleep(std::time::Duration::from_millis(50));
    assert!(waiting.try_recv().is_err(), "it waits");
    assert_eq!(fs.stats().lost_interrupts, 0);
    // A signal for the process stays pending while it is stopped: the next wait is cut.
    // SAFETY: signals our own (stopped) child.
    unsafe { libc::kill(pid, libc::SIGUSR1) };
    let cut = wait(9, 3);
    let answer = cut.recv_timeout(std::time::Duration::from_secs(60));
    assert_eq!(answer, Ok(Err(Errno::EINTR)));
    assert_eq!(fs.stats().lost_interrupts, 1);

    // SAFETY: ends and reaps our own child.
    unsafe {
        libc::kill(pid, libc::SIGKILL);
        libc::waitpid(pid, &mut status, 0);
    }
    fs.shutdown().unwrap();
    assert!(matches!(waiting.try_recv(), Ok(Err(Errno::EINTR) | Ok(()))));
}
