//! What a branch changes in a state directory, as a reviewer reads it: claims, releases,
//! owner changes, pool changes, and the conflicts with the invariants that git's own merge
//! cannot see (an address claimed on both sides with different owners, an owner claiming
//! on both sides, an allocation edited in place, an allocation left outside its pool).
//!
//! Three trees take part, as in `git diff BASE...HEAD`: `old` (where the branch forked),
//! `new` (the branch: a commit, or the working tree), and `other` (what the base branch did
//! meanwhile, whose claims are checked against the branch's).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::IpAddr;

use serde::Serialize;

use crate::engine::git::{Repo, Status};
use crate::error::Result;
use crate::model::cooldown::CooldownRecord;
use crate::model::layout::{self, ScopeDir, locate, object_path as path_of};
use crate::model::prefix_claim::PrefixClaimManifest;
use crate::model::subnet::{SubnetManifest, off_limits_role, pool_candidates};
use crate::model::{AllocationManifest, Namespace, PoolManifest, parse_allocation_name};
use crate::store::fs::FsStore;
use crate::store::{ObjectKind, Objects};
use crate::yaml;

/// What changed about one object.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ChangeKind {
    /// A new allocation.
    Claimed,
    /// An allocation deleted.
    Released,
    /// An allocation whose owner was rewritten in place.
    OwnerChanged,
    /// An allocation rewritten in place with the same owner.
    Edited,
    /// An allocation whose NIC's MAC (`spec.mac`) changed in place, and nothing else
    /// (`ipamctl mac set`).
    MacChanged,
    /// A new pool.
    PoolCreated,
    /// A pool whose manifest changed.
    PoolChanged,
    /// A pool deleted.
    PoolDeleted,
    /// A new subnet.
    SubnetCreated,
    /// A subnet whose manifest changed.
    SubnetChanged,
    /// A subnet deleted.
    SubnetDeleted,
    /// A cooldown record written: an address released that only its owner may have back
    /// until the pool's `reuseAfter` has passed.
    CooldownStarted,
    /// A cooldown record rewritten (released again, by another owner or later).
    CooldownChanged,
    /// A cooldown record deleted: its address is free for everyone again.
    CooldownEnded,
    /// A child prefix claimed from a supernet pool.
    PrefixClaimed,
    /// A child prefix released.
    PrefixReleased,
    /// A prefix claim rewritten in place.
    PrefixEdited,
    /// A manifest that does not parse on one side.
    Unreadable,
}

impl ChangeKind {
    /// The word, as JSON spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            ChangeKind::Claimed => "claimed",
            ChangeKind::Released => "released",
            ChangeKind::OwnerChanged => "owner-changed",
            ChangeKind::Edited => "edited",
            ChangeKind::MacChanged => "mac-changed",
            ChangeKind::PoolCreated => "pool-created",
            ChangeKind::PoolChanged => "pool-changed",
            ChangeKind::PoolDeleted => "pool-deleted",
            ChangeKind::SubnetCreated => "subnet-created",
            ChangeKind::SubnetChanged => "subnet-changed",
            ChangeKind::SubnetDeleted => "subnet-deleted",
            ChangeKind::CooldownStarted => "cooldown-started",
            ChangeKind::CooldownChanged => "cooldown-changed",
            ChangeKind::CooldownEnded => "cooldown-ended",
            ChangeKind::PrefixClaimed => "prefix-claimed",
            ChangeKind::PrefixReleased => "prefix-released",
            ChangeKind::PrefixEdited => "prefix-edited",
            ChangeKind::Unreadable => "unreadable",
        }
    }
}

/// A conflict with the invariants that the change brings.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ConflictKind {
    /// The same address claimed on both sides, for different owners.
    ClaimedOnBothSides,
    /// The same owner claiming in the same pool on both sides, at different addresses.
    OwnerClaimedTwice,
    /// An allocation rewritten in place instead of released and claimed.
    EditedInPlace,
    /// An allocation whose address is not a candidate of its pool on the new side (or
    /// whose pool is gone).
    OutsidePool,
    /// A manifest that does not parse on the new side.
    Unreadable,
    /// A prefix claim of the branch that overlaps another claim of its pool on the new
    /// side (or one claimed on the base branch since the fork), or lies outside its pool.
    PrefixOverlap,
}

