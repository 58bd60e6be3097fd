//! The history of allocations: who held an address, or what an owner held, and when;
//! from `git log` of the allocation files in a state directory, or from a database's own
//! events table.

use std::net::IpAddr;

use serde::Serialize;

use crate::engine::git::{Repo, Status};
use crate::error::Result;
use crate::model::{AllocationManifest, Namespace, OwnerFilter, PoolName};
use crate::store::Store;
use crate::store::fs::FsStore;
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
    /// `claimed`, `released` or `edited`.
    pub action: String,
    /// `ipallocation/<name>`.
    pub object: String,
    /// The allocation's namespace; none for a cluster-scoped one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Its pool.
    pub pool: String,
    /// Its address.
    pub address: IpAddr,
    /// Its owner, `KIND/NAME`.
    pub owner: String,
    /// Its owner's uid, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub uid: Option<String>,
    /// The commit's subject line.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subject: Option<String>,
}

/// What the history is of: the allocations that pass every part given.
#[derive(Clone, Debug, Default)]
pub struct Subject {
    /// ADDRESS.
    pub address: Option<IpAddr>,
    /// `--pool`.
    pub pool: Option<PoolName>,
    /// `--owner`, `--uid`.
    pub filter: OwnerFilter,
}

impl Subject {
    /// Is `m` an allocation the history is of?
    fn keeps(&self, m: &AllocationManifest) -> bool {
        self.address.is_none_or(|a| a == m.spec.address)
            && self.pool.as_ref().is_none_or(|p| *p == m.spec.pool)
            && self.filter.matches(&m.spec.owner)
    }
}

/// The entry of one event of `m`; `commit` is the commit's id and subject, if from git.
fn entry(
    m: &AllocationManifest,
    action: &str,
    date: &str,
    author: &str,
    commit: Option<(&str, &str)>,
) -> Entry {
    Entry {
        date: date.to_owned(),
        commit: commit.map(|(id, _)| id[..id.len().min(12)].to_owned()),
        author: author.to_owned(),
        action: action.to_owned(),
        object: format!("ipallocation/{}", m.metadata.name),
        namespace: m.metadata.namespace.as_ref().map(|n| n.to_string()),
        pool: m.spec.pool.to_string(),
        address: m.spec.address,
        owner: m.spec.owner.to_string(),
        uid: m.spec.owner.uid().map(|u| u.to_string()),
        subject: commit.map(|(_, s)| s.to_owned()),
    }
}

/// From a database's events table (`store`'s own audit log), newest first.
pub fn from_events(
    store: &dyn Store,
    scopes: &[Option<Namespace>],
    subject: &Subject,
) -> Result<Vec<Entry>> {
    let mut entries = Vec::new();
    for ns in scopes {
        // Newest first, also within one second (the log's order).
        for e in store.allocation_events(ns.as_ref())?.into_iter().rev() {
            if subject.keeps(&e.manifest) {
                entries.push(entry(&e.manifest, &e.action, &e.at, &e.who, None));
            }
        }
    }
    entries.sort_by(|a, b| b.date.cmp(&a.date));
    Ok(entries)
}

/// From `git log` of the allocation files of `scopes` in the state directory `store`,
/// newest first.
pub fn from_git(
    store: &FsStore,
    scopes: &[Option<Namespace>],
    subject: &Subject,
) -> Result<Vec<Entry>> {
    let repo = Repo::open(store.root())?;
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
        for (status, _) in &c.files {
            let before = (*status != Status::Added).then(|| blobs.next().flatten());
            let after = (*status != Status::Deleted).then(|| blobs.next().flatten());
            let (before, after) = (decode(before), decode(after));
            for (m, action) in events(&before, &after) {
                if subject.keeps(m) {
                    entries.push(entry(m, action, &c.date, &c.author, commit));
                }
            }
        }
    }
    Ok(entries)
}

/// The git pathspecs of the allocation files `subject` can be about, in `scopes`.
fn pathspecs(scopes: &[Option<Namespace>], subject: &Subject) -> Vec<String> {
    let file = match (&subject.pool, subject.address) {
        (Some(p), Some(a)) => crate::model::allocation_name(p, a),
        (None, Some(a)) => format!("*{}", crate::model::allocation_suffix(a)),
        (Some(p), None) => format!("{p}-*"),
        (None, None) => "*".to_owned(),
    };
    scopes
        .iter()
        .map(|ns| {
            let dir = match ns {
                Some(ns) => format!("namespaces/{ns}"),
                None => "cluster".to_owned(),
            };
            format!("{dir}/ipallocations/{file}.yaml")
        })
        .collect()
}

/// A file's side of a commit (`None`: the file is not on that side), as text with its
/// manifest if it parses.
type Side = Option<(Option<AllocationManifest>, String)>;

/// Decodes one blob of a commit's file; `None` when it is not on that side, is missing or
/// is not UTF-8.
fn decode(blob: Option<Option<Vec<u8>>>) -> Side {
    blob.flatten()
        .and_then(|b| String::from_utf8(b).ok())
        .map(|t| (yaml::decode_allocation(&t).ok(), t))
}

/// What a commit did to one allocation file, given the file before and after it, newest
/// first: within a commit, a claim before the release it follows.
fn events<'a>(before: &'a Side, after: &'a Side) -> Vec<(&'a AllocationManifest, &'static str)> {
    let mut found = Vec::new();
    match (before, after) {
        (None, Some((Some(m), _))) => found.push((m, "claimed")),
        (Some((Some(m), _)), None) => found.push((m, "released")),
        // Released and claimed again by another owner in one commit, as ipamctl
        // writes it: git sees one modified file, the history two events.
        (Some((Some(was), _)), Some((Some(m), text)))
            if was.spec.owner != m.spec.owner && yaml::encode(m) == *text =>
        {
            found.push((m, "claimed"));
            found.push((was, "released"));
        }
        (_, Some((Some(m), _))) => found.push((m, "edited")),
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
