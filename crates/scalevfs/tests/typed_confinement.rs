//! Property: whatever path a `Dir` is given, built from `..`, `.`, absolute starts, names
//! and symlinks that point out (absolutely and by `..`), what it opens or changes lies
//! inside its directory: a `RESOLVE_BENEATH` directory fails instead, a `RESOLVE_IN_ROOT`
//! one resolves inside.

use std::collections::HashSet;

use proptest::prelude::*;
use scalevfs::{Credentials, Descriptor, Dir, Process, Vfs, VfsOptions};

const PARTS: &[&str] = &["..", ".", "a", "b", "up", "abs", "deep", "f", ""];

/// `/box` (the directory), its tree, and a tree outside it; symlinks inside lead out.
fn world() -> (std::sync::Arc<Vfs>, Process) {
    let vfs = Vfs::new(VfsOptions::default());
    let p = Process::new(&vfs, Credentials::root());
    for d in ["/box", "/box/a", "/box/a/b", "/out", "/out/a", "/out/a/b"] {
        p.mkdir(d, 0o755).unwrap();
    }
    for f in ["/box/f", "/box/a/f", "/out/f", "/out/a/f", "/f"] {
        p.write_file(f, b"x").unwrap();
    }
    for (target, link) in [
        ("/out", "/box/abs"),
        ("../out", "/box/up"),
        ("../../../out/a", "/box/a/deep"),
        ("/", "/box/a/b/abs"),
    ] {
        p.symlinkat(target, libc::AT_FDCWD, link).unwrap();
    }
    (vfs, p)
}

/// The inode numbers of everything under `/box`, symlinks included.
fn inside(p: &Process) -> HashSet<u64> {
    let mut seen = HashSet::new();
    let mut stack = vec![b"/box".to_vec()];
    while let Some(dir) = stack.pop() {
        seen.insert(p.lstat(&dir).unwrap().ino);
        for e in p.readdir(&dir).unwrap() {
            if e.name == b"." || e.name == b".." {
                continue;
            }
            let mut path = dir.clone();
            path.push(b'/');
            path.extend_from_slice(&e.name);
            seen.insert(e.ino);
            if e.d_type == libc::DT_DIR {
                stack.push(path);
            }
        }
    }
    seen
}

fn path_strategy() -> impl Strategy<Value = String> {
    (any::<bool>(), prop::collection::vec(0..PARTS.len(), 1..6)).prop_map(|(abs, parts)| {
        let body: Vec<&str> = parts.into_iter().map(|i| PARTS[i]).collect();
        format!("{}{}", if abs { "/" } else { "" }, body.join("/"))
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn what_a_dir_reaches_is_inside(path in path_strategy(), in_root in any::<bool>()) {
        let (_vfs, p) = world();
        let inner = inside(&p);
        // The planted links do lead out for an unconfined walk.
        for out in ["/box/up/f", "/box/abs/a/f", "/box/a/deep/f", "/box/a/b/abs/f"] {
            prop_assert!(!inner.contains(&p.stat(out).unwrap().ino), "{}", out);
        }
        let mut dir = Dir::open_ambient(&p, "/box").unwrap();
        if in_root {
            dir = dir.in_root();
        }
        for m in [dir.metadata(&path), dir.symlink_metadata(&path)].into_iter().flatten() {
            prop_assert!(inner.contains(&m.ino()), "{path:?} reached ino {}", m.ino());
        }
        if let Ok(f) = dir.open(&path) {
            let ino = f.metadata().unwrap().ino();
            prop_assert!(inner.contains(&ino), "{path:?} opened ino {ino}");
        }
        if let Ok(d) = dir.open_dir(&path) {
            let ino = Descriptor::metadata(&d).unwrap().ino();
            prop_assert!(inner.contains(&ino), "{path:?} opened dir ino {ino}");
        }
        if !in_root {
            // Under RESOLVE_BENEATH an absolute path never resolves.
            prop_assert!(!path.starts_with('/') || dir.metadata(&path).is_err());
        }
        // Changes: whatever succeeds, nothing outside /box changes.
        let outside = |p: &Process| {
            let mut names: Vec<Vec<u8>> = Vec::new();
            for d in ["/", "/out", "/out/a", "/out/a/b"] {
                names.extend(p.readdir(d).unwrap().into_iter().map(|e| e.name));
            }
            names.sort();
            names
        };
        let before = outside(&p);
        let _ = dir.create_dir(&path);
        let _ = dir.write(format!("{path}/new"), b"y");
        let _ = dir.remove_file(&path);
        let _ = dir.remove_dir(&path);
        let _ = dir.rename(&path, &dir, "renamed");
        let _ = dir.symlink("/x", &path);
        prop_assert_eq!(before, outside(&p), "{:?} changed something outside", path);
    }
}
