//! The differential scenarios: each runs on the host and on both designs of scalevfs.

use super::*;

#[test]
fn level_vs_edge() {
    differential(|s, l| {
        let ep = s.epoll_create1(0).unwrap();
        let efd = s.eventfd(0, libc::EFD_NONBLOCK).unwrap();
        let [r, w] = s.pipe2(libc::O_NONBLOCK).unwrap();
        l.rec("add lt", s.epoll_ctl(ep, ADD, efd, Some((IN, 1))));
        l.rec("add et", s.epoll_ctl(ep, ADD, r, Some((IN | ET, 2))));
        l.rec("empty", s.epoll_wait(ep, 8, 0));
        l.rec("sig efd", s.write(efd, &U64_1));
        l.rec("sig pipe", s.write(w, b"abc"));
        let first = s.epoll_wait(ep, 8, 0);
        assert_eq!(first.as_ref().map(|v| v.len()), Ok(2));
        l.rec("wait 1", first);
        l.rec("wait 2 (lt only)", s.epoll_wait(ep, 8, 0));
        l.rec("more pipe data", s.write(w, b"d"));
        l.rec("wait 3 (et fires again)", s.epoll_wait(ep, 8, 0));
        l.rec("maxevents 1", s.epoll_wait(ep, 1, 0));
        l.rec("drain efd", s.read(efd, 8));
        l.rec("wait 4", s.epoll_wait(ep, 8, 0));
        l.rec("drain pipe", s.read(r, 16));
        l.rec("wait 5", s.epoll_wait(ep, 8, 0));
        for fd in [ep, efd, r, w] {
            s.close(fd).unwrap();
        }
    });
}

#[test]
fn oneshot_rearm_and_mod_del() {
    differential(|s, l| {
        let ep = s.epoll_create1(0).unwrap();
        let efd = s.eventfd(0, libc::EFD_NONBLOCK).unwrap();
        l.rec("add", s.epoll_ctl(ep, ADD, efd, Some((IN | ONESHOT, 7))));
        l.rec("add again", s.epoll_ctl(ep, ADD, efd, Some((IN, 7))));
        l.rec("sig", s.write(efd, &U64_1));
        l.rec("wait", s.epoll_wait(ep, 4, 0));
        l.rec("disarmed", s.epoll_wait(ep, 4, 0));
        l.rec("sig 2", s.write(efd, &U64_1));
        l.rec("still disarmed", s.epoll_wait(ep, 4, 0));
        l.rec("rearm", s.epoll_ctl(ep, MOD, efd, Some((IN | ONESHOT, 8))));
        l.rec("after rearm", s.epoll_wait(ep, 4, 0));
        l.rec("mod to out", s.epoll_ctl(ep, MOD, efd, Some((OUT, 9))));
        l.rec("out", s.epoll_wait(ep, 4, 0));
        l.rec("del", s.epoll_ctl(ep, DEL, efd, None));
        l.rec("after del", s.epoll_wait(ep, 4, 0));
        l.rec("del again", s.epoll_ctl(ep, DEL, efd, None));
        l.rec("mod missing", s.epoll_ctl(ep, MOD, efd, Some((IN, 1))));
        l.rec(
            "exclusive add",
            s.epoll_ctl(ep, ADD, efd, Some((IN | libc::EPOLLEXCLUSIVE as u32, 1))),
        );
        l.rec(
            "exclusive mod",
            s.epoll_ctl(ep, MOD, efd, Some((IN | libc::EPOLLEXCLUSIVE as u32, 1))),
        );
        l.rec("mod of exclusive", s.epoll_ctl(ep, MOD, efd, Some((IN, 1))));
        s.close(efd).unwrap();
        s.close(ep).unwrap();
    });
}

