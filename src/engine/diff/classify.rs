//! Classifying a diff's changed files: what each one is to a reviewer (claimed, released,
//! owner changed, edited, a pool, subnet, cooldown or prefix claim change), file by file,
//! and the conflicts one file shows on its own (unreadable, edited in place).

use std::collections::BTreeSet;

use crate::engine::diff::answer::{Change, ChangeKind, Conflict, ConflictKind};
use crate::engine::diff::read::{Read, parse};
use crate::model::layout::locate;
use crate::model::prefix_claim::PrefixClaimManifest;
use crate::model::subnet::SubnetManifest;
use crate::model::{AllocationManifest, Namespace, PoolManifest};
use crate::store::ObjectKind;
use crate::yaml;

/// What the changed files of a diff add up to, file by file.
#[derive(Default)]
pub(super) struct Tally {
    pub(super) changes: Vec<Change>,
    pub(super) conflicts: Vec<Conflict>,
    /// The branch's claims, for the checks across sides and against the pools.
    pub(super) claims: Vec<AllocationManifest>,
    /// Pools the branch created, changed or deleted.
    pub(super) pools_touched: BTreeSet<(Option<Namespace>, String)>,
    /// The branch's new or rewritten prefix claims, checked against their pools' others.
    pub(super) prefix_claims: Vec<PrefixClaimManifest>,
}

impl Tally {
    /// Adds what one changed file (of a kind [`locate`] knows) says, read before and after.
    // Length: one match over what the two sides read as, an arm per case a reviewer tells
    // apart; split, the cases would hide each other.
    pub(super) fn add(
        &mut self,
        path: &str,
        old_bytes: Option<Vec<u8>>,
        new_bytes: Option<Vec<u8>>,
    ) {
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
        if let Some((kind, was)) = quota_change(old_read.as_ref(), new_read.as_ref()) {
            change.change = kind;
            change.was = was;
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
            // A lease renewed (`ipamctl renew`): the address stays the owner's, and the
            // review shows one line with the expiry it had, never a conflict.
            (Some(Read::Allocation(was)), Some(Read::Allocation(m)))
                if was.spec.expires_at != m.spec.expires_at
                    && only_expiry_differs(&was, &m)
                    && canonical(&m) =>
            {
                describe(&mut change, &m);
                change.change = ChangeKind::Renewed;
                change.was = Some(format!(
                    "expires {}",
                    was.spec
                        .expires_at
                        .as_ref()
                        .map_or_else(|| "-".to_owned(), |t| t.to_string())
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

/// A quota file's change and the ceilings that changed (`addresses 10 -> 20`), when the
/// sides that exist read as quotas.
fn quota_change(old: Option<&Read>, new: Option<&Read>) -> Option<(ChangeKind, Option<String>)> {
    match (old, new) {
        (None | Some(Read::Broken(_)), Some(Read::Quota(_))) => {
            Some((ChangeKind::QuotaCreated, None))
        }
        (Some(Read::Quota(_)), None) => Some((ChangeKind::QuotaDeleted, None)),
        (Some(Read::Quota(was)), Some(Read::Quota(now))) => {
            let text = |q: &crate::model::quota::QuotaManifest, r| {
                q.limit(r)
                    .map_or_else(|| "-".to_owned(), |n: u64| n.to_string())
            };
            let changed: Vec<String> = crate::model::quota::Resource::ALL
                .into_iter()
                .filter(|r| was.limit(*r) != now.limit(*r))
                .map(|r| format!("{r} {} -> {}", text(was, r), text(now, r)))
                .collect();
            Some((ChangeKind::QuotaChanged, Some(changed.join(", "))))
        }
        _ => None,
    }
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
        let mut fields = vec![
            ("pool", s.spec.pool.to_string()),
            ("cidr", s.spec.cidr.to_string()),
            ("gateway", s.gateway().to_string()),
            ("reserved", format!("[{}]", reserved.join(", "))),
        ];
        fields.extend(s.spec.dhcp.fields());
        fields
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
pub(super) fn owner_text(m: &AllocationManifest) -> String {
    m.spec.owner.with_uid()
}

fn describe(change: &mut Change, m: &AllocationManifest) {
    change.pool = Some(m.spec.pool.to_string());
    change.address = Some(m.spec.address);
    change.owner = Some(m.spec.owner.to_string());
    change.uid = m.spec.owner.uid().map(|u| u.to_string());
    change.mac = m.spec.mac.map(|m| m.to_string());
}

/// Are `was` and `now` the same allocation but for `spec.expiresAt`?
fn only_expiry_differs(was: &AllocationManifest, now: &AllocationManifest) -> bool {
    let mut same = was.clone();
    same.spec.expires_at = now.spec.expires_at;
    same == *now
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
        .into_iter()
        .chain(s.dhcp.fields())
        .collect()
    };
    field_changes(show(was), show(now))
}
