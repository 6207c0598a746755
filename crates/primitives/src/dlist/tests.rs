use super::*;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Barrier};

#[test]
fn slots_of_niche_items_need_no_tag() {
    // The inode list's slots (memory per file): `Option<NonZeroUsize>` + flag + links.
    assert_eq!(std::mem::size_of::<Slot<std::num::NonZeroUsize>>(), 32);
}

fn sorted(mut v: Vec<u64>) -> Vec<u64> {
    v.sort_unstable();
    v
}

#[test]
fn add_remove_len_is_empty() {
    for list in [
        DList::new(),
        DList::with_shards(4),
        LockedList::new().into(),
    ] {
        assert!(list.is_empty());
        let nodes: Vec<_> = (0..100u64).map(|i| list.add(i)).collect();
        assert_eq!(list.len(), 100);
        assert!(!list.is_empty());
        for (i, n) in nodes.iter().enumerate().step_by(2) {
            assert_eq!(list.remove(n), Some(i as u64));
            assert_eq!(list.remove(n), None, "second remove");
        }
        assert_eq!(list.len(), 50);
        list.check_quiescent();
        // Freed slots are reused; the old nodes stay dead.
        let again = list.add(1000);
        assert_eq!(list.remove(&nodes[0]), None);
        assert_eq!(list.remove(&again), Some(1000));
        for n in nodes.iter().skip(1).step_by(2) {
            assert!(list.remove(n).is_some());
        }
        assert!(list.is_empty());
        list.check_quiescent();
    }
}

#[test]
fn bad_nodes_remove_nothing() {
    let list = DList::with_shards(2);
    let n = list.add_to(1, 7u64);
    let bogus = [
        DListNode { shard: 9, ..n },
        DListNode { slot: 5, ..n },
        DListNode {
            gen: n.gen + 1,
            ..n
        },
        DListNode { shard: 0, ..n },
    ];
    for b in bogus {
        assert_eq!(list.remove(&b), None);
    }
    assert_eq!(list.len(), 1);
    assert_eq!(DList::<u8>::with_shards(0).shards(), 1);
}

#[test]
fn with_locking_picks_the_design() {
    assert_eq!(DList::<u8>::with_locking(Locking::Legacy).shards(), 1);
    assert_eq!(
        DList::<u8>::with_locking(Locking::Scalable).shards(),
        cpu::num_cpus()
    );
    let n = LockedList::new().add(3u8);
    assert_eq!(n.shard(), 0);
}

#[test]
fn iteration_visits_every_shard_once() {
    let list = DList::with_shards(4);
    for i in 0..40u64 {
        list.add_to((i % 4) as usize, i);
    }
    assert_eq!(sorted(list.cursor().collect()), (0..40).collect::<Vec<_>>());
    let mut seen = Vec::new();
    list.for_each(|&i| seen.push(i));
    assert_eq!(sorted(seen), (0..40).collect::<Vec<_>>());
    // Within a shard: newest first.
    let first: Vec<u64> = list.cursor().take(3).collect();
    assert_eq!(first, vec![36, 32, 28]);
    assert_eq!(DList::<u64>::new().cursor().next(), None);
}

#[test]
fn cursor_holds_one_shard_lock_at_a_time() {
    let list = DList::with_shards(3);
    for i in 0..3u64 {
        list.add_to(i as usize, i);
    }
    let mut c = list.cursor();
    c.next().unwrap(); // in shard 0
    assert!(list.shards[0].list.try_lock().is_none());
    assert!(list.shards[1].list.try_lock().is_some());
    c.next().unwrap(); // moved on to shard 1
    assert!(list.shards[0].list.try_lock().is_some());
    c.unlock();
    assert!(list.shards[1].list.try_lock().is_some());
    c.relock();
    assert!(list.shards[1].list.try_lock().is_none());
    drop(c);
    assert!(list.shards[1].list.try_lock().is_some());
}

