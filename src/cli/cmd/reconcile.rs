//! `ipamctl reconcile`: report, and with `--apply` release, allocations of dead owners.

use std::io::{Read, Write};
use std::time::SystemTime;

use crate::cli::output::{self, Action, Change};
use crate::cli::{GlobalArgs, ReconcileArgs};
use crate::engine::list::Query;
use crate::engine::reconcile::{Freshness, LiveSet, MaxRelease, leaks};
use crate::engine::release::Released;
use crate::error::{Error, Result, exit};
use crate::model::PoolRef;
use crate::model::{OwnerFilter, OwnerKind};
use crate::store::Store;

/// The live list's text and, for a file, its modification time (when it was taken).
fn read_live(file: &str) -> Result<(String, Option<SystemTime>)> {
    let mut text = String::new();
    let read = if file == "-" {
        std::io::stdin().read_to_string(&mut text).map(|_| None)
    } else {
        std::fs::File::open(file).and_then(|mut f| {
            f.read_to_string(&mut text)?;
            // A pipe (`<(virsh list …)`) is stamped when it was last written, after the list
            // was taken: only a regular file's modification time says when it was written.
            let meta = f.metadata()?;
            if meta.is_file() {
                meta.modified().map(Some)
            } else {
                Ok(None)
            }
        })
    };
    let modified = read.map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => Error::invalid("--live", format!("`{file}`: no such file")),
        _ => Error::io(file, e),
    })?;
    Ok((text, modified))
}

/// When the live list was taken: `--live-as-of`, else the file's modification time.
fn live_as_of(args: &ReconcileArgs, modified: Option<SystemTime>) -> Result<SystemTime> {
    match (&args.live_as_of, modified) {
        (Some(at), _) => super::flag(
            "--live-as-of",
            humantime::parse_rfc3339_weak(at).map_err(|e| {
                format!("invalid time `{at}`: {e}; expected RFC 3339, e.g. `2026-12-01T07:00:00Z`")
            }),
        ),
        (None, Some(modified)) => Ok(modified),
        (None, None) => Err(Error::Usage {
            message: format!("`--live {}` needs `--live-as-of TIME`: a list read from stdin or a pipe has no modification time that says when it was taken, and an allocation claimed after that must not be released", args.live),
            hint: Some("take the time before listing: `T=$(date -u +%FT%TZ); virsh list --all --uuid | ipamctl reconcile --live - --live-as-of \"$T\"`".into()),
        }),
    }
}

pub fn run(
    store: &(dyn Store + Sync),
    g: &GlobalArgs,
    args: &ReconcileArgs,
    out: &mut dyn Write,
) -> Result<i32> {
    let (text, modified) = read_live(&args.live)?;
    let live =
        LiveSet::parse(&text).map_err(|e| Error::invalid(format!("--live {}", args.live), e))?;
    let kind = args
        .kind
        .as_deref()
        .map(|k| super::flag("--kind", k.parse::<OwnerKind>()))
        .transpose()?;
    let freshness = Freshness {
        live_as_of: live_as_of(args, modified)?,
        min_age: super::flag(
            "--min-age",
            humantime::parse_duration(&args.min_age).map_err(|e| {
                format!(
                    "invalid duration `{}`: {e}; e.g. `5m`, `1h`, `0`",
                    args.min_age
                )
            }),
        )?,
        now: SystemTime::now(),
    };
    let cap = super::flag("--max-release", MaxRelease::parse(&args.max_release))?;
    if live.is_empty() && args.apply && !args.allow_empty {
        return Err(Error::Usage {
            message: "the live list is empty: `--apply` would release every allocation in scope; nothing released".into(),
            hint: Some("an empty inventory is more often a broken query; pass `--allow-empty` if it is right".into()),
        });
    }
    let all = super::list::collect(store, g, &Query::default())?;
    let found = leaks(&all, &live, kind, &freshness);
    let (checked, leaked) = (found.checked, &found.leaked);
    let unmatched = live.unmatched(&all);
    let limit = cap.limit(checked);
    if args.apply && leaked.len() as u64 > limit {
        return Err(Error::Conflict {
            message: format!(
                "{} of {checked} allocations checked look leaked, more than `--max-release {cap}` allows ({limit}); nothing released{}",
                leaked.len(),
                if unmatched > 0 {
                    format!(
                        " ({unmatched} of {} live lines matched no allocation: is the list of the right thing?)",
                        live.len()
                    )
                } else {
                    String::new()
                }
            ),
            hint: Some(format!(
                "review them with `ipamctl reconcile --live {}` (no `--apply`); if they are all leaks, pass `--max-release {}`",
                args.live,
                leaked.len()
            )),
        });
    }
    let mut rows = Vec::new();
    let mut released = 0;
    for m in leaked {
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
            match crate::engine::release::release_address(store, &pool, m.spec.address, &guard) {
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
    let mut summary = format!(
        "checked {checked} allocations: {} leaked, {released} {}",
        leaked.len(),
        if args.dry_run && args.apply {
            "would be released"
        } else {
            "released"
        }
    );
    if found.too_new > 0 {
        summary.push_str(&format!(
            "; {} allocations of unlisted owners kept: claimed after the live list was taken, or younger than {}",
            found.too_new, args.min_age
        ));
    }
    summary.push_str(&format!(
        "; {unmatched} of {} live lines matched no allocation",
        live.len()
    ));
    eprintln!("{summary}");
    // Report mode is a CI gate, as `check` is: leaks found exit 1.
    let code = if !args.apply && !leaked.is_empty() {
        exit::FAILURE
    } else {
        exit::OK
    };
    if output::write_list(out, g.output, &rows)? || rows.is_empty() {
        return Ok(code);
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
    )?;
    Ok(code)
}
