//! Request latency of scalevfs FUSE mounts set up differently, against host tmpfs, in
//! one run: `open`+`close` (OPEN, FLUSH, RELEASE) and an `F_SETLK` lock+unlock (two
//! SETLK), each client thread (`--threads`, default 1) on its own file. Each round runs
//! every side once for `--ms` milliseconds, starting at another side each round (the
//! side that runs first after a pause runs differently, which must not favour one). It
//! prints each side's median operations per second and its median ratio to host tmpfs
//! (the ratio of each round to that round's host figure, so that a slow stretch of a
//! noisy machine affects both), then the time of a pipe round trip between two threads
//! on one CPU and on two: what one request that wakes a server thread and waits for it
//! costs at least.
//!
//! ```text
//! cargo run --release -p scalevfs-fuse --example fuse_latency -- \
//!     [--rounds N] [--ms MS] [--threads N] SIDE...
//! ```
//! A side is `dev` (`/dev/fuse`, 2 workers) or `uring[:spin=MICROS]` (io_uring;
//! `spin` is `MountOptions::ring_spin`, default `scalevfs_fuse::RING_SPIN`); default
//! sides: `dev uring:spin=0 uring`. Needs root and
//! /dev/fuse; io_uring sides switch the fuse module's `enable_uring` on through the
//! tests' guard, which puts the old value back when the run ends.

#[path = "../tests/common/uring_guard.rs"]
mod uring_guard;

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use scalevfs_fuse::{MountOptions, Server, Transport};

struct Side {
    name: String,
    dir: PathBuf,
    server: Option<Server>,
    /// One file per client thread, with a descriptor open for its locks.
    files: Vec<(CString, i32)>,
}

fn make_side(name: &str, root: &Path, threads: usize) -> Result<Side, String> {
    let dir = root.join(name.replace([':', '='], "_"));
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let server = if name == "host" {
        None
    } else {
        let mut options = MountOptions {
            threads: 2,
            auto_unmount: false,
            ..MountOptions::default()
        };
        let mut parts = name.split(':');
        match parts.next() {
            Some("dev") => options.transport = Transport::Dev,
            Some("uring") => options.transport = Transport::Uring,
            _ => return Err(format!("unknown side {name}")),
        }
        for p in parts {
            if let Some(us) = p.strip_prefix("spin=") {
                let us: u64 = us.parse().map_err(|_| format!("bad spin in {name}"))?;
                options.ring_spin = Duration::from_micros(us);
            } else {
                return Err(format!("unknown setting {p} in {name}"));
            }
        }
        Some(Server::mount_with(&dir, &options).map_err(|e| format!("{name}: {e}"))?)
    };
    let mut files = Vec::new();
    for t in 0..threads {
        let path = dir.join(format!("f{t}"));
        std::fs::write(&path, b"x").map_err(|e| e.to_string())?;
        let file = CString::new(path.as_os_str().as_bytes()).unwrap();
        // SAFETY: a NUL-terminated path.
        let lock_fd = unsafe { libc::open(file.as_ptr(), libc::O_RDWR) };
        if lock_fd < 0 {
            return Err(format!("{name}: open: {}", std::io::Error::last_os_error()));
        }
        files.push((file, lock_fd));
    }
    Ok(Side {
        name: name.to_string(),
        dir,
        server,
        files,
    })
}

/// Operations per second of `op` run on every file of `side` by a thread each, for `ms`
/// milliseconds.
fn rate(ms: u64, side: &Side, op: fn(&Side, usize)) -> f64 {
    let until = Duration::from_millis(ms);
    let start = Instant::now();
    let total: u64 = std::thread::scope(|s| {
        let threads: Vec<_> = (0..side.files.len())
            .map(|t| {
                s.spawn(move || {
                    let mut n = 0u64;
                    while start.elapsed() < until {
                        for _ in 0..64 {
                            op(side, t);
                        }
                        n += 64;
                    }
                    n
                })
            })
            .collect();
        threads.into_iter().map(|t| t.join().unwrap()).sum()
    });
    total as f64 / start.elapsed().as_secs_f64()
}

fn open_close(side: &Side, t: usize) {
    // SAFETY: a NUL-terminated path; the descriptor is closed at once.
    unsafe {
        let fd = libc::open(side.files[t].0.as_ptr(), libc::O_RDONLY);
        assert!(fd >= 0, "{}: open failed", side.name);
        libc::close(fd);
    }
}

fn lock_unlock(side: &Side, t: usize) {
    for ty in [libc::F_WRLCK, libc::F_UNLCK] {
        // SAFETY: flock is plain data; all-zero is valid.
        let mut fl: libc::flock = unsafe { std::mem::zeroed() };
        fl.l_type = ty as i16;
        fl.l_whence = libc::SEEK_SET as i16;
        fl.l_len = 1;
        // SAFETY: an open descriptor and a live flock.
        let r = unsafe { libc::fcntl(side.files[t].1, libc::F_SETLK, &fl) };
        assert_eq!(r, 0, "{}: F_SETLK failed", side.name);
    }
}

