//! The rules of `ipamctl check` that look at decoded manifests: each against its path, each
//! allocation against its pool, and manifests against each other (owners, public pools).
//! Everything is keyed in hash maps, so the cost grows with the number of files, not its
//! square.

use std::collections::HashMap;
use std::net::IpAddr;

use super::{Decoded, Finding, Severity, error};
use crate::model::candidates::{Candidates, host_span, ordinal};
use crate::model::{AllocationManifest, Namespace, Owner, PoolKind, PoolManifest, PoolName};

/// A pool as `allocate` finds it: by its path. `decoded` is `None` when the file does not
/// decode (its own finding says why; its allocations are not checked against it).
pub(super) struct KnownPool<'a> {
    rel: &'a str,
    decoded: Option<(&'a PoolManifest, Candidates)>,
}

impl<'a> KnownPool<'a> {
    /// Where the pool's file is, relative to the root.
    pub(super) fn rel(&self) -> &'a str {
        self.rel
    }

    /// The pool's manifest, when its file decodes.
    pub(super) fn manifest(&self) -> Option<&'a PoolManifest> {
        self.decoded.as_ref().map(|(m, _)| *m)
    }
}

/// (scope, file name without `.yaml`).
pub(super) type PoolKey<'a> = (&'a Option<Namespace>, &'a str);

/// Checks each pool against its path, and public pools against each other. Returns the
/// pools by (scope, file name), which is how `allocate` finds them.
pub(super) fn check_pools<'a>(
    pools: &'a [Decoded<PoolManifest>],
    findings: &mut Vec<Finding>,
) -> HashMap<PoolKey<'a>, KnownPool<'a>> {
    let mut known = HashMap::with_capacity(pools.len());
    let mut public = Vec::new();
    for Decoded { file, manifest } in pools {
        if let Some(m) = manifest {
            if m.metadata.name != file.stem {
                findings.push(error(
                    &file.rel,
                    format!(
                        "metadata.name is `{}`, but the file is named `{}.yaml`",
                        m.metadata.name, file.stem
                    ),
                ));
            }
            match crate::model::vpc::name_problem(&file.stem, m) {
                Some((true, message)) => findings.push(error(&file.rel, message)),
                Some((false, message)) => findings.push(Finding {
                    severity: Severity::Warning,
                    path: file.rel.clone(),
                    message,
                }),
                None => {}
            }
            if let Some(at) = &m.metadata.deletion_timestamp {
                findings.push(Finding {
                    severity: Severity::Warning,
                    path: file.rel.clone(),
                    message: format!(
                        "pool `{}` is being deleted since {at} and takes no claim (an interrupted `vpc delete` or `pool delete`): run it again to finish",
                        m.metadata.name
                    ),
                });
            }
            // `decode_pool` made sure a public pool has no namespace and a private one has.
            match (m.spec.kind, &m.metadata.namespace, &file.scope) {
                (PoolKind::Public, _, Some(_)) => findings.push(error(
                    &file.rel,
                    "public pool in a namespace directory: public pools are cluster-scoped and belong in `cluster/ipampools/`",
                )),
                (PoolKind::Private, Some(ns), None) => findings.push(error(
                    &file.rel,
                    format!(
                        "private pool under `cluster/`: private pools belong in their namespace's directory, `namespaces/{ns}/ipampools/`"
                    ),
                )),
                (PoolKind::Private, meta, path) => {
                    if let Some(message) = scope_mismatch(meta.as_ref(), path.as_ref()) {
                        findings.push(error(&file.rel, message));
                    }
                }
                (PoolKind::Public, _, None) => public.push((file.rel.as_str(), m)),
                (PoolKind::Supernet, meta, path) => {
                    if let Some(message) = scope_mismatch(meta.as_ref(), path.as_ref()) {
                        findings.push(error(&file.rel, message));
                    }
                }
            }
        }
        known.insert(
            (&file.scope, file.stem.as_str()),
            KnownPool {
                rel: &file.rel,
                // Computed once per pool, whatever the number of its allocations.
                decoded: manifest.as_ref().map(|m| (m, Candidates::of_pool(&m.spec))),
            },
        );
    }
    check_overlaps(&mut public, findings);
    known
}

/// Public pools share one address space: no two may overlap. Prefixes either nest or are
/// disjoint, so after sorting by first address each pool need only be compared with the
/// ones that start inside it.
fn check_overlaps(public: &mut [(&str, &PoolManifest)], findings: &mut Vec<Finding>) {
    public.sort_by_key(|(_, m)| (m.spec.cidr.network(), m.spec.cidr.prefix_len()));
    for (i, (rel, pool)) in public.iter().enumerate() {
        let end = pool.spec.cidr.broadcast();
        for (other_rel, other) in public[i + 1..]
            .iter()
            .take_while(|(_, o)| o.spec.cidr.network() <= end)
        {
            let overlap = |p: &PoolManifest, q: &PoolManifest| {
                format!(
                    "public pool `{}` ({}) overlaps public pool `{}` ({})",
                    p.metadata.name, p.spec.cidr, q.metadata.name, q.spec.cidr
                )
            };
            findings.push(error(rel, overlap(pool, other)));
            findings.push(error(other_rel, overlap(other, pool)));
        }
    }
}

