//! Child prefixes of supernet pools: claiming one (the best-fit rule of
//! [`crate::model::prefix`], or an exact one) and releasing it, each under the pool's
//! exclusive lock in one unit of work.
//!
//! # Race safety
//!
//! Two claims never hold overlapping prefixes. On the file store the pool's exclusive lock
//! (see `store/fs/lock/`) is held from the read of the pool's claims to the exclusive
//! create of the new claim's file, so no other ipamctl process decides in between; the
//! file's exclusive create (its name is the prefix) closes the same-prefix race against a
//! writer that takes no lock. An outside writer (a `git pull` bringing an overlapping
//! claim from another clone) can still create an overlap: `ipamctl check` reports it. A
//! process killed at any instant leaves either no file or a complete one (the store writes
//! a temporary file and links it into place), and the kernel drops its lock.
//!
//! On PostgreSQL the same lock is the pool row's `FOR UPDATE`, held by the claim's
//! transaction; a kill rolls the transaction back. There best fit reads the free space the
//! database keeps ([`store::Queries::prefix_free_space`]) instead of every claim, and the
//! claim's insert keeps it in the same statement; the exclusion constraint still arbitrates.

use std::collections::BTreeMap;

use ipnet::IpNet;

use crate::error::{Error, Result};
use crate::model::cooldown::Cooling;
use crate::model::prefix::{self, NoRoom};
use crate::model::prefix_claim::{PrefixClaimManifest, parse_prefix_claim_name, prefix_claim_name};
use crate::model::{Owner, OwnerFilter, PoolKind, PoolManifest, PoolRef, Timestamp};
use crate::store::read::load_pool;
use crate::store::{self, LockMode, ObjectKind, Store};
use crate::yaml;

/// What a claim asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Want {
    /// The best-fit free prefix of this length.
    Length(u8),
    /// Exactly this prefix.
    Exact(IpNet),
}

/// A claim's outcome: the manifest, and whether this call created it (`false`: the owner
/// held it already).
#[derive(Clone, Debug)]
pub struct HeldPrefix {
    /// The claim as stored.
    pub manifest: PrefixClaimManifest,
    /// Whether this call wrote it.
    pub created: bool,
}

/// Claims a prefix of the supernet `pool` for `owner` and returns it: the one the owner
/// holds already, if any (exit 4 if it asked for another exact one); exit 2 for a pool
/// that is no supernet or a length outside its bounds, 4 for an exact prefix that overlaps
/// a claim or an exclude (naming it), 5 when no free block of the length is left (naming
/// the pool, the length and the largest free block).
pub fn claim_prefix(store: &dyn Store, pool: &PoolRef, owner: &Owner, want: Want) -> Result<IpNet> {
    claim(store, pool, owner, want).map(|c| c.manifest.spec.prefix)
}

/// [`claim_prefix`] with the stored manifest and whether it was created.
pub fn claim(store: &dyn Store, pool: &PoolRef, owner: &Owner, want: Want) -> Result<HeldPrefix> {
    claim_annotated(store, pool, owner, want, &BTreeMap::new())
}

