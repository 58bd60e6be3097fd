//! `ipamctl dns export`: the zones [`crate::engine::dns`] computes, written as zone files and
//! a `named.conf` fragment, each atomically, with SOA serials derived from the state (see
//! [`dns::settled`]).
//!
//! `--out` is a directory this command writes into and nothing more: it is opened without
//! following a symlink, and every file in it is read through that handle with `O_NOFOLLOW`
//! and only if it is a regular file with one name (no FIFO, device, socket, directory or
//! hard link: [`beneath::read`]), then replaced by a new file renamed over it
//! ([`beneath::write`]). Every file is looked at before any is written, so a refusal
//! leaves the directory as it was.

use std::fmt::Write as _;
use std::io::Write;
use std::net::IpAddr;
use std::os::fd::OwnedFd;
use std::path::Path;

use rustix::fs::{Mode, OFlags};

use crate::cli::output;
use crate::cli::{DnsCommand, DnsExportArgs, GlobalArgs};
use crate::engine::dns;
use crate::engine::warning::Warnings;
use crate::error::{Error, Result};
use crate::model::names::check_label;
use crate::store::Store;
use crate::store::fs::beneath::{self, Refused, WriteMode};

/// Stands for the serial while two renderings of a zone are compared.
const SERIAL_MARK: &str = "SERIAL";

/// The first line of every zone file this command writes: what tells its files from others.
const ZONE_HEADER: &str = "; Written by `ipamctl dns export`";

/// The first line of the `named.conf` it writes.
const CONF_HEADER: &str = "// Written by `ipamctl dns export`";

/// The largest file in `--out` that is read to compare it: anything larger is no zone of ours.
const READ_LIMIT: u64 = 256 << 20;

pub fn run(
    store: &(dyn Store + Sync),
    g: &GlobalArgs,
    command: &DnsCommand,
    out: &mut dyn Write,
) -> Result<()> {
    let DnsCommand::Export(args) = command;
    super::dhcp::no_data_form("dns export", "zone files and lists them", g)?;
    let zone = domain("--zone", &args.zone)?;
    let ns: Vec<String> = args
        .ns
        .iter()
        .map(|n| domain("--ns", n))
        .collect::<Result<_>>()?;
    let mailbox = match &args.mailbox {
        Some(m) => domain("--mailbox", m)?,
        None => format!("hostmaster.{zone}"),
    };
    let zone_dir = args.zone_dir.as_deref().map(zone_dir).transpose()?;
    let scope = super::dhcp::scope(store, g, &args.select)?;
    let mut warnings = Warnings::default();
    let zones = dns::settled(store, &scope, args.reverse_enclosing, &mut warnings);
    output::warn(&warnings);
    let (zones, stamp) = zones?;
    glue(&ns, &zone, &zones)?;
    let soa = Soa {
        ns: &ns,
        mailbox: &mailbox,
        args,
    };
    let dir = open_out(&args.out)?;
    let writes = plan(&dir, &soa, &zone, &zones, zone_dir.as_deref(), stamp)?;
    let mut report = String::new();
    for (file, text, action) in &writes {
        if *action != "unchanged" {
            beneath::write(
                &dir,
                file,
                text.as_bytes(),
                WriteMode::Replace,
                true,
                &|| None,
            )
            .map_err(|e| hostile(&args.out.join(file), e))?;
        }
        let _ = writeln!(report, "{file} {action}");
    }
    output::write(out, &report)
}

