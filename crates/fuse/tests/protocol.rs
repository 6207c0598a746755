//! The protocol features the server negotiates beyond plain requests, seen through the
//! kernel: READDIRPLUS (entries with attributes and exact lookup counts), and
//! interrupts when every worker reads from its own cloned `/dev/fuse` descriptor.

mod common;
use common::*;

use std::fs::File;
use std::os::fd::AsRawFd;

use scalevfs_fuse::proto::abi::init;
use scalevfs_fuse::Server;

fuse_test! {
    fn the_connection_negotiates_readdirplus_and_killpriv_v2() {
        require_fuse!();
        let (_dir, server) = mount(2);
        let p = server.protocol();
        assert!(p.minor >= 31, "protocol 7.{}", p.minor);
        for flag in [init::DO_READDIRPLUS, init::HANDLE_KILLPRIV_V2] {
            if p.offered & flag != 0 {
                assert_ne!(p.flags & flag, 0, "{flag:#x} offered but not taken: {p:?}");
            }
        }
        assert_ne!(p.flags & init::POSIX_LOCKS, 0, "{p:?}");
        assert_ne!(p.flags & init::FLOCK_LOCKS, 0, "{p:?}");
        server.unmount().unwrap();
    }
}

fuse_test! {
    /// A listing hands the kernel a node for every entry (no LOOKUP per name), counted
    /// exactly: after the kernel forgets them all the table is empty and no inode leaked.
    fn readdirplus_gives_each_entry_a_node_and_counts_it_exactly() {
        require_fuse!();
        let (dir, server) = mount(2);
        let base = server.vfs().inode_count();
        let sub = dir.path().join("d");
        std::fs::create_dir(&sub).unwrap();
        const N: usize = 300; // more than one READDIRPLUS reply holds
        for i in 0..N {
            std::fs::write(sub.join(format!("file-{i:03}")), b"x").unwrap();
        }
        if !forget_all(&server) {
            eprintln!("SKIPPED: drop_caches cannot be written here");
            return;
        }
        let before = server.stats().nodes;
        let mut names: Vec<String> = std::fs::read_dir(&sub)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        let expected: Vec<String> = (0..N).map(|i| format!("file-{i:03}")).collect();
        assert_eq!(names, expected, "each name once, none skipped");
        if server.protocol().flags & init::DO_READDIRPLUS != 0 {
            // With READDIRPLUS_AUTO the kernel asks for attributes at the start of a listing
            // and then only while they are being used, so not every reply is a "plus" one.
            assert!(
                server.stats().nodes > before + 10,
                "entries came with nodes: {:?}",
                server.stats()
            );
            // Their attributes are cached: stat needs no request and agrees.
            for name in names.iter().take(5) {
                assert_eq!(std::fs::metadata(sub.join(name)).unwrap().len(), 1);
            }
        }
        for i in 0..N {
            std::fs::remove_file(sub.join(format!("file-{i:03}"))).unwrap();
        }
        std::fs::remove_dir(&sub).unwrap();
        unmount_leaking_nothing(server, base);
    }
}

fuse_test! {
    /// With a cloned descriptor per worker, the worker that reads an interrupt may not be
    /// the one that read its target: a blocked F_SETLKW is still ended by every signal,
    /// including ones sent the moment the request reaches the server.
    fn interrupts_reach_their_target_across_cloned_queues() {
        require_fuse!();
        let (dir, server) = mount(4);
        interrupt_blocked_setlkws(&dir, &server, 20, Signals::Alternating);
        server.unmount().unwrap();
    }
}

fuse_test! {
    /// A signal that lands after the request is queued but before a ring worker has sent
    /// it on is never passed on as an INTERRUPT by the kernel (the ring, unlike
    /// `/dev/fuse`, does not check for one when it sends). A child signalled without
    /// pause from another CPU gets such signals often: each wait must still end (the
    /// server sees the pending signal).
    fn interrupts_sent_before_the_worker_takes_the_request_are_not_lost() {
        require_fuse!();
        let (dir, server) = mount(4);
        interrupt_blocked_setlkws(&dir, &server, 10, Signals::Storm);
        eprintln!("waits answered for a lost interrupt: {}", server.stats().lost_interrupts);
        server.unmount().unwrap();
    }
}

/// How [`interrupt_blocked_setlkws`] signals its child.
#[derive(Clone, Copy, PartialEq)]
enum Signals {
    /// Every 2 ms; in odd rounds only once the wait is published.
    Alternating,
    /// Without pause from the start, the child on another CPU than the signaller (when
    /// there are two).
    Storm,
}

