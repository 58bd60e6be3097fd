//! `ipamctl check`: read-only validation of a whole state directory, the operator's fsck and
//! a GitOps repository's CI gate.
//!
//! [`check`] walks the directory itself (it must see what the [`crate::store::Store`] trait
//! hides: dot-files, stray files, symlinks) in `layout`, reads every manifest once, and
//! then checks them against their paths and each other in `rules`. It never writes; the only
//! write of the command is [`remove_leftover`], behind `--fix`.
//!
//! Every file and directory is reached through the root's handle ([`FsStore::root_fd`]) with
//! [`crate::store::fs::beneath`]: relative, one handle at a time, never following a symlink, so
//! nothing planted inside the state directory leads a read or the `--fix` unlink outside it.

mod db;
mod elsewhere;
mod identity;
mod layout;
pub mod macs;
mod prefixes;
mod ranges;
mod rules;

pub use db::check_database;
pub(crate) use db::unreadable_namespace;

use std::collections::HashSet;
use std::io::ErrorKind;
use std::os::fd::OwnedFd;
use std::path::{Component, Path};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rustix::fs::{FileType, Stat};
use serde::Serialize;

use crate::error::{Error, Result};
use crate::model::AllocationManifest;
use crate::model::PoolRef;
use crate::store::fs::beneath::{self, Refused};
use crate::store::fs::{FsStore, TMP_PREFIX};
use crate::store::parallel::parallel_map;
use crate::yaml::conflict::{self, Elsewhere};
use crate::yaml::{self, MAX_MANIFEST_BYTES};

use layout::ManifestFile;

/// How long a temporary file must have been left untouched before `--fix` calls it garbage.
/// A write fsyncs and renames its temporary file within moments of creating it, so a file
/// this old belongs to a process that died (or one stalled so long that failing its write
/// is the better outcome: the rename then fails and it reports an error; nothing is lost).
pub const LEFTOVER_MIN_AGE: Duration = Duration::from_secs(5 * 60);

/// How bad a finding is. Errors fail the check (exit 1); warnings do not.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// The state is wrong: ipamctl may refuse to work with it or hand out a wrong address.
    Error,
    /// Something ipamctl ignores, but that someone should look at.
    Warning,
}

impl std::fmt::Display for Severity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
        })
    }
}

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

