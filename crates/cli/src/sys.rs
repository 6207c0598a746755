//! `scalevfs sys`: the kernfs demo tree mounted at `/sys` in a scalevfs VFS, browsed
//! through the system-call API (`Process::openat`, `getdents64`, `newfstatat`, `read`,
//! `readlinkat`), as a program would see it.
//!
//! Lockstat is switched on before the tree is built, so `cat
//! /sys/kernel/scalevfs/lock_stat` shows the locks taken to build, mount and walk it
//! (when the `lockstat` feature is compiled in). `kernel/scalevfs/locks` (the VFS's file
//! locks, `/proc/locks` format) is added here, not by the library's `demo_tree`: only
//! `scalevfs sys` shows it (not the FUSE mount's `--sys`).

use std::io::Write;
use std::sync::Arc;

use clap::{Args, Subcommand};
use scalevfs::{Credentials, Errno, Process, Stat, Vfs, VfsOptions};
use scalevfs_kernfs::{demo, FnAttr, Kernfs, KernfsFs, Locking};
use scalevfs_primitives::lockstat;

/// Where the tree is mounted.
pub const MOUNT: &str = "/sys";

#[derive(Args)]
pub struct SysArgs {
    #[command(subcommand)]
    cmd: SysCmd,
}

#[derive(Subcommand)]
enum SysCmd {
    /// List a directory (mode, size, name, symlink target), or describe a file. PATH is
    /// absolute or relative to /sys; default /sys.
    Ls {
        /// List subdirectories too.
        #[arg(short = 'R', long)]
        recursive: bool,
        path: Option<String>,
    },
    /// Print a file's content (e.g. /sys/kernel/scalevfs/lock_stat).
    Cat { path: String },
}

/// A VFS with the demo tree mounted at [`MOUNT`], and a root process in it.
pub fn demo_vfs() -> Result<(Arc<Vfs>, Process, demo::DemoTree), String> {
    let vfs = Vfs::new(VfsOptions::default());
    let p = Process::new(&vfs, Credentials::root());
    p.mkdirat(libc::AT_FDCWD, MOUNT, 0o755)
        .map_err(|e| format!("mkdir {MOUNT}: {e}"))?;
    let k = Kernfs::new(Locking::Scalable);
    let tree = demo::demo_tree(&k).map_err(|e| format!("demo tree: {e}"))?;
    add_locks_file(&k, &vfs).map_err(|e| format!("kernel/scalevfs/locks: {e}"))?;
    vfs.mount(MOUNT, KernfsFs::new(k))
        .map_err(|e| format!("mount {MOUNT}: {e}"))?;
    Ok((vfs, p, tree))
}

/// `kernel/scalevfs/locks`: every held and waiting file lock of `vfs` in `/proc/locks`
/// format. The attribute holds the Vfs weakly: the Vfs owns the mount, so a strong
/// reference would keep both alive forever.
fn add_locks_file(k: &Kernfs, vfs: &Arc<Vfs>) -> Result<(), Errno> {
    let kernel = k.lookup(k.root(), "kernel")?;
    let dir = k.lookup(&kernel, "scalevfs")?;
    let vfs = Arc::downgrade(vfs);
    let show = FnAttr::ro(move |_, buf| {
        if let Some(vfs) = vfs.upgrade() {
            buf.extend_from_slice(vfs.proc_locks().as_bytes());
        }
        Ok(())
    });
    k.create_file(&dir, "locks", 0o444, 0, 0, show).map(drop)
}

/// `PATH` as an absolute path: relative ones are taken under /sys.
fn absolute(path: &str) -> String {
    if path.starts_with('/') {
        path.to_string()
    } else {
        format!("{MOUNT}/{path}")
    }
}

fn mode_string(mode: u32) -> String {
    let t = match mode & libc::S_IFMT {
        libc::S_IFDIR => 'd',
        libc::S_IFLNK => 'l',
        _ => '-',
    };
    let bits = "rwxrwxrwx";
    std::iter::once(t)
        .chain(
            bits.chars()
                .enumerate()
                .map(|(i, c)| if mode & (0o400 >> i) != 0 { c } else { '-' }),
        )
        .collect()
}

/// One `ls -l`-like line for `path` shown as `name`.
fn describe(p: &Process, path: &str, name: &str, st: &Stat) -> String {
    let mut line = format!(
        "{} {:>2} {:>4} {:>4} {:>5} {name}",
        mode_string(st.mode),
        st.nlink,
        st.uid,
        st.gid,
        st.size
    );
    if st.mode & libc::S_IFMT == libc::S_IFLNK {
        let mut buf = [0u8; 4096];
        if let Ok(n) = p.readlinkat(libc::AT_FDCWD, path, &mut buf) {
            line.push_str(" -> ");
            line.push_str(&String::from_utf8_lossy(&buf[..n]));
        }
    }
    line
}

