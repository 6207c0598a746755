//! Random operation sequences over a small namespace, for proptest.
//!
//! A handful of names in two directories, four fd slots, and the common calls with small
//! arguments: small enough that sequences collide (create then rename over, unlink an
//! open file, rmdir a non-empty directory, ...), which is where implementations differ.
//! Every generated script ends by listing the directories and lstat-ing every name, so a
//! divergence in state shows up even when no return value differed. Shrinking removes
//! steps and simplifies arguments (proptest's `Vec` and `select` shrinking).

use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};

use crate::op::{Fd, Op, Slot, XattrOn};
use crate::script::Script;
use scalevfs::Timespec;

/// Paths the generator uses (relative, so they also work after a chdir into `d`, where
/// most of them do not exist). Modes include 0777/1777 so that an unprivileged phase
/// (after `SetCreds`) meets both writable and read-only objects.
pub const NAMES: &[&str] = &[
    "a", "b", "d", "e", "d/a", "d/b", "d/e", "e/x", "l", "d/l", "a/", "d/..", ".",
];
const DIRS_TO_LIST: &[&str] = &["/", "/d", "/e", "/d/e"];
const SLOTS: u16 = 4;
/// Slot used by the epilogue and by `ls` steps, distinct from the generated ones.
const LS_SLOT: u16 = 10;

fn path() -> impl Strategy<Value = Vec<u8>> {
    prop::sample::select(NAMES).prop_map(|s| s.as_bytes().to_vec())
}

fn slot() -> impl Strategy<Value = Slot> {
    (0..SLOTS).prop_map(Slot)
}

fn fd() -> impl Strategy<Value = Fd> {
    slot().prop_map(Fd::Slot)
}

fn data() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(prop::sample::select(b"xyz".as_slice()), 0..6)
}

fn open_flags() -> impl Strategy<Value = i32> {
    use libc::*;
    prop::sample::select(vec![
        O_RDONLY,
        O_WRONLY,
        O_RDWR,
        O_CREAT | O_RDWR,
        O_CREAT | O_EXCL | O_WRONLY,
        O_TRUNC | O_RDWR,
        O_APPEND | O_WRONLY | O_CREAT,
        O_DIRECTORY | O_RDONLY,
        O_NOFOLLOW | O_RDONLY,
        O_PATH,
    ])
}

fn mode() -> impl Strategy<Value = u32> {
    prop::sample::select(vec![0o644u32, 0o755, 0o600, 0o000, 0o4755, 0o1777, 0o777])
}

/// `openat` of a random name, flags and mode relative to `dir`, into a random slot.
fn open_at(dir: impl Strategy<Value = Fd>) -> impl Strategy<Value = Op> {
    (dir, path(), open_flags(), mode(), slot()).prop_map(|(dir, path, flags, mode, to)| Op::Open {
        dir,
        path,
        flags,
        mode,
        to,
    })
}

