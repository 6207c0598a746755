//! Directory entries: mkdir, unlink, rmdir, rename, link, getdents.

use super::*;

#[test]
fn mkdir_unlink_rmdir() {
    let mut b = Both::new();
    b.mkdir("d", 0o755).unwrap();
    b.mkdir("d", 0o755).unwrap_err();
    b.mkdir("d/", 0o755).unwrap_err();
    b.mkdir("e/", 0o700).unwrap();
    b.stat("e", 0).unwrap();
    b.mkdir(".", 0o755).unwrap_err();
    b.mkdir("..", 0o755).unwrap_err();
    b.mkdir("nope/x", 0o755).unwrap_err();
    b.mkdir("d/s", 0o1777).unwrap();
    b.stat("d/s", 0).unwrap();
    b.stat("d", 0).unwrap();
    b.open("d/f", O_CREAT | RW, 0o644).unwrap();
    b.mkdir("d/f/x", 0o755).unwrap_err();
    b.unlink("d", AT_REMOVEDIR).unwrap_err();
    b.unlink("d", 0).unwrap_err();
    b.unlink("d/f", AT_REMOVEDIR).unwrap_err();
    b.unlink("d/f/", 0).unwrap_err();
    b.unlink("d/s/", 0).unwrap_err();
    b.unlink("d/missing/", 0).unwrap_err();
    b.unlink("d/missing", 0).unwrap_err();
    b.unlink("d/.", AT_REMOVEDIR).unwrap_err();
    b.unlink("d/..", AT_REMOVEDIR).unwrap_err();
    b.unlink(".", 0).unwrap_err();
    b.unlink("d/f", 0x1).unwrap_err();
    b.unlink("d/f", 0).unwrap();
    b.stat("d/f", 0).unwrap_err();
    b.unlink("d/s/", AT_REMOVEDIR).unwrap();
    b.stat("d", 0).unwrap();
    b.unlink("d", AT_REMOVEDIR).unwrap();
    b.stat("d", 0).unwrap_err();
    b.symlink("e", "le").unwrap();
    b.unlink("le/", AT_REMOVEDIR).unwrap_err();
    b.unlink("le", AT_REMOVEDIR).unwrap_err();
    b.unlink("le", 0).unwrap();
    b.stat(".", 0).unwrap();
}

#[test]
fn deleted_directory_behaviour() {
    let mut b = Both::new();
    b.mkdir("d", 0o755).unwrap();
    let d = idx(b.open("d", O_RDONLY | O_DIRECTORY, 0));
    b.unlink("d", AT_REMOVEDIR).unwrap();
    b.getdents(d).unwrap_err();
    b.fstat(d).unwrap();
}

