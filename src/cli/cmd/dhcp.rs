//! `ipamctl dhcp export`: the reservations [`crate::engine::dhcp`] computes, rendered as a
//! Kea `Dhcp4` or `Dhcp6` configuration or a dnsmasq file, on stdout. Deterministic: every
//! list comes sorted from the engine, JSON objects are written with sorted keys, and nothing
//! depends on the time or the machine.

use std::borrow::Cow;
use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::io::Write;

use ipnet::IpNet;
use serde_json::{Value, json};

use crate::cli::output;
use clap::ValueEnum;

use crate::cli::{DhcpCommand, DhcpExportArgs, DhcpFormat, ExportSelect, GlobalArgs, OutputFormat};
use crate::engine::dhcp::{self, DhcpSubnet, Family, Host};
use crate::engine::segments::{Scope, Segment};
use crate::engine::warning::{Warning, Warnings};
use crate::error::{Error, Result};
use crate::model::{PoolName, SubnetName};
use crate::store::Store;

pub fn run(
    store: &(dyn Store + Sync),
    g: &GlobalArgs,
    command: &DhcpCommand,
    out: &mut dyn Write,
) -> Result<()> {
    match command {
        DhcpCommand::Export(args) => {
            no_data_form("dhcp export", "a server's configuration, in `--format`", g)?;
            export(store, g, args, out)
        }
        // Its exit code is a result (drift exits 1): `cmd::run_to` calls it directly.
        DhcpCommand::Leases(_) => unreachable!("dhcp leases runs from cmd::run_to"),
    }
}

/// Exit 2 for `-o json|yaml|name` on a command whose output is a file for another program,
/// which has one form only (`-o table` and `-o wide` print it as it is).
pub(super) fn no_data_form(command: &str, what: &str, g: &GlobalArgs) -> Result<()> {
    match g.output {
        Some(f @ (OutputFormat::Json | OutputFormat::Yaml | OutputFormat::Name)) => {
            Err(Error::Usage {
                message: format!(
                    "`{command}` writes {what}, which has no `-o {}` form",
                    f.to_possible_value()
                        .map_or_else(String::new, |v| v.get_name().to_owned())
                ),
                hint: Some("drop `-o`".into()),
            })
        }
        _ => Ok(()),
    }
}

/// `-n`/`-A`, `--pool` and `--subnet`, validated as the engine's [`Scope`].
pub(super) fn scope(store: &dyn Store, g: &GlobalArgs, select: &ExportSelect) -> Result<Scope> {
    Ok(Scope {
        scopes: super::named_scopes(store, g)?,
        pools: select
            .pools
            .iter()
            .map(|p| super::flag("--pool", PoolName::new(p)))
            .collect::<Result<_>>()?,
        subnets: select
            .subnets
            .iter()
            .map(|s| super::flag("--subnet", SubnetName::new(s)))
            .collect::<Result<_>>()?,
    })
}

fn export(
    store: &(dyn Store + Sync),
    g: &GlobalArgs,
    args: &DhcpExportArgs,
    out: &mut dyn Write,
) -> Result<()> {
    let scope = scope(store, g, &args.select)?;
    for i in &args.interfaces {
        if i.is_empty() || i.contains(['"', '\\', '\n']) {
            return Err(Error::invalid(
                "--interface",
                format!("`{}` is not an interface name", i.escape_debug()),
            ));
        }
    }
    let mut warnings = Warnings::default();
    let text = match args.format {
        DhcpFormat::Kea4 | DhcpFormat::Kea6 => {
            let v4 = args.format == DhcpFormat::Kea4;
            let family = if v4 { Family::V4 } else { Family::V6 };
            let link = if v4 {
                None
            } else {
                link_of_subnets6(&args.interfaces, &mut warnings)?
            };
            let subnets = dhcp::reservations(store, &scope, family, &mut warnings);
            output::warn(&warnings);
            kea(&subnets?, v4, &args.interfaces, link)
        }
        DhcpFormat::Dnsmasq => {
            let found = dhcp::hosts_by_mac(store, &scope, &mut warnings);
            output::warn(&warnings);
            let (subnets, hosts) = found?;
            dnsmasq(&subnets, &hosts)
        }
    };
    output::write(out, &text)
}

