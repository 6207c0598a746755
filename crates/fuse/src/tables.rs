//! The server's shared tables, each sharded 64 ways so that requests on different
//! nodes, handles or uniques take different mutexes (no global lock on any request path).
//!
//! * [`NodeTable`]: FUSE node id -> ([`Node`], lookup count). A node id is the VFS inode
//!   number (never reused: tmpfs numbers come from a 64-bit counter, kernfs numbers are
//!   unique in their tree, and the entry's `Node` keeps the inode, hence its number,
//!   alive), tagged with the superblock for file systems mounted inside (`--sys`:
//!   `(dev - root dev) << 48 | ino`), and 1 for the root. `st_ino` and `d_ino` are the
//!   same tagged number (the root's is its own), so the mount's one `st_dev` never sees
//!   two files with one number. So two lookups of one inode
//!   (hard links, a rename) get one node id without a second map, and the generation is
//!   always 0. tmpfs numbers come in per-thread blocks of 1024 consecutive values, so
//!   `id % 64` spreads them over the shards.
//! * [`FileTable`]: `fh` -> open file handle. `fh = seq << 6 | shard`, the shard picked by
//!   the current CPU (the per-shard `seq` lives under the shard's mutex: no shared counter).
//! * [`Waits`]: request `unique` -> [`CancelToken`] of a sleeping lock request, or an
//!   interrupt that arrived before its target waited (io_uring, where the kernel cannot
//!   queue an interrupt again: [`Waits::interrupt_or_remember`]).
//!
//! ## Lookup counts (libfuse PR #1368 and #1371)
//! [`NodeTable::remember`] (find-or-insert and +1) and [`NodeTable::forget`] (-n and erase
//! at 0) are each one critical section under the entry's shard mutex. A lookup either runs
//! before a concurrent forget's section (its +1 keeps the entry alive) or after it (the
//! entry is gone and it inserts a fresh one): no lookup returns an entry being freed, and
//! two forgets cannot both see zero. The erased `Node` is dropped after the mutex is
//! released (dropping it may free the inode).
//!
//! Lock order: a shard mutex is a leaf (nothing else is taken under it).

use std::collections::hash_map::Entry as Slot;
use std::collections::HashMap;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_utils::CachePadded;
use parking_lot::{Condvar, Mutex};
use scalevfs::frontend::Node;
use scalevfs_primitives::cpu::current_shard;
use scalevfs_vfs::cancel::CancelToken;
use scalevfs_vfs::{FileRef, Inode, SuperBlock};

/// Shards per table; each shard's mutex has a cache line of its own (`CachePadded`), so
/// requests on different shards share no line.
const SHARDS: usize = 64;

/// The root's node id, fixed by the FUSE protocol.
pub const ROOT_ID: u64 = 1;

struct Entry {
    node: Node,
    nlookup: u64,
}

/// See the module docs.
pub struct NodeTable {
    root: Node,
    shards: [CachePadded<Mutex<HashMap<u64, Entry>>>; SHARDS],
}

impl NodeTable {
    pub fn new(root: Node) -> NodeTable {
        NodeTable {
            root,
            shards: std::array::from_fn(|_| CachePadded::new(Mutex::new(HashMap::new()))),
        }
    }

    fn shard(&self, id: u64) -> &Mutex<HashMap<u64, Entry>> {
        &self.shards[(id % SHARDS as u64) as usize]
    }

    /// The node id the kernel will know `node` by.
    pub fn id_of(&self, node: &Node) -> u64 {
        if std::ptr::eq(node.inode(), self.root.inode()) {
            return ROOT_ID;
        }
        self.ino_of(node.inode())
    }

    /// The inode number the mount reports for `inode` (`st_ino`): its own, tagged with
    /// its superblock as the node id is, since every file system shares the mount's
    /// one `st_dev`.
    pub fn ino_of(&self, inode: &Inode) -> u64 {
        self.ino_in(inode.sb(), inode.ino)
    }

    /// The reported number of inode `ino` of superblock `sb` (readdir's `d_ino`).
    pub fn ino_in(&self, sb: &SuperBlock, ino: u64) -> u64 {
        let tag = sb.dev.wrapping_sub(self.root.inode().sb().dev);
        debug_assert!(ino < 1 << 48, "inode numbers fit in 48 bits");
        tag << 48 | ino
    }

    /// The root's node.
    pub fn root(&self) -> &Node {
        &self.root
    }

    /// The node behind `id` (`None`: unknown or forgotten: the kernel's reference is stale).
    pub fn get(&self, id: u64) -> Option<Node> {
        if id == ROOT_ID {
            return Some(self.root.clone());
        }
        self.shard(id).lock().get(&id).map(|e| e.node.clone())
    }

