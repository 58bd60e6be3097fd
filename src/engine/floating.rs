//! A tenant's floating IPs as engine operations (the API's `claimFloatingIp` and
//! `releaseFloatingIp`): a namespace (the tenant) claims `FloatingIP/<name>` from the
//! cluster's public pools, of a zone (in name order, as `allocate --zone` does) or one
//! pool, and releases it. The owner is `FloatingIP/<tenant>/<name>`, recorded with the
//! label `pivirt.hu/tenant` ([`crate::model::tenant`] says why), so two tenants who name a
//! floating IP alike never share it: tenant B asking for `fip-web` is another owner than
//! tenant A's `fip-web`, answered its own address, neither waiting on nor refused because of
//! A's. Asking again answers the same address.
//!
//! Each request is built by one constructor from a plain input and runs as an `allocate`
//! or a `release` request ([`crate::engine::request`]): `allocate --tenant`, a batch line
//! with `tenant` and these operations are one path. The caller's scope is checked first,
//! before any lock: `claim` in the tenant's namespace is enough, without any cluster scope
//! ([`Scope::may_claim_floating`]); outside it the answer is "not found".

use crate::engine::allocate::Allocated;
use crate::engine::list::Query;
use crate::engine::request::{
    AllocateInput, AllocateRequest, Claimed, Freed, Outcome, ReleaseInput, ReleaseRequest,
    SelectInput, query,
};
use crate::engine::scope::{Scope, Verb};
use crate::engine::warning::Warnings;
use crate::error::{Error, Result};
use crate::model::{AllocationManifest, Namespace};
use crate::store::Store;

/// `claimFloatingIp`'s input, as a user gives it (text, unchecked): the tenant
/// (`namespace`), the floating IP's own `name` (a label), its `uid` (a UUID, optional), and
/// exactly one of `zone` and `pool`.
#[derive(Clone, Debug, Default)]
pub struct ClaimFloatingInput {
    pub namespace: String,
    pub name: String,
    pub uid: Option<String>,
    pub zone: Option<String>,
    pub pool: Option<String>,
    pub dry_run: bool,
}

/// A tenant's floating IP claim, valid in every way that does not need the store.
#[derive(Clone, Debug)]
pub struct FloatingClaim {
    tenant: Namespace,
    /// The `allocate` it stands for, checked by the constructor; made a request with the
    /// caller's scope when it runs ([`FloatingClaim::request`]).
    input: AllocateInput,
}

impl FloatingClaim {
    /// The claim `input` stands for, or exit 2 saying why it stands for none.
    pub fn new(input: &ClaimFloatingInput) -> Result<FloatingClaim> {
        let tenant = super::request::field::flag("namespace", Namespace::new(&input.namespace))?;
        let pools = match (&input.zone, &input.pool) {
            (Some(_), None) => Vec::new(),
            (None, Some(pool)) => vec![pool.clone()],
            _ => {
                return Err(Error::usage(
                    "a floating IP is claimed from a zone's public pools or from one public pool: give exactly one of `zone` and `pool`",
                ));
            }
        };
        let input = AllocateInput {
            pools,
            owner: Some(format!("FloatingIP/{}", input.name)),
            uid: input.uid.clone(),
            zone: input.zone.clone(),
            tenant: Some(tenant.to_string()),
            dry_run: input.dry_run,
            ..AllocateInput::default()
        };
        // Every rule that needs no store, now (the scope is the caller's, when it runs).
        AllocateRequest::new(&input, &Scope::everything())?;
        Ok(FloatingClaim { tenant, input })
    }

    /// The tenant it claims for.
    pub fn tenant(&self) -> &Namespace {
        &self.tenant
    }

    /// The `allocate` request it runs for a caller of `scope` (for the executor, which
    /// runs many); the request checks the scope when it runs, before any lock.
    pub fn request(&self, scope: &Scope) -> Result<AllocateRequest> {
        AllocateRequest::new(&self.input, scope)
    }
}

/// Checks that `scope` may claim and release floating IPs for `tenant`: not found outside
/// it, forbidden without `claim` (before any lock).
pub fn check_scope(scope: &Scope, tenant: &Namespace) -> Result<()> {
    scope.check(Verb::Claim, Some(tenant), || {
        crate::engine::admin::no_namespace(tenant)
    })
}

