//! The two manifests (`IPAMPool`, `IPAllocation`) and the validated names they are made of.
//!
//! Every name is validated once, where it enters (a flag, a manifest); after that the code
//! passes the newtype around, never a bare `&str`.

use std::collections::BTreeMap;
use std::fmt;
use std::net::Ipv4Addr;
use std::str::FromStr;

use ipnet::Ipv4Net;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The only `apiVersion` ipamctl reads and writes.
pub const API_VERSION: &str = "pivirt.hu/v1";
/// `kind` of a pool manifest.
pub const POOL_KIND: &str = "IPAMPool";
/// `kind` of an allocation manifest.
pub const ALLOCATION_KIND: &str = "IPAllocation";
/// Label every allocation carries.
pub const MANAGED_BY_LABEL: &str = "pivirt.hu/managed-by";
/// Value of [`MANAGED_BY_LABEL`].
pub const MANAGED_BY: &str = "director";

/// Directory names a namespace segment may not take: they would make paths ambiguous.
const RESERVED_SEGMENTS: [&str; 4] = ["ipampools", "ipallocations", "subnets", "cooldown"];

/// Checks `s` is a lowercase RFC 1123 label: 1–63 of `[a-z0-9-]`, alphanumeric at both ends.
fn check_label(s: &str) -> Result<(), String> {
    if s.is_empty() {
        return Err("must not be empty".into());
    }
    if s.len() > 63 {
        return Err(format!(
            "is {} characters long; at most 63 are allowed",
            s.len()
        ));
    }
    if let Some(c) = s
        .chars()
        .find(|c| !(c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '-'))
    {
        return Err(format!(
            "contains {c:?}; only lowercase letters, digits and `-` are allowed (RFC 1123 label)"
        ));
    }
    if s.starts_with('-') || s.ends_with('-') {
        return Err("must start and end with a letter or digit (RFC 1123 label)".into());
    }
    Ok(())
}

