//! The walk of a state directory ([`crate::store::capability::StateDir::walk`], which
//! `ipamctl check` reads): every entry under the root, classified against the file store's
//! layout without following a single symlink. Every directory is opened beneath its
//! parent's handle and every file stated or read relative to its directory's handle
//! ([`crate::store::fs::beneath`]); no path is resolved from the top.
//!
//! The walk owns `cluster/`, `namespaces/` and the root's `.ipamctl`, `.gitignore` and
//! `.tmp-*`; everything else at the root (a README, `.git`, CI configuration: the state
//! directory is often the root of a GitOps repository) is left alone. Inside what it owns,
//! every entry is either part of the layout or a finding. ipamctl's own files (the derived
//! index, scratch, leftovers, lock names) are judged in `layout/own_files.rs`.

mod own_files;

use std::ffi::OsString;
use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;
use std::sync::Arc;

use rustix::fs::FileType;

use super::DirHandle;
use crate::model::layout::{CLUSTER, NAMESPACES, ScopeDir};
use crate::model::{Namespace, ObjectKind};
use crate::store::fs::beneath::{self, Refused};
use crate::store::fs::{
    FsStore, GITIGNORE, INDEX_DIR, MARKER, TMP_PREFIX, beneath::DELETING_PREFIX,
};
use crate::store::inspect::{ManifestFile, Note, ReadAgain, Severity, Walked};
use crate::yaml::MAX_MANIFEST_BYTES;

use own_files::is_pool_lock;

const GITIGNORE_FILE: &str = ".gitignore";
/// How deep below a directory the walk looks for a namespace laid out by hand: a namespace
/// has at most 127 segments (253 characters).
const MAX_SEGMENTS: usize = 127;
pub(super) const SYMLINK: &str =
    "is a symlink; ipamctl never follows symlinks inside the state directory";
const FOREIGN: &str = "not part of the state directory layout; ipamctl ignores it";

/// An entry of a directory, typed from the directory entry itself (or `fstatat` without
/// following, where the file system does not say): a symlink is seen, never followed.
pub(super) struct Item {
    /// The name as text (lossy), for matching and findings.
    pub(super) name: String,
    /// The name as the directory holds it, to open relative to the directory's handle.
    pub(super) raw: OsString,
    pub(super) rel: String,
    pub(super) kind: Kind,
}

#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    File,
    Dir,
    Symlink,
    Other,
}

