//! The scripted suite: every system call of the contract and its errors.
//!
//! Families that are naturally a matrix (open flags x file types, rename source x
//! destination x flags, trailing slashes x operations, permission bits x identities) are
//! generated; each generated script is still a complete, self-describing case whose name
//! says what it checks. Each script sets up its world as root, then (for permission cases)
//! drops to an unprivileged identity.

mod chattr;
mod fds;
mod io;
mod meta;
mod mounts;
mod namespace;
mod open;
mod paths;
mod perms;
mod punch;
mod read_only;
mod remount;
mod tmpfile;
mod whiteout;
mod xattr;

use crate::script::Script;

/// Every scripted case, in a stable order, with unique names.
pub fn all() -> Vec<Script> {
    let mut v = Vec::new();
    open::cases(&mut v);
    tmpfile::cases(&mut v);
    io::cases(&mut v);
    punch::cases(&mut v);
    meta::cases(&mut v);
    namespace::cases(&mut v);
    whiteout::cases(&mut v);
    paths::cases(&mut v);
    fds::cases(&mut v);
    perms::cases(&mut v);
    mounts::cases(&mut v);
    read_only::cases(&mut v);
    remount::cases(&mut v);
    xattr::cases(&mut v);
    chattr::cases(&mut v);
    v
}

/// What a name refers to before the operation under test.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    Missing,
    Reg,
    Dir,
    /// A directory with one entry.
    FullDir,
    LnkReg,
    LnkDir,
    Dangling,
}

impl Kind {
    pub(crate) const ALL: [Kind; 7] = [
        Kind::Missing,
        Kind::Reg,
        Kind::Dir,
        Kind::FullDir,
        Kind::LnkReg,
        Kind::LnkDir,
        Kind::Dangling,
    ];
    /// Without FullDir, for matrices where it adds nothing over Dir.
    pub(crate) const BASIC: [Kind; 6] = [
        Kind::Missing,
        Kind::Reg,
        Kind::Dir,
        Kind::LnkReg,
        Kind::LnkDir,
        Kind::Dangling,
    ];

    pub(crate) fn tag(self) -> &'static str {
        match self {
            Kind::Missing => "missing",
            Kind::Reg => "file",
            Kind::Dir => "dir",
            Kind::FullDir => "fulldir",
            Kind::LnkReg => "symlink-file",
            Kind::LnkDir => "symlink-dir",
            Kind::Dangling => "dangling",
        }
    }

    /// Create `name` as this kind (targets of symlinks get `name` + `.target`).
    pub(crate) fn make(self, s: &mut Script, name: &str) {
        let target = format!("{name}.target");
        match self {
            Kind::Missing => {}
            Kind::Reg => {
                s.file(name, 0o644, "contents");
            }
            Kind::Dir => {
                s.mkdir(name, 0o755);
            }
            Kind::FullDir => {
                s.mkdir(name, 0o755)
                    .file(format!("{name}/inner"), 0o644, "x");
            }
            Kind::LnkReg => {
                s.file(&target, 0o644, "target contents")
                    .symlink(&target, name);
            }
            Kind::LnkDir => {
                s.mkdir(&target, 0o755).symlink(&target, name);
            }
            Kind::Dangling => {
                s.symlink(&target, name);
            }
        }
    }
}

/// Look at the whole root: sorted listing plus lstat of each name given.
pub(crate) fn observe(s: &mut Script, names: &[&str]) {
    s.ls(".");
    for n in names {
        s.lstat(n);
    }
}
