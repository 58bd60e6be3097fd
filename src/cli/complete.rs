//! Dynamic shell completion: pool, namespace and subnet names read from the state
//! directory as the user types (clap_complete's `CompleteEnv`). The directory is the one
//! `IPAMCTL_STATE_DIR` names, else the nearest parent of the current directory holding
//! `.ipamctl`; a completer that cannot read it offers nothing rather than failing.

use std::collections::BTreeSet;
use std::ffi::OsStr;
use std::path::PathBuf;

use clap_complete::CompletionCandidate;

use crate::model::PoolRef;
use crate::model::{OwnerFilter, OwnerKind, PoolName};
use crate::store::fs::FsStore;
use crate::store::{ObjectKind, Objects, Queries};

/// The state directory a completion reads, if there is one.
fn store() -> Option<FsStore> {
    let dir = std::env::var_os("IPAMCTL_STATE_DIR").map(PathBuf::from);
    FsStore::discover(dir.as_deref()).ok()
}

/// The candidates among `names` that start with what was typed.
fn matching(current: &OsStr, names: BTreeSet<String>) -> Vec<CompletionCandidate> {
    let typed = current.to_string_lossy();
    names
        .into_iter()
        .filter(|n| n.starts_with(typed.as_ref()))
        .map(CompletionCandidate::new)
        .collect()
}

/// The pools of every scope, as one sorted list of names.
fn pools_in(store: &FsStore) -> Vec<(Option<crate::model::Namespace>, PoolName)> {
    let mut all = Vec::new();
    for ns in store.scopes().unwrap_or_default() {
        for name in store
            .list(ObjectKind::Pool, ns.as_ref())
            .unwrap_or_default()
        {
            if let Ok(name) = PoolName::new(&name) {
                all.push((ns.clone(), name));
            }
        }
    }
    all
}

/// Pool names, of every namespace (the line's `-n` is not known to a completer).
pub fn pools(current: &OsStr) -> Vec<CompletionCandidate> {
    let Some(store) = store() else {
        return Vec::new();
    };
    let names = pools_in(&store)
        .into_iter()
        .map(|(_, name)| name.to_string())
        .collect();
    matching(current, names)
}

/// VPC names, of every namespace: the VPCs that own a pool `vpc-NAME` or `vpc-NAME-v6`.
pub fn vpcs(current: &OsStr) -> Vec<CompletionCandidate> {
    let Some(store) = store() else {
        return Vec::new();
    };
    let names = pools_in(&store)
        .into_iter()
        .filter(|(_, name)| name.as_str().starts_with("vpc-"))
        .filter_map(|(namespace, name)| {
            let pool = PoolRef { namespace, name };
            let manifest = crate::store::read::load_pool(&store, &pool).ok()?;
            crate::model::vpc::owning_vpc(&pool.name, &manifest).map(str::to_owned)
        })
        .collect();
    matching(current, names)
}

/// Namespace names.
pub fn namespaces(current: &OsStr) -> Vec<CompletionCandidate> {
    let Some(store) = store() else {
        return Vec::new();
    };
    let names = store
        .scopes()
        .unwrap_or_default()
        .into_iter()
        .flatten()
        .map(|ns| ns.to_string())
        .collect();
    matching(current, names)
}

/// Subnets: the pools' prefixes and the subnets `Node` owners are named after.
pub fn subnets(current: &OsStr) -> Vec<CompletionCandidate> {
    let Some(store) = store() else {
        return Vec::new();
    };
    let mut names = BTreeSet::new();
    let nodes = OwnerFilter::default().with_kind(OwnerKind::Node).ok();
    for ns in store.scopes().unwrap_or_default() {
        for name in store
            .list(ObjectKind::Pool, ns.as_ref())
            .unwrap_or_default()
        {
            let pool = crate::model::PoolRef {
                namespace: ns.clone(),
                name: match PoolName::new(&name) {
                    Ok(n) => n,
                    Err(_) => continue,
                },
            };
            if let Ok(m) = crate::store::read::load_pool(&store, &pool) {
                names.insert(m.spec.cidr.to_string());
            }
        }
        // The owner index answers a kind filter without reading every file.
        let Some(filter) = &nodes else { continue };
        for found in store
            .find_allocations(ns.as_ref(), None, filter)
            .unwrap_or_default()
        {
            if let Ok(m) = found.parsed
                && m.spec.owner.name().contains('/')
            {
                names.insert(m.spec.owner.name().to_owned());
            }
        }
    }
    matching(current, names)
}

/// Stored subnet names, of every scope.
pub fn subnet_names(current: &OsStr) -> Vec<CompletionCandidate> {
    let Some(store) = store() else {
        return Vec::new();
    };
    let names = store
        .scopes()
        .unwrap_or_default()
        .iter()
        .flat_map(|ns| {
            store
                .list(ObjectKind::Subnet, ns.as_ref())
                .unwrap_or_default()
        })
        .collect();
    matching(current, names)
}