macro_rules! string_newtype {
    ($(#[$doc:meta])* $name:ident, $what:literal, $check:expr) => {
        $(#[$doc])*
        #[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        #[serde(try_from = "String", into = "String")]
        pub struct $name(String);

        impl $name {
            /// Validates `s`; the error says what is wrong with it.
            pub fn new(s: &str) -> Result<Self, String> {
                let check: fn(&str) -> Result<(), String> = $check;
                check(s).map_err(|why| format!("invalid {} `{}`: {}", $what, s.escape_debug(), why))?;
                Ok($name(s.to_owned()))
            }

            /// The canonical string form.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl TryFrom<String> for $name {
            type Error = String;
            fn try_from(s: String) -> Result<Self, String> {
                $name::new(&s)
            }
        }

        impl From<$name> for String {
            fn from(n: $name) -> String {
                n.0
            }
        }

        impl FromStr for $name {
            type Err = String;
            fn from_str(s: &str) -> Result<Self, String> {
                $name::new(s)
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }
    };
}

string_newtype!(
    /// A pool name: a lowercase RFC 1123 label of at most 63 characters.
    PoolName,
    "pool name",
    check_label
);

string_newtype!(
    /// A subnet name: a lowercase RFC 1123 label of at most 63 characters.
    SubnetName,
    "subnet name",
    check_label
);

string_newtype!(
    /// A namespace: one or more `/`-separated RFC 1123 labels, none of them `ipampools`,
    /// `ipallocations`, `subnets` or `cooldown`, at most 253 characters. Each segment becomes one directory.
    Namespace,
    "namespace",
    |s| {
        if s.len() > 253 {
            return Err(format!("is {} characters long; at most 253 are allowed", s.len()));
        }
        for segment in s.split('/') {
            check_label(segment).map_err(|why| format!("segment `{segment}` {why}"))?;
            if RESERVED_SEGMENTS.contains(&segment) {
                return Err(format!("segment `{segment}` is reserved by the state directory layout"));
            }
        }
        Ok(())
    }
);

string_newtype!(
    /// An owner's uid as read from a stored manifest: 1–128 characters of `[A-Za-z0-9._:-]`.
    /// Reading is lenient so that state written by older versions stays readable and
    /// releasable; every uid ipamctl takes as input goes through [`Uid::parse_uuid`], so only
    /// UUIDs are ever written (`check` reports the others).
    Uid,
    "uid",
    |s| {
        if s.is_empty() || s.len() > 128 {
            return Err("must be 1 to 128 characters long".into());
        }
        let allowed = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b':');
        if s.bytes().all(allowed) {
            return Ok(());
        }
        match s.chars().find(|&c| !u8::try_from(c).is_ok_and(allowed)) {
            Some(c) => Err(format!("contains {c:?}; only letters, digits and `-_.:` are allowed")),
            None => Ok(()),
        }
    }
);

impl Uid {
    /// Parses a uid given as input (a flag, a live list): a UUID in the RFC 4122 text form
    /// (`8-4-4-4-12` hex digits, any case), kept lowercase. Anything else is refused, naming
    /// the value; a short integer is most likely bash's `$UID` (the user id), and the
    /// message says so.
    ///
    /// # Examples
    ///
    /// ```
    /// use ipamctl::model::Uid;
    /// let uid = Uid::parse_uuid("0F8FAD5B-D9CB-469F-A165-70867728950E").unwrap();
    /// assert_eq!(uid.as_str(), "0f8fad5b-d9cb-469f-a165-70867728950e");
    /// assert!(Uid::parse_uuid("0").unwrap_err().contains("$UID"));
    /// ```
    pub fn parse_uuid(s: &str) -> Result<Uid, String> {
        // The uuid crate also takes the braced, URN and 32-digit forms: only the hyphenated
        // one is the text form that orchestrators print (virsh, Kubernetes, OpenStack).
        let hyphenated = s.len() == 36
            && s.bytes().enumerate().all(|(i, b)| match i {
                8 | 13 | 18 | 23 => b == b'-',
                _ => b.is_ascii_hexdigit(),
            });
        if hyphenated && let Ok(uuid) = uuid::Uuid::try_parse(s) {
            return Ok(Uid(uuid.hyphenated().to_string()));
        }
        let mut message = format!(
            "invalid uid `{}`: a uid must be a UUID such as `0f8fad5b-d9cb-469f-a165-70867728950e` \
             (RFC 4122 text form, any case)",
            s.escape_debug()
        );
        if !s.is_empty() && s.len() <= 10 && s.bytes().all(|b| b.is_ascii_digit()) {
            message.push_str(
                "; a short number is most likely the shell's `$UID`, which in bash is the user id, \
                 not the VM's uuid: use another variable name",
            );
        }
        Err(message)
    }

    /// True when the uid is a UUID in the lowercase RFC 4122 text form, as ipamctl writes it.
    pub fn is_uuid(&self) -> bool {
        Uid::parse_uuid(&self.0).is_ok_and(|u| u.0 == self.0)
    }
}

/// What kind of thing holds an address, and so which rule its name follows.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
pub enum OwnerKind {
    /// A VM's NIC: name `<hostname>/<nic index>`, e.g. `web-01/0`.
    VirtualMachine,
    /// A floating IP: its own name (an RFC 1123 label).
    #[serde(rename = "FloatingIP")]
    FloatingIp,
    /// A VPC router's uplink: name is always `router`.
    #[serde(rename = "VPC")]
    Vpc,
    /// A host's own address on a subnet: name `<subnet>` (a label or an IPv4 prefix).
    Node,
}

impl OwnerKind {
    /// All kinds, in the order help texts list them.
    pub const ALL: [OwnerKind; 4] = [
        OwnerKind::VirtualMachine,
        OwnerKind::FloatingIp,
        OwnerKind::Vpc,
        OwnerKind::Node,
    ];

    /// The manifest spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            OwnerKind::VirtualMachine => "VirtualMachine",
            OwnerKind::FloatingIp => "FloatingIP",
            OwnerKind::Vpc => "VPC",
            OwnerKind::Node => "Node",
        }
    }

    /// Checks `name` against this kind's rule.
    fn check_name(self, name: &str) -> Result<(), String> {
        match self {
            OwnerKind::VirtualMachine => {
                let (host, nic) = name
                    .rsplit_once('/')
                    .ok_or("must be `<hostname>/<nic index>`, e.g. `web-01/0`")?;
                for label in host.split('.') {
                    check_label(label).map_err(|why| format!("hostname `{host}` {why}"))?;
                }
                let digits_ok = !nic.is_empty()
                    && nic.len() <= 4
                    && nic.bytes().all(|b| b.is_ascii_digit())
                    && (nic == "0" || !nic.starts_with('0'));
                if !digits_ok {
                    return Err(format!(
                        "NIC index `{nic}` must be a number like `0` or `12`"
                    ));
                }
                Ok(())
            }
            OwnerKind::FloatingIp => check_label(name),
            OwnerKind::Vpc if name == "router" => Ok(()),
            OwnerKind::Vpc => Err(
                "must be `router` (a VPC holds one address per pool: its router's uplink)".into(),
            ),
            OwnerKind::Node => {
                if name.contains('/') {
                    match parse_net(name) {
                        Ok(_) => Ok(()),
                        Err(why) => Err(why),
                    }
                } else {
                    check_label(name)
                }
            }
        }
    }
}

