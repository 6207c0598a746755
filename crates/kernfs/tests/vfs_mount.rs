//! kernfs mounted in a scalevfs `Vfs` at /sys: the system-call API on the demo tree.

use std::sync::Arc;

use scalevfs::{Credentials, Process, Vfs, VfsOptions};
use scalevfs_kernfs::demo::{demo_tree, gid_path, gid_string, DemoTree};
use scalevfs_kernfs::{Creds, FnAttr, Kernfs, KernfsFs, Locking, SetAttr};
use scalevfs_vfs::core::decode_dirents;
use scalevfs_vfs::Errno;

const RO: i32 = libc::O_RDONLY;

fn setup(locking: Locking) -> (Arc<Vfs>, Kernfs, DemoTree, Process) {
    let vfs = Vfs::new(VfsOptions {
        locking,
        ..Default::default()
    });
    let root = Process::new(&vfs, Credentials::root());
    root.mkdirat(libc::AT_FDCWD, "/sys", 0o755).unwrap();
    let k = Kernfs::new(locking);
    let demo = demo_tree(&k).unwrap();
    vfs.mount("/sys", KernfsFs::new(k.clone())).unwrap();
    (vfs, k, demo, root)
}

fn gid(i: usize) -> String {
    format!("/sys/{}", gid_path(i))
}

fn read_all(p: &Process, fd: i32, chunk: usize) -> Vec<u8> {
    let mut out = Vec::new();
    let mut buf = vec![0u8; chunk];
    loop {
        let n = p.read(fd, &mut buf).unwrap();
        if n == 0 {
            return out;
        }
        out.extend_from_slice(&buf[..n]);
    }
}

/// Writes `val` to `path` as root (a store that notifies pollers when the value changes).
fn store(vfs: &Arc<Vfs>, path: &str, val: &[u8]) {
    let w = Process::new(vfs, Credentials::root());
    let fd = w.openat(libc::AT_FDCWD, path, libc::O_WRONLY, 0).unwrap();
    assert_eq!(w.write(fd, val), Ok(val.len()));
    w.close(fd).unwrap();
}

fn names(p: &Process, dir: &str) -> Vec<String> {
    let fd = p
        .openat(libc::AT_FDCWD, dir, RO | libc::O_DIRECTORY, 0)
        .unwrap();
    let mut all = Vec::new();
    let mut buf = vec![0u8; 512];
    loop {
        let n = p.getdents64(fd, &mut buf).unwrap();
        if n == 0 {
            break;
        }
        all.extend(decode_dirents(&buf[..n]));
    }
    p.close(fd).unwrap();
    all.into_iter()
        .map(|e| String::from_utf8(e.name).unwrap())
        .collect()
}

#[test]
fn gid_files_read_in_40_byte_pieces_and_seek() {
    for locking in [Locking::Scalable, Locking::Legacy] {
        let (_vfs, _k, _d, p) = setup(locking);
        for i in [0, 7, 253] {
            let fd = p.openat(libc::AT_FDCWD, gid(i), RO, 0).unwrap();
            let mut b = [0u8; 40];
            let n = p.read(fd, &mut b).unwrap();
            assert_eq!(&b[..n], &gid_string(i).as_bytes()[..40]);
            assert_eq!(read_all(&p, fd, 3), &gid_string(i).as_bytes()[40..]);
            // lseek: back to 5 re-shows from 5; SEEK_END is relative to 4096.
            assert_eq!(p.lseek(fd, 5, libc::SEEK_SET), Ok(5));
            assert_eq!(read_all(&p, fd, 7), &gid_string(i).as_bytes()[5..]);
            assert_eq!(
                p.lseek(fd, -6, libc::SEEK_CUR),
                Ok(gid_string(i).len() as i64 - 6)
            );
            assert_eq!(p.lseek(fd, 0, libc::SEEK_END), Ok(4096));
            assert_eq!(p.lseek(fd, 1 << 31, libc::SEEK_SET), Err(Errno::EINVAL));
            assert_eq!(p.lseek(fd, -1, libc::SEEK_SET), Err(Errno::EINVAL));
            assert_eq!(p.lseek(fd, 4096, libc::SEEK_DATA), Err(Errno::ENXIO));
            p.close(fd).unwrap();
        }
    }
}