    /// Counts one more kernel reference to `node` (an entry reply about to be sent) and
    /// returns its node id. The root is not counted.
    pub fn remember(&self, node: Node) -> u64 {
        let id = self.id_of(&node);
        if id == ROOT_ID {
            return id;
        }
        let duplicate = {
            let mut s = self.shard(id).lock();
            match s.entry(id) {
                Slot::Occupied(mut o) => {
                    o.get_mut().nlookup += 1;
                    Some(node)
                }
                Slot::Vacant(v) => {
                    v.insert(Entry { node, nlookup: 1 });
                    None
                }
            }
        };
        // Outside the shard lock: the entry may hold another dentry of the inode (a hard
        // link), so this may be the last reference to `node`'s dentry.
        drop(duplicate);
        id
    }

    /// The kernel dropped `n` references to `id` (FORGET, BATCH_FORGET, or an entry reply
    /// that could not be delivered). At zero the entry goes.
    pub fn forget(&self, id: u64, n: u64) {
        if id == ROOT_ID {
            return;
        }
        let gone = {
            let mut s = self.shard(id).lock();
            match s.get_mut(&id) {
                Some(e) if e.nlookup > n => {
                    e.nlookup -= n;
                    None
                }
                // Saturate: the kernel never forgets more than it was given.
                Some(_) => s.remove(&id),
                None => None,
            }
        };
        drop(gone); // outside the shard lock: may free the inode
    }

    /// How many nodes the kernel holds, and the sum of their lookup counts.
    pub fn counts(&self) -> (u64, u64) {
        self.shards.iter().fold((0, 0), |(n, c), s| {
            let s = s.lock();
            (
                n + s.len() as u64,
                c + s.values().map(|e| e.nlookup).sum::<u64>(),
            )
        })
    }

    /// Unmount: drops every node (the kernel forgets nothing after an abort).
    pub fn clear(&self) {
        for s in &self.shards {
            let all = std::mem::take(&mut *s.lock());
            drop(all);
        }
    }
}

/// An open file or directory handle: one per kernel open file description.
pub struct Handle {
    pub node: Node,
    pub file: FileRef,
    /// POSIX-style owners that locked through this handle and have not flushed it since:
    /// at release these can only be OFD owners (see `docs/fuse.md` section 5).
    pub owners: Mutex<Vec<u64>>,
    /// The kernel's poll handle and our registration with the kernfs open file that
    /// wakes it (`--sys` attribute files), removed at release.
    pub poll: Mutex<Option<(u64, scalevfs_kernfs::WaiterKey)>>,
}

impl Handle {
    pub fn new(node: Node, file: FileRef) -> Handle {
        Handle {
            node,
            file,
            owners: Mutex::new(Vec::new()),
            poll: Mutex::new(None),
        }
    }
}

struct FileShard {
    seq: u64,
    map: HashMap<u64, Arc<Handle>>,
}

/// See the module docs.
pub struct FileTable {
    shards: [CachePadded<Mutex<FileShard>>; SHARDS],
}

impl FileTable {
    pub fn new() -> FileTable {
        FileTable {
            shards: std::array::from_fn(|_| {
                CachePadded::new(Mutex::new(FileShard {
                    seq: 0,
                    map: HashMap::new(),
                }))
            }),
        }
    }

    pub fn insert(&self, h: Handle) -> u64 {
        let shard = current_shard(SHARDS);
        let mut s = self.shards[shard].lock();
        s.seq += 1;
        let fh = s.seq << 6 | shard as u64;
        s.map.insert(fh, Arc::new(h));
        fh
    }

    pub fn get(&self, fh: u64) -> Option<Arc<Handle>> {
        self.shards[(fh % SHARDS as u64) as usize]
            .lock()
            .map
            .get(&fh)
            .cloned()
    }

    pub fn remove(&self, fh: u64) -> Option<Arc<Handle>> {
        self.shards[(fh % SHARDS as u64) as usize]
            .lock()
            .map
            .remove(&fh)
    }

    pub fn len(&self) -> usize {
        self.shards.iter().map(|s| s.lock().map.len()).sum()
    }

    /// Unmount: removes every handle and returns them, for the caller to release
    /// outside the shard locks.
    pub fn drain(&self) -> Vec<Arc<Handle>> {
        let mut out = Vec::new();
        for s in &self.shards {
            let all = std::mem::take(&mut s.lock().map);
            out.extend(all.into_values());
        }
        out
    }
}