#[test]
fn remove_current_while_locked_and_unlocked() {
    let list = DList::with_shards(2);
    for i in 0..20u64 {
        list.add_to((i % 2) as usize, i);
    }
    let mut c = list.cursor();
    let mut seen = Vec::new();
    while let Some(i) = c.next() {
        seen.push(i);
        match i % 3 {
            0 => assert_eq!(c.remove_current(), Some(i)),
            1 => {
                // Evict it while the lock is dropped: the walk must go on after it.
                let node = c.current_node().unwrap();
                c.unlocked(|| assert_eq!(list.remove(&node), Some(i)));
                assert_eq!(c.remove_current(), None);
            }
            _ => {
                c.unlock();
                assert_eq!(c.remove_current(), Some(i)); // takes the lock itself
            }
        }
    }
    drop(c);
    assert_eq!(sorted(seen), (0..20).collect::<Vec<_>>());
    assert!(list.is_empty());
    list.check_quiescent();
}

#[test]
fn removing_the_pinned_and_neighbours_while_unlocked() {
    // Shard order is newest first: 9, 8, ..., 0.
    let list = DList::with_shards(1);
    let nodes: Vec<_> = (0..10u64).map(|i| list.add(i)).collect();
    let mut c = list.cursor();
    assert_eq!(c.next(), Some(9));
    c.unlocked(|| {
        // The current node, the pinned next one and the one after it.
        for i in [9, 8, 7] {
            assert_eq!(list.remove(&nodes[i]), Some(i as u64));
        }
        list.add(100); // goes to the head, behind the cursor
    });
    assert_eq!(list.len(), 8);
    assert_eq!(c.collect::<Vec<_>>(), vec![6, 5, 4, 3, 2, 1, 0]);
    list.check_quiescent();
}

#[test]
fn dropping_an_unlocked_cursor_frees_its_zombie() {
    let list = DList::with_shards(1);
    let nodes: Vec<_> = (0..3u64).map(|i| list.add(i)).collect();
    let mut c = list.cursor();
    assert_eq!(c.next(), Some(2));
    c.unlock();
    assert_eq!(list.remove(&nodes[1]), Some(1)); // pinned: becomes a zombie
    assert_eq!(list.len(), 2);
    assert_eq!(
        sorted(list.cursor().collect()),
        vec![0, 2],
        "zombies are not yielded"
    );
    drop(c);
    list.check_quiescent();
}

#[test]
fn two_cursors_pin_the_same_slot() {
    let list = DList::with_shards(1);
    let nodes: Vec<_> = (0..4u64).map(|i| list.add(i)).collect();
    let (mut a, mut b) = (list.cursor(), list.cursor());
    assert_eq!(a.next(), Some(3));
    a.unlock();
    assert_eq!(b.next(), Some(3));
    b.unlock();
    assert_eq!(list.remove(&nodes[2]), Some(2));
    assert_eq!(a.next(), Some(1));
    a.unlock();
    assert_eq!(b.collect::<Vec<_>>(), vec![1, 0]);
    assert_eq!(a.collect::<Vec<_>>(), vec![0]);
    list.check_quiescent();
}

#[test]
fn retain_and_drain() {
    let list = DList::with_shards(3);
    for i in 0..30u64 {
        list.add_to((i % 3) as usize, i);
    }
    list.retain(|&i| i % 2 == 0);
    assert_eq!(list.len(), 15);
    assert_eq!(
        sorted(list.cursor().collect()),
        (0..30).step_by(2).collect::<Vec<_>>()
    );
    assert_eq!(sorted(list.drain()), (0..30).step_by(2).collect::<Vec<_>>());
    assert!(list.is_empty());
    list.check_quiescent();
}

/// An item whose drop removes another item from the same list: retain and drain must
/// drop it after releasing the shard lock.
#[test]
fn retain_drops_items_outside_the_lock() {
    struct Evicts(Arc<DList<Evicts>>, Option<DListNode>);
    impl Drop for Evicts {
        fn drop(&mut self) {
            if let Some(n) = self.1 {
                self.0.remove(&n);
            }
        }
    }
    let list = Arc::new(DList::with_shards(1));
    let other = list.add(Evicts(list.clone(), None));
    list.add(Evicts(list.clone(), Some(other)));
    list.retain(|e| e.1.is_none());
    assert!(list.is_empty(), "the dropped item evicted the other");
}

