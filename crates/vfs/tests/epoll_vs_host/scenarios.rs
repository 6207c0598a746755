//! Fixed scenarios: level and edge triggering, oneshot, closes without DEL, ordering, nesting, errnos, pipe capacity, poll.

use super::*;

pub(super) fn level_vs_edge(s: &mut dyn Sys, t: &mut Trace) {
    let (lt, et) = (s.epoll(), s.epoll());
    let (r, w) = s.pipe(libc::O_NONBLOCK).unwrap();
    t.log("add lt", s.ctl(lt, ADD, r, IN, 1));
    t.log("add et", s.ctl(et, ADD, r, IN | EPOLLET, 2));
    t.log("empty lt", s.wait(lt, 8, 0));
    t.log("write", s.write(w, b"abc"));
    for i in 0..2 {
        t.log(&format!("lt {i}"), s.wait(lt, 8, 0));
        t.log(&format!("et {i}"), s.wait(et, 8, 0));
    }
    t.log("read 1", s.read(r, 1));
    t.log("lt after partial read", s.wait(lt, 8, 0));
    t.log("et after partial read", s.wait(et, 8, 0));
    t.log("write again", s.write(w, b"d"));
    t.log("et after new data", s.wait(et, 8, 0));
    t.log("read rest", s.read(r, 100));
    t.log("lt drained", s.wait(lt, 8, 0));
    t.log("read empty", s.read(r, 100));
    // Edge-triggered write end: EPOLLOUT edges come when the pipe stops being full.
    t.log("add et w", s.ctl(et, ADD, w, OUT | EPOLLET, 3));
    t.log("et w initial", s.wait(et, 8, 0));
    t.log("fill", s.write(w, &vec![0u8; 70000]));
    t.log("et w full", s.wait(et, 8, 0));
    t.log("read small", s.read(r, 10).map(|v| v.len()));
    t.log("et after read from full", s.wait(et, 8, 0));
    t.log("read small again", s.read(r, 10).map(|v| v.len()));
    t.log("et after read not from full", s.wait(et, 8, 0));
}

pub(super) fn oneshot_and_mod(s: &mut dyn Sys, t: &mut Trace) {
    let ep = s.epoll();
    let e = s.eventfd(0, libc::EFD_NONBLOCK).unwrap();
    t.log("add oneshot", s.ctl(ep, ADD, e, IN | EPOLLONESHOT, 7));
    t.log("none", s.wait(ep, 4, 0));
    t.log("signal", s.write(e, &one(1)));
    t.log("fires", s.wait(ep, 4, 0));
    t.log("disarmed", s.wait(ep, 4, 0));
    t.log("signal again", s.write(e, &one(1)));
    t.log("still disarmed", s.wait(ep, 4, 0));
    t.log("rearm", s.ctl(ep, MOD, e, IN | EPOLLONESHOT, 8));
    t.log("fires after rearm", s.wait(ep, 4, 0));
    t.log("mod to OUT", s.ctl(ep, MOD, e, OUT, 9));
    t.log("out", s.wait(ep, 4, 0));
    t.log("mod to IN|ET", s.ctl(ep, MOD, e, IN | EPOLLET, 10));
    t.log("et once", s.wait(ep, 4, 0));
    t.log("et none", s.wait(ep, 4, 0));
    t.log("write 0 wakes", s.write(e, &one(0)));
    t.log("et after write 0", s.wait(ep, 4, 0));
    t.log("read", s.read(e, 8));
    t.log(
        "mod IN|RDHUP|PRI",
        s.ctl(ep, MOD, e, IN | EPOLLRDHUP | EPOLLPRI, 11),
    );
    t.log("nothing", s.wait(ep, 4, 0));
    t.log("del", s.ctl(ep, DEL, e, 0, 0));
    t.log("del again", s.ctl(ep, DEL, e, 0, 0));
    t.log("mod missing", s.ctl(ep, MOD, e, IN, 0));
    t.log("add", s.ctl(ep, ADD, e, IN, 12));
    t.log("add twice", s.ctl(ep, ADD, e, IN, 12));
    t.log("bad op", s.ctl(ep, 9, e, IN, 12));
    t.log("write", s.write(e, &one(5)));
    t.log("after re-add", s.wait(ep, 4, 0));
}

pub(super) fn close_without_del(s: &mut dyn Sys, t: &mut Trace) {
    let ep = s.epoll();
    let (r, w) = s.pipe(libc::O_NONBLOCK).unwrap();
    let (r2, w2) = s.pipe(libc::O_NONBLOCK).unwrap();
    let e = s.eventfd(3, 0).unwrap();
    t.log("add r", s.ctl(ep, ADD, r, IN | EPOLLRDHUP, 1));
    t.log("add e", s.ctl(ep, ADD, e, IN, 2));
    t.log("add w2", s.ctl(ep, ADD, w2, OUT, 3));
    t.log("add w (ET)", s.ctl(ep, ADD, w, OUT | EPOLLET, 4));
    t.log("initial", s.wait(ep, 8, 0));
    s.close(e);
    t.log("after closing e", s.wait(ep, 8, 0));
    s.close(w);
    t.log("after closing w: HUP, no RDHUP", s.wait(ep, 8, 0));
    t.log("read eof", s.read(r, 10));
    s.close(r2);
    t.log("after closing r2: ERR", s.wait(ep, 8, 0));
    t.log("write epipe", s.write(w2, b"x"));
    t.log("poll", s.poll(&[(r, IN as u16), (w2, OUT as u16)], 0));
    s.close(r);
    s.close(w2);
    t.log("all closed", s.wait(ep, 8, 0));
}

