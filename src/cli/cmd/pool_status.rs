//! What `pool list` and `pool show` add to a pool's manifest, for address and supernet
//! pools alike: `status` after `spec`, the excludes as a table cell, and the VPC that owns
//! it (`pool show`'s `VPC:` line and its map's title).

use serde::Serialize;

use crate::cli::output::Named;
use crate::model::PoolManifest;

/// `spec.exclude` as a table cell.
pub fn excludes(spec: &crate::model::PoolSpec) -> String {
    if spec.exclude.is_empty() {
        return "-".into();
    }
    let all: Vec<String> = spec.exclude.iter().map(|e| e.to_string()).collect();
    all.join(", ")
}

impl<S> Named for WithStatus<'_, S> {
    fn resource(&self) -> String {
        self.manifest.resource()
    }
}

/// A pool manifest with `status` added after `spec`; the manifest keeps its file key order.
#[derive(Serialize)]
pub struct WithStatus<'a, S> {
    #[serde(flatten)]
    manifest: &'a PoolManifest,
    status: S,
}

/// The manifest with `status` added.
pub fn with_status<S: Serialize>(manifest: &PoolManifest, status: S) -> WithStatus<'_, S> {
    WithStatus { manifest, status }
}

/// The VPC that owns `pool` by its `ownerRefs`, as `NAMESPACE/NAME`; `None` for a pool no
/// VPC owns.
pub(crate) fn vpc_of(pool: &crate::model::PoolRef, manifest: &PoolManifest) -> Option<String> {
    let name = crate::model::vpc::owning_vpc(&pool.name, manifest)?;
    Some(match &pool.namespace {
        Some(ns) => format!("{ns}/{name}"),
        None => name.to_owned(),
    })
}