impl fmt::Display for OwnerKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for OwnerKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        OwnerKind::ALL
            .into_iter()
            .find(|k| k.as_str() == s)
            .ok_or_else(|| {
                let all: Vec<_> = OwnerKind::ALL.iter().map(|k| k.as_str()).collect();
                format!(
                    "unknown owner kind `{}`; expected one of {}",
                    s.escape_debug(),
                    all.join(", ")
                )
            })
    }
}

/// Who holds an address: `(kind, name, uid)` is the identity. Field order is the file's.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields, try_from = "RawOwner")]
pub struct Owner {
    kind: OwnerKind,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    uid: Option<Uid>,
    name: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawOwner {
    kind: OwnerKind,
    #[serde(default)]
    uid: Option<Uid>,
    name: String,
}

impl TryFrom<RawOwner> for Owner {
    type Error = String;
    fn try_from(raw: RawOwner) -> Result<Self, String> {
        Owner::new(raw.kind, &raw.name, raw.uid)
    }
}

impl Owner {
    /// Validates `name` against `kind`'s rule.
    pub fn new(kind: OwnerKind, name: &str, uid: Option<Uid>) -> Result<Owner, String> {
        kind.check_name(name)
            .map_err(|why| format!("invalid {kind} name `{}`: {why}", name.escape_debug()))?;
        Ok(Owner {
            kind,
            uid,
            name: name.to_owned(),
        })
    }

    /// Parses `KIND/NAME` (split at the first `/`, so `VirtualMachine/web-01/0` works).
    pub fn parse(kind_name: &str, uid: Option<Uid>) -> Result<Owner, String> {
        let (kind, name) = split_kind_name(kind_name)?;
        Owner::new(kind, name, uid)
    }

    /// The owner's kind.
    pub fn kind(&self) -> OwnerKind {
        self.kind
    }

    /// The owner's name (rule depends on the kind).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The owner's uid, if it has one.
    pub fn uid(&self) -> Option<&Uid> {
        self.uid.as_ref()
    }

    /// `KIND/NAME (uid U)`, or `KIND/NAME` without a uid: the owner as tooltips, reports
    /// and diffs name it.
    pub fn with_uid(&self) -> String {
        match &self.uid {
            Some(uid) => format!("{self} (uid {uid})"),
            None => self.to_string(),
        }
    }

    /// A stable 64-bit key of the identity (FNV-1a over `kind/name uid`), used to pick lock
    /// stripes and index files. Stable across versions: two ipamctl builds racing on one state
    /// directory must agree on it. Collisions are harmless: every index hit is verified against
    /// the allocation file itself.
    pub fn key(&self) -> u64 {
        const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
        const PRIME: u64 = 0x0000_0100_0000_01b3;
        let uid = self.uid.as_ref().map_or("", |u| u.as_str());
        [self.kind.as_str(), "/", &self.name, " ", uid]
            .iter()
            .flat_map(|part| part.bytes())
            .fold(OFFSET, |hash, byte| {
                (hash ^ u64::from(byte)).wrapping_mul(PRIME)
            })
    }
}

impl fmt::Display for Owner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.kind, self.name)
    }
}

/// Splits `KIND/NAME` at the first `/` and parses the kind.
fn split_kind_name(kind_name: &str) -> Result<(OwnerKind, &str), String> {
    let (kind, name) = kind_name.split_once('/').ok_or_else(|| {
        format!(
            "owner `{}` must be `KIND/NAME`, e.g. `VirtualMachine/web-01/0`",
            kind_name.escape_debug()
        )
    })?;
    Ok((kind.parse()?, name))
}

/// A filter on owners, as `list` and `release` take it: an omitted part matches any.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OwnerFilter {
    /// `--owner KIND/NAME`, if given. With [`OwnerFilter::prefix`], NAME ends in `/`, or is
    /// empty for `--kind KIND` alone (every name is a prefix of itself), so that a store
    /// answering from its owner index needs no case of its own for a kind.
    pub kind_name: Option<(OwnerKind, String)>,
    /// `--owner KIND/NAME/` (a trailing `/`): every owner whose name starts with `NAME/`,
    /// e.g. `VirtualMachine/web-01/` for every NIC of `web-01`.
    pub prefix: bool,
    /// `--uid UID`, if given.
    pub uid: Option<Uid>,
}

