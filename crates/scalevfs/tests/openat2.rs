//! `openat2` and its `RESOLVE_*` flags, compared with the host kernel: the same tree
//! (`sandbox/` with files, directories and symlinks, and `outside` next to it) on the
//! host's /dev/shm and in a scalevfs `Vfs`, the same calls with a descriptor on `sandbox`,
//! and every result compared (an errno, or the type of what was opened).

mod common;

use std::ffi::CString;

use common::StopOnDrop;
use libc::{O_CREAT, O_DIRECTORY, O_NOFOLLOW, O_PATH, O_RDONLY, O_RDWR, O_WRONLY};
use scalevfs::{Credentials, Locking, OpenHow, Process, Vfs, VfsOptions};
use scalevfs_vfs::namei::Resolve;

const BENEATH: u64 = Resolve::BENEATH;
const IN_ROOT: u64 = Resolve::IN_ROOT;
const NO_SYMLINKS: u64 = Resolve::NO_SYMLINKS;
const NO_XDEV: u64 = Resolve::NO_XDEV;
const NO_MAGICLINKS: u64 = Resolve::NO_MAGICLINKS;
const CACHED: u64 = Resolve::CACHED;

/// (path, flags, mode, resolve).
fn cases() -> Vec<(&'static str, i32, u64, u64)> {
    let o = O_RDONLY;
    vec![
        ("a/f", o, 0, 0),
        ("a/f", o, 0, BENEATH),
        ("a/../a/f", o, 0, BENEATH),
        ("a/b/../../a/f", o, 0, BENEATH),
        ("..", o, 0, BENEATH),
        ("../outside", o, 0, BENEATH),
        ("a/../../outside", o, 0, BENEATH),
        ("/a/f", o, 0, BENEATH),
        ("lnk_rel", o, 0, BENEATH),
        ("lnk_abs", o, 0, BENEATH),
        ("lnk_up", o, 0, BENEATH),
        ("lnk_dir/f", o, 0, BENEATH),
        ("lnk_abs", O_PATH | O_NOFOLLOW, 0, BENEATH),
        ("..", o, 0, IN_ROOT),
        ("../outside", o, 0, IN_ROOT),
        ("/a/f", o, 0, IN_ROOT),
        ("/", O_DIRECTORY, 0, IN_ROOT),
        ("lnk_abs", o, 0, IN_ROOT),
        ("lnk_up", o, 0, IN_ROOT),
        ("a/b/../../../a/f", o, 0, IN_ROOT),
        ("lnk_rel", o, 0, NO_SYMLINKS),
        ("lnk_dir/f", o, 0, NO_SYMLINKS),
        ("lnk_rel", O_PATH | O_NOFOLLOW, 0, NO_SYMLINKS),
        ("a/f", o, 0, NO_SYMLINKS | NO_MAGICLINKS | NO_XDEV),
        ("..", O_DIRECTORY, 0, NO_XDEV),
        ("new", O_CREAT | O_WRONLY, 0o600, BENEATH),
        ("../new2", O_CREAT | O_WRONLY, 0o600, BENEATH),
        ("lnk_newabs", O_CREAT | O_WRONLY, 0o600, BENEATH),
        ("lnk_newabs", O_CREAT | O_WRONLY, 0o600, IN_ROOT),
        ("a/f", O_CREAT | O_RDONLY, 0o600, CACHED),
        ("a/f", libc::O_TRUNC | O_WRONLY, 0, CACHED),
        // Argument checks.
        ("a/f", o, 0, 0x40),
        ("a/f", o, 0, BENEATH | IN_ROOT),
        ("a/f", o, 0o644, 0),
        ("a/f", O_CREAT | O_WRONLY, 0o10000, 0),
        ("a/f", O_PATH | O_RDWR, 0, 0),
        ("a/f", o | (1 << 30), 0, 0),
        ("", o, 0, 0),
    ]
}

/// What an open gave: the file type it opened, or the errno.
type Outcome = Result<u32, i32>;

fn host_run(dir: &str) -> Vec<Outcome> {
    let c = |p: &str| CString::new(format!("{dir}/{p}")).unwrap();
    std::fs::create_dir_all(format!("{dir}/sandbox/a/b")).unwrap();
    std::fs::write(format!("{dir}/sandbox/a/f"), b"f").unwrap();
    std::fs::write(format!("{dir}/outside"), b"o").unwrap();
    for (target, name) in [
        ("a/f", "lnk_rel"),
        ("/a/f", "lnk_abs"),
        ("../outside", "lnk_up"),
        ("a", "lnk_dir"),
        ("/newabs", "lnk_newabs"),
    ] {
        std::os::unix::fs::symlink(target, format!("{dir}/sandbox/{name}")).unwrap();
    }
    // SAFETY: a NUL-terminated path.
    let dfd = unsafe { libc::open(c("sandbox").as_ptr(), O_RDONLY | O_DIRECTORY) };
    assert!(dfd >= 0);
    let out = cases()
        .into_iter()
        .map(|(path, flags, mode, resolve)| {
            let how = [(flags | libc::O_CLOEXEC) as u64, mode, resolve];
            let p = CString::new(path).unwrap();
            // SAFETY: a path and a 24-byte `struct open_how`.
            let fd =
                unsafe { libc::syscall(libc::SYS_openat2, dfd, p.as_ptr(), how.as_ptr(), 24usize) };
            if fd < 0 {
                return Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(0));
            }
            // SAFETY: a zeroed stat is a valid out-buffer; `fd` is ours.
            let mut st: libc::stat = unsafe { std::mem::zeroed() };
            // SAFETY: as above.
            unsafe {
                libc::fstat(fd as i32, &mut st);
                libc::close(fd as i32);
            }
            Ok(st.st_mode & libc::S_IFMT)
        })
        .collect();
    // SAFETY: our descriptor.
    unsafe { libc::close(dfd) };
    out
}

