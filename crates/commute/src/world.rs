//! A case's state: the [`Vfs`], its process(es), each thread's objects ([`Env`]), and the
//! canonical dump of the resulting state that the commutativity check compares.
//!
//! Every case builds the same shape of tree twice, under `/w` (the warm-up objects) and
//! under `/c` (the measured ones); a [`Scenario`] says where the two threads' objects lie
//! relative to each other. Objects of thread `t` are made *on* thread `t` (so memory that a
//! call frees goes back to that thread's allocator cache, as a process's own files would),
//! and only the directories the threads share are made by the driver.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, OnceLock};

use scalevfs::{Credentials, EpollEvent, Errno, Process, SysResult, Vfs, VfsOptions};
use scalevfs_kernfs::{demo, Kernfs, KernfsFs, Locking};

/// Where the two threads' objects lie relative to each other.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Scenario {
    /// Each thread has its own directory (`/c/d0`, `/c/d1`) and its own files in it.
    DiffDirs,
    /// Both threads' files (different names) are in one directory `/c/d`.
    SameDir,
    /// Both threads name the same file `/c/d/f` (and the same symlink and kernfs
    /// attribute); each has its own descriptor on it, at its own offset.
    SameFile,
}

impl Scenario {
    /// The name used in case names.
    pub fn name(self) -> &'static str {
        match self {
            Scenario::DiffDirs => "diff-dirs",
            Scenario::SameDir => "same-dir",
            Scenario::SameFile => "same-file",
        }
    }
}

/// Which objects a case's calls need beyond the files and directories every case has
/// (a bit set).
pub mod needs {
    /// A descriptor (`O_RDWR`) on the thread's file: [`super::Env::fd`].
    pub const FD: u32 = 1;
    /// A descriptor on the thread's directory: [`super::Env::dfd`].
    pub const DIRFD: u32 = 2;
    /// A non-blocking pipe holding one byte: [`super::Env::pipe`].
    pub const PIPE: u32 = 4;
    /// A non-blocking eventfd with count 1: [`super::Env::efd`].
    pub const EVENTFD: u32 = 8;
    /// An epoll instance: [`super::Env::ep`].
    pub const EPOLL: u32 = 16;
    /// The eventfd registered (`EPOLLIN`) in the epoll instance.
    pub const EPOLL_ADDED: u32 = 32 | EPOLL | EVENTFD;
    /// The kernfs demo tree at `/sys` and a descriptor on the thread's attribute:
    /// [`super::Env::kfd`].
    pub const KERNFS: u32 = 64;
}

/// Where the kernfs demo tree's GID attributes are (thread `t` reads `gids/<t>`).
const KERNFS_GIDS: &str = "/sys/class/infiniband/mlx5_0/ports/1/gids";

/// One thread's view of a case: its process and its objects. Paths are built before the
/// measured window, so that the calls themselves allocate nothing of the checker's.
#[derive(Clone)]
pub struct Env {
    /// 0 for thread 1 (call A), 1 for thread 2 (call B).
    pub t: usize,
    /// The process the thread calls into (shared by both threads in the shared form).
    pub p: Arc<Process>,
    /// The pids of the case's processes, to name a lock holder by thread.
    pub pids: [i32; 2],
    /// The thread's directory.
    pub dir: String,
    /// Another directory of the thread's, for cross-directory renames.
    pub dir2: String,
    /// The thread's regular file (8 KiB in the same-file scenario, else 1 KiB; with a
    /// `user.x` attribute).
    pub file: String,
    /// [`Env::file`]'s name in [`Env::dir`].
    pub file_name: String,
    /// A symlink to the file.
    pub link: String,
    /// An empty subdirectory.
    pub sub: String,
    /// A name that does not exist yet, for `O_CREAT|O_EXCL`.
    pub new: String,
    /// Rename target in the same directory.
    pub moved: String,
    /// Rename target in [`Env::dir2`].
    pub xmoved: String,
    /// Hard-link target.
    pub hard: String,
    /// Symlink to create.
    pub sym: String,
    /// Directory to create.
    pub mkd: String,
    /// An extended attribute name of the thread's own (`user.k<t>`).
    pub xname: Vec<u8>,
    /// The thread's kernfs attribute.
    pub kattr: String,
    /// The thread's offset into the file (different threads, different offsets, in the
    /// same-file scenario).
    pub off: i64,
    /// See [`needs::FD`] (-1 if not needed).
    pub fd: i32,
    /// See [`needs::DIRFD`].
    pub dfd: i32,
    /// See [`needs::PIPE`].
    pub pipe: [i32; 2],
    /// See [`needs::EVENTFD`].
    pub efd: i32,
    /// See [`needs::EPOLL`].
    pub ep: i32,
    /// See [`needs::KERNFS`].
    pub kfd: i32,
}

