//! Shuttle model of the attribute table's reader/writer protocol (`xattr_table` module
//! docs), on one bucket holding inodes A and B:
//!
//! 1. A's value changes: a new list is swapped into A's cell, the old list retired;
//! 2. B gains its first attribute: a new cell and a copy of the map with B are published,
//!    the old map retired;
//! 3. A loses its last attribute: a copy of the map without A is published, the old map
//!    and A's cell (with its list) retired.
//!
//! A collector frees each retired object once every reader pinned at its retirement has
//! been seen unpinned (what the epoch guarantees). Readers pin, load the map, look A and
//! B up, load their lists and unpin, twice. They must never reach a freed or
//! uninitialized object, must find each inode's own list, and must see A's state move
//! only forward (old list, new list, gone) from one call to the next. Shuttle explores
//! interleavings, not weak memory: the Acquire/Release pairs are those of the real code.

use shuttle::sync::atomic::{AtomicBool, AtomicUsize, Ordering::*};
use shuttle::sync::Mutex;
use shuttle::thread;
use std::sync::Arc;

const READERS: usize = 2;
const NONE: usize = usize::MAX;

/// Objects, by index into `World::objects`.
const MAP_A: usize = 0; // {A}
const MAP_AB: usize = 1; // {A, B}
const MAP_B: usize = 2; // {B}
const CELL_A: usize = 3;
const CELL_B: usize = 4;
const LIST_A0: usize = 5;
const LIST_A1: usize = 6;
const LIST_B0: usize = 7;
const OBJECTS: usize = 8;

/// The cells each map holds (A's, B's).
fn map_cells(map: usize) -> [usize; 2] {
    match map {
        MAP_A => [CELL_A, NONE],
        MAP_AB => [CELL_A, CELL_B],
        MAP_B => [NONE, CELL_B],
        _ => unreachable!("not a map"),
    }
}

#[derive(Default)]
struct Object {
    initialized: AtomicBool,
    freed: AtomicBool,
}

struct World {
    objects: [Object; OBJECTS],
    /// The bucket's map.
    bucket: AtomicUsize,
    /// Each cell's list (A's cell, B's cell).
    lists: [AtomicUsize; 2],
    pinned: [AtomicBool; READERS],
    /// Retired objects with the readers pinned at their retirement.
    retired: Mutex<Vec<(Vec<usize>, [bool; READERS])>>,
    writer_done: AtomicBool,
}

impl World {
    fn init(&self, o: usize) {
        self.objects[o].initialized.store(true, Relaxed);
    }

    /// A reader's access to object `o`.
    fn reach(&self, o: usize) {
        assert!(
            self.objects[o].initialized.load(Relaxed),
            "uninitialized {o}"
        );
        assert!(!self.objects[o].freed.load(Relaxed), "freed {o}");
    }

    /// Hands unlinked objects to the collector with the readers pinned now.
    fn retire(&self, objects: Vec<usize>) {
        let pinned = std::array::from_fn(|r| self.pinned[r].load(SeqCst));
        self.retired.lock().unwrap().push((objects, pinned));
    }

    /// A's state in one call: 0 (old list), 1 (new list), 2 (no attributes); and
    /// whether B was found.
    fn read(&self, r: usize) -> (usize, bool) {
        self.pinned[r].store(true, SeqCst);
        let map = self.bucket.load(Acquire);
        self.reach(map);
        let [a, b] = map_cells(map);
        let a_state = if a == NONE {
            2
        } else {
            self.reach(a);
            let list = self.lists[0].load(Acquire);
            self.reach(list);
            assert!(
                list == LIST_A0 || list == LIST_A1,
                "A's cell holds A's list"
            );
            usize::from(list == LIST_A1)
        };
        if b != NONE {
            thread::yield_now();
            self.reach(b);
            let list = self.lists[1].load(Acquire);
            self.reach(list);
            assert_eq!(list, LIST_B0, "B's cell holds B's list");
        }
        self.pinned[r].store(false, SeqCst);
        (a_state, b != NONE)
    }
}

fn model() {
    let w = Arc::new(World {
        objects: Default::default(),
        bucket: AtomicUsize::new(MAP_A),
        lists: [AtomicUsize::new(LIST_A0), AtomicUsize::new(NONE)],
        pinned: Default::default(),
        retired: Mutex::new(Vec::new()),
        writer_done: AtomicBool::new(false),
    });
    for o in [MAP_A, CELL_A, LIST_A0] {
        w.init(o);
    }
    let readers: Vec<_> = (0..READERS)
        .map(|r| {
            let w = w.clone();
            thread::spawn(move || {
                let (a1, b1) = w.read(r);
                let (a2, b2) = w.read(r);
                assert!(a2 >= a1, "A's attributes went back: {a1} then {a2}");
                assert!(b2 || !b1, "B's attribute went away");
            })
        })
        .collect();
    let writer = {
        let w = w.clone();
        thread::spawn(move || {
            // 1. A's value changes: swap the cell's list.
            w.init(LIST_A1);
            let old = w.lists[0].swap(LIST_A1, Release);
            w.retire(vec![old]);
            // 2. B's first attribute: a cell, and a map copy that holds it.
            w.init(LIST_B0);
            w.lists[1].store(LIST_B0, Relaxed);
            w.init(CELL_B);
            w.init(MAP_AB);
            let old = w.bucket.swap(MAP_AB, Release);
            w.retire(vec![old]);
            // 3. A's last attribute: a map copy without A; the cell goes with its list.
            w.init(MAP_B);
            let old = w.bucket.swap(MAP_B, Release);
            let list = w.lists[0].load(Relaxed);
            w.retire(vec![old, CELL_A, list]);
            w.writer_done.store(true, SeqCst);
        })
    };
    let collector = {
        let w = w.clone();
        thread::spawn(move || loop {
            let next = w.retired.lock().unwrap().pop();
            match next {
                Some((objects, pinned)) => {
                    for (r, was) in pinned.into_iter().enumerate() {
                        while was && w.pinned[r].load(SeqCst) {
                            thread::yield_now();
                        }
                    }
                    for o in objects {
                        w.objects[o].freed.store(true, Relaxed);
                    }
                }
                None if w.writer_done.load(SeqCst) => break,
                None => thread::yield_now(),
            }
        })
    };
    for t in readers.into_iter().chain([writer, collector]) {
        t.join().unwrap();
    }
}

#[test]
fn shuttle_xattr_readers_race_value_changes_first_and_last_attributes() {
    shuttle::check_random(model, 3000);
    shuttle::check_pct(model, 3000, 3);
}
