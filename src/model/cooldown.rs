//! The reuse cooldown of a pool (`spec.reuseAfter`): an address released less than that long
//! ago is not handed to another owner, while the owner that released it gets it back.
//!
//! # Records, and the order that makes the window hold
//!
//! A release in a pool with `reuseAfter` writes a `CooldownRecord` (`<scope>/cooldown/<pool>-
//! <a-b-c-d>.yaml`: the released owner and `releasedAt`) *before* it deletes the allocation,
//! so there is no instant at which the address looks free without its record; a crash in
//! between leaves the allocation held and a record that the next release replaces. Records
//! are state files like the others: committed to git, so the window travels with the state
//! directory, and copied by `export`/`import`.
//!
//! The release holds the pool's lock *exclusively* while it writes the record and deletes
//! the allocation, and every claim holds it shared from its look-up to its claim (invariant 6
//! of [`crate::engine`]): so a claim reads either the allocation or its record, never neither.
//! The claim's arbiter stays the create-only write of the allocation; a record only removes
//! candidates (or, for its own owner, puts one first).
//!
//! A supernet pool's prefixes cool the same way: a release of a prefix writes a record named
//! as its claim was, with a kind marker (`<pool>-<a-b-c-d>-<length>.prefix`, with
//! `spec.prefixLength`; see [`PREFIX_RECORD_SUFFIX`] for why the marker), under the pool's
//! exclusive lock that every prefix claim holds too (`engine::prefix`); a claim treats
//! another owner's cooling prefix as taken and tries its own first.
//!
//! A claim by owner O in a pool with `reuseAfter`:
//! 1. O's own record, if it is still in its window and its address is a candidate of the
//!    request, is tried first (by the same create-only write); the record is then removed;
//! 2. every other record still in its window removes its address from the candidates;
//! 3. a record past its window is ignored, and removed when its address is claimed.
//!
//! # Clocks
//!
//! `releasedAt` is the releasing machine's clock (UTC, milliseconds). A record dated ahead of
//! the reader's clock (a clock stepped back, or a clone on a machine whose clock runs behind)
//! keeps its address until `releasedAt + reuseAfter` by the reader's clock: never reused
//! early, at the price of a longer wait; `ipamctl check` warns about records dated ahead.

use std::net::IpAddr;
use std::time::{Duration, SystemTime};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::model::address::serde_ip;
use ipnet::IpNet;

use crate::model::allocation::allocation_name;
pub use crate::model::kind::COOLDOWN_KIND;
use crate::model::manifest::{API_VERSION, Metadata};
use crate::model::names::PoolName;
use crate::model::owner::Owner;
use crate::model::pool::PoolRef;
#[cfg(test)]
use crate::model::pool::ReuseAfter;
use crate::model::prefix_claim::{parse_prefix_claim_name, prefix_claim_name};

/// The end of a prefix record's name. Both kinds of record share the `cooldown/` directory,
/// and without it their names collide: `tenant-10-1-2-0-24` is supernet `tenant`'s
/// 10.1.2.0/24 and pool `tenant-10`'s 1.2.0.24, so the second release replaced the first
/// record (issue 31). An address record's name is a pool name (an RFC 1123 label) and an
/// address of digits, hex digits and `-`: it never holds a `.`, so no prefix record's name
/// is ever an address record's. Records written before the marker (named as the claim) are
/// still read; `ipamctl check` warns about each whose name also spells an address record.
pub const PREFIX_RECORD_SUFFIX: &str = ".prefix";

/// The name of the cooldown record of `prefix` of the supernet `pool`.
pub fn prefix_record_name(pool: &PoolName, prefix: IpNet) -> String {
    format!("{}{PREFIX_RECORD_SUFFIX}", prefix_claim_name(pool, prefix))
}

/// The pool name and prefix a prefix record's name spells, and whether it is the name used
/// before [`PREFIX_RECORD_SUFFIX`] (the claim's, without the marker).
pub fn parse_prefix_record_name(name: &str) -> Option<(&str, IpNet, bool)> {
    match name.strip_suffix(PREFIX_RECORD_SUFFIX) {
        Some(claim) => parse_prefix_claim_name(claim).map(|(p, net)| (p, net, false)),
        None => parse_prefix_claim_name(name).map(|(p, net)| (p, net, true)),
    }
}