/// [`claim`], writing `annotations` on a new claim (a VPC's range names its VPC there).
pub fn claim_annotated(
    store: &dyn Store,
    pool: &PoolRef,
    owner: &Owner,
    want: Want,
    annotations: &BTreeMap<String, String>,
) -> Result<HeldPrefix> {
    let len = match want {
        Want::Length(len) => Some(len),
        Want::Exact(_) => None,
    };
    let charge = crate::engine::quota::Charge::of_prefix(pool, annotations);
    // A `false` create under the lock is a writer that takes no lock (or, on PostgreSQL, a
    // row the constraint refused): read again and decide again, a bounded number of times.
    for _ in 0..8 {
        let done = store::atomically(store, || {
            let _lock = store.lock_prefix_claim(pool.namespace.as_ref(), &pool.name, owner, len)?;
            let manifest = load_pool(store, pool)?;
            check_want(&manifest, pool, want)?;
            crate::engine::doomed::refuse(&manifest, pool)?;
            let lookup = look_up_holder(store, pool, owner)?;
            if let Some(held) = lookup.held {
                return match want {
                    Want::Exact(p) if p != held.spec.prefix => Err(Error::conflict(format!(
                        "`{owner}` already holds {} in pool `{pool}`; release it before claiming {p}",
                        held.spec.prefix
                    ))),
                    _ => Ok(Some(HeldPrefix {
                        manifest: held,
                        created: false,
                    })),
                };
            }
            // A new claim: counted against the namespace's `prefixes` under their lock, held
            // until the claim is durable (after the pool's, the order of `crate::store::guard`).
            let _quota = crate::engine::quota::admit(store, charge.as_ref())?;
            let cooling = crate::engine::cooldown::prefix_cooling(store, pool, &manifest, owner)?;
            let prefix = match kept_free(store, &manifest, pool, want, &cooling)? {
                Some(chosen) => chosen?,
                None if lookup.taken_left_out => {
                    let lookup = look_up(store, pool, owner)?;
                    choose(store, &manifest, pool, &lookup.taken, want, &cooling)?
                }
                None => choose(store, &manifest, pool, &lookup.taken, want, &cooling)?,
            };
            let mut claim = PrefixClaimManifest::new(
                &pool.name,
                pool.namespace.as_ref(),
                prefix,
                owner.clone(),
            );
            claim.metadata.creation_timestamp = Some(Timestamp::now());
            claim.metadata.annotations = annotations.clone();
            let bytes = yaml::encode(&claim);
            let created = store.create(
                ObjectKind::PrefixClaim,
                pool.namespace.as_ref(),
                &claim.metadata.name,
                bytes.as_bytes(),
            )?;
            if created {
                forget_cooled(store, pool, prefix, &cooling)?;
            }
            Ok(created.then_some(HeldPrefix {
                manifest: claim,
                created: true,
            }))
        })?;
        if let Some(done) = done {
            return Ok(done);
        }
    }
    Err(Error::conflict(format!(
        "pool `{pool}` changed under every try of the claim (a writer that takes no lock?); run `ipamctl check`"
    )))
}

/// What [`claim`] would answer now, writing nothing and taking no lock (a dry run): the
/// prefix the owner holds, else the one the rule picks; the same errors.
pub fn predict(store: &dyn Store, pool: &PoolRef, owner: &Owner, want: Want) -> Result<IpNet> {
    let manifest = load_pool(store, pool)?;
    check_want(&manifest, pool, want)?;
    let lookup = look_up(store, pool, owner)?;
    match lookup.held {
        Some(held) => Ok(held.spec.prefix),
        None => {
            let charge = crate::engine::quota::Charge::of_prefix(pool, &BTreeMap::new());
            // A dry run's answer: what the claim would meet.
            if let Some(charge) = &charge {
                crate::engine::quota::refuse_over(store, charge)?;
            }
            let cooling = crate::engine::cooldown::prefix_cooling(store, pool, &manifest, owner)?;
            choose(store, &manifest, pool, &lookup.taken, want, &cooling)
        }
    }
}

/// Exit 2 for an address claim in a supernet pool, which hands out prefixes only.
pub fn refuse_addresses(manifest: &PoolManifest, pool: &PoolRef) -> Result<()> {
    if manifest.spec.kind != PoolKind::Supernet {
        return Ok(());
    }
    Err(Error::Usage {
        message: format!(
            "pool `{pool}` is a supernet and hands out prefixes: use --prefix-length N (or --prefix PREFIX)"
        ),
        hint: None,
    })
}

