//! Tracing under valgrind's lackey: the child side (`--trace-child`), the streaming parser
//! of lackey's output, and the driver that runs one against the other.
//!
//! The child starts its two worker threads, then prints on stdout (the side channel) the
//! address of [`MARKERS`], its load bias, its workers' stacks and its memory map, and
//! waits on stdin for the list of case ids. The driver learns the marker address before
//! sending the list, so every marker store of a case comes after the parser knows what to
//! look for. lackey writes to a pipe (`--log-fd`); the parser reads it in large chunks and
//! looks at each line's bytes in place: instruction lines (`I  addr,size`) only update "the
//! current instruction" inside a window, data lines (` L`/` S`/` M addr,size`) are
//! recorded per 64-byte line inside a window, and stores are compared with the marker
//! line everywhere.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::fd::{FromRawFd, OwnedFd};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::catalogue::Case;
use crate::exec::{self, Event, Object, Order, Stack, Workers, MARKERS};
use crate::Selected;

/// The cache-line size the checker assumes.
pub const LINE: u64 = 64;

/// How many distinct reading (and writing) instructions are remembered per line and phase.
const MAX_INSNS: usize = 4;

/// What one phase did to one cache line.
#[derive(Clone, Debug, Default)]
pub struct LineUse {
    /// Loaded from.
    pub read: bool,
    /// Stored to.
    pub write: bool,
    /// Instructions that touched it (the first few readers and writers), with whether
    /// each wrote.
    pub insns: Vec<(u64, bool)>,
}

/// The lines one phase (one call) touched.
pub type Phase = HashMap<u64, LineUse>;

/// The trace of one case: the lines of call A and of call B.
#[derive(Default)]
pub struct CaseTrace {
    /// Call A's (index 0) and call B's (index 1) lines.
    pub phases: [Phase; 2],
    /// Number of data accesses in each phase.
    pub accesses: [u64; 2],
    /// Number of instructions in each phase.
    pub instructions: [u64; 2],
}

/// The child's address space, as it told the driver.
#[derive(Clone, Debug, Default)]
pub struct ChildInfo {
    /// The address of the marker line.
    pub markers: u64,
    /// The executable's load bias (runtime address minus link-time address).
    pub bias: u64,
    /// Both workers' stacks.
    pub stacks: [Stack; 2],
    /// `/proc/self/maps` lines of file mappings: (lo, hi, offset, path).
    pub maps: Vec<(u64, u64, u64, String)>,
}

/// The parser's state between chunks.
struct Parser {
    markers: Arc<AtomicU64>,
    base: u64,
    phase: Option<usize>,
    insn: u64,
    cases: Vec<CaseTrace>,
}

fn hex(s: &[u8]) -> u64 {
    let mut v = 0u64;
    for &c in s {
        let d = match c {
            b'0'..=b'9' => c - b'0',
            b'a'..=b'f' => c - b'a' + 10,
            b'A'..=b'F' => c - b'A' + 10,
            _ => break,
        };
        v = (v << 4) | u64::from(d);
    }
    v
}

/// The trace pipe's size (the default `pipe-max-size`).
const PIPE_SIZE: libc::c_int = 1 << 20;
/// A read shorter than this means the parser caught up with lackey ...
const SHORT_READ: usize = 64 << 10;
/// ... and it pauses this long before the next read, so the pipe fills.
const READ_PAUSE: std::time::Duration = std::time::Duration::from_millis(2);

/// Address and size of a lackey line `?? addr,size` (the address starts at byte 3).
fn addr_size(line: &[u8]) -> (u64, u64) {
    let rest = line.get(3..).unwrap_or(&[]);
    match memchr::memchr(b',', rest) {
        Some(c) => (hex(&rest[..c]), {
            let mut n = 0u64;
            for &d in &rest[c + 1..] {
                if !d.is_ascii_digit() {
                    break;
                }
                n = n * 10 + u64::from(d - b'0');
            }
            n
        }),
        None => (hex(rest), 1),
    }
}

