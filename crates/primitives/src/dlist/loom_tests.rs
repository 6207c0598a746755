use super::*;
use crate::sync::Arc;
use loom::thread;

/// Two threads add and remove on the same shard while racing to remove one shared node:
/// exactly one remove of it wins, and the shard's structure survives.
#[test]
fn loom_add_remove_same_shard() {
    loom::model(|| {
        let list = Arc::new(DList::with_shards(1));
        let shared = list.add(0u32);
        let t = {
            let list = list.clone();
            thread::spawn(move || {
                let n = list.add(1);
                let won = list.remove(&shared).is_some();
                assert_eq!(list.remove(&n), Some(1));
                won
            })
        };
        let n = list.add(2);
        let won = list.remove(&shared).is_some();
        let other_won = t.join().unwrap();
        assert!(won ^ other_won, "exactly one remove of a node succeeds");
        assert_eq!(list.remove(&n), Some(2));
        assert!(list.is_empty());
        list.check_quiescent();
    });
}

/// A remover races with a cursor that drops its lock after the first item: whatever the
/// interleaving, no item is yielded twice, items never removed are yielded, and the pin
/// is cleaned up.
#[test]
fn loom_remove_vs_cursor_unlocked() {
    // What the walks saw, across all the interleavings loom explored.
    let outcomes = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let outcomes2 = outcomes.clone();
    loom::model(move || {
        let list = Arc::new(DList::with_shards(1));
        // List order (newest first): 2, 1, 0.
        let nodes: Vec<_> = (0..3u32).map(|i| list.add(i)).collect();
        let remover = {
            let list = list.clone();
            let (cur, pinned) = (nodes[2], nodes[1]);
            thread::spawn(move || {
                // The cursor's current node, then the one it pins while unlocked.
                assert_eq!(list.remove(&cur), Some(2));
                assert_eq!(list.remove(&pinned), Some(1));
            })
        };
        let mut c = list.cursor();
        let mut seen = Vec::new();
        if let Some(i) = c.next() {
            seen.push(i);
            c.unlock();
            c.relock();
        }
        seen.extend(&mut c);
        drop(c);
        remover.join().unwrap();
        let mut sorted = seen.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), seen.len(), "yielded twice: {seen:?}");
        assert!(
            seen.contains(&0),
            "the untouched item was skipped: {seen:?}"
        );
        assert_eq!(list.len(), 1);
        list.check_quiescent();
        outcomes2.lock().unwrap().push(seen);
    });
    let outcomes = outcomes.lock().unwrap();
    // Removal before the walk, after it, and of the pinned node during the unlocked
    // window (2 yielded, then 1 gone: the zombie path) were all explored.
    for expect in [vec![0], vec![2, 1, 0], vec![2, 0]] {
        assert!(
            outcomes.contains(&expect),
            "{expect:?} not explored: {outcomes:?}"
        );
    }
}
