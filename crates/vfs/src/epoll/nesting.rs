//! The nesting checks of `EPOLL_CTL_ADD` of an epoll into an epoll (Linux 6.x's
//! `ep_loop_check`): no cycle and no chain of more than [`EP_MAX_NESTS`] epoll-to-epoll
//! edges. Run under `EpollContext::nested`; every instance visited is kept alive by an
//! `Arc` clone taken under the lock of the container it comes from (module docs of
//! `epoll`).

use std::collections::HashMap;
use std::sync::Arc;

use super::{EventPoll, EP_MAX_NESTS};
use crate::poll::Pollable;
use crate::Errno;

/// `ep_loop_check` (Linux 6.x): `ELOOP` if adding `to` into `ep` would close a cycle or
/// make a chain of more than `EP_MAX_NESTS` epoll-to-epoll edges. Caller holds
/// `ctx.nested`. Every instance visited is kept alive by an `Arc` in `keep`.
pub(super) fn loop_check(ep: &EventPoll, to: &EventPoll) -> Result<(), Errno> {
    let mut keep: Vec<Arc<dyn Pollable>> = Vec::new();
    let mut memo = HashMap::new();
    let down = depth_down(to, ep, 0, &mut memo, &mut keep);
    if down > EP_MAX_NESTS {
        return Err(Errno::ELOOP);
    }
    let mut keep_up: Vec<Arc<EventPoll>> = Vec::new();
    let up = depth_up(ep, &mut HashMap::new(), &mut keep_up);
    if down + 1 + up > EP_MAX_NESTS {
        return Err(Errno::ELOOP);
    }
    Ok(())
}

fn depth_down(
    ep: &EventPoll,
    inserting: &EventPoll,
    depth: usize,
    memo: &mut HashMap<*const EventPoll, usize>,
    keep: &mut Vec<Arc<dyn Pollable>>,
) -> usize {
    if let Some(&d) = memo.get(&(ep as *const _)) {
        return d;
    }
    let children: Vec<Arc<dyn Pollable>> = ep
        .items
        .all()
        .into_iter()
        .filter(|it| it.target.as_epoll().is_some())
        .map(|it| it.target.clone())
        .collect();
    let mut result = 0;
    for c in &children {
        let t = c.as_epoll().expect("filtered");
        if std::ptr::eq(t, inserting) || depth > EP_MAX_NESTS {
            result = EP_MAX_NESTS + 1;
        } else {
            result = result.max(depth_down(t, inserting, depth + 1, memo, keep) + 1);
        }
        if result > EP_MAX_NESTS {
            break;
        }
    }
    keep.extend(children);
    memo.insert(ep as *const _, result);
    result
}

fn depth_up(
    ep: &EventPoll,
    memo: &mut HashMap<*const EventPoll, usize>,
    keep: &mut Vec<Arc<EventPoll>>,
) -> usize {
    if let Some(&d) = memo.get(&(ep as *const _)) {
        return d;
    }
    let parents: Vec<Arc<EventPoll>> = ep
        .links
        .items
        .lock()
        .iter()
        .map(|it| Arc::clone(&it.ep))
        .collect();
    let mut result = 0;
    for p in &parents {
        result = result.max(depth_up(p, memo, keep) + 1);
    }
    keep.extend(parents);
    memo.insert(ep as *const _, result);
    result
}