/// One changed object.
#[derive(Clone, Debug, Serialize)]
pub struct Change {
    /// What happened.
    pub change: ChangeKind,
    /// `ipallocation/<name>`, `ipampool/<name>`, `subnet/<name>` or `cooldownrecord/<name>`.
    pub object: String,
    /// The file, relative to the state directory.
    pub path: String,
    /// The namespace, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// The pool of the allocation, subnet or cooldown record.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pool: Option<String>,
    /// The address of the allocation or cooldown record.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub address: Option<IpAddr>,
    /// The prefix of a prefix claim.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prefix: Option<String>,
    /// The owner (`KIND/NAME`), as it is now (as it was, for a release).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// The owner's uid.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub uid: Option<String>,
    /// What was before: the old owner, or the pool or subnet fields that changed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub was: Option<String>,
    /// The allocation's MAC (`spec.mac`), as it is now (as it was, for a release).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mac: Option<String>,
}

/// One conflict.
#[derive(Clone, Debug, Serialize)]
pub struct Conflict {
    /// What kind.
    pub conflict: ConflictKind,
    /// The object it is about.
    pub object: String,
    /// What is wrong, on one line.
    pub message: String,
}

/// The whole answer.
#[derive(Clone, Debug, Serialize)]
pub struct Diff {
    /// The fork point (a commit id).
    pub base: String,
    /// The branch: a commit id, or `working tree`.
    pub head: String,
    /// The base branch's tip checked for conflicts, if it moved on since the fork.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub other: Option<String>,
    /// The changes, in path order.
    pub changes: Vec<Change>,
    /// The conflicts with the invariants.
    pub conflicts: Vec<Conflict>,
}

/// A tree to read manifests from.
#[derive(Clone, Copy)]
enum Tree<'a> {
    Commit(&'a str),
    Worktree,
}

/// Reads manifests from commits (through git) and from the working tree (through the
/// store, beneath the state directory's handle).
struct Reader<'a> {
    repo: &'a Repo,
    store: &'a FsStore,
}

impl Reader<'_> {
    /// The bytes of each path in `tree`.
    fn read(&self, tree: Tree<'_>, paths: &[&str]) -> Result<Vec<Option<Vec<u8>>>> {
        match tree {
            Tree::Commit(rev) => {
                let wanted: Vec<(String, String)> = paths
                    .iter()
                    .map(|p| (rev.to_owned(), (*p).to_owned()))
                    .collect();
                self.repo.blobs(&wanted)
            }
            Tree::Worktree => paths
                .iter()
                .map(|p| match locate(p) {
                    Some((kind, ns, name)) => self.store.get(kind, ns.as_ref(), &name),
                    None => Ok(None),
                })
                .collect(),
        }
    }

    /// The names of the objects of `kind` in scope `ns` of `tree`.
    fn names(
        &self,
        tree: Tree<'_>,
        kind: ObjectKind,
        ns: Option<&Namespace>,
    ) -> Result<Vec<String>> {
        match tree {
            Tree::Commit(rev) => {
                let dir = layout::dir_path(ScopeDir::Objects(kind), ns);
                Ok(self
                    .repo
                    .list(rev, &dir)?
                    .into_iter()
                    .filter_map(|f| f.strip_suffix(".yaml").map(str::to_owned))
                    .collect())
            }
            Tree::Worktree => self.store.list(kind, ns),
        }
    }

    /// The subnets of `pool` in scope `ns` of `tree` that parse.
    fn subnets(
        &self,
        tree: Tree<'_>,
        ns: Option<&Namespace>,
        pool: &str,
    ) -> Result<Vec<SubnetManifest>> {
        let paths: Vec<String> = self
            .names(tree, ObjectKind::Subnet, ns)?
            .iter()
            .map(|n| path_of(ObjectKind::Subnet, ns, n))
            .collect();
        let paths: Vec<&str> = paths.iter().map(String::as_str).collect();
        Ok(self
            .read(tree, &paths)?
            .into_iter()
            .flatten()
            .filter_map(|b| match parse(ObjectKind::Subnet, &b) {
                Read::Subnet(m) if m.spec.pool.as_str() == pool => Some(*m),
                _ => None,
            })
            .collect())
    }
}