fn ls(p: &Process, path: &str, recursive: bool, out: &mut impl Write) -> Result<(), String> {
    let err = |e: Errno| format!("{path}: {e}");
    let io = |e: std::io::Error| e.to_string();
    let st = p
        .newfstatat(libc::AT_FDCWD, path, libc::AT_SYMLINK_NOFOLLOW)
        .map_err(err)?;
    if st.mode & libc::S_IFMT != libc::S_IFDIR {
        return writeln!(out, "{}", describe(p, path, path, &st)).map_err(io);
    }
    let mut dirs = vec![path.trim_end_matches('/').to_string()];
    let mut first = true;
    while let Some(dir) = dirs.pop() {
        let entries = p.readdir(&dir).map_err(|e| format!("{dir}: {e}"))?;
        if recursive {
            if !first {
                writeln!(out).map_err(io)?;
            }
            writeln!(out, "{dir}:").map_err(io)?;
        }
        first = false;
        let mut subdirs = Vec::new();
        for e in entries {
            let name = String::from_utf8_lossy(&e.name).into_owned();
            if name == "." || name == ".." {
                continue;
            }
            let full = format!("{dir}/{name}");
            // An entry removed since the listing is skipped, as `ls` reports it gone.
            let Ok(st) = p.newfstatat(libc::AT_FDCWD, &full, libc::AT_SYMLINK_NOFOLLOW) else {
                continue;
            };
            writeln!(out, "{}", describe(p, &full, &name, &st)).map_err(io)?;
            if st.mode & libc::S_IFMT == libc::S_IFDIR {
                subdirs.push(full);
            }
        }
        if recursive {
            // Depth first, in listing order.
            dirs.extend(subdirs.into_iter().rev());
        }
    }
    Ok(())
}

fn cat(p: &Process, path: &str, out: &mut impl Write) -> Result<(), String> {
    let data = p.read_file(path).map_err(|e| format!("{path}: {e}"))?;
    out.write_all(&data).map_err(|e| e.to_string())
}

/// Runs `scalevfs sys ...`, writing to `out`.
pub fn run_to(args: &SysArgs, out: &mut impl Write) -> Result<(), String> {
    lockstat::enable();
    let (_vfs, p, _tree) = demo_vfs()?;
    match &args.cmd {
        SysCmd::Ls { recursive, path } => {
            let path = absolute(path.as_deref().unwrap_or(MOUNT));
            ls(&p, &path, *recursive, out)
        }
        SysCmd::Cat { path } => cat(&p, &absolute(path), out),
    }
}

/// Runs `scalevfs sys ...` on standard output.
pub fn run(args: &SysArgs) -> Result<(), String> {
    run_to(args, &mut std::io::stdout().lock())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct T {
        #[command(flatten)]
        a: SysArgs,
    }

    fn sys(args: &[&str]) -> Result<String, String> {
        let t = T::try_parse_from(std::iter::once("sys").chain(args.iter().copied()))
            .map_err(|e| e.to_string())?;
        let mut out = Vec::new();
        run_to(&t.a, &mut out)?;
        Ok(String::from_utf8(out).unwrap())
    }

    #[test]
    fn ls_lists_directories_links_and_files() {
        let top = sys(&["ls"]).unwrap();
        let names: Vec<&str> = top.lines().map(|l| l.rsplit(' ').next().unwrap()).collect();
        assert_eq!(names, ["class", "devices", "kernel"], "{top}");
        assert!(top.starts_with("drwxr-xr-x"), "{top}");
        let dev = sys(&["ls", "class/infiniband/mlx5_0"]).unwrap();
        assert!(
            dev.contains("device -> ../../../devices/pci0000:00/0000:00:03.0"),
            "{dev}"
        );
        let knob = sys(&["ls", "/sys/kernel/scalevfs/knob"]).unwrap();
        assert_eq!(
            knob,
            "-rw-r--r--  1    0    0  4096 /sys/kernel/scalevfs/knob\n"
        );
        let all = sys(&["ls", "-R"]).unwrap();
        assert!(
            all.contains("/sys/class/infiniband/mlx5_0/ports/1/gids:\n"),
            "{all}"
        );
        assert_eq!(
            all.lines().filter(|l| l.starts_with("-r--r--r--")).count(),
            254 + 7
        );
    }

    #[test]
    fn cat_reads_gids_and_lock_stat() {
        assert_eq!(
            sys(&["cat", "class/infiniband/mlx5_0/ports/1/gids/5"]).unwrap(),
            demo::gid_string(5)
        );
        let ls = sys(&["cat", "/sys/kernel/scalevfs/lock_stat"]).unwrap();
        assert!(ls.starts_with("lock_stat version"), "{ls}");
    }

    #[test]
    fn locks_file_lists_the_vfs_locks() {
        let (vfs, p, _tree) = demo_vfs().unwrap();
        let fd = p
            .openat(libc::AT_FDCWD, "/held", libc::O_CREAT | libc::O_RDWR, 0o644)
            .unwrap();
        let mut fl = scalevfs::Flock {
            l_type: libc::F_WRLCK as i16,
            l_whence: libc::SEEK_SET as i16,
            l_start: 0,
            l_len: 10,
            l_pid: 0,
        };
        p.fcntl(fd, libc::F_OFD_SETLK, scalevfs::FcntlArg::Flock(&mut fl))
            .unwrap();
        let mut out = Vec::new();
        cat(&p, "/sys/kernel/scalevfs/locks", &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert_eq!(text, vfs.proc_locks());
        assert!(text.contains("OFDLCK ADVISORY  WRITE"), "{text}");
        p.close(fd).unwrap();
        let mut out = Vec::new();
        cat(&p, "/sys/kernel/scalevfs/locks", &mut out).unwrap();
        assert!(out.is_empty(), "released at the last close");
    }

    #[test]
    fn bad_paths_are_one_line_errors() {
        for (args, want) in [
            (&["cat", "nope"][..], "/sys/nope: ENOENT"),
            (&["cat", "/sys/kernel"], "/sys/kernel: EISDIR"),
            (&["ls", "/sys/kernel/nope/x"], "/sys/kernel/nope/x: ENOENT"),
            (
                &["cat", "kernel/scalevfs/knob/x"],
                "/sys/kernel/scalevfs/knob/x: ENOTDIR",
            ),
        ] {
            let e = sys(args).unwrap_err();
            assert!(e.starts_with(want), "{args:?}: {e}");
            assert_eq!(e.lines().count(), 1, "{e}");
        }
    }
}
