//! `ipamctl apply`: create or update pools and subnets from YAML, all or nothing.

use std::collections::{BTreeSet, HashSet};
use std::io::{Read, Write};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};

use crate::cli::{ApplyArgs, GlobalArgs};
use crate::error::{Error, Result};
use crate::model::PoolRef;
use serde::Serialize;

use crate::cli::output::{self, Action, Change, Named};
use crate::engine::subnet::Put;
use crate::model::candidates::Candidates;
use crate::model::subnet::SubnetManifest;
use crate::model::{Namespace, PoolKind, PoolManifest, PoolName};
use crate::store::{self, LockMode, ObjectKind, PoolLock, ScopeLock, Store};
use crate::yaml;

/// Reads one `-f` argument (`-` = stdin), bounded like any manifest. Anything but a regular
/// file (a directory, FIFO, socket or device) is refused unread.
fn read_input(file: &str) -> Result<String> {
    let mut bytes = Vec::new();
    let limit = 16 * yaml::MAX_MANIFEST_BYTES;
    let read = if file == "-" {
        std::io::stdin().take(limit + 1).read_to_end(&mut bytes)
    } else {
        open_regular(file)?.take(limit + 1).read_to_end(&mut bytes)
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
/// user's own, not one inside the state directory).
fn open_regular(file: &str) -> Result<std::fs::File> {
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
                Ok(meta) if !meta.is_file() => not_regular(file, meta.file_type()),
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
        Err(not_regular(file, meta.file_type()))
    }
}

/// `FILE: is a FIFO, not a regular file`, and so on for each kind of special file.
fn not_regular(file: &str, kind: std::fs::FileType) -> Error {
    let what = if kind.is_dir() {
        "a directory"
    } else if kind.is_fifo() {
        "a FIFO"
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

/// The documents of an `apply` input: pools, then subnets.
#[derive(Default)]
struct Input {
    pools: Vec<PoolManifest>,
    subnets: Vec<SubnetManifest>,
}

/// A pool or a subnet, as `apply` reports it.
#[derive(Serialize)]
#[serde(untagged)]
enum Applied<'a> {
    Pool(&'a PoolManifest),
    Subnet(&'a SubnetManifest),
}

impl Named for Applied<'_> {
    fn resource(&self) -> String {
        match self {
            Applied::Pool(p) => p.resource(),
            Applied::Subnet(s) => s.resource(),
        }
    }
}

/// Parses every document of every file; nothing is written if any is invalid.
fn parse_all(files: &[String]) -> Result<Input> {
    let mut input = Input::default();
    let mut seen = HashSet::new();
    let mut seen_subnets = HashSet::new();
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
                        pool_ref(&pool)
                    ),
                ));
            }
            input.pools.push(pool);
        }
    }
    Ok(input)
}

fn pool_ref(pool: &PoolManifest) -> PoolRef {
    PoolRef {
        namespace: pool.metadata.namespace.clone(),
        name: pool.name(),
    }
}

/// The existing manifest of `pool`, if any.
fn existing(store: &dyn Store, pool: &PoolRef) -> Result<Option<PoolManifest>> {
    match crate::store::read::load_pool(store, pool) {
        Ok(m) => Ok(Some(m)),
        Err(Error::NotFound { .. }) => Ok(None),
        Err(e) => Err(e),
    }
}

/// Refuses a public pool overlapping another public pool (existing or in the input).
fn check_overlaps(store: &dyn Store, incoming: &[PoolManifest]) -> Result<()> {
    let incoming_public: Vec<&PoolManifest> = incoming
        .iter()
        .filter(|p| p.spec.kind == PoolKind::Public)
        .collect();
    if incoming_public.is_empty() {
        return Ok(());
    }
    let replaced: HashSet<&str> = incoming_public
        .iter()
        .map(|p| p.metadata.name.as_str())
        .collect();
    let mut others: Vec<PoolManifest> = Vec::new();
    for entry in store.list(ObjectKind::Pool, None)? {
        if replaced.contains(entry.as_str()) {
            continue;
        }
        let Ok(name) = crate::model::PoolName::new(&entry) else {
            continue;
        };
        if let Some(m) = existing(
            store,
            &PoolRef {
                namespace: None,
                name,
            },
        )? {
            others.push(m);
        }
    }
    for (i, pool) in incoming_public.iter().enumerate() {
        let clash = others
            .iter()
            .chain(incoming_public[..i].iter().copied())
            .find(|o| {
                o.spec.cidr.contains(&pool.spec.cidr.network())
                    || pool.spec.cidr.contains(&o.spec.cidr.network())
            });
        if let Some(other) = clash {
            return Err(Error::conflict(format!(
                "public pool `{}` ({}) overlaps public pool `{}` ({}); nothing applied",
                pool.metadata.name, pool.spec.cidr, other.metadata.name, other.spec.cidr
            )));
        }
    }
    Ok(())
}

