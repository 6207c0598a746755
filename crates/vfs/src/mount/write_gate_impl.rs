// A superblock's read-only flag and the handshake between writers and a remount
// read-only (shared by `mount/write.rs`, with `sync` bound to std, and by the loom model in
// `mount/write_loom_tests.rs`, with `sync` bound to loom). The argument is in the module
// docs of `mount::write`.

/// `MS_RDONLY`.
const RDONLY: u8 = 1;
/// Linux's `MNT_WRITE_HOLD`: a remount read-only is deciding; writers wait.
const WRITE_HOLD: u8 = 2;

/// How the writer count is kept: per CPU in the VFS, two shards in the model.
pub(crate) trait WriterCount {
    /// Adds `delta` (`Relaxed`: the fences order it).
    fn add(&self, delta: isize);
    /// The sum of every shard (`Relaxed` loads).
    fn sum(&self) -> isize;
}

/// The state word: `RDONLY` and `WRITE_HOLD`. Its transitions are made by one thread at a
/// time (the caller of `make_read_only` and `make_writable` holds the mount table mutex).
pub(crate) struct WriteGate(sync::AtomicU8);

impl WriteGate {
    pub(crate) fn new(read_only: bool) -> WriteGate {
        WriteGate(sync::AtomicU8::new(if read_only { RDONLY } else { 0 }))
    }

    /// Whether the file system is read-only now (a hint for callers that change nothing
    /// of the user's: atime updates).
    pub(crate) fn is_read_only(&self) -> bool {
        self.0.load(sync::Ordering::Relaxed) & RDONLY != 0
    }

    /// Linux's `mnt_get_write_access`: counts a writer, then a `SeqCst` fence, then looks
    /// at the state. `false` (and no count): read-only. While a remount holds
    /// `WRITE_HOLD` the writer waits for its verdict.
    pub(crate) fn get_write(&self, writers: &impl WriterCount) -> bool {
        if self.is_read_only() {
            return false;
        }
        writers.add(1);
        // SeqCst fence: pairs with the one in `make_read_only` (Dekker): either that
        // remount's sum sees this count, or this load sees its WRITE_HOLD (or what
        // replaced it).
        sync::fence(sync::Ordering::SeqCst);
        let backoff = sync::Backoff::new();
        // Acquire: pairs with the Release store that ends `WRITE_HOLD` in
        // `make_read_only`, so that a writer that sees the hold gone sees its verdict.
        let mut state = self.0.load(sync::Ordering::Acquire);
        while state & WRITE_HOLD != 0 {
            backoff.snooze();
            state = self.0.load(sync::Ordering::Acquire);
        }
        if state & RDONLY != 0 {
            writers.add(-1);
            return false;
        }
        true
    }

    /// Linux's `mnt_put_write_access`.
    pub(crate) fn put_write(&self, writers: &impl WriterCount) {
        // Release fence: pairs with the Acquire fence after `make_read_only`'s sum, so
        // that a remount that reads this decrement also sees the change made under the
        // access (an unlink's link count, for its `busy` look).
        sync::fence(sync::Ordering::Release);
        writers.add(-1);
    }

    /// Linux's `mnt_make_readonly`/`sb_prepare_remount_readonly`: sets `WRITE_HOLD`, a
    /// `SeqCst` fence, then sums the writers; with none, and `busy()` false (it may look
    /// at anything that only writers change), the state becomes `RDONLY`. `false`: busy,
    /// and the state is as before. Callers are serialized (the mount table mutex).
    pub(crate) fn make_read_only(
        &self,
        writers: &impl WriterCount,
        busy: impl FnOnce() -> bool,
    ) -> bool {
        let old = self.0.load(sync::Ordering::Relaxed);
        if old & RDONLY != 0 {
            return true;
        }
        self.0.store(old | WRITE_HOLD, sync::Ordering::Relaxed);
        // SeqCst fence: pairs with the one in `get_write`.
        sync::fence(sync::Ordering::SeqCst);
        let none = writers.sum() <= 0;
        // Acquire fence: pairs with the Release fence in `put_write` (see there).
        sync::fence(sync::Ordering::Acquire);
        let idle = none && !busy();
        // Release: pairs with the Acquire loads in `get_write`'s wait.
        self.0.store(
            if idle { old | RDONLY } else { old },
            sync::Ordering::Release,
        );
        idle
    }

    /// A remount read-write: writers may come in at once.
    pub(crate) fn make_writable(&self) {
        self.0.fetch_and(!RDONLY, sync::Ordering::Relaxed);
    }
}
