//! `scalevfs-fuse-spike MOUNTPOINT [THREADS]`: mounts the spike tree in the foreground and
//! unmounts cleanly on SIGINT or SIGTERM (even with files open or lockers waiting).
//!
//! SIGINT and SIGTERM are blocked before any thread exists (the mask is inherited), and
//! this thread takes them with `sigwait`, so no signal handler runs on a worker.

use std::path::PathBuf;
use std::process::ExitCode;

fn main() -> ExitCode {
    let mut args = std::env::args_os().skip(1);
    let Some(mountpoint) = args.next().map(PathBuf::from) else {
        eprintln!("usage: scalevfs-fuse-spike MOUNTPOINT [THREADS]");
        return ExitCode::from(2);
    };
    let threads = match args.next().map(|t| t.to_string_lossy().parse::<usize>()) {
        None => 2,
        Some(Ok(n)) if n > 0 => n,
        Some(_) => {
            eprintln!("scalevfs-fuse-spike: THREADS must be a positive number");
            return ExitCode::from(2);
        }
    };
    // SAFETY: sigset_t is plain data; sigemptyset/sigaddset initialise it before use, and
    // pthread_sigmask only reads it.
    let set = unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGINT);
        libc::sigaddset(&mut set, libc::SIGTERM);
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        set
    };
    let server = match scalevfs_fuse::Server::mount(&mountpoint, threads) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("scalevfs-fuse-spike: {e}");
            return ExitCode::FAILURE;
        }
    };
    println!("mounted {}", mountpoint.display());
    let mut sig = 0;
    // SAFETY: `set` is initialised above and `sig` is a live c_int.
    unsafe { libc::sigwait(&set, &mut sig) };
    eprintln!("scalevfs-fuse-spike: signal {sig}, unmounting");
    match server.unmount() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("scalevfs-fuse-spike: unmount failed: {e}");
            ExitCode::FAILURE
        }
    }
}
