//! Memory per empty file with the counting allocator installed, as the CLI installs it.

use scalevfs::Locking;
use scalevfs_bench::memory::{measure_all, measure_per_empty_file, CountingAlloc};

#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc;

#[test]
fn counts_the_objects_of_each_file() {
    for locking in [Locking::Scalable, Locking::Legacy] {
        let b = measure_per_empty_file(locking, 2000).expect("the counting allocator is installed");
        // An inode, a dentry and a directory entry cannot fit in 100 bytes; a regression that
        // doubles the cost (Linux tmpfs: about 800) is caught.
        assert!(
            b > 100.0 && b < 1024.0,
            "{locking:?}: {b} bytes per empty file"
        );
    }
    let all = measure_all(1000);
    assert_eq!(
        all.iter().map(|m| m.design.as_str()).collect::<Vec<_>>(),
        ["legacy", "scalable"]
    );
}
