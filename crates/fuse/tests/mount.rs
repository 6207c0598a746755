//! Drives a real FUSE mount of a scalevfs with real system calls, from this process and
//! from forked children: files and namespace operations, credentials, the inode leak
//! test, concurrency from many processes, unmount with files open. Needs root, /dev/fuse
//! and fusermount3 (package fuse3); without them each test prints why it is skipped.

mod common;

use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::Path;

use common::*;
use scalevfs_fuse::MountError;

#[test]
fn preflight_reports_one_line_errors() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nope");
    let e = scalevfs_fuse::preflight(&missing).unwrap_err();
    assert!(matches!(e, MountError::NoMountPoint(_)));
    assert_eq!(
        e.to_string(),
        format!("mount point {} does not exist", missing.display())
    );
    let file = dir.path().join("f");
    std::fs::write(&file, b"x").unwrap();
    let e = scalevfs_fuse::preflight(&file).unwrap_err();
    assert!(matches!(e, MountError::NotADirectory(_)));
    assert!(!e.to_string().contains('\n'));
}

fuse_test! {
    fn files_and_namespace_through_the_kernel() {
        require_fuse!();
        let (dir, server) = mount(4);
        let root = dir.path();
        assert!(mounted(root));
        // Create, write, read, seek, append.
        let mut f = File::options()
            .read(true)
            .write(true)
            .create_new(true)
            .open(root.join("a"))
            .unwrap();
        f.write_all(b"hello world").unwrap();
        f.seek(SeekFrom::Start(6)).unwrap();
        let mut s = String::new();
        f.read_to_string(&mut s).unwrap();
        assert_eq!(s, "world");
        drop(f);
        let mut ap = File::options().append(true).open(root.join("a")).unwrap();
        ap.write_all(b"!").unwrap();
        drop(ap);
        assert_eq!(std::fs::read(root.join("a")).unwrap(), b"hello world!");
        assert_eq!(
            errno_of(
                File::options()
                    .write(true)
                    .create_new(true)
                    .open(root.join("a"))
            ),
            libc::EEXIST
        );
        // Truncate (O_TRUNC and ftruncate), fallocate, fsync.
        std::fs::write(root.join("a"), b"xy").unwrap();
        assert_eq!(std::fs::metadata(root.join("a")).unwrap().len(), 2);
        let f = open_rw(&root.join("a"));
        f.set_len(10000).unwrap();
        assert_eq!(f.metadata().unwrap().len(), 10000);
        // SAFETY: plain syscall on an open fd.
        assert_eq!(unsafe { libc::fallocate(f.as_raw_fd_(), 0, 0, 20000) }, 0);
        assert_eq!(f.metadata().unwrap().len(), 20000);
        f.sync_all().unwrap();
        drop(f);
        // Directories, readdir, rmdir.
        std::fs::create_dir(root.join("d")).unwrap();
        for i in 0..300 {
            std::fs::write(root.join(format!("d/f{i}")), b"x").unwrap();
        }
        let mut names: Vec<String> = std::fs::read_dir(root.join("d"))
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        assert_eq!(
            names.len(),
            300,
            "readdir across several FUSE_READDIR replies"
        );
        assert_eq!(
            errno_of(std::fs::remove_dir(root.join("d"))),
            libc::ENOTEMPTY
        );
        assert_eq!(errno_of(std::fs::remove_file(root.join("d"))), libc::EISDIR);
        for i in 0..300 {
            std::fs::remove_file(root.join(format!("d/f{i}"))).unwrap();
        }
        std::fs::remove_dir(root.join("d")).unwrap();
        assert_eq!(errno_of(std::fs::metadata(root.join("d"))), libc::ENOENT);
        assert_eq!(errno_of(std::fs::metadata(root.join("a/x"))), libc::ENOTDIR);
        // Symlinks, hard links, FIFOs.
        std::os::unix::fs::symlink("a", root.join("s")).unwrap();
        assert_eq!(std::fs::read_link(root.join("s")).unwrap(), Path::new("a"));
        assert_eq!(&std::fs::read(root.join("s")).unwrap()[..2], b"xy");
        std::fs::hard_link(root.join("a"), root.join("h")).unwrap();
        let (ma, mh) = (
            std::fs::metadata(root.join("a")).unwrap(),
            std::fs::metadata(root.join("h")).unwrap(),
        );
        assert_eq!((ma.ino(), ma.nlink()), (mh.ino(), 2));
        let fifo = cpath(&root.join("p"));
        // SAFETY: valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
        assert!(std::fs::metadata(root.join("p"))
            .unwrap()
            .file_type()
            .is_fifo());
        // Rename: plain, RENAME_NOREPLACE, RENAME_EXCHANGE.
        std::fs::rename(root.join("h"), root.join("h2")).unwrap();
        let c = |n: &str| cpath(&root.join(n));
        let renameat2 = |a: &str, b: &str, flags: u32| {
            let (a, b) = (c(a), c(b));
            // SAFETY: valid NUL-terminated paths.
            let r = unsafe {
                libc::syscall(
                    libc::SYS_renameat2,
                    libc::AT_FDCWD,
                    a.as_ptr(),
                    libc::AT_FDCWD,
                    b.as_ptr(),
                    flags,
                )
            };
            if r == 0 {
                Ok(())
            } else {
                Err(errno())
            }
        };
        assert_eq!(
            renameat2("h2", "s", libc::RENAME_NOREPLACE),
            Err(libc::EEXIST)
        );
        renameat2("h2", "s", libc::RENAME_EXCHANGE).unwrap();
        assert!(std::fs::symlink_metadata(root.join("h2"))
            .unwrap()
            .is_symlink());
        assert_eq!(std::fs::metadata(root.join("s")).unwrap().ino(), ma.ino());
        // chmod, chown, utimes; statfs.
        std::fs::set_permissions(root.join("a"), std::fs::Permissions::from_mode(0o640)).unwrap();
        assert_eq!(
            std::fs::metadata(root.join("a")).unwrap().mode() & 0o7777,
            0o640
        );
        std::os::unix::fs::chown(root.join("a"), Some(1234), Some(99)).unwrap();
        let m = std::fs::metadata(root.join("a")).unwrap();
        assert_eq!((m.uid(), m.gid()), (1234, 99));
        let f = File::open(root.join("a")).unwrap();
        f.set_modified(std::time::UNIX_EPOCH + std::time::Duration::from_secs(1000))
            .unwrap();
        assert_eq!(std::fs::metadata(root.join("a")).unwrap().mtime(), 1000);
        drop(f);
        // SAFETY: zeroed statfs is valid; the path is NUL-terminated.
        let mut sfs: libc::statfs = unsafe { std::mem::zeroed() };
        let rootc = cpath(root);
        // SAFETY: as above.
        assert_eq!(unsafe { libc::statfs(rootc.as_ptr(), &mut sfs) }, 0);
        assert_eq!(sfs.f_bsize, 4096);
        assert!(sfs.f_files > sfs.f_ffree);
        // The served VFS holds what the kernel wrote.
        let vfs = server.vfs().clone();
        let p = scalevfs::Process::new(&vfs, scalevfs::Credentials::root());
        assert_eq!(p.read_file("/a").unwrap().len(), 20000);
        drop(p);
        server.unmount().unwrap();
        assert!(!mounted(root));
    }
}

