//! `ipamctl dns export`: the zones [`crate::engine::dns`] computes, written as zone files and
//! a `named.conf` fragment, each atomically, with SOA serials that change only when a zone's
//! content does.

use std::fmt::Write as _;
use std::io::Write;
use std::net::IpAddr;
use std::path::Path;

use crate::cli::output;
use crate::cli::{DnsCommand, DnsExportArgs, GlobalArgs};
use crate::engine::dns;
use crate::engine::warning::Warnings;
use crate::error::{Error, Result};
use crate::model::names::check_label;
use crate::store::Store;

/// Stands for the serial while two renderings of a zone are compared.
const SERIAL_MARK: &str = "SERIAL";

pub fn run(
    store: &(dyn Store + Sync),
    g: &GlobalArgs,
    command: &DnsCommand,
    out: &mut dyn Write,
) -> Result<()> {
    let DnsCommand::Export(args) = command;
    super::dhcp::no_data_form("dns export", "zone files and lists them", g)?;
    let zone = domain("--zone", &args.zone)?;
    let ns: Vec<String> = match args.ns.as_slice() {
        [] => vec![format!("ns.{zone}")],
        given => given
            .iter()
            .map(|n| domain("--ns", n))
            .collect::<Result<_>>()?,
    };
    let mailbox = match &args.mailbox {
        Some(m) => domain("--mailbox", m)?,
        None => format!("hostmaster.{zone}"),
    };
    let scope = super::dhcp::scope(store, g, &args.select)?;
    let mut warnings = Warnings::default();
    let zones = dns::zones(store, &scope, args.reverse_enclosing, &mut warnings);
    output::warn(&warnings);
    let zones = zones?;
    for n in &ns {
        if let Some(host) = n.strip_suffix(&format!(".{zone}"))
            && !zones.forward.iter().any(|(h, _)| h == host)
        {
            return Err(Error::Usage {
                message: format!(
                    "the name server `{n}` is inside `{zone}` but no exported NIC is named `{host}`, so it would have no address"
                ),
                hint: Some(
                    "give the server's name with --ns (one outside the zone, or an exported host)"
                        .into(),
                ),
            });
        }
    }
    let soa = Soa {
        ns: &ns,
        mailbox: &mailbox,
        args,
    };
    let mut files = vec![(
        format!("{zone}.zone"),
        zone.clone(),
        forward(&zones.forward),
    )];
    for (name, records) in &zones.reverse {
        files.push((
            format!("{name}.zone"),
            name.clone(),
            reverse(&zone, records),
        ));
    }
    let dir = &args.out;
    std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
    let dir = dir.canonicalize().map_err(|e| Error::io(dir, e))?;
    let mut report = String::new();
    let mut conf = String::from("// Written by `ipamctl dns export`.\n");
    for (file, name, records) in &files {
        let action = write_zone(&dir, file, &soa.render(name, records), args.serial)?;
        let _ = writeln!(report, "{file} {action}");
        let _ = writeln!(
            conf,
            "zone \"{name}\" {{ type primary; file \"{}\"; }};",
            dir.join(file).display()
        );
    }
    let action = write_if_changed(&dir, "named.conf", &conf)?;
    let _ = writeln!(report, "named.conf {action}");
    output::write(out, &report)
}

/// A domain name from a flag: lowercase RFC 1123 labels joined by `.`, a trailing `.`
/// allowed; returned without it.
fn domain(flag: &str, s: &str) -> Result<String> {
    let name = s.strip_suffix('.').unwrap_or(s).to_ascii_lowercase();
    for label in name.split('.') {
        check_label(label)
            .map_err(|why| Error::invalid(flag, format!("`{s}`: the label `{label}` {why}")))?;
    }
    Ok(name)
}

struct Soa<'a> {
    ns: &'a [String],
    mailbox: &'a str,
    args: &'a DnsExportArgs,
}

