//! MACs on NICs (`spec.mac`): which MAC a request means (`--mac MAC` or `--mac auto`), the
//! rules a claim keeps (a NIC's owner only; the same owner asking again with another MAC is
//! a conflict), and `ipamctl mac set` ([`set`]), the one guarded command that changes a
//! NIC's MAC, in every pool the NIC holds.
//!
//! "A MAC is held at most once per pool" is the store's: the claim's arbiter
//! ([`crate::store::Claims::claim`] answers [`crate::store::Claim::MacHeld`]), a MAC record
//! on the file store and a unique index on PostgreSQL; `check` reports what a hand edit or
//! a merge can still do.

use std::net::IpAddr;

use crate::error::{Error, Result};
use crate::model::mac::{Mac, MacPrefix};
use crate::model::{AllocationManifest, Owner, PoolManifest, PoolRef};
use crate::store::Store;

mod set;
pub use set::{MacSet, SetInput, SetRequest, set};

/// What `--mac` asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MacChoice {
    /// This MAC.
    Given(Mac),
    /// The one [`Mac::derive`] gives the address under the pool's `spec.macPrefix`.
    Auto,
    /// `Auto` in a pool with this `spec.macPrefix` ([`for_pool`]).
    Derived(MacPrefix),
}

impl MacChoice {
    /// `auto`, or a MAC in any spelling [`Mac::parse`] takes.
    pub fn parse(s: &str) -> std::result::Result<MacChoice, String> {
        if s == "auto" {
            Ok(MacChoice::Auto)
        } else {
            Mac::parse(s).map(MacChoice::Given)
        }
    }
}

/// Exit 2 unless `owner` has a NIC (`VirtualMachine`, `Node`).
pub fn refuse_without_nic(owner: &Owner) -> Result<()> {
    if owner.kind().has_nic() {
        return Ok(());
    }
    Err(Error::invalid(
        "--mac",
        format!(
            "owner `{owner}` is a {} and has no NIC; a MAC is for `VirtualMachine` and `Node` owners",
            owner.kind()
        ),
    ))
}

/// Exit 2 when `choice` is `auto` and `spec` has no `macPrefix`.
fn refuse_auto_without_prefix(
    choice: MacChoice,
    spec: &PoolManifest,
    pool: &PoolRef,
) -> Result<()> {
    if choice == MacChoice::Auto && spec.spec.mac_prefix.is_none() {
        return Err(Error::invalid(
            "--mac",
            format!(
                "`--mac auto` derives a MAC from pool `{pool}`'s spec.macPrefix, and it has none; add one (e.g. `macPrefix: '52:54:00'`) with `ipamctl apply`, or give the MAC"
            ),
        ));
    }
    Ok(())
}

/// The MAC a later pool of a dual-stack request asks for, once the first pool's allocation
/// holds `first`: `--mac auto` is derived from the first pool's address, and that one MAC
/// goes on every allocation of the request (a given MAC is the same everywhere anyway).
pub fn carried(choice: Option<MacChoice>, first: Option<Mac>) -> Option<MacChoice> {
    match (choice, first) {
        (Some(MacChoice::Auto), Some(first)) => Some(MacChoice::Given(first)),
        (choice, _) => choice,
    }
}

/// `choice` for the pool `spec`: `auto` as [`MacChoice::Derived`] from its `macPrefix`
/// (exit 2 without one). A given MAC is exit 2 when it lies in the pool's `macPrefix` and
/// is not the one `auto` derives for an address `owner` holds in the pool's scope (`at`, or
/// any it holds already: a dual-stack NIC's first pool's): that block is `auto`'s, since a
/// MAC given from it would take the MAC auto derives for another address (unique by
/// construction, auto promises), and `check` tells an auto MAC by its prefix.
pub fn for_pool(
    store: &dyn Store,
    choice: MacChoice,
    spec: &PoolManifest,
    pool: &PoolRef,
    owner: &Owner,
    at: Option<IpAddr>,
) -> Result<MacChoice> {
    refuse_auto_without_prefix(choice, spec, pool)?;
    let (mac, prefix) = match (choice, spec.spec.mac_prefix) {
        (MacChoice::Auto, Some(prefix)) => return Ok(MacChoice::Derived(prefix)),
        (MacChoice::Given(mac), Some(prefix)) => (mac, prefix),
        (other, _) => return Ok(other),
    };
    if !mac.has_prefix(prefix) || at.is_some_and(|a| Mac::derive(prefix, a) == mac) {
        return Ok(choice);
    }
    let held = store.find_allocations(
        pool.namespace.as_ref(),
        None,
        &crate::model::OwnerFilter::exactly(owner),
    )?;
    let derived = held.iter().any(|f| {
        f.parsed
            .as_ref()
            .is_ok_and(|m| m.spec.owner == *owner && Mac::derive(prefix, m.spec.address) == mac)
    });
    if derived {
        return Ok(choice);
    }
    Err(Error::invalid(
        "--mac",
        format!(
            "MAC {mac} lies in pool `{pool}`'s macPrefix {prefix}, which `--mac auto` keeps for the MACs it derives from addresses; use `--mac auto`, or a MAC outside {prefix}"
        ),
    ))
}

