//! A request's values as a user gives them (text) made typed, each refused as exit 2 naming
//! the flag it came from: the one place the command line, a batch line and (later) a
//! GraphQL input turn a pool, an owner, an address or a prefix into its model type.

use crate::engine::mac::MacChoice;
use crate::error::{Error, Result};
use crate::model::{Namespace, OwnerFilter, PoolName, PoolRef, Uid, parse_addr, parse_net};

/// Turns a validation message about a flag's value into an exit-2 error naming the flag.
pub fn flag<T>(name: &str, parsed: std::result::Result<T, String>) -> Result<T> {
    parsed.map_err(|e| Error::invalid(name, e))
}

/// `-n`, validated.
pub fn namespace(ns: Option<&str>) -> Result<Option<Namespace>> {
    ns.map(|ns| flag("--namespace", Namespace::new(ns)))
        .transpose()
}

/// The pool `pool` in scope `ns` (`-n`).
pub fn pool_ref(ns: Option<&str>, pool: &str) -> Result<PoolRef> {
    Ok(PoolRef {
        namespace: namespace(ns)?,
        name: flag("POOL", PoolName::new(pool))?,
    })
}

/// `--uid`, validated: a UUID (see [`Uid::parse_uuid`]), kept lowercase.
pub fn uid(uid: Option<&str>) -> Result<Option<Uid>> {
    uid.map(|u| flag("--uid", Uid::parse_uuid(u))).transpose()
}

/// `--owner`/`--uid` as a filter.
pub fn owner_filter(owner: Option<&str>, uid_flag: Option<&str>) -> Result<OwnerFilter> {
    flag("--owner", OwnerFilter::new(owner, uid(uid_flag)?))
}

/// An address flag or argument.
pub fn address(name: &str, s: &str) -> Result<std::net::IpAddr> {
    flag(name, parse_addr(s))
}

/// A prefix flag or argument.
pub fn prefix(name: &str, s: &str) -> Result<ipnet::IpNet> {
    flag(name, parse_net(s))
}

/// `--mac`: a MAC or `auto` (exit 2 naming the value otherwise).
pub fn mac_choice(text: &str) -> Result<MacChoice> {
    flag("--mac", MacChoice::parse(text))
}
