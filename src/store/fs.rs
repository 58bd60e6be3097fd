//! The filesystem store: one YAML file per object, at a path derived from (kind, namespace,
//! name) alone, so the path is the unique index.
//!
//! ```text
//! <root>/.ipamctl                                   marker: identifies the root, layout version
//! <root>/.gitignore                                 keeps the dot-files below out of git
//! <root>/cluster/ipampools/<pool>.yaml              public pools
//! <root>/cluster/ipallocations/<pool>-<a-b-c-d>.yaml
//! <root>/namespaces/<ns segments>/ipampools/<pool>.yaml
//! <root>/namespaces/<ns segments>/ipallocations/<pool>-<a-b-c-d>.yaml
//! ipampools/.<pool>.lock                            pool lock (shared: allocate; exclusive: apply, delete)
//! ipampools/.lock                                   held by apply while it checks overlaps and writes
//! ipallocations/.index/<pool>.lock-<nn>             owner lock stripes (nn = owner key mod 32)
//! ipallocations/.index/journal                      owner index: facts and logged changes (`super::journal`)
//! ipallocations/.index/<pool>.owners/<key>          owner index: key -> address hint
//! ipampools/.tmp-*, ipallocations/.index/.tmp-*     temporary files of writes in flight
//! ```
//!
//! # Write protocol, and the crash window each step closes
//!
//! `create` (every claim):
//! 1. write the manifest to `.tmp-XXXX` and `fsync` it: a crash leaves only a dot-file that
//!    no reader takes for a manifest (`check --fix` removes it). For allocations the
//!    temporary file lives in `.index/`, so the directory itself changes only at step 2;
//! 2. link it to `<name>.yaml` without replacing (`renameat2(RENAME_NOREPLACE)`, or
//!    `link(2)`): the single atomic step that claims the name. It fails if the name exists,
//!    which is how concurrent claimers of one address are arbitrated. Because the data was
//!    fsynced first, the name never points at incomplete bytes, even after a power loss;
//! 3. for allocations, append to the journal the edge from the directory's version just
//!    before step 2 to its version just after: the change was ipamctl's. A crash before this
//!    line leaves an unlogged change, so the next look-up distrusts the index and reads
//!    every file, finding this claim;
//! 4. `fsync` the directory, so the new name itself survives a power loss before the caller
//!    reports the claim. A crash before this step may lose the claim, but nothing was printed.
//!
//! `replace` is the same with a plain rename (readers see old or new bytes, never a mix);
//! `delete` is `unlink`, then (allocations) one journal write holding both "this file is
//! gone" and the edge, then a directory `fsync`.
//!
//! Lock files are never deleted: a process that opened a lock file and waits on it must lock
//! the same inode that later lockers open, so the path must never be re-created.
//!
//! Nothing outside the root is touched: names are validated before they reach here, and any
//! symlink among the layout's directories or files is refused.

use std::collections::HashSet;
use std::fs::{self, File, OpenOptions};
use std::io::{self, ErrorKind, Read, Write};
use std::net::Ipv4Addr;
use std::os::unix::fs::{DirEntryExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crate::error::{Error, Result};
use crate::model::{Namespace, PoolName, parse_allocation_name};
use crate::store::journal::{self, Journal};
use crate::store::{
    Entry, IndexEntry, IndexView, LockGuard, LockMode, Object, ObjectKind, Store, Version,
};
use crate::yaml::MAX_MANIFEST_BYTES;

/// The marker file that identifies a state directory.
pub const MARKER: &str = ".ipamctl";
/// The layout version written into the marker.
pub const LAYOUT_VERSION: u32 = 1;
/// Prefix of temporary files.
pub const TMP_PREFIX: &str = ".tmp-";
/// Directory of the derived owner index and owner locks, inside each `ipallocations/`.
pub const INDEX_DIR: &str = ".index";
/// The owner-index journal, inside each `.index/`.
pub const JOURNAL: &str = "journal";
/// Number of owner lock stripes per pool.
const OWNER_STRIPES: u64 = 32;

/// The contents of `.gitignore` written by `init`.
pub const GITIGNORE: &str = "\
# Written by `ipamctl init`: locks, the derived owner index and temporary files are
# local to each checkout and never committed.
.tmp-*
.lock
.*.lock
.index/
";

/// A state directory on the local filesystem.
#[derive(Debug)]
pub struct FsStore {
    root: PathBuf,
    /// Layout directories already found to be real directories (no symlink on the way),
    /// so that a command reading thousands of files checks each directory once, not once a
    /// file. A check is as good as the moment it was made either way.
    checked: Mutex<HashSet<PathBuf>>,
}

fn kind_dir(kind: ObjectKind) -> &'static str {
    match kind {
        ObjectKind::Pool => "ipampools",
        ObjectKind::Allocation => "ipallocations",
    }
}

