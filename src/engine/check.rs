//! `ipamctl check`: read-only validation of a whole state directory, the operator's fsck and
//! a GitOps repository's CI gate.
//!
//! [`check`] asks the store what it has. On a state directory
//! ([`crate::store::StateDir`]) the store walks the directory itself (it must see what
//! [`crate::store::Objects`] hides: dot-files, stray files, symlinks, temporary files) and
//! hands back its notes and the manifest files it found; the check reads every manifest
//! once and then checks them against their paths and each other in `rules`, asks the store
//! what each MAC's record says (`macs`), and reads again what looks broken (`confirm`).
//! On a database ([`crate::store::Database`]) it reads every object in one snapshot
//! (`objects`) and adds the database's own findings. It never writes; the only write of the
//! command is [`remove_leftover`], behind `--fix`.

mod elsewhere;
mod identity;
pub mod macs;
mod objects;
mod prefixes;
mod quotas;
mod ranges;
mod rules;

use std::collections::HashSet;
use std::time::{Duration, SystemTime};

use serde::Serialize;

pub use crate::store::inspect::Severity;

use crate::error::Result;
use crate::model::AllocationManifest;
use crate::model::PoolRef;
use crate::store::inspect::{Leftover, ManifestFile, Note};
use crate::store::parallel::parallel_map;
use crate::store::{StateDir, Store};
use crate::yaml;
use crate::yaml::conflict::{self, Elsewhere};

/// How long a temporary file must have been left untouched before `--fix` calls it garbage.
/// A write fsyncs and renames its temporary file within moments of creating it, so a file
/// this old belongs to a process that died (or one stalled so long that failing its write
/// is the better outcome: the rename then fails and it reports an error; nothing is lost).
pub const LEFTOVER_MIN_AGE: Duration = Duration::from_secs(5 * 60);

/// One problem, at one path.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Finding {
    /// Error or warning.
    pub severity: Severity,
    /// The path relative to the state directory, `/`-separated; directories end in `/`.
    pub path: String,
    /// What is wrong, on one line.
    pub message: String,
}

impl From<Note> for Finding {
    fn from(note: Note) -> Finding {
        Finding {
            severity: note.severity,
            path: note.path,
            message: note.message,
        }
    }
}

/// The outcome of [`check`].
#[derive(Clone, Debug)]
pub struct Report {
    /// Sorted by path, then message.
    pub findings: Vec<Finding>,
    /// Pool manifest files read (valid or not).
    pub pools: usize,
    /// Allocation manifest files read (valid or not).
    pub allocations: usize,
    leftovers: Vec<Leftover>,
    /// Cooldown records that hold nothing back, by path, with their pool.
    idle_records: Vec<(String, PoolRef)>,
    /// Allocations whose MAC has no record, by path.
    unrecorded: Vec<macs::Unrecorded>,
    /// MACs held by two allocations of a pool, with the one `--fix` keeps each on.
    held_twice: Vec<macs::HeldTwice>,
}

impl Report {
    /// How many findings have `severity`.
    pub fn count(&self, severity: Severity) -> usize {
        self.findings
            .iter()
            .filter(|f| f.severity == severity)
            .count()
    }

    /// The temporary files old enough at `now` for `--fix` to remove, as relative paths.
    pub fn fixable(&self, now: SystemTime) -> Vec<String> {
        self.leftovers
            .iter()
            .filter(|l| is_old(l.modified, now))
            .map(|l| l.path.clone())
            .collect()
    }

    /// The pools with cooldown records that hold nothing back, each once: `--fix` prunes
    /// them ([`crate::engine::cooldown::prune`], which judges each record again under the lock).
    pub fn idle_cooldown_pools(&self) -> Vec<PoolRef> {
        let mut pools: Vec<PoolRef> = Vec::new();
        for (_, pool) in &self.idle_records {
            if !pools.contains(pool) {
                pools.push(pool.clone());
            }
        }
        pools
    }

