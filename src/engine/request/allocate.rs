//! `allocate` as a value: [`AllocateInput`] is the request as a user gives it (clap's
//! arguments, a batch line, later a GraphQL input), [`AllocateRequest::new`] holds every
//! rule that makes it a request of one form (a pool, several pools, a zone, a child
//! prefix), and [`AllocateRequest::run`] claims it, with its warnings and notes as values.

use serde::{Deserialize, Deserializer};

use super::Outcome;
use super::field::{flag, mac_choice, pool_ref, prefix, uid};
use super::input::{Defaults, fields};
use crate::engine::allocate::{Allocated, Request};
use crate::engine::prefix::Want;
use crate::engine::scope::{Scope, Verb};
use crate::engine::warning::Warnings;
use crate::error::{Error, Result};
use crate::model::prefix_claim::PrefixClaimManifest;
use crate::model::{Namespace, Owner, PoolRef, SubnetName};
use crate::store::Store;

/// An `allocate` request as a user gives it: text, unchecked. A batch line's fields are
/// these, camelCased (`prefixLength`, `dryRun`; `pool` or `pools`, `subnet` or `subnets`).
#[derive(Clone, Debug, Default)]
pub struct AllocateInput {
    /// The pools, in order (one, or several for a dual-stack claim; none with `zone`).
    pub pools: Vec<String>,
    /// `-n`: the scope of the pools.
    pub namespace: Option<String>,
    pub owner: Option<String>,
    pub uid: Option<String>,
    /// `--subnet`, once per pool.
    pub subnets: Vec<String>,
    pub address: Option<String>,
    pub within: Option<String>,
    pub reserved: Vec<String>,
    pub zone: Option<String>,
    /// `--tenant`: the namespace a floating IP is claimed for, from the cluster's public
    /// pools (the owner is then `FloatingIP/<tenant>/<name>`: [`crate::model::tenant`]).
    pub tenant: Option<String>,
    /// A MAC or `auto`.
    pub mac: Option<String>,
    pub prefix_length: Option<u8>,
    pub prefix: Option<String>,
    pub dry_run: bool,
    /// `--explain`: why the address is the one (the command line, and the API's
    /// `allocate(explain: true)`; never a batch line).
    pub explain: bool,
    /// `--ttl`: a lease that lapses unless renewed (`90s`, `15m`, `1h`, `7d`).
    pub ttl: Option<String>,
}

/// The fields of a batch's `allocate` request, in the order they are checked.
const FIELDS: &[&str] = &[
    "pool",
    "pools",
    "namespace",
    "owner",
    "uid",
    "subnet",
    "subnets",
    "address",
    "within",
    "reserved",
    "zone",
    "tenant",
    "mac",
    "prefixLength",
    "prefix",
    "dryRun",
    "ttl",
];

impl AllocateInput {
    /// Reads one request of a batch with `deserializer`, the batch's command line giving
    /// what the request leaves out (`defaults`). A request that is not one (not an object,
    /// an unknown field, a value of the wrong type) is exit 2 saying why.
    pub fn read<'de, D: Deserializer<'de>>(
        deserializer: D,
        defaults: &Defaults<'_>,
    ) -> Result<AllocateInput> {
        let read = || -> std::result::Result<AllocateInput, String> {
            let mut f = fields(
                deserializer,
                FIELDS,
                &[("pool", "pools"), ("subnet", "subnets")],
            )?;
            let mut pools = f.texts("pool")?;
            pools.extend(f.texts("pools")?);
            let namespace =
                f.inherited_text("namespace", "--namespace <NS>", defaults.namespace)?;
            let owner = f.text("owner", "--owner <KIND/NAME>")?;
            let uid = f.text("uid", "--uid <UUID>")?;
            let mut subnets = f.texts("subnet")?;
            subnets.extend(f.texts("subnets")?);
            Ok(AllocateInput {
                pools,
                namespace,
                owner,
                uid,
                subnets,
                address: f.text("address", "--address <ADDR>")?,
                within: f.text("within", "--within <CIDR>")?,
                reserved: f.texts("reserved")?,
                zone: f.text("zone", "--zone <ZONE>")?,
                tenant: f.text("tenant", "--tenant <NS>")?,
                mac: f.text("mac", "--mac <MAC|auto>")?,
                prefix_length: f.length("prefixLength", "--prefix-length <N>")?,
                prefix: f.text("prefix", "--prefix <CIDR>")?,
                dry_run: defaults.dry_run || f.switch("dryRun")?.unwrap_or(false),
                explain: false,
                ttl: f.text("ttl", "--ttl <DURATION>")?,
            })
        };
        read().map_err(Error::usage)
    }
}

