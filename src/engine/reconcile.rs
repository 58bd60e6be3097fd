//! Leak detection: which allocations belong to owners that no longer exist, and which of
//! them a run may release. [`leaks`] is pure (the caller reads the live list, the clock and
//! the allocations); [`reconcile`] reads the allocations in scope and, with `--apply`,
//! releases the leaks, each guarded by the owner found dead.
//!
//! Four guards stand between a wrong live list and a wiped cloud: a line that is neither
//! `KIND/NAME` nor a UUID refuses the whole list (hostnames fed for uuids match nothing),
//! a list speaks only for the kinds of owners it names ([`Judged::Listed`]: a list of VMs
//! never makes a floating IP look leaked), an allocation claimed after the list was taken
//! (or younger than `--min-age`) is never a leak, and [`MaxRelease`] caps how much one run
//! may release.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::time::{Duration, SystemTime};

use crate::engine::list::{Query, collect};
use crate::engine::release::{Released, release_address};
use crate::engine::warning::Warnings;
use crate::error::{self, Error};
use crate::model::{AllocationManifest, Namespace, Owner, OwnerFilter, OwnerKind, PoolRef, Uid};
use crate::store::Store;

/// The owners that still exist, as the orchestrator reported them.
#[derive(Debug, Default)]
pub struct LiveSet {
    kind_names: HashSet<(OwnerKind, String)>,
    uids: HashSet<Uid>,
}

impl LiveSet {
    /// Parses one owner per line, `KIND/NAME` or a UUID (any case); blank lines and `#`
    /// comments are skipped. Any other line refuses the whole list: the error names it.
    pub fn parse(text: &str) -> Result<LiveSet, String> {
        let mut live = LiveSet::default();
        for (i, line) in text.lines().enumerate() {
            let line = line.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            // A malformed line may be kilobytes of anything: quote a short, escaped excerpt
            // of it, and of whatever the reason quotes of it.
            let at =
                |e: String| format!("line {} {}: {}", i + 1, excerpt(line), shorten_quotes(&e));
            if line.contains('/') {
                let owner = Owner::parse(line, None).map_err(at)?;
                live.kind_names
                    .insert((owner.kind(), owner.name().to_owned()));
            } else {
                let uid = Uid::parse_uuid(line).map_err(|_| {
                    at(
                        "is neither `KIND/NAME` nor a UUID (hostnames are not owners: list \
                        uuids, e.g. `virsh list --all --uuid`)"
                            .into(),
                    )
                })?;
                live.uids.insert(uid);
            }
        }
        Ok(live)
    }

    /// No owner listed at all.
    pub fn is_empty(&self) -> bool {
        self.kind_names.is_empty() && self.uids.is_empty()
    }

    /// How many owners the list names (distinct lines).
    pub fn len(&self) -> usize {
        self.kind_names.len() + self.uids.len()
    }

    /// Is `owner` alive: listed by uid, or by kind and name?
    pub fn contains(&self, owner: &Owner) -> bool {
        owner.uid().is_some_and(|u| self.uids.contains(u))
            || self
                .kind_names
                .contains(&(owner.kind(), owner.name().to_owned()))
    }

    /// The kinds of owner the list speaks for among `allocations`: the kind of each
    /// `KIND/NAME` line, and the kind of each allocation whose owner's uid is listed (a uid
    /// line carries no kind: the owners it names say which).
    pub fn kinds(&self, allocations: &[AllocationManifest]) -> BTreeSet<OwnerKind> {
        let mut kinds: BTreeSet<OwnerKind> = self.kind_names.iter().map(|(k, _)| *k).collect();
        for m in allocations {
            if m.spec.owner.uid().is_some_and(|u| self.uids.contains(u)) {
                kinds.insert(m.spec.owner.kind());
            }
        }
        kinds
    }

    /// How many listed owners match no allocation of `allocations`: many means the list is
    /// of the wrong thing, or of another cloud.
    pub fn unmatched(&self, allocations: &[AllocationManifest]) -> usize {
        let mut uids: HashSet<&Uid> = self.uids.iter().collect();
        let mut names: HashSet<(OwnerKind, &str)> = self
            .kind_names
            .iter()
            .map(|(k, n)| (*k, n.as_str()))
            .collect();
        for m in allocations {
            let owner = &m.spec.owner;
            if let Some(uid) = owner.uid() {
                uids.remove(uid);
            }
            names.remove(&(owner.kind(), owner.name()));
        }
        uids.len() + names.len()
    }
}