    /// The allocations whose MAC has no record, by path: `--fix` makes each record
    /// ([`crate::engine::mac::restore_record`], which reads the allocation again under its
    /// owner's lock).
    pub fn unrecorded_macs(&self) -> &[macs::Unrecorded] {
        &self.unrecorded
    }

    /// The MACs held by two allocations of a pool: `--fix` removes each from every
    /// allocation but the one its record names (else the first created), then makes that
    /// one's record ([`crate::engine::mac::settle`], which reads each allocation again under
    /// its owner's lock).
    pub fn macs_held_twice(&self) -> &[macs::HeldTwice] {
        &self.held_twice
    }

    /// Drops the findings at `path` (after `--fix` removed it).
    pub fn resolved(&mut self, path: &str) {
        self.findings.retain(|f| f.path != path);
        self.leftovers.retain(|l| l.path != path);
        self.idle_records.retain(|(p, _)| p != path);
        self.unrecorded.retain(|u| u.path != path);
        self.held_twice.retain(|t| t.keeper.path != path);
    }
}

fn is_old(modified: SystemTime, now: SystemTime) -> bool {
    // A modification time in the future (clock skew) counts as new.
    now.duration_since(modified)
        .is_ok_and(|age| age >= LEFTOVER_MIN_AGE)
}

/// The finding of a temporary file the walk found, by its age at `now`.
fn leftover_finding(leftover: &Leftover, now: SystemTime) -> Finding {
    let message = if is_old(leftover.modified, now) {
        "leftover temporary file of an interrupted write, older than 5 minutes; `ipamctl check --fix` removes it"
    } else {
        "temporary file of a write in progress or one interrupted moments ago; `ipamctl check --fix` removes it once it is 5 minutes old"
    };
    Finding {
        severity: Severity::Warning,
        path: leftover.path.clone(),
        message: message.to_owned(),
    }
}

/// Checks what `store` holds without writing to it: its state directory, else every object
/// in one snapshot of its database (`objects`). See the module docs and `ipamctl check
/// --help` for what is checked. On a state directory, unreadable files and directories are
/// findings, not failures, and files removed while the check runs are skipped.
pub fn check(store: &dyn Store) -> Result<Report> {
    match store.state_dir() {
        Some(dir) => {
            let mut report = check_dir(dir);
            report.findings.extend(quotas::over_quota(store));
            report
                .findings
                .sort_by(|a, b| (&a.path, &a.message).cmp(&(&b.path, &b.message)));
            Ok(report)
        }
        None => objects::check_objects(store),
    }
}

/// [`check`] of a state directory.
fn check_dir(dir: &dyn StateDir) -> Report {
    let layout = dir.walk();
    let now = SystemTime::now();
    let mut findings: Vec<Finding> = layout.notes.into_iter().map(Finding::from).collect();
    findings.extend(layout.leftovers.iter().map(|l| leftover_finding(l, now)));
    let pool_count = layout.pools.len();
    let allocation_count = layout.allocations.len();

    let pools = read_all(layout.pools, &mut findings, yaml::decode_pool, |text| {
        yaml::decode_allocation(text).ok().map(|_| {
            "is an IPAllocation manifest; allocations belong in `ipallocations/`".to_owned()
        })
    });
    let subnets = read_all(layout.subnets, &mut findings, yaml::decode_subnet, |_| None);
    // A conflicted allocation's advice names where its other owner can claim again.
    let free = elsewhere::Pools::new(&pools, &subnets, &layout.allocations);
    let allocations = read_all_with(
        layout.allocations,
        &mut findings,
        yaml::decode_allocation,
        |text| {
            yaml::decode_pool(text)
                .ok()
                .map(|_| "is an IPAMPool manifest; pools belong in `ipampools/`".to_owned())
        },
        &|m| free.elsewhere(m),
    );
    let cooldown = read_all(
        layout.cooldown,
        &mut findings,
        yaml::decode_cooldown,
        |_| None,
    );
    let prefix_claims = read_all(
        layout.prefix_claims,
        &mut findings,
        yaml::decode_prefix_claim,
        |_| None,
    );
    // Read for the findings of a file that does not parse; what they hold against what the
    // namespace holds is `check`'s quota rule, on the store (`engine::quota::over`).
    read_all(layout.quotas, &mut findings, yaml::decode_quota, |_| None);
    let known = rules::check_pools(&pools, &mut findings);
    prefixes::check_prefix_claims(&prefix_claims, &known, &mut findings);
    ranges::check_subnets(&subnets, &known, &mut findings);
    ranges::check_off_limits(&allocations, &subnets, &mut findings);
    let idle_records = ranges::check_cooldown(&cooldown, &known, SystemTime::now(), &mut findings);
    let mut related = rules::check_allocations(&allocations, &known, &mut findings);
    related.extend(macs::check_macs(&allocations, &known));
    related.extend(identity::check_identities(&allocations));
    findings.extend(confirm(dir, related, &allocations));
    let (unrecorded_findings, unrecorded) = macs::check_records(dir, &allocations);
    let held_twice = macs::held_twice(dir, &allocations);
    findings.extend(unrecorded_findings);
    macs::explain_malformed(&mut findings);

    findings.sort_by(|a, b| (&a.path, &a.message).cmp(&(&b.path, &b.message)));
    Report {
        findings,
        pools: pool_count,
        allocations: allocation_count,
        leftovers: layout.leftovers,
        idle_records,
        unrecorded,
        held_twice,
    }
}