trait RawFd_ {
    fn as_raw_fd_(&self) -> i32;
}
impl RawFd_ for File {
    fn as_raw_fd_(&self) -> i32 {
        std::os::unix::io::AsRawFd::as_raw_fd(self)
    }
}

fuse_test! {
    fn new_files_get_the_callers_ids_and_setgid_groups() {
        require_fuse!();
        // Other users may use the mount only with allow_other (root may always set it).
        let (_dir, server, root) = common::mount_for_everyone();
        std::fs::create_dir(root.join("sg")).unwrap();
        std::os::unix::fs::chown(root.join("sg"), Some(0), Some(4242)).unwrap();
        std::fs::set_permissions(root.join("sg"), std::fs::Permissions::from_mode(0o2777)).unwrap();
        let rootc = cpath(&root);
        let (own, ingroup, sub) = (
            cpath(&root.join("mine")),
            cpath(&root.join("sg/f")),
            cpath(&root.join("sg/sub")),
        );
        let pid = fork_child(|| {
            // SAFETY: raw syscalls in the child: drop to uid 1000, gid 1000, then create.
            unsafe {
                if libc::setgroups(0, std::ptr::null()) != 0
                    || libc::setgid(1000) != 0
                    || libc::setuid(1000) != 0
                {
                    return 1;
                }
                let fd = libc::open(own.as_ptr(), libc::O_CREAT | libc::O_WRONLY, 0o644);
                if fd < 0 {
                    return 2;
                }
                libc::close(fd);
                let fd = libc::open(ingroup.as_ptr(), libc::O_CREAT | libc::O_WRONLY, 0o644);
                if fd < 0 {
                    return 3;
                }
                libc::close(fd);
                if libc::mkdir(sub.as_ptr(), 0o755) != 0 {
                    return 4;
                }
                // Not the owner: chmod is refused by the kernel's default_permissions check.
                if libc::chmod(rootc.as_ptr(), 0o700) == 0 || errno() != libc::EPERM {
                    return 5;
                }
            }
            0
        });
        assert_eq!(wait_child(pid), 0);
        let m = std::fs::metadata(root.join("mine")).unwrap();
        assert_eq!((m.uid(), m.gid()), (1000, 1000));
        let m = std::fs::metadata(root.join("sg/f")).unwrap();
        assert_eq!(
            (m.uid(), m.gid()),
            (1000, 4242),
            "group of the setgid directory"
        );
        let m = std::fs::metadata(root.join("sg/sub")).unwrap();
        assert_eq!((m.uid(), m.gid()), (1000, 4242));
        assert_ne!(m.mode() & libc::S_ISGID, 0, "subdirectories inherit setgid");
        server.unmount().unwrap();
    }
}

