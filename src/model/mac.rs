//! MAC addresses of NICs (EUI-48): the spellings people type, the one form written to
//! manifests (lowercase, colon-separated), and the MAC `--mac auto` derives from a pool's
//! `spec.macPrefix` and an address.

use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// A NIC's MAC address: an EUI-48 that is unicast and neither all zeros nor the broadcast
/// address, so a DHCP server can match a client by it. Displayed (and stored) as six
/// lowercase hex octets joined by `:`.
///
/// # Examples
///
/// ```
/// use ipamctl::model::mac::Mac;
/// let mac: Mac = "52-54-00-AB-CD-EF".parse().unwrap();
/// assert_eq!(mac.to_string(), "52:54:00:ab:cd:ef");
/// assert_eq!("5254.00ab.cdef".parse::<Mac>().unwrap(), mac);
/// assert!("01:00:5e:00:00:01".parse::<Mac>().is_err()); // multicast
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Mac([u8; 6]);

/// A pool's `spec.macPrefix`: the first three octets of every MAC `--mac auto` derives in
/// it. Its first octet is locally administered (bit 1 set) and unicast (bit 0 clear), as
/// `52:54:00` (QEMU's) and `02:42:ac` (Docker's) are, so a derived MAC never collides with a
/// vendor's burnt-in one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct MacPrefix([u8; 3]);

/// Parses `s` as `n` octets written as hex pairs joined by `:` or `-`, as dotted groups of
/// four hex digits (`5254.00ab.cdef`), or as bare hex; any case.
fn parse_octets<const N: usize>(s: &str) -> Option<[u8; N]> {
    let digits: String = if s.contains(':') || s.contains('-') {
        let sep = if s.contains(':') { ':' } else { '-' };
        let parts: Vec<&str> = s.split(sep).collect();
        if parts.len() != N || parts.iter().any(|p| p.len() != 2) {
            return None;
        }
        parts.concat()
    } else if s.contains('.') {
        let parts: Vec<&str> = s.split('.').collect();
        if !N.is_multiple_of(2) || parts.len() != N / 2 || parts.iter().any(|p| p.len() != 4) {
            return None;
        }
        parts.concat()
    } else {
        s.to_owned()
    };
    if digits.len() != 2 * N || !digits.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let mut octets = [0u8; N];
    for (i, octet) in octets.iter_mut().enumerate() {
        *octet = u8::from_str_radix(&digits[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(octets)
}

fn write_octets(f: &mut fmt::Formatter<'_>, octets: &[u8]) -> fmt::Result {
    for (i, octet) in octets.iter().enumerate() {
        if i > 0 {
            f.write_str(":")?;
        }
        write!(f, "{octet:02x}")?;
    }
    Ok(())
}

impl Mac {
    /// Validates `s` (any of the spellings above); the error names the value and what is
    /// wrong with it.
    pub fn parse(s: &str) -> Result<Mac, String> {
        let octets = parse_octets::<6>(s).ok_or_else(|| {
            format!(
                "invalid MAC `{}`: expected six hex octets such as `52:54:00:12:34:56`",
                s.escape_debug()
            )
        })?;
        if octets == [0; 6] {
            return Err(format!("invalid MAC `{s}`: the all-zero MAC names no NIC"));
        }
        if octets == [0xff; 6] {
            return Err(format!("invalid MAC `{s}`: the broadcast MAC names no NIC"));
        }
        if octets[0] & 1 == 1 {
            return Err(format!(
                "invalid MAC `{s}`: it is a multicast MAC (the lowest bit of the first octet is set); a NIC's MAC is unicast"
            ));
        }
        Ok(Mac(octets))
    }

    /// The six octets.
    pub fn octets(self) -> [u8; 6] {
        self.0
    }

    /// The MAC `--mac auto` gives `address` in a pool with `prefix`: the prefix's three
    /// octets, then the address's low 24 bits. Two addresses of one pool get one MAC only
    /// if they agree in their low 24 bits, which no two addresses of a pool of at most 2^24
    /// addresses (an IPv4 /8, an IPv6 /104 or narrower) do; the same address always gets the
    /// same MAC.
    ///
    /// ```
    /// use ipamctl::model::mac::{Mac, MacPrefix};
    /// let prefix: MacPrefix = "52:54:00".parse().unwrap();
    /// let mac = Mac::derive(prefix, "10.42.1.7".parse().unwrap());
    /// assert_eq!(mac.to_string(), "52:54:00:2a:01:07");
    /// ```
    pub fn derive(prefix: MacPrefix, address: IpAddr) -> Mac {
        let low: [u8; 3] = match address {
            IpAddr::V4(a) => {
                let o = a.octets();
                [o[1], o[2], o[3]]
            }
            IpAddr::V6(a) => {
                let o = a.octets();
                [o[13], o[14], o[15]]
            }
        };
        let p = prefix.0;
        Mac([p[0], p[1], p[2], low[0], low[1], low[2]])
    }

    /// Whether this MAC is the one [`Mac::derive`] gives some address under `prefix`.
    pub fn has_prefix(self, prefix: MacPrefix) -> bool {
        self.0[..3] == prefix.0
    }
}

impl MacPrefix {
    /// Validates `s`: three octets (`52:54:00`, `02-42-AC`), locally administered unicast.
    pub fn parse(s: &str) -> Result<MacPrefix, String> {
        let octets = parse_octets::<3>(s).ok_or_else(|| {
            format!(
                "invalid MAC prefix `{}`: expected three hex octets such as `52:54:00`",
                s.escape_debug()
            )
        })?;
        if octets[0] & 1 == 1 {
            return Err(format!(
                "invalid MAC prefix `{s}`: its first octet is multicast (lowest bit set)"
            ));
        }
        if octets[0] & 2 == 0 {
            return Err(format!(
                "invalid MAC prefix `{s}`: its first octet is not locally administered (bit 1 clear); use one such as `52:54:00` or `02:42:ac`, so a derived MAC cannot be a vendor's"
            ));
        }
        Ok(MacPrefix(octets))
    }
}

impl fmt::Display for Mac {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_octets(f, &self.0)
    }
}

impl fmt::Display for MacPrefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_octets(f, &self.0)
    }
}

