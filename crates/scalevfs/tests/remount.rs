//! Remounting read-only and back (`Process::remount`, see `scalevfs_vfs::mount::write`):
//! writers racing remounts never change a file system while it is read-only, files open
//! for writing keep it writable until their last close (across `dup` and `fork`), and no
//! write access is left counted. The same calls are compared with the host kernel in the
//! conformance suite (`remount/*` cases).

mod common;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use common::StopOnDrop;
use libc::{O_CREAT, O_RDONLY, O_RDWR, O_TRUNC, O_WRONLY};
use scalevfs::{
    Credentials, Errno, Locking, MountOptions, Process, Tmpfs, TmpfsOptions, Vfs, VfsOptions,
};

fn mounted(locking: Locking) -> (Arc<Vfs>, Process) {
    let vfs = Vfs::new(VfsOptions {
        locking,
        ..VfsOptions::default()
    });
    let p = Process::new(&vfs, Credentials::root());
    p.mkdir("/m", 0o755).unwrap();
    p.mount("/m", Arc::new(Tmpfs::new(TmpfsOptions::default())))
        .unwrap();
    (vfs, p)
}

fn ro() -> MountOptions {
    MountOptions::new().read_only(true)
}

fn rw() -> MountOptions {
    MountOptions::new()
}

/// Everything a change could touch under `dir`: names, kinds, sizes, modes, times.
fn snapshot(p: &Process, dir: &str, out: &mut Vec<String>) {
    let mut names: Vec<_> = p
        .readdir(dir)
        .unwrap()
        .into_iter()
        .filter(|e| e.name != b"." && e.name != b"..")
        .collect();
    names.sort_by(|a, b| a.name.cmp(&b.name));
    for e in names {
        let path = format!("{dir}/{}", String::from_utf8_lossy(&e.name));
        // A file may be gone only if something changed the directory: then the listing
        // differs anyway.
        if let Ok(st) = p.lstat(&path) {
            out.push(format!(
                "{path} {:o} {} {} {:?} {:?}",
                st.mode, st.size, st.nlink, st.mtime, st.ctime
            ));
            if st.mode & libc::S_IFMT == libc::S_IFDIR {
                snapshot(p, &path, out);
            }
        }
    }
}

#[test]
fn writers_racing_remounts_change_nothing_while_read_only() {
    for locking in [Locking::Scalable, Locking::Legacy] {
        let (_vfs, p) = mounted(locking);
        const WRITERS: usize = 4;
        for t in 0..WRITERS {
            p.mkdir(format!("/m/t{t}"), 0o755).unwrap();
        }
        let stop = AtomicBool::new(false);
        let (done, refused) = (AtomicUsize::new(0), AtomicUsize::new(0));
        let mut read_only_rounds = 0;
        std::thread::scope(|s| {
            let _stop = StopOnDrop(&stop);
            for t in 0..WRITERS {
                let (p, stop, done, refused) = (p.fork(), &stop, &done, &refused);
                s.spawn(move || {
                    let dir = format!("/m/t{t}");
                    let mut i = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        i += 1;
                        let (a, b) = (format!("{dir}/a{}", i % 4), format!("{dir}/b{}", i % 4));
                        // Each step may meet a read-only mount; nothing else may fail but
                        // names that an earlier refused step left as they were.
                        let steps: [&dyn Fn() -> Result<(), Errno>; 5] = [
                            &|| {
                                let fd = p.open(&a, O_CREAT | O_WRONLY | O_TRUNC, 0o644)?;
                                let r = p.write(fd, b"data").map(drop);
                                p.close(fd)?;
                                r
                            },
                            &|| p.fchmodat(libc::AT_FDCWD, &a, 0o600 | (i as u32 & 0o44), 0),
                            &|| p.rename(&a, &b),
                            &|| p.mkdir(format!("{b}.d"), 0o755),
                            &|| {
                                p.rmdir(format!("{b}.d"))?;
                                p.unlink(&b)
                            },
                        ];
                        for step in steps {
                            match step() {
                                Ok(()) => done.fetch_add(1, Ordering::Relaxed),
                                Err(Errno::EROFS) => refused.fetch_add(1, Ordering::Relaxed),
                                Err(Errno::ENOENT | Errno::EEXIST) => 0,
                                Err(e) => panic!("{locking:?}: unexpected {e}"),
                            };
                        }
                    }
                });
            }
            // Until 10 remounts have succeeded (most meet a writer: EBUSY), or 5000 tries.
            for _ in 0..5000 {
                if read_only_rounds == 10 {
                    break;
                }
                match p.remount("/m", ro()) {
                    Ok(()) => {
                        read_only_rounds += 1;
                        let mut before = Vec::new();
                        snapshot(&p, "/m", &mut before);
                        std::thread::yield_now();
                        std::thread::sleep(std::time::Duration::from_micros(200));
                        let mut after = Vec::new();
                        snapshot(&p, "/m", &mut after);
                        assert_eq!(before, after, "{locking:?}: changed while read-only");
                        p.remount("/m", rw()).unwrap();
                    }
                    // A writer was in (or a file open for writing): Linux's answer too.
                    Err(Errno::EBUSY) => {}
                    Err(e) => panic!("{locking:?}: remount: {e}"),
                }
                std::thread::sleep(std::time::Duration::from_micros(100));
            }
            stop.store(true, Ordering::Relaxed);
        });
        assert!(done.load(Ordering::Relaxed) > 0, "{locking:?}: writers ran");
        assert!(read_only_rounds > 0, "{locking:?}: no remount succeeded");
        // Every write access was given back: the first try succeeds now.
        p.remount("/m", ro()).unwrap();
        assert_eq!(p.mkdir("/m/late", 0o755), Err(Errno::EROFS));
        p.remount("/m", rw()).unwrap();
        eprintln!(
            "{locking:?}: {read_only_rounds} read-only rounds, {} changes, {} refused",
            done.load(Ordering::Relaxed),
            refused.load(Ordering::Relaxed)
        );
    }
}

