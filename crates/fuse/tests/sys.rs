//! `MountOptions::sys`: the kernfs demo tree under `/sys` in the mount, read, written and
//! polled through the kernel (FUSE_POLL with notifications). Needs root, /dev/fuse and
//! fusermount3.

mod common;

use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::io::AsRawFd;
use std::path::Path;
use std::time::Duration;

use common::*;
use scalevfs_fuse::{MountOptions, Server};

fn mount_sys() -> (tempfile::TempDir, Server) {
    let dir = tempfile::tempdir().unwrap();
    let opts = MountOptions {
        sys: true,
        ..common::options(2)
    };
    let server = common::mount_with(dir.path(), &opts).expect("mount with --sys");
    (dir, server)
}

/// `poll(fd, POLLPRI)` on a thread, bounded by 20 s: (ready count, revents).
fn poll_pri(fd: i32) -> std::thread::JoinHandle<(i32, i16)> {
    std::thread::spawn(move || {
        let mut pfd = libc::pollfd {
            fd,
            events: libc::POLLPRI,
            revents: 0,
        };
        // SAFETY: one live pollfd; bounded by a timeout.
        let n = unsafe { libc::poll(&mut pfd, 1, PATIENCE.as_millis() as i32) };
        (n, pfd.revents)
    })
}

fuse_test! {
    fn sys_tree_is_served_and_polls_are_woken() {
        require_fuse!();
        let (dir, server) = mount_sys();
        let sys = dir.path().join("sys");
        let port = sys.join("class/infiniband/mlx5_0/ports/1");
        assert_eq!(
            std::fs::read_to_string(port.join("gids/0")).unwrap(),
            "fe80:0000:0000:0000:0202:c9ff:fe00:0000\n"
        );
        assert_eq!(std::fs::read_dir(port.join("gids")).unwrap().count(), 254);
        assert_eq!(
            std::fs::read_link(sys.join("class/infiniband/mlx5_0/device")).unwrap(),
            Path::new("../../../devices/pci0000:00/0000:00:03.0")
        );
        assert_eq!(
            std::fs::read_to_string(sys.join("class/infiniband/mlx5_0/device/vendor")).unwrap(),
            "0x15b3\n"
        );
        // sysfs refuses new names.
        assert_eq!(
            std::fs::create_dir(sys.join("kernel/x"))
                .unwrap_err()
                .raw_os_error(),
            Some(libc::EPERM)
        );
        // Every read reaches the attribute (direct_io): the counter moves.
        let reads = sys.join("kernel/scalevfs/gid_reads");
        let before: u64 = std::fs::read_to_string(&reads)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        let cnt = || -> u64 {
            std::fs::read_to_string(&reads)
                .unwrap()
                .trim()
                .parse()
                .unwrap()
        };
        let mut g = File::open(port.join("gids/1")).unwrap();
        let mut b = [0u8; 4096];
        assert_eq!(g.read(&mut b).unwrap(), 40);
        assert_eq!(cnt(), before + 1, "the first read shows the attribute");
        assert_eq!(g.read(&mut b).unwrap(), 0, "then EOF");
        assert_eq!(
            cnt(),
            before + 1,
            "seq_file: the read at EOF does not show it again"
        );
        drop(g);
        std::fs::read(port.join("gids/1")).unwrap();
        let after: u64 = std::fs::read_to_string(&reads)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        assert_eq!(after, before + 2);

        // Poll on the knob: a store from another open file notifies its pollers.
        let knob = sys.join("kernel/scalevfs/knob");
        let mut watcher = File::open(&knob).unwrap();
        let mut s = String::new();
        watcher.read_to_string(&mut s).unwrap();
        assert_eq!(s, "0\n");
        let poller = poll_pri(watcher.as_raw_fd());
        // Give the poll time to register with the server (FUSE_POLL with a kh), then store.
        std::thread::sleep(Duration::from_millis(200));
        let mut w = File::options().write(true).open(&knob).unwrap();
        w.write_all(b"42\n").unwrap();
        let (n, revents) = poller.join().unwrap();
        assert_eq!(
            n, 1,
            "poll returned because of the notification, not the timeout"
        );
        assert_ne!(revents & libc::POLLPRI, 0);
        // Reading the new value (from the start, as sysfs readers do) consumes the event.
        watcher.seek(SeekFrom::Start(0)).unwrap();
        let mut s = String::new();
        watcher.read_to_string(&mut s).unwrap();
        assert_eq!(s, "42\n");
        let (_, tree) = server.sys().unwrap();
        assert_eq!(
            tree.knob_value.load(std::sync::atomic::Ordering::Relaxed),
            42
        );

        // And the embedder's sysfs_notify wakes a poller too.
        let poller = poll_pri(watcher.as_raw_fd());
        std::thread::sleep(Duration::from_millis(200));
        let (k, tree) = server.sys().unwrap();
        k.kernfs().notify(&tree.knob);
        let (n, revents) = poller.join().unwrap();
        assert_eq!(n, 1);
        assert_ne!(revents & libc::POLLPRI, 0);
        drop((watcher, w));
        wait_for(&server, "every file released", |s| s.open_files == 0);
        server.unmount().unwrap();
    }
}

