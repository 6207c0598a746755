//! The grace-period thread: advances the global epoch on request, so that a thread whose
//! bag fills writes one flag instead of scanning every thread's record and writing the
//! epoch (Linux's RCU grace-period kthread). Only collectors made by
//! `Global::with_advancer` have one (not the process's: see "Advance" in the module
//! docs for what it cost), and only outside loom and Miri (whose models and leak checks
//! want no hidden thread).
//!
//! ## Protocol
//! A sealing thread calls [`request`]: if `requested` is already set it writes nothing;
//! otherwise it sets it and unparks the thread (spawned on the first request). The thread
//! loops: consume the request (`swap(false)`), advance the epoch twice, retrying for a
//! few milliseconds while some thread stays pinned at an older epoch, then park until the
//! next request. A request made while it advances sets the flag again and its unpark
//! token makes the next `park` return at once, so none is lost. It holds the collector
//! weakly and exits when the collector is dropped (whose drop unparks it).
//!
//! `requested` orders nothing: the bags are stamped before the request, and the advance
//! itself synchronizes through the epoch (`try_advance`). The flag's line is written only
//! by sealing threads, once per request.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock, Weak};
use std::thread::Thread;
use std::time::Duration;

use super::global::Global;

/// Attempts per advance before the thread gives up until the next request.
const ATTEMPTS: u32 = 100;
/// Pause between attempts while a thread stays pinned at an older epoch.
const PAUSE: Duration = Duration::from_micros(50);

/// A collector's grace-period thread.
#[derive(Default)]
pub(super) struct Advancer {
    requested: AtomicBool,
    /// The thread, once spawned; `None` if spawning failed (callers then advance inline).
    thread: OnceLock<Option<Thread>>,
}

/// Asks `global`'s thread for two advances. `false` if it has none (the caller advances
/// inline).
pub(super) fn request(global: &Arc<Global>) -> bool {
    let Some(adv) = global.advancer() else {
        return false;
    };
    // Relaxed: the flag only decides who unparks; see the module docs.
    if adv.requested.load(Ordering::Relaxed) || adv.requested.swap(true, Ordering::Relaxed) {
        return true;
    }
    match adv.thread.get_or_init(|| spawn(Arc::downgrade(global))) {
        Some(t) => {
            t.unpark();
            true
        }
        None => false,
    }
}

/// Wakes the thread so that it notices its collector is gone.
pub(super) fn stop(adv: &Advancer) {
    if let Some(Some(t)) = adv.thread.get() {
        t.unpark();
    }
}

fn spawn(global: Weak<Global>) -> Option<Thread> {
    std::thread::Builder::new()
        .name("epoch-advancer".into())
        .spawn(move || run(global))
        .ok()
        .map(|h| h.thread().clone())
}

fn run(global: Weak<Global>) {
    loop {
        std::thread::park();
        let Some(g) = global.upgrade() else {
            return;
        };
        let Some(adv) = g.advancer() else {
            return;
        };
        if !adv.requested.swap(false, Ordering::Relaxed) {
            continue;
        }
        let target = g.epoch_acquire() + 2;
        for _ in 0..ATTEMPTS {
            if g.try_advance(true) >= target {
                break;
            }
            std::thread::sleep(PAUSE);
        }
    }
}
