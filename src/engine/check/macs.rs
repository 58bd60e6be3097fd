//! The rules of `ipamctl check` about NICs' MACs (`spec.mac`), on both stores: a MAC held by
//! two allocations of one pool (a hand edit, a merge of two clones, or on PostgreSQL a row
//! written past the unique index: another spelling, or the index dropped), a MAC that does
//! not parse, and a MAC that `--mac auto` made and that no longer fits its address.
//!
//! How an `auto` MAC is known: it carries its pool's `spec.macPrefix` (a hand-picked MAC
//! rarely does: the prefix is locally administered and the pool's own), so it must be the
//! one [`Mac::derive`] gives an address its owner holds in the scope (its own, or on a
//! dual-stack NIC the first pool's). One that is not was edited, or its allocation moved.

use std::collections::HashMap;
use std::net::IpAddr;

use super::rules::{KnownPool, PoolKey};
use super::{Decoded, Finding, Severity, error};
use crate::engine::hint;
use crate::model::mac::Mac;
use crate::model::{AllocationManifest, Namespace, Owner, PoolName};
use crate::store::StateDir;
use crate::store::inspect::RecordSays;

/// The hint appended to a finding of an allocation whose `spec.mac` does not parse.
pub(super) const MALFORMED_FIX: &str = "fix spec.mac to six hex octets of a unicast MAC (e.g. '52:54:00:12:34:56', quoted) or remove the line, then set it with `ipamctl mac set POOL ADDRESS --owner KIND/NAME --mac MAC`";

/// Adds the fix to each finding that says an allocation's MAC is malformed (the decoder's
/// message names the value).
pub(super) fn explain_malformed(findings: &mut [Finding]) {
    for f in findings {
        if f.message.contains("invalid MAC") && !f.message.contains(MALFORMED_FIX) {
            f.message = format!("{}; {MALFORMED_FIX}", f.message);
        }
    }
}

/// A MAC in one pool of one scope.
type MacKey<'a> = (&'a Option<Namespace>, &'a PoolName, Mac);

/// The allocations that hold each MAC of each pool, by file (path, manifest): what
/// [`check_macs`] reports and [`held_twice`] settles.
fn by_mac(
    allocations: &[Decoded<AllocationManifest>],
) -> HashMap<MacKey<'_>, Vec<(&str, &AllocationManifest)>> {
    let mut holders: HashMap<MacKey<'_>, Vec<(&str, &AllocationManifest)>> = HashMap::new();
    for Decoded { file, manifest } in allocations {
        if let Some(m) = manifest
            && let Some(mac) = m.spec.mac
        {
            holders
                .entry((&file.scope, &m.spec.pool, mac))
                .or_default()
                .push((&file.rel, m));
        }
    }
    holders
}

/// The MAC findings that relate allocations to each other and to their pool (returned, for
/// the caller to confirm with fresh reads, as [`super::rules::check_allocations`]'s).
pub(super) fn check_macs(
    allocations: &[Decoded<AllocationManifest>],
    pools: &HashMap<PoolKey<'_>, KnownPool<'_>>,
) -> Vec<Finding> {
    let mut related = Vec::new();
    let mut owned: HashMap<(&Option<Namespace>, &Owner), Vec<IpAddr>> = HashMap::new();
    for Decoded { file, manifest } in allocations {
        if let Some(m) = manifest {
            owned
                .entry((&file.scope, &m.spec.owner))
                .or_default()
                .push(m.spec.address);
        }
    }
    let holders = by_mac(allocations).into_iter().map(|(key, held)| {
        let held: Vec<(IpAddr, &Owner, &str)> = held
            .into_iter()
            .map(|(rel, m)| (m.spec.address, &m.spec.owner, rel))
            .collect();
        (key, held)
    });
    for ((scope, pool, mac), mut held) in holders {
        if held.len() > 1 {
            held.sort();
            let names: Vec<String> = held
                .iter()
                .map(|(a, owner, _)| format!("{a} (`{owner}`)"))
                .collect();
            let ns = hint::namespace_flag(scope.as_ref());
            let message = format!(
                "MAC {mac} is held by {} allocations of pool `{pool}`: {}; a MAC names one NIC per pool: give each other NIC its own with `ipamctl mac set {pool} ADDRESS --owner KIND/NAME --mac NEW{ns}` (or `--mac auto`), or release it",
                held.len(),
                names.join(", ")
            );
            for (_, _, rel) in &held {
                related.push(error(rel, message.clone()));
            }
        }
        let Some(prefix) = pools
            .get(&(scope, pool.as_str()))
            .and_then(KnownPool::manifest)
            .and_then(|p| p.spec.mac_prefix)
        else {
            continue;
        };
        if !mac.has_prefix(prefix) {
            continue;
        }
        for (address, owner, rel) in held {
            let fits = owned
                .get(&(scope, owner))
                .is_some_and(|all| all.iter().any(|&a| Mac::derive(prefix, a) == mac));
            if fits {
                continue;
            }
            let fix = hint::mac_set(
                &crate::model::PoolRef {
                    namespace: scope.clone(),
                    name: pool.clone(),
                },
                address,
                owner,
                "auto",
            );
            related.push(error(
                rel,
                format!(
                    "MAC {mac} has pool `{pool}`'s macPrefix {prefix} but is not the one `--mac auto` derives for {address} ({}) nor for another address of `{owner}`: an edited auto MAC; fix it with `{fix}`",
                    Mac::derive(prefix, address),
                ),
            ));
        }
    }
    related
}

