//! The walk of `ipamctl check`: every entry under the state directory, classified against
//! the layout of [`crate::store::fs`] without following a single symlink.
//!
//! The walk owns `cluster/`, `namespaces/` and the root's `.ipamctl`, `.gitignore` and
//! `.tmp-*`; everything else at the root (a README, `.git`, CI configuration: the state
//! directory is often the root of a GitOps repository) is left alone. Inside what it owns,
//! every entry is either part of the layout or a finding.

use std::fs::{self, FileType};
use std::io::ErrorKind;
use std::os::unix::fs::DirEntryExt;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use super::{Finding, Leftover, Severity};
use crate::model::{Namespace, PoolName};
use crate::store::fs::{
    FsStore, GITIGNORE, HINTS_SUFFIX, INDEX_DIR, INDEX_SUFFIX, MARKER, TMP_PREFIX,
};

const GITIGNORE_FILE: &str = ".gitignore";
const POOLS_DIR: &str = "ipampools";
const ALLOCATIONS_DIR: &str = "ipallocations";
const SYMLINK: &str = "is a symlink; ipamctl never follows symlinks inside the state directory";
const FOREIGN: &str = "not part of the state directory layout; ipamctl ignores it";

/// A manifest file found by the walk, not read yet.
#[derive(Clone, Debug)]
pub(super) struct ManifestFile {
    /// Path relative to the root, `/`-separated.
    pub rel: String,
    /// Absolute (or root-relative) path to open.
    pub path: PathBuf,
    /// Inode number seen in the directory listing, to notice a swap before the read.
    pub ino: u64,
    /// The scope the path puts it in (`None` = `cluster/`).
    pub scope: Option<Namespace>,
    /// The file name without `.yaml`: the object's name as the tool knows it.
    pub stem: String,
}

/// What the walk found.
#[derive(Debug, Default)]
pub(super) struct Layout {
    pub findings: Vec<Finding>,
    pub pools: Vec<ManifestFile>,
    pub allocations: Vec<ManifestFile>,
    pub leftovers: Vec<Leftover>,
}

/// An entry of a directory, typed from the directory entry itself (`lstat`, not `stat`).
struct Item {
    name: String,
    path: PathBuf,
    rel: String,
    kind: Kind,
    ino: u64,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    File,
    Dir,
    Symlink,
    Other,
}

impl Kind {
    fn of(t: FileType) -> Kind {
        if t.is_symlink() {
            Kind::Symlink
        } else if t.is_dir() {
            Kind::Dir
        } else if t.is_file() {
            Kind::File
        } else {
            Kind::Other
        }
    }
}

impl Item {
    /// The path as findings show it: directories end in `/`.
    fn shown(&self) -> String {
        if self.kind == Kind::Dir {
            format!("{}/", self.rel)
        } else {
            self.rel.clone()
        }
    }
}

/// Which kind of object a `ipampools/` or `ipallocations/` directory holds.
#[derive(Clone, Copy, PartialEq, Eq)]
enum ObjectDir {
    Pools,
    Allocations,
}

/// Walks the state directory at `root`. `now` dates the temporary files found.
pub(super) fn walk(root: &Path, now: SystemTime) -> Layout {
    let mut walker = Walker {
        now,
        out: Layout::default(),
    };
    walker.root(root);
    walker.out
}

struct Walker {
    now: SystemTime,
    out: Layout,
}

impl Walker {
    fn finding(&mut self, severity: Severity, path: String, message: impl Into<String>) {
        self.out.findings.push(Finding {
            severity,
            path,
            message: message.into(),
        });
    }

