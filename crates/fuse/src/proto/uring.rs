//! FUSE over io_uring: one [`RingQueue`] per CPU queue of the connection, each with its
//! own ring, owned and driven by one thread (pinned to that CPU by the caller).
//!
//! ## How a request travels
//!
//! The kernel queues a request on the queue of the CPU its caller runs on and copies it
//! into one of that queue's registered entries (buffers we own, `abi::uring`), which
//! completes the entry's pending command. The queue's thread decodes it straight from
//! the entry's two buffers (`Operation::decode_split`: no copy), runs it, and answers it
//! with `COMMIT_AND_FETCH` on the same entry, which also waits for the entry's next
//! request: one system call per request, and the caller is woken on its own CPU.
//!
//! A reply is first staged in the queue's [`Slot`] (the request still borrows the entry's
//! payload buffer while it runs) and copied into the entry once the request is done.
//!
//! ## Requests answered later
//!
//! A lock request that must wait is answered from another thread ([`Replier`]); the
//! kernel takes the answer only as a commit of the entry the request came in on, and only
//! the queue's thread may submit to its ring. So the entry stays *held* (no command in
//! flight) and the answer is posted to the queue's [`Mailbox`] (a mutex-protected list
//! and an eventfd the ring always has a read pending on); the queue's thread drains the
//! list when the read completes and commits each answer on its entry. Meanwhile the
//! queue's other entries keep serving; when a hold leaves fewer than [`SPARE_ENTRIES`]
//! entries serving, another entry is registered, so no number of waiting lockers can take
//! every entry of a queue (the request that would release them must still get through).
//!
//! A new entry alone is not enough. A request that arrives while every entry of the
//! queue is in user space waits in the kernel's queue, and the kernel hands such a
//! request only to an entry that *commits* (`fuse_uring_commit_fetch`), never to one
//! that registers (`fuse_uring_do_register` only makes it available). If every entry
//! that took a request of a burst is then held, the request left over would wait for the
//! next request of that CPU, and if it is the unlock the holders wait for, with them.
//! So after such a hold, once the new entry's registration is submitted, the queue
//! *kicks*: the caller's `kick` makes a request arrive on this CPU (a `statfs` of the
//! mount from a thread pinned here). It finds the new entry available, is answered, and
//! its commit hands the entry the oldest waiting request, if any; that one, if held
//! too, kicks again. A kick that finds nothing waiting costs one `statfs`. Kicks are
//! also a liveness net: while an entry is held, a queue that sees no request for
//! `REKICK_FIRST` kicks again, backing off to one kick per `REKICK_LAST`, until a
//! request arrives: a burst of holds within one round registers entries for one kick,
//! and a kick whose `statfs` found no free entry waits in the kernel's queue itself (the
//! caller's `kick` then also asks from a one-shot thread).
//!
//! ## Waiting
//!
//! The ring is set up with `DEFER_TASKRUN`: the kernel's copy of a request into an entry
//! is task work of the queue's thread, run only when that thread enters the kernel to
//! wait, so a new request never shows in the completion queue by itself. With
//! `TASKRUN_FLAG` (asked for only when the queue spins) the kernel also sets
//! `IORING_SQ_TASKRUN` in the ring's shared flags when it queues such work. After a
//! round that answered a request, a spinning thread submits its answers and then
//! watches that flag and the completion queue for up to its spin time (an argument of
//! [`RingQueue::register`]; `spin::spin_until`) before it waits in `io_uring_enter`.
//! The wait itself is unchanged: if the flag showed, the enter runs the work and
//! returns at once; if not, it sleeps as before. The spin is a hint and never decides
//! what is served, so it cannot lose a request.
//!
//! The spin is off by default. It could save the sleep and the wake-up only if the
//! caller it has just woken, on the same CPU, preempted the worker at once, made its next
//! request and blocked; the scheduler does not reliably preempt, and then the worker
//! spins while the caller it is waiting for waits for the CPU. Measured on a 2-vCPU VM,
//! every bound tried was slower than sleeping at once (`docs/fuse.md`). A thread that
//! answered nothing since it last slept never spins, so even with a spin an idle mount
//! costs no CPU.
//!
//! ## Locks
//!
//! The mailbox's mutex protects its list only; it is a leaf (the eventfd write happens
//! after it is released). Everything else belongs to the queue's thread.
//!
//! ## Ending
//!
//! When the connection ends (abort or unmount), every command fails: pending ones
//! complete with an error, later commits fail at once. [`RingQueue::run`] returns when
//! every entry it does not hold for a later answer has failed. (A commit refused while
//! the connection lives, its request gone, costs the kernel that entry: the queue
//! registers another in its place.) Entry buffers are freed
//! only once the ring is closed and every entry has been seen failing (the kernel no
//! longer writes to them); otherwise they are leaked rather than risk a late write.

