//! What a pool owes what it holds, as one rule every writer of a pool calls (`apply`,
//! `import`): its allocations stay on candidates, its subnets and prefix claims inside it,
//! its kind stays while it holds anything, and a VPC's pool stays inside the range its VPC
//! claimed in a supernet. `check` reports the same things on a state made by hand
//! (`check/rules.rs`, `check/ranges.rs`, `check/prefixes.rs`).

use ipnet::IpNet;

use crate::engine::prefix::{claims_matching, overlaps, pool_claim_names};
use crate::engine::subnet;
use crate::error::{Error, Result};
use crate::model::candidates::Candidates;
use crate::model::vpc::vpc_uid;
use crate::model::{OwnerFilter, PoolKind, PoolManifest, PoolRef};
use crate::store::{ObjectKind, Store};

/// Refuses (exit 4, naming the holders) to make `new` the manifest of its pool, whose
/// manifest is now `old` (`None`: created, perhaps over holders whose manifest was removed
/// by hand or that the target of an `import` holds), when that would break a holder:
/// an allocation off the new candidates (or in a supernet, which holds no addresses), a
/// subnet outside the new prefix (or of a supernet), a prefix claim outside it (or of a
/// pool that is no supernet), any holder when the kind changes, or a VPC's pool leaving the
/// range its VPC claimed from a supernet (it would overlap another VPC's).
pub fn refuse_breaking(
    store: &dyn Store,
    old: Option<&PoolManifest>,
    new: &PoolManifest,
) -> Result<()> {
    let pref = PoolRef {
        namespace: new.metadata.namespace.clone(),
        name: new.name(),
    };
    let created = old.is_none();
    let kind_changed = old.is_some_and(|o| o.spec.kind != new.spec.kind);
    let why = if kind_changed {
        let old = old.expect("a kind changed from something");
        format!(
            "changing its kind from {} to {} (a pool keeps its kind while it holds anything)",
            old.spec.kind, new.spec.kind
        )
    } else {
        String::new()
    };
    refuse(
        &pref,
        created,
        &why,
        &allocations(store, &pref, new, created, kind_changed)?,
        "allocation",
        "release those allocations first, or keep their addresses in the pool",
    )?;
    let ns = crate::engine::hint::namespace_flag(pref.namespace.as_ref());
    refuse(
        &pref,
        created,
        &why,
        &subnets(store, &pref, new, kind_changed)?,
        "subnet",
        &format!(
            "delete those subnets first (`ipamctl subnet delete NAME{ns}`, each), or keep them in the pool"
        ),
    )?;
    refuse(
        &pref,
        created,
        &why,
        &prefix_claims(store, &pref, new, kind_changed)?,
        "prefix claim",
        &format!(
            "release those prefixes first (`ipamctl release {} PREFIX{ns} --owner KIND/NAME`, each with its owner), or keep them in the pool",
            pref.name
        ),
    )?;
    refuse_leaving_range(store, &pref, new)
}

/// The allocations of `pool` that `new` would strand, as `name (address)`, by address.
fn allocations(
    store: &dyn Store,
    pref: &PoolRef,
    new: &PoolManifest,
    created: bool,
    kind_changed: bool,
) -> Result<Vec<String>> {
    let ns = pref.namespace.as_ref();
    let held: Vec<std::net::IpAddr> = if created {
        // A new pool's name is rarely held: one indexed question on a database, not a
        // listing of the whole scope.
        store
            .find_allocations(ns, Some(&pref.name), &crate::model::OwnerFilter::default())?
            .iter()
            .filter_map(|f| crate::model::parse_allocation_name(&f.name).map(|(_, a)| a))
            .collect()
    } else {
        let names = store.list(ObjectKind::Allocation, ns)?;
        crate::model::pool_addresses(&names, &pref.name).collect()
    };
    let candidates = Candidates::of_pool(&new.spec);
    let keeps_none = kind_changed || new.spec.kind == PoolKind::Supernet;
    let mut stranded: Vec<_> = held
        .into_iter()
        .filter(|addr| keeps_none || !candidates.contains(*addr))
        .collect();
    // The listing comes in directory order; name them by address so the message is stable.
    stranded.sort();
    Ok(stranded
        .into_iter()
        .map(|addr| {
            format!(
                "{} ({addr})",
                crate::model::allocation_name(&pref.name, addr)
            )
        })
        .collect())
}

