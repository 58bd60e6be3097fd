//! The commands that hints name, one builder per command: each carries what its command
//! needs to run as printed (the namespace, an owner guard with the uid that makes it the
//! same identity), so a hint is a command that works (`tests/hints.rs` runs every one the
//! suites provoke).

use std::net::IpAddr;

use crate::model::{Namespace, Owner, PoolRef};

/// ` -n NS`, or nothing for the cluster scope.
pub fn namespace_flag(ns: Option<&Namespace>) -> String {
    ns.map(|n| format!(" -n {n}")).unwrap_or_default()
}

/// ` --owner KIND/NAME`, and ` --uid UID` when the owner has a uid ipamctl takes as input
/// (a UUID). An owner whose uid is none (written by an older version) cannot be named with
/// its uid: `--owner` alone names it for a release, whose guard matches kind and name.
pub fn owner_flags(owner: &Owner) -> String {
    match owner.uid().filter(|u| u.is_uuid()) {
        Some(uid) => format!(" --owner {owner} --uid {uid}"),
        None => format!(" --owner {owner}"),
    }
}

/// The release of `owner`'s address `addr` in `pool`, guarded by its owner (a release of
/// `POOL ADDRESS` that names none is refused).
pub fn release(pool: &PoolRef, addr: IpAddr, owner: &Owner) -> String {
    format!(
        "ipamctl release {} {addr}{}{}",
        pool.name,
        namespace_flag(pool.namespace.as_ref()),
        owner_flags(owner)
    )
}

/// The claim `owner` makes (again) in `pool`; `None` when its uid cannot be given (no
/// UUID), where a claim without it would be another owner's.
pub fn allocate(pool: &PoolRef, owner: &Owner) -> Option<String> {
    if owner.uid().is_some_and(|u| !u.is_uuid()) {
        return None;
    }
    Some(format!(
        "ipamctl allocate {}{}{}",
        pool.name,
        namespace_flag(pool.namespace.as_ref()),
        owner_flags(owner)
    ))
}

/// The claim `owner` makes again in `pool` (which it holds an address of) with `--mac mac`;
/// `None` when its uid cannot be given ([`allocate`]).
pub fn allocate_again(pool: &PoolRef, owner: &Owner, mac: &str) -> Option<String> {
    allocate(pool, owner).map(|command| format!("{command} --mac {mac}"))
}

/// `mac set` of the NIC of `owner`, which holds `addr` in `pool`, to `mac` (on every
/// address the NIC holds), guarded by its owner (without a uid ipamctl takes as input, its
/// name guards: `--owner` is a filter there).
pub fn mac_set(pool: &PoolRef, addr: IpAddr, owner: &Owner, mac: &str) -> String {
    format!(
        "ipamctl mac set {} {addr}{}{} --mac {mac}",
        pool.name,
        namespace_flag(pool.namespace.as_ref()),
        owner_flags(owner)
    )
}

/// The delete of VPC `name`, whose pool is `pool`; run again, it finishes an interrupted one.
pub fn vpc_delete(name: &str, pool: &PoolRef) -> String {
    format!(
        "ipamctl vpc delete {name}{}",
        namespace_flag(pool.namespace.as_ref())
    )
}

/// The delete of `pool`; run again, it finishes an interrupted one.
pub fn pool_delete(pool: &PoolRef) -> String {
    format!(
        "ipamctl pool delete {}{}",
        pool.name,
        namespace_flag(pool.namespace.as_ref())
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{PoolName, Uid};

    #[test]
    fn an_owner_is_named_with_its_uid_only_when_the_flag_takes_it() {
        let pool = PoolRef {
            namespace: Namespace::new("acme/prod").ok(),
            name: PoolName::new("vpc-main").unwrap(),
        };
        let uuid = "0f8fad5b-d9cb-469f-a165-70867728950e";
        let owner = Owner::parse(
            "VirtualMachine/web-01/0",
            Some(Uid::parse_uuid(uuid).unwrap()),
        );
        let addr = "10.42.0.2".parse().unwrap();
        assert_eq!(
            release(&pool, addr, &owner.unwrap()),
            format!(
                "ipamctl release vpc-main 10.42.0.2 -n acme/prod --owner VirtualMachine/web-01/0 --uid {uuid}"
            )
        );
        let legacy =
            Owner::parse("VirtualMachine/web-01/0", Some(Uid::new("vm-1").unwrap())).unwrap();
        assert_eq!(
            release(&pool, addr, &legacy),
            "ipamctl release vpc-main 10.42.0.2 -n acme/prod --owner VirtualMachine/web-01/0"
        );
        assert_eq!(allocate_again(&pool, &legacy, "auto"), None);
    }
}
