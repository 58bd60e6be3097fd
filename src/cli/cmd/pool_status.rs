//! What `pool list` and `pool show` add to a pool's manifest, for address and supernet
//! pools alike: `status` after `spec`, and the excludes as a table cell.

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