/// An object as read from one side.
enum Read {
    Allocation(Box<AllocationManifest>),
    Pool(Box<PoolManifest>),
    Subnet(Box<SubnetManifest>),
    Cooldown(Box<CooldownRecord>),
    PrefixClaim(Box<PrefixClaimManifest>),
    Broken(String),
}

fn parse(kind: ObjectKind, bytes: &[u8]) -> Read {
    let Ok(text) = std::str::from_utf8(bytes) else {
        return Read::Broken("not UTF-8".into());
    };
    match kind {
        ObjectKind::Allocation => match yaml::decode_allocation(text) {
            Ok(m) => Read::Allocation(Box::new(m)),
            Err(e) => Read::Broken(e),
        },
        ObjectKind::Pool => match yaml::decode_pool(text) {
            Ok(m) => Read::Pool(Box::new(m)),
            Err(e) => Read::Broken(e),
        },
        ObjectKind::Subnet => match yaml::decode_subnet(text) {
            Ok(m) => Read::Subnet(Box::new(m)),
            Err(e) => Read::Broken(e),
        },
        ObjectKind::Cooldown => match yaml::decode_cooldown(text) {
            Ok(m) => Read::Cooldown(Box::new(m)),
            Err(e) => Read::Broken(e),
        },
        ObjectKind::PrefixClaim => match yaml::decode_prefix_claim(text) {
            Ok(m) => Read::PrefixClaim(Box::new(m)),
            Err(e) => Read::Broken(e),
        },
    }
}

/// What changed from `old` to `new` (a commit, or the working tree with `None`), with the
/// conflicts against `other` (the base branch's tip, when it moved on since `old`).
pub fn diff(
    repo: &Repo,
    store: &FsStore,
    old: &str,
    new: Option<&str>,
    other: Option<&str>,
) -> Result<Diff> {
    let reader = Reader { repo, store };
    let new_tree = new.map_or(Tree::Worktree, Tree::Commit);
    let files: Vec<(Status, String)> = repo
        .changed(old, new)?
        .into_iter()
        .filter(|(_, p)| locate(p).is_some())
        .collect();
    let paths: Vec<&str> = files.iter().map(|(_, p)| p.as_str()).collect();
    let before = reader.read(Tree::Commit(old), &paths)?;
    let after = reader.read(new_tree, &paths)?;

    let mut tally = Tally::default();
    for (((_, path), old_bytes), new_bytes) in files.iter().zip(before).zip(after) {
        tally.add(path, old_bytes, new_bytes);
    }
    let Tally {
        changes,
        mut conflicts,
        claims,
        pools_touched,
        prefix_claims,
    } = tally;

    if let Some(other) = other {
        conflicts.extend(across_sides(repo, old, other, &claims)?);
        let theirs = other_side_prefix_claims(repo, &reader, old, other)?;
        conflicts.extend(prefix_overlaps(
            &prefix_claims,
            &theirs,
            "claimed on the base branch since the fork",
        ));
    }
    conflicts.extend(new_side_prefix_conflicts(
        &reader,
        new_tree,
        &prefix_claims,
    )?);
    conflicts.extend(outside_pools(&reader, new_tree, &claims, &pools_touched)?);
    Ok(Diff {
        base: old.to_owned(),
        head: new.map_or_else(|| "working tree".to_owned(), str::to_owned),
        other: other.map(str::to_owned),
        changes,
        conflicts,
    })
}

/// What the changed files of a diff add up to, file by file.
#[derive(Default)]
struct Tally {
    changes: Vec<Change>,
    conflicts: Vec<Conflict>,
    /// The branch's claims, for the checks across sides and against the pools.
    claims: Vec<AllocationManifest>,
    /// Pools the branch created, changed or deleted.
    pools_touched: BTreeSet<(Option<Namespace>, String)>,
    /// The branch's new or rewritten prefix claims, checked against their pools' others.
    prefix_claims: Vec<PrefixClaimManifest>,
}

