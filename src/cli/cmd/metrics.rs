//! `ipamctl metrics [--check] [--out FILE]`: the engine's metric samples
//! ([`crate::engine::metrics`]) in Prometheus' text exposition format, to stdout or
//! atomically to a file for node_exporter's textfile collector.

use std::io::Write;
use std::path::Path;

use crate::cli::output;
use crate::cli::{DhcpFormat, GlobalArgs, MetricsArgs, OutputFormat};
use crate::engine::check::Report;
use crate::engine::dhcp::Family;
use crate::engine::leases;
use crate::engine::metrics::{self, Metric, Problems};
use crate::engine::segments::Scope;
use crate::engine::warning::Warnings;
use crate::error::{Error, Result};
use crate::model::lease::Lease;
use crate::store::Store;
use clap::ValueEnum;

pub fn run(g: &GlobalArgs, args: &MetricsArgs, out: &mut dyn Write) -> Result<()> {
    text_only(g)?;
    let sources = lease_sources(&args.dhcp_leases)?;
    let store = super::open(g)?;
    let problems = args
        .check
        .then(|| crate::engine::check::check(&*store))
        .transpose()?;
    emit(&*store, g, args, problems.as_ref(), &sources, out)
}

/// Exit 2 for an `-o` other than `table`: the default form is the text itself; there is no
/// other.
pub(crate) fn text_only(g: &GlobalArgs) -> Result<()> {
    if g.output.is_some_and(|o| o != OutputFormat::Table) {
        return Err(Error::Usage {
            message: "`metrics` prints Prometheus' text format only; drop `-o`".into(),
            hint: Some("the same figures as JSON: ipamctl pool list -o json".into()),
        });
    }
    Ok(())
}

/// Writes the exposition `text` where `--out` says (here, or answered by a server:
/// [`crate::cli::remote`]): the file, replaced whole, or stdout.
pub(crate) fn write_exposition(text: &str, args: &MetricsArgs, out: &mut dyn Write) -> Result<()> {
    match &args.out {
        Some(path) => replace_file(path, text),
        None => output::write(out, text),
    }
}

/// A `--dhcp-leases FORMAT=FILE`: the format's name and what its file holds, read and
/// parsed before the store is opened (a malformed file is exit 2 naming its line).
struct LeaseSource {
    name: &'static str,
    family: Family,
    leases: Vec<Lease>,
}

fn lease_sources(flags: &[String]) -> Result<Vec<LeaseSource>> {
    let mut sources = Vec::new();
    for flag in flags {
        let Some((format, file)) = flag.split_once('=') else {
            return Err(Error::invalid(
                "--dhcp-leases",
                format!(
                    "`{}` is not FORMAT=FILE (e.g. `kea4=/var/lib/kea/kea-leases4.csv`)",
                    flag.escape_debug()
                ),
            ));
        };
        let format = DhcpFormat::from_str(format, false).map_err(|_| {
            Error::invalid(
                "--dhcp-leases",
                format!(
                    "`{}` is no lease file format; give `kea4`, `kea6` or `dnsmasq`",
                    format.escape_debug()
                ),
            )
        })?;
        let (lease_format, family) = super::dhcp_leases::formats(format);
        let name = match format {
            DhcpFormat::Kea4 => "kea4",
            DhcpFormat::Kea6 => "kea6",
            DhcpFormat::Dnsmasq => "dnsmasq",
        };
        sources.push(LeaseSource {
            name,
            family,
            leases: super::dhcp_leases::read(file, lease_format)?,
        });
    }
    Ok(sources)
}

fn emit(
    store: &(dyn Store + Sync),
    g: &GlobalArgs,
    args: &MetricsArgs,
    report: Option<&Report>,
    sources: &[LeaseSource],
    out: &mut dyn Write,
) -> Result<()> {
    let scopes = super::scopes(store, g)?;
    let problems = report.map(Problems::of);
    let mut warnings = Warnings::default();
    let collected = metrics::collect(store, &scopes, problems, &mut warnings);
    let drift = lease_drift(store, &scopes, sources, &mut warnings);
    output::warn(&warnings);
    let mut collected = collected?;
    if let Some(drift) = drift? {
        collected.push(drift);
    }
    write_exposition(&metrics::exposition(&collected), args, out)
}

/// `ipamctl_dhcp_lease_drift` of `sources` over `scopes`, now; `None` without any.
fn lease_drift(
    store: &(dyn Store + Sync),
    scopes: &[Option<crate::model::Namespace>],
    sources: &[LeaseSource],
    warnings: &mut Warnings,
) -> Result<Option<Metric>> {
    if sources.is_empty() {
        return Ok(None);
    }
    let scope = Scope {
        scopes: Some(scopes.to_vec()),
        ..Scope::default()
    };
    let now = crate::model::Timestamp::now().secs();
    let mut reports = Vec::new();
    for s in sources {
        let report = leases::compare(store, &scope, s.family, &s.leases, now, warnings)?;
        reports.push((s.name, report));
    }
    Ok(Some(leases::drift_metric(&reports)))
}

/// Writes `text` to `path` through a temporary file in the same directory, renamed over
/// it, so a reader sees the old file or the new one, never a part; readable by everyone,
/// as the textfile collector (another user) must read it. The temporary file's name does
/// not end in `.prom`, so the collector never picks it up.
fn replace_file(path: &Path, text: &str) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let io = |e| Error::io(path, e);
    let mut tmp = tempfile::Builder::new()
        .prefix(".ipamctl-metrics-")
        .suffix(".tmp")
        .tempfile_in(dir)
        .map_err(|e| Error::io(dir, e))?;
    tmp.write_all(text.as_bytes()).map_err(io)?;
    tmp.as_file()
        .set_permissions(std::fs::Permissions::from_mode(0o644))
        .map_err(io)?;
    tmp.as_file().sync_all().map_err(io)?;
    tmp.persist(path).map_err(|e| io(e.error))?;
    Ok(())
}
