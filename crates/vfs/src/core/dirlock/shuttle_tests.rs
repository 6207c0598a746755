//! Shuttle model of the directory locking protocol (module docs): changes of names
//! holding the directory shared (its per-CPU namespace lock read, plus hashed name
//! locks), against an `rmdir` of the directory and a rename of a directory inside it
//! holding it exclusively (`rwsem`, then the namespace lock written), and against
//! lookups that miss the dcache (`rwsem` shared, plus the name's lock).
//!
//! The namespace lock is modelled by the Dekker pair `SeqRwLock` is built on (its
//! orderings are checked by the loom models in `scalevfs_primitives::seqlock`): a
//! shared locker counts itself in its CPU's shard and then looks for a writer, backing
//! out if it sees one; a writer announces itself and then waits for every shard to
//! drain. The name-lock table has two locks for three names, so two names share one,
//! as hash collisions make them. Shuttle switches threads at every lock and atomic
//! access, and reports a deadlock if some schedule leaves threads waiting forever.
//!
//! Checked in every schedule: two changes of one name never overlap; a lookup never
//! leaves the dcache holding an answer the file system no longer gives (its name lock
//! keeps changes of that name out between its question and caching the answer); and an
//! `rmdir` either finds an entry a shared change made (`ENOTEMPTY`), or the change sees
//! the directory dead (`ENOENT`), never both missing each other.

use shuttle::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use shuttle::sync::{Mutex, RwLock};
use shuttle::thread;
use std::collections::BTreeMap;
use std::sync::Arc;

const ITERS: usize = 3000;

/// Names and the name lock each hashes to: `a` and `c` collide.
const NAMES: [&str; 3] = ["a", "b", "c"];
fn name_lock_of(name: &str) -> usize {
    usize::from(name == "b")
}

/// The per-CPU reader/writer lock's Dekker pair (module docs).
pub(super) struct NsLock {
    shards: [AtomicUsize; 2],
    writer: AtomicBool,
    writers: Mutex<()>,
}

impl NsLock {
    pub(super) fn new() -> NsLock {
        NsLock {
            shards: [AtomicUsize::new(0), AtomicUsize::new(0)],
            writer: AtomicBool::new(false),
            writers: Mutex::new(()),
        }
    }
    /// `try_read_lock`: the fast path alone; backs out if a writer is present.
    pub(super) fn try_read(&self, cpu: usize) -> bool {
        self.shards[cpu].fetch_add(1, SeqCst);
        if !self.writer.load(SeqCst) {
            return true;
        }
        self.shards[cpu].fetch_sub(1, SeqCst);
        false
    }
    /// `try_write_lock`: gives up if another writer holds it or a reader is in.
    pub(super) fn try_write(&self) -> Option<shuttle::sync::MutexGuard<'_, ()>> {
        let g = self.writers.try_lock().ok()?;
        self.writer.store(true, SeqCst);
        if self.shards.iter().any(|s| s.load(SeqCst) != 0) {
            self.writer.store(false, SeqCst);
            return None;
        }
        Some(g)
    }
    pub(super) fn read(&self, cpu: usize) {
        loop {
            self.shards[cpu].fetch_add(1, SeqCst);
            if !self.writer.load(SeqCst) {
                return;
            }
            self.shards[cpu].fetch_sub(1, SeqCst);
            while self.writer.load(SeqCst) {
                thread::yield_now();
            }
        }
    }
    pub(super) fn read_unlock(&self, cpu: usize) {
        self.shards[cpu].fetch_sub(1, SeqCst);
    }
    pub(super) fn write(&self) -> shuttle::sync::MutexGuard<'_, ()> {
        let g = self.writers.lock().unwrap();
        self.writer.store(true, SeqCst);
        while self.shards.iter().any(|s| s.load(SeqCst) != 0) {
            thread::yield_now();
        }
        g
    }
    pub(super) fn write_unlock(&self, g: shuttle::sync::MutexGuard<'_, ()>) {
        self.writer.store(false, SeqCst);
        drop(g);
    }
}