impl Tally {
    /// Adds what one changed file (of a kind [`locate`] knows) says, read before and after.
    // Length: one match over what the two sides read as, an arm per case a reviewer tells
    // apart; split, the cases would hide each other.
    fn add(&mut self, path: &str, old_bytes: Option<Vec<u8>>, new_bytes: Option<Vec<u8>>) {
        let (kind, ns, name) = locate(path).expect("filtered above");
        let object = format!("{}/{name}", kind.resource());
        let old_read = old_bytes.map(|b| parse(kind, &b));
        // Exactly the bytes ipamctl writes for what the file holds (no hand edit shows).
        let canonical =
            |m: &AllocationManifest| new_bytes.as_deref() == Some(yaml::encode(m).as_bytes());
        let new_read = new_bytes.as_ref().map(|b| parse(kind, b));
        let mut change = Change::unread(&object, path, ns.as_ref());
        if let Some((kind, was)) = pool_change(old_read.as_ref(), new_read.as_ref()) {
            change.change = kind;
            change.was = was;
            self.pools_touched.insert((ns, name));
            self.changes.push(change);
            return;
        }
        if let Some(claim) = prefix_change(&mut change, old_read.as_ref(), new_read.as_ref()) {
            self.prefix_claims.extend(claim);
            self.changes.push(change);
            return;
        }
        if let Some(pool) = range_change(&mut change, old_read.as_ref(), new_read.as_ref()) {
            // A subnet's gateway or reserved addresses may now sit on an allocation.
            if matches!(kind, ObjectKind::Subnet) {
                self.pools_touched.insert((ns, pool));
            }
            self.changes.push(change);
            return;
        }
        match (old_read, new_read) {
            // Identical bytes read back (a mode change, say): nothing a reviewer sees.
            (None, None) => return,
            (_, Some(Read::Broken(why))) => {
                self.conflicts.push(Conflict {
                    conflict: ConflictKind::Unreadable,
                    object,
                    message: format!("{path} does not parse: {why}"),
                });
            }
            (Some(Read::Broken(_)), Some(Read::Allocation(m)))
            | (None, Some(Read::Allocation(m))) => {
                describe(&mut change, &m);
                change.change = ChangeKind::Claimed;
                self.claims.push(*m);
            }
            (Some(Read::Allocation(m)), None) => {
                describe(&mut change, &m);
                change.change = ChangeKind::Released;
            }
            // Released and claimed again by another owner, as ipamctl writes it: git sees
            // one modified file, a reviewer two changes.
            (Some(Read::Allocation(was)), Some(Read::Allocation(m)))
                if was.spec.owner != m.spec.owner && canonical(&m) =>
            {
                let mut released = change.clone();
                describe(&mut released, &was);
                released.change = ChangeKind::Released;
                self.changes.push(released);
                describe(&mut change, &m);
                change.change = ChangeKind::Claimed;
                change.was = Some(owner_text(&was));
                self.claims.push(*m);
            }
            // `ipamctl mac set`: the NIC keeps its address, and nothing but its MAC changed.
            (Some(Read::Allocation(was)), Some(Read::Allocation(m)))
                if was.spec.mac != m.spec.mac && only_mac_differs(&was, &m) && canonical(&m) =>
            {
                describe(&mut change, &m);
                change.change = ChangeKind::MacChanged;
                change.was = Some(format!(
                    "mac {}",
                    was.spec
                        .mac
                        .map_or_else(|| "-".to_owned(), |m| m.to_string())
                ));
                self.claims.push(*m);
            }
            (Some(Read::Allocation(was)), Some(Read::Allocation(m))) => {
                describe(&mut change, &m);
                if was.spec.owner == m.spec.owner {
                    change.change = ChangeKind::Edited;
                } else {
                    change.change = ChangeKind::OwnerChanged;
                    change.was = Some(owner_text(&was));
                }
                self.conflicts.push(Conflict {
                conflict: ConflictKind::EditedInPlace,
                object,
                message: format!(
                    "{path} was rewritten in place; an allocation is only ever created (allocate) or deleted (release)"
                ),
            });
                self.claims.push(*m);
            }
            (Some(Read::Broken(_)), None) => change.change = ChangeKind::Released,
            // A pool file where an allocation belongs, or the reverse: `locate` keeps the
            // kinds apart, so these cannot be read.
            _ => {}
        }
        self.changes.push(change);
    }
}

impl Change {
    /// A change of the object at `path` whose contents are still to be described.
    fn unread(object: &str, path: &str, ns: Option<&Namespace>) -> Change {
        Change {
            change: ChangeKind::Unreadable,
            object: object.to_owned(),
            path: path.to_owned(),
            namespace: ns.map(|n| n.to_string()),
            pool: None,
            address: None,
            prefix: None,
            owner: None,
            uid: None,
            was: None,
            mac: None,
        }
    }
}

