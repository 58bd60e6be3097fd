//! `release` as a value: [`ReleaseInput`] is the request as a user gives it,
//! [`ReleaseRequest::new`] holds every rule that makes it a request of one form (`POOL
//! ADDRESS`, `POOL PREFIX`, selectors), and [`ReleaseRequest::run`] releases it, with its
//! warnings as values.

use std::borrow::Cow;
use std::net::IpAddr;

use serde::{Deserialize, Deserializer};

use super::Outcome;
use super::field::{address, namespace, pool_ref, prefix};
use super::input::{Defaults, fields};
use super::select::{SelectInput, query};
use crate::engine::list::Query;
use crate::engine::release::Released;
use crate::engine::scope::{Scope, Verb};
use crate::engine::warning::Warnings;
use crate::error::{Error, Result};
use crate::model::prefix_claim::PrefixClaimManifest;
use crate::model::{AllocationManifest, Namespace, OwnerFilter, PoolRef};
use crate::store::Store;

/// A `release` request as a user gives it: text, unchecked. A batch line's fields are
/// `pool`, `address`, `namespace`, `owner`, `uid`, `kind`, `tenant`, `within`, `labels`
/// (`-l`, a label selector read as `list -l` reads it), `force`, `ignoreNotFound` and
/// `dryRun`: the API's `ReleaseInput`, field for field.
#[derive(Clone, Debug, Default)]
pub struct ReleaseInput {
    pub pool: Option<String>,
    /// An address, or in a supernet pool a prefix in CIDR form.
    pub address: Option<String>,
    /// `-n`: the scope.
    pub namespace: Option<String>,
    pub select: SelectInput,
    pub force: bool,
    pub ignore_not_found: bool,
    pub dry_run: bool,
}

/// The fields of a batch's `release` request, in the order they are checked.
const FIELDS: &[&str] = &[
    "pool",
    "address",
    "namespace",
    "owner",
    "uid",
    "kind",
    "tenant",
    "within",
    "labels",
    "force",
    "ignoreNotFound",
    "dryRun",
];

impl ReleaseInput {
    /// Reads one request of a batch with `deserializer`, the batch's command line giving
    /// what the request leaves out (`defaults`); exit 2 saying why for one that is not a
    /// request.
    pub fn read<'de, D: Deserializer<'de>>(
        deserializer: D,
        defaults: &Defaults<'_>,
    ) -> Result<ReleaseInput> {
        let read = || -> std::result::Result<ReleaseInput, String> {
            let mut f = fields(deserializer, FIELDS, &[])?;
            // `pool` and `address` are the command line's two positional arguments, in
            // that order, whichever field holds them.
            let mut positional = f.texts("pool")?;
            positional.extend(f.texts("address")?);
            if let Some(extra) = positional.get(2) {
                return Err(format!("unexpected argument '{extra}' found"));
            }
            let mut positional = positional.into_iter();
            Ok(ReleaseInput {
                pool: positional.next(),
                address: positional.next(),
                namespace: f.inherited_text("namespace", "--namespace <NS>", defaults.namespace)?,
                select: SelectInput {
                    owner: f.text("owner", "--owner <KIND/NAME>")?,
                    uid: f.text("uid", "--uid <UUID>")?,
                    kind: f.text("kind", "--kind <KIND>")?,
                    tenant: f.text("tenant", "--tenant <NS>")?,
                    within: f.text("within", "--within <CIDR>")?,
                    labels: f.text("labels", "--selector <SELECTOR>")?,
                },
                force: f.switch("force")?.unwrap_or(false),
                ignore_not_found: f
                    .inherited_switch("ignoreNotFound", defaults.ignore_not_found)?,
                dry_run: defaults.dry_run || f.switch("dryRun")?.unwrap_or(false),
            })
        };
        read().map_err(Error::usage)
    }
}

impl<'de> Deserialize<'de> for ReleaseInput {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> std::result::Result<Self, D::Error> {
        ReleaseInput::read(deserializer, &Defaults::default())
            .map_err(|e| serde::de::Error::custom(e.to_string()))
    }
}

/// A `release` request, valid in every way that does not need the store, with the
/// caller's scope, which [`ReleaseRequest::run`] checks before anything else.
#[derive(Debug)]
pub struct ReleaseRequest {
    dry_run: bool,
    form: Form,
    caller: Scope,
}

/// The forms of a `release` request.
#[derive(Debug)]
enum Form {
    /// `POOL ADDRESS`, guarded by the owner filter unless `force`.
    Address {
        pool: PoolRef,
        address: IpAddr,
        guard: OwnerFilter,
        unguarded: bool,
        force: bool,
    },
    /// `POOL PREFIX` of a supernet pool, guarded alike.
    Prefix {
        pool: PoolRef,
        prefix: ipnet::IpNet,
        guard: OwnerFilter,
        force: bool,
    },
    /// Every allocation and prefix claim the selectors pick, in the scope if given.
    Selected {
        scope: Option<Namespace>,
        query: Query,
        ignore_not_found: bool,
    },
}

