//! A sysfs-style demo tree: the shape of the workload of Linux's kernfs hashed-lock patches
//! (many processes reading the GID tables of InfiniBand ports).
//!
//! ```text
//! class/infiniband/mlx5_0/ports/1/gids/0..253   GID strings (0444)
//! class/infiniband/mlx5_0/ports/1/{state,rate}  constant attributes
//! class/infiniband/mlx5_0/device -> ../../../devices/pci0000:00/0000:00:03.0
//! devices/pci0000:00/0000:00:03.0/vendor         "0x15b3\n"
//! kernel/scalevfs/knob                            an integer (0644, EINVAL on non-numbers,
//!                                                 notifies its pollers on change)
//! kernel/scalevfs/gid_reads                       how many times a GID was shown (0444)
//! kernel/scalevfs/writes                          how many knob stores succeeded (0444)
//! kernel/scalevfs/lock_stat                       the lockstat table (0444; first 4095 bytes)
//! ```
//!
//! `scalevfs sys` (crates/cli/src/sys.rs) adds `kernel/scalevfs/locks`, the VFS's
//! `/proc/locks`-style listing, to this tree: it needs the `Vfs` the tree is mounted in,
//! which this crate does not know. Other users of [`demo_tree`] (the benchmarks, the
//! FUSE mount's `/sys`) do not have it.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Weak};

use scalevfs_primitives::lockstat;
use scalevfs_primitives::percpu::PerCpuCounter;

use scalevfs_vfs::{Errno, SysResult};

use crate::node::{FnAttr, KernfsNode};
use crate::Kernfs;

/// The InfiniBand device of the demo tree.
pub const DEMO_DEV: &str = "mlx5_0";
/// Its port.
pub const DEMO_PORT: u32 = 1;
/// GID table entries per port (the kernfs hashed-lock patches' workload reads 254).
pub const DEMO_GIDS: usize = 254;

/// Handles to the interesting nodes of the demo tree.
pub struct DemoTree {
    /// The port's `gids/` directory.
    pub gids_dir: Arc<KernfsNode>,
    /// The GID attribute files in `gids/` ([`DEMO_GIDS`] of them).
    pub gids: Vec<Arc<KernfsNode>>,
    /// `kernel/scalevfs/knob`: a writable integer.
    pub knob: Arc<KernfsNode>,
    /// `kernel/scalevfs/gid_reads`: how many times a GID was shown.
    pub gid_reads: Arc<KernfsNode>,
    /// `kernel/scalevfs/writes`: how many knob stores succeeded.
    pub writes: Arc<KernfsNode>,
    /// The device's `device` symlink.
    pub device_link: Arc<KernfsNode>,
    /// `kernel/scalevfs/lock_stat`: `lockstat::report()` (empty of classes unless lockstat
    /// is compiled in and enabled).
    pub lock_stat: Arc<KernfsNode>,
    /// The knob's value, as the embedder sees it.
    pub knob_value: Arc<AtomicI64>,
}

/// The path of GID `i` of the demo tree, relative to the root.
pub fn gid_path(i: usize) -> String {
    format!("class/infiniband/{DEMO_DEV}/ports/{DEMO_PORT}/gids/{i}")
}

/// The content of GID `i`: a link-local GID derived from a made-up port GUID.
pub fn gid_string(i: usize) -> String {
    format!("fe80:0000:0000:0000:0202:c9ff:fe00:{:04x}\n", i)
}

/// `kstrtoint(buf, 10, ..)`: an optional sign, decimal digits, at most one trailing newline.
fn parse_int(data: &[u8]) -> SysResult<i64> {
    let s = data.strip_suffix(b"\n").unwrap_or(data);
    let s = std::str::from_utf8(s).map_err(|_| Errno::EINVAL)?;
    if s.is_empty() || s.starts_with('+') && s.len() == 1 {
        return Err(Errno::EINVAL);
    }
    s.parse::<i32>().map(i64::from).map_err(|e| match e.kind() {
        std::num::IntErrorKind::PosOverflow | std::num::IntErrorKind::NegOverflow => Errno::ERANGE,
        _ => Errno::EINVAL,
    })
}

fn mkdirs(fs: &Kernfs, path: &str) -> SysResult<Arc<KernfsNode>> {
    let mut cur = fs.root().clone();
    for comp in path.split('/') {
        cur = match fs.lookup(&cur, comp) {
            Ok(n) => n,
            Err(_) => fs.create_dir(&cur, comp, 0o755, 0, 0)?,
        };
    }
    Ok(cur)
}