/// A prefix claim file's change: claimed, released or rewritten in place (then also the
/// conflict-worthy claim itself), when a side reads as a prefix claim. Returns the claim
/// the branch brings (to check for overlaps), if any.
fn prefix_change(
    change: &mut Change,
    old: Option<&Read>,
    new: Option<&Read>,
) -> Option<Option<PrefixClaimManifest>> {
    let claim_of = |r: Option<&Read>| match r {
        Some(Read::PrefixClaim(m)) => Some(m.as_ref().clone()),
        _ => None,
    };
    let (was, now) = (claim_of(old), claim_of(new));
    let shown = now.as_ref().or(was.as_ref())?;
    change.pool = Some(shown.spec.pool.to_string());
    change.prefix = Some(shown.spec.prefix.to_string());
    change.owner = Some(shown.spec.owner.to_string());
    change.uid = shown.spec.owner.uid().map(|u| u.to_string());
    change.change = match (&was, &now) {
        (None, Some(_)) => ChangeKind::PrefixClaimed,
        (Some(_), None) => ChangeKind::PrefixReleased,
        (Some(w), Some(n)) => {
            if w.spec.owner != n.spec.owner {
                change.was = Some(w.spec.owner.to_string());
            }
            ChangeKind::PrefixEdited
        }
        (None, None) => unreachable!("one side is a prefix claim"),
    };
    Some(now)
}

/// The prefix claims of the base branch's tip `other` that are new since the fork `old`.
fn other_side_prefix_claims(
    repo: &Repo,
    reader: &Reader<'_>,
    old: &str,
    other: &str,
) -> Result<Vec<PrefixClaimManifest>> {
    let paths: Vec<String> = repo
        .changed(old, Some(other))?
        .into_iter()
        .map(|(_, p)| p)
        .filter(|p| matches!(locate(p), Some((ObjectKind::PrefixClaim, _, _))))
        .collect();
    let refs: Vec<&str> = paths.iter().map(String::as_str).collect();
    Ok(reader
        .read(Tree::Commit(other), &refs)?
        .into_iter()
        .flatten()
        .filter_map(|b| match parse(ObjectKind::PrefixClaim, &b) {
            Read::PrefixClaim(m) => Some(*m),
            _ => None,
        })
        .collect())
}

/// The conflicts of the branch's prefix claims `ours` with `theirs`: same pool and scope,
/// overlapping prefixes, another claim.
fn prefix_overlaps(
    ours: &[PrefixClaimManifest],
    theirs: &[PrefixClaimManifest],
    where_: &str,
) -> Vec<Conflict> {
    let mut found = Vec::new();
    for a in ours {
        for b in theirs {
            let same_pool =
                a.spec.pool == b.spec.pool && a.metadata.namespace == b.metadata.namespace;
            if same_pool
                && a.metadata.name != b.metadata.name
                && (a.spec.prefix.contains(&b.spec.prefix)
                    || b.spec.prefix.contains(&a.spec.prefix))
            {
                found.push(Conflict {
                    conflict: ConflictKind::PrefixOverlap,
                    object: format!("{}/{}", ObjectKind::PrefixClaim.resource(), a.metadata.name),
                    message: format!(
                        "{} of `{}` overlaps {} of `{}` in pool `{}`, {where_}",
                        a.spec.prefix, a.spec.owner, b.spec.prefix, b.spec.owner, a.spec.pool
                    ),
                });
            }
        }
    }
    found
}

