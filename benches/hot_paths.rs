//! In-process benchmarks of the hot paths of `allocate`: candidate iteration, the free-address
//! search, owner keys, manifest encode/decode, and the owner look-up against a real state
//! directory of 50,000 allocations (listing, stat-validated scan, hint, uid query).
//!
//! `cargo bench --bench hot_paths`; `bench/run` measures whole processes instead.

use std::collections::HashSet;
use std::fs;
use std::hint::black_box;
use std::net::IpAddr;
use std::path::Path;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use ipamctl::model::candidates::Candidates;
use ipamctl::model::{AllocationManifest, Namespace, Owner, PoolName, PoolSpec, Uid};
use ipamctl::model::{PoolRef, pool_addresses};
use ipamctl::store::fs::FsStore;
use ipamctl::store::{ObjectKind, Objects, Queries};
use ipamctl::yaml;

/// Allocations in the state-directory fixture, as in the issue's largest case.
const TAKEN: u32 = 50_000;
/// The fixture's owner whose index hint is written (the idempotent path).
const HELD: u32 = TAKEN / 2;

fn slash16() -> PoolSpec {
    serde_json::from_str(r#"{"cidr":"10.42.0.0/16","kind":"private"}"#)
        .expect("a literal pool spec parses")
}

fn pool_name() -> PoolName {
    PoolName::new("vpc-main").expect("a literal pool name is valid")
}

fn namespace() -> Namespace {
    Namespace::new("acme/prod").expect("a literal namespace is valid")
}

/// The owner of the `i`-th allocation of the fixture, with a UUID-shaped uid.
fn owner(i: u32) -> Owner {
    let uid = format!("{i:08x}-5b7f-4a1e-9a39-2f0c1f7e9b10");
    Owner::parse(
        &format!("VirtualMachine/vm-{i}/0"),
        Some(Uid::new(&uid).expect("a UUID-shaped uid is valid")),
    )
    .expect("a VirtualMachine owner name is valid")
}

/// The lowest `n` candidates of the /16, as the generator allocates them.
fn first_candidates(n: u32) -> Vec<IpAddr> {
    Candidates::of_pool(&slash16())
        .iter()
        .take(n as usize)
        .collect()
}

fn candidates(c: &mut Criterion) {
    let mut g = c.benchmark_group("candidates");
    let spec = slash16();
    // Every address passes through `black_box`, so the walk cannot be folded into a count.
    g.bench_function("iterate_slash16", |b| {
        b.iter(|| {
            Candidates::of_pool(black_box(&spec)).iter().for_each(|a| {
                black_box(a);
            })
        })
    });
    g.bench_function("count_slash16", |b| {
        b.iter(|| Candidates::of_pool(black_box(&spec)).count())
    });
    g.finish();
}

fn free_search(c: &mut Criterion) {
    let mut g = c.benchmark_group("free_search_50k_taken");
    let spec = slash16();
    let taken_list = first_candidates(TAKEN);
    let taken: HashSet<IpAddr> = taken_list.iter().copied().collect();
    // What `allocate` does: walk the candidates, skipping the taken set.
    g.bench_function("hashset_scan", |b| {
        b.iter(|| {
            Candidates::of_pool(&spec)
                .iter()
                .find(|a| !taken.contains(a))
        })
    });
    // The interval alternative: cut taken addresses out of the spans, take the first.
    g.bench_function("without_then_first", |b| {
        b.iter(|| {
            Candidates::of_pool(&spec)
                .without(taken_list.iter().copied())
                .iter()
                .next()
        })
    });
    let pool = pool_name();
    let names: Vec<String> = taken_list
        .iter()
        .map(|&a| ipamctl::model::allocation_name(&pool, a))
        .collect();
    // Turning a listing into the taken set: parse every name.
    g.bench_function("taken_set_from_names", |b| {
        b.iter(|| pool_addresses(black_box(&names), &pool).collect::<HashSet<_>>())
    });
    g.finish();
}

fn owners(c: &mut Criterion) {
    let mut g = c.benchmark_group("owner");
    let o = owner(12_345);
    g.bench_function("key", |b| b.iter(|| black_box(&o).key()));
    let uid = "0f8fad5b-d9cb-469f-a165-70867728950e";
    g.bench_function("parse", |b| {
        b.iter(|| {
            Owner::parse(
                black_box("VirtualMachine/web-01/0"),
                Some(Uid::new(uid).expect("valid")),
            )
        })
    });
    g.finish();
}

fn manifests(c: &mut Criterion) {
    let mut g = c.benchmark_group("manifest");
    let ns = namespace();
    let m = AllocationManifest::new(
        &pool_name(),
        Some(&ns),
        "10.42.1.7".parse().expect("literal"),
        owner(7),
    );
    let text = yaml::encode(&m);
    g.bench_function("encode_allocation", |b| {
        b.iter(|| yaml::encode(black_box(&m)))
    });
    g.bench_function("decode_allocation", |b| {
        b.iter(|| yaml::decode_allocation(black_box(&text)))
    });
    g.finish();
}

/// A state directory holding `TAKEN` allocations and a complete owner index, like one that
/// has served commands for a while; owner [`HELD`] has a hint.
struct Fixture {
    _dir: tempfile::TempDir,
    store: FsStore,
    pool: PoolRef,
}

fn fixture() -> Fixture {
    // Same filesystem as the build (not a tmpfs /tmp), where a state directory would live.
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("temp dir");
    FsStore::init(dir.path()).expect("init");
    let store = FsStore::open(dir.path()).expect("open");
    let ns = namespace();
    let pool = pool_name();
    let pool_yaml = "apiVersion: pivirt.hu/v1\nkind: IPAMPool\nmetadata:\n  name: vpc-main\n  namespace: acme/prod\nspec:\n  cidr: 10.42.0.0/16\n  kind: private\n";
    store
        .create(
            ObjectKind::Pool,
            Some(&ns),
            "vpc-main",
            pool_yaml.as_bytes(),
        )
        .expect("pool");
    let alloc_dir = dir
        .path()
        .join(FsStore::relative_dir(ObjectKind::Allocation, Some(&ns)));
    fs::create_dir_all(&alloc_dir).expect("allocations dir");
    let addrs = first_candidates(TAKEN);
    write_allocations(&alloc_dir, &pool, &ns, &addrs);
    let pool_ref = PoolRef {
        namespace: Some(ns),
        name: pool,
    };
    // Files are recorded in the index once they are older than its racy window; then one
    // look-up reads them all and records them, and one for the held owner writes its hint.
    std::thread::sleep(Duration::from_millis(200));
    let held = ipamctl::engine::allocate::lookup_owner(
        &store,
        &pool_ref,
        &owner(HELD),
        &mut Default::default(),
    )
    .expect("lookup");
    assert_eq!(held.map(|m| m.spec.address), Some(addrs[HELD as usize]));
    Fixture {
        _dir: dir,
        store,
        pool: pool_ref,
    }
}

fn write_allocations(dir: &Path, pool: &PoolName, ns: &Namespace, addrs: &[IpAddr]) {
    for (i, &a) in (0u32..).zip(addrs) {
        let m = AllocationManifest::new(pool, Some(ns), a, owner(i));
        fs::write(
            dir.join(format!("{}.yaml", m.metadata.name)),
            yaml::encode(&m),
        )
        .expect("write allocation");
    }
}

fn state_dir(c: &mut Criterion) {
    let f = fixture();
    let ns = f.pool.namespace.as_ref();
    let mut g = c.benchmark_group("state_50k");
    g.bench_function("list_allocations", |b| {
        b.iter(|| f.store.list(ObjectKind::Allocation, ns).expect("list"))
    });
    // `list --uid` / `release --uid`: the same scan, reading only the uid's file.
    let filter = ipamctl::model::OwnerFilter {
        uid: owner(HELD).uid().cloned(),
        ..Default::default()
    };
    g.bench_function("find_by_uid", |b| {
        b.iter(|| f.store.find_allocations(ns, None, &filter).expect("find"))
    });
    // The owner look-up `allocate` makes for an owner holding nothing: listing, index, and
    // a stat of every allocation.
    let new_owner = owner(TAKEN + 1);
    g.bench_function("lookup_new_owner", |b| {
        b.iter(|| {
            ipamctl::engine::allocate::lookup_owner(
                &f.store,
                &f.pool,
                &new_owner,
                &mut Default::default(),
            )
            .expect("lookup")
        })
    });
    // The idempotent path: hint, then one allocation file.
    let held = owner(HELD);
    g.bench_function("lookup_held_owner", |b| {
        b.iter(|| {
            ipamctl::engine::allocate::lookup_owner(
                &f.store,
                &f.pool,
                &held,
                &mut Default::default(),
            )
            .expect("lookup")
        })
    });
    g.finish();
}

fn config() -> Criterion {
    Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
}

criterion_group! {
    name = benches;
    config = config();
    targets = candidates, free_search, owners, manifests, state_dir
}
criterion_main!(benches);