/// A directory: its locks, its entries (the file system's, under their own lock, as
/// tmpfs's buckets), its dcache entries (name -> positive), and whether it is dead.
struct Dir {
    rwsem: RwLock<()>,
    ns: NsLock,
    names: [Mutex<()>; 2],
    entries: Mutex<BTreeMap<&'static str, bool>>,
    dcache: Mutex<BTreeMap<&'static str, bool>>,
    dead: AtomicBool,
    /// Per name: a change of it is running (must never be seen set by another).
    changing: [AtomicBool; 3],
}

impl Dir {
    fn new() -> Dir {
        Dir {
            rwsem: RwLock::new(()),
            ns: NsLock::new(),
            names: [Mutex::new(()), Mutex::new(())],
            entries: Mutex::new(BTreeMap::new()),
            dcache: Mutex::new(BTreeMap::new()),
            dead: AtomicBool::new(false),
            changing: [
                AtomicBool::new(false),
                AtomicBool::new(false),
                AtomicBool::new(false),
            ],
        }
    }

    fn index(name: &str) -> usize {
        NAMES
            .iter()
            .position(|n| *n == name)
            .expect("a modelled name")
    }

    /// Runs `f` as the one change of `name` in progress.
    fn changing(&self, name: &str, f: impl FnOnce()) {
        let flag = &self.changing[Self::index(name)];
        assert!(!flag.swap(true, SeqCst), "two changes of {name} at once");
        f();
        flag.store(false, SeqCst);
    }

    /// A change of `names` holding the directory shared (`lock_names`): namespace lock
    /// read, then the name locks lowest index first; `Err` if the directory is dead.
    fn shared_change(
        &self,
        cpu: usize,
        names: &[&'static str],
        f: impl FnOnce(&Dir),
    ) -> Result<(), ()> {
        self.ns.read(cpu);
        let mut idx: Vec<usize> = names.iter().map(|n| name_lock_of(n)).collect();
        idx.sort_unstable();
        idx.dedup();
        let guards: Vec<_> = idx.iter().map(|&i| self.names[i].lock().unwrap()).collect();
        let r = if self.dead.load(SeqCst) {
            Err(())
        } else {
            f(self);
            Ok(())
        };
        drop(guards);
        self.ns.read_unlock(cpu);
        r
    }

    /// Creates `name`: the file system's entry, then the dcache's positive dentry.
    fn create(&self, cpu: usize, name: &'static str) -> Result<(), ()> {
        self.shared_change(cpu, &[name], |d| {
            d.changing(name, || {
                d.entries.lock().unwrap().insert(name, true);
                d.dcache.lock().unwrap().insert(name, true);
            })
        })
    }

    /// Unlinks `name` if it exists: the entry, then the dentry turns negative.
    fn unlink(&self, cpu: usize, name: &'static str) -> Result<(), ()> {
        self.shared_change(cpu, &[name], |d| {
            d.changing(name, || {
                if d.entries.lock().unwrap().remove(name).is_some() {
                    d.dcache.lock().unwrap().insert(name, false);
                }
            })
        })
    }

    /// Renames `from` to `to` within the directory (both name locks).
    fn rename(&self, cpu: usize, from: &'static str, to: &'static str) -> Result<(), ()> {
        self.shared_change(cpu, &[from, to], |d| {
            d.changing(from, || {
                d.changing(to, || {
                    let mut e = d.entries.lock().unwrap();
                    if e.remove(from).is_some() {
                        e.insert(to, true);
                        drop(e);
                        let mut c = d.dcache.lock().unwrap();
                        c.insert(from, false);
                        c.insert(to, true);
                    }
                })
            })
        })
    }

    /// A lookup that misses the dcache: `rwsem` shared and the name's lock, ask the file
    /// system, then cache the answer (as `lookup_one`).
    fn lookup(&self, name: &'static str) {
        let _r = self.rwsem.read().unwrap();
        let _n = self.names[name_lock_of(name)].lock().unwrap();
        let found = self.entries.lock().unwrap().contains_key(name);
        thread::yield_now();
        self.dcache.lock().unwrap().insert(name, found);
    }

    /// A change holding the directory exclusively: `rwsem`, then the namespace lock.
    fn exclusive<R>(&self, f: impl FnOnce(&Dir) -> R) -> R {
        let _w = self.rwsem.write().unwrap();
        let g = self.ns.write();
        let r = f(self);
        self.ns.write_unlock(g);
        r
    }

    /// `rmdir` of the directory itself: `ENOTEMPTY` (`Err`) if it has an entry.
    fn rmdir_self(&self) -> Result<(), ()> {
        self.exclusive(|d| {
            if d.entries.lock().unwrap().is_empty() {
                d.dead.store(true, SeqCst);
                Ok(())
            } else {
                Err(())
            }
        })
    }
}

/// Random schedules, then PCT schedules (bugs of depth 3).
pub(super) fn explore(model: fn()) {
    shuttle::check_random(model, ITERS);
    shuttle::check_pct(model, ITERS, 3);
}

/// Runs `f` on `d` in a new thread.
fn on<R: Send + 'static>(
    d: &Arc<Dir>,
    f: impl FnOnce(&Dir) -> R + Send + 'static,
) -> thread::JoinHandle<R> {
    let d = d.clone();
    thread::spawn(move || f(&d))
}