/// Exit 2 unless `pool` is a supernet that hands out what `want` asks for.
fn check_want(manifest: &PoolManifest, pool: &PoolRef, want: Want) -> Result<()> {
    let spec = &manifest.spec;
    if spec.kind != PoolKind::Supernet {
        return Err(Error::Usage {
            message: format!(
                "pool `{pool}` is a {} pool and hands out addresses, not prefixes",
                spec.kind
            ),
            hint: Some("drop `--prefix-length`/`--prefix`, or name a supernet pool".into()),
        });
    }
    let len = match want {
        Want::Length(len) => len,
        Want::Exact(p) => {
            if !spec.cidr.contains(&p) || p.prefix_len() == spec.cidr.prefix_len() {
                return Err(Error::usage(format!(
                    "--prefix: {p} is not a child prefix of pool `{pool}` ({})",
                    spec.cidr
                )));
            }
            p.prefix_len()
        }
    };
    let lengths = spec.prefix_lengths.unwrap_or_default();
    if !lengths.allows(spec.cidr, len) {
        let range = lengths.range(spec.cidr);
        return Err(Error::usage(format!(
            "pool `{pool}` ({}) hands out prefixes of /{} to /{}, not /{len}",
            spec.cidr,
            range.start(),
            range.end()
        )));
    }
    Ok(())
}

/// After `prefix` was claimed: the claimer's own record (it had its prefix back) and every
/// record past its window that the claim overlaps are removed.
fn forget_cooled(
    store: &dyn Store,
    pool: &PoolRef,
    prefix: IpNet,
    cooling: &Cooling<IpNet>,
) -> Result<()> {
    let own = cooling.own.filter(|p| overlaps(*p, prefix));
    let stale = cooling.stale.iter().filter(|p| overlaps(**p, prefix));
    for p in own.iter().chain(stale) {
        crate::engine::cooldown::forget_prefix(store, pool, *p)?;
    }
    Ok(())
}

/// The prefix `want` gets among the claimed prefixes `claims`, the pool's excludes and what
/// the cooldown keeps (`cooling`): a prefix released by another owner within `reuseAfter`
/// is taken; the claimer's own, if it asks for that length and it is still free, comes
/// first.
fn choose(
    store: &dyn Store,
    manifest: &PoolManifest,
    pool: &PoolRef,
    claims: &[IpNet],
    want: Want,
    cooling: &Cooling<IpNet>,
) -> Result<IpNet> {
    let excludes: Vec<IpNet> = manifest.spec.exclude.iter().map(|e| e.net()).collect();
    if let Want::Exact(p) = want
        && let Some(kept) = cooling.blocked.iter().find(|c| overlaps(**c, p))
    {
        let what = if *kept == p {
            format!("{p} was released")
        } else {
            format!("{p} overlaps {kept}, released")
        };
        return Err(Error::conflict(format!(
            "{what} less than pool `{pool}`'s reuseAfter ago: only the owner that released it may have it until then"
        )));
    }
    if let (Want::Length(len), Some(own)) = (want, cooling.own)
        && own.prefix_len() == len
        && !claims.iter().any(|c| overlaps(*c, own))
        && !excludes
            .iter()
            .chain(&cooling.blocked)
            .any(|e| overlaps(*e, own))
    {
        return Ok(own);
    }
    let excludes: Vec<IpNet> = excludes
        .into_iter()
        .chain(cooling.blocked.iter().copied())
        .collect();
    match want {
        Want::Exact(p) => {
            if let Some(held) = claims.iter().find(|c| overlaps(**c, p)) {
                let name = prefix_claim_name(&pool.name, *held);
                let holder = read_claim(store, pool, &name)?
                    .map_or_else(|| "another owner".into(), |c| c.spec.owner.to_string());
                return Err(Error::conflict(format!(
                    "{p} overlaps {held} in pool `{pool}`, held by `{holder}`"
                )));
            }
            if let Some(e) = excludes.iter().find(|e| overlaps(**e, p)) {
                return Err(Error::conflict(format!(
                    "{p} overlaps {e}, excluded from pool `{pool}`"
                )));
            }
            Ok(p)
        }
        Want::Length(len) => {
            let mut taken = claims.to_vec();
            taken.extend(excludes);
            prefix::best_fit(manifest.spec.cidr, &taken, len)
                .map_err(|NoRoom { largest }| no_room(pool, manifest.spec.cidr, len, largest))
        }
    }
}