use std::cell::{Cell, RefCell};
use std::io;
use std::mem::ManuallyDrop;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::Arc;

use io_uring::{cqueue, opcode, squeue, types, IoUring};
use parking_lot::Mutex;
use zerocopy::{FromBytes, IntoBytes};

use super::abi::{self, uring as ring_abi};
use super::session::{Origin, Replier, Request};

/// Entries registered per queue at the start, by default (`MountOptions::ring_entries`).
pub const ENTRIES_PER_QUEUE: usize = 4;
/// Entries of a queue kept serving while others are held for a later answer.
pub const SPARE_ENTRIES: usize = 2;
/// While an entry is held and nothing arrives, the queue kicks again after this long,
/// then after twice as long each time, up to [`REKICK_LAST`]; any request resets it.
const REKICK_FIRST: std::time::Duration = std::time::Duration::from_millis(10);
/// The longest wait between kicks while an entry is held (one `statfs` a second per
/// queue while a lock waiter waits and nothing else arrives).
const REKICK_LAST: std::time::Duration = std::time::Duration::from_secs(1);
/// The `user_data` of the mailbox's eventfd read (entries use their index).
const MAILBOX: u64 = u64::MAX;
/// Submission queue size (the completion queue is twice that; the kernel keeps
/// completions that overflow it).
const RING_DEPTH: u32 = 256;

/// Answers posted for held entries, and the eventfd that wakes the queue's thread.
pub struct Mailbox {
    /// `(entry, unique, errno)` answers not yet committed. A leaf mutex.
    answers: Mutex<Vec<(usize, u64, i32)>>,
    eventfd: OwnedFd,
}

impl Mailbox {
    fn new() -> io::Result<Mailbox> {
        // SAFETY: eventfd takes no pointers; the result is checked.
        let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Mailbox {
            answers: Mutex::new(Vec::new()),
            // SAFETY: `fd` was just created for us and is owned by nobody else.
            eventfd: unsafe { OwnedFd::from_raw_fd(fd) },
        })
    }

    /// Posts the answer `error` (0 or a negated errno) of the request `unique` held on
    /// `entry`, and wakes the queue's thread. After the queue's thread ended (the
    /// connection is gone) the answer is dropped with the mailbox.
    fn post(&self, entry: usize, unique: u64, error: i32) -> io::Result<()> {
        self.answers.lock().push((entry, unique, error));
        let one: u64 = 1;
        // SAFETY: writes the 8 bytes of `one`, live for the call.
        let n = unsafe {
            libc::write(
                self.eventfd.as_raw_fd(),
                (&one as *const u64).cast(),
                std::mem::size_of::<u64>(),
            )
        };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }
}

/// A request held on a ring entry, answered later from any thread (the ring's side of
/// [`Replier`]).
pub struct Deferred {
    mailbox: Arc<Mailbox>,
    entry: usize,
}

impl Deferred {
    pub(crate) fn send(&self, unique: u64, error: i32) -> io::Result<()> {
        self.mailbox.post(self.entry, unique, error)
    }
}