impl<'de> Deserialize<'de> for AllocateInput {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> std::result::Result<Self, D::Error> {
        AllocateInput::read(deserializer, &Defaults::default())
            .map_err(|e| serde::de::Error::custom(e.to_string()))
    }
}

/// An `allocate` request, valid in every way that does not need the store, with the
/// caller's scope, which [`AllocateRequest::run`] checks before anything else.
#[derive(Clone, Debug)]
pub struct AllocateRequest {
    owner: Owner,
    dry_run: bool,
    /// `--ttl`: a lease (a pool's or a zone's address; a prefix has none).
    ttl: Option<std::time::Duration>,
    form: Form,
    scope: Scope,
}

/// The forms of an `allocate` request.
#[derive(Clone, Debug)]
enum Form {
    /// A floating IP from the public pools of a zone.
    Zone(String),
    /// One address in each pool, all or nothing; `explain` only with one.
    Pools {
        requests: Vec<Request>,
        explain: bool,
    },
    /// A child prefix of a supernet pool.
    Prefix { pool: PoolRef, want: Want },
}

/// What an `allocate` request got.
#[derive(Debug)]
pub enum Claimed {
    /// One allocation per pool, in the order of the pools (one for a pool or a zone).
    Addresses(Vec<Allocated>),
    /// The owner's child prefix, and whether this request claimed it.
    Prefix(Box<PrefixClaimManifest>, bool),
    /// A dry run's child prefix: the one the claim would answer.
    WouldPrefix(ipnet::IpNet),
}

/// Arguments that cannot be given together, as the command line's parser refuses them
/// (the first of each pair declares the conflict), by the names it gives them.
const CONFLICTS: &[(&str, &str)] = &[
    ("--zone <ZONE>", "[POOL]..."),
    ("--zone <ZONE>", "--namespace <NS>"),
    ("--zone <ZONE>", "--within <CIDR>"),
    ("--zone <ZONE>", "--address <ADDR>"),
    ("--subnet <NAME>", "--within <CIDR>"),
    ("--subnet <NAME>", "--zone <ZONE>"),
    ("--prefix-length <N>", "--zone <ZONE>"),
    ("--prefix-length <N>", "--within <CIDR>"),
    ("--prefix-length <N>", "--subnet <NAME>"),
    ("--prefix-length <N>", "--reserved <ADDR>"),
    ("--prefix-length <N>", "--address <ADDR>"),
    ("--prefix-length <N>", "--explain"),
    ("--prefix-length <N>", "--prefix <CIDR>"),
    ("--prefix <CIDR>", "--zone <ZONE>"),
    ("--prefix <CIDR>", "--within <CIDR>"),
    ("--prefix <CIDR>", "--subnet <NAME>"),
    ("--prefix <CIDR>", "--reserved <ADDR>"),
    ("--prefix <CIDR>", "--address <ADDR>"),
    ("--prefix <CIDR>", "--explain"),
    ("--mac <MAC|auto>", "--zone <ZONE>"),
    ("--mac <MAC|auto>", "--prefix-length <N>"),
    ("--mac <MAC|auto>", "--prefix <CIDR>"),
    ("--explain", "--zone <ZONE>"),
    ("--ttl <DURATION>", "--prefix-length <N>"),
    ("--ttl <DURATION>", "--prefix <CIDR>"),
    ("--tenant <NS>", "--namespace <NS>"),
    ("--tenant <NS>", "--prefix-length <N>"),
    ("--tenant <NS>", "--prefix <CIDR>"),
    ("--tenant <NS>", "--mac <MAC|auto>"),
    ("--tenant <NS>", "--subnet <NAME>"),
];