#[test]
fn stat_getdents_and_readlink() {
    let (_vfs, k, d, p) = setup(Locking::Scalable);
    let st = p.newfstatat(libc::AT_FDCWD, gid(3), 0).unwrap();
    assert_eq!(st.mode, libc::S_IFREG | 0o444);
    assert_eq!((st.size, st.nlink, st.uid, st.gid), (4096, 1, 0, 0));
    assert_eq!(st.ino, d.gids[3].ino());
    let st = p
        .newfstatat(libc::AT_FDCWD, "/sys/kernel/scalevfs/knob", 0)
        .unwrap();
    assert_eq!(st.mode, libc::S_IFREG | 0o644);
    let st = p.newfstatat(libc::AT_FDCWD, "/sys/class", 0).unwrap();
    assert_eq!(st.mode, libc::S_IFDIR | 0o755);
    assert_eq!(st.nlink, 3); // 2 + infiniband
    let link = "/sys/class/infiniband/mlx5_0/device";
    let st = p
        .newfstatat(libc::AT_FDCWD, link, libc::AT_SYMLINK_NOFOLLOW)
        .unwrap();
    assert_eq!(st.mode & libc::S_IFMT, libc::S_IFLNK);
    let mut b = [0u8; 256];
    let n = p.readlinkat(libc::AT_FDCWD, link, &mut b).unwrap();
    assert_eq!(&b[..n], b"../../../devices/pci0000:00/0000:00:03.0");
    // Following the link reaches the PCI device.
    let fd = p
        .openat(libc::AT_FDCWD, format!("{link}/vendor"), RO, 0)
        .unwrap();
    assert_eq!(read_all(&p, fd, 64), b"0x15b3\n");
    p.close(fd).unwrap();

    let gids = names(&p, "/sys/class/infiniband/mlx5_0/ports/1/gids");
    assert_eq!(gids.len(), 2 + 254);
    assert_eq!(&gids[..3], [".", "..", "0"]);
    assert_eq!(gids[255], "253");
    assert_eq!(
        names(&p, "/sys/kernel/scalevfs")[2..],
        ["knob", "gid_reads", "writes", "lock_stat"]
    );

    // The embedder's changes show through the cached dentries.
    k.setattr(
        &d.gids[3],
        &SetAttr {
            mode: Some(0o400),
            uid: Some(5),
            gid: None,
        },
    )
    .unwrap();
    let st = p.newfstatat(libc::AT_FDCWD, gid(3), 0).unwrap();
    assert_eq!((st.mode, st.uid), (libc::S_IFREG | 0o400, 5));
    k.create_dir(&d.gids_dir, "extra", 0o700, 0, 0).unwrap();
    assert!(names(&p, "/sys/class/infiniband/mlx5_0/ports/1/gids").contains(&"extra".into()));
    let st = p.newfstatat(
        libc::AT_FDCWD,
        "/sys/class/infiniband/mlx5_0/ports/1/gids/extra",
        0,
    );
    assert_eq!(st.unwrap().mode, libc::S_IFDIR | 0o700);
}

/// As on sysfs: reading an attribute file leaves its atime alone (`seq_read_iter` does
/// not call `file_accessed`), while listing a directory updates the directory's (relatime:
/// its atime starts equal to its mtime).
#[test]
fn reads_leave_atime_alone_and_getdents_updates_it() {
    for locking in [Locking::Scalable, Locking::Legacy] {
        let (_vfs, _k, _d, p) = setup(locking);
        let before = p.newfstatat(libc::AT_FDCWD, gid(5), 0).unwrap();
        let fd = p.openat(libc::AT_FDCWD, gid(5), RO, 0).unwrap();
        assert_eq!(read_all(&p, fd, 64), gid_string(5).as_bytes());
        p.close(fd).unwrap();
        let after = p.newfstatat(libc::AT_FDCWD, gid(5), 0).unwrap();
        assert_eq!(after.atime, before.atime, "{locking:?}");
        assert_eq!(before.atime, before.mtime, "{locking:?}");

        let dir = "/sys/class/infiniband/mlx5_0/ports/1";
        let before = p.newfstatat(libc::AT_FDCWD, dir, 0).unwrap();
        assert!(names(&p, dir).contains(&"gids".to_string()));
        let after = p.newfstatat(libc::AT_FDCWD, dir, 0).unwrap();
        assert!(after.atime > before.atime, "{locking:?}: {after:?}");
    }
}

