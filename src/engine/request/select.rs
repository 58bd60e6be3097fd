//! Selectors as a user gives them (`--owner`, `--uid`, `--kind`, `--within`, `-l`), made a
//! [`Query`]: the one place `list`, `release` and `reconcile` validate them.

use super::field::{address, flag, owner_filter, prefix};
use crate::engine::list::Query;
use crate::error::{Error, Result};
use crate::model::selector::LabelSelector;
use crate::model::{Namespace, Owner, OwnerFilter, OwnerKind, PoolName};

/// Which allocations to pick, as text; every selector given must hold.
#[derive(Clone, Debug, Default)]
pub struct SelectInput {
    pub kind: Option<String>,
    /// KIND/NAME; a trailing `/` selects by prefix.
    pub owner: Option<String>,
    pub uid: Option<String>,
    pub within: Option<String>,
    /// `-l`: a label selector.
    pub labels: Option<String>,
    /// `--tenant`: only this namespace's floating IPs (with `--owner FloatingIP/NAME`, its
    /// floating IP of that name).
    pub tenant: Option<String>,
}

impl SelectInput {
    /// True when no selector was given.
    pub fn is_empty(&self) -> bool {
        self.kind.is_none()
            && self.owner.is_none()
            && self.uid.is_none()
            && self.within.is_none()
            && self.labels.is_none()
            && self.tenant.is_none()
    }
}

/// The selectors (of `pool`, at `address`, if given), validated as a [`Query`] (exit 2 on a
/// malformed one, naming its flag).
pub fn query(pool: Option<&str>, at: Option<&str>, select: &SelectInput) -> Result<Query> {
    let tenant = namespace_flag("--tenant", select.tenant.as_deref())?;
    let mut filter = match &tenant {
        Some(tenant) => tenant_filter(tenant, select)?,
        None => owner_filter(select.owner.as_deref(), select.uid.as_deref())?,
    };
    if let Some(kind) = select.kind.as_ref().filter(|_| tenant.is_none()) {
        let kind = flag("--kind", kind.parse::<OwnerKind>())?;
        filter = flag("--kind", filter.with_kind(kind))?;
    }
    Ok(Query {
        pool: pool.map(|p| flag("--pool", PoolName::new(p))).transpose()?,
        address: at.map(|a| address("--address", a)).transpose()?,
        filter,
        within: select
            .within
            .as_deref()
            .map(|w| prefix("--within", w))
            .transpose()?,
        labels: select
            .labels
            .as_deref()
            .map(|l| flag("--selector", LabelSelector::parse(l)))
            .transpose()?,
        mac: None,
        host_name: None,
        lapsed_at: None,
        tenant,
    })
}

/// A namespace flag (`--tenant`), validated.
fn namespace_flag(name: &str, text: Option<&str>) -> Result<Option<Namespace>> {
    text.map(|t| flag(name, Namespace::new(t))).transpose()
}

/// The owner filter of `--tenant T`: `--owner FloatingIP/NAME` (a floating IP's own name)
/// becomes T's floating IP of that name; without `--owner`, every floating IP whose name
/// starts with `T/` (the query then keeps those whose tenant is T exactly, not `T/sub`'s).
fn tenant_filter(tenant: &Namespace, select: &SelectInput) -> Result<OwnerFilter> {
    let uid = super::field::uid(select.uid.as_deref())?;
    let owner = match select.owner.as_deref() {
        None => format!("FloatingIP/{tenant}/"),
        Some(text) => match text.split_once('/') {
            Some(("FloatingIP", name)) if !name.contains('/') => {
                let owner = flag("--owner", Owner::floating(tenant, name, None))?;
                owner.to_string()
            }
            _ => {
                return Err(Error::invalid(
                    "--owner",
                    format!(
                        "`{text}`: next to `--tenant`, `--owner` names a floating IP by its own name: `FloatingIP/<name>`"
                    ),
                ));
            }
        },
    };
    let filter = flag("--owner", OwnerFilter::new(Some(&owner), uid))?;
    match &select.kind {
        Some(kind) if kind != OwnerKind::FloatingIp.as_str() => Err(Error::invalid(
            "--kind",
            format!("`--kind {kind}` contradicts `--tenant`, which selects floating IPs"),
        )),
        _ => Ok(filter),
    }
}

/// The prefix claims of `scopes` (every scope without them: see
/// [`crate::engine::scopes::named_scopes`], which makes them for the caller's scope) whose
/// owner passes `filter`, of `pool` only if given.
pub fn prefix_claims(
    store: &dyn crate::store::Store,
    scopes: Option<&[Option<crate::model::Namespace>]>,
    pool: Option<&PoolName>,
    filter: &crate::model::OwnerFilter,
) -> Result<Vec<crate::model::prefix_claim::PrefixClaimManifest>> {
    let scopes = match scopes {
        Some(scopes) => scopes.to_vec(),
        None => store.scopes()?,
    };
    let mut out = Vec::new();
    for ns in scopes {
        out.extend(crate::engine::prefix::claims_matching(
            store,
            ns.as_ref(),
            pool,
            filter,
        )?);
    }
    Ok(out)
}

/// `list`'s prefix claims: those of `scopes` (as [`prefix_claims`] takes them) that `query`
/// picks. A prefix claim has no address, labels, MAC, host name or lease: only the pool and
/// owner selectors pick one, and a query with any other picks none.
pub fn listed_prefix_claims(
    store: &dyn crate::store::Store,
    scopes: Option<&[Option<crate::model::Namespace>]>,
    query: &Query,
) -> Result<Vec<crate::model::prefix_claim::PrefixClaimManifest>> {
    if query.address.is_some()
        || query.within.is_some()
        || query.labels.is_some()
        || query.mac.is_some()
        || query.host_name.is_some()
        || query.lapsed_at.is_some()
    {
        return Ok(Vec::new());
    }
    prefix_claims(store, scopes, query.pool.as_ref(), &query.filter)
}
