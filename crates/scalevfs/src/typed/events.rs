//! Typed pipes and epoll: [`Process::pipe`] gives two [`File`]s, and [`Epoll`] takes
//! and reports [`EpollFlags`].

use std::time::Duration;

use super::file::{Descriptor, File};
use super::flags::{EpollFlags, OFlags};
use crate::{EpollEvent, Process, SysResult};

impl Process {
    /// `pipe2(flags)` (`O_CLOEXEC` always added): the read end, then the write end.
    pub fn pipe(&self, flags: OFlags) -> SysResult<(File<'_>, File<'_>)> {
        let mut fds = [0; 2];
        self.pipe2(&mut fds, (flags | OFlags::CLOEXEC).bits())?;
        Ok((File::from_fd(self, fds[0]), File::from_fd(self, fds[1])))
    }
}

/// One ready descriptor, as `epoll_wait` reports it.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct Event {
    /// What is ready (`IN`, `OUT`, `HUP`, ...).
    pub flags: EpollFlags,
    /// The value registered with the descriptor.
    pub data: u64,
}

/// An epoll instance (`epoll_create1(EPOLL_CLOEXEC)`), closed on drop.
#[derive(Debug)]
pub struct Epoll<'p> {
    file: File<'p>,
}

impl<'p> Epoll<'p> {
    /// A new epoll instance of `proc`, watching nothing.
    pub fn new(proc: &'p Process) -> SysResult<Epoll<'p>> {
        let fd = proc.epoll_create1(libc::EPOLL_CLOEXEC)?;
        Ok(Epoll {
            file: File::from_fd(proc, fd),
        })
    }
    fn ctl(&self, op: i32, target: &dyn Descriptor, event: Option<EpollEvent>) -> SysResult<()> {
        self.file
            .process()
            .epoll_ctl(self.file.fd(), op, target.fd(), event.as_ref())
    }
    /// `EPOLL_CTL_ADD`: watches `target` for `flags`, reporting `data`.
    pub fn add(&self, target: &dyn Descriptor, flags: EpollFlags, data: u64) -> SysResult<()> {
        let ev = EpollEvent::new(flags.bits(), data);
        self.ctl(libc::EPOLL_CTL_ADD, target, Some(ev))
    }
    /// `EPOLL_CTL_MOD`.
    pub fn modify(&self, target: &dyn Descriptor, flags: EpollFlags, data: u64) -> SysResult<()> {
        let ev = EpollEvent::new(flags.bits(), data);
        self.ctl(libc::EPOLL_CTL_MOD, target, Some(ev))
    }
    /// `EPOLL_CTL_DEL`.
    pub fn delete(&self, target: &dyn Descriptor) -> SysResult<()> {
        self.ctl(libc::EPOLL_CTL_DEL, target, None)
    }
    /// `epoll_wait` for up to `max` events (at least 1); `timeout` `None` waits for ever,
    /// and is rounded down to milliseconds (at most `i32::MAX`).
    pub fn wait(&self, max: usize, timeout: Option<Duration>) -> SysResult<Vec<Event>> {
        let mut evs = vec![EpollEvent::new(0, 0); max.max(1)];
        let ms = timeout.map_or(-1, |t| i32::try_from(t.as_millis()).unwrap_or(i32::MAX));
        let n = self
            .file
            .process()
            .epoll_wait(self.file.fd(), &mut evs, ms)?;
        Ok(evs[..n]
            .iter()
            .map(|e| Event {
                flags: EpollFlags::from_bits_retain(e.events),
                data: e.data,
            })
            .collect())
    }
}

impl Descriptor for Epoll<'_> {
    fn process(&self) -> &Process {
        self.file.process()
    }
    fn fd(&self) -> i32 {
        self.file.fd()
    }
}
