//! The history of allocations and prefix claims: who held an address or a prefix, or what
//! an owner held, and when; from `git log` of their files in a state directory, or (for
//! allocations) from a database's own events table.

use std::net::IpAddr;

use ipnet::IpNet;
use serde::Serialize;

use crate::engine::git::{Repo, Status};
use crate::error::Result;
use crate::model::layout;
use crate::model::prefix_claim::{PrefixClaimManifest, prefix_claim_name};
use crate::model::{AllocationManifest, Namespace, ObjectKind, Owner, OwnerFilter, PoolName};
use crate::store::{StateDir, Store};
use crate::yaml;

/// One claim, release or in-place edit of an allocation.
#[derive(Clone, Debug, Serialize)]
pub struct Entry {
    /// When (the author date of the commit, or the event's time).
    pub date: String,
    /// The commit, in a state directory (its first 12 hex digits).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub commit: Option<String>,
    /// The commit's author, or the database client.
    pub author: String,
    /// `claimed`, `released`, `mac changed` (`ipamctl mac set`) or `edited`.
    pub action: String,
    /// `ipallocation/<name>` or `ipprefixclaim/<name>`.
    pub object: String,
    /// The allocation's namespace; none for a cluster-scoped one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Its pool.
    pub pool: String,
    /// Its address (an allocation's).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub address: Option<IpAddr>,
    /// Its prefix (a prefix claim's).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prefix: Option<String>,
    /// Its owner, `KIND/NAME`.
    pub owner: String,
    /// Its owner's uid, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub uid: Option<String>,
    /// The commit's subject line.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subject: Option<String>,
    /// The allocation's MAC (`spec.mac`) after the event (before it, for a release).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mac: Option<String>,
}

/// What the history is of: the allocations and prefix claims that pass every part given.
#[derive(Clone, Debug, Default)]
pub struct Subject {
    /// ADDRESS: an allocation's address.
    pub address: Option<IpAddr>,
    /// ADDRESS given as a prefix: a prefix claim's.
    pub prefix: Option<IpNet>,
    /// `--pool`.
    pub pool: Option<PoolName>,
    /// `--owner`, `--uid`.
    pub filter: OwnerFilter,
}

/// What one version of a file held, as a history tells it: an allocation's address or a
/// prefix claim's prefix, with its owner.
#[derive(Clone, Debug)]
struct Held {
    /// `ipallocation/<name>` or `ipprefixclaim/<name>`.
    object: String,
    namespace: Option<Namespace>,
    pool: PoolName,
    at: At,
    owner: Owner,
    /// An allocation's MAC.
    mac: Option<crate::model::mac::Mac>,
    /// Whether the file is byte for byte what ipamctl writes for it.
    canonical: bool,
}

/// Where a [`Held`] is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum At {
    Address(IpAddr),
    Prefix(IpNet),
}

impl Held {
    fn allocation(m: &AllocationManifest, text: &str) -> Held {
        Held {
            object: format!("ipallocation/{}", m.metadata.name),
            namespace: m.metadata.namespace.clone(),
            pool: m.spec.pool.clone(),
            at: At::Address(m.spec.address),
            owner: m.spec.owner.clone(),
            mac: m.spec.mac,
            canonical: yaml::encode(m) == text,
        }
    }

    fn prefix_claim(m: &PrefixClaimManifest, text: &str) -> Held {
        Held {
            object: format!("ipprefixclaim/{}", m.metadata.name),
            namespace: m.metadata.namespace.clone(),
            pool: m.spec.pool.clone(),
            at: At::Prefix(m.spec.prefix),
            owner: m.spec.owner.clone(),
            mac: None,
            canonical: yaml::encode(m) == text,
        }
    }
}

impl Subject {
    /// Is `h` something the history is of?
    fn keeps(&self, h: &Held) -> bool {
        let at = match (self.address, self.prefix) {
            (Some(a), _) => h.at == At::Address(a),
            (None, Some(p)) => h.at == At::Prefix(p),
            (None, None) => true,
        };
        at && self.pool.as_ref().is_none_or(|p| *p == h.pool) && self.filter.matches(&h.owner)
    }
}