/// `fsync`s a directory so that names created or removed in it are durable.
fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| Error::io(dir, e))
}

/// Refuses a path that is a symlink (which could lead outside the root).
fn refuse_symlink(path: &Path) -> Result<()> {
    match fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_symlink() => Err(Error::Corrupt {
            path: path.to_owned(),
            message: "is a symlink; ipamctl never follows symlinks inside the state directory"
                .into(),
        }),
        _ => Ok(()),
    }
}

impl FsStore {
    /// Opens the state directory at `root`, which must hold the marker.
    pub fn open(root: &Path) -> Result<FsStore> {
        let marker = root.join(MARKER);
        match fs::read_to_string(&marker) {
            Ok(text) => {
                check_marker(&marker, &text)?;
                Ok(FsStore::at(root))
            }
            Err(e) if e.kind() == ErrorKind::NotFound => Err(Error::NoStateDir {
                message: format!(
                    "`{}` is not an ipamctl state directory (no `{MARKER}` file)",
                    root.display()
                ),
            }),
            Err(e) => Err(Error::io(marker, e)),
        }
    }

    /// Finds the state directory: `root` itself if given, else the nearest ancestor of the
    /// current directory that holds the marker, as git finds `.git`.
    pub fn discover(root: Option<&Path>) -> Result<FsStore> {
        if let Some(root) = root {
            return FsStore::open(root);
        }
        let cwd = std::env::current_dir().map_err(|e| Error::io(".", e))?;
        for dir in cwd.ancestors() {
            if dir.join(MARKER).is_file() {
                return FsStore::open(dir);
            }
        }
        Err(Error::NoStateDir {
            message: format!(
                "no ipamctl state directory found in `{}` or any parent directory",
                cwd.display()
            ),
        })
    }

    /// Makes `root` a state directory (creating it if needed). Idempotent; returns whether
    /// it was new.
    pub fn init(root: &Path) -> Result<bool> {
        fs::create_dir_all(root).map_err(|e| Error::io(root, e))?;
        let marker = root.join(MARKER);
        if let Ok(text) = fs::read_to_string(&marker) {
            check_marker(&marker, &text)?;
            return Ok(false);
        }
        let store = FsStore::at(root);
        let marker_text = format!(
            "# This directory is an ipamctl state directory. Do not remove this file.\nlayout: {LAYOUT_VERSION}\n"
        );
        store.write_file(root, ".gitignore", GITIGNORE.as_bytes(), false, None)?;
        store.write_file(root, MARKER, marker_text.as_bytes(), true, None)?;
        Ok(true)
    }

    /// The root directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Directory of `kind` objects in scope `ns`, relative to the root.
    pub fn relative_dir(kind: ObjectKind, ns: Option<&Namespace>) -> PathBuf {
        let mut dir = PathBuf::new();
        match ns {
            None => dir.push("cluster"),
            Some(ns) => {
                dir.push("namespaces");
                dir.extend(ns.as_str().split('/'));
            }
        }
        dir.push(kind_dir(kind));
        dir
    }

    /// The directory of `kind` objects in scope `ns`, after checking that no directory on
    /// the way from the root is a symlink.
    fn dir(&self, kind: ObjectKind, ns: Option<&Namespace>) -> Result<PathBuf> {
        let target = self.root.join(FsStore::relative_dir(kind, ns));
        let mut checked = self.checked.lock().unwrap_or_else(|e| e.into_inner());
        if checked.contains(&target) {
            return Ok(target);
        }
        let mut path = self.root.clone();
        for component in FsStore::relative_dir(kind, ns).components() {
            path.push(component);
            refuse_symlink(&path)?;
        }
        // Only an existing directory is remembered: a missing one may still appear as a link.
        if fs::symlink_metadata(&path).is_ok_and(|m| m.is_dir()) {
            checked.insert(path.clone());
        }
        Ok(path)
    }

