//! How a pool picks among its free candidates (`spec.pick`): the lowest (the default), or
//! the first at or above a position derived from the owner's identity, wrapping around
//! (`hashed`), so that two branches claiming for different owners rarely take one address.
//!
//! The position is a pure function of the pool and the owner's kind and name, the same on
//! every machine, store, front end and version: [`key`] is SHA-256 of a documented byte
//! string, and [`crate::model::candidates::Candidates::hashed_start`] turns it into a
//! candidate. The walk from there is [`crate::model::candidates::Candidates::wrapped_at`].

use std::fmt;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::model::names::{Namespace, PoolName};
use crate::model::owner::Owner;

/// `spec.pick` of a pool of addresses.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Pick {
    /// The lowest free candidate (the default; omitted from the manifest).
    #[default]
    Lowest,
    /// The first free candidate at or above a position derived from the owner's kind and
    /// name and the pool, wrapping around to the lowest: two branches claiming for
    /// different owners rarely take the same address.
    Hashed,
}

impl Pick {
    /// Is this the default, which a manifest leaves out?
    pub fn is_lowest(&self) -> bool {
        *self == Pick::Lowest
    }
}

impl fmt::Display for Pick {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Pick::Lowest => "lowest",
            Pick::Hashed => "hashed",
        })
    }
}

/// The hashed pick's key of `owner` in pool (`ns`, `pool`): the first 16 bytes of the
/// SHA-256 of `ipamctl-pick-v1\n<namespace>\n<pool>\n<Kind>/<name>` (UTF-8, the namespace
/// empty for a cluster-scoped pool, no newline at the end), read as a big-endian number.
///
/// The uid is left out: an owner asking without its uid (a NIC that forgot it, a pull
/// request written before the VM exists) starts where it would with it. No newline can
/// occur in a namespace, pool or owner name, so no two inputs share a byte string.
///
/// # Examples
///
/// ```
/// # use ipamctl::model::{Owner, PoolName, pick::key};
/// let owner = Owner::parse("FloatingIP/fip-a", None).unwrap();
/// let k = key(None, &PoolName::new("edge").unwrap(), &owner);
/// // The same whatever the uid: `printf 'ipamctl-pick-v1\n\nedge\nFloatingIP/fip-a' | sha256sum`.
/// let uid = ipamctl::model::Uid::parse_uuid("0b6f0000-0000-4000-8000-00000000000a").unwrap();
/// let with_uid = Owner::parse("FloatingIP/fip-a", Some(uid)).unwrap();
/// assert_eq!(k, key(None, &PoolName::new("edge").unwrap(), &with_uid));
/// ```
pub fn key(ns: Option<&Namespace>, pool: &PoolName, owner: &Owner) -> u128 {
    let text = format!(
        "ipamctl-pick-v1\n{}\n{pool}\n{}/{}",
        ns.map(Namespace::as_str).unwrap_or_default(),
        owner.kind().as_str(),
        owner.name()
    );
    let digest = Sha256::digest(text.as_bytes());
    let mut first = [0u8; 16];
    first.copy_from_slice(&digest[..16]);
    u128::from_be_bytes(first)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn owner(s: &str) -> Owner {
        Owner::parse(s, None).unwrap()
    }

    #[test]
    fn the_key_is_pinned_across_versions_and_machines() {
        // `printf 'ipamctl-pick-v1\n\nedge\nFloatingIP/fip-a' | sha256sum`, first 32 digits.
        // A change here moves every hashed pool's next claims: it must be a new version of
        // the byte string, never an edit of this one.
        let k = key(
            None,
            &PoolName::new("edge").unwrap(),
            &owner("FloatingIP/fip-a"),
        );
        assert_eq!(format!("{k:032x}"), PINNED_EDGE_FIP_A);
        let ns = Namespace::new("acme/prod").unwrap();
        let k = key(
            Some(&ns),
            &PoolName::new("vpc-main").unwrap(),
            &owner("VirtualMachine/web-01/0"),
        );
        assert_eq!(format!("{k:032x}"), PINNED_ACME_WEB01);
    }

    const PINNED_EDGE_FIP_A: &str = "11fc9cba8493d42e45b6246f0934248c";
    const PINNED_ACME_WEB01: &str = "80ff2b329494bb2af8215666aea75a02";

    #[test]
    fn every_part_of_the_identity_moves_the_key_but_the_uid() {
        let pool = PoolName::new("edge").unwrap();
        let base = key(None, &pool, &owner("FloatingIP/fip-a"));
        let ns = Namespace::new("edge").unwrap();
        for other in [
            key(None, &pool, &owner("FloatingIP/fip-b")),
            key(
                None,
                &PoolName::new("edge2").unwrap(),
                &owner("FloatingIP/fip-a"),
            ),
            key(Some(&ns), &pool, &owner("FloatingIP/fip-a")),
            key(None, &pool, &owner("Node/fip-a")),
        ] {
            assert_ne!(other, base);
        }
        let uid = crate::model::Uid::parse_uuid("0b6f0000-0000-4000-8000-00000000000a").unwrap();
        let with_uid = Owner::parse("FloatingIP/fip-a", Some(uid)).unwrap();
        assert_eq!(key(None, &pool, &with_uid), base);
    }

    #[test]
    fn pick_reads_and_writes_lowercase() {
        assert_eq!(serde_json::to_string(&Pick::Hashed).unwrap(), "\"hashed\"");
        let p: Pick = serde_json::from_str("\"lowest\"").unwrap();
        assert!(p.is_lowest());
        assert!(serde_json::from_str::<Pick>("\"random\"").is_err());
    }
}
