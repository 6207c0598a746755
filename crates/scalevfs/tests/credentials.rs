//! Credentials: the set*id calls against the host kernel (random sequences run in a
//! forked host child as root and in a scalevfs process), and what the ids decide
//! (permission checks with the fs ids, `faccessat` with the real ids, file ownership,
//! `exec`'s set-id rules).

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use scalevfs::{Credentials, Errno, Process, Vfs, VfsOptions, UNCHANGED};

#[derive(Clone, Debug)]
/// One set*id call.
enum Op {
    ResUid(u32, u32, u32),
    ResGid(u32, u32, u32),
    Uid(u32),
    Gid(u32),
    FsUid(u32),
    FsGid(u32),
    Groups(Vec<u32>),
}

/// After each op: its result (0, `-errno`, or the old id for setfs*), then
/// ruid, euid, suid, fsuid, rgid, egid, sgid, fsgid, ngroups and up to 4 groups.
const RECORD: usize = 14;

fn random_id(rng: &mut StdRng) -> u32 {
    [0, 1000, 1001, 2000, UNCHANGED][rng.gen_range(0..5)]
}

fn random_op(rng: &mut StdRng) -> Op {
    let mut id = || random_id(rng);
    let (a, b, c) = (id(), id(), id());
    match rng.gen_range(0..7) {
        0 => Op::ResUid(a, b, c),
        1 => Op::ResGid(a, b, c),
        2 => Op::Uid(a),
        3 => Op::Gid(a),
        4 => Op::FsUid(a),
        5 => Op::FsGid(a),
        _ => Op::Groups([vec![], vec![5], vec![7, 5]][rng.gen_range(0..3)].clone()),
    }
}

fn record_ours(p: &mut Process, op: &Op) -> [i64; RECORD] {
    let res = |r: Result<(), Errno>| r.map_or_else(|e| -i64::from(e.raw()), |()| 0);
    let r = match op {
        Op::ResUid(a, b, c) => res(p.setresuid(*a, *b, *c)),
        Op::ResGid(a, b, c) => res(p.setresgid(*a, *b, *c)),
        Op::Uid(a) => res(p.setuid(*a)),
        Op::Gid(a) => res(p.setgid(*a)),
        Op::FsUid(a) => i64::from(p.setfsuid(*a)),
        Op::FsGid(a) => i64::from(p.setfsgid(*a)),
        Op::Groups(g) => res(p.setgroups(g)),
    };
    let c = p.credentials();
    let mut out = [0i64; RECORD];
    let ids = [
        c.uid, c.euid, c.suid, c.fsuid, c.gid, c.egid, c.sgid, c.fsgid,
    ];
    out[0] = r;
    for (o, id) in out[1..9].iter_mut().zip(ids) {
        *o = i64::from(id);
    }
    out[9] = c.groups.len() as i64;
    for (o, g) in out[10..].iter_mut().zip(&c.groups) {
        *o = i64::from(*g);
    }
    out
}