#[test]
fn close_without_del_and_dup() {
    differential(|s, l| {
        let ep = s.epoll_create1(0).unwrap();
        let ep2 = s.epoll_create1(0).unwrap();
        let efd = s.eventfd(5, 0).unwrap();
        l.rec("add", s.epoll_ctl(ep, ADD, efd, Some((IN, 1))));
        l.rec("add ep2", s.epoll_ctl(ep2, ADD, efd, Some((IN, 2))));
        let d = s.dup(efd).unwrap();
        l.rec("close original", s.close(efd));
        // The description is still open through the dup: Linux keeps the item.
        l.rec("still watched", s.epoll_wait(ep, 4, 0));
        l.rec("ctl on closed fd", s.epoll_ctl(ep, DEL, BADFD, None));
        l.rec("close last", s.close(d));
        // Last close of the description: removed from every epoll.
        l.rec("gone", s.epoll_wait(ep, 4, 0));
        l.rec("gone ep2", s.epoll_wait(ep2, 4, 0));
        let [r, w] = s.pipe2(0).unwrap();
        l.rec("add pipe", s.epoll_ctl(ep, ADD, r, Some((IN, 3))));
        l.rec("write", s.write(w, b"x"));
        l.rec("close read end", s.close(r));
        l.rec("pipe gone", s.epoll_wait(ep, 4, 0));
        l.rec("write no reader", s.write(w, b"x"));
        s.close(w).unwrap();
        s.close(ep).unwrap();
        s.close(ep2).unwrap();
    });
}

#[test]
fn nested_epoll_and_loops() {
    differential(|s, l| {
        let inner = s.epoll_create1(0).unwrap();
        let outer = s.epoll_create1(0).unwrap();
        let efd = s.eventfd(0, libc::EFD_NONBLOCK).unwrap();
        l.rec("inner add", s.epoll_ctl(inner, ADD, efd, Some((IN, 1))));
        l.rec(
            "outer add inner",
            s.epoll_ctl(outer, ADD, inner, Some((IN, 2))),
        );
        l.rec("outer idle", s.epoll_wait(outer, 4, 0));
        l.rec("sig", s.write(efd, &U64_1));
        l.rec("outer ready", s.epoll_wait(outer, 4, 0));
        l.rec("inner", s.epoll_wait(inner, 4, 0));
        l.rec("self", s.epoll_ctl(inner, ADD, inner, Some((IN, 3))));
        l.rec("loop", s.epoll_ctl(inner, ADD, outer, Some((IN, 3))));
        // A chain: each new epoll watches the previous one; Linux refuses past its depth.
        let mut chain = vec![outer];
        for i in 0..6 {
            let e = s.epoll_create1(0).unwrap();
            l.rec(
                &format!("chain {i}"),
                s.epoll_ctl(e, ADD, *chain.last().unwrap(), Some((IN, 10 + i))),
            );
            chain.push(e);
        }
        l.rec("drain", s.read(efd, 8));
        l.rec("outer after drain", s.epoll_wait(outer, 4, 0));
        // Closing the inner epoll removes it from the outer one.
        l.rec("sig again", s.write(efd, &U64_1));
        l.rec("close inner", s.close(inner));
        l.rec("outer after close", s.epoll_wait(outer, 4, 0));
        for fd in chain.into_iter().chain([efd]) {
            s.close(fd).unwrap();
        }
        assert!(l
            .0
            .iter()
            .any(|x| x.starts_with("chain") && x.ends_with("Err(40)")));
    });
}

#[test]
fn hup_and_err_on_pipe_close() {
    differential(|s, l| {
        let ep = s.epoll_create1(0).unwrap();
        let [r, w] = s.pipe2(libc::O_NONBLOCK).unwrap();
        l.rec("add r", s.epoll_ctl(ep, ADD, r, Some((IN | RDHUP, 1))));
        l.rec("add w", s.epoll_ctl(ep, ADD, w, Some((OUT | ET, 2))));
        l.rec("initial", s.epoll_wait(ep, 4, 0));
        l.rec("write", s.write(w, b"hi"));
        l.rec("close w", s.close(w));
        l.rec("hup", s.epoll_wait(ep, 4, 0));
        l.rec("poll r", s.poll(&[(r, libc::POLLIN)], 0));
        l.rec("read data", s.read(r, 8));
        l.rec("eof", s.read(r, 8));
        l.rec("hup still", s.epoll_wait(ep, 4, 0));
        let [r2, w2] = s.pipe2(0).unwrap();
        l.rec("add w2", s.epoll_ctl(ep, ADD, w2, Some((OUT, 3))));
        l.rec("close r2", s.close(r2));
        l.rec("err", s.epoll_wait(ep, 4, 0));
        l.rec("poll w2", s.poll(&[(w2, libc::POLLOUT)], 0));
        l.rec("epipe", s.write(w2, b"x"));
        for fd in [r, w2, ep] {
            s.close(fd).unwrap();
        }
    });
}