/// Checks each allocation against its path and pool, and owners across allocations.
///
/// A warning for a lease of `m` that lapsed longer than the default grace before `now` and is
/// still held (at `rel`).
fn lapsed_lease(
    rel: &str,
    m: &AllocationManifest,
    now: crate::model::Timestamp,
) -> Option<Finding> {
    let at = m.spec.expires_at?;
    m.spec
        .lapsed(now, crate::engine::lease::DEFAULT_GRACE)
        .then(|| Finding {
            severity: Severity::Warning,
            path: rel.to_owned(),
            message: format!(
                "the lease of `{}` lapsed at {at}, more than its grace (5m) ago, and is still held: `ipamctl reconcile --expired --apply` releases it, unless its owner renews it first",
                m.spec.owner
            ),
        })
}

/// Findings about one file go to `findings`. Those that relate two files (an allocation and
/// its pool, two allocations of one owner) are returned instead: files change while a check
/// runs beside other commands, so the caller confirms them with fresh reads.
pub(super) fn check_allocations(
    allocations: &[Decoded<AllocationManifest>],
    pools: &HashMap<PoolKey<'_>, KnownPool<'_>>,
    findings: &mut Vec<Finding>,
) -> Vec<Finding> {
    let mut related = Vec::new();
    // Leases are judged by this machine's clock, as the file store's reaper does.
    let now = crate::model::Timestamp::now();
    let mut holdings: HashMap<OwnerKey<'_>, Vec<(IpAddr, &str)>> =
        HashMap::with_capacity(allocations.len());
    for Decoded { file, manifest } in allocations {
        let Some(m) = manifest else { continue };
        let (pool, address) = (&m.spec.pool, m.spec.address);
        // `decode_allocation` made sure metadata.name is `<spec.pool>-<a-b-c-d>`; the file
        // name is what claims the address, so it must say the same.
        if m.metadata.name != file.stem {
            findings.push(error(
                &file.rel,
                format!(
                    "the file name does not match the allocation it holds (pool `{pool}`, address {address}); it should be `{}.yaml`",
                    m.metadata.name
                ),
            ));
            continue;
        }
        findings.extend(lapsed_lease(&file.rel, m, now));
        if let Some(uid) = m.spec.owner.uid()
            && !uid.is_uuid()
        {
            // Written by an older version, which took any string: still read and released,
            // but a uid that is no UUID (bash's `$UID` is the user id) may be shared by owners
            // that are not one, so `release --uid` would free them all.
            findings.push(Finding {
                severity: Severity::Warning,
                path: file.rel.clone(),
                message: format!(
                    "owner `{}` has uid `{uid}`, which is not a lowercase UUID; ipamctl now takes only UUIDs as uids: release it and allocate again with the owner's real uuid",
                    m.spec.owner
                ),
            });
        }
        if let Some(message) = scope_mismatch(m.metadata.namespace.as_ref(), file.scope.as_ref()) {
            findings.push(error(&file.rel, message));
        }
        if let Some(message) = m.tenant_problem() {
            findings.push(error(&file.rel, message));
        }
        match pools.get(&(&file.scope, pool.as_str())) {
            None => related.push(error(
                &file.rel,
                format!(
                    "pool `{pool}` does not exist: there is no `{}`",
                    pool_path(file.scope.as_ref(), pool)
                ),
            )),
            Some(known) => {
                if let Some((p, candidates)) = &known.decoded
                    && (p.spec.kind == PoolKind::Supernet || !candidates.contains(address))
                {
                    related.push(error(&file.rel, not_candidate(address, p, known.rel)));
                }
            }
        }
        holdings
            .entry((&file.scope, pool, &m.spec.owner))
            .or_default()
            .push((address, &file.rel));
    }
    related.extend(owners_holding_more(holdings));
    related
}

/// An owner identity in one pool of one scope.
type OwnerKey<'a> = (&'a Option<Namespace>, &'a PoolName, &'a Owner);

/// One error for each file of an owner that holds more than one address in a pool.
fn owners_holding_more(holdings: HashMap<OwnerKey<'_>, Vec<(IpAddr, &str)>>) -> Vec<Finding> {
    let mut related = Vec::new();
    for ((_, pool, owner), mut held) in holdings {
        if held.len() < 2 {
            continue;
        }
        held.sort();
        let addresses: Vec<String> = held.iter().map(|(a, _)| a.to_string()).collect();
        let uid = owner
            .uid()
            .map_or_else(|| "no uid".to_owned(), |u| format!("uid {u}"));
        let message = format!(
            "owner `{owner}` ({uid}) holds {} addresses in pool `{pool}`: {}; an owner holds at most one per pool",
            held.len(),
            addresses.join(", ")
        );
        for (_, rel) in held {
            related.push(error(rel, message.clone()));
        }
    }
    related
}

