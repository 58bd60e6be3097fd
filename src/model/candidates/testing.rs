//! Builders shared by the unit tests of the modules that reason about pools.

use std::net::IpAddr;

use crate::model::PoolSpec;

/// A public pool's spec.
pub fn spec(cidr: &str, gateway: Option<&str>, exclude: &[&str]) -> PoolSpec {
    let json = serde_json::json!({
        "cidr": cidr, "kind": "public", "gateway": gateway, "exclude": exclude,
    });
    serde_json::from_value(json).unwrap()
}

/// Parsed addresses.
pub fn addrs(list: &[&str]) -> Vec<IpAddr> {
    list.iter().map(|a| a.parse().unwrap()).collect()
}
