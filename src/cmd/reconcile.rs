//! `ipamctl reconcile`: report, and with `--apply` release, allocations of dead owners.

use std::io::{Read, Write};

use super::list::Query;
use crate::alloc::{self, PoolRef, Released};
use crate::cli::{GlobalArgs, ReconcileArgs};
use crate::error::{Error, Result};
use crate::model::{OwnerFilter, OwnerKind};
use crate::output::{self, Action, Change};
use crate::reconcile::{LiveSet, leaks};
use crate::store::Store;

fn read_live(file: &str) -> Result<String> {
    let mut text = String::new();
    let read = if file == "-" {
        std::io::stdin().read_to_string(&mut text)
    } else {
        std::fs::File::open(file).and_then(|mut f| f.read_to_string(&mut text))
    };
    read.map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => Error::invalid("--live", format!("`{file}`: no such file")),
        _ => Error::io(file, e),
    })?;
    Ok(text)
}

pub fn run(
    store: &(dyn Store + Sync),
    g: &GlobalArgs,
    args: &ReconcileArgs,
    out: &mut dyn Write,
) -> Result<()> {
    let live = LiveSet::parse(&read_live(&args.live)?)
        .map_err(|e| Error::invalid(format!("--live {}", args.live), e))?;
    let kind = args
        .kind
        .as_deref()
        .map(|k| super::flag("--kind", k.parse::<OwnerKind>()))
        .transpose()?;
    if live.is_empty() && args.apply && !args.allow_empty {
        return Err(Error::Usage {
            message: "the live list is empty: `--apply` would release every allocation in scope; nothing released".into(),
            hint: Some("an empty inventory is more often a broken query; pass `--allow-empty` if it is right".into()),
        });
    }
    let all = super::list::collect(store, g, &Query::default())?;
    let leaked = leaks(&all, &live, kind);
    let checked = all
        .iter()
        .filter(|m| kind.is_none_or(|k| m.spec.owner.kind() == k))
        .count();
    let mut rows = Vec::new();
    let mut released = 0;
    for m in &leaked {
        let action = if args.apply && args.dry_run {
            released += 1;
            Action::WouldRelease
        } else if args.apply {
            let pool = PoolRef {
                namespace: m.metadata.namespace.clone(),
                name: m.spec.pool.clone(),
            };
            let owner = &m.spec.owner;
            // Guarded by the owner reported dead: an address re-allocated meanwhile stays.
            let guard = OwnerFilter::exactly(owner);
            match alloc::release_address(store, &pool, m.spec.address, &guard) {
                Ok(Released::Deleted(_)) => {
                    released += 1;
                    Action::Released
                }
                // Changed meanwhile: re-allocated, or released by someone else.
                Ok(Released::NotHeld) | Err(Error::Conflict { .. }) => Action::Skipped,
                Err(e) => return Err(e),
            }
        } else {
            Action::Leaked
        };
        rows.push(Change::new(*m, action));
    }
    // A diagnostic, as `check`'s summary is: stdout keeps the data alone.
    eprintln!(
        "checked {checked} allocations: {} leaked, {released} {}",
        leaked.len(),
        if args.dry_run && args.apply {
            "would be released"
        } else {
            "released"
        }
    );
    if output::write_list(out, g.output, &rows)? || rows.is_empty() {
        return Ok(());
    }
    let rows = rows
        .iter()
        .map(|c| {
            let m = c.object;
            vec![
                output::or_dash(m.metadata.namespace.as_ref()),
                m.spec.pool.to_string(),
                m.spec.address.to_string(),
                m.spec.owner.to_string(),
                output::or_dash(m.spec.owner.uid()),
                c.status.action.to_string(),
            ]
        })
        .collect();
    output::write(
        out,
        &output::table(
            &["NAMESPACE", "POOL", "ADDRESS", "OWNER", "UID", "ACTION"],
            rows,
            &[],
            g.no_headers,
        ),
    )
}
