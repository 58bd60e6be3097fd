//! What a DHCP server says it handed out: the lease records of Kea's memfile (its CSV, v4
//! and v6) and of dnsmasq's lease file, parsed into [`Lease`]s. Pure: the text comes from
//! the caller, and every malformed line is an error naming its line, never a panic.

use std::collections::BTreeMap;
use std::net::IpAddr;

use crate::model::mac::Mac;

/// One lease: the address, who holds it and until when.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lease {
    /// The leased address.
    pub address: IpAddr,
    /// The client's hardware address as the server wrote it (`None`: it wrote none, as
    /// dnsmasq does for DHCPv6, which knows a client by its DUID).
    pub hardware: Option<String>,
    /// That hardware address as a MAC, if it is an Ethernet one.
    pub mac: Option<Mac>,
    /// The end of the lease, in seconds since the epoch; `None` for a lease without end
    /// (dnsmasq's `0`).
    pub expires: Option<u64>,
    /// The server has reclaimed it as expired (Kea's state 2) though it keeps the record.
    pub reclaimed: bool,
    /// The host name the server recorded, if any.
    pub host: Option<String>,
}

impl Lease {
    /// Whether the lease has ended at `now` (seconds since the epoch).
    pub fn ended(&self, now: u64) -> bool {
        self.reclaimed || self.expires.is_some_and(|end| end <= now)
    }
}

/// A lease file's format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LeaseFormat {
    /// Kea's DHCPv4 memfile (`kea-leases4.csv`).
    Kea4,
    /// Kea's DHCPv6 memfile (`kea-leases6.csv`).
    Kea6,
    /// dnsmasq's lease file (`dnsmasq.leases`), IPv4 and IPv6.
    Dnsmasq,
}

/// The leases of one lease file's `text`, one per address, in address order.
///
/// Kea's memfile is a journal: a lease changed or removed is written again below, so the
/// last line of an address is its state, and one with a valid lifetime of 0 (a release)
/// leaves no lease. A declined address (Kea's state 1) is nobody's lease. A delegated
/// prefix (Kea's lease type 2) is not an address and is left out. An error names the line
/// and what is wrong with it.
pub fn parse(format: LeaseFormat, text: &str) -> Result<Vec<Lease>, String> {
    let lines = match format {
        LeaseFormat::Kea4 | LeaseFormat::Kea6 => kea(text, format == LeaseFormat::Kea6)?,
        LeaseFormat::Dnsmasq => dnsmasq(text)?,
    };
    let mut last: BTreeMap<IpAddr, Option<Lease>> = BTreeMap::new();
    for lease in lines {
        let address = match &lease {
            Entry::Lease(l) => l.address,
            Entry::Gone(a) => *a,
        };
        last.insert(
            address,
            match lease {
                Entry::Lease(l) => Some(l),
                Entry::Gone(_) => None,
            },
        );
    }
    Ok(last.into_values().flatten().collect())
}

/// A line of a lease file: a lease, or the end of the lease of an address.
enum Entry {
    Lease(Lease),
    Gone(IpAddr),
}

/// The hardware address field as written, with its MAC if it is one.
fn hardware(field: &str) -> (Option<String>, Option<Mac>) {
    if field.is_empty() || field == "*" {
        return (None, None);
    }
    (Some(field.to_owned()), Mac::parse(field).ok())
}

