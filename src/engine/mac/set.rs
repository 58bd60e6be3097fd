//! `ipamctl mac set`: the NIC holding an address gets a new MAC on every allocation it holds
//! in the scope (a dual-stack NIC's IPv4 and IPv6), all or nothing.
//!
//! The NIC is the holder of POOL ADDRESS: its owner identity, in the pool's scope. The
//! request's `--owner` (and `--uid`, if given) guard it as a filter, as `release`'s do
//! (an owner's name is one identity per pool: [`crate::engine::identity`]). Under the claim
//! locks of the name in every pool the name holds an address in, so no claim or release of
//! it runs beside the change, each allocation is changed in turn (POOL's first, then by pool
//! name), the store arbitrating each new MAC as a claim's
//! ([`crate::store::Claims::set_mac`]). When one is refused (another NIC holds the MAC in
//! that pool), the ones changed before are changed back, and the refusal names the holder.
//!
//! On PostgreSQL the whole is one transaction. On the file store each change is durable on
//! its own: a process killed between two pools leaves the NIC with two MACs. That is
//! reported, not hidden: `check` names the NIC's files with this command, and `dhcp export
//! --format dnsmasq` refuses to write two hosts for it; the same `mac set`, run again,
//! finishes it (an allocation that holds the MAC already is left as it is).

use std::net::IpAddr;

use super::{MacChoice, for_pool, held_by, refuse_without_nic, resolve};
use crate::engine::allocate::allocations_of;
use crate::engine::scope::{Scope, Verb};
use crate::engine::warning::Warnings;
use crate::error::{Error, Result};
use crate::model::{
    AllocationManifest, Namespace, Owner, OwnerFilter, PoolName, PoolRef, allocation_name,
};
use crate::store::read::{load_pool, read_allocation};
use crate::store::{self, MacChange, Store};

/// `ipamctl mac set`: give the NIC holding `address` in `pool` a new MAC.
#[derive(Clone, Debug)]
pub struct SetRequest {
    /// The pool.
    pub pool: PoolRef,
    /// The address the NIC holds (it keeps it, and every other address it holds).
    pub address: IpAddr,
    /// Who must hold it, as a filter (`--owner`, and `--uid` if given), as `release`'s: its
    /// uid, if it has one, must be the holder's; without one, the name alone guards.
    pub owner: Owner,
    /// The new MAC.
    pub mac: MacChoice,
}

/// `mac set`'s fields as given (the command line's, the API's `setMac` input's).
#[derive(Clone, Debug, Default)]
pub struct SetInput {
    pub namespace: Option<String>,
    pub pool: String,
    pub address: String,
    pub owner: String,
    pub uid: Option<String>,
    pub mac: String,
}

impl SetRequest {
    /// The request `input` stands for, or exit 2 naming the field that is not valid.
    pub fn new(input: &SetInput) -> Result<SetRequest> {
        use crate::engine::request::field;
        Ok(SetRequest {
            pool: field::pool_ref(input.namespace.as_deref(), &input.pool)?,
            address: field::address("ADDRESS", &input.address)?,
            owner: field::flag(
                "--owner",
                Owner::parse(&input.owner, field::uid(input.uid.as_deref())?),
            )?,
            mac: field::mac_choice(&input.mac)?,
        })
    }
}

/// What `mac set` did: each allocation of the NIC, before and after (equal when it held
/// the MAC already), POOL ADDRESS's first.
#[derive(Clone, Debug)]
pub struct MacSet {
    /// (before, after), in the order they were changed.
    pub changes: Vec<(AllocationManifest, AllocationManifest)>,
}

/// How many times the NIC's pools are listed again when it claimed in another pool between
/// the listing and the locks.
const ATTEMPTS: usize = 4;

/// Changes the MAC of the NIC holding `req.address` in `req.pool` on every allocation it
/// holds in the scope, all or nothing (see the module docs): exit 3 when nobody holds the
/// address, exit 4 when an owner that does not pass the guard does (naming it), or another
/// allocation of one of its pools holds the new MAC (naming it; nothing changed). The
/// caller's `scope` needs `claim` in the pool's namespace (outside it: not found).
pub fn set(store: &dyn Store, scope: &Scope, req: &SetRequest) -> Result<MacSet> {
    refuse_without_nic(&req.owner)?;
    let ns = req.pool.namespace.as_ref();
    scope.check(Verb::Claim, ns, || {
        crate::store::read::pool_missing(&req.pool)
    })?;
    // A refusal names the holder: to a token's caller, as it may be told it.
    scope.told(set_in(store, req))
}

/// [`set`], the caller's scope checked.
fn set_in(store: &dyn Store, req: &SetRequest) -> Result<MacSet> {
    let ns = req.pool.namespace.as_ref();
    let name = Owner::new(req.owner.kind(), req.owner.name(), None)
        .expect("the name of a valid owner is valid");
    for _ in 0..ATTEMPTS {
        // Every pool the name holds an address in, as it stands: the NIC's are among them.
        let mut warnings = Warnings::default();
        let by_name = OwnerFilter::exactly(&name);
        let mut pools: Vec<PoolName> = allocations_of(store, ns, None, &by_name, &mut warnings)?
            .into_iter()
            .map(|m| m.spec.pool)
            .chain([req.pool.name.clone()])
            .collect();
        pools.sort();
        pools.dedup();
        if let Some(done) = store::atomically(store, || attempt(store, req, &name, &pools))? {
            return Ok(done);
        }
    }
    Err(Error::conflict(format!(
        "the NIC holding {} in pool `{}` kept claiming in other pools while its MAC was being set; nothing was written, try again",
        req.address, req.pool
    )))
}