/// Another thread removes the cursor's current and next nodes while it has the lock
/// dropped; every node that stayed is still visited, once.
#[test]
fn removal_by_another_thread_while_unlocked() {
    let list = Arc::new(DList::with_shards(2));
    let nodes: Vec<_> = (0..20u64)
        .map(|i| list.add_to((i % 2) as usize, i))
        .collect();
    let (to_remover, remover_rx) = mpsc::channel::<Option<DListNode>>();
    let (done_tx, done) = mpsc::channel::<()>();
    let remover = {
        let list = list.clone();
        std::thread::spawn(move || {
            let mut removed = Vec::new();
            while let Ok(Some(cur)) = remover_rx.recv() {
                // The current node, and the next one in its shard (value two below).
                let cur_val = list.remove(&cur).unwrap();
                removed.push(cur_val);
                if cur_val >= 2 {
                    if let Some(v) = list.remove(&nodes[cur_val as usize - 2]) {
                        removed.push(v);
                    }
                }
                done_tx.send(()).unwrap();
            }
            removed
        })
    };
    let mut c = list.cursor();
    let mut seen = Vec::new();
    while let Some(i) = c.next() {
        seen.push(i);
        if i % 5 == 0 {
            let cur = c.current_node();
            c.unlocked(|| {
                to_remover.send(cur).unwrap();
                done.recv().unwrap();
            });
        }
    }
    drop(c);
    to_remover.send(None).unwrap();
    let removed = remover.join().unwrap();
    let seen_set: HashSet<u64> = seen.iter().copied().collect();
    assert_eq!(seen_set.len(), seen.len(), "visited twice: {seen:?}");
    for i in 0..20 {
        if !removed.contains(&i) {
            assert!(
                seen_set.contains(&i),
                "{i} stayed but was skipped: {seen:?}"
            );
        }
    }
    // Removed "next" nodes were not visited after their removal.
    for i in removed.iter().filter(|i| *i % 5 != 0) {
        assert!(!seen_set.contains(i), "{i} visited after removal");
    }
    assert_eq!(list.len(), 20 - removed.len());
    list.check_quiescent();
}