    fn at(root: &Path) -> FsStore {
        FsStore {
            root: root.to_owned(),
            checked: Mutex::new(HashSet::new()),
        }
    }

    /// Like [`FsStore::dir`], creating missing directories durably.
    fn dir_created(&self, kind: ObjectKind, ns: Option<&Namespace>) -> Result<PathBuf> {
        let dir = self.dir(kind, ns)?;
        if !dir.is_dir() {
            fs::create_dir_all(&dir).map_err(|e| Error::io(&dir, e))?;
            // The new directories must survive a crash along with the first file in them.
            let mut p = dir.as_path();
            while let Some(parent) = p.parent() {
                sync_dir(parent)?;
                if parent == self.root {
                    break;
                }
                p = parent;
            }
        }
        Ok(dir)
    }

    fn file_path(&self, kind: ObjectKind, ns: Option<&Namespace>, name: &str) -> Result<PathBuf> {
        Ok(self.dir(kind, ns)?.join(format!("{name}.yaml")))
    }

    /// Writes `file` in `dir` via a synced temporary file; `noclobber` keeps an existing one.
    /// Returns the inode number, or `None` if `noclobber` found the name taken.
    ///
    /// With `index` (an allocations directory's `.index/`), the temporary file lives there,
    /// so the only change to `dir` is the claim itself, and that change is logged as a
    /// journal edge (see [`super::journal`]).
    fn write_file(
        &self,
        dir: &Path,
        file: &str,
        bytes: &[u8],
        noclobber: bool,
        index: Option<&Path>,
    ) -> Result<Option<u64>> {
        let target = dir.join(file);
        // A name already taken needs no temporary file and no fsync to find out: when many
        // processes claim at once, each one that lost an address moves on without paying a
        // durable write for it. The link below still arbitrates claims made after this check.
        if noclobber && fs::symlink_metadata(&target).is_ok() {
            return Ok(None);
        }
        let tmp_dir = index.unwrap_or(dir);
        let mut tmp = tempfile::Builder::new()
            .prefix(TMP_PREFIX)
            // Like any file (0666 less the umask), not tempfile's private 0600: the state is
            // shared by every user and job that runs ipamctl on it, and by git.
            .permissions(fs::Permissions::from_mode(0o666))
            .tempfile_in(tmp_dir)
            .map_err(|e| Error::io(tmp_dir, e))?;
        tmp.write_all(bytes).map_err(|e| Error::io(tmp.path(), e))?;
        failpoint!("write-after-temp-written");
        tmp.as_file()
            .sync_all()
            .map_err(|e| Error::io(tmp.path(), e))?;
        failpoint!("write-after-temp-synced");
        let stamp = tmp
            .as_file()
            .metadata()
            .map_err(|e| Error::io(tmp.path(), e))?
            .ino();
        let before = index.and_then(|_| dir_version(dir));
        if noclobber {
            match tmp.persist_noclobber(&target) {
                Ok(_) => {}
                Err(e) if e.error.kind() == ErrorKind::AlreadyExists => return Ok(None),
                Err(e) => return Err(Error::io(&target, e.error)),
            }
        } else {
            tmp.persist(&target)
                .map_err(|e| Error::io(&target, e.error))?;
        }
        failpoint!("write-after-name-claimed");
        if let Some(index) = index {
            // A crash before this line leaves the change unlogged: the journal then distrusts
            // the directory and the next look-up reads every file, which finds this one.
            self.journal_append(index, &[], before, dir);
        }
        sync_dir(dir)?;
        failpoint!("write-after-dir-synced");
        Ok(Some(stamp))
    }

