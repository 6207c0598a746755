//! [`EnableUring`]: switches the fuse module's `enable_uring` parameter on for as long as
//! any test process needs it, and restores it when the last one leaves.
//!
//! The parameter is global and test binaries run in parallel, so the guard coordinates
//! processes through two lock files in the temp directory, with `flock(2)` (released by
//! the kernel when a process dies, so a killed test cannot leave a lock held):
//! * `*.mutex`, held exclusively while a guard is taken or dropped; its content is the
//!   parameter's value before the first user switched it on (empty: nobody uses it).
//! * `*.users`, on which every guard holds a shared lock while it lives. Whoever can
//!   take it exclusively (under the mutex) is alone: the first user saves the value and
//!   switches the parameter on, the last user restores the saved value.
//!
//! Mounts that ask for `/dev/fuse` explicitly are not affected by the parameter (the
//! server asks for io_uring in INIT only when told to), so tests of the other transport
//! may run meanwhile. A process killed while holding a guard leaves the parameter on
//! until the next guard's last user restores the saved value.

use std::fs::File;
use std::io::{Read, Seek, Write};
use std::os::fd::AsRawFd;

const PARAM: &str = "/sys/module/fuse/parameters/enable_uring";

/// Holds `enable_uring` at `Y` (see the module docs).
pub struct EnableUring {
    mutex: File,
    users: File,
}

fn lock(f: &File, op: i32) -> bool {
    // SAFETY: flock on a descriptor we own.
    unsafe { libc::flock(f.as_raw_fd(), op) == 0 }
}

fn open_lock(name: &str) -> Result<File, String> {
    let path = std::env::temp_dir().join(name);
    File::options()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .map_err(|e| format!("{}: {e}", path.display()))
}

impl EnableUring {
    /// Switches `enable_uring` on (or joins the processes that did); `Err` says why it
    /// cannot (the caller skips).
    pub fn acquire() -> Result<EnableUring, String> {
        let disabled =
            std::fs::read_to_string("/proc/sys/kernel/io_uring_disabled").unwrap_or_default();
        if disabled.trim() == "2" {
            return Err("io_uring is disabled (kernel.io_uring_disabled = 2)".into());
        }
        let before = std::fs::read_to_string(PARAM)
            .map_err(|e| format!("{PARAM}: {e} (the kernel has no FUSE over io_uring)"))?;
        let mutex = open_lock("scalevfs-fuse-enable-uring.mutex")?;
        let users = open_lock("scalevfs-fuse-enable-uring.users")?;
        if !lock(&mutex, libc::LOCK_EX) {
            return Err("flock on the enable_uring mutex failed".into());
        }
        let guard = EnableUring { mutex, users };
        let first = lock(&guard.users, libc::LOCK_EX | libc::LOCK_NB);
        if first {
            let mut saved = String::new();
            let _ = (&guard.mutex).read_to_string(&mut saved);
            // A saved value left by a killed user stays the one to restore.
            if saved.trim().is_empty() {
                guard.save(before.trim())?;
            }
            if let Err(e) = std::fs::write(PARAM, "Y") {
                lock(&guard.users, libc::LOCK_UN);
                lock(&guard.mutex, libc::LOCK_UN);
                return Err(format!("cannot write {PARAM}: {e}"));
            }
        }
        // Shared from now on (a conversion from exclusive, or a new shared lock).
        lock(&guard.users, libc::LOCK_SH);
        lock(&guard.mutex, libc::LOCK_UN);
        Ok(guard)
    }

    fn save(&self, value: &str) -> Result<(), String> {
        let mut m = &self.mutex;
        m.set_len(0)
            .and_then(|_| m.rewind())
            .and_then(|_| m.write_all(value.as_bytes()))
            .map_err(|e| format!("saving {PARAM}: {e}"))
    }
}

impl Drop for EnableUring {
    fn drop(&mut self) {
        lock(&self.mutex, libc::LOCK_EX);
        lock(&self.users, libc::LOCK_UN);
        if lock(&self.users, libc::LOCK_EX | libc::LOCK_NB) {
            let mut saved = String::new();
            let _ = self.mutex.rewind();
            let _ = (&self.mutex).read_to_string(&mut saved);
            let value = match saved.trim() {
                "" => "N",
                v => v,
            };
            let _ = std::fs::write(PARAM, value);
            let _ = self.save("");
            lock(&self.users, libc::LOCK_UN);
        }
        lock(&self.mutex, libc::LOCK_UN);
    }
}