/// 32 threads add and remove unique items while walkers iterate (one evicting, one
/// dropping the lock at every item). Checks: no item visited twice by a walk; every
/// item on the list for a whole walk is visited; final len = adds - removes; a
/// quiescent walk visits exactly the survivors.
#[test]
fn stress_many_threads() {
    // Fewer under Miri, which interprets (about 1000x slower).
    const THREADS: u64 = if cfg!(miri) { 3 } else { 32 };
    const OPS: u64 = if cfg!(miri) { 30 } else { 2000 };
    /// Workers go on (up to 20 * OPS each) until the walker has done this many walks.
    const WALKS: u64 = if cfg!(miri) { 2 } else { 30 };
    let list = Arc::new(DList::with_shards(4));
    // Global order of events: a thread logs (item, added_at, removed_at) around its calls.
    let clock = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let walks_done = Arc::new(AtomicU64::new(0));
    let start = Arc::new(Barrier::new(THREADS as usize + 2));
    let tick = |c: &AtomicU64| c.fetch_add(1, Ordering::SeqCst);

    let workers: Vec<_> = (0..THREADS)
        .map(|t| {
            let (list, clock, start) = (list.clone(), clock.clone(), start.clone());
            let walks_done = walks_done.clone();
            std::thread::spawn(move || {
                start.wait();
                let mut live: Vec<(u64, DListNode)> = Vec::new();
                let mut log = HashMap::new(); // item -> (added_at, removed_at)
                let mut removed = 0u64;
                let mut rng = t.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
                let mut k = 0;
                while k < OPS || (walks_done.load(Ordering::Relaxed) < WALKS && k < 20 * OPS) {
                    k += 1;
                    rng ^= rng << 13;
                    rng ^= rng >> 7;
                    rng ^= rng << 17;
                    // Mostly adds, up to 64 live items per thread: walks stay short.
                    if live.is_empty() || (rng % 3 != 0 && live.len() < 64) {
                        let item = t << 32 | k;
                        let node = list.add(item);
                        // Ticked after add returns: the item is on the list by then.
                        log.insert(item, (tick(&clock), u64::MAX));
                        live.push((item, node));
                    } else {
                        let (item, node) = live.swap_remove((rng >> 8) as usize % live.len());
                        // Ticked before remove: the item is on the list until then
                        // (unless the evictor took it, which it logs itself).
                        log.get_mut(&item).unwrap().1 = tick(&clock);
                        removed += list.remove(&node).is_some() as u64;
                    }
                    if k % 64 == 0 {
                        std::thread::yield_now();
                    }
                }
                (log, removed, live)
            })
        })
        .collect();

    // Walker: drops the lock at every item; checks no duplicate and no skipped survivor.
    let walker = {
        let (list, clock, stop, start) = (list.clone(), clock.clone(), stop.clone(), start.clone());
        let walks_done = walks_done.clone();
        std::thread::spawn(move || {
            start.wait();
            let mut walks = Vec::new();
            while !stop.load(Ordering::Relaxed) || walks.is_empty() {
                let begin = tick(&clock);
                let mut c = list.cursor();
                let mut seen = Vec::new();
                while let Some(i) = c.next() {
                    seen.push(i);
                    // Drop the lock at every item; sometimes let others run meanwhile.
                    c.unlocked(|| {
                        if i % 8 == 0 {
                            std::thread::yield_now()
                        }
                    });
                }
                drop(c);
                walks.push((begin, tick(&clock), seen));
                walks_done.fetch_add(1, Ordering::Relaxed);
            }
            walks
        })
    };
    // Evictor: removes every item whose sequence number is divisible by 7.
    let evictor = {
        let (list, stop, start) = (list.clone(), stop.clone(), start.clone());
        std::thread::spawn(move || {
            start.wait();
            let mut evicted = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                let mut c = list.cursor();
                while let Some(i) = c.next() {
                    if i % 7 == 0 {
                        evicted.extend(c.remove_current());
                    }
                }
                drop(c);
                std::thread::yield_now();
            }
            evicted
        })
    };

    let results: Vec<_> = workers.into_iter().map(|w| w.join().unwrap()).collect();
    stop.store(true, Ordering::Relaxed);
    let walks = walker.join().unwrap();
    let evicted: HashSet<u64> = evictor.join().unwrap().into_iter().collect();

    let mut log = HashMap::new();
    let mut adds = 0;
    let mut removes = evicted.len() as u64;
    let mut survivors = HashSet::new();
    for (l, removed, live) in results {
        adds += l.len() as u64;
        removes += removed;
        survivors.extend(
            live.into_iter()
                .map(|(i, _)| i)
                .filter(|i| !evicted.contains(i)),
        );
        log.extend(l);
    }
    assert_eq!(list.len() as u64, adds - removes);
    assert_eq!(list.len(), survivors.len());

    for (begin, end, seen) in &walks {
        let set: HashSet<u64> = seen.iter().copied().collect();
        assert_eq!(
            set.len(),
            seen.len(),
            "a concurrent walk visited an item twice"
        );
        for (item, &(added, removed)) in &log {
            if added < *begin && removed > *end && !evicted.contains(item) {
                assert!(
                    set.contains(item),
                    "{item:#x} stayed throughout but was skipped"
                );
            }
        }
    }
    let final_walk: Vec<u64> = list.cursor().collect();
    assert_eq!(final_walk.len(), survivors.len());
    assert_eq!(final_walk.into_iter().collect::<HashSet<_>>(), survivors);
    list.check_quiescent();
}
