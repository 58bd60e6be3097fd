//! The caller's scope on a real state directory (a copy of `testdata/populated`): a token
//! of `acme/dev` claims, releases and lists only there; outside it every path answers
//! "not found" with the message of a missing object and no hint, and writes nothing.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

use super::*;
use crate::engine::request::{
    AllocateInput, AllocateRequest, ReleaseInput, ReleaseRequest, SelectInput,
};
use crate::model::{PoolName, PoolRef, SubnetName};
use crate::store::Store;
use crate::store::registry::{Config, Location};

/// A copy of the `populated` fixture and the store on it.
fn populated() -> (tempfile::TempDir, Box<dyn Store + Sync>) {
    let dir = tempfile::tempdir().unwrap();
    let from = Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/populated");
    copy(&from, dir.path());
    let config = Config {
        workers: 1,
        warn: &|_| {},
        long_lived: false,
    };
    let store =
        crate::store::registry::open(&Location::Dir(Some(dir.path().to_owned())), &config).unwrap();
    (dir, store)
}

fn copy(from: &Path, to: &Path) {
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            std::fs::create_dir_all(&target).unwrap();
            copy(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

/// Every file under `root` but ipamctl's own dot-files (locks, index), with its bytes.
fn files(root: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    fn walk(dir: &Path, out: &mut BTreeMap<PathBuf, Vec<u8>>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let entry = entry.unwrap();
            let name = entry.file_name().into_string().unwrap();
            if entry.file_type().unwrap().is_dir() {
                walk(&entry.path(), out);
            } else if !name.starts_with(".ipamctl-")
                && !name.ends_with(".lock")
                && !name.starts_with(".index")
            {
                out.insert(entry.path(), std::fs::read(entry.path()).unwrap());
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(root, &mut out);
    out.retain(|p, _| {
        let rel = p.strip_prefix(root).unwrap();
        rel.starts_with("namespaces") || rel.starts_with("cluster")
    });
    out.retain(|p, _| !p.file_name().unwrap().to_string_lossy().starts_with('.'));
    out
}

fn ns(name: &str) -> Namespace {
    Namespace::new(name).unwrap()
}

fn dev(verbs: &[Verb]) -> Scope {
    Scope::token(
        vec![Pattern::parse("acme/dev").unwrap()],
        verbs.to_vec(),
        false,
    )
}

fn allocate(pool: &str, namespace: &str, owner: &str) -> AllocateInput {
    AllocateInput {
        pools: vec![pool.into()],
        namespace: Some(namespace.into()),
        owner: Some(owner.into()),
        ..AllocateInput::default()
    }
}

/// `result`'s not-found message, asserting it is one without a hint.
#[track_caller]
fn not_found<T: std::fmt::Debug>(result: Result<T>) -> String {
    match result {
        Err(Error::NotFound {
            message,
            hint: None,
        }) => message,
        other => panic!("expected a not-found error without a hint, got {other:?}"),
    }
}

#[test]
fn a_token_claims_in_its_namespace_only_and_outside_is_a_missing_pool() {
    let (dir, store) = populated();
    let scope = dev(&[Verb::Read, Verb::Claim]);
    let before = files(dir.path());
    let prod = AllocateRequest::new(
        &allocate("vpc-main", "acme/prod", "VirtualMachine/x/0"),
        &scope,
    )
    .unwrap()
    .run(&*store);
    assert_eq!(
        not_found(prod.result),
        "pool `vpc-main` not found (in namespace `acme/prod`)"
    );
    // A pool nobody has, in its own namespace: the same words, and no hint naming the
    // namespaces that do have one.
    let missing = AllocateRequest::new(
        &allocate("vpc-main", "acme/dev", "VirtualMachine/x/0"),
        &scope,
    )
    .unwrap()
    .run(&*store);
    assert_eq!(
        not_found(missing.result),
        "pool `vpc-main` not found (in namespace `acme/dev`)"
    );
    // Public pools are the cluster scope's.
    let zone = AllocateRequest::new(
        &AllocateInput {
            zone: Some("zone-a".into()),
            owner: Some("FloatingIP/fip-9".into()),
            ..AllocateInput::default()
        },
        &scope,
    )
    .unwrap()
    .run(&*store);
    assert_eq!(not_found(zone.result), "no public pool in zone `zone-a`");
    assert_eq!(files(dir.path()), before, "a refusal wrote");
    // Inside, it claims.
    let own = AllocateRequest::new(
        &allocate("vpc-dev", "acme/dev", "VirtualMachine/x/0"),
        &scope,
    )
    .unwrap()
    .run(&*store);
    assert!(own.result.is_ok(), "{:?}", own.result);
    assert_ne!(files(dir.path()), before);
    // Without `claim`, inside the scope: forbidden, nothing written.
    let read_only = dev(&[Verb::Read]);
    let before = files(dir.path());
    let forbidden = AllocateRequest::new(
        &allocate("vpc-dev", "acme/dev", "VirtualMachine/y/0"),
        &read_only,
    )
    .unwrap()
    .run(&*store);
    assert!(
        matches!(forbidden.result, Err(Error::Forbidden { .. })),
        "{:?}",
        forbidden.result
    );
    assert_eq!(files(dir.path()), before);
}

#[test]
fn a_token_releases_nothing_outside_its_namespace_by_address_or_by_selectors() {
    let (dir, store) = populated();
    let scope = dev(&[Verb::Read, Verb::Claim]);
    let before = files(dir.path());
    let by_address = ReleaseRequest::new(
        &ReleaseInput {
            pool: Some("vpc-main".into()),
            address: Some("10.42.0.9".into()),
            namespace: Some("acme/prod".into()),
            force: true,
            ..ReleaseInput::default()
        },
        &scope,
    )
    .unwrap()
    .run(&*store);
    assert_eq!(
        not_found(by_address.result),
        "pool `vpc-main` not found (in namespace `acme/prod`)"
    );
    // web-02/0 holds 10.42.0.9 in acme/prod only: across "every namespace" it is not seen.
    let select = SelectInput {
        owner: Some("VirtualMachine/web-02/0".into()),
        ..SelectInput::default()
    };
    let everywhere = ReleaseRequest::new(
        &ReleaseInput {
            select: select.clone(),
            ..ReleaseInput::default()
        },
        &scope,
    )
    .unwrap()
    .run(&*store);
    assert_eq!(
        not_found(everywhere.result),
        "no allocation matches the selectors; nothing released"
    );
    let named = ReleaseRequest::new(
        &ReleaseInput {
            select,
            namespace: Some("acme/prod".into()),
            ..ReleaseInput::default()
        },
        &scope,
    )
    .unwrap()
    .run(&*store);
    assert_eq!(
        not_found(named.result),
        "namespace `acme/prod` not found: it holds no pool and no allocation"
    );
    assert_eq!(files(dir.path()), before, "a refusal wrote");
    // The same selectors with the whole scope release it.
    let all = ReleaseRequest::new(
        &ReleaseInput {
            select: SelectInput {
                owner: Some("VirtualMachine/web-02/0".into()),
                ..SelectInput::default()
            },
            ..ReleaseInput::default()
        },
        &Scope::everything(),
    )
    .unwrap()
    .run(&*store);
    assert_eq!(all.result.unwrap().addresses.len(), 1);
}

#[test]
fn listings_cover_the_scope_only_and_a_namespace_outside_is_missing() {
    let (_dir, store) = populated();
    let scope = dev(&[Verb::Read]);
    let seen = crate::engine::scopes::scopes(&*store, &scope, Verb::Read, None).unwrap();
    assert_eq!(seen, vec![Some(ns("acme/dev"))]);
    let all =
        crate::engine::scopes::scopes(&*store, &Scope::everything(), Verb::Read, None).unwrap();
    assert!(all.len() > seen.len(), "{all:?}");
    let prod = crate::engine::scopes::scopes(&*store, &scope, Verb::Read, Some(ns("acme/prod")));
    assert_eq!(
        not_found(prod),
        "namespace `acme/prod` not found: it holds no pool and no allocation"
    );
    // Allocations of "every namespace": the scope's.
    let named = crate::engine::scopes::named_scopes(&*store, &scope, Verb::Read, None).unwrap();
    let mut warnings = crate::engine::warning::Warnings::default();
    let query = crate::engine::list::Query::default();
    let found =
        crate::engine::list::collect(&*store, named.as_deref(), &query, &mut warnings).unwrap();
    assert!(!found.is_empty());
    assert!(
        found
            .iter()
            .all(|m| m.metadata.namespace == Some(ns("acme/dev"))),
        "{found:?}"
    );
    let pools = crate::engine::pool::list(&*store, &seen, &mut warnings).unwrap();
    let names: Vec<String> = pools.iter().map(|(m, _)| m.metadata.name.clone()).collect();
    assert_eq!(names, ["vpc-dev"]);
    let vpcs = crate::engine::vpc::list(&*store, &seen, &mut warnings).unwrap();
    assert!(vpcs.iter().all(|v| v.metadata.namespace == ns("acme/dev")));
    let every = crate::engine::vpc::list(&*store, &all, &mut warnings).unwrap();
    assert!(
        every
            .iter()
            .any(|v| v.metadata.namespace == ns("acme/prod"))
    );
    let prod_pool = PoolRef {
        namespace: Some(ns("acme/prod")),
        name: PoolName::new("vpc-main").unwrap(),
    };
    let shown = crate::engine::pool::show(&*store, &scope, &prod_pool);
    assert_eq!(
        not_found(shown),
        "pool `vpc-main` not found (in namespace `acme/prod`)"
    );
    // A pool nobody has in its own namespace: the same words; the hint the whole scope gets
    // names the namespace that has one, a token's caller gets none.
    let dev_main = PoolRef {
        namespace: Some(ns("acme/dev")),
        name: PoolName::new("vpc-main").unwrap(),
    };
    let everything = crate::engine::pool::show(&*store, &Scope::everything(), &dev_main);
    assert!(
        matches!(&everything, Err(Error::NotFound { hint: Some(h), .. }) if h.contains("acme/prod")),
        "{everything:?}"
    );
    let shown = crate::engine::pool::show(&*store, &scope, &dev_main);
    assert_eq!(
        not_found(shown),
        "pool `vpc-main` not found (in namespace `acme/dev`)"
    );
    // Without `read`: refused even for "every namespace".
    let claim_only = dev(&[Verb::Claim]);
    let refused = crate::engine::scopes::scopes(&*store, &claim_only, Verb::Read, None);
    assert!(
        matches!(refused, Err(Error::Forbidden { .. })),
        "{refused:?}"
    );
}

#[test]
fn vpcs_need_admin_in_their_namespace_and_outside_are_missing() {
    let (dir, store) = populated();
    let before = files(dir.path());
    let admin = dev(&[Verb::Read, Verb::Claim, Verb::Admin]);
    let main_pools = ["vpc-main", "vpc-main-v6"].map(|n| PoolRef {
        namespace: Some(ns("acme/prod")),
        name: PoolName::new(n).unwrap(),
    });
    let stop = AtomicBool::new(false);
    let mut warnings = crate::engine::warning::Warnings::default();
    let deleted = crate::engine::vpc::delete(
        &*store,
        &admin,
        "main",
        &main_pools,
        false,
        &stop,
        &mut warnings,
    );
    assert_eq!(
        not_found(deleted),
        "VPC `main` not found in namespace `acme/prod` (no pool `vpc-main` or `vpc-main-v6` owned by a VPC)"
    );
    let got = crate::engine::vpc::get(
        &*store,
        &admin,
        &ns("acme/prod"),
        &main_pools,
        "main",
        &mut warnings,
    );
    assert!(matches!(got, Err(Error::NotFound { .. })));
    let create = crate::engine::vpc::CreateRequest {
        name: "other".into(),
        namespace: ns("acme/prod"),
        pools: vec![(
            PoolRef {
                namespace: Some(ns("acme/prod")),
                name: PoolName::new("vpc-other").unwrap(),
            },
            crate::engine::vpc::Range::Cidr("10.77.0.0/16".parse().unwrap()),
        )],
        uid: None,
        mac_prefixes: Vec::new(),
        dry_run: false,
    };
    let created = crate::engine::vpc::create(&*store, &admin, &create);
    assert_eq!(
        not_found(created),
        "namespace `acme/prod` not found: it holds no pool and no allocation"
    );
    assert_eq!(files(dir.path()), before, "a refusal wrote");
}

#[test]
fn subnets_need_admin_in_their_namespace_and_outside_are_missing() {
    let (dir, store) = populated();
    let before = files(dir.path());
    let admin = dev(&[Verb::Read, Verb::Claim, Verb::Admin]);
    let main = PoolRef {
        namespace: Some(ns("acme/prod")),
        name: PoolName::new("vpc-main").unwrap(),
    };
    let carve = crate::engine::subnet::carve(
        &*store,
        &admin,
        &SubnetName::new("s1").unwrap(),
        &main,
        24,
        false,
    );
    assert_eq!(
        not_found(carve),
        "pool `vpc-main` not found (in namespace `acme/prod`)"
    );
    let sub = crate::engine::subnet::delete(
        &*store,
        &admin,
        Some(&ns("acme/prod")),
        &SubnetName::new("s1").unwrap(),
        false,
    );
    assert_eq!(
        not_found(sub),
        "subnet `s1` not found (in namespace `acme/prod`)"
    );
    // In its own namespace, without `admin`: forbidden.
    let claim = dev(&[Verb::Read, Verb::Claim]);
    let dev_pool = PoolRef {
        namespace: Some(ns("acme/dev")),
        name: PoolName::new("vpc-dev").unwrap(),
    };
    let carve = crate::engine::subnet::carve(
        &*store,
        &claim,
        &SubnetName::new("s1").unwrap(),
        &dev_pool,
        28,
        false,
    );
    assert!(matches!(carve, Err(Error::Forbidden { .. })), "{carve:?}");
    assert_eq!(files(dir.path()), before, "a refusal wrote");
    // With it, the carve is made.
    crate::engine::subnet::carve(
        &*store,
        &admin,
        &SubnetName::new("s1").unwrap(),
        &dev_pool,
        28,
        false,
    )
    .unwrap();
    assert_ne!(files(dir.path()), before);
}
