//! `ipamctl apply`: create or update pools and subnets from YAML, all or nothing.

use std::collections::HashSet;
use std::io::{Read, Write};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};

use crate::cli::{ApplyArgs, GlobalArgs};
use crate::error::{Error, Result};
use crate::model::PoolRef;

use crate::cli::output::{self, Action, Change, Named};
use crate::engine::apply::{Applied, Manifests};
use crate::store::Store;
use crate::yaml;

/// Reads one `-f` argument (`-` = stdin), bounded like any manifest. Anything but a regular
/// file (a directory, FIFO, socket or device) is refused unread.
fn read_input(file: &str) -> Result<String> {
    let mut bytes = Vec::new();
    let limit = 16 * yaml::MAX_MANIFEST_BYTES;
    let read = if file == "-" {
        std::io::stdin().take(limit + 1).read_to_end(&mut bytes)
    } else {
        open_regular(file, "-f -")?
            .take(limit + 1)
            .read_to_end(&mut bytes)
    };
    read.map_err(|e| Error::io(file, e))?;
    if bytes.len() as u64 > limit {
        return Err(Error::invalid(
            file,
            format!("is larger than {limit} bytes"),
        ));
    }
    String::from_utf8(bytes).map_err(|_| Error::invalid(file, "is not UTF-8 text"))
}

/// Opens `file` for reading if it is a regular file (symlinks followed: the path is the
/// user's own, not one inside the state directory). `stdin` is how the command reads
/// stdin instead (`-f -`), which a FIFO's error suggests.
pub(super) fn open_regular(file: &str, stdin: &str) -> Result<std::fs::File> {
    // O_NONBLOCK: opening a FIFO without a writer would otherwise wait for one. O_NOCTTY: a
    // terminal device must not become the controlling terminal just by being opened. Neither
    // changes how a regular file reads.
    let opened = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(file);
    let f = match opened {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(Error::invalid(file, "no such file"));
        }
        // open(2) refuses a socket with ENXIO. The stat below only names what it is for the
        // message; nothing is read from what it describes.
        Err(e) if e.raw_os_error() == Some(libc::ENXIO) => {
            return Err(match std::fs::metadata(file) {
                Ok(meta) if !meta.is_file() => not_regular(file, meta.file_type(), stdin),
                _ => Error::io(file, e),
            });
        }
        Err(e) => return Err(Error::io(file, e)),
    };
    // The type of what was opened, not of what the path named a moment earlier.
    let meta = f.metadata().map_err(|e| Error::io(file, e))?;
    if meta.is_file() {
        Ok(f)
    } else {
        Err(not_regular(file, meta.file_type(), stdin))
    }
}

/// `FILE: is a FIFO, not a regular file`, and so on for each kind of special file.
fn not_regular(file: &str, kind: std::fs::FileType, stdin: &str) -> Error {
    let what = if kind.is_dir() {
        "a directory"
    } else if kind.is_fifo() {
        // Read as a file, a pipe without its writer yet would be an empty input, and waiting
        // for one a wait without end: stdin is where a pipe goes.
        return Error::Usage {
            message: format!("{file}: is a FIFO, not a regular file"),
            hint: Some(format!(
                "to read from a pipe, give `{stdin}` and the pipe on stdin (`cmd | ipamctl … {stdin}`)"
            )),
        };
    } else if kind.is_socket() {
        "a socket"
    } else if kind.is_char_device() {
        "a character device"
    } else if kind.is_block_device() {
        "a block device"
    } else {
        return Error::invalid(file, "is not a regular file");
    };
    Error::invalid(file, format!("is {what}, not a regular file"))
}

impl Named for Applied<'_> {
    fn resource(&self) -> String {
        match self {
            Applied::Pool(p) => p.resource(),
            Applied::Subnet(s) => s.resource(),
            Applied::Quota(q) => format!("quota/{}", q.metadata.name),
        }
    }
}

/// Parses every document of every file; nothing is written if any is invalid.
fn parse_all(files: &[String]) -> Result<Manifests> {
    let mut input = Manifests::default();
    let mut seen = HashSet::new();
    let mut seen_subnets = HashSet::new();
    let mut seen_quotas = HashSet::new();
    for file in files {
        let origin = if file == "-" {
            "<stdin>"
        } else {
            file.as_str()
        };
        let text = read_input(file)?;
        for (i, doc) in yaml::decode_documents(&text)
            .map_err(|e| Error::invalid(origin, e))?
            .into_iter()
            .enumerate()
        {
            let pool = match doc {
                yaml::Document::Pool(pool) => *pool,
                yaml::Document::Subnet(subnet) => {
                    let key = (
                        subnet.metadata.namespace.clone(),
                        subnet.metadata.name.clone(),
                    );
                    if !seen_subnets.insert(key) {
                        return Err(Error::invalid(
                            origin,
                            format!(
                                "document {}: subnet `{}` appears twice in the input",
                                i + 1,
                                subnet.metadata.name
                            ),
                        ));
                    }
                    input.subnets.push(*subnet);
                    continue;
                }
                yaml::Document::Quota(quota) => {
                    let name = &quota.metadata.name;
                    if !seen_quotas.insert((quota.metadata.namespace.clone(), name.clone())) {
                        let twice = format!("quota `{name}` appears twice in the input");
                        return Err(Error::invalid(
                            origin,
                            format!("document {}: {twice}", i + 1),
                        ));
                    }
                    input.quotas.push(*quota);
                    continue;
                }
                yaml::Document::Allocation => {
                    return Err(Error::invalid(
                        origin,
                        format!(
                            "document {}: IPAllocation objects are not applied; they are made with `ipamctl allocate`",
                            i + 1
                        ),
                    ));
                }
            };
            let key = (pool.metadata.namespace.clone(), pool.metadata.name.clone());
            if !seen.insert(key) {
                return Err(Error::invalid(
                    origin,
                    format!(
                        "document {}: pool `{}` appears twice in the input",
                        i + 1,
                        PoolRef {
                            namespace: pool.metadata.namespace.clone(),
                            name: pool.name(),
                        }
                    ),
                ));
            }
            input.pools.push(pool);
        }
    }
    Ok(input)
}

pub fn run(store: &dyn Store, g: &GlobalArgs, args: &ApplyArgs, out: &mut dyn Write) -> Result<()> {
    let input = parse_all(&args.file)?;
    let mut warnings = crate::engine::warning::Warnings::default();
    let plan = crate::engine::apply::apply(store, &input, args.dry_run, &mut warnings)?;
    output::warn(&warnings);
    let changes: Vec<Change<Applied<'_>>> = plan
        .into_iter()
        .map(|(object, put)| Change::new(object, Action::from(put).planned(args.dry_run)))
        .collect();
    output::write_changes(out, g.output, &changes, false)
}
