//! Property tests of the POSIX/OFD range algebra against a per-byte model.
//!
//! The model file has `N` single-byte cells plus one tail cell standing for
//! `N..=OFFSET_MAX`; every request starts inside it, so the tail is always all-or-nothing.
//! For each owner and cell the model keeps the lock type held there. After every step the
//! manager's list must equal the model's maximal same-type runs per owner (Linux merges
//! every adjacent same-type pair), each owner's locks contiguous and sorted, owners in the
//! order they first took a lock, and `EAGAIN` exactly when the model sees a conflict.

use super::*;
use proptest::prelude::*;

const N: usize = 12;
const OWNERS: [LockOwner; 3] = [
    LockOwner::Process(1),
    LockOwner::Process(2),
    LockOwner::File(3),
];

#[derive(Clone, Debug)]
struct Op {
    owner: usize,
    ty: LockType,
    start: usize,
    /// Last cell; `N` is the tail (request to `OFFSET_MAX`).
    last: usize,
}

fn op() -> impl Strategy<Value = Op> {
    (
        0..OWNERS.len(),
        prop_oneof![
            Just(LockType::Read),
            Just(LockType::Write),
            Just(LockType::Unlock)
        ],
        0..=N,
        0..=N,
    )
        .prop_map(|(owner, ty, a, b)| Op {
            owner,
            ty,
            start: a.min(b),
            last: a.max(b),
        })
}

fn cell_range(start: usize, last: usize) -> (i64, i64) {
    let end = if last == N { OFFSET_MAX } else { last as i64 };
    (start as i64, end)
}

struct Model {
    cells: [[Option<LockType>; N + 1]; 3],
    order: Vec<usize>,
}

impl Model {
    fn conflicts(&self, o: &Op) -> bool {
        o.ty != LockType::Unlock
            && (0..3).any(|q| {
                q != o.owner
                    && (o.start..=o.last).any(|i| match self.cells[q][i] {
                        Some(t) => t == LockType::Write || o.ty == LockType::Write,
                        None => false,
                    })
            })
    }
    fn apply(&mut self, o: &Op) {
        let v = (o.ty != LockType::Unlock).then_some(o.ty);
        for i in o.start..=o.last {
            self.cells[o.owner][i] = v;
        }
        let has = self.cells[o.owner].iter().any(Option::is_some);
        let pos = self.order.iter().position(|&x| x == o.owner);
        match (has, pos) {
            (true, None) => self.order.push(o.owner),
            (false, Some(p)) => {
                self.order.remove(p);
            }
            _ => {}
        }
    }
    /// The expected list: owners in order, each owner's maximal runs.
    fn expected(&self) -> Vec<(LockOwner, LockType, i64, i64)> {
        let mut out = Vec::new();
        for &q in &self.order {
            let c = &self.cells[q];
            let mut i = 0;
            while i <= N {
                let Some(t) = c[i] else {
                    i += 1;
                    continue;
                };
                let s = i;
                while i < N && c[i + 1] == Some(t) {
                    i += 1;
                }
                let (a, b) = cell_range(s, i);
                out.push((OWNERS[q], t, a, b));
                i += 1;
            }
        }
        out
    }
}

fn actual(m: &LockManager) -> Vec<(LockOwner, LockType, i64, i64)> {
    m.list()
        .into_iter()
        .map(|l| (l.info.owner, l.info.ty, l.info.start, l.info.end))
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn posix_ranges_match_model(ops in proptest::collection::vec(op(), 1..40), legacy: bool) {
        let m = LockManager::new(if legacy { Locking::Legacy } else { Locking::Scalable });
        let c = m.new_context(1, 1);
        let mut model = Model { cells: [[None; N + 1]; 3], order: Vec::new() };
        for o in &ops {
            let (start, end) = cell_range(o.start, o.last);
            let req = LockRequest { owner: OWNERS[o.owner], pid: 1, ty: o.ty, start, end };
            // F_GETLK agrees with the model and reports a lock that really conflicts.
            if o.ty != LockType::Unlock {
                let got = m.getlk(&c, &req);
                prop_assert_eq!(got.is_some(), model.conflicts(o));
                if let Some(g) = got {
                    prop_assert!(g.owner != req.owner && g.start <= end && start <= g.end);
                    prop_assert!(g.ty == LockType::Write || o.ty == LockType::Write);
                }
            }
            let r = m.setlk(&c, &req, None);
            if model.conflicts(o) {
                prop_assert_eq!(r, Err(Errno::EAGAIN));
            } else {
                prop_assert_eq!(r, Ok(()));
                model.apply(o);
            }
            let got = actual(&m);
            prop_assert_eq!(&got, &model.expected(), "after {:?}", o);
            // Per owner: sorted, non-overlapping, same-type neighbours not adjacent.
            for w in got.windows(2) {
                if w[0].0 == w[1].0 {
                    prop_assert!(w[0].3 < w[1].2);
                    prop_assert!(w[0].1 != w[1].1 || w[0].3 + 1 < w[1].2);
                }
            }
        }
    }

    #[test]
    fn flock_to_range_is_linux(whence in 0i16..4, start in -40i64..40, len in -40i64..40,
                               pos in 0i64..30, size in 0i64..30) {
        let fl = Flock { l_type: 1, l_whence: whence, l_start: start, l_len: len, l_pid: 0 };
        let base = match whence { 0 => Some(0), 1 => Some(pos), 2 => Some(size), _ => None };
        let expect = base.map_or(Err(Errno::EINVAL), |b| {
            let s = b + start;
            if s < 0 { Err(Errno::EINVAL) }
            else if len > 0 { Ok((s, s + len - 1)) }
            else if len == 0 { Ok((s, OFFSET_MAX)) }
            else if s + len < 0 { Err(Errno::EINVAL) }
            else { Ok((s + len, s - 1)) }
        });
        prop_assert_eq!(flock_to_range(&fl, pos, size), expect);
        // Round trip through F_GETLK's encoding.
        if let Ok((s, e)) = expect {
            let info = LockInfo { class: LockClass::Posix, owner: LockOwner::Process(1), pid: 9,
                                  ty: LockType::Write, start: s, end: e };
            let mut out = Flock::default();
            info.to_flock(&mut out);
            prop_assert_eq!(flock_to_range(&out, 0, 0), Ok((s, e)));
        }
    }
}
