//! Running a case: two persistent worker threads (thread 1 and thread 2), the warm-up, the
//! measured calls between marker stores, and the native commutativity check.

use std::cell::RefCell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};

use scalevfs::Vfs;

use crate::catalogue::{Case, Form, Scratch};
use crate::world::{Base, Env, World};

/// Phase events, each a store to its own slot of [`MARKERS`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(usize)]
pub enum Event {
    /// A case starts (its setup follows).
    CaseBegin = 0,
    /// Thread 1 starts call A.
    ABegin = 1,
    /// Call A returned.
    AEnd = 2,
    /// Thread 2 starts call B.
    BBegin = 3,
    /// Call B returned.
    BEnd = 4,
}

/// The marker slots: one 64-byte line, slot `k` stored to for [`Event`] `k`. Lackey prints
/// ` S <address>,8` for each store, so the address of the store says which event it is.
#[repr(C, align(64))]
pub struct Markers {
    slots: [AtomicU64; 8],
}

/// The markers of this process.
pub static MARKERS: Markers = Markers {
    slots: [const { AtomicU64::new(0) }; 8],
};

impl Markers {
    /// The address of slot 0 (the line of all slots).
    pub fn base(&self) -> usize {
        self.slots.as_ptr() as usize
    }
}

/// Records `ev` in the memory trace: one plain 8-byte store to its slot.
#[inline(never)]
pub fn mark(ev: Event) {
    // Release: a plain `mov` on x86-64 (SeqCst would be an `xchg`, a load and a store).
    MARKERS.slots[ev as usize].store(1, Ordering::Release);
}

type Job = Box<dyn FnOnce() + Send>;

/// A worker's mailbox: a job to run, and whether it ran. A mutex and condition variable,
/// not a channel: a waiting thread blocks in `futex` at once instead of spinning, so under
/// valgrind (which runs one thread at a time) no waiting thread executes inside another
/// thread's measured window.
#[derive(Default)]
struct Mailbox {
    job: Mutex<(Option<Job>, bool)>,
    cv: Condvar,
}

/// A thread's stack, `[lo, hi)`.
#[derive(Clone, Copy, Debug, Default)]
pub struct Stack {
    /// Lowest address.
    pub lo: usize,
    /// One past the highest.
    pub hi: usize,
}

fn own_stack() -> Stack {
    // SAFETY: pthread_attr_t is plain data that pthread_getattr_np initializes; it is
    // destroyed after use; the out-pointers point to locals.
    unsafe {
        let mut attr: libc::pthread_attr_t = std::mem::zeroed();
        if libc::pthread_getattr_np(libc::pthread_self(), &mut attr) != 0 {
            return Stack::default();
        }
        let mut addr: *mut libc::c_void = std::ptr::null_mut();
        let mut size = 0usize;
        let ok = libc::pthread_attr_getstack(&attr, &mut addr, &mut size) == 0;
        libc::pthread_attr_destroy(&mut attr);
        if !ok {
            return Stack::default();
        }
        Stack {
            lo: addr as usize,
            hi: addr as usize + size,
        }
    }
}