    /// The entries of `dir`; an unreadable directory is a finding, a vanished one (removed
    /// by a concurrent command) is empty.
    fn entries(&mut self, dir: &Path, rel: &str) -> Vec<Item> {
        let read = match fs::read_dir(dir) {
            Ok(read) => read,
            Err(e) if e.kind() == ErrorKind::NotFound => return Vec::new(),
            Err(e) => {
                let shown = if rel.is_empty() { "." } else { rel };
                self.finding(
                    Severity::Error,
                    format!("{shown}/"),
                    format!("cannot read the directory: {e}"),
                );
                return Vec::new();
            }
        };
        let mut items = Vec::new();
        for entry in read {
            let entry = match entry {
                Ok(entry) => entry,
                Err(e) => {
                    self.finding(
                        Severity::Error,
                        format!("{rel}/"),
                        format!("cannot read the directory: {e}"),
                    );
                    break;
                }
            };
            // file_type() comes from the directory entry: a symlink is seen, not followed.
            let Ok(file_type) = entry.file_type() else {
                continue; // removed since the listing
            };
            let name = entry.file_name().to_string_lossy().into_owned();
            let rel = if rel.is_empty() {
                name.clone()
            } else {
                format!("{rel}/{name}")
            };
            items.push(Item {
                path: entry.path(),
                ino: entry.ino(),
                kind: Kind::of(file_type),
                name,
                rel,
            });
        }
        items.sort_by(|a, b| a.name.cmp(&b.name));
        items
    }

    /// A symlink is an error wherever the walk meets one; anything else that the layout does
    /// not have is a warning with `message`.
    fn foreign(&mut self, item: &Item, message: &str) {
        match item.kind {
            Kind::Symlink => self.finding(Severity::Error, item.rel.clone(), SYMLINK),
            Kind::Other => self.finding(
                Severity::Warning,
                item.rel.clone(),
                "not a regular file or directory; ipamctl ignores it",
            ),
            Kind::File | Kind::Dir => self.finding(Severity::Warning, item.shown(), message),
        }
    }

    fn root(&mut self, root: &Path) {
        self.marker(root);
        self.gitignore(root);
        for item in self.entries(root, "") {
            let name = item.name.as_str();
            let ours = matches!(name, "cluster" | "namespaces" | MARKER | GITIGNORE_FILE)
                || name.starts_with(TMP_PREFIX);
            match (name, item.kind) {
                (_, Kind::Symlink) if ours => self.foreign(&item, ""),
                ("cluster", Kind::Dir) => self.cluster(&item),
                ("namespaces", Kind::Dir) => self.namespaces(&item, ""),
                ("cluster" | "namespaces", _) => self.finding(
                    Severity::Error,
                    item.rel.clone(),
                    "is not a directory; the layout needs a directory here",
                ),
                (_, Kind::File) if name.starts_with(TMP_PREFIX) => self.leftover(&item),
                // Everything else at the root belongs to whoever put it there.
                _ => {}
            }
        }
    }

    /// The marker must be there and name a layout this ipamctl reads.
    fn marker(&mut self, root: &Path) {
        if let Err(e) = FsStore::open(root) {
            let message = match e {
                crate::Error::Corrupt { message, .. } => message,
                crate::Error::NoStateDir { .. } => {
                    "missing: this is not an ipamctl state directory".to_owned()
                }
                other => other.to_string(),
            };
            self.finding(Severity::Error, MARKER.to_owned(), message);
        }
    }

    /// `.gitignore` keeps the locks, the index and temporary files out of git; without it
    /// they get committed and every checkout inherits another machine's cache.
    fn gitignore(&mut self, root: &Path) {
        let path = root.join(GITIGNORE_FILE);
        let text = match fs::symlink_metadata(&path) {
            Ok(meta) if meta.is_file() => read_small(&path).unwrap_or_default(),
            Ok(_) => return, // a symlink or directory: reported by the walk
            Err(_) => String::new(),
        };
        let have: Vec<&str> = text.lines().map(str::trim).collect();
        let missing: Vec<String> = GITIGNORE
            .lines()
            .filter(|l| !l.is_empty() && !l.starts_with('#'))
            .filter(|l| !have.contains(l))
            .map(|l| format!("`{l}`"))
            .collect();
        if !missing.is_empty() {
            self.finding(
                Severity::Warning,
                GITIGNORE_FILE.to_owned(),
                format!(
                    "does not ignore {}: ipamctl's lock, index and temporary files would be committed",
                    missing.join(", ")
                ),
            );
        }
    }