impl OwnerFilter {
    /// Builds a filter from the raw flags, validating the owner name against its kind. A
    /// name ending in `/` selects by prefix; what comes before the `/` must be valid as the
    /// start of a name of that kind (for a VM: its hostname).
    pub fn new(owner: Option<&str>, uid: Option<Uid>) -> Result<OwnerFilter, String> {
        let (kind_name, prefix) = match owner {
            Some(s) if s.ends_with('/') && s.matches('/').count() > 1 => {
                let (kind, name) = split_kind_name(s)?;
                let stem = name.trim_end_matches('/');
                if stem.is_empty() {
                    return Err(format!(
                        "owner prefix `{}` names no owner; e.g. `VirtualMachine/web-01/`",
                        s.escape_debug()
                    ));
                }
                // Valid if some full name of this kind starts with it.
                let example = match kind {
                    OwnerKind::VirtualMachine => format!("{stem}/0"),
                    _ => stem.to_owned(),
                };
                kind.check_name(&example).map_err(|why| {
                    format!(
                        "invalid {kind} name prefix `{}`: {why}",
                        name.escape_debug()
                    )
                })?;
                (Some((kind, name.to_owned())), true)
            }
            Some(s) => {
                let owner = Owner::parse(s, None)?;
                (Some((owner.kind, owner.name)), false)
            }
            None => (None, false),
        };
        Ok(OwnerFilter {
            kind_name,
            prefix,
            uid,
        })
    }

    /// Narrows the filter to owners of `kind` (`--kind`). With `--owner` of another kind,
    /// nothing could match: that is an error, not an empty answer.
    pub fn with_kind(mut self, kind: OwnerKind) -> Result<OwnerFilter, String> {
        match &self.kind_name {
            Some((k, _)) if *k == kind => {}
            Some((k, n)) => {
                return Err(format!(
                    "`--kind {kind}` contradicts `--owner {k}/{n}`; give one of them"
                ));
            }
            None => {
                self.kind_name = Some((kind, String::new()));
                self.prefix = true;
            }
        }
        Ok(self)
    }

    /// The filter that passes exactly `owner` (kind, name and uid).
    pub fn exactly(owner: &Owner) -> OwnerFilter {
        OwnerFilter {
            kind_name: Some((owner.kind, owner.name.clone())),
            prefix: false,
            uid: owner.uid.clone(),
        }
    }

    /// True when neither `--owner` nor `--uid` was given.
    pub fn is_empty(&self) -> bool {
        self.kind_name.is_none() && self.uid.is_none()
    }

    /// Does `owner` pass the filter?
    pub fn matches(&self, owner: &Owner) -> bool {
        self.matches_text(
            owner.kind.as_str(),
            &owner.name,
            owner.uid.as_ref().map(Uid::as_str),
        )
    }

    /// Does the owner with these fields pass the filter? (For owners known only as text.)
    pub fn matches_text(&self, kind: &str, name: &str, uid: Option<&str>) -> bool {
        let kind_name_ok = self.kind_name.as_ref().is_none_or(|(k, n)| {
            k.as_str() == kind
                && if self.prefix {
                    name.starts_with(n.as_str())
                } else {
                    name == n
                }
        });
        let uid_ok = self.uid.as_ref().is_none_or(|u| uid == Some(u.as_str()));
        kind_name_ok && uid_ok
    }
}

/// `public` (cluster-scoped, operator-made) or `private` (a VPC's range, namespaced).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum PoolKind {
    /// Cluster-scoped; floating IPs and router uplinks come from it.
    Public,
    /// A VPC's own range in a tenant namespace.
    Private,
}

impl fmt::Display for PoolKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            PoolKind::Public => "public",
            PoolKind::Private => "private",
        })
    }
}

/// An entry of `spec.exclude`: one address, or a prefix inside the pool.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Exclude(Ipv4Net);

impl Exclude {
    /// The excluded addresses as a prefix (a /32 for a single address).
    pub fn net(self) -> Ipv4Net {
        self.0
    }
}

impl TryFrom<String> for Exclude {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        if s.contains('/') {
            parse_net(&s).map(Exclude)
        } else {
            parse_addr(&s).map(|a| Exclude(Ipv4Net::from(a)))
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
        if self.0.prefix_len() == 32 {
            self.0.addr().fmt(f)
        } else {
            self.0.fmt(f)
        }
    }
}

/// Parses an IPv4 address, saying so plainly when it is IPv6.
pub fn parse_addr(s: &str) -> Result<Ipv4Addr, String> {
    s.parse::<Ipv4Addr>().map_err(|_| {
        if s.parse::<std::net::Ipv6Addr>().is_ok() {
            format!("`{s}` is an IPv6 address; only IPv4 is supported")
        } else {
            format!("`{}` is not an IPv4 address", s.escape_debug())
        }
    })
}

