//! `ipamctl diff [BASE [HEAD]]`: what a branch changes in the state directory, for review.

use std::io::Write;

use crate::cli::output;
use crate::cli::{DiffArgs, FormatArg, GlobalArgs, OutputFormat};
use crate::engine::diff::{self, Diff, short};
use crate::engine::git::Repo;
use crate::engine::range_holder::Holders;
use crate::error::{Result, exit};
use crate::store::Store;
use crate::yaml;

pub fn run(store: &dyn Store, g: &GlobalArgs, args: &DiffArgs, out: &mut dyn Write) -> Result<i32> {
    let dir = store.state_dir().expect("`diff` opens a state directory");
    let repo = Repo::open(dir.root())?;
    let head = args.head.as_deref().map(|h| repo.commit(h)).transpose()?;
    let base = match &args.base {
        Some(b) => repo.commit(b)?,
        None => match repo.upstream() {
            Some(upstream) => repo.commit(&upstream)?,
            None => repo.commit("HEAD")?,
        },
    };
    // As `git diff BASE...HEAD`: from where HEAD forked off BASE. What BASE did since is
    // the other side, against which the branch's claims are checked.
    let tip = match &head {
        Some(h) => h.clone(),
        None => repo.commit("HEAD")?,
    };
    let fork = repo.merge_base(&base, &tip).unwrap_or_else(|| base.clone());
    let other = (fork != base).then_some(base.as_str());
    let found = diff::diff(&repo, store, &fork, head.as_deref(), other)?;
    render(store, &found, g, out)?;
    if !found.conflicts.is_empty() {
        let n = found.conflicts.len();
        output::diagnostic(&format!(
            "error: {n} conflict{} with the invariants (see above)",
            if n == 1 { "" } else { "s" }
        ));
        return Ok(exit::CONFLICT);
    }
    Ok(if found.changes.is_empty() {
        output::diagnostic("No changes.");
        exit::OK
    } else {
        exit::FAILURE
    })
}

fn render(store: &dyn Store, d: &Diff, g: &GlobalArgs, out: &mut dyn Write) -> Result<()> {
    if g.format == Some(FormatArg::Markdown) {
        return output::write(out, &markdown(d));
    }
    match g.output {
        Some(OutputFormat::Json) => output::write_json(out, d),
        Some(OutputFormat::Yaml) => output::write(out, &yaml::encode(d)),
        Some(OutputFormat::Name) => {
            let names: String = d
                .changes
                .iter()
                .map(|c| format!("{}\n", c.object))
                .collect();
            output::write(out, &names)
        }
        Some(OutputFormat::Table | OutputFormat::Wide) | None => {
            let wide = g.output == Some(OutputFormat::Wide);
            let mut text = String::new();
            // A VPC's range or uplink reads as the VPC, while a VPC's pools carry its uid.
            let mut holders = Holders::new(store);
            if !d.changes.is_empty() {
                let rows = d
                    .changes
                    .iter()
                    .map(|c| {
                        let owner = match &c.owner {
                            Some(o) => holders.display_text(o, c.uid.as_deref())?,
                            None => "-".to_owned(),
                        };
                        let mut row = vec![
                            c.change.as_str().to_owned(),
                            c.object.clone(),
                            output::or_dash(c.namespace.as_ref()),
                            at(c),
                            owner,
                            output::or_dash(c.was.as_ref()),
                        ];
                        if wide {
                            row.push(output::or_dash(c.uid.as_ref()));
                            row.push(output::or_dash(c.mac.as_ref()));
                            row.push(c.path.clone());
                        }
                        Ok(row)
                    })
                    .collect::<Result<Vec<_>>>()?;
                let mut headers = vec!["CHANGE", "OBJECT", "NAMESPACE", "ADDRESS", "OWNER", "WAS"];
                if wide {
                    headers.extend(["UID", "MAC", "PATH"]);
                }
                text.push_str(&output::table(&headers, rows, &[], g.no_headers));
            }
            if !d.conflicts.is_empty() {
                if !text.is_empty() {
                    text.push('\n');
                }
                let rows = d
                    .conflicts
                    .iter()
                    .map(|c| vec![kebab(&c.conflict), c.object.clone(), c.message.clone()])
                    .collect();
                text.push_str(&output::table(
                    &["CONFLICT", "OBJECT", "MESSAGE"],
                    rows,
                    &[],
                    g.no_headers,
                ));
            }
            output::write(out, &text)
        }
    }
}