/// The subnets of `pool` that `new` would strand, as `name (cidr)`.
fn subnets(
    store: &dyn Store,
    pref: &PoolRef,
    new: &PoolManifest,
    kind_changed: bool,
) -> Result<Vec<String>> {
    let keeps_none = kind_changed || new.spec.kind == PoolKind::Supernet;
    Ok(subnet::of_pool(store, pref)?
        .into_iter()
        .filter(|s| keeps_none || !new.spec.cidr.contains(&s.spec.cidr))
        .map(|s| format!("{} ({})", s.metadata.name, s.spec.cidr))
        .collect())
}

/// The prefix claims of `pool` that `new` would strand: one outside the new prefix (or the
/// whole of it) or on an exclude, or any claim when the pool is no longer a supernet.
fn prefix_claims(
    store: &dyn Store,
    pref: &PoolRef,
    new: &PoolManifest,
    kind_changed: bool,
) -> Result<Vec<String>> {
    let spec = &new.spec;
    Ok(pool_claim_names(store, pref)?
        .into_iter()
        .filter(|(_, p)| {
            kind_changed
                || spec.kind != PoolKind::Supernet
                || !spec.cidr.contains(p)
                || *p == spec.cidr
                || spec.exclude.iter().any(|e| overlaps(e.net(), *p))
        })
        .map(|(name, p)| format!("{name} ({p})"))
        .collect())
}

/// The ranges VPC `uid` claimed from supernet pools of any scope (owned by its router).
pub fn vpc_ranges(store: &dyn Store, uid: &crate::model::Uid) -> Result<Vec<(String, IpNet)>> {
    let filter = OwnerFilter::exactly(&crate::engine::vpc::router(uid));
    let mut ranges = Vec::new();
    for scope in store.scopes()? {
        for claim in claims_matching(store, scope.as_ref(), None, &filter)? {
            ranges.push((claim.metadata.name.clone(), claim.spec.prefix));
        }
    }
    Ok(ranges)
}

/// Exit 4 when `new` is a VPC's pool whose VPC drew ranges of its family from supernet pools
/// and its prefix lies inside none of them: the rest of the supernet is other VPCs'.
fn refuse_leaving_range(store: &dyn Store, pref: &PoolRef, new: &PoolManifest) -> Result<()> {
    let Some(uid) = vpc_uid(new) else {
        return Ok(());
    };
    let cidr = new.spec.cidr;
    let same_family: Vec<(String, IpNet)> = vpc_ranges(store, &uid)?
        .into_iter()
        .filter(|(_, r)| r.addr().is_ipv4() == cidr.addr().is_ipv4())
        .collect();
    if same_family.is_empty() || same_family.iter().any(|(_, r)| r.contains(&cidr)) {
        return Ok(());
    }
    let named: Vec<String> = same_family
        .iter()
        .map(|(name, r)| format!("{name} ({r})"))
        .collect();
    Err(Error::Conflict {
        message: format!(
            "pool `{pref}` ({cidr}) would leave the range its VPC claimed, {}: the rest of the supernet is other VPCs'; nothing applied",
            named.join(", ")
        ),
        hint: Some("keep the VPC's pool inside its range claim".into()),
    })
}

/// Exit 4 naming the first ten of `stranded` (`what`s of pool `pref`), if any.
fn refuse(
    pref: &PoolRef,
    created: bool,
    why: &str,
    stranded: &[String],
    what: &str,
    hint: &str,
) -> Result<()> {
    if stranded.is_empty() {
        return Ok(());
    }
    let shown: Vec<_> = stranded.iter().take(10).cloned().collect();
    let more = stranded.len().saturating_sub(shown.len());
    let more = if more > 0 {
        format!(" and {more} more")
    } else {
        String::new()
    };
    let plural = if stranded.len() == 1 { "" } else { "s" };
    let message = if why.is_empty() {
        format!(
            "{} pool `{pref}` would leave {} {what}{plural} outside its candidates: {}{more}; nothing applied",
            if created { "creating" } else { "updating" },
            stranded.len(),
            shown.join(", "),
        )
    } else {
        format!(
            "updating pool `{pref}` would break {} {what}{plural} it holds by {why}: {}{more}; nothing applied",
            stranded.len(),
            shown.join(", "),
        )
    };
    Err(Error::Conflict {
        message,
        hint: Some(hint.into()),
    })
}
