//! Where the owner whose side of a merge conflict is dropped can claim again. Both branches
//! usually took the pool's last free address, so "allocate in the same pool" is then exit 5:
//! the advice names the pool's zone, or another pool of the same scope and family with a
//! free address, or says that there is none ([`Elsewhere`]).

use std::collections::HashMap;
use std::net::IpAddr;

use crate::model::subnet::{SubnetManifest, pool_candidates};
use crate::model::{AllocationManifest, Namespace, PoolKind, PoolManifest, parse_allocation_name};
use crate::yaml::conflict::Elsewhere;

use super::Decoded;
use crate::store::inspect::ManifestFile;

/// One pool as the advice needs it.
struct Pool {
    scope: Option<Namespace>,
    name: String,
    kind: PoolKind,
    v4: bool,
    zone: Option<String>,
    /// Whether a candidate is left that no allocation file names.
    free: bool,
}

/// Every address pool of the state directory and whether it has a free address.
pub(super) struct Pools(Vec<Pool>);

impl Pools {
    /// The pools read, with their subnets; an address is taken when an allocation file is
    /// named after it (a conflicted or broken one too: its address stays taken).
    pub(super) fn new(
        pools: &[Decoded<PoolManifest>],
        subnets: &[Decoded<SubnetManifest>],
        allocations: &[ManifestFile],
    ) -> Pools {
        let mut taken: HashMap<(Option<&Namespace>, &str), Vec<IpAddr>> = HashMap::new();
        for f in allocations {
            if let Some((pool, addr)) = parse_allocation_name(&f.stem) {
                taken
                    .entry((f.scope.as_ref(), pool))
                    .or_default()
                    .push(addr);
            }
        }
        let mut found: Vec<Pool> = pools
            .iter()
            .filter_map(|d| Some((d.file.scope.as_ref(), d.manifest.as_ref()?)))
            .filter(|(_, m)| m.spec.kind != PoolKind::Supernet)
            .map(|(scope, m)| {
                let own: Vec<SubnetManifest> = subnets
                    .iter()
                    .filter_map(|s| {
                        s.manifest
                            .as_ref()
                            .filter(|_| s.file.scope.as_ref() == scope)
                    })
                    .filter(|s| s.spec.pool.as_str() == m.metadata.name)
                    .cloned()
                    .collect();
                let candidates = pool_candidates(m, &own);
                let held = taken
                    .get(&(scope, m.metadata.name.as_str()))
                    .map_or(0, |t| t.iter().filter(|a| candidates.contains(**a)).count());
                Pool {
                    scope: scope.cloned(),
                    name: m.metadata.name.clone(),
                    kind: m.spec.kind,
                    v4: m.spec.cidr.network().is_ipv4(),
                    zone: m.spec.zone.clone(),
                    free: m.metadata.deletion_timestamp.is_none()
                        && candidates.count() > held as u128,
                }
            })
            .collect();
        found.sort_by(|a, b| (&a.scope, &a.name).cmp(&(&b.scope, &b.name)));
        Pools(found)
    }

    /// Where the owner of `m` can claim again once the other side of the conflict is kept.
    pub(super) fn elsewhere(&self, m: &AllocationManifest) -> Elsewhere {
        let scope = m.metadata.namespace.as_ref();
        let Some(own) = self
            .0
            .iter()
            .find(|p| p.scope.as_ref() == scope && p.name == m.spec.pool.as_str())
        else {
            return Elsewhere::Same; // no such pool: `check` says so on its own
        };
        if own.free {
            return Elsewhere::Same;
        }
        // `allocate --zone` tries every public pool of the zone, skipping full ones.
        if let Some(zone) = own.zone.as_ref().filter(|_| own.kind == PoolKind::Public)
            && self
                .0
                .iter()
                .any(|p| p.free && p.kind == PoolKind::Public && p.zone.as_ref() == Some(zone))
        {
            return Elsewhere::Zone(zone.clone());
        }
        match self
            .0
            .iter()
            .find(|p| p.free && p.scope == own.scope && p.kind == own.kind && p.v4 == own.v4)
        {
            Some(other) => Elsewhere::Pool(other.name.clone()),
            None => Elsewhere::Nowhere,
        }
    }
}