fuse_test! {
    fn every_inode_is_freed_after_unlink_close_and_forget() {
        require_fuse!();
        let (dir, server) = mount(2);
        let root = dir.path().to_owned();
        let vfs = server.vfs().clone();
        let base = vfs.inode_count();
        std::fs::create_dir(root.join("d")).unwrap();
        let mut held = Vec::new();
        for i in 0..50 {
            let p = root.join(format!("d/f{i}"));
            std::fs::write(&p, b"data").unwrap();
            std::fs::hard_link(&p, root.join(format!("d/l{i}"))).unwrap();
            if i % 10 == 0 {
                held.push(File::open(&p).unwrap());
            }
        }
        std::os::unix::fs::symlink("f0", root.join("d/s")).unwrap();
        std::fs::rename(root.join("d/f1"), root.join("d/renamed")).unwrap();
        assert_eq!(vfs.inode_count(), base + 52);
        for e in std::fs::read_dir(root.join("d")).unwrap() {
            std::fs::remove_file(e.unwrap().path()).unwrap();
        }
        std::fs::remove_dir(root.join("d")).unwrap();
        // Open files keep their inodes, as on Linux.
        assert!(vfs.inode_count() >= base + held.len());
        let mut buf = Vec::new();
        held[0].read_to_end(&mut buf).unwrap();
        assert_eq!(buf, b"data");
        drop(held);
        unmount_leaking_nothing(server, base);
    }
}

fuse_test! {
    fn many_processes_create_rename_and_delete_then_the_tree_is_consistent() {
        require_fuse!();
        let (dir, server) = mount(4);
        let root = dir.path().to_owned();
        const PROCS: usize = 8;
        const ROUNDS: usize = 100;
        std::fs::create_dir(root.join("shared")).unwrap();
        let mut pids = Vec::new();
        for k in 0..PROCS {
            let own = root.join(format!("p{k}"));
            let shared = root.join("shared");
            pids.push(fork_child(move || {
                // Each child: its own directory (exact expectations) plus a shared one where
                // everybody renames over everybody (only counts are checked).
                if std::fs::create_dir(&own).is_err() {
                    return 1;
                }
                for i in 0..ROUNDS {
                    let a = own.join(format!("a{i}"));
                    if std::fs::write(&a, format!("{k}:{i}")).is_err() {
                        return 2;
                    }
                    if i % 3 == 0 && std::fs::rename(&a, own.join(format!("b{i}"))).is_err() {
                        return 3;
                    }
                    if i % 3 == 1 && std::fs::remove_file(&a).is_err() {
                        return 4;
                    }
                    let s = shared.join(format!("t{k}-{i}"));
                    if std::fs::write(&s, b"x").is_err() {
                        return 5;
                    }
                    // Everyone renames onto the same few names: replace races.
                    if std::fs::rename(&s, shared.join(format!("slot{}", i % 4))).is_err() {
                        return 6;
                    }
                }
                0
            }));
        }
        for pid in pids {
            assert_eq!(wait_child(pid), 0);
        }
        let vfs = server.vfs().clone();
        server.unmount().unwrap();
        // Consistency after unmount, through the VFS directly.
        let p = scalevfs::Process::new(&vfs, scalevfs::Credentials::root());
        for k in 0..PROCS {
            let mut names: Vec<String> = p
                .readdir(format!("/p{k}"))
                .unwrap()
                .into_iter()
                .map(|e| String::from_utf8(e.name).unwrap())
                .filter(|n| n != "." && n != "..")
                .collect();
            names.sort();
            let mut want: Vec<String> = (0..ROUNDS)
                .filter_map(|i| match i % 3 {
                    0 => Some(format!("b{i}")),
                    1 => None,
                    _ => Some(format!("a{i}")),
                })
                .collect();
            want.sort();
            assert_eq!(names, want);
            for n in &names {
                let i: usize = n[1..].parse().unwrap();
                assert_eq!(
                    p.read_file(format!("/p{k}/{n}")).unwrap(),
                    format!("{k}:{i}").into_bytes()
                );
            }
            assert_eq!(p.stat(format!("/p{k}")).unwrap().nlink, 2);
        }
        let shared: Vec<_> = p
            .readdir("/shared")
            .unwrap()
            .into_iter()
            .filter(|e| e.name != b"." && e.name != b"..")
            .collect();
        assert_eq!(shared.len(), 4, "only the four slots remain");
        drop(p);
        assert_eq!(scalevfs_vfs::core::leaked_cores(), 0);
    }
}

