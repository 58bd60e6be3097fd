//! The two manifests (`IPAMPool`, `IPAllocation`) and the validated names they are made of.
//!
//! Every name is validated once, where it enters (a flag, a manifest); after that the code
//! passes the newtype around, never a bare `&str`.

use std::collections::BTreeMap;
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::str::FromStr;

use ipnet::IpNet;
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
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(try_from = "String")]
pub struct Exclude(IpNet);

impl Serialize for Exclude {
    /// Its text; an IPv6 address alone is quoted in YAML, as `spec.address` is.
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let text = self.to_string();
        match self.0 {
            IpNet::V6(_) if !text.contains('/') => crate::yaml::quoted(&text, s),
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
                IpAddr::V6(_) => crate::yaml::quoted(&a.to_string(), s),
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
    #[serde(with = "serde_ip::net")]
    #[schemars(schema_with = "crate::schema::cidr")]
    pub cidr: IpNet,
    /// `public` or `private`.
    pub kind: PoolKind,
    /// Never allocated.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "serde_ip::opt_addr"
    )]
    #[schemars(schema_with = "crate::schema::optional_address")]
    pub gateway: Option<IpAddr>,
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
    #[serde(with = "serde_ip::addr")]
    #[schemars(schema_with = "crate::schema::address")]
    pub address: IpAddr,
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

/// The allocation name of `address` in `pool`: `<pool>-<a-b-c-d>` for IPv4; for IPv6 the
/// pool's name and the address's eight groups as four lowercase hex digits each, joined by
/// `-`. One address has exactly one name, without `:` (valid on every file system and a
/// DNS-1123 subdomain), and the address parses back from its fixed-length suffix.
///
/// # Examples
///
/// ```
/// use ipamctl::model::{allocation_name, PoolName};
/// let pool = PoolName::new("vpc-main").unwrap();
/// assert_eq!(allocation_name(&pool, "10.42.1.7".parse().unwrap()), "vpc-main-10-42-1-7");
/// let pool = PoolName::new("vpc-main-v6").unwrap();
/// assert_eq!(
///     allocation_name(&pool, "2001:db8::1".parse().unwrap()),
///     "vpc-main-v6-2001-0db8-0000-0000-0000-0000-0000-0001"
/// );
/// ```
pub fn allocation_name(pool: &PoolName, address: IpAddr) -> String {
    let mut name = String::with_capacity(pool.as_str().len() + 40);
    push_allocation_name(&mut name, pool.as_str(), address);
    name
}

/// Length of an IPv6 name's suffix: eight groups of four hex digits and seven `-`.
const V6_SUFFIX: usize = 8 * 4 + 7;

/// Appends the allocation name of `address` in the pool named `pool` to `out`: the inverse
/// of [`parse_allocation_name`] on the names it accepts.
pub fn push_allocation_name(out: &mut String, pool: &str, address: IpAddr) {
    out.push_str(pool);
    match address {
        IpAddr::V4(v4) => push_v4_suffix(out, v4),
        IpAddr::V6(v6) => {
            const DIGITS: &[u8; 16] = b"0123456789abcdef";
            for group in v6.segments() {
                out.push('-');
                for shift in [12, 8, 4, 0] {
                    out.push(char::from(DIGITS[usize::from((group >> shift) & 0xf)]));
                }
            }
        }
    }
}