/// The request being served on a queue: where its reply is staged until the request
/// (which borrows the entry's buffers) is done, or whether it was handed on to be
/// answered later.
pub struct Slot {
    entry: Cell<usize>,
    unique: Cell<u64>,
    /// `Some(error)` once answered; the reply's bytes are in `data`.
    error: Cell<Option<i32>>,
    data: RefCell<Vec<u8>>,
    deferred: Cell<bool>,
    capacity: usize,
    mailbox: Arc<Mailbox>,
}

impl Slot {
    /// Stages the reply: `error` (0 or a negated errno) and the concatenation of `parts`.
    /// A second reply, or one larger than the entry's payload buffer, is refused.
    pub(crate) fn stage(&self, error: i32, parts: &[&[u8]]) -> io::Result<()> {
        if self.error.get().is_some() || self.deferred.get() {
            return Err(io::Error::from_raw_os_error(libc::EINVAL));
        }
        let len: usize = parts.iter().map(|p| p.len()).sum();
        if len > self.capacity {
            self.error.set(Some(-libc::EIO));
            return Err(io::Error::from_raw_os_error(libc::EINVAL));
        }
        let mut data = self.data.borrow_mut();
        data.clear();
        for p in parts {
            data.extend_from_slice(p);
        }
        self.error.set(Some(error));
        Ok(())
    }

    /// Hands the request on: its entry stays held until the returned handle answers.
    pub(crate) fn defer(&self) -> Deferred {
        self.deferred.set(true);
        Deferred {
            mailbox: self.mailbox.clone(),
            entry: self.entry.get(),
        }
    }

    /// The unique of the request being served.
    pub(crate) fn unique(&self) -> u64 {
        self.unique.get()
    }
}

/// An entry's buffers, at fixed addresses the kernel writes to while a command of the
/// entry is in flight. Only touched by the queue's thread, and only between a completion
/// of the entry and its next command.
struct EntryBufs {
    header: *mut u8,
    payload: *mut u8,
    payload_len: usize,
    /// The two iovecs `REGISTER` points at.
    iov: [libc::iovec; 2],
    held: bool,
    failed: bool,
    /// It has carried a request (so a failure of it is not a refused registration).
    used: bool,
}

fn alloc(len: usize) -> *mut u8 {
    Box::into_raw(vec![0u8; len].into_boxed_slice()).cast()
}

/// # Safety
/// `ptr` came from [`alloc`] with `len`, and nothing uses it any more.
unsafe fn free(ptr: *mut u8, len: usize) {
    // SAFETY: the caller's contract: this is the boxed slice `alloc` leaked.
    drop(unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(ptr, len)) });
}

impl EntryBufs {
    fn new(payload_len: usize) -> Box<EntryBufs> {
        let header = alloc(std::mem::size_of::<ring_abi::ReqHeader>());
        let payload = alloc(payload_len);
        Box::new(EntryBufs {
            header,
            payload,
            payload_len,
            iov: [
                libc::iovec {
                    iov_base: header.cast(),
                    iov_len: std::mem::size_of::<ring_abi::ReqHeader>(),
                },
                libc::iovec {
                    iov_base: payload.cast(),
                    iov_len: payload_len,
                },
            ],
            held: false,
            failed: false,
            used: false,
        })
    }
}

/// One CPU queue of the connection: its ring, its entries, its mailbox.
pub struct RingQueue {
    /// Closed in `drop` before the entry buffers it names are freed.
    ring: ManuallyDrop<IoUring<squeue::Entry128, cqueue::Entry>>,
    /// A `/dev/fuse` descriptor of the connection: the commands' target.
    dev: RawFd,
    qid: u16,
    /// Boxed: a REGISTER names its entry's iovecs, which must not move when the vector
    /// grows before the command is submitted.
    #[allow(clippy::vec_box)]
    entries: Vec<Box<EntryBufs>>,
    payload_len: usize,
    mailbox: Arc<Mailbox>,
    /// The eventfd read's buffer (the kernel writes it while the read is in flight).
    counter: Box<u64>,
    slot: Slot,
    /// Completions seen while registering, served first by `run`.
    early: Vec<(u64, i32)>,
    /// A hold left fewer than [`SPARE_ENTRIES`] entries serving: once the new entry's
    /// registration is submitted, provoke a request on this queue (see "Requests
    /// answered later" in the module docs).
    kick_pending: bool,
    /// How long to watch for the next request after answering one, before sleeping
    /// (see "Waiting" in the module docs; zero: sleep at once).
    spin: std::time::Duration,
}

