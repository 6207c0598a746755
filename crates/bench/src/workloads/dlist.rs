//! dlock-list workloads: the superblock inode list under inode create/evict.
//!
//! `dlist-add-del`: each operation adds an item to the list and removes it again, the shape
//! of `inode_sb_list_add()` at inode creation and `inode_sb_list_del()` at eviction that
//! made `s_inode_list_lock` 71% of the profile in the seed. `legacy` is one list with one
//! lock (`LockedList`), `scalable` one list and lock per CPU (`DList`). There is no `host`
//! design: the kernel's inode list cannot be exercised on its own from user space.

use scalevfs_primitives::dlist::{DList, DListNode, LockedList};

use crate::{Design, Instance, Workload};

/// Add/remove pairs per worker call, to keep the runner's loop out of the measurement.
const BATCH: u64 = 64;

/// Items kept on the list for the whole run, per thread, so that it is not trivially empty
/// (a superblock holds many inodes while others come and go).
const RESIDENT: u64 = 256;

/// This module's workloads, in the order the report lists them.
pub fn workloads() -> Vec<Box<dyn Workload>> {
    vec![Box::new(AddDel)]
}

struct AddDel;

impl Workload for AddDel {
    fn name(&self) -> &'static str {
        "dlist-add-del"
    }

    fn description(&self) -> &'static str {
        "add an item to the inode list, then remove it (inode create/evict; dlock-list series)"
    }

    fn designs(&self) -> &'static [Design] {
        &[Design::Legacy, Design::Scalable]
    }

    fn setup(&self, design: Design, threads: usize) -> Result<Box<dyn Instance>, String> {
        let list: DList<u64> = match design {
            Design::Legacy => LockedList::new().into(),
            Design::Scalable => DList::new(),
            Design::Host => return Err("dlist-add-del has no host design".into()),
        };
        if threads == 0 {
            return Err("dlist-add-del needs at least one thread".into());
        }
        let resident = (0..RESIDENT * threads as u64)
            .map(|i| list.add(i))
            .collect();
        Ok(Box::new(AddDelInstance {
            list,
            _resident: resident,
        }))
    }
}

struct AddDelInstance {
    list: DList<u64>,
    _resident: Vec<DListNode>,
}

impl Instance for AddDelInstance {
    fn worker(&self, thread: usize) -> Box<dyn FnMut() -> u64 + '_> {
        let mut next = (thread as u64) << 40;
        Box::new(move || {
            for _ in 0..BATCH {
                let node = self.list.add(next);
                let removed = self.list.remove(&node);
                debug_assert_eq!(removed, Some(next));
                std::hint::black_box(removed);
                next += 1;
            }
            BATCH
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn add_del_runs_on_two_threads_under_each_design() {
        let w = workloads();
        let w = w
            .iter()
            .find(|w| w.name() == "dlist-add-del")
            .expect("registered");
        assert!(w.setup(Design::Host, 2).is_err());
        for &design in w.designs() {
            let inst = w.setup(design, 2).unwrap();
            std::thread::scope(|s| {
                for t in 0..2 {
                    let inst = &inst;
                    s.spawn(move || {
                        let mut work = inst.worker(t);
                        let ops: u64 = (0..5).map(|_| work()).sum();
                        assert_eq!(ops, 5 * BATCH);
                    });
                }
            });
        }
    }
}