fn pin_to(cpu: usize) {
    // A diagnostic: `SCALEVFS_COMMUTE_PIN=none` (no override, no affinity: under valgrind
    // both threads then share every per-CPU shard; compare mkdir/diff-dirs) or
    // `=override` (the override alone).
    let how = std::env::var("SCALEVFS_COMMUTE_PIN").unwrap_or_default();
    if how == "none" {
        return;
    }
    scalevfs_primitives::cpu::set_cpu_override(Some(cpu));
    if how == "override" {
        return;
    }
    // Pin for real too where the CPU exists: valgrind runs each guest thread on a kernel
    // thread (one at a time), so `getcpu` then differs too; the per-CPU logic follows the
    // override either way.
    // SAFETY: cpu_set_t is plain data; CPU_SET writes inside it; sched_setaffinity reads it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

/// Thread 1 and thread 2: each pinned (CPU override 0 and 1), running jobs in turn while
/// the other waits.
pub struct Workers {
    boxes: Vec<Arc<Mailbox>>,
    /// The workers' stacks (excluded from the trace).
    pub stacks: [Stack; 2],
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Workers {
    /// Starts both threads.
    pub fn start() -> Workers {
        let mut boxes = Vec::new();
        let mut stacks = [Stack::default(); 2];
        for (t, slot) in stacks.iter_mut().enumerate() {
            let mb = Arc::new(Mailbox::default());
            let out = Arc::new(Mutex::new(None));
            let (m, o) = (mb.clone(), out.clone());
            std::thread::Builder::new()
                .name(format!("commute-{}", t + 1))
                .spawn(move || {
                    pin_to(t);
                    *lock(&o) = Some(own_stack());
                    m.cv.notify_all();
                    loop {
                        let job = {
                            let mut g = lock(&m.job);
                            loop {
                                if let Some(j) = g.0.take() {
                                    break j;
                                }
                                g = m.cv.wait(g).unwrap_or_else(|e| e.into_inner());
                            }
                        };
                        job();
                        lock(&m.job).1 = true;
                        m.cv.notify_all();
                    }
                })
                .expect("spawning a worker thread");
            let mut g = lock(&out);
            while g.is_none() {
                g = mb.cv.wait(g).unwrap_or_else(|e| e.into_inner());
            }
            *slot = g.take().expect("the worker reported its stack");
            boxes.push(mb);
        }
        Workers { boxes, stacks }
    }

    /// Runs `f` on thread `t` (0 or 1) and waits for its result; the other thread waits.
    pub fn run<R: Send + 'static>(&self, t: usize, f: impl FnOnce() -> R + Send + 'static) -> R {
        let out = Arc::new(Mutex::new(None));
        let o = out.clone();
        let m = &self.boxes[t];
        {
            let mut g = lock(&m.job);
            g.0 = Some(Box::new(move || {
                let r = f();
                *lock(&o) = Some(r);
            }));
            g.1 = false;
        }
        m.cv.notify_all();
        let mut g = lock(&m.job);
        while !g.1 {
            g = m.cv.wait(g).unwrap_or_else(|e| e.into_inner());
        }
        drop(g);
        let r = lock(&out).take();
        r.expect("the worker ran the job")
    }
}

/// Which call runs first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Order {
    /// A on thread 1, then B on thread 2.
    AB,
    /// B on thread 2, then A on thread 1.
    BA,
}

/// What one run of a case gave.
pub struct Outcome {
    /// A's result, rendered.
    pub a: String,
    /// B's result, rendered.
    pub b: String,
    /// The canonical state afterwards (only if asked for).
    pub dump: Option<String>,
    /// Well-known objects of the case (see [`objects`]); only in a shared tree.
    pub objects: Vec<Object>,
}

/// A well-known object of a case: its name, address and size, to name the conflicting
/// lines that fall in it.
#[derive(Clone, Debug)]
pub struct Object {
    /// E.g. `Process 1`, `open file of thread 2`.
    pub name: String,
    /// Its address in the process that ran the case.
    pub addr: u64,
    /// Its size in bytes (the object itself, not what it points to).
    pub size: u64,
}

fn object<T: ?Sized>(name: impl Into<String>, r: &T) -> Object {
    Object {
        name: name.into(),
        addr: r as *const T as *const u8 as u64,
        size: std::mem::size_of_val(r) as u64,
    }
}

/// The objects of `world` that the public API shows: the tree's top-level structures
/// (`Vfs`, its `VfsCore`, the lock manager, the epoll context), the processes, and the
/// open file descriptions behind each thread's descriptors.
pub fn objects(world: &World) -> Vec<Object> {
    let b = &world.base;
    let mut out = vec![
        object("Vfs", &*b.vfs),
        object("VfsCore", &**b.vfs.core()),
        object("LockManager", b.vfs.locks()),
        object("EpollContext", &**b.vfs.epoll_context()),
    ];
    if Arc::ptr_eq(&b.procs[0], &b.procs[1]) {
        out.push(object("Process (shared)", &*b.procs[0]));
    } else {
        out.push(object("Process 1", &*b.procs[0]));
        out.push(object("Process 2", &*b.procs[1]));
    }
    for e in &world.env {
        let fds = [
            ("file", e.fd),
            ("directory", e.dfd),
            ("eventfd", e.efd),
            ("epoll", e.ep),
            ("pipe read end", e.pipe[0]),
            ("pipe write end", e.pipe[1]),
            ("kernfs attribute", e.kfd),
        ];
        for (what, fd) in fds {
            if fd < 0 {
                continue;
            }
            if let Ok(f) = e.p.file(fd) {
                out.push(object(format!("open {what} of thread {}", e.t + 1), &*f));
            }
        }
    }
    out
}

/// Where a case runs: in a fresh tree (the native check), or in one tree shared by the
/// cases of a traced run (each case in its own directories, `tag` apart), where building
/// and tearing down a tree per case would dominate the trace.
#[derive(Clone, Default)]
pub struct Place {
    /// The shared tree, if any.
    pub vfs: Option<Arc<Vfs>>,
    /// The case's directories are `/w<tag>` and `/c<tag>`.
    pub tag: usize,
}