/// Runs `ops` in a forked child of this (root) test process, with raw system calls.
fn record_host(ops: &[Op]) -> Vec<[i64; RECORD]> {
    let mut out = vec![[0i64; RECORD]; ops.len()];
    let mut fds = [0; 2];
    // SAFETY: `fds` is a valid array of two ints.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
    let bytes = std::mem::size_of_val(out.as_slice());
    // SAFETY: the child only makes raw system calls and writes into memory allocated
    // before the fork, then `_exit`s: nothing that needs a lock another thread may hold.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        // SAFETY: raw system calls with plain integers and pointers into live buffers.
        unsafe {
            let sys = |r: libc::c_long| -> i64 {
                if r < 0 {
                    -i64::from(*libc::__errno_location())
                } else {
                    r
                }
            };
            sys(libc::syscall(
                libc::SYS_setgroups,
                0,
                std::ptr::null::<u32>(),
            ));
            for (op, rec) in ops.iter().zip(out.iter_mut()) {
                rec[0] = match op {
                    Op::ResUid(a, b, c) => sys(libc::syscall(libc::SYS_setresuid, *a, *b, *c)),
                    Op::ResGid(a, b, c) => sys(libc::syscall(libc::SYS_setresgid, *a, *b, *c)),
                    Op::Uid(a) => sys(libc::syscall(libc::SYS_setuid, *a)),
                    Op::Gid(a) => sys(libc::syscall(libc::SYS_setgid, *a)),
                    Op::FsUid(a) => sys(libc::syscall(libc::SYS_setfsuid, *a)),
                    Op::FsGid(a) => sys(libc::syscall(libc::SYS_setfsgid, *a)),
                    Op::Groups(g) => sys(libc::syscall(libc::SYS_setgroups, g.len(), g.as_ptr())),
                };
                let mut ids = [0u32; 3];
                let p = ids.as_mut_ptr();
                libc::syscall(libc::SYS_getresuid, p, p.add(1), p.add(2));
                let fsuid = libc::syscall(libc::SYS_setfsuid, UNCHANGED);
                let mut gids = [0u32; 3];
                let p = gids.as_mut_ptr();
                libc::syscall(libc::SYS_getresgid, p, p.add(1), p.add(2));
                let fsgid = libc::syscall(libc::SYS_setfsgid, UNCHANGED);
                rec[1..4].copy_from_slice(&ids.map(i64::from));
                rec[4] = fsuid;
                rec[5..8].copy_from_slice(&gids.map(i64::from));
                rec[8] = fsgid;
                let mut groups = [0u32; 4];
                let n = libc::syscall(libc::SYS_getgroups, 4, groups.as_mut_ptr());
                rec[9] = n;
                for (o, g) in rec[10..].iter_mut().zip(groups).take(n.max(0) as usize) {
                    *o = i64::from(g);
                }
            }
            libc::write(fds[1], out.as_ptr().cast(), bytes);
            libc::_exit(0);
        }
    }
    // SAFETY: closing our copy of the write end; reading into `out`'s own bytes.
    unsafe {
        libc::close(fds[1]);
        let mut got = 0;
        let base = out.as_mut_ptr().cast::<u8>();
        while got < bytes {
            let n = libc::read(fds[0], base.add(got).cast(), bytes - got);
            assert!(n > 0, "the host child wrote {got} of {bytes} bytes");
            got += n as usize;
        }
        libc::close(fds[0]);
        let mut status = 0;
        libc::waitpid(pid, &mut status, 0);
    }
    out
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

#[test]
fn set_id_sequences_match_the_host_kernel() {
    if !is_root() {
        eprintln!("skipped: comparing with the host's set*id needs root");
        return;
    }
    let vfs = Vfs::new(VfsOptions::default());
    let mut rng = StdRng::seed_from_u64(0x5e71d);
    for round in 0..300 {
        let ops: Vec<Op> = (0..10).map(|_| random_op(&mut rng)).collect();
        let host = record_host(&ops);
        let mut p = Process::new(&vfs, Credentials::root());
        for (i, op) in ops.iter().enumerate() {
            let ours = record_ours(&mut p, op);
            assert_eq!(
                ours, host[i],
                "round {round}, op {i} ({op:?}) of {ops:?}: ours (result, ids, groups) vs host"
            );
        }
    }
}

#[test]
fn dropped_privileges_come_back_only_through_a_saved_id() {
    let vfs = Vfs::new(VfsOptions::default());
    let mut p = Process::new(&vfs, Credentials::root());
    // A daemon drops to 1000 for a while, keeping root as its saved uid.
    p.setresuid(1000, 1000, 0).unwrap();
    assert_eq!(p.getresuid(), (1000, 1000, 0));
    assert_eq!(p.credentials().fsuid, 1000);
    assert_eq!(p.setgroups(&[1]), Err(Errno::EPERM), "no CAP_SETGID now");
    assert_eq!(p.setresuid(UNCHANGED, 2000, UNCHANGED), Err(Errno::EPERM));
    p.setresuid(UNCHANGED, 0, UNCHANGED).unwrap();
    assert_eq!(p.getresuid(), (1000, 0, 0));
    // Dropping all three closes the way back.
    p.setresuid(1000, 1000, 1000).unwrap();
    assert_eq!(p.setresuid(UNCHANGED, 0, UNCHANGED), Err(Errno::EPERM));
    assert_eq!(p.setuid(0), Err(Errno::EPERM));
    assert_eq!(p.setuid(UNCHANGED), Err(Errno::EINVAL));
    // setfsuid never fails: it reports the old value and refuses silently.
    assert_eq!(p.setfsuid(0), 1000);
    assert_eq!(p.credentials().fsuid, 1000);
}

