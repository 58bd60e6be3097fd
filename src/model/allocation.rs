//! The `IPAllocation` manifest, and allocation names: `<pool>-` and the address, one name
//! per address, parsed back uniquely.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::model::address::serde_ip;
use crate::model::mac::Mac;
use crate::model::manifest::{
    ALLOCATION_KIND, API_VERSION, MANAGED_BY, MANAGED_BY_LABEL, Metadata,
};
use crate::model::names::{Namespace, PoolName};
use crate::model::owner::Owner;
use crate::model::tenant::{TENANT_LABEL, label_value};
use crate::model::time::Timestamp;

/// `spec` of an `IPAllocation`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AllocationSpec {
    /// The pool the address comes from.
    pub pool: PoolName,
    /// The address held.
    #[serde(with = "serde_ip::addr")]
    #[schemars(schema_with = "crate::model::schema::fields::address")]
    pub address: IpAddr,
    /// Who holds it.
    pub owner: Owner,
    /// The MAC of the owner's NIC, for owners that have one (`VirtualMachine`, `Node`):
    /// what a DHCP server matches the NIC by. Held by at most one allocation of the pool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mac: Option<Mac>,
    /// When the claim lapses unless its owner renews it (`allocate --ttl`, `renew`), in
    /// RFC 3339 UTC; none: it never lapses. A lapsed lease is still held until `reconcile
    /// --expired --apply` (or a server's reaper) releases it, `--grace` after this instant.
    #[serde(rename = "expiresAt", default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<String>")]
    pub expires_at: Option<Timestamp>,
}

impl AllocationSpec {
    /// Whether the claim is a lease that has lapsed `grace` before `now`: its `expiresAt`
    /// plus `grace` is not after `now`.
    pub fn lapsed(&self, now: Timestamp, grace: std::time::Duration) -> bool {
        self.expires_at
            .is_some_and(|at| at.time() + grace <= now.time())
    }
}

/// An `IPAllocation` manifest. Only ipamctl writes these.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct AllocationManifest {
    /// Always [`API_VERSION`].
    #[schemars(
        schema_with = "crate::model::schema::fields::api_version",
        description = "Always `pivirt.hu/v1`."
    )]
    pub api_version: String,
    /// Always [`ALLOCATION_KIND`].
    #[schemars(
        schema_with = "crate::model::schema::fields::allocation_kind",
        description = "Always `IPAllocation`."
    )]
    pub kind: String,
    /// Name `<pool>-<a-b-c-d>`, the pool's namespace, the managed-by label.
    #[schemars(schema_with = "crate::model::manifest::allocation_metadata")]
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

/// The part of an allocation's name that its address makes, whatever its pool:
/// `-10-0-0-1`, or the eight full groups of an IPv6 address. `history ADDRESS` finds an
/// address's files in every pool by it.
pub fn allocation_suffix(address: IpAddr) -> String {
    let mut suffix = String::with_capacity(40);
    push_allocation_name(&mut suffix, "", address);
    suffix
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
    /// creation time: the claim sets it ([`Timestamp::now`]). A tenant's floating IP gets
    /// its tenant's label ([`crate::model::tenant`]).
    pub fn new(
        pool: &PoolName,
        namespace: Option<&Namespace>,
        address: IpAddr,
        owner: Owner,
    ) -> AllocationManifest {
        let mut labels = BTreeMap::from([(MANAGED_BY_LABEL.into(), MANAGED_BY.into())]);
        if let Some(value) = owner.tenant().and_then(|tenant| label_value(&tenant)) {
            labels.insert(TENANT_LABEL.into(), value);
        }
        AllocationManifest {
            api_version: API_VERSION.into(),
            kind: ALLOCATION_KIND.into(),
            metadata: Metadata {
                name: allocation_name(pool, address),
                namespace: namespace.cloned(),
                creation_timestamp: None,
                deletion_timestamp: None,
                labels,
                annotations: BTreeMap::new(),
                owner_refs: Vec::new(),
            },
            spec: AllocationSpec {
                pool: pool.clone(),
                address,
                owner,
                mac: None,
                expires_at: None,
            },
        }
    }
}

impl AllocationManifest {
    /// What `check` says of an allocation whose tenant label and owner disagree (a hand edit):
    /// a tenant's floating IP without its label or with another tenant's, a label on an
    /// allocation whose owner is no tenant's, or a tenant's floating IP in a namespace's pool
    /// (a tenant claims from the cluster's public pools).
    pub fn tenant_problem(&self) -> Option<String> {
        let m = self;
        let owner = &m.spec.owner;
        let label = m.metadata.labels.get(TENANT_LABEL);
        match owner.tenant() {
            Some(tenant) => {
                if let Some(ns) = &m.metadata.namespace {
                    return Some(format!(
                        "owner `{owner}` is tenant `{tenant}`'s floating IP, but it is held in pool `{}` of namespace `{ns}`; a tenant's floating IP is claimed from a cluster-scoped public pool",
                        m.spec.pool
                    ));
                }
                let want = label_value(&tenant)?;
                match label {
                    Some(value) if *value == want => None,
                    Some(value) => Some(format!(
                        "owner `{owner}` is tenant `{tenant}`'s floating IP, but its label `{TENANT_LABEL}` is `{value}`, not `{want}`: was the file edited by hand? set the label back to `{want}`"
                    )),
                    None => Some(format!(
                        "owner `{owner}` is tenant `{tenant}`'s floating IP, but its label `{TENANT_LABEL}` is missing: was the file edited by hand? add the label `{TENANT_LABEL}: {want}`"
                    )),
                }
            }
            None => label.map(|value| {
                format!(
                    "label `{TENANT_LABEL}` says tenant `{value}`, but owner `{owner}` names no tenant (a tenant's floating IP is `FloatingIP/<tenant>/<name>`, claimed with `--tenant`): was the file edited by hand? remove the label"
                )
            }),
        }
    }

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

/// The addresses of `pool`'s allocations among the names of its scope.
pub fn pool_addresses<'a>(
    names: &'a [String],
    pool: &'a PoolName,
) -> impl Iterator<Item = IpAddr> + 'a {
    names
        .iter()
        .filter_map(move |name| match parse_allocation_name(name) {
            Some((p, addr)) if p == pool.as_str() => Some(addr),
            _ => None,
        })
}