/// The size of the file of the same-file scenario: its two threads' offsets are a page
/// apart.
pub const FILE_SIZE: usize = 8192;

/// The size of the other scenarios' files (small: valgrind copies big buffers with
/// `rep movsb` byte by byte, which makes the setup dominate the trace).
pub const SMALL_FILE_SIZE: usize = 1024;

fn content(t: usize) -> &'static [u8] {
    static CONTENT: OnceLock<[Vec<u8>; 2]> = OnceLock::new();
    let c = CONTENT
        .get_or_init(|| [0, 1].map(|t| (0..FILE_SIZE).map(|i| (i * 7 + t * 13) as u8).collect()));
    &c[t]
}

fn small_content(t: usize) -> &'static [u8] {
    &content(t)[..SMALL_FILE_SIZE]
}

/// A tree with the kernfs demo tree mounted at `/sys`.
pub fn new_vfs() -> Result<Arc<Vfs>, String> {
    let vfs = Vfs::new(VfsOptions::default());
    let p = Process::new(&vfs, Credentials::root());
    let e = |what: &str, e: Errno| format!("setup: {what}: {e}");
    p.mkdir("/sys", 0o755).map_err(|x| e("/sys", x))?;
    let k = Kernfs::new(Locking::Scalable);
    demo::demo_tree(&k).map_err(|x| e("kernfs demo tree", x))?;
    vfs.mount("/sys", KernfsFs::new(k))
        .map_err(|x| e("mount /sys", x))?;
    Ok(vfs)
}

/// The shared part of a case's state (made by the driver before the threads make theirs).
pub struct Base {
    /// The tree.
    pub vfs: Arc<Vfs>,
    /// Thread 1's and thread 2's processes (the same one twice in the shared form).
    pub procs: [Arc<Process>; 2],
    /// Where the objects lie.
    pub scenario: Scenario,
    /// What the calls need.
    pub needs: u32,
    /// The case's directories are `/w<tag>` and `/c<tag>`.
    pub tag: usize,
}

impl Base {
    /// The shared directories of a case under `/w<tag>` and `/c<tag>`, in `vfs` (one
    /// tree for many cases, as the traced child has) or in a fresh tree.
    pub fn new(
        vfs: Option<Arc<Vfs>>,
        tag: usize,
        scenario: Scenario,
        needs: u32,
        shared: bool,
    ) -> Result<Base, String> {
        let vfs = match vfs {
            Some(v) => v,
            None => new_vfs()?,
        };
        let p0 = Arc::new(Process::new(&vfs, Credentials::root()));
        let p1 = if shared {
            p0.clone()
        } else {
            Arc::new(Process::new(&vfs, Credentials::root()))
        };
        let e = |what: &str, e: Errno| format!("setup: {what}: {e}");
        for prefix in [format!("/w{tag}"), format!("/c{tag}")] {
            p0.mkdir(&prefix, 0o755).map_err(|x| e(&prefix, x))?;
            if scenario != Scenario::DiffDirs {
                for d in ["d", "e"] {
                    let path = format!("{prefix}/{d}");
                    p0.mkdir(&path, 0o755).map_err(|x| e(&path, x))?;
                }
            }
            if scenario == Scenario::SameFile {
                let f = format!("{prefix}/d/f");
                p0.write_file(&f, content(0)).map_err(|x| e(&f, x))?;
                p0.setxattr(&f, b"user.x", b"shared", 0)
                    .map_err(|x| e(&f, x))?;
                p0.symlinkat("f", libc::AT_FDCWD, format!("{prefix}/d/l"))
                    .map_err(|x| e("symlink", x))?;
            }
        }
        Ok(Base {
            vfs,
            procs: [p0, p1],
            scenario,
            needs,
            tag,
        })
    }

