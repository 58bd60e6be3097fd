//! MACs on NICs (`spec.mac`): which MAC a request means (`--mac MAC` or `--mac auto`), the
//! rules a claim keeps (a NIC's owner only; the same owner asking again with another MAC is
//! a conflict), and `ipamctl mac set`, the one guarded command that changes a NIC's MAC.
//!
//! "A MAC is held at most once per pool" is the store's: the claim's arbiter
//! ([`crate::store::Claims::claim`] answers [`crate::store::Claim::MacHeld`]), a MAC record
//! on the file store and a unique index on PostgreSQL; `check` reports what a hand edit or
//! a merge can still do.

use std::net::IpAddr;

use crate::error::{Error, Result};
use crate::model::mac::{Mac, MacPrefix};
use crate::model::{AllocationManifest, Owner, PoolManifest, PoolRef, allocation_name};
use crate::store::read::{load_pool, read_allocation};
use crate::store::{self, MacChange, Store};

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

/// The command that changes the MAC of `held`, for hints.
pub fn set_command(held: &AllocationManifest, pool: &PoolRef, mac: &str) -> String {
    let owner = &held.spec.owner;
    format!(
        "ipamctl mac set {} {} --owner {}/{}{}{} --mac {mac}",
        pool.name,
        held.spec.address,
        owner.kind(),
        owner.name(),
        owner
            .uid()
            .map(|u| format!(" --uid {}", u.as_str()))
            .unwrap_or_default(),
        pool.namespace
            .as_ref()
            .map(|n| format!(" -n {n}"))
            .unwrap_or_default(),
    )
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
            set_command(held, pool, &wanted.to_string())
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

/// `ipamctl mac set`: give the NIC holding `address` in `pool` a new MAC.
#[derive(Clone, Debug)]
pub struct SetRequest {
    /// The pool.
    pub pool: PoolRef,
    /// The address the NIC holds (it keeps it).
    pub address: IpAddr,
    /// The owner that must hold it (the guard, as `release`'s).
    pub owner: Owner,
    /// The new MAC.
    pub mac: MacChoice,
}

/// What `mac set` did: the allocation before and after.
#[derive(Clone, Debug)]
pub struct MacSet {
    /// As it was.
    pub before: AllocationManifest,
    /// As it is now (equal to `before` when it already held the MAC).
    pub after: AllocationManifest,
}

/// Changes the MAC of `req.owner`'s allocation at `req.address`, guarded like a release:
/// exit 3 when nobody holds the address, exit 4 when another owner does (naming it) or
/// another allocation of the pool holds the new MAC. Under the owner's claim lock, so no
/// claim or release of the owner runs beside it; the store arbitrates the new MAC as a
/// claim's.
pub fn set(store: &dyn Store, req: &SetRequest) -> Result<MacSet> {
    refuse_without_nic(&req.owner)?;
    let ns = req.pool.namespace.as_ref();
    let pools = std::slice::from_ref(&req.pool.name);
    store::atomically(store, || {
        let _locks = store.lock_claim(ns, pools, &req.owner)?;
        let spec = load_pool(store, &req.pool)?;
        let choice = for_pool(
            store,
            req.mac,
            &spec,
            &req.pool,
            &req.owner,
            Some(req.address),
        )?;
        let mac = resolve(choice, req.address).expect("made concrete for the pool");
        let name = allocation_name(&req.pool.name, req.address);
        let before = match read_allocation(store, ns, &name)? {
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
        if before.spec.owner != req.owner {
            // The same name with another uid: say so, or the message reads "`X`, not `X`".
            let same_name = before.spec.owner.to_string() == req.owner.to_string();
            let named = |o: &crate::model::Owner| match (same_name, o.uid()) {
                (false, _) => format!("`{o}`"),
                (true, Some(uid)) => format!("`{o}` (uid {uid})"),
                (true, None) => format!("`{o}` (no uid)"),
            };
            return Err(Error::conflict(format!(
                "{} in pool `{}` is held by {}, not {}; its MAC is left as it is",
                req.address,
                req.pool,
                named(&before.spec.owner),
                named(&req.owner)
            )));
        }
        let mut after = before.clone();
        after.spec.mac = Some(mac);
        if before.spec.mac == Some(mac) {
            return Ok(MacSet { before, after });
        }
        match store.set_mac(ns, &before, &after)? {
            MacChange::Changed => Ok(MacSet { before, after }),
            MacChange::Moved => Err(Error::conflict(format!(
                "{} in pool `{}` changed while its MAC was being set; nothing was written, try again",
                req.address, req.pool
            ))),
            MacChange::MacHeld(holder) => Err(held_by(&holder, &req.pool)),
        }
    })
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
    let pools = std::slice::from_ref(&held.spec.pool);
    store::atomically(store, || {
        let _locks = store.lock_claim(ns, pools, &held.spec.owner)?;
        match read_allocation(store, ns, &held.metadata.name)? {
            Some(Ok(now)) if now == *held => Ok(store.claim_mac(ns, held)?.is_none()),
            _ => Ok(false),
        }
    })
}
