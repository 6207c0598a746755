//! Deliberate differences from the host kernel.
//!
//! A case listed here may differ without failing the differential tests; the report still
//! shows it, and notes when a listed case starts agreeing (so the list only shrinks). Every
//! entry must also appear, with its reason, in the crate README.

use std::collections::{HashMap, HashSet};

use crate::op::{Fd, Op, Outcome, Slot};
use crate::script::Script;

/// A case (by script name) that is allowed to differ, and why.
#[derive(Clone, Copy, Debug)]
pub struct KnownDifference {
    pub case: &'static str,
    pub reason: &'static str,
}

/// The list.
pub const KNOWN_DIFFERENCES: &[KnownDifference] = &[KnownDifference {
    case: "getdents/seek-to-positions",
    reason: "scalable design only: a hashed tmpfs directory lists its entries in hash \
             order, numbered by (bucket, slot), where Linux lists them newest first, \
             numbered from one per-directory counter that every create writes. Positions \
             0 (.), 1 (..), 2 (the first entry), the end, and every position the \
             directory returned (d_off, telldir) resume as on Linux; a seek to a number \
             it never returned (3 and 4 here) resumes elsewhere. The legacy design \
             agrees",
}];

/// The reason a case may differ, if it is listed.
pub fn known_difference(case: &str) -> Option<&'static str> {
    KNOWN_DIFFERENCES
        .iter()
        .find(|k| k.case == case)
        .map(|k| k.reason)
}

/// Why a directory listing that resumes at a position the directory never returned may
/// differ (a step-level rule: it applies to any script, the random ones included).
pub const UNRETURNED_POSITION: &str =
    "scalable design only: a getdents64 that resumes a directory at a position set by \
     lseek to a number the directory never returned (3 and up, but the end), or an lseek \
     that reports a listed directory's position at an entry; scalevfs numbers entries by \
     (bucket, slot) where Linux counts them, see getdents/seek-to-positions";

/// Which open file description each descriptor of a script refers to, followed step by
/// step (positions belong to descriptions: `dup`, `dup2`, `dup3` and `F_DUPFD` share them).
#[derive(Default)]
struct Descriptions {
    /// Slot -> fd number, as the script's outcomes gave it.
    slots: HashMap<Slot, i32>,
    /// fd number -> description (numbered in order of opening).
    desc: HashMap<i32, usize>,
    next: usize,
}

impl Descriptions {
    fn num(&self, fd: &Fd) -> Option<i32> {
        match fd {
            Fd::Slot(s) => self.slots.get(s).copied(),
            Fd::Raw(n) => Some(*n),
            Fd::Cwd => None,
        }
    }

    /// The description `fd` refers to.
    fn of(&self, fd: &Fd) -> Option<usize> {
        self.num(fd).and_then(|n| self.desc.get(&n).copied())
    }

    /// Follows step `op`, whose outcome was `o`: new descriptors and closes.
    fn step(&mut self, op: &Op, o: &Outcome) {
        let (to, src) = match op {
            Op::Open { to, .. } => (*to, None),
            Op::Dup { fd, to } => (*to, self.num(fd)),
            Op::Dup2 { old, to, .. } | Op::Dup3 { old, to, .. } => (*to, self.num(old)),
            Op::Fcntl {
                fd, to: Some(to), ..
            } => (*to, self.num(fd)),
            Op::Close(fd) => {
                if let (Some(n), Outcome::Ok) = (self.num(fd), o) {
                    self.desc.remove(&n);
                    self.slots.retain(|_, v| *v != n);
                }
                return;
            }
            _ => return,
        };
        // A new fd: its description is the source's (a dup) or a fresh one.
        match o {
            Outcome::Fd(n) => {
                let d = match src.and_then(|s| self.desc.get(&s).copied()) {
                    Some(d) => d,
                    None => {
                        self.next += 1;
                        self.next
                    }
                };
                self.desc.insert(*n, d);
                self.slots.insert(to, *n);
            }
            _ => {
                self.slots.remove(&to);
            }
        }
    }
}

