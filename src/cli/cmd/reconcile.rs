//! `ipamctl reconcile`: report, and with `--apply` release, allocations of dead owners.

use std::io::{Read, Write};
use std::time::SystemTime;

use crate::cli::output::{self, Action, Change};
use crate::cli::{GlobalArgs, ReconcileArgs};
use crate::engine::reconcile::{
    Freshness, Judged, LiveSet, MaxRelease, Outcome, Request, Verdict, reconcile,
};
use crate::engine::warning::Warnings;
use crate::error::{Error, Result, exit};
use crate::model::{AllocationManifest, OwnerKind};
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
fn live_as_of(
    args: &ReconcileArgs,
    live: &str,
    modified: Option<SystemTime>,
) -> Result<SystemTime> {
    match (&args.live_as_of, modified) {
        (Some(at), _) => super::flag(
            "--live-as-of",
            humantime::parse_rfc3339_weak(at).map_err(|e| {
                format!("invalid time `{at}`: {e}; expected RFC 3339, e.g. `2026-12-01T07:00:00Z`")
            }),
        ),
        (None, Some(modified)) => Ok(modified),
        (None, None) => Err(Error::Usage {
            message: format!("`--live {}` needs `--live-as-of TIME`: a list read from stdin or a pipe has no modification time that says when it was taken, and an allocation claimed after that must not be released", live),
            hint: Some("take the time before listing: `T=$(date -u +%FT%TZ); virsh list --all --uuid | ipamctl reconcile --live - --live-as-of \"$T\"`".into()),
        }),
    }
}

/// The arguments, validated, in the order they were always checked.
fn request(args: &ReconcileArgs, source: &str) -> Result<Request> {
    let (text, modified) = read_live(source)?;
    let live = LiveSet::parse(&text).map_err(|e| Error::invalid(format!("--live {source}"), e))?;
    let judged = match args.kind.as_deref() {
        Some(k) => Judged::Kind(super::flag("--kind", k.parse::<OwnerKind>())?),
        None if args.all_kinds => Judged::All,
        None => Judged::Listed,
    };
    let freshness = Freshness {
        live_as_of: live_as_of(args, source, modified)?,
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
    Ok(Request {
        live,
        source: source.to_owned(),
        judged,
        freshness,
        cap,
        apply: args.apply,
        dry_run: args.dry_run,
    })
}

pub fn run(
    store: &(dyn Store + Sync),
    g: &GlobalArgs,
    args: &ReconcileArgs,
    out: &mut dyn Write,
) -> Result<i32> {
    let Some(source) = args.live.as_deref() else {
        return expired(store, g, args, out);
    };
    let req = request(args, source)?;
    let scopes = super::named_scopes(store, g)?;
    let mut warnings = Warnings::default();
    let done = reconcile(store, scopes.as_deref(), &req, &mut warnings);
    output::warn(&warnings);
    let done = done?;
    // A diagnostic, as `check`'s summary is: stdout keeps the data alone.
    output::diagnostic(&summary(&done, args, req.live.len()).to_string());
    // Report mode is a CI gate, as `check` is: leaks found exit 1.
    let code = if !args.apply && !done.leaked.is_empty() {
        exit::FAILURE
    } else {
        exit::OK
    };
    let rows: Vec<_> = done
        .leaked
        .iter()
        .map(|(m, verdict)| Change::new(m, action(*verdict)))
        .collect();
    if output::write_list(out, g.output, &rows)? || rows.is_empty() {
        return Ok(code);
    }
    table(&rows, g, out)?;
    Ok(code)
}

/// `reconcile --expired`: the lapsed leases, reported, or released with `--apply`; as a
/// live list's run, report mode exits 1 when it finds any.
fn expired(
    store: &(dyn Store + Sync),
    g: &GlobalArgs,
    args: &ReconcileArgs,
    out: &mut dyn Write,
) -> Result<i32> {
    use crate::engine::lease::{Reaped, parse_grace, reap};
    let grace = parse_grace(&args.grace)?;
    let pool = args
        .pool
        .as_deref()
        .map(|p| super::flag("--pool", crate::model::PoolName::new(p)))
        .transpose()?;
    let scopes = super::named_scopes(store, g)?;
    let mut warnings = Warnings::default();
    let done = reap(
        store,
        scopes.as_deref(),
        pool.as_ref(),
        grace,
        (args.apply, args.dry_run),
        &mut warnings,
    );
    output::warn(&warnings);
    let done = done?;
    let released = done
        .lapsed
        .iter()
        .filter(|(_, v)| matches!(v, Reaped::Released | Reaped::WouldRelease))
        .count();
    output::diagnostic(&format!(
        "checked {} leases: {} lapsed more than {} ago, {released} {}",
        done.leases,
        done.lapsed.len(),
        args.grace,
        if args.dry_run && args.apply {
            "would be released"
        } else {
            "released"
        }
    ));
    let code = if !args.apply && !done.lapsed.is_empty() {
        exit::FAILURE
    } else {
        exit::OK
    };
    let rows: Vec<_> = done
        .lapsed
        .iter()
        .map(|(m, verdict)| {
            let action = match verdict {
                Reaped::Lapsed => Action::Lapsed,
                Reaped::Released => Action::Released,
                Reaped::WouldRelease => Action::WouldRelease,
                Reaped::Skipped => Action::Skipped,
            };
            Change::new(m, action)
        })
        .collect();
    if output::write_list(out, g.output, &rows)? || rows.is_empty() {
        return Ok(code);
    }
    table(&rows, g, out)?;
    Ok(code)
}

/// The action a verdict is reported as.
fn action(verdict: Verdict) -> Action {
    match verdict {
        Verdict::Leaked => Action::Leaked,
        Verdict::Released => Action::Released,
        Verdict::WouldRelease => Action::WouldRelease,
        Verdict::Skipped => Action::Skipped,
    }
}

/// The one stderr line that sums a run up.
fn summary(done: &Outcome, args: &ReconcileArgs, live: usize) -> String {
    let mut summary = format!(
        "checked {} allocations: {} leaked, {} {}",
        done.checked,
        done.leaked.len(),
        done.released,
        if args.dry_run && args.apply {
            "would be released"
        } else {
            "released"
        }
    );
    if !done.unjudged.is_empty() {
        let count: usize = done.unjudged.values().sum();
        let kinds: Vec<String> = done
            .unjudged
            .iter()
            .map(|(kind, n)| format!("{kind} {n}"))
            .collect();
        summary.push_str(&format!(
            "; {count} allocations of kinds the live list does not name left alone ({}): pass `--kind KIND` or `--all-kinds` to judge them",
            kinds.join(", ")
        ));
    }
    if done.too_new > 0 {
        summary.push_str(&format!(
            "; {} allocations of unlisted owners kept: claimed after the live list was taken, or younger than {}",
            done.too_new, args.min_age
        ));
    }
    // Said positively: "0 of 110 matched no allocation" is a double negative to parse.
    summary.push_str(&format!(
        "; {} of {live} live lines matched an allocation",
        live.saturating_sub(done.unmatched)
    ));
    summary
}

/// The table of leaks and what was done to each.
fn table(rows: &[Change<&AllocationManifest>], g: &GlobalArgs, out: &mut dyn Write) -> Result<()> {
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