/// When an allocation is too new for this run to judge.
#[derive(Clone, Copy, Debug)]
pub struct Freshness {
    /// When the live list was taken: an allocation claimed at or after it is not in it.
    pub live_as_of: SystemTime,
    /// An allocation younger than this at `now` is left alone.
    pub min_age: Duration,
    /// The current time.
    pub now: SystemTime,
}

impl Freshness {
    /// Is `m` too new to be judged by a live list taken at `live_as_of`? An allocation
    /// without `metadata.creationTimestamp` (written by an older version) is old enough.
    pub fn too_new(&self, m: &AllocationManifest) -> bool {
        let Some(created) = m.metadata.creation_timestamp else {
            return false;
        };
        let created = created.time();
        // The timestamp is truncated to the second, so a claim stamped in the second the list
        // was taken may have come after it: such a claim is kept too.
        let claimed_after = created + Duration::from_secs(1) > self.live_as_of;
        let young = self
            .now
            .duration_since(created)
            .map_or(true, |age| age < self.min_age);
        claimed_after || young
    }
}

/// The most one `reconcile --apply` may release: a count, or a share of the allocations it
/// checked (rounded up, so that one leak among few can still be released).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MaxRelease {
    /// At most this many.
    Count(u64),
    /// At most this percentage (0–100) of the allocations checked.
    Percent(u64),
}

impl MaxRelease {
    /// Parses `N` or `P%`; the error names the value.
    pub fn parse(s: &str) -> Result<MaxRelease, String> {
        let bad = || {
            format!(
                "invalid cap `{}`: expected a count (`40`) or a percentage from 0% to 100% (`25%`)",
                s.escape_debug()
            )
        };
        match s.strip_suffix('%') {
            Some(p) => match p.parse::<u64>() {
                Ok(p) if p <= 100 => Ok(MaxRelease::Percent(p)),
                _ => Err(bad()),
            },
            None => s.parse().map(MaxRelease::Count).map_err(|_| bad()),
        }
    }

    /// The cap for a run that checked `checked` allocations.
    pub fn limit(self, checked: usize) -> u64 {
        match self {
            MaxRelease::Count(n) => n,
            MaxRelease::Percent(p) => (checked as u64 * p).div_ceil(100),
        }
    }
}

impl std::fmt::Display for MaxRelease {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MaxRelease::Count(n) => write!(f, "{n}"),
            MaxRelease::Percent(p) => write!(f, "{p}%"),
        }
    }
}

/// Which allocations a run judges against the live list: an owner the list cannot speak
/// for (a floating IP, to a list of VMs) is not dead because the list leaves it out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Judged {
    /// Those of the kinds the list speaks for ([`LiveSet::kinds`]): the default.
    Listed,
    /// Those of owners of this kind (`--kind`), whatever the list names.
    Kind(OwnerKind),
    /// Every allocation in scope (`--all-kinds`).
    All,
}

impl Judged {
    /// The flag that asks for it, with a leading space (none for the default), as a hint
    /// repeats it.
    pub fn flag(self) -> String {
        match self {
            Judged::Listed => String::new(),
            Judged::Kind(k) => format!(" --kind {k}"),
            Judged::All => " --all-kinds".into(),
        }
    }
}

/// What a run found among the allocations in scope.
#[derive(Debug)]
pub struct Findings<'a> {
    /// Allocations of owners of the kinds judged.
    pub checked: usize,
    /// Dead owners' allocations old enough to judge: the leaks.
    pub leaked: Vec<&'a AllocationManifest>,
    /// Dead owners' allocations too new to judge, left alone.
    pub too_new: usize,
    /// With [`Judged::Listed`]: how many allocations of each kind the list does not speak
    /// for were left alone.
    pub unjudged: BTreeMap<OwnerKind, usize>,
}

