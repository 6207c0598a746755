use super::*;
use crate::cpu::set_cpu_override;

/// A promoted count on an arena of 4 CPUs, with `count` references.
fn promoted(arena: &SlotArena, count: u32) -> PcpuRef {
    let r = PcpuRef::new(count);
    assert!(r.promote(&mut r.lock(), arena));
    r
}

#[test]
fn gets_and_puts_on_other_cpus_touch_only_their_counters() {
    let a = SlotArena::with_cpus(4);
    let r = promoted(&a, 1);
    assert!(r.is_percpu());
    let word_before = r.lockref.count();
    set_cpu_override(Some(1));
    assert!(!r.get(Some(&a)));
    set_cpu_override(Some(2));
    assert!(
        r.put_or_lock(Some(&a)).is_none(),
        "a per-CPU put never locks"
    );
    assert!(
        r.put_or_lock(Some(&a)).is_none(),
        "not even below the real count's 1"
    );
    set_cpu_override(None);
    assert_eq!(
        r.lockref.count(),
        word_before,
        "the shared word is untouched"
    );
    assert_eq!(r.count(Some(&a)), 0);
    let mut g = r.lock();
    assert!(r.demote(&mut g, &a));
    assert_eq!(g.count(), 0, "demote leaves the exact count");
    assert!(!r.is_percpu());
}

#[test]
fn demote_then_last_put_locks() {
    let a = SlotArena::with_cpus(2);
    let r = promoted(&a, 2);
    assert!(r.put_or_lock(Some(&a)).is_none());
    assert!(r.demote(&mut r.lock(), &a));
    let g = r
        .put_or_lock(Some(&a))
        .expect("the last put takes the lock");
    assert_eq!(g.count(), 1);
}

#[test]
fn promotion_is_asked_for_when_another_thread_counts() {
    let a = SlotArena::with_cpus(2);
    let r = PcpuRef::new(1);
    assert!(!r.get(Some(&a)), "first get: no previous thread");
    assert!(!r.get(Some(&a)), "same thread");
    std::thread::scope(|s| {
        s.spawn(|| {
            assert_eq!(r.get_not_dead(Some(&a)), Some(true), "another thread");
            assert!(!r.get(None), "without an arena it is a plain lockref");
        });
    });
    assert_eq!(r.count(Some(&a)), 5);
}

#[test]
fn dead_and_zero_counts_are_not_promoted() {
    let a = SlotArena::with_cpus(2);
    let r = PcpuRef::new(0);
    assert!(!r.promote(&mut r.lock(), &a));
    r.lock().mark_dead();
    assert!(!r.promote(&mut r.lock(), &a));
    assert_eq!(r.get_not_dead(Some(&a)), None);
}

#[test]
fn slots_are_reused_closed() {
    let a = SlotArena::with_cpus(3);
    let r = promoted(&a, 1);
    assert!(r.slot().is_none(), "no slot to give back while per-CPU");
    assert!(r.demote(&mut r.lock(), &a));
    let id = r.slot().expect("a demoted object keeps its slot");
    // Re-promotion reuses the object's own slot.
    assert!(r.promote(&mut r.lock(), &a));
    assert!(r.demote(&mut r.lock(), &a));
    assert_eq!(r.slot(), Some(id));
    // SAFETY: closed on every CPU, and no thread is about to add to it.
    unsafe { a.free(id) };
    let again = a.alloc().unwrap();
    assert_eq!(again, id);
    assert!(!a.try_add(again, 1), "a reused slot starts closed");
}

#[test]
fn arena_counters_of_two_cpus_share_no_line() {
    let a = SlotArena::with_cpus(2);
    let id = a.alloc().unwrap();
    let p0 = a.counter(id, 0).unwrap() as *const _ as usize;
    let p1 = a.counter(id, 1).unwrap() as *const _ as usize;
    assert!(p0.abs_diff(p1) >= 64);
    assert_ne!(p0 / 64, p1 / 64);
}

