//! `openat2` and its `RESOLVE_*` flags, compared with the host kernel: the same tree
//! (`sandbox/` with files, directories and symlinks, and `outside` and `both` next to it)
//! on the host's /dev/shm and in a scalevfs `Vfs`, the same calls with a descriptor on
//! `sandbox` (or the cwd, or stranger descriptors), and every result compared (an errno,
//! or the type and size of what was opened).

#[path = "../common/mod.rs"]
mod common;

mod escapes;
mod mounts;
mod random;

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
/// Not a flag: marks a case where scalevfs may answer EAGAIN where the host answers.
const MAY_EAGAIN: u64 = 1 << 63;

/// The directory a case starts from: a descriptor on `sandbox`, `AT_FDCWD` with the cwd
/// there, a descriptor on a regular file (`sandbox/a/f`), a descriptor number that is not
/// open, one on a directory removed since (`sandbox/gone`), and one on a directory renamed
/// out of the sandbox since (`sandbox/mv`, now `moved` next to it, holding a file `x`),
/// and an `O_PATH` one on the symlink `sandbox/lnk_dir`.
#[derive(Clone, Copy, Debug)]
enum Dir {
    Sandbox,
    Cwd,
    File,
    Bad,
    Removed,
    Moved,
    Link,
}

/// One `openat2` call: (dirfd, path, flags, mode, resolve).
type Case<'a> = (Dir, &'a str, i32, u64, u64);

