//! Shuttle models of the two protocols the io_uring transport adds, written against
//! shuttle's locks and atomics so that every interleaving shuttle picks is a real
//! schedule of the protocol:
//!
//! 1. **Remembered interrupts** (`tables::Waits::interrupt_or_remember` and
//!    `Waits::insert`): an interrupt that finds no waiting target records the unique
//!    under the shard mutex; a wait published later finds the record under the same
//!    mutex and cancels its own token. Checked: whichever runs first, the waiter ends
//!    cancelled, and the token is cancelled by exactly one side.
//! 2. **The queue mailbox** (`proto::uring::Mailbox`): answering threads push
//!    `(entry, unique)` under the mutex and then add 1 to the eventfd; the queue's thread
//!    waits for the eventfd to be non-zero, reads (and zeroes) it, and drains the list.
//!    Checked: every answer is drained exactly once and the queue's thread never waits
//!    for a count that will not come (shuttle reports a deadlock).

use std::collections::{HashMap, HashSet};

use shuttle::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use shuttle::sync::{Arc, Condvar, Mutex};
use shuttle::thread;

enum Wait {
    Sleeping(Arc<AtomicBool>),
    Interrupted,
}

/// `Waits::insert`: publish, and cancel at once if an interrupt was remembered.
fn insert(map: &Mutex<HashMap<u64, Wait>>, unique: u64, token: &Arc<AtomicBool>) -> bool {
    let before = map
        .lock()
        .unwrap()
        .insert(unique, Wait::Sleeping(token.clone()));
    if let Some(Wait::Interrupted) = before {
        token.store(true, Ordering::Release);
        return true;
    }
    false
}

/// `Waits::interrupt_or_remember`: the token if the target waits, else a record.
fn interrupt(map: &Mutex<HashMap<u64, Wait>>, unique: u64) -> bool {
    let mut m = map.lock().unwrap();
    if let Some(Wait::Sleeping(t)) = m.get(&unique) {
        let t = t.clone();
        drop(m);
        t.store(true, Ordering::Release);
        return true;
    }
    m.insert(unique, Wait::Interrupted);
    false
}

#[test]
fn remembered_interrupt_always_cancels_its_target() {
    shuttle::check_random(
        || {
            let map = Arc::new(Mutex::new(HashMap::new()));
            let token = Arc::new(AtomicBool::new(false));
            let (m1, t1) = (map.clone(), token.clone());
            let waiter = thread::spawn(move || insert(&m1, 2, &t1));
            let m2 = map.clone();
            let interrupter = thread::spawn(move || interrupt(&m2, 2));
            let by_waiter = waiter.join().unwrap();
            let by_interrupt = interrupter.join().unwrap();
            // Acquire: pairs with the Release stores of whichever side cancelled.
            assert!(
                token.load(Ordering::Acquire),
                "the wait missed its interrupt"
            );
            assert!(by_waiter ^ by_interrupt, "cancelled by exactly one side");
        },
        2000,
    );
}

/// The eventfd: a counter the reader waits on and zeroes.
struct EventFd {
    count: Mutex<u64>,
    ready: Condvar,
}

impl EventFd {
    fn write(&self) {
        *self.count.lock().unwrap() += 1;
        self.ready.notify_one();
    }
    fn read(&self) -> u64 {
        let mut c = self.count.lock().unwrap();
        while *c == 0 {
            c = self.ready.wait(c).unwrap();
        }
        std::mem::take(&mut *c)
    }
}

#[test]
fn every_mailbox_answer_is_committed_once() {
    shuttle::check_random(
        || {
            let answers = Arc::new(Mutex::new(Vec::new()));
            let efd = Arc::new(EventFd {
                count: Mutex::new(0),
                ready: Condvar::new(),
            });
            let posted = Arc::new(AtomicU64::new(0));
            let posters: Vec<_> = (0..3u64)
                .map(|entry| {
                    let (a, e, p) = (answers.clone(), efd.clone(), posted.clone());
                    thread::spawn(move || {
                        for unique in 0..2u64 {
                            a.lock().unwrap().push((entry, unique));
                            e.write();
                            p.fetch_add(1, Ordering::Relaxed);
                        }
                    })
                })
                .collect();
            let mut seen = HashSet::new();
            while seen.len() < 6 {
                efd.read();
                for answer in std::mem::take(&mut *answers.lock().unwrap()) {
                    assert!(seen.insert(answer), "an answer committed twice");
                }
            }
            for p in posters {
                p.join().unwrap();
            }
            assert!(answers.lock().unwrap().is_empty());
            assert_eq!(posted.load(Ordering::Relaxed), 6);
        },
        2000,
    );
}