impl AllocateInput {
    /// The arguments given, by the names [`CONFLICTS`] uses.
    fn given(&self) -> Vec<&'static str> {
        [
            ("[POOL]...", !self.pools.is_empty()),
            ("--zone <ZONE>", self.zone.is_some()),
            ("--namespace <NS>", self.namespace.is_some()),
            ("--within <CIDR>", self.within.is_some()),
            ("--address <ADDR>", self.address.is_some()),
            ("--subnet <NAME>", !self.subnets.is_empty()),
            ("--reserved <ADDR>", !self.reserved.is_empty()),
            ("--prefix-length <N>", self.prefix_length.is_some()),
            ("--prefix <CIDR>", self.prefix.is_some()),
            ("--mac <MAC|auto>", self.mac.is_some()),
            ("--explain", self.explain),
            ("--ttl <DURATION>", self.ttl.is_some()),
            ("--tenant <NS>", self.tenant.is_some()),
        ]
        .into_iter()
        .filter_map(|(name, set)| set.then_some(name))
        .collect()
    }

    /// What the command line's parser refuses before any rule is looked at: arguments
    /// that conflict, and the required ones left out.
    fn shape(&self) -> Result<()> {
        let given = self.given();
        if let Some((a, b)) = CONFLICTS
            .iter()
            .find(|(a, b)| given.contains(a) && given.contains(b))
        {
            return Err(Error::usage(format!(
                "the argument '{a}' cannot be used with '{b}'"
            )));
        }
        let mut missing = Vec::new();
        if self.pools.is_empty() && self.zone.is_none() {
            missing.push("<POOL>...");
        }
        if self.owner.is_none() {
            missing.push("--owner <KIND/NAME>");
        }
        if !missing.is_empty() {
            return Err(Error::usage(format!(
                "the following required arguments were not provided: {}",
                missing.join(" ")
            )));
        }
        Ok(())
    }
}

impl AllocateRequest {
    /// The request `input` stands for, made by a caller of `scope` (the command line and
    /// the batch: [`Scope::everything`]), or exit 2 saying why it stands for none: every
    /// rule of `allocate` that needs no store, whoever asks.
    pub fn new(input: &AllocateInput, scope: &Scope) -> Result<AllocateRequest> {
        input.shape()?;
        let owner = owner(input)?;
        let ns = input.namespace.as_deref();
        if let Some(tenant) = owner.tenant()
            && (ns.is_some() || input.prefix_length.is_some() || input.prefix.is_some())
        {
            return Err(Error::usage(format!(
                "`{owner}` is tenant `{tenant}`'s floating IP: one address from the cluster's public pools (`--zone ZONE` or a public POOL, without `-n`, `--prefix-length` or `--prefix`)"
            )));
        }
        let form = if input.prefix_length.is_some() || input.prefix.is_some() {
            let [pool] = input.pools.as_slice() else {
                return Err(Error::usage(
                    "--prefix-length and --prefix claim from one pool; name exactly one",
                ));
            };
            let pool = pool_ref(ns, pool)?;
            let want = match (input.prefix_length, &input.prefix) {
                (Some(len), None) => Want::Length(len),
                (None, Some(p)) => Want::Exact(prefix("--prefix", p)?),
                _ => {
                    return Err(Error::usage(
                        "give one of --prefix-length N and --prefix PREFIX",
                    ));
                }
            };
            Form::Prefix { pool, want }
        } else {
            match (&input.zone, input.pools.as_slice()) {
                (Some(zone), []) => Form::Zone(zone.clone()),
                (None, [_, _, ..]) => Form::Pools {
                    requests: several(input, &owner)?,
                    explain: false,
                },
                (None, [pool]) => {
                    if input.subnets.len() > 1 {
                        return Err(Error::usage(
                            "--subnet is given once per pool, in the order of the pools; one pool was named",
                        ));
                    }
                    Form::Pools {
                        requests: vec![request(input, pool, input.subnets.first(), &owner)?],
                        explain: input.explain,
                    }
                }
                _ => return Err(Error::usage("allocate takes either POOL or `--zone ZONE`")),
            }
        };
        Ok(AllocateRequest {
            owner,
            dry_run: input.dry_run,
            ttl: ttl(input)?,
            form,
            scope: scope.clone(),
        })
    }

    /// The owner this request claims for.
    pub fn owner(&self) -> &Owner {
        &self.owner
    }

    /// Claims what the request asks for (or, in a dry run, says what it would claim) in
    /// its own units of work: the one thing the single command, each request of a batch and
    /// a server's request run. Warnings and notes (a dry run's, `--explain`'s lines) come
    /// back beside the result, also when it failed.
    pub fn run(&self, store: &dyn Store) -> Outcome<Claimed> {
        let mut warnings = Warnings::default();
        let mut notes = Vec::new();
        let result = self
            .authorize()
            .and_then(|()| self.claim(store, &mut warnings, &mut notes));
        let result = self.scope.scrub(result);
        // `--explain` names who holds the pool's addresses: a tenant's floating IP only to
        // a caller that sees its tenant.
        let notes = notes.iter().map(|n| self.scope.redact(n)).collect();
        Outcome {
            result,
            warnings,
            notes,
        }
    }