/// The allocations of the kinds `judged` whose owner is not live, apart from those too new
/// to judge.
pub fn leaks<'a>(
    allocations: &'a [AllocationManifest],
    live: &LiveSet,
    judged: Judged,
    freshness: &Freshness,
) -> Findings<'a> {
    let listed = live.kinds(allocations);
    let mut findings = Findings {
        checked: 0,
        leaked: Vec::new(),
        too_new: 0,
        unjudged: BTreeMap::new(),
    };
    for m in allocations {
        let kind = m.spec.owner.kind();
        match judged {
            Judged::Kind(k) if k != kind => continue,
            Judged::Listed if !listed.contains(&kind) => {
                *findings.unjudged.entry(kind).or_default() += 1;
                continue;
            }
            _ => {}
        }
        findings.checked += 1;
        if live.contains(&m.spec.owner) {
            continue;
        }
        if freshness.too_new(m) {
            findings.too_new += 1;
        } else {
            findings.leaked.push(m);
        }
    }
    findings
}

/// A `reconcile` run, validated.
#[derive(Debug)]
pub struct Request {
    /// The owners that still exist.
    pub live: LiveSet,
    /// Where the live list came from (`--live`'s value), for messages.
    pub source: String,
    /// `--kind`, `--all-kinds` or neither: which allocations the list judges.
    pub judged: Judged,
    /// When an allocation is too new to judge.
    pub freshness: Freshness,
    /// `--max-release`.
    pub cap: MaxRelease,
    /// `--apply`: release the leaks (else only report them).
    pub apply: bool,
    /// `--dry-run`: with `apply`, say what would be released.
    pub dry_run: bool,
}

/// What a run did to one leaked allocation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Reported, not released (no `--apply`).
    Leaked,
    /// Released.
    Released,
    /// `--apply --dry-run`: would be released.
    WouldRelease,
    /// Changed since it was found leaked (re-allocated, or released by someone else): kept.
    Skipped,
}

/// What a run found and did.
#[derive(Debug)]
pub struct Outcome {
    /// Allocations of owners of the kinds judged.
    pub checked: usize,
    /// Each leak, in list order, with what was done to it.
    pub leaked: Vec<(AllocationManifest, Verdict)>,
    /// How many were released (or, in a dry run, would be).
    pub released: usize,
    /// Dead owners' allocations too new to judge, left alone.
    pub too_new: usize,
    /// Live owners that match no allocation in scope.
    pub unmatched: usize,
    /// Allocations of each kind the list does not speak for, left alone ([`Judged::Listed`]).
    pub unjudged: BTreeMap<OwnerKind, usize>,
}

/// `reconcile`: finds the leaks among the allocations of `scopes` (every scope, when
/// `None`) and, with `apply`, releases them, each guarded by the owner reported dead so an
/// address re-allocated meanwhile stays. Exit 4, nothing released, when more leaks than the
/// cap allows; exit 2 when the list speaks for no kind and none was asked for
/// ([`Judged::Listed`]). Warnings about broken allocation files go to `warnings`. (An empty
/// live list with `apply` is refused with the arguments, before the store is asked
/// anything.)
pub fn reconcile(
    store: &(dyn Store + Sync),
    scopes: Option<&[Option<Namespace>]>,
    req: &Request,
    warnings: &mut Warnings,
) -> error::Result<Outcome> {
    let all = collect(store, scopes, &Query::default(), warnings)?;
    let found = leaks(&all, &req.live, req.judged, &req.freshness);
    // Allocations in scope, and not one of a kind the list names: it cannot say who is dead.
    if req.judged == Judged::Listed && !found.unjudged.is_empty() && req.live.kinds(&all).is_empty()
    {
        return Err(Error::Usage {
            message: format!(
                "--live {} names no kind of owner: no `KIND/NAME` line, and none of its uids holds an allocation in scope; nothing checked",
                req.source
            ),
            hint: Some(
                "say which owners it lists: `--kind KIND` (e.g. `--kind VirtualMachine` for `virsh list --all --uuid`), or `--all-kinds` to judge every allocation in scope against it".into(),
            ),
        });
    }
    let unmatched = req.live.unmatched(&all);
    check_cap(req, &found, unmatched)?;
    let mut leaked = Vec::new();
    let mut released = 0;
    for m in &found.leaked {
        let verdict = if req.apply && req.dry_run {
            Verdict::WouldRelease
        } else if req.apply {
            release_leak(store, m)?
        } else {
            Verdict::Leaked
        };
        if matches!(verdict, Verdict::Released | Verdict::WouldRelease) {
            released += 1;
        }
        leaked.push(((*m).clone(), verdict));
    }
    Ok(Outcome {
        checked: found.checked,
        leaked,
        released,
        too_new: found.too_new,
        unmatched,
        unjudged: found.unjudged,
    })
}