/// One random step.
pub fn op() -> impl Strategy<Value = Op> {
    use libc::*;
    let cwd = || Just(Fd::Cwd);
    prop_oneof![
        4 => open_at(cwd()),
        2 => fd().prop_map(Op::Close),
        3 => (fd(), data()).prop_map(|(fd, data)| Op::Write { fd, data }),
        2 => (fd(), data(), 0i64..10).prop_map(|(fd, data, off)| Op::Pwrite { fd, data, off }),
        2 => (fd(), 0usize..8).prop_map(|(fd, len)| Op::Read { fd, len }),
        1 => (fd(), 0usize..8, 0i64..10).prop_map(|(fd, len, off)| Op::Pread { fd, len, off }),
        1 => (fd(), -3i64..6, prop::sample::select(vec![SEEK_SET, SEEK_CUR, SEEK_END]))
            .prop_map(|(fd, off, whence)| Op::Lseek { fd, off, whence }),
        1 => (fd(), 0i64..6).prop_map(|(fd, len)| Op::Ftruncate { fd, len }),
        1 => fd().prop_map(Op::Fstat),
        2 => (path(), prop::sample::select(vec![0, AT_SYMLINK_NOFOLLOW]))
            .prop_map(|(path, flags)| Op::Stat { dir: Fd::Cwd, path, flags }),
        3 => (path(), mode()).prop_map(|(path, mode)| Op::Mkdir { dir: Fd::Cwd, path, mode }),
        2 => (path(), prop::sample::select(vec![0, AT_REMOVEDIR]))
            .prop_map(|(path, flags)| Op::Unlink { dir: Fd::Cwd, path, flags }),
        3 => (path(), path(), prop::sample::select(vec![0u32, 0, RENAME_NOREPLACE, RENAME_EXCHANGE]))
            .prop_map(|(old, new, flags)| Op::Rename {
                olddir: Fd::Cwd, old, newdir: Fd::Cwd, new, flags
            }),
        1 => (path(), path()).prop_map(|(old, new)| Op::Link {
            olddir: Fd::Cwd, old, newdir: Fd::Cwd, new, flags: 0
        }),
        1 => (path(), path()).prop_map(|(target, path)| Op::Symlink { target, dir: Fd::Cwd, path }),
        1 => path().prop_map(|path| Op::Readlink { dir: Fd::Cwd, path, size: 64 }),
        1 => (path(), 0i64..6).prop_map(|(path, len)| Op::Truncate { path, len }),
        1 => (path(), mode()).prop_map(|(path, mode)| Op::Chmod {
            dir: Fd::Cwd, path, mode, flags: 0
        }),
        1 => prop::sample::select(vec!["/", "d", "e", "..", "l"])
            .prop_map(|p| Op::Chdir(p.as_bytes().to_vec())),
        1 => Just(Op::Getcwd { size: 4096 }),
        1 => (fd(), slot()).prop_map(|(fd, to)| Op::Dup { fd, to }),
        1 => path().prop_map(Op::Contents),
        1 => fd().prop_map(Op::Getdents),
        // Drop to an unprivileged user for the rest of the sequence (again: a no-op).
        1 => Just(Op::SetCreds { uid: crate::script::U1, gid: crate::script::G1, groups: vec![] }),
    ]
}