#[test]
fn knob_writes_reach_store_and_its_errors_reach_the_writer() {
    let (_vfs, _k, d, p) = setup(Locking::Scalable);
    let knob = "/sys/kernel/scalevfs/knob";
    let fd = p.openat(libc::AT_FDCWD, knob, libc::O_RDWR, 0).unwrap();
    assert_eq!(p.write(fd, b"42\n"), Ok(3));
    assert_eq!(d.knob_value.load(std::sync::atomic::Ordering::Relaxed), 42);
    assert_eq!(p.write(fd, b"nope"), Err(Errno::EINVAL));
    assert_eq!(p.write(fd, b"99999999999"), Err(Errno::ERANGE));
    assert_eq!(p.pread64(fd, &mut [0u8; 16], 0), Ok(3));
    assert_eq!(p.lseek(fd, 0, libc::SEEK_SET), Ok(0));
    assert_eq!(read_all(&p, fd, 16), b"42\n");
    p.close(fd).unwrap();
    let fd = p
        .openat(libc::AT_FDCWD, "/sys/kernel/scalevfs/writes", RO, 0)
        .unwrap();
    assert_eq!(read_all(&p, fd, 16), b"1\n");
    p.close(fd).unwrap();
    let fd = p
        .openat(libc::AT_FDCWD, "/sys/kernel/scalevfs/lock_stat", RO, 0)
        .unwrap();
    let table = read_all(&p, fd, 100);
    assert!(table.starts_with(b"lock_stat version"), "{table:?}");
    assert!(table.len() <= 4095);
    p.close(fd).unwrap();
    // Read-only attribute: no w bit, EACCES even for root; O_TRUNC is accepted on the knob.
    assert_eq!(
        p.openat(libc::AT_FDCWD, gid(0), libc::O_WRONLY, 0),
        Err(Errno::EACCES)
    );
    let fd = p
        .openat(libc::AT_FDCWD, knob, libc::O_WRONLY | libc::O_TRUNC, 0)
        .unwrap();
    assert_eq!(p.write(fd, b"7"), Ok(1));
    p.close(fd).unwrap();
    assert_eq!(d.knob_value.load(std::sync::atomic::Ordering::Relaxed), 7);
}

/// A 0666 attribute without `store` (or without `show`) cannot be opened that way, even
/// by root: EACCES at open, as kernfs_fop_open picks by the ops, not EIO at write.
#[test]
fn attribute_without_a_method_refuses_open_through_the_vfs() {
    for locking in [Locking::Scalable, Locking::Legacy] {
        let (_vfs, k, _d, p) = setup(locking);
        let dir = k
            .lookup_path("kernel/scalevfs", &Creds::ROOT, true)
            .unwrap();
        k.create_file(&dir, "ro", 0o666, 0, 0, FnAttr::constant("r\n"))
            .unwrap();
        k.create_file(&dir, "wo", 0o666, 0, 0, FnAttr::wo(|_, d| Ok(d.len())))
            .unwrap();
        let at = libc::AT_FDCWD;
        for flags in [libc::O_WRONLY, libc::O_RDWR] {
            assert_eq!(
                p.openat(at, "/sys/kernel/scalevfs/ro", flags, 0),
                Err(Errno::EACCES)
            );
        }
        for flags in [RO, libc::O_RDWR] {
            assert_eq!(
                p.openat(at, "/sys/kernel/scalevfs/wo", flags, 0),
                Err(Errno::EACCES)
            );
        }
        let fd = p.openat(at, "/sys/kernel/scalevfs/ro", RO, 0).unwrap();
        assert_eq!(read_all(&p, fd, 16), b"r\n");
        p.close(fd).unwrap();
        let fd = p
            .openat(at, "/sys/kernel/scalevfs/wo", libc::O_WRONLY, 0)
            .unwrap();
        assert_eq!(p.write(fd, b"1"), Ok(1));
        p.close(fd).unwrap();
    }
}

