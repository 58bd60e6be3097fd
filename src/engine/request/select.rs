//! Selectors as a user gives them (`--owner`, `--uid`, `--kind`, `--within`, `-l`), made a
//! [`Query`]: the one place `list`, `release` and `reconcile` validate them.

use super::field::{address, flag, owner_filter, prefix};
use crate::engine::list::Query;
use crate::error::Result;
use crate::model::selector::LabelSelector;
use crate::model::{OwnerKind, PoolName};

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
}

impl SelectInput {
    /// True when no selector was given.
    pub fn is_empty(&self) -> bool {
        self.kind.is_none()
            && self.owner.is_none()
            && self.uid.is_none()
            && self.within.is_none()
            && self.labels.is_none()
    }
}

/// The selectors (of `pool`, at `address`, if given), validated as a [`Query`] (exit 2 on a
/// malformed one, naming its flag).
pub fn query(pool: Option<&str>, at: Option<&str>, select: &SelectInput) -> Result<Query> {
    let mut filter = owner_filter(select.owner.as_deref(), select.uid.as_deref())?;
    if let Some(kind) = &select.kind {
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
    })
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
