//! An owner is one identity: an owner's name (`KIND/NAME`, every kind but `VPC`) held in a
//! pool under a uid is that owner, and a request for the name without its uid, or with
//! another uid (or with a uid where it is held without one), is refused: exit 4 naming the
//! holder's address and uid, with a hint that is a command that works. Never a second
//! address for one NIC that forgot its uid.
//!
//! Why a refusal and not the holder's address: a uid is the incarnation of a name, as in
//! Kubernetes, where a request whose uid precondition does not match is `409 Conflict` and
//! two objects of one name never exist at once. A request without a uid may be the same
//! NIC that forgot it, or a VM made again under the old name while the old one still holds
//! its address; answering it the old address would give one address to two machines in the
//! second case, so the caller says which (`--uid`), or releases the old one first. A `VPC`
//! is exempt: its name is always `router`, and its uid (the VPC's) is what tells the
//! uplinks of a shared public pool apart.
//!
//! A tenant's floating IP carries its tenant in its name (`FloatingIP/<tenant>/<name>`,
//! [`crate::model::tenant`]), so two tenants who name a floating IP alike hold two names:
//! neither is the other's namesake, waits on its lock or is refused because of it.
//!
//! Selecting by name is another matter: `release`, `list` and `mac set` take `--owner` as a
//! filter (without `--uid`, any uid), as `kubectl delete` takes a name: one name is one
//! owner in a pool, so the filter selects one allocation there.
//!
//! Who keeps it: every claim's look-up ([`crate::store::Queries::find_owner`] answers
//! [`crate::store::OwnerLookup::namesake`]) and the claim itself
//! ([`crate::store::Claim::NameHeld`]), so `allocate` in every form (one pool, several,
//! `--zone`, the batch) refuses through [`holds_the_name`]; requests for one name race
//! safely because the file store's owner lock is the name's
//! ([`crate::model::Owner::lock_key`]) and PostgreSQL's unique index on the name is the
//! arbiter (migration 12); `import` meets the same index, and refuses a state directory
//! `check` finds it in. `check` reports what a hand edit or a merge can still make
//! (`check/identity.rs`).

use crate::engine::hint;
use crate::error::Error;
use crate::model::{AllocationManifest, Owner, PoolRef};

/// The exit-4 refusal of a request for `asked` in `pool`, whose name `holder` holds under
/// another identity ([`Owner::is_namesake`]). The hint is a command that works: the same
/// claim under the holder's uid (when `asked` has none and the holder's uid is one a
/// request can give), else the release of the holder's address guarded by its owner.
pub fn holds_the_name(pool: &PoolRef, asked: &Owner, holder: &AllocationManifest) -> Error {
    let held = &holder.spec.owner;
    let address = holder.spec.address;
    let release = hint::release(pool, address, held);
    let (message, hint) = match (held.uid(), asked.uid()) {
        (Some(uid), None) => (
            format!(
                "owner `{held}` holds {address} in pool `{pool}` under uid {uid}; asked for without `--uid` it is another owner, and an owner's name is one identity per pool"
            ),
            match hint::allocate(pool, held) {
                Some(again) => format!("if it is the same NIC, ask with its uid: {again}"),
                None => format!("if that owner is gone, release its address first: {release}"),
            },
        ),
        (Some(uid), Some(other)) => (
            format!(
                "owner `{held}` holds {address} in pool `{pool}` under uid {uid}, not uid {other}; an owner's name is one identity per pool"
            ),
            format!("if the owner with uid {uid} is gone, release its address first: {release}"),
        ),
        (None, asked_uid) => {
            let asked_uid = asked_uid.map_or("?", |u| u.as_str());
            (
                format!(
                    "owner `{held}` holds {address} in pool `{pool}` without a uid, not under uid {asked_uid}; an owner's name is one identity per pool"
                ),
                format!("to hold it under uid {asked_uid}, release it and ask again: {release}"),
            )
        }
    };
    Error::Conflict {
        message,
        hint: Some(hint),
    }
}
