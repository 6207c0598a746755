//! The POSIX wait-for graph (Linux's `blocked_hash` under `blocked_lock_lock`).
//!
//! Nodes are POSIX owners (processes). There is an edge `P -> Q` for every blocked
//! `F_SETLKW` request of `P` whose current blocker is a lock held by process `Q`. OFD and
//! flock waiters are not in the graph, and an edge to an OFD lock's owner is not recorded
//! (it could never lead anywhere), exactly the set of waits Linux checks.
//!
//! The edges live in a table hashed by the waiting owner (seed 002); the legacy ablation
//! keeps them in one vector scanned linearly instead (the seed's "before").
//!
//! Everything here is under one mutex, taken only on the blocking path: when a request
//! is about to sleep, when a sleeping POSIX request is granted, retargeted or cancelled.
//! An uncontended lock or unlock never takes it. One lock makes the cycle check see an
//! exact snapshot of the graph, and makes "check, then add my edge" atomic: of two
//! requests that would close a cycle together, the second to take the lock sees the
//! first's edge and gets `EDEADLK`; neither can sleep on a cycle.

use std::collections::{HashMap, HashSet};

use super::sync::Mutex;

pub(crate) struct Graph {
    edges: Mutex<Edges>,
}

enum Edges {
    /// owner -> [(waiter id, blocking owner)]
    Hashed(HashMap<u64, Vec<(u64, u64)>>),
    /// [(owner, waiter id, blocking owner)], scanned linearly.
    Linear(Vec<(u64, u64, u64)>),
}

impl Graph {
    pub(crate) fn new(hashed: bool) -> Self {
        let edges = if hashed {
            Edges::Hashed(HashMap::new())
        } else {
            Edges::Linear(Vec::new())
        };
        Graph {
            edges: Mutex::new(edges),
        }
    }

    /// Adds the edge `owner -> blocker` for waiter `wid` unless `blocker` already (directly
    /// or transitively) waits for `owner`; then returns false (deadlock) and adds nothing.
    /// Any previous edge of `wid` is removed either way.
    pub(crate) fn wait_for(&self, owner: u64, wid: u64, blocker: u64) -> bool {
        let mut e = self.edges.lock();
        e.remove(owner, wid);
        if e.reaches(blocker, owner) {
            return false;
        }
        e.add(owner, wid, blocker);
        true
    }

    /// Removes waiter `wid`'s edge.
    pub(crate) fn remove(&self, owner: u64, wid: u64) {
        self.edges.lock().remove(owner, wid);
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        match &*self.edges.lock() {
            Edges::Hashed(m) => m.values().map(Vec::len).sum(),
            Edges::Linear(v) => v.len(),
        }
    }
}

impl Edges {
    fn add(&mut self, owner: u64, wid: u64, blocker: u64) {
        match self {
            Edges::Hashed(m) => m.entry(owner).or_default().push((wid, blocker)),
            Edges::Linear(v) => v.push((owner, wid, blocker)),
        }
    }

    fn remove(&mut self, owner: u64, wid: u64) {
        match self {
            Edges::Hashed(m) => {
                if let Some(v) = m.get_mut(&owner) {
                    v.retain(|&(w, _)| w != wid);
                    if v.is_empty() {
                        m.remove(&owner);
                    }
                }
            }
            Edges::Linear(v) => v.retain(|&(o, w, _)| !(o == owner && w == wid)),
        }
    }

    fn for_each_blocker(&self, owner: u64, mut f: impl FnMut(u64)) {
        match self {
            Edges::Hashed(m) => {
                for &(_, b) in m.get(&owner).into_iter().flatten() {
                    f(b)
                }
            }
            Edges::Linear(v) => {
                for &(o, _, b) in v {
                    if o == owner {
                        f(b)
                    }
                }
            }
        }
    }

    /// Whether `target` is reachable from `from`. Unlike Linux's walk, which follows one
    /// waiter per owner for at most 10 steps (`MAX_DEADLK_ITERATIONS`), this follows every
    /// waiting thread of every owner to any depth; the visited set bounds it by the graph
    /// size even if the graph holds a cycle the check did not create (one cannot form
    /// through POSIX waits alone, since every edge is checked when added).
    fn reaches(&self, from: u64, target: u64) -> bool {
        if from == target {
            return true;
        }
        let mut seen = HashSet::new();
        let mut stack = vec![from];
        seen.insert(from);
        while let Some(n) = stack.pop() {
            let mut found = false;
            self.for_each_blocker(n, |b| {
                if b == target {
                    found = true;
                } else if seen.insert(b) {
                    stack.push(b);
                }
            });
            if found {
                return true;
            }
        }
        false
    }
}