impl RingQueue {
    /// Sets up queue `qid` on the connection of `dev` (which must outlive the queue) and
    /// registers its first `entries` entries (at least one), with payload buffers for
    /// `max_write`-byte requests. After answering a request the queue's thread watches
    /// for the next one for up to `spin` before it sleeps (zero: it sleeps at once; see
    /// "Waiting" in the module docs). An error if the kernel refuses the ring or the
    /// registration.
    pub fn register(
        dev: RawFd,
        qid: u16,
        max_write: u32,
        entries: usize,
        spin: std::time::Duration,
    ) -> io::Result<RingQueue> {
        let mut builder = IoUring::<squeue::Entry128, cqueue::Entry>::builder();
        // Only this thread submits, and it runs the task work (the kernel's copy of each
        // request into an entry) when it waits.
        builder.setup_single_issuer().setup_defer_taskrun();
        if !spin.is_zero() {
            // The task-run flag shows in shared memory that a request is waiting to be
            // copied in, which is what a spinning thread watches (`wait_briefly`).
            builder.setup_taskrun_flag();
        }
        let ring = match builder.build(RING_DEPTH) {
            Ok(r) => r,
            Err(_) => IoUring::<squeue::Entry128, cqueue::Entry>::builder().build(RING_DEPTH)?,
        };
        // The kernel's `max_payload_sz`: the largest of its minimum read buffer,
        // max_write and max_pages pages (we ask max_write / 4096 pages).
        let payload_len = (max_write as usize)
            .max(ring_abi::MIN_PAYLOAD)
            .next_multiple_of(4096);
        let mailbox = Arc::new(Mailbox::new()?);
        let mut q = RingQueue {
            ring: ManuallyDrop::new(ring),
            dev,
            qid,
            entries: Vec::new(),
            payload_len,
            slot: Slot {
                entry: Cell::new(0),
                unique: Cell::new(0),
                error: Cell::new(None),
                data: RefCell::new(Vec::with_capacity(payload_len)),
                deferred: Cell::new(false),
                capacity: payload_len,
                mailbox: mailbox.clone(),
            },
            mailbox,
            counter: Box::new(0),
            early: Vec::new(),
            kick_pending: false,
            spin,
        };
        for _ in 0..entries.max(1) {
            q.add_entry()?;
        }
        q.arm_mailbox()?;
        q.ring.submit()?;
        // A refused command completes at once (its issue runs inside the submit). A
        // request may already have completed another entry (the ring is ready once
        // every queue has an entry): kept for `run`.
        let mut failure = None;
        let completed: Vec<(u64, i32)> = q
            .ring
            .completion()
            .map(|c| (c.user_data(), c.result()))
            .collect();
        for (user_data, result) in completed {
            if result < 0 {
                failure.get_or_insert(io::Error::from_raw_os_error(-result));
                if let Some(e) = q.entries.get_mut(user_data as usize) {
                    e.failed = true;
                }
            } else {
                q.early.push((user_data, result));
            }
        }
        match failure {
            Some(e) => Err(e),
            None => Ok(q),
        }
    }

    /// Submits the answers queued so far, then watches the ring's shared memory for up
    /// to `self.spin` for a request (or any other completion) to arrive.
    fn wait_briefly(&mut self) -> io::Result<()> {
        match self.ring.submit() {
            Ok(_) => {}
            Err(e) if matches!(e.raw_os_error(), Some(libc::EINTR | libc::EBUSY)) => {}
            Err(e) => return Err(e),
        }
        let ring = &mut *self.ring;
        super::spin::spin_until(self.spin, || {
            // Deferred task work (a request to copy into an entry, the mailbox's read)
            // sets the flag; completions already posted show in the queue's tail.
            ring.submission().taskrun() || !ring.completion().is_empty()
        });
        Ok(())
    }