    /// The caller's scope checked, before any lock: `claim` where each pool lives (outside
    /// the scope, the pool reads as missing). A zone's public pools are the cluster
    /// scope's; a tenant's floating IP is claimed for its namespace
    /// ([`Scope::may_claim_floating`]), which a form with the tenant's namespace checks.
    fn authorize(&self) -> Result<()> {
        let scope = &self.scope;
        // A tenant's floating IP, from the cluster's public pools: `claim` in the tenant's
        // namespace is enough, without the cluster scope.
        if let Some(tenant) = self.owner.tenant() {
            crate::engine::floating::check_scope(scope, &tenant)?;
            return self.authorize_explain();
        }
        let pool = |pool: &PoolRef| {
            scope.check(Verb::Claim, pool.namespace.as_ref(), || {
                crate::store::read::pool_missing(pool)
            })
        };
        match &self.form {
            Form::Zone(zone) => scope.check(Verb::Claim, None, || {
                format!("no public pool in zone `{zone}`")
            }),
            Form::Pools { requests, .. } => requests.iter().try_for_each(|r| pool(&r.pool)),
            Form::Prefix { pool: p, .. } => pool(p),
        }?;
        self.authorize_explain()
    }

    /// `--explain` names who holds the pool's addresses below the one chosen, as `list`
    /// would: it needs `read` where the pool lives, besides the claim's `claim`. A
    /// tenant's floating IP is claimed from a public pool without the cluster scope; its
    /// explanation, which names other tenants' floating IPs, is forbidden without it.
    fn authorize_explain(&self) -> Result<()> {
        let Form::Pools {
            requests,
            explain: true,
        } = &self.form
        else {
            return Ok(());
        };
        requests.iter().try_for_each(|r| {
            let ns = r.pool.namespace.as_ref();
            if !self.scope.sees(ns) && self.owner.tenant().is_some() {
                return Err(Error::Forbidden {
                    message: format!(
                        "the caller may not read in the cluster scope, which `--explain` needs: it names who holds the addresses of pool `{}`",
                        r.pool
                    ),
                });
            }
            self.scope
                .check(Verb::Read, ns, || crate::store::read::pool_missing(&r.pool))
        })
    }

    fn claim(
        &self,
        store: &dyn Store,
        warnings: &mut Warnings,
        notes: &mut Vec<String>,
    ) -> Result<Claimed> {
        let (owner, dry_run) = (&self.owner, self.dry_run);
        if let (Some(tenant), Form::Pools { requests, .. }) = (owner.tenant(), &self.form) {
            for req in requests {
                public_only(store, &req.pool, &tenant)?;
            }
        }
        let allocated = match &self.form {
            Form::Prefix { pool, want } => {
                if dry_run {
                    // What the claim would answer now: the owner's prefix, else the best fit.
                    let prefix = crate::engine::prefix::predict(store, pool, owner, *want)?;
                    notes.push(format!(
                        "dry run: `{owner}` would hold {prefix} in pool `{pool}`; nothing written"
                    ));
                    return Ok(Claimed::WouldPrefix(prefix));
                }
                let claimed = crate::engine::prefix::claim(store, pool, owner, *want)?;
                return Ok(Claimed::Prefix(Box::new(claimed.manifest), claimed.created));
            }
            Form::Zone(zone) => vec![crate::engine::allocate::allocate_zone(
                store,
                zone,
                owner,
                (dry_run, self.ttl),
                warnings,
            )?],
            Form::Pools { requests, explain } => match requests.as_slice() {
                [req] => {
                    let allocated = crate::engine::allocate::allocate(store, req, warnings);
                    if *explain {
                        // An exhausted pool is explained too, before its error is reported.
                        notes.extend(crate::engine::explain::explain_request(
                            store, req, &allocated,
                        )?);
                    }
                    vec![allocated?]
                }
                requests => crate::engine::allocate::allocate_all(store, requests, warnings)?,
            },
        };
        for a in &allocated {
            if let Some(note) = dry_run_note(a, dry_run) {
                notes.push(note);
            }
        }
        Ok(Claimed::Addresses(allocated))
    }
}

