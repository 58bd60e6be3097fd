//! Each owner's address hint under `.index/<allocations dir>/<pool>.owners/<key>`: the
//! address the owner's last look-up found. Advice, read best effort, written best effort,
//! never trusted without the allocation file it names.

use std::net::IpAddr;
use std::path::Path;

use crate::model::{Namespace, PoolName};
use crate::store::ObjectKind;
use crate::store::fs::beneath::{self, WriteMode};
use crate::store::fs::owner::skip::{Layer, skipped};
use crate::store::fs::{FsStore, HINTS_SUFFIX};

impl FsStore {
    /// The address `key`'s hint names in `pool`, if any.
    pub(in crate::store::fs) fn hint(
        &self,
        ns: Option<&Namespace>,
        pool: &PoolName,
        key: u64,
    ) -> Option<IpAddr> {
        if skipped(Layer::Hint) {
            return None;
        }
        let index_dir = self.index_dir(ObjectKind::Allocation, ns, false).ok()?;
        let hints =
            beneath::open_dir(&index_dir, Path::new(&format!("{pool}{HINTS_SUFFIX}"))).ok()?;
        let file = beneath::read(&hints, format!("{key:016x}"), 64).ok()??;
        std::str::from_utf8(&file.bytes)
            .ok()?
            .strip_suffix('\n')?
            .parse()
            .ok()
    }

    /// Records `address` as `key`'s hint (best effort).
    pub(in crate::store::fs) fn write_hint(
        &self,
        ns: Option<&Namespace>,
        pool: &PoolName,
        key: u64,
        address: IpAddr,
    ) {
        failpoint!("index-before-hint");
        if skipped(Layer::Hint) {
            return;
        }
        let _ = self
            .index_dir(ObjectKind::Allocation, ns, true)
            .and_then(|index_dir| beneath::subdir(index_dir, &format!("{pool}{HINTS_SUFFIX}")))
            .and_then(|hints| {
                beneath::write(
                    hints,
                    &format!("{key:016x}"),
                    format!("{address}\n").as_bytes(),
                    WriteMode::Replace,
                    false,
                    &beneath::beside,
                )
            });
    }
}
