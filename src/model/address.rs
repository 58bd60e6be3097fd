//! Addresses and prefixes as ipamctl spells them: parsing with messages that name the value,
//! and serde in the canonical form (IPv6 quoted in YAML).

use std::fmt;
use std::net::IpAddr;

use ipnet::IpNet;
use serde::{Deserialize, Serialize};

/// Parses an IPv4 or IPv6 address (any form `std` reads; it is written back canonically,
/// RFC 5952 for IPv6).
pub fn parse_addr(s: &str) -> Result<IpAddr, String> {
    s.parse::<IpAddr>().map_err(|_| {
        format!(
            "`{}` is not an IP address like `10.0.0.1` or `2001:db8::1`",
            s.escape_debug()
        )
    })
}

/// Parses a prefix without host bits, IPv4 or IPv6, suggesting the prefix that was probably
/// meant.
pub fn parse_net(s: &str) -> Result<IpNet, String> {
    // ipnet reads `010.0.0.0/8` as 10.0.0.0/8 where inet_aton(3) reads 8.0.0.0/8: refuse
    // leading zeros, as `IpAddr` (and so `parse_addr`) does; also in the length.
    let strict = s.split_once('/').is_some_and(|(addr, len)| {
        addr.parse::<IpAddr>().is_ok() && (len == "0" || !len.starts_with('0'))
    });
    let net = s.parse::<IpNet>().ok().filter(|_| strict).ok_or_else(|| {
        format!(
            "`{}` is not a prefix like `10.0.0.0/16` or `fd00:42::/48`",
            s.escape_debug()
        )
    })?;
    if net.trunc() != net {
        return Err(format!(
            "`{s}` has host bits set; did you mean `{}`?",
            net.trunc()
        ));
    }
    Ok(net)
}

/// `IPv4` or `IPv6`, for messages.
pub fn family_name(addr: IpAddr) -> &'static str {
    match addr {
        IpAddr::V4(_) => "IPv4",
        IpAddr::V6(_) => "IPv6",
    }
}

pub(crate) mod serde_ip {
    //! Serde for addresses and prefixes with the messages of `parse_addr`/`parse_net`.
    use super::*;
    use serde::{Deserializer, Serializer};

    pub mod addr {
        use super::*;
        pub fn serialize<S: Serializer>(a: &IpAddr, s: S) -> Result<S::Ok, S::Error> {
            match a {
                IpAddr::V4(_) => s.collect_str(a),
                IpAddr::V6(_) => quoted(&a.to_string(), s),
            }
        }
        pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<IpAddr, D::Error> {
            let s = String::deserialize(d)?;
            parse_addr(&s).map_err(serde::de::Error::custom)
        }
    }

    pub mod opt_addr {
        use super::*;
        pub fn serialize<S: Serializer>(a: &Option<IpAddr>, s: S) -> Result<S::Ok, S::Error> {
            match a {
                Some(a) => addr::serialize(a, s),
                None => s.serialize_none(),
            }
        }
        pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<IpAddr>, D::Error> {
            let s = Option::<String>::deserialize(d)?;
            s.map(|s| parse_addr(&s).map_err(serde::de::Error::custom))
                .transpose()
        }
    }

    pub mod addrs {
        //! A list of addresses, each as [`addr`] writes and reads it.
        use super::*;
        struct One<'a>(&'a IpAddr);
        impl Serialize for One<'_> {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                addr::serialize(self.0, s)
            }
        }
        pub fn serialize<S: Serializer>(a: &[IpAddr], s: S) -> Result<S::Ok, S::Error> {
            s.collect_seq(a.iter().map(One))
        }
        pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<IpAddr>, D::Error> {
            Vec::<String>::deserialize(d)?
                .iter()
                .map(|s| parse_addr(s).map_err(serde::de::Error::custom))
                .collect()
        }
    }

    pub mod net {
        use super::*;
        pub fn serialize<S: Serializer>(n: &IpNet, s: S) -> Result<S::Ok, S::Error> {
            s.collect_str(n)
        }
        pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<IpNet, D::Error> {
            let s = String::deserialize(d)?;
            parse_net(&s).map_err(serde::de::Error::custom)
        }
    }
}

/// An entry of `spec.exclude`: one address, or a prefix inside the pool.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(try_from = "String")]
pub struct Exclude(IpNet);

impl Serialize for Exclude {
    /// Its text; an IPv6 address alone is quoted in YAML, as `spec.address` is.
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let text = self.to_string();
        match self.0 {
            IpNet::V6(_) if !text.contains('/') => quoted(&text, s),
            _ => s.collect_str(&text),
        }
    }
}

impl Exclude {
    /// The excluded addresses as a prefix (a /32 or /128 for a single address).
    pub fn net(self) -> IpNet {
        self.0
    }
}

impl TryFrom<String> for Exclude {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        if s.contains('/') {
            parse_net(&s).map(Exclude)
        } else {
            parse_addr(&s).map(|a| Exclude(IpNet::from(a)))
        }
    }
}

impl From<Exclude> for String {
    fn from(e: Exclude) -> String {
        e.to_string()
    }
}

impl fmt::Display for Exclude {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.prefix_len() == self.0.max_prefix_len() {
            self.0.addr().fmt(f)
        } else {
            self.0.fmt(f)
        }
    }
}

/// Serializes `text` double-quoted in YAML (as itself elsewhere, e.g. in JSON): for IPv6
/// addresses, some of which (`1:2:3:4:5:6:7:8`) a YAML 1.1 reader takes for sexagesimal
/// numbers when plain. `DoubleQuoted` is a serde marker type (a newtype struct that every
/// other serializer passes through), the one name of the YAML library outside `crate::yaml`:
/// the alternative, a YAML-side walk over every manifest, would cost every claim.
pub fn quoted<S: serde::Serializer>(text: &str, s: S) -> Result<S::Ok, S::Error> {
    serde_saphyr::DoubleQuoted(text).serialize(s)
}