fuse_test! {
    fn unmount_with_open_files_and_a_blocked_locker() {
        require_fuse!();
        let (dir, server) = mount(2);
        let root = dir.path().to_owned();
        std::fs::write(root.join("hello"), b"hi").unwrap();
        std::fs::write(root.join("lockme"), b"").unwrap();
        let mut held = File::open(root.join("hello")).unwrap();
        let f = open_rw(&root.join("lockme"));
        let mut fl = flock_struct(libc::F_WRLCK, 0, 0);
        fcntl_lock(f.as_raw_fd_(), libc::F_SETLK, &mut fl).unwrap();
        let p = cpath(&root.join("lockme"));
        let pid = fork_child(|| {
            // SAFETY: raw syscalls on a valid path.
            let fd = unsafe { libc::open(p.as_ptr(), libc::O_RDWR) };
            let mut fl = flock_struct(libc::F_WRLCK, 0, 0);
            // The unmount cancels the wait: EINTR, or, if the abort overtakes our reply, the
            // kernel's ECONNABORTED for a pending request (ENOTCONN for a restarted one).
            match fcntl_lock(fd, libc::F_SETLKW, &mut fl) {
                Err(libc::EINTR) | Err(libc::ECONNABORTED) | Err(libc::ENOTCONN) => 0,
                Ok(()) => 1,
                Err(e) => e,
            }
        });
        wait_for(&server, "the child to block", |s| s.waiting == 1);
        let vfs = server.vfs().clone();
        server.unmount().unwrap();
        assert!(!mounted(&root), "detached while files were open");
        // Nothing is left behind: no waiting thread, and not our POSIX lock either (no FLUSH
        // can come for it after the abort).
        let waiters = std::fs::read_dir("/proc/self/task")
            .unwrap()
            .filter(|t| {
                let comm = std::fs::read_to_string(t.as_ref().unwrap().path().join("comm"));
                comm.is_ok_and(|c| c.trim() == "fuse-lock-wait")
            })
            .count();
        assert_eq!(waiters, 0, "a lock waiter thread outlived the unmount");
        assert_eq!(vfs.locks().list().len(), 0, "{}", vfs.proc_locks());
        assert_eq!(wait_child(pid), 0, "the blocked locker was released");
        let mut buf = [0u8; 4];
        let e = held.read(&mut buf).unwrap_err();
        assert_eq!(
            e.raw_os_error(),
            Some(libc::ENOTCONN),
            "the connection is aborted"
        );
    }
}