/// The steps of `script` whose outcome depends on how a directory numbers its entries,
/// judged from outcomes `out` (either target's: when the steps up to here agree, both
/// give the same answer):
/// * the `getdents64` steps that read a directory from a position an `lseek` set to a
///   number the directory never returned;
/// * the `lseek` steps (`SEEK_CUR`, `SEEK_END`) on a description that a listing has
///   read, whose answer is an entry's number (3 up to the end): a listing that
///   stopped at an entry (a full buffer) leaves the position at that entry's number,
///   which differs.
///
/// Positions 0, 1 and 2 and the end (`i32::MAX`) are the same on every tmpfs, so a seek to
/// one of them does not count. One past the end does: Linux resumes there at the entry
/// with the largest number below it (its newest, usually), scalevfs lists nothing. The position belongs to the open file description, so the
/// rule follows it through `dup`/`dup2`/`dup3`/`F_DUPFD`; a listing to the end leaves the
/// description at the end, a position again common to both.
pub fn unreturned_position_reads(script: &Script, out: &[Outcome]) -> Vec<usize> {
    const END: i64 = i32::MAX as i64;
    let mut fds = Descriptions::default();
    let mut unreturned: HashSet<usize> = HashSet::new();
    // Descriptions a listing has read (so, directories).
    let mut listed: HashSet<usize> = HashSet::new();
    let mut found = Vec::new();
    for (i, op) in script.steps.iter().enumerate() {
        let Some(o) = out.get(i) else { break };
        match op {
            Op::Lseek { fd, whence, .. } => {
                if let (Some(d), Outcome::Val(pos)) = (fds.of(fd), o) {
                    let reported = *whence != libc::SEEK_SET;
                    // Entries are numbered below the end; past it, both count alike.
                    if reported && listed.contains(&d) && (3..END).contains(pos) {
                        found.push(i);
                    }
                    if *pos >= 3 && *pos != END {
                        unreturned.insert(d);
                    } else {
                        unreturned.remove(&d);
                    }
                }
            }
            Op::Getdents(fd) | Op::GetdentsOnce { fd, .. } => {
                if let Some(d) = fds.of(fd) {
                    if !matches!(o, Outcome::Err(_)) {
                        listed.insert(d);
                    }
                    if unreturned.contains(&d) {
                        found.push(i);
                        if matches!(op, Op::Getdents(_)) {
                            unreturned.remove(&d);
                        }
                    }
                }
            }
            _ => {}
        }
        fds.step(op, o);
    }
    found
}

/// Why a listing resumed after the directory tree changed may differ (a step-level rule).
pub const CHANGED_DURING_LISTING: &str =
    "scalable design only: a getdents64 that resumes a listing after a file was created \
     or removed since the listing began; POSIX leaves unspecified whether such an entry is \
     returned, and which ones are depends on the order (hash order here, newest first on \
     Linux), see getdents/seek-to-positions";