/// The conflicts of the branch's prefix claims on the new side: a claim overlapping
/// another claim of its pool there, or outside its pool (or its pool gone).
fn new_side_prefix_conflicts(
    reader: &Reader<'_>,
    tree: Tree<'_>,
    ours: &[PrefixClaimManifest],
) -> Result<Vec<Conflict>> {
    let mut conflicts = Vec::new();
    let mut scopes: Vec<Option<Namespace>> =
        ours.iter().map(|c| c.metadata.namespace.clone()).collect();
    scopes.sort();
    scopes.dedup();
    for ns in scopes {
        let names = reader.names(tree, ObjectKind::PrefixClaim, ns.as_ref())?;
        let paths: Vec<String> = names
            .iter()
            .map(|n| path_of(ObjectKind::PrefixClaim, ns.as_ref(), n))
            .collect();
        let refs: Vec<&str> = paths.iter().map(String::as_str).collect();
        let all: Vec<PrefixClaimManifest> = reader
            .read(tree, &refs)?
            .into_iter()
            .flatten()
            .filter_map(|b| match parse(ObjectKind::PrefixClaim, &b) {
                Read::PrefixClaim(m) => Some(*m),
                _ => None,
            })
            .collect();
        let mine: Vec<PrefixClaimManifest> = ours
            .iter()
            .filter(|c| c.metadata.namespace == ns)
            .cloned()
            .collect();
        conflicts.extend(prefix_overlaps(&mine, &all, "on the new side"));
        for c in &mine {
            let pool_path = path_of(ObjectKind::Pool, ns.as_ref(), c.spec.pool.as_str());
            let pool = reader.read(tree, &[pool_path.as_str()])?.pop().flatten();
            let inside = pool.map(|b| parse(ObjectKind::Pool, &b)).is_some_and(
                |r| matches!(r, Read::Pool(p) if p.spec.cidr.contains(&c.spec.prefix)),
            );
            if !inside {
                conflicts.push(Conflict {
                    conflict: ConflictKind::PrefixOverlap,
                    object: format!("{}/{}", ObjectKind::PrefixClaim.resource(), c.metadata.name),
                    message: format!(
                        "{} of `{}` lies outside pool `{}` (or the pool is gone) on the new side",
                        c.spec.prefix, c.spec.owner, c.spec.pool
                    ),
                });
            }
        }
    }
    Ok(conflicts)
}

/// A pool file's change and what changed in it, when the sides that exist read as pools
/// (a side that does not parse counts as absent).
fn pool_change(old: Option<&Read>, new: Option<&Read>) -> Option<(ChangeKind, Option<String>)> {
    match (old, new) {
        (None | Some(Read::Broken(_)), Some(Read::Pool(_))) => {
            Some((ChangeKind::PoolCreated, None))
        }
        (Some(Read::Pool(_)), None) => Some((ChangeKind::PoolDeleted, None)),
        (Some(Read::Pool(was)), Some(Read::Pool(now))) => {
            Some((ChangeKind::PoolChanged, Some(pool_changes(was, now))))
        }
        _ => None,
    }
}

/// Describes a subnet's or cooldown record's change into `change` when the sides that exist
/// read as one (a side that does not parse counts as absent), and returns its pool.
fn range_change(change: &mut Change, old: Option<&Read>, new: Option<&Read>) -> Option<String> {
    let subnet = |r: Option<&Read>| match r {
        Some(Read::Subnet(m)) => Some(m.as_ref().clone()),
        _ => None,
    };
    let record = |r: Option<&Read>| match r {
        Some(Read::Cooldown(m)) => Some(m.as_ref().clone()),
        _ => None,
    };
    let (kind, pool) = match (subnet(old), subnet(new), record(old), record(new)) {
        (was, Some(now), _, _) => {
            change.was = was.as_ref().map(|w| subnet_changes(w, &now));
            let kind = match was {
                Some(_) => ChangeKind::SubnetChanged,
                None => ChangeKind::SubnetCreated,
            };
            (kind, now.spec.pool.to_string())
        }
        (Some(was), None, _, _) => (ChangeKind::SubnetDeleted, was.spec.pool.to_string()),
        (_, _, was, Some(now)) => {
            match now.prefix() {
                Some(p) => change.prefix = Some(p.to_string()),
                None => change.address = Some(now.spec.address),
            }
            change.owner = Some(now.spec.owner.to_string());
            change.uid = now.spec.owner.uid().map(|u| u.to_string());
            change.was = was.map(|w| format!("released at {}", w.spec.released_at));
            let kind = match change.was {
                Some(_) => ChangeKind::CooldownChanged,
                None => ChangeKind::CooldownStarted,
            };
            (kind, now.spec.pool.to_string())
        }
        (_, _, Some(was), None) => {
            match was.prefix() {
                Some(p) => change.prefix = Some(p.to_string()),
                None => change.address = Some(was.spec.address),
            }
            change.owner = Some(was.spec.owner.to_string());
            change.uid = was.spec.owner.uid().map(|u| u.to_string());
            (ChangeKind::CooldownEnded, was.spec.pool.to_string())
        }
        _ => return None,
    };
    change.change = kind;
    change.pool = Some(pool.clone());
    Some(pool)
}