impl Parser {
    fn line(&mut self, l: &[u8]) {
        if l.len() < 4 {
            return;
        }
        match (l[0], l[1]) {
            (b'I', _) if self.phase.is_some() => {
                self.insn = addr_size(l).0;
                if let (Some(p), Some(c)) = (self.phase, self.cases.last_mut()) {
                    c.instructions[p] += 1;
                }
            }
            (b' ', kind @ (b'L' | b'S' | b'M')) => {
                let store = kind != b'L';
                if !store && self.phase.is_none() {
                    return;
                }
                let (addr, size) = addr_size(l);
                if store && self.base != 0 && addr >= self.base && addr < self.base + LINE {
                    self.event((addr - self.base) / 8);
                    return;
                }
                let Some(p) = self.phase else { return };
                let Some(case) = self.cases.last_mut() else {
                    return;
                };
                case.accesses[p] += 1;
                let first = addr / LINE;
                let last = (addr + size.max(1) - 1) / LINE;
                for line in first..=last {
                    let u = case.phases[p].entry(line * LINE).or_default();
                    if kind != b'S' {
                        u.read = true;
                    }
                    if store {
                        u.write = true;
                    }
                    // Up to MAX_INSNS readers and as many writers: a line read by many
                    // instructions must still name the one that wrote it.
                    let same_kind = u.insns.iter().filter(|&&(_, w)| w == store).count();
                    if same_kind < MAX_INSNS
                        && !u.insns.iter().any(|&(i, w)| i == self.insn && w == store)
                    {
                        u.insns.push((self.insn, store));
                    }
                }
            }
            _ => {}
        }
    }

    fn event(&mut self, slot: u64) {
        match slot {
            s if s == Event::CaseBegin as u64 => {
                self.cases.push(CaseTrace::default());
                self.phase = None;
            }
            s if s == Event::ABegin as u64 => self.phase = Some(0),
            s if s == Event::BBegin as u64 => self.phase = Some(1),
            _ => self.phase = None,
        }
    }

    /// Parses everything `r` gives until end of file, pausing [`READ_PAUSE`] after a read
    /// shorter than [`SHORT_READ`].
    fn run(mut self, mut r: impl Read) -> std::io::Result<Vec<CaseTrace>> {
        let mut buf = vec![0u8; 4 << 20];
        let mut have = 0;
        loop {
            let n = r.read(&mut buf[have..])?;
            if self.base == 0 {
                // Checked after each read: a chunk holding a marker store was written after
                // the driver stored the address (see the module docs).
                self.base = self.markers.load(Ordering::Acquire);
            }
            if n == 0 {
                break;
            }
            if n < SHORT_READ {
                // lackey writes every trace line with a write(2) of its own: a reader
                // waiting in read(2) is woken by each, a cross-CPU wake-up per line, and
                // that was most of the checker's time (sys time 2.5x user). Letting the
                // pipe fill for a while instead (at about 12 MB/s, 2 ms is about 24 KB; the
                // pipe holds 1 MiB) makes it one wake-up per read: the same trace, read in
                // half the time.
                std::thread::sleep(READ_PAUSE);
            }
            have += n;
            let mut start = 0;
            for nl in memchr::memchr_iter(b'\n', &buf[..have]) {
                let (s, e) = (start, nl);
                start = nl + 1;
                self.line(&buf[s..e]);
            }
            buf.copy_within(start..have, 0);
            have -= start;
            if have == buf.len() {
                // A line longer than the buffer: not lackey's; drop it.
                have = 0;
            }
        }
        Ok(self.cases)
    }
}

fn load_bias() -> u64 {
    extern "C" fn first(
        info: *mut libc::dl_phdr_info,
        _size: libc::size_t,
        data: *mut libc::c_void,
    ) -> libc::c_int {
        // SAFETY: dl_iterate_phdr passes a valid info pointer, and `data` is the `u64` we
        // passed below.
        unsafe {
            *(data as *mut u64) = (*info).dlpi_addr;
        }
        1 // The first object is the executable; stop.
    }
    let mut bias = 0u64;
    // SAFETY: the callback only writes the u64 behind `data`, which outlives the call.
    unsafe {
        libc::dl_iterate_phdr(Some(first), &mut bias as *mut u64 as *mut libc::c_void);
    }
    bias
}

/// The child: `scalevfs commute --trace-child`, run under valgrind by [`trace`].
pub fn child(cases: &[Case]) -> Result<(), String> {
    let w = Workers::start();
    let out = std::io::stdout();
    let mut out = out.lock();
    let io = |e: std::io::Error| e.to_string();
    writeln!(
        out,
        "hello {:x} {:x} {:x} {:x} {:x} {:x}",
        MARKERS.base(),
        load_bias(),
        w.stacks[0].lo,
        w.stacks[0].hi,
        w.stacks[1].lo,
        w.stacks[1].hi
    )
    .map_err(io)?;
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap_or_default();
    for l in maps.lines() {
        let f: Vec<&str> = l.split_whitespace().collect();
        if f.len() >= 6 && f[5].starts_with('/') {
            if let Some((lo, hi)) = f[0].split_once('-') {
                writeln!(out, "map {lo} {hi} {} {}", f[2], f[5]).map_err(io)?;
            }
        }
    }
    writeln!(out, "ready").map_err(io)?;
    out.flush().map_err(io)?;
    let mut ids = Vec::new();
    for l in std::io::stdin().lock().lines() {
        let l = l.map_err(io)?;
        if l == "go" {
            break;
        }
        ids.push(l);
    }
    let vfs = crate::world::new_vfs()?;
    for (tag, id) in ids.iter().enumerate() {
        let Some((case, form)) = crate::find(cases, id) else {
            exec::mark(Event::CaseBegin); // Keeps the trace's cases in step with the ids.
            writeln!(out, "done {id} err unknown case").map_err(io)?;
            continue;
        };
        let place = exec::Place {
            vfs: Some(vfs.clone()),
            tag,
        };
        match exec::run_case(&w, case, form, Order::AB, &place, false) {
            Ok(o) => {
                for ob in &o.objects {
                    writeln!(out, "obj {:x} {:x} {}", ob.addr, ob.size, ob.name).map_err(io)?;
                }
                writeln!(out, "done {id} ok")
            }
            Err(e) => writeln!(out, "done {id} err {e}"),
        }
        .map_err(io)?;
        out.flush().map_err(io)?;
    }
    writeln!(out, "end").map_err(io)?;
    out.flush().map_err(io)
}

