//! `spec.dhcp` of a pool or a subnet: what a DHCP server tells a guest besides its address,
//! router and host name (DNS servers, domain, lease time, MTU, NTP servers, extra routes),
//! and the one place their rules live. A pool's options are the default of its subnets; a
//! subnet's own fields replace the pool's field by field ([`DhcpOptions::over`]).
//!
//! The rules follow what the protocols can carry: DHCPv6 has no MTU and no route option
//! (routers announce both in their advertisements), so an IPv6 range takes neither.

use std::collections::BTreeSet;
use std::net::IpAddr;
use std::time::Duration;

use ipnet::IpNet;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::model::address::{family_name, serde_ip};
use crate::model::names::check_label;

/// The most DNS or NTP servers one list may name (eight IPv6 addresses fill half a DHCP
/// option; no resolver library reads more than a few).
const MOST_SERVERS: usize = 8;
/// The most extra routes (with the default route, 17 RFC 3442 entries of at most 9 bytes fit
/// comfortably in the 255 bytes of one option).
const MOST_ROUTES: usize = 16;
/// The shortest lease: dnsmasq raises anything shorter to two minutes.
const SHORTEST_LEASE: Duration = Duration::from_secs(120);
/// The longest lease: a year (a longer one is a typo, not a policy).
const LONGEST_LEASE: Duration = Duration::from_secs(366 * 24 * 3600);

/// `spec.dhcp`: every field optional; an empty one is left out of the manifest.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct DhcpOptions {
    /// Recursive DNS servers, in order of preference, of the range's family (Kea
    /// `domain-name-servers`/`dns-servers`, dnsmasq `dns-server`).
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        with = "serde_ip::addrs"
    )]
    #[schemars(schema_with = "crate::model::schema::fields::addresses")]
    pub dns_servers: Vec<IpAddr>,
    /// The guest's domain (IPv4 `domain-name`; IPv6 `domain-search`): lowercase RFC 1123
    /// labels joined by dots, no trailing dot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::model::schema::fields::domain")]
    pub domain: Option<String>,
    /// How long a lease lasts (`12h`, `30m`, `1d`): two minutes to a year. None: the
    /// server's default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::model::schema::fields::duration")]
    pub lease_time: Option<LeaseTime>,
    /// The interface MTU (IPv4 only: 68 to 65535).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 68, max = 65535))]
    pub mtu: Option<u16>,
    /// NTP servers (IPv4 `ntp-servers`; IPv6 `sntp-servers`), of the range's family.
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        with = "serde_ip::addrs"
    )]
    #[schemars(schema_with = "crate::model::schema::fields::addresses")]
    pub ntp_servers: Vec<IpAddr>,
    /// Extra routes, sent as classless static routes (RFC 3442, IPv4 only) after the
    /// default route via the gateway.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub routes: Vec<Route>,
}

/// One extra route: the prefix `to` is reached through the router `via`, an address of the
/// range the options are served on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Route {
    /// The destination prefix (no host bits; `0.0.0.0/0` replaces the default route).
    #[serde(with = "serde_ip::net")]
    #[schemars(schema_with = "crate::model::schema::fields::cidr")]
    pub to: IpNet,
    /// The router, inside the range.
    #[serde(with = "serde_ip::addr")]
    #[schemars(schema_with = "crate::model::schema::fields::address")]
    pub via: IpAddr,
}

impl DhcpOptions {
    /// Whether no field is set (then `spec.dhcp` is left out).
    pub fn is_empty(&self) -> bool {
        *self == DhcpOptions::default()
    }

    /// These options over `default` (a pool's): each field set here replaces the default's.
    pub fn over(&self, default: &DhcpOptions) -> DhcpOptions {
        fn list<T: Clone>(own: &[T], default: &[T]) -> Vec<T> {
            if own.is_empty() { default } else { own }.to_vec()
        }
        DhcpOptions {
            dns_servers: list(&self.dns_servers, &default.dns_servers),
            domain: self.domain.clone().or_else(|| default.domain.clone()),
            lease_time: self
                .lease_time
                .clone()
                .or_else(|| default.lease_time.clone()),
            mtu: self.mtu.or(default.mtu),
            ntp_servers: list(&self.ntp_servers, &default.ntp_servers),
            routes: list(&self.routes, &default.routes),
        }
    }