/// Parses an IPv4 prefix without host bits, suggesting the prefix that was probably meant.
pub fn parse_net(s: &str) -> Result<Ipv4Net, String> {
    // ipnet reads `010.0.0.0/8` as 10.0.0.0/8 where inet_aton(3) reads 8.0.0.0/8: refuse
    // leading zeros, as `Ipv4Addr` (and so `parse_addr`) does.
    let strict = s.split_once('/').is_some_and(|(addr, len)| {
        addr.parse::<Ipv4Addr>().is_ok() && (len == "0" || !len.starts_with('0'))
    });
    let net = s
        .parse::<Ipv4Net>()
        .ok()
        .filter(|_| strict)
        .ok_or_else(|| {
            if s.parse::<ipnet::Ipv6Net>().is_ok() {
                format!("`{s}` is an IPv6 prefix; only IPv4 is supported")
            } else {
                format!(
                    "`{}` is not an IPv4 prefix like `10.0.0.0/16`",
                    s.escape_debug()
                )
            }
        })?;
    if net.trunc() != net {
        return Err(format!(
            "`{s}` has host bits set; did you mean `{}`?",
            net.trunc()
        ));
    }
    Ok(net)
}

pub(crate) mod serde_ipv4 {
    //! Serde for IPv4 addresses and prefixes with the messages of `parse_addr`/`parse_net`.
    use super::*;
    use serde::{Deserializer, Serializer};

    pub mod addr {
        use super::*;
        pub fn serialize<S: Serializer>(a: &Ipv4Addr, s: S) -> Result<S::Ok, S::Error> {
            s.collect_str(a)
        }
        pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Ipv4Addr, D::Error> {
            let s = String::deserialize(d)?;
            parse_addr(&s).map_err(serde::de::Error::custom)
        }
    }

    pub mod opt_addr {
        use super::*;
        pub fn serialize<S: Serializer>(a: &Option<Ipv4Addr>, s: S) -> Result<S::Ok, S::Error> {
            match a {
                Some(a) => s.collect_str(a),
                None => s.serialize_none(),
            }
        }
        pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Ipv4Addr>, D::Error> {
            let s = Option::<String>::deserialize(d)?;
            s.map(|s| parse_addr(&s).map_err(serde::de::Error::custom))
                .transpose()
        }
    }

    pub mod net {
        use super::*;
        pub fn serialize<S: Serializer>(n: &Ipv4Net, s: S) -> Result<S::Ok, S::Error> {
            s.collect_str(n)
        }
        pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Ipv4Net, D::Error> {
            let s = String::deserialize(d)?;
            parse_net(&s).map_err(serde::de::Error::custom)
        }
    }
}

/// A reference to an owning object, as Kubernetes writes it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct OwnerRef {
    /// The owner's kind, e.g. `VPC`.
    pub kind: String,
    /// The owner's uid.
    pub uid: String,
    /// The owner's name, if recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Whether this owner is the managing controller.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub controller: Option<bool>,
}

/// An instant with second precision, written as RFC 3339 in UTC (`2026-12-01T07:00:00Z`),
/// the form Kubernetes writes `metadata.creationTimestamp` in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Timestamp(std::time::SystemTime);

impl Timestamp {
    /// Now, truncated to the second.
    pub fn now() -> Timestamp {
        Timestamp::truncated(std::time::SystemTime::now())
    }

    /// `at`, truncated to the second (the precision the text form keeps).
    pub fn truncated(at: std::time::SystemTime) -> Timestamp {
        let since = at
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_secs();
        Timestamp(std::time::UNIX_EPOCH + std::time::Duration::from_secs(since))
    }

    /// Parses RFC 3339 in UTC (`Z`), as written; the error names the value.
    pub fn parse(s: &str) -> Result<Timestamp, String> {
        humantime::parse_rfc3339(s).map(Timestamp).map_err(|e| {
            format!(
                "invalid time `{}`: {e}; expected RFC 3339 in UTC, e.g. `2026-12-01T07:00:00Z`",
                s.escape_debug()
            )
        })
    }

    /// The instant.
    pub fn time(self) -> std::time::SystemTime {
        self.0
    }

    /// Seconds since the epoch (0 for an instant before it, which no claim makes).
    pub fn secs(self) -> u64 {
        self.0
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs())
    }

    /// The instant `secs` seconds after the epoch.
    pub fn from_secs(secs: u64) -> Timestamp {
        Timestamp(std::time::UNIX_EPOCH + std::time::Duration::from_secs(secs))
    }
}

impl TryFrom<String> for Timestamp {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        Timestamp::parse(&s)
    }
}

impl From<Timestamp> for String {
    fn from(t: Timestamp) -> String {
        t.to_string()
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", humantime::format_rfc3339_seconds(self.0))
    }
}