    /// Thread `t`'s warm-up (under `/w<tag>`) or measured (`/c<tag>`) objects, made by
    /// the calling thread.
    pub fn make_env(&self, warm: bool, t: usize) -> Result<Env, String> {
        let prefix = format!("{}{}", if warm { "/w" } else { "/c" }, self.tag);
        let p = self.procs[t].clone();
        let same_file = self.scenario == Scenario::SameFile;
        let (dir, dir2) = match self.scenario {
            Scenario::DiffDirs => (format!("{prefix}/d{t}"), format!("{prefix}/e{t}")),
            _ => (format!("{prefix}/d"), format!("{prefix}/e")),
        };
        let file_name = if same_file {
            "f".to_string()
        } else {
            format!("f{t}")
        };
        let link = if same_file {
            format!("{dir}/l")
        } else {
            format!("{dir}/l{t}")
        };
        // Warm-up objects read other attributes than the measured ones.
        let attr = if warm { t + 2 } else { t };
        let attr = if same_file { attr & !1 } else { attr };
        let mut env = Env {
            t,
            pids: [self.procs[0].pid(), self.procs[1].pid()],
            file: format!("{dir}/{file_name}"),
            file_name,
            link,
            sub: format!("{dir}/s{t}"),
            new: format!("{dir}/n{t}"),
            moved: format!("{dir}/m{t}"),
            xmoved: format!("{dir2}/m{t}"),
            hard: format!("{dir}/h{t}"),
            sym: format!("{dir}/y{t}"),
            mkd: format!("{dir}/k{t}"),
            xname: format!("user.k{t}").into_bytes(),
            kattr: format!("{KERNFS_GIDS}/{attr}"),
            off: if same_file {
                (t * FILE_SIZE / 2) as i64
            } else {
                0
            },
            dir,
            dir2,
            p,
            fd: -1,
            dfd: -1,
            pipe: [-1, -1],
            efd: -1,
            ep: -1,
            kfd: -1,
        };
        self.fill(&mut env)
            .map_err(|(what, e)| format!("setup of thread {} ({what}): {e}", t + 1))?;
        Ok(env)
    }