/// The entry of one event of `h`; `commit` is the commit's id and subject, if from git.
fn entry(h: &Held, action: &str, date: &str, author: &str, commit: Option<(&str, &str)>) -> Entry {
    let (address, prefix) = match h.at {
        At::Address(a) => (Some(a), None),
        At::Prefix(p) => (None, Some(p.to_string())),
    };
    Entry {
        date: date.to_owned(),
        commit: commit.map(|(id, _)| id[..id.len().min(12)].to_owned()),
        author: author.to_owned(),
        action: action.to_owned(),
        object: h.object.clone(),
        namespace: h.namespace.as_ref().map(|n| n.to_string()),
        pool: h.pool.to_string(),
        address,
        prefix,
        owner: h.owner.to_string(),
        uid: h.owner.uid().map(|u| u.to_string()),
        mac: h.mac.map(|m| m.to_string()),
        subject: commit.map(|(_, s)| s.to_owned()),
    }
}

/// The history of `subject` in `scopes` of `store`, newest first: from git when the store
/// is a state directory, else from the store's own audit log.
pub fn of(
    store: &dyn Store,
    scopes: &[Option<Namespace>],
    subject: &Subject,
) -> Result<Vec<Entry>> {
    match store.state_dir() {
        Some(dir) => from_git(dir, scopes, subject),
        None => from_events(store, scopes, subject),
    }
}

/// From a database's events table (`store`'s own audit log), newest first.
fn from_events(
    store: &dyn Store,
    scopes: &[Option<Namespace>],
    subject: &Subject,
) -> Result<Vec<Entry>> {
    let mut entries = Vec::new();
    for ns in scopes {
        // Newest first, also within one second (the log's order).
        let allocations = store.allocation_events(ns.as_ref())?.into_iter().rev();
        let held = allocations.map(|e| (Held::allocation(&e.manifest, ""), e.action, e.at, e.who));
        let claims = store.prefix_claim_events(ns.as_ref())?.into_iter().rev();
        let claims = claims.map(|e| (Held::prefix_claim(&e.manifest, ""), e.action, e.at, e.who));
        for (held, action, at, who) in held.chain(claims) {
            if subject.keeps(&held) {
                entries.push(entry(&held, &action, &at, &who, None));
            }
        }
    }
    entries.sort_by(|a, b| b.date.cmp(&a.date));
    Ok(entries)
}

/// From `git log` of the allocation files of `scopes` in the state directory `dir`, newest
/// first.
fn from_git(
    dir: &dyn StateDir,
    scopes: &[Option<Namespace>],
    subject: &Subject,
) -> Result<Vec<Entry>> {
    let repo = Repo::open(dir.root())?;
    // Only commits whose diff mentions the uid or the owner's name can matter: git's
    // pickaxe skips the rest without the blobs being read here.
    let pickaxe = match (&subject.filter.uid, &subject.filter.kind_name) {
        (Some(uid), _) => Some(regex_literal(uid.as_str())),
        (None, Some((_, name))) if !name.is_empty() => {
            Some(regex_literal(name.trim_end_matches('/')))
        }
        _ => None,
    };
    let commits = repo.log(&pathspecs(scopes, subject), pickaxe.as_deref())?;
    // Every blob at once: the file as the commit left it and as it was before (a
    // modified file needs both).
    let mut wanted = Vec::new();
    for c in &commits {
        for (status, path) in &c.files {
            if *status != Status::Added {
                wanted.push((format!("{}^", c.id), path.clone()));
            }
            if *status != Status::Deleted {
                wanted.push((c.id.clone(), path.clone()));
            }
        }
    }
    let mut blobs = repo.blobs(&wanted)?.into_iter();
    let mut entries = Vec::new();
    for c in &commits {
        let commit = Some((c.id.as_str(), c.subject.as_str()));
        for (status, path) in &c.files {
            let before = (*status != Status::Added).then(|| blobs.next().flatten());
            let after = (*status != Status::Deleted).then(|| blobs.next().flatten());
            let claims = path.contains("/ipprefixclaims/");
            let (before, after) = (decode(before, claims), decode(after, claims));
            for (h, action) in events(&before, &after) {
                if subject.keeps(h) {
                    entries.push(entry(h, action, &c.date, &c.author, commit));
                }
            }
        }
    }
    Ok(entries)
}