/// Best fit from the free space the store keeps ([`store::Queries::prefix_free_space`]):
/// `None` when it keeps none, or when the claim is not a plain best fit (an exact prefix, or
/// cooldown records that keep prefixes from or for this owner), which [`choose`] decides
/// from the claims. Else the same answer as [`choose`]: the rule of
/// [`prefix::best_fit`] over the claims and the excludes, or exit 5 naming the largest free
/// block.
fn kept_free(
    store: &dyn Store,
    manifest: &PoolManifest,
    pool: &PoolRef,
    want: Want,
    cooling: &Cooling<IpNet>,
) -> Result<Option<Result<IpNet>>> {
    let Want::Length(len) = want else {
        return Ok(None);
    };
    if !cooling.blocked.is_empty() || cooling.own.is_some() {
        return Ok(None);
    }
    let cidr = manifest.spec.cidr;
    let excludes: Vec<IpNet> = manifest.spec.exclude.iter().map(|e| e.net()).collect();
    let Some(free) =
        store.prefix_free_space(pool.namespace.as_ref(), &pool.name, cidr, &excludes, len)?
    else {
        return Ok(None);
    };
    Ok(Some(prefix::best_fit_in(&free, len).ok_or_else(|| {
        no_room(pool, cidr, len, prefix::largest(&free))
    })))
}

/// Exit 5: no free /`len` in the pool, naming the largest free block.
fn no_room(pool: &PoolRef, cidr: IpNet, len: u8, largest: Option<IpNet>) -> Error {
    Error::NoRoom {
        what: format!("supernet pool `{pool}` ({cidr})"),
        length: len,
        largest,
    }
}

/// Whether two prefixes share an address.
pub fn overlaps(a: IpNet, b: IpNet) -> bool {
    a.contains(&b.network()) || b.contains(&a.network())
}

/// The claim `owner` holds in `pool`, read now, and the prefixes the pool's claims hold:
/// the store's owner look-up ([`crate::store::Queries::find_prefix_owner`]), which reads
/// the owner's file and no other that it can vouch for unread. A claim that does not parse
/// is an error naming it (its owner is unknown, so the owner's single claim cannot be
/// decided), and so is the owner's claim stored where its name and pool do not say.
fn look_up(store: &dyn Store, pool: &PoolRef, owner: &Owner) -> Result<store::PrefixLookup> {
    let ns = pool.namespace.as_ref();
    checked(store, pool, store.find_prefix_owner(ns, &pool.name, owner)?)
}

/// `lookup` unless a claim of it does not parse, or the owner's is stored where its name
/// and pool do not say: each an error naming it.
fn checked(
    store: &dyn Store,
    pool: &PoolRef,
    lookup: store::PrefixLookup,
) -> Result<store::PrefixLookup> {
    let ns = pool.namespace.as_ref();
    if let Some((name, why)) = lookup.broken.first() {
        return Err(Error::invalid(
            store.locate(ObjectKind::PrefixClaim, ns, name),
            why,
        ));
    }
    if let Some(held) = &lookup.held {
        let name = prefix_claim_name(&pool.name, held.spec.prefix);
        if held.metadata.name != name || held.spec.pool != pool.name {
            return Err(Error::invalid(
                store.locate(ObjectKind::PrefixClaim, ns, &held.metadata.name),
                "metadata.name or spec.pool disagrees with where it is stored (run `ipamctl check`)",
            ));
        }
    }
    Ok(lookup)
}

/// The claim `owner` holds in `pool`, read now, if any: what a writer that adds a claim
/// outside [`claim`] (`import`) asks so that an owner holds one prefix per supernet.
pub fn owner_claim(
    store: &dyn Store,
    pool: &PoolRef,
    owner: &Owner,
) -> Result<Option<PrefixClaimManifest>> {
    Ok(look_up_holder(store, pool, owner)?.held)
}

