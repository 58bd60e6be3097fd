//! `ipamctl check`: read-only validation of a whole state directory, the operator's fsck and
//! a GitOps repository's CI gate.
//!
//! [`check`] walks the directory itself (it must see what the [`crate::store::Store`] trait
//! hides: dot-files, stray files, symlinks) in [`layout`], reads every manifest once, and
//! then checks the manifests against their paths and each other. It never writes; the only
//! write of the command is [`remove_leftover`], behind `--fix`.

mod layout;

use std::collections::HashMap;
use std::fs::File;
use std::io::{ErrorKind, Read};
use std::net::Ipv4Addr;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::time::{Duration, SystemTime};

use serde::Serialize;

use crate::error::{Error, Result};
use crate::model::{AllocationManifest, Namespace, Owner, PoolKind, PoolManifest, PoolName};
use crate::pool::{Candidates, host_span};
use crate::store::fs::TMP_PREFIX;
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

    /// Drops the findings at `path` (after `--fix` removed it).
    pub fn resolved(&mut self, path: &str) {
        self.findings.retain(|f| f.path != path);
        self.leftovers.retain(|l| l.path != path);
    }
}

fn is_old(modified: SystemTime, now: SystemTime) -> bool {
    // A modification time in the future (clock skew) counts as new.
    now.duration_since(modified)
        .is_ok_and(|age| age >= LEFTOVER_MIN_AGE)
}

/// Checks the state directory at `root` without writing to it. See the module docs and
/// `ipamctl check --help` for what is checked. Unreadable files and directories are findings,
/// not failures; files removed while the check runs are skipped.
pub fn check(root: &Path) -> Report {
    let layout = layout::walk(root, SystemTime::now());
    let mut findings = layout.findings;
    let pool_count = layout.pools.len();
    let allocation_count = layout.allocations.len();

    let pools = read_all(layout.pools, &mut findings, yaml::decode_pool, |text| {
        yaml::decode_allocation(text).ok().map(|_| {
            "is an IPAllocation manifest; allocations belong in `ipallocations/`".to_owned()
        })
    });
    let allocations = read_all(
        layout.allocations,
        &mut findings,
        yaml::decode_allocation,
        |text| {
            yaml::decode_pool(text)
                .ok()
                .map(|_| "is an IPAMPool manifest; pools belong in `ipampools/`".to_owned())
        },
    );
    let known = check_pools(&pools, &mut findings);
    check_allocations(&allocations, &known, &mut findings);

    findings.sort_by(|a, b| (&a.path, &a.message).cmp(&(&b.path, &b.message)));
    Report {
        findings,
        pools: pool_count,
        allocations: allocation_count,
        leftovers: layout.leftovers,
    }
}

/// Removes the temporary file at `path` (relative to `root`) if it still is one and is
/// still at least [`LEFTOVER_MIN_AGE`] old at `now`. Returns whether it removed it; a file
/// that is gone already is not an error.
pub fn remove_leftover(root: &Path, path: &str, now: SystemTime) -> Result<bool> {
    let full = root.join(path);
    let is_temp = full
        .file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.starts_with(TMP_PREFIX));
    // Look again right before the unlink: the scan may be minutes old.
    let meta = match std::fs::symlink_metadata(&full) {
        Ok(meta) => meta,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(Error::io(full, e)),
    };
    let modified = meta.modified().map_err(|e| Error::io(&full, e))?;
    if !is_temp || !meta.is_file() || !is_old(modified, now) {
        return Ok(false);
    }
    // No directory fsync: if a crash undoes this unlink, the next `--fix` removes it again.
    match std::fs::remove_file(&full) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(false),
        Err(e) => Err(Error::io(full, e)),
    }
}

/// Reads a file of at most [`MAX_MANIFEST_BYTES`]; `None` if it does not exist.
fn read_bounded(path: &Path) -> std::result::Result<Option<Vec<u8>>, String> {
    let file = match File::open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("cannot read: {e}")),
    };
    let mut bytes = Vec::new();
    file.take(MAX_MANIFEST_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot read: {e}"))?;
    if bytes.len() as u64 > MAX_MANIFEST_BYTES {
        return Err(format!(
            "is larger than {MAX_MANIFEST_BYTES} bytes; not a manifest"
        ));
    }
    Ok(Some(bytes))
}