/// The cases. They run in order on one tree, so a create shows in later cases.
fn cases() -> Vec<Case<'static>> {
    use Dir::*;
    let o = O_RDONLY;
    let c = O_CREAT | O_WRONLY;
    vec![
        (Sandbox, "a/f", o, 0, 0),
        (Sandbox, "a/f", o, 0, BENEATH),
        (Sandbox, "a/../a/f", o, 0, BENEATH),
        (Sandbox, "a/b/../../a/f", o, 0, BENEATH),
        (Sandbox, "..", o, 0, BENEATH),
        (Sandbox, "../outside", o, 0, BENEATH),
        (Sandbox, "a/../../outside", o, 0, BENEATH),
        (Sandbox, "/a/f", o, 0, BENEATH),
        (Sandbox, "lnk_rel", o, 0, BENEATH),
        (Sandbox, "lnk_abs", o, 0, BENEATH),
        (Sandbox, "lnk_up", o, 0, BENEATH),
        (Sandbox, "lnk_dir/f", o, 0, BENEATH),
        (Sandbox, "lnk_abs", O_PATH | O_NOFOLLOW, 0, BENEATH),
        (Sandbox, "..", o, 0, IN_ROOT),
        (Sandbox, "../outside", o, 0, IN_ROOT),
        (Sandbox, "/a/f", o, 0, IN_ROOT),
        (Sandbox, "/", O_DIRECTORY, 0, IN_ROOT),
        (Sandbox, "lnk_abs", o, 0, IN_ROOT),
        (Sandbox, "lnk_up", o, 0, IN_ROOT),
        (Sandbox, "a/b/../../../a/f", o, 0, IN_ROOT),
        (Sandbox, "lnk_rel", o, 0, NO_SYMLINKS),
        (Sandbox, "lnk_dir/f", o, 0, NO_SYMLINKS),
        (Sandbox, "lnk_rel", O_PATH | O_NOFOLLOW, 0, NO_SYMLINKS),
        (Sandbox, "a/f", o, 0, NO_SYMLINKS | NO_MAGICLINKS | NO_XDEV),
        (Sandbox, "..", O_DIRECTORY, 0, NO_XDEV),
        (Sandbox, "new", c, 0o600, BENEATH),
        (Sandbox, "../new2", c, 0o600, BENEATH),
        (Sandbox, "lnk_newabs", c, 0o600, BENEATH),
        (Sandbox, "lnk_newabs", c, 0o600, IN_ROOT),
        (Sandbox, "a/f", O_CREAT | O_RDONLY, 0o600, CACHED),
        (Sandbox, "a/f", libc::O_TRUNC | O_WRONLY, 0, CACHED),
        // Symlinks whose targets climb with `..` or are absolute, at the end and in the
        // middle of the path, and chains of them. `both` exists inside (2 bytes) and
        // outside (8 bytes): the size tells which one an open reached.
        (Sandbox, "lnk_mid_up", o, 0, 0),
        (Sandbox, "lnk_mid_up", o, 0, BENEATH),
        (Sandbox, "lnk_mid_up", o, 0, IN_ROOT),
        (Sandbox, "lnk_chain", o, 0, BENEATH),
        (Sandbox, "lnk_chain", o, 0, IN_ROOT),
        (Sandbox, "lnk_chain_abs", o, 0, BENEATH),
        (Sandbox, "lnk_chain_abs", o, 0, IN_ROOT),
        (Sandbox, "lnk_both_abs", o, 0, BENEATH),
        (Sandbox, "lnk_both_abs", o, 0, IN_ROOT),
        (Sandbox, "lnk_both_abs/", o, 0, IN_ROOT),
        (Sandbox, "lnk_both_up", o, 0, 0),
        (Sandbox, "lnk_both_up", o, 0, BENEATH),
        (Sandbox, "lnk_both_up", o, 0, IN_ROOT),
        (Sandbox, "lnk_dotdot/both", o, 0, 0),
        (Sandbox, "lnk_dotdot/both", o, 0, BENEATH),
        (Sandbox, "lnk_dotdot/both", o, 0, IN_ROOT),
        (Sandbox, "lnk_dotdot", O_DIRECTORY, 0, BENEATH),
        (Sandbox, "lnk_dotdot", O_DIRECTORY, 0, IN_ROOT),
        (Sandbox, "lnk_root/both", o, 0, BENEATH),
        (Sandbox, "lnk_root/both", o, 0, IN_ROOT),
        (Sandbox, "lnk_root/../both", o, 0, IN_ROOT),
        (Sandbox, "lnk_dotdot_abs/both", o, 0, IN_ROOT),
        (Sandbox, "a/lnk_a_up", o, 0, BENEATH),
        (Sandbox, "a/lnk_a_up", o, 0, IN_ROOT),
        (Sandbox, "a/lnk_a_ok", o, 0, BENEATH),
        (Sandbox, "a/lnk_a_ok", o, 0, IN_ROOT),
        (Sandbox, "lnk_dir/lnk_a_up", o, 0, BENEATH),
        (Sandbox, "lnk_dir/lnk_a_up", o, 0, IN_ROOT),
        (Sandbox, "lnk_dir/../both", o, 0, BENEATH),
        (Sandbox, "lnk_dir/../../both", o, 0, IN_ROOT),
        (Sandbox, "lnk_loop", o, 0, BENEATH),
        (Sandbox, "lnk_loop", O_PATH | O_NOFOLLOW, 0, NO_SYMLINKS),
        (Sandbox, "lnk_mid_up", o, 0, NO_SYMLINKS | IN_ROOT),
        // NO_XDEV: an absolute symlink is EXDEV until the walk has set its root (an
        // absolute path or a `..` sets it), even to the same mount, as on Linux.
        (Sandbox, "lnk_both_abs", o, 0, NO_XDEV),
        (Sandbox, "lnk_chain_abs", o, 0, NO_XDEV),
        (Cwd, "lnk_both_abs", o, 0, NO_XDEV),
        (Sandbox, "a/../lnk_both_abs", o, 0, NO_XDEV),
        (Sandbox, "/sandbox/lnk_both_abs", o, 0, NO_XDEV),
        (Sandbox, "lnk_dir/../lnk_both_abs", o, 0, NO_XDEV),
        (Sandbox, "lnk_both_abs", o, 0, NO_XDEV | IN_ROOT),
        // Absolute paths, `.`, `..` at the root, trailing slashes.
        (Sandbox, "/both", o, 0, IN_ROOT),
        (Sandbox, "//both", o, 0, IN_ROOT),
        (Sandbox, "/../both", o, 0, IN_ROOT),
        (Sandbox, "/", o, 0, BENEATH),
        (Sandbox, "/..", O_DIRECTORY, 0, IN_ROOT),
        (Sandbox, ".", O_DIRECTORY, 0, BENEATH),
        (Sandbox, "./", o, 0, BENEATH),
        (Sandbox, "a/..", O_DIRECTORY, 0, BENEATH),
        (Sandbox, "a/../..", O_DIRECTORY, 0, BENEATH),
        (Sandbox, "a/../..", O_DIRECTORY, 0, IN_ROOT),
        (Sandbox, "a/b/..//..//", o, 0, BENEATH),
        (Sandbox, "a/f/", o, 0, BENEATH),
        (Sandbox, "a/f/.", o, 0, BENEATH),
        (Sandbox, "a/f/..", o, 0, BENEATH),
        // NO_SYMLINKS and O_NOFOLLOW: a trailing slash follows even with O_NOFOLLOW.
        (Sandbox, "lnk_dir/", O_DIRECTORY, 0, NO_SYMLINKS),
        (Sandbox, "lnk_dir/", O_PATH | O_NOFOLLOW, 0, NO_SYMLINKS),
        (Sandbox, "lnk_dir/", O_PATH | O_NOFOLLOW, 0, 0),
        (Sandbox, "lnk_rel", O_NOFOLLOW, 0, NO_SYMLINKS),
        (Sandbox, "lnk_rel", O_NOFOLLOW, 0, 0),
        (Sandbox, "lnk_up", O_PATH | O_NOFOLLOW, 0, BENEATH),
        (Sandbox, "lnk_dir/f", O_PATH, 0, NO_SYMLINKS),
        (Sandbox, "a/f", O_PATH | O_NOFOLLOW, 0, BENEATH),
        (Sandbox, "lnk_both_abs", O_PATH | O_NOFOLLOW, 0, IN_ROOT),
        // O_CREAT through a trailing (dangling) symlink: NO_SYMLINKS, O_NOFOLLOW, O_EXCL
        // first (nothing created), then BENEATH refuses what IN_ROOT creates inside.
        (Sandbox, "lnk_dangle_up", c, 0o600, NO_SYMLINKS),
        (Sandbox, "lnk_dangle_up", c | O_NOFOLLOW, 0o600, 0),
        (
            Sandbox,
            "lnk_dangle_up",
            c | libc::O_EXCL,
            0o600,
            NO_SYMLINKS,
        ),
        (
            Sandbox,
            "lnk_dangle_up",
            O_PATH | O_NOFOLLOW,
            0,
            NO_SYMLINKS,
        ),
        (Sandbox, "lnk_dir/newx", c, 0o600, NO_SYMLINKS),
        (
            Sandbox,
            "lnk_dangle_up",
            libc::O_TRUNC | O_WRONLY,
            0,
            BENEATH,
        ),
        (Sandbox, "lnk_dangle_up", c | libc::O_EXCL, 0o600, BENEATH),
        (Sandbox, "lnk_dangle_up", c, 0o600, BENEATH),
        (Sandbox, "lnk_dangle_up", c, 0o600, IN_ROOT),
        (Sandbox, "newout", o, 0, BENEATH),
        (Sandbox, "../newout", o, 0, 0),
        (Sandbox, "lnk_dangle_abs", c, 0o600, BENEATH),
        (Sandbox, "lnk_dangle_abs", c, 0o600, IN_ROOT),
        (Sandbox, "newout2", o, 0, BENEATH),
        (Sandbox, "lnk_dangle_mid", c, 0o600, BENEATH),
        (Sandbox, "lnk_dangle_mid", c, 0o600, IN_ROOT),
        (Sandbox, "newout3", o, 0, BENEATH),
        (Sandbox, "../newout3", o, 0, 0),
        (Sandbox, "lnk_dangle_in", c, 0o600, BENEATH),
        (Sandbox, "a/newin", o, 0, BENEATH),
        (Sandbox, "lnk_dangle_in", c | libc::O_EXCL, 0o600, 0),
        (Sandbox, "lnk_dangle_dir", c, 0o600, BENEATH),
        (Sandbox, "lnk_both_up", c, 0o600, BENEATH),
        (Sandbox, "lnk_chain_abs", c, 0o600, IN_ROOT),
        (Sandbox, "lnk_loop", c, 0o600, IN_ROOT),
        // O_CREAT of `..`, `/`, directories, trailing slashes, climbing paths.
        (Sandbox, "..", c, 0o600, BENEATH),
        (Sandbox, "..", c, 0o600, IN_ROOT),
        (Sandbox, "/", c, 0o600, IN_ROOT),
        (Sandbox, "a", c, 0o600, BENEATH),
        (Sandbox, "lnk_dir", c, 0o600, BENEATH),
        (Sandbox, "a/f/", c, 0o600, BENEATH),
        (Sandbox, "newdir/", c, 0o600, BENEATH),
        (Sandbox, "nodir/x", c, 0o600, BENEATH),
        (Sandbox, "a/f", c | libc::O_EXCL, 0o600, BENEATH),
        (Sandbox, "a/b/../newc", c, 0o600, BENEATH),
        (Sandbox, "a/../../newd", c, 0o600, BENEATH),
        (Sandbox, "/newe", c, 0o600, IN_ROOT),
        (Sandbox, "/newe2", c, 0o600, BENEATH),
        (Sandbox, "../newf", c, 0o600, IN_ROOT),
        (Sandbox, "newf", o, 0, BENEATH),
        (Sandbox, "../newf", o, 0, 0),
        // AT_FDCWD: the cwd is the root of a scoped walk.
        (Cwd, "a/f", o, 0, BENEATH),
        (Cwd, "../outside", o, 0, BENEATH),
        (Cwd, "/both", o, 0, BENEATH),
        (Cwd, "/both", o, 0, IN_ROOT),
        (Cwd, "lnk_both_up", o, 0, IN_ROOT),
        (Cwd, "lnk_mid_up", o, 0, BENEATH),
        (Cwd, "../both", o, 0, 0),
        (Cwd, "..", O_DIRECTORY, 0, IN_ROOT),
        (Cwd, "lnk_dangle_up", c, 0o600, IN_ROOT),
        // A descriptor on a regular file, one not open.
        (File, "x", o, 0, BENEATH),
        (File, ".", o, 0, BENEATH),
        (File, "/", o, 0, BENEATH),
        (File, "/", o, 0, IN_ROOT),
        (File, "/x", o, 0, IN_ROOT),
        (File, "", o, 0, BENEATH),
        (Bad, "a/f", o, 0, BENEATH),
        (Bad, "/a/f", o, 0, BENEATH),
        (Bad, "/a/f", o, 0, IN_ROOT),
        (Bad, "", o, 0, BENEATH),
        // A directory removed since it was opened, one renamed out of the sandbox.
        (Removed, ".", O_DIRECTORY, 0, BENEATH),
        (Removed, "..", O_DIRECTORY, 0, BENEATH),
        (Removed, "..", O_DIRECTORY, 0, IN_ROOT),
        (Removed, "../both", o, 0, 0),
        (Removed, "x", c, 0o600, BENEATH),
        (Removed, "/x", c, 0o600, IN_ROOT),
        (Removed, "/", O_DIRECTORY, 0, IN_ROOT),
        (Moved, "x", o, 0, BENEATH),
        (Moved, "/x", o, 0, IN_ROOT),
        (Moved, "../both", o, 0, 0),
        (Moved, "../both", o, 0, BENEATH),
        (Moved, "../both", o, 0, IN_ROOT),
        (Moved, "../../both", o, 0, IN_ROOT),
        // An O_PATH descriptor on a symlink is no directory to start from.
        (Link, "f", o, 0, BENEATH),
        (Link, "/", O_PATH, 0, IN_ROOT),
        (Link, "/f", o, 0, IN_ROOT),
        (Link, "/", o, 0, BENEATH),
        (File, "/", O_PATH, 0, IN_ROOT),
        (File, "//", O_PATH, 0, IN_ROOT),
        // More trailing slashes and dots through symlinks, with O_CREAT.
        (Sandbox, "lnk_dangle_dir/", c, 0o600, IN_ROOT),
        (Sandbox, "lnk_dangle_in/", c, 0o600, BENEATH),
        (Sandbox, "lnk_both_abs/.", o, 0, IN_ROOT),
        (Sandbox, "./a/./f", o, 0, BENEATH),
        (Sandbox, "lnk_dotdot/.", O_DIRECTORY, 0, BENEATH),
        (Sandbox, "lnk_root/.", O_DIRECTORY, 0, IN_ROOT),
        (Sandbox, "lnk_root", O_PATH | O_NOFOLLOW, 0, BENEATH),
        // RESOLVE_CACHED answers from the caches.
        (Sandbox, "a/f", o, 0, CACHED),
        (Sandbox, "a/f", o, 0, CACHED | BENEATH),
        (Sandbox, "/a/f", o, 0, CACHED | IN_ROOT),
        (Sandbox, "/a/f", o, 0, CACHED | BENEATH),
        (Sandbox, "lnk_rel", O_PATH | O_NOFOLLOW, 0, CACHED),
        (Sandbox, "a/f", o, 0, CACHED | NO_XDEV | NO_SYMLINKS),
        (Sandbox, "nonexistent", o, 0, CACHED),
        // Linux's rcu-walk also takes `..` and follows symlinks; scalevfs's falls back to
        // ref-walk for them, so RESOLVE_CACHED says EAGAIN (which openat2(2) allows). The
        // host's answer may be either (a trailing symlink: EAGAIN unless its rcu-walk
        // could follow it from the caches).
        (Sandbox, "lnk_rel", o, 0, CACHED | MAY_EAGAIN),
        (Sandbox, "a/../a/f", o, 0, CACHED | MAY_EAGAIN),
        (Sandbox, "lnk_dir/f", o, 0, CACHED | MAY_EAGAIN),
        (Sandbox, "..", O_DIRECTORY, 0, CACHED | IN_ROOT | MAY_EAGAIN),
        (Sandbox, "lnk_abs", o, 0, CACHED | IN_ROOT | MAY_EAGAIN),
        (Sandbox, "lnk_dotdot", c, 0o600, BENEATH),
        (Sandbox, "lnk_dotdot", c, 0o600, IN_ROOT),
        (Sandbox, "lnk_root", c | libc::O_EXCL, 0o600, IN_ROOT),
        // Argument checks: invalid flags before RESOLVE_CACHED's EAGAIN.
        (Sandbox, "a", libc::O_TMPFILE | O_RDWR, 0o600, CACHED),
        (Sandbox, "a", libc::O_TMPFILE | O_RDONLY, 0o600, CACHED),
        (
            Sandbox,
            "a",
            (libc::O_TMPFILE & !O_DIRECTORY) | O_RDWR,
            0o600,
            CACHED,
        ),
        (Sandbox, "a", O_CREAT | O_DIRECTORY, 0o600, CACHED),
        (Sandbox, "x", O_CREAT | O_DIRECTORY, 0o600, 0),
        (Sandbox, "", O_CREAT | O_WRONLY, 0o600, CACHED),
        (Bad, "a/f", O_CREAT | O_WRONLY, 0o600, CACHED),
        (Bad, "/a/f", O_CREAT | O_WRONLY, 0o600, CACHED | BENEATH),
        (
            Sandbox,
            "a",
            (libc::O_TMPFILE & !O_DIRECTORY) | O_RDWR,
            0o600,
            0,
        ),
        (Sandbox, "a", libc::O_TMPFILE | O_RDONLY, 0o600, 0),
        (Sandbox, "a", libc::O_TMPFILE | O_CREAT | O_RDWR, 0o600, 0),
        (Sandbox, "a/f", O_PATH | libc::O_TRUNC, 0, CACHED),
        (Sandbox, "a/f", o, 0, 0x40),
        (Sandbox, "a/f", o, 0, BENEATH | IN_ROOT),
        (Sandbox, "a/f", o, 0o644, 0),
        (Sandbox, "a/f", O_CREAT | O_WRONLY, 0o10000, 0),
        (Sandbox, "a/f", O_PATH | O_RDWR, 0, 0),
        (Sandbox, "a/f", o | (1 << 30), 0, 0),
        (Sandbox, "", o, 0, 0),
    ]
}