pub(super) fn ordering_and_maxevents(s: &mut dyn Sys, t: &mut Trace) {
    let ep = s.epoll();
    let es: Vec<H> = (0..4)
        .map(|_| s.eventfd(0, libc::EFD_NONBLOCK).unwrap())
        .collect();
    for (i, &e) in es.iter().enumerate() {
        let et = if i % 2 == 1 { EPOLLET } else { 0 };
        t.log("add", s.ctl(ep, ADD, e, IN | et, i as u64));
    }
    for &i in &[2usize, 0, 3, 1] {
        t.log("write", s.write(es[i], &one(1)));
    }
    t.log("maxevents 0", s.wait(ep, 0, 0));
    for k in 0..4 {
        t.log(&format!("wait 3 #{k}"), s.wait(ep, 3, 0));
    }
    t.log("write 3", s.write(es[3], &one(1)));
    t.log("wait 1", s.wait(ep, 1, 0));
    t.log("wait 8", s.wait(ep, 8, 0));
}

pub(super) fn nested(s: &mut dyn Sys, t: &mut Trace) {
    let (outer, inner) = (s.epoll(), s.epoll());
    let e = s.eventfd(0, libc::EFD_NONBLOCK).unwrap();
    t.log("self add", s.ctl(outer, ADD, outer, IN, 0));
    t.log("inner watches e", s.ctl(inner, ADD, e, IN, 1));
    t.log("outer watches inner", s.ctl(outer, ADD, inner, IN, 2));
    t.log("loop", s.ctl(inner, ADD, outer, IN, 3));
    t.log(
        "exclusive on epoll",
        s.ctl(outer, MOD, inner, IN | EPOLLEXCLUSIVE, 3),
    );
    t.log("outer quiet", s.wait(outer, 4, 0));
    t.log("signal", s.write(e, &one(1)));
    t.log("outer sees inner", s.wait(outer, 4, 0));
    t.log("poll inner", s.poll(&[(inner, IN as u16)], 0));
    t.log("inner sees e", s.wait(inner, 4, 0));
    t.log("drain", s.read(e, 8));
    t.log("outer quiet again", s.wait(outer, 4, 0));
    t.log("signal 2", s.write(e, &one(1)));
    s.close(inner);
    t.log("outer after inner closed", s.wait(outer, 4, 0));
    // Depth: chains of epolls, built downwards and upwards.
    let p = s.eventfd(0, 0).unwrap();
    let mut prev = p;
    for i in 0..7 {
        let ep = s.epoll();
        let r = s.ctl(ep, ADD, prev, IN, 0);
        t.log(&format!("down chain {i}"), r);
        if r.is_err() {
            break;
        }
        prev = ep;
    }
    let eps: Vec<H> = (0..8).map(|_| s.epoll()).collect();
    for i in 0..7 {
        let r = s.ctl(eps[i], ADD, eps[i + 1], IN, 0);
        t.log(&format!("up chain {i}"), r);
        if r.is_err() {
            break;
        }
    }
    // A diamond is not a loop.
    let (a, b, c, d) = (s.epoll(), s.epoll(), s.epoll(), s.epoll());
    t.log("a>b", s.ctl(a, ADD, b, IN, 0));
    t.log("a>c", s.ctl(a, ADD, c, IN, 0));
    t.log("b>d", s.ctl(b, ADD, d, IN, 0));
    t.log("c>d", s.ctl(c, ADD, d, IN, 0));
    t.log("d>a", s.ctl(d, ADD, a, IN, 0));
    s.close(b);
    t.log("d>a after closing b", s.ctl(d, ADD, a, IN, 0));
    s.close(c);
    t.log("d>a after closing c", s.ctl(d, ADD, a, IN, 0));
}

