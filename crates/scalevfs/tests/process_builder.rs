//! `ProcessBuilder` (pid, credentials, umask, root, cwd), per-`Vfs` pids, and `fork`.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use scalevfs::{
    Credentials, Dir, Errno, FcntlArg, Flock, LockKind, LockOwner, OpenOptions, Process,
    ProcessBuilder, RecordLock, Vfs, VfsOptions,
};

fn vfs_with_jail() -> (Arc<Vfs>, Process) {
    let vfs = Vfs::new(VfsOptions::default());
    let admin = Process::new(&vfs, Credentials::root());
    admin.mkdir("/jail", 0o755).unwrap();
    admin.mkdir("/jail/home", 0o755).unwrap();
    admin
        .fchmodat(libc::AT_FDCWD, "/jail/home", 0o777, 0)
        .unwrap();
    admin.mkdir("/jail/etc", 0o755).unwrap();
    admin.write_file("/jail/etc/passwd", b"jail").unwrap();
    admin.write_file("/etc-passwd-outside", b"host").unwrap();
    admin.symlink_at("/etc/passwd", "/jail/home/abs");
    (vfs, admin)
}

trait SymlinkAt {
    fn symlink_at(&self, target: &str, link: &str);
}

impl SymlinkAt for Process {
    fn symlink_at(&self, target: &str, link: &str) {
        self.symlinkat(target, libc::AT_FDCWD, link).unwrap();
    }
}

#[test]
fn the_root_confines_every_walk() {
    let (vfs, _admin) = vfs_with_jail();
    let p = ProcessBuilder::new(&vfs)
        .credentials(Credentials::user(1000, 1000))
        .root("/jail")
        .cwd("/home")
        .umask(0o077)
        .build()
        .unwrap();
    assert_eq!(p.cwd().unwrap(), b"/home");
    assert_eq!(p.read_file("/etc/passwd").unwrap(), b"jail");
    assert_eq!(p.read_file("../../../etc/passwd").unwrap(), b"jail");
    assert_eq!(
        p.read_file("abs").unwrap(),
        b"jail",
        "absolute symlinks start at the root"
    );
    assert_eq!(
        p.read_file("/etc-passwd-outside").err(),
        Some(Errno::ENOENT)
    );
    p.chdir("/../..").unwrap();
    assert_eq!(p.cwd().unwrap(), b"/");
    // The umask applies.
    let fd = p
        .open("/home/f", libc::O_CREAT | libc::O_WRONLY, 0o666)
        .unwrap();
    p.close(fd).unwrap();
    assert_eq!(p.stat("/home/f").unwrap().mode & 0o777, 0o600);
    // A fork keeps the root.
    let child = p.fork();
    assert_eq!(child.read_file("/etc/passwd").unwrap(), b"jail");
    assert_eq!(child.cwd().unwrap(), b"/");
}

#[test]
fn building_fails_with_the_walks_errors_and_frees_the_pid() {
    let (vfs, _admin) = vfs_with_jail();
    let user = || ProcessBuilder::new(&vfs).credentials(Credentials::user(1000, 1000));
    assert_eq!(user().root("/nope").build().err(), Some(Errno::ENOENT));
    assert_eq!(
        user().root("/etc-passwd-outside").build().err(),
        Some(Errno::ENOTDIR)
    );
    assert_eq!(
        user()
            .root("/jail")
            .cwd("/etc/passwd")
            .pid(77)
            .build()
            .err(),
        Some(Errno::ENOTDIR)
    );
    // 77 was taken by the failed build and given back.
    assert_eq!(user().pid(77).build().unwrap().pid(), 77);
    assert_eq!(
        user().fd_limit(u32::MAX).build().err(),
        Some(Errno::EPERM),
        "above the descriptor maximum"
    );
}

#[test]
fn pids_are_per_vfs_and_refused_while_in_use() {
    let a = Vfs::new(VfsOptions::default());
    let b = Vfs::new(VfsOptions::default());
    let pa = Process::new(&a, Credentials::root());
    let pb = Process::new(&b, Credentials::root());
    assert_eq!(pa.pid(), pb.pid(), "two trees, two pid spaces");
    let fixed = ProcessBuilder::new(&a).pid(4000).build().unwrap();
    assert_eq!(
        ProcessBuilder::new(&a).pid(4000).build().err(),
        Some(Errno::EEXIST)
    );
    assert_eq!(
        ProcessBuilder::new(&b).pid(4000).build().unwrap().pid(),
        4000
    );
    for bad in [0, -1, scalevfs::PID_MAX + 1] {
        assert_eq!(
            ProcessBuilder::new(&a).pid(bad).build().err(),
            Some(Errno::EINVAL)
        );
    }
    // F_GETLK and the lock listing report the pid the builder gave.
    fixed.write_file("/f", b"x").unwrap();
    let fd = fixed.open("/f", libc::O_RDWR, 0).unwrap();
    let mut fl = Flock {
        l_type: LockKind::Write.raw(),
        ..Flock::default()
    };
    fixed
        .fcntl(fd, libc::F_SETLK, FcntlArg::Flock(&mut fl))
        .unwrap();
    let fd2 = pa.open("/f", libc::O_RDWR, 0).unwrap();
    let mut probe = Flock {
        l_type: LockKind::Write.raw(),
        ..Flock::default()
    };
    pa.fcntl(fd2, libc::F_GETLK, FcntlArg::Flock(&mut probe))
        .unwrap();
    assert_eq!(probe.l_pid, 4000);
    assert!(a.proc_locks().contains(" 4000 "), "{}", a.proc_locks());
    drop(fixed);
    assert_eq!(
        ProcessBuilder::new(&a).pid(4000).build().unwrap().pid(),
        4000,
        "a dropped process's pid is free again"
    );
}