/// What one `release` request released (or, in a dry run, would release).
#[derive(Debug, Default)]
pub struct Freed {
    pub addresses: Vec<AllocationManifest>,
    pub prefixes: Vec<PrefixClaimManifest>,
    /// Why nothing was released, as the single command says it on stderr (`note: …`); a
    /// batch sums its requests' up in one line instead.
    pub note: Option<String>,
}

impl ReleaseRequest {
    /// The request `input` stands for, made by a caller of `caller`'s scope (the command
    /// line and the batch: [`Scope::everything`]), or exit 2 saying why it stands for none:
    /// every rule of `release` that needs no store, whoever asks.
    pub fn new(input: &ReleaseInput, caller: &Scope) -> Result<ReleaseRequest> {
        if input.force && input.address.is_none() {
            return Err(Error::usage(
                "the following required arguments were not provided: <ADDRESS>",
            ));
        }
        let select = &input.select;
        let ns = input.namespace.as_deref();
        let form = match (&input.pool, &input.address) {
            (Some(pool), Some(addr)) => {
                if select.within.is_some() || select.labels.is_some() {
                    return Err(Error::usage(
                        "`--within` and `-l` select allocations; next to an ADDRESS only `--owner`, `--uid` and `--kind` guard it",
                    ));
                }
                // A guard is an owner filter alone: `--tenant` without `--owner` would guard
                // by the name's prefix, which a sub-namespace's floating IPs share.
                if select.tenant.is_some() && select.owner.is_none() {
                    return Err(Error::usage(
                        "next to an ADDRESS, `--tenant` guards it with `--owner FloatingIP/NAME`",
                    ));
                }
                let guard = query(None, None, select)?.filter;
                let pool = pool_ref(ns, pool)?;
                if addr.contains('/') {
                    Form::Prefix {
                        pool,
                        prefix: prefix("PREFIX", addr)?,
                        guard,
                        force: input.force,
                    }
                } else {
                    Form::Address {
                        pool,
                        address: address("ADDRESS", addr)?,
                        guard,
                        unguarded: select.owner.is_none()
                            && select.uid.is_none()
                            && select.kind.is_none()
                            && select.tenant.is_none(),
                        force: input.force,
                    }
                }
            }
            (pool, None) if !select.is_empty() => Form::Selected {
                query: query(pool.as_deref(), None, select)?,
                scope: namespace(ns)?,
                ignore_not_found: input.ignore_not_found,
            },
            _ => return Err(Error::Usage {
                message: "release needs `POOL ADDRESS` or a selector: `--owner KIND/NAME`, `--uid UID`, `--kind KIND`, `--tenant NS`, `--within CIDR` or `-l SELECTOR`".into(),
                hint: Some("see `ipamctl release --help`; `--dry-run` shows what a selector picks".into()),
            }),
        };
        Ok(ReleaseRequest {
            dry_run: input.dry_run,
            form,
            caller: caller.clone(),
        })
    }

    /// Is this a dry run (nothing is released)?
    pub fn dry_run(&self) -> bool {
        self.dry_run
    }

    /// Releases what the request names, in its own units of work: the one thing the single
    /// command, each request of a batch and a server's request run. Warnings (broken files
    /// passed over) come back beside the result, also when it failed.
    pub fn run(&self, store: &(dyn Store + Sync)) -> Outcome<Freed> {
        let mut warnings = Warnings::default();
        let result = self
            .authorize()
            .and_then(|()| self.release(store, &mut warnings));
        let result = self.caller.scrub(result);
        Outcome {
            result,
            warnings,
            notes: Vec::new(),
        }
    }

    /// The caller's scope checked, before any lock: `claim` where the pool lives (outside
    /// the scope, the pool reads as missing). A release by selectors without a namespace
    /// covers the namespaces of the scope only ([`crate::engine::scopes::named_scopes`]).
    fn authorize(&self) -> Result<()> {
        let pool = |pool: &PoolRef| {
            self.caller.check(Verb::Claim, pool.namespace.as_ref(), || {
                crate::store::read::pool_missing(pool)
            })
        };
        match &self.form {
            Form::Address { pool: p, .. } | Form::Prefix { pool: p, .. } => pool(p),
            // Checked with the scopes it covers, in `release_selected`.
            Form::Selected { .. } => Ok(()),
        }
    }

