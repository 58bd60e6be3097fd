//! What a store finds when it inspects itself ([`crate::store::capability`]): notes about
//! what it holds that no object answers for (a stray file, a symlink, a row whose columns
//! disagree with its manifest), the manifest files a state directory's walk found, its
//! temporary files, and what a MAC record says. They are values of the store layer; the
//! engine (`ipamctl check`) turns them into its report and decides what `--fix` does.

use std::ffi::{OsStr, OsString};
use std::sync::Arc;
use std::time::SystemTime;

use serde::Serialize;

use crate::model::Namespace;

/// How bad a finding is. Errors fail the check (exit 1); warnings do not.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// The state is wrong: ipamctl may refuse to work with it or hand out a wrong address.
    Error,
    /// Something ipamctl ignores, but that someone should look at.
    Warning,
}

impl std::fmt::Display for Severity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
        })
    }
}

/// One thing a store noticed about itself, at one path (the path relative to the state
/// directory, or the one `export` would write a row to; `/`-separated, directories end in
/// `/`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Note {
    /// Error or warning.
    pub severity: Severity,
    /// Where.
    pub path: String,
    /// What is wrong, on one line.
    pub message: String,
}

impl Note {
    /// An error at `path`.
    pub fn error(path: &str, message: impl Into<String>) -> Note {
        Note {
            severity: Severity::Error,
            path: path.to_owned(),
            message: message.into(),
        }
    }
}

/// Reads a file its store found, again, the way that store reads (for a state directory:
/// relative to the handle of the directory the walk opened, never following a symlink).
pub trait ReadAgain: Send + Sync {
    /// The text of the file `name` of this directory: `None` if it is gone (a concurrent
    /// release), else why it cannot be read as text, on one line.
    fn read_text(&self, name: &OsStr) -> Result<Option<String>, String>;
}

/// A stored manifest as `check` reads it: a file found by a state directory's walk, or a
/// database row (which has no file to read again: its bytes come through
/// [`crate::store::Objects`]).
#[derive(Clone)]
pub struct ManifestFile {
    /// Its path relative to the root (a row's: where `export` would write it),
    /// `/`-separated.
    pub rel: String,
    /// The scope the path puts it in (`None` = `cluster/`).
    pub scope: Option<Namespace>,
    /// The file name without `.yaml`: the object's name as the tool knows it.
    pub stem: String,
    /// Its name in the directory that holds it, to read it again there.
    pub name: OsString,
    /// The directory that holds it, opened by the walk; `None` for a row.
    pub dir: Option<Arc<dyn ReadAgain>>,
}

impl std::fmt::Debug for ManifestFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ManifestFile")
            .field("rel", &self.rel)
            .field("scope", &self.scope)
            .field("stem", &self.stem)
            .finish_non_exhaustive()
    }
}

impl ManifestFile {
    /// A manifest without a file of its own (a database row), named by where `export`
    /// would write it.
    pub fn row(rel: String, scope: Option<&Namespace>, name: &str) -> ManifestFile {
        ManifestFile {
            rel,
            scope: scope.cloned(),
            stem: name.to_owned(),
            name: name.into(),
            dir: None,
        }
    }

    /// Reads it again as text (see [`ReadAgain::read_text`]); a row has nothing to read.
    pub fn read_text(&self) -> Result<Option<String>, String> {
        match &self.dir {
            Some(dir) => dir.read_text(&self.name),
            None => Ok(None),
        }
    }
}

/// A temporary file (`.tmp-*`) a walk found, with its modification time: what a write in
/// flight or one that died leaves behind.
#[derive(Clone, Debug)]
pub struct Leftover {
    /// Relative to the root.
    pub path: String,
    /// When it was last written.
    pub modified: SystemTime,
}

/// What a state directory's walk found: the notes of its layout, the manifest files of each
/// kind (not read yet) and the temporary files.
#[derive(Debug, Default)]
pub struct Walked {
    pub notes: Vec<Note>,
    pub pools: Vec<ManifestFile>,
    pub allocations: Vec<ManifestFile>,
    pub subnets: Vec<ManifestFile>,
    pub cooldown: Vec<ManifestFile>,
    pub prefix_claims: Vec<ManifestFile>,
    pub quotas: Vec<ManifestFile>,
    pub leftovers: Vec<Leftover>,
}

/// What a store's record of a MAC (the file store's `macs/`) says of an allocation that
/// holds the MAC.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RecordSays {
    /// There is no record (deleted, or a MAC written by hand), or it cannot be read.
    Missing,
    /// It names this allocation's claim: its address and owner, or (`exactly: false`) its
    /// address alone, as an older version wrote it.
    This { exactly: bool },
    /// It names another claim: what it holds, on one line.
    Another(String),
}

/// A MAC record, as [`crate::store::capability::StateDir::mac_record`] read it.
#[derive(Clone, Debug)]
pub struct MacRecordSeen {
    /// Where the record is, relative to the root.
    pub path: String,
    /// What it says of the allocation asked about.
    pub says: RecordSays,
}