/// `metadata` of both manifests. All listed fields are kept on read and write; others are
/// refused rather than silently dropped.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Metadata {
    /// The object's name (a pool name, or `<pool>-<a-b-c-d>` for an allocation).
    pub name: String,
    /// The namespace; none for cluster-scoped objects.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<Namespace>,
    /// When the object was created (allocations: written once, by the claim), RFC 3339 in
    /// UTC with second precision. Absent in state written by older versions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::timestamp")]
    pub creation_timestamp: Option<Timestamp>,
    /// Labels, in key order.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// Annotations, in key order.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
    /// Owning objects.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub owner_refs: Vec<OwnerRef>,
}

/// `spec` of an `IPAMPool`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PoolSpec {
    /// The pool's prefix (no host bits).
    #[serde(with = "serde_ipv4::net")]
    #[schemars(schema_with = "crate::schema::cidr")]
    pub cidr: Ipv4Net,
    /// `public` or `private`.
    pub kind: PoolKind,
    /// Never allocated.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "serde_ipv4::opt_addr"
    )]
    #[schemars(with = "Option<Ipv4Addr>")]
    pub gateway: Option<Ipv4Addr>,
    /// Addresses or prefixes never handed out.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub exclude: Vec<Exclude>,
    /// Where a public pool is routable (an RFC 1123 label).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::optional_label")]
    pub zone: Option<String>,
    /// How long a released address is kept from other owners (`10m`, `1h30m`); the owner
    /// that released it gets it back meanwhile. None: reused at once.
    #[serde(
        default,
        rename = "reuseAfter",
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(schema_with = "crate::schema::duration")]
    pub reuse_after: Option<crate::cooldown::ReuseAfter>,
}

/// An `IPAMPool` manifest.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PoolManifest {
    /// Always [`API_VERSION`].
    #[schemars(
        schema_with = "crate::schema::api_version",
        description = "Always `pivirt.hu/v1`."
    )]
    pub api_version: String,
    /// Always [`POOL_KIND`].
    #[schemars(
        schema_with = "crate::schema::pool_kind",
        description = "Always `IPAMPool`."
    )]
    pub kind: String,
    /// Name, namespace, labels…
    #[schemars(schema_with = "crate::schema::pool_metadata")]
    pub metadata: Metadata,
    /// The pool itself.
    pub spec: PoolSpec,
}

/// `spec` of an `IPAllocation`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AllocationSpec {
    /// The pool the address comes from.
    pub pool: PoolName,
    /// The address held.
    #[serde(with = "serde_ipv4::addr")]
    #[schemars(with = "Ipv4Addr")]
    pub address: Ipv4Addr,
    /// Who holds it.
    pub owner: Owner,
}

/// An `IPAllocation` manifest. Only ipamctl writes these.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct AllocationManifest {
    /// Always [`API_VERSION`].
    #[schemars(
        schema_with = "crate::schema::api_version",
        description = "Always `pivirt.hu/v1`."
    )]
    pub api_version: String,
    /// Always [`ALLOCATION_KIND`].
    #[schemars(
        schema_with = "crate::schema::allocation_kind",
        description = "Always `IPAllocation`."
    )]
    pub kind: String,
    /// Name `<pool>-<a-b-c-d>`, the pool's namespace, the managed-by label.
    #[schemars(schema_with = "crate::schema::allocation_metadata")]
    pub metadata: Metadata,
    /// Pool, address, owner.
    pub spec: AllocationSpec,
}

/// The allocation name of `address` in `pool`: `<pool>-<a-b-c-d>`.
///
/// # Examples
///
/// ```
/// use ipamctl::model::{allocation_name, PoolName};
/// let pool = PoolName::new("vpc-main").unwrap();
/// assert_eq!(allocation_name(&pool, "10.42.1.7".parse().unwrap()), "vpc-main-10-42-1-7");
/// ```
pub fn allocation_name(pool: &PoolName, address: Ipv4Addr) -> String {
    let mut name = String::with_capacity(pool.as_str().len() + 16);
    push_allocation_name(&mut name, pool.as_str(), address);
    name
}

/// Appends the allocation name of `address` in the pool named `pool` to `out`: the inverse
/// of [`parse_allocation_name`] on the names it accepts.
pub fn push_allocation_name(out: &mut String, pool: &str, address: Ipv4Addr) {
    // By hand rather than `format!`: a look-up names every file of a pool, 50,000 at a
    // time, and the formatting machinery was a tenth of it.
    out.push_str(pool);
    for octet in address.octets() {
        out.push('-');
        if octet >= 100 {
            out.push(char::from(b'0' + octet / 100));
        }
        if octet >= 10 {
            out.push(char::from(b'0' + octet / 10 % 10));
        }
        out.push(char::from(b'0' + octet % 10));
    }
}

