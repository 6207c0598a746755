//! A summary of an inode's POSIX/OFD lock list that readers may take without the context
//! lock: enough to answer a non-blocking request that conflicts (`F_SETLK`'s `EAGAIN`) and
//! `F_GETLK`, the requests that, when many threads contend for one lock, are nearly all
//! of them.
//!
//! ## What it holds
//!
//! Whether the list is empty, holds exactly one lock (and that lock: owner, class, pid,
//! type, range), or holds more. With one lock, "does request R conflict" and "what would
//! `F_GETLK` report" are decided from the summary alone; with more, the caller takes the
//! context lock as before.
//!
//! ## Protocol
//!
//! A sequence counter ([`SeqCounter`]) guards four words ([`SeqCell`]), as Linux's
//! `seqcount_t` guards plain fields. The writer is whoever holds the context lock: every
//! context-lock section that may have changed the list republishes the summary before it
//! unlocks (`Guard`'s drop, in `mod.rs`), and skips the write when nothing changed, so a
//! section that changes nothing (an `EAGAIN` taken under the lock, a flock operation)
//! writes no line of the summary. A reader samples the counter, loads the words, and
//! validates; a torn or concurrent read is discarded and the caller falls back to the
//! lock. So an answer drawn from the summary describes the list as it was at one instant
//! between the call's start and its end: the same answer the locked path would have given
//! had it run at that instant (linearizable).
//!
//! ## Why it scales
//!
//! The summary sits on its own cache line. While one thread holds a lock and others keep
//! asking for it, the askers only read that line (shared in every cache); it is written
//! when the holder's lock or unlock changes the list, twice per successful round, instead
//! of every asker writing the context lock's word.

use scalevfs_primitives::seqlock::{SeqCell, SeqCounter};

use super::list::Held;
use super::{LockClass, LockInfo, LockOwner, LockType};

/// What the list looked like at one instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Snapshot {
    Empty,
    One(LockInfo),
    /// Two or more locks: ask under the context lock.
    Many,
}

/// See the module docs.
#[derive(Debug)]
pub(crate) struct PosixSummary {
    seq: SeqCounter,
    cell: SeqCell<4>,
}

impl Default for PosixSummary {
    fn default() -> Self {
        PosixSummary {
            seq: SeqCounter::new(),
            cell: SeqCell::new([OFF, 0, 0, 0]),
        }
    }
}

const EMPTY: u64 = 0;
const ONE: u64 = 1;
const MANY: u64 = 2;
/// Not kept (yet): readers take the lock. A context starts so, and its summary is kept
/// from the first request that finds a conflict on, so that files nobody contends for pay
/// one load and compare per locked section for it, not a summary write.
const OFF: u64 = 3;

fn encode(list: &[Held]) -> [u64; 4] {
    match list {
        [] => [EMPTY, 0, 0, 0],
        [h] => {
            let i = &h.info;
            let (kind, id) = match i.owner {
                LockOwner::Process(id) => (0u64, id),
                LockOwner::File(id) => (1u64, id),
            };
            let class = match i.class {
                LockClass::Posix => 0u64,
                LockClass::Ofd => 1,
                LockClass::Flock => 2,
            };
            let ty = match i.ty {
                LockType::Read => 0u64,
                LockType::Write => 1,
                LockType::Unlock => 2,
            };
            let head = ONE | ty << 8 | class << 16 | kind << 24 | u64::from(i.pid as u32) << 32;
            [head, id, i.start as u64, i.end as u64]
        }
        _ => [MANY, 0, 0, 0],
    }
}

fn decode(w: [u64; 4]) -> Snapshot {
    match w[0] & 0xff {
        EMPTY => Snapshot::Empty,
        ONE => {
            let owner = match (w[0] >> 24) & 0xff {
                0 => LockOwner::Process(w[1]),
                _ => LockOwner::File(w[1]),
            };
            let class = match (w[0] >> 16) & 0xff {
                0 => LockClass::Posix,
                1 => LockClass::Ofd,
                _ => LockClass::Flock,
            };
            let ty = match (w[0] >> 8) & 0xff {
                0 => LockType::Read,
                1 => LockType::Write,
                _ => LockType::Unlock,
            };
            Snapshot::One(LockInfo {
                class,
                owner,
                pid: (w[0] >> 32) as u32 as i32,
                ty,
                start: w[2] as i64,
                end: w[3] as i64,
            })
        }
        MANY => Snapshot::Many,
        _ => unreachable!("OFF is filtered out by `read`"),
    }
}