#[test]
fn fork_shares_open_files_but_not_posix_locks() {
    let vfs = Vfs::new(VfsOptions::default());
    let parent = Process::new(&vfs, Credentials::user(1000, 1000).with_groups([5]));
    let root = Process::new(&vfs, Credentials::root());
    root.fchmodat(libc::AT_FDCWD, "/", 0o1777, 0).unwrap();
    parent.write_file("/f", b"0123456789").unwrap();
    parent.umask(0o027);
    let d = Dir::open_ambient(&parent, "/").unwrap();
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .open(&d, "f")
        .unwrap();
    f.set_lock(
        LockOwner::Process,
        RecordLock::new(LockKind::Write, 0, 1),
        false,
    )
    .unwrap();
    f.set_lock(
        LockOwner::OpenFile,
        RecordLock::new(LockKind::Write, 5, 1),
        false,
    )
    .unwrap();
    let mut buf = [0u8; 2];
    parent.read(scalevfs::Descriptor::fd(&f), &mut buf).unwrap();

    let child = parent.fork();
    assert_ne!(child.pid(), parent.pid());
    assert_eq!(child.credentials(), parent.credentials());
    assert_eq!(child.umask(0), 0o027);
    let fd = scalevfs::Descriptor::fd(&f);
    // The same open file description: the offset is shared.
    child.read(fd, &mut buf).unwrap();
    assert_eq!(&buf, b"23");
    // The parent's POSIX lock is the parent's: the child conflicts with it...
    let mut fl = Flock {
        l_type: LockKind::Write.raw(),
        l_len: 1,
        ..Flock::default()
    };
    assert_eq!(
        child.fcntl(fd, libc::F_SETLK, FcntlArg::Flock(&mut fl)),
        Err(Errno::EAGAIN)
    );
    // ...while the OFD lock belongs to the shared description: no conflict.
    let mut ofd = Flock {
        l_type: LockKind::Write.raw(),
        l_start: 5,
        l_len: 1,
        ..Flock::default()
    };
    child
        .fcntl(fd, libc::F_OFD_SETLK, FcntlArg::Flock(&mut ofd))
        .unwrap();
    // The child's exit leaves the parent's descriptors and locks alone.
    drop(child);
    assert!(parent.file(fd).is_ok());
    let other = Process::new(&vfs, Credentials::root());
    let ofd2 = other.open("/f", libc::O_RDWR, 0).unwrap();
    let mut probe = Flock {
        l_type: LockKind::Read.raw(),
        l_len: 1,
        ..Flock::default()
    };
    other
        .fcntl(ofd2, libc::F_GETLK, FcntlArg::Flock(&mut probe))
        .unwrap();
    assert_eq!(probe.l_pid, parent.pid());
}

#[test]
fn many_threads_creating_processes_never_share_a_pid() {
    let vfs = Vfs::new(VfsOptions::default());
    let live = Mutex::new(HashSet::new());
    std::thread::scope(|s| {
        for t in 0..8 {
            let (vfs, live) = (&vfs, &live);
            s.spawn(move || {
                for i in 0..300 {
                    let want = 10_000 + (i % 50);
                    let p = if (i + t) % 3 == 0 {
                        match ProcessBuilder::new(vfs).pid(want).build() {
                            Ok(p) => p,
                            Err(e) => {
                                assert_eq!(e, Errno::EEXIST);
                                continue;
                            }
                        }
                    } else {
                        Process::new(vfs, Credentials::root())
                    };
                    let child = p.fork();
                    for pid in [p.pid(), child.pid()] {
                        assert!(live.lock().unwrap().insert(pid), "pid {pid} twice");
                    }
                    for pid in [p.pid(), child.pid()] {
                        live.lock().unwrap().remove(&pid);
                    }
                }
            });
        }
    });
}

#[test]
fn chroot_moves_the_root_and_leaves_the_cwd() {
    let (vfs, _admin) = vfs_with_jail();
    let mut p = Process::new(&vfs, Credentials::root());
    p.chdir("/jail/home").unwrap();
    assert_eq!(p.chroot("/etc-passwd-outside"), Err(Errno::ENOTDIR));
    assert_eq!(p.chroot("/nope"), Err(Errno::ENOENT));
    p.chroot("/jail").unwrap();
    assert_eq!(p.read_file("/etc/passwd").unwrap(), b"jail");
    assert_eq!(
        p.cwd().unwrap(),
        b"/home",
        "the cwd stayed, now seen from the new root"
    );
    // Without privilege: EPERM, after the walk's own errors.
    p.setresuid(1000, 1000, 1000).unwrap();
    assert_eq!(p.chroot("/nope"), Err(Errno::ENOENT));
    assert_eq!(p.chroot("/home"), Err(Errno::EPERM));
}