/// Splits an allocation name into pool and address: the last four `-`-separated groups are
/// the address, so the split is unique. `None` when the name is not of that form.
pub fn parse_allocation_name(name: &str) -> Option<(&str, Ipv4Addr)> {
    // Byte-wise from the end: every command parses every listed name, so this is hot.
    let bytes = name.as_bytes();
    let mut end = bytes.len();
    let mut octets = [0u8; 4];
    for octet in octets.iter_mut().rev() {
        let dash = bytes[..end].iter().rposition(|&b| b == b'-')?;
        let group = &bytes[dash + 1..end];
        if group.is_empty() || group.len() > 3 || (group.len() > 1 && group[0] == b'0') {
            return None;
        }
        let mut value: u16 = 0;
        for &b in group {
            if !b.is_ascii_digit() {
                return None;
            }
            value = value * 10 + u16::from(b - b'0');
        }
        *octet = u8::try_from(value).ok()?;
        end = dash;
    }
    let pool = &name[..end];
    (!pool.is_empty()).then_some((pool, Ipv4Addr::from(octets)))
}

impl AllocationManifest {
    /// The manifest of `owner` holding `address` in `pool` (in `namespace`), without a
    /// creation time: the claim sets it ([`Timestamp::now`]).
    pub fn new(
        pool: &PoolName,
        namespace: Option<&Namespace>,
        address: Ipv4Addr,
        owner: Owner,
    ) -> AllocationManifest {
        AllocationManifest {
            api_version: API_VERSION.into(),
            kind: ALLOCATION_KIND.into(),
            metadata: Metadata {
                name: allocation_name(pool, address),
                namespace: namespace.cloned(),
                creation_timestamp: None,
                labels: BTreeMap::from([(MANAGED_BY_LABEL.into(), MANAGED_BY.into())]),
                annotations: BTreeMap::new(),
                owner_refs: Vec::new(),
            },
            spec: AllocationSpec {
                pool: pool.clone(),
                address,
                owner,
            },
        }
    }
}

impl PoolManifest {
    /// The pool's validated name.
    ///
    /// Callers get manifests from [`crate::yaml::decode_pool`], which validated it already.
    pub fn name(&self) -> PoolName {
        PoolName::new(&self.metadata.name).expect("decode_pool validated metadata.name")
    }

    /// Cross-field checks that serde cannot express; each message names the field and value.
    pub fn validate(&self) -> Result<(), String> {
        if self.api_version != API_VERSION {
            return Err(format!(
                "apiVersion: `{}` is not supported; expected `{API_VERSION}`",
                self.api_version
            ));
        }
        if self.kind != POOL_KIND {
            return Err(format!(
                "kind: expected `{POOL_KIND}`, found `{}`",
                self.kind
            ));
        }
        PoolName::new(&self.metadata.name).map_err(|e| format!("metadata.name: {e}"))?;
        let spec = &self.spec;
        match (spec.kind, &self.metadata.namespace) {
            (PoolKind::Public, Some(ns)) => {
                return Err(format!(
                    "metadata.namespace: a public pool is cluster-scoped and has no namespace, found `{ns}`"
                ));
            }
            (PoolKind::Private, None) => {
                return Err("metadata.namespace: a private pool needs a namespace (the VPC's tenant namespace)".into());
            }
            _ => {}
        }
        if let Some(gw) = spec.gateway
            && !spec.cidr.contains(&gw)
        {
            return Err(format!("spec.gateway: `{gw}` is outside `{}`", spec.cidr));
        }
        for entry in &spec.exclude {
            if !spec.cidr.contains(&entry.net()) {
                return Err(format!(
                    "spec.exclude: `{entry}` is outside `{}`",
                    spec.cidr
                ));
            }
        }
        if let Some(zone) = &spec.zone {
            check_label(zone).map_err(|why| format!("spec.zone: `{zone}` {why}"))?;
        }
        Ok(())
    }
}