#[test]
fn errno_cases() {
    differential(|s, l| {
        let ep = s.epoll_create1(0).unwrap();
        let reg = s.regular().unwrap();
        let efd = s.eventfd(0, libc::EFD_NONBLOCK).unwrap();
        l.rec("regular", s.epoll_ctl(ep, ADD, reg, Some((IN, 1))));
        l.rec("not epoll", s.epoll_ctl(efd, ADD, efd, Some((IN, 1))));
        l.rec(
            "not epoll, regular target",
            s.epoll_ctl(reg, ADD, reg, Some((IN, 1))),
        );
        l.rec("bad epfd", s.epoll_ctl(BADFD, ADD, efd, Some((IN, 1))));
        l.rec("bad fd", s.epoll_ctl(ep, ADD, BADFD, Some((IN, 1))));
        l.rec("bad op", s.epoll_ctl(ep, 99, efd, Some((IN, 1))));
        l.rec("null event", s.epoll_ctl(ep, ADD, efd, None));
        l.rec("wait maxevents 0", s.epoll_wait(ep, 0, 0));
        l.rec("wait bad fd", s.epoll_wait(BADFD, 1, 0));
        l.rec("wait not epoll", s.epoll_wait(efd, 1, 0));
        l.rec("create bad flags", s.epoll_create1(1));
        l.rec("pipe bad flags", s.pipe2(libc::O_APPEND).map(|_| ()));
        l.rec(
            "eventfd bad flags",
            s.eventfd(0, libc::O_APPEND).map(|_| ()),
        );
        l.rec("eventfd empty", s.read(efd, 8));
        l.rec("eventfd short read", s.read(efd, 4));
        l.rec("eventfd short write", s.write(efd, &[1, 2, 3]));
        l.rec("eventfd max", s.write(efd, &u64::MAX.to_ne_bytes()));
        l.rec(
            "eventfd long write",
            s.write(efd, &[2, 0, 0, 0, 0, 0, 0, 0, 9, 9]),
        );
        l.rec("eventfd read", s.read(efd, 16));
        l.rec("eventfd fill", s.write(efd, &(u64::MAX - 1).to_ne_bytes()));
        l.rec("eventfd overflow", s.write(efd, &U64_1));
        l.rec(
            "eventfd poll",
            s.poll(&[(efd, libc::POLLIN | libc::POLLOUT)], 0),
        );
        let sem = s
            .eventfd(2, libc::EFD_SEMAPHORE | libc::EFD_NONBLOCK)
            .unwrap();
        l.rec("sem 1", s.read(sem, 8));
        l.rec("sem 2", s.read(sem, 8));
        l.rec("sem 3", s.read(sem, 8));
        let [r, w] = s.pipe2(libc::O_NONBLOCK).unwrap();
        l.rec("pipe empty", s.read(r, 8));
        l.rec("pipe read on write end", s.read(w, 8));
        l.rec("pipe write on read end", s.write(r, b"x"));
        l.rec("pipe lseek", s.lseek(r, 0, libc::SEEK_CUR));
        l.rec("eventfd lseek", s.lseek(efd, 0, libc::SEEK_CUR));
        l.rec(
            "pipe fstat",
            s.fstat(r).map(|(m, sz)| (m & libc::S_IFMT, m & 0o777, sz)),
        );
        l.rec("eventfd fstat", s.fstat(efd).map(|(m, _)| m));
        l.rec("epoll fstat", s.fstat(ep).map(|(m, _)| m));
        // Fill the pipe, then EAGAIN.
        let chunk = vec![7u8; 4096];
        let mut total = 0;
        let last = loop {
            match s.write(w, &chunk) {
                Ok(n) => total += n,
                Err(e) => break e,
            }
        };
        l.rec("filled", (total, last));
        for fd in [ep, reg, efd, sem, r, w] {
            s.close(fd).unwrap();
        }
    });
}