/// [`look_up`] without the pool's claimed prefixes, where the store can leave them out
/// ([`store::Queries::find_prefix_holder`]): the owner's claim, checked as there.
fn look_up_holder(store: &dyn Store, pool: &PoolRef, owner: &Owner) -> Result<store::PrefixLookup> {
    let ns = pool.namespace.as_ref();
    checked(
        store,
        pool,
        store.find_prefix_holder(ns, &pool.name, owner)?,
    )
}

/// The claims of `pool` as their names spell them: (name, prefix), from the listing alone
/// (`apply` and `pool delete` ask whether a claim holds a prefix, not whose it is). The name
/// is what the exclusive create arbitrates, so it is the prefix the file holds (`check`
/// reports a file whose manifest says otherwise).
pub fn pool_claim_names(store: &dyn Store, pool: &PoolRef) -> Result<Vec<(String, IpNet)>> {
    Ok(store
        .list(ObjectKind::PrefixClaim, pool.namespace.as_ref())?
        .into_iter()
        .filter_map(|n| match parse_prefix_claim_name(&n) {
            Some((p, net)) if p == pool.name.as_str() => Some((n, net)),
            _ => None,
        })
        .collect())
}

/// Every claim of `pool`, read now; a file that does not parse is an error naming it (its
/// prefix is unknown, so no claim can be decided safely).
pub fn pool_claims(store: &dyn Store, pool: &PoolRef) -> Result<Vec<PrefixClaimManifest>> {
    pool_claim_names(store, pool)?
        .iter()
        .filter_map(|(name, _)| read_claim(store, pool, name).transpose())
        .collect()
}

/// One claim by name; `None` when it is gone.
fn read_claim(
    store: &dyn Store,
    pool: &PoolRef,
    name: &str,
) -> Result<Option<PrefixClaimManifest>> {
    let ns = pool.namespace.as_ref();
    let Some(bytes) = store.get(ObjectKind::PrefixClaim, ns, name)? else {
        return Ok(None);
    };
    let at = || store.locate(ObjectKind::PrefixClaim, ns, name);
    let text =
        std::str::from_utf8(&bytes).map_err(|_| Error::invalid(at(), "is not UTF-8 text"))?;
    let claim = yaml::decode_prefix_claim(text).map_err(|e| Error::invalid(at(), e))?;
    if claim.metadata.name != name || claim.spec.pool != pool.name {
        return Err(Error::invalid(
            at(),
            "metadata.name or spec.pool disagrees with where it is stored (run `ipamctl check`)",
        ));
    }
    Ok(Some(claim))
}

/// Releases the claim of `prefix` in `pool` if its owner passes `guard` (exit 4 naming the
/// holder if not); `None` when no claim holds exactly that prefix. A dry run deletes nothing.
pub fn release_prefix(
    store: &dyn Store,
    pool: &PoolRef,
    prefix: IpNet,
    guard: &OwnerFilter,
    dry_run: bool,
) -> Result<Option<PrefixClaimManifest>> {
    let name = prefix_claim_name(&pool.name, prefix);
    store::atomically(store, || {
        let _lock = (!dry_run)
            .then(|| store.lock_pool(pool.namespace.as_ref(), &pool.name, LockMode::Exclusive))
            .transpose()?;
        let Some(claim) = read_claim(store, pool, &name)? else {
            return Ok(None);
        };
        if !guard.matches(&claim.spec.owner) {
            return Err(Error::conflict(format!(
                "{prefix} in pool `{pool}` is held by `{}`, not by the owner given; nothing released",
                claim.spec.owner
            )));
        }
        if !dry_run {
            // In a pool with `reuseAfter` the record comes first: no instant where the
            // prefix looks free without it (as for an address, `model::cooldown`).
            if let Ok(manifest) = load_pool(store, pool)
                && manifest.spec.reuse_after.is_some()
            {
                crate::engine::cooldown::record_prefix_release(
                    store,
                    pool,
                    claim.spec.prefix,
                    &claim.spec.owner,
                )?;
            }
            delete(store, &claim)?;
        }
        Ok(Some(claim))
    })
}