    /// Appends `lines` and, if `before` is known, the edge from it to the directory's
    /// version now, in one write. Best effort: a lost line only costs a later full read.
    fn journal_append(&self, index: &Path, lines: &[String], before: Option<Version>, dir: &Path) {
        let mut text: String = lines.concat();
        if let (Some(before), Some(after)) = (before, dir_version(dir)) {
            text.push_str(&journal::edge_line(before, after));
        }
        if text.is_empty() {
            return;
        }
        let path = index.join(JOURNAL);
        if refuse_symlink(&path).is_err() {
            return;
        }
        // One O_APPEND write: concurrent appenders do not interleave within it. A torn tail
        // (power loss) fails to parse and is ignored.
        let _ = OpenOptions::new()
            .append(true)
            .create(true)
            .open(&path)
            .and_then(|mut f| f.write_all(text.as_bytes()));
    }

    fn lock_file(&self, path: &Path, mode: LockMode) -> Result<LockGuard> {
        refuse_symlink(path)?;
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map_err(|e| Error::io(path, e))?;
        match mode {
            LockMode::Shared => file.lock_shared(),
            LockMode::Exclusive => file.lock(),
        }
        .map_err(|e| Error::io(path, e))?;
        Ok(Box::new(file))
    }

    fn index_dir(&self, ns: Option<&Namespace>) -> Result<PathBuf> {
        let dir = self
            .dir_created(ObjectKind::Allocation, ns)?
            .join(INDEX_DIR);
        refuse_symlink(&dir)?;
        match fs::create_dir(&dir) {
            Ok(()) => Ok(dir),
            Err(e) if e.kind() == ErrorKind::AlreadyExists => Ok(dir),
            Err(e) => Err(Error::io(&dir, e)),
        }
    }

    /// The `.index/` directory whose journal logs changes to `kind` objects in `ns`: only
    /// allocation directories have one.
    fn journal_dir(&self, kind: ObjectKind, ns: Option<&Namespace>) -> Result<Option<PathBuf>> {
        match kind {
            ObjectKind::Allocation => self.index_dir(ns).map(Some),
            ObjectKind::Pool => Ok(None),
        }
    }

    /// The per-owner hint directory of `pool`; refused if it or `.index` is a symlink.
    fn owners_dir(&self, ns: Option<&Namespace>, pool: &PoolName) -> Result<PathBuf> {
        let index = self.dir(ObjectKind::Allocation, ns)?.join(INDEX_DIR);
        refuse_symlink(&index)?;
        let owners = index.join(format!("{pool}.owners"));
        refuse_symlink(&owners)?;
        Ok(owners)
    }

    /// The journal of the allocations directory of `ns`; refused if it or `.index` is a
    /// symlink.
    fn journal_path(&self, ns: Option<&Namespace>) -> Result<PathBuf> {
        let index = self.dir(ObjectKind::Allocation, ns)?.join(INDEX_DIR);
        refuse_symlink(&index)?;
        let journal = index.join(JOURNAL);
        refuse_symlink(&journal)?;
        Ok(journal)
    }
}

/// The version of a directory: its change time in nanoseconds (see [`super::journal`]).
fn dir_version(dir: &Path) -> Option<Version> {
    version_of(&fs::symlink_metadata(dir).ok()?)
}

/// A change time in nanoseconds.
fn version_of(meta: &fs::Metadata) -> Option<Version> {
    Some(i128::from(meta.ctime()) * 1_000_000_000 + i128::from(meta.ctime_nsec()))
}

fn check_marker(path: &Path, text: &str) -> Result<()> {
    let version = text
        .lines()
        .find_map(|l| l.strip_prefix("layout:"))
        .and_then(|v| v.trim().parse::<u32>().ok());
    match version {
        Some(LAYOUT_VERSION) => Ok(()),
        Some(v) => Err(Error::Corrupt {
            path: path.to_owned(),
            message: format!(
                "layout version {v} is not supported by this ipamctl (it reads version {LAYOUT_VERSION})"
            ),
        }),
        None => Err(Error::Corrupt {
            path: path.to_owned(),
            message: "has no `layout: N` line".into(),
        }),
    }
}

/// Reads at most [`MAX_MANIFEST_BYTES`]; a larger file is an error, not a memory blow-up.
fn read_bounded(file: &mut File, path: &Path, size_hint: u64) -> Result<Vec<u8>> {
    // Sized from the fstat: one read for the data and one for the end of file.
    let mut bytes = Vec::with_capacity(size_hint.min(MAX_MANIFEST_BYTES) as usize + 1);
    file.take(MAX_MANIFEST_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| Error::io(path, e))?;
    if bytes.len() as u64 > MAX_MANIFEST_BYTES {
        return Err(Error::Corrupt {
            path: path.to_owned(),
            message: format!("is larger than {MAX_MANIFEST_BYTES} bytes; not a manifest"),
        });
    }
    Ok(bytes)
}

