use scalevfs::{Credentials, Errno, Process, Vfs, VfsOptions};

#[test]
fn smoke() {
    let vfs = Vfs::new(VfsOptions::default());
    let p = Process::new(&vfs, Credentials::root());
    p.mkdir("/d", 0o755).unwrap();
    let fd = p.open("/d/f", libc::O_CREAT | libc::O_RDWR, 0o644).unwrap();
    assert_eq!(fd, 0);
    assert_eq!(p.write(fd, b"hello").unwrap(), 5);
    assert_eq!(p.lseek(fd, 0, libc::SEEK_SET).unwrap(), 0);
    let mut b = [0u8; 10];
    assert_eq!(p.read(fd, &mut b).unwrap(), 5);
    assert_eq!(&b[..5], b"hello");
    p.close(fd).unwrap();
    assert_eq!(p.stat("/d/f").unwrap().size, 5);
    assert_eq!(p.stat("/d/g"), Err(Errno::ENOENT));
    p.chdir("/d").unwrap();
    assert_eq!(p.cwd().unwrap(), b"/d");
    p.rename("/d", "/e").unwrap();
    assert_eq!(p.cwd().unwrap(), b"/e");
    assert_eq!(p.read_file("f").unwrap(), b"hello");
    let names: Vec<_> = p
        .readdir("/e")
        .unwrap()
        .into_iter()
        .map(|e| e.name)
        .collect();
    assert_eq!(names, vec![b".".to_vec(), b"..".to_vec(), b"f".to_vec()]);
    p.unlink("/e/f").unwrap();
    p.chdir("/").unwrap();
    p.rmdir("/e").unwrap();
    vfs.drop_caches();
    assert_eq!(vfs.inode_count(), 1);
}