/// The `interface` of every `subnet6`: Kea selects the DHCPv6 subnet of a client that is
/// not relayed only by it (a DHCPv6 packet from a link-local address says nothing of the
/// subnet), so a `subnet6` without one serves relayed clients alone. One `--interface` is
/// the link of every subnet exported; none is a warning (relayed clients only); several
/// are exit 2, since nothing says which subnet is on which link.
fn link_of_subnets6<'a>(
    interfaces: &'a [String],
    warnings: &mut Warnings,
) -> Result<Option<&'a str>> {
    match interfaces {
        [] => {
            warnings.push(Warning::new(
                "no `--interface`: Kea serves a `subnet6` without one to relayed clients only; give the interface the subnets are on (`--interface IF`) for directly attached clients",
            ));
            Ok(None)
        }
        [one] => Ok(Some(one)),
        _ => Err(Error::Usage {
            message: "`--format kea6` takes one `--interface`: it is the link of every `subnet6` exported, and Kea picks a directly attached client's subnet by it".into(),
            hint: Some("export the subnets of each link apart: `--subnet S --interface IF` (or `--pool P`, `-n NS`)".into()),
        }),
    }
}

/// Where a subnet came from, for the people reading the configuration.
fn context(s: &Segment) -> Value {
    let mut c = serde_json::Map::new();
    if let Some(ns) = &s.namespace {
        c.insert("namespace".into(), json!(ns.as_str()));
    }
    c.insert("pool".into(), json!(s.pool.as_str()));
    if let Some(subnet) = &s.subnet {
        c.insert("subnet".into(), json!(subnet.as_str()));
    }
    json!({ "ipamctl": c })
}

/// A Kea `Dhcp4` (`v4`) or `Dhcp6` configuration: reservations only, no dynamic pools;
/// each `subnet6` on `link` ([`link_of_subnets6`]).
fn kea(subnets: &[DhcpSubnet], v4: bool, interfaces: &[String], link: Option<&str>) -> String {
    let interfaces: Vec<&str> = match interfaces {
        [] => vec!["*"],
        given => given.iter().map(String::as_str).collect(),
    };
    let subnets: Vec<Value> = subnets
        .iter()
        .map(|s| {
            let reservations: Vec<Value> = s
                .reservations
                .iter()
                .map(|r| {
                    let address = if v4 {
                        ("ip-address", json!(r.address.to_string()))
                    } else {
                        ("ip-addresses", json!([r.address.to_string()]))
                    };
                    let mut m = serde_json::Map::new();
                    m.insert("hw-address".into(), json!(r.mac.to_string()));
                    m.insert(address.0.into(), address.1);
                    m.insert("hostname".into(), json!(r.host));
                    Value::Object(m)
                })
                .collect();
            let mut m = serde_json::Map::new();
            m.insert("id".into(), json!(s.segment.id));
            if let Some(link) = link {
                m.insert("interface".into(), json!(link));
            }
            m.insert("subnet".into(), json!(s.segment.cidr.to_string()));
            let options = super::dhcp_options::kea_option_data(&s.segment, v4);
            if !options.is_empty() {
                m.insert("option-data".into(), Value::Array(options));
            }
            for (key, value) in super::dhcp_options::kea_lifetimes(&s.segment, v4) {
                m.insert(key.into(), value);
            }
            m.insert("reservations".into(), Value::Array(reservations));
            m.insert("user-context".into(), context(&s.segment));
            Value::Object(m)
        })
        .collect();
    let config = if v4 {
        json!({ "Dhcp4": {
            "interfaces-config": { "interfaces": interfaces },
            "host-reservation-identifiers": ["hw-address"],
            "subnet4": subnets,
        }})
    } else {
        json!({ "Dhcp6": {
            "interfaces-config": { "interfaces": interfaces },
            "host-reservation-identifiers": ["hw-address", "duid"],
            "subnet6": subnets,
        }})
    };
    let mut text = serde_json::to_string_pretty(&config).expect("a JSON value serialises");
    text.push('\n');
    text
}