/// Claims `claim` (or, in a dry run, says what it would claim): the tenant's floating IP,
/// the one it holds already if it does. Warnings come back beside the result.
pub fn claim(store: &dyn Store, scope: &Scope, claim: &FloatingClaim) -> Outcome<Allocated> {
    let outcome = match claim.request(scope) {
        Ok(request) => request.run(store),
        Err(e) => return refused(e),
    };
    Outcome {
        // The constructor made it a claim of one address (a zone's, or one pool's).
        result: outcome.result.map(|claimed| match claimed {
            Claimed::Addresses(allocated) => allocated
                .into_iter()
                .next()
                .expect("a claim from a zone or one pool answers one address"),
            Claimed::Prefix(..) | Claimed::WouldPrefix(_) => {
                unreachable!("a floating IP's claim is no prefix claim")
            }
        }),
        warnings: outcome.warnings,
        notes: outcome.notes,
    }
}

/// `releaseFloatingIp`'s input: the tenant (`namespace`) and the floating IP's own name.
#[derive(Clone, Debug, Default)]
pub struct ReleaseFloatingInput {
    pub namespace: String,
    pub name: String,
    /// A release of what is not held is no error (nothing released).
    pub ignore_not_found: bool,
    pub dry_run: bool,
}

/// A tenant's floating IP release, valid in every way that does not need the store.
#[derive(Debug)]
pub struct FloatingRelease {
    /// The `release` it stands for, checked by the constructor; made a request with the
    /// caller's scope when it runs ([`FloatingRelease::request`]).
    input: ReleaseInput,
}

impl FloatingRelease {
    /// The release `input` stands for, or exit 2 saying why it stands for none.
    pub fn new(input: &ReleaseFloatingInput) -> Result<FloatingRelease> {
        let tenant = super::request::field::flag("namespace", Namespace::new(&input.namespace))?;
        let input = ReleaseInput {
            select: SelectInput {
                owner: Some(format!("FloatingIP/{}", input.name)),
                tenant: Some(tenant.to_string()),
                ..SelectInput::default()
            },
            ignore_not_found: input.ignore_not_found,
            dry_run: input.dry_run,
            ..ReleaseInput::default()
        };
        ReleaseRequest::new(&input, &Scope::everything())?;
        Ok(FloatingRelease { input })
    }

    /// The `release` request it runs for a caller of `scope`; the request checks the
    /// scope when it runs, before any lock.
    pub fn request(&self, scope: &Scope) -> Result<ReleaseRequest> {
        ReleaseRequest::new(&self.input, scope)
    }
}

/// Releases the tenant's floating IP (only its own: another tenant's of the same name is
/// another owner, never selected). Not held is exit 3, or nothing released with
/// `ignore_not_found`.
pub fn release(
    store: &(dyn Store + Sync),
    scope: &Scope,
    release: &FloatingRelease,
) -> Outcome<Freed> {
    match release.request(scope) {
        Ok(request) => request.run(store),
        Err(e) => refused(e),
    }
}

/// Whether `scope` sees the allocation `m` as a tenant's floating IP: one whose tenant is
/// in the scope. (The cluster's public pools are otherwise the cluster scope's.)
pub fn visible(scope: &Scope, m: &AllocationManifest) -> bool {
    m.spec.owner.tenant().is_some() && scope.sees_owner(&m.spec.owner)
}

/// The floating IPs of `tenant` (every tenant's in `scope` without one), sorted as `list`
/// sorts. `read` in the tenant's namespace is needed; outside the scope, not found.
pub fn list(
    store: &(dyn Store + Sync),
    scope: &Scope,
    tenant: Option<&str>,
    warnings: &mut Warnings,
) -> Result<Vec<AllocationManifest>> {
    let query: Query = match tenant {
        Some(tenant) => {
            let ns = super::request::field::flag("namespace", Namespace::new(tenant))?;
            scope.check(Verb::Read, Some(&ns), || {
                crate::engine::admin::no_namespace(&ns)
            })?;
            query(
                None,
                None,
                &SelectInput {
                    tenant: Some(tenant.to_owned()),
                    ..SelectInput::default()
                },
            )?
        }
        None => {
            if !scope.holds(Verb::Read) {
                return Err(Error::Forbidden {
                    message: "the caller may not read".into(),
                });
            }
            query(
                None,
                None,
                &SelectInput {
                    kind: Some("FloatingIP".into()),
                    ..SelectInput::default()
                },
            )?
        }
    };
    let found = crate::engine::list::collect(store, Some(&[None]), &query, warnings)?;
    Ok(found.into_iter().filter(|m| visible(scope, m)).collect())
}

/// The outcome of a request the scope refused: its error, nothing noticed.
fn refused<T>(e: Error) -> Outcome<T> {
    Outcome {
        result: Err(e),
        warnings: Warnings::default(),
        notes: Vec::new(),
    }
}
