//! The options of a segment (its router and `spec.dhcp`, [`DhcpOptions`]) as Kea and
//! dnsmasq spell them, for `dhcp export` ([`super::dhcp`]). In a fixed order, so that the
//! export changes only where the options do.
//!
//! Extra routes go out as classless static routes (RFC 3442, option 121), and a client that
//! gets option 121 ignores the router option: so the list starts with the default route via
//! the gateway, unless the routes give `0.0.0.0/0` themselves.

use std::fmt::Write as _;
use std::net::IpAddr;

use ipnet::IpNet;
use serde_json::{Value, json};

use crate::engine::segments::Segment;
use crate::model::dhcp_options::Route;

/// The routes a guest of `segment` is told, in order: the default via the gateway (unless
/// the routes replace it), then `spec.dhcp.routes`. Empty without extra routes.
fn classless_routes(segment: &Segment) -> Vec<Route> {
    let routes = &segment.options.routes;
    if routes.is_empty() {
        return Vec::new();
    }
    let default: IpNet = "0.0.0.0/0".parse().expect("a valid prefix");
    let mut all = Vec::with_capacity(routes.len() + 1);
    if let Some(via) = segment.gateway
        && !routes.iter().any(|r| r.to == default)
    {
        all.push(Route { to: default, via });
    }
    all.extend(routes.iter().copied());
    all
}

/// Option 121's value (RFC 3442 §2), in hex: per route the prefix length, the significant
/// octets of the destination, then the router.
fn rfc3442_hex(routes: &[Route]) -> String {
    let mut hex = String::new();
    for r in routes {
        let (IpNet::V4(to), IpAddr::V4(via)) = (r.to, r.via) else {
            continue; // validation keeps routes to IPv4 ranges
        };
        let len = to.prefix_len();
        let _ = write!(hex, "{len:02X}");
        for octet in &to.network().octets()[..usize::from(len).div_ceil(8)] {
            let _ = write!(hex, "{octet:02X}");
        }
        for octet in via.octets() {
            let _ = write!(hex, "{octet:02X}");
        }
    }
    hex
}

fn joined(addresses: &[IpAddr], separator: &str) -> String {
    addresses
        .iter()
        .map(IpAddr::to_string)
        .collect::<Vec<_>>()
        .join(separator)
}

/// A Kea subnet's `option-data` (`v4`: `Dhcp4`'s names, else `Dhcp6`'s).
pub(super) fn kea_option_data(segment: &Segment, v4: bool) -> Vec<Value> {
    let o = &segment.options;
    let data = |name: &str, data: String| json!({ "name": name, "data": data });
    let mut out = Vec::new();
    if v4 {
        if let Some(gw) = segment.gateway {
            out.push(data("routers", gw.to_string()));
        }
        if !o.dns_servers.is_empty() {
            out.push(data("domain-name-servers", joined(&o.dns_servers, ", ")));
        }
        if let Some(domain) = &o.domain {
            out.push(data("domain-name", domain.clone()));
        }
        if let Some(mtu) = o.mtu {
            out.push(data("interface-mtu", mtu.to_string()));
        }
        if !o.ntp_servers.is_empty() {
            out.push(data("ntp-servers", joined(&o.ntp_servers, ", ")));
        }
        let routes = classless_routes(segment);
        if !routes.is_empty() {
            // By code, in hex: Kea before 2.5.5 has no definition of option 121 (so no
            // name for it), and every Kea takes its raw bytes.
            out.push(json!({
                "code": 121,
                "space": "dhcp4",
                "csv-format": false,
                "data": rfc3442_hex(&routes),
            }));
        }
    } else {
        // DHCPv6 has no router option: routers announce themselves (RAs).
        if !o.dns_servers.is_empty() {
            out.push(data("dns-servers", joined(&o.dns_servers, ", ")));
        }
        if let Some(domain) = &o.domain {
            out.push(data("domain-search", domain.clone()));
        }
        if !o.ntp_servers.is_empty() {
            out.push(data("sntp-servers", joined(&o.ntp_servers, ", ")));
        }
    }
    out
}

/// The lifetimes a Kea subnet sets: `valid-lifetime` (and for IPv6 `preferred-lifetime`,
/// half of it, Kea's own default ratio), or none for the server's default.
pub(super) fn kea_lifetimes(segment: &Segment, v4: bool) -> Vec<(&'static str, Value)> {
    let Some(lease) = &segment.options.lease_time else {
        return Vec::new();
    };
    let valid = lease.seconds();
    let mut out = vec![("valid-lifetime", json!(valid))];
    if !v4 {
        out.push(("preferred-lifetime", json!(valid / 2)));
    }
    out
}

/// A `dhcp-range` line's lease-time suffix (`,12h`, `,90m`, `,150s`), or nothing.
pub(super) fn dnsmasq_lease(segment: &Segment) -> String {
    match segment.options.lease_time.as_ref().map(|l| l.seconds()) {
        None => String::new(),
        Some(s) if s % 3600 == 0 => format!(",{}h", s / 3600),
        Some(s) if s % 60 == 0 => format!(",{}m", s / 60),
        Some(s) => format!(",{s}s"),
    }
}

/// The `dhcp-option` lines of a segment tagged `tag`: its router (IPv4) and options.
pub(super) fn dnsmasq_lines(segment: &Segment, tag: &str) -> String {
    let o = &segment.options;
    let mut text = String::new();
    let mut line = |option: &str, value: String| {
        let _ = writeln!(text, "dhcp-option=tag:{tag},{option},{value}");
    };
    if segment.cidr.addr().is_ipv4() {
        if let Some(gw) = segment.gateway {
            line("option:router", gw.to_string());
        }
        if !o.dns_servers.is_empty() {
            line("option:dns-server", joined(&o.dns_servers, ","));
        }
        if let Some(domain) = &o.domain {
            line("option:domain-name", domain.clone());
        }
        if let Some(mtu) = o.mtu {
            line("option:mtu", mtu.to_string());
        }
        if !o.ntp_servers.is_empty() {
            line("option:ntp-server", joined(&o.ntp_servers, ","));
        }
        let routes = classless_routes(segment);
        if !routes.is_empty() {
            let pairs: Vec<String> = routes
                .iter()
                .map(|r| format!("{},{}", r.to, r.via))
                .collect();
            line("option:classless-static-route", pairs.join(","));
        }
    } else {
        let bracketed = |list: &[IpAddr]| {
            list.iter()
                .map(|a| format!("[{a}]"))
                .collect::<Vec<_>>()
                .join(",")
        };
        if !o.dns_servers.is_empty() {
            line("option6:dns-server", bracketed(&o.dns_servers));
        }
        if let Some(domain) = &o.domain {
            line("option6:domain-search", domain.clone());
        }
        if !o.ntp_servers.is_empty() {
            line("option6:sntp-server", bracketed(&o.ntp_servers));
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn option_121_is_rfc_3442s_encoding() {
        // RFC 3442 §2's examples: 0/0 via 10.0.0.1 is `00 0A 00 00 01`, 10.17/16 via
        // 10.0.0.1 is `10 0A 11 0A 00 00 01`.
        let route = |to: &str, via: &str| Route {
            to: to.parse().unwrap(),
            via: via.parse().unwrap(),
        };
        assert_eq!(
            rfc3442_hex(&[
                route("0.0.0.0/0", "10.0.0.1"),
                route("10.17.0.0/16", "10.0.0.1")
            ]),
            "000A000001100A110A000001"
        );
        assert_eq!(
            rfc3442_hex(&[route("10.27.129.0/25", "10.0.0.1")]),
            "190A1B81000A000001"
        );
    }
}