    fn release(&self, store: &(dyn Store + Sync), warnings: &mut Warnings) -> Result<Freed> {
        let dry_run = self.dry_run;
        match &self.form {
            Form::Prefix {
                pool,
                prefix,
                guard,
                force,
            } => {
                let prefixes = release_prefix(store, pool, *prefix, guard, *force, dry_run)?;
                let note = prefixes.is_empty().then(|| {
                    format!("note: {prefix} in pool `{pool}` is not claimed; nothing to release")
                });
                Ok(Freed {
                    prefixes,
                    note,
                    ..Freed::default()
                })
            }
            Form::Address {
                pool,
                address,
                guard,
                unguarded,
                force,
            } => {
                if *unguarded && !force {
                    refuse_unguarded(store, &self.caller, pool, *address)?;
                }
                let addresses = release_one(store, &self.caller, pool, address, guard, dry_run)?;
                let note = addresses.is_empty().then(|| {
                    format!("note: {address} in pool `{pool}` is not allocated; nothing to release")
                });
                Ok(Freed {
                    addresses,
                    note,
                    ..Freed::default()
                })
            }
            Form::Selected {
                scope,
                query,
                ignore_not_found,
            } => {
                let scopes = match &query.tenant {
                    // A tenant's floating IPs, in the cluster's public pools: `claim` in
                    // the tenant's namespace is enough, without the cluster scope.
                    Some(tenant) if !self.caller.is_everything() => {
                        crate::engine::floating::check_scope(&self.caller, tenant)?;
                        Some(vec![None])
                    }
                    _ => crate::engine::scopes::named_scopes(
                        store,
                        &self.caller,
                        Verb::Claim,
                        scope.clone(),
                    )?,
                };
                let asked = Asked {
                    caller: &self.caller,
                    scopes: scopes.as_deref(),
                    query,
                    ignore_not_found: *ignore_not_found,
                    dry_run,
                };
                release_selected(store, &asked, warnings)
            }
        }
    }
}

/// What a release by selectors asks: the scopes it covers (`None`: every scope), the
/// selectors, and how.
struct Asked<'a> {
    caller: &'a Scope,
    scopes: Option<&'a [Option<Namespace>]>,
    query: &'a Query,
    ignore_not_found: bool,
    dry_run: bool,
}

/// `release` by selectors (in the query's pool, if given): every allocation and prefix
/// claim they pick, each guarded by its owner; none is exit 3, or a note with
/// `ignore_not_found`.
fn release_selected(
    store: &(dyn Store + Sync),
    asked: &Asked<'_>,
    warnings: &mut Warnings,
) -> Result<Freed> {
    let Asked {
        caller,
        scopes,
        query,
        ignore_not_found,
        dry_run,
    } = *asked;
    let mut held = crate::engine::list::collect(store, scopes, query, warnings)?;
    // Only what the caller sees: a public pool's floating IPs of a tenant it does not see
    // are not picked (each is released guarded by its exact owner, below).
    held.retain(|m| caller.sees_owner(&m.spec.owner));
    // Prefix claims have no address or labels to select by: only owner selectors pick them.
    let prefixes = if query.within.is_none() && query.labels.is_none() {
        super::select::prefix_claims(store, scopes, query.pool.as_ref(), &query.filter)?
    } else {
        Vec::new()
    };
    let mut note = None;
    if held.is_empty() && prefixes.is_empty() {
        if !ignore_not_found {
            return Err(Error::NotFound {
                message: "no allocation matches the selectors; nothing released".into(),
                hint: Some("`ipamctl list` with the same selectors shows what they pick; `--ignore-not-found` makes this exit 0 for a release that may have happened already".into()),
            });
        }
        note = Some("note: no allocation matches; nothing to release".into());
    }
    // Each allocation guarded by its exact owner, so an address re-allocated to someone
    // else in the meantime is left alone; all in one unit of work.
    let addresses = if dry_run {
        held
    } else {
        crate::engine::release::release_each(store, &held)?
    };
    let prefixes = if dry_run {
        prefixes
    } else {
        crate::engine::prefix::release_each(store, &prefixes)?
    };
    Ok(Freed {
        addresses,
        prefixes,
        note,
    })
}

/// `POOL ADDRESS` without `--owner`, `--uid` or `--kind`: exit 2 naming the holder, whose
/// owner the user then types (a mistyped address then frees nobody's). An address nobody
/// holds goes on to the release, which says so.
fn refuse_unguarded(store: &dyn Store, caller: &Scope, pool: &PoolRef, addr: IpAddr) -> Result<()> {
    let Some(owner) = crate::engine::release::holder(store, pool, addr)? else {
        return Ok(());
    };
    if !caller.sees_owner(&owner) {
        return Ok(()); // held by nobody the caller sees: the release says so
    }
    Err(Error::Usage {
        message: format!(
            "release of {addr} in pool `{pool}` names no owner; it is held by `{owner}`{}",
            owner
                .uid()
                .map(|u| format!(" (uid {u})"))
                .unwrap_or_default()
        ),
        hint: Some(format!(
            "guard it with its owner, which it then frees only if it still holds it: {}; or pass `--force` to release it whoever holds it",
            crate::engine::hint::release(pool, addr, &owner)
        )),
    })
}