#[test]
fn poll_mixed_fds() {
    differential(|s, l| {
        let reg = s.regular().unwrap();
        let efd = s.eventfd(3, libc::EFD_NONBLOCK).unwrap();
        let efd0 = s.eventfd(0, libc::EFD_NONBLOCK).unwrap();
        let [r, w] = s.pipe2(libc::O_NONBLOCK).unwrap();
        let ep = s.epoll_create1(0).unwrap();
        l.rec("ep add", s.epoll_ctl(ep, ADD, efd, Some((IN, 1))));
        let all = libc::POLLIN | libc::POLLOUT | libc::POLLPRI;
        let set = [
            (reg, all),
            (efd, libc::POLLIN),
            (efd0, libc::POLLIN),
            (r, libc::POLLIN),
            (w, libc::POLLOUT),
            (BADFD, libc::POLLIN),
            (-1, libc::POLLIN),
            (ep, libc::POLLIN),
        ];
        l.rec("poll", s.poll(&set, 0));
        l.rec(
            "poll empty pipe only",
            s.poll(&[(r, libc::POLLIN), (efd0, libc::POLLIN)], 10),
        );
        l.rec("write", s.write(w, b"z"));
        l.rec("poll pipe ready", s.poll(&[(r, libc::POLLIN)], 10));
        for fd in [reg, efd, efd0, r, w, ep] {
            s.close(fd).unwrap();
        }
    });
}

#[test]
fn fcntl_flags_and_pipe_size() {
    differential(|s, l| {
        let [r, w] = s.pipe2(libc::O_CLOEXEC).unwrap();
        let efd = s
            .eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK)
            .unwrap();
        let ep = s.epoll_create1(libc::EPOLL_CLOEXEC).unwrap();
        let ep0 = s.epoll_create1(0).unwrap();
        for (n, fd) in [("r", r), ("w", w), ("efd", efd), ("ep", ep), ("ep0", ep0)] {
            l.rec(&format!("getfd {n}"), s.fcntl(fd, libc::F_GETFD, 0));
            l.rec(&format!("getfl {n}"), s.fcntl(fd, libc::F_GETFL, 0));
        }
        l.rec(
            "setfl nonblock",
            s.fcntl(r, libc::F_SETFL, libc::O_NONBLOCK as i64),
        );
        l.rec("getfl r", s.fcntl(r, libc::F_GETFL, 0));
        l.rec("read eagain", s.read(r, 4));
        l.rec("efd clear nonblock", s.fcntl(efd, libc::F_SETFL, 0));
        l.rec("getfl efd", s.fcntl(efd, libc::F_GETFL, 0));
        l.rec(
            "efd set nonblock",
            s.fcntl(efd, libc::F_SETFL, libc::O_NONBLOCK as i64),
        );
        l.rec("efd read eagain", s.read(efd, 8));
        l.rec("getpipe", s.fcntl(r, libc::F_GETPIPE_SZ, 0));
        l.rec("set 0", s.fcntl(w, libc::F_SETPIPE_SZ, 0));
        l.rec("set 10000", s.fcntl(w, libc::F_SETPIPE_SZ, 10000));
        l.rec("get via r", s.fcntl(r, libc::F_GETPIPE_SZ, 0));
        l.rec("fill", s.write(w, &[1u8; 12288]));
        l.rec("shrink busy", s.fcntl(w, libc::F_SETPIPE_SZ, 4096));
        l.rec("on eventfd", s.fcntl(efd, libc::F_GETPIPE_SZ, 0));
        l.rec("set on eventfd", s.fcntl(efd, libc::F_SETPIPE_SZ, 4096));
        for fd in [r, w, efd, ep, ep0] {
            s.close(fd).unwrap();
        }
    });
}

/// `epoll_wait`'s checks in Linux 6.15+'s order: the descriptor (`EBADF`) before the
/// event count, then the count and the file's type (`EINVAL`).
#[test]
fn wait_checks_the_descriptor_before_the_count() {
    differential(|s, l| {
        let ep = s.epoll_create1(0).unwrap();
        let efd = s.eventfd(0, libc::EFD_NONBLOCK).unwrap();
        l.rec("bad fd, no room", s.epoll_wait(BADFD, 0, 0));
        l.rec("bad fd, room", s.epoll_wait(BADFD, 1, 0));
        l.rec("not an epoll, no room", s.epoll_wait(efd, 0, 0));
        l.rec("not an epoll, room", s.epoll_wait(efd, 1, 0));
        l.rec("epoll, no room", s.epoll_wait(ep, 0, 0));
        l.rec("epoll, room", s.epoll_wait(ep, 1, 0));
        s.close(efd).unwrap();
        s.close(ep).unwrap();
    });
}
