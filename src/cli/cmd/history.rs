//! `ipamctl history ADDRESS | --owner K/N | --uid UID`: who held an address, or what an
//! owner held, and when: from `git log` of the allocation files in a state directory, from
//! the events table on a database.

use std::io::Write;
use std::net::IpAddr;

use serde::Serialize;

use crate::cli::output::{self, Named};
use crate::cli::{GlobalArgs, HistoryArgs, OutputFormat};
use crate::engine::git::{Repo, Status};
use crate::error::Result;
use crate::model::{AllocationManifest, Namespace, OwnerFilter, PoolName};
use crate::store::Store;
use crate::store::fs::FsStore;
use crate::yaml;

/// One claim, release or in-place edit of an allocation.
#[derive(Clone, Debug, Serialize)]
struct Entry {
    /// When (the author date of the commit, or the event's time).
    date: String,
    /// The commit, in a state directory.
    #[serde(skip_serializing_if = "Option::is_none")]
    commit: Option<String>,
    /// The commit's author, or the database client.
    author: String,
    /// `claimed`, `released` or `edited`.
    action: String,
    /// `ipallocation/<name>`.
    object: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    namespace: Option<String>,
    pool: String,
    address: IpAddr,
    owner: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    uid: Option<String>,
    /// The commit's subject line.
    #[serde(skip_serializing_if = "Option::is_none")]
    subject: Option<String>,
}

impl Named for Entry {
    fn resource(&self) -> String {
        self.object.clone()
    }
}

/// What the history is of.
struct Subject {
    address: Option<IpAddr>,
    pool: Option<PoolName>,
    filter: OwnerFilter,
}

impl Subject {
    fn keeps(&self, m: &AllocationManifest) -> bool {
        self.address.is_none_or(|a| a == m.spec.address)
            && self.pool.as_ref().is_none_or(|p| *p == m.spec.pool)
            && self.filter.matches(&m.spec.owner)
    }
}

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
        object: m.resource(),
        namespace: m.metadata.namespace.as_ref().map(|n| n.to_string()),
        pool: m.spec.pool.to_string(),
        address: m.spec.address,
        owner: m.spec.owner.to_string(),
        uid: m.spec.owner.uid().map(|u| u.to_string()),
        subject: commit.map(|(_, s)| s.to_owned()),
    }
}

pub fn run(
    store: &dyn Store,
    g: &GlobalArgs,
    args: &HistoryArgs,
    out: &mut dyn Write,
) -> Result<()> {
    let subject = Subject {
        address: args
            .address
            .as_deref()
            .map(|a| super::address("ADDRESS", a))
            .transpose()?,
        pool: args
            .pool
            .as_deref()
            .map(|p| super::flag("--pool", PoolName::new(p)))
            .transpose()?,
        filter: super::owner_filter(args.owner.as_deref(), args.uid.as_deref())?,
    };
    let scopes = super::scopes(store, g)?;
    let entries = match super::database(g)? {
        Some(_) => from_events(store, &scopes, &subject)?,
        None => from_git(
            &FsStore::discover(g.state_dir.as_deref())?,
            &scopes,
            &subject,
        )?,
    };
    if entries.is_empty() {
        eprintln!("No history found.");
    }
    if output::write_list(out, g.output, &entries)? || entries.is_empty() {
        return Ok(());
    }
    let wide = g.output == Some(OutputFormat::Wide);
    let rows = entries
        .iter()
        .map(|e| {
            let mut row = vec![
                e.date.clone(),
                output::or_dash(e.commit.as_ref()),
                e.author.clone(),
                e.action.clone(),
                output::or_dash(e.namespace.as_ref()),
                e.pool.clone(),
                e.address.to_string(),
                e.owner.clone(),
                output::or_dash(e.uid.as_ref()),
            ];
            if wide {
                row.push(output::or_dash(e.subject.as_ref()));
            }
            row
        })
        .collect();
    let mut headers = vec![
        "DATE",
        "COMMIT",
        "AUTHOR",
        "ACTION",
        "NAMESPACE",
        "POOL",
        "ADDRESS",
        "OWNER",
        "UID",
    ];
    if wide {
        headers.push("SUBJECT");
    }
    output::write(out, &output::table(&headers, rows, &[], g.no_headers))
}

/// From a database's events table, newest first.
fn from_events(
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

/// From `git log` of the allocation files, newest first.
fn from_git(
    store: &FsStore,
    scopes: &[Option<Namespace>],
    subject: &Subject,
) -> Result<Vec<Entry>> {
    let repo = Repo::open(store.root())?;
    let file = match (&subject.pool, subject.address) {
        (Some(p), Some(a)) => crate::model::allocation_name(p, a),
        (None, Some(a)) => format!("*-{}", a.to_string().replace('.', "-")),
        (Some(p), None) => format!("{p}-*"),
        (None, None) => "*".to_owned(),
    };
    let pathspecs: Vec<String> = scopes
        .iter()
        .map(|ns| {
            let dir = match ns {
                Some(ns) => format!("namespaces/{ns}"),
                None => "cluster".to_owned(),
            };
            format!("{dir}/ipallocations/{file}.yaml")
        })
        .collect();
    // Only commits whose diff mentions the uid or the owner's name can matter: git's
    // pickaxe skips the rest without the blobs being read here.
    let pickaxe = match (&subject.filter.uid, &subject.filter.kind_name) {
        (Some(uid), _) => Some(regex_literal(uid.as_str())),
        (None, Some((_, name))) if !name.is_empty() => {
            Some(regex_literal(name.trim_end_matches('/')))
        }
        _ => None,
    };
    let commits = repo.log(&pathspecs, pickaxe.as_deref())?;
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
            let read = |b: Option<Option<Vec<u8>>>| {
                b.flatten()
                    .and_then(|b| String::from_utf8(b).ok())
                    .map(|t| (yaml::decode_allocation(&t).ok(), t))
            };
            let (before, after) = (read(before), read(after));
            // Newest first: within a commit, a claim before the release it follows.
            let mut found: Vec<(&AllocationManifest, &str)> = Vec::new();
            match (&before, &after) {
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
            for (m, action) in found {
                if subject.keeps(m) {
                    entries.push(entry(m, action, &c.date, &c.author, commit));
                }
            }
        }
    }
    Ok(entries)
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