/// See the module docs. Also counts the threads that wait (published or not yet
/// finished), so that unmount can wait for the last one to end.
pub struct Waits {
    shards: [CachePadded<Mutex<HashMap<u64, Wait>>>; SHARDS],
    /// Waiting requests from [`Waits::insert`] to [`Waits::finish`]; a leaf mutex.
    live: Mutex<usize>,
    idle: Condvar,
    /// The waiting threads not yet seen finished, for unmount to join; a leaf mutex.
    threads: Mutex<Vec<JoinHandle<()>>>,
}

/// What [`Waits`] knows of a unique.
enum Wait {
    /// A request waiting, cancelled through its token.
    Sleeping(CancelToken),
    /// An interrupt arrived (at this time) before its target published a wait
    /// ([`Waits::interrupt_or_remember`]): the wait is cancelled as soon as it is.
    Interrupted(Instant),
}

/// How long an interrupt waits for its target to publish a wait. The target is being
/// served right then (or was answered, and its unique is never reused), so its wait
/// follows within microseconds unless the worker is preempted; this only bounds the
/// memory of interrupts whose target was answered.
const EARLY_INTERRUPT_TTL: Duration = Duration::from_secs(10);

impl Waits {
    pub fn new() -> Waits {
        Waits {
            shards: std::array::from_fn(|_| CachePadded::new(Mutex::new(HashMap::new()))),
            live: Mutex::new(0),
            idle: Condvar::new(),
            threads: Mutex::new(Vec::new()),
        }
    }
    fn shard(&self, unique: u64) -> &Mutex<HashMap<u64, Wait>> {
        &self.shards[(unique % SHARDS as u64) as usize]
    }
    /// Publishes the token of a request about to wait; [`Waits::finish`] must follow.
    /// If an interrupt for it came first (remembered), the token is cancelled now.
    pub fn insert(&self, unique: u64, t: CancelToken) {
        *self.live.lock() += 1;
        let before = self
            .shard(unique)
            .lock()
            .insert(unique, Wait::Sleeping(t.clone()));
        if let Some(Wait::Interrupted(_)) = before {
            t.cancel();
        }
    }
    /// The token of the waiting request `unique`, if it waits.
    pub fn get(&self, unique: u64) -> Option<CancelToken> {
        match self.shard(unique).lock().get(&unique) {
            Some(Wait::Sleeping(t)) => Some(t.clone()),
            _ => None,
        }
    }
    /// An interrupt for `unique`: the token to cancel if it waits; otherwise the
    /// interrupt is remembered (one critical section with the check, so a wait published
    /// meanwhile is either found here or cancelled by its `insert`) for
    /// `EARLY_INTERRUPT_TTL`. For transports where the kernel cannot queue an interrupt
    /// again (io_uring).
    pub fn interrupt_or_remember(&self, unique: u64) -> Option<CancelToken> {
        let now = Instant::now();
        let mut shard = self.shard(unique).lock();
        if let Some(Wait::Sleeping(t)) = shard.get(&unique) {
            return Some(t.clone());
        }
        shard.retain(|_, w| match w {
            Wait::Interrupted(at) => now.duration_since(*at) < EARLY_INTERRUPT_TTL,
            Wait::Sleeping(_) => true,
        });
        shard.insert(unique, Wait::Interrupted(now));
        None
    }
    /// The request `unique` was answered (or never waited): unpublishes it.
    pub fn finish(&self, unique: u64) {
        self.shard(unique).lock().remove(&unique);
        let mut live = self.live.lock();
        *live -= 1;
        if *live == 0 {
            self.idle.notify_all();
        }
    }
    /// Waiting requests (remembered interrupts are not counted).
    pub fn len(&self) -> usize {
        self.shards
            .iter()
            .map(|s| {
                s.lock()
                    .values()
                    .filter(|w| matches!(w, Wait::Sleeping(_)))
                    .count()
            })
            .sum()
    }
    /// Cancels every waiting request (unmount).
    pub fn cancel_all(&self) {
        for s in &self.shards {
            for w in s.lock().values() {
                if let Wait::Sleeping(t) = w {
                    t.cancel();
                }
            }
        }
    }
    /// Keeps `t`, a waiting request's thread, for [`Waits::join_all`] (and forgets the
    /// finished ones, so the list stays as long as the waits in progress).
    pub fn adopt(&self, t: JoinHandle<()>) {
        let mut all = self.threads.lock();
        all.retain(|t| !t.is_finished());
        all.push(t);
    }
    #[cfg(test)]
    pub fn threads_is_empty(&self) -> bool {
        self.threads.lock().is_empty()
    }
    /// Joins every waiting thread (call once [`Waits::wait_idle`] said they finished).
    pub fn join_all(&self) {
        let all = std::mem::take(&mut *self.threads.lock());
        for t in all {
            let _ = t.join();
        }
    }
    /// Waits until every waiting request finished, at most `timeout`; false if some
    /// did not.
    pub fn wait_idle(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let mut live = self.live.lock();
        while *live != 0 {
            if self.idle.wait_until(&mut live, deadline).timed_out() {
                return *live == 0;
            }
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use scalevfs::frontend::Owner;
    use scalevfs::{Vfs, VfsOptions};

    /// Many threads look up and forget the same few inodes (reached by several names: hard
    /// links) at once: a held node id always resolves to its inode (nothing is erased
    /// while counted), and once every thread forgot what it was given, nothing is left.
    #[test]
    fn concurrent_remember_and_forget_keep_exact_counts() {
        let vfs = Vfs::new(VfsOptions::default());
        let core = vfs.core();
        let root = core.root_node();
        let me = Owner { uid: 0, gid: 0 };
        let mut inos = Vec::new();
        for i in 0..4 {
            let n = core
                .node_mknod(&root, format!("f{i}").as_bytes(), 0o644, 0, me)
                .unwrap();
            core.node_link(&n, &root, format!("l{i}").as_bytes())
                .unwrap();
            inos.push(n.ino());
        }
        let table = NodeTable::new(root.clone());
        std::thread::scope(|s| {
            for t in 0..16 {
                let (table, core, root, inos) = (&table, core, &root, &inos);
                s.spawn(move || {
                    let mut held = vec![0u64; 4];
                    for k in 0..2000usize {
                        let i = (k * 7 + t) % 4;
                        let name = if k % 2 == 0 { "f" } else { "l" };
                        let n = core
                            .node_lookup(root, format!("{name}{i}").as_bytes())
                            .unwrap();
                        let id = table.remember(n);
                        assert_eq!(id, inos[i], "one node id per inode, whatever the name");
                        held[i] += 1;
                        assert_eq!(table.get(id).unwrap().ino(), inos[i]);
                        if k % 3 == 0 {
                            // Forget everything this thread holds on i, in one batch.
                            table.forget(id, held[i]);
                            held[i] = 0;
                        }
                    }
                    for (i, n) in held.into_iter().enumerate() {
                        if n > 0 {
                            table.forget(inos[i], n);
                        }
                    }
                });
            }
        });
        assert_eq!(table.counts(), (0, 0), "every entry went at zero");
        assert!(table.get(inos[0]).is_none());
        assert_eq!(table.remember(root.clone()), ROOT_ID);
        assert_eq!(table.counts(), (0, 0), "the root is not counted");
    }

    /// An interrupt and its target's wait race from two threads, many times: whichever
    /// comes first, the wait ends cancelled (found by the interrupt, or cancelled by its
    /// own `insert` because the interrupt was remembered), and no wait is left counted.
    #[test]
    fn an_interrupt_racing_its_targets_wait_always_cancels_it() {
        let waits = Arc::new(Waits::new());
        let rounds = 2000u64;
        for base in 0..4u64 {
            let (w1, w2) = (waits.clone(), waits.clone());
            let uniques: Vec<u64> = (0..rounds).map(|i| (base * rounds + i) * 2).collect();
            let u2 = uniques.clone();
            let waiter = std::thread::spawn(move || {
                uniques
                    .iter()
                    .map(|&u| {
                        let t = CancelToken::new();
                        w1.insert(u, t.clone());
                        t
                    })
                    .collect::<Vec<_>>()
            });
            let interrupter = std::thread::spawn(move || {
                for &u in &u2 {
                    if let Some(t) = w2.interrupt_or_remember(u) {
                        t.cancel();
                    }
                }
            });
            interrupter.join().unwrap();
            let tokens = waiter.join().unwrap();
            for (i, t) in tokens.iter().enumerate() {
                assert!(
                    t.is_cancelled(),
                    "wait {i} of round {base} missed its interrupt"
                );
            }
            assert_eq!(waits.len(), tokens.len());
            for i in 0..rounds {
                waits.finish((base * rounds + i) * 2);
            }
            assert_eq!(waits.len(), 0);
        }
        // A remembered interrupt whose target never waits is not a waiting request.
        assert!(waits.interrupt_or_remember(1).is_none());
        assert_eq!(waits.len(), 0);
        waits.cancel_all();
        assert!(waits.wait_idle(Duration::from_millis(10)));
    }
}