impl FromStr for Mac {
    type Err = String;
    fn from_str(s: &str) -> Result<Mac, String> {
        Mac::parse(s)
    }
}

impl FromStr for MacPrefix {
    type Err = String;
    fn from_str(s: &str) -> Result<MacPrefix, String> {
        MacPrefix::parse(s)
    }
}

impl TryFrom<String> for Mac {
    type Error = String;
    fn try_from(s: String) -> Result<Mac, String> {
        Mac::parse(&s)
    }
}

impl TryFrom<String> for MacPrefix {
    type Error = String;
    fn try_from(s: String) -> Result<MacPrefix, String> {
        MacPrefix::parse(&s)
    }
}

impl From<Mac> for String {
    fn from(m: Mac) -> String {
        m.to_string()
    }
}

impl From<MacPrefix> for String {
    fn from(m: MacPrefix) -> String {
        m.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_spelling_reads_as_one_mac() {
        let want = Mac([0x52, 0x54, 0, 0x12, 0x34, 0x56]);
        for s in [
            "52:54:00:12:34:56",
            "52-54-00-12-34-56",
            "5254.0012.3456",
            "525400123456",
            "52:54:00:12:34:56".to_uppercase().as_str(),
        ] {
            assert_eq!(Mac::parse(s), Ok(want), "{s}");
        }
        assert_eq!(want.to_string(), "52:54:00:12:34:56");
    }

    #[test]
    fn no_nic_has_a_multicast_broadcast_or_zero_mac() {
        for s in [
            "01:00:5e:00:00:01",
            "ff:ff:ff:ff:ff:ff",
            "00:00:00:00:00:00",
            "33:33:00:00:00:01",
        ] {
            let err = Mac::parse(s).unwrap_err();
            assert!(err.contains(s), "{err}");
        }
        for s in [
            "52:54:00:12:34",
            "52:54:00:12:34:567",
            "52:54-00:12:34:56",
            "zz:54:00:12:34:56",
            "",
        ] {
            assert!(Mac::parse(s).is_err(), "{s}");
        }
    }

    #[test]
    fn a_prefix_is_locally_administered_unicast() {
        assert!(MacPrefix::parse("52:54:00").is_ok());
        assert!(MacPrefix::parse("02:42:AC").is_ok());
        assert!(MacPrefix::parse("00:16:3e").is_err());
        assert!(MacPrefix::parse("03:00:00").is_err());
        assert!(MacPrefix::parse("52:54").is_err());
    }

    #[test]
    fn derived_macs_differ_for_addresses_of_a_slash_8() {
        let prefix = MacPrefix::parse("02:42:ac").unwrap();
        let a = Mac::derive(prefix, "10.0.0.1".parse().unwrap());
        let b = Mac::derive(prefix, "10.255.0.1".parse().unwrap());
        assert_ne!(a, b);
        assert!(a.has_prefix(prefix));
        assert_eq!(Mac::parse(&a.to_string()), Ok(a));
        let v6 = Mac::derive(prefix, "fd00::1:2:3".parse().unwrap());
        assert_eq!(v6.to_string(), "02:42:ac:02:00:03");
    }
}
