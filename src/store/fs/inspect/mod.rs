//! The file store's capabilities ([`crate::store::capability`]): it is a [`StateDir`]. Its
//! walk (`layout.rs`, with ipamctl's own files in `layout/own_files.rs`) classifies every entry
//! under the root against the layout without following a single symlink: every directory is
//! opened beneath its parent's handle and every file stated or read relative to its
//! directory's handle ([`super::beneath`]); no path is resolved from the top. The files it
//! finds are read again through those handles ([`DirHandle`]).

mod layout;

use std::ffi::OsStr;
use std::io::ErrorKind;
use std::os::fd::OwnedFd;
use std::path::{Component, Path};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rustix::fs::{FileType, Stat};

use super::FsStore;
use super::beneath::{self, Refused};
use super::macs::{MacRecord, record_name};
use crate::error::{Error, Result};
use crate::model::layout::{self as places, ScopeDir};
use crate::model::{AllocationManifest, Namespace};
use crate::store::capability::{Capabilities, StateDir};
use crate::store::fs::TMP_PREFIX;
use crate::store::inspect::{MacRecordSeen, ManifestFile, ReadAgain, RecordSays, Walked};
use crate::yaml::MAX_MANIFEST_BYTES;

/// The most a MAC record's file holds that is read: an address and an owner's line.
const MAC_RECORD_BYTES: u64 = 4096;

impl Capabilities for FsStore {
    fn describe(&self) -> String {
        self.root().display().to_string()
    }

    fn state_dir(&self) -> Option<&dyn StateDir> {
        Some(self)
    }
}

impl StateDir for FsStore {
    fn root(&self) -> &Path {
        FsStore::root(self)
    }

    fn walk(&self) -> Walked {
        layout::walk(FsStore::root(self), self.root_fd())
    }

    fn file(&self, rel: &str, scope: Option<&Namespace>, stem: &str) -> Option<ManifestFile> {
        // As in the walk, a file that is not a regular file beneath the root (one behind a
        // symlinked directory, say) is none.
        let (dir, name) = beneath::open_parent(self.root_fd(), Path::new(rel)).ok()?;
        let stat = beneath::stat(&dir, name).ok()??;
        let name = name.to_owned();
        (FileType::from_raw_mode(stat.st_mode) == FileType::RegularFile).then(|| ManifestFile {
            rel: rel.to_owned(),
            scope: scope.cloned(),
            stem: stem.to_owned(),
            name,
            dir: Some(Arc::new(DirHandle(dir))),
        })
    }

    fn mac_record(&self, scope: Option<&Namespace>, m: &AllocationManifest) -> MacRecordSeen {
        let Some(mac) = m.spec.mac else {
            return MacRecordSeen {
                path: String::new(),
                says: RecordSays::Missing,
            };
        };
        let dir = places::dir_path(ScopeDir::Macs, scope);
        let path = format!("{dir}/{}", record_name(&m.spec.pool, mac));
        // Read beneath the root like a manifest.
        let read = beneath::open_parent(self.root_fd(), Path::new(&path))
            .and_then(|(dir, name)| beneath::read(&dir, name, MAC_RECORD_BYTES));
        let says = match read {
            Ok(Some(r)) => match MacRecord::parse(&r.bytes) {
                Some(record) if record.address == m.spec.address && record.names(&m.spec.owner) => {
                    RecordSays::This { exactly: true }
                }
                Some(record) if record.address == m.spec.address && record.owner.is_none() => {
                    RecordSays::This { exactly: false }
                }
                _ => RecordSays::Another(
                    String::from_utf8_lossy(&r.bytes)
                        .trim_end()
                        .replace('\n', " of "),
                ),
            },
            Ok(None) | Err(_) => RecordSays::Missing,
        };
        MacRecordSeen { path, says }
    }

    fn remove_leftover(&self, path: &str, old: &dyn Fn(SystemTime) -> bool) -> Result<bool> {
        let rel = Path::new(path);
        let inside = rel.components().all(|c| matches!(c, Component::Normal(_)));
        let is_temp = rel
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with(TMP_PREFIX));
        if !inside || !is_temp {
            return Ok(false);
        }
        let full = FsStore::root(self).join(rel);
        let failed = |why: Refused| match why {
            Refused::Io(e) if e.kind() != ErrorKind::NotFound => Err(Error::io(&full, e)),
            // Gone, or its directory replaced by a symlink or a file: nothing of the state's
            // is there to remove.
            _ => Ok(false),
        };
        // Resolved again from the root, not through the walk's handle: the walk may be
        // minutes old, and a directory it listed may since have been moved out of the root.
        let (dir, name) = match beneath::open_parent(self.root_fd(), rel) {
            Ok(opened) => opened,
            Err(why) => return failed(why),
        };
        let stat = match beneath::stat(&dir, name) {
            Ok(Some(stat)) => stat,
            Ok(None) => return Ok(false),
            Err(why) => return failed(why),
        };
        if FileType::from_raw_mode(stat.st_mode) != FileType::RegularFile || !old(modified(&stat)) {
            return Ok(false);
        }
        // Removed relative to the handle just looked through, and only the file judged: it
        // is taken from its name first and unlinked only if what was taken is still an old
        // regular file (a write that reused the name meanwhile gets its file back). No
        // directory fsync: if a crash undoes this unlink, the next `--fix` removes it again.
        let Some(name) = name.to_str() else {
            return Ok(false);
        };
        let mut ours = |taken: &beneath::ReadFile| old(modified(&taken.stat));
        match beneath::remove_if(&dir, name, false, &mut ours) {
            Ok(removed) => Ok(removed == beneath::Removed::Deleted),
            Err(why) => failed(why),
        }
    }
}

/// A directory the walk opened beneath the root, shared by the files found in it, which
/// are read again through it.
pub(super) struct DirHandle(pub(super) OwnedFd);

impl ReadAgain for DirHandle {
    /// Relative to the directory's handle and without following a symlink; `None` if the
    /// file vanished since the walk (a concurrent release), so that a check running beside
    /// other commands never reports a torn state.
    fn read_text(&self, name: &OsStr) -> std::result::Result<Option<String>, String> {
        let read = match beneath::read(&self.0, name, MAX_MANIFEST_BYTES) {
            Ok(None) => return Ok(None),
            Ok(Some(read)) => read,
            // The walk saw a regular file; a symlink put in its place since is reported,
            // never followed.
            Err(Refused::Symlink) => return Err(layout::SYMLINK.to_owned()),
            Err(Refused::Io(e)) => return Err(format!("cannot read: {e}")),
            Err(other) => return Err(other.reason()),
        };
        String::from_utf8(read.bytes)
            .map(Some)
            .map_err(|_| "is not UTF-8 text".to_owned())
    }
}

/// The modification time a status shows.
fn modified(stat: &Stat) -> SystemTime {
    let nanos = Duration::from_nanos(stat.st_mtime_nsec);
    match u64::try_from(stat.st_mtime) {
        Ok(secs) => UNIX_EPOCH + Duration::from_secs(secs) + nanos,
        Err(_) => UNIX_EPOCH - Duration::from_secs(stat.st_mtime.unsigned_abs()) + nanos,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remove_leftover_refuses_paths_outside_the_root() {
        let dir = tempfile::tempdir().unwrap();
        let outside = dir.path().join(".tmp-outside");
        std::fs::write(&outside, "x").unwrap();
        let root = dir.path().join("state");
        FsStore::init(&root).unwrap();
        let store = FsStore::open(&root).unwrap();
        assert!(!store.remove_leftover("../.tmp-outside", &|_| true).unwrap());
        assert!(outside.exists());
    }
}
