//! Which locks the seed's hot path takes, measured with lockstat (its own test binary, so
//! no other test's locking is counted): in the scalable design a path walk, open, read and
//! close of an attribute takes no tree, directory or global lock — only the node's hashed
//! open-file mutex (twice) and the open file's own mutex; the legacy design takes the tree
//! rwsem on every step and the global open-node lock on open and close. `notify` takes the
//! poll wait queue's mutex only when a poller is registered.

use scalevfs_kernfs::demo::{demo_tree, gid_path};
use scalevfs_kernfs::*;
use scalevfs_primitives::lockstat::{self, LockClass};

fn acq(c: &'static LockClass) -> u64 {
    let s = c.stats();
    s.read.acquisitions + s.write.acquisitions
}

fn footprint(locking: Locking) -> Vec<(&'static str, u64)> {
    let fs = Kernfs::new(locking);
    let _t = demo_tree(&fs).unwrap();
    let user = Creds::new(1000, 1000, &[]);
    lockstat_reset();
    lockstat::enable();
    for i in 0..10 {
        let n = fs.lookup_path(gid_path(i), &user, true).unwrap();
        let of = fs
            .open(&n, libc::O_RDONLY | libc::O_CLOEXEC, &user)
            .unwrap();
        let mut buf = [0u8; 40];
        assert_eq!(of.read(&mut buf).unwrap(), 40);
    }
    lockstat::disable();
    lock_classes().iter().map(|c| (c.name(), acq(c))).collect()
}

fn lockstat_reset() {
    lock_classes().iter().for_each(|c| c.reset());
}

#[test]
fn hot_path_lock_footprint() {
    let get = |v: &[(&str, u64)], name: &str| v.iter().find(|(n, _)| *n == name).unwrap().1;
    let s = footprint(Locking::Scalable);
    // 10 opens + 10 closes on the hashed mutexes, 10 reads under the open file's mutex.
    assert_eq!(get(&s, "kernfs_open_file_mutex"), 20, "{s:?}");
    assert_eq!(get(&s, "kernfs_of_mutex"), 10, "{s:?}");
    for none in [
        "kernfs_rwsem",
        "kernfs_dir_mutex",
        "kernfs_rename_mutex",
        "kernfs_node_linkage",
        "kernfs_open_node_lock",
        "kernfs_poll_waitq",
    ] {
        assert_eq!(get(&s, none), 0, "{none}: {s:?}");
    }
    let l = footprint(Locking::Legacy);
    assert_eq!(get(&l, "kernfs_open_file_mutex"), 20, "{l:?}");
    assert_eq!(get(&l, "kernfs_open_node_lock"), 20, "{l:?}");
    // 7 components: a permission check and a lookup each, plus open's permission check.
    assert_eq!(get(&l, "kernfs_rwsem"), 10 * (7 * 2 + 1), "{l:?}");
    assert_eq!(get(&l, "kernfs_dir_mutex"), 0, "{l:?}");

    // notify takes the poll wait queue's mutex only when a poller is registered.
    for locking in [Locking::Scalable, Locking::Legacy] {
        let fs = Kernfs::new(locking);
        let t = demo_tree(&fs).unwrap();
        let of = fs.open(&t.knob, libc::O_RDONLY, &Creds::ROOT).unwrap();
        of.read(&mut [0u8; 16]).unwrap();
        let waitq = |fs: &Kernfs| {
            lockstat_reset();
            lockstat::enable();
            for _ in 0..10 {
                fs.notify(&t.knob);
            }
            lockstat::disable();
            acq(&file::POLL_WAITQ_CLASS)
        };
        assert_eq!(waitq(&fs), 0, "{locking:?}: no poller");
        assert_eq!(of.poll(), DEFAULT_POLLMASK | POLL_CHANGED);
        let key = of.add_waiter(std::sync::Arc::new(|_| {})).unwrap();
        assert_eq!(waitq(&fs), 10, "{locking:?}: a poller");
        assert!(of.remove_waiter(key));
        assert_eq!(waitq(&fs), 0, "{locking:?}: poller gone");
    }
}
