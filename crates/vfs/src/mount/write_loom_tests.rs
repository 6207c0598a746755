//! Loom models of the write handshake (`write_gate_impl.rs` itself, on loom's atomics and
//! fences): writers against a remount read-only. The writer count has two shards with
//! `Relaxed` operations only, and a writer takes its count on one shard and gives it back
//! on the other (a thread that migrated), so that the fences alone must carry the
//! argument, with the per-CPU sum's shards going negative.
//!
//! * A remount that succeeds never overlaps a writer's access, and a writer that starts
//!   after it sees `EROFS`.
//! * A writer that was refused leaves no count behind, and one that got in made the
//!   remount fail or finished before the remount looked.
//! * A file open for writing since before the race closes during it: the remount fails
//!   or comes after the close.
//! * What a finished writer changed (a `Relaxed` store, as an unlink's link count) is
//!   seen by the remount's `busy` look once the remount sees its count given back.

// Both models bind `sync` to the same loom shim.
#[allow(clippy::duplicate_mod)]
#[path = "loom_sync.rs"]
mod sync;

include!("write_gate_impl.rs");

use loom::sync::atomic::{AtomicBool, AtomicIsize};
use loom::sync::Arc;
use loom::thread;
use sync::Ordering;

/// Two shards: counts are taken on the first and given back on the second.
#[derive(Default)]
struct TwoShards([AtomicIsize; 2]);

impl WriterCount for TwoShards {
    fn add(&self, delta: isize) {
        let shard = usize::from(delta < 0);
        self.0[shard].fetch_add(delta, Ordering::Relaxed);
    }
    fn sum(&self) -> isize {
        self.0[0].load(Ordering::Relaxed) + self.0[1].load(Ordering::Relaxed)
    }
}

struct World {
    gate: WriteGate,
    writers: TwoShards,
    /// A writer is between its access and giving it back.
    writing: AtomicBool,
    /// The remount succeeded.
    read_only: AtomicBool,
}

fn world() -> Arc<World> {
    Arc::new(World {
        gate: WriteGate::new(false),
        writers: TwoShards::default(),
        writing: AtomicBool::new(false),
        read_only: AtomicBool::new(false),
    })
}

/// One write: the access, the change (a flag the remount must never see set), the end.
fn write(w: &World) -> bool {
    if !w.gate.get_write(&w.writers) {
        return false;
    }
    w.writing.store(true, Ordering::SeqCst);
    assert!(
        !w.read_only.load(Ordering::SeqCst),
        "a writer got in after a remount read-only succeeded"
    );
    w.writing.store(false, Ordering::SeqCst);
    w.gate.put_write(&w.writers);
    true
}

fn remount(w: &World) -> bool {
    let busy_never = || false;
    if !w.gate.make_read_only(&w.writers, busy_never) {
        return false;
    }
    w.read_only.store(true, Ordering::SeqCst);
    assert!(
        !w.writing.load(Ordering::SeqCst),
        "a remount read-only succeeded while a writer was writing"
    );
    true
}

#[test]
fn loom_writer_against_remount_read_only() {
    loom::model(|| {
        let w = world();
        let w2 = w.clone();
        let writer = thread::spawn(move || write(&w2));
        let ro = remount(&w);
        let wrote = writer.join().unwrap();
        // Nobody writes after a read-only remount; nothing is left counted.
        assert_eq!(w.writers.sum(), 0);
        if ro {
            assert!(!write(&w), "read-only: the next writer is refused");
        }
        let _ = wrote;
    });
}

#[test]
fn loom_open_file_and_writer_against_remount_read_only() {
    // A file open for writing holds an access taken before the race (on the shard of the
    // CPU it opened on), and gives it back on the other while a writer and a remount
    // race: the remount must not succeed while either is in.
    loom::model(|| {
        let w = world();
        assert!(w.gate.get_write(&w.writers), "the open file's access");
        let w2 = w.clone();
        let closer = thread::spawn(move || {
            w2.writing.store(true, Ordering::SeqCst);
            assert!(!w2.read_only.load(Ordering::SeqCst), "read-only while open");
            w2.writing.store(false, Ordering::SeqCst);
            w2.gate.put_write(&w2.writers);
        });
        let ro = remount(&w);
        closer.join().unwrap();
        assert_eq!(w.writers.sum(), 0);
        if !ro {
            assert!(remount(&w), "idle now: a second try succeeds");
        }
        assert!(!write(&w));
    });
}

#[test]
fn loom_remount_sees_what_a_finished_writer_changed() {
    loom::model(|| {
        let w = world();
        let unlinked = Arc::new(AtomicBool::new(false));
        let (w2, u2) = (w.clone(), unlinked.clone());
        let writer = thread::spawn(move || {
            if w2.gate.get_write(&w2.writers) {
                // An unlink of a file that stays open: nothing but the remount's look
                // at the inodes can see it afterwards.
                u2.store(true, Ordering::Relaxed);
                w2.gate.put_write(&w2.writers);
            }
        });
        let ro = w
            .gate
            .make_read_only(&w.writers, || unlinked.load(Ordering::Relaxed));
        writer.join().unwrap();
        assert!(
            !(ro && unlinked.load(Ordering::Relaxed)),
            "read-only with an unlinked file still open"
        );
    });
}

#[test]
fn loom_remount_read_write_lets_writers_in() {
    loom::model(|| {
        let w = Arc::new(World {
            gate: WriteGate::new(true),
            writers: TwoShards::default(),
            writing: AtomicBool::new(false),
            read_only: AtomicBool::new(false),
        });
        let w2 = w.clone();
        let writer = thread::spawn(move || write(&w2));
        w.gate.make_writable();
        writer.join().unwrap();
        assert!(
            write(&w),
            "after the remount read-write returned, writers get in"
        );
        assert_eq!(w.writers.sum(), 0);
    });
}