/// Kea's memfile: a header naming the columns, then one lease per line.
fn kea(text: &str, v6: bool) -> Result<Vec<Entry>, String> {
    let mut lines = text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty());
    let Some((_, header)) = lines.next() else {
        return Ok(Vec::new());
    };
    let columns: Vec<&str> = header.split(',').map(str::trim).collect();
    let at = |name: &str| {
        columns.iter().position(|c| *c == name).ok_or_else(|| {
            format!(
                "line 1: the header has no `{name}` column; is this Kea's memfile lease file{}?",
                if v6 { " (v6)" } else { " (v4)" }
            )
        })
    };
    let address = at("address")?;
    let lifetime = at("valid_lifetime")?;
    let expire = at("expire")?;
    let hwaddr = columns.iter().position(|c| *c == "hwaddr");
    let state = columns.iter().position(|c| *c == "state");
    let host = columns.iter().position(|c| *c == "hostname");
    let lease_type = if v6 { Some(at("lease_type")?) } else { None };
    let mut out = Vec::new();
    for (i, line) in lines {
        let n = i + 1;
        let fields: Vec<&str> = line.split(',').collect();
        if fields.len() != columns.len() {
            return Err(format!(
                "line {n}: {} fields where the header names {}",
                fields.len(),
                columns.len()
            ));
        }
        let number = |col: usize, what: &str| -> Result<u64, String> {
            fields[col]
                .trim()
                .parse::<u64>()
                .map_err(|_| format!("line {n}: `{what}` is `{}`, not a number", esc(fields[col])))
        };
        if let Some(t) = lease_type
            && number(t, "lease_type")? == 2
        {
            continue;
        }
        let ip: IpAddr = fields[address]
            .trim()
            .parse()
            .map_err(|_| format!("line {n}: `{}` is not an address", esc(fields[address])))?;
        if ip.is_ipv6() != v6 {
            return Err(format!(
                "line {n}: {ip} is an IPv{} address in a DHCPv{} lease file",
                if v6 { 4 } else { 6 },
                if v6 { 6 } else { 4 }
            ));
        }
        let state = state.map(|s| number(s, "state")).transpose()?.unwrap_or(0);
        if number(lifetime, "valid_lifetime")? == 0 || state == 1 {
            out.push(Entry::Gone(ip));
            continue;
        }
        let (hardware, mac) = hwaddr.map_or((None, None), |h| hardware(fields[h].trim()));
        out.push(Entry::Lease(Lease {
            address: ip,
            hardware,
            mac,
            expires: Some(number(expire, "expire")?),
            reclaimed: state == 2,
            host: host
                .map(|h| fields[h].trim())
                .filter(|h| !h.is_empty())
                .map(str::to_owned),
        }));
    }
    Ok(out)
}

/// dnsmasq's lease file: `EXPIRY MAC ADDRESS HOSTNAME CLIENT-ID` per IPv4 lease, `duid
/// SERVER-DUID` before the IPv6 ones, `EXPIRY IAID ADDRESS HOSTNAME CLIENT-DUID` per IPv6
/// lease. An expiry of 0 is a lease without end; a host name of `*` is none.
fn dnsmasq(text: &str) -> Result<Vec<Entry>, String> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let n = i + 1;
        let fields: Vec<&str> = line.split_ascii_whitespace().collect();
        match fields.as_slice() {
            [] | ["duid", _] => continue,
            [expiry, hw, address, host, ..] => {
                let expiry: u64 = expiry.parse().map_err(|_| {
                    format!("line {n}: the expiry `{}` is not a number", esc(expiry))
                })?;
                let ip: IpAddr = address
                    .parse()
                    .map_err(|_| format!("line {n}: `{}` is not an address", esc(address)))?;
                // An IPv6 lease's second field is its IAID, not a hardware address.
                let (hardware, mac) = if ip.is_ipv6() {
                    (None, None)
                } else {
                    hardware(hw)
                };
                out.push(Entry::Lease(Lease {
                    address: ip,
                    hardware,
                    mac,
                    expires: (expiry != 0).then_some(expiry),
                    reclaimed: false,
                    host: (*host != "*").then(|| (*host).to_owned()),
                }));
            }
            _ => {
                return Err(format!(
                    "line {n}: `{}` is not a lease (expected `EXPIRY MAC ADDRESS HOSTNAME CLIENT-ID`)",
                    esc(line)
                ));
            }
        }
    }
    Ok(out)
}