    /// Each field as (`dhcp.<field>`, its value as written, `-` when unset), in manifest
    /// order: how `diff` names what changed.
    pub fn fields(&self) -> Vec<(&'static str, String)> {
        let list = |a: &[IpAddr]| {
            let all: Vec<String> = a.iter().map(IpAddr::to_string).collect();
            format!("[{}]", all.join(", "))
        };
        let routes: Vec<String> = self
            .routes
            .iter()
            .map(|r| format!("{} via {}", r.to, r.via))
            .collect();
        vec![
            ("dhcp.dnsServers", list(&self.dns_servers)),
            (
                "dhcp.domain",
                self.domain.clone().unwrap_or_else(|| "-".into()),
            ),
            (
                "dhcp.leaseTime",
                self.lease_time
                    .as_ref()
                    .map_or("-".into(), |l| l.to_string()),
            ),
            ("dhcp.mtu", self.mtu.map_or("-".into(), |m| m.to_string())),
            ("dhcp.ntpServers", list(&self.ntp_servers)),
            ("dhcp.routes", format!("[{}]", routes.join(", "))),
        ]
    }

    /// Checks the options of a range `cidr` (the pool's or subnet's); each message names
    /// the field (`spec.dhcp.mtu: …`) and the value.
    pub fn validate(&self, cidr: IpNet) -> Result<(), String> {
        servers("dnsServers", &self.dns_servers, cidr)?;
        servers("ntpServers", &self.ntp_servers, cidr)?;
        if let Some(domain) = &self.domain {
            check_domain(domain).map_err(|why| format!("spec.dhcp.domain: `{domain}`: {why}"))?;
        }
        let v6 = cidr.addr().is_ipv6();
        match self.mtu {
            Some(_) if v6 => {
                return Err("spec.dhcp.mtu: DHCPv6 has no MTU option (routers announce it in their advertisements); remove it".into());
            }
            Some(mtu) if mtu < 68 => {
                return Err(format!(
                    "spec.dhcp.mtu: {mtu} is out of range; an IPv4 MTU is 68 to 65535"
                ));
            }
            _ => {}
        }
        if v6 && !self.routes.is_empty() {
            return Err("spec.dhcp.routes: DHCPv6 has no route option (routers announce routes in their advertisements); remove them".into());
        }
        if self.routes.len() > MOST_ROUTES {
            return Err(format!(
                "spec.dhcp.routes: {} routes; at most {MOST_ROUTES} fit in one DHCP option",
                self.routes.len()
            ));
        }
        let mut seen = BTreeSet::new();
        for r in &self.routes {
            if !seen.insert(r.to) {
                return Err(format!("spec.dhcp.routes: `{}` is given twice", r.to));
            }
        }
        self.check_routes(cidr)
            .map_err(|why| format!("spec.dhcp.routes: {why}"))
    }

    /// Every route's destination is of `cidr`'s family and its router inside `cidr`: what a
    /// subnet must also hold of the routes it inherits from its pool.
    pub fn check_routes(&self, cidr: IpNet) -> Result<(), String> {
        for r in &self.routes {
            if r.to.addr().is_ipv4() != cidr.addr().is_ipv4() {
                return Err(format!(
                    "`{}` is an {} prefix but the range `{cidr}` is {}",
                    r.to,
                    family_name(r.to.addr()),
                    family_name(cidr.addr())
                ));
            }
            if !cidr.contains(&r.via) {
                return Err(format!("via `{}` is outside `{cidr}`", r.via));
            }
        }
        Ok(())
    }
}

/// A list of servers: at most [`MOST_SERVERS`], each once, unicast, of `cidr`'s family.
fn servers(field: &str, list: &[IpAddr], cidr: IpNet) -> Result<(), String> {
    if list.len() > MOST_SERVERS {
        return Err(format!(
            "spec.dhcp.{field}: {} servers; at most {MOST_SERVERS} are allowed",
            list.len()
        ));
    }
    let mut seen = BTreeSet::new();
    for &a in list {
        if a.is_ipv4() != cidr.addr().is_ipv4() {
            return Err(format!(
                "spec.dhcp.{field}: `{a}` is an {} address but the range `{cidr}` is {}",
                family_name(a),
                family_name(cidr.addr())
            ));
        }
        let broadcast = matches!(a, IpAddr::V4(v4) if v4.is_broadcast());
        if a.is_multicast() || a.is_unspecified() || broadcast {
            let what = if a.is_multicast() {
                "a multicast address"
            } else if broadcast {
                "the broadcast address"
            } else {
                "the unspecified address"
            };
            return Err(format!("spec.dhcp.{field}: `{a}` is {what}"));
        }
        if !seen.insert(a) {
            return Err(format!("spec.dhcp.{field}: `{a}` is given twice"));
        }
    }
    Ok(())
}