impl Soa<'_> {
    /// The zone file of `zone` with `records` (relative owner, type, data lines), its serial
    /// written as [`SERIAL_MARK`].
    fn render(&self, zone: &str, records: &str) -> String {
        let a = self.args;
        let mut text = format!(
            "; Written by `ipamctl dns export`: the serial changes only when the rest does.\n\
             $ORIGIN {zone}.\n$TTL {}\n@ IN SOA {}. {}. (\n    {SERIAL_MARK} ; serial\n    \
             {} ; refresh\n    {} ; retry\n    {} ; expire\n    {} ; minimum\n    )\n",
            a.ttl, self.ns[0], self.mailbox, a.refresh, a.retry, a.expire, a.minimum
        );
        for n in self.ns {
            let _ = writeln!(text, "@ IN NS {n}.");
        }
        text.push_str(records);
        text
    }
}

fn forward(records: &[(String, IpAddr)]) -> String {
    let mut text = String::new();
    for (host, address) in records {
        let kind = if address.is_ipv4() { "A" } else { "AAAA" };
        let _ = writeln!(text, "{host} IN {kind} {address}");
    }
    text
}

fn reverse(zone: &str, records: &[(String, String)]) -> String {
    let mut text = String::new();
    for (owner, host) in records {
        let _ = writeln!(text, "{owner} IN PTR {host}.{zone}.");
    }
    text
}

/// The serial written in a zone file by [`Soa::render`], and the file with it replaced by
/// the mark; `None` for a file this command did not write.
fn serial_of(text: &str) -> Option<(u32, String)> {
    let line = text.lines().find(|l| l.ends_with(" ; serial"))?;
    let serial: u32 = line.trim().strip_suffix(" ; serial")?.parse().ok()?;
    let marked = text.replacen(
        &format!("    {serial} ; serial\n"),
        &format!("    {SERIAL_MARK} ; serial\n"),
        1,
    );
    Some((serial, marked))
}

/// Writes zone `file` unless the file there has the same content apart from its serial; a
/// changed zone gets `serial` or the old serial plus one, a new one `serial` or 1.
fn write_zone(dir: &Path, file: &str, marked: &str, serial: Option<u32>) -> Result<&'static str> {
    let path = dir.join(file);
    let old = match std::fs::read_to_string(&path) {
        Ok(text) => serial_of(&text),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(Error::io(path, e)),
    };
    let (number, action) = match old {
        Some((_, ref was)) if was == marked => return Ok("unchanged"),
        Some((n, _)) => (serial.unwrap_or(n.wrapping_add(1)), "configured"),
        None if path.exists() => (serial.unwrap_or(1), "configured"),
        None => (serial.unwrap_or(1), "created"),
    };
    let text = marked.replacen(
        &format!("    {SERIAL_MARK} ; serial\n"),
        &format!("    {number} ; serial\n"),
        1,
    );
    atomic_write(dir, file, &text)?;
    Ok(action)
}

/// Writes `file` unless it holds `text` already.
fn write_if_changed(dir: &Path, file: &str, text: &str) -> Result<&'static str> {
    let path = dir.join(file);
    match std::fs::read_to_string(&path) {
        Ok(old) if old == text => Ok("unchanged"),
        Ok(_) => atomic_write(dir, file, text).map(|()| "configured"),
        Err(_) => atomic_write(dir, file, text).map(|()| "created"),
    }
}

/// A temporary file in `dir`, synced, renamed over `file`: a name server reloading meanwhile
/// reads the old zone or the new one, never half of one.
fn atomic_write(dir: &Path, file: &str, text: &str) -> Result<()> {
    let mut tmp = tempfile::Builder::new()
        .prefix(&format!(".tmp-{file}-"))
        .tempfile_in(dir)
        .map_err(|e| Error::io(dir, e))?;
    // A zone file is read by the name server's user: not the 0600 of a temporary file.
    use std::os::unix::fs::PermissionsExt;
    tmp.write_all(text.as_bytes())
        .and_then(|()| {
            tmp.as_file()
                .set_permissions(std::fs::Permissions::from_mode(0o644))
        })
        .and_then(|()| tmp.as_file().sync_all())
        .map_err(|e| Error::io(tmp.path(), e))?;
    let target = dir.join(file);
    tmp.persist(&target)
        .map_err(|e| Error::io(&target, e.error))?;
    Ok(())
}
