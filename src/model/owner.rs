//! Owner identities (kind, name, uid) and the filters that select them.

use std::fmt;
use std::str::FromStr;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::model::address::parse_net;
use crate::model::names::{Namespace, Uid, check_label};

/// What kind of thing holds an address, and so which rule its name follows.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
pub enum OwnerKind {
    /// A VM's NIC: name `<hostname>/<nic index>`, e.g. `web-01/0`.
    VirtualMachine,
    /// A floating IP: its own name (an RFC 1123 label), or a tenant's,
    /// `<tenant namespace>/<label>` ([`crate::model::tenant`]).
    #[serde(rename = "FloatingIP")]
    FloatingIp,
    /// A VPC router's uplink: name is always `router`.
    #[serde(rename = "VPC")]
    Vpc,
    /// A host's own address on a subnet: name `<subnet>` (a label or an IPv4 prefix).
    Node,
}

impl OwnerKind {
    /// Does an owner of this kind have a NIC, and so a MAC (`spec.mac`)? A VM's NIC and a
    /// node's own interface do; a floating IP and a VPC router's uplink are addresses
    /// routed to something else.
    pub fn has_nic(self) -> bool {
        matches!(self, OwnerKind::VirtualMachine | OwnerKind::Node)
    }

    /// Is an owner of this kind one identity per name in a pool? Every kind but `VPC`: a
    /// VM's NIC, a floating IP and a node are named for what they are, so the same name
    /// under another uid (or none) is the same thing asking, or its namesake, never a
    /// second holder (`crate::engine::identity`). A VPC router's name is always `router`:
    /// its uid, the VPC's, is what tells the uplinks of a shared public pool apart.
    pub fn one_per_name(self) -> bool {
        !matches!(self, OwnerKind::Vpc)
    }

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
                    check_label(label)
                        .map_err(|why| format!("hostname `{}` {why}", host.escape_debug()))?;
                }
                let digits_ok = !nic.is_empty()
                    && nic.len() <= 4
                    && nic.bytes().all(|b| b.is_ascii_digit())
                    && (nic == "0" || !nic.starts_with('0'));
                if !digits_ok {
                    return Err(format!(
                        "NIC index `{}` must be a number like `0` or `12`",
                        nic.escape_debug()
                    ));
                }
                Ok(())
            }
            OwnerKind::FloatingIp => crate::model::tenant::check_floating_name(name),
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

impl Owner {
    /// Does `other` hold `self`'s name under another identity: the same kind and name, of
    /// a kind that is one identity per name ([`OwnerKind::one_per_name`]), another uid (or
    /// one of them none)?
    pub fn is_namesake(&self, other: &Owner) -> bool {
        self.kind == other.kind
            && self.kind.one_per_name()
            && self.name == other.name
            && self.uid != other.uid
    }

    /// The key of what a claim locks for this owner (the file store's owner lock): the
    /// name's for a kind that is one identity per name, so that requests for the name with
    /// and without a uid run one after the other, and [`Owner::key`] (with the uid) for a
    /// VPC. The same as [`Owner::key`] for an owner without a uid: locks taken by older
    /// versions for such owners are the same bytes (for one with a uid the file store takes
    /// [`Owner::key`] too, after this one, so that older versions still meet it).
    pub fn lock_key(&self) -> u64 {
        if self.kind.one_per_name() && self.uid.is_some() {
            Owner {
                kind: self.kind,
                uid: None,
                name: self.name.clone(),
            }
            .key()
        } else {
            self.key()
        }
    }
}

impl Owner {
    /// Tenant `tenant`'s floating IP `name` (a label): `FloatingIP/<tenant>/<name>`.
    ///
    /// # Examples
    ///
    /// ```
    /// use ipamctl::model::{Namespace, Owner};
    /// let acme = Namespace::new("acme/prod").unwrap();
    /// let owner = Owner::floating(&acme, "fip-web", None).unwrap();
    /// assert_eq!(owner.to_string(), "FloatingIP/acme/prod/fip-web");
    /// assert_eq!(owner.tenant(), Some(acme));
    /// assert_eq!(owner.floating_name(), "fip-web");
    /// assert!(Owner::floating(&Namespace::new("b").unwrap(), "x/y", None).is_err());
    /// ```
    pub fn floating(tenant: &Namespace, name: &str, uid: Option<Uid>) -> Result<Owner, String> {
        check_label(name).map_err(|why| {
            format!(
                "invalid FloatingIP name `{}`: {why} (the tenant is given apart)",
                name.escape_debug()
            )
        })?;
        Owner::new(OwnerKind::FloatingIp, &format!("{tenant}/{name}"), uid)
    }

    /// The tenant of a tenant's floating IP (`FloatingIP/<tenant>/<name>`); `None` for
    /// every other owner.
    pub fn tenant(&self) -> Option<Namespace> {
        if self.kind() != OwnerKind::FloatingIp {
            return None;
        }
        let (tenant, _) = self.name().rsplit_once('/')?;
        Namespace::new(tenant).ok()
    }

    /// A floating IP's own name, without its tenant (the whole name of any other owner).
    pub fn floating_name(&self) -> &str {
        match self.kind() {
            OwnerKind::FloatingIp => self.name().rsplit('/').next().unwrap_or(self.name()),
            _ => self.name(),
        }
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

    /// The filter that passes `owner`: its kind, name and uid; for an owner without a uid,
    /// its name whatever the uid (a filter's omitted `--uid` matches any), which in a pool
    /// is the same owner: a name is one identity per pool ([`OwnerKind::one_per_name`]).
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