/// `rounds` times: a child blocks in F_SETLKW on a lock we hold, and we signal it until
/// it returns `EINTR`.
fn interrupt_blocked_setlkws(dir: &tempfile::TempDir, server: &Server, rounds: u32, how: Signals) {
    let path = dir.path().join("lockme");
    std::fs::write(&path, b"").unwrap();
    let f = open_rw(&path);
    let mut fl = flock_struct(libc::F_WRLCK, 0, 0);
    fcntl_lock(f.as_raw_fd(), libc::F_SETLK, &mut fl).unwrap();
    let p = cpath(&path);
    let cpus = Cpus::of_this_thread();
    let pinned = (how == Signals::Storm && cpus.count() >= 2).then(|| cpus.pin_to(0));
    for round in 0..rounds {
        let ready = Pipe::new();
        let pid = fork_child(|| {
            if pinned.is_some() {
                cpus.pin_to(1);
            }
            catch_sigusr1_without_restart();
            ready.send(1);
            // The parent signals until the child exits: one that lands before the
            // call only runs the handler, a later one interrupts the wait.
            setlkw_exit_code(&p)
        });
        assert_eq!(ready.recv(), 1, "the child's handler is installed");
        if how == Signals::Alternating && round % 2 == 1 {
            wait_for(server, "the child to block", |s| s.waiting == 1);
        }
        let deadline = std::time::Instant::now() + PATIENCE;
        loop {
            // SAFETY: signals our own child.
            unsafe { libc::kill(pid, libc::SIGUSR1) };
            let mut status = 0;
            // SAFETY: waits for our own child without blocking.
            let r = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
            if r == pid {
                assert!(libc::WIFEXITED(status), "round {round}: {status:#x}");
                assert_eq!(libc::WEXITSTATUS(status), 0, "round {round}: EINTR");
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "round {round}: the blocked F_SETLKW never saw its interrupt"
            );
            if how == Signals::Alternating {
                std::thread::sleep(std::time::Duration::from_millis(2));
            }
        }
        wait_for(server, "the waiter to be gone", |s| s.waiting == 0);
    }
    drop(pinned);
    drop(f);
}

/// The CPUs the calling thread may run on; [`Cpus::pin_to`] narrows it to one of them
/// until the returned guard is dropped.
#[derive(Clone, Copy)]
struct Cpus(libc::cpu_set_t);

impl Cpus {
    fn of_this_thread() -> Cpus {
        // SAFETY: a zeroed cpu_set_t is an empty set; the call fills it for this thread.
        unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            assert_eq!(
                libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set),
                0
            );
            Cpus(set)
        }
    }
    fn count(&self) -> usize {
        // SAFETY: reads a valid set.
        unsafe { libc::CPU_COUNT(&self.0) as usize }
    }
    /// Pins the calling thread to the `n`th of these CPUs (raw system calls only, so a
    /// forked child may call it).
    fn pin_to(&self, n: usize) -> Unpin {
        let cpu = (0..libc::CPU_SETSIZE as usize)
            // SAFETY: reads a valid set.
            .filter(|&c| unsafe { libc::CPU_ISSET(c, &self.0) })
            .nth(n)
            .expect("enough CPUs");
        // SAFETY: a zeroed set with one CPU added, for the calling thread.
        unsafe {
            let mut one: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(cpu, &mut one);
            libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &one);
        }
        Unpin(*self)
    }
}

/// Gives the thread back the CPUs it had.
struct Unpin(Cpus);

impl Drop for Unpin {
    fn drop(&mut self) {
        // SAFETY: restores a set read by `Cpus::of_this_thread`, for the calling thread.
        unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &self.0 .0) };
    }
}

fuse_test! {
    /// With `HANDLE_KILLPRIV_V2` the kernel stops asking for `security.capability` before
    /// every write (it did, one round trip per `write(2)`, without it), and set-id bits are
    /// still cleared by a write from a user without `CAP_FSETID`.
    fn writes_do_not_ask_for_security_capability_each() {
        require_fuse!();
        let (dir, server, root) = mount_for_everyone();
        if server.protocol().flags & init::HANDLE_KILLPRIV_V2 == 0 {
            eprintln!("SKIPPED: the kernel does not offer HANDLE_KILLPRIV_V2");
            return;
        }
        let path = root.join("small-writes");
        {
            use std::io::Write;
            let mut f = std::fs::File::create(&path).unwrap();
            let before = server.stats().getxattr_requests;
            for _ in 0..1000 {
                f.write_all(b"0123456789abcdef").unwrap();
            }
            let asked = server.stats().getxattr_requests - before;
            assert!(asked < 10, "{asked} getxattr requests for 1000 writes");
        }
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o6777)).unwrap();
        let p = cpath(&path);
        let pid = fork_child(|| {
            // SAFETY: drops to uid/gid 1000 in the child, then writes through the mount.
            unsafe {
                if libc::setgid(1000) != 0 || libc::setuid(1000) != 0 {
                    return 1;
                }
                let fd = libc::open(p.as_ptr(), libc::O_WRONLY | libc::O_APPEND);
                if fd < 0 {
                    return 2;
                }
                if libc::write(fd, b"x".as_ptr().cast(), 1) != 1 {
                    return 3;
                }
                libc::close(fd);
            }
            0
        });
        assert_eq!(wait_child(pid), 0);
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o7777;
        assert_eq!(mode, 0o777, "setuid and (group-executable) setgid cleared");
        server.unmount().unwrap();
        drop(dir);
    }
}