/// Exit 4 when `--apply` would release more than `--max-release` allows.
fn check_cap(req: &Request, found: &Findings<'_>, unmatched: usize) -> error::Result<()> {
    let (checked, leaked) = (found.checked, found.leaked.len());
    let (cap, limit) = (req.cap, req.cap.limit(checked));
    if !req.apply || leaked as u64 <= limit {
        return Ok(());
    }
    Err(Error::Conflict {
        message: format!(
            "{leaked} of {checked} allocations checked look leaked, more than `--max-release {cap}` allows ({limit}); nothing released{}",
            if unmatched > 0 {
                format!(
                    " (only {} of {} live lines matched an allocation: is the list of the right thing?)",
                    req.live.len().saturating_sub(unmatched),
                    req.live.len()
                )
            } else {
                String::new()
            }
        ),
        hint: Some(if req.source == "-" {
            // A list on stdin is fed again, taken at the same instant (`--live -` needs it).
            format!(
                "review them with `LIST | ipamctl reconcile --live - --live-as-of {}{}` (the same list again, no `--apply`); if they are all leaks, pass `--max-release {leaked}`",
                humantime::format_rfc3339_seconds(req.freshness.live_as_of),
                req.judged.flag()
            )
        } else {
            format!(
                "review them with `ipamctl reconcile --live {}{}` (no `--apply`); if they are all leaks, pass `--max-release {leaked}`",
                req.source,
                req.judged.flag()
            )
        }),
    })
}

/// Releases one leak, guarded by its owner.
fn release_leak(store: &dyn Store, m: &AllocationManifest) -> error::Result<Verdict> {
    let pool = PoolRef {
        namespace: m.metadata.namespace.clone(),
        name: m.spec.pool.clone(),
    };
    let guard = OwnerFilter::exactly(&m.spec.owner);
    match release_address(store, &pool, m.spec.address, &guard) {
        Ok(Released::Deleted(_)) => Ok(Verdict::Released),
        // Changed meanwhile: re-allocated, or released by someone else.
        Ok(Released::NotHeld) | Err(Error::Conflict { .. }) => Ok(Verdict::Skipped),
        Err(e) => Err(e),
    }
}

/// How many characters of a malformed live line an error quotes.
const EXCERPT: usize = 60;

/// A line as an error quotes it: escaped (control characters and all), in backticks, cut to
/// its first [`EXCERPT`] characters with its length said when it is longer:
/// `` `Pod/xxxxxxxx…` (4004 characters) ``.
fn excerpt(line: &str) -> String {
    let count = line.chars().count();
    if count <= EXCERPT {
        return format!("`{}`", line.escape_debug());
    }
    let head: String = line.chars().take(EXCERPT).collect();
    format!("`{}…` ({count} characters)", head.escape_debug())
}