/// Refuses (exit 2) a tenant's floating IP in `pool` unless it is a public pool: a tenant
/// claims only from the cluster's public pools (a pool keeps its kind while it holds
/// anything, so the kind read here is the one the claim meets).
fn public_only(store: &dyn Store, pool: &PoolRef, tenant: &Namespace) -> Result<()> {
    let spec = crate::store::read::load_pool(store, pool)?;
    if spec.spec.kind != crate::model::PoolKind::Public {
        return Err(Error::invalid(
            "POOL",
            format!(
                "pool `{pool}` is a {} pool; tenant `{tenant}`'s floating IP is claimed from a public pool",
                spec.spec.kind
            ),
        ));
    }
    Ok(())
}

/// The owner `input` claims for: `--owner` (with `--uid`), or with `--tenant` that
/// tenant's floating IP ([`Owner::floating`]).
fn owner(input: &AllocateInput) -> Result<Owner> {
    let text = input.owner.as_deref().unwrap_or_default();
    let uid = uid(input.uid.as_deref())?;
    let Some(tenant) = &input.tenant else {
        return flag("--owner", Owner::parse(text, uid));
    };
    let tenant = flag("--tenant", Namespace::new(tenant))?;
    let name = match text.split_once('/') {
        Some(("FloatingIP", name)) => name,
        _ => {
            return Err(Error::invalid(
                "--owner",
                format!(
                    "`{text}`: `--tenant` claims a floating IP: give `--owner FloatingIP/<name>`"
                ),
            ));
        }
    };
    flag("--owner", Owner::floating(&tenant, name, uid))
}

/// One address in each of several pools, all or nothing (dual stack): the request of each.
fn several(input: &AllocateInput, owner: &Owner) -> Result<Vec<Request>> {
    for (set, flag) in [
        (input.within.is_some(), "--within"),
        (input.address.is_some(), "--address"),
        (input.explain, "--explain"),
    ] {
        if set {
            return Err(Error::usage(format!(
                "{flag} applies to one pool; allocate from each pool alone to use it"
            )));
        }
    }
    if !input.subnets.is_empty() && input.subnets.len() != input.pools.len() {
        return Err(Error::usage(format!(
            "--subnet is given once per pool, in the order of the pools: {} pools, {} `--subnet`",
            input.pools.len(),
            input.subnets.len()
        )));
    }
    input
        .pools
        .iter()
        .enumerate()
        .map(|(i, pool)| request(input, pool, input.subnets.get(i), owner))
        .collect()
}

/// The request for `pool`, with `subnet` (its `--subnet`, if any).
fn request(
    input: &AllocateInput,
    pool: &str,
    subnet: Option<&String>,
    owner: &Owner,
) -> Result<Request> {
    use super::field::address;
    Ok(Request {
        pool: pool_ref(input.namespace.as_deref(), pool)?,
        owner: owner.clone(),
        within: input
            .within
            .as_deref()
            .map(|w| prefix("--within", w))
            .transpose()?,
        subnet: subnet
            .map(|n| flag("--subnet", SubnetName::new(n)))
            .transpose()?,
        reserved: input
            .reserved
            .iter()
            .map(|r| address("--reserved", r))
            .collect::<Result<_>>()?,
        address: input
            .address
            .as_deref()
            .map(|a| address("--address", a))
            .transpose()?,
        dry_run: input.dry_run,
        mac: input.mac.as_deref().map(mac_choice).transpose()?,
        ttl: ttl(input)?,
    })
}

/// `--ttl`, parsed.
fn ttl(input: &AllocateInput) -> Result<Option<std::time::Duration>> {
    input
        .ttl
        .as_deref()
        .map(|t| crate::engine::lease::parse_ttl("--ttl", t))
        .transpose()
}

/// A dry run's line: what would be claimed, or what the owner holds already.
fn dry_run_note(allocated: &Allocated, dry_run: bool) -> Option<String> {
    let (Allocated::WouldCreate(m) | Allocated::Existing(m)) = allocated else {
        return None;
    };
    if !dry_run {
        return None;
    }
    let verb = if matches!(allocated, Allocated::Existing(_)) {
        "already holds"
    } else {
        "would claim"
    };
    Some(format!(
        "dry run: `{}` {verb} {}; nothing written",
        m.spec.owner, m.spec.address
    ))
}
