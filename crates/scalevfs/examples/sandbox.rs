//! A sandbox: a guest process whose root is `/sandbox`, as `RESOLVE_IN_ROOT` confines a
//! walk (every path of the guest, `..` and absolute symlinks included, stays inside),
//! and a host-side `Dir` that resolves the guest's paths the same way.
//!
//! Run with `cargo run --release -p scalevfs --example sandbox`.

use scalevfs::{Credentials, Dir, Errno, Mode, ProcessBuilder, Vfs, VfsOptions};

fn main() -> Result<(), Errno> {
    let vfs = Vfs::new(VfsOptions::default());
    let host = ProcessBuilder::new(&vfs).build()?;
    let top = Dir::open_ambient(&host, "/")?;
    top.create_dir_all("etc")?;
    top.write("etc/passwd", b"root:x:0:0:host secret\n")?;
    top.create_dir_all("sandbox/etc")?;
    top.create_dir_all("sandbox/tmp")?;
    top.set_permissions("sandbox/tmp", Mode::octal(0o1777))?;
    top.write("sandbox/etc/passwd", b"guest:x:1000:1000:sandboxed\n")?;
    // A symlink planted to lead out: inside the sandbox it leads to the sandbox's own file.
    top.symlink("/etc/passwd", "sandbox/tmp/escape")?;

    let guest = ProcessBuilder::new(&vfs)
        .credentials(Credentials::user(1000, 1000))
        .root("/sandbox")
        .cwd("/tmp")
        .build()?;
    for path in ["/etc/passwd", "../../../etc/passwd", "escape"] {
        let seen = guest.read_file(path)?;
        assert_eq!(seen, b"guest:x:1000:1000:sandboxed\n");
        println!("guest reads {path:?}: the sandbox's own file");
    }
    guest.chdir("/../..")?;
    assert_eq!(guest.cwd()?, b"/");
    println!("guest's `cd /../..` stays at its root");

    // The host reads what the guest names, confined the same way.
    let jail = Dir::open_ambient(&host, "/sandbox")?.in_root();
    assert_eq!(jail.read("tmp/escape")?, b"guest:x:1000:1000:sandboxed\n");
    // A RESOLVE_BENEATH directory refuses the way out instead of clamping it.
    let strict = Dir::open_ambient(&host, "/sandbox")?;
    assert_eq!(strict.read("tmp/escape").err(), Some(Errno::EXDEV));
    println!("host: in_root follows the guest's view; beneath refuses with EXDEV");

    // Forks and exec keep the root.
    let mut child = guest.fork();
    child.exec_foreign_image();
    assert_eq!(
        child.read_file("/etc/passwd")?,
        b"guest:x:1000:1000:sandboxed\n"
    );
    println!("a forked, exec'd child is still inside");
    Ok(())
}

#[test]
fn example_runs() {
    main().unwrap();
}