/// A temporary file (`.tmp-*`) the walk found, with its modification time.
#[derive(Clone, Debug)]
struct Leftover {
    path: String,
    modified: SystemTime,
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

/// The modification time a status shows.
fn modified(stat: &Stat) -> SystemTime {
    let nanos = Duration::from_nanos(stat.st_mtime_nsec);
    match u64::try_from(stat.st_mtime) {
        Ok(secs) => UNIX_EPOCH + Duration::from_secs(secs) + nanos,
        Err(_) => UNIX_EPOCH - Duration::from_secs(stat.st_mtime.unsigned_abs()) + nanos,
    }
}

/// Checks the state directory of `store` without writing to it. See the module docs and
/// `ipamctl check --help` for what is checked. Unreadable files and directories are findings,
/// not failures; files removed while the check runs are skipped.
pub fn check(store: &FsStore) -> Report {
    let root = store.root_fd();
    let layout = layout::walk(store.root(), root, SystemTime::now());
    let mut findings = layout.findings;
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
    let known = rules::check_pools(&pools, &mut findings);
    prefixes::check_prefix_claims(&prefix_claims, &known, &mut findings);
    ranges::check_subnets(&subnets, &known, &mut findings);
    ranges::check_off_limits(&allocations, &subnets, &mut findings);
    let idle_records = ranges::check_cooldown(&cooldown, &known, SystemTime::now(), &mut findings);
    let mut related = rules::check_allocations(&allocations, &known, &mut findings);
    related.extend(macs::check_macs(&allocations, &known));
    related.extend(identity::check_identities(&allocations));
    findings.extend(confirm(root, related, &allocations));
    let (unrecorded_findings, unrecorded) = macs::check_records(root, &allocations);
    let held_twice = macs::held_twice(root, &allocations);
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
    root: &OwnedFd,
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
            let rel = rules::pool_path(scope, pool);
            // As in the walk, a pool that is not a regular file beneath the root (one behind
            // a symlinked directory, say) is no pool.
            let (dir, name) = beneath::open_parent(root, Path::new(&rel)).ok()?;
            let stat = beneath::stat(&dir, name).ok()??;
            let name = name.to_owned();
            (FileType::from_raw_mode(stat.st_mode) == FileType::RegularFile).then(|| ManifestFile {
                rel,
                dir: Arc::new(dir),
                name,
                scope: scope.cloned(),
                stem: pool.to_string(),
            })
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

/// Removes the temporary file at `path` (relative to the root of `store`) if it still is one
/// and is still at least [`LEFTOVER_MIN_AGE`] old at `now`. Returns whether it removed it; a
/// file that is gone already, or no longer beneath the root as a regular file, is not an
/// error.
pub fn remove_leftover(store: &FsStore, path: &str, now: SystemTime) -> Result<bool> {
    let rel = Path::new(path);
    let inside = rel.components().all(|c| matches!(c, Component::Normal(_)));
    let is_temp = rel
        .file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.starts_with(TMP_PREFIX));
    if !inside || !is_temp {
        return Ok(false);
    }
    let full = store.root().join(rel);
    let failed = |why: Refused| match why {
        Refused::Io(e) if e.kind() != ErrorKind::NotFound => Err(Error::io(&full, e)),
        // Gone, or its directory replaced by a symlink or a file: nothing of the state's
        // is there to remove.
        _ => Ok(false),
    };
    // Resolved again from the root, not through the walk's handle: the scan may be minutes
    // old, and a directory it listed may since have been moved out of the root.
    let (dir, name) = match beneath::open_parent(store.root_fd(), rel) {
        Ok(opened) => opened,
        Err(why) => return failed(why),
    };
    let stat = match beneath::stat(&dir, name) {
        Ok(Some(stat)) => stat,
        Ok(None) => return Ok(false),
        Err(why) => return failed(why),
    };
    if FileType::from_raw_mode(stat.st_mode) != FileType::RegularFile
        || !is_old(modified(&stat), now)
    {
        return Ok(false);
    }
    // Removed relative to the handle just looked through, and only the file judged: it is
    // taken from its name first and unlinked only if what was taken is still an old regular
    // file (a write that reused the name meanwhile gets its file back). No directory fsync:
    // if a crash undoes this unlink, the next `--fix` removes it again.
    let Some(name) = name.to_str() else {
        return Ok(false);
    };
    let mut ours = |taken: &beneath::ReadFile| is_old(modified(&taken.stat), now);
    match beneath::remove_if(&dir, name, false, &mut ours) {
        Ok(removed) => Ok(removed == beneath::Removed::Deleted),
        Err(why) => failed(why),
    }
}

/// Reads one manifest file as text, relative to its directory's handle and without following
/// a symlink; `None` if it vanished since the walk (a concurrent release), so that a check
/// running beside other commands never reports a torn state.
fn read_manifest(file: &ManifestFile) -> std::result::Result<Option<String>, String> {
    let read = match beneath::read(&*file.dir, &file.name, MAX_MANIFEST_BYTES) {
        Ok(None) => return Ok(None),
        Ok(Some(read)) => read,
        // The walk saw a regular file; a symlink put in its place since is reported, never
        // followed.
        Err(Refused::Symlink) => return Err(layout::SYMLINK.to_owned()),
        Err(Refused::Io(e)) => return Err(format!("cannot read: {e}")),
        Err(other) => return Err(other.reason()),
    };
    String::from_utf8(read.bytes)
        .map(Some)
        .map_err(|_| "is not UTF-8 text".to_owned())
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
        let text = read_manifest(file)?;
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
    use super::*;

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
        let root: OwnedFd = std::fs::File::open(root).unwrap().into();
        let file = |rel: String, stem: &str| {
            let (dir, name) = beneath::open_parent(&root, Path::new(&rel)).unwrap();
            ManifestFile {
                dir: Arc::new(dir),
                name: name.to_owned(),
                rel,
                scope: None,
                stem: stem.to_owned(),
            }
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
        confirm(&root, related, &allocations)
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

    #[test]
    fn remove_leftover_refuses_paths_outside_the_root() {
        let dir = tempfile::tempdir().unwrap();
        let outside = dir.path().join(".tmp-outside");
        std::fs::write(&outside, "x").unwrap();
        let root = dir.path().join("state");
        FsStore::init(&root).unwrap();
        let store = FsStore::open(&root).unwrap();
        let later = SystemTime::now() + 2 * LEFTOVER_MIN_AGE;
        assert!(!remove_leftover(&store, "../.tmp-outside", later).unwrap());
        assert!(outside.exists());
    }
}