    fn fill(&self, e: &mut Env) -> Result<(), (&'static str, Errno)> {
        let p = &e.p;
        let at = libc::AT_FDCWD;
        if self.scenario == Scenario::DiffDirs {
            p.mkdir(&e.dir, 0o755).map_err(|x| ("mkdir", x))?;
            p.mkdir(&e.dir2, 0o755).map_err(|x| ("mkdir", x))?;
        }
        if self.scenario != Scenario::SameFile {
            p.write_file(&e.file, small_content(e.t))
                .map_err(|x| ("file", x))?;
            p.setxattr(&e.file, b"user.x", b"mine", 0)
                .map_err(|x| ("setxattr", x))?;
            p.symlinkat(&e.file_name, at, &e.link)
                .map_err(|x| ("symlink", x))?;
        }
        p.mkdir(&e.sub, 0o755).map_err(|x| ("mkdir", x))?;
        // The second directory, the target of renames across directories, has had a name
        // come and go, as the first has had the threads' files: a directory's namespace
        // lock and its hash buckets are made at its first change, once in its life, and
        // the calls are measured in the steady state after that.
        let scratch = format!("{}/w{}", e.dir2, e.t);
        p.write_file(&scratch, b"")
            .map_err(|x| ("scratch file", x))?;
        p.unlink(&scratch).map_err(|x| ("unlink scratch", x))?;
        if self.scenario == Scenario::SameFile {
            // A shared file is a hot one: counted from both threads' CPUs before the calls,
            // as a file every thread opens is (the dcache switches a dentry to per-CPU
            // counts when a second thread counts it: `dentry` module docs, "Per-CPU counts").
            for path in [&e.file, &e.link] {
                let fd = p
                    .open(path, libc::O_PATH | libc::O_NOFOLLOW, 0)
                    .map_err(|x| ("open O_PATH", x))?;
                p.close(fd).map_err(|x| ("close", x))?;
            }
        }
        let n = self.needs;
        if n & needs::FD != 0 {
            e.fd = p.open(&e.file, libc::O_RDWR, 0).map_err(|x| ("open", x))?;
            p.lseek(e.fd, e.off, libc::SEEK_SET)
                .map_err(|x| ("lseek", x))?;
        }
        if n & needs::DIRFD != 0 {
            e.dfd = p
                .open(&e.dir, libc::O_RDONLY | libc::O_DIRECTORY, 0)
                .map_err(|x| ("open dir", x))?;
        }
        if n & needs::PIPE != 0 {
            p.pipe2(&mut e.pipe, libc::O_NONBLOCK)
                .map_err(|x| ("pipe2", x))?;
            p.write(e.pipe[1], b"x").map_err(|x| ("pipe write", x))?;
        }
        if n & needs::EVENTFD != 0 {
            e.efd = p
                .eventfd(1, libc::EFD_NONBLOCK)
                .map_err(|x| ("eventfd", x))?;
        }
        if n & needs::EPOLL != 0 {
            e.ep = p.epoll_create1(0).map_err(|x| ("epoll_create1", x))?;
        }
        if n & needs::EPOLL_ADDED == needs::EPOLL_ADDED {
            let ev = EpollEvent::new(libc::EPOLLIN as u32, 7);
            p.epoll_ctl(e.ep, libc::EPOLL_CTL_ADD, e.efd, Some(&ev))
                .map_err(|x| ("epoll_ctl", x))?;
        }
        if n & needs::KERNFS != 0 {
            e.kfd = p
                .open(&e.kattr, libc::O_RDONLY, 0)
                .map_err(|x| ("open kernfs attribute", x))?;
        }
        Ok(())
    }
}

/// A case's full state: the shared part and both threads' objects.
pub struct World {
    /// The tree and processes.
    pub base: Base,
    /// The warm-up objects (under `/w`) of thread 1 and thread 2.
    pub warm: [Env; 2],
    /// The measured objects (under `/c`).
    pub env: [Env; 2],
}

fn hash(data: &[u8]) -> u64 {
    // FNV-1a: a stable digest of file contents for the dump.
    data.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    })
}

/// Renders a result with nothing that differs between two equivalent runs (inode numbers,
/// times and pids are left out or named).
pub fn render_errno<T>(r: &SysResult<T>) -> String {
    match r {
        Ok(_) => "ok".into(),
        Err(e) => format!("{e:?}"),
    }
}