impl Kind {
    /// `Unknown` is not expected: callers resolve it with a `stat` first.
    fn of(t: FileType) -> Kind {
        match t {
            FileType::Symlink => Kind::Symlink,
            FileType::Directory => Kind::Dir,
            FileType::RegularFile => Kind::File,
            _ => Kind::Other,
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

/// Walks the state directory at `root` (its path, for the marker) through `root_fd`, its
/// handle.
pub(super) fn walk(root: &Path, root_fd: &OwnedFd) -> Walked {
    let mut walker = Walker {
        out: Walked::default(),
    };
    walker.root(root, root_fd);
    walker.out
}

pub(super) struct Walker {
    pub(super) out: Walked,
}

impl Walker {
    pub(super) fn finding(&mut self, severity: Severity, path: String, message: impl Into<String>) {
        self.out.notes.push(Note {
            severity,
            path,
            message: message.into(),
        });
    }

    /// Opens the directory `item` of `parent`, relative to `parent`'s handle, without
    /// following a symlink. A directory replaced since the listing is a finding (a symlink)
    /// or, removed by a concurrent command, `None` without one.
    pub(super) fn open(&mut self, parent: impl AsFd, item: &Item) -> Option<OwnedFd> {
        match beneath::open_dir(parent, Path::new(&item.raw)) {
            Ok(fd) => Some(fd),
            Err(e) if e.is_not_found() => None,
            Err(Refused::Symlink) => {
                self.finding(Severity::Error, item.rel.clone(), SYMLINK);
                None
            }
            Err(e) => {
                self.cannot_list(&item.rel, &e);
                None
            }
        }
    }

    fn cannot_list(&mut self, rel: &str, why: &Refused) {
        let shown = if rel.is_empty() { "." } else { rel };
        let why = match why {
            Refused::Io(e) => e.to_string(),
            Refused::NotADirectory => std::io::Error::from(rustix::io::Errno::NOTDIR).to_string(),
            other => other.reason(),
        };
        self.finding(
            Severity::Error,
            format!("{shown}/"),
            format!("cannot read the directory: {why}"),
        );
    }

    /// The entries of the directory `dir` (at `rel`), sorted by name; an unreadable
    /// directory is a finding.
    pub(super) fn entries(&mut self, dir: &OwnedFd, rel: &str) -> Vec<Item> {
        let mut items = Vec::new();
        let listed = beneath::each_name(dir, |raw, file_type| {
            let raw = beneath::os(raw);
            let file_type = match file_type {
                FileType::Unknown => match beneath::stat(dir, raw) {
                    Ok(Some(stat)) => FileType::from_raw_mode(stat.st_mode),
                    _ => return, // removed since the listing
                },
                known => known,
            };
            let name = raw.to_string_lossy().into_owned();
            let rel = if rel.is_empty() {
                name.clone()
            } else {
                format!("{rel}/{name}")
            };
            items.push(Item {
                kind: Kind::of(file_type),
                raw: raw.to_owned(),
                name,
                rel,
            });
        });
        if let Err(e) = listed {
            self.cannot_list(rel, &e);
        }
        items.sort_by(|a, b| a.name.cmp(&b.name));
        items
    }

    /// A symlink is an error wherever the walk meets one; anything else that the layout does
    /// not have is a warning with `message`.
    pub(super) fn foreign(&mut self, item: &Item, message: &str) {
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

    fn root(&mut self, root: &Path, root_fd: &OwnedFd) {
        self.marker(root);
        self.gitignore(root_fd);
        for item in self.entries(root_fd, "") {
            let name = item.name.as_str();
            let ours = matches!(name, CLUSTER | NAMESPACES | MARKER | GITIGNORE_FILE)
                || name.starts_with(TMP_PREFIX);
            match (name, item.kind) {
                (_, Kind::Symlink) if ours => self.foreign(&item, ""),
                (CLUSTER, Kind::Dir) => self.cluster(root_fd, &item),
                (NAMESPACES, Kind::Dir) => self.namespaces(root_fd, &item, ""),
                (CLUSTER | NAMESPACES, _) => self.finding(
                    Severity::Error,
                    item.rel.clone(),
                    "is not a directory; the layout needs a directory here",
                ),
                (_, Kind::File) if name.starts_with(TMP_PREFIX) => self.leftover(root_fd, &item),
                // The derived index and the temporary files of writes in flight: only the
                // temporary files can be findings (left by a process that died).
                (INDEX_DIR, Kind::Dir) => self.scratch(root_fd, &item),
                (INDEX_DIR, Kind::Symlink) => self.foreign(&item, ""),
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
    fn gitignore(&mut self, root: &OwnedFd) {
        let text = match beneath::read(root, GITIGNORE_FILE, MAX_MANIFEST_BYTES) {
            Ok(Some(file)) => String::from_utf8(file.bytes).unwrap_or_default(),
            Ok(None) => String::new(),
            // A symlink, a directory, a FIFO: reported by the walk, never opened through.
            Err(
                Refused::Symlink
                | Refused::NotADirectory
                | Refused::NotAFile(_)
                | Refused::HardLink(_),
            ) => return,
            Err(Refused::TooLarge(_) | Refused::Io(_)) => String::new(),
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

    fn cluster(&mut self, parent: &OwnedFd, dir: &Item) {
        let Some(fd) = self.open(parent, dir) else {
            return;
        };
        for item in self.entries(&fd, &dir.rel) {
            match (ScopeDir::from_name(&item.name), item.kind) {
                (Some(layout), Kind::Dir) => self.scope_dir(&fd, &item, None, layout),
                _ => self.foreign(&item, FOREIGN),
            }
        }
    }

    /// A directory under `namespaces/`; `prefix` is the namespace it stands for (empty for
    /// `namespaces/` itself).
    fn namespaces(&mut self, parent: &OwnedFd, dir: &Item, prefix: &str) {
        let Some(fd) = self.open(parent, dir) else {
            return;
        };
        let scope = Namespace::new(prefix).ok();
        for item in self.entries(&fd, &dir.rel) {
            let name = item.name.as_str();
            match (ScopeDir::from_name(name), item.kind, &scope) {
                (Some(layout), Kind::Dir, Some(ns)) => {
                    self.scope_dir(&fd, &item, Some(ns.clone()), layout);
                }
                // `namespaces/macs/`: no namespace may be `macs`, but one made by hand (or
                // by an ipamctl that did not reserve it) is read by nothing.
                (Some(_), Kind::Dir, None) if holds_scope(&fd, &item.raw, MAX_SEGMENTS) => {
                    self.unreadable_namespace(&item, name, "");
                }
                (Some(_), Kind::Dir, None) => self.foreign(
                    &item,
                    "not part of the state directory layout: objects under `namespaces/` go in a namespace directory, e.g. `namespaces/<ns>/ipampools/`; ipamctl ignores it",
                ),
                (None, Kind::Dir, _) => {
                    let child = if prefix.is_empty() {
                        name.to_owned()
                    } else {
                        format!("{prefix}/{name}")
                    };
                    match Namespace::new(&child) {
                        Ok(_) => self.namespaces(&fd, &item, &child),
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

    /// A directory of a scope (`None`: the cluster's): its objects, or its MAC records.
    fn scope_dir(
        &mut self,
        parent: &OwnedFd,
        dir: &Item,
        scope: Option<Namespace>,
        what: ScopeDir,
    ) {
        match what {
            ScopeDir::Objects(kind) => self.objects(parent, dir, scope, kind),
            ScopeDir::Macs => self.macs(parent, dir, scope.as_ref()),
        }
    }

    /// A scope's `macs/`: the file store's MAC records (`store::fs::macs`), derived from the
    /// allocations that hold each MAC, which `check` asks about itself
    /// ([`crate::store::capability::StateDir::mac_record`]), so the files are not checked one
    /// by one here. A directory among them is a namespace made by
    /// hand (`<scope>/macs/…`), and sits where a record may have to go.
    fn macs(&mut self, parent: &OwnedFd, dir: &Item, scope: Option<&Namespace>) {
        let Some(fd) = self.open(parent, dir) else {
            return;
        };
        const TAKEN: &str = "a directory among MAC records fails every claim whose record \
                             would take its name";
        for item in self.entries(&fd, &dir.rel) {
            if item.kind != Kind::Dir {
                continue;
            }
            let note = format!("; {TAKEN}, too");
            if self
                .in_scope_dir(&fd, &item, scope, ScopeDir::Macs, &note)
                .is_none()
            {
                self.finding(Severity::Error, item.shown(), format!("{TAKEN}: remove it"));
            }
        }
    }

    /// A directory `item` inside the scope directory `what` of `scope`: a namespace laid
    /// out by hand (any directory among MAC records is one) that ipamctl reads nothing of,
    /// an error; `None` (the caller's to report) when it is none.
    fn in_scope_dir(
        &mut self,
        parent: &OwnedFd,
        item: &Item,
        scope: Option<&Namespace>,
        what: ScopeDir,
        note: &str,
    ) -> Option<()> {
        // Under `cluster/`, a directory is no namespace.
        let base = format!("{}/{}", scope?, what.name());
        if ScopeDir::from_name(&item.name).is_some() {
            self.unreadable_namespace(item, &base, note);
        } else if what == ScopeDir::Macs || holds_scope(parent, &item.raw, MAX_SEGMENTS) {
            self.unreadable_namespace(item, &format!("{base}/{}", item.name), note);
        } else {
            return None;
        }
        Some(())
    }

    /// `ns` would be a namespace (its directory laid out as one, at `item`), but a segment
    /// of it is a directory of the layout: nothing in it is read, by `check` either.
    fn unreadable_namespace(&mut self, item: &Item, ns: &str, note: &str) {
        let why = match Namespace::new(ns) {
            Err(why) => why,
            Ok(_) => format!("`{ns}` is a directory of the state directory layout"),
        };
        self.finding(
            Severity::Error,
            item.shown(),
            format!(
                "{why}; ipamctl reads nothing here (a namespace made by hand or by an older \
                 ipamctl): move its objects to a namespace of another name{note}"
            ),
        );
    }

    /// A directory of `kind`'s manifests.
    fn objects(
        &mut self,
        parent: &OwnedFd,
        dir: &Item,
        scope: Option<Namespace>,
        what: ObjectKind,
    ) {
        let Some(fd) = self.open(parent, dir) else {
            return;
        };
        // Shared by the files found here, which are read through it.
        let fd = Arc::new(DirHandle(fd));
        let shared: Arc<dyn ReadAgain> = fd.clone();
        let fd = &fd.0;
        for item in self.entries(fd, &dir.rel) {
            let name = item.name.as_str();
            match item.kind {
                Kind::File if !name.starts_with('.') && name.ends_with(".yaml") => {
                    let file = ManifestFile {
                        stem: name.trim_end_matches(".yaml").to_owned(),
                        rel: item.rel,
                        dir: Some(Arc::clone(&shared)),
                        name: item.raw,
                        scope: scope.clone(),
                    };
                    match what {
                        ObjectKind::Pool => self.out.pools.push(file),
                        ObjectKind::Allocation => self.out.allocations.push(file),
                        ObjectKind::Subnet => self.out.subnets.push(file),
                        ObjectKind::Cooldown => self.out.cooldown.push(file),
                        ObjectKind::PrefixClaim => self.out.prefix_claims.push(file),
                        ObjectKind::Quota => self.out.quotas.push(file),
                    }
                }
                Kind::File if name.starts_with(TMP_PREFIX) => self.leftover(fd, &item),
                Kind::File if name.starts_with(DELETING_PREFIX) => self.foreign(
                    &item,
                    "a file ipamctl was deleting when it was interrupted (it was taken from its \
                     name to be checked); its object is deleted: remove this file, or rename it \
                     back to keep it",
                ),
                Kind::File if what == ObjectKind::Pool && is_pool_lock(name) => {}
                Kind::Dir if what == ObjectKind::Allocation && name == INDEX_DIR => {
                    self.index(fd, &item);
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
                Kind::Dir => {
                    let layout = ScopeDir::Objects(what);
                    if self
                        .in_scope_dir(fd, &item, scope.as_ref(), layout, "")
                        .is_none()
                    {
                        self.foreign(&item, "unexpected directory; ipamctl ignores it");
                    }
                }
                _ => self.foreign(&item, "unexpected directory; ipamctl ignores it"),
            }
        }
    }
}

/// Whether the directory `name` of `parent`, or one at most `depth` levels below it, holds a
/// directory a scope holds ([`ScopeDir`]): it is laid out as a namespace.
fn holds_scope(parent: &OwnedFd, name: &OsString, depth: usize) -> bool {
    let Ok(dir) = beneath::open_dir(parent, Path::new(name)) else {
        return false;
    };
    let mut below = Vec::new();
    let mut holds = false;
    let _ = beneath::each_name(&dir, |raw, file_type| {
        let raw = beneath::os(raw);
        let is_dir = match file_type {
            FileType::Directory => true,
            FileType::Unknown => beneath::stat(&dir, raw)
                .ok()
                .flatten()
                .is_some_and(|s| FileType::from_raw_mode(s.st_mode) == FileType::Directory),
            _ => false,
        };
        if is_dir {
            holds |= raw.to_str().and_then(ScopeDir::from_name).is_some();
            below.push(raw.to_owned());
        }
    });
    holds || (depth > 0 && below.iter().any(|n| holds_scope(&dir, n, depth - 1)))
}
