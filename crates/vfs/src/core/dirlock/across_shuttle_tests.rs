//! Shuttle model of renames of files across two directories holding both shared (module
//! docs, "Renames across directories"), in both directions at once, against an `rmdir`
//! of one of the two directories (shared parent, tried victim, exclusive retry) and
//! against an exclusive holder of both (a directory rename under the rename mutex,
//! ancestor first; `mount` and `rmdir`'s retry lock the same way).
//!
//! `a` is `b`'s parent, and `b` has the lower address, so the shared renames wait for
//! `b`'s namespace lock and try `a`'s, the opposite of the ancestor-first order of the
//! exclusive side: the try is what keeps them from deadlocking. The name-lock table has
//! two locks, and the names are spread so that different threads' names collide.
//!
//! Checked in every schedule: no deadlock; each file ends in exactly one directory; an
//! exclusive holder of both directories never sees a rename half done; and a removed
//! directory has no entries (no file was moved into it after `rmdir` found it empty).

use super::shuttle_tests::{explore, NsLock};
use shuttle::sync::atomic::{AtomicBool, Ordering::SeqCst};
use shuttle::sync::{Mutex, RwLock};
use shuttle::thread;
use std::collections::BTreeSet;
use std::sync::Arc;

/// A directory: its `rwsem`, its namespace lock, its entries (the file system's, under
/// their own lock), and whether `rmdir` removed it.
struct Dir {
    rwsem: RwLock<()>,
    ns: NsLock,
    entries: Mutex<BTreeSet<&'static str>>,
    dead: AtomicBool,
}

impl Dir {
    fn new(entries: &[&'static str]) -> Dir {
        Dir {
            rwsem: RwLock::new(()),
            ns: NsLock::new(),
            entries: Mutex::new(entries.iter().copied().collect()),
            dead: AtomicBool::new(false),
        }
    }

    /// Runs `f` holding the directory exclusively: `rwsem`, then the namespace lock.
    fn exclusive<R>(&self, f: impl FnOnce() -> R) -> R {
        let _w = self.rwsem.write().unwrap();
        let g = self.ns.write();
        let r = f();
        self.ns.write_unlock(g);
        r
    }
}

/// Which directory: `A` is `B`'s parent; `B` has the lower address.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Which {
    B,
    A,
}

struct World {
    a: Dir,
    b: Dir,
    rename_mutex: Mutex<()>,
    /// The hashed name locks: two for five (directory, name) pairs.
    names: [Mutex<()>; 2],
}

impl World {
    fn dir(&self, w: Which) -> &Dir {
        match w {
            Which::A => &self.a,
            Which::B => &self.b,
        }
    }

    /// The name lock of `name` in `dir`: spread so that threads collide.
    fn name_lock_of(dir: Which, name: &str) -> usize {
        match (dir, name) {
            (Which::A, "x") | (Which::B, "y") | (Which::A, "b") => 0,
            _ => 1,
        }
    }

    /// The file system's move of `name`: into the target first, then out of the source
    /// (tmpfs does the two steps one directory at a time). `Err` if either is dead or the
    /// name is gone.
    fn move_entry(&self, from: Which, name: &'static str, to: Which) -> Result<(), ()> {
        let (f, t) = (self.dir(from), self.dir(to));
        if f.dead.load(SeqCst) || t.dead.load(SeqCst) || !f.entries.lock().unwrap().contains(name) {
            return Err(());
        }
        t.entries.lock().unwrap().insert(name);
        thread::yield_now();
        f.entries.lock().unwrap().remove(name);
        Ok(())
    }

    /// A rename of the file `name` from `from` to `to`: both namespace locks shared (the
    /// lower address waited for, the other tried) and both names locked; if the try
    /// fails, the exclusive path: the rename mutex, then both directories, ancestor first.
    fn rename_across(&self, cpu: usize, from: Which, name: &'static str, to: Which) {
        let (first, second) = (from.min(to), from.max(to));
        self.dir(first).ns.read(cpu);
        if self.dir(second).ns.try_read(cpu) {
            let mut idx = [Self::name_lock_of(from, name), Self::name_lock_of(to, name)];
            idx.sort_unstable();
            let _n0 = self.names[idx[0]].lock().unwrap();
            let _n1 = (idx[1] != idx[0]).then(|| self.names[idx[1]].lock().unwrap());
            self.move_entry(from, name, to).ok();
            drop((_n1, _n0));
            self.dir(second).ns.read_unlock(cpu);
            self.dir(first).ns.read_unlock(cpu);
            return;
        }
        self.dir(first).ns.read_unlock(cpu);
        let _m = self.rename_mutex.lock().unwrap();
        self.a
            .exclusive(|| self.b.exclusive(|| self.move_entry(from, name, to).ok()));
    }

    /// `rmdir` of `b` from `a`: `a` shared with the name's lock, `b` only tried; on
    /// failure, again with `a` exclusive and `b` waited for. `Ok` if removed.
    fn rmdir_b(&self, cpu: usize) -> Result<(), ()> {
        let remove = || {
            if self.b.entries.lock().unwrap().is_empty() {
                self.b.dead.store(true, SeqCst);
                Ok(())
            } else {
                Err(())
            }
        };
        self.a.ns.read(cpu);
        let tried = {
            let _n = self.names[Self::name_lock_of(Which::A, "b")]
                .lock()
                .unwrap();
            match self.b.rwsem.try_write() {
                Ok(_w) => self.b.ns.try_write().map(|g| {
                    let r = remove();
                    self.b.ns.write_unlock(g);
                    r
                }),
                Err(_) => None,
            }
        };
        self.a.ns.read_unlock(cpu);
        tried.unwrap_or_else(|| self.a.exclusive(|| self.b.exclusive(remove)))
    }

    /// Where `name` is: exactly one directory must hold it.
    fn holders(&self, name: &str) -> usize {
        [&self.a, &self.b]
            .iter()
            .filter(|d| d.entries.lock().unwrap().contains(name))
            .count()
    }
}

#[test]
fn shuttle_renames_across_against_rmdir_and_an_exclusive_rename() {
    explore(model);
}

fn model() {
    let w = Arc::new(World {
        a: Dir::new(&["x"]),
        b: Dir::new(&["y"]),
        rename_mutex: Mutex::new(()),
        names: [Mutex::new(()), Mutex::new(())],
    });
    let spawn = |f: fn(&World)| {
        let w = w.clone();
        thread::spawn(move || f(&w))
    };
    let into = spawn(|w| w.rename_across(0, Which::A, "x", Which::B));
    let out = spawn(|w| w.rename_across(1, Which::B, "y", Which::A));
    let rmdir = {
        let w = w.clone();
        thread::spawn(move || w.rmdir_b(0))
    };
    // A directory rename under the rename mutex, ancestor first, sees no half-done move.
    {
        let _m = w.rename_mutex.lock().unwrap();
        w.a.exclusive(|| {
            w.b.exclusive(|| assert_eq!((w.holders("x"), w.holders("y")), (1, 1)))
        });
    }
    into.join().unwrap();
    out.join().unwrap();
    let removed = rmdir.join().unwrap();
    assert_eq!((w.holders("x"), w.holders("y")), (1, 1));
    if removed.is_ok() {
        assert!(
            w.b.entries.lock().unwrap().is_empty(),
            "a file was moved into a removed directory"
        );
    }
}