    fn push(&mut self, sqe: &squeue::Entry128) -> io::Result<()> {
        loop {
            // SAFETY: every buffer an SQE of ours names (entry buffers, iovecs, the
            // eventfd counter) lives in `self` at a fixed address until the ring is
            // closed, and is not touched by us while its command is in flight.
            if unsafe { self.ring.submission().push(sqe) }.is_ok() {
                return Ok(());
            }
            self.ring.submit()?;
        }
    }

    fn command(&self, cmd_op: u32, commit_id: u64) -> opcode::UringCmd80 {
        let req = ring_abi::CmdReq {
            commit_id,
            qid: self.qid,
            ..Default::default()
        };
        let mut cmd = [0u8; 80];
        cmd[..std::mem::size_of::<ring_abi::CmdReq>()].copy_from_slice(req.as_bytes());
        opcode::UringCmd80::new(types::Fd(self.dev), cmd_op).cmd(cmd)
    }

    /// Registers one more entry.
    fn add_entry(&mut self) -> io::Result<()> {
        let bufs = EntryBufs::new(self.payload_len);
        let idx = self.entries.len();
        let mut sqe = self
            .command(ring_abi::CMD_REGISTER, 0)
            .addr(Some(bufs.iov.as_ptr() as u64))
            .build()
            .user_data(idx as u64);
        // SAFETY: `Entry128` is `repr(C)`: the 64-byte `io_uring_sqe` first, whose `len`
        // (a u32 at byte 24) the builder has no setter for; REGISTER needs it to be the
        // number of iovecs (2).
        unsafe {
            (&mut sqe as *mut squeue::Entry128)
                .cast::<u8>()
                .add(24)
                .cast::<u32>()
                .write_unaligned(2);
        }
        self.entries.push(bufs);
        self.push(&sqe)
    }

    fn arm_mailbox(&mut self) -> io::Result<()> {
        let read = opcode::Read::new(
            types::Fd(self.mailbox.eventfd.as_raw_fd()),
            (&mut *self.counter as *mut u64).cast(),
            8,
        )
        .build()
        .user_data(MAILBOX);
        self.push(&read.into())
    }

    /// Writes the answer into entry `idx` and submits its `COMMIT_AND_FETCH`.
    fn commit(&mut self, idx: usize, unique: u64, error: i32, data: &[u8]) -> io::Result<()> {
        let (error, data) = if data.len() > self.payload_len {
            (-libc::EIO, &[][..])
        } else {
            (error, data)
        };
        let e = &mut self.entries[idx];
        e.held = false;
        let out = abi::OutHeader {
            len: (std::mem::size_of::<abi::OutHeader>() + data.len()) as u32,
            error,
            unique,
        };
        let in_out = ring_abi::EntInOut {
            commit_id: unique,
            payload_sz: data.len() as u32,
            ..Default::default()
        };
        let ring_ent = std::mem::offset_of!(ring_abi::ReqHeader, ring_ent_in_out);
        // SAFETY: no command of this entry is in flight (its request completed and is
        // answered here), so the kernel does not write the buffers and nothing of ours
        // borrows them; each copy stays inside its buffer (header: 288 bytes; payload:
        // `payload_len`, checked above).
        unsafe {
            std::ptr::copy_nonoverlapping(out.as_bytes().as_ptr(), e.header, out.as_bytes().len());
            std::ptr::copy_nonoverlapping(
                in_out.as_bytes().as_ptr(),
                e.header.add(ring_ent),
                in_out.as_bytes().len(),
            );
            std::ptr::copy_nonoverlapping(data.as_ptr(), e.payload, data.len());
        }
        let sqe = self
            .command(ring_abi::CMD_COMMIT_AND_FETCH, unique)
            .build()
            .user_data(idx as u64);
        self.push(&sqe)
    }