/// An allocation whose MAC has no record (file store).
#[derive(Clone, Debug)]
pub struct Unrecorded {
    /// Its file, relative to the root.
    pub path: String,
    /// Its scope, as its path says.
    pub namespace: Option<Namespace>,
    /// As read.
    pub allocation: AllocationManifest,
}

/// A MAC held by two or more allocations of one pool (file store), with the allocation
/// `check --fix` keeps it on ([`crate::engine::mac::settle`]): the one the MAC's record
/// names, else the one created first (then the lowest address).
#[derive(Clone, Debug)]
pub struct HeldTwice {
    /// The allocation that keeps the MAC.
    pub keeper: Unrecorded,
    /// The others, each to lose it.
    pub others: Vec<Unrecorded>,
    /// Why the keeper: `its record names it` or `it was created first`.
    pub why: &'static str,
}

/// The MACs held twice among `allocations`, each with the allocation its record (asked of
/// `dir`) names, for `check --fix` to settle. `check_macs` reports them.
pub(super) fn held_twice(
    dir: &dyn StateDir,
    allocations: &[Decoded<AllocationManifest>],
) -> Vec<HeldTwice> {
    let mut twice = Vec::new();
    for ((scope, _, _), held) in by_mac(allocations) {
        if held.len() < 2 {
            continue;
        }
        let mut held: Vec<Unrecorded> = held
            .into_iter()
            .map(|(rel, m)| Unrecorded {
                path: rel.to_owned(),
                namespace: scope.clone(),
                allocation: m.clone(),
            })
            .collect();
        let named = held.iter().position(|h| {
            dir.mac_record(scope.as_ref(), &h.allocation).says == RecordSays::This { exactly: true }
        });
        let (at, why) = match named {
            Some(at) => (at, "its record names it"),
            None => {
                held.sort_by_key(|h| {
                    (
                        h.allocation.metadata.creation_timestamp.is_none(),
                        h.allocation.metadata.creation_timestamp,
                        h.allocation.spec.address,
                    )
                });
                (0, "it was created first")
            }
        };
        let keeper = held.remove(at);
        twice.push(HeldTwice {
            keeper,
            others: held,
            why,
        });
    }
    twice.sort_by(|a, b| a.keeper.path.cmp(&b.keeper.path));
    twice
}

/// The file store's MAC records (`store::fs::macs`), as warnings: an allocation whose MAC has
/// no record (a MAC written by hand, or by an older version whose claim was killed before
/// its record; a record deleted from outside: each claim of the MAC by another owner makes the
/// record and then reads the pool, and finds it), or whose
/// record names another claim (the MAC is held twice, or the record is stale and the next
/// claim of the MAC takes it over). The store reads the record ([`StateDir::mac_record`]).
///
/// Also returns the allocations whose MAC has no record, by path, for `check --fix` to make
/// their records ([`crate::engine::mac::restore_record`]).
pub(super) fn check_records(
    dir: &dyn StateDir,
    allocations: &[Decoded<AllocationManifest>],
) -> (Vec<Finding>, Vec<Unrecorded>) {
    let mut findings = Vec::new();
    let mut unrecorded = Vec::new();
    for Decoded { file, manifest } in allocations {
        let Some(m) = manifest else { continue };
        let Some(mac) = m.spec.mac else { continue };
        let seen = dir.mac_record(file.scope.as_ref(), m);
        let rel = &seen.path;
        let owner = &m.spec.owner;
        let message = match seen.says {
            RecordSays::This { .. } => continue,
            RecordSays::Another(held) => format!(
                "MAC {mac}'s record `{rel}` names {held}, not this allocation ({} of `{owner}`); if the MAC is not held twice (an error of its own), the record is stale and the next claim of the MAC takes it over",
                m.spec.address
            ),
            RecordSays::Missing => {
                unrecorded.push(Unrecorded {
                    path: file.rel.clone(),
                    namespace: file.scope.clone(),
                    allocation: m.clone(),
                });
                format!(
                    "MAC {mac} has no record `{rel}` (deleted, or a MAC written by hand): each claim of the MAC by another owner reads the whole pool to find its holder; `ipamctl check --fix` makes the record"
                )
            }
        };
        findings.push(Finding {
            severity: Severity::Warning,
            path: file.rel.clone(),
            message,
        });
    }
    (findings, unrecorded)
}