    fn cluster(&mut self, dir: &Item) {
        for item in self.entries(&dir.path, &dir.rel) {
            match (item.name.as_str(), item.kind) {
                (POOLS_DIR, Kind::Dir) => self.objects(&item, None, ObjectDir::Pools),
                (ALLOCATIONS_DIR, Kind::Dir) => {
                    self.objects(&item, None, ObjectDir::Allocations);
                }
                _ => self.foreign(&item, FOREIGN),
            }
        }
    }

    /// A directory under `namespaces/`; `prefix` is the namespace it stands for (empty for
    /// `namespaces/` itself).
    fn namespaces(&mut self, dir: &Item, prefix: &str) {
        let scope = Namespace::new(prefix).ok();
        for item in self.entries(&dir.path, &dir.rel) {
            let name = item.name.as_str();
            match (name, item.kind, &scope) {
                (POOLS_DIR, Kind::Dir, Some(ns)) => {
                    self.objects(&item, Some(ns.clone()), ObjectDir::Pools);
                }
                (ALLOCATIONS_DIR, Kind::Dir, Some(ns)) => {
                    self.objects(&item, Some(ns.clone()), ObjectDir::Allocations);
                }
                (POOLS_DIR | ALLOCATIONS_DIR, Kind::Dir, None) => self.foreign(
                    &item,
                    "not part of the state directory layout: objects under `namespaces/` go in a namespace directory, e.g. `namespaces/<ns>/ipampools/`; ipamctl ignores it",
                ),
                (_, Kind::Dir, _) => {
                    let child = if prefix.is_empty() {
                        name.to_owned()
                    } else {
                        format!("{prefix}/{name}")
                    };
                    match Namespace::new(&child) {
                        Ok(_) => self.namespaces(&item, &child),
                        Err(why) => self.foreign(
                            &item,
                            &format!("not a namespace directory: {why}; ipamctl ignores it"),
                        ),
                    }
                }
                (_, Kind::File, _) if name.ends_with(".yaml") => self.foreign(
                    &item,
                    "not part of the state directory layout: manifests go in an `ipampools/` or `ipallocations/` directory; ipamctl ignores it",
                ),
                _ => self.foreign(&item, FOREIGN),
            }
        }
    }

    /// An `ipampools/` or `ipallocations/` directory.
    fn objects(&mut self, dir: &Item, scope: Option<Namespace>, what: ObjectDir) {
        for item in self.entries(&dir.path, &dir.rel) {
            let name = item.name.as_str();
            match item.kind {
                Kind::File if !name.starts_with('.') && name.ends_with(".yaml") => {
                    let file = ManifestFile {
                        stem: name.trim_end_matches(".yaml").to_owned(),
                        rel: item.rel,
                        path: item.path,
                        ino: item.ino,
                        scope: scope.clone(),
                    };
                    match what {
                        ObjectDir::Pools => self.out.pools.push(file),
                        ObjectDir::Allocations => self.out.allocations.push(file),
                    }
                }
                Kind::File if name.starts_with(TMP_PREFIX) => self.leftover(&item),
                Kind::File if what == ObjectDir::Pools && is_pool_lock(name) => {}
                Kind::Dir if what == ObjectDir::Allocations && name == INDEX_DIR => {
                    self.index(&item);
                }
                Kind::File | Kind::Dir if name.starts_with('.') => self.foreign(
                    &item,
                    "unexpected dot-file: not one of ipamctl's lock, index or temporary files",
                ),
                Kind::File if name.ends_with(".yml") => self.foreign(
                    &item,
                    "not read: ipamctl reads only `<name>.yaml` manifests, not `.yml`",
                ),
                Kind::File => self.foreign(
                    &item,
                    "not a manifest: ipamctl reads only `<name>.yaml` files here and ignores it",
                ),
                _ => self.foreign(&item, "unexpected directory; ipamctl ignores it"),
            }
        }
    }