/// `spec` of a cooldown record.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct CooldownSpec {
    /// The pool the address belongs to.
    pub pool: PoolName,
    /// The address released.
    #[serde(with = "serde_ip::addr")]
    #[schemars(with = "IpAddr")]
    pub address: IpAddr,
    /// For a prefix of a supernet pool, its length (`address` is its network address): the
    /// prefix released. Absent for an address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix_length: Option<u8>,
    /// Who held it: the one owner that may have it back within the window.
    pub owner: Owner,
    /// When it was released: RFC 3339, UTC.
    #[schemars(schema_with = "crate::model::schema::fields::released_at")]
    pub released_at: String,
}

impl CooldownSpec {
    /// The prefix released (`address/prefixLength`), for a record of a supernet's prefix;
    /// `None` for an address, or a length that makes no prefix of `address`.
    pub fn prefix(&self) -> Option<IpNet> {
        let net = IpNet::new(self.address, self.prefix_length?).ok()?;
        (net.trunc() == net).then_some(net)
    }

    /// The record's name: the allocation's for an address, the prefix claim's for a
    /// prefix; `None` for a length that makes no prefix of the address.
    fn name(&self) -> Option<String> {
        match self.prefix_length {
            None => Some(allocation_name(&self.pool, self.address)),
            Some(_) => Some(prefix_record_name(&self.pool, self.prefix()?)),
        }
    }

    /// The name a prefix's record had before [`PREFIX_RECORD_SUFFIX`]; `None` for an
    /// address's record.
    fn legacy_name(&self) -> Option<String> {
        self.prefix_length?;
        Some(prefix_claim_name(&self.pool, self.prefix()?))
    }
}

/// A `CooldownRecord`: written by `release`, never by hand.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct CooldownRecord {
    /// Always [`API_VERSION`].
    #[schemars(
        schema_with = "crate::model::schema::fields::api_version",
        description = "Always `pivirt.hu/v1`."
    )]
    pub api_version: String,
    /// Always [`COOLDOWN_KIND`].
    #[schemars(
        schema_with = "crate::model::schema::fields::cooldown_kind",
        description = "Always `CooldownRecord`."
    )]
    pub kind: String,
    /// Name `<pool>-<a-b-c-d>` (the allocation's; for a prefix, the prefix claim's followed
    /// by `.prefix`), the pool's namespace.
    #[schemars(schema_with = "crate::model::manifest::cooldown_metadata")]
    pub metadata: Metadata,
    /// Pool, address, owner, time.
    pub spec: CooldownSpec,
}

impl CooldownRecord {
    /// The record of `owner` releasing `address` of `pool` at `at`.
    pub fn new(pool: &PoolRef, address: IpAddr, owner: Owner, at: SystemTime) -> Self {
        CooldownRecord::of(pool, address, None, owner, at)
    }

    /// The record of `owner` releasing `prefix` of the supernet `pool` at `at`, named as its
    /// claim was.
    pub fn for_prefix(pool: &PoolRef, prefix: IpNet, owner: Owner, at: SystemTime) -> Self {
        CooldownRecord::of(pool, prefix.network(), Some(prefix.prefix_len()), owner, at)
    }

    fn of(
        pool: &PoolRef,
        address: IpAddr,
        prefix_length: Option<u8>,
        owner: Owner,
        at: SystemTime,
    ) -> Self {
        let spec = CooldownSpec {
            pool: pool.name.clone(),
            address,
            prefix_length,
            owner,
            released_at: humantime::format_rfc3339_millis(at).to_string(),
        };
        CooldownRecord {
            api_version: API_VERSION.into(),
            kind: COOLDOWN_KIND.into(),
            metadata: Metadata {
                name: spec.name().unwrap_or_default(),
                namespace: pool.namespace.clone(),
                labels: Default::default(),
                annotations: Default::default(),
                owner_refs: Vec::new(),
                creation_timestamp: None,
                deletion_timestamp: None,
            },
            spec,
        }
    }

    /// The prefix released, for a record of a supernet's prefix.
    pub fn prefix(&self) -> Option<IpNet> {
        self.spec.prefix()
    }

    /// Is this a prefix's record under the name it had before [`PREFIX_RECORD_SUFFIX`]?
    pub fn has_legacy_name(&self) -> bool {
        self.spec.legacy_name().as_ref() == Some(&self.metadata.name)
    }

    /// When the address was released.
    pub fn released_at(&self) -> SystemTime {
        humantime::parse_rfc3339(&self.spec.released_at).expect("validated when decoded")
    }

    /// Is the address still kept from other owners at `now`?
    pub fn cooling(&self, window: Duration, now: SystemTime) -> bool {
        // A record dated ahead of `now` cools until its own date plus the window (module docs).
        self.released_at() + window > now
    }

