//! Object bytes on the filesystem ([`Objects`]): one file per object, and the write
//! protocol every change follows.
//!
//! # Write protocol, and the crash window each step closes
//!
//! `create` (every claim):
//! 1. write the manifest to a new `.index/.tmp-<random>` and `fsync` it: a crash leaves only
//!    a git-ignored dot-file that no reader takes for a manifest (`check --fix` removes it
//!    once it is old);
//! 2. rename it to `<dir>/<name>.yaml` without replacing (`renameat2(RENAME_NOREPLACE)`, or
//!    `link(2)` where the file system lacks it): the single atomic step that claims the
//!    name. It fails if the name exists, which is how concurrent claimers of one address are
//!    arbitrated. The data was synced first, so the name never points at incomplete bytes,
//!    even after a power loss;
//! 3. `fsync` the directory, so the name survives a power loss before the caller reports the
//!    claim. A crash before this step may lose the claim, but nothing was printed.
//!
//! `git clean -fdX` may delete the temporary file between steps 1 and 2 (it is git-ignored):
//! the rename then fails with "no such file" and the write starts again (three times). After
//! step 3 a claim ([`crate::store::Claims::claim`], in `claims.rs`) writes the owner's hint
//! (best effort): a crash before it only makes the owner's next look-up scan.
//!
//! `replace` is the same with a plain rename (readers see the old or the new bytes).
//! Every delete of something judged first (a release, `check --fix`'s pruning, a pool's or
//! VPC's deletion) is `delete_if` ([`beneath::remove_if`]): rename to a private name, read
//! and judge what was taken, then unlink it, or rename it back without replacing anything;
//! then a directory `fsync`. An outside `rm` and a new claim between the judging read and
//! the delete therefore never lose the new claim: the rename takes it, the judge sees it is
//! not the one read, and it goes back. A crash between the rename and the unlink leaves the
//! private file (`check` reports it): the object is deleted, or (if it was not ours) is
//! under the private name. No index is written on these paths: the
//! owner index learns of a change by reading the file, so no crash between a change and an
//! index update can leave the index vouching for something false.

use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::model::Namespace;
use crate::model::layout::{self, ScopeDir};
use crate::store::fs::beneath::{self, Refused, Removed, WriteMode, refused};
use crate::store::fs::{FsStore, INDEX_DIR};
use crate::store::{ObjectKind, Objects, Release};
use crate::yaml::MAX_MANIFEST_BYTES;

impl Objects for FsStore {
    fn locate(&self, kind: ObjectKind, ns: Option<&Namespace>, name: &str) -> String {
        layout::object_path(kind, ns, name)
    }

    fn get(&self, kind: ObjectKind, ns: Option<&Namespace>, name: &str) -> Result<Option<Vec<u8>>> {
        let Some(dir) = self.dir(kind, ns, false)? else {
            return Ok(None);
        };
        let file = format!("{name}.yaml");
        match beneath::read(&*dir, &file, MAX_MANIFEST_BYTES) {
            Ok(read) => Ok(read.map(|r| r.bytes)),
            Err(e) => Err(refused(self.path(kind, ns, &file), e)),
        }
    }

    fn get_to_search(
        &self,
        kind: ObjectKind,
        ns: Option<&Namespace>,
        name: &str,
    ) -> Result<Option<Vec<u8>>> {
        let Some(dir) = self.dir(kind, ns, false)? else {
            return Ok(None);
        };
        let file = format!("{name}.yaml");
        match beneath::read(&*dir, &file, beneath::MAX_READ) {
            Ok(read) => Ok(read.map(|r| r.bytes)),
            // Never opened: no bytes that could name anyone.
            Err(beneath::Refused::Symlink | beneath::Refused::NotAFile(_)) => Ok(Some(Vec::new())),
            Err(e) => Err(refused(self.path(kind, ns, &file), e)),
        }
    }

    fn create(
        &self,
        kind: ObjectKind,
        ns: Option<&Namespace>,
        name: &str,
        bytes: &[u8],
    ) -> Result<bool> {
        self.create_with(kind, ns, name, bytes, None)
    }

    fn replace(
        &self,
        kind: ObjectKind,
        ns: Option<&Namespace>,
        name: &str,
        bytes: &[u8],
    ) -> Result<()> {
        let dir = self.dir(kind, ns, true)?.expect("created");
        let file = format!("{name}.yaml");
        beneath::write(&*dir, &file, bytes, WriteMode::Replace, true, &|| {
            self.scratch()
        })
        .map_err(|e| write_error(self.path(kind, ns, &file), e))?;
        Ok(())
    }

    fn delete(&self, kind: ObjectKind, ns: Option<&Namespace>, name: &str) -> Result<bool> {
        let Some(dir) = self.dir(kind, ns, false)? else {
            return Ok(false);
        };
        let file = format!("{name}.yaml");
        beneath::remove(&*dir, &file, true).map_err(|e| write_error(self.path(kind, ns, &file), e))
    }