/// Where a change is: an allocation's or cooldown record's address, a prefix claim's
/// prefix, else `-`.
fn at(c: &diff::Change) -> String {
    match (c.address, &c.prefix) {
        (Some(a), _) => a.to_string(),
        (None, Some(p)) => p.clone(),
        (None, None) => "-".into(),
    }
}

/// A conflict kind as JSON spells it.
fn kebab(kind: &diff::ConflictKind) -> String {
    serde_json::to_value(kind)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default()
}

/// The comment's lines for renewals and quota changes, when there are any. Renewals are
/// only counted: a state directory whose leases are renewed often would bury the claims and
/// releases a reviewer looks for under one row per renewal.
fn lease_and_quota_lines(renewed: usize, count: &dyn Fn(diff::ChangeKind) -> usize) -> String {
    let mut lines = String::new();
    if renewed > 0 {
        let s = if renewed == 1 { "" } else { "s" };
        lines.push_str(&format!("{renewed} lease{s} renewed (not listed).\n\n"));
    }
    let quotas = count(diff::ChangeKind::QuotaCreated)
        + count(diff::ChangeKind::QuotaChanged)
        + count(diff::ChangeKind::QuotaDeleted);
    if quotas > 0 {
        lines.push_str(&format!("quota changes: {quotas}\n\n"));
    }
    lines
}

/// A pull-request comment: a summary line, a table of the changes, the conflicts.
fn markdown(d: &Diff) -> String {
    let cell = |s: &str| s.replace('|', "\\|");
    let mut md = format!(
        "### ipamctl diff `{}`...{}\n\n",
        short(&d.base),
        if d.head == "working tree" {
            "working tree".to_owned()
        } else {
            format!("`{}`", short(&d.head))
        }
    );
    let count = |k: diff::ChangeKind| d.changes.iter().filter(|c| c.change == k).count();
    md.push_str(&format!(
        "claimed: {}, released: {}, owner changes: {}, MAC changes: {}, pool changes: {}, subnet changes: {}, cooldown changes: {}, prefix claims: {}, **conflicts: {}**\n\n",
        count(diff::ChangeKind::Claimed),
        count(diff::ChangeKind::Released),
        count(diff::ChangeKind::OwnerChanged),
        count(diff::ChangeKind::MacChanged),
        count(diff::ChangeKind::PoolCreated)
            + count(diff::ChangeKind::PoolChanged)
            + count(diff::ChangeKind::PoolDeleted),
        count(diff::ChangeKind::SubnetCreated)
            + count(diff::ChangeKind::SubnetChanged)
            + count(diff::ChangeKind::SubnetDeleted),
        count(diff::ChangeKind::CooldownStarted)
            + count(diff::ChangeKind::CooldownChanged)
            + count(diff::ChangeKind::CooldownEnded),
        count(diff::ChangeKind::PrefixClaimed)
            + count(diff::ChangeKind::PrefixReleased)
            + count(diff::ChangeKind::PrefixEdited),
        d.conflicts.len()
    ));
    let renewed = count(diff::ChangeKind::Renewed);
    md.push_str(&lease_and_quota_lines(renewed, &count));
    let only_renewals = renewed > 0 && renewed == d.changes.len();
    if only_renewals {
        // Nothing else to list.
    } else if d.changes.is_empty() {
        md.push_str("No changes.\n");
    } else {
        md.push_str("| change | object | namespace | address | owner | was |\n");
        md.push_str("|---|---|---|---|---|---|\n");
        for c in d
            .changes
            .iter()
            .filter(|c| c.change != diff::ChangeKind::Renewed)
        {
            md.push_str(&format!(
                "| {} | `{}` | {} | {} | {} | {} |\n",
                c.change.as_str(),
                c.object,
                cell(&output::or_dash(c.namespace.as_ref())),
                at(c),
                c.owner
                    .as_ref()
                    .map_or_else(|| "-".to_owned(), |o| format!("`{}`", cell(o))),
                cell(&output::or_dash(c.was.as_ref())),
            ));
        }
    }
    if !d.conflicts.is_empty() {
        md.push_str("\n#### Conflicts with the invariants\n\n");
        for c in &d.conflicts {
            md.push_str(&format!(
                "- **{}** `{}`: {}\n",
                kebab(&c.conflict),
                c.object,
                c.message
            ));
        }
    }
    md
}