/// Refuses a name server inside the zone that no exported host is: it would have no address.
fn glue(ns: &[String], zone: &str, zones: &dns::Zones) -> Result<()> {
    for n in ns {
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
    Ok(())
}

/// Every file of the export with its text and action (`created`, `configured`, or
/// `unchanged`, not to be written), each file in `dir` looked at and its serial decided
/// before anything is written.
fn plan(
    dir: &OwnedFd,
    soa: &Soa<'_>,
    zone: &str,
    zones: &dns::Zones,
    zone_dir: Option<&str>,
    stamp: u32,
) -> Result<Vec<(String, String, &'static str)>> {
    let args = soa.args;
    let mut files = vec![(
        format!("{zone}.zone"),
        zone.to_owned(),
        forward(&zones.forward),
    )];
    for (name, records) in &zones.reverse {
        files.push((format!("{name}.zone"), name.clone(), reverse(zone, records)));
    }
    let at = |file: &str| args.out.join(file);
    let mut writes = Vec::new();
    let mut conf = format!("{CONF_HEADER}.\n");
    for (file, name, records) in &files {
        let marked = soa.render(name, records);
        let found = look(dir, file, &at(file), ZONE_HEADER)?;
        let path = match zone_dir {
            Some(d) => format!("{d}/{file}"),
            None => file.clone(),
        };
        let _ = writeln!(
            conf,
            "zone \"{name}\" {{ type primary; file \"{}\"; }};",
            quote(&path)
        );
        writes.push(match serial(found, &marked, stamp, args, &at(file))? {
            Some((number, action)) => (file.clone(), with_serial(&marked, number), action),
            None => (file.clone(), String::new(), "unchanged"),
        });
    }
    let action = match look(dir, "named.conf", &at("named.conf"), CONF_HEADER)? {
        Found::Ours { text } if text == conf => "unchanged",
        Found::Ours { .. } => "configured",
        Found::Absent => "created",
        Found::Foreign { .. } if args.replace_foreign => "configured",
        Found::Foreign { .. } => return Err(foreign(&at("named.conf"), None)),
    };
    writes.push(("named.conf".into(), conf, action));
    Ok(writes)
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

/// `--zone-dir`, without a trailing `/`: any text a `named.conf` string can hold (a control
/// character, a newline among them, is exit 2).
fn zone_dir(dir: &str) -> Result<String> {
    if let Some(c) = dir.chars().find(|c| c.is_control()) {
        return Err(Error::invalid(
            "--zone-dir",
            format!(
                "`{}` holds the control character {c:?}, which named.conf cannot quote",
                dir.escape_debug()
            ),
        ));
    }
    if dir.is_empty() {
        return Err(Error::invalid("--zone-dir", "is empty"));
    }
    Ok(match dir.trim_end_matches('/') {
        "" => "/".into(),
        d => d.into(),
    })
}

/// `s` as the inside of a `named.conf` quoted string: `\` and `"` escaped, as BIND's lexer
/// reads them.
fn quote(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"")
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
            "{ZONE_HEADER}: the serial is the state's newest change.\n\
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

fn with_serial(marked: &str, serial: u32) -> String {
    marked.replacen(
        &format!("    {SERIAL_MARK} ; serial\n"),
        &format!("    {serial} ; serial\n"),
        1,
    )
}

/// The serial written in a zone file by [`Soa::render`], and the file with it replaced by
/// the mark.
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

/// The serial of the first SOA record of a zone file anyone wrote: the third field after
/// `SOA` (after the primary server and the mailbox), comments and parentheses aside.
fn soa_serial(text: &str) -> Option<u32> {
    let mut fields = text
        .lines()
        .flat_map(|l| {
            l.split(';')
                .next()
                .unwrap_or_default()
                .split(|c: char| c.is_whitespace() || c == '(' || c == ')')
        })
        .filter(|f| !f.is_empty());
    fields.position(|f| f.eq_ignore_ascii_case("SOA"))?;
    fields.nth(2)?.parse().ok()
}

/// What a name in `--out` holds.
enum Found {
    Absent,
    /// A file this command wrote (it starts with the header).
    Ours {
        text: String,
    },
    /// Any other regular file, with its SOA serial if one can be read.
    Foreign {
        serial: Option<u32>,
    },
}

/// Reads `name` in `dir` (`path` for messages): a symlink, FIFO, device, socket,
/// directory or hard link is refused (exit 4) without being opened for reading.
fn look(dir: &OwnedFd, name: &str, path: &Path, header: &str) -> Result<Found> {
    let Some(file) = beneath::read(dir, name, READ_LIMIT).map_err(|e| hostile(path, e))? else {
        return Ok(Found::Absent);
    };
    let text = String::from_utf8_lossy(&file.bytes).into_owned();
    Ok(if text.starts_with(header) {
        Found::Ours { text }
    } else {
        Found::Foreign {
            serial: soa_serial(&text),
        }
    })
}

/// The serial and action of a zone whose file would be `marked`, given what `found` there;
/// `None` to leave it as it is.
fn serial(
    found: Found,
    marked: &str,
    stamp: u32,
    args: &DnsExportArgs,
    path: &Path,
) -> Result<Option<(u32, &'static str)>> {
    let mine = |s: u32| args.serial.unwrap_or(s);
    Ok(match found {
        Found::Absent => Some((mine(stamp), "created")),
        Found::Ours { text } => match serial_of(&text) {
            // The same records: left as they are, unless a render elsewhere (or a fresh
            // one) would serve them at a higher serial than this file.
            Some((old, was)) if was == marked && (old >= stamp || args.serial.is_some()) => None,
            Some((_, was)) if was == marked => Some((stamp, "configured")),
            // Never below what this directory served, whatever the state's clock says.
            Some((old, _)) => Some((mine(stamp.max(old.saturating_add(1))), "configured")),
            None => Some((mine(stamp), "configured")),
        },
        Found::Foreign { serial } => match (serial, args.replace_foreign) {
            (Some(old), true) => Some((mine(stamp).max(old.saturating_add(1)), "configured")),
            (serial, _) => return Err(foreign(path, Some(serial))),
        },
    })
}

/// A file in `--out` this command did not write: `serial` is `Some` for a zone file (with
/// its SOA serial, if it has one).
fn foreign(path: &Path, serial: Option<Option<u32>>) -> Error {
    let (what, hint) = match serial {
        None => (
            "is a named.conf that `ipamctl dns export` did not write".to_owned(),
            "move it aside, or add --replace-foreign to replace it",
        ),
        Some(Some(n)) => (
            format!("is a zone file that `ipamctl dns export` did not write, at serial {n}"),
            "move it aside, or add --replace-foreign to replace it with a higher serial",
        ),
        Some(None) => (
            "is a file that `ipamctl dns export` did not write, and has no SOA serial it can read, so no serial is sure to be higher".to_owned(),
            "move it aside",
        ),
    };
    Error::Conflict {
        message: format!("`{}` {what}", path.display()),
        hint: Some(hint.into()),
    }
}

/// A refusal of a path in `--out`: an I/O error as such, a symlink, special file or hard
/// link as exit 4 naming it.
fn hostile(path: &Path, why: Refused) -> Error {
    let what = match why {
        Refused::Io(e) => return Error::io(path, e),
        Refused::Symlink => "is a symlink".to_owned(),
        Refused::NotADirectory => "is not a directory".to_owned(),
        Refused::NotAFile(what) => format!("is {what}, not a regular file"),
        Refused::TooLarge(n) => format!("is larger than {n} bytes"),
        Refused::HardLink(n) => format!("has {n} names (hard links)"),
    };
    Error::Conflict {
        message: format!(
            "`{}` {what}: `dns export` reads and replaces only regular files and never follows a symlink in --out",
            path.display()
        ),
        hint: Some("remove it, or give another --out".into()),
    }
}

/// Opens `--out` (made if missing, with its parents) as a directory handle: the directory
/// itself is opened with `O_NOFOLLOW | O_DIRECTORY` beneath its parent, so a symlink or a
/// FIFO planted there is refused, never followed or opened.
fn open_out(out: &Path) -> Result<OwnedFd> {
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
    let (Some(parent), Some(name)) = (out.parent(), out.file_name()) else {
        // `/`, `.` or `..`: no name of its own that could have been planted.
        return rustix::fs::open(out, flags, Mode::empty()).map_err(|e| Error::io(out, e.into()));
    };
    let parent = if parent.as_os_str().is_empty() {
        Path::new(".")
    } else {
        parent
    };
    std::fs::create_dir_all(parent).map_err(|e| Error::io(parent, e))?;
    let up =
        rustix::fs::open(parent, flags, Mode::empty()).map_err(|e| Error::io(parent, e.into()))?;
    beneath::open_or_create_dir(&up, Path::new(name)).map_err(|e| hostile(out, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_foreign_soa_serial_is_read_across_lines_and_comments() {
        let text = "$TTL 1\n@ IN SOA ns. host. ( ; start\n 2026120601 ; serial\n 1 1 1 1 )\n";
        assert_eq!(soa_serial(text), Some(2_026_120_601));
        assert_eq!(soa_serial("@ 300 IN soa a. b. 7 1 1 1 1\n"), Some(7));
        assert_eq!(soa_serial("; SOA\nwww IN A 192.0.2.1\n"), None);
    }

    #[test]
    fn named_conf_strings_escape_quotes_and_backslashes() {
        assert_eq!(quote(r#"a"b\c"#), r#"a\"b\\c"#);
        assert!(zone_dir("a\nb").is_err());
        assert_eq!(zone_dir("/var/lib/bind/").unwrap(), "/var/lib/bind");
        assert_eq!(zone_dir("/").unwrap(), "/");
    }
}
