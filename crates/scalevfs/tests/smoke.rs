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

/// `write_file` into a file system that fills up writes what fits and says why it
/// stopped, instead of reporting success for a short write.
#[test]
fn write_file_continues_short_writes_and_reports_enospc() {
    let vfs = Vfs::new(VfsOptions {
        size_limit: Some(8192),
        ..VfsOptions::default()
    });
    let p = Process::new(&vfs, Credentials::root());
    assert_eq!(p.write_file("/big", &[7u8; 20_000]), Err(Errno::ENOSPC));
    assert_eq!(p.stat("/big").unwrap().size, 8192, "what fitted stays");
    let data: Vec<u8> = (0..6000u32).map(|i| i as u8).collect();
    p.write_file("/fits", &data).unwrap_err();
    p.unlink("/big").unwrap();
    p.write_file("/fits", &data).unwrap();
    assert_eq!(p.read_file("/fits").unwrap(), data);
}