/// Keeps the findings of `related` that still hold when their files are read again.
///
/// The first pass reads a pool and its allocations at different instants; a concurrent
/// `apply` widening a pool and an `allocate` into the new range, or a release followed by
/// a claim of the same owner, can fall in between and make a consistent state look broken.
/// Each allocation involved is read again, then the pool it names, and the findings are
/// made anew from those reads alone (the same rules): a finding that was an artefact of
/// the timing does not survive, a real one does. Costs nothing when there is no finding.
fn confirm(
    dir: &dyn StateDir,
    related: Vec<Finding>,
    allocations: &[Decoded<AllocationManifest>],
) -> Vec<Finding> {
    if related.is_empty() {
        return related;
    }
    let involved: HashSet<&str> = related.iter().map(|f| f.path.as_str()).collect();
    let files = allocations
        .iter()
        .filter(|d| involved.contains(d.file.rel.as_str()))
        .map(|d| d.file.clone())
        .collect();
    // Anything these reads find wrong with a single file was reported by the first pass.
    let mut seen_already = Vec::new();
    let fresh = read_all(files, &mut seen_already, yaml::decode_allocation, |_| None);
    let mut pool_files: Vec<ManifestFile> = fresh
        .iter()
        .filter_map(|d| Some((d.file.scope.as_ref(), &d.manifest.as_ref()?.spec.pool)))
        .collect::<HashSet<_>>()
        .into_iter()
        .filter_map(|(scope, pool)| {
            // As in the walk, a pool that is not a regular file beneath the root (one behind
            // a symlinked directory, say) is no pool.
            dir.file(&rules::pool_path(scope, pool), scope, pool.as_str())
        })
        .collect();
    pool_files.sort_by(|a, b| a.rel.cmp(&b.rel));
    let pools = read_all(pool_files, &mut seen_already, yaml::decode_pool, |_| None);
    let known = rules::check_pools(&pools, &mut seen_already);
    let mut confirmed = rules::check_allocations(&fresh, &known, &mut seen_already);
    // A MAC rule relates files beyond the ones read again (an owner's other pools): what it
    // says of them now is kept only where the first pass said the same.
    confirmed.extend(
        macs::check_macs(&fresh, &known)
            .into_iter()
            .chain(identity::check_identities(&fresh))
            .filter(|f| related.contains(f)),
    );
    confirmed
}

