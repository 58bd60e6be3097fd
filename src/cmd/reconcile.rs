//! `ipamctl reconcile`: report, and with `--apply` release, allocations of dead owners.

use std::io::{Read, Write};

use serde_json::json;

use crate::alloc::{self, PoolRef, Released};
use crate::cli::{GlobalArgs, ListArgs, OutputFormat, ReconcileArgs};
use crate::error::{Error, Result};
use crate::model::{OwnerFilter, OwnerKind};
use crate::output;
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
    let all = super::list::collect(
        store,
        g,
        &ListArgs {
            pool: None,
            owner: None,
            uid: None,
            address: None,
        },
    )?;
    let leaked = leaks(&all, &live, kind);
    let checked = all
        .iter()
        .filter(|m| kind.is_none_or(|k| m.spec.owner.kind() == k))
        .count();
    let mut rows = Vec::new();
    let mut released = 0;
    for m in &leaked {
        let action = if args.apply {
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
                    "released"
                }
                Ok(Released::NotHeld) | Err(Error::Conflict { .. }) => {
                    "skipped (changed meanwhile)"
                }
                Err(e) => return Err(e),
            }
        } else {
            "leaked"
        };
        rows.push((m, action));
    }
    let summary = format!(
        "checked {checked} allocations: {} leaked, {released} released",
        leaked.len()
    );
    match g.output {
        Some(OutputFormat::Json) | Some(OutputFormat::Yaml) => {
            let value = json!({
                "checked": checked,
                "leaked": leaked,
                "released": released,
            });
            if g.output == Some(OutputFormat::Json) {
                output::write(out, &output::json(&value))
            } else {
                output::write(out, &crate::yaml::encode(&value))
            }
        }
        Some(OutputFormat::Table) | None => {
            if !rows.is_empty() {
                let rows = rows
                    .iter()
                    .map(|(m, action)| {
                        vec![
                            output::or_dash(m.metadata.namespace.as_ref()),
                            m.spec.pool.to_string(),
                            m.spec.address.to_string(),
                            m.spec.owner.to_string(),
                            output::or_dash(m.spec.owner.uid()),
                            action.to_string(),
                        ]
                    })
                    .collect();
                output::write(
                    out,
                    &output::table(
                        &["NAMESPACE", "POOL", "ADDRESS", "OWNER", "UID", "ACTION"],
                        rows,
                        &[],
                    ),
                )?;
            }
            output::line(out, &summary)
        }
    }
}