fuse_test! {
    /// O_TMPFILE through the mount: an unnamed file that a later `linkat` may name; one
    /// closed without a name is freed once the kernel forgets it.
    fn tmpfiles_are_served_and_freed() {
        require_fuse!();
        let (dir, server) = mount(2);
        let base = server.vfs().inode_count();
        let d = cpath(dir.path());
        for link in [false, true] {
            // SAFETY: a valid directory path; O_TMPFILE with write access.
            let fd = unsafe { libc::open(d.as_ptr(), libc::O_TMPFILE | libc::O_RDWR, 0o600) };
            assert!(fd >= 0, "O_TMPFILE: errno {}", errno());
            // SAFETY: writes 5 bytes from a live buffer to our descriptor.
            assert_eq!(unsafe { libc::write(fd, b"hello".as_ptr().cast(), 5) }, 5);
            if link {
                let target = cpath(&dir.path().join("named"));
                // SAFETY: AT_EMPTY_PATH links our descriptor's file at a valid path.
                let r = unsafe {
                    libc::linkat(
                        fd,
                        c"".as_ptr(),
                        libc::AT_FDCWD,
                        target.as_ptr(),
                        libc::AT_EMPTY_PATH,
                    )
                };
                assert_eq!(r, 0, "linkat: errno {}", errno());
            }
            // SAFETY: closes our descriptor.
            unsafe { libc::close(fd) };
        }
        assert_eq!(std::fs::read(dir.path().join("named")).unwrap(), b"hello");
        std::fs::remove_file(dir.path().join("named")).unwrap();
        unmount_leaking_nothing(server, base);
    }
}

fuse_test! {
    /// Regular files open with `FOPEN_KEEP_CACHE`: what a reopen reads is still what was
    /// last written or truncated through the mount, by this process or another.
    fn kept_page_cache_stays_current_across_opens() {
        require_fuse!();
        let (dir, server) = mount(2);
        let path = dir.path().join("cached");
        std::fs::write(&path, b"first version").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"first version");
        std::fs::write(&path, b"second").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"second");
        let p = cpath(&path);
        let pid = fork_child(|| {
            // SAFETY: a valid path; writes 5 bytes from a live buffer at offset 0.
            unsafe {
                let fd = libc::open(p.as_ptr(), libc::O_WRONLY);
                if fd < 0 || libc::pwrite(fd, b"THIRD".as_ptr().cast(), 5, 0) != 5 {
                    return 1;
                }
                libc::close(fd);
            }
            0
        });
        assert_eq!(wait_child(pid), 0);
        assert_eq!(std::fs::read(&path).unwrap(), b"THIRDd");
        std::fs::OpenOptions::new()
            .write(true)
            .truncate(true)
            .open(&path)
            .unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"");
        server.unmount().unwrap();
    }
}

fuse_test! {
    /// `copy_file_range(2)` through the mount reaches the server as COPY_FILE_RANGE (one
    /// request instead of the kernel's read/write fallback) and copies every byte, at the
    /// offsets and positions the caller gave, as on host tmpfs.
    fn copy_file_range_is_done_by_the_server() {
        require_fuse!();
        let (dir, server) = mount(2);
        let host = tempfile::tempdir_in("/dev/shm").unwrap();
        let data: Vec<u8> = (0..300_000u32).map(|i| (i * 7 + i / 4096) as u8).collect();
        let mut results = Vec::new();
        for base in [dir.path(), host.path()] {
            std::fs::write(base.join("src"), &data).unwrap();
            let src = File::open(base.join("src")).unwrap();
            let dst = File::create(base.join("dst")).unwrap();
            let (mut off_in, mut off_out) = (1000i64, 10i64);
            // SAFETY: two open descriptors and two live offsets.
            let n = unsafe {
                libc::copy_file_range(
                    src.as_raw_fd(),
                    &mut off_in,
                    dst.as_raw_fd(),
                    &mut off_out,
                    250_000,
                    0,
                )
            };
            assert!(
                n >= 0,
                "copy_file_range in {}: errno {}",
                base.display(),
                errno()
            );
            drop((src, dst));
            let copied = std::fs::read(base.join("dst")).unwrap();
            results.push((n, off_in, off_out, copied));
        }
        assert_eq!(results[0].0, 250_000);
        assert!(results[0] == results[1], "FUSE mount vs host tmpfs");
        assert_eq!(&results[0].3[10..], &data[1000..251_000]);
        assert!(
            server.stats().copy_requests >= 1,
            "the kernel fell back to read/write"
        );
        wait_for(&server, "every file released", |s| s.open_files == 0);
        // The test holds no reference to the VFS: unmounting drops it with the server, after
        // the server's node and file tables (their dentries and inodes), so nothing leaks.
        server.unmount().unwrap();
        assert_eq!(scalevfs_vfs::core::leaked_cores(), 0);
    }
}