pub(super) fn errnos(s: &mut dyn Sys, t: &mut Trace) {
    let ep = s.epoll();
    let f = s.regular();
    let (r, w) = s.pipe(libc::O_NONBLOCK).unwrap();
    t.log("regular file", s.ctl(ep, ADD, f, IN, 0));
    t.log("regular del", s.ctl(ep, DEL, f, IN, 0));
    t.log("not an epoll", s.ctl(r, ADD, w, IN, 0));
    t.log(
        "poll regular",
        s.poll(&[(f, (IN | OUT | EPOLLPRI) as u16)], 0),
    );
    t.log(
        "excl+oneshot",
        s.ctl(ep, ADD, r, IN | EPOLLEXCLUSIVE | EPOLLONESHOT, 0),
    );
    t.log(
        "excl+rdhup",
        s.ctl(ep, ADD, r, IN | EPOLLEXCLUSIVE | EPOLLRDHUP, 0),
    );
    t.log(
        "excl ok",
        s.ctl(ep, ADD, r, IN | EPOLLEXCLUSIVE | EPOLLET, 0),
    );
    t.log("mod excl item", s.ctl(ep, MOD, r, IN, 0));
    t.log("mod with excl", s.ctl(ep, MOD, w, IN | EPOLLEXCLUSIVE, 0));
    t.log("del excl item", s.ctl(ep, DEL, r, 0, 0));
    t.log("read eagain", s.read(r, 1));
    t.log("read 0", s.read(r, 0));
    t.log("write 0", s.write(w, b""));
    t.log("pipe2 bad flags", s.pipe(0x10).map(|_| ()));
    let e = s.eventfd(0, libc::EFD_NONBLOCK).unwrap();
    t.log("efd short read", s.read(e, 7));
    t.log("efd short write", s.write(e, &[1, 0, 0]));
    t.log("efd long write", s.write(e, &[1; 12]));
    t.log("efd long read", s.read(e, 16));
    t.log("efd max", s.write(e, &one(u64::MAX)));
    t.log("efd near max", s.write(e, &one(u64::MAX - 1)));
    t.log("efd overflow", s.write(e, &one(1)));
    t.log("efd poll full", s.poll(&[(e, (IN | OUT) as u16)], 0));
    t.log("efd read", s.read(e, 8));
    t.log("efd empty", s.read(e, 8));
    t.log("efd bad flags", s.eventfd(0, 0x40).map(|_| ()));
    let se = s
        .eventfd(3, libc::EFD_SEMAPHORE | libc::EFD_NONBLOCK)
        .unwrap();
    for i in 0..4 {
        t.log(&format!("sem read {i}"), s.read(se, 8));
    }
    s.close(r);
    t.log("epipe", s.write(w, b"x"));
}

pub(super) fn pipe_capacity(s: &mut dyn Sys, t: &mut Trace) {
    let (r, w) = s.pipe(libc::O_NONBLOCK).unwrap();
    let mut n = 0;
    for _ in 0..5000 {
        if s.write(w, b"x").is_ok() {
            n += 1;
        }
    }
    t.log("byte writes", n);
    t.log("big", s.write(w, &vec![1u8; 100_000]));
    t.log("one more", s.write(w, b"y"));
    t.log("read 10", s.read(r, 10).map(|v| v.len()));
    t.log("full still", s.write(w, b"y"));
    t.log("read 5000", s.read(r, 5000).map(|v| v.len()));
    t.log("write 5000", s.write(w, &[2u8; 5000]));
    t.log("write 100", s.write(w, &[2u8; 100]));
    t.log("poll", s.poll(&[(r, IN as u16), (w, OUT as u16)], 0));
    t.log("shrink busy", s.set_pipe_size(w, 4096));
    t.log("drain", s.read(r, 1 << 20).map(|v| v.len()));
    t.log("drain 2", s.read(r, 1 << 20).map(|v| v.len()));
    t.log("shrink", s.set_pipe_size(w, 100));
    t.log("grow odd", s.set_pipe_size(r, 5 * 4096));
    t.log("huge", s.set_pipe_size(r, u32::MAX));
    t.log("write 40000", s.write(w, &[3u8; 40000]));
    t.log("write 4096", s.write(w, &[3u8; 4096]));
    t.log("write 1", s.write(w, &[3u8; 1]));
}

pub(super) fn polls(s: &mut dyn Sys, t: &mut Trace) {
    let (r, w) = s.pipe(0).unwrap();
    let e = s.eventfd(0, 0).unwrap();
    let q = (IN | OUT | EPOLLRDHUP) as u16;
    t.log("initial", s.poll(&[(r, q), (w, q), (e, q)], 0));
    t.log("write", s.write(w, b"x"));
    t.log("after write", s.poll(&[(r, q), (w, 0), (e, IN as u16)], 0));
    t.log("eventfd 1", s.write(e, &one(1)));
    t.log("after eventfd", s.poll(&[(e, IN as u16)], 10));
    s.close(w);
    t.log("writer closed", s.poll(&[(r, IN as u16)], 0));
    t.log("read", s.read(r, 8));
    t.log("eof", s.poll(&[(r, 0)], -1));
    s.close(r);
    t.log("closed fd", s.poll(&[(r, IN as u16), (e, IN as u16)], 0));
}

#[test]
fn diff_level_vs_edge() {
    run("level_vs_edge", level_vs_edge);
}
#[test]
fn diff_oneshot_and_mod() {
    run("oneshot_and_mod", oneshot_and_mod);
}
#[test]
fn diff_close_without_del() {
    run("close_without_del", close_without_del);
}
#[test]
fn diff_ordering_and_maxevents() {
    run("ordering_and_maxevents", ordering_and_maxevents);
}
#[test]
fn diff_nested() {
    run("nested", nested);
}
#[test]
fn diff_errnos() {
    run("errnos", errnos);
}
#[test]
fn diff_pipe_capacity() {
    run("pipe_capacity", pipe_capacity);
}
#[test]
fn diff_polls() {
    run("polls", polls);
}
