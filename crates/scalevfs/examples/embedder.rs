//! An embedder's tour of the typed API: a `Vfs`, two users, a tree, a POSIX lock conflict
//! between them, epoll on a pipe and a directory listing, with no `libc` integers, no
//! casts and no byte decoding.
//!
//! Run with `cargo run --release -p scalevfs --example embedder`.

use std::io::{Read, Write};
use std::time::Duration;

use scalevfs::{
    Credentials, Descriptor, Dir, Epoll, EpollFlags, Errno, LockKind, LockOwner, Mode, OFlags,
    OpenOptions, ProcessBuilder, RecordLock, Vfs, VfsOptions,
};

fn main() -> Result<(), Errno> {
    let vfs = Vfs::new(VfsOptions::default());

    // Root lays out a shared project directory, group 100 may write to it.
    let root = ProcessBuilder::new(&vfs).build()?;
    let top = Dir::open_ambient(&root, "/")?;
    top.create_dir_all("srv/project/src")?;
    top.set_permissions("srv/project", Mode::octal(0o2775))?;
    top.open_dir("srv/project")?.set_owner(None, Some(100))?;
    top.write("srv/project/src/main.c", b"int main(void) { return 0; }\n")?;

    // Two users in group 100.
    let user = |uid| {
        ProcessBuilder::new(&vfs)
            .credentials(Credentials::user(uid, uid).with_groups([100]))
            .umask(0o002)
            .cwd("/srv/project")
            .build()
    };
    let alice = user(1000)?;
    let bob = user(1001)?;

    // Both open the same database; alice locks its header, bob finds out who holds it.
    let rw = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .clone();
    let adb = Dir::open_ambient(&alice, ".")?.open_with("db", &rw)?;
    let bdb = Dir::open_ambient(&bob, ".")?.open_with("db", &rw)?;
    let header = RecordLock::new(LockKind::Write, 0, 512);
    adb.set_lock(LockOwner::Process, header, false)?;
    match bdb.set_lock(LockOwner::Process, header, false) {
        Err(Errno::EAGAIN) => {
            let holder = bdb.get_lock(LockOwner::Process, header)?;
            let pid = holder.and_then(|h| h.pid);
            println!(
                "bob waits: the header is locked by pid {pid:?} (alice is {})",
                alice.pid()
            );
        }
        other => panic!("expected a conflict, got {other:?}"),
    }

    // Alice's build tool talks to bob's over a pipe, watched with epoll.
    let (rx, mut tx) = alice.pipe(OFlags::NONBLOCK)?;
    let epoll = Epoll::new(&alice)?;
    epoll.add(&rx, EpollFlags::IN, 1)?;
    tx.write_all(b"build done").map_err(|_| Errno::EIO)?;
    drop(tx); // closes the write end: the reader sees the end of the stream
    for event in epoll.wait(8, Some(Duration::from_secs(1)))? {
        if event.flags.contains(EpollFlags::IN) {
            let mut msg = String::new();
            (&rx).read_to_string(&mut msg).map_err(|_| Errno::EIO)?;
            println!("event {}: {msg:?}", event.data);
        }
    }

    // The listing, as names and types, never bytes.
    let project = Dir::open_ambient(&bob, "/srv/project")?;
    for entry in project.entries()? {
        let entry = entry?;
        let meta = project.symlink_metadata(entry.file_name())?;
        println!(
            "{:?}\t{:?}\towner {}\tmode {:o}",
            entry.file_name(),
            entry.file_type(),
            meta.uid(),
            meta.permissions()
        );
    }
    Ok(())
}

#[test]
fn example_runs() {
    main().unwrap();
}