fuse_test! {
    fn lookups_and_forgets_racing_renames_and_links_leak_nothing() {
        require_fuse!();
        let (dir, server) = mount(4);
        let root = dir.path().to_owned();
        let vfs = server.vfs().clone();
        let base = vfs.inode_count();
        for i in 0..8 {
            std::fs::write(root.join(format!("f{i}")), b"x").unwrap();
            std::fs::hard_link(root.join(format!("f{i}")), root.join(format!("h{i}"))).unwrap();
        }
        let stop = std::sync::atomic::AtomicBool::new(false);
        std::thread::scope(|s| {
            // Lookups by both names of every inode...
            for t in 0..8 {
                let (root, stop) = (&root, &stop);
                s.spawn(move || {
                    let mut k = t;
                    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                        let name = if k % 2 == 0 { "f" } else { "h" };
                        let _ = std::fs::metadata(root.join(format!("{name}{}", k % 8)));
                        k += 1;
                    }
                });
            }
            // ...while names move around and the kernel is made to forget.
            let (root, stop) = (&root, &stop);
            s.spawn(move || {
                for r in 0..200 {
                    let i = r % 8;
                    let _ = std::fs::rename(root.join(format!("h{i}")), root.join(format!("m{i}")));
                    let _ = std::fs::rename(root.join(format!("m{i}")), root.join(format!("h{i}")));
                    if r % 20 == 0 {
                        let _ = std::fs::write("/proc/sys/vm/drop_caches", b"2");
                    }
                }
                stop.store(true, std::sync::atomic::Ordering::Relaxed);
            });
        });
        for i in 0..8 {
            std::fs::remove_file(root.join(format!("f{i}"))).unwrap();
            std::fs::remove_file(root.join(format!("h{i}"))).unwrap();
        }
        unmount_leaking_nothing(server, base);
    }
}

