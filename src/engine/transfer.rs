//! Copying every pool, subnet, allocation and cooldown record from one store to another, byte for byte: `export`
//! (a database into a new state directory) and `import` (a state directory into a
//! database). [`import`] makes it one unit of work on the database, so an import is all or
//! nothing.
//!
//! A state directory is checked first with the rules of `ipamctl check` ([`import_dir`]):
//! one with any error finding (an allocation outside its pool's candidates, on a gateway,
//! in a pool that does not exist, a file that does not parse, …) is refused whole (exit 2,
//! nothing written), naming the files. Every object read is validated again as it is
//! copied (it parses, and its name and namespace are the ones its place says). An object the target already holds with the same bytes is left as it is (an
//! import can be run again); with other bytes, or an allocation whose address or owner is
//! taken there, it is a conflict (exit 4) and nothing is written.

use crate::engine::check::{self, Severity};
use crate::engine::warning::{Warning, Warnings};
use crate::engine::{holders, prefix, quota};
use crate::error::{Error, Result};
use crate::model::{Namespace, PoolName, allocation_name};
use crate::store::{self, Claim, LockMode, ObjectKind, QuotaLock, Store};
use crate::yaml;

/// What a copy did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Copied {
    /// Pools written to the target.
    pub pools: usize,
    /// Allocations written to the target.
    pub allocations: usize,
    /// Subnets written to the target.
    pub subnets: usize,
    /// Cooldown records written to the target.
    pub cooldown_records: usize,
    /// Prefix claims of supernet pools.
    pub prefix_claims: usize,
    /// Namespaces' quotas.
    pub quotas: usize,
    /// Objects the target already held with the same bytes.
    pub unchanged: usize,
}

impl Copied {
    /// Objects written to the target, of every kind.
    pub fn written(&self) -> usize {
        self.pools
            + self.subnets
            + self.allocations
            + self.cooldown_records
            + self.prefix_claims
            + self.quotas
    }
}

/// `4 pools, 3 subnets, 59 allocations and 0 cooldown records`: what was written, of every
/// kind the "already there" count covers.
impl std::fmt::Display for Copied {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let n = |count: usize, one: &str, many: &str| {
            format!("{count} {}", if count == 1 { one } else { many })
        };
        write!(
            f,
            "{}, {}, {} and {}",
            n(self.pools, "pool", "pools"),
            n(self.subnets, "subnet", "subnets"),
            n(self.allocations, "allocation", "allocations"),
            n(self.cooldown_records, "cooldown record", "cooldown records")
        )?;
        // Only when there are any: the line of a state without supernets stays as it was.
        if self.prefix_claims > 0 {
            write!(
                f,
                " (and {})",
                n(self.prefix_claims, "prefix claim", "prefix claims")
            )?;
        }
        if self.quotas > 0 {
            write!(f, " (and {})", n(self.quotas, "quota", "quotas"))?;
        }
        Ok(())
    }
}