/// A dnsmasq configuration: per subnet a static `dhcp-range` (so only the hosts listed get
/// an address) tagged `ipamctl-<id>` and its router, then one `dhcp-host` per MAC.
fn dnsmasq(subnets: &[DhcpSubnet], hosts: &[Host]) -> String {
    let mut text = String::from(
        "# Written by `ipamctl dhcp export --format dnsmasq`: reservations only; a client\n\
         # without a dhcp-host line below gets no address.\n",
    );
    for s in subnets {
        let tag = format!("ipamctl-{}", s.segment.id);
        let lease = super::dhcp_options::dnsmasq_lease(&s.segment);
        let _ = writeln!(text, "\n# {} {}", s.segment.label(), s.segment.cidr);
        for range in ranges(s) {
            let _ = match range {
                IpNet::V4(n) => writeln!(
                    text,
                    "dhcp-range=set:{tag},{},static,{}{lease}",
                    n.network(),
                    n.netmask()
                ),
                IpNet::V6(n) => writeln!(
                    text,
                    "dhcp-range=set:{tag},{},static,{}{lease}",
                    n.network(),
                    n.prefix_len()
                ),
            };
        }
        text.push_str(&super::dhcp_options::dnsmasq_lines(&s.segment, &tag));
    }
    if !hosts.is_empty() {
        text.push('\n');
    }
    for h in hosts {
        let _ = write!(text, "dhcp-host={}", h.mac);
        if let Some(v4) = h.v4 {
            let _ = write!(text, ",{v4}");
        }
        if let Some(v6) = h.v6 {
            let _ = write!(text, ",[{v6}]");
        }
        let _ = writeln!(text, ",{}", dnsmasq_name(&h.host));
    }
    text
}

/// `host` as a `dhcp-host` field dnsmasq reads as a host name. dnsmasq's option.c tells the
/// fields apart by their form: one with `:` is a MAC, `id:`, `set:` or `tag:`; one with `.`
/// that parses is an IPv4 address; `[…]` an IPv6 one; a bare `ignore` disables the MAC, and
/// `infinite` or digits with an optional `s`/`m`/`h`/`d`/`w` (`7`, `45m`, `12h`) are a
/// lease time. An RFC 1123 label can take only the last three forms; such a name is given
/// a trailing dot, which dnsmasq reads as a name (the dot holds it apart from a keyword)
/// and then drops (an empty domain is none), so the guest is told the name itself.
fn dnsmasq_name(host: &str) -> Cow<'_, str> {
    let digits = host.strip_suffix(['s', 'm', 'h', 'd', 'w']).unwrap_or(host);
    let lease_time = !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit());
    if lease_time || host == "ignore" || host == "infinite" {
        Cow::Owned(format!("{host}."))
    } else {
        Cow::Borrowed(host)
    }
}

/// The `dhcp-range`s of a subnet. dnsmasq's IPv6 ranges are /64 or longer: an IPv6 subnet
/// shorter than that gets one /64 range for each /64 that holds a reservation.
fn ranges(s: &DhcpSubnet) -> Vec<IpNet> {
    match s.segment.cidr {
        IpNet::V6(n) if n.prefix_len() < 64 => s
            .reservations
            .iter()
            .filter_map(|r| IpNet::new(r.address, 64).ok().map(|n| n.trunc()))
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect(),
        cidr => vec![cidr],
    }
}

#[cfg(test)]
mod tests {
    use super::dnsmasq_name;

    #[test]
    fn dnsmasq_keywords_get_a_dot_and_names_stay() {
        for keyword in [
            "ignore", "infinite", "7", "12h", "45m", "3w", "0s", "1d", "120",
        ] {
            assert_eq!(dnsmasq_name(keyword), format!("{keyword}."));
        }
        for name in [
            "web-01", "h", "s", "7a", "a7", "12hh", "h12", "ignored", "1-2", "12x",
        ] {
            assert_eq!(dnsmasq_name(name), name);
        }
    }
}
