//! Process ids, one space per [`Vfs`](crate::Vfs) (a pid namespace).
//!
//! A pid names a [`Process`](crate::Process) in `F_GETLK`'s `l_pid` and in the lock
//! listing, and is its POSIX lock owner, so two live processes of one `Vfs` never share
//! one. Processes of different `Vfs`es may.
//!
//! ## Algorithm
//! Linux's `alloc_pid` without the IDR: a cursor walks up from the last pid given out
//! (the first is [`FIRST_PID`]), skipping pids in use, and wraps from [`PID_MAX`] to
//! [`RESERVED_PIDS`] + 1, so a pid is reused as late as possible. A pid asked for by number (as `clone3`'s `set_tid`) is
//! `EEXIST` while in use and `EINVAL` outside 1..=[`PID_MAX`]. A pid stays in use until
//! its `Process` is dropped (an exited process keeps it, like a zombie), so its POSIX
//! locks are gone before another process can own the pid.
//!
//! ## Locking
//! One mutex over the set in use and the cursor, taken only to create and drop a process
//! (never in a system call on a file); it is a leaf lock.

use std::collections::HashSet;

use parking_lot::Mutex;
use scalevfs_vfs::{Errno, SysResult};

/// The largest pid (Linux's `PID_MAX_LIMIT` on 64-bit machines).
pub const PID_MAX: i32 = 4 * 1024 * 1024;
/// Pids below this are not reused when the cursor wraps (Linux's `RESERVED_PIDS`).
pub const RESERVED_PIDS: i32 = 300;
/// The first pid a [`Vfs`](crate::Vfs) gives out by itself. The pids below are free for
/// an embedder to ask for, and lock listings keep pids apart from small offsets.
pub const FIRST_PID: i32 = 100;

/// The pids in use in one [`Vfs`](crate::Vfs).
#[derive(Debug)]
pub(crate) struct Pids {
    state: Mutex<PidState>,
}

#[derive(Debug)]
struct PidState {
    in_use: HashSet<i32>,
    /// The last pid given out by `alloc(None)`.
    last: i32,
}

impl Pids {
    /// A space whose first automatic pid is `first`.
    pub(crate) fn new(first: i32) -> Pids {
        Pids {
            state: Mutex::new(PidState {
                in_use: HashSet::new(),
                last: first - 1,
            }),
        }
    }

    /// Takes `want`, or the next free pid after the last one given out. `EAGAIN` if every
    /// pid is in use.
    pub(crate) fn alloc(&self, want: Option<i32>) -> SysResult<i32> {
        let mut s = self.state.lock();
        if let Some(pid) = want {
            if !(1..=PID_MAX).contains(&pid) {
                return Err(Errno::EINVAL);
            }
            if !s.in_use.insert(pid) {
                return Err(Errno::EEXIST);
            }
            return Ok(pid);
        }
        if s.in_use.len() >= (PID_MAX - RESERVED_PIDS) as usize {
            return Err(Errno::EAGAIN);
        }
        let mut pid = s.last;
        loop {
            pid = if pid >= PID_MAX {
                RESERVED_PIDS + 1
            } else {
                pid + 1
            };
            if s.in_use.insert(pid) {
                s.last = pid;
                return Ok(pid);
            }
        }
    }

    /// Gives `pid` back.
    pub(crate) fn free(&self, pid: i32) {
        self.state.lock().in_use.remove(&pid);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn automatic_pids_skip_those_in_use_and_wrap() {
        let pids = Pids::new(PID_MAX - 1);
        assert_eq!(pids.alloc(Some(PID_MAX)), Ok(PID_MAX));
        assert_eq!(pids.alloc(None), Ok(PID_MAX - 1));
        // PID_MAX is taken: the cursor wraps past the reserved pids.
        assert_eq!(pids.alloc(None), Ok(RESERVED_PIDS + 1));
        pids.free(PID_MAX);
        assert_eq!(
            pids.alloc(None),
            Ok(RESERVED_PIDS + 2),
            "not reused at once"
        );
        assert_eq!(pids.alloc(Some(PID_MAX - 1)), Err(Errno::EEXIST));
        assert_eq!(pids.alloc(Some(PID_MAX)), Ok(PID_MAX));
    }

    #[test]
    fn asked_for_pids_are_checked() {
        let pids = Pids::new(1);
        assert_eq!(pids.alloc(Some(0)), Err(Errno::EINVAL));
        assert_eq!(pids.alloc(Some(-5)), Err(Errno::EINVAL));
        assert_eq!(pids.alloc(Some(PID_MAX + 1)), Err(Errno::EINVAL));
        assert_eq!(pids.alloc(Some(7)), Ok(7));
        assert_eq!(pids.alloc(Some(7)), Err(Errno::EEXIST));
        pids.free(7);
        assert_eq!(pids.alloc(Some(7)), Ok(7));
        assert_eq!(pids.alloc(None), Ok(1));
    }
}