fn push_v4_suffix(out: &mut String, address: Ipv4Addr) {
    // By hand rather than `format!`: a look-up names every file of a pool, 50,000 at a
    // time, and the formatting machinery was a tenth of it.
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

/// Splits an allocation name into pool and address: the last four `-`-separated decimal
/// groups are an IPv4 address, or the last eight groups of exactly four lowercase hex digits
/// an IPv6 address, so the split is unique (an IPv4 group has at most three characters, an
/// IPv6 one exactly four). `None` when the name is not of either form: every name that parses
/// is the one [`push_allocation_name`] writes for its pool and address.
pub fn parse_allocation_name(name: &str) -> Option<(&str, IpAddr)> {
    let bytes = name.as_bytes();
    // An IPv6 name's last group is four characters long, an IPv4 name's at most three: a
    // name that parses as one cannot parse as the other.
    if bytes.len() > V6_SUFFIX + 1
        && bytes[bytes.len() - 5] == b'-'
        && let Some(v6) = parse_v6_name(name)
    {
        return Some(v6);
    }
    parse_v4_name(name).map(|(pool, a)| (pool, IpAddr::V4(a)))
}

fn parse_v6_name(name: &str) -> Option<(&str, IpAddr)> {
    let bytes = name.as_bytes();
    let split = bytes.len().checked_sub(V6_SUFFIX + 1)?;
    if split == 0 || bytes[split] != b'-' {
        return None;
    }
    let mut segments = [0u16; 8];
    for (i, segment) in segments.iter_mut().enumerate() {
        let at = split + 1 + i * 5;
        if i > 0 && bytes[at - 1] != b'-' {
            return None;
        }
        for &b in &bytes[at..at + 4] {
            let digit = match b {
                b'0'..=b'9' => b - b'0',
                b'a'..=b'f' => b - b'a' + 10,
                _ => return None,
            };
            *segment = *segment << 4 | u16::from(digit);
        }
    }
    Some((&name[..split], IpAddr::V6(Ipv6Addr::from(segments))))
}

fn parse_v4_name(name: &str) -> Option<(&str, Ipv4Addr)> {
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
        address: IpAddr,
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
        let family = family_name(spec.cidr.addr());
        if let Some(gw) = spec.gateway {
            if family_name(gw) != family {
                return Err(format!(
                    "spec.gateway: `{gw}` is an {} address but spec.cidr `{}` is {family}",
                    family_name(gw),
                    spec.cidr
                ));
            }
            if !spec.cidr.contains(&gw) {
                return Err(format!("spec.gateway: `{gw}` is outside `{}`", spec.cidr));
            }
        }
        for entry in &spec.exclude {
            let entry_family = family_name(entry.net().addr());
            if entry_family != family {
                let what = if entry.to_string().contains('/') {
                    "prefix"
                } else {
                    "address"
                };
                return Err(format!(
                    "spec.exclude: `{entry}` is an {entry_family} {what} but spec.cidr `{}` is {family}",
                    spec.cidr
                ));
            }
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
        let addr: IpAddr = "10.0.0.1".parse().unwrap();
        let name = allocation_name(&pool, addr);
        assert_eq!(parse_allocation_name(&name), Some(("a-1-2-3-4", addr)));
        assert_eq!(parse_allocation_name("x-10-0-0"), None);
        // Two-digit last octets end `-NN` like IPv6 groups' dashes: still IPv4.
        for addr in ["10.42.0.10", "10.0.0.99", "0.0.0.0", "255.255.255.255"] {
            let addr: IpAddr = addr.parse().unwrap();
            let name = allocation_name(&pool, addr);
            assert_eq!(
                parse_allocation_name(&name),
                Some(("a-1-2-3-4", addr)),
                "{name}"
            );
        }
        let long = PoolName::new("p-0000-0000-0000-0000-0000-0000-0000").unwrap();
        for addr in ["10.42.0.10", "2001:db8::1"] {
            let addr: IpAddr = addr.parse().unwrap();
            let name = allocation_name(&long, addr);
            assert_eq!(
                parse_allocation_name(&name),
                Some((long.as_str(), addr)),
                "{name}"
            );
        }
        assert_eq!(parse_allocation_name("x-10-0-0-256"), None);
        assert_eq!(parse_allocation_name("x-10-0-0-01"), None);
        assert_eq!(parse_allocation_name("-10-0-0-1"), None);
    }

    #[test]
    fn host_bits_suggest_the_prefix() {
        let err = parse_net("10.42.1.0/16").unwrap_err();
        assert!(err.contains("did you mean `10.42.0.0/16`"), "{err}");
        let err = parse_net("2001:db8::1/32").unwrap_err();
        assert!(err.contains("did you mean `2001:db8::/32`"), "{err}");
        assert!(parse_net("2001:db8::/032").is_err());
        assert_eq!(
            parse_net("2001:DB8::/32").unwrap().to_string(),
            "2001:db8::/32"
        );
    }

    #[test]
    fn ipv6_allocation_names_round_trip_and_refuse_every_other_form() {
        let pool = PoolName::new("vpc-main-v6").unwrap();
        for text in [
            "2001:db8::1",
            "::",
            "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
            "fd00:42::abcd:1",
        ] {
            let addr: IpAddr = text.parse().unwrap();
            let name = allocation_name(&pool, addr);
            assert!(!name.contains(':') && !name.ends_with('-'), "{name}");
            assert_eq!(parse_allocation_name(&name), Some(("vpc-main-v6", addr)));
        }
        let good = "p-2001-0db8-0000-0000-0000-0000-0000-0001";
        assert!(parse_allocation_name(good).is_some());
        for bad in [
            "p-2001-db8-0-0-0-0-0-abcd",                  // compressed groups
            "p-2001-0DB8-0000-0000-0000-0000-0000-0001",  // uppercase
            "p-2001-0db8--1",                             // `::` as `--`
            "p-2001-0db8-0000-0000-0000-0000-0001",       // seven groups
            "-2001-0db8-0000-0000-0000-0000-0000-0001",   // no pool
            "2001-0db8-0000-0000-0000-0000-0000-0001",    // no pool at all
            "p-2001-0db8-0000-0000-0000-0000-0000-000g",  // not hex
            "p-2001-0db8-0000-0000-0000-0000-0000-00001", // five digits
            "p-2001-0db8-0000-0000-0000-0000-0000_0001",  // wrong separator
            "p-2001:0db8:0000:0000:0000:0000:0000:0001",  // colons
        ] {
            assert_eq!(parse_allocation_name(bad), None, "{bad}");
        }
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
