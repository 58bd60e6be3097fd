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
use crate::model::allocation::allocation_name;
pub use crate::model::kind::COOLDOWN_KIND;
use crate::model::manifest::{API_VERSION, Metadata};
use crate::model::names::PoolName;
use crate::model::owner::Owner;
use crate::model::pool::PoolRef;
#[cfg(test)]
use crate::model::pool::ReuseAfter;

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
    /// Who held it: the one owner that may have it back within the window.
    pub owner: Owner,
    /// When it was released: RFC 3339, UTC.
    #[schemars(schema_with = "crate::model::schema::fields::released_at")]
    pub released_at: String,
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
    /// Name `<pool>-<a-b-c-d>` (the allocation's), the pool's namespace.
    #[schemars(schema_with = "crate::model::manifest::allocation_metadata")]
    pub metadata: Metadata,
    /// Pool, address, owner, time.
    pub spec: CooldownSpec,
}

impl CooldownRecord {
    /// The record of `owner` releasing `address` of `pool` at `at`.
    pub fn new(pool: &PoolRef, address: IpAddr, owner: Owner, at: SystemTime) -> Self {
        CooldownRecord {
            api_version: API_VERSION.into(),
            kind: COOLDOWN_KIND.into(),
            metadata: Metadata {
                name: allocation_name(&pool.name, address),
                namespace: pool.namespace.clone(),
                labels: Default::default(),
                annotations: Default::default(),
                owner_refs: Vec::new(),
                creation_timestamp: None,
                deletion_timestamp: None,
            },
            spec: CooldownSpec {
                pool: pool.name.clone(),
                address,
                owner,
                released_at: humantime::format_rfc3339_millis(at).to_string(),
            },
        }
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
        if self.metadata.name != allocation_name(&self.spec.pool, self.spec.address) {
            return Err(format!(
                "metadata.name: `{}` does not match spec.pool and spec.address",
                self.metadata.name
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

/// What the records of a pool say to one claim.
#[derive(Clone, Debug, Default)]
pub struct Cooling {
    /// Addresses kept from this owner: released by another owner within the window, or
    /// held by a record that cannot be read (kept, as a broken allocation is).
    pub blocked: Vec<IpAddr>,
    /// The address this owner released within the window, if any.
    pub own: Option<IpAddr>,
    /// Addresses whose record is past its window: removed when the address is claimed.
    pub stale: Vec<IpAddr>,
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
