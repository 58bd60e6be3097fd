//! Typed reads of stored objects: a pool manifest, an allocation, the addresses a pool's
//! allocations hold; what every use case needs before it decides anything.

use std::net::IpAddr;

use crate::error::{Error, Result};
use crate::model::subnet::SubnetManifest;
use crate::model::suggest::nearest;
use crate::model::{Namespace, PoolManifest, PoolRef, pool_addresses};
use crate::store::{ObjectKind, Store};
use crate::yaml;

pub use crate::store::Parsed;

/// Reads and parses one allocation; `None` if it does not exist. A file that is no manifest
/// (too large, a symlink, not a regular file) reads like one that does not parse.
pub fn read_allocation(
    store: &dyn Store,
    ns: Option<&Namespace>,
    name: &str,
) -> Result<Option<Parsed>> {
    let bytes = match store.get(ObjectKind::Allocation, ns, name) {
        Ok(Some(bytes)) => bytes,
        Ok(None) => return Ok(None),
        // The file itself is too large, a symlink, not a regular file: as broken as a file
        // that does not parse, so its address stays taken and readers warn rather than fail.
        // (A symlinked directory on the way is the whole scope's problem: that stays an error.)
        Err(Error::Corrupt { path, message })
            if path.ends_with(store.locate(ObjectKind::Allocation, ns, name)) =>
        {
            return Ok(Some(Err(message)));
        }
        Err(e) => return Err(e),
    };
    Ok(Some(
        std::str::from_utf8(&bytes)
            .map_err(|_| "is not UTF-8 text".to_owned())
            .and_then(yaml::decode_allocation),
    ))
}

/// Reads a subnet; `None` when it does not exist, exit 2 when it does not parse.
pub fn read_subnet(
    store: &dyn Store,
    ns: Option<&Namespace>,
    name: &str,
) -> Result<Option<SubnetManifest>> {
    let Some(bytes) = store.get(ObjectKind::Subnet, ns, name)? else {
        return Ok(None);
    };
    let at = || store.locate(ObjectKind::Subnet, ns, name);
    let text =
        std::str::from_utf8(&bytes).map_err(|_| Error::invalid(at(), "is not UTF-8 text"))?;
    yaml::decode_subnet(text)
        .map(Some)
        .map_err(|e| Error::invalid(at(), e))
}

/// Reads a pool manifest; `NotFound` (with a hint naming other scopes that have a pool of
/// that name) when it does not exist.
pub fn load_pool(store: &dyn Store, pool: &PoolRef) -> Result<PoolManifest> {
    let ns = pool.namespace.as_ref();
    let Some(bytes) = store.get(ObjectKind::Pool, ns, pool.name.as_str())? else {
        return Err(pool_not_found(store, pool));
    };
    let location = store.locate(ObjectKind::Pool, ns, pool.name.as_str());
    let text =
        std::str::from_utf8(&bytes).map_err(|_| Error::invalid(&location, "is not UTF-8 text"))?;
    let manifest = decoded_pool(text).map_err(|e| Error::invalid(&location, e))?;
    // The file's name is the pool's identity (its allocations, locks and index go by it): a
    // manifest that says another name (a copy under a new name) is not used (issue 31).
    if manifest.metadata.name != pool.name.as_str() {
        return Err(Error::invalid(
            location,
            format!(
                "metadata.name is `{}`, but the file is named `{}`: the pool is not used until they agree; rename the file or fix metadata.name (`ipamctl check` lists every such pool)",
                manifest.metadata.name, pool.name
            ),
        ));
    }
    Ok(manifest)
}

/// How many decoded pool manifests [`decoded_pool`] keeps.
const DECODED_POOLS: usize = 64;

/// `text` decoded as [`yaml::decode_pool`] decodes it, kept by its bytes for the next read.
/// A server decodes the same pool's manifest for each claim (the YAML parse was 12 % of its
/// CPU under load, `perf`); the same bytes decode to the same manifest whoever reads them,
/// so a manifest kept under its bytes cannot be stale. Only a manifest that decoded is kept,
/// at most [`DECODED_POOLS`] (all dropped once full: a process reads few pools).
fn decoded_pool(text: &str) -> std::result::Result<PoolManifest, String> {
    use std::collections::HashMap;
    use std::sync::{Mutex, PoisonError};
    static KEPT: Mutex<Option<HashMap<Box<str>, PoolManifest>>> = Mutex::new(None);
    let lock = || KEPT.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(kept) = lock().as_ref().and_then(|k| k.get(text)) {
        return Ok(kept.clone());
    }
    let manifest = yaml::decode_pool(text)?;
    let mut kept = lock();
    let kept = kept.get_or_insert_with(HashMap::new);
    if kept.len() >= DECODED_POOLS {
        kept.clear();
    }
    kept.insert(text.into(), manifest.clone());
    Ok(manifest)
}