/// A `SlotCounters` handle adds to the counter of the thread's CPU (an override applies
/// at once: setting it expires the hint), and its close sums and refuses exactly as the arena's.
#[test]
fn slot_counters_add_on_the_hinted_cpu_and_close_like_the_arena() {
    let a = SlotArena::with_cpus(4);
    let id = a.alloc().unwrap();
    assert!(a.counters(SlotId::from_raw(SlotId::MAX).unwrap()).is_none());
    let c = a.counters(id).unwrap();
    assert_eq!(c.id(), id);
    assert!(!c.try_add(1), "a new slot is closed");
    a.open(id);
    for (cpu, delta) in [(1, 5), (3, -2), (2, 1)] {
        set_cpu_override(Some(cpu));
        assert!(c.try_add(delta));
        let on_cpu = a.counter(id, cpu).unwrap().load(Ordering::Relaxed);
        assert_eq!(on_cpu as i64, delta, "cpu {cpu}");
    }
    // Past the arena's CPUs: taken modulo, as the arena's own adds are.
    set_cpu_override(Some(6));
    assert!(c.try_add(1));
    assert_eq!(a.counter(id, 2).unwrap().load(Ordering::Relaxed), 2);
    set_cpu_override(None);
    assert_eq!(a.sum(id), 5);
    assert_eq!(c.close(), 5);
    assert!(!c.try_add(1), "closed");
    assert!(!a.try_add(id, 1), "closed for the arena too");
    assert_eq!(a.close(id), 0);
}

#[test]
fn arena_refuses_bad_slot_numbers() {
    assert!(SlotId::from_raw(0).is_none());
    assert!(SlotId::from_raw(SlotId::MAX + 1).is_none());
    let a = SlotArena::with_cpus(1);
    // A number no one allocated: its chunk does not exist, so the add is refused.
    assert!(!a.try_add(SlotId::from_raw(SlotId::MAX).unwrap(), 1));
    assert_eq!(a.close(SlotId::from_raw(SlotId::MAX).unwrap()), 0);
}

/// Many threads get and put on their own CPUs while one thread switches the mode back and
/// forth: the count is exact after every demote, never zero while the threads hold theirs.
#[test]
fn stress_get_put_against_switching() {
    use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
    const THREADS: usize = if cfg!(miri) { 3 } else { 6 };
    let iters = if cfg!(miri) { 20 } else { 20_000 };
    // Under Miri its scheduler interleaves the threads anyway.
    let min_switches = if cfg!(miri) { 0 } else { 4 };
    let a = SlotArena::with_cpus(4);
    let r = promoted(&a, 1);
    let stop = AtomicBool::new(false);
    // Switches so far: the workers keep going until the switcher has made a few, so the
    // test races them even when a loaded machine runs the switcher late.
    let switched = std::sync::atomic::AtomicU64::new(0);
    let switches = std::thread::scope(|s| {
        let (a, r, stop, switched) = (&a, &r, &stop, &switched);
        let switcher = s.spawn(move || {
            let mut switches = 0u64;
            while !stop.load(Relaxed) {
                let mut g = r.lock();
                if r.is_percpu() {
                    r.demote(&mut g, a);
                    assert!(g.count() >= 1, "the owner's reference is held");
                } else {
                    r.promote(&mut g, a);
                }
                switches += 1;
                switched.store(switches, Relaxed);
                drop(g);
                std::thread::yield_now();
            }
            switches
        });
        let workers: Vec<_> = (0..THREADS)
            .map(|t| {
                s.spawn(move || {
                    set_cpu_override(Some(t % 4));
                    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
                    let mut i = 0;
                    while i < iters
                        || switched.load(Relaxed) < min_switches
                            && std::time::Instant::now() < deadline
                    {
                        i += 1;
                        r.get(Some(a));
                        if i % 3 == 0 {
                            r.get(Some(a));
                            assert!(r.put_or_lock(Some(a)).is_none(), "we hold another");
                        }
                        // The owner holds one, so this put is never the last.
                        assert!(r.put_or_lock(Some(a)).is_none(), "a count was lost");
                    }
                })
            })
            .collect();
        for w in workers {
            w.join().unwrap();
        }
        stop.store(true, Relaxed);
        switcher.join().unwrap()
    });
    assert!(switches > 0);
    let mut g = r.lock();
    r.demote(&mut g, &a);
    assert_eq!(g.count(), 1, "only the owner's reference is left");
}
