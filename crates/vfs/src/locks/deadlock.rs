//! The POSIX wait-for graph (Linux's `blocked_hash` under `blocked_lock_lock`).
//!
//! Nodes are lock owners (processes and open file descriptions). There is an edge
//! `A -> Q` for every blocked `F_SETLKW` or `F_OFD_SETLKW` request of `A` whose current
//! blocker is a POSIX lock held by process `Q`: exactly the waiters Linux puts in
//! `blocked_hash` (it inserts a waiter when its blocker is a POSIX lock, whatever the
//! waiter is). Waits on OFD locks and flock waits have no edge.
//!
//! Only a POSIX request is checked (an OFD request never gets `EDEADLK`, as on Linux),
//! but its walk starts at whatever owner blocks it and goes through OFD waiters too: a
//! process blocked by an OFD lock whose description waits for that process deadlocks,
//! and Linux reports it. Since OFD edges are added unchecked, the graph can hold a cycle
//! of OFD waits (they sleep forever on Linux too); the walk's visited set bounds it.
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

use super::sync::ClassedMutex;
use super::LockOwner;

pub(crate) struct Graph {
    edges: ClassedMutex<Edges>,
}

enum Edges {
    /// owner -> [(waiter id, blocking owner)]
    Hashed(HashMap<LockOwner, Vec<(u64, LockOwner)>>),
    /// [(owner, waiter id, blocking owner)], scanned linearly.
    Linear(Vec<(LockOwner, u64, LockOwner)>),
}

impl Graph {
    pub(crate) fn new(hashed: bool) -> Self {
        let edges = if hashed {
            Edges::Hashed(HashMap::new())
        } else {
            Edges::Linear(Vec::new())
        };
        Graph {
            edges: ClassedMutex::with_class(edges, &crate::lockclass::BLOCKED_LOCK_LOCK),
        }
    }

    /// Waiter `wid` of `owner` is now blocked by a lock of `blocker`. With `check`, returns
    /// false (deadlock) if `blocker` already (directly or transitively) waits for `owner`.
    /// Otherwise adds the edge `owner -> blocker` if `add`, and returns true. Any previous
    /// edge of `wid` is removed either way. Check and insertion are one critical section.
    pub(crate) fn wait_for(
        &self,
        owner: LockOwner,
        wid: u64,
        blocker: LockOwner,
        check: bool,
        add: bool,
    ) -> bool {
        let mut e = self.edges.lock();
        e.remove(owner, wid);
        if check && e.reaches(blocker, owner) {
            return false;
        }
        if add {
            e.add(owner, wid, blocker);
        }
        true
    }

    /// Removes waiter `wid`'s edge.
    pub(crate) fn remove(&self, owner: LockOwner, wid: u64) {
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
    fn add(&mut self, owner: LockOwner, wid: u64, blocker: LockOwner) {
        match self {
            Edges::Hashed(m) => m.entry(owner).or_default().push((wid, blocker)),
            Edges::Linear(v) => v.push((owner, wid, blocker)),
        }
    }

    fn remove(&mut self, owner: LockOwner, wid: u64) {
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

    fn for_each_blocker(&self, owner: LockOwner, mut f: impl FnMut(LockOwner)) {
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
    /// through POSIX waits alone, since every POSIX edge is checked when added, but OFD
    /// waits can make one).
    fn reaches(&self, from: LockOwner, target: LockOwner) -> bool {
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
