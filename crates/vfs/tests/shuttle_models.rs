//! Shuttle models of the two protocols the dcache rests on, written against shuttle's
//! atomics and locks so every interleaving shuttle picks is a real schedule of the protocol:
//!
//! 1. **Dentry refcount and reclaim** (`dentry.rs`): a lockref word (lock bit + count, the
//!    layout and fast path of `LockRef`), the HASHED / ON_LRU / REFERENCED flags under the
//!    lock, rcu-walk readers that find the dentry in the hash and take a reference with
//!    `get_not_dead`, an unlink that unhashes, a shrinker that kills unused dentries, and
//!    `dput` that retains a hashed dentry at zero (LRU) or kills an unhashed one. Memory is
//!    freed only after a grace period (an RwLock standing in for the epoch).
//!    Checked: a reference is never taken on a dead dentry; a dentry is killed at most once;
//!    memory is never freed under a reader; a dentry that ends unhashed with no references
//!    has been killed (no leak).
//! 2. **Rename against lookup and d_path** (`prims::RenameLock` + `d_move`): a renamer moves
//!    a dentry between two (parent, name) keys under the write side of a sequence lock;
//!    rcu-walk readers validate with the sequence, d_path readers use read-or-lock.
//!    Checked: a validated reader never sees a torn (parent, name) pair.

use shuttle::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use shuttle::sync::{Arc, Mutex, RwLock};
use shuttle::thread;

const LOCKED: u64 = 1;
const DEAD: i32 = -128;

fn count_of(w: u64) -> i32 {
    (w >> 32) as i32
}
fn with_count(lock: u64, c: i32) -> u64 {
    ((c as u32 as u64) << 32) | lock
}

/// The lockref word: count in the high half, lock in bit 0.
struct LockRef {
    w: AtomicU64,
}

struct Guard<'a>(&'a LockRef);

impl Guard<'_> {
    fn count(&self) -> i32 {
        count_of(self.0.w.load(Ordering::Relaxed))
    }
    fn set(&self, c: i32) {
        self.0.w.store(with_count(LOCKED, c), Ordering::Relaxed);
    }
}
impl Drop for Guard<'_> {
    fn drop(&mut self) {
        let w = self.0.w.load(Ordering::Relaxed);
        self.0.w.store(w & !LOCKED, Ordering::Release);
    }
}

impl LockRef {
    fn new(c: i32) -> LockRef {
        LockRef {
            w: AtomicU64::new(with_count(0, c)),
        }
    }
    fn lock(&self) -> Guard<'_> {
        while self.w.fetch_or(LOCKED, Ordering::Acquire) & LOCKED != 0 {
            thread::yield_now();
        }
        Guard(self)
    }
    /// Lockless unless locked (then wait and retry), as `LockRef::get_not_dead`.
    fn get_not_dead(&self) -> bool {
        loop {
            let w = self.w.load(Ordering::Relaxed);
            if w & LOCKED != 0 {
                thread::yield_now();
                continue;
            }
            let c = count_of(w);
            if c < 0 {
                return false;
            }
            if self
                .w
                .compare_exchange(w, with_count(0, c + 1), Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
            {
                return true;
            }
        }
    }
    /// Decrements locklessly while the count stays above zero; else returns the lock.
    fn put_or_lock(&self) -> Option<Guard<'_>> {
        loop {
            let w = self.w.load(Ordering::Relaxed);
            if w & LOCKED != 0 {
                thread::yield_now();
                continue;
            }
            let c = count_of(w);
            if c <= 1 {
                let g = self.lock();
                if g.count() <= 1 {
                    return Some(g);
                }
                let c = g.count();
                g.set(c - 1);
                return None;
            }
            if self
                .w
                .compare_exchange(w, with_count(0, c - 1), Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
            {
                return None;
            }
        }
    }
}

const HASHED: u32 = 1;
const ON_LRU: u32 = 2;
const REFERENCED: u32 = 4;

struct Dentry {
    count: LockRef,
    flags: AtomicU32,
    /// The hash table's view: readers find the dentry only while this is set.
    in_hash: AtomicBool,
    kills: AtomicU32,
    freed: AtomicBool,
}

struct World {
    d: Dentry,
    /// The epoch: readers hold it shared while they use a dentry found without a reference;
    /// freeing takes it exclusively (a grace period).
    rcu: RwLock<()>,
    lru_lock: Mutex<()>,
}