#[test]
fn namespace_changes_are_refused_as_sysfs_does() {
    let (_vfs, _k, _d, p) = setup(Locking::Scalable);
    let dir = "/sys/kernel/scalevfs";
    let at = libc::AT_FDCWD;
    assert_eq!(
        p.mkdirat(at, format!("{dir}/new"), 0o755),
        Err(Errno::EPERM)
    );
    assert_eq!(p.symlinkat("x", at, format!("{dir}/l")), Err(Errno::EPERM));
    assert_eq!(p.unlinkat(at, format!("{dir}/knob"), 0), Err(Errno::EPERM));
    assert_eq!(p.unlinkat(at, dir, libc::AT_REMOVEDIR), Err(Errno::EPERM));
    assert_eq!(
        p.renameat2(at, format!("{dir}/knob"), at, format!("{dir}/k2"), 0),
        Err(Errno::EPERM)
    );
    assert_eq!(
        p.openat(
            at,
            format!("{dir}/new"),
            libc::O_CREAT | libc::O_WRONLY,
            0o644
        ),
        Err(Errno::EACCES)
    );
    assert_eq!(
        p.openat(
            at,
            format!("{dir}/knob"),
            libc::O_CREAT | libc::O_EXCL | libc::O_WRONLY,
            0
        ),
        Err(Errno::EEXIST)
    );
    // Across the mount: EXDEV.
    p.mkdirat(at, "/tmp", 0o777).unwrap();
    assert_eq!(
        p.renameat2(at, format!("{dir}/knob"), at, "/tmp/knob", 0),
        Err(Errno::EXDEV)
    );
    assert_eq!(
        p.linkat(at, format!("{dir}/knob"), at, "/tmp/knob", 0),
        Err(Errno::EXDEV)
    );
    let fd = p
        .openat(at, "/tmp/f", libc::O_CREAT | libc::O_WRONLY, 0o644)
        .unwrap();
    p.close(fd).unwrap();
    assert_eq!(
        p.renameat2(at, "/tmp/f", at, format!("{dir}/f"), 0),
        Err(Errno::EXDEV)
    );
    assert_eq!(p.lseek(-1, 0, 0), Err(Errno::EBADF));
}

#[test]
fn removal_gives_enoent_to_lookups_and_enodev_to_open_files() {
    for locking in [Locking::Scalable, Locking::Legacy] {
        let (_vfs, k, d, p) = setup(locking);
        let fd = p.openat(libc::AT_FDCWD, gid(9), RO, 0).unwrap();
        let fd2 = p.openat(libc::AT_FDCWD, gid(9), RO, 0).unwrap();
        let mut b = [0u8; 10];
        assert_eq!(p.read(fd, &mut b), Ok(10));
        k.remove(&d.gids[9]).unwrap();
        assert_eq!(p.newfstatat(libc::AT_FDCWD, gid(9), 0), Err(Errno::ENOENT));
        assert_eq!(p.openat(libc::AT_FDCWD, gid(9), RO, 0), Err(Errno::ENOENT));
        // O_CREAT revalidates the cached dentry too: the name is gone, and creating a new
        // name in sysfs is EACCES (not an open of the removed node).
        assert_eq!(
            p.openat(libc::AT_FDCWD, gid(8), RO | libc::O_CREAT, 0o644)
                .map(|fd| p.close(fd)),
            Ok(Ok(()))
        );
        k.remove(&d.gids[8]).unwrap();
        assert_eq!(
            p.openat(libc::AT_FDCWD, gid(8), RO | libc::O_CREAT, 0o644),
            Err(Errno::EACCES)
        );
        // Buffered bytes are still returned; anything needing the node is ENODEV.
        let rest = gid_string(9).len() - 10;
        assert_eq!(p.read(fd, &mut [0u8; 64]), Ok(rest));
        assert_eq!(p.read(fd, &mut [0u8; 64]), Err(Errno::ENODEV));
        assert_eq!(p.read(fd2, &mut [0u8; 64]), Err(Errno::ENODEV));
        assert_eq!(p.lseek(fd2, 0, libc::SEEK_SET), Err(Errno::ENODEV));
        assert_eq!(p.fchmod(fd2, 0o600), Err(Errno::ENOENT));
        p.close(fd).unwrap();
        p.close(fd2).unwrap();
        // A whole removed directory.
        let gdir = "/sys/class/infiniband/mlx5_0/ports/1/gids";
        assert!(p.newfstatat(libc::AT_FDCWD, gid(1), 0).is_ok());
        k.remove(&d.gids_dir).unwrap();
        assert_eq!(p.newfstatat(libc::AT_FDCWD, gid(1), 0), Err(Errno::ENOENT));
        assert_eq!(p.newfstatat(libc::AT_FDCWD, gdir, 0), Err(Errno::ENOENT));
        assert!(!names(&p, "/sys/class/infiniband/mlx5_0/ports/1").contains(&"gids".into()));
    }
}