impl Store for FsStore {
    fn locate(&self, kind: ObjectKind, ns: Option<&Namespace>, name: &str) -> String {
        FsStore::relative_dir(kind, ns)
            .join(format!("{name}.yaml"))
            .display()
            .to_string()
    }

    fn get(&self, kind: ObjectKind, ns: Option<&Namespace>, name: &str) -> Result<Option<Object>> {
        let path = self.file_path(kind, ns, name)?;
        // O_NOFOLLOW refuses a symlink in the open itself; O_NONBLOCK keeps a FIFO under a
        // manifest's name from blocking the open. One open and one fstat, however many files
        // a command reads.
        let opened = OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
            .open(&path);
        let mut file = match opened {
            Ok(f) => f,
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
            Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
                return Err(Error::Corrupt {
                    path,
                    message:
                        "is a symlink; ipamctl never follows symlinks inside the state directory"
                            .into(),
                });
            }
            Err(e) => return Err(Error::io(&path, e)),
        };
        let meta = file.metadata().map_err(|e| Error::io(&path, e))?;
        // A directory or a FIFO under a manifest's name is no manifest.
        if !meta.is_file() {
            return Err(Error::Corrupt {
                path,
                message: "is not a regular file".into(),
            });
        }
        let bytes = read_bounded(&mut file, &path, meta.len())?;
        Ok(Some(Object {
            bytes,
            stamp: meta.ino(),
        }))
    }

    fn create(
        &self,
        kind: ObjectKind,
        ns: Option<&Namespace>,
        name: &str,
        bytes: &[u8],
    ) -> Result<Option<u64>> {
        let dir = self.dir_created(kind, ns)?;
        let index = self.journal_dir(kind, ns)?;
        self.write_file(&dir, &format!("{name}.yaml"), bytes, true, index.as_deref())
    }

    fn replace(
        &self,
        kind: ObjectKind,
        ns: Option<&Namespace>,
        name: &str,
        bytes: &[u8],
    ) -> Result<()> {
        let dir = self.dir_created(kind, ns)?;
        let index = self.journal_dir(kind, ns)?;
        self.write_file(
            &dir,
            &format!("{name}.yaml"),
            bytes,
            false,
            index.as_deref(),
        )?;
        Ok(())
    }

    fn delete(&self, kind: ObjectKind, ns: Option<&Namespace>, name: &str) -> Result<bool> {
        let path = self.file_path(kind, ns, name)?;
        refuse_symlink(&path)?;
        let dir = path.parent().expect("object paths have a parent");
        let index = self.journal_dir(kind, ns)?;
        let before = index.as_ref().and_then(|_| dir_version(dir));
        match fs::remove_file(&path) {
            Ok(()) => {}
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(false),
            Err(e) => return Err(Error::io(&path, e)),
        }
        failpoint!("delete-after-unlink");
        if let Some(index) = &index {
            // The deletion and the edge in one write: if the deletion is logged, so is the
            // change, and a later file under this name is never taken for the old one.
            let gone: Vec<String> = parse_allocation_name(name)
                .map(|(pool, address)| {
                    journal::fact_line(
                        pool,
                        &IndexEntry {
                            address,
                            stamp: 0,
                            key: 0,
                        },
                    )
                })
                .into_iter()
                .collect();
            self.journal_append(index, &gone, before, dir);
        }
        sync_dir(dir)?;
        Ok(true)
    }

    fn list(&self, kind: ObjectKind, ns: Option<&Namespace>) -> Result<Vec<Entry>> {
        let dir = self.dir(kind, ns)?;
        let read = match fs::read_dir(&dir) {
            Ok(r) => r,
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(Error::io(&dir, e)),
        };
        let mut entries = Vec::new();
        for entry in read {
            let entry = entry.map_err(|e| Error::io(&dir, e))?;
            let file_name = entry.file_name();
            let Some(name) = file_name.to_str() else {
                continue;
            };
            if name.starts_with('.') {
                continue;
            }
            if let Some(stem) = name.strip_suffix(".yaml") {
                entries.push(Entry {
                    name: stem.to_owned(),
                    stamp: entry.ino(),
                });
            }
        }
        Ok(entries)
    }

    fn scopes(&self) -> Result<Vec<Option<Namespace>>> {
        let mut scopes = vec![None];
        let base = self.root.join("namespaces");
        refuse_symlink(&base)?;
        let mut stack = vec![(base, String::new())];
        while let Some((dir, prefix)) = stack.pop() {
            let read = match fs::read_dir(&dir) {
                Ok(r) => r,
                Err(e) if e.kind() == ErrorKind::NotFound => continue,
                Err(e) => return Err(Error::io(&dir, e)),
            };
            let mut is_scope = false;
            for entry in read {
                let entry = entry.map_err(|e| Error::io(&dir, e))?;
                // file_type() comes from the directory entry: symlinks are seen, not followed.
                let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
                let name = entry.file_name().to_string_lossy().into_owned();
                if !is_dir || name.starts_with('.') {
                    continue;
                }
                if name == "ipampools" || name == "ipallocations" {
                    is_scope = true;
                    continue;
                }
                let child = if prefix.is_empty() {
                    name
                } else {
                    format!("{prefix}/{name}")
                };
                stack.push((entry.path(), child));
            }
            if is_scope && let Ok(ns) = Namespace::new(&prefix) {
                scopes.push(Some(ns));
            }
        }
        scopes.sort();
        Ok(scopes)
    }

    fn lock_pool(
        &self,
        ns: Option<&Namespace>,
        pool: &PoolName,
        mode: LockMode,
    ) -> Result<LockGuard> {
        let dir = self.dir_created(ObjectKind::Pool, ns)?;
        self.lock_file(&dir.join(format!(".{pool}.lock")), mode)
    }

    fn lock_scope(&self, ns: Option<&Namespace>) -> Result<LockGuard> {
        let dir = self.dir_created(ObjectKind::Pool, ns)?;
        self.lock_file(&dir.join(".lock"), LockMode::Exclusive)
    }

    fn lock_owner(&self, ns: Option<&Namespace>, pool: &PoolName, key: u64) -> Result<LockGuard> {
        let dir = self.index_dir(ns)?;
        let stripe = key % OWNER_STRIPES;
        self.lock_file(
            &dir.join(format!("{pool}.lock-{stripe:02}")),
            LockMode::Exclusive,
        )
    }

    fn index_hint(&self, ns: Option<&Namespace>, pool: &PoolName, key: u64) -> Option<Ipv4Addr> {
        let path = self.owners_dir(ns, pool).ok()?.join(format!("{key:016x}"));
        refuse_symlink(&path).ok()?;
        let text = fs::read_to_string(path).ok()?;
        text.strip_suffix('\n')?.parse().ok()
    }

    fn changed_at(&self, ns: Option<&Namespace>, name: &str) -> Option<Version> {
        let path = self.file_path(ObjectKind::Allocation, ns, name).ok()?;
        version_of(&fs::symlink_metadata(path).ok()?)
    }

    fn index_load(&self, ns: Option<&Namespace>, pool: &PoolName) -> IndexView {
        let Ok(dir) = self.dir(ObjectKind::Allocation, ns) else {
            return IndexView::default();
        };
        // The version first: a change made while the journal is read is then not covered.
        let Some(version) = dir_version(&dir) else {
            return IndexView::default();
        };
        let text = self
            .journal_path(ns)
            .and_then(|path| fs::read_to_string(&path).map_err(|e| Error::io(path, e)))
            .unwrap_or_default();
        let mut journal = Journal::parse_for(&text, Some(pool.as_str()));
        let trusted = journal.trusted(pool.as_str(), version);
        // Every change adds an edge (and a fact or a deletion): rewrite once the history
        // outweighs the pool, so the cost of a rewrite is spread over as many changes.
        if journal.edge_lines > COMPACT_SLACK.max(journal.fact_lines / 2) {
            self.compact(ns, &Journal::parse(&text), version);
        }
        IndexView {
            facts: journal.facts(pool.as_str()),
            version: Some(version),
            trusted,
            settled: (!trusted).then(|| journal.settled(pool.as_str())).flatten(),
        }
    }

    fn index_record(
        &self,
        ns: Option<&Namespace>,
        pool: &PoolName,
        entries: &[IndexEntry],
        hint: Option<IndexEntry>,
        verified: Option<Version>,
    ) {
        // Best effort by design: losing any of this only makes a later look-up read files.
        let _ = self.try_index_record(ns, pool, entries, hint, verified);
    }
}