#[test]
fn a_file_open_for_writing_keeps_the_mount_writable_until_its_last_close() {
    for locking in [Locking::Scalable, Locking::Legacy] {
        let (_vfs, p) = mounted(locking);
        p.write_file("/m/f", b"x").unwrap();
        // Reading, or an O_RDONLY | O_TRUNC open that is closed, holds nothing.
        let r = p.open("/m/f", O_RDONLY, 0).unwrap();
        let t = p.open("/m/f", O_RDONLY | O_TRUNC, 0).unwrap();
        p.remount("/m", ro()).unwrap();
        p.remount("/m", rw()).unwrap();
        p.close(t).unwrap();
        // Writing: through dup and fork, until the last descriptor is gone.
        let w = p.open("/m/f", O_RDWR, 0).unwrap();
        let d = p.dup(w).unwrap();
        let child = p.fork();
        assert_eq!(p.remount("/m", ro()), Err(Errno::EBUSY));
        p.close(w).unwrap();
        p.close(d).unwrap();
        assert_eq!(p.remount("/m", ro()), Err(Errno::EBUSY), "the child has it");
        child.exit();
        p.remount("/m", ro()).unwrap();
        // What was open for reading still reads; nothing writes.
        assert_eq!(p.pread64(r, &mut [0u8; 4], 0), Ok(0));
        assert_eq!(p.open("/m/f", O_WRONLY, 0), Err(Errno::EROFS));
        assert_eq!(p.truncate("/m/f", 0), Err(Errno::EROFS));
        p.close(r).unwrap();
        // A failed open for writing leaves no count behind.
        p.remount("/m", rw()).unwrap();
        assert_eq!(
            p.open("/m/f", O_WRONLY | libc::O_DIRECTORY, 0),
            Err(Errno::ENOTDIR)
        );
        assert_eq!(
            p.open("/m/nope/f", O_CREAT | O_WRONLY, 0o644),
            Err(Errno::ENOENT)
        );
        p.remount("/m", ro()).unwrap();
    }
}

#[test]
fn the_front_ends_handle_api_holds_write_access_too() {
    let (vfs, p) = mounted(Locking::Scalable);
    p.write_file("/m/f", b"x").unwrap();
    let c = vfs.core();
    let m = c.node_lookup(&c.root_node(), b"m").unwrap();
    let f = c.node_lookup(&m, b"f").unwrap();
    let file = c.node_open(&f, O_WRONLY).unwrap();
    assert_eq!(p.remount("/m", ro()), Err(Errno::EBUSY));
    drop(file);
    p.remount("/m", ro()).unwrap();
    assert_eq!(c.node_open(&f, O_WRONLY).err(), Some(Errno::EROFS));
    assert_eq!(c.node_unlink(&m, b"f"), Err(Errno::EROFS));
    p.remount("/m", rw()).unwrap();
    c.node_unlink(&m, b"f").unwrap();
}