/// Reads one object's bytes and checks that they are a manifest of that kind whose name
/// and namespace match where it is stored.
fn read_valid(
    from: &dyn Store,
    kind: ObjectKind,
    ns: Option<&Namespace>,
    name: &str,
) -> Result<Option<Vec<u8>>> {
    let Some(bytes) = from.get(kind, ns, name)? else {
        return Ok(None); // deleted since the listing
    };
    let at = || from.locate(kind, ns, name);
    let text =
        std::str::from_utf8(&bytes).map_err(|_| Error::invalid(at(), "is not UTF-8 text"))?;
    let (meta_name, meta_ns) = match kind {
        ObjectKind::Pool => {
            let m = yaml::decode_pool(text).map_err(|e| Error::invalid(at(), e))?;
            (m.metadata.name.clone(), m.metadata.namespace.clone())
        }
        ObjectKind::Allocation => {
            let m = yaml::decode_allocation(text).map_err(|e| Error::invalid(at(), e))?;
            let expected = allocation_name(&m.spec.pool, m.spec.address);
            if expected != m.metadata.name {
                return Err(Error::invalid(
                    at(),
                    format!("is named `{}` but holds {expected}", m.metadata.name),
                ));
            }
            (m.metadata.name.clone(), m.metadata.namespace.clone())
        }
        ObjectKind::Subnet => {
            let m = yaml::decode_subnet(text).map_err(|e| Error::invalid(at(), e))?;
            (m.metadata.name.clone(), m.metadata.namespace.clone())
        }
        ObjectKind::Cooldown => {
            let m = yaml::decode_cooldown(text).map_err(|e| Error::invalid(at(), e))?;
            (m.metadata.name.clone(), m.metadata.namespace.clone())
        }
        ObjectKind::PrefixClaim => {
            let m = yaml::decode_prefix_claim(text).map_err(|e| Error::invalid(at(), e))?;
            (m.metadata.name.clone(), m.metadata.namespace.clone())
        }
        ObjectKind::Quota => {
            let m = yaml::decode_quota(text).map_err(|e| Error::invalid(at(), e))?;
            (m.metadata.name.clone(), m.metadata.namespace.clone())
        }
    };
    if meta_name != name || meta_ns.as_ref() != ns {
        return Err(Error::invalid(
            at(),
            "metadata.name or metadata.namespace disagrees with where it is stored (run `ipamctl check`)",
        ));
    }
    Ok(Some(bytes))
}

/// Writes one object unless `to` holds it with the same bytes; a conflict otherwise.
/// With `quotas` (an `import`, which holds the quota locks), an allocation or prefix claim
/// that would take its namespace over a quota of the target is refused (exit 7).
fn put(
    to: &dyn Store,
    kind: ObjectKind,
    (ns, name): (Option<&Namespace>, &str),
    bytes: &[u8],
    quotas: bool,
) -> Result<bool> {
    let conflict = |why: &str| Error::Conflict {
        message: format!("{}: {why}; nothing imported", to.locate(kind, ns, name)),
        hint: Some("the target holds other state for it: release or delete it there first".into()),
    };
    match to.get(kind, ns, name)? {
        Some(held) if held == bytes => return Ok(false),
        Some(_) => return Err(conflict("exists with other contents")),
        None => {}
    }
    let text = std::str::from_utf8(bytes).expect("validated by read_valid");
    match kind {
        // What the target holds under the pool's name must fit it (`apply`'s rule).
        ObjectKind::Pool => holders::refuse_breaking(
            to,
            None,
            &yaml::decode_pool(text).expect("validated by read_valid"),
        )
        .map_err(|e| match e {
            Error::Conflict { message, hint } => Error::Conflict {
                message: message.replace("nothing applied", "nothing imported"),
                hint,
            },
            e => e,
        })?,
        ObjectKind::PrefixClaim => {
            let claim = yaml::decode_prefix_claim(text).expect("validated by read_valid");
            let pool = crate::model::PoolRef {
                namespace: ns.cloned(),
                name: claim.spec.pool.clone(),
            };
            if let Some(held) = prefix::owner_claim(to, &pool, &claim.spec.owner)? {
                return Err(conflict(&format!(
                    "its owner already holds {} in that pool (an owner holds one prefix per supernet)",
                    held.spec.prefix
                )));
            }
        }
        _ => {}
    }
    if quotas {
        // Held until the import's unit ends (on a database), or this object is written.
        let _quota = quota::admit(to, charge(to, kind, ns, text)?.as_ref())?;
    }
    match kind {
        ObjectKind::Pool
        | ObjectKind::Subnet
        | ObjectKind::Cooldown
        | ObjectKind::PrefixClaim
        | ObjectKind::Quota => {
            if !to.create(kind, ns, name, bytes)? {
                return Err(conflict("was created meanwhile"));
            }
        }
        ObjectKind::Allocation => {
            let manifest = yaml::decode_allocation(text).expect("validated by read_valid");
            if let Some(why) = refused_copy(to.claim_copy(ns, &manifest)?) {
                return Err(conflict(&why));
            }
        }
    }
    Ok(true)
}