    /// `ipallocations/.index/`: the derived owner index and hints. Its contents are
    /// a cache (git-ignored, rebuilt on demand), so only their names are checked.
    fn index(&mut self, dir: &Item) {
        for item in self.entries(&dir.path, &dir.rel) {
            let name = item.name.as_str();
            if item.kind == Kind::File && name.starts_with(TMP_PREFIX) {
                self.leftover(&item);
                continue;
            }
            let known = match item.kind {
                Kind::File => pool_of(name, INDEX_SUFFIX).is_some() || is_old_index_file(name),
                Kind::Dir => pool_of(name, HINTS_SUFFIX).is_some(),
                Kind::Symlink | Kind::Other => false,
            };
            if !known {
                self.foreign(
                    &item,
                    "not one of ipamctl's index files; ipamctl ignores it",
                );
            }
        }
    }

    fn leftover(&mut self, item: &Item) {
        let Ok(modified) = fs::symlink_metadata(&item.path).and_then(|m| m.modified()) else {
            return; // gone since the listing: the write it belonged to finished
        };
        let old = super::is_old(modified, self.now);
        let message = if old {
            "leftover temporary file of an interrupted write, older than 5 minutes; `ipamctl check --fix` removes it"
        } else {
            "temporary file of a write in progress or one interrupted moments ago; `ipamctl check --fix` removes it once it is 5 minutes old"
        };
        self.finding(Severity::Warning, item.rel.clone(), message);
        self.out.leftovers.push(Leftover {
            path: item.rel.clone(),
            modified,
        });
    }
}

/// `.lock` (the scope lock) or `.<pool>.lock` (a pool lock).
fn is_pool_lock(name: &str) -> bool {
    name == ".lock"
        || name
            .strip_prefix('.')
            .and_then(|n| n.strip_suffix(".lock"))
            .is_some_and(|pool| PoolName::new(pool).is_ok())
}

/// What ipamctl 0.1 kept in `.index/` (a journal and owner lock stripes `<pool>.lock-NN`):
/// unused now, and harmless.
fn is_old_index_file(name: &str) -> bool {
    name == "journal"
        || name.rsplit_once(".lock-").is_some_and(|(pool, stripe)| {
            PoolName::new(pool).is_ok()
                && stripe.len() == 2
                && stripe.bytes().all(|b| b.is_ascii_digit())
        })
}

/// The pool name of `<pool><suffix>`, if valid.
fn pool_of<'a>(name: &'a str, suffix: &str) -> Option<&'a str> {
    name.strip_suffix(suffix)
        .filter(|pool| PoolName::new(pool).is_ok())
}

/// Reads a small text file (the `.gitignore`), bounded like a manifest.
fn read_small(path: &Path) -> Option<String> {
    super::read_bounded(path)
        .ok()
        .flatten()
        .and_then(|(bytes, _)| String::from_utf8(bytes).ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lock_and_index_names_are_recognised() {
        assert!(is_pool_lock(".lock"));
        assert!(is_pool_lock(".vpc-main.lock"));
        assert!(!is_pool_lock(".Vpc.lock"));
        assert!(!is_pool_lock("vpc-main.lock"));
        assert!(is_old_index_file("vpc-main.lock-07"));
        assert!(!is_old_index_file("vpc-main.lock-7"));
        assert!(!is_old_index_file(".lock-07"));
        assert_eq!(pool_of("vpc-main.owners", ".owners"), Some("vpc-main"));
        assert_eq!(pool_of("vpc-main.log", ".owners"), None);
    }
}