/// The fields of a subnet that changed, as `cidr 10.42.1.0/24 -> 10.42.1.0/25`.
fn subnet_changes(was: &SubnetManifest, now: &SubnetManifest) -> String {
    let show = |s: &SubnetManifest| -> Vec<(&'static str, String)> {
        let reserved: Vec<String> = s.spec.reserved.iter().map(|e| e.to_string()).collect();
        vec![
            ("pool", s.spec.pool.to_string()),
            ("cidr", s.spec.cidr.to_string()),
            ("gateway", s.gateway().to_string()),
            ("reserved", format!("[{}]", reserved.join(", "))),
        ]
    };
    field_changes(show(was), show(now))
}

/// The fields that differ between two lists of (field, value), as `cidr a -> b, zone - -> x`;
/// `metadata` when none does (only labels, annotations and the like changed).
fn field_changes(was: Vec<(&'static str, String)>, now: Vec<(&'static str, String)>) -> String {
    let diffs: Vec<String> = was
        .into_iter()
        .zip(now)
        .filter(|(a, b)| a.1 != b.1)
        .map(|((field, a), (_, b))| format!("{field} {a} -> {b}"))
        .collect();
    if diffs.is_empty() {
        "metadata".into()
    } else {
        diffs.join(", ")
    }
}

/// The holder of `m`, with its uid.
fn owner_text(m: &AllocationManifest) -> String {
    m.spec.owner.with_uid()
}

fn describe(change: &mut Change, m: &AllocationManifest) {
    change.pool = Some(m.spec.pool.to_string());
    change.address = Some(m.spec.address);
    change.owner = Some(m.spec.owner.to_string());
    change.uid = m.spec.owner.uid().map(|u| u.to_string());
    change.mac = m.spec.mac.map(|m| m.to_string());
}

/// Are `was` and `now` the same allocation but for `spec.mac`?
fn only_mac_differs(was: &AllocationManifest, now: &AllocationManifest) -> bool {
    let mut same = was.clone();
    same.spec.mac = now.spec.mac;
    same == *now
}

/// The fields of a pool that changed, as `cidr 10.0.0.0/24 -> 10.0.0.0/23, zone - -> a`.
fn pool_changes(was: &PoolManifest, now: &PoolManifest) -> String {
    let show = |p: &PoolManifest| -> Vec<(&'static str, String)> {
        let s = &p.spec;
        let excludes: Vec<String> = s.exclude.iter().map(|e| e.to_string()).collect();
        vec![
            ("cidr", s.cidr.to_string()),
            ("kind", s.kind.to_string()),
            ("gateway", s.gateway.map_or("-".into(), |g| g.to_string())),
            (
                "macPrefix",
                s.mac_prefix.map_or("-".into(), |p| p.to_string()),
            ),
            ("exclude", format!("[{}]", excludes.join(", "))),
            ("zone", s.zone.clone().unwrap_or_else(|| "-".into())),
            ("pick", s.pick.to_string()),
        ]
    };
    field_changes(show(was), show(now))
}

