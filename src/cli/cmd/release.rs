//! `ipamctl release`: free one address, or every allocation the selectors pick.

use std::io::Write;

use crate::cli::output::{self, Action, Change, Held};
use crate::cli::{GlobalArgs, ReleaseArgs};
use crate::engine::release::Released;
use crate::error::{Error, Result};
use crate::model::PoolRef;
use crate::model::prefix_claim::PrefixClaimManifest;
use crate::model::{AllocationManifest, OwnerFilter};
use crate::store::Store;

pub fn run(
    store: &(dyn Store + Sync),
    g: &GlobalArgs,
    args: &ReleaseArgs,
    out: &mut dyn Write,
) -> Result<()> {
    let freed = release_request(store, g, args)?;
    if let Some(note) = &freed.note {
        output::diagnostic(note);
    }
    let action = Action::Released.planned(args.dry_run);
    let changes: Vec<_> = freed
        .addresses
        .iter()
        .map(Held::Address)
        .chain(freed.prefixes.iter().map(Held::Prefix))
        .map(|m| Change::new(m, action))
        .collect();
    output::write_changes(out, g.output, &changes, false)
}

/// What one `release` request released (or, in a dry run, would release).
#[derive(Default)]
pub(super) struct Freed {
    pub(super) addresses: Vec<AllocationManifest>,
    pub(super) prefixes: Vec<PrefixClaimManifest>,
    /// Why nothing was released, as the single command says it on stderr (`note: …`); a
    /// batch sums its requests' up in one line instead.
    pub(super) note: Option<String>,
}

/// One `release` request, whichever form (`POOL ADDRESS`, `POOL PREFIX`, selectors): the
/// single command and each request of `release -f` run this, and nothing else.
pub(super) fn release_request(
    store: &(dyn Store + Sync),
    g: &GlobalArgs,
    args: &ReleaseArgs,
) -> Result<Freed> {
    let select = &args.select;
    match (&args.pool, &args.address) {
        (Some(pool), Some(addr)) => {
            if select.within.is_some() || select.labels.is_some() {
                return Err(Error::usage(
                    "`--within` and `-l` select allocations; next to an ADDRESS only `--owner`, `--uid` and `--kind` guard it",
                ));
            }
            let guard = super::list::query(None, None, select)?.filter;
            let pool = super::pool_ref(g, pool)?;
            if addr.contains('/') {
                let prefix = super::prefix("PREFIX", addr)?;
                let prefixes = super::prefix::release_one(
                    store,
                    &pool,
                    prefix,
                    &guard,
                    args.force,
                    args.dry_run,
                )?;
                let note = prefixes.is_empty().then(|| {
                    format!("note: {prefix} in pool `{pool}` is not claimed; nothing to release")
                });
                return Ok(Freed {
                    prefixes,
                    note,
                    ..Freed::default()
                });
            }
            let addr = super::address("ADDRESS", addr)?;
            let unguarded = select.owner.is_none() && select.uid.is_none() && select.kind.is_none();
            if unguarded && !args.force {
                refuse_unguarded(store, &pool, addr)?;
            }
            let addresses = release_one(store, &pool, &addr, &guard, args.dry_run)?;
            let note = addresses.is_empty().then(|| {
                format!("note: {addr} in pool `{pool}` is not allocated; nothing to release")
            });
            Ok(Freed {
                addresses,
                note,
                ..Freed::default()
            })
        }
        (pool, None) if !select.is_empty() => release_selected(store, g, args, pool.as_deref()),
        _ => Err(Error::Usage {
            message: "release needs `POOL ADDRESS` or a selector: `--owner KIND/NAME`, `--uid UID`, `--kind KIND`, `--within CIDR` or `-l SELECTOR`".into(),
            hint: Some("see `ipamctl release --help`; `--dry-run` shows what a selector picks".into()),
        }),
    }
}

/// `release` by selectors (in `pool`, if given): every allocation and prefix claim they
/// pick, each guarded by its owner; none is exit 3, or a note with `--ignore-not-found`.
fn release_selected(
    store: &(dyn Store + Sync),
    g: &GlobalArgs,
    args: &ReleaseArgs,
    pool: Option<&str>,
) -> Result<Freed> {
    let select = &args.select;
    let query = super::list::query(pool, None, select)?;
    let held = super::list::collect(store, g, &query)?;
    // Prefix claims have no address or labels to select by: only owner selectors pick them.
    let prefixes = if select.within.is_none() && select.labels.is_none() {
        super::prefix::matching(store, g, query.pool.as_ref(), &query.filter)?
    } else {
        Vec::new()
    };
    let mut note = None;
    if held.is_empty() && prefixes.is_empty() {
        if !args.ignore_not_found {
            return Err(Error::NotFound {
                message: "no allocation matches the selectors; nothing released".into(),
                hint: Some("`ipamctl list` with the same selectors shows what they pick; `--ignore-not-found` makes this exit 0 for a release that may have happened already".into()),
            });
        }
        note = Some("note: no allocation matches; nothing to release".into());
    }
    let addresses = release_all(store, held, args.dry_run)?;
    let prefixes = if args.dry_run {
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
fn refuse_unguarded(store: &dyn Store, pool: &PoolRef, addr: std::net::IpAddr) -> Result<()> {
    let Some(owner) = crate::engine::release::holder(store, pool, addr)? else {
        return Ok(());
    };
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

/// The one note `release -f` prints for the `unchanged` of its `all` requests that had
/// nothing to release, in place of the note each would print alone: a teardown run again
/// would otherwise print hundreds of them, all alike.
pub(super) fn note_nothing_released(unchanged: usize, all: usize) {
    if unchanged > 0 {
        output::diagnostic(&format!(
            "note: {unchanged} of {all} requests had nothing to release (no allocation matches, or the address or prefix is not held): each answers `unchanged`"
        ));
    }
}

/// Does the pool manifest exist? (Release works without it; it only sharpens errors.)
fn pool_spec(store: &dyn Store, pool: &PoolRef) -> Result<Option<crate::model::PoolManifest>> {
    match crate::store::read::load_pool(store, pool) {
        Ok(p) => Ok(Some(p)),
        Err(Error::NotFound { .. }) => Ok(None),
        Err(e) => Err(e),
    }
}

fn release_one(
    store: &dyn Store,
    pool: &PoolRef,
    addr: &std::net::IpAddr,
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

/// Releases each allocation guarded by its exact owner, so an address re-allocated to
/// someone else in the meantime is left alone; all in one unit of work.
fn release_all(
    store: &dyn Store,
    held: Vec<AllocationManifest>,
    dry_run: bool,
) -> Result<Vec<AllocationManifest>> {
    if dry_run {
        return Ok(held);
    }
    crate::engine::release::release_each(store, &held)
}