/// The pool's manifest and the addresses its allocations hold, from one directory listing
/// (no allocation file is read). Takes no lock: for explaining a dry run, not for claiming.
pub fn pool_state(store: &dyn Store, pool: &PoolRef) -> Result<(PoolManifest, Vec<IpAddr>)> {
    let spec = load_pool(store, pool)?;
    let names = store.list(ObjectKind::Allocation, pool.namespace.as_ref())?;
    let taken = pool_addresses(&names, &pool.name).collect();
    Ok((spec, taken))
}

/// The `NotFound` error for `pool`, with a hint if the name exists in another scope.
pub fn pool_not_found(store: &dyn Store, pool: &PoolRef) -> Error {
    let elsewhere: Vec<String> = store
        .scopes()
        .unwrap_or_default()
        .into_iter()
        .filter(|scope| *scope != pool.namespace)
        .filter(|scope| {
            store
                .get(ObjectKind::Pool, scope.as_ref(), pool.name.as_str())
                .is_ok_and(|o| o.is_some())
        })
        .map(|scope| match scope {
            Some(ns) => format!("in namespace `{ns}` (pass `-n {ns}`)"),
            None => "cluster-scoped (omit `-n`)".to_owned(),
        })
        .collect();
    let mut hints = Vec::new();
    let here = store
        .list(ObjectKind::Pool, pool.namespace.as_ref())
        .unwrap_or_default();
    let twin = format!("{}-v6", pool.name);
    if here.contains(&twin) {
        hints.push(format!(
            "did you mean `{twin}`? (the IPv6 pool of the same name: this one has no IPv4 range)"
        ));
    } else if let Some(near) = nearest(pool.name.as_str(), here.iter().map(String::as_str)) {
        hints.push(format!("did you mean `{near}`?"));
    }
    if !elsewhere.is_empty() {
        hints.push(format!(
            "a pool `{}` exists {}",
            pool.name,
            elsewhere.join(", ")
        ));
    }
    Error::NotFound {
        message: pool_missing(pool),
        hint: (!hints.is_empty()).then(|| hints.join("; ")),
    }
}

/// What [`pool_not_found`] says, without its hints: also what a caller outside the pool's
/// scope is told (`crate::engine::scope`), so the answer does not say whether it exists.
pub fn pool_missing(pool: &PoolRef) -> String {
    let scope = match &pool.namespace {
        Some(ns) => format!("in namespace `{ns}`"),
        None => "cluster-scoped".to_owned(),
    };
    format!("pool `{}` not found ({scope})", pool.name)
}

#[cfg(test)]
mod tests {
    use super::decoded_pool;

    const POOL: &str = "apiVersion: pivirt.hu/v1\nkind: IPAMPool\nmetadata:\n  name: p\nspec:\n  cidr: 10.0.0.0/24\n  kind: public\n";

    #[test]
    fn a_kept_pool_is_the_one_its_bytes_decode_to_and_never_another() {
        let first = decoded_pool(POOL).unwrap();
        assert_eq!(
            decoded_pool(POOL).unwrap(),
            first,
            "asked again: the kept one"
        );
        // Other bytes are decoded, not answered from what was kept.
        let wider = POOL.replace("/24", "/23");
        let changed = decoded_pool(&wider).unwrap();
        assert_ne!(changed, first);
        assert_eq!(changed, crate::yaml::decode_pool(&wider).unwrap());
        // A manifest that does not decode fails each time, and keeps nothing.
        let broken = POOL.replace("10.0.0.0/24", "not-a-cidr");
        assert!(decoded_pool(&broken).is_err());
        assert!(decoded_pool(&broken).is_err());
        // More pools than are kept: each is still its own.
        for i in 0..200 {
            let text = POOL.replace("name: p", &format!("name: p{i}"));
            assert_eq!(decoded_pool(&text).unwrap().metadata.name, format!("p{i}"));
        }
        assert_eq!(decoded_pool(POOL).unwrap(), first);
    }
}