/// Deletes `claim` if it is still the stored one.
fn delete(store: &dyn Store, claim: &PrefixClaimManifest) -> Result<()> {
    let want = yaml::encode(claim);
    let mut ours = |bytes: &[u8]| bytes == want.as_bytes();
    store.delete_if(
        ObjectKind::PrefixClaim,
        claim.metadata.namespace.as_ref(),
        &claim.metadata.name,
        &mut ours,
    )?;
    Ok(())
}

/// Releases every claim of `claims` (each under its pool's lock, re-read there and deleted
/// only if unchanged); returns those released.
pub fn release_each(
    store: &dyn Store,
    claims: &[PrefixClaimManifest],
) -> Result<Vec<PrefixClaimManifest>> {
    let mut done = Vec::new();
    for c in claims {
        let pool = PoolRef {
            namespace: c.metadata.namespace.clone(),
            name: c.spec.pool.clone(),
        };
        let exact = OwnerFilter::exactly(&c.spec.owner);
        if let Some(m) = release_prefix(store, &pool, c.spec.prefix, &exact, false)? {
            done.push(m);
        }
    }
    Ok(done)
}

/// Every claim of the scope `ns` whose owner passes `filter`, in name order.
pub fn claims_matching(
    store: &dyn Store,
    ns: Option<&crate::model::Namespace>,
    pool: Option<&crate::model::PoolName>,
    filter: &OwnerFilter,
) -> Result<Vec<PrefixClaimManifest>> {
    let mut names = store.list(ObjectKind::PrefixClaim, ns)?;
    names.sort();
    let mut out = Vec::new();
    for name in names {
        let Some((p, _)) = parse_prefix_claim_name(&name) else {
            continue;
        };
        let Ok(pool_name) = crate::model::PoolName::new(p) else {
            continue;
        };
        if pool.is_some_and(|want| *want != pool_name) {
            continue;
        }
        let pref = PoolRef {
            namespace: ns.cloned(),
            name: pool_name,
        };
        if let Some(c) = read_claim(store, &pref, &name)?
            && filter.matches(&c.spec.owner)
        {
            out.push(c);
        }
    }
    Ok(out)
}

/// A supernet's free space: its claims, the largest free block, and for each length it
/// hands out how many free blocks of that length are left (exact).
#[derive(Clone, Debug)]
pub struct Usage {
    /// Claimed prefixes, lowest first.
    pub claimed: Vec<IpNet>,
    /// The largest free block, if any.
    pub largest: Option<IpNet>,
    /// (length, free blocks of that length), shortest length first.
    pub free: Vec<(u8, u128)>,
}

/// The free space of the supernet `manifest` given its `claims`. The lengths counted are
/// the handed-out ones: every length claimed and each bound of `prefixLengths` (without
/// either, the shortest length the pool hands out).
pub fn usage(manifest: &PoolManifest, claims: &[PrefixClaimManifest]) -> Usage {
    let mut claimed: Vec<IpNet> = claims.iter().map(|c| c.spec.prefix).collect();
    claimed.sort();
    let mut taken = claimed.clone();
    taken.extend(manifest.spec.exclude.iter().map(|e| e.net()));
    let cidr = manifest.spec.cidr;
    let blocks = prefix::free_blocks(cidr, &taken);
    let bounds = manifest.spec.prefix_lengths.unwrap_or_default();
    let mut lengths: std::collections::BTreeSet<u8> =
        claimed.iter().map(|c| c.prefix_len()).collect();
    lengths.extend(bounds.min.into_iter().chain(bounds.max));
    if lengths.is_empty() {
        lengths.insert(*bounds.range(cidr).start());
    }
    Usage {
        claimed,
        largest: prefix::largest(&blocks),
        free: lengths
            .into_iter()
            .map(|len| (len, prefix::free_count(&blocks, len)))
            .collect(),
    }
}