fuse_test! {
    /// Every (st_dev, st_ino) in the mount names one file: tmpfs and the kernfs tree under
    /// `/sys` number their inodes independently (both from small numbers) but share the
    /// mount's one device, so the server must keep their numbers apart, the same way in
    /// lookup, getattr and readdir (`find`, `du` and `tar` take equal pairs for hard links).
    fn inode_numbers_are_distinct_across_tmpfs_and_sys() {
        use std::collections::HashMap;
        use std::os::unix::fs::{DirEntryExt, MetadataExt};
        require_fuse!();
        let (dir, server) = mount_sys();
        let root = dir.path().to_owned();
        // tmpfs files made through the mount (numbered by the workers) and behind it (by this
        // thread), next to the kernfs tree.
        for i in 0..64 {
            std::fs::write(root.join(format!("f{i}")), b"x").unwrap();
        }
        let p = scalevfs::Process::new(server.vfs(), scalevfs::Credentials::root());
        p.mkdir("/d", 0o755).unwrap();
        for i in 0..64 {
            p.write_file(format!("/d/g{i}"), b"y").unwrap();
        }
        drop(p);
        let mut seen: HashMap<(u64, u64), std::path::PathBuf> = HashMap::new();
        let mut dirs = vec![root.clone()];
        let mut entries = 0;
        while let Some(d) = dirs.pop() {
            let m = std::fs::symlink_metadata(&d).unwrap();
            if let Some(old) = seen.insert((m.dev(), m.ino()), d.clone()) {
                panic!(
                    "{} and {} share inode {}",
                    old.display(),
                    d.display(),
                    m.ino()
                );
            }
            for e in std::fs::read_dir(&d).unwrap() {
                let e = e.unwrap();
                let path = e.path();
                let m = std::fs::symlink_metadata(&path).unwrap();
                if path.starts_with(root.join("sys")) {
                    entries += 1;
                }
                // readdir's d_ino is lookup's st_ino, except at a mount point, where (as on
                // Linux) readdir shows the directory underneath.
                if path != root.join("sys") {
                    assert_eq!(e.ino(), m.ino(), "d_ino of {}", path.display());
                }
                if m.is_dir() {
                    dirs.push(path);
                } else if let Some(old) = seen.insert((m.dev(), m.ino()), path.clone()) {
                    panic!(
                        "{} and {} share inode {}",
                        old.display(),
                        path.display(),
                        m.ino()
                    );
                }
            }
        }
        assert!(entries > 254, "walked the kernfs tree too: {entries}");
        // getattr on an open file agrees with lookup.
        let gid = root.join("sys/class/infiniband/mlx5_0/ports/1/gids/0");
        let f = File::open(&gid).unwrap();
        assert_eq!(
            f.metadata().unwrap().ino(),
            std::fs::metadata(&gid).unwrap().ino()
        );
        drop(f);
        wait_for(&server, "every file released", |s| s.open_files == 0);
        server.unmount().unwrap();
    }
}