/// Why `address` is not a candidate of `pool`.
fn not_candidate(address: IpAddr, pool: &PoolManifest, pool_rel: &str) -> String {
    let spec = &pool.spec;
    let cidr = spec.cidr;
    let name = &pool.metadata.name;
    let (first, last) = host_span(cidr);
    let why = if spec.kind == PoolKind::Supernet {
        format!(
            "is in pool `{name}`, a supernet, which hands out prefixes, not addresses (a pool keeps its kind while it holds anything)"
        )
    } else if !cidr.contains(&address) {
        format!("is outside pool `{name}`'s prefix {cidr}")
    } else if ordinal(address) < first && cidr.addr().is_ipv6() {
        format!("is the subnet-router anycast address of pool `{name}` ({cidr})")
    } else if ordinal(address) < first {
        format!("is the network address of pool `{name}` ({cidr})")
    } else if ordinal(address) > last {
        format!("is the broadcast address of pool `{name}` ({cidr})")
    } else if spec.gateway == Some(address) {
        format!("is the gateway of pool `{name}`")
    } else if let Some(entry) = spec.exclude.iter().find(|e| e.net().contains(&address)) {
        format!("is excluded by pool `{name}` (exclude entry `{entry}`)")
    } else {
        format!("is not a candidate of pool `{name}`")
    };
    format!("address {address} {why}; was `{pool_rel}` edited after the allocation was made?")
}

/// Where the pool `name` of `scope` lives, relative to the root.
pub(super) fn pool_path(scope: Option<&Namespace>, name: &PoolName) -> String {
    match scope {
        None => format!("cluster/ipampools/{name}.yaml"),
        Some(ns) => format!("namespaces/{ns}/ipampools/{name}.yaml"),
    }
}

/// The message when `metadata.namespace` and the file's path disagree.
pub(super) fn scope_mismatch(meta: Option<&Namespace>, path: Option<&Namespace>) -> Option<String> {
    match (meta, path) {
        (Some(m), Some(p)) if m != p => Some(format!(
            "metadata.namespace is `{m}`, but the file is in the directory of namespace `{p}`"
        )),
        (Some(m), None) => Some(format!(
            "metadata.namespace is `{m}`, but the file is under `cluster/` (cluster-scoped)"
        )),
        (None, Some(p)) => Some(format!(
            "metadata.namespace is missing, but the file is in the directory of namespace `{p}`"
        )),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::yaml;

    fn pool(name: &str, cidr: &str, extra: &str) -> PoolManifest {
        yaml::decode_pool(&format!(
            "apiVersion: pivirt.hu/v1\nkind: IPAMPool\nmetadata:\n  name: {name}\nspec:\n  cidr: {cidr}\n  kind: public\n{extra}"
        ))
        .unwrap()
    }

    #[test]
    fn not_candidate_names_the_reason() {
        let p = pool(
            "p",
            "10.0.0.0/24",
            "  gateway: 10.0.0.1\n  exclude: [10.0.0.8/29]\n",
        );
        let why = |a: &str| not_candidate(a.parse().unwrap(), &p, "cluster/ipampools/p.yaml");
        assert!(why("10.0.1.5").contains("is outside pool `p`'s prefix 10.0.0.0/24"));
        assert!(why("10.0.0.0").contains("is the network address of pool `p`"));
        assert!(why("10.0.0.255").contains("is the broadcast address of pool `p`"));
        assert!(why("10.0.0.1").contains("is the gateway of pool `p`"));
        assert!(why("10.0.0.9").contains("(exclude entry `10.0.0.8/29`)"));
    }

    #[test]
    fn nested_and_equal_public_pools_overlap_disjoint_ones_do_not() {
        let pools = [
            pool("c", "10.1.0.0/16", ""),
            pool("b", "10.0.5.0/24", ""),
            pool("a", "10.0.0.0/16", ""),
            pool("d", "10.1.0.0/16", ""),
            pool("e", "10.0.6.0/24", ""),
            pool("f", "10.2.0.0/31", ""),
        ];
        let mut public: Vec<(&str, &PoolManifest)> = pools
            .iter()
            .map(|p| (p.metadata.name.as_str(), p))
            .collect();
        let mut findings = Vec::new();
        check_overlaps(&mut public, &mut findings);
        let mut pairs: Vec<String> = findings
            .iter()
            .map(|f| {
                let other = f.message.rsplit("public pool `").next().unwrap();
                format!("{}-{}", f.path, &other[..1])
            })
            .collect();
        pairs.sort();
        assert_eq!(
            pairs,
            ["a-b", "a-e", "b-a", "c-d", "d-c", "e-a"],
            "{findings:#?}"
        );
    }

    #[test]
    fn scope_mismatch_covers_every_direction() {
        let ns = |s: &str| Namespace::new(s).unwrap();
        assert_eq!(scope_mismatch(None, None), None);
        assert_eq!(scope_mismatch(Some(&ns("a")), Some(&ns("a"))), None);
        assert!(scope_mismatch(Some(&ns("a")), Some(&ns("b"))).is_some());
        assert!(scope_mismatch(Some(&ns("a")), None).is_some());
        assert!(scope_mismatch(None, Some(&ns("a"))).is_some());
    }
}
