//! Random sequences of namespace operations checked against a simple model (a map from
//! path to kind and node), under both locking designs: results, errnos, readdir contents,
//! link counts and paths must all agree.

use std::collections::BTreeMap;
use std::sync::Arc;

use rand::{Rng, SeedableRng};
use scalevfs_kernfs::*;
use scalevfs_vfs::Errno;

type Path = Vec<String>;

struct Model {
    nodes: BTreeMap<Path, Arc<KernfsNode>>,
}

impl Model {
    fn children(&self, dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = self
            .nodes
            .keys()
            .filter(|p| p.len() == dir.len() + 1 && p.starts_with(dir))
            .map(|p| p.last().unwrap().clone())
            .collect();
        v.sort();
        v
    }

    fn subtree(&self, p: &Path) -> Vec<Path> {
        self.nodes
            .keys()
            .filter(|q| q.starts_with(p))
            .cloned()
            .collect()
    }
}

fn run(seed: u64, locking: Locking) {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let fs = Kernfs::new(locking);
    let mut m = Model {
        nodes: BTreeMap::from([(Vec::new(), fs.root().clone())]),
    };
    let names = ["a", "b", "c", "d"];
    for step in 0..400 {
        let keys: Vec<Path> = m.nodes.keys().cloned().collect();
        let pick = |rng: &mut rand::rngs::StdRng| keys[rng.gen_range(0..keys.len())].clone();
        let name = names[rng.gen_range(0..names.len())].to_string();
        let ctx = format!("seed {seed} step {step} {locking:?}");
        match rng.gen_range(0..10) {
            0..=3 => {
                let dir = pick(&mut rng);
                let parent = m.nodes[&dir].clone();
                let is_dir = rng.gen_bool(0.5);
                let r = if is_dir {
                    fs.create_dir(&parent, &name, 0o755, 0, 0)
                } else {
                    fs.create_file(&parent, &name, 0o644, 0, 0, FnAttr::constant(name.clone()))
                };
                let mut p = dir.clone();
                p.push(name.clone());
                let want = if parent.kind() != NodeKind::Dir {
                    Err(Errno::ENOTDIR)
                } else if m.nodes.contains_key(&p) {
                    Err(Errno::EEXIST)
                } else {
                    Ok(())
                };
                assert_eq!(
                    r.as_ref().map(|_| ()).map_err(|e| *e),
                    want,
                    "{ctx} create {p:?}"
                );
                if let Ok(n) = r {
                    m.nodes.insert(p, n);
                }
            }
            4..=5 => {
                let p = pick(&mut rng);
                let n = m.nodes[&p].clone();
                let r = fs.remove(&n);
                if p.is_empty() {
                    assert_eq!(r, Err(Errno::EINVAL), "{ctx}");
                } else {
                    assert_eq!(r, Ok(()), "{ctx} remove {p:?}");
                    for q in m.subtree(&p) {
                        let gone = m.nodes.remove(&q).unwrap();
                        assert!(!gone.is_active());
                    }
                }
            }
            6..=7 => {
                let p = pick(&mut rng);
                let d = pick(&mut rng);
                let (n, dn) = (m.nodes[&p].clone(), m.nodes[&d].clone());
                let r = fs.rename(&n, &dn, &name);
                let mut to = d.clone();
                to.push(name.clone());
                let want = if dn.kind() != NodeKind::Dir {
                    Err(Errno::ENOTDIR)
                } else if p.is_empty() {
                    Err(Errno::EINVAL)
                } else if to == p {
                    Ok(())
                } else if m.nodes.contains_key(&to) {
                    Err(Errno::EEXIST)
                } else if d.starts_with(&p) {
                    Err(Errno::EINVAL)
                } else {
                    Ok(())
                };
                assert_eq!(r, want, "{ctx} rename {p:?} -> {to:?}");
                if r.is_ok() && to != p {
                    for q in m.subtree(&p) {
                        let node = m.nodes.remove(&q).unwrap();
                        let mut nq = to.clone();
                        nq.extend_from_slice(&q[p.len()..]);
                        m.nodes.insert(nq, node);
                    }
                }
            }
            _ => {
                // Lookups by path, existing or not.
                let mut p = pick(&mut rng);
                if rng.gen_bool(0.5) {
                    p.push(name.clone());
                }
                let r = fs.lookup_path(p.join("/"), &Creds::ROOT, false);
                match m.nodes.get(&p) {
                    Some(n) => assert!(Arc::ptr_eq(&r.unwrap(), n), "{ctx} lookup {p:?}"),
                    None => {
                        let parent_is_file = m
                            .nodes
                            .get(&p[..p.len() - 1])
                            .is_some_and(|n| n.kind() != NodeKind::Dir);
                        let want = if parent_is_file {
                            Errno::ENOTDIR
                        } else {
                            Errno::ENOENT
                        };
                        assert_eq!(r.unwrap_err(), want, "{ctx} lookup {p:?}");
                    }
                }
            }
        }
        // Invariants after every step.
        for (p, n) in &m.nodes {
            assert_eq!(fs.path(n), format!("/{}", p.join("/")), "{ctx}");
            if n.kind() == NodeKind::Dir {
                let mut got: Vec<String> = fs
                    .readdir(n)
                    .unwrap()
                    .iter()
                    .map(|e| String::from_utf8(e.name.to_vec()).unwrap())
                    .collect();
                got.sort();
                let want = m.children(p);
                assert_eq!(got, want, "{ctx} readdir {p:?}");
                let subdirs = want
                    .iter()
                    .filter(|c| {
                        let mut q = p.clone();
                        q.push((*c).clone());
                        m.nodes[&q].kind() == NodeKind::Dir
                    })
                    .count() as u32;
                assert_eq!(
                    fs.getattr(n).unwrap().nlink,
                    2 + subdirs,
                    "{ctx} nlink {p:?}"
                );
            }
        }
    }
}

#[test]
fn random_namespace_sequences_match_the_model() {
    for seed in 0..12 {
        run(seed, Locking::Scalable);
        run(seed, Locking::Legacy);
    }
}