/// Builds the case's world (the shared directories here; each thread's objects on that
/// thread) and runs the warm-up: A on thread 1's and B on thread 2's warm-up objects.
pub fn build(w: &Workers, case: &Case, form: Form, place: &Place) -> Result<Arc<World>, String> {
    let base = Arc::new(Base::new(
        place.vfs.clone(),
        place.tag,
        case.scenario,
        case.needs(),
        form == Form::Shared,
    )?);
    let mut envs = Vec::new();
    for t in 0..2 {
        let b = base.clone();
        let run = if t == 0 { case.a.run } else { case.b.run };
        envs.push(w.run(t, move || {
            let warm = b.make_env(true, t)?;
            let env = b.make_env(false, t)?;
            with_scratch(|s| run(&warm, s)).ok();
            // Start the measured call with this thread's deferred-free bag empty, as in a
            // fresh process (see "Periodic work" in the crate docs).
            scalevfs_primitives::epoch::flush();
            Ok::<_, String>((warm, env))
        })?);
    }
    let base = Arc::try_unwrap(base).map_err(|_| "setup kept a reference".to_string())?;
    let [(w0, e0), (w1, e1)]: [(Env, Env); 2] = envs
        .try_into()
        .map_err(|_| "two environments".to_string())?;
    Ok(Arc::new(World {
        base,
        warm: [w0, w1],
        env: [e0, e1],
    }))
}

thread_local! {
    /// The thread's scratch buffers, allocated once (a fresh zeroed buffer per call would
    /// be a `rep stosb` memset that valgrind traces byte by byte).
    static SCRATCH: RefCell<Scratch> = RefCell::new(Scratch::default());
}

/// Runs `f` with the thread's scratch buffers, outputs cleared.
fn with_scratch<R>(f: impl FnOnce(&mut Scratch) -> R) -> R {
    SCRATCH.with(|s| {
        let mut s = s.borrow_mut();
        s.n = 0;
        s.v = [0; 4];
        f(&mut s)
    })
}

/// Call A (`t` = 0, thread 1) or B (`t` = 1, thread 2) on the thread's measured objects,
/// between its markers.
fn call(w: &Workers, world: &Arc<World>, case: &Case, t: usize) -> String {
    let world = world.clone();
    let (run, begin, end) = if t == 0 {
        (case.a.run, Event::ABegin, Event::AEnd)
    } else {
        (case.b.run, Event::BBegin, Event::BEnd)
    };
    w.run(t, move || {
        let env = &world.env[t];
        with_scratch(|s| {
            mark(begin);
            let r = run(env, s);
            mark(end);
            s.render(&r)
        })
    })
}

/// Runs `case` in `form`: setup and warm-up ([`build`]), then A and B in `order`, each
/// between its markers; the state dump afterwards if `dump`.
pub fn run_case(
    w: &Workers,
    case: &Case,
    form: Form,
    order: Order,
    place: &Place,
    dump: bool,
) -> Result<Outcome, String> {
    mark(Event::CaseBegin);
    let world = build(w, case, form, place)?;
    let (a, b) = match order {
        Order::AB => {
            let a = call(w, &world, case, 0);
            (a, call(w, &world, case, 1))
        }
        Order::BA => {
            let b = call(w, &world, case, 1);
            (call(w, &world, case, 0), b)
        }
    };
    let dump = dump.then(|| world.dump());
    let objects = if place.vfs.is_some() {
        objects(&world)
    } else {
        Vec::new()
    };
    // Drop the world here, outside every window.
    drop(world);
    Ok(Outcome {
        a,
        b,
        dump,
        objects,
    })
}

/// The verdict of the native check.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Commutes {
    /// Both orders gave the same results and the same state.
    Yes,
    /// They did not, or the catalogue says so; why.
    No(String),
}

/// Runs A;B and B;A from identical fresh setups and compares both calls' results and the
/// resulting states.
pub fn check_commutes(w: &Workers, case: &Case, form: Form) -> Result<Commutes, String> {
    if let Some(why) = case.declared_noncommuting(form) {
        return Ok(Commutes::No(why.into()));
    }
    let ab = run_case(w, case, form, Order::AB, &Place::default(), true)?;
    let ba = run_case(w, case, form, Order::BA, &Place::default(), true)?;
    if ab.a != ba.a {
        return Ok(Commutes::No(format!("A returns {} vs {}", ab.a, ba.a)));
    }
    if ab.b != ba.b {
        return Ok(Commutes::No(format!("B returns {} vs {}", ab.b, ba.b)));
    }
    if ab.dump != ba.dump {
        let (x, y) = (ab.dump.unwrap_or_default(), ba.dump.unwrap_or_default());
        let diff = x.lines().zip(y.lines()).find(|(l, r)| l != r).map_or_else(
            || "one state is longer".to_string(),
            |(l, r)| format!("{l} | {r}"),
        );
        return Ok(Commutes::No(format!("states differ: {diff}")));
    }
    Ok(Commutes::Yes)
}