#[test]
fn permissions_as_a_non_root_process() {
    let (vfs, _k, d, root) = setup(Locking::Scalable);
    let user = Process::new(&vfs, Credentials::user(1000, 1000));
    let at = libc::AT_FDCWD;
    let knob = "/sys/kernel/scalevfs/knob";
    // 0444 readable by anyone; 0644 root-owned knob not writable.
    let fd = user.openat(at, gid(0), RO, 0).unwrap();
    user.close(fd).unwrap();
    assert_eq!(user.openat(at, knob, libc::O_WRONLY, 0), Err(Errno::EACCES));
    // A non-root caller is refused by the directory's permission first.
    assert_eq!(user.mkdirat(at, "/sys/kernel/x", 0o755), Err(Errno::EACCES));
    assert_eq!(
        user.openat(at, "/sys/kernel/x", libc::O_CREAT | libc::O_WRONLY, 0o644),
        Err(Errno::EACCES)
    );
    assert_eq!(user.unlinkat(at, knob, 0), Err(Errno::EACCES));
    assert_eq!(user.fchmodat(at, knob, 0o666, 0), Err(Errno::EPERM));
    // chown/chmod by root reach the node; then the user owns the knob.
    root.fchownat(at, knob, 1000, 1000, 0).unwrap();
    assert_eq!(d.knob.getattr().uid, 1000);
    user.fchmodat(at, knob, 0o600, 0).unwrap();
    assert_eq!(d.knob.mode(), 0o600);
    let fd = user.openat(at, knob, libc::O_RDWR, 0).unwrap();
    assert_eq!(user.write(fd, b"5"), Ok(1));
    user.close(fd).unwrap();
    assert_eq!(
        root.newfstatat(at, knob, 0).unwrap().mode,
        libc::S_IFREG | 0o600
    );
    // A directory without search permission.
    _k.setattr(
        &d.gids_dir,
        &SetAttr {
            mode: Some(0o700),
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(user.openat(at, gid(0), RO, 0), Err(Errno::EACCES));
    assert!(root.openat(at, gid(0), RO, 0).is_ok());
}

#[test]
fn remove_while_reading_through_the_vfs() {
    let (vfs, k, d, _root) = setup(Locking::Scalable);
    std::thread::scope(|s| {
        for t in 0..8 {
            let vfs = vfs.clone();
            s.spawn(move || {
                let p = Process::new(&vfs, Credentials::user(1000 + t, 1000));
                for i in 0..2000usize {
                    let g = (i * 7 + t as usize) % 254;
                    match p.openat(libc::AT_FDCWD, gid(g), RO, 0) {
                        Ok(fd) => {
                            let mut b = [0u8; 40];
                            match p.read(fd, &mut b) {
                                Ok(n) => assert_eq!(&b[..n], &gid_string(g).as_bytes()[..n]),
                                Err(e) => assert_eq!(e, Errno::ENODEV),
                            }
                            p.close(fd).unwrap();
                        }
                        // Removed before the walk (ENOENT) or between the walk and
                        // kernfs's open (ENODEV, as kernfs_fop_open).
                        Err(e) => assert!(matches!(e, Errno::ENOENT | Errno::ENODEV), "{e}"),
                    }
                }
            });
        }
        for g in d.gids.iter().step_by(3) {
            k.remove(g).unwrap();
        }
    });
    let p = Process::new(&vfs, Credentials::root());
    assert_eq!(p.openat(libc::AT_FDCWD, gid(0), RO, 0), Err(Errno::ENOENT));
    assert!(p.openat(libc::AT_FDCWD, gid(1), RO, 0).is_ok());
}

#[test]
fn poll_through_the_vfs_wakes_on_notify() {
    use scalevfs_vfs::poll::{poll, PollFd, PollTarget};
    let (vfs, _k, _d, p) = setup(Locking::Scalable);
    let knob = "/sys/kernel/scalevfs/knob";
    let fd = p.openat(libc::AT_FDCWD, knob, RO, 0).unwrap();
    let f = p.file(fd).unwrap();
    let pollable = f
        .inode()
        .fs()
        .pollable(&f)
        .expect("attributes are pollable");
    let pri = (libc::POLLPRI | libc::POLLERR) as u16;
    let mut fds = [PollFd::new(
        PollTarget::File(pollable.clone()),
        libc::POLLPRI as u16,
    )];
    // Not read yet: changed (as sysfs). After a read: quiet.
    assert_eq!(poll(&mut fds, 0, None), Ok(1));
    assert_eq!(fds[0].revents & pri, pri);
    read_all(&p, fd, 16);
    assert_eq!(poll(&mut fds, 0, None), Ok(0));
    // A store that changes the value notifies: a sleeping poll wakes.
    std::thread::scope(|s| {
        s.spawn(|| {
            std::thread::sleep(std::time::Duration::from_millis(50));
            store(&vfs, knob, b"17");
        });
        assert_eq!(poll(&mut fds, 60_000, None), Ok(1));
    });
    assert_eq!(fds[0].revents & pri, pri);
    // Re-reading from 0 acknowledges.
    p.lseek(fd, 0, libc::SEEK_SET).unwrap();
    assert_eq!(read_all(&p, fd, 16), b"17\n");
    assert_eq!(poll(&mut fds, 0, None), Ok(0));
    // Same object every time; directories and O_PATH files have none.
    assert!(Arc::ptr_eq(
        &pollable,
        &f.inode().fs().pollable(&f).unwrap()
    ));
    drop((fds, pollable, f));
    p.close(fd).unwrap();
    let dfd = p.openat(libc::AT_FDCWD, "/sys/kernel", RO, 0).unwrap();
    let df = p.file(dfd).unwrap();
    assert!(df.inode().fs().pollable(&df).is_none());
}

#[test]
fn epoll_through_the_vfs_reports_notify_and_close_unhooks() {
    use scalevfs_vfs::epoll::{Epoll, EpollContext, EpollEvent, FdKey, EPOLL_CTL_ADD};
    let (vfs, _k, _d, p) = setup(Locking::Scalable);
    let knob = "/sys/kernel/scalevfs/knob";
    let fd = p.openat(libc::AT_FDCWD, knob, RO, 0).unwrap();
    read_all(&p, fd, 16);
    let f = p.file(fd).unwrap();
    let target = f.inode().fs().pollable(&f).unwrap();
    let ctx = EpollContext::new(Locking::Scalable);
    let ep = Epoll::new(&ctx);
    let key = FdKey {
        file: Arc::as_ptr(&target) as *const () as usize,
        fd,
    };
    let pri = (libc::EPOLLPRI | libc::EPOLLERR) as u32;
    ep.ctl(
        &ctx,
        EPOLL_CTL_ADD,
        key,
        &target,
        EpollEvent::new(pri | libc::EPOLLET as u32, 7),
    )
    .unwrap();
    let mut evs = [EpollEvent::default(); 4];
    assert_eq!(ep.wait(&mut evs, 0, None), Ok(0));
    std::thread::scope(|s| {
        s.spawn(|| {
            std::thread::sleep(std::time::Duration::from_millis(50));
            store(&vfs, knob, b"3");
        });
        assert_eq!(ep.wait(&mut evs, 60_000, None), Ok(1));
    });
    assert_eq!((evs[0].events & pri, evs[0].data), (pri, 7));
    // The last close unhooks the item: no reference cycle keeps the file alive.
    drop((target, f));
    p.close(fd).unwrap();
    store(&vfs, knob, b"4");
    assert_eq!(ep.wait(&mut evs, 0, None), Ok(0));
}

#[test]
fn embedder_renames_show_through_cached_paths() {
    for locking in [Locking::Scalable, Locking::Legacy] {
        let (_vfs, k, d, p) = setup(locking);
        let at = libc::AT_FDCWD;
        let old = p.newfstatat(at, gid(5), 0).unwrap();
        let kdir = k.lookup(k.root(), "kernel").unwrap();
        k.rename(&d.gids[5], &kdir, "moved").unwrap();
        assert_eq!(p.newfstatat(at, gid(5), 0), Err(Errno::ENOENT));
        let new = p.newfstatat(at, "/sys/kernel/moved", 0).unwrap();
        assert_eq!((new.ino, new.dev), (old.ino, old.dev));
        assert_eq!(
            p.read_file("/sys/kernel/moved").unwrap(),
            gid_string(5).as_bytes()
        );
        // A directory moved away takes its subtree's cached paths with it.
        let ports = k.lookup(&d.gids_dir.parent().unwrap().parent().unwrap(), "1");
        k.rename(&ports.unwrap(), &kdir, "port1").unwrap();
        assert_eq!(p.newfstatat(at, gid(6), 0), Err(Errno::ENOENT));
        let g6 = "/sys/kernel/port1/gids/6";
        assert_eq!(p.read_file(g6).unwrap(), gid_string(6).as_bytes());
    }
}

/// The system-call surface: `poll` and `epoll_ctl`/`epoll_wait` on an attribute's fd see
/// `POLLPRI|POLLERR` after a notifying store, as sysfs_notify gives on Linux.
#[test]
fn poll_and_epoll_syscalls_on_an_attribute_fd() {
    use scalevfs::EpollEvent;
    for locking in [Locking::Scalable, Locking::Legacy] {
        let (vfs, _k, _d, p) = setup(locking);
        let knob = "/sys/kernel/scalevfs/knob";
        let fd = p.openat(libc::AT_FDCWD, knob, RO, 0).unwrap();
        read_all(&p, fd, 16);
        let mut pfd = [libc::pollfd {
            fd,
            events: libc::POLLPRI,
            revents: 0,
        }];
        assert_eq!(
            p.poll(&mut pfd, 0),
            Ok(0),
            "{locking:?}: quiet after a read"
        );
        let ep = p.epoll_create1(0).unwrap();
        let pri = (libc::EPOLLPRI | libc::EPOLLERR) as u32;
        p.epoll_ctl(ep, libc::EPOLL_CTL_ADD, fd, Some(&EpollEvent::new(pri, 9)))
            .unwrap();
        let mut evs = [EpollEvent::default(); 2];
        assert_eq!(p.epoll_wait(ep, &mut evs, 0), Ok(0));
        store(&vfs, knob, b"21");
        assert_eq!(p.poll(&mut pfd, 1000), Ok(1));
        let want = libc::POLLPRI | libc::POLLERR;
        assert_eq!(pfd[0].revents & want, want, "{locking:?}");
        assert_eq!(p.epoll_wait(ep, &mut evs, 1000), Ok(1));
        assert_eq!((evs[0].events & pri, evs[0].data), (pri, 9));
        // A directory on kernfs is like a tmpfs one: always ready, and epoll refuses it.
        let dfd = p.openat(libc::AT_FDCWD, "/sys/kernel", RO, 0).unwrap();
        assert_eq!(
            p.epoll_ctl(ep, libc::EPOLL_CTL_ADD, dfd, Some(&EpollEvent::new(pri, 1))),
            Err(scalevfs::Errno::EPERM)
        );
        for f in [fd, dfd, ep] {
            p.close(f).unwrap();
        }
    }
}

/// An embedder that creates nodes, lets them be reached once through the VFS and removes
/// them again must not grow the file system's inode map: removal forgets the inode of
/// every removed node (files, directories, symlinks, whole subtrees), even if nobody walks
/// the removed path again; once the dcache drops the stale dentries, the inodes go too.
#[test]
fn removed_nodes_leave_the_inode_map() {
    use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
    /// Sets the flag if dropped while a panic unwinds (a failed check).
    struct SetOnPanic<'a>(&'a AtomicBool);
    impl Drop for SetOnPanic<'_> {
        fn drop(&mut self) {
            if std::thread::panicking() {
                self.0.store(true, Relaxed);
            }
        }
    }
    for locking in [Locking::Scalable, Locking::Legacy] {
        let vfs = Vfs::new(VfsOptions {
            locking,
            ..Default::default()
        });
        let p = Process::new(&vfs, Credentials::root());
        p.mkdirat(libc::AT_FDCWD, "/sys", 0o755).unwrap();
        let k = Kernfs::new(locking);
        let demo = demo_tree(&k).unwrap();
        let kfs = KernfsFs::new(k.clone());
        vfs.mount("/sys", kfs.clone()).unwrap();
        let at = libc::AT_FDCWD;
        // Base: the demo tree walked once.
        assert!(p.newfstatat(at, gid(0), 0).is_ok());
        let base = kfs.cached_inodes();
        let sbs = vfs.core().superblocks();
        let sb = sbs.iter().find(|sb| sb.fs.fs_type() == "sysfs");
        let sb = sb.expect("the kernfs superblock");
        let base_inodes = sb.inode_count();
        for round in 0..200 {
            let d = k
                .create_dir(k.root(), format!("dev{round}"), 0o755, 0, 0)
                .unwrap();
            let f = k
                .create_file(&d, "attr", 0o444, 0, 0, FnAttr::constant("x\n"))
                .unwrap();
            k.create_link(&d, "link", &demo.gids_dir).unwrap();
            let fd = p
                .openat(at, format!("/sys/dev{round}/attr"), RO, 0)
                .unwrap();
            assert_eq!(read_all(&p, fd, 8), b"x\n");
            p.close(fd).unwrap();
            assert!(p
                .readlinkat(at, format!("/sys/dev{round}/link"), &mut [0u8; 256])
                .is_ok());
            assert!(kfs.cached_inodes() >= base + 3);
            // Alternately the file then the directory, or the directory at once.
            if round % 2 == 0 {
                k.remove(&f).unwrap();
            }
            k.remove(&d).unwrap();
            assert_eq!(kfs.cached_inodes(), base, "round {round}");
        }
        // Lookups racing with removals map nothing for a node being removed.
        for round in 200..300 {
            let d = k
                .create_dir(k.root(), format!("dev{round}"), 0o755, 0, 0)
                .unwrap();
            for i in 0..8 {
                k.create_file(&d, format!("a{i}"), 0o444, 0, 0, FnAttr::constant("y"))
                    .unwrap();
            }
            // Set only if this thread fails before the removal: the lookups then stop
            // instead of waiting forever for the directory to go.
            let failed = AtomicBool::new(false);
            std::thread::scope(|s| {
                let _failed = SetOnPanic(&failed);
                for t in 0..2 {
                    let (vfs, failed) = (vfs.clone(), &failed);
                    s.spawn(move || {
                        let q = Process::new(&vfs, Credentials::root());
                        // Until the directory is gone: look the files up again and again.
                        let mut gone = false;
                        while !gone && !failed.load(Relaxed) {
                            gone = true;
                            for i in 0..8 {
                                let path = format!("/sys/dev{round}/a{}", (i + t * 3) % 8);
                                match q.newfstatat(libc::AT_FDCWD, path, 0) {
                                    Ok(_) => gone = false,
                                    Err(e) => assert_eq!(e, Errno::ENOENT),
                                }
                            }
                        }
                    });
                }
                k.remove(&d).unwrap();
            });
            assert_eq!(kfs.cached_inodes(), base, "round {round}");
        }
        for round in 0..300 {
            assert_eq!(
                p.newfstatat(at, format!("/sys/dev{round}/attr"), 0),
                Err(Errno::ENOENT)
            );
        }
        // The cached dentries of the removed nodes still hold their inodes; once the
        // dcache lets them go, nothing else does (the map used to).
        vfs.drop_caches();
        assert_eq!(sb.inode_count(), base_inodes, "{locking:?}");
        assert_eq!(kfs.cached_inodes(), base, "{locking:?}");
    }
}