/// What a copied allocation or prefix claim is charged to ([`quota::Charge`]).
fn charge(
    to: &dyn Store,
    kind: ObjectKind,
    ns: Option<&Namespace>,
    text: &str,
) -> Result<Option<quota::Charge>> {
    let pool = |name: &crate::model::PoolName| crate::model::PoolRef {
        namespace: ns.cloned(),
        name: name.clone(),
    };
    match kind {
        ObjectKind::Allocation => match yaml::decode_allocation(text) {
            Ok(m) => quota::charge(to, &pool(&m.spec.pool), &m.spec.owner),
            Err(_) => Ok(None),
        },
        ObjectKind::PrefixClaim => Ok(yaml::decode_prefix_claim(text)
            .ok()
            .and_then(|m| quota::Charge::of_prefix(&pool(&m.spec.pool), &m.metadata.annotations))),
        _ => Ok(None),
    }
}

/// The quota locks an `import` holds, in namespace order after its pool locks: every
/// namespace of either store with a quota in either (a tenant's floating IPs are charged
/// to a namespace that may hold nothing else).
fn quota_locks(from: &dyn Store, to: &dyn Store) -> Result<Vec<QuotaLock>> {
    let mut namespaces = std::collections::BTreeSet::new();
    for store in [from, to] {
        for ns in store.scopes()?.into_iter().flatten() {
            if !store.list(ObjectKind::Quota, Some(&ns))?.is_empty() {
                namespaces.insert(ns);
            }
        }
    }
    namespaces.iter().map(|ns| to.lock_quota(ns)).collect()
}

/// Why the target refused an allocation's copy (`claim`), if it did.
fn refused_copy(claim: Claim) -> Option<String> {
    match claim {
        Claim::Claimed => None,
        Claim::AddressTaken => Some("its address is held by another owner".into()),
        Claim::OwnerHolds(held) => Some(format!(
            "its owner already holds {} in that pool",
            held.spec.address
        )),
        Claim::NameHeld(holder) => Some(format!(
            "its owner's name is held in that pool by {} at {} (an owner's name is one identity per pool)",
            holder.spec.owner.with_uid(),
            holder.spec.address
        )),
        Claim::MacHeld(holder) => Some(format!(
            "its MAC is held in that pool by `{}` ({})",
            holder.spec.owner, holder.spec.address
        )),
    }
}

/// Copies every pool, then every allocation, of every scope of `from` into `to`; an object
/// that does not validate stops it (exit 2).
pub fn copy_all(from: &dyn Store, to: &dyn Store) -> Result<Copied> {
    copy(from, to, None, false)
}

/// `export`: [`copy_all`], but an object that does not validate (a row a hand made
/// unreadable) is left out with a warning, as the file store's commands go on past a
/// broken file: the rest of the database is still worth a state directory. So are the
/// objects of a namespace that is none ([`store::Database::unreadable_namespaces`]), which
/// no scope reaches: one warning per namespace and kind.
pub fn export(from: &dyn Store, to: &dyn Store, warnings: &mut Warnings) -> Result<Copied> {
    if let Some(database) = from.database() {
        for note in database.unreadable_namespaces()? {
            warnings.push(Warning::new(format!("{}; not exported", note.message)));
        }
    }
    copy(from, to, Some(warnings), false)
}