/// `message` with every backticked quote longer than [`EXCERPT`] characters cut to an
/// excerpt: the reasons of [`crate::model::Owner::parse`] quote the name they refuse.
fn shorten_quotes(message: &str) -> String {
    let parts: Vec<&str> = message.split('`').collect();
    let mut out = String::with_capacity(message.len().min(4 * EXCERPT));
    for (i, part) in parts.iter().enumerate() {
        if i > 0 {
            out.push('`');
        }
        // Odd parts lie between a pair of backticks (a last, unpaired one is left alone).
        let quoted = i % 2 == 1 && i + 1 < parts.len();
        if quoted && part.chars().count() > EXCERPT {
            let head: String = part.chars().take(EXCERPT).collect();
            out.push_str(&head);
            out.push('…');
        } else {
            out.push_str(part);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{PoolName, Timestamp};

    const UUID: &str = "0f8fad5b-d9cb-469f-a165-70867728950e";

    #[test]
    fn live_lines_are_owners_or_uuids() {
        let text = format!(
            "# inventory\nVirtualMachine/web-01/0\n\n{}\n",
            UUID.to_uppercase()
        );
        let live = LiveSet::parse(&text).unwrap();
        let vm = Owner::parse("VirtualMachine/web-01/0", None).unwrap();
        let by_uid = Owner::parse("FloatingIP/fip", Some(Uid::parse_uuid(UUID).unwrap())).unwrap();
        let dead = Owner::parse("FloatingIP/fip", None).unwrap();
        assert!(live.contains(&vm) && live.contains(&by_uid) && !live.contains(&dead));
        assert!(
            LiveSet::parse("Pod/x")
                .unwrap_err()
                .starts_with("line 1 `Pod/x`:")
        );
        let hostname = LiveSet::parse(&format!("{UUID}\nweb-01\n")).unwrap_err();
        assert!(
            hostname.starts_with("line 2 `web-01`: is neither"),
            "{hostname}"
        );
    }

    #[test]
    fn a_list_speaks_for_the_kinds_of_its_lines_and_of_its_uids_owners() {
        let pool = PoolName::new("p").unwrap();
        let uid = Uid::parse_uuid(UUID).unwrap();
        let held = |owner: &str, uid: Option<Uid>, last: u8| {
            let owner = Owner::parse(owner, uid).unwrap();
            AllocationManifest::new(&pool, None, [10, 0, 0, last].into(), owner)
        };
        let all = [
            held("VirtualMachine/web-01/0", Some(uid.clone()), 1),
            held("FloatingIP/fip", None, 2),
            held("Node/n1", None, 3),
        ];
        let live = LiveSet::parse(&format!("{UUID}\nNode/n2\n")).unwrap();
        assert_eq!(
            live.kinds(&all).into_iter().collect::<Vec<_>>(),
            [OwnerKind::VirtualMachine, OwnerKind::Node]
        );
        let fresh = Freshness {
            live_as_of: SystemTime::now(),
            min_age: Duration::ZERO,
            now: SystemTime::now(),
        };
        let found = leaks(&all, &live, Judged::Listed, &fresh);
        assert_eq!((found.checked, found.leaked.len()), (2, 1));
        assert_eq!(found.unjudged.get(&OwnerKind::FloatingIp), Some(&1));
        let found = leaks(&all, &live, Judged::All, &fresh);
        assert_eq!((found.checked, found.leaked.len()), (3, 2));
        assert!(LiveSet::parse("").unwrap().kinds(&all).is_empty());
    }

    #[test]
    fn a_claim_in_the_second_the_list_was_taken_or_later_is_too_new() {
        let pool = PoolName::new("p").unwrap();
        let owner = Owner::parse("FloatingIP/f", None).unwrap();
        let mut m = AllocationManifest::new(&pool, None, "10.0.0.1".parse().unwrap(), owner);
        let t = |s: &str| Timestamp::parse(s).unwrap().time();
        let fresh = Freshness {
            live_as_of: t("2026-12-01T07:00:00Z") + Duration::from_millis(500),
            min_age: Duration::from_secs(300),
            now: t("2026-12-01T08:00:00Z"),
        };
        m.metadata.creation_timestamp = Some(Timestamp::parse("2026-12-01T07:00:00Z").unwrap());
        assert!(fresh.too_new(&m));
        m.metadata.creation_timestamp = Some(Timestamp::parse("2026-12-01T06:59:59Z").unwrap());
        assert!(!fresh.too_new(&m));
        m.metadata.creation_timestamp = Some(Timestamp::parse("2026-12-01T07:56:00Z").unwrap());
        assert!(fresh.too_new(&m));
        m.metadata.creation_timestamp = None;
        assert!(!fresh.too_new(&m));
    }

    #[test]
    fn the_cap_is_a_count_or_a_share_rounded_up() {
        assert_eq!(MaxRelease::parse("25%").unwrap().limit(97), 25);
        assert_eq!(MaxRelease::parse("25%").unwrap().limit(2), 1);
        assert_eq!(MaxRelease::parse("0").unwrap().limit(97), 0);
        assert_eq!(MaxRelease::parse("40").unwrap().limit(2), 40);
        for bad in ["101%", "-1", "x", "%", "2.5%"] {
            assert!(MaxRelease::parse(bad).unwrap_err().contains(bad));
        }
    }
}