/// The git pathspecs of the files `subject` can be about, in `scopes`: allocations for an
/// address, prefix claims for a prefix, both for an owner or a pool.
fn pathspecs(scopes: &[Option<Namespace>], subject: &Subject) -> Vec<String> {
    const ALLOCATIONS: ObjectKind = ObjectKind::Allocation;
    const CLAIMS: ObjectKind = ObjectKind::PrefixClaim;
    let mut files = Vec::new();
    match (&subject.pool, subject.address, subject.prefix) {
        (Some(p), Some(a), _) => files.push((ALLOCATIONS, crate::model::allocation_name(p, a))),
        (None, Some(a), _) => files.push((
            ALLOCATIONS,
            format!("*{}", crate::model::allocation_suffix(a)),
        )),
        (Some(p), None, Some(net)) => files.push((CLAIMS, prefix_claim_name(p, net))),
        (None, None, Some(net)) => files.push((
            CLAIMS,
            format!(
                "*{}-{}",
                crate::model::allocation_suffix(net.network()),
                net.prefix_len()
            ),
        )),
        (Some(p), None, None) => {
            files.push((ALLOCATIONS, format!("{p}-*")));
            files.push((CLAIMS, format!("{p}-*")));
        }
        (None, None, None) => {
            files.push((ALLOCATIONS, "*".to_owned()));
            files.push((CLAIMS, "*".to_owned()));
        }
    }
    let mut specs = Vec::new();
    for ns in scopes {
        for (kind, file) in &files {
            specs.push(layout::object_path(*kind, ns.as_ref(), file));
        }
    }
    specs
}

/// A file's side of a commit (`None`: the file is not on that side), as what it held if
/// it parses.
type Side = Option<Option<Held>>;

/// Decodes one blob of a commit's file (a prefix claim's if `claims`, else an
/// allocation's); `None` when it is not on that side, is missing or is not UTF-8.
fn decode(blob: Option<Option<Vec<u8>>>, claims: bool) -> Side {
    let text = String::from_utf8(blob.flatten()?).ok()?;
    Some(if claims {
        yaml::decode_prefix_claim(&text)
            .ok()
            .map(|m| Held::prefix_claim(&m, &text))
    } else {
        yaml::decode_allocation(&text)
            .ok()
            .map(|m| Held::allocation(&m, &text))
    })
}

/// What a commit did to one file, given the file before and after it, newest first:
/// within a commit, a claim before the release it follows.
fn events<'a>(before: &'a Side, after: &'a Side) -> Vec<(&'a Held, &'static str)> {
    let mut found = Vec::new();
    match (before, after) {
        (None, Some(Some(h))) => found.push((h, "claimed")),
        (Some(Some(h)), None) => found.push((h, "released")),
        // Released and claimed again by another owner in one commit, as ipamctl
        // writes it: git sees one modified file, the history two events.
        (Some(Some(was)), Some(Some(h))) if was.owner != h.owner && h.canonical => {
            found.push((h, "claimed"));
            found.push((was, "released"));
        }
        // `ipamctl mac set`: the same owner, the same address, another MAC.
        (Some(Some(was)), Some(Some(h)))
            if was.owner == h.owner && was.at == h.at && was.mac != h.mac && h.canonical =>
        {
            found.push((h, "mac changed"));
        }
        (_, Some(Some(h))) => found.push((h, "edited")),
        _ => {}
    }
    found
}

/// `text` as a POSIX basic regular expression matching itself.
fn regex_literal(text: &str) -> String {
    let mut out = String::new();
    for c in text.chars() {
        if matches!(c, '.' | '[' | ']' | '*' | '^' | '$' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}
