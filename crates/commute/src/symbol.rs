//! Attribution: instruction addresses of the traced child to functions and `file:line`,
//! inlined frames included (DWARF of the executable, through `addr2line`).

use std::collections::HashMap;
use std::path::Path;

use crate::trace::ChildInfo;

/// One frame of an instruction's (inline) call chain.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Frame {
    /// The function, demangled, without its hash.
    pub function: String,
    /// The source file, shortened (`crates/...`, `core/...`, a crate's `src/...`).
    pub file: String,
    /// The line.
    pub line: u32,
}

impl Frame {
    /// `function (file:line)`.
    pub fn show(&self) -> String {
        format!("{} ({}:{})", self.function, self.file, self.line)
    }

    /// Whether the frame is in this workspace (not the standard library or a dependency).
    pub fn ours(&self) -> bool {
        self.file.starts_with("crates/")
    }
}

/// What an instruction address is.
#[derive(Clone, Debug)]
pub struct Site {
    /// The runtime address in the child.
    pub addr: u64,
    /// Innermost first; empty outside the executable.
    pub frames: Vec<Frame>,
    /// Where it is if not in the executable (`libc.so.6+0x1234`), or the function from
    /// the symbol table when DWARF has no line for it.
    pub other: Option<String>,
}

impl Site {
    /// The frame to blame: the innermost one in this workspace, else the outermost one
    /// (the function the code was inlined into, e.g. a hash map's insert rather than the
    /// `MaybeUninit::write` inside it).
    pub fn blame(&self) -> String {
        let f = self.frames.iter().find(|f| f.ours()).or(self.frames.last());
        match (f, &self.other) {
            (Some(f), _) => f.show(),
            (None, Some(o)) => o.clone(),
            (None, None) => format!("{:#x}", self.addr),
        }
    }

    /// The whole chain, innermost first, ` <- ` between frames.
    pub fn chain(&self) -> String {
        if self.frames.is_empty() {
            return self.blame();
        }
        self.frames
            .iter()
            .map(Frame::show)
            .collect::<Vec<_>>()
            .join(" <- ")
    }
}

fn shorten(file: &str) -> String {
    if let Some(i) = file.find("/crates/") {
        return file[i + 1..].to_string();
    }
    if let Some(i) = file.find("/library/") {
        return file[i + "/library/".len()..].to_string();
    }
    if let Some(i) = file.find("/registry/src/") {
        // .../registry/src/<index>/<crate-version>/src/x.rs -> <crate-version>/src/x.rs
        let rest = &file[i + "/registry/src/".len()..];
        return rest.split_once('/').map_or(rest, |x| x.1).to_string();
    }
    file.to_string()
}

fn strip_hash(name: &str) -> String {
    match name.rfind("::h") {
        Some(i) if name.len() - i == 19 && name[i + 3..].bytes().all(|b| b.is_ascii_hexdigit()) => {
            name[..i].to_string()
        }
        _ => name.to_string(),
    }
}

/// Symbolizes traced children's addresses against this executable (each child is this
/// binary re-executed; each [`ChildInfo`] says where it was loaded).
pub struct Symbolizer {
    loader: Option<addr2line::Loader>,
    exe_name: Option<String>,
    /// By (bias, address).
    cache: HashMap<(u64, u64), Site>,
}

impl Symbolizer {
    /// Loads the debug information of `exe`.
    pub fn new(exe: &Path) -> Symbolizer {
        let exe_name = exe.file_name().map(|n| n.to_string_lossy().into_owned());
        Symbolizer {
            loader: addr2line::Loader::new(exe).ok(),
            exe_name,
            cache: HashMap::new(),
        }
    }

    /// What `addr` (a runtime address in the child described by `info`) is.
    pub fn site(&mut self, addr: u64, info: &ChildInfo) -> Site {
        if let Some(s) = self.cache.get(&(info.bias, addr)) {
            return s.clone();
        }
        let mut site = Site {
            addr,
            frames: Vec::new(),
            other: None,
        };
        let map = info
            .maps
            .iter()
            .find(|(lo, hi, _, _)| addr >= *lo && addr < *hi);
        let file = map.map(|m| {
            Path::new(&m.3)
                .file_name()
                .map_or_else(|| m.3.clone(), |n| n.to_string_lossy().into_owned())
        });
        match (map, file) {
            (Some(m), Some(name)) if Some(&name) != self.exe_name.as_ref() => {
                site.other = Some(format!("{name}+{:#x}", addr - m.0 + m.2));
            }
            _ => {
                if let Some(l) = &self.loader {
                    let probe = addr.wrapping_sub(info.bias);
                    if let Ok(mut it) = l.find_frames(probe) {
                        while let Ok(Some(f)) = it.next() {
                            let function = f
                                .function
                                .as_ref()
                                .and_then(|n| n.demangle().ok())
                                .map_or_else(|| "?".to_string(), |n| strip_hash(&n));
                            let (file, line) = f.location.as_ref().map_or(("?".into(), 0), |l| {
                                (l.file.map_or("?".into(), shorten), l.line.unwrap_or(0))
                            });
                            site.frames.push(Frame {
                                function,
                                file,
                                line,
                            });
                        }
                    }
                    if site.frames.is_empty() {
                        site.other = l
                            .find_symbol(probe)
                            .map(|s| strip_hash(&addr2line::demangle_auto(s.into(), None)));
                    }
                }
            }
        }
        self.cache.insert((info.bias, addr), site.clone());
        site
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shortens_paths_and_strips_hashes() {
        assert_eq!(
            shorten("/work/x/crates/vfs/src/dentry.rs"),
            "crates/vfs/src/dentry.rs"
        );
        assert_eq!(
            shorten("/rustc/abc/library/core/src/sync/atomic.rs"),
            "core/src/sync/atomic.rs"
        );
        assert_eq!(strip_hash("a::b::h0123456789abcdef"), "a::b");
        assert_eq!(strip_hash("a::b"), "a::b");
    }
}
