//! `vpc create --mac-prefix`: the `spec.macPrefix`es asked for the VPC's pools, checked
//! against each other and against the pools of a VPC that exists.

use crate::engine::vpc::CreateRequest;
use crate::error::{Error, Result};
use crate::model::mac::MacPrefix;
use crate::model::{PoolManifest, PoolRef};

/// Exit 2 for more `--mac-prefix`es than pools, or for a dual-stack VPC's two alike: a
/// dual-stack owner's `--mac auto` MAC is derived from its IPv4 address and also held in
/// the IPv6 pool, where, under the same prefix, an IPv6-only owner's could be derived alike.
pub(super) fn check_mac_prefixes(req: &CreateRequest) -> Result<()> {
    let (given, pools) = (req.mac_prefixes.len(), req.pools.len());
    if given > pools {
        return Err(Error::invalid(
            "--mac-prefix",
            format!("give at most one per pool of the VPC, IPv4's first ({given} for {pools})"),
        ));
    }
    if let [v4, v6] = req.mac_prefixes.as_slice()
        && v4 == v6
    {
        return Err(Error::invalid(
            "--mac-prefix",
            format!(
                "give the IPv4 and IPv6 pools different prefixes, not {v4} twice: a dual-stack NIC's `--mac auto` MAC, derived from its IPv4 address, is held in the IPv6 pool too"
            ),
        ));
    }
    Ok(())
}

/// Exit 4 when the VPC's existing pool `m` has another `spec.macPrefix` than the one asked
/// for (none asked for agrees with any: a retry without the flag finds the VPC it made).
pub(super) fn same_mac_prefix(
    req: &CreateRequest,
    pool: &PoolRef,
    m: &PoolManifest,
    asked: Option<&MacPrefix>,
) -> Result<()> {
    match (asked, m.spec.mac_prefix) {
        (Some(asked), has) if has != Some(*asked) => Err(Error::Conflict {
            message: format!(
                "VPC `{}` already exists in namespace `{}` and its pool `{pool}` has {}, not macPrefix {asked}",
                req.name,
                req.namespace,
                has.map_or("no macPrefix".to_owned(), |p| format!("macPrefix {p}")),
            ),
            hint: Some(
                "create the VPC without `--mac-prefix` to keep the pool as it is, or edit its `spec.macPrefix` and `ipamctl apply -f FILE`".into(),
            ),
        }),
        _ => Ok(()),
    }
}