/// Removes the temporary file at `path` (relative to the root of `dir`) if it still is one
/// and is still at least [`LEFTOVER_MIN_AGE`] old at `now`. Returns whether it removed it; a
/// file that is gone already, or no longer beneath the root as a regular file, is not an
/// error ([`StateDir::remove_leftover`]).
pub fn remove_leftover(dir: &dyn StateDir, path: &str, now: SystemTime) -> Result<bool> {
    dir.remove_leftover(path, &|modified| is_old(modified, now))
}

/// A manifest file with what reading it gave: the manifest, or `None` after a finding.
struct Decoded<T> {
    file: ManifestFile,
    manifest: Option<T>,
}

/// Reads and decodes every file; each failure becomes one error finding. `misplaced` says
/// whether the text is the other kind of manifest, for a clearer message than the decoder's.
fn read_all<T: Send>(
    files: Vec<ManifestFile>,
    findings: &mut Vec<Finding>,
    decode: fn(&str) -> std::result::Result<T, String>,
    misplaced: fn(&str) -> Option<String>,
) -> Vec<Decoded<T>> {
    read_all_with(files, findings, decode, misplaced, &|_| Elsewhere::Same)
}

/// [`read_all`], with `elsewhere` saying where the other owner of a conflicted allocation
/// can claim again (see [`elsewhere`]).
fn read_all_with<T: Send>(
    files: Vec<ManifestFile>,
    findings: &mut Vec<Finding>,
    decode: fn(&str) -> std::result::Result<T, String>,
    misplaced: fn(&str) -> Option<String>,
    elsewhere: &(dyn Fn(&AllocationManifest) -> Elsewhere + Sync),
) -> Vec<Decoded<T>> {
    let outcomes = parallel_map(&files, |file| {
        let text = file.read_text()?;
        Ok(text.map(|text| {
            decode(&text).map_err(|why| {
                // A conflicted allocation: say how to resolve it, with the path.
                match conflict::sides(&text) {
                    Some(sides) if file.rel.contains("/ipallocations/") => {
                        conflict::allocation_finding(
                            &file.rel,
                            &sides,
                            yaml::decode_allocation,
                            elsewhere,
                        )
                    }
                    _ => misplaced(&text).unwrap_or(why),
                }
            })
        }))
    });
    let mut read = Vec::with_capacity(files.len());
    for (file, outcome) in files.into_iter().zip(outcomes) {
        let manifest = match outcome.and_then(|decoded| decoded.transpose()) {
            Ok(None) => continue, // removed since the walk
            Ok(Some(m)) => Some(m),
            Err(message) => {
                findings.push(error(&file.rel, message));
                None
            }
        };
        read.push(Decoded { file, manifest });
    }
    read
}