/// The MAC `choice` means for `address`; `None` for an `Auto` not yet made concrete by
/// [`for_pool`].
pub fn resolve(choice: MacChoice, address: IpAddr) -> Option<Mac> {
    match choice {
        MacChoice::Given(mac) => Some(mac),
        MacChoice::Derived(prefix) => Some(Mac::derive(prefix, address)),
        MacChoice::Auto => None,
    }
}

/// Exit 4 when the owner's allocation `held` does not hold the MAC asked for (`choice`, at
/// its address); the hint is the command that changes it. With `repair` (the claim's locks
/// held), the store's arbiter is made to hold `held`'s MAC for it
/// ([`crate::store::Claims::claim_mac`]): exit 4 naming the other holder if it cannot.
pub fn check_held(
    store: &dyn Store,
    held: &AllocationManifest,
    choice: Option<MacChoice>,
    pool: &PoolRef,
    repair: bool,
) -> Result<()> {
    if repair
        && held.spec.mac.is_some()
        && let Some(other) = store.claim_mac(pool.namespace.as_ref(), held)?
    {
        return Err(held_by(&other, pool));
    }
    let Some(wanted) = choice.and_then(|c| resolve(c, held.spec.address)) else {
        return Ok(());
    };
    if held.spec.mac == Some(wanted) {
        return Ok(());
    }
    let has = held
        .spec
        .mac
        .map_or("no MAC".to_owned(), |m| format!("MAC {m}"));
    Err(Error::Conflict {
        message: format!(
            "owner `{}` already holds {} in pool `{pool}` with {has}, not {wanted}",
            held.spec.owner, held.spec.address
        ),
        hint: Some(format!(
            "to give its NIC the new MAC (it keeps its address): {}",
            crate::engine::hint::mac_set(
                pool,
                held.spec.address,
                &held.spec.owner,
                &wanted.to_string()
            )
        )),
    })
}

/// The exit-4 error of a MAC another allocation of the pool holds.
pub fn held_by(holder: &AllocationManifest, pool: &PoolRef) -> Error {
    Error::conflict(format!(
        "MAC {} is held in pool `{pool}` by `{}` ({}); a MAC names one NIC per pool",
        holder
            .spec
            .mac
            .map_or_else(|| "?".to_owned(), |m| m.to_string()),
        holder.spec.owner,
        holder.spec.address
    ))
}

/// `check --fix` of an allocation whose MAC has no record on the file store: makes it, under
/// the owner's claim lock, if the allocation is still `held` and no other allocation of the
/// pool holds the MAC ([`crate::store::Claims::claim_mac`]). `false`: nothing was made (the
/// allocation changed meanwhile, or the MAC is held twice, which `check` reports).
pub fn restore_record(
    store: &dyn Store,
    ns: Option<&crate::model::Namespace>,
    held: &AllocationManifest,
) -> Result<bool> {
    if_unchanged(store, ns, held, || Ok(store.claim_mac(ns, held)?.is_none()))
}

/// `check --fix` of a MAC held by two allocations of a pool on the file store (a claim
/// killed after an outside writer deleted or replaced its record, the one window
/// `store::fs::macs` leaves; a hand edit; a merge of two clones): removes the MAC from
/// `other`, under its owner's claim lock, if the allocation is still `other`. The owner
/// keeps its address; its NIC has no MAC in the pool until `mac set` gives it one. `false`:
/// nothing was changed (`other`, or the `keeper` that keeps the MAC, changed meanwhile:
/// `check` judges them anew).
pub fn settle(
    store: &dyn Store,
    ns: Option<&crate::model::Namespace>,
    keeper: &AllocationManifest,
    other: &AllocationManifest,
) -> Result<bool> {
    if_unchanged(store, ns, other, || {
        // Still held twice: the keeper still holds the MAC as read (else a release or a `mac
        // set` made `other` the only holder, and it keeps it).
        match crate::store::read::read_allocation(store, ns, &keeper.metadata.name)? {
            Some(Ok(now)) if now == *keeper => {}
            _ => return Ok(false),
        }
        let mut without = other.clone();
        without.spec.mac = None;
        Ok(matches!(
            store.set_mac(ns, other, &without)?,
            crate::store::MacChange::Changed
        ))
    })
}

/// Runs `fix` under the owner's claim lock in `read`'s pool if the allocation is still as
/// `check` read it; `false` without running it if it changed meanwhile.
fn if_unchanged(
    store: &dyn Store,
    ns: Option<&crate::model::Namespace>,
    read: &AllocationManifest,
    fix: impl Fn() -> Result<bool>,
) -> Result<bool> {
    let pools = std::slice::from_ref(&read.spec.pool);
    crate::store::atomically(store, || {
        let _locks = store.lock_claim(ns, pools, &read.spec.owner)?;
        match crate::store::read::read_allocation(store, ns, &read.metadata.name)? {
            Some(Ok(now)) if now == *read => fix(),
            _ => Ok(false),
        }
    })
}
