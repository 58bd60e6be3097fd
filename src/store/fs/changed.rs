//! When a state directory last changed: the newest modification time of the directories and
//! files of the scopes asked about, for `dns export`'s serials ([`crate::store::Changed`]).
//!
//! A directory's modification time moves whenever a name in it is made, replaced (every
//! write renames a new file into place) or removed, so a release, a deleted pool or a whole
//! namespace gone is seen in its parent. Names that begin with `.` (locks, indexes,
//! temporary files) are local to one checkout and skipped; the directories that hold them
//! still count, so their coming and going can only make the time newer. A fresh checkout
//! dates every file at the checkout: newer than anything an earlier checkout saw.

use std::os::fd::AsFd;
use std::path::Path;
use std::time::SystemTime;

use rustix::fs::{FileType, Stat};

use crate::error::Result;
use crate::model::Namespace;
use crate::model::layout::{self, CLUSTER, NAMESPACES};
use crate::store::Changed;
use crate::store::fs::FsStore;
use crate::store::fs::beneath::{self, Confined, refused};

/// See [`crate::store::Audit::changed`].
pub(super) fn changed(store: &FsStore, scopes: Option<&[Option<Namespace>]>) -> Result<Changed> {
    let mut newest: Option<i64> = None;
    // (a directory relative to the root, whether to walk what it holds)
    let mut dirs: Vec<(String, bool)> = Vec::new();
    match scopes {
        None => {
            // Not the root's own time: other files live beside the layout there (zones
            // rendered into the checkout, a README), and its two directories are never
            // removed by ipamctl.
            dirs.push((CLUSTER.to_owned(), true));
            dirs.push((NAMESPACES.to_owned(), true));
        }
        Some(scopes) => {
            for ns in scopes {
                let path = layout::scope_path(ns.as_ref());
                // Each directory on the way: a scope removed whole shows in its parent.
                let mut at = String::new();
                for part in path.split('/') {
                    if !at.is_empty() {
                        dirs.push((at.clone(), false));
                        at.push('/');
                    }
                    at.push_str(part);
                }
                dirs.push((path, true));
            }
        }
    }
    for (rel, deep) in dirs {
        let dir = match beneath::open_dir(&store.fd, Path::new(&rel)) {
            Ok(dir) => dir,
            Err(e) if e.is_not_found() => continue,
            Err(e) => return Err(refused(store.root.join(&rel), e)),
        };
        walk(&dir, deep, &mut newest).map_err(|e| refused(store.root.join(&rel), e))?;
    }
    let now = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX));
    Ok(Changed { newest, now })
}

fn note(stat: &Stat, newest: &mut Option<i64>) {
    let t = stat.st_mtime;
    *newest = Some(newest.map_or(t, |n| n.max(t)));
}

/// Notes `dir`'s own time and, with `deep`, every name below it that is not local.
fn walk(dir: &impl AsFd, deep: bool, newest: &mut Option<i64>) -> Confined<()> {
    note(&rustix::fs::fstat(dir)?, newest);
    if !deep {
        return Ok(());
    }
    for (name, kind) in beneath::names(dir)? {
        if name.starts_with(b".") {
            continue;
        }
        let name = beneath::os(&name);
        if kind == FileType::Directory {
            match beneath::open_dir(dir, Path::new(name)) {
                Ok(sub) => walk(&sub, true, newest)?,
                Err(e) if e.is_not_found() => {}
                Err(e) => return Err(e),
            }
        } else if let Some(stat) = beneath::stat(dir, name)? {
            if FileType::from_raw_mode(stat.st_mode) == FileType::Directory {
                // A file system that gives no type in its entries.
                if let Ok(sub) = beneath::open_dir(dir, Path::new(name)) {
                    walk(&sub, true, newest)?;
                }
            } else {
                note(&stat, newest);
            }
        }
    }
    Ok(())
}