    /// Cross-field checks of a record read from the store.
    pub fn validate(&self) -> std::result::Result<(), String> {
        if self.api_version != API_VERSION {
            return Err(format!(
                "apiVersion: `{}` is not supported; expected `{API_VERSION}`",
                self.api_version
            ));
        }
        if self.kind != COOLDOWN_KIND {
            return Err(format!(
                "kind: expected `{COOLDOWN_KIND}`, found `{}`",
                self.kind
            ));
        }
        let Some(name) = self.spec.name() else {
            return Err(format!(
                "spec.prefixLength: /{} with {} is not a prefix",
                self.spec.prefix_length.unwrap_or_default(),
                self.spec.address
            ));
        };
        if self.metadata.name != name
            && self.spec.legacy_name().as_ref() != Some(&self.metadata.name)
        {
            return Err(format!(
                "metadata.name: `{}` does not match spec.pool and spec.address{}",
                self.metadata.name,
                if self.spec.prefix_length.is_some() {
                    " and spec.prefixLength"
                } else {
                    ""
                }
            ));
        }
        humantime::parse_rfc3339(&self.spec.released_at).map_err(|e| {
            format!(
                "spec.releasedAt: `{}` is not an RFC 3339 UTC time ({e})",
                self.spec.released_at
            )
        })?;
        Ok(())
    }
}

/// What the records of a pool say to one claim: of addresses, or (`A = IpNet`) of a
/// supernet's prefixes.
#[derive(Clone, Debug)]
pub struct Cooling<A = IpAddr> {
    /// What is kept from this owner: released by another owner within the window, or held
    /// by a record that cannot be read (kept, as a broken allocation is).
    pub blocked: Vec<A>,
    /// What this owner released within the window, if any.
    pub own: Option<A>,
    /// What a record past its window names: its record is removed when it is claimed.
    pub stale: Vec<A>,
}

impl<A> Default for Cooling<A> {
    fn default() -> Self {
        Cooling {
            blocked: Vec::new(),
            own: None,
            stale: Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_are_humane_and_bounded() {
        assert_eq!(
            ReuseAfter::new("10m").unwrap().duration(),
            Duration::from_secs(600)
        );
        assert_eq!(ReuseAfter::new("1h 30m").unwrap().to_string(), "1h 30m");
        assert!(ReuseAfter::new("0s").is_err());
        assert!(ReuseAfter::new("10").is_err());
        assert!(ReuseAfter::new("2years").is_err());
    }

    /// The collision of issue 31 (`tenant` 10.1.2.0/24 and `tenant-10` 1.2.0.24), and that
    /// no prefix record's name reads as an address record's.
    #[test]
    fn a_prefix_record_is_never_named_as_an_address_record() {
        let at = SystemTime::now();
        let owner = Owner::parse("FloatingIP/f", None).unwrap();
        let pool = |name: &str| PoolRef {
            namespace: None,
            name: PoolName::new(name).unwrap(),
        };
        let prefix = CooldownRecord::for_prefix(
            &pool("tenant"),
            "10.1.2.0/24".parse().unwrap(),
            owner.clone(),
            at,
        );
        let address =
            CooldownRecord::new(&pool("tenant-10"), "1.2.0.24".parse().unwrap(), owner, at);
        assert_eq!(address.metadata.name, "tenant-10-1-2-0-24");
        assert_eq!(prefix.metadata.name, "tenant-10-1-2-0-24.prefix");
        assert_eq!(
            crate::model::parse_allocation_name(&prefix.metadata.name),
            None
        );
        assert_eq!(
            parse_prefix_record_name(&prefix.metadata.name),
            Some(("tenant", "10.1.2.0/24".parse().unwrap(), false))
        );
        assert!(prefix.validate().is_ok() && !prefix.has_legacy_name());
    }

    #[test]
    fn a_record_dated_ahead_cools_until_its_own_date_plus_the_window() {
        let pool = PoolRef {
            namespace: None,
            name: PoolName::new("p").unwrap(),
        };
        let owner = Owner::parse("FloatingIP/f", None).unwrap();
        let now = SystemTime::now();
        let ahead = now + Duration::from_secs(3600);
        let record = CooldownRecord::new(&pool, "10.0.0.1".parse().unwrap(), owner, ahead);
        let window = Duration::from_secs(60);
        assert!(record.cooling(window, now + Duration::from_secs(3600)));
        assert!(!record.cooling(window, now + Duration::from_secs(3661)));
    }
}