/// Refuses an update that would strand an allocation (outside the new prefix, on its
/// network/broadcast address, gateway or an exclude), naming the allocations.
fn check_allocations(store: &dyn Store, pool: &PoolManifest) -> Result<()> {
    let pref = pool_ref(pool);
    let candidates = Candidates::of_pool(&pool.spec);
    let ns = pref.namespace.as_ref();
    let names = store.list(ObjectKind::Allocation, ns)?;
    let mut stranded: Vec<_> = crate::model::pool_addresses(&names, &pref.name)
        .filter(|addr| !candidates.contains(*addr))
        .collect();
    // The listing comes in directory order; name them by address so the message is stable.
    stranded.sort();
    let stranded: Vec<String> = stranded
        .into_iter()
        .map(|addr| {
            format!(
                "{} ({addr})",
                crate::model::allocation_name(&pref.name, addr)
            )
        })
        .collect();
    if stranded.is_empty() {
        return Ok(());
    }
    let shown: Vec<_> = stranded.iter().take(10).cloned().collect();
    let more = stranded.len().saturating_sub(shown.len());
    Err(Error::Conflict {
        message: format!(
            "updating pool `{pref}` would leave {} allocation{} outside its candidates: {}{}; nothing applied",
            stranded.len(),
            if stranded.len() == 1 { "" } else { "s" },
            shown.join(", "),
            if more > 0 {
                format!(" and {more} more")
            } else {
                String::new()
            }
        ),
        hint: Some("release those allocations first, or keep their addresses in the pool".into()),
    })
}

pub fn run(store: &dyn Store, g: &GlobalArgs, args: &ApplyArgs, out: &mut dyn Write) -> Result<()> {
    let input = parse_all(&args.file)?;
    // One unit of work: on a database, all pools and subnets in one transaction.
    let plan = if args.dry_run {
        write_all(store, &input, true)?
    } else {
        store::atomically(store, || write_all(store, &input, false))?
    };
    let changes: Vec<Change<Applied<'_>>> = plan
        .into_iter()
        .map(|(object, action)| Change::new(object, action.planned(args.dry_run)))
        .collect();
    output::write_changes(out, g.output, &changes, false)
}

/// Checks and (unless `dry_run`) writes `pools` under their locks; returns each pool with
/// what was done to it.
fn write_all<'p>(
    store: &dyn Store,
    input: &'p Input,
    dry_run: bool,
) -> Result<Vec<(Applied<'p>, Action)>> {
    let pools = &input.pools;
    // Lock every scope written to, then every pool, in a fixed order (no deadlock between
    // concurrent applies). Held until all writes are done. A dry run writes nothing and
    // takes no lock, so that it also answers on a read-only state directory.
    let scopes: BTreeSet<Option<Namespace>> =
        pools.iter().map(|p| p.metadata.namespace.clone()).collect();
    let mut scope_locks: Vec<ScopeLock> = Vec::new();
    let mut locks: Vec<PoolLock> = Vec::new();
    if !dry_run {
        for ns in &scopes {
            scope_locks.push(store.lock_scope(ns.as_ref())?);
        }
        // The pools of the subnets too: a subnet is checked and written under its pool's lock.
        let order: BTreeSet<(Option<Namespace>, PoolName)> = pools
            .iter()
            .map(|p| (p.metadata.namespace.clone(), p.name()))
            .chain(
                input
                    .subnets
                    .iter()
                    .map(|s| (s.metadata.namespace.clone(), s.spec.pool.clone())),
            )
            .collect();
        for (ns, pool) in &order {
            locks.push(store.lock_pool(ns.as_ref(), pool, LockMode::Exclusive)?);
        }
    }
    check_overlaps(store, pools)?;
    let mut plan = Vec::new();
    for pool in pools {
        let action = match existing(store, &pool_ref(pool))? {
            None => Action::Created,
            Some(old) if old == *pool => Action::Unchanged,
            Some(_) => {
                check_allocations(store, pool)?;
                Action::Configured
            }
        };
        plan.push((Applied::Pool(pool), action));
    }
    for (applied, action) in &plan {
        let Applied::Pool(pool) = applied else {
            continue;
        };
        if *action != Action::Unchanged && !dry_run {
            let ns = pool.metadata.namespace.as_ref();
            store.replace(
                ObjectKind::Pool,
                ns,
                &pool.metadata.name,
                yaml::encode(pool).as_bytes(),
            )?;
            // A crash between two pools leaves the first written: each file is whole, and
            // applying the same input again converges (`unchanged`, then `created`).
            failpoint!("apply-between-pools");
        }
    }
    // Subnets after their pools: a subnet may be of a pool the same input creates. A dry
    // run checks them against the pools as stored.
    for subnet in &input.subnets {
        let created_here = pools.iter().any(|p| {
            p.metadata.namespace == subnet.metadata.namespace && p.name() == subnet.spec.pool
        });
        let action = if dry_run && created_here && existing(store, &subnet.pool())?.is_none() {
            Action::Created
        } else {
            match crate::engine::subnet::put_locked(store, subnet, true, dry_run)? {
                Put::Created => Action::Created,
                Put::Configured => Action::Configured,
                Put::Unchanged => Action::Unchanged,
            }
        };
        plan.push((Applied::Subnet(subnet), action));
    }
    drop(locks);
    Ok(plan)
}