/// Reads one manifest file as text; `None` if it vanished since the walk (a concurrent
/// release), so that a check running beside other commands never reports a torn state.
fn read_manifest(file: &ManifestFile) -> std::result::Result<Option<String>, String> {
    let Some(bytes) = read_bounded(&file.path)? else {
        return Ok(None);
    };
    // The walk saw a regular file; if the name now leads elsewhere, find out whether a
    // symlink was put there (reported, never read) or a writer replaced the file (fine).
    if std::fs::metadata(&file.path).is_ok_and(|m| m.ino() != file.ino)
        && std::fs::symlink_metadata(&file.path).is_ok_and(|m| m.file_type().is_symlink())
    {
        return Err(
            "is a symlink; ipamctl never follows symlinks inside the state directory".into(),
        );
    }
    String::from_utf8(bytes)
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
fn read_all<T>(
    files: Vec<ManifestFile>,
    findings: &mut Vec<Finding>,
    decode: fn(&str) -> std::result::Result<T, String>,
    misplaced: fn(&str) -> Option<String>,
) -> Vec<Decoded<T>> {
    let mut read = Vec::with_capacity(files.len());
    for file in files {
        let decoded = match read_manifest(&file) {
            Ok(None) => continue,
            Ok(Some(text)) => decode(&text).map_err(|why| misplaced(&text).unwrap_or(why)),
            Err(why) => Err(why),
        };
        let manifest = match decoded {
            Ok(m) => Some(m),
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

/// A pool as the tool finds it: by its path. `manifest` is `None` when it does not decode.
struct KnownPool<'a> {
    rel: &'a str,
    manifest: Option<&'a PoolManifest>,
    candidates: Option<Candidates>,
}

type PoolKey<'a> = (&'a Option<Namespace>, &'a str);

/// Checks each pool against its path, and public pools against each other. Returns the
/// pools by (scope, file name), which is how `allocate` finds them.
fn check_pools<'a>(
    pools: &'a [Decoded<PoolManifest>],
    findings: &mut Vec<Finding>,
) -> HashMap<PoolKey<'a>, KnownPool<'a>> {
    let mut known = HashMap::with_capacity(pools.len());
    let mut public = Vec::new();
    for Decoded { file, manifest } in pools {
        let candidates = manifest.as_ref().map(|m| Candidates::of_pool(&m.spec));
        if let Some(m) = manifest {
            if m.metadata.name != file.stem {
                findings.push(error(
                    &file.rel,
                    format!(
                        "metadata.name is `{}`, but the file is named `{}.yaml`",
                        m.metadata.name, file.stem
                    ),
                ));
            }
            // `decode_pool` made sure a public pool has no namespace and a private one has.
            match (m.spec.kind, &m.metadata.namespace, &file.scope) {
                (PoolKind::Public, _, Some(_)) => findings.push(error(
                    &file.rel,
                    "public pool in a namespace directory: public pools are cluster-scoped and belong in `cluster/ipampools/`",
                )),
                (PoolKind::Private, Some(ns), None) => findings.push(error(
                    &file.rel,
                    format!(
                        "private pool under `cluster/`: private pools belong in their namespace's directory, `namespaces/{ns}/ipampools/`"
                    ),
                )),
                (PoolKind::Private, meta, path) => {
                    if let Some(message) = scope_mismatch(meta.as_ref(), path.as_ref()) {
                        findings.push(error(&file.rel, message));
                    }
                }
                (PoolKind::Public, _, None) => public.push((file.rel.as_str(), m)),
            }
        }
        known.insert(
            (&file.scope, file.stem.as_str()),
            KnownPool {
                rel: &file.rel,
                manifest: manifest.as_ref(),
                candidates,
            },
        );
    }
    check_overlaps(&mut public, findings);
    known
}

/// Public pools share one address space: no two may overlap. Prefixes either nest or are
/// disjoint, so after sorting by first address each pool need only be compared with the
/// ones that start inside it.
fn check_overlaps(public: &mut [(&str, &PoolManifest)], findings: &mut Vec<Finding>) {
    public.sort_by_key(|(_, m)| (m.spec.cidr.network(), m.spec.cidr.prefix_len()));
    for (i, (rel, pool)) in public.iter().enumerate() {
        let end = pool.spec.cidr.broadcast();
        for (other_rel, other) in public[i + 1..]
            .iter()
            .take_while(|(_, o)| o.spec.cidr.network() <= end)
        {
            let overlap = |p: &PoolManifest, q: &PoolManifest| {
                format!(
                    "public pool `{}` ({}) overlaps public pool `{}` ({})",
                    p.metadata.name, p.spec.cidr, q.metadata.name, q.spec.cidr
                )
            };
            findings.push(error(rel, overlap(pool, other)));
            findings.push(error(other_rel, overlap(other, pool)));
        }
    }
}

/// Checks each allocation against its path and pool, and owners across allocations.
fn check_allocations(
    allocations: &[Decoded<AllocationManifest>],
    pools: &HashMap<PoolKey<'_>, KnownPool<'_>>,
    findings: &mut Vec<Finding>,
) {
    type OwnerKey<'a> = (&'a Option<Namespace>, &'a PoolName, &'a Owner);
    let mut holdings: HashMap<OwnerKey<'_>, Vec<(Ipv4Addr, &str)>> =
        HashMap::with_capacity(allocations.len());
    for Decoded { file, manifest } in allocations {
        let Some(m) = manifest else { continue };
        let (pool, address) = (&m.spec.pool, m.spec.address);
        // `decode_allocation` made sure metadata.name is `<spec.pool>-<a-b-c-d>`; the file
        // name is what claims the address, so it must say the same.
        if m.metadata.name != file.stem {
            findings.push(error(
                &file.rel,
                format!(
                    "the file name does not match the allocation it holds (pool `{pool}`, address {address}); it should be `{}.yaml`",
                    m.metadata.name
                ),
            ));
            continue;
        }
        if let Some(message) = scope_mismatch(m.metadata.namespace.as_ref(), file.scope.as_ref()) {
            findings.push(error(&file.rel, message));
        }
        match pools.get(&(&file.scope, pool.as_str())) {
            None => findings.push(error(
                &file.rel,
                format!(
                    "pool `{pool}` does not exist: there is no `{}`",
                    pool_path(file.scope.as_ref(), pool)
                ),
            )),
            Some(known) => {
                if let (Some(p), Some(c)) = (known.manifest, &known.candidates)
                    && !c.contains(address)
                {
                    findings.push(error(&file.rel, not_candidate(address, p, known.rel)));
                }
            }
        }
        holdings
            .entry((&file.scope, pool, &m.spec.owner))
            .or_default()
            .push((address, &file.rel));
    }
    for ((_, pool, owner), mut held) in holdings {
        if held.len() < 2 {
            continue;
        }
        held.sort();
        let addresses: Vec<String> = held.iter().map(|(a, _)| a.to_string()).collect();
        let uid = owner
            .uid()
            .map_or_else(|| "no uid".to_owned(), |u| format!("uid {u}"));
        let message = format!(
            "owner `{owner}` ({uid}) holds {} addresses in pool `{pool}`: {}; an owner holds at most one per pool",
            held.len(),
            addresses.join(", ")
        );
        for (_, rel) in held {
            findings.push(error(rel, message.clone()));
        }
    }
}

/// Why `address` is not a candidate of `pool`.
fn not_candidate(address: Ipv4Addr, pool: &PoolManifest, pool_rel: &str) -> String {
    let spec = &pool.spec;
    let cidr = spec.cidr;
    let name = &pool.metadata.name;
    let (first, last) = host_span(cidr);
    let why = if !cidr.contains(&address) {
        format!("is outside pool `{name}`'s prefix {cidr}")
    } else if u32::from(address) < first {
        format!("is the network address of pool `{name}` ({cidr})")
    } else if u32::from(address) > last {
        format!("is the broadcast address of pool `{name}` ({cidr})")
    } else if spec.gateway == Some(address) {
        format!("is the gateway of pool `{name}`")
    } else if let Some(entry) = spec.exclude.iter().find(|e| e.net().contains(&address)) {
        format!("is excluded by pool `{name}` (exclude entry `{entry}`)")
    } else {
        format!("is not a candidate of pool `{name}`")
    };
    format!("address {address} {why}; was `{pool_rel}` edited after it was allocated?")
}

/// Where the pool `name` of `scope` lives.
fn pool_path(scope: Option<&Namespace>, name: &PoolName) -> String {
    match scope {
        None => format!("cluster/ipampools/{name}.yaml"),
        Some(ns) => format!("namespaces/{ns}/ipampools/{name}.yaml"),
    }
}

/// The message when `metadata.namespace` and the file's path disagree.
fn scope_mismatch(meta: Option<&Namespace>, path: Option<&Namespace>) -> Option<String> {
    match (meta, path) {
        (Some(m), Some(p)) if m != p => Some(format!(
            "metadata.namespace is `{m}`, but the file is in the directory of namespace `{p}`"
        )),
        (Some(m), None) => Some(format!(
            "metadata.namespace is `{m}`, but the file is under `cluster/` (cluster-scoped)"
        )),
        (None, Some(p)) => Some(format!(
            "metadata.namespace is missing, but the file is in the directory of namespace `{p}`"
        )),
        _ => None,
    }
}