/// One turn of [`set`] under the claim locks of `name` in `pools`; `None` when the NIC
/// holds an address in a pool outside them (claimed since they were listed).
fn attempt(
    store: &dyn Store,
    req: &SetRequest,
    name: &Owner,
    pools: &[PoolName],
) -> Result<Option<MacSet>> {
    let ns = req.pool.namespace.as_ref();
    // The name's lock ([`Owner::lock_key`]): the same whatever the holder's uid.
    let _locks = store.lock_claim(ns, pools, name)?;
    let first = held_at(store, req)?;
    let nic = first.spec.owner.clone();
    let mut warnings = Warnings::default();
    let mut others: Vec<AllocationManifest> =
        allocations_of(store, ns, None, &OwnerFilter::exactly(&nic), &mut warnings)?
            .into_iter()
            .filter(|m| m.spec.address != first.spec.address || m.spec.pool != first.spec.pool)
            .collect();
    if others.iter().any(|m| !pools.contains(&m.spec.pool)) {
        return Ok(None);
    }
    others.sort_by(|a, b| (&a.spec.pool, a.spec.address).cmp(&(&b.spec.pool, b.spec.address)));
    let spec = load_pool(store, &req.pool)?;
    let choice = for_pool(store, req.mac, &spec, &req.pool, &nic, Some(req.address))?;
    let mac = resolve(choice, req.address).expect("made concrete for the pool");
    let mut changes = Vec::new();
    let mut done: Vec<(PoolRef, AllocationManifest, AllocationManifest)> = Vec::new();
    for (i, before) in std::iter::once(first).chain(others).enumerate() {
        let pool = PoolRef {
            namespace: ns.cloned(),
            name: before.spec.pool.clone(),
        };
        let mut after = before.clone();
        after.spec.mac = Some(mac);
        if i > 0 {
            failpoint!("mac-set-between-pools");
            // The pool's own macPrefix rule, as a claim there with this MAC would keep it (a
            // pool deleted under its allocations by hand has none to keep).
            if let Ok(spec) = load_pool(store, &pool) {
                for_pool(
                    store,
                    MacChoice::Given(mac),
                    &spec,
                    &pool,
                    &nic,
                    Some(before.spec.address),
                )?;
            }
        }
        if before.spec.mac == Some(mac) {
            changes.push((before, after));
            continue;
        }
        let failed = match store.set_mac(ns, &before, &after) {
            Ok(MacChange::Changed) => None,
            Ok(MacChange::Moved) => Some(Error::conflict(format!(
                "{} in pool `{pool}` changed while its MAC was being set; nothing was written, try again",
                before.spec.address
            ))),
            Ok(MacChange::MacHeld(holder)) => Some(held_by(&holder, &pool)),
            Err(e) => Some(e),
        };
        if let Some(e) = failed {
            // A database's error aborted the transaction, whose rollback undoes the rest.
            if !matches!(e, Error::Database { .. }) {
                undo(store, ns, &done)?;
            }
            return Err(e);
        }
        done.push((pool, before.clone(), after.clone()));
        changes.push((before, after));
    }
    Ok(Some(MacSet { changes }))
}

/// The allocation at `req.address`, its owner passing the guard: exit 3 if there is none,
/// exit 4 naming the holder if it does not pass.
fn held_at(store: &dyn Store, req: &SetRequest) -> Result<AllocationManifest> {
    let ns = req.pool.namespace.as_ref();
    let name = allocation_name(&req.pool.name, req.address);
    let held = match read_allocation(store, ns, &name)? {
        None => {
            return Err(Error::NotFound {
                message: format!("{} in pool `{}` is not allocated", req.address, req.pool),
                hint: None,
            });
        }
        Some(Err(why)) => {
            return Err(Error::Corrupt {
                path: store
                    .locate(crate::store::ObjectKind::Allocation, ns, &name)
                    .into(),
                message: why,
            });
        }
        Some(Ok(m)) => m,
    };
    let holder = &held.spec.owner;
    if OwnerFilter::exactly(&req.owner).matches(holder) {
        return Ok(held);
    }
    // The same name with another uid: say so, or the message reads "`X`, not `X`".
    let same_name = holder.to_string() == req.owner.to_string();
    let named = |o: &Owner| match (same_name, o.uid()) {
        (false, _) => format!("`{o}`"),
        (true, Some(uid)) => format!("`{o}` (uid {uid})"),
        (true, None) => format!("`{o}` (no uid)"),
    };
    Err(Error::conflict(format!(
        "{} in pool `{}` is held by {}, not {}; its MAC is left as it is",
        req.address,
        req.pool,
        named(holder),
        named(&req.owner)
    )))
}

/// Gives back the MACs of the allocations `done` changed, last first. An allocation whose
/// old MAC cannot be given back (another NIC took it meanwhile) leaves the NIC with two
/// MACs: exit 4 saying so, and how to finish.
fn undo(
    store: &dyn Store,
    ns: Option<&Namespace>,
    done: &[(PoolRef, AllocationManifest, AllocationManifest)],
) -> Result<()> {
    for (pool, before, after) in done.iter().rev() {
        match store.set_mac(ns, after, before)? {
            MacChange::Changed => {}
            MacChange::Moved | MacChange::MacHeld(_) => {
                return Err(Error::conflict(format!(
                    "the MAC of {} in pool `{pool}` could not be given back after a later pool refused the new one: the NIC is left with two MACs (`ipamctl check` names them); run the same `mac set` with a MAC free in every pool",
                    before.spec.address
                )));
            }
        }
    }
    Ok(())
}