/// Builds the demo tree in `fs` (see the module docs).
pub fn demo_tree(fs: &Kernfs) -> SysResult<DemoTree> {
    // Per CPU, so that counting GID reads does not make every reader write one shared
    // cache line (which would serialize the benchmark on it).
    let reads = Arc::new(PerCpuCounter::new(true));
    let writes = Arc::new(AtomicU64::new(0));
    let knob_value = Arc::new(AtomicI64::new(0));

    let dev = mkdirs(fs, &format!("class/infiniband/{DEMO_DEV}"))?;
    let port = mkdirs(
        fs,
        &format!("class/infiniband/{DEMO_DEV}/ports/{DEMO_PORT}"),
    )?;
    let gids_dir = fs.create_dir(&port, "gids", 0o755, 0, 0)?;
    let gids = (0..DEMO_GIDS)
        .map(|i| {
            let reads = reads.clone();
            let gid = gid_string(i);
            fs.create_file(
                &gids_dir,
                i.to_string(),
                0o444,
                0,
                0,
                FnAttr::ro(move |_, buf| {
                    reads.add(1);
                    buf.extend_from_slice(gid.as_bytes());
                    Ok(())
                }),
            )
        })
        .collect::<SysResult<Vec<_>>>()?;
    fs.create_file(&port, "state", 0o444, 0, 0, FnAttr::constant("4: ACTIVE\n"))?;
    fs.create_file(
        &port,
        "rate",
        0o444,
        0,
        0,
        FnAttr::constant("100 Gb/sec (4X EDR)\n"),
    )?;

    let pci = mkdirs(fs, "devices/pci0000:00/0000:00:03.0")?;
    fs.create_file(&pci, "vendor", 0o444, 0, 0, FnAttr::constant("0x15b3\n"))?;
    let device_link = fs.create_link(&dev, "device", &pci)?;

    let k = mkdirs(fs, "kernel/scalevfs")?;
    // The knob notifies its own pollers on a change; it reaches the tree through a weak
    // reference (the tree owns the knob, the knob must not own the tree).
    let weak_fs: Weak<crate::Inner> = Arc::downgrade(&fs.inner);
    let (kv_show, kv_store, w) = (knob_value.clone(), knob_value.clone(), writes.clone());
    let knob = fs.create_file(
        &k,
        "knob",
        0o644,
        0,
        0,
        FnAttr::rw(
            move |_, buf| {
                buf.extend_from_slice(format!("{}\n", kv_show.load(Relaxed)).as_bytes());
                Ok(())
            },
            move |node, data| {
                let v = parse_int(data)?;
                // Relaxed: the value itself is the whole state; notify orders the rest.
                let old = kv_store.swap(v, Relaxed);
                w.fetch_add(1, Relaxed);
                if old != v {
                    if let Some(inner) = weak_fs.upgrade() {
                        Kernfs { inner }.notify(node);
                    }
                }
                Ok(data.len())
            },
        ),
    )?;
    let counter = |c: Arc<dyn Fn() -> u64 + Send + Sync>| {
        FnAttr::ro(move |_, buf| {
            buf.extend_from_slice(format!("{}\n", c()).as_bytes());
            Ok(())
        })
    };
    let gid_reads = fs.create_file(
        &k,
        "gid_reads",
        0o444,
        0,
        0,
        counter(Arc::new(move || reads.sum() as u64)),
    )?;
    let writes = fs.create_file(
        &k,
        "writes",
        0o444,
        0,
        0,
        counter(Arc::new(move || writes.load(Relaxed))),
    )?;
    let lock_stat = fs.create_file(
        &k,
        "lock_stat",
        0o444,
        0,
        0,
        FnAttr::ro(|_, buf| {
            // `show` output is cut to one page less one byte, as sysfs does.
            buf.extend_from_slice(lockstat::report().as_bytes());
            Ok(())
        }),
    )?;
    Ok(DemoTree {
        lock_stat,
        gids_dir,
        gids,
        knob,
        gid_reads,
        writes,
        device_link,
        knob_value,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_int_is_kstrtoint() {
        assert_eq!(parse_int(b"42"), Ok(42));
        assert_eq!(parse_int(b"-7\n"), Ok(-7));
        assert_eq!(parse_int(b"+3"), Ok(3));
        for bad in [
            &b""[..],
            b"\n",
            b"x",
            b"4 2",
            b"1\n\n",
            b" 1",
            b"+",
            b"0x10",
        ] {
            assert_eq!(parse_int(bad), Err(Errno::EINVAL), "{bad:?}");
        }
        assert_eq!(parse_int(b"99999999999"), Err(Errno::ERANGE));
    }
}