impl World {
    /// The canonical state: every object of the tree but `/sys` (path, type, permission
    /// bits, owner, size, link count, content digest, symlink target, extended
    /// attributes), each process's cwd and descriptor table (what each descriptor refers
    /// to, its flags and offset), and the file-lock table with owners and inodes named.
    /// Inode numbers and timestamps are left out.
    pub fn dump(&self) -> String {
        let vfs = &self.base.vfs;
        let p = Process::new(vfs, Credentials::root());
        let mut out = String::new();
        let mut inos: HashMap<u64, String> = HashMap::new();
        let mut stack = vec!["/".to_string()];
        while let Some(path) = stack.pop() {
            let st = match p.lstat(&path) {
                Ok(st) => st,
                Err(e) => {
                    out.push_str(&format!("{path}: {e:?}\n"));
                    continue;
                }
            };
            inos.entry(st.ino).or_insert_with(|| path.clone());
            let kind = st.mode & libc::S_IFMT;
            let mut line = format!(
                "{path} {:o} uid={} gid={} size={} nlink={}",
                st.mode, st.uid, st.gid, st.size, st.nlink
            );
            if kind == libc::S_IFREG {
                match p.read_file(&path) {
                    Ok(d) => line.push_str(&format!(" data={:016x}", hash(&d))),
                    Err(e) => line.push_str(&format!(" data={e:?}")),
                }
            } else if kind == libc::S_IFLNK {
                let mut buf = [0u8; 256];
                let n = p.readlinkat(libc::AT_FDCWD, &path, &mut buf).unwrap_or(0);
                line.push_str(&format!(" -> {}", String::from_utf8_lossy(&buf[..n])));
            }
            let mut names = [0u8; 1024];
            if let Ok(n) = p.llistxattr(&path, &mut names) {
                let mut list: Vec<&[u8]> = names[..n].split(|&b| b == 0).collect();
                list.retain(|s| !s.is_empty());
                list.sort();
                for name in list {
                    let mut v = [0u8; 256];
                    let n = p.lgetxattr(&path, name, &mut v).unwrap_or(0);
                    line.push_str(&format!(
                        " {}={}",
                        String::from_utf8_lossy(name),
                        String::from_utf8_lossy(&v[..n])
                    ));
                }
            }
            out.push_str(&line);
            out.push('\n');
            if kind == libc::S_IFDIR && path != "/sys" {
                if let Ok(entries) = p.readdir(&path) {
                    let mut names: Vec<String> = entries
                        .iter()
                        .map(|d| String::from_utf8_lossy(&d.name).into_owned())
                        .filter(|n| n != "." && n != "..")
                        .collect();
                    names.sort();
                    names.reverse();
                    for n in names {
                        let child = if path == "/" {
                            format!("/{n}")
                        } else {
                            format!("{path}/{n}")
                        };
                        stack.push(child);
                    }
                }
            }
        }
        let procs: &[Arc<Process>] = if Arc::ptr_eq(&self.base.procs[0], &self.base.procs[1]) {
            &self.base.procs[..1]
        } else {
            &self.base.procs[..]
        };
        for (i, q) in procs.iter().enumerate() {
            let mut buf = [0u8; 512];
            let cwd = q
                .getcwd(&mut buf)
                .map(|n| String::from_utf8_lossy(&buf[..n.saturating_sub(1)]).into_owned());
            out.push_str(&format!("process {i} cwd={cwd:?}\n"));
            for fd in 0..128 {
                let Ok(fdflags) = q.fcntl(fd, libc::F_GETFD, scalevfs::FcntlArg::None) else {
                    continue;
                };
                let fl = q
                    .fcntl(fd, libc::F_GETFL, scalevfs::FcntlArg::None)
                    .unwrap_or(-1);
                let what = match q.fstat(fd) {
                    Ok(st) => match inos.get(&st.ino) {
                        Some(path) if st.dev == p.stat(path).map_or(0, |s| s.dev) => path.clone(),
                        _ => format!("anon:{:o}", st.mode & libc::S_IFMT),
                    },
                    Err(e) => format!("{e:?}"),
                };
                let pos = q.lseek(fd, 0, libc::SEEK_CUR);
                out.push_str(&format!(
                    "  fd {fd} {what} fd_flags={fdflags} fl={fl:o} pos={pos:?}\n"
                ));
            }
        }
        let pids: BTreeMap<String, String> = self
            .base
            .procs
            .iter()
            .enumerate()
            .map(|(i, q)| (q.pid().to_string(), format!("P{i}")))
            .collect();
        let names: HashMap<String, String> = inos
            .iter()
            .map(|(ino, path)| (ino.to_string(), path.clone()))
            .collect();
        let mut locks: Vec<String> = vfs
            .proc_locks()
            .lines()
            .map(|l| {
                let l = l.split_once(": ").map_or(l, |x| x.1);
                l.split_whitespace()
                    .map(|w| {
                        if let Some(p) = pids.get(w) {
                            return p.clone();
                        }
                        if let Some(ino) = w.rsplit(':').next().filter(|_| w.contains(':')) {
                            if let Some(path) = names.get(ino) {
                                return path.clone();
                            }
                        }
                        w.to_string()
                    })
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .collect();
        locks.sort();
        for l in locks {
            out.push_str(&format!("lock {l}\n"));
        }
        out
    }
}