/// The branch's claims against what the base branch claimed meanwhile.
fn across_sides(
    repo: &Repo,
    old: &str,
    other: &str,
    claims: &[AllocationManifest],
) -> Result<Vec<Conflict>> {
    let theirs: Vec<String> = repo
        .changed(old, Some(other))?
        .into_iter()
        .filter(|(s, p)| {
            *s != Status::Deleted && matches!(locate(p), Some((ObjectKind::Allocation, _, _)))
        })
        .map(|(_, p)| p)
        .collect();
    let wanted: Vec<(String, String)> = theirs
        .iter()
        .map(|p| (other.to_owned(), p.clone()))
        .collect();
    let mut by_path: HashMap<String, AllocationManifest> = HashMap::new();
    let mut by_owner: HashMap<(Option<Namespace>, String, String), AllocationManifest> =
        HashMap::new();
    for (path, bytes) in theirs.iter().zip(repo.blobs(&wanted)?) {
        if let Some(Read::Allocation(m)) = bytes.map(|b| parse(ObjectKind::Allocation, &b)) {
            let key = owner_key(&m);
            by_owner.insert(key, (*m).clone());
            by_path.insert(path.clone(), *m);
        }
    }
    let mut conflicts = Vec::new();
    for m in claims {
        let ns = m.metadata.namespace.as_ref();
        let path = path_of(ObjectKind::Allocation, ns, &m.metadata.name);
        let object = format!("ipallocation/{}", m.metadata.name);
        if let Some(t) = by_path.get(&path)
            && t.spec.owner != m.spec.owner
        {
            conflicts.push(Conflict {
                conflict: ConflictKind::ClaimedOnBothSides,
                object: object.clone(),
                message: format!(
                    "{} in pool `{}` is claimed here by `{}` and on {} by `{}`; git will stop on an add/add conflict",
                    m.spec.address,
                    m.spec.pool,
                    owner_text(m),
                    short(other),
                    owner_text(t)
                ),
            });
        }
        if let Some(t) = by_owner.get(&owner_key(m))
            && t.spec.address != m.spec.address
        {
            conflicts.push(Conflict {
                conflict: ConflictKind::OwnerClaimedTwice,
                object,
                message: format!(
                    "`{}` claims {} in pool `{}` here and {} on {}; after a merge it would hold two",
                    owner_text(m),
                    m.spec.address,
                    m.spec.pool,
                    t.spec.address,
                    short(other)
                ),
            });
        }
    }
    Ok(conflicts)
}

/// An owner's identity in its pool.
fn owner_key(m: &AllocationManifest) -> (Option<Namespace>, String, String) {
    (
        m.metadata.namespace.clone(),
        m.spec.pool.to_string(),
        owner_text(m),
    )
}

/// The first 12 characters of a commit id.
pub fn short(id: &str) -> &str {
    &id[..id.len().min(12)]
}

/// Allocations the branch claims, and every allocation of a pool it changes, that are not
/// candidates of their pool on the new side.
fn outside_pools(
    reader: &Reader<'_>,
    tree: Tree<'_>,
    claims: &[AllocationManifest],
    pools_touched: &BTreeSet<(Option<Namespace>, String)>,
) -> Result<Vec<Conflict>> {
    // (scope, pool) -> addresses to check.
    let mut check: BTreeMap<(Option<Namespace>, String), BTreeSet<IpAddr>> = BTreeMap::new();
    for m in claims {
        check
            .entry((m.metadata.namespace.clone(), m.spec.pool.to_string()))
            .or_default()
            .insert(m.spec.address);
    }
    for (ns, pool) in pools_touched {
        let names = reader.names(tree, ObjectKind::Allocation, ns.as_ref())?;
        let held = names
            .iter()
            .filter_map(|n| parse_allocation_name(n))
            .filter(|(p, _)| p == pool)
            .map(|(_, a)| a);
        check
            .entry((ns.clone(), pool.clone()))
            .or_default()
            .extend(held);
    }
    let mut conflicts = Vec::new();
    for ((ns, pool), addresses) in check {
        if addresses.is_empty() {
            continue;
        }
        let path = path_of(ObjectKind::Pool, ns.as_ref(), &pool);
        let manifest = reader
            .read(tree, &[&path])?
            .pop()
            .flatten()
            .map(|b| parse(ObjectKind::Pool, &b));
        let subnets = reader.subnets(tree, ns.as_ref(), &pool)?;
        let candidates = match manifest {
            Some(Read::Pool(p)) => pool_candidates(&p, &subnets),
            // Unreadable: reported as such above, or by `ipamctl check`.
            Some(_) => continue,
            None => {
                for address in addresses {
                    conflicts.push(outside(&pool, address, "which does not exist"));
                }
                continue;
            }
        };
        for address in addresses {
            if let Some((subnet, role)) = off_limits_role(&subnets, address) {
                let why = format!("on {role} of subnet `{}`", subnet.metadata.name);
                conflicts.push(outside(&pool, address, &why));
            } else if !candidates.contains(address) {
                conflicts.push(outside(&pool, address, "whose candidates it is not among"));
            }
        }
    }
    Ok(conflicts)
}

fn outside(pool: &str, address: IpAddr, why: &str) -> Conflict {
    let mut name = String::new();
    crate::model::push_allocation_name(&mut name, pool, address);
    Conflict {
        conflict: ConflictKind::OutsidePool,
        object: format!("ipallocation/{name}"),
        message: format!("{address} is left in pool `{pool}`, {why}"),
    }
}