#[test]
fn permission_checks_and_new_files_use_the_fs_ids() {
    let vfs = Vfs::new(VfsOptions::default());
    let mut p = Process::new(&vfs, Credentials::root());
    p.write_file("/secret", b"s").unwrap();
    p.fchmodat(libc::AT_FDCWD, "/secret", 0o600, 0).unwrap();
    p.fchmodat(libc::AT_FDCWD, "/", 0o1777, 0).unwrap();
    assert_eq!(p.setfsuid(1000), 0);
    assert_eq!(p.setfsgid(1000), 0);
    assert_eq!(p.open("/secret", libc::O_RDONLY, 0), Err(Errno::EACCES));
    // faccessat checks with the real ids (root) unless AT_EACCESS asks for the others.
    assert_eq!(
        p.faccessat(libc::AT_FDCWD, "/secret", libc::R_OK, 0),
        Ok(())
    );
    assert_eq!(
        p.faccessat(libc::AT_FDCWD, "/secret", libc::R_OK, libc::AT_EACCESS),
        Err(Errno::EACCES),
        "AT_EACCESS checks with the credentials as they are: fsuid 1000"
    );
    let fd = p
        .open("/mine", libc::O_CREAT | libc::O_WRONLY, 0o644)
        .unwrap();
    p.close(fd).unwrap();
    let st = p.stat("/mine").unwrap();
    assert_eq!((st.uid, st.gid), (1000, 1000));
    // The effective uid still holds CAP_SYS_ADMIN: mount rights follow euid.
    p.setresuid(UNCHANGED, 1000, UNCHANGED).unwrap();
    assert_eq!(p.credentials().fsuid, 1000, "fsuid follows euid");
    assert_eq!(p.umount2("/", 0), Err(Errno::EPERM));
}

#[test]
fn exec_applies_set_id_bits_and_closes_cloexec_descriptors() {
    let vfs = Vfs::new(VfsOptions::default());
    let root = Process::new(&vfs, Credentials::root());
    root.write_file("/suid", b"#!").unwrap();
    root.fchownat(libc::AT_FDCWD, "/suid", 0, 50, 0).unwrap();
    root.fchmodat(libc::AT_FDCWD, "/suid", 0o6755, 0).unwrap();
    root.write_file("/plain", b"#!").unwrap();
    root.fchmodat(libc::AT_FDCWD, "/plain", 0o644, 0).unwrap();
    root.mkdir("/d", 0o755).unwrap();

    let mut p = Process::new(&vfs, Credentials::user(1000, 1000));
    let keep = p.open("/plain", libc::O_RDONLY, 0).unwrap();
    let gone = p
        .open("/plain", libc::O_RDONLY | libc::O_CLOEXEC, 0)
        .unwrap();
    assert_eq!(p.execve("/plain"), Err(Errno::EACCES), "no x bit");
    assert_eq!(p.execve("/d"), Err(Errno::EACCES), "a directory");
    assert_eq!(p.execve("/none"), Err(Errno::ENOENT));
    assert!(p.file(gone).is_ok(), "a failed exec closes nothing");
    p.execve("/suid").unwrap();
    assert_eq!(p.getresuid(), (1000, 0, 0));
    assert_eq!(p.getresgid(), (1000, 50, 50));
    assert_eq!(p.file(gone).err(), Some(Errno::EBADF));
    assert!(p.file(keep).is_ok());
    // Back to the real ids; a later exec of a plain program makes them the saved ones.
    p.setresuid(UNCHANGED, 1000, UNCHANGED).unwrap();
    p.exec_foreign_image();
    assert_eq!(p.getresuid(), (1000, 1000, 1000));
}