    /// Serves requests with `serve` until the connection ends. `kick` must make a
    /// request arrive on this queue soon, from another thread (the caller's worker pins
    /// a thread to this queue's CPU that asks the mount for its `statfs`); it is called
    /// after a hold that left the queue short of serving entries, once the entry
    /// registered in its place has been submitted.
    pub fn run(&mut self, mut serve: impl FnMut(Request<'_>), kick: impl Fn()) -> io::Result<()> {
        let mut done = Vec::new();
        // A command failed because the connection is over.
        let mut ended = false;
        let mut early = std::mem::take(&mut self.early);
        // The last round served a request: watch for the next before sleeping.
        let mut answered = false;
        // How long to wait, while an entry is held, before kicking again.
        let mut rekick = REKICK_FIRST;
        loop {
            done.clear();
            if early.is_empty() {
                if answered && !self.spin.is_zero() {
                    self.wait_briefly()?;
                }
                // While an entry is held, wait at most `rekick` (module docs, "Requests
                // answered later": a kick is a liveness net, so it is repeated, backing
                // off, until a request arrives).
                let holding = self.entries.iter().any(|e| e.held && !e.failed);
                let waited = if holding && !ended {
                    let ts = types::Timespec::from(rekick);
                    let args = types::SubmitArgs::new().timespec(&ts);
                    self.ring.submitter().submit_with_args(1, &args)
                } else {
                    self.ring.submit_and_wait(1)
                };
                match waited {
                    Ok(_) => {}
                    Err(e) if e.raw_os_error() == Some(libc::EINTR) => continue,
                    Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {}
                    Err(e) if e.raw_os_error() == Some(libc::ETIME) => {}
                    Err(e) => return Err(e),
                }
            } else {
                done.append(&mut early);
            }
            done.extend(self.ring.completion().map(|c| (c.user_data(), c.result())));
            answered = done
                .iter()
                .any(|&(user_data, r)| user_data != MAILBOX && r >= 0);
            if answered {
                rekick = REKICK_FIRST;
            } else if done.is_empty() && self.entries.iter().any(|e| e.held && !e.failed) {
                // Nothing arrived within `rekick` while entries are held: a request may
                // be waiting in the kernel for a commit that no entry will make.
                self.kick_pending = true;
                rekick = (rekick * 2).min(REKICK_LAST);
            }
            for &(user_data, result) in &done {
                if user_data == MAILBOX {
                    self.answer_posted()?;
                    continue;
                }
                let idx = user_data as usize;
                if result < 0 {
                    let e = &mut self.entries[idx];
                    e.failed = true;
                    if connection_ended(-result) {
                        ended = true;
                    } else if e.used && !ended {
                        // A commit the kernel refused (its request was gone): the
                        // entry is lost to the kernel, so the queue gets another.
                        self.add_entry()?;
                    }
                    continue;
                }
                self.entries[idx].used = true;
                self.serve_entry(idx, &mut serve)?;
            }
            if std::mem::take(&mut self.kick_pending) && !ended {
                // The new entry must be available before the provoked request arrives
                // (the kernel would queue that one too): submit its REGISTER first.
                self.ring.submit()?;
                kick();
            }
            let serving = self.entries.iter().any(|e| !e.failed && !e.held);
            if !serving && (ended || self.entries.iter().all(|e| e.failed)) {
                return Ok(());
            }
        }
    }

    /// Commits the answers posted for held entries, and reads the eventfd again.
    fn answer_posted(&mut self) -> io::Result<()> {
        let answers = std::mem::take(&mut *self.mailbox.answers.lock());
        for (idx, unique, error) in answers {
            if self.entries.get(idx).is_some_and(|e| e.held) {
                self.commit(idx, unique, error, &[])?;
            }
        }
        self.arm_mailbox()
    }

    /// Decodes the request in entry `idx`, serves it and answers it (or holds the entry
    /// if it was handed on).
    fn serve_entry(&mut self, idx: usize, serve: &mut impl FnMut(Request<'_>)) -> io::Result<()> {
        let e = &self.entries[idx];
        let header_len = std::mem::size_of::<ring_abi::ReqHeader>();
        // SAFETY: the entry's command completed, so the kernel has finished writing its
        // buffers and will not touch them before our next command for it; the slices
        // end with this block, before `commit` writes the buffers.
        let (header, payload) = unsafe {
            (
                std::slice::from_raw_parts(e.header.cast_const(), header_len),
                std::slice::from_raw_parts(e.payload.cast_const(), e.payload_len),
            )
        };
        let parsed = parse_entry(header, payload);
        let unique = match &parsed {
            Ok((h, _, _)) => h.unique,
            Err(unique) => *unique,
        };
        let slot = &self.slot;
        slot.entry.set(idx);
        slot.unique.set(unique);
        slot.error.set(None);
        slot.deferred.set(false);
        let error = match parsed {
            Ok((h, op_in, payload)) => {
                serve(Request::from_parts(h, op_in, payload, Origin::Ring(slot)));
                slot.error.get()
            }
            Err(_) => Some(-libc::EIO),
        };
        if slot.deferred.get() {
            self.entries[idx].held = true;
            let serving = self.entries.iter().filter(|e| !e.held && !e.failed).count();
            if serving < SPARE_ENTRIES {
                self.add_entry()?;
                self.kick_pending = true;
            }
            return Ok(());
        }
        // Unanswered (DESTROY): an empty success, so that the entry keeps serving.
        let data = std::mem::take(&mut *self.slot.data.borrow_mut());
        let r = self.commit(idx, unique, error.unwrap_or(0), &data);
        *self.slot.data.borrow_mut() = data;
        r
    }
}

/// Whether a command's error means the connection (or its ring) is over: the abort or
/// unmount (`ENOTCONN`, `ECONNABORTED`), the ring's cancellation (`ECANCELED`), or an
/// io_uring refusal that will not change (`EOPNOTSUPP`, `EINVAL`).
fn connection_ended(errno: i32) -> bool {
    matches!(
        errno,
        libc::ENOTCONN | libc::ECONNABORTED | libc::ECANCELED | libc::EOPNOTSUPP | libc::EINVAL
    )
}

/// The header, first argument and other arguments of the request in an entry's buffers;
/// `Err(unique)` if its lengths do not add up (answered `EIO`).
fn parse_entry<'a>(
    header: &'a [u8],
    payload: &'a [u8],
) -> Result<(abi::InHeader, &'a [u8], &'a [u8]), u64> {
    let h = abi::InHeader::read_from_prefix(header).map_err(|_| 0u64)?.0;
    let ring_ent = std::mem::offset_of!(ring_abi::ReqHeader, ring_ent_in_out);
    let in_out = ring_abi::EntInOut::read_from_prefix(&header[ring_ent..])
        .map_err(|_| h.unique)?
        .0;
    let payload_sz = in_out.payload_sz as usize;
    let op_len = (h.len as usize)
        .checked_sub(std::mem::size_of::<abi::InHeader>() + payload_sz)
        .filter(|&n| n <= ring_abi::OP_IN_OUT_SZ)
        .ok_or(h.unique)?;
    let payload = payload.get(..payload_sz).ok_or(h.unique)?;
    let op_start = std::mem::offset_of!(ring_abi::ReqHeader, op_in);
    Ok((h, &header[op_start..op_start + op_len], payload))
}

impl Drop for RingQueue {
    fn drop(&mut self) {
        let all_failed = self.entries.iter().all(|e| e.failed);
        // SAFETY: dropped once, here, and never used after: the ring is closed first,
        // which cancels its commands.
        unsafe { ManuallyDrop::drop(&mut self.ring) };
        for e in self.entries.drain(..) {
            if all_failed {
                // SAFETY: every entry's last command failed and the ring is closed:
                // the kernel no longer holds these buffers.
                unsafe {
                    free(e.header, std::mem::size_of::<ring_abi::ReqHeader>());
                    free(e.payload, e.payload_len);
                }
            }
            // Otherwise an entry may still be registered with a live connection, which
            // could write to it: leaked.
        }
    }
}

/// The ring's side of [`Replier`].
pub(crate) fn replier(slot: &Slot) -> Replier {
    Replier::ring(slot.unique(), slot.defer())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(h: abi::InHeader, op_in: &[u8], payload_sz: u32) -> Vec<u8> {
        let mut b = vec![0u8; std::mem::size_of::<ring_abi::ReqHeader>()];
        b[..40].copy_from_slice(h.as_bytes());
        b[128..128 + op_in.len()].copy_from_slice(op_in);
        let e = ring_abi::EntInOut {
            commit_id: h.unique,
            payload_sz,
            ..Default::default()
        };
        b[256..288].copy_from_slice(e.as_bytes());
        b
    }

    /// The op struct's length is what the header's length leaves after the payload; a
    /// request whose lengths do not add up is refused with its unique (answered EIO).
    #[test]
    fn entries_split_into_header_op_struct_and_payload() {
        let h = abi::InHeader {
            len: 40 + 8 + 5,
            opcode: abi::opcode::MKDIR,
            unique: 6,
            ..Default::default()
        };
        let payload = b"name\0 and garbage";
        let b = entry(h, &[1; 8], 5);
        let (got, op_in, p) = parse_entry(&b, payload).unwrap();
        assert_eq!((got.unique, op_in, p), (6, &[1u8; 8][..], &b"name\0"[..]));
        let too_long = entry(h, &[1; 8], 500);
        assert_eq!(parse_entry(&too_long, payload).unwrap_err(), 6);
        let short = abi::InHeader { len: 20, ..h };
        assert_eq!(parse_entry(&entry(short, &[], 5), payload).unwrap_err(), 6);
        let big_op = abi::InHeader { len: 40 + 200, ..h };
        assert_eq!(parse_entry(&entry(big_op, &[], 0), payload).unwrap_err(), 6);
    }

    /// A staged reply is kept whole until committed; a second one, or one larger than
    /// the payload buffer, is refused.
    #[test]
    fn a_slot_takes_one_reply_that_fits() {
        let mailbox = Arc::new(Mailbox::new().unwrap());
        let slot = Slot {
            entry: Cell::new(3),
            unique: Cell::new(8),
            error: Cell::new(None),
            data: RefCell::new(Vec::new()),
            deferred: Cell::new(false),
            capacity: 4,
            mailbox: mailbox.clone(),
        };
        slot.stage(0, &[b"ab", b"cd"]).unwrap();
        assert_eq!(
            (slot.error.get(), &slot.data.borrow()[..]),
            (Some(0), &b"abcd"[..])
        );
        assert!(slot.stage(0, &[]).is_err(), "answered twice");
        slot.error.set(None);
        assert!(slot.stage(0, &[b"abcde"]).is_err());
        assert_eq!(slot.error.get(), Some(-libc::EIO));
        // A deferred answer reaches the mailbox with its entry and unique.
        slot.error.set(None);
        let d = slot.defer();
        d.send(8, -libc::EINTR).unwrap();
        assert_eq!(*mailbox.answers.lock(), [(3, 8, -libc::EINTR)]);
    }

    /// Many threads post answers while one drains the mailbox each time its eventfd
    /// reads non-zero, as the queue's thread does: every answer arrives exactly once.
    #[test]
    fn every_posted_answer_is_drained_once() {
        let mailbox = Arc::new(Mailbox::new().unwrap());
        let posters: Vec<_> = (0..4usize)
            .map(|t| {
                let m = mailbox.clone();
                std::thread::spawn(move || {
                    for i in 0..2000u64 {
                        m.post(t, i, 0).unwrap();
                    }
                })
            })
            .collect();
        let mut seen = std::collections::HashSet::new();
        while seen.len() < 4 * 2000 {
            let mut n = 0u64;
            // SAFETY: reads 8 bytes into a live u64 (blocks until a post wrote).
            let r =
                unsafe { libc::read(mailbox.eventfd.as_raw_fd(), (&mut n as *mut u64).cast(), 8) };
            assert_eq!(r, 8);
            for (entry, unique, _) in std::mem::take(&mut *mailbox.answers.lock()) {
                assert!(seen.insert((entry, unique)), "answer drained twice");
            }
        }
        for p in posters {
            p.join().unwrap();
        }
        assert!(mailbox.answers.lock().is_empty());
    }
}
