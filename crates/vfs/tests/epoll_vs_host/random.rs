//! Random scripts of non-blocking calls, run on both sides.

use super::*;

/// Random scripts of non-blocking calls over a handful of pipes, eventfds, epolls and a
/// regular file (nesting, closes without DEL, oneshot, ET, MOD, bad handles included),
/// run on both sides; every result must match.
pub(super) fn random_script(s: &mut dyn Sys, t: &mut Trace, seed: u64) {
    use rand::{Rng, SeedableRng};
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut hs: Vec<H> = Vec::new();
    // Regular files only take part in ctl and poll (our side has no file contents).
    let mut regular: Vec<H> = Vec::new();
    let mut eps: Vec<H> = Vec::new();
    let flag_set = [
        IN,
        OUT,
        IN | OUT,
        IN | EPOLLET,
        OUT | EPOLLET,
        IN | EPOLLONESHOT,
        IN | EPOLLRDHUP,
        IN | EPOLLEXCLUSIVE,
        IN | OUT | EPOLLET | EPOLLONESHOT,
        EPOLLPRI,
    ];
    let steps: usize = std::env::var("EPOLL_STEPS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(80);
    for step in 0..steps {
        let pick = |rng: &mut rand::rngs::StdRng, hs: &Vec<H>| hs[rng.gen_range(0..hs.len())];
        // Mostly live epolls for ctl/wait; closes are rarer than the rest.
        let op = if hs.len() < 3 {
            0
        } else {
            [
                0, 0, 1, 1, 2, 2, 3, 4, 4, 5, 6, 6, 7, 8, 8, 9, 10, 10, 11, 0,
            ][rng.gen_range(0..20)]
        };
        let pick_ep = |rng: &mut rand::rngs::StdRng, hs: &Vec<H>, eps: &Vec<H>| {
            if !eps.is_empty() && rng.gen_bool(0.9) {
                eps[rng.gen_range(0..eps.len())]
            } else {
                hs[rng.gen_range(0..hs.len())]
            }
        };
        let tag = format!("{step} op{op}");
        match op {
            0 => match rng.gen_range(0..4) {
                0 => {
                    let (r, w) = s.pipe(libc::O_NONBLOCK).unwrap();
                    t.log(&format!("{tag} pipe"), (r, w));
                    hs.extend([r, w]);
                }
                1 => {
                    let h = s.eventfd(rng.gen_range(0..2), libc::EFD_NONBLOCK).unwrap();
                    t.log(&format!("{tag} eventfd"), h);
                    hs.push(h);
                }
                2 => {
                    let h = s.epoll();
                    t.log(&format!("{tag} epoll"), h);
                    eps.push(h);
                    hs.push(h);
                }
                _ => {
                    let h = s.regular();
                    t.log(&format!("{tag} regular"), h);
                    regular.push(h);
                    hs.push(h);
                }
            },
            1..=3 => {
                let (ep, h) = (pick_ep(&mut rng, &hs, &eps), pick(&mut rng, &hs));
                let op = [ADD, ADD, MOD, DEL][rng.gen_range(0..4)];
                let ev = flag_set[rng.gen_range(0..flag_set.len())];
                t.log(
                    &format!("{tag} ctl ep{ep} op{op} h{h} {ev:#x}"),
                    s.ctl(ep, op, h, ev, h as u64),
                );
            }
            4 | 5 => {
                let ep = pick_ep(&mut rng, &hs, &eps);
                t.log(
                    &format!("{tag} wait ep{ep}"),
                    s.wait(ep, rng.gen_range(1..4), 0),
                );
            }
            6 | 7 => {
                let h = pick(&mut rng, &hs);
                if regular.contains(&h) {
                    continue;
                }
                let data: Vec<u8> = match rng.gen_range(0..3) {
                    0 => one(rng.gen_range(0..3)).to_vec(),
                    1 => vec![7u8; rng.gen_range(1..5000)],
                    _ => vec![7u8; 70000],
                };
                t.log(
                    &format!("{tag} write h{h} {}", data.len()),
                    s.write(h, &data),
                );
            }
            8 => {
                let h = pick(&mut rng, &hs);
                if regular.contains(&h) {
                    continue;
                }
                let n = [8, 100, 70000][rng.gen_range(0..3)];
                t.log(
                    &format!("{tag} read h{h} {n}"),
                    s.read(h, n).map(|v| v.len()),
                );
            }
            9 => {
                let h = pick(&mut rng, &hs);
                s.close(h);
                eps.retain(|&e| e != h);
                t.log(&tag, ("close", h));
            }
            10 => {
                let q: Vec<(H, u16)> = (0..3)
                    .map(|_| (pick(&mut rng, &hs), flag_set[rng.gen_range(0..4)] as u16))
                    .collect();
                t.log(&format!("{tag} poll {q:?}"), s.poll(&q, 0));
            }
            _ => {
                let h = pick(&mut rng, &hs);
                let n = [4096, 8192, 65536][rng.gen_range(0..3)];
                t.log(&format!("{tag} setsz h{h} {n}"), s.set_pipe_size(h, n));
            }
        }
    }
}

#[test]
fn diff_random_scripts() {
    let seeds: u64 = std::env::var("EPOLL_SEEDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(300);
    let first: u64 = std::env::var("EPOLL_SEED0")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    for seed in first..first + seeds {
        let f = move |s: &mut dyn Sys, t: &mut Trace| random_script(s, t, seed);
        run_closure(&format!("random seed {seed}"), &f);
    }
}
