//! The rules of `ipamctl check` about who an owner is, on both stores, for what a hand edit
//! or a merge of two branches can still make (every claim refuses both:
//! [`crate::engine::identity`], [`crate::engine::mac`]):
//!
//! - an owner's name held under two identities in one pool (two uids, or a uid and none),
//!   for every kind but `VPC`: one error on each file, naming them all;
//! - a NIC (one owner identity in one scope) whose allocations carry different MACs (a
//!   `mac set` killed between its pools on the file store leaves this): one error on each
//!   file with a MAC, naming them and the `mac set` that gives the NIC one MAC.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

use super::{Decoded, Finding, error};
use crate::engine::hint;
use crate::model::mac::Mac;
use crate::model::{AllocationManifest, Namespace, Owner, OwnerKind, PoolName, PoolRef};

/// Both rules over `allocations` (returned, for the caller to confirm with fresh reads, as
/// [`super::rules::check_allocations`]'s).
pub(super) fn check_identities(allocations: &[Decoded<AllocationManifest>]) -> Vec<Finding> {
    let mut related = names_held_twice(allocations);
    related.extend(nics_with_two_macs(allocations));
    related
}

/// `uid U`, or `no uid`.
fn uid_text(owner: &Owner) -> String {
    owner
        .uid()
        .map_or_else(|| "no uid".to_owned(), |u| format!("uid {u}"))
}

/// An owner's name in one pool of one scope.
type NameKey<'a> = (&'a Option<Namespace>, &'a PoolName, OwnerKind, &'a str);

/// One error on each file of an owner's name held under two identities or more in a pool.
fn names_held_twice(allocations: &[Decoded<AllocationManifest>]) -> Vec<Finding> {
    let mut by_name: BTreeMap<NameKey<'_>, Vec<(IpAddr, &Owner, &str)>> = BTreeMap::new();
    for Decoded { file, manifest } in allocations {
        let Some(m) = manifest else { continue };
        let owner = &m.spec.owner;
        if !owner.kind().one_per_name() {
            continue;
        }
        by_name
            .entry((&file.scope, &m.spec.pool, owner.kind(), owner.name()))
            .or_default()
            .push((m.spec.address, owner, &file.rel));
    }
    let mut related = Vec::new();
    for ((scope, pool, kind, name), mut held) in by_name {
        let identities: BTreeSet<&Owner> = held.iter().map(|(_, o, _)| *o).collect();
        if identities.len() < 2 {
            continue;
        }
        held.sort();
        let each: Vec<String> = held
            .iter()
            .map(|(a, o, rel)| format!("{a} ({}) in {rel}", uid_text(o)))
            .collect();
        let message = format!(
            "owner `{kind}/{name}` is held under {} identities in pool `{pool}`: {}; an owner's name is one identity per pool: release the one whose NIC is gone (`ipamctl release {pool} ADDRESS{} --owner {kind}/{name} --uid UID`, without `--uid` for the one that has none)",
            identities.len(),
            each.join(", "),
            hint::namespace_flag(scope.as_ref()),
        );
        for (_, _, rel) in held {
            related.push(error(rel, message.clone()));
        }
    }
    related
}

/// One error on each file with a MAC of a NIC whose allocations carry two MACs or more.
fn nics_with_two_macs(allocations: &[Decoded<AllocationManifest>]) -> Vec<Finding> {
    type Held<'a> = Vec<(&'a PoolName, IpAddr, Mac, &'a str)>;
    let mut by_nic: BTreeMap<(&Option<Namespace>, &Owner), Held<'_>> = BTreeMap::new();
    for Decoded { file, manifest } in allocations {
        let Some(m) = manifest else { continue };
        let Some(mac) = m.spec.mac else { continue };
        by_nic
            .entry((&file.scope, &m.spec.owner))
            .or_default()
            .push((&m.spec.pool, m.spec.address, mac, &file.rel));
    }
    let mut related = Vec::new();
    for ((scope, owner), mut held) in by_nic {
        let macs: BTreeSet<Mac> = held.iter().map(|h| h.2).collect();
        if macs.len() < 2 {
            continue;
        }
        held.sort_by(|a, b| (a.0, a.1).cmp(&(b.0, b.1)));
        let each: Vec<String> = held
            .iter()
            .map(|(pool, address, mac, rel)| format!("{mac} on {address} (pool `{pool}`, {rel})"))
            .collect();
        let (pool, address, mac, _) = held[0];
        let fix = hint::mac_set(
            &PoolRef {
                namespace: scope.clone(),
                name: pool.clone(),
            },
            address,
            owner,
            &mac.to_string(),
        );
        let message = format!(
            "NIC `{owner}` ({}) carries {} MACs in its scope: {}; a NIC has one MAC (a `mac set` interrupted between pools leaves this): give it one with `{fix}`",
            uid_text(owner),
            macs.len(),
            each.join(", "),
        );
        for (_, _, _, rel) in held {
            related.push(error(rel, message.clone()));
        }
    }
    related
}