/// kernfs at /sys unmounts like any file system: busy while an attribute is open or a
/// process's cwd is inside, then gone with every inode the VFS made for it, and the tree
/// itself lives on (it belongs to the embedder) and can be mounted again.
#[test]
fn sys_unmounts_and_mounts_again() {
    for locking in [Locking::Scalable, Locking::Legacy] {
        let (vfs, k, _demo, root) = setup(locking);
        let superblocks = || vfs.core().superblocks();
        assert_eq!(superblocks().len(), 2, "the root tmpfs and the kernfs");
        let tmpfs_inodes = superblocks()[0].inode_count();
        let fd = root.openat(libc::AT_FDCWD, gid(7), RO, 0).unwrap();
        let q = Process::new(&vfs, Credentials::root());
        q.chdir("/sys/class").unwrap();
        assert_eq!(root.umount2("/sys", 0), Err(Errno::EBUSY));
        root.close(fd).unwrap();
        assert_eq!(root.umount2("/sys", 0), Err(Errno::EBUSY), "a cwd inside");
        q.chdir("/").unwrap();
        // Walk much of the tree first: cached dentries and inodes pin nothing.
        for i in 0..50 {
            root.newfstatat(libc::AT_FDCWD, gid(i), 0).unwrap();
        }
        root.umount2("/sys", 0).unwrap();
        assert_eq!(
            root.readdir("/sys").unwrap().len(),
            2,
            "the empty directory below"
        );
        assert_eq!(superblocks().len(), 1, "the kernfs superblock is shut down");
        assert_eq!(vfs.inode_count(), tmpfs_inodes, "with every inode it had");
        // The tree is intact: mount it again and read through it.
        vfs.mount("/sys", KernfsFs::new(k.clone())).unwrap();
        let fd = root.openat(libc::AT_FDCWD, gid(7), RO, 0).unwrap();
        assert_eq!(read_all(&root, fd, 40), gid_string(7).into_bytes());
        root.close(fd).unwrap();
        root.umount2("/sys", libc::MNT_DETACH).unwrap();
        vfs.drop_caches();
    }
}