fn error(path: &str, message: impl Into<String>) -> Finding {
    Finding {
        severity: Severity::Error,
        path: path.to_owned(),
        message: message.into(),
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::store::registry::Location;

    #[test]
    fn only_files_untouched_for_five_minutes_are_old() {
        let now = SystemTime::now();
        assert!(is_old(now - LEFTOVER_MIN_AGE, now));
        assert!(!is_old(now - Duration::from_secs(60), now));
        // Clock skew: a time in the future is new, not garbage.
        assert!(!is_old(now + Duration::from_secs(3600), now));
    }

    #[test]
    fn parallel_map_keeps_the_order() {
        let items: Vec<u32> = (0..10_000).collect();
        let doubled = parallel_map(&items, |i| i * 2);
        assert!(doubled.iter().enumerate().all(|(i, d)| *d == 2 * i as u32));
    }

    const POOL: &str = "apiVersion: pivirt.hu/v1\nkind: IPAMPool\nmetadata:\n  name: p\nspec:\n  cidr: CIDR\n  kind: public\n";

    fn allocation_text(address: &str, owner: &str) -> String {
        let name = format!("p-{}", address.replace('.', "-"));
        format!(
            "apiVersion: pivirt.hu/v1\nkind: IPAllocation\nmetadata:\n  name: {name}\nspec:\n  pool: p\n  address: \"{address}\"\n  owner:\n    kind: FloatingIP\n    name: {owner}\n"
        )
    }

    /// A state directory holding pool `p` as `cidr` and the allocations `on_disk`.
    fn state(cidr: &str, on_disk: &[(&str, &str)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(".ipamctl"), "layout: 1\n").unwrap();
        let pools = dir.path().join("cluster/ipampools");
        let allocations = dir.path().join("cluster/ipallocations");
        std::fs::create_dir_all(&pools).unwrap();
        std::fs::create_dir_all(&allocations).unwrap();
        std::fs::write(pools.join("p.yaml"), POOL.replace("CIDR", cidr)).unwrap();
        for (address, owner) in on_disk {
            let name = format!("p-{}.yaml", address.replace('.', "-"));
            std::fs::write(allocations.join(name), allocation_text(address, owner)).unwrap();
        }
        dir
    }

    /// What a first pass read: pool `p` as `cidr` and `allocations`, which the disk may no
    /// longer hold. Returns its two-file findings after confirmation against `root`.
    fn first_pass_then_confirm(root: &Path, cidr: &str, read: &[(&str, &str)]) -> Vec<Finding> {
        let config = crate::store::registry::Config {
            workers: 1,
            warn: &|_| {},
            long_lived: false,
        };
        let store =
            crate::store::registry::open(&Location::Dir(Some(root.to_owned())), &config).unwrap();
        let dir = store.state_dir().expect("a state directory");
        // A file no longer on disk reads as gone, as one released since the walk does.
        let file = |rel: String, stem: &str| {
            dir.file(&rel, None, stem)
                .unwrap_or_else(|| ManifestFile::row(rel, None, stem))
        };
        let pools = vec![Decoded {
            file: file("cluster/ipampools/p.yaml".into(), "p"),
            manifest: Some(yaml::decode_pool(&POOL.replace("CIDR", cidr)).unwrap()),
        }];
        let allocations: Vec<_> = read
            .iter()
            .map(|(address, owner)| {
                let stem = format!("p-{}", address.replace('.', "-"));
                Decoded {
                    file: file(format!("cluster/ipallocations/{stem}.yaml"), &stem),
                    manifest: Some(
                        yaml::decode_allocation(&allocation_text(address, owner)).unwrap(),
                    ),
                }
            })
            .collect();
        let mut findings = Vec::new();
        let known = rules::check_pools(&pools, &mut findings);
        let related = rules::check_allocations(&allocations, &known, &mut findings);
        assert!(findings.is_empty(), "{findings:?}");
        assert!(!related.is_empty(), "the first pass sees a problem");
        confirm(dir, related, &allocations)
    }

    #[test]
    fn confirm_drops_a_duplicate_owner_whose_other_address_was_released_meanwhile() {
        // Read .5 just before its release and .6 just after the same owner claimed it.
        let dir = state("10.0.0.0/24", &[("10.0.0.6", "o")]);
        let read = [("10.0.0.5", "o"), ("10.0.0.6", "o")];
        assert_eq!(
            first_pass_then_confirm(dir.path(), "10.0.0.0/24", &read),
            []
        );
        // Both still there: a real duplicate.
        let dir = state("10.0.0.0/24", &read);
        assert_eq!(
            first_pass_then_confirm(dir.path(), "10.0.0.0/24", &read).len(),
            2
        );
    }

    #[test]
    fn confirm_drops_a_finding_against_a_pool_widened_meanwhile() {
        // Read the pool as a /25, then an allocation claimed after `apply` widened it.
        let dir = state("10.0.0.0/24", &[("10.0.0.200", "o")]);
        let read = [("10.0.0.200", "o")];
        assert_eq!(
            first_pass_then_confirm(dir.path(), "10.0.0.0/25", &read),
            []
        );
        // The pool really is a /25.
        let dir = state("10.0.0.0/25", &read);
        let kept = first_pass_then_confirm(dir.path(), "10.0.0.0/25", &read);
        assert_eq!(kept.len(), 1);
        assert!(
            kept[0].message.contains("is outside pool `p`'s prefix"),
            "{kept:?}"
        );
    }
}