/// Kill with the lock held and the count 0: unhash, off the LRU, dead; then free after a
/// grace period.
fn kill(w: &World, g: Guard<'_>) {
    let f = w.d.flags.load(Ordering::Relaxed);
    if f & HASHED != 0 {
        w.d.in_hash.store(false, Ordering::Release);
    }
    if f & ON_LRU != 0 {
        let _l = w.lru_lock.lock().unwrap();
    }
    w.d.flags.store(0, Ordering::Relaxed);
    g.set(DEAD);
    drop(g);
    assert_eq!(w.d.kills.fetch_add(1, Ordering::Relaxed), 0, "killed twice");
    let _grace = w.rcu.write().unwrap();
    w.d.freed.store(true, Ordering::Relaxed);
}

fn dput(w: &World) {
    let Some(g) = w.d.count.put_or_lock() else {
        return;
    };
    assert_eq!(g.count(), 1, "dput without a reference");
    g.set(0);
    let f = w.d.flags.load(Ordering::Relaxed);
    if f & HASHED != 0 {
        if f & ON_LRU == 0 {
            let _l = w.lru_lock.lock().unwrap();
            w.d.flags.fetch_or(ON_LRU, Ordering::Relaxed);
        } else if f & REFERENCED == 0 {
            w.d.flags.fetch_or(REFERENCED, Ordering::Relaxed);
        }
        return;
    }
    kill(w, g);
}

/// rcu-walk: find the dentry in the hash without a reference, then `get_not_dead`.
fn lookup(w: &World) -> bool {
    let _rcu = w.rcu.read().unwrap();
    if !w.d.in_hash.load(Ordering::Acquire) {
        return false;
    }
    assert!(
        !w.d.freed.load(Ordering::Relaxed),
        "use after free in rcu-walk"
    );
    let got = w.d.count.get_not_dead();
    if got {
        assert!(count_of(w.d.count.w.load(Ordering::Relaxed)) >= 1);
        assert_eq!(
            w.d.kills.load(Ordering::Relaxed),
            0,
            "reference on a dead dentry"
        );
    }
    got
}

fn shrink(w: &World) {
    let _rcu = w.rcu.read().unwrap();
    if w.d.flags.load(Ordering::Relaxed) & ON_LRU == 0 || w.d.freed.load(Ordering::Relaxed) {
        return;
    }
    let g = w.d.count.lock();
    if g.count() < 0 {
        return;
    }
    let f = w.d.flags.load(Ordering::Relaxed);
    if f & ON_LRU == 0 {
        return;
    }
    if g.count() > 0 {
        let _l = w.lru_lock.lock().unwrap();
        w.d.flags
            .fetch_and(!(ON_LRU | REFERENCED), Ordering::Relaxed);
        return;
    }
    if f & REFERENCED != 0 {
        w.d.flags.fetch_and(!REFERENCED, Ordering::Relaxed);
        return;
    }
    drop(_rcu);
    kill(w, g);
}

fn refcount_model() {
    // A cached, unused dentry (count 0, hashed, on the LRU).
    let w = Arc::new(World {
        d: Dentry {
            count: LockRef::new(0),
            flags: AtomicU32::new(HASHED | ON_LRU),
            in_hash: AtomicBool::new(true),
            kills: AtomicU32::new(0),
            freed: AtomicBool::new(false),
        },
        rcu: RwLock::new(()),
        lru_lock: Mutex::new(()),
    });
    let mut hs = Vec::new();
    for _ in 0..2 {
        let w = w.clone();
        hs.push(thread::spawn(move || {
            for _ in 0..2 {
                if lookup(&w) {
                    thread::yield_now();
                    dput(&w);
                }
            }
        }));
    }
    {
        // unlink: takes a reference (as the VFS does through lookup), unhashes, puts.
        let w = w.clone();
        hs.push(thread::spawn(move || {
            if lookup(&w) {
                {
                    let _g = w.d.count.lock();
                    w.d.flags.fetch_and(!HASHED, Ordering::Relaxed);
                    w.d.in_hash.store(false, Ordering::Release);
                }
                dput(&w);
            }
        }));
    }
    {
        let w = w.clone();
        hs.push(thread::spawn(move || {
            shrink(&w);
            shrink(&w);
        }));
    }
    for h in hs {
        h.join().unwrap();
    }
    let c = count_of(w.d.count.w.load(Ordering::Relaxed));
    let kills = w.d.kills.load(Ordering::Relaxed);
    assert!(kills <= 1);
    if kills == 1 {
        assert_eq!(c, DEAD);
        assert!(w.d.freed.load(Ordering::Relaxed));
    } else {
        assert_eq!(c, 0, "all references were dropped");
        // Not killed: it must still be reachable (hashed) and reclaimable (on the LRU);
        // an unhashed, unreferenced, live dentry would be a leak.
        assert!(
            w.d.in_hash.load(Ordering::Relaxed),
            "leaked an unhashed dentry"
        );
        assert!(w.d.flags.load(Ordering::Relaxed) & ON_LRU != 0);
    }
}

