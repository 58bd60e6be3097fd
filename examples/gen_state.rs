//! Writes a realistic state directory for benchmarks: one private pool holding N allocations
//! of VirtualMachine owners, the lowest N candidates, written straight into the layout.
//!
//! ```text
//! cargo run --release --example gen_state -- DIR N [--pool vpc-main] [-n acme/prod] [--cidr 10.42.0.0/16 or fd00:42::/64]
//! ```
//!
//! Only manifests are written, never the derived `.index/`: the first command run on the
//! directory pays the index rebuild, as the first command after a `git clone` would, so a
//! benchmark must warm up before it times. Allocation files are written without `fsync`
//! (a benchmark fixture needs no durability); the pool goes through [`Store::create`].
//! Owners and uids are a pure function of the allocation's index, so two runs with the
//! same arguments write the same bytes.
//!
//! With `--copy FILE` (`-` for stdout) the allocations go there instead, as rows for
//! PostgreSQL's `COPY ipamctl.allocations (namespace, pool, address, owner_kind, owner_name,
//! owner_uid, manifest, creation_timestamp) FROM STDIN` (text format), each manifest the bytes the file store
//! would have written; the pool is still written to DIR, for `apply`.

use std::collections::BTreeMap;
use std::fs;
use std::io::{BufWriter, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use clap::Parser;
use ipamctl::model::candidates::Candidates;
use ipamctl::model::mac::Mac;
use ipamctl::model::{
    API_VERSION, AllocationManifest, Metadata, Namespace, Owner, OwnerRef, POOL_KIND, PoolKind,
    PoolManifest, PoolName, PoolSpec, Timestamp, Uid, parse_net,
};
use ipamctl::store::fs::FsStore;
use ipamctl::store::{ObjectKind, Objects};
use ipamctl::yaml;

/// Generate a benchmark state directory.
#[derive(Debug, Parser)]
struct Args {
    /// The state directory to create; must not exist or be empty.
    dir: PathBuf,
    /// How many allocations to write.
    count: u64,
    /// The pool's name.
    #[arg(long, default_value = "vpc-main")]
    pool: String,
    /// The pool's namespace (it is a private pool).
    #[arg(short, long, default_value = "acme/prod")]
    namespace: String,
    /// The pool's prefix.
    #[arg(long, default_value = "10.42.0.0/16")]
    cidr: String,
    /// Give every allocation a MAC, `52:54:00` and the allocation's index (as `allocate
    /// --mac` would store it), for the DHCP export's benchmark.
    #[arg(long)]
    macs: bool,
    /// Write the allocations as `COPY` rows to this file (`-`: stdout) instead of into DIR.
    #[arg(long)]
    copy: Option<PathBuf>,
}

/// The creation time of every generated allocation (2026-12-01T00:00:00Z).
const CLAIMED_AT: u64 = 1_796_083_200;

/// splitmix64: a tiny, seedable generator, so fixtures are reproducible without a dependency.
fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A version-4-shaped UUID derived from `seed`.
fn uuid_from(seed: u64) -> Uid {
    let mut state = seed;
    let mut bytes = [0u8; 16];
    bytes[..8].copy_from_slice(&splitmix64(&mut state).to_le_bytes());
    bytes[8..].copy_from_slice(&splitmix64(&mut state).to_le_bytes());
    let uuid = uuid::Builder::from_random_bytes(bytes).into_uuid();
    Uid::new(&uuid.to_string()).expect("a UUID is a valid uid")
}

fn pool_manifest(name: &PoolName, ns: &Namespace, cidr: ipnet::IpNet) -> PoolManifest {
    PoolManifest {
        api_version: API_VERSION.into(),
        kind: POOL_KIND.into(),
        metadata: Metadata {
            name: name.to_string(),
            namespace: Some(ns.clone()),
            creation_timestamp: None,
            deletion_timestamp: None,
            labels: BTreeMap::new(),
            annotations: BTreeMap::new(),
            owner_refs: vec![OwnerRef {
                kind: "VPC".into(),
                uid: uuid_from(u64::MAX).to_string(),
                name: None,
                controller: Some(true),
            }],
        },
        spec: PoolSpec {
            cidr,
            kind: PoolKind::Private,
            prefix_lengths: None,
            gateway: None,
            exclude: Vec::new(),
            zone: None,
            reuse_after: None,
            mac_prefix: None,
            pick: Default::default(),
            dhcp: Default::default(),
        },
    }
}

fn run(args: &Args) -> Result<(), String> {
    let pool = PoolName::new(&args.pool)?;
    let ns = Namespace::new(&args.namespace)?;
    let cidr = parse_net(&args.cidr)?;
    if fs::read_dir(&args.dir).is_ok_and(|mut d| d.next().is_some()) {
        return Err(format!(
            "`{}` exists and is not empty; give a new directory",
            args.dir.display()
        ));
    }
    let manifest = pool_manifest(&pool, &ns, cidr);
    let candidates = Candidates::of_pool(&manifest.spec);
    if u128::from(args.count) > candidates.count() {
        return Err(format!(
            "pool {cidr} has {} candidates; cannot hold {} allocations",
            candidates.count(),
            args.count
        ));
    }

    FsStore::init(&args.dir).map_err(|e| e.to_string())?;
    let store = FsStore::open(&args.dir).map_err(|e| e.to_string())?;
    store
        .create(
            ObjectKind::Pool,
            Some(&ns),
            pool.as_str(),
            yaml::encode(&manifest).as_bytes(),
        )
        .map_err(|e| e.to_string())?;

    let started = Instant::now();
    let allocations = (0..args.count).zip(candidates.iter()).map(|(i, address)| {
        let owner = Owner::parse(&format!("VirtualMachine/vm-{i}/0"), Some(uuid_from(i)))?;
        let mut m = AllocationManifest::new(&pool, Some(&ns), address, owner);
        // As a claim writes it; fixed, so that fixtures are reproducible.
        m.metadata.creation_timestamp = Some(Timestamp::from_secs(CLAIMED_AT));
        if args.macs {
            let [_, _, _, _, _, a, b, c] = i.to_be_bytes();
            m.spec.mac = Some(Mac::parse(&format!("52:54:00:{a:02x}:{b:02x}:{c:02x}"))?);
        }
        Ok::<_, String>(m)
    });
    let dir = match &args.copy {
        Some(file) => {
            let out: Box<dyn Write> = if file.as_os_str() == "-" {
                Box::new(std::io::stdout().lock())
            } else {
                Box::new(fs::File::create(file).map_err(|e| format!("{}: {e}", file.display()))?)
            };
            let mut out = BufWriter::new(out);
            for allocation in allocations {
                copy_row(&mut out, &ns, &allocation?)
                    .map_err(|e| format!("{}: {e}", file.display()))?;
            }
            out.flush()
                .map_err(|e| format!("{}: {e}", file.display()))?;
            file.clone()
        }
        None => {
            let dir = args
                .dir
                .join(FsStore::relative_dir(ObjectKind::Allocation, Some(&ns)));
            fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
            for allocation in allocations {
                let allocation = allocation?;
                let path = dir.join(format!("{}.yaml", allocation.metadata.name));
                fs::write(&path, yaml::encode(&allocation))
                    .map_err(|e| format!("{}: {e}", path.display()))?;
            }
            dir
        }
    };
    eprintln!(
        "wrote {} allocations of pool `{ns}/{pool}` ({cidr}) to {} in {:.1} s",
        args.count,
        dir.display(),
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// One row of `COPY ipamctl.allocations (namespace, pool, address, owner_kind, owner_name,
/// owner_uid, manifest, creation_timestamp)` in text format: the columns the PostgreSQL store's claim inserts.
/// Names and uids hold no tab, newline or backslash (the newtypes refuse them).
fn copy_row(
    out: &mut impl Write,
    ns: &Namespace,
    allocation: &AllocationManifest,
) -> std::io::Result<()> {
    let owner = &allocation.spec.owner;
    let uid = owner.uid().map_or("", |u| u.as_str());
    write!(
        out,
        "{ns}\t{}\t{}\t{}\t{}\t{uid}\t\\\\x",
        allocation.spec.pool,
        allocation.spec.address,
        owner.kind().as_str(),
        owner.name(),
    )?;
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let hex: Vec<u8> = yaml::encode(allocation)
        .bytes()
        .flat_map(|b| [HEX[usize::from(b >> 4)], HEX[usize::from(b & 15)]])
        .collect();
    out.write_all(&hex)?;
    match allocation.metadata.creation_timestamp {
        Some(at) => writeln!(out, "\t{at}"),
        None => writeln!(out, "\t\\N"),
    }
}

fn main() -> ExitCode {
    match run(&Args::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("gen_state: error: {e}");
            ExitCode::FAILURE
        }
    }
}