/// A DNS name as a DHCP option and a zone file take it: lowercase RFC 1123 labels joined by
/// dots, at most 253 characters, no trailing dot.
fn check_domain(domain: &str) -> Result<(), String> {
    if domain.len() > 253 {
        return Err(format!(
            "is {} characters long; at most 253 are allowed",
            domain.len()
        ));
    }
    for label in domain.split('.') {
        check_label(label).map_err(|why| {
            if label.is_empty() {
                "has an empty label (two dots, or a dot at an end)".to_owned()
            } else {
                format!("label `{}` {why}", label.escape_debug())
            }
        })?;
    }
    Ok(())
}

/// `spec.dhcp.leaseTime`: a duration as written (`12h`, `1h 30m`), kept as written so the
/// manifest round-trips byte for byte; whole seconds, two minutes to a year.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct LeaseTime {
    text: String,
    seconds: u32,
}

impl LeaseTime {
    /// Parses a duration as `humantime` reads it.
    pub fn new(text: &str) -> Result<LeaseTime, String> {
        let duration = humantime::parse_duration(text).map_err(|e| {
            format!(
                "spec.dhcp.leaseTime: `{}` is not a duration like `12h`, `30m` or `1d` ({e})",
                text.escape_debug()
            )
        })?;
        if !(SHORTEST_LEASE..=LONGEST_LEASE).contains(&duration) || duration.subsec_nanos() != 0 {
            return Err(format!(
                "spec.dhcp.leaseTime: `{text}` must be at least 2 minutes and at most a year, in whole seconds"
            ));
        }
        Ok(LeaseTime {
            text: text.to_owned(),
            seconds: u32::try_from(duration.as_secs()).expect("a year fits in 32 bits"),
        })
    }

    /// The lease in seconds.
    pub fn seconds(&self) -> u32 {
        self.seconds
    }
}

impl std::fmt::Display for LeaseTime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

impl TryFrom<String> for LeaseTime {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        LeaseTime::new(&s)
    }
}

impl From<LeaseTime> for String {
    fn from(l: LeaseTime) -> String {
        l.text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn net(s: &str) -> IpNet {
        s.parse().unwrap()
    }

    #[test]
    fn a_subnets_fields_replace_its_pools_one_by_one() {
        let pool = DhcpOptions {
            dns_servers: vec!["192.0.2.53".parse().unwrap()],
            domain: Some("lab.example".into()),
            mtu: Some(1400),
            ..DhcpOptions::default()
        };
        let subnet = DhcpOptions {
            domain: Some("web.lab.example".into()),
            ..DhcpOptions::default()
        };
        let merged = subnet.over(&pool);
        assert_eq!(merged.domain.as_deref(), Some("web.lab.example"));
        assert_eq!(merged.dns_servers, pool.dns_servers);
        assert_eq!(merged.mtu, Some(1400));
        assert!(
            DhcpOptions::default()
                .over(&DhcpOptions::default())
                .is_empty()
        );
    }

    #[test]
    fn domains_are_dot_joined_labels() {
        assert!(check_domain("lab.example").is_ok());
        assert!(check_domain("lab..example").is_err());
        assert!(check_domain("lab.example.").is_err());
        assert!(check_domain("Lab.example").is_err());
        assert!(check_domain(&["a"; 127].join(".")).is_ok());
        assert!(check_domain(&["a"; 128].join(".")).is_err());
    }

    #[test]
    fn lease_times_are_bounded_whole_seconds() {
        assert_eq!(LeaseTime::new("2m").unwrap().seconds(), 120);
        assert_eq!(LeaseTime::new("1h 30m").unwrap().seconds(), 5400);
        assert!(LeaseTime::new("119s").is_err());
        assert!(LeaseTime::new("367d").is_err());
        assert!(LeaseTime::new("1.5s").is_err());
        assert!(LeaseTime::new("soon").is_err());
    }

    #[test]
    fn ipv6_takes_neither_mtu_nor_routes() {
        let v6 = net("2001:db8::/64");
        let mtu = DhcpOptions {
            mtu: Some(1500),
            ..DhcpOptions::default()
        };
        assert!(mtu.validate(v6).is_err());
        assert!(mtu.validate(net("192.0.2.0/24")).is_ok());
    }
}