/// A field for a message: escaped, and cut to 80 characters.
fn esc(s: &str) -> String {
    let cut: String = s.chars().take(80).collect();
    let mut e = cut.escape_debug().to_string();
    if s.chars().nth(80).is_some() {
        e.push('…');
    }
    e
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEA4: &str = "address,hwaddr,client_id,valid_lifetime,expire,subnet_id,fqdn_fwd,fqdn_rev,hostname,state,user_context\n\
192.0.2.2,52:54:00:00:00:01,,4000,1765000000,7,0,0,web-01,0,\n\
192.0.2.3,52:54:00:00:00:02,,4000,1765000000,7,0,0,,0,\n\
192.0.2.3,52:54:00:00:00:02,,0,1765000100,7,0,0,,0,\n\
192.0.2.4,,,4000,1765000000,7,0,0,,1,\n\
192.0.2.5,52:54:00:00:00:05,,4000,1765000000,7,0,0,,2,\n";

    #[test]
    fn the_last_line_of_an_address_is_its_lease() {
        let leases = parse(LeaseFormat::Kea4, KEA4).unwrap();
        let addresses: Vec<String> = leases.iter().map(|l| l.address.to_string()).collect();
        // .3 released (lifetime 0), .4 declined.
        assert_eq!(addresses, ["192.0.2.2", "192.0.2.5"]);
        assert_eq!(
            leases[0].mac,
            Some(Mac::parse("52:54:00:00:00:01").unwrap())
        );
        assert_eq!(leases[0].host.as_deref(), Some("web-01"));
        assert!(!leases[0].ended(1_764_999_999));
        assert!(leases[0].ended(1_765_000_000));
        assert!(leases[1].reclaimed && leases[1].ended(0));
    }

    #[test]
    fn kea6_leaves_out_delegated_prefixes() {
        let text = "address,duid,valid_lifetime,expire,subnet_id,pref_lifetime,lease_type,iaid,prefix_len,fqdn_fwd,fqdn_rev,hostname,hwaddr,state,user_context,hwtype,hwaddr_source\n\
2001:db8:1::1,00:01:02,4000,1765000000,7,3000,0,1,128,0,0,,52:54:00:00:00:01,0,,1,2\n\
2001:db8:2::,00:01:02,4000,1765000000,7,3000,2,1,56,0,0,,,0,,1,2\n";
        let leases = parse(LeaseFormat::Kea6, text).unwrap();
        assert_eq!(leases.len(), 1);
        assert_eq!(
            leases[0].mac,
            Some(Mac::parse("52:54:00:00:00:01").unwrap())
        );
    }

    #[test]
    fn dnsmasq_leases_of_both_families() {
        let text = "1765000000 52:54:00:00:00:01 192.0.2.2 web-01 01:52:54:00:00:00:01\n\
0 52:54:00:00:00:02 192.0.2.3 * *\n\
duid 00:01:00:01:2c:aa:bb:cc:52:54:00:00:00:fa\n\
1765000000 12345 2001:db8:1::1 web-01 00:01:00:01\n";
        let leases = parse(LeaseFormat::Dnsmasq, text).unwrap();
        assert_eq!(leases.len(), 3);
        assert_eq!(leases[1].expires, None);
        assert_eq!(leases[1].host, None);
        assert!(!leases[1].ended(u64::MAX));
        assert_eq!(leases[2].mac, None);
    }

    #[test]
    fn a_malformed_line_is_named_never_a_panic() {
        for (format, text, says) in [
            (
                LeaseFormat::Kea4,
                "address,hwaddr\n",
                "no `valid_lifetime` column",
            ),
            (
                LeaseFormat::Kea4,
                &KEA4.replace("4000,1765000000,7", "4000,17650x,7"),
                "line 2: `expire`",
            ),
            (
                LeaseFormat::Kea4,
                &format!("{KEA4}192.0.2.9,,\n"),
                "line 7: 3 fields",
            ),
            (
                LeaseFormat::Kea4,
                &KEA4.replace("192.0.2.2,", "2001:db8::1,"),
                "IPv6 address in a DHCPv4",
            ),
            (
                LeaseFormat::Dnsmasq,
                "12 52:54:00:00:00:01 nowhere x y\n",
                "line 1: `nowhere`",
            ),
            (
                LeaseFormat::Dnsmasq,
                "soon 52:54:00:00:00:01 192.0.2.2 x y\n",
                "expiry `soon`",
            ),
            (LeaseFormat::Dnsmasq, "\u{0}\u{1}\n", "is not a lease"),
        ] {
            let why = parse(format, text).unwrap_err();
            assert!(why.contains(says), "{why}");
        }
        assert!(parse(LeaseFormat::Kea4, "").unwrap().is_empty());
    }
}