/// Logged changes below which the journal is never rewritten.
const COMPACT_SLACK: usize = 4096;

impl FsStore {
    fn try_index_record(
        &self,
        ns: Option<&Namespace>,
        pool: &PoolName,
        entries: &[IndexEntry],
        hint: Option<IndexEntry>,
        verified: Option<Version>,
    ) -> io::Result<()> {
        // Every path below is checked for a symlink first: the index is git-ignored, but a
        // repository can still carry one (`git add -f`), and it must not lead a write out.
        let index = self.index_dir(ns).map_err(io::Error::other)?;
        let mut lines: Vec<String> = entries
            .iter()
            .map(|e| journal::fact_line(pool.as_str(), e))
            .collect();
        lines.extend(verified.map(|v| journal::root_line(pool.as_str(), v)));
        let dir = self
            .dir(ObjectKind::Allocation, ns)
            .map_err(io::Error::other)?;
        self.journal_append(&index, &lines, None, &dir);
        if let Some(h) = hint {
            failpoint!("index-between-log-and-hint");
            let owners = self.owners_dir(ns, pool).map_err(io::Error::other)?;
            match fs::create_dir(&owners) {
                Err(e) if e.kind() != ErrorKind::AlreadyExists => return Err(e),
                _ => {}
            }
            let path = owners.join(format!("{:016x}", h.key));
            refuse_symlink(&owners)
                .and_then(|()| refuse_symlink(&path))
                .map_err(io::Error::other)?;
            // Written under the owner's lock, so no two writers race on one key file.
            fs::write(path, format!("{}\n", h.address))?;
        }
        Ok(())
    }

