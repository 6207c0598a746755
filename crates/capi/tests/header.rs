//! `include/scalevfs.h` is what cbindgen generates from this crate today: regenerates it
//! and fails if the committed one differs (`SCALEVFS_BLESS=1` rewrites it instead).

use std::path::Path;

#[test]
fn committed_header_is_current() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let config = cbindgen::Config::from_file(dir.join("cbindgen.toml")).expect("cbindgen.toml");
    let mut generated = Vec::new();
    cbindgen::Builder::new()
        .with_crate(dir)
        .with_config(config)
        .generate()
        .expect("cbindgen failed to generate the header")
        .write(&mut generated);
    let path = dir.join("include/scalevfs.h");
    if std::env::var_os("SCALEVFS_BLESS").is_some() {
        std::fs::write(&path, &generated).unwrap();
        return;
    }
    let committed = std::fs::read(&path).unwrap_or_default();
    assert!(
        committed == generated,
        "{} is out of date: run `SCALEVFS_BLESS=1 cargo test -p scalevfs-capi --test header` \
         and commit the result",
        path.display()
    );
}
