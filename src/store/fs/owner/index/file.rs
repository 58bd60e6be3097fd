//! The owner index's files under `.index/`: each pool's owner index (its format is
//! [`super`]; one for a pool's allocations, one for a supernet's prefix claims), read best
//! effort and written best effort: an index is advice, never trusted without the file's
//! present status.

use std::collections::HashMap;
use std::os::fd::OwnedFd;
use std::path::Path;

use crate::model::{Namespace, PoolName};
use crate::store::ObjectKind;
use crate::store::fs::beneath::{self, Refused, WriteMode};
use crate::store::fs::owner::index::{Change, Index, Key};
use crate::store::fs::owner::skip::{Layer, skipped};
use crate::store::fs::{FsStore, INDEX_DIR, INDEX_SUFFIX};

impl FsStore {
    /// The index of `pool` in the `kind` directory `dir`: empty if it is missing or
    /// unreadable (an index is only ever a cost saved).
    pub(in crate::store::fs) fn load_index<K: Key>(
        &self,
        kind: ObjectKind,
        dir: &OwnedFd,
        ns: Option<&Namespace>,
        pool: &str,
    ) -> Index<K> {
        let dev = rustix::fs::fstat(dir).map_or(0, |s| s.st_dev);
        if skipped(Layer::Index) {
            return Index::empty(dev);
        }
        self.index_dir(kind, ns, false)
            .ok()
            .and_then(|index_dir| {
                beneath::read(
                    &index_dir,
                    format!("{pool}{INDEX_SUFFIX}"),
                    beneath::MAX_READ,
                )
                .ok()
                .flatten()
            })
            .map_or_else(|| Index::empty(dev), |file| Index::parse(file.bytes, dev))
    }

    /// The allocation indexes of `pool`, or of every pool of `ns` that has one, by pool name.
    pub(in crate::store::fs) fn load_indexes(
        &self,
        dir: &OwnedFd,
        ns: Option<&Namespace>,
        pool: Option<&PoolName>,
    ) -> HashMap<String, Index> {
        let mut pools = Vec::new();
        match pool {
            Some(pool) => pools.push(pool.as_str().to_owned()),
            None => {
                if let Ok(index_dir) = self.index_dir(ObjectKind::Allocation, ns, false) {
                    let _ = beneath::each_name(&index_dir, |name, _| {
                        if let Some(pool) =
                            beneath::utf8(name).and_then(|n| n.strip_suffix(INDEX_SUFFIX))
                        {
                            pools.push(pool.to_owned());
                        }
                    });
                }
            }
        }
        pools
            .into_iter()
            .map(|pool| {
                let index = self.load_index(ObjectKind::Allocation, dir, ns, &pool);
                (pool, index)
            })
            .collect()
    }

    /// Appends `changes` to the pool's index of `kind` objects, or rewrites it whole when
    /// it is missing or mostly history.
    pub(in crate::store::fs) fn save_index<K: Key>(
        &self,
        kind: ObjectKind,
        ns: Option<&Namespace>,
        pool: &str,
        index: &Index<K>,
        changes: &[Change<K>],
    ) -> std::result::Result<(), Refused> {
        failpoint!("index-before-write");
        if skipped(Layer::Index) {
            return Ok(());
        }
        let index_dir = self.index_dir(kind, ns, true)?;
        let file = format!("{pool}{INDEX_SUFFIX}");
        if index.lines > 0
            && !index.wants_rewrite(changes.len())
            && beneath::append(&index_dir, &file, Index::render_changes(changes).as_bytes())?
        {
            return Ok(());
        }
        let content = |w: &mut dyn std::io::Write| {
            index.render_to(changes, &mut |piece| w.write_all(piece.as_bytes()))
        };
        beneath::write_streamed(
            &index_dir,
            &file,
            &content,
            WriteMode::Replace,
            false,
            &beneath::beside,
        )?;
        Ok(())
    }

    /// The index directory of the `kind` objects of `ns`: `.index/<objects dir>` (created
    /// with `create`).
    pub(in crate::store::fs) fn index_dir(
        &self,
        kind: ObjectKind,
        ns: Option<&Namespace>,
        create: bool,
    ) -> std::result::Result<OwnedFd, Refused> {
        let rel = Path::new(INDEX_DIR).join(FsStore::relative_dir(kind, ns));
        if create {
            beneath::open_or_create_dir(&self.fd, &rel)
        } else {
            beneath::open_dir(&self.fd, &rel)
        }
    }
}
