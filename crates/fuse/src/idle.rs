//! Noticing that the server went idle, without polling while it is idle and without a
//! shared write per request while it is busy.
//!
//! A watcher thread runs a hook (for the `scalevfs` daemon: give freed memory back to the
//! kernel; see `MountOptions::on_idle`) once the server has answered no request for a
//! whole [`QUIET`] interval after some activity. The state is one word, [`IdleWatch`]'s
//! `state`:
//!
//! ```text
//!            request (wakes the watcher)             QUIET passes, no request
//!   ASLEEP ------------------------------> SEEN <------------------------- ACTIVE
//!     ^                                      |  QUIET passes: SEEN -> ACTIVE  ^
//!     |                                      +--------------------------------+
//!     +-- ACTIVE for a whole QUIET interval: ACTIVE -> ASLEEP, run the hook
//! ```
//!
//! A worker, after each request, *reads* the word and writes it only when it is not
//! `SEEN` already: while the server is busy that is once per `QUIET` interval (after the
//! watcher's `SEEN -> ACTIVE`), so the line stays shared-clean in every worker's cache in
//! between. Only the worker that finds `ASLEEP` wakes the watcher (`unpark`); while idle
//! the watcher is parked with no timeout: nothing polls.
//!
//! No wake-up is lost: the watcher goes `ACTIVE -> ASLEEP` with a compare-and-swap (a
//! request that came first makes it fail and the watcher stays awake), and a request
//! that comes after it finds `ASLEEP` and unparks the watcher, whose `park` then returns
//! at once (the unpark token is kept).

use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::Arc;
use std::thread::{JoinHandle, Thread};
use std::time::Duration;

/// How long the server must answer nothing before the hook runs.
pub const QUIET: Duration = Duration::from_millis(500);

const ASLEEP: u8 = 0;
const ACTIVE: u8 = 1;
const SEEN: u8 = 2;

/// The shared half: what workers touch.
pub(crate) struct IdleWatch {
    state: AtomicU8,
    stop: AtomicBool,
    watcher: Thread,
}

impl IdleWatch {
    /// Starts the watcher thread, which runs `hook` once per idle period.
    pub(crate) fn start(hook: fn()) -> std::io::Result<(Arc<IdleWatch>, JoinHandle<()>)> {
        let (tx, rx) = std::sync::mpsc::channel::<Arc<IdleWatch>>();
        let handle = std::thread::Builder::new()
            .name("fuse-idle".into())
            .spawn(move || {
                if let Ok(w) = rx.recv() {
                    w.watch(hook);
                }
            })?;
        let watch = Arc::new(IdleWatch {
            state: AtomicU8::new(ASLEEP),
            stop: AtomicBool::new(false),
            watcher: handle.thread().clone(),
        });
        // The receiver lives until the watcher has it: the send cannot fail.
        let _ = tx.send(watch.clone());
        Ok((watch, handle))
    }

    /// A worker answered a request. One relaxed load while the server is busy.
    #[inline]
    pub(crate) fn request_seen(&self) {
        // Relaxed: the state is a hint about activity and orders no data; the unpark
        // below synchronizes the watcher's wake-up itself.
        if self.state.load(Ordering::Relaxed) != SEEN
            && self.state.swap(SEEN, Ordering::Relaxed) == ASLEEP
        {
            self.watcher.unpark();
        }
    }

    /// Ends the watcher (it runs no hook after this returns and it is joined).
    pub(crate) fn stop(&self) {
        // Release pairs with the Acquire loads in `watch`: nothing to publish but the flag
        // itself, so this only makes the intent plain.
        self.stop.store(true, Ordering::Release);
        self.watcher.unpark();
    }

    fn stopped(&self) -> bool {
        self.stop.load(Ordering::Acquire)
    }

    fn watch(&self, hook: fn()) {
        loop {
            // Asleep: park until a request (or stop) unparks us; park may return
            // spuriously, so look again.
            while self.state.load(Ordering::Relaxed) == ASLEEP {
                if self.stopped() {
                    return;
                }
                std::thread::park();
            }
            // Awake: wait for a whole quiet interval.
            loop {
                std::thread::park_timeout(QUIET);
                if self.stopped() {
                    return;
                }
                // SEEN -> ACTIVE: a request came in the interval, watch another one.
                if self.state.swap(ACTIVE, Ordering::Relaxed) == ACTIVE {
                    break;
                }
            }
            if self
                .state
                .compare_exchange(ACTIVE, ASLEEP, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
            {
                hook();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;
    use std::time::Instant;

    static RUNS: AtomicUsize = AtomicUsize::new(0);
    fn count() {
        RUNS.fetch_add(1, Ordering::SeqCst);
    }

    fn wait_for(n: usize, within: Duration) -> bool {
        let end = Instant::now() + within;
        while Instant::now() < end {
            if RUNS.load(Ordering::SeqCst) >= n {
                return true;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        false
    }

    /// How long a wait for the watcher thread may take: it needs only to be scheduled, and
    /// only a failing run waits this long.
    const PATIENCE: Duration = Duration::from_secs(60);

    /// Calls `request_seen` every 20 ms for `len`; returns the longest time from one call's
    /// start to the next call's end, then to the moment `RUNS` was read after the last
    /// call, and `RUNS` then. A hook can run only once a whole `QUIET` interval went by
    /// without a call, so with no gap that long it must not have run.
    fn stream(w: &IdleWatch, len: Duration) -> (Duration, usize) {
        let end = Instant::now() + len;
        let mut gap = Duration::ZERO;
        let mut last_start: Option<Instant> = None;
        while Instant::now() < end {
            let start = Instant::now();
            w.request_seen();
            if let Some(prev) = last_start {
                gap = gap.max(prev.elapsed());
            }
            last_start = Some(start);
            std::thread::sleep(Duration::from_millis(20));
        }
        let runs = RUNS.load(Ordering::SeqCst);
        let tail = last_start.expect("len > 0").elapsed();
        (gap.max(tail), runs)
    }

    /// The hook runs once after each burst of requests, about QUIET after its last one,
    /// not while requests keep coming, and never while nothing happens. A scheduler that
    /// keeps this thread off the CPU for half an interval in the middle of the stream
    /// could let a hook run rightly: then the watcher is stopped and the scenario starts
    /// over (for up to 60 s).
    #[test]
    fn hook_runs_once_per_idle_period() {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let (w, h) = IdleWatch::start(count).unwrap();
            let base = RUNS.load(Ordering::SeqCst);
            std::thread::sleep(QUIET * 3);
            assert_eq!(RUNS.load(Ordering::SeqCst), base, "no activity, no hook");
            // A steady stream for 3 quiet intervals: no hook while it lasts.
            let (gap, runs) = stream(&w, QUIET * 3);
            if gap >= QUIET / 2 {
                w.stop();
                h.join().unwrap();
                assert!(
                    Instant::now() < deadline,
                    "for 60 s, every stream had a gap of {gap:?} or more"
                );
                continue;
            }
            assert_eq!(runs, base, "busy: no hook");
            assert!(
                wait_for(base + 1, PATIENCE),
                "the hook runs once the stream stops"
            );
            std::thread::sleep(QUIET * 3);
            assert_eq!(
                RUNS.load(Ordering::SeqCst),
                base + 1,
                "once per idle period"
            );
            w.request_seen();
            assert!(wait_for(base + 2, PATIENCE), "a new burst, a new run");
            w.stop();
            h.join().unwrap();
            return;
        }
    }
}