/// [`copy_all`], leaving out what does not validate when given `skip`.
fn copy(
    from: &dyn Store,
    to: &dyn Store,
    mut skip: Option<&mut Warnings>,
    quotas: bool,
) -> Result<Copied> {
    let mut copied = Copied::default();
    for scope in from.scopes()? {
        let ns = scope.as_ref();
        for kind in ObjectKind::ALL {
            let mut names = from.list(kind, ns)?;
            names.sort();
            for name in names {
                let bytes = match (read_valid(from, kind, ns, &name), skip.as_deref_mut()) {
                    (Ok(Some(bytes)), _) => bytes,
                    (Ok(None), _) => continue,
                    (Err(Error::Invalid { origin, message }), Some(warnings)) => {
                        warnings.push(Warning::new(format!(
                            "{origin}: {message}; not exported (run `ipamctl check`)"
                        )));
                        continue;
                    }
                    (Err(e), _) => return Err(e),
                };
                if put(to, kind, (ns, &name), &bytes, quotas)? {
                    match kind {
                        ObjectKind::Pool => copied.pools += 1,
                        ObjectKind::Allocation => copied.allocations += 1,
                        ObjectKind::Subnet => copied.subnets += 1,
                        ObjectKind::Cooldown => copied.cooldown_records += 1,
                        ObjectKind::PrefixClaim => copied.prefix_claims += 1,
                        ObjectKind::Quota => copied.quotas += 1,
                    }
                } else {
                    copied.unchanged += 1;
                }
            }
        }
    }
    Ok(copied)
}

/// `import`: copies every object of `from` into `to` as one unit of work on `to` (one
/// transaction on a database), so a conflict or a broken file anywhere leaves `to` as it was.
/// It holds the locks `apply` holds, in the same order: the lock of every scope of `from`,
/// then every pool of `from` exclusively, so it serialises with `apply`, `vpc create`/`vpc
/// delete`, `pool delete`, `subnet` changes and claims in those scopes and pools.
pub fn import(from: &dyn Store, to: &dyn Store) -> Result<Copied> {
    store::atomically(to, || {
        let mut scopes = from.scopes()?;
        scopes.sort();
        let mut pools = Vec::new();
        for ns in &scopes {
            let mut names = from.list(ObjectKind::Pool, ns.as_ref())?;
            names.sort();
            for name in names {
                let pool = PoolName::new(&name).map_err(|e| Error::invalid("import", e))?;
                pools.push((ns.clone(), pool));
            }
        }
        let mut held = Vec::new();
        for ns in &scopes {
            held.push(to.lock_scope(ns.as_ref())?);
        }
        let mut pool_locks = Vec::new();
        for (ns, pool) in &pools {
            pool_locks.push(to.lock_pool(ns.as_ref(), pool, LockMode::Exclusive)?);
        }
        let _quotas = quota_locks(from, to)?;
        copy(from, to, None, true)
    })
}

/// How many of the files with errors [`import_dir`] names in its message.
const NAMED_FILES: usize = 10;

/// `import` of a state directory: refused whole (exit 2, nothing written) when `ipamctl
/// check` finds any error in it, the message naming the files (the first
/// [`NAMED_FILES`], and how many more); else [`import`]. Warnings do not stop it.
pub fn import_dir(from: &dyn Store, to: &dyn Store) -> Result<Copied> {
    let report = check::check(from)?;
    let errors: Vec<_> = report
        .findings
        .iter()
        .filter(|f| f.severity == Severity::Error)
        .collect();
    if !errors.is_empty() {
        let mut files: Vec<&str> = errors.iter().map(|f| f.path.as_str()).collect();
        files.dedup();
        let mut named: Vec<String> = files
            .iter()
            .take(NAMED_FILES)
            .map(|path| {
                let first = errors.iter().find(|f| f.path == *path).expect("a finding");
                format!("{path} ({})", first.message)
            })
            .collect();
        if files.len() > NAMED_FILES {
            named.push(format!("and {} more", files.len() - NAMED_FILES));
        }
        return Err(Error::invalid(
            from.describe(),
            format!(
                "`ipamctl check` finds {} error{} in {} file{}: {}; nothing imported (run `ipamctl -d DIR check` and fix them first)",
                errors.len(),
                if errors.len() == 1 { "" } else { "s" },
                files.len(),
                if files.len() == 1 { "" } else { "s" },
                named.join(", ")
            ),
        ));
    }
    import(from, to)
}