/// The symlinks of the tree: (target, name under `sandbox/`).
const LINKS: &[(&str, &str)] = &[
    ("a/f", "lnk_rel"),
    ("/a/f", "lnk_abs"),
    ("../outside", "lnk_up"),
    ("a", "lnk_dir"),
    ("/newabs", "lnk_newabs"),
    ("a/../../both", "lnk_mid_up"),
    ("lnk_up", "lnk_chain"),
    ("lnk_both_abs", "lnk_chain_abs"),
    ("/both", "lnk_both_abs"),
    ("../both", "lnk_both_up"),
    ("..", "lnk_dotdot"),
    ("/", "lnk_root"),
    ("/..", "lnk_dotdot_abs"),
    ("../../both", "a/lnk_a_up"),
    ("../both", "a/lnk_a_ok"),
    ("../newout", "lnk_dangle_up"),
    ("/../newout2", "lnk_dangle_abs"),
    ("a/newin", "lnk_dangle_in"),
    ("a/../../newout3", "lnk_dangle_mid"),
    ("nonexist/x", "lnk_dangle_dir"),
    ("lnk_loop", "lnk_loop"),
];

/// The regular files of the tree: (path, contents).
const FILES: &[(&str, &[u8])] = &[
    ("sandbox/a/f", b"f"),
    ("sandbox/both", b"in"),
    ("sandbox/mv/x", b"x"),
    ("outside", b"outside"),
    ("both", b"OUTSIDE!"),
];