/// Does the pool manifest exist? (Release works without it; it only sharpens errors.)
fn pool_spec(store: &dyn Store, pool: &PoolRef) -> Result<Option<crate::model::PoolManifest>> {
    match crate::store::read::load_pool(store, pool) {
        Ok(p) => Ok(Some(p)),
        Err(Error::NotFound { .. }) => Ok(None),
        Err(e) => Err(e),
    }
}

/// `release POOL ADDRESS`: the allocation released (none when nobody holds it).
fn release_one(
    store: &dyn Store,
    caller: &Scope,
    pool: &PoolRef,
    addr: &IpAddr,
    guard: &OwnerFilter,
    dry_run: bool,
) -> Result<Vec<AllocationManifest>> {
    let spec = pool_spec(store, pool)?;
    if let Some(spec) = &spec
        && !spec.spec.cidr.contains(addr)
    {
        return Err(Error::invalid(
            "ADDRESS",
            format!("{addr} is outside pool `{pool}` ({})", spec.spec.cidr),
        ));
    }
    let Some(guard) = caller_guard(store, caller, pool, *addr, guard)? else {
        return match spec {
            None => Err(crate::store::read::pool_not_found(store, pool)),
            Some(_) => Ok(Vec::new()),
        };
    };
    let guard = guard.as_ref();
    let released = if dry_run {
        crate::engine::release::would_release(store, pool, *addr, guard)?
    } else {
        crate::engine::release::release_address(store, pool, *addr, guard)?
    };
    match released {
        Released::Deleted(m) => Ok(vec![*m]),
        Released::NotHeld if spec.is_none() => Err(crate::store::read::pool_not_found(store, pool)),
        // Nobody holds it: the caller says so.
        Released::NotHeld => Ok(Vec::new()),
    }
}

/// The guard a release of `addr` runs with for `caller`: as given, for a caller that sees
/// every owner. For another (a token whose cluster scope reaches public pools that hold
/// tenants' floating IPs it does not see, [`Scope::sees_owner`]): `None` when no owner it
/// sees holds the address (nothing is released, and the caller is told nobody holds it);
/// else the holder exactly, so that an address that changed hands since, perhaps to an
/// owner the caller does not see, is left and not released; or exit 4 naming the holder
/// when it fails `guard`.
fn caller_guard<'g>(
    store: &dyn Store,
    caller: &Scope,
    pool: &PoolRef,
    addr: IpAddr,
    guard: &'g OwnerFilter,
) -> Result<Option<Cow<'g, OwnerFilter>>> {
    if caller.sees_every_owner() {
        return Ok(Some(Cow::Borrowed(guard)));
    }
    match crate::engine::release::holder(store, pool, addr)? {
        Some(holder) if caller.sees_owner(&holder) => {
            if !guard.matches(&holder) {
                return Err(crate::engine::release::not_held_by(pool, addr, &holder));
            }
            Ok(Some(Cow::Owned(OwnerFilter::exactly(&holder))))
        }
        _ => Ok(None),
    }
}

/// `release POOL PREFIX`: guarded as an address release is (exit 2 naming the holder when
/// no `--owner`/`--uid`/`--kind` is given and no `--force`). Nothing, when nobody claims it.
fn release_prefix(
    store: &dyn Store,
    pool: &PoolRef,
    prefix: ipnet::IpNet,
    guard: &OwnerFilter,
    force: bool,
    dry_run: bool,
) -> Result<Vec<PrefixClaimManifest>> {
    if guard.is_empty() && !force {
        let claims = crate::engine::prefix::pool_claims(store, pool)?;
        if let Some(c) = claims.iter().find(|c| c.spec.prefix == prefix) {
            let owner = &c.spec.owner;
            let uid = owner
                .uid()
                .map(|u| format!(" --uid {u}"))
                .unwrap_or_default();
            return Err(Error::Usage {
                message: format!(
                    "release of {prefix} in pool `{pool}` names no owner; it is held by `{owner}`"
                ),
                hint: Some(format!(
                    "guard it with `--owner {owner}{uid}`, or pass `--force` to release it whoever holds it"
                )),
            });
        }
    }
    match crate::engine::prefix::release_prefix(store, pool, prefix, guard, dry_run)? {
        Some(m) => Ok(vec![m]),
        // Nobody claims it (in a pool that exists): the caller says so.
        None => {
            crate::store::read::load_pool(store, pool)?;
            Ok(Vec::new())
        }
    }
}