/// One random step of the wider set: [`op`]'s steps, and about as often one of the calls
/// it leaves out (vectored and positioned I/O, `copy_file_range`, `fallocate`, `dup2` and
/// `dup3`, `fcntl`, `fchmod`, `chown`, `utimensat` with fixed times, `faccessat`, `umask`,
/// `fchdir`, a listing into a small buffer, `linkat(AT_SYMLINK_FOLLOW)`, extended
/// attributes, `O_TMPFILE`, short `readlink` buffers, and the `*at` calls relative to a
/// descriptor). No call whose outcome depends on the clock or on the harness's own
/// descriptors (`UTIME_NOW`, a `dup2` onto a raw number, `F_DUPFD` above 0).
pub fn wide_op() -> impl Strategy<Value = Op> {
    use libc::*;
    let lens = || prop::collection::vec(0usize..6, 0..4);
    let bufs = || prop::collection::vec(data(), 0..4);
    let off = || 0i64..10;
    let time = || {
        prop::sample::select(vec![
            Timespec { sec: 1000, nsec: 0 },
            Timespec { sec: 2000, nsec: 5 },
            Timespec {
                sec: 0,
                nsec: UTIME_OMIT,
            },
        ])
    };
    let xattr_on = || {
        prop_oneof![
            path().prop_map(XattrOn::Path),
            path().prop_map(XattrOn::Link),
            fd().prop_map(XattrOn::Fd),
        ]
    };
    let xattr_name = || prop::sample::select(vec![b"user.a".to_vec(), b"user.b".to_vec()]);
    let extra = prop_oneof![
        (fd(), lens()).prop_map(|(fd, lens)| Op::Readv { fd, lens }),
        (fd(), bufs()).prop_map(|(fd, bufs)| Op::Writev { fd, bufs }),
        (fd(), lens(), off()).prop_map(|(fd, lens, off)| Op::Preadv { fd, lens, off }),
        (fd(), bufs(), off()).prop_map(|(fd, bufs, off)| Op::Pwritev { fd, bufs, off }),
        (
            fd(),
            prop::option::of(off()),
            fd(),
            prop::option::of(off()),
            0usize..8
        )
            .prop_map(|(fd_in, off_in, fd_out, off_out, len)| Op::CopyFileRange {
                fd_in,
                off_in,
                fd_out,
                off_out,
                len,
                flags: 0
            }),
        (
            fd(),
            prop::sample::select(vec![
                0,
                FALLOC_FL_KEEP_SIZE,
                FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
            ]),
            0i64..8,
            0i64..8,
        )
            .prop_map(|(fd, mode, off, len)| Op::Fallocate { fd, mode, off, len }),
        (fd(), fd(), slot()).prop_map(|(old, new, to)| Op::Dup2 { old, new, to }),
        (fd(), fd(), prop::sample::select(vec![0, O_CLOEXEC]), slot()).prop_map(
            |(old, new, flags, to)| Op::Dup3 {
                old,
                new,
                flags,
                to
            }
        ),
        (fd(), slot()).prop_map(|(fd, to)| Op::Fcntl {
            fd,
            cmd: F_DUPFD,
            arg: 0,
            to: Some(to)
        }),
        (
            fd(),
            prop::sample::select(vec![
                (F_GETFL, 0),
                (F_SETFL, 0),
                (F_SETFL, i64::from(O_APPEND)),
                (F_SETFL, i64::from(O_APPEND | O_NONBLOCK)),
                (F_GETFD, 0),
                (F_SETFD, i64::from(FD_CLOEXEC)),
            ]),
        )
            .prop_map(|(fd, (cmd, arg))| Op::Fcntl {
                fd,
                cmd,
                arg,
                to: None
            }),
        (fd(), mode()).prop_map(|(fd, mode)| Op::Fchmod { fd, mode }),
        (
            path(),
            prop::sample::select(vec![0, crate::script::U1]),
            prop::sample::select(vec![0, crate::script::G1]),
            prop::sample::select(vec![0, AT_SYMLINK_NOFOLLOW]),
        )
            .prop_map(|(path, uid, gid, flags)| Op::Chown {
                dir: Fd::Cwd,
                path,
                uid,
                gid,
                flags
            }),
        (
            path(),
            time(),
            time(),
            prop::sample::select(vec![0, AT_SYMLINK_NOFOLLOW])
        )
            .prop_map(|(path, a, m, flags)| Op::Utimens {
                dir: Fd::Cwd,
                path: Some(path),
                times: Some([a, m]),
                flags
            }),
        (
            path(),
            prop::sample::select(vec![F_OK, R_OK, W_OK, X_OK, R_OK | W_OK]),
            prop::sample::select(vec![0, AT_EACCESS, AT_SYMLINK_NOFOLLOW]),
        )
            .prop_map(|(path, mode, flags)| Op::Access {
                dir: Fd::Cwd,
                path,
                mode,
                flags
            }),
        prop::sample::select(vec![0o022u32, 0o077, 0o000]).prop_map(Op::Umask),
        fd().prop_map(Op::Fchdir),
        (fd(), prop::sample::select(vec![8usize, 40, 200]))
            .prop_map(|(fd, size)| Op::GetdentsOnce { fd, size }),
        (path(), path()).prop_map(|(old, new)| Op::Link {
            olddir: Fd::Cwd,
            old,
            newdir: Fd::Cwd,
            new,
            flags: AT_SYMLINK_FOLLOW
        }),
        (
            xattr_on(),
            xattr_name(),
            data(),
            prop::sample::select(vec![0, XATTR_CREATE, XATTR_REPLACE])
        )
            .prop_map(|(on, name, value, flags)| Op::SetXattr {
                on,
                name,
                value,
                flags
            }),
        (
            xattr_on(),
            xattr_name(),
            prop::sample::select(vec![0usize, 2, 64])
        )
            .prop_map(|(on, name, size)| Op::GetXattr { on, name, size }),
        (xattr_on(), prop::sample::select(vec![0usize, 7, 64]))
            .prop_map(|(on, size)| Op::ListXattr { on, size }),
        (xattr_on(), xattr_name()).prop_map(|(on, name)| Op::RemoveXattr { on, name }),
        // Relative to a descriptor (a directory, or not: ENOTDIR).
        open_at(fd()),
        (
            fd(),
            path(),
            prop::sample::select(vec![0, AT_SYMLINK_NOFOLLOW, AT_EMPTY_PATH])
        )
            .prop_map(|(dir, path, flags)| Op::Stat { dir, path, flags }),
        (fd(), path(), mode()).prop_map(|(dir, path, mode)| Op::Mkdir { dir, path, mode }),
        (fd(), path(), prop::sample::select(vec![0, AT_REMOVEDIR]))
            .prop_map(|(dir, path, flags)| Op::Unlink { dir, path, flags }),
        (
            fd(),
            path(),
            fd(),
            path(),
            prop::sample::select(vec![0u32, RENAME_NOREPLACE])
        )
            .prop_map(|(olddir, old, newdir, new, flags)| Op::Rename {
                olddir,
                old,
                newdir,
                new,
                flags
            }),
        (path(), 0usize..4).prop_map(|(path, size)| Op::Readlink {
            dir: Fd::Cwd,
            path,
            size
        }),
        (
            prop::sample::select(vec!["d", "e", ".", "a"]),
            prop::sample::select(vec![O_TMPFILE | O_RDWR, O_TMPFILE | O_WRONLY | O_EXCL]),
            mode(),
            slot(),
        )
            .prop_map(|(p, flags, mode, to)| Op::Open {
                dir: Fd::Cwd,
                path: p.as_bytes().to_vec(),
                flags,
                mode,
                to
            }),
    ];
    prop_oneof![1 => op(), 1 => extra]
}

