//! `allocate --dry-run --explain` read from the store: the pool, its subnets, the addresses
//! taken and cooling, handed to the pure [`skipped`] (why each address before the chosen
//! one was skipped), and the holders of the taken addresses on the lines shown, read one
//! by one.

pub mod skipped;

use std::net::IpAddr;

use crate::engine::allocate::{Allocated, Request};
use crate::engine::explain::skipped::DEFAULT_CAP;
use crate::error::{Error, Result};
use crate::model::allocation_name;
use crate::store::Store;
use crate::store::read::{pool_state, read_allocation};

/// The lines explaining why `allocated` came out of `req` (for stderr), or nothing to say
/// (a request that failed for another reason than exhaustion).
pub fn explain_request(
    store: &dyn Store,
    req: &Request,
    allocated: &Result<Allocated>,
) -> Result<Vec<String>> {
    let chosen = match allocated {
        Ok(Allocated::Existing(m)) => {
            return Ok(vec![format!(
                "explain: `{}` already holds {} in pool `{}`; an owner gets its address back, so no candidate is considered",
                m.spec.owner, m.spec.address, req.pool
            )]);
        }
        Ok(Allocated::Created(m) | Allocated::WouldCreate(m)) => Some(m.spec.address),
        Err(Error::Exhausted { .. }) => None,
        Err(_) => return Ok(Vec::new()),
    };
    if let (Some(addr), Some(_)) = (req.address, chosen) {
        return Ok(vec![format!(
            "explain: `--address` asks for {addr} alone, and nobody holds it"
        )]);
    }
    let (pool, taken) = pool_state(store, &req.pool)?;
    let subnets = crate::engine::subnet::of_pool(store, &req.pool)?;
    // A stored subnet narrows like `--within` its prefix; its gateway, reserved and edge
    // addresses are explained as the subnet's, as are those of every other subnet.
    let within_net = match &req.subnet {
        Some(name) => Some(
            crate::engine::subnet::load(store, req.pool.namespace.as_ref(), name)?
                .spec
                .cidr,
        ),
        None => req.within,
    };
    let within = within_net
        .map(|w| format!(", within {w}"))
        .unwrap_or_default();
    let start = crate::engine::allocate::walk_start(store, req)?;
    let order = match start {
        None => "lowest address first".to_owned(),
        Some(s) => format!(
            "pick hashed: from {s} (where `{}` starts) up, then from the lowest",
            req.owner
        ),
    };
    let mut lines = vec![format!(
        "explain: pool `{}` ({}{within}), {order}:",
        req.pool, pool.spec.cidr
    )];
    let cooling = crate::engine::cooldown::cooling(store, &req.pool, &pool, &req.owner)?.blocked;
    let input = skipped::Request {
        spec: &pool.spec,
        within: within_net,
        reserved: &req.reserved,
        taken: &taken,
        cooling: &cooling,
        subnets: &subnets,
        start: start.map(crate::model::candidates::ordinal),
    };
    let explanation = skipped::explain(&input, chosen, DEFAULT_CAP);
    lines.extend(explanation.render(&mut |addr| holder(store, req, addr)));
    Ok(lines)
}

/// Who holds `addr` in the request's pool, for a line of the explanation. Only the taken
/// addresses on the lines shown are read: at most the cap's number of files.
fn holder(store: &dyn Store, req: &Request, addr: IpAddr) -> String {
    let ns = req.pool.namespace.as_ref();
    match read_allocation(store, ns, &allocation_name(&req.pool.name, addr)) {
        Ok(Some(Ok(m))) => match m.spec.owner.uid() {
            Some(uid) => format!("`{}` (uid {uid})", m.spec.owner),
            None => format!("`{}`", m.spec.owner),
        },
        Ok(Some(Err(_))) => "an allocation file that does not parse".to_owned(),
        Ok(None) => "an allocation released since".to_owned(),
        Err(e) => format!("an allocation that cannot be read ({e})"),
    }
}
