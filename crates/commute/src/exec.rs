//! Running a case: two persistent worker threads (thread 1 and thread 2), the warm-up, the
//! measured calls between marker stores, and the native commutativity check.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::Arc;

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
    scalevfs_primitives::cpu::set_cpu_override(Some(cpu));
    // Pin for real too where the CPU exists (the per-CPU logic follows the override either
    // way; under valgrind the threads share one host CPU anyway).
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
    tx: Vec<Sender<Job>>,
    /// The workers' stacks (excluded from the trace).
    pub stacks: [Stack; 2],
}

impl Workers {
    /// Starts both threads.
    pub fn start() -> Workers {
        let mut tx = Vec::new();
        let mut stacks = [Stack::default(); 2];
        for (t, slot) in stacks.iter_mut().enumerate() {
            let (jtx, jrx) = channel::<Job>();
            let (stx, srx) = channel();
            std::thread::Builder::new()
                .name(format!("commute-{}", t + 1))
                .spawn(move || {
                    pin_to(t);
                    stx.send(own_stack()).ok();
                    while let Ok(job) = jrx.recv() {
                        job();
                    }
                })
                .expect("spawning a worker thread");
            *slot = srx.recv().expect("worker reports its stack");
            tx.push(jtx);
        }
        Workers { tx, stacks }
    }

    /// Runs `f` on thread `t` (0 or 1) and waits for its result; the other thread waits.
    pub fn run<R: Send + 'static>(&self, t: usize, f: impl FnOnce() -> R + Send + 'static) -> R {
        let (rtx, rrx): (Sender<R>, Receiver<R>) = channel();
        self.tx[t]
            .send(Box::new(move || {
                rtx.send(f()).ok();
            }))
            .expect("worker alive");
        rrx.recv().expect("worker ran the job")
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
}

/// Builds the case's world: shared part here, each thread's objects on that thread.
pub fn build(w: &Workers, case: &Case, form: Form) -> Result<Arc<World>, String> {
    let base = Arc::new(Base::new(
        case.scenario,
        case.needs(),
        form == Form::Shared,
    )?);
    let mut envs: Vec<Env> = Vec::new();
    for prefix in ["/w", "/c"] {
        for t in 0..2 {
            let b = base.clone();
            envs.push(w.run(t, move || b.make_env(prefix, t))?);
        }
    }
    let base = Arc::try_unwrap(base).map_err(|_| "setup kept a reference".to_string())?;
    let mut it = envs.into_iter();
    let mut next = || it.next().expect("four environments");
    let warm = [next(), next()];
    let env = [next(), next()];
    Ok(Arc::new(World { base, warm, env }))
}

/// One call on thread `t`'s objects (of `world.env` or `world.warm`), between the
/// `begin` and `end` markers when given.
fn call(
    w: &Workers,
    world: &Arc<World>,
    case: &Case,
    t: usize,
    warm: bool,
    markers: Option<(Event, Event)>,
) -> String {
    let world = world.clone();
    let op = if t == 0 { case.a } else { case.b };
    let run = op.run;
    w.run(t, move || {
        let env = if warm { &world.warm[t] } else { &world.env[t] };
        let mut s = Scratch::default();
        if let Some((begin, _)) = markers {
            mark(begin);
        }
        let r = run(env, &mut s);
        if let Some((_, end)) = markers {
            mark(end);
        }
        s.render(&r)
    })
}

/// Runs `case` in `form` from a fresh world: the warm-up (A and B on thread 1's and thread
/// 2's warm-up objects), then A and B in `order`, each between its markers; the state
/// dump afterwards if `dump`.
pub fn run_case(
    w: &Workers,
    case: &Case,
    form: Form,
    order: Order,
    dump: bool,
) -> Result<Outcome, String> {
    mark(Event::CaseBegin);
    let world = build(w, case, form)?;
    call(w, &world, case, 0, true, None);
    call(w, &world, case, 1, true, None);
    let (a, b) = match order {
        Order::AB => {
            let a = call(
                w,
                &world,
                case,
                0,
                false,
                Some((Event::ABegin, Event::AEnd)),
            );
            let b = call(
                w,
                &world,
                case,
                1,
                false,
                Some((Event::BBegin, Event::BEnd)),
            );
            (a, b)
        }
        Order::BA => {
            let b = call(
                w,
                &world,
                case,
                1,
                false,
                Some((Event::BBegin, Event::BEnd)),
            );
            let a = call(
                w,
                &world,
                case,
                0,
                false,
                Some((Event::ABegin, Event::AEnd)),
            );
            (a, b)
        }
    };
    let dump = dump.then(|| world.dump());
    // Drop the world here, outside every window.
    drop(world);
    Ok(Outcome { a, b, dump })
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
    let ab = run_case(w, case, form, Order::AB, true)?;
    let ba = run_case(w, case, form, Order::BA, true)?;
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