/// After every thread: the dcache agrees with the file system for every name cached,
/// and a dead directory has no entries.
fn check_end(d: &Dir) {
    let entries = d.entries.lock().unwrap();
    for (name, positive) in d.dcache.lock().unwrap().iter() {
        assert_eq!(
            *positive,
            entries.contains_key(name),
            "stale dentry for {name}: {entries:?}"
        );
    }
    if d.dead.load(SeqCst) {
        assert!(entries.is_empty(), "a change slipped into a dead directory");
    }
}

/// Two CPUs' shared changes (create `a`; unlink `c`, which shares `a`'s name lock)
/// against a lookup of `a` and an `rmdir` of the directory: either the rmdir fails
/// (`a` exists, or existed while it looked) or the create fails.
#[test]
fn shuttle_shared_changes_against_rmdir_and_lookup() {
    explore(model_rmdir);
}

fn model_rmdir() {
    let d = Arc::new(Dir::new());
    let creator = on(&d, |d| d.create(0, "a"));
    let unlinker = on(&d, |d| d.unlink(1, "c"));
    let looker = on(&d, |d| d.lookup("a"));
    let rmdir = d.rmdir_self();
    let created = creator.join().unwrap();
    unlinker.join().unwrap().ok();
    looker.join().unwrap();
    assert!(
        rmdir.is_ok() != created.is_ok(),
        "rmdir {rmdir:?} and create {created:?}: exactly one wins"
    );
    check_end(&d);
}

/// Renames in both directions between names with different locks (taken lowest index
/// first), a create of the name that collides with one of them, a lookup, and an
/// exclusive change (a directory renamed inside it) that waits for the shared ones: no
/// deadlock, no overlapping changes of a name, no stale dentry.
#[test]
fn shuttle_renames_both_ways_against_an_exclusive_change() {
    explore(model_renames);
}

fn model_renames() {
    let d = Arc::new(Dir::new());
    d.entries.lock().unwrap().insert("a", true);
    let forth = on(&d, |d| d.rename(0, "a", "b").unwrap());
    let back = on(&d, |d| d.rename(1, "b", "a").unwrap());
    let creator = on(&d, |d| d.create(1, "c").unwrap());
    let looker = on(&d, |d| {
        d.lookup("b");
        d.lookup("c");
    });
    // The exclusive side sees no shared change half done: one of `a` or `b` exists.
    let seen = d.exclusive(|d| {
        let e = d.entries.lock().unwrap();
        usize::from(e.contains_key("a")) + usize::from(e.contains_key("b"))
    });
    assert_eq!(seen, 1);
    for h in [forth, back, creator, looker] {
        h.join().unwrap();
    }
    check_end(&d);
}