/// Says whether valgrind can be run, with the fix if not.
pub fn valgrind_available() -> Result<(), String> {
    match Command::new("valgrind")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
    {
        Ok(s) if s.success() => Ok(()),
        _ => Err(
            "valgrind not found: the checker traces memory accesses with valgrind's \
                  lackey tool; install it with `apt-get install valgrind`"
                .into(),
        ),
    }
}

/// One traced case: its id, the trace (or why there is none).
pub struct Traced {
    /// `name@form`.
    pub id: String,
    /// Its well-known objects.
    pub objects: Vec<Object>,
    /// Its trace.
    pub trace: Result<CaseTrace, String>,
}

/// Runs the selected cases under `valgrind --tool=lackey --trace-mem=yes` in one child
/// process and returns each case's trace, with what the child told about itself.
pub fn trace(sel: &[Selected], fixtures: bool) -> Result<(ChildInfo, Vec<Traced>), String> {
    valgrind_available()?;
    let started = std::time::Instant::now();
    let exe = std::env::current_exe().map_err(|e| format!("current_exe: {e}"))?;
    let mut fds = [0; 2];
    // SAFETY: pipe2 writes two descriptors into the array.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), 0) } != 0 {
        return Err(format!("pipe2: {}", std::io::Error::last_os_error()));
    }
    // SAFETY: both descriptors were just created and are owned by nobody else.
    let (rd, wr) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    // The read end must not leak into the child (or EOF never comes).
    // SAFETY: fcntl on a descriptor we own.
    unsafe { libc::fcntl(fds[0], libc::F_SETFD, libc::FD_CLOEXEC) };
    // A larger pipe lets the parser read in batches (see `Parser::run`); where the system's
    // pipe-max-size is lower, the call fails and the default 64 KiB serves, more slowly.
    // SAFETY: fcntl on a descriptor we own.
    unsafe { libc::fcntl(fds[0], libc::F_SETPIPE_SZ, PIPE_SIZE) };
    let mut cmd = Command::new("valgrind");
    cmd.arg("--tool=lackey")
        .arg("--trace-mem=yes")
        .arg(format!("--log-fd={}", fds[1]))
        .arg(&exe)
        .args(["commute", "--trace-child"]);
    if fixtures {
        cmd.arg("--fixtures");
    }
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| format!("valgrind: {e}"))?;
    drop(wr);
    let marker = Arc::new(AtomicU64::new(0));
    let parser = Parser {
        markers: marker.clone(),
        base: 0,
        phase: None,
        insn: 0,
        cases: Vec::new(),
    };
    let reader = std::fs::File::from(rd);
    let parse = std::thread::spawn(move || parser.run(reader));

    let mut stdin = child.stdin.take().expect("piped stdin");
    let stdout = BufReader::new(child.stdout.take().expect("piped stdout"));
    let mut info = ChildInfo::default();
    let mut done: Vec<(String, Result<(), String>, Vec<Object>)> = Vec::new();
    let mut objects = Vec::new();
    let mut ended = false;
    for l in stdout.lines() {
        let l = l.map_err(|e| e.to_string())?;
        let f: Vec<&str> = l.splitn(4, ' ').collect();
        match f[0] {
            "hello" => {
                let v: Vec<u64> = l.split(' ').skip(1).map(|x| hex(x.as_bytes())).collect();
                info.markers = v[0];
                info.bias = v[1];
                info.stacks = [
                    Stack {
                        lo: v[2] as usize,
                        hi: v[3] as usize,
                    },
                    Stack {
                        lo: v[4] as usize,
                        hi: v[5] as usize,
                    },
                ];
            }
            "map" if f.len() == 4 => {
                let g: Vec<&str> = l.split(' ').collect();
                info.maps.push((
                    hex(g[1].as_bytes()),
                    hex(g[2].as_bytes()),
                    hex(g[3].as_bytes()),
                    g[4..].join(" "),
                ));
            }
            "ready" => {
                marker.store(info.markers, Ordering::Release);
                let mut list = String::new();
                for s in sel {
                    list.push_str(&s.id);
                    list.push('\n');
                }
                list.push_str("go\n");
                stdin
                    .write_all(list.as_bytes())
                    .and_then(|()| stdin.flush())
                    .map_err(|e| format!("writing to the traced child: {e}"))?;
            }
            "done" if f.len() >= 3 => {
                let r = if f[2] == "ok" {
                    Ok(())
                } else {
                    Err(f.get(3).unwrap_or(&"").to_string())
                };
                done.push((f[1].to_string(), r, std::mem::take(&mut objects)));
                if done.len().is_multiple_of(50) {
                    eprintln!(
                        "scalevfs commute: traced {}/{} ({:.0} s)",
                        done.len(),
                        sel.len(),
                        started.elapsed().as_secs_f64()
                    );
                }
            }
            "obj" if f.len() == 4 => objects.push(Object {
                addr: hex(f[1].as_bytes()),
                size: hex(f[2].as_bytes()),
                name: f[3].to_string(),
            }),
            "end" => ended = true,
            _ => {}
        }
    }
    let status = child.wait().map_err(|e| e.to_string())?;
    let traces = parse
        .join()
        .map_err(|_| "the trace parser panicked".to_string())?
        .map_err(|e| format!("reading lackey's output: {e}"))?;
    if !ended {
        return Err(format!(
            "the traced child stopped early ({status}) after {} of {} cases",
            done.len(),
            sel.len()
        ));
    }
    if traces.len() != done.len() {
        return Err(format!(
            "{} case markers in the trace for {} cases run",
            traces.len(),
            done.len()
        ));
    }
    let out = done
        .into_iter()
        .zip(traces)
        .map(|((id, r, objects), t)| Traced {
            id,
            objects,
            trace: r.map(|()| t),
        })
        .collect();
    Ok((info, out))
}