fn ours_run(locking: Locking) -> Vec<Outcome> {
    let vfs = Vfs::new(VfsOptions {
        locking,
        ..VfsOptions::default()
    });
    let p = Process::new(&vfs, Credentials::root());
    p.mkdir("/sandbox", 0o755).unwrap();
    p.mkdir("/sandbox/a", 0o755).unwrap();
    p.mkdir("/sandbox/a/b", 0o755).unwrap();
    p.write_file("/sandbox/a/f", b"f").unwrap();
    p.write_file("/outside", b"o").unwrap();
    for (target, name) in [
        ("a/f", "lnk_rel"),
        ("/a/f", "lnk_abs"),
        ("../outside", "lnk_up"),
        ("a", "lnk_dir"),
        ("/newabs", "lnk_newabs"),
    ] {
        p.symlinkat(target, libc::AT_FDCWD, format!("/sandbox/{name}"))
            .unwrap();
    }
    let dfd = p.open("/sandbox", O_RDONLY | O_DIRECTORY, 0).unwrap();
    cases()
        .into_iter()
        .map(|(path, flags, mode, resolve)| {
            let how = OpenHow {
                flags: (flags | libc::O_CLOEXEC) as u64,
                mode,
                resolve,
            };
            let fd = p.openat2(dfd, path, &how).map_err(|e| e.0)?;
            let st = p.fstat(fd).unwrap();
            p.close(fd).unwrap();
            Ok(st.mode & libc::S_IFMT)
        })
        .collect()
}

#[test]
fn openat2_matches_the_host() {
    let base = format!("/dev/shm/scalevfs-openat2-{}", std::process::id());
    if std::fs::create_dir(&base).is_err() {
        eprintln!("no /dev/shm: skipping");
        return;
    }
    let host = host_run(&base);
    std::fs::remove_dir_all(&base).unwrap();
    if host.first() == Some(&Err(libc::ENOSYS)) {
        eprintln!("the host has no openat2: skipping");
        return;
    }
    for locking in [Locking::Scalable, Locking::Legacy] {
        let ours = ours_run(locking);
        for ((case, h), o) in cases().iter().zip(&host).zip(&ours) {
            assert_eq!(h, o, "{case:?} ({locking:?})");
        }
    }
}

/// `RESOLVE_NO_XDEV`: stepping into a mount, out of one with `..`, or through an absolute
/// symlink to a root on another mount is EXDEV; an absolute path argument is allowed (as
/// `nd_jump_root` allows it at `path_init`); within one file system nothing changes.
#[test]
fn no_xdev_stops_at_mounts() {
    let vfs = Vfs::new(VfsOptions::default());
    let p = Process::new(&vfs, Credentials::root());
    p.mkdir("/m", 0o755).unwrap();
    p.mount(
        "/m",
        std::sync::Arc::new(scalevfs::Tmpfs::new(Default::default())),
    )
    .unwrap();
    p.write_file("/m/f", b"").unwrap();
    p.write_file("/g", b"").unwrap();
    p.symlinkat("/g", libc::AT_FDCWD, "/m/abs").unwrap();
    let how = |flags: i32| OpenHow {
        flags: flags as u64,
        mode: 0,
        resolve: NO_XDEV,
    };
    let root = p.open("/", O_RDONLY | O_DIRECTORY, 0).unwrap();
    let m = p.open("/m", O_RDONLY | O_DIRECTORY, 0).unwrap();
    assert_eq!(
        p.openat2(root, "m/f", &how(O_RDONLY)),
        Err(scalevfs::Errno::EXDEV)
    );
    assert_eq!(
        p.openat2(root, "m", &how(O_PATH)),
        Err(scalevfs::Errno::EXDEV)
    );
    assert_eq!(
        p.openat2(m, "../g", &how(O_RDONLY)),
        Err(scalevfs::Errno::EXDEV)
    );
    assert_eq!(
        p.openat2(m, "abs", &how(O_RDONLY)),
        Err(scalevfs::Errno::EXDEV)
    );
    assert!(p.openat2(m, "/g", &how(O_RDONLY)).is_ok());
    assert!(p.openat2(m, "f", &how(O_RDONLY)).is_ok());
    assert!(p.openat2(root, "g", &how(O_RDONLY)).is_ok());
}

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
        s.spawn(move || {
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
        assert!(inside > 0);
    });
}