/// The `getdents64` steps of `script` that resume a listing after the namespace changed
/// since the listing began, judged from outcomes `out` (as for
/// [`unreturned_position_reads`]). A listing begins at the description's first
/// `getdents64` (or its first after a seek to 0, `rewinddir`); a change is a step that
/// succeeded in creating, removing or renaming a name anywhere (not only in that
/// directory: the rule is kept simple, and a listing of another directory is not changed
/// by it anyway, so it agrees there).
pub fn listings_resumed_after_changes(script: &Script, out: &[Outcome]) -> Vec<usize> {
    let mut fds = Descriptions::default();
    // Descriptions in the middle of a listing, and whether the namespace changed since.
    let mut listing: HashMap<usize, bool> = HashMap::new();
    let mut found = Vec::new();
    for (i, op) in script.steps.iter().enumerate() {
        let Some(o) = out.get(i) else { break };
        let ok = !matches!(o, Outcome::Err(_));
        let changes = match op {
            Op::Open { flags, .. } => flags & libc::O_CREAT != 0,
            Op::Mkdir { .. }
            | Op::Unlink { .. }
            | Op::Rename { .. }
            | Op::Link { .. }
            | Op::Symlink { .. }
            | Op::Mkfifo { .. } => true,
            _ => false,
        };
        if changes && ok {
            listing.values_mut().for_each(|changed| *changed = true);
        }
        match op {
            Op::Lseek { fd, .. } => {
                if let (Some(d), Outcome::Val(0)) = (fds.of(fd), o) {
                    listing.remove(&d);
                }
            }
            Op::Getdents(fd) | Op::GetdentsOnce { fd, .. } => {
                if let Some(d) = fds.of(fd) {
                    match listing.get(&d) {
                        Some(true) => found.push(i),
                        Some(false) => {}
                        None if ok => {
                            listing.insert(d, false);
                        }
                        None => {}
                    }
                }
            }
            _ => {}
        }
        fds.step(op, o);
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use libc::{O_DIRECTORY, O_RDONLY, SEEK_CUR, SEEK_SET};

    /// Outcomes for `s`: `Fd(n)` for the k-th fd-producing step (n = 3 + k), `Val` of the
    /// requested offset for a seek, `Ok` otherwise (what a target would return).
    fn outcomes(s: &Script) -> Vec<Outcome> {
        let mut next = 3;
        s.steps
            .iter()
            .map(|op| match op {
                Op::Open { .. } | Op::Dup { .. } => {
                    next += 1;
                    Outcome::Fd(next - 1)
                }
                Op::Lseek { off, .. } => Outcome::Val(*off),
                _ => Outcome::Ok,
            })
            .collect()
    }

    #[test]
    fn a_listing_after_a_seek_to_a_number_never_returned_is_covered() {
        let mut s = Script::new("t");
        s.mkdir("d", 0o755); // 0
        let d = s.open("d", O_RDONLY | O_DIRECTORY, 0); // 1
        s.lseek(d, 4, SEEK_SET).getdents(d); // 2, 3
        s.getdents(d); // 4: from the end, common to both
        assert_eq!(unreturned_position_reads(&s, &outcomes(&s)), vec![3]);
    }

    #[test]
    fn the_rule_follows_the_description_through_dup_and_stops_at_a_common_position() {
        let mut s = Script::new("t");
        let d = s.open("d", O_RDONLY | O_DIRECTORY, 0); // 0
        let e = s.dup(d); // 1
        let other = s.open("d", O_RDONLY | O_DIRECTORY, 0); // 2
        s.lseek(d, 5, SEEK_SET); // 3
        s.getdents_once(other, 64); // 4: another description
        s.getdents_once(e, 64); // 5: shares d's position
        s.lseek(e, 2, SEEK_SET).getdents(d); // 6, 7: position 2 is common
        s.lseek(d, i64::from(i32::MAX), SEEK_SET).getdents(d); // 8, 9: so is the end
        s.lseek(d, 3, SEEK_SET).close(d).getdents(e); // 10, 11, 12: e still holds it
        assert_eq!(unreturned_position_reads(&s, &outcomes(&s)), vec![5, 12]);
    }

    /// The wide soak run's find: two listings into a buffer with room for one entry stop
    /// at the first entry, whose number `lseek(fd, 0, SEEK_CUR)` then reports (through
    /// another descriptor of the same description); a `SEEK_SET` reports what it was given.
    #[test]
    fn a_position_reported_after_a_partial_listing_is_covered() {
        let mut s = Script::new("t");
        let d = s.open("d", O_RDONLY | O_DIRECTORY, 0); // 0
        let e = s.dup(d); // 1
        s.lseek(d, 0, SEEK_CUR); // 2: before any listing
        s.getdents_once(e, 40).getdents_once(e, 40); // 3, 4
        s.lseek(d, 0, SEEK_CUR); // 5: at an entry
        s.lseek(d, 5, SEEK_SET); // 6: what it was given
        s.lseek(d, 0, SEEK_CUR); // 7
        let mut out = outcomes(&s);
        out[5] = Outcome::Val(6);
        out[7] = Outcome::Val(5);
        assert_eq!(unreturned_position_reads(&s, &out), vec![5, 7]);
    }

    /// The wide soak run's find: a listing stopped at `d`'s first entry, then `mkdir d/e`,
    /// then the listing resumed: Linux (newest first) does not return `e`, the hashed
    /// directory may. A rewind begins a new listing; a failed create changes nothing.
    #[test]
    fn a_listing_resumed_after_a_create_is_covered() {
        let mut s = Script::new("t");
        let d = s.open("d", O_RDONLY | O_DIRECTORY, 0); // 0
        s.getdents_once(d, 40); // 1: the listing begins
        s.getdents_once(d, 40).mkdir("d/e", 0o755); // 2, 3
        s.getdents_once(d, 200); // 4: resumed after a change
        s.lseek(d, 0, SEEK_SET).getdents_once(d, 200); // 5, 6: a new listing
        s.mkdir("d/f", 0o755).getdents(d); // 7, 8: resumed after a change
        let mut out = outcomes(&s);
        out[5] = Outcome::Val(0);
        assert_eq!(listings_resumed_after_changes(&s, &out), vec![4, 8]);
        out[7] = Outcome::Err(libc::EEXIST);
        assert_eq!(listings_resumed_after_changes(&s, &out), vec![4]);
    }

    /// The soak run's find: a listing to the end, `lseek(fd, 1, SEEK_CUR)` (the end + 1),
    /// and a listing, which Linux resumes at its newest entry and scalevfs at nothing.
    #[test]
    fn a_seek_past_the_end_counts_as_a_number_never_returned() {
        let mut s = Script::new("t");
        let d = s.open("d", O_RDONLY | O_DIRECTORY, 0); // 0
        s.getdents(d); // 1
        s.lseek(d, i64::from(i32::MAX) + 1, SEEK_SET).getdents(d); // 2, 3
        assert_eq!(unreturned_position_reads(&s, &outcomes(&s)), vec![3]);
    }
}