impl PosixSummary {
    /// Republishes the summary of `list`. Call with the context lock held (the lock
    /// serializes writers), after the list may have changed.
    /// With `start`, keeps the summary from now on if it was not kept (see [`OFF`]).
    #[inline]
    pub(crate) fn publish(&self, list: &[Held], start: bool) {
        // Under the context lock no other writer runs: loads see our own last stores.
        let head = self.cell.load_word(0);
        if head == OFF && !start {
            return;
        }
        // Two or more locks summarize as MANY whatever they are: one word to compare.
        if list.len() > 1 && head == MANY {
            return;
        }
        let new = encode(list);
        if self.cell.load() == new {
            return;
        }
        self.seq.write_begin();
        self.cell.store(new);
        self.seq.write_end();
    }

    /// The list as it was at one instant, or `None` if a writer was changing it (the
    /// caller then asks under the context lock).
    #[inline]
    pub(crate) fn read(&self) -> Option<Snapshot> {
        // read_begin_raw: a writer in progress makes the read fail at once instead of
        // waiting; the caller has the lock to fall back on.
        let start = self.seq.read_begin_raw();
        let words = self.cell.load();
        if self.seq.read_retry(start) || words[0] == OFF {
            return None;
        }
        Some(decode(words))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn held(owner: LockOwner, class: LockClass, ty: LockType, start: i64, end: i64) -> Held {
        Held::new(LockInfo {
            class,
            owner,
            pid: -7,
            ty,
            start,
            end,
        })
    }

    /// Every lock the list can hold survives the encoding, pid and 64-bit ids included.
    #[test]
    fn one_lock_round_trips() {
        let s = PosixSummary::default();
        assert_eq!(s.read(), None, "not kept before a conflict");
        s.publish(&[], false);
        assert_eq!(s.read(), None, "still not kept");
        s.publish(&[], true);
        assert_eq!(s.read(), Some(Snapshot::Empty));
        for (owner, class) in [
            (LockOwner::Process(u64::MAX - 3), LockClass::Posix),
            (LockOwner::File(1 << 40), LockClass::Ofd),
        ] {
            for ty in [LockType::Read, LockType::Write] {
                let h = held(owner, class, ty, 5, i64::MAX);
                s.publish(std::slice::from_ref(&h), false);
                assert_eq!(s.read(), Some(Snapshot::One(h.info)));
            }
        }
        let two = [
            held(LockOwner::File(1), LockClass::Ofd, LockType::Read, 0, 0),
            held(LockOwner::File(2), LockClass::Ofd, LockType::Read, 0, 0),
        ];
        s.publish(&two, false);
        assert_eq!(s.read(), Some(Snapshot::Many));
        s.publish(&[], false);
        assert_eq!(s.read(), Some(Snapshot::Empty));
    }

    /// A publish that changes nothing writes nothing (the counter stays).
    #[test]
    fn unchanged_publish_writes_nothing() {
        let s = PosixSummary::default();
        let h = held(LockOwner::File(9), LockClass::Ofd, LockType::Write, 0, 0);
        s.publish(std::slice::from_ref(&h), true);
        let seq = s.seq.raw();
        s.publish(std::slice::from_ref(&h), false);
        assert_eq!(s.seq.raw(), seq);
    }

    /// Readers racing a writer never see a mix of two summaries: each validated read is
    /// one of the values the writer published.
    #[test]
    fn racing_reads_are_never_torn() {
        let s = std::sync::Arc::new(PosixSummary::default());
        let a = held(LockOwner::File(1), LockClass::Ofd, LockType::Write, 0, 99);
        let b = held(
            LockOwner::Process(u64::MAX),
            LockClass::Posix,
            LockType::Read,
            7,
            8,
        );
        let (ia, ib) = (a.info, b.info);
        use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
        let stop = std::sync::Arc::new(AtomicBool::new(false));
        let reads = std::sync::Arc::new(AtomicU64::new(0));
        let reader = {
            let (s, stop, reads) = (s.clone(), stop.clone(), reads.clone());
            std::thread::spawn(move || {
                while !stop.load(Relaxed) {
                    match s.read() {
                        Some(Snapshot::One(i)) => assert!(i == ia || i == ib, "torn: {i:?}"),
                        Some(Snapshot::Empty) | None => {}
                        Some(Snapshot::Many) => panic!("never published"),
                    }
                    reads.fetch_add(1, Relaxed);
                }
            })
        };
        // Publish until the reader has raced many writes (it may start late on a busy
        // machine), with a time bound so a stuck reader fails the join instead.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        let mut k = 0u64;
        while (k < 200_000 || reads.load(Relaxed) < 100_000) && std::time::Instant::now() < deadline
        {
            let h = if k.is_multiple_of(2) { &a } else { &b };
            s.publish(std::slice::from_ref(h), true);
            k += 1;
        }
        stop.store(true, Relaxed);
        reader.join().unwrap();
        assert!(
            reads.load(Relaxed) >= 100_000,
            "the reader raced the writer"
        );
    }
}