#[test]
fn shuttle_dentry_refcount_and_reclaim() {
    shuttle::check_random(refcount_model, 3000);
    shuttle::check_pct(refcount_model, 3000, 3);
}

/// A sequence read/write lock as `SeqRwLock` uses it: even/odd sequence, writers exclusive,
/// shared readers exclude writers without bumping the sequence.
struct SeqRw {
    seq: AtomicU64,
    lock: RwLock<()>,
}

/// The moved dentry's key, as two atomics (parent id, name id), like `parent_id` and the
/// name pointer in `Dentry`.
struct Moved {
    parent: AtomicU64,
    name: AtomicU64,
}

fn read_begin(l: &SeqRw) -> u64 {
    loop {
        let s = l.seq.load(Ordering::Acquire);
        if s & 1 == 0 {
            return s;
        }
        thread::yield_now();
    }
}

fn read_retry(l: &SeqRw, s: u64) -> bool {
    shuttle::sync::atomic::fence(Ordering::Acquire);
    l.seq.load(Ordering::Relaxed) != s
}

fn rename_model() {
    let l = Arc::new(SeqRw {
        seq: AtomicU64::new(0),
        lock: RwLock::new(()),
    });
    // Two consistent states: (parent 1, name 10) and (parent 2, name 20).
    let m = Arc::new(Moved {
        parent: AtomicU64::new(1),
        name: AtomicU64::new(10),
    });
    let consistent = |p: u64, n: u64| (p, n) == (1, 10) || (p, n) == (2, 20);
    let mut hs = Vec::new();
    {
        let (l, m) = (l.clone(), m.clone());
        hs.push(thread::spawn(move || {
            for k in 0..2u64 {
                let _w = l.lock.write().unwrap();
                l.seq.fetch_add(1, Ordering::Relaxed);
                shuttle::sync::atomic::fence(Ordering::Release);
                let (p, n) = if k % 2 == 0 { (2, 20) } else { (1, 10) };
                m.parent.store(p, Ordering::Relaxed);
                thread::yield_now();
                m.name.store(n, Ordering::Relaxed);
                l.seq.fetch_add(1, Ordering::Release);
            }
        }));
    }
    {
        // rcu-walk: optimistic, validated; on failure it falls back (here: retries).
        let (l, m) = (l.clone(), m.clone());
        hs.push(thread::spawn(move || {
            for _ in 0..2 {
                let s = read_begin(&l);
                let p = m.parent.load(Ordering::Relaxed);
                let n = m.name.load(Ordering::Relaxed);
                if !read_retry(&l, s) {
                    assert!(consistent(p, n), "validated torn read ({p}, {n})");
                }
            }
        }));
    }
    {
        // d_path: read_or_lock: optimistic pass, then a shared-locked pass that cannot fail.
        let (l, m) = (l.clone(), m.clone());
        hs.push(thread::spawn(move || {
            let s = read_begin(&l);
            let mut r = (
                m.parent.load(Ordering::Relaxed),
                m.name.load(Ordering::Relaxed),
            );
            if read_retry(&l, s) {
                let _shared = l.lock.read().unwrap();
                r = (
                    m.parent.load(Ordering::Relaxed),
                    m.name.load(Ordering::Relaxed),
                );
            }
            assert!(consistent(r.0, r.1), "d_path returned a torn path {r:?}");
        }));
    }
    for h in hs {
        h.join().unwrap();
    }
}