/// A conflicting line: what each phase did to it.
#[derive(Clone, Debug)]
pub struct Conflict {
    /// The line's address.
    pub line: u64,
    /// Call A's use.
    pub a: LineUse,
    /// Call B's use.
    pub b: LineUse,
}

/// The lines one call writes and the other reads or writes, outside both workers' stacks
/// and the marker line; sorted by address.
pub fn conflicts(t: &CaseTrace, info: &ChildInfo) -> Vec<Conflict> {
    let excluded = |line: u64| {
        line == info.markers / LINE * LINE
            || info
                .stacks
                .iter()
                .any(|s| line + LINE > s.lo as u64 && line < s.hi as u64)
    };
    let mut out: Vec<Conflict> = t.phases[0]
        .iter()
        .filter_map(|(&line, a)| {
            let b = t.phases[1].get(&line)?;
            let clash = (a.write && (b.read || b.write)) || (b.write && a.read);
            (clash && !excluded(line)).then(|| Conflict {
                line,
                a: a.clone(),
                b: b.clone(),
            })
        })
        .collect();
    out.sort_by_key(|c| c.line);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_lackey_lines_and_windows() {
        let text = concat!(
            "==1== Lackey\n",
            "I  00400000,3\n",
            " L 00001000,8\n",
            " S 00002000,8\n",
            " S 00002008,8\n",
            "I  00400010,4\n",
            " M 00003000,8\n",
            " S 00002010,8\n",
            "I  00400020,2\n",
            " S 00001000,8\n",
            " S 00002018,8\n",
            "I  00400030,2\n",
            " L 0000103c,8\n",
            " S 00002020,8\n",
        )
        .as_bytes();
        let p = Parser {
            markers: Arc::new(AtomicU64::new(0x2000)),
            base: 0,
            phase: None,
            insn: 0,
            cases: Vec::new(),
        };
        let cases = p.run(text).unwrap();
        assert_eq!(cases.len(), 1);
        let c = &cases[0];
        // Phase A: the modify at 0x3000 (instruction 0x400010).
        let a = &c.phases[0][&0x3000];
        assert!(a.read && a.write);
        assert_eq!(a.insns, vec![(0x400010, true)]);
        assert_eq!(c.phases[0].len(), 1);
        // Phase B: the 8-byte load at 0x103c spans two lines.
        assert!(c.phases[1][&0x1000].read && !c.phases[1][&0x1000].write);
        assert!(c.phases[1][&0x1040].read);
        assert_eq!(c.instructions, [1, 1]);
        // The store at 0x1000 between the windows was not recorded.
        let info = ChildInfo {
            markers: 0x2000,
            ..ChildInfo::default()
        };
        assert!(conflicts(c, &info).is_empty());
    }
}