/// The directories of the tree, parents first.
const DIRS: &[&str] = &[
    "sandbox",
    "sandbox/a",
    "sandbox/a/b",
    "sandbox/gone",
    "sandbox/mv",
];

/// What an open gave: the file type it opened and, for a regular file, its size (which
/// tells `both` inside from `both` outside), or the errno.
type Outcome = Result<(u32, i64), i32>;

fn outcome(mode: u32, size: i64) -> (u32, i64) {
    let ty = mode & libc::S_IFMT;
    (ty, if ty == libc::S_IFREG { size } else { 0 })
}

/// The cases on the host, in a thread with its own cwd and root (`unshare(CLONE_FS)`),
/// so that `chdir` does not move the other tests' threads, `chroot`ed into `dir`, so that
/// `/`, an absolute symlink and a `..` above the tree mean what they mean in the `Vfs`,
/// whose root the tree is.
///
/// A scoped walk (`BENEATH`, `IN_ROOT`) is `EAGAIN` on the host when any rename or mount
/// anywhere on the machine ran while it took a `..` (Linux's global `rename_lock` and
/// `mount_lock`): other tests and processes do both. So a run in which such a call, not
/// `RESOLVE_CACHED`, was `EAGAIN` is done again on a fresh tree, up to 5 times.
fn host_run(dir: &str, cases: &[Case<'_>]) -> Vec<Outcome> {
    let raced = |out: &[Outcome]| {
        cases.iter().zip(out).any(|(c, o)| {
            c.4 & (BENEATH | IN_ROOT) != 0 && c.4 & CACHED == 0 && *o == Err(libc::EAGAIN)
        })
    };
    let mut out = host_run_once(dir, cases);
    for _ in 0..4 {
        if !raced(&out) {
            break;
        }
        std::fs::remove_dir_all(dir).unwrap();
        std::fs::create_dir(dir).unwrap();
        out = host_run_once(dir, cases);
    }
    out
}

fn host_run_once(dir: &str, cases: &[Case<'_>]) -> Vec<Outcome> {
    std::thread::scope(|s| {
        s.spawn(|| {
            // SAFETY: unshare(CLONE_FS) only gives this thread its own cwd and root.
            assert_eq!(unsafe { libc::unshare(libc::CLONE_FS) }, 0);
            std::os::unix::fs::chroot(dir).unwrap();
            std::env::set_current_dir("/").unwrap();
            host_run_here("", cases)
        })
        .join()
        .unwrap()
    })
}

fn host_run_here(dir: &str, cases: &[Case<'_>]) -> Vec<Outcome> {
    let c = |p: &str| CString::new(format!("{dir}/{p}")).unwrap();
    for d in DIRS {
        std::fs::create_dir(format!("{dir}/{d}")).unwrap();
    }
    for (path, data) in FILES {
        std::fs::write(format!("{dir}/{path}"), data).unwrap();
    }
    for (target, name) in LINKS {
        std::os::unix::fs::symlink(target, format!("{dir}/sandbox/{name}")).unwrap();
    }
    let open = |p: &str, flags: i32| {
        // SAFETY: a NUL-terminated path.
        let fd = unsafe { libc::open(c(p).as_ptr(), flags) };
        assert!(fd >= 0, "{p}");
        fd
    };
    let dfd = open("sandbox", O_RDONLY | O_DIRECTORY);
    let file = open("sandbox/a/f", O_RDONLY);
    let gone = open("sandbox/gone", O_RDONLY | O_DIRECTORY);
    let mv = open("sandbox/mv", O_RDONLY | O_DIRECTORY);
    let lnk = open("sandbox/lnk_dir", O_PATH | O_NOFOLLOW);
    std::fs::remove_dir(format!("{dir}/sandbox/gone")).unwrap();
    std::fs::rename(format!("{dir}/sandbox/mv"), format!("{dir}/moved")).unwrap();
    std::env::set_current_dir(format!("{dir}/sandbox")).unwrap();
    let out = cases
        .iter()
        .map(|&(at, path, flags, mode, resolve)| {
            let at = match at {
                Dir::Sandbox => dfd,
                Dir::Cwd => libc::AT_FDCWD,
                Dir::File => file,
                Dir::Bad => 1000,
                Dir::Removed => gone,
                Dir::Moved => mv,
                Dir::Link => lnk,
            };
            let how = [
                (flags | libc::O_CLOEXEC) as u64,
                mode,
                resolve & !MAY_EAGAIN,
            ];
            let p = CString::new(path).unwrap();
            // SAFETY: a path and a 24-byte `struct open_how`.
            let fd =
                unsafe { libc::syscall(libc::SYS_openat2, at, p.as_ptr(), how.as_ptr(), 24usize) };
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
            Ok(outcome(st.st_mode, st.st_size))
        })
        .collect();
    for fd in [dfd, file, gone, mv, lnk] {
        // SAFETY: our descriptor.
        unsafe { libc::close(fd) };
    }
    out
}

/// The cases in scalevfs. `cold`: the caches are dropped before each case, so that the
/// walks take the ref-walk rather than the rcu-walk that a warm cache lets them take.
fn ours_run(locking: Locking, cold: bool, cases: &[Case<'_>]) -> Vec<Outcome> {
    let vfs = Vfs::new(VfsOptions {
        locking,
        ..VfsOptions::default()
    });
    let p = Process::new(&vfs, Credentials::root());
    for d in DIRS {
        p.mkdir(format!("/{d}"), 0o755).unwrap();
    }
    for (path, data) in FILES {
        p.write_file(format!("/{path}"), data).unwrap();
    }
    for (target, name) in LINKS {
        p.symlinkat(target, libc::AT_FDCWD, format!("/sandbox/{name}"))
            .unwrap();
    }
    let dfd = p.open("/sandbox", O_RDONLY | O_DIRECTORY, 0).unwrap();
    let file = p.open("/sandbox/a/f", O_RDONLY, 0).unwrap();
    let gone = p.open("/sandbox/gone", O_RDONLY | O_DIRECTORY, 0).unwrap();
    let mv = p.open("/sandbox/mv", O_RDONLY | O_DIRECTORY, 0).unwrap();
    let lnk = p.open("/sandbox/lnk_dir", O_PATH | O_NOFOLLOW, 0).unwrap();
    p.rmdir("/sandbox/gone").unwrap();
    p.rename("/sandbox/mv", "/moved").unwrap();
    p.chdir("/sandbox").unwrap();
    cases
        .iter()
        .map(|&(at, path, flags, mode, resolve)| {
            let at = match at {
                Dir::Sandbox => dfd,
                Dir::Cwd => libc::AT_FDCWD,
                Dir::File => file,
                Dir::Bad => 1000,
                Dir::Removed => gone,
                Dir::Moved => mv,
                Dir::Link => lnk,
            };
            if cold {
                vfs.drop_caches();
            }
            let how = OpenHow {
                flags: (flags | libc::O_CLOEXEC) as u64,
                mode,
                resolve: resolve & !MAY_EAGAIN,
            };
            let fd = p.openat2(at, path, &how).map_err(|e| e.0)?;
            let st = p.fstat(fd).unwrap();
            p.close(fd).unwrap();
            Ok(outcome(st.mode, st.size))
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
    let host = host_run(&base, &cases());
    std::fs::remove_dir_all(&base).unwrap();
    if host.first() == Some(&Err(libc::ENOSYS)) {
        eprintln!("the host has no openat2: skipping");
        return;
    }
    // Every difference, not just the first.
    let mut diffs = Vec::new();
    for (locking, cold) in [
        (Locking::Scalable, false),
        (Locking::Legacy, false),
        (Locking::Scalable, true),
    ] {
        let ours = ours_run(locking, cold, &cases());
        for ((case, h), o) in cases().iter().zip(&host).zip(&ours) {
            // With cold caches, RESOLVE_CACHED has nothing to answer from.
            let may_eagain = case.4 & MAY_EAGAIN != 0 || cold && case.4 & CACHED != 0;
            if h != o && !(may_eagain && *o == Err(libc::EAGAIN)) {
                diffs.push(format!(
                    "{case:?} ({locking:?}, cold {cold}): host {h:?}, ours {o:?}"
                ));
            }
        }
    }
    if std::env::var_os("OPENAT2_DUMP").is_some() {
        for (case, h) in cases().iter().zip(&host) {
            eprintln!("{case:?} => {h:?}");
        }
    }
    assert!(diffs.is_empty(), "{}", diffs.join("\n"));
}

/// `openat2` on the host: the outcome of `openat2(at, path, how)`.
fn host_openat2(at: i32, path: &str, flags: i32, mode: u64, resolve: u64) -> Outcome {
    let how = [(flags | libc::O_CLOEXEC) as u64, mode, resolve];
    let p = CString::new(path).unwrap();
    // SAFETY: a path and a 24-byte `struct open_how`.
    let fd = unsafe { libc::syscall(libc::SYS_openat2, at, p.as_ptr(), how.as_ptr(), 24usize) };
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
    Ok(outcome(st.st_mode, st.st_size))
}

/// `openat2` in scalevfs, as [`host_openat2`].
fn ours_openat2(p: &Process, at: i32, path: &str, flags: i32, mode: u64, resolve: u64) -> Outcome {
    let how = OpenHow {
        flags: (flags | libc::O_CLOEXEC) as u64,
        mode,
        resolve,
    };
    let fd = p.openat2(at, path, &how).map_err(|e| e.0)?;
    let st = p.fstat(fd).unwrap();
    p.close(fd).unwrap();
    Ok(outcome(st.mode, st.size))
}

/// The directories of [`mount_cases`]: `sandbox`; `sandbox/m`, the root of a file system
/// mounted there (with `sub/`, files and symlinks); `sandbox/m/sub`; `sandbox/cov` opened
/// before a file system was mounted on it (the covered directory, holding `under`; the
/// mounted one holds `over`); `sandbox/st`, the top of two file systems mounted on it.
#[derive(Clone, Copy, Debug)]
enum MDir {
    S,
    M,
    Sub,
    Cov,
    St,
}