/// Random scripts of 1 to `max_len` steps of the wider set ([`wide_op`]).
pub fn wide_script(max_len: usize) -> impl Strategy<Value = Script> {
    prop::collection::vec(wide_op(), 1..=max_len.max(1))
        .prop_map(|ops| script_from("random/generated-wide".into(), ops))
}

/// One step of the wider set, or now and then a `mount` of a fresh tmpfs (read-write or
/// read-only), a remount (either way) or a `umount2`
/// (plain, `MNT_DETACH`, `UMOUNT_NOFOLLOW`, an unknown flag) on one of the
/// directories, so that the other steps meet mount points: busy and lazy unmounts,
/// `rmdir`/`rename`/`unlink` of a mount point, walks and `..` across mounts, `link` and
/// `rename` between file systems, and descriptors left open on a detached tree.
pub fn mount_op() -> impl Strategy<Value = Op> {
    // Mostly the prologue's directories. Not the case's root: on the host it is a
    // directory in a tmpfs, not a mount root.
    let dir = || {
        prop_oneof![
            4 => prop::sample::select(vec!["d", "e"]),
            2 => prop::sample::select(vec!["d/e", "e/x", "d/a", "a", "l", "nope"]),
        ]
    };
    // No `MNT_EXPIRE`: whether a failed walk into the mount clears its mark depends on
    // Linux's dcache (see the README's differences); the scripted cases cover expiry.
    let flags = prop::sample::select(vec![0, 0, libc::MNT_DETACH, libc::UMOUNT_NOFOLLOW, 0x100]);
    prop_oneof![
        12 => wide_op(),
        1 => dir().prop_map(|p| Op::MountTmpfs(p.as_bytes().to_vec())),
        1 => dir().prop_map(|p| Op::MountTmpfsRo(p.as_bytes().to_vec())),
        1 => (dir(), any::<bool>()).prop_map(|(p, read_only)| Op::Remount {
            path: p.as_bytes().to_vec(),
            read_only
        }),
        2 => (dir(), flags).prop_map(|(p, flags)| Op::Umount2 {
            path: p.as_bytes().to_vec(),
            flags
        }),
    ]
}

/// Random scripts of 1 to `max_len` steps of [`mount_op`].
pub fn mount_script(max_len: usize) -> impl Strategy<Value = Script> {
    prop::collection::vec(mount_op(), 1..=max_len.max(1))
        .prop_map(|ops| script_from("random/generated-mounts".into(), ops))
}