    /// Rewrites the journal with only what it knows (best effort). An append racing the
    /// rename is lost; a lost fact is read again, a lost edge makes the next look-up read
    /// every file, so nothing it knew wrongly survives.
    fn compact(&self, ns: Option<&Namespace>, journal: &Journal, version: Version) {
        let Ok(path) = self.journal_path(ns) else {
            return;
        };
        let Some(index) = path.parent() else { return };
        let _ = tempfile::Builder::new()
            .prefix(TMP_PREFIX)
            .tempfile_in(index)
            .and_then(|mut tmp| {
                tmp.write_all(journal.compacted(version).as_bytes())?;
                tmp.persist(&path).map_err(|e| e.error)?;
                Ok(())
            });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A journal that is mostly history is rewritten to its facts and a root, and the index
    /// stays trusted across the rewrite.
    #[test]
    fn a_journal_of_mostly_history_is_compacted_and_stays_trusted() {
        let dir = tempfile::tempdir().unwrap();
        FsStore::init(dir.path()).unwrap();
        let store = FsStore::open(dir.path()).unwrap();
        let pool = PoolName::new("p").unwrap();
        let index = store.index_dir(None).unwrap();
        let allocations = store.dir(ObjectKind::Allocation, None).unwrap();
        let version = dir_version(&allocations).unwrap();
        // One fact, a root, then a chain of logged changes ending at the current version.
        let mut text = String::from("F p 10.0.0.1 7 00000000000000ff\n");
        text.push_str(&journal::root_line("p", version - 5000));
        for i in (1..=5000).rev() {
            text.push_str(&journal::edge_line(version - i, version - i + 1));
        }
        fs::write(index.join(JOURNAL), &text).unwrap();

        let view = store.index_load(None, &pool);
        assert!(view.trusted);
        assert_eq!(
            view.facts.get(&"10.0.0.1".parse().unwrap()),
            Some(&(7, 255))
        );
        let compacted = fs::read_to_string(index.join(JOURNAL)).unwrap();
        assert_eq!(
            compacted,
            format!("F p 10.0.0.1 7 00000000000000ff\nV p {version}\n")
        );
        assert!(store.index_load(None, &pool).trusted);
    }
}