fuse_test! {
    fn wait_returns_when_the_mount_is_unmounted_from_outside() {
        require_fuse!();
        let (dir, server) = mount(2);
        let root = dir.path().to_owned();
        std::fs::write(root.join("f"), b"x").unwrap();
        wait_for(&server, "the file released", |s| s.open_files == 0);
        let waiter = std::thread::spawn(move || server.wait());
        // `umount` as an administrator would (no lazy detach: nothing is open).
        let c = cpath(&root);
        let deadline = std::time::Instant::now() + PATIENCE;
        // SAFETY: valid NUL-terminated path.
        while unsafe { libc::umount(c.as_ptr()) } != 0 {
            // EBUSY while a background RELEASE is still in flight: retry.
            assert!(
                std::time::Instant::now() < deadline,
                "umount: errno {}",
                errno()
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        waiter.join().unwrap().unwrap();
        assert!(!mounted(&root));
    }
}

fuse_test! {
    /// Unmodified programs on the mount: four Python processes write one SQLite database at
    /// once (SQLite serializes writers with POSIX record locks, which reach our lock
    /// manager), then the database passes SQLite's integrity check with every row present;
    /// and `tar` copies a source tree in, which `diff -r` finds identical.
    fn unmodified_programs_use_the_mount() {
        require_fuse!();
        let have = |prog: &str| {
            std::process::Command::new(prog)
                .arg("--version")
                .output()
                .is_ok_and(|o| o.status.success())
        };
        if !have("python3") || !have("tar") {
            eprintln!("SKIPPED: needs python3 and tar");
            return;
        }
        let (dir, server) = mount(2);
        let root = dir.path().to_owned();
        let script = r#"
import sqlite3, sys, multiprocessing as mp
db = sys.argv[1]
def writer(i):
    c = sqlite3.connect(db, timeout=30)
    for k in range(40):
        c.execute('insert into t values (?, ?)', (i, k))
        c.commit()
    c.close()
c = sqlite3.connect(db)
c.execute('create table t(a, b)')
c.commit()
c.close()
ps = [mp.Process(target=writer, args=(i,)) for i in range(4)]
[p.start() for p in ps]
[p.join() for p in ps]
assert all(p.exitcode == 0 for p in ps), [p.exitcode for p in ps]
c = sqlite3.connect(db)
print(c.execute('select count(*), count(distinct a * 1000 + b) from t').fetchone(),
      c.execute('pragma integrity_check').fetchone()[0])
"#;
        let out = std::process::Command::new("python3")
            .args(["-c", script])
            .arg(root.join("db.sqlite"))
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "(160, 160) ok");
        assert!(
            server.stats().posix_requests > 0,
            "SQLite's locks must reach our lock manager, not the kernel's"
        );

        // A tree in with tar, then compared file by file with the original.
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let tree = root.join("tree");
        std::fs::create_dir(&tree).unwrap();
        let copy = std::process::Command::new("sh")
            .arg("-c")
            .arg(format!(
                "tar -C '{}' -cf - . | tar -C '{}' -xf - && diff -r '{}' '{}'",
                src.display(),
                tree.display(),
                src.display(),
                tree.display()
            ))
            .output()
            .unwrap();
        assert!(
            copy.status.success(),
            "{}{}",
            String::from_utf8_lossy(&copy.stdout),
            String::from_utf8_lossy(&copy.stderr)
        );
        server.unmount().unwrap();
    }
}

fuse_test! {
    /// `open(O_CREAT)` without `O_EXCL` racing with a file created behind the kernel's back
    /// (through the `Vfs` directly): the kernel's LOOKUP finds no entry, then its CREATE finds
    /// one. The caller must get what `open(2)` of an existing file gives on Linux: the file's
    /// permission check with the caller's credentials (never someone else's 0600 file for
    /// writing), and a FIFO opened as a FIFO (not `EIO`, not a worker blocked in it).
    fn create_racing_a_file_made_behind_the_kernels_back_is_a_checked_open() {
        use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
        require_fuse!();
        let (_dir, server, root) = common::mount_for_everyone();
        let vfs = server.vfs().clone();
        // Shared with the child: [started, made, then the outcomes: own new file, FIFO,
        // EACCES, ESTALE, uid 1000's file opened for writing, EIO, anything else].
        const N: usize = 9;
        const ROUNDS: u64 = 1500;
        // SAFETY: a fresh anonymous shared mapping of N u64s, unmapped below.
        let map = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                N * 8,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        assert_ne!(map, libc::MAP_FAILED);
        // SAFETY: the mapping is N zeroed, aligned u64s, alive until the munmap below (after
        // the child exited); AtomicU64 has u64's layout.
        let shared: &[AtomicU64] = unsafe { std::slice::from_raw_parts(map.cast(), N) };
        let names: Vec<std::ffi::CString> = (0..ROUNDS)
            .map(|i| cpath(&root.join(format!("x{i}"))))
            .collect();
        // Set when this thread leaves the scope, also by a panic (the child failed): the helper
        // then stops waiting for a child that will never ask, and the scope can join it.
        let child_done = std::sync::atomic::AtomicBool::new(false);
        struct SetOnDrop<'a>(&'a std::sync::atomic::AtomicBool);
        impl Drop for SetOnDrop<'_> {
            fn drop(&mut self) {
                self.0.store(true, SeqCst);
            }
        }
        std::thread::scope(|s| {
            let _child_done = SetOnDrop(&child_done);
            // Behind the kernel's back: x<i> appears (uid 1000's 0600 file, or a FIFO) at a
            // varying moment after the child starts to open it.
            s.spawn(|| {
                let core = vfs.core();
                let top = core.root_node();
                let owner = scalevfs::frontend::Owner {
                    uid: 1000,
                    gid: 1000,
                };
                for i in 0..ROUNDS {
                    while shared[0].load(SeqCst) <= i {
                        if child_done.load(SeqCst) {
                            return;
                        }
                        std::hint::spin_loop();
                    }
                    let t = std::time::Instant::now();
                    let delay = std::time::Duration::from_micros(i * 7919 % 300);
                    while t.elapsed() < delay {
                        std::hint::spin_loop();
                    }
                    let mode = if i % 2 == 0 {
                        libc::S_IFREG | 0o600
                    } else {
                        libc::S_IFIFO | 0o666
                    };
                    let _ = core.node_mknod(&top, format!("x{i}").as_bytes(), mode, 0, owner);
                    shared[1].store(i + 1, SeqCst);
                }
            });
            let pid = fork_child(|| {
                // SAFETY: raw syscalls in the child: uid/gid 2000, then open and fstat.
                unsafe {
                    if libc::setgroups(0, std::ptr::null()) != 0
                        || libc::setgid(2000) != 0
                        || libc::setuid(2000) != 0
                    {
                        return 1;
                    }
                }
                for (i, name) in names.iter().enumerate() {
                    shared[0].store(i as u64 + 1, SeqCst);
                    // SAFETY: a NUL-terminated path; fstat into a zeroed stat.
                    let slot = unsafe {
                        let fd = libc::open(
                            name.as_ptr(),
                            libc::O_CREAT | libc::O_RDWR | libc::O_NONBLOCK,
                            0o600,
                        );
                        if fd >= 0 {
                            let mut st: libc::stat = std::mem::zeroed();
                            libc::fstat(fd, &mut st);
                            libc::close(fd);
                            match (st.st_mode & libc::S_IFMT, st.st_uid) {
                                (libc::S_IFREG, 2000) => 2,
                                (libc::S_IFIFO, _) => 3,
                                _ => 6,
                            }
                        } else {
                            match errno() {
                                libc::EACCES => 4,
                                libc::ESTALE => 5,
                                libc::EIO => 7,
                                _ => 8,
                            }
                        }
                    };
                    shared[slot].fetch_add(1, SeqCst);
                    while shared[1].load(SeqCst) <= i as u64 {
                        std::hint::spin_loop();
                    }
                }
                0
            });
            assert_eq!(wait_child(pid), 0);
        });
        let c: Vec<u64> = shared.iter().map(|a| a.load(SeqCst)).collect();
        // SAFETY: unmapping what was mapped above; `shared` is not used after this.
        unsafe { libc::munmap(map, N * 8) };
        let races = server.stats().create_races;
        eprintln!(
            "outcomes (own, FIFO, EACCES, ESTALE, ...) {:?}; CREATE races {races}",
            &c[2..]
        );
        assert!(races > 0, "the race was never hit: the test proved nothing");
        assert_eq!(
            c[6], 0,
            "uid 2000 opened uid 1000's 0600 file for writing: {c:?}"
        );
        assert_eq!(c[7], 0, "EIO: {c:?}");
        assert_eq!(c[8], 0, "unexpected errors: {c:?}");
        wait_for(&server, "every file released", |s| s.open_files == 0);
        server.unmount().unwrap();
    }
}