#[test]
fn rename_cases() {
    let mut b = Both::new();
    b.open("a", O_CREAT | RW, 0o644).unwrap();
    b.open("b", O_CREAT | RW, 0o600).unwrap();
    b.mkdir("d", 0o755).unwrap();
    b.mkdir("e", 0o755).unwrap();
    b.open("e/x", O_CREAT | RW, 0o644).unwrap();
    b.rename("a", "a2", 0).unwrap();
    b.stat("a", 0).unwrap_err();
    b.stat("a2", 0).unwrap();
    b.rename("a2", "b", 0).unwrap();
    b.stat("b", 0).unwrap();
    b.rename("missing", "z", 0).unwrap_err();
    b.rename("b", "d", 0).unwrap_err();
    b.rename("d", "b", 0).unwrap_err();
    b.rename("d", "e", 0).unwrap_err();
    b.rename("d", "d/sub", 0).unwrap_err();
    b.rename("d", "d", 0).unwrap();
    b.rename("b", "b", 0).unwrap();
    b.rename(".", "x", 0).unwrap_err();
    b.rename("b", ".", 0).unwrap_err();
    b.rename("b", "..", RENAME_NOREPLACE).unwrap_err();
    b.rename("b", "b/", 0).unwrap_err();
    b.rename("b/", "c", 0).unwrap_err();
    b.rename("d/", "d2/", 0).unwrap();
    b.rename("b", "d2/b", 0).unwrap();
    b.stat("d2", 0).unwrap();
    b.mkdir("d2/sub", 0o755).unwrap();
    b.rename("d2/sub", "top", 0).unwrap();
    b.stat("d2", 0).unwrap();
    b.stat("top", 0).unwrap();
    b.stat(".", 0).unwrap();
    b.open("n1", O_CREAT | RW, 0o644).unwrap();
    b.open("n2", O_CREAT | RW, 0o644).unwrap();
    b.rename("n1", "n2", RENAME_NOREPLACE).unwrap_err();
    b.rename("n1", "n3", RENAME_NOREPLACE).unwrap();
    b.rename("n3", "n2", RENAME_EXCHANGE).unwrap();
    b.rename("n3", "nx", RENAME_EXCHANGE).unwrap_err();
    b.rename("n2", "top", RENAME_EXCHANGE).unwrap();
    b.stat("n2", 0).unwrap();
    b.stat("top", 0).unwrap();
    b.rename("n2", "d2/b", RENAME_EXCHANGE).unwrap();
    b.stat("d2", 0).unwrap();
    b.rename("n2", "x", RENAME_EXCHANGE | RENAME_NOREPLACE)
        .unwrap_err();
    b.rename("n2", "x", 64).unwrap_err();
    b.mkdir("p", 0o755).unwrap();
    b.mkdir("p/q", 0o755).unwrap();
    b.rename("p", "p/q/r", 0).unwrap_err();
    b.rename("p/q", "p", 0).unwrap_err();
    b.rename("p/q", "p", RENAME_EXCHANGE).unwrap_err();
    b.mkdir("empty", 0o755).unwrap();
    b.rename("p/q", "empty", 0).unwrap();
    b.stat("p", 0).unwrap();
    b.stat("empty", 0).unwrap();
    b.open("a", O_CREAT | RW, 0o644).unwrap();
    b.link("a", "hard", 0).unwrap();
    b.rename("a", "hard", 0).unwrap();
    b.stat("a", 0).unwrap();
    b.stat("hard", 0).unwrap();
}

#[test]
fn link_cases() {
    let mut b = Both::new();
    b.open("f", O_CREAT | RW, 0o644).unwrap();
    b.link("f", "g", 0).unwrap();
    b.stat("f", 0).unwrap();
    b.link("f", "g", 0).unwrap_err();
    b.link("missing", "h", 0).unwrap_err();
    b.mkdir("d", 0o755).unwrap();
    b.link("d", "d2", 0).unwrap_err();
    b.link("f", "d/", 0).unwrap_err();
    b.link("f", "new/", 0).unwrap_err();
    b.link("f/", "x", 0).unwrap_err();
    b.link("f", ".", 0).unwrap_err();
    b.link("f", "nodir/x", 0).unwrap_err();
    b.symlink("f", "l").unwrap();
    b.link("l", "hl", 0).unwrap();
    b.stat("hl", AT_SYMLINK_NOFOLLOW).unwrap();
    b.link("l", "hf", AT_SYMLINK_FOLLOW).unwrap();
    b.stat("hf", AT_SYMLINK_NOFOLLOW).unwrap();
    b.stat("f", 0).unwrap();
    b.link("f", "x", 0x1).unwrap_err();
    b.unlink("f", 0).unwrap();
    b.stat("g", 0).unwrap();
    b.unlink("g", 0).unwrap();
    b.stat("hf", 0).unwrap();
}

#[test]
fn getdents_lists_entries() {
    let mut b = Both::new();
    b.mkdir("d", 0o755).unwrap();
    for k in 0..150 {
        b.open(
            &format!("d/file-with-a-longish-name-{k}"),
            O_CREAT | RW,
            0o644,
        )
        .unwrap();
    }
    b.mkdir("d/sub", 0o755).unwrap();
    b.symlink("x", "d/sym").unwrap();
    let d = idx(b.open("d", O_RDONLY | O_DIRECTORY, 0));
    b.getdents(d).unwrap();
    b.lseek(d, 0, SEEK_CUR).unwrap();
    b.getdents(d).unwrap();
    b.lseek(d, 0, SEEK_SET).unwrap();
    b.getdents(d).unwrap();
    let f = idx(b.open("d/sym", O_PATH | O_NOFOLLOW, 0));
    b.getdents(f).unwrap_err();
    let g = idx(b.open("d/sub/../file-with-a-longish-name-3", O_RDONLY, 0));
    b.getdents(g).unwrap_err();
}