    fn delete_if(
        &self,
        kind: ObjectKind,
        ns: Option<&Namespace>,
        name: &str,
        ours: &mut dyn FnMut(&[u8]) -> bool,
    ) -> Result<Release> {
        let Some(dir) = self.dir(kind, ns, false)? else {
            return Ok(Release::Gone);
        };
        let file = format!("{name}.yaml");
        let removed = beneath::remove_if(&*dir, &file, true, &mut |taken| ours(&taken.bytes))
            .map_err(|e| write_error(self.path(kind, ns, &file), e))?;
        Ok(match removed {
            Removed::Deleted => Release::Deleted,
            Removed::Gone => Release::Gone,
            Removed::Kept => Release::Changed,
        })
    }

    fn list(&self, kind: ObjectKind, ns: Option<&Namespace>) -> Result<Vec<String>> {
        match self.dir(kind, ns, false)? {
            Some(dir) => self.names(&dir),
            None => Ok(Vec::new()),
        }
    }

    fn scopes(&self) -> Result<Vec<Option<Namespace>>> {
        let mut scopes = vec![None];
        let base = match beneath::open_dir(&self.fd, Path::new(layout::NAMESPACES)) {
            Ok(fd) => fd,
            Err(e) if e.is_not_found() => return Ok(scopes),
            Err(e) => return Err(refused(self.root.join(layout::NAMESPACES), e)),
        };
        let mut stack = vec![(base, String::new())];
        while let Some((dir, prefix)) = stack.pop() {
            let listed = beneath::names(&dir)
                .map_err(|e| refused(self.root.join(layout::NAMESPACES).join(&prefix), e))?;
            let mut is_scope = false;
            for (name, file_type) in listed {
                let Some(name) = beneath::utf8(&name) else {
                    continue;
                };
                // The type from the directory entry: a symlink is seen, never followed.
                let is_dir = match file_type {
                    rustix::fs::FileType::Directory => true,
                    rustix::fs::FileType::Unknown => {
                        beneath::stat(&dir, name).ok().flatten().is_some_and(|s| {
                            rustix::fs::FileType::from_raw_mode(s.st_mode)
                                == rustix::fs::FileType::Directory
                        })
                    }
                    _ => false,
                };
                if !is_dir || name.starts_with('.') {
                    continue;
                }
                match ScopeDir::from_name(name) {
                    // A tenant's quota makes a scope too: its floating IPs are the cluster's.
                    Some(ScopeDir::Objects(
                        ObjectKind::Pool | ObjectKind::Allocation | ObjectKind::Quota,
                    )) => {
                        is_scope = true;
                        continue;
                    }
                    // No namespace segment is a directory of the layout (`check` reports
                    // one made by hand).
                    Some(_) => continue,
                    None => {}
                }
                let child = if prefix.is_empty() {
                    name.to_owned()
                } else {
                    format!("{prefix}/{name}")
                };
                // A segment that is no valid namespace label cannot be part of a scope.
                if Namespace::new(&child).is_err() {
                    continue;
                }
                if let Ok(fd) = beneath::open_dir(&dir, Path::new(name)) {
                    stack.push((fd, child));
                }
            }
            if is_scope && let Ok(ns) = Namespace::new(&prefix) {
                scopes.push(Some(ns));
            }
        }
        scopes.sort();
        Ok(scopes)
    }
}

impl FsStore {
    /// [`Objects::create`]; with `flusher` (a batch's claim), the name is made without its
    /// directory's `fsync`, which is queued there with the locks held now (`flush.rs`).
    pub(super) fn create_with(
        &self,
        kind: ObjectKind,
        ns: Option<&Namespace>,
        name: &str,
        bytes: &[u8],
        flusher: Option<&super::flush::Flusher>,
    ) -> Result<bool> {
        let dir = self.dir(kind, ns, true)?.expect("created");
        let file = format!("{name}.yaml");
        // A name already taken needs no temporary file and no fsync to find out: when many
        // processes claim at once, each one that lost an address moves on without paying a
        // durable write for it. The rename below still arbitrates claims made after this.
        if let Ok(Some(_)) = beneath::stat(&*dir, &file) {
            return Ok(false);
        }
        let scratch = || self.scratch();
        let created = match flusher {
            None => beneath::write(&*dir, &file, bytes, WriteMode::CreateOnly, true, &scratch),
            Some(_) => beneath::create_unsynced(&*dir, &file, bytes, &scratch),
        }
        .map_err(|e| write_error(self.path(kind, ns, &file), e))?;
        if let Some(flusher) = flusher.filter(|_| created) {
            flusher.defer(dir, super::lock::Registry::keep_all(&self.locks));
        }
        Ok(created)
    }

    /// Where writes make their temporary files: `.index/` at the root, made again if `git
    /// clean` removed it.
    pub(super) fn scratch(&self) -> Option<std::result::Result<OwnedFd, Refused>> {
        Some(beneath::subdir(&self.fd, INDEX_DIR))
    }
}

/// A failed write: a read-only directory is its own error (exit 1, "read-only").
pub(super) fn write_error(path: PathBuf, why: Refused) -> Error {
    match why {
        Refused::Io(source)
            if matches!(
                source
                    .raw_os_error()
                    .map(rustix::io::Errno::from_raw_os_error),
                Some(rustix::io::Errno::ROFS | rustix::io::Errno::ACCESS | rustix::io::Errno::PERM)
            ) =>
        {
            Error::ReadOnly { path, source }
        }
        other => refused(path, other),
    }
}