impl AllocationManifest {
    /// Cross-field checks of an allocation read from the state directory.
    pub fn validate(&self) -> Result<(), String> {
        if self.api_version != API_VERSION {
            return Err(format!(
                "apiVersion: `{}` is not supported; expected `{API_VERSION}`",
                self.api_version
            ));
        }
        if self.kind != ALLOCATION_KIND {
            return Err(format!(
                "kind: expected `{ALLOCATION_KIND}`, found `{}`",
                self.kind
            ));
        }
        let expected = allocation_name(&self.spec.pool, self.spec.address);
        if self.metadata.name != expected {
            return Err(format!(
                "metadata.name: `{}` does not match spec.pool and spec.address; expected `{expected}`",
                self.metadata.name
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kind_filter_passes_every_owner_of_that_kind() {
        let vm = Owner::parse("VirtualMachine/web-01/0", None).unwrap();
        let fip = Owner::parse("FloatingIP/fip-1", None).unwrap();
        let kind = OwnerFilter::default()
            .with_kind(OwnerKind::VirtualMachine)
            .unwrap();
        assert!(kind.matches(&vm) && !kind.matches(&fip) && !kind.is_empty());
        let both = OwnerFilter::new(Some("FloatingIP/fip-1"), None).unwrap();
        assert!(
            both.clone()
                .with_kind(OwnerKind::FloatingIp)
                .unwrap()
                .matches(&fip)
        );
        assert!(both.with_kind(OwnerKind::Node).is_err());
    }

    #[test]
    fn labels_follow_rfc_1123() {
        assert!(PoolName::new("vpc-main").is_ok());
        assert!(PoolName::new("Vpc").is_err());
        assert!(PoolName::new("-a").is_err());
        assert!(PoolName::new(&"a".repeat(64)).is_err());
        assert!(PoolName::new(&"a".repeat(63)).is_ok());
        assert!(PoolName::new("a..b").is_err());
    }

    #[test]
    fn namespaces_are_slash_separated_labels() {
        assert!(Namespace::new("acme/prod").is_ok());
        assert!(Namespace::new("acme//prod").is_err());
        assert!(Namespace::new("/acme").is_err());
        assert!(Namespace::new("acme/..").is_err());
        assert!(Namespace::new("acme/ipallocations").is_err());
    }

    #[test]
    fn owner_names_follow_their_kind() {
        assert!(Owner::parse("VirtualMachine/web-01/0", None).is_ok());
        assert!(Owner::parse("VirtualMachine/web-01", None).is_err());
        assert!(Owner::parse("VirtualMachine/web-01/01", None).is_err());
        assert!(Owner::parse("VPC/router", None).is_ok());
        assert!(Owner::parse("VPC/edge", None).is_err());
        assert!(Owner::parse("Node/10.42.1.0/24", None).is_ok());
        assert!(Owner::parse("Node/10.42.1.1/24", None).is_err());
        assert!(Owner::parse("FloatingIP/fip-1", None).is_ok());
        assert!(Owner::parse("Pod/x", None).is_err());
    }

    #[test]
    fn allocation_names_round_trip() {
        let pool = PoolName::new("a-1-2-3-4").unwrap();
        let addr: Ipv4Addr = "10.0.0.1".parse().unwrap();
        let name = allocation_name(&pool, addr);
        assert_eq!(parse_allocation_name(&name), Some(("a-1-2-3-4", addr)));
        assert_eq!(parse_allocation_name("x-10-0-0"), None);
        assert_eq!(parse_allocation_name("x-10-0-0-256"), None);
        assert_eq!(parse_allocation_name("x-10-0-0-01"), None);
        assert_eq!(parse_allocation_name("-10-0-0-1"), None);
    }

    #[test]
    fn host_bits_suggest_the_prefix() {
        let err = parse_net("10.42.1.0/16").unwrap_err();
        assert!(err.contains("did you mean `10.42.0.0/16`"), "{err}");
        assert!(parse_net("2001:db8::/32").unwrap_err().contains("IPv6"));
    }

    #[test]
    fn input_uids_are_uuids_kept_lowercase() {
        let upper = Uid::parse_uuid("3F2C8A9E-1B7D-4E0A-9C55-0D1E2F3A4B5C").unwrap();
        assert_eq!(upper.as_str(), "3f2c8a9e-1b7d-4e0a-9c55-0d1e2f3a4b5c");
        assert!(upper.is_uuid());
        for bad in [
            "",
            "u-1",
            "web-01",
            "{3f2c8a9e-1b7d-4e0a-9c55-0d1e2f3a4b5c}",
            "3f2c8a9e1b7d4e0a9c550d1e2f3a4b5c",
            "3f2c8a9e-1b7d-4e0a-9c55-0d1e2f3a4b5g",
        ] {
            let err = Uid::parse_uuid(bad).unwrap_err();
            assert!(
                err.contains(&format!("`{bad}`")) && !err.contains("$UID"),
                "{err}"
            );
        }
        assert!(Uid::parse_uuid("1000").unwrap_err().contains("`$UID`"));
    }

    #[test]
    fn owner_key_is_stable() {
        let owner = Owner::parse("VPC/router", Some(Uid::new("u-1").unwrap())).unwrap();
        assert!(!Uid::new("u-1").unwrap().is_uuid());
        // Pinned: a change here breaks lock and index agreement between versions.
        assert_eq!(owner.key(), owner.clone().key());
        assert_eq!(
            format!("{:016x}", owner.key()),
            format!("{:016x}", 0xb10a_290d_d809_7929_u64)
        );
    }
}