#[test]
fn shuttle_rename_against_lookup_and_d_path() {
    shuttle::check_random(rename_model, 3000);
    shuttle::check_pct(rename_model, 3000, 3);
}

// ------------------------------------------------------------------ 3. umount vs enter

/// The umount decision (`mount/mod.rs`): the mount's root count (the mount's own 1, plus
/// walkers'), its state, and the file system's positive-dentry count (the root's 1, plus
/// one per dentry a walker holds inside). A walker enters as `Mount::enter` does (count the
/// root unless dead, fence, look at the state: wait while umount decides, leave if
/// detached), then takes a dentry inside and lets go of both. umount sets UMOUNTING, fences,
/// reads the counts, and either goes back to ATTACHED (busy) or detaches and releases the
/// root's last count (0: dead, as `put_if_last`). Checked: a walker never gets inside a
/// released or detached mount, a successful umount never had a walker inside, and every
/// count is given back.
fn umount_model() {
    const ATTACHED: u32 = 0;
    const UMOUNTING: u32 = 1;
    const DETACHED: u32 = 2;
    let root = Arc::new(shuttle::sync::atomic::AtomicI32::new(1));
    let dentries = Arc::new(shuttle::sync::atomic::AtomicI32::new(1));
    let state = Arc::new(AtomicU32::new(ATTACHED));
    let released = Arc::new(AtomicBool::new(false));
    let walkers: Vec<_> = (0..2)
        .map(|_| {
            let (root, dentries, state, released) = (
                root.clone(),
                dentries.clone(),
                state.clone(),
                released.clone(),
            );
            thread::spawn(move || loop {
                // try_get: count unless dead (0 after release).
                let mut c = root.load(Ordering::SeqCst);
                let got = loop {
                    if c <= 0 {
                        break false;
                    }
                    match root.compare_exchange(c, c + 1, Ordering::SeqCst, Ordering::SeqCst) {
                        Ok(_) => break true,
                        Err(now) => c = now,
                    }
                };
                if !got {
                    // Dead: umount released it, so it must have detached first.
                    assert_eq!(state.load(Ordering::SeqCst), DETACHED);
                    return false;
                }
                std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
                match state.load(Ordering::SeqCst) {
                    ATTACHED => {
                        assert!(!released.load(Ordering::SeqCst), "counted a released root");
                        dentries.fetch_add(1, Ordering::SeqCst);
                        thread::yield_now();
                        dentries.fetch_sub(1, Ordering::SeqCst);
                        root.fetch_sub(1, Ordering::SeqCst);
                        return true;
                    }
                    DETACHED => {
                        root.fetch_sub(1, Ordering::SeqCst);
                        return false;
                    }
                    _ => {
                        root.fetch_sub(1, Ordering::SeqCst);
                        thread::yield_now();
                    }
                }
            })
        })
        .collect();
    // umount, twice if the first attempt finds the mount busy.
    let mut unmounted = false;
    for _ in 0..2 {
        state.store(UMOUNTING, Ordering::SeqCst);
        std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
        let busy = dentries.load(Ordering::SeqCst) > 1 || root.load(Ordering::SeqCst) > 1;
        if busy {
            state.store(ATTACHED, Ordering::SeqCst);
            thread::yield_now();
            continue;
        }
        state.store(DETACHED, Ordering::SeqCst);
        // Nobody is inside and nobody can get in, but a walker on its way out may still
        // count the root for a moment: release only the last count (`put_if_last`).
        while root
            .compare_exchange(1, 0, Ordering::SeqCst, Ordering::SeqCst)
            .is_err()
        {
            assert!(dentries.load(Ordering::SeqCst) == 1, "a walker got inside");
            thread::yield_now();
        }
        released.store(true, Ordering::SeqCst);
        unmounted = true;
        break;
    }
    for w in walkers {
        w.join().unwrap();
    }
    if unmounted {
        assert_eq!(root.load(Ordering::SeqCst), 0);
    } else {
        assert_eq!(
            root.load(Ordering::SeqCst),
            1,
            "walkers gave their counts back"
        );
    }
    assert_eq!(dentries.load(Ordering::SeqCst), 1);
}

#[test]
fn shuttle_umount_against_enter() {
    shuttle::check_random(umount_model, 5000);
    shuttle::check_pct(umount_model, 5000, 3);
}