fn pin_to(cpu: usize) {
    // SAFETY: cpu_set_t is plain data (all-zero: empty); `cpu` is below CPU_SETSIZE.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of_val(&set), &set);
    }
}

/// Microseconds per round trip of one byte between two threads through two pipes, the
/// client on CPU 0 and the echoing thread on `server_cpu`: the floor of any request
/// that wakes another thread and waits for its answer.
fn pipe_round_trip_us(server_cpu: usize, trips: usize) -> f64 {
    let mut fds = [[0i32; 2]; 2];
    for p in &mut fds {
        // SAFETY: a live array of two descriptors.
        assert_eq!(unsafe { libc::pipe(p.as_mut_ptr()) }, 0);
    }
    let ([to_read, to_write], [back_read, back_write]) = (fds[0], fds[1]);
    let byte = |fd: i32, write: bool| {
        let mut b = 0u8;
        let p = (&mut b as *mut u8).cast();
        // SAFETY: one byte from or into a live u8.
        let n = unsafe {
            if write {
                libc::write(fd, p, 1)
            } else {
                libc::read(fd, p, 1)
            }
        };
        assert_eq!(n, 1);
    };
    let took = std::thread::scope(|s| {
        s.spawn(move || {
            pin_to(server_cpu);
            for _ in 0..trips {
                byte(to_read, false);
                byte(back_write, true);
            }
        });
        pin_to(0);
        let start = Instant::now();
        for _ in 0..trips {
            byte(to_write, true);
            byte(back_read, false);
        }
        start.elapsed()
    });
    for fd in fds.iter().flatten() {
        // SAFETY: our own descriptors, closed once.
        unsafe { libc::close(*fd) };
    }
    took.as_secs_f64() * 1e6 / trips as f64
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let mut args = std::env::args().skip(1);
    let (mut rounds, mut ms, mut threads, mut names) = (9usize, 300u64, 1usize, Vec::new());
    while let Some(a) = args.next() {
        match a.as_str() {
            "--rounds" => {
                rounds = args
                    .next()
                    .and_then(|v| v.parse().ok())
                    .expect("--rounds N")
            }
            "--threads" => {
                threads = args
                    .next()
                    .and_then(|v| v.parse().ok())
                    .expect("--threads N")
            }
            "--ms" => ms = args.next().and_then(|v| v.parse().ok()).expect("--ms MS"),
            _ => names.push(a),
        }
    }
    if names.is_empty() {
        names = vec!["dev".into(), "uring:spin=0".into(), "uring".into()];
    }
    names.insert(0, "host".into());
    let _guard = if names.iter().any(|n| n.starts_with("uring")) {
        Some(uring_guard::EnableUring::acquire().expect("enable_uring"))
    } else {
        None
    };
    let root = tempfile::Builder::new()
        .prefix("fuse-latency")
        .tempdir_in("/dev/shm")
        .expect("temp dir");
    let sides: Vec<Side> = names
        .iter()
        .map(|n| make_side(n, root.path(), threads.max(1)).unwrap_or_else(|e| panic!("{e}")))
        .collect();
    type Loop = fn(&Side, usize);
    let loops: [(&str, Loop); 2] = [("open+close", open_close), ("lock+unlock", lock_unlock)];
    for (what, op) in loops {
        let mut rates = vec![Vec::new(); sides.len()];
        for r in 0..rounds {
            // Each round starts at another side: whichever runs first after a pause
            // (or after another loop) runs differently, and that must not favour one.
            for k in 0..sides.len() {
                let i = (r + k) % sides.len();
                rates[i].push(rate(ms, &sides[i], op));
            }
        }
        println!("{what}: {threads} thread(s), {rounds} rounds of {ms} ms");
        for (i, side) in sides.iter().enumerate() {
            let mut ratios: Vec<f64> = (0..rounds).map(|r| rates[i][r] / rates[0][r]).collect();
            println!(
                "  {:<24} {:>10.0} ops/s  {:.3}x host",
                side.name,
                median(&mut rates[i].clone()),
                median(&mut ratios)
            );
        }
    }
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut same: Vec<f64> = (0..rounds).map(|_| pipe_round_trip_us(0, 20_000)).collect();
    println!(
        "pipe round trip between two threads on one CPU: {:.2} us",
        median(&mut same)
    );
    if cpus > 1 {
        let mut across: Vec<f64> = (0..rounds).map(|_| pipe_round_trip_us(1, 2_000)).collect();
        println!("on two CPUs: {:.2} us", median(&mut across));
    }
    for side in sides {
        for (_, fd) in &side.files {
            // SAFETY: our own descriptor, closed once.
            unsafe { libc::close(*fd) };
        }
        if let Some(s) = side.server {
            s.unmount().expect("unmount");
        }
        let _ = std::fs::remove_dir(&side.dir);
    }
}