/// The fixed start of every random script, so that generated steps meet existing files,
/// directories, a symlink and open fds rather than mostly ENOENT and EBADF: `a` (data, open
/// read-write in slot 0), `d` (open in slot 1) with `d/b`, `e` (mode 0777), `l -> a`.
fn prologue(s: &mut Script) {
    use libc::*;
    let cwd = Fd::Cwd;
    let p = |x: &str| x.as_bytes().to_vec();
    s.push(Op::Open {
        dir: cwd,
        path: p("a"),
        flags: O_CREAT | O_RDWR,
        mode: 0o644,
        to: Slot(0),
    });
    s.push(Op::Write {
        fd: Fd::Slot(Slot(0)),
        data: p("aa"),
    });
    s.push(Op::Mkdir {
        dir: cwd,
        path: p("d"),
        mode: 0o755,
    });
    s.push(Op::Mkdir {
        dir: cwd,
        path: p("e"),
        mode: 0o777,
    });
    s.push(Op::Chmod {
        dir: cwd,
        path: p("e"),
        mode: 0o777,
        flags: 0,
    });
    s.push(Op::Open {
        dir: cwd,
        path: p("d/b"),
        flags: O_CREAT | O_WRONLY,
        mode: 0o666,
        to: Slot(1),
    });
    s.push(Op::Close(Fd::Slot(Slot(1))));
    s.push(Op::Symlink {
        target: p("a"),
        dir: cwd,
        path: p("l"),
    });
    s.push(Op::Open {
        dir: cwd,
        path: p("d"),
        flags: O_RDONLY | O_DIRECTORY,
        mode: 0,
        to: Slot(1),
    });
}

/// Wrap generated steps into a script with the prologue and the observation epilogue.
pub fn script_from(name: String, ops: Vec<Op>) -> Script {
    let mut s = Script::new(name);
    prologue(&mut s);
    for op in ops {
        s.push(op);
    }
    s.push(Op::Chdir(b"/".to_vec()));
    for d in DIRS_TO_LIST {
        let to = Slot(LS_SLOT);
        s.push(Op::Open {
            dir: Fd::Cwd,
            path: d.as_bytes().to_vec(),
            flags: libc::O_RDONLY | libc::O_DIRECTORY,
            mode: 0,
            to,
        });
        s.push(Op::Getdents(Fd::Slot(to)));
        s.push(Op::Close(Fd::Slot(to)));
    }
    for n in NAMES {
        s.push(Op::Stat {
            dir: Fd::Cwd,
            path: n.as_bytes().to_vec(),
            flags: libc::AT_SYMLINK_NOFOLLOW,
        });
        s.push(Op::Contents(n.as_bytes().to_vec()));
    }
    s
}

/// Random scripts of 1 to `max_len` steps.
pub fn script(max_len: usize) -> impl Strategy<Value = Script> {
    prop::collection::vec(op(), 1..=max_len.max(1))
        .prop_map(|ops| script_from("random/generated".into(), ops))
}

/// `n` random scripts from a fixed seed (reproducible, for the report binary).
pub fn sample(n: usize, seed: u64) -> Vec<Script> {
    let mut bytes = [0u8; 32];
    bytes[..8].copy_from_slice(&seed.to_le_bytes());
    let rng = TestRng::from_seed(RngAlgorithm::ChaCha, &bytes);
    let mut runner = TestRunner::new_with_rng(Config::default(), rng);
    let strat = script(30);
    (0..n)
        .filter_map(|i| {
            let tree = strat.new_tree(&mut runner).ok()?;
            let mut s = tree.current();
            s.name = format!("random/seed{seed}-{i}");
            Some(s)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_are_reproducible_and_seed_dependent() {
        let a = sample(20, 7);
        let b = sample(20, 7);
        let c = sample(20, 8);
        assert_eq!(a.len(), 20);
        assert_eq!(a, b);
        assert_ne!(a, c);
        for s in &a {
            // Every script ends with the observation epilogue (lstat + contents per name).
            let tail = &s.steps[s.steps.len() - 2 * NAMES.len()..];
            assert!(matches!(tail[0], Op::Stat { .. }), "{s}");
            assert!(matches!(tail[1], Op::Contents(_)), "{s}");
        }
    }
}
