//! Renames racing a `RESOLVE_BENEATH` walk: no walk may end outside its root.

use super::*;

/// A scoped walk never ends outside its root, even while directories are renamed out of
/// it: `a/b/../../secret` taken while `a/b` moves outside could reach `/secret`; the walk
/// sees the rename and answers EAGAIN instead (as Linux does), or finds the file inside.
#[test]
fn renames_do_not_let_a_beneath_walk_escape() {
    let vfs = Vfs::new(VfsOptions::default());
    let p = Process::new(&vfs, Credentials::root());
    for d in ["/sandbox", "/sandbox/a", "/sandbox/a/b", "/out"] {
        p.mkdir(d, 0o755).unwrap();
    }
    p.write_file("/sandbox/secret", b"inside").unwrap();
    p.write_file("/secret", b"OUTSIDE").unwrap();
    let stop = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|s| {
        let (p2, stop2) = (&p, &stop);
        let renamer = s.spawn(move || {
            while !stop2.load(std::sync::atomic::Ordering::Relaxed) {
                let _ = p2.rename("/sandbox/a/b", "/out/b");
                let _ = p2.rename("/out/b", "/sandbox/a/b");
            }
        });
        // Stop the renamer even when an assertion below panics: the scope joins it first.
        let _stop_renamer = StopOnDrop(&stop);
        let q = Process::new(&vfs, Credentials::root());
        let dfd = q.open("/sandbox", O_RDONLY | O_DIRECTORY, 0).unwrap();
        let how = OpenHow {
            flags: O_RDONLY as u64,
            mode: 0,
            resolve: BENEATH,
        };
        let mut inside = 0;
        for _ in 0..20_000 {
            match q.openat2(dfd, "a/b/../../secret", &how) {
                Ok(fd) => {
                    let mut b = [0u8; 8];
                    let n = q.read(fd, &mut b).unwrap();
                    assert_eq!(&b[..n], b"inside", "escaped the sandbox");
                    q.close(fd).unwrap();
                    inside += 1;
                }
                Err(e) => assert!(
                    [
                        scalevfs::Errno::EAGAIN,
                        scalevfs::Errno::ENOENT,
                        scalevfs::Errno::EXDEV
                    ]
                    .contains(&e),
                    "{e:?}"
                ),
            }
        }
        // The walk must also succeed, not only fail safely: once the renamer has stopped
        // (its last rename puts `b` back), the same open finds the file inside. Under load
        // the racing loop alone may never win a quiet window, so that is not asserted.
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        renamer.join().unwrap();
        let fd = q.openat2(dfd, "a/b/../../secret", &how).unwrap();
        let mut b = [0u8; 8];
        let n = q.read(fd, &mut b).unwrap();
        assert_eq!(&b[..n], b"inside");
        eprintln!("{inside} of 20000 racing opens found the file inside");
    });
}

/// As above, with the `..` in a symlink's target rather than in the path: `a/b/lnk`, where
/// `lnk` (in `b`) points to `../../secret`, has no `..` of its own, but following `lnk`
/// after `b` moved to `/out/b` climbs to `/secret`. Opening it, and creating through a
/// dangling one (`../../made`), must stay inside as well (EAGAIN when a rename raced).
#[test]
fn renames_do_not_let_a_symlink_dotdot_escape() {
    let vfs = Vfs::new(VfsOptions::default());
    let p = Process::new(&vfs, Credentials::root());
    for d in ["/sandbox", "/sandbox/a", "/sandbox/a/b", "/out"] {
        p.mkdir(d, 0o755).unwrap();
    }
    p.write_file("/sandbox/secret", b"inside").unwrap();
    p.write_file("/secret", b"OUTSIDE").unwrap();
    p.symlinkat("../../secret", libc::AT_FDCWD, "/sandbox/a/b/lnk")
        .unwrap();
    p.symlinkat("../../made", libc::AT_FDCWD, "/sandbox/a/b/lnkc")
        .unwrap();
    let stop = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|s| {
        let (p2, stop2) = (&p, &stop);
        let renamer = s.spawn(move || {
            while !stop2.load(std::sync::atomic::Ordering::Relaxed) {
                let _ = p2.rename("/sandbox/a/b", "/out/b");
                let _ = p2.rename("/out/b", "/sandbox/a/b");
            }
        });
        let _stop_renamer = StopOnDrop(&stop);
        let q = Process::new(&vfs, Credentials::root());
        let dfd = q.open("/sandbox", O_RDONLY | O_DIRECTORY, 0).unwrap();
        let allowed = [
            scalevfs::Errno::EAGAIN,
            scalevfs::Errno::ENOENT,
            scalevfs::Errno::EXDEV,
        ];
        let mut inside = 0;
        for i in 0..20_000 {
            let resolve = if i % 2 == 0 { BENEATH } else { IN_ROOT };
            let how = OpenHow {
                flags: O_RDONLY as u64,
                mode: 0,
                resolve,
            };
            match q.openat2(dfd, "a/b/lnk", &how) {
                Ok(fd) => {
                    let mut b = [0u8; 8];
                    let n = q.read(fd, &mut b).unwrap();
                    assert_eq!(&b[..n], b"inside", "escaped the sandbox");
                    q.close(fd).unwrap();
                    inside += 1;
                }
                Err(e) => assert!(allowed.contains(&e), "{e:?}"),
            }
            let how = OpenHow {
                flags: (O_CREAT | O_WRONLY) as u64,
                mode: 0o600,
                resolve,
            };
            match q.openat2(dfd, "a/b/lnkc", &how) {
                Ok(fd) => q.close(fd).unwrap(),
                Err(e) => assert!(allowed.contains(&e), "{e:?}"),
            }
            assert_eq!(
                q.stat("/made").map(|_| ()),
                Err(scalevfs::Errno::ENOENT),
                "created outside the sandbox"
            );
        }
        // Once the renamer has stopped (`b` back inside), both resolutions succeed.
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        renamer.join().unwrap();
        for resolve in [BENEATH, IN_ROOT] {
            let how = OpenHow {
                flags: O_RDONLY as u64,
                mode: 0,
                resolve,
            };
            let fd = q.openat2(dfd, "a/b/lnk", &how).unwrap();
            let mut b = [0u8; 8];
            let n = q.read(fd, &mut b).unwrap();
            assert_eq!(&b[..n], b"inside");
            q.close(fd).unwrap();
        }
        eprintln!("{inside} of 20000 racing opens found the file inside");
    });
}
