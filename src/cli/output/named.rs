//! `-o name`: what each object is called on an `ipallocation/<name>` or `ipampool/<name>`
//! line ([`Named`]), and the wrappers that carry a name for mixed lists.

use serde::Serialize;

use crate::model::{AllocationManifest, PoolManifest};

/// An object with a kubectl resource name: `ipampool/<name>`, `ipallocation/<name>`.
pub trait Named {
    /// `kind/name`, the kind in lower case, as `-o name` and the change lines print it.
    fn resource(&self) -> String;
}

impl Named for PoolManifest {
    fn resource(&self) -> String {
        format!("ipampool/{}", self.metadata.name)
    }
}

impl Named for AllocationManifest {
    fn resource(&self) -> String {
        format!("ipallocation/{}", self.metadata.name)
    }
}

/// An address allocation or a prefix claim, for the views that show both (`list`,
/// `release` by selectors): serialized as the manifest itself.
#[derive(Clone, Copy, Debug, Serialize)]
#[serde(untagged)]
pub enum Held<'a> {
    /// An `IPAllocation`.
    Address(&'a AllocationManifest),
    /// An `IPPrefixClaim`.
    Prefix(&'a crate::model::prefix_claim::PrefixClaimManifest),
}

impl Named for Held<'_> {
    fn resource(&self) -> String {
        match self {
            Held::Address(m) => m.resource(),
            Held::Prefix(m) => m.resource(),
        }
    }
}

impl Named for crate::model::prefix_claim::PrefixClaimManifest {
    fn resource(&self) -> String {
        format!("ipprefixclaim/{}", self.metadata.name)
    }
}

impl Named for crate::model::subnet::SubnetManifest {
    fn resource(&self) -> String {
        format!("subnet/{}", self.metadata.name)
    }
}

impl<T: Named + ?Sized> Named for &T {
    fn resource(&self) -> String {
        (**self).resource()
    }
}

/// A store a command wrote as a whole (`init`, `export`, `import`): a state directory named
/// by its path, or a database's schema; with the counts of what was copied, if any.
#[derive(Clone, Debug, Serialize)]
pub struct Whole {
    /// `StateDirectory` or `Schema`.
    pub kind: &'static str,
    /// The directory's path, or the schema's name.
    pub name: String,
    /// The schema's version (a database only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<i32>,
    /// What an export or import copied.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub copied: Option<crate::engine::transfer::Copied>,
}

impl Named for Whole {
    fn resource(&self) -> String {
        format!("{}/{}", self.kind.to_lowercase(), self.name)
    }
}
