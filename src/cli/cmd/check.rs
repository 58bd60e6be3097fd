//! `ipamctl check [--fix]`: findings to stdout, a one-line summary to stderr, exit 1 on
//! any error.

use std::io::Write;
use std::time::SystemTime;

use crate::cli::output;
use crate::cli::{CheckArgs, GlobalArgs, OutputFormat};
use crate::engine::check::{self, Finding, Report, Severity};
use crate::error::{Error, Result, exit};
use crate::store::{ObjectKind, StateDir, Store};

/// `ipamctl check`: of the state directory, or ([`run_database`]) of a database.
pub fn run(
    store: &dyn Store,
    g: &GlobalArgs,
    args: &CheckArgs,
    out: &mut dyn Write,
) -> Result<i32> {
    match store.state_dir() {
        Some(dir) => run_dir(store, dir, g, args, out),
        None => run_database(store, g, args, out),
    }
}

/// `ipamctl check [--fix]` of the state directory `dir` of `store`.
fn run_dir(
    store: &dyn Store,
    dir: &dyn StateDir,
    g: &GlobalArgs,
    args: &CheckArgs,
    out: &mut dyn Write,
) -> Result<i32> {
    if g.namespace.is_some() {
        return Err(Error::usage(
            "`check` always checks the whole state directory; drop `--namespace`",
        ));
    }
    let mut report = check::check(store)?;
    if args.fix {
        let now = SystemTime::now();
        for path in report.fixable(now) {
            if check::remove_leftover(dir, &path, now)? {
                output::diagnostic(&format!("removed {path}"));
                report.resolved(&path);
            }
        }
        for pool in report.idle_cooldown_pools() {
            let ns = pool.namespace.as_ref();
            for name in crate::engine::cooldown::prune(store, &pool, now)? {
                let path = store.locate(ObjectKind::Cooldown, ns, &name);
                output::diagnostic(&format!("removed {path}"));
                report.resolved(&path);
            }
        }
        for twice in report.macs_held_twice().to_vec() {
            let keeper = &twice.keeper.allocation;
            let ns = twice.keeper.namespace.as_ref();
            let mut settled = true;
            for other in &twice.others {
                if crate::engine::mac::settle(store, ns, keeper, &other.allocation)? {
                    output::diagnostic(&format!(
                        "removed MAC {} from {} ({} of `{}`): {} keeps it ({} of `{}`: {})",
                        keeper.spec.mac.map(|m| m.to_string()).unwrap_or_default(),
                        other.path,
                        other.allocation.spec.address,
                        other.allocation.spec.owner,
                        twice.keeper.path,
                        keeper.spec.address,
                        keeper.spec.owner,
                        twice.why
                    ));
                    report.resolved(&other.path);
                } else {
                    settled = false;
                }
            }
            if settled && crate::engine::mac::restore_record(store, ns, keeper)? {
                report.resolved(&twice.keeper.path);
            }
        }
        for u in report.unrecorded_macs().to_vec() {
            if crate::engine::mac::restore_record(store, u.namespace.as_ref(), &u.allocation)? {
                let mac = u
                    .allocation
                    .spec
                    .mac
                    .map(|m| m.to_string())
                    .unwrap_or_default();
                output::diagnostic(&format!("made the record of MAC {mac} for {}", u.path));
                report.resolved(&u.path);
            }
        }
    }
    render(out, g, &report.findings)?;
    output::diagnostic(&summary(&report, &store.describe()).to_string());
    Ok(if report.count(Severity::Error) > 0 {
        exit::FAILURE
    } else {
        exit::OK
    })
}

/// `ipamctl --store URL check`: the same rules, output and exit codes on a database
/// ([`check::check`]). `--fix` removes temporary files and prunes cooldown records
/// of a state directory; a database has neither to remove.
fn run_database(
    store: &dyn Store,
    g: &GlobalArgs,
    args: &CheckArgs,
    out: &mut dyn Write,
) -> Result<i32> {
    if g.namespace.is_some() {
        return Err(Error::usage(
            "`check` always checks the whole database; drop `--namespace`",
        ));
    }
    if args.fix {
        return Err(Error::usage(
            "`--fix` removes a state directory's leftover files; a database has none (each finding says how to fix it in psql)",
        ));
    }
    let report = check::check(store)?;
    render(out, g, &report.findings)?;
    output::diagnostic(&summary(&report, &store.describe()).to_string());
    Ok(if report.count(Severity::Error) > 0 {
        exit::FAILURE
    } else {
        exit::OK
    })
}

fn render(out: &mut dyn Write, g: &GlobalArgs, findings: &[Finding]) -> Result<()> {
    match g.output {
        Some(OutputFormat::Json) => output::write_json_list(out, findings),
        Some(OutputFormat::Yaml) => output::write_yaml_list(out, findings),
        // The files with findings, each once: what to open next.
        Some(OutputFormat::Name) => {
            let mut paths: Vec<&str> = findings.iter().map(|f| f.path.as_str()).collect();
            paths.dedup();
            output::write(
                out,
                &paths.iter().map(|p| format!("{p}\n")).collect::<String>(),
            )
        }
        Some(OutputFormat::Table | OutputFormat::Wide) | None if findings.is_empty() => Ok(()),
        Some(OutputFormat::Table | OutputFormat::Wide) | None => {
            let rows = findings
                .iter()
                .map(|f| vec![f.severity.to_string(), f.path.clone(), f.message.clone()])
                .collect();
            output::write(
                out,
                &output::table(&["SEVERITY", "PATH", "MESSAGE"], rows, &[], g.no_headers),
            )
        }
    }
}

/// `ok: no problems found in DIR (...)`, `ok: 1 warning in DIR (...)` or
/// `error: 2 errors, 1 warning in DIR (...)`, with what was checked in parentheses.
fn summary(report: &Report, root: &str) -> String {
    let plural = |n: usize, what: &str| {
        if n == 1 {
            format!("{n} {what}")
        } else {
            format!("{n} {what}s")
        }
    };
    let checked = format!(
        "{}, {} checked",
        plural(report.pools, "pool"),
        plural(report.allocations, "allocation")
    );
    let (errors, warnings) = (
        report.count(Severity::Error),
        report.count(Severity::Warning),
    );
    match (errors, warnings) {
        (0, 0) => format!("ok: no problems found in {root} ({checked})"),
        (0, w) => format!(
            "ok: no errors, {} in {root} ({checked})",
            plural(w, "warning")
        ),
        (e, w) => format!(
            "error: {}, {} in {root} ({checked})",
            plural(e, "error"),
            plural(w, "warning")
        ),
    }
}
