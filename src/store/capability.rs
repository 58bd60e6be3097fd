//! What only one kind of store can do, reached through the store: the engine asks
//! [`Capabilities::state_dir`] or [`Capabilities::database`] and never names
//! `FsStore` or `PgStore` (`tests/layers.rs` holds it to that). A store offers what it has;
//! a command that needs what the store lacks says so.
//!
//! - [`StateDir`]: a store kept as files in a directory. `check` walks it (it must see what
//!   [`crate::store::Objects`] hides: dot-files, stray files, symlinks, temporary files,
//!   MAC records), and `diff` and `history` read its git history from its root.
//! - [`Database`]: a store that can answer in one snapshot and inspect its own tables
//!   (`check`'s database findings, the namespaces `export` leaves out).

use std::path::Path;
use std::time::SystemTime;

use crate::error::Result;
use crate::model::{AllocationManifest, Namespace};
use crate::store::inspect::{MacRecordSeen, ManifestFile, Note, Walked};

/// What a store can do beyond [`crate::store::Store`]'s common concerns. Each is `None`
/// unless the store has it.
pub trait Capabilities {
    /// The store as messages name it: a state directory's path, a database's connection
    /// (never its password).
    fn describe(&self) -> String;

    /// The directory the store keeps its objects in, as files.
    fn state_dir(&self) -> Option<&dyn StateDir> {
        None
    }

    /// The database the store keeps its objects in.
    fn database(&self) -> Option<&dyn Database> {
        None
    }
}

/// A store kept as files in one directory (the state directory), which a GitOps
/// repository may hold. Every file is reached beneath the root's handle, never following a
/// symlink, so nothing planted inside leads a read or an unlink outside it.
pub trait StateDir: Sync {
    /// The root, as given: where git runs for `diff` and `history`.
    fn root(&self) -> &Path;

    /// Walks the whole directory and classifies every entry against the layout: the
    /// manifests found (not read), ipamctl's temporary files, and notes for everything
    /// else it owns that is not part of the layout (the root's other files, such as a
    /// README or `.git`, are left alone). Never writes; entries removed while it walks are
    /// skipped.
    fn walk(&self) -> Walked;

    /// The manifest file at `rel` (relative to the root), if it is a regular file beneath
    /// the root reached without a symlink, found afresh (not through a walk's handles).
    /// `scope` and `stem` are what its place means, for the caller to give.
    fn file(&self, rel: &str, scope: Option<&Namespace>, stem: &str) -> Option<ManifestFile>;

    /// What the record of the MAC `m` holds (`spec.mac`; `Missing` without one) says of
    /// `m`, which is stored in `scope`.
    fn mac_record(&self, scope: Option<&Namespace>, m: &AllocationManifest) -> MacRecordSeen;

    /// Removes the temporary file at `path` (relative to the root) if it still is one and
    /// `old` still says so of its modification time: resolved again from the root, taken
    /// from its name and unlinked only if what was taken is still that old regular file.
    /// Returns whether it removed it; a path that is not a temporary file beneath the root,
    /// or one gone already, is not an error.
    fn remove_leftover(&self, path: &str, old: &dyn Fn(SystemTime) -> bool) -> Result<bool>;
}

/// A store kept in a database.
pub trait Database {
    /// Runs `work` in one read-only unit that sees one snapshot of the whole store: no
    /// answer inside it is an artefact of a command running beside it.
    fn snapshot(&self, work: &mut dyn FnMut() -> Result<()>) -> Result<()>;

    /// What only the database can say about what it holds (rows no command reads, columns
    /// that disagree with their manifest, counts and hints that disagree with the rows),
    /// in the current snapshot if any.
    fn inspect(&self) -> Result<Vec<Note>>;

    /// The objects stored under a namespace that is none, which no scope reaches: one note
    /// per namespace and kind, at the directory `export` would write them to.
    fn unreadable_namespaces(&self) -> Result<Vec<Note>>;
}
