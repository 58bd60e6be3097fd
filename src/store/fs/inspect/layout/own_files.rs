//! ipamctl's own files inside the layout, as the walk meets them: the derived owner index
//! (`ipallocations/.index/`), scratch and temporary files, leftovers of an interrupted
//! delete, and the names of lock files, current and from ipamctl 0.1.

use std::os::fd::OwnedFd;

use super::super::modified;
use super::{Item, Kind, Walker};
use crate::model::PoolName;
use crate::store::fs::beneath;
use crate::store::fs::{HINTS_SUFFIX, INDEX_SUFFIX, TMP_PREFIX};
use crate::store::inspect::Leftover;

impl Walker {
    /// `ipallocations/.index/`: the derived owner index and hints. Its contents are
    /// a cache (git-ignored, rebuilt on demand), so only their names are checked.
    pub(super) fn index(&mut self, parent: &OwnedFd, dir: &Item) {
        let Some(fd) = self.open(parent, dir) else {
            return;
        };
        for item in self.entries(&fd, &dir.rel) {
            let name = item.name.as_str();
            if item.kind == Kind::File && name.starts_with(TMP_PREFIX) {
                self.leftover(&fd, &item);
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

    /// `<root>/.index/`: its `.tmp-*` files are leftovers; the rest is a cache nobody reviews.
    pub(super) fn scratch(&mut self, parent: &OwnedFd, dir: &Item) {
        let Some(fd) = self.open(parent, dir) else {
            return;
        };
        for item in self.entries(&fd, &dir.rel) {
            if item.kind == Kind::File && item.name.starts_with(TMP_PREFIX) {
                self.leftover(&fd, &item);
            }
        }
    }

    /// A temporary file `item` of `dir`, dated by an `fstatat` that does not follow: how
    /// old is old enough to be garbage is the caller's to judge.
    pub(super) fn leftover(&mut self, dir: &OwnedFd, item: &Item) {
        let Ok(Some(stat)) = beneath::stat(dir, &item.raw) else {
            return; // gone since the listing: the write it belonged to finished
        };
        self.out.leftovers.push(Leftover {
            path: item.rel.clone(),
            modified: modified(&stat),
        });
    }
}

/// `.lock` (the scope lock) or `.<pool>.lock` (a pool lock).
pub(super) fn is_pool_lock(name: &str) -> bool {
    name == ".lock"
        || name
            .strip_prefix('.')
            .and_then(|n| n.strip_suffix(".lock"))
            .is_some_and(|pool| PoolName::new(pool).is_ok())
}

/// What ipamctl 0.1 kept in `.index/` (a journal and owner lock stripes `<pool>.lock-NN`):
/// unused now, and harmless.
pub(super) fn is_old_index_file(name: &str) -> bool {
    name == "journal"
        || name.rsplit_once(".lock-").is_some_and(|(pool, stripe)| {
            PoolName::new(pool).is_ok()
                && stripe.len() == 2
                && stripe.bytes().all(|b| b.is_ascii_digit())
        })
}

/// The pool name of `<pool><suffix>`, if valid.
pub(super) fn pool_of<'a>(name: &'a str, suffix: &str) -> Option<&'a str> {
    name.strip_suffix(suffix)
        .filter(|pool| PoolName::new(pool).is_ok())
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
