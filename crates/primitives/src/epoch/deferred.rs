//! Deferred functions and the bags that hold them.

/// A function to run after a grace period: a data pointer and the function that consumes
/// it. Two words; a closure is boxed (a zero-sized one allocates nothing), a destructor of
/// an epoch-managed pointer is stored as the pointer and its drop function directly.
pub(crate) struct Deferred {
    data: *mut (),
    call: unsafe fn(*mut ()),
}

impl Deferred {
    /// `call(data)`, later.
    ///
    /// # Safety
    /// Calling `call(data)` once, on any thread, after the grace period is sound.
    pub(crate) unsafe fn from_raw(data: *mut (), call: unsafe fn(*mut ())) -> Self {
        Deferred { data, call }
    }

    /// `f()`, later.
    ///
    /// # Safety
    /// Running `f` once, on any thread, after the grace period is sound (it need not be
    /// `Send` or `'static`: the caller vouches for it, as for `Guard::defer_unchecked`).
    pub(crate) unsafe fn from_fn<F: FnOnce()>(f: F) -> Self {
        unsafe fn call<F: FnOnce()>(p: *mut ()) {
            // SAFETY: `p` came from `Box::into_raw` of a `Box<F>` in `from_fn`, and is
            // consumed once (`Deferred::run` takes `self`).
            let f = unsafe { Box::from_raw(p.cast::<F>()) };
            f();
        }
        Deferred {
            data: Box::into_raw(Box::new(f)).cast(),
            call: call::<F>,
        }
    }

    /// Runs the function.
    ///
    /// # Safety
    /// The grace period of what it frees has passed.
    pub(crate) unsafe fn run(self) {
        // SAFETY: per the contract of the constructor that built the pair, and ours.
        unsafe { (self.call)(self.data) }
    }
}

/// A bag of deferred functions, all unlinked before `epoch` was read after a `SeqCst`
/// fence ([`super::global::Global::seal_epoch`]): runnable once the global epoch is
/// `epoch + 2`.
pub(crate) struct SealedBag {
    pub(crate) epoch: u64,
    pub(crate) items: Vec<Deferred>,
}

// SAFETY: a bag moves to another thread only when its thread exits (the orphan list), and
// the `defer*` contracts make every deferred function runnable on any thread (`defer`
// requires `Send`; `defer_unchecked` and `defer_destroy` make the caller vouch for it, as
// crossbeam-epoch's do).
unsafe impl Send for SealedBag {}

impl SealedBag {
    /// Whether the grace period of the bag's items has passed at global epoch `now`.
    pub(crate) fn expired(&self, now: u64) -> bool {
        now >= self.epoch + 2
    }

    /// Runs every item.
    ///
    /// # Safety
    /// The bag has [`expired`](Self::expired) at an epoch read with acquire semantics (or
    /// advanced to by this thread).
    pub(crate) unsafe fn run(self) {
        for item in self.items {
            // SAFETY: per our contract.
            unsafe { item.run() };
        }
    }
}