fuse_test! {
    /// `mknod(2)` through the mount (FUSE_MKNOD): a regular file (type `S_IFREG` or 0, which
    /// the kernel sends as MKNOD too), a FIFO, a socket, and a device node that keeps its
    /// device number.
    fn mknod_makes_regular_files_fifos_and_sockets() {
        require_fuse!();
        let (dir, server) = mount(2);
        let root = dir.path().to_owned();
        let mknod_dev = |name: &str, mode: u32, dev: u64| {
            let c = cpath(&root.join(name));
            // SAFETY: a NUL-terminated path.
            if unsafe { libc::mknod(c.as_ptr(), mode, dev) } == 0 {
                Ok(())
            } else {
                Err(errno())
            }
        };
        let mknod = |name: &str, mode: u32| mknod_dev(name, mode, 0);
        // SAFETY: umask has no preconditions; restored below.
        let old = unsafe { libc::umask(0o022) };
        mknod("reg", libc::S_IFREG | 0o664).unwrap();
        mknod("untyped", 0o600).unwrap();
        mknod("fifo", libc::S_IFIFO | 0o644).unwrap();
        mknod("sock", libc::S_IFSOCK | 0o644).unwrap();
        let dev = libc::makedev(250, 9);
        mknod_dev("chr", libc::S_IFCHR | 0o644, dev).unwrap();
        let m = std::fs::symlink_metadata(root.join("chr")).unwrap();
        assert_eq!((m.mode() & libc::S_IFMT, m.rdev()), (libc::S_IFCHR, dev));
        assert_eq!(mknod("reg", libc::S_IFREG | 0o644), Err(libc::EEXIST));
        // SAFETY: as above.
        unsafe { libc::umask(old) };
        let m = std::fs::metadata(root.join("reg")).unwrap();
        assert!(m.file_type().is_file());
        assert_eq!(
            (m.mode() & 0o7777, m.len(), m.uid()),
            (0o644, 0, 0),
            "umask applied"
        );
        let m = std::fs::metadata(root.join("untyped")).unwrap();
        assert!(m.file_type().is_file());
        assert_eq!(m.mode() & 0o7777, 0o600);
        assert!(std::fs::metadata(root.join("fifo"))
            .unwrap()
            .file_type()
            .is_fifo());
        assert!(std::fs::metadata(root.join("sock"))
            .unwrap()
            .file_type()
            .is_socket());
        // The regular file is a file like any other.
        std::fs::write(root.join("reg"), b"made by mknod").unwrap();
        assert_eq!(std::fs::read(root.join("reg")).unwrap(), b"made by mknod");
        let p = scalevfs::Process::new(server.vfs(), scalevfs::Credentials::root());
        assert_eq!(p.read_file("/reg").unwrap(), b"made by mknod");
        drop(p);
        wait_for(&server, "every file released", |s| s.open_files == 0);
        server.unmount().unwrap();
    }
}
